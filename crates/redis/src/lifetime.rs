//! Key lifetimes of a namespace in Redis: `EXPIRE`, `TTL` and `PERSIST` for a namespace whose
//! keys are spread over many hash tags and made, later, by any client's splits.
//!
//! The lifetime lives in the namespace's metadata (fields `expire_at`, Unix ms, and
//! `expire_seq`, the number of its last change), and in every node's identity hash, where each
//! script that makes a key of the node reads it and gives the key that time in the same atomic
//! step (`scripts.rs`, `stamp`). A change ([`RedisDb::update_expiry`]) is written in the
//! metadata first (`SET_EXPIRY`, which also gives the metadata's slot its time), then to each
//! node allocated so far (`STAMP_NODE`, a no-op where a newer change is already): Redis itself
//! then deletes every key at the same millisecond. A split's worker reads the metadata after
//! the split's children are allocated and stamps them before it writes into them
//! ([`RedisNamespace::stamp_children`]): a change made before that read reaches them through
//! the worker, one made after through the change's own walk over the allocated nodes. The
//! sequence numbers make the newest change win whichever of the two arrives last.
//!
//! # Cluster
//! Keys of different slots cannot change in one atomic step. What holds: the metadata (the
//! one key every client reads first) changes atomically; the rest follow within the call, and
//! a time not in the future deletes the metadata first, so no client opens the namespace
//! again in between. A client that dies between the two steps leaves nodes without the time
//! (or with the previous one) until the next change reaches them: `EXPIRE` again to finish.
//! Redis expires by its clock; [`RedisDb::expiry`] answers the time as set.
//!
//! # Expired, or lost?
//! A client that finds the metadata gone refuses to answer ([`Error::LostData`]: Redis lost
//! it), unless the namespace expired ([`Error::Expired`]): the lifetime it read has ended, or
//! the incarnation it opened left an end marker, `urlseen:{ns}:ended:<epoch>` (the time),
//! the one key that outlives the namespace, by [`ENDED_GRACE_MS`] (a day), for clients that
//! held the namespace open, idle, while another gave it a lifetime that ended.

use super::router::{Layout, Place, Req, Router};
use super::*;
use urlseen_engine::{Expiry, ExpiryUpdate};

/// How far (ms) a known lifetime may be in the future for a missing metadata to count as
/// expired rather than lost: the clock skew tolerated between clients and Redis.
const SKEW_MS: u64 = 60_000;

/// How long an expired namespace's end marker outlives it (`SET_EXPIRY`): a client idle for
/// longer across the expiry of a namespace it holds open, whose lifetime another client set,
/// reads the missing metadata as lost data (an error) rather than as an expiry.
pub(super) const ENDED_GRACE_MS: u64 = 24 * 3_600 * 1_000;

/// The end marker of incarnation `epoch` of namespace `name`.
fn ended_key(name: &str, epoch: &str) -> Vec<u8> {
    namespace_key(name, &format!("ended:{epoch}"))
}

/// Now, in Unix ms, by this machine's clock.
fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `STAMP_NODE` of node `id` of namespace `name`: lifetime number `seq`, time `at` (0: none).
fn stamp_node(router: &Router, name: &str, id: NodeId, seq: u64, at: u64) -> Req {
    let keys: Vec<Vec<u8>> = ["id", "log", "st", "mig", "hosts", "lock"]
        .iter()
        .map(|what| node_key(name, id, what))
        .collect();
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let mut cmd = router.scripts.call(Script::StampNode, &refs);
    cmd.arg(seq).arg(at);
    Req { place: Place { key: node_key(name, id, "log"), index: id.saturating_sub(1) }, cmd }
}

