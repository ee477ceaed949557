//! Exact and counting namespaces through the `Db`: exactly one "new" per URL under concurrent
//! writers while leaves split and Bloom false positives are common (leaf indexes in memory and
//! on disk); everything recorded survives reopening, the index being rebuilt from the leaf
//! files; `forget` makes a URL new again and leaves every other one seen, with saturated
//! counters, across reopen.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::sync::Barrier;
use std::sync::atomic::{AtomicU8, Ordering};

use urlseen_corpus::distinct_urls;
use urlseen_engine::{Db, Error, NamespaceOptions, SplitMode, SplitPolicy};

/// Tiny leaves at a 30 % FPR: many splits, and a Bloom positive for about every third new URL,
/// so the store decides often.
fn busy_exact(mode: SplitMode) -> NamespaceOptions {
    NamespaceOptions {
        capacity: 1_000,
        fpr: 0.3,
        leaf_bits: Some(1 << 12),
        split: SplitPolicy { mode, step: 101, growth: 1, ..SplitPolicy::default() },
        exact: true,
        ..NamespaceOptions::default()
    }
}

fn exactly_once(options: NamespaceOptions) {
    exactly_once_in(Db::in_memory(), options);
}

fn exactly_once_in(db: Db, options: NamespaceOptions) {
    const THREADS: usize = 4;
    const N: usize = 30_000;
    let splits = options.split.mode != SplitMode::Never;
    let ns = db.create_namespace("ns", options).unwrap();
    let urls = distinct_urls(7, N);
    let news: Vec<AtomicU8> = (0..N).map(|_| AtomicU8::new(0)).collect();
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (ns, urls, news, barrier) = (&ns, &urls, &news, &barrier);
            s.spawn(move || {
                // Each thread in its own order: forwards, backwards, and two strides.
                let mut order: Vec<usize> = (0..N).collect();
                match t {
                    1 => order.reverse(),
                    2 => order.sort_by_key(|&i| (i * 7919) % N),
                    3 => order.sort_by_key(|&i| (i * 104_729) % N),
                    _ => {}
                }
                barrier.wait();
                for chunk in order.chunks(50 + t * 37) {
                    let batch: Vec<&str> = chunk.iter().map(|&i| urls[i].as_str()).collect();
                    let seen = if t % 2 == 0 {
                        ns.seen_batch(&batch).unwrap()
                    } else {
                        batch.iter().map(|u| ns.seen(u).unwrap()).collect()
                    };
                    for (&i, &was) in chunk.iter().zip(&seen) {
                        if !was {
                            news[i].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });
    db.wait_for_splits();
    let wrong: Vec<(usize, u8)> = news
        .iter()
        .map(|n| n.load(Ordering::Relaxed))
        .enumerate()
        .filter(|&(_, n)| n != 1)
        .collect();
    assert!(
        wrong.is_empty(),
        "{} URLs not new exactly once, e.g. {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    let s = ns.stats();
    assert_eq!(s.count, N as u64);
    let e = s.exact.unwrap();
    assert_eq!(e.stored, N as u64);
    assert!(e.store_reads > 1000, "the index decided too rarely to test anything: {e:?}");
    if splits {
        assert!(s.splits_done > 10, "too few splits: {}", s.splits_done);
    }
    assert!(ns.contains_batch(&urls).unwrap().iter().all(|&h| h));
}

#[test]
fn exact_namespace_new_exactly_once_during_background_splits() {
    exactly_once(busy_exact(SplitMode::Background));
}

#[test]
fn exact_namespace_new_exactly_once_during_inline_splits() {
    exactly_once(busy_exact(SplitMode::Inline));
}

#[test]
fn counting_namespace_new_exactly_once() {
    exactly_once(NamespaceOptions { counting: true, ..busy_exact(SplitMode::Never) });
}

/// Everything recorded survives reopening, with the snapshot and from the log alone, and the
/// index is rebuilt from the leaf files each time: whatever a previous run (or a crash) left in
/// `index/` is not trusted.
#[test]
fn exact_namespace_survives_reopen_and_rebuilds_its_index() {
    let dir = tempfile::tempdir().unwrap();
    let first = distinct_urls(1, 20_000);
    let second = distinct_urls(2, 20_000);
    let never = distinct_urls(3, 20_000);
    let options =
        NamespaceOptions { capacity: 5_000, fpr: 0.05, exact: true, ..Default::default() };
    {
        let db = Db::open(dir.path()).unwrap();
        let ns = db.create_namespace("jobs", options.clone()).unwrap();
        assert!(ns.seen_batch(&first).unwrap().iter().all(|&s| !s));
        assert!(ns.stats().exact.unwrap().store_writes > 0, "no run was written");
        db.close().unwrap();
    }
    let ns_dir = std::fs::read_dir(dir.path().join("ns")).unwrap().next().unwrap().unwrap().path();
    // Leftovers of a crash: a run file the new index must not read.
    std::fs::create_dir_all(ns_dir.join("index")).unwrap();
    std::fs::write(ns_dir.join("index").join("0.run"), [0xffu8; 4096]).unwrap();
    {
        let db = Db::open(dir.path()).unwrap();
        let ns = db.namespace("jobs").unwrap();
        assert!(ns.seen_batch(&first).unwrap().iter().all(|&s| s), "lost after reopen");
        assert!(ns.seen_batch(&second).unwrap().iter().all(|&s| !s));
        db.close().unwrap();
    }
    // The last holder of the tree (a split worker finishing) removes it, a moment later.
    let gone = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        !ns_dir.join("index").exists()
    });
    assert!(gone, "a closed namespace leaves no index behind");
    // Without the snapshot everything comes back from the log.
    std::fs::remove_file(ns_dir.join("snapshot")).unwrap();
    let db = Db::open(dir.path()).unwrap();
    let ns = db.namespace("jobs").unwrap();
    assert!(ns.contains_batch(&first).unwrap().iter().all(|&s| s));
    assert!(ns.contains_batch(&second).unwrap().iter().all(|&s| s), "lost without a snapshot");
    let positives = ns.stats().exact.unwrap().store_reads;
    assert!(ns.seen_batch(&never).unwrap().iter().all(|&s| !s), "exact mode: a false positive");
    let e = ns.stats().exact.unwrap();
    assert!(e.store_reads > positives, "no Bloom positive went to the index: {e:?}");
    assert_eq!(e.stored, 60_000);
}

/// Version 0.1 kept a second copy of every fingerprint in `store/`; the leaf files hold them
/// all, so it is removed once the index is built from them.
#[test]
fn an_old_fingerprint_store_is_removed_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let urls = distinct_urls(4, 5_000);
    {
        let db = Db::open(dir.path()).unwrap();
        let o = NamespaceOptions { capacity: 1_000, exact: true, ..Default::default() };
        let ns = db.create_namespace("jobs", o).unwrap();
        assert!(ns.seen_batch(&urls).unwrap().iter().all(|&s| !s));
        db.close().unwrap();
    }
    let ns_dir = std::fs::read_dir(dir.path().join("ns")).unwrap().next().unwrap().unwrap().path();
    std::fs::create_dir_all(ns_dir.join("store").join("lsm")).unwrap();
    std::fs::write(ns_dir.join("store").join("URLSEEN-STORE"), b"old").unwrap();
    let db = Db::open(dir.path()).unwrap();
    // Removed when the namespace is loaded, at its first use.
    let ns = db.namespace("jobs").unwrap();
    assert!(!ns_dir.join("store").exists());
    assert!(ns.seen_batch(&urls).unwrap().iter().all(|&s| s));
    assert_eq!(ns.len(), 5_000);
}

/// The same concurrency check with leaves and index runs in files (a spill directory).
#[test]
fn exact_namespace_new_exactly_once_with_runs_on_disk() {
    let spill = tempfile::tempdir().unwrap();
    let db = Db::temporary(Some(spill.path())).unwrap();
    exactly_once_in(db, busy_exact(SplitMode::Background));
}

/// A directory left over from a drop whose removal failed half-way (here: put back by hand,
/// without its meta file) is not reused by a namespace created under the same name: its old
/// fingerprint store would confirm Bloom false positives for URLs the new namespace never
/// recorded.
#[test]
fn a_new_namespace_does_not_reuse_a_leftover_directory() {
    let dir = tempfile::tempdir().unwrap();
    let saved = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    let exact = NamespaceOptions { capacity: 10_000, exact: true, ..NamespaceOptions::default() };
    let urls = distinct_urls(12, 200);
    let ns = db.namespace_or_create("x", exact.clone()).unwrap();
    assert!(ns.seen_batch(&urls).unwrap().iter().all(|&s| !s));
    ns.sync().unwrap();
    drop(ns);
    let ns_dir = std::fs::read_dir(dir.path().join("ns")).unwrap().next().unwrap().unwrap().path();
    copy_dir(&ns_dir, saved.path());
    assert!(db.drop_namespace("x").unwrap());
    copy_dir(saved.path(), &ns_dir);
    std::fs::remove_file(ns_dir.join("meta")).unwrap();
    let ns = db.namespace_or_create("x", exact).unwrap();
    assert_eq!(ns.stats().exact.unwrap().stored, 0, "the new namespace's store is not empty");
    assert!(ns.seen_batch(&urls).unwrap().iter().all(|&s| !s));
    assert_eq!(ns.stats().exact.unwrap().stored, 200);
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Small counting filters for many URLs: every generation is crowded enough that counters
/// saturate, so forgetting must recount them from the store (seed 004's rule).
fn saturating_counting() -> NamespaceOptions {
    NamespaceOptions { capacity: 64, fpr: 0.99, exact: true, counting: true, ..Default::default() }
}

#[test]
fn counting_namespace_forget_with_saturated_counters_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let urls = distinct_urls(11, 6_000);
    let forgotten: Vec<&String> = urls.iter().step_by(3).collect();
    let kept: Vec<&String> =
        urls.iter().enumerate().filter(|(i, _)| i % 3 != 0).map(|p| p.1).collect();
    {
        let db = Db::open(dir.path()).unwrap();
        let ns = db.create_namespace("jobs", saturating_counting()).unwrap();
        assert!(ns.seen_batch(&urls).unwrap().iter().all(|&s| !s));
        let before = ns.stats().counting.unwrap();
        assert!(before.saturated_counters > 0, "no saturated counter: the test tests nothing");
        for url in &forgotten {
            assert!(ns.forget(url).unwrap(), "{url} was recorded");
        }
        assert!(!ns.forget(forgotten[0]).unwrap(), "forgetting twice finds nothing");
        let after = ns.stats().counting.unwrap();
        assert!(after.recounted_counters > 0, "no counter was recounted: {after:?}");
        assert!(
            ns.contains_batch(&forgotten).unwrap().iter().all(|&s| !s),
            "a forgotten URL is seen"
        );
        assert!(ns.contains_batch(&kept).unwrap().iter().all(|&s| s), "forget lost another URL");
        assert_eq!(ns.len(), kept.len() as u64);
        db.close().unwrap();
    }
    let db = Db::open(dir.path()).unwrap();
    let ns = db.namespace("jobs").unwrap();
    assert!(ns.contains_batch(&kept).unwrap().iter().all(|&s| s), "lost after reopen");
    // Forgotten URLs are new again, once.
    assert!(ns.seen_batch(&forgotten).unwrap().iter().all(|&s| !s));
    assert!(ns.seen_batch(&forgotten).unwrap().iter().all(|&s| s));
    assert_eq!(ns.len(), urls.len() as u64);
}

#[test]
fn forget_needs_a_counting_namespace() {
    let db = Db::in_memory();
    for exact in [false, true] {
        let name = format!("exact={exact}");
        let ns =
            db.create_namespace(&name, NamespaceOptions { exact, ..Default::default() }).unwrap();
        ns.seen("http://a.example/").unwrap();
        assert!(matches!(ns.forget("http://a.example/"), Err(Error::ForgetUnsupported(_))));
        assert!(ns.contains("http://a.example/").unwrap(), "a refused forget changed nothing");
    }
}
