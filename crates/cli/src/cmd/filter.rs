//! `urlseen filter`: a streaming `sort -u` for URLs, by canonical form, in bounded memory.

use std::io::{self, BufWriter, Write};
use std::sync::{Arc, mpsc};
use std::time::Instant;

use anyhow::Context;
use urlseen_canon::Canonicalizer;
use urlseen_engine::{
    Clock, Db, Expiry, Fsync, NamespaceOptions, SeenSet, SeenThenError, SplitPolicy, SystemClock,
};
use urlseen_redis::{RedisDb, RedisMode, RedisOptions, RedisSet};

use crate::args::{CanonArgs, parse_count, parse_fpr, parse_seconds};
use crate::lines::{LineBatch, LineBatches, write_line};

/// Print each line whose canonical URL has not been seen before.
///
/// Lines are printed as given (or canonical with --print-canonical). Empty lines are skipped.
/// Invalid URLs are reported on stderr with their line number and reason, or passed through
/// with --keep-invalid. The filter grows past --capacity by splitting (the DSBF), keeping its
/// false-positive rate under --fpr.
///
/// RAM holds the filters (about 1.2 bytes per URL at --fpr 0.01) and small buffers. The
/// fingerprints each leaf needs in order to split live on disk: in --data, or without it in a
/// temporary spill directory (under --spill-dir, default $TMPDIR or /tmp) that is removed on
/// exit. --in-memory keeps them on the heap instead (12 more bytes per URL, no disk).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Expected number of distinct URLs: the initial size, not a cap.
    #[arg(long, default_value = "1000000", value_parser = parse_count)]
    capacity: u64,
    /// False-positive bound: the chance that a new URL is wrongly taken as seen.
    #[arg(long, default_value = "0.01", value_parser = parse_fpr)]
    fpr: f64,
    /// Bits per leaf filter (default: what --capacity needs, at most 2^23).
    #[arg(long, value_parser = parse_count)]
    leaf_bits: Option<u64>,
    /// Seed of fingerprints and filters.
    #[arg(long, default_value_t = urlseen_engine::DEFAULT_SEED)]
    seed: u64,
    #[command(flatten)]
    canon: CanonArgs,
    /// Pass invalid lines through to stdout instead of reporting them on stderr.
    #[arg(long)]
    keep_invalid: bool,
    /// Print the canonical form of each new URL instead of the line as given.
    #[arg(long)]
    print_canonical: bool,
    /// Print a summary (lines, new, repeats, invalid, rate, memory) to stderr at the end.
    #[arg(long)]
    stats: bool,
    /// Remember across runs: keep the namespace in this data directory.
    #[arg(long, value_name = "DIR")]
    data: Option<std::path::PathBuf>,
    /// Without --data: make the temporary spill directory here (it is removed on exit).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["data", "in_memory"])]
    spill_dir: Option<std::path::PathBuf>,
    /// Without --data: keep the leaves' fingerprints on the heap (12 bytes per URL) instead of
    /// in a spill directory.
    #[arg(long, conflicts_with = "data")]
    in_memory: bool,
    /// Namespace to use in --data or --redis (created with the sizing options above if it is
    /// new; an existing one keeps its own in --data, and must match them in --redis).
    #[arg(long, default_value = "default")]
    ns: String,
    /// Share the set through Redis: a standalone server, a list of independent servers (one
    /// leaf on each in turn; list them in the same order everywhere), or Redis Cluster seed
    /// nodes (detected, or forced with --cluster). Any number of `urlseen filter --redis`
    /// processes on any machines then print each URL once between them.
    #[arg(long, value_name = "URL[,URL…]", value_delimiter = ',', conflicts_with_all = ["data", "exact", "counting"])]
    redis: Option<Vec<String>>,
    /// With --redis: the URLs are Redis Cluster seed nodes.
    #[arg(long, requires = "redis")]
    cluster: bool,
    /// With --redis: how long to keep retrying (with backoff, one line on stderr per retry)
    /// while Redis is unreachable or refusing for a while (restarting, loading, failing over)
    /// before giving up with an error.
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = parse_seconds, requires = "redis")]
    redis_retry_for: std::time::Duration,
    /// With --data: when a URL counts as recorded, as Redis's appendfsync. With `always` a URL
    /// is printed only once it is on disk.
    #[arg(long, default_value = "everysec", value_parser = parse_fsync, requires = "data")]
    fsync: Fsync,
    /// Exact mode, for a new namespace: confirm every filter positive against the records of
    /// its leaf (each leaf indexes its fingerprints), so no false positives are left but 64-bit
    /// fingerprint collisions.
    #[arg(long)]
    exact: bool,
    /// Counting filters, for a new namespace (implies --exact): URLs can later be forgotten
    /// with `urlseen forget`.
    #[arg(long)]
    counting: bool,
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

