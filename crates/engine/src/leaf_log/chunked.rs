//! An append-only list kept in fixed-size chunks: what an in-memory leaf log holds.
//!
//! The in-memory log used to be `Vec`s. The recorded fingerprints and their hosts reserved the
//! leaf's whole split point when the leaf was made (megabytes for a large leaf, counted as its
//! memory whether touched or not); the kept ones grew by doubling, each step a copy of the list
//! and for a moment twice its memory. A split gave the retired leaf's megabytes back to the top
//! of the heap, where `malloc` returned them to the kernel, and the children's reservations
//! faulted them in again: a profile of a grown tree's inserts put `brk`, page faults and
//! `memmove` at about a fifth of its samples. Here a full chunk is never moved, and every chunk
//! is the size of those a retired leaf gives back, so the allocator reuses them. The first chunk
//! grows by doubling up to a chunk's size, so a leaf of a few fingerprints holds a few words.
//! The cost: a process that stops growing keeps the chunks its last splits gave back (about 3
//! bytes per URL at 10⁶ URLs; docs/benchmarks.md, "In-memory leaf logs in chunks").

/// Entries per chunk: 64 KiB of fingerprints, below `malloc`'s threshold for a mapping of its
/// own, so chunks come from (and go back to) the heap.
const CHUNK_SHIFT: u32 = 13;
const CHUNK: usize = 1 << CHUNK_SHIFT;

#[derive(Debug, Default)]
pub(super) struct Chunked<T> {
    /// The full chunks (`CHUNK` entries each), in order.
    full: Vec<Vec<T>>,
    /// The chunk the next entries go to, held here rather than as the last of `full`: a push
    /// reads its length and room without loading another chunk's header first (a migration
    /// and the general insert path push every record one at a time).
    tail: Vec<T>,
}

impl<T: Copy> Chunked<T> {
    /// An empty list with room for `reserve` entries (up to one chunk) before it allocates.
    pub(super) fn with_capacity(reserve: usize) -> Self {
        Chunked { full: Vec::new(), tail: Vec::with_capacity(reserve.min(CHUNK)) }
    }

    pub(super) fn len(&self) -> usize {
        (self.full.len() << CHUNK_SHIFT) + self.tail.len()
    }

    /// Entries the allocated chunks have room for.
    fn capacity(&self) -> usize {
        self.full.iter().map(Vec::capacity).sum::<usize>() + self.tail.capacity()
    }

    /// Heap bytes: the chunks and the list of them.
    pub(super) fn heap_bytes(&self) -> usize {
        self.capacity() * size_of::<T>() + self.full.capacity() * size_of::<Vec<T>>()
    }

    /// The entries of `range` (clamped to the list), as the slices of the chunks they lie in.
    pub(super) fn slices(&self, range: std::ops::Range<usize>) -> impl Iterator<Item = &[T]> {
        let end = range.end.min(self.len());
        let start = range.start.min(end);
        let first = start >> CHUNK_SHIFT;
        self.full.iter().chain(std::iter::once(&self.tail)).enumerate().skip(first).map_while(
            move |(k, chunk)| {
                let base = k << CHUNK_SHIFT;
                (base < end).then(|| {
                    let from = start.saturating_sub(base);
                    &chunk[from.min(chunk.len())..(end - base).min(chunk.len())]
                })
            },
        )
    }

    /// Appends `value`: inlined, with the room check first and the rest out of line.
    #[inline]
    pub(super) fn push(&mut self, value: T) {
        if self.tail.len() >= self.tail.capacity().min(CHUNK) {
            self.make_room(1);
        }
        self.tail.push(value);
    }

    pub(super) fn extend_from_slice(&mut self, mut values: &[T]) {
        while !values.is_empty() {
            self.make_room(values.len());
            let (now, rest) = values.split_at(values.len().min(CHUNK - self.tail.len()));
            self.tail.extend_from_slice(now);
            values = rest;
        }
    }

    /// Appends `count` copies of `value`.
    pub(super) fn extend_with(&mut self, mut count: usize, value: T) {
        while count > 0 {
            self.make_room(count);
            let now = count.min(CHUNK - self.tail.len());
            self.tail.resize(self.tail.len() + now, value);
            count -= now;
        }
    }

    /// Makes room in the tail for `want` more entries, or up to a chunk's end: a full tail
    /// joins the full chunks and a new one is allocated whole (the list is large); the first
    /// chunk grows by doubling, up to a chunk.
    #[inline(never)]
    fn make_room(&mut self, want: usize) {
        if self.tail.len() == CHUNK {
            let tail = std::mem::replace(&mut self.tail, Vec::with_capacity(CHUNK));
            self.full.push(tail);
            return;
        }
        let need = (self.tail.len() + want).min(CHUNK);
        if need > self.tail.capacity() {
            debug_assert!(self.full.is_empty(), "a later chunk is allocated whole");
            let grown = need.max(self.tail.capacity() * 2).min(CHUNK);
            self.tail.reserve_exact(grown - self.tail.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_keep_their_order_across_chunks_whatever_way_they_come_in() {
        let mut list = Chunked::with_capacity(3);
        let mut want = Vec::new();
        let mut next = 0u64;
        // Single pushes, slices that cross a chunk's end, and runs of one value.
        for round in 0..40 {
            let n = (round * 997) % (CHUNK + 5);
            let slice: Vec<u64> = (next..next + n as u64).collect();
            next += n as u64;
            list.extend_from_slice(&slice);
            want.extend_from_slice(&slice);
            list.push(next);
            want.push(next);
            next += 1;
            list.extend_with(round, 7);
            want.resize(want.len() + round, 7);
        }
        assert_eq!(list.len(), want.len());
        for (start, end) in [(0, 0), (0, want.len()), (5, CHUNK + 9), (CHUNK, 2 * CHUNK), (3, 2)] {
            let got: Vec<u64> = list.slices(start..end).flatten().copied().collect();
            assert_eq!(got, want[start.min(end)..end], "{start}..{end}");
        }
        assert_eq!(list.slices(want.len() + 1..want.len() + 9).flatten().count(), 0);
        // Every chunk but the tail is full, and none is larger than a chunk.
        assert!(list.full.iter().all(|c| c.len() == CHUNK && c.capacity() == CHUNK));
        assert!(list.tail.capacity() <= CHUNK && !list.tail.is_empty());
        assert!(list.capacity() >= list.len());
        assert!(list.heap_bytes() >= list.capacity() * 8 + list.full.len() * 24);
    }

    #[test]
    fn a_small_list_holds_a_few_words_not_a_chunk() {
        let mut list = Chunked::<u64>::with_capacity(0);
        assert_eq!(list.capacity(), 0);
        for i in 0..10 {
            list.push(i);
        }
        assert!(list.capacity() < 64, "capacity {}", list.capacity());
        assert_eq!(
            list.slices(0..10).flatten().copied().collect::<Vec<_>>(),
            (0..10).collect::<Vec<_>>()
        );
    }
}
