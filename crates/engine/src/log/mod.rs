//! The fingerprint log: a namespace's append-only record of every fingerprint it recorded (and
//! forgot), the source of truth that snapshots only cache.
//!
//! # Format (little-endian)
//! ```text
//! header  : magic "URLSEENL" (8) | version u16 | reserved [0; 6]
//! record  : len u32 | kind u8 | reserved [0; 3] | payload (len bytes) | xxh3_64(len, kind, payload) u64
//! payload : fingerprints, u64 each (kind 1 = recorded, kind 3 = kept; kind 2 is unused)
//!         | kinds 4 and 5 (recorded, kept, with hosts): n fingerprints u64, then their n host
//!           hashes u32, zero-padded to a multiple of 8 (see `crate::host`)
//!         | kind 6 (forget a host): host hash u32 | [0; 4]
//!         | kind 7 (forget URLs of a host): fingerprints u64 | host hash u32 | [0; 4]
//!         | kind 8: a word of the small-namespace journal each (only in that file, see
//!           `crate::namespace::small_journal`)
//! ```
//! Kinds 4 to 6 came with forgetting by host (`docs/forget.md`): a build from before reads a
//! log that has one as damaged (downgrading a data directory is not supported).
//! A record is acknowledged only once it is written (and, under [`Fsync::Always`], synced), so
//! a crash can only tear the *last* record: recovery keeps every complete record and cuts the
//! torn tail (a partial record, or a complete one that fails its checksum, and whatever garbage
//! or zeros a file system left after it), reporting how many bytes it cut. A bad record with a
//! valid record anywhere after it is corruption, not a torn tail, and opening fails rather than
//! dropping acknowledged records.
//!
//! # Group commit
//! Writers append records to a shared buffer (one short lock) and then commit: the first writer
//! to take the I/O lock writes the whole buffer, everyone's records included, and syncs once;
//! the writers queued behind it find their records already durable. Under load one fsync covers
//! many batches, which is what keeps `always` fast.

mod record;

pub use crate::options::Fsync;
use record::{MAX_PAYLOAD, encode_record, parse_stream};
pub use record::{Record, RecordKind};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use urlseen_filter::frame::Format;

use crate::error::{Error, Result};
use crate::storage::{AppendFile, Storage};

/// The log format version this build writes and reads.
pub const LOG_VERSION: u16 = 1;
/// The log's framing: magic `URLSEENL`, version [`LOG_VERSION`].
const FORMAT: Format =
    Format { name: "fingerprint log", magic: *b"URLSEENL", version: LOG_VERSION, oldest: 1 };
/// Bytes of the log's header: a log this long holds no record.
pub(crate) const HEADER_LEN: u64 = 16;
/// How often a poisoned log tries to recover ([`FingerprintLog::recover`]): once a second at
/// most, as Redis retries a failed write of its append-only file.
pub(crate) const RECOVERY_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// What opening a log found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogRecovery {
    /// Complete records, in order.
    pub records: Vec<Record>,
    /// Bytes of a torn last record that were cut off.
    pub truncated_bytes: u64,
}

/// Counters of a log's I/O.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Bytes in the log (including buffered ones).
    pub bytes: u64,
    /// Syncs done.
    pub syncs: u64,
    /// Total time spent in syncs, in microseconds.
    pub sync_micros: u64,
}

#[derive(Debug)]
struct Pending {
    bytes: Vec<u8>,
    /// Log offset just past the buffered bytes.
    end: u64,
}

/// An open fingerprint log. See the [module docs](self).
#[derive(Debug)]
pub struct FingerprintLog {
    path: PathBuf,
    /// Where the file lives: a recovery cuts and reopens it there.
    storage: Arc<dyn Storage>,
    policy: Fsync,
    pending: Mutex<Pending>,
    /// The file, locked by whoever writes or syncs it; `None` while it is closed (detached, see
    /// [`Self::set_detached`]): the next write or sync opens it.
    io: Mutex<Option<Box<dyn AppendFile>>>,
    /// The file is closed after each write or sync, so that the log holds no descriptor
    /// between them (a namespace a `Db` keeps out of its bound of open files).
    detached: std::sync::atomic::AtomicBool,
    /// Offset up to which bytes were handed to the OS, and up to which they are durable.
    /// Changed only under `io`, read without it: a sync holds `io` for milliseconds, and a
    /// commit of what is already durable returns without waiting for it.
    written_to: AtomicU64,
    synced_to: AtomicU64,
    poisoned: Mutex<Option<String>>,
    /// The poison is not the log's own I/O failure (a store written half-way, a batch whose
    /// answers could not be handed on): only a reopen recovers from it, not [`Self::recover`].
    poisoned_for_good: std::sync::atomic::AtomicBool,
    /// When the log was poisoned or last tried to recover: [`Self::recovery_due`] allows one
    /// attempt per [`RECOVERY_INTERVAL`].
    last_attempt: Mutex<Option<Instant>>,
    syncs: AtomicU64,
    sync_micros: AtomicU64,
    /// Held by a writer whose records must not reach the file yet (see [`Self::hold`]); every
    /// flush takes it first.
    hold: Mutex<()>,
    /// Opened by [`Self::open_read_only`]: every write and sync is refused.
    read_only: bool,
    /// Files whose bytes some records rely on (the namespace's `hosts` file, its URL
    /// journal): written before every write of the log and synced before every sync of it
    /// (see [`Precedes`]).
    first: parking_lot::RwLock<Vec<Arc<dyn Precedes>>>,
}

