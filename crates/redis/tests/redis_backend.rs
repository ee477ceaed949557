//! The Redis backend against real `redis-server` processes: shared namespaces, splits under
//! load, a split worker that dies, a Redis that dies and comes back, the Fig. 9 layout.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod redis_support;

use std::collections::HashMap;
use std::sync::{Arc, Barrier};
use std::thread;

use redis_support::{Server, new_in_order, open, small};
use urlseen_corpus::distinct_urls;
use urlseen_engine::{NamespaceOptions, SeenSet, SplitMode, SplitPolicy};
use urlseen_redis::{RedisMode, SplitOutcome, SplitStop};

/// Four "processes" (each its own client, so its own replicas and connections) feed the same
/// URLs in different orders while leaves split: every URL is new for at most one of them, the
/// news add up to the namespace's count, and nearly every URL is new for one.
#[test]
fn processes_sharing_a_namespace_get_one_new_per_url() {
    let server = Server::start();
    let urls = Arc::new(distinct_urls(7, 12_000));
    const CLIENTS: usize = 4;
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let handles: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (urls, barrier, url) = (Arc::clone(&urls), Arc::clone(&barrier), server.url());
            thread::spawn(move || {
                let db = open(vec![url], RedisMode::Auto);
                let ns = db.namespace("shared", small(SplitMode::Inline)).unwrap();
                let mut order: Vec<usize> = (0..urls.len()).collect();
                order.rotate_left(c * urls.len() / CLIENTS);
                if c % 2 == 1 {
                    order.reverse();
                }
                barrier.wait();
                new_in_order(&ns, &urls, &order, 300 + 100 * c)
            })
        })
        .collect();
    let mut news: HashMap<usize, usize> = HashMap::new();
    for h in handles {
        for i in h.join().unwrap() {
            *news.entry(i).or_default() += 1;
        }
    }
    let twice: Vec<_> = news.iter().filter(|p| *p.1 > 1).collect();
    assert!(twice.is_empty(), "URLs answered new more than once: {}", twice.len());
    assert!(
        news.len() > urls.len() * 98 / 100,
        "{} of {} URLs were new once",
        news.len(),
        urls.len()
    );
    let db = open(vec![server.url()], RedisMode::Single);
    let ns = db.namespace("shared", small(SplitMode::Inline)).unwrap();
    ns.complete_splits().unwrap();
    let stats = ns.stats().unwrap();
    assert_eq!(stats.count, news.len() as u64, "the logs hold exactly the URLs answered new");
    assert!(stats.leaves.len() >= 6, "leaves split under the load: {stats:?}");
    // A fresh client (empty replicas) sees every recorded URL. (A URL that every client took
    // for a false positive was never recorded, and may read as unseen after a split.)
    let all: Vec<&str> = news.keys().map(|&i| urls[i].as_str()).collect();
    let fps: Vec<u64> = all.iter().map(|u| ns.fingerprint(u).unwrap()).collect();
    let mut hit = vec![false; fps.len()];
    ns.contains_fingerprints(&fps, &mut hit).unwrap();
    assert!(hit.iter().all(|&h| h), "a recorded URL is unseen");
    // That client now holds a replica of every leaf: its RAM is their filters.
    let held = ns.stats().unwrap();
    assert!(
        held.replica_bytes >= held.filter_bits / 8
            && held.replica_bytes < held.filter_bits / 8 + 64 * held.leaves.len() as u64,
        "{} bytes of replicas for {} bits of leaves",
        held.replica_bytes,
        held.filter_bits
    );
}

/// Threads of one process with several round trips in flight per leaf: Redis compares their
/// candidates with each other's appends, and each URL is still new exactly once.
#[test]
fn threads_with_overlapping_round_trips_get_one_new_per_url() {
    let server = Server::start();
    let db = urlseen_redis::RedisDb::open(urlseen_redis::RedisOptions {
        inflight_per_leaf: 4,
        ..redis_support::options(vec![server.url()], RedisMode::Single)
    })
    .unwrap();
    let ns = db.namespace("overlap", small(SplitMode::Inline)).unwrap();
    let urls = Arc::new(distinct_urls(8, 10_000));
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let (ns, urls) = (Arc::clone(&ns), Arc::clone(&urls));
            thread::spawn(move || {
                // Every thread feeds every URL, each from another starting point.
                let mut order: Vec<usize> = (0..urls.len()).collect();
                order.rotate_left(t * 2_500);
                new_in_order(&ns, &urls, &order, 200)
            })
        })
        .collect();
    let mut news: HashMap<usize, usize> = HashMap::new();
    for h in handles {
        for i in h.join().unwrap() {
            *news.entry(i).or_default() += 1;
        }
    }
    assert!(news.values().all(|&n| n == 1), "a URL was new twice");
    assert!(news.len() > urls.len() * 98 / 100, "{} of {} new", news.len(), urls.len());
    ns.complete_splits().unwrap();
    assert_eq!(ns.stats().unwrap().count, news.len() as u64);
}

