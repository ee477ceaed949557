//! `SELECT index`: urlseen has one database (namespaces are keys), so only `SELECT 0`
//! succeeds, like a Redis configured with `databases 1`.
//!
//! ```text
//! > SELECT 0
//! +OK
//! > SELECT 1
//! -ERR DB index is out of range
//! > SELECT x
//! -ERR value is not an integer or out of range
//! ```

use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{CommandError, DB_INDEX_OUT_OF_RANGE};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `SELECT`.
pub const SPEC: CommandSpec = CommandSpec::new("select", 2)
    .flags(&["loading", "stale", "fast"])
    .acl(&["@keyspace", "@fast", "@connection"])
    .group("connection")
    .summary("Changes the selected database.")
    .since("1.0.0")
    .args(&[ArgSpec::new("index", ArgKind::Integer)]);

/// The `SELECT` command.
pub fn command<S>() -> Command<S> {
    Command::sync(SPEC, select)
}

fn select<S>(_ctx: Ctx<'_, S>, mut args: Parse) -> CommandResult {
    let index = args.next_int()?;
    args.finish()?;
    if i32::try_from(index).is_err() {
        return Err(CommandError::NotInteger);
    }
    if index != 0 {
        return Err(CommandError::custom(DB_INDEX_OUT_OF_RANGE));
    }
    Ok(Frame::ok())
}
