//! `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`: iterates over the namespaces a few
//! at a time, with Redis' guarantees: a namespace that exists from the start to the end of a
//! full iteration is returned (at least once), whatever is created or dropped meanwhile.
//!
//! ```text
//! > SCAN 0 COUNT 2
//! *2
//! $19
//! 3208547301229417341        (the cursor to pass next; "0" when the iteration is over)
//! *2
//! $4
//! jobs
//! $2
//! bf
//! ```
//!
//! Names are visited in the order of a 63-bit hash of the name, and the cursor is the hash to
//! resume from, so it stays valid when namespaces come and go. `COUNT` (default 10) is how many
//! names to visit per call; `MATCH` and `TYPE` (`MBbloom--`, `urlseen`) filter what is returned.

use std::sync::Arc;

use bytes::Bytes;

use crate::app::{App, KeyKind};
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{CommandError, INVALID_CURSOR};
use crate::frame::Frame;
use crate::glob::glob_match;
use crate::parse::Parse;

/// The spec of `SCAN`.
pub const SPEC: CommandSpec = CommandSpec::new("scan", -2)
    .flags(&["readonly"])
    .acl(&["@keyspace", "@read", "@slow"])
    .group("generic")
    .summary("Iterates over the key names in the database.")
    .since("2.8.0")
    .args(&[
        ArgSpec::new("cursor", ArgKind::Integer),
        ArgSpec::new("pattern", ArgKind::Pattern).token("MATCH").optional(),
        ArgSpec::new("count", ArgKind::Integer).token("COUNT").optional(),
        ArgSpec::new("type", ArgKind::String).token("TYPE").optional(),
    ]);

/// The `SCAN` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, scan)
}

/// Where a name sits in the iteration order: never 0, which is the start (and end) cursor.
fn position(name: &str) -> u64 {
    (xxhash_rust::xxh3::xxh3_64(name.as_bytes()) >> 1).max(1)
}

fn scan(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    let cursor = args.next_bytes()?;
    let cursor: u64 = std::str::from_utf8(&cursor)
        .ok()
        .and_then(|c| c.parse().ok())
        .ok_or(CommandError::custom(INVALID_CURSOR))?;
    let mut pattern = None;
    let mut count = 10usize;
    let mut kind = None;
    while let Some(arg) = args.next() {
        if arg.eq_ignore_ascii_case(b"MATCH") {
            pattern = Some(args.next_bytes().map_err(|_| CommandError::Syntax)?);
        } else if arg.eq_ignore_ascii_case(b"COUNT") {
            if args.is_empty() {
                return Err(CommandError::Syntax);
            }
            let n = args.next_int()?;
            count = usize::try_from(n).ok().filter(|&n| n >= 1).ok_or(CommandError::Syntax)?;
        } else if arg.eq_ignore_ascii_case(b"TYPE") {
            let name = args.next_bytes().map_err(|_| CommandError::Syntax)?;
            // An unknown type matches nothing.
            kind = Some(KeyKind::from_type_name(&name));
        } else {
            return Err(CommandError::Syntax);
        }
    }
    let mut names: Vec<(u64, String)> = ctx
        .app
        .db()
        .namespace_names()
        .into_iter()
        .map(|name| (position(&name), name))
        .filter(|(pos, _)| *pos >= cursor)
        .collect();
    names.sort_unstable();
    // Visit `count` names, and any that share the last one's position, so the cursor always
    // moves forward.
    let mut take = count.min(names.len());
    while let (Some(last), Some(next)) = (names.get(take.wrapping_sub(1)), names.get(take)) {
        if last.0 != next.0 {
            break;
        }
        take += 1;
    }
    let next = names.get(take).map_or(0, |(pos, _)| *pos);
    let found = names
        .into_iter()
        .take(take)
        .filter(|(_, name)| pattern.as_ref().is_none_or(|p| glob_match(p, name.as_bytes(), false)))
        .filter(|(_, name)| match kind {
            None => true,
            Some(None) => false,
            Some(Some(kind)) => {
                ctx.app.db().namespace(name).is_some_and(|ns| KeyKind::of(&ns) == kind)
            }
        })
        .map(|(_, name)| Frame::bulk(name))
        .collect();
    Ok(Frame::Array(vec![Frame::Bulk(Bytes::from(next.to_string())), Frame::Array(found)]))
}
