//! URL canonicalization: every profile, against the `url` crate alone.
//!
//! One iteration canonicalizes one URL (the next of a fixed corpus, round robin), so criterion's
//! `time` is the cost per URL and `thrpt` is URLs per second. Ids are `impl/corpus`:
//!
//! * `crawler`, `w3lib`, `safebrowsing`, `none`: `Canonicalizer::canonicalize_into` with the
//!   profile's default options, reusing one output buffer (the hot-loop API);
//! * `crawler-alloc`: `Canonicalizer::canonicalize`, a new `String` per URL;
//! * `crawler-all-options`: crawler with `sort_query`, `strip_tracking` and
//!   `keep_blank_values = false`;
//! * `url-parse` (the baseline): `url::Url::parse(s)` then `.as_str()` into a new `String`,
//!   i.e. WHATWG parse + serialize with the `url` crate alone.
//!
//! Corpora (4,096 URLs each, fixed seed):
//!
//! * `corpus`: `urlseen_corpus::Generator`, the realistic crawler stream (30 % repeats, Zipf
//!   hosts, site templates), which is already mostly canonical, as links extracted by a crawler
//!   that resolves them against their page are;
//! * `messy`: the same URLs with one spelling change each in three of four (uppercase scheme and
//!   host, default port, fragment, unreserved escapes plus dot segments, lowercase escapes, empty
//!   query), so that every profile has work to do.
//!
//! Two groups measure the same thing with two clocks: `canonicalize` with criterion's wall
//! clock, `canonicalize-cpu` with the benchmark thread's CPU time (Linux
//! `CLOCK_THREAD_CPUTIME_ID`), which does not count the time other processes hold the core. On
//! a shared machine the second is the cost of the code; the first is what a caller waits.

use std::hint::black_box;

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use urlseen_canon::{Canonicalizer, Options, Profile};

const CORPUS_LEN: usize = 4096;
const SEED: u64 = 42;

fn corpus() -> Vec<String> {
    urlseen_corpus::Generator::new(SEED).take(CORPUS_LEN).collect()
}

/// One spelling change per URL for three URLs in four, chosen by position.
fn messy(clean: &[String]) -> Vec<String> {
    clean
        .iter()
        .enumerate()
        .map(|(i, u)| {
            let (scheme, rest) = u.split_once("://").unwrap_or(("http", u));
            let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let port = if scheme == "https" { ":443" } else { ":80" };
            match i % 8 {
                0 => format!("{}://{}{path}", scheme.to_uppercase(), host.to_uppercase()),
                1 => format!("{scheme}://{host}{port}{path}"),
                2 => format!("{u}#section-{i}"),
                3 => format!("{scheme}://{host}/./a/..{}", path.replacen('/', "/%7e", 1)),
                4 => format!("{scheme}://{host}{}", path.replace('-', "%2d")),
                5 => format!("{u}{}", if u.contains('?') { "&" } else { "?" }),
                _ => u.clone(),
            }
        })
        .collect()
}

/// The URLs of a corpus, handed out round robin.
struct Cycle<'a> {
    urls: &'a [String],
    next: usize,
}

impl<'a> Cycle<'a> {
    fn new(urls: &'a [String]) -> Self {
        Cycle { urls, next: 0 }
    }

    #[inline]
    fn next_url(&mut self) -> &'a str {
        let u = &self.urls[self.next];
        self.next = (self.next + 1) % self.urls.len();
        u
    }
}

