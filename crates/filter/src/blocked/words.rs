//! A blocked filter's word array: a zeroed allocation from the [filter arena](crate::arena)
//! for mid-sized filters (huge pages), from the heap otherwise.

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use super::WORDS;
use crate::arena;
use crate::prefetch::advise_huge_pages;

/// Zeroed `u64` words owned like a `Box<[u64]>`.
pub(super) enum Words {
    Heap(Vec<u64>),
    /// `len` words at `ptr`, a slot of the arena this value owns alone.
    Arena {
        ptr: NonNull<u64>,
        len: usize,
    },
}

#[expect(unsafe_code, reason = "a raw pointer to memory owned like a Box")]
// SAFETY: an `Arena` value owns its slot exclusively (nothing else points into it), as a
// `Vec<u64>` owns its buffer; `u64` is Send and Sync.
unsafe impl Send for Words {}
#[expect(unsafe_code, reason = "a raw pointer to memory owned like a Box")]
// SAFETY: as for `Send`; shared access goes through `&self`, mutation through `&mut self`.
unsafe impl Sync for Words {}

impl Words {
    /// No words (nothing allocated).
    pub(super) const fn empty() -> Self {
        Words::Heap(Vec::new())
    }

    /// At least `len` zeroed words, of which `len` from a 64-byte boundary: from the arena
    /// when their size is in its range (exactly `len`, page-aligned), else the heap (with
    /// `WORDS - 1` more words to find the boundary in, and huge pages asked for when large).
    pub(super) fn zeroed(len: usize) -> Self {
        let bytes = len.saturating_mul(8);
        if in_arena(bytes)
            && let Some(ptr) = arena::alloc(bytes)
        {
            return Words::Arena { ptr, len };
        }
        // `vec![0u64; n]` is a zeroed allocation (calloc / fresh pages): no per-word loop.
        let words = vec![0u64; len.saturating_add(WORDS - 1)];
        advise_huge_pages(&words);
        Words::Heap(words)
    }

    /// The words of a decoded filter, laid out from a 64-byte boundary: copied into an arena
    /// slot when their size is in its range, else moved within `words` itself (made with room
    /// for `WORDS - 1` more, so that a heap-sized filter is never held twice, where a 1 GiB
    /// filter would otherwise peak at 2 GiB while it loads). Returns the words and the offset of
    /// the first block.
    pub(super) fn from_decoded(mut words: Vec<u64>) -> (Self, usize) {
        let count = words.len();
        if in_arena(count.saturating_mul(8)) {
            let mut slot = Words::zeroed(count);
            let offset = super::aligned_offset(&slot);
            slot[offset..offset + count].copy_from_slice(&words);
            return (slot, offset);
        }
        // No reallocation: the vector was made with room for the slack.
        words.resize(count + WORDS - 1, 0);
        let offset = super::aligned_offset(&words);
        words.copy_within(0..count, offset);
        words[..offset].fill(0);
        words[offset + count..].fill(0);
        (Words::Heap(words), offset)
    }

    /// The bytes [`Self::zeroed`]`(len)` takes (unless the arena cannot map a region).
    pub(super) fn bytes_for(len: usize) -> usize {
        let bytes = len.saturating_mul(8);
        match in_arena(bytes) {
            true => arena::slot_bytes(bytes),
            false => len.saturating_add(WORDS - 1).saturating_mul(8),
        }
    }

    /// Bytes of memory the words take (an arena slot is whole 4 KiB pages).
    pub(super) fn memory_bytes(&self) -> usize {
        match self {
            Words::Heap(words) => words.capacity() * 8,
            Words::Arena { len, .. } => arena::slot_bytes(len * 8),
        }
    }
}

/// Whether an array of `bytes` is taken from the arena.
fn in_arena(bytes: usize) -> bool {
    arena::ENABLED && (arena::MIN_BYTES..arena::MAX_BYTES).contains(&bytes)
}

impl Deref for Words {
    type Target = [u64];

    #[inline(always)]
    fn deref(&self) -> &[u64] {
        match self {
            Words::Heap(words) => words,
            #[expect(unsafe_code, reason = "a slice over an arena slot")]
            // SAFETY: `ptr` points at `len` initialized (zeroed, then written only through
            // this value) words of a slot this value owns, which stays mapped for the process's
            // life; the borrow of `self` keeps it from being freed or mutated meanwhile.
            Words::Arena { ptr, len } => unsafe { std::slice::from_raw_parts(ptr.as_ptr(), *len) },
        }
    }
}

