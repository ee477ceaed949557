//! How a namespace is created and recovered in a data directory, and what is on disk (its
//! checkpoints: `super::backing`; its meta file: `crate::options::meta`; `urlseen check` and
//! the directory lock: the `db` layer's `check` and `lock`, above every kind of namespace).
//!
//! ```text
//! DIR/LOCK                      held (flock) by the process that has the directory open
//! DIR/small.log                 the small namespaces, until each becomes a tree and moves to
//!                               a directory below (see `crate::namespace::small_journal`)
//! DIR/ns/<hex of name>/meta     the namespace's name and options (magic, version, checksum)
//! DIR/ns/<hex of name>/log      every fingerprint recorded, append-only (see `log`)
//! DIR/ns/<hex of name>/snapshot the tree at a log offset: its shape, every leaf's filter, and
//!                               how much of each leaf file it covers
//! DIR/ns/<hex of name>/leaves/  one file per leaf: the fingerprints it holds (see `leaf_log`)
//! DIR/ns/<hex of name>/index/   exact mode: sorted runs of each leaf's fingerprints, derived
//!                               from the leaf files at every open (see `leaf_index`)
//! DIR/ns/<hex of name>/store/   counting mode: the fingerprint store (an LSM, see `exact`)
//! ```
//! A counting namespace keeps no log records and no snapshot: its store is its source of truth
//! and its counting filters are rebuilt from the store when it is opened.
//! The log is the source of truth and is never rewritten; the snapshot and the leaf files it
//! names only make restart fast and keep the fingerprints out of RAM. Recovery loads the
//! snapshot (if it is valid), cuts each leaf file back to the length the snapshot gives it,
//! deletes leaf files the snapshot does not name (leaves made after it, or retired before it),
//! and replays the log records after its offset; a missing or corrupt snapshot (or a leaf file
//! shorter than it says) means replaying the whole log into new leaf files, which loses
//! nothing. A snapshot of version 1 (leaf logs inline) is read, its logs moved to leaf files,
//! and a version 2 snapshot written at once.
//!
//! Damage is named, never taken for less data: a snapshot whose header's log offset is past
//! the log's end is believed only if its checksum holds; the leaf files it names are verified
//! block by block (up to [`VERIFY_AT_OPEN_BYTES`]) and rebuilt from the log if damaged; a
//! counting store holding fewer fingerprints than its tally says it acknowledged is refused
//! (see `exact::store`); and `check` verifies all of it (see `check`).
//!
//! A read-only open ([`Access::ReadOnly`], `urlseen stats`) does the same reading and none of
//! the repairs: nothing is cut, deleted, upgraded, built or created, and what the log replay
//! records stays in memory (see `docs/durability.md`, "Read-only opens").

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use parking_lot::Mutex;
use urlseen_canon::CANON_VERSION;

use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::exact::{CountingSet, StoreDurability, StoreOptions};
use crate::leaf_log::{LeafFiles, LeafStore};
use crate::log::{FingerprintLog, Fsync, Record, RecordKind};
use crate::namespace::backing::{Backing, Durable};
use crate::namespace::recrawl::{GENERATIONS_DIR, Generations};
use crate::namespace::{Namespace, Set, TreeExact, counting_options, index_store};
use crate::options::{NamespaceOptions, decode_meta, encode_meta};
use crate::storage::{OsStorage, Storage};
use crate::tree::{Dsbf, Mode, SNAPSHOT_VERSION, SplitWorkers, TreeParams};

/// How a data directory is opened.
#[derive(Debug, Clone)]
pub struct DbOptions {
    /// When writes are acknowledged (Redis's `appendfsync`).
    pub fsync: Fsync,
    /// Checkpoint a namespace (write a snapshot) once its log has grown this many bytes since the
    /// last one. Bigger means faster writes and slower restarts.
    pub checkpoint_bytes: u64,
    /// Where files are read and written (tests inject faults here).
    pub storage: Arc<dyn Storage>,
    /// The wall clock recrawl windows age their generations by (tests inject a
    /// [`FakeClock`](crate::FakeClock) here).
    pub clock: Arc<dyn Clock>,
    /// Descriptors the loaded namespaces' files may hold at once (a URL namespace's take two,
    /// a `BF.*` key's one): loading or creating one more first unloads the least recently used
    /// idle one, and fails with [`Error::TooManyOpenNamespaces`] if none can go. The default,
    /// [`default_max_open_files`], is a quarter of the process's descriptor limit.
    pub max_open_files: usize,
}

