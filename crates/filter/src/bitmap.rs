//! The seed-001 URL index: a bitmap of 2^28 slots addressed by one 32-bit hash (k = 1).

use std::fmt;
use std::io::{self, Read, Write};

use crate::codec::{self, Decoder, Encoder, FilterKind, Header};
use crate::hash::mix64;
use crate::{Error, Filter};

/// The default size of a [`BitmapIndex`]: 2^28 slots (32 MiB), as in seed 001.
pub const DEFAULT_LOG2_SLOTS: u32 = 28;

/// Bits of the 32-bit value that select the bit in a 32-bit word (seed 001: "the last 5 bits").
const BIT_BITS: u32 = 5;
/// Bits that select the word inside a segment (seed 001: bits 17–27, 2048 words).
const WORD_BITS: u32 = 11;

/// The bitmap index of seed 001: 2^s one-bit slots addressed by a single 32-bit value, i.e. a
/// Bloom filter with k = 1. A baseline to compare with, not a design to copy: its FPR at n items
/// is 1 − (1 − 2^−s)^n ≈ 1 − e^{−n/2^s}, about 31 % at 10^8 URLs in 2^28 slots.
///
/// The 32-bit value is the high half of `mix64(fp ^ seed)` (seed 001 takes it from an MD5).
/// With s = 28 the seed's layout applies literally: bits 5–16 of the value select one of 4096
/// segments, bits 17–27 one of 2048 32-bit words in the segment, bits 0–4 the bit in the word.
/// Smaller bitmaps (s < 28, for tests) keep the 5 bit bits and up to 11 word bits and give the
/// segment the rest; larger ones (up to s = 32) give the extra bits to the segment.
///
/// Layout: a `Vec<u32>` of 2^s/32 words, word `segment · 2048 + word`; encoded little-endian.
///
/// # Examples
/// ```
/// use urlseen_filter::BitmapIndex;
/// let mut index = BitmapIndex::new(20);
/// assert!(!index.insert(5));
/// assert!(index.contains(5));
/// assert_eq!(BitmapIndex::default().memory_bytes(), 32 << 20);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct BitmapIndex {
    words: Vec<u32>,
    log2_slots: u32,
    seed: u64,
    len: u64,
}

impl fmt::Debug for BitmapIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BitmapIndex")
            .field("log2_slots", &self.log2_slots)
            .field("seed", &self.seed)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl Default for BitmapIndex {
    /// The seed's bitmap: 2^28 slots, seed 0.
    fn default() -> Self {
        Self::new(DEFAULT_LOG2_SLOTS)
    }
}

impl BitmapIndex {
    /// An empty bitmap of 2^`log2_slots` slots with seed 0.
    ///
    /// # Panics
    /// If `log2_slots` is not in `5..=32` (see [`try_new`](Self::try_new)).
    #[must_use]
    #[track_caller]
    pub fn new(log2_slots: u32) -> Self {
        Self::with_seed(log2_slots, 0)
    }

    /// An empty bitmap of 2^`log2_slots` slots whose value is derived with `seed`.
    ///
    /// # Panics
    /// If `log2_slots` is not in `5..=32`.
    #[must_use]
    #[track_caller]
    pub fn with_seed(log2_slots: u32, seed: u64) -> Self {
        match Self::try_new(log2_slots, seed) {
            Ok(f) => f,
            Err(e) => panic!("{e}"),
        }
    }

    /// Like [`with_seed`](Self::with_seed), but returns an error for an out-of-range size.
    ///
    /// # Errors
    /// [`Error::Log2Slots`] unless `5 <= log2_slots <= 32`.
    pub fn try_new(log2_slots: u32, seed: u64) -> Result<Self, Error> {
        if !(BIT_BITS..=32).contains(&log2_slots) {
            return Err(Error::Log2Slots { log2_slots });
        }
        let words = 1usize << (log2_slots - BIT_BITS);
        Ok(BitmapIndex { words: vec![0; words], log2_slots, seed, len: 0 })
    }

    /// The seed-001 32-bit value of `fp`.
    #[inline]
    fn value(&self, fp: u64) -> u32 {
        (mix64(fp ^ self.seed) >> 32) as u32
    }

