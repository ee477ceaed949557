//! A namespace: one crawl job's URL-seen set, a DSBF plus the way its URLs are canonicalized.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use urlseen_canon::Canonicalizer;
use urlseen_filter::hash;

use crate::error::{Error, Result};
use crate::exact::{CountingOptions, CountingSet, ExactOptions, ExactStats, RecentCache};
use crate::host_dict::{HostDict, Vouch};
use crate::leaf_index::IndexStore;
use crate::leaf_log::LeafStore;
use crate::log::Fsync;
use crate::options::NamespaceOptions;
use crate::persist::{Durable, RecoveryReport};
use crate::recrawl::{Generations, RecrawlReport};
use crate::reserve::{InFlight, Reservation};
use crate::tree::{Dsbf, ExactHooks, LeafStats, Logged, Mode, SplitWorkers};
use crate::url_journal::UrlJournal;

thread_local! {
    /// One canonicalization buffer per thread: no allocation per URL on the hot path.
    static CANON_BUF: RefCell<String> = RefCell::new(String::with_capacity(256));
}

/// What [`Namespace::seen_fingerprints_then`] calls with a batch's answers before committing.
type HandOn<'a> = dyn FnMut(&[bool]) -> std::io::Result<()> + 'a;

/// One crawl job's URL-seen set. Cheap to share (`Arc`), `Send + Sync`.
#[derive(Debug)]
pub struct Namespace {
    name: String,
    options: NamespaceOptions,
    canon: Canonicalizer,
    set: Set,
    durable: Option<Durable>,
    /// Fingerprints answered "new" by a [`Reservation`] not committed yet.
    in_flight: InFlight,
    /// The hosts recorded under each host hash: the collision guard of a forget by host. A
    /// window's generations share their window's.
    hosts: Arc<HostDict>,
    /// The canonical URLs recorded, for a forget by prefix ([`NamespaceOptions::keep_urls`]).
    urls: Option<Arc<UrlJournal>>,
}

/// What decides "seen" in a namespace.
#[derive(Debug)]
pub(crate) enum Set {
    /// The DSBF; in exact mode its leaves index their fingerprints, behind an LRU.
    Tree { tree: Arc<Dsbf>, exact: Option<TreeExact> },
    /// A counting namespace: seed 004's IMP-CB, which can forget.
    Counting(CountingSet),
    /// A recrawl window: generations of namespaces, each a DSBF (see [`crate::recrawl`]).
    Recrawl(Generations),
}

/// Exact mode over the DSBF: seed 002's LRU of recent URLs in front of the leaf indexes (see
/// [`Dsbf::insert_batch_exact`]), and how often an index confirmed a positive.
#[derive(Debug)]
pub(crate) struct TreeExact {
    recent: RecentCache,
    confirmed: AtomicU64,
}

impl TreeExact {
    /// The cache, and `tree` made exact: its leaves index their records (in `index`, rebuilt
    /// from the leaves' records).
    pub(crate) fn enable(tree: &Dsbf, index: Arc<IndexStore>) -> Result<Self> {
        tree.enable_exact(index)?;
        Ok(TreeExact {
            recent: RecentCache::new(exact_options().lru_capacity),
            confirmed: AtomicU64::new(0),
        })
    }

    fn report(&self, tree: &Dsbf) -> ExactReport {
        let (lru_len, lru_capacity, lru_memory_bytes) = self.recent.sizes();
        let index = tree.index_stats();
        ExactReport::from(ExactStats {
            lru_hits: self.recent.hits(),
            store_reads: index.run_reads,
            store_hits: self.confirmed.load(Ordering::Relaxed),
            store_writes: index.runs_written,
            recorded: tree.len(),
            forgotten: 0,
            stored: tree.len(),
            lru_len,
            lru_capacity,
            lru_memory_bytes,
        })
    }
}

/// Where a tree's leaf indexes go: beside its leaf files (`index/`, emptied first), or on the
/// heap when the leaves are.
pub(crate) fn index_store(tree: &Dsbf) -> Result<Arc<IndexStore>> {
    match tree.leaf_store() {
        LeafStore::Memory => Ok(IndexStore::in_memory()),
        LeafStore::Files(files) => IndexStore::create(files.dir().with_file_name("index")),
    }
}

/// The exact index's options in a namespace (seed 002's LRU size, seed 004's refcounts).
pub(crate) fn exact_options() -> ExactOptions {
    ExactOptions::default()
}

/// A counting namespace's filter geometry: classic counting filters sized for the namespace's
/// capacity and FPR (in exact mode the FPR only costs store reads), with its seed.
pub(crate) fn counting_options(options: &NamespaceOptions) -> Result<CountingOptions> {
    let mut c = CountingOptions::with_fpr(options.capacity, options.fpr)?;
    c.seed = options.seed;
    c.exact = exact_options();
    Ok(c)
}

impl Namespace {
    /// A namespace that is not persisted: its leaves' fingerprints in `leaves` (memory, or
    /// files in a spill directory).
    pub(crate) fn new(
        name: String,
        options: NamespaceOptions,
        workers: Arc<SplitWorkers>,
        leaves: LeafStore,
    ) -> Result<Self> {
        options.validate()?;
        let set = if options.counting {
            Set::Counting(CountingSet::in_memory(counting_options(&options)?)?)
        } else {
            let tree = Dsbf::new(crate::persist::tree_params(&options), workers, leaves);
            let exact = match options.is_exact() {
                true => Some(TreeExact::enable(&tree, index_store(&tree)?)?),
                false => None,
            };
            Set::Tree { tree, exact }
        };
        Self::from_parts(name, options, set, None)
    }

    pub(crate) fn from_parts(
        name: String,
        options: NamespaceOptions,
        set: Set,
        durable: Option<Durable>,
    ) -> Result<Self> {
        let hosts = match (&durable, &set) {
            (_, Set::Recrawl(gens)) => gens.hosts(),
            (Some(d), _) => {
                let read_only = d.log.is_read_only();
                Arc::new(HostDict::open(&d.storage, &d.dir, read_only, options.seed)?)
            }
            (None, _) => Arc::new(HostDict::in_memory()),
        };
        Self::with_hosts(name, options, set, durable, hosts)
    }

    /// A namespace whose records' hosts are listed in `hosts`: its own, or for a generation
    /// of a recrawl window, the window's. In a data directory the dictionary's file, and the
    /// URL journal of a namespace that keeps its URLs, precede the log on disk (see
    /// `crate::host_dict`, `crate::url_journal`).
    ///
    /// # Errors
    /// The URL journal's, when it cannot be opened.
    pub(crate) fn with_hosts(
        name: String,
        options: NamespaceOptions,
        set: Set,
        durable: Option<Durable>,
        hosts: Arc<HostDict>,
    ) -> Result<Self> {
        if let (Some(d), Some(file)) = (&durable, hosts.file()) {
            d.log.precede_with(file);
        }
        let urls = match options.keep_urls {
            true => Some(Arc::new(Self::open_url_journal(&set, durable.as_ref())?)),
            false => None,
        };
        if let (Some(urls), Some(d)) = (&urls, &durable) {
            // Every entry is on disk before the records that rely on it are.
            d.log.precede_with(Arc::clone(urls) as Arc<dyn crate::log::Precedes>);
        }
        let canon = Canonicalizer::new(options.canon.clone());
        Ok(Namespace {
            name,
            options,
            canon,
            set,
            durable,
            in_flight: InFlight::default(),
            hosts,
            urls,
        })
    }

    /// The URL journal of a namespace that keeps its URLs: in its data directory, beside its
    /// leaf files in a spill directory, or on the heap with the leaves.
    fn open_url_journal(set: &Set, durable: Option<&Durable>) -> Result<UrlJournal> {
        if let Some(d) = durable {
            // Only a namespace that holds nothing may start a journal: one whose journal is
            // gone would forget none of the URLs recorded before by prefix, silently.
            let empty = match set {
                Set::Tree { tree, .. } => tree.is_empty(),
                Set::Counting(set) => set.is_empty(),
                Set::Recrawl(_) => true,
            };
            return UrlJournal::open(&d.storage, &d.dir.join("urls"), d.log.is_read_only(), empty);
        }
        match set {
            Set::Tree { tree, .. } => match tree.leaf_store() {
                LeafStore::Files(files) => UrlJournal::open(
                    files.storage(),
                    &files.dir().with_file_name("urls"),
                    false,
                    true,
                ),
                LeafStore::Memory => Ok(UrlJournal::in_memory()),
            },
            _ => Ok(UrlJournal::in_memory()),
        }
    }

