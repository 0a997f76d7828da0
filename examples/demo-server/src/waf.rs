//! A deliberately simple web application firewall: case-insensitive substring
//! patterns matched against the percent-decoded query string and against
//! request bodies.

use std::borrow::Cow;

use memchr::memmem::Finder;

pub struct Waf {
    patterns: Vec<(String, Finder<'static>)>,
    max_body_bytes: u64,
}

impl Waf {
    pub fn new<S: AsRef<str>>(patterns: &[S], max_body_bytes: u64) -> Waf {
        let patterns = patterns
            .iter()
            .map(|p| {
                let lower = p.as_ref().to_ascii_lowercase();
                let finder = Finder::new(lower.as_bytes()).into_owned();
                (lower, finder)
            })
            .collect();
        Waf { patterns, max_body_bytes }
    }

    /// Largest request body (in bytes) the WAF inspects; bigger ones are refused.
    pub fn max_body_bytes(&self) -> u64 {
        self.max_body_bytes
    }

    /// The pattern the raw (still percent-encoded) query string matches, if any.
    pub fn check_query(&self, raw_query: &str) -> Option<&str> {
        self.find(&decode_lower(raw_query.as_bytes()))
    }

    /// The pattern a request body matches, if any. The body is checked both
    /// as sent and, if it looks form-encoded, percent-decoded.
    pub fn check_body(&self, body: &[u8]) -> Option<&str> {
        let lower = body.to_ascii_lowercase();
        if let Some(p) = self.find(&lower) {
            return Some(p);
        }
        if memchr::memchr2(b'%', b'+', &lower).is_some() {
            return self.find(&decode_lower(&lower));
        }
        None
    }

    fn find(&self, haystack: &[u8]) -> Option<&str> {
        self.patterns
            .iter()
            .find(|(_, finder)| finder.find(haystack).is_some())
            .map(|(p, _)| p.as_str())
    }
}

/// Percent-decodes (with `+` as a space, as in forms) and lower-cases.
fn decode_lower(raw: &[u8]) -> Vec<u8> {
    let plus_decoded: Cow<[u8]> = if raw.contains(&b'+') {
        Cow::Owned(raw.iter().map(|&b| if b == b'+' { b' ' } else { b }).collect())
    } else {
        Cow::Borrowed(raw)
    };
    let mut decoded: Vec<u8> = percent_encoding::percent_decode(&plus_decoded).collect();
    decoded.make_ascii_lowercase();
    decoded
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DEFAULT_WAF_PATTERNS;

    fn waf() -> Waf {
        Waf::new(DEFAULT_WAF_PATTERNS, 1024)
    }

    #[test]
    fn query_matching_is_decoded_and_case_insensitive() {
        let w = waf();
        assert_eq!(w.check_query("q=%3CScRiPt%3Ealert(1)"), Some("<script"));
        assert_eq!(w.check_query("id=1+UNION+SELECT+pw"), Some("union select"));
        assert_eq!(w.check_query("id=1%20union%20select"), Some("union select"));
        assert_eq!(w.check_query("f=..%2F..%2Fetc%2Fpasswd"), Some("../"));
        assert_eq!(w.check_query("f=/ETC/PASSWD"), Some("etc/passwd"));
        assert_eq!(w.check_query("q=hello&page=2"), None);
        assert_eq!(w.check_query(""), None);
        assert_eq!(w.check_query("bad=%zz%"), None);
    }

    #[test]
    fn body_matching() {
        let w = waf();
        assert_eq!(w.check_body(b"{\"c\":\"<SCRIPT>\"}"), Some("<script"));
        assert_eq!(w.check_body(b"comment=%3Cscript%3E"), Some("<script"));
        assert_eq!(w.check_body(b"q=union+select"), Some("union select"));
        assert_eq!(w.check_body(b"plain harmless text + 100%"), None);
        assert_eq!(w.check_body(&[0xff, 0x00, 0x80]), None);
    }

    #[test]
    fn custom_patterns() {
        let w = Waf::new(&["DROP TABLE"], 10);
        assert_eq!(w.check_query("x=drop%20table"), Some("drop table"));
        assert_eq!(w.check_query("x=<script"), None);
        assert_eq!(w.max_body_bytes(), 10);
    }
}
