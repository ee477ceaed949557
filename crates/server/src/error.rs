//! Every error string the server sends, in one place.
//!
//! Handlers never format error replies: they return a [`CommandError`], and this module turns it
//! into the exact bytes Redis would send. Connection-fatal framing errors are
//! [`ProtocolError`]s. The strings were checked against the Redis and Valkey sources
//! (`server.c`, `networking.c`, `acl.c`).

use std::borrow::Cow;

use bytes::{BufMut, Bytes, BytesMut};

use crate::frame::Frame;

/// `-NOAUTH`, for a command sent before `AUTH` when a password is set.
pub const NOAUTH: &str = "NOAUTH Authentication required.";
/// `-WRONGPASS`, for a failed `AUTH` or `HELLO … AUTH`.
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
/// `AUTH <password>` when no password is configured.
pub const AUTH_NOT_CONFIGURED: &str = "ERR AUTH <password> called without any password configured \
     for the default user. Are you sure your configuration is correct?";
/// `HELLO` without `AUTH` from an unauthenticated client.
pub const HELLO_NOAUTH: &str = "NOAUTH HELLO must be called with the client already authenticated, \
     otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client \
     and select the RESP protocol version at the same time";
/// `HELLO` with a version that is not an integer.
pub const HELLO_BAD_VERSION: &str = "ERR Protocol version is not an integer or out of range";
/// `HELLO 4`.
pub const NOPROTO: &str = "NOPROTO unsupported protocol version";
/// A client from beyond loopback while protected mode is on and there is no password (the
/// form of Redis' reply: clients and scanners recognise `-DENIED … protected mode`).
pub const DENIED: &str = "DENIED urlseen is running in protected mode because protected mode is \
     enabled and no password is set for the default user. In this mode connections are only \
     accepted from the loopback interface. To connect from other computers, set a password \
     (--requirepass), or restart with '--protected-mode no' after making sure the server is not \
     reachable from the internet";
/// A write while the namespaces hold more RAM than `maxmemory` (Redis' reply under
/// `noeviction`).
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
/// The extra client past `maxclients`.
pub const MAX_CLIENTS: &str = "ERR max number of clients reached";
/// `SELECT` of any database but 0.
pub const DB_INDEX_OUT_OF_RANGE: &str = "ERR DB index is out of range";
/// Redis' shared `syntaxerr`.
pub const SYNTAX: &str = "ERR syntax error";
/// Redis' message when an integer argument does not parse.
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
/// Redis' message when a float argument does not parse.
pub const NOT_FLOAT: &str = "ERR value is not a valid float";
/// `CLIENT SETNAME` / `HELLO SETNAME` with a bad name.
pub const BAD_CLIENT_NAME: &str =
    "ERR Client names cannot contain spaces, newlines or special characters.";

/// `MULTI` inside a transaction (the transaction stays open).
pub const MULTI_NESTED: &str = "ERR MULTI calls can not be nested";
/// `EXEC` with no transaction open.
pub const EXEC_WITHOUT_MULTI: &str = "ERR EXEC without MULTI";
/// `DISCARD` with no transaction open.
pub const DISCARD_WITHOUT_MULTI: &str = "ERR DISCARD without MULTI";
/// `WATCH` inside a transaction (the transaction stays open and can still run).
pub const WATCH_IN_MULTI: &str = "ERR WATCH inside MULTI is not allowed";
/// `EXEC` of a transaction in which a command was refused while queueing.
pub const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";

/// Redis' reply to a command run on a key of another type. urlseen answers it when a `BF.*`
/// command names a namespace that canonicalizes URLs (see [`KeyKind`](crate::app::KeyKind)).
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

// RedisBloom's error replies, verbatim (checked against RedisBloom's `src/rebloom.c` and its
// `tests/flow` suite). Some carry no error code because RedisBloom sends them without one
// (`RedisModule_ReplyWithError(ctx, "Bad capacity")` puts only the `-` in front).