/// A file that must be on disk before the log records that rely on it: the namespace's `hosts`
/// file, whose entries list the hosts of the hashes that records carry (see
/// `crate::namespace::host_dict`), and the URL journal of a namespace that keeps its URLs (see
/// `crate::namespace::url_journal`). Its owner buffers bytes before the records that rely on them
/// are appended to the log; the log writes them out before each of its own writes and syncs them
/// before each of its own syncs, so a record written (synced) has them written (synced), under
/// every fsync policy, at the cost of one more sync only when the file has new bytes.
pub(crate) trait Precedes: Send + Sync + std::fmt::Debug {
    /// Writes what is buffered; with `sync`, makes everything written durable.
    ///
    /// # Errors
    /// The I/O error (the log is then poisoned, as for its own).
    fn flush(&self, sync: bool) -> Result<()>;

    /// After a failed write or sync: cuts what the failure may have left after the last
    /// complete write, so that what is still buffered is written again where it belongs (see
    /// [`FingerprintLog::recover`]).
    ///
    /// # Errors
    /// The I/O error, or [`Error::Poisoned`] if this file cannot recover without a reopen.
    fn recover(&self) -> Result<()>;

    /// Closes the file between writes, or keeps it open again (see
    /// [`FingerprintLog::set_detached`]). Returns whether it can (a file that cannot stays
    /// open, and its namespace is never detached).
    fn set_detached(&self, _detached: bool) -> bool {
        false
    }
}

/// Records held back from the file until [`Self::commit`] (see [`FingerprintLog::hold`]).
///
/// Dropped without [`Self::commit`] (its batch failed half-way), it discards the held records
/// and poisons the log, as [`Self::discard`]: they were never handed on, so they must never be
/// written.
#[derive(Debug)]
#[must_use = "a hold dropped without commit discards its records and poisons the log"]
pub struct LogHold<'a> {
    log: &'a FingerprintLog,
    /// Where the held records start in the pending buffer, and the log offset there.
    start: (usize, u64),
    committed: bool,
    _held: parking_lot::MutexGuard<'a, ()>,
}

impl LogHold<'_> {
    /// Makes everything up to `lsn` as durable as the policy promises, as
    /// [`FingerprintLog::commit`], and lets go.
    ///
    /// # Errors
    /// As [`FingerprintLog::commit`].
    pub fn commit(mut self, lsn: u64) -> Result<()> {
        self.committed = true;
        self.log.flush_held(lsn, self.log.policy.commit_syncs())
    }

    /// Drops the records appended since the hold began, so no flush ever writes them, and
    /// poisons the log for `reason`: the state in memory has them, and must not be
    /// acknowledged or snapshotted any more.
    pub fn discard(mut self, reason: String) {
        self.discard_held(reason);
    }

    fn discard_held(&mut self, reason: String) {
        self.committed = true;
        let mut pending = self.log.pending.lock();
        let (len, end) = self.start;
        if pending.bytes.len() >= len {
            pending.bytes.truncate(len);
            pending.end = end;
        }
        drop(pending);
        self.log.poison_for(reason);
    }
}

impl Drop for LogHold<'_> {
    fn drop(&mut self) {
        if !self.committed {
            self.discard_held(format!(
                "a batch of {} failed before its records were handed on; they were not \
                 recorded; reopen to go on",
                self.log.path.display()
            ));
        }
    }
}

impl FingerprintLog {
    /// Creates a new, empty log at `path` (replacing nothing: the caller checks it is new),
    /// durably (synced) unless the policy promises less than that ([`Fsync::commit_syncs`]):
    /// then a power loss before the next sync may leave it missing or short of its header,
    /// which recovery takes for an empty log (see `crate::namespace::persist`).
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn create(storage: &Arc<dyn Storage>, path: &Path, policy: Fsync) -> Result<Self> {
        let mut header = Vec::with_capacity(HEADER_LEN as usize);
        FORMAT.write_header(&mut header);
        header.resize(HEADER_LEN as usize, 0);
        match policy.commit_syncs() {
            true => storage.write_atomic(path, &header),
            false => storage.write_atomic_unsynced(path, &header),
        }
        .map_err(|e| Error::io("create log", path, e))?;
        Self::open_at(storage, path, policy, HEADER_LEN)
    }

