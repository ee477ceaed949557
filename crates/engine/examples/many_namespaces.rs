//! Many small namespaces in one embedded `Db`: creates N namespaces (100,000 unless given) of
//! ten URLs each, as a crawl platform's jobs would, and prints the creation rate and the RSS
//! each namespace added (docs/benchmarks.md, "Many namespaces in one server").
//!
//! ```text
//! cargo run --release -p urlseen-engine --example many_namespaces -- 100000
//! ```

use std::time::Instant;

use urlseen_engine::{Db, NamespaceOptions};

/// Resident bytes of this process (Linux `/proc/self/statm`; 0 elsewhere).
fn rss_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()));
    pages.unwrap_or(0) * 4096
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = match std::env::args().nth(1) {
        Some(arg) => arg.parse()?,
        None => 100_000,
    };
    let db = Db::in_memory();
    // What a server makes for a namespace a command names first (`URL.SEEN job:i …`).
    let options = NamespaceOptions { capacity: 100, ..NamespaceOptions::default() };
    let before = rss_bytes();
    let started = Instant::now();
    for i in 0..n {
        let ns = db.namespace_or_create(&format!("job:{i}"), options.clone())?;
        let urls: Vec<String> =
            (0..10).map(|j| format!("https://site{}.example/page/{j}", i % 1000)).collect();
        ns.seen_batch(&urls)?;
    }
    let secs = started.elapsed().as_secs_f64();
    let added = rss_bytes().saturating_sub(before);
    println!(
        "{n} namespaces of 10 URLs: {:.0} namespaces/s, {} bytes of RSS each",
        n as f64 / secs,
        added / n.max(1) as u64
    );
    Ok(())
}
