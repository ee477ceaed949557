//! Key lifetimes: when each namespace expires, as a Redis key's `EXPIRE` (absolute, in Unix
//! milliseconds of the `Db`'s clock, [`DbOptions::clock`](crate::DbOptions)).
//!
//! A namespace past its time is gone for every call at once, before anything frees it: a
//! lookup ([`Db::namespace`], [`Db::namespace_names`], a create of its name, …) finds it due and
//! drops it (lazily, as Redis). A thread drops due namespaces every 100 ms without any call
//! touching them (actively, as Redis's expire cycle): it finds them in an index ordered by time,
//! so each costs O(log N) in the namespaces that expire, and no namespace is ever walked.
//!
//! # Persistence
//! A persistent `Db` keeps the times in one file for all its namespaces, replayed at open, so
//! that a restart reads no namespace to learn when it expires:
//!
//! ```text
//! DIR/expires   "URLSEENX", version u16, then one record per change:
//!               length u16 | name (length bytes, UTF-8) | at u64 LE (Unix ms; 0: none) |
//!               xxh3_64 of the three, u64 LE
//! ```
//! The last record of a name wins. A record is written when a time is set or removed, and when
//! a namespace is created under a name that had one (so that it does not inherit it); a drop
//! writes nothing (a time whose namespace is gone is ignored at open). The file follows the
//! `Db`'s fsync policy: `always` syncs before the call returns, `everysec` once a second, `no`
//! never. A damaged or torn record ends the file: it and what follows are cut at the next open
//! (a torn tail was never acknowledged under `always`). The file is rewritten (temporary file,
//! then rename) once it holds more than twice as many records as live times.
//!
//! A namespace found past its time at open is dropped then (its directory removed).
//!
//! # Memory
//! Nothing for a namespace without a time, and no work on its lookups (one atomic load). A
//! namespace with a time costs its name twice over (one shared allocation) and two entries,
//! in a hash map and an ordered set: about 100 bytes plus its name's length.
//!
//! ```
//! use urlseen_engine::{Db, DbOptions, Expiry, FakeClock, NamespaceOptions};
//! let clock = FakeClock::at(1_700_000_000_000);
//! let db = Db::in_memory_with(DbOptions { clock: clock.clone(), ..Default::default() });
//! let job = NamespaceOptions { capacity: 1_000, ..Default::default() };
//! db.create_namespace_with_expiry("job:42", job, Expiry::At(1_700_000_060_000))?;
//! assert_eq!(db.expiry("job:42"), Some(Expiry::At(1_700_000_060_000)));
//! clock.set(1_700_000_060_000);
//! assert!(db.namespace("job:42").is_none()); // gone for every call at once
//! # Ok::<(), urlseen_engine::Error>(())
//! ```

use std::collections::{BTreeSet, HashMap, HashSet};

use super::catalog::NameHash;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use urlseen_filter::frame::{Format, HEADER_LEN};

use super::{Db, Inner, MAX_NAME_LEN};
use crate::error::{Error, Result};
use crate::log::Fsync;
use crate::namespace::Namespace;
use crate::options::NamespaceOptions;
use crate::storage::{AppendFile, Storage};

const FORMAT: Format = Format { name: "expiry file", magic: *b"URLSEENX", version: 1, oldest: 1 };

/// The file's name in a data directory.
pub(super) const FILE: &str = "expires";

/// How often the active cycle runs.
const CYCLE: Duration = Duration::from_millis(100);

/// Most namespaces one cycle drops before it lets other work at the locks (the next cycle
/// goes on).
const CYCLE_LIMIT: usize = 10_000;

/// Records below which the file is never rewritten.
const COMPACT_MIN_RECORDS: u64 = 1024;

/// When a namespace expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Expiry {
    /// Never (Redis's `TTL` answers -1).
    Never,
    /// At this time, in milliseconds since the Unix epoch of the `Db`'s clock.
    At(u64),
}

impl Expiry {
    /// The time, if any.
    pub fn at(self) -> Option<u64> {
        match self {
            Expiry::Never => None,
            Expiry::At(at) => Some(at),
        }
    }
}

