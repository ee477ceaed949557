//! Exact mode has no false positives (beyond 64-bit fingerprint collisions, probability
//! ≤ n / 2^64 per query): n distinct URLs inserted, n *other* URLs queried, zero positives;
//! and a Bloom-only namespace on the same data stays within its bound.
//!
//! `exact_zero_false_positives_5m_plus_5m` is the acceptance run: 5,000,000 +
//! 5,000,000 through `Namespace` in a data directory, so the positives are confirmed by the
//! leaf indexes on disk, as in production. The 1,000,000 + 1,000,000 run does the
//! same and adds a counting namespace.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::time::Instant;

use urlseen_engine::{Db, Namespace, NamespaceOptions};

const FPR: f64 = 0.01;
const BATCH: usize = 10_000;

fn urls(seed: u64, n: usize) -> Vec<String> {
    let mut generator = urlseen_corpus::Generator::distinct(seed);
    (0..n)
        .map(|_| {
            let mut url = String::new();
            generator.next_into(&mut url);
            url
        })
        .collect()
}

/// Inserts `inserted` (all distinct), then queries `others` (none inserted). Returns (how many
/// inserts answered "seen", how many queries answered "seen").
fn run(ns: &Namespace, inserted: &[String], others: &[String]) -> (usize, usize) {
    let mut insert_positives = 0;
    for chunk in inserted.chunks(BATCH) {
        insert_positives += ns.seen_batch(chunk).unwrap().iter().filter(|&&s| s).count();
    }
    let mut query_positives = 0;
    for chunk in others.chunks(BATCH) {
        query_positives += ns.contains_batch(chunk).unwrap().iter().filter(|&&s| s).count();
    }
    // And nothing recorded was lost: a sample of the inserted URLs is still seen.
    for url in inserted.iter().step_by(97) {
        assert!(ns.contains(url).unwrap(), "false negative for {url}");
    }
    (insert_positives, query_positives)
}

fn options(n: usize, exact: bool, counting: bool) -> NamespaceOptions {
    NamespaceOptions { capacity: n as u64, fpr: FPR, exact, counting, ..Default::default() }
}

/// The Bloom-only bound, with room for sampling error: 4 standard deviations over `n` trials.
fn within_bound(positives: usize, n: usize) -> bool {
    let sigma = (FPR * (1.0 - FPR) / n as f64).sqrt();
    (positives as f64 / n as f64) <= FPR + 4.0 * sigma
}

fn check(db: &Db, n: usize, with_counting: bool) {
    let started = Instant::now();
    let inserted = urls(1, n);
    let others = urls(2, n);

    let bloom = db.create_namespace("bloom", options(n, false, false)).unwrap();
    let (insert_fp, query_fp) = run(&bloom, &inserted, &others);
    eprintln!(
        "{n}: Bloom-only: {insert_fp} inserts and {query_fp} queries answered seen (bound {FPR})"
    );
    assert!(within_bound(insert_fp, n), "Bloom-only insert FPR above its bound: {insert_fp}/{n}");
    assert!(within_bound(query_fp, n), "Bloom-only query FPR above its bound: {query_fp}/{n}");
    assert!(
        query_fp > 0,
        "a 1 % filter over {n} queries with no false positive is not a Bloom filter"
    );

    let exact = db.create_namespace("exact", options(n, true, false)).unwrap();
    let (insert_fp, query_fp) = run(&exact, &inserted, &others);
    let s = exact.stats();
    let e = s.exact.unwrap();
    eprintln!(
        "{n}: exact: {insert_fp} + {query_fp} positives; {} run page reads, {} found in runs",
        e.store_reads, e.store_hits
    );
    assert_eq!(insert_fp, 0, "exact mode answered seen for a distinct URL");
    assert_eq!(query_fp, 0, "exact mode answered seen for a URL never inserted");
    assert_eq!(s.count, n as u64);
    assert_eq!(e.stored, n as u64);
    assert!(e.store_reads > 0, "no Bloom positive reached a run: the test tests nothing");

    if with_counting {
        let counting = db.create_namespace("counting", options(n, true, true)).unwrap();
        let (insert_fp, query_fp) = run(&counting, &inserted, &others);
        eprintln!("{n}: counting: {insert_fp} + {query_fp} positives");
        assert_eq!((insert_fp, query_fp), (0, 0), "counting namespace answered a false seen");
        assert_eq!(counting.len(), n as u64);
    }
    eprintln!("{n}: {:.1} s", started.elapsed().as_secs_f64());
}

#[test]
fn exact_zero_false_positives_1m_plus_1m_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    check(&db, 1_000_000, true);
    db.close().unwrap();
}

/// The acceptance run.
#[test]
fn exact_zero_false_positives_5m_plus_5m() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    check(&db, 5_000_000, false);
    db.close().unwrap();
}
