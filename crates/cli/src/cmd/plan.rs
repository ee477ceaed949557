//! `urlseen plan`: sizing by the papers' formulas.

use serde::Serialize;
use urlseen_filter::plan::Plan;

use crate::args::{parse_count, parse_fpr};

/// Size a filter for a capacity and a false-positive rate.
///
/// Prints the classic Bloom filter of seed 002 (m = -n ln p / (ln 2)^2, k = (m/n) ln 2), the
/// cache-blocked filter urlseen uses (a little larger for the same rate), and the DSBF of seed
/// 000: per-leaf capacity u (formula 4), leaves c (formula 5), k (formula 6) and the FPR of
/// formula (8).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Number of distinct URLs to hold.
    #[arg(long, value_parser = parse_count)]
    capacity: u64,
    /// Target false-positive rate.
    #[arg(long, value_parser = parse_fpr)]
    fpr: f64,
    /// Bits per DSBF leaf filter (m); by default what a namespace of this capacity would use.
    #[arg(long, value_parser = parse_count)]
    leaf_bits: Option<u64>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Json {
    capacity: u64,
    fpr: f64,
    /// The classic filter's bits and hashes, top-level: the seed's `m` and `k`.
    m: u64,
    k: u32,
    bits_per_url: f64,
    bytes: u64,
    blocked: Blocked,
    dsbf: Dsbf,
}

#[derive(Serialize)]
struct Blocked {
    m: u64,
    k: u32,
    bytes: u64,
}

#[derive(Serialize)]
struct Dsbf {
    leaf_bits: u64,
    leaf_capacity: u64,
    k: u32,
    leaves: u64,
    expected_fpr: f64,
    /// The leaves urlseen makes for this capacity: formula 4 for its cache-blocked leaves,
    /// split at `split_at` (a share of the leaf's capacity that keeps the bound while a split
    /// is under way, docs/durability.md).
    urlseen_leaves: u64,
    split_at: u64,
    /// RAM the namespace holds at capacity: its leaf filters and their record buffers.
    ram_bytes: u64,
    /// Disk it holds at capacity: leaf files (16 B per URL), without the log of `--data`.
    leaf_file_bytes: u64,
    /// `--data` adds the log: at least 8 B per URL, plus 16 B per record.
    log_bytes_at_least: u64,
}

/// RAM per file-backed leaf besides its filter: its record buffer.
const LEAF_BUFFER_BYTES: u64 =
    (urlseen_engine::leaf_log::BUFFER_RECORDS * urlseen_engine::leaf_log::RECORD_LEN) as u64;
/// Bytes of one fingerprint in a leaf file.
const LEAF_RECORD_BYTES: u64 = urlseen_engine::leaf_log::RECORD_LEN as u64;

pub fn run(args: Args) -> anyhow::Result<()> {
    // The leaf size a namespace with this capacity and rate would use, unless one is given.
    let auto = urlseen_engine::NamespaceOptions {
        capacity: args.capacity.max(1),
        fpr: args.fpr,
        ..Default::default()
    };
    let leaf_bits = args.leaf_bits.unwrap_or_else(|| auto.effective_leaf_bits());
    let p = Plan::new(args.capacity, args.fpr, Some(leaf_bits))?;
    // What urlseen builds (the seed's formula 5 above counts unblocked leaves filled to u).
    let built = urlseen_engine::tree::TreeParams::from(&urlseen_engine::NamespaceOptions {
        leaf_bits: Some(leaf_bits),
        ..auto
    });
    let urlseen_leaves = u64::from(built.initial_leaves);
    // What RSS and the disk will show at capacity: filters plus one record buffer per leaf in
    // RAM, the fingerprints in leaf files (and the log, with --data) on disk.
    let ram_bytes = urlseen_leaves * (p.leaf_bits.div_ceil(512) * 64 + LEAF_BUFFER_BYTES);
    let leaf_file_bytes = p.capacity * LEAF_RECORD_BYTES;
    let log_bytes_at_least = p.capacity * 8;
    if args.json {
        let json = Json {
            capacity: p.capacity,
            fpr: p.fpr,
            m: p.bits,
            k: p.hashes,
            bits_per_url: p.bits_per_item,
            bytes: p.bytes,
            blocked: Blocked { m: p.blocked_bits, k: p.blocked_hashes, bytes: p.blocked_bytes },
            dsbf: Dsbf {
                leaf_bits: p.leaf_bits,
                leaf_capacity: p.leaf_capacity,
                k: p.leaf_hashes,
                leaves: p.leaves,
                expected_fpr: p.dsbf_fpr,
                urlseen_leaves,
                split_at: built.split_at,
                ram_bytes,
                leaf_file_bytes,
                log_bytes_at_least,
            },
        };
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(());
    }
    println!("capacity {} URLs, target false-positive rate {}", p.capacity, p.fpr);
    println!();
    println!("classic Bloom (seed 002)");
    println!(
        "  m = {} bits ({}), k = {}, {:.2} bits/URL",
        p.bits,
        human(p.bytes),
        p.hashes,
        p.bits_per_item
    );
    println!("cache-blocked Bloom (urlseen's leaf filter)");
    println!(
        "  m = {} bits ({}), k = {}, {:.2} bits/URL",
        p.blocked_bits,
        human(p.blocked_bytes),
        p.blocked_hashes,
        p.blocked_bits as f64 / p.capacity as f64
    );
    println!("DSBF (seed 000)");
    println!(
        "  leaf m = {} bits ({}), u = {} URLs per leaf (formula 4), k = {} (formula 6)",
        p.leaf_bits,
        human(p.leaf_bits / 8),
        p.leaf_capacity,
        p.leaf_hashes
    );
    println!("  c = {} leaves (formula 5), expected FPR {:.6} (formula 8)", p.leaves, p.dsbf_fpr);
    println!(
        "  urlseen builds {urlseen_leaves} cache-blocked leaves of that size, each splitting at \
         {} URLs ({} of formula 4's {} for its blocked filter)",
        built.split_at, built.split.threshold, built.leaf_capacity
    );
    println!(
        "  RAM {} (filters + a 16 KiB record buffer per leaf); disk {} of leaf files \
         (16 B/URL), and with --data a log of at least {}",
        human(ram_bytes),
        human(leaf_file_bytes),
        human(log_bytes_at_least)
    );
    println!(
        "  (a namespace that grew past its capacity by splits holds leaves between half full \
         and full: up to twice this RAM per URL)"
    );
    Ok(())
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{v:.2} {}", UNITS[unit]) }
}
