//! `EXPIRE key seconds`, `PEXPIRE key ms`, `EXPIREAT key unix-seconds`, `PEXPIREAT key
//! unix-ms`, each with `[NX | XX | GT | LT]`: give a key (a Bloom filter or a URL namespace) a
//! lifetime, with Redis 7's replies. 1 if the time was set, 0 if there is no such key or the
//! condition refused it; a time not in the future deletes the key (and answers 1). Past its
//! time the key is gone for every command, and its memory and files are freed in the
//! background.
//!
//! ```text
//! > EXPIRE job:42 86400
//! :1
//! > EXPIRE job:42 100 GT
//! :0
//! > EXPIRE nokey 10
//! :0
//! > EXPIRE job:42 10 NX XX
//! -ERR NX and XX, GT or LT options at the same time are not compatible
//! > EXPIRE job:42 9223372036854775807
//! -ERR invalid expire time in 'expire' command
//! ```

use std::sync::Arc;

use bytes::Bytes;

use crate::app::{App, ExpireIf};
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{
    CommandError, EXPIRE_GT_AND_LT, EXPIRE_NX_AND_OTHERS, invalid_expire_time,
    unsupported_expire_option,
};
use crate::frame::Frame;
use crate::parse::Parse;

const CONDITION: ArgSpec = ArgSpec::one_of(
    "condition",
    &[
        ArgSpec::new("nx", ArgKind::PureToken).token("NX"),
        ArgSpec::new("xx", ArgKind::PureToken).token("XX"),
        ArgSpec::new("gt", ArgKind::PureToken).token("GT"),
        ArgSpec::new("lt", ArgKind::PureToken).token("LT"),
    ],
)
.optional();

const fn spec(
    name: &'static str,
    since: &'static str,
    args: &'static [ArgSpec],
    summary: &'static str,
) -> CommandSpec {
    CommandSpec::new(name, -3)
        .flags(&["write", "fast"])
        .keys(1, 1, 1)
        .acl(&["@keyspace", "@write", "@fast"])
        .group("generic")
        .summary(summary)
        .since(since)
        .args(args)
}

const fn args(time: &'static str) -> [ArgSpec; 3] {
    [ArgSpec::new("key", ArgKind::Key), ArgSpec::new(time, ArgKind::Integer), CONDITION]
}

const SECONDS: &[ArgSpec] = &args("seconds");
const MILLISECONDS: &[ArgSpec] = &args("milliseconds");
const UNIX_SECONDS: &[ArgSpec] = &args("unix-time-seconds");
const UNIX_MILLISECONDS: &[ArgSpec] = &args("unix-time-milliseconds");

/// The spec of `EXPIRE`.
pub const EXPIRE: CommandSpec =
    spec("expire", "1.0.0", SECONDS, "Sets the expiration time of a key in seconds.");
/// The spec of `PEXPIRE`.
pub const PEXPIRE: CommandSpec =
    spec("pexpire", "2.6.0", MILLISECONDS, "Sets the expiration time of a key in milliseconds.");
/// The spec of `EXPIREAT`.
pub const EXPIREAT: CommandSpec = spec(
    "expireat",
    "1.2.0",
    UNIX_SECONDS,
    "Sets the expiration time of a key to a Unix timestamp.",
);
/// The spec of `PEXPIREAT`.
pub const PEXPIREAT: CommandSpec = spec(
    "pexpireat",
    "2.6.0",
    UNIX_MILLISECONDS,
    "Sets the expiration time of a key to a Unix milliseconds timestamp.",
);

/// The `EXPIRE` command.
pub fn expire() -> Command<Arc<App>> {
    Command::sync(EXPIRE, |ctx, args| generic(ctx, args, "expire", Unit::Seconds, Base::Now))
}

/// The `PEXPIRE` command.
pub fn pexpire() -> Command<Arc<App>> {
    Command::sync(PEXPIRE, |ctx, args| generic(ctx, args, "pexpire", Unit::Millis, Base::Now))
}

/// The `EXPIREAT` command.
pub fn expireat() -> Command<Arc<App>> {
    Command::sync(EXPIREAT, |ctx, args| generic(ctx, args, "expireat", Unit::Seconds, Base::Epoch))
}

/// The `PEXPIREAT` command.
pub fn pexpireat() -> Command<Arc<App>> {
    Command::sync(PEXPIREAT, |ctx, args| generic(ctx, args, "pexpireat", Unit::Millis, Base::Epoch))
}

#[derive(Clone, Copy)]
enum Unit {
    Seconds,
    Millis,
}

/// What the time is counted from: now (`EXPIRE`), or the Unix epoch (`EXPIREAT`).
#[derive(Clone, Copy)]
enum Base {
    Now,
    Epoch,
}

/// Redis's `expireGenericCommand`, in its order: the options, then the number, then the
/// overflow checks, then the key, then the condition.
fn generic(
    ctx: Ctx<'_, Arc<App>>,
    mut args: Parse,
    name: &str,
    unit: Unit,
    base: Base,
) -> CommandResult {
    let key = args.next_bytes()?;
    let time = args.next_bytes()?;
    let cond = conditions(args.into_rest())?;
    let time = crate::frame::parse_i64(&time).ok_or(CommandError::NotInteger)?;
    let invalid = || invalid_expire_time(name);
    let mut at = match unit {
        Unit::Seconds => time.checked_mul(1000).ok_or_else(invalid)?,
        Unit::Millis => time,
    };
    if let Base::Now = base {
        let now = ctx.app.now_ms();
        if at > i64::MAX - now {
            return Err(invalid());
        }
        at += now;
    }
    let done = ctx.app.expire_at(&key, at, cond)?;
    Ok(Frame::Integer(i64::from(done)))
}

/// `NX`, `XX`, `GT`, `LT`, with Redis's errors for an unknown one and for those that cannot go
/// together.
fn conditions(args: impl Iterator<Item = Bytes>) -> Result<ExpireIf, CommandError> {
    let mut cond = ExpireIf::default();
    for arg in args {
        let flag = match arg.to_ascii_uppercase().as_slice() {
            b"NX" => &mut cond.nx,
            b"XX" => &mut cond.xx,
            b"GT" => &mut cond.gt,
            b"LT" => &mut cond.lt,
            _ => return Err(unsupported_expire_option(&arg)),
        };
        *flag = true;
    }
    if cond.nx && (cond.xx || cond.gt || cond.lt) {
        return Err(CommandError::custom(EXPIRE_NX_AND_OTHERS));
    }
    if cond.gt && cond.lt {
        return Err(CommandError::custom(EXPIRE_GT_AND_LT));
    }
    Ok(cond)
}
