//! Checkpoints of a tree: the snapshot format (its shape, each leaf's filter and where its
//! file ends), the capture that writes one while inserts go on, the dump of records, and the
//! bounds-checked readers the formats share.
use super::{
    Arc, BlockedBloom, Dsbf, DumpPos, Error, HashMap, Leaf, LeafLog, LeafRecord, LeafStore, Mode,
    Node, NodeId, Ordering, ROOT, Read, Routing, RwLock, SplitWorkers, TreeParams, Write, Xxh3, io,
};

use urlseen_filter::frame::{Format, FormatError};
/// The snapshot format version this build writes. It reads this one, version 3 (per-level
/// routing), version 2 (no kept records) and version 1, whose leaves carried their
/// fingerprints inline (opening such a snapshot moves them to leaf files).
pub const SNAPSHOT_VERSION: u16 = 4;
const SNAPSHOT_V1: u16 = 1;
/// A snapshot's framing: magic `URLSEENS`, versions 1 to [`SNAPSHOT_VERSION`].
pub(crate) const SNAPSHOT_FORMAT: Format = Format {
    name: "snapshot",
    magic: *b"URLSEENS",
    version: SNAPSHOT_VERSION,
    oldest: SNAPSHOT_V1,
};
/// Version 2: leaf files, no kept records.
const SNAPSHOT_V2: u16 = 2;
/// Version 3: kept records; every tree routed per level (no routing byte).
const SNAPSHOT_V3: u16 = 3;
const NODE_INNER: u8 = 0;
const NODE_LEAF: u8 = 1;

/// A checkpoint in progress: which leaves of its shape it has yet to write, and the frozen
/// state of those whose split finished before it got to them.
pub(super) struct Capture {
    pub(super) pending: Vec<bool>,
    pub(super) retained: HashMap<NodeId, Retained>,
}

/// A finished split's parent, kept for the checkpoint that has yet to write it.
pub(super) struct Retained {
    pub(super) filter: BlockedBloom,
    pub(super) records: u64,
    pub(super) kept: u64,
    pub(super) file_len: u64,
    pub(super) last_lsn: u64,
}

/// One leaf as a snapshot writes it.
struct CapturedLeaf {
    filter: Vec<u8>,
    records: u64,
    kept: u64,
    file_len: u64,
    last_lsn: u64,
}

/// Ends a checkpoint's capture when dropped.
struct EndCapture<'a>(&'a Dsbf);

impl Drop for EndCapture<'_> {
    fn drop(&mut self) {
        *self.0.capture.lock() = None;
    }
}

