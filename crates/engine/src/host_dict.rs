//! The host dictionary: the host names a namespace has recorded under each 32-bit host hash, so
//! that a forget by host refuses when two recorded hosts share a hash, instead of forgetting
//! the other host's URLs too (see `docs/forget.md`, "The collision guard").
//!
//! Every URL recorded with a host passes [`HostDict::note`] first (in
//! `Namespace::fingerprint_host`, before its record can be made): a host not yet listed under
//! its hash is added, and in a data directory its entry is buffered for the `hosts` file. The
//! file follows the namespace's fsync policy: the log ([`crate::log::Precedes`]) writes the
//! buffered entries before each of its writes and syncs the file before each of its syncs (the
//! commit under `always`, the every-second sync, a checkpoint's, close's), so every log record
//! on disk has its host listed in the file on disk. A counting namespace, whose store has no
//! log in front of it, does the same before each store write and sync. A second, different
//! host under the same hash makes the hash *shared*; a forget of either refuses
//! ([`crate::Error::HostHashShared`]).
//!
//! ```text
//! DIR/ns/<hex of name>/hosts   "URLSEENH", version u16, then entries:
//!                              hash u32 | length u16 | host bytes | xxh3 of the three, u64
//! ```
//! A torn or corrupt entry ends the file: it was not synced, so no synced record relies on
//! it; it is cut at the next open, and the next append goes where it began. A power loss can
//! leave log records that were not synced either and whose host is not listed: a forget of
//! their hash then refuses ([`crate::Error::HostHashUnlisted`]), which forgets nothing.
//!
//! # Memory
//! One map entry per distinct host (hash, boxed name): about 70 bytes per host with names
//! of 15 to 25 bytes (see `docs/forget.md` for the measured figure).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::error::{Error, Result};
use crate::storage::{AppendFile, Storage};

const MAGIC: &[u8; 8] = b"URLSEENH";
const VERSION: u16 = 1;
const HEADER: usize = 10;

/// The hosts recorded under one hash: almost always one.
#[derive(Debug)]
enum Names {
    One(Box<str>),
    Shared(Vec<Box<str>>),
}

impl Names {
    fn contains(&self, host: &str) -> bool {
        match self {
            Names::One(name) => &**name == host,
            Names::Shared(names) => names.iter().any(|n| &**n == host),
        }
    }
}

/// What the dictionary says about a host and its hash, for a forget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Vouch {
    /// The host is the only one recorded under the hash: forgetting the hash forgets it alone.
    Only,
    /// No host is listed under the hash.
    Absent,
    /// Other hosts are listed under the hash (and maybe this one): their names.
    Shared(Vec<String>),
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct HostDict {
    names: RwLock<HashMap<u32, Names>>,
    /// The `hosts` file, in a writable data directory.
    file: Option<Arc<HostsFile>>,
}

/// The `hosts` file: entries buffered by [`HostDict::note`], written and synced when the log
/// (or a counting store) is about to write or sync records that rely on them.
#[derive(Debug)]
pub(crate) struct HostsFile {
    writer: Mutex<Writer>,
}

/// The `hosts` file, opened at its first write (a namespace of raw items has none).
struct Writer {
    storage: Arc<dyn Storage>,
    path: PathBuf,
    file: Option<Box<dyn AppendFile>>,
    /// Whether the file holds its header (when it is opened).
    has_header: bool,
    /// Entries listed and not written yet.
    pending: Vec<u8>,
    /// Whether bytes were written since the last sync.
    unsynced: bool,
    /// Why a write or sync failed: its tail is unknown, and an entry appended after it might
    /// not be read back, so nothing is written any more (the log that asked is poisoned).
    failed: Option<String>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Writer {
    fn flush(&mut self, sync: bool) -> Result<()> {
        if self.pending.is_empty() && !(sync && self.unsynced) {
            return Ok(());
        }
        if let Some(reason) = &self.failed {
            return Err(Error::Poisoned { reason: reason.clone() });
        }
        let result = self.flush_once(sync);
        if let Err(e) = &result {
            self.failed = Some(format!("the hosts file could not be written ({e}); reopen"));
        }
        result
    }

    fn flush_once(&mut self, sync: bool) -> Result<()> {
        let path = &self.path;
        let file = match &mut self.file {
            Some(file) => file,
            None => {
                let mut file =
                    self.storage.open_append(path).map_err(|e| Error::io("open", path, e))?;
                if !self.has_header {
                    let mut header = MAGIC.to_vec();
                    header.extend_from_slice(&VERSION.to_le_bytes());
                    file.append(&header).map_err(|e| Error::io("write", path, e))?;
                    self.has_header = true;
                }
                self.file.insert(file)
            }
        };
        if !self.pending.is_empty() {
            file.append(&self.pending).map_err(|e| Error::io("write", path, e))?;
            self.pending.clear();
            self.unsynced = true;
        }
        if sync && self.unsynced {
            file.sync().map_err(|e| Error::io("fsync", path, e))?;
            self.unsynced = false;
        }
        Ok(())
    }
}

impl crate::log::Precedes for HostsFile {
    fn flush(&self, sync: bool) -> Result<()> {
        self.writer.lock().flush(sync)
    }
}

impl HostDict {
    /// An empty dictionary that is not persisted (memory, spill, or a read-only open's extra).
    pub(crate) fn in_memory() -> Self {
        HostDict { names: RwLock::default(), file: None }
    }

