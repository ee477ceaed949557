//! Filters against real peers at equal bits per element (10 bits/element, k = 7).
//!
//! Groups `insert` (check-and-insert of new items), `contains_hit`, `contains_miss`; ids are
//! `impl/size`. Sizes: `1MiB` (2^23 bits: in cache) and `1GiB` (2^33 bits: far beyond it). Each
//! filter is first filled to half its capacity (capacity = bits / 10), so its bit density is
//! realistic; inserts then add fresh items (the 1 MiB filters are reset from a copy every
//! capacity/4 inserts, the 1 GiB ones keep filling, from 50 % to what the runs add, printed at
//! the end of each). Our single and batched modes share one filter (filled once). One iteration is
//! a batch of 1024 precomputed random fingerprints; peers get the same `u64`s through their
//! hash-free path where they have one (fastbloom's `insert_hash`/`contains_hash`), otherwise
//! as a hashed `u64` item (`bloomfilter::Bloom<u64>`, `HashSet<u64>`).
//!
//! Environment: `URLSEEN_BENCH_BIG=0` skips the 1 GiB cases; `URLSEEN_BENCH_HASHSET_BIG=1` adds
//! a `HashSet<u64>` at the 1 GiB size (~430 M entries, about 5 GiB of RAM; off by default).
//!
//! `urlseen-blocked*` is `BlockedBloom::new`: the sectorized probe scheme since 2026-11-25 (the
//! scattered one before; docs/filters.md).
//!
//! Exception: the 1 GiB `bloomfilter` is not filled by inserts (it would take over ten minutes
//! on a small machine) but set directly to the same bit density (29.5 %), plus real inserts of
//! the fingerprints the `contains_hit` group queries.

use std::collections::HashSet;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use urlseen_filter::hash::mix64;
use urlseen_filter::{BlockScheme, BlockedBloom, BloomFilter};

const BATCH: usize = 1024;
const BITS_PER_ITEM: u64 = 10;
const K: u32 = 7;
const SEED: u64 = 0x00C0_FFEE;
/// Fingerprint streams: inserted members, fresh inserts and never-inserted strangers.
const MEMBER_BASE: u64 = 1 << 40;
const FRESH_BASE: u64 = 1 << 50;
const STRANGER_BASE: u64 = 1 << 60;
const POOL: usize = 1 << 20;

/// One implementation under test.
trait Peer: Clone {
    fn insert(&mut self, fp: u64) -> bool;
    fn contains(&self, fp: u64) -> bool;
    fn insert_batch(&mut self, fps: &[u64], out: &mut [bool]) {
        for (fp, o) in fps.iter().zip(out) {
            *o = self.insert(*fp);
        }
    }
    fn contains_batch(&self, fps: &[u64], out: &mut [bool]) {
        for (fp, o) in fps.iter().zip(out) {
            *o = self.contains(*fp);
        }
    }
}

/// Our filters: single calls through `insert`/`contains`, batched calls through their own
/// prefetching `insert_batch`/`contains_batch`.
#[derive(Clone)]
struct Ours<F>(F);

macro_rules! ours {
    ($ty:ty) => {
        impl Peer for Ours<$ty> {
            #[inline]
            fn insert(&mut self, fp: u64) -> bool {
                self.0.insert(fp)
            }
            #[inline]
            fn contains(&self, fp: u64) -> bool {
                self.0.contains(fp)
            }
            fn insert_batch(&mut self, fps: &[u64], out: &mut [bool]) {
                self.0.insert_batch(fps, out);
            }
            fn contains_batch(&self, fps: &[u64], out: &mut [bool]) {
                self.0.contains_batch(fps, out);
            }
        }
    };
}
ours!(BlockedBloom);
ours!(BloomFilter);

#[derive(Clone)]
struct FastBloom(fastbloom::BloomFilter);
impl Peer for FastBloom {
    #[inline]
    fn insert(&mut self, fp: u64) -> bool {
        self.0.insert_hash(fp)
    }
    #[inline]
    fn contains(&self, fp: u64) -> bool {
        self.0.contains_hash(fp)
    }
}

#[derive(Clone)]
struct BloomFilterCrate(bloomfilter::Bloom<u64>);
impl Peer for BloomFilterCrate {
    #[inline]
    fn insert(&mut self, fp: u64) -> bool {
        self.0.check_and_set(&fp)
    }
    #[inline]
    fn contains(&self, fp: u64) -> bool {
        self.0.check(&fp)
    }
}

