//! `BF.SCANDUMP` / `BF.LOADCHUNK`: a copy into another key and into another server knows every
//! item; URL namespaces copy with their profile; RedisBloom's error strings; bad chunks load
//! nothing.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::{Client, TestServer, resp};
use urlseen_engine::Db;
use urlseen_engine::dump::MIN_CHUNK_BYTES;
use urlseen_server::{App, AppConfig, Config, Frame};

/// A server whose dump chunks are small, so a few thousand items make many chunks.
async fn server() -> TestServer {
    let config = AppConfig { dump_chunk_bytes: MIN_CHUNK_BYTES, ..AppConfig::default() };
    TestServer::start_app(Config::default(), Arc::new(App::new(Db::in_memory(), config))).await
}

async fn call(c: &mut Client, args: &[&[u8]]) -> Frame {
    c.send(&resp(args)).await;
    c.read_frame().await
}

/// Adds `items` to `key` with `BF.MADD`, a thousand at a time.
async fn madd(c: &mut Client, key: &str, items: &[String]) {
    for batch in items.chunks(1000) {
        let mut args = vec!["BF.MADD", key];
        args.extend(batch.iter().map(String::as_str));
        c.call(&args).await;
    }
}

/// Asserts that `key` has every one of `items` (`BF.MEXISTS`, a thousand at a time).
async fn assert_has_all(c: &mut Client, key: &str, items: &[String], what: &str) {
    for batch in items.chunks(1000) {
        let mut args = vec!["BF.MEXISTS", key];
        args.extend(batch.iter().map(String::as_str));
        let Frame::Array(found) = c.call(&args).await else { panic!() };
        assert!(found.iter().all(|f| *f == Frame::Integer(1)), "{what} in {key}");
    }
}

/// Every `(iterator, chunk)` of `key`'s dump, by the iterator protocol.
async fn scandump(c: &mut Client, key: &str) -> Vec<(i64, Bytes)> {
    let mut chunks = Vec::new();
    let mut iter = 0i64;
    loop {
        let reply = call(c, &[b"BF.SCANDUMP", key.as_bytes(), iter.to_string().as_bytes()]).await;
        let Frame::Array(parts) = reply else { panic!("{reply:?}") };
        let [Frame::Integer(next), Frame::Bulk(data)] = &parts[..] else { panic!("{parts:?}") };
        if *next == 0 {
            assert!(data.is_empty());
            return chunks;
        }
        chunks.push((*next, data.clone()));
        iter = *next;
    }
}

async fn loadchunks(c: &mut Client, key: &str, chunks: &[(i64, Bytes)]) {
    for (iter, data) in chunks {
        let reply =
            call(c, &[b"BF.LOADCHUNK", key.as_bytes(), iter.to_string().as_bytes(), data]).await;
        assert_eq!(reply, Frame::ok(), "chunk {iter}");
    }
}

#[tokio::test]
async fn a_filter_copied_into_another_key_and_another_server_knows_every_item() {
    let a = server().await;
    let mut c = a.connect().await;
    c.expect(&["BF.RESERVE", "bf", "0.01", "1000", "EXPANSION", "2"], b"+OK\r\n").await;
    let items: Vec<String> = (0..20_000).map(|i| format!("item-{i}")).collect();
    madd(&mut c, "bf", &items).await;
    let card = c.call(&["BF.CARD", "bf"]).await;
    let chunks = scandump(&mut c, "bf").await;
    assert!(chunks.len() > 3, "{} chunks", chunks.len());
    assert!(chunks.iter().all(|(_, d)| d.len() <= MIN_CHUNK_BYTES));

    let b = server().await;
    let mut other = b.connect().await;
    for (client, key) in [(&mut c, "copy"), (&mut other, "bf")] {
        // Half loaded: the key does not exist yet, and cannot be created.
        loadchunks(client, key, &chunks[..2]).await;
        client.expect(&["EXISTS", key], b":0\r\n").await;
        let err = client.call(&["BF.ADD", key, "x"]).await;
        assert!(
            matches!(&err, Frame::Error(e) if String::from_utf8_lossy(e).contains("being restored")),
            "{err:?}"
        );
        loadchunks(client, key, &chunks[2..]).await;
        client.expect(&["EXISTS", key], b":1\r\n").await;
        client.expect(&["TYPE", key], b"+MBbloom--\r\n").await;
        assert_eq!(client.call(&["BF.CARD", key]).await, card);
        assert_has_all(client, key, &items, "a false negative").await;
        client.expect(&["BF.INFO", key, "EXPANSION"], b"*1\r\n:2\r\n").await;
        // It keeps growing.
        let more: Vec<String> = (0..20_000).map(|i| format!("more-{i}")).collect();
        madd(client, key, &more).await;
        assert_has_all(client, key, &items, "lost after growing").await;
    }
}