    /// Reads and checks the log at `path` without changing it (`urlseen check`): returns the
    /// records and fingerprints in it, the offset its valid records end at, and the bytes of
    /// a torn tail after them (which opening would cut).
    ///
    /// # Errors
    /// As [`Self::open`]: a bad header, or a bad record with valid ones after it.
    pub fn verify(storage: &Arc<dyn Storage>, path: &Path) -> Result<(u64, u64, u64, u64)> {
        let (mut records, mut fingerprints) = (0u64, 0u64);
        let (end, torn) = parse_stream(storage, path, 0, &mut |r| {
            records += 1;
            fingerprints += r.fingerprints.len() as u64;
        })?;
        Ok((records, fingerprints, end, torn))
    }

    /// Opens the log at `path`, reading every complete record and cutting a torn tail.
    ///
    /// # Errors
    /// [`Error::Io`]; [`Error::Corrupt`] for a bad header or a bad record in the middle;
    /// [`Error::UnsupportedVersion`].
    pub fn open(
        storage: &Arc<dyn Storage>,
        path: &Path,
        policy: Fsync,
    ) -> Result<(Self, LogRecovery)> {
        let mut records = Vec::new();
        let (log, truncated_bytes) =
            Self::open_from(storage, path, policy, 0, &mut |r| records.push(r))?;
        Ok((log, LogRecovery { records, truncated_bytes }))
    }

    /// [`Self::open`], streamed: every record is read and checked, and those that end after
    /// offset `from` are handed to `on_record` in order, so memory stays bounded however long
    /// the log is. Returns the log and the bytes of a torn tail that were cut.
    ///
    /// # Errors
    /// As [`Self::open`].
    pub fn open_from(
        storage: &Arc<dyn Storage>,
        path: &Path,
        policy: Fsync,
        from: u64,
        on_record: &mut dyn FnMut(Record),
    ) -> Result<(Self, u64)> {
        let (valid_end, truncated) = parse_stream(storage, path, from, on_record)?;
        if truncated > 0 {
            storage.truncate(path, valid_end).map_err(|e| Error::io("truncate log", path, e))?;
        }
        let log = Self::open_at(storage, path, policy, valid_end)?;
        Ok((log, truncated))
    }

    /// [`Self::open_from`] for a read-only open (`urlseen stats`): every record is read and
    /// checked and those after `from` handed to `on_record`, but nothing is written, cut or
    /// created. A torn tail is left where it is (the next read-write open cuts it) and its
    /// length returned; the log ends before it. Every later append, commit or sync fails with
    /// [`Error::ReadOnly`].
    ///
    /// # Errors
    /// As [`Self::open`].
    pub fn open_read_only(
        storage: &Arc<dyn Storage>,
        path: &Path,
        from: u64,
        on_record: &mut dyn FnMut(Record),
    ) -> Result<(Self, u64)> {
        let (valid_end, torn) = parse_stream(storage, path, from, on_record)?;
        let log = Self::with_file(storage, path, Fsync::No, valid_end, Box::new(NoFile), true);
        Ok((log, torn))
    }

    /// A log at `path` that does not exist, opened read-only: empty, refusing every write.
    pub(crate) fn open_read_only_empty(storage: &Arc<dyn Storage>, path: &Path) -> Self {
        Self::with_file(storage, path, Fsync::No, HEADER_LEN, Box::new(NoFile), true)
    }

    fn open_at(storage: &Arc<dyn Storage>, path: &Path, policy: Fsync, end: u64) -> Result<Self> {
        let file = storage.open_append(path).map_err(|e| Error::io("open log", path, e))?;
        Ok(Self::with_file(storage, path, policy, end, file, false))
    }

    fn with_file(
        storage: &Arc<dyn Storage>,
        path: &Path,
        policy: Fsync,
        end: u64,
        file: Box<dyn AppendFile>,
        read_only: bool,
    ) -> Self {
        FingerprintLog {
            path: path.to_owned(),
            storage: Arc::clone(storage),
            policy,
            pending: Mutex::new(Pending { bytes: Vec::new(), end }),
            io: Mutex::new(Some(file)),
            detached: std::sync::atomic::AtomicBool::new(false),
            written_to: AtomicU64::new(end),
            synced_to: AtomicU64::new(end),
            poisoned: Mutex::new(None),
            poisoned_for_good: std::sync::atomic::AtomicBool::new(false),
            last_attempt: Mutex::new(None),
            syncs: AtomicU64::new(0),
            sync_micros: AtomicU64::new(0),
            hold: Mutex::new(()),
            read_only,
            first: parking_lot::RwLock::new(Vec::new()),
        }
    }

    /// Detached, the log (and the files that precede it) holds no descriptor between writes:
    /// its file is closed now, and each later write or sync opens it and closes it again.
    /// Attached again, the file stays open from its next write on. Nothing written or synced
    /// changes (closing a file keeps what was written to it; a later sync syncs it).
    pub(crate) fn set_detached(&self, detached: bool) {
        self.detached.store(detached, Ordering::Release);
        if detached {
            *self.io.lock() = None;
        }
        for first in self.first.read().iter() {
            first.set_detached(detached);
        }
    }

