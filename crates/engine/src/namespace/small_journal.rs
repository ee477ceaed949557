//! The small namespaces of a data directory, in one journal: as Redis keeps every key in one
//! append-only file, a namespace that starts small (see `crate::namespace::small`) costs a few
//! records in `DIR/small.log` instead of a directory and three files of its own.
//!
//! A crawl platform makes a namespace per job, most of them a few dozen URLs. Made as a
//! directory each, a million of them took 16 GB of disk (a block per file) and their creation
//! ran at the speed of the file system's inode allocator (86% of the server's time in
//! `open(O_CREAT)` and `mkdir`, about 5,000 namespaces a second). In the journal a namespace
//! is one record when made and one per batch; it moves to a directory of its own, as any
//! persisted namespace has, when its list becomes a tree (past 128 items): then its snapshot,
//! leaf files and log make restarts fast however large it grows.
//!
//! # Format
//! A fingerprint log (`crate::log`: magic `URLSEENL`, the same framing, checksums, torn-tail
//! cut and group commit) whose records are all of kind 8, each a list of 64-bit words:
//! ```text
//! word 0 : sub-kind u32 << 32 | namespace id u32
//! create (1): meta length | the namespace's meta (`crate::options::encode_meta`), in words
//! host   (2): host hash u32 | name length u32 << 32 | the name, in words
//! items  (3): n | n fingerprints | n host hashes u32, two a word
//! gone   (4): nothing: the namespace was dropped, or lives in its own directory now
//! ```
//! Bytes go in words little-endian, the last one zero-padded. Ids are given in order and never
//! reused by one process; a rewrite keeps them.
//!
//! # Replay and rewrite
//! Opening replays the whole journal into the live namespaces' lists (a list holds at most
//! 128 items, so the journal is bounded by the live namespaces' items plus what the dead
//! left). When dead records are more than the live ones (and more than [`REWRITE_MIN_BYTES`]),
//! the journal is rewritten at open with the live namespaces only, to a temporary file synced
//! and renamed over it.
//!
//! # Moving to a directory
//! When a journal namespace becomes a tree, its directory is made and its items written to its
//! log, and all of it synced, before its `gone` record is appended: a crash in between leaves
//! both, and opening takes the directory (which holds every item of the journal's copy) and
//! writes `gone` for the journal's copy then.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::{Error, Result};
use crate::log::{FingerprintLog, Fsync, Record, RecordKind};
use crate::options::NamespaceOptions;
use crate::options::{decode_meta, encode_meta};
use crate::storage::Storage;

/// The journal's file in a data directory.
pub(crate) const JOURNAL_FILE: &str = "small.log";

/// A journal this small is never rewritten, whatever it holds.
const REWRITE_MIN_BYTES: u64 = 1 << 20;

const CREATE: u32 = 1;
const HOST: u32 = 2;
const ITEMS: u32 = 3;
const GONE: u32 = 4;

/// A namespace read back from the journal: what its list held.
#[derive(Debug)]
pub(crate) struct Replayed {
    pub id: u32,
    pub name: String,
    pub options: NamespaceOptions,
    /// Fingerprints and their host hashes, in the order recorded.
    pub items: Vec<(u64, u32)>,
    /// Host hashes and names, in the order listed.
    pub hosts: Vec<(u32, String)>,
    /// Bytes of its records in the journal.
    bytes: u64,
}

/// The small-namespace journal of a data directory (see the [module docs](self)).
#[derive(Debug)]
pub(crate) struct SmallJournal {
    log: FingerprintLog,
    next_id: AtomicU32,
}

