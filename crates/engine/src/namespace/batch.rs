//! A batch of fingerprints through the set: check-and-insert (answered "seen" for those in
//! flight, held back from the disk while a caller hands the answers on, committed as the sync
//! policy says) and read-only lookups.
use super::{
    Backing, Error, ExactHooks, HandOn, Logged, Lsn, Mode, Namespace, Ordering, Result, Set,
};

impl Namespace {
    /// Check-and-insert of a fingerprint computed with [`Self::fingerprint`].
    ///
    /// # Errors
    /// As [`Self::seen_fingerprints`].
    pub fn seen_fingerprint(&self, fp: u64) -> Result<bool> {
        if let (Set::Tree { tree, exact: None }, Backing::Volatile) = (self.set(), &self.backing) {
            let seen = self.in_flight.read().contains(&fp) || tree.insert(fp);
            self.account();
            return Ok(seen);
        }
        let mut out = [false];
        self.seen_fingerprints(&[fp], &mut out)?;
        Ok(out[0])
    }

    /// Read-only lookup of a fingerprint.
    ///
    /// # Errors
    /// In exact mode, the store's.
    pub fn contains_fingerprint(&self, fp: u64) -> Result<bool> {
        let mut out = [false];
        self.contains_fingerprints(&[fp], &mut out)?;
        Ok(out[0])
    }

    /// Check-and-insert of many fingerprints into a caller's result slice (no allocation for
    /// results). In a persistent `Db` the batch is one log record and one commit.
    ///
    /// In exact mode a Bloom negative enters its leaf's index before the leaf lock is
    /// released, and a Bloom positive is decided by the leaf's recent records, the LRU, then
    /// the leaf indexes (seed 002).
    ///
    /// # Errors
    /// In a persistent `Db`, [`Error::Io`] or [`Error::Poisoned`]; in a counting namespace,
    /// the store's errors ([`Error::Io`], [`Error::Corrupt`], …; the namespace then refuses
    /// writes until reopened). Then no answer of the batch is an acknowledgement.
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn seen_fingerprints(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        assert_eq!(fps.len(), out.len(), "seen_fingerprints: output length must match input");
        self.seen_outside_flight(fps, &[], out, None)
    }

    /// [`Self::seen_fingerprints`] of URLs whose host hashes are known
    /// ([`Self::fingerprint_host`]): each record keeps `hosts[i]`, so that
    /// [`Self::forget_host`] finds it. Records made by [`Self::seen_fingerprints`] have none.
    ///
    /// # Errors
    /// As [`Self::seen_fingerprints`].
    ///
    /// # Panics
    /// If `out.len() != fps.len()`, or `hosts` is neither empty nor as long.
    pub fn seen_fingerprints_hosts(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
    ) -> Result<()> {
        assert_eq!(fps.len(), out.len(), "seen_fingerprints: output length must match input");
        assert!(hosts.is_empty() || hosts.len() == fps.len(), "one host per fingerprint");
        self.seen_outside_flight(fps, hosts, out, None)
    }

    /// [`Self::seen_fingerprints`] for a caller that hands the answers on (prints the new
    /// URLs) before they count as recorded: `then` sees the answers while the batch's log
    /// record is still held back from the disk, and the batch is committed only once `then`
    /// returns `Ok`. A crash before that loses the batch, so after a restart its URLs are new
    /// again: at-least-once, never recorded but not handed on. If `then` fails, the batch is
    /// never written and the namespace refuses writes until reopened.
    ///
    /// A counting namespace has no log to hold: `then` runs after its store write.
    ///
    /// # Errors
    /// As [`Self::seen_fingerprints`]; [`Error::Io`] naming `then`'s failure.
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn seen_fingerprints_then(
        &self,
        fps: &[u64],
        out: &mut [bool],
        then: &mut dyn FnMut(&[bool]) -> std::io::Result<()>,
    ) -> Result<()> {
        self.seen_fingerprints_hosts_then(fps, &[], out, then)
    }

