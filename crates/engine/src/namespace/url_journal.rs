//! The URL journal of a namespace created with `keep_urls`: the canonical URLs it has recorded,
//! with their fingerprints and host hashes, so that a forget by prefix can tell which of a
//! host's records start with a prefix. A leaf record keeps a hash of its host, not its path;
//! see `docs/forget.md`, "Forgetting a prefix", for the design and its cost.
//!
//! ```text
//! DIR/ns/<hex of name>/urls   (a spill directory's `urls` beside `leaves/` without --data)
//! header : magic "URLSEENU" | version u16 | [0; 6]
//! block  : length u32 (bytes of entries) | count u32 | entries | xxh3_64 of the three, u64
//! entry  : fingerprint u64 | host u32 | length u16 | canonical URL (its first 65,535 bytes)
//! ```
//!
//! # What it holds, and when
//! `Namespace::fingerprint_host`, which every path that records URLs goes through, appends the
//! URL before any record of it can be made, unless it is known to be in the journal already:
//! - in exact and counting mode, when the namespace holds it (an exact answer: a URL held was
//!   journaled when it was first recorded, and a forget leaves its entry);
//! - in Bloom mode, when it is among the [`RECENT`] fingerprints journaled last (a Bloom
//!   positive cannot tell: a false positive can still be recorded later, when a split moves
//!   the URL to a child's filter or a forget clears its bits), so a repeat seen longer ago is
//!   journaled again.
//!
//! The namespace log writes the journal out before each of its own writes and syncs it before
//! each of its own syncs (it is one of the log's `crate::log::Precedes` files; a counting
//! namespace, which logs nothing, does the same before its store's writes and syncs): every
//! URL recorded is in the journal, written out before its record is, and on disk before its
//! record is durable. The journal may also hold URLs that were never recorded (a batch that failed, a
//! check that found the URL seen) and URLs twice: a forget by prefix drops only the records it
//! finds, so they cost space, not answers.
//!
//! A torn last block (a crash while it was written: it was not synced, so no record relies on
//! it) is cut off when the namespace opens for writing, which walks the block heads: 8 bytes
//! read per block.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use urlseen_filter::frame::Format;

use crate::error::{Error, Result};
use crate::storage::{AppendFile, Storage};

const FORMAT: Format = Format { name: "URL journal", magic: *b"URLSEENU", version: 1, oldest: 1 };
const HEADER_LEN: u64 = 16;
/// Bytes of a block's head (length, count) and tail (checksum).
const BLOCK_HEAD: usize = 8;
const BLOCK_TAIL: usize = 8;
/// Bytes of an entry before its URL.
const ENTRY_HEAD: usize = 8 + 4 + 2;
/// Entries buffered before they are written out whatever the batches do: 64 KiB of RAM.
const BUFFER_BYTES: usize = 64 << 10;
/// Largest block accepted on read: anything bigger is corruption.
const MAX_BLOCK_BYTES: u32 = 64 << 20;
/// Fingerprints a Bloom-mode journal remembers having journaled, so that a repeat among them
/// costs no space (about 5 MiB of RAM: `filter --keep-urls` peaked 5.4 MB higher; see
/// docs/forget.md).
pub const RECENT: usize = 1 << 16;
/// Longest URL kept whole; a longer one keeps its first this many bytes.
pub const MAX_KEPT_URL: usize = u16::MAX as usize;

/// See the module docs.
#[derive(Debug)]
pub(super) struct UrlJournal {
    inner: Mutex<Inner>,
    /// Fingerprints journaled lately (Bloom mode).
    recent: crate::exact::RecentCache,
}

#[derive(Debug)]
struct Inner {
    sink: Sink,
    /// Entries of the block being filled.
    buffer: Vec<u8>,
    buffered: u32,
    /// Bytes of the journal written out (header included).
    written: u64,
    entries: u64,
    /// Why a write failed: the tail of the file is unknown, so nothing more is appended.
    failed: Option<String>,
}

