//! The cache-line blocked Bloom filter: the default filter of urlseen.

use std::fmt;

use crate::codec::FilterKind;
use crate::hash::{mix64, reduce};
use crate::prefetch::prefetch;
use crate::{BLOCK_BITS, Error, Filter, MAX_BITS, MAX_HASHES, plan};

/// Salt that derives the in-block bit positions from the block hash (the first 64 fractional
/// bits of √2).
const BIT_SALT: u64 = 0x6A09_E667_F3BC_C908;

/// Salt that derives the sectorized probes from the block hash (the first 64 fractional bits of
/// √3).
const SECTOR_SALT: u64 = 0xBB67_AE85_84CA_A73B;

/// u64 words per block.
const WORDS: usize = 8;

/// Which bits of its block an item sets: the probe scheme of a [`BlockedBloom`]. Both touch one
/// 512-bit block per item, chosen the same way; they differ inside it, so a filter keeps its
/// scheme for life (it is part of the encoding: kind 2 or 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum BlockScheme {
    /// The first scheme (encoding kind 2, every filter written before the sectorized one): k
    /// positions of 9 bits each anywhere in the block, drawn with replacement from
    /// `mix64(h ^ 0x6A09E667F3BCC908)`, 7 per 64-bit word, re-mixed for every further 7. Two
    /// probes of one item often fall into the same word, and each is a read-modify-write of a
    /// word chosen by the data. FPR: [`plan::blocked_fpr`]. Made by
    /// [`BlockedBloom::with_scheme`]; bits set elsewhere at the positions of older builds (the
    /// bitmap-in-Redis baseline of `urlseen bench redis`) need it.
    Scattered,
    /// Sectorized probes (encoding kind 5; Lang, Neumann & Boncz, "Performance-optimal
    /// filtering", VLDB 2019; the split-block filters of Impala and Parquet): with
    /// `s = mix64(h ^ 0xBB67AE8584CAA73B)` and `r = s >> 61`, round t of ⌈k/8⌉ sets in word i
    /// (i = 0..8) of the block bit `(s_t >> 6i) & 63`, where `s_0 = s` and
    /// `s_{t+1} = mix64(s_t)`. Every round but a partial last one probes all 8 words; the last,
    /// with `k % 8` probes, only the words i with `(i − r) mod 8 < k % 8` (a run of consecutive
    /// words starting at word r). So each word is probed once per round and the 8 word masks are
    /// computed in registers and OR-ed into the block in one pass, with no data-dependent
    /// word index. FPR: [`plan::sectorized_fpr`]. The default of [`BlockedBloom::new`].
    #[default]
    Sectorized,
}

impl BlockScheme {
    fn kind(self) -> FilterKind {
        match self {
            BlockScheme::Scattered => FilterKind::Blocked,
            BlockScheme::Sectorized => FilterKind::BlockedSectorized,
        }
    }
}

/// Runs `$body` with `$k` bound to `$value` as a constant for k in 1..=16 (one copy each), as a
/// variable above.
macro_rules! with_const_k {
    ($value:expr, $k:ident, $body:block) => {
        with_const_k!(@arms $value, $k, $body, 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16)
    };
    (@arms $value:expr, $k:ident, $body:block, $($n:literal)*) => {
        match $value {
            $($n => {
                let $k: u32 = $n;
                $body
            })*
            $k => $body,
        }
    };
}

mod batch;
mod encoding;
mod probe;
mod words;
use probe::*;
use words::Words;

/// The sectorized batch loops compiled for AVX2 (see the module's docs).
#[cfg(target_arch = "x86_64")]
mod avx2;

