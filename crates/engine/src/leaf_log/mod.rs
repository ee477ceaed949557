//! Where a DSBF leaf keeps its fingerprints: the source of truth a split re-hashes into the
//! children, kept on disk so that RAM holds only the filters.
//!
//! A tree's leaves share one [`LeafStore`]: in memory (`Db::in_memory`, 12 bytes per URL on the
//! heap), or one append-only file per leaf in a directory (a data directory's `leaves/`, or a
//! spill directory removed on exit). A file-backed leaf holds at most [`BUFFER_RECORDS`]
//! records in RAM; a full buffer is appended to its file as one checksummed block, under the
//! leaf's lock (a write to the page cache, not a sync). A split reads its parent's file back in
//! bounded chunks, sequentially.
//!
//! # Leaf file format (little-endian)
//! ```text
//! header : magic "URLSEENF" (8) | version u16 | reserved [0; 6]
//! block  : count u32 | reserved u32 | count × record | xxh3_64(count, reserved, records) u64
//! record : fingerprint u64 | minute u32 | host u32
//! ```
//! `minute` is the minute (since the Unix epoch) the URL was recorded, and `host` a hash of its
//! canonical host (see [`crate::host`]; 0: unknown, for raw items, fingerprints and records
//! made before hosts were kept): the room per record that recrawl windows and forgetting by
//! host need. A forget by host rewrites a leaf's file whole (`LeafLog::rewrite`). The top bit
//! of `minute` marks a *kept* record (see [`LeafRecord::kept`]): minutes since the epoch need
//! 25 bits until the year 2033 and 31 until the year 6053, and a reader from before kept
//! records counts one as a recorded URL, which loses nothing. A leaf file is not a log of its
//! own: the namespace's log is, and a snapshot records how many bytes of each leaf file it
//! covers. Recovery cuts a leaf file back to that length
//! and replays the log after the snapshot, which appends the rest again.
//!
//! # Errors
//! A leaf's append happens where the tree cannot return an error (under a leaf lock, in the
//! middle of a batch). A failed write keeps the records in the leaf's buffer, so nothing is
//! lost in memory, and marks the store failed; the namespace checks [`LeafStore::check`] after
//! every batch and refuses writes from then on, as it does after a failed log write.

mod chunked;
mod files;
mod rewrite;

use chunked::Chunked;
pub use files::{LeafFiles, LeafStore};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use urlseen_filter::frame::Format;

use crate::dsbf::NodeId;
use crate::error::{Error, Result};
use crate::storage::Storage;

/// The leaf file format version this build writes and reads.
pub const LEAF_FILE_VERSION: u16 = 1;
/// A leaf file's framing. Its magic is the filter encoding's too (an accident of history kept
/// so that existing files open): the two never meet, a leaf file is only opened by its path in
/// a namespace's `leaves/`, and a filter blob read as a leaf file fails its block checksums.
const FORMAT: Format =
    Format { name: "leaf file", magic: *b"URLSEENF", version: LEAF_FILE_VERSION, oldest: 1 };
/// Bytes of a leaf file's header.
const HEADER_LEN: u64 = 16;
/// Bytes of one record.
pub const RECORD_LEN: usize = 16;
const BLOCK_OVERHEAD: usize = 8 + 8;
/// Records a file-backed leaf buffers before it appends them to its file as one block: 16 KiB
/// of RAM per leaf, and one `write` per 1,024 URLs.
pub const BUFFER_RECORDS: usize = 1024;
/// Largest block accepted on read: anything bigger is corruption.
const MAX_BLOCK_RECORDS: u32 = 1 << 20;

/// The bit of a stored record's `minute` that marks it kept.
const KEPT_BIT: u32 = 1 << 31;

/// One recorded URL as a leaf keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeafRecord {
    /// The URL's fingerprint.
    pub fp: u64,
    /// Minute since the Unix epoch at which it was recorded (0: unknown).
    pub minute: u32,
    /// A hash of its host (0: unknown).
    pub host: u32,
    /// A *kept* record: a fingerprint that was answered "seen" (so not recorded as new) on a
    /// Bloom positive that may have been false. It is carried through splits like any record,
    /// so the children hold it and the answer stays "seen", but it does not count towards the
    /// leaf's fill (it was not a new URL).
    pub kept: bool,
}

