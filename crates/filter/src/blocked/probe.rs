//! The probes of one block: the sectorized masks and the scattered positions, and the batch
//! loops (prefetching a window ahead) that every batch call of [`super::BlockedBloom`] runs.

use super::*;

/// The 8 word masks of the sectorized probes of block hash `h` (see
/// [`BlockScheme::Sectorized`]). Inlined into a loop over items with `k` fixed, the masks live in
/// registers.
#[inline(always)]
pub(super) fn sector_masks(h: u64, k: u32) -> [u64; WORDS] {
    let mut s = mix64(h ^ SECTOR_SALT);
    let r = (s >> 61) as u32;
    let mut m = [0u64; WORDS];
    for _ in 0..k / 8 {
        for (i, mask) in m.iter_mut().enumerate() {
            *mask |= 1u64 << ((s >> (6 * i)) & 63);
        }
        s = mix64(s);
    }
    let part = k % 8;
    if part != 0 {
        // Bit i of `active`: whether word i is probed, i.e. (i − r) mod 8 < part (the `part`
        // low bits rotated left by r within 8 bits).
        let run = (1u32 << part) - 1;
        let active = (run << r) | (run >> (8 - r));
        for (i, mask) in m.iter_mut().enumerate() {
            *mask |= u64::from((active >> i) & 1) << ((s >> (6 * i)) & 63);
        }
    }
    m
}

/// ORs `masks` into `block` and returns whether every bit of them was set already.
///
/// On x86-64 in four 16-byte loads and stores (SSE2, part of the baseline) instead of eight
/// 8-byte ones: measured on the one-cache-line benchmark, the number of loads per item, not the
/// arithmetic, is what limits a batch whose lines are still arriving (each load of a line in
/// flight holds a load-queue entry until it lands).
#[inline(always)]
pub(super) fn or_masks(block: &mut [u64; WORDS], masks: [u64; WORDS]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{
            __m128i, _mm_andnot_si128, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8,
            _mm_or_si128, _mm_set_epi64x, _mm_setzero_si128, _mm_storeu_si128,
        };
        let p = block.as_mut_ptr().cast::<__m128i>();
        #[expect(unsafe_code, reason = "SSE2 intrinsics are unsafe functions")]
        // SAFETY: SSE2 is part of the x86-64 baseline. `p.add(q)` for q < 4 points at 16 of the
        // 64 bytes of `block`, a live, exclusively borrowed `[u64; 8]`; the unaligned load and
        // store need no alignment.
        unsafe {
            let mut missing = _mm_setzero_si128();
            for q in 0..WORDS / 2 {
                let m = _mm_set_epi64x(masks[2 * q + 1].cast_signed(), masks[2 * q].cast_signed());
                let b = _mm_loadu_si128(p.add(q));
                missing = _mm_or_si128(missing, _mm_andnot_si128(b, m));
                _mm_storeu_si128(p.add(q), _mm_or_si128(b, m));
            }
            _mm_movemask_epi8(_mm_cmpeq_epi8(missing, _mm_setzero_si128())) == 0xFFFF
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut missing = 0u64;
        for (word, mask) in block.iter_mut().zip(masks) {
            missing |= mask & !*word;
            *word |= mask;
        }
        missing == 0
    }
}

/// Whether every bit of `masks` is set in `block` (see [`or_masks`] for the SSE2 loads).
#[inline(always)]
pub(super) fn has_masks(block: &[u64; WORDS], masks: [u64; WORDS]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{
            __m128i, _mm_andnot_si128, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8,
            _mm_or_si128, _mm_set_epi64x, _mm_setzero_si128,
        };
        let p = block.as_ptr().cast::<__m128i>();
        #[expect(unsafe_code, reason = "SSE2 intrinsics are unsafe functions")]
        // SAFETY: SSE2 is part of the x86-64 baseline. `p.add(q)` for q < 4 points at 16 of the
        // 64 bytes of `block`, a live `[u64; 8]`; the unaligned load needs no alignment.
        unsafe {
            let mut missing = _mm_setzero_si128();
            for q in 0..WORDS / 2 {
                let m = _mm_set_epi64x(masks[2 * q + 1].cast_signed(), masks[2 * q].cast_signed());
                let b = _mm_loadu_si128(p.add(q));
                missing = _mm_or_si128(missing, _mm_andnot_si128(b, m));
            }
            _mm_movemask_epi8(_mm_cmpeq_epi8(missing, _mm_setzero_si128())) == 0xFFFF
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        block.iter().zip(masks).fold(0u64, |missing, (w, m)| missing | (m & !w)) == 0
    }
}

