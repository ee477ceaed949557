//! `SLOWLOG GET [count] | LEN | RESET | HELP`: the commands that ran for at least
//! `slowlog-log-slower-than` microseconds (see [`crate::slowlog`]).
//!
//! ```text
//! > SLOWLOG GET 1
//! *1
//!   *6
//!     :14                          (id, increasing for the life of the server)
//!     :1718030000                  (unix time, seconds)
//!     :15321                       (duration, microseconds)
//!     *3 $8 URL.SEEN $4 jobs $22 https://a.example/x   (arguments, cut as Redis cuts them)
//!     $15 127.0.0.1:50312          (client address)
//!     $9 crawler-1                 (client name, empty if none)
//! > SLOWLOG LEN
//! :1
//! > SLOWLOG RESET
//! +OK
//! ```
//!
//! `GET` returns the newest entries first, 10 by default, all with `-1`; a count that is not an
//! integer ≥ -1 is `-ERR count should be greater than or equal to -1`, as in Redis 7.

use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{CommandError, SLOWLOG_BAD_COUNT, SLOWLOG_GET_SYNTAX};
use crate::frame::{Frame, parse_i64};
use crate::parse::Parse;

/// The spec of the `SLOWLOG` container.
pub const SPEC: CommandSpec = CommandSpec::new("slowlog", -2)
    .acl(&["@slow"])
    .group("server")
    .summary("A container for slow log commands.")
    .since("2.2.12");

const FLAGS: &[&str] = &["admin", "loading", "stale"];
const ACL: &[&str] = &["@admin", "@slow", "@dangerous"];

/// The spec of `SLOWLOG GET`.
pub const GET: CommandSpec = CommandSpec::new("slowlog|get", -2)
    .flags(FLAGS)
    .acl(ACL)
    .group("server")
    .summary("Returns the slow log's entries.")
    .since("2.2.12")
    .args(&[ArgSpec::new("count", ArgKind::Integer).optional()]);
/// The spec of `SLOWLOG LEN`.
pub const LEN: CommandSpec = CommandSpec::new("slowlog|len", 2)
    .flags(FLAGS)
    .acl(ACL)
    .group("server")
    .summary("Returns the number of entries in the slow log.")
    .since("2.2.12");
/// The spec of `SLOWLOG RESET`.
pub const RESET: CommandSpec = CommandSpec::new("slowlog|reset", 2)
    .flags(FLAGS)
    .acl(ACL)
    .group("server")
    .summary("Clears all entries from the slow log.")
    .since("2.2.12");
/// The spec of `SLOWLOG HELP`.
pub const HELP: CommandSpec = CommandSpec::new("slowlog|help", 2)
    .flags(&["loading", "stale"])
    .acl(&["@slow"])
    .group("server")
    .summary("Show helpful text about the different subcommands")
    .since("6.2.0");

/// The `SLOWLOG` command and its subcommands.
pub fn command<S>() -> Command<S> {
    Command::container(SPEC)
        .subcommand(Command::sync(GET, get))
        .subcommand(Command::sync(LEN, len))
        .subcommand(Command::sync(RESET, reset))
        .subcommand(Command::sync(HELP, help))
}

fn get<S>(ctx: Ctx<'_, S>, mut args: Parse) -> CommandResult {
    let count = match args.remaining() {
        0 => 10,
        1 => {
            let arg = args.next_bytes()?;
            match parse_i64(&arg) {
                Some(-1) => usize::MAX,
                Some(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
                _ => return Err(CommandError::custom(SLOWLOG_BAD_COUNT)),
            }
        }
        _ => return Err(CommandError::custom(SLOWLOG_GET_SYNTAX)),
    };
    let entries = ctx.server.slowlog().get(count);
    let int = |n: u64| Frame::Integer(i64::try_from(n).unwrap_or(i64::MAX));
    Ok(Frame::Array(
        entries
            .into_iter()
            .map(|e| {
                Frame::Array(vec![
                    int(e.id),
                    int(e.timestamp),
                    int(e.duration_us),
                    Frame::Array(e.argv.into_iter().map(Frame::Bulk).collect()),
                    Frame::bulk(e.addr),
                    Frame::Bulk(e.name),
                ])
            })
            .collect(),
    ))
}

fn len<S>(ctx: Ctx<'_, S>, _args: Parse) -> CommandResult {
    Ok(Frame::Integer(i64::try_from(ctx.server.slowlog().len()).unwrap_or(i64::MAX)))
}

fn reset<S>(ctx: Ctx<'_, S>, _args: Parse) -> CommandResult {
    ctx.server.slowlog().reset();
    Ok(Frame::ok())
}

fn help<S>(_ctx: Ctx<'_, S>, _args: Parse) -> CommandResult {
    const LINES: &[&str] = &[
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
        "HELP",
        "    Print this help.",
    ];
    Ok(Frame::Array(LINES.iter().map(|&l| Frame::simple(l)).collect()))
}
