//! Where leaves keep their records: on the heap, or one file per leaf in a directory
//! ([`LeafFiles`]: naming, failure, retirement, adoption at recovery, syncs at checkpoints).
use super::{
    Arc, AtomicBool, AtomicU64, BLOCK_OVERHEAD, Error, HEADER_LEN, Mutex, NodeId, Ordering, Path,
    PathBuf, Result, Storage, read_header,
};

/// Where the leaves of one tree keep their fingerprints.
#[derive(Debug, Clone)]
pub enum LeafStore {
    /// On the heap, 12 bytes per record, fingerprint and host hash (`Db::in_memory`).
    Memory,
    /// One file per leaf in a directory.
    Files(Arc<LeafFiles>),
}

impl LeafStore {
    /// Fails once a leaf file could not be written or read.
    ///
    /// # Errors
    /// [`Error::Poisoned`].
    pub fn check(&self) -> Result<()> {
        match self {
            LeafStore::Memory => Ok(()),
            LeafStore::Files(files) => files.check(),
        }
    }

    /// Bytes of leaf files on disk (0 in memory).
    pub fn disk_bytes(&self) -> u64 {
        match self {
            LeafStore::Memory => 0,
            LeafStore::Files(files) => files.disk_bytes.load(Ordering::Relaxed),
        }
    }
}

/// The directory of a tree's leaf files. See the [module docs](super).
#[derive(Debug)]
pub struct LeafFiles {
    pub(super) storage: Arc<dyn Storage>,
    pub(super) dir: PathBuf,
    /// Whether a snapshot may still name a retired leaf's file, so that it must stay until the
    /// next checkpoint (a data directory), or not (a spill directory: deleted at once).
    pub(super) keep_retired: bool,
    pub(super) retired: Mutex<Vec<NodeId>>,
    pub(super) failed: AtomicBool,
    pub(super) failure: Mutex<Option<String>>,
    /// Leaves whose append failed, with the length their file had before it: what a
    /// recovery cuts them back to (see [`Self::recover`]).
    pub(super) torn: Mutex<Vec<(NodeId, u64)>>,
    /// A failure that [`Self::recover`] cannot undo (a split or a removal half done).
    pub(super) failed_for_good: AtomicBool,
    /// When the first failure since the last recovery happened.
    pub(super) failed_at: Mutex<Option<std::time::Instant>>,
    pub(super) disk_bytes: AtomicU64,
    /// Whether `dir` exists: it is made when the first leaf file is, so that a namespace
    /// whose leaves never leave their buffers (a few URLs) costs no directory.
    pub(super) dir_made: AtomicBool,
    /// `urlseen check` and read-only opens: adopting a leaf checks it and changes nothing, and
    /// a leaf's records stay in its buffer instead of going to its file.
    pub(super) read_only: bool,
    /// What must outlive these files' directory: a temporary `Db`'s spill directory, which is
    /// removed when the last holder drops it (a namespace may outlive its `Db`).
    pub(super) _keep_alive: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl LeafFiles {
    /// The leaf files in `dir` (created with the first file). `keep_retired`: whether the files of
    /// retired leaves must wait for the next checkpoint (a data directory, whose snapshot on disk
    /// may still name them) or may go at once (a spill directory).
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn open(storage: Arc<dyn Storage>, dir: PathBuf, keep_retired: bool) -> Result<Arc<Self>> {
        Self::open_keeping(storage, dir, keep_retired, None)
    }

    /// [`Self::open`], holding `keep_alive` (the spill directory that contains `dir`) for as
    /// long as these files are in use.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn open_keeping(
        storage: Arc<dyn Storage>,
        dir: PathBuf,
        keep_retired: bool,
        keep_alive: Option<Arc<dyn std::any::Any + Send + Sync>>,
    ) -> Result<Arc<Self>> {
        let files = Self::with(storage, dir, keep_retired, keep_alive, false);
        if files.storage.file_len(&files.dir).is_ok_and(|len| len.is_some()) {
            files.dir_made.store(true, Ordering::Release);
        }
        Ok(files)
    }

    /// The leaf files of a namespace in a data directory: [`Self::open`], but `dir` is made by
    /// the first leaf file written (most small namespaces write none before a checkpoint, and
    /// a create spares a directory).
    pub(crate) fn open_lazily(storage: Arc<dyn Storage>, dir: PathBuf) -> Arc<Self> {
        Self::with(storage, dir, true, None, false)
    }

    /// The leaf files in `dir` for reading only: nothing is created, cut, appended to or deleted.
    pub(crate) fn open_read_only(storage: Arc<dyn Storage>, dir: PathBuf) -> Arc<Self> {
        Self::with(storage, dir, true, None, true)
    }

