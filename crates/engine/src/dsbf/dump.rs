//! Dump and restore: a namespace as a sequence of chunks, in RedisBloom's `BF.SCANDUMP` /
//! `BF.LOADCHUNK` iterator protocol, and the dump file (`urlseen dump`) that holds them.
//!
//! A dump carries the namespace's **fingerprints**, not its filter bits: the fingerprints are
//! the source of truth (a split re-hashes a leaf from them, and bits alone cannot be split), so
//! the restored namespace rebuilds its filters from them and keeps growing as the original
//! would. Its tree may have another shape than the original's (it splits as it is refilled),
//! but it records exactly the same fingerprints, recorded and kept (see [`crate::tree`]).
//!
//! ```text
//! SCANDUMP key 0        → [1, header]     name, options, profile, seed, counts at that time
//! SCANDUMP key 1        → [i₁, chunk₁]    fingerprints of the leaves, in node order
//! SCANDUMP key i₁       → [i₂, chunk₂]    …
//! SCANDUMP key iₙ₋₁     → [iₙ, chunkₙ]    the last one is marked final
//! SCANDUMP key iₙ       → [0, ""]         the end
//! LOADCHUNK key 1 header, LOADCHUNK key i₁ chunk₁, …, LOADCHUNK key iₙ chunkₙ (final: done)
//! ```
//! An iterator is a position in the tree: node id and records of its log already dumped
//! (`1 + (node << 38 | records)`), so `SCANDUMP` keeps no state between calls.
//!
//! # Chunk format
//! ```text
//! "URLSEEND" | version u16 (1) | kind u8 (1 header, 2 data) | flags u8 (1: final)
//! | body length u32 | body | xxh3_64 of everything before, u64
//! header body: identity u64 | count u64 | kept u64 | namespace meta (see `options::meta`: name,
//!              options, canonicalization version, with its own checksum)
//! data body:   identity u64 | from iterator i64 | next iterator i64 | recorded n u32
//!              | kept n u32 | recorded fingerprints u64… | kept fingerprints u64…
//! ```
//! The identity is a hash of the options (seed, profile, sizes): a chunk of another namespace's
//! dump is refused. A data chunk says which iterator it follows, so a chunk out of order,
//! repeated or missing is refused, and which iterator `SCANDUMP` returned with it, which
//! `LOADCHUNK` must be given.
//!
//! # Dump file
//! ```text
//! "URLSEENX" | version u16 (1) | [0; 6]
//! frame: iterator i64 | chunk length u32 | chunk        (header first, then the data chunks)
//! end:   iterator 0 | length 0 | chunks u64 | xxh3_64 of the chunks' checksums, u64
//! ```
//! A file without its end, or with trailing bytes after it, is refused: it was cut short.

use std::io::{Read, Write};

use urlseen_canon::CANON_VERSION;
use urlseen_filter::frame::{Format, FormatError};
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

use super::NodeId;
use crate::error::{Error, Result};
use crate::options::NamespaceOptions;
use crate::options::{decode_meta, encode_meta};

/// Where a dump is in a tree: node id, and records of that node's log already dumped (see
/// [`Dsbf::dump_records`](crate::tree::Dsbf::dump_records)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DumpPos {
    /// The node whose log is being dumped.
    pub node: NodeId,
    /// Records of its log already dumped.
    pub records: u64,
}

/// The largest chunk `BF.SCANDUMP` returns (RedisBloom's `MAX_SCANDUMP_SIZE`).
pub const MAX_CHUNK_BYTES: usize = 16 << 20;
/// The smallest chunk size a dump may be asked for: a few leaf blocks.
pub const MIN_CHUNK_BYTES: usize = 64 << 10;
/// The iterator `BF.SCANDUMP key 0` returns with the header, and `BF.LOADCHUNK` takes with it.
pub const ITER_HEADER: i64 = 1;
/// The iterator returned with the final chunk: `BF.SCANDUMP` with it answers `[0, ""]`.
pub const ITER_FINAL: i64 = i64::MAX;

