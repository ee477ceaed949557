//! The DSBF with its leaves in Redis or Redis Cluster (feature `redis`): one URL-seen set shared
//! by any number of crawler processes on any number of machines (seed 000).
//!
//! ```no_run
//! use urlseen_engine::{Db, NamespaceOptions, SeenSet};
//!
//! // One server; or "redis://a:6379/,redis://b:6379/" (independent servers or cluster seeds),
//! // or a `RedisOptions` with timeouts and the mode set.
//! let db = Db::open_redis("redis://127.0.0.1:6379/")?;
//! let ns = db.namespace("crawl", NamespaceOptions::default())?;
//! assert!(!ns.seen("https://example.com/a")?); // new, now recorded for every process
//! assert!(ns.seen("https://EXAMPLE.com/a")?); // the same canonical URL
//! # Ok::<(), urlseen_engine::redis::Error>(())
//! ```
//!
//! # Design, in one paragraph
//! A leaf is stored in Redis as its **fingerprint log** (a string of 8-byte fingerprints, append
//! only) and a **state** key, under one hash tag `{ns:id}`, so one Lua script can work on both
//! atomically. Each client keeps a **replica** of the leaf's blocked Bloom filter built from the
//! log prefix it has read (`synced` entries). A check-and-insert tests the replica first (a hit
//! is a hit: the replica's bits are a subset of the leaf's); the misses go to Redis in one
//! `EVALSHA` per leaf, pipelined per node, which refuses if the leaf is frozen, compares the
//! candidates *exactly* with the log entries the replica has not seen yet, appends the new ones
//! and returns those entries. So the Bloom test runs in the client at memory speed and Redis
//! does one `APPEND` per leaf per batch: see `docs/distributed.md` for why this beats a bitmap
//! in Redis (`SETBIT`/`BITFIELD` cost about 1 µs per bit inside Redis, 7 bits per URL), for the
//! split protocol, and for the argument that no recorded URL is ever answered "new".
//!
//! # Quirks
//! - Every client holds the filter of every leaf it touches: memory per client equals the
//!   in-process engine's filters (about 1.2 bytes per URL at 1%), not its logs.
//! - A client joining a large namespace first reads the logs (8 bytes per URL).
//! - Durability is Redis's: `appendonly yes` + `appendfsync` decide what a crash of Redis loses.
//!   What it loses is refused ([`Error::LostData`]) by every client that has the namespace
//!   open, not answered new; a client that opens it afterwards cannot tell (docs/distributed.md,
//!   "Lost data").
//! - Transient faults are retried with backoff for [`RedisOptions::retry_for`]. An insert sent
//!   whose reply never came answers its candidates new (they may not be recorded: a re-send
//!   would answer "seen"), and records them with the next call.
//! - A call that fails with an error may have recorded part of its batch; a retry then answers
//!   "seen" for those URLs. A crawler that must not lose URLs treats them as new.
//! - [`RedisNamespace::forget_host`] rebuilds the leaves holding the host's URLs as new leaves
//!   (never rewriting a log others index by offset); another client's answers show it at most
//!   [`RedisOptions::meta_poll`] later. Records keep their host only when written with one
//!   ([`crate::SeenSet::fingerprint_host`], `seen`, `seen_batch`): `seen_fingerprints` alone
//!   records hosts as unknown, and a forget by host then refuses.

mod dump;
mod error;
mod forget;
mod lookup;
mod meta;
mod recrawl;
mod router;
mod scripts;
mod split;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ::redis::Value;
use parking_lot::{Mutex, RwLock};
use urlseen_filter::{BlockedBloom, hash};

use crate::fingerprint::Fingerprinter;
use crate::options::{NamespaceOptions, SplitMode};
use crate::tree::params::{level_seed, probe_seed};
use crate::tree::{NodeId, TreeParams};
pub use dump::RedisRestore;
pub use error::{Error, Lost, Result};
use meta::{Meta, State};
pub use recrawl::{MAX_MARGIN_MS, RedisSet, RedisWindow, RedisWindowStats};
use router::{Failed, Layout, Place, Req, Router};
use scripts::Script;

