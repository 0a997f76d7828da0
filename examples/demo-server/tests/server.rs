//! End-to-end tests against the real binary.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{free_port, request, Server, TempDir, Upstream, BIN};

fn config(upstream: &str, extra: &str) -> String {
    format!(
        r#"
[server]
http = "127.0.0.1:0"
workers = 1
[access_log]
enabled = true
path = "access.log"
[proxy]
upstream = "{upstream}"
timeout_ms = 1000
[files]
root = "docroot"
[waf]
max_body_bytes = 4096
{extra}
"#
    )
}

fn start(upstream: &str) -> Server {
    start_with(upstream, "")
}

fn start_with(upstream: &str, extra: &str) -> Server {
    let dir = TempDir::new("e2e");
    let docroot = dir.path().join("docroot");
    std::fs::create_dir_all(docroot.join("sub")).unwrap();
    std::fs::write(docroot.join("hello.txt"), "hello, world\n").unwrap();
    std::fs::write(docroot.join("sub/index.html"), "<h1>index</h1>").unwrap();
    Server::start_in(dir, &config(upstream, extra))
}

#[test]
fn health_and_metrics() {
    let up = Upstream::start();
    let server = start(&up.url());
    let r = server.get("/health");
    assert_eq!((r.status, r.text().as_str()), (200, "ok"));
    let r = server.get("/metrics");
    assert_eq!(r.status, 200);
    let text = r.text();
    for series in [
        "demo_requests_total{class=\"2xx\"} 1",
        "demo_cache_hits_total 0",
        "demo_cache_misses_total 0",
        "demo_waf_blocked_total 0",
        "demo_upstream_errors_total 0",
        "demo_bytes_sent_total 2",
        "demo_connections_total 2",
    ] {
        assert!(text.contains(series), "missing {series:?} in\n{text}");
    }
    let r = request(server.addr(), "POST", "/health", &[], b"");
    assert_eq!(r.status, 405);
}

#[test]
fn proxied_get_is_cached() {
    let up = Upstream::start();
    let server = start(&up.url());
    let first = server.get("/cacheable?a=1");
    assert_eq!(first.status, 200);
    assert_eq!(first.header("x-cache"), Some("miss"));
    let second = server.get("/cacheable?a=1");
    assert_eq!(second.status, 200);
    assert_eq!(second.header("x-cache"), Some("hit"));
    assert_eq!(second.body, first.body);
    assert_eq!(second.header("cache-control"), Some("public, max-age=60"));
    // The query is part of the key.
    let other = server.get("/cacheable?a=2");
    assert_eq!(other.header("x-cache"), Some("miss"));
    assert_ne!(other.body, first.body);
    // no-store and private responses are never cached.
    for path in ["/nostore", "/private"] {
        let a = server.get(path);
        let b = server.get(path);
        assert_eq!(b.header("x-cache"), Some("miss"), "{path}");
        assert_ne!(a.body, b.body, "{path}");
    }
    // Upstream status codes pass through, and errors are not cached.
    let e = server.get("/error");
    assert_eq!((e.status, e.text().as_str()), (500, "upstream broke"));
    assert_eq!(server.get("/error").header("x-cache"), Some("miss"));
    assert_eq!(server.get("/nope").status, 404);
    let metrics = server.get("/metrics").text();
    assert!(metrics.contains("demo_cache_hits_total 1\n"), "{metrics}");
    assert!(metrics.contains("demo_requests_total{class=\"5xx\"} 2\n"), "{metrics}");
}

#[test]
fn responses_bigger_than_max_object_bytes_are_not_cached() {
    let up = Upstream::start();
    let server = start_with(&up.url(), "[cache]\nmax_object_bytes = 1000\n");
    for _ in 0..2 {
        let r = server.get("/big");
        assert_eq!((r.status, r.body.len()), (200, 64 * 1024));
        assert_eq!(r.header("x-cache"), Some("miss"));
    }
}

