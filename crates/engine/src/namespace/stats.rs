//! What a namespace reports about itself: counts, memory, disk, FPR and the shape of its tree
//! or counting filters ([`Namespace::stats`]).
use super::{
    CountingSet, Dsbf, ExactStats, Generations, LeafStats, Namespace, RecrawlReport, Serialize,
    Set, small,
};

impl Namespace {
    /// Counts, memory, FPR and the shape of the tree (or of the counting filters).
    pub fn stats(&self) -> NamespaceStats {
        let mut stats = match self.set() {
            Set::Small(small) => self.small_stats(small),
            Set::Tree { tree, exact } => {
                let mut s = self.tree_stats(tree);
                s.exact = match exact {
                    Some(e) => Some(e.report(tree)),
                    // Opened read-only (no index, no LRU): what the leaves hold.
                    None if self.options.is_exact() => Some(ExactReport::from(ExactStats {
                        recorded: tree.len(),
                        stored: tree.len(),
                        ..ExactStats::default()
                    })),
                    None => None,
                };
                s
            }
            Set::Counting(set) => self.counting_stats(set),
            Set::Recrawl(gens) => return self.recrawl_stats(gens),
        };
        if let Some(urls) = &self.urls {
            let (memory, disk) = urls.sizes();
            stats.memory_bytes += memory;
            stats.disk_bytes += disk;
            stats.kept_urls = Some(urls.entries());
        }
        stats.persistence = self.backing.durable().map(|d| {
            let l = d.log.stats();
            stats.disk_bytes +=
                l.bytes + d.snapshot_bytes.load(std::sync::atomic::Ordering::Acquire);
            PersistenceStats {
                fsync: d.log.policy().name(),
                log_bytes: l.bytes,
                syncs: l.syncs,
                sync_micros: l.sync_micros,
                snapshot_offset: d.snapshot_end.load(std::sync::atomic::Ordering::Acquire),
                recovery_truncated_bytes: d.recovery.truncated_bytes,
                read_only: d.log.is_read_only(),
                recovery_snapshot_error: d.recovery.snapshot_error.clone(),
            }
        });
        stats
    }

