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
//! A torn or corrupt entry with no sound entry after it ends the file: it was not synced, so
//! no synced record relies on it; it is cut at the next open, and the next append goes where
//! it began. Damage with sound entries after it is not a torn tail: opening refuses it
//! (cutting would drop those entries), and `urlseen check --repair` rewrites the file with
//! every sound entry ([`survey`], [`rebuilt`]). A power loss can
//! leave log records that were not synced either and whose host is not listed: a forget of
//! their hash then refuses ([`crate::Error::HostHashUnlisted`]), which forgets nothing.
//!
//! # Memory
//! One map entry per distinct host (hash, 64-bit hash, boxed name) and one slot of 8 bytes
//! in a table at most half full, and their growth slack: 135 bytes of RSS per host with names
//! of 15 to 25 bytes (see `docs/forget.md` for the measured figure). A namespace that met
//! at most [`FEW_HOSTS`] hash values (a crawl job of a site or a few) keeps a sorted list of
//! 40 bytes an entry and no table: the dictionary of a one-site job is 80 bytes of heap
//! beside its one entry and name.

use std::cell::Cell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

use urlseen_filter::frame::Format;

use crate::error::{Error, Result};
use crate::storage::{AppendFile, Storage};

const FORMAT: Format = Format { name: "hosts file", magic: *b"URLSEENH", version: 1, oldest: 1 };
const HEADER: usize = urlseen_filter::frame::HEADER_LEN;

/// The hosts recorded under one hash: almost always one. Each with its 64-bit host hash
/// ([`crate::host::host_hashes`]), which [`HostDict::note`] compares instead of the name.
#[derive(Debug)]
enum Names {
    One(u64, Box<str>),
    Shared(Vec<(u64, Box<str>)>),
}

impl Names {
    /// Whether the host whose 64-bit hash is `full` is listed: two hosts with the same 64-bit
    /// hash are taken for one (probability 2⁻⁶⁴ per pair).
    fn knows(&self, full: u64) -> bool {
        match self {
            Names::One(f, _) => *f == full,
            Names::Shared(names) => names.iter().any(|(f, _)| *f == full),
        }
    }

    /// The 64-bit hashes of the hosts listed.
    fn fulls(&self) -> impl Iterator<Item = u64> + '_ {
        let (one, shared) = match self {
            Names::One(f, _) => (Some(*f), &[][..]),
            Names::Shared(names) => (None, &names[..]),
        };
        one.into_iter().chain(shared.iter().map(|(f, _)| *f))
    }
}

/// The host hashes are uniform already: the map spreads them with one multiplication instead
/// of hashing them again (SipHash cost more than the rest of a listed host's check).
#[derive(Debug, Clone, Copy, Default)]
struct Spread;

impl std::hash::BuildHasher for Spread {
    type Hasher = SpreadHasher;

    fn build_hasher(&self) -> SpreadHasher {
        SpreadHasher(0)
    }
}

#[derive(Debug, Default)]
struct SpreadHasher(u64);

impl std::hash::Hasher for SpreadHasher {
    fn finish(&self) -> u64 {
        // The top bits matter too (hashbrown's control bytes).
        self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n);
    }
}

/// The names listed under each hash: a short sorted list while a namespace has met few hosts
/// (a crawl job of one site holds one entry, 40 bytes, where a map's smallest table takes
/// four times that), a map from [`FEW_HOSTS`] on.
#[derive(Debug)]
enum Map {
    Few(Vec<(u32, Names)>),
    Many(Box<Many>),
}

/// The dictionary of a namespace that met more than [`FEW_HOSTS`] hash values: a map of
/// names, and the table of their 64-bit hashes that the check of every URL probes (a few
/// hosts are checked by a scan of the list instead, one cache line, so a small namespace keeps
/// no table).
#[derive(Debug)]
struct Many {
    names: HashMap<u32, Names, Spread>,
    known: Known,
}

/// Hashes the list holds before it becomes a map.
const FEW_HOSTS: usize = 8;

impl Default for Map {
    fn default() -> Self {
        Map::Few(Vec::new())
    }
}

