//! Where a fingerprint goes in the tree, and the directory that finds its leaf in one step.
//!
//! Two rules route a fingerprint down the DSBF:
//!
//! - [`Routing::Levels`], the seed paper's: a node at depth `d` sends `fp` to child
//!   `reduce(mix64(fp ^ seed_d), n)`, with a fresh hash on every level. Finding a leaf costs one
//!   hash and two dependent loads per level, about 60 ns at height 6: more than the leaf
//!   filter's own probe. Trees written before version 4 of the snapshot keep it.
//! - [`Routing::Ranges`], used by every tree made since: one hash `h = mix64(fp ^ seed_0)`,
//!   read like an arithmetic code. A node with `n` children sends `x` (at the root, `h`) to
//!   child `⌊x·n / 2⁶⁴⌋` and passes on `x·n mod 2⁶⁴`. Every level still draws a fresh,
//!   uniform choice (from the next bits of `h`), so the per-leaf sizing is unchanged; but each
//!   node now owns one contiguous range of `h`, its children cut it in `n` near-equal parts, and
//!   the leaves tile `[0, 2⁶⁴)` in order. So the leaf of `h` is found by a [`Directory`]
//!   lookup: one shift, one load, and (rarely) a short search, whatever the height.
//!
//! A fingerprint's path draws `log2(n)` bits of `h` per level; a path's fanouts multiply to at
//! most the number of leaves, so even a tree of millions of leaves leaves 40 bits of `h` to the
//! deepest level's choice.

use urlseen_filter::hash;

use super::NodeId;
use crate::dsbf::params::level_seed;

/// How a tree routes fingerprints (see the module docs). Stored in the snapshot header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routing {
    /// A hash per level (snapshots before version 4).
    Levels,
    /// One hash, read as nested ranges.
    Ranges,
}

impl Routing {
    /// The byte the snapshot header stores.
    pub(crate) fn to_byte(self) -> u8 {
        match self {
            Routing::Levels => 0,
            Routing::Ranges => 1,
        }
    }

    /// The routing a snapshot header's byte names.
    pub(crate) fn from_byte(b: u8) -> Option<Routing> {
        match b {
            0 => Some(Routing::Levels),
            1 => Some(Routing::Ranges),
            _ => None,
        }
    }
}

/// The range hash of `fp` under [`Routing::Ranges`].
#[inline(always)]
pub(crate) fn range_hash(fp: u64, seed: u64) -> u64 {
    hash::mix64(fp ^ seed)
}

/// Levels whose location hash seed is computed once (deeper ones compute theirs per call, a
/// multiply and two shifts): few, since every namespace holds them.
const SEEDED_LEVELS: usize = 8;

/// The walk down a tree: its routing rule and its levels' seeds. The one definition of a
/// fingerprint's path, for the tree in this process and the Redis backend alike.
#[derive(Debug, Clone)]
pub struct Paths {
    routing: Routing,
    seed: u64,
    /// [`level_seed`] of depths `0..SEEDED_LEVELS`.
    level_seeds: [u64; SEEDED_LEVELS],
}

impl Paths {
    /// The paths of a tree seeded `seed` and routed by `routing`.
    pub fn new(routing: Routing, seed: u64) -> Paths {
        let mut level_seeds = [0u64; SEEDED_LEVELS];
        for (depth, s) in level_seeds.iter_mut().enumerate() {
            *s = level_seed(seed, depth as u32);
        }
        Paths { routing, seed, level_seeds }
    }

    /// The routing rule.
    pub fn routing(&self) -> Routing {
        self.routing
    }

    /// What a walk for `fp` starts from: its range hash, or (per-level routing) nothing.
    #[inline(always)]
    pub fn start(&self, fp: u64) -> u64 {
        match self.routing {
            Routing::Levels => 0,
            Routing::Ranges => range_hash(fp, self.level_seeds[0]),
        }
    }

    /// The seed of [`range_hash`] under [`Routing::Ranges`] (what [`Self::start`] hashes
    /// with), for a loop that hashes many fingerprints; `None` under [`Routing::Levels`].
    pub(crate) fn range_seed(&self) -> Option<u64> {
        (self.routing == Routing::Ranges).then_some(self.level_seeds[0])
    }

    /// Which of the `n` children of a node at `depth` gets `fp`, whose walk state is `x`
    /// (from [`Self::start`], then passed from level to level).
    #[inline(always)]
    pub fn child(&self, x: &mut u64, fp: u64, depth: u32, n: usize) -> usize {
        match self.routing {
            Routing::Levels => self.level_child(fp, depth, n),
            Routing::Ranges => step(x, n),
        }
    }