    pub(crate) fn in_flight(&self) -> &InFlight {
        &self.in_flight
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

    /// Whether [`Self::forget`] works here (counting namespaces).
    pub fn can_forget(&self) -> bool {
        matches!(self.set, Set::Counting(_))
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

    /// [`Self::fingerprint`] and the hash of the URL's canonical host, which the record keeps
    /// so that [`Self::forget_host`] can find it (0 for a URL with no host).
    ///
    /// # Errors
    /// [`Error::InvalidUrl`] if the URL cannot be canonicalized.
    pub fn fingerprint_host(&self, url: &str) -> Result<(u64, u32)> {
        CANON_BUF.with_borrow_mut(|buf| {
            self.canon.canonicalize_into(url, buf)?;
            let fp = hash::fingerprint(buf.as_bytes(), self.options.seed);
            let Some(host) = crate::host::host_of(buf) else { return Ok((fp, 0)) };
            let (h, full) = crate::host::host_hashes(host, self.options.seed);
            // Listed before any record can carry `h` (see `crate::host_dict`).
            self.hosts.note(h, full, host)?;
            // Journaled before any record of it can be made, unless it is known to be there
            // (see `crate::url_journal`).
            if let Some(urls) = &self.urls {
                let journaled = match self.options.is_exact() {
                    true => self.contains_fingerprint(fp)?,
                    false => urls.journaled_lately(fp),
                };
                if !journaled {
                    urls.append(fp, h, buf)?;
                }
            }
            Ok((fp, h))
        })
    }

    /// [`Self::fingerprint_host`] for each of `urls`, in order, into `out` (cleared first):
    /// the same results, with the hosts listed in the dictionary as one batch (see
    /// `HostDict::note_batch`) before this returns, so still before any record carries them.
    pub fn fingerprint_hosts(&self, urls: &[&str], out: &mut Vec<Result<(u64, u32)>>) {
        out.clear();
        if self.urls.is_some() {
            // The URL journal lists each URL after its host: one by one.
            out.extend(urls.iter().map(|url| self.fingerprint_host(url)));
            return;
        }
        let mut hosts = Vec::with_capacity(urls.len());
        let mut host_url = Vec::with_capacity(urls.len());
        CANON_BUF.with_borrow_mut(|buf| {
            for (i, url) in urls.iter().enumerate() {
                let result =
                    self.canon.canonicalize_into(url, buf).map_err(Error::from).map(|()| {
                        let fp = hash::fingerprint(buf.as_bytes(), self.options.seed);
                        let Some(host) = crate::host::host_of(buf) else { return (fp, 0) };
                        let (h, full) = crate::host::host_hashes(host, self.options.seed);
                        hosts.push((h, full));
                        host_url.push(i);
                        (fp, h)
                    });
                out.push(result);
            }
            // A host met for the first time is named again from its URL (rare, so cheaper
            // than keeping every URL's host).
            let failed = self.hosts.note_batch(&hosts, |k| {
                let url = urls[host_url[k]];
                self.canon.canonicalize_into(url, buf)?;
                crate::host::host_of(buf).map(str::to_owned).ok_or_else(|| Error::InvalidHost {
                    host: url.to_owned(),
                    reason: "its host changed when canonicalized again".into(),
                })
            });
            for (k, e) in failed {
                out[host_url[k]] = Err(e);
            }
        });
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
        let (fp, host) = self.fingerprint_host(url)?;
        let mut out = [false];
        self.seen_fingerprints_hosts(&[fp], &[host], &mut out)?;
        Ok(out[0])
    }

    /// Read-only: `true` if the URL was seen (in Bloom-only mode: maybe seen). Records nothing.
    ///
    /// # Errors
    /// [`Error::InvalidUrl`]; in exact mode, the store's errors.
    pub fn contains(&self, url: &str) -> Result<bool> {
        self.contains_fingerprint(self.fingerprint(url)?)
    }

    /// [`Self::seen`] for a batch: grouped by leaf, one lock per group. All URLs are
    /// canonicalized first; if one is invalid, nothing is recorded.
    ///
    /// # Errors
    /// [`Error::InvalidUrlInBatch`] naming the first invalid URL; otherwise as
    /// [`Self::seen_fingerprints`].
    pub fn seen_batch<S: AsRef<str>>(&self, urls: &[S]) -> Result<Vec<bool>> {
        let (fps, hosts): (Vec<u64>, Vec<u32>) = urls
            .iter()
            .enumerate()
            .map(|(index, url)| {
                self.fingerprint_host(url.as_ref()).map_err(|e| match e {
                    Error::InvalidUrl(source) => Error::InvalidUrlInBatch { index, source },
                    other => other,
                })
            })
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .unzip();
        let mut out = vec![false; fps.len()];
        self.seen_fingerprints_hosts(&fps, &hosts, &mut out)?;
        Ok(out)
    }

    /// [`Self::contains`] for a batch.
    ///
    /// # Errors
    /// [`Error::InvalidUrlInBatch`] naming the first invalid URL; in exact mode, the store's.
    pub fn contains_batch<S: AsRef<str>>(&self, urls: &[S]) -> Result<Vec<bool>> {
        let fps = self.fingerprints(urls)?;
        let mut out = vec![false; fps.len()];
        self.contains_fingerprints(&fps, &mut out)?;
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
    /// As [`Self::seen_fingerprints`].
    pub fn seen_bytes(&self, item: &[u8]) -> Result<bool> {
        self.seen_fingerprint(self.fingerprint_bytes(item))
    }

    /// Read-only lookup of raw bytes.
    ///
    /// # Errors
    /// In exact mode, the store's.
    pub fn contains_bytes(&self, item: &[u8]) -> Result<bool> {
        self.contains_fingerprint(self.fingerprint_bytes(item))
    }

    /// Check-and-insert of a fingerprint computed with [`Self::fingerprint`].
    ///
    /// # Errors
    /// As [`Self::seen_fingerprints`].
    pub fn seen_fingerprint(&self, fp: u64) -> Result<bool> {
        if let (Set::Tree { tree, exact: None }, None) = (&self.set, &self.durable) {
            let in_flight = self.in_flight.read();
            return Ok(in_flight.contains(&fp) || tree.insert(fp));
        }
        let mut out = [false];
        self.seen_fingerprints(&[fp], &mut out)?;
        Ok(out[0])
    }

    /// Read-only lookup of a fingerprint.
    ///
    /// # Errors
    /// In exact mode, the store's.
    pub fn contains_fingerprint(&self, fp: u64) -> Result<bool> {
        let mut out = [false];
        self.contains_fingerprints(&[fp], &mut out)?;
        Ok(out[0])
    }

    /// Check-and-insert of many fingerprints into a caller's result slice (no allocation for
    /// results). In a persistent `Db` the batch is one log record and one commit.
    ///
    /// In exact mode a Bloom negative enters its leaf's index before the leaf lock is
    /// released, and a Bloom positive is decided by the leaf's recent records, the LRU, then
    /// the leaf indexes (seed 002).
    ///
    /// # Errors
    /// In a persistent `Db`, [`Error::Io`] or [`Error::Poisoned`]; in a counting namespace,
    /// [`Error::Store`]. Then no answer of the batch is an acknowledgement.
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn seen_fingerprints(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        assert_eq!(fps.len(), out.len(), "seen_fingerprints: output length must match input");
        self.seen_outside_flight(fps, &[], out, None)
    }

    /// [`Self::seen_fingerprints`] of URLs whose host hashes are known
    /// ([`Self::fingerprint_host`]): each record keeps `hosts[i]`, so that
    /// [`Self::forget_host`] finds it. Records made by [`Self::seen_fingerprints`] have none.
    ///
    /// # Errors
    /// As [`Self::seen_fingerprints`].
    ///
    /// # Panics
    /// If `out.len() != fps.len()`, or `hosts` is neither empty nor as long.
    pub fn seen_fingerprints_hosts(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
    ) -> Result<()> {
        assert_eq!(fps.len(), out.len(), "seen_fingerprints: output length must match input");
        assert!(hosts.is_empty() || hosts.len() == fps.len(), "one host per fingerprint");
        self.seen_outside_flight(fps, hosts, out, None)
    }

    /// [`Self::seen_fingerprints`] for a caller that hands the answers on (prints the new
    /// URLs) before they count as recorded: `then` sees the answers while the batch's log
    /// record is still held back from the disk, and the batch is committed only once `then`
    /// returns `Ok`. A crash before that loses the batch, so after a restart its URLs are new
    /// again: at-least-once, never recorded but not handed on. If `then` fails, the batch is
    /// never written and the namespace refuses writes until reopened.
    ///
    /// A counting namespace has no log to hold: `then` runs after its store write.
    ///
    /// # Errors
    /// As [`Self::seen_fingerprints`]; [`Error::Io`] naming `then`'s failure.
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn seen_fingerprints_then(
        &self,
        fps: &[u64],
        out: &mut [bool],
        then: &mut dyn FnMut(&[bool]) -> std::io::Result<()>,
    ) -> Result<()> {
        self.seen_fingerprints_hosts_then(fps, &[], out, then)
    }

    /// [`Self::seen_fingerprints_then`] with each fingerprint's host hash, as
    /// [`Self::seen_fingerprints_hosts`].
    ///
    /// # Errors
    /// As [`Self::seen_fingerprints_then`].
    ///
    /// # Panics
    /// If `out.len() != fps.len()`, or `hosts` is neither empty nor as long.
    pub fn seen_fingerprints_hosts_then(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        then: &mut dyn FnMut(&[bool]) -> std::io::Result<()>,
    ) -> Result<()> {
        assert_eq!(fps.len(), out.len(), "seen_fingerprints: output length must match input");
        assert!(hosts.is_empty() || hosts.len() == fps.len(), "one host per fingerprint");
        self.seen_outside_flight(fps, hosts, out, Some(then))
    }

    /// The first step of a check-and-insert whose answers count only once they are delivered
    /// (a server's reply; see [`crate::reserve`]): answers `out` as
    /// [`Self::seen_fingerprints`] would, records nothing, and holds each fingerprint answered
    /// "new" in flight (every other check answers it "seen") until the [`Reservation`] is
    /// committed (recorded) or dropped (new again).
    ///
    /// # Errors
    /// As [`Self::seen_fingerprints`] (nothing is held then).
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn reserve_fingerprints(
        self: &Arc<Self>,
        fps: &[u64],
        out: &mut [bool],
    ) -> Result<Reservation> {
        self.reserve_fingerprints_hosts(fps, &[], out)
    }

    /// [`Self::reserve_fingerprints`] with each fingerprint's host hash, as
    /// [`Self::seen_fingerprints_hosts`].
    ///
    /// # Errors
    /// As [`Self::reserve_fingerprints`].
    ///
    /// # Panics
    /// If `out.len() != fps.len()`, or `hosts` is neither empty nor as long.
    pub fn reserve_fingerprints_hosts(
        self: &Arc<Self>,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
    ) -> Result<Reservation> {
        assert_eq!(fps.len(), out.len(), "reserve_fingerprints: output length must match input");
        assert!(hosts.is_empty() || hosts.len() == fps.len(), "one host per fingerprint");
        if let Set::Recrawl(gens) = &self.set {
            return gens.reserve(fps, hosts, out);
        }
        if let Some(d) = &self.durable {
            d.log.check()?;
        }
        if let Set::Tree { tree, .. } = &self.set {
            tree.check()?;
        }
        let taken = self.in_flight.reserve(fps, out, |fps, out| {
            self.contains_in_tree(fps, out)?;
            self.keep_positives(fps, hosts, out)
        })?;
        let any_seen = out.iter().any(|&seen| seen);
        // The host of each fingerprint taken, for its record at the commit.
        let taken_hosts = match hosts.is_empty() {
            true => Vec::new(),
            false => {
                let host_of: std::collections::HashMap<u64, u32> =
                    fps.iter().copied().zip(hosts.iter().copied()).collect();
                taken.iter().map(|fp| host_of.get(fp).copied().unwrap_or(0)).collect()
            }
        };
        Ok(Reservation::new(Arc::clone(self), taken, taken_hosts, any_seen))
    }

    /// A reservation's Bloom positives (`fps` answered "seen" in `out`), logged as kept at
    /// once (see [`crate::tree`]): a split before the commit would rebuild the filters without
    /// a false one. Their durability is waited for by the commit.
    fn keep_positives(&self, fps: &[u64], hosts: &[u32], out: &[bool]) -> Result<()> {
        let Set::Tree { tree, exact: None } = &self.set else { return Ok(()) };
        if self.options.split.mode == crate::SplitMode::Never {
            return Ok(());
        }
        let positives: Vec<u64> = fps.iter().zip(out).filter(|p| *p.1).map(|p| *p.0).collect();
        if positives.is_empty() {
            return Ok(());
        }
        let positive_hosts: Vec<u32> = match hosts.is_empty() {
            true => Vec::new(),
            false => hosts.iter().zip(out).filter(|p| *p.1).map(|p| *p.0).collect(),
        };
        let mut log = |logged: &Logged<'_>| -> Result<u64> {
            let Some(d) = &self.durable else { return Ok(0) };
            let mut end = 0;
            d.append(logged, &mut end)?;
            Ok(end)
        };
        let mut scratch = vec![false; positives.len()];
        // A positive gone meanwhile (a split dropped a false one before this) is recorded as
        // new: answered "seen", it stays seen.
        tree.insert_batch_with(
            &positives,
            &positive_hosts,
            &mut scratch,
            Mode::CheckAndInsert,
            &mut log,
        )?;
        tree.check()
    }

    /// A reservation's commit: `taken`, answered "new" and held in flight since, are recorded
    /// as they are (nobody else could record them meanwhile). If some were answered "seen",
    /// what they rest on (their kept records, another writer's records) is made as durable as
    /// the policy says, as a check-and-insert's "seen" is.
    pub(crate) fn record_reserved(
        &self,
        taken: &[u64],
        hosts: &[u32],
        any_seen: bool,
    ) -> Result<()> {
        let mut out = vec![false; taken.len()];
        self.seen_fingerprints_guarded(taken, hosts, &mut out, None, Mode::Record)?;
        if let (true, Some(d)) = (any_seen, &self.durable) {
            d.log.commit(d.log.end())?;
        }
        Ok(())
    }

    /// A check-and-insert that answers "seen" for the fingerprints in flight and records the
    /// rest, holding the set in flight shared until they are in the tree (see
    /// [`crate::reserve`]).
    fn seen_outside_flight(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        then: Option<&mut HandOn<'_>>,
    ) -> Result<()> {
        if let Set::Recrawl(gens) = &self.set {
            return gens.seen(fps, hosts, out, then);
        }
        let in_flight = self.in_flight.read();
        if in_flight.is_empty() || !fps.iter().any(|fp| in_flight.contains(fp)) {
            return self.seen_fingerprints_guarded(fps, hosts, out, then, Mode::CheckAndInsert);
        }
        let (mut rest, mut at) = (Vec::with_capacity(fps.len()), Vec::with_capacity(fps.len()));
        let mut rest_hosts = Vec::new();
        for (i, fp) in fps.iter().enumerate() {
            if in_flight.contains(fp) {
                out[i] = true;
            } else {
                rest.push(*fp);
                if let Some(&host) = hosts.get(i) {
                    rest_hosts.push(host);
                }
                at.push(i);
            }
        }
        let mut answers = vec![false; rest.len()];
        let scatter = |answers: &[bool], out: &mut [bool]| {
            for (&i, &seen) in at.iter().zip(answers) {
                out[i] = seen;
            }
        };
        match then {
            None => self.seen_fingerprints_guarded(
                &rest,
                &rest_hosts,
                &mut answers,
                None,
                Mode::CheckAndInsert,
            )?,
            Some(then) => {
                let mut whole = out.to_vec();
                let mut hand_on = |answers: &[bool]| {
                    scatter(answers, &mut whole);
                    then(&whole)
                };
                self.seen_fingerprints_guarded(
                    &rest,
                    &rest_hosts,
                    &mut answers,
                    Some(&mut hand_on),
                    Mode::CheckAndInsert,
                )?;
            }
        }
        scatter(&answers, out);
        Ok(())
    }

    /// Either of the above, poisoning the log after a store failure.
    fn seen_fingerprints_guarded(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        then: Option<&mut HandOn<'_>>,
        mode: Mode,
    ) -> Result<()> {
        let result = self.seen_fingerprints_inner(fps, hosts, out, then, mode);
        if let (Err(e @ Error::Store(_)), Some(d)) = (&result, &self.durable) {
            // A store failure can leave the batch half-recorded (bits set, some fingerprints
            // stored) with no acknowledgement given: refuse every later write until the data
            // directory is reopened, where recovery rebuilds from the log, which has none of
            // it. Otherwise a retry could answer "seen" for a URL never acknowledged as new.
            d.log.poison_for(format!("namespace {:?}: {e}; reopen to recover", self.name));
        }
        result
    }

    fn seen_fingerprints_inner(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        mut then: Option<&mut HandOn<'_>>,
        mode: Mode,
    ) -> Result<()> {
        let handed_on = |e: std::io::Error| Error::Io {
            what: "hand on the answers (the batch was not recorded)".into(),
            path: "-".into(),
            source: e,
        };
        let tree = match &self.set {
            Set::Counting(set) => {
                if let Some(d) = &self.durable {
                    d.log.check()?;
                    // The store has no log in front of it: the hosts its records carry are
                    // written out before it is (see `crate::host_dict`).
                    d.log.flush_first(false)?;
                }
                // The answers are handed on before the store is written: a crash between the
                // two hands them on again (at-least-once), and nothing is recorded unprinted.
                set.seen_many_then(fps, hosts, out, |answers| {
                    then.map_or(Ok(()), |then| then(answers))
                })?
                .map_err(handed_on)?;
                // Under `always` one sync per batch (the store writes buffered), the hosts
                // file's first.
                if let Some(d) = &self.durable
                    && d.log.policy() == Fsync::Always
                {
                    d.log.flush_first(true)?;
                    set.sync()?;
                }
                return Ok(());
            }
            Set::Recrawl(gens) => return gens.seen(fps, hosts, out, then),
            Set::Tree { tree, .. } => tree,
        };
        if let Some(d) = &self.durable {
            d.log.check()?;
        }
        tree.check()?;
        // Nothing of this batch reaches the log file before `then` has seen the answers. (Only
        // then: a hold keeps every other writer's flush waiting.)
        let hold = match (&self.durable, &then) {
            (Some(d), Some(_)) => Some(d.log.hold()),
            _ => None,
        };
        let mut lsn = 0;
        let mut log_new = |logged: &Logged<'_>| -> Result<u64> {
            let Some(d) = &self.durable else { return Ok(0) };
            let mut end = 0;
            d.append(logged, &mut end)?;
            lsn = lsn.max(end);
            Ok(end)
        };
        match &self.set {
            Set::Tree { exact: Some(exact), .. } if mode == Mode::CheckAndInsert => {
                let mut hooks = ExactHooks {
                    cached: &mut |fp| exact.recent.touch(fp),
                    learn: &mut |fp| {
                        exact.confirmed.fetch_add(1, Ordering::Relaxed);
                        exact.recent.insert(fp);
                    },
                };
                tree.insert_batch_exact(fps, hosts, out, &mut hooks, &mut log_new)?;
            }
            _ => tree.insert_batch_with(fps, hosts, out, mode, &mut log_new)?,
        }
        // A leaf file that could not be written keeps its records in memory, but from then on
        // nothing is acknowledged (see `leaf_log`).
        tree.check()?;
        if let Some(Err(e)) = then.as_mut().map(|then| then(out)) {
            if let Some(hold) = hold {
                hold.discard(format!(
                    "namespace {:?}: the answers of a batch could not be handed on ({e}); it was \
                     not recorded; reopen to go on",
                    self.name
                ));
            }
            return Err(handed_on(e));
        }
        let Some(d) = &self.durable else { return Ok(()) };
        // A "seen" may rest on another writer's record that is appended (under the leaf's lock,
        // before its bits could be seen) but not yet written or synced: it is an
        // acknowledgement too, so it waits for everything appended so far. (Group commit makes
        // this a wait for a sync already under way, and nothing when all is durable.)
        let end = if out.iter().any(|&seen| seen) { d.log.end() } else { lsn };
        match hold {
            Some(hold) => hold.commit(end)?,
            None if end > 0 => d.log.commit(end)?,
            None => {}
        }
        Ok(())
    }

    /// Read-only lookup of many fingerprints.
    ///
    /// # Errors
    /// In exact mode, the store's.
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn contains_fingerprints(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        self.contains_in_tree(fps, out)?;
        // Answered "new" to someone, not recorded yet: seen, as a check-and-insert answers.
        let in_flight = self.in_flight.read();
        if !in_flight.is_empty() {
            for (fp, hit) in fps.iter().zip(out.iter_mut()) {
                *hit = *hit || in_flight.contains(fp);
            }
        }
        Ok(())
    }

    /// [`Self::contains_fingerprints`] without the fingerprints in flight.
    fn contains_in_tree(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        match &self.set {
            Set::Counting(set) => set.contains_many(fps, out)?,
            Set::Recrawl(gens) => gens.contains(fps, out)?,
            Set::Tree { tree, exact } => {
                if exact.is_none()
                    && self.options.is_exact()
                    && let Some(d) = &self.durable
                {
                    // Opened read-only, without the index that confirms a Bloom positive: a
                    // positive here could be a false one, which exact mode never answers.
                    return Err(Error::ReadOnly {
                        path: d.dir.clone(),
                        what: "an exact-mode lookup needs the leaf index, which a read-only \
                               open does not build",
                    });
                }
                tree.contains_batch(fps, out);
                if let Some(exact) = exact {
                    for (&fp, hit) in fps.iter().zip(out.iter_mut()) {
                        if *hit && !exact.recent.touch(fp) {
                            *hit = tree.contains_exact(fp);
                        }
                    }
                    // An index that could not be read answered "seen": not an answer to give.
                    tree.check()?;
                }
            }
        }
        Ok(())
    }

    /// Forgets `url` (counting namespaces): afterwards it is new again, and every other URL
    /// stays seen. Returns whether the URL was recorded.
    ///
    /// # Errors
    /// [`Error::ForgetUnsupported`] unless the namespace has counting filters;
    /// [`Error::InvalidUrl`]; the store's.
    pub fn forget(&self, url: &str) -> Result<bool> {
        let fp = self.fingerprint(url)?;
        self.forget_fingerprint(fp)
    }

    /// [`Self::forget`] of raw bytes (no canonicalization).
    ///
    /// # Errors
    /// As [`Self::forget`].
    pub fn forget_bytes(&self, item: &[u8]) -> Result<bool> {
        self.forget_fingerprint(self.fingerprint_bytes(item))
    }

    /// [`Self::forget`] of a fingerprint.
    ///
    /// # Errors
    /// As [`Self::forget`].
    pub fn forget_fingerprint(&self, fp: u64) -> Result<bool> {
        let mut out = [false];
        self.forget_fingerprints(&[fp], &mut out)?;
        Ok(out[0])
    }

    /// [`Self::forget`] of many fingerprints: `out[i]` says whether `fps[i]` was recorded. Seed
    /// 004's rule: each fingerprint leaves the store, then its counters are decremented, and a
    /// saturated counter is recounted from the store.
    ///
    /// # Errors
    /// As [`Self::forget`].
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn forget_fingerprints(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        let Set::Counting(set) = &self.set else {
            return Err(Error::ForgetUnsupported(self.name.clone()));
        };
        if let Some(d) = &self.durable {
            d.log.check()?;
        }
        set.forget_many(fps, out)?;
        if let Some(d) = &self.durable
            && d.log.policy() == Fsync::Always
        {
            set.sync()?;
        }
        Ok(())
    }

    /// The host hash [`Self::forget_host`] looks for: `host` canonicalized as the host of a URL
    /// (`http://{host}/`) with the namespace's profile, so `Example.COM` and `example.com.`
    /// spellings find what the profile records.
    ///
    /// # Errors
    /// [`Error::InvalidHost`].
    pub fn host_hash(&self, host: &str) -> Result<u32> {
        Ok(crate::host::host_hash(&self.canonical_host(host)?, self.options.seed))
    }

    /// `host` as the namespace's profile writes it in a canonical URL.
    fn canonical_host(&self, host: &str) -> Result<String> {
        crate::host::canonical_host(&self.canon, host)
    }

    /// Forgets every URL of `host` (its canonical host, any scheme and port): afterwards each
    /// of them answers "new", and every other URL recorded still answers "seen". Returns how
    /// many URLs were forgotten. Works in every mode; see `docs/forget.md` for the design, the
    /// guarantees and the costs.
    ///
    /// A counting namespace's store keeps each URL's host too: the forget scans it and forgets
    /// the matching fingerprints one by one (seed 004's forget), under the set's lock.
    ///
    /// Each leaf that holds a URL of the host has its records rewritten without them and its
    /// filter rebuilt from the rest, under the tree's exclusive lock (the namespace waits
    /// meanwhile). In a data directory it is durable: the snapshot is removed, a forget record
    /// is logged and synced, the leaves are rewritten, and a new snapshot is written. A crash
    /// at any point reopens to the state before the forget (if its record was not synced) or
    /// after it (recovery replays the whole log, forget included).
    ///
    /// Records whose host is unknown (made before hosts were kept, or from raw items and
    /// fingerprints) might be URLs of `host`: if the namespace holds any, nothing is
    /// forgotten and [`Error::ForgetHostUnknown`] says how many.
    ///
    /// A URL whose host's 32-bit hash equals `host`'s is forgotten too: with `H` other hosts
    /// recorded, one of them collides with probability about `H / 2³²`.
    ///
    /// # Errors
    /// [`Error::InvalidHost`]; [`Error::ForgetHostUnknown`]; [`Error::Io`], [`Error::Corrupt`]
    /// (then the namespace refuses writes until reopened, and reopening replays the forget);
    /// in a counting namespace, [`Error::Store`].
    pub fn forget_host(&self, host: &str) -> Result<u64> {
        let host = self.canonical_host(host)?;
        let h = crate::host::host_hash(&host, self.options.seed);
        let shared = |hosts| Error::HostHashShared {
            name: self.name.clone(),
            host: host.clone(),
            hash: h,
            hosts,
        };
        match self.hosts.vouch(h, &host) {
            Vouch::Only => {}
            Vouch::Shared(hosts) => return Err(shared(hosts)),
            Vouch::Absent => match self.count_host_records(h)? {
                0 => {}
                records => {
                    return Err(Error::HostHashUnlisted {
                        name: self.name.clone(),
                        host: host.clone(),
                        hash: h,
                        records,
                    });
                }
            },
        }
        // Checked again under the lock the forget holds, where nothing is recorded until it is
        // done: a host listed under `h` since then makes it refuse (one listed later records
        // after the forget).
        let vouched = || match self.hosts.vouch(h, &host) {
            Vouch::Shared(hosts) => Err(shared(hosts)),
            Vouch::Only | Vouch::Absent => Ok(()),
        };
        self.forget_host_checked(h, &vouched)
    }

    /// Records that carry host hash `h` (0: records whose host is unknown).
    pub(crate) fn count_host_records(&self, h: u32) -> Result<u64> {
        match &self.set {
            Set::Tree { tree, .. } => tree.count_records(&|r| r.host == h),
            Set::Counting(set) => Ok(set.count_host(h)?),
            Set::Recrawl(gens) => gens.count_host_records(h),
        }
    }

    /// [`Self::forget_host`] of a host hash ([`Self::host_hash`]).
    ///
    /// # Errors
    /// As [`Self::forget_host`].
    pub fn forget_host_hash(&self, h: u32) -> Result<u64> {
        self.forget_host_checked(h, &|| Ok(()))
    }

    /// [`Self::forget_host_hash`] that calls `check` once nothing can be recorded any more
    /// until the forget is done, and forgets nothing if it fails.
    pub(crate) fn forget_host_checked(
        &self,
        h: u32,
        check: &dyn Fn() -> Result<()>,
    ) -> Result<u64> {
        let (tree, exact) = match &self.set {
            Set::Tree { tree, exact } => (tree, exact),
            // Each live generation, in turn.
            Set::Recrawl(gens) => return gens.forget_host(h, check),
            Set::Counting(set) => {
                if let Some(d) = &self.durable {
                    d.log.check()?;
                }
                // The store is the source of truth, and each fingerprint leaves it before its
                // counters go: a crash part-way leaves part of the host forgotten, and the
                // forget not acknowledged (run it again).
                let outcome = set.forget_host(h, &|| check().is_ok())?;
                if outcome == Err(u64::MAX) {
                    check()?;
                }
                if let Some(d) = &self.durable {
                    set.sync().map_err(|e| {
                        d.log.poison_for(format!("namespace {:?}: {e}", self.name));
                        e
                    })?;
                }
                return outcome.map_err(|records| Error::ForgetHostUnknown {
                    name: self.name.clone(),
                    records,
                });
            }
        };
        if h == 0 {
            return Ok(0);
        }
        let mut logged = || -> Result<()> {
            check()?;
            if let Some(d) = &self.durable {
                d.log.append_with_hosts(crate::log::RecordKind::ForgetHost, &[], &[h])?;
            }
            Ok(())
        };
        let count =
            self.forget_in_tree(tree, exact.as_ref(), "by host", &|r| r.host == h, &mut logged)?;
        Ok(count.recorded)
    }

    /// Forgets the records of `tree` that `drop` matches, durably, in the order
    /// `docs/forget.md` gives: no checkpoint until it is done, the snapshot removed, then under
    /// the tree's exclusive lock `logged` (which appends the forget's log record, and may
    /// refuse) and a sync of the log, then the leaves rewritten, then a new snapshot. `what`
    /// names the forget in the reason a failure half-way poisons the namespace with.
    ///
    /// # Errors
    /// [`Error::ForgetHostUnknown`] if records of unknown host are held (they might be URLs
    /// the forget is for); `logged`'s; those of [`Dsbf::forget_where`], after which the
    /// namespace refuses writes until reopened (recovery replays the forget from the log).
    fn forget_in_tree(
        &self,
        tree: &Dsbf,
        exact: Option<&TreeExact>,
        what: &str,
        drop: &dyn Fn(&crate::leaf_log::LeafRecord) -> bool,
        logged: &mut dyn FnMut() -> Result<()>,
    ) -> Result<crate::tree::ForgetCount> {
        if let Some(d) = &self.durable {
            d.log.check()?;
        }
        tree.check()?;
        // No checkpoint from here until the leaves are rewritten: a snapshot of a tree half
        // rewritten, or one taken before the forget record, must never be on disk with them.
        let one = self.durable.as_ref().map(|d| d.checkpointing.lock());
        let unknown = tree.count_records(&|r| r.host == 0)?;
        if unknown > 0 {
            return Err(Error::ForgetHostUnknown { name: self.name.clone(), records: unknown });
        }
        if let Some(d) = &self.durable {
            // Without a snapshot, recovery replays the whole log into new leaf files, the
            // forget record included, whatever state the leaf files were left in.
            let path = d.dir.join("snapshot");
            d.storage.remove_file_durably(&path).map_err(|e| Error::io("remove", &path, e))?;
            d.snapshot_end.store(0, Ordering::Release);
            d.snapshot_bytes.store(0, Ordering::Release);
        }
        let mut before = || -> Result<()> {
            // Under the tree's exclusive lock: every record before it in the log is in the
            // tree, and none after it.
            logged()?;
            self.durable.as_ref().map_or(Ok(()), |d| d.log.sync_all())
        };
        let result = tree.forget_where(drop, &mut before);
        if let Some(exact) = exact {
            exact.recent.clear();
        }
        let count = match result {
            Ok(count) => count,
            Err(e) => {
                if let Some(d) = &self.durable {
                    d.log.poison_for(format!(
                        "namespace {:?}: a forget {what} failed half-way ({e}); reopen to \
                         finish it from the log",
                        self.name
                    ));
                }
                return Err(e);
            }
        };
        std::mem::drop(one);
        if let Some(d) = &self.durable {
            d.checkpoint(tree, &|| Ok(()))?;
        }
        Ok(count)
    }

    /// Forgets every URL that starts with `prefix` (compared as canonical URLs): afterwards
    /// each answers "new", every other URL recorded still answers "seen", and the result is how
    /// many recorded URLs were forgotten. The namespace must keep its URLs
    /// ([`NamespaceOptions::keep_urls`]); see `docs/forget.md`, "Forgetting a prefix".
    ///
    /// The prefix is canonicalized with the namespace's profile, as a URL (so
    /// `HTTPS://Example.com` is `https://example.com/`, every URL of that origin). It must have
    /// a host, and no query, fragment or dot segment: canonicalizing those can drop or reorder
    /// parts, which would make the prefix broader than asked.
    ///
    /// How: the URL journal is read for the entries of the prefix's host that start with it;
    /// then, under the tree's exclusive lock (nothing is recorded meanwhile), the entries
    /// appended since are read too, a forget record listing their fingerprints is logged, and
    /// the leaves holding them are rewritten without them, as [`Self::forget_host`] does. The
    /// host's kept records (URLs answered "seen" on a Bloom false positive, never recorded)
    /// go too. In a counting namespace the fingerprints are forgotten one by one.
    ///
    /// # Errors
    /// [`Error::InvalidUrl`], [`Error::InvalidPrefix`]; [`Error::ForgetByUnsupported`] when
    /// the namespace does not keep its URLs; [`Error::ForgetHostUnknown`]; then as
    /// [`Self::forget_host`].
    pub fn forget_prefix(&self, prefix: &str) -> Result<u64> {
        let invalid = |reason: &str| Error::InvalidPrefix {
            prefix: prefix.to_owned(),
            reason: reason.to_owned(),
        };
        if prefix.contains(['?', '#']) {
            return Err(invalid("a prefix ends before the query and fragment"));
        }
        let path = prefix.split_once("://").map_or(prefix, |(_, rest)| rest);
        let dot = |seg: &str| {
            let seg = seg.to_ascii_lowercase().replace("%2e", ".");
            seg == "." || seg == ".."
        };
        if path.split(['/', '\\']).skip(1).any(dot) {
            return Err(invalid("a dot segment (. or ..) would be resolved away"));
        }
        let canonical = self.canon.canonicalize(prefix)?;
        let Some(host) = crate::host::host_of(&canonical) else {
            return Err(invalid("it has no host once canonicalized"));
        };
        // What parsing drops (tabs, newlines, surrounding spaces) or decodes (a profile that
        // unescapes twice) can still hide a dot segment: one resolved away leaves fewer path
        // separators in the canonical prefix than were given.
        let separators = |path: &str| path.bytes().filter(|&b| b == b'/' || b == b'\\').count();
        let given = path.split_once(['/', '\\']).map_or("", |(_, rest)| rest);
        let kept = canonical.split_once("://").map_or("", |(_, rest)| rest);
        let kept = kept.split_once('/').map_or("", |(_, rest)| rest);
        if separators(kept) < separators(given) {
            return Err(invalid("a dot segment (. or ..) would be resolved away"));
        }
        let h = crate::host::host_hash(host, self.options.seed);
        let Some(urls) = &self.urls else {
            return Err(Error::ForgetByUnsupported {
                name: self.name.clone(),
                what: "by prefix",
                reason: "it does not keep its URLs, and records keep a hash of their host, not \
                         their path; create the namespace with --keep-urls (URL.RESERVE … \
                         KEEPURLS, NamespaceOptions::keep_urls), or forget the whole host",
            });
        };
        // The journal up to now, read without stopping writers.
        let found = std::cell::RefCell::new(std::collections::HashSet::new());
        let scan = |from: u64, to: u64| {
            urls.scan(from, to, &mut |fp, host, url| {
                if host == h && url.starts_with(canonical.as_bytes()) {
                    found.borrow_mut().insert(fp);
                }
            })
        };
        let scanned = urls.end()?;
        scan(0, scanned)?;
        match &self.set {
            Set::Tree { tree, exact } => {
                let mut logged = || -> Result<()> {
                    // Nothing is recorded from here until the forget is done: what was
                    // journaled meanwhile is read too.
                    scan(scanned, urls.end()?)?;
                    if let Some(d) = &self.durable {
                        let fps: Vec<u64> = found.borrow().iter().copied().collect();
                        d.log.append_with_hosts(crate::log::RecordKind::ForgetUrls, &fps, &[h])?;
                    }
                    Ok(())
                };
                let drop = |r: &crate::leaf_log::LeafRecord| {
                    r.host == h && (r.kept || found.borrow().contains(&r.fp))
                };
                let count =
                    self.forget_in_tree(tree, exact.as_ref(), "by prefix", &drop, &mut logged)?;
                Ok(count.recorded)
            }
            Set::Counting(set) => {
                if let Some(d) = &self.durable {
                    d.log.check()?;
                }
                // Records with no host have no entry: they might be URLs under the prefix.
                let unknown = set.count_host(0)?;
                if unknown > 0 {
                    return Err(Error::ForgetHostUnknown {
                        name: self.name.clone(),
                        records: unknown,
                    });
                }
                scan(scanned, urls.end()?)?;
                let fps: Vec<u64> = found.into_inner().into_iter().collect();
                let mut out = vec![false; fps.len()];
                let result = set.forget_many(&fps, &mut out);
                if let Some(d) = &self.durable {
                    set.sync().inspect_err(|e| {
                        d.log.poison_for(format!("namespace {:?}: {e}", self.name));
                    })?;
                }
                result?;
                Ok(out.iter().filter(|&&forgotten| forgotten).count() as u64)
            }
            Set::Recrawl(_) => Err(Error::ForgetByUnsupported {
                name: self.name.clone(),
                what: "by prefix",
                reason: "it has a recrawl window, whose URLs are not kept",
            }),
        }
    }

    /// One chunk of a dump of this namespace, in RedisBloom's `BF.SCANDUMP` protocol:
    /// iterator 0 gives the header (name, options, counts) with [`crate::dump::ITER_HEADER`];
    /// any iterator returned since gives the next chunk of fingerprints, at most `max_bytes`
    /// long; the last one comes with [`crate::dump::ITER_FINAL`], which gives
    /// `next == 0` and no data. Load them with [`Db::load_chunk`](crate::Db::load_chunk).
    ///
    /// The header call first finishes any split in progress, so an idle namespace dumps each
    /// fingerprint exactly once. Then it reads the leaf logs a chunk at a time, under each
    /// leaf's read lock: writes go on, and a dump taken while they do holds every record that
    /// was there when it began (some twice, if their leaf split meanwhile) and maybe some added
    /// since (see [`Dsbf::dump_records`]).
    ///
    /// # Errors
    /// [`Error::InvalidIterator`], [`Error::InvalidOption`] for a `max_bytes` outside
    /// [`crate::dump::MIN_CHUNK_BYTES`]`..=`[`crate::dump::MAX_CHUNK_BYTES`],
    /// [`Error::DumpUnsupported`] for a counting namespace or a recrawl window, a leaf file
    /// that cannot be read; at `iter` 0, [`Error::Poisoned`] if a split in progress cannot be
    /// finished.
    pub fn dump_chunk(&self, iter: i64, max_bytes: usize) -> Result<crate::dump::DumpChunk> {
        use crate::dump::{self, Data, DumpChunk, Header, ITER_FINAL, ITER_HEADER};
        if let Set::Recrawl(_) = &self.set {
            return Err(Error::DumpUnsupported {
                name: self.name.clone(),
                reason: "a recrawl window's generations have no dump format yet",
            });
        }
        let Set::Tree { tree, .. } = &self.set else {
            return Err(Error::DumpUnsupported {
                name: self.name.clone(),
                reason: "a counting namespace keeps its fingerprints in its store, which has no                          dump yet",
            });
        };
        let budget = dump::chunk_records(max_bytes)?;
        match iter {
            0 => {
                // A split in progress has its records both in the frozen parent and, for
                // those migrated, in a child: a walk would take them twice. Finishing it here
                // makes the dump of an idle namespace exact.
                tree.complete_splits();
                tree.check()?;
                let s = tree.stats();
                let data = Header::encode(&self.name, &self.options, s.count, s.kept);
                return Ok(DumpChunk { next: ITER_HEADER, data });
            }
            ITER_FINAL => return Ok(DumpChunk { next: 0, data: Vec::new() }),
            _ => {}
        }
        let from = dump::decode_iter(iter)?;
        let (mut recorded, mut kept) = (Vec::new(), Vec::new());
        let after =
            tree.dump_records(from, budget, &mut recorded, &mut kept).map_err(|e| match e {
                Error::Corrupt { .. } if from.records > 0 => Error::InvalidIterator(iter),
                other => other,
            })?;
        let next = match after {
            Some(pos) => dump::encode_iter(pos)?,
            None => ITER_FINAL,
        };
        let identity = dump::identity(&self.options);
        let data = Data { identity, from: iter, next, last: after.is_none(), recorded, kept };
        Ok(DumpChunk { next, data: data.encode() })
    }

    /// Records fingerprints of a dump as they were in the original: `recorded` as recorded
    /// (counted), `kept` as kept records, each in the leaf it routes to, and in a persistent
    /// `Db` in the log.
    ///
    /// # Errors
    /// As [`Self::seen_fingerprints`]; [`Error::DumpUnsupported`] for a counting namespace.
    pub(crate) fn restore_records(&self, recorded: &[u64], kept: &[u64]) -> Result<()> {
        let Set::Tree { tree, .. } = &self.set else {
            return Err(Error::DumpUnsupported {
                name: self.name.clone(),
                reason: "a counting namespace cannot be restored from a dump",
            });
        };
        if let Some(d) = &self.durable {
            d.log.check()?;
        }
        tree.check()?;
        let mut lsn = 0;
        {
            let mut log = |logged: &Logged<'_>| -> Result<u64> {
                let Some(d) = &self.durable else { return Ok(0) };
                let mut end = 0;
                d.append(logged, &mut end)?;
                lsn = lsn.max(end);
                Ok(end)
            };
            let mut out = vec![false; recorded.len()];
            tree.insert_batch_with(recorded, &[], &mut out, Mode::Record, &mut log)?;
            let mut out = vec![false; kept.len()];
            tree.insert_batch_with(kept, &[], &mut out, Mode::Keep, &mut log)?;
        }
        tree.check()?;
        if let Some(d) = &self.durable
            && lsn > 0
        {
            d.log.commit(lsn)?;
        }
        Ok(())
    }

