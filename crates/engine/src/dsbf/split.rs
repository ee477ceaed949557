//! A leaf's split, one protocol for every home of a tree (in process: [`crate::tree`]; in
//! Redis: the `urlseen-redis` crate, which is why this module is public, and hidden).
//!
//! A node passes through three stages, and any step can be resumed after any other:
//! 1. **Leaf.** A leaf whose log reaches its split point is *frozen*: it takes no more records,
//!    its filter and log answer as they are, and its children (empty, each sized by
//!    [`crate::tree::TreeParams::split_level`] for its place) are published under it. The node
//!    is now *splitting*: writers route past it to the children, after asking its frozen filter.
//! 2. **Splitting.** Its frozen log is *migrated* into the children in bounded chunks, each record
//!    to the child that [`crate::dsbf::routing::Paths`] names for it, while inserts and queries go on.
//! 3. **Inner.** Once every record is in a child, the node is *retired*: published inner, then
//!    its frozen filter and log are dropped.
//!
//! No false negative can appear: a record stays in the frozen filter until the node is inner,
//! and it is in a child before that. What differs between the homes is how each step is made
//! safe, not the steps. In process, the steps run under the tree's locks, and a child that fills
//! during a migration is frozen first (so no leaf passes its split point). In Redis, each step is
//! an idempotent script under the node's lock (which expires, so another client can take over),
//! each child keeps a migration cursor, and a child splits only after its parent is inner.
//! [`SplitHome`] is the seam: a home implements the three steps, and [`run`] drives them.

use super::NodeId;

/// Where a node stands, as its home publishes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Leaf,
    Splitting,
    Inner,
}

/// What freezing a leaf did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freeze {
    /// The leaf is frozen and its children are published: the node is splitting.
    Frozen,
    /// Nothing to do now, and why: [`SplitOutcome::NotFull`] (below its split point; in
    /// process also when another thread froze it first), [`SplitOutcome::Done`] (inner
    /// already), [`SplitOutcome::WaitingForParent`], or [`SplitOutcome::Stopped`] (a test's
    /// stop after the freeze).
    Not(SplitOutcome),
}

/// What one migration step achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// More of the frozen log is left.
    More,
    /// The whole log is in the children.
    Done,
    /// The split stops where it is, the frozen filter answering still: the frozen log could not
    /// be read (in process; the leaf store is marked failed), or a test said so (Redis).
    Stopped,
}

/// What one split attempt did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// `Busy` and `WaitingForParent` happen in Redis only (crates/redis).
pub enum SplitOutcome {
    /// The node is now inner (by us or by someone before us).
    Done,
    /// The leaf is below its split point.
    NotFull,
    /// Another worker holds the node's lock.
    Busy,
    /// The leaf's parent is still splitting; it splits after its parent is done.
    WaitingForParent,
    /// Stopped on purpose by `RedisNamespace::split_until` (feature `testing`), lock kept; or,
    /// in process, stopped because the frozen log could not be read.
    Stopped,
}

/// A home of a tree's nodes, as a split sees it: the three steps of [`run`]. Each is safe to
/// repeat, and to call after a step of another worker that stopped anywhere.
pub trait SplitHome {
    type Error;

    /// Where node `id` stands.
    fn stage(&self, id: NodeId) -> Result<Stage, Self::Error>;

    /// Stage 1: freezes leaf `id` and publishes its children, if it is past its split point.
    fn freeze(&self, id: NodeId) -> Result<Freeze, Self::Error>;

    /// Stage 2: moves the next bounded chunk of splitting node `id`'s frozen log into its
    /// children.
    fn migrate_step(&self, id: NodeId) -> Result<Step, Self::Error>;

    /// Stage 3: publishes fully migrated node `id` inner, then drops its frozen filter and log.
    fn retire(&self, id: NodeId) -> Result<(), Self::Error>;
}

