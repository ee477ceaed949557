//! Where the bit arrays of mid-sized filters live: slots carved from large regions backed by
//! 2 MiB transparent huge pages (Linux only).
//!
//! A tree of filters (the engine's leaves, 1 MiB each by default) probes a random cache line of
//! a random filter per item. Each filter allocated on its own gets 4 KiB pages (a huge page needs
//! a 2 MiB-aligned range, and [`crate::prefetch::advise_huge_pages`] only asks for filters of
//! 8 MiB and more), so nearly every probe of a tree larger than the TLB's reach (about 6 MiB of
//! 4 KiB pages) also misses the TLB and walks the page tables. One filter of the tree's whole
//! size does not: measured in `bench/examples/tree_ceiling.rs`, 72 routed filters of 1 MiB ran
//! at 0.58–0.69× one filter of 72 MiB, and at 0.82–0.89× with their bit arrays here
//! (docs/benchmarks.md, "Leaf filters in huge pages").
//!
//! So filters of [`MIN_BYTES`] up to [`MAX_BYTES`] take their bit array from here: regions of
//! [`REGION_BYTES`] (address space reserved with `MAP_NORESERVE`, backed only where touched),
//! 2 MiB-aligned and advised `MADV_HUGEPAGE`, cut into slots of whole 4 KiB pages by a bump
//! pointer. A freed slot goes on a free list of its size: the engine frees a leaf's filter when
//! the leaf's split ends, and the next split's children, at the leaves' maximum size, take it
//! again (zeroed first, and still in huge pages). So that free slots never hold much memory
//! that nothing uses, at most [`IDLE_MIN_BYTES`] (4 MiB) or a 256th of the slots in use,
//! whichever is more, stay resident; past that free slots are given back to the kernel
//! (`MADV_DONTNEED`, after which they read as zeros), those of other sizes than the one just
//! freed first, and kept on a second list for reuse. A slot given back that shared a huge page
//! with a live one splits that page into 4 KiB pages (until the kernel's `khugepaged` collapses
//! it again): the price of the bound, paid mostly once per size a grown tree leaves behind.
//!
//! Not counted anywhere: a huge page is made resident whole by its first touch, so the last
//! slot cut from a region can hold up to 2 MiB more than its size resident.
//!
//! Everything here is a place to put zeroed words: a slot holds exactly what a zeroed heap
//! allocation would. When the arena cannot help (another OS, a size outside its range, a failed
//! `mmap`), the caller falls back to the heap.

/// Whether this build has the arena (Linux); elsewhere every bit array is on the heap.
pub(crate) const ENABLED: bool = cfg!(target_os = "linux");

/// Smallest bit array taken from the arena: below this a filter spans few enough pages that
/// its own allocation is as good.
pub(crate) const MIN_BYTES: usize = 256 << 10;

/// Largest bit array taken from the arena: from 8 MiB a filter's own allocation gets huge pages
/// (see [`crate::prefetch::advise_huge_pages`]).
pub(crate) const MAX_BYTES: usize = 8 << 20;

/// Address space reserved per region (only touched slots take memory).
#[cfg(target_os = "linux")]
const REGION_BYTES: usize = 64 << 20;

/// The least memory free slots may keep resident (see the module docs).
#[cfg(target_os = "linux")]
const IDLE_MIN_BYTES: usize = 4 << 20;

/// Free slots may keep resident at most this share of the slots in use (or
/// [`IDLE_MIN_BYTES`]).
#[cfg(target_os = "linux")]
const IDLE_SHARE: usize = 256;

#[cfg(target_os = "linux")]
mod imp {
    use std::collections::BTreeMap;
    use std::ptr::NonNull;
    use std::sync::Mutex;

    use super::{IDLE_MIN_BYTES, IDLE_SHARE, REGION_BYTES};

    const PAGE: usize = 4 << 10;
    const HUGE: usize = 2 << 20;

    /// The process's arena: the current region's unused part, and the free slots by size.
    struct Arena {
        /// Next free byte of the current region, and its end (0, 0 before the first region).
        bump: usize,
        end: usize,
        /// Free slots still resident (zeroed when taken again), by size in bytes.
        warm: BTreeMap<usize, Vec<usize>>,
        /// Free slots given back to the kernel (they read as zeros), by size in bytes.
        cold: BTreeMap<usize, Vec<usize>>,
        /// Bytes of the slots on `warm`.
        warm_bytes: usize,
        /// Bytes of the slots handed out and not freed.
        live_bytes: usize,
    }

    static ARENA: Mutex<Arena> = Mutex::new(Arena {
        bump: 0,
        end: 0,
        warm: BTreeMap::new(),
        cold: BTreeMap::new(),
        warm_bytes: 0,
        live_bytes: 0,
    });

    /// The slot size of a request: whole 4 KiB pages.
    pub(crate) fn slot_bytes(bytes: usize) -> usize {
        bytes.next_multiple_of(PAGE)
    }

