//! Seed 000, Fig. 10/11: a fixed Bloom filter per domain (the Internet Archive's approach)
//! against a DSBF, on domains whose sizes follow a power law.
//!
//! The Internet Archive keeps a 32 kB filter with k = 10 per domain, which holds about 1.8×10⁴
//! URLs at its best. A big site overflows it (its FPR soars) while a small one wastes most of it.
//! A DSBF with H = 1 and c = 10, given the same total memory, spreads the same URLs almost evenly
//! over its leaves, because routing hashes the URL, not the domain.

use std::io::Write;

use serde::Serialize;
use urlseen_corpus::{host_name, zipf_host_counts};
use urlseen_filter::{BloomFilter, hash, plan};

use super::fixed_tree;
use crate::args::parse_count;
use crate::plot;

const DOMAIN_FILTER_BITS: u64 = 32 * 1024 * 8;
const DOMAIN_FILTER_HASHES: u32 = 10;

/// Reproduce Fig. 10/11: per-domain filters vs a DSBF on power-law host sizes.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Number of domains.
    #[arg(long, default_value_t = 1000)]
    hosts: u32,
    /// Total URLs over all domains.
    #[arg(long, default_value = "1000000", value_parser = parse_count)]
    urls: u64,
    /// Zipf exponent of domain sizes.
    #[arg(long, default_value_t = 1.0)]
    zipf: f64,
    /// DSBF leaves (c, with H = 1).
    #[arg(long, default_value_t = 10)]
    leaves: u32,
    /// Queries per domain (URLs of that domain never inserted) to measure each filter's FPR.
    #[arg(long, default_value_t = 10_000)]
    queries: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Write an SVG plot: per-domain counts (Fig. 10) and per-leaf counts (Fig. 11).
    #[arg(long)]
    plot: Option<std::path::PathBuf>,
}

#[derive(Debug, Serialize)]
struct Domain {
    host: String,
    urls: u64,
    filter_fill: f64,
    measured_fpr: f64,
    formula_fpr: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    hosts: u32,
    urls: u64,
    domain_filter_bits: u64,
    domain_filter_hashes: u32,
    /// URLs one domain filter holds at its optimum (m ln 2 / k).
    domain_filter_capacity: u64,
    overflowing_domains: usize,
    overflowing_mean_fpr: f64,
    overflowing_max_fpr: f64,
    /// Domains using under a tenth of their filter's capacity.
    underused_domains: usize,
    /// FPR over queries spread like the URLs (weighted by domain size).
    per_domain_overall_fpr: f64,
    dsbf_leaves: u32,
    dsbf_leaf_bits: u64,
    dsbf_leaf_counts: Vec<u64>,
    dsbf_leaf_min: u64,
    dsbf_leaf_max: u64,
    dsbf_imbalance: f64,
    dsbf_overall_fpr: f64,
    domains: Vec<Domain>,
}

