//! The `Db` facade: many namespaces, one set of background split workers, and (when opened on a
//! directory) their persistence.

mod catalog;
mod check;
mod expiry;
mod lock;
mod restore;

use catalog::{Catalog, Evict, Found};
pub use check::check_data_dir;
use expiry::Expiries;
pub use expiry::{Expiry, ExpiryUpdate};
use lock::DirLock;
pub use restore::LoadStep;
use restore::{RESTORE_SUFFIX, Restore};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use crate::dsbf::dump::{ChunkOrder, Header, ITER_HEADER};
use crate::error::{Error, Result};
use crate::leaf_log::{LeafFiles, LeafStore};
use crate::log::Fsync;
use crate::namespace::backing::Backing;
use crate::namespace::persist::{self, Access, DbOptions};
use crate::namespace::small_journal::SmallJournal;
use crate::namespace::{JournalHome, LeafSource, Ledger, Namespace, Place, Usage};
use crate::options::NamespaceOptions;
use crate::tree::SplitWorkers;

/// The namespace [`Db::seen`] and [`Db::contains`] use.
pub const DEFAULT_NAMESPACE: &str = "default";

/// Longest namespace name, in bytes.
pub const MAX_NAME_LEN: usize = 512;

/// A set of namespaces, each an independent URL-seen set. `Send + Sync`: share it with `Arc`.
///
/// ```
/// use urlseen_engine::{Db, NamespaceOptions};
///
/// let db = Db::in_memory();
/// assert!(!db.seen("https://example.com/a")?);     // new, now recorded
/// assert!(db.seen("HTTPS://EXAMPLE.com:443/a#x")?); // the same page, spelled differently
///
/// let job = db.create_namespace("crawl-42", NamespaceOptions { capacity: 10_000, ..Default::default() })?;
/// assert_eq!(job.seen_batch(&["https://a.example/", "https://b.example/", "https://a.example/"])?,
///            vec![false, false, true]);
/// # Ok::<(), urlseen_engine::Error>(())
/// ```
///
/// # Durability
/// [`Db::open`] keeps every namespace in a data directory: each recorded fingerprint goes to the
/// namespace's append-only log before the answer is returned, with Redis's `appendfsync`
/// semantics ([`Fsync`]); snapshots make restarts fast. Under [`Fsync::Always`] nothing
/// acknowledged is lost in a crash or power loss; under `EverySec` a power loss may lose about
/// the last second, a process crash nothing. A failed write or fsync makes the namespace refuse
/// writes ([`Error::Poisoned`]) instead of acknowledging what may not be on disk.
///
/// ```
/// use urlseen_engine::{Db, DbOptions, Fsync, NamespaceOptions};
/// let dir = tempfile::tempdir().unwrap();
/// {
///     let db = Db::open_with(dir.path(), DbOptions { fsync: Fsync::Always, ..Default::default() })?;
///     db.namespace_or_create("jobs", NamespaceOptions::default())?.seen("https://a.example/")?;
/// } // dropped: a checkpoint is written
/// let db = Db::open(dir.path())?;
/// assert!(db.namespace("jobs").unwrap().contains("https://a.example/")?);
/// # Ok::<(), urlseen_engine::Error>(())
/// ```
#[derive(Debug)]
pub struct Db {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Every namespace's name, and the loaded ones (see [`catalog`]).
    namespaces: RwLock<Catalog>,
    /// Held while a namespace is loaded from its directory (or dropped), so that no two
    /// threads load the same one. Lock order: this, then `namespaces`.
    loading: Mutex<()>,
    /// Files of unloaded and new namespaces were written and not synced (under `everysec`):
    /// the housekeeping thread syncs their file system within the second (see
    /// [`Db::sync`]).
    unsynced: AtomicBool,
    /// Restores under way ([`Db::load_chunk`]): their names are taken, their namespaces not
    /// yet visible. Lock order: `namespaces`, then this; never either while waiting for a
    /// restore's own lock.
    restores: Mutex<HashMap<String, Arc<Mutex<Restore>>>>,
    workers: Arc<SplitWorkers>,
    /// The data directory and its lock, for a persistent `Db` (a read-only one holds a shared
    /// lock, or none: see [`DirLock::shared_if_exists`]).
    root: Option<(PathBuf, Option<DirLock>)>,
    /// Opened with [`Db::open_read_only`]: nothing is ever written.
    read_only: bool,

    /// The spill directory of a temporary `Db`, removed when the `Db` and every namespace it
    /// made are dropped.
    spill: Option<Arc<tempfile::TempDir>>,
    /// Where a small namespace's tree puts its leaves when it has one (the heap, files in the
    /// spill directory, or in a data directory a directory of its own): made once, kept by
    /// each small namespace until it becomes a tree (see `namespace/small.rs`).
    small_leaves: Option<LeafSource>,
    /// A data directory's small namespaces, in one journal (see `crate::namespace::small_journal`).
    journal: Option<Arc<SmallJournal>>,
    /// Namespaces of the journal that moved to a directory of their own since the catalog
    /// last looked: it counts their files from then on (see [`Inner::note_moved`]).
    moved: Arc<Mutex<Vec<Arc<str>>>>,
    options: DbOptions,
    closed: AtomicBool,
    /// Running totals of what the namespaces hold (see [`Db::usage`]).
    ledger: Arc<Ledger>,
    /// Held by the housekeeping thread while it syncs or checkpoints, and by `close`/drop: so a
    /// closed `Db` waits for that work, and the thread never holds the `Db` itself (which would
    /// keep the directory locked after the user dropped it).
    busy: Arc<Mutex<()>>,
    /// When namespaces expire (see `expiry.rs`).
    expiries: Expiries,
}

