//! Forgetting a host on Redis: every record keeps its host hash in a parallel per-leaf string,
//! a per-namespace host dictionary guards against shared hashes, and a leaf is never rewritten
//! in place: it is frozen and rebuilt as a new leaf without the host's entries, through the
//! split machinery (a split into one child whose migration drops them); clients poll the
//! metadata's version so that their replicas of retired leaves stop answering. See
//! `docs/forget.md` ("On Redis") and `docs/distributed.md` ("Forget by host").

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ::redis::Value;
use parking_lot::{Mutex, RwLock};

use super::meta::{self, State};
use super::router::{Place, Req};
use super::scripts::Script;
use super::split::{Kind, LockedSplit};
use super::{Error, RedisNamespace, Result, SplitOutcome, SplitStop};
use urlseen_engine::dsbf::NodeId;
use urlseen_engine::dsbf::split;

/// The hosts a client listed in the namespace's host dictionary (`urlseen:{ns}:hosts`), and
/// those it must list before an insert may carry their hash. About 100 bytes of client RAM per
/// distinct host, as the local namespace's dictionary.
#[derive(Debug, Default)]
pub(crate) struct Hosts {
    listed: RwLock<HashMap<u32, Box<str>>>,
    /// By hash (a lookup per URL recorded: a list made a batch of many new hosts quadratic).
    pending: Mutex<HashMap<u32, Vec<Box<str>>>>,
    any_pending: AtomicBool,
}

impl Hosts {
    /// Notes that a record may carry `h` for `host`: listed in Redis by the next
    /// [`Hosts::flush`] (every insert flushes first), unless this client listed it already.
    pub(crate) fn note(&self, h: u32, host: &str) {
        if self.listed.read().get(&h).is_some_and(|l| **l == *host) {
            return;
        }
        let mut pending = self.pending.lock();
        let names = pending.entry(h).or_default();
        if !names.iter().any(|n| **n == *host) {
            names.push(host.into());
        }
        self.any_pending.store(true, Ordering::Release);
    }

    /// Lists every pending host in Redis. An entry leaves `pending` only once Redis has it, so
    /// a thread whose insert carries a hash another thread is listing lists it too (the script
    /// is idempotent) rather than insert before it is listed.
    pub(crate) fn flush(&self, ns: &RedisNamespace) -> Result<()> {
        if !self.any_pending.load(Ordering::Acquire) {
            return Ok(());
        }
        let todo: Vec<(u32, Box<str>)> = self
            .pending
            .lock()
            .iter()
            .flat_map(|(h, names)| names.iter().map(|n| (*h, n.clone())))
            .collect();
        for chunk in todo.chunks(1_000) {
            let mut cmd =
                ns.router.scripts.call(Script::NoteHosts, &[&ns.dict_key(), &ns.meta_key()]);
            cmd.arg(ns.epoch.as_str());
            for (h, name) in chunk {
                cmd.arg(format!("{h:08x}")).arg(name.as_bytes());
            }
            let reply = ns.retrying(|| ns.router.one(ns.dict_place(), cmd.clone()))?;
            match &reply {
                Value::Array(v) => match &v[..] {
                    [Value::Int(0)] => {}
                    [Value::Int(1)] => return Err(ns.lost(super::Lost::Namespace)),
                    [Value::Int(2), Value::BulkString(e)] => return Err(ns.other_epoch(None, e)),
                    _ => return Err(ns.protocol(0, "NOTE_HOSTS", &reply)),
                },
                _ => return Err(ns.protocol(0, "NOTE_HOSTS", &reply)),
            }
        }
        let done: HashSet<(u32, Box<str>)> = todo.into_iter().collect();
        let mut listed = self.listed.write();
        let mut pending = self.pending.lock();
        for (h, names) in pending.iter_mut() {
            names.retain(|n| !done.contains(&(*h, n.clone())));
        }
        pending.retain(|_, names| !names.is_empty());
        for (h, name) in done {
            listed.entry(h).or_insert(name);
        }
        self.any_pending.store(!pending.is_empty(), Ordering::Release);
        Ok(())
    }
}

/// What one leaf's hosts string says.
#[derive(Debug, Default, Clone, Copy)]
struct Scan {
    /// Entries whose host is unknown (host 0, or past the end of a short hosts string).
    unknown: u64,
    /// Entries of the host being forgotten.
    carried: u64,
}