#[test]
fn proxy_forwards_method_path_and_body() {
    let up = Upstream::start();
    let server = start(&up.url());
    let r = request(server.addr(), "POST", "/echo?x=1", &[("Content-Type", "text/plain")], b"payload");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "POST /echo?x=1 xff=127.0.0.1\npayload");
    assert_eq!(r.header("x-cache"), None, "only GETs go through the cache");
    let r = request(server.addr(), "DELETE", "/echo", &[], b"");
    assert!(r.text().starts_with("DELETE /echo "), "{}", r.text());
}

#[test]
fn waf_blocks_query_and_body() {
    let up = Upstream::start();
    let server = start(&up.url());
    let r = server.get("/echo?q=%3CScript%3Ealert(1)");
    assert_eq!(r.status, 403);
    let r = server.get("/echo?id=1+UNION+SELECT+password");
    assert_eq!(r.status, 403);
    let r = request(server.addr(), "POST", "/echo", &[], b"name=x&file=../../etc/passwd");
    assert_eq!(r.status, 403);
    let r = request(server.addr(), "PUT", "/echo", &[], b"<script>evil()</script>");
    assert_eq!(r.status, 403);
    let r = request(server.addr(), "POST", "/echo", &[], b"harmless");
    assert_eq!(r.status, 200);
    let r = request(server.addr(), "POST", "/echo", &[], &vec![b'a'; 5000]);
    assert_eq!(r.status, 413);
    let before = up.hits.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(before, 1, "blocked requests never reach the upstream");
    let metrics = server.get("/metrics").text();
    assert!(metrics.contains("demo_waf_blocked_total 4\n"), "{metrics}");
}

#[test]
fn static_files() {
    let server = start(&format!("http://127.0.0.1:{}", free_port()));
    let r = server.get("/static/hello.txt");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "hello, world\n");
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    let etag = r.header("etag").unwrap().to_owned();
    let last_modified = r.header("last-modified").unwrap().to_owned();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "strong etag: {etag}");

    let r = request(server.addr(), "GET", "/static/hello.txt", &[("If-None-Match", &etag)], b"");
    assert_eq!((r.status, r.body.len()), (304, 0));
    let r = request(server.addr(), "GET", "/static/hello.txt", &[("If-Modified-Since", &last_modified)], b"");
    assert_eq!(r.status, 304);
    let r = request(server.addr(), "GET", "/static/hello.txt", &[("If-None-Match", "\"stale\"")], b"");
    assert_eq!(r.status, 200);

    let r = request(server.addr(), "GET", "/static/hello.txt", &[("Range", "bytes=0-4")], b"");
    assert_eq!(r.status, 206);
    assert_eq!(r.text(), "hello");
    assert_eq!(r.header("content-range"), Some("bytes 0-4/13"));
    let r = request(server.addr(), "GET", "/static/hello.txt", &[("Range", "bytes=-6")], b"");
    assert_eq!((r.status, r.text().as_str()), (206, "world\n"));
    let r = request(server.addr(), "GET", "/static/hello.txt", &[("Range", "bytes=7-")], b"");
    assert_eq!((r.status, r.text().as_str()), (206, "world\n"));
    let r = request(server.addr(), "GET", "/static/hello.txt", &[("Range", "bytes=100-")], b"");
    assert_eq!(r.status, 416);
    assert_eq!(r.header("content-range"), Some("bytes */13"));

    let r = request(server.addr(), "HEAD", "/static/hello.txt", &[], b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("13"));

    let r = server.get("/static/sub/");
    assert_eq!((r.status, r.text().as_str()), (200, "<h1>index</h1>"));
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));

    for bad in ["/static/missing.txt", "/static/../demo.toml", "/static/%2e%2e/demo.toml", "/static/sub/..%2f..%2fdemo.toml"] {
        let r = server.get(bad);
        assert!(r.status == 404 || r.status == 400, "{bad}: {}", r.status);
    }
    let r = request(server.addr(), "POST", "/static/hello.txt", &[], b"");
    assert_eq!(r.status, 405);
}

