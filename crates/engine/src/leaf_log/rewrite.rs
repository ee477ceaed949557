//! A forget's rewrite of one leaf's log: the records that stay, into a new file renamed over
//! the old one (see [`LeafLog::rewrite`]).
use super::{
    BUFFER_RECORDS, Error, FORMAT, HEADER_LEN, LeafLog, LeafRecord, LeafStore, Ordering, ReadPos,
    Result, encode_block,
};

impl LeafLog {
    /// Rewrites this leaf's records without those `drop` matches, handing every record that
    /// stays to `stay` (which rebuilds the leaf's filter from them), and returns the records
    /// dropped. When none matches, nothing changes and `stay` is not called. A leaf file is rewritten whole into a temporary file (blocks of
    /// [`BUFFER_RECORDS`]), synced and renamed over the old one, so a crash leaves one or the
    /// other; the caller makes sure no snapshot names the old one by then (see
    /// `Namespace::forget_host`). Nothing is written when nothing matches.
    ///
    /// # Errors
    /// [`Error::Io`] or [`Error::Corrupt`] reading the old file or writing the new one: the
    /// leaf is then unchanged (and the store marked failed if the rename went wrong).
    pub(crate) fn rewrite(
        &mut self,
        store: &LeafStore,
        drop: &dyn Fn(&LeafRecord) -> bool,
        stay: &mut dyn FnMut(&LeafRecord),
    ) -> Result<Vec<LeafRecord>> {
        let mut dropped = Vec::new();
        let mut chunk = Vec::new();
        let mut pos = ReadPos::default();
        // A first pass finds whether anything goes: most leaves of a small host keep all.
        while !self.is_end(pos) {
            pos = self.read(store, pos, 1 << 16, &mut chunk)?;
            dropped.extend(chunk.iter().filter(|r| drop(r)).copied());
        }
        let all = |this: &Self, stay: &mut dyn FnMut(&LeafRecord)| -> Result<Vec<LeafRecord>> {
            let (mut pos, mut chunk, mut kept) = (ReadPos::default(), Vec::new(), Vec::new());
            while !this.is_end(pos) {
                pos = this.read(store, pos, 1 << 16, &mut chunk)?;
                for r in chunk.iter().filter(|r| !drop(r)) {
                    stay(r);
                    kept.push(*r);
                }
            }
            Ok(kept)
        };
        if dropped.is_empty() {
            // Nothing goes, and `stay` was not called: the leaf's filter stays as it is.
            return Ok(dropped);
        }
        match (&mut *self, store) {
            (LeafLog::Memory(_), _) | (LeafLog::File { .. }, LeafStore::Memory) => {
                let kept = all(self, stay)?;
                let mut log = LeafLog::new(&LeafStore::Memory, 0, kept.len());
                for r in kept {
                    log.push(&LeafStore::Memory, r);
                }
                *self = log;
            }
            (LeafLog::File { id, .. }, LeafStore::Files(files)) => {
                let id = *id;
                let path = files.path(id);
                if files.read_only {
                    // Nothing is written: the records that stay wait in the buffer, as a
                    // read-only replay's do.
                    let buffer = all(self, stay)?;
                    *self = LeafLog::File { id, on_disk: 0, file_len: 0, buffer };
                    return Ok(dropped);
                }
                files.check()?;
                files.make_dir().map_err(|e| Error::io("create directory", files.dir(), e))?;
                let (mut records, mut file_len) = (0u64, 0u64);
                let mut failed = None;
                let old = &*self;
                let written = files.storage.write_atomic_with(&path, &mut |w| {
                    let (mut pos, mut chunk, mut block) =
                        (ReadPos::default(), Vec::new(), Vec::new());
                    let mut bytes = Vec::new();
                    FORMAT.write_header(&mut bytes);
                    bytes.resize(HEADER_LEN as usize, 0);
                    let mut flush = |block: &mut Vec<LeafRecord>, bytes: &mut Vec<u8>| {
                        if !block.is_empty() {
                            encode_block(bytes, block);
                            records += block.len() as u64;
                            block.clear();
                        }
                    };
                    while !old.is_end(pos) {
                        pos = match old.read(store, pos, 1 << 16, &mut chunk) {
                            Ok(next) => next,
                            Err(e) => {
                                failed = Some(e);
                                return Err(std::io::Error::other("reading the old leaf"));
                            }
                        };
                        for r in chunk.iter().filter(|r| !drop(r)) {
                            stay(r);
                            block.push(*r);
                            if block.len() == BUFFER_RECORDS {
                                flush(&mut block, &mut bytes);
                                w.write_all(&bytes)?;
                                file_len += bytes.len() as u64;
                                bytes.clear();
                            }
                        }
                    }
                    flush(&mut block, &mut bytes);
                    if records > 0 {
                        w.write_all(&bytes)?;
                        file_len += bytes.len() as u64;
                    }
                    Ok(())
                });
                if let Some(e) = failed {
                    return Err(e);
                }
                written.map_err(|e| Error::io("rewrite", &path, e))?;
                let old_len = self.file_len();
                if records == 0 {
                    // Only a header was written: no leaf file, as for a new leaf.
                    files.storage.remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
                    file_len = 0;
                }
                let _ = files.disk_bytes.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                    Some(b.saturating_sub(old_len) + file_len)
                });
                *self = LeafLog::File { id, on_disk: records, file_len, buffer: Vec::new() };
            }
        }
        Ok(dropped)
    }
}
