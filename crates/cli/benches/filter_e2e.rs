//! End-to-end throughput of the `urlseen filter` binary: a generated, realistic stream (power-law
//! hosts, site templates, 30% repeats) from a file on stdin to /dev/null, process start included.
//!
//! `URLSEEN_BENCH_E2E_N` sets the stream length (default 2,000,000).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use urlseen_corpus::Generator;

fn stream_len() -> u64 {
    std::env::var("URLSEEN_BENCH_E2E_N")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(2_000_000, |v| v as u64)
}

fn filter_e2e(c: &mut Criterion) {
    let n = stream_len();
    let path = std::env::temp_dir().join(format!("urlseen-e2e-{}-{n}.txt", std::process::id()));
    {
        let mut w = BufWriter::new(File::create(&path).expect("create stream file"));
        let mut url = String::new();
        let mut generator = Generator::new(2024);
        for _ in 0..n {
            generator.next_into(&mut url);
            w.write_all(url.as_bytes()).and_then(|()| w.write_all(b"\n")).expect("write stream");
        }
        w.flush().expect("flush stream");
    }
    let mut group = c.benchmark_group("filter_e2e");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements(n));
    for (name, args) in [
        ("crawler", &["filter", "--capacity", "2000000"][..]),
        ("crawler_capacity_10k", &["filter", "--capacity", "10000"][..]),
        ("none", &["filter", "--capacity", "2000000", "--profile", "none"][..]),
    ] {
        group.bench_function(BenchmarkId::new(name, n), |b| {
            b.iter(|| {
                let status = Command::new(env!("CARGO_BIN_EXE_urlseen"))
                    .args(args)
                    .stdin(File::open(&path).expect("open stream"))
                    .stdout(Stdio::null())
                    .status()
                    .expect("run urlseen");
                assert!(status.success());
            })
        });
    }
    // Persistence: the same stream into a fresh data directory under each fsync policy, Bloom-
    // only and in exact mode (every Bloom positive confirmed by the LRU and the fjall store).
    for (mode, extra) in [("", &[][..]), ("exact_", &["--exact"][..])] {
        for fsync in ["always", "everysec", "no"] {
            data_run(&mut group, n, &path, &format!("data_{mode}fsync_{fsync}"), fsync, extra);
        }
    }
    group.finish();
    let _ = std::fs::remove_file(&path);
}

fn data_run(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    n: u64,
    path: &std::path::Path,
    name: &str,
    fsync: &str,
    extra: &[&str],
) {
    {
        group.bench_function(BenchmarkId::new(name, n), |b| {
            b.iter(|| {
                let dir = tempfile::tempdir().expect("temp dir");
                let status = Command::new(env!("CARGO_BIN_EXE_urlseen"))
                    .args(["filter", "--capacity", "2000000", "--fsync", fsync])
                    .args(extra)
                    .arg("--data")
                    .arg(dir.path())
                    .stdin(File::open(path).expect("open stream"))
                    .stdout(Stdio::null())
                    .status()
                    .expect("run urlseen");
                assert!(status.success());
            })
        });
    }
}

criterion_group!(benches, filter_e2e);
criterion_main!(benches);
