//! Which Redis node gets which command, and the pipelines that carry them.
//!
//! We route ourselves instead of using the client crate's cluster connection: a batch becomes
//! one pipeline per node, all sent before any reply is read (the nodes work in parallel), with
//! `EVALSHA` inside (the crate's cluster pipeline refuses it) and per-command outcomes (one
//! command's redirection does not discard its neighbours' answers, which may be recorded
//! writes). Three layouts:
//! - **single**: one standalone Redis holds everything;
//! - **nodes**: a list of independent standalone Redis servers (seed 000's Fig. 9: one leaf per
//!   host); the metadata lives on the first, leaf `id` on node `(id - 1) % n`;
//! - **cluster**: Redis Cluster; every key goes to the master of its hash slot (`CLUSTER
//!   SLOTS`), `MOVED` refreshes the slot map and retries, `ASK` retries once on the named node
//!   after `ASKING`.
//!
//! Failures: a connection that fails (I/O error, timeout) is dropped and the call returns an
//! error; the next call reconnects, retrying the connect with exponential backoff. A command is
//! only ever re-sent here when Redis said it did not run it (`MOVED`, `ASK`, `NOSCRIPT`). A
//! failed call says whether any of its commands may have run ([`Failed::maybe_ran`]): the
//! namespace retries one that did not, and treats the writes of one that may have as of
//! unknown outcome.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ::redis::{Cmd, Connection, Value};
use parking_lot::{Mutex, RwLock};

use super::Error;
use super::scripts::Scripts;

/// Hash slots in a Redis Cluster.
const SLOTS: usize = 16384;
/// Redirections and script reloads one command may go through before we give up.
const MAX_REDIRECTS: usize = 8;

/// How the namespace's keys are spread over Redis servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    Single,
    Nodes(usize),
    Cluster,
}

/// Where a command goes: the key whose slot decides in a cluster, and the placement index that
/// decides in the `nodes` layout (0 for metadata, `id - 1` for leaf `id`).
#[derive(Debug, Clone)]
pub(crate) struct Place {
    pub key: Vec<u8>,
    pub index: u32,
}

/// One command of a batch.
#[derive(Debug, Clone)]
pub(crate) struct Req {
    pub place: Place,
    pub cmd: Cmd,
}

/// A failed call: the error, and whether a command of it may have run (a pipeline was written,
/// and not every reply read was an error saying its command did not run).
#[derive(Debug)]
pub(crate) struct Failed {
    pub error: Error,
    pub maybe_ran: bool,
}

impl From<Failed> for Error {
    fn from(f: Failed) -> Error {
        f.error
    }
}

/// Error codes with which Redis refuses a command without running it, for a while: loading its
/// dataset, a failover or resharding in progress, a script running too long, a replica that
/// became read-only.
const TRANSIENT_CODES: [&str; 6] =
    ["LOADING", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "BUSY", "READONLY"];

/// Whether an error reply's message (`CODE details`) is one of [`TRANSIENT_CODES`].
pub(crate) fn transient_reply(message: &str) -> bool {
    let code = message.split_whitespace().next().unwrap_or_default();
    TRANSIENT_CODES.contains(&code)
}

/// The connections one caller uses, one per node, lazily opened.
type Conns = HashMap<usize, Conn>;

/// A pooled connection, and when it was last handed out.
struct Conn {
    conn: Connection,
    used: Instant,
}

/// A pooled connection idle this long is `PING`ed before it carries a call: a server that
/// restarted meanwhile has closed it, and a write sent on it would be of unknown outcome (its
/// URLs answered new) where a fresh connection would simply have failed or worked.
const IDLE_CHECK: Duration = Duration::from_secs(1);

pub(crate) struct Router {
    layout: Layout,
    /// Node URLs; an index into this list names a node. Grows when a cluster names new nodes.
    nodes: RwLock<Vec<String>>,
    /// Cluster: slot → node index.
    slots: RwLock<Vec<u32>>,
    /// Idle connection sets; a caller takes one for the duration of a batch.
    pool: Mutex<Vec<Conns>>,
    timeout: Duration,
    connect_attempts: u32,
    pub(crate) scripts: Scripts,
    /// Commands re-sent after `MOVED`, `ASK`, `TRYAGAIN` or `NOSCRIPT`.
    pub(crate) redirects: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("layout", &self.layout)
            .field("nodes", &*self.nodes.read())
            .finish_non_exhaustive()
    }
}

