//! `FLUSHALL [ASYNC | SYNC]` and `FLUSHDB [ASYNC | SYNC]`: drop every namespace. There is one
//! database, so both do the same; `ASYNC` and `SYNC` are accepted and both drop at once.
//!
//! ```text
//! > FLUSHALL
//! +OK
//! ```

use std::sync::Arc;

use crate::app::App;
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::CommandError;
use crate::frame::Frame;
use crate::parse::Parse;

const ARGS: &[ArgSpec] = &[ArgSpec::new("flush-type", ArgKind::String).optional()];

/// The spec of `FLUSHALL`.
pub const FLUSHALL: CommandSpec = CommandSpec::new("flushall", -1)
    .flags(&["write"])
    .acl(&["@keyspace", "@write", "@slow", "@dangerous"])
    .group("server")
    .summary("Removes all keys from all databases.")
    .since("1.0.0")
    .args(ARGS);

/// The spec of `FLUSHDB`.
pub const FLUSHDB: CommandSpec = CommandSpec::new("flushdb", -1)
    .flags(&["write"])
    .acl(&["@keyspace", "@write", "@slow", "@dangerous"])
    .group("server")
    .summary("Remove all keys from the current database.")
    .since("1.0.0")
    .args(ARGS);

/// The `FLUSHALL` command.
pub fn flushall() -> Command<Arc<App>> {
    Command::sync(FLUSHALL, flush)
}

/// The `FLUSHDB` command.
pub fn flushdb() -> Command<Arc<App>> {
    Command::sync(FLUSHDB, flush)
}

fn flush(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    if let Some(mode) = args.next()
        && !(mode.eq_ignore_ascii_case(b"ASYNC") || mode.eq_ignore_ascii_case(b"SYNC"))
    {
        return Err(CommandError::Syntax);
    }
    args.finish()?;
    let dropped = ctx.app.flush()?;
    tracing::info!(dropped, "FLUSHALL: every namespace dropped");
    Ok(Frame::ok())
}