    /// The (word index, bit mask) of `fp`, by the seed's segment/word/bit layout.
    #[inline]
    fn locate(&self, fp: u64) -> (usize, u32) {
        let v = self.value(fp);
        let word_bits = WORD_BITS.min(self.log2_slots - BIT_BITS);
        let segment_bits = self.log2_slots - BIT_BITS - word_bits;
        let mask = |bits: u32| (1u64 << bits) as u32 - 1;
        let bit = v & 31;
        let segment = (v >> BIT_BITS) & mask(segment_bits);
        let word = (v.checked_shr(BIT_BITS + segment_bits).unwrap_or(0)) & mask(word_bits);
        let index = ((segment as usize) << word_bits) | word as usize;
        (index, 1u32 << bit)
    }

    /// The slot (bit index, `0..2^s`) of `fp`.
    #[must_use]
    pub fn slot(&self, fp: u64) -> u64 {
        let (word, mask) = self.locate(fp);
        (word as u64) << BIT_BITS | u64::from(mask.trailing_zeros())
    }

    /// The index of the 32-bit word holding `fp`'s slot: the word seed 001 writes back to its
    /// index file after marking a URL.
    #[must_use]
    pub fn word_index(&self, fp: u64) -> usize {
        self.locate(fp).0
    }

    /// The 32-bit word at `index`.
    ///
    /// # Panics
    /// If `index >= 2^s / 32`.
    #[must_use]
    pub fn word(&self, index: usize) -> u32 {
        self.words[index]
    }

    /// Check-and-insert (seed 001's `mark_url_as_crawled` after `is_url_crawled`): sets `fp`'s
    /// bit and returns whether it was set already.
    #[inline]
    pub fn insert(&mut self, fp: u64) -> bool {
        let (index, mask) = self.locate(fp);
        let word = &mut self.words[index];
        let present = *word & mask != 0;
        *word |= mask;
        self.len += u64::from(!present);
        present
    }

    /// Whether `fp`'s bit is set (seed 001's `is_url_crawled`).
    #[inline]
    #[must_use]
    pub fn contains(&self, fp: u64) -> bool {
        let (index, mask) = self.locate(fp);
        self.words[index] & mask != 0
    }

    /// log2 of the number of slots.
    #[must_use]
    pub fn log2_slots(&self) -> u32 {
        self.log2_slots
    }

    /// The number of slots (bits), 2^s.
    #[must_use]
    pub fn num_bits(&self) -> u64 {
        1u64 << self.log2_slots
    }

    /// The seed the value is derived with.
    #[must_use]
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// How many [`insert`](Self::insert)s found their bit unset.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was inserted.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The number of bits set (equal to [`len`](Self::len): each new item sets one bit).
    #[must_use]
    pub fn count_ones(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// The fraction of slots set.
    #[must_use]
    pub fn fill_ratio(&self) -> f64 {
        self.count_ones() as f64 / self.num_bits() as f64
    }

    /// The false-positive rate now: the fill ratio (with k = 1 a query hits a set bit with
    /// exactly that probability).
    #[must_use]
    pub fn estimated_fpr(&self) -> f64 {
        self.len as f64 / self.num_bits() as f64
    }

    /// The false-positive rate expected after `n` distinct items: 1 − (1 − 2^−s)^n.
    #[must_use]
    pub fn expected_fpr(log2_slots: u32, n: u64) -> f64 {
        let slots = (1u64 << log2_slots.min(63)) as f64;
        1.0 - (n as f64 * (-1.0 / slots).ln_1p()).exp()
    }

    /// Heap memory of the bitmap, in bytes.
    #[must_use]
    pub fn memory_bytes(&self) -> usize {
        self.words.capacity() * 4
    }

    /// Removes every item.
    pub fn clear(&mut self) {
        self.words.fill(0);
        self.len = 0;
    }

    /// Writes the encoding (see [`codec`]): num_hashes = 1, num_bits = 2^s; payload = the 2^s/32
    /// u32 words, little-endian.
    ///
    /// # Errors
    /// Any error of `w`.
    pub fn write_to<W: Write>(&self, mut w: W) -> io::Result<()> {
        let header = Header {
            kind: FilterKind::Bitmap,
            num_hashes: 1,
            num_bits: self.num_bits(),
            seed: self.seed,
            len: self.len,
            payload_len: self.num_bits() / 8,
        };
        let mut e = Encoder::new(&mut w, header)?;
        e.u32s(self.words.iter().copied())?;
        e.finish()
    }

    /// The encoding as bytes (see [`write_to`](Self::write_to)).
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(codec::HEADER_LEN + self.words.len() * 4 + 8);
        // Writing to a Vec cannot fail.
        let _ = self.write_to(&mut out);
        out
    }