fn scan(len: u64, hosts: &[u8], h: u32) -> Scan {
    let known = (hosts.len() / 4) as u64;
    let mut s = Scan { unknown: len.saturating_sub(known), carried: 0 };
    for c in hosts.chunks_exact(4).take(len as usize) {
        match u32::from_le_bytes([c[0], c[1], c[2], c[3]]) {
            0 => s.unknown += 1,
            x if x == h => s.carried += 1,
            _ => {}
        }
    }
    s
}

/// One leaf's forget.
enum LeafForget {
    /// Rebuilt without the host: this many of its entries dropped.
    Done(u64),
    /// Not a leaf any more, or locked by a split: finish the splits, then look at its
    /// children.
    Moved,
    /// Stopped on purpose (`RedisNamespace::forget_host_until`, feature `testing`), lock kept.
    Stopped,
}

impl RedisNamespace {
    pub(super) fn dict_key(&self) -> Vec<u8> {
        super::namespace_key(&self.name, "hosts")
    }

    /// The dictionary lives beside the metadata (same hash tag, same server).
    pub(super) fn dict_place(&self) -> Place {
        Place { key: self.dict_key(), index: 0 }
    }

    /// The hosts listed under `h` in the dictionary.
    fn listed(&self, h: u32) -> Result<Vec<String>> {
        let mut get = ::redis::cmd("HGET");
        get.arg(self.dict_key()).arg(format!("{h:08x}"));
        Ok(match self.retrying(|| self.router.one(self.dict_place(), get.clone()))? {
            Value::BulkString(v) => {
                String::from_utf8_lossy(&v).split('\n').map(str::to_owned).collect()
            }
            _ => Vec::new(),
        })
    }

    /// A leaf's state, log length and hosts string, read atomically.
    pub(super) fn leaf_hosts(&self, id: NodeId) -> Result<(String, u64, Vec<u8>)> {
        let cmd = self.router.scripts.call(
            Script::Hosts,
            &[&self.key(id, "st"), &self.key(id, "log"), &self.key(id, "hosts")],
        );
        let reply = self.retrying(|| self.router.one(self.place(id), cmd.clone()))?;
        parse_hosts(&reply).ok_or_else(|| self.protocol(id, "HOSTS", &reply))
    }

    /// The hosts of `ids`, pipelined: `(id, state, scan)`.
    fn scan_leaves(&self, ids: &[NodeId], h: u32) -> Result<Vec<(NodeId, String, Scan)>> {
        let reqs: Vec<Req> = ids
            .iter()
            .map(|&id| Req {
                place: self.place(id),
                cmd: self.router.scripts.call(
                    Script::Hosts,
                    &[&self.key(id, "st"), &self.key(id, "log"), &self.key(id, "hosts")],
                ),
            })
            .collect();
        let replies = self.retrying(|| self.router.exec(reqs.clone()))?;
        ids.iter()
            .zip(&replies)
            .map(|(&id, reply)| {
                let (st, len, hosts) =
                    parse_hosts(reply).ok_or_else(|| self.protocol(id, "HOSTS", reply))?;
                Ok((id, st, scan(len, &hosts, h)))
            })
            .collect()
    }

    /// Why a forget of `host` (hash `h`) must refuse, if it must: records of unknown host,
    /// another host listed under `h`, or records carrying `h` unlisted.
    fn refusal(&self, host: &str, h: u32, s: Scan) -> Result<Option<Error>> {
        if s.unknown > 0 {
            return Ok(Some(
                urlseen_engine::Error::ForgetHostUnknown {
                    name: self.name.clone(),
                    records: s.unknown,
                }
                .into(),
            ));
        }
        let listed = self.listed(h)?;
        if listed.iter().any(|l| l != host) {
            return Ok(Some(
                urlseen_engine::Error::HostHashShared {
                    name: self.name.clone(),
                    host: host.to_owned(),
                    hash: h,
                    hosts: listed,
                }
                .into(),
            ));
        }
        if listed.is_empty() && s.carried > 0 {
            return Ok(Some(
                urlseen_engine::Error::HostHashUnlisted {
                    name: self.name.clone(),
                    host: host.to_owned(),
                    hash: h,
                    records: s.carried,
                }
                .into(),
            ));
        }
        Ok(None)
    }

