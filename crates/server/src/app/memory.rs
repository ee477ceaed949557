//! What the namespaces hold: the `maxmemory` checks of a create and of a write (Redis's
//! `noeviction`), the RAM and disk figures `INFO` reports, and the per-namespace gauges of
//! `/metrics`.

use super::*;

impl App {
    pub(super) fn check_size(&self, options: &NamespaceOptions) -> Result<(), CommandError> {
        options.validate()?;
        let bytes = options.planned_filter_bytes();
        if bytes > self.config.max_namespace_bytes {
            return Err(CommandError::custom(INSUFFICIENT_MEMORY));
        }
        let budget = self.config.maxmemory;
        if budget > 0 && self.db.usage().committed_bytes.saturating_add(bytes) > budget {
            return Err(CommandError::custom(INSUFFICIENT_MEMORY));
        }
        if !can_allocate(bytes) {
            return Err(CommandError::custom(INSUFFICIENT_MEMORY));
        }
        Ok(())
    }

    /// Every loaded namespace of the `Db`: those that hold RAM (the others are on disk only,
    /// and loading them to count them would hold every one's files).
    fn namespaces(&self) -> impl Iterator<Item = Arc<Namespace>> + '_ {
        self.db.loaded_namespaces().into_iter()
    }

    /// The configured `maxmemory` (0: no limit).
    pub fn maxmemory(&self) -> u64 {
        self.config.maxmemory
    }

    /// Where `maxmemory` came from (see [`AppConfig::maxmemory_source`]).
    pub fn maxmemory_source(&self) -> &'static str {
        self.config.maxmemory_source
    }

    /// `-OOM …` when the namespaces hold more RAM than `maxmemory` (as Redis under
    /// `noeviction`: writes are refused, reads go on). The figure is the `Db`'s running
    /// total ([`Db::usage`](urlseen_engine::Db::usage)): O(1), however many namespaces there
    /// are and however many leaves they have.
    pub(super) fn check_memory(&self) -> Result<(), CommandError> {
        let budget = self.config.maxmemory;
        if budget > 0 && self.db.usage().memory_bytes > budget {
            return Err(CommandError::custom(OOM));
        }
        Ok(())
    }

    /// RAM and disk held over every namespace, in bytes (the `Db`'s running totals). (What
    /// the filters' arena keeps idle for reuse belongs to no namespace and is not in it:
    /// `INFO` reports it apart, and the next filter made takes it.)
    pub fn usage(&self) -> (u64, u64) {
        let usage = self.db.usage();
        (usage.memory_bytes, usage.disk_bytes)
    }

    /// Appends the per-namespace gauges to `out`, in the Prometheus text format.
    pub fn write_prometheus(&self, out: &mut String) {
        let stats: Vec<_> = self.namespaces().map(|ns| (KeyKind::of(&ns), ns.stats())).collect();
        let _ = writeln!(out, "# HELP urlseen_namespaces Namespaces (keys) in the database.");
        let _ = writeln!(out, "# TYPE urlseen_namespaces gauge");
        let _ = writeln!(out, "urlseen_namespaces {}", self.db.namespace_count());
        type Getter = fn(&urlseen_engine::NamespaceStats) -> f64;
        let series: [(&str, &str, &str, Getter); 10] = [
            ("urls", "gauge", "Distinct URLs (items) recorded.", |s| s.count as f64),
            ("memory_bytes", "gauge", "RAM held: filters, buffers and indexes.", |s| {
                s.memory_bytes as f64
            }),
            (
                "disk_bytes",
                "gauge",
                "Disk held: leaf fingerprint files, and with --data the log and snapshot.",
                |s| s.disk_bytes as f64,
            ),
            ("fpr_bound", "gauge", "The configured false-positive bound.", |s| s.fpr_bound),
            (
                "estimated_fpr",
                "gauge",
                "Estimated false-positive rate of a random query (mean over leaves).",
                |s| s.mean_leaf_fpr,
            ),
            (
                "worst_leaf_fpr",
                "gauge",
                "Estimated false-positive rate of the fullest leaf.",
                |s| s.worst_leaf_fpr,
            ),
            ("leaves", "gauge", "Leaf filters.", |s| s.leaf_count as f64),
            ("height", "gauge", "Depth of the deepest leaf.", |s| f64::from(s.height)),
            ("splits_started_total", "counter", "Leaf splits begun.", |s| s.splits_started as f64),
            ("splits_total", "counter", "Leaf splits completed.", |s| s.splits_done as f64),
        ];
        for (name, kind, help, get) in series {
            let _ = writeln!(out, "# HELP urlseen_namespace_{name} {help}");
            let _ = writeln!(out, "# TYPE urlseen_namespace_{name} {kind}");
            for (key_kind, s) in &stats {
                let _ = writeln!(
                    out,
                    "urlseen_namespace_{name}{{namespace=\"{}\",type=\"{}\"}} {}",
                    crate::metrics::escape(&s.name),
                    key_kind.type_name(),
                    get(s)
                );
            }
        }
        type PGetter = fn(&urlseen_engine::PersistenceStats) -> f64;
        let durable: [(&str, &str, &str, PGetter); 4] = [
            ("log_bytes", "gauge", "Bytes in the fingerprint log.", |p| p.log_bytes as f64),
            ("fsyncs_total", "counter", "Log fsyncs since open.", |p| p.syncs as f64),
            ("fsync_seconds_total", "counter", "Time spent in log fsyncs since open.", |p| {
                p.sync_micros as f64 / 1e6
            }),
            (
                "recovery_truncated_bytes",
                "gauge",
                "Bytes of a torn or damaged log tail cut when the namespace was opened.",
                |p| p.recovery_truncated_bytes as f64,
            ),
        ];
        if stats.iter().any(|(_, s)| s.persistence.is_some()) {
            for (name, kind, help, get) in durable {
                let _ = writeln!(out, "# HELP urlseen_namespace_{name} {help}");
                let _ = writeln!(out, "# TYPE urlseen_namespace_{name} {kind}");
                for (_, s) in &stats {
                    if let Some(p) = &s.persistence {
                        let _ = writeln!(
                            out,
                            "urlseen_namespace_{name}{{namespace=\"{}\",fsync=\"{}\"}} {}",
                            crate::metrics::escape(&s.name),
                            p.fsync,
                            get(p)
                        );
                    }
                }
            }
        }
    }
}