enum Sink {
    /// `Db::in_memory`: the journal's bytes on the heap.
    Memory(Vec<u8>),
    /// A file in a data or spill directory.
    File { storage: Arc<dyn Storage>, path: PathBuf, file: Option<Box<dyn AppendFile>> },
    /// A read-only open: scans read the file, nothing is appended.
    ReadOnly { storage: Arc<dyn Storage>, path: PathBuf },
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Sink::Memory(bytes) => write!(f, "Memory({} bytes)", bytes.len()),
            Sink::File { path, .. } => write!(f, "File({})", path.display()),
            Sink::ReadOnly { path, .. } => write!(f, "ReadOnly({})", path.display()),
        }
    }
}

fn header() -> Vec<u8> {
    let mut h = FORMAT.header().to_vec();
    h.resize(HEADER_LEN as usize, 0);
    h
}

impl UrlJournal {
    /// A journal on the heap.
    pub(super) fn in_memory() -> Self {
        Self::with_sink(Sink::Memory(header()), HEADER_LEN, 0)
    }

    fn with_sink(sink: Sink, written: u64, entries: u64) -> Self {
        UrlJournal {
            recent: crate::exact::RecentCache::new(RECENT),
            inner: Mutex::new(Inner {
                sink,
                buffer: Vec::new(),
                buffered: 0,
                written,
                entries,
                failed: None,
            }),
        }
    }

    /// The journal at `path`: created if missing and `may_create` (the namespace holds
    /// nothing yet); unless `read_only`, a torn last block cut off and the file opened for
    /// appending.
    ///
    /// # Errors
    /// [`Error::Io`]; [`Error::Corrupt`] for a file that is not a URL journal, or one that is
    /// missing when it may not be created; [`Error::UnsupportedVersion`].
    pub(super) fn open(
        storage: &Arc<dyn Storage>,
        path: &Path,
        read_only: bool,
        may_create: bool,
    ) -> Result<Self> {
        let io = |what: &'static str| move |e| Error::io(what, path, e);
        let len = storage.file_len(path).map_err(io("stat"))?;
        if len.is_none() && !may_create {
            return Err(Error::corrupt(
                path,
                "the URL journal of a namespace that keeps its URLs and holds some is missing: \
                 a forget by prefix would miss them (restore the file, or import the URLs into \
                 a new namespace)",
            ));
        }
        if read_only {
            // Counted for `urlseen stats`, changing nothing (a torn tail stays).
            let (valid, entries) = match len {
                Some(len) if len > 0 => {
                    let read = |at: u64, buf: &mut [u8]| read_exact_at(storage, path, at, buf);
                    walk(path, len, &read)?
                }
                _ => (0, 0),
            };
            let sink = Sink::ReadOnly { storage: Arc::clone(storage), path: path.to_owned() };
            return Ok(Self::with_sink(sink, valid, entries));
        }
        let (valid, entries) = match len {
            None | Some(0) => {
                storage.write_atomic(path, &header()).map_err(io("create"))?;
                (HEADER_LEN, 0)
            }
            Some(len) => {
                let read = |offset: u64, buf: &mut [u8]| read_exact_at(storage, path, offset, buf);
                let (valid, entries) = walk(path, len, &read)?;
                if valid < len {
                    storage.truncate(path, valid).map_err(io("truncate"))?;
                }
                (valid, entries)
            }
        };
        let file = storage.open_append(path).map_err(io("open"))?;
        let sink =
            Sink::File { storage: Arc::clone(storage), path: path.to_owned(), file: Some(file) };
        Ok(Self::with_sink(sink, valid, entries))
    }

