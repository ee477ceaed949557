//! Answers that count once delivered (a server's reply; see [`crate::reserve`]): a batch is
//! answered and its new fingerprints held in flight, then recorded by the reservation's commit.
use super::{Arc, Logged, Mode, Namespace, Reservation, Result, Set};

impl Namespace {
    /// The first step of a check-and-insert whose answers count only once they are delivered
    /// (a server's reply; see [`crate::reserve`]): answers `out` as
    /// [`Self::seen_fingerprints`] would, records nothing, and holds each fingerprint answered
    /// "new" in flight (every other check answers it "seen") until the [`Reservation`] is
    /// committed (recorded) or dropped (new again).
    ///
    /// # Errors
    /// As [`Self::seen_fingerprints`] (nothing is held then).
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn reserve_fingerprints(
        self: &Arc<Self>,
        fps: &[u64],
        out: &mut [bool],
    ) -> Result<Reservation> {
        self.reserve_fingerprints_hosts(fps, &[], out)
    }

    /// [`Self::reserve_fingerprints`] with each fingerprint's host hash, as
    /// [`Self::seen_fingerprints_hosts`].
    ///
    /// # Errors
    /// As [`Self::reserve_fingerprints`].
    ///
    /// # Panics
    /// If `out.len() != fps.len()`, or `hosts` is neither empty nor as long.
    pub fn reserve_fingerprints_hosts(
        self: &Arc<Self>,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
    ) -> Result<Reservation> {
        assert_eq!(fps.len(), out.len(), "reserve_fingerprints: output length must match input");
        assert!(hosts.is_empty() || hosts.len() == fps.len(), "one host per fingerprint");
        if let Set::Recrawl(gens) = self.set() {
            return gens.reserve(fps, hosts, out);
        }
        match self.set() {
            Set::Tree { tree, .. } => self.check_writable(Some(tree))?,
            _ => self.check_writable(None)?,
        }
        let (taken, taken_hosts) = self.in_flight.reserve(fps, hosts, out, |fps, hosts, out| {
            self.contains_in_tree(fps, out)?;
            self.keep_positives(fps, hosts, out)
        })?;
        let any_seen = out.iter().any(|&seen| seen);
        Ok(Reservation::new(Arc::clone(self), taken, taken_hosts, any_seen))
    }

    /// A reservation's Bloom positives (`fps` answered "seen" in `out`), logged as kept at
    /// once in a namespace that keeps them (see [`crate::tree`]): a split before the commit would rebuild the filters without
    /// a false one. Their durability is waited for by the commit.
    pub(super) fn keep_positives(&self, fps: &[u64], hosts: &[u32], out: &[bool]) -> Result<()> {
        // A small list's positives are true ones (it answers exactly): nothing to keep.
        let Set::Tree { tree, exact: None } = self.set() else { return Ok(()) };
        if !tree.keeps_positives() {
            return Ok(());
        }
        let positives: Vec<u64> = fps.iter().zip(out).filter(|p| *p.1).map(|p| *p.0).collect();
        if positives.is_empty() {
            return Ok(());
        }
        let positive_hosts: Vec<u32> = match hosts.is_empty() {
            true => Vec::new(),
            false => hosts.iter().zip(out).filter(|p| *p.1).map(|p| *p.0).collect(),
        };
        let mut log = |logged: &Logged<'_>| -> Result<u64> { Ok(self.backing.append(logged)?.0) };
        let mut scratch = vec![false; positives.len()];
        // A positive gone meanwhile (a split dropped a false one before this) is recorded as
        // new: answered "seen", it stays seen.
        tree.insert_batch_with(
            &positives,
            &positive_hosts,
            &mut scratch,
            Mode::CheckAndInsert,
            &mut log,
        )?;
        tree.check()
    }

    /// A reservation's commit: `taken`, answered "new" and held in flight since, are recorded
    /// as they are (nobody else could record them meanwhile). If some were answered "seen",
    /// what they rest on (their kept records, another writer's records) is made as durable as
    /// the policy says, as a check-and-insert's "seen" is.
    pub(super) fn record_reserved(
        &self,
        taken: &[u64],
        hosts: &[u32],
        any_seen: bool,
    ) -> Result<()> {
        // On the stack for a command's few URLs: one malloc less a command.
        let mut out: smallvec::SmallVec<[bool; 64]> = smallvec::smallvec![false; taken.len()];
        self.seen_fingerprints_inner(taken, hosts, &mut out, None, Mode::Record)?;
        self.account();
        if any_seen {
            self.backing.commit(self.backing.end())?;
        }
        Ok(())
    }
}
