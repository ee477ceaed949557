//! Deterministic, realistic crawler URL streams for tests, benchmarks and experiments.
//!
//! A crawler's link stream is not uniform: a few hosts get most links (a power law), URLs follow a
//! handful of site templates (articles, listings, search pages, products with tracking parameters),
//! and links repeat, mostly soon after they were first seen. This crate generates such a stream
//! from a seed, with no I/O and no randomness from the environment, so every test and benchmark
//! sees the same URLs on every machine.
//!
//! ```
//! use urlseen_corpus::{Config, Generator};
//!
//! // 30% repeats (the default), hosts drawn from a Zipf law.
//! let urls: Vec<String> = Generator::new(7).take(1000).collect();
//! assert_eq!(urls.len(), 1000);
//!
//! // Every URL distinct, as the FPR experiments need.
//! let distinct = urlseen_corpus::distinct_urls(7, 1000);
//! let set: std::collections::HashSet<_> = distinct.iter().collect();
//! assert_eq!(set.len(), 1000);
//!
//! // Shape the stream.
//! let config = Config { hosts: 50, repeat_ratio: 0.0, ..Config::new(3) };
//! assert!(Generator::with_config(config).take(10).all(|u| u.starts_with("http")));
//! ```
//!
//! # Guarantees
//! - With `repeat_ratio == 0.0` every URL of one stream is distinct: each carries a token that is
//!   a bijection of its position in the stream, so distinctness needs no set and holds for any
//!   length. The generated URLs are already canonical under the `crawler` profile, so they stay
//!   distinct after canonicalization.
//! - Streams of different seeds overlap only by 64-bit token collision (probability about
//!   n²/2⁶⁵), which is what the false-positive experiments rely on.

/// How the stream is shaped. Start from [`Config::new`] and override fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Seed of the whole stream.
    pub seed: u64,
    /// Number of distinct hosts.
    pub hosts: u32,
    /// Zipf exponent of the host distribution (1.0 to 1.2 matches crawl logs).
    pub zipf_exponent: f64,
    /// Fraction of emitted URLs that repeat an earlier one.
    pub repeat_ratio: f64,
    /// Fraction of repeats drawn from the most recent URLs (the rest from a reservoir of the whole
    /// history): crawlers re-see recent links far more often than old ones.
    pub recent_share: f64,
}

impl Config {
    /// The default shape: 100,000 hosts, Zipf exponent 1.1, 30% repeats, 80% of them recent.
    pub fn new(seed: u64) -> Self {
        Config { seed, hosts: 100_000, zipf_exponent: 1.1, repeat_ratio: 0.3, recent_share: 0.8 }
    }
}

const RECENT: usize = 4096;
/// Entries of the host CDF's guide table, less one (a power of two: see `pick_host`).
const GUIDE: usize = 1 << 12;
const RESERVOIR: usize = 65_536;

/// An endless, deterministic stream of URLs. See the [crate docs](crate).
#[derive(Debug, Clone)]
pub struct Generator {
    config: Config,
    rng: SplitMix64,
    host_cdf: Vec<f64>,
    /// `host_guide[j]`: the first host whose CDF reaches `j / GUIDE` (see [`Self::pick_host`]).
    host_guide: Vec<u32>,
    /// Keyed bijection of the fresh-URL counter: the unique token of each fresh URL.
    token_key: u64,
    fresh: u64,
    emitted: u64,
    recent: Vec<String>,
    reservoir: Vec<String>,
}

impl Generator {
    /// A stream with the default shape ([`Config::new`]).
    pub fn new(seed: u64) -> Self {
        Self::with_config(Config::new(seed))
    }

    /// A stream in which every URL is distinct.
    pub fn distinct(seed: u64) -> Self {
        Self::with_config(Config { repeat_ratio: 0.0, ..Config::new(seed) })
    }

    /// A stream with the given shape.
    pub fn with_config(config: Config) -> Self {
        let host_cdf = zipf_cdf(config.hosts.max(1), config.zipf_exponent);
        let host_guide = (0..=GUIDE)
            .map(|j| host_cdf.partition_point(|&c| c < j as f64 / GUIDE as f64) as u32)
            .collect();
        let mut rng = SplitMix64(config.seed);
        let token_key = rng.next_u64();
        Generator {
            config,
            rng,
            host_cdf,
            host_guide,
            token_key,
            fresh: 0,
            emitted: 0,
            recent: Vec::with_capacity(RECENT),
            reservoir: Vec::new(),
        }
    }

    /// How many URLs were emitted so far, and how many of them were fresh (never emitted before).
    pub fn counts(&self) -> (u64, u64) {
        (self.emitted, self.fresh)
    }

