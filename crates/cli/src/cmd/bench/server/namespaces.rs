//! `urlseen bench namespaces`: many small namespaces in one server, as a crawl platform makes
//! them (one per crawl job), and the same load on Redis as Firecrawl does it (one set per job).
//!
//! ```text
//! urlseen bench namespaces --addr 127.0.0.1:6380 --server-pid 4242 --namespaces 1e6
//! urlseen bench namespaces --addr 127.0.0.1:6390 --server-pid 4343 --redis
//! urlseen bench namespaces --addr 127.0.0.1:6380 --check     # after a restart
//! ```
//!
//! Namespace `job:i` gets `--urls` URLs in one command (`URL.SEEN job:i u1 … u10`; against
//! Redis, `SADD crawl:i:visited u1 … u10`), `--pipeline` commands at a time over each of
//! `--connections` connections (blocks of `--pipeline` namespaces dealt to them in turn); a
//! connection writes its next block before it reads the replies to the last, so the client
//! makes commands while the server answers them (as a pipelining client does). Every `--step`
//! namespaces it prints the creation rate over the step and the median of the rates of its ten
//! parts (on a shared machine a part's rate moves with what else runs; the median is the
//! step's own), the server's resident memory (`/proc/PID/status`) per namespace made so far,
//! its open file descriptors (`/proc/PID/fd`), and the CPU time the server spent per namespace
//! over the step (`/proc/PID/stat`). `--check` sends the same URLs again (`URL.CHECK`,
//! `SMISMEMBER`) and fails unless every one is seen: what a restart must keep. `--plot DIR --series
//! name=run.jsonl …` draws runs saved with `--json` (RSS and rate against the namespaces made)
//! and contacts no server.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context as _, bail};
use serde::Serialize;

use crate::args::parse_count;

use super::{Conn, encode, machine, resolve};

/// Create many small namespaces through `urlseen serve` (or Redis sets) and report the rate,
/// memory and descriptors as their number grows.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The server (urlseen, or Redis with --redis).
    #[arg(long, default_value = "127.0.0.1:6380")]
    addr: String,
    /// Namespaces to create.
    #[arg(long, default_value = "1000000", value_parser = parse_count)]
    namespaces: u64,
    /// URLs per namespace, sent in one command.
    #[arg(long, default_value_t = 10)]
    urls: usize,
    /// Commands a connection sends at a time (it keeps two such blocks in flight).
    #[arg(long, default_value_t = 512)]
    pipeline: usize,
    /// Connections, each sending its share of the namespaces. Redis answers on one thread;
    /// urlseen serves each connection on a thread of its own.
    #[arg(long, default_value_t = 1)]
    connections: usize,
    /// Report every this many namespaces.
    #[arg(long, default_value = "100000", value_parser = parse_count)]
    step: u64,
    /// The server's process id: its memory and descriptors are read from /proc.
    #[arg(long)]
    server_pid: Option<u32>,
    /// The server is Redis: one set per namespace (`SADD crawl:i:visited …`).
    #[arg(long)]
    redis: bool,
    /// Only check: every URL of every namespace is seen (after a restart).
    #[arg(long)]
    check: bool,
    /// AUTH password.
    #[arg(long)]
    password: Option<String>,
    /// Print JSON lines instead of a table.
    #[arg(long)]
    json: bool,
    /// Allow a server address that is not loopback.
    #[arg(long)]
    allow_remote: bool,
    /// Only plot: write `namespaces-rss.svg` and `namespaces-rate.svg` here from `--series`.
    #[arg(long, value_name = "DIR")]
    plot: Option<std::path::PathBuf>,
    /// A run to plot: `name=file.jsonl`, a file of `--json` output.
    #[arg(long, value_name = "NAME=FILE")]
    series: Vec<String>,
}