    fn mode(&self) -> &'static str {
        match (self.set(), self.options.is_exact()) {
            (Set::Counting(_), _) => "counting",
            (Set::Small(_), _) => "bloom",
            (Set::Recrawl(_), true) => "exact",
            (Set::Recrawl(_), false) => "bloom",
            (Set::Tree { .. }, true) => "exact",
            (Set::Tree { .. }, false) => "bloom",
        }
    }

    /// A small list's: one "leaf" that is the list, whose false positives are fingerprint
    /// collisions (counted as none). A list that became a tree meanwhile reports the tree.
    fn small_stats(&self, small: &small::SmallSet) -> NamespaceStats {
        let (Some(count), Some(memory_bytes)) = (small.len(), small.memory_bytes()) else {
            return self.stats();
        };
        let p = crate::tree::TreeParams::from(&*self.options);
        NamespaceStats {
            name: self.name.to_string(),
            mode: self.mode(),
            count,
            kept: 0,
            memory_bytes,
            filter_reserved_bytes: 0,
            disk_bytes: 0,
            kept_urls: None,
            fpr_bound: p.fpr,
            worst_leaf_fpr: 0.0,
            mean_leaf_fpr: 0.0,
            profile: self.options.canon.profile.name(),
            seed: self.options.seed,
            leaf_bits: p.leaf_bits,
            leaf_hashes: p.leaf_hashes,
            leaf_capacity: p.leaf_capacity,
            split_fanout: p.split.fanout,
            initial_leaves: p.initial_leaves,
            height: 0,
            leaf_count: 1,
            inner_nodes: 0,
            splitting_nodes: 0,
            splits_started: 0,
            splits_done: 0,
            leaves_per_depth: vec![1],
            leaves: Vec::new(),
            exact: None,
            counting: None,
            recrawl: None,
            persistence: None,
        }
    }

    fn tree_stats(&self, tree: &Dsbf) -> NamespaceStats {
        let t = tree.stats();
        let p = tree.params();
        let mut leaves_per_depth = vec![0u64; t.height as usize + 1];
        for leaf in &t.leaves {
            if let Some(n) = leaves_per_depth.get_mut(leaf.depth as usize) {
                *n += 1;
            }
        }
        NamespaceStats {
            name: self.name.to_string(),
            mode: self.mode(),
            count: t.count,
            kept: t.kept,
            memory_bytes: t.memory_bytes,
            filter_reserved_bytes: t.filter_reserved_bytes,
            disk_bytes: t.disk_bytes,
            kept_urls: None,
            fpr_bound: p.fpr,
            worst_leaf_fpr: t.worst_leaf_fpr,
            mean_leaf_fpr: if t.leaves.is_empty() {
                0.0
            } else {
                t.leaves.iter().map(|l| l.estimated_fpr).sum::<f64>() / t.leaves.len() as f64
            },
            profile: self.options.canon.profile.name(),
            seed: self.options.seed,
            leaf_bits: p.leaf_bits,
            leaf_hashes: p.leaf_hashes,
            leaf_capacity: p.leaf_capacity,
            split_fanout: p.split.fanout,
            initial_leaves: p.initial_leaves,
            height: t.height,
            leaf_count: t.leaves.len(),
            inner_nodes: t.inner_nodes,
            splitting_nodes: t.splitting_nodes,
            splits_started: t.splits_started,
            splits_done: t.splits_done,
            leaves_per_depth,
            leaves: t.leaves.iter().map(LeafReport::from).collect(),
            exact: None,
            counting: None,
            recrawl: None,
            persistence: None,
        }
    }

    /// A window's statistics: its generations' summed (counts, memory, disk, leaves), the
    /// tree parameters of its generations, and the union's FPR estimate `1 − Π(1 − f_i)`.
    fn recrawl_stats(&self, gens: &Generations) -> NamespaceStats {
        let (report, parts) = gens.report();
        let union = |f: &dyn Fn(&NamespaceStats) -> f64| {
            1.0 - parts.iter().map(|s| 1.0 - f(s)).product::<f64>()
        };
        let g = self.options.generation_options();
        let p = crate::tree::TreeParams::from(&g);
        let mut leaves_per_depth: Vec<u64> = Vec::new();
        for s in &parts {
            for (d, n) in s.leaves_per_depth.iter().enumerate() {
                if leaves_per_depth.len() <= d {
                    leaves_per_depth.resize(d + 1, 0);
                }
                leaves_per_depth[d] += n;
            }
        }
        let sum = |f: &dyn Fn(&NamespaceStats) -> u64| parts.iter().map(f).sum::<u64>();
        NamespaceStats {
            name: self.name.to_string(),
            mode: self.mode(),
            count: sum(&|s| s.count),
            kept: sum(&|s| s.kept),
            memory_bytes: sum(&|s| s.memory_bytes),
            filter_reserved_bytes: sum(&|s| s.filter_reserved_bytes),
            disk_bytes: sum(&|s| s.disk_bytes),
            kept_urls: None,
            fpr_bound: self.options.fpr,
            worst_leaf_fpr: union(&|s| s.worst_leaf_fpr),
            mean_leaf_fpr: union(&|s| s.mean_leaf_fpr),
            profile: self.options.canon.profile.name(),
            seed: self.options.seed,
            leaf_bits: p.leaf_bits,
            leaf_hashes: p.leaf_hashes,
            leaf_capacity: p.leaf_capacity,
            split_fanout: p.split.fanout,
            initial_leaves: p.initial_leaves,
            height: parts.iter().map(|s| s.height).max().unwrap_or(0),
            leaf_count: parts.iter().map(|s| s.leaf_count).sum(),
            inner_nodes: parts.iter().map(|s| s.inner_nodes).sum(),
            splitting_nodes: parts.iter().map(|s| s.splitting_nodes).sum(),
            splits_started: sum(&|s| s.splits_started),
            splits_done: sum(&|s| s.splits_done),
            leaves_per_depth,
            leaves: parts.iter().flat_map(|s| s.leaves.iter().cloned()).collect(),
            exact: None,
            counting: None,
            recrawl: Some(report),
            persistence: parts.last().and_then(|s| s.persistence.clone()),
        }
    }

    fn counting_stats(&self, set: &CountingSet) -> NamespaceStats {
        let c = set.stats();
        let active = c.generations.last();
        NamespaceStats {
            name: self.name.to_string(),
            mode: self.mode(),
            count: c.len,
            kept: 0,
            memory_bytes: c.memory_bytes,
            filter_reserved_bytes: c.filter_memory_bytes,
            disk_bytes: 0,
            kept_urls: None,
            fpr_bound: self.options.fpr,
            worst_leaf_fpr: c.generations.iter().map(|g| g.estimated_fpr).fold(0.0, f64::max),
            mean_leaf_fpr: c.filter_fpr,
            profile: self.options.canon.profile.name(),
            seed: self.options.seed,
            leaf_bits: active.map_or(0, |g| g.counters),
            leaf_hashes: active.map_or(0, |g| g.hashes),
            leaf_capacity: active.map_or(0, |g| g.capacity),
            split_fanout: 0,
            initial_leaves: 0,
            height: 0,
            leaf_count: 0,
            inner_nodes: 0,
            splitting_nodes: 0,
            splits_started: 0,
            splits_done: 0,
            leaves_per_depth: Vec::new(),
            leaves: Vec::new(),
            exact: Some(ExactReport::from(set.exact().stats())),
            counting: Some(CountingReport {
                generations: c.generations.len(),
                saturated_counters: c.saturated_counters,
                filter_fpr: c.filter_fpr,
                filter_memory_bytes: c.filter_memory_bytes,
                definitely_new: c.definitely_new,
                filter_positives: c.filter_positives,
                false_positives: c.false_positives,
                recounted_counters: c.recounted_counters,
                recount_scans: c.recount_scans,
            }),
            recrawl: None,
            persistence: None,
        }
    }
}

