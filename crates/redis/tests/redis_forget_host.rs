//! Forget by host on the Redis backend, against a real `redis-server`: exactly the host's URLs
//! are new again and no other, for the client that forgot and for another client whose
//! replicas were built before; inserts concurrent with the forget lose nothing; a shared host
//! hash and records of unknown host are refused; a forget whose worker stops part-way is
//! completed by another client. `URLSEEN_FORGET_URLS=1000000` runs the big case on 1M URLs
//! (see `docs/forget.md`); CI runs 100,000.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod redis_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redis_support::{Server, options};
use urlseen_engine::{NamespaceOptions, SeenSet};
use urlseen_redis::{Error, RedisDb, RedisMode, RedisNamespace};

const HOSTS: usize = 1_000;

fn urls_count() -> usize {
    std::env::var("URLSEEN_FORGET_URLS").ok().and_then(|n| n.parse().ok()).unwrap_or(100_000)
}

/// `n` distinct URLs over [`HOSTS`] hosts (host `i % HOSTS`), two schemes and a port.
fn corpus(n: usize, tag: &str) -> Vec<String> {
    (0..n)
        .map(|i| {
            let host = i % HOSTS;
            match i % 3 {
                0 => format!("https://site{host}.example/{tag}/page/{i}?q={}", i % 7),
                1 => format!("http://site{host}.example/{tag}/a/{i}"),
                _ => format!("http://site{host}.example:8080/{tag}/b/{i}#frag"),
            }
        })
        .collect()
}

/// Sized for an eighth of `n`: the tree grows by splits while it records.
fn ns_options(n: usize, seed: u64) -> NamespaceOptions {
    NamespaceOptions { capacity: (n / 8) as u64, fpr: 0.01, seed, ..NamespaceOptions::default() }
}

/// A client whose calls check the metadata's version every time (no poll delay).
fn client(server: &Server) -> RedisDb {
    let mut o = options(vec![server.url()], RedisMode::Auto);
    o.meta_poll = Duration::ZERO;
    o.retry_for = Duration::from_secs(5);
    RedisDb::open(o).unwrap()
}

/// Records `urls` in batches of 1,000; returns each URL's answer (true: seen).
fn record(ns: &RedisNamespace, urls: &[String]) -> Vec<bool> {
    let mut out = Vec::with_capacity(urls.len());
    for chunk in urls.chunks(1_000) {
        out.extend(ns.seen_batch(chunk).unwrap());
    }
    out
}

/// The URLs of `urls` answered new in `answers`: recorded. (A URL answered "seen" on a false
/// positive of a replica is not recorded, and a filter rebuilt from the log, by a split or a
/// forget, may answer it new afterwards.)
fn recorded<'a>(urls: &'a [String], answers: &[bool]) -> Vec<&'a String> {
    urls.iter().zip(answers).filter(|p| !p.1).map(|p| p.0).collect()
}

/// How many of `urls` `ns` holds (read-only).
fn held(ns: &RedisNamespace, urls: &[&String]) -> usize {
    let mut n = 0;
    for chunk in urls.chunks(5_000) {
        let fps: Vec<u64> = chunk.iter().map(|u| ns.fingerprint(u).unwrap()).collect();
        let mut out = vec![false; fps.len()];
        ns.contains_fingerprints(&fps, &mut out).unwrap();
        n += out.iter().filter(|s| **s).count();
    }
    n
}

