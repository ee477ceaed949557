//! Dump and restore (`Namespace::dump_chunk` → `Db::load_chunk`): the copy knows every item of
//! the original, keeps growing, survives a restart, and bad chunks are typed errors that load
//! nothing.

use std::sync::Arc;

use urlseen_engine::dump::{ITER_FINAL, ITER_HEADER, MIN_CHUNK_BYTES};
use urlseen_engine::{
    CanonOptions, Db, Error, LoadStep, Namespace, NamespaceOptions, Profile, SplitMode, SplitPolicy,
};

/// A namespace that splits a lot: small leaves, inline splits (deterministic).
fn small(profile: Profile, exact: bool) -> NamespaceOptions {
    NamespaceOptions {
        capacity: 2_000,
        fpr: 0.01,
        canon: CanonOptions::new(profile),
        split: SplitPolicy { mode: SplitMode::Inline, growth: 1, ..SplitPolicy::default() },
        exact,
        ..NamespaceOptions::default()
    }
}

fn item(i: u64) -> String {
    format!("https://example.com/page/{i}")
}

/// Every chunk of a dump of `ns`, in order, with the iterator returned with it.
fn dump(ns: &Namespace) -> Vec<(i64, Vec<u8>)> {
    let mut chunks = Vec::new();
    let mut iter = 0;
    loop {
        let c = ns.dump_chunk(iter, MIN_CHUNK_BYTES).expect("dump chunk");
        if c.next == 0 {
            assert!(c.data.is_empty());
            return chunks;
        }
        assert!(c.data.len() <= MIN_CHUNK_BYTES, "chunk of {} bytes", c.data.len());
        chunks.push((c.next, c.data));
        iter = c.next;
    }
}

fn load(db: &Db, name: &str, chunks: &[(i64, Vec<u8>)]) -> Arc<Namespace> {
    for (i, (iter, data)) in chunks.iter().enumerate() {
        match db.load_chunk(name, *iter, data).expect("load chunk") {
            LoadStep::Finished(ns) => {
                assert_eq!(i + 1, chunks.len(), "finished before the last chunk");
                return ns;
            }
            LoadStep::Started => assert_eq!(i, 0),
            LoadStep::Loaded => assert!(i > 0),
        }
    }
    panic!("the last chunk did not finish the restore");
}

#[test]
fn a_restored_namespace_knows_every_item_and_keeps_splitting() {
    let db = Db::in_memory();
    let ns = db.create_namespace("src", small(Profile::Crawler, false)).unwrap();
    let n = 40_000;
    // A URL namespace promises that what it recorded stays seen: those answered "new".
    let recorded: Vec<u64> = (0..n).filter(|&i| !ns.seen(&item(i)).unwrap()).collect();
    let before = ns.stats();
    assert!(before.splits_done > 0, "the original never split");
    let chunks = dump(&ns);
    assert!(chunks.len() > 3, "{} chunks: the test wants several", chunks.len());
    assert_eq!(chunks.last().unwrap().0, ITER_FINAL);

    let other = Db::temporary(None).unwrap();
    let copy = load(&other, "copy", &chunks);
    assert!(other.namespace("copy").is_some());
    // The leaf size travels as the one in effect (as a data directory stores it).
    let expected = NamespaceOptions {
        leaf_bits: Some(ns.options().effective_leaf_bits()),
        ..ns.options().clone()
    };
    assert_eq!(copy.options(), &expected, "options (profile, seed, sizes) travel");
    assert_eq!(copy.len(), ns.len(), "recorded counts differ");
    assert_eq!(copy.stats().kept, before.kept);
    for &i in &recorded {
        assert!(copy.contains(&item(i)).unwrap(), "false negative for item {i}");
    }
    // Canonicalization travels too: the same page spelled otherwise is known.
    assert!(copy.contains("HTTPS://EXAMPLE.COM:443/page/7#frag").unwrap());

    let splits = copy.stats().splits_done;
    let recorded_later: Vec<u64> = (n..3 * n).filter(|&i| !copy.seen(&item(i)).unwrap()).collect();
    assert!(copy.stats().splits_done > splits, "the copy did not split further");
    for &i in recorded.iter().chain(&recorded_later) {
        assert!(copy.contains(&item(i)).unwrap(), "item {i} lost after more splits");
    }
    assert!(copy.stats().worst_leaf_fpr <= 0.01 * 1.05, "{}", copy.stats().worst_leaf_fpr);
}

