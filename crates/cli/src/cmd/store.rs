//! `urlseen import`, `urlseen stats`, `urlseen forget`: working with a data directory.

use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use urlseen_engine::{Fsync, NamespaceOptions, NamespaceStats};

use crate::args::{CanonArgs, parse_count, parse_fpr};
use crate::lines::{LineBatch, LineBatches, MAX_BATCH};

fn parse_fsync(s: &str) -> Result<Fsync, String> {
    s.parse().map_err(|e: urlseen_engine::Error| e.to_string())
}

/// Bulk-load URL files into a namespace of a data directory, in batches, with a progress bar.
///
/// Reads one URL per line (`-` for stdin). The namespace is created with the sizing and
/// canonicalization options given here if it does not exist. Invalid lines are counted and the
/// first few reported on stderr.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// Files of URLs, one per line (`-` for stdin).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The data directory.
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    /// The namespace.
    #[arg(long, default_value = "default")]
    ns: String,
    /// Expected number of distinct URLs, for a new namespace: the initial size, not a cap.
    #[arg(long, default_value = "1000000", value_parser = parse_count)]
    capacity: u64,
    /// False-positive bound, for a new namespace.
    #[arg(long, default_value = "0.01", value_parser = parse_fpr)]
    fpr: f64,
    #[command(flatten)]
    canon: CanonArgs,
    /// When a batch counts as recorded.
    #[arg(long, default_value = "everysec", value_parser = parse_fsync)]
    fsync: Fsync,
    /// Exact mode, for a new namespace (see `urlseen filter --help`).
    #[arg(long)]
    exact: bool,
    /// Counting filters, for a new namespace (implies --exact), so URLs can be forgotten.
    #[arg(long)]
    counting: bool,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
    /// Keep every recorded URL in a journal on disk, for a new namespace (about the URL's
    /// length plus 14 bytes each), so that `urlseen forget --prefix` can forget the URLs
    /// under a prefix. Not with --recrawl-after.
    #[arg(long)]
    keep_urls: bool,
    #[command(flatten)]
    recrawl: crate::args::RecrawlArgs,
    #[command(flatten)]
    ttl: crate::args::TtlArgs,
}

pub fn import(args: ImportArgs) -> anyhow::Result<()> {
    let db = super::open_data_dir(&args.data, args.fsync, false)?;
    let mut options = NamespaceOptions {
        capacity: args.capacity,
        fpr: args.fpr,
        canon: args.canon.options(),
        exact: args.exact || args.counting,
        counting: args.counting,
        keep_urls: args.keep_urls,
        ..NamespaceOptions::default()
    };
    args.recrawl.apply(&mut options);
    if db.namespace(&args.ns).is_none() {
        super::check_fits_in_ram(&options)?;
    }
    let ns = args.ttl.namespace(&db, &args.ns, options)?;
    super::warn_recovery(&ns);
    let total_bytes: u64 = args
        .files
        .iter()
        .filter(|p| p.as_os_str() != "-")
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    let bar = if args.quiet { ProgressBar::hidden() } else { ProgressBar::new(total_bytes) };
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {msg} (ETA {eta})",
        )
        .context("progress bar template")?,
    );
    let started = Instant::now();
    let (mut lines, mut new, mut invalid) = (0u64, 0u64, 0u64);
    let mut err = io::stderr();
    for path in &args.files {
        let reader: Box<dyn Read> = if path.as_os_str() == "-" {
            Box::new(io::stdin())
        } else {
            Box::new(File::open(path).with_context(|| format!("opening {}", path.display()))?)
        };
        let mut input =
            LineBatches::new(BufReader::with_capacity(crate::lines::READ_BYTES, reader));
        let mut batch = LineBatch::default();
        let mut fps = Vec::with_capacity(MAX_BATCH);
        let mut hosts = Vec::with_capacity(MAX_BATCH);
        let mut seen = Vec::with_capacity(MAX_BATCH);
        while input.next_batch(&mut batch).with_context(|| format!("reading {}", path.display()))? {
            fps.clear();
            hosts.clear();
            let mut bytes = 0u64;
            for line in &batch {
                bytes += line.bytes.len() as u64 + 1;
                if line.bytes.is_empty() {
                    continue;
                }
                lines += 1;
                match std::str::from_utf8(&line.bytes)
                    .map_err(|_| "not valid UTF-8".to_owned())
                    .and_then(|u| ns.fingerprint_host(u).map_err(|e| e.to_string()))
                {
                    Ok((fp, host)) => {
                        fps.push(fp);
                        hosts.push(host);
                    }
                    Err(reason) => {
                        invalid += 1;
                        if invalid <= 10 {
                            bar.suspend(|| {
                                writeln!(err, "urlseen: {}:{}: {reason}", path.display(), line.no)
                            })?;
                        }
                    }
                }
            }
            seen.clear();
            seen.resize(fps.len(), false);
            ns.seen_fingerprints_hosts(&fps, &hosts, &mut seen)?;
            new += seen.iter().filter(|&&s| !s).count() as u64;
            bar.inc(bytes);
            let rate = lines as f64 / started.elapsed().as_secs_f64().max(1e-9);
            bar.set_message(format!("{lines} URLs, {new} new, {rate:.0} URLs/s"));
        }
    }
    bar.finish_and_clear();
    drop(ns);
    db.close()?;
    let secs = started.elapsed().as_secs_f64();
    writeln!(
        err,
        "imported {lines} URLs into {:?}: {new} new, {} repeats, {invalid} invalid, in {secs:.2} s ({:.0} URLs/s)",
        args.ns,
        lines - new - invalid,
        lines as f64 / secs.max(1e-9)
    )?;
    Ok(())
}

