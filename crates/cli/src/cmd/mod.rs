//! One module per subcommand.

pub mod bench;
pub mod canon;
pub mod filter;
pub mod gen_urls;
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
    let mut err = std::io::stderr().lock();
    for ns in db.namespace_names().iter().filter_map(|n| db.namespace(n)) {
        let Some(r) = ns.recovery() else { continue };
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
    Ok(db)
}
