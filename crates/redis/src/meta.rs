//! The tree's metadata as stored in Redis: one hash per namespace, `urlseen:{<ns>}:meta`.
//!
//! ```text
//! format  2                                (1: see below)
//! params  "v2 bits=… k=… split_at=… …"     (fixed at creation; every client checks it)
//! version 7                                (bumped by every change of shape)
//! next    12                               (the next unused node id)
//! epoch   5f0c…                            (the incarnation: a random id made by CREATE)
//! e4      1                                (leaf 4 was given its identity: see CLAIM_META)
//! n0      I0:1,2,3                         (inner node at depth 0, children 1 2 3)
//! n1      L1                               (leaf at depth 1)
//! n2      S1:10,11                         (splitting: frozen parent, children 10 11)
//! n7      S2:12                            (a forget by host: one child, ...)
//! f7      3fa0c1d2                         (... which does not receive host hash 0x3fa0c1d2)
//! ```
//! Clients cache it and re-read it when a leaf refuses a write (frozen or retired); it only
//! ever changes by the scripts `CREATE`, `MARK_SPLITTING` and `MARK_INNER`.
//!
//! Format 2 (every namespace made since) is the in-process tree's: routed by ranges, and each
//! leaf sized by its depth and place ([`TreeParams::split_level`]), so the same options give
//! the same tree in Redis and in memory. A forget by host's single child keeps its parent's
//! size and range (it is the parent without one host, as the in-process tree rewrites a leaf
//! in place). Format 1 (namespaces made before it, params `v1 …`) routes per level and keeps
//! one leaf size; clients open it as it is. A client that reads only format 1 refuses a
//! format-2 namespace (its params differ too), so a mixed fleet cannot route apart.

use ::redis::Value;

use urlseen_engine::dsbf::routing::{Directory, Routing, Shape};
use urlseen_engine::dsbf::{Level, NodeId, TreeParams};