#[test]
fn an_exact_bloom_filter_copy_into_a_data_directory_survives_a_restart() {
    let src = Db::in_memory();
    let ns = src.create_namespace("bf", small(Profile::None, true)).unwrap();
    for i in 0..20_000u64 {
        ns.seen_bytes(&i.to_le_bytes()).unwrap();
    }
    let chunks = dump(&ns);
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path()).unwrap();
        let copy = load(&db, "bf-copy", &chunks);
        assert_eq!(copy.len(), ns.len());
        db.close().unwrap();
    }
    let db = Db::open(dir.path()).unwrap();
    let copy = db.namespace("bf-copy").expect("the restored namespace is gone after a restart");
    assert_eq!(copy.len(), ns.len());
    assert!(copy.options().exact);
    for i in 0..20_000u64 {
        assert!(copy.contains_bytes(&i.to_le_bytes()).unwrap(), "lost {i}");
    }
    // Exact mode: what was never added stays new.
    let false_positives =
        (1_000_000..1_010_000u64).filter(|i| copy.contains_bytes(&i.to_le_bytes()).unwrap());
    assert_eq!(false_positives.count(), 0);
    // A persistent namespace dumps too, and its dump equals the in-memory original's content.
    let again = dump(&copy);
    let third = load(&Db::in_memory(), "third", &again);
    assert_eq!(third.len(), ns.len());
}

#[test]
fn a_restore_cut_short_by_a_crash_leaves_no_key() {
    let src = Db::in_memory();
    let ns = src.create_namespace("x", small(Profile::Crawler, false)).unwrap();
    for i in 0..20_000 {
        ns.seen(&item(i)).unwrap();
    }
    let chunks = dump(&ns);
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path()).unwrap();
        db.load_chunk("x", chunks[0].0, &chunks[0].1).unwrap();
        db.load_chunk("x", chunks[1].0, &chunks[1].1).unwrap();
        assert_eq!(db.restoring(), ["x"]);
        // Dropped without the last chunk (as a crash would leave it).
    }
    let db = Db::open(dir.path()).unwrap();
    assert!(db.namespace("x").is_none());
    assert!(db.restoring().is_empty());
    let copy = load(&db, "x", &chunks);
    assert_eq!(copy.len(), ns.len());
}

