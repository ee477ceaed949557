//! `ECHO message`: the message as a bulk string.
//!
//! ```text
//! > ECHO hello
//! $5
//! hello
//! ```

use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `ECHO`.
pub const SPEC: CommandSpec = CommandSpec::new("echo", 2)
    .flags(&["fast"])
    .acl(&["@fast", "@connection"])
    .group("connection")
    .summary("Returns the given string.")
    .since("1.0.0")
    .args(&[ArgSpec::new("message", ArgKind::String)]);

/// The `ECHO` command.
pub fn command<S>() -> Command<S> {
    Command::sync(SPEC, echo)
}

fn echo<S>(_ctx: Ctx<'_, S>, mut args: Parse) -> CommandResult {
    let message = args.next_bytes()?;
    args.finish()?;
    Ok(Frame::Bulk(message))
}