#[test]
fn forgetting_a_host_makes_exactly_its_urls_new_for_every_client() {
    let server = Server::start();
    let n = urls_count();
    let urls = corpus(n, "x");
    let a = client(&server);
    let ns = a.namespace("crawl", ns_options(n, 11)).unwrap();
    let started = Instant::now();
    let answers = record(&ns, &urls);
    let recorded_in = started.elapsed();
    ns.complete_splits().unwrap();
    // A second client that has the namespace open, its replicas built from every leaf.
    let b = client(&server);
    let ns_b = b.namespace("crawl", ns_options(n, 11)).unwrap();
    let all = recorded(&urls, &answers);
    assert_eq!(held(&ns_b, &all), all.len(), "the second client sees every URL before the forget");

    let host = 417;
    let of_host: Vec<&String> =
        urls.iter().enumerate().filter(|p| p.0 % HOSTS == host).map(|p| p.1).collect();
    let others: Vec<&String> =
        all.iter().copied().filter(|u| !u.contains("//site417.example")).collect();
    let recorded_of_host =
        answers.iter().enumerate().filter(|p| p.0 % HOSTS == host && !p.1).count() as u64;
    let leaves_before = ns.stats().unwrap().leaves.len();
    let started = Instant::now();
    let forgotten = ns.forget_host("SITE417.example").unwrap();
    let forgot_in = started.elapsed();
    assert_eq!(forgotten, recorded_of_host, "the count is the host's recorded URLs");
    let stats = ns.stats().unwrap();
    println!(
        "redis: {n} URLs over {HOSTS} hosts recorded in {recorded_in:?} ({leaves_before} leaves); \
         forget --host site417.example: {forgotten} forgotten (of {} URLs of the host, \
         {recorded_of_host} recorded) in {forgot_in:?}; count {} -> height {}",
        of_host.len(),
        stats.count,
        stats.height,
    );
    assert_eq!(stats.count, n as u64 - answers.iter().filter(|s| **s).count() as u64 - forgotten);

    for (who, ns) in [("forgetting client", &ns), ("second client", &ns_b)] {
        let others_held = held(ns, &others);
        let host_held = held(ns, &of_host);
        println!(
            "{who}: other URLs new {}, host URLs new {}/{}",
            others.len() - others_held,
            of_host.len() - host_held,
            of_host.len()
        );
        assert_eq!(others_held, others.len(), "{who}: no other URL is new (no false negative)");
        // The rebuilt filters are fresh: a host URL is held only on a false positive.
        assert!(host_held <= of_host.len() / 50 + 1, "{who}: {host_held} host URLs still held");
    }
    // Recorded again by the second client, seen by the first; a second forget finds them.
    let again: Vec<String> = of_host.iter().map(|u| (*u).clone()).collect();
    let news = record(&ns_b, &again).iter().filter(|s| !**s).count();
    assert!(news >= again.len() - again.len() / 50 - 1, "{news} of {} new again", again.len());
    assert_eq!(held(&ns, &of_host), of_host.len());
    assert_eq!(ns_b.forget_host("site417.example").unwrap(), news as u64);
    assert_eq!(held(&ns, &others), others.len());
    // A client that opens the namespace afterwards agrees.
    let c = client(&server);
    let ns_c = c.namespace("crawl", ns_options(n, 11)).unwrap();
    assert_eq!(held(&ns_c, &others), others.len());
    assert!(held(&ns_c, &of_host) <= of_host.len() / 50 + 1);
}

/// With the default poll interval, the second client sees the forget within it.
#[test]
fn another_client_sees_a_forget_within_its_poll_interval() {
    let server = Server::start();
    let urls = corpus(20_000, "p");
    let a = client(&server);
    let ns = a.namespace("poll", ns_options(20_000, 12)).unwrap();
    let answers = record(&ns, &urls);
    let b = RedisDb::open(options(vec![server.url()], RedisMode::Auto)).unwrap();
    let ns_b = b.namespace("poll", ns_options(20_000, 12)).unwrap();
    let all = recorded(&urls, &answers);
    assert_eq!(held(&ns_b, &all), all.len());
    let of_host: Vec<&String> =
        all.iter().copied().filter(|u| u.contains("//site3.example")).collect();
    assert_eq!(ns.forget_host("site3.example").unwrap(), of_host.len() as u64);
    thread::sleep(Duration::from_millis(150));
    assert!(held(&ns_b, &of_host) <= 1, "the second client still holds the host's URLs");
    let others: Vec<&String> =
        all.iter().copied().filter(|u| !u.contains("//site3.example")).collect();
    assert_eq!(held(&ns_b, &others), others.len());
}

