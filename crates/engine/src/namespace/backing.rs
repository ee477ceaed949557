//! Where a namespace's answers rest: nowhere beyond the process ([`Backing::Volatile`]: in
//! memory, or a spill directory removed at exit) or a data directory ([`Backing::Durable`]),
//! whose log makes a record durable, whose snapshots make restarts fast, and whose recovery
//! report says what opening it found.
//!
//! A namespace asks its backing to check, append, commit and sync, without a branch on where it
//! lives: [`Backing::append`] returns the [`Lsn`] that commits the records, and
//! [`Backing::commit`] the [`Ack`] it gave. When a commit waits for the disk is the sync
//! policy's to say ([`Fsync::commit_syncs`]), in one place.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use once_cell::race::OnceBox;

use parking_lot::{Mutex, MutexGuard};

use super::persist::RecoveryReport;
use super::small_journal::SmallJournal;
use crate::error::{Error, Result};
use crate::leaf_log::LeafStore;
use crate::log::{FingerprintLog, LogHold, RecordKind};
use crate::storage::Storage;
use crate::tree::{Dsbf, Logged};

/// A point in a namespace's log: the offset just past a record. Committing it acknowledges
/// every record before it. `Lsn(0)`: nothing (a volatile backing's, or an empty append's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(super) struct Lsn(pub u64);

/// What a commit promised about the records before `lsn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ack {
    /// Nothing beyond the process: a volatile backing, or nothing to commit.
    InMemory,
    /// Written to the operating system: a process crash loses none of it.
    Written(Lsn),
    /// Synced to the disk: a power loss loses none of it either.
    Synced(Lsn),
}

/// Where a namespace's answers rest (see the module docs).
#[derive(Debug)]
pub(crate) enum Backing {
    /// In memory, or in a spill directory: gone when the process ends.
    Volatile,
    /// A namespace directory in a data directory.
    Durable(Box<Durable>),
    /// A small namespace in its data directory's journal, until it moves to a directory of its own
    /// (see `crate::namespace::small_journal`). Held inline: a million of them in a box each would
    /// cost 32 bytes more a namespace.
    Journal(InJournal),
}

/// A small namespace's place in the journal, and its directory once it moved there.
#[derive(Debug)]
pub(crate) struct InJournal {
    pub journal: Arc<SmallJournal>,
    pub id: u32,
    /// Set (once) when its list became a tree in a directory of its own: from then on the
    /// namespace is [`Backing::Durable`] in all but name. (Boxed: a log's state is a few
    /// hundred bytes, which a million small namespaces would each carry unused; a `OnceBox`
    /// is one pointer, where a `OnceLock` of a box is two words.)
    pub moved: OnceBox<Durable>,
}

impl Backing {
    /// The data directory's side, if there is one.
    pub fn durable(&self) -> Option<&Durable> {
        match self {
            Backing::Volatile => None,
            Backing::Durable(d) => Some(d),
            Backing::Journal(j) => j.moved.get(),
        }
    }

    /// The journal, while the namespace is in it (not moved).
    pub fn journal(&self) -> Option<&InJournal> {
        match self {
            Backing::Journal(j) if j.moved.get().is_none() => Some(j),
            _ => None,
        }
    }

    /// Refuses what the backing would refuse to write: a poisoned log, or one opened read-only.
    ///
    /// # Errors
    /// [`Error::Poisoned`], [`Error::ReadOnly`].
    pub fn check(&self) -> Result<()> {
        if let Some(j) = self.journal() {
            return j.journal.log().check();
        }
        self.durable().map_or(Ok(()), |d| d.log.check())
    }

    /// Appends a batch's records (buffered, not acknowledged until [`Self::commit`]).
    ///
    /// # Errors
    /// As [`Self::check`].
    pub(super) fn append(&self, logged: &Logged<'_>) -> Result<Lsn> {
        self.durable().map_or(Ok(Lsn(0)), |d| d.append(logged))
    }

