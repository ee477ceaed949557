//! `urlseen stats` reads a data directory and changes nothing in it: not the files (every path,
//! size and byte is compared before and after), not the lock file, not a torn log tail (reported,
//! left for the next read-write open to cut), not a pending namespace drop, not an exact-mode
//! namespace's index, not a snapshot older than its log. Its figures are the ones a read-write
//! open finds, and a read-write open afterwards loses nothing.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use urlseen_corpus::distinct_urls;
use urlseen_engine::Db;

mod unlocked;
use unlocked::when_unlocked;

/// Runs `urlseen args…` with `input` on stdin; returns (stdout, stderr, success).
fn run(args: &[&str], input: &[u8]) -> (String, String, bool) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_urlseen"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    let _ = writer.join().unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into(),
        out.status.success(),
    )
}

fn lines(urls: &[String]) -> Vec<u8> {
    urls.iter().flat_map(|u| u.bytes().chain(std::iter::once(b'\n'))).collect()
}

/// `filter --data dir --ns ns extra…` over `urls`: the URLs it printed (recorded as new).
fn filter(dir: &Path, ns: &str, extra: &[&str], urls: &[String]) -> Vec<String> {
    let mut args = vec!["filter", "--data", dir.to_str().unwrap(), "--ns", ns];
    args.extend_from_slice(extra);
    let (out, err, ok) = run(&args, &lines(urls));
    assert!(ok, "{err}");
    out.lines().map(str::to_owned).collect()
}

/// Everything under `dir`: each path, whether a directory, and each file's bytes.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(tree(&path));
            out.insert(path, None);
        } else {
            out.insert(path.clone(), Some(fs::read(&path).unwrap()));
        }
    }
    out
}

/// Runs `stats --json` over `dir`, asserts that nothing under it changed, and returns the
/// namespaces' statistics by name.
fn stats_changing_nothing(dir: &Path) -> BTreeMap<String, serde_json::Value> {
    let before = tree(dir);
    let (out, err, ok) = run(&["stats", "--data", dir.to_str().unwrap(), "--json"], b"");
    assert!(ok, "{err}");
    let after = tree(dir);
    let added: Vec<_> = after.keys().filter(|p| !before.contains_key(*p)).collect();
    let gone: Vec<_> = before.keys().filter(|p| !after.contains_key(*p)).collect();
    assert!(added.is_empty() && gone.is_empty(), "stats added {added:?}, removed {gone:?}");
    for (path, bytes) in &before {
        assert!(after[path] == *bytes, "stats changed {}", path.display());
    }
    // The text form reads the same way.
    let (_, err, ok) = run(&["stats", "--data", dir.to_str().unwrap()], b"");
    assert!(ok, "{err}");
    assert!(tree(dir) == before, "stats (text) changed the directory");
    let all: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    all.into_iter().map(|s| (s["name"].as_str().unwrap().to_owned(), s)).collect()
}

/// Opens `dir` read-write (the repairs a read-only open skipped happen now) and checks that
/// each namespace holds the count `stats` gave and every URL it printed.
fn reopen_loses_nothing(
    dir: &Path,
    stats: &BTreeMap<String, serde_json::Value>,
    printed: &[(&str, &[String])],
) -> Db {
    let db = Db::open(dir).unwrap();
    assert_eq!(db.namespace_names(), stats.keys().cloned().collect::<Vec<_>>());
    for (name, s) in stats {
        let ns = db.namespace(name).unwrap();
        assert_eq!(s["count"].as_u64().unwrap(), ns.stats().count, "namespace {name}");
    }
    for (name, urls) in printed {
        let ns = db.namespace(name).unwrap();
        let lost = urls.iter().filter(|u| !ns.contains(u).unwrap()).count();
        assert_eq!(lost, 0, "namespace {name}: {lost} printed URLs lost");
    }
    db
}

