//! Damage to a data directory, as a user or a failing disk leaves it: recovery refuses what it
//! cannot explain, with a message that says how to repair, and changes nothing; what it cuts is
//! reported; read-only commands create nothing. Each test asserts the exit code, the message,
//! and that every URL recorded before the damage is still there once it is undone (or, for a cut
//! tail, that only the damaged bytes went).

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use urlseen_corpus::distinct_urls;

/// Runs `urlseen args…` with `input` on stdin; returns (stdout lines, stderr, success).
fn run(args: &[&str], input: &[u8]) -> (Vec<String>, String, bool) {
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
    // A command that refuses to start closes stdin unread: a broken pipe is not a failure.
    let _ = writer.join().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    (
        stdout.lines().map(str::to_owned).collect(),
        String::from_utf8_lossy(&out.stderr).into(),
        out.status.success(),
    )
}

fn lines(urls: &[String]) -> Vec<u8> {
    urls.iter().flat_map(|u| u.bytes().chain(std::iter::once(b'\n'))).collect()
}

/// A data directory that recorded `urls` in namespace "default" (closed, so with a
/// snapshot), that namespace's directory, and the URLs it printed (recorded as new: a few of
/// `urls` are the same URL once canonicalized).
fn recorded(urls: &[String]) -> (tempfile::TempDir, PathBuf, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let (out, err, ok) = run(&["filter", "--data", data, "--capacity", "1000"], &lines(urls));
    assert!(ok, "{err}");
    assert!(out.len() > urls.len() * 9 / 10, "{} of {} new", out.len(), urls.len());
    let ns = fs::read_dir(dir.path().join("ns")).unwrap().next().unwrap().unwrap().path();
    (dir, ns, out)
}

/// Every file under `dir` with its length, sorted: what "nothing was changed" compares.
fn listing(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            out.extend(listing(&entry.path()));
        } else {
            out.push((entry.path(), entry.metadata().unwrap().len()));
        }
    }
    out.sort();
    out
}

/// How many of `urls` a `filter` run over `dir` prints (answers new), recording them.
fn new_again(dir: &Path, urls: &[String]) -> (usize, String) {
    let (out, err, ok) = run(&["filter", "--data", dir.to_str().unwrap()], &lines(urls));
    assert!(ok, "{err}");
    (out.len(), err)
}

#[test]
fn a_missing_meta_is_refused_and_nothing_is_deleted() {
    let urls = distinct_urls(31, 5_000);
    let (dir, ns, urls) = recorded(&urls);
    let meta = fs::read(ns.join("meta")).unwrap();
    fs::remove_file(ns.join("meta")).unwrap();
    let before = listing(&ns);
    let (_, err, ok) = run(&["stats", "--data", dir.path().to_str().unwrap()], b"");
    assert!(!ok, "a namespace without meta was opened");
    assert!(err.contains("meta") && err.contains("missing"), "{err}");
    assert!(err.contains("Restore the meta file"), "no repair advice: {err}");
    assert_eq!(listing(&ns), before, "recovery changed the namespace's files");
    fs::write(ns.join("meta"), meta).unwrap();
    assert_eq!(new_again(dir.path(), &urls).0, 0, "URLs lost after the meta came back");
}

#[test]
fn a_log_shorter_than_its_snapshot_is_refused_and_nothing_is_deleted() {
    let urls = distinct_urls(32, 5_000);
    let (dir, ns, urls) = recorded(&urls);
    let log = fs::read(ns.join("log")).unwrap();
    fs::write(ns.join("log"), &log[..16]).unwrap();
    let before = listing(&ns);
    let (out, err, ok) = run(&["filter", "--data", dir.path().to_str().unwrap()], &lines(&urls));
    assert!(!ok, "a log shorter than its snapshot was accepted");
    assert!(out.is_empty(), "URLs were answered from a damaged namespace");
    assert!(err.contains("records are missing from the log"), "{err}");
    assert!(err.contains("remove the snapshot file"), "no repair advice: {err}");
    assert_eq!(listing(&ns), before, "recovery changed the namespace's files");
    fs::write(ns.join("log"), log).unwrap();
    assert_eq!(new_again(dir.path(), &urls).0, 0, "URLs lost after the log came back");
}

