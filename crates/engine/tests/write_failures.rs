//! A namespace whose writes fail (a full disk, no file descriptor left) refuses writes while the
//! cause lasts and resumes by itself once it is gone, without a reopen, as Redis does after
//! `MISCONF`; and every URL answered "new" on the way is seen after a crash.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use urlseen_corpus::distinct_urls;
use urlseen_engine::storage::FaultyStorage;
mod support;

use support::{crash_image, small};
use urlseen_engine::{Db, DbOptions, Error, Fsync, Namespace, NamespaceOptions};

/// A namespace with a directory of its own from the start (a small one lives in the data
/// directory's journal until it grows: `small_journal.rs` has its own faults).
fn with_files() -> NamespaceOptions {
    NamespaceOptions { capacity: 10_000, ..small() }
}

/// A little over the engine's one attempt per second.
const RETRY_AFTER: Duration = Duration::from_millis(1_100);
fn open_faulty(dir: &Path, fsync: Fsync) -> (Db, FaultyStorage) {
    let storage = FaultyStorage::new();
    let options = DbOptions { fsync, storage: Arc::new(storage.clone()), ..DbOptions::default() };
    (Db::open_with(dir, options).unwrap(), storage)
}
/// Inserts `chunk`; on success adds the URLs answered "new" to `acked`.
fn insert(ns: &Namespace, chunk: &[String], acked: &mut Vec<String>) -> Result<(), Error> {
    let seen = ns.seen_batch(chunk)?;
    acked.extend(chunk.iter().zip(seen).filter(|p| !p.1).map(|p| p.0.clone()));
    Ok(())
}

fn assert_written_failure(e: &Error) {
    assert!(matches!(e, Error::Io { .. } | Error::Poisoned { .. }), "{e}");
}

/// Fills the disk at several points (a torn log record, a torn leaf block, the hosts file) and
/// frees it again, under each policy: writes are refused while it is full, resume once it is
/// free, and a crash image of the directory holds every URL answered "new".
#[test]
fn a_full_disk_that_frees_up_resumes_writes_without_a_reopen() {
    for fsync in [Fsync::Always, Fsync::EverySec, Fsync::No] {
        let dir = tempfile::tempdir().unwrap();
        let (db, storage) = open_faulty(dir.path(), fsync);
        let ns = db.namespace_or_create("full", with_files()).unwrap();
        let urls = distinct_urls(31, 12_000);
        let mut chunks = urls.chunks(100);
        let mut acked = Vec::new();
        let mut failures = 0;
        for room in [5_000, 17_000, 1_000, 40_000] {
            storage.disk_full_after(room);
            // Until the disk is full.
            let failed = chunks.by_ref().find_map(|c| insert(&ns, c, &mut acked).err());
            let e = failed.expect("the disk filled up");
            assert_written_failure(&e);
            failures += 1;
            // While it is full, nothing is acknowledged, even after the retry interval.
            std::thread::sleep(RETRY_AFTER);
            let e = insert(&ns, chunks.next().unwrap(), &mut acked).unwrap_err();
            assert_written_failure(&e);
            // Space freed: after the retry interval writes go on, without a reopen.
            storage.disk_full_after(u64::MAX);
            let refused = insert(&ns, chunks.next().unwrap(), &mut acked);
            assert!(matches!(refused, Err(Error::Poisoned { .. })), "{fsync}: {refused:?}");
            std::thread::sleep(RETRY_AFTER);
            for chunk in chunks.by_ref().take(3) {
                insert(&ns, chunk, &mut acked).unwrap_or_else(|e| panic!("{fsync}: {e}"));
            }
        }
        assert_eq!(failures, 4);
        for chunk in chunks {
            insert(&ns, chunk, &mut acked).unwrap();
        }
        assert!(acked.len() > 5_000, "{fsync}: {} answered new", acked.len());
        let image = tempfile::tempdir().unwrap();
        crash_image(dir.path(), image.path());
        drop(ns);
        drop(db);
        let db = Db::open(image.path()).unwrap();
        let ns = db.namespace("full").unwrap();
        let hits = ns.contains_batch(&acked).unwrap();
        let lost = hits.iter().filter(|&&h| !h).count();
        assert_eq!(lost, 0, "{fsync}: {lost} of {} URLs answered new lost", acked.len());
    }
}

/// No file descriptor left (`EMFILE`): a leaf file cannot be opened to append a block. Writes
/// are refused until descriptors are free again, then go on; nothing answered "new" is lost.
#[test]
fn no_file_descriptor_left_refuses_writes_until_one_is_free() {
    let dir = tempfile::tempdir().unwrap();
    let (db, storage) = open_faulty(dir.path(), Fsync::Always);
    let ns = db.namespace_or_create("fds", with_files()).unwrap();
    let urls = distinct_urls(32, 8_000);
    let mut chunks = urls.chunks(100);
    let mut acked = Vec::new();
    for chunk in chunks.by_ref().take(10) {
        insert(&ns, chunk, &mut acked).unwrap();
    }
    storage.fail_opens(true);
    let failed = chunks.by_ref().find_map(|c| insert(&ns, c, &mut acked).err());
    let e = failed.expect("a leaf file was opened");
    assert!(e.to_string().contains(".leaf"), "{e}");
    let refused = insert(&ns, chunks.next().unwrap(), &mut acked);
    assert!(matches!(refused, Err(Error::Poisoned { .. })), "{refused:?}");
    storage.fail_opens(false);
    std::thread::sleep(RETRY_AFTER);
    for chunk in chunks {
        insert(&ns, chunk, &mut acked).unwrap();
    }
    let image = tempfile::tempdir().unwrap();
    crash_image(dir.path(), image.path());
    drop(ns);
    drop(db);
    let db = Db::open(image.path()).unwrap();
    let hits = db.namespace("fds").unwrap().contains_batch(&acked).unwrap();
    let lost = hits.iter().filter(|&&h| !h).count();
    assert_eq!(lost, 0, "{lost} of {} URLs answered new lost", acked.len());
}

/// A failed fsync of the log is not retried in place (the kernel may have dropped the pages
/// it failed to write, so a later fsync that succeeds proves nothing): writes are refused
/// until the directory is reopened, as Redis exits on an AOF fsync error under `always`, and
/// the reopen keeps everything acknowledged before.
#[test]
fn a_failed_fsync_refuses_writes_until_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (db, storage) = open_faulty(dir.path(), Fsync::Always);
    let ns = db.namespace_or_create("sync", small()).unwrap();
    assert!(!ns.seen("https://a.example/").unwrap());
    storage.fail_syncs(true);
    // Raw items, which have no host: the log's own fsync is the one that fails (a URL's
    // host entry is synced first, and the hosts file, a collision guard, recovers in place).
    assert!(matches!(ns.seen_bytes(b"b"), Err(Error::Io { .. })));
    storage.fail_syncs(false);
    std::thread::sleep(RETRY_AFTER);
    let refused = ns.seen_bytes(b"c");
    assert!(
        matches!(&refused, Err(Error::Poisoned { reason }) if reason.contains("reopened")),
        "{refused:?}"
    );
    let image = tempfile::tempdir().unwrap();
    crash_image(dir.path(), image.path());
    drop(ns);
    drop(db);
    let db = Db::open(image.path()).unwrap();
    let ns = db.namespace("sync").unwrap();
    assert!(ns.contains("https://a.example/").unwrap(), "an acknowledged URL lost");
    assert!(!ns.seen("https://e.example/").unwrap(), "the reopened namespace takes writes");
}
