//! Exact mode's index of one DSBF leaf: the leaf's own fingerprints, sorted, so that a Bloom
//! positive is confirmed against the records the leaf already holds, not against a second store.
//!
//! Per leaf, an LSM tree in miniature (IRLbot's DRUM keeps its disk buckets the same way):
//! - the **tail**: fingerprints recorded since the last run was cut, in a hash set in RAM (at
//!   most [`TAIL_MAX`], about 0.5 MiB; fewer in small leaves);
//! - **runs**: sorted, immutable arrays of fingerprints. On disk, RAM holds one fence pointer
//!   (the first fingerprint) per page of [`PAGE`] fingerprints, 0.125 bytes per URL, so a lookup
//!   costs one 512-byte read per run. In a tree in memory a run is a sorted slice on the heap.
//! - A full tail is sorted into a run of tier 0. When the newest [`MERGE_FANOUT`] runs share a
//!   tier `t`, they are merged into one run of tier `t + 1` (size-tiered compaction, with
//!   sequential reads and writes only). A leaf of `n` fingerprints then holds at most
//!   `(MERGE_FANOUT − 1) · log₄(n / TAIL_MAX) + 1` runs, and each fingerprint is rewritten
//!   `log₄(n / TAIL_MAX)` times.
//!
//! # Derived data
//! A leaf's file (see [`leaf_log`](crate::leaf_log)) is its source of truth; the index is
//! derived from it. Run files carry no format version or checksum, are never fsynced, are
//! deleted when their run is merged or their leaf retires, and the whole index directory is
//! rebuilt from the leaf files each time an exact namespace is opened
//! ([`Dsbf::enable_exact`](crate::tree::Dsbf::enable_exact)). So a crash can leave nothing in it
//! that recovery must trust.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::exact::FpBuildHasher;

/// The most fingerprints a leaf keeps in its in-RAM tail before it sorts them into a run. A
/// small leaf keeps an eighth of its split point (at least [`TAIL_MIN`]), so that it has runs
/// too, and its tail stays a small part of its RAM.
pub const TAIL_MAX: usize = 1 << 15;
/// The fewest fingerprints a tail holds before it becomes a run.
pub const TAIL_MIN: usize = 64;
/// Runs of one tier merged into one of the next.
pub const MERGE_FANOUT: usize = 4;
/// Fingerprints per fence pointer: one lookup reads this many (512 bytes).
pub const PAGE: usize = 64;
/// Fingerprints [`LeafIndex::build`] sorts into one run (8 MiB).
pub const BUILD_CHUNK: usize = 1 << 20;
/// Fingerprints a merge reads from each run at once.
const MERGE_CHUNK: usize = 8192;

/// Where a tree's leaf indexes keep their runs, and counters over all of them.
#[derive(Debug)]
pub struct IndexStore {
    /// The directory of run files; `None`: runs live on the heap.
    dir: Option<PathBuf>,
    next_run: AtomicU64,
    disk_bytes: AtomicU64,
    memory_bytes: AtomicU64,
    counters: IndexCounters,
    /// The first failed write or read: from then on the tree refuses writes (see
    /// [`Self::check`]).
    failure: Mutex<Option<String>>,
}

/// What the leaf indexes of a tree did since it was opened.
#[derive(Debug, Default)]
struct IndexCounters {
    run_reads: AtomicU64,
    runs_written: AtomicU64,
    merges: AtomicU64,
}

/// Counters and sizes of a tree's leaf indexes (see [`Dsbf::index_stats`](crate::tree::Dsbf::index_stats)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IndexStats {
    /// Page reads of runs (on disk: one 512-byte `pread` each; in memory, a binary search).
    pub run_reads: u64,
    /// Runs written (tails sorted out, and merges).
    pub runs_written: u64,
    /// Merges of runs.
    pub merges: u64,
    /// Bytes of run files.
    pub disk_bytes: u64,
    /// Bytes of runs on the heap (a tree in memory) and of fence pointers.
    pub run_memory_bytes: u64,
}

impl IndexStore {
    /// Runs on the heap.
    pub fn in_memory() -> Arc<Self> {
        Arc::new(Self::with_dir(None))
    }

