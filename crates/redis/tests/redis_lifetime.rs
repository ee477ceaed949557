//! Key lifetimes of a namespace in Redis (`RedisDb::update_expiry`, `RedisDb::expiry`): every
//! Redis key of the namespace carries the time, also the keys that splits make later, by any
//! client; `PERSIST` clears it everywhere; an expired namespace is gone for every client.
//! Real `redis-server`s (one, and a 3-master cluster), each on free ports.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod redis_support;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis_support::{Cluster, Server, open, options, small};
use urlseen_corpus::distinct_urls;
use urlseen_engine::{Expiry, ExpiryUpdate, SeenSet, SplitMode};
use urlseen_redis::{Error, RedisDb, RedisMode, SplitOutcome, SplitStop};

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// Every Redis key of namespace `name` on `servers`, with its `PEXPIRETIME` (-1: none).
fn keys_of(servers: &[&Server], name: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for s in servers {
        let mut conn = s.conn();
        let keys: Vec<String> =
            redis::cmd("KEYS").arg(format!("urlseen:{{{name}*")).query(&mut conn).unwrap();
        for k in keys {
            let at: i64 = redis::cmd("PEXPIRETIME").arg(&k).query(&mut conn).unwrap();
            // -2: expired or deleted between the two commands.
            if at != -2 {
                out.insert(k, at);
            }
        }
    }
    out
}

/// How long the end marker `urlseen:{ns}:ended:<epoch>` outlives the namespace.
const GRACE_MS: i64 = 24 * 3_600 * 1_000;

/// The keys of the namespace itself: all but its end marker.
fn state_keys(keys: BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    keys.into_iter().filter(|(k, _)| !k.contains(":ended:")).collect()
}

/// Asserts that every key but the split locks expires at `at` (locks: at `at` or sooner), and
/// the end marker a day later.
fn assert_all_at(keys: &BTreeMap<String, i64>, at: i64) {
    assert!(!keys.is_empty());
    let markers = keys.keys().filter(|k| k.contains(":ended:")).count();
    assert_eq!(markers, 1, "{keys:?}");
    for (k, &t) in keys {
        if k.contains(":ended:") {
            assert_eq!(t, at + GRACE_MS, "{k}");
        } else if k.ends_with(":lock") {
            assert!(t > 0 && t <= at, "{k} expires at {t}, after {at}");
        } else {
            assert_eq!(t, at, "{k}");
        }
    }
}

fn persist(db: &RedisDb, name: &str) -> ExpiryUpdate {
    db.update_expiry(name, |c| (c != Expiry::Never).then_some(Expiry::Never)).unwrap()
}

fn expire(db: &RedisDb, name: &str, at: u64) -> ExpiryUpdate {
    db.update_expiry(name, |_| Some(Expiry::At(at))).unwrap()
}

#[test]
fn every_key_expires_together_also_those_later_splits_of_another_client_make() {
    let server = Server::start();
    let a = open(vec![server.url()], RedisMode::Single);
    // Client B opened the namespace before the EXPIRE and does not poll the metadata: its
    // splits read it when they start.
    let b = RedisDb::open(urlseen_redis::RedisOptions {
        meta_poll: Duration::from_secs(3_600),
        ..options(vec![server.url()], RedisMode::Single)
    })
    .unwrap();
    let nsa = a.namespace("job", small(SplitMode::Inline)).unwrap();
    let nsb = b.namespace("job", small(SplitMode::Inline)).unwrap();
    let urls = distinct_urls(7, 12_000);
    nsa.seen_batch(&urls[..2_000]).unwrap();

    assert_eq!(a.expiry("job").unwrap(), Some(Expiry::Never));
    assert_eq!(a.expiry("nope").unwrap(), None);
    assert_eq!(expire(&a, "nope", now_ms() + 10_000), ExpiryUpdate::Missing);
    let before = keys_of(&[&server], "job");
    assert!(before.values().all(|&t| t == -1), "{before:?}");

    let at = now_ms() + 100_000;
    assert_eq!(expire(&a, "job", at), ExpiryUpdate::Changed);
    assert_eq!(a.expiry("job").unwrap(), Some(Expiry::At(at)));
    let stamped = keys_of(&[&server], "job");
    assert_all_at(&stamped, at as i64);
    assert!(stamped.len() >= before.len());

    // B's splits make new leaves' keys: they carry the time too.
    for chunk in urls[2_000..].chunks(500) {
        nsb.seen_batch(chunk).unwrap();
    }
    let leaves = nsb.stats().unwrap().leaves.len();
    let grown = keys_of(&[&server], "job");
    assert!(grown.len() > stamped.len() + 8, "{} keys, {} before", grown.len(), stamped.len());
    assert!(leaves > 4, "{leaves} leaves");
    assert_all_at(&grown, at as i64);

    // A condition decided on the current time, in one step: NX refuses (it has one).
    let nx = a.update_expiry("job", |c| (c == Expiry::Never).then_some(Expiry::At(1))).unwrap();
    assert_eq!(nx, ExpiryUpdate::Kept);
    assert_all_at(&keys_of(&[&server], "job"), at as i64);

    // PERSIST clears every key's time, and new keys get none.
    assert_eq!(persist(&a, "job"), ExpiryUpdate::Changed);
    assert_eq!(persist(&a, "job"), ExpiryUpdate::Kept);
    assert_eq!(a.expiry("job").unwrap(), Some(Expiry::Never));
    let persisted = keys_of(&[&server], "job");
    let timed: Vec<_> =
        persisted.iter().filter(|(k, t)| **t != -1 && !k.ends_with(":lock")).collect();
    assert!(timed.is_empty(), "{timed:?}");
}