#[tokio::test]
async fn a_url_namespace_copies_with_its_profile() {
    let s = server().await;
    let mut c = s.connect().await;
    c.expect(&["URL.RESERVE", "urls", "CAPACITY", "1000", "PROFILE", "w3lib"], b"+OK\r\n").await;
    let urls: Vec<String> =
        (0..5_000).map(|i| format!("https://example.com/p?b={i}&a=1")).collect();
    // What the namespace recorded: the URLs answered new (one answered seen on a false
    // positive is not recorded, docs/durability.md).
    let mut recorded = Vec::new();
    for batch in urls.chunks(500) {
        let mut args = vec!["URL.SEEN", "urls"];
        args.extend(batch.iter().map(String::as_str));
        let Frame::Array(answers) = c.call(&args).await else { panic!() };
        recorded.extend(
            batch.iter().zip(&answers).filter(|p| *p.1 == Frame::Integer(0)).map(|p| p.0.clone()),
        );
    }
    assert!(recorded.len() > 4_900, "{} recorded", recorded.len());
    let chunks = scandump(&mut c, "urls").await;
    loadchunks(&mut c, "urls2", &chunks).await;
    c.expect(&["TYPE", "urls2"], b"+urlseen\r\n").await;
    // w3lib sorts the query: the other spelling is known, in the copy as in the original.
    let Frame::Array(found) = c
        .call(&[
            "URL.CHECK",
            "urls2",
            "https://example.com/p?a=1&b=4321",
            "https://example.com/new",
        ])
        .await
    else {
        panic!()
    };
    assert_eq!(found[0], Frame::Integer(1));
    let info = c.call(&["URL.INFO", "urls2"]).await;
    assert!(format!("{info:?}").contains("w3lib"), "{info:?}");
    for batch in recorded.chunks(500) {
        let mut args = vec!["URL.CHECK", "urls2"];
        args.extend(batch.iter().map(String::as_str));
        let Frame::Array(found) = c.call(&args).await else { panic!() };
        assert!(found.iter().all(|f| *f == Frame::Integer(1)), "a false negative");
    }
}

