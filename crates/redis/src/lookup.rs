//! Check-and-insert and lookups of a namespace in Redis: a batch is routed to its leaves, tested
//! against each leaf's replica, and its misses are sent to Redis in one script call per leaf
//! (see the crate docs, [`crate`]); and the [`SeenSet`](urlseen_engine::SeenSet) the crawler
//! uses.

use super::*;

/// One leaf's share of a batch round.
struct Group {
    leaf: NodeId,
    cell: Arc<LeafCell>,
    /// Batch positions routed here that the replica missed.
    idx: Vec<u32>,
    /// Distinct candidates sent, and the batch position that owns each.
    cands: Vec<u64>,
    /// The candidates' host hashes, 4 bytes little-endian each.
    hosts: Vec<u8>,
    owner: Vec<u32>,
    /// Later positions with a fingerprint already among `cands`: seen.
    dups: Vec<u32>,
}

impl RedisNamespace {
    /// Check-and-insert of many fingerprints; see [`SeenSet::seen_fingerprints`].
    pub(super) fn insert_batch(&self, fps: &[u64], hosts: &[u32], out: &mut [bool]) -> Result<()> {
        self.insert_batch_as(fps, hosts, out, false)
    }

    /// [`Self::insert_batch`]; `record`: every fingerprint is appended to its leaf's log unless
    /// the log already holds it (compared exactly, as for any candidate), even when a replica's
    /// filter (falsely) holds it, so that the splits that rebuild filters from the logs keep it
    /// (a restore of fingerprints known to be distinct). An unknown outcome is then an error.
    /// `hosts`: each fingerprint's host hash (listed in the host dictionary already), or empty
    /// (every host unknown).
    pub(super) fn insert_batch_as(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        record: bool,
    ) -> Result<()> {
        assert_eq!(fps.len(), out.len(), "seen_fingerprints: output slice length must match input");
        let host = |i: u32| hosts.get(i as usize).copied().unwrap_or(0);
        self.poll_meta()?;
        let mut pending: Vec<u32> = (0..fps.len() as u32).collect();
        let mut full: Vec<NodeId> = Vec::new();
        let mut parents = Vec::new();
        let mut rounds = 0;
        let mut why = String::new();
        let mut backoff = Backoff::new(&self.config, Some(&self.router));
        while !pending.is_empty() {
            rounds += 1;
            if rounds > MAX_ROUNDS {
                return Err(Error::TooManyRetries { rounds, why });
            }
            let meta = self.meta();
            self.retrying(|| self.ensure_parents(&meta))?;
            let mut by_leaf: BTreeMap<NodeId, Vec<u32>> = BTreeMap::new();
            for &i in &pending {
                let fp = fps[i as usize];
                parents.clear();
                let leaf = self.route(&meta, fp, &mut parents)?;
                if !record && parents.iter().any(|&p| self.parent_holds(p, fp)) {
                    out[i as usize] = true;
                    continue;
                }
                by_leaf.entry(leaf).or_default().push(i);
            }
            pending.clear();
            // First pass against the replicas, without holding the send locks.
            let mut groups: Vec<Group> = Vec::with_capacity(by_leaf.len());
            for (leaf, mut idx) in by_leaf {
                let cell = self.cell(leaf);
                {
                    let r = cell.replica.read();
                    idx.retain(|&i| {
                        let hit = !record && r.filter.contains(fps[i as usize]);
                        out[i as usize] = hit;
                        !hit
                    });
                }
                if !idx.is_empty() {
                    groups.push(Group {
                        leaf,
                        cell,
                        idx,
                        cands: Vec::new(),
                        hosts: Vec::new(),
                        owner: Vec::new(),
                        dups: Vec::new(),
                    });
                }
            }
            if groups.is_empty() {
                break;
            }
            // Through the gates (in leaf order, so no two batches wait on each other in a
            // cycle): check again, take `synced`, send.
            let cells: Vec<Arc<LeafCell>> = groups.iter().map(|g| Arc::clone(&g.cell)).collect();
            let limit = self.config.inflight_per_leaf;
            let guards: Vec<_> = cells.iter().map(|c| c.gate.enter(limit)).collect();
            let mut reqs = Vec::with_capacity(groups.len());
            let mut seen_here: HashMap<u64, ()> = HashMap::new();
            for g in &mut groups {
                let r = g.cell.replica.read();
                seen_here.clear();
                for &i in &g.idx {
                    let fp = fps[i as usize];
                    if !record && r.filter.contains(fp) {
                        out[i as usize] = true;
                    } else if seen_here.insert(fp, ()).is_some() {
                        g.dups.push(i);
                    } else {
                        g.cands.push(fp);
                        g.hosts.extend_from_slice(&host(i).to_le_bytes());
                        g.owner.push(i);
                    }
                }
                let mut blob = Vec::with_capacity(g.cands.len() * 8);
                for fp in &g.cands {
                    blob.extend_from_slice(&fp.to_le_bytes());
                }
                let mut cmd = self.router.scripts.call(
                    Script::Insert,
                    &[
                        &self.key(g.leaf, "log"),
                        &self.key(g.leaf, "st"),
                        &self.key(g.leaf, "id"),
                        &self.key(g.leaf, "hosts"),
                    ],
                );
                cmd.arg(r.synced)
                    .arg(blob)
                    .arg(self.config.max_delta)
                    .arg(r.last_covered())
                    .arg(self.epoch.as_str())
                    .arg(&g.hosts[..]);
                drop(r);
                reqs.push(Req { place: self.place(g.leaf), cmd });
            }
            self.counters.round_trips.fetch_add(reqs.len() as u64, Ordering::Relaxed);
            let replies =
                match self.router.try_exec(reqs) {
                    Ok(replies) => replies,
                    Err(Failed { error, maybe_ran: false }) => {
                        // Nothing of the round ran (no connection, or refused unrun): wait, then
                        // the same round again. Rounds before it stay decided.
                        drop(guards);
                        backoff.wait(error)?;
                        rounds -= 1;
                        for g in &groups {
                            pending.extend(&g.owner);
                            pending.extend(&g.dups);
                        }
                        continue;
                    }
                    Err(Failed { error, maybe_ran: true }) if error.is_transient() && !record => {
                        // Sent, and no reply: Redis may or may not have recorded the candidates.
                        // Sending them again would answer "seen" for those it did, and the caller
                        // would never fetch them: they are new (at least once, never lost). They
                        // are recorded by the next call; the replicas stay where they were (the
                        // next round trip's delta brings what did land).
                        let n: usize = groups.iter().map(|g| g.cands.len()).sum();
                        for g in &groups {
                            for &i in &g.owner {
                                out[i as usize] = false;
                            }
                            for &i in &g.dups {
                                out[i as usize] = true;
                            }
                        }
                        self.unrecorded.lock().extend(groups.iter().flat_map(|g| {
                            g.cands.iter().zip(&g.owner).map(|(&fp, &i)| (fp, host(i)))
                        }));
                        self.counters.unknown.fetch_add(n as u64, Ordering::Relaxed);
                        if self.config.log_retries {
                            eprintln!(
                                "urlseen: {error}; the outcome of {n} URLs is unknown: answered new"
                            );
                        }
                        return Ok(());
                    }
                    Err(f) => return Err(f.error),
                };
            let mut refresh = false;
            let mut stuck: Vec<NodeId> = Vec::new();
            let mut behind: Vec<NodeId> = Vec::new();
            let mut unclaimed: Vec<NodeId> = Vec::new();
            for (g, reply) in groups.iter().zip(&replies) {
                let items = match reply {
                    Value::Array(v) => v,
                    _ => return Err(self.protocol(g.leaf, "INSERT", reply)),
                };
                match items.first() {
                    Some(Value::Int(0)) => {
                        let [
                            _,
                            Value::Int(len),
                            Value::BulkString(flags),
                            Value::BulkString(delta),
                        ] = &items[..]
                        else {
                            return Err(self.protocol(g.leaf, "INSERT", reply));
                        };
                        if delta.len() % 8 != 0
                            || !(flags.is_empty() || flags.len() == g.cands.len())
                        {
                            return Err(self.protocol(g.leaf, "INSERT", reply));
                        }
                        self.counters.candidates.fetch_add(g.cands.len() as u64, Ordering::Relaxed);
                        let mut r = g.cell.replica.write();
                        for c in delta.chunks_exact(8) {
                            r.filter.insert(u64_le(c));
                        }
                        let mut appended = 0u64;
                        let mut last_appended = None;
                        for (j, (&fp, &i)) in g.cands.iter().zip(&g.owner).enumerate() {
                            let new = flags.get(j).is_none_or(|&f| f == b'0');
                            out[i as usize] = !new;
                            if new {
                                r.filter.insert(fp);
                                appended += 1;
                                last_appended = Some(fp);
                            }
                        }
                        let end = *len as u64 + appended;
                        // The log's entry at end - 1: the last candidate appended, or else the
                        // last of the delta (none of either: nothing new is covered).
                        match last_appended {
                            Some(fp) => r.advance(end, &fp.to_le_bytes()),
                            None => {
                                if let Some(at) = delta.len().checked_sub(8) {
                                    r.advance(end, &delta[at..]);
                                }
                            }
                        }
                        for &i in &g.dups {
                            out[i as usize] = true;
                        }
                        if end >= self.level(&meta, g.leaf).split_at && !full.contains(&g.leaf) {
                            full.push(g.leaf);
                        }
                    }
                    Some(Value::Int(1)) => {
                        // Frozen or retired: nothing written; re-route after a metadata refresh.
                        self.counters.rerouted.fetch_add(1, Ordering::Relaxed);
                        refresh = true;
                        if matches!(items.get(1), Some(Value::BulkString(s)) if s == b"F") {
                            stuck.push(g.leaf);
                        }
                        why = format!("leaf {} refused writes", g.leaf);
                        pending.extend(g.cands.iter().zip(&g.owner).map(|(_, &i)| i));
                        pending.extend(&g.dups);
                    }
                    Some(Value::Int(2)) => {
                        behind.push(g.leaf);
                        why = format!("replica of leaf {} far behind", g.leaf);
                        pending.extend(&g.owner);
                        pending.extend(&g.dups);
                    }
                    Some(Value::Int(3)) => {
                        let int = |at: usize| match items.get(at) {
                            Some(Value::Int(n)) => *n as u64,
                            _ => 0,
                        };
                        // Shorter than its count, or than our replica, or other entries.
                        let (now, recorded) = (int(1), int(2));
                        let had =
                            if recorded > now { recorded } else { g.cell.replica.read().synced };
                        return Err(self.lost_data(g.leaf, had, now));
                    }
                    Some(Value::Int(4)) => {
                        unclaimed.push(g.leaf);
                        why = format!("leaf {} unclaimed", g.leaf);
                        pending.extend(&g.owner);
                        pending.extend(&g.dups);
                    }
                    Some(Value::Int(5)) => {
                        let found = match items.get(1) {
                            Some(Value::BulkString(e)) => e.as_slice(),
                            _ => b"",
                        };
                        return Err(self.other_epoch(Some(g.leaf), found));
                    }
                    _ => return Err(self.protocol(g.leaf, "INSERT", reply)),
                }
            }
            drop(guards);
            for leaf in unclaimed {
                self.retrying(|| self.claim(leaf))?;
            }
            for leaf in behind {
                self.retrying(|| self.sync_node(leaf))?;
            }
            if refresh {
                let meta = self.retrying(|| self.refresh_meta())?;
                for leaf in stuck {
                    if matches!(meta.node(leaf).map(|n| &n.state), Some(State::Leaf)) {
                        // Frozen but not published: a split is starting, or its worker died
                        // after freezing. Wait for it or roll it forward.
                        self.retrying(|| self.help_split(leaf, false))?;
                    }
                }
            }
        }
        if self.options.split.mode != SplitMode::Never {
            for leaf in full {
                self.split_quietly(leaf);
            }
            self.help_stalled_splits();
        }
        Ok(())
    }