    pub(super) fn with(
        storage: Arc<dyn Storage>,
        dir: PathBuf,
        keep_retired: bool,
        keep_alive: Option<Arc<dyn std::any::Any + Send + Sync>>,
        read_only: bool,
    ) -> Arc<Self> {
        Arc::new(LeafFiles {
            storage,
            dir,
            keep_retired,
            retired: Mutex::new(Vec::new()),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            torn: Mutex::new(Vec::new()),
            failed_for_good: AtomicBool::new(false),
            failed_at: Mutex::new(None),
            disk_bytes: AtomicU64::new(0),
            dir_made: AtomicBool::new(false),
            read_only,
            _keep_alive: keep_alive,
        })
    }

    /// The directory of the leaf files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the files are read and written.
    pub(crate) fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// The file of leaf `id`.
    pub fn path(&self, id: NodeId) -> PathBuf {
        self.dir.join(format!("{id}.leaf"))
    }

    /// Makes the directory before the first leaf file is created in it (durably, in a data
    /// directory: the storage syncs its parent).
    pub(super) fn make_dir(&self) -> std::io::Result<()> {
        if !self.dir_made.load(Ordering::Acquire) {
            self.storage.create_dir_all(&self.dir)?;
            self.dir_made.store(true, Ordering::Release);
        }
        Ok(())
    }

    pub(super) fn check(&self) -> Result<()> {
        if !self.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        let reason = self.failure.lock().clone().unwrap_or_default();
        Err(Error::Poisoned { reason })
    }

