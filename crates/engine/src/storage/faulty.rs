//! [`FaultyStorage`]: the fault-injecting [`Storage`] the tests use, behind the `testing`
//! feature (and in the crate's own unit tests), so it is not part of the public API of a normal
//! build.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use super::{AppendFile, Lock, LockMode, OsStorage, Storage};

/// [`OsStorage`] with switches that make it fail the way disks fail, for tests.
///
/// - `fail_syncs`: every `sync` fails with an I/O error (a failed fsync).
/// - `disk_full_after`: appends fail with "no space left" once this many bytes were appended in
///   total; the append that crosses the limit writes only the bytes that fit (a torn write).
/// - `slow_syncs`: every `sync` takes this long (a slow disk), so tests can act while one runs;
///   `syncs_done` counts the syncs that completed.
/// - `fail_opens`: opening a file to append to it fails with "too many open files" (`EMFILE`:
///   the process ran out of file descriptors), as appends to a leaf file (opened per write) do.
/// - `keep_journal`: every append to and sync of an appended file is recorded, in order
///   ([`FaultyStorage::journal`]), so tests can check which file reached the disk first.
#[derive(Debug, Clone, Default)]
pub struct FaultyStorage {
    inner: OsStorage,
    faults: Arc<Faults>,
}

#[derive(Debug, Default)]
struct Faults {
    fail_syncs: AtomicBool,
    fail_opens: AtomicBool,
    disk_full_after: AtomicU64,
    appended: AtomicU64,
    sync_delay_micros: AtomicU64,
    syncs_done: AtomicU64,
    keep_journal: AtomicBool,
    journal: Mutex<Vec<(FileOp, PathBuf)>>,
}

/// What [`FaultyStorage::journal`] records of an appended file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileOp {
    /// Bytes were appended (handed to the OS).
    Append,
    /// The file was synced.
    Sync,
}

impl Faults {
    /// Fails as opening a file does when the process has no descriptor left.
    fn open(&self) -> io::Result<()> {
        match self.fail_opens.load(Ordering::SeqCst) {
            // EMFILE on Linux and the BSDs.
            true => Err(io::Error::from_raw_os_error(24)),
            false => Ok(()),
        }
    }

    fn note(&self, op: FileOp, path: &Path) {
        if self.keep_journal.load(Ordering::SeqCst) {
            self.journal.lock().push((op, path.to_owned()));
        }
    }
}

impl FaultyStorage {
    /// Real storage with no fault switched on yet.
    pub fn new() -> Self {
        let s = FaultyStorage::default();
        s.faults.disk_full_after.store(u64::MAX, Ordering::SeqCst);
        s
    }

    /// Makes every later `sync` fail (or succeed again).
    pub fn fail_syncs(&self, on: bool) {
        self.faults.fail_syncs.store(on, Ordering::SeqCst);
    }

    /// Makes every later opening of a file to append to it fail with `EMFILE` (or succeed
    /// again).
    pub fn fail_opens(&self, on: bool) {
        self.faults.fail_opens.store(on, Ordering::SeqCst);
    }

    /// Makes every later `sync` take `delay` before it does its work.
    pub fn slow_syncs(&self, delay: std::time::Duration) {
        self.faults.sync_delay_micros.store(delay.as_micros() as u64, Ordering::SeqCst);
    }

    /// How many syncs of appended files have completed.
    pub fn syncs_done(&self) -> u64 {
        self.faults.syncs_done.load(Ordering::SeqCst)
    }

    /// Starts (or stops) recording every append to and sync of an appended file.
    pub fn keep_journal(&self, on: bool) {
        self.faults.keep_journal.store(on, Ordering::SeqCst);
    }

    /// The appends and syncs recorded since [`Self::keep_journal`], in order.
    pub fn journal(&self) -> Vec<(FileOp, PathBuf)> {
        self.faults.journal.lock().clone()
    }

