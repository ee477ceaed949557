//! The urlseen engine: seed 000's Dynamic Splittable Bloom Filter behind a `Db` of namespaces.
//!
//! A crawler asks one question of every link it finds: *have I seen this URL?* The engine answers
//! with check-and-insert ([`Namespace::seen`], the seed's `is_duplicate`), in bounded memory per
//! URL, never answering "new" for a URL it recorded, and keeping its false-positive rate under
//! the bound the namespace was created with, however far past its initial capacity it grows.
//!
//! ```
//! use urlseen_engine::{Db, NamespaceOptions};
//!
//! let db = Db::in_memory();
//! // Sized for 10,000 URLs; it grows by splitting leaves when it gets more.
//! let ns = db.create_namespace("news", NamespaceOptions { capacity: 10_000, fpr: 0.01, ..Default::default() })?;
//! let mut new = 0;
//! for i in 0..50_000 {
//!     // `false`: new, now recorded. A new URL is taken as seen with probability <= 1%.
//!     if !ns.seen(&format!("https://news.example/story/{i}"))? {
//!         new += 1;
//!     }
//! }
//! db.wait_for_splits();
//! let stats = ns.stats();
//! assert_eq!(stats.count, new);
//! assert!(new > 49_000, "{new}");
//! assert!(stats.worst_leaf_fpr <= 0.01);
//! assert!(stats.splits_done > 0);
//! # Ok::<(), urlseen_engine::Error>(())
//! ```
//!
//! # Dump and restore
//! A namespace goes out in chunks (RedisBloom's `BF.SCANDUMP` protocol) and loads back into
//! another `Db`, where it knows every URL and keeps growing (see [`dump`]):
//! ```
//! use urlseen_engine::{Db, NamespaceOptions};
//! use urlseen_engine::dump::MAX_CHUNK_BYTES;
//!
//! let db = Db::in_memory();
//! let ns = db.create_namespace("jobs", NamespaceOptions::default())?;
//! ns.seen("https://example.com/a")?;
//! let other = Db::in_memory();
//! let mut iter = 0;
//! loop {
//!     let chunk = ns.dump_chunk(iter, MAX_CHUNK_BYTES)?;
//!     if chunk.next == 0 {
//!         break;
//!     }
//!     other.load_chunk("copy", chunk.next, &chunk.data)?;
//!     iter = chunk.next;
//! }
//! assert!(other.namespace("copy").unwrap().contains("https://example.com/a")?);
//! # Ok::<(), urlseen_engine::Error>(())
//! ```
//!
//! # Recrawl windows
//! A namespace with [`NamespaceOptions::recrawl_after`] answers "new" again for a URL recorded
//! more than that long ago, in flat memory (see [`recrawl`]). Time comes from
//! [`DbOptions::clock`]; a [`FakeClock`] makes the window testable:
//! ```
//! use std::time::Duration;
//! use urlseen_engine::{Db, DbOptions, FakeClock, NamespaceOptions};
//!
//! let clock = FakeClock::at(1_700_000_000_000);
//! let db = Db::in_memory_with(DbOptions { clock: clock.clone(), ..Default::default() });
//! let window = NamespaceOptions { recrawl_after: Some(Duration::from_secs(30 * 86_400)), ..Default::default() };
//! let news = db.create_namespace("news", window)?;
//! assert!(!news.seen("https://news.example/")?);              // new, recorded
//! clock.advance(Duration::from_secs(26 * 86_400));
//! assert!(news.seen("https://news.example/")?);               // 26 days on: still seen
//! clock.advance(Duration::from_secs(4 * 86_400));
//! assert!(!news.seen("https://news.example/")?);              // 30 days on: new again
//! assert_eq!(news.stats().recrawl.unwrap().live.len(), 2);   // the first generation is gone
//! # Ok::<(), urlseen_engine::Error>(())
//! ```
//!
//! # How a URL flows
//! ```text
//! url ─canonicalize─▶ canonical ─xxh3(seed)─▶ fp ─range hash─▶ leaf ─blocked Bloom─▶ seen?
//! ```
//! See [`tree`] for the DSBF itself: routing, online splits, locking.
//!
//! # Layers
//! The modules stand in six layers, bottom first; a module imports only from its own layer and
//! those below, and no circle of imports spans two modules (declared beside the module list in
//! `lib.rs`, checked from the `use` lines by `scripts/layers.py` in CI):
//! 1. **Vocabulary**, which every layer uses: [`Error`], [`storage::Storage`], the clocks
//!    ([`Clock`]), the options ([`NamespaceOptions`] with its meta encoding and the recrawl
//!    window's limits, [`Fsync`]), the [`fingerprint`], the [`host`] hashes and the [`SeenSet`]
//!    trait.
//! 2. **`dsbf`**: the geometry both homes of a tree share (this process and `urlseen-redis`),
//!    with no I/O: node ids, sizes and seeds, routing, the split protocol, the [`dump`] format
//!    and its cursor.
//! 3. **Records**: the namespace's fingerprint [`log`], the leaf logs ([`leaf_log`]) and their
//!    indexes ([`leaf_index`]) and the [`exact`] stores.
//! 4. **[`tree`]**: the DSBF in this process, and the split workers that serve it.
//! 5. **`namespace`**: a [`Namespace`] and what is only its own: its reservations
//!    ([`reserve`]), where its answers rest (its backing, and the journal small namespaces
//!    share), the files no other layer reads (the host dictionary, the URL journal), the
//!    [`recrawl`] window, and how it is made where the `Db` keeps it, recovered and checked.
//!    A window is made of namespaces, created the way a namespace is: that recursion stays in
//!    this one folder.
//! 6. **`db`**: the [`Db`] facade, the directory lock and [`check_data_dir`].
//!
//! Where the cut is not the obvious one, why:
//! - [`NamespaceOptions::planned_filter_bytes`] is defined in `dsbf`, beside `TreeParams`: it
//!   counts the leaves the parameters give, and the options sit below the parameters derived
//!   from them. The window's limits (`MAX_GENERATIONS`, `MAX_WINDOW_MS`, `generation_fpr`)
//!   are the options' that validate them ([`recrawl`] re-exports them).
//! - Checking a data directory (`urlseen check`) is split as opening one is: the `db` layer
//!   walks the directory and reads the small namespaces' journal, and verifying one
//!   namespace's directory (and a recrawl window's generations) is the namespace's, beside
//!   how it is created and recovered, whose file names and snapshot checks it shares.
//! - The host dictionary and the URL journal are record formats, but only a namespace reads
//!   or writes them (the tree, the `Db` and the journal of small namespaces never do): they
//!   live in `namespace/`, where what they offer is visible to that folder alone.
//! - The journal of small namespaces holds namespaces (each one's creation with its options,
//!   its hosts, its items, its end): it is where they rest, as the backing is where one
//!   namespace's answers rest, so it is the namespace layer's; the `Db` opens it, holds it and
//!   syncs it. Likewise how a namespace is made in each place a `Db` keeps them (memory, a
//!   spill directory, the journal, a directory of its own) is the namespace's: the `Db` says
//!   where (`namespace/place.rs`).
//! - The [`SeenSet`] trait is vocabulary (the server answers through it); the namespace's
//!   implementation of it is the namespace's.
//!
//! # Seams
//! - **One DSBF's sizes, seeds and routes**: `dsbf::params` (one
//!   `TreeParams::from(&NamespaceOptions)`, each leaf's size by depth and place, `level_seed`,
//!   `probe_seed`) and `dsbf::routing` (`Paths`, the walk down; `Directory`, the ranges), used
//!   by the tree here and by the `urlseen-redis` crate, whose namespaces are the same tree; one
//!   [`fingerprint::Fingerprinter`] for every backend; one [`SeenSet`] trait over all of them
//!   (the server answers through it).
//! - **One split protocol**: `dsbf::split` (freeze a full leaf and publish its children,
//!   migrate its frozen log in bounded chunks, retire it) drives a `SplitHome`, which the tree
//!   implements under its locks and `urlseen-redis` as idempotent scripts under a node lock
//!   (`LockedSplit`, for a forget's rebuild too). What that crate needs of the engine's
//!   insides (`dsbf`, the hidden items of [`dump`], `host::canonical_host` and
//!   `TreeParams::probe_seed`) is public and `#[doc(hidden)]`: no part of the API, free to
//!   change in any release.
//! - **Durability in the types**: a namespace holds a `Backing` (`Volatile`, or `Durable`: a
//!   data directory), which it asks to check, append (an `Lsn`), commit (an `Ack`), sync and
//!   checkpoint; when a commit syncs is the [`Fsync`] policy's to say
//!   ([`Fsync::commit_syncs`]). Every file durability rests on goes through
//!   [`storage::Storage`], where tests inject faults.
//! - **One framing** for every file and blob: `urlseen_filter::frame` (`Format`: magic,
//!   version, sealed sections, a bounds-checked reader; `FormatError`), which
//!   [`Error::UnsupportedVersion`] and [`Error::Corrupt`] report.
//!
//! # Quirks
//! - While a leaf splits, its frozen filter and its children both answer queries, so for that
//!   moment a query routed there sees the frozen leaf's FPR plus a small one from the children.
//! - Each leaf keeps the fingerprints it recorded so it can be re-hashed into children (the
//!   filter alone cannot be split). [`Db::open`] and [`Db::temporary`] keep them in one file per
//!   leaf (16 bytes per URL on disk, a 16 KiB buffer per leaf in RAM), so RAM holds the filters;
//!   [`Db::in_memory`] keeps them on the heap, 12 bytes per URL (fingerprint and host hash).