fn parse_fsync(s: &str) -> Result<Fsync, String> {
    s.parse().map_err(|e: urlseen_engine::Error| e.to_string())
}

/// What became of one input line.
#[derive(Debug, Clone, Copy)]
enum Slot {
    /// An empty line.
    Skip,
    /// Not a URL.
    Invalid,
    /// A URL, whose answer is at this index of the batch's results.
    Url(usize),
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let options = NamespaceOptions {
        capacity: args.capacity,
        fpr: args.fpr,
        leaf_bits: args.leaf_bits,
        canon: args.canon.options(),
        seed: args.seed,
        split: SplitPolicy::default(),
        exact: args.exact || args.counting,
        counting: args.counting,
        keep_urls: args.keep_urls,
        ..NamespaceOptions::default()
    };
    let mut options = options;
    args.recrawl.apply(&mut options);
    if let Some(urls) = &args.redis {
        anyhow::ensure!(
            args.ttl.ttl.is_none() || options.recrawl_after.is_none(),
            "--ttl and --recrawl-after cannot go together with --redis: the generations of a \
             recrawl window in Redis expire by themselves"
        );
        return run_redis(&args, urls.clone(), options);
    }
    let db = match &args.data {
        Some(dir) => super::open_data_dir(dir, args.fsync, false)?,
        None if args.in_memory => Db::in_memory(),
        None => Db::temporary(args.spill_dir.as_deref()).context("creating the spill directory")?,
    };
    if db.namespace(&args.ns).is_none() {
        super::check_fits_in_ram(&options)?;
    }
    let ns = args.ttl.namespace(&db, &args.ns, options)?;
    super::warn_recovery(&ns);
    let canon = Canonicalizer::new(ns.options().canon.clone());

    let (lines, new, invalid, started) = stream(&ns, &canon, &args)?;

    if args.stats {
        let elapsed = started.elapsed().as_secs_f64();
        let s = ns.stats();
        writeln!(
            io::stderr().lock(),
            "urlseen filter: {lines} lines, {new} new, {} repeats, {invalid} invalid in {elapsed:.2} s \
             ({:.0} lines/s); {} leaves, height {}, RAM {:.1} MiB (peak RSS {}), disk {:.1} MiB, \
             worst leaf FPR {:.4} (bound {})",
            lines - new - invalid,
            lines as f64 / elapsed.max(1e-9),
            s.leaf_count,
            s.height,
            (s.memory_bytes + urlseen_engine::arena_idle_bytes() as u64) as f64 / (1 << 20) as f64,
            peak_rss().map_or_else(
                || "unknown".to_owned(),
                |b| format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
            ),
            s.disk_bytes as f64 / (1 << 20) as f64,
            s.worst_leaf_fpr,
            s.fpr_bound,
        )?;
        if let Some(e) = &s.exact {
            writeln!(
                io::stderr().lock(),
                "urlseen filter: exact: {} Bloom positives answered by the LRU, {} found in leaf \
                 index runs ({} run page reads, {} runs written)",
                e.lru_hits,
                e.store_hits,
                e.store_reads,
                e.store_writes,
            )?;
        }
    }
    drop(ns);
    db.close()?;
    Ok(())
}

/// One batch of input lines and what fingerprinting made of them, passed from the reading
/// thread to the answering one (and back, to be reused).
#[derive(Default)]
struct Batch {
    lines: LineBatch,
    fps: Vec<u64>,
    hosts: Vec<u32>,
    slots: Vec<Slot>,
    /// Non-empty lines in the batch.
    urls: u64,
    invalid: u64,
}

/// Batches in flight between the two threads: one being fingerprinted, one waiting, one being
/// answered.
const IN_FLIGHT: usize = 2;

