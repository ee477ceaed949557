//! The embedded engine: `urlseen.Db` and its namespaces.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use urlseen_engine::{
    CanonOptions, Db, DbOptions, Error as EngineError, Expiry, ExpiryUpdate, Fsync, ManyOp,
    Namespace, NamespaceOptions, Profile,
};

use crate::errors::{self, InvalidOption};
use crate::stats;

/// The `Db` behind a Python `Db` and every namespace it gave out: the namespaces keep it open
/// (a data directory stays locked while any of them is alive), and `close()` empties it so
/// that every later call raises instead of writing to a directory it no longer holds.
#[derive(Debug)]
struct Handle {
    db: RwLock<Option<Db>>,
}

impl Handle {
    /// Runs `f` on the open `Db`, or raises `Error` if it was closed.
    fn with<T>(&self, f: impl FnOnce(&Db) -> PyResult<T>) -> PyResult<T> {
        let guard = self.db.read();
        match guard.as_ref() {
            Some(db) => f(db),
            None => Err(errors::Error::new_err("the Db is closed")),
        }
    }
}

/// Options of a namespace, from `Db.namespace`'s keyword arguments.
pub(crate) struct Spec {
    pub capacity: u64,
    pub fpr: f64,
    pub profile: Profile,
    pub exact: bool,
    pub counting: bool,
    /// Keep the URLs (for `forget_prefix`): embedded namespaces only.
    pub keep_urls: bool,
    /// A recrawl window, in whole seconds: a URL recorded longer ago is new again.
    pub recrawl_after: Option<u64>,
}

impl Spec {
    pub(crate) fn parse(
        capacity: u64,
        fpr: f64,
        profile: &str,
        exact: bool,
        counting: bool,
    ) -> PyResult<Self> {
        let profile =
            Profile::from_str(profile).map_err(|e| InvalidOption::new_err(e.to_string()))?;
        Ok(Spec { capacity, fpr, profile, exact, counting, keep_urls: false, recrawl_after: None })
    }

    fn options(&self) -> NamespaceOptions {
        NamespaceOptions {
            capacity: self.capacity,
            fpr: self.fpr,
            canon: CanonOptions::new(self.profile),
            exact: self.exact,
            counting: self.counting,
            keep_urls: self.keep_urls,
            recrawl_after: self.recrawl_after.map(std::time::Duration::from_secs),
            ..NamespaceOptions::default()
        }
    }
}

/// An embedded urlseen database: namespaces of URLs, each an independent URL-seen set.
///
/// `Db()` lives in memory (filters plus 12 bytes per URL); `Db(path)` keeps every namespace in
/// the data directory `path` (created if missing), recovered when it is opened again. `fsync`
/// is Redis's `appendfsync`: `"always"` (nothing acknowledged is lost in a crash or power
/// loss), `"everysec"` (a power loss may lose about the last second; a process crash nothing)
/// or `"no"`.
///
/// A data directory is locked while it is open: a second `Db` on it (here or in another
/// process, such as `urlseen serve --data`) raises `Locked`. Use the `Db` as a context manager,
/// or call `close()`, to checkpoint it and release the lock.
#[pyclass(module = "urlseen", name = "Db", frozen)]
#[derive(Debug)]
pub(crate) struct PyDb {
    handle: Arc<Handle>,
    path: Option<PathBuf>,
    fsync: Fsync,
}

#[pymethods]
impl PyDb {
    #[new]
    #[pyo3(signature = (path=None, fsync="everysec"))]
    fn new(py: Python<'_>, path: Option<PathBuf>, fsync: &str) -> PyResult<Self> {
        let fsync = Fsync::from_str(fsync).map_err(|e| InvalidOption::new_err(e.to_string()))?;
        let db = match &path {
            None => Db::in_memory(),
            Some(dir) => {
                let options = DbOptions { fsync, ..DbOptions::default() };
                // Recovery reads files: let other threads run meanwhile.
                py.detach(|| Db::open_with(dir, options)).map_err(errors::engine)?
            }
        };
        Ok(PyDb { handle: Arc::new(Handle { db: RwLock::new(Some(db)) }), path, fsync })
    }

