//! The framing every urlseen file and blob shares: 8 magic bytes, a `u16` LE format version,
//! and sections sealed by a trailing XXH3-64 checksum of their bytes. One [`Format`] per kind
//! of file names its magic and the versions this build reads; one [`FormatError`] says what is
//! wrong with bytes that do not fit it.
//!
//! ```text
//! offset  size  field
//!      0     8  magic (one per format)
//!      8     2  version, u16 LE
//!     10     …  the format's own fields (formats that once stored a u32 version keep its
//!               upper two bytes as a reserved 0, so their bytes did not change)
//! sealed section:
//!      0     n  body
//!      n     8  XXH3-64 (seed 0) of the body, u64 LE
//! ```
//!
//! Lives in this crate, the one every other depends on, so that the filter codec and the
//! engine's files share it.

/// The length of a header's magic and version.
pub const HEADER_LEN: usize = 10;
/// The length of a seal (a section's trailing checksum).
pub const SEAL_LEN: usize = 8;

/// One on-disk format: its name (in errors), magic, and the versions this build reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    /// What users call such a file ("fingerprint log", "snapshot", …).
    pub name: &'static str,
    /// The 8 bytes every such file starts with.
    pub magic: [u8; 8],
    /// The version this build writes (and the newest it reads).
    pub version: u16,
    /// The oldest version this build reads (it upgrades those before `version`).
    pub oldest: u16,
}

/// Why bytes are not a file of the format they were read as.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The bytes do not start with the format's magic: another kind of file.
    #[error("not a urlseen {format} (bad magic bytes {found:02x?})")]
    BadMagic {
        /// The format expected.
        format: &'static str,
        /// The first bytes found (fewer than 8 if that is all there was).
        found: Vec<u8>,
    },
    /// The version is not one this build reads.
    #[error("unsupported {format} version {found} (this build reads {oldest} to {newest})")]
    UnsupportedVersion {
        /// The format.
        format: &'static str,
        /// The version found.
        found: u16,
        /// The oldest version this build reads.
        oldest: u16,
        /// The newest.
        newest: u16,
    },
    /// The bytes end before a part of the format does.
    #[error("truncated {format}: its {section} needs {needed} bytes, {got} present")]
    Truncated {
        /// The format.
        format: &'static str,
        /// The part cut short.
        section: &'static str,
        /// Bytes it needs.
        needed: u64,
        /// Bytes present.
        got: u64,
    },
    /// A field is out of range, or does not agree with the others: the bytes are damaged.
    #[error("damaged {format}: {reason}")]
    Invalid {
        /// The format.
        format: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A sealed section's checksum does not match its bytes: they are damaged.
    #[error("damaged {format}: checksum {stored:#018x} stored, {computed:#018x} computed")]
    ChecksumMismatch {
        /// The format.
        format: &'static str,
        /// The checksum stored after the section.
        stored: u64,
        /// The checksum of the bytes read.
        computed: u64,
    },
}