impl Map {
    fn get(&self, hash: &u32) -> Option<&Names> {
        match self {
            Map::Few(list) => {
                list.binary_search_by_key(hash, |(h, _)| *h).ok().map(|at| &list[at].1)
            }
            Map::Many(many) => many.names.get(hash),
        }
    }

    /// Whether the host whose 64-bit hash is `full` is listed.
    fn knows(&self, full: u64) -> bool {
        match self {
            Map::Few(list) => list.iter().any(|(_, n)| n.knows(full)),
            Map::Many(many) => many.known.contains(full),
        }
    }

    /// Asks for the cache line [`Self::knows`] of `full` looks at (a map's table slot).
    fn prefetch(&self, full: u64) {
        if let Map::Many(many) = self {
            many.known.prefetch(full);
        }
    }

    /// Lists `host` (64-bit hash `full`) under `hash`.
    fn add(&mut self, hash: u32, full: u64, host: &str) {
        match self.get_mut(&hash) {
            None => self.insert(hash, Names::One(full, host.into())),
            Some(n) if n.knows(full) => return,
            Some(n) => {
                let old = std::mem::replace(n, Names::Shared(Vec::new()));
                let mut all = match old {
                    Names::One(f, name) => vec![(f, name)],
                    Names::Shared(all) => all,
                };
                all.push((full, host.into()));
                *n = Names::Shared(all);
            }
        }
        if let Map::Many(many) = self {
            many.known.insert(full);
        }
    }

    fn get_mut(&mut self, hash: &u32) -> Option<&mut Names> {
        match self {
            Map::Few(list) => match list.binary_search_by_key(hash, |(h, _)| *h) {
                Ok(at) => Some(&mut list[at].1),
                Err(_) => None,
            },
            Map::Many(many) => many.names.get_mut(hash),
        }
    }

    /// Lists `names` under `hash`, which has none yet.
    fn insert(&mut self, hash: u32, names: Names) {
        match self {
            Map::Few(list) if list.len() < FEW_HOSTS => {
                if let Err(at) = list.binary_search_by_key(&hash, |(h, _)| *h) {
                    list.reserve_exact(1);
                    list.insert(at, (hash, names));
                }
            }
            Map::Few(list) => {
                let mut map: HashMap<u32, Names, Spread> =
                    HashMap::with_capacity_and_hasher(FEW_HOSTS * 2, Spread);
                map.extend(list.drain(..));
                map.insert(hash, names);
                let mut known = Known::default();
                for full in map.values().flat_map(Names::fulls) {
                    known.insert(full);
                }
                *self = Map::Many(Box::new(Many { names: map, known }));
            }
            Map::Many(many) => {
                many.names.insert(hash, names);
            }
        }
    }

    #[cfg(test)]
    fn values(&self) -> Box<dyn Iterator<Item = &Names> + '_> {
        match self {
            Map::Few(list) => Box::new(list.iter().map(|(_, n)| n)),
            Map::Many(many) => Box::new(many.names.values()),
        }
    }
}

/// The 64-bit hashes of the hosts listed, in an open-addressed table: what
/// [`HostDict::note`] looks at for every URL. One probe touches one cache line, where the map
/// of names costs two (its control bytes and its bucket); with 100,000 hosts that miss was
/// most of a listed host's check.
#[derive(Debug, Default)]
struct Known {
    /// 0: empty (a hash of 0 is kept as 1).
    slots: Vec<u64>,
    len: usize,
}

impl Known {
    fn key(full: u64) -> u64 {
        full.max(1)
    }

    fn contains(&self, full: u64) -> bool {
        let key = Self::key(full);
        let mask = self.slots.len().wrapping_sub(1);
        let mut i = key as usize & mask;
        while let Some(&slot) = self.slots.get(i) {
            if slot == key {
                return true;
            }
            if slot == 0 {
                return false;
            }
            i = (i + 1) & mask;
        }
        false
    }

    /// Asks for the cache line [`Self::contains`] of `full` starts at.
    fn prefetch(&self, full: u64) {
        let mask = self.slots.len().wrapping_sub(1);
        if let Some(slot) = self.slots.get(Self::key(full) as usize & mask) {
            urlseen_filter::prefetch(slot);
        }
    }

