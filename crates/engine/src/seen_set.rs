//! One trait over every place a namespace's leaves can live: in this process
//! ([`Namespace`](crate::Namespace)) or in Redis (`RedisNamespace`, the `urlseen-redis`
//! crate's). The trait is vocabulary (the server answers through it); the namespace's
//! implementation of it is the namespace's own (`namespace/seen_set.rs`).
//!
//! Code that only asks "seen?" (the `filter` command, a crawler's frontier, a benchmark) takes a
//! `&dyn SeenSet<Error = E>` or a generic `S: SeenSet` and runs unchanged on either backend.
//!
//! ```
//! use urlseen_engine::{Db, NamespaceOptions, SeenSet};
//!
//! fn dedup<S: SeenSet>(set: &S, urls: &[&str]) -> Result<Vec<bool>, S::Error> {
//!     set.seen_batch(urls)
//! }
//! let db = Db::in_memory();
//! let ns = db.create_namespace("jobs", NamespaceOptions::default())?;
//! let seen = dedup(&*ns, &["https://a.example/", "https://A.example/", "https://b.example/"])?;
//! assert_eq!(seen, [false, true, false]);
//! # Ok::<(), urlseen_engine::Error>(())
//! ```

use crate::error::Result;

/// A URL-seen set: check-and-insert and read-only lookups over 64-bit fingerprints, plus the
/// URL-level conveniences built on them.
///
/// Every implementation keeps the engine's invariants: a fingerprint answered "new" once is
/// never answered "new" again (no false negatives), and concurrent check-and-inserts of one
/// fingerprint give "new" to exactly one caller. An error is never an answer: when a call fails,
/// `out` must not be read.
pub trait SeenSet: Send + Sync {
    /// The backend's error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Canonicalizes `url` and hashes it with the namespace's seed (see
    /// [`Namespace::fingerprint`](crate::Namespace::fingerprint)).
    ///
    /// # Errors
    /// An invalid URL.
    fn fingerprint(&self, url: &str) -> Result<u64, Self::Error>;

    /// [`Self::fingerprint`] and the hash of the URL's host, which a backend that can forget
    /// by host keeps with the record (see
    /// [`Namespace::fingerprint_host`](crate::Namespace::fingerprint_host)); 0 (unknown) where
    /// it cannot.
    ///
    /// # Errors
    /// An invalid URL.
    fn fingerprint_host(&self, url: &str) -> Result<(u64, u32), Self::Error> {
        Ok((self.fingerprint(url)?, 0))
    }

    /// [`Self::fingerprint_host`] for each of `urls`, in order, into `out` (cleared first). A
    /// backend may do the work as a batch; the results are those of the single calls.
    fn fingerprint_hosts(&self, urls: &[&str], out: &mut Vec<Result<(u64, u32), Self::Error>>) {
        out.clear();
        out.extend(urls.iter().map(|url| self.fingerprint_host(url)));
    }

    /// Check-and-insert: `out[i]` is `true` if `fps[i]` was (maybe) recorded before, `false` if
    /// it is new and now recorded. A fingerprint repeated within `fps` is new at most once.
    ///
    /// # Errors
    /// A backend failure; then some fingerprints of the batch may be recorded and others not.
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    fn seen_fingerprints(&self, fps: &[u64], out: &mut [bool]) -> Result<(), Self::Error>;

    /// Read-only lookup: `out[i]` is `true` if `fps[i]` was (maybe) recorded.
    ///
    /// # Errors
    /// A backend failure.
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    fn contains_fingerprints(&self, fps: &[u64], out: &mut [bool]) -> Result<(), Self::Error>;

    /// [`Self::seen_fingerprints`], with `then` seeing the answers before they count as
    /// recorded where the backend can hold them back (a persistent
    /// [`Namespace`](crate::Namespace): see
    /// [`Namespace::seen_fingerprints_then`](crate::Namespace::seen_fingerprints_then));
    /// elsewhere `then` runs after the write. `then`'s error is returned as is. A backend that
    /// holds answers back overrides this and [`Self::seen_fingerprints_hosts_then`] both: the
    /// default of the latter writes first.
    ///
    /// # Errors
    /// The backend's, or `then`'s.
    fn seen_fingerprints_then(
        &self,
        fps: &[u64],
        out: &mut [bool],
        then: &mut dyn FnMut(&[bool]) -> std::io::Result<()>,
    ) -> Result<(), SeenThenError<Self::Error>> {
        self.seen_fingerprints(fps, out).map_err(SeenThenError::Backend)?;
        then(out).map_err(SeenThenError::Then)
    }

    /// [`Self::seen_fingerprints`] with each fingerprint's host hash (from
    /// [`Self::fingerprint_host`]), kept with the records where the backend can; `hosts`
    /// empty: every host unknown.
    ///
    /// # Errors
    /// As [`Self::seen_fingerprints`].
    ///
    /// # Panics
    /// If `out.len() != fps.len()`, or `hosts` is neither empty nor as long as `fps`.
    fn seen_fingerprints_hosts(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
    ) -> Result<(), Self::Error> {
        assert!(hosts.is_empty() || hosts.len() == fps.len(), "one host hash per fingerprint");
        self.seen_fingerprints(fps, out)
    }

    /// [`Self::seen_fingerprints_then`] with each fingerprint's host hash, as
    /// [`Self::seen_fingerprints_hosts`]. A backend that holds answers back overrides both.
    ///
    /// # Errors
    /// As [`Self::seen_fingerprints_then`].
    fn seen_fingerprints_hosts_then(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        then: &mut dyn FnMut(&[bool]) -> std::io::Result<()>,
    ) -> Result<(), SeenThenError<Self::Error>> {
        self.seen_fingerprints_hosts(fps, hosts, out).map_err(SeenThenError::Backend)?;
        then(out).map_err(SeenThenError::Then)
    }

    /// Check-and-insert of one URL: `true` if it was seen before.
    ///
    /// # Errors
    /// An invalid URL (nothing recorded) or a backend failure.
    fn seen(&self, url: &str) -> Result<bool, Self::Error> {
        let fp = [self.fingerprint(url)?];
        let mut out = [false];
        self.seen_fingerprints(&fp, &mut out)?;
        Ok(out[0])
    }

    /// Read-only lookup of one URL.
    ///
    /// # Errors
    /// An invalid URL or a backend failure.
    fn contains(&self, url: &str) -> Result<bool, Self::Error> {
        let fp = [self.fingerprint(url)?];
        let mut out = [false];
        self.contains_fingerprints(&fp, &mut out)?;
        Ok(out[0])
    }

    /// Check-and-insert of a batch of URLs. All are canonicalized first; if one is invalid,
    /// nothing is recorded.
    ///
    /// # Errors
    /// The first invalid URL, or a backend failure.
    fn seen_batch<S: AsRef<str>>(&self, urls: &[S]) -> Result<Vec<bool>, Self::Error>
    where
        Self: Sized,
    {
        let fps =
            urls.iter().map(|u| self.fingerprint(u.as_ref())).collect::<Result<Vec<_>, _>>()?;
        let mut out = vec![false; fps.len()];
        self.seen_fingerprints(&fps, &mut out)?;
        Ok(out)
    }
}

/// Why [`SeenSet::seen_fingerprints_then`] failed.
#[derive(Debug, thiserror::Error)]
pub enum SeenThenError<E: std::error::Error + 'static> {
    /// The backend's error.
    #[error(transparent)]
    Backend(E),
    /// `then`'s: the answers could not be handed on.
    #[error(transparent)]
    Then(std::io::Error),
}
