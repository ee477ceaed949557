//! The host of a canonical URL, and the 32-bit hash of it that every leaf record keeps, so that
//! a namespace can forget a whole host (see `docs/forget.md`).
//!
//! The hash is of the canonical host alone (no scheme, no port, no user info): `--host
//! example.com` forgets `http://example.com/`, `https://example.com:8443/a` and every other URL
//! whose canonical host is `example.com`, and nothing of `www.example.com`. It is seeded with
//! the namespace's seed and is never 0, which marks a record whose host is unknown (recorded
//! before hosts were kept, or as a raw item or fingerprint).
//!
//! # Collisions
//! Two different hosts share a hash with probability 2⁻³² per pair. A forget of a host whose
//! hash another recorded host shares would forget that host's URLs too: the namespace's host
//! dictionary (`crate::namespace::host_dict`) detects it and the forget refuses instead. See
//! `docs/forget.md`, "The collision guard".

use urlseen_filter::hash;

/// The host of an (already canonical) URL: what follows `scheme://` (the first `:` of the URL
/// followed by `//`) and any `user@`, up to the port, path, query or fragment; `None` if it
/// has no authority or an empty host. An IPv6 literal keeps its brackets.
pub fn host_of(url: &str) -> Option<&str> {
    // Bytes and SIMD searches, not chars: this runs once per URL recorded (a search with a
    // char pattern cost about 40 ns more per URL, a byte-by-byte scan about 5% of `filter`).
    let b = url.as_bytes();
    let colon = memchr::memchr(b':', b)?;
    if b.get(colon + 1..colon + 3) != Some(b"//".as_slice()) {
        return None;
    }
    let start = colon + 3;
    let rest = &b[start..];
    // The authority ends at the path, query or fragment; the host starts after its last `@`.
    let authority = &rest[..memchr::memchr3(b'/', b'?', b'#', rest).unwrap_or(rest.len())];
    let at = memchr::memrchr(b'@', authority).map_or(0, |i| i + 1);
    let host_port = &authority[at..];
    let len = if host_port.first() == Some(&b'[') {
        // `[v6]` or `[v6]:port`.
        memchr::memchr(b']', host_port).map_or(host_port.len(), |i| i + 1)
    } else {
        memchr::memchr(b':', host_port).unwrap_or(host_port.len())
    };
    // Every cut is at an ASCII byte, so a char boundary.
    let host = url.get(start + at..start + at + len)?;
    (!host.is_empty()).then_some(host)
}

/// The hash a leaf record keeps for `host`, under a namespace's `seed`: never 0.
pub fn host_hash(host: &str, seed: u64) -> u32 {
    host_hashes(host, seed).0
}

/// [`host_hash`], and the 64-bit hash it is folded from, by which the host dictionary tells
/// hosts apart without comparing their names on every URL (`crate::namespace::host_dict`).
pub(crate) fn host_hashes(host: &str, seed: u64) -> (u32, u64) {
    let h = hash::fingerprint(host.as_bytes(), seed ^ HOST_SEED);
    #[cfg(feature = "testing")]
    if let Some(forced) = testing::forced(host, seed) {
        return (forced, h);
    }
    let folded = (h ^ (h >> 32)) as u32;
    (if folded == 0 { 1 } else { folded }, h)
}

/// Keeps host hashes apart from URL fingerprints made with the same seed.
const HOST_SEED: u64 = 0x686f_7374_2d68_6173;

/// The canonical form of a host given alone (`Example.COM` → `example.com`), as `canon` writes
/// it in URLs.
///
/// # Errors
/// [`crate::Error::InvalidHost`] for a URL, a path or anything that is not a host once
/// canonicalized.
#[doc(hidden)]
pub fn canonical_host(
    canon: &urlseen_canon::Canonicalizer,
    host: &str,
) -> Result<String, crate::Error> {
    let invalid = |reason: String| crate::Error::InvalidHost { host: host.to_owned(), reason };
    if host.is_empty() || host.contains(['/', '?', '#', '@', ' ']) || host.contains("://") {
        return Err(invalid("give a host name alone, such as example.com".into()));
    }
    let url = format!("http://{host}/");
    let canonical = canon.canonicalize(&url).map_err(|e| invalid(e.to_string()))?;
    let found =
        host_of(&canonical).ok_or_else(|| invalid("it has no host once canonicalized".into()))?;
    Ok(found.to_owned())
}

/// [`host_hash`] of the host of `url` (canonical), or 0 (unknown) if it has none.
pub fn url_host_hash(url: &str, seed: u64) -> u32 {
    host_of(url).map_or(0, |h| host_hash(h, seed))
}

/// Test hooks: make two hosts collide on purpose.
#[cfg(feature = "testing")]
pub mod testing {
    use std::sync::atomic::{AtomicBool, Ordering};

    use parking_lot::Mutex;

    static ANY: AtomicBool = AtomicBool::new(false);
    static FORCED: Mutex<Vec<(u64, String, u32)>> = Mutex::new(Vec::new());

    /// From now on, [`super::host_hash`] of `host` under `seed` is `hash` (never 0: use 1 or
    /// more). Tests give their namespaces a seed of their own, so other tests are not affected.
    pub fn force_host_hash(seed: u64, host: &str, hash: u32) {
        FORCED.lock().push((seed, host.to_owned(), hash.max(1)));
        ANY.store(true, Ordering::Release);
    }

    pub(super) fn forced(host: &str, seed: u64) -> Option<u32> {
        if !ANY.load(Ordering::Acquire) {
            return None;
        }
        FORCED.lock().iter().find(|(s, h, _)| *s == seed && h == host).map(|f| f.2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_found_without_scheme_port_or_user() {
        assert_eq!(host_of("https://example.com/a?b#c"), Some("example.com"));
        assert_eq!(host_of("http://u:p@example.com:8080"), Some("example.com"));
        assert_eq!(host_of("http://[::1]:80/x"), Some("[::1]"));
        assert_eq!(host_of("http://example.com?x"), Some("example.com"));
        assert_eq!(host_of("mailto:a@b"), None);
        assert_eq!(host_of("file:///etc/passwd"), None);
        assert_eq!(host_of("no scheme"), None);
        assert_eq!(host_of("http://"), None);
        assert_eq!(host_of("http://@:80/"), None);
        assert_eq!(host_of("http://bücher.example/"), Some("bücher.example"));
        assert_eq!(host_of("urn:x://y"), None, "the scheme ends at the first colon");
        assert_eq!(host_of("http://a:b@c:d@example.com:1/"), Some("example.com"));
        assert_eq!(host_of("http://u@[::1]:8/"), Some("[::1]"));
        assert_eq!(host_of("http://[::1"), Some("[::1"));
        assert_eq!(host_of("https://example.com"), Some("example.com"));
        assert_eq!(host_of("https://example.com:"), Some("example.com"));
    }

    #[test]
    fn hashes_are_seeded_and_never_zero() {
        assert_ne!(host_hash("a.example", 1), host_hash("a.example", 2));
        assert_ne!(host_hash("a.example", 1), host_hash("b.example", 1));
        assert_eq!(
            url_host_hash("http://a.example/x", 7),
            url_host_hash("https://a.example:1/", 7)
        );
        assert_eq!(url_host_hash("urn:x", 7), 0);
        assert!((0..10_000).all(|i| host_hash(&format!("h{i}"), 3) != 0));
    }
}
