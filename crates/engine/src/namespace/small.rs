//! A namespace that holds few items: their fingerprints in one sorted list, as Redis keeps a
//! small set in a listpack, until it outgrows the list and becomes a tree.
//!
//! A crawl platform's server holds thousands to millions of namespaces, most of them a few
//! dozen URLs (docs/benchmarks.md, "Many namespaces in one server"). A tree costs a few
//! kilobytes before its first URL (its nodes, a leaf, its filter, its routing); the list costs
//! 12 bytes per item and nothing before. So a namespace made for a small capacity
//! ([`SMALL_CAPACITY`]) starts as a list; a batch that could take it past [`SMALL_MAX`] items
//! first replays it into a tree sized from its options, which splits as any tree does from
//! then on.
//!
//! The list answers exactly (a false positive is a 64-bit fingerprint collision), so no
//! promise of the tree is weakened while a namespace is small: a recorded item is found in
//! the list, then in the tree, which records every item of the list before it is used.
//!
//! Only a namespace that is not persisted ([`crate::Backing::Volatile`]) starts small; its
//! tree's leaves, when it has one, go where the `Db` keeps leaves (the heap, or files in its
//! spill directory, opened only then). A data directory's namespaces are loaded on first use
//! and cost a few hundred bytes unloaded (docs/durability.md, "Many namespaces").

use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::{Set, keeps_positives};
use crate::error::{Error, Result};
use crate::leaf_log::LeafStore;
use crate::options::{NamespaceOptions, SplitMode};
use crate::tree::{Dsbf, Mode, SplitWorkers, TreeParams};

/// Items a list holds before it becomes a tree: a 1.5 KiB list, about the fixed cost of a
/// small tree, and short enough that keeping it sorted (a move of at most that much per new
/// item) costs less than a tree's insert.
pub(crate) const SMALL_MAX: usize = 128;

/// Namespaces made for at most this many items start as a list (every namespace made
/// implicitly, by `URL.SEEN` or `BF.ADD`, is made for 100); one reserved for more is a tree
/// from the start, sized as it was asked.
pub(crate) const SMALL_CAPACITY: u64 = 1024;

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
}

