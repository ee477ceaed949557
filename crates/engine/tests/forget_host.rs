//! Forgetting a whole host (issue 15 item 2): afterwards every URL of the host answers "new",
//! every other recorded URL still answers "seen", in Bloom and exact mode, in memory and in a
//! data directory, across a restart and after a crash image taken mid-forget. Records whose
//! host is unknown make a forget by host refuse.
//!
//! The acceptance run (1,000,000 URLs over 1,000 hosts) is the same test with
//! `URLSEEN_FORGET_URLS=1000000` (see `docs/forget.md`); CI runs 100,000.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use urlseen_engine::{Db, DbOptions, Error, FakeClock, Fsync, Namespace, NamespaceOptions};

const HOSTS: usize = 1_000;

fn urls_count() -> usize {
    std::env::var("URLSEEN_FORGET_URLS").ok().and_then(|n| n.parse().ok()).unwrap_or(100_000)
}

/// `n` distinct URLs spread over [`HOSTS`] hosts (host `i % HOSTS`), with two schemes and a
/// port, so the host is all that groups them.
fn corpus(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let host = i % HOSTS;
            match i % 3 {
                0 => format!("https://site{host}.example/page/{i}?q={}", i % 7),
                1 => format!("http://site{host}.example/a/{i}"),
                _ => format!("http://site{host}.example:8080/b/{i}#frag"),
            }
        })
        .collect()
}

fn of_host(i: usize, host: usize) -> bool {
    i % HOSTS == host
}

fn options(exact: bool, n: usize) -> NamespaceOptions {
    // Sized for a tenth: the tree grows by splits while it records.
    NamespaceOptions { capacity: (n / 10) as u64, fpr: 0.01, exact, ..NamespaceOptions::default() }
}

/// Records `urls`; returns which were answered new (all in exact mode; in Bloom mode a false
/// positive is answered seen, and kept, not recorded).
fn record(ns: &Namespace, urls: &[String]) -> Vec<bool> {
    let mut new = Vec::with_capacity(urls.len());
    for chunk in urls.chunks(4096) {
        let seen = ns.seen_batch(chunk).unwrap();
        assert!(seen.iter().all(|&seen| !seen) || !ns.options().is_exact(), "distinct URLs");
        new.extend(seen.iter().map(|&s| !s));
    }
    new
}

/// How many of the host's URLs answer "new", and how many other recorded ones do (must be 0).
/// `recorded[i]`: whether `urls[i]` was recorded (a URL namespace records nothing for one
/// answered "seen" on a false positive, which may answer "new" after a split: not a loss).
fn answers(
    ns: &Namespace,
    urls: &[String],
    recorded: &[bool],
    host: usize,
) -> (usize, usize, usize) {
    let (mut forgotten_new, mut host_total, mut others_new) = (0, 0, 0);
    for (c, chunk) in urls.chunks(4096).enumerate() {
        let seen = ns.contains_batch(chunk).unwrap();
        for (j, &s) in seen.iter().enumerate() {
            let i = c * 4096 + j;
            if of_host(i, host) {
                host_total += 1;
                forgotten_new += usize::from(!s);
            } else {
                others_new += usize::from(!s && recorded[i]);
            }
        }
    }
    (forgotten_new, host_total, others_new)
}

fn check(ns: &Namespace, urls: &[String], recorded: &[bool], host: usize, when: &str) {
    let (new, total, others_new) = answers(ns, urls, recorded, host);
    assert_eq!(others_new, 0, "{when}: other recorded URLs answered new (false negatives)");
    if ns.options().is_exact() {
        assert_eq!(new, total, "{when}: exact mode: every URL of the host is new");
    } else {
        // A forgotten URL may still hit a Bloom false positive (at most the FPR bound).
        let fpr = ns.options().fpr;
        let bound = (total as f64 * fpr * 3.0).ceil() as usize + 2;
        assert!(total - new <= bound, "{when}: {} of {total} still seen", total - new);
    }
    eprintln!("{when}: host URLs new {new}/{total}, other URLs new {others_new}");
}

