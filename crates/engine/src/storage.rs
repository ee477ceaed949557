//! The file operations persistence needs, behind a trait, so tests can inject faults (a torn
//! write, a full disk, a failed fsync) without touching the real file system's behaviour.

use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
#[cfg(unix)]
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// A file opened for appending.
pub trait AppendFile: Send + Debug {
    /// Appends all of `buf`.
    ///
    /// # Errors
    /// The OS error; after an error the file's tail is unknown (recovery truncates it).
    fn append(&mut self, buf: &[u8]) -> io::Result<()>;
    /// Makes everything appended durable (`fdatasync`).
    ///
    /// # Errors
    /// The OS error. A failed sync poisons the log that owns the file.
    fn sync(&mut self) -> io::Result<()>;
}

/// Where persistence reads and writes. [`OsStorage`] is the real one.
pub trait Storage: Send + Sync + Debug {
    /// Creates `dir` and its parents, durably (each new directory's parent is synced).
    ///
    /// # Errors
    /// The OS error.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// [`Self::create_dir_all`] without syncing the parents: a power loss may take the new
    /// directories back until [`Self::sync_filesystem`] (a new namespace under `everysec`).
    ///
    /// # Errors
    /// The OS error.
    fn create_dir_all_unsynced(&self, dir: &Path) -> io::Result<()> {
        self.create_dir_all(dir)
    }
    /// [`Self::write_atomic`] without its syncs: a crash leaves the old file or the new one,
    /// but a power loss before [`Self::sync_filesystem`] may leave the new name with some or
    /// none of its bytes (a new namespace under `everysec`, whose recovery knows it).
    ///
    /// # Errors
    /// The OS error; `path` is then unchanged.
    fn write_atomic_unsynced(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.write_atomic(path, bytes)
    }
    /// Opens `path` for appending, creating it if missing.
    ///
    /// # Errors
    /// The OS error.
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn AppendFile>>;
    /// The whole content of `path`; `Ok(None)` if it does not exist.
    ///
    /// # Errors
    /// The OS error.
    fn read(&self, path: &Path) -> io::Result<Option<Vec<u8>>>;
    /// Replaces `path` with `bytes` atomically: write a temporary file, sync it, rename it over
    /// `path`, sync the directory. A crash leaves the old file or the new one, never a mix.
    ///
    /// # Errors
    /// The OS error; `path` is then unchanged.
    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()>;
    /// [`Self::write_atomic`] of what `write` writes, streamed: the file is never held in memory
    /// whole.
    ///
    /// # Errors
    /// The OS error or `write`'s; `path` is then unchanged.
    fn write_atomic_with(
        &self,
        path: &Path,
        write: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
    ) -> io::Result<()>;
    /// Opens `path` for a streamed read; `Ok(None)` if it does not exist.
    ///
    /// # Errors
    /// The OS error.
    fn open_read(&self, path: &Path) -> io::Result<Option<Box<dyn Read + Send>>>;
    /// [`Self::open_read`] from byte `offset` on (a reopened log starts at its checkpoint).
    /// The default reads the bytes before `offset` and drops them.
    ///
    /// # Errors
    /// The OS error.
    fn open_read_from(&self, path: &Path, offset: u64) -> io::Result<Option<Box<dyn Read + Send>>> {
        let Some(mut r) = self.open_read(path)? else { return Ok(None) };
        io::copy(&mut (&mut r).take(offset), &mut io::sink())?;
        Ok(Some(r))
    }
    /// Appends `bytes` to `path`, creating it if missing, without syncing (a leaf's fingerprint
    /// file: [`Self::sync_file`] makes it durable at a checkpoint).
    ///
    /// # Errors
    /// The OS error; the file's tail is then unknown.
    fn append_to(&self, path: &Path, bytes: &[u8]) -> io::Result<()>;
    /// Reads up to `buf.len()` bytes of `path` at `offset`; fewer only at the end of the file.
    ///
    /// # Errors
    /// The OS error (a missing file too).
    fn read_at(&self, path: &Path, offset: u64, buf: &mut [u8]) -> io::Result<usize>;
    /// Makes `path`'s content durable (`fdatasync`).
    ///
    /// # Errors
    /// The OS error.
    fn sync_file(&self, path: &Path) -> io::Result<()>;
    /// The length of `path`; `Ok(None)` if it does not exist.
    ///
    /// # Errors
    /// The OS error.
    fn file_len(&self, path: &Path) -> io::Result<Option<u64>>;
    /// Cuts `path` to `len` bytes and syncs it.
    ///
    /// # Errors
    /// The OS error.
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()>;
    /// Removes a file; a missing file is not an error.
    ///
    /// # Errors
    /// The OS error.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// [`Self::remove_file`], durably: the directory is synced after, so a power loss does not
    /// bring the file back.
    ///
    /// # Errors
    /// The OS error.
    fn remove_file_durably(&self, path: &Path) -> io::Result<()> {
        self.remove_file(path)?;
        sync_parent(path)
    }
    /// Removes a directory and everything in it, durably (its parent is synced).
    ///
    /// # Errors
    /// The OS error.
    fn remove_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// The names of the entries of `dir` (empty if it does not exist).
    ///
    /// # Errors
    /// The OS error.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Renames `from` to `to` (a file or a directory), durably: the directories of both are
    /// synced after, so the new name survives a power loss.
    ///
    /// # Errors
    /// The OS error (`NotFound` if `from` does not exist).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Syncs directory `dir`, so that the entries made or removed in it survive a power loss.
    ///
    /// # Errors
    /// The OS error.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Makes everything written to the file system that holds `dir` durable: every file's
    /// data and every directory entry (`syncfs` on Linux, `sync` on other Unixes), in one call
    /// however many files were written. For files no longer open (an unloaded namespace's) or
    /// made without a sync (a new namespace under `everysec`).
    ///
    /// # Errors
    /// The OS error.
    fn sync_filesystem(&self, dir: &Path) -> io::Result<()> {
        sync_filesystem(dir)
    }
    /// Takes the advisory lock of the file at `path` (`flock`), as `mode` says. The OS drops
    /// it when the process dies.
    ///
    /// # Errors
    /// The OS error.
    fn lock(&self, path: &Path, mode: LockMode) -> io::Result<Lock>;
}