#[test]
fn bad_chunks_are_typed_errors_that_load_nothing() {
    let src = Db::in_memory();
    let ns = src.create_namespace("a", small(Profile::Crawler, false)).unwrap();
    let recorded: Vec<u64> = (0..20_000).filter(|&i| !ns.seen(&item(i)).unwrap()).collect();
    let chunks = dump(&ns);
    let other_ns = src.create_namespace("b", small(Profile::W3lib, false)).unwrap();
    other_ns.seen("https://b.example/").unwrap();
    let foreign = dump(&other_ns);

    let db = Db::in_memory();
    // A data chunk for a key with no restore: RedisBloom's "not found".
    let (iter1, data1) = &chunks[1];
    assert!(matches!(db.load_chunk("k", *iter1, data1), Err(Error::NoSuchNamespace(_))));
    // A damaged header starts nothing.
    let mut bad = chunks[0].1.clone();
    bad[30] ^= 1;
    assert!(matches!(db.load_chunk("k", ITER_HEADER, &bad), Err(Error::BadChunk { .. })));
    assert!(db.restoring().is_empty());
    // A data chunk given as a header.
    assert!(matches!(db.load_chunk("k", ITER_HEADER, data1), Err(Error::BadChunk { .. })));

    assert!(matches!(db.load_chunk("k", ITER_HEADER, &chunks[0].1), Ok(LoadStep::Started)));
    // Half loaded: not visible, cannot be created.
    assert!(db.namespace("k").is_none());
    assert!(matches!(
        db.create_namespace("k", NamespaceOptions::default()),
        Err(Error::Restoring(_))
    ));
    // Out of order: the second data chunk first.
    let (iter2, data2) = &chunks[2];
    assert!(matches!(db.load_chunk("k", *iter2, data2), Err(Error::ChunkOutOfOrder { .. })));
    // Truncated, flipped.
    assert!(matches!(
        db.load_chunk("k", *iter1, &data1[..data1.len() - 1]),
        Err(Error::BadChunk { .. })
    ));
    let mut flipped = data1.clone();
    flipped[100] ^= 0x10;
    assert!(matches!(db.load_chunk("k", *iter1, &flipped), Err(Error::BadChunk { .. })));
    // Another key's chunk; the right chunk with the wrong iterator.
    assert!(matches!(
        db.load_chunk("k", foreign[1].0, &foreign[1].1),
        Err(Error::ChunkMismatch { .. })
    ));
    assert!(matches!(
        db.load_chunk("k", iter1 + 1, data1),
        Err(Error::ChunkIteratorMismatch { given, .. }) if given == iter1 + 1
    ));
    // A header again.
    assert!(matches!(db.load_chunk("k", ITER_HEADER, &chunks[0].1), Err(Error::BadChunk { .. })));
    // After all that, the right chunks finish the restore, with nothing extra loaded.
    let copy = load_rest(&db, "k", &chunks[1..]);
    assert_eq!(copy.len(), ns.len());
    for &i in &recorded {
        assert!(copy.contains(&item(i)).unwrap());
    }
    // A header, or a data chunk, for an existing key: nothing is merged or overwritten.
    assert!(matches!(
        db.load_chunk("k", ITER_HEADER, &chunks[0].1),
        Err(Error::NamespaceExists(_))
    ));
    assert!(matches!(db.load_chunk("k", *iter1, data1), Err(Error::NamespaceExists(_))));
    assert_eq!(db.namespace("k").unwrap().len(), ns.len());
    // SCANDUMP iterators that no dump returned.
    assert!(matches!(ns.dump_chunk(-5, MIN_CHUNK_BYTES), Err(Error::InvalidIterator(-5))));
    assert!(ns.dump_chunk(1, 100).is_err(), "a chunk size below the minimum");
}

fn load_rest(db: &Db, name: &str, chunks: &[(i64, Vec<u8>)]) -> Arc<Namespace> {
    for (iter, data) in chunks {
        if let LoadStep::Finished(ns) = db.load_chunk(name, *iter, data).expect("load chunk") {
            return ns;
        }
    }
    panic!("not finished");
}

#[test]
fn dropping_a_half_loaded_key_abandons_the_restore() {
    let src = Db::in_memory();
    let ns = src.create_namespace("a", small(Profile::Crawler, false)).unwrap();
    for i in 0..20_000 {
        ns.seen(&item(i)).unwrap();
    }
    let chunks = dump(&ns);
    let db = Db::temporary(None).unwrap();
    db.load_chunk("k", chunks[0].0, &chunks[0].1).unwrap();
    db.load_chunk("k", chunks[1].0, &chunks[1].1).unwrap();
    assert!(db.drop_namespace("k").unwrap());
    assert!(db.restoring().is_empty());
    assert!(matches!(
        db.load_chunk("k", chunks[2].0, &chunks[2].1),
        Err(Error::NoSuchNamespace(_))
    ));
    // The name is free again: a new restore, or a create.
    let copy = load(&db, "k", &chunks);
    assert_eq!(copy.len(), ns.len());
}

