//! Exact mode: confirm every Bloom positive against the fingerprints themselves, so the only
//! false positives left are 64-bit fingerprint collisions.
//!
//! An exact namespace over the DSBF confirms against each leaf's own records, sorted in its
//! [`LeafIndex`](crate::leaf_index::LeafIndex), behind seed 002's [`RecentCache`] (see
//! [`Dsbf::insert_batch_exact`](crate::tree::Dsbf::insert_batch_exact)). This module holds that
//! cache, and the store-based layers that counting namespaces use:
//!
//! Seed 002's layers, and seed 004's fingerprint database with reference counts and deletion:
//!
//! ```text
//! fp ─Bloom─▶ negative ──────────────────────────────▶ NEW   (record_new: store write, no read)
//!       └───▶ positive ─LRU hit───────────────────────▶ SEEN  (no store read)
//!                      └─LRU miss─store─┬─ found ─────▶ SEEN  (refcount + 1, LRU refreshed)
//!                                       └─ not found ─▶ NEW   (a Bloom false positive: record it)
//! ```
//!
//! - [`ExactIndex`] is the part behind any Bloom filter (a counting set's filters): the recent-URL
//!   [`FpLru`] and a [`FpStore`] ([`FingerprintStore`] on disk, [`MemStore`] in memory).
//! - [`CountingSet`] is seed 004's IMP-CB as a whole set: generations of counting Bloom filters
//!   in front of an [`ExactIndex`], growing by doubling (seed 002) and able to
//!   [`forget`](CountingSet::forget) (seed 004's recount of saturated counters).
//!
//! # The false-positive bound
//! Two different URLs are confused only if their 64-bit fingerprints are equal. With n URLs
//! recorded, a new URL collides with one of them with probability at most n / 2⁶⁴ (about
//! 5.4·10⁻¹¹ at n = 10⁹); over a whole crawl of n URLs, the chance of any collision at all is
//! about n² / 2⁶⁵ (2.7 % at n = 10⁹, 2.7·10⁻⁶ at n = 10⁷).
//!
//! # Examples
//! ```
//! use urlseen_engine::exact::{ExactIndex, ExactOptions};
//! let exact = ExactIndex::in_memory(ExactOptions::default());
//! exact.record_new(7)?; // a Bloom negative: new, recorded without a read
//! assert!(exact.confirm(7)?); // a Bloom positive that is real
//! assert!(!exact.confirm(8)?); // a Bloom false positive: the caller records it as new
//! assert!(exact.forget(7)?);
//! assert!(!exact.contains(7)?);
//! # Ok::<(), urlseen_engine::Error>(())
//! ```
//!
//! # Concurrency: exactly one "new"
//! Every call on one fingerprint is atomic (it holds the lock of the fingerprint's shard across
//! its store I/O), and [`ExactIndex::check_positive`] is a whole check-and-insert. But a Bloom
//! negative and a concurrent Bloom positive of the same new fingerprint race *across* the
//! filter and the index: the caller must call [`ExactIndex::record_new`] before it releases
//! the lock under which the filter said "negative" (the DSBF's leaf lock), or the positive
//! side can look in the store too early and also answer "new". [`CountingSet`] holds one lock
//! across both and needs nothing from its caller.

pub mod counting;
pub mod lru;
pub mod store;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};
use urlseen_filter::hash::mix64;

pub use counting::{CountingOptions, CountingSet, CountingStats, GenerationStats, PARAMS_FILE};
pub use lru::FpLru;
pub use store::{
    FingerprintStore, FpBuildHasher, FpHasher, FpStore, HEADER_FILE, MAGIC, MemStore, Record,
    Result, StoreDurability, StoreOptions, VALUE_ENCODING, VERSION,
};

/// Shards of the LRU (and locks of fingerprints) when the cache is big enough to share.
const SHARDS: usize = 16;
/// Below this capacity a single shard keeps the cache exactly LRU.
const SHARD_MIN_CAPACITY: usize = 4096;
const SHARD_SALT: u64 = 0x005E_ED0F_1A5E_u64;

