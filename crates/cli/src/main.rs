//! `urlseen`: the URL-seen test every crawler needs, from the command line.
//!
//! ```text
//! cat urls.txt | urlseen filter > new.txt     # print each URL the first time it is seen
//! urlseen canon < urls.txt                     # canonical form of each URL
//! urlseen plan --capacity 1000000 --fpr 0.01   # sizing, by the papers' formulas
//! urlseen dump --data ./seen --ns jobs > jobs.dump   # a namespace to a file; `restore` back
//! urlseen bench fpr --plot fig7.svg            # seed 000's experiments, reproduced
//! ```

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod args;
mod cmd;
mod lines;
mod plot;

/// The URL-seen test every web crawler needs: canonicalize, deduplicate and remember URLs, fast,
/// in bounded memory, with a false-positive bound you choose and no false negatives.
#[derive(Debug, Parser)]
#[command(name = "urlseen", version, propagate_version = true, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print each URL from stdin the first time its canonical form is seen.
    Filter(cmd::filter::Args),
    /// Print the canonical form of each URL from stdin.
    Canon(cmd::canon::Args),
    /// Size a filter: bits, hashes and memory for a capacity and a false-positive rate.
    Plan(cmd::plan::Args),
    /// Reproduce the papers' experiments and measure throughput.
    #[command(subcommand)]
    Bench(cmd::bench::Command),
    /// Write a realistic generated URL stream to stdout (for trying urlseen out and for tests).
    Gen(cmd::gen_urls::Args),
    /// Bulk-load URL files into a namespace of a data directory.
    Import(cmd::store::ImportArgs),
    /// Show the namespaces of a data directory.
    Stats(cmd::store::StatsArgs),
    /// Forget URLs in a counting namespace of a data directory.
    Forget(cmd::store::ForgetArgs),
    /// Write a namespace of a data directory to a dump file (backups, moving machines).
    Dump(cmd::dump::DumpArgs),
    /// Restore a namespace from a dump file into a data directory.
    Restore(cmd::dump::RestoreArgs),
    /// Verify every file of a data directory (like redis-check-aof); --repair fixes what it can.
    Check(cmd::store::CheckArgs),
    /// Serve the Redis protocol (BF.*, URL.*) and HTTP metrics, for crawlers in any language.
    Serve(cmd::serve::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Filter(args) => cmd::filter::run(args),
        Command::Canon(args) => cmd::canon::run(args),
        Command::Plan(args) => cmd::plan::run(args),
        Command::Bench(command) => cmd::bench::run(command),
        Command::Gen(args) => cmd::gen_urls::run(args),
        Command::Import(args) => cmd::store::import(args),
        Command::Stats(args) => cmd::store::stats(args),
        Command::Forget(args) => cmd::store::forget(args),
        Command::Check(args) => cmd::store::check(args),
        Command::Dump(args) => cmd::dump::dump(args),
        Command::Restore(args) => cmd::dump::restore(args),
        Command::Serve(args) => cmd::serve::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if lines::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("urlseen: {err:#}");
            ExitCode::FAILURE
        }
    }
}
