//! Seed 004's deletion: after `forget`, the forgotten fingerprints are new again and every other
//! one is still seen, including when counters saturated (and were recounted from the store),
//! and after the on-disk set is reopened.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use urlseen_engine::exact::{
    CountingOptions, CountingSet, ExactIndex, ExactOptions, StoreDurability,
};
use urlseen_filter::hash::mix64;

fn fps(seed: u64, n: u64) -> Vec<u64> {
    (0..n).map(|i| mix64(seed.wrapping_mul(0x1_0000_0001) ^ i)).collect()
}

/// A filter so small that every counter saturates: 2,000 fingerprints × 8 probes on 100
/// counters is 160 probes a counter, far above 15.
fn saturating() -> CountingOptions {
    CountingOptions {
        capacity: 2000,
        counters_per_item: 0.05,
        hashes: 8,
        exact: ExactOptions { lru_capacity: 64, count_references: true },
        ..Default::default()
    }
}

/// Average counter 8 with k = 8 and m/n = 1: some counters saturated, most not, so both the
/// decrement and the recount paths run.
fn mixed() -> CountingOptions {
    CountingOptions { capacity: 4000, counters_per_item: 1.0, ..saturating() }
}

fn check_forget(set: &CountingSet, all: &[u64], forget_every: usize) -> Vec<u64> {
    for &fp in all {
        assert!(!set.seen(fp).unwrap());
    }
    let before = set.stats();
    assert!(before.saturated_counters > 0, "the test must saturate counters");
    let forgotten: Vec<u64> = all.iter().copied().step_by(forget_every).collect();
    let mut out = vec![false; forgotten.len()];
    set.forget_many(&forgotten, &mut out).unwrap();
    assert!(out.iter().all(|&was| was));
    assert!(!set.forget(forgotten[0]).unwrap(), "forgetting twice");
    let after = set.stats();
    assert!(after.recounted_counters > 0, "saturated counters must have been recounted");
    assert!(set.verify().unwrap(), "counters equal a rebuild from the store");
    check_state(set, all, forget_every);
    forgotten
}

fn check_state(set: &CountingSet, all: &[u64], forget_every: usize) {
    for (i, &fp) in all.iter().enumerate() {
        let expected = i % forget_every != 0;
        assert_eq!(set.contains(fp).unwrap(), expected, "fingerprint {i}");
    }
    assert_eq!(set.len(), all.len() as u64 - all.len().div_ceil(forget_every) as u64);
}

#[test]
fn exact_forget_with_every_counter_saturated() {
    let set = CountingSet::in_memory(saturating()).unwrap();
    let all = fps(1, 5000);
    let forgotten = check_forget(&set, &all, 7);
    // New again: seen() says new once, then seen.
    for &fp in &forgotten {
        assert!(!set.seen(fp).unwrap());
        assert!(set.seen(fp).unwrap());
    }
    for &fp in &all {
        assert!(set.seen(fp).unwrap());
    }
    assert!(set.verify().unwrap());
}

#[test]
fn exact_forget_with_some_counters_saturated() {
    let set = CountingSet::in_memory(mixed()).unwrap();
    let all = fps(2, 12_000);
    check_forget(&set, &all, 3);
    let s = set.stats();
    assert!(s.generations.len() >= 2, "the test spans generations");
    assert!(s.saturated_counters < s.generations.iter().map(|g| g.counters).sum::<u64>());
}

#[test]
fn exact_forget_everything_then_relearn() {
    let set = CountingSet::in_memory(saturating()).unwrap();
    let all = fps(3, 3000);
    for &fp in &all {
        set.seen(fp).unwrap();
    }
    for &fp in &all {
        assert!(set.forget(fp).unwrap());
    }
    let s = set.stats();
    assert_eq!(s.len, 0);
    assert!(s.generations.iter().all(|g| g.len == 0 && g.fill == 0.0), "all counters back to 0");
    for &fp in &all {
        assert!(!set.seen(fp).unwrap());
    }
}

#[test]
fn exact_forget_survives_reopen_of_the_disk_store() {
    let dir = tempfile::tempdir().unwrap();
    let all = fps(4, 8000);
    {
        let set = CountingSet::open(dir.path(), StoreDurability::Buffered, mixed()).unwrap();
        check_forget(&set, &all, 5);
    }
    // Reopen with other options: the stored geometry wins, the filters are rebuilt.
    let set = CountingSet::open(dir.path(), StoreDurability::Buffered, CountingOptions::default())
        .unwrap();
    assert_eq!(set.options().capacity, mixed().capacity);
    assert!(set.verify().unwrap());
    check_state(&set, &all, 5);
    // Forget more after the reopen: the recount works on rebuilt filters too.
    let more: Vec<u64> = all.iter().copied().skip(1).step_by(5).collect();
    for &fp in &more {
        assert!(set.forget(fp).unwrap());
    }
    assert!(set.verify().unwrap());
    drop(set);
    let set = CountingSet::open_existing(dir.path(), StoreDurability::Always, mixed()).unwrap();
    for (i, &fp) in all.iter().enumerate() {
        assert_eq!(set.contains(fp).unwrap(), i % 5 > 1, "fingerprint {i}");
    }
}

#[test]
fn exact_index_forget_behind_a_plain_bloom_filter() {
    // A Bloom filter cannot unlearn, but in exact mode the store decides every positive: a
    // forgotten fingerprint that the filter still reports is new again.
    let mut bloom = urlseen_filter::BlockedBloom::with_capacity(10_000, 0.01, 9);
    let exact = ExactIndex::in_memory(ExactOptions::default());
    let all = fps(5, 5000);
    let seen = |bloom: &mut urlseen_filter::BlockedBloom, fp: u64| -> bool {
        if bloom.insert(fp) {
            exact.check_positive(fp).unwrap()
        } else {
            exact.record_new(fp).map(|()| false).unwrap()
        }
    };
    for &fp in &all {
        assert!(!seen(&mut bloom, fp));
    }
    for &fp in all.iter().step_by(2) {
        assert!(exact.forget(fp).unwrap());
    }
    for (i, &fp) in all.iter().enumerate() {
        assert_eq!(seen(&mut bloom, fp), i % 2 == 1, "fingerprint {i}");
    }
}
