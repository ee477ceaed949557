//! Seed 001: the single-hash bitmap index (2^28 slots, 32 MiB, k = 1) against a blocked Bloom
//! filter of the same 32 MiB, by measured false-positive rate at 10⁶, 10⁷ and 10⁸ URLs.
//!
//! For each n, both structures start empty; n fingerprints are inserted and 10⁶ *other*
//! fingerprints queried. The fingerprints are synthetic (`mix64(i)`, a bijection, so all
//! distinct): generating and canonicalizing 10⁸ URLs would take minutes and measure the
//! canonicalizer, while both structures only ever see 64-bit fingerprints. The Bloom filter uses
//! the k that is best for its n ([`plan::blocked_best_hashes`]), as an operator sizing it for n
//! would.

use std::io::Write;
use std::time::Instant;

use serde::Serialize;
use urlseen_filter::hash::mix64;
use urlseen_filter::{BitmapIndex, BlockedBloom, plan};

use crate::args::parse_count;

/// Seed 001's bitmap index (k = 1, 32 MiB) vs a blocked Bloom filter of the same memory.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// URL counts n (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1000000,10000000,100000000", value_parser = parse_count)]
    urls: Vec<u64>,
    /// Other URLs queried per n.
    #[arg(long, default_value = "1000000", value_parser = parse_count)]
    queries: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
struct Row {
    urls: u64,
    queries: u64,
    bitmap_bytes: u64,
    bitmap_measured: f64,
    /// 1 − e^{−n/2^28}.
    bitmap_formula: f64,
    bloom_bytes: u64,
    bloom_hashes: u32,
    bloom_measured: f64,
    bloom_formula: f64,
    bitmap_insert_ns: f64,
    bloom_insert_ns: f64,
}

/// Seed 001's bitmap: 2^28 slots.
const SLOTS: u64 = 1 << 28;

/// Query inputs start here, far from the inserted `0..n`.
const QUERY_BASE: u64 = 1 << 62;

pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(!args.urls.is_empty(), "--urls needs at least one count");
    anyhow::ensure!(args.queries > 0, "--queries must be positive");
    let started = Instant::now();
    let slots = SLOTS;
    let mut rows = Vec::new();
    for &n in &args.urls {
        let mut bitmap = BitmapIndex::default();
        anyhow::ensure!(
            bitmap.memory_bytes() as u64 * 8 == SLOTS,
            "the default bitmap is not 2^28 slots"
        );
        let t = Instant::now();
        for i in 0..n {
            bitmap.insert(mix64(i));
        }
        let bitmap_insert_ns = t.elapsed().as_nanos() as f64 / n.max(1) as f64;
        let k = plan::sectorized_best_hashes(slots, n.max(1));
        let mut bloom = BlockedBloom::new(slots, k, 1);
        let t = Instant::now();
        for i in 0..n {
            bloom.insert(mix64(i));
        }
        let bloom_insert_ns = t.elapsed().as_nanos() as f64 / n.max(1) as f64;
        let (mut bitmap_hits, mut bloom_hits) = (0u64, 0u64);
        for i in QUERY_BASE..QUERY_BASE + args.queries {
            let fp = mix64(i);
            bitmap_hits += u64::from(bitmap.contains(fp));
            bloom_hits += u64::from(bloom.contains(fp));
        }
        let q = args.queries as f64;
        rows.push(Row {
            urls: n,
            queries: args.queries,
            bitmap_bytes: bitmap.memory_bytes() as u64,
            bitmap_measured: bitmap_hits as f64 / q,
            bitmap_formula: 1.0 - (-(n as f64) / slots as f64).exp(),
            bloom_bytes: bloom.memory_bytes() as u64,
            bloom_hashes: k,
            bloom_measured: bloom_hits as f64 / q,
            bloom_formula: plan::sectorized_fpr(slots, k, n),
            bitmap_insert_ns,
            bloom_insert_ns,
        });
    }

    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "Seed 001: bitmap index of 2^28 slots (k = 1) vs blocked Bloom filter of 2^28 bits, both 32 MiB; \
         {} other fingerprints queried per n",
        args.queries
    )?;
    writeln!(
        out,
        "{:>10} {:>12} {:>14} {:>3} {:>12} {:>12} {:>10} {:>10}",
        "n", "bitmap", "1-e^(-n/2^28)", "k", "Bloom", "Bloom formula", "bitmap ns", "Bloom ns"
    )?;
    for r in &rows {
        writeln!(
            out,
            "{:>10} {:>12.6} {:>14.6} {:>3} {:>12.6} {:>12.6} {:>10.1} {:>10.1}",
            r.urls,
            r.bitmap_measured,
            r.bitmap_formula,
            r.bloom_hashes,
            r.bloom_measured,
            r.bloom_formula,
            r.bitmap_insert_ns,
            r.bloom_insert_ns
        )?;
    }
    writeln!(out, "(synthetic fingerprints mix64(i); {:.1} s)", started.elapsed().as_secs_f64())?;
    Ok(())
}