impl LeafRecord {
    /// A record of `fp` recorded at `minute`, host unknown.
    pub fn new(fp: u64, minute: u32) -> Self {
        LeafRecord { fp, minute, host: 0, kept: false }
    }

    /// A kept record of `fp` (see [`Self::kept`]), made at `minute`.
    pub fn kept(fp: u64, minute: u32) -> Self {
        LeafRecord { fp, minute, host: 0, kept: true }
    }

    /// This record with host hash `host` (see [`crate::host`]).
    pub fn with_host(self, host: u32) -> Self {
        LeafRecord { host, ..self }
    }
}

/// Appends to `out` the records of entries `range` of an in-memory list of fingerprints and
/// their hosts, made by `kind`. A host list is as long as its fingerprint list, so the two are
/// cut into chunks at the same places.
fn extend_records(
    out: &mut Vec<LeafRecord>,
    (fps, hosts): (&Chunked<u64>, &Chunked<u32>),
    range: std::ops::Range<usize>,
    kind: fn(u64) -> LeafRecord,
) {
    for (fps, hosts) in fps.slices(range.clone()).zip(hosts.slices(range)) {
        out.extend(fps.iter().zip(hosts).map(|(&fp, &host)| kind(fp).with_host(host)));
    }
}

/// The minute since the Unix epoch now: a leaf record's coarse time.
pub(crate) fn current_minute() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| (d.as_secs() / 60).min(u64::from(u32::MAX)) as u32)
}

/// One leaf's fingerprints. Every method is called under the leaf's lock (or on a frozen leaf,
/// which no one writes).
#[derive(Debug)]
pub(crate) enum LeafLog {
    /// Every fingerprint, on the heap: the recorded ones, then the kept ones (the order of the
    /// two kinds does not matter to a split), each with its host hash (12 bytes a URL), in
    /// chunks (see [`Chunked`]).
    /// Boxed: a leaf of a file-backed tree (every leaf of a server's namespace) is then the
    /// size of the file variant.
    Memory(Box<MemoryLog>),
    /// A file of blocks and the buffered tail not yet appended to it.
    File {
        id: NodeId,
        /// Records in the file.
        on_disk: u64,
        /// Bytes of the file (0: not created yet).
        file_len: u64,
        /// Records not yet in the file.
        buffer: Vec<LeafRecord>,
    },
}

/// An in-memory leaf log's lists (see [`LeafLog::Memory`]).
#[derive(Debug, Default)]
pub(crate) struct MemoryLog {
    fps: Chunked<u64>,
    hosts: Chunked<u32>,
    kept: Chunked<u64>,
    kept_hosts: Chunked<u32>,
}

/// Where a split's reader is in a frozen leaf: records read, and the file offset they end at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ReadPos {
    pub records: u64,
    pub offset: u64,
}

impl LeafLog {
    /// An empty log for new leaf `id`.
    pub fn new(store: &LeafStore, id: NodeId, reserve: usize) -> Self {
        match store {
            LeafStore::Memory => LeafLog::Memory(Box::new(MemoryLog {
                fps: Chunked::with_capacity(reserve),
                hosts: Chunked::with_capacity(reserve),
                kept: Chunked::default(),
                kept_hosts: Chunked::default(),
            })),
            LeafStore::Files(_) => {
                LeafLog::File { id, on_disk: 0, file_len: 0, buffer: Vec::new() }
            }
        }
    }

    /// A log for leaf `id` whose file holds `records` records in `file_len` bytes (from a
    /// snapshot, after the file was checked and cut to that length).
    pub fn reopened(id: NodeId, records: u64, file_len: u64) -> Self {
        LeafLog::File { id, on_disk: records, file_len, buffer: Vec::new() }
    }

    /// Records held, kept ones included.
    pub fn len(&self) -> u64 {
        match self {
            LeafLog::Memory(m) => (m.fps.len() + m.kept.len()) as u64,
            LeafLog::File { on_disk, buffer, .. } => on_disk + buffer.len() as u64,
        }
    }