    /// The location hash of level `depth` (per-level routing): which of `n` children gets `fp`.
    #[inline]
    pub fn level_child(&self, fp: u64, depth: u32, n: usize) -> usize {
        let seed = match self.level_seeds.get(depth as usize) {
            Some(&s) => s,
            None => level_seed(self.seed, depth),
        };
        hash::reduce(hash::mix64(fp ^ seed), n as u64) as usize
    }
}

/// One level of [`Routing::Ranges`]: the child of `n` that `x` goes to; `x` becomes what the
/// child's level reads.
#[inline(always)]
fn step(x: &mut u64, n: usize) -> usize {
    let wide = u128::from(*x) * n as u128;
    *x = wide as u64;
    (wide >> 64) as usize
}

/// The part of the range hash a node owns (inclusive bounds; `lo > hi` for none, which only a
/// child of a degenerate, astronomically deep tree can have) and the multiplier that gives
/// the node's `x` from `h`: the product of its ancestors' fanouts, modulo 2⁶⁴.
#[derive(Debug, Clone, Copy)]
struct Span {
    lo: u64,
    hi: u64,
    mult: u64,
}

const EMPTY: Span = Span { lo: 1, hi: 0, mult: 0 };

impl Span {
    fn is_empty(&self) -> bool {
        self.lo > self.hi
    }

    /// Which of `n` children `h` (inside this span) goes to.
    fn child_of(&self, h: u64, n: usize) -> usize {
        let mut x = h.wrapping_mul(self.mult);
        step(&mut x, n)
    }

    /// The spans of `n` children: child `i` owns the `h` of this span that go to it, a
    /// contiguous run because `x` grows with `h` inside a span (it never wraps there).
    fn split(&self, n: usize) -> Vec<Span> {
        let mult = self.mult.wrapping_mul(n as u64);
        if self.is_empty() {
            return vec![EMPTY; n];
        }
        // starts[i]: the first h with child ≥ i (hi + 1 if none).
        let mut starts = Vec::with_capacity(n + 1);
        starts.push(u128::from(self.lo));
        for i in 1..n {
            let (mut a, mut b) = (u128::from(self.lo), u128::from(self.hi) + 1);
            while a < b {
                let m = a + (b - a) / 2;
                if self.child_of(m as u64, n) >= i {
                    b = m;
                } else {
                    a = m + 1;
                }
            }
            starts.push(a);
        }
        starts.push(u128::from(self.hi) + 1);
        starts
            .windows(2)
            .map(|w| {
                if w[0] < w[1] {
                    Span { lo: w[0] as u64, hi: (w[1] - 1) as u64, mult }
                } else {
                    EMPTY
                }
            })
            .collect()
    }
}

/// The live leaves in range order, so that the leaf of a range hash is found in one step, and
/// for each, whether a splitting node above it has a frozen filter to check first.
///
/// Kept under the tree's lock and changed with the shape: a split adds its children (and marks
/// them as below a frozen filter), a finished split clears that mark.
#[derive(Debug, Clone)]
pub struct Directory {
    /// Every node's span, by node id.
    spans: Vec<Span>,
    /// The first range hash of each live leaf, ascending; `starts[0]` is 0.
    starts: Vec<u64>,
    /// The leaf at each position of `starts`.
    leaves: Vec<NodeId>,
    /// How many splitting nodes lie above the leaf at each position.
    frozen_above: Vec<u32>,
    /// The splitting node above the leaf at each position, when it is exactly one and known
    /// (its frozen filter is then asked without a walk); [`NO_NODE`] otherwise.
    frozen_node: Vec<NodeId>,
    /// For each of 2^b equal buckets of the hash, the position of the leaf that owns its first
    /// hash, flagged [`WHOLE`] when that leaf owns the whole bucket; one more entry closes the
    /// last bucket.
    buckets: Vec<u32>,
    /// `64 - b`.
    shift: u32,
}

/// A bucket's flag: one leaf owns all of it (its position is the answer, no search).
const WHOLE: u32 = 1 << 31;

/// No node: see [`Directory::locate`].
pub(crate) const NO_NODE: NodeId = NodeId::MAX;

