//! Seed 004's fingerprint database: a persistent map fingerprint → reference count.
//!
//! [`FingerprintStore`] keeps it in an embedded LSM tree ([fjall]); [`MemStore`] keeps it in a
//! hash map for in-memory databases and tests. Both sit behind the small [`FpStore`] trait, so
//! an [`ExactIndex`](super::ExactIndex) or a [`CountingSet`](super::CountingSet) does not care
//! which one it has.
//!
//! # On disk
//! ```text
//! DIR/URLSEEN-STORE   24 bytes: magic "USFPSTOR", version u32 LE, value encoding u32 LE,
//!                     xxh3-64 of the first 16 bytes (u64 LE)
//! DIR/lsm/            the fjall database (its own journal, tables, checksums and recovery)
//! DIR/URLSEEN-TALLY   the fewest fingerprints the LSM must hold (see `tally`): an LSM that
//!                     holds fewer lost some, and is refused when opened
//! ```
//! In the keyspace `fingerprints`, a key is a fingerprint as 8 bytes **big-endian** (so the
//! LSM's key order is numeric order), and a value is the [`Record`]: the reference count as a
//! `u32` little-endian, followed by the generation as a `u32` little-endian only when the
//! generation or the host is not 0 (so plain exact mode pays 4 bytes a fingerprint), followed
//! by the hash of the URL's host as a `u32` little-endian only when it is known (not 0; see
//! `crate::host`): 12 bytes a URL in a counting namespace that can forget by host. One more key, 13 bytes
//! long so that it cannot be a fingerprint, holds the number of fingerprints; every write batch
//! updates it atomically with its data, so [`FpStore::len`] is exact and free after a crash.
//!
//! # Durability
//! [`StoreDurability::Always`] fsyncs the journal before a write returns: an acknowledged write
//! survives a power loss. [`StoreDurability::Buffered`] hands each write to the OS before it
//! returns: it survives the process being killed, not a power loss, until the next
//! [`sync`](FpStore::sync) (call it every second for Redis' `everysec`). After a failed write or
//! fsync the store refuses all further writes ([`Error::Poisoned`]).
//!
//! [fjall]: https://docs.rs/fjall

pub(super) mod error;
mod header;
mod mem;
mod tally;

use error as store_error;
pub(super) use header::check_fixed;
use header::{check_header, write_header};
pub use mem::{FpBuildHasher, FpHasher, MemStore};
pub use tally::TALLY_FILE;
use tally::{REMOVAL_SLACK, Tally};

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use parking_lot::{Mutex, RwLock};
use urlseen_filter::frame::{Format, FormatError, HEADER_LEN as FRAME_LEN, SEAL_LEN};
use urlseen_filter::hash::mix64;

use crate::error::Error;
use crate::storage::{OsStorage, Storage};

/// The result of every fingerprint-store operation.
pub use crate::error::Result;

/// The name of the header file in a store directory.
pub const HEADER_FILE: &str = "URLSEEN-STORE";
/// The header's magic bytes.
pub const MAGIC: [u8; 8] = *b"USFPSTOR";
/// The store format version this build reads and writes.
pub const VERSION: u32 = 1;
/// The value encoding of version 1: refcount `u32` LE, then the generation `u32` LE if non-zero.
pub const VALUE_ENCODING: u32 = 1;
const LSM_DIR: &str = "lsm";
const KEYSPACE: &str = "fingerprints";
/// Not 8 bytes long, so no fingerprint key can collide with it.
const COUNT_KEY: &[u8; 13] = b"urlseen:count";

/// When a write is acknowledged. See the [module docs](self#durability).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreDurability {
    /// Every write batch is fsynced before it returns (survives power loss).
    Always,
    /// Every write batch is handed to the OS before it returns (survives a killed process);
    /// [`FpStore::sync`] makes everything so far survive a power loss.
    #[default]
    Buffered,
}

impl StoreDurability {
    fn persist_mode(self) -> PersistMode {
        match self {
            StoreDurability::Always => PersistMode::SyncAll,
            StoreDurability::Buffered => PersistMode::Buffer,
        }
    }
}