/// One step's figures.
#[derive(Debug, Serialize, serde::Deserialize)]
struct Step {
    namespaces: u64,
    /// Over the whole step.
    per_second: f64,
    /// The median of the rates of the step's ten tenths: what the step's rate is without
    /// the moments another process on a shared machine took the CPU.
    #[serde(default)]
    median_per_second: Option<f64>,
    rss_bytes: Option<u64>,
    rss_per_namespace: Option<f64>,
    open_fds: Option<usize>,
    /// The server's CPU time (user and system, all threads) over the step, per namespace.
    #[serde(default)]
    server_cpu_us_per_namespace: Option<f64>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(dir) = &args.plot {
        return plot(dir, &args.series);
    }
    if args.namespaces == 0
        || args.urls == 0
        || args.pipeline == 0
        || args.step == 0
        || args.connections == 0
    {
        bail!("--namespaces, --urls, --pipeline, --connections and --step must be at least 1");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.connections.min(2))
        .enable_all()
        .build()?;
    runtime.block_on(drive(Arc::new(args)))
}

/// The command for namespace `i`: a write, or with `check` a lookup.
fn command(out: &mut Vec<u8>, args: &Args, i: u64, check: bool) {
    let key = if args.redis { format!("crawl:{i}:visited") } else { format!("job:{i}") };
    let urls: Vec<String> = (0..args.urls)
        .map(|j| format!("https://h{}.example/crawl/{i}/page-{j}", i % 1000))
        .collect();
    let verb: &[u8] = match (args.redis, check) {
        (false, false) => b"URL.SEEN",
        (false, true) => b"URL.CHECK",
        (true, false) => b"SADD",
        (true, true) => b"SMISMEMBER",
    };
    let mut parts: Vec<&[u8]> = vec![verb, key.as_bytes()];
    parts.extend(urls.iter().map(String::as_bytes));
    encode(out, &parts);
}

/// Resident memory and open descriptors of `pid`.
fn process(pid: Option<u32>) -> (Option<u64>, Option<usize>) {
    let Some(pid) = pid else { return (None, None) };
    let rss = std::fs::read_to_string(format!("/proc/{pid}/status")).ok().and_then(|s| {
        let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
        Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
    });
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok().map(Iterator::count);
    (rss, fds)
}

/// CPU time `pid` has used (user and system, all its threads), in microseconds.
fn cpu_micros(pid: Option<u32>) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid?)).ok()?;
    // Fields after the command name (which may hold spaces, in parentheses): utime and stime
    // are the 12th and 13th, in clock ticks.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
    let ticks = fields.next()?.parse::<u64>().ok()? + fields.next()?.parse::<u64>().ok()?;
    #[expect(unsafe_code, reason = "sysconf is a foreign function")]
    // SAFETY: sysconf reads a constant of the system; it has no preconditions.
    let clock_ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let per_second = u64::try_from(clock_ticks).ok()?.max(1);
    Some(ticks * 1_000_000 / per_second)
}

/// What the connections share: the namespaces answered so far, and the step being timed.
struct Progress {
    done: AtomicU64,
    not_seen: AtomicU64,
    base_rss: Option<u64>,
    step: Mutex<Timing>,
}

/// The step under way, and the tenths of it done so far.
struct Timing {
    /// When the step began, the count it began at, and the server's CPU time then.
    started: Instant,
    from: u64,
    cpu_from: Option<u64>,
    /// When the tenth of the step under way began, and the count it began at.
    part_started: Instant,
    part_from: u64,
    /// The rates of the step's tenths done so far.
    part_rates: Vec<f64>,
}

impl Timing {
    fn new(now: Instant, from: u64, cpu_from: Option<u64>) -> Self {
        Self {
            started: now,
            from,
            cpu_from,
            part_started: now,
            part_from: from,
            part_rates: vec![],
        }
    }
}

/// `n` namespaces over the time since `since`, per second.
fn rate(n: u64, since: Instant) -> f64 {
    n as f64 / since.elapsed().as_secs_f64().max(1e-9)
}

