//! Answers handed on before they count: "record only what you answer" for a server.
//!
//! A server that records a URL and then fails to deliver its "new" reply (the client died, the
//! connection broke) has recorded a URL that no crawler was told to fetch: it is never crawled.
//! So the server asks in two steps. [`Namespace::reserve_fingerprints`] answers the batch and
//! puts each fingerprint it answered "new" *in flight*; once the reply is delivered,
//! [`Reservation::commit`] records the batch as a check-and-insert would. A reservation dropped
//! uncommitted (the reply was not delivered) records nothing: its URLs are new again.
//!
//! While a fingerprint is in flight every other check answers "seen" (someone was just told to
//! fetch it), so no two callers are told "new" for one URL. Were its reply then lost, that
//! "seen" rested on nothing recorded, and the next check answers "new" again: the URL is not
//! lost, only not answered "new" to the caller that asked in that window.
//!
//! What a reservation answers "seen" on a Bloom positive is logged as kept at once, as a
//! check-and-insert does (see [`crate::tree`], "Seen stays seen"): a split between the answer
//! and the commit would otherwise rebuild the filters without a false positive.
//!
//! # Locks
//! One `RwLock` per namespace over the set in flight. A check-and-insert holds it shared from
//! its look at the set until its batch is in the tree, so it never records a fingerprint a
//! reservation holds. A reservation takes it exclusively only to claim its fingerprints, then
//! looks them up in the tree without it: a fingerprint recorded before the claim is found
//! there, and one recorded after it is not recorded by anyone else (it is in flight). A commit
//! holds nothing while it records (its fingerprints stay in flight until they are in the tree,
//! so nobody else records them), then takes it exclusively to let go.
//! Lock order: this lock, then the tree's.

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::{RwLock, RwLockReadGuard};
use smallvec::SmallVec;

use crate::error::Result;
use crate::exact::FpBuildHasher;
use crate::namespace::Namespace;

/// A namespace's fingerprints in flight: answered "new" by a [`Reservation`] not committed yet.
#[derive(Debug, Default)]
pub(super) struct InFlight {
    /// `None` while nothing is in flight: most namespaces never hold a reservation, and the
    /// field then costs 16 bytes instead of an empty table's 40.
    set: RwLock<Option<Box<Fingerprints>>>,
}

type Fingerprints = HashSet<u64, FpBuildHasher>;

/// A reservation's scratch list: a command's URLs fit inline, so that claiming them costs no
/// malloc (each was a free among the namespaces' blocks, and glibc's bins grow slower to search
/// as a server of a million namespaces fills its heap).
type Scratch<T> = SmallVec<[T; 32]>;

/// The set in flight, read: see [`InFlight::read`].
pub(super) struct Flying<'a>(RwLockReadGuard<'a, Option<Box<Fingerprints>>>);

impl Flying<'_> {
    pub(super) fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|set| set.is_empty())
    }

    pub(super) fn contains(&self, fp: &u64) -> bool {
        self.0.as_ref().is_some_and(|set| set.contains(fp))
    }
}

impl InFlight {
    /// The set, shared: held by a check-and-insert from its look at the set until its batch is
    /// in the tree.
    pub(super) fn read(&self) -> Flying<'_> {
        Flying(self.set.read())
    }

    /// Claims each fingerprint of `fps` not in flight yet (the others, and repeats inside
    /// `fps`, are answered "seen"), then runs `check` (which answers from the tree) on the
    /// claimed ones and their hosts, outside the lock: those it finds are answered "seen" and
    /// let go, the rest are answered "new" and stay in flight. Returns the fingerprints left in
    /// flight, with their hosts when `hosts` gives one per fingerprint (else none).
    ///
    /// Claiming before looking keeps the lock short (no tree lookup under it) and is still
    /// exact: a commit records its fingerprints in the tree before it lets them go, so a claim
    /// made after that finds them in the tree, and one made before finds them in flight.
    pub(super) fn reserve(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        check: impl FnOnce(&[u64], &[u32], &mut [bool]) -> Result<()>,
    ) -> Result<(Vec<u64>, Vec<u32>)> {
        // The scratch lists of a command's few URLs stay on the stack (see `Scratch`).
        let mut claimed: Scratch<u64> = SmallVec::with_capacity(fps.len());
        let mut at: Scratch<usize> = SmallVec::with_capacity(fps.len());
        {
            let mut guard = self.set.write();
            // Sized for the batch at once: a command's set would otherwise be grown (rehashed)
            // three times on the way to its ten URLs.
            let set = guard.get_or_insert_with(|| {
                Box::new(HashSet::with_capacity_and_hasher(fps.len(), FpBuildHasher::default()))
            });
            set.reserve(fps.len());
            for (i, (&fp, seen)) in fps.iter().zip(out.iter_mut()).enumerate() {
                *seen = !set.insert(fp);
                if !*seen {
                    claimed.push(fp);
                    at.push(i);
                }
            }
        }
        let claimed_hosts: Scratch<u32> =
            at.iter().filter_map(|&i| hosts.get(i).copied()).collect();
        let mut found: Scratch<bool> = smallvec::smallvec![false; claimed.len()];
        if let Err(e) = check(&claimed, &claimed_hosts, &mut found) {
            self.release(&claimed);
            return Err(e);
        }
        let mut recorded: Scratch<u64> = SmallVec::new();
        let new = found.iter().filter(|&&seen| !seen).count();
        let mut taken = Vec::with_capacity(new);
        let mut taken_hosts = Vec::with_capacity(if hosts.is_empty() { 0 } else { new });
        for ((fp, i), seen) in claimed.into_iter().zip(at).zip(found) {
            out[i] = seen;
            if seen {
                recorded.push(fp);
            } else {
                taken.push(fp);
                if let Some(&host) = hosts.get(i) {
                    taken_hosts.push(host);
                }
            }
        }
        self.release(&recorded);
        Ok((taken, taken_hosts))
    }

    /// Takes `fps` out of flight.
    fn release(&self, fps: &[u64]) {
        if fps.is_empty() {
            return;
        }
        let mut guard = self.set.write();
        let Some(set) = guard.as_mut() else { return };
        for fp in fps {
            set.remove(fp);
        }
        if set.is_empty() {
            // Nothing in flight: the table goes too, so that each of a million namespaces
            // written once does not keep one (the next reservation makes one again).
            *guard = None;
        }
    }

    /// Waits until every fingerprint in flight now has left flight (recorded by its commit,
    /// or let go with its undelivered reply), for at most `limit`; whether they all did.
    ///
    /// For a reader of the records themselves (a dump), before it carries what is still in
    /// flight: a fingerprint answered "new" to a client is in no record until its commit.
    /// Commits follow their replies within milliseconds unless a client stops reading; so a
    /// short poll, with no per-namespace condition variable to pay for in each of a million
    /// namespaces.
    pub(super) fn settle(&self, limit: std::time::Duration) -> bool {
        let pending: Vec<u64> = match self.set.read().as_ref() {
            Some(set) => set.iter().copied().collect(),
            None => return true,
        };
        let start = std::time::Instant::now();
        let mut pause = std::time::Duration::from_micros(50);
        loop {
            let settled = self
                .set
                .read()
                .as_ref()
                .is_none_or(|set| !pending.iter().any(|fp| set.contains(fp)));
            if settled {
                return true;
            }
            if start.elapsed() >= limit {
                return false;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(std::time::Duration::from_millis(5));
        }
    }

    /// The fingerprints in flight now.
    pub(super) fn snapshot(&self) -> Vec<u64> {
        self.set.read().as_ref().map_or_else(Vec::new, |set| set.iter().copied().collect())
    }

    /// Fingerprints in flight.
    pub(super) fn len(&self) -> usize {
        self.set.read().as_ref().map_or(0, |set| set.len())
    }
}