    fn insert(&mut self, full: u64) {
        if (self.len + 1) * 2 > self.slots.len() {
            // From 4 slots, doubling (the table is made for more than FEW_HOSTS hosts).
            let size = (self.slots.len() * 2).max(4);
            let old = std::mem::replace(&mut self.slots, vec![0; size]);
            self.len = 0;
            for key in old.into_iter().filter(|&k| k != 0) {
                self.put(key);
            }
        }
        self.put(Self::key(full));
    }

    fn put(&mut self, key: u64) {
        let mask = self.slots.len() - 1;
        let mut i = key as usize & mask;
        loop {
            match self.slots[i] {
                0 => {
                    self.slots[i] = key;
                    self.len += 1;
                    return;
                }
                k if k == key => return,
                _ => i = (i + 1) & mask,
            }
        }
    }
}

/// What the dictionary says about a host and its hash, for a forget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Vouch {
    /// The host is the only one recorded under the hash: forgetting the hash forgets it alone.
    Only,
    /// No host is listed under the hash.
    Absent,
    /// Other hosts are listed under the hash (and maybe this one): their names.
    Shared(Vec<String>),
}

/// Slots of [`RECENT`].
const RECENT_SLOTS: usize = 16384;

thread_local! {
    /// Hosts this thread found listed lately, direct-mapped by their 64-bit hash mixed with
    /// their dictionary's tag: a crawl's links come mostly from a few hosts (a power law), so
    /// most URLs find their host here without the dictionary's lock or its table (128 KiB a
    /// thread). A dictionary never unlists a host, so a slot never goes stale; tags are never
    /// reused, so one dictionary's slots are not another's (except with probability 2⁻⁶⁴).
    static RECENT: [Cell<u64>; RECENT_SLOTS] = const { [const { Cell::new(0) }; RECENT_SLOTS] };
}

/// The next dictionary's number, from which its tag is made.
static NEXT_TAG: AtomicU64 = AtomicU64::new(1);

