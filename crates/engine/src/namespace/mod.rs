//! A namespace: one crawl job's URL-seen set, a DSBF plus the way its URLs are canonicalized.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::exact::{CountingOptions, CountingSet, ExactOptions, ExactStats, RecentCache};
use crate::fingerprint::Fingerprinter;
use crate::leaf_index::IndexStore;
use crate::leaf_log::LeafStore;
use crate::options::NamespaceOptions;
use crate::tree::{Dsbf, ExactHooks, LeafStats, Logged, Mode, SplitWorkers};
use backing::{Backing, InJournal, Lsn};
use host_dict::{HostDict, Vouch};
use persist::RecoveryReport;
use recrawl::{Generations, RecrawlReport};
use reservation::{InFlight, Reservation};
use url_journal::UrlJournal;

pub(crate) mod backing;
mod batch;
pub(crate) mod check;
mod dump;
mod forget;
mod host_dict;
pub(crate) mod persist;
mod place;
pub mod recrawl;
pub mod reservation;
mod reserve;
mod seen_set;
mod small;
pub(crate) mod small_journal;
mod stats;
mod unload;
mod url_journal;
mod usage;
pub use batch::ManyOp;
pub(crate) use place::Place;
use small::Leaves;
pub(crate) use small::{JournalHome, LeafSource};
pub use stats::{CountingReport, ExactReport, LeafReport, NamespaceStats, PersistenceStats};
pub use url_journal::{MAX_KEPT_URL, RECENT as RECENT_JOURNALED};
pub(crate) use usage::Ledger;
pub use usage::Usage;

/// What [`Namespace::seen_fingerprints_then`] (and a recrawl window's held batch) calls with a
/// batch's answers before committing.
type HandOn<'a> = dyn FnMut(&[bool]) -> std::io::Result<()> + 'a;

/// How a `Db`'s catalog hashes a namespace's name: keyed with a random seed per process, as
/// std's `RandomState` (so a client cannot choose names that collide), and the same in every
/// catalog of the process, as each namespace keeps its name's ([`Namespace::name_hash`]).
pub(crate) fn hash_name(name: &str) -> u64 {
    static KEY: LazyLock<foldhash::quality::RandomState> = LazyLock::new(Default::default);
    KEY.hash_one(name)
}

/// One crawl job's URL-seen set. Cheap to share (`Arc`), `Send + Sync`.
#[derive(Debug)]
pub struct Namespace {
    /// Its own copy (a box: the catalog finds a namespace by the name it holds, and an `Arc`'s
    /// counts would cost 16 bytes more in a million namespaces; see [`Self::shared_name`]).
    name: Box<str>,
    /// [`hash_name`] of `name` (see [`Namespace::name_hash`]).
    name_hash: u64,
    /// Shared by every namespace made with equal options (see [`shared_options`]).
    options: Arc<NamespaceOptions>,
    /// What decides "seen": read through [`Self::set`], which finds the tree a small list grew
    /// into.
    held: Set,
    /// Where its answers rest: the process, or a data directory.
    backing: Backing,
    /// Fingerprints answered "new" by a [`Reservation`] not committed yet.
    in_flight: InFlight,
    /// The hosts recorded under each host hash: the collision guard of a forget by host. A
    /// window's generations share their window's. `None` for a small namespace, whose list
    /// keeps its hosts until it becomes a tree (see [`small`]); read through
    /// [`Self::note_host`], [`Self::note_hosts`] and [`Self::vouch`].
    hosts: Option<Arc<HostDict>>,
    /// The canonical URLs recorded, for a forget by prefix ([`NamespaceOptions::keep_urls`]).
    urls: Option<Arc<UrlJournal>>,
    /// Its part in the `Db`'s running totals of memory and disk.
    share: usage::Share,
}

/// What decides "seen" in a namespace.
#[derive(Debug)]
enum Set {
    /// The DSBF; in exact mode its leaves index their fingerprints, behind an LRU.
    Tree { tree: Arc<Dsbf>, exact: Option<Box<TreeExact>> },
    /// A counting namespace: seed 004's IMP-CB, which can forget.
    Counting(Box<CountingSet>),
    /// A recrawl window: generations of namespaces, each a DSBF (see [`crate::recrawl`]).
    Recrawl(Box<Generations>),
    /// A namespace of few items: a sorted list, then the tree it grows into (see
    /// [`small`]). Read through [`Namespace::set`], never matched as the tree.
    Small(small::SmallSet),
}