#[test]
fn large_static_file_streams() {
    let server = start(&format!("http://127.0.0.1:{}", free_port()));
    let big: Vec<u8> = (0..(10u32 << 20)).map(|i| (i % 251) as u8).collect();
    std::fs::write(server.dir.path().join("docroot/big.bin"), big).unwrap();
    let r = server.get("/static/big.bin");
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 10 << 20);
    assert!(r.body.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
    let r = request(server.addr(), "GET", "/static/big.bin", &[("Range", "bytes=5000000-5000009")], b"");
    assert_eq!(r.status, 206);
    let want: Vec<u8> = (5_000_000u32..5_000_010).map(|i| (i % 251) as u8).collect();
    assert_eq!(r.body, want);
}

#[test]
fn dead_upstream_is_502_and_slow_upstream_is_504() {
    let server = start(&format!("http://127.0.0.1:{}", free_port()));
    let r = server.get("/anything");
    assert_eq!(r.status, 502);
    let up = Upstream::start();
    let server = start_with(&up.url(), "");
    let started = Instant::now();
    let r = server.get("/slow");
    assert_eq!(r.status, 504);
    assert!(started.elapsed() < Duration::from_millis(2500));
    let metrics = server.get("/metrics").text();
    assert!(metrics.contains("demo_upstream_errors_total 1\n"), "{metrics}");
}

#[test]
fn access_log_has_one_line_per_request() {
    let up = Upstream::start();
    let mut server = start(&up.url());
    server.get("/health");
    server.get("/static/hello.txt");
    server.get("/cacheable");
    server.sigterm();
    assert!(server.wait_timeout(Duration::from_secs(5)).unwrap().success());
    let log = std::fs::read_to_string(server.dir.path().join("access.log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 3, "{log}");
    assert!(lines[0].starts_with("127.0.0.1:"), "{log}");
    assert!(lines[0].contains("\"GET /health HTTP/1.1\" 200 2 "), "{log}");
    assert!(lines[1].contains("\"GET /static/hello.txt HTTP/1.1\" 200 13 "), "{log}");
}

#[test]
fn sigterm_exits_zero_promptly() {
    let up = Upstream::start();
    let mut server = start(&up.url());
    assert_eq!(server.get("/health").status, 200);
    // An idle keep-alive connection must not hold up shutdown.
    let mut idle = TcpStream::connect(server.addr()).unwrap();
    idle.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut buf = [0u8; 256];
    let _ = idle.read(&mut buf).unwrap();
    let started = Instant::now();
    server.sigterm();
    let status = server.wait_timeout(Duration::from_secs(5)).expect("still running 5 s after SIGTERM");
    assert!(status.success(), "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
}

#[test]
fn sigint_exits_zero() {
    let mut server = start(&format!("http://127.0.0.1:{}", free_port()));
    let rc = unsafe { libc::kill(server.child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(rc, 0);
    assert!(server.wait_timeout(Duration::from_secs(5)).unwrap().success());
}

#[test]
fn bad_config_and_args_exit_2() {
    let dir = TempDir::new("bad");
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[server]\nhttp = \"127.0.0.1:0\"\nthreads = 3\n").unwrap();
    let out = Command::new(BIN).arg("--config").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("threads"), "{stderr}");

    for args in [&["--frobnicate"][..], &[][..], &["--config"][..], &["--config", "/nonexistent/x.toml"][..]] {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(String::from_utf8(out.stderr).unwrap().lines().count(), 1, "{args:?}");
    }
}

#[test]
fn build_info_and_version() {
    let out = Command::new(BIN).arg("--build-info").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let target = lines[0].strip_prefix("target=").unwrap();
    assert!(target.contains('-'), "{target}");
    let features: Vec<&str> = lines[1].strip_prefix("target_features=").unwrap().split(',').collect();
    let mut sorted = features.clone();
    sorted.sort();
    assert_eq!(features, sorted);
    if target.starts_with("x86_64") {
        assert!(features.contains(&"sse2"), "{features:?}");
    }

    let out = Command::new(BIN).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), format!("demo-server {}", env!("CARGO_PKG_VERSION")));
}
