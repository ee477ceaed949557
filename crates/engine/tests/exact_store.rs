//! The fingerprint store on disk: reopen keeps everything, damage and absence are typed errors
//! (never a panic, never a silently empty store), and acknowledged writes survive SIGKILL.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use urlseen_engine::Error;
use urlseen_engine::exact::{
    CountingOptions, CountingSet, FingerprintStore, FpStore, HEADER_FILE, StoreDurability,
};
use urlseen_filter::hash::mix64;

#[test]
fn exact_store_reopen_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let fps: Vec<u64> = (0..100_000).map(mix64).collect();
    {
        let store = FingerprintStore::open(dir.path(), StoreDurability::Buffered).unwrap();
        for chunk in fps.chunks(1000) {
            store.insert_many(chunk).unwrap();
        }
        store.insert_many_in(&[1, 2], 9).unwrap();
        for &fp in fps.iter().step_by(10) {
            store.increment(fp).unwrap();
        }
        for &fp in fps.iter().skip(1).step_by(10) {
            assert!(store.remove(fp).unwrap());
        }
        assert_eq!(store.len(), 100_002 - 10_000);
    }
    let store = FingerprintStore::open_existing(dir.path(), StoreDurability::Always).unwrap();
    assert_eq!(store.len(), 100_002 - 10_000);
    for (i, &fp) in fps.iter().enumerate() {
        let expected = match i % 10 {
            0 => Some(2),
            1 => None,
            _ => Some(1),
        };
        assert_eq!(store.get(fp).unwrap(), expected, "fingerprint {i}");
    }
    assert_eq!(store.get_record(2).unwrap().map(|r| r.generation), Some(9));
    let mut all: Vec<u64> = store.iter_fingerprints().map(Result::unwrap).collect();
    assert!(all.is_sorted(), "big-endian keys iterate in numeric order");
    all.dedup();
    assert_eq!(all.len() as u64, store.len());
    assert!(store.disk_space().unwrap() > 0);
}

#[test]
fn exact_store_missing_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let err = FingerprintStore::open_existing(&missing, StoreDurability::Buffered).unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    let err =
        CountingSet::open_existing(&missing, StoreDurability::Buffered, CountingOptions::default())
            .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    // An empty directory is no store either.
    let err = FingerprintStore::open_existing(dir.path(), StoreDurability::Buffered).unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    // `open` creates it.
    FingerprintStore::open(&missing, StoreDurability::Buffered).unwrap();
}

fn filled(dir: &Path) {
    let store = FingerprintStore::open(dir, StoreDurability::Always).unwrap();
    store.insert_many(&(0..5000).map(mix64).collect::<Vec<_>>()).unwrap();
}

#[test]
fn exact_store_damaged_header_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    filled(dir.path());
    let header = dir.path().join(HEADER_FILE);
    let good = fs::read(&header).unwrap();

    let mut bad = good.clone();
    bad[12] ^= 0x40;
    fs::write(&header, &bad).unwrap();
    let err = FingerprintStore::open(dir.path(), StoreDurability::Buffered).unwrap_err();
    assert!(matches!(&err, Error::Corrupt { reason, .. } if reason.contains("checksum")), "{err}");

    fs::write(&header, b"not a store at all").unwrap();
    let err = FingerprintStore::open(dir.path(), StoreDurability::Buffered).unwrap_err();
    assert!(matches!(&err, Error::Corrupt { reason, .. } if reason.contains("bad magic")), "{err}");

    fs::remove_file(&header).unwrap();
    let err = FingerprintStore::open(dir.path(), StoreDurability::Buffered).unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "data without a header: {err}");
    let err = FingerprintStore::open_existing(dir.path(), StoreDurability::Buffered).unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");

    fs::write(&header, &good).unwrap();
    let store = FingerprintStore::open(dir.path(), StoreDurability::Buffered).unwrap();
    assert_eq!(store.len(), 5000);
}