/// Whether the AVX2 loops may run (detected once by std, then a relaxed load).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn has_avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// A cache-blocked Bloom filter (Putze, Sanders & Singler 2007): the bit array is cut into
/// 512-bit blocks of one 64-byte cache line each; an item picks one block and sets k bits inside
/// it, so every operation touches exactly one cache line.
///
/// Probes: `h = mix64(fp ^ seed)`, block = [`reduce`](crate::hash::reduce)`(h, blocks)`, then k
/// bits inside the block by the filter's [`BlockScheme`]: [`Sectorized`](BlockScheme::Sectorized)
/// (the default of [`new`](Self::new) and [`with_capacity`](Self::with_capacity); one probe per
/// 64-bit word and round, masks computed in registers) or
/// [`Scattered`](BlockScheme::Scattered) (the first scheme, which every filter encoded before
/// the sectorized one uses and keeps: k positions of 9 bits from
/// `mix64(h ^ 0x6A09E667F3BCC908)`, 7 per word, re-mixed with [`mix64`] for every further 7;
/// made explicitly by [`with_scheme`](Self::with_scheme)). The FPR is [`plan::sectorized_fpr`]
/// or [`plan::blocked_fpr`]: a bit above a classic filter's at equal size, which
/// [`with_capacity`](Self::with_capacity) pays for with a few percent more bits.
///
/// Layout: block `b` is the 8 u64 words `8b..8b+8`; bit `j` of a block is bit `j % 64` of its
/// word `j / 64`. In memory the blocks start on a 64-byte boundary: an array of 256 KiB up to
/// 8 MiB is a slot of the filter arena (page-aligned, in huge pages where the kernel grants
/// them; see [`arena_idle_bytes`](crate::arena_idle_bytes)), any other a zeroed heap
/// allocation with up to 7 words of slack for the boundary (a 1 GiB filter costs no page writes
/// to make).
///
/// # Memory
/// The bit array is allocated by the first [`insert`](Self::insert), not by
/// [`new`](Self::new): until then the filter holds no heap memory
/// ([`memory_bytes`](Self::memory_bytes) is 0, [`reserved_bytes`](Self::reserved_bytes) what the
/// first insert will take) and answers every [`contains`](Self::contains) with `false`. So a
/// tree of many leaves reserved for a capacity it may never reach costs only the leaves it
/// uses. An all-zero filter read back ([`decode`](Self::decode)) is unallocated again; its
/// encoding is the same either way.
///
/// # Examples
/// ```
/// use urlseen_filter::BlockedBloom;
/// let mut f = BlockedBloom::with_capacity(1_000_000, 0.01, 0);
/// assert_eq!(f.num_bits() % 512, 0);
/// assert!(!f.insert(7));
/// assert!(f.insert(7));
/// assert!(f.estimated_fpr() < 1e-9);
/// ```
pub struct BlockedBloom {
    /// `offset` slack words, then `8 * num_blocks` words of blocks, then slack up to 7 words
    /// (none in an arena slot); or empty, before the first insert (see "Memory" above).
    words: Words,
    offset: usize,
    num_blocks: u64,
    num_hashes: u32,
    seed: u64,
    len: u64,
    scheme: BlockScheme,
}

impl fmt::Debug for BlockedBloom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockedBloom")
            .field("num_bits", &self.num_bits())
            .field("num_hashes", &self.num_hashes)
            .field("seed", &self.seed)
            .field("len", &self.len)
            .field("scheme", &self.scheme)
            .finish_non_exhaustive()
    }
}

impl Clone for BlockedBloom {
    fn clone(&self) -> Self {
        let mut copy = Self::unallocated(self.num_blocks, self.num_hashes, self.seed, self.scheme);
        if self.is_allocated() {
            // The copy lives in a new allocation with its own alignment: lay the blocks out
            // afresh.
            copy.allocate();
            copy.block_words_mut().copy_from_slice(self.block_words());
        }
        copy.len = self.len;
        copy
    }
}