impl RedisDb {
    /// When namespace `name` expires: `None` if Redis does not hold it; [`Expiry::Never`] for
    /// one without a lifetime (and for one with a recrawl window, whose generations expire by
    /// themselves).
    ///
    /// # Errors
    /// Connection errors; [`Error::BadMeta`] for an unreadable time.
    pub fn expiry(&self, name: &str) -> Result<Option<Expiry>> {
        let reply = self.retrying(|| {
            let mut c = ::redis::cmd("HMGET");
            c.arg(meta_key(name)).arg("params").arg("expire_at");
            self.router.one(meta_place(name), c)
        })?;
        match &reply {
            Value::Array(v) => match &v[..] {
                [Value::BulkString(_), Value::Nil] => Ok(Some(Expiry::Never)),
                [Value::BulkString(_), Value::BulkString(at)] => {
                    let at: u64 = std::str::from_utf8(at)
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| Error::BadMeta {
                            name: name.to_owned(),
                            reason: "bad expire_at".into(),
                        })?;
                    Ok(Some(if at == 0 { Expiry::Never } else { Expiry::At(at) }))
                }
                // No metadata: a window, or nothing.
                _ => Ok(self.namespace_exists(name)?.then_some(Expiry::Never)),
            },
            other => Err(Error::Protocol {
                node: self.router.node_name(0),
                what: "HMGET (lifetime)",
                reply: format!("{other:?}"),
            }),
        }
    }

    /// Changes when namespace `name` expires, as `decide` says given its current time (Redis's
    /// `EXPIRE … NX|XX|GT|LT`, `PERSIST`): `decide` returns the new time, or `None` to keep
    /// it. The decision and the write are one step: a change by another client in between
    /// makes this one read and decide again. Every key of the namespace gets the time, those
    /// made later by splits of any client too (see the module docs); a time not in the future
    /// deletes them all now.
    ///
    /// # Errors
    /// Connection errors; [`Error::Config`] for a time given to a namespace with a recrawl
    /// window (its generations have lifetimes of their own).
    pub fn update_expiry(
        &self,
        name: &str,
        decide: impl Fn(Expiry) -> Option<Expiry>,
    ) -> Result<ExpiryUpdate> {
        let meta_key = meta_key(name);
        let place = meta_place(name);
        loop {
            let reply = self.retrying(|| {
                let mut c = ::redis::cmd("HMGET");
                c.arg(&meta_key[..]).arg("params").arg("expire_at").arg("expire_seq").arg("epoch");
                self.router.one(place.clone(), c)
            })?;
            let field = |v: &Value| -> Option<u64> {
                match v {
                    Value::BulkString(b) => {
                        std::str::from_utf8(b).ok().and_then(|s| s.parse().ok())
                    }
                    _ => None,
                }
            };
            let (current, seq, epoch) = match &reply {
                Value::Array(v) if v.len() == 4 && v[0] != Value::Nil => {
                    let at: u64 = field(&v[1]).unwrap_or(0);
                    let seq: u64 = field(&v[2]).unwrap_or(0);
                    let epoch = match &v[3] {
                        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                        _ => String::new(),
                    };
                    (if at == 0 { Expiry::Never } else { Expiry::At(at) }, seq, epoch)
                }
                Value::Array(_) => {
                    // A window never expires as a whole: a decision that keeps that is fine.
                    if self.namespace_exists(name)? && decide(Expiry::Never).is_some() {
                        return Err(Error::Config(format!(
                            "namespace {name:?} has a recrawl window: its generations expire \
                             by themselves, the window has no lifetime of its own"
                        )));
                    }
                    return Ok(match self.namespace_exists(name)? {
                        true => ExpiryUpdate::Kept,
                        false => ExpiryUpdate::Missing,
                    });
                }
                other => {
                    return Err(Error::Protocol {
                        node: self.router.node_name(0),
                        what: "HMGET (lifetime)",
                        reply: format!("{other:?}"),
                    });
                }
            };
            let Some(new) = decide(current) else { return Ok(ExpiryUpdate::Kept) };
            // 0 is "none" in Redis; a time at or before the epoch is in the past: 1 ms.
            let at = match new {
                Expiry::Never => 0,
                Expiry::At(at) => at.max(1),
            };
            let set = || {
                let mut c = self.router.scripts.call(
                    Script::SetExpiry,
                    &[
                        &meta_key,
                        &namespace_key(name, "hosts"),
                        &namespace_key(name, "recrawl"),
                        &ended_key(name, &epoch),
                    ],
                );
                let marker = at.saturating_add(ENDED_GRACE_MS).min(i64::MAX as u64);
                c.arg(seq).arg(at).arg(epoch.as_str()).arg(marker);
                self.router.one(place.clone(), c)
            };
            // Not retried blindly: a reply lost after the script ran would read as a change by
            // another client, and decide again on the new state (still one step per change).
            let reply = self.retrying(set)?;
            let (seq, next) = match &reply {
                Value::Array(v) => match &v[..] {
                    [Value::Int(0)] => return Ok(ExpiryUpdate::Missing),
                    [Value::Int(1), _] => continue,
                    [Value::Int(2), Value::Int(seq), Value::Int(next)] => (*seq as u64, *next),
                    _ => return Err(self.lifetime_reply(&reply)),
                },
                _ => return Err(self.lifetime_reply(&reply)),
            };
            let mut reqs: Vec<Req> = (1..next.max(1) as NodeId)
                .map(|id| stamp_node(&self.router, name, id, seq, at))
                .collect();
            if let Layout::Nodes(n) = self.router.layout() {
                let pos = namespace_key(name, "pos");
                for i in 0..n {
                    let mut c = ::redis::cmd(if at > 0 { "PEXPIREAT" } else { "PERSIST" });
                    c.arg(&pos[..]);
                    if at > 0 {
                        c.arg(at);
                    }
                    reqs.push(Req { place: Place { key: pos.clone(), index: i as u32 }, cmd: c });
                }
            }
            // Idempotent (a stamp already there is a no-op): retried whole.
            let cmds: Vec<(Place, ::redis::Cmd)> =
                reqs.into_iter().map(|r| (r.place, r.cmd)).collect();
            self.retrying(|| {
                let reqs =
                    cmds.iter().map(|(p, c)| Req { place: p.clone(), cmd: c.clone() }).collect();
                self.router.exec(reqs)
            })?;
            return Ok(if at > 0 && at <= now_unix_ms() {
                ExpiryUpdate::Dropped
            } else {
                ExpiryUpdate::Changed
            });
        }
    }

    fn lifetime_reply(&self, reply: &Value) -> Error {
        Error::Protocol {
            node: self.router.node_name(0),
            what: "SET_EXPIRY",
            reply: format!("{reply:?}"),
        }
    }
}

