//! Seed 004: dedup with the fingerprint store alone against IMP-CB (a counting Bloom filter in
//! front of the store), both on disk.
//!
//! For each n (0.5, 1.0, 1.5 and 2.0 million by default), the first n URLs of the default
//! generated stream (`urlseen_corpus::Generator::new`: about 30 % repeats, 80 % of them of a
//! recent URL) are canonicalized and fingerprinted up front. Then each method runs in a fresh
//! store directory (fjall, `StoreDurability::Buffered`), timed, ending with an fsync:
//! - `store`: seed 004's baseline. Per URL, a store lookup; found → refcount + 1 (a write),
//!   absent → insert with refcount 1 (a write).
//! - `imp-cb`: seed 004's IMP-CB. Per URL, the k = 8 counters of a counting filter with
//!   m/n = 20; a zero counter → new, inserted with no lookup; else the lookup decides as above.
//! - `store/batch` and `imp-cb/batch`: the same, 1,000 URLs a call, new URLs inserted in one
//!   write a batch (refcount updates stay one write each).
//! - `bloom-only`: for scale, what Bloom-only mode costs: a blocked Bloom filter at 1 %, in
//!   memory, batches of 1,000; its duplicates include its false positives (not checked).
//! - `imp-cb+lru/batch`: urlseen's exact mode: `imp-cb/batch` plus a 100,000-entry LRU of recent
//!   fingerprints, which answers recent repeats with no store I/O at all.
//!
//! Every method must find the stream's number of duplicates (checked). The store-only methods
//! keep the LSM's own Bloom filters on every level (their lookups of new URLs miss); behind a
//! counting filter the store skips them on its last level (`StoreOptions::expect_hits`), as
//! urlseen's exact mode does.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use plotters::prelude::*;
use serde::Serialize;
use urlseen_engine::exact::{
    CountingOptions, CountingSet, ExactOptions, FingerprintStore, FpBuildHasher, FpStore, Record,
    StoreDurability, StoreOptions,
};

use crate::args::parse_count;

const BATCH: usize = 1000;
const LRU: usize = 100_000;

/// Seed 004's experiment: fingerprint store alone vs IMP-CB (counting Bloom in front), on disk.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Stream lengths n (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "500000,1000000,1500000,2000000", value_parser = parse_count)]
    urls: Vec<u64>,
    /// Counters per URL (m/n).
    #[arg(long, default_value_t = 20.0)]
    counters_per_url: f64,
    /// Counters per URL probed (k).
    #[arg(long, default_value_t = 8)]
    hashes: u32,
    /// Seed of the URL stream.
    #[arg(long, default_value_t = 4)]
    seed: u64,
    /// Where to create the temporary store directories (default: the system's temp dir).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Write an SVG plot of time against n.
    #[arg(long)]
    plot: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Method {
    /// Bloom-only mode, for the ratio exact mode costs: a blocked Bloom filter at 1 %, no store.
    Bloom,
    Store,
    ImpCb,
    StoreBatch,
    ImpCbBatch,
    ImpCbLruBatch,
}

impl Method {
    const ALL: [Method; 6] = [
        Method::Bloom,
        Method::Store,
        Method::ImpCb,
        Method::StoreBatch,
        Method::ImpCbBatch,
        Method::ImpCbLruBatch,
    ];

    const PLOTTED: [Method; 5] = [
        Method::Store,
        Method::ImpCb,
        Method::StoreBatch,
        Method::ImpCbBatch,
        Method::ImpCbLruBatch,
    ];

    fn name(self) -> &'static str {
        match self {
            Method::Bloom => "bloom-only",
            Method::Store => "store",
            Method::ImpCb => "imp-cb",
            Method::StoreBatch => "store/batch",
            Method::ImpCbBatch => "imp-cb/batch",
            Method::ImpCbLruBatch => "imp-cb+lru/batch",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Method::Bloom => "Bloom filter only (1 %), in memory",
            Method::Store => "fingerprint store only",
            Method::ImpCb => "IMP-CB (counting Bloom + store)",
            Method::StoreBatch => "store only, batches of 1,000",
            Method::ImpCbBatch => "IMP-CB, batches of 1,000",
            Method::ImpCbLruBatch => "IMP-CB + LRU, batches of 1,000 (urlseen)",
        }
    }
}