/// The k in-block bit positions (0..512) of the sectorized probes of block hash `h`, in the
/// order round by round, word by word (see [`BlockScheme::Sectorized`]).
#[derive(Debug, Clone)]
pub(super) struct Sectors {
    pub(super) s: u64,
    pub(super) r: u32,
    pub(super) round: u32,
    pub(super) word: u32,
    pub(super) full: u32,
    pub(super) part: u32,
}

impl Sectors {
    pub(super) fn new(h: u64, k: u32) -> Self {
        let s = mix64(h ^ SECTOR_SALT);
        Sectors { s, r: (s >> 61) as u32, round: 0, word: 0, full: k / 8, part: k % 8 }
    }
}

impl Iterator for Sectors {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        loop {
            if self.word == WORDS as u32 {
                self.word = 0;
                self.round += 1;
                self.s = mix64(self.s);
            }
            if self.round > self.full || (self.round == self.full && self.part == 0) {
                return None;
            }
            let i = self.word;
            self.word += 1;
            if self.round < self.full || i.wrapping_sub(self.r) & 7 < self.part {
                return Some(i as usize * 64 + ((self.s >> (6 * i)) & 63) as usize);
            }
        }
    }
}

/// The in-block probes of either scheme.
#[derive(Debug, Clone)]
pub(super) enum Probes {
    Scattered(InBlock),
    Sectorized(Sectors),
}

impl Iterator for Probes {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        match self {
            Probes::Scattered(p) => p.next(),
            Probes::Sectorized(p) => p.next(),
        }
    }
}

/// The other kind [`BlockedBloom`] decodes besides [`FilterKind::Blocked`].
pub(super) const SECTORIZED_KIND: &[FilterKind] = &[FilterKind::BlockedSectorized];

/// How many items ahead the batched calls prefetch: enough to keep ~10 line fills in flight.
pub(super) const WINDOW: usize = 16;

/// The k in-block bit positions (0..512) of an item with block hash `h`: 9 bits each, drawn
/// (with replacement) from `mix64(h ^ BIT_SALT)`, 7 per 64-bit word, re-mixing the word for
/// every further 7.
#[derive(Debug, Clone)]
pub(super) struct InBlock {
    pub(super) word: u64,
    pub(super) x: u64,
    pub(super) left_in_word: u32,
    pub(super) remaining: u32,
}

impl InBlock {
    #[inline(always)]
    pub(super) fn new(h: u64, k: u32) -> Self {
        let word = mix64(h ^ BIT_SALT);
        InBlock { word, x: word, left_in_word: 7, remaining: k }
    }
}

impl Iterator for InBlock {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        if self.left_in_word == 0 {
            self.word = mix64(self.word);
            self.x = self.word;
            self.left_in_word = 7;
        }
        let bit = (self.x & 511) as usize;
        self.x >>= 9;
        self.left_in_word -= 1;
        Some(bit)
    }
}

/// Sets the scattered probes of block hash `h` in `block`; whether they were all set.
#[inline(always)]
pub(super) fn scattered_insert(block: &mut [u64; WORDS], h: u64, k: u32) -> bool {
    let mut present = true;
    for bit in InBlock::new(h, k) {
        let word = &mut block[bit >> 6];
        let mask = 1u64 << (bit & 63);
        present &= *word & mask != 0;
        *word |= mask;
    }
    present
}

/// Whether the scattered probes of block hash `h` are all set in `block`.
#[inline(always)]
pub(super) fn scattered_contains(block: &[u64; WORDS], h: u64, k: u32) -> bool {
    // Early exit at the first clear bit: a miss usually costs one or two probes.
    InBlock::new(h, k).all(|bit| block[bit >> 6] & (1u64 << (bit & 63)) != 0)
}

/// Sets the sectorized probes of block hash `h` in `block` in one pass over its 8 words, with
/// the masks from registers (no word is read after it is written, whatever the hash); whether
/// they were all set.
#[inline(always)]
pub(super) fn sectorized_insert(block: &mut [u64; WORDS], h: u64, k: u32) -> bool {
    or_masks(block, sector_masks(h, k))
}

/// Whether the sectorized probes of block hash `h` are all set in `block` (all 8 words of the
/// line, branch-free).
#[inline(always)]
pub(super) fn sectorized_contains(block: &[u64; WORDS], h: u64, k: u32) -> bool {
    has_masks(block, sector_masks(h, k))
}

