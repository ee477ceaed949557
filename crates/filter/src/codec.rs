//! The bit-exact, versioned encoding shared by every filter.
//!
//! ```text
//! offset  size  field
//!      0     8  magic b"URLSEENF"
//!      8     2  format version, u16 LE (currently 1)
//!     10     1  filter kind (1 classic, 2 blocked, 3 counting, 4 bitmap, 5 sectorized blocked)
//!     11     1  reserved, must be 0
//!     12     4  num_hashes k, u32 LE
//!     16     8  num_bits, u64 LE (counting: number of counters; bitmap: number of slots)
//!     24     8  seed, u64 LE
//!     32     8  len (items inserted that were new), u64 LE
//!     40     8  payload length in bytes, u64 LE (must match the parameters)
//!     48     P  payload (little-endian words, see each filter)
//!   48+P     8  checksum: XXH3-64 (seed 0) of bytes 0..48+P, u64 LE
//! ```
//!
//! Decoding re-validates every field before it trusts it, reads the payload in bounded chunks
//! (so a forged length cannot make it allocate more than the bytes actually present, plus one
//! chunk), and returns a typed [`Error`]; it never panics.

use std::fmt;
use std::io::{self, Read, Write};

use xxhash_rust::xxh3::Xxh3Default;

use crate::Error;
use crate::frame::{Format, FormatError};

/// The 8 magic bytes every encoded filter starts with.
pub const MAGIC: [u8; 8] = *b"URLSEENF";
/// The format version this crate writes and reads.
pub const FORMAT_VERSION: u16 = 1;
/// The encoding's framing: magic and versions (see [`crate::frame`]).
pub const FORMAT: Format =
    Format { name: "filter", magic: MAGIC, version: FORMAT_VERSION, oldest: FORMAT_VERSION };
/// The length of the fixed header, in bytes.
pub const HEADER_LEN: usize = 48;
/// The length of the trailing checksum, in bytes.
pub const CHECKSUM_LEN: usize = 8;

/// Bytes read per chunk while decoding a payload.
const CHUNK: usize = 1 << 16;

/// Which filter an encoding holds (byte 10 of the header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[repr(u8)]
pub enum FilterKind {
    /// [`BloomFilter`](crate::BloomFilter).
    Bloom = 1,
    /// [`BlockedBloom`](crate::BlockedBloom).
    Blocked = 2,
    /// [`CountingBloom`](crate::CountingBloom).
    Counting = 3,
    /// [`BitmapIndex`](crate::BitmapIndex).
    Bitmap = 4,
    /// [`BlockedBloom`](crate::BlockedBloom) with the sectorized probes
    /// ([`BlockScheme::Sectorized`](crate::BlockScheme::Sectorized)): the same payload layout as
    /// [`Blocked`](Self::Blocked), other bits set per item. A tag of its own, so that builds
    /// that only know the scattered probes refuse it (`WrongKind`) instead of answering from the
    /// wrong bits.
    BlockedSectorized = 5,
}

impl FilterKind {
    /// The kind with wire tag `tag`, if any.
    #[must_use]
    pub fn from_tag(tag: u8) -> Option<FilterKind> {
        match tag {
            1 => Some(FilterKind::Bloom),
            2 => Some(FilterKind::Blocked),
            3 => Some(FilterKind::Counting),
            4 => Some(FilterKind::Bitmap),
            5 => Some(FilterKind::BlockedSectorized),
            _ => None,
        }
    }

    /// The wire tag of this kind.
    #[must_use]
    pub fn tag(self) -> u8 {
        self as u8
    }
}

impl fmt::Display for FilterKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FilterKind::Bloom => "bloom",
            FilterKind::Blocked => "blocked",
            FilterKind::Counting => "counting",
            FilterKind::Bitmap => "bitmap",
            FilterKind::BlockedSectorized => "blocked-sectorized",
        })
    }
}

/// [`FormatError::Truncated`] of a filter: its `section` needs `needed` bytes, `got` present.
fn truncated(section: &'static str, needed: u64, got: u64) -> Error {
    Error::Format(FormatError::Truncated { format: FORMAT.name, section, needed, got })
}

