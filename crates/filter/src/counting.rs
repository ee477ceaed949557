//! The counting Bloom filter of seed 004 (IMP-CB): 4-bit saturating counters, so that URLs can
//! be forgotten.

use std::fmt;
use std::io::{self, Read, Write};

use crate::bloom::Probes;
use crate::codec::{self, Decoder, Encoder, FilterKind, Header};
use crate::{Error, Filter, MAX_BITS, MAX_HASHES, plan};

/// The value at which a counter saturates (2^4 − 1) and stops counting.
pub const SATURATED: u8 = 15;

/// A counting Bloom filter (seed 004): m counters of 4 bits, k probes per item by the same
/// double hashing as [`BloomFilter`](crate::BloomFilter). An item is present when all its k
/// counters are non-zero; removing it decrements them.
///
/// Counters saturate at 15 and then stay there (seed 004's overflow rule): a saturated counter
/// no longer knows how many items use it, so [`remove`](Self::remove) asks the caller (who keeps
/// the fingerprint store) to recount it. With 4-bit counters, P(any counter ≥ 16) ≤
/// 1.37·10⁻¹⁵·m at the optimal k, so this is rare.
///
/// Layout: counter `i` is the low nibble of byte `i / 2` if `i` is even, the high nibble if odd
/// (two counters per byte; an odd m leaves the last high nibble 0).
///
/// # Examples
/// ```
/// use urlseen_filter::CountingBloom;
/// let mut f = CountingBloom::with_capacity(10_000, 0.01, 3);
/// assert!(!f.insert(10));
/// assert!(!f.insert(20));
/// f.remove(10, |_| 0).unwrap();
/// assert!(!f.contains(10));
/// assert!(f.contains(20));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct CountingBloom {
    nibbles: Vec<u8>,
    num_counters: u64,
    num_hashes: u32,
    seed: u64,
    len: u64,
}

