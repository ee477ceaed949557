//! The one-pass batch insert: the common case of a check-and-insert, where no leaf is about to
//! split and at most one split is under way above any fingerprint's leaf.
//!
//! The general path ([`Dsbf::insert_batch_grouped`]) groups a batch by leaf and probes each
//! group on its own: with tens of leaves a batch of 4,096 gives each about a hundred
//! fingerprints, and each group starts its prefetch window cold, then pays the grouping, a lock
//! round and a log call of its own. Here a chunk is routed once through the directory, every
//! leaf it touches is locked (in node order, as the migrator locks several leaves, so no two
//! lockers of several leaves can deadlock), and one prefetching loop runs over the whole chunk
//! across the leaves' filters ([`BlockedBloom::insert_batch_routed`]). Then each fingerprint's
//! record goes to its leaf's log, and the chunk's records to the caller's hook in one call,
//! still under the locks: once another writer can see a fingerprint's bits, its record is in
//! the log, as on the general path.
//!
//! A fingerprint below a split under way (its leaf lies below a splitting node) is first
//! asked of the splitting node's frozen filter, in one batch per frozen filter, as the general
//! path asks: one it holds is answered "seen" and its bits are set in the leaf below (and, in
//! a tree that keeps positives, a kept record logged, see the module docs of [`super`]), the
//! others are answered by the loop like the rest. A tree that grew is splitting most of the time while it grows (its
//! leaves fill together), so this keeps those chunks here.
//!
//! A chunk goes to the general path instead (and the rest of its batch with it) when a leaf
//! has no room for its share (it is about to split), or when the directory does not name the
//! one splitting node above a fingerprint (two splits under way on its path, or one it does
//! not know: the walk down finds their frozen filters); so does every chunk of a tree routed
//! per level (no directory). Chunks of [`CHUNK`] bound how long the locks are held.

use urlseen_filter::BlockedBloom;

use crate::dsbf::routing;

use super::{Dsbf, Leaf, Logged, NodeId, OnNew, Topology, route};

/// Fingerprints per chunk: each chunk holds its leaves' locks for about as long as the general
/// path holds one leaf's for a batch of this size.
pub(super) const CHUNK: usize = 4096;

/// No slot yet: the leaf at this position is not touched by the chunk.
const NO_SLOT: u32 = u32::MAX;

/// The one-pass path's buffers, kept per thread with the rest of a batch's.
#[derive(Default)]
pub(super) struct Scratch {
    /// The slot (index into `touched`) of each fingerprint's leaf.
    route: Vec<u32>,
    /// The slot of the leaf at each directory position, or [`NO_SLOT`].
    slot_of: Vec<u32>,
    /// The leaves the chunk touches, by slot.
    touched: Vec<NodeId>,
    /// Fingerprints per slot.
    counts: Vec<u64>,
    /// The order in which the slots are locked (by node id).
    order: Vec<u32>,
    /// Where each slot's run starts in `new_fps` (its share of the chunk's positions).
    starts: Vec<u32>,
    /// While gathering: where the next new fingerprint of each slot goes in `new_fps`.
    next: Vec<u32>,
    /// The chunk's new fingerprints, a run per slot from its start, in batch order within
    /// each (and their host hashes, when the chunk has them).
    new_fps: Vec<u64>,
    new_hosts: Vec<u32>,
    /// The positions of the chunk's positives, when they are kept.
    positives: Vec<u32>,
    recorded: Vec<u64>,
    recorded_hosts: Vec<u32>,
    kept: Vec<u64>,
    kept_hosts: Vec<u32>,
    /// Fingerprints below a split under way: (splitting node, chunk position).
    asks: Vec<(NodeId, u32)>,
    ask_fps: Vec<u64>,
    ask_out: Vec<bool>,
    /// Chunk positions a frozen filter answered "seen".
    seen_above: Vec<u32>,
}

impl Scratch {
    /// How many of the last chunk's fingerprints were asked of a frozen filter, and how many
    /// of those it held.
    #[cfg(test)]
    pub(super) fn asked(&self) -> (usize, usize) {
        (self.asks.len(), self.seen_above.len())
    }

    pub(super) fn clear(&mut self) {
        self.route.clear();
        self.touched.clear();
        self.counts.clear();
        self.order.clear();
        self.recorded.clear();
        self.recorded_hosts.clear();
        self.kept.clear();
        self.kept_hosts.clear();
        self.asks.clear();
        self.seen_above.clear();
    }

