//! Recrawl windows: a URL recorded more than `W` ago is new again.
//!
//! A namespace with [`NamespaceOptions::recrawl_after`] `= Some(W)` keeps `g`
//! ([`NamespaceOptions::generations`]) *generations*, each a whole DSBF of its own (its own
//! leaves, log, snapshot and splits). Time is cut into slots of `W/g`, aligned on the Unix
//! epoch; a URL recorded in slot `s` goes to the generation of slot `s`, and that generation
//! lives until `s + W`. A URL found in any live generation is seen; a URL found in none is new,
//! and is recorded in the current one. When a generation's time is up it is dropped whole:
//! its filters are freed and its files deleted, so memory and disk are flat in steady state.
//!
//! ```text
//!   slot:   s-7  s-6  s-5  s-4  s-3  s-2  s-1   s  (now)
//!          [ g0 | g1 | g2 | g3 | g4 | g5 | g6 | g7 ]   g = 8 live generations, g7 takes writes
//!            └ dropped when now reaches its start + W
//! ```
//!
//! # Guarantees
//! - A URL recorded at `t` is answered "seen" until at least `t + W − W/g`, and "new" from
//!   `t + W` on (it was recorded in slot `[s, s + W/g)` and its generation lives until `s + W`).
//! - No false negatives within that time, exactly one "new" per URL per window under
//!   concurrency: a check-and-insert holds the generation list shared while it looks at the old
//!   generations and records in the current one, and a rotation holds it exclusively.
//! - The FPR of the union of `g` generations, each kept under `f_g` by its own splits, is at
//!   most `1 − (1 − f_g)^g`; with `f_g = 1 − (1 − f)^(1/g)` ([`generation_fpr`]) that is `f`.
//! - Ages are wall-clock times (the [`Clock`] of [`DbOptions`]), kept in the
//!   generations' directory names, so they survive restarts; a generation that expired while
//!   the `Db` was closed is deleted when it opens.
//!
//! See `docs/recrawl.md` for the sizing and a worked example.

use std::any::Any;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{RwLock, RwLockReadGuard, RwLockUpgradableReadGuard};
use serde::Serialize;

pub use crate::clock::{Clock, FakeClock, SystemClock};
pub use crate::options::{MAX_GENERATIONS, MAX_WINDOW_MS, generation_fpr};

use crate::error::{Error, Result};
use crate::leaf_log::{LeafFiles, LeafStore};
use crate::namespace::host_dict::HostDict;
use crate::namespace::persist::{self, Access, DbOptions};
use crate::namespace::reservation::Reservation;
use crate::namespace::{HandOn, Namespace};
use crate::options::NamespaceOptions;
use crate::tree::SplitWorkers;

/// The directory of a window's generations, inside its namespace directory.
pub(super) const GENERATIONS_DIR: &str = "gen";

/// What a generation directory is renamed to while it is deleted.
const DROPPED_SUFFIX: &str = ".dropped.tmp";

/// One generation: the URLs first recorded in the slot that starts at `start`.
#[derive(Debug)]
struct Generation {
    /// Start of its slot, in milliseconds since the Unix epoch.
    start: u64,
    ns: Arc<Namespace>,
}

/// Where a window's generations live.
pub(super) enum Home {
    /// On the heap (`Db::in_memory`).
    Memory { workers: Arc<SplitWorkers> },
    /// Leaf files in a spill directory (`Db::temporary`): `dir/gen/<start>/leaves`.
    Spill {
        workers: Arc<SplitWorkers>,
        db: DbOptions,
        dir: PathBuf,
        keep: Arc<dyn Any + Send + Sync>,
    },
    /// A data directory: each generation a namespace directory of its own, `dir/gen/<start>`.
    Dir { workers: Arc<SplitWorkers>, db: DbOptions, dir: PathBuf, access: Access },
}

impl fmt::Debug for Home {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Home::Memory { .. } => f.write_str("Memory"),
            Home::Spill { dir, .. } => f.debug_struct("Spill").field("dir", dir).finish(),
            Home::Dir { dir, access, .. } => {
                f.debug_struct("Dir").field("dir", dir).field("access", access).finish()
            }
        }
    }
}