    /// Appends a forget record (`RecordKind::ForgetHost`, `RecordKind::ForgetUrls`).
    ///
    /// # Errors
    /// As [`Self::check`].
    pub(super) fn append_forget(
        &self,
        kind: RecordKind,
        fps: &[u64],
        hosts: &[u32],
    ) -> Result<Lsn> {
        self.durable().map_or(Ok(Lsn(0)), |d| Ok(Lsn(d.log.append_with_hosts(kind, fps, hosts)?)))
    }

    /// Acknowledges every record before `lsn`: written to the OS, and under a policy whose
    /// commits sync ([`Fsync::commit_syncs`]) synced, with group commit.
    ///
    /// # Errors
    /// [`Error::Io`] (the log is then poisoned), [`Error::Poisoned`].
    pub(super) fn commit(&self, lsn: Lsn) -> Result<Ack> {
        match self.durable() {
            Some(d) if lsn > Lsn(0) => {
                d.log.commit(lsn.0)?;
                Ok(d.ack(lsn))
            }
            _ => Ok(Ack::InMemory),
        }
    }

    /// The end of everything appended so far: what a "seen" may rest on (another writer's
    /// record, appended and not yet committed).
    pub(super) fn end(&self) -> Lsn {
        self.durable().map_or(Lsn(0), |d| Lsn(d.log.end()))
    }

    /// Holds this batch's records back from the disk until [`LogHold::commit`] (a caller that
    /// hands the answers on first); `None` when there is no log.
    pub fn hold(&self) -> Option<LogHold<'_>> {
        self.durable().map(|d| d.log.hold())
    }

    /// Refuses every later write until the data directory is reopened (a failure that may
    /// have left memory ahead of the log).
    pub fn poison(&self, reason: impl FnOnce() -> String) {
        if let Some(d) = self.durable() {
            d.log.poison_for(reason());
        }
    }

    /// After a failed write or sync (a full disk, no file descriptor left, an I/O error): tries
    /// to take the poison back, at most once per [`crate::log::RECOVERY_INTERVAL`], by cutting
    /// the log and the leaf files of `leaves` back to what was written whole and syncing (see
    /// [`FingerprintLog::recover`], [`crate::leaf_log::LeafFiles::recover`]). Returns whether
    /// writes may go on now (`false`: not poisoned by an I/O failure of its own, or not yet
    /// time).
    ///
    /// What the failed batch had already put in memory (filter bits, leaf records) stays: its
    /// URLs may answer "seen" without a record (a false positive), never the reverse; records
    /// acknowledged before the failure are all kept.
    ///
    /// # Errors
    /// [`Error::Poisoned`] for a failure only a reopen recovers from; the I/O error the attempt
    /// met (then it stays poisoned).
    pub fn recover(&self, leaves: Option<&LeafStore>) -> Result<bool> {
        if let Some(j) = self.journal() {
            let log = j.journal.log();
            return match log.recovery_due() {
                true => log.recover(),
                false => Ok(false),
            };
        }
        let Some(d) = self.durable() else { return Ok(false) };
        let files = match leaves {
            Some(LeafStore::Files(files)) => Some(files),
            _ => None,
        };
        let just_failed = files
            .and_then(|f| f.failed_at())
            .is_some_and(|at| at.elapsed() < crate::log::RECOVERY_INTERVAL);
        if just_failed || !d.log.recovery_due() {
            return Ok(false);
        }
        if let Some(files) = files {
            files.recover()?;
        }
        d.log.recover()?;
        Ok(true)
    }

    /// Whether a commit waits for the disk: a data directory whose policy syncs per commit.
    pub fn commit_syncs(&self) -> bool {
        if let Some(j) = self.journal() {
            return j.journal.log().policy().commit_syncs();
        }
        self.durable().is_some_and(|d| d.log.policy().commit_syncs())
    }

    /// Makes everything appended so far durable: written and synced.
    ///
    /// # Errors
    /// As [`Self::commit`].
    pub fn sync(&self) -> Result<()> {
        self.durable().map_or(Ok(()), |d| d.log.sync_all())
    }

    /// Writes out (and with `sync`, syncs) the files the log's records rely on, ahead of a
    /// store that has no log in front of it (a counting namespace).
    ///
    /// # Errors
    /// As [`Self::commit`].
    pub fn flush_first(&self, sync: bool) -> Result<()> {
        self.durable().map_or(Ok(()), |d| d.log.flush_first(sync))
    }

    /// Writes a snapshot of `tree` (see [`Durable::checkpoint`]); nothing when volatile.
    ///
    /// # Errors
    /// As [`Durable::checkpoint`].
    pub fn checkpoint(&self, tree: &Dsbf) -> Result<()> {
        self.durable().map_or(Ok(()), |d| d.checkpoint(tree, &|| Ok(())))
    }

    /// Keeps checkpoints out until dropped; `None` when volatile.
    pub fn hold_checkpoints(&self) -> Option<MutexGuard<'_, ()>> {
        self.durable().map(|d| d.checkpointing.lock())
    }

    /// The namespace's directory in a data directory.
    pub fn dir(&self) -> Option<&Path> {
        self.durable().map(|d| d.dir.as_path())
    }

    /// What recovery found when the namespace was opened.
    pub fn recovery(&self) -> Option<&RecoveryReport> {
        self.durable().map(|d| &d.recovery)
    }

    /// Whether the namespace was opened read-only.
    pub fn is_read_only(&self) -> bool {
        if let Backing::Journal(j) = self {
            return j.journal.log().is_read_only();
        }
        self.durable().is_some_and(|d| d.log.is_read_only())
    }
}

