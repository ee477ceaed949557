//! `URL.INFO ns`: the namespace's statistics: what it holds, its memory, its measured fill and
//! estimated false-positive rate, the shape of its tree. A map in RESP3, a flat array of
//! name/value pairs in RESP2.
//!
//! ```text
//! > URL.INFO jobs
//!  1) "name"             "jobs"
//!  3) "type"             "urlseen"           (MBbloom-- for a raw, RedisBloom-style filter)
//!  5) "profile"          "crawler"
//!  7) "count"            (integer) 3          distinct URLs recorded
//!     "kept"             (integer) 0          "seen" answers logged so they stay seen
//!  9) "capacity"         (integer) 1000000    as created (not a cap)
//! 11) "memory_bytes"     (integer) 2097288    RAM: filters + buffers (what RSS shows)
//!     "disk_bytes"       (integer) 0          disk: leaf fingerprint files (+ log, snapshot)
//! 13) "fpr_bound"        "0.01"               the error bound every leaf is kept under
//! 15) "estimated_fpr"    "1.31e-15"           FPR of a random query (mean over leaves)
//! 17) "worst_leaf_fpr"   "1.75e-15"           FPR of the fullest leaf
//! 19) "fill_ratio"       "1.07e-6"            measured fraction of bits set (mean over leaves)
//! 21) "leaves"           (integer) 2
//! 23) "height"           (integer) 1
//! 25) "inner_nodes" … "splitting_nodes" … "splits_started" … "splits_done" … "split_fanout"
//!     … "split_mode" … "initial_leaves" … "leaf_bits" … "leaf_hashes" … "leaf_capacity"
//!     … "exact" … "counting" … "seed" … "leaves_per_depth" (array, index = depth)
//!     … "persistence" (null in memory; else a map: fsync, log_bytes, fsyncs, fsync_micros,
//!     snapshot_offset)
//!     … "recrawl_after" (null without a recrawl window; else its seconds)
//!     … "generations" (an array, oldest first, of maps: start_ms, age_secs, count,
//!     memory_bytes, disk_bytes, worst_leaf_fpr; empty without a window)
//! > URL.INFO nope
//! -ERR not found
//! ```
//!
//! Under `serve --redis` the namespace is read from Redis, and the reply has the fields that
//! mean something there: `name`, `type`, `backend` (`"redis"`), `profile`, `count`,
//! `capacity`, `fpr_bound`, `leaves`, `height`, `recrawl_after` and `generations` (for a
//! window in Redis: `memory_bytes` is the filters this client holds for the generation,
//! `disk_bytes` its fingerprint log's bytes in Redis).
//!
//! Doubles are RESP3 doubles (bulk strings in RESP2); `exact` and `counting` are booleans
//! (`:1`/`:0` in RESP2).

use std::sync::Arc;

use urlseen_engine::{Namespace, RecrawlReport, SplitMode};

use crate::app::{App, KeyKind};
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx};
use crate::error::{CommandError, NO_SUCH_NAMESPACE};
use crate::frame::Frame;
use crate::parse::Parse;
use crate::remote::RemoteInfo;

/// The spec of `URL.INFO`.
pub const SPEC: CommandSpec = CommandSpec::new("url.info", 2)
    .flags(&["readonly"])
    .keys(1, 1, 1)
    .acl(&["@read"])
    .group("url")
    .summary("Returns a namespace's count, memory, fill, estimated error rate and tree shape")
    .since("0.1.0")
    .args(&[ArgSpec::new("ns", ArgKind::Key)]);

/// The `URL.INFO` command.
pub fn command() -> Command<Arc<App>> {
    Command::sync(SPEC, url_info)
}

fn int(n: impl TryInto<i64>) -> Frame {
    n.try_into().map_or(Frame::Integer(i64::MAX), Frame::Integer)
}

fn url_info(ctx: Ctx<'_, Arc<App>>, mut args: Parse) -> CommandResult {
    let key = args.next_bytes()?;
    args.finish()?;
    if let Some(remote) = ctx.app.remote_info(&key) {
        let info = remote?.ok_or(CommandError::custom(NO_SUCH_NAMESPACE))?;
        return Ok(remote_info(&info));
    }
    let ns = ctx.app.namespace(&key).ok_or(CommandError::custom(NO_SUCH_NAMESPACE))?;
    Ok(info(&ns))
}

