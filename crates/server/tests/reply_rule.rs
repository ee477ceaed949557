//! No reply hides what the command did (docs/protocol.md, "What a reply says was done"): an
//! array reply of a multi-item command holds one integer (or boolean) per item and never an
//! error element; an error reply means nothing of the command was recorded. Checked through
//! redis-rs, the client that turns a reply with an error element into an error for the whole
//! reply, and byte for byte.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use std::sync::Arc;

use common::{TestServer, resp, show};
use urlseen_engine::storage::FaultyStorage;
use urlseen_engine::{Db, DbOptions, Fsync};
use urlseen_server::{App, AppConfig, Config, Frame};

const FULL: &[u8] = b"-ERR non scaling filter is full\r\n";

/// Runs `f` with a redis-rs connection to `server` (the sync client, on a blocking thread).
async fn with_redis_rs<R: Send + 'static>(
    server: &TestServer,
    query: &str,
    f: impl FnOnce(&mut redis::Connection) -> R + Send + 'static,
) -> R {
    let url = format!("redis://{}/{query}", server.addr);
    tokio::task::spawn_blocking(move || {
        let client = redis::Client::open(url).unwrap();
        let mut con = client.get_connection().unwrap();
        f(&mut con)
    })
    .await
    .unwrap()
}

fn seen(con: &mut redis::Connection, ns: &str, urls: &[&str]) -> redis::RedisResult<Vec<i64>> {
    redis::cmd("URL.SEEN").arg(ns).arg(urls).query(con)
}

/// A crawler's batch of extracted links, some of them not crawlable: redis-rs gets one integer
/// per URL, and the valid URLs are recorded, the invalid ones not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_rs_gets_an_answer_per_url_in_a_mixed_batch() {
    let server = TestServer::start_engine(Config::default()).await;
    for (ns, query) in [("resp2", ""), ("resp3", "?protocol=resp3")] {
        with_redis_rs(&server, query, move |con| {
            let links = [
                "https://a.example/",
                "/relative",
                "mailto:someone@example.com",
                "https://b.example/",
                "javascript:void(0)",
            ];
            assert_eq!(seen(con, ns, &links).unwrap(), [0, -1, -1, 0, -1], "{ns}");
            // Sent again (a retry): the valid ones were recorded, the invalid ones still say so.
            assert_eq!(seen(con, ns, &links).unwrap(), [1, -1, -1, 1, -1], "{ns}");
            let check: Vec<i64> = redis::cmd("URL.CHECK")
                .arg(ns)
                .arg(&["HTTPS://A.EXAMPLE:443/", "/relative", "https://never.example/"])
                .query(con)
                .unwrap();
            assert_eq!(check, [1, -1, 0], "{ns}");
            let count: i64 = redis::cmd("URL.INFO")
                .arg(ns)
                .query::<redis::Value>(con)
                .ok()
                .and_then(|info| info_field(&info, "count"))
                .unwrap();
            assert_eq!(count, 2, "{ns}: only the valid URLs are recorded");
        })
        .await;
    }
}

/// The `count` field of `URL.INFO`'s reply (a flat array in RESP2, a map in RESP3).
fn info_field(info: &redis::Value, name: &str) -> Option<i64> {
    let pairs: Vec<(&redis::Value, &redis::Value)> = match info {
        redis::Value::Array(flat) => {
            flat.chunks(2).filter_map(|p| Some((p.first()?, p.get(1)?))).collect()
        }
        redis::Value::Map(map) => map.iter().map(|(k, v)| (k, v)).collect(),
        _ => return None,
    };
    pairs.into_iter().find_map(|(k, v)| match (k, v) {
        (redis::Value::BulkString(k), redis::Value::Int(n)) if k == name.as_bytes() => Some(*n),
        _ => None,
    })
}