impl From<Option<Durable>> for Backing {
    fn from(durable: Option<Durable>) -> Self {
        durable.map_or(Backing::Volatile, |d| Backing::Durable(Box::new(d)))
    }
}

/// The on-disk side of one namespace.
#[derive(Debug)]
pub(crate) struct Durable {
    pub dir: PathBuf,
    pub storage: Arc<dyn Storage>,
    pub log: FingerprintLog,
    pub checkpoint_bytes: u64,
    /// Log offset covered by the newest snapshot on disk.
    pub snapshot_end: AtomicU64,
    /// Bytes of the newest snapshot on disk (the next checkpoint waits for the log to grow by
    /// as much, so checkpoints cost O(1) amortized per URL however large the filters are).
    pub snapshot_bytes: AtomicU64,
    /// One checkpoint at a time.
    pub checkpointing: Mutex<()>,
    pub recovery: RecoveryReport,
    /// A read-only open of a counting namespace: the copy of its store it reads (dropped after
    /// the set, which is declared before `durable` in `Namespace`).
    pub _scratch: Option<tempfile::TempDir>,
}

impl Durable {
    /// Records newly recorded fingerprints, and those kept (see [`RecordKind::Kept`]), in the
    /// log (buffered; `commit` of the LSN returned makes them count; 0 if nothing was
    /// appended).
    /// Fingerprints whose hosts are known go in the kinds with hosts (12 bytes a URL), the
    /// others (raw items, fingerprints) in the plain ones (8 bytes).
    pub(super) fn append(&self, logged: &Logged<'_>) -> Result<Lsn> {
        let mut lsn = 0;
        for (fps, hosts, plain, with_hosts) in [
            (logged.new, logged.new_hosts, RecordKind::Recorded, RecordKind::RecordedHosts),
            (logged.kept, logged.kept_hosts, RecordKind::Kept, RecordKind::KeptHosts),
        ] {
            if fps.is_empty() {
                continue;
            }
            lsn = match hosts.iter().any(|&h| h != 0) {
                true => self.log.append_with_hosts(with_hosts, fps, hosts)?,
                false => self.log.append(plain, fps)?,
            };
        }
        Ok(Lsn(lsn))
    }

