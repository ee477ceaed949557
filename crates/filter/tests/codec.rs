//! The encoding: golden fixtures pin the bytes, round trips, and corrupt input never panics.

use std::path::PathBuf;

use proptest::prelude::*;
use urlseen_filter::codec::{self, FORMAT_VERSION, HEADER_LEN, MAGIC};
use urlseen_filter::frame::FormatError;
use urlseen_filter::hash::{fingerprint, mix64};
use urlseen_filter::{
    BitmapIndex, BlockScheme, BlockedBloom, BloomFilter, CountingBloom, Error, FilterKind,
};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// Compares `bytes` with the checked-in fixture (`URLSEEN_BLESS=1` rewrites it).
fn golden(name: &str, bytes: &[u8], pinned_hash: u64) {
    let path = fixture(name);
    if std::env::var_os("URLSEEN_BLESS").is_some() {
        std::fs::write(&path, bytes).expect("write fixture");
    }
    let stored = std::fs::read(&path).expect("read fixture");
    assert_eq!(bytes, &stored[..], "{name}: encoding changed; bump FORMAT_VERSION");
    assert_eq!(fingerprint(bytes, 0), pinned_hash, "{name}: hash of the encoding");
}

fn small_fps() -> impl Iterator<Item = u64> {
    (0..20u64).map(|i| fingerprint(format!("https://example.com/{i}").as_bytes(), 0))
}

fn small_bloom() -> BloomFilter {
    let mut f = BloomFilter::new(200, 3, 42);
    small_fps().for_each(|fp| {
        f.insert(fp);
    });
    f
}
/// The first (scattered) scheme: the bits every blocked filter written before the sectorized
/// scheme holds. Its fixture must never change.
fn small_blocked() -> BlockedBloom {
    let mut f = BlockedBloom::with_scheme(1024, 5, 42, BlockScheme::Scattered);
    small_fps().for_each(|fp| {
        f.insert(fp);
    });
    f
}
/// The sectorized scheme (kind 5), with a k that takes a partial round (11 = 8 + 3).
fn small_sectorized() -> BlockedBloom {
    let mut f = BlockedBloom::with_scheme(1024, 11, 42, BlockScheme::Sectorized);
    small_fps().for_each(|fp| {
        f.insert(fp);
    });
    f
}
fn small_counting() -> CountingBloom {
    let mut f = CountingBloom::new(101, 3, 42);
    small_fps().for_each(|fp| {
        f.insert(fp);
    });
    f
}
fn small_bitmap() -> BitmapIndex {
    let mut f = BitmapIndex::with_seed(8, 42);
    small_fps().for_each(|fp| {
        f.insert(fp);
    });
    f
}

