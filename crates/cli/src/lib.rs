//! `urlseen`: the URL-seen test every crawler needs, from the command line.
//!
//! The binary is `src/main.rs`; this library holds the whole command so that other front ends
//! can run it too: the Python wheel's `urlseen` command calls [`run`] with `sys.argv`.
//!
//! ```text
//! cat urls.txt | urlseen filter > new.txt     # print each URL the first time it is seen
//! urlseen canon < urls.txt                     # canonical form of each URL
//! urlseen plan --capacity 1000000 --fpr 0.01   # sizing, by the papers' formulas
//! urlseen dump --data ./seen --ns jobs > jobs.dump   # a namespace to a file; `restore` back
//! urlseen bench fpr --plot fig7.svg            # seed 000's experiments, reproduced
//! ```

use std::ffi::OsString;

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
    /// Forget URLs in a namespace of a data directory (one by one in a counting namespace;
    /// by host or prefix in any).
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

/// Runs the `urlseen` command with `args` (the program name first, as `std::env::args_os`
/// gives them) and returns its exit status: 0 on success, 1 when the command failed (the
/// error is printed to stderr), 2 for a usage error. `--help` and `--version` print to stdout
/// and return 0.
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => {
            // Help and version go to stdout, usage errors to stderr, as `Cli::parse` does.
            let _ = err.print();
            return u8::try_from(err.exit_code()).unwrap_or(2);
        }
    };
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
        Ok(()) => 0,
        Err(err) if lines::is_broken_pipe(&err) => 0,
        Err(err) => {
            eprintln!("urlseen: {err:#}");
            1
        }
    }
}