    /// [`Self::seen_fingerprints_then`] with each fingerprint's host hash, as
    /// [`Self::seen_fingerprints_hosts`].
    ///
    /// # Errors
    /// As [`Self::seen_fingerprints_then`].
    ///
    /// # Panics
    /// If `out.len() != fps.len()`, or `hosts` is neither empty nor as long.
    pub fn seen_fingerprints_hosts_then(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        then: &mut dyn FnMut(&[bool]) -> std::io::Result<()>,
    ) -> Result<()> {
        assert_eq!(fps.len(), out.len(), "seen_fingerprints: output length must match input");
        assert!(hosts.is_empty() || hosts.len() == fps.len(), "one host per fingerprint");
        self.seen_outside_flight(fps, hosts, out, Some(then))
    }

    /// A check-and-insert that answers "seen" for the fingerprints in flight and records the
    /// rest, holding the set in flight shared until they are in the tree (see
    /// [`crate::reserve`]); then the `Db`'s totals learn what it took.
    fn seen_outside_flight(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        then: Option<&mut HandOn<'_>>,
    ) -> Result<()> {
        let done = self.seen_outside_flight_unaccounted(fps, hosts, out, then);
        self.account();
        done
    }

    fn seen_outside_flight_unaccounted(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        then: Option<&mut HandOn<'_>>,
    ) -> Result<()> {
        if let Set::Recrawl(gens) = self.set() {
            return gens.seen(fps, hosts, out, then);
        }
        let in_flight = self.in_flight.read();
        if in_flight.is_empty() || !fps.iter().any(|fp| in_flight.contains(fp)) {
            return self.seen_fingerprints_inner(fps, hosts, out, then, Mode::CheckAndInsert);
        }
        let (mut rest, mut at) = (Vec::with_capacity(fps.len()), Vec::with_capacity(fps.len()));
        let mut rest_hosts = Vec::new();
        for (i, fp) in fps.iter().enumerate() {
            if in_flight.contains(fp) {
                out[i] = true;
            } else {
                rest.push(*fp);
                if let Some(&host) = hosts.get(i) {
                    rest_hosts.push(host);
                }
                at.push(i);
            }
        }
        let mut answers = vec![false; rest.len()];
        let scatter = |answers: &[bool], out: &mut [bool]| {
            for (&i, &seen) in at.iter().zip(answers) {
                out[i] = seen;
            }
        };
        match then {
            None => self.seen_fingerprints_inner(
                &rest,
                &rest_hosts,
                &mut answers,
                None,
                Mode::CheckAndInsert,
            )?,
            Some(then) => {
                let mut whole = out.to_vec();
                let mut hand_on = |answers: &[bool]| {
                    scatter(answers, &mut whole);
                    then(&whole)
                };
                self.seen_fingerprints_inner(
                    &rest,
                    &rest_hosts,
                    &mut answers,
                    Some(&mut hand_on),
                    Mode::CheckAndInsert,
                )?;
            }
        }
        scatter(&answers, out);
        Ok(())
    }

