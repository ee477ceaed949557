//! A tree's sizes and seeds: what a namespace's options give (formulas 4 and 5 per leaf, the
//! growth of leaves with depth, the spread of a split's children) and the seeds of its
//! location hashes and probes, for the tree in this process and in Redis alike.

use urlseen_filter::{hash, plan};

use crate::options::{NamespaceOptions, SplitMode, SplitPolicy};

/// Depths past this one have its size (as the table of sizes this replaced had 64 entries).
const MAX_SIZED_DEPTH: u32 = 64;
/// The largest share by which a split's child is smaller than its depth's size (see
/// [`TreeParams::split_level`]). A child starts at most `1/fanout` of its parent's split
/// point full; with children at least `1 - SPLIT_SPREAD` of the largest, none starts more
/// than `0.5 / 0.7` full, so none splits again at once.
pub const SPLIT_SPREAD: f64 = 0.3;
const SPREAD_SALT: u64 = 0xd6e8_feb8_6659_fd93;

/// The sizes and seeds of a tree, derived once from the namespace options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TreeParams {
    /// Bits per leaf filter (`m`).
    pub leaf_bits: u64,
    /// Probes per lookup in a leaf (`k`).
    pub leaf_hashes: u32,
    /// Elements one leaf holds before its FPR would pass `f_max` (formula 4, for blocked
    /// filters).
    pub leaf_capacity: u64,
    /// The element count at which a leaf splits.
    pub split_at: u64,
    /// Leaves under the root at creation (formula 5).
    pub initial_leaves: u32,
    /// The false-positive bound.
    pub fpr: f64,
    /// Seed of the probes and location hashes.
    pub seed: u64,
    /// The split policy.
    pub split: SplitPolicy,
    /// The largest leaf growth makes, in bits.
    pub max_leaf_bits: u64,
    /// The leaves' sizes by depth (index: depth − 1), after growth.
    /// The size of depth 1 (the first leaves); deeper ones are computed when asked (see
    /// [`Self::level`]). A table of every depth's was 2 KiB in every namespace.
    first: Level,
}

/// The size of the leaves at one depth of a tree.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Level {
    /// Bits of the filter (`m`).
    pub bits: u64,
    /// Probes (`k`).
    pub hashes: u32,
    /// Elements before its FPR would pass `f_max` (formula 4, for blocked filters).
    pub capacity: u64,
    /// The element count at which it splits.
    pub split_at: u64,
}

impl From<&NamespaceOptions> for TreeParams {
    /// The tree a namespace's options give: the one place options become sizes and seeds,
    /// for the tree in this process and in Redis alike.
    fn from(options: &NamespaceOptions) -> Self {
        TreeParams::new(
            options.capacity,
            options.fpr,
            options.effective_leaf_bits(),
            options.seed,
            options.split,
        )
    }
}

impl TreeParams {
    /// Sizes a tree for `capacity` elements under `fpr`, with leaves of `leaf_bits` bits.
    pub fn new(capacity: u64, fpr: f64, leaf_bits: u64, seed: u64, split: SplitPolicy) -> Self {
        let (leaf_capacity, leaf_hashes) = plan::blocked_capacity(leaf_bits, fpr);
        let leaf_capacity = leaf_capacity.max(1);
        let split_point = ((leaf_capacity as f64 * split.threshold).floor() as u64).max(1);
        let initial_leaves =
            plan::leaf_count(capacity, split_point).clamp(1, u64::from(u32::MAX / 2));
        let split_at = if split.mode == SplitMode::Never { u64::MAX } else { split_point };
        let max_leaf_bits =
            leaf_bits.max(crate::options::DEFAULT_MAX_LEAF_BITS).div_ceil(512) * 512;
        let mut params = TreeParams {
            leaf_bits,
            leaf_hashes,
            leaf_capacity,
            split_at,
            initial_leaves: initial_leaves as u32,
            fpr,
            seed,
            split,
            max_leaf_bits,
            first: Level::default(),
        };
        params.first = params.sized(leaf_bits);
        params
    }

    /// The bits of a leaf at `depth`: depth 1 has the first leaves' size, each deeper one
    /// `growth` times its parent's bits (in whole blocks), up to `max_leaf_bits`.
    fn level_bits(&self, depth: u32) -> u64 {
        let growth = u64::from(self.split.growth.max(1));
        let mut bits = self.leaf_bits;
        for _ in 1..depth.clamp(1, MAX_SIZED_DEPTH) {
            if bits >= self.max_leaf_bits {
                break;
            }
            bits = (bits.saturating_mul(growth).min(self.max_leaf_bits)).div_ceil(512) * 512;
        }
        bits
    }

