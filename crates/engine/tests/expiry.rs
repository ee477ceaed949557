//! Key lifetimes, with a fake clock: a namespace past its time is gone for every call at once,
//! its files are freed by the active cycle without any call touching it, and times survive a
//! restart (a namespace that expired while the `Db` was closed is dropped at open).

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use urlseen_engine::{Db, DbOptions, Expiry, ExpiryUpdate, FakeClock, Fsync, NamespaceOptions};

/// Some time well after the epoch.
const T0: u64 = 1_700_000_000_000;

fn options(clock: &Arc<FakeClock>, fsync: Fsync) -> DbOptions {
    DbOptions { fsync, clock: Arc::clone(clock) as _, ..DbOptions::default() }
}

fn small() -> NamespaceOptions {
    NamespaceOptions { capacity: 1_000, ..NamespaceOptions::default() }
}

/// A namespace with a directory of its own from the start (made for more than a small one,
/// which lives in the data directory's journal until it grows).
fn with_files() -> NamespaceOptions {
    NamespaceOptions { capacity: 10_000, ..NamespaceOptions::default() }
}

/// Where a namespace's files are (`DIR/ns/<hex of name>`, docs/durability.md).
fn ns_dir(root: &Path, name: &str) -> PathBuf {
    let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
    root.join("ns").join(hex)
}

#[test]
fn an_expired_namespace_is_gone_for_every_call() {
    let clock = FakeClock::at(T0);
    let db = Db::in_memory_with(options(&clock, Fsync::EverySec));
    let job = db.create_namespace("job", small()).unwrap();
    job.seen("https://a.example/").unwrap();
    db.create_namespace("other", small()).unwrap();
    assert_eq!(db.expiry("job"), Some(Expiry::Never));
    assert_eq!(db.expiry("nope"), None);
    assert!(!db.set_expiry("nope", Expiry::At(T0 + 5)).unwrap());
    assert!(db.set_expiry("job", Expiry::At(T0 + 1_000)).unwrap());
    assert_eq!(db.expiry("job"), Some(Expiry::At(T0 + 1_000)));
    assert_eq!(db.expiry_stats(), (1, 1_000));

    clock.set(T0 + 999);
    assert!(db.namespace("job").is_some(), "alive until its time");
    clock.set(T0 + 1_000);
    assert!(!db.drop_namespace("job").unwrap(), "an expired namespace is not there to drop");
    assert_eq!(db.expiry("job"), None);
    assert!(db.namespace("job").is_none());
    assert_eq!(db.namespace_names(), vec!["other".to_owned()]);
    assert_eq!(db.expired_count(), 1);
    assert_eq!(db.expiry_stats(), (0, 0));
    // Created anew: empty, and without the old time.
    let fresh = db.namespace_or_create("job", small()).unwrap();
    assert!(!fresh.contains("https://a.example/").unwrap());
    assert_eq!(db.expiry("job"), Some(Expiry::Never));
}

#[test]
fn listings_and_creates_see_an_expired_namespace_as_absent() {
    let clock = FakeClock::at(T0);
    let db = Db::in_memory_with(options(&clock, Fsync::EverySec));
    db.create_namespace_with_expiry("a", small(), Expiry::At(T0 + 10)).unwrap();
    db.create_namespace_with_expiry("b", small(), Expiry::At(T0 + 20)).unwrap();
    clock.set(T0 + 15);
    assert_eq!(db.namespace_names(), vec!["b".to_owned()]);
    clock.set(T0 + 20);
    db.create_namespace("b", small()).unwrap();
    assert_eq!(db.expiry("b"), Some(Expiry::Never));
    assert_eq!(db.expired_count(), 2);
}

