//! The connection to Redis: how the URLs given are used ([`RedisMode`], [`RedisOptions`]), the
//! [`RedisDb`] that opens and drops namespaces there, and the backoff of transient faults.

use super::*;

/// How the URLs given to [`RedisDb::open`] are used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RedisMode {
    /// Ask the first server (`INFO cluster`): a cluster node means [`RedisMode::Cluster`];
    /// otherwise one URL means [`RedisMode::Single`] and several mean [`RedisMode::Nodes`].
    #[default]
    Auto,
    /// One standalone server holds everything.
    Single,
    /// Independent standalone servers (seed 000, Fig. 9): leaf `id` lives on server
    /// `(id - 1) % n`, the metadata on the first. Every client must list them in one order.
    Nodes,
    /// A Redis Cluster; the URLs are seed nodes.
    Cluster,
}

/// Where and how to reach Redis.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// Server URLs (`redis://host:port/`).
    pub urls: Vec<String>,
    /// How to use them.
    pub mode: RedisMode,
    /// Connect, read and write timeout of every request.
    pub timeout: Duration,
    /// Connection attempts (with exponential backoff from 20 ms) before a call fails.
    pub connect_attempts: u32,
    /// Expiry of a split lock: a worker that dies holding it delays the split this long.
    pub lock_ttl: Duration,
    /// Parent-log entries re-hashed per migration step.
    pub migrate_chunk: u64,
    /// Log entries one reply may carry (catch-up is chunked by this).
    pub max_delta: u64,
    /// Insert round trips one process keeps in flight per leaf (at least 1). 1 is best on a
    /// fast network; more hide a slow one, at some Redis CPU per call (see the module docs).
    pub inflight_per_leaf: usize,
    /// How long a call keeps retrying transient failures ([`Error::is_transient`]: a lost
    /// connection, a Redis loading its data, a failover) before it fails with
    /// [`Error::Unavailable`]; waits double from 50 ms to 2 s. Zero: fail at once.
    pub retry_for: Duration,
    /// Print one line on stderr per retry (for command-line tools).
    pub log_retries: bool,
    /// How often a call checks whether the tree's shape changed (one `HGET` of the metadata's
    /// version, at most this often): a client answers "seen" from its replicas without asking
    /// Redis, so a forget by host done by another client is seen by this one's answers at
    /// most this long after it finished. Zero: every call checks (one more round trip).
    pub meta_poll: Duration,
}

impl RedisOptions {
    /// Defaults for `urls`: auto-detected mode, 5 s timeout, 4 connection attempts, 10 s lock,
    /// 30 s of retries.
    pub fn new<S: Into<String>>(urls: impl IntoIterator<Item = S>) -> Self {
        RedisOptions {
            urls: urls.into_iter().map(Into::into).collect(),
            mode: RedisMode::Auto,
            timeout: Duration::from_secs(5),
            connect_attempts: 4,
            lock_ttl: Duration::from_secs(10),
            migrate_chunk: 65_536,
            max_delta: 131_072,
            inflight_per_leaf: 1,
            retry_for: Duration::from_secs(30),
            log_retries: false,
            meta_poll: Duration::from_millis(100),
        }
    }
}

impl From<&str> for RedisOptions {
    /// Defaults for a comma-separated list of URLs.
    fn from(urls: &str) -> Self {
        RedisOptions::new(urls.split(',').map(str::trim).filter(|u| !u.is_empty()))
    }
}

impl From<Vec<String>> for RedisOptions {
    /// Defaults for these URLs.
    fn from(urls: Vec<String>) -> Self {
        RedisOptions::new(urls)
    }
}

/// A connection to the Redis servers that hold namespaces. Cheap to share.
#[derive(Debug, Clone)]
pub struct RedisDb {
    pub(super) router: Arc<Router>,
    pub(super) options: Arc<RedisOptions>,
}

/// `Db::open_redis`, the engine's facade opening the Redis backend, as it did while the backend
/// was a feature of the engine: a trait, since this crate cannot add a method to
/// [`Db`](urlseen_engine::Db) (`use urlseen_redis::OpenRedis`).
pub trait OpenRedis {
    /// Opens the Redis backend (see [`RedisDb::open`]).
    ///
    /// # Errors
    /// See [`RedisDb::open`].
    fn open_redis(options: impl Into<RedisOptions>) -> Result<RedisDb>;
}