const NODE_BITS: u32 = 24;
const RECORD_BITS: u32 = 38;
const CHUNK_FORMAT: Format =
    Format { name: "dump chunk", magic: *b"URLSEEND", version: 1, oldest: 1 };
const KIND_HEADER: u8 = 1;
const KIND_DATA: u8 = 2;
const FLAG_FINAL: u8 = 1;
/// Magic, version, kind, flags, body length, checksum.
const FRAME_OVERHEAD: usize = 8 + 2 + 1 + 1 + 4 + 8;
/// A data body's fixed part.
const DATA_FIXED: usize = 8 + 8 + 8 + 4 + 4;

const FILE_FORMAT: Format =
    Format { name: "dump file", magic: *b"URLSEENX", version: 1, oldest: 1 };

/// A chunk or dump file that does not fit its format: [`Error::UnsupportedVersion`] for a
/// version this build does not read, [`Error::BadChunk`] for the rest.
fn chunk_error(e: FormatError) -> Error {
    Error::format_or(e, |e| Error::BadChunk { reason: e.to_string() })
}

/// One chunk of a dump: `BF.SCANDUMP`'s reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpChunk {
    /// The iterator to ask for next (and to give `BF.LOADCHUNK` with `data`); 0 at the end.
    pub next: i64,
    /// The chunk; empty at the end.
    pub data: Vec<u8>,
}

/// The iterator of a tree position.
#[doc(hidden)]
pub fn encode_iter(pos: DumpPos) -> Result<i64> {
    if pos.node >= 1 << NODE_BITS || pos.records >= 1 << RECORD_BITS {
        return Err(Error::InvalidOption {
            name: "dump",
            reason: format!(
                "node {} record {} is past what a dump iterator can name",
                pos.node, pos.records
            ),
        });
    }
    Ok(1 + ((i64::from(pos.node) << RECORD_BITS) | pos.records as i64))
}

/// The tree position of an iterator (not 0, not [`ITER_FINAL`]).
#[doc(hidden)]
pub fn decode_iter(iter: i64) -> Result<DumpPos> {
    if iter < ITER_HEADER || iter == ITER_FINAL {
        return Err(Error::InvalidIterator(iter));
    }
    let v = (iter - 1) as u64;
    let node = v >> RECORD_BITS;
    if node >= 1 << NODE_BITS {
        return Err(Error::InvalidIterator(iter));
    }
    Ok(DumpPos { node: node as NodeId, records: v & ((1 << RECORD_BITS) - 1) })
}

/// The identity of a namespace's options: equal for the dump's header and chunks.
#[doc(hidden)]
pub fn identity(options: &NamespaceOptions) -> u64 {
    xxh3_64(&encode_meta("", options))
}

/// How many fingerprints a chunk of at most `max_bytes` holds.
#[doc(hidden)]
pub fn chunk_records(max_bytes: usize) -> Result<usize> {
    if !(MIN_CHUNK_BYTES..=MAX_CHUNK_BYTES).contains(&max_bytes) {
        return Err(Error::InvalidOption {
            name: "dump chunk size",
            reason: format!("must be in {MIN_CHUNK_BYTES}..={MAX_CHUNK_BYTES}, got {max_bytes}"),
        });
    }
    Ok((max_bytes - FRAME_OVERHEAD - DATA_FIXED) / 8)
}

fn frame(kind: u8, flags: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FRAME_OVERHEAD + body.len());
    CHUNK_FORMAT.write_header(&mut out);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    Format::seal(&mut out, 0);
    out
}

