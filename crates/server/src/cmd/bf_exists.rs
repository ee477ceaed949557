//! `BF.EXISTS key item`: whether the item was (maybe) added. A key that does not exist holds
//! nothing: `0`.
//!
//! ```text
//! > BF.EXISTS seen item1
//! :1                 (#t in RESP3)
//! > BF.EXISTS nokey item1
//! :0
//! ```
//!
//! On a URL namespace it is `-WRONGTYPE …` (RedisBloom answers 0 for a key of another type).

use std::sync::Arc;

use crate::app::{App, KeyKind, NamespaceCache};
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{CommandError, WRONGTYPE, engine_error};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `BF.EXISTS`.
pub const SPEC: CommandSpec = CommandSpec::new("bf.exists", 3)
    .flags(&["readonly", "fast"])
    .keys(1, 1, 1)
    .acl(&["@read", "@fast", "@bloom"])
    .module("bf")
    .complexity("O(k), where k is the number of hash functions used by the last sub-filter")
    .summary("Checks whether an item exists in a Bloom Filter")
    .since("1.0.0")
    .args(&[ArgSpec::new("key", ArgKind::Key), ArgSpec::new("item", ArgKind::String)]);

/// The `BF.EXISTS` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, bf_exists)
}

fn bf_exists(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    let key = args.next_bytes()?;
    let item = args.next_bytes()?;
    args.finish()?;
    let app = ctx.app;
    let cache = ctx.conn.extension::<NamespaceCache>();
    let found = match app.cached(cache, &key, || app.bloom(&key, None))? {
        Some(ns) if KeyKind::of(ns) != KeyKind::Bloom => {
            return Err(CommandError::custom(WRONGTYPE));
        }
        Some(ns) => ns.contains_bytes(&item).map_err(|e| engine_error(&e))?,
        None => false,
    };
    Ok(Frame::Boolean(found))
}
