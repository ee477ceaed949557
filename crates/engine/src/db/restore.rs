//! A restore from a dump (`BF.LOADCHUNK`, `urlseen restore`): its header chunk begins it in a
//! directory aside (or in memory), each data chunk is loaded in order, and the last one
//! publishes the namespace under its name; an unfinished one is dropped.
use super::{
    Access, Arc, ChunkOrder, Db, Error, Header, ITER_HEADER, Mutex, Namespace, Path, PathBuf,
    Result, persist, validate_name,
};

/// What [`Db::load_chunk`] did.
#[derive(Debug)]
pub enum LoadStep {
    /// The header: the restore began.
    Started,
    /// A chunk was loaded; more are to come.
    Loaded,
    /// The final chunk was loaded: the namespace is complete and visible.
    Finished(Arc<Namespace>),
}

/// A restore under way (see [`Db::load_chunk`]).
#[derive(Debug)]
pub(super) struct Restore {
    /// The namespace being filled; `None` once published or abandoned.
    pub(super) ns: Option<Namespace>,
    pub(super) order: ChunkOrder,
    /// Its files (in a data directory, aside; in a spill directory, its own), removed if it
    /// is abandoned.
    pub(super) dir: Option<PathBuf>,
    pub(super) published: bool,
    pub(super) storage: Arc<dyn crate::storage::Storage>,
}

impl Restore {
    /// Abandons it: its namespace and files go.
    pub(super) fn abort(&mut self) {
        drop(self.ns.take());
        if let (false, Some(dir)) = (self.published, self.dir.take()) {
            let _ = self.storage.remove_dir_all(&dir);
        }
    }
}

/// What a restore's namespace directory is called until its last chunk is loaded.
pub(super) const RESTORE_SUFFIX: &str = ".restore.tmp";

pub(super) fn restore_path(root: &Path, name: &str) -> PathBuf {
    let dir = persist::namespace_dir(root, name);
    let mut file = dir.file_name().unwrap_or_default().to_owned();
    file.push(RESTORE_SUFFIX);
    dir.with_file_name(file)
}

impl Db {
    /// Loads one chunk of a dump made by [`Namespace::dump_chunk`] (RedisBloom's
    /// `BF.LOADCHUNK`), with the iterator `dump_chunk` returned with it.
    ///
    /// The header chunk ([`ITER_HEADER`]) starts a restore into `name` (any name: the one it
    /// was dumped from is not used), which must not exist. From then until the final chunk
    /// is loaded, `name` is taken but not visible: [`Db::namespace`] does not find it,
    /// creating it fails with [`Error::Restoring`], [`Db::drop_namespace`] abandons the
    /// restore. Each chunk must follow the one before; a chunk that is damaged, out of order
    /// or from another dump is refused with nothing of it loaded, and the restore goes on
    /// waiting for the right one. The final chunk makes the namespace visible, whole: in a
    /// persistent `Db` it is checkpointed and synced first, so it survives a crash from then
    /// on (a restore cut short by a crash is gone after it: its key never existed).
    ///
    /// The restore rebuilds every leaf filter from the dump's fingerprints, so the namespace
    /// knows every fingerprint of the dump and splits as it grows, as the original would.
    ///
    /// # Errors
    /// [`Error::NoSuchNamespace`] for a data chunk to a name that neither exists nor has a
    /// restore under way (as RedisBloom's `ERR not found`), [`Error::NamespaceExists`] for any
    /// chunk to an existing namespace, [`Error::BadChunk`], [`Error::ChunkOutOfOrder`],
    /// [`Error::ChunkMismatch`], [`Error::ChunkIteratorMismatch`],
    /// [`Error::UnsupportedVersion`], [`Error::CanonVersionMismatch`]; as
    /// [`Db::create_namespace`]. An I/O failure while loading abandons the restore.
    pub fn load_chunk(&self, name: &str, iter: i64, chunk: &[u8]) -> Result<LoadStep> {
        self.refuse_if_read_only()?;
        let pending = self.inner.restores.lock().get(name).cloned();
        let Some(pending) = pending else { return self.begin_restore(name, iter, chunk) };
        let mut restore = pending.lock();
        if restore.published {
            return Err(Error::NamespaceExists(name.to_owned()));
        }
        let Some(ns) = restore.ns.as_ref() else {
            return Err(Error::NoSuchNamespace(name.to_owned()));
        };
        let data = restore.order.check(iter, chunk)?;
        let loaded = ns.restore_records(&data.recorded, &data.kept).and_then(|()| {
            restore.order.advance(&data);
            if data.last { self.publish(name, &mut restore).map(Some) } else { Ok(None) }
        });
        match loaded {
            Ok(Some(ns)) => {
                self.forget_restore(name, &pending);
                Ok(LoadStep::Finished(ns))
            }
            Ok(None) => Ok(LoadStep::Loaded),
            Err(e) => {
                restore.abort();
                self.forget_restore(name, &pending);
                Err(e)
            }
        }
    }

