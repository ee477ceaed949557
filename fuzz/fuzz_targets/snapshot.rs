//! Feeds arbitrary bytes to the snapshot reader, as a damaged `snapshot` file of a data
//! directory would (read at every open). The reader checks the trailing checksum only at the
//! end, so arbitrary bodies reach every parser before it: the input follows a valid header.
//!
//! Property: `read_snapshot` answers an error or a tree, never panics or aborts (a huge
//! allocation is an abort under the fuzzer's RSS limit).

#![no_main]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use urlseen_engine::leaf_log::{LeafFiles, LeafStore};
use urlseen_engine::storage::{OsStorage, Storage};
use urlseen_engine::tree::{Dsbf, SNAPSHOT_VERSION, SplitWorkers, TreeParams};
use urlseen_engine::NamespaceOptions;
use urlseen_filter::frame::Format;

/// The snapshot's framing, as `crates/engine/src/tree/snapshot.rs` writes it.
const SNAPSHOT: Format =
    Format { name: "snapshot", magic: *b"URLSEENS", version: SNAPSHOT_VERSION, oldest: 1 };

fn leaves_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("urlseen-fuzz-snapshot-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let storage: Arc<dyn Storage> = Arc::new(OsStorage);
    let Ok(files) = LeafFiles::open(storage, leaves_dir().clone(), false) else { return };
    let params = TreeParams::from(&NamespaceOptions::default());
    let mut bytes = Vec::new();
    SNAPSHOT.write_header(&mut bytes);
    bytes.extend_from_slice(data);
    let workers = SplitWorkers::new(1);
    let _ = Dsbf::read_snapshot(params, workers, LeafStore::Files(files), &mut &bytes[..]);
});