impl SmallJournal {
    /// Opens (or, read-write, creates) the journal in data directory `root`, and returns the
    /// namespaces it holds, in no particular order. Read-only, nothing is created, cut or rewritten.
    ///
    /// # Errors
    /// [`Error::Io`]; [`Error::Corrupt`] for a bad record in the middle or a record that does
    /// not decode; [`Error::UnsupportedVersion`]; a meta's errors.
    #[allow(clippy::vec_box, reason = "each box is freed as its namespace is built (see `Replay`)")]
    pub(crate) fn open(
        storage: &Arc<dyn Storage>,
        root: &Path,
        fsync: Fsync,
        read_only: bool,
    ) -> Result<(Self, Vec<Box<Replayed>>)> {
        let path = root.join(JOURNAL_FILE);
        let exists = storage.file_len(&path).map_err(|e| Error::io("read", &path, e))?.is_some();
        if !exists {
            if read_only {
                let log = FingerprintLog::open_read_only_empty(storage, &path);
                return Ok((SmallJournal { log, next_id: AtomicU32::new(0) }, Vec::new()));
            }
            let log = FingerprintLog::create(storage, &path, fsync)?;
            return Ok((SmallJournal { log, next_id: AtomicU32::new(0) }, Vec::new()));
        }
        let mut replay = Replay::default();
        let mut failed = None;
        let mut on_record = |r: Record| {
            if failed.is_none()
                && let Err(reason) = replay.apply(&path, &r)
            {
                failed = Some(reason);
            }
        };
        let log = match read_only {
            true => FingerprintLog::open_read_only(storage, &path, 0, &mut on_record)?.0,
            false => FingerprintLog::open_from(storage, &path, fsync, 0, &mut on_record)?.0,
        };
        if let Some(e) = failed {
            return Err(e);
        }
        let next_id = AtomicU32::new(replay.next_id);
        let live: Vec<Box<Replayed>> = replay.live.into_values().collect();
        let live_bytes: u64 = live.iter().map(|r| r.bytes).sum();
        let journal = SmallJournal { log, next_id };
        let total = journal.log.end();
        if !read_only && total > REWRITE_MIN_BYTES && total > 2 * live_bytes {
            return Ok((journal.rewrite(storage, &path, fsync, &live)?, live));
        }
        Ok((journal, live))
    }

    /// A journal holding `live` only, written beside this one, synced, and renamed over it.
    fn rewrite(
        self,
        storage: &Arc<dyn Storage>,
        path: &Path,
        fsync: Fsync,
        live: &[Box<Replayed>],
    ) -> Result<Self> {
        let tmp = path.with_extension("log.tmp");
        let fresh = FingerprintLog::create(storage, &tmp, Fsync::Always)?;
        let copy = SmallJournal { log: fresh, next_id: AtomicU32::new(0) };
        for r in live {
            copy.append_create(r.id, &r.name, &r.options)?;
            for (hash, name) in &r.hosts {
                copy.host(r.id, *hash, name)?;
            }
            let fps: Vec<u64> = r.items.iter().map(|i| i.0).collect();
            let hosts: Vec<u32> = r.items.iter().map(|i| i.1).collect();
            copy.items(r.id, &fps, &hosts)?;
        }
        copy.log.sync_all()?;
        drop(copy);
        drop(self.log);
        storage.rename(&tmp, path).map_err(|e| Error::io("rename", &tmp, e))?;
        if let Some(dir) = path.parent() {
            storage.sync_dir(dir).map_err(|e| Error::io("sync", dir, e))?;
        }
        let (log, _) = FingerprintLog::open_from(storage, path, fsync, 0, &mut |_| {})?;
        Ok(SmallJournal { log, next_id: self.next_id })
    }

