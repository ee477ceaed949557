//! `BF.CARD key`: how many items were added and detected as new; `0` for a key that does not
//! exist.
//!
//! ```text
//! > BF.CARD seen
//! :2
//! > BF.CARD nokey
//! :0
//! ```

use std::sync::Arc;

use crate::app::App;
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `BF.CARD`.
pub const SPEC: CommandSpec = CommandSpec::new("bf.card", 2)
    .flags(&["readonly", "fast"])
    .keys(1, 1, 1)
    .acl(&["@read", "@fast", "@bloom"])
    .module("bf")
    .complexity("O(1)")
    .summary("Returns the cardinality of a Bloom filter")
    .since("2.4.4")
    .args(&[ArgSpec::new("key", ArgKind::Key)]);

/// The `BF.CARD` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, bf_card)
}

fn bf_card(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    let key = args.next_bytes()?;
    args.finish()?;
    let count = ctx.app.bloom(&key, None)?.map_or(0, |ns| ns.len());
    Ok(Frame::Integer(i64::try_from(count).unwrap_or(i64::MAX)))
}
