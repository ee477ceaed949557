//! `BF.LOADCHUNK key iterator data`: loads one chunk that `BF.SCANDUMP` returned, with the
//! iterator it returned with it.
//!
//! ```text
//! > BF.LOADCHUNK copy 1 <header>
//! +OK                        the restore began; `copy` is not visible yet
//! > BF.LOADCHUNK copy 9223372036854775807 <last chunk>
//! +OK                        the last chunk: `copy` exists, whole
//! > BF.LOADCHUNK nokey 5 <chunk>
//! -ERR not found
//! > BF.LOADCHUNK copy 1 <header>
//! -ERR received bad data     `copy` exists: RedisBloom's reply to a header there
//! > BF.LOADCHUNK copy2 1 <damaged>
//! -ERR received bad data
//! ```
//!
//! The header chunk (iterator 1) starts a restore into a key that must not exist; the key stays
//! invisible (`EXISTS` 0, other commands as if it did not exist, creating it refused) until its
//! last chunk is loaded, and `DEL` abandons it. Refusals are in RedisBloom's words, so a client
//! written for it reads the replies it knows: a damaged chunk, a header where a data chunk is
//! due, or a chunk of another key's dump is `-ERR received bad data`; a chunk out of order or
//! given with another iterator than its own is `-ERR invalid offset - no link found`. Nothing of
//! a refused chunk is loaded and the restore waits for the right one. A key that exists takes
//! no chunk (RedisBloom would copy it into the filter's bits): it gets RedisBloom's reply for
//! a chunk that does not fit. With `--data` the namespace is on disk, synced, when the last
//! chunk's `+OK` is sent.

use std::sync::Arc;

use crate::app::App;
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{CommandError, LOADCHUNK_BAD_ITERATOR};
use crate::frame::{Frame, parse_i64};
use crate::parse::Parse;

/// The spec of `BF.LOADCHUNK`.
pub const SPEC: CommandSpec = CommandSpec::new("bf.loadchunk", 4)
    .flags(&["write", "denyoom"])
    .keys(1, 1, 1)
    .acl(&["@write", "@bloom"])
    .module("bf")
    .summary("Restores a filter previously saved using SCANDUMP")
    .since("1.0.0")
    .args(&[
        ArgSpec::new("key", ArgKind::Key),
        ArgSpec::new("iterator", ArgKind::Integer),
        ArgSpec::new("data", ArgKind::String),
    ]);

/// The `BF.LOADCHUNK` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, bf_loadchunk)
}

fn bf_loadchunk(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    let key = args.next_bytes()?;
    let iter = args.next_bytes()?;
    let data = args.next_bytes()?;
    args.finish()?;
    let iter = parse_i64(&iter).ok_or(CommandError::custom(LOADCHUNK_BAD_ITERATOR))?;
    ctx.app.load_chunk(&key, iter, &data)?;
    Ok(Frame::ok())
}
