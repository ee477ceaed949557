//! Hashing primitives: the one fingerprint per URL, and the mixers every filter derives its probe
//! positions from.
//!
//! "Hash once": the canonical URL is hashed into a 64-bit [`fingerprint`] exactly once, upstream.
//! Every later decision (DSBF routing at each level, Bloom probe positions, the fingerprint-store
//! key) is derived from that fingerprint by mixing in a per-purpose seed with [`mix64`]. Because
//! [`mix64`] is a strong bijection, `mix64(fp ^ a)` and `mix64(fp ^ b)` behave as independent hashes
//! for `a != b`, so the routing upstream and the probes inside a leaf do not correlate.

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The 64-bit fingerprint of `bytes` under `seed`: XXH3-64 with a seed.
///
/// Stable across machines, endianness and versions of this crate (pinned by a test vector):
/// filters store fingerprints' consequences on disk, so this function must never change.
///
/// # Examples
/// ```
/// use urlseen_filter::hash::fingerprint;
/// // The official XXH3-64 test vector for the empty input with seed 0.
/// assert_eq!(fingerprint(b"", 0), 0x2D06_8005_38D3_94C2);
/// ```
#[inline]
#[must_use]
pub fn fingerprint(bytes: &[u8], seed: u64) -> u64 {
    xxh3_64_with_seed(bytes, seed)
}

/// The SplitMix64 output function (Steele, Lea & Flood; Stafford's "Mix13" constants) applied
/// to `x + 0x9E3779B97F4A7C15`: a strong, bijective 64-bit mixer.
///
/// Adding the golden-ratio increment first means `mix64(0) != 0`, unlike a bare finalizer such
/// as murmur3's `fmix64`, so a zero fingerprint with a zero seed is not a fixed point.
///
/// # Examples
/// ```
/// use urlseen_filter::hash::mix64;
/// assert_ne!(mix64(0), 0);
/// assert_ne!(mix64(1), mix64(2));
/// ```
#[inline]
#[must_use]
pub const fn mix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Maps a uniformly distributed `x` onto `0..n` without a division (Lemire's "fast range"):
/// `(x * n) >> 64` in 128-bit arithmetic.
///
/// It uses the *high* bits of `x`, so `x` must be well mixed in its high bits (every output of
/// [`mix64`] is). Returns 0 when `n == 0`.
///
/// # Examples
/// ```
/// use urlseen_filter::hash::reduce;
/// assert_eq!(reduce(0, 10), 0);
/// assert_eq!(reduce(u64::MAX, 10), 9);
/// assert_eq!(reduce(1 << 63, 10), 5);
/// ```
#[inline]
#[must_use]
pub const fn reduce(x: u64, n: u64) -> u64 {
    ((x as u128 * n as u128) >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_pinned() {
        // The official XXH3-64 test vector of the empty input with seed 0.
        assert_eq!(fingerprint(b"", 0), 0x2D06_8005_38D3_94C2);
        // Pinned values of this crate: a change here changes every persisted filter.
        assert_eq!(fingerprint(b"https://example.com/", 0), PINNED_EXAMPLE_0);
        assert_eq!(fingerprint(b"https://example.com/", 42), PINNED_EXAMPLE_42);
    }

    const PINNED_EXAMPLE_0: u64 = 5522761390303137003;
    const PINNED_EXAMPLE_42: u64 = 11319592507298473532;

    #[test]
    fn mix64_is_bijective_on_a_sample_and_pinned() {
        let mut seen = std::collections::HashSet::new();
        for x in 0..10_000u64 {
            assert!(seen.insert(mix64(x)));
        }
        // SplitMix64 with state 0 yields 0xE220A8397B1DCDAF as its first output.
        assert_eq!(mix64(0), 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn reduce_stays_in_range() {
        for n in [1u64, 2, 3, 7, 512, 1 << 33, u64::MAX] {
            for x in [0u64, 1, 12_345, 1 << 63, u64::MAX] {
                assert!(reduce(x, n) < n);
            }
        }
        assert_eq!(reduce(123, 0), 0);
    }
}
