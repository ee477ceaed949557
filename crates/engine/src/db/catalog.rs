//! The names of a `Db`'s namespaces, and which of them are loaded: a data directory's
//! namespaces are learnt from the names of their directories when it is opened, loaded on first
//! use, and unloaded (files closed) when loading one more would hold more descriptors than
//! [`DbOptions::max_open_files`](crate::DbOptions) allows (see docs/durability.md, "Many
//! namespaces").
//!
//! Which one goes is chosen by CLOCK (second chance), an approximation of least recently used
//! that costs O(1) per lookup and amortized O(1) per unload: every lookup sets the loaded
//! namespace's `referenced` bit; the hand sweeps the loaded ones, clearing set bits and
//! stopping at the first clear one that may go.
//!
//! A namespace that something still holds (a command, a connection's cache, a reply waiting to
//! be delivered) cannot be unloaded: two of it would write one log. Its files are closed
//! instead (it is *detached*: each later write opens them and closes them again), so it
//! holds no descriptor between writes, and its next lookup attaches it again.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use hashbrown::HashTable;

use crate::namespace::{Namespace, hash_name};

/// How the maps of names hash them: keyed with a random seed per process, as std's
/// `RandomState`, and several times faster than its SipHash on short names.
pub(super) type NameHash = foldhash::quality::RandomState;

/// What the hand does to a namespace (see [`Catalog::next_victim`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Evict {
    /// Unload it: nothing else holds it.
    Unload,
    /// Close its files between writes.
    Detach,
}

/// What [`Catalog::get`] found under a name.
pub(super) enum Found {
    Loaded(Arc<Namespace>),
    /// Stored in the data directory, not loaded.
    OnDisk,
    Absent,
}

/// A loaded namespace's entry: 16 bytes, found by the name its namespace holds (a table of a
/// million entries has 2²¹ of them, so each byte here is two a namespace).
#[derive(Debug)]
struct Loaded {
    ns: Arc<Namespace>,
    /// Its index in [`Catalog::ring`]; [`NO_SLOT`] for a namespace that is not persisted,
    /// which is never unloaded, so the hand has no need to pass it.
    slot: u32,
    /// [`REFERENCED`], set by every lookup and cleared by the passing hand, and below it the
    /// descriptors its files hold, counted in [`Catalog::files`] (0 while it is detached).
    state: AtomicU32,
}

impl Loaded {
    fn files(&self) -> u32 {
        self.state.load(Ordering::Relaxed) & !REFERENCED
    }

    /// Sets the descriptors its files hold (under the catalog's write lock: `&mut`).
    fn set_files(&mut self, files: u32) {
        let state = self.state.get_mut();
        *state = (*state & REFERENCED) | files.min(!REFERENCED);
    }
}

/// [`Loaded::state`]'s bit of a namespace looked up since the hand last passed it.
const REFERENCED: u32 = 1 << 31;

/// [`Loaded::slot`] of a namespace not in the ring.
const NO_SLOT: u32 = u32::MAX;

/// See the [module docs](self).
#[derive(Debug, Default)]
pub(super) struct Catalog {
    /// Found by the namespace's own name ([`Namespace::name`]), hashed by [`hash_name`]; grown
    /// by the hash each namespace keeps ([`Namespace::name_hash`]).
    loaded: HashTable<Loaded>,
    /// Names in the data directory that are not loaded (disjoint from `loaded`).
    on_disk: HashSet<String, NameHash>,
    /// The loaded names that can be unloaded (those in a data directory), in the order the
    /// hand visits them.
    ring: Vec<Arc<str>>,
    hand: usize,
    /// Descriptors held by the loaded namespaces' files.
    files: usize,
}

impl Catalog {
    fn find(&self, name: &str) -> Option<&Loaded> {
        self.loaded.find(hash_name(name), |l| l.ns.name() == name)
    }

    fn find_mut(&mut self, name: &str) -> Option<&mut Loaded> {
        self.loaded.find_mut(hash_name(name), |l| l.ns.name() == name)
    }

    pub(super) fn get(&self, name: &str) -> Found {
        if let Some(l) = self.find(name) {
            l.state.fetch_or(REFERENCED, Ordering::Relaxed);
            return Found::Loaded(Arc::clone(&l.ns));
        }
        match self.on_disk.contains(name) {
            true => Found::OnDisk,
            false => Found::Absent,
        }
    }

    pub(super) fn contains(&self, name: &str) -> bool {
        self.find(name).is_some() || self.on_disk.contains(name)
    }