#[test]
fn golden_bloom() {
    let f = small_bloom();
    golden("bloom_v1.bin", &f.encode(), PINNED_BLOOM);
    assert_eq!(BloomFilter::decode(&std::fs::read(fixture("bloom_v1.bin")).unwrap()).unwrap(), f);
}
#[test]
fn golden_blocked() {
    let f = small_blocked();
    golden("blocked_v1.bin", &f.encode(), PINNED_BLOCKED);
    assert_eq!(
        BlockedBloom::decode(&std::fs::read(fixture("blocked_v1.bin")).unwrap()).unwrap(),
        f
    );
}
/// An old-scheme encoding decodes to a scattered filter that answers from the same bits, and
/// keeps setting bits where older builds did.
#[test]
fn golden_blocked_keeps_the_scattered_scheme() {
    let old = BlockedBloom::decode(&std::fs::read(fixture("blocked_v1.bin")).unwrap()).unwrap();
    assert_eq!(old.scheme(), BlockScheme::Scattered);
    assert!(small_fps().all(|fp| old.contains(fp)));
    // Inserting the same items again into a fresh scattered filter gives the same bytes.
    assert_eq!(small_blocked().encode(), std::fs::read(fixture("blocked_v1.bin")).unwrap());
    // Its positions are those of the first scheme (pinned by the fixture's bits): every
    // position of every item is set in the decoded filter, and those are all its bits.
    let mut all: Vec<u64> = small_fps().flat_map(|fp| old.positions(fp)).collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len() as u64, old.count_ones());
    // The same items in the sectorized scheme set other bits.
    let mut new = BlockedBloom::with_scheme(1024, 5, 42, BlockScheme::Sectorized);
    small_fps().for_each(|fp| {
        new.insert(fp);
    });
    assert_ne!(new.encode()[HEADER_LEN..], old.encode()[HEADER_LEN..]);
}
#[test]
fn golden_sectorized() {
    let f = small_sectorized();
    golden("blocked_sectorized_v1.bin", &f.encode(), PINNED_SECTORIZED);
    let back = BlockedBloom::decode(&std::fs::read(fixture("blocked_sectorized_v1.bin")).unwrap())
        .unwrap();
    assert_eq!(back, f);
    assert_eq!(back.scheme(), BlockScheme::Sectorized);
    let b = f.encode();
    assert_eq!(b[10], FilterKind::BlockedSectorized.tag());
    assert_eq!(b[10], 5);
    assert_eq!(codec::peek_kind(&b).unwrap(), FilterKind::BlockedSectorized);
    assert_eq!(BlockedBloom::read_from(&b[..]).unwrap(), f);
    // Other filters refuse it by kind, as a build that predates the scheme refuses tag 5.
    assert!(matches!(
        BloomFilter::decode(&b),
        Err(Error::WrongKind { expected: FilterKind::Bloom, found: 5 })
    ));
}
#[test]
fn golden_counting() {
    let f = small_counting();
    golden("counting_v1.bin", &f.encode(), PINNED_COUNTING);
    assert_eq!(
        CountingBloom::decode(&std::fs::read(fixture("counting_v1.bin")).unwrap()).unwrap(),
        f
    );
}
#[test]
fn golden_bitmap() {
    let f = small_bitmap();
    golden("bitmap_v1.bin", &f.encode(), PINNED_BITMAP);
    assert_eq!(BitmapIndex::decode(&std::fs::read(fixture("bitmap_v1.bin")).unwrap()).unwrap(), f);
}

const PINNED_BLOOM: u64 = 2992343625126496942;
const PINNED_BLOCKED: u64 = 2050659675197077606;
const PINNED_SECTORIZED: u64 = 4568511646242202130;
const PINNED_COUNTING: u64 = 16875384085624596233;
const PINNED_BITMAP: u64 = 3160170401396912097;

#[test]
fn header_layout() {
    let f = small_blocked();
    let b = f.encode();
    assert_eq!(&b[0..8], &MAGIC);
    assert_eq!(u16::from_le_bytes([b[8], b[9]]), FORMAT_VERSION);
    assert_eq!(b[10], FilterKind::Blocked.tag());
    assert_eq!(b[11], 0);
    assert_eq!(u32::from_le_bytes(b[12..16].try_into().unwrap()), 5);
    assert_eq!(u64::from_le_bytes(b[16..24].try_into().unwrap()), 1024);
    assert_eq!(u64::from_le_bytes(b[24..32].try_into().unwrap()), 42);
    assert_eq!(u64::from_le_bytes(b[32..40].try_into().unwrap()), f.len());
    assert_eq!(u64::from_le_bytes(b[40..48].try_into().unwrap()), 128);
    assert_eq!(b.len(), HEADER_LEN + 128 + 8);
    let sum = u64::from_le_bytes(b[b.len() - 8..].try_into().unwrap());
    assert_eq!(sum, xxhash_of(&b[..b.len() - 8]));
    assert_eq!(codec::peek_kind(&b).unwrap(), FilterKind::Blocked);
}

/// XXH3-64 with seed 0, the checksum of the format.
fn xxhash_of(bytes: &[u8]) -> u64 {
    fingerprint(bytes, 0)
}

/// Re-checksums a (modified) encoding so that a test reaches the validation behind the checksum.
fn reseal(mut b: Vec<u8>) -> Vec<u8> {
    let end = b.len() - 8;
    let sum = xxhash_of(&b[..end]);
    b[end..].copy_from_slice(&sum.to_le_bytes());
    b
}