/// How an [`ExactIndex`] behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExactOptions {
    /// Recent fingerprints kept in memory (seed 002's LRU); 0 disables the cache. About 45
    /// bytes an entry once full.
    pub lru_capacity: usize,
    /// Count references as seed 004 does: every Bloom positive that the *store* confirms adds
    /// 1 to the fingerprint's refcount (one store write per such duplicate). Hits answered by
    /// the LRU are not counted: the cache exists to avoid store I/O. Off: confirmations only
    /// read.
    pub count_references: bool,
}

impl Default for ExactOptions {
    /// 100,000 recent fingerprints (about 5 MB), reference counting on.
    fn default() -> Self {
        ExactOptions { lru_capacity: 100_000, count_references: true }
    }
}

/// Counters of an [`ExactIndex`] since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExactStats {
    /// Bloom positives (or `contains`) answered by the LRU.
    pub lru_hits: u64,
    /// Point reads of the store.
    pub store_reads: u64,
    /// Store reads that found the fingerprint.
    pub store_hits: u64,
    /// Write batches sent to the store (records, refcount updates, removals).
    pub store_writes: u64,
    /// Fingerprints recorded as new.
    pub recorded: u64,
    /// Fingerprints removed by `forget`.
    pub forgotten: u64,
    /// Fingerprints in the store now.
    pub stored: u64,
    /// Fingerprints in the LRU now.
    pub lru_len: u64,
    /// The LRU's capacity.
    pub lru_capacity: u64,
    /// Heap memory of the LRU, in bytes.
    pub lru_memory_bytes: u64,
}

#[derive(Debug, Default)]
struct Counters {
    lru_hits: AtomicU64,
    store_reads: AtomicU64,
    store_hits: AtomicU64,
    store_writes: AtomicU64,
    recorded: AtomicU64,
    forgotten: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// Seed 002's cache of recent fingerprints: an LRU, sharded when it is big enough to share.
///
/// Exact mode over a DSBF keeps one in front of the leaf indexes (see
/// [`Dsbf::insert_batch_exact`](crate::tree::Dsbf::insert_batch_exact)); an [`ExactIndex`] keeps
/// one in front of its store.
#[derive(Debug)]
pub struct RecentCache {
    shards: Box<[Mutex<FpLru>]>,
    hits: AtomicU64,
}

impl RecentCache {
    /// A cache of `capacity` fingerprints (0: none).
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        let n = if capacity >= SHARD_MIN_CAPACITY { SHARDS } else { 1 };
        let per_shard = capacity.div_ceil(n);
        let shards = (0..n).map(|_| Mutex::new(FpLru::new(per_shard))).collect();
        RecentCache { shards, hits: AtomicU64::new(0) }
    }

    /// The shard of `fp`, locked.
    fn shard(&self, fp: u64) -> MutexGuard<'_, FpLru> {
        let i = if self.shards.len() == 1 {
            0
        } else {
            (mix64(fp ^ SHARD_SALT) >> 60) as usize % self.shards.len()
        };
        self.shards[i].lock()
    }

    /// Whether `fp` is cached; a hit is refreshed and counted.
    pub fn touch(&self, fp: u64) -> bool {
        let hit = self.shard(fp).touch(fp);
        bump(&self.hits, u64::from(hit));
        hit
    }

    /// Caches `fp`, evicting the least recently used if full.
    pub fn insert(&self, fp: u64) {
        self.shard(fp).insert(fp);
    }

    /// Empties the cache (after a forget: a fingerprint here is one known to be recorded).
    pub fn clear(&self) {
        for shard in &*self.shards {
            shard.lock().clear();
        }
    }

    /// Hits since the cache was made.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Entries now, capacity, and heap bytes.
    pub fn sizes(&self) -> (u64, u64, u64) {
        let (mut len, mut capacity, mut memory) = (0, 0, 0);
        for shard in &*self.shards {
            let lru = shard.lock();
            len += lru.len() as u64;
            capacity += lru.capacity() as u64;
            memory += lru.memory_bytes() as u64;
        }
        (len, capacity, memory)
    }
}

