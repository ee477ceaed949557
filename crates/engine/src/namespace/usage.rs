//! Running totals of what a `Db`'s namespaces hold (RAM, filter reservations, disk), kept up to
//! date as they change, so that a server's `--maxmemory` check, `INFO` and `/metrics` read them
//! in O(1) instead of measuring every namespace (and every leaf) per command.
//!
//! Each namespace measures itself ([`Namespace::sizes`]: one pass over its own nodes, no FPR
//! formula) and reports the difference from its last figure to the `Db`'s [`Ledger`]. It
//! measures again after a write only once its length has grown by a sixteenth, or by sixteen
//! times the nodes a measure visits (so measuring costs at most a sixteenth of a node per URL
//! recorded, even in a namespace reserved for billions with few URLs yet), after its first
//! record (which allocates a filter and buffers), or once a split began or ended (a split allocates the children and frees the frozen filter). Between
//! measures the totals lag by at most that growth: the check is Redis's kind of approximate,
//! never an O(namespaces) walk. A dropped namespace takes its figure out when it is dropped
//! from its `Db` (or, one that was never dropped, when the last reference to it goes).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::{Namespace, Set};

/// What every namespace of a `Db` holds together, from [`Db::usage`](crate::Db::usage).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// RAM held (as [`NamespaceStats::memory_bytes`](crate::NamespaceStats), summed).
    pub memory_bytes: u64,
    /// What each namespace holds or will hold once each of its leaves is used, whichever is
    /// more, summed: the reservations a new namespace is added to.
    pub committed_bytes: u64,
    /// Disk held (as [`NamespaceStats::disk_bytes`](crate::NamespaceStats), summed).
    pub disk_bytes: u64,
}

/// One namespace's measure: its [`Usage`] and what taking it cost (nodes visited).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Sizes {
    usage: Usage,
    nodes: u64,
}

/// A `Db`'s running totals.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    memory: AtomicU64,
    committed: AtomicU64,
    disk: AtomicU64,
}

impl Ledger {
    pub(crate) fn usage(&self) -> Usage {
        Usage {
            memory_bytes: self.memory.load(Ordering::Relaxed),
            committed_bytes: self.committed.load(Ordering::Relaxed),
            disk_bytes: self.disk.load(Ordering::Relaxed),
        }
    }

    /// Replaces `old` by `new` in the totals (added first, so a total never wraps below 0).
    fn replace(&self, old: Usage, new: Usage) {
        for (total, old, new) in [
            (&self.memory, old.memory_bytes, new.memory_bytes),
            (&self.committed, old.committed_bytes, new.committed_bytes),
            (&self.disk, old.disk_bytes, new.disk_bytes),
        ] {
            if new != old {
                total.fetch_add(new, Ordering::Relaxed);
                total.fetch_sub(old, Ordering::Relaxed);
            }
        }
    }
}

/// A namespace's part in its `Db`'s ledger: what it reported last, and when to measure again.
#[derive(Debug, Default)]
pub(super) struct Share {
    /// Set once the namespace is in a `Db` (a recrawl window's generations have none: their
    /// window reports them).
    ledger: OnceLock<Arc<Ledger>>,
    /// When to measure again.
    due: Due,
    /// The figure in the ledger; held while measuring (and while [`LEFT`] is set), so two
    /// measures never interleave.
    reported: Mutex<Usage>,
}

/// When a namespace measures itself again, in one word: the length at which it does (the low
/// [`LEN_BITS`] bits), [`LEFT`] once it was dropped from its `Db` (its figure left the totals,
/// and it reports nothing more); and the low 16 bits of the splits begun and ended at the last
/// measure (a change of exactly 2¹⁶ splits between two writes would go unseen until the length
/// is reached). A word each, or a flag for [`LEFT`], would cost 8 bytes more a namespace, and
/// with its name's hash ([`Namespace::name_hash`]) take it past an allocator's size class.
#[derive(Debug, Default)]
struct Due(AtomicU64);

const LEN_BITS: u32 = 48;

/// The length of a namespace dropped from its `Db`: one no namespace reaches (2⁴⁸ - 1), so
/// [`Namespace::account`] never measures it.
const LEFT: u64 = (1 << LEN_BITS) - 1;

impl Due {
    /// The length at which to measure again, and the split epoch's low bits at the last
    /// measure.
    fn get(&self) -> (u64, u16) {
        unpack(self.0.load(Ordering::Relaxed))
    }

    fn set(&self, len: u64, epoch: u64) {
        let word = len.min(LEFT - 1) | (u64::from(low_bits(epoch)) << LEN_BITS);
        self.0.store(word, Ordering::Relaxed);
    }

    fn is_left(&self) -> bool {
        self.get().0 == LEFT
    }

    /// Marks the namespace dropped; whether it was not already.
    fn leave(&self) -> bool {
        unpack(self.0.swap(LEFT, Ordering::Relaxed)).0 != LEFT
    }
}

fn unpack(word: u64) -> (u64, u16) {
    (word & LEFT, (word >> LEN_BITS) as u16)
}

/// The bits of a split epoch [`Due`] keeps.
fn low_bits(epoch: u64) -> u16 {
    epoch as u16
}

/// At least this many URLs between two measures.
const MIN_STEP: u64 = 64;

impl Namespace {
    /// Joins `ledger`'s totals (once: a namespace belongs to one `Db`).
    pub(crate) fn join_ledger(&self, ledger: &Arc<Ledger>) {
        if self.share.ledger.set(Arc::clone(ledger)).is_ok() {
            self.measure();
        }
    }

    /// After a write: measures again if the namespace grew enough, or split, since the last
    /// time (see the module docs). O(1) otherwise.
    pub(super) fn account(&self) {
        if self.share.ledger.get().is_none() {
            return;
        }
        let (due_len, due_epoch) = self.share.due.get();
        if self.recorded_len() >= due_len || low_bits(self.split_epoch()) != due_epoch {
            self.measure();
        }
    }