impl Router {
    pub(crate) fn new(
        urls: &[String],
        layout: Layout,
        timeout: Duration,
        connect_attempts: u32,
    ) -> Result<Self, Error> {
        let router = Router {
            layout,
            nodes: RwLock::new(urls.to_vec()),
            slots: RwLock::new(Vec::new()),
            pool: Mutex::new(Vec::new()),
            timeout,
            connect_attempts: connect_attempts.max(1),
            scripts: Scripts::new(),
            redirects: std::sync::atomic::AtomicU64::new(0),
        };
        if layout == Layout::Cluster {
            router.refresh_slots()?;
        }
        Ok(router)
    }

    pub(crate) fn layout(&self) -> Layout {
        self.layout
    }

    /// The URL of node `i`, for messages.
    pub(crate) fn node_name(&self, i: usize) -> String {
        self.nodes.read().get(i).cloned().unwrap_or_else(|| format!("node #{i}"))
    }

    /// Every node we know of (cluster: every master of the slot map).
    pub(crate) fn node_count(&self) -> usize {
        self.nodes.read().len()
    }

    fn node_of(&self, place: &Place) -> usize {
        match self.layout {
            Layout::Single => 0,
            Layout::Nodes(n) => place.index as usize % n.max(1),
            Layout::Cluster => {
                let slot = key_slot(&place.key) as usize;
                self.slots.read().get(slot).map_or(0, |&n| n as usize)
            }
        }
    }

    /// Reads `CLUSTER SLOTS` from the first node that answers and rebuilds the slot map.
    pub(crate) fn refresh_slots(&self) -> Result<(), Error> {
        let count = self.node_count();
        let mut last = None;
        for i in 0..count {
            let mut conns = Conns::new();
            let reply = self.connection(&mut conns, i).and_then(|c| {
                ::redis::cmd("CLUSTER").arg("SLOTS").query::<Value>(c).map_err(|e| self.io(i, e))
            });
            match reply {
                Ok(v) => return self.install_slots(i, &v),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::Config("no cluster node given".into())))
    }

    fn install_slots(&self, from: usize, v: &Value) -> Result<(), Error> {
        let bad = |why: &str| Error::Protocol {
            node: self.node_name(from),
            what: "CLUSTER SLOTS",
            reply: format!("{why}: {v:?}"),
        };
        let Value::Array(ranges) = v else { return Err(bad("not an array")) };
        let mut map = vec![u32::MAX; SLOTS];
        for range in ranges {
            let Value::Array(r) = range else { return Err(bad("range is not an array")) };
            let (Some(Value::Int(start)), Some(Value::Int(end)), Some(Value::Array(master))) =
                (r.first(), r.get(1), r.get(2))
            else {
                return Err(bad("malformed range"));
            };
            let host = match master.first() {
                Some(Value::BulkString(h)) => String::from_utf8_lossy(h).into_owned(),
                Some(Value::SimpleString(h)) => h.clone(),
                _ => return Err(bad("no master host")),
            };
            let Some(Value::Int(port)) = master.get(1) else { return Err(bad("no master port")) };
            let host = if host.is_empty() { "127.0.0.1".to_owned() } else { host };
            let node = self.intern(&format!("{host}:{port}"));
            let (start, end) = (*start as usize, *end as usize);
            if start > end || end >= SLOTS {
                return Err(bad("slot range out of bounds"));
            }
            for slot in &mut map[start..=end] {
                *slot = node as u32;
            }
        }
        if map.contains(&u32::MAX) {
            return Err(Error::Server {
                node: self.node_name(from),
                message: "the cluster does not cover every hash slot (CLUSTERDOWN?)".into(),
            });
        }
        *self.slots.write() = map;
        Ok(())
    }

    /// The index of node `host:port`, added if new.
    fn intern(&self, host_port: &str) -> usize {
        let url = format!("redis://{host_port}/");
        let same =
            |u: &String| u == &url || u.trim_end_matches('/').ends_with(&format!("//{host_port}"));
        if let Some(i) = self.nodes.read().iter().position(same) {
            return i;
        }
        let mut nodes = self.nodes.write();
        if let Some(i) = nodes.iter().position(same) {
            return i;
        }
        nodes.push(url);
        nodes.len() - 1
    }

    fn io(&self, node: usize, source: ::redis::RedisError) -> Error {
        Error::Redis { node: self.node_name(node), source }
    }

