//! Sizing math: the formulas of the seeds (MISSION.md, seeds 000 and 002), plus the false-positive
//! rate of the cache-blocked filter. Everything here is pure `f64`/`u64` arithmetic.
//!
//! | formula | function |
//! |---|---|
//! | m = ⌈−n ln p / (ln 2)²⌉ (seed 002) | [`bloom_bits`] |
//! | (3), (6): k = round((m/n) ln 2), at least 1 | [`optimal_hashes`] |
//! | (1): f = (1 − p0)^k, p0 = (1 − 1/m)^{kn} | [`classic_fpr`] |
//! | (4): u = ⌊−m (ln 2)² / ln f_max⌋ | [`leaf_capacity`] |
//! | (5): c = ⌈n/u⌉, at least 1 | [`leaf_count`] |
//! | (8): f = (1 − e^{−kn/(cm)})^k | [`dsbf_fpr`] |
//! | Putze et al.: Poisson mixture over 512-bit block loads | [`blocked_fpr`] |
//! | the same for sectorized probes, per 64-bit word | [`sectorized_fpr`] |
//!
//! # Examples
//! ```
//! use urlseen_filter::plan::{bloom_bits, optimal_hashes, Plan};
//! // The example of seed 002: one million URLs at 1 %.
//! let m = bloom_bits(1_000_000, 0.01);
//! assert_eq!(m, 9_585_059);
//! assert_eq!(optimal_hashes(m, 1_000_000), 7);
//!
//! let plan = Plan::new(1_000_000, 0.01, None).unwrap();
//! assert_eq!(plan.bits, 9_585_059);
//! assert!(plan.blocked_bits > plan.bits); // blocking costs a little space
//! ```

use std::f64::consts::LN_2;

use crate::{BLOCK_BITS, Error, MAX_BITS, MAX_HASHES};

/// The leaf length [`Plan::new`] uses when none is given: 2^23 bits, i.e. 1 MiB per leaf.
///
/// Seed 000 keeps each leaf "not too long" because a leaf is one Redis string; 1 MiB is far below
/// Redis' 512 MB string limit, small enough to move or re-hash in milliseconds, and big enough that
/// a leaf holds about 875 000 URLs at a 1 % bound by formula (4) (a blocked leaf a few percent
/// fewer), so a billion URLs need only ~1 200 leaves.
pub const DEFAULT_LEAF_BITS: u64 = 1 << 23;

const LN2_SQUARED: f64 = LN_2 * LN_2;

/// The number of bits m of a classic Bloom filter for `n` items at false-positive rate `p`:
/// m = ⌈−n ln p / (ln 2)²⌉, at least 1.
///
/// Values of `p` outside `(0, 1)` are not rejected here ([`Plan::new`] validates): `p >= 1`
/// gives 1 bit and `p <= 0` saturates to `u64::MAX`.
///
/// # Examples
/// ```
/// assert_eq!(urlseen_filter::plan::bloom_bits(1_000_000, 0.01), 9_585_059);
/// ```
#[must_use]
pub fn bloom_bits(n: u64, p: f64) -> u64 {
    let m = (-(n as f64) * p.ln() / LN2_SQUARED).ceil();
    if m.is_nan() { u64::MAX } else { (m as u64).max(1) }
}

/// The optimal number of hash functions for `m` bits and `n` items, formulas (3) and (6):
/// k = round((m/n) ln 2), clamped to `1..=MAX_HASHES`. `n = 0` is treated as `n = 1`.
///
/// # Examples
/// ```
/// assert_eq!(urlseen_filter::plan::optimal_hashes(9_585_059, 1_000_000), 7);
/// ```
#[must_use]
pub fn optimal_hashes(m: u64, n: u64) -> u32 {
    let k = (m as f64 / n.max(1) as f64 * LN_2).round();
    (k as u32).clamp(1, MAX_HASHES)
}

/// The false-positive rate of a classic Bloom filter, formula (1): f = (1 − p0)^k with
/// p0 = (1 − 1/m)^{kn}, the probability that a given bit is still 0 after `n` insertions.
///
/// Uses the exact p0 (not the e^{−kn/m} approximation). `m = 0` gives 1.
#[must_use]
pub fn classic_fpr(m: u64, k: u32, n: u64) -> f64 {
    if m == 0 {
        return 1.0;
    }
    let p0 = (k as f64 * n as f64 * (-1.0 / m as f64).ln_1p()).exp();
    (1.0 - p0).powi(k as i32)
}

