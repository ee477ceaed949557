//! `MULTI`: opens a transaction. The commands after it are queued (`+QUEUED`) until `EXEC`
//! runs them or `DISCARD` drops them; see [`transaction`](crate::transaction).
//!
//! ```text
//! > MULTI
//! +OK
//! > URL.SEEN jobs https://a.example/
//! +QUEUED
//! > MULTI
//! -ERR MULTI calls can not be nested
//! ```

use crate::dispatch::{Command, CommandResult, CommandSpec, Ctx};
use crate::error::{CommandError, MULTI_NESTED};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `MULTI`.
pub const SPEC: CommandSpec = CommandSpec::new("multi", 1)
    .flags(&["noscript", "loading", "stale", "fast", "allow_busy"])
    .acl(&["@fast", "@transaction"])
    .group("transactions")
    .summary("Starts a transaction.")
    .since("1.2.0");

/// The `MULTI` command.
pub fn command<S>() -> Command<S> {
    Command::sync(SPEC, multi).not_queued()
}

fn multi<S>(ctx: Ctx<'_, S>, args: Parse) -> CommandResult {
    args.finish()?;
    if !ctx.conn.begin_multi() {
        return Err(CommandError::custom(MULTI_NESTED));
    }
    Ok(Frame::ok())
}