/// `BF.RESERVE` on a key that exists.
pub const BF_ITEM_EXISTS: &str = "ERR item exists";
/// `BF.INFO`, `BF.INSERT … NOCREATE` on a key that does not exist.
pub const BF_NOT_FOUND: &str = "ERR not found";

/// `BF.LOADCHUNK` of a damaged chunk, a header where a data chunk is due, a chunk of another
/// key's dump, or a chunk whose iterator is below its length for an existing key (RedisBloom's
/// words for all: `SB_NewChainFromHeader`, `SBChain_LoadEncodedChunk`).
pub const BAD_CHUNK: &str = "ERR received bad data";
/// `BF.LOADCHUNK` of a chunk whose iterator names no place it can go: out of order, given with
/// another iterator than its own, or any other chunk for an existing key (RedisBloom's words for
/// an offset past the filter's last link).
pub const LOADCHUNK_BAD_OFFSET: &str = "ERR invalid offset - no link found";

/// `BF.SCANDUMP` with an iterator that is not an integer (RedisBloom's words, without `ERR`).
pub const SCANDUMP_BAD_ITERATOR: &str = "Second argument must be numeric";

/// `BF.LOADCHUNK` with an iterator that is not an integer (RedisBloom's words).
pub const LOADCHUNK_BAD_ITERATOR: &str = "ERR Second argument must be numeric";
/// `BF.RESERVE` with an error rate that is not a number.
pub const BF_BAD_ERROR_RATE: &str = "ERR bad error rate";
/// `BF.RESERVE` with an error rate outside (0, 1) (RedisBloom formats its bounds with `%f`).
pub const BF_ERROR_RATE_RANGE: &str = "ERR error rate must be in the range (0.000000, 1.000000)";
/// `BF.RESERVE` with a capacity that is not an integer.
pub const BF_BAD_CAPACITY: &str = "ERR bad capacity";
/// `BF.RESERVE` with a capacity below 1. RedisBloom's upper bound is 2^30 (its
/// `bf-initial-size` maximum); urlseen's is the largest integer, since a DSBF of billions is
/// what it is for (a filter too big for the memory budget is refused on its own terms).
pub const BF_CAPACITY_RANGE: &str = "ERR capacity must be in the range [1, 9223372036854775807]";
/// `BF.RESERVE … EXPANSION` with no value after it.
pub const BF_NO_EXPANSION: &str = "ERR no expansion";
/// `BF.RESERVE … EXPANSION x` with `x` not an integer.
pub const BF_BAD_EXPANSION: &str = "ERR bad expansion";
/// `BF.RESERVE … EXPANSION x` with `x` outside RedisBloom's `bf-expansion-factor` range (0
/// means `NONSCALING`).
pub const BF_EXPANSION_RANGE: &str = "ERR expansion must be in the range [0, 32768]";
/// The largest `EXPANSION` RedisBloom accepts (its `bf-expansion-factor` maximum).
pub const BF_MAX_EXPANSION: i64 = 32768;
/// `BF.RESERVE … NONSCALING EXPANSION x` with `x` other than 0.
pub const BF_NONSCALING_EXPANSION: &str = "Nonscaling filters cannot expand";
/// An insert into a `NONSCALING` filter that holds its capacity.
pub const BF_FULL: &str = "ERR non scaling filter is full";
/// `BF.INSERT … ERROR x` with `x` not a number, or not in (0, 1).
pub const BF_INSERT_BAD_ERROR_RATE: &str = "Bad error rate";
/// `BF.INSERT … EXPANSION x` with `x` not an integer, or not in [0, 32768].
pub const BF_INSERT_BAD_EXPANSION: &str = "Bad expansion";
/// `BF.INSERT … CAPACITY x` with `x` not an integer, or below 1.
pub const BF_INSERT_BAD_CAPACITY: &str = "Bad capacity";
/// `BF.INSERT` with an option it does not know.
pub const BF_INSERT_UNKNOWN_ARGUMENT: &str = "Unknown argument received";
/// `BF.INFO key FIELD` with an unknown field.
pub const BF_INFO_INVALID_VALUE: &str = "Invalid information value";
/// A filter whose initial size would exceed the server's per-namespace memory limit (RedisBloom
/// answers this for absurd capacities too).
pub const INSUFFICIENT_MEMORY: &str = "ERR Insufficient memory to create filter";

