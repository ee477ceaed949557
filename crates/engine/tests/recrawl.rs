//! Recrawl windows, with a fake clock: a URL recorded at `t` is seen until `t + W − W/g` and new
//! from `t + W`; the union of the generations stays under the FPR bound; memory is flat once the
//! window is full; ages survive a restart.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::sync::Arc;
use std::time::Duration;

use urlseen_engine::{
    Db, DbOptions, Error, FakeClock, Fsync, NamespaceOptions, SplitMode, SplitPolicy,
};

/// 8 s window, 8 generations of 1 s: the fake clock makes it instant.
const W: u64 = 8_000;
const G: u32 = 8;
const SPAN: u64 = W / G as u64;
/// Some time well after the epoch, not on a slot boundary.
const T0: u64 = 1_700_000_000_123;

fn window(capacity: u64) -> NamespaceOptions {
    NamespaceOptions {
        capacity,
        fpr: 0.01,
        recrawl_after: Some(Duration::from_millis(W)),
        generations: G,
        split: SplitPolicy { mode: SplitMode::Inline, ..SplitPolicy::default() },
        ..NamespaceOptions::default()
    }
}

/// A window whose false positives are too rare to show in a few thousand URLs: the tests of
/// what is new when assert "every one".
fn sharp(capacity: u64) -> NamespaceOptions {
    NamespaceOptions {
        capacity,
        fpr: 1e-7,
        recrawl_after: Some(Duration::from_millis(W)),
        generations: G,
        split: SplitPolicy { mode: SplitMode::Inline, ..SplitPolicy::default() },
        ..NamespaceOptions::default()
    }
}

fn memory_db(clock: &Arc<FakeClock>) -> Db {
    Db::in_memory_with(DbOptions { clock: clock.clone(), ..DbOptions::default() })
}

fn urls(tag: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("https://h{}.example/{tag}/{i}", i % 97)).collect()
}

/// splitmix64: distinct-looking fingerprints without canonicalizing anything.
fn fingerprints(seed: u64, n: usize) -> Vec<u64> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        })
        .collect()
}

#[test]
fn seen_until_w_minus_span_and_new_from_w() {
    // Recorded at several points of a slot: its start, its middle, its last millisecond.
    for offset in [0, SPAN / 2, SPAN - 1] {
        let start = T0 - T0 % SPAN + offset;
        let clock = FakeClock::at(start);
        let db = memory_db(&clock);
        let ns = db.create_namespace("w", sharp(10_000)).unwrap();
        let batch = urls(&format!("o{offset}"), 2_000);
        assert!(ns.seen_batch(&batch).unwrap().iter().all(|s| !s), "all new at first");
        // Every 100 ms up to W − W/g − 1 ms after recording: seen, by lookups and by
        // check-and-inserts (which must not record anything anew).
        let mut t = start;
        while t < start + W - SPAN {
            clock.set(t);
            assert!(
                ns.contains_batch(&batch).unwrap().iter().all(|&s| s),
                "lost at +{}",
                t - start
            );
            assert!(ns.seen_batch(&batch).unwrap().iter().all(|&s| s), "new at +{}", t - start);
            t += 100;
        }
        clock.set(start + W - SPAN - 1);
        assert!(ns.seen_batch(&batch).unwrap().iter().all(|&s| s));
        // From W on: every one is new (and recorded anew: seen right after).
        clock.set(start + W);
        let again = ns.seen_batch(&batch).unwrap();
        let new = again.iter().filter(|&&s| !s).count();
        assert_eq!(new, batch.len(), "offset {offset}: {new} of {} new again", batch.len());
        assert!(ns.seen_batch(&batch).unwrap().iter().all(|&s| s));
        assert_eq!(ns.len(), batch.len() as u64, "the expired generation no longer counts");
    }
}

