//! The data directory's lock (`DIR/LOCK`): exclusive for the process that has it open, shared
//! for a reader that must not see the files change under it.

use std::path::Path;

use crate::error::{Error, Result};
use crate::storage::{Lock, LockGuard, LockMode, Storage};

/// Exclusive ownership of a data directory for this process, released when dropped (or when the
/// process dies: the OS drops the lock with the file descriptor).
#[derive(Debug)]
pub(super) struct DirLock {
    _held: LockGuard,
}

impl DirLock {
    pub fn acquire(storage: &dyn Storage, root: &Path) -> Result<Self> {
        storage.create_dir_all(root).map_err(|e| Error::io("create data directory", root, e))?;
        let path = root.join("LOCK");
        let mode = LockMode::Exclusive { holder: format!("pid {}", std::process::id()) };
        match storage.lock(&path, mode).map_err(|e| Error::io("lock", &path, e))? {
            Lock::Held(held) => Ok(DirLock { _held: held }),
            Lock::Busy { holder } => Err(Self::busy(root, holder)),
            Lock::Missing => Err(Error::corrupt(&path, "the lock file vanished")),
        }
    }

    /// A shared lock on `root`'s lock file, for a reader that must not see the files change
    /// under it (a read-write open holds the lock exclusively), taken without writing: the
    /// file is opened for reading and its content (the last writer's pid) left as it is.
    /// `Ok(None)` when there is no lock file: then no process has the directory open (every
    /// read-write open creates it first), and creating one would change the directory. A
    /// writer that starts after this check is not kept out; one that starts while the lock is
    /// held is refused as [`Error::Locked`] (naming the last writer's pid, as the file does).
    ///
    /// # Errors
    /// [`Error::Locked`] if a process has the directory open read-write; [`Error::Io`].
    pub fn shared_if_exists(storage: &dyn Storage, root: &Path) -> Result<Option<Self>> {
        let path = root.join("LOCK");
        match storage
            .lock(&path, LockMode::SharedIfExists)
            .map_err(|e| Error::io("lock", &path, e))?
        {
            Lock::Held(held) => Ok(Some(DirLock { _held: held })),
            Lock::Busy { holder } => Err(Self::busy(root, holder)),
            Lock::Missing => Ok(None),
        }
    }

    fn busy(root: &Path, holder: String) -> Error {
        let holder = if holder.is_empty() { "unknown process".into() } else { holder };
        Error::Locked { dir: root.to_owned(), holder }
    }
}