/// The median of `rates` (sorted here), `None` if it is empty.
fn median(rates: &mut [f64]) -> Option<f64> {
    rates.sort_by(f64::total_cmp);
    let mid = rates.len() / 2;
    match rates.len() {
        0 => None,
        n if n % 2 == 1 => Some(rates[mid]),
        _ => Some((rates[mid - 1] + rates[mid]) / 2.0),
    }
}

impl Progress {
    /// Counts `n` more namespaces answered, and prints the steps they complete.
    fn add(&self, args: &Args, n: u64) -> anyhow::Result<()> {
        let before = self.done.fetch_add(n, Ordering::SeqCst);
        let done = before + n;
        let part = (args.step / 10).max(1);
        if done / part == before / part && done != args.namespaces {
            return Ok(());
        }
        let mut timing = self.step.lock().unwrap_or_else(|e| e.into_inner());
        // A tenth of the step ends here: its rate joins the step's.
        let part_rate = rate(done - timing.part_from, timing.part_started);
        timing.part_rates.push(part_rate);
        timing.part_started = Instant::now();
        timing.part_from = done;
        if done / args.step == before / args.step && done != args.namespaces {
            return Ok(());
        }
        let (rss, fds) = process(args.server_pid);
        let cpu = cpu_micros(args.server_pid);
        let report = Step {
            namespaces: done,
            per_second: rate(done - timing.from, timing.started),
            median_per_second: median(&mut timing.part_rates),
            rss_bytes: rss,
            rss_per_namespace: rss
                .zip(self.base_rss)
                .map(|(r, b)| r.saturating_sub(b) as f64 / done as f64),
            open_fds: fds,
            server_cpu_us_per_namespace: cpu
                .zip(timing.cpu_from)
                .map(|(c, f)| c.saturating_sub(f) as f64 / (done - timing.from).max(1) as f64),
        };
        *timing = Timing::new(Instant::now(), done, cpu);
        if args.json {
            println!("{}", serde_json::to_string(&report)?);
        } else {
            println!(
                "{:>10} namespaces  {:>9.0}/s (median of tenths {:>9.0}/s)  RSS {:>8.1} MiB  \
                 {:>7} B/namespace  {:>6} fds  {:>6} µs CPU/namespace",
                report.namespaces,
                report.per_second,
                report.median_per_second.unwrap_or(f64::NAN),
                report.rss_bytes.map_or(f64::NAN, |r| r as f64 / (1 << 20) as f64),
                report.rss_per_namespace.map_or("-".into(), |b| format!("{b:.0}")),
                report.open_fds.map_or("-".into(), |f| f.to_string()),
                report.server_cpu_us_per_namespace.map_or("-".into(), |c| format!("{c:.2}")),
            );
        }
        Ok(())
    }
}

async fn drive(args: Arc<Args>) -> anyhow::Result<()> {
    let addr = resolve(&args.addr, args.allow_remote).await?;
    if !args.json {
        println!(
            "# {}; {} URLs per namespace, {} connection(s)",
            machine(),
            args.urls,
            args.connections
        );
    }
    let mut conns = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        let conn = Conn::connect(addr, args.password.as_deref())
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        conns.push(conn);
    }
    let progress = Arc::new(Progress {
        done: AtomicU64::new(0),
        not_seen: AtomicU64::new(0),
        base_rss: process(args.server_pid).0,
        step: Mutex::new(Timing::new(Instant::now(), 0, cpu_micros(args.server_pid))),
    });
    let started = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(c, conn)| tokio::spawn(send(Arc::clone(&args), c, conn, Arc::clone(&progress))))
        .collect();
    for task in tasks {
        task.await??;
    }
    let total = started.elapsed().as_secs_f64();
    let not_seen = progress.not_seen.load(Ordering::SeqCst);
    if args.check {
        println!(
            "checked {} namespaces ({} URLs) in {total:.1} s: {not_seen} not seen",
            args.namespaces,
            args.namespaces * args.urls as u64
        );
        if not_seen > 0 {
            bail!("{not_seen} recorded URLs answered not seen");
        }
    } else if !args.json {
        println!(
            "created {} namespaces in {total:.1} s ({:.0}/s)",
            args.namespaces,
            args.namespaces as f64 / total
        );
    }
    Ok(())
}

