//! A tree's shape and fill, leaf by leaf: what `stats`, `plan`, `URL.INFO`, `BF.INFO` and
//! `/metrics` report.
use super::{BlockedBloom, Dsbf, LeafIndex, LeafLog, Node, NodeId, Ordering, plan};

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
    /// ([`TreeParams::split_level`](super::TreeParams::split_level)).
    pub bits: u64,
    /// Fraction of the filter's bits set.
    pub fill_ratio: f64,
    /// Whether its filter holds memory: allocated by the leaf's first record.
    pub allocated: bool,
    /// FPR of this leaf by formula, from its count.
    pub estimated_fpr: f64,
}

/// What a tree holds, without the per-leaf detail of [`TreeStats`]: what the namespaces'
/// running totals are made of (see `crate::db::Usage`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TreeSizes {
    /// As [`TreeStats::memory_bytes`].
    pub memory_bytes: u64,
    /// As [`TreeStats::filter_reserved_bytes`].
    pub filter_reserved_bytes: u64,
    /// As [`TreeStats::disk_bytes`].
    pub disk_bytes: u64,
    /// Nodes visited to find these: what measuring them again costs.
    pub nodes: u64,
}

/// RAM and filter reservation of one leaf or frozen filter.
fn leaf_sizes(filter: &BlockedBloom, log: &LeafLog, index: Option<&LeafIndex>) -> (u64, u64) {
    let memory = filter.memory_bytes() as u64
        + log.memory_bytes()
        + index.map_or(0, LeafIndex::tail_memory_bytes);
    (memory, filter.reserved_bytes() as u64)
}

impl Dsbf {
    /// RAM, filter reservation and disk, summed over the nodes: [`Self::stats`] without its
    /// per-leaf FPR formulas (a Poisson mixture each), so cheap enough to keep running totals.
    pub fn sizes(&self) -> TreeSizes {
        let topo = self.topo.read();
        let (mut memory, mut reserved) = (0u64, 0u64);
        for node in &topo.nodes {
            let (m, r) = match node {
                Node::Inner { .. } => (0, 0),
                Node::Splitting { frozen, .. } => {
                    leaf_sizes(&frozen.filter, &frozen.log, frozen.index.as_ref())
                }
                Node::Leaf { leaf, .. } => {
                    let leaf = leaf.read();
                    leaf_sizes(&leaf.filter, &leaf.log, leaf.index.as_ref())
                }
            };
            memory += m;
            reserved += r;
        }
        let index = self.index_stats();
        TreeSizes {
            memory_bytes: memory + index.run_memory_bytes,
            filter_reserved_bytes: reserved,
            disk_bytes: self.leaves.disk_bytes() + index.disk_bytes,
            nodes: topo.nodes.len() as u64,
        }
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
                    let (m, r) = leaf_sizes(&frozen.filter, &frozen.log, frozen.index.as_ref());
                    memory += m;
                    reserved += r;
                    height = height.max(*depth);
                }
                Node::Leaf { depth, leaf } => {
                    let leaf = leaf.read();
                    let count = leaf.fill();
                    kept += leaf.kept;
                    let (m, r) = leaf_sizes(&leaf.filter, &leaf.log, leaf.index.as_ref());
                    memory += m;
                    reserved += r;
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
