//! The Bloom filter family of urlseen: pure data structures (no files, no sockets) that answer
//! "have I seen this URL fingerprint?" in bounded memory, with false positives at a rate you
//! choose and **never a false negative**.
//!
//! | type | what it is | use it for |
//! |---|---|---|
//! | [`BlockedBloom`] | cache-line blocked Bloom filter: one 64-byte block per operation | the default leaf filter |
//! | [`BloomFilter`] | classic Bloom filter (seed formulas), k probes anywhere in m bits | reference, smallest space at a given FPR |
//! | [`CountingBloom`] | 4-bit saturating counters (seed 004) | filters that must forget URLs |
//! | [`BitmapIndex`] | the seed-001 single-hash bitmap (k = 1) | a baseline to compare with |
//!
//! Every filter takes a 64-bit *fingerprint*, not a URL: the URL is canonicalized and hashed once
//! upstream ([`hash::fingerprint`]), and the filters derive their probe positions from the
//! fingerprint mixed with their own seed ([`hash::mix64`]). Sizing math lives in [`plan`].
//!
//! # Check-and-insert
//! A crawler's URL-seen test is one call that records the URL and says whether it was there:
//! ```
//! use urlseen_filter::{hash, BlockedBloom};
//!
//! let mut seen = BlockedBloom::with_capacity(1_000_000, 0.01, 42);
//! let fp = hash::fingerprint(b"https://example.com/", 0);
//! assert!(!seen.insert(fp)); // new
//! assert!(seen.insert(fp)); // seen (and always will be: no false negatives)
//! assert!(seen.contains(fp));
//! assert_eq!(seen.len(), 1);
//! ```
//!
//! # Batches
//! The batched calls prefetch the cache lines of upcoming items, so the memory latencies of a
//! big filter overlap instead of adding up:
//! ```
//! use urlseen_filter::BlockedBloom;
//!
//! let mut f = BlockedBloom::with_capacity(10_000, 0.001, 7);
//! let fps: Vec<u64> = (0..1000).collect();
//! let mut was_present = vec![false; fps.len()];
//! f.insert_batch(&fps, &mut was_present);
//! let mut out = vec![false; fps.len()];
//! f.contains_batch(&fps, &mut out);
//! assert!(out.iter().all(|&hit| hit));
//! ```
//!
//! # Sizing
//! ```
//! use urlseen_filter::plan::Plan;
//! let plan = Plan::new(1_000_000, 0.01, None).unwrap();
//! assert_eq!((plan.bits, plan.hashes), (9_585_059, 7)); // seed 002's example
//! ```
//!
//! # Forgetting
//! ```
//! use urlseen_filter::CountingBloom;
//! let mut f = CountingBloom::with_capacity(1000, 0.01, 1);
//! f.insert(5);
//! f.remove(5, |_position| 0).unwrap(); // the closure recounts saturated counters from a store
//! assert!(!f.contains(5));
//! ```
//!
//! # Persistence
//! Every filter encodes to a versioned, checksummed, little-endian format (see [`codec`]) and
//! decodes with full validation:
//! ```
//! use urlseen_filter::BlockedBloom;
//! let mut f = BlockedBloom::new(4096, 7, 1);
//! f.insert(99);
//! let bytes = f.encode();
//! assert_eq!(BlockedBloom::decode(&bytes).unwrap(), f);
//! ```
//!
//! # Errors
//! Every fallible call returns the crate's one [`Error`] (each call the variants its docs
//! name); a damaged frame is [`Error::Format`] with the [`frame::FormatError`] that the engine's
//! files share.
//!
//! # Quirks
//! - `insert` returns `true` for a *new* fingerprint when it is a false positive: the filter
//!   cannot tell; that is the price of bounded memory. [`len`](BlockedBloom::len) counts the
//!   inserts that returned `false`, so it slightly undercounts distinct items.
//! - The blocked filter needs a few percent more bits than the classic one for the same FPR
//!   ([`plan::sectorized_bits`] accounts for it); it pays that for one cache miss per operation.
//! - The blocked filter has two probe schemes ([`BlockScheme`]): new filters are sectorized;
//!   filters encoded before that scheme existed decode as [`BlockScheme::Scattered`] and keep
//!   setting the bits they always did.
//! - On Linux, bit arrays of 8 MiB or more are advised as transparent huge pages
//!   (`madvise(MADV_HUGEPAGE)`): a random probe into a 4 KiB-paged 1 GiB array nearly always
//!   misses the TLB. This, the prefetch intrinsic and the SSE2/AVX2 loads and stores of the
//!   sectorized blocks are the crate's only `unsafe`.
//! - A filter's probe positions depend on its seed: filters are only comparable (or mergeable)
//!   with equal seed and parameters.

pub mod codec;
pub mod frame;
pub mod hash;
pub mod plan;

mod arena;
mod bitmap;
mod blocked;
mod bloom;
mod counting;
mod error;
mod prefetch;

pub use arena::arena_idle_bytes;
pub use bitmap::{BitmapIndex, DEFAULT_LOG2_SLOTS};
pub use blocked::{BlockScheme, BlockedBloom};
pub use bloom::BloomFilter;
pub use codec::FilterKind;
pub use counting::{CountingBloom, SATURATED};
pub use error::{Error, Result};
pub use prefetch::prefetch;

/// Bits in one block of [`BlockedBloom`]: one 64-byte cache line.
pub const BLOCK_BITS: u64 = 512;
/// The largest filter this crate builds or decodes: 2^40 bits (128 GiB). Decoding rejects
/// anything larger before allocating.
pub const MAX_BITS: u64 = 1 << 40;
/// The largest number of hash functions (probes) per item.
pub const MAX_HASHES: u32 = 64;

/// The interface every filter shares, so that benchmarks and experiments treat them alike.
pub trait Filter {
    /// Check-and-insert: records `fp` and returns whether it was (maybe) present already.
    fn insert(&mut self, fp: u64) -> bool;
    /// Whether `fp` is (maybe) present. Never `false` for an inserted fingerprint.
    fn contains(&self, fp: u64) -> bool;
    /// The number of bits (or counters) of the filter.
    fn num_bits(&self) -> u64;
    /// The number of probes per item.
    fn num_hashes(&self) -> u32;
    /// Heap memory held by the filter, in bytes.
    fn memory_bytes(&self) -> usize;
}

pub(crate) fn check_params(bits: u64, hashes: u32) -> Result<()> {
    if !(1..=MAX_BITS).contains(&bits) {
        return Err(Error::Bits { bits });
    }
    if !(1..=MAX_HASHES).contains(&hashes) {
        return Err(Error::Hashes { hashes });
    }
    Ok(())
}

/// Validates a false-positive rate given to a `with_capacity` constructor.
#[track_caller]
pub(crate) fn assert_fpr(p: f64) {
    assert!(p > 0.0 && p < 1.0, "false-positive rate must be strictly between 0 and 1, got {p}");
}
