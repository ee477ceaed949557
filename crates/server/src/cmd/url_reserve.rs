//! `URL.RESERVE ns [CAPACITY n] [ERROR p] [PROFILE name] [EXACT] [COUNTING] [RECRAWL seconds
//! [GENERATIONS g]] [KEEPURLS] [TTL seconds]`: creates a URL namespace.
//!
//! ```text
//! > URL.RESERVE jobs CAPACITY 10000000 ERROR 0.001 PROFILE w3lib
//! +OK
//! > URL.RESERVE news RECRAWL 2592000
//! +OK
//! > URL.RESERVE job:42 TTL 86400
//! +OK
//! > URL.RESERVE jobs
//! -ERR item exists
//! > URL.RESERVE x PROFILE nope
//! -ERR unknown profile (expected one of crawler, w3lib, safebrowsing, none)
//! > URL.RESERVE x ERROR 2
//! -ERR invalid option fpr: must be between 0 and 1 (exclusive), got 2
//! ```
//!
//! Options may come in any order; what is left out comes from the server's defaults (capacity
//! 100, so a namespace starts as a small list and grows by splits; error 0.01, profile
//! `crawler`; unless configured otherwise). `CAPACITY` sizes the
//! namespace, it is not a cap: the DSBF splits past it and keeps the error bound. `PROFILE`
//! picks the canonicalization (`crawler`, `w3lib`, `safebrowsing`, `none`: raw bytes, which
//! makes the key a RedisBloom-compatible filter). `EXACT` confirms every positive against the
//! fingerprints its leaf holds (no false positives beyond 64-bit fingerprint collisions); `COUNTING`
//! (implies `EXACT`) lets `URL.FORGET` work. `RECRAWL seconds` gives the namespace a recrawl
//! window: a URL recorded more than that long ago is new again, with a precision of
//! `seconds / g` (`GENERATIONS g`, default 8; see docs/recrawl.md). `CAPACITY` is then the
//! URLs expected per window. `KEEPURLS` keeps every recorded URL in a journal on disk (about
//! the URL's length plus 14 bytes each), so that `URL.FORGET ns PREFIX p` works (see
//! docs/forget.md); not with `RECRAWL`. `TTL seconds` gives the namespace a lifetime, as
//! `EXPIRE` would right after the create (a per-job namespace that ends by itself); with
//! `--redis` every Redis key of the namespace gets it (not with `RECRAWL` there: a window's
//! generations expire by themselves).

use std::sync::Arc;
use std::time::Duration;

use urlseen_engine::Profile;

use crate::app::{App, ExpireIf, Keyspace};
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{
    CommandError, UNKNOWN_PROFILE, URL_BAD_CAPACITY, URL_BAD_ERROR_RATE, URL_BAD_GENERATIONS,
    URL_BAD_RECRAWL, URL_BAD_TTL, URL_TTL_WITH_RECRAWL,
};
use crate::frame::Frame;
use crate::parse::Parse;

/// The spec of `URL.RESERVE`.
pub const SPEC: CommandSpec = CommandSpec::new("url.reserve", -2)
    .flags(&["write", "denyoom", "fast"])
    .keys(1, 1, 1)
    .acl(&["@write", "@fast"])
    .group("url")
    .summary("Creates a URL namespace with its size, error bound and canonicalization profile")
    .since("0.1.0")
    .args(&[
        ArgSpec::new("ns", ArgKind::Key),
        ArgSpec::new("capacity", ArgKind::Integer).token("CAPACITY").optional(),
        ArgSpec::new("error", ArgKind::Double).token("ERROR").optional(),
        ArgSpec::new("profile", ArgKind::String).token("PROFILE").optional(),
        ArgSpec::new("exact", ArgKind::PureToken).token("EXACT").optional(),
        ArgSpec::new("counting", ArgKind::PureToken).token("COUNTING").optional(),
        ArgSpec::new("recrawl", ArgKind::Integer).token("RECRAWL").optional(),
        ArgSpec::new("generations", ArgKind::Integer).token("GENERATIONS").optional(),
        ArgSpec::new("keepurls", ArgKind::PureToken).token("KEEPURLS").optional(),
        ArgSpec::new("ttl", ArgKind::Integer).token("TTL").optional(),
    ]);

/// The `URL.RESERVE` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, url_reserve)
}

fn url_reserve(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    let key = args.next_bytes()?;
    let mut options = ctx.app.config().url_defaults.clone();
    let mut ttl = None;
    while let Some(arg) = args.next() {
        let is = |kw: &str| arg.eq_ignore_ascii_case(kw.as_bytes());
        if is("CAPACITY") {
            let n = args.next_int().map_err(|_| CommandError::custom(URL_BAD_CAPACITY))?;
            options.capacity = u64::try_from(n)
                .ok()
                .filter(|&n| n > 0)
                .ok_or(CommandError::custom(URL_BAD_CAPACITY))?;
        } else if is("ERROR") {
            options.fpr = args.next_f64().map_err(|_| CommandError::custom(URL_BAD_ERROR_RATE))?;
        } else if is("PROFILE") {
            let name = args.next_bytes()?;
            options.canon.profile = std::str::from_utf8(&name)
                .ok()
                .and_then(|name| name.parse::<Profile>().ok())
                .ok_or(CommandError::custom(UNKNOWN_PROFILE))?;
        } else if is("EXACT") {
            options.exact = true;
        } else if is("COUNTING") {
            options.counting = true;
            options.exact = true;
        } else if is("KEEPURLS") {
            options.keep_urls = true;
        } else if is("RECRAWL") {
            let secs = args.next_int().map_err(|_| CommandError::custom(URL_BAD_RECRAWL))?;
            let secs = u64::try_from(secs)
                .ok()
                .filter(|&s| s > 0)
                .ok_or(CommandError::custom(URL_BAD_RECRAWL))?;
            options.recrawl_after = Some(Duration::from_secs(secs));
        } else if is("GENERATIONS") {
            let g = args.next_int().map_err(|_| CommandError::custom(URL_BAD_GENERATIONS))?;
            options.generations = u32::try_from(g)
                .ok()
                .filter(|&g| g > 0)
                .ok_or(CommandError::custom(URL_BAD_GENERATIONS))?;
        } else if is("TTL") {
            let secs = args.next_int().map_err(|_| CommandError::custom(URL_BAD_TTL))?;
            let ms = secs.checked_mul(1000).filter(|&ms| ms > 0 && ms <= i64::MAX / 2);
            ttl = Some(ms.ok_or(CommandError::custom(URL_BAD_TTL))?);
        } else {
            return Err(CommandError::Syntax);
        }
    }
    match ctx.app.keyspace() {
        Keyspace::Redis(_) if ttl.is_some() && options.recrawl_after.is_some() => {
            // A window's generations expire by themselves; the window has no lifetime.
            return Err(CommandError::custom(URL_TTL_WITH_RECRAWL));
        }
        Keyspace::Redis(_) => ctx.app.remote_reserve(&key, &options)?,
        Keyspace::Local => {
            ctx.app.create(&key, options)?;
        }
    }
    if let Some(ms) = ttl {
        let at = ctx.app.now_ms().saturating_add(ms);
        ctx.app.expire_at(&key, at, ExpireIf::default())?;
    }
    Ok(Frame::ok())
}