/// Reads stdin in batches, answers each batch with one call to `set`, and prints the new
/// lines in input order. Returns (lines, new, invalid, start time).
///
/// Two threads: one reads and fingerprints batch n + 1 (canonicalization, hashing, the host
/// dictionary) while this one answers batch n and prints it, so the two parts of a line's cost
/// run on two cores (a profile of 10⁷ lines put about two thirds of the work in the reading
/// part, a third in answering, besides the split worker's). The reading thread is detached: when
/// answering fails, the error returns at once instead of waiting for a read of stdin that may
/// never end.
fn stream<S: SeenSet + 'static>(
    set: &Arc<S>,
    canon: &Canonicalizer,
    args: &Args,
) -> anyhow::Result<(u64, u64, u64, Instant)> {
    let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let (full_tx, full_rx) = mpsc::sync_channel::<io::Result<Batch>>(IN_FLIGHT);
    let (free_tx, free_rx) = mpsc::sync_channel::<Batch>(IN_FLIGHT + 1);
    for _ in 0..IN_FLIGHT + 1 {
        free_tx.send(Batch::default()).expect("the receiver is here");
    }
    let started = Instant::now();
    let reader = {
        let set = Arc::clone(set);
        let report_invalid = !args.keep_invalid;
        std::thread::Builder::new()
            .name("urlseen-read".into())
            .spawn(move || read_and_fingerprint(&*set, report_invalid, &free_rx, &full_tx))
            .context("starting the reading thread")?
    };

    let mut canonical = String::new();
    let mut seen: Vec<bool> = Vec::new();
    let (mut lines, mut new, mut invalid) = (0u64, 0u64, 0u64);
    for batch in full_rx {
        let batch = batch.context("reading stdin")?;
        lines += batch.urls;
        invalid += batch.invalid;
        seen.clear();
        seen.resize(batch.fps.len(), false);
        // The batch's new URLs are written out (and flushed) before the batch counts as
        // recorded: a crash in between prints them again after restart, never loses them.
        let mut print = |seen: &[bool]| -> io::Result<()> {
            for (line, slot) in batch.lines.iter().zip(&batch.slots) {
                match *slot {
                    Slot::Skip => {}
                    Slot::Invalid if args.keep_invalid => write_line(&mut out, &line.bytes)?,
                    Slot::Invalid => {}
                    Slot::Url(j) if seen[j] => {}
                    Slot::Url(_) => {
                        new += 1;
                        if args.print_canonical {
                            // Valid UTF-8 and canonicalizable: both checked when fingerprinting.
                            let url = std::str::from_utf8(&line.bytes).unwrap_or_default();
                            canon
                                .canonicalize_into(url, &mut canonical)
                                .map_err(io::Error::other)?;
                            write_line(&mut out, canonical.as_bytes())?;
                        } else {
                            write_line(&mut out, &line.bytes)?;
                        }
                    }
                }
            }
            out.flush()
        };
        match set.seen_fingerprints_hosts_then(&batch.fps, &batch.hosts, &mut seen, &mut print) {
            Ok(()) => {}
            Err(SeenThenError::Then(e)) => return Err(e).context("writing to stdout"),
            Err(SeenThenError::Backend(e)) => return Err(e.into()),
        }
        // The reader may have stopped (end of input): then the batch is simply dropped.
        let _ = free_tx.send(batch);
    }
    out.flush()?;
    // The channel closed: the reader is done (end of input), or panicked.
    if reader.join().is_err() {
        anyhow::bail!("the reading thread panicked");
    }
    Ok((lines, new, invalid, started))
}

