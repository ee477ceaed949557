//! `urlseen bench redis`: seed 000's Fig. 9 on Redis. H = 1, c = 3: one leaf on each of three
//! Redis servers, one multithreaded crawler process, 1,000,000 URLs per run.
//!
//! ```text
//! urlseen bench redis --nodes 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003 \
//!     --threads 4 --batch 300,1000,3000,10000 --urls 1e6
//! ```
//!
//! The URLs are generated before the clock starts (the crawler's link stream: `urlseen-corpus`,
//! 30% repeats); each thread then takes `--batch` URLs at a time, canonicalizes and hashes them
//! and asks the namespace with one `seen_fingerprints` call (one pipelined round trip per node
//! with one script per leaf). Reported per batch size: URLs per second over the run (the
//! median of `--repeat` runs, each on a freshly created namespace), the ratio to the paper's
//! 1.5 × 10⁴ URLs/s, and the median `PING` round trip to each node, measured before the runs,
//! so the figure can be projected onto another network.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde::Serialize;
use urlseen_corpus::Generator;
use urlseen_engine::{NamespaceOptions, SeenSet, SplitMode, SplitPolicy};
use urlseen_filter::plan;
use urlseen_redis::{RedisDb, RedisMode, RedisOptions};

use crate::args::{parse_count, parse_fpr};

/// The paper's figure: about 1.5 × 10⁴ URLs/s (seed 000, Fig. 9).
const PAPER_URLS_PER_S: f64 = 1.5e4;

/// Reproduce seed 000's Fig. 9: throughput of a DSBF with H=1, c=3 on three Redis servers.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The Redis servers, one leaf on each (three for the paper's setup).
    #[arg(long, value_delimiter = ',', required = true)]
    nodes: Vec<String>,
    /// The servers are Redis Cluster seed nodes (the leaves go where their slots are).
    #[arg(long)]
    cluster: bool,
    /// Crawler threads.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Insert round trips the process keeps in flight per leaf.
    #[arg(long, default_value_t = 1)]
    inflight: usize,
    /// URLs per request; a list runs each size (the paper used 300).
    #[arg(long, value_delimiter = ',', default_value = "300")]
    batch: Vec<usize>,
    /// URLs per run.
    #[arg(long, default_value = "1000000", value_parser = parse_count)]
    urls: u64,
    /// False-positive bound of the leaves.
    #[arg(long, default_value = "0.01", value_parser = parse_fpr)]
    fpr: f64,
    /// Runs per batch size; the median is reported.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Seed of the generated URLs.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// The namespace (deleted and re-created before each run).
    #[arg(long, default_value = "bench-fig9")]
    namespace: String,
    /// PING samples per node for the round-trip time.
    #[arg(long, default_value_t = 1000)]
    ping_samples: usize,
    /// Allow servers that are not on a loopback address.
    #[arg(long)]
    allow_remote: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also run the paper's layout as a baseline: the leaf bitmaps in Redis, one pipelined
    /// `BITFIELD key SET u1 <pos> 1 …` per leaf per batch (k probes per URL, the old bits say
    /// seen), with no fingerprint log and no frozen check: an upper bound for any design that
    /// keeps the bits in Redis.
    #[arg(long)]
    compare_bitfield: bool,
}

#[derive(Debug, Serialize)]
struct Report {
    nodes: Vec<String>,
    mode: String,
    leaves: u32,
    leaf_bits: u64,
    threads: usize,
    inflight: usize,
    urls: u64,
    /// Distinct URLs in the stream (the generator's count): `distinct - new` are false positives.
    distinct: u64,
    rtt_median_us: Vec<f64>,
    rtt_p99_us: Vec<f64>,
    runs: Vec<Run>,
}

#[derive(Debug, Serialize)]
struct Run {
    batch: usize,
    /// URLs per second of every repetition, in order.
    samples: Vec<f64>,
    urls_per_s: f64,
    ratio_to_paper: f64,
    new: u64,
    recorded: u64,
    round_trips: u64,
    leaf_counts: Vec<u64>,
    /// `--compare-bitfield`: URLs/s of the bits-in-Redis baseline (median), and its new count.
    bitfield_urls_per_s: Option<f64>,
    bitfield_new: Option<u64>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.threads == 0 || args.urls == 0 || args.repeat == 0 || args.batch.contains(&0) {
        bail!("--threads, --urls, --repeat and --batch must be at least 1");
    }
    for node in &args.nodes {
        let host_port = node.trim_start_matches("redis://").trim_end_matches('/');
        let host = host_port.rsplit_once(':').map_or(host_port, |(h, _)| h);
        let local = host == "localhost"
            || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
        if !local && !args.allow_remote {
            bail!("{node} is not a loopback address; pass --allow-remote to load another machine");
        }
    }
    let mode = if args.cluster { RedisMode::Cluster } else { RedisMode::Auto };
    let db = RedisDb::open(RedisOptions {
        mode,
        inflight_per_leaf: args.inflight,
        ..RedisOptions::new(args.nodes.clone())
    })
    .context("connecting to redis")?;