    /// Buffers one entry: `url` (canonical) recorded, or about to be, with fingerprint `fp`
    /// and host hash `host`. Writes the buffer out when it is full.
    ///
    /// # Errors
    /// [`Error::Io`] of that write, or [`Error::Poisoned`] after an earlier one failed: the
    /// URL must not be recorded then.
    pub(super) fn append(&self, fp: u64, host: u32, url: &str) -> Result<()> {
        let mut inner = self.inner.lock();
        inner.check()?;
        // Known as journaled only once it is in the buffer, under the lock: a writer that
        // finds it recent records it through a log write, which writes out a buffer that
        // holds it.
        self.recent.insert(fp);
        let url = &url.as_bytes()[..url.len().min(MAX_KEPT_URL)];
        inner.buffer.extend_from_slice(&fp.to_le_bytes());
        inner.buffer.extend_from_slice(&host.to_le_bytes());
        inner.buffer.extend_from_slice(&(url.len() as u16).to_le_bytes());
        inner.buffer.extend_from_slice(url);
        inner.buffered += 1;
        if inner.buffer.len() >= BUFFER_BYTES {
            inner.write_out()?;
        }
        Ok(())
    }

    /// Writes every buffered entry out to the OS (the log calls it before each of its writes).
    ///
    /// # Errors
    /// As [`Self::append`].
    fn write_out(&self) -> Result<()> {
        let mut inner = self.inner.lock();
        inner.check()?;
        inner.write_out()
    }

    /// [`Self::write_out`], then an fsync of the file (the namespace log calls it before each
    /// of its own syncs).
    ///
    /// # Errors
    /// As [`Self::append`].
    fn sync(&self) -> Result<()> {
        let mut inner = self.inner.lock();
        inner.check()?;
        inner.write_out()?;
        let result = match &mut inner.sink {
            Sink::File { file: Some(file), path, .. } => {
                file.sync().map_err(|e| Error::io("fsync", path, e))
            }
            _ => Ok(()),
        };
        if let Err(e) = &result {
            inner.failed = Some(format!("the URL journal could not be synced ({e}); reopen"));
        }
        result
    }

    /// Whether `fp` is among the [`RECENT`] fingerprints journaled last.
    pub(super) fn journaled_lately(&self, fp: u64) -> bool {
        self.recent.touch(fp)
    }

    /// Entries in the journal: found at the open, written since, and buffered.
    pub(super) fn entries(&self) -> u64 {
        let inner = self.inner.lock();
        inner.entries + u64::from(inner.buffered)
    }

    /// Bytes of RAM (the buffer; the whole journal when it is on the heap) and of disk.
    pub(super) fn sizes(&self) -> (u64, u64) {
        let inner = self.inner.lock();
        let buffer = inner.buffer.capacity() as u64 + self.recent.sizes().2;
        match &inner.sink {
            Sink::Memory(bytes) => (buffer + bytes.capacity() as u64, 0),
            Sink::File { .. } | Sink::ReadOnly { .. } => (buffer, inner.written),
        }
    }

    /// Bytes of the journal written out so far, after writing the buffer out: where a scan
    /// that must see every entry appended until now ends.
    ///
    /// # Errors
    /// As [`Self::write_out`]; a read-only journal reports its length.
    pub(super) fn end(&self) -> Result<u64> {
        let mut inner = self.inner.lock();
        if !matches!(inner.sink, Sink::ReadOnly { .. }) {
            inner.check()?;
            inner.write_out()?;
        }
        Ok(inner.written)
    }

