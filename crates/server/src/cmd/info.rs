//! `INFO [section …]`: server information in Redis' `key:value` text format, as a verbatim
//! string (a bulk string for RESP2 clients).
//!
//! ```text
//! > INFO server
//! # Server
//! redis_version:7.2.0
//! urlseen_version:0.1.0
//! redis_mode:standalone
//! …
//! ```
//!
//! Sections shown by plain `INFO`: `server`, `clients`, `persistence`, `stats`,
//! `replication`, `keyspace` (and whatever the engine registers as default);
//! `commandstats` and `latencystats` only when asked for, or with `INFO all` /
//! `INFO everything`. Unknown section
//! names give an empty reply, as in Redis. `redis_version` is the Redis protocol level urlseen
//! answers like (some client libraries read it to pick features); `urlseen_version` is ours.
//! The engine replaces `persistence` and `keyspace` with its own through
//! [`Dispatch::info_section`](crate::Dispatch::info_section).

use std::fmt::Write as _;

pub use crate::dispatch::InfoSection;
use crate::dispatch::{ArgKind, ArgSpec, Command, CommandResult, CommandSpec, Ctx, Dispatch};
use crate::frame::Frame;
use crate::parse::Parse;
use crate::state::ServerState;

/// The Redis version whose protocol and replies urlseen follows.
pub const REDIS_COMPAT_VERSION: &str = "7.2.0";

/// The spec of `INFO`.
pub const SPEC: CommandSpec = CommandSpec::new("info", -1)
    .flags(&["loading", "stale", "sentinel"])
    .acl(&["@slow", "@dangerous"])
    .group("server")
    .summary("Returns information and statistics about the server.")
    .since("1.0.0")
    .args(&[ArgSpec::new("section", ArgKind::String).optional().multiple()]);

/// The `INFO` command.
pub fn command<S>() -> Command<S> {
    Command::sync(SPEC, info)
}

fn info<S>(ctx: Ctx<'_, S>, args: Parse) -> CommandResult {
    let wanted: Vec<String> =
        args.map(|a| String::from_utf8_lossy(&a).to_ascii_lowercase()).collect();
    let mut text = String::new();
    ctx.dispatch.write_info(ctx.server, &wanted, &mut text);
    Ok(Frame::verbatim_txt(text))
}

/// Registers the built-in sections.
pub(crate) fn register_sections<S>(d: &mut Dispatch<S>) {
    d.info_section("server", true, server::<S>);
    d.info_section("clients", true, clients::<S>);
    d.info_section("persistence", true, persistence::<S>);
    d.info_section("stats", true, stats::<S>);
    d.info_section("replication", true, replication::<S>);
    d.info_section("keyspace", true, |_, _, _| {});
    d.info_section("commandstats", false, commandstats::<S>);
    d.info_section("latencystats", false, latencystats::<S>);
}

fn server<S>(_app: &S, s: &ServerState, out: &mut InfoSection) {
    let uptime = s.uptime().as_secs();
    out.field("redis_version", REDIS_COMPAT_VERSION)
        .field("urlseen_version", env!("CARGO_PKG_VERSION"))
        .field("redis_mode", "standalone")
        .field("os", format_args!("{} {}", std::env::consts::OS, std::env::consts::ARCH))
        .field("arch_bits", usize::BITS)
        .field("process_id", std::process::id())
        .field("tcp_port", s.local_addr().map_or(0, |a| a.port()))
        .field("uptime_in_seconds", uptime)
        .field("uptime_in_days", uptime / 86_400);
}

fn clients<S>(_app: &S, s: &ServerState, out: &mut InfoSection) {
    out.field("connected_clients", s.clients().len())
        .field("maxclients", s.config().maxclients)
        .field("blocked_clients", 0);
}

fn persistence<S>(_app: &S, _s: &ServerState, out: &mut InfoSection) {
    out.field("loading", 0).field("async_loading", 0);
}

fn stats<S>(_app: &S, s: &ServerState, out: &mut InfoSection) {
    let m = s.metrics();
    out.field("total_connections_received", m.connections_total())
        .field("total_commands_processed", m.commands_total())
        .field("total_net_input_bytes", m.net_input_bytes())
        .field("total_net_output_bytes", m.net_output_bytes())
        .field("rejected_connections", m.connections_rejected())
        .field("total_error_replies", m.error_replies())
        .field("unknown_commands", m.unknown_commands())
        .field("protocol_error_disconnections", m.protocol_errors())
        .field("client_query_buffer_limit_disconnections", m.query_buffer_disconnections())
        .field("idle_timeout_disconnections", m.idle_disconnections())
        .field("undelivered_replies", m.undelivered_replies())
        .field("unrecorded_answers", m.unrecorded_answers());
}

fn replication<S>(_app: &S, _s: &ServerState, out: &mut InfoSection) {
    out.field("role", "master").field("connected_slaves", 0);
}

fn commandstats<S>(_app: &S, s: &ServerState, out: &mut InfoSection) {
    for (name, stats) in s.metrics().command_stats() {
        let calls = stats.calls();
        if calls == 0 && stats.rejected() == 0 {
            continue;
        }
        let per_call = if calls == 0 { 0.0 } else { stats.usec() as f64 / calls as f64 };
        out.field(
            &format!("cmdstat_{name}"),
            format_args!(
                "calls={calls},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}",
                stats.usec(),
                stats.rejected(),
                stats.failed()
            ),
        );
    }
}

/// Redis 7's `latency-tracking-info-percentiles` default, with the labels it prints.
const PERCENTILES: [(&str, f64); 3] = [("50", 50.0), ("99", 99.0), ("99.9", 99.9)];

/// One line per command called, as Redis' `fillPercentileDistributionLatencies`:
/// `latency_percentiles_usec_ping:p50=1.003,p99=2.007,p99.9=2.007` (microseconds, 3 decimals).
fn latencystats<S>(_app: &S, s: &ServerState, out: &mut InfoSection) {
    for (name, stats) in s.metrics().command_stats() {
        let latency = stats.latency();
        let mut line = String::new();
        for (label, p) in PERCENTILES {
            let Some(ns) = latency.value_at_percentile(p) else { break };
            if !line.is_empty() {
                line.push(',');
            }
            let _ = write!(line, "p{label}={:.3}", ns as f64 / 1000.0);
        }
        if !line.is_empty() {
            out.field(&format!("latency_percentiles_usec_{name}"), line);
        }
    }
}