impl Dsbf {
    /// Appends the records of the leaf logs from `from` on, in node order, to `new` and
    /// `kept` (recorded and kept fingerprints), until about `budget` records are taken or the
    /// tree ends. Returns where the next call starts, or `None` if the tree ended.
    ///
    /// A leaf is read under its read lock only (writers to it wait for up to `budget` records
    /// to be read), a splitting node's frozen log is read as it froze, an inner node has no
    /// log. A leaf that does not fit in what is left of `budget` starts the next call, unless
    /// nothing was taken yet: then it is read in parts, resumed with `LeafLog::seek`.
    ///
    /// Node ids only grow (a split appends its children), so every record the tree held when a
    /// dump began is taken at least once by a walk of increasing positions: one in a leaf that
    /// splits after the walk passed it is also in a child, with a higher id, and is taken
    /// again there. A record added to a leaf the walk passed is not taken.
    ///
    /// # Errors
    /// A leaf file that cannot be read, or `from` not at a record boundary of its leaf.
    pub fn dump_records(
        &self,
        from: DumpPos,
        budget: usize,
        new: &mut Vec<u64>,
        kept: &mut Vec<u64>,
    ) -> Result<Option<DumpPos>, Error> {
        // Reads return whole blocks (up to `BUFFER_RECORDS`): ask for that much less.
        let slack = crate::leaf_log::BUFFER_RECORDS;
        let topo = self.topo.read();
        let mut pos = from;
        let mut scratch = Vec::new();
        loop {
            let taken = new.len() + kept.len();
            let Some(node) = topo.nodes.get(pos.node as usize) else { return Ok(None) };
            let guard;
            let log = match node {
                Node::Inner { .. } => None,
                Node::Leaf { leaf, .. } => {
                    guard = leaf.read();
                    Some(&guard.log)
                }
                Node::Splitting { frozen, .. } => Some(&frozen.log),
            };
            let Some(log) = log.filter(|log| log.len() > pos.records) else {
                pos = DumpPos { node: pos.node + 1, records: 0 };
                continue;
            };
            let left = log.len() - pos.records;
            let room = budget.saturating_sub(taken) as u64;
            let want = if left <= room {
                left
            } else if taken > 0 || room <= slack as u64 {
                if taken == 0 {
                    return Err(Error::InvalidOption {
                        name: "dump chunk size",
                        reason: format!("{budget} records is less than one leaf block"),
                    });
                }
                return Ok(Some(pos));
            } else {
                // A leaf is left part-read only when it holds more than `room`, so more than
                // `room - slack` on disk (its buffered tail is under `slack`, except in a
                // read-only open, which never flushes): the read stops at a block boundary of
                // the file, which no later flush moves, and the next call resumes there.
                room - slack as u64
            };
            let mut at = log.seek(&self.leaves, pos.records)?;
            let mut got = 0u64;
            while got < want {
                at = log.read(&self.leaves, at, (want - got) as usize, &mut scratch)?;
                if scratch.is_empty() {
                    break;
                }
                got += scratch.len() as u64;
                for r in &scratch {
                    if r.kept { kept.push(r.fp) } else { new.push(r.fp) }
                }
            }
            pos.records = at.records;
            if pos.records < log.len() {
                return Ok(Some(pos));
            }
            pos = DumpPos { node: pos.node + 1, records: 0 };
        }
    }
}

/// What [`Dsbf::write_snapshot`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// The log offset the snapshot covers.
    pub log_offset: u64,
    /// The leaves it names: their files must be synced before the snapshot counts.
    pub leaves: Vec<NodeId>,
    /// Leaves retired before it was taken: their files may go once it is on disk.
    pub retired: Vec<NodeId>,
}

/// A snapshot read back by [`Dsbf::read_snapshot`].
#[derive(Debug)]
pub struct LoadedSnapshot {
    /// The tree.
    pub tree: Arc<Dsbf>,
    /// The log offset it covers.
    pub log_offset: u64,
    /// The format version it was written in.
    pub version: u16,
    /// Its leaves, sorted.
    pub leaves: Vec<NodeId>,
    /// Per node id, the leaf's `last_lsn` (0 for inner nodes): for [`Dsbf::replay`].
    pub guard: Vec<u64>,
}

