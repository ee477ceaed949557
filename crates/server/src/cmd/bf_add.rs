//! `BF.ADD key item`: adds an item, creating the filter with the defaults (capacity 100, error
//! rate 0.01, expansion 2) if the key does not exist.
//!
//! ```text
//! > BF.ADD seen item1
//! :1                 (#t in RESP3: the item is new)
//! > BF.ADD seen item1
//! :0                 (#f: it was (maybe) there already)
//! > BF.ADD fixed one-too-many
//! -ERR non scaling filter is full
//! ```
//!
//! Pipelined `BF.ADD` calls on one connection run as one engine batch per run of calls on the
//! same key, with the same answers as one by one (an item repeated later in the run is seen).

use std::sync::Arc;

use urlseen_engine::SplitMode;

use crate::app::{App, KeyKind, NamespaceCache};
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{BF_NOT_FOUND, CommandError, WRONGTYPE};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `BF.ADD`.
pub const SPEC: CommandSpec = CommandSpec::new("bf.add", 3)
    .flags(&["write", "denyoom"])
    .keys(1, 1, 1)
    .acl(&["@write", "@bloom"])
    .module("bf")
    .complexity("O(k), where k is the number of hash functions used by the last sub-filter")
    .summary("Adds an item to a Bloom Filter")
    .since("1.0.0")
    .args(&[ArgSpec::new("key", ArgKind::Key), ArgSpec::new("item", ArgKind::String)]);

/// The `BF.ADD` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, bf_add).batched(bf_add_batch)
}

fn bf_add(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    let key = args.next_bytes()?;
    let item = args.next_bytes()?;
    args.finish()?;
    let app = ctx.app;
    let cache = ctx.conn.extension::<NamespaceCache>();
    let ns = app
        .cached(cache, &key, || app.bloom(&key, Some(&app.config().bloom_defaults)))?
        .ok_or(CommandError::custom(BF_NOT_FOUND))?;
    if KeyKind::of(ns) != KeyKind::Bloom {
        return Err(CommandError::custom(WRONGTYPE));
    }
    let ns = Arc::clone(ns);
    let mut seen = [false];
    let mut on_reply = Vec::new();
    let inserted =
        app.insert_on_reply(&ns, &[ns.fingerprint_bytes(&item)], &mut seen, &mut on_reply);
    ctx.conn.defer_all_until_replied(on_reply);
    inserted?;
    Ok(Frame::Boolean(!seen[0]))
}

/// Pipelined `BF.ADD` calls: each run of calls on the same key is one engine batch.
fn bf_add_batch(ctx: Ctx<'_, Arc<App>>, calls: Vec<Parse>) -> Vec<CommandResult> {
    let app = ctx.app;
    let cache = ctx.conn.extension::<NamespaceCache>();
    let mut on_reply = Vec::new();
    let results = super::bf_exists::by_key(calls, |key, items| {
        let ns = app
            .cached(cache, key, || app.bloom(key, Some(&app.config().bloom_defaults)))?
            .ok_or(CommandError::custom(BF_NOT_FOUND))?;
        if KeyKind::of(ns) != KeyKind::Bloom {
            return Err(CommandError::custom(WRONGTYPE));
        }
        let fps: Vec<u64> = items.iter().map(|item| ns.fingerprint_bytes(item)).collect();
        if ns.options().split.mode == SplitMode::Never {
            // A non-scaling filter refuses a whole command that does not fit: one call at a
            // time, so that one call's refusal is not its neighbours'.
            return Ok(fps
                .iter()
                .map(|&fp| {
                    let mut seen = [false];
                    app.insert(ns, &[fp], &mut seen)?;
                    Ok(Frame::Boolean(!seen[0]))
                })
                .collect());
        }
        let mut seen = vec![false; fps.len()];
        app.insert_on_reply(ns, &fps, &mut seen, &mut on_reply)?;
        Ok(seen.iter().map(|&seen| Ok(Frame::Boolean(!seen))).collect())
    });
    ctx.conn.defer_all_until_replied(on_reply);
    results
}
