//! What a `Db` asks of a namespace before it unloads it (see `crate::db::catalog`): how many
//! descriptors its files hold, whether it may go now, and writing out what it buffered.

use std::sync::Arc;

use super::{Namespace, Set, keeps_positives};
use crate::error::Result;
use crate::log::Fsync;

/// A namespace whose log and snapshot hold more than this is never unloaded: reloading it would
/// read that much (about 700,000 URLs). It stays loaded, and its descriptors count against the
/// bound until it is dropped (docs/durability.md, "Many namespaces").
const UNLOAD_MAX_BYTES: u64 = 8 << 20;

impl Namespace {
    /// Descriptors its files hold while it is loaded, at most: the log, the hosts file of a
    /// URL namespace, the URL journal; a counting namespace's store and a recrawl window's
    /// generations hold more (an estimate). None in memory or read-only (its files are read
    /// at open and closed).
    pub(crate) fn open_files(&self) -> usize {
        let Some(d) = self.backing.durable() else {
            return match self.set() {
                Set::Recrawl(gens) => gens.namespaces().iter().map(|ns| ns.open_files()).sum(),
                _ => 0,
            };
        };
        if d.log.is_read_only() {
            return 0;
        }
        let hosts = usize::from(!keeps_positives(&self.options));
        let urls = usize::from(self.urls.is_some());
        let store = match self.set() {
            Set::Counting(_) => 16,
            Set::Tree { exact: Some(_), .. } => 4,
            _ => 0,
        };
        1 + hosts + urls + store
    }

    /// Whether it may be unloaded now: `this` is the only reference (no command, connection
    /// cache, reservation or housekeeping pass holds it), it lives in a data directory and takes
    /// writes (not poisoned, not read-only), it is a plain DSBF (an exact index, a counting
    /// store or a recrawl window is costly to reopen), no split or checkpoint is under way, and
    /// it is small enough to reload cheaply ([`UNLOAD_MAX_BYTES`]).
    pub(crate) fn can_unload(this: &Arc<Self>) -> bool {
        if Arc::strong_count(this) > 1 {
            return false;
        }
        let Some(d) = this.backing.durable() else { return false };
        let Set::Tree { tree, exact: None } = this.set() else { return false };
        let snapshot = d.snapshot_bytes.load(std::sync::atomic::Ordering::Acquire);
        this.backing.check().is_ok()
            && tree.check().is_ok()
            && tree.is_idle()
            && Arc::strong_count(tree) == 1
            && d.log.end().saturating_add(snapshot) <= UNLOAD_MAX_BYTES
            && d.checkpointing.try_lock().is_some()
    }

    /// Whether its files may be closed between writes while something still holds it (see
    /// [`Self::set_detached`]): a plain DSBF in a data directory (an exact index, a counting
    /// store, a recrawl window's generations and a URL journal keep files of their own open).
    pub(crate) fn can_detach(&self) -> bool {
        let Some(d) = self.backing.durable() else { return false };
        matches!(self.set(), Set::Tree { exact: None, .. })
            && self.urls.is_none()
            && !d.log.is_read_only()
            && !d.log.is_detached()
    }

    /// Closes its files between writes (`true`), or keeps them open again (`false`): a
    /// namespace the `Db` keeps out of its bound of open files while a command, a connection
    /// or a pending reply still holds it (see `crate::db::catalog`).
    pub(crate) fn set_detached(&self, detached: bool) {
        if let Some(d) = self.backing.durable() {
            d.log.set_detached(detached);
        }
    }

    /// Whether its files are closed between writes.
    pub(crate) fn is_detached(&self) -> bool {
        self.backing.durable().is_some_and(|d| d.log.is_detached())
    }

    /// Writes out everything it buffered before its files are closed: synced under
    /// [`Fsync::Always`] (where everything acknowledged already is), written to the OS
    /// otherwise. Returns whether written bytes are left unsynced (under `everysec`, the `Db`
    /// syncs them within the second, as the housekeeping thread would have).
    ///
    /// # Errors
    /// [`crate::Error::Io`] (the namespace is then poisoned and stays loaded),
    /// [`crate::Error::Poisoned`].
    pub(crate) fn write_out(&self) -> Result<bool> {
        let Some(d) = self.backing.durable() else { return Ok(false) };
        match d.log.policy() {
            Fsync::Always => d.log.sync_all().map(|()| false),
            Fsync::EverySec => d.log.write_all(),
            Fsync::No => d.log.write_all().map(|_| false),
        }
    }
}