    /// Whether its file is closed between writes (see [`Self::set_detached`]).
    pub(crate) fn is_detached(&self) -> bool {
        self.detached.load(Ordering::Acquire)
    }

    /// Makes `first` precede this log on disk (see [`Precedes`]), after those given before.
    /// Called before any write.
    pub(crate) fn precede_with(&self, first: Arc<dyn Precedes>) {
        self.first.write().push(first);
    }

    /// [`Precedes::flush`] of the file that precedes this log, for a writer whose records go
    /// elsewhere (a counting namespace's store): a failure poisons the log as its own would.
    ///
    /// # Errors
    /// [`Error::Io`] (the log is then poisoned) or [`Error::Poisoned`].
    pub(crate) fn flush_first(&self, sync: bool) -> Result<()> {
        // A read-only log has none.
        let first = self.first.read();
        if first.is_empty() {
            return Ok(());
        }
        self.check()?;
        first.iter().try_for_each(|f| f.flush(sync)).map_err(|e| self.poison_with(e))
    }

    /// Holds back everything appended from now on from the file: every other flush (commits,
    /// the every-second sync, a checkpoint's) waits until the hold commits or is discarded.
    /// For a writer that hands its answers on before they count as recorded: `urlseen filter`
    /// prints a batch's new URLs, then commits, so a crash in between loses the batch (its
    /// URLs are new again after restart: printed twice at worst, never recorded unprinted).
    pub fn hold(&self) -> LogHold<'_> {
        let held = self.hold.lock();
        let pending = self.pending.lock();
        let start = (pending.bytes.len(), pending.end);
        drop(pending);
        LogHold { log: self, start, committed: false, _held: held }
    }

    /// Whether it was opened with [`Self::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The fsync policy.
    pub fn policy(&self) -> Fsync {
        self.policy
    }

    /// Offset just past everything appended (buffered or written).
    pub fn end(&self) -> u64 {
        self.pending.lock().end
    }

    /// I/O counters.
    pub fn stats(&self) -> LogStats {
        LogStats {
            bytes: self.end(),
            syncs: self.syncs.load(Ordering::Relaxed),
            sync_micros: self.sync_micros.load(Ordering::Relaxed),
        }
    }

    /// Fails if an earlier write or sync failed (after that, nothing is acknowledged again), or
    /// if the log was opened read-only.
    ///
    /// # Errors
    /// [`Error::Poisoned`]; [`Error::ReadOnly`].
    pub fn check(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly { path: self.path.clone(), what: "writes are refused" });
        }
        match &*self.poisoned.lock() {
            Some(reason) => Err(Error::Poisoned { reason: reason.clone() }),
            None => Ok(()),
        }
    }

    /// Buffers one record; returns the offset [`Self::commit`] must reach for it to count.
    /// Cheap: no I/O. Nothing is acknowledged until `commit`.
    ///
    /// # Errors
    /// [`Error::Poisoned`].
    pub fn append(&self, kind: RecordKind, fingerprints: &[u64]) -> Result<u64> {
        self.append_with_hosts(kind, fingerprints, &[])
    }

    /// [`Self::append`] of a record that carries hosts: kinds [`RecordKind::RecordedHosts`]
    /// and [`RecordKind::KeptHosts`] (`hosts[i]` is the host hash of `fingerprints[i]`), and
    /// [`RecordKind::ForgetHost`] (no fingerprints, one host).
    ///
    /// # Errors
    /// [`Error::Poisoned`].
    ///
    /// # Panics
    /// If a kind with hosts per fingerprint gets a different number of each.
    pub fn append_with_hosts(
        &self,
        kind: RecordKind,
        fingerprints: &[u64],
        hosts: &[u32],
    ) -> Result<u64> {
        self.check()?;
        let mut pending = self.pending.lock();
        if kind == RecordKind::ForgetHost {
            let start = pending.bytes.len();
            encode_record(&mut pending.bytes, kind, &[], hosts);
            pending.end += (pending.bytes.len() - start) as u64;
            return Ok(pending.end);
        }
        if kind == RecordKind::ForgetUrls {
            // One host for the whole record; a long list goes in several records, each with
            // the host (replaying them one after the other forgets the union).
            assert_eq!(hosts.len(), 1, "a forget of URLs names one host");
            let step = (MAX_PAYLOAD as usize - 8) / 8;
            // At least one record, even when no fingerprint matched: the forget still drops
            // the host's kept records, and replay must too.
            let mut rest = fingerprints;
            loop {
                let (chunk, next) = rest.split_at(rest.len().min(step));
                let start = pending.bytes.len();
                encode_record(&mut pending.bytes, kind, chunk, hosts);
                pending.end += (pending.bytes.len() - start) as u64;
                rest = next;
                if rest.is_empty() {
                    return Ok(pending.end);
                }
            }
        }
        let per = if hosts.is_empty() { 8 } else { 12 };
        if !hosts.is_empty() {
            assert_eq!(hosts.len(), fingerprints.len(), "one host per fingerprint");
        }
        let step = (MAX_PAYLOAD as usize - 8) / per;
        for (i, chunk) in fingerprints.chunks(step).enumerate() {
            let start = pending.bytes.len();
            let hosts = hosts.get(i * step..i * step + chunk.len()).unwrap_or_default();
            encode_record(&mut pending.bytes, kind, chunk, hosts);
            pending.end += (pending.bytes.len() - start) as u64;
        }
        Ok(pending.end)
    }

    /// Makes everything up to `lsn` as durable as the policy promises: written to the OS, and
    /// under [`Fsync::Always`] synced. Concurrent commits share one write and one sync.
    ///
    /// # Errors
    /// [`Error::Io`] (the log is then poisoned) or [`Error::Poisoned`].
    pub fn commit(&self, lsn: u64) -> Result<()> {
        self.flush_to(lsn, self.policy.commit_syncs())
    }

    /// Writes and syncs everything appended so far (the every-second tick, checkpoints, close).
    ///
    /// # Errors
    /// [`Error::Io`] (the log is then poisoned) or [`Error::Poisoned`].
    pub fn sync_all(&self) -> Result<()> {
        let end = self.end();
        self.flush_to(end, true)
    }

    /// Writes everything appended so far to the OS, without syncing (a namespace being
    /// unloaded under `everysec` or `no`). Returns whether written bytes are left unsynced.
    ///
    /// # Errors
    /// [`Error::Io`] (the log is then poisoned) or [`Error::Poisoned`].
    pub fn write_all(&self) -> Result<bool> {
        let end = self.end();
        self.flush_to(end, false)?;
        Ok(self.synced_to.load(Ordering::Acquire) < self.written_to.load(Ordering::Acquire))
    }

    fn flush_to(&self, lsn: u64, sync: bool) -> Result<()> {
        let done = if sync { &self.synced_to } else { &self.written_to };
        if done.load(Ordering::Acquire) >= lsn {
            self.check()?;
            return Ok(());
        }
        let _not_held = self.hold.lock();
        self.flush_held(lsn, sync)
    }

    /// [`Self::flush_to`] by whoever holds `hold`.
    fn flush_held(&self, lsn: u64, sync: bool) -> Result<()> {
        self.check()?;
        let done = if sync { &self.synced_to } else { &self.written_to };
        if done.load(Ordering::Acquire) >= lsn {
            return Ok(());
        }
        let mut io = self.io.lock();
        // Again under the lock: the writer we waited for may have done it.
        if done.load(Ordering::Acquire) >= lsn {
            return Ok(());
        }
        self.check()?;
        let result = self.write_held(&mut io, lsn, sync);
        if self.detached.load(Ordering::Acquire) {
            *io = None;
        }
        result
    }

    /// [`Self::flush_held`] under the file's lock (opened first if it is closed).
    fn write_held(&self, io: &mut Option<Box<dyn AppendFile>>, lsn: u64, sync: bool) -> Result<()> {
        let mut written = self.written_to.load(Ordering::Acquire);
        let bytes = match written < lsn {
            true => {
                let mut pending = self.pending.lock();
                written = pending.end;
                Some(std::mem::take(&mut pending.bytes))
            }
            false => None,
        };
        let must_sync = sync && self.synced_to.load(Ordering::Acquire) < written;
        if bytes.is_some() || must_sync {
            // Taken after the records above: every entry they rely on was buffered before
            // they were appended, so it goes out (and is synced) before them.
            let flushed = self.first.read().iter().try_for_each(|first| first.flush(must_sync));
            if let Err(e) = flushed {
                if let Some(bytes) = bytes {
                    self.unwritten(bytes);
                }
                return Err(self.poison_with(e));
            }
        }
        if bytes.is_none() && !must_sync {
            return Ok(());
        }
        let file = match io {
            Some(file) => file,
            None => match self.storage.open_append(&self.path) {
                Ok(file) => io.insert(file),
                Err(e) => {
                    if let Some(bytes) = bytes {
                        self.unwritten(bytes);
                    }
                    return Err(self.poison("open", e));
                }
            },
        };
        if let Some(bytes) = bytes {
            if let Err(e) = file.append(&bytes) {
                self.unwritten(bytes);
                return Err(self.poison("write", e));
            }
            self.written_to.store(written, Ordering::Release);
        }
        if must_sync {
            let started = Instant::now();
            if let Err(e) = file.sync() {
                // Not retried in place: after a failed fsync Linux may have marked the unsynced
                // pages clean without writing them, so a later fsync that succeeds proves
                // nothing, and records appended after them would sit behind a hole a power
                // loss opens (the next open would refuse the log as damaged in the middle).
                // Redis exits on an AOF fsync error under `always`; PostgreSQL panics. A
                // reopen recovers from what the file holds.
                let reason = format!(
                    "fsync of {} failed: {e}; refusing writes until the directory is reopened \
                     (the kernel may have dropped the unsynced pages)",
                    self.path.display()
                );
                self.poison_for(reason);
                return Err(Error::io("fsync", &self.path, e));
            }
            self.syncs.fetch_add(1, Ordering::Relaxed);
            self.sync_micros.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
            self.synced_to.store(written, Ordering::Release);
        }
        Ok(())
    }

    /// Puts back `bytes`, taken from the pending buffer for a write that failed: they stay in
    /// memory, first in line, since they belong at `written_to`, where a recovery writes them
    /// again once the file is cut back there (so every LSN handed out stays true). Whoever
    /// waits on them gets an error meanwhile.
    fn unwritten(&self, bytes: Vec<u8>) {
        let mut pending = self.pending.lock();
        let later = std::mem::replace(&mut pending.bytes, bytes);
        pending.bytes.extend_from_slice(&later);
    }

    /// Refuses every later write with [`Error::Poisoned`] for `reason`: a write that failed
    /// half-way (in exact mode, the store) left state that must not be acknowledged later.
    pub fn poison_for(&self, reason: String) {
        let mut poisoned = self.poisoned.lock();
        self.poisoned_for_good.store(true, Ordering::Release);
        if poisoned.is_none() {
            *poisoned = Some(reason);
        }
    }

    /// Tries to take back the poison of a failed write or sync of this log or of a file that
    /// precedes it (a full disk, no file descriptor left, an I/O error), as Redis resumes
    /// writes after `MISCONF` once it can write again. Returns `Ok(false)` if the log was not
    /// poisoned.
    ///
    /// What a failed write may have left after the last complete one is cut
    /// ([`Storage::truncate`] back to the bytes handed to the OS whole), the file is reopened
    /// and synced, and the records that failed to reach it, kept in memory in order, are
    /// written by the next commit where they belong: every LSN handed out stays true. Under
    /// `always` nothing past the last good sync was acknowledged; under `everysec` and `no`
    /// what was written and not synced was, and the sync here makes it durable (unless, after
    /// the failed fsync, the kernel dropped those pages: then a power loss can lose them, the
    /// caveat of every program that retries fsync on Linux).
    ///
    /// # Errors
    /// [`Error::Poisoned`] if the poison is not an I/O failure of the log's (only a reopen
    /// recovers then), [`Error::ReadOnly`], or the I/O error that the recovery met (the log
    /// stays poisoned, with its first reason).
    /// Whether a recovery may be tried now: [`RECOVERY_INTERVAL`] after the failure and after
    /// the last attempt (which this call counts as made).
    pub(crate) fn recovery_due(&self) -> bool {
        let mut last = self.last_attempt.lock();
        let now = Instant::now();
        if last.is_some_and(|at| now.saturating_duration_since(at) < RECOVERY_INTERVAL) {
            return false;
        }
        *last = Some(now);
        true
    }

    pub(crate) fn recover(&self) -> Result<bool> {
        if self.read_only {
            return self.check().map(|()| false);
        }
        // No held batch is half-way (its records would be discarded under our feet), no
        // writer is writing or syncing.
        let _not_held = self.hold.lock();
        let mut io = self.io.lock();
        if self.poisoned.lock().is_none() {
            return Ok(false);
        }
        if self.poisoned_for_good.load(Ordering::Acquire) {
            self.check()?;
        }
        for first in self.first.read().iter() {
            first.recover()?;
        }
        let written = self.written_to.load(Ordering::Acquire);
        self.storage
            .truncate(&self.path, written)
            .map_err(|e| Error::io("cut the torn tail of", &self.path, e))?;
        let mut reopened =
            self.storage.open_append(&self.path).map_err(|e| Error::io("reopen", &self.path, e))?;
        reopened.sync().map_err(|e| Error::io("fsync", &self.path, e))?;
        *io = (!self.detached.load(Ordering::Acquire)).then_some(reopened);
        self.synced_to.store(written, Ordering::Release);
        *self.poisoned.lock() = None;
        Ok(true)
    }

    /// Poisons the log for the failure `e` of the file that precedes it, and returns `e`.
    fn poison_with(&self, e: Error) -> Error {
        let reason = format!(
            "{e}; refusing writes to {} until a write succeeds again (retried every second)",
            self.path.display()
        );
        self.poison_io(reason);
        e
    }

    fn poison(&self, what: &str, e: std::io::Error) -> Error {
        let reason = format!(
            "{what} of {} failed: {e}; refusing writes until a write succeeds again (retried \
             every second)",
            self.path.display()
        );
        self.poison_io(reason);
        Error::io(what, &self.path, e)
    }

    /// Poisons the log for a failure of its own I/O, which [`Self::recover`] may take back,
    /// not before [`RECOVERY_INTERVAL`].
    fn poison_io(&self, reason: String) {
        *self.last_attempt.lock() = Some(Instant::now());
        *self.poisoned.lock() = Some(reason);
    }
}