// urlseen's own error replies.

/// A key that cannot name a namespace because it is not UTF-8.
pub const NAMESPACE_NOT_UTF8: &str = "ERR invalid namespace name: it is not valid UTF-8";
/// A URL argument that is not UTF-8.
pub const URL_NOT_UTF8: &str = "ERR invalid URL: it is not valid UTF-8";
/// `URL.RESERVE … PROFILE x` with an unknown profile.
pub const UNKNOWN_PROFILE: &str =
    "ERR unknown profile (expected one of crawler, w3lib, safebrowsing, none)";
/// `URL.RESERVE … CAPACITY x` with `x` not a positive integer.
pub const URL_BAD_CAPACITY: &str = "ERR bad capacity: expected a positive integer";
/// `URL.RESERVE … ERROR x` with `x` not a number.
pub const URL_BAD_ERROR_RATE: &str = "ERR bad error rate: expected a number between 0 and 1";
/// `URL.RESERVE … RECRAWL x` with `x` not a positive integer.
pub const URL_BAD_RECRAWL: &str = "ERR bad recrawl window: expected a positive number of seconds";
/// `URL.RESERVE … TTL x` with `x` not a positive number of seconds.
pub const URL_BAD_TTL: &str = "ERR bad TTL: expected a positive number of seconds";
/// `URL.RESERVE … RECRAWL … TTL` under `--redis`: a window in Redis has no lifetime of its own.
pub const URL_TTL_WITH_RECRAWL: &str = "ERR TTL and RECRAWL cannot go together with --redis: \
     the generations of a recrawl window in Redis expire by themselves";
/// `URL.RESERVE … GENERATIONS x` with `x` not a positive integer.
pub const URL_BAD_GENERATIONS: &str = "ERR bad generations: expected a positive integer";
/// `URL.INFO` on a namespace that does not exist.
pub const NO_SUCH_NAMESPACE: &str = "ERR not found";
/// `URL.FORGET ns HOST h` with `h` not UTF-8.
pub const HOST_NOT_UTF8: &str = "ERR invalid host: it is not valid UTF-8";
/// `URL.FORGET` on a namespace without counting filters.
pub const FORGET_UNSUPPORTED: &str = "ERR this namespace cannot forget URLs: create it with \
     URL.RESERVE <ns> EXACT COUNTING";
/// `SCAN` with a cursor that is not an unsigned integer.
pub const INVALID_CURSOR: &str = "ERR invalid cursor";
/// `SLOWLOG GET` with a count that is not an integer ≥ -1.
pub const SLOWLOG_BAD_COUNT: &str = "ERR count should be greater than or equal to -1";
/// `SLOWLOG GET` with more than one argument (Redis' `addReplySubcommandSyntaxError`).
pub const SLOWLOG_GET_SYNTAX: &str =
    "ERR unknown subcommand or wrong number of arguments for 'GET'. Try SLOWLOG HELP.";
/// `EXPIRE … NX` with another condition.
pub const EXPIRE_NX_AND_OTHERS: &str =
    "ERR NX and XX, GT or LT options at the same time are not compatible";
/// `EXPIRE … GT LT`.
pub const EXPIRE_GT_AND_LT: &str = "ERR GT and LT options at the same time are not compatible";
/// `TTL`, `PTTL`, `EXPIRETIME`, `PEXPIRETIME` of a key that does not exist.
pub const TTL_NO_KEY: i64 = -2;
/// `TTL` and its family of a key without a time.
pub const TTL_NO_EXPIRY: i64 = -1;
/// `MEMORY` subcommands that report on the allocator or the whole server.
pub const MEMORY_UNSUPPORTED: &str = "ERR this MEMORY subcommand is not supported by urlseen: \
     MEMORY USAGE <key> is; INFO memory reports the server";