/// How a [`FingerprintStore`] is opened.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// When writes are acknowledged.
    pub durability: StoreDurability,
    /// Bytes of the LSM's block cache (default 64 MiB). Index and filter blocks are pinned in
    /// memory besides, so a lookup reads at most one data block.
    pub cache_bytes: u64,
    /// Point reads are expected to find their key, because a Bloom filter in front already
    /// screened out most absent ones (exact mode; default `true`): the LSM then builds no
    /// filters for its last level, about 90 % less filter memory. Set `false` for a store that
    /// answers every lookup itself (seed 004's baseline). Fixed when the store is created.
    pub expect_hits: bool,
    /// Where its header file (and a counting set's parameters file) is read and written; the
    /// LSM under it does its own I/O.
    pub storage: Arc<dyn Storage>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            durability: StoreDurability::default(),
            cache_bytes: 64 << 20,
            expect_hits: true,
            storage: Arc::new(OsStorage),
        }
    }
}

fn keyspace_options(options: &StoreOptions) -> KeyspaceCreateOptions {
    use fjall::config::PinningPolicy;
    KeyspaceCreateOptions::default()
        .expect_point_read_hits(options.expect_hits)
        // fjall's default memtable is 64 MiB. Every new URL is a skip-list insert with random
        // keys, so a smaller one keeps more of the list in cache: `filter --data --exact`
        // on 1,000,000 URLs took 2.36 s instead of 3.08 s, and on 5,000,000 the same time
        // (17.0 s against 16.8 s) in 195 MB of RSS instead of 348 MB.
        .max_memtable_size(8 << 20)
        .filter_block_pinning_policy(PinningPolicy::all(true))
        .index_block_pinning_policy(PinningPolicy::all(true))
}

/// What the store keeps per fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Record {
    /// How many times the fingerprint was recorded or confirmed (seed 004's reference count),
    /// saturating at `u32::MAX`.
    pub refcount: u32,
    /// Which filter generation of a [`CountingSet`](super::CountingSet) the fingerprint was
    /// added to, so that forgetting it decrements the right counters. 0 elsewhere.
    pub generation: u32,
    /// The hash of the URL's host (see `crate::host`), so that a counting namespace can
    /// forget a host; 0 if unknown.
    pub host: u32,
}

impl Record {
    /// A first sighting in `generation`: refcount 1.
    #[must_use]
    pub const fn new(generation: u32) -> Record {
        Record { refcount: 1, generation, host: 0 }
    }

    /// The value bytes (see the [module docs](self#on-disk)); the length is 4, 8 or 12.
    #[must_use]
    pub fn encode(self) -> ([u8; 12], usize) {
        let mut out = [0u8; 12];
        out[..4].copy_from_slice(&self.refcount.to_le_bytes());
        out[4..8].copy_from_slice(&self.generation.to_le_bytes());
        out[8..].copy_from_slice(&self.host.to_le_bytes());
        let len = match (self.generation, self.host) {
            (_, h) if h != 0 => 12,
            (0, _) => 4,
            _ => 8,
        };
        (out, len)
    }

    /// Decodes a value written by [`encode`](Self::encode); `None` if it is malformed.
    #[must_use]
    pub fn decode(bytes: &[u8]) -> Option<Record> {
        let word = |i: usize| -> Option<u32> {
            Some(u32::from_le_bytes(bytes.get(i..i + 4)?.try_into().ok()?))
        };
        match bytes.len() {
            4 => Some(Record { refcount: word(0)?, generation: 0, host: 0 }),
            8 => {
                let generation = word(4)?;
                // Generation 0 is always written in the short form: a long one is not ours.
                (generation != 0).then_some(Record { refcount: word(0)?, generation, host: 0 })
            }
            12 => {
                let host = word(8)?;
                // Host 0 (unknown) is never written.
                (host != 0).then_some(Record { refcount: word(0)?, generation: word(4)?, host })
            }
            _ => None,
        }
    }
}

/// The operations an exact index needs from a fingerprint store.
///
/// Implementations are internally synchronized (`&self` everywhere). Writes are visible to
/// readers as soon as they return, whatever the durability.
pub trait FpStore: Send + Sync + fmt::Debug {
    /// The record of `fp`, if stored.
    ///
    /// # Errors
    /// I/O, or [`Error::Corrupt`] if the stored value does not decode.
    fn get_record(&self, fp: u64) -> Result<Option<Record>>;

    /// Stores every fingerprint of `fps` with [`Record::new(generation)`](Record::new), in one
    /// atomic write batch (one fsync under [`StoreDurability::Always`]).
    ///
    /// The caller knows the fingerprints are new (a Bloom negative, or a store miss it read
    /// under its lock) and distinct: no read is made. Storing one again resets its record and
    /// makes [`len`](Self::len) overcount.
    ///
    /// # Errors
    /// I/O, [`Error::Poisoned`]; on error nothing of the batch may be assumed stored.
    fn insert_many_in(&self, fps: &[u64], generation: u32) -> Result<()> {
        self.insert_many_hosts_in(fps, &[], generation)
    }

