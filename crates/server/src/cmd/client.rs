//! `CLIENT ID | GETNAME | SETNAME name | SETINFO attr value | INFO | LIST | HELP`: the
//! connection's identity.
//!
//! ```text
//! > CLIENT ID
//! :7
//! > CLIENT GETNAME
//! $-1                       (_ in RESP3)
//! > CLIENT SETNAME crawler-1
//! +OK
//! > CLIENT SETINFO LIB-NAME redis-py
//! +OK
//! > CLIENT INFO
//! id=7 addr=127.0.0.1:50312 laddr=127.0.0.1:6380 name=crawler-1 age=0 idle=0 flags=N db=0 …
//! ```
//!
//! `CLIENT` alone is `-ERR wrong number of arguments for 'client' command`; an unknown
//! subcommand is `-ERR unknown subcommand '<sub>'. Try CLIENT HELP.` Names and `SETINFO` values
//! may only hold the printable ASCII characters `!` to `~`, as in Redis. `CLIENT LIST` and
//! `CLIENT INFO` show the fields Redis shows that mean something here; the others (`db`,
//! `sub`, `multi`, …) have their idle values.

use bytes::Bytes;

use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{
    BAD_CLIENT_NAME, CommandError, INVALID_CLIENT_ID, invalid_client_attr, unknown_client_type,
    unrecognized_option,
};
use crate::frame::{Frame, parse_i64};
use crate::parse::Parse;

/// The spec of the `CLIENT` container.
pub const SPEC: CommandSpec = CommandSpec::new("client", -2)
    .flags(&["sentinel"])
    .acl(&["@slow"])
    .group("connection")
    .summary("A container for client connection commands.")
    .since("2.4.0");

const FLAGS: &[&str] = &["noscript", "loading", "stale"];
const ACL: &[&str] = &["@slow", "@connection"];

/// The spec of `CLIENT ID`.
pub const ID: CommandSpec = CommandSpec::new("client|id", 2)
    .flags(FLAGS)
    .acl(ACL)
    .group("connection")
    .summary("Returns the unique client ID of the connection.")
    .since("5.0.0");
/// The spec of `CLIENT GETNAME`.
pub const GETNAME: CommandSpec = CommandSpec::new("client|getname", 2)
    .flags(FLAGS)
    .acl(ACL)
    .group("connection")
    .summary("Returns the name of the connection.")
    .since("2.6.9");
/// The spec of `CLIENT SETNAME`.
pub const SETNAME: CommandSpec = CommandSpec::new("client|setname", 3)
    .flags(FLAGS)
    .acl(ACL)
    .group("connection")
    .summary("Sets the connection name.")
    .since("2.6.9")
    .args(&[ArgSpec::new("connection-name", ArgKind::String)]);
/// The spec of `CLIENT SETINFO`.
pub const SETINFO: CommandSpec = CommandSpec::new("client|setinfo", 4)
    .flags(FLAGS)
    .acl(ACL)
    .group("connection")
    .summary("Sets information specific to the client or connection.")
    .since("7.2.0")
    .args(&[
        ArgSpec::new("libname", ArgKind::String).token("LIB-NAME"),
        ArgSpec::new("libver", ArgKind::String).token("LIB-VER"),
    ]);
/// The spec of `CLIENT INFO`.
pub const INFO: CommandSpec = CommandSpec::new("client|info", 2)
    .flags(FLAGS)
    .acl(ACL)
    .group("connection")
    .summary("Returns information about the connection.")
    .since("6.2.0");
/// The spec of `CLIENT LIST`.
pub const LIST: CommandSpec = CommandSpec::new("client|list", -2)
    .flags(FLAGS)
    .acl(&["@admin", "@slow", "@dangerous", "@connection"])
    .group("connection")
    .summary("Lists open connections.")
    .since("2.4.0")
    .args(&[
        ArgSpec::new("client-type", ArgKind::String).token("TYPE").optional(),
        ArgSpec::new("client-id", ArgKind::Integer).token("ID").optional().multiple(),
    ]);
/// The spec of `CLIENT HELP`.
pub const HELP: CommandSpec = CommandSpec::new("client|help", 2)
    .flags(&["loading", "stale"])
    .acl(&["@slow", "@connection"])
    .group("connection")
    .summary("Returns helpful text about the different subcommands.")
    .since("5.0.0");

