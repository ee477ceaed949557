//! The soak mode of `urlseen bench server` (`--connections N --duration S`): many connections at
//! a steady rate for a while, sampling the commands, errors and the server's resident memory.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use serde::Serialize;
use urlseen_server::Frame;

use super::{Args, Conn, generate, machine, resolve};

#[derive(Debug, Default)]
struct SoakCounters {
    commands: AtomicU64,
    errors: AtomicU64,
    io_errors: AtomicU64,
    connected: AtomicU64,
}

#[derive(Debug, Serialize)]
struct SoakSample {
    t_s: u64,
    commands: u64,
    errors: u64,
    io_errors: u64,
    connected: u64,
    server_clients: Option<u64>,
    rss_bytes: Option<u64>,
}

fn rss_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kb| kb * 1024)
}

fn info_field(frame: &Frame, field: &str) -> Option<u64> {
    let text = match frame {
        Frame::Bulk(b) | Frame::Verbatim { data: b, .. } => String::from_utf8_lossy(b).into_owned(),
        _ => return None,
    };
    text.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':')?.trim().parse().ok())
}

pub(super) async fn soak(args: &Args, connections: usize) -> anyhow::Result<()> {
    let addr = resolve(&args.addr, args.allow_remote).await?;
    let urls = Arc::new(generate(args.seed, args.urls));
    let counters = Arc::new(SoakCounters::default());
    let deadline = Instant::now() + Duration::from_secs(args.duration);
    let period = Duration::from_secs_f64(1.0 / f64::from(args.rate.max(1)));
    let ns: Arc<[u8]> = Arc::from(args.namespace.as_bytes());
    let password: Option<Arc<str>> = args.password.as_deref().map(Arc::from);
    eprintln!(
        "soak: {connections} connections × {} cmd/s for {} s on {addr}",
        args.rate, args.duration
    );
    let mut tasks = Vec::with_capacity(connections);
    for c in 0..connections {
        let (urls, counters, ns, password) =
            (urls.clone(), counters.clone(), ns.clone(), password.clone());
        tasks.push(tokio::spawn(async move {
            let mut next = c;
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut conn = None;
            while Instant::now() < deadline {
                tick.tick().await;
                if conn.is_none() {
                    match Conn::connect(addr, password.as_deref()).await {
                        Ok(c) => {
                            counters.connected.fetch_add(1, Relaxed);
                            conn = Some(c);
                        }
                        Err(_) => {
                            counters.io_errors.fetch_add(1, Relaxed);
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            continue;
                        }
                    }
                }
                let Some(c) = conn.as_mut() else { continue };
                let url = &urls[next % urls.len()];
                next += connections;
                match c.call(&[b"URL.SEEN", &ns, url]).await {
                    Ok(reply) => {
                        counters.commands.fetch_add(1, Relaxed);
                        let failed = match &reply {
                            Frame::Array(items) => items.iter().any(Frame::is_error),
                            other => other.is_error(),
                        };
                        if failed {
                            counters.errors.fetch_add(1, Relaxed);
                        }
                    }
                    Err(_) => {
                        counters.io_errors.fetch_add(1, Relaxed);
                        counters.connected.fetch_sub(1, Relaxed);
                        conn = None;
                    }
                }
            }
        }));
    }
    let mut control = Conn::connect(addr, args.password.as_deref()).await?;
    let start = Instant::now();
    let mut samples = Vec::new();
    let interval = Duration::from_secs(args.interval.max(1));
    if !args.json {
        println!(
            "{:>6} {:>10} {:>8} {:>9} {:>10} {:>10} {:>10}",
            "t s", "commands", "errors", "io errs", "connected", "srv clients", "rss MiB"
        );
    }
    loop {
        let done = Instant::now() >= deadline;
        let info = control.call(&[b"INFO", b"clients", b"memory"]).await.ok();
        let rss = match args.server_pid {
            Some(pid) => rss_of(pid),
            None => info.as_ref().and_then(|i| info_field(i, "used_memory_rss")),
        };
        let sample = SoakSample {
            t_s: start.elapsed().as_secs(),
            commands: counters.commands.load(Relaxed),
            errors: counters.errors.load(Relaxed),
            io_errors: counters.io_errors.load(Relaxed),
            connected: counters.connected.load(Relaxed),
            server_clients: info.as_ref().and_then(|i| info_field(i, "connected_clients")),
            rss_bytes: rss,
        };
        if !args.json {
            println!(
                "{:>6} {:>10} {:>8} {:>9} {:>10} {:>10} {:>10}",
                sample.t_s,
                sample.commands,
                sample.errors,
                sample.io_errors,
                sample.connected,
                sample.server_clients.map_or("-".into(), |n| n.to_string()),
                sample.rss_bytes.map_or("-".into(), |b| format!("{:.1}", b as f64 / 1048576.0)),
            );
        }
        samples.push(sample);
        if done {
            break;
        }
        tokio::time::sleep(
            interval.min(
                deadline.saturating_duration_since(Instant::now()) + Duration::from_millis(10),
            ),
        )
        .await;
    }
    for task in tasks {
        let _ = task.await;
    }
    let last = samples.last();
    let rss: Vec<u64> = samples.iter().filter_map(|s| s.rss_bytes).collect();
    #[derive(Serialize)]
    struct SoakReport<'a> {
        machine: String,
        connections: usize,
        rate_per_connection: u32,
        seconds: u64,
        commands: u64,
        errors: u64,
        io_errors: u64,
        rss_first_bytes: Option<u64>,
        rss_last_bytes: Option<u64>,
        rss_max_bytes: Option<u64>,
        samples: &'a [SoakSample],
    }
    let report = SoakReport {
        machine: machine(),
        connections,
        rate_per_connection: args.rate,
        seconds: args.duration,
        commands: last.map_or(0, |s| s.commands),
        errors: last.map_or(0, |s| s.errors),
        io_errors: last.map_or(0, |s| s.io_errors),
        rss_first_bytes: rss.first().copied(),
        rss_last_bytes: rss.last().copied(),
        rss_max_bytes: rss.iter().max().copied(),
        samples: &samples,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "soak: {} commands, {} error replies, {} connection errors; RSS first {} last {} max {}",
            report.commands,
            report.errors,
            report.io_errors,
            mib(report.rss_first_bytes),
            mib(report.rss_last_bytes),
            mib(report.rss_max_bytes)
        );
    }
    Ok(())
}

fn mib(b: Option<u64>) -> String {
    b.map_or("-".into(), |b| format!("{:.1} MiB", b as f64 / 1048576.0))
}