/// How many items one leaf filter of `m` bits holds before its false-positive rate passes
/// `f_max`, formula (4): u = ⌊−m (ln 2)² / ln f_max⌋.
///
/// This is the capacity of a *classic* leaf at its optimal k; a cache-blocked leaf holds a little
/// less, see [`blocked_capacity`]. Returns 0 for `f_max` outside `(0, 1)`.
#[must_use]
pub fn leaf_capacity(m: u64, f_max: f64) -> u64 {
    if !(f_max > 0.0 && f_max < 1.0) {
        return 0;
    }
    (-(m as f64) * LN2_SQUARED / f_max.ln()).floor() as u64
}

/// The number of leaves for `n` expected items at `u` items per leaf, formula (5): c = ⌈n/u⌉,
/// at least 1 (rounding up gives more leaves, hence a lower FPR). `u = 0` is treated as 1.
#[must_use]
pub fn leaf_count(n: u64, u: u64) -> u64 {
    n.div_ceil(u.max(1)).max(1)
}

/// The false-positive rate of a DSBF with `c` leaves of `m` bits and `k` hashes holding `n` items
/// routed uniformly, formula (8): f = (1 − e^{−kn/(cm)})^k.
#[must_use]
pub fn dsbf_fpr(k: u32, n: u64, c: u64, m: u64) -> f64 {
    let cm = c as f64 * m as f64;
    if cm == 0.0 {
        return 1.0;
    }
    (1.0 - (-(k as f64) * n as f64 / cm).exp()).powi(k as i32)
}

/// The false-positive rate of the cache-blocked filter ([`BlockedBloom`](crate::BlockedBloom)):
/// `m` bits in 512-bit blocks, `k` bit probes inside one block per item, `n` items.
///
/// Following Putze, Sanders & Singler ("Cache-, hash- and space-efficient Bloom filters", 2007),
/// the load of a block is Poisson with mean λ = n·512/m, and the FPR is the mixture
/// Σ_i Pois(λ; i) · f_512(i), where f_512(i) is the FPR of a 512-bit block holding i items. This
/// implementation also accounts for the k in-block probes being drawn *with replacement*
/// (two probes of one item may hit the same bit): with D the number of distinct bits an item
/// probes, f_512(i) = Σ_d P(D = d) · q_i^d, where q_i = 1 − (1 − 1/512)^{ik} is the expected
/// fill of the block. `m` is rounded up to a whole number of blocks.
#[must_use]
pub fn blocked_fpr(m: u64, k: u32, n: u64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let k = k.clamp(1, MAX_HASHES);
    let blocks = m.div_ceil(BLOCK_BITS).max(1);
    let lambda = n as f64 / blocks as f64;
    if lambda > SATURATED_ITEMS_PER_BLOCK {
        // Every bit of every block is set, to within f64's precision: and the Poisson sum below
        // would take about √λ steps, which for an error rate within 1e-16 of 1 is forever.
        return 1.0;
    }
    let distinct = distinct_distribution(k, BLOCK_BITS);
    let block = BLOCK_BITS as f64;
    let zero_per_probe = (-1.0 / block).ln_1p(); // ln(1 - 1/512)
    let f_block = |i: u64| -> f64 {
        let q = 1.0 - (k as f64 * i as f64 * zero_per_probe).exp();
        all_set(&distinct, q)
    };
    poisson_mixture(lambda, f_block)
}

/// Σ_d P(D = d) · q^d: the chance that the D distinct bits of a probe set are all set, each
/// independently with probability `q`.
fn all_set(distinct: &[f64], q: f64) -> f64 {
    let mut qd = 1.0;
    let mut sum = distinct[0];
    for &pd in &distinct[1..] {
        qd *= q;
        sum += pd * qd;
    }
    sum
}