impl LeafSource {
    pub(crate) fn new(
        workers: Arc<SplitWorkers>,
        open: impl Fn(&str) -> Result<LeafStore> + Send + Sync + 'static,
    ) -> Self {
        LeafSource(Arc::new(Source { open: Box::new(open), workers }))
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
pub(crate) enum Leaves {
    Store(LeafStore),
    Later(LeafSource),
}

impl Leaves {
    /// The store, made now.
    pub(crate) fn open(self, name: &str) -> Result<LeafStore> {
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
pub(crate) fn small_set(
    options: &NamespaceOptions,
    leaves: &Leaves,
    workers: &Arc<SplitWorkers>,
) -> Option<SmallSet> {
    if !starts_small(options) {
        return None;
    }
    let source = leaves.for_small(workers)?;
    Some(SmallSet { list: Mutex::new(Some(Vec::new())), grown: OnceLock::new(), source })
}

/// Whether a namespace made with `options` starts as a list (see [`small_set`]).
fn starts_small(options: &NamespaceOptions) -> bool {
    options.capacity <= SMALL_CAPACITY
        && !options.is_exact()
        && !options.counting
        && options.recrawl_after.is_none()
        && options.split.mode != SplitMode::Never
        && !options.keep_urls
}

/// One item: its fingerprint (two halves, so that the list packs 12 bytes an item) and the
/// hash of its URL's host (0 for none), which the tree's record keeps for a forget by host.
#[derive(Debug, Clone, Copy)]
struct Entry {
    fp: [u32; 2],
    host: u32,
}

impl Entry {
    fn new(fp: u64, host: u32) -> Self {
        Entry { fp: [(fp >> 32) as u32, fp as u32], host }
    }

    fn fp(&self) -> u64 {
        (u64::from(self.fp[0]) << 32) | u64::from(self.fp[1])
    }
}

/// A small namespace's set: the list while it lasts, then the tree it grew into.
#[derive(Debug)]
pub(crate) struct SmallSet {
    /// Sorted by fingerprint, without repeats; `None` once the tree took over (set first).
    list: Mutex<Option<Vec<Entry>>>,
    /// The tree, once the list outgrew [`SMALL_MAX`] or something only a tree does was asked
    /// (boxed: a small set is held inline in its namespace's [`Set`]).
    grown: OnceLock<Box<Set>>,
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
    pub(crate) fn grown(&self) -> Option<&Set> {
        self.grown.get().map(|set| &**set)
    }

    /// The tree, made now from the list if it is still one.
    ///
    /// # Errors
    /// The tree's, when the list's items cannot be recorded in it.
    pub(crate) fn grow(&self, name: &str, options: &NamespaceOptions) -> Result<&Set> {
        if let Some(set) = self.grown.get() {
            return Ok(set);
        }
        let mut list = self.list.lock();
        if let Some(entries) = list.as_ref() {
            let set = self.tree_of(entries, name, options)?;
            // Set before the list goes: whoever finds no list finds the tree.
            let _ = self.grown.set(Box::new(set));
            *list = None;
        }
        drop(list);
        Ok(self.grown().expect("the list gives way only to a tree set before"))
    }

    /// A tree holding `entries`, as namespace `name` made with `options` would have made it.
    fn tree_of(&self, entries: &[Entry], name: &str, options: &NamespaceOptions) -> Result<Set> {
        let leaves = self.source.open(name)?;
        let tree = Dsbf::new(TreeParams::from(options), Arc::clone(&self.source.0.workers), leaves);
        tree.set_keep_positives(keeps_positives(options));
        let fps: Vec<u64> = entries.iter().map(Entry::fp).collect();
        let hosts: Vec<u32> = entries.iter().map(|e| e.host).collect();
        let mut recorded = vec![false; fps.len()];
        // Distinct and new: recorded as they are (a false positive of the new filters among
        // them is recorded too, so no item of the list is lost).
        tree.insert_batch_with(&fps, &hosts, &mut recorded, Mode::Record, &mut |_| {
            Ok::<u64, Error>(0)
        })?;
        tree.check()?;
        Ok(Set::Tree { tree, exact: None })
    }

    /// Check-and-insert of `fps` with their `hosts` (empty for none) into the list: `out[i]`
    /// is whether `fps[i]` was there already (earlier in the batch included). `None` when the
    /// tree is to be asked instead: the list is a tree by now, or becomes one here because
    /// the batch could take it past [`SMALL_MAX`] (so a batch of any size costs a tree's
    /// inserts, never a list's moves).
    pub(crate) fn insert(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        name: &str,
        options: &NamespaceOptions,
    ) -> Option<Result<()>> {
        let mut list = self.list.lock();
        let entries = list.as_mut()?;
        if entries.len() + fps.len() > SMALL_MAX {
            return match self.tree_of(entries, name, options) {
                Ok(set) => {
                    // Set before the list goes: whoever finds no list finds the tree.
                    let _ = self.grown.set(Box::new(set));
                    *list = None;
                    None
                }
                Err(e) => Some(Err(e)),
            };
        }
        for (i, &fp) in fps.iter().enumerate() {
            match entries.binary_search_by_key(&fp, Entry::fp) {
                Ok(_) => out[i] = true,
                Err(at) => {
                    if entries.len() == entries.capacity() {
                        // Grown a quarter at a time: a list of few items wastes few bytes.
                        entries.reserve_exact((fps.len() - i).max(entries.len() / 4).max(1));
                    }
                    entries.insert(at, Entry::new(fp, hosts.get(i).copied().unwrap_or(0)));
                    out[i] = false;
                }
            }
        }
        Some(Ok(()))
    }

    /// Read-only lookup: `out[i]` is whether `fps[i]` is in the list. `None` if the list is
    /// a tree by now: ask the tree.
    pub(crate) fn contains(&self, fps: &[u64], out: &mut [bool]) -> Option<()> {
        let list = self.list.lock();
        let entries = list.as_ref()?;
        for (fp, hit) in fps.iter().zip(out.iter_mut()) {
            *hit = entries.binary_search_by_key(fp, Entry::fp).is_ok();
        }
        Some(())
    }

    /// Items in the list (`None` once it is a tree).
    pub(crate) fn len(&self) -> Option<u64> {
        self.list.lock().as_ref().map(|entries| entries.len() as u64)
    }

    /// Bytes of the heap the list takes: itself and its items (`None` once it is a tree).
    pub(crate) fn memory_bytes(&self) -> Option<u64> {
        let list = self.list.lock();
        let entries = list.as_ref()?;
        Some(
            (std::mem::size_of::<Self>() + entries.capacity() * std::mem::size_of::<Entry>())
                as u64,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        small.insert(&[fps[0], fps[0]], &[7, 7], &mut out, "t", &options).unwrap().unwrap();
        assert_eq!(out, [false, true]);
        for chunk in fps[1..SMALL_MAX].chunks(10) {
            let mut out = vec![true; chunk.len()];
            small.insert(chunk, &[], &mut out, "t", &options).unwrap().unwrap();
            assert!(out.iter().all(|&seen| !seen), "new items answered new");
        }
        assert_eq!(small.len(), Some(SMALL_MAX as u64));
        assert!(small.grown().is_none());
        // One past the list's room: a tree now, which holds every item, and is to be asked.
        assert!(
            small.insert(&fps[SMALL_MAX..=SMALL_MAX], &[], &mut [true], "t", &options).is_none()
        );
        let Some(Set::Tree { tree, .. }) = small.grown() else { panic!("not grown") };
        assert_eq!(small.len(), None);
        assert!(small.insert(&fps[..1], &[], &mut [false], "t", &options).is_none());
        assert_eq!(tree.len(), SMALL_MAX as u64);
        let mut seen = vec![false; SMALL_MAX];
        tree.contains_batch(&fps[..SMALL_MAX], &mut seen);
        assert!(seen.iter().all(|&s| s), "no item of the list is lost in the tree");
        assert_eq!(tree.count_records(&|r| r.host == 7).unwrap(), 1, "hosts kept");
    }

    #[test]
    fn grow_on_demand_keeps_the_items() {
        let options = options();
        let small = heap_set(&options);
        let mut out = [false; 3];
        small.insert(&[3, 1, 2], &[], &mut out, "t", &options).unwrap().unwrap();
        let mut hit = [false; 4];
        small.contains(&[1, 2, 3, 4], &mut hit).unwrap();
        assert_eq!(hit, [true, true, true, false]);
        let Set::Tree { tree, .. } = small.grow("t", &options).unwrap() else { panic!("no tree") };
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
