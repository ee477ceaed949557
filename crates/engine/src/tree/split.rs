//! A leaf's split: the parent's filter and log are frozen (answering still), its children are
//! made, and the migrator moves the frozen log into them step by step, in bounded chunks read
//! from the log's file, while inserts and lookups go on; then the frozen parent is dropped.
//! See the module docs of [`super`] for the locks.
use super::{
    BlockedBloom, Dsbf, KEEP_DEDUP_RATIO, Leaf, LeafIndex, LeafLog, LeafRecord, LeafStore, Level,
    Mutex, Node, NodeId, Ordering, ReadPos, Retained, RwLock, SplitMode, Walk, group_by_node,
    new_leaf,
};

use std::convert::Infallible;

use crate::dsbf::split::{self, Freeze, SplitHome, SplitOutcome, Stage, Step};

/// Migration steps per read of the frozen log: a step bounds how long the children's locks
/// are held, and a read of several steps keeps the reads of a log on disk large.
const STEPS_PER_READ: usize = 4;

/// The most fingerprints a migration step takes under the children's locks, whatever the
/// policy says: a batch insert locks every leaf its chunk reaches and waits for the step, and
/// namespaces made before 2,048 was the default have 8,192 saved
/// (see [`crate::SplitPolicy::step`]).
const MAX_STEP: usize = 2048;

pub(super) struct Frozen {
    pub(super) filter: BlockedBloom,
    pub(super) log: LeafLog,
    /// The leaf's `last_lsn` when it froze.
    pub(super) last_lsn: u64,
    /// The leaf's kept records when it froze.
    pub(super) kept: u64,
    /// Exact mode: the leaf's index when it froze (every record of `log`).
    pub(super) index: Option<LeafIndex>,
    /// How much of `log` is already in the children (changed only under the migrator lock).
    pub(super) cursor: Mutex<Cursor>,
}

/// A split's progress through its frozen log: the records read so far end at `read`; of the
/// last chunk read, `taken` are in the children.
#[derive(Debug, Default)]
pub(super) struct Cursor {
    pub(super) read: ReadPos,
    pub(super) chunk: Vec<LeafRecord>,
    pub(super) taken: usize,
    /// Whether kept records are deduplicated (the frozen log has many): then `carried` is made
    /// when this split's migration starts, not when the split starts, so that of a wave of
    /// leaves splitting at once only the one being migrated holds one.
    pub(super) dedup: bool,
    /// While deduplicating: which kept fingerprints are carried already.
    pub(super) carried: Option<Carried>,
}

/// The distinct fingerprints a frozen log keeps, sorted, and which of them a split carried
/// already (as recorded or as kept): a kept record of one carried already (recorded before
/// it, or kept twice) is dropped. 8 bytes, a bit and about 2 bytes of directory per distinct
/// kept fingerprint: a set of every record would take about 18 bytes per record, several times
/// the leaf's filter.
///
/// Every migrated record asks it, so the lookup is a directory of the fingerprints' top bits
/// into the sorted array (about 4 entries per bucket, one or two cache lines) rather than a
/// binary search, whose ~20 dependent loads into a multi-megabyte array cost a billion-URL run
/// more than any other part of a split (a profile of `filter` put it at 12% of all samples).
#[derive(Debug)]
pub(super) struct Carried {
    pub(super) kept: Vec<u64>,
    pub(super) done: Vec<u64>,
    /// `dir[b]..dir[b + 1]`: where the fingerprints whose top `64 - shift` bits are `b` lie in
    /// `kept`.
    pub(super) dir: Vec<usize>,
    pub(super) shift: u32,
}

impl Carried {
    pub(super) fn new(mut kept: Vec<u64>) -> Self {
        kept.sort_unstable();
        kept.dedup();
        let done = vec![0; kept.len().div_ceil(64)];
        // About four fingerprints per bucket (they are hashes, so evenly spread).
        let bits = (kept.len() / 4).max(1).ilog2().min(30);
        let shift = 64 - bits;
        let mut dir = Vec::with_capacity((1 << bits) + 1);
        let mut at = 0;
        for bucket in 0..=(1u64 << bits) {
            while at < kept.len() && Self::bucket(kept[at], shift) < bucket {
                at += 1;
            }
            dir.push(at);
        }
        Carried { kept, done, dir, shift }
    }

    #[inline]
    pub(super) fn bucket(fp: u64, shift: u32) -> u64 {
        // `checked_shr`: a shift of 64 (a directory of one bucket) puts everything in bucket 0.
        fp.checked_shr(shift).unwrap_or(0)
    }