    pub(super) fn begin_restore(&self, name: &str, iter: i64, chunk: &[u8]) -> Result<LoadStep> {
        if iter != ITER_HEADER {
            // A data chunk for a whole namespace is refused as a header for it is: a dump
            // loads only into a new name (the caller answers the two cases apart from "no
            // such key", as RedisBloom does).
            self.expired(name);
            if self.inner.namespaces.read().contains(name) {
                return Err(Error::NamespaceExists(name.to_owned()));
            }
            return Err(Error::NoSuchNamespace(name.to_owned()));
        }
        let header = Header::decode(chunk)?;
        if header.options.counting {
            return Err(Error::DumpUnsupported {
                name: name.to_owned(),
                reason: "a counting namespace cannot be restored from a dump",
            });
        }
        validate_name(name)?;
        self.expired(name);
        let inner = &self.inner;
        let map = inner.namespaces.write();
        if map.contains(name) {
            return Err(Error::NamespaceExists(name.to_owned()));
        }
        let mut restores = inner.restores.lock();
        if restores.contains_key(name) {
            return Err(Error::Restoring(name.to_owned()));
        }
        let aside = inner.root.as_ref().map(|(root, _)| restore_path(root, name));
        let order = ChunkOrder::after(&header);
        let ns = self.build(name, header.options, aside.clone())?;
        let spill = inner.spill.as_ref().map(|s| persist::namespace_dir(s.path(), name));
        let restore = Restore {
            ns: Some(ns),
            order,
            dir: aside.or(spill),
            published: false,
            storage: Arc::clone(&inner.options.storage),
        };
        restores.insert(name.to_owned(), Arc::new(Mutex::new(restore)));
        drop(map);
        Ok(LoadStep::Started)
    }

    /// Makes a restored namespace visible: in a data directory, checkpointed and synced where
    /// it was built, moved to its own directory and opened there.
    pub(super) fn publish(&self, name: &str, restore: &mut Restore) -> Result<Arc<Namespace>> {
        let inner = &self.inner;
        let Some(ns) = restore.ns.take() else {
            return Err(Error::NoSuchNamespace(name.to_owned()));
        };
        ns.complete_splits();
        let ns = match (&inner.root, restore.dir.clone()) {
            (Some((root, _)), Some(aside)) => {
                // No split of it may run while its files move (splits are started by writes,
                // and the last write was its last chunk).
                inner.workers.wait_idle();
                ns.complete_splits();
                ns.checkpoint()?;
                ns.sync()?;
                drop(ns);
                let dir = persist::namespace_dir(root, name);
                let storage = &inner.options.storage;
                storage.remove_dir_all(&dir).map_err(|e| Error::io("remove leftover", &dir, e))?;
                // Durably: the new name is synced with its directory.
                storage.rename(&aside, &dir).map_err(|e| Error::io("rename", &aside, e))?;
                restore.dir = Some(dir.clone());
                match persist::load(&dir, &inner.options, &inner.workers, Access::ReadWrite)? {
                    Some((_, ns)) => ns,
                    None => return Err(Error::corrupt(&dir, "the restored namespace has no meta")),
                }
            }
            _ => Arc::new(ns),
        };
        ns.join_ledger(&inner.ledger);
        let mut map = inner.namespaces.write();
        inner.expiries.created(name)?;
        if let Err(e) = self.add_loaded(&mut map, &ns) {
            // Its files are in place: it is there, to be loaded when there is room.
            drop(ns);
            map.add_on_disk(name.to_owned());
            restore.published = true;
            return Err(e);
        }
        restore.published = true;
        Ok(ns)
    }

    pub(super) fn forget_restore(&self, name: &str, pending: &Arc<Mutex<Restore>>) {
        let mut restores = self.inner.restores.lock();
        if restores.get(name).is_some_and(|p| Arc::ptr_eq(p, pending)) {
            restores.remove(name);
        }
    }

    /// Names of the namespaces being restored ([`Db::load_chunk`]), sorted.
    pub fn restoring(&self) -> Vec<String> {
        let mut names: Vec<String> = self.inner.restores.lock().keys().cloned().collect();
        names.sort();
        names
    }
}