    /// Heap bytes: all of it in memory, the buffer for a file.
    pub fn memory_bytes(&self) -> u64 {
        match self {
            LeafLog::Memory(m) => {
                let MemoryLog { fps, hosts, kept, kept_hosts } = &**m;
                (fps.heap_bytes()
                    + hosts.heap_bytes()
                    + kept.heap_bytes()
                    + kept_hosts.heap_bytes()) as u64
            }
            LeafLog::File { buffer, .. } => (buffer.capacity() * RECORD_LEN) as u64,
        }
    }

    /// Bytes of the leaf's file (0 in memory or before the first block).
    pub fn file_len(&self) -> u64 {
        match self {
            LeafLog::Memory(_) => 0,
            LeafLog::File { file_len, .. } => *file_len,
        }
    }

    /// Appends a run of recorded (not kept) fingerprints made at `minute`, with their host
    /// hashes (`None`: unknown, 0): what [`Self::push`] of each would do, in one call, so that
    /// a batch's share of a leaf costs a copy rather than a call per record.
    ///
    /// # Panics
    /// If `hosts` is given and not as long as `fps`.
    pub fn extend_recorded(
        &mut self,
        store: &LeafStore,
        run: &[u64],
        hosts: Option<&[u32]>,
        minute: u32,
    ) {
        if let Some(hosts) = hosts {
            assert_eq!(hosts.len(), run.len(), "extend_recorded: one host per fingerprint");
        }
        match self {
            LeafLog::Memory(m) => {
                let MemoryLog { fps, hosts: fp_hosts, .. } = &mut **m;
                fps.extend_from_slice(run);
                match hosts {
                    Some(hosts) => fp_hosts.extend_from_slice(hosts),
                    None => fp_hosts.extend_with(run.len(), 0),
                }
            }
            LeafLog::File { .. } => {
                let mut done = 0;
                while done < run.len()
                    && let LeafLog::File { buffer, .. } = &mut *self
                {
                    // Up to the buffer's bound (past it only if a failed flush left it full).
                    let take = BUFFER_RECORDS.saturating_sub(buffer.len()).max(1);
                    let end = (done + take).min(run.len());
                    buffer.extend((done..end).map(|i| {
                        let host = hosts.map_or(0, |hosts| hosts[i]);
                        LeafRecord::new(run[i], minute).with_host(host)
                    }));
                    done = end;
                    if buffer.len() >= BUFFER_RECORDS {
                        self.flush(store);
                    }
                }
            }
        }
    }

    /// Appends one record; a full buffer goes to the file (see the module docs on errors).
    pub fn push(&mut self, store: &LeafStore, record: LeafRecord) {
        match self {
            LeafLog::Memory(m) if record.kept => {
                m.kept.push(record.fp);
                m.kept_hosts.push(record.host);
            }
            LeafLog::Memory(m) => {
                m.fps.push(record.fp);
                m.hosts.push(record.host);
            }
            LeafLog::File { buffer, .. } => {
                // Grown by doubling up to its bound: a leaf of a few records holds a few.
                buffer.push(record);
                if buffer.len() >= BUFFER_RECORDS {
                    self.flush(store);
                }
            }
        }
    }

    /// Appends the buffered records to the file as one block. Returns `false` if that failed
    /// (the records stay buffered and the store is marked failed).
    pub fn flush(&mut self, store: &LeafStore) -> bool {
        let (LeafLog::File { id, on_disk, file_len, buffer }, LeafStore::Files(files)) =
            (&mut *self, store)
        else {
            return true;
        };
        if buffer.is_empty() || files.read_only {
            // A read-only open (`urlseen stats`) writes nothing: what its log replay records
            // stays buffered, and `read` serves it from there.
            return true;
        }
        if files.failed.load(Ordering::Acquire) {
            // After any failed write the store takes no more: a retry could append after a torn
            // block, and one per push would re-encode an ever longer buffer.
            return false;
        }
        let path = files.path(*id);
        let mut bytes =
            Vec::with_capacity(HEADER_LEN as usize + BLOCK_OVERHEAD + buffer.len() * RECORD_LEN);
        if *file_len == 0 {
            FORMAT.write_header(&mut bytes);
            bytes.resize(HEADER_LEN as usize, 0);
        }
        // In blocks of at most `BUFFER_RECORDS`: a buffer that grew while the store refused
        // writes (before a recovery) still reads back.
        for block in buffer.chunks(BUFFER_RECORDS) {
            encode_block(&mut bytes, block);
        }
        let written = if *file_len == 0 {
            // A new leaf: whatever a file of this id held before is not ours.
            files
                .make_dir()
                .and_then(|()| files.storage.remove_file(&path))
                .and_then(|()| files.storage.append_to(&path, &bytes))
        } else {
            files.storage.append_to(&path, &bytes)
        };
        match written {
            Ok(()) => {
                *file_len += bytes.len() as u64;
                *on_disk += buffer.len() as u64;
                buffer.clear();
                files.disk_bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                true
            }
            Err(e) => {
                // The file's tail is unknown now: a later append would follow garbage.
                files.fail_append(*id, *file_len, &path, &e);
                false
            }
        }
    }

