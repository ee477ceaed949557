//! `AUTH [username] password`: authenticates the connection as the `default` user, the only
//! user there is, whose password is the configured `requirepass`.
//!
//! ```text
//! > PING
//! -NOAUTH Authentication required.
//! > AUTH wrong
//! -WRONGPASS invalid username-password pair or user is disabled.
//! > AUTH s3cret
//! +OK
//! > AUTH default s3cret
//! +OK
//! ```
//!
//! Without `requirepass`, `AUTH password` answers
//! `-ERR AUTH <password> called without any password configured for the default user. Are you
//! sure your configuration is correct?` and `AUTH default anything` succeeds, as in Redis.

use crate::config::Config;
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{AUTH_NOT_CONFIGURED, CommandError};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `AUTH`.
pub const SPEC: CommandSpec = CommandSpec::new("auth", -2)
    .flags(&["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"])
    .acl(&["@fast", "@connection"])
    .group("connection")
    .summary("Authenticates the connection.")
    .since("1.0.0")
    .args(&[
        ArgSpec::new("username", ArgKind::String).optional(),
        ArgSpec::new("password", ArgKind::String),
    ]);

/// The `AUTH` command.
pub fn command<S>() -> Command<S> {
    Command::sync(SPEC, auth)
}

fn auth<S>(ctx: Ctx<'_, S>, mut args: Parse) -> CommandResult {
    if args.remaining() > 2 {
        return Err(CommandError::Syntax);
    }
    let (user, password) = if args.remaining() == 1 {
        if ctx.server.config().requirepass.is_none() {
            return Err(CommandError::custom(AUTH_NOT_CONFIGURED));
        }
        (bytes::Bytes::from_static(b"default"), args.next_bytes()?)
    } else {
        (args.next_bytes()?, args.next_bytes()?)
    };
    check_password(ctx.server.config(), &user, &password)
        .inspect_err(|_| ctx.conn.note_failed_auth())?;
    ctx.conn.set_authenticated(true);
    Ok(Frame::ok())
}

/// Checks a username and password against the configuration, in time independent of where
/// the password differs.
///
/// # Errors
/// [`CommandError::WrongPass`] for any user but `default`, or a wrong password.
pub fn check_password(config: &Config, user: &[u8], password: &[u8]) -> Result<(), CommandError> {
    if user != b"default" {
        return Err(CommandError::WrongPass);
    }
    match &config.requirepass {
        // Redis' `nopass` default user accepts any password.
        None => Ok(()),
        Some(expected) if constant_time_eq(expected.as_bytes(), password) => Ok(()),
        Some(_) => Err(CommandError::WrongPass),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0xff);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords() {
        let open = Config::default();
        assert_eq!(check_password(&open, b"default", b"anything"), Ok(()));
        assert_eq!(check_password(&open, b"alice", b"anything"), Err(CommandError::WrongPass));
        let closed = Config { requirepass: Some("pw".into()), ..Config::default() };
        assert_eq!(check_password(&closed, b"default", b"pw"), Ok(()));
        assert_eq!(check_password(&closed, b"default", b"pw2"), Err(CommandError::WrongPass));
        assert_eq!(check_password(&closed, b"default", b"p"), Err(CommandError::WrongPass));
        assert_eq!(check_password(&closed, b"default", b""), Err(CommandError::WrongPass));
        assert!(constant_time_eq(b"", b""));
        assert!(!constant_time_eq(b"a\xff", b"a"));
    }
}