#[derive(Clone)]
struct StdHashSet(HashSet<u64>);
impl Peer for StdHashSet {
    #[inline]
    fn insert(&mut self, fp: u64) -> bool {
        !self.0.insert(fp)
    }
    #[inline]
    fn contains(&self, fp: u64) -> bool {
        self.0.contains(&fp)
    }
}

/// A size of the benchmark.
#[derive(Clone, Copy)]
struct Size {
    label: &'static str,
    bits: u64,
    big: bool,
}

impl Size {
    fn capacity(self) -> u64 {
        self.bits / BITS_PER_ITEM
    }
}

fn member(i: u64) -> u64 {
    mix64(MEMBER_BASE + i)
}

fn pool(base: u64, len: usize) -> Vec<u64> {
    (0..len as u64).map(|i| mix64(base + i)).collect()
}

/// Fills `peer` with the first `n` members, by batches (the peer's fastest path).
fn prefill<P: Peer>(peer: &mut P, n: u64) {
    let mut chunk = vec![0u64; BATCH];
    let mut out = vec![false; BATCH];
    let mut i = 0;
    while i < n {
        let len = (n - i).min(BATCH as u64) as usize;
        for (j, slot) in chunk[..len].iter_mut().enumerate() {
            *slot = member(i + j as u64);
        }
        peer.insert_batch(&chunk[..len], &mut out[..len]);
        i += len as u64;
    }
}

/// How an implementation is driven: its benchmark name and whether it uses the batched calls.
type Mode = (&'static str, bool);

/// Fills one filter to half capacity, then runs the three groups for each of its modes (the
/// modes share the filter, so it is filled once).
fn bench_peer<P: Peer>(
    c: &mut Criterion,
    size: Size,
    mut peer: P,
    modes: &[Mode],
    prefilled: bool,
) {
    let cap = size.capacity();
    let t = Instant::now();
    if prefilled {
        // Members then only serve as "hits" below if they were really inserted: insert the
        // ones the hit pool uses.
        let stride = (cap / 2 / POOL as u64).max(1);
        for i in 0..(cap / 2).min(POOL as u64) {
            peer.insert(member(i * stride));
        }
    } else {
        prefill(&mut peer, cap / 2);
    }
    eprintln!("{}/{}: prefilled {} items in {:.1?}", modes[0].0, size.label, cap / 2, t.elapsed());
    // Hits spread over the whole member range; misses never inserted.
    let stride = (cap / 2 / POOL as u64).max(1);
    let hits: Vec<u64> = (0..(cap / 2).min(POOL as u64)).map(|i| member(i * stride)).collect();
    let misses = pool(STRANGER_BASE, POOL);
    let mut out = vec![false; BATCH];

    let configure = |g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>| {
        g.throughput(Throughput::Elements(BATCH as u64));
        if size.big {
            g.sample_size(10).warm_up_time(Duration::from_secs(1));
            g.measurement_time(Duration::from_secs(2));
        }
    };

    for (group, probes) in [("contains_hit", &hits), ("contains_miss", &misses)] {
        let mut g = c.benchmark_group(group);
        configure(&mut g);
        for &(name, batched) in modes {
            g.bench_function(BenchmarkId::new(name, size.label), |b| {
                let mut at = 0usize;
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        if at + BATCH > probes.len() {
                            at = 0;
                        }
                        let fps = &probes[at..at + BATCH];
                        at += BATCH;
                        let start = Instant::now();
                        if batched {
                            peer.contains_batch(fps, &mut out);
                        } else {
                            for (fp, o) in fps.iter().zip(out.iter_mut()) {
                                *o = peer.contains(*fp);
                            }
                        }
                        total += start.elapsed();
                        black_box(&out);
                    }
                    total
                });
            });
        }
        g.finish();
    }

    // Inserts of fresh items. The small filters are reset from a copy (untimed) every cap/4.
    let template = if size.big { None } else { Some(peer.clone()) };
    let budget = if size.big { u64::MAX } else { cap / 4 };
    let mut g = c.benchmark_group("insert");
    configure(&mut g);
    let mut next = 0u64;
    for &(name, batched) in modes {
        g.bench_function(BenchmarkId::new(name, size.label), |b| {
            let mut since_reset = 0u64;
            let mut fps = vec![0u64; BATCH];
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    if since_reset >= budget {
                        if let Some(t) = &template {
                            peer = t.clone();
                        }
                        since_reset = 0;
                    }
                    for (j, slot) in fps.iter_mut().enumerate() {
                        *slot = mix64(FRESH_BASE + next + j as u64);
                    }
                    next += BATCH as u64;
                    since_reset += BATCH as u64;
                    let start = Instant::now();
                    if batched {
                        peer.insert_batch(&fps, &mut out);
                    } else {
                        for (fp, o) in fps.iter().zip(out.iter_mut()) {
                            *o = peer.insert(*fp);
                        }
                    }
                    total += start.elapsed();
                    black_box(&out);
                }
                total
            });
        });
    }
    g.finish();
    if size.big {
        eprintln!("{}/{}: {} items after the insert runs", modes[0].0, size.label, cap / 2 + next);
    }
}