/// A quarter of the soft limit on open descriptors (`RLIMIT_NOFILE`, `ulimit -n`), at least 16:
/// the rest is left to connections, temporary files and the fingerprint stores. 256 where the
/// limit cannot be read.
pub fn default_max_open_files() -> usize {
    #[cfg(unix)]
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    #[cfg(not(unix))]
    let limit: Option<u64> = None;
    limit.map_or(256, |n| usize::try_from(n / 4).unwrap_or(usize::MAX).max(16))
}

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            fsync: Fsync::EverySec,
            checkpoint_bytes: 64 << 20,
            storage: Arc::new(OsStorage),
            clock: Arc::new(SystemClock),
            max_open_files: default_max_open_files(),
        }
    }
}

/// What recovery found when a namespace was opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Log offset covered by the snapshot that was loaded, if one was.
    pub snapshot_offset: Option<u64>,
    /// Why the snapshot was not used, if there was one and it was not.
    pub snapshot_error: Option<String>,
    /// Log records replayed after the snapshot.
    pub replayed_records: u64,
    /// Fingerprints in those records.
    pub replayed_fingerprints: u64,
    /// Kept fingerprints in them (answered "seen", logged so they stay so; not URLs).
    pub replayed_kept: u64,
    /// Bytes of a torn log tail that were cut off (in a read-only open: found after the last
    /// valid record and left in place, for the next read-write open to cut).
    pub truncated_bytes: u64,
    /// Forgets by host replayed (log records of kind 6).
    pub replayed_forgets: u64,
    /// Why a forget could not be replayed (a leaf file that could not be read or written):
    /// opening fails then.
    pub forget_error: Option<String>,
    /// The format version of the snapshot that was loaded, if it was older than this build's
    /// (the directory was upgraded: a new snapshot was written when it was opened).
    pub upgraded_from: Option<u16>,
}

/// The leaf files of the namespace in `dir`.
fn leaf_files(dir: &Path, db: &DbOptions) -> Result<Arc<LeafFiles>> {
    Ok(LeafFiles::open_lazily(Arc::clone(&db.storage), dir.join(LEAVES_DIR)))
}

/// The directory of a namespace's leaf files.
pub(super) const LEAVES_DIR: &str = "leaves";

/// The directory of namespace `name` under data directory `root`. Names are hex-encoded, so any
/// name (slashes, dots, non-ASCII) is a safe file name.
pub(crate) fn namespace_dir(root: &Path, name: &str) -> PathBuf {
    let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
    root.join("ns").join(hex)
}