impl Format {
    /// Appends the header: magic, then version.
    pub fn write_header(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.magic);
        out.extend_from_slice(&self.version.to_le_bytes());
    }

    /// The header, as [`write_header`](Self::write_header) appends it.
    pub fn header(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[..8].copy_from_slice(&self.magic);
        h[8..].copy_from_slice(&self.version.to_le_bytes());
        h
    }

    /// Checks the header at the start of `bytes` and returns the version found.
    ///
    /// # Errors
    /// [`FormatError::BadMagic`] (also for fewer than 8 bytes that do not match),
    /// [`FormatError::Truncated`], [`FormatError::UnsupportedVersion`].
    pub fn check_header(&self, bytes: &[u8]) -> Result<u16, FormatError> {
        let magic = &bytes[..bytes.len().min(8)];
        if magic != &self.magic[..magic.len()] {
            return Err(FormatError::BadMagic { format: self.name, found: magic.to_vec() });
        }
        let Some(&[a, b]) = bytes.get(8..HEADER_LEN) else {
            return Err(self.truncated("header", HEADER_LEN, bytes.len()));
        };
        let version = u16::from_le_bytes([a, b]);
        if !(self.oldest..=self.version).contains(&version) {
            return Err(FormatError::UnsupportedVersion {
                format: self.name,
                found: version,
                oldest: self.oldest,
                newest: self.version,
            });
        }
        Ok(version)
    }

    /// Seals the section `out[start..]`: appends its checksum.
    pub fn seal(out: &mut Vec<u8>, start: usize) {
        let check = checksum(&out[start..]);
        out.extend_from_slice(&check.to_le_bytes());
    }

    /// The body of a sealed section (`bytes`: the body then its seal), once its checksum
    /// matches.
    ///
    /// # Errors
    /// [`FormatError::Truncated`] for fewer bytes than a seal, [`FormatError::ChecksumMismatch`].
    pub fn unseal<'b>(&self, bytes: &'b [u8]) -> Result<&'b [u8], FormatError> {
        let Some(body_len) = bytes.len().checked_sub(SEAL_LEN) else {
            return Err(self.truncated("checksum", SEAL_LEN, bytes.len()));
        };
        let (body, tail) = bytes.split_at(body_len);
        self.verify(body, tail)?;
        Ok(body)
    }

    /// Checks that `seal` (8 bytes) is the checksum of `body`.
    ///
    /// # Errors
    /// [`FormatError::Truncated`] if `seal` is short, [`FormatError::ChecksumMismatch`].
    pub fn verify(&self, body: &[u8], seal: &[u8]) -> Result<(), FormatError> {
        let Some(stored) = seal.get(..SEAL_LEN).and_then(|s| <[u8; 8]>::try_from(s).ok()) else {
            return Err(self.truncated("checksum", SEAL_LEN, seal.len()));
        };
        let (stored, computed) = (u64::from_le_bytes(stored), checksum(body));
        if stored != computed {
            return Err(FormatError::ChecksumMismatch { format: self.name, stored, computed });
        }
        Ok(())
    }

    /// A [`FormatError::Invalid`] of this format.
    pub fn invalid(&self, reason: impl Into<String>) -> FormatError {
        FormatError::Invalid { format: self.name, reason: reason.into() }
    }

    /// A bounds-checked reader of `bytes`, a file of this format (or part of one).
    pub fn reader<'b>(&self, bytes: &'b [u8]) -> Reader<'b> {
        Reader { format: self.name, bytes, pos: 0 }
    }

    /// A [`FormatError::Truncated`] of this format.
    pub fn truncated(&self, section: &'static str, needed: usize, got: usize) -> FormatError {
        FormatError::Truncated {
            format: self.name,
            section,
            needed: needed as u64,
            got: got as u64,
        }
    }
}

/// A bounds-checked little-endian reader over untrusted bytes ([`Format::reader`]): every read
/// past the end is a [`FormatError::Truncated`], never a panic.
#[derive(Debug, Clone)]
pub struct Reader<'b> {
    format: &'static str,
    bytes: &'b [u8],
    pos: usize,
}

impl<'b> Reader<'b> {
    /// The next `n` bytes.
    ///
    /// # Errors
    /// [`FormatError::Truncated`] if fewer are left (nothing is consumed then).
    pub fn take(&mut self, n: usize) -> Result<&'b [u8], FormatError> {
        let rest = &self.bytes[self.pos..];
        let Some(out) = rest.get(..n) else {
            return Err(FormatError::Truncated {
                format: self.format,
                section: "field",
                needed: n as u64,
                got: rest.len() as u64,
            });
        };
        self.pos += n;
        Ok(out)
    }

    /// The next `N` bytes, as an array.
    ///
    /// # Errors
    /// As [`Self::take`].
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], FormatError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    /// The next byte.
    ///
    /// # Errors
    /// As [`Self::take`].
    pub fn u8(&mut self) -> Result<u8, FormatError> {
        Ok(self.take(1)?[0])
    }

    /// The next `u32`, little-endian.
    ///
    /// # Errors
    /// As [`Self::take`].
    pub fn u32(&mut self) -> Result<u32, FormatError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// The next `u64`, little-endian.
    ///
    /// # Errors
    /// As [`Self::take`].
    pub fn u64(&mut self) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// How many bytes were read.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// What is left.
    pub fn rest(&self) -> &'b [u8] {
        &self.bytes[self.pos..]
    }
}