    /// Reads and fully validates an encoding written by [`write_to`](Self::write_to).
    ///
    /// # Errors
    /// An [`Error`] as for the other filters (num_bits must be a power of two in
    /// 2^5..=2^32 and num_hashes 1).
    pub fn read_from<R: Read>(mut r: R) -> Result<Self, Error> {
        Self::read_decoder(Decoder::new(&mut r, FilterKind::Bitmap)?)
    }

    /// Decodes exactly one bitmap from `bytes` (trailing bytes are an error).
    ///
    /// # Errors
    /// As [`read_from`](Self::read_from), plus [`Error::TrailingBytes`].
    pub fn decode(bytes: &[u8]) -> Result<Self, Error> {
        codec::decode_slice(bytes, FilterKind::Bitmap, Self::read_decoder)
    }

    fn read_decoder<R: Read>(mut d: Decoder<'_, R>) -> Result<Self, Error> {
        let h = d.header;
        if !h.num_bits.is_power_of_two() || !(1u64 << BIT_BITS..=1u64 << 32).contains(&h.num_bits) {
            return Err(codec::invalid(
                "num_bits",
                h.num_bits,
                "must be a power of two in 2^5..=2^32",
            ));
        }
        if h.num_hashes != 1 {
            return Err(codec::invalid("num_hashes", h.num_hashes.into(), "must be 1"));
        }
        d.check_payload_len(h.num_bits / 8)?;
        let words = d.u32s(h.num_bits / 32)?;
        d.finish()?;
        Ok(BitmapIndex { words, log2_slots: h.num_bits.trailing_zeros(), seed: h.seed, len: h.len })
    }
}

impl Filter for BitmapIndex {
    fn insert(&mut self, fp: u64) -> bool {
        BitmapIndex::insert(self, fp)
    }
    fn contains(&self, fp: u64) -> bool {
        BitmapIndex::contains(self, fp)
    }
    fn num_bits(&self) -> u64 {
        BitmapIndex::num_bits(self)
    }
    fn num_hashes(&self) -> u32 {
        1
    }
    fn memory_bytes(&self) -> usize {
        BitmapIndex::memory_bytes(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_layout_at_28_bits() {
        let index = BitmapIndex::with_seed(28, 77);
        for fp in 0..1000u64 {
            let v = index.value(fp);
            let segment = (v >> 5) & 0xFFF;
            let word = (v >> 17) & 0x7FF;
            let bit = v & 31;
            let (i, mask) = index.locate(fp);
            assert_eq!(i, (segment as usize) * 2048 + word as usize);
            assert_eq!(mask, 1 << bit);
            assert_eq!(index.slot(fp), (i as u64) * 32 + u64::from(bit));
            assert_eq!(index.word_index(fp), i);
        }
    }

    #[test]
    fn every_size_maps_into_range_and_is_a_bijection_of_the_low_bits() {
        for s in 5..=20 {
            let index = BitmapIndex::new(s);
            let mut by_low = std::collections::HashMap::new();
            let mut by_slot = std::collections::HashMap::new();
            for fp in 0..3000u64 {
                let slot = index.slot(fp);
                assert!(slot < index.num_bits());
                let low = u64::from(index.value(fp)) & ((1 << s) - 1);
                // The slot is a bijection of the value's low s bits.
                assert_eq!(*by_low.entry(low).or_insert(slot), slot);
                assert_eq!(*by_slot.entry(slot).or_insert(low), low);
            }
        }
        assert!(BitmapIndex::try_new(4, 0).is_err());
        assert!(BitmapIndex::try_new(33, 0).is_err());
    }

    #[test]
    fn insert_word_and_clear() {
        let mut index = BitmapIndex::new(10);
        assert!(!index.insert(42));
        assert!(index.insert(42));
        assert_ne!(index.word(index.word_index(42)), 0);
        assert_eq!(index.count_ones(), 1);
        assert_eq!(index.len(), 1);
        index.clear();
        assert!(!index.contains(42));
        assert!(index.is_empty());
    }
}