/// Read-only lookups that miss (each reads the leaf's log tail into the shared replica) racing
/// writers' inserts on the same client: a lookup's reply must not make the replica forget what
/// the writers' replies added, or a URL would be answered new twice. (Before the replica had a
/// generation, three runs here answered 42, 25 and 43 URLs new twice.)
#[test]
fn lookups_racing_inserts_on_one_client_get_one_new_per_url() {
    let server = Server::start();
    let db = open(vec![server.url()], RedisMode::Single);
    // Three leaves with room for every URL: no split, so the race is the only thing going on.
    // Small batches, many of them: each lookup's reply races the writers' replies.
    let options =
        NamespaceOptions { capacity: 20_000, leaf_bits: Some(1 << 16), ..small(SplitMode::Never) };
    let ns = db.namespace("lookups", options).unwrap();
    let urls = Arc::new(distinct_urls(9, 16_000));
    let others = Arc::new(distinct_urls(10, 4_000));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|t| {
            let (ns, others, stop) = (Arc::clone(&ns), Arc::clone(&others), Arc::clone(&stop));
            thread::spawn(move || {
                let mut lookups = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for chunk in others[t * 1_000..(t + 1) * 1_000].chunks(20) {
                        let fps: Vec<u64> =
                            chunk.iter().map(|u| ns.fingerprint(u).unwrap()).collect();
                        let mut hit = vec![false; fps.len()];
                        ns.contains_fingerprints(&fps, &mut hit).unwrap();
                        lookups += 1;
                    }
                }
                lookups
            })
        })
        .collect();
    let writers: Vec<_> = (0..3)
        .map(|t| {
            let (ns, urls) = (Arc::clone(&ns), Arc::clone(&urls));
            thread::spawn(move || {
                // Every writer offers every URL; the later offers of each come well after the
                // first, when the replica has moved on.
                let mut order: Vec<usize> = (0..urls.len()).collect();
                order.rotate_left(t * urls.len() / 3);
                new_in_order(&ns, &urls, &order, 20)
            })
        })
        .collect();
    let mut news: HashMap<usize, usize> = HashMap::new();
    for h in writers {
        for i in h.join().unwrap() {
            *news.entry(i).or_default() += 1;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let lookups: usize = readers.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(lookups > 0);
    let twice = news.values().filter(|&&n| n > 1).count();
    assert_eq!(twice, 0, "{twice} URLs were answered new twice");
    assert!(news.len() > urls.len() * 98 / 100, "{} of {} new", news.len(), urls.len());
    assert_eq!(ns.stats().unwrap().count, news.len() as u64, "the log holds each new URL once");
}

/// Redis loses the tail of a leaf's log (a failover to a replica that lagged, a crash under
/// `appendfsync everysec`), then another client appends past the old length. A client whose
/// replica had read the lost entries must notice that the log is not the one it copied (its
/// last entry is gone) and read it again, or it would compare new candidates with too short a
/// delta and answer new for URLs the other client recorded after the loss.
#[test]
fn a_log_that_lost_entries_is_refused_not_read_again() {
    let server = Server::start();
    let options =
        NamespaceOptions { capacity: 10_000, leaf_bits: Some(1 << 17), ..small(SplitMode::Never) };
    let a = open(vec![server.url()], RedisMode::Single);
    let a = a.namespace("lossy", options.clone()).unwrap();
    assert_eq!(a.params().initial_leaves, 1);
    let first = distinct_urls(13, 1_000);
    assert!(a.seen_batch(&first).unwrap().iter().all(|&s| !s));
    // Redis loses the second half of the log, and its count with it (as a failover to a
    // lagging replica would).
    let truncated: i64 = redis::cmd("EVAL")
        .arg(
            "local n = 0 \
             for _, k in ipairs(redis.call('KEYS', 'urlseen:{lossy:*}:log')) do \
               local len = redis.call('STRLEN', k) \
               redis.call('SET', k, redis.call('GETRANGE', k, 0, math.floor(len / 16) * 8 - 1)) \
               redis.call('HSET', string.gsub(k, ':log$', ':id'), 'len', math.floor(len / 16)) \
               n = n + 1 \
             end \
             return n",
        )
        .arg(0)
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(truncated, 1);
    // Another client records 1,000 other URLs: the log grows past its old length.
    let b = open(vec![server.url()], RedisMode::Single);
    let b = b.namespace("lossy", options).unwrap();
    let second = distinct_urls(14, 1_000);
    assert!(b.seen_batch(&second).unwrap().iter().filter(|&&s| !s).count() > 980);
    // The first client had read entries that are gone: its next write to the leaf is
    // refused instead of carrying on as if they were there. (What it holds in its replica
    // it still answers "seen": those URLs were recorded.)
    assert!(a.seen_batch(&first).unwrap().iter().all(|&s| s));
    match a.seen_batch(&distinct_urls(16, 100)) {
        Err(urlseen_redis::Error::LostData {
            lost: urlseen_redis::Lost::Entries { had, now, .. },
            ..
        }) => assert_eq!(had, 1_000, "had {had}, now {now}"),
        other => panic!("a log that lost entries was not refused: {other:?}"),
    }
}

/// Redis restarted empty (no persistence): a client that had read the namespace refuses.
#[test]
fn a_redis_restarted_empty_is_refused() {
    let server = Server::start();
    let a = open(vec![server.url()], RedisMode::Single);
    let a = a.namespace("gone", small(SplitMode::Never)).unwrap();
    let urls = distinct_urls(15, 500);
    assert!(a.seen_batch(&urls).unwrap().iter().all(|&s| !s));
    let _: () = redis::cmd("FLUSHALL").query(&mut server.conn()).unwrap();
    let err = a.seen_batch(&distinct_urls(17, 100)).unwrap_err();
    assert!(err.to_string().contains("redis lost data"), "{err}");
}

/// Redis wiped (FLUSHALL, as a restart without persistence) under clients that have read
/// nothing of the leaves they write next: one opened the namespace and wrote nothing, one
/// wrote to a few leaves only. Each refuses, naming the lost metadata, instead of recreating
/// the namespace and answering recorded URLs new.
#[test]
fn a_wiped_redis_is_refused_by_clients_that_read_nothing() {
    let server = Server::start();
    let options = NamespaceOptions { capacity: 20_000, ..small(SplitMode::Never) };
    let writer = open(vec![server.url()], RedisMode::Single);
    let writer = writer.namespace("wiped", options.clone()).unwrap();
    assert!(writer.params().initial_leaves >= 8, "{:?}", writer.params());
    let idle = open(vec![server.url()], RedisMode::Single);
    let idle = idle.namespace("wiped", options.clone()).unwrap();
    let recorded = distinct_urls(21, 3_000);
    assert!(writer.seen_batch(&recorded).unwrap().iter().filter(|&&s| !s).count() > 2_900);
    // A client that wrote one URL, so one leaf.
    let one = open(vec![server.url()], RedisMode::Single);
    let one = one.namespace("wiped", options.clone()).unwrap();
    assert!(!one.seen("https://one.example/only").unwrap());
    let _: () = redis::cmd("FLUSHALL").query(&mut server.conn()).unwrap();
    for (who, ns) in [("idle", &idle), ("one-leaf", &one)] {
        // The recorded URLs: refused, never answered new.
        match ns.seen_batch(&recorded) {
            Err(e @ urlseen_redis::Error::LostData { .. }) => {
                let msg = e.to_string();
                assert!(msg.contains("redis lost data"), "{who}: {msg}");
                assert!(msg.contains("metadata is gone"), "{who}: {msg}");
            }
            other => panic!("{who}: a wiped redis was not refused: {:?}", other.map(|_| ())),
        }
    }
    // Nothing was written back: the namespace is not silently re-created.
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut server.conn()).unwrap();
    assert!(keys.is_empty(), "a refused client wrote {keys:?}");
}

