//! Seed 004's IMP-CB as a growable set that can forget: generations of counting Bloom filters
//! in front of an [`ExactIndex`].
//!
//! # The flow of one fingerprint (seed 004)
//! ```text
//! fp ─k counter positions per generation─▶ some counter 0 in every generation?
//!     yes ─▶ NEW: store (fp, refcount 1, generation g) with no read, add to generation g
//!     no  ─▶ LRU, then store: found ─▶ SEEN (refcount + 1)
//!                             not found ─▶ NEW (a filter false positive), as above
//! ```
//! Counters count *distinct* fingerprints, not hits.
//!
//! # Growth (seed 002)
//! Generation 0 holds `capacity` fingerprints; when the active generation is full, a new one
//! twice as large becomes active. New fingerprints go to the active generation; queries OR all
//! generations. A fingerprint's record in the store keeps its generation (see
//! [`Record`](super::Record)), so that forgetting it decrements the right counters.
//!
//! # Forgetting (seed 004)
//! [`CountingSet::forget`] removes the fingerprint from the store, then decrements its k
//! counters in its generation. A saturated counter (15) no longer knows its count, so it is
//! recounted: one scan of the store counts the probes of the fingerprints of that generation
//! that land on it, and the counter is set to that (at most 15). Seed 004 stores the k positions
//! beside each fingerprint; here they are recomputed from the fingerprint (hash once), so the
//! store keeps 4 to 8 bytes a fingerprint instead of 4 + 4k.
//!
//! Invariant: every counter equals min(15, the number of probes of stored fingerprints of its
//! generation on it). So a stored fingerprint always has all its counters above 0: forgetting
//! never causes a false negative.
//!
//! # Durability
//! The store is the source of truth; the filters are rebuilt from it when a set is opened (one
//! scan, about a second for a few million fingerprints). A write goes to the store before the
//! filter, a forget removes from the store before it decrements, so a crash at any point
//! reopens to a consistent set.

mod options;
mod stats;

pub use options::CountingOptions;
use options::invalid;
pub use stats::{CountingStats, GenerationStats};

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use urlseen_filter::frame::Format;
use urlseen_filter::{CountingBloom, MAX_BITS, MAX_HASHES, plan};

use super::store::FpBuildHasher;
use super::store::error as store_error;
use super::{
    ExactIndex, ExactOptions, ExactStats, FingerprintStore, FpStore, MemStore, Result,
    StoreDurability, StoreOptions,
};
use crate::error::Error;

/// The file beside the store that fixes a set's filter geometry.
pub const PARAMS_FILE: &str = "URLSEEN-COUNTING";
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
/// Where a 4-bit counter of [`CountingBloom`] saturates.
const SATURATED: u8 = 15;

#[derive(Debug, Default)]
struct Counters {
    definitely_new: AtomicU64,
    filter_positives: AtomicU64,
    false_positives: AtomicU64,
    recounted_counters: AtomicU64,
    recount_scans: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// Seed 004's IMP-CB: growable generations of counting Bloom filters in front of an
/// [`ExactIndex`]; check-and-insert with no false negatives and, beyond 64-bit fingerprint
/// collisions, no false positives; URLs can be forgotten. See the [module docs](self).
///
/// Thread-safe: one lock covers the filters and the index, so of concurrent
/// [`seen`](Self::seen) calls for one new fingerprint exactly one returns `false`.
///
/// # Examples
/// ```
/// use urlseen_engine::exact::{CountingOptions, CountingSet};
/// let set = CountingSet::in_memory(CountingOptions { capacity: 1000, ..Default::default() })?;
/// assert!(!set.seen(1)?); // new
/// assert!(set.seen(1)?); // seen
/// assert!(set.forget(1)?);
/// assert!(!set.seen(1)?); // new again
/// # Ok::<(), urlseen_engine::Error>(())
/// ```
pub struct CountingSet {
    generations: Mutex<Vec<CountingBloom>>,
    exact: ExactIndex,
    options: CountingOptions,
    counters: Counters,
}

impl fmt::Debug for CountingSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountingSet")
            .field("options", &self.options)
            .field("generations", &self.generations.lock().len())
            .field("exact", &self.exact)
            .finish_non_exhaustive()
    }
}

impl CountingSet {
    /// An empty set over a [`MemStore`].
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for out-of-range options.
    pub fn in_memory(options: CountingOptions) -> Result<Self> {
        Self::with_store(Box::new(MemStore::new()), options)
    }