/// The fixed header of every encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) kind: FilterKind,
    pub(crate) num_hashes: u32,
    pub(crate) num_bits: u64,
    pub(crate) seed: u64,
    pub(crate) len: u64,
    pub(crate) payload_len: u64,
}

impl Header {
    fn to_bytes(self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..crate::frame::HEADER_LEN].copy_from_slice(&FORMAT.header());
        b[10] = self.kind.tag();
        b[11] = 0;
        b[12..16].copy_from_slice(&self.num_hashes.to_le_bytes());
        b[16..24].copy_from_slice(&self.num_bits.to_le_bytes());
        b[24..32].copy_from_slice(&self.seed.to_le_bytes());
        b[32..40].copy_from_slice(&self.len.to_le_bytes());
        b[40..48].copy_from_slice(&self.payload_len.to_le_bytes());
        b
    }

    /// Checks magic, version and reserved byte; returns the kind tag and the header.
    fn parse(b: &[u8; HEADER_LEN]) -> Result<(u8, Header), Error> {
        let u64_at = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        FORMAT.check_header(b)?;
        let tag = b[10];
        if b[11] != 0 {
            return Err(Error::InvalidParameter {
                field: "reserved",
                value: u64::from(b[11]),
                reason: "must be 0",
            });
        }
        let header = Header {
            // Placeholder until the caller checks the tag against the kind it expects.
            kind: FilterKind::from_tag(tag).unwrap_or(FilterKind::Bloom),
            num_hashes: u32::from_le_bytes([b[12], b[13], b[14], b[15]]),
            num_bits: u64_at(16),
            seed: u64_at(24),
            len: u64_at(32),
            payload_len: u64_at(40),
        };
        Ok((tag, header))
    }
}

/// Reads the kind of an encoded filter from its first [`HEADER_LEN`] bytes (or more), checking
/// magic, version and the kind tag, so a caller can dispatch to the right `decode`.
///
/// # Errors
/// [`Error::Format`] (cut short, bad magic, an unsupported version),
/// [`Error::InvalidParameter`] (reserved byte or unknown kind).
pub fn peek_kind(bytes: &[u8]) -> Result<FilterKind, Error> {
    let Some(head) = bytes.first_chunk::<HEADER_LEN>() else {
        return Err(truncated("header", HEADER_LEN as u64, bytes.len() as u64));
    };
    let (tag, _) = Header::parse(head)?;
    FilterKind::from_tag(tag).ok_or(Error::InvalidParameter {
        field: "kind",
        value: u64::from(tag),
        reason: "unknown filter kind",
    })
}

/// Writes header, payload and checksum, hashing as it goes.
pub(crate) struct Encoder<'w, W: Write> {
    w: &'w mut W,
    hasher: Xxh3Default,
    buf: Vec<u8>,
}

impl<'w, W: Write> Encoder<'w, W> {
    pub(crate) fn new(w: &'w mut W, header: Header) -> io::Result<Self> {
        let mut e = Encoder { w, hasher: Xxh3Default::new(), buf: Vec::with_capacity(CHUNK) };
        e.bytes(&header.to_bytes())?;
        Ok(e)
    }

    fn flush_buf(&mut self) -> io::Result<()> {
        self.hasher.update(&self.buf);
        self.w.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    pub(crate) fn bytes(&mut self, bytes: &[u8]) -> io::Result<()> {
        for chunk in bytes.chunks(CHUNK) {
            if self.buf.len() + chunk.len() > CHUNK {
                self.flush_buf()?;
            }
            self.buf.extend_from_slice(chunk);
        }
        Ok(())
    }

    pub(crate) fn u64s(&mut self, words: impl IntoIterator<Item = u64>) -> io::Result<()> {
        for w in words {
            if self.buf.len() + 8 > CHUNK {
                self.flush_buf()?;
            }
            self.buf.extend_from_slice(&w.to_le_bytes());
        }
        Ok(())
    }

    pub(crate) fn u32s(&mut self, words: impl IntoIterator<Item = u32>) -> io::Result<()> {
        for w in words {
            if self.buf.len() + 4 > CHUNK {
                self.flush_buf()?;
            }
            self.buf.extend_from_slice(&w.to_le_bytes());
        }
        Ok(())
    }

    pub(crate) fn finish(mut self) -> io::Result<()> {
        self.flush_buf()?;
        let sum = self.hasher.digest();
        self.w.write_all(&sum.to_le_bytes())
    }
}

/// Fills `buf` as far as the reader allows; returns how many bytes were read.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Reads and validates the header, then the payload and checksum.
pub(crate) struct Decoder<'r, R: Read> {
    r: &'r mut R,
    hasher: Xxh3Default,
    pub(crate) header: Header,
    /// Bytes that follow the header when decoding from a slice: checked against the payload
    /// length before anything is allocated, then used to allocate exactly once.
    known_available: Option<u64>,
}

