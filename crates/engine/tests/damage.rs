//! Damage to the files of a namespace that recovery must find and name (issue 32): a snapshot
//! whose header is damaged, a leaf file damaged before an open or while the namespace is open,
//! and a counting namespace whose store lost part of what it had acknowledged. Each test
//! damages the bytes, then checks what opening does and that no recorded URL is lost without
//! the loss being named.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::fs;
use std::path::{Path, PathBuf};

use urlseen_corpus::distinct_urls;
mod support;

use support::small;
use urlseen_engine::{Db, DbOptions, Error, Fsync, NamespaceOptions};
fn open(dir: &Path) -> Db {
    Db::open_with(dir, DbOptions { fsync: Fsync::Always, ..DbOptions::default() }).unwrap()
}

/// Records `urls` in namespace "d" of a new data directory, closes it (so it has a snapshot),
/// and returns the directory, the namespace's directory and the URLs answered new.
/// What the first use of namespace "d" in `dir` is refused with (an open reads no namespace: each
/// is recovered when first used).
fn refused(dir: &Path) -> Error {
    let db = Db::open(dir).unwrap();
    db.try_namespace("d").unwrap_err()
}

fn recorded(
    urls: &[String],
    options: NamespaceOptions,
) -> (tempfile::TempDir, PathBuf, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let ns = db.create_namespace("d", options).unwrap();
    let mut new = Vec::new();
    for chunk in urls.chunks(1000) {
        let seen = ns.seen_batch(chunk).unwrap();
        new.extend(chunk.iter().zip(seen).filter(|p| !p.1).map(|p| p.0.clone()));
    }
    drop(ns);
    db.close().unwrap();
    let ns_dir = dir.path().join("ns").join(hex("d"));
    (dir, ns_dir, new)
}

fn hex(name: &str) -> String {
    name.bytes().map(|b| format!("{b:02x}")).collect()
}

/// How many of `urls` namespace "d" of `db` does not hold.
fn missing(db: &Db, urls: &[String]) -> usize {
    let ns = db.namespace("d").unwrap();
    ns.contains_batch(urls).unwrap().iter().filter(|&&h| !h).count()
}

fn leaf_files(ns: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> =
        fs::read_dir(ns.join("leaves")).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
}

/// Flips the bytes of `path` in `range`.
fn flip(path: &Path, range: std::ops::Range<usize>) {
    let mut bytes = fs::read(path).unwrap();
    for b in &mut bytes[range] {
        *b ^= 0xa5;
    }
    fs::write(path, bytes).unwrap();
}

#[test]
fn a_snapshot_whose_header_is_damaged_is_set_aside_not_blamed_on_the_log() {
    let urls = distinct_urls(501, 6_000);
    let (dir, ns, urls) = recorded(&urls, small());
    // The 8 bytes of the log offset it covers: a huge one, as the hostile tester's.
    flip(&ns.join("snapshot"), 16..24);
    let db = open(dir.path());
    let report = db.namespace("d").unwrap().recovery().unwrap().clone();
    let reason = report.snapshot_error.expect("the damaged snapshot was used");
    assert!(reason.contains("snapshot") && reason.contains("is damaged"), "{reason}");
    assert_eq!(report.snapshot_offset, None);
    assert_eq!(missing(&db, &urls), 0, "URLs lost");
    assert_eq!(db.namespace("d").unwrap().len(), urls.len() as u64);
    db.close().unwrap();
    // The checkpoint on close replaced it: the next open uses a snapshot again.
    let db = open(dir.path());
    assert_eq!(db.namespace("d").unwrap().recovery().unwrap().snapshot_error, None);
    assert_eq!(missing(&db, &urls), 0);
}

#[test]
fn a_snapshot_claiming_more_log_than_there_is_is_still_refused_when_it_is_sound() {
    // The other side of the test above: a sound snapshot whose log is short lost records.
    let urls = distinct_urls(502, 3_000);
    let (dir, ns, _) = recorded(&urls, small());
    let log = fs::read(ns.join("log")).unwrap();
    fs::write(ns.join("log"), &log[..log.len() / 2]).unwrap();
    let err = refused(dir.path());
    assert!(err.to_string().contains("records are missing from the log"), "{err}");
}