#[test]
fn typed_errors() {
    let good = small_bloom().encode();

    let mut b = good.clone();
    b[0] = b'X';
    assert!(matches!(BloomFilter::decode(&b), Err(Error::Format(FormatError::BadMagic { .. }))));

    let mut b = good.clone();
    b[8] = 2;
    assert!(matches!(
        BloomFilter::decode(&b),
        Err(Error::Format(FormatError::UnsupportedVersion { found: 2, newest: 1, .. }))
    ));

    assert!(matches!(
        BlockedBloom::decode(&good),
        Err(Error::WrongKind { expected: FilterKind::Blocked, found: 1 })
    ));

    assert!(matches!(
        BloomFilter::decode(&good[..good.len() - 3]),
        Err(Error::Format(FormatError::Truncated { section: "checksum", .. }))
    ));
    assert!(matches!(
        BloomFilter::decode(&good[..60]),
        Err(Error::Format(FormatError::Truncated { section: "payload", .. }))
    ));
    assert!(matches!(
        BloomFilter::decode(&good[..20]),
        Err(Error::Format(FormatError::Truncated { section: "header", .. }))
    ));
    assert!(matches!(
        BloomFilter::read_from(&good[..60]),
        Err(Error::Format(FormatError::Truncated { section: "payload", .. }))
    ));

    let mut b = good.clone();
    b.push(0);
    assert!(matches!(BloomFilter::decode(&b), Err(Error::TrailingBytes { count: 1 })));

    let mut b = good.clone();
    b[HEADER_LEN + 5] ^= 0x10; // a payload byte

    assert!(matches!(
        BloomFilter::decode(&b),
        Err(Error::Format(FormatError::ChecksumMismatch { .. }))
    ));

    // Parameters are checked even under a valid checksum.
    let mut b = good.clone();
    b[12..16].copy_from_slice(&0u32.to_le_bytes());
    assert!(matches!(
        BloomFilter::decode(&reseal(b)),
        Err(Error::InvalidParameter { field: "num_hashes", .. })
    ));
    let mut b = good.clone();
    b[40..48].copy_from_slice(&1u64.to_le_bytes());
    assert!(matches!(
        BloomFilter::decode(&reseal(b)),
        Err(Error::InvalidParameter { field: "payload_len", .. })
    ));
    // A set padding bit (200 bits: the last word uses 8 of its 64 bits).
    let mut b = good.clone();
    let last_word_top = HEADER_LEN + 3 * 8 + 7;
    b[last_word_top] |= 0x80;
    assert!(matches!(
        BloomFilter::decode(&reseal(b)),
        Err(Error::InvalidParameter { field: "padding", .. })
    ));
    let mut b = small_blocked().encode();
    b[16..24].copy_from_slice(&1000u64.to_le_bytes());
    assert!(matches!(
        BlockedBloom::decode(&reseal(b)),
        Err(Error::InvalidParameter { field: "num_bits", .. })
    ));
    let mut b = small_bitmap().encode();
    b[12..16].copy_from_slice(&2u32.to_le_bytes());
    assert!(matches!(
        BitmapIndex::decode(&reseal(b)),
        Err(Error::InvalidParameter { field: "num_hashes", .. })
    ));
    let mut b = small_counting().encode();
    let last = b.len() - 9;
    b[last] |= 0xF0; // 101 counters: the last high nibble is padding
    assert!(matches!(
        CountingBloom::decode(&reseal(b)),
        Err(Error::InvalidParameter { field: "padding", .. })
    ));
    let mut b = good;
    b[11] = 1;
    assert!(matches!(
        BloomFilter::decode(&b),
        Err(Error::InvalidParameter { field: "reserved", .. })
    ));
}

#[test]
fn a_forged_huge_header_allocates_nothing_big() {
    // 2^40 bits claimed (128 GiB) with a consistent payload length, but no payload.
    let mut b = small_blocked().encode();
    b[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
    b[40..48].copy_from_slice(&(1u64 << 37).to_le_bytes());
    b.truncate(HEADER_LEN + 100);
    // From a slice: rejected before any allocation.
    assert!(matches!(
        BlockedBloom::decode(&b),
        Err(Error::Format(FormatError::Truncated { section: "payload", needed, got: 100, .. })) if needed == 1 << 37
    ));
    // From a stream: read in bounded chunks, fails at the end of the data.
    assert!(matches!(
        BlockedBloom::read_from(&b[..]),
        Err(Error::Format(FormatError::Truncated { section: "payload", got: 100, .. }))
    ));
    // Beyond the limit.
    b[16..24].copy_from_slice(&(1u64 << 41).to_le_bytes());
    assert!(matches!(
        BlockedBloom::read_from(&b[..]),
        Err(Error::InvalidParameter { field: "num_bits", .. })
    ));
}

#[test]
fn io_errors_are_typed() {
    struct Failing;
    impl std::io::Read for Failing {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk on fire"))
        }
    }
    assert!(matches!(BloomFilter::read_from(Failing), Err(Error::Io(_))));
}

