//! Test helpers: run the real binary, a tiny upstream, and a raw HTTP/1.1 client.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_demo-server");

/// A scratch directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "demo-server-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A port nothing listens on (bound, read, released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The running server; killed on drop if a test did not stop it.
pub struct Server {
    pub child: Child,
    pub http: Option<SocketAddr>,
    pub https: Option<SocketAddr>,
    pub dir: TempDir,
}

impl Server {
    /// Writes `config` (TOML) into a fresh directory (which also holds a
    /// `docroot/`) and starts the binary on it, waiting for the banner.
    pub fn start_in(dir: TempDir, config: &str) -> Server {
        let path = dir.path().join("demo.toml");
        std::fs::write(&path, config).unwrap();
        let mut child = Command::new(BIN)
            .arg("--config")
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        // Keep draining stdout so the child never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let line = line.trim();
        assert!(line.starts_with("listening "), "unexpected banner {line:?}");
        let field = |name: &str| {
            line.split(' ')
                .find_map(|kv| kv.strip_prefix(name))
                .filter(|v| *v != "-")
                .map(|v| v.parse::<SocketAddr>().unwrap())
        };
        let (http, https) = (field("http="), field("https="));
        Server { child, http, https, dir }
    }

    pub fn start(config: &str) -> Server {
        Self::start_in(TempDir::new("srv"), config)
    }

    pub fn addr(&self) -> SocketAddr {
        self.http.expect("no http listener")
    }

    pub fn get(&self, path: &str) -> HttpResponse {
        request(self.addr(), "GET", path, &[], b"")
    }

    pub fn sigterm(&self) {
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        assert_eq!(rc, 0);
    }

    /// Waits up to `limit` for the process to exit.
    pub fn wait_timeout(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`).
pub fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> HttpResponse {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" || method == "PUT" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    parse_response(&raw, method == "HEAD")
}

fn parse_response(raw: &[u8], head_only: bool) -> HttpResponse {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("no header end");
    let head = std::str::from_utf8(&raw[..split]).unwrap();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let rest = &raw[split + 4..];
    let chunked = headers.iter().any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if head_only {
        Vec::new()
    } else if chunked {
        decode_chunked(rest)
    } else {
        rest.to_vec()
    };
    HttpResponse { status, headers, body }
}

fn decode_chunked(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n").unwrap();
        let size_str = std::str::from_utf8(&data[..line_end]).unwrap();
        let size = usize::from_str_radix(size_str.split(';').next().unwrap().trim(), 16).unwrap();
        data = &data[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

/// A minimal HTTP/1.1 upstream on its own threads. Routes:
/// `/cacheable`, `/nostore`, `/private` (counter in the body), `/echo`
/// (method, target, x-forwarded-for and body), `/error` (500),
/// `/slow` (answers after 3 s), `/big` (`big_len` bytes).
pub struct Upstream {
    pub addr: SocketAddr,
    pub hits: Arc<AtomicU64>,
}

impl Upstream {
    pub fn start() -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&hits);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let counter = Arc::clone(&counter);
                std::thread::spawn(move || {
                    let _ = serve_upstream(stream, &counter);
                });
            }
        });
        Upstream { addr, hits }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

fn serve_upstream(stream: TcpStream, counter: &AtomicU64) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line)? == 0 {
            return Ok(());
        }
        let mut parts = request_line.split_whitespace();
        let method = parts.next().unwrap_or("").to_owned();
        let target = parts.next().unwrap_or("").to_owned();
        let mut content_length = 0usize;
        let mut forwarded_for = String::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line)?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                match k.trim().to_ascii_lowercase().as_str() {
                    "content-length" => content_length = v.trim().parse().unwrap_or(0),
                    "x-forwarded-for" => forwarded_for = v.trim().to_owned(),
                    _ => {}
                }
            }
        }
        let mut body = vec![0; content_length];
        reader.read_exact(&mut body)?;
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        let path = target.split('?').next().unwrap_or("");
        let (status, extra, payload): (&str, &str, Vec<u8>) = match path {
            "/cacheable" => ("200 OK", "Cache-Control: public, max-age=60\r\n", format!("n={n}").into_bytes()),
            "/nostore" => ("200 OK", "Cache-Control: no-store\r\n", format!("n={n}").into_bytes()),
            "/private" => ("200 OK", "Cache-Control: private\r\n", format!("n={n}").into_bytes()),
            "/echo" => {
                let mut p = format!("{method} {target} xff={forwarded_for}\n").into_bytes();
                p.extend_from_slice(&body);
                ("200 OK", "", p)
            }
            "/error" => ("500 Internal Server Error", "", b"upstream broke".to_vec()),
            "/slow" => {
                std::thread::sleep(Duration::from_secs(3));
                ("200 OK", "", b"late".to_vec())
            }
            "/big" => ("200 OK", "", vec![b'x'; 64 * 1024]),
            _ => ("404 Not Found", "", b"no such upstream path".to_vec()),
        };
        let head = format!(
            "HTTP/1.1 {status}\r\n{extra}Content-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
            payload.len()
        );
        writer.write_all(head.as_bytes())?;
        writer.write_all(&payload)?;
        writer.flush()?;
    }
}
