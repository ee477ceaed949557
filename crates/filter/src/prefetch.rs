//! Memory hints: software prefetch of a cache line (a no-op off x86-64) and transparent huge
//! pages for big bit arrays (Linux only). Hints only: they never change a filter's contents.

/// Asks the CPU to bring the cache line holding `*target` into L1: a hint for batched lookups
/// elsewhere (the engine's split migration) as much as for the filters here.
#[inline(always)]
pub fn prefetch<T>(target: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let p = std::ptr::from_ref(target).cast::<i8>();
        #[expect(unsafe_code, reason = "_mm_prefetch is an unsafe intrinsic")]
        // SAFETY: a prefetch is only a hint; it never faults and has no architectural effect.
        // SSE (which provides it) is part of the x86-64 baseline, and `p` comes from a live
        // reference anyway.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(p);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = target;
    }
}

/// Below this size a filter fits in a few huge pages' worth of TLB reach anyway.
#[cfg(target_os = "linux")]
const HUGE_PAGE_MIN_BYTES: usize = 8 << 20;

/// Asks Linux to back the (still untouched) words with 2 MiB transparent huge pages.
///
/// A random probe into a 1 GiB filter of 4 KiB pages misses the TLB nearly every time, and on a
/// virtual machine a miss costs a two-dimensional page walk; with huge pages 1 GiB is 512 TLB
/// entries. Needed because distributions default THP to `madvise` mode. Best effort: errors
/// (THP disabled, old kernel) are ignored.
pub(crate) fn advise_huge_pages<T>(data: &[T]) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = data.as_ptr() as usize;
        let len = std::mem::size_of_val(data);
        if len < HUGE_PAGE_MIN_BYTES {
            return;
        }
        // Only whole huge pages inside the allocation.
        let first = start.next_multiple_of(HUGE);
        let last = (start + len) / HUGE * HUGE;
        if last <= first {
            return;
        }
        #[expect(unsafe_code, reason = "madvise is a foreign function")]
        // SAFETY: the range [first, last) lies inside the live allocation behind `data`, is
        // page-aligned, and MADV_HUGEPAGE only changes how the kernel backs it, never its
        // contents or its validity; the return value is ignored on purpose (a hint).
        unsafe {
            libc::madvise(first as *mut libc::c_void, last - first, libc::MADV_HUGEPAGE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = data;
    }
}
