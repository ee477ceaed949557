//! A namespace that holds few items: their fingerprints in one sorted list, as Redis keeps a
//! small set in a listpack, until it outgrows the list and becomes a tree.
//!
//! A crawl platform's server holds thousands to millions of namespaces, most of them a few
//! dozen URLs (docs/benchmarks.md, "Many namespaces in one server"). A tree costs a few
//! kilobytes before its first URL (its nodes, a leaf, its filter, its routing); the list costs
//! 9 bytes per item in one block of the heap (and 4 per distinct host hash), and nothing
//! before. So a namespace made for a small capacity ([`SMALL_CAPACITY`]) starts as a list; a
//! batch that could take it past [`SMALL_MAX`] items first replays it into a tree sized from
//! its options, which splits as any tree does from then on.
//!
//! The list answers exactly (a false positive is a 64-bit fingerprint collision), so no
//! promise of the tree is weakened while a namespace is small: a recorded item is found in
//! the list, then in the tree, which records every item of the list before it is used.
//!
//! Its tree's leaves, when it has one, go where the `Db` keeps leaves (the heap, or files in its
//! spill directory, opened only then). In a data directory a small namespace lives in the
//! directory's journal (`crate::namespace::small_journal`): its creation, new hosts and new items
//! are journaled under the list's lock, and its tree moves to a directory of its own
//! ([`SmallSet::grow`]; docs/durability.md, "Small namespaces: one journal").

use std::path::PathBuf;
use std::sync::Arc;

use once_cell::race::OnceBox;
use parking_lot::Mutex;
use smallvec::SmallVec;

use super::backing::{Backing, InJournal};
use super::host_dict::{HostDict, Vouch};
use super::persist::{self, DbOptions};
use super::{Set, keeps_positives};
use crate::error::{Error, Result};
use crate::leaf_log::LeafStore;
use crate::options::{NamespaceOptions, SplitMode};
use crate::tree::{Dsbf, Mode, SplitWorkers, TreeParams};

/// Items a list holds before it becomes a tree: a 1.5 KiB list, about the fixed cost of a
/// small tree, and short enough that keeping it sorted (a move of at most that much per new
/// item) costs less than a tree's insert.
const SMALL_MAX: usize = 128;

/// Namespaces made for at most this many items start as a list (every namespace made
/// implicitly, by `URL.SEEN` or `BF.ADD`, is made for 100); one reserved for more is a tree
/// from the start, sized as it was asked.
const SMALL_CAPACITY: u64 = 1024;

/// What opens the leaf store of the namespace it is given the name of.
type OpenLeaves = dyn Fn(&str) -> Result<LeafStore> + Send + Sync;

/// What a small namespace needs to become a tree: the leaf store of the tree a namespace
/// named so grows into (the heap, or files in a spill directory, opened only then), and the
/// split workers. One per `Db`, shared by its small namespaces (one pointer each).
#[derive(Clone)]
pub(crate) struct LeafSource(Arc<Source>);

struct Source {
    open: Box<OpenLeaves>,
    workers: Arc<SplitWorkers>,
    /// A data directory's: where a namespace of its journal moves when it becomes a tree.
    home: Option<JournalHome>,
}

/// A data directory, where a small namespace of its journal (see `crate::namespace::small_journal`)
/// gets a directory of its own when it becomes a tree.
pub(crate) struct JournalHome {
    pub root: PathBuf,
    pub db: DbOptions,
    /// The names of the namespaces that moved, for their `Db` to count their files from then
    /// on (see `crate::db::catalog`).
    pub moved: Arc<Mutex<Vec<Arc<str>>>>,
}

impl LeafSource {
    pub(crate) fn new(
        workers: Arc<SplitWorkers>,
        open: impl Fn(&str) -> Result<LeafStore> + Send + Sync + 'static,
    ) -> Self {
        LeafSource(Arc::new(Source { open: Box::new(open), workers, home: None }))
    }

    /// What the small namespaces of data directory `home` grow into: a directory each.
    pub(crate) fn data_dir(workers: Arc<SplitWorkers>, home: JournalHome) -> Self {
        let open = |_: &str| -> Result<LeafStore> {
            Err(Error::InvalidOption {
                name: "storage",
                reason: "a namespace of a data directory grows into a directory".into(),
            })
        };
        LeafSource(Arc::new(Source { open: Box::new(open), workers, home: Some(home) }))
    }

    /// Leaves on the heap.
    pub(crate) fn memory(workers: Arc<SplitWorkers>) -> Self {
        Self::new(workers, |_| Ok(LeafStore::Memory))
    }

