//! `urlseen check`: every namespace of a data directory verified by reading alone (see
//! [`crate::namespace::check`] for what is read in each), and the small namespaces' journal.

use std::path::Path;
use std::sync::Arc;

use super::lock::DirLock;
use crate::error::{Error, Result};
use crate::log::{FingerprintLog, Fsync};
use crate::namespace::check::{NamespaceCheck, check_namespace_dir};
use crate::storage::{OsStorage, Storage};

/// Verifies every namespace of the data directory `root`, reading only: meta, the hosts file
/// (every entry's checksum), the URL journal of a namespace that keeps its URLs (every
/// block's), the whole log (every record's checksum), the snapshot (its checksum, shape and
/// filters) and every leaf file it names (every block's checksum and its length), and a
/// counting namespace's store (on a copy: every record, its count, and its tally). Nothing is
/// created, cut or deleted.
///
/// # Errors
/// [`Error::Io`] listing the directory; `root` not being a data directory is reported as
/// [`Error::Corrupt`].
pub fn check_data_dir(root: &Path) -> Result<Vec<NamespaceCheck>> {
    let ns_root = root.join("ns");
    if !ns_root.is_dir() {
        return Err(Error::corrupt(root, "not a urlseen data directory (no ns/ inside)"));
    }
    // As redis-check-aof: on a directory no one is writing (a running server would change the
    // files under the check). Shared, and without creating or writing the lock file: checking
    // changes nothing.
    let storage: Arc<dyn Storage> = Arc::new(OsStorage);
    let _lock = DirLock::shared_if_exists(storage.as_ref(), root)?;
    let mut names = storage.list(&ns_root).map_err(|e| Error::io("list", &ns_root, e))?;
    names.sort();
    let mut checks = Vec::new();
    for n in &names {
        checks.extend(check_namespace_dir(&storage, &ns_root.join(n)));
    }
    if let Some(journal) = check_journal(&storage, root) {
        checks.push(journal);
    }
    Ok(checks)
}

/// Checks the small namespaces' journal (`crate::namespace::small_journal`), if it holds anything:
/// every record's checksum and what it says, as opening reads it.
fn check_journal(storage: &Arc<dyn Storage>, root: &Path) -> Option<NamespaceCheck> {
    let path = root.join(crate::namespace::small_journal::JOURNAL_FILE);
    if !storage.file_len(&path).is_ok_and(|len| len.is_some()) {
        return None;
    }
    let mut c = NamespaceCheck {
        dir: path.clone(),
        name: Some("(small namespaces' journal)".into()),
        repairable: true,
        ..Default::default()
    };
    match FingerprintLog::verify(storage, &path) {
        // An empty journal (every data directory opened read-write has one) is not reported.
        Ok((0, _, _, 0)) => return None,
        Ok((records, _, end, torn)) => {
            c.notes.push(format!("journal: {records} records, {end} bytes"));
            if torn > 0 {
                c.problems.push(format!(
                    "journal: a torn or damaged tail of {torn} bytes after byte {end} (opening \
                     cuts it)"
                ));
            }
        }
        Err(e) => {
            c.problems.push(format!("journal: {e}"));
            c.repairable = false;
            return Some(c);
        }
    }
    match crate::namespace::small_journal::SmallJournal::open(storage, root, Fsync::No, true) {
        Ok((_, live)) => c.notes.push(format!("journal: {} small namespaces", live.len())),
        Err(e) => {
            c.problems.push(format!("journal: {e}"));
            c.repairable = false;
        }
    }
    Some(c)
}
