//! RAM holds the filters, not the fingerprints: over 5 million URLs, 30% of them repeats (a
//! crawl's stream, whose repeats are kept records that splits carry), the process's resident
//! memory stays under the filters plus 64 MiB, and grows by no more than the filters plus 16
//! MiB (fingerprints on the heap would add 28 MB). One test in its own binary, so that no other
//! test's memory is counted; read from /proc/self/status (Linux).

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

#[cfg(target_os = "linux")]
use urlseen_engine::{Db, NamespaceOptions};

/// `VmRSS` or `VmHWM` in bytes.
#[cfg(target_os = "linux")]
fn status(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
}

#[cfg(target_os = "linux")]
#[test]
fn resident_memory_at_5m_urls_is_the_filters_plus_buffers() {
    let before = status("VmRSS:").expect("/proc/self/status on Linux");
    let spill = tempfile::tempdir().unwrap();
    let db = Db::temporary(Some(spill.path())).unwrap();
    // Created small, so it grows by splits the whole way (every split streams from disk).
    let ns = db
        .create_namespace("big", NamespaceOptions { capacity: 100_000, ..Default::default() })
        .unwrap();
    const N: u64 = 5_000_000;
    const BATCH: u64 = 10_000;
    let mut fps = vec![0u64; BATCH as usize];
    let mut out = vec![false; BATCH as usize];
    let mut new = 0;
    let mut distinct = 0u64;
    for b in 0..N / BATCH {
        for (i, fp) in fps.iter_mut().enumerate() {
            let line = b * BATCH + i as u64;
            // 3 lines in 10 repeat an earlier URL.
            let id = if line % 10 < 3 && distinct > 0 {
                urlseen_filter::hash::mix64(line) % distinct
            } else {
                distinct += 1;
                distinct - 1
            };
            *fp = urlseen_filter::hash::mix64(id + 1);
        }
        ns.seen_fingerprints(&fps, &mut out).unwrap();
        new += out.iter().filter(|&&s| !s).count() as u64;
    }
    db.wait_for_splits();
    let stats = ns.stats();
    let (rss, peak) = (status("VmRSS:").unwrap(), status("VmHWM:").unwrap());
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    eprintln!(
        "{new} new of {N} lines: {} leaves; stats RAM {:.1} MiB, disk {:.1} MiB; RSS {:.1} MiB (was \
         {:.1} before), peak {:.1} MiB",
        stats.leaf_count,
        mib(stats.memory_bytes),
        mib(stats.disk_bytes),
        mib(rss),
        mib(before),
        mib(peak)
    );
    assert!(new > distinct * 99 / 100 && new <= distinct, "{new} new of {distinct}");
    // A URL namespace keeps what it records, not its repeats (docs/durability.md).
    assert_eq!(stats.kept, 0, "the repeats were kept");
    // On disk: every fingerprint but at most a buffer's worth (1,024) per leaf.
    let buffered_at_most = stats.leaf_count as u64 * 1024;
    assert!(stats.disk_bytes >= (new - buffered_at_most) * 16, "the fingerprints are on disk");
    assert!(peak <= stats.memory_bytes + (64 << 20), "peak RSS {peak} vs stats {stats:?}");
    assert!(
        rss.saturating_sub(before) <= stats.memory_bytes + (16 << 20),
        "RSS grew by {} for {} bytes of filters and buffers",
        rss - before,
        stats.memory_bytes
    );
    // And what `stats` reports is what RSS shows: it is not an understatement.
    assert!(rss.saturating_sub(before) + (8 << 20) >= stats.memory_bytes);
}