    /// Calls `visit(fingerprint, host, url)` for every entry in the blocks between byte
    /// offsets `from` (a block start: [`HEADER_LEN`] or an earlier [`Self::end`]) and `to`
    /// (an [`Self::end`]), reading them in order a block at a time: the journal is not
    /// locked meanwhile, so appends go on.
    ///
    /// # Errors
    /// [`Error::Io`]; [`Error::Corrupt`] for a damaged block.
    pub(super) fn scan(
        &self,
        from: u64,
        to: u64,
        visit: &mut dyn FnMut(u64, u32, &[u8]),
    ) -> Result<()> {
        let from = from.max(HEADER_LEN);
        let reader = {
            let inner = self.inner.lock();
            match &inner.sink {
                // The heap's bytes in range are copied out, so that appends go on meanwhile.
                Sink::Memory(bytes) => {
                    let range = from as usize..(to as usize).min(bytes.len());
                    Reader::Bytes(from, bytes.get(range).unwrap_or_default().to_vec())
                }
                Sink::File { storage, path, .. } | Sink::ReadOnly { storage, path } => {
                    Reader::File(Arc::clone(storage), path.clone())
                }
            }
        };
        let read = |offset: u64, buf: &mut [u8]| reader.read_at(offset, buf);
        let path = reader.path();
        let mut offset = from;
        let mut block = Vec::new();
        while offset < to {
            let (len, count) = read_block(&path, offset, to, &read, &mut block)?;
            let mut entries = &block[..];
            for _ in 0..count {
                let bad =
                    || Error::corrupt(&path, &format!("a bad entry in the block at {offset}"));
                let head = entries.get(..ENTRY_HEAD).ok_or_else(bad)?;
                let fp = u64::from_le_bytes(head[..8].try_into().map_err(|_| bad())?);
                let host = u32::from_le_bytes(head[8..12].try_into().map_err(|_| bad())?);
                let n =
                    usize::from(u16::from_le_bytes(head[12..14].try_into().map_err(|_| bad())?));
                let url = entries.get(ENTRY_HEAD..ENTRY_HEAD + n).ok_or_else(bad)?;
                visit(fp, host, url);
                entries = &entries[ENTRY_HEAD + n..];
            }
            offset += (BLOCK_HEAD + len + BLOCK_TAIL) as u64;
        }
        Ok(())
    }
}

impl crate::log::Precedes for UrlJournal {
    fn flush(&self, sync: bool) -> Result<()> {
        match sync {
            true => self.sync(),
            false => self.write_out(),
        }
    }

    fn recover(&self) -> Result<()> {
        // Its blocks are not cut back after a failed write: a reopen recovers it. A journal
        // that never failed lets the log recover from a failure of its own.
        self.inner.lock().check()
    }
}

/// Where a scan reads from.
enum Reader {
    /// Bytes of the journal from this offset on.
    Bytes(u64, Vec<u8>),
    File(Arc<dyn Storage>, PathBuf),
}

impl Reader {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        match self {
            Reader::Bytes(base, bytes) => {
                let start = usize::try_from(offset.saturating_sub(*base)).unwrap_or(usize::MAX);
                let src = bytes.get(start..start.saturating_add(buf.len())).ok_or_else(|| {
                    Error::corrupt(Path::new("<memory>"), "a block runs past the end")
                })?;
                buf.copy_from_slice(src);
                Ok(())
            }
            Reader::File(storage, path) => read_exact_at(storage, path, offset, buf),
        }
    }

    fn path(&self) -> PathBuf {
        match self {
            Reader::Bytes(..) => PathBuf::from("<memory>"),
            Reader::File(_, path) => path.clone(),
        }
    }
}

impl Inner {
    fn check(&self) -> Result<()> {
        match &self.failed {
            Some(reason) => Err(Error::Poisoned { reason: reason.clone() }),
            None => Ok(()),
        }
    }

    fn write_out(&mut self) -> Result<()> {
        if self.buffered == 0 {
            return Ok(());
        }
        let mut block = Vec::with_capacity(BLOCK_HEAD + self.buffer.len() + BLOCK_TAIL);
        block.extend_from_slice(&(self.buffer.len() as u32).to_le_bytes());
        block.extend_from_slice(&self.buffered.to_le_bytes());
        block.extend_from_slice(&self.buffer);
        Format::seal(&mut block, 0);
        let result = match &mut self.sink {
            Sink::Memory(bytes) => {
                bytes.extend_from_slice(&block);
                Ok(())
            }
            Sink::File { file: Some(file), path, .. } => {
                file.append(&block).map_err(|e| Error::io("write", path, e))
            }
            Sink::File { path, .. } | Sink::ReadOnly { path, .. } => Err(Error::io(
                "write",
                path,
                std::io::Error::new(std::io::ErrorKind::ReadOnlyFilesystem, "opened read-only"),
            )),
        };
        match result {
            Ok(()) => {
                self.written += block.len() as u64;
                self.entries += u64::from(self.buffered);
                self.buffer.clear();
                self.buffered = 0;
                Ok(())
            }
            Err(e) => {
                self.failed = Some(format!("the URL journal could not be written ({e}); reopen"));
                Err(e)
            }
        }
    }
}