/// `EXPIRE` and its family with a time that overflows (Redis names the command, lowercase).
pub fn invalid_expire_time(command: &str) -> CommandError {
    CommandError::Custom(Cow::Owned(format!("ERR invalid expire time in '{command}' command")))
}

/// `EXPIRE … <option>` with an option that is none of `NX`, `XX`, `GT`, `LT` (echoed as
/// Redis does, line breaks made spaces).
pub fn unsupported_expire_option(option: &[u8]) -> CommandError {
    let mut text = b"ERR Unsupported option ".to_vec();
    text.extend(option.iter().map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }));
    CommandError::Raw(Bytes::from(text))
}

/// `EXEC` itself refused (wrong arity, not authenticated): Redis discards the transaction and
/// answers `-EXECABORT Transaction discarded because of: <reason>`, the reason without the
/// `ERR` code that Redis' formatted refusals lack.
pub fn exec_refused(reason: &CommandError) -> CommandError {
    let text = reason.to_string();
    let reason = text.strip_prefix("ERR ").unwrap_or(&text);
    CommandError::Custom(Cow::Owned(format!(
        "EXECABORT Transaction discarded because of: {reason}"
    )))
}

/// Maps an engine error to its reply: the one place where [`urlseen_engine::Error`] becomes
/// wire text.
///
/// A write refused after a failed write or fsync answers `MISCONF`, the code Redis uses when
/// it cannot persist.
pub fn engine_error(e: &urlseen_engine::Error) -> CommandError {
    use urlseen_engine::Error as E;
    let text = match e {
        E::InvalidUrl(c) | E::InvalidUrlInBatch { source: c, .. } => return canon_error(c),
        E::NamespaceExists(_) => return CommandError::custom(BF_ITEM_EXISTS),
        E::NoSuchNamespace(_) => return CommandError::custom(NO_SUCH_NAMESPACE),
        E::ForgetUnsupported(_) => return CommandError::custom(FORGET_UNSUPPORTED),
        E::InvalidOption { name, reason } => format!("ERR invalid option {name}: {reason}"),
        E::InvalidName { reason, .. } => format!("ERR invalid namespace name: {reason}"),
        // RedisBloom's words for a chunk it cannot use, so that a client written for it reads
        // the same replies; the engine's error says more, and `BF.LOADCHUNK` logs it.
        E::BadChunk { .. } | E::ChunkMismatch { .. } => return CommandError::custom(BAD_CHUNK),
        E::ChunkOutOfOrder { .. } | E::ChunkIteratorMismatch { .. } => {
            return CommandError::custom(LOADCHUNK_BAD_OFFSET);
        }
        E::Poisoned { reason } => format!("MISCONF writes refused after a failed write: {reason}"),
        other => format!("ERR {other}"),
    };
    CommandError::Custom(Cow::Owned(text))
}

/// `BF.LOADCHUNK key iter data` for a key that exists (urlseen loads a dump only into a new
/// key): RedisBloom's reply to the same arguments when the chunk does not fit, decided by its
/// first check (`iter <= 0 || iter < len`: a header, iterator 1, is one) and otherwise "no
/// link found", since a whole namespace has no place for another chunk.
pub fn loadchunk_into_existing(iter: i64, len: usize) -> CommandError {
    if iter <= 0 || usize::try_from(iter).is_ok_and(|i| i < len) {
        CommandError::custom(BAD_CHUNK)
    } else {
        CommandError::custom(LOADCHUNK_BAD_OFFSET)
    }
}

impl From<urlseen_engine::Error> for CommandError {
    /// [`engine_error`]: `?` on an engine call gives the reply a command sends.
    fn from(e: urlseen_engine::Error) -> Self {
        engine_error(&e)
    }
}