    /// Read-only lookup of many fingerprints; see [`SeenSet::contains_fingerprints`].
    pub(super) fn contains_batch(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        assert_eq!(
            fps.len(),
            out.len(),
            "contains_fingerprints: output slice length must match input"
        );
        self.poll_meta()?;
        let mut pending: Vec<u32> = (0..fps.len() as u32).collect();
        let mut parents = Vec::new();
        let mut rounds = 0;
        while !pending.is_empty() {
            rounds += 1;
            if rounds > MAX_ROUNDS {
                return Err(Error::TooManyRetries { rounds, why: "lookups kept moving".into() });
            }
            let meta = self.meta();
            self.ensure_parents(&meta)?;
            let mut misses: BTreeMap<NodeId, Vec<u32>> = BTreeMap::new();
            for &i in &pending {
                let fp = fps[i as usize];
                parents.clear();
                let leaf = self.route(&meta, fp, &mut parents)?;
                let hit = parents.iter().any(|&p| self.parent_holds(p, fp))
                    || self.cell(leaf).replica.read().filter.contains(fp);
                out[i as usize] = hit;
                if !hit {
                    misses.entry(leaf).or_default().push(i);
                }
            }
            pending.clear();
            // A miss is confirmed against the log as it is now.
            let mut moved = Vec::new();
            for (leaf, idx) in misses {
                let state = self.sync_node(leaf)?;
                if !state.is_empty() {
                    moved.push((leaf, idx, state));
                    continue;
                }
                let cell = self.cell(leaf);
                let r = cell.replica.read();
                for i in idx {
                    out[i as usize] = r.filter.contains(fps[i as usize]);
                }
            }
            if !moved.is_empty() {
                let meta = self.refresh_meta()?;
                for (leaf, idx, state) in moved {
                    let still_leaf = matches!(meta.node(leaf).map(|n| &n.state), Some(State::Leaf));
                    if state == "F" && still_leaf {
                        // Frozen, split not yet published: nothing can have been written to its
                        // children, and its log (read above, immutable now) is complete.
                        let cell = self.cell(leaf);
                        let r = cell.replica.read();
                        for i in idx {
                            out[i as usize] = r.filter.contains(fps[i as usize]);
                        }
                    } else {
                        pending.extend(idx);
                    }
                }
            }
        }
        Ok(())
    }
}