/// The false-positive rate of the cache-blocked filter with sectorized probes
/// ([`BlockScheme::Sectorized`](crate::BlockScheme::Sectorized)): `m` bits in 512-bit blocks of
/// 8 words, `n` items, `k` probes per item in ⌈k/8⌉ rounds that each probe every word once,
/// except a partial last round that probes `k % 8` consecutive words from a random one.
///
/// As [`blocked_fpr`], a Poisson mixture over the load i of a block (mean λ = n·512/m), but per
/// word: writing k = 8a + b, an item probes a given word a + 1 times with probability b/8, else
/// a times, so a given bit is left clear by one item with probability
/// u = (63/64)^a · (1 − b/512), and after i items it is set with q_i = 1 − u^i (the same
/// marginal as 1 − (1 − 1/512)^{ik} up to second order). A query probes b words a + 1 times and
/// 8 − b words a times; with D_c the distinct bits among c draws from 64,
/// f(i) = g_{a+1}(q_i)^b · g_a(q_i)^{8−b}, where g_c(q) = Σ_d P(D_c = d) q^d. This takes the
/// words' fills as independent given i: exact when 8 divides k (every item then probes every
/// word equally), an approximation otherwise that the filter crate's tests check against
/// measured rates. `m` is rounded up to a whole number of blocks.
#[must_use]
pub fn sectorized_fpr(m: u64, k: u32, n: u64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let k = k.clamp(1, MAX_HASHES);
    let blocks = m.div_ceil(BLOCK_BITS).max(1);
    let lambda = n as f64 / blocks as f64;
    if lambda > SATURATED_ITEMS_PER_BLOCK {
        return 1.0;
    }
    let (a, b) = (k / 8, k % 8);
    let word_bits = 64.0_f64;
    let low = distinct_distribution(a, 64);
    let high = distinct_distribution(a + 1, 64);
    // ln u
    let ln_clear = a as f64 * (-1.0 / word_bits).ln_1p() + (-(b as f64) / 512.0).ln_1p();
    let f_block = |i: u64| -> f64 {
        let q = 1.0 - (i as f64 * ln_clear).exp();
        all_set(&high, q).powi(b as i32) * all_set(&low, q).powi(8 - b as i32)
    };
    poisson_mixture(lambda, f_block)
}

/// Σ_i Pois(λ; i) · f(i).
fn poisson_mixture(lambda: f64, f_block: impl Fn(u64) -> f64) -> f64 {
    // Poisson weights relative to the mode (weight 1 there), summed outwards until negligible,
    // then normalized: no ln-gamma needed and no underflow for large λ.
    let mode = lambda.floor() as u64;
    let mut weighted = f_block(mode);
    let mut total = 1.0;
    let mut w = 1.0;
    let mut i = mode;
    loop {
        w *= lambda / (i + 1) as f64;
        i += 1;
        if w < 1e-22 {
            break;
        }
        weighted += w * f_block(i);
        total += w;
    }
    let mut w = 1.0;
    let mut i = mode;
    while i > 0 {
        w *= i as f64 / lambda;
        i -= 1;
        if w < 1e-22 {
            break;
        }
        weighted += w * f_block(i);
        total += w;
    }
    (weighted / total).clamp(0.0, 1.0)
}

/// Items per 512-bit block past which a blocked filter answers every query positive in f64: the
/// chance that a given bit is still clear, (1 − 1/512)^(kλ), is below e^-195 for k ≥ 1.
const SATURATED_ITEMS_PER_BLOCK: f64 = 100_000.0;

/// P(D = d) for d in 0..=k, where D is the number of distinct values among k uniform draws with
/// replacement from `cells` bits.
fn distinct_distribution(k: u32, cells: u64) -> Vec<f64> {
    let block = cells as f64;
    let mut dist = vec![0.0; k as usize + 1];
    dist[0] = 1.0;
    for draw in 0..k as usize {
        for d in (0..=draw + 1).rev() {
            let stay = dist[d] * d as f64 / block;
            let arrive = if d > 0 { dist[d - 1] * (block - (d - 1) as f64) / block } else { 0.0 };
            dist[d] = stay + arrive;
        }
    }
    dist
}

/// The k that minimizes [`blocked_fpr`] for `m` bits and `n` items (the FPR is unimodal in k, so
/// this walks from the classic optimum towards the better side).
#[must_use]
pub fn blocked_best_hashes(m: u64, n: u64) -> u32 {
    best_blocked(blocked_fpr, m, n).1
}

/// The k that minimizes [`sectorized_fpr`] for `m` bits and `n` items.
#[must_use]
pub fn sectorized_best_hashes(m: u64, n: u64) -> u32 {
    best_blocked(sectorized_fpr, m, n).1
}

/// An FPR formula of a blocked filter: (m, k, n) → f.
type FprFn = fn(u64, u32, u64) -> f64;

/// (fpr, k) at the k minimizing the blocked FPR `fpr`.
fn best_blocked(fpr: FprFn, m: u64, n: u64) -> (f64, u32) {
    let mut k = optimal_hashes(m, n);
    let mut f = fpr(m, k, n);
    while k > 1 {
        let g = fpr(m, k - 1, n);
        if g >= f {
            break;
        }
        k -= 1;
        f = g;
    }
    while k < MAX_HASHES {
        let g = fpr(m, k + 1, n);
        if g >= f {
            break;
        }
        k += 1;
        f = g;
    }
    (f, k)
}