/// Show the namespaces of a data directory: counts, memory, FPR, shape of the tree, log.
///
/// Reads only: nothing in the directory is created, written, cut or removed (a torn log tail is
/// reported, and cut by the next command that writes).
#[derive(Debug, clap::Args)]
pub struct StatsArgs {
    /// The data directory.
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    /// Only this namespace.
    #[arg(long)]
    ns: Option<String>,
    /// Print JSON (with every leaf).
    #[arg(long)]
    json: bool,
}

pub fn stats(args: StatsArgs) -> anyhow::Result<()> {
    let db = super::open_data_dir_read_only(&args.data)?;
    let names = match &args.ns {
        Some(name) => {
            anyhow::ensure!(
                db.try_namespace(name)?.is_some(),
                "no namespace {name:?} in {}",
                args.data.display()
            );
            vec![name.clone()]
        }
        None => db.namespace_names(),
    };
    // Each is read now (an open reads names only): a damaged one fails the command.
    let mut stats: Vec<NamespaceStats> = Vec::with_capacity(names.len());
    for name in &names {
        if let Some(ns) = db.try_namespace(name)? {
            stats.push(ns.stats());
        }
    }
    let mut out = io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &stats)?;
        writeln!(out)?;
    } else if stats.is_empty() {
        writeln!(out, "no namespaces in {}", args.data.display())?;
    } else {
        for s in &stats {
            writeln!(out, "{}", s.name)?;
            writeln!(out, "  mode            {}", s.mode)?;
            writeln!(out, "  URLs            {}", s.count)?;
            writeln!(
                out,
                "  memory          {:.2} MiB (filters: {:.2} MiB once every leaf is used)",
                s.memory_bytes as f64 / 1048576.0,
                s.filter_reserved_bytes as f64 / 1048576.0
            )?;
            writeln!(out, "  disk            {:.2} MiB", s.disk_bytes as f64 / 1048576.0)?;
            if let Some(n) = s.kept_urls {
                writeln!(out, "  URLs kept       {n} in the URL journal (forget --prefix works)")?;
            }
            writeln!(
                out,
                "  FPR             worst leaf {:.6}, mean {:.6} (bound {})",
                s.worst_leaf_fpr, s.mean_leaf_fpr, s.fpr_bound
            )?;
            match &s.counting {
                None => writeln!(
                    out,
                    "  tree            {} leaves, height {}, {} splits; leaf m = {} bits, u = {}, k = {}",
                    s.leaf_count,
                    s.height,
                    s.splits_done,
                    s.leaf_bits,
                    s.leaf_capacity,
                    s.leaf_hashes
                )?,
                Some(c) => writeln!(
                    out,
                    "  counting        {} generations, {} saturated counters; active m = {} counters, k = {}",
                    c.generations, c.saturated_counters, s.leaf_bits, s.leaf_hashes
                )?,
            }
            if let Some(r) = &s.recrawl {
                writeln!(
                    out,
                    "  recrawl         after {}, {} generations (each under FPR {:.3e}), {} live",
                    crate::args::format_duration(r.window_secs),
                    r.generations,
                    r.generation_fpr,
                    r.live.len()
                )?;
                for g in &r.live {
                    writeln!(
                        out,
                        "    generation    age {}, {} URLs, {:.2} MiB, worst leaf FPR {:.6}",
                        crate::args::format_duration(g.age_secs),
                        g.count,
                        g.memory_bytes as f64 / 1048576.0,
                        g.worst_leaf_fpr
                    )?;
                }
            }
            if s.kept > 0 {
                writeln!(
                    out,
                    "  kept            {} \"seen\" answers logged so that they stay seen",
                    s.kept
                )?;
            }
            if let Some(e) = &s.exact {
                writeln!(
                    out,
                    "  store           {} fingerprints; false-positive bound {:.2e} (collisions)",
                    e.stored, e.collision_bound
                )?;
            }
            writeln!(out, "  canonicalization {}", s.profile)?;
            if let Some(p) = &s.persistence {
                let access =
                    if p.read_only { "read only".to_owned() } else { format!("fsync {}", p.fsync) };
                writeln!(
                    out,
                    "  log             {} bytes, snapshot at {}, {access}",
                    p.log_bytes, p.snapshot_offset
                )?;
                if p.recovery_truncated_bytes > 0 && p.read_only {
                    writeln!(
                        out,
                        "  recovery        a torn or damaged log tail of {} bytes (left in place; \
                         the next command that writes cuts it)",
                        p.recovery_truncated_bytes
                    )?;
                } else if p.recovery_truncated_bytes > 0 {
                    writeln!(
                        out,
                        "  recovery        cut {} bytes of a torn or damaged log tail",
                        p.recovery_truncated_bytes
                    )?;
                }
                if let Some(reason) = &p.recovery_snapshot_error {
                    writeln!(out, "  recovery        snapshot not used: {reason}")?;
                }
            }
        }
    }
    drop(stats);
    db.close()?;
    Ok(())
}

