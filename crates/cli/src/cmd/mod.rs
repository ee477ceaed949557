//! One module per subcommand.

pub mod bench;
pub mod canon;
pub mod dump;
pub mod filter;
pub mod gen_urls;
pub mod memory_limit;
pub mod plan;
pub mod serve;
pub mod store;

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use urlseen_engine::{Db, DbOptions, Fsync};

/// Opens the data directory `dir`, and says on stderr what recovery had to cut or rebuild in
/// any namespace (it is in `urlseen stats`, INFO persistence and /metrics too). `existing`:
/// refuse a directory that is not a urlseen data directory yet, rather than create one (for
/// commands that only read).
pub fn open_data_dir(dir: &Path, fsync: Fsync, existing: bool) -> anyhow::Result<Db> {
    if existing {
        anyhow::ensure!(
            dir.join("ns").is_dir(),
            "{} is not a urlseen data directory (no ns/ inside); nothing was created",
            dir.display()
        );
    }
    let db = Db::open_with(dir, DbOptions { fsync, ..DbOptions::default() })
        .with_context(|| format!("opening data directory {}", dir.display()))?;
    // Those loaded at open; the others are recovered (and cut) when first used, and the
    // command that uses one says so then (`warn_recovery`).
    for ns in db.loaded_namespaces() {
        warn_recovery(&ns);
    }
    Ok(db)
}

/// Says on stderr what recovery had to cut or rebuild when namespace `ns` was loaded (it is in
/// `urlseen stats`, INFO persistence and /metrics too).
pub fn warn_recovery(ns: &urlseen_engine::Namespace) {
    let mut err = std::io::stderr().lock();
    let Some(r) = ns.recovery() else { return };
    if r.truncated_bytes > 0 {
        let _ = writeln!(
            err,
            "urlseen: warning: namespace {:?}: recovery cut {} bytes of a torn or damaged \
                 log tail; URLs recorded in them are new again (none was acknowledged under \
                 --fsync always; under everysec, about the last second's)",
            ns.name(),
            r.truncated_bytes
        );
    }
    if let Some(reason) = &r.snapshot_error {
        let _ = writeln!(
            err,
            "urlseen: warning: namespace {:?}: snapshot not used ({reason}); rebuilt from \
                 the log, nothing lost",
            ns.name()
        );
    }
}

/// Opens the data directory `dir` for reading only (see `Db::open_read_only`): nothing in it is
/// created, written, cut or removed, and a directory that holds no urlseen data is refused.
pub fn open_data_dir_read_only(dir: &Path) -> anyhow::Result<Db> {
    anyhow::ensure!(
        dir.join("ns").is_dir(),
        "{} is not a urlseen data directory (no ns/ inside); nothing was created",
        dir.display()
    );
    Db::open_read_only(dir).with_context(|| format!("reading data directory {}", dir.display()))
}

/// Refuses, with the figures, a new namespace whose filters alone would need more than this
/// machine's RAM once its leaves are used (`--capacity 1e15` would otherwise abort on a failed
/// allocation: making its billions of leaves, or filling them): the namespace grows past its
/// capacity by splitting, so a smaller one loses nothing. The check is on the reservation, not
/// on what is allocated now (a leaf's filter is allocated at its first record).
pub fn check_fits_in_ram(options: &urlseen_engine::NamespaceOptions) -> anyhow::Result<()> {
    if options.counting {
        return Ok(());
    }
    options.validate()?;
    let needed = options.planned_filter_bytes();
    let Some(ram) = total_ram() else { return Ok(()) };
    anyhow::ensure!(
        needed <= ram,
        "--capacity {} at fpr {} reserves {:.1} GiB of filters, more than this machine's \
         {:.1} GiB of RAM; give a smaller --capacity (the filter grows past it by splitting)",
        options.capacity,
        options.fpr,
        needed as f64 / f64::from(1u32 << 30),
        ram as f64 / f64::from(1u32 << 30)
    );
    Ok(())
}

/// This machine's RAM in bytes (`/proc/meminfo`), where known.
pub fn total_ram() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
}
