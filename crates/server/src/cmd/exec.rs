//! `EXEC`: runs the transaction's queue with no other client's command in between, and answers
//! an array of the replies (a command that fails at run time has its error in its place; the
//! others still run).
//!
//! ```text
//! > MULTI
//! +OK
//! > BF.ADD k a
//! +QUEUED
//! > URL.SEEN k https://a.example/
//! +QUEUED
//! > EXEC
//! *2
//! :1
//! -WRONGTYPE Operation against a key holding the wrong kind of value
//! ```
//!
//! `-ERR EXEC without MULTI` outside a transaction; `-EXECABORT Transaction discarded because
//! of previous errors.` when a command was refused while queueing; the null array (`*-1`,
//! RESP3 `_`) when a key the connection `WATCH`es was written since. Either way the
//! transaction is closed and the watched keys forgotten.

use crate::dispatch::{BoxFuture, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{CommandError, EXEC_WITHOUT_MULTI, EXECABORT};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `EXEC`.
pub const SPEC: CommandSpec = CommandSpec::new("exec", 1)
    .flags(&["noscript", "loading", "stale", "skip_slowlog"])
    .acl(&["@slow", "@transaction"])
    .group("transactions")
    .summary("Executes all commands in a transaction.")
    .since("1.2.0");

/// The `EXEC` command: it holds the server's gate exclusively while it runs.
pub fn command<S: Send + Sync + 'static>() -> Command<S> {
    Command::new_async(SPEC, exec).not_queued().exclusive()
}

fn exec<'a, S: Send + Sync + 'static>(
    ctx: Ctx<'a, S>,
    args: Parse,
) -> BoxFuture<'a, CommandResult> {
    Box::pin(async move {
        args.finish()?;
        let Some(queue) = ctx.conn.take_multi() else {
            return Err(CommandError::custom(EXEC_WITHOUT_MULTI));
        };
        let touched = ctx.conn.unwatch();
        if queue.is_aborted() {
            return Err(CommandError::custom(EXECABORT));
        }
        if touched {
            return Ok(Frame::NullArray);
        }
        let mut replies = Vec::with_capacity(queue.len());
        for argv in queue.commands {
            replies.push(ctx.dispatch.execute_queued(ctx.server, ctx.conn, argv).await);
        }
        Ok(Frame::Array(replies))
    })
}
