//! The conformance suite: the same scenarios against every place a namespace can live, in
//! memory, on disk, in one Redis and in a 3-master Redis Cluster, through the one
//! [`SeenSet`] interface a crawler uses. Each backend must:
//!
//! - answer a stream as an exact set would, up to its Bloom false positives (never a repeat
//!   answered new, a URL new at most once within a batch, false positives under the bound);
//! - split under concurrent clients and lose nothing (each URL new for at most one client);
//! - keep everything acknowledged through a restart (disk: close and reopen; Redis and
//!   Redis Cluster: `kill -9` of every server, with an fsync before every reply, then start
//!   again and a new client), and stay writable after it;
//! - keep its measured FPR under the namespace's bound while it grows by splits;
//! - before its first split, give the in-memory backend's answers, false positives included
//!   (one leaf is the same filter on every backend for the same seed and options);
//! - after splits too: grown alike, the trees have the same shape, leaf sizes and answers,
//!   false positives included (every backend routes by ranges and sizes each leaf by its
//!   depth and place).
//!
//! An in-memory namespace has no restart to survive (it holds nothing past its process): the
//! restart scenario runs for the three others.
//!
//! Every backend keeps every URL it answered "new", and no more: a URL namespace does not
//! keep a "seen" answered on a false positive through later splits (docs/durability.md). So
//! where a namespace grows through its own false positives, no backend's filters are bound to
//! hold those after a split: the scenarios that grow on any stream
//! compare each backend with the exact answers, and the one that compares false positives
//! across backends grows on a stream without them.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod redis_support;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Barrier};
use std::thread;

use redis_support::{Cluster, Server};
use urlseen_corpus::distinct_urls;
use urlseen_engine::{Db, DbOptions, Fsync, NamespaceOptions, SeenSet, SplitMode, SplitPolicy};
use urlseen_redis::{RedisDb, RedisMode};

/// A batch of URLs asked of a namespace, one answer each ("seen").
type Ask = Box<dyn Fn(&[&str]) -> Vec<bool> + Send + Sync>;

/// A namespace's shape: its leaves, and the bits of their filters in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    leaves: usize,
    filter_bits: u64,
}

/// One client's view of a namespace: what every scenario needs, whatever the backend.
struct Client {
    seen: Ask,
    contains: Ask,
    shape: Box<dyn Fn() -> Shape + Send + Sync>,
}

impl Client {
    fn over<S: SeenSet + 'static>(
        set: Arc<S>,
        shape: impl Fn() -> Shape + Send + Sync + 'static,
    ) -> Self {
        let (a, b) = (Arc::clone(&set), set);
        Client {
            seen: Box::new(move |urls| a.seen_batch(urls).unwrap()),
            contains: Box::new(move |urls| {
                urls.iter().map(|url| b.contains(url).unwrap()).collect()
            }),
            shape: Box::new(shape),
        }
    }

    fn leaves(&self) -> usize {
        (self.shape)().leaves
    }
}

/// A backend and what it holds (the local ones their `Db`, shared by their clients).
enum Backend {
    Memory(Db),
    Disk { dir: tempfile::TempDir, db: Option<Db> },
    Redis(Server),
    Cluster(Cluster),
}

impl Backend {
    fn memory() -> Self {
        Backend::Memory(Db::in_memory())
    }