    fn open(&self, name: &str) -> Result<LeafStore> {
        (self.0.open)(name)
    }
}

/// Where a new namespace's leaves go: a store made already, or one made when a small
/// namespace becomes a tree.
pub(super) enum Leaves {
    Store(LeafStore),
    Later(LeafSource),
}

impl Leaves {
    /// The store, made now.
    pub(super) fn open(self, name: &str) -> Result<LeafStore> {
        match self {
            Leaves::Store(store) => Ok(store),
            Leaves::Later(source) => source.open(name),
        }
    }

    /// What a small namespace keeps to make its tree later (a source of its own for the
    /// heap, when the `Db` gave none); `None` (not small at all) for files made already.
    fn for_small(&self, workers: &Arc<SplitWorkers>) -> Option<LeafSource> {
        match self {
            Leaves::Store(LeafStore::Memory) => Some(LeafSource::memory(Arc::clone(workers))),
            Leaves::Store(LeafStore::Files(_)) => None,
            Leaves::Later(source) => Some(source.clone()),
        }
    }
}

impl From<LeafStore> for Leaves {
    fn from(store: LeafStore) -> Self {
        Leaves::Store(store)
    }
}

/// A small set for a namespace made with `options` whose leaves go to `leaves`, if it starts
/// as a list: exact, counting, recrawl and URL-keeping namespaces keep structures of their
/// own, and a non-scaling one counts its room in a tree's terms; they start as trees.
pub(super) fn small_set(
    options: &NamespaceOptions,
    leaves: &Leaves,
    workers: &Arc<SplitWorkers>,
) -> Option<SmallSet> {
    if !starts_small(options) {
        return None;
    }
    let source = leaves.for_small(workers)?;
    let list = List::default();
    Some(SmallSet { list: Mutex::new(Some(list)), grown: OnceBox::new(), source })
}

/// Whether a namespace made with `options` starts as a list (see [`small_set`]).
pub(super) fn starts_small(options: &NamespaceOptions) -> bool {
    options.capacity <= SMALL_CAPACITY
        && !options.is_exact()
        && !options.counting
        && options.recrawl_after.is_none()
        && options.split.mode != SplitMode::Never
        && !options.keep_urls
}

/// One item: its fingerprint and the hash of its URL's host (0 for none), which the tree's
/// record keeps for a forget by host.
#[derive(Debug, Clone, Copy)]
struct Entry {
    fp: u64,
    host: u32,
}

/// A list's entries while it is rebuilt, on the stack (a list holds at most [`SMALL_MAX`]):
/// a heap vector here was three mallocs a command, freed between the namespaces' own blocks.
type Entries = SmallVec<[Entry; SMALL_MAX]>;

/// A host the list's items came from: what the namespace's host dictionary lists once it is a tree
/// (see `crate::namespace::host_dict`), kept here until then (a dictionary costs 80 bytes more).
#[derive(Debug, Clone, Copy)]
struct Host<'a> {
    /// Its 64-bit hash, by which the list is sorted (as the dictionary, it takes two hosts
    /// with the same 64-bit hash for one).
    full: u64,
    /// Its 32-bit hash, the one records carry.
    hash: u32,
    name: &'a str,
}

/// What a small namespace holds while it is small, packed in one block of the heap exactly as
/// long as what it holds (a namespace of ten URLs from one host is one allocation, not one
/// for its items, one for its hosts and one per host name: about 100 bytes less each, counted
/// in the allocator's headers and size classes). A batch's new items or a new host make a new
/// block. Little-endian, no alignment:
///
/// ```text
/// items u16 | item hashes u16 | hosts u32
///   | items × (fp u64 | index u8 of its host hash), sorted by fp, without repeats
///   | item hashes × (host hash u32): the distinct hashes the items carry, in order of first use
///   | hosts × (full u64 | hash u32 | name length u32 | name), sorted by full
/// ```
/// An item's host hash is an index into the hashes its items carry (a crawl's namespace has
/// few hosts): ten URLs of one host take 94 bytes where a hash each took 120, which is a
/// block of the allocator's smaller class. Empty, it is no block at all.
#[derive(Debug, Default)]
struct List(Box<[u8]>);

const LIST_HEADER: usize = 8;
const ENTRY_BYTES: usize = 9;
const HASH_BYTES: usize = 4;
const HOST_FIXED: usize = 16;

// An item's hash index is a byte, and a list never holds more than SMALL_MAX items (nor so
// many distinct hashes).
const _: () = assert!(SMALL_MAX <= u8::MAX as usize + 1);