/// The reading thread of [`stream`]: fills the batches it gets back from `free` with stdin's
/// next lines and their fingerprints, and sends them on to `full`, until the end of input, a
/// read error (sent on), or the answering side going away.
fn read_and_fingerprint<S: SeenSet>(
    set: &S,
    report_invalid: bool,
    free: &mpsc::Receiver<Batch>,
    full: &mpsc::SyncSender<io::Result<Batch>>,
) {
    let mut input = LineBatches::new(crate::lines::stdin_reader());
    // Stderr is locked per message, never held: the answering thread reports retries there
    // while this one waits for it.
    let err = io::stderr();
    let mut results = Vec::new();
    while let Ok(mut batch) = free.recv() {
        match input.next_batch(&mut batch.lines) {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                let _ = full.send(Err(e));
                return;
            }
        }
        batch.fps.clear();
        batch.hosts.clear();
        batch.slots.clear();
        (batch.urls, batch.invalid) = (0, 0);
        // The valid UTF-8 lines go to the backend as one batch; their slots are filled after.
        let mut urls = Vec::with_capacity(batch.lines.len());
        for line in &batch.lines {
            batch.slots.push(if line.bytes.is_empty() {
                Slot::Skip
            } else if let Ok(url) = std::str::from_utf8(&line.bytes) {
                urls.push(url);
                Slot::Url(0)
            } else {
                Slot::Invalid
            });
        }
        set.fingerprint_hosts(&urls, &mut results);
        drop(urls);
        let mut results = results.drain(..);
        for (line, slot) in batch.lines.iter().zip(&mut batch.slots) {
            let fp = match slot {
                Slot::Skip => continue,
                Slot::Invalid => Err("not valid UTF-8".to_owned()),
                Slot::Url(_) => {
                    results.next().expect("one result per valid line").map_err(|e| e.to_string())
                }
            };
            batch.urls += 1;
            match fp {
                Ok((fp, host)) => {
                    *slot = Slot::Url(batch.fps.len());
                    batch.fps.push(fp);
                    batch.hosts.push(host);
                }
                Err(reason) => {
                    batch.invalid += 1;
                    if report_invalid {
                        // Best effort, as any diagnostic: a closed stderr stops nothing.
                        let _ = writeln!(err.lock(), "urlseen: line {}: {reason}", line.no);
                    }
                    *slot = Slot::Invalid;
                }
            }
        }
        drop(results);
        if full.send(Ok(batch)).is_err() {
            return;
        }
    }
}

/// `--redis`: the same stream against a namespace in Redis.
fn run_redis(args: &Args, urls: Vec<String>, options: NamespaceOptions) -> anyhow::Result<()> {
    let mode = if args.cluster { RedisMode::Cluster } else { RedisMode::Auto };
    let db = RedisDb::open(RedisOptions {
        mode,
        retry_for: args.redis_retry_for,
        log_retries: true,
        ..RedisOptions::new(urls)
    })
    .context("connecting to redis")?;
    let existed = args.ttl.ttl.is_some() && db.namespace_exists(&args.ns)?;
    let ns = db.open_namespace(&args.ns, options)?;
    if let (Some(ttl), false) = (args.ttl.ttl, existed) {
        // The namespace this run made gets the lifetime on all of its Redis keys; `NX`, so
        // that one another process made meanwhile (and maybe timed) keeps its own.
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let at = Expiry::At(SystemClock.now_millis().saturating_add(ms));
        db.update_expiry(&args.ns, |current| (current == Expiry::Never).then_some(at))?;
    }
    let canon = Canonicalizer::new(ns.options().canon.clone());
    let (lines, new, invalid, started) = stream(&Arc::new(ns.clone()), &canon, args)?;
    if args.stats {
        let elapsed = started.elapsed().as_secs_f64();
        let store = match &ns {
            RedisSet::Plain(ns) => {
                let s = ns.stats()?;
                format!(
                    "{} URLs in {} leaves, height {}, worst leaf FPR {:.4}, filters {:.1} MiB \
                     in this process, {} round trips",
                    s.count,
                    s.leaves.len(),
                    s.height,
                    s.worst_leaf_fpr,
                    s.replica_bytes as f64 / f64::from(1 << 20),
                    s.round_trips
                )
            }
            RedisSet::Window(w) => {
                let s = w.stats()?;
                let ages: Vec<String> = s
                    .report
                    .live
                    .iter()
                    .map(|g| format!("{:.0} s: {}", g.age_secs, g.count))
                    .collect();
                format!(
                    "{} URLs in a recrawl window of {} s, {} generations live (age: URLs) [{}]",
                    s.count(),
                    s.report.window_secs,
                    s.report.live.len(),
                    ages.join(", ")
                )
            }
        };
        eprintln!(
            "urlseen filter: {lines} lines, {new} new, {} repeats, {invalid} invalid in {elapsed:.2} s \
             ({:.0} lines/s); redis {:?}: {store}",
            lines - new - invalid,
            lines as f64 / elapsed.max(1e-9),
            db.mode(),
        );
    }
    Ok(())
}

/// The process's peak resident memory (`VmHWM`), where the OS reports it.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