fn forget_in(db: Db, exact: bool, dir: Option<&Path>) {
    let n = urls_count();
    let urls = corpus(n);
    let ns = db.create_namespace("crawl", options(exact, n)).unwrap();
    let started = Instant::now();
    let answered_new = record(&ns, &urls);
    let recorded = started.elapsed();
    let host = 417;
    // The count is of the host's URLs recorded: all of them in exact mode.
    let expected = (0..urls.len()).filter(|&i| of_host(i, host) && answered_new[i]).count() as u64;
    let of_the_host = urls.iter().enumerate().filter(|(i, _)| of_host(*i, host)).count() as u64;
    assert!(!exact || expected == of_the_host);
    let before = ns.len();
    let started = Instant::now();
    let forgotten = ns.forget_host(&format!("SITE{host}.example")).unwrap();
    let took = started.elapsed();
    eprintln!(
        "mode {}: {n} URLs over {HOSTS} hosts recorded in {recorded:?}; forget --host \
         site{host}.example: {forgotten} forgotten (of {of_the_host} URLs of the host, \
         {expected} recorded) in {took:?} ({} leaves)",
        if exact { "exact" } else { "bloom" },
        ns.stats().leaf_count,
    );
    assert_eq!(forgotten, expected, "the count is the host's URLs, exactly");
    assert_eq!(ns.len(), before - expected);
    check(&ns, &urls, &answered_new, host, "after the forget");
    // Forgetting it again finds nothing; another host still has all its URLs.
    assert_eq!(ns.forget_host(&format!("site{host}.example")).unwrap(), 0);
    assert_eq!(ns.forget_host("nowhere.example").unwrap(), 0);
    // Recorded again after the forget: seen, and forgotten again by the next forget.
    let again: Vec<String> =
        urls.iter().enumerate().filter(|(i, _)| of_host(*i, host)).map(|p| p.1.clone()).collect();
    let again_new: Vec<bool> = ns.seen_batch(&again).unwrap().iter().map(|&s| !s).collect();
    let new = again_new.iter().filter(|&&n| n).count();
    assert!(new as u64 >= of_the_host * 9 / 10, "{new} of {of_the_host} recorded again as new");
    // What is recorded now: the others as first recorded, the host's as recorded again.
    let mut again_new = again_new.into_iter();
    let now_recorded: Vec<bool> = (0..urls.len())
        .map(|i| match of_host(i, host) {
            true => again_new.next().unwrap_or(false),
            false => answered_new[i],
        })
        .collect();
    let Some(dir) = dir else {
        check_recorded_seen(&ns, &urls, &now_recorded);
        return;
    };
    drop(ns);
    db.close().unwrap();
    // Restart: the forgotten stay forgotten, the others seen (and the re-recorded seen).
    let db = Db::open(dir).unwrap();
    let ns = db.namespace("crawl").unwrap();
    check_recorded_seen(&ns, &urls, &now_recorded);
    assert_eq!(ns.forget_host(&format!("site{host}.example")).unwrap(), new as u64);
    check(&ns, &urls, &answered_new, host, "after a restart and a second forget");
    drop(ns);
    db.close().unwrap();
    let db = Db::open(dir).unwrap();
    let ns = db.namespace("crawl").unwrap();
    check(&ns, &urls, &answered_new, host, "after a second restart");
}

fn check_none_new(ns: &Namespace, urls: &[String]) {
    check_recorded_seen(ns, urls, &vec![true; urls.len()]);
}

/// Every URL of `urls` that was recorded (`recorded[i]`) answers seen.
fn check_recorded_seen(ns: &Namespace, urls: &[String], recorded: &[bool]) {
    let new: usize = urls
        .chunks(4096)
        .zip(recorded.chunks(4096))
        .map(|(c, r)| {
            let seen = ns.contains_batch(c).unwrap();
            seen.iter().zip(r).filter(|&(&s, &r)| !s && r).count()
        })
        .sum();
    assert_eq!(new, 0, "every URL recorded (again) answers seen");
}

#[test]
fn forget_host_in_memory_bloom() {
    forget_in(Db::in_memory(), false, None);
}

#[test]
fn forget_host_in_memory_exact() {
    forget_in(Db::in_memory(), true, None);
}

#[test]
fn forget_host_in_a_data_directory_bloom_then_restart() {
    let dir = tempfile::tempdir().unwrap();
    forget_in(Db::open(dir.path()).unwrap(), false, Some(dir.path()));
}

#[test]
fn forget_host_in_a_data_directory_exact_then_restart() {
    let dir = tempfile::tempdir().unwrap();
    forget_in(Db::open(dir.path()).unwrap(), true, Some(dir.path()));
}

/// Records with no host (raw items, fingerprints, or made before hosts were kept) might be
/// URLs of the host: the forget refuses and changes nothing.
#[test]
fn records_without_a_host_make_a_forget_by_host_refuse() {
    let db = Db::in_memory();
    let ns = db.create_namespace("mixed", NamespaceOptions::default()).unwrap();
    let urls = corpus(2_000);
    record(&ns, &urls);
    let fp = ns.fingerprint("https://site3.example/raw").unwrap();
    assert!(!ns.seen_fingerprint(fp).unwrap(), "recorded with no host");
    assert!(!ns.seen_bytes(b"an item").unwrap());
    let err = ns.forget_host("site3.example").unwrap_err();
    assert!(matches!(err, Error::ForgetHostUnknown { records: 2, .. }), "{err}");
    assert!(ns.contains_fingerprint(fp).unwrap());
    check_none_new(&ns, &urls);
}