// The layers, bottom first (see "Layers" above; scripts/layers.py reads these lines): a module
// imports only from its own layer and those below.
// layer: error storage clock options fingerprint host seen_set
// layer: dsbf
// layer: log exact leaf_index leaf_log
// layer: tree
// layer: namespace
// layer: db

mod clock;
mod db;
mod seen_set;
// The DSBF geometry the Redis backend (crates/redis, `urlseen-redis`) shares with the tree: a
// crate boundary is the hard layer between them (as fjall's over lsm-tree), so what it needs is
// public but no part of the documented API, and may change in any release.
#[doc(hidden)]
pub mod dsbf;
mod error;
pub mod exact;
pub mod fingerprint;
pub mod host;
pub mod leaf_index;
pub mod leaf_log;
pub mod log;
mod namespace;
mod options;
pub mod storage;
pub mod tree;

pub use clock::{Clock, FakeClock, SystemClock};
pub use db::check_data_dir;
pub use db::{DEFAULT_NAMESPACE, Db, Expiry, ExpiryUpdate, LoadStep, MAX_NAME_LEN};
pub use dsbf::dump;
pub use dsbf::dump::{DumpChunk, DumpReader, DumpWriter};
pub use error::{Error, Result};
pub use namespace::check::{NamespaceCheck, repair_namespace};
pub use namespace::persist::{DbOptions, RecoveryReport, default_max_open_files};
pub use namespace::recrawl;
pub use namespace::recrawl::{GenerationReport, RecrawlReport};
pub use namespace::reservation as reserve;
pub use namespace::reservation::Reservation;
pub use namespace::{
    CountingReport, ExactReport, LeafReport, ManyOp, Namespace, NamespaceStats, PersistenceStats,
    Usage,
};
pub use namespace::{MAX_KEPT_URL, RECENT_JOURNALED};
pub use options::{
    DEFAULT_GENERATIONS, DEFAULT_MAX_LEAF_BITS, DEFAULT_SEED, DEFAULT_SPLIT_THRESHOLD, Fsync,
    MIN_LEAF_BITS, NamespaceOptions, SplitMode, SplitPolicy,
};
pub use seen_set::{SeenSet, SeenThenError};
pub use urlseen_canon::{Options as CanonOptions, Profile};
/// RAM the process's leaf filters keep idle for reuse (see [`urlseen_filter::arena_idle_bytes`]):
/// in no namespace's [`NamespaceStats::memory_bytes`], but in the process's RSS.
pub use urlseen_filter::arena_idle_bytes;
