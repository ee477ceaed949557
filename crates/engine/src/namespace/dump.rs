//! A namespace's dump, chunk by chunk (`urlseen dump`, `BF.SCANDUMP`), and the restore of
//! the records one holds.
use super::{Error, Logged, Lsn, Mode, Namespace, Result, Set};

/// How long a dump's first data chunk waits for answers in flight to be recorded, when there
/// are too many to carry ([`Error::Unsettled`] after).
const SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a dump's first data chunk waits for answers in flight to be recorded before it
/// carries those still in flight: another connection's commit follows its reply within
/// milliseconds, and a recorded answer is dumped once, where a carried one may be taken twice.
const CARRY_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

impl Namespace {
    /// One chunk of a dump of this namespace, in RedisBloom's `BF.SCANDUMP` protocol:
    /// iterator 0 gives the header (name, options, counts) with [`crate::dsbf::dump::ITER_HEADER`];
    /// any iterator returned since gives the next chunk of fingerprints, at most `max_bytes`
    /// long; the last one comes with [`crate::dsbf::dump::ITER_FINAL`], which gives
    /// `next == 0` and no data. Load them with [`Db::load_chunk`](crate::Db::load_chunk).
    ///
    /// The first data chunk also carries the fingerprints answered "new" whose replies are
    /// not yet delivered, so not yet recorded (see [`crate::reserve`]): a client that reads
    /// the dump right after its write finds the write in it. The header call finishes any
    /// split in progress, so an idle namespace dumps each
    /// fingerprint exactly once. Then it reads the leaf logs a chunk at a time, under each
    /// leaf's read lock: writes go on, and a dump taken while they do holds every record that
    /// was there when it began (some twice, if their leaf split meanwhile) and maybe some added
    /// since (see [`Dsbf::dump_records`](super::Dsbf::dump_records)).
    ///
    /// # Errors
    /// [`Error::InvalidIterator`], [`Error::InvalidOption`] for a `max_bytes` outside
    /// [`crate::dsbf::dump::MIN_CHUNK_BYTES`]`..=`[`crate::dsbf::dump::MAX_CHUNK_BYTES`],
    /// [`Error::DumpUnsupported`] for a counting namespace or a recrawl window, a leaf file
    /// that cannot be read; at `iter` 0, [`Error::Poisoned`] if a split in progress cannot be
    /// finished; at the first data chunk, [`Error::Unsettled`] if more answers are in flight
    /// than half a chunk holds and they were not recorded within 10 s.
    pub fn dump_chunk(&self, iter: i64, max_bytes: usize) -> Result<crate::dsbf::dump::DumpChunk> {
        use crate::dsbf::dump::{self, Data, DumpChunk, Header, ITER_FINAL, ITER_HEADER};
        if let Set::Recrawl(_) = self.set() {
            return Err(Error::DumpUnsupported {
                name: self.name.to_string(),
                reason: "a recrawl window's generations have no dump format yet",
            });
        }
        // A small list is dumped as the tree it becomes (the format is a tree's).
        let Set::Tree { tree, .. } = self.tree_set()? else {
            return Err(Error::DumpUnsupported {
                name: self.name.to_string(),
                reason: "a counting namespace keeps its fingerprints in its store, which has no                          dump yet",
            });
        };
        let budget = dump::chunk_records(max_bytes)?;
        match iter {
            0 => {
                // A split in progress has its records both in the frozen parent and, for
                // those migrated, in a child: a walk would take them twice. Finishing it here
                // makes the dump of an idle namespace exact.
                tree.complete_splits();
                tree.check()?;
                let s = tree.stats();
                // As `BF.CARD` counts: the fingerprints in flight too (the first data chunk
                // carries them).
                let count = s.count + self.in_flight.len() as u64;
                let data = Header::encode(&self.name, &self.options, count, s.kept);
                return Ok(DumpChunk { next: ITER_HEADER, data });
            }
            ITER_FINAL => return Ok(DumpChunk { next: 0, data: Vec::new() }),
            _ => {}
        }
        let from = dump::decode_iter(iter)?;
        let (mut recorded, mut kept) = (Vec::new(), Vec::new());
        let mut flying = Vec::new();
        if iter == ITER_HEADER {
            // Fingerprints answered "new" whose commits are still to come are in no leaf yet:
            // their clients may hold the replies and ask for this dump on another connection
            // of a pool, or pipeline it behind the write on their own (whose commit waits for
            // this reply). The first data chunk carries them; one recorded before the walk
            // passes its leaf is taken twice (a copy counts it twice in `BF.CARD`), as a
            // record whose leaf splits during a dump is.
            // Half of the chunk at most, so that the walk still moves; past that (a million
            // answers in flight at once) the dump waits for them to be recorded instead.
            // Added after the walk, which gets the rest of the budget: given them first, it
            // would take a first leaf larger than that rest as a full chunk and not move on.
            // Those of another connection are most often recorded within the moment waited.
            self.in_flight.settle(CARRY_AFTER);
            flying = self.in_flight.snapshot();
            if flying.len() > budget / 2 {
                if !self.in_flight.settle(SETTLE_LIMIT) {
                    return Err(Error::Unsettled {
                        name: self.name.to_string(),
                        waited_ms: SETTLE_LIMIT.as_millis() as u64,
                    });
                }
                flying.clear();
            }
        }
        let walk_budget = budget - flying.len();
        let after = tree.dump_records(from, walk_budget, &mut recorded, &mut kept).map_err(
            |e| match e {
                Error::Corrupt { .. } if from.records > 0 => Error::InvalidIterator(iter),
                other => other,
            },
        )?;
        recorded.extend(flying);
        let next = match after {
            Some(pos) => dump::encode_iter(pos)?,
            None => ITER_FINAL,
        };
        let identity = dump::identity(&self.options);
        let data = Data { identity, from: iter, next, last: after.is_none(), recorded, kept };
        Ok(DumpChunk { next, data: data.encode() })
    }

    /// Records fingerprints of a dump as they were in the original: `recorded` as recorded
    /// (counted), `kept` as kept records, each in the leaf it routes to, and in a persistent
    /// `Db` in the log.
    ///
    /// # Errors
    /// As [`Self::seen_fingerprints`]; [`Error::DumpUnsupported`] for a counting namespace.
    pub(crate) fn restore_records(&self, recorded: &[u64], kept: &[u64]) -> Result<()> {
        let Set::Tree { tree, .. } = self.tree_set()? else {
            return Err(Error::DumpUnsupported {
                name: self.name.to_string(),
                reason: "a counting namespace cannot be restored from a dump",
            });
        };
        self.backing.check()?;
        tree.check()?;
        let mut lsn = Lsn(0);
        {
            let mut log = |logged: &Logged<'_>| -> Result<u64> {
                let end = self.backing.append(logged)?;
                lsn = lsn.max(end);
                Ok(end.0)
            };
            let mut out = vec![false; recorded.len()];
            tree.insert_batch_with(recorded, &[], &mut out, Mode::Record, &mut log)?;
            let mut out = vec![false; kept.len()];
            tree.insert_batch_with(kept, &[], &mut out, Mode::Keep, &mut log)?;
        }
        tree.check()?;
        self.backing.commit(lsn)?;
        Ok(())
    }
}