#[test]
fn bad_hosts_and_prefixes_are_typed_errors() {
    let db = Db::in_memory();
    let ns = db.create_namespace("n", NamespaceOptions::default()).unwrap();
    for bad in ["", "https://example.com/", "a/b", "a b", "user@host"] {
        let err = ns.forget_host(bad).unwrap_err();
        assert!(matches!(err, Error::InvalidHost { .. }), "{bad:?}: {err}");
    }
    let err = ns.forget_prefix("https://example.com/blog/").unwrap_err();
    assert!(matches!(err, Error::ForgetByUnsupported { .. }), "{err}");
    assert!(matches!(ns.forget_prefix("not a url").unwrap_err(), Error::InvalidUrl(_)));
}

/// Counting namespaces: the store's records keep the host; a forget by host forgets exactly
/// that host's URLs (seed 004's forget, one by one), across a reopen of the store; records
/// with no host make it refuse.
#[test]
fn forget_host_in_a_counting_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let urls = corpus(20_000);
    let host = 9;
    let expected = urls.iter().enumerate().filter(|(i, _)| of_host(*i, host)).count() as u64;
    {
        let db = Db::open(dir.path()).unwrap();
        let counting = NamespaceOptions { counting: true, capacity: 5_000, ..Default::default() };
        let ns = db.create_namespace("c", counting).unwrap();
        let recorded = record(&ns, &urls);
        assert_eq!(ns.forget_host("site9.example").unwrap(), expected);
        check(&ns, &urls, &recorded, host, "counting, after the forget");
        assert_eq!(ns.forget_host("site9.example").unwrap(), 0);
        // A fingerprint has no host: from now on a forget by host refuses.
        ns.seen_bytes(b"raw").unwrap();
        let err = ns.forget_host("site1.example").unwrap_err();
        assert!(matches!(err, Error::ForgetHostUnknown { records: 1, .. }), "{err}");
        drop(ns);
        db.close().unwrap();
    }
    let db = Db::open(dir.path()).unwrap();
    let ns = db.namespace("c").unwrap();
    check(&ns, &urls, &[true; 20_000], host, "counting, after a restart");
}

/// A crash after the forget's log record is on disk and before its new snapshot is: the
/// files as the crash leaves them (the snapshot removed, leaf files rewritten) reopen to the
/// state after the forget, replayed from the whole log, forget record included.
#[test]
fn a_crash_in_the_middle_of_a_forget_recovers_it_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let urls = corpus(20_000);
    let host = 5;
    let image = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path()).unwrap();
        let ns = db.create_namespace("crawl", options(true, 20_000)).unwrap();
        record(&ns, &urls);
        db.checkpoint().unwrap();
        ns.sync().unwrap();
        let forgotten = ns.forget_host("site5.example").unwrap();
        assert_eq!(forgotten, 20);
        copy_dir(dir.path(), image.path());
    }
    // The image: the log with the forget record, no snapshot, the leaf files rewritten.
    let ns_dir =
        std::fs::read_dir(image.path().join("ns")).unwrap().next().unwrap().unwrap().path();
    std::fs::remove_file(ns_dir.join("snapshot")).unwrap();
    std::fs::remove_file(image.path().join("LOCK")).ok();
    let db = Db::open(image.path()).unwrap();
    let ns = db.namespace("crawl").unwrap();
    assert_eq!(ns.recovery().unwrap().replayed_forgets, 1);
    // (Exact mode: every URL is recorded.)
    check(&ns, &urls, &[true; 20_000], host, "after a crash image mid-forget");
}