#[test]
fn a_damaged_leaf_file_is_found_at_open_and_rebuilt_from_the_log() {
    let urls = distinct_urls(503, 6_000);
    let (dir, ns, urls) = recorded(&urls, small());
    let leaves = leaf_files(&ns);
    assert!(leaves.len() > 2, "too few leaves: {leaves:?}");
    let victim = &leaves[leaves.len() / 2];
    flip(victim, 100..108); // inside the first block's records
    // Read-only first: it rebuilds in memory and says why, changing nothing.
    let before = fs::read(victim).unwrap();
    let db = Db::open_read_only(dir.path()).unwrap();
    let reason = db.namespace("d").unwrap().recovery().unwrap().snapshot_error.clone();
    let reason = reason.expect("a damaged leaf file was trusted by a read-only open");
    assert!(reason.contains(victim.file_name().unwrap().to_str().unwrap()), "{reason}");
    assert_eq!(db.namespace("d").unwrap().len(), urls.len() as u64);
    drop(db);
    assert_eq!(fs::read(victim).unwrap(), before, "a read-only open changed a leaf file");
    let db = open(dir.path());
    let reason = db.namespace("d").unwrap().recovery().unwrap().snapshot_error.clone();
    let reason = reason.expect("a damaged leaf file was trusted");
    assert!(reason.contains("leaf file") && reason.contains("damaged"), "{reason}");
    assert_eq!(missing(&db, &urls), 0, "URLs lost");
    assert_eq!(db.namespace("d").unwrap().len(), urls.len() as u64);
    // More URLs make every leaf split, reading its rebuilt file.
    let more = distinct_urls(504, 6_000);
    let ns = db.namespace("d").unwrap();
    for chunk in more.chunks(1000) {
        ns.seen_batch(chunk).unwrap();
    }
    ns.complete_splits();
    assert!(ns.seen_batch(&more[..10]).is_ok());
    assert_eq!(missing(&db, &urls), 0);
}

#[test]
fn a_leaf_file_damaged_while_open_names_the_file_and_the_repair_at_the_split() {
    let urls = distinct_urls(505, 3_000);
    let (dir, ns_dir, _) = recorded(&urls, small());
    let db = open(dir.path());
    // Loaded (namespaces load on first use), then damaged after the load verified them: as bit
    // rot or a stray write would.
    let ns = db.namespace("d").unwrap();
    for leaf in leaf_files(&ns_dir) {
        flip(&leaf, 100..108);
    }
    let more = distinct_urls(506, 20_000);
    let mut failure = None;
    for chunk in more.chunks(500) {
        ns.complete_splits();
        if let Err(e) = ns.seen_batch(chunk) {
            failure = Some(e);
            break;
        }
    }
    let err = failure.expect("no split read a damaged leaf file");
    let text = err.to_string();
    assert!(matches!(err, Error::Poisoned { .. }), "{err:?}");
    assert!(text.contains(".leaf") && text.contains("corrupt"), "{text}");
    let fix = format!("urlseen check --data {} --repair", dir.path().display());
    assert!(text.contains(&fix), "the fix is not named: {text}");
    assert!(!text.contains("reopen"), "{text}");
}

fn counting() -> NamespaceOptions {
    NamespaceOptions { capacity: 20_000, counting: true, ..NamespaceOptions::default() }
}

