//! Forgetting every URL under a prefix (issue 15 item 2): in a namespace that keeps its URLs,
//! afterwards every recorded URL that starts with the prefix answers "new" and every other one
//! still answers "seen": in Bloom, exact and counting mode, in memory, in a spill directory and
//! in a data directory, across a restart, after a crash image whose log holds the forget and
//! no snapshot, and while other writers record.
//!
//! `URLSEEN_FORGET_URLS=1000000` runs the same on a million URLs (see `docs/forget.md`).

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use urlseen_engine::{Db, Error, Namespace, NamespaceOptions};

const HOSTS: usize = 100;
const SECTIONS: [&str; 4] = ["blog", "blogger", "shop", "blog/2024"];

fn urls_count() -> usize {
    std::env::var("URLSEEN_FORGET_URLS").ok().and_then(|n| n.parse().ok()).unwrap_or(40_000)
}

/// URL `i`: host `i % HOSTS`, a section, and `http` or `https`, so that neither the host nor
/// the first characters of the path alone say which are under a prefix.
fn url(i: usize) -> String {
    let host = i % HOSTS;
    let section = SECTIONS[(i / HOSTS) % SECTIONS.len()];
    let scheme = if (i / (HOSTS * SECTIONS.len())).is_multiple_of(2) { "https" } else { "http" };
    format!("{scheme}://site{host}.example/{section}/{i}")
}

/// What `https://site7.example/blog/` covers: host 7, https, sections `blog` and `blog/2024`.
fn under_blog_of_7(i: usize) -> bool {
    let u = url(i);
    u.starts_with("https://site7.example/blog/")
}

fn options(exact: bool, counting: bool, n: usize) -> NamespaceOptions {
    NamespaceOptions {
        capacity: (n / 10) as u64,
        exact,
        counting,
        keep_urls: true,
        ..NamespaceOptions::default()
    }
}

fn record(ns: &Namespace, urls: &[String]) -> Vec<bool> {
    let mut new = Vec::with_capacity(urls.len());
    for chunk in urls.chunks(4096) {
        new.extend(ns.seen_batch(chunk).unwrap().iter().map(|&s| !s));
    }
    new
}

/// (URLs under the prefix answered new, URLs under it, other recorded URLs answered new).
/// `recorded[i]`: whether URL `i` was recorded (a URL answered "seen" on a Bloom false positive
/// was not, and a forget may drop its kept record: it is no false negative to answer it new).
fn answers(ns: &Namespace, urls: &[String], recorded: &[bool]) -> (usize, usize, usize) {
    let (mut new, mut total, mut others_new) = (0, 0, 0);
    for (c, chunk) in urls.chunks(4096).enumerate() {
        for (j, &seen) in ns.contains_batch(chunk).unwrap().iter().enumerate() {
            let i = c * 4096 + j;
            if under_blog_of_7(i) {
                total += 1;
                new += usize::from(!seen);
            } else if recorded[i] {
                others_new += usize::from(!seen);
            }
        }
    }
    (new, total, others_new)
}

fn check(ns: &Namespace, urls: &[String], recorded: &[bool], when: &str) {
    let (new, total, others_new) = answers(ns, urls, recorded);
    assert_eq!(others_new, 0, "{when}: other recorded URLs answered new (false negatives)");
    if ns.options().is_exact() {
        assert_eq!(new, total, "{when}: exact mode: every URL under the prefix is new");
    } else {
        let bound = (total as f64 * ns.options().fpr * 3.0).ceil() as usize + 2;
        assert!(total - new <= bound, "{when}: {} of {total} still seen", total - new);
    }
    eprintln!("{when}: URLs under the prefix new {new}/{total}, other URLs new {others_new}");
}

