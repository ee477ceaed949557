//! `URL.CHECK ns url [url …]`: read-only `URL.SEEN`: `1` seen, `0` not seen, `-1` invalid;
//! records nothing.
//!
//! ```text
//! > URL.CHECK jobs https://a.example/x https://a.example/y
//! *2
//! :1
//! :0
//! ```
//!
//! A namespace that does not exist has seen nothing (and is not created); URLs are still
//! validated, with the server's default profile then.

use std::sync::Arc;

use crate::app::{App, Lookup, NamespaceCache};
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::parse::Parse;

/// The spec of `URL.CHECK`.
pub const SPEC: CommandSpec = CommandSpec::new("url.check", -3)
    .flags(&["readonly", "fast"])
    .keys(1, 1, 1)
    .acl(&["@read", "@fast"])
    .group("url")
    .summary("Checks URLs without recording them: 1 for each seen, 0 for each not seen")
    .since("0.1.0")
    .args(&[ArgSpec::new("ns", ArgKind::Key), ArgSpec::new("url", ArgKind::String).multiple()]);

/// The `URL.CHECK` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, url_check)
}

fn url_check(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    let key = args.next_bytes()?;
    let rest = args.into_rest();
    let urls = rest.as_slice();
    let cache = ctx.conn.extension::<NamespaceCache>();
    Ok(super::url_seen::answers(ctx.app.answer_urls(&key, urls, Lookup::Check, cache)?))
}