impl PartialEq for BlockedBloom {
    fn eq(&self, other: &Self) -> bool {
        // An unallocated filter equals an allocated one with no bit set.
        let same_bits = match (self.block_words(), other.block_words()) {
            ([], words) | (words, []) => words.iter().all(|&w| w == 0),
            (a, b) => a == b,
        };
        self.num_blocks == other.num_blocks
            && self.num_hashes == other.num_hashes
            && self.seed == other.seed
            && self.len == other.len
            && self.scheme == other.scheme
            && same_bits
    }
}

impl Eq for BlockedBloom {}

/// The offset (in words, 0..8) at which `words` is 64-byte aligned.
fn aligned_offset(words: &[u64]) -> usize {
    let off = words.as_ptr().align_offset(64);
    if off < WORDS { off } else { 0 }
}

impl BlockedBloom {
    fn unallocated(num_blocks: u64, num_hashes: u32, seed: u64, scheme: BlockScheme) -> Self {
        BlockedBloom {
            words: Words::empty(),
            offset: 0,
            num_blocks,
            num_hashes,
            seed,
            len: 0,
            scheme,
        }
    }

    /// Allocates the (zeroed) bit array: at the first insert.
    #[cold]
    #[inline(never)]
    fn allocate(&mut self) {
        let words = Words::zeroed(self.block_word_count());
        self.offset = aligned_offset(&words);
        self.words = words;
    }

    /// Words of the blocks (the allocation may add up to `WORDS - 1` of alignment slack).
    fn block_word_count(&self) -> usize {
        usize::try_from(self.num_blocks).map_or(usize::MAX, |b| b.saturating_mul(WORDS))
    }

    /// Whether the bit array is allocated (something was inserted since it was made, decoded
    /// or cleared).
    #[must_use]
    pub fn is_allocated(&self) -> bool {
        !self.words.is_empty()
    }

    /// An empty filter of `num_bits` bits rounded up to a multiple of 512, with `num_hashes`
    /// probes per item inside one block, in the [`Sectorized`](BlockScheme::Sectorized) scheme
    /// (see [`with_scheme`](Self::with_scheme) for the other).
    ///
    /// # Panics
    /// If `num_bits` is not in `1..=MAX_BITS` or `num_hashes` not in `1..=MAX_HASHES`
    /// (see [`try_new`](Self::try_new)).
    #[must_use]
    #[track_caller]
    pub fn new(num_bits: u64, num_hashes: u32, seed: u64) -> Self {
        match Self::try_new(num_bits, num_hashes, seed) {
            Ok(f) => f,
            Err(e) => panic!("{e}"),
        }
    }

    /// Like [`new`](Self::new), but returns an error for out-of-range parameters.
    ///
    /// # Errors
    /// [`Error::Bits`] or [`Error::Hashes`].
    pub fn try_new(num_bits: u64, num_hashes: u32, seed: u64) -> Result<Self, Error> {
        Self::try_with_scheme(num_bits, num_hashes, seed, BlockScheme::Sectorized)
    }

    /// Like [`new`](Self::new), in the probe scheme `scheme`: e.g.
    /// [`BlockScheme::Scattered`] for bits that must agree with those set by older builds (a
    /// Redis namespace's).
    ///
    /// # Panics
    /// As [`new`](Self::new).
    #[must_use]
    #[track_caller]
    pub fn with_scheme(num_bits: u64, num_hashes: u32, seed: u64, scheme: BlockScheme) -> Self {
        match Self::try_with_scheme(num_bits, num_hashes, seed, scheme) {
            Ok(f) => f,
            Err(e) => panic!("{e}"),
        }
    }

    /// Like [`with_scheme`](Self::with_scheme), but returns an error for out-of-range
    /// parameters.
    ///
    /// # Errors
    /// [`Error::Bits`] or [`Error::Hashes`].
    pub fn try_with_scheme(
        num_bits: u64,
        num_hashes: u32,
        seed: u64,
        scheme: BlockScheme,
    ) -> Result<Self, Error> {
        crate::check_params(num_bits, num_hashes)?;
        if usize::try_from(num_bits / 64).is_err() {
            return Err(Error::Bits { bits: num_bits });
        }
        Ok(Self::unallocated(num_bits.div_ceil(BLOCK_BITS), num_hashes, seed, scheme))
    }

