//! `QUIT`: `+OK`, then the server closes the connection (after the reply is written).
//!
//! ```text
//! > QUIT
//! +OK
//! (connection closed)
//! ```

use crate::dispatch::{Command, CommandResult, CommandSpec, Ctx};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `QUIT`. Like Redis, it works before authentication and ignores arguments.
pub const SPEC: CommandSpec = CommandSpec::new("quit", -1)
    .flags(&["allow_busy", "noscript", "loading", "stale", "fast", "no_auth"])
    .acl(&["@fast", "@connection"])
    .group("connection")
    .summary("Closes the connection.")
    .since("1.0.0");

/// The `QUIT` command.
pub fn command<S>() -> Command<S> {
    Command::sync(SPEC, quit).not_queued()
}

fn quit<S>(ctx: Ctx<'_, S>, _args: Parse) -> CommandResult {
    ctx.conn.close_after_reply();
    Ok(Frame::ok())
}