    /// Writes the next URL into `out` (cleared first), so hot loops can reuse one buffer.
    pub fn next_into(&mut self, out: &mut String) {
        out.clear();
        self.emitted += 1;
        let want_repeat = self.fresh > 0 && self.rng.next_f64() < self.config.repeat_ratio;
        if want_repeat {
            let from_recent =
                self.reservoir.is_empty() || self.rng.next_f64() < self.config.recent_share;
            let pool = if from_recent { &self.recent } else { &self.reservoir };
            let pick = self.rng.below(pool.len() as u64) as usize;
            if let Some(url) = pool.get(pick) {
                out.push_str(url);
                return;
            }
        }
        self.write_fresh(out);
        self.remember(out);
    }

    fn remember(&mut self, url: &str) {
        if self.config.repeat_ratio <= 0.0 {
            return;
        }
        let slot = (self.fresh as usize - 1) % RECENT;
        if self.recent.len() < RECENT {
            self.recent.push(url.to_owned());
        } else {
            url.clone_into(&mut self.recent[slot]);
        }
        // Reservoir sampling (algorithm R): every fresh URL is equally likely to be kept.
        if self.reservoir.len() < RESERVOIR {
            self.reservoir.push(url.to_owned());
        } else {
            let j = self.rng.below(self.fresh);
            if let Some(kept) = self.reservoir.get_mut(j as usize) {
                url.clone_into(kept);
            }
        }
    }

    fn write_fresh(&mut self, out: &mut String) {
        let token = feistel(self.fresh, self.token_key);
        self.fresh += 1;
        let host = self.pick_host();
        let r = self.rng.next_u64();
        let scheme = if host.is_multiple_of(7) { "http" } else { "https" };
        push(out, &[scheme, "://"]);
        write_host(out, host);
        let word = |i: u64| WORDS[((r >> (i * 8)) % WORDS.len() as u64) as usize];
        let (w1, w2, w3, w4) = (word(1), word(2), word(3), word(4));
        // The template: every one carries the unique token, so fresh URLs never collide.
        // (Written piece by piece rather than with `write!`: the formatting machinery was a
        // third of `gen`'s time, and `gen` shares the CPU with what it feeds in a benchmark.)
        match r % 10 {
            0 => {
                push(out, &["/", w1, "/", w2, "-", w3, "-"]);
                push_base36(out, token);
                out.push_str(".html");
            }
            1 | 2 => {
                push(out, &["/", w1, "/", w2, "/"]);
                push_base36(out, token);
            }
            3 => {
                push(out, &["/search?q=", w1, "+", w2, "&page="]);
                push_decimal(out, r >> 60, 1);
                out.push_str("&sid=");
                push_base36(out, token);
            }
            4 => {
                out.push_str("/product/");
                push_base36(out, token);
                push(out, &["?ref=", w1, "&utm_source=", w2, "&utm_medium=email"]);
            }
            5 => {
                out.push('/');
                push_decimal(out, 2000 + (r >> 40) % 27, 1);
                out.push('/');
                push_decimal(out, 1 + (r >> 48) % 12, 2);
                out.push('/');
                push_decimal(out, 1 + (r >> 52) % 28, 2);
                push(out, &["/", w1, "-"]);
                push_base36(out, token);
                out.push('/');
            }
            6 => {
                push(out, &["/", w1, "?id="]);
                push_base36(out, token);
                push(out, &["&lang=", LANGS[(r >> 58) as usize % 4]]);
            }
            7 => {
                push(out, &["/tag/", w1, "/page/"]);
                push_base36(out, token);
            }
            8 => {
                out.push_str("/u/");
                push_base36(out, token);
                push(out, &["/", w2]);
            }
            _ => {
                push(out, &["/", w1, "/", w2, "/", w3, "/"]);
                push_base36(out, token);
                push(out, &[".php?sort=", w4]);
            }
        }
    }

    /// The first host whose CDF reaches a uniform draw `u`: a binary search of the part of the
    /// CDF between two guide entries (the same host as a search of all of it, whose cache
    /// misses were a quarter of `gen`'s time). `GUIDE` is a power of two, so `u * GUIDE` and
    /// `j / GUIDE` are exact: `j / GUIDE <= u < (j + 1) / GUIDE`, hence the host lies between
    /// `host_guide[j]` and `host_guide[j + 1]`.
    fn pick_host(&mut self) -> u64 {
        let u = self.rng.next_f64();
        self.host_for(u)
    }