/// A namespace's generations (see the module docs).
#[derive(Debug)]
pub(super) struct Generations {
    name: String,
    /// `W`, in milliseconds.
    window: u64,
    /// `W/g`, in milliseconds.
    span: u64,
    count: u32,
    /// Each generation's options.
    options: NamespaceOptions,
    clock: Arc<dyn Clock>,
    home: Home,
    /// Oldest first; the last takes writes while its slot lasts.
    live: RwLock<Vec<Generation>>,
    /// The hosts of every generation's records: one dictionary for the window, in its
    /// namespace directory (`hosts`), which precedes each generation's log on disk.
    hosts: Arc<HostDict>,
}

/// One generation in [`RecrawlReport`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GenerationReport {
    /// Start of its slot, in milliseconds since the Unix epoch.
    pub start_ms: u64,
    /// How long ago its slot started, in seconds.
    pub age_secs: f64,
    /// URLs recorded in it.
    pub count: u64,
    /// Its filters' RAM (and in memory, its leaf logs), in bytes.
    pub memory_bytes: u64,
    /// Its files, in bytes.
    pub disk_bytes: u64,
    /// Its worst leaf's estimated FPR (at most `generation_fpr`).
    pub worst_leaf_fpr: f64,
}

/// A recrawl window in [`NamespaceStats`](crate::NamespaceStats).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecrawlReport {
    /// The window `W`, in seconds.
    pub window_secs: f64,
    /// Generations `g`.
    pub generations: u32,
    /// Each generation's FPR bound, `1 − (1 − fpr)^(1/g)`.
    pub generation_fpr: f64,
    /// The live generations, oldest first.
    pub live: Vec<GenerationReport>,
}

impl Generations {
    /// A new window (no generation yet: the first write makes one).
    pub(super) fn new(
        name: &str,
        options: &NamespaceOptions,
        clock: Arc<dyn Clock>,
        home: Home,
    ) -> Result<Self> {
        let Some(window) = options.recrawl_after else {
            return Err(Error::InvalidOption {
                name: "recrawl_after",
                reason: "a namespace without a window has no generations".into(),
            });
        };
        options.validate()?;
        let window = window.as_millis() as u64;
        let count = options.generations;
        let hosts = match &home {
            Home::Dir { db, dir, access, .. } => {
                HostDict::open(&db.storage, dir, *access == Access::ReadOnly, options.seed)?
            }
            Home::Memory { .. } | Home::Spill { .. } => HostDict::in_memory(),
        };
        Ok(Generations {
            name: name.to_owned(),
            window,
            span: window / u64::from(count),
            count,
            options: options.generation_options(),
            clock,
            home,
            live: RwLock::new(Vec::new()),
            hosts: Arc::new(hosts),
        })
    }

    /// A window read back from `dir` (its meta already read): every generation directory in
    /// `dir/gen`, recovered; those expired are deleted (read-only: skipped), and unfinished
    /// deletes finished.
    pub(super) fn recover(
        name: &str,
        options: &NamespaceOptions,
        dir: &Path,
        db: &DbOptions,
        workers: &Arc<SplitWorkers>,
        access: Access,
    ) -> Result<Self> {
        let home =
            Home::Dir { workers: Arc::clone(workers), db: db.clone(), dir: dir.into(), access };
        let gens = Self::new(name, options, Arc::clone(&db.clock), home)?;
        let root = dir.join(GENERATIONS_DIR);
        let storage = &db.storage;
        let mut entries = match storage.list(&root) {
            Ok(entries) => entries,
            Err(e) => return Err(Error::io("list", &root, e)),
        };
        entries.sort();
        let now = gens.clock.now_millis();
        let mut live = Vec::new();
        for entry in entries {
            let path = root.join(&entry);
            if entry.ends_with(".tmp") {
                if access == Access::ReadWrite {
                    storage.remove_dir_all(&path).map_err(|e| Error::io("remove", &path, e))?;
                }
                continue;
            }
            let Ok(start) = entry.parse::<u64>() else {
                return Err(Error::corrupt(
                    &path,
                    "not a generation directory (its name is not a start time); move it out of \
                     the namespace directory",
                ));
            };
            if gens.expired(start, now) {
                if access == Access::ReadWrite {
                    remove_dir(db, &path)?;
                }
                continue;
            }
            match persist::recover(&path, db, workers, access)? {
                persist::Opened::Namespace(r) => {
                    let hosts = Arc::clone(&gens.hosts);
                    let ns = Namespace::with_hosts(r.name, r.options, r.set, r.backing, hosts)?;
                    live.push(Generation { start, ns: Arc::new(ns) });
                }
                persist::Opened::Unfinished => {}
            }
        }
        live.sort_by_key(|g| g.start);
        *gens.live.write() = live;
        Ok(gens)
    }