/// Every file of the LSM overwritten with garbage: opening (or reading) fails with a typed
/// error, and nothing panics.
#[test]
fn exact_store_garbage_data_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    filled(dir.path());
    let mut damaged = 0;
    for entry in walk(&dir.path().join("lsm")) {
        let len = fs::metadata(&entry).unwrap().len() as usize;
        if len > 0 && !entry.ends_with("lock") {
            fs::write(&entry, vec![0xA5; len]).unwrap();
            damaged += 1;
        }
    }
    assert!(damaged > 0);
    let result = std::panic::catch_unwind(|| {
        let store = FingerprintStore::open(dir.path(), StoreDurability::Buffered)?;
        for fp in (0..5000).map(mix64) {
            store.get(fp)?;
        }
        Ok::<_, Error>(store.len())
    });
    match result {
        Ok(Err(e)) => assert!(
            matches!(e, Error::Corrupt { .. } | Error::Io { .. }),
            "unexpected error kind: {e}"
        ),
        Ok(Ok(len)) => panic!("garbage opened as a store of {len} fingerprints"),
        Err(_) => panic!("the store panicked on damaged files"),
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn exact_store_open_twice_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let _first = FingerprintStore::open(dir.path(), StoreDurability::Buffered).unwrap();
    let err = FingerprintStore::open(dir.path(), StoreDurability::Buffered).unwrap_err();
    assert!(matches!(err, Error::Locked { .. }), "{err}");
}

#[test]
fn exact_counting_set_reopens_to_the_same_filters() {
    let dir = tempfile::tempdir().unwrap();
    let options = CountingOptions { capacity: 3000, ..Default::default() };
    let fps: Vec<u64> = (0..20_000).map(mix64).collect();
    let before = {
        let set = CountingSet::open(dir.path(), StoreDurability::Buffered, options).unwrap();
        let mut out = vec![false; fps.len()];
        set.seen_many(&fps, &mut out).unwrap();
        assert!(out.iter().all(|&seen| !seen));
        set.stats().generations
    };
    let set = CountingSet::open(dir.path(), StoreDurability::Buffered, options).unwrap();
    assert_eq!(set.stats().generations, before);
    assert!(set.verify().unwrap());
    assert!(fps.iter().all(|&fp| set.seen(fp).unwrap()));
}

#[test]
fn exact_counting_params_damage_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    drop(
        CountingSet::open(dir.path(), StoreDurability::Buffered, CountingOptions::default())
            .unwrap(),
    );
    let path = dir.path().join(urlseen_engine::exact::PARAMS_FILE);
    let mut bytes = fs::read(&path).unwrap();
    bytes[20] ^= 1;
    fs::write(&path, &bytes).unwrap();
    let err = CountingSet::open(dir.path(), StoreDurability::Buffered, CountingOptions::default())
        .unwrap_err();
    assert!(matches!(&err, Error::Corrupt { reason, .. } if reason.contains("checksum")), "{err}");
}

const CHILD_ENV: &str = "URLSEEN_EXACT_CRASH_CHILD";

/// The child side of the crash test: records batches of 100 fingerprints with
/// `StoreDurability::Always` and prints each batch number once it is acknowledged.
#[test]
fn exact_store_crash_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else { return };
    let store = FingerprintStore::open(Path::new(&dir), StoreDurability::Always).unwrap();
    let start = store.len() / 100;
    let mut stdout = std::io::stdout().lock();
    for batch in start.. {
        let fps: Vec<u64> = (batch * 100..(batch + 1) * 100).map(mix64).collect();
        store.insert_many(&fps).unwrap();
        writeln!(stdout, "ack {batch}").unwrap();
        stdout.flush().unwrap();
    }
}

/// SIGKILL the child at several points; after each kill every acknowledged batch is stored.
#[test]
fn exact_store_survives_sigkill() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut acked: Option<u64> = None;
    for round in 0..6u64 {
        let mut child = Command::new(&exe)
            .args(["--exact", "exact_store_crash_child", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let wanted = 3 + round * 7 % 20;
        let mut got = 0;
        while got < wanted {
            let Some(line) = lines.next() else { break };
            if let Some(n) = line.unwrap().strip_prefix("ack ") {
                acked = Some(n.parse().unwrap());
                got += 1;
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let last = acked.expect("the child acknowledged batches");
        let store = FingerprintStore::open_existing(dir.path(), StoreDurability::Buffered).unwrap();
        for fp in (0..(last + 1) * 100).map(mix64) {
            assert_eq!(store.get(fp).unwrap(), Some(1), "round {round}: acknowledged fp lost");
        }
        assert!(store.len() >= (last + 1) * 100);
    }
}

#[test]
fn exact_counting_set_without_its_store_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    {
        let set =
            CountingSet::open(dir.path(), StoreDurability::Buffered, CountingOptions::default())
                .unwrap();
        set.seen(1).unwrap();
    }
    fs::remove_dir_all(dir.path().join("lsm")).unwrap();
    fs::remove_file(dir.path().join(HEADER_FILE)).unwrap();
    let err = CountingSet::open(dir.path(), StoreDurability::Buffered, CountingOptions::default())
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "a lost store must not reopen empty: {err}");
}
