//! Seen stays seen: a fingerprint answered "seen" on a false Bloom positive keeps getting
//! "seen" after every split, restart and crash (issue 11 item 7). A split rebuilds the
//! children's bits from the parent's log, which holds only recorded URLs, so without the kept
//! records that the tree logs for such answers most of them would flip to "new".
//!
//! Only a set of raw items keeps its positives (profile `none`, as every `BF.*` key is: the
//! RedisBloom promise); a URL namespace keeps only what it recorded, and its repeats write
//! nothing (the last tests here).

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use support::{crash_image, fps};
use urlseen_canon::{Options as CanonOptions, Profile};
use urlseen_engine::{Db, NamespaceOptions, SplitMode, SplitPolicy};

mod support;

/// A set of raw items with a loose bound, tiny leaves and no growth: many false positives,
/// then many splits.
fn loose(mode: SplitMode) -> NamespaceOptions {
    NamespaceOptions {
        capacity: 2_000,
        fpr: 0.1,
        canon: CanonOptions::new(Profile::None),
        split: SplitPolicy { growth: 1, mode, ..SplitPolicy::default() },
        ..NamespaceOptions::default()
    }
}
/// Fills the namespace, then checks fresh fingerprints: those answered "seen" are false
/// positives (the rest are recorded). Returns them and how many were recorded in all.
fn provoke_false_positives(db: &Db) -> (Vec<u64>, u64) {
    let ns = db.namespace_or_create("ns", loose(SplitMode::Inline)).unwrap();
    let fill = fps(1, 1_900);
    let mut out = vec![false; fill.len()];
    ns.seen_fingerprints(&fill, &mut out).unwrap();
    let mut recorded = out.iter().filter(|&&seen| !seen).count() as u64;
    let probe = fps(2, 20_000);
    let mut out = vec![false; probe.len()];
    ns.seen_fingerprints(&probe, &mut out).unwrap();
    recorded += out.iter().filter(|&&seen| !seen).count() as u64;
    let seen: Vec<u64> = probe.iter().zip(&out).filter(|p| *p.1).map(|p| *p.0).collect();
    (seen, recorded)
}

/// Grows the namespace 25-fold: every leaf that held a false positive splits, several times.
fn grow(db: &Db) -> u64 {
    let ns = db.namespace("ns").unwrap();
    let more = fps(3, 50_000);
    let mut out = vec![false; more.len()];
    ns.seen_fingerprints(&more, &mut out).unwrap();
    db.wait_for_splits();
    out.iter().filter(|&&seen| !seen).count() as u64
}

/// Every fingerprint of `seen` is still "seen", by a lookup and by a check-and-insert.
fn assert_still_seen(db: &Db, seen: &[u64], when: &str) {
    let ns = db.namespace("ns").unwrap();
    let mut out = vec![false; seen.len()];
    ns.contains_fingerprints(seen, &mut out).unwrap();
    let flipped = out.iter().filter(|&&hit| !hit).count();
    assert_eq!(flipped, 0, "{when}: {flipped} of {} \"seen\" answers flipped", seen.len());
    ns.seen_fingerprints(seen, &mut out).unwrap();
    let flipped = out.iter().filter(|&&hit| !hit).count();
    assert_eq!(flipped, 0, "{when}: {flipped} of {} re-checks answered new", seen.len());
}

#[test]
fn false_positives_stay_seen_through_splits_in_memory() {
    let db = Db::in_memory();
    let (seen, recorded) = provoke_false_positives(&db);
    assert!(seen.len() > 200, "the test needs false positives, got {}", seen.len());
    let splits_before = db.namespace("ns").unwrap().stats().splits_done;
    let recorded = recorded + grow(&db);
    let stats = db.namespace("ns").unwrap().stats();
    assert!(stats.splits_done > splits_before + 20, "{} splits", stats.splits_done);
    assert_still_seen(&db, &seen, "after splits");
    // Kept records are not URLs: the count is what was answered new, and they take no room.
    assert_eq!(stats.count, recorded);
    assert!(stats.kept >= seen.len() as u64, "{} kept for {} positives", stats.kept, seen.len());
}

#[test]
fn false_positives_stay_seen_through_restart_and_crash() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let db = Db::open(&data).unwrap();
    let (seen, recorded) = provoke_false_positives(&db);
    assert!(seen.len() > 200, "the test needs false positives, got {}", seen.len());
    // A crash image now: the kept records are in the log only (no checkpoint since), and
    // recovery replays them into the leaves, so the splits after it carry them.
    db.sync().unwrap();
    let crashed = dir.path().join("crashed");
    crash_image(&data, &crashed);
    let recorded = recorded + grow(&db);
    assert_still_seen(&db, &seen, "after splits");
    db.close().unwrap();

    // A clean restart: the snapshot holds the kept records' counts, the leaf files the records.
    let db = Db::open(&data).unwrap();
    assert_eq!(db.namespace("ns").unwrap().stats().count, recorded);
    assert_still_seen(&db, &seen, "after a restart");
    grow_again(&db);
    assert_still_seen(&db, &seen, "after a restart and more splits");
    db.close().unwrap();

    let db = Db::open(&crashed).unwrap();
    let stats = db.namespace("ns").unwrap().stats();
    assert!(stats.kept >= seen.len() as u64, "replayed {} kept records", stats.kept);
    grow(&db);
    assert_still_seen(&db, &seen, "after a crash and splits");
    db.close().unwrap();
}