#[test]
fn constant_inflow_for_3w_keeps_the_bound_and_flat_memory() {
    let clock = FakeClock::at(T0 - T0 % SPAN);
    let db = memory_db(&clock);
    let per_slot = 20_000usize;
    let options = window(per_slot as u64 * u64::from(G));
    let ns = db.create_namespace("flow", options.clone()).unwrap();
    let probes = fingerprints(u64::MAX / 3, 50_000);
    let slots = 3 * G as usize;
    let mut history: Vec<Vec<u64>> = Vec::new();
    let mut memory = Vec::new();
    let mut worst = 0.0f64;
    let mut recorded = Vec::new();
    for slot in 0..slots {
        // Inflow spread over the slot, in ten batches at ten times.
        let fps = fingerprints(slot as u64 + 1, per_slot);
        for (i, chunk) in fps.chunks(per_slot / 10).enumerate() {
            clock.set(T0 - T0 % SPAN + slot as u64 * SPAN + i as u64 * SPAN / 10);
            let mut out = vec![false; chunk.len()];
            ns.seen_fingerprints(chunk, &mut out).unwrap();
            // Those answered "seen" (false positives, about 1%) were never recorded.
            recorded.extend(chunk.iter().zip(&out).filter(|p| !*p.1).map(|p| *p.0));
        }
        history.push(std::mem::take(&mut recorded));
        db.wait_for_splits();
        // No false negatives: everything of the last g − 1 slots is seen.
        for old in history.iter().rev().take(G as usize - 1) {
            let mut out = vec![false; old.len()];
            ns.contains_fingerprints(old, &mut out).unwrap();
            assert!(out.iter().all(|&s| s), "slot {slot}: a recorded URL was lost");
        }
        // Measured FPR on fingerprints never recorded.
        let mut out = vec![false; probes.len()];
        ns.contains_fingerprints(&probes, &mut out).unwrap();
        let fpr = out.iter().filter(|&&s| s).count() as f64 / probes.len() as f64;
        worst = worst.max(fpr);
        let stats = ns.stats();
        let recrawl = stats.recrawl.as_ref().unwrap();
        assert!(recrawl.live.len() <= G as usize, "{} generations live", recrawl.live.len());
        println!(
            "slot {slot:2}: measured FPR {fpr:.5} (bound {}), estimated {:.5}, {} generations, \
             {} URLs, memory {} bytes",
            options.fpr,
            stats.worst_leaf_fpr,
            recrawl.live.len(),
            stats.count,
            stats.memory_bytes
        );
        // 50,000 probes: 3 standard deviations at 1% is 0.0013.
        assert!(fpr <= options.fpr + 0.0013, "slot {slot}: measured FPR {fpr}");
        assert!(stats.worst_leaf_fpr <= options.fpr, "estimated {}", stats.worst_leaf_fpr);
        memory.push(stats.memory_bytes);
    }
    println!("worst measured FPR {worst:.5}");
    // Flat after W: every slot from the window's end on holds what the first full window held.
    let full = memory[G as usize - 1];
    for (slot, &m) in memory.iter().enumerate().skip(G as usize - 1) {
        assert!(
            m as f64 <= full as f64 * 1.02 && m as f64 >= full as f64 * 0.98,
            "slot {slot}: {m} bytes, {full} at the first full window"
        );
    }
    assert!(memory[slots - 1] > memory[0] * (G as u64 - 1), "the window filled");
}

#[test]
fn ages_survive_a_restart_and_expired_files_go() {
    let dir = tempfile::tempdir().unwrap();
    let start = T0 - T0 % SPAN + 300;
    let clock = FakeClock::at(start);
    let open = |clock: &Arc<FakeClock>| {
        let options =
            DbOptions { clock: clock.clone(), fsync: Fsync::Always, ..DbOptions::default() };
        Db::open_with(dir.path(), options).unwrap()
    };
    let first = urls("first", 3_000);
    let later = urls("later", 3_000);
    {
        let db = open(&clock);
        let ns = db.create_namespace("crawl", sharp(10_000)).unwrap();
        assert!(ns.seen_batch(&first).unwrap().iter().all(|s| !s));
        clock.set(start + 3 * SPAN);
        assert!(ns.seen_batch(&later).unwrap().iter().all(|s| !s));
        db.close().unwrap();
    }
    let gen_dirs =
        || std::fs::read_dir(dir.path().join("ns").join(hex("crawl")).join("gen")).unwrap().count();
    assert_eq!(gen_dirs(), 2);
    {
        // Reopened later, but before W − W/g for both: both seen; the window is its own.
        clock.set(start + W - SPAN - 1);
        let db = open(&clock);
        let ns = db.namespace("crawl").unwrap();
        assert_eq!(ns.options().recrawl_after, Some(Duration::from_millis(W)));
        let r = ns.recrawl().unwrap();
        assert_eq!(r.live.len(), 2);
        assert_eq!(r.live[0].start_ms, start - start % SPAN);
        assert!((r.live[0].age_secs - (W - SPAN - 1 + 300) as f64 / 1000.0).abs() < 1e-9);
        assert!(ns.contains_batch(&first).unwrap().iter().all(|&s| s));
        assert!(ns.contains_batch(&later).unwrap().iter().all(|&s| s));
        db.close().unwrap();
    }
    {
        // Reopened after W for the first batch: it is new again, and its generation's files
        // were deleted by the open; the later batch is still seen.
        clock.set(start + W);
        let db = open(&clock);
        // By the load, at the namespace's first use.
        let ns = db.namespace("crawl").unwrap();
        assert_eq!(gen_dirs(), 1);
        assert!(ns.seen_batch(&later).unwrap().iter().all(|&s| s));
        assert!(ns.seen_batch(&first).unwrap().iter().all(|&s| !s));
        db.close().unwrap();
    }
    // A read-only open (urlseen stats) sees the same and changes nothing.
    let ro = Db::open_read_only(dir.path()).unwrap();
    assert!(ro.namespace("crawl").unwrap().recrawl().is_some());
}