    /// Distinct URLs recorded.
    pub fn len(&self) -> u64 {
        (match &self.set {
            // Those answered "new" and not committed yet count: a `BF.CARD` pipelined after a
            // `BF.ADD` sees it.
            Set::Tree { tree, .. } => tree.len(),
            Set::Counting(set) => set.len(),
            Set::Recrawl(gens) => gens.len(),
        }) + self.in_flight.len() as u64
    }

    /// Whether nothing was recorded yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Finishes every split in progress on the calling thread.
    pub fn complete_splits(&self) {
        match &self.set {
            Set::Tree { tree, .. } => tree.complete_splits(),
            Set::Recrawl(gens) => gens.namespaces().iter().for_each(|ns| ns.complete_splits()),
            Set::Counting(_) => {}
        }
    }

    /// The namespaces that hold this one's data: itself, or a recrawl window's live
    /// generations (expired ones dropped first, so that memory is freed without a write).
    pub(crate) fn parts(self: &Arc<Self>) -> Vec<Arc<Namespace>> {
        match &self.set {
            Set::Recrawl(gens) => {
                // A failure to delete an expired generation's files leaves them for the next
                // write (which reports it) or the next open.
                let _ = gens.expire();
                gens.namespaces()
            }
            _ => vec![Arc::clone(self)],
        }
    }