/// Checks a chunk's frame: its kind, flags and body.
fn unframe(chunk: &[u8]) -> Result<(u8, u8, &[u8])> {
    let bad = |reason: &str| Error::BadChunk { reason: reason.to_owned() };
    if chunk.len() < FRAME_OVERHEAD {
        return Err(bad(&format!("{} bytes, shorter than any chunk", chunk.len())));
    }
    CHUNK_FORMAT.check_header(chunk).map_err(chunk_error)?;
    let framed = &chunk[..chunk.len() - urlseen_filter::frame::SEAL_LEN];
    let mut r = CHUNK_FORMAT.reader(&framed[urlseen_filter::frame::HEADER_LEN..]);
    let kind = r.u8().map_err(chunk_error)?;
    let flags = r.u8().map_err(chunk_error)?;
    let len = r.u32().map_err(chunk_error)? as usize;
    if len != framed.len() - (FRAME_OVERHEAD - 8) {
        return Err(bad(&format!(
            "says {len} bytes of body, has {}",
            framed.len() - (FRAME_OVERHEAD - 8)
        )));
    }
    CHUNK_FORMAT.unseal(chunk).map_err(chunk_error)?;
    Ok((kind, flags, &framed[FRAME_OVERHEAD - 8..]))
}

/// A dump's first chunk: what it restores.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Header {
    /// The hash of the options that every chunk of the dump carries.
    pub identity: u64,
    /// The name it was dumped from.
    pub name: String,
    /// The options (profile, seed, sizes, modes) the restored namespace gets.
    pub options: NamespaceOptions,
    /// URLs recorded when it was dumped.
    pub count: u64,
    /// Kept records then (see [`crate::tree`]).
    pub kept: u64,
}

impl Header {
    #[doc(hidden)]
    pub fn encode(name: &str, options: &NamespaceOptions, count: u64, kept: u64) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&identity(options).to_le_bytes());
        body.extend_from_slice(&count.to_le_bytes());
        body.extend_from_slice(&kept.to_le_bytes());
        body.extend_from_slice(&encode_meta(name, options));
        frame(KIND_HEADER, 0, &body)
    }

    /// Reads a header chunk (the first chunk of a dump).
    ///
    /// # Errors
    /// [`Error::BadChunk`] (also for a data chunk), [`Error::UnsupportedVersion`],
    /// [`Error::CanonVersionMismatch`].
    pub fn decode(chunk: &[u8]) -> Result<Header> {
        let bad = |reason: String| Error::BadChunk { reason };
        let (kind, _, body) = unframe(chunk)?;
        if kind != KIND_HEADER {
            return Err(bad(format!("expected a header chunk, got one of kind {kind}")));
        }
        let mut r = CHUNK_FORMAT.reader(body);
        let identity = r.u64().map_err(chunk_error)?;
        let count = r.u64().map_err(chunk_error)?;
        let kept = r.u64().map_err(chunk_error)?;
        let meta = r.rest();
        let (name, options, canon) = decode_meta(std::path::Path::new("dump header"), meta)
            .map_err(|e| match e {
                Error::Corrupt { reason, .. } => bad(format!("namespace meta: {reason}")),
                other => other,
            })?;
        if canon != CANON_VERSION {
            return Err(Error::CanonVersionMismatch {
                name,
                stored: canon,
                current: CANON_VERSION,
            });
        }
        if self::identity(&options) != identity {
            return Err(bad("the identity does not match the options".into()));
        }
        Ok(Header { identity, name, options, count, kept })
    }
}

/// A data chunk.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Data {
    pub identity: u64,
    /// The iterator it follows.
    pub from: i64,
    /// The iterator returned with it.
    pub next: i64,
    pub last: bool,
    pub recorded: Vec<u64>,
    pub kept: Vec<u64>,
}

