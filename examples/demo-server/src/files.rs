//! Static files under `/static/`: GET and HEAD, conditional requests
//! (strong ETag, Last-Modified) and single byte ranges.

use std::io::SeekFrom;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Response, StatusCode};
use tokio::io::AsyncSeekExt;

use crate::body::{self, Body, FileBody};

pub struct Files {
    root: PathBuf,
}

/// The outcome of looking at a `Range` header.
#[derive(Debug, PartialEq, Eq)]
pub enum RangeRequest {
    /// No usable range: send the whole file.
    Full,
    /// Send bytes `start..=end`.
    Partial { start: u64, end: u64 },
    /// The range lies outside the file: 416.
    Unsatisfiable,
}

impl Files {
    /// `root` must exist; it is canonicalised once, here.
    pub fn new(root: &Path) -> std::io::Result<Files> {
        let root = std::fs::canonicalize(root)?;
        if !root.is_dir() {
            return Err(std::io::Error::other(format!("{} is not a directory", root.display())));
        }
        Ok(Files { root })
    }

    /// Serves `rel` (the request path after `/static/`, still percent-encoded).
    pub async fn serve(&self, method: &Method, rel: &str, headers: &HeaderMap) -> Response<Body> {
        if method != Method::GET && method != Method::HEAD {
            let mut r = simple(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
            r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        let Some(rel) = sanitize(rel) else {
            return simple(StatusCode::NOT_FOUND, "not found\n");
        };
        let Some((path, meta)) = self.resolve(&rel).await else {
            return simple(StatusCode::NOT_FOUND, "not found\n");
        };
        let len = meta.len();
        let mtime = meta.modified().unwrap_or(UNIX_EPOCH);
        let etag = etag(len, mtime);
        let last_modified = httpdate::fmt_http_date(mtime);

        let mut builder = Response::builder()
            .header(header::ETAG, &etag)
            .header(header::LAST_MODIFIED, &last_modified)
            .header(header::ACCEPT_RANGES, "bytes");

        if is_not_modified(headers, &etag, mtime) {
            return builder.status(StatusCode::NOT_MODIFIED).body(body::empty()).unwrap();
        }

        let range = match headers.get(header::RANGE).and_then(|v| v.to_str().ok()) {
            Some(r) if if_range_allows(headers, &etag, &last_modified) => parse_range(r, len),
            _ => RangeRequest::Full,
        };
        let (status, start, count) = match range {
            RangeRequest::Full => (StatusCode::OK, 0, len),
            RangeRequest::Partial { start, end } => {
                builder = builder.header(header::CONTENT_RANGE, format!("bytes {start}-{end}/{len}"));
                (StatusCode::PARTIAL_CONTENT, start, end - start + 1)
            }
            RangeRequest::Unsatisfiable => {
                return builder
                    .status(StatusCode::RANGE_NOT_SATISFIABLE)
                    .header(header::CONTENT_RANGE, format!("bytes */{len}"))
                    .body(body::empty())
                    .unwrap();
            }
        };
        builder = builder
            .status(status)
            .header(header::CONTENT_TYPE, content_type(&path))
            .header(header::CONTENT_LENGTH, count);
        if method == Method::HEAD || count == 0 {
            return builder.body(body::empty()).unwrap();
        }
        let file = match tokio::fs::File::open(&path).await {
            Ok(mut f) => {
                if start > 0 {
                    if let Err(e) = f.seek(SeekFrom::Start(start)).await {
                        return io_error(&e);
                    }
                }
                f
            }
            Err(e) => return io_error(&e),
        };
        builder.body(body::boxed(FileBody::new(file, count))).unwrap()
    }

    /// Finds the file (a directory's `index.html`) and makes sure it really
    /// lies under the root, symlinks included.
    async fn resolve(&self, rel: &Path) -> Option<(PathBuf, std::fs::Metadata)> {
        let mut path = tokio::fs::canonicalize(self.root.join(rel)).await.ok()?;
        if !path.starts_with(&self.root) {
            return None;
        }
        let mut meta = tokio::fs::metadata(&path).await.ok()?;
        if meta.is_dir() {
            path.push("index.html");
            meta = tokio::fs::metadata(&path).await.ok()?;
        }
        meta.is_file().then_some((path, meta))
    }
}

fn simple(status: StatusCode, text: &'static str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(body::full(text))
        .unwrap()
}

fn io_error(e: &std::io::Error) -> Response<Body> {
    match e.kind() {
        std::io::ErrorKind::NotFound => simple(StatusCode::NOT_FOUND, "not found\n"),
        std::io::ErrorKind::PermissionDenied => simple(StatusCode::FORBIDDEN, "forbidden\n"),
        _ => simple(StatusCode::INTERNAL_SERVER_ERROR, "cannot read file\n"),
    }
}

/// Percent-decodes a request path and turns it into a relative path made of
/// normal components only. `None` for anything that tries to leave the root
/// (`..`, absolute paths, backslashes, NUL) or is not UTF-8.
pub fn sanitize(rel: &str) -> Option<PathBuf> {
    let decoded = percent_encoding::percent_decode_str(rel).decode_utf8().ok()?;
    if decoded.contains('\0') || decoded.contains('\\') {
        return None;
    }
    let mut out = PathBuf::new();
    for segment in decoded.split('/') {
        match segment {
            "" | "." => continue,
            ".." => return None,
            s => {
                let mut comps = Path::new(s).components();
                match (comps.next(), comps.next()) {
                    (Some(Component::Normal(c)), None) => out.push(c),
                    _ => return None,
                }
            }
        }
    }
    Some(out)
}

/// A strong validator from size and modification time (nanoseconds).
pub fn etag(len: u64, mtime: SystemTime) -> String {
    let nanos = mtime.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_nanos();
    format!("\"{len:x}-{nanos:x}\"")
}

/// RFC 9110 §13.2.2: If-None-Match wins over If-Modified-Since.
pub fn is_not_modified(headers: &HeaderMap, etag: &str, mtime: SystemTime) -> bool {
    let inm: Vec<&HeaderValue> = headers.get_all(header::IF_NONE_MATCH).iter().collect();
    if !inm.is_empty() {
        return inm.iter().filter_map(|v| v.to_str().ok()).any(|v| {
            v.split(',').map(str::trim).any(|tag| tag == "*" || tag.trim_start_matches("W/") == etag)
        });
    }
    let Some(since) = headers
        .get(header::IF_MODIFIED_SINCE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| httpdate::parse_http_date(v).ok())
    else {
        return false;
    };
    // HTTP dates have whole-second resolution.
    let mtime_secs = mtime.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs();
    let since_secs = since.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs();
    mtime_secs <= since_secs
}

/// If-Range: the range applies only when the validator still matches.
fn if_range_allows(headers: &HeaderMap, etag: &str, last_modified: &str) -> bool {
    match headers.get(header::IF_RANGE).and_then(|v| v.to_str().ok()) {
        None => true,
        Some(v) => v.trim() == etag || v.trim() == last_modified,
    }
}

/// Parses a `Range` header for a representation of `len` bytes. Only a single
/// `bytes=` range is honoured; anything else falls back to the full body.
pub fn parse_range(header: &str, len: u64) -> RangeRequest {
    let Some(spec) = header.trim().strip_prefix("bytes=") else {
        return RangeRequest::Full;
    };
    if spec.contains(',') {
        return RangeRequest::Full;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return RangeRequest::Full;
    };
    let (first, last) = (first.trim(), last.trim());
    let number = |s: &str| -> Option<u64> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            None
        } else {
            s.parse().ok()
        }
    };
    match (first.is_empty(), last.is_empty()) {
        // bytes=-n: the last n bytes.
        (true, false) => match number(last) {
            Some(0) => RangeRequest::Unsatisfiable,
            Some(_) if len == 0 => RangeRequest::Unsatisfiable,
            Some(n) => RangeRequest::Partial { start: len.saturating_sub(n), end: len - 1 },
            None => RangeRequest::Full,
        },
        // bytes=a-: from a to the end.
        (false, true) => match number(first) {
            Some(a) if a < len => RangeRequest::Partial { start: a, end: len - 1 },
            Some(_) => RangeRequest::Unsatisfiable,
            None => RangeRequest::Full,
        },
        (false, false) => match (number(first), number(last)) {
            (Some(a), Some(b)) if a > b => RangeRequest::Full,
            (Some(a), Some(_)) if a >= len => RangeRequest::Unsatisfiable,
            (Some(a), Some(b)) => RangeRequest::Partial { start: a, end: b.min(len - 1) },
            _ => RangeRequest::Full,
        },
        (true, true) => RangeRequest::Full,
    }
}