    fn disk() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db =
            Db::open_with(dir.path(), DbOptions { fsync: Fsync::Always, ..Default::default() });
        Backend::Disk { db: Some(db.unwrap()), dir }
    }

    fn redis() -> Self {
        Backend::Redis(Server::start_durable())
    }

    fn cluster() -> Self {
        Backend::Cluster(Cluster::start_durable(3))
    }

    /// A new client of namespace `name` (created with `options` if it does not exist): for
    /// Redis its own connections and replicas, as another crawler process would have.
    fn client(&self, name: &str, options: &NamespaceOptions) -> Client {
        let local = |db: &Db| {
            let ns = db.namespace_or_create(name, options.clone()).unwrap();
            let stats = Arc::clone(&ns);
            Client::over(ns, move || {
                let s = stats.stats();
                Shape { leaves: s.leaf_count, filter_bits: s.leaves.iter().map(|l| l.bits).sum() }
            })
        };
        let remote = |urls: Vec<String>, mode: RedisMode| {
            let db = RedisDb::open(redis_support::options(urls, mode)).unwrap();
            let ns = db.namespace(name, options.clone()).unwrap();
            let stats = Arc::clone(&ns);
            Client::over(ns, move || {
                let s = stats.stats().unwrap();
                Shape { leaves: s.leaves.len(), filter_bits: s.filter_bits }
            })
        };
        match self {
            Backend::Memory(db) => local(db),
            Backend::Disk { db, .. } => local(db.as_ref().unwrap()),
            Backend::Redis(server) => remote(vec![server.url()], RedisMode::Single),
            Backend::Cluster(cluster) => remote(cluster.urls(), RedisMode::Cluster),
        }
    }

    /// The contract after a namespace took its URLs: every URL answered "new" (`recorded`) is
    /// seen. A URL namespace keeps no more on any backend: one answered "seen" on a false
    /// positive was not recorded and may be "new" once its leaf has split (docs/durability.md,
    /// "Seen stays seen").
    fn assert_kept(&self, client: &Client, recorded: &[&str], what: &str) {
        let seen = (client.contains)(recorded);
        let missing: Vec<String> =
            recorded.iter().zip(seen).filter(|p| !p.1).map(|p| p.0.to_string()).collect();
        assert!(
            missing.is_empty(),
            "{what}: {} of {}, e.g. {}",
            missing.len(),
            recorded.len(),
            missing[0]
        );
    }

    /// A restart of the backend's servers (disk: the process's `Db` closed and opened again).
    fn restart(&mut self) {
        match self {
            Backend::Memory(_) => unreachable!("memory keeps nothing past its process"),
            Backend::Disk { dir, db } => {
                db.take().unwrap().close().unwrap();
                *db = Some(Db::open(dir.path()).unwrap());
            }
            Backend::Redis(server) => server.restart(),
            Backend::Cluster(cluster) => cluster.restart(),
        }
    }
}

/// Leaves of 16 Kibit (about 1,700 URLs at 1%): a few thousand URLs split many times.
fn small() -> NamespaceOptions {
    NamespaceOptions {
        capacity: 2_000,
        fpr: 0.01,
        leaf_bits: Some(1 << 14),
        split: SplitPolicy::default(),
        ..NamespaceOptions::default()
    }
}

/// 4,000 distinct URLs and 2,000 repeats of them (some within a batch), in a fixed order, with
/// equivalent spellings of some URLs (the canonical form is what is seen).
fn stream() -> Vec<String> {
    let distinct = distinct_urls(41, 4_000);
    let mut out = Vec::with_capacity(6_000);
    for (i, url) in distinct.iter().enumerate() {
        out.push(url.clone());
        if i % 2 == 1 {
            // A repeat of a URL from earlier in this batch or an earlier one.
            let earlier = &distinct[(i * 7919) % (i + 1)];
            out.push(match i % 6 {
                1 => earlier.replacen("http", "HTTP", 1),
                _ => earlier.clone(),
            });
        }
    }
    out
}

