//! A counting set's shape ([`CountingOptions`]): its generations' sizes and seeds, checked, and
//! the small parameters file that fixes them on disk.
use super::{
    CountingBloom, Error, ExactOptions, Format, GOLDEN, MAX_BITS, MAX_HASHES, Path, Result, plan,
};

/// The params file's framing (its version a `u32`, as the store header's).
pub(super) const PARAMS_FORMAT: Format =
    Format { name: "counting parameters", magic: *b"USCOUNTS", version: 1, oldest: 1 };

pub(super) const PARAMS_LEN: usize = 48;

/// The shape of a [`CountingSet`](super::CountingSet).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CountingOptions {
    /// Fingerprints generation 0 holds before a generation twice as large is added.
    pub capacity: u64,
    /// Counters per fingerprint of capacity, m/n (seed 004's experiment: 20).
    pub counters_per_item: f64,
    /// Counters per fingerprint, k (seed 004's experiment: 8).
    pub hashes: u32,
    /// Seed of the counter positions (generation g uses `seed ^ g·φ`).
    pub seed: u64,
    /// The LRU and reference counting of the [`ExactIndex`](super::ExactIndex) behind the filters.
    pub exact: ExactOptions,
}

impl Default for CountingOptions {
    /// Seed 004's experiment: k = 8, m/n = 20 (4-bit counters: 10 bytes a fingerprint), first
    /// generation 1,000,000 fingerprints.
    fn default() -> Self {
        CountingOptions {
            capacity: 1_000_000,
            counters_per_item: 20.0,
            hashes: 8,
            seed: crate::DEFAULT_SEED,
            exact: ExactOptions::default(),
        }
    }
}

impl CountingOptions {
    /// Sized like a classic Bloom filter for `capacity` fingerprints at false-positive rate
    /// `fpr` (one counter per bit): m/n and k from [`plan`]. Exact mode makes the rate a cost
    /// (store reads), not an error.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] unless 0 < `fpr` < 1 and `capacity` ≥ 1.
    pub fn with_fpr(capacity: u64, fpr: f64) -> Result<Self> {
        if !(fpr > 0.0 && fpr < 1.0) {
            return Err(invalid("fpr", format!("must be strictly between 0 and 1, got {fpr}")));
        }
        if capacity == 0 {
            return Err(invalid("capacity", "must be at least 1".into()));
        }
        let m = plan::bloom_bits(capacity, fpr);
        Ok(CountingOptions {
            capacity,
            counters_per_item: m as f64 / capacity as f64,
            hashes: plan::optimal_hashes(m, capacity),
            ..Self::default()
        })
    }

    pub(super) fn validate(&self) -> Result<()> {
        if self.capacity == 0 {
            return Err(invalid("capacity", "must be at least 1".into()));
        }
        if !(self.counters_per_item.is_finite() && self.counters_per_item > 0.0) {
            return Err(invalid(
                "counters_per_item",
                format!("must be > 0, got {}", self.counters_per_item),
            ));
        }
        if !(1..=MAX_HASHES).contains(&self.hashes) {
            return Err(invalid(
                "hashes",
                format!("must be in 1..={MAX_HASHES}, got {}", self.hashes),
            ));
        }
        match self.generation_counters(0) {
            Some(m) if m <= MAX_BITS => Ok(()),
            _ => Err(invalid("capacity", "the first generation would exceed 2^40 counters".into())),
        }
    }

    /// The capacity of generation `g`: `capacity · 2^g`.
    #[must_use]
    pub fn generation_capacity(&self, g: u32) -> Option<u64> {
        self.capacity.checked_mul(1u64.checked_shl(g)?)
    }

    pub(super) fn generation_counters(&self, g: u32) -> Option<u64> {
        let m = (self.generation_capacity(g)? as f64 * self.counters_per_item).ceil();
        (m < MAX_BITS as f64 * 2.0).then_some((m as u64).max(1))
    }

    pub(super) fn generation_seed(&self, g: u32) -> u64 {
        self.seed ^ u64::from(g).wrapping_mul(GOLDEN)
    }

    pub(super) fn new_generation(&self, g: u32) -> Option<CountingBloom> {
        let m = self.generation_counters(g)?;
        CountingBloom::try_new(m, self.hashes, self.generation_seed(g)).ok()
    }

    pub(super) fn encode(&self) -> [u8; PARAMS_LEN] {
        let mut b = [0u8; PARAMS_LEN];
        b[..urlseen_filter::frame::HEADER_LEN].copy_from_slice(&PARAMS_FORMAT.header());
        b[12..16].copy_from_slice(&self.hashes.to_le_bytes());
        b[16..24].copy_from_slice(&self.capacity.to_le_bytes());
        b[24..32].copy_from_slice(&self.counters_per_item.to_bits().to_le_bytes());
        b[32..40].copy_from_slice(&self.seed.to_le_bytes());
        let sum = urlseen_filter::frame::checksum(&b[..40]);
        b[40..].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Decodes the geometry from a params file into `self` (keeping `exact`).
    pub(super) fn decode_into(mut self, path: &Path, bytes: &[u8]) -> Result<Self> {
        crate::exact::store::check_fixed(&PARAMS_FORMAT, path, bytes, PARAMS_LEN)?;
        let u64_at = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[i..i + 8]);
            u64::from_le_bytes(w)
        };
        self.hashes = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
        self.capacity = u64_at(16);
        self.counters_per_item = f64::from_bits(u64_at(24));
        self.seed = u64_at(32);
        self.validate()
            .map_err(|e| Error::Corrupt { path: path.to_path_buf(), reason: e.to_string() })?;
        Ok(self)
    }
}

pub(super) fn invalid(name: &'static str, reason: String) -> Error {
    Error::InvalidOption { name, reason }
}
