//! The embedded engine: `Db` and its namespaces (`urlseen_engine::Db`).
//!
//! Calls are synchronous: one URL takes about a microsecond in memory, less than handing it
//! to a thread pool would; a batch of a million takes about a second on the calling thread.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use napi_derive::napi;
use parking_lot::RwLock;
use urlseen_engine::{
    CanonOptions, Db, DbOptions, Error as EngineError, Expiry, ExpiryUpdate, Fsync, ManyOp,
    Namespace, NamespaceOptions as EngineOptions, Profile,
};

use crate::errors::{self, CLOSED, INVALID_OPTION, Result};
use crate::stats;

/// The `Db` behind a JS `Db` and every namespace it gave out: the namespaces keep it open (a
/// data directory stays locked while any of them is reachable), and `close()` empties it so
/// that every later call throws instead of writing to a directory it no longer holds.
#[derive(Debug)]
struct Handle {
    db: RwLock<Option<Db>>,
}

impl Handle {
    /// Runs `f` on the open `Db`, or throws `Closed`.
    fn with<T>(&self, f: impl FnOnce(&Db) -> Result<T>) -> Result<T> {
        let guard = self.db.read();
        match guard.as_ref() {
            Some(db) => f(db),
            None => Err(errors::err(CLOSED, "the Db is closed")),
        }
    }
}

/// Options of `new Db(path, options)`.
#[napi(object)]
#[derive(Debug, Default)]
pub struct DbOpenOptions {
    /// Redis's `appendfsync`: `"always"`, `"everysec"` (the default) or `"no"`.
    pub fsync: Option<String>,
}

/// Options of `Db.namespace(name, options)`, used only when the call creates the namespace.
#[napi(object)]
#[derive(Debug, Default)]
pub struct NamespaceOptions {
    /// Expected URLs (default 1,000,000): sizes the namespace; not a cap.
    pub capacity: Option<f64>,
    /// False-positive bound (default 0.01).
    pub fpr: Option<f64>,
    /// Canonicalization: `crawler` (default), `w3lib`, `safebrowsing` or `none` (raw keys).
    pub profile: Option<String>,
    /// Confirm every Bloom positive against stored fingerprints.
    pub exact: Option<bool>,
    /// Counting filters (implies `exact`): `forget()` works.
    pub counting: Option<bool>,
    /// Keep every recorded URL on disk, so that `forgetPrefix()` works.
    pub keep_urls: Option<bool>,
    /// Lifetime in seconds of a namespace this call creates (Redis's `EXPIRE`).
    pub ttl: Option<f64>,
    /// Recrawl window in seconds: a URL recorded longer ago than that is new again.
    pub recrawl_after: Option<f64>,
    /// Generations of the recrawl window (default 8).
    pub generations: Option<u32>,
}

fn invalid(msg: String) -> napi::Error<errors::Code> {
    errors::err(INVALID_OPTION, msg)
}

/// A count from a JS number: a positive whole number.
fn whole(what: &str, x: f64) -> Result<u64> {
    if x.is_finite() && x >= 1.0 && x.fract() == 0.0 && x <= 2f64.powi(53) {
        Ok(x as u64)
    } else {
        Err(invalid(format!("{what} must be a positive whole number, got {x}")))
    }
}

/// Seconds from a JS number, in whole milliseconds (a positive, finite number).
fn millis(what: &str, seconds: f64) -> Result<u64> {
    if seconds.is_finite() && seconds > 0.0 && seconds < 1e15 {
        Ok((seconds * 1000.0).round() as u64)
    } else {
        Err(invalid(format!("{what} must be a positive number of seconds, got {seconds}")))
    }
}

impl NamespaceOptions {
    fn engine(&self) -> Result<EngineOptions> {
        let base = EngineOptions::default();
        let profile = match &self.profile {
            Some(p) => Profile::from_str(p).map_err(|e| invalid(e.to_string()))?,
            None => Profile::Crawler,
        };
        let recrawl_after = match self.recrawl_after {
            Some(s) => Some(Duration::from_millis(millis("recrawlAfter", s)?)),
            None => None,
        };
        Ok(EngineOptions {
            capacity: match self.capacity {
                Some(c) => whole("capacity", c)?,
                None => 1_000_000,
            },
            fpr: self.fpr.unwrap_or(0.01),
            canon: CanonOptions::new(profile),
            exact: self.exact.unwrap_or(false),
            counting: self.counting.unwrap_or(false),
            keep_urls: self.keep_urls.unwrap_or(false),
            recrawl_after,
            generations: self.generations.unwrap_or(base.generations),
            ..base
        })
    }
}

/// An embedded urlseen database: namespaces of URLs, each an independent URL-seen set.
///
/// `new Db()` lives in memory; `new Db(path)` keeps every namespace in the data directory
/// `path` (created if missing), recovered when it is opened again. A data directory is locked
/// while it is open: a second `Db` on it (here or in another process, such as
/// `urlseen serve --data`) throws `Locked`. `close()` checkpoints it and releases the lock.
#[napi]
#[derive(Debug)]
pub struct JsDb {
    handle: Arc<Handle>,
    path: Option<String>,
    fsync: Fsync,
}

