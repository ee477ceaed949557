//! Splits of a leaf in Redis: claiming a full leaf, migrating its log into its children in
//! steps any client can take over, retiring the parent, and helping splits another client
//! left stalled.

use super::*;

impl RedisNamespace {
    pub(super) fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    pub(super) fn split_quietly(&self, leaf: NodeId) {
        let outcome = match self.try_split(leaf, None) {
            Ok(SplitOutcome::WaitingForParent) => {
                let parent = self.meta().parent(leaf);
                match parent {
                    Some(p) => self.try_split(p, None),
                    None => Ok(SplitOutcome::Busy),
                }
            }
            other => other,
        };
        if let Err(e) = outcome {
            self.counters.split_errors.fetch_add(1, Ordering::Relaxed);
            *self.last_error.lock() = Some(e.to_string());
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
        let meta = self.refresh_meta()?;
        let node = meta.node(id).cloned().ok_or_else(|| self.bad_meta(format!("no node {id}")))?;
        let children = match node.state {
            State::Inner(_) => {
                self.retire(id)?;
                return Ok(SplitOutcome::Done);
            }
            State::Splitting(c) => c,
            State::Leaf => {
                if let Some(p) = meta.parent(id)
                    && matches!(meta.node(p).map(|n| &n.state), Some(State::Splitting(_)))
                {
                    return Ok(SplitOutcome::WaitingForParent);
                }
                let SyncReply { state, len, .. } = self.sync_one(id, 0, 0, &[])?;
                match state.as_str() {
                    "" if len < self.level_split_point(&self.level(&meta, id)) => {
                        return Ok(SplitOutcome::NotFull);
                    }
                    "I" => return Ok(SplitOutcome::Done),
                    _ => {}
                }
                let freeze = self
                    .router
                    .scripts
                    .call(Script::Freeze, &[&self.key(id, "st"), &self.key(id, "log")]);
                self.router.one(self.place(id), freeze)?;
                if stop == Some(SplitStop::AfterFreeze) {
                    return Ok(SplitOutcome::Stopped);
                }
                let mut mark = self.router.scripts.call(Script::MarkSplitting, &[&self.meta_key()]);
                mark.arg(id).arg(self.params.split.fanout);
                let rec = match self.router.one(self.meta_place(), mark)? {
                    Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
                    other => return Err(self.protocol(id, "MARK_SPLITTING", &other)),
                };
                match meta::parse_node(&rec).map_err(|r| self.bad_meta(r))?.state {
                    State::Splitting(c) => c,
                    State::Inner(_) => {
                        self.retire(id)?;
                        return Ok(SplitOutcome::Done);
                    }
                    State::Leaf => return Err(self.bad_meta(format!("node {id} did not split"))),
                }
            }
        };
        self.refresh_meta()?;
        if !self.migrate(id, node.depth, &children, token, stop)? {
            return Ok(SplitOutcome::Stopped);
        }
        let mut mark = self.router.scripts.call(Script::MarkInner, &[&self.meta_key()]);
        mark.arg(id);
        self.router.one(self.meta_place(), mark)?;
        self.retire(id)?;
        self.refresh_meta()?;
        Ok(SplitOutcome::Done)
    }

    pub(super) fn retire(&self, id: NodeId) -> Result<()> {
        let retire = self.router.scripts.call(
            Script::Retire,
            &[
                &self.key(id, "st"),
                &self.key(id, "log"),
                &self.key(id, "mig"),
                &self.key(id, "hosts"),
            ],
        );
        self.router.one(self.place(id), retire)?;
        Ok(())
    }

    /// Re-hashes frozen node `id`'s log into `children`, resuming from the children's cursors.
    /// Returns `false` if stopped by `stop`.
    pub(super) fn migrate(
        &self,
        id: NodeId,
        depth: u32,
        children: &[NodeId],
        token: &str,
        stop: Option<SplitStop>,
    ) -> Result<bool> {
        let SyncReply { state, len: total, .. } = self.sync_one(id, 0, 0, &[])?;
        match state.as_str() {
            "I" => return Ok(true),
            "F" => {}
            _ => return Err(self.bad_meta(format!("splitting node {id} is not frozen"))),
        }
        // Where each child's share stands.
        let reqs = children
            .iter()
            .map(|&c| {
                let mut get = ::redis::cmd("GET");
                get.arg(self.key(c, "mig"));
                Req { place: self.place(c), cmd: get }
            })
            .collect();
        let mut cursors: Vec<u64> = self
            .router
            .exec(reqs)?
            .iter()
            .map(|v| match v {
                Value::Nil => Some(0),
                Value::BulkString(b) => std::str::from_utf8(b).ok().and_then(|s| s.parse().ok()),
                _ => None,
            })
            .collect::<Option<_>>()
            .ok_or_else(|| self.bad_meta(format!("bad migration cursor under node {id}")))?;
        let meta = self.meta();
        // The parent's hosts (frozen too), carried to the children; a forget by host drops the
        // entries of its host. Unknown hosts (a short hosts string) stay unknown in the
        // children, and drop nothing.
        let (_, _, hosts) = self.leaf_hosts(id)?;
        let hosts = (hosts.len() as u64 == total * 4).then_some(hosts);
        let drop_host = hosts.as_ref().and(meta.forget(id));
        let mut start = cursors.iter().copied().min().unwrap_or(total);
        let mut chunks = 0;
        let cell = self.cell(id);
        while start < total {
            let end = total.min(start + self.config.migrate_chunk);
            let mut extend = self.router.scripts.call(Script::Extend, &[&self.key(id, "lock")]);
            extend.arg(token).arg(self.config.lock_ttl.as_millis() as u64);
            self.router.one(self.place(id), extend)?;
            // No check entry: a frozen log does not change.
            let SyncReply { data, .. } = self.sync_one(id, start, end - start, &[])?;
            if data.len() as u64 != (end - start) * 8 {
                return Err(self.bad_meta(format!(
                    "node {id}: migration read {} bytes of entries {start}..{end}",
                    data.len()
                )));
            }
            let mut shares: Vec<Vec<u8>> = vec![Vec::new(); children.len()];
            let mut share_hosts: Vec<Vec<u8>> = vec![Vec::new(); children.len()];
            {
                // The parent's replica, made final on the way: readers of this process need it.
                let mut r = cell.replica.write();
                for (pos, c) in data.chunks_exact(8).enumerate() {
                    let fp = u64_le(c);
                    let at = self.child_of(&meta, id, depth, fp, children.len())?;
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
                let mut m = self.router.scripts.call(
                    Script::Migrate,
                    &[
                        &self.key(child, "log"),
                        &self.key(child, "mig"),
                        &self.key(child, "st"),
                        &self.key(child, "id"),
                        &self.key(child, "hosts"),
                    ],
                );
                m.arg(cursors[k].max(start))
                    .arg(end)
                    .arg(std::mem::take(&mut shares[k]))
                    .arg(std::mem::take(&mut share_hosts[k]));
                reqs.push(Req { place: self.place(child), cmd: m });
                which.push(k);
            }
            for (k, reply) in which.into_iter().zip(self.router.exec(reqs)?) {
                match reply {
                    Value::Int(0 | 1) => cursors[k] = end,
                    other => return Err(self.protocol(children[k], "MIGRATE", &other)),
                }
            }
            start = end;
            chunks += 1;
            if stop == Some(SplitStop::AfterChunks(chunks)) && start < total {
                return Ok(false);
            }
        }
        Ok(true)
    }
}