    /// The most entries any of the buffers has room for.
    pub(super) fn capacity(&self) -> usize {
        [
            self.route.capacity(),
            self.slot_of.capacity(),
            self.touched.capacity(),
            self.counts.capacity(),
            self.order.capacity(),
            self.starts.capacity(),
            self.next.capacity(),
            self.new_fps.capacity(),
            self.new_hosts.capacity(),
            self.positives.capacity(),
            self.recorded.capacity(),
            self.recorded_hosts.capacity(),
            self.kept.capacity(),
            self.kept_hosts.capacity(),
            self.asks.capacity(),
            self.ask_fps.capacity(),
            self.ask_out.capacity(),
            self.seen_above.capacity(),
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
    }
}

impl Dsbf {
    /// Check-and-insert of one chunk in one pass (see the module docs): `None` if the chunk
    /// needs the general path (nothing was done then), otherwise what the hook returned.
    pub(super) fn insert_direct<E>(
        &self,
        (fps, hosts): (&[u64], &[u32]),
        out: &mut [bool],
        keep_positives: bool,
        s: &mut Scratch,
        on_new: &mut OnNew<'_, E>,
    ) -> Option<Result<(), E>> {
        s.clear();
        let minute = self.minute();
        let topo = self.topo.read();
        let dir = topo.dir.as_ref()?;
        // (A directory routes by ranges.)
        let seed = self.paths.range_seed()?;
        s.slot_of.clear();
        s.slot_of.resize(dir.leaf_count(), NO_SLOT);
        s.route.resize(fps.len(), 0);
        // Written by index, with the hash's seed in a local: a push per fingerprint (a call
        // the compiler cannot see through) made it load the tree's fields again each time.
        let (slot_of, touched, counts) = (&mut s.slot_of, &mut s.touched, &mut s.counts);
        for (i, (&fp, route)) in fps.iter().zip(s.route.iter_mut()).enumerate() {
            let (pos, frozen) = dir.position_below(routing::range_hash(fp, seed))?;
            if let Some(node) = frozen {
                s.asks.push((node, i as u32));
            }
            let mut slot = slot_of[pos];
            if slot == NO_SLOT {
                slot = touched.len() as u32;
                slot_of[pos] = slot;
                touched.push(dir.leaf_at(pos));
                counts.push(0);
            }
            counts[slot as usize] += 1;
            *route = slot;
        }
        if !s.asks.is_empty() {
            Self::ask_frozen_above(&topo, fps, s)?;
        }
        let mut leaves = self.lock_touched(&topo, s)?;
        let mut full = Vec::new();
        let result =
            self.insert_locked(&mut leaves, (fps, hosts), out, keep_positives, minute, s, on_new);
        for (slot, leaf) in leaves.iter().enumerate() {
            if leaf.fill() >= leaf.split_at() {
                full.push(s.touched[slot]);
            }
        }
        drop(leaves);
        drop(topo);
        for id in full {
            self.start_split(id);
        }
        Some(result)
    }

    /// Asks the frozen filters of the splits under way above the chunk's fingerprints in
    /// `s.asks`, in one batch per filter ([`route::ask_frozen`]); the chunk positions of those
    /// they hold go to `s.seen_above`. `None` if a node asked is not splitting (the directory
    /// is the topology's, so it cannot be).
    fn ask_frozen_above(topo: &Topology, fps: &[u64], s: &mut Scratch) -> Option<()> {
        s.asks.sort_unstable();
        for group in s.asks.chunk_by(|a, b| a.0 == b.0) {
            let at = group.iter().map(|&(_, i)| i);
            route::ask_frozen(topo, group[0].0, fps, at, (&mut s.ask_fps, &mut s.ask_out))?;
            s.seen_above.extend(
                group.iter().zip(&s.ask_out).filter(|&(_, &seen)| seen).map(|(&(_, i), _)| i),
            );
        }
        Some(())
    }