#[derive(Debug, Serialize)]
struct Row {
    urls: u64,
    method: Method,
    distinct: u64,
    duplicates: u64,
    secs: f64,
    urls_per_sec: f64,
    /// Time of `store` (or `store/batch` for the batched methods) divided by this one's.
    speedup_vs_store: f64,
    store_reads: u64,
    store_writes: u64,
    /// URLs the counting filter declared new with no store read.
    filter_new: u64,
    /// New URLs that passed the filter (its false positives), found absent by the store; for
    /// `bloom-only`, the new URLs it answered "seen" for.
    filter_false_positives: u64,
    /// Counters at 15 after the run (seed 004's overflow rule).
    saturated_counters: u64,
    counters: u64,
    filter_bytes: u64,
}

/// What one run measured.
#[derive(Debug, Default)]
struct Run {
    secs: f64,
    duplicates: u64,
    store_reads: u64,
    store_writes: u64,
    filter_new: u64,
    filter_false_positives: u64,
    saturated_counters: u64,
    counters: u64,
    filter_bytes: u64,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(!args.urls.is_empty() && !args.urls.contains(&0), "--urls must be positive");
    anyhow::ensure!(
        args.counters_per_url.is_finite() && args.counters_per_url > 0.0,
        "--counters-per-url must be positive"
    );
    let base = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    let started = Instant::now();
    let mut rows: Vec<Row> = Vec::new();
    for &n in &args.urls {
        let (fps, distinct) = stream_fingerprints(args.seed, n as usize);
        let duplicates = n - distinct;
        let options = CountingOptions {
            capacity: n,
            counters_per_item: args.counters_per_url,
            hashes: args.hashes,
            seed: urlseen_engine::DEFAULT_SEED,
            exact: ExactOptions { lru_capacity: 0, count_references: true },
        };
        for method in Method::ALL {
            let r = match method {
                Method::Bloom => bloom_only(&fps),
                Method::Store => store_only(&base, &fps, 1)?,
                Method::StoreBatch => store_only(&base, &fps, BATCH)?,
                Method::ImpCb => imp_cb(&base, &fps, options, 1)?,
                Method::ImpCbBatch => imp_cb(&base, &fps, options, BATCH)?,
                Method::ImpCbLruBatch => {
                    let exact = ExactOptions { lru_capacity: LRU, ..options.exact };
                    imp_cb(&base, &fps, CountingOptions { exact, ..options }, BATCH)?
                }
            };
            anyhow::ensure!(
                r.duplicates == duplicates || method == Method::Bloom,
                "{} found {} duplicates, the stream has {duplicates}",
                method.name(),
                r.duplicates
            );
            rows.push(Row {
                urls: n,
                method,
                distinct,
                duplicates,
                secs: r.secs,
                urls_per_sec: n as f64 / r.secs,
                speedup_vs_store: 1.0, // set below, once the baselines ran
                store_reads: r.store_reads,
                store_writes: r.store_writes,
                filter_new: r.filter_new,
                // Bloom-only mode's false positives are the URLs it wrongly called seen.
                filter_false_positives: if method == Method::Bloom {
                    r.duplicates.saturating_sub(duplicates)
                } else {
                    r.filter_false_positives
                },
                saturated_counters: r.saturated_counters,
                counters: r.counters,
                filter_bytes: r.filter_bytes,
            });
        }
    }

    // Speedups against the baseline of the same n: `store` for single URLs, `store/batch` for
    // batches.
    let secs_of = |rows: &[Row], n: u64, m: Method| {
        rows.iter().find(|r| r.urls == n && r.method == m).map_or(f64::NAN, |r| r.secs)
    };
    for i in 0..rows.len() {
        let baseline = match rows[i].method {
            Method::Bloom | Method::Store | Method::ImpCb => Method::Store,
            _ => Method::StoreBatch,
        };
        rows[i].speedup_vs_store = secs_of(&rows, rows[i].urls, baseline) / rows[i].secs;
    }