/// The file of a log opened read-only: never written, since [`FingerprintLog::check`] refuses
/// every write before it gets here.
#[derive(Debug)]
struct NoFile;

impl AppendFile for NoFile {
    fn append(&mut self, _: &[u8]) -> std::io::Result<()> {
        Err(std::io::Error::new(std::io::ErrorKind::ReadOnlyFilesystem, "opened read-only"))
    }

    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::record::parse_record;
    use super::*;
    use crate::storage::OsStorage;

    fn storage() -> Arc<dyn Storage> {
        Arc::new(OsStorage)
    }

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn a_held_batch_reaches_the_file_only_when_committed() {
        let dir = tmp();
        let path = dir.path().join("log");
        let log = FingerprintLog::create(&storage(), &path, Fsync::EverySec).unwrap();
        let len = || std::fs::metadata(&path).unwrap().len();
        let empty = len();
        let hold = log.hold();
        let lsn = log.append(RecordKind::Recorded, &[1, 2, 3]).unwrap();
        assert_eq!(len(), empty, "appending wrote");
        hold.commit(lsn).unwrap();
        assert!(len() > empty);
        // A hold dropped without commit (its batch failed): nothing of it is ever written,
        // and nothing is acknowledged after it.
        let written = len();
        let hold = log.hold();
        log.append(RecordKind::Recorded, &[4, 5]).unwrap();
        drop(hold);
        assert!(matches!(log.sync_all(), Err(Error::Poisoned { .. })));
        assert_eq!(len(), written, "an abandoned batch reached the file");
    }

