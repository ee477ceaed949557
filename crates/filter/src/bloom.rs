//! The classic Bloom filter of the seeds: m bits, k probes anywhere in them.

use std::fmt;
use std::io::{self, Read, Write};

use crate::codec::{self, Decoder, Encoder, FilterKind, Header};
use crate::hash::{mix64, reduce};
use crate::prefetch::{advise_huge_pages, prefetch};
use crate::{Error, Filter, MAX_BITS, MAX_HASHES, plan};

/// Salt that derives the double-hashing step from the first probe hash.
const STEP_SALT: u64 = 0x2545_F491_4F6C_DD1D;

/// How many items ahead the batched calls prefetch.
const WINDOW: usize = 8;

/// The k probe positions of one fingerprint: Kirsch–Mitzenmacher double hashing,
/// g_i = h1 + i·h2 (mod 2^64), position_i = [`reduce`](crate::hash::reduce)(g_i, m).
///
/// `h1 = mix64(fp ^ seed)` and `h2 = mix64(h1 ^ STEP_SALT)` are full 64-bit hashes and
/// `reduce` takes the high bits of g_i, so positions stay well spread for any m up to 2^64.
#[derive(Debug, Clone)]
pub(crate) struct Probes {
    g: u64,
    step: u64,
    m: u64,
    left: u32,
}

impl Probes {
    #[inline(always)]
    pub(crate) fn new(fp: u64, seed: u64, m: u64, k: u32) -> Probes {
        let h1 = mix64(fp ^ seed);
        Probes { g: h1, step: mix64(h1 ^ STEP_SALT), m, left: k }
    }
}

impl Iterator for Probes {
    type Item = u64;

    #[inline(always)]
    fn next(&mut self) -> Option<u64> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let pos = reduce(self.g, self.m);
        self.g = self.g.wrapping_add(self.step);
        Some(pos)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

/// A classic Bloom filter (seeds 000 and 002): an array of m bits and k probes per item,
/// placed anywhere in the array by double hashing.
///
/// Its false-positive rate is formula (1), [`plan::classic_fpr`]; it uses the least space for a
/// given rate, but every probe is a separate cache miss once the filter outgrows the caches.
/// Prefer [`BlockedBloom`](crate::BlockedBloom) for big filters.
///
/// Layout: bit `i` is bit `i % 64` of word `i / 64` of a `Vec<u64>` of ⌈m/64⌉ words (little-endian
/// when encoded); the bits past m in the last word stay 0.
///
/// # Examples
/// ```
/// use urlseen_filter::BloomFilter;
/// let mut f = BloomFilter::with_capacity(1_000_000, 0.01, 0);
/// assert_eq!((f.num_bits(), f.num_hashes()), (9_585_059, 7));
/// assert!(!f.insert(1));
/// assert!(f.insert(1));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct BloomFilter {
    words: Vec<u64>,
    num_bits: u64,
    num_hashes: u32,
    seed: u64,
    len: u64,
}