    /// A set over `store`, its filters rebuilt from what the store holds.
    ///
    /// # Errors
    /// [`Error::InvalidOption`]; the store's errors during the rebuild scan.
    pub fn with_store(store: Box<dyn FpStore>, options: CountingOptions) -> Result<Self> {
        options.validate()?;
        let set = CountingSet {
            generations: Mutex::new(Vec::new()),
            exact: ExactIndex::new(store, options.exact),
            options,
            counters: Counters::default(),
        };
        set.rebuild()?;
        Ok(set)
    }

    /// Opens the set persisted in `dir` (a [`FingerprintStore`] plus a small file that fixes the
    /// filter geometry), creating it if missing. On reopen the stored geometry wins over
    /// `options` (only `options.exact` applies): the filters must be rebuilt as they were built.
    ///
    /// # Errors
    /// As [`FingerprintStore::open`]; a damaged params file gives [`Error::Corrupt`] or
    /// [`Error::UnsupportedVersion`].
    pub fn open(dir: &Path, durability: StoreDurability, options: CountingOptions) -> Result<Self> {
        Self::open_with(dir, StoreOptions { durability, ..StoreOptions::default() }, options)
    }

    /// [`open`](Self::open) with all the store's options.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn open_with(dir: &Path, store: StoreOptions, options: CountingOptions) -> Result<Self> {
        options.validate()?;
        let path = dir.join(PARAMS_FILE);
        let storage = Arc::clone(&store.storage);
        let (store, options) = match storage.read(&path) {
            // A set exists: its store must too (it must never come back empty).
            Ok(Some(bytes)) => {
                let options = options.decode_into(&path, &bytes)?;
                (FingerprintStore::open_existing_with(dir, store)?, options)
            }
            Ok(None) => {
                let store = FingerprintStore::open_with(dir, store)?;
                if !store.is_empty() {
                    return Err(Error::Corrupt {
                        path,
                        reason: "the store holds fingerprints but the params file is missing"
                            .into(),
                    });
                }
                storage
                    .write_atomic(&path, &options.encode())
                    .map_err(|source| store_error::io("write params", &path, source))?;
                (store, options)
            }
            Err(source) => return Err(store_error::io("read params", &path, source)),
        };
        Self::with_store(Box::new(store), options)
    }

    /// Like [`open`](Self::open), but `dir` must hold a set.
    ///
    /// # Errors
    /// [`Error::NotFound`] if it does not; otherwise as [`open`](Self::open).
    pub fn open_existing(
        dir: &Path,
        durability: StoreDurability,
        options: CountingOptions,
    ) -> Result<Self> {
        let store = StoreOptions { durability, ..StoreOptions::default() };
        Self::open_existing_with(dir, store, options)
    }

    /// [`open_existing`](Self::open_existing) with all the store's options.
    ///
    /// # Errors
    /// As [`open_existing`](Self::open_existing).
    pub fn open_existing_with(
        dir: &Path,
        store: StoreOptions,
        options: CountingOptions,
    ) -> Result<Self> {
        let path = dir.join(PARAMS_FILE);
        if store.storage.file_len(&path).ok().flatten().is_none() {
            return Err(store_error::not_found(dir));
        }
        Self::open_with(dir, store, options)
    }

    /// Rebuilds every generation from the store (one scan).
    fn rebuild(&self) -> Result<()> {
        let mut gens = self.generations.lock();
        gens.clear();
        let Some(first) = self.options.new_generation(0) else {
            return Err(invalid("capacity", "the first generation cannot be built".into()));
        };
        gens.push(first);
        let mut failed = None;
        let mut records = 0u64;
        self.exact.store().scan(&mut |fp, record| {
            records += 1;
            while gens.len() <= record.generation as usize && failed.is_none() {
                match self.options.new_generation(gens.len() as u32) {
                    Some(g) => gens.push(g),
                    None => failed = Some(record.generation),
                }
            }
            if let Some(filter) = gens.get_mut(record.generation as usize) {
                filter.add(fp);
            }
        })?;
        if let Some(g) = failed {
            return Err(Error::Corrupt {
                path: PathBuf::new(),
                reason: format!("a fingerprint of generation {g}, which cannot exist"),
            });
        }
        // Every write keeps the count with its data, atomically: a store whose records are
        // fewer lost them (an LSM that lost its journal can still answer the count's key).
        let counted = self.exact.store().len();
        if records != counted {
            return Err(Error::Corrupt {
                path: self.exact.store().location(),
                reason: format!(
                    "holds {records} URLs but counts {counted}: its LSM lost part of its data. \
                     Restore the store directory from a backup"
                ),
            });
        }
        self.grow_if_full(&mut gens);
        Ok(())
    }

    /// Adds a generation if the active one is full (and a bigger one can exist).
    fn grow_if_full(&self, gens: &mut Vec<CountingBloom>) {
        let active = gens.len() - 1;
        let full = self
            .options
            .generation_capacity(active as u32)
            .is_none_or(|cap| gens[active].len() >= cap);
        if full && let Some(next) = self.options.new_generation(gens.len() as u32) {
            gens.push(next);
        }
    }

    /// Room left in the active generation (at least 1).
    fn room(&self, gens: &[CountingBloom]) -> u64 {
        let active = gens.len() - 1;
        let cap = self.options.generation_capacity(active as u32).unwrap_or(u64::MAX);
        cap.saturating_sub(gens[active].len()).max(1)
    }

    /// The effective options (on a reopened set, the stored geometry).
    #[must_use]
    pub fn options(&self) -> &CountingOptions {
        &self.options
    }

    /// The exact index behind the filters.
    #[must_use]
    pub fn exact(&self) -> &ExactIndex {
        &self.exact
    }

    /// Check-and-insert (seed 002's `is_duplicate`): whether `fp` was seen; if not, records it.
    ///
    /// # Errors
    /// The store's; on error `fp` is not recorded.
    pub fn seen(&self, fp: u64) -> Result<bool> {
        let mut gens = self.generations.lock();
        if gens.iter().any(|f| f.contains(fp)) {
            bump(&self.counters.filter_positives, 1);
            if self.exact.confirm(fp)? {
                return Ok(true);
            }
            bump(&self.counters.false_positives, 1);
        } else {
            bump(&self.counters.definitely_new, 1);
        }
        let g = gens.len() - 1;
        self.exact.record_new_in(fp, g as u32)?;
        gens[g].add(fp);
        self.grow_if_full(&mut gens);
        Ok(false)
    }

    /// [`seen`](Self::seen) for a batch: `out[i]` says whether `fps[i]` was seen (a repeat
    /// inside the batch counts as seen). New fingerprints go to the store in one write per
    /// batch (per generation filled), so [`StoreDurability::Always`] costs one fsync a batch.
    ///
    /// # Errors
    /// The store's. Writes happen in chunks: on error, the fingerprints of the chunks written
    /// before are recorded, and the rest are not.
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn seen_many(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        self.seen_many_hosts(fps, &[], out)
    }

    /// [`seen_many`](Self::seen_many), each new fingerprint's record keeping `hosts[i]`, the
    /// hash of its URL's host (empty: unknown), for [`forget_host`](Self::forget_host).
    ///
    /// # Errors
    /// As [`seen_many`](Self::seen_many).
    ///
    /// # Panics
    /// If `out.len() != fps.len()`, or `hosts` is neither empty nor as long.
    pub fn seen_many_hosts(&self, fps: &[u64], hosts: &[u32], out: &mut [bool]) -> Result<()> {
        let Ok(()) =
            self.seen_many_then(fps, hosts, out, |_| Ok::<(), std::convert::Infallible>(()))?;
        Ok(())
    }

    /// [`seen_many_hosts`](Self::seen_many_hosts) that hands the answers to `then` before
    /// anything of the batch is written (the set is locked meanwhile): `urlseen filter` prints
    /// the new URLs there, so a crash between the print and the write reprints them, and none
    /// is ever recorded unprinted. If `then` fails, nothing of the batch is recorded:
    /// `Ok(Err(_))`.
    ///
    /// # Errors
    /// As [`seen_many`](Self::seen_many).
    ///
    /// # Panics
    /// If `out.len() != fps.len()`, or `hosts` is neither empty nor as long.
    pub fn seen_many_then<E>(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        then: impl FnOnce(&[bool]) -> std::result::Result<(), E>,
    ) -> Result<std::result::Result<(), E>> {
        assert_eq!(fps.len(), out.len(), "seen_many: out must have one slot per fingerprint");
        assert!(hosts.is_empty() || hosts.len() == fps.len(), "one host per fingerprint");
        let mut gens = self.generations.lock();
        // Decide the whole batch first: what is recorded, or new earlier in the batch, is seen.
        let mut new = Vec::new();
        let mut new_hosts = Vec::new();
        let mut new_set: HashSet<u64, FpBuildHasher> = HashSet::default();
        for (i, (&fp, slot)) in fps.iter().zip(out.iter_mut()).enumerate() {
            *slot = if new_set.contains(&fp) {
                true
            } else if gens.iter().any(|f| f.contains(fp)) {
                bump(&self.counters.filter_positives, 1);
                let found = self.exact.confirm(fp)?;
                bump(&self.counters.false_positives, u64::from(!found));
                found
            } else {
                bump(&self.counters.definitely_new, 1);
                false
            };
            if !*slot {
                new.push(fp);
                if let Some(&host) = hosts.get(i) {
                    new_hosts.push(host);
                }
                new_set.insert(fp);
            }
        }
        if let Err(e) = then(out) {
            return Ok(Err(e));
        }
        // Then record the new ones, filling the active generation and opening the next.
        let mut rest = new.as_slice();
        let mut rest_hosts = new_hosts.as_slice();
        while !rest.is_empty() {
            let g = gens.len() - 1;
            let room = usize::try_from(self.room(&gens)).unwrap_or(usize::MAX);
            let (chunk, tail) = rest.split_at(room.min(rest.len()));
            let (chunk_hosts, hosts_tail) = if rest_hosts.is_empty() {
                (rest_hosts, rest_hosts)
            } else {
                rest_hosts.split_at(chunk.len())
            };
            self.exact.record_new_many_hosts_in(chunk, chunk_hosts, g as u32)?;
            for &fp in chunk {
                gens[g].add(fp);
            }
            self.grow_if_full(&mut gens);
            rest = tail;
            rest_hosts = hosts_tail;
        }
        Ok(Ok(()))
    }

    /// Whether `fp` is recorded, changing nothing.
    ///
    /// # Errors
    /// The store's.
    pub fn contains(&self, fp: u64) -> Result<bool> {
        let gens = self.generations.lock();
        if !gens.iter().any(|f| f.contains(fp)) {
            return Ok(false);
        }
        self.exact.contains(fp)
    }

    /// [`contains`](Self::contains) for a batch.
    ///
    /// # Errors
    /// The store's.
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn contains_many(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        assert_eq!(fps.len(), out.len(), "contains_many: out must have one slot per fingerprint");
        let gens = self.generations.lock();
        for (&fp, slot) in fps.iter().zip(out.iter_mut()) {
            *slot = gens.iter().any(|f| f.contains(fp)) && self.exact.contains(fp)?;
        }
        Ok(())
    }

    /// Forgets `fp` (seed 004's deletion): removes it from the store, then decrements its
    /// counters, recounting saturated ones from the store. Returns whether it was recorded.
    /// Afterwards `fp` is new again and every other recorded fingerprint is still seen.
    ///
    /// # Errors
    /// The store's; [`Error::Corrupt`] if the store and the filters disagree.
    pub fn forget(&self, fp: u64) -> Result<bool> {
        let mut gens = self.generations.lock();
        let Some(record) = self.exact.forget_record(fp)? else { return Ok(false) };
        self.unlearn(&mut gens, fp, record.generation)?;
        Ok(true)
    }

    /// [`forget`](Self::forget) for a batch: `out[i]` says whether `fps[i]` was recorded.
    ///
    /// # Errors
    /// As [`forget`](Self::forget); the ones before the failing one are forgotten.
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn forget_many(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        assert_eq!(fps.len(), out.len(), "forget_many: out must have one slot per fingerprint");
        let mut gens = self.generations.lock();
        // One at a time: a saturated counter shared by two of them must be recounted after the
        // first is gone and decremented for the second, never recounted twice.
        for (&fp, slot) in fps.iter().zip(out.iter_mut()) {
            *slot = match self.exact.forget_record(fp)? {
                Some(record) => {
                    self.unlearn(&mut gens, fp, record.generation)?;
                    true
                }
                None => false,
            };
        }
        Ok(())
    }

    /// Forgets every fingerprint whose record keeps host hash `host` (see
    /// [`seen_many_hosts`](Self::seen_many_hosts)): one scan of the store finds them, then
    /// each is forgotten as [`forget`](Self::forget) does, under the set's lock (writers wait).
    /// Returns how many were forgotten, or, if some records keep no host (they may be URLs of
    /// `host`), `Err` with how many, and nothing is forgotten.
    ///
    /// # Errors
    /// The store's (the outer `Result`); the ones before a failure are forgotten.
    pub fn forget_host(
        &self,
        host: u32,
        still: &dyn Fn() -> bool,
    ) -> Result<std::result::Result<u64, u64>> {
        let mut gens = self.generations.lock();
        // Nothing is recorded from here until the forget is done.
        if !still() {
            return Ok(Err(u64::MAX));
        }
        let (mut matched, mut unknown) = (Vec::new(), 0u64);
        self.exact.store().scan(&mut |fp, record| match record.host {
            0 => unknown += 1,
            h if h == host => matched.push(fp),
            _ => {}
        })?;
        if unknown > 0 {
            return Ok(Err(unknown));
        }
        let mut n = 0;
        for fp in matched {
            if let Some(record) = self.exact.forget_record(fp)? {
                self.unlearn(&mut gens, fp, record.generation)?;
                n += 1;
            }
        }
        Ok(Ok(n))
    }

    /// How many records carry host hash `host`.
    ///
    /// # Errors
    /// The store's.
    pub fn count_host(&self, host: u32) -> Result<u64> {
        let _gens = self.generations.lock();
        let mut n = 0u64;
        self.exact.store().scan(&mut |_, record| n += u64::from(record.host == host))?;
        Ok(n)
    }

    /// Decrements the counters of `fp` (already removed from the store) in `generation`.
    fn unlearn(&self, gens: &mut [CountingBloom], fp: u64, generation: u32) -> Result<()> {
        let corrupt = |reason: String| Error::Corrupt { path: PathBuf::new(), reason };
        let Some(filter) = gens.get_mut(generation as usize) else {
            return Err(corrupt(format!(
                "fingerprint {fp:#018x} is recorded in generation {generation}, which does not exist"
            )));
        };
        let mut saturated = [0u64; MAX_HASHES as usize];
        let mut n = 0;
        for p in filter.positions(fp) {
            if filter.counter(p) == SATURATED && !saturated[..n].contains(&p) {
                saturated[n] = p;
                n += 1;
            }
        }
        let saturated = &saturated[..n];
        let mut counts = [0u32; MAX_HASHES as usize];
        if n > 0 {
            bump(&self.counters.recount_scans, 1);
            bump(&self.counters.recounted_counters, n as u64);
            let probe = &*filter;
            self.exact.store().scan(&mut |other, record| {
                if record.generation != generation {
                    return;
                }
                for p in probe.positions(other) {
                    if let Some(j) = saturated.iter().position(|&s| s == p) {
                        counts[j] += 1;
                    }
                }
            })?;
        }
        filter
            .remove(fp, |p| {
                let j = saturated.iter().position(|&s| s == p);
                j.map_or(SATURATED, |j| counts[j].min(u32::from(SATURATED)) as u8)
            })
            .map_err(|_| {
                corrupt(format!("fingerprint {fp:#018x} is recorded but not in its filter"))
            })
    }

    /// Checks the invariant of the [module docs](self): rebuilds the filters from the store
    /// (one scan) and compares them, counter by counter, with the live ones. Returns `Ok(true)`
    /// if they are equal (generations past the rebuilt ones must be empty). An `fsck` for tests
    /// and operators; it holds the set's lock for the scan.
    ///
    /// # Errors
    /// The store's.
    pub fn verify(&self) -> Result<bool> {
        let gens = self.generations.lock();
        let mut rebuilt: Vec<CountingBloom> = Vec::with_capacity(gens.len());
        let mut ok = true;
        self.exact.store().scan(&mut |fp, record| {
            let g = record.generation as usize;
            while rebuilt.len() <= g {
                match self.options.new_generation(rebuilt.len() as u32) {
                    Some(f) => rebuilt.push(f),
                    None => {
                        ok = false;
                        return;
                    }
                }
            }
            rebuilt[g].add(fp);
        })?;
        if !ok || rebuilt.len() > gens.len() {
            return Ok(false);
        }
        Ok(gens.iter().enumerate().all(|(g, live)| match rebuilt.get(g) {
            Some(r) => r == live,
            None => live.is_empty() && live.count_nonzero() == 0,
        }))
    }

    /// Makes every write so far durable.
    ///
    /// # Errors
    /// The store's.
    pub fn sync(&self) -> Result<()> {
        self.exact.sync()
    }

    /// The number of recorded fingerprints.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.exact.len()
    }

    /// Whether nothing is recorded.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(capacity: u64) -> CountingOptions {
        CountingOptions { capacity, ..Default::default() }
    }

    /// A store whose count says more than its records: an LSM that lost data but still
    /// answers the count's key.
    #[derive(Debug)]
    struct Overcounting(MemStore);

    impl FpStore for Overcounting {
        fn get_record(&self, fp: u64) -> Result<Option<super::super::Record>> {
            self.0.get_record(fp)
        }
        fn insert_many_hosts_in(&self, fps: &[u64], hosts: &[u32], g: u32) -> Result<()> {
            self.0.insert_many_hosts_in(fps, hosts, g)
        }
        fn update_record(&self, fp: u64, r: super::super::Record) -> Result<()> {
            self.0.update_record(fp, r)
        }
        fn increment(&self, fp: u64) -> Result<u32> {
            self.0.increment(fp)
        }
        fn remove_record(&self, fp: u64) -> Result<Option<super::super::Record>> {
            self.0.remove_record(fp)
        }
        fn len(&self) -> u64 {
            self.0.len() + 7
        }
        fn scan(&self, f: &mut dyn FnMut(u64, super::super::Record)) -> Result<()> {
            self.0.scan(f)
        }
        fn iter_fingerprints(&self) -> Box<dyn Iterator<Item = Result<u64>> + '_> {
            self.0.iter_fingerprints()
        }
        fn sync(&self) -> Result<()> {
            self.0.sync()
        }
        fn durability(&self) -> StoreDurability {
            self.0.durability()
        }
        fn memory_bytes(&self) -> u64 {
            self.0.memory_bytes()
        }
    }

    #[test]
    fn a_store_with_fewer_records_than_its_count_is_refused() {
        let store = MemStore::new();
        store.insert_many(&[1, 2, 3]).unwrap();
        let err = CountingSet::with_store(Box::new(Overcounting(store)), small(100)).unwrap_err();
        assert!(err.to_string().contains("holds 3 URLs but counts 10"), "{err}");
        let store = MemStore::new();
        store.insert_many(&[1, 2, 3]).unwrap();
        assert_eq!(CountingSet::with_store(Box::new(store), small(100)).unwrap().len(), 3);
    }

    #[test]
    fn grows_by_doubling_and_keeps_everything() {
        let set = CountingSet::in_memory(small(100)).unwrap();
        for fp in 0..1000u64 {
            assert!(!set.seen(urlseen_filter::hash::mix64(fp)).unwrap());
        }
        for fp in 0..1000u64 {
            assert!(set.seen(urlseen_filter::hash::mix64(fp)).unwrap());
        }
        let s = set.stats();
        let caps: Vec<u64> = s.generations.iter().map(|g| g.capacity).collect();
        assert_eq!(caps, [100, 200, 400, 800]);
        let lens: Vec<u64> = s.generations.iter().map(|g| g.len).collect();
        assert_eq!(lens, [100, 200, 400, 300]);
        assert_eq!(s.len, 1000);
    }

    #[test]
    fn batches_match_singles() {
        let fps: Vec<u64> = (0..3000u64).map(|i| urlseen_filter::hash::mix64(i % 1700)).collect();
        let a = CountingSet::in_memory(small(256)).unwrap();
        let b = CountingSet::in_memory(small(256)).unwrap();
        let mut out = vec![false; fps.len()];
        for chunk in 0..3 {
            let r = chunk * 1000..(chunk + 1) * 1000;
            b.seen_many(&fps[r.clone()], &mut out[r]).unwrap();
        }
        for (i, &fp) in fps.iter().enumerate() {
            assert_eq!(a.seen(fp).unwrap(), out[i], "fingerprint {i}");
        }
        assert_eq!(a.stats().generations, b.stats().generations);
    }

    #[test]
    fn params_round_trip() {
        let o = CountingOptions::with_fpr(5000, 0.001).unwrap();
        let back = small(1).decode_into(Path::new("p"), &o.encode()).unwrap();
        assert_eq!(back, o);
        let mut bad = o.encode();
        bad[20] ^= 1;
        let err = small(1).decode_into(Path::new("p"), &bad).unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt { reason, .. } if reason.contains("checksum")),
            "{err}"
        );
    }

    #[test]
    fn rejects_bad_options() {
        for o in [
            CountingOptions { capacity: 0, ..Default::default() },
            CountingOptions { hashes: 0, ..Default::default() },
            CountingOptions { counters_per_item: f64::NAN, ..Default::default() },
        ] {
            assert!(matches!(CountingSet::in_memory(o), Err(Error::InvalidOption { .. })));
        }
        assert!(CountingOptions::with_fpr(10, 1.5).is_err());
    }
}