    /// The namespace `name`, created with these options if it does not exist. An existing
    /// namespace keeps the options it was created with (they are stored with it).
    ///
    /// `capacity` sizes it (not a cap: it splits past it and keeps `fpr`). The default, 100,
    /// is the server's for a namespace made by its first write: a small list of fingerprints
    /// (a few hundred bytes for a job of ten URLs) that becomes a tree of filters as it grows,
    /// each level's leaves larger than their parent's; give a big crawl's size to start it as
    /// that tree. `fpr` is the
    /// false-positive bound; `profile` is the canonicalization (`crawler`, `w3lib`,
    /// `safebrowsing`, `none`); `exact` confirms every Bloom positive against the stored
    /// fingerprints (no false positives beyond 64-bit fingerprint collisions); `counting`
    /// (implies `exact`) lets `forget()` work. `keep_urls` keeps every recorded URL in a
    /// journal on disk, so that `forget_prefix()` works (docs/forget.md). `ttl` (seconds)
    /// gives a namespace created by this call a lifetime, as Redis's `EXPIRE` right after it;
    /// an existing namespace keeps its own (`expire()` changes it). `recrawl_after` (whole
    /// seconds) gives a new namespace a recrawl window: a URL recorded longer ago than that is
    /// new again (docs/recrawl.md); not with `counting` or `keep_urls`.
    #[pyo3(signature = (name, *, capacity=100, fpr=0.01, profile="crawler", exact=false, counting=false, keep_urls=false, ttl=None, recrawl_after=None))]
    #[expect(clippy::too_many_arguments, reason = "the Python keyword arguments of namespace()")]
    fn namespace(
        &self,
        py: Python<'_>,
        name: &str,
        capacity: u64,
        fpr: f64,
        profile: &str,
        exact: bool,
        counting: bool,
        keep_urls: bool,
        ttl: Option<f64>,
        recrawl_after: Option<u64>,
    ) -> PyResult<PyNamespace> {
        let mut spec = Spec::parse(capacity, fpr, profile, exact, counting)?;
        spec.keep_urls = keep_urls;
        spec.recrawl_after = recrawl_after;
        let ttl = ttl.map(ttl_millis).transpose()?;
        let handle = Arc::clone(&self.handle);
        let ns = py.detach(|| {
            handle.with(|db| {
                let Some(ms) = ttl else {
                    return db.namespace_or_create(name, spec.options()).map_err(errors::engine);
                };
                if let Some(ns) = db.namespace(name) {
                    return Ok(ns);
                }
                let at = Expiry::At(db.clock().now_millis().saturating_add(ms));
                match db.create_namespace_with_expiry(name, spec.options(), at) {
                    // Made meanwhile by another thread: theirs, with its own lifetime.
                    Err(EngineError::NamespaceExists(_)) => {
                        db.namespace_or_create(name, spec.options()).map_err(errors::engine)
                    }
                    other => other.map_err(errors::engine),
                }
            })
        })?;
        Ok(PyNamespace { ns, handle: Arc::clone(&self.handle) })
    }

    /// Names of the namespaces, sorted.
    fn names(&self) -> PyResult<Vec<String>> {
        self.handle.with(|db| Ok(db.namespace_names()))
    }

    /// Drops namespace `name` and everything it recorded (its files too). Returns whether it
    /// existed.
    fn drop(&self, py: Python<'_>, name: &str) -> PyResult<bool> {
        let handle = Arc::clone(&self.handle);
        py.detach(|| handle.with(|db| db.drop_namespace(name).map_err(errors::engine)))
    }

    /// Gives namespace `name` a lifetime of `seconds` from now (Redis's `EXPIRE`; a time not in
    /// the future drops it). Past it, the namespace is gone, and its memory and files are
    /// freed in the background. Returns whether it existed.
    fn expire(&self, py: Python<'_>, name: &str, seconds: f64) -> PyResult<bool> {
        let handle = Arc::clone(&self.handle);
        py.detach(|| handle.with(|db| expire(db, name, seconds)))
    }

    /// Removes the lifetime of namespace `name` (Redis's `PERSIST`); whether it had one.
    fn persist(&self, py: Python<'_>, name: &str) -> PyResult<bool> {
        let handle = Arc::clone(&self.handle);
        py.detach(|| handle.with(|db| persist(db, name)))
    }