/// Sets each bit of `bloom`'s array with probability ≈ 0.297 (`(a & b) | (c & d & e & f)` of
/// random words), the density of a filter holding half its capacity at 10 bits/item and k = 7.
fn random_fill_bloomfilter(bloom: bloomfilter::Bloom<u64>, bits: u64) -> bloomfilter::Bloom<u64> {
    let mut bytes = bloom.into_bytes();
    let header = bytes.len() - (bits / 8) as usize;
    let mut state = 0x1234_5678u64;
    let mut next = || {
        state = state.wrapping_add(1);
        mix64(state)
    };
    for chunk in bytes[header..].chunks_exact_mut(8) {
        let word = (next() & next()) | (next() & next() & next() & next());
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    bloomfilter::Bloom::from_bytes(bytes).expect("bloomfilter accepts its own bytes")
}

fn filters(c: &mut Criterion) {
    let big = std::env::var("URLSEEN_BENCH_BIG").map_or(true, |v| v != "0");
    let hashset_big = std::env::var("URLSEEN_BENCH_HASHSET_BIG").is_ok_and(|v| v == "1");
    let mut sizes = vec![Size { label: "1MiB", bits: 1 << 23, big: false }];
    if big {
        sizes.push(Size { label: "1GiB", bits: 1 << 33, big: true });
    }
    for size in sizes {
        let cap = size.capacity();
        bench_peer(
            c,
            size,
            Ours(BlockedBloom::new(size.bits, K, SEED)),
            &[("urlseen-blocked-batch", true), ("urlseen-blocked", false)],
            false,
        );
        bench_peer(
            c,
            size,
            Ours(BloomFilter::new(size.bits, K, SEED)),
            &[("urlseen-classic-batch", true), ("urlseen-classic", false)],
            false,
        );
        let fast = fastbloom::BloomFilter::with_num_bits(size.bits as usize).seed(&1).hashes(K);
        assert_eq!(fast.num_bits() as u64, size.bits);
        bench_peer(c, size, FastBloom(fast), &[("fastbloom", false)], false);
        let mut bloom = bloomfilter::Bloom::<u64>::new_with_seed(
            (size.bits / 8) as usize,
            cap as usize,
            &[7u8; 32],
        )
        .expect("bloomfilter parameters");
        assert_eq!(bloom.number_of_hash_functions(), K);
        let mut prefilled = false;
        if size.big {
            // Two SipHash-1-3 and seven divisions per item: inserting 430 M items would take
            // more than ten minutes here, so fill the bit array directly at the density those
            // inserts give, 1 − e^{−k·n/m} = 1 − e^{−0.35} ≈ 29.5 %.
            bloom = random_fill_bloomfilter(bloom, size.bits);
            prefilled = true;
        }
        bench_peer(c, size, BloomFilterCrate(bloom), &[("bloomfilter", false)], prefilled);
        if !size.big || hashset_big {
            let set = HashSet::with_capacity(cap as usize);
            bench_peer(c, size, StdHashSet(set), &[("std-hashset", false)], false);
        }
    }
}

/// The one-cache-line limit (issue 10): batched check-and-insert into our 1 GiB blocked filter
/// (k = 7; `urlseen-blocked-batch` is the default, sectorized scheme, `urlseen-blocked-scattered-
/// batch` the first one) against the least any filter touching one random cache line per item
/// can do: one random 64-bit read-modify-write per item, into a 1 GiB array of words, with the
/// same hash (`mix64`), the same 16-item prefetch window and the same 2 MiB pages (`madvise`) as
/// the filter. All filled to half capacity first (one after the other: one 1 GiB array at a
/// time). `URLSEEN_BENCH_LIMIT=0` skips it.
fn one_line_limit(c: &mut Criterion) {
    if std::env::var("URLSEEN_BENCH_LIMIT").is_ok_and(|v| v == "0") {
        return;
    }
    let bits = 1u64 << 33;
    let cap = bits / BITS_PER_ITEM;
    let mut g = c.benchmark_group("one_line_limit");
    g.throughput(Throughput::Elements(BATCH as u64))
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let mut out = vec![false; BATCH];
    for (name, scheme) in [
        ("urlseen-blocked-batch", BlockScheme::Sectorized),
        ("urlseen-blocked-scattered-batch", BlockScheme::Scattered),
    ] {
        let mut filter = Ours(BlockedBloom::with_scheme(bits, K, SEED, scheme));
        prefill(&mut filter, cap / 2);
        let fresh = pool(FRESH_BASE, POOL);
        let mut at = 0;
        g.bench_function(BenchmarkId::new(name, "1GiB"), |b| {
            b.iter(|| {
                filter.insert_batch(&fresh[at..at + BATCH], &mut out);
                at = (at + BATCH) % (POOL - BATCH);
                black_box(&out);
            });
        });
    }
    let mut words = OneWord::new(bits);
    let mut chunk = vec![0u64; BATCH];
    let mut i = 0;
    while i < cap / 2 {
        let len = (cap / 2 - i).min(BATCH as u64) as usize;
        for (j, slot) in chunk[..len].iter_mut().enumerate() {
            *slot = member(i + j as u64);
        }
        words.insert_batch(&chunk[..len], &mut out[..len]);
        i += len as u64;
    }
    let fresh = pool(FRESH_BASE + 1, POOL);
    let mut at = 0;
    g.bench_function(BenchmarkId::new("one-word-rmw-batch", "1GiB"), |b| {
        b.iter(|| {
            words.insert_batch(&fresh[at..at + BATCH], &mut out);
            at = (at + BATCH) % (POOL - BATCH);
            black_box(&out);
        });
    });
    g.finish();
}

/// One bit per item in one random 64-bit word: the one-cache-line limit's baseline.
struct OneWord {
    words: Vec<u64>,
}

impl OneWord {
    fn new(bits: u64) -> Self {
        let words = vec![0u64; (bits / 64) as usize];
        #[cfg(target_os = "linux")]
        {
            const HUGE: usize = 2 << 20;
            let start = words.as_ptr() as usize;
            let (first, last) =
                (start.next_multiple_of(HUGE), (start + words.len() * 8) / HUGE * HUGE);
            if last > first {
                #[expect(unsafe_code, reason = "madvise is a foreign function")]
                // SAFETY: [first, last) lies inside the live allocation of `words`, page-aligned;
                // MADV_HUGEPAGE only changes how the kernel backs it, never its contents.
                unsafe {
                    libc::madvise(first as *mut libc::c_void, last - first, libc::MADV_HUGEPAGE);
                }
            }
        }
        OneWord { words }
    }

    #[inline(always)]
    fn slot(&self, fp: u64) -> (usize, u64) {
        let h = mix64(fp ^ SEED);
        let word = ((u128::from(h) * self.words.len() as u128) >> 64) as usize;
        (word, 1u64 << (h & 63))
    }

    fn insert_batch(&mut self, fps: &[u64], out: &mut [bool]) {
        const WINDOW: usize = 16;
        for &fp in fps.iter().take(WINDOW) {
            prefetch(&self.words[self.slot(fp).0]);
        }
        for (i, (&fp, out)) in fps.iter().zip(out.iter_mut()).enumerate() {
            if let Some(&ahead) = fps.get(i + WINDOW) {
                prefetch(&self.words[self.slot(ahead).0]);
            }
            let (word, mask) = self.slot(fp);
            let w = &mut self.words[word];
            *out = *w & mask != 0;
            *w |= mask;
        }
    }
}

/// A software prefetch of `*target`'s cache line (the filter crate's is private).
#[inline(always)]
fn prefetch(target: &u64) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        #[expect(unsafe_code, reason = "_mm_prefetch is an unsafe intrinsic")]
        // SAFETY: a prefetch is only a hint; it never faults. SSE is in the x86-64 baseline.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(target).cast::<i8>());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = target;
    }
}

criterion_group!(benches, filters, one_line_limit);
criterion_main!(benches);