    /// The dictionary of the data directory `dir`: its `hosts` file read (a torn tail cut
    /// off), and opened for appending unless `read_only`.
    ///
    /// # Errors
    /// [`Error::Io`]; [`Error::Corrupt`] for a file that is not a hosts file or of an unknown
    /// version.
    pub(crate) fn open(storage: &Arc<dyn Storage>, dir: &Path, read_only: bool) -> Result<Self> {
        let path = dir.join("hosts");
        let bytes = storage.read(&path).map_err(|e| Error::io("read", &path, e))?;
        let mut names = HashMap::new();
        let mut valid = 0;
        if let Some(bytes) = &bytes {
            valid = decode(&path, bytes, &mut |hash, host| add(&mut names, hash, host))?;
        }
        let file = match read_only {
            true => None,
            false => {
                // A torn tail (never synced, so no record carries it) is cut off, and the next
                // entry written where it began.
                match &bytes {
                    Some(b) if valid < b.len() => storage
                        .truncate(&path, valid as u64)
                        .map_err(|e| Error::io("truncate", &path, e))?,
                    _ => {}
                }
                Some(Arc::new(HostsFile {
                    writer: Mutex::new(Writer {
                        storage: Arc::clone(storage),
                        path,
                        file: None,
                        has_header: valid > 0,
                        pending: Vec::new(),
                        unsynced: false,
                        failed: None,
                    }),
                }))
            }
        };
        Ok(HostDict { names: RwLock::new(names), file })
    }

    /// Lists `host` under `hash` if it is not yet (in a data directory, its entry buffered
    /// for the `hosts` file, which the log writes before any record that carries `hash`).
    /// Called for every URL recorded with a host; costs a read lock and a compare when the
    /// host is known.
    ///
    /// # Errors
    /// [`Error::InvalidHost`] for a host longer than an entry holds (65,535 bytes).
    pub(crate) fn note(&self, hash: u32, host: &str) -> Result<()> {
        if self.names.read().get(&hash).is_some_and(|n| n.contains(host)) {
            return Ok(());
        }
        let mut names = self.names.write();
        if names.get(&hash).is_some_and(|n| n.contains(host)) {
            return Ok(());
        }
        if let Some(file) = &self.file {
            // Under the write lock: buffered before anyone can see the host listed, so before
            // any record carrying the hash can be appended to the log.
            let mut writer = file.writer.lock();
            encode(&mut writer.pending, hash, host)?;
        }
        add(&mut names, hash, host);
        Ok(())
    }

    /// The `hosts` file, to precede the log on disk (none in memory or read-only).
    pub(crate) fn file(&self) -> Option<Arc<HostsFile>> {
        self.file.clone()
    }

    /// What is listed under `hash`, for a forget of `host`.
    pub(crate) fn vouch(&self, hash: u32, host: &str) -> Vouch {
        match self.names.read().get(&hash) {
            None => Vouch::Absent,
            Some(Names::One(name)) if &**name == host => Vouch::Only,
            Some(Names::One(name)) => Vouch::Shared(vec![name.to_string()]),
            Some(Names::Shared(names)) => {
                Vouch::Shared(names.iter().map(|n| n.to_string()).collect())
            }
        }
    }

    /// Distinct hosts listed.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.names.read().values().map(|n| if let Names::Shared(v) = n { v.len() } else { 1 }).sum()
    }
}