/// Single keys lost: a leaf's log deleted (or evicted) under a client that never read it, and
/// the metadata deleted under a client that has the namespace open.
#[test]
fn a_deleted_key_is_refused() {
    let server = Server::start();
    let options = NamespaceOptions { capacity: 10_000, ..small(SplitMode::Never) };
    let a = open(vec![server.url()], RedisMode::Single);
    let a = a.namespace("keys", options.clone()).unwrap();
    let urls = distinct_urls(23, 2_000);
    assert!(a.seen_batch(&urls).unwrap().iter().filter(|&&s| !s).count() > 1_950);
    // A fresh client (empty replicas) after leaf 1's log is deleted: its count still says what
    // was appended, so the short log is refused.
    let _: () = redis::cmd("DEL").arg(a.leaf_key(1)).query(&mut server.conn()).unwrap();
    let b = open(vec![server.url()], RedisMode::Single);
    let b = b.namespace("keys", options.clone()).unwrap();
    let err = b.seen_batch(&urls).unwrap_err();
    assert!(
        matches!(
            err,
            urlseen_redis::Error::LostData {
                lost: urlseen_redis::Lost::Entries { leaf: 1, now: 0, .. },
                ..
            }
        ),
        "{err}"
    );
    // The metadata deleted: the client that has it open refuses at its next read of it...
    let _: () = redis::cmd("DEL").arg("urlseen:{keys}:meta").query(&mut server.conn()).unwrap();
    let err = a.stats().unwrap_err();
    assert!(err.to_string().contains("metadata is gone"), "{err}");
    // ...and a client that creates the namespace again (a new incarnation) is refused by the
    // leaves the old one left, rather than mixing the two.
    let c = open(vec![server.url()], RedisMode::Single);
    let c = c.namespace("keys", options).unwrap();
    let err = c.seen_batch(&urls[1_000..]).unwrap_err();
    assert!(err.to_string().contains("incarnation"), "{err}");
    // And so is the old client, which sees the new metadata.
    let err = a.stats().unwrap_err();
    assert!(err.to_string().contains("created again"), "{err}");
}

