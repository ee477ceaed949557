//! `KEYS pattern`: the namespaces whose names match a glob-style pattern, sorted.
//!
//! ```text
//! > KEYS job*
//! *2
//! $4
//! jobs
//! $6
//! jobs:2
//! ```

use std::sync::Arc;

use crate::app::App;
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::frame::Frame;
use crate::glob::glob_match;
use crate::parse::Parse;

/// The spec of `KEYS`.
pub const SPEC: CommandSpec = CommandSpec::new("keys", 2)
    .flags(&["readonly"])
    .acl(&["@keyspace", "@read", "@slow", "@dangerous"])
    .group("generic")
    .summary("Returns all key names that match a pattern.")
    .since("1.0.0")
    .args(&[ArgSpec::new("pattern", ArgKind::Pattern)]);

/// The `KEYS` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, keys)
}

fn keys(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    let pattern = args.next_bytes()?;
    args.finish()?;
    let names = ctx.app.db().namespace_names();
    Ok(Frame::Array(
        names
            .into_iter()
            .filter(|name| glob_match(&pattern, name.as_bytes(), false))
            .map(Frame::bulk)
            .collect(),
    ))
}