/// A node's role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum State {
    Leaf,
    /// Frozen parent whose log is being re-hashed into `children`.
    Splitting(Vec<NodeId>),
    Inner(Vec<NodeId>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Node {
    pub depth: u32,
    pub state: State,
}

/// The metadata format new namespaces are made with.
pub(crate) const FORMAT: u32 = 2;

/// One consistent read of the metadata hash.
#[derive(Debug, Clone)]
pub(crate) struct Meta {
    /// 1 (routed per level, leaves of one size) or 2 (routed by ranges, sized by place).
    pub format: u32,
    pub version: u64,
    pub params: String,
    /// The namespace's incarnation, made when it was created (empty: a namespace from before
    /// epochs, until a client opens it).
    pub epoch: String,
    /// Indexed by node id; `None` for ids not (yet) in use.
    pub nodes: Vec<Option<Node>>,
    /// Splits that are forgets by host: the node, and the host hash its children do not get.
    pub forgets: Vec<(NodeId, u32)>,
    /// Format 2: the leaves in range order (see [`Directory`]), set by [`Meta::size`].
    pub dir: Option<Directory>,
    /// Each node's filter size by node id, set by [`Meta::size`] (`None` for ids not in use).
    pub levels: Vec<Option<Level>>,
    /// When the namespace expires (Unix ms, field `expire_at`; `None`: never), and the number
    /// of the last change of it (`expire_seq`; 0: never set): see `lifetime.rs`.
    pub expire_at: Option<u64>,
    pub expire_seq: u64,
}

impl Meta {
    /// The metadata of no namespace yet (what a client holds before its first read).
    pub(crate) fn empty() -> Meta {
        Meta {
            format: FORMAT,
            version: 0,
            params: String::new(),
            epoch: String::new(),
            nodes: Vec::new(),
            forgets: Vec::new(),
            dir: None,
            levels: Vec::new(),
            expire_at: None,
            expire_seq: 0,
        }
    }

    /// How the tree routes: by its format.
    pub(crate) fn routing(&self) -> Routing {
        if self.format >= 2 { Routing::Ranges } else { Routing::Levels }
    }

    /// Sizes every node (and, format 2, builds the directory of ranges), taking the sizes of
    /// the nodes `known` has: a node's size never changes, and finding a spread size is a
    /// search (formula 4) that a metadata read should not repeat for every leaf.
    ///
    /// Format 1: every node has the first leaves' size. Format 2: the root's children have
    /// depth 1's; a split's children [`TreeParams::split_level`] at their depth and place
    /// (where their range starts), as in the in-process tree; the single child of a forget by
    /// host (any split into one: the in-process tree never makes one) its parent's, and the
    /// depths below it count from the parent (a forget in the in-process tree rewrites the
    /// leaf and adds no level).
    pub(crate) fn size(&mut self, params: &TreeParams, known: &Meta) {
        self.levels = vec![None; self.nodes.len()];
        self.dir = None;
        if self.format < 2 {
            for (level, node) in self.levels.iter_mut().zip(&self.nodes) {
                *level = node.as_ref().map(|_| params.level(1));
            }
            return;
        }
        let dir = Directory::build(self.nodes.len(), |id| match self.node(id).map(|n| &n.state) {
            Some(State::Inner(c)) => Shape::Inner(c),
            Some(State::Splitting(c)) => Shape::Splitting(c),
            _ => Shape::Leaf,
        });
        let reuse = known.format == self.format && known.epoch == self.epoch;
        // (node, its depth counted without forgets)
        let mut stack = vec![(0 as NodeId, 0u32)];
        while let Some((id, depth)) = stack.pop() {
            let children = match self.node(id).map(|n| &n.state) {
                Some(State::Inner(c) | State::Splitting(c)) => c.clone(),
                _ => continue,
            };
            // A split with one child is a forget by host (the in-process tree never splits
            // into one): its `f<id>` record, or none if the forget was refused after the
            // freeze, when the child holds the parent's entries as they were.
            let forget = children.len() == 1 && id != 0;
            let places = (id != 0 && !forget).then(|| dir.child_places(id, children.len()));
            for (i, &child) in children.iter().enumerate() {
                let child_depth = if forget { depth } else { depth + 1 };
                let level = match known.levels.get(child as usize) {
                    Some(&Some(level)) if reuse => level,
                    _ if forget => self.level(id).unwrap_or_else(|| params.level(1)),
                    _ => match &places {
                        Some(places) => params.split_level(child_depth, places[i]),
                        None => params.level(1),
                    },
                };
                if let Some(slot) = self.levels.get_mut(child as usize) {
                    *slot = Some(level);
                }
                stack.push((child, child_depth));
            }
        }
        self.dir = Some(dir);
    }

    /// Node `id`'s filter size (after [`Meta::size`]).
    pub(crate) fn level(&self, id: NodeId) -> Option<Level> {
        self.levels.get(id as usize).copied().flatten()
    }

    /// The host hash whose entries node `id`'s split drops (a forget by host), if it is one.
    pub(crate) fn forget(&self, id: NodeId) -> Option<u32> {
        self.forgets.iter().find(|(n, _)| *n == id).map(|(_, h)| *h)
    }

    pub(crate) fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id as usize).and_then(Option::as_ref)
    }

    /// The node whose children include `id`.
    pub(crate) fn parent(&self, id: NodeId) -> Option<NodeId> {
        self.nodes.iter().enumerate().find_map(|(p, n)| match n.as_ref().map(|n| &n.state) {
            Some(State::Splitting(c) | State::Inner(c)) if c.contains(&id) => Some(p as NodeId),
            _ => None,
        })
    }

    /// Every node that is a leaf now.
    pub(crate) fn leaves(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes.iter().enumerate().filter_map(|(id, n)| {
            matches!(n.as_ref().map(|n| &n.state), Some(State::Leaf)).then_some(id as NodeId)
        })
    }

    /// Every node that is splitting now.
    pub(crate) fn splitting(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes.iter().enumerate().filter_map(|(id, n)| {
            matches!(n.as_ref().map(|n| &n.state), Some(State::Splitting(_)))
                .then_some(id as NodeId)
        })
    }

    /// Parses an `HGETALL` reply, checking the shape: a root inner node at depth 0, every child
    /// present, one level deeper than its parent, reached once.
    pub(crate) fn parse(reply: &Value) -> Result<Meta, String> {
        let pairs: Vec<(&[u8], &[u8])> = match reply {
            Value::Array(items) => {
                let mut out = Vec::new();
                for pair in items.chunks(2) {
                    match pair {
                        [Value::BulkString(k), Value::BulkString(v)] => out.push((&k[..], &v[..])),
                        _ => return Err("HGETALL reply is not field/value strings".into()),
                    }
                }
                out
            }
            Value::Map(items) => {
                let mut out = Vec::new();
                for (k, v) in items {
                    match (k, v) {
                        (Value::BulkString(k), Value::BulkString(v)) => out.push((&k[..], &v[..])),
                        _ => return Err("HGETALL reply is not field/value strings".into()),
                    }
                }
                out
            }
            other => return Err(format!("HGETALL reply is not an array: {other:?}")),
        };
        if pairs.is_empty() {
            return Err("no such namespace".into());
        }
        // Node ids are dense (each split takes the next ones in the same script that writes
        // them), so a valid id is below the number of fields: a bigger one is corruption, and
        // must not size an allocation.
        let fields = pairs.len();
        let mut meta = Meta { format: 1, ..Meta::empty() };
        let text =
            |v: &[u8]| String::from_utf8(v.to_vec()).map_err(|_| "non-UTF-8 value".to_owned());
        for (k, v) in pairs {
            match k {
                b"format" => {
                    meta.format = match v {
                        b"1" => 1,
                        b"2" => 2,
                        _ => {
                            return Err(format!(
                                "metadata format {:?}, this build reads 1 and 2",
                                text(v)?
                            ));
                        }
                    };
                }
                b"params" => meta.params = text(v)?,
                b"epoch" => meta.epoch = text(v)?,
                b"version" => meta.version = text(v)?.parse().map_err(|_| "bad version")?,
                b"next" => {}
                b"expire_at" => {
                    let at: u64 = text(v)?.parse().map_err(|_| "bad expire_at")?;
                    meta.expire_at = (at > 0).then_some(at);
                }
                b"expire_seq" => {
                    meta.expire_seq = text(v)?.parse().map_err(|_| "bad expire_seq")?;
                }
                [b'n', id @ ..] => {
                    let id: usize = text(id)?.parse().map_err(|_| "bad node id")?;
                    if id >= fields {
                        return Err(format!("node id {id} out of range ({fields} fields)"));
                    }
                    if meta.nodes.len() <= id {
                        meta.nodes.resize(id + 1, None);
                    }
                    meta.nodes[id] = Some(parse_node(&text(v)?)?);
                }
                [b'f', id @ ..] => {
                    let id: NodeId = text(id)?.parse().map_err(|_| "bad forget node id")?;
                    let h = u32::from_str_radix(&text(v)?, 16).map_err(|_| "bad forget hash")?;
                    meta.forgets.push((id, h));
                }
                _ => {}
            }
        }
        meta.check()?;
        Ok(meta)
    }

    fn check(&self) -> Result<(), String> {
        match self.node(0) {
            Some(Node { depth: 0, state: State::Inner(_) }) => {}
            _ => return Err("the root is not an inner node at depth 0".into()),
        }
        let mut reached = vec![false; self.nodes.len()];
        let mut stack = vec![0u32];
        while let Some(id) = stack.pop() {
            let node = self.node(id).ok_or(format!("node {id} is missing"))?;
            let seen = reached.get_mut(id as usize).ok_or(format!("node {id} out of range"))?;
            if std::mem::replace(seen, true) {
                return Err(format!("node {id} is reached twice"));
            }
            if let State::Splitting(c) | State::Inner(c) = &node.state {
                if c.is_empty() {
                    return Err(format!("node {id} has no children"));
                }
                for &child in c {
                    let n = self.node(child).ok_or(format!("child {child} of {id} is missing"))?;
                    if n.depth != node.depth + 1 {
                        return Err(format!("child {child} of {id} has depth {}", n.depth));
                    }
                    stack.push(child);
                }
            }
        }
        Ok(())
    }
}