    /// The directory of this namespace, in a data directory.
    pub(crate) fn data_dir(&self) -> Option<&std::path::Path> {
        match (&self.set, &self.durable) {
            (Set::Recrawl(gens), _) => gens.dir(),
            (_, Some(d)) => Some(&d.dir),
            _ => None,
        }
    }

    /// The recrawl window (`recrawl_after`) and its generations, if the namespace has one.
    pub fn recrawl(&self) -> Option<RecrawlReport> {
        match &self.set {
            Set::Recrawl(gens) => Some(gens.report().0),
            _ => None,
        }
    }

    /// Writes a snapshot now (persistent `Db` only; a no-op in memory), so the next open replays
    /// no log. In exact mode the store is synced first, so it holds everything the snapshot
    /// covers. A counting namespace has no snapshot: its store is synced.
    ///
    /// # Errors
    /// [`Error::Io`], [`Error::Poisoned`], [`Error::Store`].
    pub fn checkpoint(&self) -> Result<()> {
        if let Set::Recrawl(gens) = &self.set {
            return gens.namespaces().iter().try_for_each(|ns| ns.checkpoint());
        }
        let Some(d) = &self.durable else { return Ok(()) };
        match &self.set {
            Set::Tree { tree, .. } => d.checkpoint(tree, &|| Ok(())),
            Set::Counting(set) => {
                d.log.flush_first(true)?;
                Ok(set.sync()?)
            }
            Set::Recrawl(_) => Ok(()),
        }
    }

