//! Listeners, connection handling, routing and graceful shutdown.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::{Body as _, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio_rustls::TlsAcceptor;

use crate::access_log::{self, AccessLog};
use crate::body::{self, Body, Counted, Prefixed};
use crate::cache::{Cache, CachedResponse};
use crate::config::{self, Config};
use crate::files::Files;
use crate::metrics::Metrics;
use crate::proxy::{Proxy, ProxyError};
use crate::waf::Waf;

/// How long in-flight connections get after SIGTERM/SIGINT.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything a request handler needs, shared by all connections.
pub struct App {
    pub metrics: Metrics,
    cache: Option<Cache>,
    waf: Option<Waf>,
    proxy: Option<Proxy>,
    files: Option<Files>,
    access_log: Option<AccessLog>,
}

impl App {
    /// Builds the shared state. Must run inside a Tokio runtime context.
    pub fn new(config: &Config) -> Result<App, String> {
        let cache = config.cache.enabled.then(|| {
            Cache::new(
                config.cache.max_entries,
                config.cache.max_object_bytes,
                Duration::from_secs(config.cache.ttl_seconds),
            )
        });
        let waf = config.waf.enabled.then(|| Waf::new(&config.waf.patterns, config.waf.max_body_bytes));
        let proxy = match &config.proxy.upstream {
            Some(upstream) => Some(Proxy::new(
                config::parse_upstream(upstream)?,
                Duration::from_millis(config.proxy.timeout_ms),
            )),
            None => None,
        };
        let files = match &config.files.root {
            Some(root) => Some(Files::new(root).map_err(|e| format!("[files] root {}: {e}", root.display()))?),
            None => None,
        };
        let access_log = if config.access_log.enabled {
            let path = &config.access_log.path;
            Some(AccessLog::open(path).map_err(|e| format!("[access_log] path {path}: {e}"))?)
        } else {
            None
        };
        Ok(App { metrics: Metrics::default(), cache, waf, proxy, files, access_log })
    }

    /// Writes out any access-log lines still queued.
    pub fn flush_logs(&self) {
        if let Some(log) = &self.access_log {
            log.flush();
        }
    }

    /// Entry point for every request: routes it, then counts and logs it
    /// once the response body has been sent.
    async fn handle(self: Arc<Self>, req: Request<Incoming>, remote: SocketAddr, scheme: &'static str) -> Response<Body> {
        let start = Instant::now();
        let method = req.method().clone();
        let version = req.version();
        let target = self.access_log.is_some().then(|| {
            req.uri().path_and_query().map_or_else(|| req.uri().path().to_owned(), |pq| pq.as_str().to_owned())
        });

        let response = self.route(req, remote, scheme).await;
        let status = response.status();
        self.metrics.record_status(status);

        let app = Arc::clone(&self);
        response.map(move |inner| {
            body::boxed(Counted::new(inner, move |bytes| {
                app.metrics.bytes_sent.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
                if let (Some(log), Some(target)) = (&app.access_log, &target) {
                    log.log(&access_log::Entry {
                        remote,
                        method: method.as_str(),
                        target,
                        version,
                        status: status.as_u16(),
                        bytes,
                        micros: start.elapsed().as_micros(),
                    });
                }
            }))
        })
    }

