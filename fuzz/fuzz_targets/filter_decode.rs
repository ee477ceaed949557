//! Feeds arbitrary bytes to every filter's decoder (`BF.LOADCHUNK` and the snapshot files hand
//! them bytes from outside).
//!
//! Properties: no decoder panics; a filter that decodes encodes to bytes that decode to the
//! same filter.

#![no_main]

use libfuzzer_sys::fuzz_target;
use urlseen_filter::{BitmapIndex, BlockedBloom, BloomFilter, CountingBloom, codec};

fuzz_target!(|data: &[u8]| {
    let _ = codec::peek_kind(data);
    if let Ok(f) = BlockedBloom::decode(data) {
        assert_eq!(BlockedBloom::decode(&f.encode()).ok(), Some(f));
    }
    if let Ok(f) = BloomFilter::decode(data) {
        assert!(BloomFilter::decode(&f.encode()).is_ok());
    }
    if let Ok(f) = CountingBloom::decode(data) {
        assert!(CountingBloom::decode(&f.encode()).is_ok());
    }
    if let Ok(f) = BitmapIndex::decode(data) {
        assert!(BitmapIndex::decode(&f.encode()).is_ok());
    }
});