    /// Appends namespace `name`'s creation; returns its id and the offset committing it.
    ///
    /// # Errors
    /// [`Error::Poisoned`], [`Error::ReadOnly`].
    pub(super) fn create(&self, name: &str, options: &NamespaceOptions) -> Result<(u32, u64)> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if id == u32::MAX {
            return Err(Error::InvalidOption {
                name: "namespaces",
                reason: "the data directory's journal has given out 2^32 namespace ids; restart \
                         the server to renumber them"
                    .into(),
            });
        }
        Ok((id, self.append_create(id, name, options)?))
    }

    fn append_create(&self, id: u32, name: &str, options: &NamespaceOptions) -> Result<u64> {
        let meta = encode_meta(name, options);
        let mut words = vec![tag(CREATE, id), meta.len() as u64];
        push_bytes(&mut words, &meta);
        self.log.append(RecordKind::Journal, &words)
    }

    /// Appends host `name` (hash `hash`) listed by namespace `id`.
    ///
    /// # Errors
    /// As [`Self::create`].
    pub(super) fn host(&self, id: u32, hash: u32, name: &str) -> Result<u64> {
        let mut words = vec![tag(HOST, id), u64::from(hash) | ((name.len() as u64) << 32)];
        push_bytes(&mut words, name.as_bytes());
        self.log.append(RecordKind::Journal, &words)
    }

    /// Appends items `fps` (hosts `hosts`, one each, or none) recorded by namespace `id`.
    ///
    /// # Errors
    /// As [`Self::create`].
    pub(super) fn items(&self, id: u32, fps: &[u64], hosts: &[u32]) -> Result<u64> {
        let mut words = Vec::with_capacity(2 + fps.len() + fps.len().div_ceil(2));
        words.extend([tag(ITEMS, id), fps.len() as u64]);
        words.extend_from_slice(fps);
        for pair in (0..fps.len()).step_by(2) {
            let host = |i: usize| u64::from(hosts.get(i).copied().unwrap_or(0));
            words.push(host(pair) | (host(pair + 1) << 32));
        }
        self.log.append(RecordKind::Journal, &words)
    }

    /// Appends that namespace `id` is gone (dropped, or moved to a directory of its own).
    ///
    /// # Errors
    /// As [`Self::create`].
    pub(crate) fn gone(&self, id: u32) -> Result<u64> {
        self.log.append(RecordKind::Journal, &[tag(GONE, id)])
    }

    /// Fails as the journal would refuse a write; but a journal poisoned by a failed write of
    /// its own (a full disk) first tries to recover, at most once a second, as a namespace's
    /// log does (see `Namespace::check_writable`): a create is a write too.
    ///
    /// # Errors
    /// [`Error::Poisoned`] (with the failure's reason while it lasts), [`Error::ReadOnly`].
    pub(super) fn check_writable(&self) -> Result<()> {
        let checked = self.log.check();
        if !matches!(checked, Err(Error::Poisoned { .. })) || !self.log.recovery_due() {
            return checked;
        }
        match self.log.recover() {
            Ok(true) => self.log.check(),
            Ok(false) | Err(Error::Io { .. }) => checked,
            Err(e) => Err(e),
        }
    }

    /// The journal's log: commits, syncs, poison and recovery, as a namespace's own.
    pub(crate) fn log(&self) -> &FingerprintLog {
        &self.log
    }
}

fn tag(sub: u32, id: u32) -> u64 {
    (u64::from(sub) << 32) | u64::from(id)
}

fn push_bytes(words: &mut Vec<u64>, bytes: &[u8]) {
    for chunk in bytes.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        words.push(u64::from_le_bytes(word));
    }
}

/// `len` bytes from `words` (as [`push_bytes`] wrote them), or `None` if they are too few.
fn take_bytes(words: &[u64], len: usize) -> Option<Vec<u8>> {
    if words.len() != len.div_ceil(8) {
        return None;
    }
    let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    bytes.truncate(len);
    Some(bytes)
}

/// What a replay has read so far.
#[derive(Default)]
struct Replay {
    /// Boxed: the table is as large as the live namespaces (2²¹ buckets for a million), and a
    /// bucket of a pointer keeps it 16 bytes each instead of a `Replayed`'s 150; the boxes are
    /// freed one by one as their namespaces are built, which reuse their memory.
    live: HashMap<u32, Box<Replayed>>,
    next_id: u32,
}