/// Another client records new URLs (some of them of the host) while the forget runs and
/// leaves split: every URL it was answered new for is recorded afterwards, except URLs of the
/// host (which the forget may have taken), and every URL recorded before of another host too.
#[test]
fn inserts_concurrent_with_a_forget_lose_nothing() {
    let server = Server::start();
    let n = 40_000;
    let base = corpus(n, "base");
    let a = client(&server);
    let ns = a.namespace("busy", ns_options(n, 13)).unwrap();
    let base_answers = record(&ns, &base);
    let stop = Arc::new(AtomicBool::new(false));
    let answered: Arc<Mutex<Vec<(String, bool)>>> = Arc::default();
    let writer = {
        let (stop, answered, url) = (Arc::clone(&stop), Arc::clone(&answered), server.url());
        thread::spawn(move || {
            let mut o = options(vec![url], RedisMode::Auto);
            o.retry_for = Duration::from_secs(5);
            let db = RedisDb::open(o).unwrap();
            let ns = db.namespace("busy", ns_options(n, 13)).unwrap();
            let fresh = corpus(4 * n, "fresh");
            let mut rounds = 0;
            for chunk in fresh.chunks(500) {
                let seen = ns.seen_batch(chunk).unwrap();
                answered.lock().unwrap().extend(chunk.iter().cloned().zip(seen));
                rounds += 1;
                if stop.load(Ordering::Relaxed) && rounds > 4 {
                    break;
                }
            }
        })
    };
    // Let the writer get going, then forget while it writes.
    while answered.lock().unwrap().len() < 2_000 {
        thread::sleep(Duration::from_millis(5));
    }
    let forgotten = ns.forget_host("site5.example").unwrap();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(forgotten >= (n / HOSTS) as u64, "{forgotten}");
    let answered = answered.lock().unwrap();
    let new_then: Vec<&String> = answered
        .iter()
        .filter(|(u, seen)| !seen && !u.contains("//site5.example"))
        .map(|(u, _)| u)
        .collect();
    let others: Vec<&String> = recorded(&base, &base_answers)
        .into_iter()
        .filter(|u| !u.contains("//site5.example"))
        .collect();
    let fresh_client = client(&server);
    let ns_f = fresh_client.namespace("busy", ns_options(n, 13)).unwrap();
    println!(
        "concurrent: {} URLs written meanwhile ({} new, not of the host), forgot {forgotten}",
        answered.len(),
        new_then.len()
    );
    for who in [&ns, &ns_f] {
        assert_eq!(held(who, &new_then), new_then.len(), "a URL recorded meanwhile was lost");
        assert_eq!(held(who, &others), others.len(), "a URL recorded before was lost");
    }
}

#[test]
fn a_host_hash_shared_by_two_hosts_makes_a_forget_refuse() {
    use urlseen_engine::host::testing::force_host_hash;
    const SEED: u64 = 0x5eed_f0e7;
    force_host_hash(SEED, "a.example", 77);
    force_host_hash(SEED, "b.example", 77);
    force_host_hash(SEED, "c.example", 77);
    force_host_hash(SEED, "d.example", 78);
    let server = Server::start();
    let db = client(&server);
    let ns = db.namespace("guard", ns_options(8_000, SEED)).unwrap();
    let urls: Vec<String> = (0..3_000)
        .map(|i| format!("https://{}.example/{i}", ["a", "b", "d", "e"][i % 4]))
        .collect();
    let answers = record(&ns, &urls);
    let all = recorded(&urls, &answers);
    for host in ["a.example", "b.example", "c.example"] {
        let err = ns.forget_host(host).unwrap_err();
        assert!(
            matches!(&err, Error::Engine(urlseen_engine::Error::HostHashShared { hash: 77, hosts, .. })
                if hosts.len() == 2),
            "{host}: {err}"
        );
        assert!(err.to_string().contains("0x0000004d"), "{err}");
        assert_eq!(held(&ns, &all), all.len(), "nothing forgotten");
    }
    // A host alone under its (forced) hash forgets.
    let count = |h: &str| all.iter().filter(|u| u.contains(h)).count() as u64;
    assert_eq!(ns.forget_host("d.example").unwrap(), count("//d.example"));
    assert_eq!(ns.forget_host("e.example").unwrap(), count("//e.example"));
    let kept: Vec<&String> =
        all.iter().copied().filter(|u| u.contains("//a.") || u.contains("//b.")).collect();
    assert_eq!(held(&ns, &kept), kept.len());
}

#[test]
fn records_without_a_host_make_a_forget_refuse() {
    let server = Server::start();
    let db = client(&server);
    let ns = db.namespace("raw", ns_options(8_000, 14)).unwrap();
    let urls = corpus(2_000, "r");
    let answers = record(&ns, &urls);
    // Fingerprints without hosts (a raw item, a restore): their host is unknown.
    let mut out = [false; 3];
    ns.seen_fingerprints(&[1, 2, 3], &mut out).unwrap();
    let err = ns.forget_host("site1.example").unwrap_err();
    assert!(
        matches!(&err, Error::Engine(urlseen_engine::Error::ForgetHostUnknown { records: 3, .. })),
        "{err}"
    );
    let all = recorded(&urls, &answers);
    assert_eq!(held(&ns, &all), all.len());
    // Bad hosts are typed errors.
    for bad in ["https://site1.example/", "", "a/b"] {
        assert!(
            matches!(
                ns.forget_host(bad),
                Err(Error::Engine(urlseen_engine::Error::InvalidHost { .. }))
            ),
            "{bad:?}"
        );
    }
}