    /// Takes the namespace's figure out of its `Db`'s totals for good (it was dropped).
    pub(crate) fn leave_ledger(&self) {
        let Some(ledger) = self.share.ledger.get() else { return };
        let mut reported = self.share.reported.lock();
        if self.share.due.leave() {
            ledger.replace(*reported, Usage::default());
            *reported = Usage::default();
        }
    }

    /// Measures the namespace and reports the change to the ledger.
    pub(super) fn measure(&self) {
        let Some(ledger) = self.share.ledger.get() else { return };
        let mut reported = self.share.reported.lock();
        if self.share.due.is_left() {
            return;
        }
        let epoch = self.split_epoch();
        let len = self.recorded_len();
        let sizes = self.sizes();
        ledger.replace(*reported, sizes.usage);
        *reported = sizes.usage;
        // The first record allocates a leaf's filter and buffers: measured at once.
        let step = match len {
            0 => 1,
            _ => (len / 16).max(sizes.nodes.saturating_mul(16)).max(MIN_STEP),
        };
        self.share.due.set(len.saturating_add(step), epoch);
    }

    /// What this namespace holds, measured now (one pass over its own nodes); in a `Db`, its
    /// share of [`Db::usage`](crate::Db::usage) is brought up to date with it, so that what
    /// `MEMORY USAGE` answers is what `INFO`'s `used_memory` counts for it.
    pub fn memory_usage(&self) -> Usage {
        match self.share.ledger.get() {
            Some(_) => {
                self.measure();
                *self.share.reported.lock()
            }
            None => self.sizes().usage,
        }
    }

    /// What the set holds, without [`Namespace::len`]'s answers in flight (a lock each time):
    /// read after every write, so an atomic load for a tree or a counting set.
    pub(super) fn recorded_len(&self) -> u64 {
        match self.set() {
            Set::Tree { tree, .. } => tree.len(),
            Set::Counting(set) => set.len(),
            Set::Recrawl(gens) => gens.len(),
            // Grown meanwhile: the tree's.
            Set::Small(small) => small.len().unwrap_or_else(|| self.recorded_len()),
        }
    }

    /// Splits begun plus splits ended: changes whenever a split allocates or frees filters.
    fn split_epoch(&self) -> u64 {
        match self.set() {
            Set::Tree { tree, .. } => tree.split_epoch(),
            // A list that becomes a tree changes what `set` finds: the tree's epoch from then.
            Set::Counting(_) | Set::Recrawl(_) | Set::Small(_) => 0,
        }
    }

    /// RAM, reservation and disk of this namespace: [`Namespace::stats`]'s figures without its
    /// FPR formulas (a tree) or its scan of every counter (a counting set); a recrawl window
    /// takes its generations' stats.
    fn sizes(&self) -> Sizes {
        let mut sizes = match self.set() {
            Set::Small(small) if let Some(memory_bytes) = small.memory_bytes() => Sizes {
                usage: Usage { memory_bytes, committed_bytes: memory_bytes, disk_bytes: 0 },
                nodes: 1,
            },
            // Grown meanwhile: the tree's.
            Set::Small(_) => return self.sizes(),
            Set::Tree { tree, .. } => {
                // As `stats` counts it (the exact LRU is reported apart).
                let t = tree.sizes();
                Sizes {
                    usage: Usage {
                        memory_bytes: t.memory_bytes,
                        committed_bytes: t.memory_bytes.max(t.filter_reserved_bytes),
                        disk_bytes: t.disk_bytes,
                    },
                    nodes: t.nodes,
                }
            }
            Set::Counting(set) => {
                // Not its stats: they scan every counter.
                let (memory_bytes, filters) = set.memory_bytes();
                Sizes {
                    usage: Usage {
                        memory_bytes,
                        committed_bytes: memory_bytes.max(filters),
                        disk_bytes: 0,
                    },
                    nodes: 1,
                }
            }
            Set::Recrawl(_) => {
                let s = self.stats();
                return Sizes {
                    usage: Usage {
                        memory_bytes: s.memory_bytes,
                        committed_bytes: s.memory_bytes.max(s.filter_reserved_bytes),
                        disk_bytes: s.disk_bytes,
                    },
                    nodes: s.leaf_count as u64 + 1,
                };
            }
        };
        if let Some(urls) = &self.urls {
            let (memory, disk) = urls.sizes();
            sizes.usage.memory_bytes += memory;
            sizes.usage.committed_bytes += memory;
            sizes.usage.disk_bytes += disk;
        }
        if let Some(d) = self.backing.durable() {
            sizes.usage.disk_bytes +=
                d.log.stats().bytes + d.snapshot_bytes.load(Ordering::Acquire);
        }
        sizes
    }
}

impl Drop for Share {
    /// The namespace is gone: its figure leaves the totals.
    fn drop(&mut self) {
        if let Some(ledger) = self.ledger.get()
            && !self.due.is_left()
        {
            ledger.replace(*self.reported.get_mut(), Usage::default());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_keeps_a_length_and_an_epoch_in_one_word() {
        let due = Due::default();
        assert_eq!(due.get(), (0, 0));
        due.set(1_000_000, 0x1_0003);
        assert_eq!(due.get(), (1_000_000, 3), "the epoch's low 16 bits");
        // A length past what fits stays below LEFT: a live namespace is never taken for a
        // dropped one.
        due.set(u64::MAX, 7);
        assert_eq!(due.get(), (LEFT - 1, 7));
        assert!(!due.is_left());
        assert!(due.leave());
        assert!(due.is_left());
        assert!(!due.leave(), "dropped once");
    }
}