#[test]
fn an_expired_namespace_is_gone_for_every_client_and_starts_again_empty() {
    let server = Server::start();
    let a = open(vec![server.url()], RedisMode::Single);
    let b = open(vec![server.url()], RedisMode::Single);
    let nsa = a.namespace("job", small(SplitMode::Inline)).unwrap();
    let nsb = b.namespace("job", small(SplitMode::Inline)).unwrap();
    let urls = distinct_urls(8, 4_000);
    let answers = nsa.seen_batch(&urls).unwrap();
    let recorded: Vec<&String> = urls.iter().zip(&answers).filter(|p| !p.1).map(|p| p.0).collect();
    assert!(nsb.seen_batch(&recorded[..100]).unwrap().iter().all(|&s| s));

    assert_eq!(expire(&a, "job", now_ms() + 300), ExpiryUpdate::Changed);
    std::thread::sleep(Duration::from_millis(600));
    // Redis deleted every key (none is left to resurrect part of the namespace), but the
    // end marker.
    let left = keys_of(&[&server], "job");
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(state_keys(left).is_empty());
    assert_eq!(a.expiry("job").unwrap(), None);
    assert!(!a.namespace_exists("job").unwrap());
    // Both clients held it (replicas that would answer "seen"): both are told it expired.
    for ns in [&nsa, &nsb] {
        match ns.seen_batch(&recorded[..10]) {
            Err(Error::Expired { name, .. }) => assert_eq!(name, "job"),
            other => panic!("expected Expired, got {other:?}"),
        }
    }
    // Opened again: a new, empty namespace, without a lifetime.
    let again = a.namespace("job", small(SplitMode::Inline)).unwrap();
    let answers = again.seen_batch(&recorded[..200]).unwrap();
    assert!(answers.iter().all(|&s| !s), "an expired namespace's URL answered seen");
    assert_eq!(a.expiry("job").unwrap(), Some(Expiry::Never));

    // A time in the past deletes it now.
    assert_eq!(expire(&a, "job", now_ms() - 1_000), ExpiryUpdate::Dropped);
    assert!(state_keys(keys_of(&[&server], "job")).is_empty());
    assert_eq!(a.expiry("job").unwrap(), None);
}

/// A split whose worker stopped mid-migration when the EXPIRE came: its children were
/// allocated then; the worker that finishes it makes their keys with the time.
#[test]
fn a_split_under_way_during_the_expire_finishes_with_the_lifetime() {
    let server = Server::start();
    let a = open(vec![server.url()], RedisMode::Single);
    let ns = a.namespace("job", small(SplitMode::Never)).unwrap();
    ns.seen_batch(&distinct_urls(9, 5_000)).unwrap();
    let full: Vec<u32> = ns
        .stats()
        .unwrap()
        .leaves
        .iter()
        .filter(|&&(id, n)| n >= ns.leaf_split_point(id))
        .map(|&(id, _)| id)
        .collect();
    assert!(!full.is_empty());
    let dead = open(vec![server.url()], RedisMode::Single);
    let dead_ns = dead.namespace("job", small(SplitMode::Never)).unwrap();
    assert_eq!(
        dead_ns.split_until(full[0], SplitStop::AfterChunks(1)).unwrap(),
        SplitOutcome::Stopped
    );
    let at = now_ms() + 100_000;
    assert_eq!(expire(&a, "job", at), ExpiryUpdate::Changed);
    // The dead worker's lock expires (400 ms in these tests); another client finishes it.
    std::thread::sleep(Duration::from_millis(500));
    let other = open(vec![server.url()], RedisMode::Single);
    let ons = other.namespace("job", small(SplitMode::Never)).unwrap();
    ons.complete_splits().unwrap();
    assert_eq!(ons.stats().unwrap().splitting, 0);
    let keys = keys_of(&[&server], "job");
    let children = keys.keys().filter(|k| k.ends_with(":mig")).count();
    assert!(children >= 2, "the children's migration cursors: {keys:?}");
    assert_all_at(&keys, at as i64);
}

/// On a cluster the keys live on several masters: each gets the time, also those of leaves
/// split after the EXPIRE, and PERSIST clears it on every master.
#[test]
fn on_a_cluster_every_master_holds_the_time() {
    let cluster = Cluster::start(3);
    let db = open(cluster.urls(), RedisMode::Cluster);
    let ns = db.namespace("job", small(SplitMode::Inline)).unwrap();
    let urls = distinct_urls(10, 8_000);
    ns.seen_batch(&urls[..1_000]).unwrap();
    let at = now_ms() + 100_000;
    assert_eq!(expire(&db, "job", at), ExpiryUpdate::Changed);
    for chunk in urls[1_000..].chunks(500) {
        ns.seen_batch(chunk).unwrap();
    }
    let nodes: Vec<&Server> = cluster.nodes.iter().collect();
    let keys = keys_of(&nodes, "job");
    let masters_used =
        nodes.iter().filter(|s| !state_keys(keys_of(&[s], "job")).is_empty()).count();
    assert!(masters_used >= 2, "keys on {masters_used} masters");
    assert_all_at(&keys, at as i64);
    assert_eq!(persist(&db, "job"), ExpiryUpdate::Changed);
    let timed: Vec<_> = keys_of(&nodes, "job")
        .into_iter()
        .filter(|(k, t)| *t != -1 && !k.ends_with(":lock"))
        .collect();
    assert!(timed.is_empty(), "{timed:?}");
}