/// A namespace's statistics, from [`Namespace::stats`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NamespaceStats {
    /// Namespace name.
    pub name: String,
    /// `bloom`, `exact` or `counting`.
    pub mode: &'static str,
    /// Distinct URLs recorded.
    pub count: u64,
    /// Kept records: URLs answered "seen" on a Bloom positive, logged so that they stay "seen"
    /// after the splits that rebuild the filters from the logs. Not in `count`.
    pub kept: u64,
    /// RAM held: filters, leaf buffers and indexes (and, for a namespace in memory, the leaf
    /// logs), in bytes. What RSS shows for this namespace, allocator slack aside. A leaf's
    /// filter is allocated when the leaf records its first URL, so a namespace reserved for a
    /// large capacity holds little until its leaves are used.
    pub memory_bytes: u64,
    /// What the filters take once every leaf has recorded something (`memory_bytes` grows
    /// toward it as leaves are first used; splits add new leaves), in bytes.
    pub filter_reserved_bytes: u64,
    /// Disk held: leaf files, in a data directory the log and the snapshot, and the URL
    /// journal, in bytes.
    pub disk_bytes: u64,
    /// Entries in the URL journal of a namespace that keeps its URLs
    /// ([`NamespaceOptions::keep_urls`](super::NamespaceOptions::keep_urls)): about one per distinct URL recorded. `None`
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_urls: Option<u64>,
    /// The configured bound `f_max`.
    pub fpr_bound: f64,
    /// The worst leaf's estimated FPR (formula 7): the namespace's FPR bound in effect. In
    /// exact mode this is the rate at which new URLs cost a store read, not a rate of wrong
    /// answers (see [`ExactReport::collision_bound`]). In a counting namespace, the worst
    /// generation's.
    pub worst_leaf_fpr: f64,
    /// The mean of the leaves' estimated FPRs: the FPR a uniformly random query sees.
    pub mean_leaf_fpr: f64,
    /// Canonicalization profile.
    pub profile: &'static str,
    /// Seed.
    pub seed: u64,
    /// Bits per leaf (`m`).
    pub leaf_bits: u64,
    /// Probes per lookup (`k`).
    pub leaf_hashes: u32,
    /// Elements per leaf before it splits (`u`).
    pub leaf_capacity: u64,
    /// Children per split.
    pub split_fanout: u32,
    /// Leaves at creation (`c`).
    pub initial_leaves: u32,
    /// Depth of the deepest leaf.
    pub height: u32,
    /// Number of leaves.
    pub leaf_count: usize,
    /// Routing-only nodes.
    pub inner_nodes: usize,
    /// Nodes being split now.
    pub splitting_nodes: usize,
    /// Splits begun.
    pub splits_started: u64,
    /// Splits completed.
    pub splits_done: u64,
    /// How many leaves sit at each depth (index = depth).
    pub leaves_per_depth: Vec<u64>,
    /// Every leaf.
    pub leaves: Vec<LeafReport>,
    /// The LRU and fingerprint store, in exact mode.
    pub exact: Option<ExactReport>,
    /// The counting filters, in a counting namespace (whose tree fields above are then zero,
    /// except `leaf_bits`, `leaf_hashes` and `leaf_capacity`, which describe the active
    /// generation: counters, k and capacity).
    pub counting: Option<CountingReport>,
    /// The recrawl window and each live generation's age and count, if the namespace has a
    /// window (then the counts, memory and leaves above are the generations' summed, the leaf
    /// parameters a generation's, and the FPR estimates the union's).
    pub recrawl: Option<RecrawlReport>,
    /// The log and snapshot, in a persistent `Db` (for a recrawl window, its current
    /// generation's).
    pub persistence: Option<PersistenceStats>,
}