/// `URL.INFO`'s reply for a namespace in Redis (`serve --redis`).
fn remote_info(i: &RemoteInfo) -> Frame {
    let fields: Vec<(&'static str, Frame)> = vec![
        ("name", Frame::bulk(i.name.clone())),
        ("type", Frame::bulk("urlseen")),
        ("backend", Frame::bulk("redis")),
        ("profile", Frame::bulk(i.options.canon.profile.to_string())),
        ("count", int(i.count)),
        ("capacity", int(i.options.capacity)),
        ("fpr_bound", Frame::Double(i.options.fpr)),
        ("leaves", int(i.leaves)),
        ("height", int(i.height)),
        ("memory_bytes", int(i.memory_bytes)),
        ("worst_leaf_fpr", Frame::Double(i.worst_leaf_fpr)),
        ("recrawl_after", recrawl_after(i.recrawl.as_ref())),
        ("generations", generations(i.recrawl.as_ref())),
    ];
    Frame::Map(fields.into_iter().map(|(k, v)| (Frame::bulk(k), v)).collect())
}

fn recrawl_after(r: Option<&RecrawlReport>) -> Frame {
    r.map_or(Frame::Null, |r| Frame::Double(r.window_secs))
}

/// The live generations, oldest first (empty without a window).
fn generations(r: Option<&RecrawlReport>) -> Frame {
    Frame::Array(r.map_or_else(Vec::new, |r| {
        r.live
            .iter()
            .map(|g| {
                Frame::Map(vec![
                    (Frame::bulk("start_ms"), int(g.start_ms)),
                    (Frame::bulk("age_secs"), Frame::Double(g.age_secs)),
                    (Frame::bulk("count"), int(g.count)),
                    (Frame::bulk("memory_bytes"), int(g.memory_bytes)),
                    (Frame::bulk("disk_bytes"), int(g.disk_bytes)),
                    (Frame::bulk("worst_leaf_fpr"), Frame::Double(g.worst_leaf_fpr)),
                ])
            })
            .collect()
    }))
}

/// `URL.INFO`'s reply for a namespace: the one list of its fields, which the Python bindings'
/// `Namespace.stats()` (python/) returns too, so that the embedded engine and a client of the
/// server answer with the same keys.
pub fn info(ns: &Namespace) -> Frame {
    let s = ns.stats();
    let o = ns.options();
    let fill = if s.leaves.is_empty() {
        0.0
    } else {
        s.leaves.iter().map(|l| l.fill_ratio).sum::<f64>() / s.leaves.len() as f64
    };
    let mode = match o.split.mode {
        SplitMode::Background => "background",
        SplitMode::Inline => "inline",
        SplitMode::Never => "never",
    };
    let seed = i64::try_from(s.seed)
        .map_or_else(|_| Frame::BigNumber(s.seed.to_string().into()), Frame::Integer);
    let fields: Vec<(&'static str, Frame)> = vec![
        ("name", Frame::bulk(s.name.clone())),
        ("type", Frame::bulk(KeyKind::of(ns).type_name())),
        ("profile", Frame::bulk(s.profile)),
        ("count", int(s.count)),
        ("kept", int(s.kept)),
        ("capacity", int(o.capacity)),
        ("memory_bytes", int(s.memory_bytes)),
        ("disk_bytes", int(s.disk_bytes)),
        ("fpr_bound", Frame::Double(s.fpr_bound)),
        ("estimated_fpr", Frame::Double(s.mean_leaf_fpr)),
        ("worst_leaf_fpr", Frame::Double(s.worst_leaf_fpr)),
        ("fill_ratio", Frame::Double(fill)),
        ("leaves", int(s.leaf_count)),
        ("height", int(s.height)),
        ("inner_nodes", int(s.inner_nodes)),
        ("splitting_nodes", int(s.splitting_nodes)),
        ("splits_started", int(s.splits_started)),
        ("splits_done", int(s.splits_done)),
        ("split_fanout", int(s.split_fanout)),
        ("split_mode", Frame::bulk(mode)),
        ("initial_leaves", int(s.initial_leaves)),
        ("leaf_bits", int(s.leaf_bits)),
        ("leaf_hashes", int(s.leaf_hashes)),
        ("leaf_capacity", int(s.leaf_capacity)),
        ("exact", Frame::Boolean(o.exact)),
        ("counting", Frame::Boolean(o.counting)),
        ("seed", seed),
        ("leaves_per_depth", Frame::Array(s.leaves_per_depth.iter().map(|&n| int(n)).collect())),
        (
            "persistence",
            s.persistence.as_ref().map_or(Frame::Null, |p| {
                Frame::Map(vec![
                    (Frame::bulk("fsync"), Frame::bulk(p.fsync)),
                    (Frame::bulk("log_bytes"), int(p.log_bytes)),
                    (Frame::bulk("fsyncs"), int(p.syncs)),
                    (Frame::bulk("fsync_micros"), int(p.sync_micros)),
                    (Frame::bulk("snapshot_offset"), int(p.snapshot_offset)),
                ])
            }),
        ),
        ("recrawl_after", recrawl_after(s.recrawl.as_ref())),
        ("generations", generations(s.recrawl.as_ref())),
    ];
    Frame::Map(fields.into_iter().map(|(k, v)| (Frame::bulk(k), v)).collect())
}