/// The largest number of items n, and its best k, such that a blocked filter of `m` bits keeps
/// [`blocked_fpr`] ≤ `f_max`: the engine splits a leaf when it reaches this n.
///
/// Returns `(0, k)` if not even one item fits (a tiny `m` or an `f_max` outside `(0, 1)`), with k
/// the best for one item.
#[must_use]
pub fn blocked_capacity(m: u64, f_max: f64) -> (u64, u32) {
    capacity_by(memo::Formula::Blocked, m, f_max)
}

/// [`blocked_capacity`] for the sectorized probes: [`sectorized_fpr`] ≤ `f_max`.
#[must_use]
pub fn sectorized_capacity(m: u64, f_max: f64) -> (u64, u32) {
    capacity_by(memo::Formula::Sectorized, m, f_max)
}

fn capacity_by(formula: memo::Formula, m: u64, f_max: f64) -> (u64, u32) {
    memo::sizing(memo::Search::Capacity, formula, m, f_max, || {
        capacity_search(formula.fpr(), m, f_max)
    })
}

fn capacity_search(fpr: FprFn, m: u64, f_max: f64) -> (u64, u32) {
    let fits = |n: u64| best_blocked(fpr, m, n).0 <= f_max;
    if !(f_max > 0.0 && f_max < 1.0 && fits(1)) {
        return (0, best_blocked(fpr, m, 1).1);
    }
    let mut lo = 1u64; // fits
    let mut hi = leaf_capacity(m, f_max).saturating_mul(2).saturating_add(64); // expected not to
    while fits(hi) {
        if hi == u64::MAX {
            return (hi, best_blocked(fpr, m, hi).1);
        }
        lo = hi;
        hi = hi.saturating_mul(2);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) { lo = mid } else { hi = mid }
    }
    (lo, best_blocked(fpr, m, lo).1)
}

/// The smallest number of bits m (a multiple of 512) and its best k such that a blocked filter
/// holding `n` items keeps [`blocked_fpr`] ≤ `p`. `n = 0` gives one block.
///
/// Values of `p` outside `(0, 1)` are clamped into it ([`Plan::new`] validates).
#[must_use]
pub fn blocked_bits(n: u64, p: f64) -> (u64, u32) {
    bits_by(memo::Formula::Blocked, n, p)
}

/// [`blocked_bits`] for the sectorized probes: the smallest m (a multiple of 512) and its best
/// k with [`sectorized_fpr`] ≤ `p` at `n` items. What
/// [`BlockedBloom::with_capacity`](crate::BlockedBloom::with_capacity) uses.
#[must_use]
pub fn sectorized_bits(n: u64, p: f64) -> (u64, u32) {
    bits_by(memo::Formula::Sectorized, n, p)
}

fn bits_by(formula: memo::Formula, n: u64, p: f64) -> (u64, u32) {
    memo::sizing(memo::Search::Bits, formula, n, p, || bits_search(formula.fpr(), n, p))
}

fn bits_search(fpr: FprFn, n: u64, p: f64) -> (u64, u32) {
    if n == 0 {
        return (BLOCK_BITS, 1);
    }
    let p = if p.is_nan() { 0.5 } else { p.clamp(f64::MIN_POSITIVE, 1.0 - f64::EPSILON) };
    let max_blocks = MAX_BITS / BLOCK_BITS;
    let fits = |blocks: u64| best_blocked(fpr, blocks * BLOCK_BITS, n).0 <= p;
    let best = |blocks: u64| best_blocked(fpr, blocks * BLOCK_BITS, n).1;
    let mut lo = (bloom_bits(n, p) / BLOCK_BITS).clamp(1, max_blocks); // usually too small
    if fits(lo) {
        // Only for tiny n, where one block is already generous.
        while lo > 1 && fits(lo - 1) {
            lo -= 1;
        }
        return (lo * BLOCK_BITS, best(lo));
    }
    let mut hi = lo;
    while !fits(hi) {
        if hi == max_blocks {
            return (hi * BLOCK_BITS, best(hi));
        }
        lo = hi;
        hi = hi.saturating_mul(2).min(max_blocks);
    }
    // Invariant: !fits(lo), fits(hi).
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) { hi = mid } else { lo = mid }
    }
    (hi * BLOCK_BITS, best(hi))
}