/// `L<depth>`, `S<depth>:<child>,…` or `I<depth>:<child>,…`.
pub(crate) fn parse_node(rec: &str) -> Result<Node, String> {
    let bad = || format!("bad node record {rec:?}");
    let (kind, rest) = rec.split_at_checked(1).ok_or_else(bad)?;
    let (depth, children) = match rest.split_once(':') {
        Some((d, c)) => (d, Some(c)),
        None => (rest, None),
    };
    let depth: u32 = depth.parse().map_err(|_| bad())?;
    let children = || -> Result<Vec<NodeId>, String> {
        children
            .ok_or_else(bad)?
            .split(',')
            .map(|c| c.parse::<NodeId>().map_err(|_| bad()))
            .collect()
    };
    let state = match kind {
        "L" if rest.parse::<u32>().is_ok() => State::Leaf,
        "S" => State::Splitting(children()?),
        "I" => State::Inner(children()?),
        _ => return Err(bad()),
    };
    Ok(Node { depth, state })
}

#[cfg(test)]
mod tests {
    use urlseen_engine::NamespaceOptions;

    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn parses_and_checks_a_tree() {
        let reply = Value::Array(
            [
                "format", "1", "params", "p", "version", "3", "next", "6", "n0", "I0:1,2", "n1",
                "L1", "n2", "S1:4,5", "n4", "L2", "n5", "L2", "f2", "0000004d",
            ]
            .iter()
            .map(|s| bulk(s))
            .collect(),
        );
        let meta = Meta::parse(&reply).unwrap();
        assert_eq!(meta.version, 3);
        assert_eq!(meta.node(2).unwrap().state, State::Splitting(vec![4, 5]));
        assert_eq!(meta.parent(5), Some(2));
        assert_eq!(meta.leaves().collect::<Vec<_>>(), [1, 4, 5]);
        assert_eq!(meta.splitting().collect::<Vec<_>>(), [2]);
        assert_eq!((meta.forget(2), meta.forget(1)), (Some(0x4d), None));
    }

