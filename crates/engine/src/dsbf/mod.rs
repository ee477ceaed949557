//! The DSBF's geometry, which both of a tree's homes share: the tree in this process
//! ([`crate::tree`]) and the `urlseen-redis` crate, whose namespaces are the same tree kept in
//! Redis. No I/O here: the sizes and seeds of a tree (`params`: [`TreeParams`], `level_seed`,
//! `probe_seed`), how a fingerprint finds its leaf (`routing`), the split protocol a home
//! drives (`split`) and the dump format with its cursor (`dump`).
//!
//! Public for that crate, and no part of the engine's API (hidden from the docs): free to
//! change in any release.

pub mod dump;
pub mod params;
pub mod routing;
pub mod split;

pub use params::{Level, SPLIT_SPREAD, TreeParams};

/// Index of a node in a tree: the root is 0, and a split's children take the next free ids.
pub type NodeId = u32;