    #[test]
    fn records_round_trip_through_reopen() {
        let dir = tmp();
        let path = dir.path().join("log");
        let s = storage();
        let log = FingerprintLog::create(&s, &path, Fsync::Always).unwrap();
        let a = log.append(RecordKind::Recorded, &[1, 2, 3]).unwrap();
        log.commit(a).unwrap();
        let b = log.append(RecordKind::Kept, &[2]).unwrap();
        log.commit(b).unwrap();
        drop(log);
        let (_, rec) = FingerprintLog::open(&s, &path, Fsync::Always).unwrap();
        assert_eq!(rec.truncated_bytes, 0);
        let got: Vec<_> = rec.records.iter().map(|r| (r.kind, r.fingerprints.clone())).collect();
        assert_eq!(got, vec![(RecordKind::Recorded, vec![1, 2, 3]), (RecordKind::Kept, vec![2])]);
        assert_eq!(rec.records[1].end, b);
    }

    #[test]
    fn records_with_hosts_round_trip() {
        let dir = tmp();
        let path = dir.path().join("log");
        let log = FingerprintLog::create(&storage(), &path, Fsync::Always).unwrap();
        log.append_with_hosts(RecordKind::RecordedHosts, &[1, 2, 3], &[7, 8, 9]).unwrap();
        log.append_with_hosts(RecordKind::KeptHosts, &[4, 5], &[10, 11]).unwrap();
        log.append_with_hosts(RecordKind::ForgetHost, &[], &[8]).unwrap();
        log.append_with_hosts(RecordKind::ForgetUrls, &[12, 13], &[9]).unwrap();
        log.append_with_hosts(RecordKind::ForgetUrls, &[], &[9]).unwrap();
        let end = log.append(RecordKind::Recorded, &[6]).unwrap();
        log.commit(end).unwrap();
        drop(log);
        let (_, rec) = FingerprintLog::open(&storage(), &path, Fsync::Always).unwrap();
        let got: Vec<_> =
            rec.records.iter().map(|r| (r.kind, r.fingerprints.clone(), r.hosts.clone())).collect();
        assert_eq!(
            got,
            vec![
                (RecordKind::RecordedHosts, vec![1, 2, 3], vec![7, 8, 9]),
                (RecordKind::KeptHosts, vec![4, 5], vec![10, 11]),
                (RecordKind::ForgetHost, vec![], vec![8]),
                (RecordKind::ForgetUrls, vec![12, 13], vec![9]),
                // A forget that matched nothing still leaves its record.
                (RecordKind::ForgetUrls, vec![], vec![9]),
                (RecordKind::Recorded, vec![6], vec![]),
            ]
        );
        // A payload whose length fits no count of (fingerprint, host) pairs is damage.
        let mut bad = Vec::new();
        encode_record(&mut bad, RecordKind::Recorded, &[1], &[]);
        bad[4] = RecordKind::RecordedHosts as u8;
        let check = urlseen_filter::frame::checksum(&bad[..bad.len() - 8]);
        let n = bad.len();
        bad[n - 8..].copy_from_slice(&check.to_le_bytes());
        assert!(parse_record(&bad).is_none());
    }