impl Dsbf {
    /// Streams a snapshot of the tree to `w` without stopping it: the exclusive lock is held
    /// only to copy the shape (no split may be in progress then; `Ok(None)` if one is: call
    /// [`Self::complete_splits`] and retry), then each leaf of that shape is written in turn
    /// under its own lock only, while inserts, queries and splits go on. A leaf's entry says
    /// how many records of its file it covers and its `last_lsn`: the namespace log's offset
    /// past its last record. So recovery replays the log from `log_end()` at the start, and
    /// skips, for each leaf, the records it already holds (see [`Self::replay`]). A leaf that
    /// splits before its turn is written as it froze (its frozen filter and sealed file, kept
    /// until then).
    ///
    /// ```text
    /// "URLSEENS" | version u16 (4) | routing u8 (0 per level, 1 ranges) | [0; 5]
    /// | log offset u64 | splits u64 | nodes u32
    /// node: 0 (inner) | depth u32 | children u32 | child ids u32…
    ///       1 (leaf)  | depth u32 | records u64 | kept u64 | leaf file bytes u64
    ///                 | last lsn u64 | filter bytes u64 | filter (filter codec)
    /// count u64 (records over all leaves, kept ones not counted) | xxh3_64 of everything
    /// before, u64
    /// ```
    /// (Version 3 had no routing byte: every tree was routed per level. Version 2 had no
    /// `kept`: it had no kept records. Version 1, written under the exclusive
    /// lock, had: header | log offset | count | splits | nodes, and for a leaf: depth | filter
    /// bytes | filter | log len u64 | fps u64….)
    ///
    /// # Errors
    /// `w`'s errors; a leaf file that cannot be appended to; a tree whose leaves live in
    /// memory, which has no leaf files to name.
    pub fn write_snapshot(
        &self,
        w: &mut dyn Write,
        log_end: &dyn Fn() -> u64,
    ) -> io::Result<Option<SnapshotInfo>> {
        let LeafStore::Files(files) = &self.leaves else {
            return Err(io::Error::other("a tree in memory has no leaf files to snapshot"));
        };
        let (shape, mut info, splits_done) = {
            let topo = self.topo.write();
            if topo.nodes.iter().any(|n| matches!(n, Node::Splitting { .. })) {
                return Ok(None);
            }
            self.leaves.check().map_err(io::Error::other)?;
            let shape: Vec<(u32, Option<Box<[NodeId]>>)> = topo
                .nodes
                .iter()
                .map(|n| match n {
                    Node::Inner { depth, children } => (*depth, Some(children.clone())),
                    Node::Leaf { depth, .. } | Node::Splitting { depth, .. } => (*depth, None),
                })
                .collect();
            let pending = shape.iter().map(|(_, children)| children.is_none()).collect();
            *self.capture.lock() = Some(Box::new(Capture { pending, retained: HashMap::new() }));
            let info = SnapshotInfo {
                log_offset: log_end(),
                leaves: Vec::new(),
                retired: files.take_retired(),
            };
            (shape, info, self.splits_done.load(Ordering::Relaxed))
        };
        // However this ends, the capture ends with it (and retained filters are freed).
        let _end = EndCapture(self);
        let mut w = HashingWriter { inner: w, hasher: Xxh3::new() };
        w.write_all(&SNAPSHOT_FORMAT.header())?;
        w.write_all(&[self.paths.routing().to_byte(), 0, 0, 0, 0, 0])?;
        w.write_all(&info.log_offset.to_le_bytes())?;
        w.write_all(&splits_done.to_le_bytes())?;
        w.write_all(&(shape.len() as u32).to_le_bytes())?;
        let mut count = 0u64;
        for (id, (depth, children)) in shape.iter().enumerate() {
            let id = id as NodeId;
            match children {
                Some(children) => {
                    w.write_all(&[NODE_INNER])?;
                    w.write_all(&depth.to_le_bytes())?;
                    w.write_all(&(children.len() as u32).to_le_bytes())?;
                    for c in children.iter() {
                        w.write_all(&c.to_le_bytes())?;
                    }
                }
                None => {
                    let leaf = self.capture_leaf(id)?;
                    w.write_all(&[NODE_LEAF])?;
                    w.write_all(&depth.to_le_bytes())?;
                    w.write_all(&leaf.records.to_le_bytes())?;
                    w.write_all(&leaf.kept.to_le_bytes())?;
                    w.write_all(&leaf.file_len.to_le_bytes())?;
                    w.write_all(&leaf.last_lsn.to_le_bytes())?;
                    w.write_all(&(leaf.filter.len() as u64).to_le_bytes())?;
                    w.write_all(&leaf.filter)?;
                    count += leaf.records - leaf.kept;
                    info.leaves.push(id);
                }
            }
        }
        w.write_all(&count.to_le_bytes())?;
        let check = w.hasher.digest();
        w.inner.write_all(&check.to_le_bytes())?;
        Ok(Some(info))
    }

