//! `BF.INFO key [CAPACITY | SIZE | FILTERS | ITEMS | EXPANSION]`: the filter's parameters and
//! fill, RedisBloom's five fields.
//!
//! ```text
//! > BF.INFO seen
//! *10                               (%5 map in RESP3)
//! +Capacity
//! :100
//! +Size
//! :584
//! +Number of filters
//! :1
//! +Number of items inserted
//! :2
//! +Expansion rate
//! :2                                ($-1 null for a NONSCALING filter)
//! > BF.INFO seen CAPACITY
//! *1
//! :100
//! > BF.INFO nokey
//! -ERR not found
//! ```
//!
//! One field alone is a one-element array, as RedisBloom sends it. What the fields mean for a
//! DSBF:
//!
//! - `Capacity`: the capacity it was created with until the tree first splits; then the sum of
//!   the leaves' capacities (what it holds before splitting again), never less than the former.
//!   A `NONSCALING` filter's capacity is the one it was created with: it refuses more.
//! - `Size`: bytes of RAM the key holds: its filters and record buffers (a DSBF keeps each
//!   leaf's fingerprints so that it can split it; without `--data` they spill to a temporary
//!   directory, so they are not counted here).
//! - `Number of filters`: the leaf filters that hold memory (a leaf's filter is allocated by its
//!   first item), at least 1: a fresh `BF.RESERVE` has 1, as in RedisBloom.
//! - `Number of items inserted`: items added and detected as new.
//! - `Expansion rate`: the split fanout; null for `NONSCALING`.

use std::sync::Arc;

use crate::app::App;
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{BF_INFO_INVALID_VALUE, BF_NOT_FOUND, CommandError};
use crate::frame::Frame;
use crate::parse::Parse;
use urlseen_engine::{Namespace, SplitMode};

/// The spec of `BF.INFO`.
pub const SPEC: CommandSpec = CommandSpec::new("bf.info", -2)
    .flags(&["readonly", "fast"])
    .keys(1, 1, 1)
    .acl(&["@read", "@fast", "@bloom"])
    .module("bf")
    .complexity("O(1)")
    .summary("Returns information about a Bloom Filter")
    .since("1.0.0")
    .args(&[
        ArgSpec::new("key", ArgKind::Key),
        ArgSpec::one_of(
            "single_value",
            &[
                ArgSpec::new("capacity", ArgKind::PureToken).token("CAPACITY"),
                ArgSpec::new("size", ArgKind::PureToken).token("SIZE"),
                ArgSpec::new("filters", ArgKind::PureToken).token("FILTERS"),
                ArgSpec::new("items", ArgKind::PureToken).token("ITEMS"),
                ArgSpec::new("expansion", ArgKind::PureToken).token("EXPANSION"),
            ],
        )
        .optional(),
    ]);

/// The `BF.INFO` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, bf_info)
}

/// The five numbers of `BF.INFO`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BloomInfo {
    /// `Capacity`.
    pub capacity: u64,
    /// `Size`, in bytes.
    pub size: u64,
    /// `Number of filters`.
    pub filters: u64,
    /// `Number of items inserted`.
    pub items: u64,
    /// `Expansion rate`; `None` for a non-scaling filter.
    pub expansion: Option<u64>,
}

impl BloomInfo {
    /// The numbers of a namespace.
    pub fn of(ns: &Namespace) -> BloomInfo {
        let s = ns.stats();
        let options = ns.options();
        let nonscaling = options.split.mode == SplitMode::Never;
        let grown = s.leaves.iter().map(|l| l.capacity).fold(0u64, u64::saturating_add);
        let capacity = if nonscaling || s.splits_started == 0 {
            options.capacity
        } else {
            grown.max(options.capacity)
        };
        BloomInfo {
            capacity,
            // What it holds, or once its filters exist what they take: RedisBloom allocates a
            // filter at `BF.RESERVE` and reports it, where a leaf here is allocated by its first
            // item.
            size: s.memory_bytes.max(s.filter_reserved_bytes),
            // As RedisBloom counts sub-filters: those that exist, so a fresh key has one. A
            // leaf's filter exists from its first item.
            filters: (s.leaves.iter().filter(|l| l.allocated).count() as u64).max(1),
            items: s.count,
            expansion: (!nonscaling).then_some(u64::from(s.split_fanout)),
        }
    }
}

fn int(n: u64) -> Frame {
    Frame::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

fn bf_info(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    if args.remaining() > 2 {
        return Err(CommandError::WrongArity { command: SPEC.name.into() });
    }
    let key = args.next_bytes()?;
    let field = args.next();
    let ns = ctx.app.bloom(&key, None)?.ok_or(CommandError::custom(BF_NOT_FOUND))?;
    let info = BloomInfo::of(&ns);
    let expansion = info.expansion.map_or(Frame::Null, int);
    let Some(field) = field else {
        return Ok(Frame::Map(vec![
            (Frame::simple("Capacity"), int(info.capacity)),
            (Frame::simple("Size"), int(info.size)),
            (Frame::simple("Number of filters"), int(info.filters)),
            (Frame::simple("Number of items inserted"), int(info.items)),
            (Frame::simple("Expansion rate"), expansion),
        ]));
    };
    let value = match field.to_ascii_lowercase().as_slice() {
        b"capacity" => int(info.capacity),
        b"size" => int(info.size),
        b"filters" => int(info.filters),
        b"items" => int(info.items),
        b"expansion" => expansion,
        _ => return Err(CommandError::custom(BF_INFO_INVALID_VALUE)),
    };
    Ok(Frame::Array(vec![value]))
}
