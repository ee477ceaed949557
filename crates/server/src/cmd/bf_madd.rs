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
//! A `NONSCALING` filter without room for every new item of the command answers
//! `-ERR non scaling filter is full` and adds none of them (RedisBloom adds items until the
//! filter is full and puts the error in the array: see docs/protocol.md, "What a reply says
//! was done").

use std::sync::Arc;

use bytes::Bytes;

use crate::app::App;
use crate::client::ConnState;
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{BF_NOT_FOUND, CommandError};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `BF.MADD`.
pub const SPEC: CommandSpec = CommandSpec::new("bf.madd", -3)
    .flags(&["write", "denyoom"])
    .keys(1, 1, 1)
    .acl(&["@write", "@bloom"])
    .module("bf")
    .complexity("O(k * n), where k is the number of hash functions and n is the number of items")
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
    add_items(ctx.app, ctx.conn, &ns, &items)
}

/// Adds `items` and builds RedisBloom's reply: one boolean per item, `true` when it is new.
/// All or nothing ([`App::insert`]). Shared with `BF.INSERT`.
/// Recorded once the reply is delivered ([`App::insert_on_reply`]).
pub(crate) fn add_items(
    app: &App,
    conn: &mut ConnState,
    ns: &Arc<urlseen_engine::Namespace>,
    items: &[Bytes],
) -> CommandResult {
    let fps: Vec<u64> = items.iter().map(|item| ns.fingerprint_bytes(item)).collect();
    let mut seen = vec![false; fps.len()];
    let mut on_reply = Vec::new();
    let inserted = app.insert_on_reply(ns, &fps, &mut seen, &mut on_reply);
    conn.defer_all_until_replied(on_reply);
    inserted?;
    Ok(Frame::Array(seen.iter().map(|&s| Frame::Boolean(!s)).collect()))
}