#[test]
fn a_dump_taken_while_writes_go_on_holds_everything_there_when_it_began() {
    let src = Db::in_memory();
    let opts = NamespaceOptions {
        split: SplitPolicy { mode: SplitMode::Background, ..SplitPolicy::default() },
        ..small(Profile::Crawler, false)
    };
    let ns = src.create_namespace("live", opts).unwrap();
    let n = 20_000;
    let recorded: Vec<u64> = (0..n).filter(|&i| !ns.seen(&item(i)).unwrap()).collect();
    let writer = {
        let ns = Arc::clone(&ns);
        std::thread::spawn(move || {
            for i in n..4 * n {
                ns.seen(&item(i)).unwrap();
            }
        })
    };
    let chunks = dump(&ns);
    writer.join().unwrap();
    let copy = load(&Db::in_memory(), "copy", &chunks);
    for &i in &recorded {
        assert!(copy.contains(&item(i)).unwrap(), "item {i}, recorded before the dump, lost");
    }
}

/// A split still migrating when the dump begins has records both in its frozen leaf and in
/// its children: the dump finishes it first, so an idle namespace copies exactly, counts too.
#[test]
fn a_dump_begun_during_a_split_holds_each_fingerprint_once() {
    let opts = NamespaceOptions {
        capacity: 50_000,
        split: SplitPolicy { mode: SplitMode::Background, growth: 1, ..SplitPolicy::default() },
        ..small(Profile::Crawler, false)
    };
    for round in 0..5u64 {
        let src = Db::in_memory();
        let ns = src.create_namespace("src", opts.clone()).unwrap();
        let mut i = round << 32;
        // Feed until a split starts, then dump at once, while it migrates.
        while ns.stats().splitting_nodes == 0 {
            ns.seen_batch(&(i..i + 1_000).map(item).collect::<Vec<_>>()).unwrap();
            i += 1_000;
        }
        let chunks = dump(&ns);
        let copy = load(&Db::in_memory(), "copy", &chunks);
        assert_eq!(copy.len(), ns.len(), "round {round}: recorded counts differ");
        assert_eq!(copy.stats().kept, ns.stats().kept, "round {round}: kept counts differ");
    }
}

#[test]
fn a_counting_namespace_refuses_to_dump() {
    let db = Db::in_memory();
    let ns = db
        .create_namespace("c", NamespaceOptions { counting: true, ..NamespaceOptions::default() })
        .unwrap();
    assert!(matches!(ns.dump_chunk(0, MIN_CHUNK_BYTES), Err(Error::DumpUnsupported { .. })));
}

#[test]
fn a_leaf_larger_than_a_chunk_dumps_in_parts_from_its_file_while_it_is_written() {
    // One big leaf that never splits, its fingerprints in a file: a chunk holds part of it,
    // and the next resumes inside the file, while a writer keeps appending to it.
    let src = Db::temporary(None).unwrap();
    let opts = NamespaceOptions {
        capacity: 100_000,
        split: SplitPolicy { mode: SplitMode::Never, ..SplitPolicy::default() },
        ..small(Profile::Crawler, false)
    };
    let ns = src.create_namespace("big", opts).unwrap();
    assert_eq!(ns.stats().leaf_count, 1);
    let n = 40_000;
    for i in 0..n {
        ns.seen(&item(i)).unwrap();
    }
    let writer = {
        let ns = Arc::clone(&ns);
        std::thread::spawn(move || {
            for i in n..2 * n {
                ns.seen(&item(i)).unwrap();
            }
        })
    };
    let chunks = dump(&ns);
    writer.join().unwrap();
    assert!(chunks.len() > 5, "{} chunks", chunks.len());
    let copy = load(&Db::in_memory(), "copy", &chunks);
    for i in 0..n {
        assert!(copy.contains(&item(i)).unwrap(), "item {i} lost");
    }
    // Idle now: a second dump is exact.
    let copy = load(&Db::in_memory(), "copy2", &dump(&ns));
    assert_eq!(copy.len(), ns.len());
    for i in 0..2 * n {
        assert!(copy.contains(&item(i)).unwrap(), "item {i} lost");
    }
}