fn read_u16(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

fn read_u64(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

impl List {
    /// A list of `entries` (sorted, distinct) and the hosts encoded in `hosts` (`count` of
    /// them, sorted).
    fn pack(
        entries: impl ExactSizeIterator<Item = Entry> + Clone,
        count: usize,
        hosts: &[u8],
    ) -> Self {
        let len = entries.len();
        if len == 0 && count == 0 {
            return List::default();
        }
        // The hashes first, so that the block is made at its length (no reallocation). At most
        // SMALL_MAX, on the stack: this runs for each command on a small namespace.
        let mut hashes: SmallVec<[u32; SMALL_MAX]> = SmallVec::new();
        for e in entries.clone() {
            if !hashes.contains(&e.host) {
                hashes.push(e.host);
            }
        }
        let size = LIST_HEADER + len * ENTRY_BYTES + hashes.len() * HASH_BYTES + hosts.len();
        let mut bytes = Vec::with_capacity(size);
        bytes.extend_from_slice(&[0; LIST_HEADER]);
        for e in entries {
            // At most SMALL_MAX items (see `SmallSet::insert`), so at most as many hashes.
            let index = hashes.iter().position(|&h| h == e.host).unwrap_or_default();
            bytes.extend_from_slice(&e.fp.to_le_bytes());
            bytes.push(index as u8);
        }
        for hash in &hashes {
            bytes.extend_from_slice(&hash.to_le_bytes());
        }
        bytes.extend_from_slice(hosts);
        bytes[0..2].copy_from_slice(&(len as u16).to_le_bytes());
        bytes[2..4].copy_from_slice(&(hashes.len() as u16).to_le_bytes());
        bytes[4..8].copy_from_slice(&(count as u32).to_le_bytes());
        List(bytes.into_boxed_slice())
    }

    /// Items listed.
    fn len(&self) -> usize {
        if self.0.is_empty() { 0 } else { read_u16(&self.0, 0) as usize }
    }

    /// Where the distinct host hashes of the items begin.
    fn hashes_at(&self) -> usize {
        LIST_HEADER + self.len() * ENTRY_BYTES
    }

    /// Distinct host hashes the items carry.
    fn hash_count(&self) -> usize {
        if self.0.is_empty() { 0 } else { read_u16(&self.0, 2) as usize }
    }

    /// Hosts listed.
    fn host_count(&self) -> usize {
        if self.0.is_empty() { 0 } else { read_u32(&self.0, 4) as usize }
    }

    fn fp(&self, i: usize) -> u64 {
        read_u64(&self.0, LIST_HEADER + i * ENTRY_BYTES)
    }

    fn entry(&self, i: usize) -> Entry {
        let at = LIST_HEADER + i * ENTRY_BYTES;
        let index = usize::from(self.0[at + 8]);
        Entry { fp: self.fp(i), host: read_u32(&self.0, self.hashes_at() + index * HASH_BYTES) }
    }

    fn entries(&self) -> impl ExactSizeIterator<Item = Entry> + Clone + '_ {
        (0..self.len()).map(|i| self.entry(i))
    }

    /// Whether `fp` is listed (a binary search).
    fn holds(&self, fp: u64) -> bool {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.fp(mid).cmp(&fp) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return true,
            }
        }
        false
    }

    /// The encoded hosts.
    fn host_bytes(&self) -> &[u8] {
        self.0.get(self.hashes_at() + self.hash_count() * HASH_BYTES..).unwrap_or_default()
    }

    /// The hosts, each with the offset of its encoding in [`Self::host_bytes`].
    fn hosts(&self) -> impl Iterator<Item = (usize, Host<'_>)> + '_ {
        let bytes = self.host_bytes();
        let mut at = 0;
        std::iter::from_fn(move || {
            if at >= bytes.len() {
                return None;
            }
            let len = read_u32(bytes, at + 12) as usize;
            let name = &bytes[at + HOST_FIXED..at + HOST_FIXED + len];
            let host = Host {
                full: read_u64(bytes, at),
                hash: read_u32(bytes, at + 8),
                // Written from a `&str` by `note`.
                name: std::str::from_utf8(name).unwrap_or_default(),
            };
            let here = at;
            at += HOST_FIXED + len;
            Some((here, host))
        })
    }

    /// Whether the host whose 64-bit hash is `full` is listed.
    fn lists(&self, full: u64) -> bool {
        self.hosts().any(|(_, h)| h.full == full)
    }

    /// Lists `host` unless it is listed.
    fn note(&mut self, hash: u32, full: u64, host: &str) {
        let mut at = self.host_bytes().len();
        for (offset, h) in self.hosts() {
            if h.full == full {
                return;
            }
            if h.full > full {
                at = offset;
                break;
            }
        }
        let old = self.host_bytes();
        let mut hosts: SmallVec<[u8; 256]> =
            SmallVec::with_capacity(old.len() + HOST_FIXED + host.len());
        hosts.extend_from_slice(&old[..at]);
        hosts.extend_from_slice(&full.to_le_bytes());
        hosts.extend_from_slice(&hash.to_le_bytes());
        hosts.extend_from_slice(&(host.len() as u32).to_le_bytes());
        hosts.extend_from_slice(host.as_bytes());
        hosts.extend_from_slice(&old[at..]);
        *self = List::pack(self.entries(), self.host_count() + 1, &hosts);
    }

    /// Lists `added` (distinct, none listed yet) with the items.
    fn add(&mut self, mut added: Entries) {
        added.extend(self.entries());
        added.sort_unstable_by_key(|e| e.fp);
        *self = List::pack(added.iter().copied(), self.host_count(), self.host_bytes());
    }
}

