//! The Redis backend on a real 3-master Redis Cluster (`redis-cli --cluster create`): leaves
//! spread over the masters' slots, shared by several clients while they split.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod redis_support;

use std::collections::HashMap;
use std::sync::{Arc, Barrier};
use std::thread;

use redis_support::{Cluster, new_in_order, open};
use urlseen_corpus::distinct_urls;
use urlseen_engine::{NamespaceOptions, SeenSet, SplitMode, SplitPolicy};
use urlseen_redis::RedisMode;

fn small() -> NamespaceOptions {
    NamespaceOptions {
        capacity: 2_000,
        fpr: 0.01,
        leaf_bits: Some(1 << 14),
        // Leaves that do not grow with depth: a few thousand URLs split many times.
        split: SplitPolicy { mode: SplitMode::Inline, growth: 1, ..SplitPolicy::default() },
        ..NamespaceOptions::default()
    }
}

#[test]
fn a_cluster_shared_by_three_clients_splits_and_loses_nothing() {
    let cluster = Cluster::start(3);
    // Each client knows a different seed node; the slot map tells it the rest.
    let urls = Arc::new(distinct_urls(21, 9_000));
    const CLIENTS: usize = 3;
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let handles: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let seed = cluster.urls()[c].clone();
            let (urls, barrier) = (Arc::clone(&urls), Arc::clone(&barrier));
            thread::spawn(move || {
                let db = open(vec![seed], RedisMode::Auto);
                assert_eq!(db.mode(), RedisMode::Cluster);
                let ns = db.namespace("crawl", small()).unwrap();
                let mut order: Vec<usize> = (0..urls.len()).collect();
                order.rotate_left(c * urls.len() / CLIENTS);
                barrier.wait();
                new_in_order(&ns, &urls, &order, 500)
            })
        })
        .collect();
    let mut news: HashMap<usize, usize> = HashMap::new();
    for h in handles {
        for i in h.join().unwrap() {
            *news.entry(i).or_default() += 1;
        }
    }
    assert!(news.values().all(|&n| n == 1), "a URL was new for two clients");
    assert!(news.len() > urls.len() * 98 / 100, "{} of {} new once", news.len(), urls.len());

    let db = open(cluster.urls(), RedisMode::Cluster);
    let ns = db.namespace("crawl", small()).unwrap();
    ns.complete_splits().unwrap();
    let stats = ns.stats().unwrap();
    assert_eq!(stats.count, news.len() as u64);
    assert!(stats.leaves.len() >= 6, "{stats:?}");
    // The leaves' logs are spread over the masters.
    let holders = cluster
        .nodes
        .iter()
        .filter(|s| {
            let keys: Vec<String> =
                redis::cmd("KEYS").arg("urlseen:{crawl:*}:log").query(&mut s.conn()).unwrap();
            !keys.is_empty()
        })
        .count();
    assert!(holders >= 2, "leaf logs on {holders} of 3 masters");
    // Every recorded URL is seen by a fresh client, through every master.
    let fps: Vec<u64> = news.keys().map(|&i| ns.fingerprint(&urls[i]).unwrap()).collect();
    let mut hit = vec![false; fps.len()];
    ns.contains_fingerprints(&fps, &mut hit).unwrap();
    assert!(hit.iter().all(|&h| h));

    // Move every slot of the first master to the second while a client keeps inserting: the
    // leaves that lived there answer ASK during the move and MOVED after it.
    let id = |s: &redis_support::Server| -> String {
        redis::cmd("CLUSTER").arg("MYID").query(&mut s.conn()).unwrap()
    };
    let (from, to) = (id(&cluster.nodes[0]), id(&cluster.nodes[1]));
    let mut reshard = std::process::Command::new("redis-cli")
        .args(["--cluster", "reshard", &format!("127.0.0.1:{}", cluster.nodes[0].port)])
        .args(["--cluster-from", &from, "--cluster-to", &to, "--cluster-slots", "16384"])
        .arg("--cluster-yes")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let more = distinct_urls(22, 12_000);
    let mut recorded: Vec<u64> = fps.clone();
    for chunk in more.chunks(300) {
        let batch: Vec<u64> = chunk.iter().map(|u| ns.fingerprint(u).unwrap()).collect();
        let mut seen = vec![false; batch.len()];
        ns.seen_fingerprints(&batch, &mut seen).unwrap();
        recorded.extend(batch.iter().zip(&seen).filter(|p| !p.1).map(|p| *p.0));
    }
    assert!(reshard.wait().unwrap().success(), "redis-cli --cluster reshard failed");
    let keys0: u64 = redis::cmd("DBSIZE").query(&mut cluster.nodes[0].conn()).unwrap();
    assert_eq!(keys0, 0, "the first master gave all its keys away");
    let mut hit = vec![false; recorded.len()];
    ns.contains_fingerprints(&recorded, &mut hit).unwrap();
    assert!(hit.iter().all(|&h| h), "a recorded URL is unseen after the slots moved");
    let moved_stats = ns.stats().unwrap();
    assert!(moved_stats.redirects > 0, "MOVED/ASK were followed: {moved_stats:?}");
}