#[napi]
impl JsDb {
    #[napi(constructor)]
    pub fn new(path: Option<String>, options: Option<DbOpenOptions>) -> Result<Self> {
        let options = options.unwrap_or_default();
        let fsync = match options.fsync.as_deref() {
            Some(f) => Fsync::from_str(f).map_err(|e| invalid(e.to_string()))?,
            None => Fsync::EverySec,
        };
        let db = match &path {
            None => Db::in_memory(),
            Some(dir) => Db::open_with(dir, DbOptions { fsync, ..DbOptions::default() })
                .map_err(errors::engine)?,
        };
        Ok(JsDb { handle: Arc::new(Handle { db: RwLock::new(Some(db)) }), path, fsync })
    }

    /// The namespace `name`, created with `options` if it does not exist; an existing one keeps
    /// the options it was created with.
    #[napi]
    pub fn namespace(
        &self,
        name: String,
        options: Option<NamespaceOptions>,
    ) -> Result<JsNamespace> {
        let options = options.unwrap_or_default();
        let engine_options = options.engine()?;
        let ttl = options.ttl.map(|s| millis("ttl", s)).transpose()?;
        let ns = self.handle.with(|db| {
            let Some(ms) = ttl else {
                return db.namespace_or_create(&name, engine_options).map_err(errors::engine);
            };
            if let Some(ns) = db.namespace(&name) {
                return Ok(ns);
            }
            let at = Expiry::At(db.clock().now_millis().saturating_add(ms));
            match db.create_namespace_with_expiry(&name, engine_options.clone(), at) {
                // Made meanwhile by another thread: theirs, with its own lifetime.
                Err(EngineError::NamespaceExists(_)) => {
                    db.namespace_or_create(&name, engine_options).map_err(errors::engine)
                }
                other => other.map_err(errors::engine),
            }
        })?;
        Ok(JsNamespace { ns, handle: Arc::clone(&self.handle) })
    }

    /// Names of the namespaces, sorted.
    #[napi]
    pub fn names(&self) -> Result<Vec<String>> {
        self.handle.with(|db| Ok(db.namespace_names()))
    }

    /// Drops namespace `name` and everything it recorded (its files too); whether it existed.
    #[napi]
    pub fn drop(&self, name: String) -> Result<bool> {
        self.handle.with(|db| db.drop_namespace(&name).map_err(errors::engine))
    }

    /// Namespace `name` expires `seconds` from now (a time not in the future drops it);
    /// whether it existed.
    #[napi]
    pub fn expire(&self, name: String, seconds: f64) -> Result<bool> {
        self.handle.with(|db| expire(db, &name, seconds))
    }

    /// Removes the lifetime of namespace `name`; whether it had one.
    #[napi]
    pub fn persist(&self, name: String) -> Result<bool> {
        self.handle.with(|db| persist(db, &name))
    }

    /// Seconds namespace `name` has left, as Redis's `TTL`: -2 if there is no such namespace,
    /// -1 if it has no lifetime.
    #[napi]
    pub fn ttl(&self, name: String) -> Result<i64> {
        self.handle.with(|db| Ok(ttl(db, &name)))
    }

    /// Makes every record durable now, whatever the fsync policy.
    #[napi]
    pub fn sync(&self) -> Result<()> {
        self.handle.with(|db| db.sync().map_err(errors::engine))
    }

    /// Checkpoints and syncs everything and releases the data directory. Later calls on this
    /// `Db` or its namespaces throw `Closed`. Closing twice does nothing.
    #[napi]
    pub fn close(&self) -> Result<()> {
        let db = self.handle.db.write().take();
        match db {
            Some(db) => db.close().map_err(errors::engine),
            None => Ok(()),
        }
    }

    /// Whether `close()` was called.
    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.handle.db.read().is_none()
    }

    /// The data directory, or `null` in memory.
    #[napi(getter)]
    pub fn path(&self) -> Option<String> {
        self.path.clone()
    }

    /// The fsync policy.
    #[napi(getter)]
    pub fn fsync(&self) -> &'static str {
        self.fsync.name()
    }
}

/// One URL-seen set of a `Db` (from `Db.namespace`).
#[napi]
#[derive(Debug)]
pub struct JsNamespace {
    ns: Arc<Namespace>,
    handle: Arc<Handle>,
}

impl JsNamespace {
    fn single(&self, f: impl FnOnce(&Namespace) -> urlseen_engine::Result<bool>) -> Result<bool> {
        self.handle.with(|_| f(&self.ns).map_err(errors::engine))
    }

    /// A batch: every URL canonicalized and hashed, then applied as one engine batch. Invalid
    /// URLs answer `null` and are neither looked up nor recorded (the server's `-1` rule,
    /// docs/protocol.md), so the embedded engine and the client answer a batch alike.
    fn batch(&self, urls: &[String], op: ManyOp) -> Result<Vec<Option<bool>>> {
        self.handle.with(|_| self.ns.answer_many(urls, op).map_err(errors::engine))
    }
}

