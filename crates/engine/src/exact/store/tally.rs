//! The store's tally (`URLSEEN-TALLY`): the fewest fingerprints the store must hold, written
//! through the `Storage` after each [`sync`](FpStore::sync), so that an LSM that lost part of
//! what it acknowledged (a deleted or damaged journal, which fjall cuts at the damage and
//! reopens without a word) is refused when opened instead of answering "new" for the URLs
//! it lost.
//!
//! ```text
//! "USFPTALY" | version u16 (1) | [0; 6]
//! entry: floor u64 LE | xxh3_64 of (its offset u64 LE, floor u64 LE) u64 LE   (appended)
//! ```
//! The last entry whose checksum holds is the floor (a torn last entry is ignored: the one
//! before it is lower, never higher). The file is rewritten whole (atomically) with one entry
//! once it reaches [`ROTATE_BYTES`].
//!
//! The floor never exceeds what is durable in the store: a sync writes the count it read
//! *before* the LSM's fsync, and a removal that would take the store below the floor first
//! lowers it (with some slack, so that a forget of many fingerprints syncs the tally once per
//! [`REMOVAL_SLACK`] of them, not once each) and syncs it before the removal is written. An
//! entry need not be synced itself: a lost one leaves an older, lower floor.
#[cfg(test)]
use super::OsStorage;
use super::{Arc, Error, FRAME_LEN, Format, Path, PathBuf, Result, Storage, io_err};

/// The name of the tally file in a store directory.
pub const TALLY_FILE: &str = "URLSEEN-TALLY";
const FORMAT: Format =
    Format { name: "fingerprint store tally", magic: *b"USFPTALY", version: 1, oldest: 1 };
const HEADER: u64 = 16;
const ENTRY: u64 = 16;
/// The file is rewritten with one entry once it is this long (4,095 entries).
pub(super) const ROTATE_BYTES: u64 = 64 << 10;
/// How far below the count a removal lowers the floor (at least): the tally is synced once per
/// this many removals.
pub(super) const REMOVAL_SLACK: u64 = 1024;

/// The tally file of one store, as written so far.
#[derive(Debug)]
pub(super) struct Tally {
    path: PathBuf,
    storage: Arc<dyn Storage>,
    /// The file's length (0: there is none yet, as in a store made before tallies).
    len: u64,
    /// The floor last written.
    pub(super) floor: u64,
}

impl Tally {
    /// Reads the tally of the store in `dir`; a store without one (made before tallies, or
    /// new) has floor 0 and gets a file at its first write.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for a damaged header, or entries none of which is sound;
    /// [`Error::UnsupportedVersion`]; I/O.
    pub(super) fn read(storage: Arc<dyn Storage>, dir: &Path) -> Result<Tally> {
        let path = dir.join(TALLY_FILE);
        let bytes = storage.read(&path).map_err(io_err("read tally", &path))?;
        let Some(bytes) = bytes else { return Ok(Tally { path, storage, len: 0, floor: 0 }) };
        let floor = decode(&path, &bytes)?;
        Ok(Tally { path, storage, len: bytes.len() as u64, floor })
    }

    /// Writes `floor` (appended; the file rewritten when it is new or long), and syncs it
    /// if `sync`.
    ///
    /// # Errors
    /// I/O.
    pub(super) fn write(&mut self, floor: u64, sync: bool) -> Result<()> {
        if self.len < HEADER || self.len >= ROTATE_BYTES {
            let mut bytes = header().to_vec();
            bytes.extend_from_slice(&entry(HEADER, floor));
            self.storage
                .write_atomic(&self.path, &bytes)
                .map_err(io_err("write tally", &self.path))?;
            self.len = bytes.len() as u64;
        } else {
            // Entries start 16-aligned after the header: a torn one left by a crash is
            // written over, not followed.
            let at = HEADER + (self.len - HEADER) / ENTRY * ENTRY;
            if at != self.len {
                self.storage
                    .truncate(&self.path, at)
                    .map_err(io_err("cut a torn tally entry", &self.path))?;
            }
            self.storage
                .append_to(&self.path, &entry(at, floor))
                .map_err(io_err("append to tally", &self.path))?;
            self.len = at + ENTRY;
            if sync {
                self.storage.sync_file(&self.path).map_err(io_err("sync tally", &self.path))?;
            }
        }
        self.floor = floor;
        Ok(())
    }
}