    if let Some(path) = &args.plot {
        chart(path, &rows, args.hashes, args.counters_per_url)?;
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "Seed 004: k = {}, m/n = {}, fjall on disk (buffered writes, fsync at the end); \
         stream seed {} (~30% repeats)",
        args.hashes, args.counters_per_url, args.seed
    )?;
    writeln!(
        out,
        "{:>9} {:>9} {:>17} {:>8} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "n",
        "dups",
        "method",
        "seconds",
        "URLs/s",
        "speedup",
        "reads",
        "writes",
        "filter-0",
        "false-pos",
        "saturated"
    )?;
    for r in &rows {
        writeln!(
            out,
            "{:>9} {:>9} {:>17} {:>8.2} {:>9.0} {:>7.2}x {:>9} {:>9} {:>9} {:>9} {:>9}",
            r.urls,
            r.duplicates,
            r.method.name(),
            r.secs,
            r.urls_per_sec,
            r.speedup_vs_store,
            r.store_reads,
            r.store_writes,
            r.filter_new,
            r.filter_false_positives,
            r.saturated_counters
        )?;
    }
    if let Some(r) = rows.iter().rev().find(|r| r.method == Method::ImpCb) {
        writeln!(
            out,
            "at n = {}: the counting filter ({} counters, {} bytes) answered {} of {} new URLs \
             with no store read; {} filter false positives went to the store",
            r.urls, r.counters, r.filter_bytes, r.filter_new, r.distinct, r.filter_false_positives
        )?;
    }
    writeln!(
        out,
        "(speedup: against `store` for the single-URL methods and bloom-only, `store/batch` for \
         the batched ones; {:.1} s)",
        started.elapsed().as_secs_f64()
    )?;
    Ok(())
}

/// Fingerprints of the first `n` URLs of stream `seed` (canonicalized with the default
/// profile), and how many of them are distinct.
fn stream_fingerprints(seed: u64, n: usize) -> (Vec<u64>, u64) {
    let fingerprinter = urlseen_engine::fingerprint::Fingerprinter::new(
        &urlseen_engine::NamespaceOptions::default(),
    );
    let mut generator = urlseen_corpus::Generator::new(seed);
    let mut url = String::new();
    let fps = (0..n)
        .map(|_| {
            generator.next_into(&mut url);
            fingerprinter
                .fingerprint(&url)
                .unwrap_or_else(|_| fingerprinter.of_bytes(url.as_bytes()))
        })
        .collect();
    (fps, generator.counts().1)
}

fn temp_dir(base: &Path) -> anyhow::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix("urlseen-imp-cb-")
        .tempdir_in(base)
        .with_context(|| format!("creating a temporary directory in {}", base.display()))
}

/// Bloom-only mode: check-and-insert in a blocked Bloom filter sized for the stream at 1 %;
/// its "duplicates" include its false positives.
fn bloom_only(fps: &[u64]) -> Run {
    let mut bloom = urlseen_filter::BlockedBloom::with_capacity(fps.len() as u64, 0.01, 3);
    let started = Instant::now();
    let mut was = vec![false; BATCH];
    let mut duplicates = 0;
    for chunk in fps.chunks(BATCH) {
        bloom.insert_batch(chunk, &mut was[..chunk.len()]);
        duplicates += was[..chunk.len()].iter().filter(|&&w| w).count() as u64;
    }
    Run { secs: started.elapsed().as_secs_f64(), duplicates, ..Run::default() }
}