    /// One leaf of a checkpoint's shape, as it is now (under its lock, its buffer appended to
    /// its file first), as it froze, or as its finished split left it.
    fn capture_leaf(&self, id: NodeId) -> io::Result<CapturedLeaf> {
        let topo = self.topo.read();
        let captured = match topo.nodes.get(id as usize) {
            Some(Node::Leaf { leaf, .. }) => {
                let mut leaf = leaf.write();
                if !leaf.log.flush(&self.leaves) {
                    self.leaves.check().map_err(io::Error::other)?;
                }
                CapturedLeaf {
                    filter: leaf.filter.encode(),
                    records: leaf.log.len(),
                    kept: leaf.kept,
                    file_len: leaf.log.file_len(),
                    last_lsn: leaf.last_lsn,
                }
            }
            Some(Node::Splitting { frozen, .. }) => CapturedLeaf {
                filter: frozen.filter.encode(),
                records: frozen.log.len(),
                kept: frozen.kept,
                file_len: frozen.log.file_len(),
                last_lsn: frozen.last_lsn,
            },
            Some(Node::Inner { .. }) | None => {
                let retained = self.capture.lock().as_mut().and_then(|c| c.retained.remove(&id));
                let Some(r) = retained else {
                    return Err(io::Error::other(format!("leaf {id} of the snapshot is gone")));
                };
                CapturedLeaf {
                    filter: r.filter.encode(),
                    records: r.records,
                    kept: r.kept,
                    file_len: r.file_len,
                    last_lsn: r.last_lsn,
                }
            }
        };
        if let Some(c) = self.capture.lock().as_mut()
            && let Some(p) = c.pending.get_mut(id as usize)
        {
            *p = false;
        }
        // A sealed file that could not be written holds fewer records than the leaf claims.
        self.leaves.check().map_err(io::Error::other)?;
        Ok(captured)
    }

    /// Recovery: records the fingerprints of one log record that ends at `end`, in `mode`
    /// ([`Mode::Record`], or [`Mode::Keep`] for kept records), except those the snapshot leaf
    /// on their path already holds. `guard` is [`LoadedSnapshot::guard`]: per node id of the
    /// snapshot, its leaf's `last_lsn` (0 for the inner nodes).
    pub fn replay(&self, fps: &[u64], hosts: &[u32], end: u64, guard: &[u64], mode: Mode) {
        let covered = |fp: u64| -> bool {
            let topo = self.topo.read();
            let mut id = ROOT;
            let mut x = self.route_hash(fp);
            loop {
                if let Some(&lsn) = guard.get(id as usize)
                    && lsn > 0
                {
                    return end <= lsn;
                }
                let (depth, children) = match topo.nodes.get(id as usize) {
                    Some(Node::Inner { depth, children })
                    | Some(Node::Splitting { depth, children, .. }) => (*depth, children),
                    _ => return false,
                };
                id = children[self.route(&mut x, fp, depth, children.len())];
            }
        };
        let max_guard = guard.iter().copied().max().unwrap_or(0);
        let (kept, kept_hosts): (Vec<u64>, Vec<u32>) = if end > max_guard {
            (fps.to_vec(), hosts.to_vec())
        } else {
            let host = |i: usize| hosts.get(i).copied().unwrap_or(0);
            fps.iter()
                .enumerate()
                .filter(|&(_, &fp)| !covered(fp))
                .map(|(i, &fp)| (fp, host(i)))
                .unzip()
        };
        let kept_hosts = if hosts.is_empty() { Vec::new() } else { kept_hosts };
        let mut out = vec![false; kept.len()];
        let never: Result<(), std::convert::Infallible> =
            self.insert_batch_with(&kept, &kept_hosts, &mut out, mode, &mut |_| Ok(end));
        let Ok(()) = never;
    }