    /// Write-locks the leaves of `s.touched` in node order; `None` if one is not a leaf (it
    /// cannot be, under the topology lock) or has no room for its share of the chunk.
    fn lock_touched<'t>(
        &self,
        topo: &'t Topology,
        s: &mut Scratch,
    ) -> Option<Vec<parking_lot::RwLockWriteGuard<'t, Leaf>>> {
        s.order.extend(0..s.touched.len() as u32);
        s.order.sort_unstable_by_key(|&slot| s.touched[slot as usize]);
        let mut guards: Vec<Option<parking_lot::RwLockWriteGuard<'t, Leaf>>> =
            (0..s.touched.len()).map(|_| None).collect();
        for &slot in &s.order {
            let leaf = topo.leaf(s.touched[slot as usize])?.write();
            if leaf.split_at().saturating_sub(leaf.fill()) < s.counts[slot as usize] {
                return None;
            }
            guards[slot as usize] = Some(leaf);
        }
        guards.into_iter().collect()
    }

    /// The chunk's probes, records and log call, under the leaves' locks.
    #[allow(
        clippy::too_many_arguments,
        reason = "the chunk's state, passed apart to borrow it apart"
    )]
    fn insert_locked<E>(
        &self,
        leaves: &mut [parking_lot::RwLockWriteGuard<'_, Leaf>],
        (fps, hosts): (&[u64], &[u32]),
        out: &mut [bool],
        keep_positives: bool,
        minute: u32,
        s: &mut Scratch,
        on_new: &mut OnNew<'_, E>,
    ) -> Result<(), E> {
        {
            let mut filters: Vec<&mut BlockedBloom> =
                leaves.iter_mut().map(|leaf| &mut leaf.filter).collect();
            BlockedBloom::insert_batch_routed(&mut filters, &s.route, fps, out);
        }
        // What a frozen filter above holds is "seen", and kept below like any positive: the
        // frozen filter's positive may be false, and it goes when the split ends, so the leaf
        // takes the fingerprint's bits (above) and a kept record (below), as on the general
        // path.
        for &i in &s.seen_above {
            out[i as usize] = true;
        }
        // Each leaf's new fingerprints are gathered into a run of their own (a counting sort
        // by slot, batch order kept within each run), and each run goes to its leaf's log in
        // one append. In batch order, each record would land in another leaf's log, and with
        // tens of logs the writes outrun what the CPU's stream prefetchers track, so nearly
        // every new cache line of a log would be a miss; and a call per record cost more than
        // the probe (a profile of a grown tree's inserts).
        s.starts.clear();
        let mut at = 0;
        for &count in &s.counts {
            s.starts.push(at);
            at += count as u32;
        }
        s.next.clear();
        s.next.extend_from_slice(&s.starts);
        let with_hosts = !hosts.is_empty();
        s.new_fps.resize(fps.len(), 0);
        s.new_hosts.resize(if with_hosts { fps.len() } else { 0 }, 0);
        s.positives.resize(fps.len(), 0);
        let mut positives = 0;
        for (i, (&slot, (&fp, &seen))) in s.route.iter().zip(fps.iter().zip(out.iter())).enumerate()
        {
            // Written whatever the answer, kept (the cursor moves) only for a new one: no
            // branch on the answer, which a stream of repeats makes unpredictable.
            let next = &mut s.next[slot as usize];
            s.new_fps[*next as usize] = fp;
            if with_hosts {
                s.new_hosts[*next as usize] = hosts[i];
            }
            *next += u32::from(!seen);
            s.positives[positives] = i as u32;
            positives += usize::from(seen && keep_positives);
        }
        let mut added = 0;
        for (slot, leaf) in leaves.iter_mut().enumerate() {
            let run = s.starts[slot] as usize..s.next[slot] as usize;
            let run_hosts = with_hosts.then(|| &s.new_hosts[run.clone()]);
            self.record_run_in(leaf, &s.new_fps[run.clone()], run_hosts, minute);
            s.recorded.extend_from_slice(&s.new_fps[run.clone()]);
            match run_hosts {
                Some(run_hosts) => s.recorded_hosts.extend_from_slice(run_hosts),
                None => s.recorded_hosts.resize(s.recorded.len(), 0),
            }
            added += run.len() as u64;
        }
        for &i in &s.positives[..positives] {
            let i = i as usize;
            let leaf: &mut Leaf = &mut leaves[s.route[i] as usize];
            let host = hosts.get(i).copied().unwrap_or(0);
            self.keep_in(leaf, fps[i], host, minute, &mut (&mut s.kept, &mut s.kept_hosts));
        }
        self.len.fetch_add(added, std::sync::atomic::Ordering::Relaxed);
        if s.recorded.is_empty() && s.kept.is_empty() {
            return Ok(());
        }
        let lsn = on_new(&Logged {
            new: &s.recorded,
            new_hosts: &s.recorded_hosts,
            kept: &s.kept,
            kept_hosts: &s.kept_hosts,
        })?;
        // One log record holds the chunk, every touched leaf's share of it. (A leaf with no
        // share, all its fingerprints positives not kept, gets the later mark too: it still
        // holds every record of its own that ends before the mark, and none after.)
        for leaf in leaves.iter_mut() {
            leaf.last_lsn = leaf.last_lsn.max(lsn);
        }
        Ok(())
    }
}
