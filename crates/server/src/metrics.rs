//! Lock-free counters for the RESP server: connections, commands, errors, bytes, and a latency
//! histogram per command.
//!
//! Every counter is an atomic updated with relaxed ordering on the hot path; readers take a
//! consistent-enough snapshot. [`Metrics::write_prometheus`] renders them in the Prometheus text
//! format for `GET /metrics`.
//!
//! Latency buckets are powers of two in microseconds: bucket `i` counts calls that took at most
//! `2^i` µs (1 µs … 16.8 s), the last one everything slower. For `INFO latencystats`, each
//! command also has a finer histogram in nanoseconds, like Redis' HDR histogram: exact below
//! 128 ns, then 64 buckets per power of two (within 1.6 %), up to 2^45 ns (about 9.8 hours).

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use parking_lot::RwLock;

/// Sub-buckets per power of two of the fine histogram (`2^SUB_BITS`).
const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;
/// Largest power of two the fine histogram tells apart; slower calls land in its last bucket.
const MAX_EXP: u32 = 45;
const FINE_BUCKETS: usize = (2 * SUB + (MAX_EXP - SUB_BITS) as u64 * SUB) as usize;

/// The fine bucket of `ns`: values below `2 * SUB` exactly, then `SUB` buckets per octave.
fn fine_bucket(ns: u64) -> usize {
    let ns = ns.min((1 << (MAX_EXP + 1)) - 1);
    if ns < 2 * SUB {
        return ns as usize;
    }
    let exp = u64::BITS - 1 - ns.leading_zeros(); // >= SUB_BITS + 1
    let shift = exp - SUB_BITS;
    let sub = (ns >> shift) - SUB; // 0..SUB
    (2 * SUB + u64::from(exp - SUB_BITS - 1) * SUB + sub) as usize
}

/// The largest value in fine bucket `i` (HDR's "highest equivalent value").
fn fine_bucket_max(i: usize) -> u64 {
    let i = i as u64;
    if i < 2 * SUB {
        return i;
    }
    let octave = (i - 2 * SUB) / SUB; // exp - SUB_BITS - 1
    let sub = (i - 2 * SUB) % SUB;
    let shift = octave + 1;
    ((SUB + sub + 1) << shift) - 1
}

/// Call durations in nanoseconds, in log-linear buckets allocated on the first call.
#[derive(Debug, Default)]
pub struct LatencyHistogram {
    buckets: std::sync::OnceLock<Box<[AtomicU64]>>,
}

impl LatencyHistogram {
    fn record(&self, ns: u64) {
        let buckets =
            self.buckets.get_or_init(|| (0..FINE_BUCKETS).map(|_| AtomicU64::new(0)).collect());
        if let Some(b) = buckets.get(fine_bucket(ns)) {
            b.fetch_add(1, Relaxed);
        }
    }

    /// The duration in nanoseconds at or below which `percentile` % of the calls took, as
    /// HDR's `hdr_value_at_percentile` computes it (the largest value of the bucket that holds
    /// that call); `None` before the first call.
    pub fn value_at_percentile(&self, percentile: f64) -> Option<u64> {
        let buckets = self.buckets.get()?;
        let counts: Vec<u64> = buckets.iter().map(|b| b.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let wanted = ((percentile.clamp(0.0, 100.0) / 100.0 * total as f64 + 0.5) as u64).max(1);
        let mut seen = 0;
        for (i, count) in counts.iter().enumerate() {
            seen += count;
            if seen >= wanted {
                return Some(fine_bucket_max(i));
            }
        }
        None
    }
}

/// Number of finite latency buckets: upper bounds `2^0` … `2^24` µs.
pub const FINITE_BUCKETS: usize = 25;
/// Number of latency buckets, the overflow (`+Inf`) bucket included.
pub const LATENCY_BUCKETS: usize = FINITE_BUCKETS + 1;

/// The upper bound of latency bucket `i` in microseconds; `None` for the overflow bucket.
pub fn bucket_upper_bound_us(i: usize) -> Option<u64> {
    (i < FINITE_BUCKETS).then(|| 1u64 << i)
}

fn bucket_of(us: u64) -> usize {
    if us <= 1 {
        0
    } else {
        // ceil(log2(us)): the first power of two at or above `us`.
        ((u64::BITS - (us - 1).leading_zeros()) as usize).min(FINITE_BUCKETS)
    }
}

/// Counters of one command (or subcommand, such as `client|setname`).
#[derive(Debug, Default)]
pub struct CommandStats {
    calls: AtomicU64,
    failed: AtomicU64,
    rejected: AtomicU64,
    usec: AtomicU64,
    buckets: [AtomicU64; LATENCY_BUCKETS],
    latency: LatencyHistogram,
}

impl CommandStats {
    /// Calls executed (Redis' `calls`).
    pub fn calls(&self) -> u64 {
        self.calls.load(Relaxed)
    }

