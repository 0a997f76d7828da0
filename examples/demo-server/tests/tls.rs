//! HTTPS: HTTP/2 and HTTP/1.1 over TLS with an rcgen certificate.

mod common;

use std::sync::Arc;

use common::{Server, TempDir};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

fn start_tls() -> (Server, CertificateDer<'static>) {
    let dir = TempDir::new("tls");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    std::fs::write(dir.path().join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.path().join("key.pem"), cert.signing_key.serialize_pem()).unwrap();
    let server = Server::start_in(
        dir,
        r#"
[server]
http = "127.0.0.1:0"
https = "127.0.0.1:0"
workers = 2
[tls]
cert = "cert.pem"
key = "key.pem"
"#,
    );
    (server, cert.cert.der().clone())
}

async fn connect(server: &Server, ca: CertificateDer<'static>, alpn: &[u8]) -> tokio_rustls::client::TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    let tcp = TcpStream::connect(server.https.unwrap()).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let tls = TlsConnector::from(Arc::new(config)).connect(name, tcp).await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(alpn));
    tls
}

#[tokio::test]
async fn http2_over_tls() {
    let (server, ca) = start_tls();
    let tls = connect(&server, ca, b"h2").await;
    let (mut sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls)).await.unwrap();
    tokio::spawn(conn);
    for _ in 0..3 {
        let req = http::Request::get("https://localhost/health").body(Empty::<bytes::Bytes>::new()).unwrap();
        let resp = sender.send_request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.version(), http::Version::HTTP_2);
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "ok");
    }
    let req = http::Request::get("https://localhost/metrics").body(Empty::<bytes::Bytes>::new()).unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert!(text.contains("demo_requests_total{class=\"2xx\"} 3\n"), "{text}");
}

#[tokio::test]
async fn http1_over_tls() {
    let (server, ca) = start_tls();
    let tls = connect(&server, ca, b"http/1.1").await;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.unwrap();
    tokio::spawn(conn);
    let req = http::Request::get("/health")
        .header("host", "localhost")
        .body(Empty::<bytes::Bytes>::new())
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.version(), http::Version::HTTP_11);
    assert_eq!(resp.into_body().collect().await.unwrap().to_bytes(), "ok");
}

#[test]
fn bad_key_is_a_config_error() {
    let dir = TempDir::new("badtls");
    std::fs::write(dir.path().join("cert.pem"), "not a pem").unwrap();
    std::fs::write(dir.path().join("key.pem"), "not a pem").unwrap();
    let path = dir.path().join("demo.toml");
    std::fs::write(&path, "[server]\nhttps = \"127.0.0.1:0\"\n[tls]\ncert = \"cert.pem\"\nkey = \"key.pem\"\n").unwrap();
    let out = std::process::Command::new(common::BIN).arg("--config").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("tls"), "{stderr}");
}
