//! Dump and restore of a namespace in Redis, in the same chunks as the in-process engine's
//! ([`urlseen_engine::dump`]): a dump made here loads into a data directory or a server, and
//! the other way round.
//!
//! A leaf's log in Redis is a string of 8-byte fingerprints, so a chunk is one `GETRANGE` per
//! leaf it covers, and a restore appends each fingerprint to the log of the leaf it routes to
//! (compared exactly with what the log holds, never skipped on a replica's filter: see
//! [`RedisNamespace::restore_fingerprints`]). Redis has no kept records: a dump made here has
//! none, and a dump's kept records are recorded here.

use ::redis::Value;

use super::meta::State;
use super::{Error, RedisDb, RedisNamespace, Result};
use urlseen_engine::dsbf::dump::DumpPos;
use urlseen_engine::dump::{
    self, ChunkOrder, Data, DumpChunk, Header, ITER_FINAL, ITER_HEADER, decode_iter, encode_iter,
};

impl RedisNamespace {
    /// One chunk of a dump of this namespace: as
    /// [`Namespace::dump_chunk`](urlseen_engine::Namespace), reading the leaves' logs from Redis
    /// (one `GETRANGE` per leaf the chunk covers).
    ///
    /// The header carries the options this namespace was opened with; every client must open
    /// it with the same ones, so they are its options.
    ///
    /// # Errors
    /// [`urlseen_engine::Error::InvalidIterator`], a chunk size out of range, connection errors.
    pub fn dump_chunk(&self, iter: i64, max_bytes: usize) -> Result<DumpChunk> {
        let budget = dump::chunk_records(max_bytes)?;
        match iter {
            0 => {
                let count = self.stats()?.count;
                let data = Header::encode(&self.name, &self.options, count, 0);
                return Ok(DumpChunk { next: ITER_HEADER, data });
            }
            ITER_FINAL => return Ok(DumpChunk { next: 0, data: Vec::new() }),
            _ => {}
        }
        let from = decode_iter(iter)?;
        let meta = self.refresh_meta()?;
        let mut pos = from;
        let mut recorded: Vec<u64> = Vec::new();
        let after = loop {
            let Some(node) = meta.nodes.get(pos.node as usize) else { break None };
            let has_log =
                matches!(node.as_ref().map(|n| &n.state), Some(State::Leaf | State::Splitting(_)));
            let room = (budget - recorded.len()) as u64;
            if !has_log {
                pos = DumpPos { node: pos.node + 1, records: 0 };
                continue;
            }
            if room == 0 {
                break Some(pos);
            }
            let mut cmd = ::redis::cmd("GETRANGE");
            let end = (pos.records + room) * 8 - 1;
            cmd.arg(self.key(pos.node, "log")).arg(pos.records * 8).arg(end);
            let place = self.place(pos.node);
            let bytes = match self.retrying(|| self.router.one(place.clone(), cmd.clone()))? {
                Value::BulkString(b) => b,
                Value::Nil => Vec::new(),
                other => return Err(self.protocol(pos.node, "GETRANGE", &other)),
            };
            // A log whose length is not a multiple of 8 is damaged: its whole entries count.
            let got = bytes.len() / 8;
            recorded.extend(
                bytes.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default())),
            );
            if (got as u64) < room {
                pos = DumpPos { node: pos.node + 1, records: 0 };
            } else {
                pos.records += got as u64;
            }
        };
        let next = match after {
            Some(pos) => encode_iter(pos)?,
            None => ITER_FINAL,
        };
        let data = Data {
            identity: dump::identity(&self.options),
            from: iter,
            next,
            last: after.is_none(),
            recorded,
            kept: Vec::new(),
        }
        .encode();
        Ok(DumpChunk { next, data })
    }

    /// Appends each fingerprint to the log of the leaf it routes to, unless that log holds it
    /// already: unlike a check-and-insert, a fingerprint that a replica's filter (falsely)
    /// holds is recorded too, so the splits that rebuild filters from the logs keep it.
    ///
    /// # Errors
    /// Connection errors, including a reply that never came (the batch may be half recorded:
    /// recording it again is harmless).
    pub fn restore_fingerprints(&self, fps: &[u64]) -> Result<()> {
        // A leaf splits after the call that filled it: in calls of half the smallest split
        // point a leaf can have (a split's child is up to SPLIT_SPREAD smaller than the first
        // leaves, if leaves do not grow), no leaf gets past one and a half of its own before
        // it splits (a whole chunk at once could leave leaves several times over, their FPR
        // with them).
        let least = self.split_point() as f64 * (1.0 - urlseen_engine::dsbf::SPLIT_SPREAD);
        let step = ((least / 2.0) as usize).max(1);
        let mut out = vec![false; step.min(fps.len())];
        for part in fps.chunks(step) {
            self.insert_batch_as(part, &[], &mut out[..part.len()], true)?;
        }
        Ok(())
    }
}

/// A restore into Redis under way (see [`RedisDb::restore`]).
#[derive(Debug)]
pub struct RedisRestore {
    ns: std::sync::Arc<RedisNamespace>,
    order: ChunkOrder,
    done: bool,
}

impl RedisDb {
    /// Starts restoring a dump ([`urlseen_engine::Namespace::dump_chunk`] or
    /// [`RedisNamespace::dump_chunk`]) into namespace `name`, created with the dump's options.
    /// A namespace of that name that holds anything is refused. Unlike a restore into a `Db`,
    /// the namespace is visible to other clients while it fills (Redis has no way to publish a
    /// namespace's many keys at once).
    ///
    /// # Errors
    /// As [`Header::decode`]; [`urlseen_engine::Error::NamespaceExists`] for a namespace that holds
    /// URLs; as [`RedisDb::namespace`].
    pub fn restore(&self, name: &str, header: &[u8]) -> Result<RedisRestore> {
        let h = Header::decode(header)?;
        if h.options.counting || h.options.exact {
            return Err(Error::Engine(urlseen_engine::Error::DumpUnsupported {
                name: name.to_owned(),
                reason: "the Redis backend has no exact or counting mode",
            }));
        }
        let order = ChunkOrder::after(&h);
        let ns = self.namespace(name, h.options)?;
        if ns.stats()?.count > 0 {
            return Err(Error::Engine(urlseen_engine::Error::NamespaceExists(name.to_owned())));
        }
        Ok(RedisRestore { ns, order, done: false })
    }
}

impl RedisRestore {
    /// Loads the data chunk returned with `iter`; `true` once the final chunk is loaded.
    ///
    /// # Errors
    /// A chunk that is damaged, out of order or of another dump (nothing of it is loaded);
    /// connection errors.
    pub fn load_chunk(&mut self, iter: i64, chunk: &[u8]) -> Result<bool> {
        if self.done {
            return Err(Error::Engine(urlseen_engine::Error::NamespaceExists(
                self.ns.name().to_owned(),
            )));
        }
        let data = self.order.check(iter, chunk)?;
        self.ns.restore_fingerprints(&data.recorded)?;
        self.ns.restore_fingerprints(&data.kept)?;
        self.order.advance(&data);
        self.done = data.last;
        Ok(self.done)
    }

    /// The namespace being restored.
    pub fn namespace(&self) -> &std::sync::Arc<RedisNamespace> {
        &self.ns
    }
}