/// The answers of the two sizing searches, remembered: each takes some forty Poisson mixtures
/// (about a millisecond), and every namespace created asks them again with the same few
/// arguments (the server's defaults, the levels of a tree), so a server creating thousands of
/// namespaces a second spent nine tenths of its time here.
mod memo {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};

    use super::{FprFn, blocked_fpr, sectorized_fpr};

    /// Which search.
    #[derive(Clone, Copy, PartialEq, Eq, Hash)]
    pub(super) enum Search {
        Capacity,
        Bits,
    }

    /// Which FPR formula it searches with.
    #[derive(Clone, Copy, PartialEq, Eq, Hash)]
    pub(super) enum Formula {
        Blocked,
        Sectorized,
    }

    impl Formula {
        pub(super) fn fpr(self) -> FprFn {
            match self {
                Formula::Blocked => blocked_fpr,
                Formula::Sectorized => sectorized_fpr,
            }
        }
    }

    /// Most answers kept; past it the table starts over (a process asks for a handful).
    const MAX_ENTRIES: usize = 4096;

    type Key = (Search, Formula, u64, u64);

    pub(super) fn sizing(
        search: Search,
        formula: Formula,
        x: u64,
        rate: f64,
        compute: impl FnOnce() -> (u64, u32),
    ) -> (u64, u32) {
        static TABLE: OnceLock<Mutex<HashMap<Key, (u64, u32)>>> = OnceLock::new();
        let key = (search, formula, x, rate.to_bits());
        let table = TABLE.get_or_init(Mutex::default);
        if let Some(&hit) = table.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return hit;
        }
        let found = compute();
        let mut table = table.lock().unwrap_or_else(|e| e.into_inner());
        if table.len() >= MAX_ENTRIES {
            table.clear();
        }
        table.insert(key, found);
        found
    }
}

/// A complete sizing for `capacity` items at false-positive rate `fpr`: a single classic filter,
/// a single blocked filter, and a DSBF of leaves (seed 000).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Plan {
    /// Expected number of items n.
    pub capacity: u64,
    /// Target false-positive rate p.
    pub fpr: f64,
    /// Bits of one classic filter: [`bloom_bits`]`(capacity, fpr)`.
    pub bits: u64,
    /// Hashes of that classic filter: [`optimal_hashes`]`(bits, capacity)`.
    pub hashes: u32,
    /// `bits / capacity`.
    pub bits_per_item: f64,
    /// Memory of the classic filter's word array: ⌈bits/64⌉ · 8 bytes.
    pub bytes: u64,
    /// Bits of one blocked filter meeting `fpr` (a multiple of 512): [`blocked_bits`].
    pub blocked_bits: u64,
    /// Hashes of that blocked filter.
    pub blocked_hashes: u32,
    /// `blocked_bits / 8`.
    pub blocked_bytes: u64,
    /// DSBF leaf length m in bits ([`DEFAULT_LEAF_BITS`] unless given).
    pub leaf_bits: u64,
    /// Items per classic leaf, formula (4).
    pub leaf_capacity: u64,
    /// Hashes per leaf, formula (6).
    pub leaf_hashes: u32,
    /// Leaves c for `capacity` items, formula (5).
    pub leaves: u64,
    /// FPR of the DSBF with `leaves` leaves holding `capacity` items, formula (8).
    pub dsbf_fpr: f64,
    /// Items per *blocked* leaf before it passes `fpr` ([`blocked_capacity`]): the split point.
    pub blocked_leaf_capacity: u64,
    /// Hashes per blocked leaf.
    pub blocked_leaf_hashes: u32,
    /// Blocked leaves for `capacity` items: [`leaf_count`]`(capacity, blocked_leaf_capacity)`.
    pub blocked_leaves: u64,
}

