//! A data directory's small namespaces live in one journal (`DIR/small.log`), not a directory
//! each: they survive restarts and crashes under every fsync policy, hold no descriptor, move
//! to a directory of their own when they grow (keeping every URL, once), and stay gone when
//! dropped.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use urlseen_engine::storage::FaultyStorage;
use urlseen_engine::{Db, DbOptions, Error, Fsync, NamespaceOptions};

mod support;
use support::crash_image;

/// What `URL.SEEN` and `BF.ADD` make for a name they meet first.
fn small() -> NamespaceOptions {
    NamespaceOptions { capacity: 100, ..NamespaceOptions::default() }
}

fn url(ns: usize, i: usize) -> String {
    format!("https://h{}.example/{ns}/{i}", ns % 7)
}

fn urls(ns: usize, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| url(ns, i)).collect()
}

fn open(dir: &Path, fsync: Fsync) -> Db {
    Db::open_with(dir, DbOptions { fsync, max_open_files: 64, ..DbOptions::default() }).unwrap()
}

/// Namespace directories in `dir`.
fn directories(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("ns")).unwrap().count()
}

#[test]
fn thousands_of_small_namespaces_make_no_directory_and_survive_a_restart() {
    for fsync in [Fsync::Always, Fsync::EverySec, Fsync::No] {
        let dir = tempfile::tempdir().unwrap();
        let n = 2_000;
        {
            let db = open(dir.path(), fsync);
            for ns in 0..n {
                let job = db.namespace_or_create(&format!("job:{ns}"), small()).unwrap();
                assert_eq!(job.seen_batch(&urls(ns, 0..5)).unwrap(), [false; 5], "{fsync}");
                assert_eq!(job.seen_batch(&urls(ns, 3..6)).unwrap(), [true, true, false]);
            }
            assert_eq!(directories(dir.path()), 0, "{fsync}: no directory per namespace");
            assert_eq!(db.loaded_counts(), (n, 0), "{fsync}: loaded, no descriptor held");
            db.close().unwrap();
        }
        let db = open(dir.path(), fsync);
        assert_eq!(db.namespace_count(), n);
        assert_eq!(db.loaded_counts().1, 0);
        for ns in 0..n {
            let job = db.namespace(&format!("job:{ns}")).unwrap();
            assert_eq!(job.contains_batch(&urls(ns, 0..6)).unwrap(), [true; 6], "{fsync} {ns}");
            assert!(!job.contains(&url(ns, 6)).unwrap());
            assert_eq!(job.stats().count, 6);
        }
        // Read-only (`urlseen stats`): the same answers, nothing written.
        drop(db);
        let before = std::fs::read(dir.path().join("small.log")).unwrap();
        let db = Db::open_read_only(dir.path()).unwrap();
        assert_eq!(db.namespace_count(), n);
        assert!(db.namespace("job:7").unwrap().contains(&url(7, 5)).unwrap());
        assert!(db.namespace("job:7").unwrap().seen(&url(7, 9)).is_err(), "read-only");
        assert_eq!(std::fs::read(dir.path().join("small.log")).unwrap(), before);
    }
}

#[test]
fn a_namespace_that_grows_moves_to_a_directory_once_and_keeps_every_url() {
    for fsync in [Fsync::Always, Fsync::EverySec] {
        let dir = tempfile::tempdir().unwrap();
        let mut new = Vec::new();
        {
            let db = open(dir.path(), fsync);
            let job = db.create_namespace("big", small()).unwrap();
            db.create_namespace("other", small()).unwrap().seen(&url(1, 0)).unwrap();
            for chunk in (0..2_000).collect::<Vec<_>>().chunks(50) {
                let batch = urls(0, chunk[0]..chunk[0] + chunk.len());
                let seen = job.seen_batch(&batch).unwrap();
                new.extend(batch.into_iter().zip(seen).filter(|p| !p.1).map(|p| p.0));
                assert_eq!(directories(dir.path()) > 0, chunk[0] + 50 > 128, "at {}", chunk[0]);
            }
            // Exact while a list; a tree's false positives (1%) after.
            assert!(new.len() >= 1_960, "{fsync}: {} of 2,000 answered new", new.len());
            assert_eq!(directories(dir.path()), 1);
            assert!(job.contains_batch(&new).unwrap().iter().all(|&s| s));
            drop(job);
            db.close().unwrap();
        }
        for _ in 0..2 {
            let db = open(dir.path(), fsync);
            assert_eq!(db.namespace_names(), ["big", "other"], "{fsync}: once, not twice");
            let job = db.namespace("big").unwrap();
            let lost = job.contains_batch(&new).unwrap().iter().filter(|&&s| !s).count();
            assert_eq!(lost, 0, "{fsync}: of {} answered new", new.len());
            assert_eq!(directories(dir.path()), 1, "{fsync}: in its own directory");
            assert!(db.namespace("other").unwrap().contains(&url(1, 0)).unwrap());
        }
        // Dropped, it stays dropped: neither its directory nor the journal's copy returns.
        let db = open(dir.path(), fsync);
        assert!(db.drop_namespace("big").unwrap());
        drop(db);
        let db = open(dir.path(), fsync);
        assert_eq!(db.namespace_names(), ["other"]);
        assert_eq!(directories(dir.path()), 0);
    }
}

