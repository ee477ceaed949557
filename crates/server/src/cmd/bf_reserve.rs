//! `BF.RESERVE key error_rate capacity [EXPANSION expansion] [NONSCALING]`: creates an empty
//! RedisBloom-compatible filter.
//!
//! ```text
//! > BF.RESERVE seen 0.001 1000000
//! +OK
//! > BF.RESERVE seen 0.01 10
//! -ERR item exists
//! > BF.RESERVE fixed 0.01 1000 NONSCALING
//! +OK
//! > BF.RESERVE bad 1.5 10
//! -ERR error rate must be in the range (0.000000, 1.000000)
//! ```
//!
//! The filter is a DSBF of raw items: `EXPANSION` (RedisBloom's range, 0 to 32768) is its
//! split fanout (1 becomes 2, above 1024 becomes 1024), 0 or `NONSCALING` makes it refuse new
//! items past `capacity`. Errors are RedisBloom's, in RedisBloom's order; an option RedisBloom
//! would silently ignore is `ERR syntax error` here.

use std::sync::Arc;

use crate::app::{App, BloomParams, KeyKind};
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{
    BF_BAD_CAPACITY, BF_BAD_ERROR_RATE, BF_BAD_EXPANSION, BF_CAPACITY_RANGE, BF_ERROR_RATE_RANGE,
    BF_EXPANSION_RANGE, BF_ITEM_EXISTS, BF_MAX_EXPANSION, BF_NO_EXPANSION, BF_NONSCALING_EXPANSION,
    CommandError, WRONGTYPE,
};
use crate::frame::{Frame, parse_i64};
use crate::parse::Parse;

/// The spec of `BF.RESERVE`.
pub const SPEC: CommandSpec = CommandSpec::new("bf.reserve", -4)
    .flags(&["write", "denyoom", "fast"])
    .keys(1, 1, 1)
    .acl(&["@write", "@fast", "@bloom"])
    .module("bf")
    .complexity("O(1)")
    .summary("Creates a new Bloom Filter")
    .since("1.0.0")
    .args(&[
        ArgSpec::new("key", ArgKind::Key),
        ArgSpec::new("error_rate", ArgKind::Double),
        ArgSpec::new("capacity", ArgKind::Integer),
        ArgSpec::new("expansion", ArgKind::Integer).token("EXPANSION").optional(),
        ArgSpec::new("nonscaling", ArgKind::PureToken).token("NONSCALING").optional(),
    ]);

/// The `BF.RESERVE` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, bf_reserve)
}

fn bf_reserve(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    if args.remaining() > 6 {
        return Err(CommandError::WrongArity { command: SPEC.name.into() });
    }
    let key = args.next_bytes()?;
    let error_rate = args.next_f64().map_err(|_| CommandError::custom(BF_BAD_ERROR_RATE))?;
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return Err(CommandError::custom(BF_ERROR_RATE_RANGE));
    }
    let capacity = args.next_int().map_err(|_| CommandError::custom(BF_BAD_CAPACITY))?;
    let capacity = u64::try_from(capacity)
        .ok()
        .filter(|&c| c > 0)
        .ok_or(CommandError::custom(BF_CAPACITY_RANGE))?;
    let mut nonscaling = false;
    let mut expansion = None;
    while let Some(arg) = args.next() {
        if arg.eq_ignore_ascii_case(b"NONSCALING") {
            nonscaling = true;
        } else if arg.eq_ignore_ascii_case(b"EXPANSION") {
            expansion = Some(args.next().ok_or(CommandError::custom(BF_NO_EXPANSION))?);
        } else {
            return Err(CommandError::Syntax);
        }
    }
    // RedisBloom's order: parse, 0 means NONSCALING, NONSCALING with another value is an
    // error, then the range.
    let expansion = match expansion {
        Some(raw) => {
            let e = parse_i64(&raw).ok_or(CommandError::custom(BF_BAD_EXPANSION))?;
            if e != 0 && nonscaling {
                return Err(CommandError::custom(BF_NONSCALING_EXPANSION));
            }
            if !(0..=BF_MAX_EXPANSION).contains(&e) {
                return Err(CommandError::custom(BF_EXPANSION_RANGE));
            }
            u32::try_from(e).ok().filter(|&e| e > 0)
        }
        None if nonscaling => None,
        None => ctx.app.config().bloom_defaults.expansion.or(Some(2)),
    };
    if let Some(ns) = ctx.app.namespace(&key) {
        return Err(CommandError::custom(match KeyKind::of(&ns) {
            KeyKind::Bloom => BF_ITEM_EXISTS,
            KeyKind::Url => WRONGTYPE,
        }));
    }
    ctx.app.create(&key, BloomParams { error_rate, capacity, expansion }.options())?;
    Ok(Frame::ok())
}
