//! Exactly one "new": concurrent check-and-inserts of the same fingerprint, through a
//! `CountingSet` (one lock) and through a Bloom filter + `ExactIndex` wired as the DSBF does.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Barrier};

use parking_lot::Mutex;
use urlseen_engine::exact::{
    CountingOptions, CountingSet, ExactIndex, ExactOptions, StoreDurability,
};
use urlseen_filter::BlockedBloom;
use urlseen_filter::hash::mix64;

const THREADS: usize = 4;

/// Runs `seen` on every fingerprint from `THREADS` threads (each in its own order, half of
/// them in batches) and checks that each fingerprint got exactly one `false`.
fn exactly_once(n: u64, seen_many: impl Fn(&[u64], &mut [bool]) + Sync) {
    let fps: Vec<u64> = (0..n).map(|i| mix64(i ^ 0xC0FFEE)).collect();
    let news: Vec<AtomicU8> = (0..n).map(|_| AtomicU8::new(0)).collect();
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (fps, news, barrier, seen_many) = (&fps, &news, &barrier, &seen_many);
            s.spawn(move || {
                let n = fps.len();
                let step = [1, 3, 7, 11][t % 4]; // coprime with the test sizes: a permutation
                let order: Vec<usize> = (0..n).map(|i| (i * step + t * 977) % n).collect();
                barrier.wait();
                let batch = if t % 2 == 0 { 1 } else { 64 };
                let mut out = vec![false; batch];
                for chunk in order.chunks(batch) {
                    let ids: Vec<u64> = chunk.iter().map(|&i| fps[i]).collect();
                    seen_many(&ids, &mut out[..ids.len()]);
                    for (&i, &was) in chunk.iter().zip(&out) {
                        if !was {
                            news[i].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });
    for (i, c) in news.iter().enumerate() {
        assert_eq!(
            c.load(Ordering::Relaxed),
            1,
            "fingerprint {i} was new {} times",
            c.load(Ordering::Relaxed)
        );
    }
}

#[test]
fn exact_counting_set_exactly_once_in_memory() {
    // A small first generation, so that threads race through several generation changes.
    let set =
        CountingSet::in_memory(CountingOptions { capacity: 1000, ..Default::default() }).unwrap();
    exactly_once(40_000, |fps, out| set.seen_many(fps, out).unwrap());
    assert_eq!(set.len(), 40_000);
    assert!(set.verify().unwrap());
}

#[test]
fn exact_counting_set_exactly_once_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let options = CountingOptions { capacity: 1000, counters_per_item: 2.0, ..Default::default() };
    let set = CountingSet::open(dir.path(), StoreDurability::Buffered, options).unwrap();
    exactly_once(10_000, |fps, out| {
        if fps.len() == 1 {
            out[0] = set.seen(fps[0]).unwrap();
        } else {
            set.seen_many(fps, out).unwrap();
        }
    });
    assert_eq!(set.len(), 10_000);
    assert!(set.stats().false_positives > 0, "the small filter sends new URLs to the store");
}

/// The DSBF wiring: the Bloom check-and-set and, for a negative, `record_new` happen under the
/// leaf's lock; a positive is decided by `check_positive` after the lock is released. A tiny
/// filter makes most new fingerprints Bloom false positives, so both paths race.
#[test]
fn exact_index_behind_a_bloom_filter_exactly_once() {
    let leaf = Arc::new(Mutex::new(BlockedBloom::new(4096, 3, 1)));
    let exact = ExactIndex::in_memory(ExactOptions { lru_capacity: 5000, count_references: true });
    exactly_once(20_000, |fps, out| {
        for (&fp, slot) in fps.iter().zip(out.iter_mut()) {
            let mut bloom = leaf.lock();
            if !bloom.insert(fp) {
                exact.record_new(fp).unwrap();
                *slot = false;
            } else {
                drop(bloom);
                *slot = exact.check_positive(fp).unwrap();
            }
        }
    });
    assert_eq!(exact.len(), 20_000);
    let s = exact.stats();
    assert!(s.lru_hits > 0 && s.store_hits > 0, "{s:?}");
}