#[test]
fn a_damaged_log_tail_is_cut_reported_and_nothing_else_is_lost() {
    let urls = distinct_urls(33, 5_000);
    let (dir, ns, urls) = recorded(&urls);
    // A zero-filled tail, as a crash on some file systems leaves after the last record.
    let mut log = fs::OpenOptions::new().append(true).open(ns.join("log")).unwrap();
    log.write_all(&[0u8; 1000]).unwrap();
    drop(log);
    let (again, err) = new_again(dir.path(), &urls);
    assert!(err.contains("cut 1000 bytes"), "the cut was not reported: {err}");
    assert_eq!(again, 0, "URLs before the damaged tail were lost");
    // The report stays visible in `stats` of that run's data; a later open has nothing to cut.
    let (out, err, ok) = run(&["stats", "--data", dir.path().to_str().unwrap()], b"");
    assert!(ok, "{err}");
    assert!(!err.contains("cut"), "a clean log was reported cut: {err}");
    let count = format!("URLs            {}", urls.len());
    assert!(out.iter().any(|l| l.contains(&count)), "{out:?}");
}

#[test]
fn stats_does_not_create_a_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo-dir");
    let (_, err, ok) = run(&["stats", "--data", typo.to_str().unwrap()], b"");
    assert!(!ok, "stats of a directory that does not exist succeeded");
    assert!(err.contains("not a urlseen data directory"), "{err}");
    assert!(!typo.exists(), "stats created {}", typo.display());
    // Nor does it turn an unrelated directory into a data directory.
    let (_, _, ok) = run(&["stats", "--data", dir.path().to_str().unwrap()], b"");
    assert!(!ok);
    assert!(!dir.path().join("ns").exists() && !dir.path().join("LOCK").exists());
}

#[test]
fn a_capacity_beyond_ram_is_a_clear_error_not_an_abort() {
    let (out, err, ok) = run(&["filter", "--capacity", "1e15"], b"http://a.example/\n");
    assert!(!ok && out.is_empty());
    assert!(
        err.contains("more than this machine's") && err.contains("smaller --capacity"),
        "{err}"
    );
    assert!(!err.contains("memory allocation"), "{err}");
}

fn check(dir: &Path, repair: bool) -> (String, String, bool) {
    let mut args = vec!["check", "--data", dir.to_str().unwrap()];
    if repair {
        args.push("--repair");
    }
    let (out, err, ok) = run(&args, b"");
    (out.join("\n"), err, ok)
}

#[test]
fn check_passes_a_sound_directory_and_changes_nothing() {
    let urls = distinct_urls(34, 5_000);
    let (dir, ns, _) = recorded(&urls);
    let before = listing(&ns);
    let (out, err, ok) = check(dir.path(), false);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("all blocks sound") && out.contains("0 with problems"), "{out}");
    assert_eq!(listing(&ns), before);
}

#[test]
fn check_finds_a_torn_tail_and_repair_cuts_it() {
    let urls = distinct_urls(35, 5_000);
    let (dir, ns, urls) = recorded(&urls);
    let clean = fs::metadata(ns.join("log")).unwrap().len();
    let mut log = fs::OpenOptions::new().append(true).open(ns.join("log")).unwrap();
    log.write_all(&[0xab; 77]).unwrap();
    drop(log);
    let before = listing(&ns);
    let (out, _, ok) = check(dir.path(), false);
    assert!(!ok, "a torn tail passed the check: {out}");
    assert!(out.contains("PROBLEM log: a torn or damaged tail of 77 bytes"), "{out}");
    assert_eq!(listing(&ns), before, "check without --repair changed files");
    let (out, err, ok) = check(dir.path(), true);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("repaired") && out.ends_with("0 with problems"), "{out}");
    assert_eq!(fs::metadata(ns.join("log")).unwrap().len(), clean);
    assert_eq!(new_again(dir.path(), &urls).0, 0, "the repair lost URLs");
}