/// The journal files of a counting namespace's store (fjall's `*.jnl`).
fn journals(ns: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = walk(&ns.join("store"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jnl"))
        .collect();
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() { files.extend(walk(&p)) } else { files.push(p) }
    }
    files
}

#[test]
fn a_counting_store_that_lost_its_journal_is_refused_naming_the_loss_and_the_fix() {
    let urls = distinct_urls(507, 10_000);
    let (dir, ns, urls) = recorded(&urls, counting());
    let jnl = journals(&ns);
    assert!(!jnl.is_empty(), "no journal under {}", ns.display());
    let saved: Vec<Vec<u8>> = jnl.iter().map(|p| fs::read(p).unwrap()).collect();
    for p in &jnl {
        fs::remove_file(p).unwrap();
    }
    let err = refused(dir.path());
    let text = err.to_string();
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    let lost = format!("{} URLs are missing", urls.len());
    assert!(text.contains(&lost), "the loss is not counted: {text}");
    assert!(text.contains("store") && text.contains("Restore the store directory"), "{text}");
    let fix = format!("urlseen check --data {} --repair", dir.path().display());
    assert!(text.contains(&fix), "the fix is not named: {text}");
    // A read-only open refuses too.
    let read_only = Db::open_read_only(dir.path()).unwrap();
    assert!(read_only.try_namespace("d").is_err(), "a read-only open trusted the store");
    drop(read_only);
    // The journal back: nothing lost.
    for (p, bytes) in jnl.iter().zip(&saved) {
        fs::write(p, bytes).unwrap();
    }
    let db = open(dir.path());
    assert_eq!(missing(&db, &urls), 0);
}

#[test]
fn a_counting_store_whose_journal_is_damaged_is_refused() {
    let urls = distinct_urls(508, 10_000);
    let (dir, ns, _) = recorded(&urls, counting());
    let jnl = journals(&ns);
    let biggest = jnl.iter().max_by_key(|p| fs::metadata(p).unwrap().len()).unwrap();
    let rel = biggest.strip_prefix(dir.path()).unwrap().to_owned();
    // fjall preallocates its journal: what was written ends at the last byte that is not 0.
    let bytes = fs::read(biggest).unwrap();
    let used = bytes.iter().rposition(|&b| b != 0).unwrap() + 1;
    assert!(used > 100_000, "{used} bytes written");
    // 64 bytes at each eighth of what was written, as the hostile tester's, each on a fresh
    // copy: fjall cuts the journal at some damage, and asserts on other damage (a value length
    // that disagrees with itself); either way the open is refused, naming the store.
    for eighth in 1..8 {
        let copy = tempfile::tempdir().unwrap();
        for f in walk(dir.path()) {
            let to = copy.path().join(f.strip_prefix(dir.path()).unwrap());
            fs::create_dir_all(to.parent().unwrap()).unwrap();
            fs::copy(&f, &to).unwrap();
        }
        let at = used * eighth / 8;
        flip(&copy.path().join(&rel), at..at + 64);
        let err = refused(copy.path());
        let text = err.to_string();
        assert!(matches!(err, Error::Corrupt { .. }), "at {at}: {err:?}");
        assert!(text.contains("store") && text.contains("Restore"), "at {at}: {text}");
        // fjall cut its journal at the damage when it opened: the loss stays refused at
        // every open until it is restored or accepted.
        assert_eq!(refused(copy.path()).to_string(), text, "at {at}");
        let read_only = Db::open_read_only(copy.path()).unwrap();
        assert!(read_only.try_namespace("d").is_err(), "at {at}");
    }
}

#[test]
fn a_counting_store_whose_journal_has_a_value_length_at_odds_is_refused_not_a_panic() {
    let urls = distinct_urls(510, 5_000);
    let (dir, ns, _) = recorded(&urls, counting());
    let jnl = journals(&ns);
    let biggest = jnl.iter().max_by_key(|p| fs::metadata(p).unwrap().len()).unwrap();
    let mut bytes = fs::read(biggest).unwrap();
    // An item of the fingerprint keyspace as fjall 3 writes it: key length 8 (u16), value
    // length 12 (u32, a record with its host), its length on disk 12 (u32). The length on disk
    // made 13: fjall asserts that the two agree (a panic under debug assertions).
    let item = [8u8, 0, 12, 0, 0, 0, 12, 0, 0, 0];
    let at = bytes
        .windows(item.len())
        .rposition(|w| w == item)
        .expect("no item of a fingerprint in the journal");
    bytes[at + 6] = 13;
    fs::write(biggest, bytes).unwrap();
    let err = refused(dir.path());
    let text = err.to_string();
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    assert!(text.contains("store") && text.contains("Restore"), "{text}");
}

#[test]
fn forgets_in_a_counting_namespace_are_no_false_alarm_even_after_a_crash() {
    let urls = distinct_urls(509, 6_000);
    let (dir, _, urls) = recorded(&urls, counting());
    let db = open(dir.path());
    let ns = db.namespace("d").unwrap();
    // Forgets after the last sync: the store holds fewer than the tally said.
    for u in &urls[..3_000] {
        assert!(ns.forget(u).unwrap());
    }
    // The files as a crash leaves them (no close, no sync since the forgets).
    let image = tempfile::tempdir().unwrap();
    for f in walk(dir.path()) {
        let rel = f.strip_prefix(dir.path()).unwrap();
        if rel.as_os_str() == "LOCK" {
            continue;
        }
        let to = image.path().join(rel);
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        fs::copy(&f, &to).unwrap();
    }
    drop(ns);
    db.close().unwrap();
    for d in [dir.path(), image.path()] {
        let db = open(d);
        let ns = db.namespace("d").unwrap();
        assert_eq!(ns.len(), 3_000, "{}", d.display());
        assert_eq!(missing(&db, &urls[3_000..]), 0);
    }
}