impl fmt::Debug for CountingBloom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountingBloom")
            .field("num_counters", &self.num_counters)
            .field("num_hashes", &self.num_hashes)
            .field("seed", &self.seed)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl CountingBloom {
    /// An empty filter of `num_counters` counters with `num_hashes` probes per item.
    ///
    /// # Panics
    /// If `num_counters` is not in `1..=MAX_BITS` or `num_hashes` not in `1..=MAX_HASHES`
    /// (see [`try_new`](Self::try_new)).
    #[must_use]
    #[track_caller]
    pub fn new(num_counters: u64, num_hashes: u32, seed: u64) -> Self {
        match Self::try_new(num_counters, num_hashes, seed) {
            Ok(f) => f,
            Err(e) => panic!("{e}"),
        }
    }

    /// Like [`new`](Self::new), but returns an error for out-of-range parameters.
    ///
    /// # Errors
    /// [`Error::Bits`] (for the counter count) or [`Error::Hashes`].
    pub fn try_new(num_counters: u64, num_hashes: u32, seed: u64) -> Result<Self, Error> {
        crate::check_params(num_counters, num_hashes)?;
        let bytes = usize::try_from(num_counters.div_ceil(2))
            .map_err(|_| Error::Bits { bits: num_counters })?;
        Ok(CountingBloom { nibbles: vec![0; bytes], num_counters, num_hashes, seed, len: 0 })
    }

    /// A filter sized like a classic one for `n` items at rate `p` (one counter per bit):
    /// m = [`plan::bloom_bits`]`(n, p)`, k = [`plan::optimal_hashes`]`(m, n)`.
    ///
    /// # Panics
    /// If `p` is not strictly between 0 and 1, or m would exceed [`MAX_BITS`].
    #[must_use]
    #[track_caller]
    pub fn with_capacity(n: u64, p: f64, seed: u64) -> Self {
        crate::assert_fpr(p);
        let n = n.max(1);
        let m = plan::bloom_bits(n, p);
        Self::new(m, plan::optimal_hashes(m, n), seed)
    }

    /// The k counter indices of `fp` (for the fingerprint store to record, as seed 004 does).
    /// An index may repeat; a repeated index is counted once per occurrence.
    pub fn positions(&self, fp: u64) -> impl Iterator<Item = u64> + use<> {
        Probes::new(fp, self.seed, self.num_counters, self.num_hashes)
    }

    /// How many of `fp`'s probes land on counter `pos` (usually 0 or 1): what one stored
    /// fingerprint contributes to that counter when the caller recounts it for
    /// [`remove`](Self::remove).
    #[must_use]
    pub fn multiplicity(&self, fp: u64, pos: u64) -> u8 {
        self.positions(fp).filter(|&p| p == pos).count() as u8
    }

    /// The value of counter `pos` (0..=15).
    ///
    /// # Panics
    /// If `pos >= num_counters()`.
    #[must_use]
    pub fn counter(&self, pos: u64) -> u8 {
        assert!(pos < self.num_counters, "counter {pos} out of range");
        (self.nibbles[(pos >> 1) as usize] >> ((pos & 1) * 4)) & 0x0F
    }

    fn set_counter(&mut self, pos: u64, value: u8) {
        let byte = &mut self.nibbles[(pos >> 1) as usize];
        let shift = (pos & 1) * 4;
        *byte = (*byte & !(0x0F << shift)) | ((value & 0x0F) << shift);
    }

    /// The k positions of `fp` in a stack array.
    fn probe_array(&self, fp: u64) -> ([u64; MAX_HASHES as usize], usize) {
        let mut out = [0u64; MAX_HASHES as usize];
        let mut n = 0;
        for (slot, p) in out.iter_mut().zip(self.positions(fp)) {
            *slot = p;
            n += 1;
        }
        (out, n)
    }

    /// Whether `fp` is maybe present: all its counters are non-zero.
    #[must_use]
    pub fn contains(&self, fp: u64) -> bool {
        self.positions(fp).all(|p| self.counter(p) != 0)
    }

    /// Increments `fp`'s k counters unconditionally (saturated ones stay at 15) and counts it in
    /// [`len`](Self::len). Use it when the fingerprint store says the item is new although all
    /// counters were non-zero (a false positive of the filter); otherwise prefer
    /// [`insert`](Self::insert).
    pub fn add(&mut self, fp: u64) {
        let (pos, k) = self.probe_array(fp);
        for &p in &pos[..k] {
            let c = self.counter(p);
            if c < SATURATED {
                self.set_counter(p, c + 1);
            }
        }
        self.len += 1;
    }

    /// Check-and-add: if any of `fp`'s counters is 0, [`add`](Self::add)s it and returns `false`
    /// (new); if all are non-zero, changes nothing and returns `true` (maybe present: seed 004
    /// then asks the fingerprint store, and calls `add` if the store does not know it).
    pub fn insert(&mut self, fp: u64) -> bool {
        if self.contains(fp) {
            return true;
        }
        self.add(fp);
        false
    }

    /// Removes `fp`: decrements each of its counters, except that a saturated counter (15) is
    /// set to `min(recount(position), 15)`, where `recount` returns how many probes of the
    /// fingerprints still stored use that position, *excluding* `fp` (see
    /// [`multiplicity`](Self::multiplicity)). `recount` is called at most once per distinct
    /// saturated position.
    ///
    /// Removing a fingerprint that was never added corrupts other items' counters (and can
    /// cause false negatives): the caller's fingerprint store decides what may be removed.
    ///
    /// # Errors
    /// [`Error::NotPresent`] if any counter of `fp` is 0; nothing changes then.
    pub fn remove(&mut self, fp: u64, mut recount: impl FnMut(u64) -> u8) -> Result<(), Error> {
        let (pos, k) = self.probe_array(fp);
        let pos = &pos[..k];
        if pos.iter().any(|&p| self.counter(p) == 0) {
            return Err(Error::NotPresent);
        }
        let mut saturated = [false; MAX_HASHES as usize];
        for (flag, &p) in saturated.iter_mut().zip(pos) {
            *flag = self.counter(p) == SATURATED;
        }
        for (i, &p) in pos.iter().enumerate() {
            if saturated[i] {
                if !pos[..i].contains(&p) {
                    let exact = recount(p).min(SATURATED);
                    self.set_counter(p, exact);
                }
            } else {
                let c = self.counter(p);
                self.set_counter(p, c.saturating_sub(1));
            }
        }
        self.len = self.len.saturating_sub(1);
        Ok(())
    }

    /// The number of counters at 15.
    #[must_use]
    pub fn saturated_count(&self) -> u64 {
        self.nibbles
            .iter()
            .map(|&b| u64::from(b & 0x0F == SATURATED) + u64::from(b >> 4 == SATURATED))
            .sum()
    }

    /// The number of counters that are not 0.
    #[must_use]
    pub fn count_nonzero(&self) -> u64 {
        self.nibbles.iter().map(|&b| u64::from(b & 0x0F != 0) + u64::from(b >> 4 != 0)).sum()
    }

    /// The fraction of counters that are not 0.
    #[must_use]
    pub fn fill_ratio(&self) -> f64 {
        self.count_nonzero() as f64 / self.num_counters as f64
    }

    /// The false-positive rate expected at the current [`len`](Self::len), formula (1).
    #[must_use]
    pub fn estimated_fpr(&self) -> f64 {
        plan::classic_fpr(self.num_counters, self.num_hashes, self.len)
    }

    /// The number of counters m.
    #[must_use]
    pub fn num_counters(&self) -> u64 {
        self.num_counters
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

    /// Items added (by [`add`](Self::add) or a new [`insert`](Self::insert)) minus items removed.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the filter holds no item.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Heap memory of the counters, in bytes.
    #[must_use]
    pub fn memory_bytes(&self) -> usize {
        self.nibbles.capacity()
    }

    /// Removes every item.
    pub fn clear(&mut self) {
        self.nibbles.fill(0);
        self.len = 0;
    }

    /// Writes the encoding (see [`codec`]): num_bits = the number of counters; payload =
    /// ⌈m/2⌉ bytes, two counters per byte, low nibble first.
    ///
    /// # Errors
    /// Any error of `w`.
    pub fn write_to<W: Write>(&self, mut w: W) -> io::Result<()> {
        let header = Header {
            kind: FilterKind::Counting,
            num_hashes: self.num_hashes,
            num_bits: self.num_counters,
            seed: self.seed,
            len: self.len,
            payload_len: self.nibbles.len() as u64,
        };
        let mut e = Encoder::new(&mut w, header)?;
        e.bytes(&self.nibbles)?;
        e.finish()
    }

    /// The encoding as bytes (see [`write_to`](Self::write_to)).
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(codec::HEADER_LEN + self.nibbles.len() + 8);
        // Writing to a Vec cannot fail.
        let _ = self.write_to(&mut out);
        out
    }

    /// Reads and fully validates an encoding written by [`write_to`](Self::write_to).
    ///
    /// # Errors
    /// An [`Error`] as for the other filters.
    pub fn read_from<R: Read>(mut r: R) -> Result<Self, Error> {
        Self::read_decoder(Decoder::new(&mut r, FilterKind::Counting)?)
    }

    /// Decodes exactly one filter from `bytes` (trailing bytes are an error).
    ///
    /// # Errors
    /// As [`read_from`](Self::read_from), plus [`Error::TrailingBytes`].
    pub fn decode(bytes: &[u8]) -> Result<Self, Error> {
        codec::decode_slice(bytes, FilterKind::Counting, Self::read_decoder)
    }

    fn read_decoder<R: Read>(mut d: Decoder<'_, R>) -> Result<Self, Error> {
        let h = d.header;
        if !(1..=MAX_BITS).contains(&h.num_bits) {
            return Err(codec::invalid("num_bits", h.num_bits, "must be in 1..=2^40"));
        }
        if !(1..=MAX_HASHES).contains(&h.num_hashes) {
            return Err(codec::invalid("num_hashes", h.num_hashes.into(), "must be in 1..=64"));
        }
        let bytes = h.num_bits.div_ceil(2);
        d.check_payload_len(bytes)?;
        let nibbles = d.bytes(bytes)?;
        d.finish()?;
        if h.num_bits % 2 == 1 && nibbles.last().is_some_and(|&b| b >> 4 != 0) {
            return Err(codec::invalid("padding", h.num_bits, "the unused last nibble is set"));
        }
        Ok(CountingBloom {
            nibbles,
            num_counters: h.num_bits,
            num_hashes: h.num_hashes,
            seed: h.seed,
            len: h.len,
        })
    }
}