    /// Rebuilds a tree from a snapshot (version 2, or version 1, whose inline leaf logs are
    /// written to leaf files here), validating everything: checksum, version, the shape (every
    /// child id in range, every node reached once from the root, depths consistent), every
    /// leaf filter against `params`, and every leaf file against the length the snapshot
    /// gives it (a longer one is cut back to it: the log after the snapshot holds the rest).
    ///
    /// # Errors
    /// A description of what is wrong; never panics on any input.
    pub fn read_snapshot(
        params: TreeParams,
        workers: Arc<SplitWorkers>,
        leaves: LeafStore,
        r: &mut dyn Read,
    ) -> Result<LoadedSnapshot, FormatError> {
        let LeafStore::Files(files) = &leaves else {
            return Err(bad("a tree in memory cannot load a snapshot".into()));
        };
        let mut r = HashingReader { inner: r, hasher: Xxh3::new() };
        let head = r.array::<{ urlseen_filter::frame::HEADER_LEN }>()?;
        let version = SNAPSHOT_FORMAT.check_header(&head)?;
        let reserved = r.take(6)?;
        let routing = if version <= SNAPSHOT_V3 {
            Routing::Levels
        } else {
            Routing::from_byte(reserved[0])
                .ok_or_else(|| bad(format!("unknown routing {} in the header", reserved[0])))?
        };
        let log_offset = r.u64()?;
        // Version 1 has the count here; version 2 at the end (it is known only then).
        let v1_count = if version == SNAPSHOT_V1 { r.u64()? } else { 0 };
        let splits_done = r.u64()?;
        let node_count = r.u32()? as usize;
        if node_count == 0 || node_count > (u32::MAX / 2) as usize {
            return Err(bad(format!("implausible node count {node_count}")));
        }
        // A filter's encoding: its bits plus a header and checksum of well under 4 KiB.
        let max_filter_len = params.max_leaf_bits.div_ceil(512) * 64 + 4096;
        let mut nodes = Vec::with_capacity(node_count.min(1 << 16));
        let mut files_to_adopt = Vec::new();
        let mut logged = 0u64;
        let mut guard = Vec::new();
        for id in 0..node_count {
            let id = id as NodeId;
            let tag = r.u8()?;
            let depth = r.u32()?;
            match tag {
                NODE_INNER => {
                    let n = r.u32()? as usize;
                    if n == 0 || n > node_count {
                        return Err(bad(format!("node {id}: implausible child count {n}")));
                    }
                    let children = (0..n).map(|_| r.u32()).collect::<Result<Box<[u32]>, _>>()?;
                    nodes.push(Node::Inner { depth, children });
                }
                NODE_LEAF => {
                    // Version 1 was written under the exclusive lock: every leaf covers the log
                    // up to the snapshot's offset.
                    let (records, kept, file_len, last_lsn) = match version {
                        SNAPSHOT_V1 => (0, 0, 0, log_offset),
                        SNAPSHOT_V2 => (r.u64()?, 0, r.u64()?, r.u64()?),
                        _ => (r.u64()?, r.u64()?, r.u64()?, r.u64()?),
                    };
                    if kept > records {
                        return Err(bad(format!("node {id}: {kept} kept of {records} records")));
                    }
                    let filter_len = r.u64()?;
                    if filter_len > max_filter_len {
                        return Err(bad(format!(
                            "node {id}: implausible filter length {filter_len}"
                        )));
                    }
                    let filter = BlockedBloom::decode(&r.take(filter_len as usize)?)
                        .map_err(|e| bad(format!("node {id}: leaf filter: {e}")))?;
                    let level = params
                        .level_of(depth, filter.num_bits())
                        .filter(|level| {
                            filter.num_hashes() == level.hashes
                                && filter.seed() == params.probe_seed()
                        })
                        .ok_or_else(|| {
                            bad(format!(
                                "node {id}: leaf filter parameters differ from the namespace's"
                            ))
                        })?;
                    let log = if version == SNAPSHOT_V1 {
                        // Upgrade: the inline log goes to the leaf's file as it is read.
                        let n = r.u64()?;
                        let mut log = LeafLog::new(&leaves, id, 0);
                        for _ in 0..n {
                            log.push(&leaves, LeafRecord::new(r.u64()?, 0));
                        }
                        log.seal(&leaves);
                        leaves.check().map_err(|e| bad(e.to_string()))?;
                        log
                    } else {
                        files_to_adopt.push((id, records, file_len));
                        LeafLog::reopened(id, records, file_len)
                    };
                    logged += log.len() - kept;
                    guard.resize(id as usize + 1, 0);
                    guard[id as usize] = last_lsn.max(1);
                    // Exact mode builds its index later, from the file (`enable_exact`).
                    let leaf = Leaf { filter, log, last_lsn, level, kept, index: None };
                    nodes.push(Node::Leaf { depth, leaf: Box::new(RwLock::new(leaf)) });
                }
                other => return Err(bad(format!("node {id}: unknown node tag {other}"))),
            }
        }
        let count = if version == SNAPSHOT_V1 { v1_count } else { r.u64()? };
        let expected = r.hasher.digest();
        let mut stored = [0u8; 8];
        r.inner.read_exact(&mut stored).map_err(|e| bad(format!("reading the checksum: {e}")))?;
        let got = u64::from_le_bytes(stored);
        if expected != got {
            return Err(bad(format!(
                "checksum mismatch (expected {got:#x}, computed {expected:#x})"
            )));
        }
        let mut trailing = [0u8; 1];
        if r.inner.read(&mut trailing).map_err(|e| bad(e.to_string()))? != 0 {
            return Err(bad("trailing bytes after the checksum".into()));
        }
        if logged != count {
            return Err(bad(format!("leaf logs hold {logged} fingerprints, header says {count}")));
        }
        check_shape(&nodes).map_err(bad)?;
        // Only now, with the snapshot known good, are leaf files cut back to it.
        for &(id, records, len) in &files_to_adopt {
            files.adopt(id, records, len).map_err(bad)?;
        }
        let mut live: Vec<NodeId> = nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| matches!(n, Node::Leaf { .. }))
            .map(|(id, _)| id as NodeId)
            .collect();
        live.sort_unstable();
        let tree = Self::with_nodes(params, workers, leaves, nodes, routing);
        tree.len.store(count, Ordering::Relaxed);
        tree.splits_done.store(splits_done, Ordering::Relaxed);
        tree.splits_started.store(splits_done, Ordering::Relaxed);
        guard.resize(node_count, 0);
        Ok(LoadedSnapshot { tree, log_offset, version, leaves: live, guard })
    }
}