/// Maps the error of an engine *write* to its reply: [`engine_error`], except that the write
/// that fails on the disk (the log, or the fingerprint store) answers `MISCONF`, as every later write to that namespace does. None
/// of the command's answers is an acknowledgement, but what reached the disk before the failure
/// (a record whose fsync failed) may still be there after a restart: the reply says so.
pub fn write_error(e: &urlseen_engine::Error) -> CommandError {
    match e {
        urlseen_engine::Error::Io { .. } => CommandError::Custom(Cow::Owned(format!(
            "MISCONF write failed: nothing of this command is acknowledged (its items may or may \
             not be recorded); writes are refused until one succeeds again (retried every second): {e}"
        ))),
        other => engine_error(other),
    }
}

impl From<urlseen_canon::CanonError> for CommandError {
    /// [`canon_error`].
    fn from(e: urlseen_canon::CanonError) -> Self {
        canon_error(&e)
    }
}

/// The reason of a URL that cannot be canonicalized: `ERR invalid URL: …`.
pub fn canon_error(e: &urlseen_canon::CanonError) -> CommandError {
    let reason = e.to_string();
    let text = if reason.starts_with("invalid URL") {
        format!("ERR {reason}")
    } else {
        format!("ERR invalid URL: {reason}")
    };
    CommandError::Custom(Cow::Owned(text))
}

/// An error reply from a command. Its [`to_frame`](CommandError::to_frame) is the reply.
///
/// Engine-backed commands map their domain errors to this type in one place (a `From` impl),
/// using [`CommandError::Custom`] with a constant string for messages of their own, as
/// valkey-bloom does.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// `ERR wrong number of arguments for '<command>' command`.
    #[error("ERR wrong number of arguments for '{command}' command")]
    WrongArity {
        /// The command's full name as Redis spells it: `get`, `client|setname`.
        command: Cow<'static, str>,
    },
    /// `ERR syntax error`.
    #[error("ERR syntax error")]
    Syntax,
    /// `ERR value is not an integer or out of range`.
    #[error("ERR value is not an integer or out of range")]
    NotInteger,
    /// `ERR value is not a valid float`.
    #[error("ERR value is not a valid float")]
    NotFloat,
    /// `NOAUTH Authentication required.`
    #[error("NOAUTH Authentication required.")]
    NoAuth,
    /// `WRONGPASS invalid username-password pair or user is disabled.`
    #[error("WRONGPASS invalid username-password pair or user is disabled.")]
    WrongPass,
    /// Any other message, code included (`"ERR item exists"`, `"NOPROTO …"`).
    #[error("{0}")]
    Custom(Cow<'static, str>),
    /// A message that echoes client bytes (not necessarily UTF-8), code included.
    #[error("{}", String::from_utf8_lossy(.0))]
    Raw(Bytes),
}

impl CommandError {
    /// A [`CommandError::Custom`] from a static message.
    pub const fn custom(message: &'static str) -> CommandError {
        CommandError::Custom(Cow::Borrowed(message))
    }

    /// The error reply.
    pub fn to_frame(&self) -> Frame {
        match self {
            CommandError::Raw(b) => Frame::Error(b.clone()),
            CommandError::Custom(Cow::Borrowed(s)) => {
                Frame::Error(Bytes::from_static(s.as_bytes()))
            }
            CommandError::NoAuth => Frame::Error(Bytes::from_static(NOAUTH.as_bytes())),
            CommandError::WrongPass => Frame::Error(Bytes::from_static(WRONGPASS.as_bytes())),
            CommandError::Syntax => Frame::Error(Bytes::from_static(SYNTAX.as_bytes())),
            CommandError::NotInteger => Frame::Error(Bytes::from_static(NOT_INTEGER.as_bytes())),
            other => Frame::Error(Bytes::from(other.to_string())),
        }
    }
}

impl From<CommandError> for Frame {
    fn from(e: CommandError) -> Frame {
        e.to_frame()
    }
}