fn bench_profiles<M: Measurement>(c: &mut Criterion<M>, group_name: &str) {
    let clean = corpus();
    let corpora = [("corpus", clean.clone()), ("messy", messy(&clean))];
    let mut group = c.benchmark_group(group_name);
    group.throughput(Throughput::Elements(1));

    for (corpus_name, urls) in &corpora {
        let profiles = [
            ("crawler", Options::new(Profile::Crawler)),
            (
                "crawler-all-options",
                Options {
                    sort_query: true,
                    strip_tracking: true,
                    keep_blank_values: false,
                    ..Options::new(Profile::Crawler)
                },
            ),
            ("w3lib", Options::new(Profile::W3lib)),
            ("safebrowsing", Options::new(Profile::SafeBrowsing)),
            ("none", Options::new(Profile::None)),
        ];
        for (name, options) in profiles {
            let canon = Canonicalizer::new(options);
            let mut out = String::with_capacity(256);
            let mut cycle = Cycle::new(urls);
            group.bench_function(BenchmarkId::new(name, corpus_name), |b| {
                b.iter(|| {
                    let ok = canon.canonicalize_into(black_box(cycle.next_url()), &mut out).is_ok();
                    black_box((ok, out.len()))
                });
            });
        }

        let canon = Canonicalizer::new(Options::new(Profile::Crawler));
        let mut cycle = Cycle::new(urls);
        group.bench_function(BenchmarkId::new("crawler-alloc", corpus_name), |b| {
            b.iter(|| canon.canonicalize(black_box(cycle.next_url())).ok());
        });

        let mut cycle = Cycle::new(urls);
        group.bench_function(BenchmarkId::new("url-parse", corpus_name), |b| {
            b.iter(|| {
                url::Url::parse(black_box(cycle.next_url())).ok().map(|p| p.as_str().to_owned())
            });
        });
    }
    group.finish();
}

fn wall_clock(c: &mut Criterion) {
    bench_profiles(c, "canonicalize");
}

fn cpu_time(c: &mut Criterion<ThreadCpuTime>) {
    bench_profiles(c, "canonicalize-cpu");
}

/// CPU time of the calling thread, in nanoseconds.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn thread_cpu_ns() -> u64 {
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    #[expect(unsafe_code, reason = "std has no thread CPU clock; the C library has one")]
    unsafe extern "C" {
        fn clock_gettime(clock_id: i32, tp: *mut Timespec) -> i32;
    }
    let mut ts = Timespec { tv_sec: 0, tv_nsec: 0 };
    #[expect(unsafe_code, reason = "clock_gettime writes one timespec through a valid pointer")]
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

/// Elsewhere: fall back to the wall clock.
#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
fn thread_cpu_ns() -> u64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    u64::try_from(START.get_or_init(Instant::now).elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// A criterion [`Measurement`] of the benchmark thread's CPU time, in nanoseconds.
struct ThreadCpuTime;

impl Measurement for ThreadCpuTime {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        thread_cpu_ns()
    }

    fn end(&self, start: u64) -> u64 {
        thread_cpu_ns().saturating_sub(start)
    }

    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }

    fn zero(&self) -> u64 {
        0
    }

    fn to_f64(&self, value: &u64) -> f64 {
        *value as f64
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        &NanosFormatter
    }
}

/// Formats nanoseconds like criterion's wall clock does.
struct NanosFormatter;

impl ValueFormatter for NanosFormatter {
    fn scale_values(&self, typical: f64, values: &mut [f64]) -> &'static str {
        let (factor, unit) = if typical < 1e3 {
            (1.0, "ns")
        } else if typical < 1e6 {
            (1e-3, "µs")
        } else if typical < 1e9 {
            (1e-6, "ms")
        } else {
            (1e-9, "s")
        };
        for v in values {
            *v *= factor;
        }
        unit
    }

    fn scale_throughputs(
        &self,
        typical: f64,
        throughput: &Throughput,
        values: &mut [f64],
    ) -> &'static str {
        let per_iteration = match throughput {
            Throughput::Elements(n) | Throughput::Bytes(n) | Throughput::BytesDecimal(n) => {
                *n as f64
            }
            _ => 1.0,
        };
        let per_second = per_iteration * 1e9 / typical;
        let (divisor, unit) = if per_second < 1e3 {
            (1.0, " elem/s")
        } else if per_second < 1e6 {
            (1e3, "Kelem/s")
        } else {
            (1e6, "Melem/s")
        };
        for v in values {
            *v = per_iteration * 1e9 / *v / divisor;
        }
        unit
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

criterion_group!(benches, wall_clock);
criterion_group! {
    name = cpu_benches;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = cpu_time
}
criterion_main!(benches, cpu_benches);