/// The stream through one client in batches of 250, against an exact set: no repeat answered
/// new, and first sightings answered "seen" (false positives) under the bound.
fn answers_as_an_exact_set(backend: &Backend) {
    let client = backend.client("answers", &small());
    let urls = stream();
    let mut truth: HashSet<&str> = HashSet::new();
    let (mut firsts, mut false_positives) = (0, 0);
    let mut recorded: Vec<&str> = Vec::new();
    for batch in urls.chunks(250) {
        let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
        let answers = (client.seen)(&refs);
        for (url, seen) in batch.iter().zip(answers) {
            let canonical = canonical_key(url);
            if truth.contains(canonical) {
                assert!(seen, "{url} was recorded earlier and answered new");
            } else {
                truth.insert(canonical);
                firsts += 1;
                false_positives += usize::from(seen);
            }
            if !seen {
                recorded.push(url);
            }
        }
    }
    assert_eq!(firsts, 4_000, "the stream's distinct URLs");
    assert!(false_positives <= firsts / 100, "{false_positives} false positives of {firsts}");
    assert!(client.leaves() > 1, "the namespace split");
    backend.assert_kept(&client, &recorded, "a recorded URL was lost");
}

/// The scheme is case-insensitive: `HTTP://x` is `http://x`.
fn canonical_key(url: &str) -> &str {
    url.strip_prefix("HTTP").or_else(|| url.strip_prefix("http")).unwrap_or(url)
}