impl Db {
    /// A `Db` that lives in memory only: filters and every leaf's fingerprints (8 bytes per
    /// URL) on the heap. For small sets and tests; [`Db::temporary`] keeps the fingerprints
    /// on disk instead.
    pub fn in_memory() -> Self {
        Self::unpersisted(None, DbOptions::default())
    }

    /// [`Db::in_memory`] with `options` (of which only the clock matters in memory: tests of
    /// recrawl windows give it a [`FakeClock`](crate::FakeClock)).
    pub fn in_memory_with(options: DbOptions) -> Self {
        Self::unpersisted(None, options)
    }

    /// A `Db` that is not persisted, but keeps its leaves' fingerprints in files in a new
    /// spill directory under `parent` (or the system's temporary directory, `$TMPDIR`), so
    /// that RAM holds only the filters and small buffers. The directory is removed when the
    /// `Db` and the namespaces it made are dropped (a killed process leaves it behind: it is
    /// named `urlseen-spill-*`).
    ///
    /// # Errors
    /// [`Error::Io`] if the directory cannot be created.
    pub fn temporary(parent: Option<&Path>) -> Result<Self> {
        let parent = parent.map_or_else(std::env::temp_dir, Path::to_owned);
        let dir = tempfile::Builder::new()
            .prefix("urlseen-spill-")
            .tempdir_in(&parent)
            .map_err(|e| Error::io("create spill directory in", &parent, e))?;
        Ok(Self::unpersisted(Some(Arc::new(dir)), DbOptions::default()))
    }

    fn unpersisted(spill: Option<Arc<tempfile::TempDir>>, options: DbOptions) -> Self {
        let workers = SplitWorkers::new(1);
        let small_leaves = spill.as_ref().map_or_else(
            || LeafSource::memory(Arc::clone(&workers)),
            |spill| {
                let (spill, storage) = (Arc::clone(spill), Arc::clone(&options.storage));
                LeafSource::new(Arc::clone(&workers), move |name: &str| -> Result<LeafStore> {
                    Ok(LeafStore::Files(LeafFiles::open_keeping(
                        Arc::clone(&storage),
                        persist::namespace_dir(spill.path(), name).join("leaves"),
                        false,
                        Some(Arc::clone(&spill) as Arc<dyn std::any::Any + Send + Sync>),
                    )?))
                })
            },
        );
        Db {
            inner: Arc::new(Inner {
                namespaces: RwLock::default(),
                loading: Mutex::default(),
                unsynced: AtomicBool::new(false),
                restores: Mutex::default(),
                workers,
                root: None,
                read_only: false,
                spill,
                small_leaves: Some(small_leaves),
                journal: None,
                moved: Arc::default(),
                options,
                closed: AtomicBool::new(false),
                ledger: Arc::default(),
                busy: Arc::new(Mutex::new(())),
                expiries: Expiries::in_memory(),
            }),
        }
    }

    /// The spill directory of a [`Db::temporary`].
    pub fn spill_dir(&self) -> Option<&Path> {
        self.inner.spill.as_deref().map(tempfile::TempDir::path)
    }

