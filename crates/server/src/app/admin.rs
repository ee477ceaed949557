//! What changes a key other than an insert: forgetting (URLs, a host, a prefix), dropping,
//! dumping and restoring (`BF.SCANDUMP`, `BF.LOADCHUNK`), `FLUSHALL`, and the shutdown.

use super::*;

impl App {
    /// `URL.FORGET`: one answer per URL (whether it was recorded), or `Err(reason)` for an
    /// invalid URL, which was not looked up. The valid URLs are forgotten in one engine call.
    ///
    /// # Errors
    /// The namespace cannot forget (it has no counting filters), or a failed write: the whole
    /// command fails.
    pub fn forget<U: AsRef<[u8]>>(
        &self,
        ns: &Namespace,
        urls: &[U],
    ) -> Result<Vec<Result<bool, CommandError>>, CommandError> {
        if !ns.can_forget() {
            return Err(CommandError::custom(crate::error::FORGET_UNSUPPORTED));
        }
        let mut answers = Vec::with_capacity(urls.len());
        let mut fps = Vec::with_capacity(urls.len());
        for url in urls {
            let fp = std::str::from_utf8(url.as_ref())
                .map_err(|_| CommandError::custom(URL_NOT_UTF8))
                .and_then(|url| ns.fingerprint(url).map_err(CommandError::from));
            match fp {
                Ok(fp) => {
                    fps.push(fp);
                    answers.push(Ok(false));
                }
                Err(e) => answers.push(Err(e)),
            }
        }
        let mut forgotten = vec![false; fps.len()];
        if !fps.is_empty() {
            self.write(|| ns.forget_fingerprints(&fps, &mut forgotten))
                .map_err(|e| write_error(&e))?;
        }
        let mut forgotten = forgotten.into_iter();
        for answer in answers.iter_mut().flatten() {
            *answer = forgotten.next().unwrap_or(false);
        }
        Ok(answers)
    }

    /// `URL.FORGET ns HOST h`: forgets every URL of host `h`, and returns how many. It holds
    /// the namespace for as long as it rewrites the leaves that hold them (a thread of the
    /// runtime blocks meanwhile, its other connections handed to another one).
    ///
    /// # Errors
    /// An invalid host, a namespace that holds records with no host or cannot forget by
    /// host, or a failed write (`MISCONF`).
    pub fn forget_host(&self, ns: &Namespace, host: &[u8]) -> Result<u64, CommandError> {
        let host = std::str::from_utf8(host)
            .map_err(|_| CommandError::custom(crate::error::HOST_NOT_UTF8))?;
        blocking_call(|| ns.forget_host(host)).map_err(|e| write_error(&e))
    }

    /// `URL.FORGET ns PREFIX p`: forgets every URL under prefix `p`, and returns how many,
    /// holding the namespace as [`Self::forget_host`] does.
    ///
    /// # Errors
    /// An invalid prefix, a namespace that does not keep its URLs or holds records with no
    /// host, or a failed write (`MISCONF`).
    pub fn forget_prefix(&self, ns: &Namespace, prefix: &[u8]) -> Result<u64, CommandError> {
        let prefix = std::str::from_utf8(prefix).map_err(|_| CommandError::custom(URL_NOT_UTF8))?;
        blocking_call(|| ns.forget_prefix(prefix)).map_err(|e| write_error(&e))
    }

    /// Drops the namespace `key` (`DEL`); whether it existed.
    ///
    /// # Errors
    /// In a persistent `Db`, its files could not be removed.
    pub fn drop_key(&self, key: &[u8]) -> Result<bool, CommandError> {
        let Ok(name) = std::str::from_utf8(key) else { return Ok(false) };
        let dropped = self.db.drop_namespace(name).map_err(CommandError::from);
        self.invalidate_caches();
        dropped
    }

    /// `BF.SCANDUMP key iterator`: the chunk after `iter` of the namespace `key` (a Bloom
    /// filter or a URL namespace: the dump carries its profile).
    ///
    /// # Errors
    /// `ERR not found`; the engine's (see [`crate::error::engine_error`]).
    pub fn dump_chunk(
        &self,
        key: &[u8],
        iter: i64,
    ) -> Result<urlseen_engine::DumpChunk, CommandError> {
        self.local_only()?;
        let ns = self.namespace(key).ok_or(CommandError::custom(crate::error::BF_NOT_FOUND))?;
        ns.dump_chunk(iter, self.config.dump_chunk_bytes).map_err(CommandError::from)
    }

    /// `BF.LOADCHUNK key iterator data`: one chunk of a dump into `key` (see
    /// [`Db::load_chunk`]).
    ///
    /// # Errors
    /// `ERR not found` for a data chunk to a key that neither exists nor is being restored;
    /// for a key that exists, RedisBloom's reply to a chunk that does not fit (see
    /// [`crate::error::loadchunk_into_existing`]); the engine's (see
    /// [`crate::error::engine_error`]).
    pub fn load_chunk(&self, key: &[u8], iter: i64, data: &[u8]) -> Result<(), CommandError> {
        self.local_only()?;
        let name =
            std::str::from_utf8(key).map_err(|_| CommandError::custom(NAMESPACE_NOT_UTF8))?;
        if iter == urlseen_engine::dump::ITER_HEADER && self.db.namespace(name).is_none() {
            // The filters of the namespace it creates are held to the same budget as any.
            if let Ok(header) = urlseen_engine::dump::Header::decode(data) {
                self.check_size(&header.options)?;
            }
        }
        let step = self.write(|| self.db.load_chunk(name, iter, data));
        match step {
            Ok(_) => Ok(()),
            Err(urlseen_engine::Error::NoSuchNamespace(_)) => {
                Err(CommandError::custom(crate::error::BF_NOT_FOUND))
            }
            Err(urlseen_engine::Error::NamespaceExists(_)) => {
                Err(crate::error::loadchunk_into_existing(iter, data.len()))
            }
            Err(e) => {
                // The reply is in RedisBloom's few words; the engine's error says which check
                // refused the chunk.
                tracing::debug!(key = name, iter, error = %e, "BF.LOADCHUNK refused");
                Err(e.into())
            }
        }
    }

    /// Drops every namespace (`FLUSHALL`); returns how many there were.
    ///
    /// # Errors
    /// As [`App::drop_key`], for the first namespace that fails.
    pub fn flush(&self) -> Result<usize, CommandError> {
        let mut dropped = 0;
        let mut result = Ok(());
        // Restores under way go too (they are not counted: their keys do not exist yet).
        for name in self.db.restoring() {
            if let Err(e) = self.db.drop_namespace(&name) {
                return Err(e.into());
            }
        }
        for name in self.db.namespace_names() {
            match self.db.drop_namespace(&name) {
                Ok(true) => dropped += 1,
                Ok(false) => {}
                Err(e) => {
                    result = Err(e.into());
                    break;
                }
            }
        }
        self.invalidate_caches();
        result.map(|()| dropped)
    }

    /// Called once, after every connection is drained and before the process exits: writes a
    /// snapshot of every namespace and syncs everything (a no-op in memory). It runs after the
    /// RESP and HTTP servers have stopped, so no write can race it.
    ///
    /// # Errors
    /// The engine's, e.g. a failed fsync; the caller exits non-zero then, since some
    /// acknowledged writes under `everysec` may not be on disk.
    pub fn shutdown(&self) -> Result<(), urlseen_engine::Error> {
        self.db.wait_for_splits();
        self.db.checkpoint()?;
        self.db.sync()?;
        tracing::info!(namespaces = self.db.namespace_count(), "engine flushed and synced");
        Ok(())
    }
}
