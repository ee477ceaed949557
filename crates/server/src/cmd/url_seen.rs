//! `URL.SEEN ns url [url …]`: check-and-insert, the crawler's question. One integer per URL:
//! `1` seen before (or a false positive, with probability at most the namespace's error
//! bound), `0` new and now recorded, `-1` invalid (neither looked up nor recorded).
//!
//! ```text
//! > URL.SEEN jobs https://a.example/x HTTPS://A.EXAMPLE:443/x#top /relative
//! *3
//! :0
//! :1                          (the same page, spelled differently)
//! :-1                         (a relative URL: not a URL the crawler can fetch)
//! ```
//!
//! The reply rule (docs/protocol.md, "What a reply says was done"): an array reply holds one
//! integer per URL and never an error element, and an error reply means nothing was recorded.
//! Each URL is canonicalized with the namespace's profile; the valid ones go to the engine in
//! one batch. A namespace that does not exist is created with the server's defaults. The reply
//! is an array of integers in RESP3 too. A full `NONSCALING` filter refuses the whole command
//! (`-ERR non scaling filter is full`) unless every URL in it is one it holds.
//!
//! Pipelined `URL.SEEN` calls on one connection run as one engine batch (up to 512 calls), with
//! the same answers as one by one: a pipeline of single-URL calls costs about what one call with
//! all the URLs costs.

use std::sync::Arc;

use bytes::Bytes;
use smallvec::SmallVec;

use crate::app::{App, Lookup, NamespaceCache};
use crate::client::OnReply;
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{CommandError, NO_SUCH_NAMESPACE};
use crate::frame::Frame;
use crate::parse::Parse;
use urlseen_engine::SplitMode;

/// The spec of `URL.SEEN`.
pub const SPEC: CommandSpec = CommandSpec::new("url.seen", -3)
    .flags(&["write", "denyoom", "fast"])
    .keys(1, 1, 1)
    .acl(&["@write", "@fast"])
    .group("url")
    .summary("Checks and records URLs: 1 for each seen before, 0 for each new")
    .since("0.1.0")
    .args(&[ArgSpec::new("ns", ArgKind::Key), ArgSpec::new("url", ArgKind::String).multiple()]);

/// The `URL.SEEN` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, url_seen).batched(url_seen_batch)
}

fn url_seen(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    let key = args.next_bytes()?;
    let rest = args.into_rest();
    let urls = rest.as_slice();
    let cache = ctx.conn.extension::<NamespaceCache>();
    let mut on_reply = Vec::new();
    let answered = ctx.app.answer_urls(&key, urls, Lookup::RecordOnReply(&mut on_reply), cache);
    ctx.conn.defer_all_until_replied(on_reply);
    Ok(answers(answered?))
}

/// Pipelined `URL.SEEN` calls: each run of calls on the same namespace is one engine batch,
/// which answers exactly as the calls one by one would (a URL repeated in a later call of the
/// run is seen). An error that one call alone could cause (a full `NONSCALING` filter, which
/// depends on the call's URLs) must stay that call's: on such a namespace each call is its own
/// batch. Every other error of a batch (`-OOM`, `MISCONF`, the namespace) would have been every
/// call's answer one by one too.
fn url_seen_batch(ctx: Ctx<'_, Arc<App>>, calls: Vec<Parse>) -> Vec<CommandResult> {
    let app = ctx.app;
    let mut on_reply = Vec::new();
    let results = run_batch(app, ctx.conn.extension::<NamespaceCache>(), calls, &mut on_reply);
    ctx.conn.defer_all_until_replied(on_reply);
    results
}

fn run_batch(
    app: &App,
    cache: &mut NamespaceCache,
    calls: Vec<Parse>,
    on_reply: &mut Vec<Box<dyn OnReply>>,
) -> Vec<CommandResult> {
    let mut results = Vec::with_capacity(calls.len());
    let mut calls = calls.into_iter().peekable();
    while let Some(mut call) = calls.next() {
        let key = match call.next_bytes() {
            Ok(key) => key,
            Err(e) => {
                results.push(Err(e));
                continue;
            }
        };
        let mut urls: Vec<Bytes> = call.into_rest().collect();
        let mut counts: SmallVec<[usize; 8]> = smallvec::smallvec![urls.len()];
        while let Some(mut next) = calls.next_if(|next| next.peek() == Some(&key)) {
            next.next();
            let before = urls.len();
            urls.extend(next.into_rest());
            counts.push(urls.len() - before);
        }
        if app.remote().is_some() {
            // In Redis: the merged run goes as one batch.
            let answered = app.answer_urls(&key, &urls, Lookup::RecordOnReply(on_reply), cache);
            split_answers(answered, &counts, &mut results);
            continue;
        }
        match app.cached(cache, &key, || app.url_namespace(&key).map(Some)) {
            Ok(Some(ns)) if ns.options().split.mode == SplitMode::Never => {
                let mut start = 0;
                for count in counts {
                    let call = urls.get(start..start + count).unwrap_or_default();
                    results.push(
                        app.seen_urls(ns, call, Lookup::RecordOnReply(on_reply)).map(answers),
                    );
                    start += count;
                }
            }
            Ok(Some(ns)) => split_answers(
                app.seen_urls(ns, &urls, Lookup::RecordOnReply(on_reply)),
                &counts,
                &mut results,
            ),
            Ok(None) => {
                split_answers(Err(CommandError::custom(NO_SUCH_NAMESPACE)), &counts, &mut results)
            }
            Err(e) => split_answers(Err(e), &counts, &mut results),
        }
    }
    results
}

/// Hands the answers of a merged run back to its calls, `counts[i]` URLs each.
fn split_answers(
    answered: Result<Vec<Result<bool, CommandError>>, CommandError>,
    counts: &[usize],
    results: &mut Vec<CommandResult>,
) {
    match answered {
        // One call (the run of a namespace written once): its answers as they are, not copied.
        Ok(all) if counts.len() == 1 => results.push(Ok(answers(all))),
        Ok(all) => {
            let mut all = all.into_iter();
            for &count in counts {
                results.push(Ok(answers(all.by_ref().take(count).collect())));
            }
        }
        Err(e) => results.extend(counts.iter().map(|_| Err(e.clone()))),
    }
}

/// What an invalid URL answers in `URL.SEEN`, `URL.CHECK` and `URL.FORGET`: neither `0` nor
/// `1`, so that no client can take it for a recorded URL, and an integer, so that no client
/// turns the whole reply into an error (redis-rs does that with an error element).
pub const INVALID_URL_ANSWER: i64 = -1;

/// The reply of `URL.SEEN`, `URL.CHECK` and `URL.FORGET`: an integer per URL, `1` or `0`, or
/// [`INVALID_URL_ANSWER`] for a URL that could not be canonicalized.
pub(crate) fn answers(answers: Vec<Result<bool, CommandError>>) -> Frame {
    Frame::Array(
        answers
            .into_iter()
            .map(|a| Frame::Integer(a.map_or(INVALID_URL_ANSWER, i64::from)))
            .collect(),
    )
}