/// The expiry times of a `Db`'s namespaces, and their file.
#[derive(Debug)]
pub(super) struct Expiries {
    state: RwLock<State>,
    /// Names with a time: lookups skip the lock while there are none.
    count: AtomicUsize,
    /// Bumped whenever a time is set or removed, or a namespace is dropped because it expired.
    epoch: AtomicU64,
    /// Namespaces dropped because they expired (Redis's `expired_keys`).
    expired: AtomicU64,
    file: Option<Mutex<ExpiryFile>>,
    /// The active cycle's thread runs (started with the first time).
    cycling: AtomicBool,
    /// `State::stale` is not empty: creates must look at it.
    has_stale: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    at: HashMap<Arc<str>, u64, NameHash>,
    by_time: BTreeSet<(u64, Arc<str>)>,
    /// The sum of every time in `at`, for the average time to live.
    sum: u128,
    /// Names the file may still give a time to (their namespace was dropped): a create of one
    /// writes a record that removes it.
    stale: HashSet<Arc<str>, NameHash>,
}

impl State {
    fn get(&self, name: &str) -> Option<u64> {
        self.at.get(name).copied()
    }

    fn set(&mut self, name: &str, at: Option<u64>) {
        if let Some((key, old)) = self.at.remove_entry(name) {
            self.by_time.remove(&(old, Arc::clone(&key)));
            self.sum -= u128::from(old);
        }
        if let Some(at) = at {
            let key: Arc<str> = Arc::from(name);
            self.by_time.insert((at, Arc::clone(&key)));
            self.at.insert(key, at);
            self.sum += u128::from(at);
        }
    }
}

#[derive(Debug)]
struct ExpiryFile {
    storage: Arc<dyn Storage>,
    path: PathBuf,
    policy: Fsync,
    /// Opened at the first record (a `Db` that never sets a time makes no file).
    append: Option<Box<dyn AppendFile>>,
    /// Records in the file.
    records: u64,
    unsynced: bool,
    /// A failed write or sync: every later write is refused (the file's tail is unknown).
    failed: Option<String>,
}

impl ExpiryFile {
    fn write(&mut self, record: &[u8]) -> Result<()> {
        if let Some(reason) = &self.failed {
            return Err(Error::Poisoned { reason: reason.clone() });
        }
        let written = (|| {
            if self.append.is_none() {
                let mut file = self.storage.open_append(&self.path)?;
                if self.storage.file_len(&self.path)?.unwrap_or(0) == 0 {
                    file.append(&FORMAT.header())?;
                }
                self.append = Some(file);
            }
            match &mut self.append {
                Some(file) => file.append(record),
                None => Ok(()),
            }
        })();
        match written {
            Ok(()) => {
                self.records += 1;
                self.unsynced = true;
                Ok(())
            }
            Err(e) => Err(self.fail("write", e)),
        }
    }

    fn sync(&mut self) -> Result<()> {
        if let Some(reason) = &self.failed {
            return Err(Error::Poisoned { reason: reason.clone() });
        }
        if !self.unsynced {
            return Ok(());
        }
        let Some(file) = &mut self.append else { return Ok(()) };
        match file.sync() {
            Ok(()) => {
                self.unsynced = false;
                Ok(())
            }
            Err(e) => Err(self.fail("sync", e)),
        }
    }

    fn fail(&mut self, what: &str, e: std::io::Error) -> Error {
        let error = Error::io(what, &self.path, e);
        self.failed = Some(error.to_string());
        self.append = None;
        error
    }

    /// Rewrites the file with `live` only.
    fn compact(&mut self, live: &HashMap<Arc<str>, u64, NameHash>) -> Result<()> {
        if self.failed.is_some() {
            return Ok(());
        }
        let mut bytes = FORMAT.header().to_vec();
        for (name, &at) in live {
            encode(&mut bytes, name, at);
        }
        self.storage
            .write_atomic(&self.path, &bytes)
            .map_err(|e| Error::io("rewrite", &self.path, e))?;
        // The handle still points at the replaced file.
        self.append = None;
        self.records = live.len() as u64;
        self.unsynced = false;
        Ok(())
    }
}

fn encode(out: &mut Vec<u8>, name: &str, at: u64) {
    let start = out.len();
    // Names are at most `MAX_NAME_LEN` (512) bytes.
    let len = u16::try_from(name.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&at.to_le_bytes());
    Format::seal(out, start);
}