    /// The host a draw `u` in [0, 1) picks (see [`Self::pick_host`]).
    fn host_for(&self, u: f64) -> u64 {
        let j = ((u * GUIDE as f64) as usize).min(GUIDE - 1);
        let (lo, hi) = (self.host_guide[j] as usize, self.host_guide[j + 1] as usize);
        let hi = (hi + 1).min(self.host_cdf.len());
        let lo = lo.min(hi);
        let found = lo + self.host_cdf[lo..hi].partition_point(|&c| c < u);
        found.min(self.host_cdf.len() - 1) as u64
    }
}

impl Iterator for Generator {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        let mut s = String::with_capacity(64);
        self.next_into(&mut s);
        Some(s)
    }
}

/// The first `n` URLs of a stream in which every URL is distinct.
pub fn distinct_urls(seed: u64, n: usize) -> Vec<String> {
    Generator::distinct(seed).take(n).collect()
}

/// Per-host URL counts with a power-law (Zipf) distribution: `total` URLs over `hosts` hosts with
/// exponent `s`, host 0 the largest. Deterministic (no sampling): counts are the Zipf shares,
/// rounded, so they sum to `total` exactly.
pub fn zipf_host_counts(hosts: u32, total: u64, s: f64) -> Vec<u64> {
    let hosts = hosts.max(1) as usize;
    let weights: Vec<f64> = (1..=hosts).map(|i| (i as f64).powf(-s)).collect();
    let sum: f64 = weights.iter().sum();
    let mut counts: Vec<u64> = weights.iter().map(|w| (w / sum * total as f64) as u64).collect();
    let mut missing = total - counts.iter().sum::<u64>();
    for c in counts.iter_mut() {
        if missing == 0 {
            break;
        }
        *c += 1;
        missing -= 1;
    }
    counts
}

/// The host name of host number `i`, as the generator writes it.
pub fn host_name(i: u64) -> String {
    let mut s = String::new();
    write_host(&mut s, i);
    s
}

fn write_host(out: &mut String, i: u64) {
    let h = mix64(i ^ 0x9e37_79b9_7f4a_7c15);
    let sub = SUBDOMAINS[(h % SUBDOMAINS.len() as u64) as usize];
    let a = WORDS[((h >> 8) % WORDS.len() as u64) as usize];
    let b = WORDS[((h >> 16) % WORDS.len() as u64) as usize];
    let tld = TLDS[((h >> 24) % TLDS.len() as u64) as usize];
    // The host number makes every host distinct; the words make it look like one.
    push(out, &[sub, a, "-", b]);
    push_base36(out, i);
    push(out, &[".", tld]);
}

fn push(out: &mut String, parts: &[&str]) {
    for part in parts {
        out.push_str(part);
    }
}

/// Appends `v` in base 36 (digits, then lowercase letters).
fn push_base36(out: &mut String, mut v: u64) {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut buf = [0u8; 13];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = DIGITS[(v % 36) as usize];
        v /= 36;
        if v == 0 {
            break;
        }
    }
    out.extend(buf[i..].iter().map(|&c| char::from(c)));
}

/// Appends `v` in decimal, zero-padded to `width` digits (as `{:0width$}`).
fn push_decimal(out: &mut String, mut v: u64, width: usize) {
    let mut buf = [b'0'; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let start = i.min(buf.len() - width.min(buf.len()));
    out.extend(buf[start..].iter().map(|&c| char::from(c)));
}

fn zipf_cdf(hosts: u32, s: f64) -> Vec<f64> {
    let mut acc = 0.0;
    let mut cdf: Vec<f64> = (1..=hosts)
        .map(|i| {
            acc += (i as f64).powf(-s);
            acc
        })
        .collect();
    for c in cdf.iter_mut() {
        *c /= acc;
    }
    cdf
}

/// A keyed bijection on u64 (a 4-round Feistel network on 32-bit halves): distinct inputs give
/// distinct tokens, and tokens do not look sequential.
fn feistel(x: u64, key: u64) -> u64 {
    let (mut l, mut r) = ((x >> 32) as u32, x as u32);
    for round in 0..4u64 {
        let f = mix64(u64::from(r) ^ key.rotate_left(round as u32 * 16) ^ round) as u32;
        (l, r) = (r, l ^ f);
    }
    (u64::from(l) << 32) | u64::from(r)
}

fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// SplitMix64: tiny, fast, and the same sequence everywhere (no dependency whose algorithm could
/// change under us and silently change every corpus).
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }

    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

