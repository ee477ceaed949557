//! Each client's replicas of the leaves it touches: a leaf's blocked filter built from the prefix
//! of its log the client has read, brought up to date from Redis (one script per leaf), and the
//! claims that make a new leaf's keys and the metadata agree.

use super::*;

/// A client-side copy of one node's filter, built from its log.
#[derive(Debug)]
pub(super) struct Replica {
    pub(super) filter: BlockedBloom,
    /// Log entries applied to `filter`.
    pub(super) synced: u64,
    /// What the last read of the node's state said.
    pub(super) state: LeafState,
    /// The log entry at `synced - 1` (as stored, 8 bytes), sent with every `INSERT` and `SYNC`
    /// so that Redis can tell a log that lost entries and grew again from the one this replica
    /// copies: a length alone cannot.
    pub(super) last: [u8; 8],
}

impl Replica {
    /// Records that the filter now holds the log up to `end`, whose last entry is `last`
    /// (`synced` only grows: another reply may have gone further). A replica is never reset: a
    /// log that lost entries is refused ([`Error::LostData`]), not read again.
    pub(super) fn advance(&mut self, end: u64, last: &[u8]) {
        if end > self.synced && last.len() == 8 {
            self.synced = end;
            self.last.copy_from_slice(last);
        }
    }

    /// The check sent with a request: the last entry covered, or nothing when none is.
    pub(super) fn last_covered(&self) -> &[u8] {
        if self.synced == 0 { &[] } else { &self.last }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LeafState {
    /// Taking writes (or not read yet).
    Active,
    /// Frozen, and `synced` is the whole (immutable) log.
    Final,
    /// Split finished: its entries are in the children.
    Retired,
}

#[derive(Debug)]
pub(super) struct LeafCell {
    pub(super) replica: RwLock<Replica>,
    /// Bounds this process's insert round trips in flight on this leaf. With one, threads
    /// never race each other on a leaf: each checks its candidates against the others'
    /// results in the replica, and Redis always takes the cheap path (no entries to compare).
    /// More overlap round trips at the price of that comparison (correct either way).
    pub(super) gate: Gate,
}

/// A counting semaphore.
#[derive(Debug, Default)]
pub(super) struct Gate {
    pub(super) busy: Mutex<usize>,
    pub(super) free: parking_lot::Condvar,
}

impl Gate {
    pub(super) fn enter(&self, limit: usize) -> GateGuard<'_> {
        let mut busy = self.busy.lock();
        while *busy >= limit.max(1) {
            self.free.wait(&mut busy);
        }
        *busy += 1;
        GateGuard(self)
    }
}

pub(super) struct GateGuard<'a>(&'a Gate);

impl Drop for GateGuard<'_> {
    fn drop(&mut self) {
        *self.0.busy.lock() -= 1;
        self.0.free.notify_one();
    }
}

/// A `SYNC` that read: the node's state (`""` active, `F` frozen, `I` retired), its log's
/// length, and the entries asked for.
pub(super) struct SyncReply {
    pub(super) state: String,
    pub(super) len: u64,
    pub(super) data: Vec<u8>,
}

impl RedisNamespace {
    /// Gives leaf `id` its identity, after the metadata confirms that it never had one (one
    /// that had is lost data, not a leaf to claim again). Idempotent: racing claimers agree.
    pub(super) fn claim(&self, id: NodeId) -> Result<()> {
        match self.claim_meta(id, false) {
            // Marked: lost, unless another client claimed it after our call was refused (it
            // marks only once the identity is written, so the identity is there now).
            Err(Error::LostData { lost: Lost::Leaf { .. }, .. }) => {
                let mut get = ::redis::cmd("HGET");
                get.arg(self.key(id, "id")).arg("epoch");
                return match self.router.one(self.place(id), get)? {
                    Value::BulkString(e) if e == self.epoch.as_bytes() => Ok(()),
                    Value::BulkString(e) => Err(self.other_epoch(Some(id), &e)),
                    _ => Err(self.lost(Lost::Leaf { leaf: id })),
                };
            }
            other => other?,
        }
        let known = self.cell(id).replica.read().synced;
        let mut cmd = self.router.scripts.call(
            Script::ClaimLeaf,
            &[&self.key(id, "id"), &self.key(id, "log"), &self.key(id, "st")],
        );
        cmd.arg(self.epoch.as_str()).arg(known);
        let reply = self.router.one(self.place(id), cmd)?;
        match &reply {
            Value::Array(v) => match &v[..] {
                [Value::Int(1)] => {}
                [Value::Int(0), Value::BulkString(e)] => return Err(self.other_epoch(Some(id), e)),
                [Value::Int(-1), Value::Int(len), Value::Int(known)] => {
                    return Err(self.lost_data(id, *known as u64, *len as u64));
                }
                _ => return Err(self.protocol(id, "CLAIM_LEAF", &reply)),
            },
            _ => return Err(self.protocol(id, "CLAIM_LEAF", &reply)),
        }
        self.claim_meta(id, true)
    }