    /// A leaf of `bits` bits (a multiple of 512): formula 4 for blocked filters gives its
    /// capacity and probes, the split policy its split point.
    pub fn sized(&self, bits: u64) -> Level {
        let (capacity, hashes) = plan::blocked_capacity(bits, self.fpr);
        let capacity = capacity.max(1);
        let split_point = ((capacity as f64 * self.split.threshold).floor() as u64).max(1);
        let split_at = if self.split.mode == SplitMode::Never { u64::MAX } else { split_point };
        Level { bits, hashes, capacity, split_at }
    }

    /// The size of a leaf that a split makes at `depth`, in the place `place` of the tree (a
    /// number its position gives, the same on every run and after a restart; `None`: the
    /// depth's size). Such a leaf is smaller than its depth's by a share of up to
    /// [`SPLIT_SPREAD`] that its place draws, and holds as many fewer fingerprints: every leaf
    /// keeps formula 4 and the FPR bound, and the bits per fingerprint do not change.
    ///
    /// Why: leaves of one size fill at one rate and reach their split points together, so
    /// every leaf of a grown tree split in one wave, the whole tree was re-hashed at once, and
    /// the frozen parents and their children were all in memory at once (about 1.5 times the
    /// filters). Leaves of spread sizes split at spread times.
    pub fn split_level(&self, depth: u32, place: Option<u64>) -> Level {
        let level = self.level(depth);
        let Some(place) = place else { return level };
        let draw = hash::mix64(place ^ self.seed ^ u64::from(depth).wrapping_mul(SPREAD_SALT));
        let share = (draw >> 11) as f64 / (1u64 << 53) as f64 * SPLIT_SPREAD;
        let bits = shrunk_bits(level.bits, share);
        if bits >= level.bits { level } else { self.sized(bits) }
    }

    /// The size of a leaf at `depth` whose filter has `bits` bits, if a tree with these
    /// parameters makes such leaves: its depth's size, or a split's spread one (see
    /// [`Self::split_level`]).
    pub(crate) fn level_of(&self, depth: u32, bits: u64) -> Option<Level> {
        let level = self.level(depth);
        if bits == level.bits {
            return Some(level);
        }
        let least = shrunk_bits(level.bits, SPLIT_SPREAD);
        (bits.is_multiple_of(512) && bits >= least && bits < level.bits).then(|| self.sized(bits))
    }

    /// The size of the leaves at `depth` (the root's children are at depth 1).
    pub fn level(&self, depth: u32) -> Level {
        match self.level_bits(depth) {
            bits if bits == self.first.bits => self.first,
            // Formula 4's search is remembered (`plan`), so this is a table lookup.
            bits => self.sized(bits),
        }
    }

    /// The leaf filters' probe seed ([`probe_seed`] of the tree's seed): hidden, for the Redis
    /// backend's replicas of the leaves (crates/redis).
    #[doc(hidden)]
    pub fn probe_seed(&self) -> u64 {
        probe_seed(self.seed)
    }
}

// An inherent method of the options, here because the geometry sizes it: the options sit below
// the tree's parameters, which are derived from them.
impl NamespaceOptions {
    /// Bytes of filters this namespace reserves when created (its initial leaves, once each has
    /// recorded something): with a recrawl window, its `generations` trees, each sized for
    /// its share. What `--maxmemory` and the CLI's RAM check count before a create.
    pub fn planned_filter_bytes(&self) -> u64 {
        let each = self.generation_options();
        let trees = if self.recrawl_after.is_some() { u64::from(self.generations) } else { 1 };
        let p = TreeParams::from(&each);
        u64::from(p.initial_leaves).saturating_mul(p.leaf_bits / 8).saturating_mul(trees)
    }
}

/// `bits` less a share `share` of it, rounded up to whole 512-bit blocks (at least one).
pub(crate) fn shrunk_bits(bits: u64, share: f64) -> u64 {
    ((bits as f64 * (1.0 - share)) as u64).div_ceil(512).max(1) * 512
}

/// The location hash seed of level `depth` of a tree seeded `seed`: defined once, for the
/// in-process tree and the Redis backend alike, so one seed routes alike in both.
pub(super) fn level_seed(seed: u64, depth: u32) -> u64 {
    hash::mix64(seed ^ u64::from(depth + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// The leaf filters' probe seed of a tree seeded `seed` (both backends).
fn probe_seed(seed: u64) -> u64 {
    hash::mix64(seed ^ 0x5052_4f42_4553_4545)
}