fn grow_again(db: &Db) {
    let ns = db.namespace("ns").unwrap();
    let more = fps(4, 50_000);
    let mut out = vec![false; more.len()];
    ns.seen_fingerprints(&more, &mut out).unwrap();
    db.wait_for_splits();
}
/// With background splits, checks meet frozen filters mid-split: a positive there is kept in
/// the leaf below, since the frozen filter goes when the split ends.
#[test]
fn positives_of_frozen_filters_stay_seen_with_background_splits() {
    let db = Db::in_memory();
    let ns = db.namespace_or_create("ns", loose(SplitMode::Background)).unwrap();
    let mut seen = Vec::new();
    // Small batches, so checks run while earlier splits migrate.
    for (round, batch) in fps(5, 60_000).chunks(500).enumerate() {
        let mut out = vec![false; batch.len()];
        ns.seen_fingerprints(batch, &mut out).unwrap();
        if round > 3 {
            seen.extend(batch.iter().zip(&out).filter(|p| *p.1).map(|p| *p.0));
        }
    }
    db.wait_for_splits();
    assert!(seen.len() > 1_000, "the test needs false positives, got {}", seen.len());
    assert!(ns.stats().splits_done > 20);
    assert_still_seen(&db, &seen, "after background splits");
}

/// Repeated checks of recorded URLs log kept records (the table of recent ones is small); a
/// split carries only those the parent had not recorded, once each.
#[test]
fn a_split_drops_kept_records_of_recorded_fingerprints() {
    let db = Db::in_memory();
    let ns = db.namespace_or_create("ns", loose(SplitMode::Inline)).unwrap();
    let fill = fps(6, 1_500);
    let mut out = vec![false; fill.len()];
    ns.seen_fingerprints(&fill, &mut out).unwrap();
    let fill_positives = out.iter().filter(|&&seen| seen).count() as u64;
    for _ in 0..5 {
        ns.seen_fingerprints(&fill, &mut out).unwrap();
        assert!(out.iter().all(|&seen| seen));
    }
    let before = ns.stats();
    assert!(before.kept > 5_000, "{} kept records before the splits", before.kept);
    let grow_positives = 50_000 - grow(&db);
    let after = ns.stats();
    assert!(after.splits_done > before.splits_done + 20);
    // What is left: one kept record per false positive (each fingerprint checked once, or
    // repeated within a leaf that has not split since the repeats).
    let false_positives = fill_positives + grow_positives;
    assert!(
        after.kept <= false_positives + 100,
        "{} kept records after the splits, for {false_positives} false positives",
        after.kept
    );
    assert_still_seen(&db, &fill, "after the splits");
}

/// A URL namespace keeps what it recorded and nothing more: checking the same URLs again, in
/// memory or in a data directory, writes nothing (no kept record, not a byte of log), so its
/// disk grows with distinct URLs only, while every recorded URL stays seen through the splits
/// that follow.
#[test]
fn repeats_in_a_url_namespace_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for persistent in [false, true] {
        let db = match persistent {
            true => Db::open(dir.path()).unwrap(),
            false => Db::in_memory(),
        };
        let options = NamespaceOptions {
            capacity: 2_000,
            fpr: 0.1,
            split: SplitPolicy { growth: 1, ..SplitPolicy::default() },
            ..NamespaceOptions::default()
        };
        let ns = db.namespace_or_create("urls", options).unwrap();
        let urls: Vec<String> =
            (0..20_000).map(|i| format!("https://e{}.example/p/{i}", i % 97)).collect();
        let first = ns.seen_batch(&urls).unwrap();
        let recorded: Vec<&String> =
            urls.iter().zip(&first).filter(|p| !*p.1).map(|p| p.0).collect();
        assert!(recorded.len() > 15_000, "{} recorded", recorded.len());
        db.wait_for_splits();
        // A URL first answered "seen" on a false positive was not recorded, and after a split
        // may come back "new" once (and be recorded then): at most a few passes' worth.
        let mut passes = 0;
        while ns.seen_batch(&urls).unwrap().iter().any(|&seen| !seen) {
            db.wait_for_splits();
            passes += 1;
            assert!(passes < 5, "false positives keep coming back");
        }
        let log_before = ns.stats().persistence.map(|p| p.log_bytes);
        for _ in 0..3 {
            assert!(ns.seen_batch(&urls).unwrap().iter().all(|&seen| seen));
        }
        let stats = ns.stats();
        assert_eq!(stats.kept, 0, "repeats kept as records");
        assert_eq!(stats.persistence.map(|p| p.log_bytes), log_before, "repeats were logged");
        // Recorded stays seen when the tree grows.
        let more: Vec<String> = (0..60_000).map(|i| format!("https://more.example/{i}")).collect();
        ns.seen_batch(&more).unwrap();
        db.wait_for_splits();
        for url in &recorded {
            assert!(ns.contains(url).unwrap(), "{url} recorded, then answered new");
        }
        drop(ns);
        drop(db);
    }
}