    /// [`Self::carry`] for each of `fps` in order, into `before`, prefetching the directory
    /// entries and then the array slots of the fingerprints a few places ahead: the two
    /// cache misses of each lookup overlap with the others'.
    pub(super) fn carry_batch(
        &mut self,
        fps: impl ExactSizeIterator<Item = u64> + Clone,
        before: &mut Vec<bool>,
    ) {
        const AHEAD: usize = 8;
        before.clear();
        let mut dir_ahead = fps.clone().skip(2 * AHEAD);
        let mut kept_ahead = fps.clone().skip(AHEAD);
        for fp in fps {
            if let Some(far) = dir_ahead.next() {
                urlseen_filter::prefetch(&self.dir[Self::bucket(far, self.shift) as usize]);
            }
            if let Some(near) = kept_ahead.next()
                && let Some(slot) = self.kept.get(self.dir[Self::bucket(near, self.shift) as usize])
            {
                urlseen_filter::prefetch(slot);
            }
            before.push(self.carry(fp));
        }
    }

    /// Notes `fp` as carried; whether it was before. (A fingerprint never kept was never
    /// carried before: a leaf records each fingerprint once.)
    pub(super) fn carry(&mut self, fp: u64) -> bool {
        let b = Self::bucket(fp, self.shift) as usize;
        let (lo, hi) = (self.dir[b], self.dir[b + 1]);
        let Some(offset) = self.kept[lo..hi].iter().position(|&k| k == fp) else { return false };
        let i = lo + offset;
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        let before = self.done[word] & bit != 0;
        self.done[word] |= bit;
        before
    }
}

impl Cursor {
    pub(super) fn is_done(&self, log: &LeafLog) -> bool {
        log.is_end(self.read) && self.taken >= self.chunk.len()
    }
}

impl Dsbf {
    /// Starts splitting full leaf `id` and schedules its migration.
    ///
    /// A leaf below a split under way first waits for that split to end (helping it along,
    /// see [`Self::complete_splits`]): frozen filters on one path answer together, each up to
    /// its split point's FPR, so two at once would pass the bound. A batch that fills a leaf
    /// so fast that its children fill before its own split ends thus waits for it, instead of
    /// answering from a stack of frozen filters.
    pub(super) fn start_split(&self, id: NodeId) {
        if self.params.split.mode == SplitMode::Background && self.below_a_split(id) {
            self.complete_splits();
        }
        if self.freeze(id) != Ok(Freeze::Frozen) {
            return;
        }
        match self.params.split.mode {
            SplitMode::Background => self.workers.submit(self.this.clone()),
            SplitMode::Inline => self.complete_splits(),
            SplitMode::Never => {}
        }
    }

    /// Whether a split under way lies above leaf `id` (trees routed per level, which have no
    /// directory, are not asked).
    fn below_a_split(&self, id: NodeId) -> bool {
        self.topo.read().dir.as_ref().is_some_and(|dir| dir.below_a_split(id))
    }

    /// Turns full leaf `id` into a splitting node with `fanout` empty children. Returns `false`
    /// if `id` is no longer a full leaf (another thread was first).
    pub(super) fn split_leaf(&self, id: NodeId) -> bool {
        let fanout = self.params.split.fanout;
        // The children's sizes are found before the exclusive lock: formula 4 for a spread size
        // is a search (about 0.15 ms), which would hold up every insert and query meanwhile.
        // Where a child's range starts is its place: the same on every run. Trees routed per
        // level (before snapshot version 4) have no ranges and keep one size.
        let (depth, places) = {
            let topo = self.topo.read();
            let Some(Node::Leaf { depth, .. }) = topo.nodes.get(id as usize) else { return false };
            let places = match &topo.dir {
                Some(dir) => dir.child_places(id, fanout as usize),
                None => vec![None; fanout as usize],
            };
            (*depth, places)
        };
        let levels: Vec<Level> =
            places.into_iter().map(|place| self.params.split_level(depth + 1, place)).collect();
        let mut guard = self.topo.write();
        let topo = &mut *guard;
        let first_child = topo.nodes.len() as NodeId;
        let Some(node) = topo.nodes.get_mut(id as usize) else { return false };
        // A leaf keeps its depth and range until it splits: the sizes found above are its
        // children's, unless another thread split it first.
        let Node::Leaf { leaf, .. } = node else { return false };
        let leaf_mut = leaf.get_mut();
        if leaf_mut.fill() < leaf_mut.split_at() {
            return false;
        }
        let children: Box<[NodeId]> = (first_child..first_child + fanout).collect();
        let old = std::mem::replace(node, Node::Inner { depth, children: children.clone() });
        let Node::Leaf { leaf, .. } = old else { return false };
        let Leaf { filter, mut log, last_lsn, kept, index, .. } = leaf.into_inner();
        // Its buffered tail goes to the file, so the migrator reads it all from there.
        log.seal(&self.leaves);
        // Deduplicating costs a set of the leaf's fingerprints (up to about 9 bytes each while
        // the split runs): worth it only where kept records are many, as repeated checks of
        // recorded URLs make them. A few (the false positives) are carried as they are.
        let dedup = kept > 0 && kept.saturating_mul(KEEP_DEDUP_RATIO) >= log.len();
        let cursor = Mutex::new(Cursor { dedup, ..Cursor::default() });
        let frozen = Box::new(Frozen { filter, log, last_lsn, kept, index, cursor });
        *node = Node::Splitting { depth, frozen, children };
        if let Some(dir) = &mut topo.dir {
            let children: Vec<NodeId> = (first_child..first_child + fanout).collect();
            dir.split(id, &children);
        }
        let exact = self.index.get().is_some();
        for (id, level) in (first_child..first_child + fanout).zip(levels) {
            let leaf = new_leaf(&self.params, &self.leaves, exact, id, level);
            let leaf = Box::new(RwLock::new(leaf));
            topo.nodes.push(Node::Leaf { depth: depth + 1, leaf });
        }
        self.splits_started.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Migrates every splitting node to completion, in bounded steps, on the calling thread.
    /// Returns when no split is in progress. Safe to call at any time, from any thread.
    pub fn complete_splits(&self) {
        let _migrator = self.migrator.lock();
        loop {
            let next = {
                let topo = self.topo.read();
                topo.nodes.iter().position(|n| matches!(n, Node::Splitting { .. }))
            };
            let Some(id) = next else { return };
            let Ok(outcome) = split::run(self, id as NodeId);
            if outcome == SplitOutcome::Stopped {
                return;
            }
        }
    }
}

/// The in-process home of a split: every step under the tree's locks (see [`super`]).
impl SplitHome for Dsbf {
    type Error = Infallible;