/// Three clients feed the same 9,000 URLs in rotated orders while leaves split: each URL is
/// new for at most one of them, nearly every URL for one, and afterwards every URL is seen.
fn concurrent_splits_lose_nothing(backend: &Backend) {
    const CLIENTS: usize = 3;
    let urls = Arc::new(distinct_urls(43, 9_000));
    let clients: Vec<Client> = (0..CLIENTS).map(|_| backend.client("shared", &small())).collect();
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let news: Vec<Vec<usize>> = thread::scope(|scope| {
        let handles: Vec<_> = clients
            .iter()
            .enumerate()
            .map(|(c, client)| {
                let (urls, barrier) = (Arc::clone(&urls), Arc::clone(&barrier));
                scope.spawn(move || {
                    let mut order: Vec<usize> = (0..urls.len()).collect();
                    order.rotate_left(c * urls.len() / CLIENTS);
                    barrier.wait();
                    let mut new = Vec::new();
                    for chunk in order.chunks(500) {
                        let refs: Vec<&str> = chunk.iter().map(|&i| urls[i].as_str()).collect();
                        let seen = (client.seen)(&refs);
                        new.extend(chunk.iter().zip(seen).filter(|p| !p.1).map(|p| *p.0));
                    }
                    new
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut count: HashMap<usize, usize> = HashMap::new();
    for i in news.into_iter().flatten() {
        *count.entry(i).or_default() += 1;
    }
    assert!(count.values().all(|&n| n == 1), "a URL was new for two clients");
    assert!(count.len() > urls.len() * 98 / 100, "{} of {} new once", count.len(), urls.len());
    let fresh = backend.client("shared", &small());
    let recorded: Vec<&str> = count.keys().map(|&i| urls[i].as_str()).collect();
    backend.assert_kept(&fresh, &recorded, "a URL was lost in a split");
    let leaves = fresh.leaves();
    assert!(leaves > 2, "the namespace split under the clients ({leaves} leaves)");
}

/// What was acknowledged before a restart is seen after it, by a new client, and the
/// namespace still takes new URLs.
fn a_restart_keeps_everything_acknowledged(backend: &mut Backend) {
    let urls = distinct_urls(47, 5_000);
    let refs: Vec<&str> = urls.iter().map(String::as_str).collect();
    let recorded: Vec<&str> = {
        let client = backend.client("restart", &small());
        let seen: Vec<bool> = refs.chunks(400).flat_map(|batch| (client.seen)(batch)).collect();
        refs.iter().zip(seen).filter(|p| !p.1).map(|p| *p.0).collect()
    };
    assert!(recorded.len() > 4_900, "{} of 5,000 new before the restart", recorded.len());
    backend.restart();
    let client = backend.client("restart", &small());
    backend.assert_kept(&client, &recorded, "an acknowledged URL was lost");
    let more = distinct_urls(48, 1_000);
    let more: Vec<&str> = more.iter().map(String::as_str).collect();
    let new = (client.seen)(&more).iter().filter(|&&seen| !seen).count();
    assert!(new > 980, "{new} of 1,000 fresh URLs new after the restart");
}

/// A namespace created for 10,000 URLs at 1% grows by splits to 30,000: on 30,000 other URLs
/// its measured FPR stays under 1%.
fn fpr_stays_under_the_bound(backend: &Backend) {
    let options = NamespaceOptions { capacity: 10_000, fpr: 0.01, ..NamespaceOptions::default() };
    let client = backend.client("fpr", &options);
    let urls = distinct_urls(53, 60_000);
    let (inserted, others) = urls.split_at(30_000);
    for batch in inserted.chunks(1_000) {
        let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
        (client.seen)(&refs);
    }
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    let false_positives = (client.contains)(&others).iter().filter(|&&seen| seen).count();
    assert!(false_positives <= 300, "FPR {} on 30,000 other URLs", false_positives as f64 / 3e4);
}

/// Before its first split a namespace is one leaf, the same filter on every backend for the
/// same seed and options: every backend answers as the in-memory one does, false positives
/// included. One URL at a time and in lookups, exactly. In batches, a Redis client may answer
/// "new" where memory answers "seen": Redis compares the URLs its replica does not cover yet
/// (this batch's among them) with the log exactly, so it gives fewer false positives there,
/// never more. (After splits the backends differ more: see the module docs.)
fn one_leaf_answers_as_memory_does(backend: &Backend) {
    // At 5%, a leaf holding 2,000 URLs answers about a hundred of 20,000 other URLs "seen".
    let options = NamespaceOptions { capacity: 4_000, fpr: 0.05, ..NamespaceOptions::default() };
    let urls = distinct_urls(59, 24_000);
    let (one_by_one, rest) = urls.split_at(2_000);
    let (others, batched) = rest.split_at(20_000);
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    let run = |backend: &Backend| {
        let client = backend.client("alike", &options);
        let singles: Vec<bool> =
            one_by_one.iter().flat_map(|url| (client.seen)(&[url.as_str()])).collect();
        let lookups = (client.contains)(&others);
        let mut batches = Vec::new();
        for batch in batched.chunks(250) {
            let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
            batches.extend((client.seen)(&refs));
        }
        (singles, lookups, batches, client.leaves())
    };
    let (want_singles, want_lookups, want_batches, _) = run(&Backend::memory());
    let (singles, lookups, batches, leaves) = run(backend);
    assert_eq!(leaves, 1, "the namespace did not split");
    let hits = |answers: &[bool]| answers.iter().filter(|&&hit| hit).count();
    let positives = hits(&want_singles) + hits(&want_lookups) + hits(&want_batches);
    assert!(positives >= 50, "only {positives} false positives to compare");
    let differ = |a: &[bool], b: &[bool]| a.iter().zip(b).filter(|(x, y)| x != y).count();
    assert_eq!(differ(&singles, &want_singles), 0, "one URL at a time, answers differ");
    assert_eq!(differ(&lookups, &want_lookups), 0, "lookups differ ({positives} positives)");
    let redis = matches!(backend, Backend::Redis(_) | Backend::Cluster(_));
    for (i, (&got, &want)) in batches.iter().zip(&want_batches).enumerate() {
        assert!(
            got == want || (redis && want && !got),
            "batched URL {i}: answered {got}, memory answered {want}"
        );
    }
}

/// After splits too, every backend gives the in-memory backend's answers, false positives
/// included, for the same seed and options: the trees route alike (by ranges), size each leaf
/// alike (by its depth and place, growing with depth), and split at the same counts. The
/// namespace grows one URL at a time, splitting inline, on a stream that memory answers "new"
/// throughout (the URLs it took for false positives taken out: a positive is kept as a record
/// locally and not in Redis, and after a split that would make the filters differ). Then the
/// shapes must agree, and so must every answer to 30,000 other URLs.
fn split_trees_answer_as_memory_does(backend: &Backend) {
    let options = NamespaceOptions {
        capacity: 1_000,
        fpr: 0.05,
        split: SplitPolicy { mode: SplitMode::Inline, growth: 2, ..SplitPolicy::default() },
        ..NamespaceOptions::default()
    };
    let urls = distinct_urls(61, 60_000);
    let (stream, others) = urls.split_at(30_000);
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    let grow = |backend: &Backend, stream: &[&str]| {
        let client = backend.client("grown", &options);
        let answers: Vec<bool> = stream.iter().flat_map(|url| (client.seen)(&[url])).collect();
        (client, answers)
    };
    // The stream memory answers "new" throughout: taking out a false positive changes nothing
    // before it, so this ends within a few rounds.
    let mut stream: Vec<&str> = stream.iter().map(String::as_str).collect();
    let memory = loop {
        let memory = Backend::memory();
        let (_, answers) = grow(&memory, &stream);
        if !answers.contains(&true) {
            break memory;
        }
        let mut answers = answers.into_iter();
        stream.retain(|_| !answers.next().unwrap());
    };
    let (want, _) = grow(&memory, &[]);
    let (client, answers) = grow(backend, &stream);
    assert!(!answers.contains(&true), "a URL of the stream answered seen");
    let (shape, want_shape) = ((client.shape)(), (want.shape)());
    assert_eq!(shape, want_shape, "the trees grew apart");
    let first = small_first_leaves(&options);
    assert!(
        // One first leaf and fanout 2: with more than 4 leaves, some are at depth 3 or deeper.
        shape.leaves > 4 && shape.filter_bits > 2 * first * shape.leaves as u64,
        "leaves did not split twice and grow: {shape:?}, first leaves of {first} bits"
    );
    let (got, wanted) = ((client.contains)(&others), (want.contains)(&others));
    let positives = wanted.iter().filter(|&&hit| hit).count();
    assert!(positives >= 100, "only {positives} false positives to compare");
    let differ = got.iter().zip(&wanted).filter(|(a, b)| a != b).count();
    assert_eq!(differ, 0, "lookups differ ({positives} positives in memory)");
}

/// Bits of a namespace's first leaves, as its options size them.
fn small_first_leaves(options: &NamespaceOptions) -> u64 {
    let db = Db::in_memory();
    let ns = db.create_namespace("sizes", options.clone()).unwrap();
    ns.stats().leaf_bits
}

macro_rules! conformance {
    ($($backend:ident),*) => {$(
        mod $backend {
            use super::*;

            #[test]
            fn answers_as_an_exact_set() {
                super::answers_as_an_exact_set(&Backend::$backend());
            }

            #[test]
            fn concurrent_splits_lose_nothing() {
                super::concurrent_splits_lose_nothing(&Backend::$backend());
            }

            #[test]
            fn fpr_stays_under_the_bound() {
                super::fpr_stays_under_the_bound(&Backend::$backend());
            }

            #[test]
            fn one_leaf_answers_as_memory_does() {
                super::one_leaf_answers_as_memory_does(&Backend::$backend());
            }

            #[test]
            fn split_trees_answer_as_memory_does() {
                super::split_trees_answer_as_memory_does(&Backend::$backend());
            }
        }
    )*};
}

conformance!(memory, disk, redis, cluster);

// The restart scenario, for the backends that keep data past their process.

#[test]
fn disk_a_restart_keeps_everything_acknowledged() {
    a_restart_keeps_everything_acknowledged(&mut Backend::disk());
}

#[test]
fn redis_a_restart_keeps_everything_acknowledged() {
    a_restart_keeps_everything_acknowledged(&mut Backend::redis());
}

#[test]
fn cluster_a_restart_keeps_everything_acknowledged() {
    a_restart_keeps_everything_acknowledged(&mut Backend::cluster());
}
