//! `URL.FORGET ns url [url …]`: forgets URLs, so that they are new again. One integer per URL:
//! `1` it was recorded and is forgotten, `0` it was not recorded, `-1` invalid (not looked up).
//!
//! ```text
//! > URL.FORGET jobs https://a.example/x
//! *1
//! :1
//! > URL.FORGET plain https://a.example/x
//! -ERR this namespace cannot forget URLs: create it with URL.RESERVE <ns> EXACT COUNTING
//! ```
//!
//! A plain Bloom filter cannot unlearn: only a namespace with counting filters can forget, and
//! on any other the whole command fails, forgetting nothing. A namespace that does not exist has
//! nothing to forget: zeros (and `-1` for invalid URLs).

use std::sync::Arc;

use crate::app::App;
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::parse::Parse;

/// The spec of `URL.FORGET`.
pub const SPEC: CommandSpec = CommandSpec::new("url.forget", -3)
    .flags(&["write", "fast"])
    .keys(1, 1, 1)
    .acl(&["@write", "@fast"])
    .group("url")
    .summary("Forgets URLs (namespaces with counting filters only)")
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
    ctx.app.local_only()?;
    let answers = match ctx.app.namespace(&key) {
        Some(ns) => ctx.app.forget(&ns, urls)?,
        None => ctx.app.check_urls_absent(urls),
    };
    Ok(super::url_seen::answers(answers))
}