    /// Makes every record written so far durable (persistent `Db` only).
    ///
    /// # Errors
    /// [`Error::Io`], [`Error::Poisoned`], [`Error::Store`].
    pub fn sync(&self) -> Result<()> {
        if let Set::Recrawl(gens) = &self.set {
            return gens.namespaces().iter().try_for_each(|ns| ns.sync());
        }
        let Some(d) = &self.durable else { return Ok(()) };
        d.log.sync_all()?;
        if let Set::Counting(set) = &self.set {
            d.log.flush_first(true)?;
            set.sync()?;
        }
        Ok(())
    }

    /// What recovery found when this namespace was opened (persistent `Db` only).
    pub fn recovery(&self) -> Option<&RecoveryReport> {
        self.durable.as_ref().map(|d| &d.recovery)
    }

    /// Counts, memory, FPR and the shape of the tree (or of the counting filters).
    pub fn stats(&self) -> NamespaceStats {
        let mut stats = match &self.set {
            Set::Tree { tree, exact } => {
                let mut s = self.tree_stats(tree);
                s.exact = match exact {
                    Some(e) => Some(e.report(tree)),
                    // Opened read-only (no index, no LRU): what the leaves hold.
                    None if self.options.is_exact() => Some(ExactReport::from(ExactStats {
                        recorded: tree.len(),
                        stored: tree.len(),
                        ..ExactStats::default()
                    })),
                    None => None,
                };
                s
            }
            Set::Counting(set) => self.counting_stats(set),
            Set::Recrawl(gens) => return self.recrawl_stats(gens),
        };
        if let Some(urls) = &self.urls {
            let (memory, disk) = urls.sizes();
            stats.memory_bytes += memory;
            stats.disk_bytes += disk;
            stats.kept_urls = Some(urls.entries());
        }
        stats.persistence = self.durable.as_ref().map(|d| {
            let l = d.log.stats();
            stats.disk_bytes +=
                l.bytes + d.snapshot_bytes.load(std::sync::atomic::Ordering::Acquire);
            PersistenceStats {
                fsync: d.log.policy().name(),
                log_bytes: l.bytes,
                syncs: l.syncs,
                sync_micros: l.sync_micros,
                snapshot_offset: d.snapshot_end.load(std::sync::atomic::Ordering::Acquire),
                recovery_truncated_bytes: d.recovery.truncated_bytes,
                read_only: d.log.is_read_only(),
                recovery_snapshot_error: d.recovery.snapshot_error.clone(),
            }
        });
        stats
    }

