//! What a grown tree's batch insert could reach at best, against one pre-sized blocked filter:
//! the same fresh fingerprints into (1) one filter of `LEAVES × LEAF_BITS` bits, (2) `LEAVES`
//! filters of `LEAF_BITS` bits with each fingerprint routed by its top bits
//! (`BlockedBloom::insert_batch_routed`, one prefetch window across the filters), and (3) the
//! same plus what a namespace must add at least: each new fingerprint gathered by leaf and
//! appended to that leaf's list. No locks, directory, answers or log records: a floor for the
//! tree's overhead, not a model of it.
//!
//! ```sh
//! cargo run --release -p urlseen-bench --example tree_ceiling    # LEAVES=64 LEAF_BITS=4194304
//! ```
//!
//! Round 0 fills every variant with `FILL` fingerprints (default 2×10⁷); each later round
//! inserts 2^20 more into each, in batches of 4,096, one variant after the other, one thread.

use urlseen_filter::{BlockedBloom, hash};

#[path = "shared/feed.rs"]
mod shared;
use shared::{BATCH, feed};

const ROUNDS: usize = 10;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse::<f64>().ok()).map_or(default, |v| v as u64)
}

fn main() {
    let leaves = env("LEAVES", 64).clamp(1, 1 << 16) as usize;
    let leaf_bits = env("LEAF_BITS", 1 << 22).max(512);
    let fill = env("FILL", 20_000_000);
    // Routed by the top bits of a hash of its own, as the tree routes by ranges of one.
    let route_of = |fp: u64| hash::reduce(hash::mix64(fp ^ 0x5eed), leaves as u64) as u32;
    let mut single = BlockedBloom::new(leaf_bits * leaves as u64, 7, 3);
    let mut routed: Vec<BlockedBloom> =
        (0..leaves).map(|_| BlockedBloom::new(leaf_bits, 7, 3)).collect();
    let mut logged: Vec<BlockedBloom> =
        (0..leaves).map(|_| BlockedBloom::new(leaf_bits, 7, 3)).collect();
    let mut logs: Vec<Vec<u64>> = vec![Vec::new(); leaves];
    let mut route = vec![0u32; BATCH];
    let (mut counts, mut starts, mut ends) =
        (vec![0u32; leaves], vec![0u32; leaves], vec![0; leaves]);
    let mut gathered = vec![0u64; BATCH];
    let mut next = 0u64;
    println!("round,single_mps,routed_mps,routed_ratio,routed_log_mps,routed_log_ratio");
    for round in 0..ROUNDS {
        let count = if round == 0 { fill } else { 1 << 20 };
        let one = feed(count, &mut next, &mut |fps, out| single.insert_batch(fps, out));
        let two = feed(count, &mut next, &mut |fps, out| {
            for (r, &fp) in route.iter_mut().zip(fps) {
                *r = route_of(fp);
            }
            let mut filters: Vec<&mut BlockedBloom> = routed.iter_mut().collect();
            BlockedBloom::insert_batch_routed(&mut filters, &route[..fps.len()], fps, out);
        });
        let three = feed(count, &mut next, &mut |fps, out| {
            counts.fill(0);
            for (r, &fp) in route.iter_mut().zip(fps) {
                *r = route_of(fp);
                counts[*r as usize] += 1;
            }
            let mut filters: Vec<&mut BlockedBloom> = logged.iter_mut().collect();
            BlockedBloom::insert_batch_routed(&mut filters, &route[..fps.len()], fps, out);
            // A counting sort of the new ones by leaf, then one append per leaf.
            let mut at = 0;
            for (start, &c) in starts.iter_mut().zip(&counts) {
                *start = at;
                at += c;
            }
            ends.copy_from_slice(&starts);
            for ((&r, &fp), &seen) in route.iter().zip(fps).zip(out.iter()) {
                let end = &mut ends[r as usize];
                gathered[*end as usize] = fp;
                *end += u32::from(!seen);
            }
            for ((log, &start), &end) in logs.iter_mut().zip(&starts).zip(&ends) {
                log.extend_from_slice(&gathered[start as usize..end as usize]);
            }
        });
        println!("{round},{one:.2},{two:.2},{:.2},{three:.2},{:.2}", two / one, three / one);
    }
}