#[test]
fn streams_round_trip() {
    let f = small_counting();
    let mut out = Vec::new();
    f.write_to(&mut out).unwrap();
    assert_eq!(out, f.encode());
    let mut reader = &out[..];
    assert_eq!(CountingBloom::read_from(&mut reader).unwrap(), f);
    assert!(reader.is_empty());
}

fn arb_fps() -> impl Strategy<Value = Vec<u64>> {
    proptest::collection::vec(any::<u64>(), 0..200)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn bloom_round_trip(bits in 1u64..5000, k in 1u32..12, seed: u64, fps in arb_fps()) {
        let mut f = BloomFilter::new(bits, k, seed);
        fps.iter().for_each(|&fp| { f.insert(fp); });
        let back = BloomFilter::decode(&f.encode()).unwrap();
        prop_assert_eq!(&back, &f);
        prop_assert!(fps.iter().all(|&fp| back.contains(fp)));
    }

    #[test]
    fn blocked_round_trip(bits in 1u64..5000, k in 1u32..20, seed: u64, fps in arb_fps(),
                          sectorized: bool) {
        let scheme = if sectorized { BlockScheme::Sectorized } else { BlockScheme::Scattered };
        let mut f = BlockedBloom::with_scheme(bits, k, seed, scheme);
        fps.iter().for_each(|&fp| { f.insert(fp); });
        let back = BlockedBloom::decode(&f.encode()).unwrap();
        prop_assert_eq!(&back, &f);
        prop_assert_eq!(back.scheme(), scheme);
        prop_assert!(fps.iter().all(|&fp| back.contains(fp)));
        let read = BlockedBloom::read_from(&f.encode()[..]).unwrap();
        prop_assert_eq!(&read, &f);
    }

    #[test]
    fn counting_round_trip(counters in 1u64..3000, k in 1u32..10, seed: u64, fps in arb_fps()) {
        let mut f = CountingBloom::new(counters, k, seed);
        fps.iter().for_each(|&fp| f.add(fp));
        let back = CountingBloom::decode(&f.encode()).unwrap();
        prop_assert_eq!(&back, &f);
        prop_assert!(fps.iter().all(|&fp| back.contains(fp)));
    }

    #[test]
    fn bitmap_round_trip(s in 5u32..14, seed: u64, fps in arb_fps()) {
        let mut f = BitmapIndex::with_seed(s, seed);
        fps.iter().for_each(|&fp| { f.insert(fp); });
        let back = BitmapIndex::decode(&f.encode()).unwrap();
        prop_assert_eq!(&back, &f);
    }

    /// Arbitrary bytes, with or without a valid-looking start, never panic.
    #[test]
    fn arbitrary_bytes_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..300),
                                   kind in 1u8..7, version in 0u16..3) {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&version.to_le_bytes());
        b.push(kind);
        b.extend_from_slice(&tail);
        let _ = BloomFilter::decode(&b);
        let _ = BlockedBloom::decode(&b);
        let _ = CountingBloom::decode(&b);
        let _ = BitmapIndex::decode(&b);
        let _ = BlockedBloom::read_from(&b[..]);
        let _ = BloomFilter::decode(&tail);
        let _ = codec::peek_kind(&tail);
    }

    /// Any single corrupted byte, and any truncation, of a valid encoding is an error.
    #[test]
    fn corruption_is_detected(which in 0usize..5, at: prop::sample::Index, flip in 1u8..=255,
                              cut: prop::sample::Index) {
        let good = match which {
            0 => small_bloom().encode(),
            1 => small_blocked().encode(),
            2 => small_counting().encode(),
            3 => small_sectorized().encode(),
            _ => small_bitmap().encode(),
        };
        let decode = |b: &[u8]| match which {
            0 => BloomFilter::decode(b).map(|_| ()),
            1 | 3 => BlockedBloom::decode(b).map(|_| ()),
            2 => CountingBloom::decode(b).map(|_| ()),
            _ => BitmapIndex::decode(b).map(|_| ()),
        };
        prop_assert!(decode(&good).is_ok());
        let mut b = good.clone();
        b[at.index(good.len())] ^= flip;
        prop_assert!(decode(&b).is_err());
        prop_assert!(decode(&good[..cut.index(good.len())]).is_err());
    }
}

#[test]
fn mix64_differs_from_identity() {
    // Guards the fixtures' meaning: probes go through mix64.
    assert_ne!(mix64(1), 1);
}