fn copy_dir(from: &Path, to: &Path) {
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

/// A forget while two writers record URLs of other hosts (and leaves split under them): none
/// of theirs is lost, before or after a restart; the host's are new.
#[test]
fn a_forget_while_others_write_loses_none_of_theirs() {
    let dir = tempfile::tempdir().unwrap();
    let urls = corpus(40_000);
    let host = 3;
    // What stays recorded: every URL of another host, from before the forget or during it.
    let recorded: Vec<String> =
        urls.iter().enumerate().filter(|(i, _)| !of_host(*i, host)).map(|p| p.1.clone()).collect();
    {
        let db = Db::open(dir.path()).unwrap();
        let ns = db.create_namespace("c", options(true, 20_000)).unwrap();
        record(&ns, &urls[..20_000]);
        let later: Vec<&String> = urls
            .iter()
            .enumerate()
            .skip(20_000)
            .filter(|p| !of_host(p.0, host))
            .map(|p| p.1)
            .collect();
        std::thread::scope(|s| {
            for part in later.chunks(later.len() / 2 + 1) {
                let ns = &ns;
                s.spawn(move || {
                    for c in part.chunks(128) {
                        ns.seen_batch(c).unwrap();
                    }
                });
            }
            assert_eq!(ns.forget_host("site3.example").unwrap(), 20);
        });
        check(&ns, &urls, &[true; 40_000], host, "after a forget among writers");
        assert!(ns.contains_batch(&recorded).unwrap().iter().all(|&s| s));
        drop(ns);
        db.close().unwrap();
    }
    let db = Db::open(dir.path()).unwrap();
    let ns = db.namespace("c").unwrap();
    check(&ns, &urls, &[true; 40_000], host, "after a forget among writers, and a restart");
}

/// A forget whose log record cannot be synced fails, and the namespace refuses writes from
/// then on; reopened, the forget happened whole or not at all, and every other URL is seen.
#[test]
fn a_failed_forget_refuses_writes_and_reopens_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let storage = urlseen_engine::storage::FaultyStorage::new();
    let urls = corpus(20_000);
    {
        let options = DbOptions {
            fsync: Fsync::Always,
            storage: std::sync::Arc::new(storage.clone()),
            ..DbOptions::default()
        };
        let db = Db::open_with(dir.path(), options).unwrap();
        let ns = db.create_namespace("f", options_for(true)).unwrap();
        record(&ns, &urls);
        storage.fail_syncs(true);
        assert!(ns.forget_host("site5.example").is_err());
        storage.fail_syncs(false);
        let err = ns.seen("https://new.example/").unwrap_err();
        assert!(matches!(err, Error::Poisoned { .. }), "{err}");
        drop(ns);
        drop(db);
    }
    let db = Db::open(dir.path()).unwrap();
    let ns = db.namespace("f").unwrap();
    let (new, total, others_new) = answers(&ns, &urls, &[true; 20_000], 5);
    assert_eq!(others_new, 0, "other URLs lost");
    assert!(new == 0 || new == total, "the forget is whole or not at all: {new} of {total}");
}

fn options_for(exact: bool) -> NamespaceOptions {
    options(exact, 20_000)
}

/// A recrawl window's URLs, recorded over four slots of its clock (each in the generation of
/// its slot): 40 hosts, the last slot's through reservations (the server's path).
fn window_urls() -> Vec<String> {
    (0..4_000).map(|i| format!("https://w{}.example/{}/{i}", i % 40, i % 3)).collect()
}

/// Records `urls` in a window namespace, a quarter per slot (the clock moves a slot between
/// them); the last quarter through reservations. Returns which were answered "new".
fn record_in_window(ns: &Arc<Namespace>, clock: &FakeClock, urls: &[String]) -> Vec<bool> {
    let mut new = Vec::new();
    let quarters: Vec<&[String]> = urls.chunks(urls.len() / 4).collect();
    for (q, chunk) in quarters.iter().enumerate() {
        if q == 3 {
            let (fps, hosts): (Vec<u64>, Vec<u32>) =
                chunk.iter().map(|u| ns.fingerprint_host(u).unwrap()).unzip();
            let mut out = vec![false; fps.len()];
            ns.reserve_fingerprints_hosts(&fps, &hosts, &mut out).unwrap().commit().unwrap();
            new.extend(out.iter().map(|&s| !s));
        } else {
            new.extend(record(ns, chunk));
        }
        clock.advance(std::time::Duration::from_millis(WINDOW_SPAN_MS));
    }
    new
}

const WINDOW_SPAN_MS: u64 = 1_000;

/// A forget by host in a namespace with a recrawl window forgets the host's URLs in every live
/// generation (the count is their sum), and every other URL stays seen in all of them: in
/// memory, and in a data directory after a reopen. URLs of the host recorded again afterwards
/// are seen again.
#[test]
fn a_recrawl_window_forgets_a_host_in_every_generation() {
    let window = NamespaceOptions {
        capacity: 10_000,
        fpr: 1e-7,
        recrawl_after: Some(std::time::Duration::from_millis(8 * WINDOW_SPAN_MS)),
        generations: 8,
        ..NamespaceOptions::default()
    };
    let urls = window_urls();
    let host = |u: &String| u.starts_with("https://w7.example/");
    let (of_host, others): (Vec<String>, Vec<String>) = urls.iter().cloned().partition(host);
    for in_dir in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let clock = FakeClock::at(1_700_000_000_000);
        let options = DbOptions { clock: clock.clone(), ..DbOptions::default() };
        let open = || match in_dir {
            true => Db::open_with(dir.path(), options.clone()).unwrap(),
            false => Db::in_memory_with(options.clone()),
        };
        let db = open();
        let ns = db.create_namespace("w", window.clone()).unwrap();
        let new = record_in_window(&ns, &clock, &urls);
        assert!(new.iter().all(|&n| n), "in_dir {in_dir}: distinct URLs are new");
        let live = ns.recrawl().unwrap().live.len();
        assert_eq!(live, 4, "in_dir {in_dir}: one generation per slot");
        let forgot = ns.forget_host("W7.example").unwrap();
        assert_eq!(forgot, of_host.len() as u64, "in_dir {in_dir}: the sum over generations");
        let seen = |ns: &Namespace, urls: &[String]| -> usize {
            ns.contains_batch(urls).unwrap().iter().filter(|&&s| s).count()
        };
        assert_eq!(seen(&ns, &of_host), 0, "in_dir {in_dir}: the host's URLs are new");
        assert_eq!(seen(&ns, &others), others.len(), "in_dir {in_dir}: the others are seen");
        assert_eq!(ns.forget_host("w7.example").unwrap(), 0, "in_dir {in_dir}");
        let ns = if in_dir {
            drop(ns);
            db.close().unwrap();
            let db = open();
            let ns = db.namespace("w").unwrap();
            assert_eq!(ns.recrawl().unwrap().live.len(), 4);
            assert_eq!(seen(&ns, &of_host), 0, "after a reopen: the host's URLs are new");
            assert_eq!(seen(&ns, &others), others.len(), "after a reopen: the others are seen");
            // The window's host dictionary was read back: a shared or unlisted hash would
            // refuse here.
            assert_eq!(ns.forget_host("w3.example").unwrap(), 100);
            assert_eq!(seen(&ns, &others), others.len() - 100);
            ns
        } else {
            ns
        };
        // Recorded again, in the current generation: seen again, and forgotten again.
        assert!(ns.seen_batch(&of_host).unwrap().iter().all(|&s| !s), "in_dir {in_dir}");
        assert_eq!(seen(&ns, &of_host), of_host.len(), "in_dir {in_dir}");
        assert_eq!(ns.forget_host("w7.example").unwrap(), of_host.len() as u64);
        assert_eq!(seen(&ns, &of_host), 0, "in_dir {in_dir}");
    }
}

