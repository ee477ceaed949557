//! A namespace: one crawl job's URL-seen set, a DSBF plus the way its URLs are canonicalized.

use std::cell::RefCell;
use std::sync::Arc;

use serde::Serialize;
use urlseen_canon::Canonicalizer;
use urlseen_filter::hash;

use crate::error::{Error, Result};
use crate::options::NamespaceOptions;
use crate::persist::{Durable, RecoveryReport};
use crate::tree::{Dsbf, LeafStats, Mode, SplitWorkers};

thread_local! {
    /// One canonicalization buffer per thread: no allocation per URL on the hot path.
    static CANON_BUF: RefCell<String> = RefCell::new(String::with_capacity(256));
}

/// One crawl job's URL-seen set. Cheap to share (`Arc`), `Send + Sync`.
#[derive(Debug)]
pub struct Namespace {
    name: String,
    options: NamespaceOptions,
    canon: Canonicalizer,
    tree: Arc<Dsbf>,
    durable: Option<Durable>,
}

impl Namespace {
    pub(crate) fn new(
        name: String,
        options: NamespaceOptions,
        workers: Arc<SplitWorkers>,
    ) -> Result<Self> {
        options.validate()?;
        let tree = Dsbf::new(crate::persist::tree_params(&options), workers);
        Ok(Self::from_parts(name, options, tree, None))
    }

    pub(crate) fn from_parts(
        name: String,
        options: NamespaceOptions,
        tree: Arc<Dsbf>,
        durable: Option<Durable>,
    ) -> Self {
        let canon = Canonicalizer::new(options.canon.clone());
        Namespace { name, options, canon, tree, durable }
    }