fn hex(name: &str) -> String {
    name.bytes().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn one_new_per_url_per_window_under_concurrency_and_rotation() {
    let clock = FakeClock::at(T0 - T0 % SPAN);
    let db = memory_db(&clock);
    let ns = db.create_namespace("race", sharp(20_000)).unwrap();
    let batch = urls("race", 2_000);
    let news: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let mut new = 0;
                    for _ in 0..20 {
                        for chunk in batch.chunks(100) {
                            new += ns.seen_batch(chunk).unwrap().iter().filter(|&&x| !x).count();
                        }
                    }
                    new
                })
            })
            .collect();
        // Rotations while they run: up to W − W/g, so nothing may be new twice.
        for _ in 0..(G - 2) {
            std::thread::sleep(Duration::from_millis(5));
            clock.advance(Duration::from_millis(SPAN));
        }
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(news, batch.len());
}

#[test]
fn reservations_and_held_batches_go_through_the_window() {
    let clock = FakeClock::at(T0);
    let db = memory_db(&clock);
    let ns = db.create_namespace("serve", sharp(10_000)).unwrap();
    let fps: Vec<u64> = urls("r", 100).iter().map(|u| ns.fingerprint(u).unwrap()).collect();
    let mut out = vec![true; fps.len()];
    let reservation = ns.reserve_fingerprints(&fps, &mut out).unwrap();
    assert!(out.iter().all(|&s| !s));
    // In flight: seen by everyone else, even from a later generation.
    clock.advance(Duration::from_millis(SPAN));
    assert!(ns.contains_fingerprint(fps[0]).unwrap());
    reservation.commit().unwrap();
    let mut again = vec![false; fps.len()];
    ns.seen_fingerprints(&fps, &mut again).unwrap();
    assert!(again.iter().all(|&s| s));
    // A held batch: handed on with its answers before it counts.
    let more: Vec<u64> = urls("h", 50).iter().map(|u| ns.fingerprint(u).unwrap()).collect();
    let both: Vec<u64> = fps.iter().take(50).chain(&more).copied().collect();
    let mut out = vec![false; both.len()];
    let mut handed = Vec::new();
    ns.seen_fingerprints_then(&both, &mut out, &mut |answers| {
        handed = answers.to_vec();
        Ok(())
    })
    .unwrap();
    assert_eq!(handed, out);
    assert!(out[..50].iter().all(|&s| s) && out[50..].iter().all(|&s| !s));
    // Dropped uncommitted: new again.
    let late = ns.fingerprint("https://late.example/").unwrap();
    let mut one = [true];
    drop(ns.reserve_fingerprints(&[late], &mut one).unwrap());
    assert!(!one[0]);
    assert!(!ns.contains_fingerprint(late).unwrap());
}