fn url_fp(host: &str, i: u64) -> u64 {
    hash::fingerprint(format!("https://{host}/item/{i}").as_bytes(), urlseen_engine::DEFAULT_SEED)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.hosts >= 1 && args.leaves >= 1, "--hosts and --leaves must be positive");
    let counts = zipf_host_counts(args.hosts, args.urls, args.zipf);
    let total_bits = DOMAIN_FILTER_BITS * u64::from(args.hosts);
    let leaf_bits = (total_bits / u64::from(args.leaves)).div_ceil(512) * 512;
    let tree = fixed_tree(args.leaves, leaf_bits, 0.01, urlseen_engine::DEFAULT_SEED);
    let capacity = (DOMAIN_FILTER_BITS as f64 * std::f64::consts::LN_2
        / f64::from(DOMAIN_FILTER_HASHES)) as u64;

    let mut domains = Vec::new();
    let (mut dsbf_false, mut domain_false, mut total_queries) = (0u64, 0u64, 0u64);
    for (h, &n) in counts.iter().enumerate() {
        let host = host_name(h as u64);
        let mut filter = BloomFilter::new(DOMAIN_FILTER_BITS, DOMAIN_FILTER_HASHES, 11);
        for i in 0..n {
            let fp = url_fp(&host, i);
            filter.insert(fp);
            tree.insert(fp);
        }
        let hits =
            (n..n + args.queries).filter(|&i| filter.contains(url_fp(&host, i))).count() as u64;
        // Queries for the overall FPR follow the URL distribution: this domain's share of them.
        let weighted = (args.queries * args.hosts as u64 * n / args.urls.max(1)).min(args.queries);
        domain_false +=
            (n..n + weighted).filter(|&i| filter.contains(url_fp(&host, i))).count() as u64;
        dsbf_false += (n..n + weighted).filter(|&i| tree.contains(url_fp(&host, i))).count() as u64;
        total_queries += weighted;
        domains.push(Domain {
            host,
            urls: n,
            filter_fill: filter_fill(&filter),
            measured_fpr: hits as f64 / args.queries.max(1) as f64,
            formula_fpr: plan::classic_fpr(DOMAIN_FILTER_BITS, DOMAIN_FILTER_HASHES, n),
        });
    }
    let stats = tree.stats();
    let leaf_counts: Vec<u64> = stats.leaves.iter().map(|l| l.count).collect();
    let (min, max) = (
        leaf_counts.iter().copied().min().unwrap_or(0),
        leaf_counts.iter().copied().max().unwrap_or(0),
    );
    let mean = args.urls as f64 / f64::from(args.leaves);
    let overflowing: Vec<&Domain> = domains.iter().filter(|d| d.urls > capacity).collect();
    let report = Report {
        hosts: args.hosts,
        urls: args.urls,
        domain_filter_bits: DOMAIN_FILTER_BITS,
        domain_filter_hashes: DOMAIN_FILTER_HASHES,
        domain_filter_capacity: capacity,
        overflowing_domains: overflowing.len(),
        overflowing_mean_fpr: overflowing.iter().map(|d| d.measured_fpr).sum::<f64>()
            / overflowing.len().max(1) as f64,
        overflowing_max_fpr: overflowing.iter().map(|d| d.measured_fpr).fold(0.0, f64::max),
        underused_domains: domains.iter().filter(|d| d.urls * 10 < capacity).count(),
        per_domain_overall_fpr: domain_false as f64 / total_queries.max(1) as f64,
        dsbf_leaves: args.leaves,
        dsbf_leaf_bits: leaf_bits,
        dsbf_leaf_min: min,
        dsbf_leaf_max: max,
        dsbf_imbalance: (max - min) as f64 / mean.max(1.0),
        dsbf_leaf_counts: leaf_counts,
        dsbf_overall_fpr: dsbf_false as f64 / total_queries.max(1) as f64,
        domains,
    };

    if let Some(path) = &args.plot {
        let domain_counts: Vec<f64> = report.domains.iter().map(|d| d.urls as f64).collect();
        let leaf_counts: Vec<f64> = report.dsbf_leaf_counts.iter().map(|&c| c as f64).collect();
        plot::balance_chart(path, &domain_counts, capacity as f64, &leaf_counts)?;
    }

    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
        return Ok(());
    }
    let r = &report;
    writeln!(out, "{} URLs over {} domains (Zipf s = {})", r.urls, r.hosts, args.zipf)?;
    writeln!(
        out,
        "per-domain filters: 32 kB, k = 10, best at {} URLs each ({} kB in all)",
        capacity,
        r.hosts * 32
    )?;
    writeln!(
        out,
        "  {:<40} {:>9} {:>7} {:>10} {:>10}",
        "largest domains", "URLs", "fill", "FPR", "formula"
    )?;
    for d in r.domains.iter().take(10) {
        writeln!(
            out,
            "  {:<40} {:>9} {:>7.3} {:>10.6} {:>10.6}",
            d.host, d.urls, d.filter_fill, d.measured_fpr, d.formula_fpr
        )?;
    }
    writeln!(
        out,
        "  overflowing domains: {} (FPR mean {:.4}, max {:.4}); under a tenth used: {}",
        r.overflowing_domains, r.overflowing_mean_fpr, r.overflowing_max_fpr, r.underused_domains
    )?;
    writeln!(out, "  FPR over queries spread like the URLs: {:.6}", r.per_domain_overall_fpr)?;
    writeln!(
        out,
        "DSBF H = 1, c = {}: same memory, {} bits per leaf",
        r.dsbf_leaves, r.dsbf_leaf_bits
    )?;
    writeln!(out, "  leaf counts: {:?}", r.dsbf_leaf_counts)?;
    writeln!(
        out,
        "  min {} max {} (spread {:.2}% of the mean); FPR over the same queries: {:.6}",
        r.dsbf_leaf_min,
        r.dsbf_leaf_max,
        100.0 * r.dsbf_imbalance,
        r.dsbf_overall_fpr
    )?;
    Ok(())
}

fn filter_fill(filter: &BloomFilter) -> f64 {
    filter.count_ones() as f64 / filter.num_bits() as f64
}
