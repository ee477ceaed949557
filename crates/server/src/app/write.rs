//! The write paths: every insert goes through [`App::insert`] (recorded before the reply) or
//! [`App::insert_on_reply`] (held in flight and recorded once the reply is delivered), off the
//! runtime's workers when a commit waits for an fsync.

use super::*;

/// Runs `f`, which may block on I/O, without stalling the runtime: on a multi-threaded tokio
/// runtime the worker hands its other tasks to another thread meanwhile; elsewhere inline.
pub(super) fn blocking_call<R>(f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    let multi_thread =
        Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread);
    if multi_thread { tokio::task::block_in_place(f) } else { f() }
}

/// A reservation recorded once its reply is delivered (`--fsync everysec` or `no`).
#[derive(Debug)]
pub(super) struct RecordOnReply {
    reservation: Reservation,
}

impl OnReply for RecordOnReply {
    fn delivered(self: Box<Self>) -> u64 {
        let RecordOnReply { reservation } = *self;
        // Named only on a failure: the commit takes the reservation, and a copy of the name
        // for every delivered reply would be a malloc a command.
        let namespace = Arc::clone(reservation.namespace());
        let new = reservation.new_answers() as u64;
        let fps = tracing::enabled!(tracing::Level::DEBUG)
            .then(|| reservation.new_fingerprints().to_vec());
        // Off the async workers' hands: a commit may wait for the split of a leaf it fills.
        let Err(e) = blocking_call(|| reservation.commit()) else { return 0 };
        // The client was told "new" and acts on it; a restart (or a recovered namespace) may
        // answer these URLs "new" again (at-least-once), or "seen" if the failed write left
        // their bits set. Counted, and named here, never a bare line.
        let namespace = namespace.name();
        tracing::error!(
            namespace,
            unrecorded = new,
            error = %e,
            "URLs answered \"new\" in a delivered reply could not be recorded \
             (INFO stats unrecorded_answers)"
        );
        for fp in fps.unwrap_or_default() {
            tracing::debug!(namespace, fingerprint = %format_args!("{fp:016x}"), "answered new, not recorded");
        }
        new
    }
}

impl App {
    /// Runs an engine write that may wait for an fsync (a persistent `Db` under
    /// `fsync = always`) without stalling the runtime: on a multi-threaded runtime the worker
    /// hands its other tasks to another thread meanwhile, so other connections' writes keep
    /// coming and share the next group commit. Anything else runs inline.
    pub(super) fn write<R>(&self, f: impl FnOnce() -> R) -> R {
        if self.db.commit_syncs() { blocking_call(f) } else { f() }
    }

    /// Check-and-insert of fingerprints: `out[i]` is whether `fps[i]` was (maybe) seen.
    ///
    /// All or nothing, so that an error reply never hides a write (docs/protocol.md, "What a
    /// reply says was done"): the memory check comes before anything is written, and a
    /// non-scaling namespace that cannot take every new item of the batch refuses the whole
    /// batch (`ERR non scaling filter is full`) without recording any of it. An item it already
    /// holds needs no room, so a batch of known items still answers.
    ///
    /// This is the write path of every command: in a persistent `Db` the engine call returns
    /// once the records are as durable as the fsync policy says (under `always`, after the
    /// group commit's fsync).
    ///
    /// # Errors
    /// `-OOM` over `maxmemory` and a full non-scaling filter, with nothing recorded; a failed
    /// write or fsync (`MISCONF …`): then no answer of the batch is an acknowledgement, the
    /// namespace refuses every later write, and reopening it recovers it without the batch.
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn insert(
        &self,
        ns: &Namespace,
        fps: &[u64],
        out: &mut [bool],
    ) -> Result<(), CommandError> {
        self.insert_hosts(ns, fps, &[], out)
    }

