//! `PING [message]`: `+PONG`, or the message as a bulk string.
//!
//! ```text
//! > PING
//! +PONG
//! > PING hello
//! $5
//! hello
//! ```

use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::CommandError;
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `PING`.
pub const SPEC: CommandSpec = CommandSpec::new("ping", -1)
    .flags(&["fast"])
    .acl(&["@fast", "@connection"])
    .group("connection")
    .summary("Returns the server's liveliness response.")
    .since("1.0.0")
    .args(&[ArgSpec::new("message", ArgKind::String).optional()]);

/// The `PING` command.
pub fn command<S>() -> Command<S> {
    Command::sync(SPEC, ping)
}

fn ping<S>(_ctx: Ctx<'_, S>, mut args: Parse) -> CommandResult {
    if args.remaining() > 1 {
        return Err(CommandError::WrongArity { command: SPEC.name.into() });
    }
    Ok(match args.next() {
        None => Frame::simple("PONG"),
        Some(message) => Frame::Bulk(message),
    })
}