    fn stage(&self, id: NodeId) -> Result<Stage, Infallible> {
        Ok(match self.topo.read().nodes.get(id as usize) {
            Some(Node::Leaf { .. }) => Stage::Leaf,
            Some(Node::Splitting { .. }) => Stage::Splitting,
            // No such node: nothing to split or drop.
            Some(Node::Inner { .. }) | None => Stage::Inner,
        })
    }

    fn freeze(&self, id: NodeId) -> Result<Freeze, Infallible> {
        Ok(if self.split_leaf(id) { Freeze::Frozen } else { Freeze::Not(SplitOutcome::NotFull) })
    }

    /// Moves up to `split.step` fingerprints (at most [`MAX_STEP`]) of splitting node `id` into
    /// the leaves below it, reading the frozen log from its file in bounded chunks of whole
    /// blocks ([`STEPS_PER_READ`] steps at a time). A child that fills up is split first, so no
    /// leaf passes its split point by migration. A frozen log that cannot be read stops the
    /// split where it is (the frozen filter keeps answering) and marks the leaf store failed.
    fn migrate_step(&self, id: NodeId) -> Result<Step, Infallible> {
        let mut full = None;
        let step = self.params.split.step.min(MAX_STEP);
        {
            let topo = self.topo.read();
            let Some(Node::Splitting { frozen, .. }) = topo.nodes.get(id as usize) else {
                return Ok(Step::Done);
            };
            let mut cursor = frozen.cursor.lock();
            let cursor = &mut *cursor;
            if cursor.taken >= cursor.chunk.len() {
                if frozen.log.is_end(cursor.read) {
                    return Ok(Step::Done);
                }
                // Read under the shared tree lock only: inserts and queries go on meanwhile.
                match frozen.log.read(
                    &self.leaves,
                    cursor.read,
                    step * STEPS_PER_READ,
                    &mut cursor.chunk,
                ) {
                    Ok(next) => cursor.read = next,
                    Err(e) => {
                        if let LeafStore::Files(files) = &self.leaves {
                            files.fail("split of leaf", &files.path(id), &e);
                        }
                        return Ok(Step::Stopped);
                    }
                }
                cursor.taken = 0;
            }
            if cursor.dedup && cursor.carried.is_none() {
                // One pass over the frozen log for its kept fingerprints, before the first
                // migrated record.
                let (mut pos, mut chunk, mut kept) = (ReadPos::default(), Vec::new(), Vec::new());
                while !frozen.log.is_end(pos) {
                    match frozen.log.read(&self.leaves, pos, step * STEPS_PER_READ, &mut chunk) {
                        Ok(next) => pos = next,
                        Err(e) => {
                            if let LeafStore::Files(files) = &self.leaves {
                                files.fail("split of leaf", &files.path(id), &e);
                            }
                            return Ok(Step::Stopped);
                        }
                    }
                    kept.extend(chunk.iter().filter(|r| r.kept).map(|r| r.fp));
                }
                cursor.carried = Some(Carried::new(kept));
            }
            let rest = &cursor.chunk[cursor.taken..];
            let chunk = &rest[..rest.len().min(step)];
            let mut routed: Vec<(NodeId, u32)> = chunk
                .iter()
                .enumerate()
                .map(|(pos, r)| {
                    // Down from the root: the path passes through this node, to its children.
                    match self.walk(&topo, r.fp, false) {
                        Walk::Leaf(leaf) => (leaf, pos as u32),
                        Walk::Seen => unreachable!("walk without frozen checks ends at a leaf"),
                    }
                })
                .collect();
            group_by_node(&mut routed, topo.nodes.len(), &mut Vec::new());
            // Lock every target leaf (in node order, so no two lockers of several leaves can
            // deadlock; everyone else holds one leaf at a time), then take the longest prefix of
            // the chunk that fits in all of them.
            let mut groups: Vec<_> = routed
                .chunk_by(|a, b| a.0 == b.0)
                .filter_map(|g| topo.leaf(g[0].0).map(|cell| (g, cell.write())))
                .collect();
            let mut end = chunk.len();
            for (group, leaf) in &groups {
                // Kept records take no room: the cut is at the first counted record past it.
                let mut room = leaf.split_at().saturating_sub(leaf.fill());
                for &(leaf_id, pos) in group.iter() {
                    if (pos as usize) >= end {
                        break;
                    }
                    if chunk[pos as usize].kept {
                        continue;
                    }
                    if room == 0 {
                        end = pos as usize;
                        full = Some(leaf_id);
                        break;
                    }
                    room -= 1;
                }
            }
            // Which records of the step carry a fingerprint carried already, in log order (the
            // groups keep it for each fingerprint: one leaf takes all of its records).
            let mut before = Vec::new();
            if let Some(carried) = cursor.carried.as_mut() {
                carried.carry_batch(chunk[..end].iter().map(|r| r.fp), &mut before);
            }
            let (mut fps, mut was) = (Vec::new(), Vec::new());
            for (group, leaf) in &mut groups {
                let take = group.iter().take_while(|&&(_, pos)| (pos as usize) < end).count();
                fps.clear();
                fps.extend(group[..take].iter().map(|&(_, pos)| chunk[pos as usize].fp));
                was.clear();
                was.resize(take, false);
                // Batched, so the filter prefetches its cache lines.
                leaf.filter.insert_batch(&fps, &mut was);
                for &(_, pos) in &group[..take] {
                    let record = chunk[pos as usize];
                    // A kept record of a fingerprint the parent recorded (which comes first in
                    // its log) or kept before is carried once: the child holds it already.
                    if record.kept && before.get(pos as usize) == Some(&true) {
                        continue;
                    }
                    // Always logged, even if the child's filter already (falsely) held it:
                    // the log, not the filter, is what the child's own split carries on. In
                    // exact mode it goes to the child's index too, which must hold everything
                    // in the child's log when the frozen index is gone.
                    self.record_in(leaf, record);
                }
            }
            drop(groups);
            cursor.taken += end;
            if full.is_none() && cursor.is_done(&frozen.log) {
                cursor.carried = None;
                return Ok(Step::Done);
            }
        }
        if let Some(leaf) = full {
            // Not start_split: the caller holds the migrator lock, and its complete_splits loop
            // finds the new splitting node by itself.
            self.split_leaf(leaf);
        }
        Ok(Step::More)
    }

