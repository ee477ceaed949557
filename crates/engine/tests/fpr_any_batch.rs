//! The false-positive bound holds for any batch (issue 32): one call with a batch far larger
//! than the namespace was created for grows the tree many times over inside the call, and the
//! share of its distinct, never-seen items answered "seen" stays under the bound plus sampling
//! error, in every mode and home. Before, a batch's items deferred by a full leaf were asked
//! again of each frozen filter on their way down, and one call of 10^6 URLs into a namespace
//! created for 10^3 answered 20% of them "seen". And nothing recorded is ever answered "new".
//! (The Redis home's case is the urlseen-redis crate's: crates/redis/tests/fpr_any_batch.rs.)

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::time::Duration;

use proptest::prelude::*;
use support::{allowed, fps};
use urlseen_engine::{Db, NamespaceOptions};

mod support;

#[derive(Debug, Clone, Copy)]
enum Mode {
    Bloom,
    Exact,
    Counting,
    Recrawl,
}

#[derive(Debug, Clone, Copy)]
enum Home {
    Memory,
    Spill,
    DataDir,
}

fn check_one_batch(mode: Mode, home: Home, capacity: u64, fpr: f64, batch: usize, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let db = match home {
        Home::Memory => Db::in_memory(),
        Home::Spill => Db::temporary(Some(dir.path())).unwrap(),
        Home::DataDir => Db::open(dir.path()).unwrap(),
    };
    let mut options = NamespaceOptions { capacity, fpr, ..NamespaceOptions::default() };
    match mode {
        Mode::Bloom => {}
        Mode::Exact => options.exact = true,
        Mode::Counting => options.counting = true,
        Mode::Recrawl => options.recrawl_after = Some(Duration::from_secs(8 * 3_600)),
    }
    let ns = db.create_namespace("ns", options).unwrap();
    let items = fps(seed, batch);
    let mut out = vec![false; batch];
    ns.seen_fingerprints(&items, &mut out).unwrap();
    let seen = out.iter().filter(|&&s| s).count();
    assert!(
        seen <= allowed(batch, fpr),
        "{mode:?} in {home:?}, capacity {capacity}, fpr {fpr}: {seen} of {batch} distinct new \
         items answered seen in one batch ({:.3}%)",
        seen as f64 * 100.0 / batch as f64
    );
    // Nothing recorded (answered "new") is answered "new" again: not at once, not after the
    // splits settle. (One answered "seen" is not recorded: see docs/durability.md.)
    let recorded: Vec<u64> = items.iter().zip(&out).filter(|p| !*p.1).map(|p| *p.0).collect();
    let mut again = vec![false; recorded.len()];
    ns.contains_fingerprints(&recorded, &mut again).unwrap();
    assert!(again.iter().all(|&s| s), "{mode:?} in {home:?}: a recorded item answered new");
    db.wait_for_splits();
    ns.seen_fingerprints(&recorded, &mut again).unwrap();
    assert!(again.iter().all(|&s| s), "{mode:?} in {home:?}: a recorded item new after splits");
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![Just(Mode::Bloom), Just(Mode::Exact), Just(Mode::Counting), Just(Mode::Recrawl)]
}

fn home() -> impl Strategy<Value = Home> {
    prop_oneof![Just(Home::Memory), Just(Home::Spill), Just(Home::DataDir)]
}

proptest! {
    // Each case may push 10^6 items through a data directory: a few dozen cases.
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Capacity 1 to 10^5 (log-uniform), batch 1 to 10^6 (log-uniform; counting namespaces,
    /// whose store writes each item, to 2·10^5), any mode and home.
    #[test]
    fn the_bound_holds_for_one_batch_of_any_size(
        mode in mode(),
        home in home(),
        capacity_log in 0.0f64..5.0,
        batch_log in 0.0f64..6.0,
        fpr in prop_oneof![Just(0.1), Just(0.01), Just(0.001)],
        seed in 1u64..1_000_000,
    ) {
        let capacity = 10f64.powf(capacity_log) as u64;
        let mut batch = 10f64.powf(batch_log) as usize;
        if matches!(mode, Mode::Counting) {
            batch = batch.min(200_000);
        }
        check_one_batch(mode, home, capacity.max(1), fpr, batch.max(1), seed);
    }
}

/// The cases the report measured, always run: 10^4, 10^5 and 10^6 new URLs in one call into a
/// namespace created for 1,000 at 1% (20.2% answered "seen" at 10^6 before).
#[test]
fn a_million_new_items_in_one_call_into_a_namespace_for_a_thousand() {
    for batch in [10_000, 100_000, 1_000_000] {
        for home in [Home::Memory, Home::DataDir] {
            check_one_batch(Mode::Bloom, home, 1_000, 0.01, batch, 7);
        }
    }
}
