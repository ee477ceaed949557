//! `TTL key`, `PTTL key`, `EXPIRETIME key`, `PEXPIRETIME key`: when a key expires, with Redis's
//! replies: the time left (in seconds, rounded to the nearest, or ms), or the absolute Unix
//! time; -2 for a key that does not exist, -1 for a key without a time.
//!
//! ```text
//! > EXPIRE job:42 86400
//! :1
//! > TTL job:42
//! :86400
//! > PEXPIRETIME job:42
//! :1767312000000
//! > TTL nokey
//! :-2
//! ```

use std::sync::Arc;

use urlseen_engine::Expiry;

use crate::app::App;
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{TTL_NO_EXPIRY, TTL_NO_KEY};
use crate::frame::Frame;
use crate::parse::Parse;

const KEY: &[ArgSpec] = &[ArgSpec::new("key", ArgKind::Key)];

const fn spec(name: &'static str, since: &'static str, summary: &'static str) -> CommandSpec {
    CommandSpec::new(name, 2)
        .flags(&["readonly", "fast"])
        .keys(1, 1, 1)
        .acl(&["@keyspace", "@read", "@fast"])
        .group("generic")
        .summary(summary)
        .since(since)
        .args(KEY)
}

/// The spec of `TTL`.
pub const TTL: CommandSpec =
    spec("ttl", "1.0.0", "Returns the expiration time in seconds of a key.");
/// The spec of `PTTL`.
pub const PTTL: CommandSpec =
    spec("pttl", "2.6.0", "Returns the expiration time in milliseconds of a key.");
/// The spec of `EXPIRETIME`.
pub const EXPIRETIME: CommandSpec =
    spec("expiretime", "7.0.0", "Returns the expiration time of a key as a Unix timestamp.");
/// The spec of `PEXPIRETIME`.
pub const PEXPIRETIME: CommandSpec = spec(
    "pexpiretime",
    "7.0.0",
    "Returns the expiration time of a key as a Unix milliseconds timestamp.",
);

/// The `TTL` command.
pub fn ttl() -> Command<Arc<App>> {
    Command::sync(TTL, |ctx, args| generic(ctx, args, Output { millis: false, absolute: false }))
}

/// The `PTTL` command.
pub fn pttl() -> Command<Arc<App>> {
    Command::sync(PTTL, |ctx, args| generic(ctx, args, Output { millis: true, absolute: false }))
}

/// The `EXPIRETIME` command.
pub fn expiretime() -> Command<Arc<App>> {
    Command::sync(EXPIRETIME, |ctx, args| {
        generic(ctx, args, Output { millis: false, absolute: true })
    })
}

/// The `PEXPIRETIME` command.
pub fn pexpiretime() -> Command<Arc<App>> {
    Command::sync(PEXPIRETIME, |ctx, args| {
        generic(ctx, args, Output { millis: true, absolute: true })
    })
}

#[derive(Clone, Copy)]
struct Output {
    millis: bool,
    absolute: bool,
}

/// Redis's `ttlGenericCommand`.
fn generic(ctx: Ctx<'_, Arc<App>>, mut args: Parse, out: Output) -> CommandResult {
    let key = args.next_bytes()?;
    args.finish()?;
    let at = match ctx.app.expiry(&key)? {
        None => return Ok(Frame::Integer(TTL_NO_KEY)),
        Some(Expiry::Never) => return Ok(Frame::Integer(TTL_NO_EXPIRY)),
        Some(Expiry::At(at)) => i64::try_from(at).unwrap_or(i64::MAX),
    };
    let value = match out.absolute {
        true => at,
        false => at.saturating_sub(ctx.app.now_ms()).max(0),
    };
    Ok(Frame::Integer(if out.millis { value } else { value.saturating_add(500) / 1000 }))
}