impl Data {
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(DATA_FIXED + 8 * (self.recorded.len() + self.kept.len()));
        body.extend_from_slice(&self.identity.to_le_bytes());
        body.extend_from_slice(&self.from.to_le_bytes());
        body.extend_from_slice(&self.next.to_le_bytes());
        body.extend_from_slice(&(self.recorded.len() as u32).to_le_bytes());
        body.extend_from_slice(&(self.kept.len() as u32).to_le_bytes());
        for fp in self.recorded.iter().chain(&self.kept) {
            body.extend_from_slice(&fp.to_le_bytes());
        }
        frame(KIND_DATA, if self.last { FLAG_FINAL } else { 0 }, &body)
    }

    /// # Errors
    /// [`Error::BadChunk`] (also for a header chunk), [`Error::UnsupportedVersion`].
    pub fn decode(chunk: &[u8]) -> Result<Data> {
        let bad = |reason: String| Error::BadChunk { reason };
        let (kind, flags, body) = unframe(chunk)?;
        if kind == KIND_HEADER {
            return Err(bad(
                "a header chunk, but this key's header is loaded already (drop the key to start \
                 over)"
                    .into(),
            ));
        }
        if kind != KIND_DATA || flags & !FLAG_FINAL != 0 {
            return Err(bad(format!("unknown chunk kind {kind} or flags {flags:#x}")));
        }
        let mut r = CHUNK_FORMAT.reader(body);
        let identity = r.u64().map_err(chunk_error)?;
        let from = r.u64().map_err(chunk_error)? as i64;
        let next = r.u64().map_err(chunk_error)? as i64;
        let n_recorded = r.u32().map_err(chunk_error)? as usize;
        let n_kept = r.u32().map_err(chunk_error)? as usize;
        let fps = r.rest();
        if fps.len() != 8 * (n_recorded + n_kept) {
            return Err(bad(format!(
                "{} bytes of fingerprints for {n_recorded} recorded and {n_kept} kept",
                fps.len()
            )));
        }
        let mut words =
            fps.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()));
        let recorded = words.by_ref().take(n_recorded).collect();
        let kept = words.collect();
        if from < ITER_HEADER || next <= from {
            return Err(bad(format!("iterators {from} → {next} do not move forward")));
        }
        Ok(Data { identity, from, next, last: flags & FLAG_FINAL != 0, recorded, kept })
    }
}

/// Where a restore is in its dump: the chunks it takes must follow each other.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct ChunkOrder {
    identity: u64,
    /// The iterator the next chunk must follow.
    expected: i64,
}

impl ChunkOrder {
    /// After the header `header`.
    pub fn after(header: &Header) -> Self {
        ChunkOrder { identity: header.identity, expected: ITER_HEADER }
    }

    /// Decodes the data chunk given with `iter` and checks that it is the next one of this
    /// dump. Nothing changes: [`Self::advance`] once it is loaded.
    ///
    /// # Errors
    /// [`Error::BadChunk`], [`Error::UnsupportedVersion`], [`Error::ChunkMismatch`],
    /// [`Error::ChunkIteratorMismatch`], [`Error::ChunkOutOfOrder`].
    pub fn check(&self, iter: i64, chunk: &[u8]) -> Result<Data> {
        let data = Data::decode(chunk)?;
        if data.identity != self.identity {
            return Err(Error::ChunkMismatch {
                reason: "it was dumped from a namespace with other options (another key's dump)"
                    .into(),
            });
        }
        if data.next != iter {
            return Err(Error::ChunkIteratorMismatch { returned: data.next, given: iter });
        }
        if data.from != self.expected {
            return Err(Error::ChunkOutOfOrder { expected: self.expected, got: data.from });
        }
        Ok(data)
    }

    /// `data` was loaded.
    pub fn advance(&mut self, data: &Data) {
        self.expected = data.next;
    }
}

/// Writes a dump file: the header, then each chunk with [`Self::chunk`], then
/// [`Self::finish`].
#[derive(Debug)]
pub struct DumpWriter<W: Write> {
    out: W,
    chunks: u64,
    /// The chunks' checksums, chained.
    check: u64,
}

impl<W: Write> DumpWriter<W> {
    /// Starts a dump file in `out`.
    ///
    /// # Errors
    /// `out`'s.
    pub fn new(mut out: W) -> std::io::Result<Self> {
        out.write_all(&FILE_FORMAT.header())?;
        out.write_all(&[0; 6])?;
        Ok(DumpWriter { out, chunks: 0, check: 0 })
    }

