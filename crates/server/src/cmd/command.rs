//! `COMMAND [COUNT | LIST | INFO … | DOCS … | HELP]`: the command table, as clients and
//! redis-cli read it.
//!
//! redis-cli sends `COMMAND DOCS` when it starts interactively and builds its hints and
//! completion from the reply; cluster-aware clients read the key positions from `COMMAND`.
//! The replies have Redis 7's shapes:
//!
//! ```text
//! > COMMAND COUNT
//! :9
//! > COMMAND INFO ping
//! *1
//!   *10  $4 ping  :-1  ~1 +fast  :0 :0 :0  ~2 +@fast +@connection  ~0  ~0  ~0
//! > COMMAND DOCS echo
//! %1  $4 echo  %4  summary …  since …  group …  arguments *1 %2 name … type …
//! ```
//!
//! Tips and key specifications are empty sets. RedisBloom's commands are documented as Redis
//! documents a module's: group `module`, `module` `bf`; `COMMAND LIST FILTERBY MODULE bf` lists
//! them.

use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::CommandError;
use crate::frame::Frame;
use crate::glob::glob_match;
use crate::parse::Parse;

/// The spec of `COMMAND`.
pub const SPEC: CommandSpec = CommandSpec::new("command", -1)
    .flags(&["loading", "stale"])
    .acl(&["@slow", "@connection"])
    .group("server")
    .summary("Returns detailed information about all commands.")
    .since("2.8.13");

const FLAGS: &[&str] = &["loading", "stale"];
const ACL: &[&str] = &["@slow", "@connection"];

/// The spec of `COMMAND COUNT`.
pub const COUNT: CommandSpec = CommandSpec::new("command|count", 2)
    .flags(FLAGS)
    .acl(ACL)
    .group("server")
    .summary("Returns a count of commands.")
    .since("2.8.13");
/// The spec of `COMMAND LIST`.
pub const LIST: CommandSpec = CommandSpec::new("command|list", -2)
    .flags(FLAGS)
    .acl(ACL)
    .group("server")
    .summary("Returns a list of command names.")
    .since("7.0.0")
    .args(&[ArgSpec::new("filterby", ArgKind::String).token("FILTERBY").optional()]);
/// The spec of `COMMAND INFO`.
pub const INFO: CommandSpec = CommandSpec::new("command|info", -2)
    .flags(FLAGS)
    .acl(ACL)
    .group("server")
    .summary("Returns information about one, multiple or all commands.")
    .since("2.8.13")
    .args(&[ArgSpec::new("command-name", ArgKind::String).optional().multiple()]);
/// The spec of `COMMAND DOCS`.
pub const DOCS: CommandSpec = CommandSpec::new("command|docs", -2)
    .flags(FLAGS)
    .acl(ACL)
    .group("server")
    .summary("Returns documentary information about one, multiple or all commands.")
    .since("7.0.0")
    .args(&[ArgSpec::new("command-name", ArgKind::String).optional().multiple()]);
/// The spec of `COMMAND HELP`.
pub const HELP: CommandSpec = CommandSpec::new("command|help", 2)
    .flags(FLAGS)
    .acl(ACL)
    .group("server")
    .summary("Returns helpful text about the different subcommands.")
    .since("5.0.0");

/// The `COMMAND` command and its subcommands.
pub fn command<S>() -> Command<S> {
    Command::sync(SPEC, all)
        .subcommand(Command::sync(COUNT, count))
        .subcommand(Command::sync(LIST, list))
        .subcommand(Command::sync(INFO, info))
        .subcommand(Command::sync(DOCS, docs))
        .subcommand(Command::sync(HELP, help))
}

