//! `EXISTS key [key …]`: how many of the keys are namespaces (a key named twice counts twice,
//! as in Redis).
//!
//! ```text
//! > EXISTS jobs jobs nokey
//! :2
//! ```

use std::sync::Arc;

use crate::app::App;
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `EXISTS`.
pub const SPEC: CommandSpec = CommandSpec::new("exists", -2)
    .flags(&["readonly", "fast"])
    .keys(1, -1, 1)
    .acl(&["@keyspace", "@read", "@fast"])
    .group("generic")
    .summary("Determines whether one or more keys exist.")
    .since("1.0.0")
    .args(&[ArgSpec::new("key", ArgKind::Key).multiple()]);

/// The `EXISTS` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, exists)
}

fn exists(ctx: Ctx<'_, Arc<App>>, args: Parse) -> CommandResult {
    let found = args.filter(|key| ctx.app.namespace(key).is_some()).count();
    Ok(Frame::Integer(i64::try_from(found).unwrap_or(i64::MAX)))
}