/// A writer that hashes what passes through it.
struct HashingWriter<'a> {
    inner: &'a mut dyn Write,
    hasher: Xxh3,
}

impl Write for HashingWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A bounds-checked little-endian reader over an untrusted stream that hashes what it reads:
/// a short stream is an error, never a panic.
struct HashingReader<'a> {
    inner: &'a mut dyn Read,
    hasher: Xxh3,
}

impl HashingReader<'_> {
    fn take(&mut self, n: usize) -> Result<Vec<u8>, FormatError> {
        let mut out = Vec::new();
        let got = (&mut self.inner)
            .take(n as u64)
            .read_to_end(&mut out)
            .map_err(|e| bad(format!("read: {e}")))?;
        if got < n {
            return Err(SNAPSHOT_FORMAT.truncated("field", n, got));
        }
        self.hasher.update(&out);
        Ok(out)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], FormatError> {
        // Into the stack, not through `take`: a version 1 snapshot reads every fingerprint of
        // its inline logs this way.
        let mut b = [0u8; N];
        let mut got = 0;
        while got < N {
            match self.inner.read(&mut b[got..]) {
                Ok(0) => return Err(SNAPSHOT_FORMAT.truncated("field", N, got)),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(bad(format!("read: {e}"))),
            }
        }
        self.hasher.update(&b);
        Ok(b)
    }
    fn u8(&mut self) -> Result<u8, FormatError> {
        Ok(self.array::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32, FormatError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
}

/// A [`FormatError::Invalid`] of a snapshot.
fn bad(reason: String) -> FormatError {
    SNAPSHOT_FORMAT.invalid(reason)
}

/// Every node reached exactly once from the root, children one level deeper than parents.
fn check_shape(nodes: &[Node]) -> Result<(), String> {
    let mut seen = vec![false; nodes.len()];
    let mut stack = vec![(ROOT, 0u32)];
    match nodes.first() {
        Some(Node::Inner { depth: 0, .. }) => {}
        _ => return Err("the root is not an inner node at depth 0".into()),
    }
    while let Some((id, depth)) = stack.pop() {
        let node = nodes.get(id as usize).ok_or(format!("child id {id} out of range"))?;
        let seen_before = std::mem::replace(&mut seen[id as usize], true);
        if seen_before {
            return Err(format!("node {id} is reached twice"));
        }
        let (node_depth, children) = match node {
            Node::Inner { depth, children } => (*depth, Some(children)),
            Node::Leaf { depth, .. } => (*depth, None),
            Node::Splitting { .. } => return Err("a splitting node in a snapshot".into()),
        };
        if node_depth != depth {
            return Err(format!("node {id} has depth {node_depth}, expected {depth}"));
        }
        for &c in children.into_iter().flatten() {
            stack.push((c, depth + 1));
        }
    }
    match seen.iter().position(|s| !s) {
        Some(id) => Err(format!("node {id} is not reachable from the root")),
        None => Ok(()),
    }
}