impl DerefMut for Words {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [u64] {
        match self {
            Words::Heap(words) => words,
            #[expect(unsafe_code, reason = "a slice over an arena slot")]
            // SAFETY: as in `deref`, and the `&mut self` borrow makes this the only access.
            Words::Arena { ptr, len } => unsafe {
                std::slice::from_raw_parts_mut(ptr.as_ptr(), *len)
            },
        }
    }
}

impl Drop for Words {
    fn drop(&mut self) {
        if let Words::Arena { ptr, len } = *self {
            arena::free(ptr, len * 8);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_zeroed_whatever_their_size_and_history() {
        // Sizes below, inside and above the arena's range; each written all over, dropped and
        // made again (a slot taken back from the free lists must read as zeros too).
        let sizes = [1, 1000, arena::MIN_BYTES / 8, 131_072 + 7, 131_079, arena::MAX_BYTES / 8 + 1];
        for round in 0..3u64 {
            let mut all: Vec<Words> = sizes.iter().map(|&n| Words::zeroed(n)).collect();
            for (i, w) in all.iter_mut().enumerate() {
                assert!(w.iter().all(|&x| x == 0), "round {round}, size {}", sizes[i]);
                let slack = if matches!(w, Words::Arena { .. }) { 0 } else { WORDS - 1 };
                assert_eq!(w.len(), sizes[i] + slack);
                assert!(w.memory_bytes() >= sizes[i] * 8);
                assert_eq!(w.memory_bytes(), Words::bytes_for(sizes[i]));
                w.fill(round * 100 + i as u64 + 1);
            }
            // No two arrays overlap: each still holds its own value.
            for (i, w) in all.iter().enumerate() {
                assert!(w.iter().all(|&x| x == round * 100 + i as u64 + 1));
            }
        }
    }

    #[test]
    fn arrays_in_the_arena_range_come_from_the_arena_on_linux() {
        let w = Words::zeroed(arena::MIN_BYTES / 8);
        assert_eq!(matches!(w, Words::Arena { .. }), arena::ENABLED);
        if arena::ENABLED {
            assert_eq!(w.len(), arena::MIN_BYTES / 8, "no slack in the arena");
            assert_eq!(w.as_ptr().align_offset(64), 0);
        }
        let w = Words::zeroed(arena::MIN_BYTES / 8 - 1);
        assert!(matches!(w, Words::Heap(_)));
        assert_eq!(w.len(), arena::MIN_BYTES / 8 + 6);
    }

    #[test]
    fn decoded_words_start_on_a_block_boundary_and_keep_their_values() {
        // Below the arena's range (moved within the vector), inside it, above it.
        for n in [64usize, arena::MIN_BYTES / 8, arena::MAX_BYTES / 8 + 8] {
            let mut decoded = Vec::with_capacity(n + WORDS - 1);
            decoded.extend((0..n as u64).map(|i| i * 3 + 1));
            let (w, offset) = Words::from_decoded(decoded);
            assert_eq!(w[offset..].as_ptr().align_offset(64), 0, "{n}");
            assert!(w[offset..offset + n].iter().enumerate().all(|(i, &x)| x == i as u64 * 3 + 1));
            assert!(w[..offset].iter().chain(&w[offset + n..]).all(|&x| x == 0));
        }
    }

    #[test]
    fn many_slots_freed_past_the_idle_bound_are_given_back_and_read_as_zeros() {
        // 40 arrays of 2 MiB: freeing them all passes what the free lists keep resident (4 MiB
        // or a 256th of the slots in use), so most go back to the kernel; all must come back
        // zeroed and apart.
        let n = (2 << 20) / 8;
        for round in 1..=3u64 {
            let mut all: Vec<Words> = (0..40).map(|_| Words::zeroed(n)).collect();
            for (i, w) in all.iter_mut().enumerate() {
                assert!(w.iter().all(|&x| x == 0), "round {round}");
                w.fill(round << 32 | i as u64);
            }
            for (i, w) in all.iter().enumerate() {
                assert!(w.iter().all(|&x| x == round << 32 | i as u64));
            }
        }
    }
}