/// Items without hosts recorded in a window (`BF.ADD`'s path) make a forget by host refuse
/// there too, forgetting nothing in any generation.
#[test]
fn a_recrawl_window_with_records_of_unknown_host_refuses() {
    let clock = FakeClock::at(1_700_000_000_000);
    let db = Db::in_memory_with(DbOptions { clock: clock.clone(), ..DbOptions::default() });
    let window = NamespaceOptions {
        recrawl_after: Some(std::time::Duration::from_millis(8 * WINDOW_SPAN_MS)),
        generations: 8,
        ..NamespaceOptions::default()
    };
    let ns = db.create_namespace("w", window).unwrap();
    let urls = window_urls();
    record_in_window(&ns, &clock, &urls);
    ns.seen_bytes(b"an item").unwrap();
    let err = ns.forget_host("w7.example").unwrap_err();
    assert!(matches!(err, Error::ForgetHostUnknown { records: 1, .. }), "{err}");
    check_none_new(&ns, &urls);
}

/// The collision guard (`docs/forget.md`): two hosts forced onto one host hash (a test hook of
/// the `testing` feature) make a forget of either refuse with the hash named, forgetting
/// nothing, in every mode, in a data directory and after a restart; a host asked for whose
/// hash only another recorded host has is refused too; other hosts forget as before.
#[test]
fn a_host_hash_shared_by_two_hosts_makes_a_forget_refuse() {
    use urlseen_engine::host::testing::force_host_hash;
    const SEED: u64 = 0x5eed_c011_1de5;
    for host in ["a.example", "b.example", "x.example"] {
        force_host_hash(SEED, host, 0x4d);
    }
    force_host_hash(SEED, "d.example", 0x58);
    force_host_hash(SEED, "e.example", 0x58);
    let urls =
        |host: &str| -> Vec<String> { (0..300).map(|i| format!("https://{host}/p/{i}")).collect() };
    let (a, b, c, d) = (urls("a.example"), urls("b.example"), urls("c.example"), urls("d.example"));
    for (exact, counting) in [(false, false), (true, false), (false, true)] {
        let mode = format!("exact {exact}, counting {counting}");
        let dir = tempfile::tempdir().unwrap();
        let opts = NamespaceOptions {
            seed: SEED,
            exact,
            counting,
            capacity: 10_000,
            ..NamespaceOptions::default()
        };
        let shared = |ns: &Namespace, host: &str, n: usize| {
            let err = ns.forget_host(host).unwrap_err();
            match &err {
                Error::HostHashShared { hash, hosts, .. } => {
                    assert_eq!(*hash, if n == 2 { 0x4d } else { 0x58 }, "{mode}: {err}");
                    assert_eq!(hosts.len(), n, "{mode}: {err}");
                }
                other => panic!("{mode}: {host}: {other}"),
            }
            assert!(err.to_string().contains("0x0000004d") || n == 1, "{err}");
        };
        {
            let db = Db::open(dir.path()).unwrap();
            let ns = db.create_namespace("guarded", opts.clone()).unwrap();
            record(&ns, &d);
            // Only d.example is recorded under 0x58: e.example is refused, d.example is not.
            shared(&ns, "e.example", 1);
            check_none_new(&ns, &d);
            let recorded_a = record(&ns, &a).iter().filter(|&&n| n).count();
            assert!(recorded_a > 250, "{mode}");
            record(&ns, &c);
            record(&ns, &b);
            for host in ["a.example", "b.example", "x.example"] {
                shared(&ns, host, 2);
            }
            for urls in [&a, &b, &c, &d] {
                check_none_new(&ns, urls);
            }
            let forgot = ns.forget_host("c.example").unwrap();
            assert!(forgot > 250 && forgot <= 300, "{mode}: {forgot}");
            drop(ns);
            db.close().unwrap();
        }
        let db = Db::open(dir.path()).unwrap();
        let ns = db.namespace("guarded").unwrap();
        for host in ["a.example", "b.example", "x.example"] {
            shared(&ns, host, 2);
        }
        shared(&ns, "e.example", 1);
        for urls in [&a, &b, &d] {
            check_none_new(&ns, urls);
        }
        let new = ns.contains_batch(&c).unwrap().iter().filter(|&&s| !s).count();
        assert!(new >= 295, "{mode}: c.example's URLs are new after the restart: {new}");
        // d.example is alone under its hash: it forgets, after the restart too.
        let forgot = ns.forget_host("d.example").unwrap();
        assert!(forgot > 250 && forgot <= 300, "{mode}: {forgot}");
        let new = ns.contains_batch(&d).unwrap().iter().filter(|&&s| !s).count();
        assert!(new >= 295, "{mode}: {new}");
        for urls in [&a, &b] {
            check_none_new(&ns, urls);
        }
    }
}