/// Seed 002's exact layer behind a Bloom filter: an LRU of recent fingerprints, then a
/// fingerprint store with reference counts (seed 004). See the [module docs](self).
///
/// Thread-safe (`&self`); see the module docs for the one ordering rule a caller must keep.
#[derive(Debug)]
pub struct ExactIndex {
    store: Box<dyn FpStore>,
    /// The LRU; its shard locks also make every call on one fingerprint atomic.
    recent: RecentCache,
    count_references: bool,
    counters: Counters,
}

impl ExactIndex {
    /// An index over `store`.
    #[must_use]
    pub fn new(store: Box<dyn FpStore>, options: ExactOptions) -> Self {
        ExactIndex {
            store,
            recent: RecentCache::new(options.lru_capacity),
            count_references: options.count_references,
            counters: Counters::default(),
        }
    }

    /// An index over a fresh [`MemStore`].
    #[must_use]
    pub fn in_memory(options: ExactOptions) -> Self {
        Self::new(Box::new(MemStore::new()), options)
    }

    /// An index over the [`FingerprintStore`] in `dir` (created if missing).
    ///
    /// # Errors
    /// As [`FingerprintStore::open`].
    pub fn open(dir: &Path, durability: StoreDurability, options: ExactOptions) -> Result<Self> {
        Ok(Self::new(Box::new(FingerprintStore::open(dir, durability)?), options))
    }

    /// The store.
    #[must_use]
    pub fn store(&self) -> &dyn FpStore {
        &*self.store
    }