    /// Runs in files in `dir`, which is emptied (whatever a previous run left there is derived
    /// data) or created.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn create(dir: PathBuf) -> Result<Arc<Self>> {
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("remove index directory", &dir, e)),
        }
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("create directory", &dir, e))?;
        Ok(Arc::new(Self::with_dir(Some(dir))))
    }

    fn with_dir(dir: Option<PathBuf>) -> Self {
        IndexStore {
            dir,
            next_run: AtomicU64::new(0),
            disk_bytes: AtomicU64::new(0),
            memory_bytes: AtomicU64::new(0),
            counters: IndexCounters::default(),
            failure: Mutex::new(None),
        }
    }

    /// Records a failed run write or read. A write failure keeps the fingerprints in the tail
    /// and a read failure answers "seen" (never a false "new"), but neither may be
    /// acknowledged: the namespace checks [`Self::check`] after every batch.
    pub fn fail(&self, e: &Error) {
        let mut failure = self.failure.lock();
        if failure.is_none() {
            *failure = Some(format!("exact index: {e}; reopen to rebuild it from the leaf files"));
        }
    }

    /// # Errors
    /// [`Error::Poisoned`] after [`Self::fail`].
    pub fn check(&self) -> Result<()> {
        match &*self.failure.lock() {
            None => Ok(()),
            Some(reason) => Err(Error::Poisoned { reason: reason.clone() }),
        }
    }

    /// The counters and sizes now.
    pub fn stats(&self) -> IndexStats {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        IndexStats {
            run_reads: get(&self.counters.run_reads),
            runs_written: get(&self.counters.runs_written),
            merges: get(&self.counters.merges),
            disk_bytes: get(&self.disk_bytes),
            run_memory_bytes: get(&self.memory_bytes),
        }
    }

    fn writer(self: &Arc<Self>, tier: u32) -> Result<RunWriter> {
        let sink = match &self.dir {
            None => Sink::Memory(Vec::new()),
            Some(dir) => {
                let n = self.next_run.fetch_add(1, Ordering::Relaxed);
                let path = dir.join(format!("{n}.run"));
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .map_err(|e| Error::io("create run", &path, e))?;
                Sink::File { out: BufWriter::with_capacity(1 << 16, file), path }
            }
        };
        Ok(RunWriter { store: Arc::clone(self), sink, fences: Vec::new(), len: 0, tier })
    }
}