    #[test]
    fn a_torn_tail_is_cut_and_reported_at_every_cut_point() {
        let dir = tmp();
        let path = dir.path().join("log");
        let s = storage();
        let log = FingerprintLog::create(&s, &path, Fsync::No).unwrap();
        let first = log.append(RecordKind::Recorded, &[10, 11]).unwrap();
        let second = log.append(RecordKind::Recorded, &[12, 13, 14]).unwrap();
        log.sync_all().unwrap();
        drop(log);
        let full = std::fs::read(&path).unwrap();
        for cut in first as usize + 1..second as usize {
            std::fs::write(&path, &full[..cut]).unwrap();
            let (log, rec) = FingerprintLog::open(&s, &path, Fsync::No).unwrap();
            assert_eq!(rec.records.len(), 1, "cut at {cut}");
            assert_eq!(rec.truncated_bytes, (cut as u64) - first);
            assert_eq!(log.end(), first);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), first);
        }
    }

    #[test]
    fn corruption_in_the_middle_is_an_error_not_a_truncation() {
        let dir = tmp();
        let path = dir.path().join("log");
        let s = storage();
        let log = FingerprintLog::create(&s, &path, Fsync::No).unwrap();
        log.append(RecordKind::Recorded, &[1]).unwrap();
        log.append(RecordKind::Recorded, &[2]).unwrap();
        log.sync_all().unwrap();
        drop(log);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[HEADER_LEN as usize + 9] ^= 0xff; // inside the first record's payload
        std::fs::write(&path, &bytes).unwrap();
        let err = FingerprintLog::open(&s, &path, Fsync::No).unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    }

    /// A log of two records, synced, and its bytes.
    fn two_records(path: &Path) -> (Vec<u8>, u64) {
        let log = FingerprintLog::create(&storage(), path, Fsync::No).unwrap();
        let first = log.append(RecordKind::Recorded, &[1]).unwrap();
        log.append(RecordKind::Recorded, &[2, 3]).unwrap();
        log.sync_all().unwrap();
        drop(log);
        (std::fs::read(path).unwrap(), first)
    }

    #[test]
    fn a_complete_but_bad_last_record_and_a_zero_tail_are_cut() {
        let dir = tmp();
        let path = dir.path().join("log");
        let s = storage();
        let (bytes, first) = two_records(&path);
        // The last record's payload damaged (its write reached the disk only in part).
        let mut damaged = bytes.clone();
        let last = damaged.len() - 12;
        damaged[last] ^= 0xff;
        std::fs::write(&path, &damaged).unwrap();
        let (log, rec) = FingerprintLog::open(&s, &path, Fsync::No).unwrap();
        assert_eq!(rec.records.len(), 1);
        assert_eq!(rec.truncated_bytes, bytes.len() as u64 - first);
        assert_eq!(log.end(), first);
        drop(log);
        // Zeros after the records (a file extended by a write whose data never landed).
        let mut zeros = bytes.clone();
        zeros.resize(bytes.len() + 4096, 0);
        std::fs::write(&path, &zeros).unwrap();
        let (log, rec) = FingerprintLog::open(&s, &path, Fsync::No).unwrap();
        assert_eq!(rec.records.len(), 2);
        assert_eq!(rec.truncated_bytes, 4096);
        assert_eq!(log.end(), bytes.len() as u64);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), bytes.len() as u64);
    }

    #[test]
    fn a_damaged_length_with_records_after_it_is_an_error_not_a_cut() {
        let dir = tmp();
        let path = dir.path().join("log");
        let s = storage();
        let (mut bytes, _) = two_records(&path);
        // The first record's length now runs past the end of the file.
        bytes[HEADER_LEN as usize + 1] = 0x10;
        std::fs::write(&path, &bytes).unwrap();
        let err = FingerprintLog::open(&s, &path, Fsync::No).unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "nothing was cut");
    }

    #[test]
    fn bad_magic_and_version_are_typed_errors() {
        let dir = tmp();
        let path = dir.path().join("log");
        let s = storage();
        std::fs::write(&path, b"definitely not a log").unwrap();
        assert!(matches!(FingerprintLog::open(&s, &path, Fsync::No), Err(Error::Corrupt { .. })));
        let mut header = Format { version: 99, ..FORMAT }.header().to_vec();
        header.extend_from_slice(&[0; 6]);
        std::fs::write(&path, &header).unwrap();
        assert!(matches!(
            FingerprintLog::open(&s, &path, Fsync::No),
            Err(Error::UnsupportedVersion { found: 99, .. })
        ));
    }

    #[test]
    fn fsync_policies_parse_by_their_redis_names() {
        assert_eq!("always".parse::<Fsync>().unwrap(), Fsync::Always);
        assert_eq!("EverySec".parse::<Fsync>().unwrap(), Fsync::EverySec);
        assert_eq!("no".parse::<Fsync>().unwrap(), Fsync::No);
        assert!("sometimes".parse::<Fsync>().is_err());
    }
}
