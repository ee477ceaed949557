//! `BF.EXISTS key item`: whether the item was (maybe) added. A key that does not exist holds
//! nothing: `0`.
//!
//! ```text
//! > BF.EXISTS seen item1
//! :1                 (#t in RESP3)
//! > BF.EXISTS nokey item1
//! :0
//! ```
//!
//! On a URL namespace it is `-WRONGTYPE …` (RedisBloom answers 0 for a key of another type).

use std::sync::Arc;

use bytes::Bytes;

use crate::app::{App, KeyKind, NamespaceCache};
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{CommandError, WRONGTYPE};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `BF.EXISTS`.
pub const SPEC: CommandSpec = CommandSpec::new("bf.exists", 3)
    .flags(&["readonly", "fast"])
    .keys(1, 1, 1)
    .acl(&["@read", "@fast", "@bloom"])
    .module("bf")
    .complexity("O(k), where k is the number of hash functions used by the last sub-filter")
    .summary("Checks whether an item exists in a Bloom Filter")
    .since("1.0.0")
    .args(&[ArgSpec::new("key", ArgKind::Key), ArgSpec::new("item", ArgKind::String)]);

/// The `BF.EXISTS` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, bf_exists).batched(bf_exists_batch)
}

fn bf_exists(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    let key = args.next_bytes()?;
    let item = args.next_bytes()?;
    args.finish()?;
    let app = ctx.app;
    let cache = ctx.conn.extension::<NamespaceCache>();
    let found = match app.cached(cache, &key, || app.bloom(&key, None))? {
        Some(ns) if KeyKind::of(ns) != KeyKind::Bloom => {
            return Err(CommandError::custom(WRONGTYPE));
        }
        Some(ns) => ns.contains_bytes(&item)?,
        None => false,
    };
    Ok(Frame::Boolean(found))
}

/// Pipelined `BF.EXISTS` calls: each run of calls on the same key is one engine batch.
fn bf_exists_batch(ctx: Ctx<'_, Arc<App>>, calls: Vec<Parse>) -> Vec<CommandResult> {
    let app = ctx.app;
    let cache = ctx.conn.extension::<NamespaceCache>();
    by_key(calls, |key, items| {
        let mut found = vec![false; items.len()];
        match app.cached(cache, key, || app.bloom(key, None))? {
            Some(ns) if KeyKind::of(ns) != KeyKind::Bloom => {
                return Err(CommandError::custom(WRONGTYPE));
            }
            Some(ns) => {
                let fps: Vec<u64> = items.iter().map(|item| ns.fingerprint_bytes(item)).collect();
                ns.contains_fingerprints(&fps, &mut found)?;
            }
            None => {}
        }
        Ok(found.into_iter().map(|f| Ok(Frame::Boolean(f))).collect())
    })
}

/// Runs pipelined `CMD key item` calls in runs of consecutive calls on the same key: `run`
/// gets a key and the items of its run and answers each item, or fails the whole run (every
/// call of it gets that error, as each would have alone). A call with a malformed argument
/// list gets its own error and ends the run before it.
pub(crate) fn by_key(
    calls: Vec<Parse>,
    mut run: impl FnMut(&Bytes, &[Bytes]) -> Result<Vec<CommandResult>, CommandError>,
) -> Vec<CommandResult> {
    let parse = |mut call: Parse| -> Result<(Bytes, Bytes), CommandError> {
        let key = call.next_bytes()?;
        let item = call.next_bytes()?;
        call.finish()?;
        Ok((key, item))
    };
    let mut results = Vec::with_capacity(calls.len());
    let mut pending: Option<Bytes> = None;
    let mut items: Vec<Bytes> = Vec::new();
    let mut flush = |key: Bytes, items: &mut Vec<Bytes>, results: &mut Vec<CommandResult>| {
        match run(&key, items) {
            Ok(answers) => results.extend(answers),
            Err(e) => results.extend(items.iter().map(|_| Err(e.clone()))),
        }
        items.clear();
    };
    for call in calls {
        match parse(call) {
            Ok((key, item)) => {
                if let Some(current) = pending.take_if(|current| *current != key) {
                    flush(current, &mut items, &mut results);
                }
                pending = Some(key);
                items.push(item);
            }
            Err(e) => {
                if let Some(current) = pending.take() {
                    flush(current, &mut items, &mut results);
                }
                results.push(Err(e));
            }
        }
    }
    if let Some(current) = pending.take() {
        flush(current, &mut items, &mut results);
    }
    results
}