/// Lists `host` in `list`, first in the journal when the namespace is in one (a host is
/// journaled before the items that carry its hash). A journal that refuses it (poisoned by a
/// failed write) leaves it unlisted, and [`SmallSet::insert`] refuses the items that carry it
/// (the whole command fails as a write, not each URL as a bad one).
fn note_in(list: &mut List, backing: &Backing, hash: u32, full: u64, host: &str) -> Result<()> {
    if list.lists(full) {
        return Ok(());
    }
    if let Some(j) = backing.journal()
        && j.journal.host(j.id, hash, host).is_err()
    {
        return Ok(());
    }
    list.note(hash, full, host);
    Ok(())
}

/// The tree a list grew into, and the host dictionary its hosts went to.
#[derive(Debug)]
struct Grown {
    set: Set,
    hosts: HostDict,
}

/// A small namespace's set: the list while it lasts, then the tree it grew into.
#[derive(Debug)]
pub(super) struct SmallSet {
    /// `None` once the tree took over (set first).
    list: Mutex<Option<List>>,
    /// The tree, once the list outgrew [`SMALL_MAX`] or something only a tree does was asked
    /// (boxed: a small set is held inline in its namespace's [`Set`]; a `OnceBox` is one
    /// pointer, where a `OnceLock` of a box is two words).
    grown: OnceBox<Grown>,
    /// Where the tree's leaves will go and its splits run.
    source: LeafSource,
}

impl std::fmt::Debug for LeafSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LeafSource")
    }
}

impl SmallSet {
    /// The tree, if the list became one.
    pub(super) fn grown(&self) -> Option<&Set> {
        self.grown.get().map(|g| &g.set)
    }

    /// The host dictionary, once the list became a tree.
    fn grown_hosts(&self) -> Option<&HostDict> {
        self.grown.get().map(|g| &g.hosts)
    }

    /// Lists `host` (hashes `hash` and `full`) as a dictionary's [`HostDict::note`] does: in
    /// the list while there is one and it has room, else in the tree's dictionary (the list
    /// becomes the tree of namespace `ns` made with `options` first).
    ///
    /// # Errors
    /// The dictionary's.
    pub(super) fn note_host(
        &self,
        hash: u32,
        full: u64,
        host: &str,
        ns: &str,
        options: &NamespaceOptions,
        backing: &Backing,
    ) -> Result<()> {
        let mut guard = self.list.lock();
        if let Some(list) = guard.as_mut()
            && (list.lists(full) || list.host_count() < SMALL_MAX)
        {
            return note_in(list, backing, hash, full, host);
        }
        drop(guard);
        if self.grow(ns, options, backing).is_err() {
            // The tree could not be made (its leaf files, say): listed here, which only costs
            // a move; the batch's insert meets the failure again and answers it.
            if let Some(list) = self.list.lock().as_mut() {
                return note_in(list, backing, hash, full, host);
            }
        }
        self.grown_hosts().expect("grown or listed").note(hash, full, host)
    }

