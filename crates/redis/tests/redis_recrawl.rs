//! Recrawl windows in Redis (`RedisDb::open_namespace` with `recrawl_after`), against a real
//! `redis-server` and a fake clock: the precision of the window, a reopen keeping ages and the
//! window, the FPR bound and flat Redis memory over 3W, expiry by Redis with no client running
//! (split children included), and exactly one "new" under concurrency.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod redis_support;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis_support::{Server, open};
use urlseen_engine::{Clock, FakeClock, NamespaceOptions, SeenSet};
use urlseen_redis::{RedisDb, RedisMode, RedisSet, RedisWindow};

/// The next boundary of a 1 s slot after the real time, plus `offset` ms: a fake clock that
/// is never behind the real one (Redis expires generations by its own clock).
fn start_clock(offset: u64) -> Arc<FakeClock> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    FakeClock::at(now - now % 1_000 + 1_000 + offset)
}

fn window_options(capacity: u64, secs: u64, g: u32) -> NamespaceOptions {
    NamespaceOptions {
        capacity,
        recrawl_after: Some(Duration::from_secs(secs)),
        generations: g,
        ..NamespaceOptions::default()
    }
}

fn window(
    db: &RedisDb,
    name: &str,
    options: NamespaceOptions,
    clock: &Arc<FakeClock>,
) -> Arc<RedisWindow> {
    match db.open_namespace_with(name, options, clock.clone()).unwrap() {
        RedisSet::Window(w) => w,
        RedisSet::Plain(_) => panic!("{name} opened without its window"),
    }
}

fn urls(tag: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("https://{tag}.example/page/{i}")).collect()
}

fn count_new(set: &impl SeenSet<Error = urlseen_redis::Error>, urls: &[String]) -> usize {
    let fps: Vec<u64> = urls.iter().map(|u| set.fingerprint(u).unwrap()).collect();
    let mut out = vec![false; fps.len()];
    set.seen_fingerprints(&fps, &mut out).unwrap();
    out.iter().filter(|s| !**s).count()
}

fn count_held(set: &impl SeenSet<Error = urlseen_redis::Error>, urls: &[String]) -> usize {
    let fps: Vec<u64> = urls.iter().map(|u| set.fingerprint(u).unwrap()).collect();
    let mut out = vec![false; fps.len()];
    set.contains_fingerprints(&fps, &mut out).unwrap();
    out.iter().filter(|s| **s).count()
}

/// Recorded at the start, middle and end of a slot: seen until `W − W/g` after, new at `W`.
#[test]
fn no_url_is_new_before_w_minus_a_slot_and_every_url_is_at_w() {
    let server = Server::start();
    let db = open(vec![server.url()], RedisMode::Single);
    let clock = start_clock(0);
    let t0 = clock.now_millis();
    let w = window(&db, "news", window_options(10_000, 8, 8), &clock);
    let (window_ms, slot_ms) = (8_000, 1_000);
    let batches = [(0, urls("start", 300)), (500, urls("middle", 300)), (999, urls("end", 300))];
    for (at, batch) in &batches {
        clock.set(t0 + at);
        assert_eq!(count_new(&*w, batch), batch.len());
        assert_eq!(count_new(&*w, batch), 0, "a repeat in the same slot is seen");
    }
    for (at, batch) in &batches {
        // Every whole slot up to W − W/g, and the last millisecond before it.
        let mut t = t0 + at;
        while t < t0 + at + window_ms - slot_ms {
            clock.set(t);
            assert_eq!(count_held(&*w, batch), batch.len(), "forgotten at +{} ms", t - t0 - at);
            t += 250;
        }
        clock.set(t0 + at + window_ms - slot_ms - 1);
        assert_eq!(count_new(&*w, batch), 0, "new again before W - W/g");
    }
    for (at, batch) in &batches {
        clock.set(t0 + at + window_ms);
        assert_eq!(count_new(&*w, batch), batch.len(), "not new at W (recorded at +{at} ms)");
    }
}

