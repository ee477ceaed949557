//! The sectorized batch loops compiled for AVX2, used when the CPU has it
//! (`is_x86_feature_detected!`, checked once per batch): the 8 masks are computed in two 256-bit
//! registers (variable shifts) and the line is read and written in two 32-byte loads and
//! stores. Same bits and results as the SSE2 / scalar code.

use core::arch::x86_64::{
    __m256i, _mm256_and_si256, _mm256_andnot_si256, _mm256_loadu_si256, _mm256_or_si256,
    _mm256_set_epi64x, _mm256_set1_epi64x, _mm256_setzero_si256, _mm256_sllv_epi64,
    _mm256_srlv_epi64, _mm256_storeu_si256, _mm256_testz_si256,
};

use super::{Routed, SECTOR_SALT, WORDS, contains_loop, insert_loop, mix64, routed_loop};

/// The masks of words 0..4 and 4..8 (see `sector_masks`).
#[target_feature(enable = "avx2")]
#[inline]
fn masks(h: u64, k: u32) -> (__m256i, __m256i) {
    let mut s = mix64(h ^ SECTOR_SALT);
    let r = (s >> 61) as u32;
    let lo_shift = _mm256_set_epi64x(18, 12, 6, 0);
    let hi_shift = _mm256_set_epi64x(42, 36, 30, 24);
    let six = _mm256_set1_epi64x(63);
    let one = _mm256_set1_epi64x(1);
    let (mut lo, mut hi) = (_mm256_setzero_si256(), _mm256_setzero_si256());
    for _ in 0..k / 8 {
        let v = _mm256_set1_epi64x(s.cast_signed());
        let p_lo = _mm256_and_si256(_mm256_srlv_epi64(v, lo_shift), six);
        let p_hi = _mm256_and_si256(_mm256_srlv_epi64(v, hi_shift), six);
        lo = _mm256_or_si256(lo, _mm256_sllv_epi64(one, p_lo));
        hi = _mm256_or_si256(hi, _mm256_sllv_epi64(one, p_hi));
        s = mix64(s);
    }
    let part = k % 8;
    if part != 0 {
        let run = (1u32 << part) - 1;
        let active = _mm256_set1_epi64x(i64::from((run << r) | (run >> (8 - r))));
        let a_lo = _mm256_and_si256(_mm256_srlv_epi64(active, _mm256_set_epi64x(3, 2, 1, 0)), one);
        let a_hi = _mm256_and_si256(_mm256_srlv_epi64(active, _mm256_set_epi64x(7, 6, 5, 4)), one);
        let v = _mm256_set1_epi64x(s.cast_signed());
        let p_lo = _mm256_and_si256(_mm256_srlv_epi64(v, lo_shift), six);
        let p_hi = _mm256_and_si256(_mm256_srlv_epi64(v, hi_shift), six);
        lo = _mm256_or_si256(lo, _mm256_sllv_epi64(a_lo, p_lo));
        hi = _mm256_or_si256(hi, _mm256_sllv_epi64(a_hi, p_hi));
    }
    (lo, hi)
}

#[target_feature(enable = "avx2")]
#[inline]
fn insert(block: &mut [u64; WORDS], h: u64, k: u32) -> bool {
    let (m_lo, m_hi) = masks(h, k);
    let p = block.as_mut_ptr().cast::<__m256i>();
    #[expect(unsafe_code, reason = "AVX2 loads and stores take raw pointers")]
    // SAFETY: `p` and `p.add(1)` point at the two 32-byte halves of `block`, a live,
    // exclusively borrowed `[u64; 8]`; the unaligned forms need no alignment.
    unsafe {
        let b_lo = _mm256_loadu_si256(p);
        let b_hi = _mm256_loadu_si256(p.add(1));
        let missing =
            _mm256_or_si256(_mm256_andnot_si256(b_lo, m_lo), _mm256_andnot_si256(b_hi, m_hi));
        _mm256_storeu_si256(p, _mm256_or_si256(b_lo, m_lo));
        _mm256_storeu_si256(p.add(1), _mm256_or_si256(b_hi, m_hi));
        _mm256_testz_si256(missing, missing) == 1
    }
}

#[target_feature(enable = "avx2")]
#[inline]
fn contains(block: &[u64; WORDS], h: u64, k: u32) -> bool {
    let (m_lo, m_hi) = masks(h, k);
    let p = block.as_ptr().cast::<__m256i>();
    #[expect(unsafe_code, reason = "AVX2 loads take raw pointers")]
    // SAFETY: `p` and `p.add(1)` point at the two 32-byte halves of `block`, a live
    // `[u64; 8]`; the unaligned form needs no alignment.
    unsafe {
        let b_lo = _mm256_loadu_si256(p);
        let b_hi = _mm256_loadu_si256(p.add(1));
        let missing =
            _mm256_or_si256(_mm256_andnot_si256(b_lo, m_lo), _mm256_andnot_si256(b_hi, m_hi));
        _mm256_testz_si256(missing, missing) == 1
    }
}

/// `insert_loop` with the AVX2 sectorized insert; returns how many items were new.
#[target_feature(enable = "avx2")]
pub(super) fn insert_batch(
    blocks: &mut [[u64; WORDS]],
    seed: u64,
    fps: &[u64],
    out: &mut [bool],
    k: u32,
) -> u64 {
    with_const_k!(k, k, { insert_loop(blocks, seed, fps, out, |b, h| insert(b, h, k)) })
}

/// `routed_loop` with the AVX2 sectorized insert.
#[target_feature(enable = "avx2")]
pub(super) fn insert_batch_routed(
    targets: &mut [Routed<'_>],
    route: &[u32],
    fps: &[u64],
    out: &mut [bool],
    k: u32,
) {
    with_const_k!(k, k, { routed_loop(targets, route, fps, out, |b, h| insert(b, h, k)) });
}

/// `contains_loop` with the AVX2 sectorized check.
#[target_feature(enable = "avx2")]
pub(super) fn contains_batch(
    blocks: &[[u64; WORDS]],
    seed: u64,
    fps: &[u64],
    out: &mut [bool],
    k: u32,
) {
    with_const_k!(k, k, { contains_loop(blocks, seed, fps, out, |b, h| contains(b, h, k)) });
}