    /// [`App::insert`] of URLs with the hash of each one's host (see
    /// `Namespace::fingerprint_host`), which their records keep for a forget by host.
    ///
    /// # Errors
    /// As [`App::insert`].
    ///
    /// # Panics
    /// If `out.len() != fps.len()`, or `hosts` is neither empty nor as long.
    pub fn insert_hosts(
        &self,
        ns: &Namespace,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
    ) -> Result<(), CommandError> {
        assert_eq!(fps.len(), out.len(), "App::insert: one answer per fingerprint");
        self.check_memory()?;
        if !hosts.is_empty() {
            if ns.options().split.mode == SplitMode::Never {
                // Room counted under the lock, as below.
                let _one_at_a_time = self.nonscaling.lock();
                return self.insert_nonscaling(ns, fps, hosts, out);
            }
            return self
                .write(|| ns.seen_fingerprints_hosts(fps, hosts, out))
                .map_err(|e| write_error(&e));
        }
        if ns.options().split.mode != SplitMode::Never {
            if let ([fp], [answer]) = (fps, &mut *out) {
                // One item (the common pipelined `URL.SEEN ns url`): the engine's single
                // insert allocates nothing.
                *answer = self.write(|| ns.seen_fingerprint(*fp)).map_err(|e| write_error(&e))?;
            } else {
                self.write(|| ns.seen_fingerprints(fps, out)).map_err(|e| write_error(&e))?;
            }
            return Ok(());
        }
        // Every insert into a non-scaling namespace holds this lock, so the room counted here
        // is still there when the batch is written.
        let _one_at_a_time = self.nonscaling.lock();
        self.insert_nonscaling(ns, fps, hosts, out)
    }

    /// A non-scaling namespace's insert, under `self.nonscaling`.
    pub(super) fn insert_nonscaling(
        &self,
        ns: &Namespace,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
    ) -> Result<(), CommandError> {
        ns.contains_fingerprints(fps, out)?;
        let mut new: Vec<u64> =
            fps.iter().zip(out.iter()).filter(|&(_, &seen)| !seen).map(|(&fp, _)| fp).collect();
        new.sort_unstable();
        new.dedup();
        let room = ns.options().capacity.saturating_sub(ns.len());
        if u64::try_from(new.len()).unwrap_or(u64::MAX) > room {
            return Err(CommandError::custom(BF_FULL));
        }
        self.write(|| ns.seen_fingerprints_hosts(fps, hosts, out)).map_err(|e| write_error(&e))
    }

    /// A check-and-insert whose "new" answers count only once the reply is delivered
    /// ([`OnReply`]): [`App::insert`]'s answers, with each fingerprint answered "new" held in
    /// flight by the engine (every other check answers it "seen"; see
    /// `urlseen_engine::reserve`) and recorded by the work pushed to `on_reply` once the
    /// connection delivered the reply. Dropped undelivered, that work records nothing.
    ///
    /// A non-scaling namespace records at once, as [`App::insert`] (its room is counted in
    /// recorded items), and so does a data directory under `--fsync always`: its reply must
    /// not say "new" before the batch is on disk, and a failed write answers `MISCONF`.
    ///
    /// # Errors
    /// As [`App::insert`], with nothing held or recorded.
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn insert_on_reply(
        &self,
        ns: &Arc<Namespace>,
        fps: &[u64],
        out: &mut [bool],
        on_reply: &mut Vec<Box<dyn OnReply>>,
    ) -> Result<(), CommandError> {
        self.insert_hosts_on_reply(ns, fps, &[], out, on_reply)
    }

    /// [`App::insert_on_reply`] with each URL's host hash, as [`App::insert_hosts`].
    ///
    /// # Errors
    /// As [`App::insert_on_reply`].
    ///
    /// # Panics
    /// If `out.len() != fps.len()`, or `hosts` is neither empty nor as long.
    pub fn insert_hosts_on_reply(
        &self,
        ns: &Arc<Namespace>,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        on_reply: &mut Vec<Box<dyn OnReply>>,
    ) -> Result<(), CommandError> {
        if ns.options().split.mode == SplitMode::Never {
            return self.insert_hosts(ns, fps, hosts, out);
        }
        if self.db.commit_syncs() {
            // `--fsync always`: a "new" is sent only once its batch is synced, so a failed
            // write answers `MISCONF` instead (docs/durability.md, "replied means recorded").
            return self.insert_hosts(ns, fps, hosts, out);
        }
        self.check_memory()?;
        let reservation =
            ns.reserve_fingerprints_hosts(fps, hosts, out).map_err(|e| write_error(&e))?;
        on_reply.push(Box::new(RecordOnReply { reservation }));
        Ok(())
    }
}