/// An error through redis-rs means nothing was recorded: a full `NONSCALING` filter refuses the
/// whole `BF.MADD`, so the items before the full point are not silently added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_rs_error_means_nothing_was_added() {
    let server = TestServer::start_engine(Config::default()).await;
    with_redis_rs(&server, "", |con| {
        let _: () = redis::cmd("BF.RESERVE")
            .arg("f")
            .arg(0.01)
            .arg(2)
            .arg("NONSCALING")
            .query(con)
            .unwrap();
        let err = redis::cmd("BF.MADD")
            .arg("f")
            .arg(&["a", "b", "c"])
            .query::<Vec<bool>>(con)
            .unwrap_err();
        assert!(err.to_string().contains("non scaling filter is full"), "{err}");
        let card: i64 = redis::cmd("BF.CARD").arg("f").query(con).unwrap();
        assert_eq!(card, 0, "a refused BF.MADD added items");
        let added: Vec<bool> =
            redis::cmd("BF.MADD").arg("f").arg(&["a", "b", "a"]).query(con).unwrap();
        assert_eq!(added, [true, true, false]);
        // A pipeline: each call's reply is its own; the invalid URL is -1 in its call only.
        let replies: Vec<Vec<i64>> = redis::pipe()
            .cmd("URL.SEEN")
            .arg("p")
            .arg("https://x.example/1")
            .cmd("URL.SEEN")
            .arg("p")
            .arg(&["/rel", "https://x.example/2"])
            .cmd("URL.SEEN")
            .arg("p")
            .arg(&["https://x.example/1", "https://x.example/2"])
            .query(con)
            .unwrap();
        assert_eq!(replies, [vec![0], vec![-1, 0], vec![1, 1]]);
    })
    .await;
}

#[tokio::test]
async fn invalid_urls_answer_minus_one_byte_for_byte() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    let mixed = ["https://a.example/", "/relative", "ftp://", "https://b.example/"];
    let mut args = vec!["URL.SEEN", "jobs"];
    args.extend(mixed);
    c.expect(&args, b"*4\r\n:0\r\n:-1\r\n:-1\r\n:0\r\n").await;
    c.expect_bytes(
        &[b"URL.SEEN", b"jobs", b"https://c.example/\xff", b"https://c.example/"],
        b"*2\r\n:-1\r\n:0\r\n",
    )
    .await;
    args[0] = "URL.CHECK";
    c.expect(&args, b"*4\r\n:1\r\n:-1\r\n:-1\r\n:1\r\n").await;
    // A namespace that does not exist still validates.
    c.expect(&["URL.CHECK", "nope", "https://a.example/", "/rel"], b"*2\r\n:0\r\n:-1\r\n").await;
    c.expect(&["URL.FORGET", "nope", "https://a.example/", "/rel"], b"*2\r\n:0\r\n:-1\r\n").await;
    c.expect(&["URL.RESERVE", "cnt", "COUNTING"], b"+OK\r\n").await;
    c.expect(&["URL.SEEN", "cnt", "https://a.example/", "/rel"], b"*2\r\n:0\r\n:-1\r\n").await;
    c.expect(
        &["URL.FORGET", "cnt", "/rel", "https://a.example/", "https://b.example/"],
        b"*3\r\n:-1\r\n:1\r\n:0\r\n",
    )
    .await;
    // A namespace that cannot forget refuses the whole command, whatever its URLs.
    c.expect(
        &["URL.FORGET", "jobs", "/rel", "https://a.example/"],
        b"-ERR this namespace cannot forget URLs: create it with URL.RESERVE <ns> EXACT COUNTING\r\n",
    )
    .await;
    c.expect(&["URL.CHECK", "jobs", "https://a.example/"], b"*1\r\n:1\r\n").await;
    // RESP3: the same integers.
    c.send_cmd(&["HELLO", "3"]).await;
    c.read_reply().await;
    c.expect(&["URL.SEEN", "jobs", "/rel", "https://a.example/"], b"*2\r\n:-1\r\n:1\r\n").await;
}

