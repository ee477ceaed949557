//! `BF.MADD key item [item …]`: adds items, creating the filter with the defaults if the key
//! does not exist. One engine batch call for all items.
//!
//! ```text
//! > BF.MADD seen a b a
//! *3
//! :1
//! :1
//! :0
//! ```
//!
//! A `NONSCALING` filter that fills up ends the reply with `-ERR non scaling filter is full` at
//! the first item it refuses; the items after it are not added, as in RedisBloom.

use std::sync::Arc;

use bytes::Bytes;

use crate::app::App;
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{BF_FULL, BF_NOT_FOUND, CommandError};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `BF.MADD`.
pub const SPEC: CommandSpec = CommandSpec::new("bf.madd", -3)
    .flags(&["write", "denyoom"])
    .keys(1, 1, 1)
    .acl(&["@write", "@bloom"])
    .group("bf")
    .summary(
        "Adds one or more items to a Bloom Filter. A filter will be created if it does not exist",
    )
    .since("1.0.0")
    .args(&[ArgSpec::new("key", ArgKind::Key), ArgSpec::new("item", ArgKind::String).multiple()]);

/// The `BF.MADD` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, bf_madd)
}

fn bf_madd(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    let key = args.next_bytes()?;
    let items: Vec<Bytes> = args.collect();
    let app = ctx.app;
    let ns = app
        .bloom(&key, Some(&app.config().bloom_defaults))?
        .ok_or(CommandError::custom(BF_NOT_FOUND))?;
    add_items(app, &ns, &items)
}

/// Adds `items` and builds RedisBloom's reply: one boolean per item added, then the
/// full-filter error if the filter refused one. Shared with `BF.INSERT`.
pub(crate) fn add_items(
    app: &App,
    ns: &urlseen_engine::Namespace,
    items: &[Bytes],
) -> CommandResult {
    let fps: Vec<u64> = items.iter().map(|item| ns.fingerprint_bytes(item)).collect();
    let mut seen = vec![false; fps.len()];
    let done = app.insert(ns, &fps, &mut seen, true)?.done;
    let mut reply: Vec<Frame> = seen.iter().take(done).map(|&s| Frame::Boolean(!s)).collect();
    if done < fps.len() {
        reply.push(CommandError::custom(BF_FULL).to_frame());
    }
    Ok(Frame::Array(reply))
}
