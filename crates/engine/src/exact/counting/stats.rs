//! What a counting set reports: its generations' fill and the work its counters did.
use super::{AtomicU64, CountingSet, ExactStats, Ordering};

/// One generation's figures.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GenerationStats {
    /// Fingerprints it is sized for.
    pub capacity: u64,
    /// Fingerprints added to it and not forgotten.
    pub len: u64,
    /// Counters (m).
    pub counters: u64,
    /// Probes per fingerprint (k).
    pub hashes: u32,
    /// Counters at 15.
    pub saturated: u64,
    /// Fraction of counters above 0.
    pub fill: f64,
    /// Its false-positive rate at its length, formula (1).
    pub estimated_fpr: f64,
    /// Bytes of counters.
    pub memory_bytes: u64,
}

/// What a [`CountingSet`] holds and did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CountingStats {
    /// Per generation, oldest first (the last is active).
    pub generations: Vec<GenerationStats>,
    /// Fingerprints recorded (in the store).
    pub len: u64,
    /// Counters at 15, over all generations.
    pub saturated_counters: u64,
    /// The rate at which the filters send a new fingerprint to the store: 1 − Π(1 − f_g).
    pub filter_fpr: f64,
    /// Bytes of counters, over all generations.
    pub filter_memory_bytes: u64,
    /// Bytes of counters plus the LRU (the store's memory not included).
    pub memory_bytes: u64,
    /// Fingerprints the filters declared new with no store read (since opened).
    pub definitely_new: u64,
    /// Fingerprints the filters sent to the LRU and store.
    pub filter_positives: u64,
    /// Of those, the ones the store did not know: filter false positives, recorded as new.
    pub false_positives: u64,
    /// Saturated counters recounted from the store by `forget`.
    pub recounted_counters: u64,
    /// Store scans `forget` made to recount them.
    pub recount_scans: u64,
    /// The exact index's counters.
    pub exact: ExactStats,
}

impl CountingSet {
    /// RAM held (the filters and the LRU) and the filters' share, without scanning a counter:
    /// [`Self::stats`]'s `memory_bytes` and `filter_memory_bytes`, in O(generations).
    #[must_use]
    pub fn memory_bytes(&self) -> (u64, u64) {
        let filters: u64 = self.generations.lock().iter().map(|f| f.memory_bytes() as u64).sum();
        (filters + self.exact.stats().lru_memory_bytes, filters)
    }

    /// Generations, counts, saturated counters and memory (scans the counters: O(m)).
    #[must_use]
    pub fn stats(&self) -> CountingStats {
        let gens = self.generations.lock();
        let generations: Vec<GenerationStats> = gens
            .iter()
            .enumerate()
            .map(|(g, f)| GenerationStats {
                capacity: self.options.generation_capacity(g as u32).unwrap_or(u64::MAX),
                len: f.len(),
                counters: f.num_counters(),
                hashes: f.num_hashes(),
                saturated: f.saturated_count(),
                fill: f.fill_ratio(),
                estimated_fpr: f.estimated_fpr(),
                memory_bytes: f.memory_bytes() as u64,
            })
            .collect();
        drop(gens);
        let exact = self.exact.stats();
        let filter_memory_bytes = generations.iter().map(|g| g.memory_bytes).sum();
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CountingStats {
            len: exact.stored,
            saturated_counters: generations.iter().map(|g| g.saturated).sum(),
            filter_fpr: 1.0 - generations.iter().map(|g| 1.0 - g.estimated_fpr).product::<f64>(),
            filter_memory_bytes,
            memory_bytes: filter_memory_bytes + exact.lru_memory_bytes,
            definitely_new: get(&c.definitely_new),
            filter_positives: get(&c.filter_positives),
            false_positives: get(&c.false_positives),
            recounted_counters: get(&c.recounted_counters),
            recount_scans: get(&c.recount_scans),
            generations,
            exact,
        }
    }
}