    // H = 1, c = leaves: leaves sized so that `leaves` of them hold the run at the FPR bound.
    let leaves = if db.mode() == RedisMode::Nodes { args.nodes.len() as u64 } else { 3 };
    let (leaf_bits, _) = plan::blocked_bits(args.urls.div_ceil(leaves), args.fpr);
    let options = NamespaceOptions {
        capacity: args.urls,
        fpr: args.fpr,
        leaf_bits: Some(leaf_bits.max(urlseen_engine::MIN_LEAF_BITS)),
        split: SplitPolicy { mode: SplitMode::Never, ..SplitPolicy::default() },
        ..NamespaceOptions::default()
    };

    let pings = db.ping(args.ping_samples.max(1))?;
    let quantile = |v: &[Duration], q: f64| -> f64 {
        let mut us: Vec<f64> = v.iter().map(|d| d.as_secs_f64() * 1e6).collect();
        us.sort_by(f64::total_cmp);
        us[((us.len() - 1) as f64 * q).round() as usize]
    };
    eprintln!("generating {} URLs…", args.urls);
    let mut generator = Generator::new(args.seed);
    let urls: Arc<Vec<String>> = Arc::new(
        (0..args.urls)
            .map(|_| {
                let mut s = String::new();
                generator.next_into(&mut s);
                s
            })
            .collect(),
    );

    let mut report = Report {
        nodes: pings.iter().map(|(n, _)| n.clone()).collect(),
        mode: format!("{:?}", db.mode()).to_lowercase(),
        leaves: 0,
        leaf_bits: options.effective_leaf_bits(),
        threads: args.threads,
        inflight: args.inflight,
        urls: args.urls,
        distinct: generator.counts().1,
        rtt_median_us: pings.iter().map(|(_, v)| quantile(v, 0.5)).collect(),
        rtt_p99_us: pings.iter().map(|(_, v)| quantile(v, 0.99)).collect(),
        runs: Vec::new(),
    };
    for &batch in &args.batch {
        let mut samples = Vec::new();
        let mut last = None;
        for _ in 0..args.repeat {
            db.drop_namespace(&args.namespace)?;
            let ns = db.namespace(&args.namespace, options.clone())?;
            report.leaves = ns.params().initial_leaves;
            let next = Arc::new(AtomicUsize::new(0));
            let started = Instant::now();
            let handles: Vec<_> = (0..args.threads)
                .map(|_| {
                    let (ns, urls, next) = (Arc::clone(&ns), Arc::clone(&urls), Arc::clone(&next));
                    std::thread::spawn(move || -> anyhow::Result<u64> {
                        let mut fps = Vec::with_capacity(batch);
                        let mut seen = Vec::with_capacity(batch);
                        let mut new = 0;
                        loop {
                            let from = next.fetch_add(batch, Ordering::Relaxed);
                            let Some(chunk) = urls.get(from..urls.len().min(from + batch)) else {
                                return Ok(new);
                            };
                            fps.clear();
                            // The generator emits valid URLs; an invalid one would be skipped.
                            fps.extend(chunk.iter().filter_map(|u| ns.fingerprint(u).ok()));
                            seen.clear();
                            seen.resize(fps.len(), false);
                            ns.seen_fingerprints(&fps, &mut seen)?;
                            new += seen.iter().filter(|&&s| !s).count() as u64;
                        }
                    })
                })
                .collect();
            let mut new = 0;
            for h in handles {
                new += h.join().map_err(|_| anyhow::anyhow!("a crawler thread panicked"))??;
            }
            let elapsed = started.elapsed().as_secs_f64();
            samples.push(args.urls as f64 / elapsed);
            let stats = ns.stats()?;
            last = Some((new, stats));
        }
        let rate = median(&samples);
        let mut bitfield = None;
        if args.compare_bitfield {
            let mut b_samples = Vec::new();
            let mut b_new = 0;
            for _ in 0..args.repeat {
                let (rate, new) =
                    bitfield_run(&report.nodes, &urls, &options, batch, args.threads)?;
                b_samples.push(rate);
                b_new = new;
            }
            bitfield = Some((median(&b_samples), b_new));
        }
        let Some((new, stats)) = last else { bail!("no run") };
        report.runs.push(Run {
            batch,
            samples,
            urls_per_s: rate,
            ratio_to_paper: rate / PAPER_URLS_PER_S,
            new,
            recorded: stats.count,
            round_trips: stats.round_trips,
            leaf_counts: stats.leaves.iter().map(|&(_, n)| n).collect(),
            bitfield_urls_per_s: bitfield.map(|b| b.0),
            bitfield_new: bitfield.map(|b| b.1),
        });
    }
    db.drop_namespace(&args.namespace)?;

    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "Fig. 9 on redis ({}): H=1, c={} leaves of {} bits, {} threads, {} in flight per leaf, {} URLs per run ({} distinct)",
        report.mode,
        report.leaves,
        report.leaf_bits,
        report.threads,
        report.inflight,
        report.urls,
        report.distinct
    );
    for (node, (m, p)) in
        report.nodes.iter().zip(report.rtt_median_us.iter().zip(&report.rtt_p99_us))
    {
        println!("  {node}: PING round trip median {m:.0} µs, p99 {p:.0} µs");
    }
    println!(
        "{:>8} {:>12} {:>9} {:>9} {:>9} {:>12}",
        "batch", "URLs/s", "× paper", "new", "recorded", "round trips"
    );
    for r in &report.runs {
        println!(
            "{:>8} {:>12.0} {:>9.1} {:>9} {:>9} {:>12}",
            r.batch, r.urls_per_s, r.ratio_to_paper, r.new, r.recorded, r.round_trips
        );
    }
    for r in &report.runs {
        if let (Some(rate), Some(new)) = (r.bitfield_urls_per_s, r.bitfield_new) {
            println!(
                "  bits in redis (BITFIELD baseline), batch {}: {rate:.0} URLs/s ({:.1}× paper, {new} new); urlseen is {:.1}× faster",
                r.batch,
                rate / PAPER_URLS_PER_S,
                r.urls_per_s / rate
            );
        }
    }
    println!("leaf sizes (last run): {:?}", report.runs.last().map(|r| &r.leaf_counts));
    println!(
        "paper (seed 000, Fig. 9): about {PAPER_URLS_PER_S:.0} URLs/s at a 0.35–0.45 ms ping, 300 URLs per request"
    );
    Ok(())
}