/// The `CLIENT` command and its subcommands.
pub fn command<S>() -> Command<S> {
    Command::container(SPEC)
        .subcommand(Command::sync(ID, id))
        .subcommand(Command::sync(GETNAME, getname))
        .subcommand(Command::sync(SETNAME, setname))
        .subcommand(Command::sync(SETINFO, setinfo))
        .subcommand(Command::sync(INFO, info))
        .subcommand(Command::sync(LIST, list))
        .subcommand(Command::sync(HELP, help))
}

/// Redis' `validateClientAttr`: only `!`..=`~`.
pub(crate) fn valid_attr(value: &[u8]) -> bool {
    value.iter().all(|c| (b'!'..=b'~').contains(c))
}

fn id<S>(ctx: Ctx<'_, S>, _args: Parse) -> CommandResult {
    Ok(Frame::Integer(i64::try_from(ctx.conn.id()).unwrap_or(i64::MAX)))
}

fn getname<S>(ctx: Ctx<'_, S>, _args: Parse) -> CommandResult {
    Ok(ctx.conn.name().map_or(Frame::Null, Frame::Bulk))
}

fn setname<S>(ctx: Ctx<'_, S>, mut args: Parse) -> CommandResult {
    let name = args.next_bytes()?;
    if !valid_attr(&name) {
        return Err(CommandError::custom(BAD_CLIENT_NAME));
    }
    ctx.conn.set_name(Some(name));
    Ok(Frame::ok())
}

fn setinfo<S>(ctx: Ctx<'_, S>, mut args: Parse) -> CommandResult {
    let attr = args.next_bytes()?;
    let value = args.next_bytes()?;
    let lib_name = attr.eq_ignore_ascii_case(b"lib-name");
    if !lib_name && !attr.eq_ignore_ascii_case(b"lib-ver") {
        return Err(unrecognized_option(&attr));
    }
    if !valid_attr(&value) {
        return Err(invalid_client_attr(&attr));
    }
    if lib_name {
        ctx.conn.set_lib_name(Some(value));
    } else {
        ctx.conn.set_lib_ver(Some(value));
    }
    Ok(Frame::ok())
}

fn info<S>(ctx: Ctx<'_, S>, _args: Parse) -> CommandResult {
    let cmd =
        ctx.conn.info().last_command().and_then(|i| ctx.dispatch.name_of(i)).unwrap_or("NULL");
    let mut line = ctx.conn.info().list_line(cmd);
    line.push(b'\n');
    Ok(Frame::verbatim_txt(line))
}

fn list<S>(ctx: Ctx<'_, S>, mut args: Parse) -> CommandResult {
    let mut ids: Option<Vec<u64>> = None;
    let mut all = true;
    if args.remaining() == 2 && args.next_if_keyword("TYPE") {
        let ty = args.next_bytes()?;
        // Every urlseen client is a normal client.
        match ty.to_ascii_lowercase().as_slice() {
            b"normal" => {}
            b"slave" | b"replica" | b"pubsub" | b"master" | b"primary" => all = false,
            _ => return Err(unknown_client_type(&ty)),
        }
    } else if args.remaining() >= 2 && args.next_if_keyword("ID") {
        let mut wanted = Vec::new();
        for arg in args.by_ref() {
            let id = parse_i64(&arg).ok_or(CommandError::custom(INVALID_CLIENT_ID))?;
            wanted.push(u64::try_from(id).unwrap_or(0));
        }
        ids = Some(wanted);
    } else if !args.is_empty() {
        return Err(CommandError::Syntax);
    }
    let mut text = Vec::new();
    if all {
        let clients = ctx.server.clients().snapshot();
        let selected: Vec<_> = match &ids {
            None => clients,
            Some(ids) => ids
                .iter()
                .filter_map(|id| clients.iter().find(|c| c.id() == *id).cloned())
                .collect(),
        };
        for client in selected {
            let cmd = client.last_command().and_then(|i| ctx.dispatch.name_of(i)).unwrap_or("NULL");
            text.extend_from_slice(&client.list_line(cmd));
            text.push(b'\n');
        }
    }
    Ok(Frame::verbatim_txt(Bytes::from(text)))
}

fn help<S>(_ctx: Ctx<'_, S>, _args: Parse) -> CommandResult {
    const LINES: &[&str] = &[
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "LIST [options ...]",
        "    Return information about client connections. Options:",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Return clients of specified type.",
        "    * ID <client-id> [<client-id> ...]",
        "      Return clients of the given ids.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "SETINFO <option> <value>",
        "    Set client meta attr. Options are:",
        "    * LIB-NAME: the client lib name.",
        "    * LIB-VER: the client lib version.",
        "HELP",
        "    Print this help.",
    ];
    Ok(Frame::Array(LINES.iter().map(|&l| Frame::simple(l)).collect()))
}