impl OpenRedis for urlseen_engine::Db {
    fn open_redis(options: impl Into<RedisOptions>) -> Result<RedisDb> {
        RedisDb::open(options.into())
    }
}

impl RedisDb {
    /// Connects to the servers (detecting a cluster if asked) and loads the cluster's slot map.
    ///
    /// # Errors
    /// [`Error::Config`] for no URL or an unusable option; [`Error::Unavailable`] if the first
    /// server cannot be reached within [`RedisOptions::retry_for`].
    pub fn open(options: RedisOptions) -> Result<Self> {
        let urls: Vec<String> = options
            .urls
            .iter()
            .map(|u| if u.contains("://") { u.clone() } else { format!("redis://{u}/") })
            .collect();
        if urls.is_empty() {
            return Err(Error::Config("no redis URL given".into()));
        }
        if options.migrate_chunk == 0 || options.max_delta == 0 {
            return Err(Error::Config("migrate_chunk and max_delta must be at least 1".into()));
        }
        // A server that is restarting is waited for, as every later call does.
        let mut backoff = Backoff::new(&options, None);
        let (mode, router) = loop {
            match Self::connect(&urls, &options) {
                Ok(connected) => break connected,
                Err(e) => backoff.wait(e)?,
            }
        };
        Ok(RedisDb {
            router: Arc::new(router),
            options: Arc::new(RedisOptions { urls, mode, ..options }),
        })
    }

    /// Detects the mode (if asked) and makes the router.
    pub(super) fn connect(urls: &[String], options: &RedisOptions) -> Result<(RedisMode, Router)> {
        let mode = match options.mode {
            RedisMode::Auto => {
                let probe = Router::new(&urls[..1], Layout::Single, options.timeout, 1)?;
                let info = probe.one(Place { key: Vec::new(), index: 0 }, {
                    let mut c = ::redis::cmd("INFO");
                    c.arg("cluster");
                    c
                })?;
                let text = match info {
                    Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
                    Value::VerbatimString { text, .. } => text,
                    _ => String::new(),
                };
                if text.contains("cluster_enabled:1") {
                    RedisMode::Cluster
                } else if urls.len() == 1 {
                    RedisMode::Single
                } else {
                    RedisMode::Nodes
                }
            }
            m => m,
        };
        let layout = match mode {
            RedisMode::Single if urls.len() == 1 => Layout::Single,
            RedisMode::Single => {
                return Err(Error::Config("single mode takes one URL".into()));
            }
            RedisMode::Nodes => Layout::Nodes(urls.len()),
            _ => Layout::Cluster,
        };
        let router = Router::new(urls, layout, options.timeout, options.connect_attempts)?;
        Ok((mode, router))
    }

    /// The layout in use: `single`, `nodes` or `cluster`.
    pub fn mode(&self) -> RedisMode {
        self.options.mode
    }