impl RedisNamespace {
    /// When the namespace expires, as the metadata read last says; [`Self::refresh`] reads it
    /// now.
    pub fn expires_at(&self) -> Option<u64> {
        self.meta().expire_at
    }

    /// Reads the metadata now (its lifetime, its shape).
    ///
    /// # Errors
    /// [`Error::Expired`] if the namespace has expired; [`Error::LostData`] if its metadata
    /// is gone otherwise; connection errors.
    pub fn refresh(&self) -> Result<()> {
        self.refresh_meta().map(|_| ())
    }

    /// Whether the lifetime this client knows has ended by its clock (then the metadata is
    /// read again before any answer: replicas must not answer for a namespace Redis deleted).
    pub(super) fn lifetime_over(&self) -> bool {
        self.meta().expire_at.is_some_and(|at| at <= now_unix_ms())
    }

    /// What a namespace whose metadata is gone, or re-created, is: expired if the lifetime
    /// this client knows has ended (within the skew tolerated), or if the incarnation it
    /// opened left its end marker (a lifetime another client set); else lost data.
    pub(super) fn gone(&self, lost: Lost) -> Error {
        if let Some(at) = self.meta().expire_at
            && at <= now_unix_ms().saturating_add(SKEW_MS)
        {
            return Error::Expired { name: self.name.clone(), at };
        }
        let mut get = ::redis::cmd("GET");
        get.arg(ended_key(&self.name, &self.epoch));
        // Best effort: a failure to read the marker leaves the refusal (the safe answer).
        if let Ok(Value::BulkString(at)) = self.router.one(self.meta_place(), get)
            && let Some(at) = std::str::from_utf8(&at).ok().and_then(|s| s.parse().ok())
        {
            return Error::Expired { name: self.name.clone(), at };
        }
        Error::LostData { name: self.name.clone(), lost }
    }

    /// Gives the children of a split (allocated already) the namespace's lifetime, before the
    /// split writes into them: the metadata is read after they were allocated, so a change
    /// made since reaches them by its own walk over the allocated nodes, and one made before
    /// is in what was read here.
    pub(super) fn stamp_children(&self, meta: &Meta, children: &[NodeId]) -> Result<()> {
        if meta.expire_seq == 0 {
            return Ok(());
        }
        let at = meta.expire_at.unwrap_or(0);
        let cmds: Vec<(Place, ::redis::Cmd)> = children
            .iter()
            .map(|&c| stamp_node(&self.router, &self.name, c, meta.expire_seq, at))
            .map(|r| (r.place, r.cmd))
            .collect();
        self.retrying(|| {
            let reqs = cmds.iter().map(|(p, c)| Req { place: p.clone(), cmd: c.clone() }).collect();
            self.router.exec(reqs)
        })?;
        Ok(())
    }
}