    /// The shard of `fp`, locked: its LRU, and the lock that makes calls on `fp` atomic.
    fn shard(&self, fp: u64) -> MutexGuard<'_, FpLru> {
        self.recent.shard(fp)
    }

    /// Seed 002's decision for a Bloom positive: is `fp` truly recorded?
    ///
    /// An LRU hit says yes (and refreshes it). Otherwise the store decides: found → yes, the
    /// LRU learns it, and with [`ExactOptions::count_references`] its refcount grows by 1
    /// (seed 004); not found → no, and nothing changes: the caller records it as new with
    /// [`record_new`](Self::record_new) (or use [`check_positive`](Self::check_positive)).
    ///
    /// # Errors
    /// The store's.
    pub fn confirm(&self, fp: u64) -> Result<bool> {
        let mut lru = self.shard(fp);
        self.confirm_locked(&mut lru, fp)
    }

    fn confirm_locked(&self, lru: &mut FpLru, fp: u64) -> Result<bool> {
        if lru.touch(fp) {
            bump(&self.counters.lru_hits, 1);
            return Ok(true);
        }
        bump(&self.counters.store_reads, 1);
        let Some(record) = self.store.get_record(fp)? else { return Ok(false) };
        bump(&self.counters.store_hits, 1);
        if self.count_references {
            let refcount = record.refcount.saturating_add(1);
            self.store.update_record(fp, Record { refcount, ..record })?;
            bump(&self.counters.store_writes, 1);
        }
        lru.insert(fp);
        Ok(true)
    }

    /// Check-and-insert for a Bloom positive, atomic for `fp`: [`confirm`](Self::confirm), and
    /// if the store does not know `fp`, record it. Returns whether `fp` was seen. Of concurrent
    /// calls for one new `fp`, exactly one returns `false`.
    ///
    /// # Errors
    /// The store's; on error `fp` may or may not be recorded.
    pub fn check_positive(&self, fp: u64) -> Result<bool> {
        let mut lru = self.shard(fp);
        if self.confirm_locked(&mut lru, fp)? {
            return Ok(true);
        }
        self.record_locked(&mut lru, fp, 0)?;
        Ok(false)
    }

    /// Records a new `fp` (a Bloom negative, or a positive the store rejected): one store
    /// write with refcount 1, no read; the LRU learns it.
    ///
    /// # Errors
    /// The store's; on error `fp` is not recorded.
    pub fn record_new(&self, fp: u64) -> Result<()> {
        self.record_new_in(fp, 0)
    }

    /// [`record_new`](Self::record_new) with the filter generation to keep in its record
    /// (for [`CountingSet`]).
    ///
    /// # Errors
    /// As [`record_new`](Self::record_new).
    pub fn record_new_in(&self, fp: u64, generation: u32) -> Result<()> {
        let mut lru = self.shard(fp);
        self.record_locked(&mut lru, fp, generation)
    }

    fn record_locked(&self, lru: &mut FpLru, fp: u64, generation: u32) -> Result<()> {
        self.store.insert_many_in(&[fp], generation)?;
        bump(&self.counters.store_writes, 1);
        bump(&self.counters.recorded, 1);
        lru.insert(fp);
        Ok(())
    }

    /// Records many new, distinct fingerprints in **one** store write (one fsync under
    /// [`StoreDurability::Always`]: group commit for a batch).
    ///
    /// # Errors
    /// The store's; on error none of them may be assumed recorded.
    pub fn record_new_many(&self, fps: &[u64]) -> Result<()> {
        self.record_new_many_in(fps, 0)
    }

    /// [`record_new_many`](Self::record_new_many) with a generation.
    ///
    /// # Errors
    /// As [`record_new_many`](Self::record_new_many).
    pub fn record_new_many_in(&self, fps: &[u64], generation: u32) -> Result<()> {
        self.record_new_many_hosts_in(fps, &[], generation)
    }

    /// [`record_new_many_in`](Self::record_new_many_in), each record keeping `hosts[i]`, the
    /// hash of its URL's host (empty: unknown).
    ///
    /// # Errors
    /// As [`record_new_many`](Self::record_new_many).
    pub fn record_new_many_hosts_in(
        &self,
        fps: &[u64],
        hosts: &[u32],
        generation: u32,
    ) -> Result<()> {
        if fps.is_empty() {
            return Ok(());
        }
        self.store.insert_many_hosts_in(fps, hosts, generation)?;
        bump(&self.counters.store_writes, 1);
        bump(&self.counters.recorded, fps.len() as u64);
        for &fp in fps {
            self.shard(fp).insert(fp);
        }
        Ok(())
    }

    /// Whether `fp` is recorded, changing nothing (no LRU refresh, no refcount).
    ///
    /// # Errors
    /// The store's.
    pub fn contains(&self, fp: u64) -> Result<bool> {
        let lru = self.shard(fp);
        if lru.contains(fp) {
            bump(&self.counters.lru_hits, 1);
            return Ok(true);
        }
        bump(&self.counters.store_reads, 1);
        let found = self.store.get_record(fp)?.is_some();
        bump(&self.counters.store_hits, u64::from(found));
        Ok(found)
    }

    /// The stored record of `fp` (refcount and generation), reading the store.
    ///
    /// # Errors
    /// The store's.
    pub fn record(&self, fp: u64) -> Result<Option<Record>> {
        let _lock = self.shard(fp);
        bump(&self.counters.store_reads, 1);
        self.store.get_record(fp)
    }

    /// Forgets `fp`: removes it from the LRU and the store. Returns whether it was recorded.
    /// After this a Bloom positive for `fp` is no longer confirmed: `fp` is new again.
    ///
    /// # Errors
    /// The store's.
    pub fn forget(&self, fp: u64) -> Result<bool> {
        Ok(self.forget_record(fp)?.is_some())
    }

    /// [`forget`](Self::forget), returning the record `fp` had.
    ///
    /// # Errors
    /// The store's.
    pub fn forget_record(&self, fp: u64) -> Result<Option<Record>> {
        let mut lru = self.shard(fp);
        lru.remove(fp);
        let old = self.store.remove_record(fp)?;
        bump(&self.counters.store_writes, u64::from(old.is_some()));
        bump(&self.counters.forgotten, u64::from(old.is_some()));
        Ok(old)
    }

    /// The number of recorded fingerprints.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.store.len()
    }

    /// Whether nothing is recorded.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }

    /// Makes every write so far durable.
    ///
    /// # Errors
    /// The store's; a failed sync poisons a [`FingerprintStore`].
    pub fn sync(&self) -> Result<()> {
        self.store.sync()
    }

    /// Counters since the index was opened, and sizes now.
    #[must_use]
    pub fn stats(&self) -> ExactStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (lru_len, lru_capacity, lru_memory_bytes) = self.recent.sizes();
        ExactStats {
            lru_hits: get(&c.lru_hits),
            store_reads: get(&c.store_reads),
            store_hits: get(&c.store_hits),
            store_writes: get(&c.store_writes),
            recorded: get(&c.recorded),
            forgotten: get(&c.forgotten),
            stored: self.store.len(),
            lru_len,
            lru_capacity,
            lru_memory_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_answers_recent_positives_without_reads() {
        let exact =
            ExactIndex::in_memory(ExactOptions { lru_capacity: 10, count_references: true });
        exact.record_new(1).unwrap();
        assert!(exact.confirm(1).unwrap());
        let s = exact.stats();
        assert_eq!((s.lru_hits, s.store_reads, s.recorded), (1, 0, 1));
        assert_eq!(exact.store().get(1).unwrap(), Some(1), "LRU hits do not count references");
    }

    #[test]
    fn store_confirms_and_counts_references() {
        let exact = ExactIndex::in_memory(ExactOptions { lru_capacity: 0, count_references: true });
        exact.record_new(1).unwrap();
        assert!(exact.confirm(1).unwrap());
        assert!(exact.confirm(1).unwrap());
        assert!(!exact.confirm(2).unwrap());
        assert_eq!(exact.store().get(1).unwrap(), Some(3));
        let s = exact.stats();
        assert_eq!((s.lru_hits, s.store_reads, s.store_hits), (0, 3, 2));
        assert!(!exact.check_positive(2).unwrap());
        assert!(exact.check_positive(2).unwrap());
        assert_eq!(exact.len(), 2);
    }

    #[test]
    fn no_reference_counting_means_no_writes_on_hits() {
        let exact =
            ExactIndex::in_memory(ExactOptions { lru_capacity: 0, count_references: false });
        exact.record_new_many(&[1, 2, 3]).unwrap();
        for _ in 0..3 {
            assert!(exact.confirm(2).unwrap());
        }
        assert_eq!(exact.store().get(2).unwrap(), Some(1));
        assert_eq!(exact.stats().store_writes, 1);
    }

    #[test]
    fn forget_clears_lru_and_store() {
        let exact = ExactIndex::in_memory(ExactOptions::default());
        exact.record_new_in(9, 3).unwrap();
        assert_eq!(exact.record(9).unwrap(), Some(Record::new(3)));
        assert_eq!(exact.forget_record(9).unwrap(), Some(Record::new(3)));
        assert!(!exact.contains(9).unwrap());
        assert!(!exact.confirm(9).unwrap());
        assert!(!exact.forget(9).unwrap());
        assert!(exact.is_empty());
    }

    #[test]
    fn sharded_lru_has_the_capacity_asked() {
        let exact =
            ExactIndex::in_memory(ExactOptions { lru_capacity: 10_000, ..Default::default() });
        let s = exact.stats();
        assert!(s.lru_capacity >= 10_000 && s.lru_capacity < 10_000 + SHARDS as u64);
    }
}
