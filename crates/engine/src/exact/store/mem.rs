//! [`MemStore`]: the store on the heap, for in-memory databases and tests, with the identity
//! hasher fingerprints need (they are hashes already).
use super::{
    BuildHasherDefault, FpStore, HashMap, Hasher, Record, Result, RwLock, StoreDurability, mix64,
};

/// A [`Hasher`] for keys that are (or derive from) fingerprints: one [`mix64`], no SipHash.
/// Mixing again keeps tables fast even for non-random keys such as test sequences.
#[derive(Debug, Default, Clone, Copy)]
pub struct FpHasher(u64);

impl Hasher for FpHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = mix64(self.0 ^ u64::from(b));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = mix64(self.0 ^ x);
    }
}

/// The [`std::hash::BuildHasher`] of [`FpHasher`].
pub type FpBuildHasher = BuildHasherDefault<FpHasher>;

/// The fingerprint store in memory, for in-memory databases and tests: a hash map behind a
/// reader-writer lock. [`sync`](FpStore::sync) does nothing; nothing survives the process.
#[derive(Debug, Default)]
pub struct MemStore {
    map: RwLock<HashMap<u64, Record, FpBuildHasher>>,
}

impl MemStore {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
}

impl FpStore for MemStore {
    fn get_record(&self, fp: u64) -> Result<Option<Record>> {
        Ok(self.map.read().get(&fp).copied())
    }

    fn insert_many_hosts_in(&self, fps: &[u64], hosts: &[u32], generation: u32) -> Result<()> {
        let mut map = self.map.write();
        map.reserve(fps.len());
        for (i, &fp) in fps.iter().enumerate() {
            let host = hosts.get(i).copied().unwrap_or(0);
            map.insert(fp, Record { host, ..Record::new(generation) });
        }
        Ok(())
    }

    fn update_record(&self, fp: u64, record: Record) -> Result<()> {
        self.map.write().insert(fp, record);
        Ok(())
    }

    fn increment(&self, fp: u64) -> Result<u32> {
        let mut map = self.map.write();
        let r = map.entry(fp).and_modify(|r| r.refcount = r.refcount.saturating_add(1));
        Ok(r.or_insert(Record::new(0)).refcount)
    }

    fn remove_record(&self, fp: u64) -> Result<Option<Record>> {
        Ok(self.map.write().remove(&fp))
    }

    fn len(&self) -> u64 {
        self.map.read().len() as u64
    }

    fn scan(&self, f: &mut dyn FnMut(u64, Record)) -> Result<()> {
        for (&fp, &r) in self.map.read().iter() {
            f(fp, r);
        }
        Ok(())
    }

    fn iter_fingerprints(&self) -> Box<dyn Iterator<Item = Result<u64>> + '_> {
        // A snapshot: holding the read lock inside a returned iterator would block writers
        // for as long as the caller iterates.
        let keys: Vec<u64> = self.map.read().keys().copied().collect();
        Box::new(keys.into_iter().map(Ok))
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn durability(&self) -> StoreDurability {
        StoreDurability::Buffered
    }

    fn memory_bytes(&self) -> u64 {
        // hashbrown: one control byte plus the (key, value) slot per bucket.
        (self.map.read().capacity() * (1 + size_of::<(u64, Record)>())) as u64
    }
}