/// The sound record at `at`: its name, its time, and where it ends.
fn record_at(bytes: &[u8], at: usize) -> Option<(&str, u64, usize)> {
    let len = usize::from(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?));
    if len == 0 || len > MAX_NAME_LEN {
        return None;
    }
    let body_end = at + 2 + len + 8;
    let body = bytes.get(at..body_end)?;
    FORMAT.verify(body, bytes.get(body_end..body_end + 8)?).ok()?;
    let name = std::str::from_utf8(&body[2..2 + len]).ok()?;
    let time = u64::from_le_bytes(body[2 + len..].try_into().ok()?);
    Some((name, time, body_end + 8))
}

/// The records of a file, in order, and the length of its valid part.
fn decode(path: &Path, bytes: &[u8]) -> Result<(Vec<(String, u64)>, usize)> {
    if bytes.len() < HEADER_LEN {
        // A header that was never synced: nothing was recorded.
        return Ok((Vec::new(), 0));
    }
    FORMAT.check_header(bytes).map_err(|e| Error::format(path, e))?;
    let mut records = Vec::new();
    let mut at = HEADER_LEN;
    while let Some((name, time, end)) = record_at(bytes, at) {
        records.push((name.to_owned(), time));
        at = end;
    }
    Ok((records, at))
}

impl Expiries {
    /// No times, no file (a `Db` in memory).
    pub(super) fn in_memory() -> Self {
        Self::with(State::default(), None)
    }

    fn with(state: State, file: Option<ExpiryFile>) -> Self {
        Expiries {
            count: AtomicUsize::new(state.at.len()),
            state: RwLock::new(state),
            epoch: AtomicU64::new(0),
            expired: AtomicU64::new(0),
            file: file.map(Mutex::new),
            cycling: AtomicBool::new(false),
            has_stale: AtomicBool::new(false),
        }
    }

    /// The times of the data directory `root`: its file replayed (a torn tail cut off unless
    /// `read_only`).
    ///
    /// # Errors
    /// [`Error::Io`]; [`Error::Corrupt`] for a file that is not an expiry file or of an unknown
    /// version.
    pub(super) fn open(
        storage: &Arc<dyn Storage>,
        root: &Path,
        policy: Fsync,
        read_only: bool,
    ) -> Result<Self> {
        let path = root.join(FILE);
        let bytes = storage.read(&path).map_err(|e| Error::io("read", &path, e))?;
        let mut state = State::default();
        let mut records = 0;
        if let Some(bytes) = &bytes {
            let (found, valid) = decode(&path, bytes)?;
            records = found.len() as u64;
            for (name, at) in found {
                state.set(&name, (at != 0).then_some(at));
            }
            if valid < bytes.len() && !read_only {
                storage
                    .truncate(&path, valid as u64)
                    .map_err(|e| Error::io("truncate", &path, e))?;
            }
        }
        let file = (!read_only).then(|| ExpiryFile {
            storage: Arc::clone(storage),
            path,
            policy,
            append: None,
            records,
            unsynced: false,
            failed: None,
        });
        Ok(Self::with(state, file))
    }

    /// Forgets the times of names `exists` does not know (namespaces dropped before the
    /// restart), rewriting the file if there were any.
    pub(super) fn retain(&self, exists: impl Fn(&str) -> bool) -> Result<()> {
        let mut state = self.state.write();
        let gone: Vec<Arc<str>> = state.at.keys().filter(|n| !exists(n)).cloned().collect();
        for name in &gone {
            state.set(name, None);
        }
        self.count.store(state.at.len(), Ordering::Release);
        match &self.file {
            Some(file) if !gone.is_empty() => file.lock().compact(&state.at),
            _ => Ok(()),
        }
    }

    pub(super) fn is_due_at(&self, name: &str, now: u64) -> bool {
        self.count.load(Ordering::Acquire) > 0
            && self.state.read().get(name).is_some_and(|at| at <= now)
    }

    /// Names whose time is `now` or before, earliest first, at most `limit`.
    fn due(&self, now: u64, limit: usize) -> Vec<Arc<str>> {
        if self.count.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let state = self.state.read();
        state
            .by_time
            .iter()
            .take_while(|(at, _)| *at <= now)
            .take(limit)
            .map(|(_, n)| Arc::clone(n))
            .collect()
    }