/// The prefetching loop of [`BlockedBloom::insert_batch`]: `insert(block, h)` for each item in
/// order, while prefetching the block of the item [`WINDOW`] places ahead. Writes whether each
/// was present to `out` and returns how many were new. A free function over the blocks and
/// locals, so that nothing of the filter is reloaded per item.
#[inline(always)]
pub(super) fn insert_loop(
    blocks: &mut [[u64; WORDS]],
    seed: u64,
    fps: &[u64],
    out: &mut [bool],
    insert: impl Fn(&mut [u64; WORDS], u64) -> bool,
) -> u64 {
    let n = blocks.len() as u64;
    let mut ring = [(0u64, 0usize); WINDOW];
    for (slot, &fp) in ring.iter_mut().zip(fps) {
        let h = mix64(fp ^ seed);
        let b = reduce(h, n) as usize;
        prefetch(&blocks[b]);
        *slot = (h, b);
    }
    let mut new = 0u64;
    for (i, out) in out.iter_mut().enumerate() {
        let slot = i % WINDOW;
        let (h, b) = ring[slot];
        if let Some(&ahead) = fps.get(i + WINDOW) {
            let h = mix64(ahead ^ seed);
            let b = reduce(h, n) as usize;
            prefetch(&blocks[b]);
            ring[slot] = (h, b);
        }
        let present = insert(&mut blocks[b], h);
        new += u64::from(!present);
        *out = present;
    }
    new
}

/// One filter of [`BlockedBloom::insert_batch_routed`]: its blocks and what places an item
/// in them.
pub(super) struct Routed<'a> {
    pub(super) blocks: &'a mut [[u64; WORDS]],
    pub(super) seed: u64,
    /// Items found new in this filter.
    pub(super) new: u64,
}

/// [`insert_loop`] over several filters: item `i` goes to `targets[route[i]]`, and the block
/// of the item [`WINDOW`] places ahead is prefetched whichever filter it is in, so the window
/// stays full across filters.
#[inline(always)]
pub(super) fn routed_loop(
    targets: &mut [Routed<'_>],
    route: &[u32],
    fps: &[u64],
    out: &mut [bool],
    insert: impl Fn(&mut [u64; WORDS], u64) -> bool,
) {
    let place = |targets: &[Routed<'_>], t: u32, fp: u64| {
        let target = &targets[t as usize];
        let h = mix64(fp ^ target.seed);
        let b = reduce(h, target.blocks.len() as u64) as usize;
        prefetch(&target.blocks[b]);
        (h, b)
    };
    let mut ring = [(0u64, 0usize); WINDOW];
    for ((slot, &fp), &t) in ring.iter_mut().zip(fps).zip(route) {
        *slot = place(targets, t, fp);
    }
    for (i, (out, &t)) in out.iter_mut().zip(route).enumerate() {
        let slot = i % WINDOW;
        let (h, b) = ring[slot];
        if let (Some(&ahead), Some(&to)) = (fps.get(i + WINDOW), route.get(i + WINDOW)) {
            ring[slot] = place(targets, to, ahead);
        }
        let target = &mut targets[t as usize];
        let present = insert(&mut target.blocks[b], h);
        target.new += u64::from(!present);
        *out = present;
    }
}

/// [`insert_loop`] for [`BlockedBloom::contains_batch`].
#[inline(always)]
pub(super) fn contains_loop(
    blocks: &[[u64; WORDS]],
    seed: u64,
    fps: &[u64],
    out: &mut [bool],
    contains: impl Fn(&[u64; WORDS], u64) -> bool,
) {
    let n = blocks.len() as u64;
    let mut ring = [(0u64, 0usize); WINDOW];
    for (slot, &fp) in ring.iter_mut().zip(fps) {
        let h = mix64(fp ^ seed);
        let b = reduce(h, n) as usize;
        prefetch(&blocks[b]);
        *slot = (h, b);
    }
    for (i, out) in out.iter_mut().enumerate() {
        let slot = i % WINDOW;
        let (h, b) = ring[slot];
        if let Some(&ahead) = fps.get(i + WINDOW) {
            let h = mix64(ahead ^ seed);
            let b = reduce(h, n) as usize;
            prefetch(&blocks[b]);
            ring[slot] = (h, b);
        }
        *out = contains(&blocks[b], h);
    }
}