    /// [`insert_many_in`](Self::insert_many_in), each record keeping `hosts[i]` (empty: all
    /// unknown).
    ///
    /// # Errors
    /// As [`insert_many_in`](Self::insert_many_in).
    fn insert_many_hosts_in(&self, fps: &[u64], hosts: &[u32], generation: u32) -> Result<()>;

    /// Overwrites the record of a fingerprint that is stored (for example its refcount).
    ///
    /// # Errors
    /// As [`insert_many_in`](Self::insert_many_in).
    fn update_record(&self, fp: u64, record: Record) -> Result<()>;

    /// Adds 1 to the refcount of `fp` and returns the new count; an absent `fp` is stored with
    /// refcount 1 (generation 0). Atomic with respect to other writes of this store.
    ///
    /// # Errors
    /// As [`insert_many_in`](Self::insert_many_in).
    fn increment(&self, fp: u64) -> Result<u32>;

    /// Removes `fp`; returns its record if it was stored.
    ///
    /// # Errors
    /// As [`insert_many_in`](Self::insert_many_in).
    fn remove_record(&self, fp: u64) -> Result<Option<Record>>;

    /// The number of stored fingerprints (O(1)).
    fn len(&self) -> u64;

    /// Calls `f` with every stored fingerprint and its record (in no promised order), on a
    /// consistent snapshot.
    ///
    /// # Errors
    /// I/O or corruption met during the scan; `f` may have seen part of the store.
    fn scan(&self, f: &mut dyn FnMut(u64, Record)) -> Result<()>;

    /// Every stored fingerprint (seed 004's recount walks them).
    fn iter_fingerprints(&self) -> Box<dyn Iterator<Item = Result<u64>> + '_>;

    /// Makes every write so far durable (fsync), whatever the durability.
    ///
    /// # Errors
    /// I/O; a failed sync poisons the store.
    fn sync(&self) -> Result<()>;

    /// The durability writes are acknowledged with.
    fn durability(&self) -> StoreDurability;

    /// Heap or cache memory the store uses, in bytes (an estimate).
    fn memory_bytes(&self) -> u64;

    /// Where the store lives, for errors that name it (empty in memory).
    fn location(&self) -> PathBuf {
        PathBuf::new()
    }

    /// The refcount of `fp`, if stored.
    ///
    /// # Errors
    /// As [`get_record`](Self::get_record).
    fn get(&self, fp: u64) -> Result<Option<u32>> {
        Ok(self.get_record(fp)?.map(|r| r.refcount))
    }

    /// Whether `fp` is stored.
    ///
    /// # Errors
    /// As [`get_record`](Self::get_record).
    fn contains(&self, fp: u64) -> Result<bool> {
        Ok(self.get_record(fp)?.is_some())
    }

    /// Stores a new `fp` with refcount 1 (see [`insert_many_in`](Self::insert_many_in)).
    ///
    /// # Errors
    /// As [`insert_many_in`](Self::insert_many_in).
    fn insert_new(&self, fp: u64) -> Result<()> {
        self.insert_many_in(&[fp], 0)
    }

    /// Stores many new fingerprints in one write (see [`insert_many_in`](Self::insert_many_in)).
    ///
    /// # Errors
    /// As [`insert_many_in`](Self::insert_many_in).
    fn insert_many(&self, fps: &[u64]) -> Result<()> {
        self.insert_many_in(fps, 0)
    }

    /// Removes `fp`; returns whether it was stored.
    ///
    /// # Errors
    /// As [`insert_many_in`](Self::insert_many_in).
    fn remove(&self, fp: u64) -> Result<bool> {
        Ok(self.remove_record(fp)?.is_some())
    }

