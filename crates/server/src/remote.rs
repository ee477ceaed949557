//! `urlseen serve --redis`: the `URL.*` namespaces live in Redis or Redis Cluster (the
//! distributed backend, the crate [`urlseen_redis`]), shared with every other `urlseen serve
//! --redis` and `urlseen filter --redis` process on the same servers.
//!
//! `URL.RESERVE` (with `RECRAWL`: a recrawl window in Redis, docs/recrawl.md), `URL.SEEN`,
//! `URL.CHECK`, `URL.INFO` and `URL.FORGET ns HOST h` go to Redis. The commands that need a
//! namespace in this process (`BF.*`, `URL.FORGET` of URLs or a prefix) answer
//! [`NOT_WITH_REDIS`]; the keyspace commands see this process's (empty) local keyspace.
//!
//! Recrawl windows read the time from the [`Clock`] given to [`Remote::new`]: the server's
//! `Db`'s (`DbOptions::clock`), so tests run them on a fake clock.
//!
//! Key lifetimes (`EXPIRE`, `TTL`, `PERSIST`, `URL.RESERVE … TTL`) of a namespace in Redis are
//! the backend's ([`RedisDb::update_expiry`]): every Redis key of the namespace gets the time,
//! and Redis deletes them. A namespace this process had open and that expired is opened again
//! (new and empty) by the next command, never answered from what this process still held.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use urlseen_engine::{Clock, Expiry, ExpiryUpdate, NamespaceOptions, RecrawlReport, SeenSet};
use urlseen_redis::{RedisDb, RedisSet};

use crate::error::{CommandError, URL_NOT_UTF8};

/// The reply of a command that needs a namespace in this process, on a server whose namespaces
/// are in Redis.
pub const NOT_WITH_REDIS: &str = "ERR this command is not available when the server keeps its namespaces in Redis (--redis); \
     URL.RESERVE, URL.SEEN, URL.CHECK, URL.INFO and URL.FORGET ns HOST h are";

/// The Redis side of an [`App`](crate::App): the connection and the namespaces opened so far.
#[derive(Debug)]
pub struct Remote {
    db: RedisDb,
    clock: Arc<dyn Clock>,
    namespaces: Mutex<HashMap<Vec<u8>, RedisSet>>,
}

/// What `URL.INFO` shows of a namespace in Redis.
#[derive(Debug, Clone)]
pub struct RemoteInfo {
    /// Its name.
    pub name: String,
    /// Its options (with its window, if it has one).
    pub options: NamespaceOptions,
    /// URLs recorded (in the live generations, with a window).
    pub count: u64,
    /// Leaves (of every live generation).
    pub leaves: u64,
    /// Depth of the deepest leaf.
    pub height: u32,
    /// Bytes of the leaf filters this server holds for it (its replicas; the logs are in
    /// Redis).
    pub memory_bytes: u64,
    /// The highest FPR of a leaf (of every live generation).
    pub worst_leaf_fpr: f64,
    /// Its window and live generations, if it has one.
    pub recrawl: Option<RecrawlReport>,
}

impl From<urlseen_redis::Error> for CommandError {
    /// The reply of a Redis backend failure: `?` on a backend call gives it.
    fn from(e: urlseen_redis::Error) -> Self {
        if let urlseen_redis::Error::Engine(e) = e {
            // An invalid URL or option: the same reply as a local namespace gives.
            return crate::error::engine_error(&e);
        }
        // One line: a RESP error cannot hold a line break.
        CommandError::Custom(format!("ERR redis backend: {e}").replace(['\r', '\n'], " ").into())
    }
}

impl Remote {
    /// Namespaces in `db`; recrawl windows read `clock`.
    pub fn new(db: RedisDb, clock: Arc<dyn Clock>) -> Remote {
        Remote { db, clock, namespaces: Mutex::new(HashMap::new()) }
    }

    /// Opens (creating it in Redis if it is new) namespace `key` with `options`; an existing
    /// one keeps its recrawl window (or its lack of one), and must have been created with the
    /// same other options.
    ///
    /// # Errors
    /// A name Redis cannot hold, other options than the namespace's, or a Redis failure.
    pub fn namespace(
        &self,
        key: &[u8],
        options: &NamespaceOptions,
    ) -> Result<RedisSet, CommandError> {
        if let Some(ns) = self.namespaces.lock().get(key) {
            return Ok(ns.clone());
        }
        self.reserve(key, options)
    }