/// Forget URLs: afterwards they are new again, and every other URL stays seen. URLs one by one
/// need a namespace with counting filters (created with --counting); a whole host (--host)
/// works in any namespace that records URLs, also in Redis (--redis, with the sizing and
/// canonicalization options the namespace was made with, as to `urlseen filter --redis`); a
/// prefix (--prefix) in one created with --keep-urls, not in Redis (see docs/forget.md).
#[derive(Debug, clap::Args)]
pub struct ForgetArgs {
    /// URLs to forget (read from stdin, one per line, when none are given and no --host or
    /// --prefix).
    #[arg(conflicts_with_all = ["host", "prefix"])]
    urls: Vec<String>,
    /// The data directory.
    #[arg(long, value_name = "DIR", required_unless_present = "redis")]
    data: Option<PathBuf>,
    #[command(flatten)]
    redis: super::dump::RedisArgs,
    #[command(flatten)]
    made_with: super::dump::RedisNamespaceArgs,
    /// The namespace.
    #[arg(long, default_value = urlseen_engine::DEFAULT_NAMESPACE)]
    ns: String,
    /// Forget every URL of this host (its canonical host, any scheme and port), and print how
    /// many were forgotten.
    #[arg(long, value_name = "HOST", conflicts_with = "prefix")]
    host: Option<String>,
    /// Forget every URL that starts with this prefix (compared as canonical URLs; no query,
    /// fragment or dot segment), in a namespace created with --keep-urls, and print how many
    /// were forgotten.
    #[arg(long, value_name = "URL")]
    prefix: Option<String>,
}