    fn meta(fields: &[&str]) -> Meta {
        Meta::parse(&Value::Array(fields.iter().map(|s| bulk(s)).collect())).unwrap()
    }

    #[test]
    fn format_2_sizes_nodes_by_depth_and_place_and_a_forget_keeps_its_parents() {
        let options = NamespaceOptions { capacity: 1_000, ..Default::default() };
        let params = TreeParams::from(&options);
        // Leaf 1 split into 3 and 4; leaf 2 forgot a host into 5, which split into 8 and 9;
        // leaf 4 split into 6 and 7; leaf 3's forget was refused after its freeze (one child,
        // 10, holding all of it, and no `f3`).
        let mut tree = meta(&[
            "format", "2", "params", "p", "version", "4", "n0", "I0:1,2", "n1", "I1:3,4", "n2",
            "I1:5", "f2", "0000004d", "n3", "I2:10", "n4", "S2:6,7", "n5", "I2:8,9", "n6", "L3",
            "n7", "L3", "n8", "L3", "n9", "L3", "n10", "L3",
        ]);
        tree.size(&params, &Meta::empty());
        let dir = tree.dir.clone().unwrap();
        let places = |id, n| dir.child_places(id, n);
        assert_eq!(tree.level(1), Some(params.level(1)));
        assert_eq!(tree.level(3), Some(params.split_level(2, places(1, 2)[0])));
        assert_eq!(tree.level(7), Some(params.split_level(3, places(4, 2)[1])));
        assert_eq!(tree.level(5), tree.level(2), "a forget's child is its parent rewritten");
        assert_eq!(tree.level(10), tree.level(3), "so is a refused forget's");
        // Below a forget, depths count from the parent: 8 is a split child at depth 2.
        assert_eq!(tree.level(8), Some(params.split_level(2, places(5, 2)[0])));
        assert!(tree.level(7).unwrap().bits > tree.level(1).unwrap().bits, "leaves grow");
        // Sizes already known are taken as they are (a node's size never changes).
        let mut known = Meta { levels: vec![None; 11], ..tree.clone() };
        known.levels[6] = Some(params.level(9));
        let mut again = tree.clone();
        again.size(&params, &known);
        assert_eq!(again.level(6), Some(params.level(9)));
        assert_eq!(again.level(7), tree.level(7));
        // Format 1: one size.
        let mut old = Meta { format: 1, ..tree.clone() };
        old.size(&params, &Meta::empty());
        assert!(old.dir.is_none());
        assert!((1..11).all(|id| old.level(id) == Some(params.level(1))));
    }

