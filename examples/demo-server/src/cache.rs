//! In-memory response cache for proxied GET requests.
//!
//! Entries live for a fixed TTL. When the cache is full the oldest entry is
//! evicted (insertion order, which with a single TTL is also the order in
//! which entries expire).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

/// A stored upstream response.
#[derive(Debug)]
pub struct CachedResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub stored_at: Instant,
}

pub struct Cache {
    max_entries: usize,
    max_object_bytes: u64,
    ttl: Duration,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    map: HashMap<String, (Arc<CachedResponse>, u64)>,
    /// Keys in insertion order, tagged with the sequence number of the
    /// insertion; tags that no longer match the map are stale and skipped.
    order: VecDeque<(String, u64)>,
    next_seq: u64,
}

impl Cache {
    pub fn new(max_entries: usize, max_object_bytes: u64, ttl: Duration) -> Cache {
        Cache { max_entries, max_object_bytes, ttl, inner: Mutex::default() }
    }

    pub fn max_object_bytes(&self) -> u64 {
        self.max_object_bytes
    }

    /// Whether an upstream response may be stored at all (its size aside).
    pub fn is_cacheable(status: StatusCode, headers: &HeaderMap) -> bool {
        if status != StatusCode::OK {
            return false;
        }
        !headers.get_all(http::header::CACHE_CONTROL).iter().any(|v| {
            let v = String::from_utf8_lossy(v.as_bytes()).to_ascii_lowercase();
            v.contains("no-store") || v.contains("private")
        })
    }

    pub fn get(&self, key: &str) -> Option<Arc<CachedResponse>> {
        self.get_at(key, Instant::now())
    }

    fn get_at(&self, key: &str, now: Instant) -> Option<Arc<CachedResponse>> {
        let mut inner = self.lock();
        let (entry, _) = inner.map.get(key)?;
        if now.saturating_duration_since(entry.stored_at) < self.ttl {
            return Some(Arc::clone(entry));
        }
        inner.map.remove(key);
        None
    }

    /// Stores a response; returns false when it is too big or the cache
    /// holds no entries at all.
    pub fn insert(&self, key: String, response: CachedResponse) -> bool {
        if self.max_entries == 0 || response.body.len() as u64 > self.max_object_bytes {
            return false;
        }
        let mut inner = self.lock();
        let inner = &mut *inner;
        if !inner.map.contains_key(&key) {
            while inner.map.len() >= self.max_entries {
                let Some((old, seq)) = inner.order.pop_front() else { break };
                if inner.map.get(&old).is_some_and(|(_, s)| *s == seq) {
                    inner.map.remove(&old);
                }
            }
        }
        let seq = inner.next_seq;
        inner.next_seq += 1;
        inner.order.push_back((key.clone(), seq));
        inner.map.insert(key, (Arc::new(response), seq));
        if inner.order.len() > 2 * self.max_entries + 16 {
            let map = &inner.map;
            inner.order.retain(|(k, s)| map.get(k).is_some_and(|(_, live)| live == s));
        }
        true
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the map inconsistent
        // in a way that matters for a cache, so poisoning is ignored.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::{HeaderValue, CACHE_CONTROL};

    fn response(body: &'static [u8], at: Instant) -> CachedResponse {
        CachedResponse {
            status: StatusCode::OK,
            headers: HeaderMap::new(),
            body: Bytes::from_static(body),
            stored_at: at,
        }
    }

    #[test]
    fn hit_until_ttl_expires() {
        let cache = Cache::new(10, 100, Duration::from_secs(60));
        let t0 = Instant::now();
        assert!(cache.insert("/a".into(), response(b"A", t0)));
        assert_eq!(cache.get_at("/a", t0).unwrap().body, "A");
        assert!(cache.get_at("/a", t0 + Duration::from_secs(59)).is_some());
        assert!(cache.get_at("/a", t0 + Duration::from_secs(60)).is_none());
        assert_eq!(cache.len(), 0, "expired entries are dropped on lookup");
        assert!(cache.get("/missing").is_none());
    }

    #[test]
    fn oldest_entry_is_evicted_when_full() {
        let cache = Cache::new(2, 100, Duration::from_secs(60));
        let t = Instant::now();
        cache.insert("/1".into(), response(b"1", t));
        cache.insert("/2".into(), response(b"2", t));
        cache.insert("/3".into(), response(b"3", t));
        assert_eq!(cache.len(), 2);
        assert!(cache.get_at("/1", t).is_none());
        assert!(cache.get_at("/2", t).is_some());
        assert!(cache.get_at("/3", t).is_some());
        // Replacing an existing key does not evict anything and refreshes it.
        cache.insert("/2".into(), response(b"2b", t));
        assert_eq!(cache.len(), 2);
        cache.insert("/4".into(), response(b"4", t));
        assert!(cache.get_at("/3", t).is_none());
        assert_eq!(cache.get_at("/2", t).unwrap().body, "2b");
    }

    #[test]
    fn order_queue_stays_bounded() {
        let cache = Cache::new(3, 100, Duration::from_secs(60));
        let t = Instant::now();
        for _ in 0..1000 {
            cache.insert("/same".into(), response(b"x", t));
        }
        assert!(cache.lock().order.len() <= 2 * 3 + 17);
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn size_rules() {
        let cache = Cache::new(10, 3, Duration::from_secs(60));
        let t = Instant::now();
        assert!(cache.insert("/ok".into(), response(b"abc", t)));
        assert!(!cache.insert("/big".into(), response(b"abcd", t)));
        assert!(cache.get("/big").is_none());
        let none = Cache::new(0, 100, Duration::from_secs(60));
        assert!(!none.insert("/a".into(), response(b"a", t)));
    }

    #[test]
    fn cacheability() {
        let mut h = HeaderMap::new();
        assert!(Cache::is_cacheable(StatusCode::OK, &h));
        assert!(!Cache::is_cacheable(StatusCode::NOT_FOUND, &h));
        assert!(!Cache::is_cacheable(StatusCode::INTERNAL_SERVER_ERROR, &h));
        h.insert(CACHE_CONTROL, HeaderValue::from_static("public, max-age=60"));
        assert!(Cache::is_cacheable(StatusCode::OK, &h));
        h.insert(CACHE_CONTROL, HeaderValue::from_static("No-Store"));
        assert!(!Cache::is_cacheable(StatusCode::OK, &h));
        h.insert(CACHE_CONTROL, HeaderValue::from_static("max-age=5, private"));
        assert!(!Cache::is_cacheable(StatusCode::OK, &h));
    }
}