/// The checksum of every sealed section: XXH3-64 with seed 0.
pub fn checksum(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST: Format = Format { name: "test file", magic: *b"URLSEENT", version: 3, oldest: 2 };

    #[test]
    fn a_header_reads_back_and_other_bytes_are_refused() {
        let mut out = Vec::new();
        TEST.write_header(&mut out);
        assert_eq!(out, TEST.header());
        assert_eq!(TEST.check_header(&out), Ok(3));
        let old = Format { version: 2, ..TEST }.header();
        assert_eq!(TEST.check_header(&old), Ok(2));
        let newer = Format { version: 4, ..TEST }.header();
        assert!(matches!(
            TEST.check_header(&newer),
            Err(FormatError::UnsupportedVersion { found: 4, oldest: 2, newest: 3, .. })
        ));
        let older = Format { version: 1, ..TEST }.header();
        assert!(matches!(
            TEST.check_header(&older),
            Err(FormatError::UnsupportedVersion { found: 1, .. })
        ));
        assert!(matches!(
            TEST.check_header(b"URLSEENX\x03\x00"),
            Err(FormatError::BadMagic { .. })
        ));
        assert!(matches!(TEST.check_header(b"URL"), Err(FormatError::Truncated { .. })));
        assert!(matches!(TEST.check_header(b"UR!"), Err(FormatError::BadMagic { .. })));
        assert!(matches!(TEST.check_header(&out[..9]), Err(FormatError::Truncated { .. })));
        assert!(matches!(TEST.check_header(b""), Err(FormatError::Truncated { .. })));
    }

    #[test]
    fn a_sealed_section_opens_and_any_flipped_bit_is_caught() {
        let mut out = b"head".to_vec();
        out.extend_from_slice(b"some body");
        Format::seal(&mut out, 4);
        assert_eq!(TEST.unseal(&out[4..]), Ok(&b"some body"[..]));
        for byte in 4..out.len() {
            for bit in 0..8 {
                let mut bad = out.clone();
                bad[byte] ^= 1 << bit;
                assert!(
                    matches!(TEST.unseal(&bad[4..]), Err(FormatError::ChecksumMismatch { .. })),
                    "byte {byte} bit {bit}"
                );
            }
        }
        assert!(matches!(TEST.unseal(&out[..7]), Err(FormatError::Truncated { .. })));
        let err = TEST.unseal(&out[5..]).unwrap_err().to_string();
        assert!(err.contains("damaged test file"), "{err}");
    }

    #[test]
    fn a_reader_never_reads_past_the_end() {
        let bytes = [1u8, 2, 0, 0, 0, 9, 9];
        let mut r = TEST.reader(&bytes);
        assert_eq!(r.u8(), Ok(1));
        assert_eq!(r.u32(), Ok(2));
        assert!(matches!(r.u64(), Err(FormatError::Truncated { needed: 8, got: 2, .. })));
        assert_eq!(r.pos(), 5, "a failed read consumes nothing");
        assert_eq!(r.rest(), &[9, 9]);
        assert_eq!(r.take(2), Ok(&[9u8, 9][..]));
        assert!(matches!(r.u8(), Err(FormatError::Truncated { .. })));
        let err = TEST.invalid("node 3: no children").to_string();
        assert_eq!(err, "damaged test file: node 3: no children");
    }
}