/// A second client (or a reopen) keeps the window Redis holds, whatever its own options, and
/// the generations' ages; a plain namespace stays plain.
#[test]
fn a_reopen_keeps_the_window_and_the_ages() {
    let server = Server::start();
    let clock = start_clock(250);
    let t0 = clock.now_millis();
    let first = urls("first", 200);
    let second = urls("second", 200);
    {
        let db = open(vec![server.url()], RedisMode::Single);
        let w = window(&db, "crawl", window_options(10_000, 8, 8), &clock);
        assert_eq!(count_new(&*w, &first), 200);
        clock.advance(Duration::from_millis(3_000));
        assert_eq!(count_new(&*w, &second), 200);
    }
    clock.advance(Duration::from_millis(2_000));
    let db = open(vec![server.url()], RedisMode::Single);
    // Other options: no window asked, then another one; both get Redis's (8 s, 8).
    for asked in [
        NamespaceOptions { capacity: 10_000, ..NamespaceOptions::default() },
        window_options(10_000, 60, 4),
    ] {
        let w = window(&db, "crawl", asked, &clock);
        assert_eq!(w.options().recrawl_after, Some(Duration::from_secs(8)));
        assert_eq!(w.options().generations, 8);
        let stats = w.stats().unwrap();
        assert_eq!(stats.report.window_secs, 8.0);
        assert_eq!(stats.report.generations, 8);
        let ages: Vec<(f64, u64)> =
            stats.report.live.iter().map(|g| (g.age_secs, g.count)).collect();
        assert_eq!(ages, [(5.25, 200), (2.25, 200)], "ages and counts kept");
        assert_eq!(stats.count(), 400);
        assert_eq!(count_held(&*w, &first), 200);
    }
    let w = window(&db, "crawl", window_options(10_000, 8, 8), &clock);
    clock.set(t0 + 8_000);
    assert_eq!(count_new(&*w, &first), 200, "the first slot's URLs are new at W");
    assert_eq!(count_new(&*w, &second), 0, "the later slot's are not");
    // A plain namespace keeps having no window.
    let plain =
        db.open_namespace_with("plain", NamespaceOptions::default(), clock.clone()).unwrap();
    assert!(matches!(plain, RedisSet::Plain(_)));
    let again = db.open_namespace_with("plain", window_options(1_000_000, 8, 8), clock.clone());
    assert!(matches!(again.unwrap(), RedisSet::Plain(_)));
    // A generation's name is not a namespace of its own.
    assert!(db.open_namespace("crawl.gen-123", NamespaceOptions::default()).is_err());
}

fn used_memory(server: &Server) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query(&mut server.conn()).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

fn log_bytes(server: &Server) -> u64 {
    let keys: Vec<String> =
        redis::cmd("KEYS").arg("urlseen:*:log").query(&mut server.conn()).unwrap();
    keys.iter().map(|k| redis::cmd("STRLEN").arg(k).query::<u64>(&mut server.conn()).unwrap()).sum()
}

/// 3W of constant inflow: the FPR (on URLs never recorded) stays under the bound at every
/// sampled slot, and Redis's memory and keys are flat once the first window (and its margin)
/// is over.
#[test]
fn over_three_windows_the_fpr_holds_and_redis_memory_is_flat() {
    let server = Server::start();
    let db = open(vec![server.url()], RedisMode::Single);
    let clock = start_clock(500);
    let (per_slot, g) = (5_000, 8);
    let w = window(&db, "flow", window_options(per_slot * u64::from(g), 8, g), &clock);
    let mut measured = Vec::new();
    for slot in 0..24u64 {
        let batch = urls(&format!("s{slot}"), per_slot as usize);
        // New URLs, but for the false positives of the live generations.
        let new: usize = batch.chunks(1_000).map(|chunk| count_new(&*w, chunk)).sum();
        assert!(new as f64 >= batch.len() as f64 * 0.98, "{new} of {} new", batch.len());
        let probes = urls(&format!("never{slot}"), 50_000);
        let fpr = count_held(&*w, &probes) as f64 / probes.len() as f64;
        let keys: u64 = redis::cmd("DBSIZE").query(&mut server.conn()).unwrap();
        let (mem, logs) = (used_memory(&server), log_bytes(&server));
        eprintln!("slot {slot:2}: fpr {fpr:.5} used_memory {mem} log_bytes {logs} keys {keys}");
        measured.push((fpr, mem, logs, keys));
        clock.advance(Duration::from_millis(1_000));
    }
    let worst = measured.iter().map(|m| m.0).fold(0.0, f64::max);
    // 50,000 probes: one standard deviation at 0.01 is 0.00045.
    assert!(worst <= 0.01 * 1.15, "worst FPR {worst} over the bound 0.01");
    // Generations are deleted W + margin (1 s) after their slot started: from slot 9 on, 9
    // generations of equal size are in Redis.
    let steady = &measured[10..];
    let (lo, hi) =
        (steady.iter().map(|m| m.2).min().unwrap(), steady.iter().map(|m| m.2).max().unwrap());
    // Each generation holds its slot's URLs less the few answered seen on a false positive.
    assert!(hi <= 9 * per_slot * 8, "more than 9 generations in redis: {hi} log bytes");
    assert!(lo as f64 >= hi as f64 * 0.99, "log bytes in redis not flat after W: {lo}..{hi}");
    let keys: Vec<u64> = steady.iter().map(|m| m.3).collect();
    assert!(keys.iter().all(|&k| k == keys[0]), "keys not flat: {keys:?}");
    let (lo, hi) =
        (steady.iter().map(|m| m.1).min().unwrap(), steady.iter().map(|m| m.1).max().unwrap());
    assert!(hi as f64 <= lo as f64 * 1.1, "used_memory not flat after W: {lo}..{hi}");
}

