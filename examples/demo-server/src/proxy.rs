//! Reverse proxy to a plain HTTP/1.1 upstream, through hyper-util's pooled
//! legacy client.

use std::net::SocketAddr;
use std::time::Duration;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Request, Response, Uri, Version};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::body::Body;

pub struct Proxy {
    client: Client<HttpConnector, Body>,
    authority: Authority,
    timeout: Duration,
}

#[derive(Debug)]
pub enum ProxyError {
    /// No response headers within the timeout.
    Timeout,
    /// Connection refused, reset, malformed response, ...
    Upstream,
}

impl Proxy {
    pub fn new(authority: Authority, timeout: Duration) -> Proxy {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(timeout));
        let client = Client::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Proxy { client, authority, timeout }
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sends the request upstream and returns the response head (the body
    /// streams). `scheme` is the scheme the client used to reach us.
    pub async fn forward(
        &self,
        parts: Parts,
        body: Body,
        remote: SocketAddr,
        scheme: &'static str,
    ) -> Result<Response<Incoming>, ProxyError> {
        let path = parts.uri.path_and_query().cloned().unwrap_or_else(|| PathAndQuery::from_static("/"));
        let uri = Uri::builder()
            .scheme(Scheme::HTTP)
            .authority(self.authority.clone())
            .path_and_query(path)
            .build()
            .expect("scheme, authority and path are all valid");
        let original_host = parts
            .headers
            .get(header::HOST)
            .cloned()
            .or_else(|| parts.uri.authority().and_then(|a| HeaderValue::from_str(a.as_str()).ok()));

        let mut headers = parts.headers;
        strip_hop_by_hop(&mut headers);
        headers.remove(header::HOST);
        append_forwarded_for(&mut headers, remote);
        headers.insert(HeaderName::from_static("x-forwarded-proto"), HeaderValue::from_static(scheme));
        if let Some(host) = original_host {
            headers.insert(HeaderName::from_static("x-forwarded-host"), host);
        }

        let mut request = Request::new(body);
        *request.method_mut() = parts.method;
        *request.uri_mut() = uri;
        *request.version_mut() = Version::HTTP_11;
        *request.headers_mut() = headers;

        match tokio::time::timeout(self.timeout, self.client.request(request)).await {
            Err(_) => Err(ProxyError::Timeout),
            Ok(Err(_)) => Err(ProxyError::Upstream),
            Ok(Ok(mut response)) => {
                strip_hop_by_hop(response.headers_mut());
                Ok(response)
            }
        }
    }
}

const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
];

/// Removes the RFC 9110 §7.6.1 connection-specific headers, including any
/// named by `Connection`, and `Upgrade`.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(name);
    }
    headers.remove(header::UPGRADE);
}

fn append_forwarded_for(headers: &mut HeaderMap, remote: SocketAddr) {
    let name = HeaderName::from_static("x-forwarded-for");
    let ip = remote.ip().to_string();
    let value = match headers.get(&name).and_then(|v| v.to_str().ok()) {
        Some(prev) => format!("{prev}, {ip}"),
        None => ip,
    };
    if let Ok(v) = HeaderValue::from_str(&value) {
        headers.insert(name, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_are_removed() {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, HeaderValue::from_static("keep-alive, x-secret"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert(header::TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
        h.insert(header::UPGRADE, HeaderValue::from_static("h2c"));
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("max-age=1"));
        strip_hop_by_hop(&mut h);
        let left: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(left, ["content-type", "cache-control"]);
    }

    #[test]
    fn forwarded_for_appends() {
        let mut h = HeaderMap::new();
        append_forwarded_for(&mut h, "10.0.0.1:5".parse().unwrap());
        append_forwarded_for(&mut h, "[::1]:6".parse().unwrap());
        assert_eq!(h["x-forwarded-for"], "10.0.0.1, ::1");
    }
}