/// A tag of its own for a new dictionary: numbers spread over 64 bits (splitmix64).
fn new_tag() -> u64 {
    let mut z = NEXT_TAG.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// See the module docs.
#[derive(Debug)]
pub(super) struct HostDict {
    /// Mixed into the 64-bit hashes this dictionary puts in [`RECENT`].
    tag: u64,
    /// The names, and (past a few hosts) their 64-bit hashes; a host is listed in both, and
    /// buffered for the file, under one write lock, so one found is listed everywhere.
    names: RwLock<Map>,
    /// The `hosts` file, in a writable data directory.
    file: Option<Arc<HostsFile>>,
}

/// The `hosts` file: entries buffered by [`HostDict::note`], written and synced when the log
/// (or a counting store) is about to write or sync records that rely on them.
#[derive(Debug)]
pub(super) struct HostsFile {
    writer: Mutex<Writer>,
}

/// The `hosts` file, opened at its first write (a namespace of raw items has none).
struct Writer {
    storage: Arc<dyn Storage>,
    path: PathBuf,
    file: Option<Box<dyn AppendFile>>,
    /// Whether the file holds its header (when it is opened).
    has_header: bool,
    /// Bytes of the file written whole: where a recovery cuts it back to.
    len: u64,
    /// Entries listed and not written yet.
    pending: Vec<u8>,
    /// Whether bytes were written since the last sync.
    unsynced: bool,
    /// Why a write or sync failed: its tail is unknown, and an entry appended after it might
    /// not be read back, so nothing is written any more (the log that asked is poisoned).
    failed: Option<String>,
    /// The file is closed after each flush (see `FingerprintLog::set_detached`).
    detached: bool,
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
        if self.detached {
            self.file = None;
        }
        if let Err(e) = &result {
            self.failed =
                Some(format!("the hosts file could not be written ({e}); retried every second"));
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
                    let header = FORMAT.header();
                    file.append(&header).map_err(|e| Error::io("write", path, e))?;
                    self.has_header = true;
                    self.len += header.len() as u64;
                }
                self.file.insert(file)
            }
        };
        if !self.pending.is_empty() {
            file.append(&self.pending).map_err(|e| Error::io("write", path, e))?;
            self.len += self.pending.len() as u64;
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

impl Writer {
    /// After a failed write or sync: cuts the file back to what was written whole and opens
    /// it again at the next flush, which writes the entries still buffered.
    fn recover(&mut self) -> Result<()> {
        if self.failed.is_none() {
            return Ok(());
        }
        self.file = None;
        let path = &self.path;
        match self.len {
            0 => self.storage.remove_file(path),
            len => self.storage.truncate(path, len),
        }
        .map_err(|e| Error::io("cut the torn tail of", path, e))?;
        self.has_header = self.len > 0;
        self.unsynced = self.len > 0;
        self.failed = None;
        Ok(())
    }
}

impl crate::log::Precedes for HostsFile {
    fn flush(&self, sync: bool) -> Result<()> {
        self.writer.lock().flush(sync)
    }

    fn recover(&self) -> Result<()> {
        self.writer.lock().recover()
    }

    fn set_detached(&self, detached: bool) -> bool {
        let mut writer = self.writer.lock();
        writer.detached = detached;
        if detached {
            writer.file = None;
        }
        true
    }
}

impl HostDict {
    /// An empty dictionary that is not persisted (memory, spill, or a read-only open's extra).
    pub(super) fn in_memory() -> Self {
        HostDict { tag: new_tag(), names: RwLock::default(), file: None }
    }

    /// The dictionary of the data directory `dir`: its `hosts` file read (a torn tail cut
    /// off), and opened for appending unless `read_only`.
    ///
    /// # Errors
    /// [`Error::Io`]; [`Error::Corrupt`] for a file that is not a hosts file or of an unknown
    /// version.
    pub(super) fn open(
        storage: &Arc<dyn Storage>,
        dir: &Path,
        read_only: bool,
        seed: u64,
    ) -> Result<Self> {
        let path = dir.join("hosts");
        let bytes = storage.read(&path).map_err(|e| Error::io("read", &path, e))?;
        let mut names = Map::default();
        let mut valid = 0;
        if let Some(bytes) = &bytes {
            valid = decode(&path, bytes, &mut |hash, host| {
                let full = crate::host::host_hashes(host, seed).1;
                names.add(hash, full, host);
            })?;
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
                        len: valid as u64,
                        pending: Vec::new(),
                        unsynced: false,
                        failed: None,
                        detached: false,
                    }),
                }))
            }
        };
        Ok(HostDict { tag: new_tag(), names: RwLock::new(names), file })
    }

    /// Lists `host` under `hash` if it is not yet (in a data directory, its entry buffered
    /// for the `hosts` file, which the log writes before any record that carries `hash`).
    /// Called for every URL recorded with a host (`full` is its 64-bit host hash); costs a
    /// look at a per-thread cache when the host was met lately, and otherwise, when it is
    /// known, a read lock and one probe of a table of 64-bit hashes.
    ///
    /// # Errors
    /// [`Error::InvalidHost`] for a host longer than an entry holds (65,535 bytes).
    pub(super) fn note(&self, hash: u32, full: u64, host: &str) -> Result<()> {
        let key = full ^ self.tag;
        let slot = key as usize % RECENT_SLOTS;
        if key != 0 && RECENT.with(|r| r[slot].get() == key) {
            return Ok(());
        }
        if self.names.read().knows(full) {
            RECENT.with(|r| r[slot].set(key));
            return Ok(());
        }
        let mut names = self.names.write();
        if names.get(&hash).is_some_and(|n| n.knows(full)) {
            return Ok(());
        }
        if let Some(file) = &self.file {
            // Under the write lock: buffered before anyone can see the host listed, so before
            // any record carrying the hash can be appended to the log.
            let mut writer = file.writer.lock();
            encode(&mut writer.pending, hash, host)?;
        }
        names.add(hash, full, host);
        RECENT.with(|r| r[slot].set(key));
        Ok(())
    }

    /// [`Self::note`] for a batch of hosts (`(hash, full)` pairs), with `host(k)` giving the
    /// name of the `k`-th when it must be listed (rarely: only a host never met before).
    /// Returns the index and the error of each host that could not be listed.
    ///
    /// Batched because this runs for every URL: the per-thread cache is probed for all of
    /// them first, prefetched a few ahead, then the table for the cache's misses under one
    /// read lock, also prefetched, so their cache misses overlap instead of following one
    /// another (one by one, the two probes were 8% of `filter`'s time).
    pub(super) fn note_batch(
        &self,
        hosts: &[(u32, u64)],
        mut host: impl FnMut(usize) -> Result<String>,
    ) -> Vec<(usize, Error)> {
        const AHEAD: usize = 8;
        let slot_of = |full: u64| {
            let key = full ^ self.tag;
            (key, key as usize % RECENT_SLOTS)
        };
        let mut misses = Vec::new();
        RECENT.with(|recent| {
            for (k, &(_, full)) in hosts.iter().enumerate() {
                if let Some(&(_, ahead)) = hosts.get(k + AHEAD) {
                    urlseen_filter::prefetch(&recent[slot_of(ahead).1]);
                }
                let (key, slot) = slot_of(full);
                if key == 0 || recent[slot].get() != key {
                    misses.push(k);
                }
            }
        });
        if misses.is_empty() {
            return Vec::new();
        }
        let mut unknown = Vec::new();
        {
            let known = self.names.read();
            RECENT.with(|recent| {
                for (m, &k) in misses.iter().enumerate() {
                    if let Some(&ahead) = misses.get(m + AHEAD) {
                        known.prefetch(hosts[ahead].1);
                    }
                    let full = hosts[k].1;
                    if known.knows(full) {
                        let (key, slot) = slot_of(full);
                        recent[slot].set(key);
                    } else {
                        unknown.push(k);
                    }
                }
            });
        }
        let mut failed = Vec::new();
        for k in unknown {
            let (hash, full) = hosts[k];
            if let Err(e) = host(k).and_then(|name| self.note(hash, full, &name)) {
                failed.push((k, e));
            }
        }
        failed
    }

    /// The `hosts` file, to precede the log on disk (none in memory or read-only).
    pub(super) fn file(&self) -> Option<Arc<HostsFile>> {
        self.file.clone()
    }

    /// What is listed under `hash`, for a forget of `host`.
    pub(super) fn vouch(&self, hash: u32, host: &str) -> Vouch {
        match self.names.read().get(&hash) {
            None => Vouch::Absent,
            Some(Names::One(_, name)) if &**name == host => Vouch::Only,
            Some(Names::One(_, name)) => Vouch::Shared(vec![name.to_string()]),
            Some(Names::Shared(names)) => {
                Vouch::Shared(names.iter().map(|(_, n)| n.to_string()).collect())
            }
        }
    }

    /// Distinct hosts listed.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.names.read().values().map(|n| if let Names::Shared(v) = n { v.len() } else { 1 }).sum()
    }
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
    Format::seal(out, start);
    Ok(())
}

