//! The general batch path: a batch grouped by leaf, each group probed under its leaf's lock, a
//! frozen filter on a fingerprint's path asked in one go, exact mode's positives confirmed
//! against the leaf indexes, and positives kept (see the module docs of [`super`]). The
//! common case, a check-and-insert with no leaf about to split, takes the one-pass path
//! (`direct`) instead, below a split under way too.
use super::{
    AtomicU64, Dsbf, ExactHooks, Found, GROUP_CHUNK, Leaf, LeafRecord, Logged, Mode, Node, NodeId,
    OnNew, Ordering, ROOT, Route, SCRATCH_KEEP_MAX, SEEN_ABOVE, SplitMode, Topology, Walk, direct,
    group_by_node, hash, route,
};

/// Fingerprints logged as kept, and their host hashes.
pub(super) type KeptList<'a> = (&'a mut Vec<u64>, &'a mut Vec<u32>);

/// The shared state of one round of a batch insert.
pub(super) struct Groups<'a, 'x, 'h, 'o, E> {
    fps: &'a [u64],
    /// The host hash of each of `fps` (empty: all unknown).
    hosts: &'a [u32],
    out: &'a mut [bool],
    mode: Mode,
    pending: &'a mut Vec<u32>,
    full: &'a mut Vec<NodeId>,
    recorded: &'a mut Vec<u64>,
    /// Their host hashes.
    recorded_hosts: &'a mut Vec<u32>,
    /// Fingerprints logged as kept this round.
    kept: &'a mut Vec<u64>,
    /// Their host hashes.
    kept_hosts: &'a mut Vec<u32>,
    /// Whether a positive is logged as kept (see the module docs).
    keep_positives: bool,
    /// The batch's coarse time, stamped on every record.
    minute: u32,
    /// Bloom positives of this round (exact mode only).
    positives: &'a mut Vec<u32>,
    exact: Option<&'x mut ExactHooks<'h>>,
    /// The caller's hook for recorded fingerprints (the log append), called under the leaf's
    /// lock: once another writer can see a fingerprint's bits, its record is in the log.
    on_new: &'o mut OnNew<'o, E>,
    failed: Option<E>,
}

/// The working buffers of one batch insert, kept per thread between batches: a batch of 4,096
/// otherwise allocates about ten vectors and grows the answer lists by doubling, and its
/// stores then go to memory that is cold each time (a profile of `grown_rounds` put about a
/// third of `insert_group`'s samples on the appends to freshly grown lists).
#[derive(Default)]
pub(super) struct BatchScratch {
    pending: Vec<u32>,
    routed: Vec<(NodeId, u32)>,
    sorted: Vec<(NodeId, u32)>,
    recorded: Vec<u64>,
    recorded_hosts: Vec<u32>,
    kept: Vec<u64>,
    kept_hosts: Vec<u32>,
    positives: Vec<u32>,
    /// Fingerprints whose frozen filter is asked in a batch: (splitting node, batch position,
    /// leaf below).
    asks: Vec<(NodeId, u32, NodeId)>,
    ask_fps: Vec<u64>,
    ask_out: Vec<bool>,
    /// The one-pass path's (see `direct`).
    direct: direct::Scratch,
}

impl BatchScratch {
    /// This thread's buffers, emptied (fresh ones if a batch on this thread holds them: the
    /// `on_new` hook may insert into another tree).
    pub(super) fn take() -> Self {
        let mut s = BATCH_SCRATCH.with(std::cell::Cell::take);
        s.pending.clear();
        s.routed.clear();
        s.sorted.clear();
        s.recorded.clear();
        s.recorded_hosts.clear();
        s.kept.clear();
        s.kept_hosts.clear();
        s.positives.clear();
        s.asks.clear();
        s.direct.clear();
        s
    }

    /// Hands the buffers back to this thread, unless a large batch grew them.
    pub(super) fn give_back(self) {
        let largest = [
            self.pending.capacity(),
            self.routed.capacity(),
            self.sorted.capacity(),
            self.recorded.capacity(),
            self.recorded_hosts.capacity(),
            self.kept.capacity(),
            self.kept_hosts.capacity(),
            self.positives.capacity(),
            self.asks.capacity(),
            self.ask_fps.capacity(),
            self.ask_out.capacity(),
            self.direct.capacity(),
        ];
        if largest.iter().all(|&c| c <= SCRATCH_KEEP_MAX) {
            BATCH_SCRATCH.with(|cell| cell.set(self));
        }
    }
}