#[test]
fn a_dropped_namespace_stays_gone_and_its_name_starts_afresh() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = open(dir.path(), Fsync::Always);
        db.create_namespace("job", small()).unwrap().seen(&url(0, 0)).unwrap();
        db.create_namespace("gone", small()).unwrap().seen(&url(0, 0)).unwrap();
        assert!(db.drop_namespace("job").unwrap());
        assert!(db.drop_namespace("gone").unwrap());
        db.create_namespace("job", small()).unwrap().seen(&url(0, 1)).unwrap();
    }
    let db = open(dir.path(), Fsync::Always);
    assert_eq!(db.namespace_names(), ["job"]);
    let job = db.namespace("job").unwrap();
    assert_eq!(job.contains_batch(&[url(0, 0), url(0, 1)]).unwrap(), [false, true]);
}

/// A crash (the directory copied as it is, no close) under `always` keeps every URL answered
/// "new", in the journal and in the directory a namespace moved to just before (its `gone`
/// record appended to the journal but not yet written: both copies are found, the directory is
/// kept and the journal's copy dropped).
#[test]
fn a_crash_keeps_every_acknowledged_url_also_right_after_a_move() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Fsync::Always);
    for ns in 0..200 {
        db.create_namespace(&format!("job:{ns}"), small()).unwrap();
        let job = db.namespace(&format!("job:{ns}")).unwrap();
        assert_eq!(job.seen_batch(&urls(ns, 0..10)).unwrap(), [false; 10]);
    }
    let big = db.namespace("job:0").unwrap();
    let batch = urls(0, 10..300);
    let seen = big.seen_batch(&batch).unwrap();
    let new: Vec<String> = batch.into_iter().zip(seen).filter(|p| !p.1).map(|p| p.0).collect();
    assert!(new.len() > 280, "{}", new.len());
    let image = tempfile::tempdir().unwrap();
    crash_image(dir.path(), image.path());
    drop(big);
    drop(db);
    for _ in 0..2 {
        let db = Db::open(image.path()).unwrap();
        assert_eq!(db.namespace_count(), 200);
        for ns in 0..200 {
            let job = db.namespace(&format!("job:{ns}")).unwrap();
            assert_eq!(job.contains_batch(&urls(ns, 0..10)).unwrap(), vec![true; 10], "{ns}");
        }
        let big = db.namespace("job:0").unwrap();
        assert!(big.contains_batch(&new).unwrap().iter().all(|&s| s), "the moved one");
    }
}

#[test]
fn a_torn_journal_tail_is_cut_and_damage_in_the_middle_refused() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = open(dir.path(), Fsync::Always);
        for ns in 0..10 {
            db.create_namespace(&format!("job:{ns}"), small()).unwrap().seen(&url(ns, 0)).unwrap();
        }
    }
    let path = dir.path().join("small.log");
    let whole = std::fs::read(&path).unwrap();
    let mut torn = whole.clone();
    torn.extend_from_slice(&[24, 0, 0, 0, 8, 0, 0, 0, 1, 2, 3]);
    std::fs::write(&path, &torn).unwrap();
    {
        let db = open(dir.path(), Fsync::Always);
        assert_eq!(db.namespace_count(), 10);
        assert!(db.namespace("job:9").unwrap().contains(&url(9, 0)).unwrap());
    }
    assert_eq!(std::fs::read(&path).unwrap().len(), whole.len(), "the torn tail was cut");
    let mut damaged = std::fs::read(&path).unwrap();
    damaged[40] ^= 0xff;
    std::fs::write(&path, &damaged).unwrap();
    let err = Db::open(dir.path()).unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
}

/// A full disk while small namespaces write to the journal: writes are refused while it lasts,
/// go on once it is freed (after the retry interval, without a reopen), and a crash image
/// holds every URL answered "new".
#[test]
fn a_full_disk_refuses_journal_writes_then_they_resume() {
    for fsync in [Fsync::Always, Fsync::EverySec] {
        let dir = tempfile::tempdir().unwrap();
        let storage = FaultyStorage::new();
        let options =
            DbOptions { fsync, storage: Arc::new(storage.clone()), ..DbOptions::default() };
        let db = Db::open_with(dir.path(), options).unwrap();
        let mut acked = Vec::new();
        let mut write = |ns: usize, i: usize| -> Result<(), Error> {
            let job = db.namespace_or_create(&format!("job:{ns}"), small())?;
            let batch = urls(ns, i..i + 4);
            let seen = job.seen_batch(&batch)?;
            acked.extend(batch.into_iter().zip(seen).filter(|p| !p.1).map(|p| (ns, p.0)));
            // `everysec` writes at the next sync: make it now, so the failure shows.
            job.sync()
        };
        for ns in 0..50 {
            write(ns, 0).unwrap();
        }
        storage.disk_full_after(2_000);
        let failed = (50..500).find_map(|ns| write(ns, 0).err());
        assert!(failed.is_some(), "{fsync}: the disk filled up");
        storage.disk_full_after(u64::MAX);
        std::thread::sleep(Duration::from_millis(1_100));
        for ns in 500..600 {
            write(ns, 0).unwrap_or_else(|e| panic!("{fsync}: {e}"));
        }
        let image = tempfile::tempdir().unwrap();
        crash_image(dir.path(), image.path());
        drop(db);
        let db = Db::open(image.path()).unwrap();
        for (ns, u) in &acked {
            let job = db.namespace(&format!("job:{ns}")).unwrap();
            assert!(job.contains(u).unwrap(), "{fsync}: {u} answered new, lost");
        }
    }
}
