//! `urlseen.Client`: the embedded API over `urlseen serve`, with redis-rs (sync, RESP3).
//!
//! Written in Rust rather than in Python on a socket: the wheel already carries redis-rs (the
//! workspace's Redis backend uses it), so it costs no dependency, and a batch is encoded,
//! sent, read and decoded with the GIL released.

use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use redis::{ConnectionLike, IntoConnectionInfo, ProtocolVersion};

use crate::embedded::Spec;
use crate::errors::{self, InvalidOption, InvalidUrl};

/// URLs per `URL.SEEN` call of a batch: the calls of one batch go out in one pipeline, and the
/// server runs consecutive calls on one namespace as one engine batch (up to 512 calls).
const URLS_PER_CALL: usize = 512;

struct Remote {
    client: redis::Client,
    /// `None` after a connection error: the next call connects again.
    conn: Mutex<Option<redis::Connection>>,
    url: String,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").field("url", &self.url).finish_non_exhaustive()
    }
}

impl Remote {
    /// Runs `f` on the connection (connecting first if needed). A connection that failed is
    /// dropped, so that the next call starts on a fresh one; the failed call is not retried
    /// (it may have been applied), it raises `ConnectionFailed`.
    fn with<T>(
        &self,
        f: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> PyResult<T> {
        let mut guard = self.conn.lock();
        if guard.as_ref().is_none_or(|c| !c.is_open()) {
            *guard = Some(self.client.get_connection().map_err(|e| errors::remote(&e))?);
        }
        let Some(conn) = guard.as_mut() else {
            return Err(errors::ConnectionFailed::new_err("no connection"));
        };
        f(conn).map_err(|e| {
            if e.is_io_error() || e.is_connection_dropped() || e.is_timeout() {
                *guard = None;
            }
            errors::remote(&e)
        })
    }
}

/// A client of `urlseen serve`, with the API of `Db`: `Client(url).namespace(name, ...)` gives
/// a namespace with the same methods as `Db.namespace`, so moving from one process to a fleet
/// of crawlers is a one-line change.
///
/// `url` is a Redis URL: `redis://[user:password@]host[:port][/db]`. The connection is made
/// at once (raising `ConnectionFailed` if the server cannot be reached) and again after a
/// connection error. One connection, shared by the threads that use the client.
#[pyclass(module = "urlseen", name = "Client", frozen)]
#[derive(Debug)]
pub(crate) struct PyClient {
    remote: Arc<Remote>,
}

#[pymethods]
impl PyClient {
    #[new]
    fn new(py: Python<'_>, url: &str) -> PyResult<Self> {
        let info = url
            .into_connection_info()
            .map_err(|e| InvalidOption::new_err(format!("bad server URL {url:?}: {e}")))?;
        // RESP3, so that URL.INFO's doubles and booleans arrive typed, as the embedded
        // engine's stats() gives them.
        let settings = info.redis_settings().clone().set_protocol(ProtocolVersion::RESP3);
        let info = info.set_redis_settings(settings);
        let client = redis::Client::open(info).map_err(|e| errors::remote(&e))?;
        let remote = Arc::new(Remote { client, conn: Mutex::new(None), url: url.to_owned() });
        py.detach(|| remote.with(|c| redis::cmd("PING").query::<String>(c)))?;
        Ok(PyClient { remote })
    }