/// Reads the entries of a hosts file into `each`; returns the length of its valid part (the
/// header and every whole, checked entry before the first torn or corrupt one, which is a
/// torn tail to cut).
///
/// # Errors
/// [`Error::Corrupt`] for a damaged header, or for damage with sound entries after it (not a
/// torn tail: cutting it would drop them), naming the fix.
fn decode(path: &Path, bytes: &[u8], each: &mut dyn FnMut(u32, &str)) -> Result<usize> {
    let survey = survey(path, bytes)?;
    if let Some(damage) = survey.damaged_in_the_middle() {
        return Err(Error::corrupt(path, &format!("{damage}; {}", repair_advice(path))));
    }
    let mut at = HEADER;
    while at < survey.valid
        && let Some((hash, host, end)) = entry_at(bytes, at, usize::MAX)
    {
        each(hash, host);
        at = end;
    }
    Ok(survey.valid)
}

/// What [`survey`] found in a hosts file.
#[derive(Debug, Default)]
pub(super) struct Survey {
    /// The length of its valid part: the header and every sound entry before the first bad one.
    pub valid: usize,
    /// Sound entries in it.
    pub entries: usize,
    /// Bytes after the valid part that belong to no sound entry (a torn tail, or damage).
    pub bad_bytes: usize,
    /// Sound entries after the first bad one, as (start, end) byte ranges.
    pub after: Vec<(usize, usize)>,
}