    /// Runs `f` on namespace `key` (opened as [`Remote::namespace`] does); if the namespace
    /// this process holds has expired, opens it again (a new one, as Redis has none) and runs
    /// `f` once more on that.
    fn on_namespace<T>(
        &self,
        key: &[u8],
        options: &NamespaceOptions,
        f: impl Fn(&RedisSet) -> Result<T, urlseen_redis::Error>,
    ) -> Result<T, CommandError> {
        let ns = self.namespace(key, options)?;
        match f(&ns) {
            Err(urlseen_redis::Error::Expired { .. }) => {
                self.namespaces.lock().remove(key);
                let ns = self.namespace(key, options)?;
                Ok(f(&ns)?)
            }
            other => Ok(other?),
        }
    }

    /// `TTL` and its family: when namespace `key` expires; `None` if Redis does not hold it.
    ///
    /// # Errors
    /// A Redis failure.
    pub fn expiry(&self, key: &[u8]) -> Result<Option<Expiry>, CommandError> {
        let Ok(name) = std::str::from_utf8(key) else { return Ok(None) };
        Ok(self.db.expiry(name)?)
    }

    /// `EXPIRE` and its family, `PERSIST`: changes when namespace `key` expires, as `decide`
    /// says (see [`RedisDb::update_expiry`]); the namespace this process holds reads its new
    /// lifetime now, or is let go if it was deleted.
    ///
    /// # Errors
    /// A Redis failure; a namespace with a recrawl window (no lifetime of its own).
    pub fn update_expiry(
        &self,
        key: &[u8],
        decide: impl Fn(Expiry) -> Option<Expiry>,
    ) -> Result<ExpiryUpdate, CommandError> {
        let Ok(name) = std::str::from_utf8(key) else { return Ok(ExpiryUpdate::Missing) };
        let update = self.db.update_expiry(name, decide)?;
        let held = self.namespaces.lock().get(key).cloned();
        match (update, held) {
            (ExpiryUpdate::Dropped | ExpiryUpdate::Missing, _) => {
                self.namespaces.lock().remove(key);
            }
            // Expired or gone meanwhile: the next command opens it again.
            (ExpiryUpdate::Changed, Some(RedisSet::Plain(ns))) if ns.refresh().is_err() => {
                self.namespaces.lock().remove(key);
            }
            _ => {}
        }
        Ok(update)
    }

    /// `URL.RESERVE`: opens namespace `key` from Redis, always (not from this process's
    /// cache), so options that differ from the namespace's are refused however it was opened
    /// before.
    ///
    /// # Errors
    /// As [`Remote::namespace`].
    pub fn reserve(
        &self,
        key: &[u8],
        options: &NamespaceOptions,
    ) -> Result<RedisSet, CommandError> {
        let name = std::str::from_utf8(key)
            .map_err(|_| CommandError::custom(crate::error::NAMESPACE_NOT_UTF8))?;
        let ns = self.db.open_namespace_with(name, options.clone(), Arc::clone(&self.clock))?;
        self.namespaces.lock().insert(key.to_vec(), ns.clone());
        Ok(ns)
    }

    /// `URL.INFO`: namespace `key`'s counts and shape, read from Redis now; `None` if Redis
    /// does not hold it. One this process has not opened is opened with `options` (the
    /// server's defaults), as `URL.SEEN` would.
    ///
    /// # Errors
    /// As [`Remote::namespace`].
    pub fn info(
        &self,
        key: &[u8],
        options: &NamespaceOptions,
    ) -> Result<Option<RemoteInfo>, CommandError> {
        let known = self.namespaces.lock().get(key).cloned();
        let ns = match known {
            Some(ns) => ns,
            None => {
                let Ok(name) = std::str::from_utf8(key) else { return Ok(None) };
                if !self.db.namespace_exists(name)? {
                    return Ok(None);
                }
                self.namespace(key, options)?
            }
        };
        let stats = match &ns {
            RedisSet::Plain(plain) => match plain.stats() {
                Err(urlseen_redis::Error::Expired { .. }) => {
                    // Gone by its lifetime: Redis holds no such namespace.
                    self.namespaces.lock().remove(key);
                    return Ok(None);
                }
                other => Some(other?),
            },
            RedisSet::Window(_) => None,
        };
        let info = match &ns {
            RedisSet::Plain(ns) => {
                let Some(s) = stats else { return Ok(None) };
                RemoteInfo {
                    name: ns.name().to_owned(),
                    options: ns.options().clone(),
                    count: s.count,
                    leaves: s.leaves.len() as u64,
                    height: s.height,
                    memory_bytes: s.replica_bytes,
                    worst_leaf_fpr: s.worst_leaf_fpr,
                    recrawl: None,
                }
            }
            RedisSet::Window(w) => {
                let s = w.stats()?;
                RemoteInfo {
                    name: w.name().to_owned(),
                    options: w.options().clone(),
                    count: s.count(),
                    leaves: s.generations.iter().map(|g| g.leaves.len() as u64).sum(),
                    height: s.generations.iter().map(|g| g.height).max().unwrap_or(0),
                    memory_bytes: s.report.live.iter().map(|g| g.memory_bytes).sum(),
                    worst_leaf_fpr: s
                        .report
                        .live
                        .iter()
                        .map(|g| g.worst_leaf_fpr)
                        .fold(0.0, f64::max),
                    recrawl: Some(s.report),
                }
            }
        };
        Ok(Some(info))
    }