/// Pipelined `URL.SEEN` calls run as one engine batch; a bad call (an invalid URL, a wrong
/// arity, a key that cannot be a namespace, a call a full filter refuses) answers only for
/// itself, and its neighbours get what they would have got one by one.
#[tokio::test]
async fn a_bad_pipelined_call_does_not_touch_its_neighbours() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    let calls: &[&[&[u8]]] = &[
        &[b"URL.SEEN", b"p", b"https://u.example/1"],
        &[b"URL.SEEN", b"p", b"/rel", b"https://u.example/2"],
        &[b"URL.SEEN", b"p"],
        &[b"URL.SEEN", b"\xff", b"https://u.example/1"],
        &[b"URL.SEEN", b"p", b"https://u.example/2", b"https://u.example/3"],
    ];
    let pipeline: Vec<u8> = calls.iter().flat_map(|args| resp(args)).collect();
    c.send(&pipeline).await;
    let want = b"*1\r\n:0\r\n*2\r\n:-1\r\n:0\r\n\
        -ERR wrong number of arguments for 'url.seen' command\r\n\
        -ERR invalid namespace name: it is not valid UTF-8\r\n*2\r\n:1\r\n:0\r\n";
    assert_eq!(show(&c.read_frames(5).await), show(want));

    // On a non-scaling filter with room for one more item, the middle call brings three: it is
    // refused, and the calls around it are answered as they would be alone.
    c.expect(&["BF.RESERVE", "small", "0.01", "2", "NONSCALING"], b"+OK\r\n").await;
    let calls: &[&[&[u8]]] = &[
        &[b"URL.SEEN", b"small", b"a"],
        &[b"URL.SEEN", b"small", b"b", b"c", b"d"],
        &[b"URL.SEEN", b"small", b"b"],
        &[b"URL.SEEN", b"small", b"a", b"b"],
        &[b"URL.SEEN", b"small", b"e"],
    ];
    let pipeline: Vec<u8> = calls.iter().flat_map(|args| resp(args)).collect();
    c.send(&pipeline).await;
    let want = [&b"*1\r\n:0\r\n"[..], FULL, b"*1\r\n:0\r\n", b"*2\r\n:1\r\n:1\r\n", FULL].concat();
    assert_eq!(show(&c.read_frames(5).await), show(&want));
    c.expect(
        &["BF.MEXISTS", "small", "a", "b", "c", "d", "e"],
        b"*5\r\n:1\r\n:1\r\n:0\r\n:0\r\n:0\r\n",
    )
    .await;
}