impl Survey {
    /// A description of damage that is not a torn tail (sound entries follow it), if any.
    pub fn damaged_in_the_middle(&self) -> Option<String> {
        (!self.after.is_empty()).then(|| {
            format!(
                "damaged at byte {}: {} bytes that are no sound entry, with {} sound entries \
                 after them",
                self.valid,
                self.bad_bytes,
                self.after.len()
            )
        })
    }
}

/// The longest host name an entry found past damage may have: a DNS name has at most 253
/// bytes, and the bound keeps the search for the next sound entry from hashing up to 64 KiB
/// at every byte.
const RESYNC_MAX_HOST: usize = 1024;

/// Walks a hosts file: its valid part, and past the first bad entry, every sound entry that
/// can still be found (tried at every byte: an entry's checksum is 64 bits, so a false one is
/// not a concern).
///
/// # Errors
/// [`Error::Corrupt`] for a damaged header.
pub(super) fn survey(path: &Path, bytes: &[u8]) -> Result<Survey> {
    if bytes.len() < HEADER {
        // A header not yet synced: nothing was listed.
        return Ok(Survey { bad_bytes: bytes.len(), ..Survey::default() });
    }
    FORMAT.check_header(bytes).map_err(|e| Error::format(path, e))?;
    let mut s = Survey::default();
    let mut at = HEADER;
    while let Some((_, _, end)) = entry_at(bytes, at, usize::MAX) {
        s.entries += 1;
        at = end;
    }
    s.valid = at;
    let mut sound_bytes = 0;
    let mut at = at + 1;
    while at < bytes.len() {
        match entry_at(bytes, at, RESYNC_MAX_HOST) {
            Some((_, _, end)) => {
                s.after.push((at, end));
                s.entries += 1;
                sound_bytes += end - at;
                at = end;
            }
            None => at += 1,
        }
    }
    s.bad_bytes = bytes.len() - s.valid - sound_bytes;
    Ok(s)
}

/// The sound entry at byte `at` of `bytes` (of a host of at most `max_host` bytes): its hash,
/// its host, and where it ends.
fn entry_at(bytes: &[u8], at: usize, max_host: usize) -> Option<(u32, &str, usize)> {
    let head = bytes.get(at..at.checked_add(6)?)?;
    let hash = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let len = usize::from(u16::from_le_bytes([head[4], head[5]]));
    if len > max_host {
        return None;
    }
    let end = at + 6 + len;
    let (body, stored) = (bytes.get(at..end)?, bytes.get(end..end + 8)?);
    FORMAT.verify(body, stored).ok()?;
    let host = std::str::from_utf8(&body[6..]).ok()?;
    Some((hash, host, end + 8))
}

/// The bytes of a hosts file that holds every sound entry `survey` found in `bytes`.
pub(super) fn rebuilt(bytes: &[u8], survey: &Survey) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    out.extend_from_slice(&FORMAT.header());
    out.extend_from_slice(bytes.get(HEADER..survey.valid).unwrap_or_default());
    for &(start, end) in &survey.after {
        out.extend_from_slice(&bytes[start..end]);
    }
    out
}