/// How [`Storage::lock`] takes a lock file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockMode {
    /// Exclusively, creating the file if missing; once held, the file says `holder` (for
    /// example `pid 42`), which another process refused the lock reads.
    Exclusive {
        /// Who holds it.
        holder: String,
    },
    /// Shared, without creating or writing the file (a reader).
    SharedIfExists,
}

/// What [`Storage::lock`] got.
#[derive(Debug)]
pub enum Lock {
    /// The lock, held until this is dropped.
    Held(LockGuard),
    /// Another process holds it (exclusively, or shared when exclusive was asked).
    Busy {
        /// What the lock file says of its holder (empty if nothing).
        holder: String,
    },
    /// [`LockMode::SharedIfExists`] found no lock file.
    Missing,
}

/// A lock taken by [`Storage::lock`], released when dropped.
#[derive(Debug)]
pub struct LockGuard(
    #[allow(dead_code, reason = "held for its drop")] Box<dyn Debug + Send + Sync>,
);

impl LockGuard {
    /// A guard that releases what `held` holds when dropped (for other [`Storage`]s).
    pub fn new(held: Box<dyn Debug + Send + Sync>) -> Self {
        LockGuard(held)
    }
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsStorage;

#[derive(Debug)]
struct OsFile(File);

impl AppendFile for OsFile {
    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// See [`Storage::sync_filesystem`].
fn sync_filesystem(dir: &Path) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    return Ok(rustix::fs::syncfs(File::open(dir)?)?);
    #[cfg(all(unix, not(target_os = "linux")))]
    {
        let _ = dir;
        rustix::fs::sync();
        return Ok(());
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Err(io::Error::other("no way to sync a file system here"))
    }
}

/// Syncs the directory holding `path`, so that creating or removing `path` survives a power
/// loss (file systems persist a directory entry with its directory, not with the file).
fn sync_parent(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(p) if p.as_os_str().is_empty() => sync_dir(Path::new(".")),
        Some(p) => sync_dir(p),
        None => Ok(()),
    }
}