    /// A filter whose *real* FPR meets `p` at `n` items, in the
    /// [`Sectorized`](BlockScheme::Sectorized) scheme: m and k from [`plan::sectorized_bits`]
    /// (which accounts for the blocking). `n = 0` is treated as 1.
    ///
    /// # Panics
    /// If `p` is not strictly between 0 and 1, or the filter would exceed [`MAX_BITS`].
    #[must_use]
    #[track_caller]
    pub fn with_capacity(n: u64, p: f64, seed: u64) -> Self {
        Self::with_capacity_scheme(n, p, seed, BlockScheme::Sectorized)
    }

    /// Like [`with_capacity`](Self::with_capacity), in the probe scheme `scheme` (sized by
    /// [`plan::blocked_bits`] for [`Scattered`](BlockScheme::Scattered)).
    ///
    /// # Panics
    /// As [`with_capacity`](Self::with_capacity).
    #[must_use]
    #[track_caller]
    pub fn with_capacity_scheme(n: u64, p: f64, seed: u64, scheme: BlockScheme) -> Self {
        crate::assert_fpr(p);
        let (m, k) = match scheme {
            BlockScheme::Scattered => plan::blocked_bits(n.max(1), p),
            BlockScheme::Sectorized => plan::sectorized_bits(n.max(1), p),
        };
        Self::with_scheme(m, k, seed, scheme)
    }

    /// The probe scheme: which bits of its block an item sets.
    #[must_use]
    pub fn scheme(&self) -> BlockScheme {
        self.scheme
    }

    /// The blocks' words; empty while unallocated.
    #[inline(always)]
    fn block_words(&self) -> &[u64] {
        self.words.get(self.offset..self.offset + self.num_blocks as usize * WORDS).unwrap_or(&[])
    }

    #[inline(always)]
    fn block_words_mut(&mut self) -> &mut [u64] {
        let end = self.offset + self.num_blocks as usize * WORDS;
        &mut self.words[self.offset..end]
    }

    #[inline(always)]
    fn block_mut(&mut self, b: usize) -> &mut [u64; WORDS] {
        &mut self.block_words_mut().as_chunks_mut::<WORDS>().0[b]
    }

    #[inline(always)]
    fn hash(&self, fp: u64) -> u64 {
        mix64(fp ^ self.seed)
    }

    #[inline(always)]
    fn block_of(&self, h: u64) -> usize {
        reduce(h, self.num_blocks) as usize
    }

    #[inline(always)]
    fn insert_hashed(&mut self, h: u64) -> bool {
        if self.words.is_empty() {
            self.allocate();
        }
        self.insert_allocated(h)
    }

    /// [`Self::insert_hashed`] once the array is allocated.
    #[inline(always)]
    fn insert_allocated(&mut self, h: u64) -> bool {
        let k = self.num_hashes;
        let b = self.block_of(h);
        let present = match self.scheme {
            BlockScheme::Scattered => scattered_insert(self.block_mut(b), h, k),
            BlockScheme::Sectorized => sectorized_insert(self.block_mut(b), h, k),
        };
        self.len += u64::from(!present);
        present
    }

    #[inline(always)]
    fn contains_hashed(&self, h: u64) -> bool {
        // No block while unallocated: nothing was inserted. (The check replaces the bounds
        // check indexing would make: no extra branch on the hot path.)
        let Some(block) = self.block_words().as_chunks::<WORDS>().0.get(self.block_of(h)) else {
            return false;
        };
        match self.scheme {
            BlockScheme::Scattered => scattered_contains(block, h, self.num_hashes),
            BlockScheme::Sectorized => sectorized_contains(block, h, self.num_hashes),
        }
    }

