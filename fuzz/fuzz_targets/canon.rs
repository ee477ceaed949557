//! Feeds arbitrary strings to every canonicalization profile, with every option combination.
//!
//! Properties: no panic; the result is idempotent (`c(c(u)) == c(u)`); `canonicalize_into`
//! agrees with `canonicalize`; a successful result is never empty.
//!
//! Needs, in fuzz/Cargo.toml: `urlseen-canon = { path = "../crates/canon" }` and
//!
//! ```toml
//! [[bin]]
//! name = "canon"
//! path = "fuzz_targets/canon.rs"
//! test = false
//! doc = false
//! bench = false
//! ```
//!
//! Run: `cargo +nightly fuzz run canon -- -max_total_time=60`. The same properties run on
//! stable as proptests in crates/canon/tests/properties.rs.

#![no_main]

use libfuzzer_sys::fuzz_target;
use urlseen_canon::{Canonicalizer, Options, Profile};

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else { return };
    let Ok(input) = std::str::from_utf8(rest) else { return };
    let options = Options {
        profile: Profile::ALL[usize::from(flags & 3)],
        keep_fragments: flags & 4 != 0,
        keep_blank_values: flags & 8 != 0,
        sort_query: flags & 16 != 0,
        strip_tracking: flags & 32 != 0,
    };
    let canon = Canonicalizer::new(options);
    let once = canon.canonicalize(input);
    let mut buf = String::from("stale");
    let into = canon.canonicalize_into(input, &mut buf).map(|()| buf.clone());
    assert_eq!(once, into);
    if let Ok(once) = once {
        assert!(!once.is_empty());
        assert_eq!(canon.canonicalize(&once).as_ref(), Ok(&once), "not idempotent on {input:?}");
    }
});