thread_local! {
    static BATCH_SCRATCH: std::cell::Cell<BatchScratch> =
        std::cell::Cell::new(BatchScratch::default());
}

impl Dsbf {
    pub(super) fn insert_batch_core<E>(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        mode: Mode,
        exact: Option<&mut ExactHooks<'_>>,
        on_new: &mut OnNew<'_, E>,
    ) -> Result<(), E> {
        assert_eq!(fps.len(), out.len(), "insert_batch: output slice length must match input");
        assert!(fps.len() < SEEN_ABOVE as usize, "insert_batch: at most 2^31 - 1 fingerprints");
        assert!(hosts.is_empty() || hosts.len() == fps.len(), "insert_batch: one host per fp");
        // Exact mode confirms every positive instead: a false one is recorded as new. Whether
        // the tree keeps positives at all is its own (see `Dsbf::keeps_positives`).
        let keep_positives =
            mode == Mode::CheckAndInsert && exact.is_none() && self.keeps_positives();
        let mut buffers = BatchScratch::take();
        let mut start = 0;
        if mode == Mode::CheckAndInsert && exact.is_none() {
            // The common case: chunk by chunk in one pass (see `direct`), until a chunk needs
            // the general path below.
            while start < fps.len() {
                let end = (start + direct::CHUNK).min(fps.len());
                let chunk = (&fps[start..end], hosts.get(start..end).unwrap_or(&[]));
                match self.insert_direct(
                    chunk,
                    &mut out[start..end],
                    keep_positives,
                    &mut buffers.direct,
                    on_new,
                ) {
                    None => break,
                    Some(Err(e)) => {
                        buffers.give_back();
                        return Err(e);
                    }
                    Some(Ok(())) => start = end,
                }
            }
        }
        let result = match start < fps.len() {
            true => self.insert_batch_grouped(
                (&fps[start..], hosts.get(start..).unwrap_or(&[])),
                &mut out[start..],
                mode,
                keep_positives,
                exact,
                on_new,
                &mut buffers,
            ),
            false => Ok(()),
        };
        buffers.give_back();
        result
    }