    /// Makes the disk full once `bytes` more bytes have been appended (`u64::MAX`: space is
    /// free again).
    pub fn disk_full_after(&self, bytes: u64) {
        let now = self.faults.appended.load(Ordering::SeqCst);
        self.faults.disk_full_after.store(now.saturating_add(bytes), Ordering::SeqCst);
    }
}

#[derive(Debug)]
struct FaultyFile {
    inner: Box<dyn AppendFile>,
    faults: Arc<Faults>,
    path: PathBuf,
}

impl AppendFile for FaultyFile {
    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        let before = self.faults.appended.fetch_add(buf.len() as u64, Ordering::SeqCst);
        let limit = self.faults.disk_full_after.load(Ordering::SeqCst);
        if before.saturating_add(buf.len() as u64) > limit {
            let fits = limit.saturating_sub(before) as usize;
            self.inner.append(&buf[..fits.min(buf.len())])?;
            return Err(io::Error::new(io::ErrorKind::StorageFull, "no space left on device"));
        }
        self.inner.append(buf)?;
        self.faults.note(FileOp::Append, &self.path);
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        let delay = self.faults.sync_delay_micros.load(Ordering::SeqCst);
        if delay > 0 {
            std::thread::sleep(std::time::Duration::from_micros(delay));
        }
        if self.faults.fail_syncs.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected fsync failure"));
        }
        self.inner.sync()?;
        self.faults.syncs_done.fetch_add(1, Ordering::SeqCst);
        self.faults.note(FileOp::Sync, &self.path);
        Ok(())
    }
}

impl Storage for FaultyStorage {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn AppendFile>> {
        self.faults.open()?;
        Ok(Box::new(FaultyFile {
            inner: self.inner.open_append(path)?,
            faults: self.faults.clone(),
            path: path.to_owned(),
        }))
    }

    fn read(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        self.inner.read(path)
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        if self.faults.fail_syncs.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected fsync failure"));
        }
        self.inner.write_atomic(path, bytes)
    }

    fn write_atomic_with(
        &self,
        path: &Path,
        write: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
    ) -> io::Result<()> {
        if self.faults.fail_syncs.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected fsync failure"));
        }
        self.inner.write_atomic_with(path, write)
    }

    fn open_read(&self, path: &Path) -> io::Result<Option<Box<dyn Read + Send>>> {
        self.inner.open_read(path)
    }

    fn open_read_from(&self, path: &Path, offset: u64) -> io::Result<Option<Box<dyn Read + Send>>> {
        self.inner.open_read_from(path, offset)
    }

    fn append_to(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.faults.open()?;
        let before = self.faults.appended.fetch_add(bytes.len() as u64, Ordering::SeqCst);
        let limit = self.faults.disk_full_after.load(Ordering::SeqCst);
        if before.saturating_add(bytes.len() as u64) > limit {
            let fits = limit.saturating_sub(before) as usize;
            self.inner.append_to(path, &bytes[..fits.min(bytes.len())])?;
            return Err(io::Error::new(io::ErrorKind::StorageFull, "no space left on device"));
        }
        self.inner.append_to(path, bytes)
    }

    fn read_at(&self, path: &Path, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read_at(path, offset, buf)
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        if self.faults.fail_syncs.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected fsync failure"));
        }
        self.inner.sync_file(path)
    }

    fn file_len(&self, path: &Path) -> io::Result<Option<u64>> {
        self.inner.file_len(path)
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        self.inner.truncate(path, len)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }

    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.remove_dir_all(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        if self.faults.fail_syncs.load(Ordering::SeqCst) {
            // Renamed, but the directory sync that makes it durable fails.
            std::fs::rename(from, to)?;
            return Err(io::Error::other("injected fsync failure"));
        }
        self.inner.rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        if self.faults.fail_syncs.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected fsync failure"));
        }
        self.inner.sync_dir(dir)
    }

    fn lock(&self, path: &Path, mode: LockMode) -> io::Result<Lock> {
        self.inner.lock(path, mode)
    }
}