    async fn route(&self, req: Request<Incoming>, remote: SocketAddr, scheme: &'static str) -> Response<Body> {
        let path = req.uri().path();
        match path {
            "/health" => match *req.method() {
                Method::GET | Method::HEAD => text(StatusCode::OK, "ok"),
                _ => method_not_allowed(),
            },
            "/metrics" => match *req.method() {
                Method::GET | Method::HEAD => {
                    let mut r = text(StatusCode::OK, self.metrics.render());
                    r.headers_mut().insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
                    );
                    r
                }
                _ => method_not_allowed(),
            },
            _ if path.starts_with("/static/") => match &self.files {
                Some(files) => files.serve(req.method(), &path["/static/".len()..], req.headers()).await,
                None => text(StatusCode::NOT_FOUND, "not found\n"),
            },
            _ => self.gateway(req, remote, scheme).await,
        }
    }

    /// WAF, then cache, then reverse proxy.
    async fn gateway(&self, req: Request<Incoming>, remote: SocketAddr, scheme: &'static str) -> Response<Body> {
        let (parts, incoming) = req.into_parts();
        let forward_body = match self.inspect(&parts, incoming).await {
            Ok(body) => body,
            Err(response) => return response,
        };
        let Some(proxy) = &self.proxy else {
            return text(StatusCode::NOT_FOUND, "not found (no upstream configured)\n");
        };

        let cache_slot = match (&self.cache, &parts.method) {
            (Some(cache), &Method::GET) => {
                let key = parts.uri.path_and_query().map_or("/", |pq| pq.as_str()).to_owned();
                if let Some(hit) = cache.get(&key) {
                    Metrics::inc(&self.metrics.cache_hits);
                    return cached_response(&hit);
                }
                Metrics::inc(&self.metrics.cache_misses);
                Some((cache, key))
            }
            _ => None,
        };

        let deadline = tokio::time::Instant::now() + proxy.timeout();
        let upstream = match proxy.forward(parts, forward_body, remote, scheme).await {
            Ok(response) => response,
            Err(ProxyError::Timeout) => return self.upstream_failure(StatusCode::GATEWAY_TIMEOUT),
            Err(ProxyError::Upstream) => return self.upstream_failure(StatusCode::BAD_GATEWAY),
        };
        let Some((cache, key)) = cache_slot else {
            return upstream.map(body::boxed);
        };

        let (mut head, incoming) = upstream.into_parts();
        let stored_headers = head.headers.clone();
        head.headers.insert(X_CACHE, HeaderValue::from_static("miss"));
        let limit = cache.max_object_bytes();
        let declared_len = head
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if !Cache::is_cacheable(head.status, &head.headers) || declared_len.is_some_and(|n| n > limit) {
            return Response::from_parts(head, body::boxed(incoming));
        }
        match tokio::time::timeout_at(deadline, read_up_to(incoming, limit)).await {
            Err(_) => self.upstream_failure(StatusCode::GATEWAY_TIMEOUT),
            Ok(Err(_)) => self.upstream_failure(StatusCode::BAD_GATEWAY),
            Ok(Ok(Collected::Complete(bytes))) => {
                cache.insert(
                    key,
                    CachedResponse {
                        status: head.status,
                        headers: stored_headers,
                        body: bytes.clone(),
                        stored_at: Instant::now(),
                    },
                );
                Response::from_parts(head, body::full(bytes))
            }
            Ok(Ok(Collected::TooBig(prefix, rest))) => Response::from_parts(head, body::boxed(Prefixed::new(prefix, rest))),
        }
    }

    /// Runs the WAF over the query string and (for POST/PUT/PATCH) the body,
    /// and returns the body to forward, or the response that ends the request.
    async fn inspect(&self, parts: &http::request::Parts, incoming: Incoming) -> Result<Body, Response<Body>> {
        let Some(waf) = &self.waf else {
            return Ok(body::boxed(incoming));
        };
        if parts.uri.query().is_some_and(|q| waf.check_query(q).is_some()) {
            return Err(self.blocked());
        }
        if !matches!(parts.method, Method::POST | Method::PUT | Method::PATCH) {
            return Ok(body::boxed(incoming));
        }
        let too_large = || text(StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n");
        let limit = waf.max_body_bytes();
        if incoming.size_hint().lower() > limit {
            return Err(too_large());
        }
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let bytes = match Limited::new(incoming, limit).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => return Err(too_large()),
            Err(_) => return Err(text(StatusCode::BAD_REQUEST, "could not read request body\n")),
        };
        if waf.check_body(&bytes).is_some() {
            return Err(self.blocked());
        }
        Ok(body::full(bytes))
    }

    fn blocked(&self) -> Response<Body> {
        Metrics::inc(&self.metrics.waf_blocked);
        text(StatusCode::FORBIDDEN, "request blocked by WAF\n")
    }

    fn upstream_failure(&self, status: StatusCode) -> Response<Body> {
        Metrics::inc(&self.metrics.upstream_errors);
        let msg = if status == StatusCode::GATEWAY_TIMEOUT { "upstream timed out\n" } else { "bad gateway\n" };
        text(status, msg)
    }
}

const X_CACHE: header::HeaderName = header::HeaderName::from_static("x-cache");

fn cached_response(hit: &CachedResponse) -> Response<Body> {
    let mut response = Response::new(body::full(hit.body.clone()));
    *response.status_mut() = hit.status;
    *response.headers_mut() = hit.headers.clone();
    let headers = response.headers_mut();
    headers.insert(X_CACHE, HeaderValue::from_static("hit"));
    headers.insert(header::AGE, HeaderValue::from(hit.stored_at.elapsed().as_secs()));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(hit.body.len()));
    response
}

enum Collected {
    Complete(Bytes),
    /// Went over the limit: what was read so far, and the rest of the body.
    TooBig(Vec<Bytes>, Incoming),
}