#[test]
fn stats_of_a_clean_directory_changes_nothing_and_counts_right() {
    let dir = tempfile::tempdir().unwrap();
    let urls = distinct_urls(41, 6_000);
    // A small capacity: the namespace splits, so its snapshot names several leaf files.
    let bloom = filter(dir.path(), "bloom", &["--capacity", "1000"], &urls);
    let exact = filter(dir.path(), "exact", &["--capacity", "1000", "--exact"], &urls);
    let (_, err, ok) = run(
        &["import", "-", "--data", dir.path().to_str().unwrap(), "--ns", "cnt", "--counting", "-q"],
        &lines(&urls[..2_000]),
    );
    assert!(ok, "{err}");
    assert!(dir.path().join("LOCK").exists());
    let stats = stats_changing_nothing(dir.path());
    assert_eq!(stats["bloom"]["count"], bloom.len() as u64);
    assert!(stats["bloom"]["splits_done"].as_u64().unwrap() > 0);
    assert_eq!(stats["bloom"]["persistence"]["read_only"], true);
    assert_eq!(stats["bloom"]["persistence"]["recovery_truncated_bytes"], 0);
    assert_eq!(stats["exact"]["mode"], "exact");
    assert_eq!(stats["exact"]["count"], exact.len() as u64);
    assert_eq!(stats["exact"]["exact"]["stored"], exact.len() as u64);
    assert_eq!(stats["cnt"]["mode"], "counting");
    assert!(stats["cnt"]["count"].as_u64().unwrap() > 1_900, "{}", stats["cnt"]);
    // `check` without `--repair` reads only too (the lock file's content included).
    let before = tree(dir.path());
    let (out, err, ok) = run(&["check", "--data", dir.path().to_str().unwrap()], b"");
    assert!(ok, "{out}\n{err}");
    assert!(tree(dir.path()) == before, "check changed the directory");
    reopen_loses_nothing(dir.path(), &stats, &[("bloom", &bloom), ("exact", &exact)]);
}

#[test]
fn stats_reports_a_torn_tail_without_cutting_it() {
    let dir = tempfile::tempdir().unwrap();
    let urls = distinct_urls(42, 5_000);
    let printed = filter(dir.path(), "default", &["--capacity", "1000"], &urls);
    let ns_dir = fs::read_dir(dir.path().join("ns")).unwrap().next().unwrap().unwrap().path();
    let log = ns_dir.join("log");
    let len = fs::metadata(&log).unwrap().len();
    let mut f = fs::OpenOptions::new().append(true).open(&log).unwrap();
    f.write_all(&[0x5a; 123]).unwrap();
    drop(f);
    let stats = stats_changing_nothing(dir.path());
    let s = &stats["default"];
    assert_eq!(s["count"], printed.len() as u64);
    assert_eq!(s["persistence"]["recovery_truncated_bytes"], 123);
    assert_eq!(s["persistence"]["log_bytes"], len);
    let (out, _, ok) = run(&["stats", "--data", dir.path().to_str().unwrap()], b"");
    assert!(ok);
    assert!(out.contains("torn or damaged log tail of 123 bytes (left in place"), "{out}");
    assert_eq!(fs::metadata(&log).unwrap().len(), len + 123, "stats cut the log");
    // The read-write open cuts it, and says so.
    let db = reopen_loses_nothing(dir.path(), &stats, &[("default", &printed)]);
    let ns = db.namespace("default").unwrap();
    assert_eq!(ns.recovery().unwrap().truncated_bytes, 123);
    drop(ns);
    drop(db);
    assert_eq!(fs::metadata(&log).unwrap().len(), len);
}

#[test]
fn stats_skips_a_pending_drop_and_leaves_it() {
    let dir = tempfile::tempdir().unwrap();
    let urls = distinct_urls(44, 3_000);
    let kept = filter(dir.path(), "kept", &["--capacity", "1000"], &urls);
    filter(dir.path(), "gone", &["--capacity", "1000"], &urls);
    // What a drop that crashed half-way leaves: the directory renamed aside.
    let gone = dir.path().join("ns").join("676f6e65"); // hex of "gone"
    let aside = dir.path().join("ns").join("676f6e65.dropped.tmp");
    fs::rename(&gone, &aside).unwrap();
    let stats = stats_changing_nothing(dir.path());
    assert_eq!(stats.keys().collect::<Vec<_>>(), ["kept"]);
    assert_eq!(stats["kept"]["count"], kept.len() as u64);
    assert!(aside.exists());
    drop(reopen_loses_nothing(dir.path(), &stats, &[("kept", &kept)]));
    assert!(!aside.exists(), "the read-write open did not finish the drop");
}