/// The name whose directory is `entry` (see [`namespace_dir`]), if `entry` is the hex of a
/// UTF-8 name.
pub(crate) fn name_of_dir(entry: &str) -> Option<String> {
    let hex = entry.as_bytes();
    if hex.is_empty() || !hex.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let bytes = hex
        .chunks_exact(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect::<Option<Vec<u8>>>()?;
    String::from_utf8(bytes).ok()
}

/// Creates the files of a new namespace in `dir` (its own directory, or for a restore, a
/// directory aside that is moved to its own once loaded), and its set.
pub(super) fn create_at(
    dir: PathBuf,
    name: &str,
    options: &NamespaceOptions,
    db: &DbOptions,
    workers: &Arc<SplitWorkers>,
) -> Result<(Backing, Set)> {
    let storage = &db.storage;
    // The Db has no namespace of this name, so anything in its directory is left over (a drop
    // whose removal failed half-way, an unfinished create): an old store or snapshot there
    // would make the new namespace answer "seen" for URLs it never recorded.
    storage.remove_dir_all(&dir).map_err(|e| Error::io("remove leftover directory", &dir, e))?;
    // Under `everysec` (or `no`) a create is as durable as a write: on disk within the second
    // (the `Db` syncs the file system, see `Db::sync`), not before the reply; under `always`,
    // before it. A power loss in between leaves a namespace without its meta (an unfinished
    // create, removed at open), or with an empty meta or log (recovered as such).
    let lazy = !db.fsync.commit_syncs();
    match lazy {
        true => storage.create_dir_all_unsynced(&dir),
        false => storage.create_dir_all(&dir),
    }
    .map_err(|e| Error::io("create directory", &dir, e))?;
    if options.recrawl_after.is_some() {
        // A window: no log of its own, a directory per generation (made by the first write
        // of its slot), and the meta last, as below.
        let gens_dir = dir.join(GENERATIONS_DIR);
        storage
            .create_dir_all(&gens_dir)
            .map_err(|e| Error::io("create directory", &gens_dir, e))?;
        let gens = Generations::recover(name, options, &dir, db, workers, Access::ReadWrite)?;
        let meta = dir.join("meta");
        storage
            .write_atomic(&meta, &encode_meta(name, options))
            .map_err(|e| Error::io("write", &meta, e))?;
        return Ok((Backing::Volatile, Set::Recrawl(Box::new(gens))));
    }
    let log = FingerprintLog::create(storage, &dir.join("log"), db.fsync)?;
    let leaves = LeafStore::Files(leaf_files(&dir, db)?);
    let tree = Dsbf::new(TreeParams::from(options), Arc::clone(workers), leaves);
    let set = open_set(storage, &dir, options, tree, true)?;
    // The meta file last: a directory without it is an unfinished create and is ignored.
    let meta = dir.join("meta");
    match lazy {
        true => storage.write_atomic_unsynced(&meta, &encode_meta(name, options)),
        false => storage.write_atomic(&meta, &encode_meta(name, options)),
    }
    .map_err(|e| Error::io("write", &meta, e))?;
    let durable = Durable {
        dir,
        storage: Arc::clone(storage),
        log,
        checkpoint_bytes: db.checkpoint_bytes,
        snapshot_end: AtomicU64::new(0),
        snapshot_bytes: AtomicU64::new(0),
        checkpointing: Mutex::new(()),
        recovery: RecoveryReport::default(),
        _scratch: None,
    };
    Ok((Some(durable).into(), set))
}

/// The directory of an exact-mode namespace's fingerprint store.
pub(super) const STORE_DIR: &str = "store";

/// The set of a namespace in `dir`: `tree` alone (Bloom-only), `tree` with an exact index, or
/// counting filters. `create`: the namespace is new, so its store may be created; otherwise a
/// missing store is an error (an empty one would answer "new" for every recorded URL).
fn open_set(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    options: &NamespaceOptions,
    tree: Arc<Dsbf>,
    create: bool,
) -> Result<Set> {
    let store_dir = dir.join(STORE_DIR);
    if options.counting {
        // The counting set's store is its own source of truth (the filters are rebuilt from
        // it). Buffered: the namespace syncs it once per batch under `always` (an fsync per
        // store write would be one per refcount update, under the set's one lock).
        let store = StoreOptions {
            durability: StoreDurability::Buffered,
            storage: Arc::clone(storage),
            ..StoreOptions::default()
        };
        let counting = counting_options(options)?;
        let set = if create {
            CountingSet::open_with(&store_dir, store, counting)?
        } else {
            CountingSet::open_existing_with(&store_dir, store, counting)?
        };
        return Ok(Set::Counting(Box::new(set)));
    }
    if !options.is_exact() {
        return Ok(Set::Tree { tree, exact: None });
    }
    // Exact mode confirms positives against the leaves' own records, indexed afresh at every
    // open. Version 0.1 kept a second copy of every fingerprint in an LSM store: the leaf
    // files and the log hold all of it, so that copy goes once the index is built.
    let exact = TreeExact::enable(&tree, index_store(&tree)?)?;
    storage
        .remove_dir_all(&store_dir)
        .map_err(|e| Error::io("remove the old fingerprint store", &store_dir, e))?;
    Ok(Set::Tree { tree, exact: Some(Box::new(exact)) })
}

/// Replays one log record after the snapshot into `tree`.
fn replay(
    tree: &Dsbf,
    guard: &[u64],
    options: &NamespaceOptions,
    report: &mut RecoveryReport,
    record: &Record,
) {
    let (fps, hosts) = (&record.fingerprints, &record.hosts);
    match record.kind {
        _ if options.counting => {}
        RecordKind::Recorded | RecordKind::RecordedHosts => {
            tree.replay(fps, hosts, record.end, guard, Mode::Record);
        }
        RecordKind::Kept | RecordKind::KeptHosts => {
            tree.replay(fps, hosts, record.end, guard, Mode::Keep);
        }
        RecordKind::ForgetHost => {
            // Everything recorded before it, of that host, goes (what the forget did when it
            // was made). A snapshot never predates a forget it does not cover (the forget
            // removes it first), so every leaf here holds the log up to this record.
            let host = hosts.first().copied().unwrap_or(0);
            if let Err(e) = tree.forget_where(&|r| host != 0 && r.host == host, &mut || Ok(())) {
                report.forget_error.get_or_insert_with(|| e.to_string());
            }
            report.replayed_forgets += 1;
        }
        RecordKind::Journal => {
            report.forget_error.get_or_insert_with(|| {
                "a record of the small namespaces' journal (kind 8) in a namespace's log".into()
            });
        }
        RecordKind::ForgetUrls => {
            // The same forget as when it was made: those fingerprints of that host, and the
            // host's kept records.
            let host = hosts.first().copied().unwrap_or(0);
            let fps: std::collections::HashSet<u64> = fps.iter().copied().collect();
            let drop = |r: &crate::leaf_log::LeafRecord| {
                host != 0 && r.host == host && (r.kept || fps.contains(&r.fp))
            };
            if let Err(e) = tree.forget_where(&drop, &mut || Ok(())) {
                report.forget_error.get_or_insert_with(|| e.to_string());
            }
            report.replayed_forgets += 1;
        }
    }
    report.replayed_records += 1;
    match record.kind {
        RecordKind::Kept | RecordKind::KeptHosts => {
            report.replayed_kept += record.fingerprints.len() as u64;
        }
        RecordKind::ForgetUrls | RecordKind::Journal => {}
        _ => report.replayed_fingerprints += record.fingerprints.len() as u64,
    }
}

/// A namespace read back from disk.
pub(super) struct Recovered {
    pub name: String,
    pub options: NamespaceOptions,
    pub set: Set,
    /// `None` for a recrawl window (its generations have their own).
    pub backing: Backing,
}

/// How a data directory is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Recovery repairs what it finds (cuts a torn tail, removes stale leaf files, upgrades
    /// old formats, builds exact-mode indexes) and the namespace takes writes.
    ReadWrite,
    /// Nothing in the directory is written, renamed, cut, created or deleted: the snapshot and
    /// the log are read into memory as they are (see [`Db::open_read_only`](crate::Db)).
    ReadOnly,
}