/// An invalid parameter.
pub(crate) fn invalid(field: &'static str, value: u64, reason: &'static str) -> Error {
    Error::InvalidParameter { field, value, reason }
}

impl<'r, R: Read> Decoder<'r, R> {
    /// Reads the header and checks magic, version, kind and reserved byte.
    pub(crate) fn new(r: &'r mut R, expected: FilterKind) -> Result<Self, Error> {
        Self::new_any(r, expected, &[])
    }

    /// [`new`](Self::new) accepting `expected` or any of `also` (the header's kind is then the
    /// one found); a `WrongKind` error names `expected`.
    pub(crate) fn new_any(
        r: &'r mut R,
        expected: FilterKind,
        also: &[FilterKind],
    ) -> Result<Self, Error> {
        let mut head = [0u8; HEADER_LEN];
        let got = read_full(r, &mut head)?;
        if got < HEADER_LEN {
            // A short input that does not even start with the magic is not ours at all.
            if got >= MAGIC.len() && head[..8] != MAGIC {
                FORMAT.check_header(&head[..got])?;
            }
            return Err(truncated("header", HEADER_LEN as u64, got as u64));
        }
        let (tag, header) = Header::parse(&head)?;
        let Some(kind) =
            std::iter::once(expected).chain(also.iter().copied()).find(|k| k.tag() == tag)
        else {
            return Err(Error::WrongKind { expected, found: tag });
        };
        let mut hasher = Xxh3Default::new();
        hasher.update(&head);
        Ok(Decoder { r, hasher, header: Header { kind, ..header }, known_available: None })
    }

    /// Checks that the header's payload length equals what the parameters imply, then, when
    /// decoding from a slice, that exactly payload and checksum follow (so a short input fails
    /// before any allocation).
    pub(crate) fn check_payload_len(&self, expected: u64) -> Result<(), Error> {
        let payload = self.header.payload_len;
        if payload != expected {
            return Err(invalid("payload_len", payload, "does not match the filter parameters"));
        }
        let Some(bytes) = self.known_available else {
            return Ok(());
        };
        let needed = payload.saturating_add(CHECKSUM_LEN as u64);
        if bytes < payload {
            return Err(truncated("payload", payload, bytes));
        }
        if bytes < needed {
            return Err(truncated("checksum", CHECKSUM_LEN as u64, bytes - payload));
        }
        if bytes > needed {
            return Err(Error::TrailingBytes { count: bytes - needed });
        }
        Ok(())
    }

    /// Reads the payload in chunks, handing each chunk of bytes to `sink`. The chunk boundaries
    /// are multiples of `unit` bytes.
    fn payload(&mut self, mut sink: impl FnMut(&[u8])) -> Result<(), Error> {
        let total = self.header.payload_len;
        let mut buf = vec![0u8; CHUNK.min(usize::try_from(total).unwrap_or(CHUNK))];
        let mut done = 0u64;
        while done < total {
            let want = usize::try_from(total - done).map_or(buf.len(), |rest| rest.min(buf.len()));
            let got = read_full(self.r, &mut buf[..want])?;
            self.hasher.update(&buf[..got]);
            sink(&buf[..got]);
            done += got as u64;
            if got < want {
                return Err(truncated("payload", total, done));
            }
        }
        Ok(())
    }

