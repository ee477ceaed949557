//! `WATCH key [key …]`: the next `EXEC` runs nothing and answers the null array if a write
//! command changes one of these keys (namespaces) first, by any client, this one included.
//! `FLUSHALL`/`FLUSHDB` count as writing every key.
//!
//! ```text
//! > WATCH jobs
//! +OK
//! > MULTI
//! +OK
//! > WATCH other
//! -ERR WATCH inside MULTI is not allowed
//! ```

use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{CommandError, WATCH_IN_MULTI};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `WATCH`.
pub const SPEC: CommandSpec = CommandSpec::new("watch", -2)
    .flags(&["noscript", "loading", "stale", "fast", "allow_busy"])
    .keys(1, -1, 1)
    .acl(&["@fast", "@transaction"])
    .group("transactions")
    .summary("Monitors changes to keys to determine the execution of a transaction.")
    .since("2.2.0")
    .args(&[ArgSpec::new("key", ArgKind::Key).multiple()]);

/// The `WATCH` command.
pub fn command<S>() -> Command<S> {
    Command::sync(SPEC, watch).not_queued()
}

fn watch<S>(ctx: Ctx<'_, S>, args: Parse) -> CommandResult {
    if ctx.conn.in_multi() {
        return Err(CommandError::custom(WATCH_IN_MULTI));
    }
    let watches = ctx.server.watches();
    for key in args.into_rest() {
        ctx.conn.watch(watches, key);
    }
    Ok(Frame::ok())
}