    /// Forgets every URL of `host` (its canonical host, any scheme and port): afterwards each
    /// of them answers "new" (to this client at once, to every other client at its first
    /// call [`super::RedisOptions::meta_poll`] after the forget returned), and every other URL
    /// recorded still answers "seen", to every client. Returns how many URLs were forgotten.
    ///
    /// Each leaf that holds a URL of the host is frozen and rebuilt as a new leaf (its one
    /// child) holding the rest, by the split protocol, so other clients re-route and read the
    /// new leaf rather than trust offsets in a rewritten log; see `docs/distributed.md`.
    /// URLs recorded concurrently by other clients are kept (a URL of the host recorded while
    /// the forget runs may be kept or answered as recorded before it: the forget is not
    /// atomic over the namespace, each leaf's rebuild is).
    ///
    /// # Errors
    /// [`urlseen_engine::Error::InvalidHost`]; [`urlseen_engine::Error::ForgetHostUnknown`] if
    /// records of unknown host exist (written by a build that kept no hosts, or with
    /// [`urlseen_engine::SeenSet::seen_fingerprints`]),
    /// [`urlseen_engine::Error::HostHashShared`] and
    /// [`urlseen_engine::Error::HostHashUnlisted`] (the collision guard), all as
    /// [`Error::Engine`] and forgetting nothing if found before the first leaf is rebuilt (a
    /// refusal met later, by a host listed meanwhile, leaves the leaves rebuilt so far
    /// forgotten); Redis failures (the leaves rebuilt so far stay forgotten, a leaf frozen is
    /// rebuilt whole by any client).
    pub fn forget_host(&self, host: &str) -> Result<u64> {
        self.forget_host_as(host, None)
    }

    /// Runs a forget by host and stops in the first leaf it rebuilds where `stop` says,
    /// keeping the leaf's lock as a client that died there would; returns what was forgotten
    /// before. For tests of crash recovery.
    ///
    /// # Errors
    /// As [`Self::forget_host`].
    #[cfg(any(test, feature = "testing"))]
    pub fn forget_host_until(&self, host: &str, stop: SplitStop) -> Result<u64> {
        self.forget_host_as(host, Some(stop))
    }

    fn forget_host_as(&self, host: &str, stop: Option<SplitStop>) -> Result<u64> {
        let host = urlseen_engine::host::canonical_host(self.fingerprinter.canonicalizer(), host)?;
        let h = urlseen_engine::host::host_hash(&host, self.options.seed);
        self.complete_splits()?;
        let meta = self.retrying(|| self.refresh_meta())?;
        let leaves: Vec<NodeId> = meta.leaves().collect();
        let scanned = self.scan_leaves(&leaves, h)?;
        let total = scanned.iter().fold(Scan::default(), |t, (_, _, s)| Scan {
            unknown: t.unknown + s.unknown,
            carried: t.carried + s.carried,
        });
        if let Some(e) = self.refusal(&host, h, total)? {
            return Err(e);
        }
        let mut targets: Vec<NodeId> = scanned
            .iter()
            .filter(|(_, st, s)| s.carried > 0 || !st.is_empty())
            .map(|(id, _, _)| *id)
            .collect();
        let mut forgotten = 0;
        let mut rounds = 0;
        while let Some(id) = targets.pop() {
            rounds += 1;
            if rounds > 100_000 {
                return Err(Error::TooManyRetries { rounds, why: "leaves kept moving".into() });
            }
            match self.forget_leaf(id, h, &host, stop)? {
                LeafForget::Done(n) => forgotten += n,
                LeafForget::Stopped => return Ok(forgotten),
                LeafForget::Moved => {
                    // A split took it (or holds its lock): finish the splits, then forget in
                    // the leaves that hold its entries now.
                    self.complete_splits()?;
                    let meta = self.retrying(|| self.refresh_meta())?;
                    let mut under = Vec::new();
                    let mut stack = vec![id];
                    while let Some(n) = stack.pop() {
                        match meta.node(n).map(|n| &n.state) {
                            Some(State::Leaf) => under.push(n),
                            Some(State::Splitting(c) | State::Inner(c)) => stack.extend(c),
                            None => {}
                        }
                    }
                    if under == [id] {
                        // Still a leaf: a lock of a split that found nothing to do, or of a
                        // worker that died; try again shortly.
                        std::thread::sleep(Duration::from_millis(20));
                        targets.push(id);
                        continue;
                    }
                    for (kid, st, s) in self.scan_leaves(&under, h)? {
                        if s.carried > 0 || !st.is_empty() {
                            targets.push(kid);
                        }
                    }
                }
            }
        }
        Ok(forgotten)
    }