impl Replay {
    fn apply(&mut self, path: &Path, record: &Record) -> Result<()> {
        let bad = |what: &str| {
            Error::corrupt(path, &format!("a record ending at offset {} {what}", record.end))
        };
        if record.kind != RecordKind::Journal {
            return Err(bad("is not of the journal's kind (8)"));
        }
        let words = &record.fingerprints;
        let Some(&head) = words.first() else { return Err(bad("is empty")) };
        let (sub, id) = ((head >> 32) as u32, head as u32);
        let body = &words[1..];
        let bytes = 16 + 8 * words.len() as u64;
        match sub {
            CREATE => {
                let Some((&len, rest)) = body.split_first() else { return Err(bad("is short")) };
                let meta = take_bytes(rest, len as usize).ok_or_else(|| bad("is short"))?;
                let (name, options, _) = decode_meta(path, &meta)?;
                self.next_id = self.next_id.max(id.saturating_add(1));
                let items = Vec::new();
                let r = Replayed { id, name, options, items, hosts: Vec::new(), bytes };
                self.live.insert(id, Box::new(r));
            }
            HOST => {
                let Some((&head, rest)) = body.split_first() else { return Err(bad("is short")) };
                let name = take_bytes(rest, (head >> 32) as usize)
                    .and_then(|b| String::from_utf8(b).ok())
                    .ok_or_else(|| bad("has a bad host name"))?;
                if let Some(r) = self.live.get_mut(&id) {
                    r.hosts.push((head as u32, name));
                    r.bytes += bytes;
                }
            }
            ITEMS => {
                let Some((&n, rest)) = body.split_first() else { return Err(bad("is short")) };
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                if rest.len() != n.saturating_add(n.div_ceil(2)) {
                    return Err(bad("has a bad length"));
                }
                let (fps, hosts) = rest.split_at(n);
                if let Some(r) = self.live.get_mut(&id) {
                    let host = |i: usize| (hosts[i / 2] >> (32 * (i % 2))) as u32;
                    r.items.extend(fps.iter().enumerate().map(|(i, &fp)| (fp, host(i))));
                    r.bytes += bytes;
                }
            }
            GONE => {
                self.live.remove(&id);
            }
            _ => return Err(bad("has an unknown sub-kind")),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::OsStorage;

    fn storage() -> Arc<dyn Storage> {
        Arc::new(OsStorage)
    }

    fn options() -> NamespaceOptions {
        NamespaceOptions { capacity: 100, ..NamespaceOptions::default() }
    }

    #[test]
    fn namespaces_round_trip_and_gone_ones_stay_gone() {
        let dir = tempfile::tempdir().unwrap();
        let s = storage();
        {
            let (j, live) = SmallJournal::open(&s, dir.path(), Fsync::Always, false).unwrap();
            assert!(live.is_empty());
            let (a, _) = j.create("job:a", &options()).unwrap();
            let (b, _) = j.create("job:b", &options()).unwrap();
            assert_ne!(a, b);
            j.host(a, 7, "a.example").unwrap();
            j.items(a, &[1, 2, 3], &[7, 7, 0]).unwrap();
            j.items(b, &[9], &[]).unwrap();
            let end = j.gone(b).unwrap();
            j.log().commit(end).unwrap();
        }
        let (j, live) = SmallJournal::open(&s, dir.path(), Fsync::Always, false).unwrap();
        assert_eq!(live.len(), 1);
        let a = &live[0];
        assert_eq!(a.name, "job:a");
        assert_eq!(a.options.capacity, 100);
        assert_eq!(a.items, [(1, 7), (2, 7), (3, 0)]);
        assert_eq!(a.hosts, [(7, "a.example".to_owned())]);
        // Ids are not given twice.
        let (c, _) = j.create("job:c", &options()).unwrap();
        assert!(c > a.id + 1, "{c}");
    }

    #[test]
    fn a_journal_mostly_dead_is_rewritten_with_the_live_ones_and_their_ids() {
        let dir = tempfile::tempdir().unwrap();
        let s = storage();
        let keep;
        {
            let (j, _) = SmallJournal::open(&s, dir.path(), Fsync::No, false).unwrap();
            let fps: Vec<u64> = (0..100).collect();
            for i in 0..2_000 {
                let (id, _) = j.create(&format!("job:{i}"), &options()).unwrap();
                j.items(id, &fps, &[]).unwrap();
                if i != 1_234 {
                    j.gone(id).unwrap();
                }
            }
            keep = j.log().end();
            j.log().sync_all().unwrap();
        }
        assert!(keep > REWRITE_MIN_BYTES);
        let (j, live) = SmallJournal::open(&s, dir.path(), Fsync::No, false).unwrap();
        assert_eq!(live.len(), 1);
        assert_eq!(live[0].name, "job:1234");
        assert_eq!(live[0].id, 1_234);
        assert!(j.log().end() < 4096, "rewritten: {}", j.log().end());
        drop(j);
        let (_, again) = SmallJournal::open(&s, dir.path(), Fsync::No, false).unwrap();
        assert_eq!(again[0].items.len(), 100);
        assert_eq!(again[0].id, 1_234);
    }

    #[test]
    fn read_only_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (j, live) = SmallJournal::open(&storage(), dir.path(), Fsync::No, true).unwrap();
        assert!(live.is_empty());
        assert!(j.create("x", &options()).is_err());
        assert!(!dir.path().join(JOURNAL_FILE).exists());
    }
}