    /// Whether nothing is stored.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The fingerprint store on disk: an LSM tree ([fjall](https://docs.rs/fjall)).
/// See the [module docs](self) for the format and durability.
///
/// # Examples
/// ```
/// use urlseen_engine::exact::{FingerprintStore, FpStore, StoreDurability};
/// let dir = tempfile::tempdir()?;
/// let store = FingerprintStore::open(dir.path(), StoreDurability::Buffered)?;
/// store.insert_new(42)?;
/// assert_eq!(store.increment(42)?, 2);
/// drop(store);
/// let store = FingerprintStore::open_existing(dir.path(), StoreDurability::Buffered)?;
/// assert_eq!(store.get(42)?, Some(2));
/// assert!(store.remove(42)?);
/// assert_eq!(store.len(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct FingerprintStore {
    db: Database,
    keyspace: Keyspace,
    dir: PathBuf,
    durability: StoreDurability,
    /// The fingerprint count; held across every write so that batches carry the right count.
    count: Mutex<u64>,
    /// The floor written after each sync. Taken before `count` when both are.
    tally: Mutex<Tally>,
}

impl fmt::Debug for FingerprintStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FingerprintStore")
            .field("dir", &self.dir)
            .field("durability", &self.durability)
            .field("len", &*self.count.lock())
            .finish_non_exhaustive()
    }
}

impl FingerprintStore {
    /// Opens the store in `dir` with [`StoreOptions::default`] and `durability`, creating
    /// `dir` and an empty store if there is none.
    ///
    /// # Errors
    /// [`Error::Locked`] if the store is open elsewhere; a header error
    /// ([`Error::Corrupt`] for a bad magic or checksum,
    /// [`Error::UnsupportedVersion`]); [`Error::Corrupt`] if the
    /// LSM data is damaged or present without a header; I/O.
    pub fn open(dir: &Path, durability: StoreDurability) -> Result<Self> {
        Self::open_with(dir, StoreOptions { durability, ..StoreOptions::default() })
    }