/// Exact mode over the DSBF: seed 002's LRU of recent URLs in front of the leaf indexes (see
/// [`Dsbf::insert_batch_exact`]), and how often an index confirmed a positive.
#[derive(Debug)]
struct TreeExact {
    recent: RecentCache,
    confirmed: AtomicU64,
}

impl TreeExact {
    /// The cache, and `tree` made exact: its leaves index their records (in `index`, rebuilt
    /// from the leaves' records).
    fn enable(tree: &Dsbf, index: Arc<IndexStore>) -> Result<Self> {
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
fn index_store(tree: &Dsbf) -> Result<Arc<IndexStore>> {
    match tree.leaf_store() {
        LeafStore::Memory => Ok(IndexStore::in_memory()),
        LeafStore::Files(files) => IndexStore::create(files.dir().with_file_name("index")),
    }
}

/// The exact index's options in a namespace (seed 002's LRU size, seed 004's refcounts).
fn exact_options() -> ExactOptions {
    ExactOptions::default()
}

/// Whether a namespace logs its Bloom positives as kept, so that an item once answered "seen"
/// stays seen after any split (see [`crate::tree`]): a set of raw items (profile `none`, as
/// every `BF.*` key is) makes RedisBloom's promise that an added item always exists. A URL
/// namespace makes the crawler's: every URL recorded stays seen, and a repeat writes nothing,
/// so its disk grows with distinct URLs only (docs/durability.md, "Seen stays seen").
fn keeps_positives(options: &NamespaceOptions) -> bool {
    options.canon.profile == urlseen_canon::Profile::None
}

/// A counting namespace's filter geometry: classic counting filters sized for the namespace's
/// capacity and FPR (in exact mode the FPR only costs store reads), with its seed.
fn counting_options(options: &NamespaceOptions) -> Result<CountingOptions> {
    let mut c = CountingOptions::with_fpr(options.capacity, options.fpr)?;
    c.seed = options.seed;
    c.exact = exact_options();
    Ok(c)
}

impl Namespace {
    /// A namespace that is not persisted: its leaves' fingerprints in `leaves` (memory, or
    /// files in a spill directory).
    fn new(
        name: String,
        options: NamespaceOptions,
        workers: Arc<SplitWorkers>,
        leaves: impl Into<Leaves>,
    ) -> Result<Self> {
        options.validate()?;
        let leaves = leaves.into();
        let set = if options.counting {
            Set::Counting(Box::new(CountingSet::in_memory(counting_options(&options)?)?))
        } else if let Some(small) = small::small_set(&options, &leaves, &workers) {
            Set::Small(small)
        } else {
            let leaves = leaves.open(&name)?;
            let tree = Dsbf::new(crate::tree::TreeParams::from(&options), workers, leaves);
            let exact = match options.is_exact() {
                true => Some(Box::new(TreeExact::enable(&tree, index_store(&tree)?)?)),
                false => None,
            };
            Set::Tree { tree, exact }
        };
        Self::from_parts(name, options, set, Backing::Volatile)
    }

    /// A small namespace in its data directory's journal (see `crate::namespace::small_journal`),
    /// as namespace `id` of `journal`: new, or read back with the `hosts` and `items` it listed. It
    /// becomes a tree in a directory of its own, made by `source`, once it outgrows its list.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for options a journal namespace does not take (it starts
    /// small); the tree's, for more items than a list holds.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn in_journal(
        name: String,
        options: NamespaceOptions,
        journal: Arc<small_journal::SmallJournal>,
        id: u32,
        source: &LeafSource,
        workers: &Arc<SplitWorkers>,
        hosts: &[(u32, String)],
        items: &[(u64, u32)],
    ) -> Result<Self> {
        let Some(small) = small::small_set(&options, &Leaves::Later(source.clone()), workers)
        else {
            return Err(Error::InvalidOption {
                name: "capacity",
                reason: format!("namespace {name:?} does not start small, so not in a journal"),
            });
        };
        // Read back into the list alone (nothing journaled again).
        let volatile = Backing::Volatile;
        for (hash, host) in hosts {
            let full = crate::host::host_hashes(host, options.seed).1;
            small.note_host(*hash, full, host, &name, &options, &volatile)?;
        }
        if !items.is_empty() {
            let fps: Vec<u64> = items.iter().map(|i| i.0).collect();
            let item_hosts: Vec<u32> = items.iter().map(|i| i.1).collect();
            let mut out = vec![false; fps.len()];
            match small.insert(&fps, &item_hosts, &mut out, &name, &options, &volatile) {
                Some(done) => {
                    done?;
                }
                None => {
                    return Err(Error::InvalidOption {
                        name: "journal",
                        reason: format!("namespace {name:?} holds more than a list does"),
                    });
                }
            }
        }
        let moved = once_cell::race::OnceBox::new();
        let backing = Backing::Journal(InJournal { journal, id, moved });
        Self::from_parts(name, options, Set::Small(small), backing)
    }

    fn from_parts(
        name: String,
        options: NamespaceOptions,
        set: Set,
        backing: Backing,
    ) -> Result<Self> {
        let hosts = match (backing.durable(), &set) {
            (_, Set::Recrawl(gens)) => Some(gens.hosts()),
            (Some(d), _) => {
                let read_only = backing.is_read_only();
                Some(Arc::new(HostDict::open(&d.storage, &d.dir, read_only, options.seed)?))
            }
            (None, Set::Small(_)) => None,
            (None, _) => Some(Arc::new(HostDict::in_memory())),
        };
        Self::assemble(name, options, set, backing, hosts)
    }

    /// A namespace whose records' hosts are listed in `hosts`: its own, or for a generation
    /// of a recrawl window, the window's. In a data directory the dictionary's file, and the
    /// URL journal of a namespace that keeps its URLs, precede the log on disk (see
    /// `crate::namespace::host_dict`, `crate::namespace::url_journal`).
    ///
    /// # Errors
    /// The URL journal's, when it cannot be opened.
    fn with_hosts(
        name: String,
        options: NamespaceOptions,
        set: Set,
        backing: Backing,
        hosts: Arc<HostDict>,
    ) -> Result<Self> {
        Self::assemble(name, options, set, backing, Some(hosts))
    }

    fn assemble(
        name: String,
        options: NamespaceOptions,
        set: Set,
        backing: Backing,
        hosts: Option<Arc<HostDict>>,
    ) -> Result<Self> {
        if let (Some(d), Some(file)) = (backing.durable(), hosts.as_ref().and_then(|h| h.file())) {
            d.log.precede_with(file);
        }
        let urls = match options.keep_urls {
            true => Some(Arc::new(Self::open_url_journal(&set, &backing)?)),
            false => None,
        };
        if let (Some(urls), Some(d)) = (&urls, backing.durable()) {
            // Every entry is on disk before the records that rely on it are.
            d.log.precede_with(Arc::clone(urls) as Arc<dyn crate::log::Precedes>);
        }
        if let Set::Tree { tree, .. } = &set {
            tree.set_keep_positives(keeps_positives(&options));
        }
        Ok(Namespace {
            name_hash: hash_name(&name),
            name: name.into(),
            options: shared_options(options),
            held: set,
            backing,
            in_flight: InFlight::default(),
            hosts,
            urls,
            share: usage::Share::default(),
        })
    }

    /// The URL journal of a namespace that keeps its URLs: in its data directory, beside its
    /// leaf files in a spill directory, or on the heap with the leaves.
    fn open_url_journal(set: &Set, backing: &Backing) -> Result<UrlJournal> {
        if let Some(d) = backing.durable() {
            // Only a namespace that holds nothing may start a journal: one whose journal is
            // gone would forget none of the URLs recorded before by prefix, silently.
            let empty = match set {
                Set::Tree { tree, .. } => tree.is_empty(),
                Set::Counting(set) => set.is_empty(),
                Set::Recrawl(_) | Set::Small(_) => true,
            };
            return UrlJournal::open(
                &d.storage,
                &d.dir.join("urls"),
                backing.is_read_only(),
                empty,
            );
        }
        match set {
            Set::Tree { tree, .. } => match tree.leaf_store() {
                LeafStore::Files(files) => {
                    // Beside the leaves' directory, which is made with the first leaf file.
                    let path = files.dir().with_file_name("urls");
                    if let Some(dir) = path.parent() {
                        files
                            .storage()
                            .create_dir_all(dir)
                            .map_err(|e| Error::io("create directory", dir, e))?;
                    }
                    UrlJournal::open(files.storage(), &path, false, true)
                }
                LeafStore::Memory => Ok(UrlJournal::in_memory()),
            },
            _ => Ok(UrlJournal::in_memory()),
        }
    }

    /// What decides "seen" now: the tree a small list grew into, once it did.
    fn set(&self) -> &Set {
        match &self.held {
            Set::Small(small) => small.grown().unwrap_or(&self.held),
            held => held,
        }
    }

    /// [`Self::set`], with a small list made a tree first: for what only a tree does (a
    /// dump, a forget by host or prefix).
    ///
    /// # Errors
    /// The tree's, when the list's items cannot be recorded in it.
    fn tree_set(&self) -> Result<&Set> {
        match &self.held {
            Set::Small(small) => small.grow(&self.name, &self.options, &self.backing),
            held => Ok(held),
        }
    }

    fn in_flight(&self) -> &InFlight {
        &self.in_flight
    }

    pub(crate) fn backing(&self) -> &Backing {
        &self.backing
    }

    /// `e`, a failure of the counting store that may have left a write half done, after it
    /// poisons the namespace: every later write is refused until the data directory is
    /// reopened, where recovery rebuilds from the log (which has none of it).
    fn poisoned_by_store(&self, e: Error) -> Error {
        self.backing.poison(|| format!("namespace {:?}: {e}; reopen to recover", self.name));
        e
    }

    /// Fails as the backing and `tree` would refuse a write; but a namespace poisoned by a
    /// failed write of its own files (a full disk, no file descriptor left) first tries to
    /// recover, at most once a second (see [`Backing::recover`]), and writes go on if it did.
    ///
    /// # Errors
    /// [`Error::Poisoned`] (with the failure's reason while it lasts), [`Error::ReadOnly`],
    /// the tree's errors.
    fn check_writable(&self, tree: Option<&Dsbf>) -> Result<()> {
        let checked = self.backing.check().and_then(|()| tree.map_or(Ok(()), |t| t.check()));
        if !matches!(checked, Err(Error::Poisoned { .. })) {
            return checked;
        }
        match self.backing.recover(tree.map(|t| t.leaf_store())) {
            Ok(true) => self.backing.check().and_then(|()| tree.map_or(Ok(()), |t| t.check())),
            // Not yet time, or the cause is still there: the failure's own reason.
            Ok(false) | Err(Error::Io { .. }) => checked,
            Err(e) => Err(e),
        }
    }

    /// How its URLs become fingerprints: made from its options when asked (a few words, so a
    /// namespace keeps none).
    fn fingerprinter(&self) -> Fingerprinter {
        Fingerprinter::new(&self.options)
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// [`hash_name`] of its name, kept as some languages' strings keep theirs: a `Db`'s
    /// catalog finds a namespace by its name and, when its table doubles, moves every entry
    /// by its hash. Read here, that reads each namespace and not also its name, a cache miss
    /// further, which made a million namespaces' doubling stall every creation about three
    /// times as long (see docs/benchmarks.md, "Many namespaces").
    pub(crate) fn name_hash(&self) -> u64 {
        self.name_hash
    }

    /// The name, as the lists of namespaces with files of their own hold it (a copy: those
    /// are the few namespaces that grew).
    pub(crate) fn shared_name(&self) -> Arc<str> {
        Arc::from(&*self.name)
    }

    /// The options it was created with.
    pub fn options(&self) -> &NamespaceOptions {
        &self.options
    }

    /// Whether [`Self::forget`] works here (counting namespaces).
    pub fn can_forget(&self) -> bool {
        matches!(self.held, Set::Counting(_))
    }

    /// Canonicalizes `url` with the namespace's profile and hashes it with the namespace's seed:
    /// the one fingerprint every later step derives from.
    ///
    /// # Errors
    /// [`Error::InvalidUrl`] if the URL cannot be canonicalized.
    pub fn fingerprint(&self, url: &str) -> Result<u64> {
        Ok(self.fingerprinter().fingerprint(url)?)
    }

    /// [`Self::fingerprint`] and the hash of the URL's canonical host, which the record keeps
    /// so that [`Self::forget_host`] can find it (0 for a URL with no host).
    ///
    /// # Errors
    /// [`Error::InvalidUrl`] if the URL cannot be canonicalized.
    pub fn fingerprint_host(&self, url: &str) -> Result<(u64, u32)> {
        self.fingerprinter().with_canonical(url, |canonical, fp| {
            let Some(host) = crate::host::host_of(canonical) else { return Ok((fp, 0)) };
            let (h, full) = crate::host::host_hashes(host, self.options.seed);
            // Listed before any record can carry `h` (see `crate::namespace::host_dict`).
            self.note_host(h, full, host)?;
            // Journaled before any record of it can be made, unless it is known to be there
            // (see `crate::namespace::url_journal`).
            if let Some(urls) = &self.urls {
                let journaled = match self.options.is_exact() {
                    true => self.contains_fingerprint(fp)?,
                    false => urls.journaled_lately(fp),
                };
                if !journaled {
                    urls.append(fp, h, canonical)?;
                }
            }
            Ok((fp, h))
        })?
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
        let fingerprinter = self.fingerprinter();
        let mut hosts = Vec::with_capacity(urls.len());
        let mut host_url = Vec::with_capacity(urls.len());
        for (i, url) in urls.iter().enumerate() {
            let result = fingerprinter.with_canonical(url, |canonical, fp| {
                let Some(host) = crate::host::host_of(canonical) else { return (fp, 0) };
                let (h, full) = crate::host::host_hashes(host, self.options.seed);
                hosts.push((h, full));
                host_url.push(i);
                (fp, h)
            });
            out.push(result.map_err(Error::from));
        }
        // A host met for the first time is named again from its URL (rare, so cheaper than
        // keeping every URL's host).
        let failed = self.note_hosts(&hosts, |k| {
            let url = urls[host_url[k]];
            fingerprinter
                .with_canonical(url, |canonical, _| {
                    crate::host::host_of(canonical).map(str::to_owned)
                })?
                .ok_or_else(|| Error::InvalidHost {
                    host: url.to_owned(),
                    reason: "its host changed when canonicalized again".into(),
                })
        });
        for (k, e) in failed {
            out[host_url[k]] = Err(e);
        }
    }

    /// Lists `host` in the namespace's host dictionary (see [`HostDict::note`]), or a small
    /// namespace's list.
    fn note_host(&self, hash: u32, full: u64, host: &str) -> Result<()> {
        match (&self.hosts, &self.held) {
            (Some(dict), _) => dict.note(hash, full, host),
            (None, Set::Small(small)) => {
                small.note_host(hash, full, host, &self.name, &self.options, &self.backing)
            }
            (None, _) => unreachable!("only a small namespace is made without a dictionary"),
        }
    }

    /// [`HostDict::note_batch`] in the namespace's dictionary, or a small namespace's list.
    fn note_hosts(
        &self,
        hosts: &[(u32, u64)],
        name: impl FnMut(usize) -> Result<String>,
    ) -> Vec<(usize, Error)> {
        match (&self.hosts, &self.held) {
            (Some(dict), _) => dict.note_batch(hosts, name),
            (None, Set::Small(small)) => {
                small.note_hosts(hosts, name, &self.name, &self.options, &self.backing)
            }
            (None, _) => unreachable!("only a small namespace is made without a dictionary"),
        }
    }

    /// What is listed under host hash `hash`, for a forget of `host` (see
    /// [`HostDict::vouch`]).
    fn vouch(&self, hash: u32, host: &str) -> Vouch {
        match (&self.hosts, &self.held) {
            (Some(dict), _) => dict.vouch(hash, host),
            (None, Set::Small(small)) => small.vouch(hash, host),
            (None, _) => unreachable!("only a small namespace is made without a dictionary"),
        }
    }

    /// The fingerprint of raw bytes, with no canonicalization (what `BF.*` items use).
    pub fn fingerprint_bytes(&self, item: &[u8]) -> u64 {
        self.fingerprinter().of_bytes(item)
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

    /// Distinct URLs recorded.
    pub fn len(&self) -> u64 {
        // Those answered "new" and not committed yet count: a `BF.CARD` pipelined after a
        // `BF.ADD` sees it.
        self.recorded_len() + self.in_flight.len() as u64
    }

    /// Whether nothing was recorded yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether it is a tree or made of trees (a recrawl window's), which split: not a small
    /// list, nor a counting namespace.
    pub(crate) fn is_tree(&self) -> bool {
        matches!(self.set(), Set::Tree { .. } | Set::Recrawl(_))
    }

    /// Finishes every split in progress on the calling thread.
    pub fn complete_splits(&self) {
        match self.set() {
            Set::Tree { tree, .. } => tree.complete_splits(),
            Set::Recrawl(gens) => gens.namespaces().iter().for_each(|ns| ns.complete_splits()),
            Set::Counting(_) | Set::Small(_) => {}
        }
    }

    /// The namespaces that hold this one's data: itself, or a recrawl window's live
    /// generations (expired ones dropped first, so that memory is freed without a write).
    pub(crate) fn parts(self: &Arc<Self>) -> Vec<Arc<Namespace>> {
        match self.set() {
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
        match self.set() {
            Set::Recrawl(gens) => gens.dir(),
            _ => self.backing.dir(),
        }
    }

    /// The recrawl window (`recrawl_after`) and its generations, if the namespace has one.
    pub fn recrawl(&self) -> Option<RecrawlReport> {
        match self.set() {
            Set::Recrawl(gens) => Some(gens.report().0),
            _ => None,
        }
    }

    /// Writes a snapshot now (persistent `Db` only; a no-op in memory), so the next open replays
    /// no log. In exact mode the store is synced first, so it holds everything the snapshot
    /// covers. A counting namespace has no snapshot: its store is synced.
    ///
    /// # Errors
    /// [`Error::Io`], [`Error::Poisoned`], [`Error::Corrupt`].
    pub fn checkpoint(&self) -> Result<()> {
        let done = self.checkpoint_unaccounted();
        self.measure();
        done
    }

    fn checkpoint_unaccounted(&self) -> Result<()> {
        if let Set::Recrawl(gens) = self.set() {
            return gens.namespaces().iter().try_for_each(|ns| ns.checkpoint());
        }
        match self.set() {
            Set::Tree { tree, .. } => self.backing.checkpoint(tree),
            Set::Counting(set) if self.backing.durable().is_some() => {
                self.backing.flush_first(true)?;
                Ok(set.sync()?)
            }
            // A small list is on the heap only: nothing to write.
            Set::Counting(_) | Set::Recrawl(_) | Set::Small(_) => Ok(()),
        }
    }

    /// Makes every record written so far durable (persistent `Db` only).
    ///
    /// # Errors
    /// [`Error::Io`], [`Error::Poisoned`], [`Error::Corrupt`].
    pub fn sync(&self) -> Result<()> {
        if let Set::Recrawl(gens) = self.set() {
            return gens.namespaces().iter().try_for_each(|ns| ns.sync());
        }
        if let Some(j) = self.backing.journal() {
            // The journal, which every small namespace of its data directory shares.
            return j.journal.log().sync_all();
        }
        if self.backing.durable().is_none() {
            return Ok(());
        }
        self.backing.sync()?;
        if let Set::Counting(set) = self.set() {
            self.backing.flush_first(true)?;
            set.sync()?;
        }
        Ok(())
    }

    /// What recovery found when this namespace was opened (persistent `Db` only).
    pub fn recovery(&self) -> Option<&RecoveryReport> {
        self.backing.recovery()
    }
}

/// `options` in an `Arc` shared with every namespace made lately with equal ones: a server's
/// namespaces made by `URL.SEEN` or `BF.ADD` all have the same options, and a copy each was
/// a tenth of a small namespace (docs/benchmarks.md, "Many namespaces in one server").
fn shared_options(options: NamespaceOptions) -> Arc<NamespaceOptions> {
    use std::sync::{Mutex, PoisonError};
    /// The last few distinct options seen, most recent first.
    static RECENT: Mutex<Vec<Arc<NamespaceOptions>>> = Mutex::new(Vec::new());
    const KEPT: usize = 8;
    let mut recent = RECENT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(at) = recent.iter().position(|o| **o == options) {
        let found = recent.remove(at);
        recent.insert(0, Arc::clone(&found));
        return found;
    }
    let made = Arc::new(options);
    recent.insert(0, Arc::clone(&made));
    recent.truncate(KEPT);
    made
}

/// A million small namespaces each hold one: 200 bytes, so that with the `Arc`'s counts and
/// glibc's 8-byte header it fills a 224-byte chunk exactly; 8 bytes more would take 240.
#[cfg(all(test, target_pointer_width = "64"))]
#[test]
fn a_namespace_fits_its_allocation_class() {
    assert!(size_of::<Namespace>() <= 200, "{} bytes", size_of::<Namespace>());
}