#[test]
fn stats_replays_a_log_newer_than_its_snapshot_into_memory_only() {
    let dir = tempfile::tempdir().unwrap();
    let first = distinct_urls(45, 4_000);
    let second = distinct_urls(46, 3_000);
    // Exact mode too: its leaves' records after the snapshot must reach the count without an
    // index being built.
    let b_first = filter(dir.path(), "b", &["--capacity", "1000000"], &first);
    let e_first = filter(dir.path(), "e", &["--capacity", "1000000", "--exact"], &first);
    // The snapshots as they were after the first run, put back after the second: as a crash
    // before the second run's checkpoint leaves them (leaf files longer than they say).
    let snaps: Vec<(PathBuf, Vec<u8>)> = fs::read_dir(dir.path().join("ns"))
        .unwrap()
        .map(|e| e.unwrap().path().join("snapshot"))
        .map(|p| (p.clone(), fs::read(&p).unwrap()))
        .collect();
    let b_second = filter(dir.path(), "b", &[], &second);
    let e_second = filter(dir.path(), "e", &[], &second);
    for (path, bytes) in &snaps {
        fs::write(path, bytes).unwrap();
    }
    // And no lock file: a read-only open must not make one.
    fs::remove_file(dir.path().join("LOCK")).unwrap();
    let stats = stats_changing_nothing(dir.path());
    assert!(!dir.path().join("LOCK").exists());
    for name in ["b", "e"] {
        let s = &stats[name];
        assert!(
            s["persistence"]["snapshot_offset"].as_u64() < s["persistence"]["log_bytes"].as_u64(),
            "{s}"
        );
    }
    assert_eq!(stats["b"]["count"], (b_first.len() + b_second.len()) as u64);
    assert_eq!(stats["e"]["count"], (e_first.len() + e_second.len()) as u64);
    reopen_loses_nothing(
        dir.path(),
        &stats,
        &[("b", &b_first), ("b", &b_second), ("e", &e_first), ("e", &e_second)],
    );
}

/// The most lines `filter` answers in one batch.
const MAX_BATCH: usize = 4096;

#[test]
fn stats_of_a_killed_run_replays_its_log_and_splits_in_memory() {
    // Killed before any checkpoint: no snapshot, and a log whose replay splits leaves.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let urls = distinct_urls(47, 30_000);
    let mut child = Command::new(env!("CARGO_BIN_EXE_urlseen"))
        .args(["filter", "--data", data, "--capacity", "1000", "--fsync", "always"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = lines(&urls);
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
        // Held open: the run waits for more input until it is killed.
        std::thread::sleep(std::time::Duration::from_secs(30));
        drop(stdin);
    });
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut printed = Vec::new();
    let mut line = String::new();
    while printed.len() < 20_000 && out.read_line(&mut line).unwrap() > 0 {
        printed.push(line.trim_end().to_owned());
        line.clear();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    drop(writer);
    let stats = stats_changing_nothing(dir.path());
    // A batch is printed before it is committed: the one in flight at the kill may be lost
    // (printed again by the next run), never an earlier one.
    let committed = &printed[..printed.len() - MAX_BATCH];
    let s = &stats["default"];
    assert!(s["count"].as_u64().unwrap() >= committed.len() as u64, "{s}");
    assert!(s["splits_done"].as_u64().unwrap() + s["splitting_nodes"].as_u64().unwrap() > 0);
    reopen_loses_nothing(dir.path(), &stats, &[("default", committed)]);
}

#[test]
fn stats_refuses_a_directory_in_use_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    filter(dir.path(), "default", &[], &distinct_urls(48, 100));
    let db = Db::open(dir.path()).unwrap();
    let (_, err, ok) = run(&["stats", "--data", dir.path().to_str().unwrap()], b"");
    assert!(!ok, "stats read a directory another process has open read-write");
    assert!(err.contains("in use by another process"), "{err}");
    drop(db);
    // Read-only opens share the lock: two at once are fine, and a read-write open after them.
    let a = when_unlocked(|| Db::open_read_only(dir.path()));
    let b = Db::open_read_only(dir.path()).unwrap();
    assert!(a.namespace("default").unwrap().seen("https://new.example/").is_err());
    assert!(a.create_namespace("x", Default::default()).is_err());
    assert!(a.checkpoint().is_err());
    drop((a, b));
    when_unlocked(|| Db::open(dir.path()));
}