    pub(super) fn seen_fingerprints_inner(
        &self,
        fps: &[u64],
        hosts: &[u32],
        out: &mut [bool],
        mut then: Option<&mut HandOn<'_>>,
        mode: Mode,
    ) -> Result<()> {
        let handed_on = |e: std::io::Error| Error::Io {
            what: "hand on the answers (the batch was not recorded)".into(),
            path: "-".into(),
            source: e,
        };
        if let Set::Small(small) = self.set() {
            self.check_writable(None)?;
            // In a journal, nothing of this batch reaches the file before `then` has seen the
            // answers, as below for a tree.
            let journal = match &self.backing {
                Backing::Journal(j) => Some(&j.journal),
                _ => None,
            };
            let hold = journal.filter(|_| then.is_some()).map(|j| j.log().hold());
            let backing = &self.backing;
            if let Some(done) = small.insert(fps, hosts, out, &self.name, &self.options, backing) {
                let (lsn, hold) = match (done, hold) {
                    (Ok(lsn), hold) => (lsn, hold),
                    (Err(e), Some(hold)) => {
                        // Nothing of this batch was appended (the insert appends last): let the
                        // journal go on, rather than poison it for every small namespace.
                        hold.commit(0)?;
                        return Err(e);
                    }
                    (Err(e), None) => return Err(e),
                };
                if let Some(Err(e)) = then.as_mut().map(|then| then(out)) {
                    if let Some(hold) = hold {
                        hold.discard(format!(
                            "namespace {:?}: the answers of a batch could not be handed on \
                             ({e}); it was not recorded; reopen to go on",
                            self.name
                        ));
                    }
                    // On the heap, recorded once answered: a caller that fails to hand the
                    // answers on leaves them recorded, as a tree on the heap does.
                    return Err(handed_on(e));
                }
                let Some(journal) = journal else { return Ok(()) };
                // A "seen" may rest on another writer's items, appended and not yet committed
                // (see below).
                let end = if out.iter().any(|&seen| seen) { journal.log().end() } else { lsn };
                return match hold {
                    Some(hold) => hold.commit(end),
                    None => journal.log().commit(end),
                };
            }
            if let Some(hold) = hold {
                // Nothing of this batch was appended: the list is a tree by now.
                hold.commit(0)?;
            }
            // A tree by now (another writer's batch outgrew the list): asked below.
        }
        let tree = match self.set() {
            Set::Counting(set) => {
                // A store failure can leave the batch half-recorded (bits set, some
                // fingerprints stored) with no acknowledgement given. Otherwise a retry could
                // answer "seen" for a URL never acknowledged as new.
                let poison = |e| self.poisoned_by_store(e);
                self.check_writable(None)?;
                // The store has no log in front of it: the hosts its records carry are written
                // out before it is (see `crate::namespace::host_dict`).
                self.backing.flush_first(false)?;
                // The answers are handed on before the store is written: a crash between the
                // two hands them on again (at-least-once), and nothing is recorded unprinted.
                set.seen_many_then(fps, hosts, out, |answers| {
                    then.map_or(Ok(()), |then| then(answers))
                })
                .map_err(poison)?
                .map_err(handed_on)?;
                // Under `always` one sync per batch (the store writes buffered), the hosts
                // file's first.
                if self.backing.commit_syncs() {
                    self.backing.flush_first(true)?;
                    set.sync().map_err(poison)?;
                }
                return Ok(());
            }
            Set::Recrawl(gens) => return gens.seen(fps, hosts, out, then),
            Set::Tree { tree, .. } => tree,
            Set::Small(_) => unreachable!("a small set refuses a batch only once it is a tree"),
        };
        self.check_writable(Some(tree))?;
        // Nothing of this batch reaches the log file before `then` has seen the answers. (Only
        // then: a hold keeps every other writer's flush waiting.)
        let hold = then.as_ref().and_then(|_| self.backing.hold());
        let mut lsn = Lsn(0);
        let mut log_new = |logged: &Logged<'_>| -> Result<u64> {
            let end = self.backing.append(logged)?;
            lsn = lsn.max(end);
            Ok(end.0)
        };
        match self.set() {
            Set::Tree { exact: Some(exact), .. } if mode == Mode::CheckAndInsert => {
                let mut hooks = ExactHooks {
                    cached: &mut |fp| exact.recent.touch(fp),
                    learn: &mut |fp| {
                        exact.confirmed.fetch_add(1, Ordering::Relaxed);
                        exact.recent.insert(fp);
                    },
                };
                tree.insert_batch_exact(fps, hosts, out, &mut hooks, &mut log_new)?;
            }
            _ => tree.insert_batch_with(fps, hosts, out, mode, &mut log_new)?,
        }
        // A leaf file that could not be written keeps its records in memory, but from then on
        // nothing is acknowledged (see `leaf_log`).
        tree.check()?;
        if let Some(Err(e)) = then.as_mut().map(|then| then(out)) {
            if let Some(hold) = hold {
                hold.discard(format!(
                    "namespace {:?}: the answers of a batch could not be handed on ({e}); it was \
                     not recorded; reopen to go on",
                    self.name
                ));
            }
            return Err(handed_on(e));
        }
        // A "seen" may rest on another writer's record that is appended (under the leaf's lock,
        // before its bits could be seen) but not yet written or synced: it is an
        // acknowledgement too, so it waits for everything appended so far. (Group commit makes
        // this a wait for a sync already under way, and nothing when all is durable.)
        let end = if out.iter().any(|&seen| seen) { self.backing.end() } else { lsn };
        match hold {
            Some(hold) => hold.commit(end.0)?,
            None => {
                self.backing.commit(end)?;
            }
        }
        Ok(())
    }

    /// Read-only lookup of many fingerprints.
    ///
    /// # Errors
    /// In exact mode, the store's.
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn contains_fingerprints(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        // Answered "new" to someone, not recorded yet: seen, as a check-and-insert answers.
        // Flight is looked at before the tree: a commit records its fingerprints in the tree
        // before it lets them go, so one not in flight at this look is in the tree already or
        // was reserved after it. Looked at after the tree, a commit between the two looks
        // would make a fingerprint answered "new" to another client read as absent.
        let flying: Option<Vec<bool>> = {
            let in_flight = self.in_flight.read();
            (!in_flight.is_empty()).then(|| fps.iter().map(|fp| in_flight.contains(fp)).collect())
        };
        self.contains_in_tree(fps, out)?;
        if let Some(flying) = flying {
            for (hit, flying) in out.iter_mut().zip(flying) {
                *hit = *hit || flying;
            }
        }
        Ok(())
    }

    /// [`Self::contains_fingerprints`] without the fingerprints in flight.
    pub(super) fn contains_in_tree(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        match self.set() {
            Set::Counting(set) => set.contains_many(fps, out)?,
            Set::Recrawl(gens) => gens.contains(fps, out)?,
            Set::Small(small) => {
                if small.contains(fps, out).is_none() {
                    // A tree by now: asked as one.
                    return self.contains_in_tree(fps, out);
                }
            }
            Set::Tree { tree, exact } => {
                if exact.is_none()
                    && self.options.is_exact()
                    && let Some(dir) = self.backing.dir()
                {
                    // Opened read-only, without the index that confirms a Bloom positive: a
                    // positive here could be a false one, which exact mode never answers.
                    return Err(Error::ReadOnly {
                        path: dir.to_owned(),
                        what: "an exact-mode lookup needs the leaf index, which a read-only \
                               open does not build",
                    });
                }
                tree.contains_batch(fps, out);
                if let Some(exact) = exact {
                    for (&fp, hit) in fps.iter().zip(out.iter_mut()) {
                        if *hit && !exact.recent.touch(fp) {
                            *hit = tree.contains_exact(fp);
                        }
                    }
                    // An index that could not be read answered "seen": not an answer to give.
                    tree.check()?;
                }
            }
        }
        Ok(())
    }
}