#[test]
fn bad_windows_are_typed_errors() {
    let db = Db::in_memory();
    let bad = [
        NamespaceOptions { recrawl_after: Some(Duration::ZERO), ..NamespaceOptions::default() },
        NamespaceOptions {
            recrawl_after: Some(Duration::from_millis(1001)),
            ..NamespaceOptions::default()
        },
        NamespaceOptions {
            recrawl_after: Some(Duration::from_secs(60)),
            generations: 0,
            ..NamespaceOptions::default()
        },
        NamespaceOptions {
            recrawl_after: Some(Duration::from_secs(60)),
            counting: true,
            ..NamespaceOptions::default()
        },
        NamespaceOptions {
            recrawl_after: Some(Duration::from_secs(200 * 365 * 86_400)),
            ..NamespaceOptions::default()
        },
    ];
    for options in bad {
        let e = db.create_namespace("bad", options.clone()).unwrap_err();
        assert!(matches!(e, Error::InvalidOption { .. }), "{options:?}: {e}");
    }
    assert!(db.namespace("bad").is_none());
}

/// docs/recrawl.md's worked example at 1/1000 scale: a 30-day window, 8 generations, 1,000,000
/// URLs a month (not 10⁹) in a data directory, run for three months of fake time. Prints RAM,
/// disk and measured FPR at each slot. `cargo test --release -p urlseen-engine --test recrawl
/// -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement for docs/recrawl.md (about a minute)"]
fn worked_example_at_one_thousandth() {
    let dir = tempfile::tempdir().unwrap();
    let month: u64 = 30 * 86_400_000;
    let span = month / 8;
    let clock = FakeClock::at(T0 - T0 % span);
    let db = Db::open_with(
        dir.path(),
        DbOptions { clock: clock.clone(), fsync: Fsync::No, ..DbOptions::default() },
    )
    .unwrap();
    let options = NamespaceOptions {
        capacity: 1_000_000,
        fpr: 0.01,
        recrawl_after: Some(Duration::from_millis(month)),
        ..NamespaceOptions::default()
    };
    let ns = db.create_namespace("month", options).unwrap();
    let per_slot = 125_000usize;
    let probes = fingerprints(u64::MAX / 7, 200_000);
    for slot in 0..24u64 {
        let fps = fingerprints(slot + 1_000, per_slot);
        for (i, chunk) in fps.chunks(per_slot / 100).enumerate() {
            clock.set(T0 - T0 % span + slot * span + i as u64 * span / 100);
            let mut out = vec![false; chunk.len()];
            ns.seen_fingerprints(chunk, &mut out).unwrap();
        }
        db.wait_for_splits();
        ns.checkpoint().unwrap();
        let mut out = vec![false; probes.len()];
        ns.contains_fingerprints(&probes, &mut out).unwrap();
        let fpr = out.iter().filter(|&&s| s).count() as f64 / probes.len() as f64;
        let s = ns.stats();
        println!(
            "day {:5.2}: {} URLs in {} generations, RAM {} B ({:.2} B/URL), disk {} B ({:.2} \
             B/URL), measured FPR {fpr:.5}, estimated {:.5}",
            (slot + 1) as f64 * 3.75,
            s.count,
            s.recrawl.as_ref().unwrap().live.len(),
            s.memory_bytes,
            s.memory_bytes as f64 / s.count as f64,
            s.disk_bytes,
            s.disk_bytes as f64 / s.count as f64,
            s.worst_leaf_fpr
        );
    }
    db.close().unwrap();
}

/// The sizing of docs/recrawl.md's worked example: 30 days, 10⁹ URLs, 8 generations of 225
/// leaves of 1 MiB each, under `1 − (1 − 0.01)^(1/8)`.
#[test]
fn a_window_is_planned_as_g_generations() {
    let options = NamespaceOptions {
        capacity: 1_000_000_000,
        fpr: 0.01,
        recrawl_after: Some(Duration::from_secs(30 * 86_400)),
        ..NamespaceOptions::default()
    };
    let each = options.generation_options();
    assert_eq!(each.capacity, 125_000_000);
    assert_eq!(each.recrawl_after, None);
    assert!((1.0 - (1.0 - each.fpr).powi(8) - 0.01).abs() < 1e-12, "{}", each.fpr);
    let db = Db::in_memory();
    let s = db.create_namespace("one", each.clone()).unwrap().stats();
    println!(
        "a generation: {} leaves of {} bits, u = {}, k = {}, filters {} B",
        s.initial_leaves, s.leaf_bits, s.leaf_capacity, s.leaf_hashes, s.filter_reserved_bytes
    );
    // (Leaves split at 0.93 of u: 225 of them at 1.0.)
    assert_eq!((s.initial_leaves, s.leaf_capacity, s.leaf_hashes), (242, 556_326, 9));
    assert_eq!(each.planned_filter_bytes(), 242 << 20);
    assert_eq!(options.planned_filter_bytes(), 8 * (242 << 20));
    let plain = NamespaceOptions { recrawl_after: None, ..options };
    assert_eq!(plain.generation_options(), plain);
    println!("without a window: {} B of filters", plain.planned_filter_bytes());
}