    /// Sets or removes the time of `name` (whose namespace exists: the caller holds the map),
    /// recording it in the file. Returns whether the file must be synced before answering.
    fn set_locked(&self, state: &mut State, name: &str, at: Option<u64>) -> Result<bool> {
        let sync = match &self.file {
            Some(file) => {
                let mut record = Vec::with_capacity(name.len() + 18);
                encode(&mut record, name, at.unwrap_or(0));
                let mut file = file.lock();
                file.write(&record)?;
                file.policy.commit_syncs()
            }
            None => false,
        };
        state.set(name, at);
        state.stale.remove(name);
        self.count.store(state.at.len(), Ordering::Release);
        self.epoch.fetch_add(1, Ordering::AcqRel);
        Ok(sync)
    }

    /// Hook: namespace `name` is being created (the caller holds the map's write lock). A time
    /// left from an earlier namespace of that name is removed, in the file too.
    pub(super) fn created(&self, name: &str) -> Result<()> {
        if self.count.load(Ordering::Acquire) == 0 && !self.has_stale.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut state = self.state.write();
        if state.get(name).is_none() && !state.stale.contains(name) {
            return Ok(());
        }
        let sync = self.set_locked(&mut state, name, None)?;
        drop(state);
        if sync { self.sync() } else { Ok(()) }
    }

    /// Hook: namespace `name` was removed from the map (the caller holds its write lock). Its
    /// time goes, without a write: at open, a time of a namespace that is not there is ignored.
    pub(super) fn dropped(&self, name: &str) {
        if self.count.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut state = self.state.write();
        if state.get(name).is_some() {
            state.set(name, None);
            if self.file.is_some() {
                state.stale.insert(Arc::from(name));
                self.has_stale.store(true, Ordering::Release);
            }
            self.count.store(state.at.len(), Ordering::Release);
            self.epoch.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Syncs the file.
    pub(super) fn sync(&self) -> Result<()> {
        match &self.file {
            Some(file) => file.lock().sync(),
            None => Ok(()),
        }
    }

    /// The background part of a cycle: sync under `everysec`, rewrite a file mostly made of
    /// superseded records.
    fn maintain(&self, sync_due: bool) {
        let Some(file) = &self.file else { return };
        if sync_due && file.lock().policy.syncs_every_second() {
            // A failure poisons the file; the next write reports it.
            let _ = file.lock().sync();
        }
        // Under the write lock: a name dropped meanwhile must stay stale, or not be in the file.
        let mut state = self.state.write();
        let mut file = file.lock();
        if file.records > COMPACT_MIN_RECORDS
            && file.records > 2 * state.at.len() as u64
            && file.compact(&state.at).is_ok()
        {
            state.stale.clear();
            self.has_stale.store(false, Ordering::Release);
        }
    }
}

/// What [`Db::update_expiry`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpiryUpdate {
    /// No such namespace (or it had expired): nothing was done.
    Missing,
    /// The namespace exists; the decision left its time as it was.
    Kept,
    /// The time was set or removed.
    Changed,
    /// The time given was not in the future: the namespace was dropped (as Redis deletes a key
    /// given a time in the past).
    Dropped,
}

impl Db {
    /// When namespace `name` expires; `None` if there is no such namespace.
    pub fn expiry(&self, name: &str) -> Option<Expiry> {
        let map = self.inner.namespaces.read();
        if self.inner.expiries.count.load(Ordering::Acquire) == 0 {
            return map.contains(name).then_some(Expiry::Never);
        }
        let state = self.inner.expiries.state.read();
        if !map.contains(name) {
            return None;
        }
        match state.get(name) {
            Some(at) if at <= self.now() => None,
            Some(at) => Some(Expiry::At(at)),
            None => Some(Expiry::Never),
        }
    }