impl urlseen_engine::SeenSet for RedisNamespace {
    type Error = Error;

    fn fingerprint(&self, url: &str) -> Result<u64> {
        Ok(self.fingerprinter.fingerprint(url).map_err(urlseen_engine::Error::from)?)
    }

    fn fingerprint_host(&self, url: &str) -> Result<(u64, u32)> {
        let fp_host = self.fingerprinter.with_canonical(url, |canonical, fp| {
            let Some(host) = urlseen_engine::host::host_of(canonical) else { return (fp, 0) };
            let h = urlseen_engine::host::host_hash(host, self.options.seed);
            // Listed in Redis before any record carries `h`: by the insert that sends it.
            self.hosts.note(h, host);
            (fp, h)
        });
        Ok(fp_host.map_err(urlseen_engine::Error::from)?)
    }

    fn seen_fingerprints(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        self.seen_fingerprints_hosts(fps, &[], out)
    }

    fn seen_fingerprints_hosts(&self, fps: &[u64], hosts: &[u32], out: &mut [bool]) -> Result<()> {
        RedisNamespace::seen_fingerprints_hosts(self, fps, hosts, out)
    }

    fn seen(&self, url: &str) -> Result<bool> {
        let (fp, host) = self.fingerprint_host(url)?;
        let mut out = [false];
        self.seen_fingerprints_hosts(&[fp], &[host], &mut out)?;
        Ok(out[0])
    }

    fn seen_batch<S: AsRef<str>>(&self, urls: &[S]) -> Result<Vec<bool>> {
        let mut fps = Vec::with_capacity(urls.len());
        let mut hosts = Vec::with_capacity(urls.len());
        for u in urls {
            let (fp, h) = self.fingerprint_host(u.as_ref())?;
            fps.push(fp);
            hosts.push(h);
        }
        let mut out = vec![false; fps.len()];
        self.seen_fingerprints_hosts(&fps, &hosts, &mut out)?;
        Ok(out)
    }

    fn contains_fingerprints(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        // Read-only: running it again is harmless.
        self.retrying(|| self.contains_batch(fps, out))
    }
}