impl fmt::Debug for BloomFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BloomFilter")
            .field("num_bits", &self.num_bits)
            .field("num_hashes", &self.num_hashes)
            .field("seed", &self.seed)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl BloomFilter {
    /// An empty filter of `num_bits` bits with `num_hashes` probes per item.
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
        crate::check_params(num_bits, num_hashes)?;
        let words =
            usize::try_from(num_bits.div_ceil(64)).map_err(|_| Error::Bits { bits: num_bits })?;
        // `vec![0; n]` of an integer type is a zeroed allocation: no per-word initialization.
        let words = vec![0; words];
        advise_huge_pages(&words);
        Ok(BloomFilter { words, num_bits, num_hashes, seed, len: 0 })
    }

    /// A filter sized for `n` items at false-positive rate `p` by the seed formulas:
    /// m = [`plan::bloom_bits`]`(n, p)`, k = [`plan::optimal_hashes`]`(m, n)`.
    /// `n = 0` is treated as 1.
    ///
    /// # Panics
    /// If `p` is not strictly between 0 and 1, or the filter would exceed [`MAX_BITS`].
    #[must_use]
    #[track_caller]
    pub fn with_capacity(n: u64, p: f64, seed: u64) -> Self {
        crate::assert_fpr(p);
        let n = n.max(1);
        let m = plan::bloom_bits(n, p);
        Self::new(m, plan::optimal_hashes(m, n), seed)
    }

    #[inline(always)]
    fn probes(&self, fp: u64) -> Probes {
        Probes::new(fp, self.seed, self.num_bits, self.num_hashes)
    }

    /// Check-and-insert in one pass: sets the k bits of `fp` and returns whether they were all
    /// set already (`fp` was maybe present). Counts `fp` in [`len`](Self::len) if it was new.
    #[inline]
    pub fn insert(&mut self, fp: u64) -> bool {
        let probes = self.probes(fp);
        let mut present = true;
        for pos in probes {
            let word = &mut self.words[(pos >> 6) as usize];
            let bit = 1u64 << (pos & 63);
            present &= *word & bit != 0;
            *word |= bit;
        }
        self.len += u64::from(!present);
        present
    }

    /// Whether `fp` is maybe present (always `true` if it was inserted).
    #[inline]
    #[must_use]
    pub fn contains(&self, fp: u64) -> bool {
        self.probes(fp).all(|pos| self.words[(pos >> 6) as usize] & (1u64 << (pos & 63)) != 0)
    }

    /// Prefetches the words of the first `probes` probes of `fp`.
    fn prefetch_probes(&self, fp: u64, probes: usize) {
        for pos in self.probes(fp).take(probes) {
            prefetch(&self.words[(pos >> 6) as usize]);
        }
    }

    /// [`insert`](Self::insert) for each of `fps` in order, writing the results to
    /// `was_present`, while prefetching the k words of the item 8 places ahead.
    ///
    /// # Panics
    /// If `was_present.len() != fps.len()`.
    pub fn insert_batch(&mut self, fps: &[u64], was_present: &mut [bool]) {
        assert_eq!(fps.len(), was_present.len(), "insert_batch: output length differs");
        for &fp in fps.iter().take(WINDOW) {
            self.prefetch_probes(fp, usize::MAX);
        }
        for (i, (&fp, out)) in fps.iter().zip(was_present.iter_mut()).enumerate() {
            if let Some(&ahead) = fps.get(i + WINDOW) {
                self.prefetch_probes(ahead, usize::MAX);
            }
            *out = self.insert(fp);
        }
    }

    /// [`contains`](Self::contains) for each of `fps`, writing the results to `out`, while
    /// prefetching the first two words of the item 8 places ahead (a query usually stops at
    /// the first clear bit, so prefetching all k words would mostly waste memory bandwidth).
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn contains_batch(&self, fps: &[u64], out: &mut [bool]) {
        assert_eq!(fps.len(), out.len(), "contains_batch: output length differs");
        for &fp in fps.iter().take(WINDOW) {
            self.prefetch_probes(fp, 2);
        }
        for (i, (&fp, out)) in fps.iter().zip(out.iter_mut()).enumerate() {
            if let Some(&ahead) = fps.get(i + WINDOW) {
                self.prefetch_probes(ahead, 2);
            }
            *out = self.contains(fp);
        }
    }

    /// The number of bits m.
    #[must_use]
    pub fn num_bits(&self) -> u64 {
        self.num_bits
    }

    /// The number of probes k per item.
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
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// The fraction of bits set.
    #[must_use]
    pub fn fill_ratio(&self) -> f64 {
        self.count_ones() as f64 / self.num_bits as f64
    }

    /// The false-positive rate expected at the current [`len`](Self::len), formula (1).
    #[must_use]
    pub fn estimated_fpr(&self) -> f64 {
        plan::classic_fpr(self.num_bits, self.num_hashes, self.len)
    }

    /// Heap memory of the bit array, in bytes.
    #[must_use]
    pub fn memory_bytes(&self) -> usize {
        self.words.capacity() * 8
    }

    /// Removes every item, keeping size, hashes and seed.
    pub fn clear(&mut self) {
        self.words.fill(0);
        self.len = 0;
    }

    /// Writes the encoding (see [`codec`]): payload = ⌈m/64⌉ u64 words, little-endian.
    ///
    /// # Errors
    /// Any error of `w`.
    pub fn write_to<W: Write>(&self, mut w: W) -> io::Result<()> {
        let header = Header {
            kind: FilterKind::Bloom,
            num_hashes: self.num_hashes,
            num_bits: self.num_bits,
            seed: self.seed,
            len: self.len,
            payload_len: self.words.len() as u64 * 8,
        };
        let mut e = Encoder::new(&mut w, header)?;
        e.u64s(self.words.iter().copied())?;
        e.finish()
    }

    /// The encoding as bytes (see [`write_to`](Self::write_to)).
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(codec::HEADER_LEN + self.words.len() * 8 + 8);
        // Writing to a Vec cannot fail.
        let _ = self.write_to(&mut out);
        out
    }

    /// Reads and fully validates an encoding written by [`write_to`](Self::write_to).
    ///
    /// # Errors
    /// An [`Error`] for a wrong magic, version or kind, out-of-range parameters, a payload
    /// length that does not match them, non-zero padding bits, a short input, a checksum
    /// mismatch, or an I/O error.
    pub fn read_from<R: Read>(mut r: R) -> Result<Self, Error> {
        Self::read_decoder(Decoder::new(&mut r, FilterKind::Bloom)?)
    }

    /// Decodes exactly one filter from `bytes` (trailing bytes are an error).
    ///
    /// # Errors
    /// As [`read_from`](Self::read_from), plus [`Error::TrailingBytes`].
    pub fn decode(bytes: &[u8]) -> Result<Self, Error> {
        codec::decode_slice(bytes, FilterKind::Bloom, Self::read_decoder)
    }

    fn read_decoder<R: Read>(mut d: Decoder<'_, R>) -> Result<Self, Error> {
        let h = d.header;
        if !(1..=MAX_BITS).contains(&h.num_bits) {
            return Err(codec::invalid("num_bits", h.num_bits, "must be in 1..=2^40"));
        }
        if !(1..=MAX_HASHES).contains(&h.num_hashes) {
            return Err(codec::invalid("num_hashes", h.num_hashes.into(), "must be in 1..=64"));
        }
        let words = h.num_bits.div_ceil(64);
        d.check_payload_len(words * 8)?;
        let data = d.u64s(words, 0)?;
        d.finish()?;
        let tail_bits = h.num_bits % 64;
        if tail_bits != 0 && data.last().is_some_and(|&w| w >> tail_bits != 0) {
            return Err(codec::invalid("padding", h.num_bits, "bits past num_bits are set"));
        }
        Ok(BloomFilter {
            words: data,
            num_bits: h.num_bits,
            num_hashes: h.num_hashes,
            seed: h.seed,
            len: h.len,
        })
    }
}

