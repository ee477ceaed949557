//! The DSBF with its leaves in Redis or Redis Cluster: one URL-seen set shared by any number of
//! crawler processes on any number of machines (seed 000).
//!
//! ```no_run
//! use urlseen_engine::{Db, NamespaceOptions, SeenSet};
//! use urlseen_redis::OpenRedis;
//!
//! // One server; or "redis://a:6379/,redis://b:6379/" (independent servers or cluster seeds),
//! // or a `RedisOptions` with timeouts and the mode set.
//! let db = Db::open_redis("redis://127.0.0.1:6379/")?;
//! let ns = db.namespace("crawl", NamespaceOptions::default())?;
//! assert!(!ns.seen("https://example.com/a")?); // new, now recorded for every process
//! assert!(ns.seen("https://EXAMPLE.com/a")?); // the same canonical URL
//! # Ok::<(), urlseen_redis::Error>(())
//! ```
//!
//! # A crate over the engine
//! This was the engine's feature `redis` (`urlseen_engine::redis::…`, now `urlseen_redis::…`).
//! A namespace here is the engine's tree with its leaves elsewhere, so it uses the engine's
//! geometry: the routes (`urlseen_engine::dsbf::routing`), the split protocol
//! (`urlseen_engine::dsbf::split`), the sizes and seeds of [`TreeParams`], the dump format
//! (`urlseen_engine::dump`) and the host hashes. What of it is not the engine's API is public
//! there and `#[doc(hidden)]`, so this crate builds on the engine's public surface alone, and
//! the engine has no code of Redis's.
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
//!   ([`urlseen_engine::SeenSet::fingerprint_host`], `seen`, `seen_batch`):
//!   `seen_fingerprints` alone records hosts as unknown, and a forget by host then refuses.

mod db;
mod dump;
mod error;
mod forget;
mod lifetime;
mod lookup;
mod meta;
mod recrawl;
mod replica;
mod router;
mod scripts;
mod set;
mod split;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ::redis::Value;
use parking_lot::{Mutex, RwLock};
use urlseen_filter::{BlockedBloom, hash};

use db::Backoff;
pub use db::{OpenRedis, RedisDb, RedisMode, RedisOptions};
pub use dump::RedisRestore;
pub use error::{Error, Lost, Result};
use meta::{Meta, State};
pub use recrawl::{MAX_MARGIN_MS, RedisWindow, RedisWindowStats};
use replica::{LeafCell, SyncReply};
use router::{Failed, Layout, Place, Req, Router};
use scripts::Script;
pub use set::RedisSet;
use urlseen_engine::dsbf::routing::{Paths, Routing};
pub use urlseen_engine::dsbf::split::SplitOutcome;
use urlseen_engine::dsbf::{Level, NodeId, TreeParams};
use urlseen_engine::fingerprint::Fingerprinter;
use urlseen_engine::{NamespaceOptions, SplitMode};

/// The keys of one tree node, `urlseen:{ns:id}:<what>`: what dropping a namespace deletes
/// (and what a recrawl window's generation, or a lifetime, gives its expiry: `lifetime.rs`).
const NODE_KEYS: [&str; 6] = ["log", "st", "mig", "lock", "id", "hosts"];

/// Namespace `name`'s key `what` (its `meta`, `hosts`, `pos`, …): `urlseen:{ns}:<what>`, all
/// under the namespace's hash tag, so on one Redis Cluster slot.
fn namespace_key(name: &str, what: &str) -> Vec<u8> {
    format!("urlseen:{{{name}}}:{what}").into_bytes()
}

/// Namespace `name`'s metadata key.
fn meta_key(name: &str) -> Vec<u8> {
    namespace_key(name, "meta")
}

/// Where namespace `name`'s metadata lives.
fn meta_place(name: &str) -> Place {
    Place { key: meta_key(name), index: 0 }
}

/// Node `id`'s key `what` ([`NODE_KEYS`]): `urlseen:{ns:id}:<what>`, under the node's own hash
/// tag, so the nodes of a namespace spread over a cluster.
fn node_key(name: &str, id: NodeId, what: &str) -> Vec<u8> {
    format!("urlseen:{{{name}:{id}}}:{what}").into_bytes()
}

/// Rounds of re-routing (frozen leaves, stale metadata) one call may take.
const MAX_ROUNDS: usize = 64;

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
    /// Bits of the leaves' filters in all (each leaf's size is its depth's and place's: see
    /// [`TreeParams::split_level`]).
    pub filter_bits: u64,
    /// The highest FPR of a leaf (formula 4 for blocked filters at its count and size).
    pub worst_leaf_fpr: f64,
    /// Bytes of the leaf replicas (filters) this client holds: the namespace's RAM in this
    /// process (the logs stay in Redis).
    pub replica_bytes: u64,
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

