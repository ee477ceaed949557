//! `DEL key [key …]` and `UNLINK key [key …]`: drop namespaces and everything they recorded
//! (their memory and files are freed before the reply); the number dropped. `UNLINK` is
//! `DEL` (a drop frees a namespace's filters and removes its directory, which takes no longer
//! than Redis's lazy free hands over).
//!
//! ```text
//! > DEL jobs nokey
//! :1
//! ```

use std::sync::Arc;

use crate::app::App;
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `DEL`.
pub const SPEC: CommandSpec = CommandSpec::new("del", -2)
    .flags(&["write"])
    .keys(1, -1, 1)
    .acl(&["@keyspace", "@write", "@slow"])
    .group("generic")
    .summary("Deletes one or more keys.")
    .since("1.0.0")
    .args(&[ArgSpec::new("key", ArgKind::Key).multiple()]);

/// The spec of `UNLINK`.
pub const UNLINK: CommandSpec = CommandSpec::new("unlink", -2)
    .flags(&["write", "fast"])
    .keys(1, -1, 1)
    .acl(&["@keyspace", "@write", "@fast"])
    .group("generic")
    .summary("Asynchronously deletes one or more keys.")
    .since("4.0.0")
    .args(&[ArgSpec::new("key", ArgKind::Key).multiple()]);

/// The `DEL` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, del)
}

/// The `UNLINK` command.
pub fn unlink() -> Command<Arc<App>> {
    Command::sync(UNLINK, del)
}

fn del(ctx: Ctx<'_, Arc<App>>, args: Parse) -> CommandResult {
    let mut dropped = 0i64;
    for key in args {
        if ctx.app.drop_key(&key)? {
            dropped += 1;
        }
    }
    Ok(Frame::Integer(dropped))
}