/// Redis killed and restarted with its AOF while a client inserts: the call retries with
/// backoff and goes on. Down for longer than the budget: a clear error.
#[test]
fn a_redis_that_comes_back_within_the_budget_is_waited_for() {
    let mut server = Server::start_durable();
    let db = urlseen_redis::RedisDb::open(urlseen_redis::RedisOptions {
        retry_for: std::time::Duration::from_secs(10),
        ..redis_support::options(vec![server.url()], RedisMode::Single)
    })
    .unwrap();
    let ns = db.namespace("back", small(SplitMode::Never)).unwrap();
    let urls = distinct_urls(25, 3_000);
    let before = ns.seen_batch(&urls[..1_000]).unwrap();
    server.kill();
    let port = server.port;
    // Restarted 1 s later, on the same port, from its AOF.
    let restarter = thread::spawn(move || {
        thread::sleep(std::time::Duration::from_secs(1));
        server.restart();
        server
    });
    let started = std::time::Instant::now();
    // The first call may meet the dead pooled connection (unknown outcome: answered new); the
    // next ones wait for the server.
    let mid = ns.seen_batch(&urls[1_000..2_000]).unwrap();
    let after = ns.seen_batch(&urls[2_000..]).unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_millis(900), "did not wait");
    let server = restarter.join().unwrap();
    assert_eq!(server.port, port);
    // Nothing recorded before is lost; the new URLs were new.
    assert!(ns.seen_batch(&urls[..1_000]).unwrap().iter().all(|&s| s));
    let new = |v: &[bool]| v.iter().filter(|&&s| !s).count();
    assert!(new(&before) > 980 && new(&mid) > 980 && new(&after) > 980);
    let fresh = open(vec![server.url()], RedisMode::Single);
    let fresh = fresh.namespace("back", small(SplitMode::Never)).unwrap();
    // Every URL answered new is recorded (one answered "seen" on a false positive of the
    // replica is not, and the fresh client, comparing exactly, may call it new).
    let answered: Vec<bool> = [before, mid, after].concat();
    let again = fresh.seen_batch(&urls).unwrap();
    let lost = urls.iter().zip(&answered).zip(&again).filter(|((_, a), g)| !**a && !**g).count();
    let fps = answered.iter().filter(|&&s| s).count();
    assert_eq!(lost, 0, "{lost} URLs answered new are lost ({fps} answered seen)");

    // Down for good: the budget (here 1 s) runs out with an error saying so.
    let db = urlseen_redis::RedisDb::open(urlseen_redis::RedisOptions {
        retry_for: std::time::Duration::from_secs(1),
        ..redis_support::options(vec![server.url()], RedisMode::Single)
    })
    .unwrap();
    let ns = db.namespace("back", small(SplitMode::Never)).unwrap();
    drop(server);
    let started = std::time::Instant::now();
    let mut err = None;
    for _ in 0..2 {
        // (The first may be of unknown outcome, answered new.)
        if let Err(e) = ns.seen_batch(&distinct_urls(26, 100)) {
            err = Some(e);
            break;
        }
    }
    let err = err.expect("a dead redis answered");
    assert!(err.to_string().contains("redis unavailable: gave up after retrying"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    // Opening waits the same way.
    let err = urlseen_redis::RedisDb::open(urlseen_redis::RedisOptions {
        retry_for: std::time::Duration::from_millis(300),
        ..redis_support::options(vec![format!("redis://127.0.0.1:{port}/")], RedisMode::Auto)
    })
    .unwrap_err();
    assert!(matches!(err, urlseen_redis::Error::Unavailable { attempts: 2.., .. }), "{err}");
}

/// Writers insert their own URLs while leaves split under them; after every batch each checks
/// that everything it recorded so far is still seen, through its own client.
#[test]
fn splits_under_concurrent_inserts_lose_nothing() {
    let server = Server::start();
    const WRITERS: usize = 3;
    let handles: Vec<_> = (0..WRITERS)
        .map(|w| {
            let url = server.url();
            thread::spawn(move || {
                let db = open(vec![url], RedisMode::Single);
                let ns = db.namespace("grow", small(SplitMode::Background)).unwrap();
                let urls = distinct_urls(100 + w as u64, 6_000);
                let mut recorded: Vec<u64> = Vec::new();
                for chunk in urls.chunks(400) {
                    let fps: Vec<u64> = chunk.iter().map(|u| ns.fingerprint(u).unwrap()).collect();
                    let mut seen = vec![false; fps.len()];
                    ns.seen_fingerprints(&fps, &mut seen).unwrap();
                    recorded.extend(fps.iter().zip(&seen).filter(|p| !p.1).map(|p| *p.0));
                    let mut hit = vec![false; recorded.len()];
                    ns.contains_fingerprints(&recorded, &mut hit).unwrap();
                    let lost = hit.iter().filter(|&&h| !h).count();
                    assert_eq!(lost, 0, "writer {w}: {lost} recorded URLs unseen");
                }
                recorded.len() as u64
            })
        })
        .collect();
    let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let db = open(vec![server.url()], RedisMode::Single);
    let ns = db.namespace("grow", small(SplitMode::Background)).unwrap();
    ns.complete_splits().unwrap();
    let s = ns.stats().unwrap();
    assert_eq!(s.count, total);
    assert_eq!(s.splitting, 0);
    assert!(s.leaves.len() >= 8, "{s:?}");
    assert!(
        s.leaves.iter().all(|&(id, n)| n <= ns.leaf_split_point(id)),
        "no leaf past its split point"
    );
}

/// A split worker dies (keeps its lock, never finishes) after freezing a leaf, and another
/// after migrating one chunk. Other clients keep answering correctly, and roll both splits
/// forward once the locks expire.
#[test]
fn a_worker_that_dies_mid_split_is_rolled_forward() {
    let server = Server::start();
    let db = open(vec![server.url()], RedisMode::Single);
    // No automatic splits: this test decides when a split starts and where its worker dies.
    let ns = db.namespace("crash", small(SplitMode::Never)).unwrap();
    let urls = distinct_urls(3, 8_000);
    let (first, second) = urls.split_at(5_000);
    let answers = ns.seen_batch(first).unwrap();
    let recorded: Vec<&String> = first.iter().zip(&answers).filter(|p| !p.1).map(|p| p.0).collect();
    let full: Vec<u32> = ns
        .stats()
        .unwrap()
        .leaves
        .iter()
        .filter(|&&(id, n)| n >= ns.leaf_split_point(id))
        .map(|&(id, _)| id)
        .collect();
    assert!(full.len() >= 2, "two leaves past their split point: {full:?}");

    // Worker 1 dies right after freezing leaf A; worker 2 after one migrated chunk of leaf B.
    let dead = open(vec![server.url()], RedisMode::Single);
    let dead_ns = dead.namespace("crash", small(SplitMode::Never)).unwrap();
    assert_eq!(
        dead_ns.split_until(full[0], SplitStop::AfterFreeze).unwrap(),
        SplitOutcome::Stopped
    );
    assert_eq!(
        dead_ns.split_until(full[1], SplitStop::AfterChunks(1)).unwrap(),
        SplitOutcome::Stopped
    );
    assert_eq!(dead_ns.stats().unwrap().splitting, 1, "leaf B is published as splitting");

    // Another process: everything recorded is still seen, new URLs are new, while both splits
    // are stuck (its writes to leaf A wait for the dead worker's lock to expire, then it
    // finishes A's split itself).
    let other = open(vec![server.url()], RedisMode::Single);
    let ons = other.namespace("crash", small(SplitMode::Never)).unwrap();
    // Lookups first: leaf A is frozen but its split unpublished, leaf B half migrated.
    let fps: Vec<u64> = recorded.iter().map(|u| ons.fingerprint(u).unwrap()).collect();
    let mut hit = vec![false; fps.len()];
    ons.contains_fingerprints(&fps, &mut hit).unwrap();
    assert!(hit.iter().all(|&h| h), "a recorded URL unseen during a stuck split");
    let again = ons.seen_batch(&recorded).unwrap();
    assert!(again.iter().all(|&s| s), "a recorded URL answered new during a stuck split");
    let fresh = ons.seen_batch(second).unwrap();
    let fresh_new = fresh.iter().filter(|&&s| !s).count();
    // (The leaves are far past their split point here, so their FPR is well above 1%.)
    assert!(fresh_new > second.len() * 9 / 10, "{fresh_new} new of {}", second.len());
    // Everything answered new is seen now. (A URL answered seen was a false positive, maybe of
    // a frozen parent that a split since retired: it was never recorded, and may be new now.)
    let again = ons.seen_batch(second).unwrap();
    let lost = fresh.iter().zip(&again).filter(|(first, now)| !**first && !**now).count();
    assert_eq!(lost, 0, "URLs answered new twice");
    let late_new = fresh.iter().zip(&again).filter(|(first, now)| **first && !**now).count();
    assert!(late_new < second.len() / 20, "{late_new} false positives turned new");
    let fresh_new = fresh_new + late_new;

    ons.complete_splits().unwrap();
    let s = ons.stats().unwrap();
    assert_eq!(s.splitting, 0);
    assert_eq!(s.count, recorded.len() as u64 + fresh_new as u64);
    // Both splits are done: neither leaf is a leaf any more.
    assert!(s.leaves.iter().all(|&(id, _)| id != full[0] && id != full[1]), "{s:?}");
    // And the first process, whose replicas are from before, still sees everything.
    assert!(ns.seen_batch(&recorded).unwrap().iter().all(|&s| s));
    let recorded_second: Vec<&String> = second
        .iter()
        .zip(fresh.iter().zip(&again))
        .filter(|(_, (first, now))| !**first || !**now)
        .map(|(u, _)| u)
        .collect();
    assert!(ns.seen_batch(&recorded_second).unwrap().iter().all(|&s| s));
}

/// A Redis that dies gives errors, never answers; once it is back (with its AOF), service
/// resumes with everything recorded before still seen.
#[test]
fn a_dead_node_gives_errors_and_service_resumes_after_restart() {
    let mut server = Server::start_durable();
    let db = open(vec![server.url()], RedisMode::Single);
    let ns = db
        .namespace("faults", NamespaceOptions { capacity: 20_000, ..Default::default() })
        .unwrap();
    let urls = distinct_urls(11, 6_000);
    let (before, after) = urls.split_at(3_000);
    let answers = ns.seen_batch(before).unwrap();
    let recorded: Vec<&String> =
        before.iter().zip(&answers).filter(|p| !p.1).map(|p| p.0).collect();

    server.kill();
    let mixed: Vec<&String> = recorded.iter().copied().chain(after.iter().take(500)).collect();
    // The first call may write to the pooled connection whose server is gone: sent, no
    // reply, an unknown outcome, so every URL the replicas do not hold is answered new (never
    // dropped). (A connection idle for a second is checked first, and this call fails.) Then,
    // nothing can be sent: errors (no retries here: `retry_for` is zero).
    let unknown: Vec<&String> = match ns.seen_batch(&mixed) {
        Ok(first) => {
            assert!(first[..recorded.len()].iter().all(|&s| s), "a recorded URL answered new");
            let unknown: Vec<&String> = after[..500]
                .iter()
                .zip(&first[recorded.len()..])
                .filter(|p| !p.1)
                .map(|p| p.0)
                .collect();
            assert!(unknown.len() > 490, "URLs of unknown outcome were not answered new");
            unknown
        }
        Err(_) => Vec::new(),
    };
    for attempt in 0..3 {
        // Anything that needs Redis fails: a new URL, a batch with one, a lookup that misses.
        assert!(ns.seen_batch(after).is_err(), "attempt {attempt}: an answer from a dead Redis");
        assert!(ns.seen_batch(&mixed).is_err(), "attempt {attempt}: an answer from a dead Redis");
        let fps: Vec<u64> = after.iter().map(|u| ns.fingerprint(u).unwrap()).collect();
        let mut out = vec![false; fps.len()];
        assert!(ns.contains_fingerprints(&fps, &mut out).is_err(), "a lookup answered");
        // URLs this client's replicas already hold are answered "seen" without Redis: true
        // whatever Redis says now (they were recorded), and never "new".
        if let Ok(seen) = ns.seen_batch(&recorded) {
            assert!(seen.iter().all(|&s| s), "a recorded URL answered new");
        }
    }

    server.restart();
    assert!(
        ns.seen_batch(&recorded).unwrap().iter().all(|&s| s),
        "recorded URLs unseen after restart"
    );
    // That call also recorded the URLs of unknown outcome (the server had not run their
    // insert: it was dead before the call).
    assert_eq!(ns.stats().unwrap().unknown_outcome, unknown.len() as u64);
    assert!(ns.seen_batch(&unknown).unwrap().iter().all(|&s| s), "unknown-outcome URLs unseen");
    let new = ns.seen_batch(&after[500..]).unwrap().iter().filter(|&&s| !s).count();
    assert!(new > 2_500 * 98 / 100, "{new} of 2500 new after restart");
    let new = new + unknown.len();
    // A client that never saw the outage agrees.
    let fresh = open(vec![server.url()], RedisMode::Single);
    let fns = fresh
        .namespace("faults", NamespaceOptions { capacity: 20_000, ..Default::default() })
        .unwrap();
    assert!(fns.seen_batch(&recorded).unwrap().iter().all(|&s| s));
    assert_eq!(fns.stats().unwrap().count, recorded.len() as u64 + new as u64);
}

/// Seed 000's Fig. 9 layout: H = 1, c = 3, one leaf on each of three independent servers.
#[test]
fn three_servers_hold_one_leaf_each() {
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls: Vec<String> = servers.iter().map(Server::url).collect();
    let db = open(urls.clone(), RedisMode::Auto);
    assert_eq!(db.mode(), RedisMode::Nodes);
    let opts = NamespaceOptions {
        capacity: 30_000,
        leaf_bits: Some(100_000),
        // Leaves that hold their whole formula-4 capacity, as the paper's three do.
        split: SplitPolicy { mode: SplitMode::Never, threshold: 1.0, ..SplitPolicy::default() },
        ..NamespaceOptions::default()
    };
    let ns = db.namespace("fig9", opts.clone()).unwrap();
    assert_eq!(ns.params().initial_leaves, 3);
    let batch = distinct_urls(5, 20_000);
    let new = ns.seen_batch(&batch).unwrap().iter().filter(|&&s| !s).count();
    assert!(new > 19_000);
    for (i, s) in servers.iter().enumerate() {
        let mut c = s.conn();
        let len: u64 = redis::cmd("STRLEN").arg(ns.leaf_key(i as u32 + 1)).query(&mut c).unwrap();
        assert!(len / 8 > 5_000, "server {i} holds leaf {}: {} entries", i + 1, len / 8);
        for other in (1..=3).filter(|&l| l != i as u32 + 1) {
            let n: u64 = redis::cmd("EXISTS").arg(ns.leaf_key(other)).query(&mut c).unwrap();
            assert_eq!(n, 0, "server {i} holds only its own leaf");
        }
    }
    // Another client with the servers in the same order agrees; other parameters are refused.
    let urls_in_order = urls.clone();
    let (opts_again, opts_dropped) = (opts.clone(), opts.clone());
    let db2 = open(urls, RedisMode::Nodes);
    let ns2 = db2.namespace("fig9", opts).unwrap();
    assert!(ns2.seen_batch(&batch).unwrap().iter().all(|&s| s));
    let err = db2.namespace("fig9", NamespaceOptions::default()).unwrap_err();
    assert!(err.to_string().contains("other parameters"), "{err}");
    // A process that lists the same servers in another order would put the leaves elsewhere
    // (and answer new again what the others recorded): refused.
    let mut reordered = urls_in_order.clone();
    reordered.swap(1, 2);
    let err = open(reordered, RedisMode::Nodes).namespace("fig9", opts_again).unwrap_err();
    assert!(err.to_string().contains("same order"), "{err}");
    // Dropped, the namespace can be created again with that order.
    db2.drop_namespace("fig9").unwrap();
    let mut reordered = urls_in_order;
    reordered.swap(1, 2);
    assert!(open(reordered, RedisMode::Nodes).namespace("fig9", opts_dropped).is_ok());
}

/// A TCP proxy in front of a Redis server that, while `cut` is set, forwards requests but
/// drops the replies and closes the connection: a call that Redis ran and whose answer is lost.
struct CuttingProxy {
    port: u16,
    cut: Arc<std::sync::atomic::AtomicBool>,
}

impl CuttingProxy {
    fn start(target: u16) -> CuttingProxy {
        use std::io::{Read, Write};
        use std::net::{Shutdown, TcpListener, TcpStream};
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cut);
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else { continue };
                let (mut c_in, mut s_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    while let Ok(n @ 1..) = c_in.read(&mut buf) {
                        if s_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
                let flag = Arc::clone(&flag);
                thread::spawn(move || {
                    let (mut s_in, mut c_out) = (server, client);
                    let mut buf = [0u8; 65536];
                    while let Ok(n @ 1..) = s_in.read(&mut buf) {
                        if flag.load(Ordering::SeqCst) {
                            break;
                        }
                        if c_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = c_out.shutdown(Shutdown::Both);
                    let _ = s_in.shutdown(Shutdown::Both);
                });
            }
        });
        CuttingProxy { port, cut }
    }
}