#[test]
fn check_finds_a_damaged_leaf_file_and_repair_rebuilds_it_from_the_log() {
    let urls = distinct_urls(36, 5_000);
    let (dir, ns, urls) = recorded(&urls);
    let leaf = fs::read_dir(ns.join("leaves")).unwrap().next().unwrap().unwrap().path();
    let mut bytes = fs::read(&leaf).unwrap();
    bytes[100] ^= 0xff; // inside the first block's records
    fs::write(&leaf, bytes).unwrap();
    let before = listing(&ns);
    let (out, _, ok) = check(dir.path(), false);
    assert!(!ok, "a damaged leaf file passed the check: {out}");
    assert!(out.contains("PROBLEM leaf files"), "{out}");
    assert_eq!(listing(&ns), before, "check without --repair changed files");
    let (out, err, ok) = check(dir.path(), true);
    assert!(ok, "{out}\n{err}");
    assert!(ns.join("snapshot.damaged").exists(), "the damaged snapshot was not kept");
    assert_eq!(new_again(dir.path(), &urls).0, 0, "the repair lost URLs");
}

#[test]
fn check_reports_a_missing_meta_and_repair_leaves_it_alone() {
    let urls = distinct_urls(37, 2_000);
    let (dir, ns, _) = recorded(&urls);
    fs::remove_file(ns.join("meta")).unwrap();
    let before = listing(&ns);
    let (out, _, ok) = check(dir.path(), false);
    assert!(!ok);
    assert!(out.contains("PROBLEM meta is missing"), "{out}");
    let (_, err, ok) = check(dir.path(), true);
    assert!(!ok);
    assert!(err.contains("need a decision") && err.contains("nothing was changed"), "{err}");
    assert_eq!(listing(&ns), before);
}

#[test]
fn check_refuses_a_directory_in_use() {
    let urls = distinct_urls(38, 1_000);
    let (dir, ns, _) = recorded(&urls);
    let before = listing(&ns);
    let db = urlseen_engine::Db::open(dir.path()).unwrap();
    let (_, err, ok) = check(dir.path(), true);
    assert!(!ok, "check ran on a directory another process has open");
    assert!(err.contains("in use by another process"), "{err}");
    drop(db);
    assert_eq!(listing(&ns).len(), before.len());
}

#[test]
fn check_finds_a_damaged_snapshot_header_and_repair_sets_it_aside() {
    let urls = distinct_urls(39, 5_000);
    let (dir, ns, urls) = recorded(&urls);
    // 8 bytes of the header, over the log offset it covers (the hostile tester's damage: the
    // open then blamed the whole log).
    let mut bytes = fs::read(ns.join("snapshot")).unwrap();
    for b in &mut bytes[16..24] {
        *b ^= 0xff;
    }
    fs::write(ns.join("snapshot"), bytes).unwrap();
    let before = listing(&ns);
    let (out, _, ok) = check(dir.path(), false);
    assert!(!ok, "a damaged snapshot header passed the check: {out}");
    assert!(out.contains("PROBLEM snapshot") && out.contains("is damaged"), "{out}");
    assert!(!out.contains("records are missing"), "the log was blamed: {out}");
    assert_eq!(listing(&ns), before, "check without --repair changed files");
    let (out, err, ok) = check(dir.path(), true);
    assert!(ok, "{out}\n{err}");
    assert!(out.ends_with("0 with problems"), "{out}");
    assert!(ns.join("snapshot.damaged").exists(), "the damaged snapshot was not kept");
    let (again, err) = new_again(dir.path(), &urls);
    assert_eq!(again, 0, "the repair lost URLs");
    assert!(!err.contains("warning"), "{err}");
}

#[test]
fn a_damaged_snapshot_header_opens_from_the_log_with_a_warning() {
    let urls = distinct_urls(40, 5_000);
    let (dir, ns, urls) = recorded(&urls);
    let mut bytes = fs::read(ns.join("snapshot")).unwrap();
    for b in &mut bytes[16..24] {
        *b ^= 0xff;
    }
    fs::write(ns.join("snapshot"), bytes).unwrap();
    let (again, err) = new_again(dir.path(), &urls);
    assert_eq!(again, 0, "URLs lost");
    assert!(err.contains("snapshot not used") && err.contains("is damaged"), "{err}");
}

#[test]
fn a_damaged_leaf_file_is_rebuilt_at_open_with_a_warning_naming_it() {
    let urls = distinct_urls(41, 5_000);
    let (dir, ns, urls) = recorded(&urls);
    let leaf = fs::read_dir(ns.join("leaves")).unwrap().next().unwrap().unwrap().path();
    let mut bytes = fs::read(&leaf).unwrap();
    bytes[100] ^= 0xff;
    fs::write(&leaf, bytes).unwrap();
    let (again, err) = new_again(dir.path(), &urls);
    assert_eq!(again, 0, "URLs lost");
    let name = leaf.file_name().unwrap().to_str().unwrap();
    assert!(err.contains("leaf file") && err.contains(name), "{err}");
    assert!(err.contains("rebuilt from the log, nothing lost"), "{err}");
    let (out, _, ok) = check(dir.path(), false);
    assert!(ok, "not sound after the rebuild: {out}");
}