    fn mode(&self) -> &'static str {
        match (&self.set, self.options.is_exact()) {
            (Set::Counting(_), _) => "counting",
            (Set::Recrawl(_), true) => "exact",
            (Set::Recrawl(_), false) => "bloom",
            (Set::Tree { .. }, true) => "exact",
            (Set::Tree { .. }, false) => "bloom",
        }
    }

    fn tree_stats(&self, tree: &Dsbf) -> NamespaceStats {
        let t = tree.stats();
        let p = tree.params();
        let mut leaves_per_depth = vec![0u64; t.height as usize + 1];
        for leaf in &t.leaves {
            if let Some(n) = leaves_per_depth.get_mut(leaf.depth as usize) {
                *n += 1;
            }
        }
        NamespaceStats {
            name: self.name.clone(),
            mode: self.mode(),
            count: t.count,
            kept: t.kept,
            memory_bytes: t.memory_bytes,
            filter_reserved_bytes: t.filter_reserved_bytes,
            disk_bytes: t.disk_bytes,
            kept_urls: None,
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
            exact: None,
            counting: None,
            recrawl: None,
            persistence: None,
        }
    }

    /// A window's statistics: its generations' summed (counts, memory, disk, leaves), the
    /// tree parameters of its generations, and the union's FPR estimate `1 − Π(1 − f_i)`.
    fn recrawl_stats(&self, gens: &Generations) -> NamespaceStats {
        let (report, parts) = gens.report();
        let union = |f: &dyn Fn(&NamespaceStats) -> f64| {
            1.0 - parts.iter().map(|s| 1.0 - f(s)).product::<f64>()
        };
        let g = self.options.generation_options();
        let p = crate::persist::tree_params(&g);
        let mut leaves_per_depth: Vec<u64> = Vec::new();
        for s in &parts {
            for (d, n) in s.leaves_per_depth.iter().enumerate() {
                if leaves_per_depth.len() <= d {
                    leaves_per_depth.resize(d + 1, 0);
                }
                leaves_per_depth[d] += n;
            }
        }
        let sum = |f: &dyn Fn(&NamespaceStats) -> u64| parts.iter().map(f).sum::<u64>();
        NamespaceStats {
            name: self.name.clone(),
            mode: self.mode(),
            count: sum(&|s| s.count),
            kept: sum(&|s| s.kept),
            memory_bytes: sum(&|s| s.memory_bytes),
            filter_reserved_bytes: sum(&|s| s.filter_reserved_bytes),
            disk_bytes: sum(&|s| s.disk_bytes),
            kept_urls: None,
            fpr_bound: self.options.fpr,
            worst_leaf_fpr: union(&|s| s.worst_leaf_fpr),
            mean_leaf_fpr: union(&|s| s.mean_leaf_fpr),
            profile: self.options.canon.profile.name(),
            seed: self.options.seed,
            leaf_bits: p.leaf_bits,
            leaf_hashes: p.leaf_hashes,
            leaf_capacity: p.leaf_capacity,
            split_fanout: p.split.fanout,
            initial_leaves: p.initial_leaves,
            height: parts.iter().map(|s| s.height).max().unwrap_or(0),
            leaf_count: parts.iter().map(|s| s.leaf_count).sum(),
            inner_nodes: parts.iter().map(|s| s.inner_nodes).sum(),
            splitting_nodes: parts.iter().map(|s| s.splitting_nodes).sum(),
            splits_started: sum(&|s| s.splits_started),
            splits_done: sum(&|s| s.splits_done),
            leaves_per_depth,
            leaves: parts.iter().flat_map(|s| s.leaves.iter().cloned()).collect(),
            exact: None,
            counting: None,
            recrawl: Some(report),
            persistence: parts.last().and_then(|s| s.persistence.clone()),
        }
    }

    fn counting_stats(&self, set: &CountingSet) -> NamespaceStats {
        let c = set.stats();
        let active = c.generations.last();
        NamespaceStats {
            name: self.name.clone(),
            mode: self.mode(),
            count: c.len,
            kept: 0,
            memory_bytes: c.memory_bytes,
            filter_reserved_bytes: c.filter_memory_bytes,
            disk_bytes: 0,
            kept_urls: None,
            fpr_bound: self.options.fpr,
            worst_leaf_fpr: c.generations.iter().map(|g| g.estimated_fpr).fold(0.0, f64::max),
            mean_leaf_fpr: c.filter_fpr,
            profile: self.options.canon.profile.name(),
            seed: self.options.seed,
            leaf_bits: active.map_or(0, |g| g.counters),
            leaf_hashes: active.map_or(0, |g| g.hashes),
            leaf_capacity: active.map_or(0, |g| g.capacity),
            split_fanout: 0,
            initial_leaves: 0,
            height: 0,
            leaf_count: 0,
            inner_nodes: 0,
            splitting_nodes: 0,
            splits_started: 0,
            splits_done: 0,
            leaves_per_depth: Vec::new(),
            leaves: Vec::new(),
            exact: Some(ExactReport::from(set.exact().stats())),
            counting: Some(CountingReport {
                generations: c.generations.len(),
                saturated_counters: c.saturated_counters,
                filter_fpr: c.filter_fpr,
                filter_memory_bytes: c.filter_memory_bytes,
                definitely_new: c.definitely_new,
                filter_positives: c.filter_positives,
                false_positives: c.false_positives,
                recounted_counters: c.recounted_counters,
                recount_scans: c.recount_scans,
            }),
            recrawl: None,
            persistence: None,
        }
    }
}

