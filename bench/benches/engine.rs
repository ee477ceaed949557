//! The DSBF's routing cost: `Db`-level check-and-insert on a tree holding 100 million
//! fingerprints (far out of cache), against one blocked filter of the same total size and
//! against fastbloom, with 1 and 2 threads, in the same run.
//!
//! `URLSEEN_BENCH_ENGINE_N` sets the pre-fill (default 100,000,000; use 1e6 for a quick run).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use parking_lot::Mutex;
use urlseen_engine::{Db, NamespaceOptions};
use urlseen_filter::{BlockedBloom, hash};

const BATCH: usize = 4096;

fn prefill_count() -> u64 {
    std::env::var("URLSEEN_BENCH_ENGINE_N")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(100_000_000, |v| v as u64)
}

/// Fresh fingerprints: a counter through a bijective mix, so every one is new.
struct Fresh(AtomicU64);

impl Fresh {
    fn fill(&self, buf: &mut [u64]) {
        let start = self.0.fetch_add(buf.len() as u64, Ordering::Relaxed);
        for (i, fp) in buf.iter_mut().enumerate() {
            *fp = hash::mix64(start + i as u64);
        }
    }
}

/// Runs `work(thread, batch)` on `threads` threads for `iters` batches each; returns the wall
/// time.
fn timed(threads: usize, iters: u64, work: &(dyn Fn(&mut [u64], &mut [bool]) + Sync)) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut fps = vec![0u64; BATCH];
                let mut out = vec![false; BATCH];
                for _ in 0..iters {
                    work(&mut fps, &mut out);
                    black_box(&out);
                }
            });
        }
    });
    start.elapsed()
}

/// Check-and-inserts `n` fresh fingerprints into `ns`, in batches.
fn fill_namespace(ns: &urlseen_engine::Namespace, fresh: &Fresh, n: u64) {
    let mut fps = vec![0u64; 1 << 16];
    let mut out = vec![false; 1 << 16];
    let mut filled = 0;
    while filled < n {
        let take = ((n - filled) as usize).min(fps.len());
        fresh.fill(&mut fps[..take]);
        ns.seen_fingerprints(&fps[..take], &mut out[..take]).expect("in memory");
        filled += take as u64;
    }
}

/// Inserts `n` fingerprints (other than the namespaces') into `filter`, showing each batch to
/// `also` (to fill a peer with the same ones).
fn fill_filter(filter: &mut BlockedBloom, n: u64, also: &mut dyn FnMut(&[u64])) {
    let refill = Fresh(AtomicU64::new(1 << 62));
    let mut fps = vec![0u64; 1 << 16];
    let mut out = vec![false; 1 << 16];
    let mut filled = 0;
    while filled < n {
        let take = ((n - filled) as usize).min(fps.len());
        refill.fill(&mut fps[..take]);
        filter.insert_batch(&fps[..take], &mut out[..take]);
        also(&fps[..take]);
        filled += take as u64;
    }
}

fn routing_cost(c: &mut Criterion) {
    let n = prefill_count();
    let fresh = Fresh(AtomicU64::new(0));
    let db = Db::in_memory();
    let ns = db
        // Sized with headroom, so the measurement sees routing and probing, not splits (which
        // the `growth` group below measures on its own).
        .create_namespace(
            "bench",
            NamespaceOptions { capacity: n * 3 / 2, fpr: 0.01, ..Default::default() },
        )
        .expect("namespace");
    fill_namespace(&ns, &fresh, n);
    db.wait_for_splits();
    let stats = ns.stats();
    let total_bits: u64 = stats.leaves.iter().map(|l| l.bits).sum();
    eprintln!(
        "DSBF: {} fingerprints, {} leaves of {} bits (k = {}), height {}, {:.0} MiB filters",
        stats.count,
        stats.leaf_count,
        stats.leaf_bits,
        stats.leaf_hashes,
        stats.height,
        total_bits as f64 / 8.0 / 1048576.0
    );

    let single = Mutex::new(BlockedBloom::new(total_bits, stats.leaf_hashes, 3));
    let fast =
        fastbloom::AtomicBloomFilter::with_num_bits(total_bits as usize).hashes(stats.leaf_hashes);
    fill_filter(&mut single.lock(), n, &mut |fps| {
        for fp in fps {
            fast.insert(fp);
        }
    });

    let mut group = c.benchmark_group("seen_batch_100m");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    for threads in [1usize, 2] {
        group.throughput(Throughput::Elements((threads * BATCH) as u64));
        group.bench_function(BenchmarkId::new("dsbf", threads), |b| {
            b.iter_custom(|iters| {
                timed(threads, iters, &|fps, out| {
                    fresh.fill(fps);
                    ns.seen_fingerprints(fps, out).expect("in memory");
                })
            })
        });
        group.bench_function(BenchmarkId::new("blocked_single_filter", threads), |b| {
            b.iter_custom(|iters| {
                timed(threads, iters, &|fps, out| {
                    fresh.fill(fps);
                    single.lock().insert_batch(fps, out);
                })
            })
        });
        group.bench_function(BenchmarkId::new("fastbloom_atomic", threads), |b| {
            b.iter_custom(|iters| {
                timed(threads, iters, &|fps, out| {
                    fresh.fill(fps);
                    for (fp, o) in fps.iter().zip(out.iter_mut()) {
                        *o = fast.insert(fp);
                    }
                })
            })
        });
    }
    group.finish();
}