/// Connection `c`'s share: blocks `c`, `c + connections`, … of `--pipeline` namespaces, each
/// written before the replies to the one before it are read.
async fn send(
    args: Arc<Args>,
    c: usize,
    mut conn: Conn,
    progress: Arc<Progress>,
) -> anyhow::Result<()> {
    use tokio::io::AsyncWriteExt as _;
    let block = args.pipeline as u64;
    let blocks = (c as u64..args.namespaces.div_ceil(block)).step_by(args.connections);
    let mut out = Vec::with_capacity(args.pipeline * 64 * (args.urls + 1));
    // The block written and not yet answered: its first namespace and its length.
    let mut unanswered: Option<(u64, u64)> = None;
    for b in blocks.map(Some).chain([None]) {
        if let Some(b) = b {
            let first = b * block;
            let n = block.min(args.namespaces - first);
            out.clear();
            for i in first..first + n {
                command(&mut out, &args, i, args.check);
            }
            // Two blocks' replies fit the socket buffers, so this write cannot wait on a
            // server blocked on replies not read yet.
            conn.stream.write_all(&out).await?;
            if let Some(last) = unanswered.replace((first, n)) {
                answer(&args, &mut conn, &progress, last).await?;
            }
        } else if let Some(last) = unanswered.take() {
            answer(&args, &mut conn, &progress, last).await?;
        }
    }
    Ok(())
}

/// Reads the replies to the block of `n` namespaces from `first`.
async fn answer(
    args: &Args,
    conn: &mut Conn,
    progress: &Progress,
    (first, n): (u64, u64),
) -> anyhow::Result<()> {
    if args.check {
        let zeros = conn.count_zeros(n as usize).await?;
        progress.not_seen.fetch_add(zeros, Ordering::SeqCst);
    } else {
        let errors = conn.replies(n as usize).await?;
        if errors > 0 {
            bail!("{errors} of the commands for namespaces {first}..{} failed", first + n);
        }
    }
    progress.add(args, n)
}

/// Draws the saved runs `series` (`name=file.jsonl`) into `dir`.
fn plot(dir: &std::path::Path, series: &[String]) -> anyhow::Result<()> {
    use crate::plot::{Series, line_chart};
    let mut rss = Vec::new();
    let mut rate = Vec::new();
    for (i, spec) in series.iter().enumerate() {
        let Some((name, file)) = spec.split_once('=') else {
            bail!("--series {spec:?}: expected name=file.jsonl");
        };
        let text = std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?;
        let steps: Vec<Step> = text
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()
            .with_context(|| format!("parsing {file}"))?;
        let mib =
            |s: &Step| s.rss_bytes.map(|b| (s.namespaces as f64, b as f64 / (1 << 20) as f64));
        rss.push(Series::line(name.to_owned(), i, steps.iter().filter_map(mib).collect()));
        let per_second = steps.iter().map(|s| (s.namespaces as f64, s.per_second)).collect();
        rate.push(Series::line(name.to_owned(), i, per_second));
    }
    std::fs::create_dir_all(dir)?;
    line_chart(
        &dir.join("namespaces-rss.svg"),
        "Server RSS against namespaces (10 URLs each)",
        "namespaces created",
        "resident memory (MiB)",
        &rss,
    )?;
    line_chart(
        &dir.join("namespaces-rate.svg"),
        "Namespaces created per second, per tenth of the run",
        "namespaces created",
        "namespaces per second",
        &rate,
    )
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_rates() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }
}