impl Plan {
    /// Sizes filters for `capacity` items at false-positive rate `fpr`, with DSBF leaves of
    /// `leaf_bits` bits (default [`DEFAULT_LEAF_BITS`]).
    ///
    /// # Errors
    /// [`Error::ZeroCapacity`], [`Error::InvalidFpr`] unless `0 < fpr < 1`,
    /// [`Error::InvalidLeafBits`] unless `leaf_bits` is a multiple of 512 in
    /// `512..=MAX_BITS`, and [`Error::LeafTooSmall`] if a leaf holds no item.
    ///
    /// # Examples
    /// ```
    /// use urlseen_filter::Error;
    /// use urlseen_filter::plan::Plan;
    /// let plan = Plan::new(1_500_000, 0.001, None)?;
    /// assert_eq!(plan.leaf_bits, 1 << 23);
    /// assert!(plan.dsbf_fpr <= 0.001);
    /// assert!(matches!(Plan::new(0, 0.01, None), Err(Error::ZeroCapacity)));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn new(capacity: u64, fpr: f64, leaf_bits: Option<u64>) -> Result<Plan, Error> {
        if capacity == 0 {
            return Err(Error::ZeroCapacity);
        }
        if !(fpr > 0.0 && fpr < 1.0) {
            return Err(Error::InvalidFpr { fpr });
        }
        let leaf_bits = leaf_bits.unwrap_or(DEFAULT_LEAF_BITS);
        if !(BLOCK_BITS..=MAX_BITS).contains(&leaf_bits) || !leaf_bits.is_multiple_of(BLOCK_BITS) {
            return Err(Error::InvalidLeafBits { leaf_bits });
        }
        let leaf_cap = leaf_capacity(leaf_bits, fpr);
        let (blocked_leaf_capacity, blocked_leaf_hashes) = blocked_capacity(leaf_bits, fpr);
        if leaf_cap == 0 || blocked_leaf_capacity == 0 {
            return Err(Error::LeafTooSmall { leaf_bits, fpr });
        }
        let bits = bloom_bits(capacity, fpr);
        let (blocked_bits, blocked_hashes) = blocked_bits(capacity, fpr);
        let leaf_hashes = optimal_hashes(leaf_bits, leaf_cap);
        let leaves = leaf_count(capacity, leaf_cap);
        Ok(Plan {
            capacity,
            fpr,
            bits,
            hashes: optimal_hashes(bits, capacity),
            bits_per_item: bits as f64 / capacity as f64,
            bytes: bits.div_ceil(64).saturating_mul(8),
            blocked_bits,
            blocked_hashes,
            blocked_bytes: blocked_bits / 8,
            leaf_bits,
            leaf_capacity: leaf_cap,
            leaf_hashes,
            leaves,
            dsbf_fpr: dsbf_fpr(leaf_hashes, capacity, leaves, leaf_bits),
            blocked_leaf_capacity,
            blocked_leaf_hashes,
            blocked_leaves: leaf_count(capacity, blocked_leaf_capacity),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Error rates within 1e-16 of 1 (RedisBloom accepts them) once made `blocked_capacity`
    /// spin for good, and `BF.RESERVE` with them hung the server. Every extreme must answer
    /// at once; a hang fails this test by its deadline instead of hanging the suite.
    #[test]
    fn extreme_error_rates_answer_at_once() {
        let (done, wait) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rates =
                [0.999_999_999_999_999_9, 0.999_999_999_99, 0.999, 1e-300, f64::MIN_POSITIVE];
            for &f in &rates {
                for m in [512, 1 << 23, 1 << 33] {
                    let (n, k) = blocked_capacity(m, f);
                    assert!(k >= 1);
                    assert!(n == 0 || blocked_fpr(m, k, n) <= f, "m {m} f {f}: {n} items");
                }
                for n in [0, 1, 1_000_000, 1 << 40] {
                    let (m, k) = blocked_bits(n, f);
                    assert!(m >= BLOCK_BITS && k >= 1);
                }
            }
            done.send(()).unwrap();
        });
        wait.recv_timeout(std::time::Duration::from_secs(60)).expect("finished in time");
    }

    #[test]
    fn seed_002_example() {
        assert_eq!(bloom_bits(1_000_000, 0.01), 9_585_059);
        assert_eq!(optimal_hashes(9_585_059, 1_000_000), 7);
        let f = classic_fpr(9_585_059, 7, 1_000_000);
        assert!((f - 0.01).abs() < 0.0005, "{f}");
    }

    #[test]
    fn formula_2_minimum_fpr() {
        // At the optimal k, f ≈ (1/2)^k ≈ 0.6185^{m/n}.
        let (m, n) = (10_000_000u64, 1_000_000u64);
        let k = optimal_hashes(m, n);
        let f = classic_fpr(m, k, n);
        let approx = 0.6185f64.powf(m as f64 / n as f64);
        assert!((f / approx - 1.0).abs() < 0.05, "{f} vs {approx}");
    }