    /// The initial capacity for `items` items: exact when the input is known to hold them,
    /// else at most one chunk's worth (the vector then grows only as data really arrives).
    fn capacity(&self, items: u64, item_bytes: u64) -> usize {
        let bound = if self.known_available.is_some() { items } else { CHUNK as u64 / item_bytes };
        usize::try_from(items.min(bound)).unwrap_or(0)
    }

    /// Reads a payload of little-endian u64 words into a vector with room for
    /// `extra_capacity` more.
    pub(crate) fn u64s(&mut self, count: u64, extra_capacity: usize) -> Result<Vec<u64>, Error> {
        let mut out = Vec::with_capacity(self.capacity(count, 8).saturating_add(extra_capacity));
        self.payload(|bytes| {
            out.extend(bytes.chunks_exact(8).map(|c| {
                let mut w = [0u8; 8];
                w.copy_from_slice(c);
                u64::from_le_bytes(w)
            }));
        })?;
        Ok(out)
    }

    /// Reads a payload of little-endian u32 words.
    pub(crate) fn u32s(&mut self, count: u64) -> Result<Vec<u32>, Error> {
        let mut out = Vec::with_capacity(self.capacity(count, 4));
        self.payload(|bytes| {
            out.extend(bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])));
        })?;
        Ok(out)
    }

    /// Reads a payload of raw bytes.
    pub(crate) fn bytes(&mut self, count: u64) -> Result<Vec<u8>, Error> {
        let mut out = Vec::with_capacity(self.capacity(count, 1));
        self.payload(|bytes| out.extend_from_slice(bytes))?;
        Ok(out)
    }

    /// Reads the checksum and compares it with the bytes read.
    pub(crate) fn finish(self) -> Result<(), Error> {
        let mut sum = [0u8; CHECKSUM_LEN];
        let got = read_full(self.r, &mut sum)?;
        if got < CHECKSUM_LEN {
            return Err(truncated("checksum", CHECKSUM_LEN as u64, got as u64));
        }
        let stored = u64::from_le_bytes(sum);
        let computed = self.hasher.digest();
        if stored != computed {
            return Err(Error::Format(FormatError::ChecksumMismatch {
                format: FORMAT.name,
                stored,
                computed,
            }));
        }
        Ok(())
    }
}

/// Decodes one filter from a slice, rejecting trailing bytes; `read` does the kind-specific part.
pub(crate) fn decode_slice<'b, T>(
    bytes: &'b [u8],
    kind: FilterKind,
    read: impl FnOnce(Decoder<'_, &'b [u8]>) -> Result<T, Error>,
) -> Result<T, Error> {
    decode_slice_any(bytes, kind, &[], read)
}

/// [`decode_slice`] accepting `kind` or any of `also` (see [`Decoder::new_any`]).
pub(crate) fn decode_slice_any<'b, T>(
    bytes: &'b [u8],
    kind: FilterKind,
    also: &[FilterKind],
    read: impl FnOnce(Decoder<'_, &'b [u8]>) -> Result<T, Error>,
) -> Result<T, Error> {
    let mut r = bytes;
    let mut d = Decoder::new_any(&mut r, kind, also)?;
    d.known_available = Some((bytes.len() - HEADER_LEN) as u64);
    read(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        let h = Header {
            kind: FilterKind::Counting,
            num_hashes: 7,
            num_bits: 1 << 33,
            seed: 0xDEAD_BEEF,
            len: 12,
            payload_len: 99,
        };
        let b = h.to_bytes();
        let (tag, back) = Header::parse(&b).unwrap();
        assert_eq!(tag, 3);
        assert_eq!(back, h);
        assert_eq!(peek_kind(&b).unwrap(), FilterKind::Counting);
        assert!(matches!(peek_kind(&b[..10]), Err(Error::Format(FormatError::Truncated { .. }))));
    }

    #[test]
    fn kinds() {
        for t in 0..=255u8 {
            if let Some(k) = FilterKind::from_tag(t) {
                assert_eq!(k.tag(), t);
                assert!(!k.to_string().is_empty());
            }
        }
    }
}