    fn expired(&self, start: u64, now: u64) -> bool {
        start.saturating_add(self.window) <= now
    }

    /// The slot `now` falls in.
    fn slot(&self, now: u64) -> u64 {
        now - now % self.span
    }

    /// The generation list, with a current generation for `now` and none expired: rotated
    /// first if needed (under the exclusive lock, which waits for every write under way).
    fn for_write(&self, now: u64) -> Result<RwLockReadGuard<'_, Vec<Generation>>> {
        if let Home::Dir { access: Access::ReadOnly, dir, .. } = &self.home {
            return Err(Error::ReadOnly {
                path: dir.clone(),
                what: "a recrawl window takes no writes when opened read-only",
            });
        }
        let live = self.live.upgradable_read();
        let fresh = live.last().is_some_and(|g| now < g.start.saturating_add(self.span))
            && live.first().is_none_or(|g| !self.expired(g.start, now));
        if fresh {
            return Ok(RwLockUpgradableReadGuard::downgrade(live));
        }
        let mut live = RwLockUpgradableReadGuard::upgrade(live);
        self.drop_expired(&mut live, now)?;
        if live.last().is_none_or(|g| now >= g.start.saturating_add(self.span)) {
            let start = self.slot(now).max(live.last().map_or(0, |g| g.start + self.span));
            let ns = self.make(start)?;
            live.push(Generation { start, ns: Arc::new(ns) });
        }
        Ok(parking_lot::RwLockWriteGuard::downgrade(live))
    }

    /// Drops the generations whose time is up, and deletes their files.
    fn drop_expired(&self, live: &mut Vec<Generation>, now: u64) -> Result<()> {
        while let Some(oldest) = live.first() {
            if !self.expired(oldest.start, now) {
                break;
            }
            let gone = live.remove(0);
            self.remove(&gone)?;
        }
        Ok(())
    }

    /// Drops expired generations now (the housekeeping thread calls this, so memory is freed
    /// even when no write comes).
    pub(super) fn expire(&self) -> Result<()> {
        if let Home::Dir { access: Access::ReadOnly, .. } = &self.home {
            return Ok(());
        }
        let now = self.clock.now_millis();
        if self.live.read().first().is_none_or(|g| !self.expired(g.start, now)) {
            return Ok(());
        }
        self.drop_expired(&mut self.live.write(), now)
    }

    /// A new generation for the slot at `start`.
    fn make(&self, start: u64) -> Result<Namespace> {
        let (name, options) = (self.name.clone(), self.options.clone());
        match &self.home {
            Home::Memory { workers } => {
                Namespace::new(name, options, Arc::clone(workers), LeafStore::Memory)
            }
            Home::Spill { workers, db, dir, keep } => {
                let leaves = LeafFiles::open_keeping(
                    Arc::clone(&db.storage),
                    self.generation_dir(dir, start).join("leaves"),
                    false,
                    Some(Arc::clone(keep)),
                )?;
                Namespace::new(name, options, Arc::clone(workers), LeafStore::Files(leaves))
            }
            Home::Dir { workers, db, dir, .. } => {
                let at = self.generation_dir(dir, start);
                let (backing, set) = persist::create_at(at, &name, &options, db, workers)?;
                // The generation directory is in place: make its name durable with it. Best
                // effort: a failure costs only the durability of a directory name whose files
                // are synced on their own.
                let _ = db.storage.sync_dir(&dir.join(GENERATIONS_DIR));
                Namespace::with_hosts(name, options, set, backing, Arc::clone(&self.hosts))
            }
        }
    }

    fn generation_dir(&self, dir: &Path, start: u64) -> PathBuf {
        // Zero-padded, so that a listing sorts by age.
        dir.join(GENERATIONS_DIR).join(format!("{start:020}"))
    }

    /// Deletes an expired generation's files (its namespace is freed with its last `Arc`).
    fn remove(&self, gone: &Generation) -> Result<()> {
        match &self.home {
            Home::Memory { .. } => Ok(()),
            Home::Spill { db, dir, .. } => {
                let at = self.generation_dir(dir, gone.start);
                db.storage.remove_dir_all(&at).map_err(|e| Error::io("remove", &at, e))
            }
            Home::Dir { db, dir, .. } => remove_dir(db, &self.generation_dir(dir, gone.start)),
        }
    }

    /// The live generations for `now`, oldest first (the current one last).
    fn live_at<'a>(&self, live: &'a [Generation], now: u64) -> &'a [Generation] {
        let first = live.iter().position(|g| !self.expired(g.start, now)).unwrap_or(live.len());
        &live[first..]
    }

    /// Check-and-insert: "seen" if any live generation holds the fingerprint, otherwise
    /// recorded in the current one, with its host hash (`hosts`: one per fingerprint, or
    /// none). `then` as in [`Namespace::seen_fingerprints_then`].
    pub(super) fn seen(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        then: Option<&mut HandOn<'_>>,
    ) -> Result<()> {
        self.in_current(fps, hosts, out, |current, rest, answers| match then {
            None => current.seen_fingerprints_hosts(&rest.fps, &rest.hosts, answers),
            Some(then) => {
                let mut whole = rest.out.to_vec();
                let mut hand_on = |answers: &[bool]| {
                    scatter(&rest.at, answers, &mut whole);
                    then(&whole)
                };
                current.seen_fingerprints_hosts_then(&rest.fps, &rest.hosts, answers, &mut hand_on)
            }
        })
    }

    /// [`Namespace::reserve_fingerprints`]: those seen in an old generation are answered
    /// "seen", the rest reserved in the current one (whose reservation is returned: it commits
    /// there even if the generations rotate meanwhile), with their host hashes as in
    /// [`Self::seen`].
    pub(super) fn reserve(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
    ) -> Result<Reservation> {
        self.in_current(fps, hosts, out, |current, rest, answers| {
            current.reserve_fingerprints_hosts(&rest.fps, &rest.hosts, answers)
        })
    }

    /// What [`Self::seen`] and [`Self::reserve`] share: the fingerprints a live old generation
    /// holds are answered "seen" in `out`; `write` takes the rest into the current generation,
    /// and its answers go to their places in `out`.
    fn in_current<T>(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        write: impl FnOnce(&Arc<Namespace>, &Rest<'_>, &mut [bool]) -> Result<T>,
    ) -> Result<T> {
        let now = self.clock.now_millis();
        let live = self.for_write(now)?;
        let Some((current, old)) = live.split_last() else {
            return Err(Error::InvalidOption {
                name: "recrawl_after",
                reason: "no current generation".into(),
            });
        };
        let (rest_fps, at) = self.look_in_old(old, now, fps, out)?;
        let rest = Rest { hosts: gather(&at, hosts), fps: rest_fps, at, out };
        let mut answers = vec![false; rest.fps.len()];
        let done = write(&current.ns, &rest, &mut answers)?;
        let Rest { at, .. } = rest;
        scatter(&at, &answers, out);
        Ok(done)
    }

    /// Marks in `out` the fingerprints a live old generation holds; returns the others and
    /// their positions.
    fn look_in_old(
        &self,
        old: &[Generation],
        now: u64,
        fps: &[u64],
        out: &mut [bool],
    ) -> Result<(Vec<u64>, Vec<usize>)> {
        out.fill(false);
        let mut hit = vec![false; fps.len()];
        for g in self.live_at(old, now) {
            hit.fill(false);
            g.ns.contains_fingerprints(fps, &mut hit)?;
            for (o, h) in out.iter_mut().zip(&hit) {
                *o |= *h;
            }
        }
        let mut rest = Vec::with_capacity(fps.len());
        let mut at = Vec::with_capacity(fps.len());
        for (i, (&fp, &seen)) in fps.iter().zip(out.iter()).enumerate() {
            if !seen {
                rest.push(fp);
                at.push(i);
            }
        }
        Ok((rest, at))
    }

    /// Read-only: "seen" if any live generation holds the fingerprint.
    pub(super) fn contains(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        let now = self.clock.now_millis();
        let live = self.live.read();
        out.fill(false);
        let mut hit = vec![false; fps.len()];
        for g in self.live_at(&live, now) {
            hit.fill(false);
            g.ns.contains_fingerprints(fps, &mut hit)?;
            for (o, h) in out.iter_mut().zip(&hit) {
                *o |= *h;
            }
        }
        Ok(())
    }

    /// The window's host dictionary (the window namespace's, shared by its generations).
    pub(super) fn hosts(&self) -> Arc<HostDict> {
        Arc::clone(&self.hosts)
    }

    /// Forgets the records of host hash `h` in every live generation (see
    /// `Namespace::forget_host`); returns how many URLs were forgotten, over all of them.
    /// The generation list is held shared meanwhile, so none is added or dropped during it.
    /// Records of unknown host in any live generation make it refuse before any is touched;
    /// `check` runs in each generation once nothing can be recorded there until its forget is
    /// done.
    ///
    /// # Errors
    /// As `Namespace::forget_host`. A failure in one generation leaves the ones before it
    /// forgotten (each is durable on its own) and the later ones not: run it again.
    pub(super) fn forget_host(&self, h: u32, check: &dyn Fn() -> Result<()>) -> Result<u64> {
        if let Home::Dir { access: Access::ReadOnly, dir, .. } = &self.home {
            return Err(Error::ReadOnly {
                path: dir.clone(),
                what: "a recrawl window takes no writes when opened read-only",
            });
        }
        let now = self.clock.now_millis();
        let live = self.live.read();
        let live = self.live_at(&live, now);
        let mut unknown = 0;
        for g in live {
            unknown += g.ns.count_host_records(0)?;
        }
        if unknown > 0 {
            return Err(Error::ForgetHostUnknown { name: self.name.clone(), records: unknown });
        }
        let mut forgotten = 0;
        for g in live {
            forgotten += g.ns.forget_host_checked(h, check)?;
        }
        Ok(forgotten)
    }

    /// Records of host hash `h` in the live generations.
    pub(super) fn count_host_records(&self, h: u32) -> Result<u64> {
        self.namespaces().iter().map(|ns| ns.count_host_records(h)).sum()
    }

    /// The live generations' namespaces, oldest first.
    pub(super) fn namespaces(&self) -> Vec<Arc<Namespace>> {
        let now = self.clock.now_millis();
        let live = self.live.read();
        self.live_at(&live, now).iter().map(|g| Arc::clone(&g.ns)).collect()
    }

    /// URLs recorded in the live generations.
    pub(super) fn len(&self) -> u64 {
        self.namespaces().iter().map(|ns| ns.len()).sum()
    }

    /// The window and its live generations.
    pub(super) fn report(&self) -> (RecrawlReport, Vec<crate::NamespaceStats>) {
        let now = self.clock.now_millis();
        let live = self.live.read();
        let mut stats = Vec::new();
        let mut gens = Vec::new();
        for g in self.live_at(&live, now) {
            let s = g.ns.stats();
            gens.push(GenerationReport {
                start_ms: g.start,
                age_secs: now.saturating_sub(g.start) as f64 / 1000.0,
                count: s.count,
                memory_bytes: s.memory_bytes,
                disk_bytes: s.disk_bytes,
                worst_leaf_fpr: s.worst_leaf_fpr,
            });
            stats.push(s);
        }
        let report = RecrawlReport {
            window_secs: self.window as f64 / 1000.0,
            generations: self.count,
            generation_fpr: self.options.fpr,
            live: gens,
        };
        (report, stats)
    }

    /// The namespace directory, in a data directory.
    pub(super) fn dir(&self) -> Option<&Path> {
        match &self.home {
            Home::Dir { dir, .. } => Some(dir),
            _ => None,
        }
    }
}