/// The keys of one tree node, `urlseen:{ns:id}:<what>`: what dropping a namespace deletes
/// (and what a recrawl window's generation gives its expiry).
const NODE_KEYS: [&str; 6] = ["log", "st", "mig", "lock", "id", "hosts"];

/// Rounds of re-routing (frozen leaves, stale metadata) one call may take.
const MAX_ROUNDS: usize = 64;

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
    router: Arc<Router>,
    options: Arc<RedisOptions>,
}

impl crate::Db {
    /// Opens the Redis backend (see [`RedisDb::open`]).
    ///
    /// # Errors
    /// See [`RedisDb::open`].
    pub fn open_redis(options: impl Into<RedisOptions>) -> Result<RedisDb> {
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
    fn connect(urls: &[String], options: &RedisOptions) -> Result<(RedisMode, Router)> {
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
            return Err(Error::Engine(crate::Error::InvalidOption {
                name: "keep_urls",
                reason: "keeping URLs (for a forget by prefix) is not supported with the Redis \
                         backend"
                    .into(),
            }));
        }
        if options.recrawl_after.is_some() {
            // A window is a tree per generation: `RedisDb::open_namespace` (redis/recrawl.rs).
            return Err(Error::Engine(crate::Error::InvalidOption {
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
        let params_text = format!(
            "v1 bits={} k={} split_at={} cap={} c={} fanout={} seed={:#x} fpr={} canon_v={} canon={:?} layout={layout}",
            params.leaf_bits,
            params.leaf_hashes,
            params.split_at,
            params.leaf_capacity,
            params.initial_leaves,
            params.split.fanout,
            params.seed,
            params.fpr,
            urlseen_canon::CANON_VERSION,
            options.canon,
        );
        let split_point =
            ((params.leaf_capacity as f64 * params.split.threshold).floor() as u64).max(1);
        let ns = RedisNamespace {
            split_point,
            name: name.to_owned(),
            fingerprinter: Fingerprinter::new(&options),
            options,
            params,
            router: Arc::clone(&self.router),
            config: Arc::clone(&self.options),
            meta: RwLock::new(Arc::new(Meta {
                version: 0,
                params: String::new(),
                epoch: String::new(),
                nodes: Vec::new(),
                forgets: Vec::new(),
            })),
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
            create.arg(params_text.as_str()).arg(params.initial_leaves).arg(ours.as_str());
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
        if stored != params_text {
            return Err(Error::ParamsMismatch { name: name.to_owned(), stored, ours: params_text });
        }
        let ns = RedisNamespace { epoch, ..ns };
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
        let meta_key = format!("urlseen:{{{name}}}:meta").into_bytes();
        let place = Place { key: meta_key.clone(), index: 0 };
        let reply = self.router.one(place.clone(), {
            let mut c = ::redis::cmd("HGETALL");
            c.arg(&meta_key[..]);
            c
        })?;
        let Ok(meta) = Meta::parse(&reply) else { return Ok(()) };
        let mut reqs = Vec::new();
        for id in 1..meta.nodes.len() as NodeId {
            let keys: Vec<Vec<u8>> = NODE_KEYS
                .iter()
                .map(|s| format!("urlseen:{{{name}:{id}}}:{s}").into_bytes())
                .collect();
            let mut del = ::redis::cmd("DEL");
            for k in &keys {
                del.arg(&k[..]);
            }
            reqs.push(Req { place: Place { key: keys[0].clone(), index: id - 1 }, cmd: del });
        }
        if let Layout::Nodes(n) = self.router.layout() {
            let pos = format!("urlseen:{{{name}}}:pos").into_bytes();
            for i in 0..n {
                let mut del = ::redis::cmd("DEL");
                del.arg(&pos[..]);
                reqs.push(Req { place: Place { key: pos.clone(), index: i as u32 }, cmd: del });
            }
        }
        self.router.exec(reqs)?;
        let mut del = ::redis::cmd("DEL");
        del.arg(format!("urlseen:{{{name}}}:hosts").into_bytes());
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

/// A client-side copy of one node's filter, built from its log.
#[derive(Debug)]
struct Replica {
    filter: BlockedBloom,
    /// Log entries applied to `filter`.
    synced: u64,
    /// What the last read of the node's state said.
    state: LeafState,
    /// The log entry at `synced - 1` (as stored, 8 bytes), sent with every `INSERT` and `SYNC`
    /// so that Redis can tell a log that lost entries and grew again from the one this replica
    /// copies: a length alone cannot.
    last: [u8; 8],
}

impl Replica {
    /// Records that the filter now holds the log up to `end`, whose last entry is `last`
    /// (`synced` only grows: another reply may have gone further). A replica is never reset: a
    /// log that lost entries is refused ([`Error::LostData`]), not read again.
    fn advance(&mut self, end: u64, last: &[u8]) {
        if end > self.synced && last.len() == 8 {
            self.synced = end;
            self.last.copy_from_slice(last);
        }
    }

    /// The check sent with a request: the last entry covered, or nothing when none is.
    fn last_covered(&self) -> &[u8] {
        if self.synced == 0 { &[] } else { &self.last }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LeafState {
    /// Taking writes (or not read yet).
    Active,
    /// Frozen, and `synced` is the whole (immutable) log.
    Final,
    /// Split finished: its entries are in the children.
    Retired,
}

#[derive(Debug)]
struct LeafCell {
    replica: RwLock<Replica>,
    /// Bounds this process's insert round trips in flight on this leaf. With one, threads
    /// never race each other on a leaf: each checks its candidates against the others'
    /// results in the replica, and Redis always takes the cheap path (no entries to compare).
    /// More overlap round trips at the price of that comparison (correct either way).
    gate: Gate,
}

/// A counting semaphore.
#[derive(Debug, Default)]
struct Gate {
    busy: Mutex<usize>,
    free: parking_lot::Condvar,
}

impl Gate {
    fn enter(&self, limit: usize) -> GateGuard<'_> {
        let mut busy = self.busy.lock();
        while *busy >= limit.max(1) {
            self.free.wait(&mut busy);
        }
        *busy += 1;
        GateGuard(self)
    }
}

struct GateGuard<'a>(&'a Gate);

impl Drop for GateGuard<'_> {
    fn drop(&mut self) {
        *self.0.busy.lock() -= 1;
        self.0.free.notify_one();
    }
}

#[derive(Debug, Default)]
struct Counters {
    round_trips: AtomicU64,
    candidates: AtomicU64,
    rerouted: AtomicU64,
    splits_done: AtomicU64,
    split_errors: AtomicU64,
    last_help_ms: AtomicU64,
    unknown: AtomicU64,
}

/// Statistics of a Redis-backed namespace, from [`RedisNamespace::stats`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RedisStats {
    /// Fingerprints in the leaves' logs (every distinct URL recorded).
    pub count: u64,
    /// `(node id, entries)` of every leaf.
    pub leaves: Vec<(NodeId, u64)>,
    /// Nodes splitting now.
    pub splitting: usize,
    /// Depth of the deepest leaf.
    pub height: u32,
    /// Metadata version.
    pub version: u64,
    /// Insert scripts this client ran.
    pub round_trips: u64,
    /// Fingerprints this client sent to Redis (replica misses).
    pub candidates: u64,
    /// Batches re-routed after a frozen or retired leaf refused them.
    pub rerouted: u64,
    /// Splits this client completed.
    pub splits_done: u64,
    /// Splits this client tried and failed (retried later); see [`RedisNamespace::last_split_error`].
    pub split_errors: u64,
    /// Commands this client's connections re-sent after `MOVED`, `ASK`, `TRYAGAIN` or
    /// `NOSCRIPT` (shared by the namespaces of one [`RedisDb`]).
    pub redirects: u64,
    /// URLs this client answered new because their insert's outcome was unknown (the
    /// connection dropped after the call was sent).
    pub unknown_outcome: u64,
}

/// Where [`RedisNamespace::split_until`] stops, simulating a worker that dies.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitStop {
    /// After freezing the leaf, before publishing the split in the metadata.
    AfterFreeze,
    /// After migrating this many chunks.
    AfterChunks(u64),
}

/// What one split attempt did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitOutcome {
    /// The node is now inner (by us or by someone before us).
    Done,
    /// The leaf is below its split point.
    NotFull,
    /// Another worker holds the node's lock.
    Busy,
    /// The leaf's parent is still splitting; it splits after its parent is done.
    WaitingForParent,
    /// Stopped on purpose by [`RedisNamespace::split_until`], lock kept.
    Stopped,
}

/// One namespace whose leaves live in Redis. `Send + Sync`; share it between threads (each
/// call takes its own connections from a pool).
#[derive(Debug)]
pub struct RedisNamespace {
    name: String,
    options: NamespaceOptions,
    params: TreeParams,
    /// Entries at which a leaf splits (kept even under [`SplitMode::Never`], whose `params`
    /// say never, so explicit splits still know when a leaf is full).
    split_point: u64,
    fingerprinter: Fingerprinter,
    router: Arc<Router>,
    config: Arc<RedisOptions>,
    meta: RwLock<Arc<Meta>>,
    leaves: RwLock<HashMap<NodeId, Arc<LeafCell>>>,
    counters: Counters,
    last_error: Mutex<Option<String>>,
    started: Instant,
    /// The incarnation of the namespace this process opened (`epoch` in its metadata and in
    /// every leaf's identity).
    epoch: String,
    /// Fingerprints (and their host hashes) of insert calls whose outcome is unknown (sent, no
    /// reply): answered new, maybe not recorded; sent again with the next call, their answers
    /// unused.
    unrecorded: Mutex<Vec<(u64, u32)>>,
    /// The hosts this client listed in the namespace's host dictionary, and those to list
    /// before a record carries their hash.
    hosts: forget::Hosts,
    /// When (ms since `started`) a call last checked the metadata's version.
    meta_polled: AtomicU64,
}

impl RedisNamespace {
    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The options it was opened with.
    pub fn options(&self) -> &NamespaceOptions {
        &self.options
    }

    /// Sizes and seeds of the tree.
    pub fn params(&self) -> &TreeParams {
        &self.params
    }

    /// Entries at which a leaf splits (also under [`SplitMode::Never`], for explicit splits).
    pub fn split_point(&self) -> u64 {
        self.split_point
    }

    fn meta_key(&self) -> Vec<u8> {
        format!("urlseen:{{{}}}:meta", self.name).into_bytes()
    }

    fn meta_place(&self) -> Place {
        Place { key: self.meta_key(), index: 0 }
    }

    /// The `nodes` layout places leaf `id` on server `(id - 1) mod n` of the list this process
    /// was given, so every process must list the servers in one order: one that lists them in
    /// another would keep its leaves (and its metadata) on other servers, and answer new again
    /// what the others recorded. Each server keeps the position it was first given for this
    /// namespace (`urlseen:{ns}:pos`); a process that gives it another is refused.
    fn check_server_order(&self, n: usize) -> Result<()> {
        let key = format!("urlseen:{{{}}}:pos", self.name).into_bytes();
        let set = (0..n)
            .map(|i| {
                let mut cmd = ::redis::cmd("SET");
                cmd.arg(&key[..]).arg(i).arg("NX");
                Req { place: Place { key: key.clone(), index: i as u32 }, cmd }
            })
            .collect();
        self.router.exec(set)?;
        let get = (0..n)
            .map(|i| {
                let mut cmd = ::redis::cmd("GET");
                cmd.arg(&key[..]);
                Req { place: Place { key: key.clone(), index: i as u32 }, cmd }
            })
            .collect();
        for (i, reply) in self.router.exec(get)?.iter().enumerate() {
            let Value::BulkString(stored) = reply else {
                return Err(self.protocol(0, "GET (server position)", reply));
            };
            if stored.as_slice() != i.to_string().as_bytes() {
                return Err(Error::Config(format!(
                    "namespace {:?}: server {} was listed at position {} when the namespace \
                     was created, and is at position {i} here: list the servers in the same \
                     order in every process",
                    self.name,
                    self.router.node_name(i),
                    String::from_utf8_lossy(stored),
                )));
            }
        }
        Ok(())
    }

    fn key(&self, id: NodeId, what: &str) -> Vec<u8> {
        format!("urlseen:{{{}:{id}}}:{what}", self.name).into_bytes()
    }

    fn place(&self, id: NodeId) -> Place {
        Place { key: self.key(id, "log"), index: id.saturating_sub(1) }
    }

    fn protocol(&self, id: NodeId, what: &'static str, reply: &Value) -> Error {
        let node = match self.router.layout() {
            Layout::Single => self.router.node_name(0),
            _ => format!("(leaf {id} of {})", self.name),
        };
        Error::Protocol { node, what, reply: format!("{reply:?}") }
    }

    fn lost_data(&self, leaf: NodeId, had: u64, now: u64) -> Error {
        self.lost(Lost::Entries { leaf, had, now })
    }

    fn lost(&self, lost: Lost) -> Error {
        Error::LostData { name: self.name.clone(), lost }
    }

    fn other_epoch(&self, leaf: Option<NodeId>, found: &[u8]) -> Error {
        self.lost(Lost::Epoch {
            leaf,
            ours: self.epoch.clone(),
            found: String::from_utf8_lossy(found).into_owned(),
        })
    }

    /// Runs `f` until it succeeds, retrying transient failures (see [`Backoff`]). Only for
    /// calls that may run twice: reads, and the idempotent scripts.
    fn retrying<T>(&self, mut f: impl FnMut() -> Result<T>) -> Result<T> {
        let mut backoff = Backoff::new(&self.config, Some(&self.router));
        loop {
            match f() {
                Ok(v) => return Ok(v),
                Err(e) => backoff.wait(e)?,
            }
        }
    }

    /// Gives leaf `id` its identity, after the metadata confirms that it never had one (one
    /// that had is lost data, not a leaf to claim again). Idempotent: racing claimers agree.
    fn claim(&self, id: NodeId) -> Result<()> {
        match self.claim_meta(id, false) {
            // Marked: lost, unless another client claimed it after our call was refused (it
            // marks only once the identity is written, so the identity is there now).
            Err(Error::LostData { lost: Lost::Leaf { .. }, .. }) => {
                let mut get = ::redis::cmd("HGET");
                get.arg(self.key(id, "id")).arg("epoch");
                return match self.router.one(self.place(id), get)? {
                    Value::BulkString(e) if e == self.epoch.as_bytes() => Ok(()),
                    Value::BulkString(e) => Err(self.other_epoch(Some(id), &e)),
                    _ => Err(self.lost(Lost::Leaf { leaf: id })),
                };
            }
            other => other?,
        }
        let known = self.cell(id).replica.read().synced;
        let mut cmd = self.router.scripts.call(
            Script::ClaimLeaf,
            &[&self.key(id, "id"), &self.key(id, "log"), &self.key(id, "st")],
        );
        cmd.arg(self.epoch.as_str()).arg(known);
        let reply = self.router.one(self.place(id), cmd)?;
        match &reply {
            Value::Array(v) => match &v[..] {
                [Value::Int(1)] => {}
                [Value::Int(0), Value::BulkString(e)] => return Err(self.other_epoch(Some(id), e)),
                [Value::Int(-1), Value::Int(len), Value::Int(known)] => {
                    return Err(self.lost_data(id, *known as u64, *len as u64));
                }
                _ => return Err(self.protocol(id, "CLAIM_LEAF", &reply)),
            },
            _ => return Err(self.protocol(id, "CLAIM_LEAF", &reply)),
        }
        self.claim_meta(id, true)
    }

    /// Checks (or, with `mark`, records) in the metadata that leaf `id` was claimed.
    fn claim_meta(&self, id: NodeId, mark: bool) -> Result<()> {
        let mut cmd = self.router.scripts.call(Script::ClaimMeta, &[&self.meta_key()]);
        cmd.arg(self.epoch.as_str()).arg(id).arg(u8::from(mark));
        let reply = self.router.one(self.meta_place(), cmd)?;
        match &reply {
            Value::Array(v) => match &v[..] {
                [Value::Int(0)] => Ok(()),
                [Value::Int(1)] => Err(self.lost(Lost::Namespace)),
                [Value::Int(2), Value::BulkString(e)] => Err(self.other_epoch(None, e)),
                [Value::Int(3)] => Err(self.lost(Lost::Leaf { leaf: id })),
                _ => Err(self.protocol(id, "CLAIM_META", &reply)),
            },
            _ => Err(self.protocol(id, "CLAIM_META", &reply)),
        }
    }

    /// `SYNC` of node `id` from entry `from` (`last`: the entry before it, or empty), at most
    /// `max` entries.
    fn sync_cmd(&self, id: NodeId, from: u64, max: u64, last: &[u8]) -> ::redis::Cmd {
        let mut cmd = self
            .router
            .scripts
            .call(Script::Sync, &[&self.key(id, "log"), &self.key(id, "st"), &self.key(id, "id")]);
        cmd.arg(from).arg(max).arg(last).arg(self.epoch.as_str());
        cmd
    }

    /// Reads a `SYNC` reply: the read, `None` if the node must be claimed first, or the lost
    /// data it shows.
    fn sync_reply(&self, id: NodeId, from: u64, reply: &Value) -> Result<Option<SyncReply>> {
        let Value::Array(v) = reply else { return Err(self.protocol(id, "SYNC", reply)) };
        let (state, len, data, code) = match &v[..] {
            [Value::BulkString(s), Value::Int(len), Value::BulkString(d), Value::Int(code), ..] => {
                (String::from_utf8_lossy(s).into_owned(), *len as u64, d, *code)
            }
            _ => return Err(self.protocol(id, "SYNC", reply)),
        };
        match code {
            0 => {}
            1 => {
                let recorded = match v.get(4) {
                    Some(Value::Int(n)) => *n as u64,
                    _ => 0,
                };
                return Err(self.lost_data(id, if recorded > len { recorded } else { from }, len));
            }
            4 => return Ok(None),
            5 => return Err(self.other_epoch(Some(id), data)),
            _ => return Err(self.protocol(id, "SYNC", reply)),
        }
        if data.len() % 8 != 0 {
            return Err(self.protocol(id, "SYNC", reply));
        }
        Ok(Some(SyncReply { state, len, data: data.clone() }))
    }

    /// One `SYNC`, claiming the node first if it has no identity yet.
    fn sync_one(&self, id: NodeId, from: u64, max: u64, last: &[u8]) -> Result<SyncReply> {
        for _ in 0..3 {
            let reply = self.router.one(self.place(id), self.sync_cmd(id, from, max, last))?;
            if let Some(r) = self.sync_reply(id, from, &reply)? {
                return Ok(r);
            }
            self.claim(id)?;
        }
        Err(Error::TooManyRetries { rounds: 3, why: format!("node {id} stayed unclaimed") })
    }

    fn bad_meta(&self, reason: impl Into<String>) -> Error {
        Error::BadMeta { name: self.name.clone(), reason: reason.into() }
    }

    fn meta(&self) -> Arc<Meta> {
        Arc::clone(&self.meta.read())
    }

    /// Re-reads the metadata; drops replicas of nodes that are gone.
    fn refresh_meta(&self) -> Result<Arc<Meta>> {
        let mut cmd = ::redis::cmd("HGETALL");
        cmd.arg(self.meta_key());
        let reply = self.router.one(self.meta_place(), cmd)?;
        if matches!(&reply, Value::Array(v) if v.is_empty())
            || matches!(&reply, Value::Map(v) if v.is_empty())
        {
            // This process opened it (its CREATE ran): gone since, not "new".
            return Err(self.lost(Lost::Namespace));
        }
        let meta = Arc::new(Meta::parse(&reply).map_err(|r| self.bad_meta(r))?);
        if meta.epoch != self.epoch {
            return Err(self.other_epoch(None, meta.epoch.as_bytes()));
        }
        if meta.params != *self.meta.read().params && !self.meta.read().params.is_empty() {
            return Err(self.bad_meta("the namespace was re-created with other parameters"));
        }
        let installed = {
            let mut current = self.meta.write();
            if meta.version >= current.version {
                *current = Arc::clone(&meta);
            }
            Arc::clone(&current)
        };
        // Prune by the newest metadata, never by a reply that arrived late: an older copy
        // can show a splitting parent as absent, and dropping its frozen replica while a
        // round still routes through it would let an entry not yet migrated be added to
        // the child again. By the installed copy, a node leaves only once it is inner, when
        // the children hold all of its entries.
        self.leaves.write().retain(|id, _| {
            matches!(installed.node(*id).map(|n| &n.state), Some(State::Leaf | State::Splitting(_)))
        });
        Ok(installed)
    }

    fn cell(&self, id: NodeId) -> Arc<LeafCell> {
        if let Some(c) = self.leaves.read().get(&id) {
            return Arc::clone(c);
        }
        let mut leaves = self.leaves.write();
        Arc::clone(leaves.entry(id).or_insert_with(|| {
            Arc::new(LeafCell {
                replica: RwLock::new(Replica {
                    filter: BlockedBloom::new(
                        self.params.leaf_bits,
                        self.params.leaf_hashes,
                        probe_seed(self.params.seed),
                    ),
                    synced: 0,
                    state: LeafState::Active,
                    last: [0; 8],
                }),
                gate: Gate::default(),
            })
        }))
    }

    /// The leaf that owns `fp`, pushing the splitting nodes on the way to `parents`.
    fn route(&self, meta: &Meta, fp: u64, parents: &mut Vec<NodeId>) -> Result<NodeId> {
        let mut id = 0;
        loop {
            let node = meta.node(id).ok_or_else(|| self.bad_meta(format!("no node {id}")))?;
            let children = match &node.state {
                State::Leaf => return Ok(id),
                State::Splitting(c) => {
                    parents.push(id);
                    c
                }
                State::Inner(c) => c,
            };
            let seed = level_seed(self.params.seed, node.depth);
            let at = hash::reduce(hash::mix64(fp ^ seed), children.len() as u64) as usize;
            id = children[at];
        }
    }

    /// Reads node `id`'s log from its replica's `synced` on, up to `max` entries, into the
    /// replica. Returns the node's state string and log length.
    fn sync_step(&self, id: NodeId, cell: &LeafCell, max: u64) -> Result<(String, u64)> {
        let (from, last) = {
            let r = cell.replica.read();
            (r.synced, r.last_covered().to_vec())
        };
        let SyncReply { state, len, data } = self.sync_one(id, from, max, &last)?;
        if from < len && data.is_empty() {
            return Err(Error::Protocol {
                node: format!("(leaf {id} of {})", self.name),
                what: "SYNC",
                reply: format!("no entries from {from} of {len}"),
            });
        }
        if len < from && state.is_empty() {
            // A log shorter than what we held when we asked (compared with `from`, not the
            // current `synced`, which another thread's reply may have advanced since): Redis
            // lost entries. Refuse, never re-answer.
            return Err(self.lost_data(id, from, len));
        }
        let mut r = cell.replica.write();
        for c in data.chunks_exact(8) {
            r.filter.insert(u64_le(c));
        }
        // The replica held [0, from) at least, and now [from, from + n) too.
        if let Some(last) = data.len().checked_sub(8).map(|at| &data[at..]) {
            r.advance(from + (data.len() / 8) as u64, last);
        }
        Ok((state, len))
    }

    /// Brings node `id`'s replica up to the log's current end. Returns its state string.
    fn sync_node(&self, id: NodeId) -> Result<String> {
        let cell = self.cell(id);
        loop {
            let (state, len) = self.sync_step(id, &cell, self.config.max_delta)?;
            let synced = cell.replica.read().synced;
            if synced >= len || state == "I" {
                let mut r = cell.replica.write();
                r.state = match state.as_str() {
                    "F" => LeafState::Final,
                    "I" => LeafState::Retired,
                    _ => LeafState::Active,
                };
                return Ok(state);
            }
        }
    }

    /// Makes the replicas of every splitting node final (their logs are frozen, so one full
    /// read suffices).
    fn ensure_parents(&self, meta: &Meta) -> Result<()> {
        for id in meta.splitting() {
            let cell = self.cell(id);
            if cell.replica.read().state == LeafState::Active {
                let state = self.sync_node(id)?;
                if state.is_empty() {
                    return Err(self.bad_meta(format!("node {id} is splitting but not frozen")));
                }
            }
        }
        Ok(())
    }

    /// Whether a splitting parent's frozen filter holds `fp` (false once it is retired: its
    /// entries are in the children then).
    fn parent_holds(&self, id: NodeId, fp: u64) -> bool {
        let cell = self.cell(id);
        let r = cell.replica.read();
        r.state == LeafState::Final && r.filter.contains(fp)
    }

    /// Counts and shape, read from Redis now.
    ///
    /// # Errors
    /// Connection errors.
    pub fn stats(&self) -> Result<RedisStats> {
        let meta = self.refresh_meta()?;
        let leaves: Vec<NodeId> = meta.leaves().collect();
        let reqs = leaves
            .iter()
            .map(|&id| {
                let mut c = ::redis::cmd("STRLEN");
                c.arg(self.key(id, "log"));
                Req { place: self.place(id), cmd: c }
            })
            .collect();
        let mut counts = Vec::new();
        for (&id, v) in leaves.iter().zip(self.router.exec(reqs)?) {
            match v {
                Value::Int(n) => counts.push((id, n as u64 / 8)),
                other => return Err(self.protocol(id, "STRLEN", &other)),
            }
        }
        let c = &self.counters;
        Ok(RedisStats {
            count: counts.iter().map(|(_, n)| n).sum(),
            height: leaves
                .iter()
                .filter_map(|&id| meta.node(id))
                .map(|n| n.depth)
                .max()
                .unwrap_or(0),
            leaves: counts,
            splitting: meta.splitting().count(),
            version: meta.version,
            round_trips: c.round_trips.load(Ordering::Relaxed),
            candidates: c.candidates.load(Ordering::Relaxed),
            rerouted: c.rerouted.load(Ordering::Relaxed),
            splits_done: c.splits_done.load(Ordering::Relaxed),
            split_errors: c.split_errors.load(Ordering::Relaxed),
            redirects: self.router.redirects.load(Ordering::Relaxed),
            unknown_outcome: c.unknown.load(Ordering::Relaxed),
        })
    }

    /// The last error a background split attempt met (they are retried, not returned).
    pub fn last_split_error(&self) -> Option<String> {
        self.last_error.lock().clone()
    }

    /// Which node holds leaf `id`'s keys (`nodes` layout: `(id - 1) % n`).
    pub fn leaf_key(&self, id: NodeId) -> String {
        String::from_utf8_lossy(&self.key(id, "log")).into_owned()
    }
}

/// A `SYNC` that read: the node's state (`""` active, `F` frozen, `I` retired), its log's
/// length, and the entries asked for.
struct SyncReply {
    state: String,
    len: u64,
    data: Vec<u8>,
}

/// Paces the attempts of a call that meets transient failures: waits from 50 ms doubling to
/// 2 s, for at most [`RedisOptions::retry_for`] from the first failure, one line on stderr per
/// wait if asked. In a cluster the slot map is read again before each attempt (a failover
/// moves slots).
struct Backoff<'a> {
    options: &'a RedisOptions,
    router: Option<&'a Router>,
    first: Option<Instant>,
    delay: Duration,
    attempts: u32,
}

impl<'a> Backoff<'a> {
    fn new(options: &'a RedisOptions, router: Option<&'a Router>) -> Self {
        Backoff { options, router, first: None, delay: Duration::from_millis(50), attempts: 0 }
    }

    /// Waits before the next attempt after `e`; gives `e` back if it is not transient, and
    /// [`Error::Unavailable`] once the budget is spent (the last wait is cut to fit it).
    fn wait(&mut self, e: Error) -> Result<()> {
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

fn u64_le(c: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&c[..8]);
    u64::from_le_bytes(b)
}

/// A lock token unique enough across processes and threads.
fn token() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    hash::mix64(
        nanos ^ (u64::from(std::process::id()) << 32) ^ COUNTER.fetch_add(1, Ordering::Relaxed),
    )
}
