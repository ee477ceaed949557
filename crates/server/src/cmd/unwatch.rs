//! `UNWATCH`: forgets the keys `WATCH` registered. Queued inside `MULTI`, as in Redis.
//!
//! ```text
//! > UNWATCH
//! +OK
//! ```

use crate::dispatch::{Command, CommandResult, CommandSpec, Ctx};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `UNWATCH`.
pub const SPEC: CommandSpec = CommandSpec::new("unwatch", 1)
    .flags(&["noscript", "loading", "stale", "fast", "allow_busy"])
    .acl(&["@fast", "@transaction"])
    .group("transactions")
    .summary("Forgets about watched keys of a transaction.")
    .since("2.2.0");

/// The `UNWATCH` command.
pub fn command<S>() -> Command<S> {
    Command::sync(SPEC, unwatch)
}

fn unwatch<S>(ctx: Ctx<'_, S>, args: Parse) -> CommandResult {
    args.finish()?;
    ctx.conn.unwatch();
    Ok(Frame::ok())
}