/// Records made with host hashes given by the caller (not listed) make a forget of a host
/// with that hash refuse: they could be another host's URLs.
#[test]
fn records_of_an_unlisted_host_hash_make_a_forget_refuse() {
    let db = Db::in_memory();
    let ns = db.create_namespace("unlisted", NamespaceOptions::default()).unwrap();
    let h = ns.host_hash("q.example").unwrap();
    let fps: Vec<u64> =
        (0..10).map(|i| ns.fingerprint(&format!("https://other.example/{i}")).unwrap()).collect();
    let mut out = vec![false; fps.len()];
    ns.seen_fingerprints_hosts(&fps, &vec![h; fps.len()], &mut out).unwrap();
    let err = ns.forget_host("q.example").unwrap_err();
    assert!(matches!(err, Error::HostHashUnlisted { records: 10, .. }), "{err}");
    let mut seen = vec![false; fps.len()];
    ns.contains_fingerprints(&fps, &mut seen).unwrap();
    assert!(seen.iter().all(|&s| s), "nothing was forgotten");
}

/// The cost of the collision guard, for docs/forget.md (not a timed assertion: run by hand):
/// `fingerprint` and `fingerprint_host` (which lists the host) per URL over 1M URLs of 1,000
/// hosts, and the resident memory one million distinct hosts add.
/// `cargo test --profile ci -p urlseen-engine --test forget_host -- --ignored --nocapture host_guard_cost`
#[test]
#[ignore = "measurement; prints figures"]
fn host_guard_cost() {
    let db = Db::in_memory();
    let ns = db.create_namespace("cost", NamespaceOptions::default()).unwrap();
    let urls = corpus(1_000_000);
    for round in 0..3 {
        let t = Instant::now();
        let mut x = 0u64;
        for u in &urls {
            x ^= ns.fingerprint(u).unwrap();
        }
        let plain = t.elapsed().as_nanos() as f64 / urls.len() as f64;
        let t = Instant::now();
        for u in &urls {
            let (fp, h) = ns.fingerprint_host(u).unwrap();
            x ^= fp ^ u64::from(h);
        }
        let hosted = t.elapsed().as_nanos() as f64 / urls.len() as f64;
        println!(
            "round {round}: fingerprint {plain:.1} ns/URL, fingerprint_host (host listed) \
             {hosted:.1} ns/URL ({x:x})"
        );
    }
    let rss = || -> u64 {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        statm.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 4096
    };
    let hosts: Vec<String> =
        (0..1_000_000).map(|i| format!("https://host{i}.example.org/")).collect();
    let other = db.create_namespace("hosts", NamespaceOptions::default()).unwrap();
    let before = rss();
    for u in &hosts {
        other.fingerprint_host(u).unwrap();
    }
    let after = rss();
    println!(
        "1000000 distinct hosts (host0.example.org .. host999999.example.org) listed: RSS +{} \
         bytes, {:.1} bytes per host",
        after - before,
        (after - before) as f64 / 1e6
    );
}

/// The hosts file of the namespace log at `log` (`<ns>/log`, or a window generation's
/// `<ns>/gen/<start>/log`, whose hosts are its window's).
fn hosts_of(log: &Path) -> std::path::PathBuf {
    let dir = log.parent().unwrap();
    match dir.parent() {
        Some(up) if up.file_name().is_some_and(|n| n == "gen") => {
            up.parent().unwrap().join("hosts")
        }
        _ => dir.join("hosts"),
    }
}