/// A batch answered by [`Namespace::reserve_fingerprints`] whose "new" answers do not count
/// yet: [`Reservation::commit`] records it once the answers are delivered; dropping it records
/// nothing and takes its fingerprints out of flight (their URLs are new again).
#[derive(Debug)]
#[must_use = "a reservation dropped uncommitted records nothing"]
pub struct Reservation {
    ns: Arc<Namespace>,
    /// Those answered "new", in flight until the commit recorded them.
    taken: Vec<u64>,
    /// Their host hashes (empty: unknown).
    taken_hosts: Vec<u32>,
    /// Whether some were answered "seen": the commit waits for what they rest on.
    any_seen: bool,
    /// Committed or dropped: its fingerprints left flight.
    done: bool,
}

impl Reservation {
    pub(super) fn new(
        ns: Arc<Namespace>,
        taken: Vec<u64>,
        taken_hosts: Vec<u32>,
        any_seen: bool,
    ) -> Self {
        Reservation { ns, taken, taken_hosts, any_seen, done: false }
    }

    /// How many fingerprints this reservation answered "new" (and holds in flight).
    pub fn new_answers(&self) -> usize {
        self.taken.len()
    }

    /// The fingerprints this reservation answered "new" (for a log line naming what a failed
    /// commit did not record).
    pub fn new_fingerprints(&self) -> &[u64] {
        &self.taken
    }

    /// The namespace the reservation is in.
    pub fn namespace(&self) -> &Arc<Namespace> {
        &self.ns
    }

    /// Records the batch: every fingerprint answered "new" is recorded, with the namespace's
    /// durability, and then leaves flight.
    ///
    /// # Errors
    /// As [`Namespace::seen_fingerprints`]: then its fingerprints leave flight unrecorded, and
    /// are new again.
    pub fn commit(mut self) -> Result<()> {
        if self.done {
            return Ok(());
        }
        let recorded = self.ns.record_reserved(&self.taken, &self.taken_hosts, self.any_seen);
        // Out of flight, recorded or not (a failed commit leaves them new again).
        self.release();
        recorded
    }

    fn release(&mut self) {
        if !std::mem::replace(&mut self.done, true) {
            self.ns.in_flight().release(&self.taken);
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check sees each claimed fingerprint with its own host, also when an earlier one of
    /// the batch was in flight already (it was once handed every host of the batch, so that
    /// a kept positive could be logged with its neighbour's host).
    #[test]
    fn a_claim_hands_the_check_each_fingerprint_with_its_host() {
        let flight = InFlight::default();
        let mut out = [false; 1];
        let (taken, _) = flight.reserve(&[1], &[], &mut out, |_, _, _| Ok(())).expect("claimed");
        assert_eq!(taken, [1]);

        let (fps, hosts) = ([1, 2, 3], [10, 20, 30]);
        let mut out = [false; 3];
        let mut seen_by_check = Vec::new();
        let (taken, taken_hosts) = flight
            .reserve(&fps, &hosts, &mut out, |fps, hosts, found| {
                seen_by_check = fps.iter().copied().zip(hosts.iter().copied()).collect();
                found[1] = true; // 3 is in the tree: answered "seen", let go
                Ok(())
            })
            .expect("claimed");
        assert_eq!(seen_by_check, [(2, 20), (3, 30)]);
        assert_eq!(out, [true, false, true]);
        assert_eq!((taken, taken_hosts), (vec![2], vec![20]));
        let flying = flight.read();
        assert!(flying.contains(&1) && flying.contains(&2) && !flying.contains(&3));
    }
}