    /// [`open`](Self::open) with all options.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn open_with(dir: &Path, options: StoreOptions) -> Result<Self> {
        let header = dir.join(HEADER_FILE);
        let storage = options.storage.as_ref();
        if !exists(storage, &header)? {
            if exists(storage, &dir.join(LSM_DIR))? {
                return Err(Error::Corrupt {
                    path: header,
                    reason: "the LSM data is there but its header file is missing".into(),
                });
            }
            storage.create_dir_all(dir).map_err(io_err("create directory", dir))?;
            write_header(storage, dir)?;
        }
        Self::open_with_header(dir, options, true)
    }

    /// Opens the store in `dir`, which must hold one: a store that vanished must not silently
    /// come back empty (exact mode would then answer "new" for recorded URLs).
    ///
    /// # Errors
    /// [`Error::NotFound`] if `dir` or its header file is missing; otherwise as
    /// [`open`](Self::open).
    pub fn open_existing(dir: &Path, durability: StoreDurability) -> Result<Self> {
        Self::open_existing_with(dir, StoreOptions { durability, ..StoreOptions::default() })
    }

    /// [`open_existing`](Self::open_existing) with all options.
    ///
    /// # Errors
    /// As [`open_existing`](Self::open_existing).
    pub fn open_existing_with(dir: &Path, options: StoreOptions) -> Result<Self> {
        let storage = options.storage.as_ref();
        if !exists(storage, &dir.join(HEADER_FILE))? {
            return Err(store_error::not_found(dir));
        }
        // The LSM would create itself empty: a store that lost it must not open as "knows
        // nothing", which would answer "new" for every recorded fingerprint.
        if !exists(storage, &dir.join(LSM_DIR))? {
            return Err(Error::Corrupt {
                path: dir.to_path_buf(),
                reason: format!("the header is there but the LSM directory {LSM_DIR:?} is missing"),
            });
        }
        Self::open_with_header(dir, options, true)
    }

    /// Opens the store in `dir` whatever its tally says, for `urlseen check` to compare
    /// ([`Self::len`] against [`Self::tally_floor`]) and say what was lost.
    ///
    /// # Errors
    /// As [`open_existing`](Self::open_existing), without the tally's refusal.
    pub(crate) fn open_unchecked(dir: &Path, options: StoreOptions) -> Result<Self> {
        if !exists(options.storage.as_ref(), &dir.join(HEADER_FILE))? {
            return Err(store_error::not_found(dir));
        }
        Self::open_with_header(dir, options, false)
    }

    /// The floor its tally holds: the fewest fingerprints it must hold.
    pub(crate) fn tally_floor(&self) -> u64 {
        self.tally.lock().floor
    }

    /// Rewrites the tally of the closed store in `dir` to hold `floor` alone: `urlseen check
    /// --repair` accepting what the store lost (it holds `floor` fingerprints, fewer than it
    /// acknowledged), so that it opens again.
    ///
    /// # Errors
    /// I/O.
    pub(crate) fn accept_loss(storage: &Arc<dyn Storage>, dir: &Path, floor: u64) -> Result<()> {
        tally::rewrite(storage, dir, floor)
    }

    fn open_with_header(dir: &Path, options: StoreOptions, trust: bool) -> Result<Self> {
        let durability = options.durability;
        check_header(options.storage.as_ref(), &dir.join(HEADER_FILE))?;
        let lsm = dir.join(LSM_DIR);
        let fjall = |e| store_error::from_fjall(dir, e);
        // fjall asserts on some damage to its journal (a value length that disagrees with
        // itself) instead of returning an error: that is damage, named as such, not a crash.
        let open = || Database::builder(&lsm).cache_size(options.cache_bytes).open();
        let db = std::panic::catch_unwind(std::panic::AssertUnwindSafe(open))
            .map_err(|panic| {
                let what = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("a panic");
                Error::corrupt(
                    &lsm,
                    &format!(
                        "the LSM engine (fjall) failed reading its files ({}); they are damaged. \
                         Restore the store directory {} from a backup, or run {}, which can set \
                         the damaged journal aside and says how many URLs that loses",
                        what.lines().next().unwrap_or_default(),
                        dir.display(),
                        repair_command(dir)
                    ),
                )
            })?
            .map_err(fjall)?;
        let keyspace = db.keyspace(KEYSPACE, || keyspace_options(&options)).map_err(fjall)?;
        let count = match keyspace.get(COUNT_KEY).map_err(fjall)? {
            None => 0,
            Some(v) => u64::from_le_bytes(v.as_ref().try_into().map_err(|_| Error::Corrupt {
                path: dir.to_path_buf(),
                reason: "count key is not 8 bytes".into(),
            })?),
        };
        let tally = Tally::read(Arc::clone(&options.storage), dir)?;
        if trust && tally.floor > count {
            return Err(behind(dir, count, tally.floor));
        }
        Ok(FingerprintStore {
            db,
            keyspace,
            dir: dir.to_path_buf(),
            durability,
            count: Mutex::new(count),
            tally: Mutex::new(tally),
        })
    }

    /// The store directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every stored fingerprint, in ascending order, from a snapshot taken now.
    pub fn iter_fingerprints(&self) -> impl Iterator<Item = Result<u64>> + use<> {
        let dir = self.dir.clone();
        self.keyspace.iter().filter_map(move |guard| match guard.key() {
            Err(e) => Some(Err(store_error::from_fjall(&dir, e))),
            Ok(key) => decode_key(&dir, &key).transpose(),
        })
    }

    /// Bytes on disk (journal and tables).
    ///
    /// # Errors
    /// I/O.
    pub fn disk_space(&self) -> Result<u64> {
        self.db.disk_space().map_err(|e| store_error::from_fjall(&self.dir, e))
    }

    fn fjall(&self) -> impl Fn(fjall::Error) -> Error + '_ {
        |e| store_error::from_fjall(&self.dir, e)
    }

    /// Commits `batch` plus the new count, with the configured durability.
    fn commit(&self, mut batch: fjall::OwnedWriteBatch, count: u64) -> Result<()> {
        batch.insert(&self.keyspace, COUNT_KEY.as_slice(), count.to_le_bytes().as_slice());
        batch.durability(Some(self.durability.persist_mode())).commit().map_err(self.fjall())
    }
}

impl FpStore for FingerprintStore {
    fn get_record(&self, fp: u64) -> Result<Option<Record>> {
        match self.keyspace.get(fp.to_be_bytes()).map_err(self.fjall())? {
            None => Ok(None),
            Some(v) => Record::decode(&v).map(Some).ok_or_else(|| Error::Corrupt {
                path: self.dir.clone(),
                reason: format!("value of fingerprint {fp:#018x} has {} bytes", v.len()),
            }),
        }
    }

    fn insert_many_hosts_in(&self, fps: &[u64], hosts: &[u32], generation: u32) -> Result<()> {
        if fps.is_empty() {
            return Ok(());
        }
        let mut count = self.count.lock();
        let mut batch = self.db.batch();
        for (i, &fp) in fps.iter().enumerate() {
            let host = hosts.get(i).copied().unwrap_or(0);
            let (value, len) = Record { host, ..Record::new(generation) }.encode();
            batch.insert(&self.keyspace, fp.to_be_bytes().as_slice(), &value[..len]);
        }
        let new_count = *count + fps.len() as u64;
        self.commit(batch, new_count)?;
        *count = new_count;
        Ok(())
    }

