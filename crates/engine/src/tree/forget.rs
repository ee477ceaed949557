//! Forgetting: the records that match a predicate are dropped from the leaves that hold them,
//! each leaf rewritten (its file replaced whole) and its filter rebuilt from what stays.
use super::{Arc, BlockedBloom, Dsbf, Error, LeafRecord, Node, Ordering, ReadPos};

/// What [`Dsbf::forget_where`] forgot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ForgetCount {
    /// Recorded URLs forgotten (they answer "new" again).
    pub recorded: u64,
    /// Kept records dropped with them (URLs answered "seen" on a Bloom positive).
    pub kept: u64,
    /// Leaves rewritten.
    pub leaves: u64,
}

impl Dsbf {
    /// Counts, over every leaf and frozen log, the records `pred` matches, without changing
    /// anything (each leaf read under its read lock).
    ///
    /// # Errors
    /// A leaf file that cannot be read.
    pub fn count_records(&self, pred: &dyn Fn(&LeafRecord) -> bool) -> Result<u64, Error> {
        let topo = self.topo.read();
        let mut n = 0;
        let mut chunk = Vec::new();
        for node in &topo.nodes {
            let guard;
            let log = match node {
                Node::Inner { .. } => continue,
                Node::Leaf { leaf, .. } => {
                    guard = leaf.read();
                    &guard.log
                }
                Node::Splitting { frozen, .. } => &frozen.log,
            };
            let mut pos = ReadPos::default();
            while !log.is_end(pos) {
                pos = log.read(&self.leaves, pos, 1 << 16, &mut chunk)?;
                n += chunk.iter().filter(|r| pred(r)).count() as u64;
            }
        }
        Ok(n)
    }

    /// Forgets every record `drop` matches (after `before` ran, with the tree's exclusive lock
    /// held: the forget's log record goes there): each leaf that holds one has its records rewritten
    /// without them (its file replaced whole, see `LeafLog::rewrite`) and its filter rebuilt
    /// from the rest, so they answer "new" again and every other record still answers "seen".
    /// Splits in progress are finished first, and the tree's exclusive lock is held
    /// throughout: inserts, queries, splits and checkpoints wait (time: one read of every
    /// leaf, and one more read and a write of the leaves that change).
    ///
    /// # Errors
    /// A leaf file that cannot be read or written, an index that cannot be rebuilt. Leaves
    /// rewritten before the failure stay rewritten: the caller must refuse further writes
    /// (recovery then replays the forget from the log).
    pub fn forget_where(
        &self,
        drop: &dyn Fn(&LeafRecord) -> bool,
        before: &mut dyn FnMut() -> Result<(), Error>,
    ) -> Result<ForgetCount, Error> {
        let mut topo = loop {
            self.complete_splits();
            self.check()?;
            let topo = self.topo.write();
            if !topo.nodes.iter().any(|n| matches!(n, Node::Splitting { .. })) {
                break topo;
            }
        };
        before()?;
        let mut count = ForgetCount::default();
        for node in topo.nodes.iter_mut() {
            let Node::Leaf { leaf, .. } = node else { continue };
            let leaf = leaf.get_mut();
            let level = leaf.level;
            let mut filter = BlockedBloom::new(level.bits, level.hashes, self.params.probe_seed());
            let dropped = leaf.log.rewrite(&self.leaves, drop, &mut |r| {
                filter.insert(r.fp);
            })?;
            if dropped.is_empty() {
                continue;
            }
            let kept = dropped.iter().filter(|r| r.kept).count() as u64;
            let recorded = dropped.len() as u64 - kept;
            leaf.filter = filter;
            leaf.kept -= kept.min(leaf.kept);
            self.len.fetch_sub(recorded.min(self.len()), Ordering::Relaxed);
            count.recorded += recorded;
            count.kept += kept;
            count.leaves += 1;
            if leaf.index.is_some()
                && let Some(store) = self.index.get()
            {
                let store = Arc::clone(store);
                self.build_index(leaf, &store)?;
            }
        }
        // A slot of the table of fingerprints kept lately says "its leaf logs it": not true
        // of a forgotten one any more.
        for slot in self.kept_cache.get().into_iter().flatten() {
            slot.store(0, Ordering::Relaxed);
        }
        Ok(count)
    }
}