/// An insert that Redis ran but whose reply was lost: its URLs are answered new (a re-send
/// would have answered "seen", and the crawler would never fetch them), the client reconnects
/// without a false LostData, and everything it answered is recorded.
#[test]
fn an_insert_whose_reply_is_lost_is_answered_new() {
    use std::sync::atomic::Ordering;
    let server = Server::start();
    let proxy = CuttingProxy::start(server.port);
    let db = urlseen_redis::RedisDb::open(urlseen_redis::RedisOptions {
        retry_for: std::time::Duration::from_secs(5),
        ..redis_support::options(
            vec![format!("redis://127.0.0.1:{}/", proxy.port)],
            RedisMode::Single,
        )
    })
    .unwrap();
    let options = NamespaceOptions { capacity: 10_000, ..small(SplitMode::Never) };
    let ns = db.namespace("cut", options.clone()).unwrap();
    let urls = distinct_urls(27, 3_000);
    let (a, b) = urls.split_at(1_000);
    assert!(ns.seen_batch(a).unwrap().iter().filter(|&&s| !s).count() > 990);
    // The hosts of the URLs about to be sent are listed in the namespace's host dictionary
    // first (an insert's records never carry a host hash the dictionary lacks): done here, so
    // that the one call whose reply the proxy drops is the insert.
    let fps: Vec<(u64, u32)> = b[..1_000].iter().map(|u| ns.fingerprint_host(u).unwrap()).collect();
    ns.seen_fingerprints_hosts(&[], &[], &mut []).unwrap();
    drop(fps);
    proxy.cut.store(true, Ordering::SeqCst);
    let answers = ns.seen_batch(&b[..1_000]).unwrap();
    proxy.cut.store(false, Ordering::SeqCst);
    assert!(answers.iter().all(|&s| !s), "a URL of unknown outcome was answered seen");
    // Redis did record them: a re-send would have said "seen".
    let direct = open(vec![server.url()], RedisMode::Single);
    let direct = direct.namespace("cut", options).unwrap();
    let fps: Vec<u64> = b[..1_000].iter().map(|u| direct.fingerprint(u).unwrap()).collect();
    let mut hit = vec![false; fps.len()];
    direct.contains_fingerprints(&fps, &mut hit).unwrap();
    assert!(hit.iter().filter(|&&h| h).count() > 990, "the lost call did not run");
    // The client goes on: its replicas are behind (the lost call's entries), no LostData.
    let more = ns.seen_batch(&b[1_000..]).unwrap();
    assert!(more.iter().filter(|&&s| !s).count() > 990);
    assert_eq!(ns.stats().unwrap().unknown_outcome, 1_000);
    assert!(ns.seen_batch(&urls).unwrap().iter().all(|&s| s), "an answered URL unseen");
}