/// A namespace's statistics, from [`Namespace::stats`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NamespaceStats {
    /// Namespace name.
    pub name: String,
    /// `bloom`, `exact` or `counting`.
    pub mode: &'static str,
    /// Distinct URLs recorded.
    pub count: u64,
    /// Kept records: URLs answered "seen" on a Bloom positive, logged so that they stay "seen"
    /// after the splits that rebuild the filters from the logs. Not in `count`.
    pub kept: u64,
    /// RAM held: filters, leaf buffers and indexes (and, for a namespace in memory, the leaf
    /// logs), in bytes. What RSS shows for this namespace, allocator slack aside. A leaf's
    /// filter is allocated when the leaf records its first URL, so a namespace reserved for a
    /// large capacity holds little until its leaves are used.
    pub memory_bytes: u64,
    /// What the filters take once every leaf has recorded something (`memory_bytes` grows
    /// toward it as leaves are first used; splits add new leaves), in bytes.
    pub filter_reserved_bytes: u64,
    /// Disk held: leaf files, in a data directory the log and the snapshot, and the URL
    /// journal, in bytes.
    pub disk_bytes: u64,
    /// Entries in the URL journal of a namespace that keeps its URLs
    /// ([`NamespaceOptions::keep_urls`]): about one per distinct URL recorded. `None`
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_urls: Option<u64>,
    /// The configured bound `f_max`.
    pub fpr_bound: f64,
    /// The worst leaf's estimated FPR (formula 7): the namespace's FPR bound in effect. In
    /// exact mode this is the rate at which new URLs cost a store read, not a rate of wrong
    /// answers (see [`ExactReport::collision_bound`]). In a counting namespace, the worst
    /// generation's.
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
    /// The LRU and fingerprint store, in exact mode.
    pub exact: Option<ExactReport>,
    /// The counting filters, in a counting namespace (whose tree fields above are then zero,
    /// except `leaf_bits`, `leaf_hashes` and `leaf_capacity`, which describe the active
    /// generation: counters, k and capacity).
    pub counting: Option<CountingReport>,
    /// The recrawl window and each live generation's age and count, if the namespace has a
    /// window (then the counts, memory and leaves above are the generations' summed, the leaf
    /// parameters a generation's, and the FPR estimates the union's).
    pub recrawl: Option<RecrawlReport>,
    /// The log and snapshot, in a persistent `Db` (for a recrawl window, its current
    /// generation's).
    pub persistence: Option<PersistenceStats>,
}