    /// [`HostDict::note_batch`] over the list, or the tree's dictionary when the list is a
    /// tree or the batch could take it past [`SMALL_MAX`] hosts (then it becomes the tree of
    /// namespace `ns` made with `options` first, as a batch of as many items would): so the
    /// list's hosts stay few, and each costs one move at most.
    pub(super) fn note_hosts(
        &self,
        hosts: &[(u32, u64)],
        mut name: impl FnMut(usize) -> Result<String>,
        ns: &str,
        options: &NamespaceOptions,
        backing: &Backing,
    ) -> Vec<(usize, Error)> {
        let list_them = |list: &mut List, name: &mut dyn FnMut(usize) -> Result<String>| {
            let mut failed = Vec::new();
            for (k, &(hash, full)) in hosts.iter().enumerate() {
                if list.lists(full) {
                    continue;
                }
                if let Err(e) = name(k).and_then(|host| note_in(list, backing, hash, full, &host)) {
                    failed.push((k, e));
                }
            }
            failed
        };
        let mut guard = self.list.lock();
        let room = guard.as_ref().is_some_and(|l| l.host_count() + hosts.len() <= SMALL_MAX);
        if let (true, Some(list)) = (room, guard.as_mut()) {
            return list_them(list, &mut name);
        }
        drop(guard);
        if self.grow(ns, options, backing).is_err() {
            // The tree could not be made: listed here (see `note_host`).
            if let Some(list) = self.list.lock().as_mut() {
                return list_them(list, &mut name);
            }
        }
        self.grown_hosts().expect("grown or listed").note_batch(hosts, name)
    }

    /// What is listed under `hash`, for a forget of `host` (see [`HostDict::vouch`]).
    pub(super) fn vouch(&self, hash: u32, host: &str) -> Vouch {
        let list = self.list.lock();
        let Some(list) = list.as_ref() else {
            drop(list);
            return self
                .grown_hosts()
                .expect("the list gives way only to a tree")
                .vouch(hash, host);
        };
        let names: Vec<&str> =
            list.hosts().filter(|(_, h)| h.hash == hash).map(|(_, h)| h.name).collect();
        match names[..] {
            [] => Vouch::Absent,
            [only] if only == host => Vouch::Only,
            _ => Vouch::Shared(names.iter().map(|n| n.to_string()).collect()),
        }
    }

    /// The tree, made now from the list if it is still one.
    ///
    /// # Errors
    /// The tree's, when the list's items cannot be recorded in it.
    pub(super) fn grow(
        &self,
        name: &str,
        options: &NamespaceOptions,
        backing: &Backing,
    ) -> Result<&Set> {
        if let Some(set) = self.grown() {
            return Ok(set);
        }
        let mut list = self.list.lock();
        if let Some(small) = list.as_ref() {
            let grown = self.tree_of(small, name, options, backing)?;
            // Set before the list goes: whoever finds no list finds the tree.
            let _ = self.grown.set(Box::new(grown));
            *list = None;
        }
        drop(list);
        Ok(self.grown().expect("the list gives way only to a tree set before"))
    }

    /// A tree holding the list's entries, as namespace `name` made with `options` would have
    /// made it, and a dictionary listing its hosts.
    fn tree_of(
        &self,
        list: &List,
        name: &str,
        options: &NamespaceOptions,
        backing: &Backing,
    ) -> Result<Grown> {
        if let Some(j) = backing.journal() {
            return self.move_to_dir(list, name, options, j);
        }
        let dict = HostDict::in_memory();
        for (_, h) in list.hosts() {
            dict.note(h.hash, h.full, h.name)?;
        }
        let leaves = self.source.open(name)?;
        let tree = Dsbf::new(TreeParams::from(options), Arc::clone(&self.source.0.workers), leaves);
        tree.set_keep_positives(keeps_positives(options));
        let fps: Vec<u64> = list.entries().map(|e| e.fp).collect();
        let hosts: Vec<u32> = list.entries().map(|e| e.host).collect();
        let mut recorded = vec![false; fps.len()];
        // Distinct and new: recorded as they are (a false positive of the new filters among
        // them is recorded too, so no item of the list is lost).
        tree.insert_batch_with(&fps, &hosts, &mut recorded, Mode::Record, &mut |_| {
            Ok::<u64, Error>(0)
        })?;
        tree.check()?;
        Ok(Grown { set: Set::Tree { tree, exact: None }, hosts: dict })
    }