/// A namespace made before metadata format 2 (a fixture of urlseen 07c47fc: routed per level,
/// leaves of one size) is opened as it is: every URL it recorded is seen (routed by ranges,
/// most would reach a leaf that does not hold them), it takes new URLs and splits on, its
/// leaves keep one size, and its metadata stays format 1.
#[test]
fn a_namespace_of_metadata_format_1_is_opened_as_it_is() {
    let server = Server::start();
    server.load(include_str!("fixtures/redis-format1.txt"));
    let options = NamespaceOptions {
        capacity: 1_000,
        fpr: 0.01,
        leaf_bits: Some(1 << 12),
        split: SplitPolicy { mode: SplitMode::Inline, ..SplitPolicy::default() },
        ..NamespaceOptions::default()
    };
    let db = open(vec![server.url()], RedisMode::Single);
    let ns = db.namespace("legacy", options.clone()).unwrap();
    let before = ns.stats().unwrap();
    assert_eq!((before.count, before.leaves.len()), (1_499, 6), "the fixture as written");
    let old = distinct_urls(71, 1_500);
    let seen = |ns: &urlseen_redis::RedisNamespace, urls: &[String]| {
        urls.iter().filter(|u| ns.contains(u).unwrap()).count()
    };
    // One of the 1,500 was a false positive when written, never recorded.
    assert!(seen(&ns, &old) >= 1_499, "a URL recorded by the older build is unseen");
    let more = distinct_urls(72, 3_000);
    let answers = ns.seen_batch(&more).unwrap();
    let recorded: Vec<String> =
        more.iter().zip(&answers).filter(|p| !p.1).map(|p| p.0.clone()).collect();
    assert!(recorded.len() > 2_950, "{} of 3,000 fresh URLs new", recorded.len());
    ns.complete_splits().unwrap();
    let after = ns.stats().unwrap();
    assert!(after.leaves.len() > before.leaves.len(), "no split after the upgrade: {after:?}");
    assert_eq!(after.filter_bits, after.leaves.len() as u64 * 4_096, "leaves of one size");
    // A fresh client, with empty replicas, sees all of it.
    let other = open(vec![server.url()], RedisMode::Single).namespace("legacy", options).unwrap();
    assert!(seen(&other, &old) >= 1_499);
    assert_eq!(seen(&other, &recorded), recorded.len());
    // Its replicas, built from the logs, are of the one size too (512 bytes and alignment).
    let held = other.stats().unwrap();
    let leaves = held.leaves.len() as u64;
    assert!(
        held.replica_bytes >= leaves * 512 && held.replica_bytes < leaves * (512 + 64),
        "{} bytes of replicas for {leaves} leaves",
        held.replica_bytes
    );
    let client = redis::Client::open(server.url()).unwrap();
    let format: String = redis::cmd("HGET")
        .arg("urlseen:{legacy}:meta")
        .arg("format")
        .query(&mut client.get_connection().unwrap())
        .unwrap();
    assert_eq!(format, "1");
}