    pub(crate) fn durable(&self) -> Option<&Durable> {
        self.durable.as_ref()
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The options it was created with.
    pub fn options(&self) -> &NamespaceOptions {
        &self.options
    }

    /// The tree underneath, for callers that work on fingerprints directly.
    pub fn tree(&self) -> &Dsbf {
        &self.tree
    }

    /// Canonicalizes `url` with the namespace's profile and hashes it with the namespace's seed:
    /// the one fingerprint every later step derives from.
    ///
    /// # Errors
    /// [`Error::InvalidUrl`] if the URL cannot be canonicalized.
    pub fn fingerprint(&self, url: &str) -> Result<u64> {
        CANON_BUF.with_borrow_mut(|buf| {
            self.canon.canonicalize_into(url, buf)?;
            Ok(hash::fingerprint(buf.as_bytes(), self.options.seed))
        })
    }

    /// The fingerprint of raw bytes, with no canonicalization (what `BF.*` items use).
    pub fn fingerprint_bytes(&self, item: &[u8]) -> u64 {
        hash::fingerprint(item, self.options.seed)
    }

    /// Check-and-insert, the seed's `is_duplicate`: `true` if the URL was seen before (or is a
    /// false positive, with probability at most `fpr`), `false` if it is new and now recorded.
    ///
    /// # Errors
    /// [`Error::InvalidUrl`]; nothing is recorded then. In a persistent `Db`, [`Error::Io`] or
    /// [`Error::Poisoned`] when the record could not be made durable: the answer is then not an
    /// acknowledgement.
    pub fn seen(&self, url: &str) -> Result<bool> {
        self.seen_fingerprint(self.fingerprint(url)?)
    }

    /// Read-only: `true` if the URL was (maybe) seen. Records nothing.
    ///
    /// # Errors
    /// [`Error::InvalidUrl`].
    pub fn contains(&self, url: &str) -> Result<bool> {
        Ok(self.tree.contains(self.fingerprint(url)?))
    }

    /// [`Self::seen`] for a batch: grouped by leaf, one lock per group. All URLs are
    /// canonicalized first; if one is invalid, nothing is recorded.
    ///
    /// # Errors
    /// [`Error::InvalidUrlInBatch`] naming the first invalid URL.
    pub fn seen_batch<S: AsRef<str>>(&self, urls: &[S]) -> Result<Vec<bool>> {
        let fps = self.fingerprints(urls)?;
        let mut out = vec![false; fps.len()];
        self.seen_fingerprints(&fps, &mut out)?;
        Ok(out)
    }

    /// [`Self::contains`] for a batch.
    ///
    /// # Errors
    /// [`Error::InvalidUrlInBatch`] naming the first invalid URL.
    pub fn contains_batch<S: AsRef<str>>(&self, urls: &[S]) -> Result<Vec<bool>> {
        let fps = self.fingerprints(urls)?;
        let mut out = vec![false; fps.len()];
        self.tree.contains_batch(&fps, &mut out);
        Ok(out)
    }

    fn fingerprints<S: AsRef<str>>(&self, urls: &[S]) -> Result<Vec<u64>> {
        urls.iter()
            .enumerate()
            .map(|(index, url)| {
                self.fingerprint(url.as_ref()).map_err(|e| match e {
                    Error::InvalidUrl(source) => Error::InvalidUrlInBatch { index, source },
                    other => other,
                })
            })
            .collect()
    }

    /// Check-and-insert of raw bytes (no canonicalization).
    ///
    /// # Errors
    /// In a persistent `Db`, [`Error::Io`] or [`Error::Poisoned`].
    pub fn seen_bytes(&self, item: &[u8]) -> Result<bool> {
        self.seen_fingerprint(self.fingerprint_bytes(item))
    }

    /// Read-only lookup of raw bytes.
    pub fn contains_bytes(&self, item: &[u8]) -> bool {
        self.tree.contains(self.fingerprint_bytes(item))
    }

    /// Check-and-insert of a fingerprint computed with [`Self::fingerprint`].
    ///
    /// # Errors
    /// In a persistent `Db`, [`Error::Io`] or [`Error::Poisoned`].
    pub fn seen_fingerprint(&self, fp: u64) -> Result<bool> {
        let Some(d) = &self.durable else { return Ok(self.tree.insert(fp)) };
        d.log.check()?;
        let mut lsn = 0;
        let was =
            self.tree.insert_with(fp, Mode::CheckAndInsert, &mut |new| d.append(new, &mut lsn))?;
        if lsn > 0 {
            d.log.commit(lsn)?;
        }
        Ok(was)
    }

    /// Read-only lookup of a fingerprint.
    pub fn contains_fingerprint(&self, fp: u64) -> bool {
        self.tree.contains(fp)
    }

    /// Check-and-insert of many fingerprints into a caller's result slice (no allocation for
    /// results). In a persistent `Db` the batch is one log record and one commit.
    ///
    /// # Errors
    /// In a persistent `Db`, [`Error::Io`] or [`Error::Poisoned`]: then no answer of the batch
    /// is an acknowledgement.
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn seen_fingerprints(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        let Some(d) = &self.durable else {
            self.tree.insert_batch(fps, out);
            return Ok(());
        };
        d.log.check()?;
        let mut lsn = 0;
        self.tree.insert_batch_with(fps, out, Mode::CheckAndInsert, &mut |new| {
            let mut end = 0;
            d.append(new, &mut end)?;
            lsn = lsn.max(end);
            Ok::<(), Error>(())
        })?;
        if lsn > 0 {
            d.log.commit(lsn)?;
        }
        Ok(())
    }

    /// Read-only lookup of many fingerprints.
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn contains_fingerprints(&self, fps: &[u64], out: &mut [bool]) {
        self.tree.contains_batch(fps, out);
    }

    /// Forgets `url`: afterwards it is new again, and every other URL stays seen. Returns whether
    /// the URL was recorded.
    ///
    /// # Errors
    /// [`Error::ForgetUnsupported`] unless the namespace has counting filters;
    /// [`Error::InvalidUrl`].
    pub fn forget(&self, url: &str) -> Result<bool> {
        let fp = self.fingerprint(url)?;
        self.forget_fingerprint(fp)
    }

    /// [`Self::forget`] of raw bytes (no canonicalization).
    ///
    /// # Errors
    /// [`Error::ForgetUnsupported`] unless the namespace has counting filters.
    pub fn forget_bytes(&self, item: &[u8]) -> Result<bool> {
        self.forget_fingerprint(self.fingerprint_bytes(item))
    }

    /// [`Self::forget`] of a fingerprint.
    ///
    /// # Errors
    /// [`Error::ForgetUnsupported`] unless the namespace has counting filters.
    pub fn forget_fingerprint(&self, _fp: u64) -> Result<bool> {
        Err(Error::ForgetUnsupported(self.name.clone()))
    }

    /// Distinct URLs recorded.
    pub fn len(&self) -> u64 {
        self.tree.len()
    }

    /// Whether nothing was recorded yet.
    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    /// Finishes every split in progress on the calling thread.
    pub fn complete_splits(&self) {
        self.tree.complete_splits();
    }

    /// Writes a snapshot now (persistent `Db` only; a no-op in memory), so the next open replays
    /// no log.
    ///
    /// # Errors
    /// [`Error::Io`], [`Error::Poisoned`].
    pub fn checkpoint(&self) -> Result<()> {
        match &self.durable {
            Some(d) => d.checkpoint(&self.tree),
            None => Ok(()),
        }
    }

    /// Makes every record written so far durable (persistent `Db` only).
    ///
    /// # Errors
    /// [`Error::Io`], [`Error::Poisoned`].
    pub fn sync(&self) -> Result<()> {
        match &self.durable {
            Some(d) => d.log.sync_all(),
            None => Ok(()),
        }
    }

    /// What recovery found when this namespace was opened (persistent `Db` only).
    pub fn recovery(&self) -> Option<&RecoveryReport> {
        self.durable.as_ref().map(|d| &d.recovery)
    }

    /// Counts, memory, FPR and the shape of the tree.
    pub fn stats(&self) -> NamespaceStats {
        let t = self.tree.stats();
        let p = self.tree.params();
        let mut leaves_per_depth = vec![0u64; t.height as usize + 1];
        for leaf in &t.leaves {
            if let Some(n) = leaves_per_depth.get_mut(leaf.depth as usize) {
                *n += 1;
            }
        }
        NamespaceStats {
            name: self.name.clone(),
            count: t.count,
            memory_bytes: t.memory_bytes,
            fpr_bound: p.fpr,
            worst_leaf_fpr: t.worst_leaf_fpr,
            mean_leaf_fpr: if t.leaves.is_empty() {
                0.0
            } else {
                t.leaves.iter().map(|l| l.estimated_fpr).sum::<f64>() / t.leaves.len() as f64
            },
            profile: self.options.canon.profile.name(),
            seed: self.options.seed,
            leaf_bits: p.leaf_bits,
            leaf_hashes: p.leaf_hashes,
            leaf_capacity: p.leaf_capacity,
            split_fanout: p.split.fanout,
            initial_leaves: p.initial_leaves,
            height: t.height,
            leaf_count: t.leaves.len(),
            inner_nodes: t.inner_nodes,
            splitting_nodes: t.splitting_nodes,
            splits_started: t.splits_started,
            splits_done: t.splits_done,
            leaves_per_depth,
            leaves: t.leaves.iter().map(LeafReport::from).collect(),
            persistence: self.durable.as_ref().map(|d| {
                let l = d.log.stats();
                PersistenceStats {
                    fsync: d.log.policy().name(),
                    log_bytes: l.bytes,
                    syncs: l.syncs,
                    sync_micros: l.sync_micros,
                    snapshot_offset: d.snapshot_end.load(std::sync::atomic::Ordering::Acquire),
                }
            }),
        }
    }
}

/// A namespace's statistics, from [`Namespace::stats`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NamespaceStats {
    /// Namespace name.
    pub name: String,
    /// Distinct URLs recorded.
    pub count: u64,
    /// Bytes of filters and fingerprint logs.
    pub memory_bytes: u64,
    /// The configured bound `f_max`.
    pub fpr_bound: f64,
    /// The worst leaf's estimated FPR (formula 7): the namespace's FPR bound in effect.
    pub worst_leaf_fpr: f64,
    /// The mean of the leaves' estimated FPRs: the FPR a uniformly random query sees.
    pub mean_leaf_fpr: f64,
    /// Canonicalization profile.
    pub profile: &'static str,
    /// Seed.
    pub seed: u64,
    /// Bits per leaf (`m`).
    pub leaf_bits: u64,
    /// Probes per lookup (`k`).
    pub leaf_hashes: u32,
    /// Elements per leaf before it splits (`u`).
    pub leaf_capacity: u64,
    /// Children per split.
    pub split_fanout: u32,
    /// Leaves at creation (`c`).
    pub initial_leaves: u32,
    /// Depth of the deepest leaf.
    pub height: u32,
    /// Number of leaves.
    pub leaf_count: usize,
    /// Routing-only nodes.
    pub inner_nodes: usize,
    /// Nodes being split now.
    pub splitting_nodes: usize,
    /// Splits begun.
    pub splits_started: u64,
    /// Splits completed.
    pub splits_done: u64,
    /// How many leaves sit at each depth (index = depth).
    pub leaves_per_depth: Vec<u64>,
    /// Every leaf.
    pub leaves: Vec<LeafReport>,
    /// The log and snapshot, in a persistent `Db`.
    pub persistence: Option<PersistenceStats>,
}

/// The on-disk side of a namespace, in [`NamespaceStats`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PersistenceStats {
    /// The fsync policy.
    pub fsync: &'static str,
    /// Bytes in the fingerprint log.
    pub log_bytes: u64,
    /// Syncs done since open.
    pub syncs: u64,
    /// Time spent in them, in microseconds.
    pub sync_micros: u64,
    /// Log offset covered by the newest snapshot.
    pub snapshot_offset: u64,
}

/// One leaf in [`NamespaceStats`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeafReport {
    /// Node id in the tree.
    pub id: u32,
    /// Depth (the root's children are at depth 1).
    pub depth: u32,
    /// Elements recorded.
    pub count: u64,
    /// Fraction of bits set.
    pub fill_ratio: f64,
    /// Estimated FPR from the count.
    pub estimated_fpr: f64,
}

impl From<&LeafStats> for LeafReport {
    fn from(l: &LeafStats) -> Self {
        LeafReport {
            id: l.id,
            depth: l.depth,
            count: l.count,
            fill_ratio: l.fill_ratio,
            estimated_fpr: l.estimated_fpr,
        }
    }
}