    /// Executed calls that replied with an error (Redis' `failed_calls`).
    pub fn failed(&self) -> u64 {
        self.failed.load(Relaxed)
    }

    /// Calls refused before execution: wrong arity, not authenticated (Redis'
    /// `rejected_calls`).
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Relaxed)
    }

    /// Total execution time in microseconds (Redis' `usec`).
    pub fn usec(&self) -> u64 {
        self.usec.load(Relaxed)
    }

    /// Per-bucket (not cumulative) call counts; see [`bucket_upper_bound_us`].
    pub fn buckets(&self) -> [u64; LATENCY_BUCKETS] {
        std::array::from_fn(|i| self.buckets.get(i).map_or(0, |b| b.load(Relaxed)))
    }

    /// The fine histogram behind `INFO latencystats`.
    pub fn latency(&self) -> &LatencyHistogram {
        &self.latency
    }

    pub(crate) fn record(&self, elapsed: Duration, failed: bool) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.latency.record(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX));
        self.calls.fetch_add(1, Relaxed);
        self.usec.fetch_add(us, Relaxed);
        if failed {
            self.failed.fetch_add(1, Relaxed);
        }
        if let Some(b) = self.buckets.get(bucket_of(us)) {
            b.fetch_add(1, Relaxed);
        }
    }

    pub(crate) fn record_rejected(&self) {
        self.rejected.fetch_add(1, Relaxed);
    }
}

/// Server-wide counters, shared by the RESP server and whoever exposes them (HTTP `/metrics`).
#[derive(Debug, Default)]
pub struct Metrics {
    pub(crate) connections_current: AtomicU64,
    pub(crate) connections_total: AtomicU64,
    pub(crate) connections_rejected: AtomicU64,
    pub(crate) commands_total: AtomicU64,
    pub(crate) error_replies: AtomicU64,
    pub(crate) unknown_commands: AtomicU64,
    pub(crate) protocol_errors: AtomicU64,
    pub(crate) query_buffer_disconnections: AtomicU64,
    pub(crate) idle_disconnections: AtomicU64,
    pub(crate) undelivered_replies: AtomicU64,
    pub(crate) unrecorded_answers: AtomicU64,
    pub(crate) net_input_bytes: AtomicU64,
    pub(crate) net_output_bytes: AtomicU64,
    commands: RwLock<Vec<(&'static str, Arc<CommandStats>)>>,
}

impl Metrics {
    /// Empty counters.
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// Clients connected now.
    pub fn connections_current(&self) -> u64 {
        self.connections_current.load(Relaxed)
    }

    /// Clients accepted since start (Redis' `total_connections_received`).
    pub fn connections_total(&self) -> u64 {
        self.connections_total.load(Relaxed)
    }

    /// Clients refused because `maxclients` were connected (Redis' `rejected_connections`).
    pub fn connections_rejected(&self) -> u64 {
        self.connections_rejected.load(Relaxed)
    }

    /// Commands executed (Redis' `total_commands_processed`).
    pub fn commands_total(&self) -> u64 {
        self.commands_total.load(Relaxed)
    }

    /// Error replies of any kind, framing errors included (Redis' `total_error_replies`).
    pub fn error_replies(&self) -> u64 {
        self.error_replies.load(Relaxed)
    }

    /// Requests naming a command that does not exist.
    pub fn unknown_commands(&self) -> u64 {
        self.unknown_commands.load(Relaxed)
    }

    /// Connections closed for a framing error.
    pub fn protocol_errors(&self) -> u64 {
        self.protocol_errors.load(Relaxed)
    }

    /// Connections closed for going over the query-buffer limit (Redis'
    /// `client_query_buffer_limit_disconnections`).
    pub fn query_buffer_disconnections(&self) -> u64 {
        self.query_buffer_disconnections.load(Relaxed)
    }

    /// Connections closed by the idle timeout.
    pub fn idle_disconnections(&self) -> u64 {
        self.idle_disconnections.load(Relaxed)
    }

    /// Replies whose client was gone once they were written: what they answered "new" was
    /// not recorded.
    pub fn undelivered_replies(&self) -> u64 {
        self.undelivered_replies.load(Relaxed)
    }