    /// Flushes, and gives back the heap buffer: a frozen leaf is only read from now on.
    pub fn seal(&mut self, store: &LeafStore) {
        self.flush(store);
        if let LeafLog::File { buffer, .. } = self
            && buffer.is_empty()
        {
            *buffer = Vec::new();
        }
    }

    /// Whether `pos` is past every record.
    pub fn is_end(&self, pos: ReadPos) -> bool {
        pos.records >= self.len()
    }

    /// The position just before record `records`, which must be at a block boundary (where a
    /// [`Self::read`] ended): walks the file's block headers (8 bytes read per block of up to
    /// [`BUFFER_RECORDS`] records), so a dump resumes inside a large leaf without reading it.
    ///
    /// # Errors
    /// [`Error::Corrupt`] if `records` is past the end or inside a block, or the file is
    /// damaged; [`Error::Io`].
    pub(crate) fn seek(&self, store: &LeafStore, records: u64) -> Result<ReadPos> {
        let (LeafLog::File { id, on_disk, file_len, .. }, LeafStore::Files(files)) = (self, store)
        else {
            return Ok(ReadPos { records, offset: 0 });
        };
        let path = files.path(*id);
        if records > self.len() {
            return Err(Error::corrupt(&path, &format!("no record {records} to resume at")));
        }
        if records == 0 {
            return Ok(ReadPos::default());
        }
        let mut pos = ReadPos { records: 0, offset: HEADER_LEN };
        read_header(files, &path)?;
        while pos.records < records.min(*on_disk) {
            let mut head = [0u8; 8];
            read_exact_at(files, &path, pos.offset, &mut head)?;
            let count = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
            if count == 0 || count > MAX_BLOCK_RECORDS {
                return Err(Error::corrupt(
                    &path,
                    &format!("block at byte {} claims {count} records", pos.offset),
                ));
            }
            pos.records += u64::from(count);
            pos.offset += (BLOCK_OVERHEAD + count as usize * RECORD_LEN) as u64;
            if pos.offset > *file_len {
                return Err(Error::corrupt(&path, "a block runs past the leaf's end"));
            }
        }
        if pos.records > records {
            return Err(Error::corrupt(&path, &format!("record {records} is inside a block")));
        }
        // Past the file: the rest is in the buffer, which `read` serves by record count.
        pos.records = records;
        Ok(pos)
    }

