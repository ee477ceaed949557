//! The Dynamic Splittable Bloom Filter (seed 000): a tree of location hashes over leaf filters.
//!
//! ```text
//!                      root: range hash [0, 2⁶⁴)
//!             ┌──────────────┼──────────────┐
//!           leaf 1         leaf 2        node 3: the top third   ← a leaf that split
//!         (Bloom + log)  (Bloom + log)     ┌──────┴──────┐
//!                                        leaf 4        leaf 5
//! ```
//! Every decision derives from the one 64-bit fingerprint. Routing reads one hash of it,
//! `h = mix64(fp ^ seed_0)`, as nested ranges: a node with `n` children sends it to child
//! `⌊x·n/2⁶⁴⌋` and passes `x·n mod 2⁶⁴` on, so each level draws fresh bits of `h` (the seed's
//! rule that levels must not repeat a choice holds) and each leaf owns one range of `h`, which a
//! directory finds in one step (see `routing.rs`). Trees from snapshots before version
//! 4 keep the seed paper's routing, `reduce(mix64(fp ^ seed_d), n)` with a seed per level. The
//! leaf filters probe with their own seed, so routing and probes are independent.
//!
//! # Splits
//! A leaf whose log reaches its split point becomes *splitting*: its filter and log are frozen,
//! `fanout` empty children are added under it (each `growth` times its bits, up to a maximum:
//! every depth has its own size, [`TreeParams::level`], so a tree created small stays shallow;
//! each child is smaller than that by a share its place in the tree draws, up to
//! [`SPLIT_SPREAD`], so that leaves do not all reach their split points at once,
//! [`TreeParams::split_level`]), and from then on
//! - inserts go to the children (after checking the frozen filter, which still answers),
//! - queries check the frozen filter and then the children,
//! - a migrator re-hashes the frozen log into the children, one bounded step at a time,
//! - when the whole log is migrated the node becomes inner and its filter and log are dropped.
//!
//! No false negative can appear: an element is in the frozen filter until the node turns inner,
//! and it is in a child before that (migration precedes the switch, both under the tree lock).
//! No element is recorded twice: an insert that reaches the children has first missed the frozen
//! filter, so it is not in the frozen log, and migration moves each logged element once.
//!
//! # Seen stays seen
//! A check-and-insert whose fingerprint the filters (maybe falsely) hold answers "seen" and
//! records nothing new. Were a false positive left at that, the split that rebuilds the leaf's
//! bits in the children from its log would drop it, and the next check would answer "new" for
//! an item already answered "seen". So outside exact mode (which confirms every positive) such
//! a fingerprint is logged as a *kept* record ([`LeafRecord::kept`]): carried by every split,
//! replayed by recovery, but not counted as a URL nor towards the leaf's split point. A small
//! direct-mapped table of fingerprints kept lately spares the log the hot repeats.
//!
//! # Locks
//! The shape of the tree sits behind one `RwLock`, taken shared by every operation and
//! exclusively only to start or finish a split (a few allocations, no re-hashing) and, for a
//! checkpoint, to copy the shape. Each leaf has its own `RwLock`; a batch is grouped by leaf and
//! takes each leaf lock once. Lock order: the migrator mutex, then the tree lock, then leaf
//! locks, then a split's cursor or the checkpoint's capture state (innermost, held briefly).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::{Mutex, RwLock};
use urlseen_filter::{BlockedBloom, hash, plan};
use xxhash_rust::xxh3::Xxh3;

use crate::error::Error;
use crate::leaf_index::{Found, IndexStats, IndexStore, LeafIndex};
use crate::leaf_log::{LeafLog, LeafRecord, LeafStore, ReadPos, current_minute};
use crate::options::SplitMode;
use crate::routing::{self, Directory, Routing, Shape};

pub use crate::split_workers::SplitWorkers;

mod direct;
pub(crate) mod params;
mod snapshot;
mod split;
use params::PRECOMPUTED_LEVELS;
use params::level_seed;
pub use params::{Level, SPLIT_SPREAD, TreeParams};
use snapshot::{Capture, Retained};
pub use snapshot::{DumpPos, LoadedSnapshot, SNAPSHOT_VERSION, SnapshotInfo};
pub(crate) use snapshot::{Reader, SNAPSHOT_FORMAT};
use split::Frozen;

/// Index of a node in the tree.
pub type NodeId = u32;

const ROOT: NodeId = 0;
/// Items handed to a leaf filter's batched insert at once: enough for its prefetch window to
/// pay off, small enough to live on the stack.
const GROUP_CHUNK: usize = 256;

enum Node {
    Inner { depth: u32, children: Box<[NodeId]> },
    Leaf { depth: u32, leaf: Box<RwLock<Leaf>> },
    Splitting { depth: u32, frozen: Box<Frozen>, children: Box<[NodeId]> },
}

struct Leaf {
    filter: BlockedBloom,
    /// Every fingerprint this leaf recorded, in order: the source of truth for a split. On disk
    /// (a bounded buffer in RAM) unless the tree lives in memory.
    log: LeafLog,
    /// The namespace log's offset just past the last record made for this leaf (what the
    /// `on_new` hook returned): every log record of this leaf ends at or before it, every later
    /// one after it. A snapshot stores it with the leaf, so recovery knows which log records
    /// the leaf already holds (see [`Dsbf::write_snapshot`]).
    last_lsn: u64,
    /// The leaf's size: its depth's, or for a split's child a spread one (see
    /// [`TreeParams::split_level`]).
    level: Level,
    /// Kept records in `log` (see the module docs): they do not count towards the split point.
    kept: u64,
    /// Exact mode: the leaf's fingerprints, sorted, to confirm Bloom positives against.
    index: Option<LeafIndex>,
}

impl Leaf {
    /// URLs recorded in this leaf: its log without the kept records.
    fn fill(&self) -> u64 {
        self.log.len() - self.kept
    }

    /// The count of recorded URLs at which this leaf splits.
    fn split_at(&self) -> u64 {
        self.level.split_at
    }
}

struct Topology {
    nodes: Vec<Node>,
    /// Under [`Routing::Ranges`]: the leaves in range order, to find one without a walk.
    dir: Option<Directory>,
}

impl Topology {
    fn new(nodes: Vec<Node>, routing: Routing) -> Self {
        let dir = (routing == Routing::Ranges).then(|| {
            Directory::build(nodes.len(), |id| match nodes.get(id as usize) {
                Some(Node::Inner { children, .. }) => Shape::Inner(children),
                Some(Node::Splitting { children, .. }) => Shape::Splitting(children),
                Some(Node::Leaf { .. }) | None => Shape::Leaf,
            })
        });
        Topology { nodes, dir }
    }

    fn leaf(&self, id: NodeId) -> Option<&RwLock<Leaf>> {
        match self.nodes.get(id as usize) {
            Some(Node::Leaf { leaf, .. }) => Some(leaf),
            _ => None,
        }
    }
}

/// How an insert treats a fingerprint the filters already (maybe) hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The URL-seen test: a (maybe) present fingerprint is answered "seen" and not recorded.
    CheckAndInsert,
    /// Replay of fingerprints known to be distinct and new (the log on recovery, a confirmed
    /// exact-mode miss): every one is recorded, even when the filters falsely hold it already,
    /// so the leaf logs stay complete for later splits.
    Record,
    /// Replay of kept records (see the module docs): every one is logged as kept, uncounted.
    Keep,
}

/// The hook a batch insert calls, under the leaf's lock, with the fingerprints it recorded as
/// new and those it logged as kept (see the module docs); it returns the namespace log's offset
/// past them (0 for none).
pub type OnNew<'a, E> = dyn FnMut(&Logged<'_>) -> Result<u64, E> + 'a;

/// What one leaf of a batch recorded and kept, for the [`OnNew`] hook: each fingerprint with
/// the host hash of its URL (0: unknown; see [`crate::host`]).
#[derive(Debug, Clone, Copy)]
pub struct Logged<'a> {
    /// Fingerprints recorded as new.
    pub new: &'a [u64],
    /// Their host hashes, one per fingerprint.
    pub new_hosts: &'a [u32],
    /// Fingerprints logged as kept.
    pub kept: &'a [u64],
    /// Their host hashes, one per fingerprint.
    pub kept_hosts: &'a [u32],
}

/// What an exact-mode insert asks of its caller (see [`Dsbf::insert_batch_exact`]): seed
/// 002's cache of recent URLs, in front of the leaf indexes.
#[allow(missing_debug_implementations, reason = "it holds closures")]
pub struct ExactHooks<'a> {
    /// Answers a Bloom positive from a cache of fingerprints known to be recorded, before any
    /// leaf index is read: `true` is "seen".
    pub cached: &'a mut dyn FnMut(u64) -> bool,
    /// Learns a fingerprint that a leaf index found recorded.
    pub learn: &'a mut dyn FnMut(u64),
}

/// Fingerprints logged as kept, and their host hashes.
type KeptList<'a> = (&'a mut Vec<u64>, &'a mut Vec<u32>);