#[tokio::test]
async fn redisbloom_errors_and_bad_chunks() {
    let s = server().await;
    let mut c = s.connect().await;
    c.expect(&["BF.SCANDUMP", "nokey", "0"], b"-ERR not found\r\n").await;
    c.expect(
        &["BF.SCANDUMP", "k"],
        b"-ERR wrong number of arguments for 'bf.scandump' command\r\n",
    )
    .await;
    c.expect(
        &["BF.LOADCHUNK", "k", "1"],
        b"-ERR wrong number of arguments for 'bf.loadchunk' command\r\n",
    )
    .await;
    let items: Vec<String> = (0..20_000).map(|i| format!("i{i}")).collect();
    madd(&mut c, "k", &items).await;
    c.expect(&["BF.SCANDUMP", "k", "abc"], b"-Second argument must be numeric\r\n").await;
    c.expect(&["BF.LOADCHUNK", "k", "abc", "x"], b"-ERR Second argument must be numeric\r\n").await;
    let chunks = scandump(&mut c, "k").await;
    assert!(chunks.len() >= 3, "{} chunks", chunks.len());
    let (h_iter, header) = &chunks[0];
    let (d_iter, data) = &chunks[1];
    let h_iter = h_iter.to_string();
    let d_iter = d_iter.to_string();
    // A data chunk for a key with no restore; a header to an existing key (RedisBloom reads it
    // as a data chunk whose iterator is below its length).
    c.expect_bytes(&[b"BF.LOADCHUNK", b"new", d_iter.as_bytes(), data], b"-ERR not found\r\n")
        .await;
    c.expect_bytes(
        &[b"BF.LOADCHUNK", b"k", h_iter.as_bytes(), header],
        b"-ERR received bad data\r\n",
    )
    .await;
    // A damaged or truncated header starts nothing.
    let mut bad = header.to_vec();
    bad[40] ^= 1;
    c.expect_bytes(&[b"BF.LOADCHUNK", b"new", b"1", &bad], b"-ERR received bad data\r\n").await;
    c.expect_bytes(&[b"BF.LOADCHUNK", b"new", b"1", &header[..10]], b"-ERR received bad data\r\n")
        .await;
    c.expect_bytes(&[b"BF.LOADCHUNK", b"new", b"1", b"garbage"], b"-ERR received bad data\r\n")
        .await;
    c.expect(&["EXISTS", "new"], b":0\r\n").await;
    // Begin; then a damaged chunk and the right chunk with another iterator are refused.
    c.expect_bytes(&[b"BF.LOADCHUNK", b"new", b"1", header], b"+OK\r\n").await;
    let mut bad = data.to_vec();
    bad[60] ^= 1;
    c.expect_bytes(
        &[b"BF.LOADCHUNK", b"new", d_iter.as_bytes(), &bad],
        b"-ERR received bad data\r\n",
    )
    .await;
    c.expect_bytes(
        &[b"BF.LOADCHUNK", b"new", b"12345", data],
        b"-ERR invalid offset - no link found\r\n",
    )
    .await;
    {
        let (later_iter, later) = &chunks[2];
        c.expect_bytes(
            &[b"BF.LOADCHUNK", b"new", later_iter.to_string().as_bytes(), later],
            b"-ERR invalid offset - no link found\r\n",
        )
        .await;
    }
    // The restore goes on with the right chunks, and the copy is whole.
    loadchunks(&mut c, "new", &chunks[1..]).await;
    assert_eq!(c.call(&["BF.CARD", "new"]).await, c.call(&["BF.CARD", "k"]).await);
    // DEL abandons a restore half way.
    loadchunks(&mut c, "half", &chunks[..1]).await;
    c.expect(&["DEL", "half"], b":1\r\n").await;
    c.expect_bytes(&[b"BF.LOADCHUNK", b"half", d_iter.as_bytes(), data], b"-ERR not found\r\n")
        .await;
}

