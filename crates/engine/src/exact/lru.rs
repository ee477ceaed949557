//! Seed 002's cache of recent fingerprints: crawlers re-see recent URLs far more often than old
//! ones, so a small LRU in front of the fingerprint store answers most Bloom positives without
//! a store read.
//!
//! # Why this and not the `lru` crate (or CLOCK)
//! - A true LRU, as the seed asks, in safe code: a hash map from fingerprint to a slot index,
//!   and an intrusive doubly linked list threaded through a `Vec` of slots by `u32` indices.
//!   Every operation is O(1).
//! - No allocation per operation once the cache is full: an eviction reuses the evicted slot, a
//!   removal puts its slot on a free list. (The `lru` crate also reuses nodes when full, but
//!   keeps a heap node per entry and a `Box`-based list in `unsafe` code, and hashes with
//!   SipHash-class hashers.) Keys here are already uniformly random fingerprints, so the map
//!   uses [`FpHasher`](super::FpHasher) (one `mix64`).
//! - 16 bytes a slot (fingerprint and two `u32` links) plus 13 a map bucket, with the map
//!   sized for twice the capacity once full (so evictions never make it grow): about 45 bytes
//!   an entry, so 100,000 recent URLs cost about 5 MB.
//! - CLOCK would make hits cheaper (set a bit instead of relinking), but callers hold a lock
//!   around each call anyway, and relinking two `u32`s under it costs nanoseconds.
//!
//! Not thread-safe: the caller holds a `Mutex` (see [`ExactIndex`](super::ExactIndex), which
//! shards it).

use std::collections::HashMap;

use super::store::FpBuildHasher;

const NIL: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Slot {
    fp: u64,
    prev: u32,
    next: u32,
}

/// A bounded least-recently-used set of fingerprints. See the [module docs](self).
///
/// # Examples
/// ```
/// use urlseen_engine::exact::FpLru;
/// let mut lru = FpLru::new(2);
/// lru.insert(1);
/// lru.insert(2);
/// assert!(lru.touch(1)); // 1 is now the most recent
/// assert_eq!(lru.insert(3), Some(2)); // evicts the least recent
/// assert!(lru.contains(1) && lru.contains(3) && !lru.contains(2));
/// ```
#[derive(Debug, Clone)]
pub struct FpLru {
    map: HashMap<u64, u32, FpBuildHasher>,
    slots: Vec<Slot>,
    /// Most recent.
    head: u32,
    /// Least recent.
    tail: u32,
    /// First free slot (slots freed by `remove`, chained through `next`).
    free: u32,
    capacity: u32,
}

impl FpLru {
    /// The largest capacity (slots are addressed by `u32`, one value reserved).
    pub const MAX_CAPACITY: usize = (u32::MAX - 1) as usize;