    /// `URL.SEEN` (`write`) or `URL.CHECK` on namespace `key`: one answer per URL, or the error
    /// element of a URL that is not valid; the valid ones go to Redis in one batch.
    ///
    /// A Redis that is unreachable for a while is waited for (the backend retries with
    /// backoff, up to `--redis-retry-for`); an insert sent whose reply never came answers its
    /// URLs 0, new (Redis may or may not have recorded them: a crawler must fetch them rather
    /// than lose them), and the backend records them with its next call.
    ///
    /// # Errors
    /// As [`Remote::namespace`]; a Redis failure past the retries, or lost data, fails the
    /// whole command (an error is never an answer).
    pub fn seen_urls<U: AsRef<[u8]>>(
        &self,
        key: &[u8],
        options: &NamespaceOptions,
        urls: &[U],
        write: bool,
    ) -> Result<Vec<Result<bool, CommandError>>, CommandError> {
        self.on_namespace(key, options, |ns| Self::answer(ns, urls, write))
    }

    /// [`Remote::seen_urls`] on namespace `ns`.
    fn answer<U: AsRef<[u8]>>(
        ns: &RedisSet,
        urls: &[U],
        write: bool,
    ) -> Result<Vec<Result<bool, CommandError>>, urlseen_redis::Error> {
        let mut answers: Vec<Result<bool, CommandError>> = Vec::with_capacity(urls.len());
        let mut fps = Vec::with_capacity(urls.len());
        let mut positions = Vec::with_capacity(urls.len());
        // Writes keep each URL's host with its record (a forget by host needs it); a host
        // is listed in the namespace's host dictionary before the insert that carries it.
        let mut hosts = Vec::with_capacity(if write { urls.len() } else { 0 });
        for (i, url) in urls.iter().enumerate() {
            let fp = std::str::from_utf8(url.as_ref())
                .map_err(|_| CommandError::custom(URL_NOT_UTF8))
                .and_then(|url| {
                    if write {
                        ns.fingerprint_host(url)
                    } else {
                        ns.fingerprint(url).map(|fp| (fp, 0))
                    }
                    .map_err(CommandError::from)
                });
            match fp {
                Ok((fp, host)) => {
                    fps.push(fp);
                    if write {
                        hosts.push(host);
                    }
                    positions.push(i);
                    answers.push(Ok(false));
                }
                Err(e) => answers.push(Err(e)),
            }
        }
        let mut seen = vec![false; fps.len()];
        let done = if write {
            ns.seen_fingerprints_hosts(&fps, &hosts, &mut seen)
        } else {
            ns.contains_fingerprints(&fps, &mut seen)
        };
        done?;
        for (&i, &s) in positions.iter().zip(&seen) {
            answers[i] = Ok(s);
        }
        Ok(answers)
    }

    /// `URL.FORGET ns HOST h` on namespace `key` in Redis: how many URLs of host `h` were
    /// forgotten (see `RedisNamespace::forget_host`).
    ///
    /// # Errors
    /// As [`Remote::namespace`]; an invalid host, records of unknown host, a host hash shared
    /// with another host (the engine's replies), or a Redis failure.
    pub fn forget_host(
        &self,
        key: &[u8],
        options: &NamespaceOptions,
        host: &[u8],
    ) -> Result<u64, CommandError> {
        let host = std::str::from_utf8(host)
            .map_err(|_| CommandError::custom(crate::error::HOST_NOT_UTF8))?;
        self.on_namespace(key, options, |ns| ns.forget_host(host))
    }
}
