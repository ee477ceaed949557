//! Batched inserts and lookups: each item's block is prefetched a window ahead, so a batch
//! waits for its cache misses together rather than one after the other.

use super::*;

impl BlockedBloom {
    /// [`insert`](Self::insert) for each of `fps` in order, writing the results to
    /// `was_present`, while prefetching the blocks of the items 16 places ahead. Equivalent to
    /// the single calls in order (a duplicate inside the batch is found present).
    ///
    /// # Panics
    /// If `was_present.len() != fps.len()`.
    pub fn insert_batch(&mut self, fps: &[u64], was_present: &mut [bool]) {
        assert_eq!(fps.len(), was_present.len(), "insert_batch: output length differs");
        if fps.is_empty() {
            return;
        }
        if !self.is_allocated() {
            self.allocate();
        }
        // One loop per scheme: no scheme test per item.
        let (seed, k, scheme) = (self.seed, self.num_hashes, self.scheme);
        let blocks = self.block_words_mut().as_chunks_mut::<WORDS>().0;
        let new = match scheme {
            BlockScheme::Scattered => {
                insert_loop(blocks, seed, fps, was_present, |b, h| scattered_insert(b, h, k))
            }
            #[cfg(target_arch = "x86_64")]
            BlockScheme::Sectorized if has_avx2() => {
                #[expect(unsafe_code, reason = "calls a #[target_feature] function")]
                // SAFETY: the CPU has AVX2 (just detected).
                unsafe {
                    avx2::insert_batch(blocks, seed, fps, was_present, k)
                }
            }
            // A loop per common k, so that the masks' rounds unroll with k a constant.
            BlockScheme::Sectorized => with_const_k!(k, k, {
                insert_loop(blocks, seed, fps, was_present, |b, h| sectorized_insert(b, h, k))
            }),
        };
        self.len += new;
    }

    /// [`insert_batch`](Self::insert_batch) over several filters at once: `fps[i]` goes to
    /// `filters[route[i] as usize]`, in order, and `was_present[i]` answers it. One prefetch
    /// window runs across all of them, where a batch split into one call per filter would
    /// start each call's window cold (a tree of filters routes a batch this way). Equivalent
    /// to the single calls in order. Filters of one scheme and hash count take the batched
    /// path; others are inserted one by one.
    ///
    /// # Panics
    /// If the lengths differ, or a route names no filter.
    pub fn insert_batch_routed(
        filters: &mut [&mut BlockedBloom],
        route: &[u32],
        fps: &[u64],
        was_present: &mut [bool],
    ) {
        assert_eq!(fps.len(), was_present.len(), "insert_batch_routed: output length differs");
        assert_eq!(fps.len(), route.len(), "insert_batch_routed: one route per item");
        let Some(first) = filters.first() else {
            assert!(fps.is_empty(), "insert_batch_routed: a route names no filter");
            return;
        };
        let (k, scheme) = (first.num_hashes, first.scheme);
        if filters.iter().any(|f| f.num_hashes != k || f.scheme != scheme) {
            for ((&fp, &t), out) in fps.iter().zip(route).zip(was_present.iter_mut()) {
                *out = filters[t as usize].insert(fp);
            }
            return;
        }
        for filter in filters.iter_mut().filter(|f| !f.is_allocated()) {
            filter.allocate();
        }
        let mut targets: Vec<Routed<'_>> = filters
            .iter_mut()
            .map(|f| {
                let seed = f.seed;
                let blocks = f.block_words_mut().as_chunks_mut::<WORDS>().0;
                Routed { blocks, seed, new: 0 }
            })
            .collect();
        match scheme {
            BlockScheme::Scattered => {
                routed_loop(&mut targets, route, fps, was_present, |b, h| {
                    scattered_insert(b, h, k)
                });
            }
            #[cfg(target_arch = "x86_64")]
            BlockScheme::Sectorized if has_avx2() => {
                #[expect(unsafe_code, reason = "calls a #[target_feature] function")]
                // SAFETY: the CPU has AVX2 (just detected).
                unsafe {
                    avx2::insert_batch_routed(&mut targets, route, fps, was_present, k);
                }
            }
            BlockScheme::Sectorized => with_const_k!(k, k, {
                routed_loop(&mut targets, route, fps, was_present, |b, h| {
                    sectorized_insert(b, h, k)
                });
            }),
        }
        let new: Vec<u64> = targets.iter().map(|t| t.new).collect();
        for (filter, new) in filters.iter_mut().zip(new) {
            filter.len += new;
        }
    }

    /// [`contains`](Self::contains) for each of `fps`, writing the results to `out`, while
    /// prefetching the blocks of the items 16 places ahead.
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn contains_batch(&self, fps: &[u64], out: &mut [bool]) {
        assert_eq!(fps.len(), out.len(), "contains_batch: output length differs");
        if !self.is_allocated() {
            out.fill(false);
            return;
        }
        let (seed, k) = (self.seed, self.num_hashes);
        let blocks = self.block_words().as_chunks::<WORDS>().0;
        match self.scheme {
            BlockScheme::Scattered => {
                contains_loop(blocks, seed, fps, out, |b, h| scattered_contains(b, h, k));
            }
            #[cfg(target_arch = "x86_64")]
            BlockScheme::Sectorized if has_avx2() => {
                #[expect(unsafe_code, reason = "calls a #[target_feature] function")]
                // SAFETY: the CPU has AVX2 (just detected).
                unsafe {
                    avx2::contains_batch(blocks, seed, fps, out, k);
                }
            }
            BlockScheme::Sectorized => with_const_k!(k, k, {
                contains_loop(blocks, seed, fps, out, |b, h| sectorized_contains(b, h, k));
            }),
        }
    }
}