    /// Forgets host `h` in leaf `id`, under the leaf's split lock.
    fn forget_leaf(
        &self,
        id: NodeId,
        h: u32,
        host: &str,
        stop: Option<SplitStop>,
    ) -> Result<LeafForget> {
        let result = self.under_split_lock(
            id,
            |token| self.forget_locked(id, h, host, token, stop),
            |outcome| matches!(outcome, LeafForget::Stopped),
        )?;
        Ok(result.unwrap_or(LeafForget::Moved))
    }

    fn forget_locked(
        &self,
        id: NodeId,
        h: u32,
        host: &str,
        token: &str,
        stop: Option<SplitStop>,
    ) -> Result<LeafForget> {
        let meta = self.refresh_meta()?;
        let Some(node) = meta.node(id).cloned() else {
            return Err(self.bad_meta(format!("no node {id}")));
        };
        if node.state != State::Leaf {
            return Ok(LeafForget::Moved);
        }
        if let Some(p) = meta.parent(id)
            && matches!(meta.node(p).map(|n| &n.state), Some(State::Splitting(_)))
        {
            return Ok(LeafForget::Moved);
        }
        // From here the leaf's log and hosts are final: nothing is appended to a frozen leaf.
        let freeze = self.router.scripts.call(
            Script::Freeze,
            &[&self.key(id, "st"), &self.key(id, "log"), &self.key(id, "id")],
        );
        self.router.one(self.place(id), freeze)?;
        if stop == Some(SplitStop::AfterFreeze) {
            return Ok(LeafForget::Stopped);
        }
        let (st, len, hosts) = self.leaf_hosts(id)?;
        if st == "I" {
            return Ok(LeafForget::Moved);
        }
        let s = scan(len, &hosts, h);
        // Checked again now that the leaf is frozen: a host is listed before any record
        // carries its hash, so every host whose records this leaf holds is listed by now.
        if let Some(refused) = self.refusal(host, h, s)? {
            // Frozen already: rebuilt whole (nothing dropped), so writes resume on the copy.
            self.rebuild(id, token, None, None)?;
            return Err(refused);
        }
        if !self.rebuild(id, token, Some(h), stop)? {
            return Ok(LeafForget::Stopped);
        }
        Ok(LeafForget::Done(s.carried))
    }

    /// Rebuilds frozen leaf `id` as its one child, without the entries of host hash `drop`:
    /// the split protocol with a fan-out of 1, whose migration drops them (the hash is in the
    /// metadata, `f<id>`, so any worker that rolls the split forward drops them too). `false`:
    /// stopped by `stop`.
    fn rebuild(
        &self,
        id: NodeId,
        token: &str,
        drop: Option<u32>,
        stop: Option<SplitStop>,
    ) -> Result<bool> {
        let mut mark = self.router.scripts.call(Script::MarkSplitting, &[&self.meta_key()]);
        mark.arg(id).arg(1);
        if let Some(h) = drop {
            mark.arg(format!("{h:08x}"));
        }
        let rec = match self.router.one(self.meta_place(), mark)? {
            Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
            other => return Err(self.protocol(id, "MARK_SPLITTING", &other)),
        };
        match meta::parse_node(&rec).map_err(|r| self.bad_meta(r))?.state {
            State::Splitting(_) => {}
            State::Inner(_) => return self.retire_keys(id).map(|()| true),
            State::Leaf => return Err(self.bad_meta(format!("node {id} did not split"))),
        }
        let rebuild = LockedSplit::new(self, token, stop, Kind::Forget);
        match split::run(&rebuild, id)? {
            SplitOutcome::Done => Ok(true),
            SplitOutcome::Stopped => Ok(false),
            other => Err(self.bad_meta(format!("node {id}'s rebuild ended {other:?}"))),
        }
    }
}