fn read_exact_at(
    storage: &Arc<dyn Storage>,
    path: &Path,
    offset: u64,
    buf: &mut [u8],
) -> Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let n = storage
            .read_at(path, offset + done as u64, &mut buf[done..])
            .map_err(|e| Error::io("read", path, e))?;
        if n == 0 {
            return Err(Error::corrupt(path, &format!("ends inside a block at {offset}")));
        }
        done += n;
    }
    Ok(())
}

/// Reads the block at `offset` (which must end by `end`) into `block` (its entries) and
/// returns their length and count.
fn read_block(
    path: &Path,
    offset: u64,
    end: u64,
    read: &dyn Fn(u64, &mut [u8]) -> Result<()>,
    block: &mut Vec<u8>,
) -> Result<(usize, u32)> {
    let bad = |why: &str| Error::corrupt(path, &format!("{why} in the block at byte {offset}"));
    let mut head = [0u8; BLOCK_HEAD];
    if offset + BLOCK_HEAD as u64 > end {
        return Err(bad("a block head runs past the end"));
    }
    read(offset, &mut head)?;
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let count = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    if len > MAX_BLOCK_BYTES || offset + (BLOCK_HEAD + len as usize + BLOCK_TAIL) as u64 > end {
        return Err(bad("a length past the end"));
    }
    let len = len as usize;
    block.resize(BLOCK_HEAD + len + BLOCK_TAIL, 0);
    read(offset, block)?;
    FORMAT.unseal(block).map_err(|_| bad("a checksum mismatch"))?;
    block.copy_within(BLOCK_HEAD..BLOCK_HEAD + len, 0);
    block.truncate(len);
    Ok((len, count))
}