    /// A zeroed slot of at least `bytes` bytes, 4 KiB-aligned; `None` if no region can be
    /// mapped.
    pub(crate) fn alloc(bytes: usize) -> Option<NonNull<u64>> {
        let size = slot_bytes(bytes);
        let mut arena = ARENA.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(at) = arena.warm.get_mut(&size).and_then(Vec::pop) {
            arena.warm_bytes -= size;
            arena.live_bytes += size;
            drop(arena);
            #[expect(unsafe_code, reason = "zeroes a slot through a raw pointer")]
            // SAFETY: `at..at + size` is a slot of a live region (regions are never unmapped)
            // that was freed and that nothing else references: it came off the free list under
            // the lock, and is handed to one owner only.
            unsafe {
                std::ptr::write_bytes(at as *mut u8, 0, size);
            }
            return NonNull::new(at as *mut u64);
        }
        if let Some(at) = arena.cold.get_mut(&size).and_then(Vec::pop) {
            // Given back with MADV_DONTNEED: its pages read as zeros.
            arena.live_bytes += size;
            return NonNull::new(at as *mut u64);
        }
        if arena.end - arena.bump < size {
            // The rest of the current region stays unused: never touched, it holds no memory.
            let (start, end) = map_region(size.max(REGION_BYTES))?;
            (arena.bump, arena.end) = (start, end);
        }
        let at = arena.bump;
        arena.bump += size;
        arena.live_bytes += size;
        NonNull::new(at as *mut u64)
    }

    /// Returns the slot at `ptr` of the request size `bytes` (as given to [`alloc`]).
    pub(crate) fn free(ptr: NonNull<u64>, bytes: usize) {
        let size = slot_bytes(bytes);
        let mut arena = ARENA.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        arena.live_bytes -= size;
        arena.warm_bytes += size;
        arena.warm.entry(size).or_default().push(ptr.as_ptr() as usize);
        // Past the bound, the slots least likely to be asked for again go back to the kernel:
        // those of other sizes first (a tree grown by splits leaves its earlier, smaller leaf
        // sizes behind for good), then this size's.
        let bound = IDLE_MIN_BYTES.max(arena.live_bytes / IDLE_SHARE);
        while arena.warm_bytes > bound {
            let victim = arena
                .warm
                .iter()
                .filter(|(_, slots)| !slots.is_empty())
                .map(|(&s, _)| s)
                .find(|&s| s != size)
                .unwrap_or(size);
            let Some(at) = arena.warm.get_mut(&victim).and_then(Vec::pop) else { break };
            #[expect(unsafe_code, reason = "madvise is a foreign function")]
            // SAFETY: `at..at + victim` is a page-aligned free slot of a live private anonymous
            // mapping, owned by no one (it was just taken off the free list under the lock);
            // MADV_DONTNEED drops its pages, which then read as zeros, and touches nothing
            // outside the range.
            let dropped =
                unsafe { libc::madvise(at as *mut libc::c_void, victim, libc::MADV_DONTNEED) };
            if dropped != 0 {
                // Still holding its old contents: back on the warm list, which zeroes it when
                // it is taken; the bound is a target, not worth a loop over failures.
                arena.warm.entry(victim).or_default().push(at);
                break;
            }
            arena.warm_bytes -= victim;
            arena.cold.entry(victim).or_default().push(at);
        }
    }

    /// Bytes that free slots keep resident.
    pub(crate) fn idle_bytes() -> usize {
        ARENA.lock().unwrap_or_else(std::sync::PoisonError::into_inner).warm_bytes
    }

    /// Maps a region of at least `bytes`, 2 MiB-aligned and advised to use huge pages: its start
    /// and end.
    fn map_region(bytes: usize) -> Option<(usize, usize)> {
        let len = bytes.next_multiple_of(HUGE) + HUGE;
        #[expect(unsafe_code, reason = "mmap and madvise are foreign functions")]
        // SAFETY: a fresh private anonymous mapping chosen by the kernel (no address given), so
        // it overlaps nothing; MADV_HUGEPAGE is a hint on a range inside it. The mapping is
        // never unmapped: slots of it are handed out and taken back for the process's life.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                return None;
            }
            let start = (p as usize).next_multiple_of(HUGE);
            let end = start + bytes.next_multiple_of(HUGE);
            // A hint: where it fails (THP off), the slots are ordinary pages.
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            Some((start, end))
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::ptr::NonNull;

    pub(crate) fn slot_bytes(bytes: usize) -> usize {
        bytes
    }

    pub(crate) fn alloc(_bytes: usize) -> Option<NonNull<u64>> {
        None
    }

    pub(crate) fn free(_ptr: NonNull<u64>, _bytes: usize) {
        unreachable!("no slot is handed out off Linux")
    }

    pub(crate) fn idle_bytes() -> usize {
        0
    }
}

pub(crate) use imp::{alloc, free, slot_bytes};

/// Memory that free slots of the filter arena keep resident, in bytes: counted by no filter's
/// [`memory_bytes`](crate::BlockedBloom::memory_bytes), at most 4 MiB or a 256th of what the
/// arena's filters hold, whichever is more. Filters from 256 KiB to 8 MiB keep their bits in
/// this arena, in 2 MiB huge pages where the kernel grants them (Linux): a tree of such
/// filters then probes them with few TLB misses.
#[must_use]
pub fn arena_idle_bytes() -> usize {
    imp::idle_bytes()
}