    fn update_record(&self, fp: u64, record: Record) -> Result<()> {
        let (value, len) = record.encode();
        let count = self.count.lock();
        let mut batch = self.db.batch();
        batch.insert(&self.keyspace, fp.to_be_bytes().as_slice(), &value[..len]);
        self.commit(batch, *count)
    }

    fn increment(&self, fp: u64) -> Result<u32> {
        let mut count = self.count.lock();
        let old = self.get_record(fp)?;
        let record = match old {
            Some(r) => Record { refcount: r.refcount.saturating_add(1), ..r },
            None => Record::new(0),
        };
        let (value, len) = record.encode();
        let mut batch = self.db.batch();
        batch.insert(&self.keyspace, fp.to_be_bytes().as_slice(), &value[..len]);
        let new_count = *count + u64::from(old.is_none());
        self.commit(batch, new_count)?;
        *count = new_count;
        Ok(record.refcount)
    }

    fn remove_record(&self, fp: u64) -> Result<Option<Record>> {
        let mut tally = self.tally.lock();
        let mut count = self.count.lock();
        let Some(old) = self.get_record(fp)? else { return Ok(None) };
        let mut batch = self.db.batch();
        batch.remove(&self.keyspace, fp.to_be_bytes().as_slice());
        let new_count = count.saturating_sub(1);
        if tally.floor > new_count {
            // The store may reach the disk holding fewer than the floor: lower it first,
            // durably, with slack for the removals that follow (a forget removes many).
            let slack = REMOVAL_SLACK.max(new_count / 64);
            tally.write(new_count.saturating_sub(slack), true)?;
        }
        self.commit(batch, new_count)?;
        *count = new_count;
        Ok(Some(old))
    }

    fn len(&self) -> u64 {
        *self.count.lock()
    }

    fn scan(&self, f: &mut dyn FnMut(u64, Record)) -> Result<()> {
        for guard in self.keyspace.iter() {
            let (key, value) = guard.into_inner().map_err(self.fjall())?;
            let Some(fp) = decode_key(&self.dir, &key)? else { continue };
            let record = Record::decode(&value).ok_or_else(|| Error::Corrupt {
                path: self.dir.clone(),
                reason: format!("value of fingerprint {fp:#018x} has {} bytes", value.len()),
            })?;
            f(fp, record);
        }
        Ok(())
    }

    fn iter_fingerprints(&self) -> Box<dyn Iterator<Item = Result<u64>> + '_> {
        Box::new(FingerprintStore::iter_fingerprints(self))
    }

    fn sync(&self) -> Result<()> {
        // No removal runs meanwhile (they take the tally first), and what is counted now is
        // written: after the fsync, the store holds at least `count`.
        let mut tally = self.tally.lock();
        let count = *self.count.lock();
        self.db.persist(PersistMode::SyncAll).map_err(self.fjall())?;
        if count != tally.floor {
            tally.write(count, false)?;
        }
        Ok(())
    }

    fn durability(&self) -> StoreDurability {
        self.durability
    }

    fn memory_bytes(&self) -> u64 {
        self.db.cache_size() + self.db.write_buffer_size()
    }

    fn location(&self) -> PathBuf {
        self.dir.clone()
    }
}

/// `urlseen check --data DIR --repair` for the store in `dir` (`DIR/ns/<hex>/store`), in
/// backquotes.
fn repair_command(dir: &Path) -> String {
    let data = dir
        .parent()
        .and_then(Path::parent)
        .filter(|ns| ns.file_name().is_some_and(|n| n == "ns"))
        .and_then(Path::parent);
    match data {
        Some(d) => format!("`urlseen check --data {} --repair`", d.display()),
        None => "`urlseen check --repair` on its data directory".to_owned(),
    }
}

/// The refusal of a store that holds fewer fingerprints than its tally says it acknowledged.
fn behind(dir: &Path, held: u64, floor: u64) -> Error {
    let repair = repair_command(dir);
    Error::Corrupt {
        path: dir.join(LSM_DIR),
        reason: format!(
            "holds {held} URLs but {floor} were acknowledged ({TALLY_FILE} says so): {} URLs are \
             missing, lost with part of its journal or tables (a journal damaged part-way is cut \
             at the damage when the store is opened). Restore the store directory {} from a \
             backup, or run {repair}, which accepts the loss (those URLs will be new again)",
            floor - held,
            dir.display()
        ),
    }
}