/// The journal files of the counting store of namespace directory `ns` (fjall's `*.jnl`).
fn journals(ns: &Path) -> Vec<PathBuf> {
    listing(&ns.join("store"))
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| p.extension().is_some_and(|e| e == "jnl"))
        .collect()
}

#[test]
fn a_counting_store_that_lost_its_journal_is_refused_and_check_repair_accepts_the_loss() {
    let urls = distinct_urls(42, 20_000);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let file = dir.path().join("urls.txt");
    fs::write(&file, lines(&urls)).unwrap();
    let (_, err, ok) =
        run(&["import", "--data", data, "--ns", "jobs", "--counting", file.to_str().unwrap()], b"");
    assert!(ok, "{err}");
    let imported: usize = err
        .split("imported ")
        .nth(1)
        .and_then(|s| s.split(" URLs").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{err}"));
    let ns = fs::read_dir(dir.path().join("ns")).unwrap().next().unwrap().unwrap().path();
    let jnl = journals(&ns);
    assert!(!jnl.is_empty(), "no journal in {:?}", listing(&ns));
    for p in &jnl {
        fs::remove_file(p).unwrap();
    }
    let (out, _, ok) = check(dir.path(), false);
    assert!(!ok, "a store that lost its journal passed the check: {out}");
    let missing = format!("{imported} URLs are missing");
    assert!(out.contains("PROBLEM store") && out.contains(&missing), "{out}");
    // Every command that opens it refuses, naming the store, the loss and the fix.
    let (printed, err, ok) = run(&["filter", "--data", data, "--ns", "jobs"], &lines(&urls[..100]));
    assert!(!ok && printed.is_empty(), "a store that lost URLs was used: {err}");
    assert!(err.contains(&missing) && err.contains("store"), "{err}");
    assert!(err.contains(&format!("urlseen check --data {data} --repair")), "{err}");
    let (_, err, ok) = run(&["stats", "--data", data], b"");
    assert!(!ok && err.contains(&missing), "{err}");
    // The repair accepts the loss, and says how much it was.
    let (out, err, ok) = check(dir.path(), true);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains(&format!("accepted the loss of {imported} URLs")), "{out}");
    assert!(out.ends_with("0 with problems"), "{out}");
    let (printed, err, ok) = run(&["filter", "--data", data, "--ns", "jobs"], &lines(&urls[..100]));
    assert!(ok, "{err}");
    assert_eq!(printed.len(), 100, "the lost URLs are new again, as the repair said");
}

#[test]
fn check_reports_a_sound_counting_store() {
    let urls = distinct_urls(43, 3_000);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let (out, err, ok) =
        run(&["filter", "--data", data, "--ns", "jobs", "--counting"], &lines(&urls));
    assert!(ok, "{err}");
    let ns = fs::read_dir(dir.path().join("ns")).unwrap().next().unwrap().unwrap().path();
    let before = listing(&ns);
    let (report, err, ok) = check(dir.path(), false);
    assert!(ok, "{report}\n{err}");
    let held = format!("ok      store: {} URLs, every record readable", out.len());
    assert!(report.contains(&held), "{report}");
    assert_eq!(listing(&ns), before, "check changed the store");
}