/// A durable write that fails makes its namespace refuse later writes (`MISCONF`) until a
/// write succeeds again (retried at most once a second), so no retry is answered "seen" on the
/// strength of the failed write meanwhile, and after a restart everything acknowledged is
/// there. Under `--fsync always` a `URL.SEEN` is recorded before its reply, so the write that
/// fails answers `MISCONF` itself, saying its outcome is unknown (a record whose fsync failed
/// may or may not be on disk), as a `NONSCALING` filter's does. Once the disk is healthy
/// again, writes resume without a restart.
#[tokio::test]
async fn a_failed_durable_write_says_its_outcome_is_unknown_and_refuses_later_writes() {
    let dir = tempfile::tempdir().unwrap();
    let storage = FaultyStorage::new();
    let options = DbOptions {
        fsync: Fsync::Always,
        storage: Arc::new(storage.clone()),
        ..DbOptions::default()
    };
    let app = Arc::new(App::new(Db::open_with(dir.path(), options).unwrap(), AppConfig::default()));
    let mut server = TestServer::start_app(Config::default(), app.clone()).await;
    let mut c = server.connect().await;
    // A namespace with a directory of its own (a small one lives in the data directory's
    // journal, which every small namespace shares: its fsync failure is `j`'s, below).
    c.expect(&["URL.RESERVE", "d", "CAPACITY", "100000"], b"+OK\r\n").await;
    c.expect(&["URL.SEEN", "j", "https://a.example/"], b"*1\r\n:0\r\n").await;
    // Under `always` this reply means a.example's record is on the disk.
    c.expect(&["URL.SEEN", "d", "https://a.example/"], b"*1\r\n:0\r\n").await;
    c.expect(&["BF.RESERVE", "n", "0.01", "100", "NONSCALING"], b"+OK\r\n").await;
    storage.fail_syncs(true);
    // The record of b.example fails to sync (its host's entry in the hosts file first, which
    // is synced before the log: docs/forget.md): no "new" is sent for it.
    let failed = c.call(&["URL.SEEN", "d", "https://b.example/", "/rel"]).await;
    let Frame::Error(failed) = failed else { panic!("not an error: {failed:?}") };
    let failed = String::from_utf8_lossy(&failed).into_owned();
    assert!(failed.starts_with("MISCONF write failed: nothing of this command is acknowledged (its items may or may not be recorded)"), "{failed}");
    let refused = c.call(&["URL.SEEN", "d", "https://c.example/"]).await;
    let Frame::Error(refused) = refused else { panic!("not an error: {refused:?}") };
    let refused = String::from_utf8_lossy(&refused).into_owned();
    assert!(refused.starts_with("MISCONF writes refused after a failed write"), "{refused}");
    // A write that is recorded before its reply (a NONSCALING filter) fails with its outcome
    // unknown, in its own namespace.
    let failed = c.call(&["BF.ADD", "n", "x"]).await;
    let Frame::Error(failed) = failed else { panic!("not an error: {failed:?}") };
    let failed = String::from_utf8_lossy(&failed).into_owned();
    assert!(failed.starts_with("MISCONF write failed: nothing of this command is acknowledged (its items may or may not be recorded)"), "{failed}");
    let failed = c.call(&["URL.SEEN", "j", "https://b.example/"]).await;
    assert!(
        matches!(&failed, Frame::Error(e) if e.starts_with(b"MISCONF write failed")),
        "{failed:?}"
    );
    storage.fail_syncs(false);
    // The retry is refused too, not answered "seen"; so is every other write.
    for args in [
        &["URL.SEEN", "d", "https://b.example/"][..],
        &["URL.SEEN", "d", "https://z.example/"],
        &["BF.ADD", "n", "x"],
    ] {
        let retry = c.call(args).await;
        assert!(matches!(&retry, Frame::Error(e) if e.starts_with(b"MISCONF ")), "{retry:?}");
    }
    // A second later the namespaces try again, and the disk is healthy. `d`'s failure was its
    // hosts file's sync (a collision guard, docs/forget.md): it recovers in place and writes
    // go on. `n`'s was its log's own fsync, which is never retried in place (the kernel may
    // have dropped the pages it failed to write): it refuses writes until a reopen.
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    c.expect(&["URL.SEEN", "d", "https://y.example/"], b"*1\r\n:0\r\n").await;
    let refused = c.call(&["BF.ADD", "n", "y"]).await;
    assert!(
        matches!(&refused, Frame::Error(e) if e.starts_with(b"MISCONF ")
            && String::from_utf8_lossy(e).contains("reopened")),
        "{refused:?}"
    );
    // The small namespaces' journal failed its own fsync (`j`'s write below): it refuses
    // writes until a reopen, as Redis stops taking writes when its append-only file cannot
    // be synced.
    let refused = c.call(&["URL.SEEN", "j", "https://y.example/"]).await;
    assert!(
        matches!(&refused, Frame::Error(e) if e.starts_with(b"MISCONF ")
            && String::from_utf8_lossy(e).contains("reopened")),
        "{refused:?}"
    );
    drop(c);
    server.shutdown().await;
    drop(server);
    drop(app);
    let db = Db::open(dir.path()).unwrap();
    let ns = db.namespace("d").unwrap();
    assert!(ns.contains("https://a.example/").unwrap(), "an acknowledged URL was lost");
    assert!(ns.contains("https://y.example/").unwrap(), "a URL recorded after recovery was lost");
    assert!(!ns.contains("https://z.example/").unwrap(), "a refused write was kept");
    let j = db.namespace("j").unwrap();
    assert!(j.contains("https://a.example/").unwrap(), "an acknowledged URL was lost");
    assert!(j.seen("https://y.example/").is_ok_and(|seen| !seen), "writes go on after a reopen");
}

/// redis-rs' transaction path, `pipe().atomic()` (MULTI … EXEC), works as against Redis: the
/// queued commands' replies come back as one typed tuple, in both protocols.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_rs_atomic_pipelines_run_as_transactions() {
    let server = TestServer::start_engine(Config::default()).await;
    for (ns, query) in [("tx2", ""), ("tx3", "?protocol=resp3")] {
        with_redis_rs(&server, query, move |con| {
            let bf = format!("{ns}-bf");
            let (first, again, added, exists): (Vec<i64>, Vec<i64>, bool, bool) = redis::pipe()
                .atomic()
                .cmd("URL.SEEN")
                .arg(ns)
                .arg(&["https://a.example/", "/relative"])
                .cmd("URL.SEEN")
                .arg(ns)
                .arg("https://a.example/")
                .cmd("BF.ADD")
                .arg(&bf)
                .arg("x")
                .cmd("BF.EXISTS")
                .arg(&bf)
                .arg("x")
                .query(con)
                .unwrap();
            assert_eq!((first, again, added, exists), (vec![0, -1], vec![1], true, true), "{ns}");
        })
        .await;
    }
}