impl Filter for CountingBloom {
    fn insert(&mut self, fp: u64) -> bool {
        CountingBloom::insert(self, fp)
    }
    fn contains(&self, fp: u64) -> bool {
        CountingBloom::contains(self, fp)
    }
    fn num_bits(&self) -> u64 {
        self.num_counters * 4
    }
    fn num_hashes(&self) -> u32 {
        self.num_hashes
    }
    fn memory_bytes(&self) -> usize {
        CountingBloom::memory_bytes(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nibbles_are_independent() {
        let mut f = CountingBloom::new(5, 1, 0);
        for p in 0..5 {
            f.set_counter(p, (p as u8 * 3) % 16);
        }
        for p in 0..5 {
            assert_eq!(f.counter(p), (p as u8 * 3) % 16);
        }
        assert_eq!(f.nibbles.len(), 3);
        assert_eq!(f.nibbles[2] >> 4, 0);
    }

    #[test]
    fn not_present_changes_nothing() {
        let mut f = CountingBloom::new(1000, 4, 0);
        f.insert(1);
        let before = f.clone();
        assert!(matches!(f.remove(2, |_| unreachable!()), Err(Error::NotPresent)));
        assert_eq!(f, before);
    }

    #[test]
    fn add_counts_duplicates_and_insert_does_not() {
        let mut f = CountingBloom::new(1000, 3, 0);
        assert!(!f.insert(9));
        assert!(f.insert(9));
        assert_eq!(f.len(), 1);
        f.add(9);
        assert_eq!(f.len(), 2);
        for p in f.positions(9) {
            assert_eq!(f.counter(p), 2 * f.multiplicity(9, p));
        }
    }
}