fn forget_in(db: Db, exact: bool, counting: bool, dir: Option<&Path>) {
    let n = urls_count();
    let urls: Vec<String> = (0..n).map(url).collect();
    let ns = db.create_namespace("crawl", options(exact, counting, n)).unwrap();
    let started = Instant::now();
    let answered_new = record(&ns, &urls);
    let recorded = started.elapsed();
    let kept = ns.stats().kept_urls.unwrap();
    assert!(kept >= answered_new.iter().filter(|&&new| new).count() as u64);
    assert!(kept <= n as u64, "{kept} entries for {n} distinct URLs");
    // Repeats cost no journal space: in exact and counting mode any repeat (the namespace
    // holds it), in Bloom mode a repeat among the URLs journaled last.
    let recent = n.min(urlseen_engine::RECENT_JOURNALED / 2);
    record(&ns, &urls[n - recent..]);
    if ns.options().is_exact() {
        record(&ns, &urls[..n / 2]);
    }
    assert_eq!(ns.stats().kept_urls.unwrap(), kept, "repeats were journaled");
    let expected = (0..n).filter(|&i| under_blog_of_7(i) && answered_new[i]).count() as u64;
    assert!(expected > 0);
    let started = Instant::now();
    // Spelled otherwise: the same canonical prefix.
    let forgotten = ns.forget_prefix("HTTPS://Site7.EXAMPLE:443/blog/").unwrap();
    eprintln!(
        "mode {}: {n} URLs recorded in {recorded:?}; forget --prefix \
         https://site7.example/blog/: {forgotten} forgotten (expected {expected}) in {:?}; \
         journal {} entries, {} bytes of disk",
        ns.stats().mode,
        started.elapsed(),
        kept,
        ns.stats().disk_bytes,
    );
    assert_eq!(forgotten, expected, "the count is the recorded URLs under the prefix");
    check(&ns, &urls, &answered_new, "after the forget");
    assert_eq!(ns.forget_prefix("https://site7.example/blog/").unwrap(), 0, "nothing left");
    assert_eq!(ns.forget_prefix("https://nowhere.example/").unwrap(), 0);
    let Some(dir) = dir else { return };
    drop(ns);
    db.close().unwrap();
    let db = Db::open(dir).unwrap();
    let ns = db.namespace("crawl").unwrap();
    assert!(ns.options().keep_urls, "kept with the namespace");
    check(&ns, &urls, &answered_new, "after a restart");
    // Recorded again, forgotten again (the journal lists them twice now).
    let again: Vec<String> = (0..n).filter(|&i| under_blog_of_7(i)).map(url).collect();
    let new = ns.seen_batch(&again).unwrap().iter().filter(|&&s| !s).count() as u64;
    assert!(new * 10 >= again.len() as u64 * 9, "{new} of {} recorded again", again.len());
    assert_eq!(ns.forget_prefix("https://site7.example/blog/").unwrap(), new);
    check(&ns, &urls, &answered_new, "after a second forget");
    drop(ns);
    db.close().unwrap();
    if !counting {
        // A crash image after the forget's log record and before its snapshot: recovery
        // replays the whole log, the forget records included.
        std::fs::remove_file(
            dir.join("ns").read_dir().unwrap().next().unwrap().unwrap().path().join("snapshot"),
        )
        .unwrap();
    }
    let db = Db::open(dir).unwrap();
    let ns = db.namespace("crawl").unwrap();
    check(&ns, &urls, &answered_new, "after recovery from the log alone");
}

#[test]
fn forget_prefix_in_memory_bloom() {
    forget_in(Db::in_memory(), false, false, None);
}

#[test]
fn forget_prefix_in_memory_exact() {
    forget_in(Db::in_memory(), true, false, None);
}

#[test]
fn forget_prefix_in_memory_counting() {
    forget_in(Db::in_memory(), false, true, None);
}

#[test]
fn forget_prefix_in_a_spill_directory() {
    let parent = tempfile::tempdir().unwrap();
    let db = Db::temporary(Some(parent.path())).unwrap();
    forget_in(db, false, false, None);
}

#[test]
fn forget_prefix_in_a_data_directory_bloom_then_restart() {
    let dir = tempfile::tempdir().unwrap();
    forget_in(Db::open(dir.path()).unwrap(), false, false, Some(dir.path()));
}

#[test]
fn forget_prefix_in_a_data_directory_exact_then_restart() {
    let dir = tempfile::tempdir().unwrap();
    forget_in(Db::open(dir.path()).unwrap(), true, false, Some(dir.path()));
}

#[test]
fn forget_prefix_in_a_data_directory_counting_then_restart() {
    let dir = tempfile::tempdir().unwrap();
    forget_in(Db::open(dir.path()).unwrap(), false, true, Some(dir.path()));
}

/// Writers go on recording other URLs (and their leaves split) while a prefix is forgotten:
/// none of theirs is lost, and every URL under the prefix recorded before the forget is new.
#[test]
fn a_forget_among_concurrent_writers_loses_none_of_theirs() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    let n = 20_000;
    let ns = db.create_namespace("crawl", options(true, false, 2_000)).unwrap();
    let urls: Vec<String> = (0..n).map(url).collect();
    let answered_new = record(&ns, &urls);
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let ns = Arc::clone(&ns);
            std::thread::spawn(move || {
                let mine: Vec<String> =
                    (0..10_000).map(|i| format!("https://writer{w}.example/p/{i}")).collect();
                for chunk in mine.chunks(100) {
                    assert!(ns.seen_batch(chunk).unwrap().iter().all(|&s| !s));
                }
                mine
            })
        })
        .collect();
    let forgotten = ns.forget_prefix("https://site7.example/blog/").unwrap();
    let expected = (0..n).filter(|&i| under_blog_of_7(i)).count() as u64;
    assert_eq!(forgotten, expected);
    for w in writers {
        let mine = w.join().unwrap();
        assert!(ns.contains_batch(&mine).unwrap().iter().all(|&s| s), "a writer's URL lost");
    }
    check(&ns, &urls, &answered_new, "after a forget among writers");
}

