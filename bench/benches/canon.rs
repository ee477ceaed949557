//! URL canonicalization: every profile, against the `url` crate alone.
//!
//! Group `canonicalize`, ids `impl/corpus`, throughput in URLs (criterion reports time per
//! iteration; divide by [`BATCH`], or read the elements/s line, for ns/URL):
//!
//! * `crawler`, `w3lib`, `safebrowsing`, `none`: `Canonicalizer::canonicalize_into` with the
//!   profile's default options, reusing one output buffer (the hot-loop API);
//! * `crawler-alloc`: `Canonicalizer::canonicalize`, a new `String` per URL;
//! * `crawler-all-options`: crawler with `sort_query`, `strip_tracking` and
//!   `keep_blank_values = false`;
//! * `url-parse` (the baseline): `url::Url::parse(s)` then `.as_str()` into a new `String`,
//!   i.e. WHATWG parse + serialize with the `url` crate alone.
//!
//! Corpora (`BATCH` URLs each, fixed seed):
//!
//! * `corpus`: `urlseen_corpus::Generator`, the realistic crawler stream (30 % repeats, Zipf
//!   hosts, site templates), which is already mostly canonical, as links extracted by a crawler
//!   that resolves them against their page are;
//! * `messy`: the same URLs with one spelling change each in three of four (uppercase host,
//!   default port, fragment, lowercase or unreserved escapes, dot segments, empty query), so
//!   every profile has real work to do and the crawler profile's fast path is mostly declined.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use urlseen_canon::{Canonicalizer, Options, Profile};

const BATCH: usize = 4096;
const SEED: u64 = 42;

fn corpus() -> Vec<String> {
    urlseen_corpus::Generator::new(SEED).take(BATCH).collect()
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

fn bench_canonicalize(c: &mut Criterion) {
    let clean = corpus();
    let corpora = [("corpus", clean.clone()), ("messy", messy(&clean))];
    let mut group = c.benchmark_group("canonicalize");
    group.throughput(Throughput::Elements(BATCH as u64));

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
            group.bench_with_input(BenchmarkId::new(name, corpus_name), urls, |b, urls| {
                b.iter(|| {
                    for u in urls {
                        let ok = canon.canonicalize_into(black_box(u), &mut out).is_ok();
                        black_box((ok, out.len()));
                    }
                });
            });
        }

        let canon = Canonicalizer::new(Options::new(Profile::Crawler));
        group.bench_with_input(BenchmarkId::new("crawler-alloc", corpus_name), urls, |b, urls| {
            b.iter(|| {
                for u in urls {
                    black_box(canon.canonicalize(black_box(u)).ok());
                }
            });
        });

        group.bench_with_input(BenchmarkId::new("url-parse", corpus_name), urls, |b, urls| {
            b.iter(|| {
                for u in urls {
                    let s: Option<String> =
                        url::Url::parse(black_box(u)).ok().map(|p| p.as_str().to_owned());
                    black_box(s);
                }
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench_canonicalize);
criterion_main!(benches);
