//! Leaves are allocated lazily: a namespace reserved for a large capacity holds no filter memory
//! until its leaves record something, each leaf's filter counts in `memory_bytes` from its first
//! record on, a leaf that recorded nothing comes back unallocated after a restart, and nothing
//! recorded is lost through splits and restarts.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::path::Path;

use urlseen_engine::{
    Db, MIN_LEAF_BITS, Namespace, NamespaceOptions, NamespaceStats, SplitMode, SplitPolicy,
};

/// Bytes of one leaf's filter of `bits` bits once allocated: its 512-bit blocks, in whole 4 KiB
/// pages of the filter arena from 256 KiB to 8 MiB (on Linux), else on the heap with up to 7
/// words of alignment slack (see `urlseen_filter::BlockedBloom`).
fn filter_bytes(bits: u64) -> u64 {
    let blocks = bits.div_ceil(512) * 64;
    if cfg!(target_os = "linux") && ((256 << 10)..(8 << 20)).contains(&blocks) {
        blocks.next_multiple_of(4096)
    } else {
        blocks + 7 * 8
    }
}

/// The filter bytes of the leaves that recorded something, and of all leaves.
fn used_and_reserved(s: &NamespaceStats) -> (u64, u64) {
    let used = s.leaves.iter().filter(|l| l.count > 0).map(|l| filter_bytes(l.bits)).sum();
    let all = s.leaves.iter().map(|l| filter_bytes(l.bits)).sum();
    (used, all)
}

fn used_leaves(s: &NamespaceStats) -> u64 {
    s.leaves.iter().filter(|l| l.count > 0).count() as u64
}

/// The most a leaf file's write buffer holds in RAM (1,024 records of 16 bytes): it grows to
/// that as the leaf records.
const BUFFER_BYTES: u64 = 1024 * 16;

fn urls(from: u64, n: u64) -> Vec<String> {
    (from..from + n).map(|i| format!("https://lazy.example/{i}")).collect()
}

fn assert_all_seen(ns: &Namespace, urls: &[String]) {
    let hits = ns.contains_batch(urls).unwrap();
    let lost = hits.iter().filter(|&&h| !h).count();
    assert_eq!(lost, 0, "{lost} of {} recorded URLs answered new", urls.len());
}

fn open(dir: &Path) -> Db {
    Db::open(dir).unwrap()
}

#[test]
fn a_large_reservation_holds_little_until_its_leaves_are_used() {
    let dir = tempfile::tempdir().unwrap();
    let options = NamespaceOptions { capacity: 20_000_000, fpr: 0.01, ..Default::default() };
    let first = urls(0, 5);
    {
        let db = open(dir.path());
        let ns = db.create_namespace("big", options).unwrap();
        let s = ns.stats();
        // About 1.2 bytes per URL at 1 %, in leaves of 1 MiB: all of it reserved, none used.
        assert!(s.leaf_count >= 16, "{}", s.leaf_count);
        assert!(s.filter_reserved_bytes >= 20_000_000, "{}", s.filter_reserved_bytes);
        assert_eq!(s.filter_reserved_bytes, used_and_reserved(&s).1);
        assert_eq!(s.memory_bytes, 0, "an untouched namespace holds filter memory");

        // One URL: one leaf's filter (and its file buffer), not the reservation.
        assert!(!ns.seen(&first[0]).unwrap());
        let s = ns.stats();
        assert_eq!(used_leaves(&s), 1);
        let one = filter_bytes(s.leaf_bits);
        // Its buffer holds what the leaf recorded, not the bound it is flushed at.
        assert!(s.memory_bytes > one && s.memory_bytes <= one + 4 * 16, "{s:?}");

        // A few more: each leaf they reach is allocated once.
        let answers = ns.seen_batch(&first).unwrap();
        assert_eq!(answers, [true, false, false, false, false]);
        let s = ns.stats();
        let touched = used_leaves(&s);
        assert!((2..=5).contains(&touched), "{touched}");
        let used = used_and_reserved(&s).0;
        assert!(s.memory_bytes > used && s.memory_bytes <= used + touched * BUFFER_BYTES);
        assert!(s.memory_bytes * 3 < s.filter_reserved_bytes, "{s:?}");
        db.close().unwrap();
    }
    // Through a restart: the untouched leaves' (all-zero) filters are read back unallocated.
    let many = urls(1_000, 200_000);
    {
        let db = open(dir.path());
        let ns = db.namespace("big").unwrap();
        let s = ns.stats();
        assert_eq!(s.count, 5);
        assert_eq!(s.memory_bytes, used_and_reserved(&s).0, "{s:?}");
        assert!(used_leaves(&s) <= 5);
        assert_all_seen(&ns, &first);

        // Used everywhere, it holds its whole reservation (and the buffers).
        let answers = ns.seen_batch(&many).unwrap();
        assert!(answers.iter().filter(|&&a| !a).count() > 199_000);
        let s = ns.stats();
        assert_eq!(used_leaves(&s), s.leaf_count as u64);
        assert!(s.memory_bytes >= s.filter_reserved_bytes, "{s:?}");
        db.close().unwrap();
    }
    let db = open(dir.path());
    let ns = db.namespace("big").unwrap();
    assert_all_seen(&ns, &first);
    assert_all_seen(&ns, &many);
    assert_eq!(ns.stats().memory_bytes, ns.stats().filter_reserved_bytes);
}

#[test]
fn lazy_leaves_lose_nothing_through_splits_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    // Small leaves, split inline: many leaves, most of them split while the test runs.
    let options = NamespaceOptions {
        capacity: 50_000,
        leaf_bits: Some(MIN_LEAF_BITS.max(4096)),
        split: SplitPolicy { mode: SplitMode::Inline, ..Default::default() },
        ..Default::default()
    };
    let few = urls(0, 3);
    let many = urls(100, 120_000);
    let mut recorded = Vec::new();
    {
        let db = open(dir.path());
        let ns = db.create_namespace("splits", options).unwrap();
        for u in &few {
            if !ns.seen(u).unwrap() {
                recorded.push(u.clone());
            }
        }
        let s = ns.stats();
        assert!(s.leaf_count > 100, "{}", s.leaf_count);
        assert!(used_leaves(&s) <= 3);
        let used = used_and_reserved(&s).0;
        assert!(s.memory_bytes <= used + used_leaves(&s) * BUFFER_BYTES, "{s:?}");
        db.close().unwrap();
    }
    {
        let db = open(dir.path());
        let ns = db.namespace("splits").unwrap();
        let s = ns.stats();
        assert_eq!(s.memory_bytes, used_and_reserved(&s).0, "{s:?}");
        assert_all_seen(&ns, &recorded);
        for chunk in many.chunks(10_000) {
            let answers = ns.seen_batch(chunk).unwrap();
            recorded.extend(chunk.iter().zip(answers).filter(|p| !p.1).map(|p| p.0.clone()));
            // During and after splits, nothing recorded answers new.
            assert_all_seen(&ns, &recorded);
        }
        let s = ns.stats();
        assert!(s.splits_done > 50, "{}", s.splits_done);
        assert!(s.worst_leaf_fpr <= 0.01);
        db.close().unwrap();
    }
    let db = open(dir.path());
    let ns = db.namespace("splits").unwrap();
    let s = ns.stats();
    assert_eq!(s.count, recorded.len() as u64);
    // After a restart exactly the leaves that hold records hold filter memory.
    assert_eq!(s.memory_bytes, used_and_reserved(&s).0, "{s:?}");
    assert_all_seen(&ns, &recorded);
}