const SUBDOMAINS: [&str; 6] = ["www.", "www.", "", "news.", "shop.", "blog."];
const TLDS: [&str; 8] = ["com", "com", "org", "net", "de", "cn", "co.uk", "io"];
const LANGS: [&str; 4] = ["en", "zh", "de", "fr"];
const WORDS: [&str; 64] = [
    "alpha", "river", "stone", "cloud", "market", "garden", "photo", "travel", "music", "sport",
    "science", "health", "money", "world", "local", "video", "recipe", "review", "guide", "story",
    "winter", "summer", "city", "home", "data", "cloud", "mobile", "green", "energy", "books",
    "film", "games", "art", "design", "code", "open", "daily", "press", "forum", "wiki", "shop",
    "deals", "auto", "bike", "food", "wine", "coffee", "tea", "ocean", "mountain", "forest",
    "desert", "island", "bridge", "tower", "light", "night", "star", "moon", "sun", "blue", "red",
    "gold", "silver",
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// The guided search picks the host a search of the whole CDF picks, at bucket edges and
    /// between them, for one host, a few, the default 100,000 and millions.
    #[test]
    fn guided_host_pick_matches_a_full_search() {
        for hosts in [1, 2, 7, 100_000, 3_000_000] {
            let g = Generator::with_config(Config { hosts, ..Config::new(5) });
            let full =
                |u: f64| g.host_cdf.partition_point(|&c| c < u).min(g.host_cdf.len() - 1) as u64;
            let mut rng = SplitMix64(hosts.into());
            let edges = (0..=GUIDE).flat_map(|j| {
                let e = j as f64 / GUIDE as f64;
                [e, e - f64::EPSILON / 2.0, e + f64::EPSILON]
            });
            let cdf_points = g.host_cdf.iter().take(2000).flat_map(|&c| [c, c - 1e-12, c + 1e-12]);
            let draws = (0..20_000).map(|_| rng.next_f64());
            for u in edges.chain(cdf_points).chain(draws).filter(|u| (0.0..1.0).contains(u)) {
                assert_eq!(g.host_for(u), full(u), "hosts {hosts}, u {u}");
            }
        }
    }

    #[test]
    fn same_seed_same_stream_other_seed_other_stream() {
        let a: Vec<String> = Generator::new(1).take(500).collect();
        let b: Vec<String> = Generator::new(1).take(500).collect();
        let c: Vec<String> = Generator::new(2).take(500).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn distinct_stream_has_no_repeats() {
        let urls = distinct_urls(42, 200_000);
        let set: HashSet<&String> = urls.iter().collect();
        assert_eq!(set.len(), urls.len());
    }

    #[test]
    fn distinct_streams_of_two_seeds_do_not_overlap() {
        let a: HashSet<String> = distinct_urls(1, 50_000).into_iter().collect();
        let overlap = distinct_urls(2, 50_000).into_iter().filter(|u| a.contains(u)).count();
        assert_eq!(overlap, 0);
    }

    #[test]
    fn repeat_ratio_is_about_what_was_asked() {
        let mut g = Generator::new(9);
        let urls: Vec<String> = g.by_ref().take(100_000).collect();
        let distinct = urls.iter().collect::<HashSet<_>>().len();
        let (emitted, fresh) = g.counts();
        assert_eq!(emitted, 100_000);
        assert_eq!(fresh as usize, distinct);
        let repeats = 1.0 - distinct as f64 / urls.len() as f64;
        assert!((0.27..0.33).contains(&repeats), "repeat share {repeats}");
    }

    #[test]
    fn hosts_follow_a_power_law() {
        let mut per_host = std::collections::HashMap::<String, u64>::new();
        for u in Generator::distinct(5).take(100_000) {
            let host = u.split('/').nth(2).unwrap_or_default().to_owned();
            *per_host.entry(host).or_default() += 1;
        }
        let mut counts: Vec<u64> = per_host.into_values().collect();
        counts.sort_unstable_by(|a, b| b.cmp(a));
        // The biggest host gets far more than the median one, and there are many hosts.
        assert!(counts.len() > 10_000, "{} hosts", counts.len());
        assert!(counts[0] > 50 * counts[counts.len() / 2]);
    }

    #[test]
    fn zipf_counts_sum_to_total_and_decrease() {
        let counts = zipf_host_counts(1000, 1_000_000, 1.0);
        assert_eq!(counts.iter().sum::<u64>(), 1_000_000);
        assert!(counts.windows(2).all(|w| w[0] + 1 >= w[1]));
    }

    #[test]
    fn feistel_is_a_bijection_on_a_sample() {
        let set: HashSet<u64> = (0..100_000).map(|i| feistel(i, 77)).collect();
        assert_eq!(set.len(), 100_000);
    }
}
