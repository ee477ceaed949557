//! `urlseen gen`: a realistic generated URL stream.

use std::io::{self, BufWriter, Write};

use urlseen_corpus::{Config, Generator};

use crate::args::parse_count;

/// Write generated crawler URLs to stdout, one per line: hosts with a power-law distribution,
/// site-like paths and queries, and repeats (30% by default). Deterministic for a seed.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How many URLs.
    #[arg(long, default_value = "1000000", value_parser = parse_count)]
    count: u64,
    /// Fraction of lines that repeat an earlier URL (0 makes every URL distinct).
    #[arg(long, default_value_t = 0.3)]
    repeats: f64,
    /// Number of distinct hosts.
    #[arg(long, default_value_t = 100_000)]
    hosts: u32,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if !(0.0..1.0).contains(&args.repeats) {
        anyhow::bail!("--repeats must be in [0, 1), got {}", args.repeats);
    }
    let config =
        Config { hosts: args.hosts.max(1), repeat_ratio: args.repeats, ..Config::new(args.seed) };
    let mut generator = Generator::with_config(config);
    let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let mut url = String::new();
    for _ in 0..args.count {
        generator.next_into(&mut url);
        out.write_all(url.as_bytes())?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}