    pub(crate) fn fail<E: std::fmt::Display + 'static>(&self, what: &str, path: &Path, e: &E) {
        self.failed_for_good.store(true, Ordering::Release);
        // A damaged file is found again by every open that trusts it: the fix is to rebuild
        // it from the log, which `urlseen check --repair` does. Any other failure of a split
        // or a removal is undone by reopening.
        let damaged = matches!(
            (e as &dyn std::any::Any).downcast_ref::<Error>(),
            Some(Error::Corrupt { .. })
        );
        let fix = match data_dir_of(&self.dir) {
            Some(data) if damaged => format!(
                "run `urlseen check --data {} --repair` to rebuild the leaf files from the log",
                data.display()
            ),
            _ if damaged => "run `urlseen check --repair` on the data directory to rebuild the \
                             leaf files from the log"
                .to_owned(),
            _ => "reopen to recover from the log".to_owned(),
        };
        self.fail_once(what, path, e, &fix);
    }

    /// A failed append to leaf `id`, whose file was `len` bytes before it (0: not created):
    /// the store takes no more until [`Self::recover`] cuts the file back.
    pub(super) fn fail_append(&self, id: NodeId, len: u64, path: &Path, e: &dyn std::fmt::Display) {
        // Under the torn list's lock, which a recovery holds while it cuts and clears: the
        // entry and the failure are seen together.
        let mut torn = self.torn.lock();
        torn.push((id, len));
        self.fail_once("append to", path, e, "retried every second");
    }

    /// Takes back the failure of appends (a full disk, no file descriptor left): each leaf
    /// file an append failed on is cut back to its length before it (a file that was being
    /// created is removed), and the leaves' buffered records go to their files at their next
    /// flush. Returns `Ok(false)` if nothing had failed.
    ///
    /// # Errors
    /// [`Error::Poisoned`] for a failure only a reopen recovers from (a split or a removal
    /// half done), or the I/O error that the recovery met (the store stays failed).
    pub(crate) fn recover(&self) -> Result<bool> {
        if !self.failed.load(Ordering::Acquire) {
            return Ok(false);
        }
        if self.failed_for_good.load(Ordering::Acquire) {
            self.check()?;
        }
        let mut torn = self.torn.lock();
        for &(id, len) in torn.iter() {
            let path = self.path(id);
            let cut = match (len, self.storage.file_len(&path)) {
                (_, Ok(None)) => Ok(()),
                (0, Ok(Some(_))) => self.storage.remove_file(&path),
                (len, Ok(Some(_))) => self.storage.truncate(&path, len),
                (_, Err(e)) => Err(e),
            };
            cut.map_err(|e| Error::io("cut the torn tail of", &path, e))?;
        }
        torn.clear();
        *self.failure.lock() = None;
        *self.failed_at.lock() = None;
        self.failed.store(false, Ordering::Release);
        Ok(true)
    }

    /// When the store failed, if it did (and was not recovered since).
    pub(crate) fn failed_at(&self) -> Option<std::time::Instant> {
        *self.failed_at.lock()
    }

    fn fail_once(&self, what: &str, path: &Path, e: &dyn std::fmt::Display, remedy: &str) {
        self.failed_at.lock().get_or_insert_with(std::time::Instant::now);
        let mut failure = self.failure.lock();
        if failure.is_none() {
            *failure =
                Some(format!("{what} {}: {e}; refusing further writes ({remedy})", path.display()));
        }
        self.failed.store(true, Ordering::Release);
    }

    /// Leaves retired since the last call, whose files a checkpoint that no longer names them
    /// may delete (see [`Self::remove`]).
    pub(crate) fn take_retired(&self) -> Vec<NodeId> {
        std::mem::take(&mut *self.retired.lock())
    }

    /// Deletes the files of `ids`.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub(crate) fn remove(&self, ids: &[NodeId]) -> Result<()> {
        for &id in ids {
            self.remove_file(id)?;
        }
        Ok(())
    }

    pub(super) fn remove_file(&self, id: NodeId) -> Result<()> {
        let path = self.path(id);
        if let Some(len) = self.storage.file_len(&path).map_err(|e| Error::io("stat", &path, e))? {
            self.storage.remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
            let _ = self.disk_bytes.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                Some(b.saturating_sub(len))
            });
        }
        Ok(())
    }

    /// Deletes every leaf file whose leaf is not in `keep` (sorted), and every file in the
    /// directory that is not a leaf file at all is reported as an error rather than touched.
    ///
    /// # Errors
    /// [`Error::Io`]; [`Error::Corrupt`] for a file that is not a leaf file.
    pub(crate) fn remove_all_but(&self, keep: &[NodeId]) -> Result<()> {
        let names = self.storage.list(&self.dir).map_err(|e| Error::io("list", &self.dir, e))?;
        for name in names {
            let id = name.strip_suffix(".leaf").and_then(|n| n.parse::<NodeId>().ok());
            match id {
                Some(id) if keep.binary_search(&id).is_ok() => {}
                Some(id) => self.remove_file(id)?,
                None if name.ends_with(".tmp") => {
                    let path = self.dir.join(&name);
                    self.storage.remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
                }
                None => {
                    return Err(Error::corrupt(
                        &self.dir.join(&name),
                        "an unknown file among the leaf files; move it away and reopen",
                    ));
                }
            }
        }
        Ok(())
    }

    /// Takes over leaf `id`'s file as a snapshot describes it (`records` records in `len`
    /// bytes): checks that it is at least that long and has a good header, and cuts it back to
    /// `len` (what follows is replayed from the namespace's log).
    ///
    /// # Errors
    /// What is wrong, for the recovery report.
    pub(crate) fn adopt(
        &self,
        id: NodeId,
        records: u64,
        len: u64,
    ) -> std::result::Result<(), String> {
        if records == 0 && len == 0 {
            return Ok(());
        }
        let path = self.path(id);
        let fail = |what: String| format!("leaf file {}: {what}", path.display());
        if len < HEADER_LEN + BLOCK_OVERHEAD as u64 || records == 0 {
            return Err(fail(format!("implausible length {len} for {records} records")));
        }
        let actual = self
            .storage
            .file_len(&path)
            .map_err(|e| fail(e.to_string()))?
            .ok_or_else(|| fail("missing".into()))?;
        if actual < len {
            return Err(fail(format!("holds {actual} bytes, the snapshot covers {len}")));
        }
        read_header(self, &path).map_err(|e| fail(e.to_string()))?;
        if actual > len && !self.read_only {
            self.storage.truncate(&path, len).map_err(|e| fail(e.to_string()))?;
        }
        self.disk_bytes.fetch_add(len, Ordering::Relaxed);
        Ok(())
    }

    /// Syncs the files of `ids`.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub(crate) fn sync(&self, ids: &[NodeId]) -> Result<()> {
        for &id in ids {
            let path = self.path(id);
            if self.storage.file_len(&path).map_err(|e| Error::io("stat", &path, e))?.is_some() {
                self.storage.sync_file(&path).map_err(|e| Error::io("fsync", &path, e))?;
            }
        }
        Ok(())
    }
}

/// The data directory `DIR` of leaf files in `DIR/ns/<hex>/leaves` (`None` elsewhere: a spill
/// directory, a restore under way).
fn data_dir_of(leaves: &Path) -> Option<&Path> {
    let ns = leaves.parent()?.parent()?;
    (ns.file_name()? == "ns").then(|| ns.parent()).flatten()
}
