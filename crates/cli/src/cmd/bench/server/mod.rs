//! `urlseen bench server`: a load generator for `urlseen serve`, and the comparison with what
//! scrapy-redis does on Redis.
//!
//! ```text
//! urlseen bench server --addr 127.0.0.1:6380 --clients 50 --pipeline 64 --urls 1e6 \
//!     --compare-redis 127.0.0.1:6390
//! urlseen bench server --addr 127.0.0.1:6380 --connections 1000 --duration 60 --server-pid 4242
//! ```
//!
//! **Throughput.** `--urls` distinct generated URLs are split over `--clients` connections;
//! each sends `URL.SEEN ns url` (one URL per command, or `--batch` URLs) in pipelines of
//! `--pipeline` commands, waits for the replies, sends the next. Reported: URLs per second over
//! the whole run, and the p50/p99/max round trip of one pipeline. With `--compare-redis` the
//! same clients then send `SADD key <fingerprint>` for the same URLs with the same pipelining:
//! what scrapy-redis' `RFPDupeFilter` does (SHA-1 of the request, 20 raw bytes here). The
//! fingerprints are computed before the clock starts, so Redis is not charged for the
//! canonicalization and hashing its clients would do, while urlseen canonicalizes on the
//! server: the ratio is conservative.
//!
//! **Soak.** `--connections N --duration S`: N connections each send `URL.SEEN` at `--rate`
//! commands per second for S seconds, over a pool of `--urls` URLs (so that the set stops
//! growing once every URL was seen). Every `--interval` seconds it prints the commands, errors
//! and the server's resident memory (`/proc/PID/status` with `--server-pid`, else `INFO
//! memory`'s `used_memory_rss`).
//!
//! Loads go to loopback addresses only unless `--allow-remote` is given.

use std::io::Cursor;
use std::net::SocketAddr;
use std::sync::Arc;

use std::time::Instant;

use anyhow::{Context as _, bail};
use serde::Serialize;
use sha1::{Digest, Sha1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use urlseen_server::{Frame, FrameError};

use crate::args::parse_count;

pub mod namespaces;
mod soak;

use soak::soak;

/// Load-test `urlseen serve` (URL.SEEN) and compare with Redis SADD, or soak it.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The urlseen RESP server.
    #[arg(long, default_value = "127.0.0.1:6380")]
    addr: String,
    /// Concurrent connections.
    #[arg(long, default_value_t = 50)]
    clients: usize,
    /// Commands per pipeline.
    #[arg(long, default_value_t = 64)]
    pipeline: usize,
    /// Distinct URLs to send (the pool size in soak mode).
    #[arg(long, default_value = "1000000", value_parser = parse_count)]
    urls: u64,
    /// URLs per URL.SEEN command.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Namespace to load (dropped and re-created first).
    #[arg(long, default_value = "bench")]
    namespace: String,
    /// Also run scrapy-redis' SADD against this Redis server, and print the ratio.
    #[arg(long, value_name = "ADDR")]
    compare_redis: Option<String>,
    /// The Redis set to SADD into (deleted first).
    #[arg(long, default_value = "bench:dupefilter")]
    redis_key: String,
    /// AUTH password of the urlseen server.
    #[arg(long)]
    password: Option<String>,
    /// Threads of the load generator.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Seed of the generated URLs.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Repeat the measurement, alternating urlseen and Redis, and report the medians (so that a
    /// change in the machine's load does not favour whichever ran first).
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Soak mode: this many concurrent connections.
    #[arg(long)]
    connections: Option<usize>,
    /// Soak mode: seconds to run.
    #[arg(long, default_value_t = 60)]
    duration: u64,
    /// Soak mode: commands per second per connection.
    #[arg(long, default_value_t = 10)]
    rate: u32,
    /// Soak mode: seconds between reports.
    #[arg(long, default_value_t = 5)]
    interval: u64,
    /// The urlseen server's process id: the soak reads its memory from /proc/PID/status, the
    /// throughput run its CPU time from /proc/PID/stat (CPU µs per URL, which the machine's
    /// other load does not skew the way it skews throughput).
    #[arg(long)]
    server_pid: Option<u32>,
    /// The Redis server's process id, for its CPU time per SADD.
    #[arg(long)]
    redis_pid: Option<u32>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Allow a server address that is not loopback.
    #[arg(long)]
    allow_remote: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.clients == 0 || args.pipeline == 0 || args.batch == 0 || args.urls == 0 {
        bail!("--clients, --pipeline, --batch and --urls must be at least 1");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads.max(1))
        .enable_all()
        .build()?;
    runtime.block_on(async {
        match args.connections {
            Some(n) => soak(&args, n).await,
            None => throughput(&args).await,
        }
    })
}