    /// Reads the records after `pos` into `out` (cleared first): at least `want` of them unless
    /// fewer are left, in whole blocks. Returns the position after them.
    ///
    /// # Errors
    /// [`Error::Io`] or [`Error::Corrupt`] (a block that fails its checksum).
    pub fn read(
        &self,
        store: &LeafStore,
        pos: ReadPos,
        want: usize,
        out: &mut Vec<LeafRecord>,
    ) -> Result<ReadPos> {
        out.clear();
        match (self, store) {
            (LeafLog::Memory(m), _) => {
                let MemoryLog { fps, hosts, kept, kept_hosts } = &**m;
                let all = fps.len() + kept.len();
                let start = pos.records.min(all as u64) as usize;
                let end = start.saturating_add(want).min(all);
                let split = fps.len();
                extend_records(out, (fps, hosts), start..end.min(split), |fp| {
                    LeafRecord::new(fp, 0)
                });
                let kept_range = start.saturating_sub(split)..end.saturating_sub(split);
                extend_records(out, (kept, kept_hosts), kept_range, |fp| LeafRecord::kept(fp, 0));
                Ok(ReadPos { records: end as u64, offset: 0 })
            }
            (LeafLog::File { id, on_disk, file_len, buffer }, LeafStore::Files(files)) => {
                let path = files.path(*id);
                let mut pos = pos;
                if pos.offset < HEADER_LEN && pos.records < *on_disk {
                    read_header(files, &path)?;
                    pos.offset = HEADER_LEN;
                }
                let mut raw = Vec::new();
                while out.len() < want && pos.records < *on_disk {
                    // One read for about what is wanted, parsed into as many whole blocks as
                    // it holds; a block longer than that is read again whole.
                    let left = file_len.saturating_sub(pos.offset);
                    let guess = ((want - out.len()) * RECORD_LEN + 2 * BLOCK_OVERHEAD) as u64
                        + (BUFFER_RECORDS * RECORD_LEN) as u64;
                    raw.resize(left.min(guess) as usize, 0);
                    read_exact_at(files, &path, pos.offset, &mut raw)?;
                    let before = pos.records;
                    let mut at = 0;
                    while out.len() < want && pos.records < *on_disk {
                        let offset = pos.offset;
                        let Some(head) = raw.get(at..at + 8) else { break };
                        let count = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
                        if count == 0 || count > MAX_BLOCK_RECORDS {
                            return Err(Error::corrupt(
                                &path,
                                &format!("block at byte {offset} claims {count} records"),
                            ));
                        }
                        let len = BLOCK_OVERHEAD + count as usize * RECORD_LEN;
                        if offset + len as u64 > *file_len {
                            return Err(Error::corrupt(
                                &path,
                                &format!(
                                    "block at byte {offset} runs past the leaf's end {file_len}"
                                ),
                            ));
                        }
                        let block = match raw.get(at..at + len) {
                            Some(block) => block,
                            None if at > 0 => break,
                            None => {
                                raw.resize(len, 0);
                                read_exact_at(files, &path, offset, &mut raw)?;
                                &raw[..]
                            }
                        };
                        decode_block(block, out).map_err(|reason| {
                            Error::corrupt(&path, &format!("block at byte {offset}: {reason}"))
                        })?;
                        at += len;
                        pos = ReadPos {
                            records: pos.records + u64::from(count),
                            offset: offset + len as u64,
                        };
                    }
                    if pos.records == before {
                        // Not even one block's header fits before the end: the file holds fewer
                        // records than the leaf says (a damaged snapshot), never a reason to spin.
                        return Err(Error::corrupt(
                            &path,
                            &format!("ends at byte {file_len}, before its record {before}"),
                        ));
                    }
                }
                if out.len() < want && pos.records >= *on_disk {
                    // A frozen leaf is sealed; a live one may still buffer its tail.
                    let skip = (pos.records - on_disk) as usize;
                    let take = buffer.iter().skip(skip).take(want - out.len());
                    let before = out.len();
                    out.extend(take);
                    pos.records += (out.len() - before) as u64;
                }
                Ok(pos)
            }
            (LeafLog::File { .. }, LeafStore::Memory) => Ok(pos),
        }
    }

    /// Drops the log of a leaf that is gone (its split finished): its file is deleted now, or,
    /// if a snapshot on disk may still name it, after the next checkpoint.
    pub fn retire(self, store: &LeafStore) {
        if let (LeafLog::File { id, .. }, LeafStore::Files(files)) = (self, store) {
            if files.keep_retired {
                files.retired.lock().push(id);
            } else if let Err(e) = files.remove_file(id) {
                files.fail("remove", &files.path(id), &e);
            }
        }
    }
}

fn read_exact_at(files: &LeafFiles, path: &Path, offset: u64, buf: &mut [u8]) -> Result<()> {
    let n = files.storage.read_at(path, offset, buf).map_err(|e| Error::io("read", path, e))?;
    if n < buf.len() {
        return Err(Error::corrupt(
            path,
            &format!("ends at byte {}, before its recorded end", offset + n as u64),
        ));
    }
    Ok(())
}

fn read_header(files: &LeafFiles, path: &Path) -> Result<()> {
    let mut head = [0u8; HEADER_LEN as usize];
    read_exact_at(files, path, 0, &mut head)?;
    check_header(path, &head)
}