    /// Sets when namespace `name` expires ([`Expiry::Never`]: it never does). A time that is
    /// not in the future drops it now. Returns whether it existed.
    ///
    /// # Errors
    /// In a persistent `Db`, [`Error::Io`] or [`Error::Poisoned`] from the expiry file: a
    /// failed write changes nothing; after a failed sync (`always`) the new time is in effect
    /// but may not survive a power loss, and every later change is refused until the `Db` is
    /// reopened. [`Error::ReadOnly`].
    pub fn set_expiry(&self, name: &str, expiry: Expiry) -> Result<bool> {
        Ok(self.update_expiry(name, |_| Some(expiry))? != ExpiryUpdate::Missing)
    }

    /// Changes when namespace `name` expires, as `decide` says given its current time, in one
    /// step that no other call can come between (Redis's `EXPIRE … NX|XX|GT|LT`, `PERSIST`):
    /// `decide` returns the new time, or `None` to keep it. A new time that is not in the
    /// future drops the namespace.
    ///
    /// # Errors
    /// As [`Db::set_expiry`].
    pub fn update_expiry(
        &self,
        name: &str,
        decide: impl FnOnce(Expiry) -> Option<Expiry>,
    ) -> Result<ExpiryUpdate> {
        self.refuse_if_read_only()?;
        let inner = &self.inner;
        let now = self.now();
        let map = inner.namespaces.read();
        if !map.contains(name) {
            return Ok(ExpiryUpdate::Missing);
        }
        let mut state = inner.expiries.state.write();
        let current = match state.get(name) {
            Some(at) if at <= now => {
                drop((state, map));
                self.expire(name);
                return Ok(ExpiryUpdate::Missing);
            }
            Some(at) => Expiry::At(at),
            None => Expiry::Never,
        };
        let Some(new) = decide(current) else { return Ok(ExpiryUpdate::Kept) };
        if new == current {
            return Ok(ExpiryUpdate::Changed);
        }
        let sync = inner.expiries.set_locked(&mut state, name, new.at())?;
        drop((state, map));
        if sync {
            inner.expiries.sync()?;
        }
        if let Expiry::At(at) = new {
            if at <= now {
                // Recorded first, so a crash before the drop finishes drops it at open; and
                // dropped only if still due, so a namespace made anew meanwhile stays.
                inner.drop_published(name, Some(now))?;
                return Ok(ExpiryUpdate::Dropped);
            }
            self.start_expiry_cycle();
        }
        Ok(ExpiryUpdate::Changed)
    }

    /// [`Db::create_namespace`] with a lifetime: the namespace expires at `expiry`.
    ///
    /// # Errors
    /// As [`Db::create_namespace`] and [`Db::set_expiry`].
    pub fn create_namespace_with_expiry(
        &self,
        name: &str,
        options: NamespaceOptions,
        expiry: Expiry,
    ) -> Result<Arc<Namespace>> {
        let ns = self.create_namespace(name, options)?;
        if expiry != Expiry::Never {
            self.set_expiry(name, expiry)?;
        }
        Ok(ns)
    }

    /// Namespaces with a time (Redis's `expires` in `INFO keyspace`), and the average time
    /// they have left, in ms (0 if none).
    pub fn expiry_stats(&self) -> (usize, u64) {
        let expiries = &self.inner.expiries;
        if expiries.count.load(Ordering::Acquire) == 0 {
            return (0, 0);
        }
        let state = expiries.state.read();
        let n = state.at.len();
        if n == 0 {
            return (0, 0);
        }
        let avg = state.sum / n as u128;
        (n, u64::try_from(avg).unwrap_or(u64::MAX).saturating_sub(self.now()))
    }

    /// Namespaces dropped because they expired, since the `Db` was opened (Redis's
    /// `expired_keys`).
    pub fn expired_count(&self) -> u64 {
        self.inner.expiries.expired.load(Ordering::Acquire)
    }

    /// A number that changes whenever a namespace's time is set or removed, or a namespace is
    /// dropped because it expired: a cache of namespaces and their times compares it.
    pub fn expiry_epoch(&self) -> u64 {
        self.inner.expiries.epoch.load(Ordering::Acquire)
    }

    fn now(&self) -> u64 {
        self.inner.options.clock.now_millis()
    }

    /// Hook of every lookup: whether `name` is past its time; if so it is dropped (unless the
    /// `Db` is read-only, where it is only hidden).
    pub(super) fn expired(&self, name: &str) -> bool {
        // No clock read while no namespace has a time: this runs on every lookup.
        if self.inner.expiries.count.load(Ordering::Acquire) == 0
            || !self.inner.expiries.is_due_at(name, self.now())
        {
            return false;
        }
        self.expire(name);
        true
    }