async fn resolve(addr: &str, allow_remote: bool) -> anyhow::Result<SocketAddr> {
    let found: Vec<SocketAddr> =
        tokio::net::lookup_host(addr).await.with_context(|| format!("resolving {addr}"))?.collect();
    let Some(first) = found.first().copied() else { bail!("{addr} resolves to nothing") };
    if !allow_remote && !found.iter().all(|a| a.ip().is_loopback()) {
        bail!("{addr} is not a loopback address; pass --allow-remote to load another machine");
    }
    Ok(first)
}

/// A minimal pipelining RESP client.
struct Conn {
    stream: TcpStream,
    input: Vec<u8>,
    start: usize,
}

/// Appends a RESP array of bulk strings to `out`.
fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    use std::io::Write as _;
    let _ = write!(out, "*{}\r\n", args.len());
    for a in args {
        let _ = write!(out, "${}\r\n", a.len());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

impl Conn {
    async fn connect(addr: SocketAddr, password: Option<&str>) -> std::io::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let mut conn = Conn { stream, input: Vec::with_capacity(64 << 10), start: 0 };
        if let Some(password) = password {
            let reply = conn.call(&[b"AUTH", password.as_bytes()]).await?;
            if reply.is_error() {
                return Err(std::io::Error::other(format!("AUTH failed: {reply:?}")));
            }
        }
        Ok(conn)
    }

    async fn call(&mut self, args: &[&[u8]]) -> std::io::Result<Frame> {
        let mut out = Vec::new();
        encode(&mut out, args);
        self.stream.write_all(&out).await?;
        loop {
            let mut cur = Cursor::new(&self.input[self.start..]);
            match Frame::parse(&mut cur) {
                Ok(frame) => {
                    self.start += cur.position() as usize;
                    return Ok(frame);
                }
                Err(FrameError::Incomplete) => self.fill().await?,
                Err(e) => return Err(std::io::Error::other(format!("bad reply: {e}"))),
            }
        }
    }

    async fn fill(&mut self) -> std::io::Result<()> {
        if self.start > 0 && self.start == self.input.len() {
            self.input.clear();
            self.start = 0;
        } else if self.start > (1 << 20) {
            self.input.drain(..self.start);
            self.start = 0;
        }
        if self.input.capacity() - self.input.len() < 16 << 10 {
            self.input.reserve(64 << 10);
        }
        let n = self.stream.read_buf(&mut self.input).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        Ok(())
    }

    /// Reads `n` replies, arrays of integers (`URL.CHECK`, `SMISMEMBER`); returns how many of
    /// their integers are 0. An error reply is an error.
    async fn count_zeros(&mut self, n: usize) -> std::io::Result<u64> {
        let mut zeros = 0;
        for _ in 0..n {
            let frame = loop {
                let mut cur = Cursor::new(&self.input[self.start..]);
                match Frame::parse(&mut cur) {
                    Ok(frame) => {
                        self.start += cur.position() as usize;
                        break frame;
                    }
                    Err(FrameError::Incomplete) => self.fill().await?,
                    Err(e) => return Err(std::io::Error::other(format!("bad reply: {e}"))),
                }
            };
            let Frame::Array(items) = frame else {
                return Err(std::io::Error::other(format!("not an array: {frame:?}")));
            };
            zeros += items.iter().filter(|f| integer(f) == Some(0)).count() as u64;
        }
        Ok(zeros)
    }

    /// Reads `n` replies; returns how many were (or held) errors.
    async fn replies(&mut self, n: usize) -> std::io::Result<usize> {
        let mut errors = 0;
        let mut done = 0;
        while done < n {
            let mut cur = Cursor::new(&self.input[self.start..]);
            match Frame::check(&mut cur) {
                Ok(()) => {
                    let end = self.start + cur.position() as usize;
                    let span = &self.input[self.start..end];
                    if span.first() == Some(&b'-') || span.windows(2).any(|w| w == b"\n-") {
                        errors += 1;
                    }
                    self.start = end;
                    done += 1;
                }
                Err(FrameError::Incomplete) => self.fill().await?,
                Err(e) => return Err(std::io::Error::other(format!("bad reply: {e}"))),
            }
        }
        Ok(errors)
    }
}