    /// Checks (or, with `mark`, records) in the metadata that leaf `id` was claimed.
    pub(super) fn claim_meta(&self, id: NodeId, mark: bool) -> Result<()> {
        let mut cmd = self.router.scripts.call(Script::ClaimMeta, &[&self.meta_key()]);
        cmd.arg(self.epoch.as_str()).arg(id).arg(u8::from(mark));
        let reply = self.router.one(self.meta_place(), cmd)?;
        match &reply {
            Value::Array(v) => match &v[..] {
                [Value::Int(0)] => Ok(()),
                [Value::Int(1)] => Err(self.lost(Lost::Namespace)),
                [Value::Int(2), Value::BulkString(e)] => Err(self.other_epoch(None, e)),
                [Value::Int(3)] => Err(self.lost(Lost::Leaf { leaf: id })),
                _ => Err(self.protocol(id, "CLAIM_META", &reply)),
            },
            _ => Err(self.protocol(id, "CLAIM_META", &reply)),
        }
    }

    /// `SYNC` of node `id` from entry `from` (`last`: the entry before it, or empty), at most
    /// `max` entries.
    pub(super) fn sync_cmd(&self, id: NodeId, from: u64, max: u64, last: &[u8]) -> ::redis::Cmd {
        let mut cmd = self
            .router
            .scripts
            .call(Script::Sync, &[&self.key(id, "log"), &self.key(id, "st"), &self.key(id, "id")]);
        cmd.arg(from).arg(max).arg(last).arg(self.epoch.as_str());
        cmd
    }

    /// Reads a `SYNC` reply: the read, `None` if the node must be claimed first, or the lost
    /// data it shows.
    pub(super) fn sync_reply(
        &self,
        id: NodeId,
        from: u64,
        reply: &Value,
    ) -> Result<Option<SyncReply>> {
        let Value::Array(v) = reply else { return Err(self.protocol(id, "SYNC", reply)) };
        let (state, len, data, code) = match &v[..] {
            [Value::BulkString(s), Value::Int(len), Value::BulkString(d), Value::Int(code), ..] => {
                (String::from_utf8_lossy(s).into_owned(), *len as u64, d, *code)
            }
            _ => return Err(self.protocol(id, "SYNC", reply)),
        };
        match code {
            0 => {}
            1 => {
                let recorded = match v.get(4) {
                    Some(Value::Int(n)) => *n as u64,
                    _ => 0,
                };
                return Err(self.lost_data(id, if recorded > len { recorded } else { from }, len));
            }
            4 => return Ok(None),
            5 => return Err(self.other_epoch(Some(id), data)),
            _ => return Err(self.protocol(id, "SYNC", reply)),
        }
        if data.len() % 8 != 0 {
            return Err(self.protocol(id, "SYNC", reply));
        }
        Ok(Some(SyncReply { state, len, data: data.clone() }))
    }

    /// One `SYNC`, claiming the node first if it has no identity yet.
    pub(super) fn sync_one(
        &self,
        id: NodeId,
        from: u64,
        max: u64,
        last: &[u8],
    ) -> Result<SyncReply> {
        for _ in 0..3 {
            let reply = self.router.one(self.place(id), self.sync_cmd(id, from, max, last))?;
            if let Some(r) = self.sync_reply(id, from, &reply)? {
                return Ok(r);
            }
            self.claim(id)?;
        }
        Err(Error::TooManyRetries { rounds: 3, why: format!("node {id} stayed unclaimed") })
    }

