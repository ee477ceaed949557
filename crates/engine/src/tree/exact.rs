//! Exact mode's leaf indexes: built from the leaves' records, consulted to confirm a Bloom
//! positive, and checked against the leaf files.
use super::{
    Arc, Dsbf, Error, Found, IndexStats, IndexStore, Leaf, LeafIndex, Mutex, Node, ROOT, ReadPos,
};

impl Dsbf {
    /// Exact mode's read-only lookup: whether `fp` is recorded, by the filters and then the
    /// leaf indexes on its path. Without indexes (not [`Self::enable_exact`]), as
    /// [`Self::contains`]. A failed index read answers `true` and fails the tree (see
    /// [`Self::check`]).
    pub fn contains_exact(&self, fp: u64) -> bool {
        let topo = self.topo.read();
        let mut id = ROOT;
        let mut x = self.route_hash(fp);
        loop {
            let (depth, children) = match &topo.nodes[id as usize] {
                Node::Leaf { leaf, .. } => {
                    let leaf = leaf.read();
                    return leaf.filter.contains(fp) && self.index_holds(leaf.index.as_ref(), fp);
                }
                Node::Inner { depth, children } => (*depth, children),
                Node::Splitting { depth, frozen, children } => {
                    if frozen.filter.contains(fp) && self.index_holds(frozen.index.as_ref(), fp) {
                        return true;
                    }
                    (*depth, children)
                }
            };
            id = children[self.route(&mut x, fp, depth, children.len())];
        }
    }

    /// Exact mode: gives every leaf an index of its records, read from its log, and every
    /// leaf made from now on one too. Finishes the splits in progress first. Called once, when
    /// the namespace opens; `store` is where the runs go.
    ///
    /// # Errors
    /// [`Error::Io`] or [`Error::Corrupt`] reading a leaf's file or writing a run.
    pub fn enable_exact(&self, store: Arc<IndexStore>) -> Result<(), Error> {
        self.complete_splits();
        self.check()?;
        let mut topo = self.topo.write();
        let leaves: Vec<&mut Leaf> = topo
            .nodes
            .iter_mut()
            .filter_map(|node| match node {
                Node::Leaf { leaf, .. } => Some(leaf.get_mut()),
                _ => None,
            })
            .collect();
        // Leaves are independent: one builder per core, each taking the next leaf.
        let queue = Mutex::new(leaves.into_iter());
        let failed = Mutex::new(None);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    loop {
                        // Not `while let … = queue.lock()…`: that would hold the queue's lock
                        // for the whole build, one leaf at a time.
                        let next = queue.lock().next();
                        let Some(leaf) = next else { break };
                        if let Err(e) = self.build_index(leaf, &store) {
                            *failed.lock() = Some(e);
                            return;
                        }
                    }
                });
            }
        });
        if let Some(e) = failed.into_inner() {
            return Err(e);
        }
        let _ = self.index.set(store);
        Ok(())
    }

    /// Indexes every record of `leaf`'s log (see [`LeafIndex::build`]).
    pub(super) fn build_index(
        &self,
        leaf: &mut Leaf,
        store: &Arc<IndexStore>,
    ) -> Result<(), Error> {
        let mut pos = ReadPos::default();
        let mut records = Vec::new();
        let log = &leaf.log;
        let index = LeafIndex::build(store, leaf.split_at(), |out| {
            if log.is_end(pos) {
                return Ok(false);
            }
            pos = log.read(&self.leaves, pos, 1 << 16, &mut records)?;
            out.extend(records.iter().filter(|r| !r.kept).map(|r| r.fp));
            Ok(!log.is_end(pos))
        })?;
        leaf.index = Some(index);
        Ok(())
    }

    /// Reads every leaf's fingerprints back (`urlseen check`), checking every block's checksum
    /// and that each leaf holds as many records as it should. Returns the records read.
    ///
    /// # Errors
    /// The first damaged or short leaf file.
    pub fn verify_leaf_files(&self) -> Result<u64, Error> {
        let topo = self.topo.read();
        let mut total = 0;
        let mut chunk = Vec::new();
        for node in &topo.nodes {
            let Node::Leaf { leaf, .. } = node else { continue };
            let leaf = leaf.read();
            let mut pos = ReadPos::default();
            while !leaf.log.is_end(pos) {
                pos = leaf.log.read(&self.leaves, pos, 1 << 16, &mut chunk)?;
                total += chunk.len() as u64;
            }
        }
        Ok(total)
    }

    /// Exact mode's index counters and sizes (zero without indexes).
    pub fn index_stats(&self) -> IndexStats {
        self.index.get().map(|s| s.stats()).unwrap_or_default()
    }

    /// Whether `index` holds `fp`; `true` without an index (the filter's answer stands) and
    /// when the index cannot be read (which fails the tree: a "seen" is never a lost URL).
    pub(super) fn index_holds(&self, index: Option<&LeafIndex>, fp: u64) -> bool {
        self.index_find(index, fp) != Found::No
    }

    /// [`Self::index_holds`], saying where: [`Found::Tail`] without an index or on a failed
    /// read (nothing that is worth caching).
    pub(super) fn index_find(&self, index: Option<&LeafIndex>, fp: u64) -> Found {
        let (Some(index), Some(store)) = (index, self.index.get()) else { return Found::Tail };
        index.find(fp).unwrap_or_else(|e| {
            store.fail(&e);
            Found::Tail
        })
    }
}
