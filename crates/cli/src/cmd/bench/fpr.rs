//! Seed 000, Fig. 7: the FPR of a classic Bloom filter against DSBFs with c leaves.
//!
//! For each c in {1, 2, 3, 5, 10}: a DSBF with c leaves of m bits (H = 1, no splits, urlseen's
//! blocked leaves) and a classic filter with the same total space c·m. Insert n distinct URLs,
//! query n/10 other distinct URLs, count positives; print beside formula (8).

use std::io::Write;
use std::time::Instant;

use serde::Serialize;
use urlseen_filter::{BloomFilter, plan};

use super::{corpus_fingerprints, fixed_tree};
use crate::args::{parse_count, parse_fpr};
use crate::plot::{self, Series};

/// Reproduce Fig. 7: FPR of classic filters and DSBFs of 1, 2, 3, 5 and 10 leaves against n.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Largest n (the paper used 1.5 million crawled URLs).
    #[arg(long, default_value = "1500000", value_parser = parse_count)]
    urls: u64,
    /// Number of n values, evenly spaced up to --urls.
    #[arg(long, default_value_t = 10)]
    points: u32,
    /// Bits per leaf (m). The default makes one leaf hold about 219,000 URLs at 1%.
    #[arg(long, default_value = "2097152", value_parser = parse_count)]
    leaf_bits: u64,
    /// The f_max that fixes k by formulas (4) and (6).
    #[arg(long, default_value = "0.01", value_parser = parse_fpr)]
    fpr: f64,
    /// Leaf counts to compare (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,5,10")]
    leaves: Vec<u32>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Write an SVG plot of FPR against n.
    #[arg(long)]
    plot: Option<std::path::PathBuf>,
}

/// One measurement.
#[derive(Debug, Serialize)]
struct Row {
    n: u64,
    leaves: u32,
    total_bits: u64,
    k_classic: u32,
    k_dsbf: u32,
    queries: u64,
    classic_measured: f64,
    dsbf_measured: f64,
    formula_8: f64,
    blocked_formula: f64,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.points >= 1, "--points must be at least 1");
    anyhow::ensure!(args.urls >= 10, "--urls must be at least 10");
    anyhow::ensure!(
        !args.leaves.is_empty() && !args.leaves.contains(&0),
        "--leaves must be positive"
    );
    let m = args.leaf_bits.div_ceil(512) * 512;
    let u = plan::leaf_capacity(m, args.fpr);
    let k = plan::optimal_hashes(m, u);
    let started = Instant::now();
    let inserted = corpus_fingerprints(1, args.urls as usize);
    let others = corpus_fingerprints(2, (args.urls / 10) as usize);
    let checkpoints: Vec<u64> =
        (1..=args.points).map(|i| args.urls * u64::from(i) / u64::from(args.points)).collect();

    let mut rows = Vec::new();
    for &c in &args.leaves {
        let mut classic = BloomFilter::new(m * u64::from(c), k, 7);
        let tree = fixed_tree(c, m, args.fpr, urlseen_engine::DEFAULT_SEED);
        let k_dsbf = tree.params().leaf_hashes;
        let mut done = 0usize;
        for &n in &checkpoints {
            for &fp in &inserted[done..n as usize] {
                classic.insert(fp);
                tree.insert(fp);
            }
            done = n as usize;
            let queries = &others[..(n / 10) as usize];
            let classic_hits = queries.iter().filter(|&&fp| classic.contains(fp)).count();
            let dsbf_hits = queries.iter().filter(|&&fp| tree.contains(fp)).count();
            let q = queries.len().max(1) as f64;
            rows.push(Row {
                n,
                leaves: c,
                total_bits: m * u64::from(c),
                k_classic: k,
                k_dsbf,
                queries: queries.len() as u64,
                classic_measured: classic_hits as f64 / q,
                dsbf_measured: dsbf_hits as f64 / q,
                formula_8: plan::dsbf_fpr(k, n, u64::from(c), m),
                blocked_formula: plan::sectorized_fpr(m, k_dsbf, n / u64::from(c)),
            });
        }
    }

    if let Some(path) = &args.plot {
        let mut series = Vec::new();
        for (i, &c) in args.leaves.iter().enumerate() {
            let of_c = || rows.iter().filter(move |r| r.leaves == c);
            series.push(Series::line(
                format!("DSBF c={c} (measured)"),
                i,
                of_c().map(|r| (r.n as f64, r.dsbf_measured)).collect(),
            ));
            series.push(Series::points(
                format!("classic {c}·m (measured)"),
                i,
                of_c().map(|r| (r.n as f64, r.classic_measured)).collect(),
            ));
            series.push(Series::dashed(
                format!("formula (8), c={c}"),
                i,
                of_c().map(|r| (r.n as f64, r.formula_8)).collect(),
            ));
        }
        plot::line_chart(
            path,
            &format!("Fig. 7 reproduced: FPR vs n (m = {m} bits per leaf; classic k = {k})"),
            "URLs inserted (n)",
            "false-positive rate",
            &series,
        )?;
    }

    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "Fig. 7: leaf m = {m} bits, u = {u} (formula 4), k = {k} (formula 6); queries = n/10 other URLs"
    )?;
    writeln!(
        out,
        "{:>9} {:>3} {:>12} {:>12} {:>12} {:>12}",
        "n", "c", "classic c·m", "DSBF", "formula (8)", "blocked"
    )?;
    for r in &rows {
        writeln!(
            out,
            "{:>9} {:>3} {:>12.6} {:>12.6} {:>12.6} {:>12.6}",
            r.n, r.leaves, r.classic_measured, r.dsbf_measured, r.formula_8, r.blocked_formula
        )?;
    }
    writeln!(out, "({:.1} s)", started.elapsed().as_secs_f64())?;
    Ok(())
}