/// What [`recover`] found in a namespace directory.
pub(super) enum Opened {
    Namespace(Box<Recovered>),
    /// No meta and no data: a create that did not finish (removed, unless read-only).
    Unfinished,
}

/// Recovers the namespace in `dir`: its name (from its meta) and the namespace, or `None` for a
/// create that did not finish. A namespace in an older format is written in this build's now
/// (read-write), so the old one is never read again.
pub(crate) fn load(
    dir: &Path,
    options: &DbOptions,
    workers: &Arc<SplitWorkers>,
    access: Access,
) -> Result<Option<(String, Arc<Namespace>)>> {
    let Opened::Namespace(r) = recover(dir, options, workers, access)? else {
        return Ok(None);
    };
    let upgraded = r.backing.recovery().is_some_and(|r| r.upgraded_from.is_some());
    let ns = Namespace::from_parts(r.name.clone(), r.options, r.set, r.backing)?;
    if upgraded && access == Access::ReadWrite {
        ns.checkpoint()?;
    }
    Ok(Some((r.name, Arc::new(ns))))
}

/// Opens the namespace stored in `dir`.
pub(super) fn recover(
    dir: &Path,
    db: &DbOptions,
    workers: &Arc<SplitWorkers>,
    access: Access,
) -> Result<Opened> {
    let read_only = access == Access::ReadOnly;
    let storage = &db.storage;
    let meta_path = dir.join("meta");
    // An empty meta is a create that a power loss cut short under `everysec` (its bytes were
    // not synced yet): as a missing one.
    let meta = storage.read(&meta_path).map_err(|e| Error::io("read", &meta_path, e))?;
    let Some(meta) = meta.filter(|m| !m.is_empty()) else {
        // The meta file is written last, so a directory without one may be a create that did
        // not finish: that holds nothing and goes. One that holds data lost its meta file:
        // deleting it would lose every URL in it, so nothing is touched.
        if let Some(what) = recorded_data(storage, dir)? {
            return Err(Error::corrupt(
                &meta_path,
                &format!(
                    "missing, but the namespace directory holds data ({what}); nothing was \
                     changed. Restore the meta file from a backup, or move the directory out of \
                     the data directory to set the namespace aside"
                ),
            ));
        }
        if !read_only {
            storage
                .remove_dir_all(dir)
                .map_err(|e| Error::io("remove unfinished namespace", dir, e))?;
        }
        return Ok(Opened::Unfinished);
    };
    let (name, options, canon_version) = decode_meta(&meta_path, &meta)?;
    if canon_version != CANON_VERSION {
        return Err(Error::CanonVersionMismatch {
            name,
            stored: canon_version,
            current: CANON_VERSION,
        });
    }
    if options.recrawl_after.is_some() {
        let gens = Generations::recover(&name, &options, dir, db, workers, access)?;
        let set = Set::Recrawl(Box::new(gens));
        return Ok(Opened::Namespace(Box::new(Recovered {
            name,
            options,
            set,
            backing: Backing::Volatile,
        })));
    }
    let params = TreeParams::from(&options);
    let mut report = RecoveryReport::default();
    let files = match access {
        Access::ReadWrite => leaf_files(dir, db)?,
        Access::ReadOnly => LeafFiles::open_read_only(Arc::clone(storage), dir.join(LEAVES_DIR)),
    };
    let leaves = LeafStore::Files(Arc::clone(&files));
    let snap_path = dir.join("snapshot");
    let mut snapshot =
        storage.open_read(&snap_path).map_err(|e| Error::io("read", &snap_path, e))?;
    let snapshot_bytes = storage.file_len(&snap_path).ok().flatten().unwrap_or(0);
    if read_only && snapshot.is_some() && snapshot_is_old(storage, &snap_path) {
        // Loading a 0.1 snapshot moves its inline leaf logs to leaf files: a read-only open
        // replays the whole log instead, which holds every record too.
        snapshot = None;
        report.snapshot_error = Some(
            "an older version (0.1), upgraded by the next read-write open; the whole log was \
             replayed instead"
                .into(),
        );
    }
    // Checked before anything is changed: a log shorter than what the snapshot covers lost
    // records that only the snapshot and the leaf files (which loading cuts back) still hold.
    let log_path = dir.join("log");
    let mut log_len = storage.file_len(&log_path).map_err(|e| Error::io("stat", &log_path, e))?;
    if !read_only && snapshot.is_none() && log_len.is_none_or(|len| len < crate::log::HEADER_LEN) {
        // A create under `everysec` that a power loss cut short: its log's bytes (or name)
        // were not synced yet, so it holds no record. Made again, empty.
        report.truncated_bytes = log_len.unwrap_or(0);
        drop(FingerprintLog::create(storage, &log_path, Fsync::Always)?);
        log_len = Some(crate::log::HEADER_LEN);
    }
    if let (Some(covered), Some(len)) = (snapshot_log_offset(storage, &snap_path), log_len)
        && len < covered
    {
        // The offset is trusted only from a snapshot whose checksum holds: a damaged header
        // can claim any offset, and the log is then whole.
        match verify_snapshot_checksum(storage, &snap_path) {
            Ok(()) => return Err(log_behind_snapshot(&log_path, len, covered, true)),
            Err(reason) => {
                snapshot = None;
                report.snapshot_error = Some(damaged_snapshot(&snap_path, &reason));
            }
        }
    }
    let loaded = snapshot
        .map(|mut r| Dsbf::read_snapshot(params, Arc::clone(workers), leaves.clone(), &mut r));
    // Every block of every leaf file the snapshot names is checked now, not at the split that
    // would read it: a damaged one (bit rot, a stray write) is rebuilt from the log, which
    // holds every record, as a damaged snapshot is. Up to a bound: see `VERIFY_AT_OPEN_BYTES`.
    let loaded = match loaded {
        Some(Ok(s)) if leaf_bytes(&files, &s.leaves) > VERIFY_AT_OPEN_BYTES => Some(Ok(s)),
        Some(Ok(s)) => match s.tree.verify_leaf_files() {
            Ok(_) => Some(Ok(s)),
            Err(e) => {
                report.snapshot_error = Some(format!("a leaf file it names is damaged ({e})"));
                None
            }
        },
        other => other,
    };
    let fresh = |report: &mut RecoveryReport| -> Result<Arc<Dsbf>> {
        // Everything comes back from the log, into new leaf files (read-only: into memory,
        // and the old files stay: a leaf with no records on disk never reads its file).
        if !read_only {
            files.remove_all_but(&[])?;
        }
        report.snapshot_offset = None;
        Ok(Dsbf::new(params, Arc::clone(workers), leaves.clone()))
    };
    let mut guard = Vec::new();
    let (tree, offset) = match loaded {
        Some(Ok(s)) => {
            report.snapshot_offset = Some(s.log_offset);
            if s.version < SNAPSHOT_VERSION {
                report.upgraded_from = Some(s.version);
            }
            // Leaves made after the snapshot, or retired before it: the log replay below
            // remakes what it needs. (Read-only, they stay: no leaf of this tree reads them.)
            if !read_only {
                files.remove_all_but(&s.leaves)?;
            }
            guard = s.guard;
            (s.tree, s.log_offset)
        }
        Some(Err(reason)) => {
            report.snapshot_error = Some(reason.to_string());
            (fresh(&mut report)?, 0)
        }
        None => (fresh(&mut report)?, 0),
    };
    let mut on_record = |record: Record| replay(&tree, &guard, &options, &mut report, &record);
    let (log, truncated) = match access {
        Access::ReadWrite => {
            FingerprintLog::open_from(storage, &log_path, db.fsync, offset, &mut on_record)?
        }
        Access::ReadOnly => {
            FingerprintLog::open_read_only(storage, &log_path, offset, &mut on_record)?
        }
    };
    if log.end() < offset {
        // The snapshot was written after the log was synced up to `offset`, so a log that ends
        // before it lost records in the middle (damage, not a torn tail).
        return Err(log_behind_snapshot(&log_path, log.end(), offset, false));
    }
    report.truncated_bytes = truncated;
    if let Some(e) = &report.forget_error {
        return Err(Error::corrupt(&log_path, &format!("replaying the log: {e}")));
    }
    let mut scratch = None;
    let set = match access {
        Access::ReadWrite => open_set(&db.storage, dir, &options, tree, false)?,
        Access::ReadOnly if options.counting => {
            // The store is an LSM (fjall), which writes its journal and version files when
            // opened: a read-only open reads a copy of it, removed when the namespace goes.
            let copy = scratch_copy(&dir.join(STORE_DIR))?;
            let set = open_set(&db.storage, copy.path(), &options, tree, false)?;
            scratch = Some(copy);
            set
        }
        // Exact mode's index is built into `index/` (and a 0.1 store removed) by `open_set`:
        // read-only, the tree answers from its filters alone (see `Namespace::contains`).
        Access::ReadOnly => Set::Tree { tree, exact: None },
    };
    let durable = Durable {
        dir: dir.to_owned(),
        storage: Arc::clone(storage),
        log,
        checkpoint_bytes: db.checkpoint_bytes,
        snapshot_end: AtomicU64::new(offset),
        snapshot_bytes: AtomicU64::new(snapshot_bytes),
        checkpointing: Mutex::new(()),
        recovery: report,
        _scratch: scratch,
    };
    Ok(Opened::Namespace(Box::new(Recovered { name, options, set, backing: Some(durable).into() })))
}