impl Storage for OsStorage {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut missing = Vec::new();
        let mut at = Some(dir);
        while let Some(d) = at.filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
            missing.push(d);
            at = d.parent();
        }
        fs::create_dir_all(dir)?;
        // Outermost first: each new directory's entry is made durable in its parent.
        for d in missing.iter().rev() {
            sync_parent(d)?;
        }
        Ok(())
    }

    fn create_dir_all_unsynced(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }

    fn write_atomic_unsynced(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let tmp = tmp_path(path);
        fs::write(&tmp, bytes)?;
        fs::rename(&tmp, path)
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn AppendFile>> {
        let existed = path.exists();
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        if !existed && let Some(dir) = path.parent() {
            sync_dir(dir)?;
        }
        Ok(Box::new(OsFile(file)))
    }

    fn read(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        match File::open(path) {
            Ok(mut f) => {
                let mut bytes = Vec::new();
                f.read_to_end(&mut bytes)?;
                Ok(Some(bytes))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.write_atomic_with(path, &mut |w| w.write_all(bytes))
    }

    fn write_atomic_with(
        &self,
        path: &Path,
        write: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
    ) -> io::Result<()> {
        let tmp = tmp_path(path);
        {
            let mut w = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
            let written = write(&mut w).and_then(|()| w.flush());
            if let Err(e) = written {
                drop(w);
                let _ = fs::remove_file(&tmp);
                return Err(e);
            }
            w.get_ref().sync_all()?;
        }
        fs::rename(&tmp, path)?;
        match path.parent() {
            Some(dir) => sync_dir(dir),
            None => Ok(()),
        }
    }

    fn open_read(&self, path: &Path) -> io::Result<Option<Box<dyn Read + Send>>> {
        match File::open(path) {
            Ok(f) => Ok(Some(Box::new(io::BufReader::with_capacity(1 << 20, f)))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn open_read_from(&self, path: &Path, offset: u64) -> io::Result<Option<Box<dyn Read + Send>>> {
        use std::io::{Seek, SeekFrom};
        match File::open(path) {
            Ok(mut f) => {
                f.seek(SeekFrom::Start(offset))?;
                Ok(Some(Box::new(io::BufReader::with_capacity(1 << 20, f))))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn append_to(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        OpenOptions::new().create(true).append(true).open(path)?.write_all(bytes)
    }

    fn read_at(&self, path: &Path, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        #[cfg(not(unix))]
        use std::io::{Seek, SeekFrom};
        #[cfg_attr(unix, allow(unused_mut, reason = "only the seek needs it"))]
        let mut f = File::open(path)?;
        let mut done = 0;
        while done < buf.len() {
            #[cfg(unix)]
            let n = f.read_at(&mut buf[done..], offset + done as u64)?;
            #[cfg(not(unix))]
            let n = {
                f.seek(SeekFrom::Start(offset + done as u64))?;
                f.read(&mut buf[done..])?
            };
            if n == 0 {
                break;
            }
            done += n;
        }
        Ok(done)
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_data()
    }

    fn file_len(&self, path: &Path) -> io::Result<Option<u64>> {
        match fs::metadata(path) {
            Ok(m) => Ok(Some(m.len())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let f = OpenOptions::new().write(true).open(path)?;
        f.set_len(len)?;
        f.sync_all()
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        match fs::remove_file(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        match fs::remove_dir_all(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
            // A dropped namespace must not come back after a power loss.
            Ok(()) => sync_parent(dir),
        }
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        match fs::read_dir(dir) {
            Ok(entries) => {
                entries.map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned())).collect()
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)?;
        sync_parent(to)?;
        if from.parent() != to.parent() {
            sync_parent(from)?;
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        sync_dir(dir)
    }

    fn lock(&self, path: &Path, mode: LockMode) -> io::Result<Lock> {
        let holder_of =
            |path: &Path| fs::read_to_string(path).unwrap_or_default().trim().to_owned();
        match mode {
            LockMode::Exclusive { holder } => {
                let mut file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(path)?;
                match file.try_lock() {
                    Ok(()) => {}
                    Err(fs::TryLockError::WouldBlock) => {
                        return Ok(Lock::Busy { holder: holder_of(path) });
                    }
                    Err(fs::TryLockError::Error(e)) => return Err(e),
                }
                file.set_len(0)?;
                file.write_all(holder.as_bytes())?;
                Ok(Lock::Held(LockGuard(Box::new(file))))
            }
            LockMode::SharedIfExists => {
                let file = match File::open(path) {
                    Ok(file) => file,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Lock::Missing),
                    Err(e) => return Err(e),
                };
                match file.try_lock_shared() {
                    Ok(()) => Ok(Lock::Held(LockGuard(Box::new(file)))),
                    Err(fs::TryLockError::WouldBlock) => Ok(Lock::Busy { holder: holder_of(path) }),
                    Err(fs::TryLockError::Error(e)) => Err(e),
                }
            }
        }
    }
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".tmp");
    path.with_file_name(name)
}

#[cfg(any(test, feature = "testing"))]
mod faulty;
#[cfg(any(test, feature = "testing"))]
pub use faulty::{FaultyStorage, FileOp};