/// What a node of the tree is, as the directory needs to know it.
#[derive(Debug)]
pub enum Shape<'a> {
    Leaf,
    Inner(&'a [NodeId]),
    Splitting(&'a [NodeId]),
}

impl Directory {
    /// The directory of a tree of `nodes` nodes whose shape `shape` tells, rooted at node 0.
    /// Shapes that do not describe a tree (checked by the caller before) give a directory of
    /// what was reachable.
    pub fn build<'a>(nodes: usize, shape: impl Fn(NodeId) -> Shape<'a>) -> Directory {
        let mut dir = Directory {
            spans: vec![EMPTY; nodes],
            starts: Vec::new(),
            leaves: Vec::new(),
            frozen_above: Vec::new(),
            frozen_node: Vec::new(),
            buckets: Vec::new(),
            shift: 0,
        };
        let root = Span { lo: 0, hi: u64::MAX, mult: 1 };
        let mut stack = vec![(0 as NodeId, root, 0u32, NO_NODE)];
        while let Some((id, span, frozen, above)) = stack.pop() {
            let Some(slot) = dir.spans.get_mut(id as usize) else { continue };
            *slot = span;
            let (children, frozen) = match shape(id) {
                Shape::Leaf => {
                    if !span.is_empty() {
                        dir.starts.push(span.lo);
                        dir.leaves.push(id);
                        dir.frozen_above.push(frozen);
                        dir.frozen_node.push(if frozen == 1 { above } else { NO_NODE });
                    }
                    continue;
                }
                Shape::Inner(children) => (children, frozen),
                Shape::Splitting(children) => (children, frozen + 1),
            };
            let above = if frozen > 0 && above == NO_NODE { id } else { above };
            // Pushed last to first, so the leaves come out in range order.
            for (&child, span) in children.iter().zip(span.split(children.len())).rev() {
                stack.push((child, span, frozen, above));
            }
        }
        dir.index();
        dir
    }

    /// Leaf `id` became a splitting node over `children` (new node ids).
    pub(crate) fn split(&mut self, id: NodeId, children: &[NodeId]) {
        let Some(&span) = self.spans.get(id as usize) else { return };
        let spans = span.split(children.len());
        for (&child, &s) in children.iter().zip(&spans) {
            let child = child as usize;
            if self.spans.len() <= child {
                self.spans.resize(child + 1, EMPTY);
            }
            self.spans[child] = s;
        }
        if span.is_empty() {
            return;
        }
        let pos = self.position(span.lo);
        debug_assert_eq!(self.leaves[pos], id, "the directory lost leaf {id}");
        let frozen = self.frozen_above[pos] + 1;
        let node = if frozen == 1 { id } else { NO_NODE };
        let live: Vec<(u64, NodeId)> = children
            .iter()
            .zip(&spans)
            .filter(|(_, s)| !s.is_empty())
            .map(|(&c, s)| (s.lo, c))
            .collect();
        self.starts.splice(pos..=pos, live.iter().map(|&(lo, _)| lo));
        self.leaves.splice(pos..=pos, live.iter().map(|&(_, c)| c));
        self.frozen_above.splice(pos..=pos, live.iter().map(|_| frozen));
        self.frozen_node.splice(pos..=pos, live.iter().map(|_| node));
        self.index();
    }

    /// Splitting node `id` became inner: its leaves no longer have its frozen filter above.
    pub(crate) fn finish(&mut self, id: NodeId) {
        let Some(&span) = self.spans.get(id as usize) else { return };
        if span.is_empty() {
            return;
        }
        let mut pos = self.position(span.lo);
        while pos < self.starts.len() && self.starts[pos] <= span.hi {
            self.frozen_above[pos] = self.frozen_above[pos].saturating_sub(1);
            // The one left (if any) is not `id`, and which it is is not kept: walk to it.
            self.frozen_node[pos] = NO_NODE;
            pos += 1;
        }
    }

    /// Where each of the `n` children that a split of node `id` would make starts its range
    /// (`None` for an empty range or an unknown node): with its depth, it names the child's
    /// place in the tree, whatever its id.
    pub fn child_places(&self, id: NodeId, n: usize) -> Vec<Option<u64>> {
        match self.spans.get(id as usize) {
            Some(span) => span.split(n).iter().map(|s| (!s.is_empty()).then_some(s.lo)).collect(),
            None => vec![None; n],
        }
    }

    /// Which of the `n` children of node `id` range hash `h` (inside the node's range) goes
    /// to; `None` for a node the directory does not know. (The Redis backend's splits: the
    /// in-process tree walks down instead.)
    pub fn child_of(&self, id: NodeId, h: u64, n: usize) -> Option<usize> {
        let span = self.spans.get(id as usize)?;
        (!span.is_empty()).then(|| span.child_of(h, n))
    }

    /// The leaf that owns range hash `h`, and whether a frozen filter lies above it: `None`,
    /// `Some(node)` for exactly one, the splitting node `node`, or `Some(`[`NO_NODE`]`)` for
    /// others (walk down to find them).
    #[inline(always)]
    pub(crate) fn locate(&self, h: u64) -> (NodeId, Option<NodeId>) {
        let pos = self.position(h);
        let frozen = (self.frozen_above[pos] != 0).then_some(self.frozen_node[pos]);
        (self.leaves[pos], frozen)
    }

    /// The position (in range order) of the leaf that owns range hash `h`, and the splitting
    /// node above it if there is exactly one known (`Some(node)`, see [`Self::locate`]);
    /// `None` if there are more, or one not known (walk down to find them).
    #[inline(always)]
    pub(crate) fn position_below(&self, h: u64) -> Option<(usize, Option<NodeId>)> {
        let pos = self.position(h);
        match self.frozen_above[pos] {
            0 => Some((pos, None)),
            _ => match self.frozen_node[pos] {
                NO_NODE => None,
                node => Some((pos, Some(node))),
            },
        }
    }

    /// Whether a split under way lies above leaf `id` (`false` for a node the directory does
    /// not know as a leaf).
    pub(crate) fn below_a_split(&self, id: NodeId) -> bool {
        let Some(span) = self.spans.get(id as usize).filter(|s| !s.is_empty()) else {
            return false;
        };
        let pos = self.position(span.lo);
        self.leaves[pos] == id && self.frozen_above[pos] != 0
    }

    /// The leaf at position `pos` (see [`Self::position_below`]).
    #[inline(always)]
    pub(crate) fn leaf_at(&self, pos: usize) -> NodeId {
        self.leaves[pos]
    }

    /// How many leaves the tree has.
    pub(crate) fn leaf_count(&self) -> usize {
        self.leaves.len()
    }

    /// The position of the leaf that owns `h`.
    #[inline(always)]
    fn position(&self, h: u64) -> usize {
        let b = (h >> self.shift) as usize;
        let first = self.buckets[b];
        if first & WHOLE != 0 {
            // Nearly always: there are many more buckets than leaves.
            return (first & !WHOLE) as usize;
        }
        let (mut a, mut z) = (first as usize, (self.buckets[b + 1] & !WHOLE) as usize);
        while a < z {
            let m = z - (z - a) / 2;
            if self.starts[m] <= h {
                a = m;
            } else {
                z = m - 1;
            }
        }
        a
    }

    /// Rebuilds the buckets: at least 16 times as many as leaves, so that a leaf boundary
    /// falls in few of them: a lookup in a bucket that holds one is a search whose branches
    /// the CPU cannot predict, which a profile of a grown tree's inserts put at a third of
    /// their routing time with twice as many buckets as leaves. (No more: a namespace of one
    /// leaf has 16 buckets, 64 bytes, where a floor of 4,096 made every small namespace 16
    /// KiB.)
    fn index(&mut self) {
        let bits = (self.starts.len() * 16).next_power_of_two().trailing_zeros().clamp(4, 30);
        self.shift = 64 - bits;
        let count = 1usize << bits;
        self.buckets.clear();
        self.buckets.reserve(count + 1);
        let mut pos = 0;
        for b in 0..count {
            let first = (b as u64) << self.shift;
            while pos + 1 < self.starts.len() && self.starts[pos + 1] <= first {
                pos += 1;
            }
            // The bucket's last hash is `first | (2^shift - 1)`: whole if the next leaf starts
            // after it.
            let last = first | (u64::MAX >> bits);
            let whole = self.starts.get(pos + 1).is_none_or(|&next| next > last);
            self.buckets.push(pos as u32 | if whole { WHOLE } else { 0 });
        }
        self.buckets.push(self.starts.len().saturating_sub(1) as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slow walk the directory stands for: from the root, one [`step`] per level.
    fn walk(children: &[Vec<NodeId>], h: u64) -> NodeId {
        let (mut id, mut x) = (0, h);
        while !children[id as usize].is_empty() {
            let c = &children[id as usize];
            id = c[step(&mut x, c.len())];
        }
        id
    }

    #[test]
    fn the_directory_agrees_with_the_walk_as_the_tree_splits() {
        // A root of 3 leaves; then leaves split into 2, 3 or 5, some repeatedly (lopsided).
        let mut children: Vec<Vec<NodeId>> = vec![vec![1, 2, 3], vec![], vec![], vec![]];
        let mut dir =
            Directory::build(4, |id| if id == 0 { Shape::Inner(&[1, 2, 3]) } else { Shape::Leaf });
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x = hash::mix64(x);
            x
        };
        for round in 0..200 {
            let leaves: Vec<NodeId> = (0..children.len() as NodeId)
                .filter(|&id| children[id as usize].is_empty())
                .collect();
            // Mostly split the newest leaves, so a few paths get deep.
            let victim = if round % 3 == 0 {
                leaves[(next() % leaves.len() as u64) as usize]
            } else {
                *leaves.last().unwrap()
            };
            let n = [2, 3, 5][(next() % 3) as usize];
            let first = children.len() as NodeId;
            let new: Vec<NodeId> = (first..first + n).collect();
            children[victim as usize] = new.clone();
            children.extend((0..n).map(|_| Vec::new()));
            dir.split(victim, &new);
            if round % 2 == 0 {
                dir.finish(victim);
            }
            for _ in 0..500 {
                let h = next();
                assert_eq!(dir.locate(h).0, walk(&children, h), "round {round}, h {h:#x}");
            }
            for edge in [0, u64::MAX, 1 << 63, (1 << 63) - 1] {
                assert_eq!(dir.locate(edge).0, walk(&children, edge));
            }
        }
        // A directory built from scratch agrees with the one grown split by split.
        let rebuilt = Directory::build(children.len(), |id| {
            let c = &children[id as usize];
            if c.is_empty() { Shape::Leaf } else { Shape::Inner(c) }
        });
        assert_eq!(rebuilt.starts, dir.starts);
        assert_eq!(rebuilt.leaves, dir.leaves);
    }

    /// A split's child for a range hash, from the node's span alone, is the walk's.
    #[test]
    fn a_nodes_child_from_its_span_is_the_walks() {
        // Root of 3; node 2 splits into 4, 5; node 5 into 6, 7, 8; node 7 into 9, 10.
        let mut children: Vec<Vec<NodeId>> = vec![vec![1, 2, 3]];
        children.extend((1..=10).map(|_| Vec::new()));
        children[2] = vec![4, 5];
        children[5] = vec![6, 7, 8];
        children[7] = vec![9, 10];
        let dir = Directory::build(children.len(), |id| {
            let c = &children[id as usize];
            if c.is_empty() { Shape::Leaf } else { Shape::Inner(c) }
        });
        let mut h = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..20_000 {
            h = hash::mix64(h);
            let (mut id, mut x) = (0, h);
            while !children[id as usize].is_empty() {
                let c = &children[id as usize];
                let at = step(&mut x, c.len());
                assert_eq!(dir.child_of(id, h, c.len()), Some(at), "node {id}, h {h:#x}");
                id = c[at];
            }
        }
        assert_eq!(dir.child_of(99, h, 2), None, "an unknown node");
    }

    #[test]
    fn frozen_marks_follow_splits_and_their_end() {
        let mut dir =
            Directory::build(3, |id| if id == 0 { Shape::Inner(&[1, 2]) } else { Shape::Leaf });
        let h_in_1 = 5; // leaf 1 owns the lower half
        assert_eq!(dir.locate(h_in_1), (1, None));
        dir.split(1, &[3, 4]);
        assert_eq!(dir.locate(h_in_1), (3, Some(1)));
        assert_eq!(dir.locate(u64::MAX), (2, None));
        dir.split(3, &[5, 6]);
        assert_eq!(dir.locate(h_in_1), (5, Some(NO_NODE)), "two above: walk");
        dir.finish(1);
        assert_eq!(dir.locate(h_in_1), (5, Some(NO_NODE)), "leaf 3 is still splitting above it");
        dir.finish(3);
        assert_eq!(dir.locate(h_in_1), (5, None));
        // Built from a shape with a splitting node, the one above is known.
        let dir = Directory::build(3, |id| match id {
            0 => Shape::Splitting(&[1, 2]),
            _ => Shape::Leaf,
        });
        assert_eq!(dir.locate(h_in_1), (1, Some(0)));
    }

    #[test]
    fn children_share_the_range_evenly() {
        let root = Span { lo: 0, hi: u64::MAX, mult: 1 };
        let spans = root.split(3);
        for s in &spans {
            let width = (s.hi - s.lo) as f64 + 1.0;
            assert!((width / 2f64.powi(64) - 1.0 / 3.0).abs() < 1e-12, "{s:?}");
        }
        assert_eq!(spans[0].lo, 0);
        assert_eq!(spans[2].hi, u64::MAX);
        assert_eq!(spans[0].hi + 1, spans[1].lo);
    }
}
