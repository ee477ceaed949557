//! `BF.MEXISTS key item [item …]`: [`BF.EXISTS`](super::bf_exists) for many items, one engine
//! batch call.
//!
//! ```text
//! > BF.MEXISTS seen item1 nope
//! *2
//! :1
//! :0
//! ```

use std::sync::Arc;

use crate::app::App;
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `BF.MEXISTS`.
pub const SPEC: CommandSpec = CommandSpec::new("bf.mexists", -3)
    .flags(&["readonly", "fast"])
    .keys(1, 1, 1)
    .acl(&["@read", "@fast", "@bloom"])
    .module("bf")
    .complexity("O(k * n), where k is the number of hash functions and n is the number of items")
    .summary("Checks whether one or more items exist in a Bloom Filter")
    .since("1.0.0")
    .args(&[ArgSpec::new("key", ArgKind::Key), ArgSpec::new("item", ArgKind::String).multiple()]);

/// The `BF.MEXISTS` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, bf_mexists)
}

fn bf_mexists(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    let key = args.next_bytes()?;
    let mut found = vec![false; args.remaining()];
    if let Some(ns) = ctx.app.bloom(&key, None)? {
        let fps: Vec<u64> = args.map(|item| ns.fingerprint_bytes(&item)).collect();
        ns.contains_fingerprints(&fps, &mut found)?;
    }
    Ok(Frame::Array(found.into_iter().map(Frame::Boolean).collect()))
}