    /// Appends the chunk `BF.SCANDUMP` returned with iterator `iter`.
    ///
    /// # Errors
    /// `out`'s.
    pub fn chunk(&mut self, iter: i64, chunk: &[u8]) -> std::io::Result<()> {
        let len = u32::try_from(chunk.len()).map_err(std::io::Error::other)?;
        self.out.write_all(&iter.to_le_bytes())?;
        self.out.write_all(&len.to_le_bytes())?;
        self.out.write_all(chunk)?;
        self.check = chain(self.check, chunk);
        self.chunks += 1;
        Ok(())
    }

    /// Writes the end and returns `out`.
    ///
    /// # Errors
    /// `out`'s.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.out.write_all(&0i64.to_le_bytes())?;
        self.out.write_all(&0u32.to_le_bytes())?;
        self.out.write_all(&self.chunks.to_le_bytes())?;
        self.out.write_all(&self.check.to_le_bytes())?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Reads a dump file's chunks, one at a time (at most one chunk in memory).
#[derive(Debug)]
pub struct DumpReader<R: Read> {
    input: R,
    chunks: u64,
    /// The chunks' checksums, chained.
    check: u64,
    done: bool,
}

impl<R: Read> DumpReader<R> {
    /// Checks the file's header.
    ///
    /// # Errors
    /// [`Error::BadChunk`] for a file that is not a dump, [`Error::UnsupportedVersion`].
    pub fn new(mut input: R) -> Result<Self> {
        let mut head = [0u8; 16];
        read_all(&mut input, &mut head, "the file header")?;
        FILE_FORMAT.check_header(&head).map_err(chunk_error)?;
        Ok(DumpReader { input, chunks: 0, check: 0, done: false })
    }