#[test]
fn conditions_decide_in_one_step() {
    let clock = FakeClock::at(T0);
    let db = Db::in_memory_with(options(&clock, Fsync::EverySec));
    db.create_namespace("k", small()).unwrap();
    // NX: only without a time.
    let nx = |at| move |cur| (cur == Expiry::Never).then_some(Expiry::At(at));
    assert_eq!(db.update_expiry("k", nx(T0 + 100)).unwrap(), ExpiryUpdate::Changed);
    assert_eq!(db.update_expiry("k", nx(T0 + 200)).unwrap(), ExpiryUpdate::Kept);
    // GT: only later.
    let gt = |at| move |cur: Expiry| cur.at().is_some_and(|c| at > c).then_some(Expiry::At(at));
    assert_eq!(db.update_expiry("k", gt(T0 + 50)).unwrap(), ExpiryUpdate::Kept);
    assert_eq!(db.update_expiry("k", gt(T0 + 300)).unwrap(), ExpiryUpdate::Changed);
    assert_eq!(db.expiry("k"), Some(Expiry::At(T0 + 300)));
    // PERSIST.
    let persist = |cur: Expiry| (cur != Expiry::Never).then_some(Expiry::Never);
    assert_eq!(db.update_expiry("k", persist).unwrap(), ExpiryUpdate::Changed);
    assert_eq!(db.update_expiry("k", persist).unwrap(), ExpiryUpdate::Kept);
    assert_eq!(db.expiry("k"), Some(Expiry::Never));
    assert_eq!(db.update_expiry("none", persist).unwrap(), ExpiryUpdate::Missing);
    // A time not in the future drops the namespace.
    assert_eq!(db.update_expiry("k", |_| Some(Expiry::At(T0))).unwrap(), ExpiryUpdate::Dropped);
    assert!(db.namespace("k").is_none());
    // An expired namespace cannot be given a new time: it is gone.
    db.create_namespace_with_expiry("e", small(), Expiry::At(T0 + 1)).unwrap();
    clock.set(T0 + 1);
    assert_eq!(db.update_expiry("e", persist).unwrap(), ExpiryUpdate::Missing);
}

#[test]
fn drop_clears_the_time_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::at(T0);
    {
        let db = Db::open_with(dir.path(), options(&clock, Fsync::Always)).unwrap();
        db.create_namespace_with_expiry("job", small(), Expiry::At(T0 + 60_000)).unwrap();
        db.create_namespace_with_expiry("kept", with_files(), Expiry::At(T0 + 90_000)).unwrap();
        assert!(db.drop_namespace("job").unwrap());
        db.create_namespace("job", small()).unwrap();
        assert_eq!(db.expiry("job"), Some(Expiry::Never));
        db.create_namespace_with_expiry("gone", small(), Expiry::At(T0 + 70_000)).unwrap();
        assert!(db.drop_namespace("gone").unwrap());
    }
    let db = Db::open_with(dir.path(), options(&clock, Fsync::Always)).unwrap();
    assert_eq!(db.expiry("job"), Some(Expiry::Never), "a namespace made anew has no old time");
    assert_eq!(db.expiry("kept"), Some(Expiry::At(T0 + 90_000)));
    assert_eq!(db.expiry_stats().0, 1, "the time of a dropped namespace is not counted");
    drop(db);
    // Past its time while closed: dropped at open, its directory removed.
    clock.set(T0 + 90_000);
    let kept_dir = ns_dir(dir.path(), "kept");
    assert!(kept_dir.exists());
    let db = Db::open_with(dir.path(), options(&clock, Fsync::Always)).unwrap();
    assert!(!kept_dir.exists());
    assert_eq!(db.namespace_names(), vec!["job".to_owned()]);
}

#[test]
fn the_active_cycle_frees_files_nobody_touches() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::at(T0);
    let db = Db::open_with(dir.path(), options(&clock, Fsync::EverySec)).unwrap();
    for i in 0..50 {
        let ns = db.create_namespace(&format!("job:{i}"), with_files()).unwrap();
        ns.seen("https://a.example/").unwrap();
        db.set_expiry(&format!("job:{i}"), Expiry::At(T0 + 1_000 + i)).unwrap();
    }
    db.create_namespace("stays", small()).unwrap();
    clock.set(T0 + 1_025);
    let start = Instant::now();
    while db.expired_count() < 26 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!ns_dir(dir.path(), "job:0").exists(), "freed within a cycle");
    assert!(!ns_dir(dir.path(), "job:25").exists());
    assert!(ns_dir(dir.path(), "job:26").exists(), "not yet due");
    assert_eq!(db.expired_count(), 26);
    assert_eq!(db.namespace_names().len(), 25);
}