/// The forgetting client dies part-way through a leaf (after freezing it; after migrating one
/// chunk of its rebuild): other clients answer every recorded URL meanwhile, roll the leaf
/// forward once its lock expires (a normal split, or the rebuild without the host), and a
/// forget run again finishes the rest.
#[test]
fn a_forget_whose_client_dies_part_way_is_completed_by_others() {
    use urlseen_redis::SplitStop;
    for (k, stop) in [SplitStop::AfterFreeze, SplitStop::AfterChunks(1)].into_iter().enumerate() {
        let server = Server::start();
        let urls = corpus(20_000, "crash");
        let a = client(&server);
        let name = format!("crash{k}");
        let ns = a.namespace(&name, ns_options(20_000, 15)).unwrap();
        let answers = record(&ns, &urls);
        ns.complete_splits().unwrap();
        let all = recorded(&urls, &answers);
        let of_host: Vec<&String> =
            all.iter().copied().filter(|u| u.contains("//site7.example")).collect();
        let others: Vec<&String> =
            all.iter().copied().filter(|u| !u.contains("//site7.example")).collect();
        assert_eq!(ns.forget_host_until("site7.example", stop).unwrap(), 0);
        drop(ns);
        drop(a);
        // Another client: correct while the leaf is stuck, then rolls it forward.
        let b = client(&server);
        let ns_b = b.namespace(&name, ns_options(20_000, 15)).unwrap();
        assert_eq!(held(&ns_b, &others), others.len(), "{stop:?}: lost while stuck");
        let fresh = corpus(2_000, "after");
        let fresh_answers = record(&ns_b, &fresh);
        ns_b.complete_splits().unwrap();
        assert_eq!(ns_b.stats().unwrap().splitting, 0);
        assert_eq!(held(&ns_b, &others), others.len(), "{stop:?}: lost by the roll-forward");
        let rolled = of_host.len() - held(&ns_b, &of_host);
        // The forget run again forgets the rest.
        let rest = ns_b.forget_host("site7.example").unwrap();
        let fresh_of_host = recorded(&fresh, &fresh_answers)
            .into_iter()
            .filter(|u| u.contains("//site7.example"))
            .count();
        println!(
            "{stop:?}: {rolled} of the host's {} URLs forgotten by the roll-forward, {rest} by the \
             second forget ({fresh_of_host} recorded since)",
            of_host.len()
        );
        assert!(rolled as u64 + rest >= (of_host.len() + fresh_of_host) as u64 - 2);
        assert!(held(&ns_b, &of_host) <= 1);
        assert_eq!(held(&ns_b, &others), others.len());
        let fresh_others: Vec<&String> = recorded(&fresh, &fresh_answers)
            .into_iter()
            .filter(|u| !u.contains("//site7.example"))
            .collect();
        assert_eq!(held(&ns_b, &fresh_others), fresh_others.len());
    }
}

/// What keeping hosts costs on Redis: fingerprints alone against fingerprints with hosts, and
/// recording the same URLs with and without their hosts (each into a fresh namespace), three
/// rounds. Ignored: figures, not assertions (`docs/forget.md`, "On Redis").
#[test]
#[ignore = "measurement; run with --ignored --nocapture"]
fn host_cost_on_redis() {
    let server = Server::start();
    let n = urls_count();
    let urls = corpus(n, "cost");
    let db = client(&server);
    for round in 0..3 {
        let ns = db.namespace(&format!("plain{round}"), ns_options(n, 16)).unwrap();
        let with = db.namespace(&format!("hosts{round}"), ns_options(n, 16)).unwrap();
        let t = Instant::now();
        let fps: Vec<u64> = urls.iter().map(|u| ns.fingerprint(u).unwrap()).collect();
        let fp_time = t.elapsed();
        let t = Instant::now();
        let pairs: Vec<(u64, u32)> =
            urls.iter().map(|u| with.fingerprint_host(u).unwrap()).collect();
        let fph_time = t.elapsed();
        let hosts: Vec<u32> = pairs.iter().map(|p| p.1).collect();
        let t = Instant::now();
        for chunk in fps.chunks(1_000) {
            let mut out = vec![false; chunk.len()];
            ns.seen_fingerprints(chunk, &mut out).unwrap();
        }
        let plain = t.elapsed();
        let t = Instant::now();
        for (chunk, h) in fps.chunks(1_000).zip(hosts.chunks(1_000)) {
            let mut out = vec![false; chunk.len()];
            with.seen_fingerprints_hosts(chunk, h, &mut out).unwrap();
        }
        let hosted = t.elapsed();
        let per = |d: Duration| d.as_secs_f64() * 1e9 / n as f64;
        println!(
            "round {round}: fingerprint {:.1} ns/URL, fingerprint_host {:.1} ns/URL; recording \
             {n} URLs in batches of 1,000 without hosts {plain:?} ({:.0} ns/URL), with hosts \
             {hosted:?} ({:.0} ns/URL)",
            per(fp_time),
            per(fph_time),
            per(plain),
            per(hosted),
        );
    }
    let bytes: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("urlseen:{hosts0}:hosts")
        .query(&mut server.conn())
        .unwrap_or(0);
    println!("host dictionary of {HOSTS} hosts: {bytes} bytes in redis");
}