/// Leaf files up to this many bytes in all (about 64 million URLs) are read whole and their
/// blocks' checksums verified at every open: about 1.3 s at the bound (153 MB of leaf files,
/// 10 million URLs, took 0.19 s more to open than without). A bigger namespace's are not: at a
/// billion URLs (16 GB of leaf files) it would make a reopen of 5.6 s about four times longer.
/// There, `urlseen check` verifies them, and a split that meets a damaged block refuses
/// further writes naming the file and the repair.
const VERIFY_AT_OPEN_BYTES: u64 = 1 << 30;

/// The bytes of the leaf files of `leaves`.
fn leaf_bytes(files: &LeafFiles, leaves: &[crate::tree::NodeId]) -> u64 {
    leaves.iter().filter_map(|&id| files.storage().file_len(&files.path(id)).ok().flatten()).sum()
}

/// A copy of the store directory `store` in a new temporary directory (as `store/` there), for
/// a read-only open to read without writing to `store`.
pub(super) fn scratch_copy(store: &Path) -> Result<tempfile::TempDir> {
    let tmp = tempfile::Builder::new()
        .prefix("urlseen-read-only-")
        .tempdir()
        .map_err(|e| Error::io("create a temporary directory for a copy of", store, e))?;
    copy_dir(store, &tmp.path().join(STORE_DIR))
        .map_err(|e| Error::io("copy to a temporary directory", store, e))?;
    Ok(tmp)
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// Whether a snapshot file's header says it is older than this build's format.
pub(super) fn snapshot_is_old(storage: &Arc<dyn Storage>, path: &Path) -> bool {
    let mut head = [0u8; 10];
    storage.read_at(path, 0, &mut head).ok() == Some(10)
        && u16::from_le_bytes([head[8], head[9]]) < SNAPSHOT_VERSION
}

/// The log offset a snapshot file says it covers, read from its header alone (`None` if it has
/// none: then loading it fails and says why).
pub(super) fn snapshot_log_offset(storage: &Arc<dyn Storage>, path: &Path) -> Option<u64> {
    let mut head = [0u8; 24];
    let n = storage.read_at(path, 0, &mut head).ok()?;
    (n == head.len() && head[..8] == crate::tree::SNAPSHOT_FORMAT.magic)
        .then(|| u64::from_le_bytes(head[16..24].try_into().unwrap_or_default()))
}

/// Reads the snapshot file at `path` whole, streamed, and checks its trailing XXH3-64 over
/// everything before it: whether its header (whose log offset is read before the snapshot is
/// loaded) can be trusted.
///
/// # Errors
/// What is wrong, in words: a checksum that does not match, a file too short to hold one, or
/// the read's error.
pub(super) fn verify_snapshot_checksum(
    storage: &Arc<dyn Storage>,
    path: &Path,
) -> std::result::Result<(), String> {
    use std::io::Read;
    let mut reader = match storage.open_read(path) {
        Ok(Some(r)) => r,
        Ok(None) => return Err("missing".into()),
        Err(e) => return Err(format!("read: {e}")),
    };
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    // The last 8 bytes read so far are held back: they are the checksum if the file ends there.
    let mut tail = Vec::with_capacity(8);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("read: {e}")),
        };
        tail.extend_from_slice(&buf[..n]);
        let keep = tail.len().saturating_sub(8);
        hasher.update(&tail[..keep]);
        tail.drain(..keep);
    }
    let stored: [u8; 8] = tail.try_into().map_err(|_| "too short to hold a checksum".to_owned())?;
    let (stored, computed) = (u64::from_le_bytes(stored), hasher.digest());
    if stored != computed {
        return Err(format!("checksum mismatch (stored {stored:#x}, computed {computed:#x})"));
    }
    Ok(())
}