/// RedisBloom's replies to the bad `BF.LOADCHUNK` calls of its own `test_scandump_invalid`
/// and `test_scandump_load_small` (`tests/flow/test_overall.py`), byte for byte, and to the
/// bad chunks of a restore under way; none changes what a key holds.
#[tokio::test]
async fn bad_loadchunks_get_redisbloom_replies_and_change_nothing() {
    const BAD_DATA: &[u8] = b"-ERR received bad data\r\n";
    const BAD_OFFSET: &[u8] = b"-ERR invalid offset - no link found\r\n";
    let s = server().await;
    let mut c = s.connect().await;
    c.expect(&["BF.RESERVE", "bf", "0.1", "4"], b"+OK\r\n").await;
    c.expect(&["BF.ADD", "bf", "x"], b":1\r\n").await;
    let items: Vec<String> = (0..5_000).map(|i| format!("i{i}")).collect();
    let mut args = vec!["BF.MADD", "src"];
    args.extend(items.iter().map(String::as_str));
    c.call(&args).await;
    let chunks = scandump(&mut c, "src").await;
    let (h_iter, header) = &chunks[0];
    let (d_iter, data) = &chunks[1];
    let (h_iter, d_iter) = (h_iter.to_string(), d_iter.to_string());

    // An existing key: RedisBloom's first check (`iter <= 0 || iter < len`) gives bad data,
    // and everything past it "no link found" (a whole namespace takes no more chunks).
    let existing: [(&[u8], &[u8], &[u8]); 9] = [
        (b"-9223372036854775808", b"1", BAD_DATA),
        (b"922337203685477588", b"1", BAD_OFFSET),
        (b"4", b"kdoasdksaodsadsadsadsadsadadsadadsdad", BAD_DATA),
        (b"4", b"abcd", BAD_OFFSET),
        (b"0", b"", BAD_DATA),
        (b"-1", b"x", BAD_DATA),
        (b"1", b"x", BAD_DATA),
        (h_iter.as_bytes(), header, BAD_DATA),
        (d_iter.as_bytes(), data, BAD_OFFSET),
    ];
    for (iter, chunk, reply) in existing {
        c.expect_bytes(&[b"BF.LOADCHUNK", b"bf", iter, chunk], reply).await;
    }
    c.expect(&["BF.CARD", "bf"], b":1\r\n").await;
    c.expect(&["BF.EXISTS", "bf", "x"], b":1\r\n").await;
    c.expect(&["BF.ADD", "bf", "y"], b":1\r\n").await;

    // No such key: a data chunk (any iterator but 1) is "not found", a bad header bad data.
    for iter in [&b"0"[..], b"-1", b"5", d_iter.as_bytes()] {
        c.expect_bytes(&[b"BF.LOADCHUNK", b"nokey", iter, data], b"-ERR not found\r\n").await;
    }
    c.expect_bytes(&[b"BF.LOADCHUNK", b"nokey", b"1", b"abcd"], BAD_DATA).await;
    c.expect_bytes(&[b"BF.LOADCHUNK", b"nokey", b"1", data], BAD_DATA).await;
    c.expect(&["EXISTS", "nokey"], b":0\r\n").await;

    // A restore under way: another key's chunk, a header again, garbage are bad data; a chunk
    // out of order or with another iterator has no place.
    c.expect(&["BF.RESERVE", "other", "0.001", "50000"], b"+OK\r\n").await;
    c.expect(&["BF.ADD", "other", "o"], b":1\r\n").await;
    let foreign = scandump(&mut c, "other").await;
    c.expect_bytes(&[b"BF.LOADCHUNK", b"copy", b"1", header], b"+OK\r\n").await;
    let (f_iter, f_data) = &foreign[1];
    c.expect_bytes(&[b"BF.LOADCHUNK", b"copy", f_iter.to_string().as_bytes(), f_data], BAD_DATA)
        .await;
    c.expect_bytes(&[b"BF.LOADCHUNK", b"copy", b"1", header], BAD_DATA).await;
    c.expect_bytes(&[b"BF.LOADCHUNK", b"copy", d_iter.as_bytes(), b"abcd"], BAD_DATA).await;
    c.expect_bytes(&[b"BF.LOADCHUNK", b"copy", b"7", data], BAD_OFFSET).await;
    if let Some((later_iter, later)) = chunks.get(2) {
        c.expect_bytes(
            &[b"BF.LOADCHUNK", b"copy", later_iter.to_string().as_bytes(), later],
            BAD_OFFSET,
        )
        .await;
    }
    // The right chunks still finish it, whole.
    loadchunks(&mut c, "copy", &chunks[1..]).await;
    assert_eq!(c.call(&["BF.CARD", "copy"]).await, c.call(&["BF.CARD", "src"]).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loaded_key_survives_a_restart_with_data() {
    let src = server().await;
    let mut c = src.connect().await;
    let items: Vec<String> = (0..20_000).map(|i| format!("i{i}")).collect();
    madd(&mut c, "k", &items).await;
    let card = c.call(&["BF.CARD", "k"]).await;
    let chunks = scandump(&mut c, "k").await;

    let dir = tempfile::tempdir().unwrap();
    {
        let app = Arc::new(App::new(Db::open(dir.path()).unwrap(), AppConfig::default()));
        let mut server = TestServer::start_app(Config::default(), Arc::clone(&app)).await;
        let mut d = server.connect().await;
        loadchunks(&mut d, "copy", &chunks).await;
        // And one left half loaded: it is gone after the restart.
        loadchunks(&mut d, "half", &chunks[..2]).await;
        drop(d);
        server.shutdown().await;
    }
    let app = Arc::new(App::new(Db::open(dir.path()).unwrap(), AppConfig::default()));
    let server = TestServer::start_app(Config::default(), app).await;
    let mut d = server.connect().await;
    assert_eq!(d.call(&["BF.CARD", "copy"]).await, card);
    d.expect(&["EXISTS", "half"], b":0\r\n").await;
    assert_has_all(&mut d, "copy", &items, "lost after a restart").await;
}

/// A client of a pool writes on one connection and, with the reply in hand, reads on another.
/// The write's "new" answers are recorded once the reply is delivered (`--fsync everysec`),
/// so the read may come first: `BF.MEXISTS` must find them in flight, and `BF.SCANDUMP` must
/// wait for their records, or the copy lacks what the client was told was added (the
/// redis-py suite's dump loop lost a third of its items this way on a loaded machine).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_on_another_connection_right_after_a_write_finds_it() {
    let s = TestServer::start_engine(Config::default()).await;
    let (mut writer, mut reader) = (s.connect().await, s.connect().await);
    for run in 0..40 {
        let (key, copy) = (format!("dump{run}"), format!("copy{run}"));
        writer.expect(&["BF.RESERVE", &key, "0.01", "100", "EXPANSION", "2"], b"+OK\r\n").await;
        let items: Vec<String> = (0..3000).map(|i| format!("r{run}-{i}")).collect();
        let mut args = vec!["BF.MADD", key.as_str()];
        args.extend(items.iter().map(String::as_str));
        let Frame::Array(added) = writer.call(&args).await else { panic!() };
        assert!(added.iter().all(|a| *a == Frame::Integer(1)), "run {run}: all new");
        args[0] = "BF.MEXISTS";
        let Frame::Array(found) = reader.call(&args).await else { panic!() };
        let missing = found.iter().filter(|f| **f != Frame::Integer(1)).count();
        assert_eq!(missing, 0, "run {run}: read right after the write");
        let chunks = scandump(&mut reader, &key).await;
        loadchunks(&mut reader, &copy, &chunks).await;
        args[1] = copy.as_str();
        let Frame::Array(found) = reader.call(&args).await else { panic!() };
        let missing = found.iter().filter(|f| **f != Frame::Integer(1)).count();
        assert_eq!(missing, 0, "run {run}: the copy of a dump taken right after the write");
    }
}

/// A dump pipelined behind an add on the same connection: the add's "new" answers are recorded
/// once the replies (the dump's among them) are delivered, so the dump cannot wait for them;
/// its first data chunk carries them after a moment's wait (a second), not the 10 s of a stall.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dump_pipelined_behind_an_add_holds_it_without_stalling() {
    // Small chunks and a leaf larger than one: the answers in flight share the first chunk
    // with a part of that leaf.
    let s = server().await;
    let mut c = s.connect().await;
    c.expect(&["BF.RESERVE", "k", "0.01", "1000000", "EXPANSION", "2"], b"+OK\r\n").await;
    let items: Vec<String> = (0..20_000).map(|i| format!("item-{i}")).collect();
    madd(&mut c, "k", &items).await;
    let started = std::time::Instant::now();
    let mut batch = resp(&[b"BF.ADD", b"k", b"x"]);
    batch.extend_from_slice(&resp(&[b"BF.SCANDUMP", b"k", b"0"]));
    batch.extend_from_slice(&resp(&[b"BF.SCANDUMP", b"k", b"1"]));
    c.send(&batch).await;
    assert_eq!(c.read_frame().await, Frame::Integer(1));
    let mut chunks = Vec::new();
    for _ in 0..2 {
        let Frame::Array(parts) = c.read_frame().await else { panic!() };
        let [Frame::Integer(next), Frame::Bulk(data)] = &parts[..] else { panic!("{parts:?}") };
        chunks.push((*next, data.clone()));
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    // The rest of the dump, each iterator past the one before, then a copy that knows it all.
    let mut iter = chunks.last().unwrap().0;
    assert!(iter > 1, "the first data chunk must move the walk on: next {iter}");
    while iter != 0 {
        let reply = call(&mut c, &[b"BF.SCANDUMP", b"k", iter.to_string().as_bytes()]).await;
        let Frame::Array(parts) = reply else { panic!() };
        let [Frame::Integer(next), Frame::Bulk(data)] = &parts[..] else { panic!() };
        if *next != 0 {
            chunks.push((*next, data.clone()));
        }
        iter = *next;
    }
    loadchunks(&mut c, "copy", &chunks).await;
    c.expect(&["BF.EXISTS", "copy", "x"], b":1\r\n").await;
    // x was in flight when the first chunk took it, and recorded once the pipeline's replies
    // were delivered, before the walk passed its leaf or after: in the copy once or twice.
    let card = c.call(&["BF.CARD", "copy"]).await;
    assert!(matches!(card, Frame::Integer(20_001 | 20_002)), "{card:?}");
    assert_has_all(&mut c, "copy", &items, "a false negative").await;
}