/// Seed 004's baseline: every URL is a store lookup; new ones are inserted `batch` at a time.
fn store_only(base: &Path, fps: &[u64], batch: usize) -> anyhow::Result<Run> {
    let dir = temp_dir(base)?;
    // Every new URL's lookup misses here: keep the LSM's own filters on every level.
    let options = StoreOptions { expect_hits: false, ..StoreOptions::default() };
    let store = FingerprintStore::open_with(dir.path(), options)?;
    let started = Instant::now();
    let mut run = Run::default();
    let mut pending: Vec<u64> = Vec::with_capacity(batch);
    let mut pending_set: HashSet<u64, FpBuildHasher> = HashSet::default();
    for chunk in fps.chunks(batch.max(1)) {
        pending.clear();
        pending_set.clear();
        for &fp in chunk {
            if pending_set.contains(&fp) {
                run.duplicates += 1;
                continue;
            }
            run.store_reads += 1;
            match store.get_record(fp)? {
                Some(r) => {
                    run.duplicates += 1;
                    store.update_record(
                        fp,
                        Record { refcount: r.refcount.saturating_add(1), ..r },
                    )?;
                    run.store_writes += 1;
                }
                None => {
                    pending.push(fp);
                    pending_set.insert(fp);
                }
            }
        }
        if !pending.is_empty() {
            store.insert_many(&pending)?;
            run.store_writes += 1;
        }
    }
    store.sync()?;
    run.secs = started.elapsed().as_secs_f64();
    Ok(run)
}

/// IMP-CB over a fresh on-disk set, `batch` URLs per call.
fn imp_cb(base: &Path, fps: &[u64], options: CountingOptions, batch: usize) -> anyhow::Result<Run> {
    let dir = temp_dir(base)?;
    let set = CountingSet::open(dir.path(), StoreDurability::Buffered, options)?;
    let started = Instant::now();
    let mut duplicates = 0;
    if batch <= 1 {
        for &fp in fps {
            duplicates += u64::from(set.seen(fp)?);
        }
    } else {
        let mut out = vec![false; batch];
        for chunk in fps.chunks(batch) {
            set.seen_many(chunk, &mut out[..chunk.len()])?;
            duplicates += out[..chunk.len()].iter().filter(|&&seen| seen).count() as u64;
        }
    }
    set.sync()?;
    let secs = started.elapsed().as_secs_f64();
    let s = set.stats();
    Ok(Run {
        secs,
        duplicates,
        store_reads: s.exact.store_reads,
        store_writes: s.exact.store_writes,
        filter_new: s.definitely_new,
        filter_false_positives: s.false_positives,
        saturated_counters: s.saturated_counters,
        counters: s.generations.iter().map(|g| g.counters).sum(),
        filter_bytes: s.filter_memory_bytes,
    })
}

/// Time against n, one line per method, in the house style of `crate::plot`.
fn chart(path: &Path, rows: &[Row], k: u32, m_per_n: f64) -> anyhow::Result<()> {
    const COLORS: [RGBColor; 5] = [
        RGBColor(214, 39, 40),
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(148, 103, 189),
        RGBColor(44, 160, 44),
    ];
    let x_max = rows.iter().map(|r| r.urls as f64 / 1e6).fold(0.5, f64::max) * 1.08;
    let y_max = rows.iter().map(|r| r.secs).fold(0.1, f64::max) * 1.15;
    let root = SVGBackend::new(path, (1000, 650)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Seed 004 reproduced: dedup time on disk (k = {k}, m/n = {m_per_n})"),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("URLs in the stream (millions, ~30% repeats)")
        .y_desc("seconds")
        .x_label_formatter(&|x| format!("{x:.1}"))
        .y_label_formatter(&|y| format!("{y:.1}"))
        .draw()?;
    for (method, color) in Method::PLOTTED.into_iter().zip(COLORS) {
        let points: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.method == method)
            .map(|r| (r.urls as f64 / 1e6, r.secs))
            .collect();
        let dashed = matches!(method, Method::Store | Method::ImpCb);
        let style = color.stroke_width(2);
        let series = if dashed {
            chart.draw_series(DashedLineSeries::new(points.iter().copied(), 8, 5, style))?
        } else {
            chart.draw_series(LineSeries::new(points.iter().copied(), style))?
        };
        series.label(method.label()).legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
        });
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
