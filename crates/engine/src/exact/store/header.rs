//! The store's header file (`URLSEEN-STORE`): its framing, written through the `Storage` and
//! checked at every open (damage before version: a flipped bit is damage, not a newer build).
use super::{
    Error, FRAME_LEN, Format, FormatError, HEADER_FILE, MAGIC, Path, Result, SEAL_LEN, Storage,
    VALUE_ENCODING, VERSION, io, io_err,
};

pub(super) const HEADER_LEN: usize = 24;

/// The header's framing. Its version is a `u32` LE: the frame's `u16`, then a reserved 0.
pub(super) const FORMAT: Format =
    Format { name: "fingerprint store header", magic: MAGIC, version: VERSION as u16, oldest: 1 };

pub(super) fn header_bytes() -> [u8; HEADER_LEN] {
    let mut h = Vec::with_capacity(HEADER_LEN);
    FORMAT.write_header(&mut h);
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&VALUE_ENCODING.to_le_bytes());
    Format::seal(&mut h, 0);
    h.try_into().unwrap_or([0; HEADER_LEN])
}

/// Checks a file of exactly `len` bytes framed by `format`, whose last 8 bytes seal the rest
/// and whose version is a `u32` (the frame's `u16`, then a reserved 0). Damage is reported
/// before the version: a flipped bit there is damage, not a newer build's file.
///
/// # Errors
/// [`Error::Corrupt`] (bad magic, another length, a checksum that does not match),
/// [`Error::UnsupportedVersion`].
pub(in crate::exact) fn check_fixed(
    format: &Format,
    path: &Path,
    bytes: &[u8],
    len: usize,
) -> Result<()> {
    if !bytes.starts_with(&format.magic) {
        let found = bytes[..bytes.len().min(8)].to_vec();
        return Err(Error::format(path, FormatError::BadMagic { format: format.name, found }));
    }
    if bytes.len() != len {
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            reason: format!("{} bytes, expected {len}", bytes.len()),
        });
    }
    let (body, seal) = bytes.split_at(len - SEAL_LEN);
    format.verify(body, seal).map_err(|e| Error::format(path, e))?;
    if bytes[FRAME_LEN..FRAME_LEN + 2] != [0, 0] {
        let word = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        return Err(Error::UnsupportedVersion {
            what: format.name,
            found: word,
            supported: u32::from(format.version),
        });
    }
    format.check_header(bytes).map(drop).map_err(|e| Error::format(path, e))
}

/// Writes the header atomically ([`Storage::write_atomic`]).
pub(super) fn write_header(storage: &dyn Storage, dir: &Path) -> Result<()> {
    let path = dir.join(HEADER_FILE);
    storage.write_atomic(&path, &header_bytes()).map_err(io_err("write header", &path))
}

pub(super) fn check_header(storage: &dyn Storage, path: &Path) -> Result<()> {
    let missing = || io::Error::from(io::ErrorKind::NotFound);
    let bytes = storage
        .read(path)
        .and_then(|b| b.ok_or_else(missing))
        .map_err(io_err("read header", path))?;
    check_fixed(&FORMAT, path, &bytes, HEADER_LEN)?;
    let encoding = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
    if encoding != VALUE_ENCODING {
        return Err(Error::UnsupportedVersion {
            what: "fingerprint store value encoding",
            found: encoding,
            supported: VALUE_ENCODING,
        });
    }
    Ok(())
}
