//! The `Db`'s running totals of memory and disk ([`Db::usage`]) follow what its namespaces
//! report ([`Namespace::stats`]) through creates, writes, splits, forgets, checkpoints and
//! drops, in memory and in a data directory, within the lag its docs allow (a sixteenth of a
//! namespace's growth), and come back to nothing when every namespace is gone.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod support;

use std::sync::Arc;

use urlseen_engine::{Db, Namespace, NamespaceOptions, Usage};

/// What the namespaces' own stats sum to.
fn summed(db: &Db) -> Usage {
    let mut total = Usage::default();
    for name in db.namespace_names() {
        let s = db.namespace(&name).unwrap().stats();
        total.memory_bytes += s.memory_bytes;
        total.committed_bytes += s.memory_bytes.max(s.filter_reserved_bytes);
        total.disk_bytes += s.disk_bytes;
    }
    total
}

/// Whether `running` is `exact` within `lag` (a fraction) plus `slack` bytes.
fn close(running: u64, exact: u64, lag: f64, slack: u64) -> bool {
    let gap = running.abs_diff(exact);
    gap as f64 <= exact as f64 * lag + slack as f64
}

fn assert_follows(db: &Db, what: &str) {
    let (running, exact) = (db.usage(), summed(db));
    // A sixteenth of a namespace's URLs unmeasured: their log bytes (8 in memory) and the
    // filters of leaves they were the first in (reserved already, so never in `committed`).
    let ok = close(running.memory_bytes, exact.memory_bytes, 0.25, 64 << 10)
        && close(running.committed_bytes, exact.committed_bytes, 0.25, 64 << 10)
        && close(running.disk_bytes, exact.disk_bytes, 0.25, 64 << 10);
    assert!(ok, "{what}: running {running:?} against the namespaces' own {exact:?}");
}

fn fill(ns: &Arc<Namespace>, stream: u64, n: usize) {
    let fps = support::fps(stream, n);
    for chunk in fps.chunks(1_000) {
        let mut out = vec![false; chunk.len()];
        ns.seen_fingerprints(chunk, &mut out).unwrap();
    }
}

fn exercise(db: &Db) {
    assert_eq!(db.usage(), Usage::default(), "an empty Db holds nothing");
    // Many small namespaces, one growing by splits, one reserved big and barely used.
    let small: Vec<_> = (0..200)
        .map(|i| {
            let ns = db.namespace_or_create(&format!("job:{i}"), support::small()).unwrap();
            fill(&ns, i, 10);
            ns
        })
        .collect();
    assert_follows(db, "200 small namespaces");
    let grown = db.create_namespace("grown", support::small()).unwrap();
    fill(&grown, 1_000, 50_000);
    grown.complete_splits();
    grown.seen_fingerprint(u64::MAX).unwrap(); // a write after the splits ended
    assert!(grown.stats().splits_done > 10);
    assert_follows(db, "a namespace grown by splits");
    let big = db
        .create_namespace("big", NamespaceOptions { capacity: 50_000_000, ..Default::default() })
        .unwrap();
    fill(&big, 2_000, 3_000);
    assert!(db.usage().committed_bytes >= big.stats().filter_reserved_bytes);
    assert_follows(db, "a big reservation");
    if db.path().is_some() {
        db.checkpoint().unwrap();
        assert_follows(db, "after a checkpoint");
    }
    drop(small);
    for i in 0..200 {
        assert!(db.drop_namespace(&format!("job:{i}")).unwrap());
    }
    assert_follows(db, "after dropping the small ones");
    drop((grown, big));
    assert!(db.drop_namespace("grown").unwrap());
    assert!(db.drop_namespace("big").unwrap());
    assert_eq!(db.usage(), Usage::default(), "every namespace dropped");
}

#[test]
fn the_running_totals_follow_the_namespaces_in_memory() {
    exercise(&Db::in_memory());
}

#[test]
fn the_running_totals_follow_the_namespaces_in_a_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    exercise(&Db::open(dir.path()).unwrap());
}

#[test]
fn a_reopened_directory_counts_what_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path()).unwrap();
        for i in 0..20 {
            let ns = db.namespace_or_create(&format!("job:{i}"), support::small()).unwrap();
            fill(&ns, i, 500);
        }
    }
    let db = Db::open(dir.path()).unwrap();
    // The namespaces are counted as they are opened (however they are loaded).
    for i in 0..20 {
        assert_eq!(db.namespace(&format!("job:{i}")).unwrap().len(), 500);
    }
    assert!(db.usage().disk_bytes > 0);
    assert_follows(&db, "reopened");
}
