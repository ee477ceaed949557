//! Helpers several of the engine's integration tests share: each test file is a crate of its
//! own, so what they share lives here (`mod support;`; urlseen-redis's tests include it by path).

#![allow(dead_code, reason = "each test file uses a part of the helpers")]

use std::path::Path;

use urlseen_engine::{NamespaceOptions, SplitPolicy};

/// Small and uniform leaves (no growth), so that a few thousand URLs make many splits.
pub fn small() -> NamespaceOptions {
    NamespaceOptions {
        capacity: 1_000,
        fpr: 0.01,
        split: SplitPolicy { growth: 1, ..Default::default() },
        ..NamespaceOptions::default()
    }
}

/// Distinct pseudo-random fingerprints, `n` of them, from stream `stream` (splitmix64's
/// finalizer: a bijection, so distinct inputs give distinct fingerprints).
pub fn fps(stream: u64, n: usize) -> Vec<u64> {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    (0..n as u64).map(|i| mix(stream << 40 | i)).collect()
}

/// Copies the files of a live data directory as a process crash leaves them: whatever was
/// written so far, no checkpoint, no close (and no lock file).
pub fn crash_image(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            crash_image(&path, &dest);
        } else if path.file_name().unwrap() != "LOCK" {
            std::fs::copy(&path, &dest).unwrap();
        }
    }
}

/// The most false positives `n` checks under `fpr` may give: the mean plus four standard
/// deviations and three more (so that a handful of checks cannot fail on one), a chance of
/// about 10^-5 per case for a filter that keeps the bound.
pub fn allowed(n: usize, fpr: f64) -> usize {
    let mean = n as f64 * fpr;
    (mean + 4.0 * mean.sqrt() + 3.0) as usize
}