/// What recovery reports of a snapshot whose checksum does not hold.
fn damaged_snapshot(path: &Path, reason: &str) -> String {
    format!("{} is damaged ({reason}): its header cannot be trusted", path.display())
}

/// The refusal for a log that ends before the offset its snapshot covers.
pub(super) fn log_behind_snapshot(log: &Path, end: u64, offset: u64, unchanged: bool) -> Error {
    let changed = if unchanged {
        "nothing was changed"
    } else {
        // Found only once the log was read: its damaged tail is cut, and leaf files made after
        // the snapshot (whose records the log held) are gone.
        "its damaged tail was cut and leaf files made after the snapshot were removed"
    };
    Error::corrupt(
        log,
        &format!(
            "ends at byte {end}, but the snapshot covers it up to byte {offset}: records are \
             missing from the log; {changed}. Restore the log from a backup, or, to keep only \
             what the log holds, remove the snapshot file (URLs recorded after byte {end} will \
             be new again)"
        ),
    )
}

/// What in a namespace directory without meta shows that URLs were recorded there, if anything:
/// a log with records, a snapshot, a leaf file, a store, or a file this build does not know.
pub(super) fn recorded_data(storage: &Arc<dyn Storage>, dir: &Path) -> Result<Option<String>> {
    let names = storage.list(dir).map_err(|e| Error::io("list", dir, e))?;
    for name in names {
        let path = dir.join(&name);
        let holds = match name.as_str() {
            "log" => storage
                .file_len(&path)
                .map_err(|e| Error::io("stat", &path, e))?
                .is_some_and(|len| len > crate::log::HEADER_LEN),
            LEAVES_DIR | GENERATIONS_DIR => {
                !storage.list(&path).map_err(|e| Error::io("list", &path, e))?.is_empty()
            }
            // Derived from the leaf files, never data of its own; or a write that never
            // finished (`meta.tmp`: a create that crashed before its meta was in place); the
            // (empty) meta itself; hosts named for records the log does not hold.
            "index" | "meta" | "hosts" => false,
            tmp if tmp.ends_with(".tmp") => false,
            _ => true,
        };
        if holds {
            return Ok(Some(format!("{name:?}")));
        }
    }
    Ok(None)
}