    #[test]
    fn formulas_4_5_6() {
        // (4): u = -m (ln 2)^2 / ln f.
        let m = 1u64 << 23;
        let u = leaf_capacity(m, 0.01);
        assert_eq!(u, (m as f64 * LN2_SQUARED / 100f64.ln()).floor() as u64);
        assert_eq!(u, 875_175);
        // A leaf of that capacity meets the bound at its optimal k (6) and fails one past it.
        let k = optimal_hashes(m, u);
        assert_eq!(k, 7);
        assert!(classic_fpr(m, k, u) <= 0.0102);
        // (4) inverts bloom_bits.
        assert!(bloom_bits(u, 0.01) <= m);
        assert!(bloom_bits(u + 2, 0.01) > m);
        // (5)
        assert_eq!(leaf_count(0, 10), 1);
        assert_eq!(leaf_count(10, 10), 1);
        assert_eq!(leaf_count(11, 10), 2);
        assert_eq!(leaf_count(1_500_000, u), 2);
        assert_eq!(leaf_count(5, 0), 5);
        assert_eq!(leaf_capacity(m, 1.5), 0);
    }

    #[test]
    fn formula_8_dsbf() {
        // One leaf is a classic filter (H = 1, c = 1); c leaves of m bits = one filter of c·m.
        let (k, n, m) = (7u32, 1_000_000u64, 9_585_059u64);
        let one = dsbf_fpr(k, n, 1, m);
        assert!((one - classic_fpr(m, k, n)).abs() < 1e-6);
        assert!((dsbf_fpr(k, 3 * n, 3, m) - one).abs() < 1e-12);
        // More leaves, lower FPR.
        assert!(dsbf_fpr(k, n, 2, m) < one);
        assert_eq!(dsbf_fpr(k, n, 0, m), 1.0);
    }

    #[test]
    fn blocked_is_worse_than_classic_but_close() {
        let m = 10 * 1_000_000;
        let n = 1_000_000;
        let classic = classic_fpr(m, 7, n);
        let blocked = blocked_fpr(m, 7, n);
        assert!(blocked > classic && blocked < 2.0 * classic, "{blocked} vs {classic}");
        assert_eq!(blocked_fpr(m, 7, 0), 0.0);
        // Nearly empty: λ tiny, the block formula dominates.
        assert!(blocked_fpr(1 << 30, 7, 1) < 1e-15);
        // Saturated: everything is a false positive.
        assert!(blocked_fpr(512, 7, 100_000) > 0.999);
    }

    #[test]
    fn sectorized_formula_basics() {
        let (m, n) = (10 * 1_000_000u64, 1_000_000u64);
        assert_eq!(sectorized_fpr(m, 7, 0), 0.0);
        assert!(sectorized_fpr(1 << 30, 7, 1) < 1e-15);
        assert!(sectorized_fpr(512, 7, 100_000) > 0.999);
        for k in [1u32, 3, 7, 8, 9, 16, 30, 64] {
            let mut last = 0.0;
            for n in [1u64, 1_000, 100_000, 1_000_000, 3_000_000] {
                let f = sectorized_fpr(m, k, n);
                assert!((0.0..=1.0).contains(&f) && f >= last, "k {k} n {n}: {f}");
                last = f;
            }
        }
        // k = 1: one bit in one word, as in the scattered scheme: the same formula.
        assert!((sectorized_fpr(m, 1, n) - blocked_fpr(m, 1, n)).abs() < 1e-12);
        // Close to the scattered scheme; for k ≤ 8 a little better (no two probes of an item
        // in one word).
        for k in 2..=8 {
            let (s, b) = (sectorized_fpr(m, k, n), blocked_fpr(m, k, n));
            assert!(s < b && s > 0.9 * b, "k {k}: {s} vs {b}");
        }
        assert_eq!(distinct_distribution(0, 64), vec![1.0]);
    }

    #[test]
    fn sectorized_capacity_and_bits_are_consistent() {
        for &p in &[0.1, 0.01, 0.001, 0.0001, 1e-6] {
            let m = 1u64 << 20;
            let (n, k) = sectorized_capacity(m, p);
            assert!(n > 0);
            assert!(sectorized_fpr(m, k, n) <= p);
            assert!(best_blocked(sectorized_fpr, m, n + 1).0 > p);
            assert_eq!(k, sectorized_best_hashes(m, n));
            let (bits, kb) = sectorized_bits(n, p);
            assert_eq!(bits % BLOCK_BITS, 0);
            assert!(bits <= m);
            assert!(sectorized_fpr(bits, kb, n) <= p);
            assert!(best_blocked(sectorized_fpr, bits - BLOCK_BITS, n).0 > p);
            // Within half a percent of the scattered scheme's bits (docs/filters.md).
            let (old, _) = blocked_bits(n, p);
            let ratio = bits as f64 / old as f64;
            assert!((0.99..=1.005).contains(&ratio), "p={p}: {bits} vs {old}");
            // A leaf sized for the scattered scheme meets its bound in the sectorized one
            // (the engine sizes leaves so and makes them with `BlockedBloom::new`).
            let (un, uk) = blocked_capacity(m, p);
            assert!(sectorized_fpr(m, uk, un) <= p, "p={p}");
        }
        assert_eq!(sectorized_bits(0, 0.01), (512, 1));
        assert_eq!(sectorized_capacity(512, 2.0).0, 0);
    }