fn simple_set(items: &[&'static str]) -> Frame {
    Frame::Set(items.iter().map(|&s| Frame::simple(s)).collect())
}

/// The 10-element array `COMMAND INFO` gives for one command.
fn info_frame(spec: &CommandSpec, subs: &[&CommandSpec]) -> Frame {
    let subcommands = if subs.is_empty() {
        Frame::Set(Vec::new())
    } else {
        Frame::Array(subs.iter().map(|s| info_frame(s, &[])).collect())
    };
    Frame::Array(vec![
        Frame::bulk(spec.name),
        Frame::Integer(spec.arity.into()),
        simple_set(spec.flags),
        Frame::Integer(spec.first_key.into()),
        Frame::Integer(spec.last_key.into()),
        Frame::Integer(spec.key_step.into()),
        simple_set(spec.acl_categories),
        Frame::Set(Vec::new()),
        Frame::Set(Vec::new()),
        subcommands,
    ])
}

fn arg_frame(arg: &ArgSpec) -> Frame {
    let mut fields = vec![
        (Frame::bulk("name"), Frame::bulk(arg.name)),
        (Frame::bulk("type"), Frame::bulk(arg.kind.as_str())),
    ];
    if let Some(token) = arg.token {
        fields.push((Frame::bulk("token"), Frame::bulk(token)));
    }
    let mut flags = Vec::new();
    if arg.optional {
        flags.push(Frame::simple("optional"));
    }
    if arg.multiple {
        flags.push(Frame::simple("multiple"));
    }
    if !flags.is_empty() {
        fields.push((Frame::bulk("flags"), Frame::Set(flags)));
    }
    if !arg.arguments.is_empty() {
        fields.push((
            Frame::bulk("arguments"),
            Frame::Array(arg.arguments.iter().map(arg_frame).collect()),
        ));
    }
    Frame::Map(fields)
}

/// The map `COMMAND DOCS` gives for one command. `summary` and `group` are always present:
/// redis-cli reads them without checking.
fn docs_frame(spec: &CommandSpec, subs: &[&CommandSpec]) -> Frame {
    let mut fields = vec![
        (Frame::bulk("summary"), Frame::bulk(spec.summary)),
        (Frame::bulk("since"), Frame::bulk(spec.since)),
        (Frame::bulk("group"), Frame::bulk(spec.group)),
    ];
    // Redis' order: summary, since, group, complexity, module, …, arguments, subcommands.
    if let Some(complexity) = spec.complexity {
        fields.push((Frame::bulk("complexity"), Frame::bulk(complexity)));
    }
    if let Some(module) = spec.module {
        fields.push((Frame::bulk("module"), Frame::bulk(module)));
    }
    if !spec.args.is_empty() {
        fields.push((
            Frame::bulk("arguments"),
            Frame::Array(spec.args.iter().map(arg_frame).collect()),
        ));
    }
    if !subs.is_empty() {
        let subs = subs.iter().map(|s| (Frame::bulk(s.name), docs_frame(s, &[]))).collect();
        fields.push((Frame::bulk("subcommands"), Frame::Map(subs)));
    }
    Frame::Map(fields)
}

fn all<S>(ctx: Ctx<'_, S>, _args: Parse) -> CommandResult {
    let commands = ctx.dispatch.commands();
    Ok(Frame::Array(commands.iter().map(|(spec, subs)| info_frame(spec, subs)).collect()))
}

fn count<S>(ctx: Ctx<'_, S>, _args: Parse) -> CommandResult {
    Ok(Frame::Integer(i64::try_from(ctx.dispatch.commands().len()).unwrap_or(i64::MAX)))
}

fn list<S>(ctx: Ctx<'_, S>, mut args: Parse) -> CommandResult {
    enum Filter {
        All,
        Module(Vec<u8>),
        AclCat(Vec<u8>),
        Pattern(Vec<u8>),
    }
    let filter = if args.is_empty() {
        Filter::All
    } else if args.remaining() == 3 && args.next_if_keyword("FILTERBY") {
        let kind = args.next_bytes()?.to_ascii_lowercase();
        let value = args.next_bytes()?;
        match kind.as_slice() {
            b"module" => Filter::Module(value.to_vec()),
            b"aclcat" => Filter::AclCat(value.to_vec()),
            b"pattern" => Filter::Pattern(value.to_vec()),
            _ => return Err(CommandError::Syntax),
        }
    } else {
        return Err(CommandError::Syntax);
    };
    let keep = |spec: &CommandSpec| match &filter {
        Filter::All => true,
        Filter::Module(name) => {
            spec.module.is_some_and(|m| m.as_bytes().eq_ignore_ascii_case(name))
        }
        Filter::AclCat(cat) => spec
            .acl_categories
            .iter()
            .any(|c| c.trim_start_matches('@').as_bytes().eq_ignore_ascii_case(cat)),
        Filter::Pattern(p) => glob_match(p, spec.name.as_bytes(), true),
    };
    let mut names = Vec::new();
    for (spec, subs) in ctx.dispatch.commands() {
        for s in std::iter::once(spec).chain(subs) {
            if keep(s) {
                names.push(Frame::bulk(s.name));
            }
        }
    }
    Ok(Frame::Array(names))
}

fn info<S>(ctx: Ctx<'_, S>, args: Parse) -> CommandResult {
    let commands = ctx.dispatch.commands();
    if args.is_empty() {
        return Ok(Frame::Array(
            commands.iter().map(|(spec, subs)| info_frame(spec, subs)).collect(),
        ));
    }
    Ok(Frame::Array(
        args.map(|name| {
            commands
                .iter()
                .find(|(spec, _)| spec.name.as_bytes().eq_ignore_ascii_case(&name))
                .map_or(Frame::Null, |(spec, subs)| info_frame(spec, subs))
        })
        .collect(),
    ))
}

fn docs<S>(ctx: Ctx<'_, S>, args: Parse) -> CommandResult {
    let commands = ctx.dispatch.commands();
    let entry = |(spec, subs): &(&CommandSpec, Vec<&CommandSpec>)| {
        (Frame::bulk(spec.name), docs_frame(spec, subs))
    };
    if args.is_empty() {
        return Ok(Frame::Map(commands.iter().map(entry).collect()));
    }
    // Unknown names are left out, as in Redis.
    Ok(Frame::Map(
        args.filter_map(|name| {
            commands
                .iter()
                .find(|(spec, _)| spec.name.as_bytes().eq_ignore_ascii_case(&name))
                .map(entry)
        })
        .collect(),
    ))
}

fn help<S>(_ctx: Ctx<'_, S>, _args: Parse) -> CommandResult {
    const LINES: &[&str] = &[
        "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "(no subcommand)",
        "    Return details about all commands.",
        "COUNT",
        "    Return the total number of commands in this server.",
        "LIST",
        "    Return a list of all commands in this server.",
        "INFO [<command-name> ...]",
        "    Return details about multiple commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "DOCS [<command-name> ...]",
        "    Return documentation details about multiple commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "HELP",
        "    Print this help.",
    ];
    Ok(Frame::Array(LINES.iter().map(|&l| Frame::simple(l)).collect()))
}
