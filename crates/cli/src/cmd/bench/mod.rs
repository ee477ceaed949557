//! `urlseen bench …`: the papers' experiments, reproduced, and throughput measurements.

pub mod balance;
pub mod bitmap;
pub mod fpr;
pub mod imp_cb;
pub mod redis;
pub mod server;

/// Experiments and benchmarks.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Seed 000, Fig. 7: measured FPR of classic filters vs DSBFs with c leaves, beside formula (8).
    Fpr(fpr::Args),
    /// Seed 000, Fig. 10/11: a fixed 32 kB filter per domain vs a DSBF (H=1, c=10) on
    /// power-law host sizes.
    Balance(balance::Args),
    /// Seed 004: dedup time of the fingerprint store alone vs IMP-CB (counting Bloom in front),
    /// both on disk, at 0.5 to 2 million URLs; and the counter saturation observed.
    ImpCb(imp_cb::Args),
    /// Seed 001: FPR of the single-hash 2^28-slot bitmap index vs a blocked Bloom filter of the
    /// same 32 MiB, at 10^6, 10^7 and 10^8 URLs.
    Bitmap(bitmap::Args),
    /// Load-test `urlseen serve` with URL.SEEN (and Redis with scrapy-redis' SADD, for the
    /// ratio), or soak it with many connections.
    Server(server::Args),
    /// Create many small namespaces (a million crawl jobs of 10 URLs) through `urlseen serve`,
    /// or as Redis sets: creation rate, memory per namespace and descriptors as they grow.
    Namespaces(server::namespaces::Args),
    /// Seed 000, Fig. 9: URLs/s of a DSBF with H=1, c=3, one leaf on each of three Redis
    /// servers, a multithreaded crawler, 1 million URLs; with the measured round trip.
    Redis(redis::Args),
}

pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Fpr(args) => fpr::run(args),
        Command::Balance(args) => balance::run(args),
        Command::ImpCb(args) => imp_cb::run(args),
        Command::Bitmap(args) => bitmap::run(args),
        Command::Server(args) => server::run(args),
        Command::Namespaces(args) => server::namespaces::run(args),
        Command::Redis(args) => redis::run(args),
    }
}

/// A fixed tree of `leaves` leaves of `leaf_bits` bits that never splits: the structure seed
/// 000's figures measure.
pub fn fixed_tree(
    leaves: u32,
    leaf_bits: u64,
    fpr: f64,
    seed: u64,
) -> std::sync::Arc<urlseen_engine::tree::Dsbf> {
    use urlseen_engine::tree::{Dsbf, SplitWorkers, TreeParams};
    use urlseen_engine::{SplitMode, SplitPolicy};
    let split = SplitPolicy { mode: SplitMode::Never, ..SplitPolicy::default() };
    let mut params = TreeParams::new(1, fpr, leaf_bits, seed, split);
    params.initial_leaves = leaves.max(1);
    Dsbf::in_memory(params, SplitWorkers::new(1))
}

/// Fingerprints of `n` distinct generated URLs from stream `seed` (canonicalized with the
/// default profile, hashed with the default seed), as the engine would compute them.
pub fn corpus_fingerprints(seed: u64, n: usize) -> Vec<u64> {
    let fingerprinter = urlseen_engine::fingerprint::Fingerprinter::new(
        &urlseen_engine::NamespaceOptions::default(),
    );
    let mut generator = urlseen_corpus::Generator::distinct(seed);
    let mut url = String::new();
    (0..n)
        .map(|_| {
            generator.next_into(&mut url);
            fingerprinter
                .fingerprint(&url)
                .unwrap_or_else(|_| fingerprinter.of_bytes(url.as_bytes()))
        })
        .collect()
}