/// The smallest reservation [`can_allocate`] asks the allocator for (glibc serves larger
/// blocks from mappings of their own, from 128 KiB up by default).
const PROBE_FROM: usize = 1 << 20;

/// Whether the allocator can give `bytes` now: asked once and given back at once (address space
/// only, no page is touched). The budget counts reservations, but the process may have less to
/// give than `maxmemory` says (an explicit `--maxmemory` above an address-space limit, other
/// namespaces grown past their reservations): a reservation it could not fill is refused here
/// rather than aborting the server when a leaf is first used. (A cgroup limit is not seen
/// here, the kernel overcommits; the default `maxmemory` accounts for it.)
///
/// Below [`PROBE_FROM`] nothing is asked: a block that small comes from the heap, not from a
/// mapping of its own, so the probe would prove nothing a server that runs does not, and it
/// would cost every small namespace's creation a malloc and a free among the namespaces'
/// blocks.
fn can_allocate(bytes: u64) -> bool {
    let Ok(bytes) = usize::try_from(bytes) else { return false };
    if bytes < PROBE_FROM {
        return true;
    }
    let mut probe: Vec<u8> = Vec::new();
    probe.try_reserve_exact(bytes).is_ok()
}

/// The resident set size of this process in bytes, from `/proc/self/status` (Linux), or
/// `None` elsewhere.
pub fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
