//! Seed 004's counting filter: deletion, saturation and recount, never a false negative.

use std::collections::HashMap;

use proptest::prelude::*;
use urlseen_filter::hash::mix64;
use urlseen_filter::{CountingBloom, Error};

/// The caller's side of IMP-CB: a fingerprint store next to the counting filter.
struct ImpCb {
    filter: CountingBloom,
    store: HashMap<u64, u32>, // fingerprint -> reference count
}

impl ImpCb {
    fn new(filter: CountingBloom) -> Self {
        ImpCb { filter, store: HashMap::new() }
    }

    /// Seed 004's flow for one URL; returns whether it was a duplicate.
    fn see(&mut self, fp: u64) -> bool {
        if !self.filter.insert(fp) {
            self.store.insert(fp, 1);
            return false;
        }
        if let Some(refs) = self.store.get_mut(&fp) {
            *refs += 1;
            return true;
        }
        // All counters non-zero but unknown to the store: a false positive of the filter.
        self.filter.add(fp);
        self.store.insert(fp, 1);
        false
    }

    /// How many probes of stored fingerprints hit `pos`.
    fn true_count(&self, pos: u64) -> u64 {
        self.store.keys().map(|&fp| u64::from(self.filter.multiplicity(fp, pos))).sum()
    }

    fn forget(&mut self, fp: u64) {
        assert!(self.store.remove(&fp).is_some());
        let store = &self.store;
        let filter_for_recount = self.filter.clone();
        let mut recounts = 0;
        self.filter
            .remove(fp, |pos| {
                recounts += 1;
                let n: u64 =
                    store.keys().map(|&o| u64::from(filter_for_recount.multiplicity(o, pos))).sum();
                n.min(255) as u8
            })
            .expect("a stored fingerprint is present");
        assert!(recounts <= self.filter.num_hashes());
    }

    /// Every counter equals min(true count, 15), and every stored fingerprint is contained.
    fn check(&self) {
        for pos in 0..self.filter.num_counters() {
            let exact = self.true_count(pos).min(15) as u8;
            assert_eq!(self.filter.counter(pos), exact, "counter {pos}");
        }
        for &fp in self.store.keys() {
            assert!(self.filter.contains(fp), "false negative for {fp}");
        }
        assert_eq!(self.filter.len(), self.store.len() as u64);
    }
}

#[test]
fn delete_makes_an_unshared_element_absent_and_keeps_the_others() {
    let mut f = CountingBloom::with_capacity(10_000, 0.001, 11);
    let members: Vec<u64> = (0..1000).map(mix64).collect();
    for &fp in &members {
        assert!(!f.insert(fp));
    }
    let removed = members[500];
    let shared = f
        .positions(removed)
        .all(|p| members.iter().any(|&o| o != removed && f.positions(o).any(|q| q == p)));
    assert!(!shared, "pick another element: this one shares all its positions");
    f.remove(removed, |_| unreachable!("nothing is saturated")).unwrap();
    assert!(!f.contains(removed));
    assert_eq!(f.len(), 999);
    for &fp in &members {
        if fp != removed {
            assert!(f.contains(fp));
        }
    }
    assert!(matches!(f.remove(removed, |_| 0), Err(Error::NotPresent)));
}

#[test]
fn saturated_counters_are_recounted_down_to_zero() {
    // Four counters, one probe each: 200 distinct fingerprints push every counter past 15.
    let mut cb = ImpCb::new(CountingBloom::new(4, 1, 0));
    let fps: Vec<u64> = (0..200).map(|i| mix64(i + 1000)).collect();
    for &fp in &fps {
        assert!(!cb.see(fp), "distinct fingerprints are new");
        assert!(cb.see(fp), "a second sighting is a duplicate");
    }
    assert_eq!(cb.filter.saturated_count(), 4);
    cb.check();
    for &fp in &fps {
        cb.forget(fp);
        cb.check();
    }
    assert_eq!(cb.filter.saturated_count(), 0);
    assert!((0..4).all(|p| cb.filter.counter(p) == 0));
    assert!(cb.filter.is_empty());
}

#[test]
fn one_position_set_shared_by_more_than_15() {
    // One counter: every fingerprint has the same (single) position.
    let mut f = CountingBloom::new(1, 1, 0);
    for fp in 0..20 {
        f.add(fp);
    }
    assert_eq!(f.counter(0), 15);
    for left in (0..20u64).rev() {
        // `left` fingerprints remain after this removal.
        f.remove(left, |pos| {
            assert_eq!(pos, 0);
            left as u8
        })
        .unwrap();
        assert_eq!(f.counter(0), left.min(15) as u8);
        if left > 0 {
            assert!(f.contains(0));
        }
    }
    assert!(!f.contains(0));
}

#[test]
fn repeated_positions_are_counted_per_probe() {
    // Two counters and eight probes: every fingerprint hits each counter several times.
    let mut cb = ImpCb::new(CountingBloom::new(2, 8, 5));
    let fps: Vec<u64> = (0..6).map(|i| mix64(i + 77)).collect();
    for &fp in &fps {
        cb.see(fp);
        cb.check();
    }
    for &fp in &fps {
        cb.forget(fp);
        cb.check();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random adds and removes on a tiny filter (so saturation and shared positions happen):
    /// counters stay exact up to saturation and no stored fingerprint is ever missed.
    #[test]
    fn random_workload_never_loses_an_element(
        counters in 1u64..24,
        hashes in 1u32..5,
        ops in proptest::collection::vec((any::<bool>(), 0u64..60), 1..150),
    ) {
        let mut cb = ImpCb::new(CountingBloom::new(counters, hashes, 3));
        for (add, id) in ops {
            let fp = mix64(id);
            if add || !cb.store.contains_key(&fp) {
                cb.see(fp);
            } else {
                cb.forget(fp);
            }
            cb.check();
        }
    }
}
