//! `TYPE key`: `MBbloom--` for a RedisBloom-style filter of raw items (RedisBloom's type
//! name), `urlseen` for a URL namespace, `none` for a key that does not exist.
//!
//! ```text
//! > TYPE jobs
//! +urlseen
//! > TYPE nokey
//! +none
//! ```

use std::sync::Arc;

use bytes::Bytes;

use crate::app::{App, KeyKind};
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `TYPE`.
pub const SPEC: CommandSpec = CommandSpec::new("type", 2)
    .flags(&["readonly", "fast"])
    .keys(1, 1, 1)
    .acl(&["@keyspace", "@read", "@fast"])
    .group("generic")
    .summary("Determines the type of value stored at a key.")
    .since("1.0.0")
    .args(&[ArgSpec::new("key", ArgKind::Key)]);

/// The `TYPE` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, key_type)
}

fn key_type(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    let key = args.next_bytes()?;
    args.finish()?;
    let name = ctx.app.namespace(&key).map_or("none", |ns| KeyKind::of(&ns).type_name());
    Ok(Frame::Simple(Bytes::from_static(name.as_bytes())))
}
