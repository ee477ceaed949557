//! How a fingerprint finds its leaf: down the directory (a tree routed by ranges) or level by
//! level with each level's location hash (trees made before snapshot version 4), asking the
//! frozen filter of a split under way on its path.
use super::{Dsbf, Node, NodeId, ROOT, Topology, routing};

pub(super) enum Walk {
    /// A frozen filter on the way down holds the fingerprint.
    Seen,
    /// The leaf the fingerprint belongs to.
    Leaf(NodeId),
}

/// What [`Dsbf::route_or_ask`] found.
pub(super) enum Route {
    /// The walk's answer.
    Done(Walk),
    /// The frozen filter of splitting node `frozen` decides; if it does not hold the
    /// fingerprint, `leaf` owns it.
    Ask { frozen: NodeId, leaf: NodeId },
}

impl Dsbf {
    /// Finds the leaf that owns `fp`. With `check_frozen`, a splitting node on the way whose
    /// frozen filter holds `fp` ends the walk with [`Walk::Seen`]. Under [`Routing::Ranges`]
    /// the directory answers in one step, unless a frozen filter above the leaf must be asked.
    #[inline]
    pub(super) fn walk(&self, topo: &Topology, fp: u64, check_frozen: bool) -> Walk {
        if let Some(dir) = &topo.dir {
            let (leaf, frozen) = dir.locate(self.route_hash(fp));
            match frozen {
                _ if !check_frozen => return Walk::Leaf(leaf),
                None => return Walk::Leaf(leaf),
                // One splitting node above (a split in progress): ask its frozen filter.
                Some(node) if node != routing::NO_NODE => {
                    if let Some(Node::Splitting { frozen, .. }) = topo.nodes.get(node as usize) {
                        if frozen.filter.contains(fp) {
                            return Walk::Seen;
                        }
                        return Walk::Leaf(leaf);
                    }
                }
                Some(_) => {}
            }
        }
        self.walk_down(topo, fp, check_frozen)
    }

    /// [`Self::walk`] with a frozen filter's check left to the caller: [`Route::Ask`] when the
    /// directory finds exactly one splitting node above the leaf, so the caller can ask that
    /// node's frozen filter for many fingerprints at once; otherwise the walk's answer.
    #[inline]
    pub(super) fn route_or_ask(&self, topo: &Topology, fp: u64) -> Route {
        if let Some(dir) = &topo.dir {
            match dir.locate(self.route_hash(fp)) {
                (leaf, None) => return Route::Done(Walk::Leaf(leaf)),
                (leaf, Some(node))
                    if node != routing::NO_NODE
                        && matches!(
                            topo.nodes.get(node as usize),
                            Some(Node::Splitting { .. })
                        ) =>
                {
                    return Route::Ask { frozen: node, leaf };
                }
                _ => {}
            }
        }
        Route::Done(self.walk_down(topo, fp, true))
    }

    /// [`Self::walk`] level by level from the root.
    pub(super) fn walk_down(&self, topo: &Topology, fp: u64, check_frozen: bool) -> Walk {
        let mut id = ROOT;
        let mut x = self.route_hash(fp);
        loop {
            let (depth, children) = match &topo.nodes[id as usize] {
                Node::Leaf { .. } => return Walk::Leaf(id),
                Node::Inner { depth, children } => (*depth, children),
                Node::Splitting { depth, frozen, children } => {
                    if check_frozen && frozen.filter.contains(fp) {
                        return Walk::Seen;
                    }
                    (*depth, children)
                }
            };
            id = children[self.route(&mut x, fp, depth, children.len())];
        }
    }

    /// What a walk for `fp` starts from (see [`routing::Paths::start`]).
    #[inline(always)]
    pub(super) fn route_hash(&self, fp: u64) -> u64 {
        self.paths.start(fp)
    }

    /// Which of the `n` children of a node at `depth` gets `fp`, whose walk state is `x`.
    #[inline(always)]
    pub(super) fn route(&self, x: &mut u64, fp: u64, depth: u32, n: usize) -> usize {
        self.paths.child(x, fp, depth, n)
    }
}

/// Asks the frozen filter of splitting node `node` for `fps[i]` of each `i` of `at`, in one
/// batch: the filter prefetches them, where one at a time each would be a cache miss the
/// caller waits for. `out[k]` answers the `k`-th (`ask_fps` holds them meanwhile). `None` if
/// `node` is not splitting.
pub(super) fn ask_frozen(
    topo: &Topology,
    node: NodeId,
    fps: &[u64],
    at: impl Iterator<Item = u32>,
    (ask_fps, out): (&mut Vec<u64>, &mut Vec<bool>),
) -> Option<()> {
    let Some(Node::Splitting { frozen, .. }) = topo.nodes.get(node as usize) else {
        return None;
    };
    ask_fps.clear();
    ask_fps.extend(at.map(|i| fps[i as usize]));
    out.clear();
    out.resize(ask_fps.len(), false);
    frozen.filter.contains_batch(ask_fps, out);
    Some(())
}