    /// The next chunk and its iterator, or `None` after the end (which is checked).
    ///
    /// # Errors
    /// [`Error::BadChunk`]: a file cut short, a damaged end, bytes after it.
    pub fn next_chunk(&mut self) -> Result<Option<(i64, Vec<u8>)>> {
        if self.done {
            return Ok(None);
        }
        let mut head = [0u8; 12];
        read_all(&mut self.input, &mut head, "a chunk frame")?;
        let iter = i64::from_le_bytes(head[..8].try_into().unwrap_or_default());
        let len = u32::from_le_bytes(head[8..].try_into().unwrap_or_default()) as usize;
        if iter == 0 && len == 0 {
            let mut end = [0u8; 16];
            read_all(&mut self.input, &mut end, "the end of the file")?;
            let chunks = u64::from_le_bytes(end[..8].try_into().unwrap_or_default());
            let check = u64::from_le_bytes(end[8..].try_into().unwrap_or_default());
            if chunks != self.chunks || check != self.check {
                return Err(Error::BadChunk {
                    reason: format!(
                        "the file's end says {chunks} chunks, {} were read (or their checksums \
                         differ)",
                        self.chunks
                    ),
                });
            }
            let mut more = [0u8; 1];
            if self.input.read(&mut more).map_err(|e| Error::BadChunk { reason: e.to_string() })?
                != 0
            {
                return Err(Error::BadChunk { reason: "bytes after the end of the dump".into() });
            }
            self.done = true;
            return Ok(None);
        }
        if len > MAX_CHUNK_BYTES + FRAME_OVERHEAD {
            return Err(Error::BadChunk { reason: format!("implausible chunk length {len}") });
        }
        let mut chunk = vec![0u8; len];
        read_all(&mut self.input, &mut chunk, "a chunk")?;
        self.check = chain(self.check, &chunk);
        self.chunks += 1;
        Ok(Some((iter, chunk)))
    }
}

/// `check` with one more chunk's checksum (its last 8 bytes) folded in.
fn chain(check: u64, chunk: &[u8]) -> u64 {
    xxh3_64_with_seed(chunk.get(chunk.len().saturating_sub(8)..).unwrap_or_default(), check)
}

fn read_all(input: &mut dyn Read, buf: &mut [u8], what: &str) -> Result<()> {
    input.read_exact(buf).map_err(|e| Error::BadChunk {
        reason: match e.kind() {
            std::io::ErrorKind::UnexpectedEof => format!("the file ends inside {what} (cut short)"),
            _ => format!("reading {what}: {e}"),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iterators_round_trip_and_refuse_nonsense() {
        for pos in [
            DumpPos { node: 0, records: 0 },
            DumpPos { node: 7, records: 12_345 },
            DumpPos { node: (1 << NODE_BITS) - 1, records: (1 << RECORD_BITS) - 1 },
        ] {
            let iter = encode_iter(pos).unwrap();
            assert!((ITER_HEADER..ITER_FINAL).contains(&iter));
            assert_eq!(decode_iter(iter).unwrap(), pos);
        }
        assert_eq!(encode_iter(DumpPos { node: 0, records: 0 }).unwrap(), ITER_HEADER);
        assert!(encode_iter(DumpPos { node: 1 << NODE_BITS, records: 0 }).is_err());
        for bad in [0, -1, i64::MIN, ITER_FINAL] {
            assert!(matches!(decode_iter(bad), Err(Error::InvalidIterator(_))), "{bad}");
        }
    }

    #[test]
    fn chunks_round_trip_and_every_damage_is_refused() {
        let options = NamespaceOptions::default();
        let header = Header::encode("jobs", &options, 3, 1);
        let back = Header::decode(&header).unwrap();
        assert_eq!((back.name.as_str(), back.count, back.kept), ("jobs", 3, 1));
        assert_eq!(back.identity, identity(&options));
        let data = Data {
            identity: identity(&options),
            from: 1,
            next: 99,
            last: true,
            recorded: vec![1, 2, 3],
            kept: vec![4],
        };
        let bytes = data.encode();
        assert_eq!(Data::decode(&bytes).unwrap(), data);
        assert!(matches!(Data::decode(&header), Err(Error::BadChunk { .. })));
        assert!(matches!(Header::decode(&bytes), Err(Error::BadChunk { .. })));
        for chunk in [&header, &bytes] {
            for i in 0..chunk.len() {
                let mut bad = chunk.clone();
                bad[i] ^= 0x40;
                assert!(Data::decode(&bad).is_err() && Header::decode(&bad).is_err(), "flip {i}");
            }
            for cut in 0..chunk.len() {
                assert!(Data::decode(&chunk[..cut]).is_err(), "cut {cut}");
                assert!(Header::decode(&chunk[..cut]).is_err(), "cut {cut}");
            }
        }
    }

    #[test]
    fn a_dump_file_round_trips_and_a_cut_one_is_refused() {
        let mut w = DumpWriter::new(Vec::new()).unwrap();
        w.chunk(1, b"first chunk, 8+ bytes").unwrap();
        w.chunk(ITER_FINAL, b"second chunk").unwrap();
        let file = w.finish().unwrap();
        let mut r = DumpReader::new(&file[..]).unwrap();
        assert_eq!(r.next_chunk().unwrap(), Some((1, b"first chunk, 8+ bytes".to_vec())));
        assert_eq!(r.next_chunk().unwrap(), Some((ITER_FINAL, b"second chunk".to_vec())));
        assert_eq!(r.next_chunk().unwrap(), None);
        for cut in 0..file.len() {
            let read_all = || -> Result<()> {
                let mut r = DumpReader::new(&file[..cut])?;
                while r.next_chunk()?.is_some() {}
                Ok(())
            };
            assert!(matches!(read_all(), Err(Error::BadChunk { .. })), "cut at {cut}");
        }
        let mut longer = file.clone();
        longer.push(0);
        let mut r = DumpReader::new(&longer[..]).unwrap();
        let last = loop {
            match r.next_chunk() {
                Ok(Some(_)) => {}
                other => break other,
            }
        };
        assert!(matches!(last, Err(Error::BadChunk { .. })), "trailing bytes: {last:?}");
    }
}