#[test]
fn check_finds_a_damaged_hosts_file_and_repair_keeps_every_sound_entry() {
    let urls = distinct_urls(44, 5_000);
    let (dir, ns, urls) = recorded(&urls);
    let (out, _, ok) = check(dir.path(), false);
    assert!(ok && out.contains("ok      hosts: ") && out.contains("entries, all sound"), "{out}");
    let hosts = ns.join("hosts");
    let mut bytes = fs::read(&hosts).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    fs::write(&hosts, bytes).unwrap();
    let before = listing(&ns);
    let (out, _, ok) = check(dir.path(), false);
    assert!(!ok, "a damaged hosts file passed the check: {out}");
    assert!(out.contains("PROBLEM hosts") && out.contains("sound entries after them"), "{out}");
    assert_eq!(listing(&ns), before, "check without --repair changed files");
    // Opening refuses rather than cut the sound entries after the damage.
    let data = dir.path().to_str().unwrap();
    let (printed, err, ok) = run(&["filter", "--data", data], &lines(&urls[..10]));
    assert!(!ok && printed.is_empty(), "{err}");
    assert!(
        err.contains("hosts") && err.contains(&format!("urlseen check --data {data} --repair")),
        "{err}"
    );
    assert_eq!(listing(&ns), before, "a refused open changed files");
    let (out, err, ok) = check(dir.path(), true);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("repair: rewrote") && out.contains("sound entries"), "{out}");
    assert!(out.ends_with("0 with problems"), "{out}");
    assert_eq!(new_again(dir.path(), &urls).0, 0, "the repair lost URLs");
}

#[test]
fn check_verifies_the_url_journal_of_a_namespace_that_keeps_urls() {
    let urls = distinct_urls(45, 3_000);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let (_, err, ok) = run(&["filter", "--data", data, "--keep-urls"], &lines(&urls));
    assert!(ok, "{err}");
    let (out, _, ok) = check(dir.path(), false);
    assert!(ok && out.contains("ok      urls: ") && out.contains("every block sound"), "{out}");
    let ns = fs::read_dir(dir.path().join("ns")).unwrap().next().unwrap().unwrap().path();
    let journal = ns.join("urls");
    let mut bytes = fs::read(&journal).unwrap();
    let middle = bytes.len() / 3;
    bytes[middle] ^= 0xff;
    fs::write(&journal, bytes).unwrap();
    let (out, _, ok) = check(dir.path(), false);
    assert!(!ok, "a damaged URL journal passed the check: {out}");
    assert!(out.contains("PROBLEM urls") && out.contains("restore it from a backup"), "{out}");
}

#[test]
fn a_counting_journal_fjall_cannot_read_is_refused_and_repair_sets_it_aside_counting_the_loss() {
    let urls = distinct_urls(46, 5_000);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let (printed, err, ok) =
        run(&["filter", "--data", data, "--ns", "jobs", "--counting"], &lines(&urls));
    assert!(ok, "{err}");
    let ns = fs::read_dir(dir.path().join("ns")).unwrap().next().unwrap().unwrap().path();
    let jnl = journals(&ns);
    let biggest = jnl.iter().max_by_key(|p| fs::metadata(p).unwrap().len()).unwrap();
    let mut bytes = fs::read(biggest).unwrap();
    // An item of the fingerprint keyspace as fjall 3 writes it (key length 8, value length 12
    // twice: as it is and on disk), its length on disk made 13: fjall asserts (debug
    // assertions) or misreads what follows.
    let item = [8u8, 0, 12, 0, 0, 0, 12, 0, 0, 0];
    let at = bytes.windows(item.len()).position(|w| w == item).expect("no item in the journal");
    bytes[at + 6] = 13;
    fs::write(biggest, bytes).unwrap();
    let (out, _, ok) = check(dir.path(), false);
    assert!(!ok, "a damaged journal passed the check: {out}");
    assert!(out.contains("PROBLEM store") && out.contains("sets its journal aside"), "{out}");
    let lost: usize = out
        .split("so ")
        .nth(1)
        .and_then(|s| s.split(" URLs are lost").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(lost > 0 && lost <= printed.len(), "{lost} of {}", printed.len());
    let (p, err, ok) = run(&["filter", "--data", data, "--ns", "jobs"], &lines(&urls[..10]));
    assert!(!ok && p.is_empty(), "a store fjall cannot read was used: {err}");
    assert!(err.contains("store") && err.contains("Restore the store directory"), "{err}");
    let (out, err, ok) = check(dir.path(), true);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains(".jnl.damaged"), "{out}");
    assert!(out.contains(&format!("accepted the loss of {lost} URLs")), "{out}");
    assert!(out.ends_with("0 with problems"), "{out}");
    // Exactly the loss stated: of the URLs printed, that many are new again.
    let (again, err, ok) = run(&["filter", "--data", data, "--ns", "jobs"], &lines(&printed));
    assert!(ok, "{err}");
    assert_eq!(again.len(), lost, "the repair lost a different number than it said");
}
