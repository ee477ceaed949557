//! `URL.FORGET ns url [url …]`: forgets URLs, so that they are new again. One integer per URL:
//! `1` it was recorded and is forgotten, `0` it was not recorded, `-1` invalid (not looked up).
//!
//! `URL.FORGET ns HOST h`: forgets every URL of host `h` (its canonical host, any scheme and
//! port), in any namespace that records URLs (Bloom, exact, counting); the reply is how many
//! URLs were forgotten. `URL.FORGET ns PREFIX p` forgets every URL that starts with `p`
//! (compared as canonical URLs), in a namespace created with `URL.RESERVE … KEEPURLS`; the
//! reply is how many (see `docs/forget.md`). Under `serve --redis`, `URL.FORGET ns HOST h`
//! forgets in the namespace in Redis (the other forms are refused there: a Bloom leaf in Redis
//! cannot forget one URL, and Redis keeps no URLs for a prefix).
//!
//! ```text
//! > URL.FORGET jobs https://a.example/x
//! *1
//! :1
//! > URL.FORGET plain https://a.example/x
//! -ERR this namespace cannot forget URLs: create it with URL.RESERVE <ns> EXACT COUNTING
//! > URL.FORGET plain HOST a.example
//! :1337
//! > URL.FORGET kept PREFIX https://a.example/blog/
//! :42
//! ```
//!
//! The forms are told apart by the arguments after `ns`: exactly two, the first of them the
//! word `HOST` or `PREFIX` (any case), is a forget by host or prefix. No URL is the bare word
//! `HOST` (it has no scheme), except in a namespace with profile `none`, where an item `HOST`
//! is forgotten with another argument beside it (`URL.FORGET ns HOST HOST` forgets the host
//! `HOST`).
//!
//! A plain Bloom filter cannot unlearn one URL: only a namespace with counting filters can
//! forget URLs one by one, and on any other the whole command fails, forgetting nothing. A
//! namespace that does not exist has nothing to forget: zeros (and `-1` for invalid URLs), or
//! `0` for a host.

use std::sync::Arc;

use crate::app::App;
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `URL.FORGET`.
pub const SPEC: CommandSpec = CommandSpec::new("url.forget", -3)
    .flags(&["write", "fast"])
    .keys(1, 1, 1)
    .acl(&["@write", "@fast"])
    .group("url")
    .summary(
        "Forgets URLs (namespaces with counting filters), every URL of a host (HOST h, any \
         namespace), or every URL under a prefix (PREFIX p, namespaces that keep their URLs)",
    )
    .since("0.1.0")
    .args(&[ArgSpec::new("ns", ArgKind::Key), ArgSpec::new("url", ArgKind::String).multiple()]);

/// The `URL.FORGET` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, url_forget)
}

fn url_forget(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    let key = args.next_bytes()?;
    let rest = args.into_rest();
    let urls = rest.as_slice();
    if let [word, host] = urls
        && word.as_ref().eq_ignore_ascii_case(b"HOST")
        && let Some(n) = ctx.app.remote_forget_host(&key, host.as_ref())
    {
        return Ok(Frame::Integer(i64::try_from(n?).unwrap_or(i64::MAX)));
    }
    ctx.app.local_only()?;
    if let [word, arg] = urls {
        let word: &[u8] = word.as_ref();
        let by_host = word.eq_ignore_ascii_case(b"HOST");
        if by_host || word.eq_ignore_ascii_case(b"PREFIX") {
            let Some(ns) = ctx.app.namespace(&key) else { return Ok(Frame::Integer(0)) };
            let n = match by_host {
                true => ctx.app.forget_host(&ns, arg.as_ref())?,
                false => ctx.app.forget_prefix(&ns, arg.as_ref())?,
            };
            return Ok(Frame::Integer(i64::try_from(n).unwrap_or(i64::MAX)));
        }
    }
    let answers = match ctx.app.namespace(&key) {
        Some(ns) => ctx.app.forget(&ns, urls)?,
        None => ctx.app.check_urls_absent(urls),
    };
    Ok(super::url_seen::answers(answers))
}