    /// Seconds namespace `name` has left, as Redis's `TTL` (rounded): -2 if there is no such
    /// namespace, -1 if it has no lifetime.
    fn ttl(&self, name: &str) -> PyResult<i64> {
        self.handle.with(|db| Ok(ttl(db, name)))
    }

    /// Makes every record durable now (whatever the fsync policy).
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        let handle = Arc::clone(&self.handle);
        py.detach(|| handle.with(|db| db.sync().map_err(errors::engine)))
    }

    /// Checkpoints and syncs everything, and releases the data directory. Later calls on this
    /// `Db` or its namespaces raise `Error`. Closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let handle = Arc::clone(&self.handle);
        let db = py.detach(|| handle.db.write().take());
        match db {
            Some(db) => py.detach(|| db.close()).map_err(errors::engine),
            None => Ok(()),
        }
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.handle.db.read().is_none()
    }

    /// The data directory, or `None` in memory.
    #[getter]
    fn path(&self) -> Option<String> {
        self.path.as_ref().map(|p| p.display().to_string())
    }

    /// The fsync policy.
    #[getter]
    fn fsync(&self) -> &'static str {
        self.fsync.name()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        match &self.path {
            None => "urlseen.Db(None)".to_owned(),
            Some(p) => {
                format!("urlseen.Db({:?}, fsync={:?})", p.display().to_string(), self.fsync.name())
            }
        }
    }
}

/// One URL-seen set of a `Db` (from `Db.namespace`). Thread-safe; batch calls release the GIL.
#[pyclass(module = "urlseen", name = "Namespace", frozen)]
#[derive(Debug)]
pub(crate) struct PyNamespace {
    ns: Arc<Namespace>,
    handle: Arc<Handle>,
}

impl PyNamespace {
    /// Whether single calls should release the GIL: only when they may touch the disk (a data
    /// directory); in memory a call takes about a microsecond, less than a GIL round trip.
    fn single<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Namespace) -> Result<T, EngineError> + Send,
    ) -> PyResult<T> {
        let run = || self.handle.with(|_| f(&self.ns).map_err(errors::engine));
        if self.ns_is_durable() { py.detach(run) } else { run() }
    }

    fn ns_is_durable(&self) -> bool {
        self.handle.db.read().as_ref().is_some_and(|db| db.path().is_some())
    }

    /// A batch: URLs copied out of Python, then canonicalized, hashed and applied with the GIL
    /// released. Invalid URLs answer `None` and are neither looked up nor recorded.
    fn batch(
        &self,
        py: Python<'_>,
        urls: &Bound<'_, PyAny>,
        op: ManyOp,
    ) -> PyResult<Vec<Option<bool>>> {
        let urls = extract_urls(urls)?;
        py.detach(|| self.handle.with(|_| self.ns.answer_many(&urls, op).map_err(errors::engine)))
    }
}

fn extract_urls(urls: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let mut out = Vec::with_capacity(urls.len().unwrap_or(0));
    for url in urls.try_iter()? {
        out.push(url?.extract::<String>()?);
    }
    Ok(out)
}

#[pymethods]
impl PyNamespace {
    /// Check-and-insert, the crawler's question: `True` if the URL was seen before (or is a
    /// false positive, with probability at most the namespace's `fpr`), `False` if it is new
    /// and now recorded. Raises `InvalidUrl` (nothing recorded) if the URL cannot be
    /// canonicalized.
    fn seen(&self, py: Python<'_>, url: &str) -> PyResult<bool> {
        self.single(py, |ns| ns.seen(url))
    }

    /// `seen` for many URLs, in one engine batch with the GIL released: a list with, for each
    /// URL, `True` (seen), `False` (new, now recorded) or `None` (not a valid URL: neither
    /// looked up nor recorded). A URL repeated in the batch is new only the first time.
    fn seen_many(&self, py: Python<'_>, urls: &Bound<'_, PyAny>) -> PyResult<Vec<Option<bool>>> {
        self.batch(py, urls, ManyOp::Seen)
    }

    /// Read-only `seen`: `True` if the URL was seen (in Bloom mode: maybe seen). Records
    /// nothing. Raises `InvalidUrl`.
    fn contains(&self, py: Python<'_>, url: &str) -> PyResult<bool> {
        self.single(py, |ns| ns.contains(url))
    }

