//! `CONFIG GET parameter [parameter …] | SET parameter value [parameter value …] | HELP`: the
//! settings, as redis-cli and client libraries read them at connect.
//!
//! ```text
//! > CONFIG GET slowlog-*
//! *4                                     (a map in RESP3)
//!   $23 slowlog-log-slower-than  $5 10000
//!   $15 slowlog-max-len          $3 128
//! > CONFIG GET no-such-parameter
//! *0
//! > CONFIG SET slowlog-log-slower-than 0
//! +OK
//! ```
//!
//! `GET` takes Redis' glob patterns and answers a map (a flat array of name, value pairs in
//! RESP2), each parameter once; an unknown parameter is left out, as in Redis. The parameters
//! are Redis' names for the settings urlseen has (`port`, `bind`, `maxclients`, `timeout`,
//! `protected-mode`, `slowlog-*`, `databases`; the engine adds `maxmemory`, `appendonly`, …).
//! `SET` changes `slowlog-log-slower-than` and `slowlog-max-len` while the server runs; the
//! other parameters are fixed at start (`urlseen serve` flags and config file).

use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx, Dispatch};
use crate::error::CommandError;
use crate::frame::{Frame, parse_i64};
use crate::glob::glob_match;
use crate::parse::Parse;

/// The spec of the `CONFIG` container.
pub const SPEC: CommandSpec = CommandSpec::new("config", -2)
    .acl(&["@slow"])
    .group("server")
    .summary("A container for server configuration commands.")
    .since("2.0.0");

/// The spec of `CONFIG GET`.
pub const GET: CommandSpec = CommandSpec::new("config|get", -3)
    .flags(&["admin", "noscript", "loading", "stale"])
    .acl(&["@admin", "@slow", "@dangerous"])
    .group("server")
    .summary("Returns the effective values of configuration parameters.")
    .since("2.0.0")
    .args(&[ArgSpec::new("parameter", ArgKind::String).multiple()]);
/// The spec of `CONFIG SET`.
pub const SET: CommandSpec = CommandSpec::new("config|set", -4)
    .flags(&["admin", "noscript", "loading", "stale"])
    .acl(&["@admin", "@slow", "@dangerous"])
    .group("server")
    .summary("Sets configuration parameters in-flight.")
    .since("2.0.0")
    .args(&[
        ArgSpec::new("parameter", ArgKind::String).multiple(),
        ArgSpec::new("value", ArgKind::String).multiple(),
    ]);
/// The spec of `CONFIG HELP`.
pub const HELP: CommandSpec = CommandSpec::new("config|help", 2)
    .flags(&["loading", "stale"])
    .acl(&["@slow"])
    .group("server")
    .summary("Returns helpful text about the different subcommands.")
    .since("5.0.0");

/// The `CONFIG` command and its subcommands.
pub fn command<S>() -> Command<S> {
    Command::container(SPEC)
        .subcommand(Command::sync(GET, get))
        .subcommand(Command::sync(SET, set))
        .subcommand(Command::sync(HELP, help))
}

/// Registers the parameters every server has.
pub(crate) fn register_params<S>(d: &mut Dispatch<S>) {
    d.config_param("bind", |_, s| s.config().resp_addr.ip().to_string())
        .config_param("port", |_, s| s.config().resp_addr.port().to_string())
        .config_param("databases", |_, _| "1".to_owned())
        .config_param("maxclients", |_, s| s.config().maxclients.to_string())
        .config_param("timeout", |_, s| {
            s.config().idle_timeout.map_or(0, |d| d.as_secs()).to_string()
        })
        .config_param("protected-mode", |_, s| yes_no(s.config().protected_mode))
        .config_param("slowlog-log-slower-than", |_, s| s.slowlog().log_slower_than().to_string())
        .config_param("slowlog-max-len", |_, s| s.slowlog().max_len().to_string())
        .config_param("save", |_, _| String::new())
        .config_param("appendonly", |_, _| "no".to_owned());
}

/// Redis' spelling of a boolean parameter.
pub(crate) fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_owned()
}

fn get<S>(ctx: Ctx<'_, S>, args: Parse) -> CommandResult {
    let patterns: Vec<_> = args.collect();
    let mut pairs = Vec::new();
    for (name, value) in ctx.dispatch.config_params() {
        if patterns.iter().any(|p| glob_match(p, name.as_bytes(), true)) {
            pairs.push((Frame::bulk(*name), Frame::bulk(value(ctx.dispatch.app(), ctx.server))));
        }
    }
    Ok(Frame::Map(pairs))
}

fn set<S>(ctx: Ctx<'_, S>, args: Parse) -> CommandResult {
    let args: Vec<_> = args.collect();
    if args.len() % 2 != 0 {
        return Err(CommandError::WrongArity { command: "config|set".into() });
    }
    // Check every pair first: Redis applies all of them or none.
    let mut changes = Vec::new();
    for pair in args.chunks_exact(2) {
        let (name, value) = (&pair[0], &pair[1]);
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        let known = ctx.dispatch.config_params().iter().any(|(n, _)| *n == name);
        let failed = |why: &str| {
            CommandError::Custom(
                format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
                    .into(),
            )
        };
        match name.as_str() {
            "slowlog-log-slower-than" | "slowlog-max-len" => {
                let n = parse_i64(value)
                    .ok_or_else(|| failed("argument couldn't be parsed into an integer"))?;
                if name == "slowlog-max-len" && n < 0 {
                    return Err(failed(
                        "argument must be between 0 and 9223372036854775807 inclusive",
                    ));
                }
                changes.push((name, n));
            }
            _ if known => return Err(failed("can't set immutable config")),
            _ => {
                return Err(CommandError::Custom(
                    format!("ERR Unknown option or number of arguments for CONFIG SET - '{name}'")
                        .into(),
                ));
            }
        }
    }
    let slowlog = ctx.server.slowlog();
    for (name, n) in changes {
        if name == "slowlog-max-len" {
            slowlog.set_max_len(usize::try_from(n).unwrap_or(usize::MAX));
        } else {
            slowlog.set_log_slower_than(n);
        }
    }
    Ok(Frame::ok())
}

fn help<S>(_ctx: Ctx<'_, S>, _args: Parse) -> CommandResult {
    const LINES: &[&str] = &[
        "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET <pattern>",
        "    Return parameters matching the glob-like <pattern> and their values.",
        "SET <directive> <value>",
        "    Set the configuration <directive> to <value>.",
        "HELP",
        "    Print this help.",
    ];
    Ok(Frame::Array(LINES.iter().map(|&l| Frame::simple(l)).collect()))
}