/// The cost of growing by splits: 1,000,000 new fingerprints into a namespace sized for 10,000
/// (about 100 splits on the way) against one sized for 1,000,000 (none), single-threaded.
fn growth(c: &mut Criterion) {
    const N: usize = 1_000_000;
    let fps: Vec<u64> = (0..N as u64).map(|i| hash::mix64(i ^ 0xabcdef)).collect();
    let mut group = c.benchmark_group("growth");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8));
    group.throughput(Throughput::Elements(N as u64));
    for capacity in [10_000u64, 1_000_000] {
        group.bench_function(BenchmarkId::new("capacity", capacity), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let db = Db::in_memory();
                    let ns = db
                        .create_namespace("g", NamespaceOptions { capacity, ..Default::default() })
                        .expect("namespace");
                    let mut out = vec![false; BATCH];
                    let start = Instant::now();
                    for chunk in fps.chunks(BATCH) {
                        ns.seen_fingerprints(chunk, &mut out[..chunk.len()]).expect("in memory");
                    }
                    db.wait_for_splits();
                    total += start.elapsed();
                }
                total
            })
        });
    }
    group.finish();
}

/// Issue 10's shallow-growth goal: check-and-insert on a namespace created for 100,000 and grown
/// by splits to `URLSEEN_BENCH_GROWN_N` fingerprints (default 20,000,000), against one blocked
/// filter pre-sized to the tree's total bits and filled as much, one thread, same run. The tree
/// keeps growing while it is measured (splits included), as a crawl's does.
fn grown_vs_presized(c: &mut Criterion) {
    let n = std::env::var("URLSEEN_BENCH_GROWN_N")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(20_000_000, |v| v as u64);
    let fresh = Fresh(AtomicU64::new(1 << 40));
    let db = Db::in_memory();
    let ns = db
        .create_namespace("grown", NamespaceOptions { capacity: 100_000, ..Default::default() })
        .expect("namespace");
    fill_namespace(&ns, &fresh, n);
    db.wait_for_splits();
    let stats = ns.stats();
    let total_bits: u64 = stats.leaves.iter().map(|l| l.bits).sum();
    eprintln!(
        "grown DSBF: {} fingerprints, {} leaves, height {}, {:.0} MiB of filters",
        stats.count,
        stats.leaf_count,
        stats.height,
        total_bits as f64 / 8.0 / 1048576.0
    );
    let single = Mutex::new(BlockedBloom::new(total_bits, stats.leaf_hashes, 3));
    fill_filter(&mut single.lock(), n, &mut |_| {});
    let mut group = c.benchmark_group("grown_vs_presized");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("dsbf_grown", |b| {
        b.iter_custom(|iters| {
            timed(1, iters, &|fps, out| {
                fresh.fill(fps);
                ns.seen_fingerprints(fps, out).expect("in memory");
            })
        })
    });
    group.bench_function("blocked_presized", |b| {
        b.iter_custom(|iters| {
            timed(1, iters, &|fps, out| {
                fresh.fill(fps);
                single.lock().insert_batch(fps, out);
            })
        })
    });
    group.finish();
}

criterion_group!(benches, routing_cost, growth, grown_vs_presized);
criterion_main!(benches);
