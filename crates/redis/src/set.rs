//! What [`RedisDb::open_namespace`](super::RedisDb::open_namespace) opens: a namespace in
//! Redis, plain or with a recrawl window, behind one type.

use std::sync::Arc;

use super::{Error, RedisNamespace, RedisWindow, Result};
use urlseen_engine::NamespaceOptions;

/// A namespace in Redis, with or without a recrawl window: what [`super::RedisDb::open_namespace`]
/// opens. Cheap to clone.
#[derive(Debug, Clone)]
pub enum RedisSet {
    /// No window: one tree, every URL seen forever.
    Plain(Arc<RedisNamespace>),
    /// A recrawl window.
    Window(Arc<RedisWindow>),
}

impl RedisSet {
    /// The namespace's options (with its window, if it has one).
    pub fn options(&self) -> &NamespaceOptions {
        match self {
            RedisSet::Plain(ns) => ns.options(),
            RedisSet::Window(w) => w.options(),
        }
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        match self {
            RedisSet::Plain(ns) => ns.name(),
            RedisSet::Window(w) => w.name(),
        }
    }

    /// Check-and-insert of fingerprints with their URLs' host hashes (from
    /// [`SeenSet::fingerprint_host`](urlseen_engine::SeenSet::fingerprint_host)), which a plain
    /// namespace's records keep for a forget by host; a window's generations keep none.
    ///
    /// # Errors
    /// As [`RedisNamespace::seen_fingerprints_hosts`].
    ///
    /// # Panics
    /// If `out.len() != fps.len()`, or `hosts` is neither empty nor as long.
    pub fn seen_fingerprints_hosts(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
    ) -> Result<()> {
        match self {
            RedisSet::Plain(ns) => ns.seen_fingerprints_hosts(fps, hosts, out),
            RedisSet::Window(w) => w.seen(fps, out),
        }
    }

    /// Forgets every URL of `host` (see [`RedisNamespace::forget_host`]); how many.
    ///
    /// # Errors
    /// As [`RedisNamespace::forget_host`]; a window refuses
    /// ([`urlseen_engine::Error::ForgetByUnsupported`]): its generations keep no hosts in Redis.
    pub fn forget_host(&self, host: &str) -> Result<u64> {
        match self {
            RedisSet::Plain(ns) => ns.forget_host(host),
            RedisSet::Window(w) => Err(Error::Engine(urlseen_engine::Error::ForgetByUnsupported {
                name: w.name().to_owned(),
                what: "by host",
                reason: "it has a recrawl window in Redis, whose generations do not keep their \
                         records' hosts; wait for the window to expire the host's URLs",
            })),
        }
    }
}

impl urlseen_engine::SeenSet for RedisSet {
    type Error = Error;

    fn fingerprint(&self, url: &str) -> Result<u64> {
        match self {
            RedisSet::Plain(ns) => ns.fingerprint(url),
            RedisSet::Window(w) => w.fingerprint(url),
        }
    }

    fn seen_fingerprints(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        match self {
            RedisSet::Plain(ns) => ns.seen_fingerprints(fps, out),
            RedisSet::Window(w) => w.seen(fps, out),
        }
    }

    fn fingerprint_host(&self, url: &str) -> Result<(u64, u32)> {
        match self {
            RedisSet::Plain(ns) => ns.fingerprint_host(url),
            RedisSet::Window(w) => w.fingerprint(url).map(|fp| (fp, 0)),
        }
    }

    fn seen_fingerprints_hosts(&self, fps: &[u64], hosts: &[u32], out: &mut [bool]) -> Result<()> {
        RedisSet::seen_fingerprints_hosts(self, fps, hosts, out)
    }

    fn contains_fingerprints(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        match self {
            RedisSet::Plain(ns) => ns.contains_fingerprints(fps, out),
            RedisSet::Window(w) => w.contains(fps, out),
        }
    }
}
