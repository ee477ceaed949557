//! Splits of a leaf in Redis: claiming a full leaf, migrating its log into its children in
//! steps any client can take over, retiring the parent, and helping splits another client
//! left stalled.

use std::cell::RefCell;

use super::*;
use urlseen_engine::dsbf::split::{self, Freeze, SplitHome, Stage, Step};

impl RedisNamespace {
    pub(super) fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Splits full leaf `leaf` (its parent's split first, if that is still under way), then
    /// the children of each split finished here that are full too, recording a failure in the
    /// counters instead of returning it.
    pub(super) fn split_quietly(&self, leaf: NodeId) {
        // Each node is tried at most twice (a leaf waiting for its parent once more after the
        // parent's split), so the walk ends whatever the replies.
        let (mut todo, mut tried) = (vec![leaf], Vec::new());
        while let Some(leaf) = todo.pop() {
            if tried.iter().filter(|&&t| t == leaf).count() >= 2 {
                continue;
            }
            tried.push(leaf);
            let (finished, outcome) = match self.try_split(leaf, None) {
                Ok(SplitOutcome::WaitingForParent) => match self.meta().parent(leaf) {
                    Some(p) => (p, self.try_split(p, None)),
                    None => (leaf, Ok(SplitOutcome::Busy)),
                },
                other => (leaf, other),
            };
            match outcome {
                // A child takes its share of the parent's whole log, which the batches that
                // filled the parent may have taken past its own split point, and in Redis a
                // child splits only once its parent is inner: no later write need come to it
                // (a restore's next chunks go elsewhere), so each is tried here (a child
                // below its split point is left as it is).
                Ok(SplitOutcome::Done) => {
                    if let Ok(meta) = self.refresh_meta()
                        && let Some(State::Inner(children)) = meta.node(finished).map(|n| &n.state)
                    {
                        todo.extend(children.iter().copied());
                    }
                }
                Err(e) => {
                    self.counters.split_errors.fetch_add(1, Ordering::Relaxed);
                    *self.last_error.lock() = Some(e.to_string());
                }
                Ok(_) => {}
            }
        }
    }

    /// At most every 200 ms: tries to finish splits whose worker may have died (a lock held by
    /// a live worker just makes this a no-op).
    pub(super) fn help_stalled_splits(&self) {
        let now = self.now_ms();
        let last = self.counters.last_help_ms.load(Ordering::Relaxed);
        if now < last + 200 {
            return;
        }
        self.counters.last_help_ms.store(now, Ordering::Relaxed);
        let stalled: Vec<NodeId> = self.meta().splitting().collect();
        for id in stalled {
            self.split_quietly(id);
        }
    }

    /// Runs the split of `id` to its end, waiting for another worker's lock (or its expiry).
    /// Without `strict`, it stops waiting as soon as the metadata shows `id` is no longer a leaf
    /// (a live worker published the split; writers can route around it).
    pub(super) fn help_split(&self, id: NodeId, strict: bool) -> Result<()> {
        let deadline = Instant::now() + self.config.lock_ttl * 2 + self.config.timeout;
        loop {
            match self.try_split(id, None)? {
                SplitOutcome::Done | SplitOutcome::NotFull | SplitOutcome::Stopped => return Ok(()),
                SplitOutcome::WaitingForParent => {
                    if let Some(p) = self.meta().parent(id) {
                        self.help_split(p, strict)?;
                    }
                }
                SplitOutcome::Busy => {
                    if Instant::now() > deadline {
                        return Err(Error::TooManyRetries {
                            rounds: 0,
                            why: format!("the split of node {id} stayed locked past its expiry"),
                        });
                    }
                    std::thread::sleep(Duration::from_millis(10));
                    let meta = self.refresh_meta()?;
                    if !strict && !matches!(meta.node(id).map(|n| &n.state), Some(State::Leaf)) {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Finishes every split in progress and splits every leaf past its split point, waiting
    /// for other workers' locks (or their expiry). Returns when the tree has no splitting node.
    ///
    /// # Errors
    /// Connection errors; [`Error::TooManyRetries`] if a lock outlives its expiry.
    pub fn complete_splits(&self) -> Result<()> {
        // Every step is idempotent (locks, cursors): retried whole on a transient failure.
        self.retrying(|| self.complete_splits_once())
    }

    fn complete_splits_once(&self) -> Result<()> {
        for _ in 0..MAX_ROUNDS {
            let meta = self.refresh_meta()?;
            let splitting: Vec<NodeId> = meta.splitting().collect();
            let leaves: Vec<NodeId> = meta.leaves().collect();
            let mut reqs = Vec::new();
            for &id in &leaves {
                reqs.push(Req { place: self.place(id), cmd: self.sync_cmd(id, 0, 0, &[]) });
            }
            let replies = self.router.exec(reqs)?;
            let mut todo = splitting;
            for (&id, reply) in leaves.iter().zip(&replies) {
                let SyncReply { state, len, .. } = match self.sync_reply(id, 0, reply)? {
                    Some(r) => r,
                    None => self.sync_one(id, 0, 0, &[])?,
                };
                if !state.is_empty()
                    || (len >= self.level(&meta, id).split_at
                        && self.options.split.mode != SplitMode::Never)
                {
                    todo.push(id);
                }
            }
            if todo.is_empty() {
                return Ok(());
            }
            for id in todo {
                self.help_split(id, true)?;
            }
        }
        Err(Error::TooManyRetries { rounds: MAX_ROUNDS, why: "splits kept cascading".into() })
    }

    /// Splits leaf `id` if it is past its split point (or resumes its split), under the node's
    /// lock. Does not wait for another worker.
    ///
    /// # Errors
    /// Connection errors; [`Error::Protocol`] if the split finds the data inconsistent.
    pub fn try_split(&self, id: NodeId, stop: Option<SplitStop>) -> Result<SplitOutcome> {
        let result = self.under_split_lock(
            id,
            |token| self.split_locked(id, token, stop),
            |outcome| matches!(outcome, SplitOutcome::Stopped),
        );
        let Some(result) = result.transpose() else { return Ok(SplitOutcome::Busy) };
        if matches!(result, Ok(SplitOutcome::Done)) {
            self.counters.splits_done.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    /// Runs `work` under leaf `id`'s split lock (a random token set with `NX` for the lock's
    /// TTL), the one lock a split and a forget of the leaf take; `Ok(None)` if another client
    /// holds it. The lock is released after, unless `work` returns an outcome that `keep`
    /// says holds on to it (a stopped split or forget leaves it to expire, as a crash would).
    pub(super) fn under_split_lock<T>(
        &self,
        id: NodeId,
        work: impl FnOnce(&str) -> Result<T>,
        keep: impl FnOnce(&T) -> bool,
    ) -> Result<Option<T>> {
        let token = format!("{:016x}", token());
        let mut lock = ::redis::cmd("SET");
        lock.arg(self.key(id, "lock"))
            .arg(token.as_str())
            .arg("NX")
            .arg("PX")
            .arg(self.config.lock_ttl.as_millis() as u64);
        if self.router.one(self.place(id), lock)? == Value::Nil {
            return Ok(None);
        }
        let result = work(&token);
        if matches!(&result, Ok(outcome) if keep(outcome)) {
            return result.map(Some);
        }
        let mut unlock = self.router.scripts.call(Script::Unlock, &[&self.key(id, "lock")]);
        unlock.arg(token.as_str());
        let unlocked = self.router.one(self.place(id), unlock);
        if result.is_ok() {
            unlocked?;
        }
        result.map(Some)
    }

    /// Runs a split of `id` and stops where `stop` says, keeping the lock as a worker that died
    /// there would. For tests of crash recovery.
    ///
    /// # Errors
    /// As [`Self::try_split`].
    #[cfg(any(test, feature = "testing"))]
    pub fn split_until(&self, id: NodeId, stop: SplitStop) -> Result<SplitOutcome> {
        self.try_split(id, Some(stop))
    }

    fn split_locked(
        &self,
        id: NodeId,
        token: &str,
        stop: Option<SplitStop>,
    ) -> Result<SplitOutcome> {
        split::run(&LockedSplit::new(self, token, stop, Kind::Split), id)
    }

    pub(super) fn retire_keys(&self, id: NodeId) -> Result<()> {
        let retire = self.router.scripts.call(
            Script::Retire,
            &[
                &self.key(id, "st"),
                &self.key(id, "log"),
                &self.key(id, "mig"),
                &self.key(id, "hosts"),
                &self.key(id, "id"),
            ],
        );
        self.router.one(self.place(id), retire)?;
        Ok(())
    }
}

/// What a [`LockedSplit`] is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A full leaf's split into `fanout` children.
    Split,
    /// A forget's rebuild of a leaf as its one child (frozen and published splitting by the
    /// forget itself, with the host hash to drop).
    Forget,
}

/// One node's split in Redis, run under the node's lock by [`split::run`]: the Redis home of
/// the split protocol. Each step is an idempotent script, so any client holding the lock can
/// take over where a dead one stopped; each child keeps its own migration cursor.
pub(super) struct LockedSplit<'a> {
    ns: &'a RedisNamespace,
    token: &'a str,
    stop: Option<SplitStop>,
    kind: Kind,
    /// The migration under way, read when its first step runs.
    migration: RefCell<Option<Migration>>,
}

/// Where a migration stands: which entries of the frozen log each child has.
struct Migration {
    meta: Arc<Meta>,
    depth: u32,
    children: Vec<NodeId>,
    /// How far each child's share of the log is in the child.
    cursors: Vec<u64>,
    /// Entries in the frozen log.
    total: u64,
    /// The next chunk's first entry.
    start: u64,
    /// The frozen log's host hashes, 4 bytes an entry (`None`: unknown).
    hosts: Option<Vec<u8>>,
    chunks: u64,
}

impl<'a> LockedSplit<'a> {
    pub(super) fn new(
        ns: &'a RedisNamespace,
        token: &'a str,
        stop: Option<SplitStop>,
        kind: Kind,
    ) -> Self {
        LockedSplit { ns, token, stop, kind, migration: RefCell::new(None) }
    }

    /// The migration of frozen node `id`, resumed from its children's cursors; `None` if the
    /// node is retired already.
    fn begin(&self, id: NodeId) -> Result<Option<Migration>> {
        let ns = self.ns;
        let meta = ns.refresh_meta()?;
        let node = meta.node(id).ok_or_else(|| ns.bad_meta(format!("no node {id}")))?;
        let children = match &node.state {
            State::Splitting(c) => c.clone(),
            State::Inner(_) => return Ok(None),
            State::Leaf => return Err(ns.bad_meta(format!("node {id} did not split"))),
        };
        let depth = node.depth;
        // Before anything is written into them (this metadata was read after they were made).
        ns.stamp_children(&meta, &children)?;
        let SyncReply { state, len: total, .. } = ns.sync_one(id, 0, 0, &[])?;
        match state.as_str() {
            "I" => return Ok(None),
            "F" => {}
            _ => return Err(ns.bad_meta(format!("splitting node {id} is not frozen"))),
        }
        // Where each child's share stands.
        let reqs = children
            .iter()
            .map(|&c| {
                let mut get = ::redis::cmd("GET");
                get.arg(ns.key(c, "mig"));
                Req { place: ns.place(c), cmd: get }
            })
            .collect();
        let cursors: Vec<u64> = ns
            .router
            .exec(reqs)?
            .iter()
            .map(|v| match v {
                Value::Nil => Some(0),
                Value::BulkString(b) => std::str::from_utf8(b).ok().and_then(|s| s.parse().ok()),
                _ => None,
            })
            .collect::<Option<_>>()
            .ok_or_else(|| ns.bad_meta(format!("bad migration cursor under node {id}")))?;
        // The parent's hosts (frozen too), carried to the children; a forget by host drops the
        // entries of its host. Unknown hosts (a short hosts string) stay unknown in the
        // children, and drop nothing.
        let (_, _, hosts) = ns.leaf_hosts(id)?;
        let hosts = (hosts.len() as u64 == total * 4).then_some(hosts);
        let start = cursors.iter().copied().min().unwrap_or(total);
        Ok(Some(Migration { meta, depth, children, cursors, total, start, hosts, chunks: 0 }))
    }
}

impl SplitHome for LockedSplit<'_> {
    type Error = Error;

    fn stage(&self, id: NodeId) -> Result<Stage> {
        let meta = self.ns.refresh_meta()?;
        let node = meta.node(id).ok_or_else(|| self.ns.bad_meta(format!("no node {id}")))?;
        Ok(match node.state {
            State::Leaf => Stage::Leaf,
            State::Splitting(_) => Stage::Splitting,
            State::Inner(_) => Stage::Inner,
        })
    }

    /// Freezes the leaf's state and log (no client appends to it from here), then publishes
    /// its children in the metadata. A leaf splits only after its parent is inner.
    fn freeze(&self, id: NodeId) -> Result<Freeze> {
        let ns = self.ns;
        if self.kind == Kind::Forget {
            // A forget freezes and publishes its leaf itself, before its migration.
            return Err(ns.bad_meta(format!("node {id} did not split")));
        }
        let meta = ns.meta();
        if let Some(p) = meta.parent(id)
            && matches!(meta.node(p).map(|n| &n.state), Some(State::Splitting(_)))
        {
            return Ok(Freeze::Not(SplitOutcome::WaitingForParent));
        }
        let SyncReply { state, len, .. } = ns.sync_one(id, 0, 0, &[])?;
        match state.as_str() {
            "" if len < ns.level_split_point(&ns.level(&meta, id)) => {
                return Ok(Freeze::Not(SplitOutcome::NotFull));
            }
            "I" => return Ok(Freeze::Not(SplitOutcome::Done)),
            _ => {}
        }
        let freeze = ns
            .router
            .scripts
            .call(Script::Freeze, &[&ns.key(id, "st"), &ns.key(id, "log"), &ns.key(id, "id")]);
        ns.router.one(ns.place(id), freeze)?;
        if self.stop == Some(SplitStop::AfterFreeze) {
            return Ok(Freeze::Not(SplitOutcome::Stopped));
        }
        let mut mark = ns.router.scripts.call(Script::MarkSplitting, &[&ns.meta_key()]);
        mark.arg(id).arg(ns.params.split.fanout);
        let rec = match ns.router.one(ns.meta_place(), mark)? {
            Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
            other => return Err(ns.protocol(id, "MARK_SPLITTING", &other)),
        };
        match meta::parse_node(&rec).map_err(|r| ns.bad_meta(r))?.state {
            State::Splitting(_) => Ok(Freeze::Frozen),
            State::Inner(_) => {
                ns.retire_keys(id)?;
                Ok(Freeze::Not(SplitOutcome::Done))
            }
            State::Leaf => Err(ns.bad_meta(format!("node {id} did not split"))),
        }
    }

    /// Re-hashes the next chunk of frozen node `id`'s log into its children (each child's
    /// share from its own cursor on), extending the node's lock first.
    fn migrate_step(&self, id: NodeId) -> Result<Step> {
        let ns = self.ns;
        let mut migration = self.migration.borrow_mut();
        if migration.is_none() {
            match self.begin(id)? {
                Some(m) => *migration = Some(m),
                None => return Ok(Step::Done),
            }
        }
        let Some(m) = migration.as_mut() else { return Ok(Step::Done) };
        let Migration { meta, depth, children, cursors, total, start, hosts, .. } = m;
        let (start, total) = (*start, *total);
        if start >= total {
            return Ok(Step::Done);
        }
        let drop_host = hosts.as_ref().and(meta.forget(id));
        let end = total.min(start + ns.config.migrate_chunk);
        let mut extend = ns.router.scripts.call(Script::Extend, &[&ns.key(id, "lock")]);
        extend.arg(self.token).arg(ns.config.lock_ttl.as_millis() as u64);
        ns.router.one(ns.place(id), extend)?;
        // No check entry: a frozen log does not change.
        let SyncReply { data, .. } = ns.sync_one(id, start, end - start, &[])?;
        if data.len() as u64 != (end - start) * 8 {
            return Err(ns.bad_meta(format!(
                "node {id}: migration read {} bytes of entries {start}..{end}",
                data.len()
            )));
        }
        let mut shares: Vec<Vec<u8>> = vec![Vec::new(); children.len()];
        let mut share_hosts: Vec<Vec<u8>> = vec![Vec::new(); children.len()];
        {
            // The parent's replica, made final on the way: readers of this process need it.
            let cell = ns.cell(id);
            let mut r = cell.replica.write();
            for (pos, c) in data.chunks_exact(8).enumerate() {
                let fp = u64_le(c);
                let at = ns.child_of(meta, id, *depth, fp, children.len())?;
                let entry = (start + pos as u64) as usize;
                let host = hosts.as_ref().and_then(|h| h.get(entry * 4..entry * 4 + 4));
                let dropped = drop_host.is_some_and(|d| host == Some(&d.to_le_bytes()[..]));
                if start + pos as u64 >= cursors[at] && !dropped {
                    shares[at].extend_from_slice(c);
                    share_hosts[at].extend_from_slice(host.unwrap_or_default());
                }
                if start + pos as u64 >= r.synced {
                    r.filter.insert(fp);
                }
            }
            if r.synced >= start
                && let Some(at) = data.len().checked_sub(8)
            {
                r.advance(end, &data[at..]);
            }
        }
        let mut reqs = Vec::new();
        let mut which = Vec::new();
        for (k, &child) in children.iter().enumerate() {
            if cursors[k] >= end {
                continue;
            }
            let mut m = ns.router.scripts.call(
                Script::Migrate,
                &[
                    &ns.key(child, "log"),
                    &ns.key(child, "mig"),
                    &ns.key(child, "st"),
                    &ns.key(child, "id"),
                    &ns.key(child, "hosts"),
                ],
            );
            m.arg(cursors[k].max(start))
                .arg(end)
                .arg(std::mem::take(&mut shares[k]))
                .arg(std::mem::take(&mut share_hosts[k]));
            reqs.push(Req { place: ns.place(child), cmd: m });
            which.push(k);
        }
        for (k, reply) in which.into_iter().zip(ns.router.exec(reqs)?) {
            match reply {
                Value::Int(0 | 1) => cursors[k] = end,
                other => return Err(ns.protocol(children[k], "MIGRATE", &other)),
            }
        }
        m.start = end;
        m.chunks += 1;
        if end >= total {
            return Ok(Step::Done);
        }
        if self.stop == Some(SplitStop::AfterChunks(m.chunks)) {
            return Ok(Step::Stopped);
        }
        Ok(Step::More)
    }

    /// Publishes the node inner in the metadata, then deletes its log, hosts and cursor.
    fn retire(&self, id: NodeId) -> Result<()> {
        let ns = self.ns;
        let mut mark = ns.router.scripts.call(Script::MarkInner, &[&ns.meta_key()]);
        mark.arg(id);
        ns.router.one(ns.meta_place(), mark)?;
        ns.retire_keys(id)?;
        ns.refresh_meta()?;
        Ok(())
    }
}