#[test]
fn a_torn_tail_of_the_expiry_file_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::at(T0);
    {
        let db = Db::open_with(dir.path(), options(&clock, Fsync::Always)).unwrap();
        db.create_namespace_with_expiry("a", small(), Expiry::At(T0 + 500)).unwrap();
    }
    let file = dir.path().join("expires");
    let len = std::fs::metadata(&file).unwrap().len();
    let mut bytes = std::fs::read(&file).unwrap();
    bytes.extend_from_slice(&[7, 0, b'h', b'a']);
    std::fs::write(&file, &bytes).unwrap();
    {
        let db = Db::open_with(dir.path(), options(&clock, Fsync::Always)).unwrap();
        assert_eq!(db.expiry("a"), Some(Expiry::At(T0 + 500)));
        assert_eq!(std::fs::metadata(&file).unwrap().len(), len, "cut at open");
        db.set_expiry("a", Expiry::At(T0 + 700)).unwrap();
    }
    let db = Db::open_with(dir.path(), options(&clock, Fsync::Always)).unwrap();
    assert_eq!(db.expiry("a"), Some(Expiry::At(T0 + 700)));
    // Not an expiry file: refused, never guessed at.
    drop(db);
    std::fs::write(&file, b"NOTANEXPIRYFILE").unwrap();
    assert!(Db::open_with(dir.path(), options(&clock, Fsync::Always)).is_err());
}

#[test]
fn the_file_is_rewritten_when_mostly_superseded() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock::at(T0);
    let db = Db::open_with(dir.path(), options(&clock, Fsync::No)).unwrap();
    db.create_namespace("a", small()).unwrap();
    for i in 0..5_000 {
        db.set_expiry("a", Expiry::At(T0 + 100_000 + i)).unwrap();
    }
    let file = dir.path().join("expires");
    let big = std::fs::metadata(&file).unwrap().len();
    let start = Instant::now();
    while std::fs::metadata(&file).unwrap().len() >= big
        && start.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(std::fs::metadata(&file).unwrap().len() < 100, "one live record left");
    db.set_expiry("a", Expiry::At(T0 + 1)).unwrap();
    drop(db);
    let db = Db::open_with(dir.path(), options(&clock, Fsync::No)).unwrap();
    assert_eq!(db.expiry("a"), Some(Expiry::At(T0 + 1)));
}

#[test]
fn always_syncs_the_time_before_answering_and_a_failed_sync_refuses_later_changes() {
    use urlseen_engine::storage::{FaultyStorage, FileOp};
    let dir = tempfile::tempdir().unwrap();
    let storage = FaultyStorage::new();
    let clock = FakeClock::at(T0);
    let options = DbOptions {
        fsync: Fsync::Always,
        storage: Arc::new(storage.clone()),
        clock: Arc::clone(&clock) as _,
        ..DbOptions::default()
    };
    let db = Db::open_with(dir.path(), options).unwrap();
    db.create_namespace("a", small()).unwrap();
    storage.keep_journal(true);
    db.set_expiry("a", Expiry::At(T0 + 5_000)).unwrap();
    let file = dir.path().join("expires");
    let ops: Vec<FileOp> =
        storage.journal().into_iter().filter(|(_, p)| *p == file).map(|(op, _)| op).collect();
    assert_eq!(ops.last(), Some(&FileOp::Sync), "synced before set_expiry returned: {ops:?}");
    storage.fail_syncs(true);
    assert!(db.set_expiry("a", Expiry::At(T0 + 9_000)).is_err());
    storage.fail_syncs(false);
    // The file's tail is unknown after a failed sync: every later change is refused.
    assert!(db.set_expiry("a", Expiry::Never).is_err());
    drop(db);
    let db =
        Db::open_with(dir.path(), DbOptions { clock: clock as _, ..DbOptions::default() }).unwrap();
    let at = db.expiry("a");
    assert!(
        at == Some(Expiry::At(T0 + 5_000)) || at == Some(Expiry::At(T0 + 9_000)),
        "the acknowledged time, or the one whose sync failed: {at:?}"
    );
}
