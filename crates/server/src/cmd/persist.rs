//! `PERSIST key`: removes a key's time, so that it never expires; 1 if it had one, 0 if it had
//! none or does not exist.
//!
//! ```text
//! > EXPIRE job:42 86400
//! :1
//! > PERSIST job:42
//! :1
//! > TTL job:42
//! :-1
//! ```

use std::sync::Arc;

use crate::app::App;
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `PERSIST`.
pub const SPEC: CommandSpec = CommandSpec::new("persist", 2)
    .flags(&["write", "fast"])
    .keys(1, 1, 1)
    .acl(&["@keyspace", "@write", "@fast"])
    .group("generic")
    .summary("Removes the expiration time of a key.")
    .since("2.2.0")
    .args(&[ArgSpec::new("key", ArgKind::Key)]);

/// The `PERSIST` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, persist)
}

fn persist(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    let key = args.next_bytes()?;
    args.finish()?;
    Ok(Frame::Integer(i64::from(ctx.app.persist(&key)?)))
}