fn add(names: &mut HashMap<u32, Names>, hash: u32, host: &str) {
    match names.get_mut(&hash) {
        None => {
            names.insert(hash, Names::One(host.into()));
        }
        Some(n) if n.contains(host) => {}
        Some(n) => {
            let old = std::mem::replace(n, Names::Shared(Vec::new()));
            let mut all = match old {
                Names::One(name) => vec![name],
                Names::Shared(all) => all,
            };
            all.push(host.into());
            *n = Names::Shared(all);
        }
    }
}

fn checksum(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

fn encode(out: &mut Vec<u8>, hash: u32, host: &str) -> Result<()> {
    let len = u16::try_from(host.len()).map_err(|_| Error::InvalidHost {
        host: host.to_owned(),
        reason: format!("a host is at most {} bytes", u16::MAX),
    })?;
    let start = out.len();
    out.extend_from_slice(&hash.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(host.as_bytes());
    let check = checksum(&out[start..]);
    out.extend_from_slice(&check.to_le_bytes());
    Ok(())
}

/// Reads the entries of a hosts file into `each`; returns the length of its valid part (the
/// header and every whole, checked entry before the first torn or corrupt one).
fn decode(path: &Path, bytes: &[u8], each: &mut dyn FnMut(u32, &str)) -> Result<usize> {
    if bytes.len() < HEADER {
        // A header not yet synced: nothing was listed.
        return Ok(0);
    }
    if &bytes[..8] != MAGIC {
        return Err(Error::corrupt(path, "not a hosts file (bad magic)"));
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if version != VERSION {
        return Err(Error::corrupt(
            path,
            &format!("hosts file version {version}, this build reads {VERSION}"),
        ));
    }
    let mut at = HEADER;
    loop {
        let Some(head) = bytes.get(at..at + 6) else { return Ok(at) };
        let hash = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let len = usize::from(u16::from_le_bytes([head[4], head[5]]));
        let end = at + 6 + len;
        let (Some(body), Some(stored)) = (bytes.get(at..end), bytes.get(end..end + 8)) else {
            return Ok(at);
        };
        let mut check = [0u8; 8];
        check.copy_from_slice(stored);
        let Ok(host) = std::str::from_utf8(&body[6..]) else { return Ok(at) };
        if checksum(body) != u64::from_le_bytes(check) {
            return Ok(at);
        }
        each(hash, host);
        at = end + 8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_host_under_a_hash_makes_it_shared() {
        let d = HostDict::in_memory();
        d.note(7, "a.example").unwrap();
        d.note(7, "a.example").unwrap();
        assert_eq!(d.vouch(7, "a.example"), Vouch::Only);
        assert_eq!(d.vouch(7, "b.example"), Vouch::Shared(vec!["a.example".into()]));
        assert_eq!(d.vouch(8, "a.example"), Vouch::Absent);
        d.note(7, "b.example").unwrap();
        let both = Vouch::Shared(vec!["a.example".into(), "b.example".into()]);
        assert_eq!(d.vouch(7, "a.example"), both);
        assert_eq!(d.vouch(7, "b.example"), both);
        assert_eq!(d.len(), 2);
    }

    #[test]
    fn entries_round_trip_and_a_torn_tail_ends_the_file() {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        encode(&mut bytes, 1, "a.example").unwrap();
        encode(&mut bytes, 1, "b.example").unwrap();
        let whole = bytes.len();
        encode(&mut bytes, 2, "c.example").unwrap();
        let p = Path::new("hosts");
        for cut in whole..bytes.len() {
            let mut seen = Vec::new();
            let valid = decode(p, &bytes[..cut], &mut |h, s| seen.push((h, s.to_owned()))).unwrap();
            assert_eq!(valid, whole, "cut at {cut}");
            assert_eq!(seen, [(1, "a.example".to_owned()), (1, "b.example".to_owned())]);
        }
        let mut flipped = bytes.clone();
        flipped[whole + 7] ^= 1;
        assert_eq!(decode(p, &flipped, &mut |_, _| {}).unwrap(), whole, "a bad checksum ends it");
        let mut bad = bytes.clone();
        bad[0] = b'X';
        assert!(matches!(decode(p, &bad, &mut |_, _| {}), Err(Error::Corrupt { .. })));
        let mut newer = bytes;
        newer[8] = 9;
        assert!(matches!(decode(p, &newer, &mut |_, _| {}), Err(Error::Corrupt { .. })));
    }
}
