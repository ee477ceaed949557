//! A namespace sized for 10,000 URLs takes 10,000,000 and keeps its FPR bound (issue 3's
//! acceptance), with no URL it recorded ever reported new again.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use urlseen_corpus::Generator;
use urlseen_engine::{Db, NamespaceOptions, SplitPolicy};

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
    assert!(stats.splits_done > 10, "the tree grew by splitting: {} splits", stats.splits_done);
    // Children larger than their parents (growth 4): shallow. Uniform leaves took height 12.
    assert!(stats.height <= 8, "height {} after growing 1,000x", stats.height);
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

/// A namespace sized for 100 items (RedisBloom's default `BF.RESERVE` capacity) and grown to
/// 2,000,000 has tens of leaves, not thousands: each child's filter has four times its parent's
/// bits (up to 1 MiB), so capacity grows about 8x per level instead of 2x. Every leaf stays under
/// the bound, and nothing recorded is lost. The same with uniform leaves, for contrast.
#[test]
fn a_namespace_grown_20000x_stays_shallow() {
    let shape = |growth: u32| {
        let db = Db::in_memory();
        let options = NamespaceOptions {
            capacity: 100,
            fpr: 0.01,
            split: SplitPolicy { growth, ..SplitPolicy::default() },
            ..NamespaceOptions::default()
        };
        let ns = db.create_namespace("bf", options).unwrap();
        const N: u64 = 2_000_000;
        let fps: Vec<u64> = (0..N).map(|i| urlseen_filter::hash::mix64(i + 77)).collect();
        let mut recorded = Vec::new();
        for chunk in fps.chunks(10_000) {
            let mut out = vec![false; chunk.len()];
            ns.seen_fingerprints(chunk, &mut out).unwrap();
            recorded.extend(chunk.iter().zip(&out).filter(|p| !p.1).map(|p| *p.0));
        }
        db.wait_for_splits();
        let mut hits = vec![false; recorded.len()];
        ns.contains_fingerprints(&recorded, &mut hits).unwrap();
        assert!(hits.iter().all(|&h| h), "growth {growth}: a recorded item was lost");
        let s = ns.stats();
        assert!(s.worst_leaf_fpr <= 0.01, "growth {growth}: worst leaf {}", s.worst_leaf_fpr);
        eprintln!(
            "growth {growth}: {} leaves, height {}, {} splits",
            s.leaf_count, s.height, s.splits_done
        );
        (s.leaf_count, s.height)
    };
    let (leaves, height) = shape(SplitPolicy::default().growth);
    assert!(leaves < 100, "{leaves} leaves (height {height}) for 2M items");
    let (uniform, uniform_height) = shape(1);
    assert!(uniform > 1000, "uniform leaves: {uniform}");
    assert!(height < uniform_height);
}