    /// The general path of [`Self::insert_batch_core`]: groups the batch by leaf, asks frozen
    /// filters on the way, and re-routes what a leaf that filled could not take.
    #[allow(
        clippy::too_many_arguments,
        reason = "the batch's state, passed apart to borrow it apart"
    )]
    pub(super) fn insert_batch_grouped<E>(
        &self,
        (fps, hosts): (&[u64], &[u32]),
        out: &mut [bool],
        mode: Mode,
        keep_positives: bool,
        mut exact: Option<&mut ExactHooks<'_>>,
        on_new: &mut OnNew<'_, E>,
        buffers: &mut BatchScratch,
    ) -> Result<(), E> {
        let check_frozen = mode == Mode::CheckAndInsert;
        let BatchScratch {
            pending,
            routed,
            sorted: scratch,
            recorded,
            recorded_hosts,
            kept,
            kept_hosts,
            positives,
            asks,
            ask_fps,
            ask_out,
            direct: _,
        } = buffers;
        pending.extend(0..fps.len() as u32);
        routed.reserve(fps.len());
        recorded.reserve(fps.len());
        recorded_hosts.reserve(fps.len());
        let mut hooked = Ok(());
        let minute = self.minute();
        // (Exact mode confirms every positive, a frozen filter's too.)
        let waits_for_splits = exact.is_none() && self.params.split.mode == SplitMode::Background;
        while !pending.is_empty() {
            let mut full = Vec::new();
            {
                let topo = self.topo.read();
                routed.clear();
                positives.clear();
                for &i in pending.iter() {
                    let fp = fps[(i & !SEEN_ABOVE) as usize];
                    if i & SEEN_ABOVE != 0 {
                        // Answered already; on its way to be kept in its leaf.
                        match self.walk(&topo, fp, false) {
                            Walk::Leaf(id) => routed.push((id, i)),
                            Walk::Seen => unreachable!("walk without frozen checks ends at a leaf"),
                        }
                        continue;
                    }
                    let walked = if check_frozen {
                        match self.route_or_ask(&topo, fp) {
                            Route::Ask { frozen, leaf } => {
                                // Asked below, in one batch per frozen filter.
                                asks.push((frozen, i, leaf));
                                continue;
                            }
                            Route::Done(walked) => walked,
                        }
                    } else {
                        self.walk(&topo, fp, false)
                    };
                    match walked {
                        Walk::Seen if keep_positives => {
                            out[i as usize] = true;
                            // A frozen filter's positive may be false, and that filter goes
                            // when the split ends: the leaf below keeps it.
                            match self.walk(&topo, fp, false) {
                                Walk::Leaf(id) => routed.push((id, i | SEEN_ABOVE)),
                                Walk::Seen => {
                                    unreachable!("walk without frozen checks ends at a leaf")
                                }
                            }
                        }
                        Walk::Seen => {
                            out[i as usize] = true;
                            positives.push(i);
                        }
                        Walk::Leaf(id) => routed.push((id, i)),
                    }
                }
                if !asks.is_empty() {
                    // During a split wave most of a batch passes a frozen filter: asked one at a
                    // time, each is a cache miss the batch waits for; asked as one batch per
                    // filter, the filter prefetches them. Ordered by node, then batch position,
                    // so each leaf still sees its fingerprints in batch order.
                    asks.sort_unstable();
                    for group in asks.chunk_by(|a, b| a.0 == b.0) {
                        let at = group.iter().map(|&(_, i, _)| i);
                        if route::ask_frozen(&topo, group[0].0, fps, at, (ask_fps, ask_out))
                            .is_none()
                        {
                            unreachable!("the directory names a splitting node")
                        }
                        for (&(_, i, leaf), &seen) in group.iter().zip(ask_out.iter()) {
                            if !seen {
                                routed.push((leaf, i));
                                continue;
                            }
                            out[i as usize] = true;
                            if keep_positives {
                                // As above: the leaf below keeps it.
                                routed.push((leaf, i | SEEN_ABOVE));
                            } else {
                                positives.push(i);
                            }
                        }
                    }
                    asks.clear();
                }
                pending.clear();
                recorded.clear();
                recorded_hosts.clear();
                kept.clear();
                kept_hosts.clear();
                group_by_node(routed, topo.nodes.len(), scratch);
                let mut groups = Groups {
                    fps,
                    hosts,
                    out,
                    mode,
                    pending: &mut *pending,
                    full: &mut full,
                    recorded: &mut *recorded,
                    recorded_hosts: &mut *recorded_hosts,
                    kept: &mut *kept,
                    kept_hosts: &mut *kept_hosts,
                    keep_positives,
                    minute,
                    positives: &mut *positives,
                    exact: if hooked.is_ok() { exact.as_deref_mut() } else { None },
                    on_new: &mut *on_new,
                    failed: None,
                };
                // A leaf another writer holds is skipped and visited after the free ones, so
                // concurrent batches work side by side instead of queueing on the same lock.
                let mut busy: Vec<&[(NodeId, u32)]> = Vec::new();
                for group in routed.chunk_by(|a, b| a.0 == b.0) {
                    let Some(cell) = topo.leaf(group[0].0) else { continue };
                    match cell.try_write() {
                        Some(mut leaf) => self.insert_group(&mut leaf, group, &mut groups),
                        None => busy.push(group),
                    }
                }
                for group in busy {
                    let Some(cell) = topo.leaf(group[0].0) else { continue };
                    self.insert_group(&mut cell.write(), group, &mut groups);
                }
                let failed = groups.failed.take();
                let hooks = groups.exact.take();
                if let Some(e) = failed {
                    hooked = Err(e);
                }
                if let Some(hooks) = hooks
                    && hooked.is_ok()
                {
                    hooked = self.confirm_positives(
                        &topo,
                        (fps, hosts),
                        out,
                        positives,
                        hooks,
                        &mut full,
                        on_new,
                    );
                }
            }
            for id in full {
                self.start_split(id);
            }
            if !pending.is_empty() && waits_for_splits {
                // What a full leaf deferred is answered once its split has ended, by leaves
                // that hold all it held. Routed again at once, it would be asked of the frozen
                // filter, and if the child it reaches fills too, of the next one: each at up
                // to its split point's FPR, so a batch that grows the tree many times over
                // answered up to 20% of its new URLs "seen".
                self.complete_splits();
            }
        }
        hooked
    }

    /// Inserts one leaf's share of a batch, up to the leaf's split point; what does not fit goes
    /// back to `pending` (re-routed after the split), and a leaf that filled goes to `full`.
    /// Entries seen above (flagged [`SEEN_ABOVE`]) take no room: they are only kept.
    pub(super) fn insert_group<E>(
        &self,
        leaf: &mut Leaf,
        group: &[(NodeId, u32)],
        g: &mut Groups<'_, '_, '_, '_, E>,
    ) {
        let mut room = leaf.split_at().saturating_sub(leaf.fill());
        let first_recorded = g.recorded.len();
        let first_kept = g.kept.len();
        let mut added = 0;
        let mut chunk_idx = [0u32; GROUP_CHUNK];
        let mut chunk_fps = [0u64; GROUP_CHUNK];
        let mut chunk_was = [false; GROUP_CHUNK];
        let mut entries = group.iter().map(|&(_, i)| i).peekable();
        while entries.peek().is_some() {
            let mut n = 0;
            for i in entries.by_ref() {
                if i & SEEN_ABOVE == 0 {
                    if room == 0 {
                        g.pending.push(i);
                        continue;
                    }
                    room -= 1;
                }
                chunk_idx[n] = i;
                chunk_fps[n] = g.fps[(i & !SEEN_ABOVE) as usize];
                n += 1;
                if n == GROUP_CHUNK {
                    break;
                }
            }
            leaf.filter.insert_batch(&chunk_fps[..n], &mut chunk_was[..n]);
            for ((&i, &fp), &was) in chunk_idx[..n].iter().zip(&chunk_fps[..n]).zip(&chunk_was[..n])
            {
                let host = g.hosts.get((i & !SEEN_ABOVE) as usize).copied().unwrap_or(0);
                if i & SEEN_ABOVE != 0 {
                    // Answered "seen" by a frozen filter above.
                    self.keep_in(leaf, fp, host, g.minute, &mut (g.kept, g.kept_hosts));
                    continue;
                }
                g.out[i as usize] = was;
                if g.mode == Mode::Keep {
                    self.record_in(leaf, LeafRecord::kept(fp, g.minute).with_host(host));
                    g.kept.push(fp);
                    g.kept_hosts.push(host);
                } else if !was || g.mode == Mode::Record {
                    self.record_in(leaf, LeafRecord::new(fp, g.minute).with_host(host));
                    g.recorded.push(fp);
                    g.recorded_hosts.push(host);
                    added += 1;
                } else if g.keep_positives {
                    self.keep_in(leaf, fp, host, g.minute, &mut (g.kept, g.kept_hosts));
                } else if g.exact.is_some()
                    && !leaf.index.as_ref().is_some_and(|index| index.in_tail(fp))
                {
                    // A positive the leaf recorded lately is decided here, under the lock
                    // already held; the rest wait for `confirm_positives`.
                    g.positives.push(i);
                }
            }
        }
        self.len.fetch_add(added, Ordering::Relaxed);
        let logged = Logged {
            new: &g.recorded[first_recorded..],
            new_hosts: &g.recorded_hosts[first_recorded..],
            kept: &g.kept[first_kept..],
            kept_hosts: &g.kept_hosts[first_kept..],
        };
        if g.failed.is_none() && (!logged.new.is_empty() || !logged.kept.is_empty()) {
            match (g.on_new)(&logged) {
                Ok(lsn) => leaf.last_lsn = leaf.last_lsn.max(lsn),
                Err(e) => g.failed = Some(e),
            }
        }
        if leaf.fill() >= leaf.split_at() {
            g.full.push(group[0].0);
        }
    }

    /// Logs `fp`, answered "seen" on a positive that may be false, as kept in `leaf` (see the
    /// module docs), unless the table of fingerprints kept lately has it.
    pub(super) fn keep_in(
        &self,
        leaf: &mut Leaf,
        fp: u64,
        host: u32,
        minute: u32,
        kept: &mut KeptList<'_>,
    ) {
        let table = self
            .kept_cache
            .get_or_init(|| (0..self.kept_slots).map(|_| AtomicU64::new(0)).collect());
        let slot = &table[(hash::mix64(fp) as usize) & (table.len() - 1)];
        // 0 marks an empty slot, so fingerprint 0 is always logged.
        if fp != 0 && slot.load(Ordering::Relaxed) == fp {
            return;
        }
        self.record_in(leaf, LeafRecord::kept(fp, minute).with_host(host));
        kept.0.push(fp);
        kept.1.push(host);
        // Under the leaf's lock, which any later check of `fp` takes too, and which is held
        // until the log has the record: one who finds `fp` here finds its record logged.
        slot.store(fp, Ordering::Relaxed);
    }

    /// Exact mode: decides every Bloom positive of a round (see [`Self::insert_batch_exact`]),
    /// and records the false ones, all under the caller's topology lock, so no split can finish
    /// in between and leave a recorded fingerprint out of the children.
    #[allow(
        clippy::too_many_arguments,
        reason = "the round's state, passed apart to borrow it apart"
    )]
    pub(super) fn confirm_positives<E>(
        &self,
        topo: &Topology,
        (fps, hosts): (&[u64], &[u32]),
        out: &mut [bool],
        positives: &[u32],
        hooks: &mut ExactHooks<'_>,
        full: &mut Vec<NodeId>,
        on_new: &mut OnNew<'_, E>,
    ) -> Result<(), E> {
        for &i in positives {
            let fp = fps[i as usize];
            if (hooks.cached)(fp) {
                continue;
            }
            // Down the path: a splitting node's frozen index holds what its frozen filter
            // does, the leaf's index what the leaf recorded (its own and what migrated in).
            // Only what took reads to find is worth the cache: the tails hold the recent rest.
            let mut learn = |found: Found| match found {
                Found::No => false,
                Found::Tail => true,
                Found::Run => {
                    (hooks.learn)(fp);
                    true
                }
            };
            let mut id = ROOT;
            let mut x = self.route_hash(fp);
            let mut found = Found::No;
            while let Some((depth, children)) = match &topo.nodes[id as usize] {
                Node::Leaf { .. } => None,
                Node::Inner { depth, children } => Some((*depth, children)),
                Node::Splitting { depth, frozen, children } => {
                    if frozen.filter.contains(fp) {
                        found = self.index_find(frozen.index.as_ref(), fp);
                    }
                    Some((*depth, children))
                }
            } {
                if found != Found::No {
                    break;
                }
                id = children[self.route(&mut x, fp, depth, children.len())];
            }
            if learn(found) {
                continue;
            }
            let Some(cell) = topo.leaf(id) else { continue };
            let mut leaf = cell.write();
            // Under the leaf's lock: a writer that recorded `fp` meanwhile put it in the index
            // before it let go of the lock.
            if leaf.filter.contains(fp) && learn(self.index_find(leaf.index.as_ref(), fp)) {
                continue;
            }
            out[i as usize] = false;
            // Recorded even though the filter (falsely) may hold it already: the log is what
            // a split carries into the children. It may take the leaf a little past its split
            // point; the split that follows is as correct as any other.
            leaf.filter.insert(fp);
            let host = hosts.get(i as usize).copied().unwrap_or(0);
            self.record_in(&mut leaf, LeafRecord::new(fp, self.minute()).with_host(host));
            self.len.fetch_add(1, Ordering::Relaxed);
            let lsn = on_new(&Logged {
                new: std::slice::from_ref(&fp),
                new_hosts: std::slice::from_ref(&host),
                kept: &[],
                kept_hosts: &[],
            })?;
            leaf.last_lsn = leaf.last_lsn.max(lsn);
            if leaf.fill() >= leaf.split_at() && !full.contains(&id) {
                full.push(id);
            }
        }
        Ok(())
    }
}