fn integer(frame: &Frame) -> Option<i64> {
    match frame {
        Frame::Integer(n) => Some(*n),
        _ => None,
    }
}

/// One client's pre-encoded commands: contiguous bytes, cut at pipeline boundaries.
struct Script {
    bytes: Vec<u8>,
    /// (end offset, commands) of each pipeline.
    windows: Vec<(usize, usize)>,
    items: u64,
}

fn scripts(
    items: &[Vec<u8>],
    clients: usize,
    pipeline: usize,
    per_command: usize,
    command: impl Fn(&mut Vec<u8>, &[Vec<u8>]) + Sync,
) -> Vec<Script> {
    let share = items.len().div_ceil(clients);
    items
        .chunks(share.max(1))
        .map(|mine| {
            let mut bytes = Vec::with_capacity(mine.len() * 100);
            let mut windows = Vec::new();
            for window in mine.chunks(pipeline * per_command) {
                let mut commands = 0;
                for group in window.chunks(per_command) {
                    command(&mut bytes, group);
                    commands += 1;
                }
                windows.push((bytes.len(), commands));
            }
            Script { bytes, windows, items: mine.len() as u64 }
        })
        .collect()
}

#[derive(Debug, Serialize)]
struct LoadReport {
    target: String,
    command: String,
    clients: usize,
    pipeline: usize,
    items: u64,
    seconds: f64,
    items_per_sec: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    errors: u64,
    /// CPU time the server process used during the run, per item (given its pid).
    server_cpu_us_per_item: Option<f64>,
}

/// User + system CPU seconds of a process so far, from /proc/PID/stat (clock ticks of 1/100 s,
/// Linux's USER_HZ).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