impl Filter for BloomFilter {
    fn insert(&mut self, fp: u64) -> bool {
        BloomFilter::insert(self, fp)
    }
    fn contains(&self, fp: u64) -> bool {
        BloomFilter::contains(self, fp)
    }
    fn num_bits(&self) -> u64 {
        self.num_bits
    }
    fn num_hashes(&self) -> u32 {
        self.num_hashes
    }
    fn memory_bytes(&self) -> usize {
        BloomFilter::memory_bytes(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_then_contains() {
        let mut f = BloomFilter::new(1000, 5, 3);
        assert!(f.is_empty());
        for fp in 0..50u64 {
            assert!(!f.contains(fp * 7919) || fp > 0);
            f.insert(fp * 7919);
        }
        for fp in 0..50u64 {
            assert!(f.contains(fp * 7919));
            assert!(f.insert(fp * 7919));
        }
        assert!(f.len() <= 50 && f.len() >= 45);
        assert!(f.count_ones() <= 250);
        assert!(f.fill_ratio() > 0.0);
        f.clear();
        assert_eq!((f.len(), f.count_ones()), (0, 0));
    }

    #[test]
    fn probes_are_in_range_and_deterministic() {
        for m in [1u64, 2, 63, 64, 65, 9_585_059, 1 << 33] {
            let p: Vec<u64> = Probes::new(42, 1, m, 9).collect();
            assert_eq!(p.len(), 9);
            assert!(p.iter().all(|&x| x < m));
            assert_eq!(p, Probes::new(42, 1, m, 9).collect::<Vec<_>>());
        }
        // Another seed, other positions.
        let a: Vec<u64> = Probes::new(42, 1, 1 << 30, 7).collect();
        let b: Vec<u64> = Probes::new(42, 2, 1 << 30, 7).collect();
        assert_ne!(a, b);
    }

    #[test]
    fn batch_matches_single() {
        let fps: Vec<u64> = (0..3000u64).map(|i| mix64(i) % 2000).collect();
        let mut a = BloomFilter::with_capacity(1500, 0.01, 9);
        let mut b = a.clone();
        let mut out = vec![false; fps.len()];
        a.insert_batch(&fps, &mut out);
        let single: Vec<bool> = fps.iter().map(|&fp| b.insert(fp)).collect();
        assert_eq!(out, single);
        assert_eq!(a, b);
        let mut hits = vec![false; fps.len()];
        a.contains_batch(&fps, &mut hits);
        assert!(hits.iter().all(|&h| h));
    }

    #[test]
    fn try_new_validates() {
        assert!(matches!(BloomFilter::try_new(0, 3, 0), Err(Error::Bits { bits: 0 })));
        assert!(matches!(BloomFilter::try_new(10, 0, 0), Err(Error::Hashes { hashes: 0 })));
        assert!(matches!(BloomFilter::try_new(10, 65, 0), Err(Error::Hashes { hashes: 65 })));
        assert!(BloomFilter::try_new(MAX_BITS + 1, 3, 0).is_err());
    }

    #[test]
    #[should_panic(expected = "false-positive rate")]
    fn with_capacity_rejects_bad_fpr() {
        let _ = BloomFilter::with_capacity(10, 1.0, 0);
    }
}