/// Checks the header and walks the block heads of a journal of `len` bytes: returns where
/// its valid blocks end and how many entries they hold. Only the last block is read whole (a
/// torn one is cut), and a length that runs past the end cuts the file there. An earlier block
/// damaged inside (a power loss that kept later bytes and lost earlier ones of an unsynced
/// tail) is not found here: a scan then fails with `Error::Corrupt`, and a forget by prefix
/// refuses, forgetting nothing.
fn walk(path: &Path, len: u64, read: &dyn Fn(u64, &mut [u8]) -> Result<()>) -> Result<(u64, u64)> {
    if len < HEADER_LEN {
        let e = FORMAT.truncated("header", HEADER_LEN as usize, len as usize);
        return Err(Error::format(path, e));
    }
    let mut head = [0u8; HEADER_LEN as usize];
    read(0, &mut head)?;
    FORMAT.check_header(&head).map_err(|e| Error::format(path, e))?;
    let (mut offset, mut entries) = (HEADER_LEN, 0u64);
    let mut block = Vec::new();
    loop {
        if offset + BLOCK_HEAD as u64 > len {
            return Ok((offset, entries));
        }
        let mut h = [0u8; BLOCK_HEAD];
        read(offset, &mut h)?;
        let blen = u64::from(u32::from_le_bytes([h[0], h[1], h[2], h[3]]));
        let count = u64::from(u32::from_le_bytes([h[4], h[5], h[6], h[7]]));
        let next = offset + BLOCK_HEAD as u64 + blen + BLOCK_TAIL as u64;
        if blen > u64::from(MAX_BLOCK_BYTES) || next > len {
            return Ok((offset, entries));
        }
        if next == len && read_block(path, offset, len, read, &mut block).is_err() {
            return Ok((offset, entries));
        }
        entries += count;
        offset = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::OsStorage;

    fn all(j: &UrlJournal) -> Vec<(u64, u32, String)> {
        let mut out = Vec::new();
        let end = j.end().unwrap();
        j.scan(0, end, &mut |fp, host, url| {
            out.push((fp, host, String::from_utf8(url.to_vec()).unwrap()));
        })
        .unwrap();
        out
    }

    fn fill(j: &UrlJournal, n: u64) {
        for i in 0..n {
            j.append(i, (i % 7) as u32 + 1, &format!("https://h{}.example/p/{i}", i % 7)).unwrap();
            if i % 100 == 99 {
                j.write_out().unwrap();
            }
        }
    }

    #[test]
    fn entries_round_trip_in_memory_and_in_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(OsStorage);
        let path = dir.path().join("urls");
        for j in [UrlJournal::in_memory(), UrlJournal::open(&storage, &path, false, true).unwrap()]
        {
            fill(&j, 1000);
            let got = all(&j);
            assert_eq!(got.len(), 1000);
            assert_eq!(got[417], (417, 417 % 7 + 1, "https://h4.example/p/417".to_owned()));
            assert_eq!(j.entries(), 1000);
        }
        // Reopened: the same entries, and appends go on after them.
        let j = UrlJournal::open(&storage, &path, false, true).unwrap();
        assert_eq!(j.entries(), 1000);
        j.append(5000, 3, "https://x.example/").unwrap();
        assert_eq!(all(&j).len(), 1001);
        let ro = UrlJournal::open(&storage, &path, true, true).unwrap();
        assert_eq!(all(&ro).len(), 1001);
        assert_eq!(ro.entries(), 1001, "a read-only open counts the entries");
    }

    #[test]
    fn a_torn_last_block_is_cut_and_the_next_appends_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(OsStorage);
        let path = dir.path().join("urls");
        let j = UrlJournal::open(&storage, &path, false, true).unwrap();
        fill(&j, 250);
        j.sync().unwrap();
        let len = std::fs::metadata(&path).unwrap().len();
        for cut in [len - 1, len - 9, len - 20] {
            let copy = dir.path().join(format!("urls-{cut}"));
            std::fs::copy(&path, &copy).unwrap();
            std::fs::OpenOptions::new().write(true).open(&copy).unwrap().set_len(cut).unwrap();
            let j = UrlJournal::open(&storage, &copy, false, true).unwrap();
            // The last block (entries 200..250) is gone; the rest stays.
            assert_eq!(all(&j).len(), 200, "cut at {cut}");
            j.append(9, 1, "https://after.example/").unwrap();
            let got = all(&j);
            assert_eq!(got.len(), 201);
            assert_eq!(got[200].2, "https://after.example/");
        }
        // A flipped byte in the last block: cut too.
        let copy = dir.path().join("urls-flipped");
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.len() - 30;
        bytes[at] ^= 0xff;
        std::fs::write(&copy, &bytes).unwrap();
        assert_eq!(all(&UrlJournal::open(&storage, &copy, false, true).unwrap()).len(), 200);
    }

    #[test]
    fn a_file_that_is_not_a_journal_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(OsStorage);
        let path = dir.path().join("urls");
        std::fs::write(&path, b"URLSEENX\x01\x00\x00\x00\x00\x00\x00\x00").unwrap();
        assert!(matches!(
            UrlJournal::open(&storage, &path, false, true),
            Err(Error::Corrupt { .. })
        ));
        std::fs::write(&path, b"URLSEENU\x09\x00\x00\x00\x00\x00\x00\x00").unwrap();
        assert!(matches!(
            UrlJournal::open(&storage, &path, false, true),
            Err(Error::UnsupportedVersion { .. })
        ));
        std::fs::write(&path, b"URLS").unwrap();
        assert!(matches!(
            UrlJournal::open(&storage, &path, false, true),
            Err(Error::Corrupt { .. })
        ));
    }

    #[test]
    fn a_long_url_keeps_its_first_65535_bytes() {
        let j = UrlJournal::in_memory();
        let long = format!("https://a.example/{}", "x".repeat(70_000));
        j.append(1, 1, &long).unwrap();
        let got = all(&j);
        assert_eq!(got[0].2.len(), MAX_KEPT_URL);
        assert!(long.starts_with(&got[0].2));
    }
}