/// The shared state of one round of a batch insert.
struct Groups<'a, 'x, 'h, 'o, E> {
    fps: &'a [u64],
    /// The host hash of each of `fps` (empty: all unknown).
    hosts: &'a [u32],
    out: &'a mut [bool],
    mode: Mode,
    pending: &'a mut Vec<u32>,
    full: &'a mut Vec<NodeId>,
    recorded: &'a mut Vec<u64>,
    /// Their host hashes.
    recorded_hosts: &'a mut Vec<u32>,
    /// Fingerprints logged as kept this round.
    kept: &'a mut Vec<u64>,
    /// Their host hashes.
    kept_hosts: &'a mut Vec<u32>,
    /// Whether a positive is logged as kept (see the module docs).
    keep_positives: bool,
    /// The batch's coarse time, stamped on every record.
    minute: u32,
    /// Bloom positives of this round (exact mode only).
    positives: &'a mut Vec<u32>,
    exact: Option<&'x mut ExactHooks<'h>>,
    /// The caller's hook for recorded fingerprints (the log append), called under the leaf's
    /// lock: once another writer can see a fingerprint's bits, its record is in the log.
    on_new: &'o mut OnNew<'o, E>,
    failed: Option<E>,
}

/// Marks a pending batch index whose fingerprint a frozen filter on its path held: it is
/// answered "seen" and goes to its leaf only to be kept there.
const SEEN_ABOVE: u32 = 1 << 31;
/// Slots of the table of fingerprints kept lately, at most (8 bytes each).
const KEPT_CACHE_MAX: u64 = 1 << 16;
/// A split drops duplicate kept records when at least one record in this many is kept.
const KEEP_DEDUP_RATIO: u64 = 8;
/// A thread keeps its batch buffers (see [`BatchScratch`]) while they hold at most this many
/// entries each (about 1 MiB in all); a larger batch's are freed when it ends.
const SCRATCH_KEEP_MAX: usize = 1 << 14;

/// The working buffers of one batch insert, kept per thread between batches: a batch of 4,096
/// otherwise allocates about ten vectors and grows the answer lists by doubling, and its
/// stores then go to memory that is cold each time (a profile of `grown_rounds` put about a
/// third of `insert_group`'s samples on the appends to freshly grown lists).
#[derive(Default)]
struct BatchScratch {
    pending: Vec<u32>,
    routed: Vec<(NodeId, u32)>,
    sorted: Vec<(NodeId, u32)>,
    recorded: Vec<u64>,
    recorded_hosts: Vec<u32>,
    kept: Vec<u64>,
    kept_hosts: Vec<u32>,
    positives: Vec<u32>,
    /// Fingerprints whose frozen filter is asked in a batch: (splitting node, batch position,
    /// leaf below).
    asks: Vec<(NodeId, u32, NodeId)>,
    ask_fps: Vec<u64>,
    ask_out: Vec<bool>,
    /// The one-pass path's (see `direct`).
    direct: direct::Scratch,
}

impl BatchScratch {
    /// This thread's buffers, emptied (fresh ones if a batch on this thread holds them: the
    /// `on_new` hook may insert into another tree).
    fn take() -> Self {
        let mut s = BATCH_SCRATCH.with(std::cell::Cell::take);
        s.pending.clear();
        s.routed.clear();
        s.sorted.clear();
        s.recorded.clear();
        s.recorded_hosts.clear();
        s.kept.clear();
        s.kept_hosts.clear();
        s.positives.clear();
        s.asks.clear();
        s.direct.clear();
        s
    }

    /// Hands the buffers back to this thread, unless a large batch grew them.
    fn give_back(self) {
        let largest = [
            self.pending.capacity(),
            self.routed.capacity(),
            self.sorted.capacity(),
            self.recorded.capacity(),
            self.recorded_hosts.capacity(),
            self.kept.capacity(),
            self.kept_hosts.capacity(),
            self.positives.capacity(),
            self.asks.capacity(),
            self.ask_fps.capacity(),
            self.ask_out.capacity(),
            self.direct.capacity(),
        ];
        if largest.iter().all(|&c| c <= SCRATCH_KEEP_MAX) {
            BATCH_SCRATCH.with(|cell| cell.set(self));
        }
    }
}

thread_local! {
    static BATCH_SCRATCH: std::cell::Cell<BatchScratch> =
        std::cell::Cell::new(BatchScratch::default());
}

enum Walk {
    /// A frozen filter on the way down holds the fingerprint.
    Seen,
    /// The leaf the fingerprint belongs to.
    Leaf(NodeId),
}

/// What [`Dsbf::route_or_ask`] found.
enum Route {
    /// The walk's answer.
    Done(Walk),
    /// The frozen filter of splitting node `frozen` decides; if it does not hold the
    /// fingerprint, `leaf` owns it.
    Ask { frozen: NodeId, leaf: NodeId },
}

/// A Dynamic Splittable Bloom Filter over 64-bit fingerprints. `Send + Sync`; see the
/// [module docs](self) for the design.
pub struct Dsbf {
    params: TreeParams,
    /// How fingerprints find their leaf (see [`crate::routing`]).
    routing: Routing,
    level_seeds: [u64; PRECOMPUTED_LEVELS],
    topo: RwLock<Topology>,
    /// Serializes migration, so one split's log is never moved twice.
    migrator: Mutex<()>,
    /// Exact mode: where the leaf indexes keep their runs (set once, by [`Self::enable_exact`]).
    index: OnceLock<Arc<IndexStore>>,
    /// Where the leaves keep their fingerprints.
    leaves: LeafStore,
    /// Fingerprints kept lately, direct-mapped (see the module docs): one found here has a kept
    /// (or recorded) log entry in its leaf already. Read and written under that leaf's lock.
    kept_cache: Box<[AtomicU64]>,
    /// The checkpoint in progress, if one is.
    capture: Mutex<Option<Capture>>,
    len: AtomicU64,
    splits_started: AtomicU64,
    splits_done: AtomicU64,
    workers: Arc<SplitWorkers>,
    this: Weak<Dsbf>,
}