    /// Opens namespace `name`, creating it with `options` if Redis does not have it.
    ///
    /// # Errors
    /// [`Error::ParamsMismatch`] if it exists with other parameters; [`Error::Config`] for a
    /// name that cannot be a hash tag; connection errors.
    pub fn namespace(&self, name: &str, options: NamespaceOptions) -> Result<Arc<RedisNamespace>> {
        if name.is_empty()
            || name.len() > 128
            || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
        {
            return Err(Error::Config(format!(
                "namespace name {name:?}: use 1 to 128 of [A-Za-z0-9_.-]"
            )));
        }
        options.validate()?;
        if options.keep_urls {
            // A URL journal lives in a data directory; the Redis backend has none.
            return Err(Error::Engine(urlseen_engine::Error::InvalidOption {
                name: "keep_urls",
                reason: "keeping URLs (for a forget by prefix) is not supported with the Redis \
                         backend"
                    .into(),
            }));
        }
        if options.recrawl_after.is_some() {
            // A window is a tree per generation: `RedisDb::open_namespace` (redis/recrawl.rs).
            return Err(Error::Engine(urlseen_engine::Error::InvalidOption {
                name: "recrawl_after",
                reason: "a recrawl window in Redis is opened with RedisDb::open_namespace".into(),
            }));
        }
        let params = TreeParams::from(&options);
        let layout = match self.router.layout() {
            Layout::Single => "single".to_owned(),
            Layout::Nodes(n) => format!("nodes={n}"),
            Layout::Cluster => "cluster".to_owned(),
        };
        let canon = options.canon.clone();
        let ns_params = |version: &str, params: &TreeParams| {
            let mut text = format!(
                "{version} bits={} k={} split_at={} cap={} c={} fanout={} seed={:#x} fpr={} \
                 canon_v={} canon={:?} layout={layout}",
                params.leaf_bits,
                params.leaf_hashes,
                params.split_at,
                params.leaf_capacity,
                params.initial_leaves,
                params.split.fanout,
                params.seed,
                params.fpr,
                urlseen_canon::CANON_VERSION,
                canon,
            );
            if version != "v1" {
                // What sizes the deeper leaves.
                text += &format!(
                    " growth={} max_bits={} threshold={}",
                    params.split.growth, params.max_leaf_bits, params.split.threshold
                );
            }
            text
        };
        let params_text = ns_params("v2", &params);
        // A namespace made before the default split threshold was lowered (its text says
        // threshold=1) keeps splitting where it did: a client with the default options opens it
        // with those it was made with.
        let legacy =
            (options.split.threshold == urlseen_engine::DEFAULT_SPLIT_THRESHOLD).then(|| {
                let mut old = options.clone();
                old.split.threshold = 1.0;
                old
            });
        let ns = RedisNamespace {
            name: name.to_owned(),
            fingerprinter: Fingerprinter::new(&options),
            options,
            params,
            paths: Paths::new(Routing::Ranges, params.seed),
            router: Arc::clone(&self.router),
            config: Arc::clone(&self.options),
            meta: RwLock::new(Arc::new(Meta::empty())),
            hosts: forget::Hosts::default(),
            meta_polled: AtomicU64::new(0),
            leaves: RwLock::new(HashMap::new()),
            counters: Counters::default(),
            last_error: Mutex::new(None),
            started: Instant::now(),
            epoch: String::new(),
            unrecorded: Mutex::new(Vec::new()),
        };
        // A new namespace gets a new epoch; an existing one keeps its own, which this process
        // then sends with every leaf call: a leaf (or metadata) without it, or with another,
        // is data Redis lost, never a namespace to create again.
        let ours = format!("{:016x}", token());
        let create = || {
            let mut create = self.router.scripts.call(Script::Create, &[&ns.meta_key()]);
            create
                .arg(params_text.as_str())
                .arg(params.initial_leaves)
                .arg(ours.as_str())
                .arg(meta::FORMAT);
            ns.router.one(ns.meta_place(), create)
        };
        let stored = ns.retrying(create)?;
        let (stored, epoch) = match &stored {
            Value::Array(v) => match &v[..] {
                [Value::BulkString(p), Value::BulkString(e)] => (
                    String::from_utf8_lossy(p).into_owned(),
                    String::from_utf8_lossy(e).into_owned(),
                ),
                _ => return Err(ns.protocol(0, "CREATE", &stored)),
            },
            _ => return Err(ns.protocol(0, "CREATE", &stored)),
        };
        // A namespace made before format 2 keeps its routing per level and its one leaf size.
        let (version, routing) = match stored.starts_with("v1 ") {
            true => ("v1", Routing::Levels),
            false => ("v2", Routing::Ranges),
        };
        let ours = ns_params(version, &params);
        let ns = match legacy.map(|old| (TreeParams::from(&old), old)) {
            _ if stored == ours => ns,
            Some((old_params, old)) if stored == ns_params(version, &old_params) => {
                RedisNamespace { options: old, params: old_params, ..ns }
            }
            _ => return Err(Error::ParamsMismatch { name: name.to_owned(), stored, ours }),
        };
        let ns = RedisNamespace { epoch, paths: Paths::new(routing, ns.params.seed), ..ns };
        if let Layout::Nodes(n) = self.router.layout() {
            ns.retrying(|| ns.check_server_order(n))?;
        }
        ns.retrying(|| ns.refresh_meta())?;
        Ok(Arc::new(ns))
    }