pub fn forget(args: ForgetArgs) -> anyhow::Result<()> {
    if let Some(redis) = args.redis.open()? {
        let host = args.host.as_deref().context(
            "with --redis only --host is possible: a Bloom leaf in Redis cannot forget one URL",
        )?;
        // As Redis holds it: with its recrawl window, if it has one (which refuses).
        let ns = redis.open_namespace(&args.ns, args.made_with.options())?;
        let n = ns.forget_host(host)?;
        println!("forgot {n} URLs of host {host}");
        return Ok(());
    }
    let data = args.data.as_deref().context("--data or --redis is needed")?;
    let db = super::open_data_dir(data, Fsync::Always, true)?;
    let ns = db
        .try_namespace(&args.ns)?
        .with_context(|| format!("no namespace {:?} in {}", args.ns, data.display()))?;
    let by = match (&args.host, &args.prefix) {
        (Some(host), _) => Some(ns.forget_host(host).map(|n| (n, "host", host))),
        (None, Some(prefix)) => Some(ns.forget_prefix(prefix).map(|n| (n, "prefix", prefix))),
        (None, None) => None,
    };
    if let Some(result) = by {
        let (n, what, arg) = result?;
        drop(ns);
        db.close()?;
        println!("forgot {n} URLs of {what} {arg}");
        return Ok(());
    }
    let urls: Vec<String> = if args.urls.is_empty() {
        let mut s = String::new();
        io::stdin().read_to_string(&mut s).context("reading stdin")?;
        s.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect()
    } else {
        args.urls
    };
    anyhow::ensure!(
        ns.can_forget(),
        "namespace {:?} cannot forget URLs: only a namespace created with --counting can",
        args.ns
    );
    let (mut forgotten, mut unknown, mut invalid) = (0u64, 0u64, 0u64);
    for url in &urls {
        match ns.forget(url) {
            Ok(true) => forgotten += 1,
            Ok(false) => unknown += 1,
            Err(urlseen_engine::Error::InvalidUrl(e)) => {
                invalid += 1;
                eprintln!("urlseen: {url}: {e}");
            }
            Err(e) => return Err(e.into()),
        }
    }
    drop(ns);
    db.close()?;
    eprintln!("forgot {forgotten} URLs ({unknown} were not recorded, {invalid} invalid)");
    Ok(())
}

/// Verify every file of a data directory, like redis-check-aof; with --repair, fix what can be
/// fixed without losing a record the log holds.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The data directory.
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    /// Cut torn log tails, and rebuild damaged snapshots and leaf files from the log (the
    /// damaged snapshot is kept as `snapshot.damaged`); accept what a counting store lost
    /// (saying how many URLs). Problems that would lose records (a missing meta, a log
    /// shorter than its snapshot, damage in the middle of the log) are reported, not touched.
    #[arg(long)]
    repair: bool,
}

/// Exit status: 0 when every namespace is sound (or was repaired), 1 otherwise.
pub fn check(args: CheckArgs) -> anyhow::Result<()> {
    let checks = urlseen_engine::check_data_dir(&args.data)
        .with_context(|| format!("checking {}", args.data.display()))?;
    let report = |checks: &[urlseen_engine::NamespaceCheck]| -> anyhow::Result<usize> {
        let mut out = io::stdout().lock();
        for c in checks {
            let name = c.name.as_deref().map_or_else(|| "?".to_owned(), |n| format!("{n:?}"));
            writeln!(out, "namespace {name} ({})", c.dir.display())?;
            for note in &c.notes {
                writeln!(out, "  ok      {note}")?;
            }
            for p in &c.problems {
                writeln!(out, "  PROBLEM {p}")?;
            }
        }
        let bad = checks.iter().filter(|c| !c.problems.is_empty()).count();
        writeln!(out, "{} namespaces, {bad} with problems", checks.len())?;
        Ok(bad)
    };
    let bad = report(&checks)?;
    if bad == 0 {
        return Ok(());
    }
    anyhow::ensure!(
        args.repair,
        "problems found; run again with --repair to fix what can be fixed"
    );
    let unrepairable: Vec<_> = checks.iter().filter(|c| !c.repairable).collect();
    anyhow::ensure!(
        unrepairable.is_empty(),
        "{} namespaces need a decision (see their PROBLEM lines); nothing was changed",
        unrepairable.len()
    );
    for c in &checks {
        let done = urlseen_engine::repair_namespace(c)
            .with_context(|| format!("repairing {}", c.dir.display()))?;
        for line in done {
            writeln!(io::stdout().lock(), "repair: {line}")?;
        }
    }
    // Opening does the rest: it cuts torn tails and replays the log where there is no snapshot.
    // Each namespace is loaded (an open loads none) and checkpointed.
    let db = super::open_data_dir(&args.data, Fsync::Always, true)?;
    for name in db.namespace_names() {
        if let Some(ns) = db.try_namespace(&name)? {
            super::warn_recovery(&ns);
            ns.checkpoint()?;
        }
    }
    db.close()?;
    writeln!(io::stdout().lock(), "repaired; checking again")?;
    let bad = report(&urlseen_engine::check_data_dir(&args.data)?)?;
    anyhow::ensure!(bad == 0, "problems remain after the repair");
    Ok(())
}