/// A request that cannot be framed. The server answers with the error and closes the
/// connection, as Redis does: after a framing error the stream cannot be trusted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// `*<n>` with a bad or too large `n` (over [`Limits::max_args`](crate::Limits)).
    #[error("ERR Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    /// `$<n>` with a bad or too large `n` (over [`Limits::max_bulk_len`](crate::Limits)).
    #[error("ERR Protocol error: invalid bulk length")]
    InvalidBulkLength,
    /// An element of a request array is not a bulk string.
    #[error("ERR Protocol error: expected '$', got '{}'", char::from(*.0))]
    ExpectedBulk(u8),
    /// Bulk data not followed by CRLF (the announced length was wrong). Redis skips two bytes
    /// blindly here; urlseen refuses instead of reading a desynchronised stream.
    #[error("ERR Protocol error: expected CRLF after bulk data")]
    MissingCrlf,
    /// An inline command line longer than 64 KiB.
    #[error("ERR Protocol error: too big inline request")]
    TooBigInline,
    /// A `*<n>` line longer than 64 KiB.
    #[error("ERR Protocol error: too big mbulk count string")]
    TooBigMultibulkCount,
    /// A `$<n>` line longer than 64 KiB.
    #[error("ERR Protocol error: too big bulk count string")]
    TooBigBulkCount,
    /// An inline command with an unterminated quote, or a closing quote not followed by a space.
    #[error("ERR Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
    /// More than 10 arguments before authentication.
    #[error("ERR Protocol error: unauthenticated multibulk length")]
    UnauthenticatedMultibulkLength,
    /// A bulk over 16 KiB before authentication.
    #[error("ERR Protocol error: unauthenticated bulk length")]
    UnauthenticatedBulkLength,
    /// The partial request buffered for the client is over
    /// [`Limits::max_query_buffer`](crate::Limits) (1 MiB before authentication). Redis closes
    /// such a client without a reply; urlseen says why first.
    #[error("ERR Protocol error: query buffer limit reached")]
    QueryBufferLimit,
}

impl ProtocolError {
    /// The error reply sent before the connection is closed.
    pub fn to_frame(&self) -> Frame {
        match self {
            // The byte is the client's, written as is (Redis' `%c`); the encoder maps CR/LF.
            ProtocolError::ExpectedBulk(b) => {
                let mut m = BytesMut::from(&b"ERR Protocol error: expected '$', got '"[..]);
                m.put_u8(*b);
                m.put_u8(b'\'');
                Frame::Error(m.freeze())
            }
            other => Frame::Error(Bytes::from(other.to_string())),
        }
    }
}

/// The reply to an unknown command, byte for byte as Redis builds it: the name (at most 128
/// bytes) and the arguments quoted one by one until 128 bytes of them are written.
pub(crate) fn unknown_command(argv: &[Bytes]) -> CommandError {
    let mut m = BytesMut::with_capacity(200);
    m.put_slice(b"ERR unknown command '");
    m.put_slice(c_prefix(argv.first().map_or(&[][..], |a| &a[..]), 128));
    m.put_slice(b"', with args beginning with: ");
    let mut args_len = 0usize;
    for arg in argv.iter().skip(1) {
        if args_len >= 128 {
            break;
        }
        let part = c_prefix(arg, 128 - args_len);
        m.put_u8(b'\'');
        m.put_slice(part);
        m.put_slice(b"' ");
        args_len += part.len() + 3;
    }
    CommandError::Raw(m.freeze())
}

/// `unknown subcommand 'X'. Try CLIENT HELP.`
pub(crate) fn unknown_subcommand(command: &[u8], sub: &[u8]) -> CommandError {
    let mut m = BytesMut::with_capacity(64 + sub.len().min(128));
    m.put_slice(b"ERR unknown subcommand '");
    m.put_slice(c_prefix(sub, 128));
    m.put_slice(b"'. Try ");
    m.put_slice(&command.to_ascii_uppercase());
    m.put_slice(b" HELP.");
    CommandError::Raw(m.freeze())
}