#[test]
fn a_namespace_that_does_not_keep_urls_refuses_and_options_persist() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    let plain = db.create_namespace("plain", NamespaceOptions::default()).unwrap();
    plain.seen("https://site7.example/blog/1").unwrap();
    let err = plain.forget_prefix("https://site7.example/blog/").unwrap_err();
    assert!(matches!(err, Error::ForgetByUnsupported { .. }), "{err}");
    assert!(err.to_string().contains("--keep-urls"), "{err}");
    assert!(plain.contains("https://site7.example/blog/1").unwrap());
    let kept = db
        .create_namespace(
            "kept",
            NamespaceOptions { keep_urls: true, ..NamespaceOptions::default() },
        )
        .unwrap();
    kept.seen("https://site7.example/blog/1").unwrap();
    drop((plain, kept));
    db.close().unwrap();
    // Reopened with other options: each keeps its own.
    let db = Db::open(dir.path()).unwrap();
    let kept = db.namespace_or_create("kept", NamespaceOptions::default()).unwrap();
    assert!(kept.options().keep_urls);
    assert_eq!(kept.forget_prefix("https://site7.example/").unwrap(), 1);
    assert!(!kept.contains("https://site7.example/blog/1").unwrap());
    let plain = db
        .namespace_or_create(
            "plain",
            NamespaceOptions { keep_urls: true, ..NamespaceOptions::default() },
        )
        .unwrap();
    assert!(!plain.options().keep_urls);
}

#[test]
fn prefixes_that_could_grow_broader_are_typed_errors() {
    let db = Db::in_memory();
    let ns = db
        .create_namespace("n", NamespaceOptions { keep_urls: true, ..NamespaceOptions::default() })
        .unwrap();
    ns.seen("https://example.com/a/1").unwrap();
    for bad in [
        "https://example.com/search?",
        "https://example.com/p?id=1",
        "https://example.com/a#top",
        "https://example.com/a/..",
        "https://example.com/a/%2E%2e/",
        "https://example.com/a/./b",
        // Parsing drops tabs and newlines and trims spaces: the dots meet afterwards.
        "https://example.com/a/.\t./",
        "https://example.com/a/.\n.",
        "https://example.com/a/.. ",
    ] {
        let err = ns.forget_prefix(bad).unwrap_err();
        assert!(matches!(err, Error::InvalidPrefix { .. }), "{bad:?}: {err}");
    }
    assert!(matches!(ns.forget_prefix("not a url").unwrap_err(), Error::InvalidUrl(_)));
    assert!(ns.contains("https://example.com/a/1").unwrap(), "nothing was forgotten");
    // A URL of the host outside the prefix stays; the prefix is matched on the canonical URL.
    ns.seen("https://example.com/ab").unwrap();
    assert_eq!(ns.forget_prefix("https://EXAMPLE.com/a/").unwrap(), 1);
    assert!(ns.contains("https://example.com/ab").unwrap());
    assert!(!ns.contains("https://example.com/a/1").unwrap());
    // A recrawl window cannot keep its URLs (yet): refused at creation.
    let err = db
        .create_namespace(
            "w",
            NamespaceOptions {
                keep_urls: true,
                recrawl_after: Some(std::time::Duration::from_secs(80)),
                ..NamespaceOptions::default()
            },
        )
        .unwrap_err();
    assert!(matches!(err, Error::InvalidOption { name: "keep_urls", .. }), "{err}");
}

/// Records with no host (raw items, fingerprints) might be URLs under the prefix: the forget
/// refuses, as a forget by host does, in a counting namespace too.
#[test]
fn records_without_a_host_make_a_forget_by_prefix_refuse() {
    let db = Db::in_memory();
    for (name, counting) in [("n", false), ("c", true)] {
        let options = NamespaceOptions { keep_urls: true, counting, ..NamespaceOptions::default() };
        let ns = db.create_namespace(name, options).unwrap();
        ns.seen("https://site7.example/blog/1").unwrap();
        assert!(!ns.seen_bytes(b"an item").unwrap());
        let err = ns.forget_prefix("https://site7.example/blog/").unwrap_err();
        assert!(matches!(err, Error::ForgetHostUnknown { records: 1, .. }), "{name}: {err}");
        assert!(ns.contains("https://site7.example/blog/1").unwrap());
    }
}

/// A namespace that holds records and whose journal is gone is refused at open: a forget by
/// prefix would miss every URL recorded before, silently.
#[test]
fn a_missing_journal_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    let options = NamespaceOptions { keep_urls: true, ..NamespaceOptions::default() };
    db.create_namespace("kept", options).unwrap().seen("https://a.example/blog/1").unwrap();
    db.close().unwrap();
    let ns_dir = dir.path().join("ns").read_dir().unwrap().next().unwrap().unwrap().path();
    std::fs::remove_file(ns_dir.join("urls")).unwrap();
    // Found by the namespace's first use (an open reads no namespace).
    let err = Db::open(dir.path()).unwrap().try_namespace("kept").unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("URL journal"), "{err}");
}