    /// Makes a fully migrated splitting node inner, dropping its filter and log.
    fn retire(&self, id: NodeId) -> Result<(), Infallible> {
        let mut guard = self.topo.write();
        let topo = &mut *guard;
        let Some(node) = topo.nodes.get_mut(id as usize) else { return Ok(()) };
        let Node::Splitting { depth, frozen, children } = node else { return Ok(()) };
        if !frozen.cursor.lock().is_done(&frozen.log) {
            return Ok(());
        }
        let inner = Node::Inner { depth: *depth, children: std::mem::take(children) };
        if let Node::Splitting { frozen, .. } = std::mem::replace(node, inner) {
            // The frozen index goes too (its runs' files with it): the children's indexes hold
            // everything now.
            let Frozen { filter, log, last_lsn, kept, .. } = *frozen;
            // A checkpoint that has yet to write this leaf writes it as it froze.
            if let Some(c) = self.capture.lock().as_mut()
                && c.pending.get(id as usize).copied().unwrap_or(false)
            {
                let (records, file_len) = (log.len(), log.file_len());
                c.retained.insert(id, Retained { filter, records, kept, file_len, last_lsn });
            }
            log.retire(&self.leaves);
        }
        if let Some(dir) = &mut topo.dir {
            dir.finish(id);
        }
        self.splits_done.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