    /// The tree of a namespace of the journal `j`, in a directory of its own made now: the
    /// list's items in its log and leaves, its hosts in its host file, all of it synced before
    /// the journal is told the namespace is gone from it (a crash in between leaves both, and
    /// opening keeps the directory, see `crate::namespace::small_journal`). The backing is
    /// [`Backing::Durable`] in all but name from then on.
    fn move_to_dir(
        &self,
        list: &List,
        name: &str,
        options: &NamespaceOptions,
        j: &InJournal,
    ) -> Result<Grown> {
        let Some(home) = &self.source.0.home else {
            return Err(Error::InvalidOption {
                name: "storage",
                reason: "a namespace of a journal was made without its data directory".into(),
            });
        };
        let dir = persist::namespace_dir(&home.root, name);
        let workers = &self.source.0.workers;
        let (backing, set) = persist::create_at(dir, name, options, &home.db, workers)?;
        let (Backing::Durable(d), Set::Tree { tree, .. }) = (backing, &set) else {
            return Err(Error::InvalidOption {
                name: "storage",
                reason: "a small namespace's directory holds no tree".into(),
            });
        };
        tree.set_keep_positives(keeps_positives(options));
        let dict = HostDict::open(&d.storage, &d.dir, false, options.seed)?;
        if let Some(file) = dict.file() {
            d.log.precede_with(file);
        }
        for (_, h) in list.hosts() {
            dict.note(h.hash, h.full, h.name)?;
        }
        let fps: Vec<u64> = list.entries().map(|e| e.fp).collect();
        let hosts: Vec<u32> = list.entries().map(|e| e.host).collect();
        let mut recorded = vec![false; fps.len()];
        tree.insert_batch_with(&fps, &hosts, &mut recorded, Mode::Record, &mut |logged| {
            Ok::<u64, Error>(d.append(logged)?.0)
        })?;
        tree.check()?;
        // The log (its hosts file first), the meta, and their directory entries.
        d.log.sync_all()?;
        let storage = &d.storage;
        let meta = d.dir.join("meta");
        storage.sync_file(&meta).map_err(|e| Error::io("fsync", &meta, e))?;
        storage.sync_dir(&d.dir).map_err(|e| Error::io("fsync", &d.dir, e))?;
        if let Some(parent) = d.dir.parent() {
            storage.sync_dir(parent).map_err(|e| Error::io("fsync", parent, e))?;
        }
        // Appended, not committed: a commit here could wait for a writer that holds the
        // journal and waits for this list (see `Namespace::seen_fingerprints_inner`). Lost,
        // it is written at the next open, which finds the directory.
        j.journal.gone(j.id)?;
        let _ = j.moved.set(d);
        home.moved.lock().push(name.into());
        Ok(Grown { set, hosts: dict })
    }

    /// Check-and-insert of `fps` with their `hosts` (empty for none) into the list: `out[i]`
    /// is whether `fps[i]` was there already (earlier in the batch included). `None` when the
    /// tree is to be asked instead: the list is a tree by now, or becomes one here because
    /// the batch could take it past [`SMALL_MAX`] (so a batch of any size costs a tree's
    /// inserts, never a list's moves).
    pub(super) fn insert(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        name: &str,
        options: &NamespaceOptions,
        backing: &Backing,
    ) -> Option<Result<u64>> {
        let mut list = self.list.lock();
        let small = list.as_mut()?;
        if small.len() + fps.len() > SMALL_MAX {
            return match self.tree_of(small, name, options, backing) {
                Ok(grown) => {
                    // Set before the list goes: whoever finds no list finds the tree.
                    let _ = self.grown.set(Box::new(grown));
                    *list = None;
                    None
                }
                Err(e) => Some(Err(e)),
            };
        }
        let mut added = Entries::new();
        for (i, &fp) in fps.iter().enumerate() {
            // A repeat inside the batch is seen by its second copy (at most SMALL_MAX new).
            out[i] = small.holds(fp) || added.iter().any(|e| e.fp == fp);
            if !out[i] {
                added.push(Entry { fp, host: hosts.get(i).copied().unwrap_or(0) });
            }
        }
        let mut lsn = 0;
        if !added.is_empty() {
            if let Some(j) = backing.journal() {
                let hosts_listed =
                    |e: &Entry| e.host == 0 || small.hosts().any(|(_, h)| h.hash == e.host);
                if !added.iter().all(hosts_listed) {
                    // A host the journal refused (see `note_in`).
                    let refused =
                        j.journal.log().check().err().unwrap_or_else(|| Error::Poisoned {
                            reason: "a host of this batch could not be journaled; retry".into(),
                        });
                    return Some(Err(refused));
                }
                // Appended under the list's lock, before another writer can find them listed
                // and answer "seen" on them (it then commits the journal's end, this included).
                let fps: SmallVec<[u64; SMALL_MAX]> = added.iter().map(|e| e.fp).collect();
                let hosts: SmallVec<[u32; SMALL_MAX]> = added.iter().map(|e| e.host).collect();
                lsn = match j.journal.items(j.id, &fps, &hosts) {
                    Ok(lsn) => lsn,
                    Err(e) => return Some(Err(e)),
                };
            }
            small.add(added);
        }
        Some(Ok(lsn))
    }

