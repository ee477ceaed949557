//! A namespace sized for 10,000 URLs takes 10,000,000 and keeps its FPR bound (issue 3's
//! acceptance), with no URL it recorded ever reported new again.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use urlseen_corpus::Generator;
use urlseen_engine::{Db, NamespaceOptions};

#[test]
fn capacity_10k_takes_10m_within_fpr_bound_and_no_false_negatives() {
    let db = Db::in_memory();
    let ns = db
        .create_namespace(
            "grow",
            NamespaceOptions { capacity: 10_000, fpr: 0.01, ..NamespaceOptions::default() },
        )
        .unwrap();
    const N: usize = 10_000_000;
    const BATCH: usize = 10_000;
    let mut inserted = Generator::distinct(1001);
    let mut batch: Vec<String> = Vec::with_capacity(BATCH);
    // Positions whose first insert was answered "seen": false positives of the moment, which
    // are not recorded. Every other URL was recorded and must stay seen.
    let mut not_recorded = std::collections::HashSet::new();
    for b in 0..N / BATCH {
        batch.clear();
        batch.extend(inserted.by_ref().take(BATCH));
        for (i, &seen) in ns.seen_batch(&batch).unwrap().iter().enumerate() {
            if seen {
                not_recorded.insert(b * BATCH + i);
            }
        }
    }
    let reported_seen = not_recorded.len() as u64;
    db.wait_for_splits();
    let stats = ns.stats();
    assert!(stats.splits_done > 100, "the tree grew by splitting: {} splits", stats.splits_done);
    assert_eq!(stats.splitting_nodes, 0);
    assert!(stats.worst_leaf_fpr <= 0.01, "worst leaf estimate {}", stats.worst_leaf_fpr);
    // Distinct URLs reported seen on insert are false positives of the moment: at most f_max.
    assert!(
        (reported_seen as f64) < 0.0125 * N as f64,
        "{reported_seen} first inserts reported seen"
    );
    assert_eq!(stats.count + reported_seen, N as u64);

    // Zero false negatives: no recorded URL is reported new again.
    let mut again = Generator::distinct(1001);
    let mut lost = 0;
    for b in 0..N / BATCH {
        batch.clear();
        batch.extend(again.by_ref().take(BATCH));
        for (i, &hit) in ns.seen_batch(&batch).unwrap().iter().enumerate() {
            if !hit && !not_recorded.contains(&(b * BATCH + i)) {
                lost += 1;
            }
        }
    }
    assert_eq!(lost, 0, "{lost} recorded URLs were reported new again");

    // Measured FPR on 1,000,000 other URLs.
    let others: Vec<String> = Generator::distinct(2002).take(1_000_000).collect();
    let fp = ns.contains_batch(&others).unwrap().iter().filter(|&&h| h).count();
    let fpr = fp as f64 / others.len() as f64;
    eprintln!(
        "10M URLs: {} leaves, height {}, {} splits, {:.1} MiB; measured FPR {fpr:.5}, worst leaf estimate {:.5}",
        stats.leaf_count,
        stats.height,
        stats.splits_done,
        stats.memory_bytes as f64 / 1048576.0,
        stats.worst_leaf_fpr
    );
    assert!(fpr <= 0.0125, "measured FPR {fpr} over 1.25 × 0.01");
}
