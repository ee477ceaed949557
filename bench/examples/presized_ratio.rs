//! A namespace pre-sized for `CAP` fingerprints (it never splits, so its leaves are all of the
//! maximum size) against one blocked filter of the same total bits, round by round in turn:
//! what a namespace's check-and-insert costs around its leaf probes, at any number of leaves,
//! with no split wave in the figure (`grown_rounds` has those).
//!
//! ```sh
//! cargo run --release -p urlseen-bench --example presized_ratio            # CAP=4e7: 48 leaves
//! CAP=3e8 cargo run --release -p urlseen-bench --example presized_ratio    # 357 leaves
//! ```
//!
//! Both are filled with 2×10⁷ fresh fingerprints first, then take 16 rounds of 2^20 more each,
//! in batches of 4,096, one thread; prints the median ratio of the namespace's rate to the
//! filter's over the rounds, and its range.

use urlseen_engine::{Db, NamespaceOptions};
use urlseen_filter::BlockedBloom;

#[path = "shared/feed.rs"]
mod shared;
use shared::feed;

const FILL: u64 = 20_000_000;
const ROUNDS: usize = 16;
const PER: u64 = 1 << 20;

fn main() {
    let cap = std::env::var("CAP").ok().and_then(|v| v.parse::<f64>().ok()).unwrap_or(4e7) as u64;
    let db = Db::in_memory();
    let Ok(ns) =
        db.create_namespace("presized", NamespaceOptions { capacity: cap, ..Default::default() })
    else {
        eprintln!("cannot create the namespace");
        return;
    };
    let mut failed = false;
    let mut into_ns = |fps: &[u64], out: &mut [bool]| {
        failed |= ns.seen_fingerprints(fps, out).is_err();
    };
    let (mut ours, mut theirs) = (0u64, 1u64 << 62);
    feed(FILL, &mut ours, &mut into_ns);
    let stats = ns.stats();
    let bits: u64 = stats.leaves.iter().map(|l| l.bits).sum();
    let mut single = BlockedBloom::new(bits, stats.leaf_hashes, 3);
    let mut into_single = |fps: &[u64], out: &mut [bool]| single.insert_batch(fps, out);
    feed(FILL, &mut theirs, &mut into_single);
    let mut ratios: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let namespace = feed(PER, &mut ours, &mut into_ns);
            namespace / feed(PER, &mut theirs, &mut into_single)
        })
        .collect();
    if failed {
        eprintln!("in-memory insert failed");
        return;
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "{} leaves, {} MiB of filters: namespace / filter median {:.3} (range {:.3}-{:.3})",
        stats.leaf_count,
        bits / 8 / (1 << 20),
        ratios[ROUNDS / 2],
        ratios[0],
        ratios[ROUNDS - 1]
    );
}