/// What [`Namespace::answer_many`] does with each valid URL of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManyOp {
    /// Check-and-insert ([`Namespace::seen`]).
    Seen,
    /// Look up only ([`Namespace::contains`]).
    Contains,
    /// Forget (counting namespaces, [`Namespace::forget`]).
    Forget,
}

impl Namespace {
    /// `op` on each of `urls`, as one engine batch: `Some(answer)` per valid URL, `None` for a
    /// URL that cannot be canonicalized (neither looked up nor recorded: the server's `-1`
    /// rule, docs/protocol.md), so that a language binding and the server answer a batch
    /// alike. Each record keeps its URL's host, so that the namespace can forget a host.
    ///
    /// # Errors
    /// As [`Self::seen_fingerprints_hosts`], [`Self::contains_fingerprints`] or
    /// [`Self::forget_fingerprints`]; an invalid URL is not an error.
    pub fn answer_many<S: AsRef<str>>(&self, urls: &[S], op: ManyOp) -> Result<Vec<Option<bool>>> {
        let mut fps = Vec::with_capacity(urls.len());
        let mut hosts = Vec::with_capacity(urls.len());
        let mut at = Vec::with_capacity(urls.len());
        for (i, url) in urls.iter().enumerate() {
            match self.fingerprint_host(url.as_ref()) {
                Ok((fp, host)) => {
                    fps.push(fp);
                    hosts.push(host);
                    at.push(i);
                }
                Err(Error::InvalidUrl(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let mut answers = vec![false; fps.len()];
        match op {
            ManyOp::Seen => self.seen_fingerprints_hosts(&fps, &hosts, &mut answers)?,
            ManyOp::Contains => self.contains_fingerprints(&fps, &mut answers)?,
            ManyOp::Forget => self.forget_fingerprints(&fps, &mut answers)?,
        }
        let mut out = vec![None; urls.len()];
        for (i, answer) in at.into_iter().zip(answers) {
            out[i] = Some(answer);
        }
        Ok(out)
    }
}