    /// "New" answers delivered whose batch could then not be recorded (a failed write or
    /// fsync under `--fsync everysec` or `no`): the client was told "new", and the URL may be
    /// answered "new" again.
    pub fn unrecorded_answers(&self) -> u64 {
        self.unrecorded_answers.load(Relaxed)
    }

    /// Bytes read from clients (Redis' `total_net_input_bytes`).
    pub fn net_input_bytes(&self) -> u64 {
        self.net_input_bytes.load(Relaxed)
    }

    /// Bytes written to clients (Redis' `total_net_output_bytes`).
    pub fn net_output_bytes(&self) -> u64 {
        self.net_output_bytes.load(Relaxed)
    }

    /// The counters of every registered command, in registration order.
    pub fn command_stats(&self) -> Vec<(&'static str, Arc<CommandStats>)> {
        self.commands.read().clone()
    }

    /// The counters of one command by its full name (`ping`, `client|setname`).
    pub fn command(&self, name: &str) -> Option<Arc<CommandStats>> {
        self.commands.read().iter().find(|(n, _)| *n == name).map(|(_, s)| s.clone())
    }

    /// The counters for `name`, created on first use; a command registered again keeps its
    /// counters.
    pub(crate) fn stats_for(&self, name: &'static str) -> Arc<CommandStats> {
        if let Some(s) = self.command(name) {
            return s;
        }
        let mut commands = self.commands.write();
        if let Some((_, s)) = commands.iter().find(|(n, _)| *n == name) {
            return s.clone();
        }
        let s = Arc::new(CommandStats::default());
        commands.push((name, s.clone()));
        s
    }