/// Takes node `id` from wherever it stands to inner: freezes it (if a full leaf), migrates its
/// frozen log chunk by chunk, and retires it.
pub fn run<H: SplitHome>(home: &H, id: NodeId) -> Result<SplitOutcome, H::Error> {
    match home.stage(id)? {
        Stage::Inner => {
            // Published inner by a worker that may have stopped before dropping the frozen
            // parts.
            home.retire(id)?;
            return Ok(SplitOutcome::Done);
        }
        Stage::Leaf => match home.freeze(id)? {
            Freeze::Frozen => {}
            Freeze::Not(outcome) => return Ok(outcome),
        },
        Stage::Splitting => {}
    }
    loop {
        match home.migrate_step(id)? {
            Step::More => {}
            Step::Done => break,
            Step::Stopped => return Ok(SplitOutcome::Stopped),
        }
    }
    home.retire(id)?;
    Ok(SplitOutcome::Done)
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    /// A home in a few cells: node 0 with a log of `len` records, moved `chunk` at a time.
    struct Toy {
        stage: RefCell<Stage>,
        full: bool,
        len: usize,
        moved: RefCell<usize>,
        chunk: usize,
        calls: RefCell<Vec<&'static str>>,
    }

    impl Toy {
        fn new(stage: Stage, full: bool) -> Self {
            Toy {
                stage: RefCell::new(stage),
                full,
                len: 10,
                moved: RefCell::new(0),
                chunk: 4,
                calls: RefCell::new(Vec::new()),
            }
        }
    }

    impl SplitHome for Toy {
        type Error = ();

        fn stage(&self, _: NodeId) -> Result<Stage, ()> {
            Ok(*self.stage.borrow())
        }

        fn freeze(&self, _: NodeId) -> Result<Freeze, ()> {
            self.calls.borrow_mut().push("freeze");
            if !self.full {
                return Ok(Freeze::Not(SplitOutcome::NotFull));
            }
            *self.stage.borrow_mut() = Stage::Splitting;
            Ok(Freeze::Frozen)
        }

        fn migrate_step(&self, _: NodeId) -> Result<Step, ()> {
            assert_eq!(*self.stage.borrow(), Stage::Splitting, "migrated a node not splitting");
            self.calls.borrow_mut().push("migrate");
            let mut moved = self.moved.borrow_mut();
            *moved = (*moved + self.chunk).min(self.len);
            Ok(if *moved == self.len { Step::Done } else { Step::More })
        }

        fn retire(&self, _: NodeId) -> Result<(), ()> {
            self.calls.borrow_mut().push("retire");
            assert_eq!(*self.moved.borrow(), self.len, "retired before the whole log moved");
            *self.stage.borrow_mut() = Stage::Inner;
            Ok(())
        }
    }

    #[test]
    fn a_full_leaf_is_frozen_migrated_in_chunks_and_retired() {
        let toy = Toy::new(Stage::Leaf, true);
        assert_eq!(run(&toy, 0), Ok(SplitOutcome::Done));
        assert_eq!(*toy.calls.borrow(), ["freeze", "migrate", "migrate", "migrate", "retire"]);
        assert_eq!(*toy.stage.borrow(), Stage::Inner);
    }

    #[test]
    fn a_leaf_below_its_split_point_is_left_alone() {
        let toy = Toy::new(Stage::Leaf, false);
        assert_eq!(run(&toy, 0), Ok(SplitOutcome::NotFull));
        assert_eq!(*toy.calls.borrow(), ["freeze"]);
        assert_eq!(*toy.stage.borrow(), Stage::Leaf);
    }

    #[test]
    fn a_split_resumes_where_it_stands() {
        let splitting = Toy::new(Stage::Splitting, true);
        *splitting.moved.borrow_mut() = 8;
        assert_eq!(run(&splitting, 0), Ok(SplitOutcome::Done));
        assert_eq!(*splitting.calls.borrow(), ["migrate", "retire"]);

        let inner = Toy::new(Stage::Inner, true);
        *inner.moved.borrow_mut() = 10;
        assert_eq!(run(&inner, 0), Ok(SplitOutcome::Done));
        assert_eq!(*inner.calls.borrow(), ["retire"]);
    }
}