async fn load(
    addr: SocketAddr,
    password: Option<&str>,
    scripts: &Arc<Vec<Script>>,
    pipeline: usize,
    target: &str,
    command: &str,
    pid: Option<u32>,
) -> anyhow::Result<LoadReport> {
    let clients = scripts.len();
    let mut conns = Vec::with_capacity(clients);
    for _ in 0..clients {
        conns.push(
            Conn::connect(addr, password).await.with_context(|| format!("connecting to {addr}"))?,
        );
    }
    let items: u64 = scripts.iter().map(|s| s.items).sum();
    let barrier = Arc::new(tokio::sync::Barrier::new(clients + 1));
    let mut tasks = Vec::with_capacity(clients);
    for (i, mut conn) in conns.into_iter().enumerate() {
        let barrier = barrier.clone();
        let scripts = scripts.clone();
        tasks.push(tokio::spawn(async move {
            let Some(script) = scripts.get(i) else { return Ok((Vec::new(), 0)) };
            barrier.wait().await;
            let mut latencies = Vec::with_capacity(script.windows.len());
            let mut errors = 0u64;
            let mut from = 0;
            for &(to, commands) in &script.windows {
                let t0 = Instant::now();
                conn.stream.write_all(&script.bytes[from..to]).await?;
                errors += conn.replies(commands).await? as u64;
                latencies.push(t0.elapsed().as_micros() as u64);
                from = to;
            }
            Ok::<_, std::io::Error>((latencies, errors))
        }));
    }
    barrier.wait().await;
    let cpu_before = pid.and_then(cpu_seconds);
    let start = Instant::now();
    let mut latencies = Vec::new();
    let mut errors = 0;
    for task in tasks {
        let (l, e) = task.await?.context("a client failed")?;
        latencies.extend(l);
        errors += e;
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu = cpu_before.zip(pid.and_then(cpu_seconds)).map(|(a, b)| b - a);
    latencies.sort_unstable();
    let pct = |p: f64| {
        let i = ((latencies.len() as f64 - 1.0) * p).round() as usize;
        latencies.get(i).copied().unwrap_or(0) as f64 / 1000.0
    };
    Ok(LoadReport {
        target: target.to_owned(),
        command: command.to_owned(),
        clients,
        pipeline,
        items,
        seconds,
        items_per_sec: items as f64 / seconds,
        p50_ms: pct(0.5),
        p99_ms: pct(0.99),
        max_ms: pct(1.0),
        errors,
        server_cpu_us_per_item: cpu.map(|s| s * 1e6 / items as f64),
    })
}

fn generate(seed: u64, n: u64) -> Vec<Vec<u8>> {
    let mut generator = urlseen_corpus::Generator::distinct(seed);
    let mut url = String::new();
    (0..n)
        .map(|_| {
            generator.next_into(&mut url);
            url.as_bytes().to_vec()
        })
        .collect()
}

#[derive(Debug, Serialize)]
struct Comparison {
    machine: String,
    /// Every run, in the order they ran.
    runs: Vec<LoadReport>,
    urlseen_count: Option<i64>,
    redis_count: Option<i64>,
    /// Median items/s of the URL.SEEN runs.
    urlseen_items_per_sec: f64,
    /// Median items/s of the SADD runs.
    redis_items_per_sec: Option<f64>,
    /// The ratio of the medians.
    ratio: Option<f64>,
}

fn median(mut xs: Vec<f64>) -> Option<f64> {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => xs.get(n / 2).copied(),
        _ => Some((xs[n / 2 - 1] + xs[n / 2]) / 2.0),
    }
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{cpus} CPUs, {model}")
}