/// The fingerprints of a batch that no old generation holds, for the current one: their
/// places in the batch, their host hashes, and the batch's answers so far.
struct Rest<'a> {
    fps: Vec<u64>,
    hosts: Vec<u32>,
    at: Vec<usize>,
    out: &'a [bool],
}

/// `hosts[at[i]]` for each `i`, or none if `hosts` is empty (fingerprints without hosts).
fn gather(at: &[usize], hosts: &[u32]) -> Vec<u32> {
    match hosts.is_empty() {
        true => Vec::new(),
        false => at.iter().map(|&i| hosts.get(i).copied().unwrap_or(0)).collect(),
    }
}

/// `out[at[i]] = answers[i]`.
fn scatter(at: &[usize], answers: &[bool], out: &mut [bool]) {
    for (&i, &seen) in at.iter().zip(answers) {
        if let Some(o) = out.get_mut(i) {
            *o = seen;
        }
    }
}

/// Deletes a generation directory: renamed aside first, so a crash half-way leaves a
/// `*.dropped.tmp` that the next open finishes deleting, never a generation without its meta.
fn remove_dir(db: &DbOptions, dir: &Path) -> Result<()> {
    let mut aside = dir.file_name().unwrap_or_default().to_owned();
    aside.push(DROPPED_SUFFIX);
    let aside = dir.with_file_name(aside);
    match db.storage.rename(dir, &aside) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("rename", dir, e)),
    }
    db.storage.remove_dir_all(&aside).map_err(|e| Error::io("remove", &aside, e))
}