    /// Every name, sorted.
    pub(super) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .loaded_names_where(|_| true)
            .into_iter()
            .chain(self.on_disk.iter().cloned())
            .collect();
        names.sort_unstable();
        names
    }

    pub(super) fn len(&self) -> usize {
        self.loaded.len() + self.on_disk.len()
    }

    /// The loaded namespaces (in no particular order).
    pub(super) fn loaded(&self) -> Vec<Arc<Namespace>> {
        self.loaded.iter().map(|l| Arc::clone(&l.ns)).collect()
    }

    /// The names of the loaded namespaces `keep` keeps.
    pub(super) fn loaded_names_where(&self, keep: impl Fn(&Namespace) -> bool) -> Vec<String> {
        self.loaded.iter().filter(|l| keep(&l.ns)).map(|l| l.ns.name().to_owned()).collect()
    }

    /// Loaded namespace `name`, without marking it used (a housekeeping pass).
    pub(super) fn peek(&self, name: &str) -> Option<Arc<Namespace>> {
        self.find(name).map(|l| Arc::clone(&l.ns))
    }

    pub(super) fn loaded_len(&self) -> usize {
        self.loaded.len()
    }

    /// Descriptors the loaded namespaces' files hold.
    pub(super) fn files(&self) -> usize {
        self.files
    }

    /// Notes `name` as stored and not loaded.
    pub(super) fn add_on_disk(&mut self, name: String) {
        self.on_disk.insert(name);
    }

    /// Adds (or moves from disk) `ns`, loaded, holding `files` descriptors.
    pub(super) fn add_loaded(&mut self, ns: Arc<Namespace>, files: usize) {
        self.remove(ns.name());
        // Files of its own (a recrawl window's are its generations'); not a namespace of the
        // journal, which has none until it moves (see `note_moved`).
        let slot = match ns.data_dir() {
            Some(_) => {
                self.ring.push(ns.shared_name());
                u32::try_from(self.ring.len() - 1).unwrap_or(NO_SLOT)
            }
            None => NO_SLOT,
        };
        // A namespace holds a few descriptors (see `Namespace::open_files`).
        let files = u32::try_from(files).unwrap_or(u32::MAX).min(!REFERENCED);
        self.files += files as usize;
        let state = AtomicU32::new(REFERENCED | files);
        let hash = ns.name_hash();
        self.loaded.insert_unique(hash, Loaded { ns, slot, state }, |l| l.ns.name_hash());
    }

    /// Makes room for `more` loaded namespaces at once (a journal's, read back at open).
    pub(super) fn reserve(&mut self, more: usize) {
        self.loaded.reserve(more, |l| l.ns.name_hash());
    }

    /// Loaded `name`, a namespace of the journal that moved to a directory of its own, joins
    /// the ring with the `files` it holds now (see [`crate::namespace::small_journal`]).
    pub(super) fn note_moved(&mut self, name: &str, files: usize) {
        let Some(l) = self.find(name) else { return };
        if l.slot != NO_SLOT || l.ns.data_dir().is_none() {
            return;
        }
        let ns = Arc::clone(&l.ns);
        self.add_loaded(ns, files);
    }

    /// The loaded namespaces with files of their own (those the hand may unload, and recrawl
    /// windows): what the housekeeping, `Db::sync` and `Db::checkpoint` sync and checkpoint.
    pub(super) fn persisted_names(&self) -> Vec<Arc<str>> {
        self.ring.clone()
    }

    /// How many [`Self::persisted_names`] there are.
    pub(super) fn persisted_len(&self) -> usize {
        self.ring.len()
    }

    /// Forgets `name`; returns its namespace if it was loaded.
    pub(super) fn remove(&mut self, name: &str) -> Option<Arc<Namespace>> {
        self.on_disk.remove(name);
        let hash = hash_name(name);
        let (l, _) = self.loaded.find_entry(hash, |l| l.ns.name() == name).ok()?.remove();
        self.files -= l.files() as usize;
        if l.slot != NO_SLOT {
            let slot = l.slot as usize;
            self.ring.swap_remove(slot);
            if let Some(moved) = self.ring.get(slot).cloned()
                && let Some(m) = self.find_mut(&moved)
            {
                m.slot = l.slot;
            }
        }
        Some(l.ns)
    }

    /// Notes that loaded `name`'s files are closed between writes (see the module docs).
    pub(super) fn detach(&mut self, name: &str) {
        if let Some(l) = self.find_mut(name) {
            let files = l.files();
            l.set_files(0);
            self.files -= files as usize;
        }
    }

    /// Notes that loaded `name`'s files stay open again, holding `files` descriptors.
    pub(super) fn attach(&mut self, name: &str, files: usize) {
        let files = u32::try_from(files).unwrap_or(u32::MAX).min(!REFERENCED);
        if let Some(l) = self.find_mut(name) {
            let held = l.files();
            l.set_files(held.max(files));
            self.files += (files - held.min(files)) as usize;
        }
    }

    /// Moves loaded `name` back to disk (the caller has written out and closes its files).
    pub(super) fn unload(&mut self, name: &str) -> Option<Arc<Namespace>> {
        let ns = self.remove(name)?;
        self.on_disk.insert(name.to_owned());
        Some(ns)
    }

    /// The next namespace the hand finds unreferenced and for which `choose` (given it and
    /// whether its files are counted open) says what to do, or `None` after two sweeps found
    /// none. Nothing is changed: the caller unloads it ([`Self::unload`]) or detaches it
    /// ([`Self::detach`]).
    pub(super) fn next_victim(
        &mut self,
        choose: impl Fn(&Arc<Namespace>, bool) -> Option<Evict>,
    ) -> Option<(String, Arc<Namespace>, Evict)> {
        let n = self.ring.len();
        for _ in 0..2 * n {
            self.hand = if self.hand >= n { 0 } else { self.hand };
            let name = &self.ring[self.hand];
            self.hand += 1;
            let Some(l) = self.find(name) else { continue };
            if l.state.fetch_and(!REFERENCED, Ordering::Relaxed) & REFERENCED != 0 {
                continue;
            }
            if let Some(evict) = choose(&l.ns, l.files() > 0) {
                return Some((name.to_string(), Arc::clone(&l.ns), evict));
            }
        }
        None
    }
}