    /// Opens (or creates) the data directory `dir` with default options (`fsync = everysec`).
    /// Its namespaces are learnt from the names of their directories, and each is recovered
    /// (loaded) on first use, so opening takes time in the number of namespaces' names only.
    ///
    /// # Errors
    /// [`Error::Locked`] if another process has it open; [`Error::Io`]; a namespace whose
    /// directory name is not a name's hex is recovered at once, with recovery's errors
    /// ([`Error::Corrupt`], [`Error::UnsupportedVersion`], [`Error::CanonVersionMismatch`]).
    /// The others' come from the call that first uses them.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(dir, DbOptions::default())
    }

    /// [`Db::open`] with explicit options.
    ///
    /// # Errors
    /// As [`Db::open`].
    pub fn open_with(dir: impl AsRef<Path>, options: DbOptions) -> Result<Self> {
        let root = dir.as_ref().to_owned();
        let lock = DirLock::acquire(options.storage.as_ref(), &root)?;
        let ns_root = root.join("ns");
        options.storage.create_dir_all(&ns_root).map_err(|e| Error::io("create", &ns_root, e))?;
        let workers = SplitWorkers::new(1);
        let mut catalog = Catalog::default();
        let entries = options.storage.list(&ns_root).map_err(|e| Error::io("list", &ns_root, e))?;
        for entry in entries {
            let dir = ns_root.join(&entry);
            if entry.ends_with(DROPPED_SUFFIX) || entry.ends_with(RESTORE_SUFFIX) {
                // A drop, or a restore (`load_chunk`), that did not finish: finish the drop,
                // forget the restore (its key never existed).
                storage_remove(&options, &dir)?;
                continue;
            }
            if entry.ends_with(".tmp") {
                continue;
            }
            match persist::name_of_dir(&entry) {
                Some(name) => catalog.add_on_disk(name),
                // Not a name's hex (made by hand?): recovered now, under the name in its meta.
                None => {
                    if let Some((_, ns)) =
                        persist::load(&dir, &options, &workers, Access::ReadWrite)?
                    {
                        let files = ns.open_files();
                        catalog.add_loaded(ns, files);
                    }
                }
            }
        }
        let expiries = Expiries::open(&options.storage, &root, options.fsync, false)?;
        let moved = Arc::default();
        let home =
            JournalHome { root: root.clone(), db: options.clone(), moved: Arc::clone(&moved) };
        let small_leaves = LeafSource::data_dir(Arc::clone(&workers), home);
        let journal = open_journal(
            &root,
            &options,
            &workers,
            &small_leaves,
            &mut catalog,
            Access::ReadWrite,
        )?;
        let inner = Arc::new(Inner {
            namespaces: RwLock::new(catalog),
            loading: Mutex::default(),
            unsynced: AtomicBool::new(false),
            restores: Mutex::default(),
            workers,
            root: Some((root, Some(lock))),
            read_only: false,
            spill: None,
            small_leaves: Some(small_leaves),
            journal: Some(journal),
            moved,
            options,
            closed: AtomicBool::new(false),
            ledger: Arc::default(),
            busy: Arc::new(Mutex::new(())),
            expiries,
        });
        // Those opened already (a directory from before names were hex): counted now.
        inner.namespaces.read().loaded().iter().for_each(|ns| ns.join_ledger(&inner.ledger));
        spawn_housekeeping(Arc::downgrade(&inner), Arc::clone(&inner.busy));
        let db = Db { inner };
        db.open_expiries()?;
        Ok(db)
    }

    /// Opens the data directory `dir` for reading only (`urlseen stats`): every namespace's
    /// snapshot is loaded and its log replayed into memory (on first use, as [`Db::open`]
    /// does), and nothing in `dir` is written,
    /// renamed, cut, created or deleted. What a read-write open would repair is reported
    /// instead: a torn log tail is read up to its last valid record, and its length is in
    /// [`RecoveryReport::truncated_bytes`](crate::RecoveryReport) (the next read-write open
    /// cuts it); a pending namespace drop (`*.dropped.tmp`) is skipped, not finished; a 0.1
    /// snapshot is not upgraded (the whole log is replayed instead).
    ///
    /// The namespaces answer [`Namespace::stats`] and lookups, and refuse every write,
    /// checkpoint and sync with [`Error::ReadOnly`]. Records replayed from the log after the
    /// snapshot stay in RAM (16 bytes each), since they cannot go to leaf files. Exact-mode
    /// namespaces are read without their index (building it writes `index/`): their lookups
    /// are refused with [`Error::ReadOnly`], their counts are right. A counting namespace's
    /// store (an LSM that writes when it is opened) is read from a copy in the system's
    /// temporary directory (`$TMPDIR`), removed when the `Db` is dropped.
    ///
    /// The directory's lock is taken shared, and only if its lock file exists (no read-write
    /// open has ever run without making it), so a running server makes this fail with
    /// [`Error::Locked`] as a second read-write open would.
    ///
    /// # Errors
    /// [`Error::Corrupt`] if `dir` is not a urlseen data directory (no `ns/` inside);
    /// [`Error::Locked`]; [`Error::Io`]. Reading a namespace ([`Error::Corrupt`],
    /// [`Error::UnsupportedVersion`], [`Error::CanonVersionMismatch`]) fails the call that
    /// first uses it ([`Db::try_namespace`]).
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<Self> {
        let root = dir.as_ref().to_owned();
        let ns_root = root.join("ns");
        if !ns_root.is_dir() {
            return Err(Error::corrupt(&root, "not a urlseen data directory (no ns/ inside)"));
        }
        let options = DbOptions::default();
        let lock = DirLock::shared_if_exists(options.storage.as_ref(), &root)?;
        let workers = SplitWorkers::new(1);
        let mut catalog = Catalog::default();
        let entries = options.storage.list(&ns_root).map_err(|e| Error::io("list", &ns_root, e))?;
        // A pending drop (`*.dropped.tmp`) is a namespace that is gone: skipped, as every
        // other unfinished write (`*.tmp`), for the next read-write open to finish.
        for entry in entries.iter().filter(|e| !e.ends_with(".tmp")) {
            match persist::name_of_dir(entry) {
                Some(name) => catalog.add_on_disk(name),
                None => {
                    let dir = ns_root.join(entry);
                    if let Some((_, ns)) =
                        persist::load(&dir, &options, &workers, Access::ReadOnly)?
                    {
                        catalog.add_loaded(ns, 0);
                    }
                }
            }
        }
        // No housekeeping thread: there is nothing to sync or checkpoint.
        let expiries = Expiries::open(&options.storage, &root, options.fsync, true)?;
        let moved = Arc::default();
        let home =
            JournalHome { root: root.clone(), db: options.clone(), moved: Arc::clone(&moved) };
        let small_leaves = LeafSource::data_dir(Arc::clone(&workers), home);
        let journal =
            open_journal(&root, &options, &workers, &small_leaves, &mut catalog, Access::ReadOnly)?;
        Ok(Db {
            inner: Arc::new(Inner {
                namespaces: RwLock::new(catalog),
                loading: Mutex::default(),
                unsynced: AtomicBool::new(false),
                restores: Mutex::default(),
                workers,
                root: Some((root, lock)),
                read_only: true,
                spill: None,
                small_leaves: Some(small_leaves),
                journal: Some(journal),
                moved,
                options,
                closed: AtomicBool::new(false),
                ledger: Arc::default(),
                busy: Arc::new(Mutex::new(())),
                expiries,
            }),
        })
    }

    /// Whether this `Db` was opened with [`Db::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// The clock recrawl windows read ([`DbOptions::clock`]); a server with its namespaces in
    /// Redis reads it too.
    pub fn clock(&self) -> Arc<dyn crate::recrawl::Clock> {
        Arc::clone(&self.inner.options.clock)
    }

    /// The data directory, for a persistent `Db`.
    pub fn path(&self) -> Option<&Path> {
        self.inner.root.as_ref().map(|(p, _)| p.as_path())
    }

    /// The fsync policy (meaningful for a persistent `Db`).
    pub fn fsync(&self) -> Fsync {
        self.inner.options.fsync
    }

    /// Whether a write's acknowledgement waits for an fsync: a persistent `Db` whose policy
    /// syncs per commit ([`Fsync::commit_syncs`]). A server runs such writes off its event
    /// loop.
    pub fn commit_syncs(&self) -> bool {
        self.path().is_some() && self.fsync().commit_syncs()
    }

    /// What every namespace holds together: RAM, reservations and disk, kept up to date as
    /// they are written (within a sixteenth of each namespace's growth) and as they are
    /// created and dropped. O(1): what a server checks `maxmemory` against per command.
    pub fn usage(&self) -> Usage {
        self.inner.ledger.usage()
    }

    /// Creates namespace `name`.
    ///
    /// # Errors
    /// [`Error::NamespaceExists`], [`Error::InvalidName`], [`Error::InvalidOption`]; in a
    /// persistent `Db`, [`Error::Io`].
    pub fn create_namespace(
        &self,
        name: &str,
        options: NamespaceOptions,
    ) -> Result<Arc<Namespace>> {
        self.refuse_if_read_only()?;
        validate_name(name)?;
        options.validate()?;
        self.expired(name);
        let inner = &self.inner;
        let mut map = inner.namespaces.write();
        if map.contains(name) {
            return Err(Error::NamespaceExists(name.to_owned()));
        }
        if inner.restores.lock().contains_key(name) {
            return Err(Error::Restoring(name.to_owned()));
        }
        inner.expiries.created(name)?;
        let ns = Arc::new(self.build(name, options, None)?);
        ns.join_ledger(&inner.ledger);
        // Room is made after the files are made (a create that fails holds none): for a
        // moment the bound is passed by one namespace's.
        if let Err(e) = self.add_loaded(&mut map, &ns) {
            let _ = forget_journaled(&ns);
            drop(ns);
            let _ = self.inner.remove_files(name, None);
            return Err(e);
        }
        Ok(ns)
    }

    /// A new namespace (not yet in the map), made where this `Db` keeps them (see
    /// [`Place::make`]); in the data directory at `dir`, when given, instead of its own
    /// directory.
    fn build(
        &self,
        name: &str,
        options: NamespaceOptions,
        dir: Option<PathBuf>,
    ) -> Result<Namespace> {
        let inner = &self.inner;
        let place = Place {
            root: inner.root.as_ref().map(|(root, _)| root.as_path()),
            spill: inner.spill.as_ref(),
            journal: inner.journal.as_ref(),
            small_leaves: inner.small_leaves.as_ref(),
            workers: &inner.workers,
            db: &inner.options,
            unsynced: &inner.unsynced,
        };
        place.make(name, options, dir)
    }

    /// The namespace `name`, created with `options` if it does not exist (an existing one keeps
    /// its own options).
    ///
    /// # Errors
    /// As [`Db::create_namespace`] and [`Db::try_namespace`].
    pub fn namespace_or_create(
        &self,
        name: &str,
        options: NamespaceOptions,
    ) -> Result<Arc<Namespace>> {
        if let Some(ns) = self.try_namespace(name)? {
            return Ok(ns);
        }
        match self.create_namespace(name, options) {
            Err(Error::NamespaceExists(_)) => {
                self.try_namespace(name)?.ok_or_else(|| Error::NoSuchNamespace(name.to_owned()))
            }
            other => other,
        }
    }

    /// The namespace `name`, if it exists; `None` too if it could not be loaded (see
    /// [`Db::try_namespace`] for why).
    pub fn namespace(&self, name: &str) -> Option<Arc<Namespace>> {
        self.try_namespace(name).ok().flatten()
    }

    /// The namespace `name`, if it exists, loaded from its directory if it is not loaded yet
    /// (see docs/durability.md, "Many namespaces").
    ///
    /// # Errors
    /// Loading it: [`Error::Io`], [`Error::Corrupt`], [`Error::UnsupportedVersion`],
    /// [`Error::CanonVersionMismatch`] (it stays unloaded, and the next call tries again);
    /// [`Error::TooManyOpenNamespaces`].
    pub fn try_namespace(&self, name: &str) -> Result<Option<Arc<Namespace>>> {
        if self.expired(name) {
            return Ok(None);
        }
        let found = self.inner.namespaces.read().get(name);
        match found {
            Found::Loaded(ns) if ns.is_detached() => {}
            Found::Loaded(ns) => return Ok(Some(ns)),
            Found::Absent => return Ok(None),
            Found::OnDisk => return self.load(name),
        }
        // Used again: its files stay open again, if there is room.
        let mut map = self.inner.namespaces.write();
        let ns = match map.get(name) {
            Found::Loaded(ns) => ns,
            Found::Absent => return Ok(None),
            Found::OnDisk => {
                drop(map);
                return self.load(name);
            }
        };
        let files = ns.open_files();
        if ns.is_detached() && self.make_room(&mut map, files).is_ok() {
            ns.set_detached(false);
            map.attach(name, files);
        }
        Ok(Some(ns))
    }

    /// Loads namespace `name` from its directory (see [`Db::try_namespace`]).
    fn load(&self, name: &str) -> Result<Option<Arc<Namespace>>> {
        let inner = &self.inner;
        let _one = inner.loading.lock();
        let found = inner.namespaces.read().get(name);
        match found {
            Found::Loaded(ns) => return Ok(Some(ns)),
            Found::Absent => return Ok(None),
            Found::OnDisk => {}
        }
        let Some((root, _)) = &inner.root else { return Ok(None) };
        let dir = persist::namespace_dir(root, name);
        let access = if inner.read_only { Access::ReadOnly } else { Access::ReadWrite };
        let Some((stored, ns)) = persist::load(&dir, &inner.options, &inner.workers, access)?
        else {
            // A create that did not finish: it never existed.
            inner.namespaces.write().remove(name);
            return Ok(None);
        };
        if stored != name {
            return Err(Error::corrupt(
                &dir.join("meta"),
                &format!("names namespace {stored:?}, but its directory is {name:?}'s"),
            ));
        }
        ns.join_ledger(&inner.ledger);
        let mut map = inner.namespaces.write();
        self.add_loaded(&mut map, &ns)?;
        Ok(Some(ns))
    }

    /// Adds `ns`, just opened, to the loaded ones, after making room for its files; if there
    /// is none, detached (its files closed between writes) if it can be.
    ///
    /// # Errors
    /// [`Error::TooManyOpenNamespaces`] if there is no room and it cannot be detached.
    fn add_loaded(&self, map: &mut Catalog, ns: &Arc<Namespace>) -> Result<()> {
        let files = ns.open_files();
        match self.make_room(map, files) {
            Ok(()) => map.add_loaded(Arc::clone(ns), files),
            Err(_) if ns.can_detach() => {
                ns.set_detached(true);
                map.add_loaded(Arc::clone(ns), 0);
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// Unloads idle namespaces (least recently used first) until `files` more descriptors fit
    /// under [`DbOptions::max_open_files`] and one more namespace fits in as many loaded ones
    /// (an unloaded one frees its memory too): each one's buffered records written out
    /// (synced under `always`), its files closed. One that something still holds is detached
    /// instead, when descriptors are short (see [`catalog`]).
    ///
    /// # Errors
    /// [`Error::TooManyOpenNamespaces`] if descriptors are short and none can go.
    fn make_room(&self, map: &mut Catalog, files: usize) -> Result<()> {
        let max = self.inner.options.max_open_files;
        if self.inner.root.is_none() || self.inner.read_only {
            return Ok(());
        }
        loop {
            let short = map.files() > 0 && map.files() + files > max;
            if !short && map.persisted_len() < max {
                return Ok(());
            }
            let victim = map.next_victim(|ns, open| {
                if Namespace::can_unload(ns) {
                    Some(Evict::Unload)
                } else if short && open && ns.can_detach() {
                    Some(Evict::Detach)
                } else {
                    None
                }
            });
            match victim {
                None if short => {
                    return Err(Error::TooManyOpenNamespaces { open: map.files(), max });
                }
                None => return Ok(()),
                Some((name, ns, Evict::Detach)) => {
                    ns.set_detached(true);
                    map.detach(&name);
                }
                // A failed write poisons it: it stays loaded, and is not chosen again.
                Some((name, ns, Evict::Unload)) => match ns.write_out() {
                    Ok(unsynced) => {
                        if unsynced {
                            self.inner.unsynced.store(true, Ordering::Release);
                        }
                        drop(ns);
                        map.unload(&name);
                    }
                    Err(_) => continue,
                },
            }
        }
    }

    /// How many namespaces are loaded, and the descriptors their files hold (see
    /// [`DbOptions::max_open_files`]).
    pub fn loaded_counts(&self) -> (usize, usize) {
        let map = self.inner.namespaces.read();
        (map.loaded_len(), map.files())
    }

    /// The bound on the descriptors the loaded namespaces' files hold
    /// ([`DbOptions::max_open_files`]).
    pub fn max_open_files(&self) -> usize {
        self.inner.options.max_open_files
    }

    /// The namespaces loaded now (in no particular order): what holds memory and files. The
    /// others are on disk only.
    pub fn loaded_namespaces(&self) -> Vec<Arc<Namespace>> {
        self.inner.namespaces.read().loaded()
    }

    /// Drops namespace `name` and everything it recorded (its files too). Returns whether it
    /// existed.
    ///
    /// # Errors
    /// In a persistent `Db`, [`Error::Io`] if its files could not be removed.
    pub fn drop_namespace(&self, name: &str) -> Result<bool> {
        self.refuse_if_read_only()?;
        let pending = self.inner.restores.lock().get(name).cloned();
        if let Some(pending) = pending {
            let mut restore = pending.lock();
            if !restore.published {
                // Its files first, then its name: a create of that name must not find them.
                restore.abort();
                self.forget_restore(name, &pending);
                return Ok(true);
            }
        }
        if self.expired(name) {
            // Past its time, it was gone already (as Redis's `DEL` of an expired key: 0).
            return Ok(false);
        }
        self.inner.drop_published(name, None)
    }

    /// How many namespaces there are (loaded or not): [`Self::namespace_names`]'s length,
    /// without listing them (what `DBSIZE` and `INFO keyspace` answer, in O(1) plus the
    /// expiries due).
    pub fn namespace_count(&self) -> usize {
        if self.inner.read_only {
            return self.namespace_names().len();
        }
        self.expire_due();
        self.inner.namespaces.read().len()
    }

    /// Names of all namespaces (loaded or not), sorted.
    pub fn namespace_names(&self) -> Vec<String> {
        self.expire_due();
        let names = self.inner.namespaces.read().names();
        match self.inner.read_only {
            true => names.into_iter().filter(|n| !self.is_due(n)).collect(),
            false => names,
        }
    }

    /// [`Namespace::seen`] on the [`DEFAULT_NAMESPACE`], created with default options on first
    /// use.
    ///
    /// # Errors
    /// As [`Namespace::seen`].
    pub fn seen(&self, url: &str) -> Result<bool> {
        self.default_namespace()?.seen(url)
    }

    /// [`Namespace::contains`] on the [`DEFAULT_NAMESPACE`].
    ///
    /// # Errors
    /// [`Error::InvalidUrl`].
    pub fn contains(&self, url: &str) -> Result<bool> {
        self.default_namespace()?.contains(url)
    }

    fn default_namespace(&self) -> Result<Arc<Namespace>> {
        self.namespace_or_create(DEFAULT_NAMESPACE, NamespaceOptions::default())
    }

    /// Blocks until no background split is queued or running.
    pub fn wait_for_splits(&self) {
        self.inner.workers.wait_idle();
        for_each_tree(&self.inner, |ns| {
            ns.complete_splits();
            Ok(())
        })
        .unwrap_or(());
    }

    /// Makes every record of every namespace durable now: the loaded ones' logs are synced,
    /// and the files unloaded or new namespaces left unsynced (under `everysec`) with them.
    ///
    /// # Errors
    /// The first failure.
    pub fn sync(&self) -> Result<()> {
        self.inner.expiries.sync()?;
        if let Some(journal) = &self.inner.journal {
            journal.log().sync_all()?;
        }
        // The namespaces with files of their own: the journal's were synced with it.
        self.inner.note_moved();
        for_each_persisted(&self.inner, |ns| ns.sync())?;
        self.sync_unloaded()
    }

    /// Syncs the file system of the data directory if unloaded or new namespaces left written
    /// files unsynced (one `syncfs`, not one fsync per file).
    fn sync_unloaded(&self) -> Result<()> {
        sync_unloaded(&self.inner)
    }

    /// Writes a snapshot of every loaded namespace now (the others have nothing in memory
    /// that their files lack).
    ///
    /// # Errors
    /// The first failure.
    pub fn checkpoint(&self) -> Result<()> {
        self.inner.expiries.sync()?;
        // The namespaces with files of their own: the journal's have no snapshot.
        self.inner.note_moved();
        for_each_persisted(&self.inner, |ns| ns.checkpoint())
    }

    /// Checkpoints and syncs everything, then closes. Dropping a `Db` does the same but can only
    /// ignore errors; call `close` to see them.
    ///
    /// # Errors
    /// The first failure.
    pub fn close(self) -> Result<()> {
        self.inner.closed.store(true, Ordering::Release);
        if self.inner.spill.is_some() {
            // The spill directory goes with the last reference to it, and a split worker holds
            // one while it runs: a process whose main thread returned with a split still running
            // left the directory behind (12 GB after a 10^9-line `filter`).
            self.inner.workers.wait_idle();
        }
        if self.inner.read_only {
            return Ok(());
        }
        let _housekeeping_done = self.inner.busy.lock();
        self.checkpoint()?;
        if let Some(journal) = &self.inner.journal {
            journal.log().sync_all()?;
        }
        self.sync_unloaded()
    }

    fn refuse_if_read_only(&self) -> Result<()> {
        match &self.inner.root {
            Some((root, _)) if self.inner.read_only => Err(Error::ReadOnly {
                path: root.clone(),
                what: "namespaces cannot be created or dropped",
            }),
            _ => Ok(()),
        }
    }
}

impl Inner {
    /// Removes namespace `name` from the map and its files (the part of
    /// [`Db::drop_namespace`] a published namespace needs; the active expire cycle calls it
    /// too). With `only_if_due`, only if its time is that or before. Returns whether it
    /// existed.
    fn drop_published(&self, name: &str, only_if_due: Option<u64>) -> Result<bool> {
        // No load of it may run while its files go.
        let _one = self.loading.lock();
        let ns = {
            let mut map = self.namespaces.write();
            if only_if_due.is_some_and(|now| !self.expiries.is_due_at(name, now)) {
                return Ok(false);
            }
            if !map.contains(name) {
                return Ok(false);
            }
            self.expiries.dropped(name);
            map.remove(name)
        };
        if let Some(ns) = &ns {
            // Out of the totals now, not when the last holder of it lets go (a connection's
            // cache may keep it until its next command).
            ns.leave_ledger();
            // Gone from the journal before its directory (if it moved to one) goes: a crash in
            // between must not bring the journal's copy back.
            forget_journaled(ns)?;
            if ns.backing().journal().is_some() {
                // Only in the journal: no files.
                return Ok(true);
            }
        }
        self.remove_files(name, ns.as_deref().and_then(Namespace::data_dir))?;
        Ok(true)
    }

    /// Counts the files of the journal's namespaces that moved to directories of their own since
    /// the last call (see `crate::namespace::small_journal`); their new files were synced when they
    /// moved.
    fn note_moved(&self) {
        let moved = std::mem::take(&mut *self.moved.lock());
        if moved.is_empty() {
            return;
        }
        let mut map = self.namespaces.write();
        for name in moved {
            if let Some(ns) = map.peek(&name) {
                map.note_moved(&name, ns.open_files());
            }
        }
    }

    /// Removes the files of namespace `name` (in `dir`, when it is loaded from elsewhere).
    fn remove_files(&self, name: &str, dir: Option<&Path>) -> Result<()> {
        let storage = &self.options.storage;
        if let Some((root, _)) = &self.root {
            let own = persist::namespace_dir(root, name);
            let dir = dir.unwrap_or(&own);
            // Renamed aside first, in one step: a crash half-way through the removal leaves a
            // `*.dropped.tmp` directory, which open finishes removing, never a namespace
            // without its meta (which open refuses, since it cannot tell it from damage).
            let aside = dropped_path(dir);
            storage.rename(dir, &aside).map_err(|e| Error::io("rename", dir, e))?;
            storage.remove_dir_all(&aside).map_err(|e| Error::io("remove", &aside, e))?;
        } else if let Some(spill) = &self.spill {
            let dir = persist::namespace_dir(spill.path(), name);
            storage.remove_dir_all(&dir).map_err(|e| Error::io("remove", &dir, e))?;
        }
        Ok(())
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if !self.inner.closed.swap(true, Ordering::AcqRel)
            && self.inner.root.is_some()
            && !self.inner.read_only
        {
            let _housekeeping_done = self.inner.busy.lock();
            let _ = self.checkpoint();
            if let Some(journal) = &self.inner.journal {
                let _ = journal.log().sync_all();
            }
            let _ = self.sync_unloaded();
        }
    }
}

/// Once a second: sync the logs under `everysec`, and checkpoint namespaces whose log grew past
/// the threshold. Ends when the `Db` is gone.
fn spawn_housekeeping(db: Weak<Inner>, busy: Arc<Mutex<()>>) {
    let _ = std::thread::Builder::new().name("urlseen-sync".into()).spawn(move || {
        loop {
            for _ in 0..10 {
                std::thread::sleep(Duration::from_millis(100));
                if db.strong_count() == 0 {
                    return;
                }
            }
            let _busy = busy.lock();
            // Closed meanwhile (close waits for this lock after marking it): the directory may
            // be someone else's once this returns.
            let Some(inner) = db.upgrade() else { return };
            if inner.closed.load(Ordering::Acquire) {
                return;
            }
            inner.note_moved();
            if let Some(journal) = &inner.journal
                && journal.log().policy().syncs_every_second()
            {
                // A failure poisons the journal; writers see it on their next call.
                let _ = journal.log().sync_all();
            }
            // Retried next second if it fails (a namespace that is loaded again meanwhile is
            // synced by its own log too).
            let _ = sync_unloaded(&inner);
            // The namespaces with files of their own: the journal's are synced above.
            let _ = for_each_persisted(&inner, |ns| {
                for ns in ns.parts() {
                    let Some(d) = ns.backing().durable() else { continue };
                    if d.log.policy().syncs_every_second() {
                        // A failure poisons the log (or the store); writers see it on their
                        // next call.
                        let _ = ns.sync();
                    }
                    if d.wants_checkpoint() {
                        let _ = ns.checkpoint();
                    }
                }
                Ok(())
            });
            drop(inner);
        }
    });
}

/// Opens the small-namespace journal of data directory `root` (see
/// `crate::namespace::small_journal`) and adds the namespaces it holds to `catalog`, loaded. One
/// that has a directory too moved there and crashed before its journal said so: the directory is
/// kept (it holds every item of the journal's copy), and the journal's copy goes (read-write). One
/// whose directory is an unfinished create (no meta) keeps its journal copy.
fn open_journal(
    root: &Path,
    options: &DbOptions,
    workers: &Arc<SplitWorkers>,
    source: &LeafSource,
    catalog: &mut Catalog,
    access: Access,
) -> Result<Arc<SmallJournal>> {
    let read_only = access == Access::ReadOnly;
    let storage = &options.storage;
    let (journal, live) = SmallJournal::open(storage, root, options.fsync, read_only)?;
    let journal = Arc::new(journal);
    let mut gone = 0;
    catalog.reserve(live.len());
    for r in live {
        if catalog.contains(&r.name) {
            let dir = persist::namespace_dir(root, &r.name);
            let meta = dir.join("meta");
            let has_meta = storage
                .read(&meta)
                .map_err(|e| Error::io("read", &meta, e))?
                .is_some_and(|m| !m.is_empty());
            if has_meta {
                if !read_only {
                    gone = journal.gone(r.id)?;
                }
                continue;
            }
            if !read_only {
                storage_remove(options, &dir)?;
            }
            catalog.remove(&r.name);
        }
        let (name, id) = (r.name, r.id);
        let j = Arc::clone(&journal);
        let ns =
            Namespace::in_journal(name, r.options, j, id, source, workers, &r.hosts, &r.items)?;
        catalog.add_loaded(Arc::new(ns), 0);
    }
    if gone > 0 {
        journal.log().sync_all()?;
    }
    Ok(journal)
}

/// Writes that `ns`, a namespace made in the journal (moved since, or not), is gone from it
/// (see `crate::namespace::small_journal`); nothing for another.
fn forget_journaled(ns: &Namespace) -> Result<()> {
    if let Backing::Journal(j) = ns.backing() {
        let lsn = j.journal.gone(j.id)?;
        j.journal.log().commit(lsn)?;
    }
    Ok(())
}

/// [`for_each_tree`] over the loaded namespaces in directories of their own only (a bounded
/// number: see [`DbOptions::max_open_files`]), not the journal's, which may be millions.
fn for_each_persisted(
    inner: &Inner,
    mut f: impl FnMut(&Arc<Namespace>) -> Result<()>,
) -> Result<()> {
    let names = inner.namespaces.read().persisted_names();
    for name in names {
        let Some(ns) = inner.namespaces.read().peek(&name) else { continue };
        f(&ns)?;
    }
    Ok(())
}

/// Calls `f` on each loaded namespace that is a tree or made of trees (see
/// [`Namespace::is_tree`]), holding one at a time (one that is held cannot be unloaded: a pass
/// over all of them must not make every one busy at once), until one fails.
fn for_each_tree(inner: &Inner, mut f: impl FnMut(&Arc<Namespace>) -> Result<()>) -> Result<()> {
    // Only a tree splits: a million small lists cost no copy of their names (56 MB at 10^6,
    // a server's peak when it shut down).
    let names = inner.namespaces.read().loaded_names_where(Namespace::is_tree);
    for name in names {
        // Unloaded or dropped meanwhile: its files hold everything it had.
        let Some(ns) = inner.namespaces.read().peek(&name) else { continue };
        f(&ns)?;
    }
    Ok(())
}

/// See [`Db::sync_unloaded`].
fn sync_unloaded(inner: &Inner) -> Result<()> {
    let Some((root, _)) = &inner.root else { return Ok(()) };
    if !inner.unsynced.swap(false, Ordering::AcqRel) {
        return Ok(());
    }
    inner.options.storage.sync_filesystem(root).map_err(|e| {
        // Tried again by the next call.
        inner.unsynced.store(true, Ordering::Release);
        Error::io("sync the file system of", root, e)
    })
}

/// What a namespace directory is renamed to while it is dropped.
const DROPPED_SUFFIX: &str = ".dropped.tmp";

fn dropped_path(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_owned();
    name.push(DROPPED_SUFFIX);
    dir.with_file_name(name)
}

fn storage_remove(options: &DbOptions, dir: &Path) -> Result<()> {
    options.storage.remove_dir_all(dir).map_err(|e| Error::io("remove", dir, e))
}

fn validate_name(name: &str) -> Result<()> {
    let bad = |reason| Err(Error::InvalidName { name: name.to_owned(), reason });
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > MAX_NAME_LEN {
        return bad("it is longer than 512 bytes");
    }
    if name.chars().any(char::is_control) {
        return bad("it contains a control character");
    }
    Ok(())
}