    /// The connection to node `i` in `conns`, connecting (with backoff) if there is none.
    fn connection<'c>(&self, conns: &'c mut Conns, i: usize) -> Result<&'c mut Connection, Error> {
        if let Some(c) = conns.get_mut(&i)
            && c.used.elapsed() >= IDLE_CHECK
            && ::redis::cmd("PING").query::<Value>(&mut c.conn).is_err()
        {
            conns.remove(&i);
        }
        if let std::collections::hash_map::Entry::Vacant(slot) = conns.entry(i) {
            let url = self.node_name(i);
            let mut delay = Duration::from_millis(20);
            let mut attempt = 0;
            let conn = loop {
                attempt += 1;
                let tried = ::redis::Client::open(url.as_str())
                    .and_then(|c| c.get_connection_with_timeout(self.timeout));
                match tried {
                    Ok(c) => break c,
                    Err(e) if attempt >= self.connect_attempts => return Err(self.io(i, e)),
                    Err(_) => {
                        std::thread::sleep(delay);
                        delay = (delay * 2).min(Duration::from_secs(1));
                    }
                }
            };
            conn.set_read_timeout(Some(self.timeout)).map_err(|e| self.io(i, e))?;
            conn.set_write_timeout(Some(self.timeout)).map_err(|e| self.io(i, e))?;
            slot.insert(Conn { conn, used: Instant::now() });
        }
        let c =
            conns.get_mut(&i).ok_or_else(|| Error::Config(format!("no connection to node {i}")))?;
        c.used = Instant::now();
        Ok(&mut c.conn)
    }

    /// Runs one command (through [`Self::exec`]) and returns its reply.
    pub(crate) fn one(&self, place: Place, cmd: Cmd) -> Result<Value, Error> {
        let mut out = self.exec(vec![Req { place, cmd }])?;
        out.pop().ok_or_else(|| Error::Config("empty reply set".into()))
    }

    /// Runs a batch: one pipeline per node, every pipeline written before any reply is read.
    /// Returns the replies in request order. Redirections and script reloads are retried per
    /// command; any other server error or I/O failure fails the whole call (commands of the
    /// batch may have run: the caller reports an error, never an answer).
    pub(crate) fn exec(&self, reqs: Vec<Req>) -> Result<Vec<Value>, Error> {
        Ok(self.try_exec(reqs)?)
    }

    /// [`Self::exec`], saying on failure whether a command may have run.
    pub(crate) fn try_exec(&self, reqs: Vec<Req>) -> Result<Vec<Value>, Failed> {
        let mut conns = self.pool.lock().pop().unwrap_or_default();
        let mut maybe_ran = false;
        let result = self.exec_with(&mut conns, &reqs, &mut maybe_ran);
        self.pool.lock().push(conns);
        result.map_err(|error| Failed { error, maybe_ran })
    }

    fn exec_with(
        &self,
        conns: &mut Conns,
        reqs: &[Req],
        maybe_ran: &mut bool,
    ) -> Result<Vec<Value>, Error> {
        let mut results: Vec<Option<Value>> = vec![None; reqs.len()];
        // Per request: a node that ASK sent it to (used once), and how often it was re-sent.
        let mut asked: Vec<Option<usize>> = vec![None; reqs.len()];
        let mut tries = vec![0usize; reqs.len()];
        let mut todo: Vec<usize> = (0..reqs.len()).collect();
        while !todo.is_empty() {
            let mut by_node: Vec<(usize, Vec<usize>)> = Vec::new();
            for &r in &todo {
                let node = asked[r].unwrap_or_else(|| self.node_of(&reqs[r].place));
                match by_node.iter_mut().find(|(n, _)| *n == node) {
                    Some((_, list)) => list.push(r),
                    None => by_node.push((node, vec![r])),
                }
            }
            todo.clear();
            // Send every node's pipeline first.
            let mut failed: Option<Error> = None;
            let mut sent: Vec<(usize, &[usize])> = Vec::new();
            for (node, list) in &by_node {
                let mut buf = Vec::new();
                for &r in list {
                    if asked[r].is_some() {
                        buf.extend_from_slice(&::redis::cmd("ASKING").get_packed_command());
                    }
                    buf.extend_from_slice(&reqs[r].cmd.get_packed_command());
                }
                let outcome = self
                    .connection(conns, *node)
                    .and_then(|c| c.send_packed_command(&buf).map_err(|e| self.io(*node, e)));
                match outcome {
                    Ok(()) => sent.push((*node, list)),
                    Err(e) => {
                        // A write that failed may have delivered part of the pipeline; only a
                        // connection never made certainly carried nothing.
                        if !matches!(e, Error::Redis { ref source, .. } if source.is_connection_refusal())
                        {
                            *maybe_ran = true;
                        }
                        conns.remove(node);
                        failed.get_or_insert(e);
                    }
                }
            }
            // Then read every reply of every node that got its pipeline.
            let mut reload: Vec<usize> = Vec::new();
            let mut moved = false;
            for (node, list) in sent {
                for &r in list {
                    let conn = match conns.get_mut(&node) {
                        Some(c) => &mut c.conn,
                        None => break,
                    };
                    if asked[r].is_some()
                        && let Err(e) = conn.recv_response()
                    {
                        *maybe_ran = true;
                        conns.remove(&node);
                        failed.get_or_insert(self.io(node, e));
                        break;
                    }
                    asked[r] = None;
                    let reply = match conn.recv_response() {
                        Ok(v) => v,
                        Err(e) => {
                            // Sent, no reply: this command and the rest of the pipeline may
                            // or may not have run.
                            *maybe_ran = true;
                            conns.remove(&node);
                            failed.get_or_insert(self.io(node, e));
                            break;
                        }
                    };
                    let Value::ServerError(err) = reply else {
                        *maybe_ran = true;
                        results[r] = Some(reply);
                        continue;
                    };
                    let kind = err.kind();
                    let retry = match kind {
                        Some(::redis::ServerErrorKind::Moved) => {
                            moved = true;
                            true
                        }
                        Some(::redis::ServerErrorKind::Ask) => {
                            // "ASK <slot> <host:port>"
                            match err.details().and_then(|d| d.split_whitespace().nth(1)) {
                                Some(target) => {
                                    asked[r] = Some(self.intern(target));
                                    true
                                }
                                None => false,
                            }
                        }
                        Some(::redis::ServerErrorKind::NoScript) => {
                            if !reload.contains(&node) {
                                reload.push(node);
                            }
                            true
                        }
                        Some(::redis::ServerErrorKind::TryAgain)
                        | Some(::redis::ServerErrorKind::ClusterDown) => {
                            std::thread::sleep(Duration::from_millis(20 << tries[r].min(5)));
                            moved = true;
                            true
                        }
                        _ => false,
                    };
                    tries[r] += 1;
                    if !retry || tries[r] > MAX_REDIRECTS {
                        let message =
                            format!("{} {}", err.code(), err.details().unwrap_or_default());
                        // Our scripts refuse before writing; but an unknown error may come
                        // from a command that did part of its work.
                        if !transient_reply(&message) {
                            *maybe_ran = true;
                        }
                        failed.get_or_insert(Error::Server { node: self.node_name(node), message });
                        continue;
                    }
                    self.redirects.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    todo.push(r);
                }
            }
            if let Some(e) = failed {
                return Err(e);
            }
            if moved {
                self.refresh_slots()?;
            }
            for node in reload {
                self.load_scripts(conns, node)?;
            }
        }
        Ok(results.into_iter().map(|v| v.unwrap_or(Value::Nil)).collect())
    }

    /// Loads every script on node `i` (after a `NOSCRIPT`: a restarted or flushed node).
    fn load_scripts(&self, conns: &mut Conns, i: usize) -> Result<(), Error> {
        let conn = self.connection(conns, i)?;
        for src in self.scripts.sources() {
            let r: Result<String, _> = ::redis::cmd("SCRIPT").arg("LOAD").arg(src).query(conn);
            if let Err(e) = r {
                conns.remove(&i);
                return Err(self.io(i, e));
            }
        }
        Ok(())
    }

    /// `PING` round-trip times to node `i`, `n` samples, on a fresh connection.
    pub(crate) fn ping(&self, i: usize, n: usize) -> Result<Vec<Duration>, Error> {
        let mut conns = Conns::new();
        let conn = self.connection(&mut conns, i)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let t = std::time::Instant::now();
            let _: String = ::redis::cmd("PING").query(conn).map_err(|e| self.io(i, e))?;
            out.push(t.elapsed());
        }
        Ok(out)
    }

    /// Drops every pooled connection (the next call reconnects).
    pub(crate) fn reset(&self) {
        self.pool.lock().clear();
    }
}

/// The key's hash slot, as Redis Cluster computes it: CRC16 (XMODEM) of the hash tag (the part
/// between the first `{` and the next `}`, if non-empty) or of the whole key, modulo 16384.
pub(crate) fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&c| c == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        rest.iter().position(|&c| c == b'}').filter(|&len| len > 0).map(|len| &rest[..len])
    });
    crc16(tagged.unwrap_or(key)) % SLOTS as u16
}

fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
    }
}