    /// Writes a snapshot of `tree` covering the log up to now, streamed to disk (no copy of
    /// the filters in memory). Then, before it replaces the old one: the log is synced up to
    /// its offset, `sync_store` runs (exact mode syncs its store there, so the store holds
    /// everything the snapshot covers and recovery need only reconcile the tail), and the
    /// leaf files it names are synced. The files of leaves retired before it are deleted once
    /// it is in place.
    pub fn checkpoint(&self, tree: &Dsbf, sync_store: &dyn Fn() -> Result<()>) -> Result<()> {
        // A log that refuses writes (poisoned, or opened read-only) would refuse the sync
        // below anyway: refuse before a temporary snapshot file is made.
        self.log.check()?;
        let _one = self.checkpointing.lock();
        let LeafStore::Files(files) = tree.leaf_store() else {
            return Err(Error::InvalidOption {
                name: "storage",
                reason: "a namespace in memory has no snapshot".into(),
            });
        };
        let path = self.dir.join("snapshot");
        let mut info = None;
        let mut failed = None;
        let mut written = 0u64;
        let result = self.storage.write_atomic_with(&path, &mut |w| {
            let mut counted = CountingWriter { inner: w, bytes: 0 };
            let taken = loop {
                tree.complete_splits();
                if let Err(e) = tree.check() {
                    failed = Some(e);
                    return Err(std::io::Error::other("a split failed"));
                }
                if let Some(taken) = tree.write_snapshot(&mut counted, &|| self.log.end())? {
                    break taken;
                }
            };
            written = counted.bytes;
            // The snapshot must never claim log bytes or leaf file bytes that a power loss
            // could take back: sync them before it replaces the old one.
            let synced = self
                .log
                .sync_all()
                .and_then(|()| sync_store())
                .and_then(|()| files.sync(&taken.leaves));
            if let Err(e) = synced {
                failed = Some(e);
                return Err(std::io::Error::other("sync before the snapshot failed"));
            }
            info = Some(taken);
            Ok(())
        });
        if let Some(e) = failed {
            return Err(e);
        }
        result.map_err(|e| Error::io("write snapshot", &path, e))?;
        let Some(info) = info else { return Ok(()) };
        self.snapshot_end.store(info.log_offset, Ordering::Release);
        self.snapshot_bytes.store(written, Ordering::Release);
        files.remove(&info.retired)
    }

    /// Whether the log grew enough since the last snapshot to take a new one: by
    /// `checkpoint_bytes`, and by at least the size of the last snapshot.
    pub fn wants_checkpoint(&self) -> bool {
        let grown = self.log.end().saturating_sub(self.snapshot_end.load(Ordering::Acquire));
        grown >= self.checkpoint_bytes.max(self.snapshot_bytes.load(Ordering::Acquire))
    }
}

/// Counts the bytes written through it.
struct CountingWriter<'a> {
    inner: &'a mut dyn std::io::Write,
    bytes: u64,
}

impl std::io::Write for CountingWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl Durable {
    /// What a commit up to `lsn` under this log's policy promised.
    fn ack(&self, lsn: Lsn) -> Ack {
        match self.log.policy().commit_syncs() {
            true => Ack::Synced(lsn),
            false => Ack::Written(lsn),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Db, DbOptions, Fsync, NamespaceOptions};

    /// What a commit acknowledges follows the backing and its policy: nothing beyond the
    /// process in memory, written under `everysec`, synced under `always`; and it covers the
    /// records appended so far.
    #[test]
    fn a_commit_acknowledges_what_the_policy_promises() {
        let db = Db::in_memory();
        let ns = db.create_namespace("m", NamespaceOptions::default()).unwrap();
        assert!(!ns.seen("https://a.example/").unwrap());
        assert_eq!(ns.backing().end(), Lsn(0));
        assert_eq!(ns.backing().commit(ns.backing().end()).unwrap(), Ack::InMemory);
        for (fsync, written) in [(Fsync::EverySec, false), (Fsync::Always, true)] {
            let dir = tempfile::tempdir().unwrap();
            let db = Db::open_with(dir.path(), DbOptions { fsync, ..Default::default() }).unwrap();
            let ns = db.create_namespace("d", NamespaceOptions::default()).unwrap();
            let empty = ns.backing().end();
            assert_eq!(ns.backing().commit(Lsn(0)).unwrap(), Ack::InMemory, "nothing to commit");
            assert!(!ns.seen("https://a.example/").unwrap());
            let end = ns.backing().end();
            assert!(end > empty, "the record moved the log's end: {end:?}");
            let want = if written { Ack::Synced(end) } else { Ack::Written(end) };
            assert_eq!(ns.backing().commit(end).unwrap(), want, "{fsync}");
            assert_eq!(ns.backing().commit_syncs(), written);
        }
    }
}