    /// `contains` for many URLs: `True`, `False`, or `None` for an invalid URL.
    fn contains_many(
        &self,
        py: Python<'_>,
        urls: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Option<bool>>> {
        self.batch(py, urls, ManyOp::Contains)
    }

    /// Forgets the URL, so that it is new again: `True` if it was recorded. Only a namespace
    /// created with `counting=True` can forget; any other raises `ForgetUnsupported`. Raises
    /// `InvalidUrl`.
    fn forget(&self, py: Python<'_>, url: &str) -> PyResult<bool> {
        self.single(py, |ns| ns.forget(url))
    }

    /// `forget` for many URLs: `True` (was recorded, now forgotten), `False` (was not
    /// recorded), or `None` for an invalid URL.
    fn forget_many(&self, py: Python<'_>, urls: &Bound<'_, PyAny>) -> PyResult<Vec<Option<bool>>> {
        if !self.ns.can_forget() {
            return Err(errors::engine(EngineError::ForgetUnsupported(self.ns.name().to_owned())));
        }
        self.batch(py, urls, ManyOp::Forget)
    }

    /// Forgets every URL of `host` (its canonical host, any scheme and port), in any
    /// namespace: afterwards they are new again, every other URL stays seen. Returns how many
    /// were forgotten. Raises `InvalidUrl` for a host that is not one, `ForgetUnsupported`
    /// when the namespace holds records it cannot tell the host of (docs/forget.md).
    fn forget_host(&self, py: Python<'_>, host: &str) -> PyResult<u64> {
        py.detach(|| self.handle.with(|_| self.ns.forget_host(host).map_err(errors::engine)))
    }

    /// Forgets every URL that starts with `prefix` (compared as canonical URLs), in a
    /// namespace created with `keep_urls=True`; returns how many. Raises `InvalidUrl` for a
    /// prefix that is not a URL or could grow broader (a query, a fragment, a dot segment),
    /// `ForgetUnsupported` in a namespace that does not keep its URLs.
    fn forget_prefix(&self, py: Python<'_>, prefix: &str) -> PyResult<u64> {
        py.detach(|| self.handle.with(|_| self.ns.forget_prefix(prefix).map_err(errors::engine)))
    }

    /// The namespace's statistics, with the keys of the server's `URL.INFO` (docs/python.md).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.handle.with(|_| stats::embedded(py, &self.ns))
    }

    /// The namespace's name.
    #[getter]
    fn name(&self) -> &str {
        self.ns.name()
    }

    /// Distinct URLs recorded.
    fn __len__(&self) -> usize {
        usize::try_from(self.ns.len()).unwrap_or(usize::MAX)
    }

    /// `Db.expire` of this namespace.
    fn expire(&self, py: Python<'_>, seconds: f64) -> PyResult<bool> {
        py.detach(|| self.handle.with(|db| expire(db, self.ns.name(), seconds)))
    }

    /// `Db.persist` of this namespace.
    fn persist(&self, py: Python<'_>) -> PyResult<bool> {
        py.detach(|| self.handle.with(|db| persist(db, self.ns.name())))
    }

    /// `Db.ttl` of this namespace.
    fn ttl(&self) -> PyResult<i64> {
        self.handle.with(|db| Ok(ttl(db, self.ns.name())))
    }

    fn __repr__(&self) -> String {
        format!("urlseen.Namespace({:?})", self.ns.name())
    }
}

/// A lifetime in seconds, in ms (a positive, finite number).
fn ttl_millis(seconds: f64) -> PyResult<u64> {
    if seconds.is_finite() && seconds > 0.0 && seconds < 1e15 {
        Ok((seconds * 1000.0).round() as u64)
    } else {
        Err(InvalidOption::new_err(format!(
            "ttl must be a positive number of seconds, got {seconds}"
        )))
    }
}

fn expire(db: &Db, name: &str, seconds: f64) -> PyResult<bool> {
    if !seconds.is_finite() {
        return Err(InvalidOption::new_err(format!("seconds must be finite, got {seconds}")));
    }
    let now = db.clock().now_millis();
    let at = match seconds > 0.0 {
        true => now.saturating_add((seconds * 1000.0).round() as u64),
        false => 0,
    };
    db.set_expiry(name, Expiry::At(at)).map_err(errors::engine)
}

fn persist(db: &Db, name: &str) -> PyResult<bool> {
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