#[napi]
impl JsNamespace {
    /// Check-and-insert: `true` if the URL was seen before (or is a false positive, with
    /// probability at most `fpr`), `false` if it is new and now recorded. Throws `InvalidUrl`
    /// (nothing recorded) if the URL cannot be canonicalized.
    #[napi]
    pub fn seen(&self, url: String) -> Result<bool> {
        self.single(|ns| ns.seen(&url))
    }

    /// `seen` for many URLs in one engine batch: `true`, `false`, or `null` for an invalid URL
    /// (neither looked up nor recorded). A URL repeated in the batch is new only the first time.
    #[napi]
    pub fn seen_many(&self, urls: Vec<String>) -> Result<Vec<Option<bool>>> {
        self.batch(&urls, ManyOp::Seen)
    }

    /// Read-only `seen`: records nothing. Throws `InvalidUrl`.
    #[napi]
    pub fn contains(&self, url: String) -> Result<bool> {
        self.single(|ns| ns.contains(&url))
    }

    /// `contains` for many URLs: `true`, `false`, or `null` for an invalid URL.
    #[napi]
    pub fn contains_many(&self, urls: Vec<String>) -> Result<Vec<Option<bool>>> {
        self.batch(&urls, ManyOp::Contains)
    }

    /// Forgets the URL, so that it is new again: whether it was recorded. Only a namespace
    /// created with `counting: true` can; any other throws `ForgetUnsupported`.
    #[napi]
    pub fn forget(&self, url: String) -> Result<bool> {
        self.single(|ns| ns.forget(&url))
    }

    /// `forget` for many URLs: `true` (was recorded), `false`, or `null` for an invalid URL.
    #[napi]
    pub fn forget_many(&self, urls: Vec<String>) -> Result<Vec<Option<bool>>> {
        if !self.ns.can_forget() {
            return Err(errors::engine(EngineError::ForgetUnsupported(self.ns.name().to_owned())));
        }
        self.batch(&urls, ManyOp::Forget)
    }

    /// Forgets every URL of `host` (any scheme and port); how many were forgotten.
    #[napi]
    pub fn forget_host(&self, host: String) -> Result<i64> {
        self.handle.with(|_| {
            let n = self.ns.forget_host(&host).map_err(errors::engine)?;
            Ok(i64::try_from(n).unwrap_or(i64::MAX))
        })
    }

    /// Forgets every URL that starts with `prefix`, in a namespace created with
    /// `keepUrls: true`; how many were forgotten.
    #[napi]
    pub fn forget_prefix(&self, prefix: String) -> Result<i64> {
        self.handle.with(|_| {
            let n = self.ns.forget_prefix(&prefix).map_err(errors::engine)?;
            Ok(i64::try_from(n).unwrap_or(i64::MAX))
        })
    }

    /// The namespace's statistics, with the keys of the server's `URL.INFO`.
    #[napi(ts_return_type = "Record<string, unknown>")]
    pub fn stats(&self) -> Result<serde_json::Value> {
        self.handle.with(|_| Ok(stats::embedded(&self.ns)))
    }

    /// The namespace's name.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.ns.name().to_owned()
    }

    /// Distinct URLs recorded.
    #[napi(getter)]
    pub fn size(&self) -> i64 {
        i64::try_from(self.ns.len()).unwrap_or(i64::MAX)
    }

    /// `Db.expire` of this namespace.
    #[napi]
    pub fn expire(&self, seconds: f64) -> Result<bool> {
        self.handle.with(|db| expire(db, self.ns.name(), seconds))
    }

    /// `Db.persist` of this namespace.
    #[napi]
    pub fn persist(&self) -> Result<bool> {
        self.handle.with(|db| persist(db, self.ns.name()))
    }

    /// `Db.ttl` of this namespace.
    #[napi]
    pub fn ttl(&self) -> Result<i64> {
        self.handle.with(|db| Ok(ttl(db, self.ns.name())))
    }
}

fn expire(db: &Db, name: &str, seconds: f64) -> Result<bool> {
    if !seconds.is_finite() {
        return Err(invalid(format!("seconds must be finite, got {seconds}")));
    }
    let now = db.clock().now_millis();
    let at = match seconds > 0.0 {
        true => now.saturating_add((seconds * 1000.0).round() as u64),
        false => 0,
    };
    db.set_expiry(name, Expiry::At(at)).map_err(errors::engine)
}

fn persist(db: &Db, name: &str) -> Result<bool> {
    db.update_expiry(name, |cur| (cur != Expiry::Never).then_some(Expiry::Never))
        .map(|u| u == ExpiryUpdate::Changed)
        .map_err(errors::engine)
}

fn ttl(db: &Db, name: &str) -> i64 {
    match db.expiry(name) {
        None => -2,
        Some(Expiry::Never) => -1,
        Some(Expiry::At(at)) => {
            let left = at.saturating_sub(db.clock().now_millis());
            i64::try_from(left.saturating_add(500) / 1000).unwrap_or(i64::MAX)
        }
    }
}