    /// Deletes namespace `name` from Redis: its metadata and every node's keys. Other clients
    /// that still use it get errors (no metadata) rather than answers.
    ///
    /// # Errors
    /// Connection errors.
    pub fn drop_namespace(&self, name: &str) -> Result<()> {
        let meta_key = super::meta_key(name);
        let place = super::meta_place(name);
        let reply = self.router.one(place.clone(), {
            let mut c = ::redis::cmd("HGETALL");
            c.arg(&meta_key[..]);
            c
        })?;
        let Ok(meta) = Meta::parse(&reply) else { return Ok(()) };
        let mut reqs = Vec::new();
        for id in 1..meta.nodes.len() as NodeId {
            let keys: Vec<Vec<u8>> =
                NODE_KEYS.iter().map(|s| super::node_key(name, id, s)).collect();
            let mut del = ::redis::cmd("DEL");
            for k in &keys {
                del.arg(&k[..]);
            }
            reqs.push(Req { place: Place { key: keys[0].clone(), index: id - 1 }, cmd: del });
        }
        if let Layout::Nodes(n) = self.router.layout() {
            let pos = super::namespace_key(name, "pos");
            for i in 0..n {
                let mut del = ::redis::cmd("DEL");
                del.arg(&pos[..]);
                reqs.push(Req { place: Place { key: pos.clone(), index: i as u32 }, cmd: del });
            }
        }
        self.router.exec(reqs)?;
        let mut del = ::redis::cmd("DEL");
        del.arg(super::namespace_key(name, "hosts"));
        self.router.one(place.clone(), del)?;
        let mut del = ::redis::cmd("DEL");
        del.arg(&meta_key[..]);
        self.router.one(place, del)?;
        Ok(())
    }

    /// Round-trip times of `PING` to every node (`samples` each), for reports.
    ///
    /// # Errors
    /// Connection errors.
    pub fn ping(&self, samples: usize) -> Result<Vec<(String, Vec<Duration>)>> {
        (0..self.router.node_count())
            .map(|i| Ok((self.router.node_name(i), self.router.ping(i, samples)?)))
            .collect()
    }

    /// Drops every pooled connection; the next call reconnects.
    pub fn reconnect(&self) {
        self.router.reset();
    }
}

/// Paces the attempts of a call that meets transient failures: waits from 50 ms doubling to
/// 2 s, for at most [`RedisOptions::retry_for`] from the first failure, one line on stderr per
/// wait if asked. In a cluster the slot map is read again before each attempt (a failover
/// moves slots).
pub(super) struct Backoff<'a> {
    pub(super) options: &'a RedisOptions,
    pub(super) router: Option<&'a Router>,
    pub(super) first: Option<Instant>,
    pub(super) delay: Duration,
    pub(super) attempts: u32,
}

impl<'a> Backoff<'a> {
    pub(super) fn new(options: &'a RedisOptions, router: Option<&'a Router>) -> Self {
        Backoff { options, router, first: None, delay: Duration::from_millis(50), attempts: 0 }
    }

    /// Waits before the next attempt after `e`; gives `e` back if it is not transient, and
    /// [`Error::Unavailable`] once the budget is spent (the last wait is cut to fit it).
    pub(super) fn wait(&mut self, e: Error) -> Result<()> {
        if !e.is_transient() {
            return Err(e);
        }
        let first = *self.first.get_or_insert_with(Instant::now);
        self.attempts += 1;
        let waited = first.elapsed();
        let Some(left) = self.options.retry_for.checked_sub(waited).filter(|d| !d.is_zero()) else {
            return Err(Error::Unavailable { waited, attempts: self.attempts, last: Box::new(e) });
        };
        let delay = self.delay.min(left);
        if self.options.log_retries {
            eprintln!(
                "urlseen: {e}; retrying in {:.2} s ({:.1} s of {} s spent)",
                delay.as_secs_f64(),
                waited.as_secs_f64(),
                self.options.retry_for.as_secs_f64(),
            );
        }
        std::thread::sleep(delay);
        self.delay = (self.delay * 2).min(Duration::from_secs(2));
        if let Some(router) = self.router
            && router.layout() == Layout::Cluster
        {
            // Best effort: a failure here is the next attempt's to report.
            let _ = router.refresh_slots();
        }
        Ok(())
    }
}