/// Exact mode's LRU and store, in [`NamespaceStats`]. Counters are since the namespace was
/// opened.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExactReport {
    /// Bloom positives answered by the LRU (no store read).
    pub lru_hits: u64,
    /// Point reads of the store (counting); page reads of leaf index runs (exact DSBF).
    pub store_reads: u64,
    /// Store reads that found the fingerprint; positives found in a run (exact DSBF).
    pub store_hits: u64,
    /// Write batches sent to the store; runs written (exact DSBF).
    pub store_writes: u64,
    /// Fingerprints recorded in the store.
    pub recorded: u64,
    /// Fingerprints forgotten.
    pub forgotten: u64,
    /// Fingerprints in the store now.
    pub stored: u64,
    /// Fingerprints in the LRU now, and its capacity.
    pub lru_len: u64,
    /// The LRU's capacity.
    pub lru_capacity: u64,
    /// Heap bytes of the LRU.
    pub lru_memory_bytes: u64,
    /// The false-positive bound left: the chance that a new URL's 64-bit fingerprint equals
    /// one of the `stored` ones, at most `stored / 2^64`.
    pub collision_bound: f64,
}

impl From<ExactStats> for ExactReport {
    fn from(s: ExactStats) -> Self {
        ExactReport {
            lru_hits: s.lru_hits,
            store_reads: s.store_reads,
            store_hits: s.store_hits,
            store_writes: s.store_writes,
            recorded: s.recorded,
            forgotten: s.forgotten,
            stored: s.stored,
            lru_len: s.lru_len,
            lru_capacity: s.lru_capacity,
            lru_memory_bytes: s.lru_memory_bytes,
            collision_bound: s.stored as f64 / 2f64.powi(64),
        }
    }
}

/// A counting namespace's filters, in [`NamespaceStats`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CountingReport {
    /// Filter generations (each twice the previous one's capacity).
    pub generations: usize,
    /// Counters at 15, over all generations.
    pub saturated_counters: u64,
    /// The rate at which the filters send a new URL to the store.
    pub filter_fpr: f64,
    /// Bytes of counters.
    pub filter_memory_bytes: u64,
    /// URLs the filters declared new with no store read (since opened).
    pub definitely_new: u64,
    /// URLs the filters sent to the LRU and store.
    pub filter_positives: u64,
    /// Of those, the ones the store did not know (filter false positives, recorded as new).
    pub false_positives: u64,
    /// Saturated counters recounted from the store by `forget`.
    pub recounted_counters: u64,
    /// Store scans `forget` made to recount them.
    pub recount_scans: u64,
}

/// The on-disk side of a namespace, in [`NamespaceStats`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PersistenceStats {
    /// The fsync policy.
    pub fsync: &'static str,
    /// Bytes in the fingerprint log.
    pub log_bytes: u64,
    /// Syncs done since open.
    pub syncs: u64,
    /// Time spent in them, in microseconds.
    pub sync_micros: u64,
    /// Log offset covered by the newest snapshot.
    pub snapshot_offset: u64,
    /// Bytes of a torn or damaged log tail that recovery cut when the namespace was opened
    /// (records in them are gone; under `fsync = always` none of them was acknowledged). When
    /// `read_only`, the tail was found and left in place: the next read-write open cuts it.
    pub recovery_truncated_bytes: u64,
    /// Whether the data directory was opened read-only (`urlseen stats`): nothing was
    /// written, and the figures are those a read-write open would find.
    pub read_only: bool,
    /// Why recovery did not use the snapshot, if it did not (the namespace was rebuilt from the
    /// log instead, which loses nothing).
    pub recovery_snapshot_error: Option<String>,
}

/// One leaf in [`NamespaceStats`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeafReport {
    /// Node id in the tree.
    pub id: u32,
    /// Depth (the root's children are at depth 1).
    pub depth: u32,
    /// Elements recorded.
    pub count: u64,
    /// Elements it holds before it splits (`u` at its depth: deeper leaves are larger when the
    /// split policy's growth is above 1).
    pub capacity: u64,
    /// Bits of its filter.
    pub bits: u64,
    /// Fraction of bits set.
    pub fill_ratio: f64,
    /// Whether its filter holds memory (allocated by the leaf's first record).
    pub allocated: bool,
    /// Estimated FPR from the count.
    pub estimated_fpr: f64,
}

impl From<&LeafStats> for LeafReport {
    fn from(l: &LeafStats) -> Self {
        LeafReport {
            id: l.id,
            depth: l.depth,
            count: l.count,
            capacity: l.capacity,
            bits: l.bits,
            fill_ratio: l.fill_ratio,
            allocated: l.allocated,
            estimated_fpr: l.estimated_fpr,
        }
    }
}