impl std::fmt::Debug for Dsbf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dsbf")
            .field("params", &self.params)
            .field("len", &self.len())
            .field("splits_done", &self.splits_done.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Dsbf {
    /// A new tree: a root and `params.initial_leaves` empty leaves, whose fingerprints go to
    /// `leaves`. Background splits run on `workers`.
    pub fn new(params: TreeParams, workers: Arc<SplitWorkers>, leaves: LeafStore) -> Arc<Self> {
        let c = params.initial_leaves;
        let mut nodes = Vec::with_capacity(c as usize + 1);
        nodes.push(Node::Inner { depth: 0, children: (1..=c).collect() });
        for id in 1..=c {
            let level = params.level(1);
            let leaf = Box::new(RwLock::new(new_leaf(&params, &leaves, false, id, level)));
            nodes.push(Node::Leaf { depth: 1, leaf });
        }
        Self::with_nodes(params, workers, leaves, nodes, Routing::Ranges)
    }

    /// A tree whose leaves live in memory (tests, `Db::in_memory`).
    pub fn in_memory(params: TreeParams, workers: Arc<SplitWorkers>) -> Arc<Self> {
        Self::new(params, workers, LeafStore::Memory)
    }

    fn with_nodes(
        params: TreeParams,
        workers: Arc<SplitWorkers>,
        leaves: LeafStore,
        nodes: Vec<Node>,
        routing: Routing,
    ) -> Arc<Self> {
        let mut level_seeds = [0u64; PRECOMPUTED_LEVELS];
        for (depth, s) in level_seeds.iter_mut().enumerate() {
            *s = level_seed(params.seed, depth as u32);
        }
        // About one slot per 32 URLs of capacity: a small namespace's table stays small.
        let capacity = params.leaf_capacity.saturating_mul(u64::from(params.initial_leaves));
        let slots = (capacity / 32).clamp(256, KEPT_CACHE_MAX).next_power_of_two();
        let kept_cache = (0..slots).map(|_| AtomicU64::new(0)).collect();
        Arc::new_cyclic(|this| Dsbf {
            params,
            routing,
            level_seeds,
            topo: RwLock::new(Topology::new(nodes, routing)),
            migrator: Mutex::new(()),
            index: OnceLock::new(),
            leaves,
            kept_cache,
            capture: Mutex::new(None),
            len: AtomicU64::new(0),
            splits_started: AtomicU64::new(0),
            splits_done: AtomicU64::new(0),
            workers,
            this: this.clone(),
        })
    }

    /// The tree's parameters.
    pub fn params(&self) -> &TreeParams {
        &self.params
    }

    /// Where the leaves keep their fingerprints.
    pub fn leaf_store(&self) -> &LeafStore {
        &self.leaves
    }

    /// The coarse time stamped on new leaf records: read from the clock only for leaf files
    /// (leaves in memory keep the fingerprint alone).
    fn minute(&self) -> u32 {
        match self.leaves {
            LeafStore::Memory => 0,
            LeafStore::Files(_) => current_minute(),
        }
    }

    /// Distinct fingerprints recorded.
    pub fn len(&self) -> u64 {
        self.len.load(Ordering::Relaxed)
    }

    /// Whether nothing was recorded yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Check-and-insert: returns `true` if `fp` was (maybe) recorded before, `false` if it is new
    /// and now recorded.
    pub fn insert(&self, fp: u64) -> bool {
        let never: Result<bool, std::convert::Infallible> =
            self.insert_with(fp, Mode::CheckAndInsert, &mut |_| Ok(0));
        match never {
            Ok(was) => was,
            Err(never) => match never {},
        }
    }

    /// [`Self::insert`] with a hook: `on_new` sees `fp` if it was recorded (or kept), while the
    /// leaf's lock and the tree's shared lock are still held. So a checkpoint, which takes the
    /// tree's lock exclusively, never sees the tree and the hook's log disagree, and a writer
    /// that finds the fingerprint's bits set can count on its log record having been appended.
    /// An error from the hook is returned; the fingerprint stays recorded in memory.
    ///
    /// # Errors
    /// Whatever `on_new` returns.
    pub fn insert_with<E>(
        &self,
        fp: u64,
        mode: Mode,
        on_new: &mut OnNew<'_, E>,
    ) -> Result<bool, E> {
        let mut out = [false];
        self.insert_batch_core(std::slice::from_ref(&fp), &[], &mut out, mode, None, on_new)?;
        Ok(out[0])
    }

    /// Read-only lookup: `true` if `fp` was (maybe) recorded.
    pub fn contains(&self, fp: u64) -> bool {
        let topo = self.topo.read();
        match self.walk(&topo, fp, true) {
            Walk::Seen => true,
            Walk::Leaf(id) => topo.leaf(id).is_some_and(|cell| cell.read().filter.contains(fp)),
        }
    }

    /// Exact mode's read-only lookup: whether `fp` is recorded, by the filters and then the
    /// leaf indexes on its path. Without indexes (not [`Self::enable_exact`]), as
    /// [`Self::contains`]. A failed index read answers `true` and fails the tree (see
    /// [`Self::check`]).
    pub fn contains_exact(&self, fp: u64) -> bool {
        let topo = self.topo.read();
        let mut id = ROOT;
        let mut x = self.route_hash(fp);
        loop {
            let (depth, children) = match &topo.nodes[id as usize] {
                Node::Leaf { leaf, .. } => {
                    let leaf = leaf.read();
                    return leaf.filter.contains(fp) && self.index_holds(leaf.index.as_ref(), fp);
                }
                Node::Inner { depth, children } => (*depth, children),
                Node::Splitting { depth, frozen, children } => {
                    if frozen.filter.contains(fp) && self.index_holds(frozen.index.as_ref(), fp) {
                        return true;
                    }
                    (*depth, children)
                }
            };
            id = children[self.route(&mut x, fp, depth, children.len())];
        }
    }

    /// Exact mode: gives every leaf an index of its records, read from its log, and every
    /// leaf made from now on one too. Finishes the splits in progress first. Called once, when
    /// the namespace opens; `store` is where the runs go.
    ///
    /// # Errors
    /// [`Error::Io`] or [`Error::Corrupt`] reading a leaf's file or writing a run.
    pub fn enable_exact(&self, store: Arc<IndexStore>) -> Result<(), Error> {
        self.complete_splits();
        self.check()?;
        let mut topo = self.topo.write();
        let leaves: Vec<&mut Leaf> = topo
            .nodes
            .iter_mut()
            .filter_map(|node| match node {
                Node::Leaf { leaf, .. } => Some(leaf.get_mut()),
                _ => None,
            })
            .collect();
        // Leaves are independent: one builder per core, each taking the next leaf.
        let queue = Mutex::new(leaves.into_iter());
        let failed = Mutex::new(None);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    loop {
                        // Not `while let … = queue.lock()…`: that would hold the queue's lock
                        // for the whole build, one leaf at a time.
                        let next = queue.lock().next();
                        let Some(leaf) = next else { break };
                        if let Err(e) = self.build_index(leaf, &store) {
                            *failed.lock() = Some(e);
                            return;
                        }
                    }
                });
            }
        });
        if let Some(e) = failed.into_inner() {
            return Err(e);
        }
        let _ = self.index.set(store);
        Ok(())
    }

    /// Indexes every record of `leaf`'s log (see [`LeafIndex::build`]).
    fn build_index(&self, leaf: &mut Leaf, store: &Arc<IndexStore>) -> Result<(), Error> {
        let mut pos = ReadPos::default();
        let mut records = Vec::new();
        let log = &leaf.log;
        let index = LeafIndex::build(store, leaf.split_at(), |out| {
            if log.is_end(pos) {
                return Ok(false);
            }
            pos = log.read(&self.leaves, pos, 1 << 16, &mut records)?;
            out.extend(records.iter().filter(|r| !r.kept).map(|r| r.fp));
            Ok(!log.is_end(pos))
        })?;
        leaf.index = Some(index);
        Ok(())
    }

    /// Reads every leaf's fingerprints back (`urlseen check`), checking every block's checksum
    /// and that each leaf holds as many records as it should. Returns the records read.
    ///
    /// # Errors
    /// The first damaged or short leaf file.
    pub fn verify_leaf_files(&self) -> Result<u64, Error> {
        let topo = self.topo.read();
        let mut total = 0;
        let mut chunk = Vec::new();
        for node in &topo.nodes {
            let Node::Leaf { leaf, .. } = node else { continue };
            let leaf = leaf.read();
            let mut pos = ReadPos::default();
            while !leaf.log.is_end(pos) {
                pos = leaf.log.read(&self.leaves, pos, 1 << 16, &mut chunk)?;
                total += chunk.len() as u64;
            }
        }
        Ok(total)
    }

    /// Exact mode's index counters and sizes (zero without indexes).
    pub fn index_stats(&self) -> IndexStats {
        self.index.get().map(|s| s.stats()).unwrap_or_default()
    }

    /// Appends `record` to `leaf`'s log and, in exact mode, to its index.
    fn record_in(&self, leaf: &mut Leaf, record: LeafRecord) {
        leaf.log.push(&self.leaves, record);
        if record.kept {
            leaf.kept += 1;
            return;
        }
        if let (Some(index), Some(store)) = (&mut leaf.index, self.index.get())
            && let Err(e) = index.insert(store, record.fp)
        {
            store.fail(&e);
        }
    }

    /// [`Self::record_in`] of a run of new (not kept) fingerprints made at `minute`, with their
    /// host hashes (`None`: unknown): one append, unless the leaf has an exact index to feed.
    fn record_run_in(&self, leaf: &mut Leaf, run: &[u64], hosts: Option<&[u32]>, minute: u32) {
        if leaf.index.is_none() {
            leaf.log.extend_recorded(&self.leaves, run, hosts, minute);
            return;
        }
        for (i, &fp) in run.iter().enumerate() {
            let host = hosts.map_or(0, |hosts| hosts[i]);
            self.record_in(leaf, LeafRecord::new(fp, minute).with_host(host));
        }
    }

    /// Whether `index` holds `fp`; `true` without an index (the filter's answer stands) and
    /// when the index cannot be read (which fails the tree: a "seen" is never a lost URL).
    fn index_holds(&self, index: Option<&LeafIndex>, fp: u64) -> bool {
        self.index_find(index, fp) != Found::No
    }

    /// [`Self::index_holds`], saying where: [`Found::Tail`] without an index or on a failed
    /// read (nothing that is worth caching).
    fn index_find(&self, index: Option<&LeafIndex>, fp: u64) -> Found {
        let (Some(index), Some(store)) = (index, self.index.get()) else { return Found::Tail };
        index.find(fp).unwrap_or_else(|e| {
            store.fail(&e);
            Found::Tail
        })
    }

    /// [`Self::insert`] for many fingerprints: `out[i]` answers `fps[i]`. The batch is grouped
    /// by leaf, so each leaf lock is taken once per group, and each group is probed with
    /// prefetching. A fingerprint repeated within the batch is new only the first time.
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn insert_batch(&self, fps: &[u64], out: &mut [bool]) {
        let never: Result<(), std::convert::Infallible> =
            self.insert_batch_with(fps, &[], out, Mode::CheckAndInsert, &mut |_| Ok(0));
        if let Err(never) = never {
            match never {}
        }
    }

    /// [`Self::insert_batch`] with a hook that sees the fingerprints recorded, as
    /// [`Self::insert_with`] describes.
    ///
    /// # Errors
    /// Whatever `on_new` returns.
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn insert_batch_with<E>(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        mode: Mode,
        on_new: &mut OnNew<'_, E>,
    ) -> Result<(), E> {
        self.insert_batch_core(fps, hosts, out, mode, None, on_new)
    }

    /// Exact mode's check-and-insert: [`Self::insert_batch_with`] in [`Mode::CheckAndInsert`],
    /// where every Bloom positive is decided by `hooks.cached`, then by the indexes of the
    /// leaves on its path (found: `hooks.learn` sees it; not found: a false positive, recorded
    /// as new). `on_new` sees every recorded fingerprint, as in [`Self::insert_batch_with`].
    /// Without indexes (not [`Self::enable_exact`]), as [`Self::insert_batch_with`].
    ///
    /// # Errors
    /// Whatever `on_new` returns.
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn insert_batch_exact<E>(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        hooks: &mut ExactHooks<'_>,
        on_new: &mut OnNew<'_, E>,
    ) -> Result<(), E> {
        self.insert_batch_core(fps, hosts, out, Mode::CheckAndInsert, Some(hooks), on_new)
    }

    fn insert_batch_core<E>(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        mode: Mode,
        exact: Option<&mut ExactHooks<'_>>,
        on_new: &mut OnNew<'_, E>,
    ) -> Result<(), E> {
        assert_eq!(fps.len(), out.len(), "insert_batch: output slice length must match input");
        assert!(fps.len() < SEEN_ABOVE as usize, "insert_batch: at most 2^31 - 1 fingerprints");
        assert!(hosts.is_empty() || hosts.len() == fps.len(), "insert_batch: one host per fp");
        // Exact mode confirms every positive instead: a false one is recorded as new. Leaves
        // that never split never rebuild their filters: nothing to keep there.
        let keep_positives = mode == Mode::CheckAndInsert
            && exact.is_none()
            && self.params.split.mode != SplitMode::Never;
        let mut buffers = BatchScratch::take();
        let mut start = 0;
        if mode == Mode::CheckAndInsert && exact.is_none() {
            // The common case, no split on the way: chunk by chunk in one pass (see `direct`),
            // until a chunk needs the general path below.
            while start < fps.len() {
                let end = (start + direct::CHUNK).min(fps.len());
                let chunk = (&fps[start..end], hosts.get(start..end).unwrap_or(&[]));
                match self.insert_direct(
                    chunk,
                    &mut out[start..end],
                    keep_positives,
                    &mut buffers.direct,
                    on_new,
                ) {
                    None => break,
                    Some(Err(e)) => {
                        buffers.give_back();
                        return Err(e);
                    }
                    Some(Ok(())) => start = end,
                }
            }
        }
        let result = match start < fps.len() {
            true => self.insert_batch_grouped(
                (&fps[start..], hosts.get(start..).unwrap_or(&[])),
                &mut out[start..],
                mode,
                keep_positives,
                exact,
                on_new,
                &mut buffers,
            ),
            false => Ok(()),
        };
        buffers.give_back();
        result
    }

    /// The general path of [`Self::insert_batch_core`]: groups the batch by leaf, asks frozen
    /// filters on the way, and re-routes what a leaf that filled could not take.
    #[allow(
        clippy::too_many_arguments,
        reason = "the batch's state, passed apart to borrow it apart"
    )]
    fn insert_batch_grouped<E>(
        &self,
        (fps, hosts): (&[u64], &[u32]),
        out: &mut [bool],
        mode: Mode,
        keep_positives: bool,
        mut exact: Option<&mut ExactHooks<'_>>,
        on_new: &mut OnNew<'_, E>,
        buffers: &mut BatchScratch,
    ) -> Result<(), E> {
        let check_frozen = mode == Mode::CheckAndInsert;
        let BatchScratch {
            pending,
            routed,
            sorted: scratch,
            recorded,
            recorded_hosts,
            kept,
            kept_hosts,
            positives,
            asks,
            ask_fps,
            ask_out,
            direct: _,
        } = buffers;
        pending.extend(0..fps.len() as u32);
        routed.reserve(fps.len());
        recorded.reserve(fps.len());
        recorded_hosts.reserve(fps.len());
        let mut hooked = Ok(());
        let minute = self.minute();
        while !pending.is_empty() {
            let mut full = Vec::new();
            {
                let topo = self.topo.read();
                routed.clear();
                positives.clear();
                for &i in pending.iter() {
                    let fp = fps[(i & !SEEN_ABOVE) as usize];
                    if i & SEEN_ABOVE != 0 {
                        // Answered already; on its way to be kept in its leaf.
                        match self.walk(&topo, fp, false) {
                            Walk::Leaf(id) => routed.push((id, i)),
                            Walk::Seen => unreachable!("walk without frozen checks ends at a leaf"),
                        }
                        continue;
                    }
                    let walked = if check_frozen {
                        match self.route_or_ask(&topo, fp) {
                            Route::Ask { frozen, leaf } => {
                                // Asked below, in one batch per frozen filter.
                                asks.push((frozen, i, leaf));
                                continue;
                            }
                            Route::Done(walked) => walked,
                        }
                    } else {
                        self.walk(&topo, fp, false)
                    };
                    match walked {
                        Walk::Seen if keep_positives => {
                            out[i as usize] = true;
                            // A frozen filter's positive may be false, and that filter goes
                            // when the split ends: the leaf below keeps it.
                            match self.walk(&topo, fp, false) {
                                Walk::Leaf(id) => routed.push((id, i | SEEN_ABOVE)),
                                Walk::Seen => {
                                    unreachable!("walk without frozen checks ends at a leaf")
                                }
                            }
                        }
                        Walk::Seen => {
                            out[i as usize] = true;
                            positives.push(i);
                        }
                        Walk::Leaf(id) => routed.push((id, i)),
                    }
                }
                if !asks.is_empty() {
                    // During a split wave most of a batch passes a frozen filter: asked one at a
                    // time, each is a cache miss the batch waits for; asked as one batch per
                    // filter, the filter prefetches them. Ordered by node, then batch position,
                    // so each leaf still sees its fingerprints in batch order.
                    asks.sort_unstable();
                    for group in asks.chunk_by(|a, b| a.0 == b.0) {
                        let Some(Node::Splitting { frozen, .. }) =
                            topo.nodes.get(group[0].0 as usize)
                        else {
                            unreachable!("the directory names a splitting node")
                        };
                        ask_fps.clear();
                        ask_fps.extend(group.iter().map(|&(_, i, _)| fps[i as usize]));
                        ask_out.clear();
                        ask_out.resize(group.len(), false);
                        frozen.filter.contains_batch(ask_fps, ask_out);
                        for (&(_, i, leaf), &seen) in group.iter().zip(ask_out.iter()) {
                            if !seen {
                                routed.push((leaf, i));
                                continue;
                            }
                            out[i as usize] = true;
                            if keep_positives {
                                // As above: the leaf below keeps it.
                                routed.push((leaf, i | SEEN_ABOVE));
                            } else {
                                positives.push(i);
                            }
                        }
                    }
                    asks.clear();
                }
                pending.clear();
                recorded.clear();
                recorded_hosts.clear();
                kept.clear();
                kept_hosts.clear();
                group_by_node(routed, topo.nodes.len(), scratch);
                let mut groups = Groups {
                    fps,
                    hosts,
                    out,
                    mode,
                    pending: &mut *pending,
                    full: &mut full,
                    recorded: &mut *recorded,
                    recorded_hosts: &mut *recorded_hosts,
                    kept: &mut *kept,
                    kept_hosts: &mut *kept_hosts,
                    keep_positives,
                    minute,
                    positives: &mut *positives,
                    exact: if hooked.is_ok() { exact.as_deref_mut() } else { None },
                    on_new: &mut *on_new,
                    failed: None,
                };
                // A leaf another writer holds is skipped and visited after the free ones, so
                // concurrent batches work side by side instead of queueing on the same lock.
                let mut busy: Vec<&[(NodeId, u32)]> = Vec::new();
                for group in routed.chunk_by(|a, b| a.0 == b.0) {
                    let Some(cell) = topo.leaf(group[0].0) else { continue };
                    match cell.try_write() {
                        Some(mut leaf) => self.insert_group(&mut leaf, group, &mut groups),
                        None => busy.push(group),
                    }
                }
                for group in busy {
                    let Some(cell) = topo.leaf(group[0].0) else { continue };
                    self.insert_group(&mut cell.write(), group, &mut groups);
                }
                let failed = groups.failed.take();
                let hooks = groups.exact.take();
                if let Some(e) = failed {
                    hooked = Err(e);
                }
                if let Some(hooks) = hooks
                    && hooked.is_ok()
                {
                    hooked = self.confirm_positives(
                        &topo,
                        (fps, hosts),
                        out,
                        positives,
                        hooks,
                        &mut full,
                        on_new,
                    );
                }
            }
            for id in full {
                self.start_split(id);
            }
        }
        hooked
    }

    /// Inserts one leaf's share of a batch, up to the leaf's split point; what does not fit goes
    /// back to `pending` (re-routed after the split), and a leaf that filled goes to `full`.
    /// Entries seen above (flagged [`SEEN_ABOVE`]) take no room: they are only kept.
    fn insert_group<E>(
        &self,
        leaf: &mut Leaf,
        group: &[(NodeId, u32)],
        g: &mut Groups<'_, '_, '_, '_, E>,
    ) {
        let mut room = leaf.split_at().saturating_sub(leaf.fill());
        let first_recorded = g.recorded.len();
        let first_kept = g.kept.len();
        let mut added = 0;
        let mut chunk_idx = [0u32; GROUP_CHUNK];
        let mut chunk_fps = [0u64; GROUP_CHUNK];
        let mut chunk_was = [false; GROUP_CHUNK];
        let mut entries = group.iter().map(|&(_, i)| i).peekable();
        while entries.peek().is_some() {
            let mut n = 0;
            for i in entries.by_ref() {
                if i & SEEN_ABOVE == 0 {
                    if room == 0 {
                        g.pending.push(i);
                        continue;
                    }
                    room -= 1;
                }
                chunk_idx[n] = i;
                chunk_fps[n] = g.fps[(i & !SEEN_ABOVE) as usize];
                n += 1;
                if n == GROUP_CHUNK {
                    break;
                }
            }
            leaf.filter.insert_batch(&chunk_fps[..n], &mut chunk_was[..n]);
            for ((&i, &fp), &was) in chunk_idx[..n].iter().zip(&chunk_fps[..n]).zip(&chunk_was[..n])
            {
                let host = g.hosts.get((i & !SEEN_ABOVE) as usize).copied().unwrap_or(0);
                if i & SEEN_ABOVE != 0 {
                    // Answered "seen" by a frozen filter above.
                    self.keep_in(leaf, fp, host, g.minute, &mut (g.kept, g.kept_hosts));
                    continue;
                }
                g.out[i as usize] = was;
                if g.mode == Mode::Keep {
                    self.record_in(leaf, LeafRecord::kept(fp, g.minute).with_host(host));
                    g.kept.push(fp);
                    g.kept_hosts.push(host);
                } else if !was || g.mode == Mode::Record {
                    self.record_in(leaf, LeafRecord::new(fp, g.minute).with_host(host));
                    g.recorded.push(fp);
                    g.recorded_hosts.push(host);
                    added += 1;
                } else if g.keep_positives {
                    self.keep_in(leaf, fp, host, g.minute, &mut (g.kept, g.kept_hosts));
                } else if g.exact.is_some()
                    && !leaf.index.as_ref().is_some_and(|index| index.in_tail(fp))
                {
                    // A positive the leaf recorded lately is decided here, under the lock
                    // already held; the rest wait for `confirm_positives`.
                    g.positives.push(i);
                }
            }
        }
        self.len.fetch_add(added, Ordering::Relaxed);
        let logged = Logged {
            new: &g.recorded[first_recorded..],
            new_hosts: &g.recorded_hosts[first_recorded..],
            kept: &g.kept[first_kept..],
            kept_hosts: &g.kept_hosts[first_kept..],
        };
        if g.failed.is_none() && (!logged.new.is_empty() || !logged.kept.is_empty()) {
            match (g.on_new)(&logged) {
                Ok(lsn) => leaf.last_lsn = leaf.last_lsn.max(lsn),
                Err(e) => g.failed = Some(e),
            }
        }
        if leaf.fill() >= leaf.split_at() {
            g.full.push(group[0].0);
        }
    }

    /// Logs `fp`, answered "seen" on a positive that may be false, as kept in `leaf` (see the
    /// module docs), unless the table of fingerprints kept lately has it.
    fn keep_in(&self, leaf: &mut Leaf, fp: u64, host: u32, minute: u32, kept: &mut KeptList<'_>) {
        let slot = &self.kept_cache[(hash::mix64(fp) as usize) & (self.kept_cache.len() - 1)];
        // 0 marks an empty slot, so fingerprint 0 is always logged.
        if fp != 0 && slot.load(Ordering::Relaxed) == fp {
            return;
        }
        self.record_in(leaf, LeafRecord::kept(fp, minute).with_host(host));
        kept.0.push(fp);
        kept.1.push(host);
        // Under the leaf's lock, which any later check of `fp` takes too, and which is held
        // until the log has the record: one who finds `fp` here finds its record logged.
        slot.store(fp, Ordering::Relaxed);
    }

    /// Exact mode: decides every Bloom positive of a round (see [`Self::insert_batch_exact`]),
    /// and records the false ones, all under the caller's topology lock, so no split can finish
    /// in between and leave a recorded fingerprint out of the children.
    #[allow(
        clippy::too_many_arguments,
        reason = "the round's state, passed apart to borrow it apart"
    )]
    fn confirm_positives<E>(
        &self,
        topo: &Topology,
        (fps, hosts): (&[u64], &[u32]),
        out: &mut [bool],
        positives: &[u32],
        hooks: &mut ExactHooks<'_>,
        full: &mut Vec<NodeId>,
        on_new: &mut OnNew<'_, E>,
    ) -> Result<(), E> {
        for &i in positives {
            let fp = fps[i as usize];
            if (hooks.cached)(fp) {
                continue;
            }
            // Down the path: a splitting node's frozen index holds what its frozen filter
            // does, the leaf's index what the leaf recorded (its own and what migrated in).
            // Only what took reads to find is worth the cache: the tails hold the recent rest.
            let mut learn = |found: Found| match found {
                Found::No => false,
                Found::Tail => true,
                Found::Run => {
                    (hooks.learn)(fp);
                    true
                }
            };
            let mut id = ROOT;
            let mut x = self.route_hash(fp);
            let mut found = Found::No;
            while let Some((depth, children)) = match &topo.nodes[id as usize] {
                Node::Leaf { .. } => None,
                Node::Inner { depth, children } => Some((*depth, children)),
                Node::Splitting { depth, frozen, children } => {
                    if frozen.filter.contains(fp) {
                        found = self.index_find(frozen.index.as_ref(), fp);
                    }
                    Some((*depth, children))
                }
            } {
                if found != Found::No {
                    break;
                }
                id = children[self.route(&mut x, fp, depth, children.len())];
            }
            if learn(found) {
                continue;
            }
            let Some(cell) = topo.leaf(id) else { continue };
            let mut leaf = cell.write();
            // Under the leaf's lock: a writer that recorded `fp` meanwhile put it in the index
            // before it let go of the lock.
            if leaf.filter.contains(fp) && learn(self.index_find(leaf.index.as_ref(), fp)) {
                continue;
            }
            out[i as usize] = false;
            // Recorded even though the filter (falsely) may hold it already: the log is what
            // a split carries into the children. It may take the leaf a little past its split
            // point; the split that follows is as correct as any other.
            leaf.filter.insert(fp);
            let host = hosts.get(i as usize).copied().unwrap_or(0);
            self.record_in(&mut leaf, LeafRecord::new(fp, self.minute()).with_host(host));
            self.len.fetch_add(1, Ordering::Relaxed);
            let lsn = on_new(&Logged {
                new: std::slice::from_ref(&fp),
                new_hosts: std::slice::from_ref(&host),
                kept: &[],
                kept_hosts: &[],
            })?;
            leaf.last_lsn = leaf.last_lsn.max(lsn);
            if leaf.fill() >= leaf.split_at() && !full.contains(&id) {
                full.push(id);
            }
        }
        Ok(())
    }

    /// [`Self::contains`] for many fingerprints: `out[i]` answers `fps[i]`.
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn contains_batch(&self, fps: &[u64], out: &mut [bool]) {
        assert_eq!(fps.len(), out.len(), "contains_batch: output slice length must match input");
        let topo = self.topo.read();
        let mut routed: Vec<(NodeId, u32)> = Vec::with_capacity(fps.len());
        for (i, &fp) in fps.iter().enumerate() {
            match self.walk(&topo, fp, true) {
                Walk::Seen => out[i] = true,
                Walk::Leaf(id) => routed.push((id, i as u32)),
            }
        }
        group_by_node(&mut routed, topo.nodes.len(), &mut Vec::new());
        let mut group_fps = Vec::new();
        let mut group_out = Vec::new();
        for group in routed.chunk_by(|a, b| a.0 == b.0) {
            let Some(cell) = topo.leaf(group[0].0) else { continue };
            let leaf = cell.read();
            group_fps.clear();
            group_fps.extend(group.iter().map(|&(_, i)| fps[i as usize]));
            group_out.clear();
            group_out.resize(group.len(), false);
            leaf.filter.contains_batch(&group_fps, &mut group_out);
            for (&(_, i), &hit) in group.iter().zip(&group_out) {
                out[i as usize] = hit;
            }
        }
    }

    /// Finds the leaf that owns `fp`. With `check_frozen`, a splitting node on the way whose
    /// frozen filter holds `fp` ends the walk with [`Walk::Seen`]. Under [`Routing::Ranges`]
    /// the directory answers in one step, unless a frozen filter above the leaf must be asked.
    #[inline]
    fn walk(&self, topo: &Topology, fp: u64, check_frozen: bool) -> Walk {
        if let Some(dir) = &topo.dir {
            let (leaf, frozen) = dir.locate(self.route_hash(fp));
            match frozen {
                _ if !check_frozen => return Walk::Leaf(leaf),
                None => return Walk::Leaf(leaf),
                // One splitting node above (a split in progress): ask its frozen filter.
                Some(node) if node != routing::NO_NODE => {
                    if let Some(Node::Splitting { frozen, .. }) = topo.nodes.get(node as usize) {
                        if frozen.filter.contains(fp) {
                            return Walk::Seen;
                        }
                        return Walk::Leaf(leaf);
                    }
                }
                Some(_) => {}
            }
        }
        self.walk_down(topo, fp, check_frozen)
    }

    /// [`Self::walk`] with a frozen filter's check left to the caller: [`Route::Ask`] when the
    /// directory finds exactly one splitting node above the leaf, so the caller can ask that
    /// node's frozen filter for many fingerprints at once; otherwise the walk's answer.
    #[inline]
    fn route_or_ask(&self, topo: &Topology, fp: u64) -> Route {
        if let Some(dir) = &topo.dir {
            match dir.locate(self.route_hash(fp)) {
                (leaf, None) => return Route::Done(Walk::Leaf(leaf)),
                (leaf, Some(node))
                    if node != routing::NO_NODE
                        && matches!(
                            topo.nodes.get(node as usize),
                            Some(Node::Splitting { .. })
                        ) =>
                {
                    return Route::Ask { frozen: node, leaf };
                }
                _ => {}
            }
        }
        Route::Done(self.walk_down(topo, fp, true))
    }

    /// [`Self::walk`] level by level from the root.
    fn walk_down(&self, topo: &Topology, fp: u64, check_frozen: bool) -> Walk {
        let mut id = ROOT;
        let mut x = self.route_hash(fp);
        loop {
            let (depth, children) = match &topo.nodes[id as usize] {
                Node::Leaf { .. } => return Walk::Leaf(id),
                Node::Inner { depth, children } => (*depth, children),
                Node::Splitting { depth, frozen, children } => {
                    if check_frozen && frozen.filter.contains(fp) {
                        return Walk::Seen;
                    }
                    (*depth, children)
                }
            };
            id = children[self.route(&mut x, fp, depth, children.len())];
        }
    }

    /// What a walk for `fp` starts from: its range hash, or (per-level routing) nothing.
    #[inline(always)]
    fn route_hash(&self, fp: u64) -> u64 {
        match self.routing {
            Routing::Levels => 0,
            Routing::Ranges => routing::range_hash(fp, self.level_seeds[0]),
        }
    }

    /// Which of the `n` children of a node at `depth` gets `fp`, whose walk state is `x`.
    #[inline(always)]
    fn route(&self, x: &mut u64, fp: u64, depth: u32, n: usize) -> usize {
        match self.routing {
            Routing::Levels => self.level_route(fp, depth, n),
            Routing::Ranges => routing::step(x, n),
        }
    }

    /// The location hash of level `depth` (per-level routing): which of `n` children gets `fp`.
    #[inline]
    fn level_route(&self, fp: u64, depth: u32, n: usize) -> usize {
        let seed = match self.level_seeds.get(depth as usize) {
            Some(&s) => s,
            None => level_seed(self.params.seed, depth),
        };
        hash::reduce(hash::mix64(fp ^ seed), n as u64) as usize
    }

    /// Whether a split could not go on (see [`LeafStore::check`]): then it stays half done,
    /// and snapshots, which need every split finished, are refused.
    ///
    /// # Errors
    /// [`Error::Poisoned`] naming the failure.
    pub fn check(&self) -> Result<(), Error> {
        self.leaves.check()?;
        self.index.get().map_or(Ok(()), |index| index.check())
    }

    /// Counts, over every leaf and frozen log, the records `pred` matches, without changing
    /// anything (each leaf read under its read lock).
    ///
    /// # Errors
    /// A leaf file that cannot be read.
    pub fn count_records(&self, pred: &dyn Fn(&LeafRecord) -> bool) -> Result<u64, Error> {
        let topo = self.topo.read();
        let mut n = 0;
        let mut chunk = Vec::new();
        for node in &topo.nodes {
            let guard;
            let log = match node {
                Node::Inner { .. } => continue,
                Node::Leaf { leaf, .. } => {
                    guard = leaf.read();
                    &guard.log
                }
                Node::Splitting { frozen, .. } => &frozen.log,
            };
            let mut pos = ReadPos::default();
            while !log.is_end(pos) {
                pos = log.read(&self.leaves, pos, 1 << 16, &mut chunk)?;
                n += chunk.iter().filter(|r| pred(r)).count() as u64;
            }
        }
        Ok(n)
    }

    /// Forgets every record `drop` matches (after `before` ran, with the tree's exclusive lock
    /// held: the forget's log record goes there): each leaf that holds one has its records rewritten
    /// without them (its file replaced whole, see `LeafLog::rewrite`) and its filter rebuilt
    /// from the rest, so they answer "new" again and every other record still answers "seen".
    /// Splits in progress are finished first, and the tree's exclusive lock is held
    /// throughout: inserts, queries, splits and checkpoints wait (time: one read of every
    /// leaf, and one more read and a write of the leaves that change).
    ///
    /// # Errors
    /// A leaf file that cannot be read or written, an index that cannot be rebuilt. Leaves
    /// rewritten before the failure stay rewritten: the caller must refuse further writes
    /// (recovery then replays the forget from the log).
    pub fn forget_where(
        &self,
        drop: &dyn Fn(&LeafRecord) -> bool,
        before: &mut dyn FnMut() -> Result<(), Error>,
    ) -> Result<ForgetCount, Error> {
        let mut topo = loop {
            self.complete_splits();
            self.check()?;
            let topo = self.topo.write();
            if !topo.nodes.iter().any(|n| matches!(n, Node::Splitting { .. })) {
                break topo;
            }
        };
        before()?;
        let mut count = ForgetCount::default();
        for node in topo.nodes.iter_mut() {
            let Node::Leaf { leaf, .. } = node else { continue };
            let leaf = leaf.get_mut();
            let level = leaf.level;
            let mut filter = BlockedBloom::new(level.bits, level.hashes, self.params.probe_seed());
            let dropped = leaf.log.rewrite(&self.leaves, drop, &mut |r| {
                filter.insert(r.fp);
            })?;
            if dropped.is_empty() {
                continue;
            }
            let kept = dropped.iter().filter(|r| r.kept).count() as u64;
            let recorded = dropped.len() as u64 - kept;
            leaf.filter = filter;
            leaf.kept -= kept.min(leaf.kept);
            self.len.fetch_sub(recorded.min(self.len()), Ordering::Relaxed);
            count.recorded += recorded;
            count.kept += kept;
            count.leaves += 1;
            if leaf.index.is_some()
                && let Some(store) = self.index.get()
            {
                let store = Arc::clone(store);
                self.build_index(leaf, &store)?;
            }
        }
        // A slot of the table of fingerprints kept lately says "its leaf logs it": not true
        // of a forgotten one any more.
        for slot in self.kept_cache.iter() {
            slot.store(0, Ordering::Relaxed);
        }
        Ok(count)
    }

    /// A consistent snapshot of the tree's shape and every leaf's fill.
    pub fn stats(&self) -> TreeStats {
        let topo = self.topo.read();
        let mut leaves = Vec::new();
        let mut inner = 0;
        let mut splitting = 0;
        let mut memory = 0u64;
        let mut reserved = 0u64;
        let mut height = 0;
        let mut kept = 0;
        for (id, node) in topo.nodes.iter().enumerate() {
            match node {
                Node::Inner { .. } => inner += 1,
                Node::Splitting { depth, frozen, .. } => {
                    splitting += 1;
                    kept += frozen.kept;
                    memory += frozen.filter.memory_bytes() as u64 + frozen.log.memory_bytes();
                    reserved += frozen.filter.reserved_bytes() as u64;
                    memory += frozen.index.as_ref().map_or(0, LeafIndex::tail_memory_bytes);
                    height = height.max(*depth);
                }
                Node::Leaf { depth, leaf } => {
                    let leaf = leaf.read();
                    let count = leaf.fill();
                    kept += leaf.kept;
                    memory += leaf.filter.memory_bytes() as u64 + leaf.log.memory_bytes();
                    reserved += leaf.filter.reserved_bytes() as u64;
                    memory += leaf.index.as_ref().map_or(0, LeafIndex::tail_memory_bytes);
                    height = height.max(*depth);
                    leaves.push(LeafStats {
                        id: id as NodeId,
                        depth: *depth,
                        count,
                        capacity: leaf.level.capacity,
                        bits: leaf.level.bits,
                        fill_ratio: leaf.filter.fill_ratio(),
                        allocated: leaf.filter.is_allocated(),
                        estimated_fpr: plan::blocked_fpr(leaf.level.bits, leaf.level.hashes, count),
                    });
                }
            }
        }
        let worst_fpr = leaves.iter().map(|l| l.estimated_fpr).fold(0.0, f64::max);
        let index = self.index_stats();
        TreeStats {
            count: self.len(),
            kept,
            leaves,
            inner_nodes: inner,
            splitting_nodes: splitting,
            height,
            memory_bytes: memory + index.run_memory_bytes,
            filter_reserved_bytes: reserved,
            disk_bytes: self.leaves.disk_bytes() + index.disk_bytes,
            splits_started: self.splits_started.load(Ordering::Relaxed),
            splits_done: self.splits_done.load(Ordering::Relaxed),
            worst_leaf_fpr: worst_fpr,
        }
    }
}