    /// The in-block probes of block hash `h` in this filter's scheme.
    fn probes(&self, h: u64) -> Probes {
        match self.scheme {
            BlockScheme::Scattered => Probes::Scattered(InBlock::new(h, self.num_hashes)),
            BlockScheme::Sectorized => Probes::Sectorized(Sectors::new(h, self.num_hashes)),
        }
    }

    /// Check-and-insert in one pass over one cache line: sets the k bits of `fp` and returns
    /// whether they were all set already (`fp` was maybe present). Counts `fp` in
    /// [`len`](Self::len) if it was new.
    #[inline]
    pub fn insert(&mut self, fp: u64) -> bool {
        self.insert_hashed(self.hash(fp))
    }

    /// Whether `fp` is maybe present (always `true` if it was inserted).
    #[inline]
    #[must_use]
    pub fn contains(&self, fp: u64) -> bool {
        self.contains_hashed(self.hash(fp))
    }

    /// The k bit positions of `fp` in the whole array (block · 512 + bit in block), e.g. to set
    /// them in a remote bitmap. Positions may repeat (probes are drawn with replacement; in
    /// the sectorized scheme only when k > 8). They depend on the [`scheme`](Self::scheme).
    pub fn positions(&self, fp: u64) -> impl Iterator<Item = u64> + use<> {
        let h = self.hash(fp);
        let base = self.block_of(h) as u64 * BLOCK_BITS;
        self.probes(h).map(move |bit| base + bit as u64)
    }

    /// The number of bits m (a multiple of 512).
    #[must_use]
    pub fn num_bits(&self) -> u64 {
        self.num_blocks * BLOCK_BITS
    }

    /// The number of 512-bit blocks.
    #[must_use]
    pub fn num_blocks(&self) -> u64 {
        self.num_blocks
    }

    /// The number of probes k per item (all inside one block).
    #[must_use]
    pub fn num_hashes(&self) -> u32 {
        self.num_hashes
    }

