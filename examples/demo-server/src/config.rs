//! The TOML configuration file: schema, defaults and validation.
//!
//! Every table rejects unknown keys, so a typo fails loudly instead of being
//! silently ignored. Relative paths are resolved against the directory that
//! holds the configuration file.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Patterns the WAF uses when `[waf] patterns` is omitted.
pub const DEFAULT_WAF_PATTERNS: &[&str] = &["<script", "union select", "../", "etc/passwd"];

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub server: ServerSection,
    pub tls: Option<TlsSection>,
    #[serde(default)]
    pub access_log: AccessLogSection,
    #[serde(default)]
    pub cache: CacheSection,
    #[serde(default)]
    pub proxy: ProxySection,
    #[serde(default)]
    pub files: FilesSection,
    #[serde(default)]
    pub waf: WafSection,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    /// Plain-text listener: HTTP/1.1 and HTTP/2 with prior knowledge (h2c).
    pub http: Option<SocketAddr>,
    /// TLS listener: ALPN `h2` and `http/1.1`.
    pub https: Option<SocketAddr>,
    /// Tokio worker threads; defaults to the number of CPUs.
    pub workers: Option<usize>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSection {
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AccessLogSection {
    pub enabled: bool,
    /// A file path, or `-` for stdout.
    pub path: String,
}

impl Default for AccessLogSection {
    fn default() -> Self {
        Self { enabled: false, path: "-".to_owned() }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheSection {
    pub enabled: bool,
    pub max_entries: usize,
    pub max_object_bytes: u64,
    pub ttl_seconds: u64,
}

impl Default for CacheSection {
    fn default() -> Self {
        Self { enabled: true, max_entries: 10_000, max_object_bytes: 1 << 20, ttl_seconds: 60 }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProxySection {
    /// `http://host:port` of a plain HTTP/1.1 upstream.
    pub upstream: Option<String>,
    pub timeout_ms: u64,
}

impl Default for ProxySection {
    fn default() -> Self {
        Self { upstream: None, timeout_ms: 5_000 }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesSection {
    /// Document root served under `/static/`.
    pub root: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WafSection {
    pub enabled: bool,
    pub patterns: Vec<String>,
    pub max_body_bytes: u64,
}

impl Default for WafSection {
    fn default() -> Self {
        Self {
            enabled: true,
            patterns: DEFAULT_WAF_PATTERNS.iter().map(|p| (*p).to_owned()).collect(),
            max_body_bytes: 1 << 20,
        }
    }
}

impl Config {
    /// Reads, parses and validates a configuration file. The error is a
    /// single line fit for stderr.
    pub fn load(path: &Path) -> Result<Config, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read config {}: {e}", path.display()))?;
        let mut config = Config::parse(&text).map_err(|e| format!("config {}: {e}", path.display()))?;
        let base = path.parent().unwrap_or_else(|| Path::new("."));
        config.resolve_paths(base);
        Ok(config)
    }

    /// Parses and validates configuration text.
    pub fn parse(text: &str) -> Result<Config, String> {
        let config: Config = toml::from_str(text).map_err(|e| {
            let message = e.message().trim().replace('\n', " ");
            match e.span() {
                Some(span) => {
                    let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                    format!("line {line}: {message}")
                }
                None => message,
            }
        })?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), String> {
        let server = &self.server;
        if server.http.is_none() && server.https.is_none() {
            return Err("[server] needs at least one of `http` or `https`".into());
        }
        if server.https.is_some() && self.tls.is_none() {
            return Err("[server] https is set but the [tls] table is missing".into());
        }
        if server.workers == Some(0) {
            return Err("[server] workers must be at least 1".into());
        }
        if self.access_log.path.is_empty() {
            return Err("[access_log] path must not be empty (use \"-\" for stdout)".into());
        }
        if let Some(upstream) = &self.proxy.upstream {
            parse_upstream(upstream).map_err(|e| format!("[proxy] upstream: {e}"))?;
        }
        if self.proxy.timeout_ms == 0 {
            return Err("[proxy] timeout_ms must be at least 1".into());
        }
        if self.waf.patterns.iter().any(|p| p.is_empty()) {
            return Err("[waf] patterns must not contain an empty string".into());
        }
        Ok(())
    }

    fn resolve_paths(&mut self, base: &Path) {
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        if let Some(tls) = &mut self.tls {
            resolve(&mut tls.cert);
            resolve(&mut tls.key);
        }
        if let Some(root) = &mut self.files.root {
            resolve(root);
        }
        if self.access_log.path != "-" {
            let mut p = PathBuf::from(&self.access_log.path);
            resolve(&mut p);
            self.access_log.path = p.to_string_lossy().into_owned();
        }
    }

    /// Worker threads to start.
    pub fn workers(&self) -> usize {
        self.server
            .workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

/// Parses `http://host:port` (optionally with a trailing `/`) into the
/// scheme-and-authority URI the proxy prefixes to request paths.
pub fn parse_upstream(upstream: &str) -> Result<http::uri::Authority, String> {
    let uri: http::Uri = upstream.parse().map_err(|e| format!("invalid URI {upstream:?}: {e}"))?;
    if uri.scheme_str() != Some("http") {
        return Err(format!("{upstream:?}: only http:// upstreams are supported"));
    }
    let authority = uri.authority().cloned().ok_or_else(|| format!("{upstream:?}: missing host"))?;
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(format!("{upstream:?}: must not have a path or query"));
    }
    Ok(authority)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_apply_to_a_minimal_file() {
        let c = Config::parse("[server]\nhttp = \"127.0.0.1:8080\"\n").unwrap();
        assert_eq!(c.server.http, Some("127.0.0.1:8080".parse().unwrap()));
        assert!(c.server.https.is_none());
        assert!(c.tls.is_none());
        assert!(!c.access_log.enabled);
        assert_eq!(c.access_log.path, "-");
        assert!(c.cache.enabled);
        assert_eq!(c.cache.max_entries, 10_000);
        assert_eq!(c.cache.max_object_bytes, 1_048_576);
        assert_eq!(c.cache.ttl_seconds, 60);
        assert_eq!(c.proxy.upstream, None);
        assert_eq!(c.proxy.timeout_ms, 5_000);
        assert!(c.files.root.is_none());
        assert!(c.waf.enabled);
        assert_eq!(c.waf.patterns, DEFAULT_WAF_PATTERNS);
        assert_eq!(c.waf.max_body_bytes, 1_048_576);
        assert!(c.workers() >= 1);
    }

    #[test]
    fn full_file_parses() {
        let text = r#"
[server]
http = "127.0.0.1:8080"
https = "[::1]:8443"
workers = 1
[tls]
cert = "cert.pem"
key = "/abs/key.pem"
[access_log]
enabled = true
path = "access.log"
[cache]
enabled = false
max_entries = 5
max_object_bytes = 10
ttl_seconds = 1
[proxy]
upstream = "http://127.0.0.1:9000"
timeout_ms = 100
[files]
root = "docroot"
[waf]
enabled = true
patterns = ["evil"]
max_body_bytes = 64
"#;
        let mut c = Config::parse(text).unwrap();
        c.resolve_paths(Path::new("/etc/demo"));
        assert_eq!(c.workers(), 1);
        let tls = c.tls.as_ref().unwrap();
        assert_eq!(tls.cert, Path::new("/etc/demo/cert.pem"));
        assert_eq!(tls.key, Path::new("/abs/key.pem"));
        assert_eq!(c.access_log.path, "/etc/demo/access.log");
        assert_eq!(c.files.root.as_deref(), Some(Path::new("/etc/demo/docroot")));
        assert_eq!(c.waf.patterns, ["evil"]);
        assert!(!c.cache.enabled);
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = Config::parse("[server]\nhttp = \"127.0.0.1:1\"\nthreads = 4\n").unwrap_err();
        assert!(err.contains("threads"), "{err}");
        assert!(err.starts_with("line 3:"), "{err}");
        assert!(!err.contains('\n'));
        let err = Config::parse("[server]\nhttp = \"127.0.0.1:1\"\n[bogus]\n").unwrap_err();
        assert!(err.contains("bogus"), "{err}");
        let err = Config::parse("[server]\nhttp = \"127.0.0.1:1\"\n[cache]\nttl = 3\n").unwrap_err();
        assert!(err.contains("ttl"), "{err}");
    }

    #[test]
    fn invalid_values_are_rejected() {
        for (text, needle) in [
            ("", "at least one"),
            ("[server]\nhttps = \"127.0.0.1:1\"\n", "[tls]"),
            ("[server]\nhttp = \"127.0.0.1:1\"\nworkers = 0\n", "workers"),
            ("[server]\nhttp = \"nonsense\"\n", "line 2"),
            ("[server]\nhttp = \"127.0.0.1:1\"\n[proxy]\nupstream = \"https://x:1\"\n", "http://"),
            ("[server]\nhttp = \"127.0.0.1:1\"\n[proxy]\nupstream = \"http://x:1/api\"\n", "path"),
            ("[server]\nhttp = \"127.0.0.1:1\"\n[waf]\npatterns = [\"\"]\n", "empty"),
            ("[server]\nhttp = \"127.0.0.1:1\"\n[cache]\nmax_entries = -1\n", "line 4"),
        ] {
            let err = Config::parse(text).unwrap_err();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }

    #[test]
    fn upstream_parsing() {
        assert_eq!(parse_upstream("http://127.0.0.1:9000").unwrap().as_str(), "127.0.0.1:9000");
        assert_eq!(parse_upstream("http://localhost:9000/").unwrap().as_str(), "localhost:9000");
        assert!(parse_upstream("127.0.0.1:9000").is_err());
    }
}