    /// Appends these counters to `out` in the Prometheus text exposition format, every name
    /// prefixed with `urlseen_resp_`.
    pub fn write_prometheus(&self, out: &mut String) {
        let gauges = [("connections", "RESP clients connected now.", self.connections_current())];
        let counters = [
            ("connections_total", "RESP clients accepted.", self.connections_total()),
            (
                "connections_rejected_total",
                "RESP clients refused because maxclients were connected.",
                self.connections_rejected(),
            ),
            ("commands_total", "Commands executed.", self.commands_total()),
            ("error_replies_total", "Error replies sent.", self.error_replies()),
            ("unknown_commands_total", "Requests for unknown commands.", self.unknown_commands()),
            (
                "protocol_errors_total",
                "Connections closed for a framing error.",
                self.protocol_errors(),
            ),
            (
                "query_buffer_disconnections_total",
                "Connections closed for exceeding the query buffer limit.",
                self.query_buffer_disconnections(),
            ),
            (
                "idle_disconnections_total",
                "Connections closed by the idle timeout.",
                self.idle_disconnections(),
            ),
            (
                "undelivered_replies_total",
                "Replies written to a client already gone: what they answered new was not recorded.",
                self.undelivered_replies(),
            ),
            (
                "unrecorded_answers_total",
                "New answers delivered whose batch could then not be recorded (a failed write).",
                self.unrecorded_answers(),
            ),
            ("net_input_bytes_total", "Bytes read from clients.", self.net_input_bytes()),
            ("net_output_bytes_total", "Bytes written to clients.", self.net_output_bytes()),
        ];
        for (name, help, value) in gauges {
            let _ = writeln!(out, "# HELP urlseen_resp_{name} {help}");
            let _ = writeln!(out, "# TYPE urlseen_resp_{name} gauge");
            let _ = writeln!(out, "urlseen_resp_{name} {value}");
        }
        for (name, help, value) in counters {
            let _ = writeln!(out, "# HELP urlseen_resp_{name} {help}");
            let _ = writeln!(out, "# TYPE urlseen_resp_{name} counter");
            let _ = writeln!(out, "urlseen_resp_{name} {value}");
        }
        let commands = self.command_stats();
        type Getter = fn(&CommandStats) -> u64;
        let per_command: [(&str, &str, Getter); 3] = [
            ("command_calls_total", "Calls executed, per command.", CommandStats::calls),
            (
                "command_failed_total",
                "Executed calls that replied with an error.",
                CommandStats::failed,
            ),
            (
                "command_rejected_total",
                "Calls refused before execution (arity, authentication).",
                CommandStats::rejected,
            ),
        ];
        for (name, help, get) in per_command {
            let _ = writeln!(out, "# HELP urlseen_resp_{name} {help}");
            let _ = writeln!(out, "# TYPE urlseen_resp_{name} counter");
            for (cmd, stats) in &commands {
                let _ = writeln!(
                    out,
                    "urlseen_resp_{name}{{command=\"{}\"}} {}",
                    escape(cmd),
                    get(stats)
                );
            }
        }
        let name = "urlseen_resp_command_duration_seconds";
        let _ = writeln!(out, "# HELP {name} Command execution time.");
        let _ = writeln!(out, "# TYPE {name} histogram");
        for (cmd, stats) in &commands {
            let cmd = escape(cmd);
            let buckets = stats.buckets();
            let mut cumulative = 0u64;
            for (i, count) in buckets.iter().enumerate() {
                cumulative += count;
                match bucket_upper_bound_us(i) {
                    Some(us) => {
                        let le = us as f64 / 1e6;
                        let _ = writeln!(
                            out,
                            "{name}_bucket{{command=\"{cmd}\",le=\"{le}\"}} {cumulative}"
                        );
                    }
                    None => {
                        let _ = writeln!(
                            out,
                            "{name}_bucket{{command=\"{cmd}\",le=\"+Inf\"}} {cumulative}"
                        );
                    }
                }
            }
            let _ = writeln!(out, "{name}_sum{{command=\"{cmd}\"}} {}", stats.usec() as f64 / 1e6);
            let _ = writeln!(out, "{name}_count{{command=\"{cmd}\"}} {cumulative}");
        }
    }
}

pub(crate) fn escape(label: &str) -> String {
    label.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two_microseconds() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 0);
        assert_eq!(bucket_of(2), 1);
        assert_eq!(bucket_of(3), 2);
        assert_eq!(bucket_of(4), 2);
        assert_eq!(bucket_of(5), 3);
        assert_eq!(bucket_of(1 << 24), 24);
        assert_eq!(bucket_of((1 << 24) + 1), 25);
        assert_eq!(bucket_of(u64::MAX), 25);
        assert_eq!(bucket_upper_bound_us(0), Some(1));
        assert_eq!(bucket_upper_bound_us(25), None);
    }

    #[test]
    fn fine_buckets_hold_their_values() {
        for ns in (0..5000).chain([1 << 20, (1 << 20) + 1, 123_456_789, 1 << 45]) {
            let i = fine_bucket(ns);
            assert!(fine_bucket_max(i) >= ns, "{ns} in {i}");
            assert!(i == 0 || fine_bucket_max(i - 1) < ns, "{ns} in {i}");
            // Within 1/64 of the value above the exact range.
            assert!(fine_bucket_max(i) - ns <= ns / 64, "{ns}: {}", fine_bucket_max(i));
        }
        assert_eq!(fine_bucket(u64::MAX), FINE_BUCKETS - 1);
    }

    #[test]
    fn percentiles_as_hdr_reports_them() {
        let h = LatencyHistogram::default();
        assert_eq!(h.value_at_percentile(50.0), None);
        for us in 1..=1000u64 {
            h.record(us * 1000);
        }
        for (p, want_us) in [(50.0, 500.0), (99.0, 990.0), (99.9, 999.0)] {
            let got = h.value_at_percentile(p).unwrap() as f64 / 1000.0;
            assert!(got >= want_us && got <= want_us * (1.0 + 1.0 / 64.0), "p{p}: {got}");
        }
    }

    #[test]
    fn stats_record_and_render() {
        let m = Metrics::new();
        let s = m.stats_for("ping");
        s.record(Duration::from_micros(3), false);
        s.record(Duration::from_micros(100), true);
        s.record_rejected();
        assert!(Arc::ptr_eq(&s, &m.stats_for("ping")));
        assert_eq!((s.calls(), s.failed(), s.rejected(), s.usec()), (2, 1, 1, 103));
        assert_eq!(s.buckets()[2], 1);
        assert_eq!(s.buckets()[7], 1);
        let mut out = String::new();
        m.write_prometheus(&mut out);
        assert!(out.contains("urlseen_resp_command_calls_total{command=\"ping\"} 2\n"), "{out}");
        assert!(
            out.contains(
                "urlseen_resp_command_duration_seconds_bucket{command=\"ping\",le=\"0.000004\"} 1\n"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "urlseen_resp_command_duration_seconds_bucket{command=\"ping\",le=\"+Inf\"} 2\n"
            ),
            "{out}"
        );
        assert!(
            out.contains("urlseen_resp_command_duration_seconds_count{command=\"ping\"} 2\n"),
            "{out}"
        );
    }
}