/// Rewrites the tally of the store in `dir` to hold `floor` alone (a repair that accepts what
/// the store lost).
///
/// # Errors
/// I/O.
pub(super) fn rewrite(storage: &Arc<dyn Storage>, dir: &Path, floor: u64) -> Result<()> {
    let mut tally =
        Tally { path: dir.join(TALLY_FILE), storage: Arc::clone(storage), len: 0, floor };
    tally.write(floor, true)
}

fn header() -> [u8; HEADER as usize] {
    let mut h = [0u8; HEADER as usize];
    h[..FRAME_LEN].copy_from_slice(&FORMAT.header());
    h
}

fn entry(at: u64, floor: u64) -> [u8; ENTRY as usize] {
    let mut body = [0u8; 16];
    body[..8].copy_from_slice(&at.to_le_bytes());
    body[8..].copy_from_slice(&floor.to_le_bytes());
    let mut out = [0u8; ENTRY as usize];
    out[..8].copy_from_slice(&floor.to_le_bytes());
    out[8..].copy_from_slice(&urlseen_filter::frame::checksum(&body).to_le_bytes());
    out
}

/// The floor in a tally file's bytes: its last sound entry.
fn decode(path: &Path, bytes: &[u8]) -> Result<u64> {
    let head = bytes.get(..HEADER as usize).ok_or_else(|| {
        Error::format(path, FORMAT.truncated("header", HEADER as usize, bytes.len()))
    })?;
    FORMAT.check_header(head).map_err(|e| Error::format(path, e))?;
    if head[FRAME_LEN..] != [0; 6] {
        return Err(Error::corrupt(path, "damaged header (its reserved bytes are not 0)"));
    }
    let entries = (bytes.len() as u64 - HEADER) / ENTRY;
    if entries == 0 {
        return Err(Error::corrupt(path, "no entry (a tally is written with one)"));
    }
    for i in (0..entries).rev() {
        let at = HEADER + i * ENTRY;
        let e = &bytes[at as usize..(at + ENTRY) as usize];
        let floor = u64::from_le_bytes(e[..8].try_into().unwrap_or_default());
        if entry(at, floor) == *e {
            return Ok(floor);
        }
    }
    Err(Error::corrupt(path, &format!("none of its {entries} entries is sound")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_sound_entry_is_the_floor_and_the_file_rotates() {
        let dir = tempfile::tempdir().unwrap();
        let storage: Arc<dyn Storage> = Arc::new(OsStorage);
        let mut t = Tally::read(Arc::clone(&storage), dir.path()).unwrap();
        assert_eq!(t.floor, 0);
        for floor in 1..=10 {
            t.write(floor * 100, false).unwrap();
        }
        assert_eq!(Tally::read(Arc::clone(&storage), dir.path()).unwrap().floor, 1000);
        let path = dir.path().join(TALLY_FILE);
        // A torn last entry: the one before it.
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 3] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(Tally::read(Arc::clone(&storage), dir.path()).unwrap().floor, 900);
        std::fs::write(&path, &bytes[..n - 5]).unwrap();
        let mut t = Tally::read(Arc::clone(&storage), dir.path()).unwrap();
        assert_eq!(t.floor, 900);
        t.write(950, true).unwrap();
        assert_eq!(Tally::read(Arc::clone(&storage), dir.path()).unwrap().floor, 950);
        // A damaged header is damage, named.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[2] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let err = Tally::read(Arc::clone(&storage), dir.path()).unwrap_err();
        assert!(matches!(&err, Error::Corrupt { path: p, .. } if *p == path), "{err}");
        // Rotation keeps the file short.
        rewrite(&storage, dir.path(), 7).unwrap();
        let mut t = Tally::read(Arc::clone(&storage), dir.path()).unwrap();
        for floor in 0..10_000 {
            t.write(floor, false).unwrap();
        }
        assert!(std::fs::metadata(&path).unwrap().len() <= ROTATE_BYTES + ENTRY);
        assert_eq!(Tally::read(storage, dir.path()).unwrap().floor, 9_999);
    }
}