    /// The namespace `name` on the server, created there with these options if it does not
    /// exist (`URL.RESERVE`); an existing one keeps its own options. The options are those of
    /// `Db.namespace` (`keep_urls`: `URL.RESERVE … KEEPURLS`; `ttl`: `TTL`, whole seconds;
    /// `recrawl_after`: `RECRAWL`).
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
        ttl: Option<u64>,
        recrawl_after: Option<u64>,
    ) -> PyResult<PyRemoteNamespace> {
        let spec = Spec::parse(capacity, fpr, profile, exact, counting)?;
        let mut cmd = redis::cmd("URL.RESERVE");
        cmd.arg(name)
            .arg("CAPACITY")
            .arg(spec.capacity)
            .arg("ERROR")
            .arg(spec.fpr)
            .arg("PROFILE")
            .arg(spec.profile.name());
        if spec.exact {
            cmd.arg("EXACT");
        }
        if spec.counting {
            cmd.arg("COUNTING");
        }
        if keep_urls {
            cmd.arg("KEEPURLS");
        }
        if let Some(secs) = recrawl_after {
            cmd.arg("RECRAWL").arg(secs);
        }
        if let Some(secs) = ttl {
            cmd.arg("TTL").arg(secs);
        }
        let reserved = py.detach(|| {
            self.remote.with(|c| match cmd.query::<()>(c) {
                // An existing namespace keeps its options, as `Db.namespace` does.
                Err(e) if e.detail().is_some_and(|d| d.contains("item exists")) => Ok(()),
                other => other,
            })
        });
        reserved?;
        Ok(PyRemoteNamespace { remote: Arc::clone(&self.remote), name: name.to_owned() })
    }

    /// Drops namespace `name` on the server (`DEL`). Returns whether it existed.
    fn drop(&self, py: Python<'_>, name: &str) -> PyResult<bool> {
        py.detach(|| self.remote.with(|c| redis::cmd("DEL").arg(name).query::<i64>(c)))
            .map(|n| n > 0)
    }

    /// Namespace `name` expires `seconds` from now (`PEXPIRE`; a time not in the future drops
    /// it). Returns whether it exists.
    fn expire(&self, py: Python<'_>, name: &str, seconds: f64) -> PyResult<bool> {
        if !seconds.is_finite() {
            return Err(InvalidOption::new_err(format!("seconds must be finite, got {seconds}")));
        }
        let ms = (seconds * 1000.0).round() as i64;
        py.detach(|| self.remote.with(|c| redis::cmd("PEXPIRE").arg(name).arg(ms).query::<i64>(c)))
            .map(|n| n > 0)
    }

    /// Removes the lifetime of namespace `name` (`PERSIST`); whether it had one.
    fn persist(&self, py: Python<'_>, name: &str) -> PyResult<bool> {
        py.detach(|| self.remote.with(|c| redis::cmd("PERSIST").arg(name).query::<i64>(c)))
            .map(|n| n > 0)
    }

    /// Seconds namespace `name` has left (`TTL`): -2 if there is no such namespace, -1 if it
    /// has no lifetime.
    fn ttl(&self, py: Python<'_>, name: &str) -> PyResult<i64> {
        py.detach(|| self.remote.with(|c| redis::cmd("TTL").arg(name).query::<i64>(c)))
    }

    /// Names of the namespaces on the server, sorted (`KEYS *`).
    fn names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let mut names = py
            .detach(|| self.remote.with(|c| redis::cmd("KEYS").arg("*").query::<Vec<String>>(c)))?;
        names.sort();
        Ok(names)
    }

    /// Closes the connection (a later call connects again).
    fn close(&self) {
        *self.remote.conn.lock() = None;
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close();
        false
    }

    fn __repr__(&self) -> String {
        format!("urlseen.Client({:?})", self.remote.url)
    }
}

/// A namespace on `urlseen serve` (from `Client.namespace`): the methods of `Namespace`, each a
/// round trip (a batch: one pipeline), with the GIL released while it waits.
#[pyclass(module = "urlseen", name = "RemoteNamespace", frozen)]
#[derive(Debug)]
pub(crate) struct PyRemoteNamespace {
    remote: Arc<Remote>,
    name: String,
}

impl PyRemoteNamespace {
    fn single(&self, py: Python<'_>, command: &str, url: &str) -> PyResult<bool> {
        let answer = py.detach(|| {
            self.remote.with(|c| redis::cmd(command).arg(&self.name).arg(url).query::<Vec<i64>>(c))
        })?;
        match answer.as_slice() {
            [1] => Ok(true),
            [0] => Ok(false),
            [-1] => Err(InvalidUrl::new_err(format!("invalid URL: {url:?}"))),
            other => Err(errors::ServerError::new_err(format!(
                "{command} answered {other:?} for one URL"
            ))),
        }
    }