    #[test]
    fn distinct_distribution_sums_to_one() {
        for k in [1, 2, 7, 16, 64] {
            let d = distinct_distribution(k, 512);
            let s: f64 = d.iter().sum();
            assert!((s - 1.0).abs() < 1e-12);
            assert_eq!(d[0], 0.0);
        }
        // Two draws collide with probability 1/512.
        let d = distinct_distribution(2, 512);
        assert!((d[1] - 1.0 / 512.0).abs() < 1e-15);
    }

    #[test]
    fn blocked_capacity_and_bits_are_consistent() {
        for &p in &[0.1, 0.01, 0.001, 0.0001] {
            let m = 1u64 << 20;
            let (n, k) = blocked_capacity(m, p);
            assert!(n > 0);
            assert!(blocked_fpr(m, k, n) <= p);
            assert!(best_blocked(blocked_fpr, m, n + 1).0 > p);
            // Blocking costs capacity relative to the classic formula (4), but not much.
            let classic = leaf_capacity(m, p);
            assert!(n < classic && n as f64 > 0.6 * classic as f64, "p={p}: {n} vs {classic}");
            // blocked_bits is the inverse: n items need at most m bits, and m - 512 is not enough.
            let (bits, kb) = blocked_bits(n, p);
            assert_eq!(bits % BLOCK_BITS, 0);
            assert!(bits <= m);
            assert!(blocked_fpr(bits, kb, n) <= p);
            assert!(best_blocked(blocked_fpr, bits - BLOCK_BITS, n).0 > p || bits == BLOCK_BITS);
        }
        assert_eq!(blocked_capacity(512, 1e-300).0, 0);
        assert_eq!(blocked_capacity(512, 2.0).0, 0);
        assert_eq!(blocked_bits(0, 0.01), (512, 1));
        assert_eq!(blocked_bits(1, 0.01).0, 512);
    }

    #[test]
    fn plan_validates() {
        assert!(matches!(Plan::new(0, 0.01, None), Err(Error::ZeroCapacity)));
        for fpr in [0.0, 1.0, -1.0, f64::NAN, 2.0] {
            assert!(matches!(Plan::new(10, fpr, None), Err(Error::InvalidFpr { .. })));
        }
        for bits in [0, 511, 513, 1000, MAX_BITS + 512] {
            assert!(matches!(
                Plan::new(10, 0.01, Some(bits)),
                Err(Error::InvalidLeafBits { leaf_bits }) if leaf_bits == bits
            ));
        }
        assert!(matches!(Plan::new(10, 1e-200, Some(512)), Err(Error::LeafTooSmall { .. })));
    }

    #[test]
    fn plan_example() {
        let plan = Plan::new(1_000_000, 0.01, None).unwrap();
        assert_eq!(plan.bits, 9_585_059);
        assert_eq!(plan.hashes, 7);
        assert_eq!(plan.bytes, 9_585_059u64.div_ceil(64) * 8);
        assert!((plan.bits_per_item - 9.585_059).abs() < 1e-9);
        assert_eq!(plan.leaf_bits, DEFAULT_LEAF_BITS);
        assert_eq!(plan.leaf_capacity, 875_175);
        assert_eq!(plan.leaf_hashes, 7);
        assert_eq!(plan.leaves, 2);
        assert!(plan.dsbf_fpr < 0.01);
        assert!(plan.blocked_bits > plan.bits);
        assert_eq!(plan.blocked_bytes * 8, plan.blocked_bits);
        assert!(blocked_fpr(plan.blocked_bits, plan.blocked_hashes, plan.capacity) <= 0.01);
        assert!(plan.blocked_leaf_capacity < plan.leaf_capacity);
        assert_eq!(plan.blocked_leaves, leaf_count(1_000_000, plan.blocked_leaf_capacity));
    }
}