/// The hosts file follows the namespace's fsync policy, and precedes the log on disk: under
/// `always`, `everysec` (its background sync) and `no`, with checkpoints and a close, no log
/// is ever synced while its hosts file holds bytes written and not synced; the hosts file is
/// synced at most once per log sync (not once per new host: 10,000 here); and after a reopen
/// every host is listed (a forget of one finds its URL, instead of refusing). Bloom, exact,
/// and a recrawl window (whose generations' logs share the window's hosts file).
#[test]
fn the_hosts_file_is_synced_before_the_log_under_every_policy() {
    use std::collections::HashMap;
    use urlseen_engine::storage::{FaultyStorage, FileOp};
    // False positives too rare to show: every URL is new.
    let sharp = NamespaceOptions { capacity: 10_000, fpr: 1e-7, ..NamespaceOptions::default() };
    let window = NamespaceOptions {
        recrawl_after: Some(std::time::Duration::from_millis(8 * WINDOW_SPAN_MS)),
        generations: 8,
        ..sharp.clone()
    };
    let names = ["bloom", "exact", "window"];
    for fsync in [Fsync::Always, Fsync::EverySec, Fsync::No] {
        let dir = tempfile::tempdir().unwrap();
        let storage = FaultyStorage::new();
        storage.keep_journal(true);
        let clock = FakeClock::at(1_700_000_000_000);
        let options = DbOptions {
            fsync,
            storage: Arc::new(storage.clone()),
            clock: clock.clone(),
            ..DbOptions::default()
        };
        let db = Db::open_with(dir.path(), options.clone()).unwrap();
        let all = [
            db.create_namespace("bloom", sharp.clone()).unwrap(),
            db.create_namespace("exact", NamespaceOptions { exact: true, ..sharp.clone() })
                .unwrap(),
            db.create_namespace("window", window.clone()).unwrap(),
        ];
        for b in 0..200 {
            let urls: Vec<String> =
                (0..50).map(|i| format!("https://n{b}-{i}.example/p")).collect();
            for ns in &all {
                assert!(ns.seen_batch(&urls).unwrap().iter().all(|&s| !s), "{fsync}");
            }
            if b == 100 {
                for ns in &all {
                    ns.checkpoint().unwrap();
                }
                clock.advance(std::time::Duration::from_millis(WINDOW_SPAN_MS));
                if fsync == Fsync::EverySec {
                    // The background sync runs meanwhile.
                    std::thread::sleep(std::time::Duration::from_millis(1_300));
                }
            }
        }
        drop(all);
        db.close().unwrap();
        storage.keep_journal(false);

        let mut dirty: HashMap<std::path::PathBuf, bool> = HashMap::new();
        let (mut log_syncs, mut hosts_syncs) = (HashMap::new(), HashMap::new());
        for (op, path) in storage.journal() {
            let file = path.file_name().unwrap().to_str().unwrap().to_owned();
            match (op, file.as_str()) {
                (FileOp::Append, "hosts") => {
                    dirty.insert(path, true);
                }
                (FileOp::Sync, "hosts") => {
                    dirty.insert(path.clone(), false);
                    *hosts_syncs.entry(path).or_insert(0u64) += 1;
                }
                (FileOp::Sync, "log") => {
                    let hosts = hosts_of(&path);
                    assert!(
                        !dirty.get(&hosts).copied().unwrap_or(false),
                        "{fsync}: {} synced before {}",
                        path.display(),
                        hosts.display()
                    );
                    *log_syncs.entry(hosts).or_insert(0u64) += 1;
                }
                _ => {}
            }
        }
        assert_eq!(hosts_syncs.len(), 3, "{fsync}: one hosts file per namespace");
        for (hosts, &n) in &hosts_syncs {
            let logs = log_syncs.get(hosts).copied().unwrap_or(0);
            assert!(n <= logs, "{fsync}: {} synced {n} times, its logs {logs}", hosts.display());
            if fsync != Fsync::Always {
                assert!(n < 20, "{fsync}: {} synced {n} times", hosts.display());
            }
        }
        let db = Db::open_with(dir.path(), options).unwrap();
        for name in names {
            let ns = db.namespace(name).unwrap();
            for host in ["n0-0.example", "n150-49.example", "n199-7.example"] {
                assert_eq!(ns.forget_host(host).unwrap(), 1, "{fsync}, {name}: {host}");
            }
        }
    }
}