impl RedisNamespace {
    /// Check-and-insert of fingerprints with their host hashes (from
    /// [`urlseen_engine::SeenSet::fingerprint_host`] of this namespace, which lists each host in
    /// the namespace's host dictionary before a record carries its hash); `hosts` empty: every
    /// host unknown (a forget by host then refuses while such records exist).
    ///
    /// # Errors
    /// As [`urlseen_engine::SeenSet::seen_fingerprints`].
    ///
    /// # Panics
    /// If `out.len() != fps.len()`, or `hosts` is neither empty nor as long as `fps`.
    pub fn seen_fingerprints_hosts(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
    ) -> Result<()> {
        assert!(hosts.is_empty() || hosts.len() == fps.len(), "one host hash per fingerprint");
        self.hosts.flush(self)?;
        let redo = std::mem::take(&mut *self.unrecorded.lock());
        if redo.is_empty() {
            return self.insert_batch(fps, hosts, out);
        }
        // The candidates of a call whose outcome was unknown were answered new; record them
        // now, ahead of the caller's own, and drop their answers: a repeat of one among the
        // caller's is then a repeat within the batch, "seen" (it was answered new already).
        let mut all = Vec::with_capacity(redo.len() + fps.len());
        let mut all_hosts = Vec::with_capacity(redo.len() + fps.len());
        all.extend(redo.iter().map(|r| r.0));
        all.extend_from_slice(fps);
        all_hosts.extend(redo.iter().map(|r| r.1));
        all_hosts.extend((0..fps.len()).map(|i| hosts.get(i).copied().unwrap_or(0)));
        let mut answers = vec![false; all.len()];
        match self.insert_batch(&all, &all_hosts, &mut answers) {
            Ok(()) => {
                out.copy_from_slice(&answers[redo.len()..]);
                Ok(())
            }
            Err(e) => {
                self.unrecorded.lock().extend(redo);
                Err(e)
            }
        }
    }

    /// Refreshes the metadata if its version moved, at most every [`RedisOptions::meta_poll`]:
    /// replicas of leaves that a forget (or a split) retired are dropped, so their stale bits
    /// answer nothing any more. Best effort: a transient failure skips the poll (no answer
    /// depends on it for correctness, only on how soon another client's forget shows), and
    /// the call's own commands meet the failure as they would have.
    pub(super) fn poll_meta(&self) -> Result<()> {
        let now = self.now_ms();
        let poll = self.config.meta_poll.as_millis() as u64;
        // Past the lifetime it knows, a client asks Redis before any answer from its replicas.
        if poll > 0
            && now < self.meta_polled.load(Ordering::Relaxed) + poll
            && !self.lifetime_over()
        {
            return Ok(());
        }
        self.meta_polled.store(now, Ordering::Relaxed);
        // The epoch too: a namespace that expired (or was dropped) and was made again starts
        // its versions anew, and this client's replicas hold the old one's URLs.
        let mut get = ::redis::cmd("HMGET");
        get.arg(self.meta_key()).arg("version").arg("epoch");
        let (version, epoch) = match self.router.one(self.meta_place(), get) {
            Ok(Value::Array(v)) => match &v[..] {
                [Value::BulkString(v), Value::BulkString(e)] => (
                    std::str::from_utf8(v).ok().and_then(|v| v.parse().ok()),
                    e.as_slice() == self.epoch.as_bytes(),
                ),
                _ => (None, false),
            },
            Ok(_) => (None, false),
            Err(e) if e.is_transient() => return Ok(()),
            Err(e) => return Err(e),
        };
        if !epoch || version.is_none_or(|v: u64| v > self.meta().version) {
            match self.refresh_meta() {
                Err(e) if e.is_transient() => {}
                other => {
                    other?;
                }
            }
        }
        Ok(())
    }
}

fn parse_hosts(reply: &Value) -> Option<(String, u64, Vec<u8>)> {
    match reply {
        Value::Array(v) => match &v[..] {
            [Value::BulkString(st), Value::Int(len), Value::BulkString(hosts)] => Some((
                String::from_utf8_lossy(st).into_owned(),
                u64::try_from(*len).ok()?,
                hosts.clone(),
            )),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_counts_unknown_and_carried_hosts() {
        let hosts: Vec<u8> = [5u32, 0, 7, 5].iter().flat_map(|h| h.to_le_bytes()).collect();
        let s = scan(4, &hosts, 5);
        assert_eq!((s.unknown, s.carried), (1, 2));
        // A short hosts string: the entries past its end are unknown.
        let s = scan(6, &hosts, 7);
        assert_eq!((s.unknown, s.carried), (3, 1));
    }
}