/// What [`Dsbf::forget_where`] forgot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ForgetCount {
    /// Recorded URLs forgotten (they answer "new" again).
    pub recorded: u64,
    /// Kept records dropped with them (URLs answered "seen" on a Bloom positive).
    pub kept: u64,
    /// Leaves rewritten.
    pub leaves: u64,
}

/// Orders `(node, position)` pairs by node, keeping positions in order within a node, so each
/// leaf is locked once and sees its items in batch order. A counting sort (linear) when the
/// batch is large next to the tree, a comparison sort when the tree is much larger than the
/// batch (where a histogram over every node would cost more than the sort).
fn group_by_node(items: &mut Vec<(NodeId, u32)>, nodes: usize, scratch: &mut Vec<(NodeId, u32)>) {
    if items.len() < 64 || items.len() < nodes / 4 {
        items.sort_unstable();
        return;
    }
    let mut starts = vec![0u32; nodes + 1];
    for &(id, _) in items.iter() {
        starts[id as usize + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    scratch.clear();
    scratch.resize(items.len(), (0, 0));
    for &item in items.iter() {
        let slot = &mut starts[item.0 as usize];
        scratch[*slot as usize] = item;
        *slot += 1;
    }
    std::mem::swap(items, scratch);
}

fn new_leaf(
    params: &TreeParams,
    leaves: &LeafStore,
    exact: bool,
    id: NodeId,
    level: Level,
) -> Leaf {
    // In memory the log fills to `split_at` before the leaf splits: reserve it once instead of
    // growing it by copies. The allocator maps pages lazily, so an empty leaf costs no memory.
    let reserve = level.split_at.min(1 << 24) as usize;
    Leaf {
        filter: BlockedBloom::new(level.bits, level.hashes, params.probe_seed()),
        log: LeafLog::new(leaves, id, reserve),
        last_lsn: 0,
        level,
        kept: 0,
        index: exact.then(|| LeafIndex::new(level.split_at)),
    }
}

/// The shape of a tree and the fill of each leaf, from [`Dsbf::stats`].
#[derive(Debug, Clone, PartialEq)]
pub struct TreeStats {
    /// Distinct fingerprints recorded.
    pub count: u64,
    /// Kept records in the leaves (positives that were logged so they stay "seen" through
    /// splits; see the module docs). Not URLs: not in `count`.
    pub kept: u64,
    /// Every leaf, in node order.
    pub leaves: Vec<LeafStats>,
    /// Nodes that only route.
    pub inner_nodes: usize,
    /// Nodes whose split is in progress.
    pub splitting_nodes: usize,
    /// Depth of the deepest leaf (the root is depth 0, its children depth 1).
    pub height: u32,
    /// RAM: filters and leaf buffers (in memory: leaf logs), and in exact mode the indexes'
    /// tails and fence pointers, in bytes. A leaf's filter counts from its first record on
    /// (it is allocated then).
    pub memory_bytes: u64,
    /// What the filters of every leaf take once each has recorded something: the filters'
    /// share of `memory_bytes` as the tree fills, in bytes.
    pub filter_reserved_bytes: u64,
    /// Bytes of leaf files on disk, and in exact mode of index runs.
    pub disk_bytes: u64,
    /// Splits begun.
    pub splits_started: u64,
    /// Splits completed.
    pub splits_done: u64,
    /// The highest estimated FPR of any leaf: the tree's FPR bound (formula 7).
    pub worst_leaf_fpr: f64,
}

/// One leaf's fill.
#[derive(Debug, Clone, PartialEq)]
pub struct LeafStats {
    /// Node id.
    pub id: NodeId,
    /// Depth in the tree (1 for the root's children).
    pub depth: u32,
    /// Fingerprints recorded in this leaf.
    pub count: u64,
    /// The leaf's capacity `u` under `f_max`.
    pub capacity: u64,
    /// Bits of its filter: its depth's `m`, or a split's spread size
    /// ([`TreeParams::split_level`]).
    pub bits: u64,
    /// Fraction of the filter's bits set.
    pub fill_ratio: f64,
    /// Whether its filter holds memory: allocated by the leaf's first record.
    pub allocated: bool,
    /// FPR of this leaf by formula, from its count.
    pub estimated_fpr: f64,
}

#[cfg(test)]
mod tests {
    use super::params::shrunk_bits;
    use super::split::Carried;
    use super::*;
    use crate::options::SplitPolicy;
    use proptest::prelude::*;

    fn params(mode: SplitMode, fanout: u32, step: usize) -> TreeParams {
        TreeParams::new(
            100,
            0.01,
            4096,
            9,
            SplitPolicy { fanout, step, mode, threshold: 1.0, growth: 1 },
        )
    }

    fn tree(mode: SplitMode) -> Arc<Dsbf> {
        Dsbf::in_memory(params(mode, 2, 64), SplitWorkers::new(1))
    }

    proptest! {
        /// The directory-indexed set of kept fingerprints answers as a plain set does: a
        /// fingerprint is carried "before" exactly when it was kept and carried already.
        #[test]
        fn carried_matches_a_set(
            kept in proptest::collection::vec(any::<u64>(), 0..600),
            // Some fingerprints share top bits with kept ones (same bucket), some are kept.
            asks in proptest::collection::vec((any::<u64>(), 0usize..600, any::<bool>()), 0..1200),
        ) {
            let mut carried = Carried::new(kept.clone());
            let kept_set: std::collections::HashSet<u64> = kept.iter().copied().collect();
            let mut seen = std::collections::HashSet::new();
            for (fp, pick, near) in asks {
                let fp = match kept.get(pick) {
                    Some(&k) if near => k ^ (fp & 0xFF),
                    Some(&k) => k,
                    None => fp,
                };
                let expected = kept_set.contains(&fp) && !seen.insert(fp);
                prop_assert_eq!(carried.carry(fp), expected, "fp {:#x}", fp);
            }
        }

        /// The batched form answers as the single calls in order.
        #[test]
        fn carried_batch_matches_single_calls(
            kept in proptest::collection::vec(any::<u64>(), 0..300),
            picks in proptest::collection::vec((0usize..400, any::<u64>()), 0..700),
        ) {
            let fps: Vec<u64> = picks.iter().map(|&(i, fp)| kept.get(i).copied().unwrap_or(fp)).collect();
            let (mut one, mut batch) = (Carried::new(kept.clone()), Carried::new(kept));
            let single: Vec<bool> = fps.iter().map(|&fp| one.carry(fp)).collect();
            let mut before = Vec::new();
            batch.carry_batch(fps.iter().copied(), &mut before);
            prop_assert_eq!(before, single);
        }
    }

    #[test]
    fn carried_handles_extreme_fingerprints() {
        let mut carried = Carried::new(vec![u64::MAX, 0, u64::MAX, 1 << 63]);
        for fp in [0, u64::MAX, 1 << 63] {
            assert!(!carried.carry(fp));
            assert!(carried.carry(fp));
        }
        assert!(!carried.carry(1));
        assert!(!Carried::new(Vec::new()).carry(0));
    }

    #[test]
    fn sizing_follows_the_formulas() {
        let p = params(SplitMode::Inline, 2, 64);
        let (u, k) = plan::blocked_capacity(4096, 0.01);
        assert_eq!((p.leaf_capacity, p.leaf_hashes, p.split_at), (u, k, u));
        assert_eq!(u64::from(p.initial_leaves), plan::leaf_count(100, u));
        let never = TreeParams::new(
            100,
            0.01,
            4096,
            9,
            SplitPolicy { mode: SplitMode::Never, ..SplitPolicy::default() },
        );
        assert_eq!(never.split_at, u64::MAX);
    }

    #[test]
    fn check_and_insert_then_contains() {
        let t = tree(SplitMode::Inline);
        assert!(!t.insert(42));
        assert!(t.insert(42));
        assert!(t.contains(42));
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn levels_use_different_location_hashes() {
        let t = tree(SplitMode::Inline);
        let same =
            (0..1000u64).filter(|&fp| t.level_route(fp, 0, 2) == t.level_route(fp, 1, 2)).count();
        // Independent levels agree about half the time; identical ones would agree always.
        assert!((350..650).contains(&same), "levels 0 and 1 agree on {same} of 1000");
    }

    #[test]
    fn a_full_leaf_splits_and_keeps_everything() {
        let t = tree(SplitMode::Inline);
        let u = t.params().split_at;
        let fps: Vec<u64> = (0..u * 20).map(|i| hash::mix64(i + 1)).collect();
        let recorded: Vec<u64> = fps.iter().copied().filter(|&fp| !t.insert(fp)).collect();
        let new = recorded.len() as u64;
        let s = t.stats();
        assert!(s.splits_done >= 10, "{} splits", s.splits_done);
        assert_eq!(s.splitting_nodes, 0);
        assert_eq!(s.count, new);
        assert!(s.leaves.iter().all(|l| l.count <= u), "no leaf passes its split point");
        assert!(recorded.iter().all(|&fp| t.contains(fp)));
    }

    #[test]
    fn split_sizes_spread_by_place_and_each_keeps_formula_4() {
        let p = TreeParams::new(
            100,
            0.01,
            1 << 20,
            9,
            SplitPolicy { growth: 1, ..SplitPolicy::default() },
        );
        let full = p.level(3);
        assert_eq!(p.split_level(3, None), full, "no place: the depth's size");
        let least = shrunk_bits(full.bits, SPLIT_SPREAD);
        let sizes: Vec<Level> =
            (0..1000u64).map(|i| p.split_level(3, Some(i.wrapping_mul(1 << 54)))).collect();
        for level in &sizes {
            assert!(level.bits.is_multiple_of(512) && (least..=full.bits).contains(&level.bits));
            // Formula 4 for its own bits: the bound holds at its split point, bits per URL stay.
            assert_eq!(*level, p.sized(level.bits));
            assert!(plan::blocked_fpr(level.bits, level.hashes, level.split_at) <= 0.01);
            assert_eq!(p.level_of(3, level.bits), Some(*level), "a snapshot accepts it");
        }
        let mean = sizes.iter().map(|l| l.bits as f64).sum::<f64>() / sizes.len() as f64;
        let spread = 1.0 - mean / full.bits as f64;
        assert!((0.12..0.18).contains(&spread), "mean share below the depth's size {spread}");
        assert!(sizes.iter().any(|l| l.bits < least + (full.bits - least) / 10));
        // The same place draws the same size; depths draw apart.
        assert_eq!(p.split_level(3, Some(5 << 50)), p.split_level(3, Some(5 << 50)));
        let differ = (0..100u64)
            .filter(|&i| p.split_level(3, Some(i << 56)) != p.split_level(4, Some(i << 56)))
            .count();
        assert!(differ > 80, "depths 3 and 4 agree on {} of 100 places", 100 - differ);
        // Sizes a tree never makes are refused.
        assert_eq!(p.level_of(3, least - 512), None);
        assert_eq!(p.level_of(3, full.bits + 512), None);
        assert_eq!(p.level_of(3, full.bits - 100), None);
    }

    #[test]
    fn a_grown_tree_has_leaves_of_spread_sizes_within_their_bounds() {
        let t = tree(SplitMode::Inline);
        let level = t.params().level(2);
        let fps: Vec<u64> = (0..level.split_at * 60).map(|i| hash::mix64(i + 3)).collect();
        let recorded: Vec<u64> = fps.iter().copied().filter(|&fp| !t.insert(fp)).collect();
        let s = t.stats();
        let mut sizes: Vec<u64> = s.leaves.iter().map(|l| l.bits).collect();
        sizes.sort_unstable();
        sizes.dedup();
        assert!(sizes.len() >= 2, "leaves of {sizes:?} bits after {} splits", s.splits_done);
        for l in &s.leaves {
            assert!(l.count <= l.capacity, "leaf {} holds {} of {}", l.id, l.count, l.capacity);
            assert!(l.estimated_fpr <= 0.01, "leaf {}: {}", l.id, l.estimated_fpr);
        }
        assert!(recorded.iter().all(|&fp| t.contains(fp)));
    }

    /// The one-pass path (see `direct`) answers and records exactly as the general path does:
    /// the same batches, with repeats inside and across them, some larger than a chunk, into
    /// two trees that split inline, give the same answers, leaves and filters.
    #[test]
    fn the_one_pass_path_matches_the_grouped_path() {
        let one_pass = tree(SplitMode::Inline);
        let grouped = tree(SplitMode::Inline);
        let mut scratch = BatchScratch::default();
        let mut next = 0u64;
        let mut taken = 0;
        for round in 0..40u64 {
            let size = [1, 7, 300, direct::CHUNK + 5, 2 * direct::CHUNK][round as usize % 5];
            let batch: Vec<u64> = (0..size as u64)
                .map(|j| {
                    next += 1;
                    // About one in three repeats an earlier fingerprint, some within the batch.
                    match hash::mix64(next) % 3 {
                        0 => hash::mix64(hash::mix64(next) % next.max(1)),
                        _ => hash::mix64(next + (j << 40)),
                    }
                })
                .collect();
            let (mut a, mut b) = (vec![false; size], vec![false; size]);
            one_pass.insert_batch(&batch, &mut a);
            let never: Result<(), std::convert::Infallible> = grouped.insert_batch_grouped(
                (&batch, &[]),
                &mut b,
                Mode::CheckAndInsert,
                true,
                None,
                &mut |_| Ok(0),
                &mut scratch,
            );
            assert!(never.is_ok());
            assert_eq!(a, b, "round {round}");
            let ids = |t: &Dsbf| {
                t.stats().leaves.iter().map(|l| (l.id, l.count, l.bits)).collect::<Vec<_>>()
            };
            assert_eq!(ids(&one_pass), ids(&grouped), "round {round}");
            taken += usize::from(one_pass.stats().leaves.len() > 1);
        }
        assert!(taken > 20, "the trees grew early: most rounds had several leaves");
        let (ta, tb) = (one_pass.topo.read(), grouped.topo.read());
        for (na, nb) in ta.nodes.iter().zip(&tb.nodes) {
            if let (Node::Leaf { leaf: la, .. }, Node::Leaf { leaf: lb, .. }) = (na, nb) {
                assert!(la.read().filter == lb.read().filter, "the filters differ");
            }
        }
        assert_eq!(one_pass.len(), grouped.len());
    }

    /// Chunks that fit go one pass; a chunk meeting a frozen filter takes the general path
    /// and is still answered right: nothing recorded is ever answered new.
    #[test]
    fn batches_across_a_split_in_progress_lose_nothing() {
        let t = Dsbf::in_memory(params(SplitMode::Background, 2, 64), SplitWorkers::new(1));
        let mut recorded = Vec::new();
        let mut next = 0u64;
        for round in 0..60u64 {
            let batch: Vec<u64> = (0..997u64)
                .map(|_| {
                    next += 1;
                    hash::mix64(next)
                })
                .collect();
            let mut out = vec![false; batch.len()];
            t.insert_batch(&batch, &mut out);
            recorded.extend(batch.iter().zip(&out).filter(|p| !p.1).map(|p| *p.0));
            let mut again = vec![false; recorded.len()];
            t.contains_batch(&recorded, &mut again);
            assert!(again.iter().all(|&seen| seen), "round {round}: a recorded fp was lost");
        }
        t.complete_splits();
        assert!(t.stats().leaves.len() > 8);
        let mut again = vec![false; recorded.len()];
        t.insert_batch(&recorded, &mut again);
        assert!(again.iter().all(|&seen| seen));
    }

    #[test]
    fn a_splitting_node_answers_from_its_frozen_filter_and_its_children() {
        let t = Dsbf::in_memory(params(SplitMode::Background, 2, 64), SplitWorkers::new(1));
        let u = t.params().split_at;
        let fps: Vec<u64> = (0..u + u / 5).map(|i| hash::mix64(i + 7)).collect();
        // Hold the migrator so the split stays half-done while we look at it.
        let migrator = t.migrator.lock();
        let mut out = vec![false; fps.len()];
        t.insert_batch(&fps, &mut out);
        let recorded: Vec<u64> = fps.iter().zip(&out).filter(|p| !p.1).map(|p| *p.0).collect();
        assert!(t.stats().splitting_nodes >= 1, "the full leaf is splitting");
        assert!(recorded.iter().all(|&fp| t.contains(fp)), "frozen filter still answers");
        // New inserts land in children while the parent is frozen.
        assert!(!t.insert(hash::mix64(u64::MAX)));
        assert!(t.contains(hash::mix64(u64::MAX)));
        drop(migrator);
        t.complete_splits();
        assert_eq!(t.stats().splitting_nodes, 0);
        assert!(recorded.iter().all(|&fp| t.contains(fp)));
    }

    #[test]
    fn a_batch_asks_a_frozen_filter_in_one_go_and_keeps_batch_order() {
        let t = Dsbf::in_memory(params(SplitMode::Background, 2, 64), SplitWorkers::new(1));
        let u = t.params().split_at;
        let fps: Vec<u64> = (0..u + u / 5).map(|i| hash::mix64(i + 11)).collect();
        // Hold the migrator so the split stays half-done while batches pass its frozen filter.
        let migrator = t.migrator.lock();
        let mut out = vec![false; fps.len()];
        t.insert_batch(&fps, &mut out);
        assert!(t.stats().splitting_nodes >= 1, "the full leaf is splitting");
        let recorded: Vec<u64> = fps.iter().zip(&out).filter(|p| !p.1).map(|p| *p.0).collect();
        // A batch of fingerprints the frozen filter holds, fresh ones, and fresh ones twice:
        // the held ones are seen, each fresh one new exactly at its first place.
        let fresh: Vec<u64> = (0..500u64).map(|i| hash::mix64(i + (1 << 40))).collect();
        let mut batch: Vec<u64> = recorded.iter().take(300).copied().collect();
        for (j, &fp) in fresh.iter().enumerate() {
            batch.push(fp);
            if j % 3 == 0 {
                batch.push(fp);
            }
        }
        let mut answers = vec![false; batch.len()];
        t.insert_batch(&batch, &mut answers);
        assert!(answers[..300].iter().all(|&seen| seen), "the frozen filter answers seen");
        let mut first = std::collections::HashSet::new();
        for (&fp, &seen) in batch[300..].iter().zip(&answers[300..]) {
            if first.insert(fp) {
                // A fresh fingerprint the filters falsely hold may be answered seen (1 %).
                continue;
            }
            assert!(seen, "a repeat within the batch is seen");
        }
        let new_first = batch[300..]
            .iter()
            .zip(&answers[300..])
            .filter(|p| !p.1)
            .map(|p| *p.0)
            .collect::<std::collections::HashSet<_>>();
        assert!(new_first.len() >= 480, "{} of 500 fresh answered new", new_first.len());
        drop(migrator);
        t.complete_splits();
        assert!(recorded.iter().all(|&fp| t.contains(fp)));
        assert!(new_first.iter().all(|&fp| t.contains(fp)), "no false negative after the split");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// A split never loses an element, whatever the fanout, step size and batch shape.
        #[test]
        fn splits_never_lose_an_element(
            fps in proptest::collection::vec(any::<u64>(), 1..3000),
            fanout in 2u32..6,
            step in 1usize..200,
            batch in 1usize..500,
        ) {
            let t = Dsbf::in_memory(params(SplitMode::Inline, fanout, step), SplitWorkers::new(1));
            let mut recorded = Vec::new();
            for chunk in fps.chunks(batch) {
                let mut out = vec![false; chunk.len()];
                t.insert_batch(chunk, &mut out);
                recorded.extend(chunk.iter().zip(&out).filter(|p| !p.1).map(|p| *p.0));
            }
            let mut out = vec![false; recorded.len()];
            t.contains_batch(&recorded, &mut out);
            prop_assert!(out.iter().all(|&h| h));
            prop_assert_eq!(t.len(), recorded.len() as u64);
            let s = t.stats();
            prop_assert!(s.leaves.iter().all(|l| l.count <= t.params().split_at));
        }
    }
}