fn median(samples: &[f64]) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// The bits-in-Redis baseline: one bitmap per node (`leaf i` on node `i`), each batch one
/// pipelined `BITFIELD … SET u1 …` per node with the k blocked-Bloom probes of its URLs.
/// Returns (URLs/s, new).
fn bitfield_run(
    nodes: &[String],
    urls: &Arc<Vec<String>>,
    options: &NamespaceOptions,
    batch: usize,
    threads: usize,
) -> anyhow::Result<(f64, u64)> {
    let (m, k) = (options.effective_leaf_bits(), {
        let (_, k) = plan::blocked_capacity(options.effective_leaf_bits(), options.fpr);
        k
    });
    let key = |i: usize| format!("urlseen-bench:bitfield:{i}");
    for (i, n) in nodes.iter().enumerate() {
        let mut c = redis::Client::open(n.as_str())?.get_connection()?;
        redis::cmd("DEL").arg(key(i)).exec(&mut c)?;
    }
    let fingerprinter = urlseen_engine::fingerprint::Fingerprinter::new(options);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let results: Vec<anyhow::Result<u64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (next, fingerprinter) = (Arc::clone(&next), &fingerprinter);
                scope.spawn(move || -> anyhow::Result<u64> {
                    let mut conns = nodes
                        .iter()
                        .map(|n| Ok(redis::Client::open(n.as_str())?.get_connection()?))
                        .collect::<anyhow::Result<Vec<_>>>()?;
                    // Only its geometry is used: `positions` computes where the k bits go. The
                    // first (scattered) scheme, so that the bitmap baseline sets the same bits
                    // as before the sectorized scheme.
                    let layout = urlseen_filter::BlockedBloom::with_scheme(
                        m,
                        k,
                        options.seed,
                        urlseen_filter::BlockScheme::Scattered,
                    );
                    let mut new = 0;
                    loop {
                        let from = next.fetch_add(batch, Ordering::Relaxed);
                        let Some(chunk) = urls.get(from..urls.len().min(from + batch)) else {
                            return Ok(new);
                        };
                        let mut cmds: Vec<redis::Cmd> = (0..nodes.len())
                            .map(|i| {
                                let mut c = redis::cmd("BITFIELD");
                                c.arg(key(i));
                                c
                            })
                            .collect();
                        let mut per_node = vec![0usize; nodes.len()];
                        for u in chunk {
                            let Ok(fp) = fingerprinter.fingerprint(u) else { continue };
                            let node = urlseen_filter::hash::reduce(
                                urlseen_filter::hash::mix64(fp ^ 0x4c4f_4348),
                                nodes.len() as u64,
                            ) as usize;
                            for p in layout.positions(fp) {
                                cmds[node].arg("SET").arg("u1").arg(p).arg(1);
                            }
                            per_node[node] += 1;
                        }
                        for (i, c) in cmds.iter().enumerate() {
                            if per_node[i] > 0 {
                                conns[i].send_packed_command(&c.get_packed_command())?;
                            }
                        }
                        for (i, conn) in conns.iter_mut().enumerate() {
                            if per_node[i] == 0 {
                                continue;
                            }
                            let redis::Value::Array(old) = conn.recv_response()? else {
                                anyhow::bail!("unexpected BITFIELD reply");
                            };
                            for url_bits in old.chunks(k as usize) {
                                if url_bits.iter().any(|b| *b == redis::Value::Int(0)) {
                                    new += 1;
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("panicked"))))
            .collect()
    });
    let elapsed = started.elapsed().as_secs_f64();
    let mut new = 0;
    for r in results {
        new += r?;
    }
    for (i, n) in nodes.iter().enumerate() {
        let mut c = redis::Client::open(n.as_str())?.get_connection()?;
        redis::cmd("DEL").arg(key(i)).exec(&mut c)?;
    }
    Ok((urls.len() as f64 / elapsed, new))
}