/// Three independent servers (seed 000's layout, leaf `id` on server `(id - 1) mod 3`), leaves
/// that never split on their own: each rebuilt leaf is a new id, so its copy lands on another
/// server than the old one, and the dictionary sits beside the metadata on the first.
#[test]
fn a_forget_on_three_servers_moves_leaves_between_them() {
    let servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    let urls_of: Vec<String> = servers.iter().map(Server::url).collect();
    let mut o = options(urls_of.clone(), RedisMode::Auto);
    o.meta_poll = Duration::ZERO;
    let db = RedisDb::open(o).unwrap();
    assert_eq!(db.mode(), RedisMode::Nodes);
    let opts = NamespaceOptions {
        capacity: 30_000,
        leaf_bits: Some(400_000),
        split: urlseen_engine::SplitPolicy {
            mode: urlseen_engine::SplitMode::Never,
            ..urlseen_engine::SplitPolicy::default()
        },
        seed: 17,
        ..NamespaceOptions::default()
    };
    let ns = db.namespace("fig9", opts.clone()).unwrap();
    let urls = corpus(20_000, "n");
    let answers = record(&ns, &urls);
    let all = recorded(&urls, &answers);
    let of_host: Vec<&String> =
        all.iter().copied().filter(|u| u.contains("//site9.example")).collect();
    let others: Vec<&String> =
        all.iter().copied().filter(|u| !u.contains("//site9.example")).collect();
    let before: Vec<u32> = ns.stats().unwrap().leaves.iter().map(|l| l.0).collect();
    assert_eq!(ns.forget_host("site9.example").unwrap(), of_host.len() as u64);
    let after: Vec<u32> = ns.stats().unwrap().leaves.iter().map(|l| l.0).collect();
    assert!(after.iter().all(|l| !before.contains(l)), "{before:?} -> {after:?}");
    let other_db = RedisDb::open(options(urls_of, RedisMode::Auto)).unwrap();
    let ns_b = other_db.namespace("fig9", opts).unwrap();
    for ns in [&ns, &ns_b] {
        assert_eq!(held(ns, &others), others.len());
        assert!(held(ns, &of_host) <= 1);
    }
    let mut first = servers[0].conn();
    let listed: u64 = redis::cmd("HLEN").arg("urlseen:{fig9}:hosts").query(&mut first).unwrap();
    assert_eq!(listed, HOSTS as u64);
}

/// On a 3-master Redis Cluster: the dictionary shares the metadata's slot, the leaves and
/// their rebuilt copies spread over the masters; two clients agree afterwards.
#[test]
fn a_forget_on_a_cluster_loses_nothing() {
    let cluster = redis_support::Cluster::start(3);
    let mut o = options(cluster.urls(), RedisMode::Cluster);
    o.meta_poll = Duration::ZERO;
    o.retry_for = Duration::from_secs(5);
    let a = RedisDb::open(o.clone()).unwrap();
    let ns = a.namespace("c", ns_options(30_000, 18)).unwrap();
    let urls = corpus(30_000, "c");
    let answers = record(&ns, &urls);
    let all = recorded(&urls, &answers);
    let b = RedisDb::open(o).unwrap();
    let ns_b = b.namespace("c", ns_options(30_000, 18)).unwrap();
    assert_eq!(held(&ns_b, &all), all.len());
    let of_host: Vec<&String> =
        all.iter().copied().filter(|u| u.contains("//site21.example")).collect();
    let others: Vec<&String> =
        all.iter().copied().filter(|u| !u.contains("//site21.example")).collect();
    assert_eq!(ns.forget_host("site21.example").unwrap(), of_host.len() as u64);
    for ns in [&ns, &ns_b] {
        assert_eq!(held(ns, &others), others.len());
        assert!(held(ns, &of_host) <= 1);
    }
}
