//! Access log: one line per request, written by a dedicated thread so the
//! async workers never block on file I/O.
//!
//! Line format (common-log-ish):
//! `REMOTE - - [DATE] "METHOD TARGET VERSION" STATUS BYTES MICROS`

use std::fs::OpenOptions;
use std::io::{self, BufWriter, Write};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

enum Message {
    Line(String),
    Flush(mpsc::Sender<()>),
}

pub struct AccessLog {
    tx: mpsc::Sender<Message>,
}

/// One finished request, as the log sees it.
pub struct Entry<'a> {
    pub remote: std::net::SocketAddr,
    pub method: &'a str,
    pub target: &'a str,
    pub version: http::Version,
    pub status: u16,
    pub bytes: u64,
    pub micros: u128,
}

impl AccessLog {
    /// Opens `path` for appending (`-` means stdout) and starts the writer thread.
    pub fn open(path: &str) -> io::Result<AccessLog> {
        let out: Box<dyn Write + Send> = if path == "-" {
            Box::new(io::stdout())
        } else {
            Box::new(OpenOptions::new().create(true).append(true).open(path)?)
        };
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("access-log".into())
            .spawn(move || writer(rx, BufWriter::with_capacity(64 * 1024, out)))?;
        Ok(AccessLog { tx })
    }

    pub fn log(&self, entry: &Entry<'_>) {
        let _ = self.tx.send(Message::Line(format_line(entry, SystemTime::now())));
    }

    /// Waits (briefly) until every line logged so far is written out.
    pub fn flush(&self) {
        let (ack_tx, ack_rx) = mpsc::channel();
        if self.tx.send(Message::Flush(ack_tx)).is_ok() {
            let _ = ack_rx.recv_timeout(Duration::from_secs(1));
        }
    }
}

fn writer(rx: mpsc::Receiver<Message>, mut out: BufWriter<Box<dyn Write + Send>>) {
    let handle = |msg: Message, out: &mut BufWriter<Box<dyn Write + Send>>| match msg {
        Message::Line(line) => {
            let _ = out.write_all(line.as_bytes());
        }
        Message::Flush(ack) => {
            let _ = out.flush();
            let _ = ack.send(());
        }
    };
    while let Ok(msg) = rx.recv() {
        handle(msg, &mut out);
        // Drain whatever queued up meanwhile, then flush once.
        while let Ok(msg) = rx.try_recv() {
            handle(msg, &mut out);
        }
        let _ = out.flush();
    }
    let _ = out.flush();
}

pub fn format_line(e: &Entry<'_>, now: SystemTime) -> String {
    format!(
        "{} - - [{}] \"{} {} {:?}\" {} {} {}\n",
        e.remote,
        httpdate::fmt_http_date(now),
        e.method,
        e.target,
        e.version,
        e.status,
        e.bytes,
        e.micros
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_format() {
        let e = Entry {
            remote: "127.0.0.1:5000".parse().unwrap(),
            method: "GET",
            target: "/a?b=1",
            version: http::Version::HTTP_2,
            status: 200,
            bytes: 12,
            micros: 345,
        };
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_887_151);
        assert_eq!(
            format_line(&e, now),
            "127.0.0.1:5000 - - [Tue, 15 Nov 1994 08:12:31 GMT] \"GET /a?b=1 HTTP/2.0\" 200 12 345\n"
        );
    }

    #[test]
    fn writes_to_file() {
        let dir = std::env::temp_dir().join(format!("demo-server-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("access.log");
        let log = AccessLog::open(path.to_str().unwrap()).unwrap();
        let e = Entry {
            remote: "[::1]:1".parse().unwrap(),
            method: "POST",
            target: "/x",
            version: http::Version::HTTP_11,
            status: 403,
            bytes: 0,
            micros: 1,
        };
        log.log(&e);
        log.log(&e);
        log.flush();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert!(text.contains("\"POST /x HTTP/1.1\" 403 0 1"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