/// `ERR Syntax error in HELLO option '<opt>'`.
pub(crate) fn hello_option_syntax(opt: &[u8]) -> CommandError {
    quoted("ERR Syntax error in HELLO option '", opt, "'")
}

/// `ERR Unrecognized option '<attr>'` (`CLIENT SETINFO`).
pub(crate) fn unrecognized_option(attr: &[u8]) -> CommandError {
    quoted("ERR Unrecognized option '", attr, "'")
}

/// `ERR <attr> cannot contain spaces, newlines or special characters.` (`CLIENT SETINFO`).
pub(crate) fn invalid_client_attr(attr: &[u8]) -> CommandError {
    quoted("ERR ", attr, " cannot contain spaces, newlines or special characters.")
}

/// `ERR Unknown client type '<type>'` (`CLIENT LIST TYPE`).
pub(crate) fn unknown_client_type(ty: &[u8]) -> CommandError {
    quoted("ERR Unknown client type '", ty, "'")
}

/// `ERR Invalid client ID` (`CLIENT LIST ID`).
pub const INVALID_CLIENT_ID: &str = "ERR Invalid client ID";

fn quoted(before: &str, arg: &[u8], after: &str) -> CommandError {
    let arg = c_prefix(arg, usize::MAX);
    let mut m = BytesMut::with_capacity(before.len() + arg.len() + after.len());
    m.put_slice(before.as_bytes());
    m.put_slice(arg);
    m.put_slice(after.as_bytes());
    CommandError::Raw(m.freeze())
}

/// What C's `%.Ns` prints of a byte string: up to the first NUL, at most `max` bytes.
fn c_prefix(s: &[u8], max: usize) -> &[u8] {
    let s = memchr::memchr(0, s).map_or(s, |nul| s.get(..nul).unwrap_or_default());
    s.get(..max.min(s.len())).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Protocol;

    fn wire(e: CommandError) -> String {
        String::from_utf8(e.to_frame().to_bytes(Protocol::Resp2).to_vec()).unwrap()
    }

    #[test]
    fn unknown_command_matches_redis() {
        let argv =
            |v: &[&str]| v.iter().map(|s| Bytes::copy_from_slice(s.as_bytes())).collect::<Vec<_>>();
        assert_eq!(
            wire(unknown_command(&argv(&["foo"]))),
            "-ERR unknown command 'foo', with args beginning with: \r\n"
        );
        assert_eq!(
            wire(unknown_command(&argv(&["foo", "a", "b c"]))),
            "-ERR unknown command 'foo', with args beginning with: 'a' 'b c' \r\n"
        );
        // CR/LF from the client cannot break the framing.
        assert_eq!(
            wire(unknown_command(&argv(&["f\r\no", "x\ny"]))),
            "-ERR unknown command 'f  o', with args beginning with: 'x y' \r\n"
        );
        // Arguments stop once 128 bytes of them are written; the last one is cut.
        let long = "a".repeat(100);
        let got = wire(unknown_command(&argv(&["x", &long, &long, &long])));
        let want = format!(
            "-ERR unknown command 'x', with args beginning with: '{long}' '{}' \r\n",
            "a".repeat(128 - 103)
        );
        assert_eq!(got, want);
    }

    #[test]
    fn messages_are_redis_strings() {
        assert_eq!(
            wire(CommandError::WrongArity { command: "get".into() }),
            "-ERR wrong number of arguments for 'get' command\r\n"
        );
        assert_eq!(wire(CommandError::NoAuth), "-NOAUTH Authentication required.\r\n");
        assert_eq!(
            wire(unknown_subcommand(b"client", b"nope")),
            "-ERR unknown subcommand 'nope'. Try CLIENT HELP.\r\n"
        );
        assert_eq!(
            ProtocolError::ExpectedBulk(b':').to_frame().to_bytes(Protocol::Resp2),
            Bytes::from_static(b"-ERR Protocol error: expected '$', got ':'\r\n")
        );
    }
}
