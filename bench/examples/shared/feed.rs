//! The rate loop the filter-against-tree examples share (`tree_ceiling`, `presized_ratio`).

use std::time::Instant;

use urlseen_filter::hash;

/// Fingerprints per call of `insert`.
pub const BATCH: usize = 4096;

/// Feeds `count` fresh fingerprints from the counter `next` to `insert`, `BATCH` at a time; the
/// rate in millions a second.
pub fn feed(count: u64, next: &mut u64, insert: &mut dyn FnMut(&[u64], &mut [bool])) -> f64 {
    let (mut fps, mut out) = (vec![0u64; BATCH], vec![false; BATCH]);
    let start = Instant::now();
    let mut done = 0;
    while done < count {
        for fp in &mut fps {
            *fp = hash::mix64(*next);
            *next += 1;
        }
        insert(&fps, &mut out);
        done += BATCH as u64;
    }
    done as f64 / start.elapsed().as_secs_f64() / 1e6
}