    #[test]
    fn rejects_bad_shapes_without_panicking() {
        for fields in [
            vec!["format", "1", "n0", "L0"],
            vec!["format", "1", "n0", "I0:1"],
            vec!["format", "1", "n0", "I0:1", "n1", "L2"],
            vec!["format", "1", "n0", "I0:0"],
            vec!["format", "3", "n0", "I0:1", "n1", "L1"],
            vec!["format", "1", "n0", "X"],
            vec!["format", "1", "n0", ""],
            vec!["format", "1", "n99999999", "L1"],
            // A valid tree with one far-off id, which would have sized a 16M-entry table.
            vec!["format", "1", "n0", "I0:1", "n1", "L1", "n16777216", "L1"],
        ] {
            let reply = Value::Array(fields.iter().map(|s| bulk(s)).collect());
            assert!(Meta::parse(&reply).is_err(), "{fields:?}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        /// Metadata a hostile or damaged Redis could hold (a tree grown by splits of any
        /// fanout, forget records on any node, either format, and maybe one record replaced
        /// by an arbitrary one) is refused with a reason or sized, never a panic; a sized tree
        /// has a size for every node reached from the root.
        #[test]
        fn any_metadata_is_refused_or_sized_without_panicking(
            format in 1u8..=3,
            first in 1usize..4,
            splits in proptest::collection::vec((0usize..64, 1usize..5), 0..12),
            forgets in proptest::collection::vec(0u32..40, 0..4),
            damage in proptest::option::of((0usize..64, 0u8..4, 0u32..8, 0u32..40)),
        ) {
            // records[id] = (kind, depth, children)
            let mut records: Vec<(char, u32, Vec<u32>)> = vec![('I', 0, (1..=first as u32).collect())];
            records.extend((0..first).map(|_| ('L', 1, Vec::new())));
            for (pick, fanout) in splits {
                let leaves: Vec<usize> =
                    (0..records.len()).filter(|&id| records[id].0 == 'L').collect();
                let id = leaves[pick % leaves.len()];
                let depth = records[id].1;
                let next = records.len() as u32;
                records[id] = ('I', depth, (next..next + fanout as u32).collect());
                records.extend((0..fanout).map(|_| ('L', depth + 1, Vec::new())));
            }
            if let Some((at, kind, depth, child)) = damage {
                let at = at % records.len();
                records[at] = (['L', 'I', 'S', 'X'][kind as usize], depth, vec![child]);
            }
            let mut fields = vec!["format".to_owned(), format.to_string()];
            for (id, (kind, depth, children)) in records.iter().enumerate() {
                let list: Vec<String> = children.iter().map(u32::to_string).collect();
                let rec = match kind {
                    'L' => format!("L{depth}"),
                    other => format!("{other}{depth}:{}", list.join(",")),
                };
                fields.extend([format!("n{id}"), rec]);
            }
            for id in forgets {
                fields.extend([format!("f{id}"), "0000004d".to_owned()]);
            }
            let reply = Value::Array(fields.iter().map(|s| bulk(s)).collect());
            if let Ok(mut meta) = Meta::parse(&reply) {
                let options = NamespaceOptions { capacity: 1_000, ..Default::default() };
                meta.size(&TreeParams::from(&options), &Meta::empty());
                // Every node under the root (a damaged record can orphan others: never routed
                // to, they need no size).
                let mut stack = vec![0 as NodeId];
                while let Some(id) = stack.pop() {
                    if let Some(State::Inner(c) | State::Splitting(c)) = meta.node(id).map(|n| &n.state) {
                        for &child in c {
                            proptest::prop_assert!(meta.level(child).is_some(), "node {} unsized", child);
                            stack.push(child);
                        }
                    }
                }
            }
        }
    }
}