/// A hosts file that cannot be written (a failed fsync under `always`, a full disk under
/// `everysec`) makes the namespace refuse as a failed log write does: the batch whose records
/// needed it fails with the I/O error, every later write is refused (`Error::Poisoned`, the
/// server's `MISCONF`), and after a reopen everything acknowledged before is seen and the
/// failed batch was not recorded.
#[test]
fn a_failed_hosts_file_write_refuses_like_a_failed_log_write() {
    use urlseen_engine::storage::FaultyStorage;
    for (fsync, full) in [(Fsync::Always, false), (Fsync::EverySec, true)] {
        let dir = tempfile::tempdir().unwrap();
        let storage = FaultyStorage::new();
        {
            let options =
                DbOptions { fsync, storage: Arc::new(storage.clone()), ..DbOptions::default() };
            let db = Db::open_with(dir.path(), options).unwrap();
            let ns = db.create_namespace("h", options_for(false)).unwrap();
            assert!(!ns.seen("https://a.example/").unwrap());
            ns.sync().unwrap();
            match full {
                true => storage.disk_full_after(0),
                false => storage.fail_syncs(true),
            }
            let err = ns.seen_batch(&["https://a.example/2", "https://b.example/"]).unwrap_err();
            assert!(matches!(&err, Error::Io { path, .. } if path.ends_with("hosts")), "{err}");
            storage.fail_syncs(false);
            storage.disk_full_after(u64::MAX);
            for url in ["https://a.example/3", "https://c.example/"] {
                let err = ns.seen(url).unwrap_err();
                assert!(matches!(&err, Error::Poisoned { reason } if reason.contains("hosts")));
            }
            // `urlseen filter`'s path stops the same way.
            let (fp, host) = ns.fingerprint_host("https://d.example/").unwrap();
            let mut out = [false];
            let err = ns
                .seen_fingerprints_hosts_then(&[fp], &[host], &mut out, &mut |_| Ok(()))
                .unwrap_err();
            assert!(matches!(err, Error::Poisoned { .. }), "{err}");
            drop(ns);
            drop(db);
        }
        let db = Db::open(dir.path()).unwrap();
        let ns = db.namespace("h").unwrap();
        assert!(ns.contains("https://a.example/").unwrap(), "{fsync}: an acknowledged URL lost");
        for url in ["https://a.example/2", "https://b.example/", "https://c.example/"] {
            assert!(!ns.contains(url).unwrap(), "{fsync}: {url} was not acknowledged");
        }
        assert_eq!(ns.forget_host("a.example").unwrap(), 1, "{fsync}");
    }
}

/// URLs fingerprinted as a batch (`Namespace::fingerprint_hosts`, what `urlseen filter` uses)
/// give what one-by-one fingerprinting gives, invalid ones included, and list their hosts
/// before anything is recorded: a forget by host after a restart finds every host listed.
#[test]
fn hosts_fingerprinted_in_batches_are_listed_before_their_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut urls = corpus(20_000);
    urls.insert(7, "not a url".into());
    urls.insert(5000, "http://:80/".into());
    urls.insert(9000, "mailto:someone@example.com".into());
    let mut recorded = Vec::new();
    {
        let db = Db::open(dir.path()).unwrap();
        let one_by_one = Db::in_memory();
        let (ns, single) = (
            db.create_namespace("crawl", options(false, 20_000)).unwrap(),
            one_by_one.create_namespace("crawl", options(false, 20_000)).unwrap(),
        );
        let mut results = Vec::new();
        for chunk in urls.chunks(4096) {
            let texts: Vec<&str> = chunk.iter().map(String::as_str).collect();
            ns.fingerprint_hosts(&texts, &mut results);
            assert_eq!(results.len(), chunk.len());
            let (mut fps, mut hosts) = (Vec::new(), Vec::new());
            for (url, got) in chunk.iter().zip(&results) {
                match (got, single.fingerprint_host(url)) {
                    (Ok(got), Ok(want)) => {
                        assert_eq!(*got, want, "{url}");
                        fps.push(got.0);
                        hosts.push(got.1);
                    }
                    (Err(_), Err(_)) => {}
                    (got, want) => panic!("{url}: batched {got:?}, single {want:?}"),
                }
            }
            let mut seen = vec![false; fps.len()];
            ns.seen_fingerprints_hosts(&fps, &hosts, &mut seen).unwrap();
            // The valid URLs, in order, are the corpus checked below.
            recorded.extend(seen.iter().map(|&s| !s));
        }
        drop(ns);
        db.close().unwrap();
    }
    let db = Db::open(dir.path()).unwrap();
    let ns = db.namespace("crawl").unwrap();
    let urls = corpus(20_000);
    let of_the_host = (0..urls.len()).filter(|&i| of_host(i, 417)).count() as u64;
    let forgotten = ns.forget_host("site417.example").unwrap();
    // Bloom mode: a URL of the host may have been a false positive, never recorded.
    assert!(forgotten <= of_the_host && forgotten + 3 >= of_the_host, "{forgotten}");
    check(&ns, &urls, &recorded, 417, "after a batched recording, a restart and a forget");
}
