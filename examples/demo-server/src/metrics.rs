//! Process-wide counters, rendered in the Prometheus text exposition format.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use http::StatusCode;

#[derive(Default)]
pub struct Metrics {
    /// Requests by status class: 1xx .. 5xx.
    requests: [AtomicU64; 5],
    pub cache_hits: AtomicU64,
    pub cache_misses: AtomicU64,
    pub waf_blocked: AtomicU64,
    pub upstream_errors: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub connections: AtomicU64,
}

impl Metrics {
    pub fn record_status(&self, status: StatusCode) {
        let class = (status.as_u16() / 100).clamp(1, 5) as usize - 1;
        self.requests[class].fetch_add(1, Relaxed);
    }

    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Relaxed);
    }

    pub fn render(&self) -> String {
        let mut out = String::with_capacity(1024);
        out.push_str("# HELP demo_requests_total Requests answered, by status class.\n");
        out.push_str("# TYPE demo_requests_total counter\n");
        for (i, n) in self.requests.iter().enumerate() {
            let _ = writeln!(out, "demo_requests_total{{class=\"{}xx\"}} {}", i + 1, n.load(Relaxed));
        }
        for (name, help, counter) in [
            ("demo_cache_hits_total", "Proxied GETs answered from the cache.", &self.cache_hits),
            ("demo_cache_misses_total", "Cacheable GETs sent to the upstream.", &self.cache_misses),
            ("demo_waf_blocked_total", "Requests refused by the WAF.", &self.waf_blocked),
            ("demo_upstream_errors_total", "Upstream failures and timeouts.", &self.upstream_errors),
            ("demo_bytes_sent_total", "Response body bytes sent.", &self.bytes_sent),
            ("demo_connections_total", "Connections accepted.", &self.connections),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}", counter.load(Relaxed));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_series() {
        let m = Metrics::default();
        m.record_status(StatusCode::OK);
        m.record_status(StatusCode::NO_CONTENT);
        m.record_status(StatusCode::BAD_GATEWAY);
        Metrics::inc(&m.cache_hits);
        m.bytes_sent.fetch_add(42, Relaxed);
        let text = m.render();
        assert!(text.contains("demo_requests_total{class=\"2xx\"} 2\n"), "{text}");
        assert!(text.contains("demo_requests_total{class=\"5xx\"} 1\n"));
        assert!(text.contains("demo_requests_total{class=\"4xx\"} 0\n"));
        assert!(text.contains("demo_cache_hits_total 1\n"));
        assert!(text.contains("demo_bytes_sent_total 42\n"));
        for name in ["demo_cache_misses_total", "demo_waf_blocked_total", "demo_upstream_errors_total", "demo_connections_total"] {
            assert!(text.contains(&format!("# TYPE {name} counter\n{name} 0\n")), "{name}");
        }
    }
}