impl Drop for IndexStore {
    fn drop(&mut self) {
        // Every run holds the store, so none is left: only the (now empty) directory is.
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// One sorted, immutable run of fingerprints.
#[derive(Debug)]
pub struct Run {
    store: Arc<IndexStore>,
    len: usize,
    tier: u32,
    /// The first fingerprint of every page.
    fences: Box<[u64]>,
    data: RunData,
}

#[derive(Debug)]
enum RunData {
    Memory(Box<[u64]>),
    File { file: File, path: PathBuf },
}

impl Run {
    /// Whether the run holds `fp`.
    fn contains(&self, fp: u64) -> Result<bool> {
        let page = self.fences.partition_point(|&f| f <= fp);
        if page == 0 {
            return Ok(false);
        }
        let start = (page - 1) * PAGE;
        let n = PAGE.min(self.len - start);
        match &self.data {
            RunData::Memory(fps) => {
                self.store.counters.run_reads.fetch_add(1, Ordering::Relaxed);
                Ok(fps[start..start + n].binary_search(&fp).is_ok())
            }
            RunData::File { file, path } => {
                self.store.counters.run_reads.fetch_add(1, Ordering::Relaxed);
                let mut raw = [0u8; PAGE * 8];
                read_exact_at(file, &mut raw[..n * 8], start as u64 * 8)
                    .map_err(|e| Error::io("read run", path, e))?;
                let page: Vec<u64> = raw[..n * 8]
                    .chunks_exact(8)
                    .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
                    .collect();
                Ok(page.binary_search(&fp).is_ok())
            }
        }
    }

    /// Reads fingerprints `start..start + out.len()` into `out`.
    fn read(&self, start: usize, out: &mut [u64]) -> Result<()> {
        match &self.data {
            RunData::Memory(fps) => out.copy_from_slice(&fps[start..start + out.len()]),
            RunData::File { file, path } => {
                let mut raw = vec![0u8; out.len() * 8];
                read_exact_at(file, &mut raw, start as u64 * 8)
                    .map_err(|e| Error::io("read run", path, e))?;
                for (slot, b) in out.iter_mut().zip(raw.chunks_exact(8)) {
                    *slot = u64::from_le_bytes(b.try_into().unwrap_or_default());
                }
            }
        }
        Ok(())
    }

    fn memory_bytes(&self) -> u64 {
        let data = match &self.data {
            RunData::Memory(fps) => fps.len() * 8,
            RunData::File { .. } => 0,
        };
        (data + self.fences.len() * 8) as u64
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        sub(&self.store.memory_bytes, self.memory_bytes());
        if let RunData::File { path, .. } = &self.data {
            sub(&self.store.disk_bytes, self.len as u64 * 8);
            // A run that cannot be removed is only wasted space: the directory is emptied at the
            // next open.
            let _ = std::fs::remove_file(path);
        }
    }
}

fn sub(counter: &AtomicU64, n: u64) {
    let _ =
        counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| Some(b.saturating_sub(n)));
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, offset)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

/// Builds one run from fingerprints given in ascending order.
struct RunWriter {
    store: Arc<IndexStore>,
    sink: Sink,
    fences: Vec<u64>,
    len: usize,
    tier: u32,
}

enum Sink {
    Memory(Vec<u64>),
    File { out: BufWriter<File>, path: PathBuf },
}

impl Drop for RunWriter {
    fn drop(&mut self) {
        // Unfinished (a failed write): its partial file goes. `finish` empties `sink` first.
        if let Sink::File { path, .. } = &self.sink {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl RunWriter {
    fn push(&mut self, fp: u64) -> Result<()> {
        if self.len.is_multiple_of(PAGE) {
            self.fences.push(fp);
        }
        self.len += 1;
        match &mut self.sink {
            Sink::Memory(v) => v.push(fp),
            Sink::File { out, path } => {
                out.write_all(&fp.to_le_bytes()).map_err(|e| Error::io("write run", path, e))?;
            }
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Run> {
        let sink = std::mem::replace(&mut self.sink, Sink::Memory(Vec::new()));
        let (store, fences, len, tier) =
            (Arc::clone(&self.store), std::mem::take(&mut self.fences), self.len, self.tier);
        let data = match sink {
            Sink::Memory(v) => RunData::Memory(v.into_boxed_slice()),
            Sink::File { out, path } => {
                let file = out.into_inner().map_err(|e| {
                    let _ = std::fs::remove_file(&path);
                    Error::io("write run", &path, e.into_error())
                })?;
                store.disk_bytes.fetch_add(len as u64 * 8, Ordering::Relaxed);
                RunData::File { file, path }
            }
        };
        store.counters.runs_written.fetch_add(1, Ordering::Relaxed);
        let run = Run { store, len, tier, fences: fences.into_boxed_slice(), data };
        run.store.memory_bytes.fetch_add(run.memory_bytes(), Ordering::Relaxed);
        Ok(run)
    }
}

/// Where [`LeafIndex::find`] found a fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// Not recorded.
    No,
    /// In the tail, in RAM: recorded recently.
    Tail,
    /// In a run: found at the cost of reads.
    Run,
}

/// One leaf's exact index: see the [module docs](self). Called under the leaf's lock (or on a
/// frozen leaf, which no one writes).
#[derive(Debug)]
pub struct LeafIndex {
    tail: HashSet<u64, FpBuildHasher>,
    tail_max: usize,
    /// Oldest first.
    runs: Vec<Run>,
}

impl LeafIndex {
    /// An empty index for a leaf that splits at `split_at` fingerprints.
    pub fn new(split_at: u64) -> Self {
        let tail_max = usize::try_from(split_at / 8).unwrap_or(TAIL_MAX).clamp(TAIL_MIN, TAIL_MAX);
        LeafIndex { tail: HashSet::default(), tail_max, runs: Vec::new() }
    }

    /// The index of a leaf's existing records, in bulk: `next` fills a chunk of fingerprints
    /// (from the leaf's file) and returns `Ok(false)` after the last one. Each chunk of up to
    /// [`BUILD_CHUNK`] is sorted into a run, and the runs are merged into one: a sequential read
    /// of the file and about one write of the index, with no tail churn.
    ///
    /// # Errors
    /// Those of `next`; [`Error::Io`] writing a run.
    pub fn build(
        store: &Arc<IndexStore>,
        split_at: u64,
        mut next: impl FnMut(&mut Vec<u64>) -> Result<bool>,
    ) -> Result<LeafIndex> {
        let mut index = LeafIndex::new(split_at);
        let mut runs = Vec::new();
        let mut chunk = Vec::new();
        let mut more = true;
        while more {
            chunk.clear();
            while more && chunk.len() < BUILD_CHUNK {
                more = next(&mut chunk)?;
            }
            chunk.sort_unstable();
            chunk.dedup();
            if chunk.is_empty() {
                continue;
            }
            let mut w = store.writer(0)?;
            for &fp in &chunk {
                w.push(fp)?;
            }
            runs.push(w.finish()?);
        }
        if runs.len() > 1 {
            runs = vec![merge(store, &runs, 0)?];
        }
        if let Some(mut run) = runs.pop() {
            // The tier its size would have reached by merging, so later runs merge into it
            // only once they are as big.
            while index.tail_max.saturating_mul(MERGE_FANOUT.pow(run.tier + 1)) <= run.len {
                run.tier += 1;
            }
            index.runs.push(run);
        }
        Ok(index)
    }

    /// Records `fp`. A full tail becomes a run (and runs may merge), all under the caller's
    /// lock: sequential I/O of at most the leaf's own index.
    ///
    /// # Errors
    /// [`Error::Io`] writing a run; `fp` is then still in the tail, so nothing is lost in RAM.
    pub fn insert(&mut self, store: &Arc<IndexStore>, fp: u64) -> Result<()> {
        self.tail.insert(fp);
        if self.tail.len() >= self.tail_max { self.cut_run(store) } else { Ok(()) }
    }

    /// Sorts the tail into a new run, then merges runs while the newest [`MERGE_FANOUT`] share a
    /// tier.
    fn cut_run(&mut self, store: &Arc<IndexStore>) -> Result<()> {
        let mut fps: Vec<u64> = self.tail.iter().copied().collect();
        fps.sort_unstable();
        let mut w = store.writer(0)?;
        for fp in fps {
            w.push(fp)?;
        }
        self.runs.push(w.finish()?);
        self.tail.clear();
        loop {
            let n = self.runs.len();
            let tier = match self.runs.last() {
                Some(r) if n >= MERGE_FANOUT => r.tier,
                _ => return Ok(()),
            };
            if self.runs[n - MERGE_FANOUT..].iter().any(|r| r.tier != tier) {
                return Ok(());
            }
            let merged = merge(store, &self.runs[n - MERGE_FANOUT..], tier + 1)?;
            // Dropping the merged runs deletes their files.
            self.runs.truncate(n - MERGE_FANOUT);
            self.runs.push(merged);
        }
    }

    /// Whether `fp` is recorded, and where: the tail, then the runs, newest first.
    ///
    /// # Errors
    /// [`Error::Io`] reading a run.
    pub fn find(&self, fp: u64) -> Result<Found> {
        if self.tail.contains(&fp) {
            return Ok(Found::Tail);
        }
        for run in self.runs.iter().rev() {
            if run.contains(fp)? {
                return Ok(Found::Run);
            }
        }
        Ok(Found::No)
    }

    /// Whether `fp` is in the tail (recorded lately): no reads.
    pub fn in_tail(&self, fp: u64) -> bool {
        self.tail.contains(&fp)
    }

    /// Whether `fp` is recorded.
    ///
    /// # Errors
    /// [`Error::Io`] reading a run.
    pub fn contains(&self, fp: u64) -> Result<bool> {
        Ok(self.find(fp)? != Found::No)
    }

    /// Fingerprints indexed.
    pub fn len(&self) -> u64 {
        self.tail.len() as u64 + self.runs.iter().map(|r| r.len as u64).sum::<u64>()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs now.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// RAM of the tail (a hash set: a fingerprint and a control byte per slot).
    pub fn tail_memory_bytes(&self) -> u64 {
        self.tail.capacity() as u64 * 9
    }
}

/// Merges sorted `runs` into one run of `tier`, reading each in chunks.
fn merge(store: &Arc<IndexStore>, runs: &[Run], tier: u32) -> Result<Run> {
    store.counters.merges.fetch_add(1, Ordering::Relaxed);
    struct Cursor<'a> {
        run: &'a Run,
        next: usize,
        buf: Vec<u64>,
        at: usize,
    }
    impl Cursor<'_> {
        fn peek(&mut self) -> Result<Option<u64>> {
            if self.at == self.buf.len() {
                let n = MERGE_CHUNK.min(self.run.len - self.next);
                if n == 0 {
                    return Ok(None);
                }
                self.buf.resize(n, 0);
                self.run.read(self.next, &mut self.buf)?;
                self.next += n;
                self.at = 0;
            }
            Ok(Some(self.buf[self.at]))
        }
    }
    let mut cursors: Vec<Cursor<'_>> =
        runs.iter().map(|run| Cursor { run, next: 0, buf: Vec::new(), at: 0 }).collect();
    let mut w = store.writer(tier)?;
    loop {
        let mut best: Option<(usize, u64)> = None;
        for (i, c) in cursors.iter_mut().enumerate() {
            if let Some(fp) = c.peek()?
                && best.is_none_or(|(_, b)| fp < b)
            {
                best = Some((i, fp));
            }
        }
        let Some((i, fp)) = best else { break };
        cursors[i].at += 1;
        w.push(fp)?;
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fps(n: u64, salt: u64) -> Vec<u64> {
        (0..n).map(|i| urlseen_filter::hash::mix64(i + (salt << 40))).collect()
    }

    fn check(store: &Arc<IndexStore>) {
        // Tails of 1,024: 20 of them become runs.
        let mut index = LeafIndex::new(8 * 1024);
        let recorded = fps(1024 * 20 + 7, 1);
        for &fp in &recorded {
            index.insert(store, fp).unwrap();
        }
        assert_eq!(index.len(), recorded.len() as u64);
        // 20 runs of tier 0 merge into 1 of tier 2 and 1 of tier 1: bounded, not 20.
        assert!(index.runs() <= 2 * (MERGE_FANOUT - 1), "{} runs", index.runs());
        for &fp in &recorded {
            assert!(index.contains(fp).unwrap(), "recorded {fp:#x} not found");
        }
        let others = fps(100_000, 2);
        let found = others.iter().filter(|&&fp| index.contains(fp).unwrap()).count();
        assert_eq!(found, 0);
    }

    #[test]
    fn every_recorded_fingerprint_is_found_in_memory() {
        check(&IndexStore::in_memory());
    }

    #[test]
    fn every_recorded_fingerprint_is_found_on_disk_and_files_go_with_their_runs() {
        let dir = tempfile::tempdir().unwrap();
        let store = IndexStore::create(dir.path().join("index")).unwrap();
        check(&store);
        let s = store.stats();
        assert_eq!(s.disk_bytes, 0, "every run is dropped with its index");
        assert!(s.merges > 0 && s.run_reads > 0, "{s:?}");
        assert_eq!(std::fs::read_dir(dir.path().join("index")).unwrap().count(), 0);
        drop(store);
        assert!(!dir.path().join("index").exists());
    }

    #[test]
    fn a_bulk_build_finds_everything_and_later_inserts_merge_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = IndexStore::create(dir.path().join("index")).unwrap();
        let recorded = fps(BUILD_CHUNK as u64 + 1000, 5);
        let mut chunks = recorded.chunks(70_000);
        let mut index = LeafIndex::build(&store, 1 << 20, |out| match chunks.next() {
            Some(c) => {
                out.extend_from_slice(c);
                Ok(true)
            }
            None => Ok(false),
        })
        .unwrap();
        assert_eq!(index.runs(), 1);
        assert_eq!(index.len(), recorded.len() as u64);
        let later = fps(50_000, 6);
        for &fp in &later {
            index.insert(&store, fp).unwrap();
        }
        for &fp in recorded.iter().chain(&later) {
            assert!(index.contains(fp).unwrap(), "{fp:#x} not found");
        }
        assert!(!fps(10_000, 7).iter().any(|&fp| index.contains(fp).unwrap()));
    }

    #[test]
    fn a_run_that_cannot_be_read_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let store = IndexStore::create(dir.path().join("index")).unwrap();
        let mut index = LeafIndex::new(8 * 1024);
        for fp in fps(1024, 3) {
            index.insert(&store, fp).unwrap();
        }
        assert_eq!(index.runs(), 1);
        let run = std::fs::read_dir(dir.path().join("index")).unwrap().next().unwrap().unwrap();
        std::fs::OpenOptions::new().write(true).open(run.path()).unwrap().set_len(8).unwrap();
        let probe = fps(1024, 3)[1023];
        assert!(matches!(index.contains(probe), Err(Error::Io { .. })));
    }
}