/// Reads a body as long as it stays within `limit` bytes.
async fn read_up_to(mut incoming: Incoming, limit: u64) -> Result<Collected, hyper::Error> {
    let mut chunks = Vec::new();
    let mut total = 0u64;
    while let Some(frame) = incoming.frame().await {
        let Ok(data) = frame?.into_data() else { continue };
        total += data.len() as u64;
        chunks.push(data);
        if total > limit {
            return Ok(Collected::TooBig(chunks, incoming));
        }
    }
    Ok(Collected::Complete(match chunks.len() {
        0 => Bytes::new(),
        1 => chunks.pop().unwrap_or_default(),
        _ => {
            let mut all = BytesMut::with_capacity(total as usize);
            chunks.iter().for_each(|c| all.extend_from_slice(c));
            all.freeze()
        }
    }))
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(body::full(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

fn method_not_allowed() -> Response<Body> {
    let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
    r
}

/// SIGTERM and SIGINT, registered up front so that a signal arriving right
/// after start-up already takes the graceful path.
pub struct ShutdownSignals {
    term: Signal,
    int: Signal,
}

impl ShutdownSignals {
    pub fn new() -> std::io::Result<Self> {
        Ok(ShutdownSignals { term: signal(SignalKind::terminate())?, int: signal(SignalKind::interrupt())? })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

pub struct Listeners {
    pub http: Option<TcpListener>,
    pub https: Option<(TcpListener, TlsAcceptor)>,
}

impl Listeners {
    /// Binds the configured addresses.
    pub async fn bind(config: &Config, tls: Option<Arc<rustls::ServerConfig>>) -> Result<Listeners, String> {
        let bind = |addr: SocketAddr| async move {
            TcpListener::bind(addr).await.map_err(|e| format!("cannot listen on {addr}: {e}"))
        };
        let http = match config.server.http {
            Some(addr) => Some(bind(addr).await?),
            None => None,
        };
        let https = match (config.server.https, tls) {
            (Some(addr), Some(tls)) => Some((bind(addr).await?, TlsAcceptor::from(tls))),
            _ => None,
        };
        Ok(Listeners { http, https })
    }

    /// `listening http=ADDR https=ADDR`, with `-` for a listener not configured.
    pub fn banner(&self) -> String {
        let addr = |l: Option<&TcpListener>| {
            l.and_then(|l| l.local_addr().ok()).map_or_else(|| "-".to_owned(), |a| a.to_string())
        };
        format!("listening http={} https={}", addr(self.http.as_ref()), addr(self.https.as_ref().map(|(l, _)| l)))
    }
}

async fn accept(listener: Option<&TcpListener>) -> std::io::Result<(TcpStream, SocketAddr)> {
    match listener {
        Some(l) => l.accept().await,
        None => std::future::pending().await,
    }
}

/// Accepts connections until a shutdown signal, then gives open
/// connections up to [`SHUTDOWN_GRACE`] to finish.
pub async fn run(app: Arc<App>, listeners: Listeners, mut signals: ShutdownSignals) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).keep_alive(true);
    builder.http2().timer(TokioTimer::new()).max_concurrent_streams(256);
    let builder = Arc::new(builder);
    let graceful = GracefulShutdown::new();
    let tls = listeners.https.as_ref().map(|(_, acceptor)| acceptor.clone());

    loop {
        let (result, acceptor) = tokio::select! {
            () = signals.recv() => break,
            r = accept(listeners.http.as_ref()) => (r, None),
            r = accept(listeners.https.as_ref().map(|(l, _)| l)) => (r, tls.clone()),
        };
        match result {
            Ok((stream, remote)) => {
                Metrics::inc(&app.metrics.connections);
                let conn = Connection {
                    app: Arc::clone(&app),
                    builder: Arc::clone(&builder),
                    watcher: graceful.watcher(),
                    remote,
                };
                tokio::spawn(conn.serve(stream, acceptor));
            }
            Err(e) => {
                // Typically EMFILE: back off instead of spinning.
                eprintln!("demo-server: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    drop(listeners);
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown()).await;
}

struct Connection {
    app: Arc<App>,
    builder: Arc<auto::Builder<TokioExecutor>>,
    watcher: hyper_util::server::graceful::Watcher,
    remote: SocketAddr,
}

impl Connection {
    async fn serve(self, stream: TcpStream, tls: Option<TlsAcceptor>) {
        let _ = stream.set_nodelay(true);
        match tls {
            None => self.serve_io(TokioIo::new(stream), "http").await,
            Some(acceptor) => {
                if let Ok(Ok(stream)) = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    self.serve_io(TokioIo::new(stream), "https").await;
                }
            }
        }
    }

    async fn serve_io<I>(self, io: TokioIo<I>, scheme: &'static str)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let Connection { app, builder, watcher, remote } = self;
        let service = service_fn(move |req| {
            let app = Arc::clone(&app);
            async move { Ok::<_, Infallible>(app.handle(req, remote, scheme).await) }
        });
        // Errors here are clients going away mid-request; nothing to do.
        let _ = watcher.watch(builder.serve_connection(io, service)).await;
    }
}
