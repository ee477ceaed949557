//! `DBSIZE`: the number of namespaces.
//!
//! ```text
//! > DBSIZE
//! :3
//! ```

use std::sync::Arc;

use crate::app::App;
use crate::dispatch::{Command, CommandResult, CommandSpec, Ctx};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `DBSIZE`.
pub const SPEC: CommandSpec = CommandSpec::new("dbsize", 1)
    .flags(&["readonly", "fast"])
    .acl(&["@keyspace", "@read", "@fast"])
    .group("server")
    .summary("Returns the number of keys in the database.")
    .since("1.0.0");

/// The `DBSIZE` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, dbsize)
}

fn dbsize(ctx: Ctx<'_, Arc<App>>, args: Parse) -> CommandResult {
    args.finish()?;
    let n = ctx.app.db().namespace_count();
    Ok(Frame::Integer(i64::try_from(n).unwrap_or(i64::MAX)))
}