/// Every key of a generation has an expiry, split children included, and Redis deletes them
/// when no client runs.
#[test]
fn redis_frees_expired_generations_with_no_client_running() {
    let server = Server::start();
    let clock = start_clock(0);
    {
        let db = open(vec![server.url()], RedisMode::Single);
        // 100 URLs per generation: 3,000 split it.
        let w = window(&db, "short", window_options(200, 2, 2), &clock);
        assert_eq!(count_new(&*w, &urls("many", 3_000)), 3_000);
        assert_eq!(count_new(&*w, &urls("more", 10)), 10);
        assert!(w.stats().unwrap().generations[0].leaves.len() > 1, "the generation split");
    }
    let mut conn = server.conn();
    let keys: Vec<String> =
        redis::cmd("KEYS").arg("urlseen:{short.gen-*").query(&mut conn).unwrap();
    assert!(keys.len() > 5, "{keys:?}");
    for k in &keys {
        let ttl: i64 = redis::cmd("PTTL").arg(k).query(&mut conn).unwrap();
        assert!(ttl > 0, "{k} has no expiry ({ttl})");
    }
    // The generation ends at its start + W + margin = t0 + 3 s (real time: the fake clock
    // started at the next real second).
    let end = clock.now_millis() - clock.now_millis() % 1_000 + 3_000;
    loop {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
        if now > end + 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let left: Vec<String> =
        redis::cmd("KEYS").arg("urlseen:{short.gen-*").query(&mut conn).unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Two clients racing on the same URLs: exactly one "new" each, in a slot and across a slot
/// change made while they run.
#[test]
fn racing_clients_get_exactly_one_new_per_url() {
    let server = Server::start();
    let clock = start_clock(0);
    let all = urls("race", 4_000);
    let windows: Vec<Arc<RedisWindow>> = (0..2)
        .map(|_| {
            window(
                &open(vec![server.url()], RedisMode::Single),
                "race",
                window_options(40_000, 8, 8),
                &clock,
            )
        })
        .collect();
    let new: Vec<usize> = std::thread::scope(|s| {
        let handles: Vec<_> = windows
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let (all, clock) = (&all, &clock);
                s.spawn(move || {
                    let mut new = 0;
                    for (n, chunk) in all.chunks(100).enumerate() {
                        if i == 0 && n == 20 {
                            // The next slot: the other client sees it from its next call.
                            clock.advance(Duration::from_millis(1_000));
                        }
                        new += count_new(&**w, chunk);
                    }
                    new
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(new.iter().sum::<usize>(), all.len(), "news per client: {new:?}");
}

/// A clock behind Redis's by more than the margin is refused (Redis would expire, by its own
/// clock, generations this client still reads); a long name cannot take a window.
#[test]
fn a_clock_behind_redis_and_a_name_too_long_are_refused() {
    let server = Server::start();
    let db = open(vec![server.url()], RedisMode::Single);
    let behind = FakeClock::at(1_000_000_000_000);
    let err = db.open_namespace_with("late", window_options(1_000, 8, 8), behind).unwrap_err();
    assert!(err.to_string().contains("behind redis's"), "{err}");
    let long = "n".repeat(110);
    let err =
        db.open_namespace_with(&long, window_options(1_000, 8, 8), start_clock(0)).unwrap_err();
    assert!(err.to_string().contains("recrawl window takes at most"), "{err}");
    // Nothing was stored for it: it can still be made without a window.
    let plain = db.open_namespace_with(&long, NamespaceOptions::default(), start_clock(0)).unwrap();
    assert!(matches!(plain, RedisSet::Plain(_)));
}

/// In Redis Cluster (generations on other slots than the namespace's keys) and over
/// independent servers (`nodes`): the window works, and every generation key, on whichever
/// master, has its expiry.
#[test]
fn a_window_in_redis_cluster_and_over_independent_servers() {
    let cluster = redis_support::Cluster::start(3);
    let nodes = [Server::start(), Server::start()];
    let layouts = [
        (cluster.urls(), RedisMode::Cluster, cluster.nodes.iter().collect::<Vec<_>>()),
        (nodes.iter().map(Server::url).collect(), RedisMode::Nodes, nodes.iter().collect()),
    ];
    for (urls, mode, servers) in layouts {
        let clock = start_clock(0);
        let db = open(urls, mode);
        let w = window(&db, "spread", window_options(300, 8, 8), &clock);
        let first = self::urls("c1", 1_000);
        assert_eq!(count_new(&*w, &first), 1_000, "{mode:?}");
        clock.advance(Duration::from_millis(1_000));
        assert_eq!(count_new(&*w, &first), 0, "{mode:?}");
        let second = self::urls("c2", 1_000);
        let new = count_new(&*w, &second);
        assert!(new >= 980, "{mode:?}: {new}");
        assert_eq!(w.stats().unwrap().report.live.len(), 2, "{mode:?}");
        let mut keys = 0;
        for s in servers {
            let mut conn = s.conn();
            let found: Vec<String> =
                redis::cmd("KEYS").arg("urlseen:{spread.gen-*").query(&mut conn).unwrap();
            for k in &found {
                let ttl: i64 = redis::cmd("PTTL").arg(k).query(&mut conn).unwrap();
                assert!(ttl > 0, "{mode:?}: {k} has no expiry ({ttl})");
            }
            keys += found.len();
        }
        assert!(keys > 6, "{mode:?}: {keys} generation keys");
        clock.advance(Duration::from_millis(8_000));
        assert_eq!(count_new(&*w, &first), 1_000, "{mode:?}: new again after W");
    }
}

/// Clock skew between clients (docs/recrawl.md, "Clock skew"): a client whose clock is
/// behind still records in the previous generation. A URL it records after one ahead did (in
/// the next generation) is new for both: a duplicate, never a lost URL; in the other order the
/// one ahead sees it. `drop_any_namespace` then deletes every key of the window.
#[test]
fn a_client_behind_by_less_than_the_margin_gives_duplicates_never_losses() {
    let server = Server::start();
    let ahead = start_clock(0);
    let behind = FakeClock::at(ahead.now_millis() + 900);
    ahead.set(behind.now_millis() + 200); // the next slot for `ahead`, 200 ms later
    let a = window(
        &open(vec![server.url()], RedisMode::Single),
        "skew",
        window_options(8_000, 8, 8),
        &ahead,
    );
    let b = window(
        &open(vec![server.url()], RedisMode::Single),
        "skew",
        window_options(8_000, 8, 8),
        &behind,
    );
    // Both have a generation for their slot.
    assert_eq!(count_new(&*b, &urls("warm-b", 1)), 1);
    assert_eq!(count_new(&*a, &urls("warm-a", 1)), 1);
    let first = urls("ahead-first", 100);
    assert_eq!(count_new(&*a, &first), 100);
    assert_eq!(
        count_new(&*b, &first),
        100,
        "the client behind does not look at the newer generation"
    );
    let second = urls("behind-first", 100);
    assert_eq!(count_new(&*b, &second), 100);
    assert_eq!(count_new(&*a, &second), 0, "the client ahead sees the previous generation");
    for w in [&a, &b] {
        assert_eq!(count_held(&**w, &first), 100);
        assert_eq!(count_held(&**w, &second), 100);
    }
    let db = open(vec![server.url()], RedisMode::Single);
    db.drop_any_namespace("skew").unwrap();
    let left: Vec<String> =
        redis::cmd("KEYS").arg("urlseen:{skew*").query(&mut server.conn()).unwrap();
    assert!(left.is_empty(), "{left:?}");
}