    pub(super) fn cell(&self, id: NodeId) -> Arc<LeafCell> {
        if let Some(c) = self.leaves.read().get(&id) {
            return Arc::clone(c);
        }
        // Sized as the metadata says (any size would answer without false negatives: the
        // replica holds every entry it read; the node's own size gives the in-process tree's
        // answers and keeps the FPR bound).
        let level = self.level(&self.meta(), id);
        let mut leaves = self.leaves.write();
        Arc::clone(leaves.entry(id).or_insert_with(|| {
            Arc::new(LeafCell {
                replica: RwLock::new(Replica {
                    filter: BlockedBloom::new(level.bits, level.hashes, self.params.probe_seed()),
                    synced: 0,
                    state: LeafState::Active,
                    last: [0; 8],
                }),
                gate: Gate::default(),
            })
        }))
    }

    /// Bytes of the replicas' filters this client holds.
    pub(super) fn replica_bytes(&self) -> u64 {
        self.leaves.read().values().map(|c| c.replica.read().filter.memory_bytes() as u64).sum()
    }

    /// Reads node `id`'s log from its replica's `synced` on, up to `max` entries, into the
    /// replica. Returns the node's state string and log length.
    pub(super) fn sync_step(&self, id: NodeId, cell: &LeafCell, max: u64) -> Result<(String, u64)> {
        let (from, last) = {
            let r = cell.replica.read();
            (r.synced, r.last_covered().to_vec())
        };
        let SyncReply { state, len, data } = self.sync_one(id, from, max, &last)?;
        if from < len && data.is_empty() {
            return Err(Error::Protocol {
                node: format!("(leaf {id} of {})", self.name),
                what: "SYNC",
                reply: format!("no entries from {from} of {len}"),
            });
        }
        if len < from && state.is_empty() {
            // A log shorter than what we held when we asked (compared with `from`, not the
            // current `synced`, which another thread's reply may have advanced since): Redis
            // lost entries. Refuse, never re-answer.
            return Err(self.lost_data(id, from, len));
        }
        let mut r = cell.replica.write();
        for c in data.chunks_exact(8) {
            r.filter.insert(u64_le(c));
        }
        // The replica held [0, from) at least, and now [from, from + n) too.
        if let Some(last) = data.len().checked_sub(8).map(|at| &data[at..]) {
            r.advance(from + (data.len() / 8) as u64, last);
        }
        Ok((state, len))
    }

    /// Brings node `id`'s replica up to the log's current end. Returns its state string.
    pub(super) fn sync_node(&self, id: NodeId) -> Result<String> {
        let cell = self.cell(id);
        loop {
            let (state, len) = self.sync_step(id, &cell, self.config.max_delta)?;
            let synced = cell.replica.read().synced;
            if synced >= len || state == "I" {
                let mut r = cell.replica.write();
                r.state = match state.as_str() {
                    "F" => LeafState::Final,
                    "I" => LeafState::Retired,
                    _ => LeafState::Active,
                };
                return Ok(state);
            }
        }
    }

    /// Makes the replicas of every splitting node final (their logs are frozen, so one full
    /// read suffices).
    pub(super) fn ensure_parents(&self, meta: &Meta) -> Result<()> {
        for id in meta.splitting() {
            let cell = self.cell(id);
            if cell.replica.read().state == LeafState::Active {
                let state = self.sync_node(id)?;
                if state.is_empty() {
                    return Err(self.bad_meta(format!("node {id} is splitting but not frozen")));
                }
            }
        }
        Ok(())
    }

    /// Whether a splitting parent's frozen filter holds `fp` (false once it is retired: its
    /// entries are in the children then).
    pub(super) fn parent_holds(&self, id: NodeId, fp: u64) -> bool {
        let cell = self.cell(id);
        let r = cell.replica.read();
        r.state == LeafState::Final && r.filter.contains(fp)
    }
}