/// `Ok(Some(fp))` for a fingerprint key, `Ok(None)` for the count key, an error otherwise.
fn decode_key(dir: &Path, key: &[u8]) -> Result<Option<u64>> {
    match <[u8; 8]>::try_from(key) {
        Ok(bytes) => Ok(Some(u64::from_be_bytes(bytes))),
        Err(_) if key == COUNT_KEY => Ok(None),
        Err(_) => Err(Error::Corrupt {
            path: dir.to_path_buf(),
            reason: format!("a key of {} bytes (fingerprints have 8)", key.len()),
        }),
    }
}

fn exists(storage: &dyn Storage, path: &Path) -> Result<bool> {
    Ok(storage.file_len(path).map_err(io_err("stat", path))?.is_some())
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> Error + use<> {
    let path = path.to_path_buf();
    move |source| store_error::io(what, &path, source)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn record_round_trip() {
        for r in [
            Record::new(0),
            Record::new(7),
            Record { refcount: u32::MAX, generation: 1, host: 0 },
            Record { refcount: 2, generation: 0, host: 9 },
            Record { refcount: 3, generation: 4, host: u32::MAX },
        ] {
            let (bytes, len) = r.encode();
            let want = match (r.generation, r.host) {
                (_, h) if h != 0 => 12,
                (0, _) => 4,
                _ => 8,
            };
            assert_eq!(len, want);
            assert_eq!(Record::decode(&bytes[..len]), Some(r));
        }
        assert_eq!(Record::decode(&[1, 0, 0]), None);
        assert_eq!(Record::decode(&[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), None, "host 0 written");
        assert_eq!(Record::decode(&[1, 0, 0, 0, 0, 0, 0, 0]), None, "long form of generation 0");
        assert_eq!(Record::new(0).encode().0[..4], 1u32.to_le_bytes());
    }

    /// The header goes through the store's `Storage`, so a fault injected there reaches it:
    /// a store whose header cannot be made durable is not opened (nor is a counting set whose
    /// parameters cannot be).
    #[test]
    fn the_header_and_params_are_written_through_the_storage() {
        let dir = tempfile::tempdir().unwrap();
        let faulty = crate::storage::FaultyStorage::new();
        faulty.fail_syncs(true);
        let options = StoreOptions { storage: Arc::new(faulty.clone()), ..Default::default() };
        let store = dir.path().join("store");
        let err = FingerprintStore::open_with(&store, options.clone()).unwrap_err();
        assert!(matches!(&err, Error::Io { what, .. } if what.ends_with("write header")), "{err}");
        assert!(!store.join(HEADER_FILE).exists());
        let counting = crate::exact::CountingOptions { capacity: 1000, ..Default::default() };
        let set = dir.path().join("set");
        let err =
            crate::exact::CountingSet::open_with(&set, options.clone(), counting).unwrap_err();
        assert!(matches!(err, Error::Io { .. }), "{err}");
        faulty.fail_syncs(false);
        let opened = crate::exact::CountingSet::open_with(&set, options, counting).unwrap();
        assert!(opened.is_empty());
        assert!(set.join(HEADER_FILE).exists() && set.join(crate::exact::PARAMS_FILE).exists());
    }

    fn copy_dir(from: &Path, to: &Path) {
        fs::create_dir_all(to).unwrap();
        for e in fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                copy_dir(&e.path(), &to.join(e.file_name()));
            } else {
                fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }

    /// The tally is a floor: after a sync it holds the count, a store that lost fingerprints
    /// is refused, and removals after the sync (a crash before the next one) lower it first,
    /// so that a store that only removed is no false alarm.
    #[test]
    fn the_tally_refuses_a_store_that_lost_and_lets_removals_through() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let store = FingerprintStore::open(&path, StoreDurability::Buffered).unwrap();
        store.insert_many(&(1..=5_000).collect::<Vec<u64>>()).unwrap();
        store.sync().unwrap();
        assert_eq!(store.tally_floor(), 5_000);
        for fp in 1..=3_000 {
            assert!(store.remove(fp).unwrap());
        }
        assert!(store.tally_floor() <= 2_000, "floor {}", store.tally_floor());
        // A crash image: the removals written, no sync since.
        let image = dir.path().join("image");
        copy_dir(&path, &image);
        let reopened = FingerprintStore::open_existing(&image, StoreDurability::Buffered).unwrap();
        assert_eq!(reopened.len(), 2_000);
        reopened.sync().unwrap();
        assert_eq!(reopened.tally_floor(), 2_000);
        drop(reopened);
        // The floor at 2,000 and a store with less: refused, saying how many are missing.
        let lost = dir.path().join("lost");
        copy_dir(&image, &lost);
        let store = FingerprintStore::open_existing(&lost, StoreDurability::Buffered).unwrap();
        for fp in 3_001..=3_010 {
            store.remove(fp).unwrap();
        }
        drop(store);
        tally::rewrite(&(Arc::new(OsStorage) as Arc<dyn Storage>), &lost, 2_000).unwrap();
        let err = FingerprintStore::open_existing(&lost, StoreDurability::Buffered).unwrap_err();
        assert!(err.to_string().contains("10 URLs are missing"), "{err}");
        let opened = FingerprintStore::open_unchecked(&lost, StoreOptions::default()).unwrap();
        assert_eq!((opened.len(), opened.tally_floor()), (1_990, 2_000));
    }

    #[test]
    fn header_round_trip_and_damage() {
        let dir = tempfile::tempdir().unwrap();
        write_header(&OsStorage, dir.path()).unwrap();
        let path = dir.path().join(HEADER_FILE);
        check_header(&OsStorage, &path).unwrap();
        let good = fs::read(&path).unwrap();
        let mut bad = good.clone();
        bad[9] ^= 1;
        fs::write(&path, &bad).unwrap();
        let err = check_header(&OsStorage, &path).unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt { reason, .. } if reason.contains("checksum")),
            "{err}"
        );
        bad = good.clone();
        bad[0] = b'X';
        fs::write(&path, &bad).unwrap();
        let err = check_header(&OsStorage, &path).unwrap_err();
        assert!(
            matches!(&err, Error::Corrupt { reason, .. } if reason.contains("bad magic")),
            "{err}"
        );
        fs::write(&path, &good[..20]).unwrap();
        assert!(matches!(check_header(&OsStorage, &path), Err(Error::Corrupt { .. })));
        let mut future = good[..16].to_vec();
        future[8..12].copy_from_slice(&2u32.to_le_bytes());
        let sum = xxhash_rust::xxh3::xxh3_64(&future);
        future.extend_from_slice(&sum.to_le_bytes());
        fs::write(&path, &future).unwrap();
        assert!(matches!(
            check_header(&OsStorage, &path),
            Err(Error::UnsupportedVersion { found: 2, supported: 1, .. })
        ));
    }

    fn exercise(store: &dyn FpStore) {
        assert!(store.is_empty());
        store.insert_new(5).unwrap();
        store.insert_many(&[1, 2, 3]).unwrap();
        store.insert_many_in(&[10, 11], 4).unwrap();
        assert_eq!(store.len(), 6);
        assert_eq!(store.get(5).unwrap(), Some(1));
        assert_eq!(store.increment(5).unwrap(), 2);
        assert_eq!(store.increment(99).unwrap(), 1, "increment of an absent fingerprint adds it");
        assert_eq!(store.len(), 7);
        assert_eq!(store.get_record(10).unwrap(), Some(Record::new(4)));
        assert!(store.remove(99).unwrap());
        assert!(!store.remove(99).unwrap());
        assert_eq!(store.len(), 6);
        let mut all: Vec<u64> = store.iter_fingerprints().map(|r| r.unwrap()).collect();
        all.sort_unstable();
        assert_eq!(all, [1, 2, 3, 5, 10, 11]);
        let mut in_gen_4 = Vec::new();
        store
            .scan(&mut |fp, r| {
                if r.generation == 4 {
                    in_gen_4.push(fp);
                }
            })
            .unwrap();
        in_gen_4.sort_unstable();
        assert_eq!(in_gen_4, [10, 11]);
        store.sync().unwrap();
    }

    #[test]
    fn mem_store_behaves() {
        exercise(&MemStore::new());
    }

    #[test]
    fn disk_store_behaves_and_iterates_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = FingerprintStore::open(dir.path(), StoreDurability::Always).unwrap();
        exercise(&store);
        let ordered: Vec<u64> = store.iter_fingerprints().map(|r| r.unwrap()).collect();
        assert_eq!(ordered, [1, 2, 3, 5, 10, 11]);
    }
}
