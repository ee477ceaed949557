//! A URL's fingerprint, defined once for every backend: its canonical form under the
//! namespace's profile, hashed with the namespace's seed. A namespace in this process, one in
//! Redis and a recrawl window in Redis all fingerprint through a [`Fingerprinter`], so one URL
//! has one fingerprint wherever its namespace lives, and a dump moves between them.

use std::cell::RefCell;

use urlseen_canon::{CanonError, Canonicalizer};
use urlseen_filter::hash;

use crate::options::NamespaceOptions;

thread_local! {
    /// One canonicalization buffer per thread: no allocation per URL on the hot path.
    static CANON_BUF: RefCell<String> = RefCell::new(String::with_capacity(256));
}

/// Canonicalizes and hashes URLs for one namespace. Cheap to clone, `Send + Sync`.
#[derive(Debug, Clone)]
pub struct Fingerprinter {
    canon: Canonicalizer,
    seed: u64,
}

impl Fingerprinter {
    /// The fingerprinter of a namespace created with `options` (its profile and seed).
    pub fn new(options: &NamespaceOptions) -> Self {
        Fingerprinter { canon: Canonicalizer::new(options.canon.clone()), seed: options.seed }
    }

    /// The fingerprint of `url`.
    ///
    /// # Errors
    /// The URL cannot be canonicalized.
    pub fn fingerprint(&self, url: &str) -> Result<u64, CanonError> {
        self.with_canonical(url, |_, fp| fp)
    }

    /// Canonicalizes `url` and hands `f` its canonical form and fingerprint: for a caller that
    /// needs more of the canonical URL than its hash (its host, a journal of URLs), without an
    /// allocation per URL.
    ///
    /// # Errors
    /// The URL cannot be canonicalized (`f` is not called).
    pub fn with_canonical<T>(
        &self,
        url: &str,
        f: impl FnOnce(&str, u64) -> T,
    ) -> Result<T, CanonError> {
        CANON_BUF.with(|cell| {
            // The thread's buffer, unless an `f` further up this thread's stack holds it (it
            // asked for another fingerprint): a buffer of its own then.
            let (mut shared, mut own);
            let buf: &mut String = match cell.try_borrow_mut() {
                Ok(borrowed) => {
                    shared = borrowed;
                    &mut shared
                }
                Err(_) => {
                    own = String::new();
                    &mut own
                }
            };
            self.canon.canonicalize_into(url, buf)?;
            let fp = hash::fingerprint(buf.as_bytes(), self.seed);
            Ok(f(buf, fp))
        })
    }

    /// The fingerprint of raw bytes, with no canonicalization (what `BF.*` items use).
    pub fn of_bytes(&self, item: &[u8]) -> u64 {
        hash::fingerprint(item, self.seed)
    }

    /// The canonicalizer (for a prefix or a host given alone).
    pub fn canonicalizer(&self) -> &Canonicalizer {
        &self.canon
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_url_one_fingerprint_under_one_seed_and_profile() {
        let fp = Fingerprinter::new(&NamespaceOptions::default());
        let a = fp.fingerprint("HTTP://Example.com:80/a?b=1#frag").unwrap();
        assert_eq!(a, fp.fingerprint("http://example.com/a?b=1").unwrap());
        assert_eq!(a, fp.with_canonical("http://example.com/a?b=1", |_, fp| fp).unwrap());
        let other = Fingerprinter::new(&NamespaceOptions { seed: 7, ..Default::default() });
        assert_ne!(a, other.fingerprint("http://example.com/a?b=1").unwrap());
        assert!(fp.fingerprint("not a url").is_err());
        assert!(fp.with_canonical("not a url", |_, _| unreachable!()).is_err());
    }

    /// A caller that fingerprints again from inside `with_canonical` gets the same answers
    /// (a buffer of its own), not a panic on the thread's borrowed buffer.
    #[test]
    fn fingerprinting_again_inside_with_canonical_works() {
        let fp = Fingerprinter::new(&NamespaceOptions::default());
        let (outer, inner) = fp
            .with_canonical("https://a.example/x", |canonical, outer| {
                assert_eq!(canonical, "https://a.example/x");
                (outer, fp.fingerprint("https://b.example/y").unwrap())
            })
            .unwrap();
        assert_eq!(outer, fp.fingerprint("https://a.example/x").unwrap());
        assert_eq!(inner, fp.fingerprint("https://b.example/y").unwrap());
        assert_ne!(outer, inner);
    }
}
