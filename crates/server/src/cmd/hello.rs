//! `HELLO [protover [AUTH username password] [SETNAME clientname]]`: switches the protocol and
//! describes the server.
//!
//! The reply is a map (a flat array of 14 elements for RESP2), written in the protocol just
//! selected:
//!
//! ```text
//! > HELLO 3
//! %7
//! $6 server    $7 urlseen
//! $7 version   $5 0.1.0
//! $5 proto     :3
//! $2 id        :<client id>
//! $4 mode      $10 standalone
//! $4 role      $6 master
//! $7 modules   *0
//! ```
//!
//! Errors, as in Redis: `-ERR Protocol version is not an integer or out of range`,
//! `-NOPROTO unsupported protocol version` (anything but 2 and 3),
//! `-ERR Syntax error in HELLO option '<opt>'`, `-WRONGPASS …` for a failed `AUTH`, and
//! `-NOAUTH HELLO must be called with the client already authenticated, …` when a password is
//! required and neither the connection nor the `AUTH` option provides it.

use bytes::Bytes;

use crate::cmd::auth::check_password;
use crate::cmd::client::valid_attr;
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{
    BAD_CLIENT_NAME, CommandError, HELLO_BAD_VERSION, HELLO_NOAUTH, NOPROTO, hello_option_syntax,
};
use crate::frame::{Frame, Protocol, parse_i64};
use crate::parse::Parse;

/// The spec of `HELLO`.
pub const SPEC: CommandSpec = CommandSpec::new("hello", -1)
    .flags(&["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"])
    .acl(&["@fast", "@connection"])
    .group("connection")
    .summary("Handshakes with the server.")
    .since("6.0.0")
    .args(&[
        ArgSpec::new("protover", ArgKind::Integer).optional(),
        ArgSpec::new("username password", ArgKind::String).token("AUTH").optional(),
        ArgSpec::new("clientname", ArgKind::String).token("SETNAME").optional(),
    ]);

/// The `HELLO` command.
pub fn command<S>() -> Command<S> {
    Command::sync(SPEC, hello)
}

fn hello<S>(ctx: Ctx<'_, S>, mut args: Parse) -> CommandResult {
    let mut protocol = None;
    if let Some(version) = args.next() {
        protocol = match parse_i64(&version) {
            Some(2) => Some(Protocol::Resp2),
            Some(3) => Some(Protocol::Resp3),
            Some(_) => return Err(CommandError::custom(NOPROTO)),
            None => return Err(CommandError::custom(HELLO_BAD_VERSION)),
        };
    }
    let mut credentials: Option<(Bytes, Bytes)> = None;
    let mut name: Option<Bytes> = None;
    while let Some(option) = args.next() {
        if option.eq_ignore_ascii_case(b"AUTH") && args.remaining() >= 2 {
            credentials = Some((args.next_bytes()?, args.next_bytes()?));
        } else if option.eq_ignore_ascii_case(b"SETNAME") && args.remaining() >= 1 {
            let n = args.next_bytes()?;
            if !valid_attr(&n) {
                return Err(CommandError::custom(BAD_CLIENT_NAME));
            }
            name = Some(n);
        } else {
            return Err(hello_option_syntax(&option));
        }
    }
    if let Some((user, password)) = credentials {
        check_password(ctx.server.config(), &user, &password)
            .inspect_err(|_| ctx.conn.note_failed_auth())?;
        ctx.conn.set_authenticated(true);
    }
    if !ctx.conn.is_authenticated() {
        return Err(CommandError::custom(HELLO_NOAUTH));
    }
    if let Some(name) = name {
        ctx.conn.set_name(Some(name));
    }
    if let Some(protocol) = protocol {
        ctx.conn.set_protocol(protocol);
    }
    let id = i64::try_from(ctx.conn.id()).unwrap_or(i64::MAX);
    Ok(Frame::Map(vec![
        (Frame::bulk("server"), Frame::bulk("urlseen")),
        (Frame::bulk("version"), Frame::bulk(env!("CARGO_PKG_VERSION"))),
        (Frame::bulk("proto"), Frame::Integer(ctx.conn.protocol().version())),
        (Frame::bulk("id"), Frame::Integer(id)),
        (Frame::bulk("mode"), Frame::bulk("standalone")),
        (Frame::bulk("role"), Frame::bulk("master")),
        (Frame::bulk("modules"), Frame::Array(Vec::new())),
    ]))
}