/// Where `RedisNamespace::split_until` (feature `testing`) stops, simulating a worker that
/// dies.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitStop {
    /// After freezing the leaf, before publishing the split in the metadata.
    AfterFreeze,
    /// After migrating this many chunks.
    AfterChunks(u64),
}

/// One namespace whose leaves live in Redis. `Send + Sync`; share it between threads (each
/// call takes its own connections from a pool).
#[derive(Debug)]
pub struct RedisNamespace {
    name: String,
    options: NamespaceOptions,
    params: TreeParams,
    /// How fingerprints find their leaf: by ranges (metadata format 2) or per level (1).
    paths: Paths,
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

    /// Entries at which a first leaf (one made with the namespace) splits, also under
    /// [`SplitMode::Never`], for explicit splits. Deeper leaves are larger: see
    /// [`Self::leaf_split_point`].
    pub fn split_point(&self) -> u64 {
        self.level_split_point(&self.params.level(1))
    }

    /// Entries at which leaf `id` splits (also under [`SplitMode::Never`], for explicit
    /// splits), by its size as the metadata this client holds gives it.
    pub fn leaf_split_point(&self, id: NodeId) -> u64 {
        self.level_split_point(&self.level(&self.meta(), id))
    }

    /// Node `id`'s filter size (the first leaves' for a node the metadata does not show).
    fn level(&self, meta: &Meta, id: NodeId) -> Level {
        meta.level(id).unwrap_or_else(|| self.params.level(1))
    }

    /// Entries at which a leaf of size `level` splits, whatever the split mode (under
    /// [`SplitMode::Never`], `level.split_at` says never; explicit splits still need one).
    fn level_split_point(&self, level: &Level) -> u64 {
        ((level.capacity as f64 * self.params.split.threshold).floor() as u64).max(1)
    }

    fn meta_key(&self) -> Vec<u8> {
        meta_key(&self.name)
    }

    fn meta_place(&self) -> Place {
        meta_place(&self.name)
    }

    /// The `nodes` layout places leaf `id` on server `(id - 1) mod n` of the list this process
    /// was given, so every process must list the servers in one order: one that lists them in
    /// another would keep its leaves (and its metadata) on other servers, and answer new again
    /// what the others recorded. Each server keeps the position it was first given for this
    /// namespace (`urlseen:{ns}:pos`); a process that gives it another is refused.
    fn check_server_order(&self, n: usize) -> Result<()> {
        let key = namespace_key(&self.name, "pos");
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
        node_key(&self.name, id, what)
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
        match lost {
            // A namespace whose lifetime ended is gone on purpose, not lost.
            Lost::Namespace | Lost::Epoch { .. } => self.gone(lost),
            lost => Error::LostData { name: self.name.clone(), lost },
        }
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
        let mut meta = Meta::parse(&reply).map_err(|r| self.bad_meta(r))?;
        if meta.epoch != self.epoch {
            return Err(self.other_epoch(None, meta.epoch.as_bytes()));
        }
        if meta.routing() != self.paths.routing() {
            return Err(self.bad_meta(format!(
                "metadata format {} does not match the namespace's parameters",
                meta.format
            )));
        }
        // Sized against the copy installed now, without holding its lock meanwhile.
        meta.size(&self.params, &self.meta());
        let meta = Arc::new(meta);
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

    /// The leaf that owns `fp`, pushing the splitting nodes on the way to `parents`: the
    /// in-process tree's walk ([`Paths`]), down the metadata's nodes.
    fn route(&self, meta: &Meta, fp: u64, parents: &mut Vec<NodeId>) -> Result<NodeId> {
        let mut id = 0;
        let mut x = self.paths.start(fp);
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
            id = children[self.paths.child(&mut x, fp, node.depth, children.len())];
        }
    }

    /// Which of the `n` children of node `id` (at `depth`) `fp` goes to: what
    /// [`Self::route`]'s walk chooses there.
    fn child_of(&self, meta: &Meta, id: NodeId, depth: u32, fp: u64, n: usize) -> Result<usize> {
        match self.paths.routing() {
            Routing::Levels => Ok(self.paths.level_child(fp, depth, n)),
            Routing::Ranges => meta
                .dir
                .as_ref()
                .and_then(|dir| dir.child_of(id, self.paths.start(fp), n))
                .ok_or_else(|| self.bad_meta(format!("node {id} has no range"))),
        }
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
        let sizes: Vec<Level> = leaves.iter().map(|&id| self.level(&meta, id)).collect();
        let c = &self.counters;
        Ok(RedisStats {
            count: counts.iter().map(|(_, n)| n).sum(),
            filter_bits: sizes.iter().map(|l| l.bits).sum(),
            replica_bytes: self.replica_bytes(),
            worst_leaf_fpr: counts
                .iter()
                .zip(&sizes)
                .map(|(&(_, n), l)| urlseen_filter::plan::blocked_fpr(l.bits, l.hashes, n))
                .fold(0.0, f64::max),
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