    fn expire(&self, name: &str) {
        if !self.inner.read_only {
            // A failure to remove its files leaves them for the next open; the name is gone.
            let _ = self.inner.drop_if_due(name, self.now());
        }
    }

    /// Hook of listings: drops every namespace past its time.
    pub(super) fn expire_due(&self) {
        if self.inner.read_only {
            return;
        }
        let now = self.now();
        for name in self.inner.expiries.due(now, usize::MAX) {
            let _ = self.inner.drop_if_due(&name, now);
        }
    }

    /// Whether `name` is past its time (for listings of a read-only `Db`, which drop nothing).
    pub(super) fn is_due(&self, name: &str) -> bool {
        self.inner.expiries.is_due_at(name, self.now())
    }

    /// Hook of open: forgets the times of namespaces that are gone, drops those past their
    /// time, and starts the active cycle if any time is left.
    pub(super) fn open_expiries(&self) -> Result<()> {
        {
            let map = self.inner.namespaces.read();
            self.inner.expiries.retain(|name| map.contains(name))?;
        }
        self.expire_due();
        if self.inner.expiries.count.load(Ordering::Acquire) > 0 {
            self.start_expiry_cycle();
        }
        Ok(())
    }

    /// Starts the thread that drops due namespaces every 100 ms (once per `Db`).
    fn start_expiry_cycle(&self) {
        if self.inner.read_only || self.inner.expiries.cycling.swap(true, Ordering::AcqRel) {
            return;
        }
        spawn_cycle(Arc::downgrade(&self.inner), Arc::clone(&self.inner.busy));
    }
}

impl Inner {
    /// Drops namespace `name` if it is past its time at `now` (checked under the map's lock,
    /// so that a namespace created anew under the name meanwhile is left alone).
    fn drop_if_due(&self, name: &str, now: u64) -> Result<bool> {
        let dropped = self.drop_published(name, Some(now))?;
        if dropped {
            self.expiries.expired.fetch_add(1, Ordering::AcqRel);
        }
        Ok(dropped)
    }
}

/// The active expire cycle: every 100 ms, drops the namespaces past their time; every second,
/// syncs the file (`everysec`) and rewrites it when it is mostly superseded records. Holds the
/// `Db` only while it works, and never while the `Db` is being closed.
fn spawn_cycle(db: Weak<Inner>, busy: Arc<Mutex<()>>) {
    let _ = std::thread::Builder::new().name("urlseen-expire".into()).spawn(move || {
        let mut tick = 0u64;
        loop {
            std::thread::sleep(CYCLE);
            tick += 1;
            if db.strong_count() == 0 {
                return;
            }
            // The housekeeping thread or a close holds it: try again next time.
            let Some(_busy) = busy.try_lock() else { continue };
            let Some(inner) = db.upgrade() else { return };
            if inner.closed.load(Ordering::Acquire) {
                return;
            }
            let now = inner.options.clock.now_millis();
            for name in inner.expiries.due(now, CYCLE_LIMIT) {
                let _ = inner.drop_if_due(&name, now);
            }
            inner.expiries.maintain(tick.is_multiple_of(10));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_a_torn_tail_ends_the_file() {
        let mut bytes = FORMAT.header().to_vec();
        encode(&mut bytes, "job:1", 1_000);
        encode(&mut bytes, "job:2", 0);
        let whole = bytes.len();
        encode(&mut bytes, "job:3", 5);
        bytes.truncate(bytes.len() - 3);
        let path = Path::new("expires");
        let (records, valid) = decode(path, &bytes).unwrap();
        assert_eq!(records, vec![("job:1".to_owned(), 1_000), ("job:2".to_owned(), 0)]);
        assert_eq!(valid, whole);
        // A flipped bit ends it too.
        bytes[HEADER_LEN + 3] ^= 1;
        assert_eq!(decode(path, &bytes).unwrap(), (Vec::new(), HEADER_LEN));
        assert!(matches!(decode(path, b"NOTURLSEEN"), Err(Error::Corrupt { .. })));
    }
}