    /// An empty cache of at most `capacity` fingerprints (capped at [`Self::MAX_CAPACITY`]).
    /// Capacity 0 gives a cache that holds nothing. Memory grows with use up to the capacity,
    /// then stays put.
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.min(Self::MAX_CAPACITY) as u32;
        FpLru {
            map: HashMap::default(),
            slots: Vec::new(),
            head: NIL,
            tail: NIL,
            free: NIL,
            capacity,
        }
    }

    /// The number of fingerprints held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the cache holds nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The most fingerprints it holds.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity as usize
    }

    /// Whether `fp` is held, without making it more recent.
    #[must_use]
    pub fn contains(&self, fp: u64) -> bool {
        self.map.contains_key(&fp)
    }

    /// Whether `fp` is held; if so, it becomes the most recent.
    pub fn touch(&mut self, fp: u64) -> bool {
        let Some(&i) = self.map.get(&fp) else { return false };
        if self.head != i {
            self.unlink(i);
            self.push_front(i);
        }
        true
    }

    /// Makes `fp` the most recent, adding it if absent; returns the fingerprint evicted to make
    /// room, if any.
    pub fn insert(&mut self, fp: u64) -> Option<u64> {
        if self.capacity == 0 || self.touch(fp) {
            return None;
        }
        let (i, evicted) = if self.map.len() as u32 >= self.capacity {
            // Full: reuse the least recent slot.
            let i = self.tail;
            let old = self.slots[i as usize].fp;
            self.unlink(i);
            self.map.remove(&old);
            (i, Some(old))
        } else if self.free != NIL {
            let i = self.free;
            self.free = self.slots[i as usize].next;
            (i, None)
        } else {
            self.slots.push(Slot { fp, prev: NIL, next: NIL });
            if self.slots.len() == self.capacity as usize {
                // Warm-up ends: give the map room for twice the entries, so that the tombstones
                // of evictions are cleared by rehashing in place instead of by growing.
                self.map.reserve(2 * self.slots.len() - self.map.len());
            }
            ((self.slots.len() - 1) as u32, None)
        };
        self.slots[i as usize].fp = fp;
        self.push_front(i);
        self.map.insert(fp, i);
        evicted
    }

    /// Removes `fp`; returns whether it was held.
    pub fn remove(&mut self, fp: u64) -> bool {
        let Some(i) = self.map.remove(&fp) else { return false };
        self.unlink(i);
        self.slots[i as usize].next = self.free;
        self.free = i;
        true
    }

    /// Removes everything (keeps the memory).
    pub fn clear(&mut self) {
        self.map.clear();
        self.slots.clear();
        self.head = NIL;
        self.tail = NIL;
        self.free = NIL;
    }

    /// The fingerprints from most to least recent.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let mut i = self.head;
        std::iter::from_fn(move || {
            let slot = self.slots.get(i as usize)?;
            i = slot.next;
            Some(slot.fp)
        })
    }

    /// Heap memory in bytes (the map's buckets and the slots; an estimate, as the map's
    /// reported capacity dips while it holds tombstones).
    #[must_use]
    pub fn memory_bytes(&self) -> usize {
        self.map.capacity() * (1 + size_of::<(u64, u32)>())
            + self.slots.capacity() * size_of::<Slot>()
    }

    fn unlink(&mut self, i: u32) {
        let Slot { prev, next, .. } = self.slots[i as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.slots[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.slots[next as usize].prev = prev;
        }
    }

    fn push_front(&mut self, i: u32) {
        let old_head = self.head;
        {
            let slot = &mut self.slots[i as usize];
            slot.prev = NIL;
            slot.next = old_head;
        }
        if old_head == NIL {
            self.tail = i;
        } else {
            self.slots[old_head as usize].prev = i;
        }
        self.head = i;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    #[test]
    fn evicts_least_recent() {
        let mut lru = FpLru::new(3);
        for fp in 1..=3 {
            assert_eq!(lru.insert(fp), None);
        }
        assert!(lru.touch(1));
        assert_eq!(lru.insert(4), Some(2));
        assert_eq!(lru.iter().collect::<Vec<_>>(), [4, 1, 3]);
        assert!(lru.remove(1));
        assert!(!lru.remove(1));
        assert_eq!(lru.insert(5), None, "a removed slot makes room");
        assert_eq!(lru.iter().collect::<Vec<_>>(), [5, 4, 3]);
        assert_eq!(lru.len(), 3);
    }

    #[test]
    fn capacity_zero_holds_nothing() {
        let mut lru = FpLru::new(0);
        assert_eq!(lru.insert(1), None);
        assert!(!lru.contains(1));
        assert!(!lru.touch(1));
        assert!(lru.is_empty());
    }

    #[test]
    fn no_allocation_after_warm_up() {
        let mut lru = FpLru::new(1000);
        for fp in 0..1000 {
            lru.insert(fp);
        }
        // The map's reported capacity dips while evictions leave tombstones and comes back
        // when it rehashes in place; growing would double it.
        let memory = lru.memory_bytes();
        let slots = lru.slots.capacity();
        for fp in 1000..200_000u64 {
            lru.insert(fp);
            if fp % 3 == 0 {
                lru.remove(fp - 1);
            }
            lru.touch(fp - 500);
            assert!(lru.memory_bytes() <= memory, "grew at {fp}");
        }
        assert_eq!(lru.slots.capacity(), slots);
    }

    /// Against a naive model: a deque, most recent first.
    #[test]
    fn matches_a_model() {
        let mut lru = FpLru::new(8);
        let mut model: VecDeque<u64> = VecDeque::new();
        let mut x = 1u64;
        for _ in 0..20_000 {
            x = urlseen_filter::hash::mix64(x);
            let fp = x % 20;
            match (x >> 32) % 4 {
                0 | 1 => {
                    let evicted = lru.insert(fp);
                    let expected = if let Some(pos) = model.iter().position(|&f| f == fp) {
                        model.remove(pos);
                        None
                    } else if model.len() == 8 {
                        model.pop_back()
                    } else {
                        None
                    };
                    model.push_front(fp);
                    assert_eq!(evicted, expected);
                }
                2 => {
                    let hit = lru.touch(fp);
                    let pos = model.iter().position(|&f| f == fp);
                    assert_eq!(hit, pos.is_some());
                    if let Some(pos) = pos {
                        model.remove(pos);
                        model.push_front(fp);
                    }
                }
                _ => {
                    let pos = model.iter().position(|&f| f == fp);
                    assert_eq!(lru.remove(fp), pos.is_some());
                    if let Some(pos) = pos {
                        model.remove(pos);
                    }
                }
            }
            assert!(lru.iter().eq(model.iter().copied()));
        }
    }
}
