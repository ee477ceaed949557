//! `BF.INSERT key [CAPACITY capacity] [ERROR error] [EXPANSION expansion] [NOCREATE]
//! [NONSCALING] ITEMS item [item …]`: creates the filter if needed, with these parameters, then
//! adds the items.
//!
//! ```text
//! > BF.INSERT seen CAPACITY 10000 ERROR 0.001 ITEMS a b
//! *2
//! :1
//! :1
//! > BF.INSERT missing NOCREATE ITEMS a
//! -ERR not found
//! > BF.INSERT x CAPACITY 0 ITEMS a
//! -Bad capacity
//! ```
//!
//! The parameters only matter when the filter is created. Errors are RedisBloom's, some of them
//! without an error code as RedisBloom sends them: a value that does not parse or is out of
//! range is `Bad capacity` / `Bad error rate` / `Bad expansion`. `EXPANSION 0` means
//! `NONSCALING`, as in RedisBloom. RedisBloom recognises an option by its first
//! letters; urlseen wants the whole keyword (any case). As in RedisBloom (and unlike its
//! documentation), `NOCREATE` with `CAPACITY` or `ERROR` is not an error.

use std::sync::Arc;

use bytes::Bytes;

use crate::app::{App, BloomParams};
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{
    BF_INSERT_BAD_CAPACITY, BF_INSERT_BAD_ERROR_RATE, BF_INSERT_BAD_EXPANSION,
    BF_INSERT_UNKNOWN_ARGUMENT, BF_MAX_EXPANSION, BF_NOT_FOUND, CommandError,
};
use crate::frame::parse_i64;
use crate::parse::{Parse, parse_f64};

/// The spec of `BF.INSERT`.
pub const SPEC: CommandSpec = CommandSpec::new("bf.insert", -4)
    .flags(&["write", "denyoom"])
    .keys(1, 1, 1)
    .acl(&["@write", "@bloom"])
    .module("bf")
    .complexity("O(k * n), where k is the number of hash functions and n is the number of items")
    .summary(
        "Adds one or more items to a Bloom Filter. A filter will be created if it does not exist",
    )
    .since("1.0.0")
    .args(&[
        ArgSpec::new("key", ArgKind::Key),
        ArgSpec::new("capacity", ArgKind::Integer).token("CAPACITY").optional(),
        ArgSpec::new("error", ArgKind::Double).token("ERROR").optional(),
        ArgSpec::new("expansion", ArgKind::Integer).token("EXPANSION").optional(),
        ArgSpec::new("nocreate", ArgKind::PureToken).token("NOCREATE").optional(),
        ArgSpec::new("nonscaling", ArgKind::PureToken).token("NONSCALING").optional(),
        ArgSpec::new("items", ArgKind::PureToken).token("ITEMS"),
        ArgSpec::new("item", ArgKind::String).multiple(),
    ]);

/// The `BF.INSERT` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, bf_insert)
}

fn bf_insert(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    let arity = || CommandError::WrongArity { command: SPEC.name.into() };
    let key = args.next_bytes()?;
    let defaults = ctx.app.config().bloom_defaults;
    let mut error_rate = defaults.error_rate;
    let mut capacity = i64::try_from(defaults.capacity).unwrap_or(i64::MAX);
    // 0: NONSCALING, as RedisBloom's `bf-expansion-factor`.
    let mut expansion = defaults.expansion.map_or(0, i64::from);
    let mut create = true;
    let mut nonscaling = false;
    let mut items_found = false;
    while let Some(arg) = args.next() {
        let is = |kw: &str| arg.eq_ignore_ascii_case(kw.as_bytes());
        if is("ITEMS") {
            items_found = true;
            break;
        } else if is("ERROR") {
            let value = args.next().ok_or_else(arity)?;
            error_rate = parse_f64(&value)
                .filter(|&e| e > 0.0 && e < 1.0)
                .ok_or(CommandError::custom(BF_INSERT_BAD_ERROR_RATE))?;
        } else if is("EXPANSION") {
            let value = args.next().ok_or_else(arity)?;
            expansion = parse_i64(&value)
                .filter(|e| (0..=BF_MAX_EXPANSION).contains(e))
                .ok_or(CommandError::custom(BF_INSERT_BAD_EXPANSION))?;
        } else if is("CAPACITY") {
            let value = args.next().ok_or_else(arity)?;
            capacity = parse_i64(&value)
                .filter(|&c| c >= 1)
                .ok_or(CommandError::custom(BF_INSERT_BAD_CAPACITY))?;
        } else if is("NOCREATE") {
            create = false;
        } else if is("NONSCALING") {
            nonscaling = true;
        } else {
            return Err(CommandError::custom(BF_INSERT_UNKNOWN_ARGUMENT));
        }
    }
    let items: Vec<Bytes> = args.collect();
    if !items_found || items.is_empty() {
        return Err(arity());
    }
    // Checked when parsed: what is left is in range (the defaults are).
    let capacity = u64::try_from(capacity).unwrap_or(1);
    let expansion = u32::try_from(expansion).ok().filter(|&e| e > 0);
    let params = BloomParams { error_rate, capacity, expansion: expansion.filter(|_| !nonscaling) };
    let ns = ctx
        .app
        .bloom(&key, create.then_some(&params))?
        .ok_or(CommandError::custom(BF_NOT_FOUND))?;
    super::bf_madd::add_items(ctx.app, ctx.conn, &ns, &items)
}