async fn throughput(args: &Args) -> anyhow::Result<()> {
    let addr = resolve(&args.addr, args.allow_remote).await?;
    let redis = match &args.compare_redis {
        Some(a) => Some(resolve(a, args.allow_remote).await?),
        None => None,
    };
    eprintln!("generating {} URLs…", args.urls);
    let urls = generate(args.seed, args.urls);
    let ns = args.namespace.as_bytes().to_vec();

    let mut control = Conn::connect(addr, args.password.as_deref()).await?;
    let capacity = args.urls.to_string();
    let clients = args.clients.min(urls.len());
    let urlseen_scripts =
        Arc::new(scripts(&urls, clients, args.pipeline, args.batch, |out, group| {
            let mut argv: Vec<&[u8]> = Vec::with_capacity(group.len() + 2);
            argv.push(b"URL.SEEN");
            argv.push(&ns);
            argv.extend(group.iter().map(Vec::as_slice));
            encode(out, &argv);
        }));
    let command = if args.batch == 1 {
        "URL.SEEN ns url".to_owned()
    } else {
        format!("URL.SEEN ns url×{}", args.batch)
    };
    // What scrapy-redis stores: the request fingerprint, a SHA-1 (20 bytes here).
    let key = args.redis_key.as_bytes().to_vec();
    let redis_scripts = redis.map(|_| {
        let fingerprints: Vec<Vec<u8>> = urls.iter().map(|u| Sha1::digest(u).to_vec()).collect();
        Arc::new(scripts(&fingerprints, clients, args.pipeline, 1, |out, group| {
            for fp in group {
                encode(out, &[b"SADD", &key, fp]);
            }
        }))
    });
    drop(urls);

    let mut runs = Vec::new();
    let (mut urlseen_count, mut redis_count) = (None, None);
    for round in 1..=args.rounds.max(1) {
        control.call(&[b"DEL", &ns]).await?;
        let reply = control.call(&[b"URL.RESERVE", &ns, b"CAPACITY", capacity.as_bytes()]).await?;
        if reply.is_error() {
            bail!("URL.RESERVE failed: {reply:?}");
        }
        eprintln!("round {round}: urlseen {addr}: URL.SEEN × {} …", args.urls);
        let report = load(
            addr,
            args.password.as_deref(),
            &urlseen_scripts,
            args.pipeline,
            &args.addr,
            &command,
            args.server_pid,
        )
        .await?;
        let info = control.call(&[b"URL.INFO", &ns]).await?;
        urlseen_count = match &info {
            Frame::Array(kv) | Frame::Set(kv) => kv
                .chunks(2)
                .find(|p| p.first() == Some(&Frame::bulk("count")))
                .and_then(|p| p.get(1))
                .and_then(integer),
            _ => None,
        };
        runs.push(report);
        if let (Some(redis_addr), Some(redis_scripts)) = (redis, &redis_scripts) {
            let mut rc = Conn::connect(redis_addr, None).await.context("connecting to Redis")?;
            rc.call(&[b"DEL", &key]).await?;
            eprintln!("round {round}: redis {redis_addr}: SADD × {} …", args.urls);
            let target = args.compare_redis.as_deref().unwrap_or("");
            let report = load(
                redis_addr,
                None,
                redis_scripts,
                args.pipeline,
                target,
                "SADD key sha1",
                args.redis_pid,
            )
            .await?;
            redis_count = integer(&rc.call(&[b"SCARD", &key]).await?);
            rc.call(&[b"DEL", &key]).await?;
            runs.push(report);
        }
    }
    control.call(&[b"DEL", &ns]).await?;
    let per_sec = |cmd: &str| {
        median(
            runs.iter().filter(|r| r.command.starts_with(cmd)).map(|r| r.items_per_sec).collect(),
        )
    };
    let urlseen_items_per_sec = per_sec("URL.SEEN").unwrap_or(0.0);
    let redis_items_per_sec = per_sec("SADD");
    let cmp = Comparison {
        machine: machine(),
        ratio: redis_items_per_sec.map(|r| urlseen_items_per_sec / r),
        runs,
        urlseen_count,
        redis_count,
        urlseen_items_per_sec,
        redis_items_per_sec,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&cmp)?);
        return Ok(());
    }
    println!("machine: {}", cmp.machine);
    println!(
        "{:<34} {:>7} {:>8} {:>10} {:>12} {:>9} {:>9} {:>9} {:>7} {:>11}",
        "target / command",
        "clients",
        "pipeline",
        "items",
        "items/s",
        "p50 ms",
        "p99 ms",
        "max ms",
        "errors",
        "cpu µs/item"
    );
    for r in &cmp.runs {
        println!(
            "{:<34} {:>7} {:>8} {:>10} {:>12.0} {:>9.2} {:>9.2} {:>9.2} {:>7} {:>11}",
            format!("{} {}", r.target, r.command),
            r.clients,
            r.pipeline,
            r.items,
            r.items_per_sec,
            r.p50_ms,
            r.p99_ms,
            r.max_ms,
            r.errors,
            r.server_cpu_us_per_item.map_or("-".into(), |c| format!("{c:.2}"))
        );
    }
    if let Some(n) = cmp.urlseen_count {
        println!("urlseen recorded {n} distinct URLs (URL.INFO count)");
    }
    if let Some(n) = cmp.redis_count {
        println!("redis recorded {n} fingerprints (SCARD)");
    }
    if let (Some(redis), Some(ratio)) = (cmp.redis_items_per_sec, cmp.ratio) {
        println!(
            "median items/s: URL.SEEN {:.0}, SADD {redis:.0}; URL.SEEN / SADD throughput: {ratio:.2}×",
            cmp.urlseen_items_per_sec
        );
    }
    Ok(())
}
