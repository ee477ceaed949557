//! `serve --redis` with recrawl windows: `URL.RESERVE … RECRAWL`, `URL.SEEN`, `URL.CHECK` and
//! `URL.INFO` on a namespace whose generations are in a real `redis-server`, with a fake clock
//! (the server's `Db`'s, which its Redis namespaces read).

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;
#[path = "../../redis/tests/redis_support/mod.rs"]
mod redis_support;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::TestServer;
use redis_support::{Server, open};
use urlseen_engine::{Clock, Db, DbOptions, FakeClock};
use urlseen_redis::RedisMode;
use urlseen_server::{App, AppConfig, Config, Frame};

fn get(info: &[(Frame, Frame)], k: &str) -> Option<Frame> {
    info.iter().find(|(n, _)| *n == Frame::bulk(k.to_owned())).map(|(_, v)| v.clone())
}

/// A server over `redis` whose clock is `clock`.
async fn serve(redis: &Server, clock: &Arc<FakeClock>) -> TestServer {
    let db = Db::in_memory_with(DbOptions { clock: clock.clone(), ..DbOptions::default() });
    let app =
        App::new(db, AppConfig::default()).with_redis(open(vec![redis.url()], RedisMode::Single));
    TestServer::start_app(Config::default(), Arc::new(app)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserve_recrawl_under_redis_then_info_and_new_again_after_the_window() {
    let redis = Server::start();
    // A slot boundary of an 8 s window with 8 generations, plus 250 ms, after the real time
    // (Redis expires generations by its own clock).
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    let t0 = now - now % 1_000 + 1_250;
    let clock = FakeClock::at(t0);
    let server = serve(&redis, &clock).await;
    let mut c = server.connect().await;
    c.expect(&["URL.RESERVE", "news", "CAPACITY", "10000", "RECRAWL", "8"], b"+OK\r\n").await;
    c.expect(
        &["URL.RESERVE", "x", "RECRAWL", "10", "GENERATIONS", "3"],
        b"-ERR invalid option recrawl_after: 10000 ms is not divisible into 3 generations of whole milliseconds\r\n",
    )
    .await;
    c.expect(
        &["URL.SEEN", "news", "https://a.example/", "https://b.example/"],
        b"*2\r\n:0\r\n:0\r\n",
    )
    .await;
    clock.advance(Duration::from_millis(3_000));
    c.expect(
        &["URL.SEEN", "news", "https://a.example/", "https://c.example/"],
        b"*2\r\n:1\r\n:0\r\n",
    )
    .await;

    c.send_cmd(&["HELLO", "3"]).await;
    c.read_reply().await;
    let Frame::Map(info) = c.call(&["URL.INFO", "news"]).await else { panic!("RESP3: map") };
    assert_eq!(get(&info, "backend"), Some(Frame::bulk("redis")));
    assert_eq!(get(&info, "count"), Some(Frame::Integer(3)));
    assert_eq!(get(&info, "recrawl_after"), Some(Frame::Double(8.0)));
    // This server's RAM for it: the filters of the leaves it holds replicas of (3 URLs set
    // bits in at least one leaf of each generation).
    let Some(Frame::Integer(memory)) = get(&info, "memory_bytes") else { panic!("no memory") };
    assert!(memory > 0, "{info:?}");
    let Some(Frame::Double(worst)) = get(&info, "worst_leaf_fpr") else { panic!("no FPR") };
    assert!((0.0..=0.01).contains(&worst), "{info:?}");
    let Some(Frame::Array(gens)) = get(&info, "generations") else { panic!("no generations") };
    assert_eq!(gens.len(), 2, "{gens:?}");
    let fields = |g: &Frame| match g {
        Frame::Map(m) => (get(m, "age_secs"), get(m, "count")),
        other => panic!("{other:?}"),
    };
    assert_eq!(fields(&gens[0]), (Some(Frame::Double(3.25)), Some(Frame::Integer(2))));
    assert_eq!(fields(&gens[1]), (Some(Frame::Double(0.25)), Some(Frame::Integer(1))));
    c.expect(&["URL.INFO", "nope"], b"-ERR not found\r\n").await;

    // Another server on the same Redis: the namespace keeps its window whatever RESERVE says.
    let other = serve(&redis, &clock).await;
    let mut d = other.connect().await;
    d.expect(&["URL.RESERVE", "news", "CAPACITY", "10000", "RECRAWL", "100"], b"+OK\r\n").await;
    d.send_cmd(&["HELLO", "3"]).await;
    d.read_reply().await;
    let Frame::Map(info) = d.call(&["URL.INFO", "news"]).await else { panic!("RESP3: map") };
    assert_eq!(get(&info, "recrawl_after"), Some(Frame::Double(8.0)));
    d.expect(
        &["URL.CHECK", "news", "https://c.example/", "https://d.example/"],
        b"*2\r\n:1\r\n:0\r\n",
    )
    .await;

    // 8 s after a and b: new again; c (recorded 3 s later) is still seen.
    clock.set(t0 - 250 + 8_000);
    assert!(clock.now_millis() > t0);
    c.expect(
        &["URL.SEEN", "news", "https://a.example/", "https://b.example/", "https://c.example/"],
        b"*3\r\n:0\r\n:0\r\n:1\r\n",
    )
    .await;
    d.expect(&["URL.SEEN", "news", "https://a.example/"], b"*1\r\n:1\r\n").await;
    let Frame::Map(info) = c.call(&["URL.INFO", "news"]).await else { panic!("RESP3: map") };
    let Some(Frame::Array(gens)) = get(&info, "generations") else { panic!("no generations") };
    assert_eq!(gens.len(), 2, "the first generation expired: {gens:?}");

    // A namespace without a window says so.
    c.expect(&["URL.SEEN", "plain", "https://a.example/"], b"*1\r\n:0\r\n").await;
    let Frame::Map(info) = c.call(&["URL.INFO", "plain"]).await else { panic!("RESP3: map") };
    assert_eq!(get(&info, "recrawl_after"), Some(Frame::Null));
    assert_eq!(get(&info, "generations"), Some(Frame::Array(Vec::new())));
}