/// Exact mode's LRU and store, in [`NamespaceStats`]. Counters are since the namespace was
/// opened.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExactReport {
    /// Bloom positives answered by the LRU (no store read).
    pub lru_hits: u64,
    /// Point reads of the store (counting); page reads of leaf index runs (exact DSBF).
    pub store_reads: u64,
    /// Store reads that found the fingerprint; positives found in a run (exact DSBF).
    pub store_hits: u64,
    /// Write batches sent to the store; runs written (exact DSBF).
    pub store_writes: u64,
    /// Fingerprints recorded in the store.
    pub recorded: u64,
    /// Fingerprints forgotten.
    pub forgotten: u64,
    /// Fingerprints in the store now.
    pub stored: u64,
    /// Fingerprints in the LRU now, and its capacity.
    pub lru_len: u64,
    /// The LRU's capacity.
    pub lru_capacity: u64,
    /// Heap bytes of the LRU.
    pub lru_memory_bytes: u64,
    /// The false-positive bound left: the chance that a new URL's 64-bit fingerprint equals
    /// one of the `stored` ones, at most `stored / 2^64`.
    pub collision_bound: f64,
}

impl From<ExactStats> for ExactReport {
    fn from(s: ExactStats) -> Self {
        ExactReport {
            lru_hits: s.lru_hits,
            store_reads: s.store_reads,
            store_hits: s.store_hits,
            store_writes: s.store_writes,
            recorded: s.recorded,
            forgotten: s.forgotten,
            stored: s.stored,
            lru_len: s.lru_len,
            lru_capacity: s.lru_capacity,
            lru_memory_bytes: s.lru_memory_bytes,
            collision_bound: s.stored as f64 / 2f64.powi(64),
        }
    }
}

/// A counting namespace's filters, in [`NamespaceStats`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CountingReport {
    /// Filter generations (each twice the previous one's capacity).
    pub generations: usize,
    /// Counters at 15, over all generations.
    pub saturated_counters: u64,
    /// The rate at which the filters send a new URL to the store.
    pub filter_fpr: f64,
    /// Bytes of counters.
    pub filter_memory_bytes: u64,
    /// URLs the filters declared new with no store read (since opened).
    pub definitely_new: u64,
    /// URLs the filters sent to the LRU and store.
    pub filter_positives: u64,
    /// Of those, the ones the store did not know (filter false positives, recorded as new).
    pub false_positives: u64,
    /// Saturated counters recounted from the store by `forget`.
    pub recounted_counters: u64,
    /// Store scans `forget` made to recount them.
    pub recount_scans: u64,
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
    /// Bytes of a torn or damaged log tail that recovery cut when the namespace was opened
    /// (records in them are gone; under `fsync = always` none of them was acknowledged). When
    /// `read_only`, the tail was found and left in place: the next read-write open cuts it.
    pub recovery_truncated_bytes: u64,
    /// Whether the data directory was opened read-only (`urlseen stats`): nothing was
    /// written, and the figures are those a read-write open would find.
    pub read_only: bool,
    /// Why recovery did not use the snapshot, if it did not (the namespace was rebuilt from the
    /// log instead, which loses nothing).
    pub recovery_snapshot_error: Option<String>,
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
    /// Elements it holds before it splits (`u` at its depth: deeper leaves are larger when the
    /// split policy's growth is above 1).
    pub capacity: u64,
    /// Bits of its filter.
    pub bits: u64,
    /// Fraction of bits set.
    pub fill_ratio: f64,
    /// Whether its filter holds memory (allocated by the leaf's first record).
    pub allocated: bool,
    /// Estimated FPR from the count.
    pub estimated_fpr: f64,
}

impl From<&LeafStats> for LeafReport {
    fn from(l: &LeafStats) -> Self {
        LeafReport {
            id: l.id,
            depth: l.depth,
            count: l.count,
            capacity: l.capacity,
            bits: l.bits,
            fill_ratio: l.fill_ratio,
            allocated: l.allocated,
            estimated_fpr: l.estimated_fpr,
        }
    }
}
