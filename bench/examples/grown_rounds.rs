//! A namespace grown by splits against one pre-sized blocked filter, round by round: the
//! criterion group `grown_vs_presized` gives one figure that mixes the rounds between split
//! waves with the waves themselves (every leaf of a grown tree fills at about the same time);
//! this prints each round, so both show.
//!
//! ```sh
//! cargo run --release -p urlseen-bench --example grown_rounds        # N=2e7 ROUNDS=12 PER=1048576
//! ```
//!
//! `N`: fingerprints the namespace (created for 100,000) grows to first; `ROUNDS` rounds of
//! `PER` fresh fingerprints each, check-and-insert in batches of 4,096, into the namespace,
//! then into a namespace pre-sized for all of it (created for `N + ROUNDS * PER`: it never
//! splits; what growth itself costs is the gap between the two), then into the filter (same
//! bits as the grown tree in total, filled with as many fingerprints), one thread.
//! `STEP`: the split policy's migration step (default: the policy's).

use std::time::Instant;

use urlseen_engine::{Db, Namespace, NamespaceOptions};
use urlseen_filter::{BlockedBloom, hash};

const BATCH: usize = 4096;

fn env(name: &str, default: f64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse::<f64>().ok()).unwrap_or(default) as u64
}

/// Fills `buf` with fresh fingerprints from the counter `next`.
fn fresh(next: &mut u64, buf: &mut [u64]) {
    for fp in buf.iter_mut() {
        *fp = hash::mix64(*next);
        *next += 1;
    }
}

/// Checks and inserts `count` fresh fingerprints from the counter `next` into `ns`, `batch` at
/// a time; the rate in millions a second, or `None` if an insert failed.
fn feed(ns: &Namespace, next: &mut u64, count: u64, batch: usize) -> Option<f64> {
    let (mut fps, mut out) = (vec![0u64; batch], vec![false; batch]);
    let start = Instant::now();
    let mut done = 0;
    while done < count {
        let take = ((count - done) as usize).min(batch);
        fresh(next, &mut fps[..take]);
        ns.seen_fingerprints(&fps[..take], &mut out[..take]).ok()?;
        done += take as u64;
    }
    Some(done as f64 / start.elapsed().as_secs_f64() / 1e6)
}

fn main() {
    let (n, rounds, per) = (env("N", 2e7), env("ROUNDS", 12.0), env("PER", 1_048_576.0));
    let db = Db::in_memory();
    let mut options = NamespaceOptions { capacity: 100_000, ..Default::default() };
    if let Ok(step) = std::env::var("STEP") {
        options.split.step = step.parse().unwrap_or(options.split.step);
    }
    let Ok(ns) = db.create_namespace("grown", options) else {
        eprintln!("cannot create the namespace");
        return;
    };
    let sized = NamespaceOptions { capacity: n + rounds * per, ..Default::default() };
    let Ok(presized) = db.create_namespace("presized", sized) else {
        eprintln!("cannot create the pre-sized namespace");
        return;
    };
    let (mut ours, mut theirs, mut sized_next) = (0u64, 1u64 << 62, 1u64 << 61);
    if feed(&ns, &mut ours, n, 1 << 16).is_none()
        || feed(&presized, &mut sized_next, n, 1 << 16).is_none()
    {
        eprintln!("in-memory insert failed");
        return;
    }
    let (mut fps, mut out) = (vec![0u64; 1 << 16], vec![false; 1 << 16]);
    db.wait_for_splits();
    let stats = ns.stats();
    let bits: u64 = stats.leaves.iter().map(|l| l.bits).sum();
    let mut single = BlockedBloom::new(bits, stats.leaf_hashes, 3);
    let mut filled = 0;
    while filled < n {
        let take = ((n - filled) as usize).min(fps.len());
        fresh(&mut theirs, &mut fps[..take]);
        single.insert_batch(&fps[..take], &mut out[..take]);
        filled += take as u64;
    }
    println!(
        "grown to {n}: {} leaves, height {}, {} MiB of filters",
        stats.leaf_count,
        stats.height,
        bits / 8 / (1 << 20)
    );
    println!(
        "pre-sized namespace: {} leaves, height {}",
        presized.stats().leaf_count,
        presized.stats().height
    );
    println!("round,dsbf_mps,presized_mps,ratio,leaves,height,presized_ns_mps,ratio_to_ns");
    let (mut batch, mut answers) = (vec![0u64; BATCH], vec![false; BATCH]);
    for round in 0..rounds {
        let (Some(dsbf), Some(sized)) =
            (feed(&ns, &mut ours, per, BATCH), feed(&presized, &mut sized_next, per, BATCH))
        else {
            eprintln!("in-memory insert failed");
            return;
        };
        let start = Instant::now();
        let mut done = 0;
        while done < per {
            fresh(&mut theirs, &mut batch);
            single.insert_batch(&batch, &mut answers);
            done += BATCH as u64;
        }
        let one = done as f64 / start.elapsed().as_secs_f64() / 1e6;
        let s = ns.stats();
        println!(
            "{round},{dsbf:.2},{one:.2},{:.2},{},{},{sized:.2},{:.2}",
            dsbf / one,
            s.leaf_count,
            s.height,
            dsbf / sized
        );
    }
}