/// Checks a leaf file's 16-byte header.
///
/// # Errors
/// [`Error::Corrupt`] for a bad magic, [`Error::UnsupportedVersion`].
fn check_header(path: &Path, head: &[u8]) -> Result<()> {
    FORMAT.check_header(head).map(drop).map_err(|e| Error::format(path, e))
}

fn encode_block(out: &mut Vec<u8>, records: &[LeafRecord]) {
    let start = out.len();
    out.extend_from_slice(&(records.len() as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    for r in records {
        out.extend_from_slice(&r.fp.to_le_bytes());
        let minute = if r.kept { r.minute | KEPT_BIT } else { r.minute & !KEPT_BIT };
        out.extend_from_slice(&minute.to_le_bytes());
        out.extend_from_slice(&r.host.to_le_bytes());
    }
    Format::seal(out, start);
}

fn decode_block(
    raw: &[u8],
    out: &mut Vec<LeafRecord>,
) -> std::result::Result<(), urlseen_filter::frame::FormatError> {
    let body = FORMAT.unseal(raw)?;
    for r in body.get(8..).unwrap_or_default().chunks_exact(RECORD_LEN) {
        let (fp, meta) = r.split_at(8);
        let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or_default());
        let meta = word(meta);
        let minute = meta as u32;
        out.push(LeafRecord {
            fp: word(fp),
            minute: minute & !KEPT_BIT,
            host: (meta >> 32) as u32,
            kept: minute & KEPT_BIT != 0,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::OsStorage;

    fn files(dir: &Path) -> LeafStore {
        LeafStore::Files(LeafFiles::open(Arc::new(OsStorage), dir.join("leaves"), false).unwrap())
    }

    #[test]
    fn records_round_trip_through_blocks_and_the_buffer() {
        let dir = tempfile::tempdir().unwrap();
        let store = files(dir.path());
        let mut log = LeafLog::new(&store, 7, 0);
        let n = BUFFER_RECORDS * 3 + 17;
        for i in 0..n as u64 {
            log.push(&store, LeafRecord { fp: i * 3, minute: i as u32, host: 5, kept: i % 7 == 0 });
        }
        assert_eq!(log.len(), n as u64);
        assert!(log.memory_bytes() <= (BUFFER_RECORDS * RECORD_LEN) as u64);
        assert_eq!(store.disk_bytes(), log.file_len());
        let mut all = Vec::new();
        let mut pos = ReadPos::default();
        let mut chunk = Vec::new();
        while !log.is_end(pos) {
            pos = log.read(&store, pos, 1000, &mut chunk).unwrap();
            all.extend_from_slice(&chunk);
        }
        assert_eq!(all.len(), n);
        assert!(all.iter().enumerate().all(|(i, r)| r.fp == i as u64 * 3
            && r.minute == i as u32
            && r.host == 5
            && r.kept == (i % 7 == 0)));
        store.check().unwrap();
    }

    /// A run appended at once holds what one push per record would, in memory and in a file
    /// (runs that fill the buffer part way, exactly, and several times over), hosts or none.
    #[test]
    fn a_run_appended_at_once_equals_a_push_per_record() {
        let dir = tempfile::tempdir().unwrap();
        let runs = [3, BUFFER_RECORDS - 3, BUFFER_RECORDS, 2 * BUFFER_RECORDS + 5, 0, 1];
        for store in [LeafStore::Memory, files(dir.path())] {
            for with_hosts in [false, true] {
                let id = 10 + u32::from(with_hosts);
                let (mut pushed, mut ran) =
                    (LeafLog::new(&store, id, 0), LeafLog::new(&store, id + 2, 0));
                let mut next = 0u64;
                for len in runs {
                    let fps: Vec<u64> = (next..next + len as u64).map(|i| i * 7 + 1).collect();
                    let hosts: Vec<u32> = fps.iter().map(|&fp| (fp % 13) as u32).collect();
                    next += len as u64;
                    for (&fp, &host) in fps.iter().zip(&hosts) {
                        let host = if with_hosts { host } else { 0 };
                        pushed.push(&store, LeafRecord::new(fp, 9).with_host(host));
                    }
                    ran.extend_recorded(&store, &fps, with_hosts.then_some(&hosts[..]), 9);
                }
                assert_eq!(ran.len(), next);
                let (a, b) = (read_all(&pushed, &store), read_all(&ran, &store));
                let strip = |r: &LeafRecord| LeafRecord { minute: 0, ..*r };
                // In memory a log keeps no minute; a file keeps it.
                match store {
                    LeafStore::Memory => {
                        assert_eq!(
                            a.iter().map(strip).collect::<Vec<_>>(),
                            b.iter().map(strip).collect::<Vec<_>>()
                        );
                    }
                    LeafStore::Files(_) => assert_eq!(a, b),
                }
                assert_eq!(b.len() as u64, next);
            }
        }
    }

    fn read_all(log: &LeafLog, store: &LeafStore) -> Vec<LeafRecord> {
        let (mut all, mut chunk, mut pos) = (Vec::new(), Vec::new(), ReadPos::default());
        while !log.is_end(pos) {
            pos = log.read(store, pos, 1000, &mut chunk).unwrap();
            all.extend_from_slice(&chunk);
        }
        all
    }

    #[test]
    fn a_rewrite_drops_what_matches_and_keeps_the_rest_in_order() {
        let dir = tempfile::tempdir().unwrap();
        for store in [files(dir.path()), LeafStore::Memory] {
            let mut log = LeafLog::new(&store, 4, 0);
            let n = BUFFER_RECORDS as u64 * 2 + 100;
            for i in 0..n {
                let r = LeafRecord { fp: i, minute: 7, host: (i % 3) as u32 + 1, kept: i % 5 == 0 };
                log.push(&store, r);
            }
            let before = read_all(&log, &store);
            let mut stayed = Vec::new();
            let dropped = log.rewrite(&store, &|r| r.host == 2, &mut |r| stayed.push(*r)).unwrap();
            let want: Vec<LeafRecord> = before.iter().filter(|r| r.host != 2).copied().collect();
            assert_eq!(dropped.len() as u64, n / 3 + u64::from(n % 3 > 1));
            assert!(dropped.iter().all(|r| r.host == 2));
            assert_eq!(stayed, want, "handed on in order");
            assert_eq!(read_all(&log, &store), want, "read back");
            assert_eq!(store.disk_bytes(), log.file_len());
            // Nothing matches: nothing changes, nothing is handed on.
            let len = log.file_len();
            let none = log.rewrite(&store, &|r| r.host == 2, &mut |_| panic!("called")).unwrap();
            assert!(none.is_empty() && log.file_len() == len);
            // Everything goes: no file is left, and the leaf takes records again.
            let all = log.rewrite(&store, &|_| true, &mut |_| {}).unwrap();
            assert_eq!(all.len(), want.len());
            assert_eq!(log.len(), 0);
            assert_eq!(store.disk_bytes(), 0);
            for i in 0..(BUFFER_RECORDS as u64 + 1) {
                log.push(&store, LeafRecord::new(i, 1).with_host(9));
            }
            assert_eq!(read_all(&log, &store).len(), BUFFER_RECORDS + 1);
            store.check().unwrap();
        }
    }

    #[test]
    fn a_leaf_that_claims_more_records_than_its_file_holds_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let store = files(dir.path());
        let mut log = LeafLog::new(&store, 3, 0);
        for i in 0..BUFFER_RECORDS as u64 {
            log.push(&store, LeafRecord::new(i, 0));
        }
        // As a damaged snapshot could describe it: one more record than the file has.
        let lying = LeafLog::reopened(3, log.len() + 1, log.file_len());
        let mut out = Vec::new();
        let mut pos = ReadPos::default();
        let mut result = Ok(pos);
        for _ in 0..4 {
            result = lying.read(&store, pos, 4096, &mut out);
            match &result {
                Ok(next) => pos = *next,
                Err(_) => break,
            }
        }
        assert!(matches!(result, Err(Error::Corrupt { .. })), "{result:?}");
    }

    #[test]
    fn after_a_failed_write_nothing_more_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let storage = crate::storage::FaultyStorage::new();
        let files =
            LeafFiles::open(Arc::new(storage.clone()), dir.path().join("l"), false).unwrap();
        let store = LeafStore::Files(Arc::clone(&files));
        let mut log = LeafLog::new(&store, 1, 0);
        storage.disk_full_after(100);
        for i in 0..BUFFER_RECORDS as u64 {
            log.push(&store, LeafRecord::new(i, 0));
        }
        assert!(store.check().is_err(), "the torn block poisons the store");
        let torn = std::fs::metadata(files.path(1)).unwrap().len();
        storage.disk_full_after(u64::MAX / 2);
        for i in 0..(2 * BUFFER_RECORDS) as u64 {
            log.push(&store, LeafRecord::new(i, 0));
        }
        assert_eq!(
            std::fs::metadata(files.path(1)).unwrap().len(),
            torn,
            "appended after a torn block"
        );
        assert_eq!(log.len(), 3 * BUFFER_RECORDS as u64, "the records stay in memory");
    }

    #[test]
    fn a_damaged_block_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let store = files(dir.path());
        let mut log = LeafLog::new(&store, 1, 0);
        for i in 0..BUFFER_RECORDS as u64 {
            log.push(&store, LeafRecord::new(i, 0));
        }
        let LeafStore::Files(f) = &store else { unreachable!() };
        let path = f.path(1);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[100] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let err = log.read(&store, ReadPos::default(), 10, &mut Vec::new()).unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    }

    /// What an in-memory log is handed, in any mix of runs (with hosts or not), single records
    /// and kept records, across its chunks' boundaries, is what it reads back from any place
    /// and in steps of any size: the recorded ones first, then the kept ones, each with its host.
    mod memory_reads {
        use proptest::prelude::*;

        use super::*;

        proptest! {
            #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
            #[test]
            fn a_memory_log_reads_back_what_it_was_given(
                appends in proptest::collection::vec((0usize..3, 0usize..20_000, any::<bool>()), 0..8),
                reserve in 0usize..20_000,
                reads in proptest::collection::vec((0u64..60_000, 0usize..30_000), 1..12),
            ) {
                let store = LeafStore::Memory;
                let mut log = LeafLog::new(&store, 0, reserve);
                let (mut recorded, mut kept) = (Vec::new(), Vec::new());
                let mut next = 1u64;
                for (kind, n, with_hosts) in appends {
                    match kind {
                        0 => {
                            let fps: Vec<u64> = (next..next + n as u64).collect();
                            let hosts: Vec<u32> = fps.iter().map(|fp| (fp % 97) as u32 + 1).collect();
                            log.extend_recorded(&store, &fps, with_hosts.then_some(&hosts[..]), 3);
                            for (&fp, &host) in fps.iter().zip(&hosts) {
                                recorded.push(LeafRecord::new(fp, 0).with_host(if with_hosts { host } else { 0 }));
                            }
                            next += n as u64;
                        }
                        1 => {
                            for _ in 0..n.min(3_000) {
                                let record = LeafRecord::new(next, 0).with_host(next as u32 ^ 5);
                                log.push(&store, record);
                                recorded.push(record);
                                next += 1;
                            }
                        }
                        _ => {
                            for _ in 0..n.min(3_000) {
                                let record = LeafRecord::kept(next, 0).with_host(next as u32 ^ 9);
                                log.push(&store, record);
                                kept.push(record);
                                next += 1;
                            }
                        }
                    }
                }
                let all: Vec<LeafRecord> = recorded.into_iter().chain(kept).collect();
                prop_assert_eq!(log.len(), all.len() as u64);
                let mut out = Vec::new();
                for (from, want) in reads {
                    let pos = ReadPos { records: from, offset: 0 };
                    let end = log.read(&store, pos, want, &mut out).unwrap();
                    let start = (from as usize).min(all.len());
                    let stop = start.saturating_add(want).min(all.len());
                    prop_assert_eq!(end.records, stop as u64);
                    prop_assert_eq!(&out[..], &all[start..stop]);
                }
                let (mut pos, mut whole) = (ReadPos::default(), Vec::new());
                while !log.is_end(pos) {
                    pos = log.read(&store, pos, 5_000, &mut out).unwrap();
                    whole.extend_from_slice(&out);
                }
                prop_assert_eq!(whole, all);
            }
        }
    }
}