/// A window in a data directory: checked by `check_data_dir` generation by generation; read
/// only, it refuses writes; dropped with its generations, and made anew empty.
#[test]
fn check_read_only_and_drop() {
    let start = T0 - T0 % SPAN;
    let clock = FakeClock::at(start);
    let dir = tempfile::tempdir().unwrap();
    let options = DbOptions { clock: clock.clone(), ..DbOptions::default() };
    let batch = urls("d", 500);
    {
        let db = Db::open_with(dir.path(), options.clone()).unwrap();
        let ns = db.create_namespace("w", sharp(10_000)).unwrap();
        ns.seen_batch(&batch).unwrap();
        clock.advance(Duration::from_millis(SPAN));
        ns.seen_batch(&urls("e", 500)).unwrap();
        db.close().unwrap();
    }
    let checks = urlseen_engine::check_data_dir(dir.path()).unwrap();
    let names: Vec<_> = checks.iter().map(|c| c.name.clone().unwrap_or_default()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(names[0], "w");
    assert!(names[1].starts_with("w (generation ") && names[2].starts_with("w (generation "));
    assert!(checks.iter().all(|c| c.problems.is_empty()), "{checks:?}");
    {
        let ro = Db::open_read_only(dir.path()).unwrap();
        let ns = ro.namespace("w").unwrap();
        // The read-only open uses the system clock: long after the fake one, so nothing is live.
        assert_eq!(ns.recrawl().unwrap().live.len(), 0);
        assert!(matches!(ns.seen("https://x.example/"), Err(Error::ReadOnly { .. })));
    }
    let db = Db::open_with(dir.path(), options).unwrap();
    let ns = db.namespace("w").unwrap();
    assert_eq!(ns.recrawl().unwrap().live.len(), 2);
    assert!(ns.contains_batch(&batch).unwrap().iter().all(|&s| s));
    drop(ns);
    assert!(db.drop_namespace("w").unwrap());
    assert!(db.namespace("w").is_none());
    assert_eq!(std::fs::read_dir(dir.path().join("ns")).unwrap().count(), 0);
    // Recreated: nothing of the old one is seen.
    let ns = db.create_namespace("w", sharp(10_000)).unwrap();
    assert!(ns.contains_batch(&batch).unwrap().iter().all(|&s| !s));
}

/// Rotation keeps at most g generations; a `Db::temporary` keeps a window's leaf files in its
/// spill directory, one directory per generation.
#[test]
fn rotation_keeps_g_generations_and_a_spill_window_lives_in_the_spill_directory() {
    let clock = FakeClock::at(T0 - T0 % SPAN);
    let db = memory_db(&clock);
    let ns = db.create_namespace("s", sharp(10_000)).unwrap();
    for slot in 0..(2 * G as u64) {
        clock.set(T0 - T0 % SPAN + slot * SPAN);
        ns.seen_batch(&urls(&format!("s{slot}"), 100)).unwrap();
        assert!(ns.recrawl().unwrap().live.len() <= G as usize);
    }
    assert_eq!(ns.len(), 100 * u64::from(G));
    let spill = tempfile::tempdir().unwrap();
    let tmp = Db::temporary(Some(spill.path())).unwrap();
    let window =
        NamespaceOptions { recrawl_after: Some(Duration::from_secs(3_600)), ..sharp(1_000) };
    let t = tmp.create_namespace("t", window).unwrap();
    assert!(!t.seen("https://a.example/").unwrap());
    assert!(t.seen("https://a.example/").unwrap());
    // Enough for a leaf to split: its records go to a file (a leaf of a few stays in RAM).
    t.seen_batch(&urls("spill", 5_000)).unwrap();
    t.complete_splits();
    let dirs = walk_dirs(tmp.spill_dir().unwrap());
    assert!(dirs.iter().any(|p| p.contains("/gen/") && p.ends_with("/leaves")), "{dirs:?}");
}

fn walk_dirs(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.push(path.display().to_string());
            out.extend(walk_dirs(&path));
        }
    }
    out
}
