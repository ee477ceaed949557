//! `DISCARD`: drops the transaction's queue and forgets the watched keys.
//!
//! ```text
//! > DISCARD
//! -ERR DISCARD without MULTI
//! > MULTI
//! +OK
//! > BF.ADD k a
//! +QUEUED
//! > DISCARD
//! +OK
//! ```

use crate::dispatch::{Command, CommandResult, CommandSpec, Ctx};
use crate::error::{CommandError, DISCARD_WITHOUT_MULTI};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `DISCARD`.
pub const SPEC: CommandSpec = CommandSpec::new("discard", 1)
    .flags(&["noscript", "loading", "stale", "fast", "allow_busy"])
    .acl(&["@fast", "@transaction"])
    .group("transactions")
    .summary("Discards a transaction.")
    .since("2.0.0");

/// The `DISCARD` command.
pub fn command<S>() -> Command<S> {
    Command::sync(SPEC, discard).not_queued()
}

fn discard<S>(ctx: Ctx<'_, S>, args: Parse) -> CommandResult {
    args.finish()?;
    if ctx.conn.take_multi().is_none() {
        return Err(CommandError::custom(DISCARD_WITHOUT_MULTI));
    }
    ctx.conn.unwatch();
    Ok(Frame::ok())
}
