//! "Record only what you answer": a URL answered "new" is recorded once its reply is
//! delivered. A client that leaves before its replies are written has nothing recorded (its
//! URLs are new again); within one pipeline, a URL answered "new" is already seen and counted.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use std::sync::Arc;

use common::{TestServer, resp};
use urlseen_engine::{Db, DbOptions, Fsync};
use urlseen_server::{App, AppConfig, Config, Frame};

fn urls(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("https://example.com/{prefix}/{i}")).collect()
}

/// A delivered answer is recorded, with the fsync policy's durability: after a restart too.
/// (A client gone before its replies, which has nothing recorded, is tested on an in-process
/// stream in `server.rs`, where when the client leaves is not left to the scheduler.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivered_answer_is_recorded_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), DbOptions { fsync: Fsync::Always, ..DbOptions::default() })
        .unwrap();
    let mut server =
        TestServer::start_app(Config::default(), Arc::new(App::new(db, AppConfig::default())))
            .await;
    let mut c = server.connect().await;
    let batch = urls("kept", 200);
    let mut args = vec!["URL.SEEN", "ns"];
    args.extend(batch.iter().map(String::as_str));
    let Frame::Array(answers) = c.call(&args).await else { panic!() };
    assert!(answers.iter().all(|f| *f == Frame::Integer(0)));
    let mut args = vec!["BF.MADD", "bf"];
    args.extend(batch.iter().map(String::as_str));
    let Frame::Array(answers) = c.call(&args).await else { panic!() };
    assert!(answers.iter().all(|f| *f == Frame::Integer(1)));
    // One more round trip before leaving: a reply is committed after it is written, and a
    // client that closes at once may be found gone first (then, rightly, nothing of it is
    // recorded: 2 runs in 5 on a busy machine failed here without this).
    c.expect(&["PING"], b"+PONG\r\n").await;
    drop(c);
    server.shutdown().await;
    let db = Db::open(dir.path()).unwrap();
    for name in ["ns", "bf"] {
        let ns = db.namespace(name).unwrap();
        assert_eq!(ns.len(), 200, "{name}");
    }
    let ns = db.namespace("ns").unwrap();
    assert!(ns.contains_batch(&batch).unwrap().iter().all(|&s| s), "a delivered answer lost");
}

/// One-shot clients (`redis-cli URL.SEEN …`): each connects, asks once, reads its reply and
/// closes at once. Every answer they read counts: all are recorded, after a restart too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_clients_have_what_they_read_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), DbOptions { fsync: Fsync::Always, ..DbOptions::default() })
        .unwrap();
    let mut server =
        TestServer::start_app(Config::default(), Arc::new(App::new(db, AppConfig::default())))
            .await;
    let batch = urls("oneshot", 200);
    for url in &batch {
        let mut c = server.connect().await;
        c.expect(&["URL.SEEN", "ns", url], b"*1\r\n:0\r\n").await;
        drop(c);
    }
    server.shutdown().await;
    let db = Db::open(dir.path()).unwrap();
    let ns = db.namespace("ns").unwrap();
    let held = ns.contains_batch(&batch).unwrap().iter().filter(|&&s| s).count();
    assert_eq!(held, batch.len(), "answers read by one-shot clients were not recorded");
}

#[tokio::test]
async fn within_one_pipeline_a_url_answered_new_is_seen_and_counted() {
    let server = TestServer::start_app(Config::default(), Arc::new(App::in_memory())).await;
    let mut c = server.connect().await;
    let mut request = Vec::new();
    request.extend(resp(&[b"URL.SEEN", b"p", b"https://example.com/a"]));
    request.extend(resp(&[b"URL.CHECK", b"p", b"https://example.com/a"]));
    request.extend(resp(&[b"URL.SEEN", b"p", b"https://example.com/a"]));
    request.extend(resp(&[b"BF.ADD", b"bf", b"x"]));
    request.extend(resp(&[b"BF.EXISTS", b"bf", b"x"]));
    request.extend(resp(&[b"BF.CARD", b"bf"]));
    request.extend(resp(&[b"BF.ADD", b"bf", b"x"]));
    c.send(&request).await;
    let replies: Vec<Frame> = {
        let mut v = Vec::new();
        for _ in 0..7 {
            v.push(c.read_frame().await);
        }
        v
    };
    let one = |i: i64| Frame::Array(vec![Frame::Integer(i)]);
    assert_eq!(replies[0], one(0));
    assert_eq!(replies[1], one(1));
    assert_eq!(replies[2], one(1));
    assert_eq!(replies[3], Frame::Integer(1));
    assert_eq!(replies[4], Frame::Integer(1));
    assert_eq!(replies[5], Frame::Integer(1));
    assert_eq!(replies[6], Frame::Integer(0));
    // And once delivered, recorded.
    c.expect(&["BF.CARD", "bf"], b":1\r\n").await;
    c.expect(&["URL.CHECK", "p", "https://example.com/a"], b"*1\r\n:1\r\n").await;
}

/// Under `--fsync everysec` a reply is written before its batch is recorded: a batch that then
/// cannot be written (a full disk) was answered "new" and is not recorded. That is counted
/// (`INFO stats` `unrecorded_answers`, one per URL), never silent; and under `always` the same
/// failure answers `MISCONF` instead of "new", with nothing counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivered_answer_that_could_not_be_recorded_is_counted() {
    use urlseen_engine::storage::FaultyStorage;
    for (fsync, unrecorded) in [(Fsync::EverySec, 2), (Fsync::Always, 0)] {
        let dir = tempfile::tempdir().unwrap();
        let storage = FaultyStorage::new();
        let options =
            DbOptions { fsync, storage: Arc::new(storage.clone()), ..DbOptions::default() };
        let db = Db::open_with(dir.path(), options).unwrap();
        let server =
            TestServer::start_app(Config::default(), Arc::new(App::new(db, AppConfig::default())))
                .await;
        let mut c = server.connect().await;
        c.expect(&["URL.SEEN", "ns", "https://a.example/"], b"*1\r\n:0\r\n").await;
        // a.example's commit runs after its reply is written, before the next command is
        // read: once PING is answered it is done, and the disk can fill.
        c.expect(&["PING"], b"+PONG\r\n").await;
        storage.disk_full_after(0);
        let reply = c.call(&["URL.SEEN", "ns", "https://b.example/", "https://c.example/"]).await;
        match fsync {
            Fsync::Always => {
                assert!(
                    matches!(&reply, Frame::Error(e) if e.starts_with(b"MISCONF ")),
                    "{reply:?}"
                )
            }
            _ => assert_eq!(reply, Frame::Array(vec![Frame::Integer(0), Frame::Integer(0)])),
        }
        // The commit runs once the reply is written, before the next command is read.
        c.expect(&["PING"], b"+PONG\r\n").await;
        let Frame::Bulk(info) = c.call(&["INFO", "stats"]).await else { panic!() };
        let info = String::from_utf8_lossy(&info).into_owned();
        assert!(info.contains(&format!("unrecorded_answers:{unrecorded}\r\n")), "{fsync}: {info}");
    }
}