mod untrusted {
    //! Chunks and dump files are untrusted bytes: never a panic, never a partial load.

    use proptest::prelude::*;
    use urlseen_engine::dump::{Header, ITER_HEADER, MIN_CHUNK_BYTES};
    use urlseen_engine::{Db, DumpReader, NamespaceOptions};

    fn dumped() -> (Vec<u8>, i64, Vec<u8>) {
        let db = Db::in_memory();
        let ns = db.create_namespace("p", NamespaceOptions::default()).expect("create");
        for i in 0..100 {
            ns.seen(&format!("https://p.example/{i}")).expect("seen");
        }
        let header = ns.dump_chunk(0, MIN_CHUNK_BYTES).expect("header").data;
        let data = ns.dump_chunk(ITER_HEADER, MIN_CHUNK_BYTES).expect("data");
        (header, data.next, data.data)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn arbitrary_bytes_are_refused_without_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), iter in any::<i64>()) {
            let db = Db::in_memory();
            prop_assert!(Header::decode(&bytes).is_err());
            prop_assert!(db.load_chunk("k", ITER_HEADER, &bytes).is_err());
            prop_assert!(db.namespace("k").is_none() && db.restoring().is_empty());
            let (header, _, _) = dumped();
            db.load_chunk("k", ITER_HEADER, &header).unwrap();
            prop_assert!(db.load_chunk("k", iter, &bytes).is_err());
            let reader = DumpReader::new(&bytes[..]);
            if let Ok(mut reader) = reader {
                while let Ok(Some(_)) = reader.next_chunk() {}
            }
        }

        #[test]
        fn a_changed_byte_anywhere_is_refused(at in any::<prop::sample::Index>(), bit in 0u8..8) {
            let (header, next, data) = dumped();
            let db = Db::in_memory();
            let mut bad = header.clone();
            let i = at.index(bad.len());
            bad[i] ^= 1 << bit;
            prop_assert!(db.load_chunk("k", ITER_HEADER, &bad).is_err());
            db.load_chunk("k", ITER_HEADER, &header).unwrap();
            let mut bad = data.clone();
            let i = at.index(bad.len());
            bad[i] ^= 1 << bit;
            prop_assert!(db.load_chunk("k", next, &bad).is_err());
            // Nothing of it was loaded: the right chunk completes the restore, exactly.
            prop_assert!(db.load_chunk("k", next, &data).is_ok());
            prop_assert_eq!(db.namespace("k").map(|ns| ns.len()), Some(100));
        }
    }
}

#[test]
fn two_loaders_of_one_key_at_once_make_one_whole_copy() {
    let src = Db::in_memory();
    let ns = src.create_namespace("a", small(Profile::Crawler, false)).unwrap();
    let recorded: Vec<u64> = (0..30_000).filter(|&i| !ns.seen(&item(i)).unwrap()).collect();
    let chunks = Arc::new(dump(&ns));
    let db = Arc::new(Db::in_memory());
    let loaders: Vec<_> = (0..2)
        .map(|_| {
            let (db, chunks) = (Arc::clone(&db), Arc::clone(&chunks));
            std::thread::spawn(move || {
                // Each sends every chunk; a chunk the other loaded first is refused.
                chunks.iter().filter(|(iter, data)| db.load_chunk("k", *iter, data).is_ok()).count()
            })
        })
        .collect();
    let loaded: usize = loaders.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(loaded, chunks.len(), "each chunk loaded exactly once between the two");
    let copy = db.namespace("k").expect("the copy is complete");
    assert_eq!(copy.len(), ns.len());
    for &i in &recorded {
        assert!(copy.contains(&item(i)).unwrap());
    }
}