/// Content-Type from the file extension.
pub fn content_type(path: &Path) -> &'static str {
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("json") => "application/json",
        Some("txt" | "log" | "md") => "text/plain; charset=utf-8",
        Some("xml") => "application/xml",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some("ico") => "image/x-icon",
        Some("wasm") => "application/wasm",
        Some("pdf") => "application/pdf",
        Some("woff2") => "font/woff2",
        Some("woff") => "font/woff",
        Some("gz") => "application/gzip",
        Some("zip") => "application/zip",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RangeRequest::*;

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-9", 100), Partial { start: 0, end: 9 });
        assert_eq!(parse_range("bytes=90-200", 100), Partial { start: 90, end: 99 });
        assert_eq!(parse_range("bytes=10-", 100), Partial { start: 10, end: 99 });
        assert_eq!(parse_range("bytes=-10", 100), Partial { start: 90, end: 99 });
        assert_eq!(parse_range("bytes=-500", 100), Partial { start: 0, end: 99 });
        assert_eq!(parse_range("bytes=99-99", 100), Partial { start: 99, end: 99 });
        assert_eq!(parse_range(" bytes= 5 - 6 ", 100), Partial { start: 5, end: 6 });
        assert_eq!(parse_range("bytes=100-", 100), Unsatisfiable);
        assert_eq!(parse_range("bytes=100-200", 100), Unsatisfiable);
        assert_eq!(parse_range("bytes=-0", 100), Unsatisfiable);
        assert_eq!(parse_range("bytes=0-", 0), Unsatisfiable);
        assert_eq!(parse_range("bytes=-5", 0), Unsatisfiable);
        // Ignored (whole body): malformed, multi-range, other units.
        assert_eq!(parse_range("bytes=5-1", 100), Full);
        assert_eq!(parse_range("bytes=0-1,5-6", 100), Full);
        assert_eq!(parse_range("items=0-1", 100), Full);
        assert_eq!(parse_range("bytes=-", 100), Full);
        assert_eq!(parse_range("bytes=a-b", 100), Full);
        assert_eq!(parse_range("bytes=+1-2", 100), Full);
        assert_eq!(parse_range("bytes=5", 100), Full);
    }

    #[test]
    fn sanitizing() {
        assert_eq!(sanitize("a/b.txt"), Some(PathBuf::from("a/b.txt")));
        assert_eq!(sanitize("a//./b%20c.txt"), Some(PathBuf::from("a/b c.txt")));
        assert_eq!(sanitize(""), Some(PathBuf::new()));
        assert_eq!(sanitize("../etc/passwd"), None);
        assert_eq!(sanitize("a/%2e%2e/%2e%2e/etc/passwd"), None);
        assert_eq!(sanitize("a/..%2f..%2fb"), None);
        assert_eq!(sanitize("a\\..\\b"), None);
        assert_eq!(sanitize("a%00b"), None);
        assert_eq!(sanitize("%ff"), None);
    }

    #[test]
    fn etags_and_conditionals() {
        let mtime = UNIX_EPOCH + Duration::new(1_700_000_000, 5);
        let tag = etag(10, mtime);
        assert_eq!(tag, format!("\"a-{:x}\"", 1_700_000_000_000_000_005u128));
        assert_ne!(tag, etag(11, mtime));

        let mut h = HeaderMap::new();
        assert!(!is_not_modified(&h, &tag, mtime));
        h.insert(header::IF_NONE_MATCH, HeaderValue::from_str(&tag).unwrap());
        assert!(is_not_modified(&h, &tag, mtime));
        h.insert(header::IF_NONE_MATCH, HeaderValue::from_str(&format!("\"x\", W/{tag}")).unwrap());
        assert!(is_not_modified(&h, &tag, mtime));
        h.insert(header::IF_NONE_MATCH, HeaderValue::from_static("*"));
        assert!(is_not_modified(&h, &tag, mtime));
        // A non-matching If-None-Match overrides a matching If-Modified-Since.
        h.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"other\""));
        h.insert(header::IF_MODIFIED_SINCE, HeaderValue::from_str(&httpdate::fmt_http_date(mtime)).unwrap());
        assert!(!is_not_modified(&h, &tag, mtime));
        h.remove(header::IF_NONE_MATCH);
        assert!(is_not_modified(&h, &tag, mtime), "same second counts as not modified");
        let earlier = mtime - Duration::from_secs(10);
        h.insert(header::IF_MODIFIED_SINCE, HeaderValue::from_str(&httpdate::fmt_http_date(earlier)).unwrap());
        assert!(!is_not_modified(&h, &tag, mtime));
        h.insert(header::IF_MODIFIED_SINCE, HeaderValue::from_static("garbage"));
        assert!(!is_not_modified(&h, &tag, mtime));
    }

    #[test]
    fn if_range() {
        let mut h = HeaderMap::new();
        assert!(if_range_allows(&h, "\"e\"", "date"));
        h.insert(header::IF_RANGE, HeaderValue::from_static("\"e\""));
        assert!(if_range_allows(&h, "\"e\"", "date"));
        assert!(!if_range_allows(&h, "\"f\"", "date"));
    }

    #[test]
    fn content_types() {
        assert_eq!(content_type(Path::new("a/index.HTML")), "text/html; charset=utf-8");
        assert_eq!(content_type(Path::new("x.png")), "image/png");
        assert_eq!(content_type(Path::new("noext")), "application/octet-stream");
    }
}