    /// Read-only lookup: `out[i]` is whether `fps[i]` is in the list. `None` if the list is
    /// a tree by now: ask the tree.
    pub(super) fn contains(&self, fps: &[u64], out: &mut [bool]) -> Option<()> {
        let list = self.list.lock();
        let list = list.as_ref()?;
        for (fp, hit) in fps.iter().zip(out.iter_mut()) {
            *hit = list.holds(*fp);
        }
        Some(())
    }

    /// Items in the list (`None` once it is a tree).
    pub(super) fn len(&self) -> Option<u64> {
        self.list.lock().as_ref().map(|list| list.len() as u64)
    }

    /// Bytes of the heap the list takes: itself and its items (`None` once it is a tree).
    pub(super) fn memory_bytes(&self) -> Option<u64> {
        let list = self.list.lock();
        let list = list.as_ref()?;
        Some((std::mem::size_of::<Self>() + list.0.len()) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: Backing = Backing::Volatile;

    fn options() -> NamespaceOptions {
        NamespaceOptions { capacity: 100, ..NamespaceOptions::default() }
    }

    fn heap_set(options: &NamespaceOptions) -> SmallSet {
        small_set(options, &Leaves::Store(LeafStore::Memory), &SplitWorkers::new(1)).unwrap()
    }

    #[test]
    fn a_list_answers_as_a_set_and_grows_into_a_tree_that_holds_every_item() {
        let options = options();
        let small = heap_set(&options);
        let fps: Vec<u64> =
            (0..SMALL_MAX as u64 * 3).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
        // A repeat inside a batch is seen by its second copy.
        let mut out = [false; 2];
        small.insert(&[fps[0], fps[0]], &[7, 7], &mut out, "t", &options, &V).unwrap().unwrap();
        assert_eq!(out, [false, true]);
        for chunk in fps[1..SMALL_MAX].chunks(10) {
            let mut out = vec![true; chunk.len()];
            small.insert(chunk, &[], &mut out, "t", &options, &V).unwrap().unwrap();
            assert!(out.iter().all(|&seen| !seen), "new items answered new");
        }
        assert_eq!(small.len(), Some(SMALL_MAX as u64));
        assert!(small.grown().is_none());
        // One past the list's room: a tree now, which holds every item, and is to be asked.
        assert!(
            small
                .insert(&fps[SMALL_MAX..=SMALL_MAX], &[], &mut [true], "t", &options, &V)
                .is_none()
        );
        let Some(Set::Tree { tree, .. }) = small.grown() else { panic!("not grown") };
        assert_eq!(small.len(), None);
        assert!(small.insert(&fps[..1], &[], &mut [false], "t", &options, &V).is_none());
        assert_eq!(tree.len(), SMALL_MAX as u64);
        let mut seen = vec![false; SMALL_MAX];
        tree.contains_batch(&fps[..SMALL_MAX], &mut seen);
        assert!(seen.iter().all(|&s| s), "no item of the list is lost in the tree");
        assert_eq!(tree.count_records(&|r| r.host == 7).unwrap(), 1, "hosts kept");
    }

    #[test]
    fn a_list_gives_back_each_items_host_hash_and_its_hosts() {
        let mut list = List::default();
        list.note(7, 70, "a.example");
        let hosts = [7, 0, 9, 7, 0, u32::MAX, 9, 7];
        let added: Vec<Entry> =
            hosts.iter().enumerate().map(|(i, &host)| Entry { fp: 100 - i as u64, host }).collect();
        list.add(Entries::from_slice(&added[..3]));
        list.note(9, 90, "b.example");
        list.add(Entries::from_slice(&added[3..]));
        let mut expected = added.clone();
        expected.sort_unstable_by_key(|e| e.fp);
        let got: Vec<(u64, u32)> = list.entries().map(|e| (e.fp, e.host)).collect();
        let want: Vec<(u64, u32)> = expected.iter().map(|e| (e.fp, e.host)).collect();
        assert_eq!(got, want);
        assert_eq!(list.hash_count(), 4, "one per distinct hash");
        assert!(expected.iter().all(|e| list.holds(e.fp)) && !list.holds(1));
        let names: Vec<&str> = list.hosts().map(|(_, h)| h.name).collect();
        assert_eq!(names, ["a.example", "b.example"]);
        assert_eq!(list.0.len(), 8 + 8 * 9 + 4 * 4 + 2 * (16 + 9));
    }

    #[test]
    fn the_list_vouches_for_hosts_as_a_dictionary_and_hands_them_to_the_tree() {
        let options = options();
        let small = heap_set(&options);
        let both = Vouch::Shared(vec!["a.example".into(), "b.example".into()]);
        let check = |small: &SmallSet| {
            assert_eq!(small.vouch(7, "a.example"), both);
            assert_eq!(small.vouch(7, "b.example"), both);
            assert_eq!(small.vouch(8, "c.example"), Vouch::Only);
            assert_eq!(small.vouch(8, "d.example"), Vouch::Shared(vec!["c.example".into()]));
            assert_eq!(small.vouch(9, "c.example"), Vouch::Absent);
        };
        small.note_host(7, 70, "a.example", "t", &options, &V).unwrap();
        small.note_host(7, 70, "a.example", "t", &options, &V).unwrap();
        assert_eq!(small.vouch(7, "a.example"), Vouch::Only);
        small.note_host(7, 71, "b.example", "t", &options, &V).unwrap();
        // A batch names only the hosts not listed yet.
        let mut named = Vec::new();
        let failed = small.note_hosts(
            &[(7, 70), (8, 80), (7, 71)],
            |k| {
                named.push(k);
                Ok("c.example".into())
            },
            "t",
            &options,
            &V,
        );
        assert!(failed.is_empty());
        assert_eq!(named, [1]);
        check(&small);
        small.grow("t", &options, &V).unwrap();
        assert!(small.grown_hosts().is_some());
        check(&small);
        // Noted after the growth: in the tree's dictionary.
        small.note_host(9, 90, "e.example", "t", &options, &V).unwrap();
        assert_eq!(small.vouch(9, "e.example"), Vouch::Only);
    }

    #[test]
    fn hosts_past_the_lists_room_make_it_a_tree_first_and_stay_listed() {
        let options = options();
        let host = |i: u32| format!("h{i}.example");
        // One at a time: the list takes SMALL_MAX hosts, the next makes it a tree.
        let small = heap_set(&options);
        for i in 0..1_000u32 {
            small.note_host(i, u64::from(i) + 1, &host(i), "t", &options, &V).unwrap();
            assert_eq!(small.grown().is_some(), i as usize >= SMALL_MAX, "after {i}");
        }
        assert!((0..1_000u32).all(|i| small.vouch(i, &host(i)) == Vouch::Only));
        // A batch of more hosts than the list has room for: a tree first, every host named.
        let small = heap_set(&options);
        small.note_host(5, 6, &host(5), "t", &options, &V).unwrap();
        let hosts: Vec<(u32, u64)> = (0..10_000u32).map(|i| (i, u64::from(i) + 1)).collect();
        let failed = small.note_hosts(&hosts, |k| Ok(host(k as u32)), "t", &options, &V);
        assert!(failed.is_empty());
        assert!(small.grown().is_some());
        assert!((0..10_000u32).all(|i| small.vouch(i, &host(i)) == Vouch::Only));
    }

    #[test]
    fn grow_on_demand_keeps_the_items() {
        let options = options();
        let small = heap_set(&options);
        let mut out = [false; 3];
        small.insert(&[3, 1, 2], &[], &mut out, "t", &options, &V).unwrap().unwrap();
        let mut hit = [false; 4];
        small.contains(&[1, 2, 3, 4], &mut hit).unwrap();
        assert_eq!(hit, [true, true, true, false]);
        let Set::Tree { tree, .. } = small.grow("t", &options, &V).unwrap() else {
            panic!("no tree")
        };
        tree.contains_batch(&[1, 2, 3], &mut hit[..3]);
        assert_eq!(hit[..3], [true, true, true]);
        assert!(small.contains(&[1], &mut [false]).is_none());
    }

    #[test]
    fn only_namespaces_for_few_items_start_small() {
        let o = options();
        assert!(starts_small(&o));
        let big = NamespaceOptions { capacity: SMALL_CAPACITY + 1, ..o.clone() };
        assert!(!starts_small(&big));
        let counting = NamespaceOptions { counting: true, ..o.clone() };
        assert!(!starts_small(&counting));
        let exact = NamespaceOptions { exact: true, ..o.clone() };
        assert!(!starts_small(&exact));
        let urls = NamespaceOptions { keep_urls: true, ..o };
        assert!(!starts_small(&urls));
    }
}