    fn batch(
        &self,
        py: Python<'_>,
        command: &str,
        urls: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Option<bool>>> {
        let mut list = Vec::with_capacity(urls.len().unwrap_or(0));
        for url in urls.try_iter()? {
            list.push(url?.extract::<String>()?);
        }
        if list.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for chunk in list.chunks(URLS_PER_CALL) {
            pipe.cmd(command).arg(&self.name).arg(chunk);
        }
        let replies: Vec<Vec<i64>> = py.detach(|| self.remote.with(|c| pipe.query(c)))?;
        let out: Vec<Option<bool>> = replies
            .into_iter()
            .flatten()
            .map(|n| match n {
                -1 => None,
                n => Some(n == 1),
            })
            .collect();
        if out.len() != list.len() {
            return Err(errors::ServerError::new_err(format!(
                "{command} answered {} items for {} URLs",
                out.len(),
                list.len()
            )));
        }
        Ok(out)
    }

    /// `URL.FORGET ns HOST|PREFIX arg`: the count the server answers.
    fn forget_by(&self, py: Python<'_>, by: &str, arg: &str) -> PyResult<u64> {
        py.detach(|| {
            self.remote.with(|c| redis::cmd("URL.FORGET").arg(&self.name).arg(by).arg(arg).query(c))
        })
    }

    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let value = py.detach(|| {
            self.remote.with(|c| c.req_command(redis::cmd("URL.INFO").arg(&self.name)))
        })?;
        match crate::stats::value_to_py(py, value)?.cast_into::<PyDict>() {
            Ok(dict) => Ok(dict),
            Err(_) => Err(errors::ServerError::new_err("URL.INFO did not answer a map")),
        }
    }
}

#[pymethods]
impl PyRemoteNamespace {
    /// `Namespace.seen` on the server (`URL.SEEN`).
    fn seen(&self, py: Python<'_>, url: &str) -> PyResult<bool> {
        self.single(py, "URL.SEEN", url)
    }

    /// `Namespace.seen_many` on the server: `URL.SEEN` calls of up to 512 URLs, in one
    /// pipeline. `None` for an invalid URL (the server's `-1`).
    fn seen_many(&self, py: Python<'_>, urls: &Bound<'_, PyAny>) -> PyResult<Vec<Option<bool>>> {
        self.batch(py, "URL.SEEN", urls)
    }

    /// `Namespace.contains` on the server (`URL.CHECK`).
    fn contains(&self, py: Python<'_>, url: &str) -> PyResult<bool> {
        self.single(py, "URL.CHECK", url)
    }

    /// `Namespace.contains_many` on the server (`URL.CHECK`, pipelined).
    fn contains_many(
        &self,
        py: Python<'_>,
        urls: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Option<bool>>> {
        self.batch(py, "URL.CHECK", urls)
    }

    /// `Namespace.forget` on the server (`URL.FORGET`).
    fn forget(&self, py: Python<'_>, url: &str) -> PyResult<bool> {
        self.single(py, "URL.FORGET", url)
    }

    /// `Namespace.forget_many` on the server (`URL.FORGET`, pipelined).
    fn forget_many(&self, py: Python<'_>, urls: &Bound<'_, PyAny>) -> PyResult<Vec<Option<bool>>> {
        self.batch(py, "URL.FORGET", urls)
    }

    /// `Namespace.forget_host` on the server (`URL.FORGET ns HOST h`): how many URLs of the
    /// host were forgotten.
    fn forget_host(&self, py: Python<'_>, host: &str) -> PyResult<u64> {
        self.forget_by(py, "HOST", host)
    }

    /// `Namespace.forget_prefix` on the server (`URL.FORGET ns PREFIX p`): how many URLs under
    /// the prefix were forgotten.
    fn forget_prefix(&self, py: Python<'_>, prefix: &str) -> PyResult<u64> {
        self.forget_by(py, "PREFIX", prefix)
    }

    /// `Namespace.stats` on the server: the `URL.INFO` map.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.info(py)
    }

    /// The namespace's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Distinct URLs recorded (`URL.INFO`'s `count`).
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.info(py)?.get_item("count")?.map_or(Ok(0), |n| n.extract())
    }

    fn __repr__(&self) -> String {
        format!("urlseen.RemoteNamespace({:?}, {:?})", self.remote.url, self.name)
    }
}
