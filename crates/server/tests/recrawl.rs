//! `URL.RESERVE … RECRAWL seconds` and what `URL.INFO` says of the window, over RESP, with a
//! fake clock.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::TestServer;
use urlseen_engine::{Db, DbOptions, FakeClock};
use urlseen_server::{App, AppConfig, Config, Frame};

/// A slot boundary of an 8 s window with 8 generations, plus a bit.
const T0: u64 = 1_700_000_000_000 + 250;

fn get(info: &[(Frame, Frame)], k: &str) -> Option<Frame> {
    info.iter().find(|(n, _)| *n == Frame::bulk(k.to_owned())).map(|(_, v)| v.clone())
}

#[tokio::test]
async fn reserve_recrawl_then_info_and_new_again_after_the_window() {
    let clock = FakeClock::at(T0);
    let db = Db::in_memory_with(DbOptions { clock: clock.clone(), ..DbOptions::default() });
    let app = Arc::new(App::new(db, AppConfig::default()));
    let server = TestServer::start_app(Config::default(), app).await;
    let mut c = server.connect().await;
    c.expect(&["URL.RESERVE", "news", "CAPACITY", "10000", "RECRAWL", "8"], b"+OK\r\n").await;
    c.expect(
        &["URL.RESERVE", "x", "RECRAWL", "0"],
        b"-ERR bad recrawl window: expected a positive number of seconds\r\n",
    )
    .await;
    c.expect(
        &["URL.RESERVE", "x", "RECRAWL", "soon"],
        b"-ERR bad recrawl window: expected a positive number of seconds\r\n",
    )
    .await;
    c.expect(
        &["URL.RESERVE", "x", "RECRAWL", "8", "GENERATIONS", "0"],
        b"-ERR bad generations: expected a positive integer\r\n",
    )
    .await;
    c.expect(
        &["URL.RESERVE", "x", "RECRAWL", "10", "GENERATIONS", "3"],
        b"-ERR invalid option recrawl_after: 10000 ms is not divisible into 3 generations of whole milliseconds\r\n",
    )
    .await;
    c.expect(
        &["URL.RESERVE", "x", "RECRAWL", "8", "COUNTING"],
        b"-ERR invalid option recrawl_after: a counting namespace has no recrawl window\r\n",
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
    assert_eq!(get(&info, "count"), Some(Frame::Integer(3)));
    assert_eq!(get(&info, "recrawl_after"), Some(Frame::Double(8.0)));
    let Some(Frame::Array(gens)) = get(&info, "generations") else { panic!("no generations") };
    assert_eq!(gens.len(), 2, "{gens:?}");
    let fields = |g: &Frame| match g {
        Frame::Map(m) => (get(m, "age_secs"), get(m, "count")),
        other => panic!("{other:?}"),
    };
    assert_eq!(fields(&gens[0]), (Some(Frame::Double(3.25)), Some(Frame::Integer(2))));
    assert_eq!(fields(&gens[1]), (Some(Frame::Double(0.25)), Some(Frame::Integer(1))));

    // 8 s after a and b: new again; c (recorded 3 s later) is still seen.
    clock.set(T0 - 250 + 8_000);
    c.expect(
        &["URL.SEEN", "news", "https://a.example/", "https://b.example/", "https://c.example/"],
        b"*3\r\n:0\r\n:0\r\n:1\r\n",
    )
    .await;
    c.expect(&["URL.CHECK", "news", "https://a.example/"], b"*1\r\n:1\r\n").await;
    let Frame::Map(info) = c.call(&["URL.INFO", "news"]).await else { panic!("RESP3: map") };
    let Some(Frame::Array(gens)) = get(&info, "generations") else { panic!("no generations") };
    assert_eq!(gens.len(), 2, "the first generation expired: {gens:?}");

    // A namespace without a window says so.
    c.expect(&["URL.SEEN", "plain", "https://a.example/"], b"*1\r\n:0\r\n").await;
    let Frame::Map(info) = c.call(&["URL.INFO", "plain"]).await else { panic!("RESP3: map") };
    assert_eq!(get(&info, "recrawl_after"), Some(Frame::Null));
    assert_eq!(get(&info, "generations"), Some(Frame::Array(Vec::new())));
}
