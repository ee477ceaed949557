//! The false-positive bound holds for any batch (issue 32), in Redis: the Redis home's case of
//! the engine's tests/fpr_any_batch.rs, whose helpers it shares. One call far larger than the
//! namespace was made for grows its tree many times over inside the call, and nothing recorded
//! is ever answered "new".

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod redis_support;
// The engine's test helpers (`fps`, `allowed`), shared rather than copied.
#[path = "../../engine/tests/support/mod.rs"]
mod support;

use support::{allowed, fps};
use urlseen_engine::NamespaceOptions;

/// The Redis home: one call far larger than the namespace was made for, through the Redis
/// backend's batch path (inline and background splits), under the bound plus sampling error,
/// and nothing answered "new" is lost.
#[test]
fn the_bound_holds_for_one_big_batch_in_redis() {
    use urlseen_engine::{SeenSet, SplitMode};
    use urlseen_redis::RedisMode;

    let server = redis_support::Server::start();
    let db = redis_support::open(vec![server.url()], RedisMode::Auto);
    for (i, (capacity, batch, mode)) in [
        (1_000u64, 100_000usize, SplitMode::Inline),
        (1_000, 100_000, SplitMode::Background),
        (1, 20_000, SplitMode::Inline),
        (30_000, 200_000, SplitMode::Inline),
    ]
    .into_iter()
    .enumerate()
    {
        let mut options = NamespaceOptions { capacity, fpr: 0.01, ..NamespaceOptions::default() };
        options.split.mode = mode;
        let ns = db.namespace(&format!("fpr{i}"), options).unwrap();
        let items = fps(100 + i as u64, batch);
        let mut out = vec![false; batch];
        ns.seen_fingerprints(&items, &mut out).unwrap();
        let seen = out.iter().filter(|&&s| s).count();
        assert!(
            seen <= allowed(batch, 0.01),
            "redis, capacity {capacity}, {mode:?}: {seen} of {batch} new items answered seen"
        );
        let recorded: Vec<u64> = items.iter().zip(&out).filter(|p| !*p.1).map(|p| *p.0).collect();
        let mut again = vec![false; recorded.len()];
        ns.contains_fingerprints(&recorded, &mut again).unwrap();
        assert!(again.iter().all(|&s| s), "redis: a recorded item answered new");
    }
}