/// How to repair a damaged hosts file at `path`, in words.
fn repair_advice(path: &Path) -> String {
    let data = path
        .parent()
        .and_then(Path::parent)
        .filter(|ns| ns.file_name().is_some_and(|n| n == "ns"))
        .and_then(Path::parent);
    let run = match data {
        Some(d) => format!("`urlseen check --data {} --repair`", d.display()),
        None => "`urlseen check --repair` on its data directory".to_owned(),
    };
    format!(
        "nothing was changed. Restore the file from a backup, or run {run}, which keeps every \
         sound entry (no URL is lost: a host whose entry was damaged is listed again when one \
         of its URLs is recorded, and until then a forget by that host refuses)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_host_under_a_hash_makes_it_shared() {
        let d = HostDict::in_memory();
        d.note(7, 70, "a.example").unwrap();
        d.note(7, 70, "a.example").unwrap();
        assert_eq!(d.vouch(7, "a.example"), Vouch::Only);
        assert_eq!(d.vouch(7, "b.example"), Vouch::Shared(vec!["a.example".into()]));
        assert_eq!(d.vouch(8, "a.example"), Vouch::Absent);
        d.note(7, 71, "b.example").unwrap();
        let both = Vouch::Shared(vec!["a.example".into(), "b.example".into()]);
        assert_eq!(d.vouch(7, "a.example"), both);
        assert_eq!(d.vouch(7, "b.example"), both);
        assert_eq!(d.len(), 2);
    }

    #[test]
    fn hosts_listed_before_the_list_becomes_a_map_stay_listed_after() {
        let d = HostDict::in_memory();
        let host = |i: u32| format!("h{i}.example");
        // Hash values collide in pairs (i / 2), so shared names cross the change too.
        for i in 0..100u32 {
            d.note(i / 2, 1_000 + u64::from(i), &host(i)).unwrap();
            for j in 0..=i {
                assert!(d.names.read().knows(1_000 + u64::from(j)), "{j} after {i}");
            }
            assert!(!d.names.read().knows(5), "only what was listed");
            assert_eq!(d.len(), i as usize + 1);
        }
        assert!(matches!(*d.names.read(), Map::Many(_)));
        let pair = Vouch::Shared(vec![host(10), host(11)]);
        assert_eq!(d.vouch(5, &host(10)), pair);
        assert_eq!(d.vouch(60, &host(1)), Vouch::Absent);
        // A batch finds every listed host, and names only the new one.
        let mut named = Vec::new();
        let hosts: Vec<(u32, u64)> = (0..101u32).map(|i| (i / 2, 1_000 + u64::from(i))).collect();
        let failed = d.note_batch(&hosts, |k| {
            named.push(k);
            Ok(host(k as u32))
        });
        assert!(failed.is_empty());
        assert_eq!(named, [100]);
        assert_eq!(d.vouch(50, &host(100)), Vouch::Only);
    }

    #[test]
    fn the_table_of_known_hashes_finds_every_one_inserted_and_no_other() {
        let mut k = Known::default();
        assert!(!k.contains(5));
        for i in 0..10_000u64 {
            k.insert(i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        }
        k.insert(0);
        assert!((0..10_000u64).all(|i| k.contains(i.wrapping_mul(0x9e37_79b9_7f4a_7c15))));
        assert!((10_000..20_000u64).all(|i| !k.contains(i.wrapping_mul(0x9e37_79b9_7f4a_7c15))));
        assert!(k.contains(0) && k.contains(1), "0 is kept as 1");
        assert!(k.slots.len() >= 2 * k.len);
    }

    #[test]
    fn entries_round_trip_and_a_torn_tail_ends_the_file() {
        let mut bytes = FORMAT.header().to_vec();
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
        // Damage with sound entries after it is not a torn tail: refused, nothing cut, and
        // the survey finds what a repair keeps.
        let first = FORMAT.header().len();
        let mut middle = bytes.clone();
        middle[first + 3] ^= 1;
        let err = decode(p, &middle, &mut |_, _| {}).unwrap_err();
        assert!(
            err.to_string().contains("--repair") && err.to_string().contains("byte 10"),
            "{err}"
        );
        let survey = survey(p, &middle).unwrap();
        assert_eq!((survey.valid, survey.entries, survey.after.len()), (first, 2, 2));
        let mut kept = Vec::new();
        decode(p, &rebuilt(&middle, &survey), &mut |h, s| kept.push((h, s.to_owned()))).unwrap();
        assert_eq!(kept, [(1, "b.example".to_owned()), (2, "c.example".to_owned())]);
        let mut newer = bytes;
        newer[8] = 9;
        assert!(matches!(
            decode(p, &newer, &mut |_, _| {}),
            Err(Error::UnsupportedVersion { found: 9, .. })
        ));
    }
}
