//! `BF.SCANDUMP key iterator`: the namespace in chunks, RedisBloom's iterator protocol, for
//! `BF.LOADCHUNK` to load into another key or server.
//!
//! ```text
//! > BF.SCANDUMP seen 0
//! *2
//! :1
//! $<length>
//! URLSEEND…                 the header: name, options, profile, seed
//! > BF.SCANDUMP seen 1
//! *2
//! :9223372036854775807      (a tree position while more follow; this one: the last chunk)
//! $<length>
//! URLSEEND…                 fingerprints of the leaves, at most 16 MiB
//! > BF.SCANDUMP seen 9223372036854775807
//! *2
//! :0
//! $0
//!
//! > BF.SCANDUMP nokey 0
//! -ERR not found
//! > BF.SCANDUMP seen abc
//! -Second argument must be numeric
//! ```
//!
//! Unlike the other `BF.*` commands it also takes URL namespaces: a dump carries the
//! namespace's canonicalization profile and options, so no key is of the wrong type. Each call
//! is stateless (the iterator is a position in the tree) and reads one chunk of the leaf logs
//! from disk; writes go on meanwhile (see `docs/protocol.md` for what a dump taken under
//! writes holds).

use std::sync::Arc;

use bytes::Bytes;

use crate::app::App;
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{BF_NOT_FOUND, CommandError, SCANDUMP_BAD_ITERATOR};
use crate::frame::Frame;
use crate::frame::parse_i64;
use crate::parse::Parse;

/// The spec of `BF.SCANDUMP`.
pub const SPEC: CommandSpec = CommandSpec::new("bf.scandump", 3)
    .flags(&["readonly"])
    .keys(1, 1, 1)
    .acl(&["@read", "@bloom"])
    .module("bf")
    .summary("Begins an incremental save of the bloom filter")
    .since("1.0.0")
    .args(&[ArgSpec::new("key", ArgKind::Key), ArgSpec::new("iterator", ArgKind::Integer)]);

/// The `BF.SCANDUMP` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, bf_scandump)
}

fn bf_scandump(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    let key = args.next_bytes()?;
    let iter = args.next_bytes()?;
    args.finish()?;
    // RedisBloom's order: the key, then the iterator.
    ctx.app.local_only()?;
    if ctx.app.namespace(&key).is_none() {
        return Err(CommandError::custom(BF_NOT_FOUND));
    }
    let iter = parse_i64(&iter).ok_or(CommandError::custom(SCANDUMP_BAD_ITERATOR))?;
    let chunk = ctx.app.dump_chunk(&key, iter)?;
    Ok(Frame::Array(vec![Frame::Integer(chunk.next), Frame::Bulk(Bytes::from(chunk.data))]))
}