    /// The seed mixed into every probe.
    #[must_use]
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// How many [`insert`](Self::insert)s found their item new.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was inserted.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The number of bits set.
    #[must_use]
    pub fn count_ones(&self) -> u64 {
        self.block_words().iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// The fraction of bits set.
    #[must_use]
    pub fn fill_ratio(&self) -> f64 {
        self.count_ones() as f64 / self.num_bits() as f64
    }

    /// The false-positive rate expected at the current [`len`](Self::len):
    /// [`plan::sectorized_fpr`] or [`plan::blocked_fpr`], by the [`scheme`](Self::scheme).
    #[must_use]
    pub fn estimated_fpr(&self) -> f64 {
        match self.scheme {
            BlockScheme::Scattered => plan::blocked_fpr(self.num_bits(), self.num_hashes, self.len),
            BlockScheme::Sectorized => {
                plan::sectorized_fpr(self.num_bits(), self.num_hashes, self.len)
            }
        }
    }

    /// Heap memory of the bit array (with its alignment slack), in bytes: 0 until the first
    /// insert.
    #[must_use]
    pub fn memory_bytes(&self) -> usize {
        self.words.memory_bytes()
    }

    /// What [`memory_bytes`](Self::memory_bytes) is once the bit array is allocated: the
    /// filter's full size, allocated or not.
    #[must_use]
    pub fn reserved_bytes(&self) -> usize {
        Words::bytes_for(self.block_word_count())
    }

    /// Removes every item, keeping size, hashes and seed, and frees the bit array (the next
    /// insert allocates it again).
    pub fn clear(&mut self) {
        self.words = Words::empty();
        self.offset = 0;
        self.len = 0;
    }
}

impl Filter for BlockedBloom {
    fn insert(&mut self, fp: u64) -> bool {
        BlockedBloom::insert(self, fp)
    }
    fn contains(&self, fp: u64) -> bool {
        BlockedBloom::contains(self, fp)
    }
    fn num_bits(&self) -> u64 {
        BlockedBloom::num_bits(self)
    }
    fn num_hashes(&self) -> u32 {
        self.num_hashes
    }
    fn memory_bytes(&self) -> usize {
        BlockedBloom::memory_bytes(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_cache_aligned() {
        for bits in [512u64, 4096, 1 << 20] {
            let mut f = BlockedBloom::new(bits, 7, 0);
            f.insert(1);
            assert_eq!(f.block_words().as_ptr() as usize % 64, 0);
            let g = f.clone();
            assert_eq!(g.block_words().as_ptr() as usize % 64, 0);
            let d = BlockedBloom::decode(&f.encode()).unwrap();
            assert_eq!(d.block_words().as_ptr() as usize % 64, 0);
            let r = BlockedBloom::read_from(&f.encode()[..]).unwrap();
            assert_eq!(r.block_words().as_ptr() as usize % 64, 0);
            assert_eq!(r, f);
        }
    }

    #[test]
    fn rounds_bits_up_to_blocks() {
        assert_eq!(BlockedBloom::new(1, 3, 0).num_bits(), 512);
        assert_eq!(BlockedBloom::new(513, 3, 0).num_bits(), 1024);
        assert_eq!(BlockedBloom::new(1024, 3, 0).num_blocks(), 2);
    }

    #[test]
    fn in_block_probes_are_k_in_range_and_deterministic() {
        for k in [1u32, 2, 7, 8, 15, 64] {
            for h in [0u64, 1, u64::MAX, 0x1234_5678] {
                let p: Vec<usize> = InBlock::new(h, k).collect();
                assert_eq!(p.len(), k as usize);
                assert!(p.iter().all(|&b| b < 512));
                assert_eq!(p, InBlock::new(h, k).collect::<Vec<_>>());
            }
        }
        // The 8th probe comes from a re-mixed word, not from the exhausted first one.
        let p: Vec<usize> = InBlock::new(5, 14).collect();
        assert_ne!(p[..7], p[7..]);
    }

    const SCHEMES: [BlockScheme; 2] = [BlockScheme::Scattered, BlockScheme::Sectorized];
    const KS: [u32; 14] = [1, 2, 3, 5, 7, 8, 9, 12, 15, 16, 17, 24, 33, 64];

    #[test]
    fn positions_match_the_bits_set() {
        for scheme in SCHEMES {
            for k in KS {
                for fp in [1234u64, 0, u64::MAX, 77] {
                    let mut f = BlockedBloom::with_scheme(1 << 14, k, 5, scheme);
                    f.insert(fp);
                    let positions: Vec<u64> = f.positions(fp).collect();
                    assert_eq!(positions.len(), k as usize, "{scheme:?} k {k}");
                    let mut expected = positions.clone();
                    expected.sort_unstable();
                    expected.dedup();
                    let set: Vec<u64> = (0..f.num_bits())
                        .filter(|&i| f.block_words()[(i / 64) as usize] >> (i % 64) & 1 == 1)
                        .collect();
                    assert_eq!(set, expected, "{scheme:?} k {k}");
                    // One block.
                    assert_eq!(positions[0] / 512, positions[k as usize - 1] / 512);
                }
            }
        }
    }

    #[test]
    fn sectorized_probes_cover_words_by_rounds() {
        for k in KS {
            for h in [0u64, 1, u64::MAX, 0x1234_5678, mix64(9)] {
                let bits: Vec<usize> = Sectors::new(h, k).collect();
                assert_eq!(bits.len(), k as usize);
                assert!(bits.iter().all(|&b| b < 512));
                // Each word gets k/8 or k/8 + 1 probes, the extra ones a run of consecutive
                // words (mod 8).
                let mut per_word = [0u32; 8];
                for &b in &bits {
                    per_word[b / 64] += 1;
                }
                let extra: Vec<usize> = (0..8).filter(|&w| per_word[w] == k / 8 + 1).collect();
                assert!(per_word.iter().all(|&c| c == k / 8 || c == k / 8 + 1), "{per_word:?}");
                assert_eq!(extra.len(), (k % 8) as usize);
                if let Some(&first) = extra.first() {
                    let start =
                        (0..8).find(|&w| extra.contains(&w) && !extra.contains(&((w + 7) % 8)));
                    let start = start.unwrap_or(first);
                    for j in 0..extra.len() {
                        assert!(extra.contains(&((start + j) % 8)), "{extra:?}");
                    }
                }
                // The masks the hot path ORs in are exactly these bits.
                let mut masks = [0u64; 8];
                for &b in &bits {
                    masks[b / 64] |= 1 << (b % 64);
                }
                assert_eq!(sector_masks(h, k), masks, "k {k}");
            }
        }
        // A scheme-independent sanity check: the rotation really varies.
        let starts: std::collections::HashSet<usize> =
            (0..200u64).map(|h| Sectors::new(mix64(h), 1).next().unwrap() / 64).collect();
        assert_eq!(starts.len(), 8);
    }

    #[test]
    fn schemes_set_different_bits() {
        let mut a = BlockedBloom::with_scheme(1 << 14, 7, 5, BlockScheme::Scattered);
        let mut b = BlockedBloom::with_scheme(1 << 14, 7, 5, BlockScheme::Sectorized);
        assert_ne!(a, b);
        a.insert(42);
        b.insert(42);
        assert_ne!(a.positions(42).collect::<Vec<_>>(), b.positions(42).collect::<Vec<_>>());
        assert_eq!(BlockedBloom::new(1 << 14, 7, 5).scheme(), BlockScheme::Sectorized);
        assert_eq!(BlockedBloom::with_capacity(100, 0.01, 5).scheme(), BlockScheme::Sectorized);
    }

    #[test]
    fn batch_matches_single() {
        let fps: Vec<u64> = (0..5000u64).map(|i| mix64(i) % 3000).collect();
        for scheme in SCHEMES {
            for k in KS {
                for n in [0usize, 1, 5, 16, 17, 5000] {
                    let mut a = BlockedBloom::with_scheme(1 << 15, k, 9, scheme);
                    let mut b = a.clone();
                    let mut out = vec![false; n];
                    a.insert_batch(&fps[..n], &mut out);
                    let single: Vec<bool> = fps[..n].iter().map(|&fp| b.insert(fp)).collect();
                    assert_eq!(out, single, "{scheme:?} k {k} n {n}");
                    assert_eq!(a, b);
                    let strangers: Vec<u64> = (0..n as u64).map(|i| mix64(i + (1 << 40))).collect();
                    for probe in [&fps[..n], &strangers[..]] {
                        let mut hits = vec![false; n];
                        a.contains_batch(probe, &mut hits);
                        let single: Vec<bool> = probe.iter().map(|&fp| a.contains(fp)).collect();
                        assert_eq!(hits, single, "{scheme:?} k {k} n {n}");
                    }
                }
            }
        }
    }

    #[test]
    fn routed_batch_matches_single_calls_per_filter() {
        let fps: Vec<u64> = (0..5000u64).map(|i| mix64(i) % 3000).collect();
        let route: Vec<u32> = (0..5000u64).map(|i| (mix64(i ^ 77) % 3) as u32).collect();
        for scheme in SCHEMES {
            for ks in [[7, 7, 7], [7, 9, 7]] {
                for n in [0usize, 1, 5, 16, 17, 5000] {
                    // Three filters of different sizes and seeds, one unallocated.
                    let mut fs: Vec<BlockedBloom> = (0..3)
                        .map(|i| BlockedBloom::with_scheme(1 << (13 + i), ks[i], i as u64, scheme))
                        .collect();
                    fs[0].insert(1);
                    let mut single = fs.clone();
                    let mut out = vec![false; n];
                    let mut refs: Vec<&mut BlockedBloom> = fs.iter_mut().collect();
                    BlockedBloom::insert_batch_routed(&mut refs, &route[..n], &fps[..n], &mut out);
                    let expected: Vec<bool> = fps[..n]
                        .iter()
                        .zip(&route[..n])
                        .map(|(&fp, &t)| single[t as usize].insert(fp))
                        .collect();
                    assert_eq!(out, expected, "{scheme:?} k {ks:?} n {n}");
                    assert_eq!(fs, single, "{scheme:?} k {ks:?} n {n}");
                }
            }
        }
    }

    /// The portable paths (SSE2 / scalar, used without AVX2) agree with the positions.
    #[test]
    fn or_masks_and_has_masks_agree() {
        let mut block = [0u64; WORDS];
        for h in 0..300u64 {
            let masks = sector_masks(mix64(h), 7);
            let before = block;
            let was = has_masks(&block, masks);
            assert_eq!(or_masks(&mut block, masks), was);
            for w in 0..WORDS {
                assert_eq!(block[w], before[w] | masks[w]);
            }
            assert!(has_masks(&block, masks));
        }
    }

    #[test]
    fn the_bit_array_is_allocated_by_the_first_insert() {
        for scheme in SCHEMES {
            allocated_by_the_first_insert(scheme);
        }
    }

    fn allocated_by_the_first_insert(scheme: BlockScheme) {
        let mut f = BlockedBloom::with_scheme(1 << 20, 7, 3, scheme);
        assert!(!f.is_allocated());
        assert_eq!(f.memory_bytes(), 0);
        assert_eq!(f.reserved_bytes(), (1 << 17) + 7 * 8);
        assert!(!f.contains(42));
        let mut out = [true; 3];
        f.contains_batch(&[1, 2, 3], &mut out);
        assert_eq!(out, [false; 3]);
        assert_eq!((f.count_ones(), f.fill_ratio()), (0, 0.0));
        // Its encoding is an all-zero filter's, and reads back unallocated.
        let empty = f.encode();
        let back = BlockedBloom::decode(&empty).unwrap();
        assert!(!back.is_allocated());
        assert_eq!(back, f);
        let mut g = f.clone();
        assert!(!g.is_allocated());
        g.insert_batch(&[], &mut []);
        assert!(!g.is_allocated(), "an empty batch allocated");
        // The first insert allocates all of it, and everything inserted is found.
        assert!(!f.insert(42));
        assert!(f.is_allocated());
        assert_eq!(f.memory_bytes(), f.reserved_bytes());
        assert!(f.contains(42) && f.insert(42));
        let mut out = [false; 2];
        g.insert_batch(&[42, 43], &mut out);
        assert!(g.is_allocated() && g.contains(42) && g.contains(43));
        // An allocated filter with no bit set equals an unallocated one, and encodes the same.
        let mut h = BlockedBloom::with_scheme(1 << 20, 7, 3, scheme);
        h.allocate();
        assert!(h.is_allocated());
        assert_eq!(h, BlockedBloom::with_scheme(1 << 20, 7, 3, scheme));
        assert_eq!(h.encode(), empty);
        // A filter with bits round-trips allocated.
        let back = BlockedBloom::decode(&f.encode()).unwrap();
        assert!(back.is_allocated() && back.contains(42));
        assert_eq!(back, f);
        assert_eq!(back.scheme(), scheme);
    }

    #[test]
    fn clear_and_stats() {
        let mut f = BlockedBloom::new(4096, 4, 1);
        for fp in 0..20 {
            f.insert(fp);
        }
        assert!(f.count_ones() > 0 && f.count_ones() <= 80);
        assert!(f.fill_ratio() > 0.0 && f.fill_ratio() < 0.1);
        assert!(f.estimated_fpr() > 0.0);
        assert!(f.memory_bytes() >= 512);
        f.clear();
        assert_eq!(f.count_ones(), 0);
        assert!(f.is_empty());
        assert_eq!(f.memory_bytes(), 0, "clear did not free the bit array");
        assert!(!f.contains(3));
    }
}
