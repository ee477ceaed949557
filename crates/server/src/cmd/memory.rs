//! `MEMORY USAGE key [SAMPLES count]`: the bytes of RAM a key's namespace holds (its filters,
//! index and buffers: what `INFO memory` sums), nil for a key that does not exist. `SAMPLES` is
//! accepted and ignored (the figure is exact). `MEMORY DOCTOR`, `STATS`, `MALLOC-STATS` and
//! `PURGE` answer an error that says so (`INFO memory` reports the server).
//!
//! ```text
//! > MEMORY USAGE job:42
//! :1310
//! > MEMORY USAGE nokey
//! $-1
//! ```

use std::sync::Arc;

use crate::app::App;
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{CommandError, MEMORY_UNSUPPORTED};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of the `MEMORY` container.
pub const SPEC: CommandSpec = CommandSpec::new("memory", -2)
    .acl(&["@slow"])
    .group("server")
    .summary("A container for memory diagnostics commands.")
    .since("4.0.0");

/// The spec of `MEMORY USAGE`.
pub const USAGE: CommandSpec = CommandSpec::new("memory|usage", -3)
    .flags(&["readonly"])
    .keys(2, 2, 1)
    .acl(&["@read", "@slow"])
    .group("server")
    .summary("Estimates the memory usage of a key.")
    .since("4.0.0")
    .args(&[
        ArgSpec::new("key", ArgKind::Key),
        ArgSpec::new("count", ArgKind::Integer).token("SAMPLES").optional(),
    ]);

const fn unsupported(name: &'static str, summary: &'static str) -> CommandSpec {
    CommandSpec::new(name, 2).acl(&["@slow"]).group("server").summary(summary).since("4.0.0")
}

/// The spec of `MEMORY DOCTOR` (answers an error).
pub const DOCTOR: CommandSpec = unsupported("memory|doctor", "Outputs a memory problems report.");
/// The spec of `MEMORY STATS` (answers an error).
pub const STATS: CommandSpec = unsupported("memory|stats", "Returns details about memory usage.");
/// The spec of `MEMORY MALLOC-STATS` (answers an error).
pub const MALLOC_STATS: CommandSpec =
    unsupported("memory|malloc-stats", "Returns the allocator statistics.");
/// The spec of `MEMORY PURGE` (answers an error).
pub const PURGE: CommandSpec = unsupported("memory|purge", "Asks the allocator to release memory.");
/// The spec of `MEMORY HELP`.
pub const HELP: CommandSpec = CommandSpec::new("memory|help", 2)
    .flags(&["loading", "stale"])
    .acl(&["@slow"])
    .group("server")
    .summary("Returns helpful text about the different subcommands.")
    .since("4.0.0");

/// The `MEMORY` command and its subcommands.
pub fn command() -> Command<Arc<App>> {
    Command::container(SPEC)
        .subcommand(Command::sync(USAGE, usage))
        .subcommand(Command::sync(DOCTOR, refuse))
        .subcommand(Command::sync(STATS, refuse))
        .subcommand(Command::sync(MALLOC_STATS, refuse))
        .subcommand(Command::sync(PURGE, refuse))
        .subcommand(Command::sync(HELP, help))
}

fn usage(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    let key = args.next_bytes()?;
    if args.next_if_keyword("SAMPLES") {
        if args.is_empty() {
            return Err(CommandError::Syntax);
        }
        args.next_int()?;
    }
    args.finish()?;
    Ok(match ctx.app.namespace(&key) {
        Some(ns) => {
            Frame::Integer(i64::try_from(ns.memory_usage().memory_bytes).unwrap_or(i64::MAX))
        }
        None => Frame::Null,
    })
}

fn refuse(_ctx: Ctx<'_, Arc<App>>, _args: Parse) -> CommandResult {
    Err(CommandError::custom(MEMORY_UNSUPPORTED))
}

fn help(_ctx: Ctx<'_, Arc<App>>, _args: Parse) -> CommandResult {
    const LINES: &[&str] = &[
        "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "USAGE <key> [SAMPLES <count>]",
        "    Return memory in bytes used by <key> (its namespace's filters, index and buffers).",
        "HELP",
        "    Print this help.",
    ];
    Ok(Frame::Array(
        LINES.iter().map(|l| Frame::Simple(bytes::Bytes::from_static(l.as_bytes()))).collect(),
    ))
}
