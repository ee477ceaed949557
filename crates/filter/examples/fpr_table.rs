//! Prints the measured false-positive rate of each filter next to its formula, as a Markdown
//! table (the one in docs/filters.md):
//!
//! ```text
//! cargo run --release -p urlseen-filter --example fpr_table
//! ```

use urlseen_filter::hash::mix64;
use urlseen_filter::plan;
use urlseen_filter::{BitmapIndex, BlockScheme, BlockedBloom, BloomFilter, CountingBloom};

fn member(i: u64) -> u64 {
    mix64((1 << 40) + i)
}
fn stranger(i: u64) -> u64 {
    mix64((1 << 50) + i)
}

fn row(
    name: &str,
    n: u64,
    p: f64,
    bits: u64,
    k: u32,
    formula: f64,
    contains: impl Fn(u64) -> bool,
) {
    let queries = ((2000.0 / p) as u64).clamp(1_000_000, 50_000_000);
    let fps = (0..queries).filter(|&i| contains(stranger(i))).count();
    let measured = fps as f64 / queries as f64;
    println!(
        "| {name} | {n} | {p} | {bits} | {:.2} | {k} | {formula:.3e} | {measured:.3e} | {:.3} | {fps} / {queries} |",
        bits as f64 / n as f64,
        measured / formula
    );
}

fn main() {
    println!(
        "| filter | n | target p | bits m | m/n | k | formula FPR | measured FPR | measured / formula | false positives / queries |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for &p in &[1e-1, 1e-2, 1e-3, 1e-4] {
        for &n in &[10_000u64, 1_000_000] {
            let mut f = BloomFilter::with_capacity(n, p, 1);
            (0..n).for_each(|i| {
                f.insert(member(i));
            });
            assert!((0..n).all(|i| f.contains(member(i))));
            row("classic", n, p, f.num_bits(), f.num_hashes(), f.estimated_fpr(), |x| {
                f.contains(x)
            });

            let mut f = BlockedBloom::with_capacity(n, p, 1);
            (0..n).for_each(|i| {
                f.insert(member(i));
            });
            assert!((0..n).all(|i| f.contains(member(i))));
            row("blocked", n, p, f.num_bits(), f.num_hashes(), f.estimated_fpr(), |x| {
                f.contains(x)
            });

            let mut f = BlockedBloom::with_capacity_scheme(n, p, 1, BlockScheme::Scattered);
            (0..n).for_each(|i| {
                f.insert(member(i));
            });
            assert!((0..n).all(|i| f.contains(member(i))));
            row("scattered", n, p, f.num_bits(), f.num_hashes(), f.estimated_fpr(), |x| {
                f.contains(x)
            });

            let mut f = CountingBloom::with_capacity(n, p, 1);
            (0..n).for_each(|i| f.add(member(i)));
            assert!((0..n).all(|i| f.contains(member(i))));
            row("counting", n, p, f.num_counters(), f.num_hashes(), f.estimated_fpr(), |x| {
                f.contains(x)
            });
        }
    }
    // The blocked filter at the classic filter's size: what blocking costs.
    for &p in &[1e-2, 1e-4] {
        let n = 1_000_000;
        let m = plan::bloom_bits(n, p);
        let k = plan::optimal_hashes(m, n);
        let mut f = BlockedBloom::new(m, k, 1);
        (0..n).for_each(|i| {
            f.insert(member(i));
        });
        row("blocked at classic m", n, p, f.num_bits(), k, f.estimated_fpr(), |x| f.contains(x));
    }
    // Seed 001's bitmap: 2^28 slots, k = 1.
    for &n in &[1_000_000u64, 10_000_000, 100_000_000] {
        let mut f = BitmapIndex::default();
        (0..n).for_each(|i| {
            f.insert(member(i));
        });
        row("bitmap 2^28", n, 0.5, f.num_bits(), 1, BitmapIndex::expected_fpr(28, n), |x| {
            f.contains(x)
        });
    }
}
