//! Dump and restore between a data directory and Redis, both ways, in the same chunks: the
//! copies know every URL, keep splitting, and bad chunks load nothing. Needs `redis-server`.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod redis_support;

use redis_support::{Server, open};
use urlseen_corpus::distinct_urls;
use urlseen_engine::dump::MIN_CHUNK_BYTES;
use urlseen_engine::{Db, Error, LoadStep, NamespaceOptions, SeenSet, SplitMode, SplitPolicy};
use urlseen_redis::{RedisMode, RedisNamespace};

fn small() -> NamespaceOptions {
    NamespaceOptions {
        capacity: 2_000,
        fpr: 0.01,
        leaf_bits: Some(1 << 14),
        split: SplitPolicy { mode: SplitMode::Inline, growth: 1, ..SplitPolicy::default() },
        ..NamespaceOptions::default()
    }
}

fn redis_chunks(ns: &RedisNamespace) -> Vec<(i64, Vec<u8>)> {
    let mut chunks = Vec::new();
    let mut iter = 0;
    loop {
        let c = ns.dump_chunk(iter, MIN_CHUNK_BYTES).expect("dump chunk");
        if c.next == 0 {
            return chunks;
        }
        chunks.push((c.next, c.data));
        iter = c.next;
    }
}

#[test]
fn a_namespace_moves_from_a_data_directory_to_redis_and_back() {
    let server = Server::start();
    let urls = distinct_urls(11, 30_000);
    let local = Db::in_memory();
    let ns = local.create_namespace("jobs", small()).unwrap();
    // In batches, as a crawler feeds it: the leaves split in another order than in one batch,
    // and the dump walks them in that order (node ids). In that order a restore into Redis
    // once left children that their parents' migration alone had filled past one and a half
    // of their split points, unsplit.
    let mut new = 0u64;
    // What a URL namespace promises to keep: the URLs answered new.
    let mut recorded = Vec::new();
    for part in urls.chunks(997) {
        let answers = ns.seen_batch(part).unwrap();
        new += answers.iter().filter(|&&seen| !seen).count() as u64;
        recorded.extend(part.iter().zip(&answers).filter(|p| !*p.1).map(|p| p.0.clone()));
    }
    assert!(ns.stats().splits_done > 0);
    let mut chunks = Vec::new();
    let mut iter = 0;
    loop {
        let c = ns.dump_chunk(iter, MIN_CHUNK_BYTES).unwrap();
        if c.next == 0 {
            break;
        }
        chunks.push((c.next, c.data));
        iter = c.next;
    }
    assert!(chunks.len() > 3);

    // Into Redis.
    let db = open(vec![server.url()], RedisMode::Single);
    let mut restore = db.restore("jobs", &chunks[0].1).unwrap();
    let mut finished = false;
    for (i, (iter, data)) in chunks[1..].iter().enumerate() {
        if i == 1 {
            // A damaged chunk and one out of order load nothing; the restore goes on.
            let mut bad = data.clone();
            bad[50] ^= 1;
            assert!(restore.load_chunk(*iter, &bad).is_err());
            let (later_iter, later) = &chunks[3];
            assert!(restore.load_chunk(*later_iter, later).is_err());
        }
        finished = restore.load_chunk(*iter, data).unwrap();
    }
    assert!(finished, "the last chunk did not finish the restore");
    let remote = restore.namespace().clone();
    let stats = remote.stats().unwrap();
    assert_eq!(stats.count, new + ns.stats().kept, "Redis records the kept ones too");
    let over =
        stats.leaves.iter().filter(|&&(id, n)| n > remote.leaf_split_point(id) * 3 / 2).count();
    assert_eq!(over, 0, "leaves left far over their split point: {stats:?}");
    let mut out = vec![false; recorded.len()];
    let fps: Vec<u64> = recorded.iter().map(|u| remote.fingerprint(u).unwrap()).collect();
    remote.contains_fingerprints(&fps, &mut out).unwrap();
    assert!(out.iter().all(|&x| x), "a false negative in Redis");
    // A second restore into it is refused: it holds URLs.
    assert!(db.restore("jobs", &chunks[0].1).is_err());

    // It keeps splitting in Redis, and loses nothing.
    let more = distinct_urls(12, 30_000);
    let mut answers = Vec::new();
    for batch in more.chunks(500) {
        answers.extend(remote.seen_batch(batch).unwrap());
    }
    // What Redis recorded: an answer "seen" for a new URL (a false positive) records nothing
    // there (docs/distributed.md), so it is not in a dump of it either.
    let recorded_more: Vec<&String> =
        more.iter().zip(&answers).filter(|(_, seen)| !**seen).map(|(u, _)| u).collect();
    assert!(
        recorded_more.len() > 29_000,
        "{} of 30000 new; {:?}",
        recorded_more.len(),
        remote.stats().unwrap()
    );
    remote.complete_splits().unwrap();
    remote.contains_fingerprints(&fps, &mut out).unwrap();
    assert!(out.iter().all(|&x| x), "lost in Redis after more splits");

    // Back out of Redis, into a data directory.
    let back = redis_chunks(&remote);
    let dir = tempfile::tempdir().unwrap();
    let copy = {
        let db = Db::open(dir.path()).unwrap();
        let mut last = None;
        for (iter, data) in &back {
            if let LoadStep::Finished(ns) = db.load_chunk("again", *iter, data).unwrap() {
                last = Some(ns);
            }
        }
        last.expect("finished")
    };
    assert_eq!(copy.len(), remote.stats().unwrap().count);
    for u in recorded.iter().chain(recorded_more.iter().copied()) {
        assert!(copy.contains(u).unwrap(), "lost on the way back: {u}");
    }
    // An exact dump has no place in Redis.
    let exact =
        local.create_namespace("exact", NamespaceOptions { exact: true, ..small() }).unwrap();
    let header = exact.dump_chunk(0, MIN_CHUNK_BYTES).unwrap().data;
    assert!(matches!(
        db.restore("exact", &header),
        Err(urlseen_redis::Error::Engine(Error::DumpUnsupported { .. }))
    ));
}
