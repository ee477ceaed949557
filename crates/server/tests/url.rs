//! The `URL.*` commands, byte for byte.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use common::{TestServer, resp};
use urlseen_server::{Config, Frame};

/// What an invalid URL answers in its position: `-1`, neither seen nor new (the rule of
/// docs/protocol.md, "What a reply says was done").
const INVALID: &str = ":-1\r\n";

#[tokio::test]
async fn seen_canonicalizes_and_answers_per_url() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["URL.SEEN", "jobs", "https://a.example/x"], b"*1\r\n:0\r\n").await;
    c.expect(&["url.seen", "jobs", "https://a.example/x"], b"*1\r\n:1\r\n").await;
    // Spelled differently, the same page: seen. An invalid URL answers -1 in its position, the
    // others go on.
    c.expect(
        &["URL.SEEN", "jobs", "HTTPS://A.EXAMPLE:443/x#top", "/relative", "https://b.example/"],
        format!("*3\r\n:1\r\n{INVALID}:0\r\n").as_bytes(),
    )
    .await;
    c.expect(
        &["URL.SEEN", "jobs", "https://b.example/", "https://b.example/"],
        b"*2\r\n:1\r\n:1\r\n",
    )
    .await;
    // A duplicate within one batch is new only the first time.
    c.expect(
        &["URL.SEEN", "jobs", "https://c.example/", "https://c.example/"],
        b"*2\r\n:0\r\n:1\r\n",
    )
    .await;
    c.expect(&["URL.SEEN", "jobs", "mailto:someone@example.com"], b"*1\r\n:-1\r\n").await;
    c.expect_bytes(&[b"URL.SEEN", b"jobs", b"https://a.example/\xff"], b"*1\r\n:-1\r\n").await;
    c.expect(&["URL.SEEN", "jobs"], b"-ERR wrong number of arguments for 'url.seen' command\r\n")
        .await;
    // The reply stays an array of integers in RESP3.
    c.send_cmd(&["HELLO", "3"]).await;
    c.read_reply().await;
    c.expect(
        &["URL.SEEN", "jobs", "https://a.example/x", "https://d.example/"],
        b"*2\r\n:1\r\n:0\r\n",
    )
    .await;
    c.expect(&["TYPE", "jobs"], b"+urlseen\r\n").await;
}

#[tokio::test]
async fn check_is_read_only() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["URL.SEEN", "jobs", "https://a.example/"], b"*1\r\n:0\r\n").await;
    c.expect(
        &["URL.CHECK", "jobs", "https://A.example", "https://new.example/", "/rel"],
        format!("*3\r\n:1\r\n:0\r\n{INVALID}").as_bytes(),
    )
    .await;
    c.expect(&["URL.CHECK", "jobs", "https://new.example/"], b"*1\r\n:0\r\n").await;
    // A namespace that does not exist has seen nothing, is not created, still validates.
    c.expect(
        &["URL.CHECK", "nope", "https://a.example/", "/rel"],
        format!("*2\r\n:0\r\n{INVALID}").as_bytes(),
    )
    .await;
    c.expect(&["EXISTS", "nope"], b":0\r\n").await;
}

#[tokio::test]
async fn reserve_options_and_errors() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(
        &["URL.RESERVE", "w", "CAPACITY", "5000", "ERROR", "0.001", "PROFILE", "w3lib"],
        b"+OK\r\n",
    )
    .await;
    c.expect(&["URL.RESERVE", "w"], b"-ERR item exists\r\n").await;
    // w3lib sorts the query.
    c.expect(&["URL.SEEN", "w", "http://x.example/do?b=2&a=1"], b"*1\r\n:0\r\n").await;
    c.expect(&["URL.SEEN", "w", "http://x.example/do?a=1&b=2"], b"*1\r\n:1\r\n").await;
    // crawler (the default) does not.
    c.expect(&["URL.RESERVE", "c"], b"+OK\r\n").await;
    c.expect(&["URL.SEEN", "c", "http://x.example/do?b=2&a=1"], b"*1\r\n:0\r\n").await;
    c.expect(&["URL.SEEN", "c", "http://x.example/do?a=1&b=2"], b"*1\r\n:0\r\n").await;
    let Frame::Map(info) = to_map(c.call(&["URL.INFO", "w"]).await) else { unreachable!() };
    let get = |k: &str| {
        info.iter().find(|(n, _)| *n == Frame::bulk(k.to_owned())).map(|(_, v)| v.clone())
    };
    assert_eq!(get("profile"), Some(Frame::bulk("w3lib")));
    assert_eq!(get("capacity"), Some(Frame::Integer(5000)));
    assert_eq!(get("fpr_bound"), Some(Frame::bulk("0.001")));

    c.expect(
        &["URL.RESERVE", "x", "PROFILE", "nope"],
        b"-ERR unknown profile (expected one of crawler, w3lib, safebrowsing, none)\r\n",
    )
    .await;
    c.expect(
        &["URL.RESERVE", "x", "PROFILE"],
        b"-ERR wrong number of arguments for 'url.reserve' command\r\n",
    )
    .await;
    for bad in ["0", "-1", "abc"] {
        c.expect(
            &["URL.RESERVE", "x", "CAPACITY", bad],
            b"-ERR bad capacity: expected a positive integer\r\n",
        )
        .await;
    }
    c.expect(
        &["URL.RESERVE", "x", "ERROR", "abc"],
        b"-ERR bad error rate: expected a number between 0 and 1\r\n",
    )
    .await;
    c.expect(
        &["URL.RESERVE", "x", "ERROR", "2"],
        b"-ERR invalid option fpr: must be between 0 and 1 (exclusive), got 2\r\n",
    )
    .await;
    c.expect(&["URL.RESERVE", "x", "SIDEWAYS"], b"-ERR syntax error\r\n").await;
    c.expect(
        &["URL.RESERVE", "x", "CAPACITY", "1000000000000000000"],
        b"-ERR Insufficient memory to create filter\r\n",
    )
    .await;
    c.expect(&["EXISTS", "x"], b":0\r\n").await;
    c.expect(&["URL.RESERVE", "e", "EXACT"], b"+OK\r\n").await;
    // COUNTING implies EXACT.
    c.expect(&["URL.RESERVE", "cnt", "COUNTING"], b"+OK\r\n").await;
    c.expect(&["URL.RESERVE", "cnt", "EXACT"], b"-ERR item exists\r\n").await;
}

fn to_map(f: Frame) -> Frame {
    match f {
        Frame::Array(flat) => {
            let mut it = flat.into_iter();
            let mut pairs = Vec::new();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                pairs.push((k, v));
            }
            Frame::Map(pairs)
        }
        other => other,
    }
}

#[tokio::test]
async fn info_reports_the_engine_stats() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["URL.INFO", "jobs"], b"-ERR not found\r\n").await;
    c.expect(
        &["URL.SEEN", "jobs", "https://a.example/", "https://b.example/"],
        b"*2\r\n:0\r\n:0\r\n",
    )
    .await;
    let Frame::Array(flat) = c.call(&["URL.INFO", "jobs"]).await else { panic!("RESP2: array") };
    let Frame::Map(info) = to_map(Frame::Array(flat)) else { unreachable!() };
    let names: Vec<String> = info
        .iter()
        .map(|(k, _)| match k {
            Frame::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("{other:?}"),
        })
        .collect();
    for field in [
        "name",
        "type",
        "profile",
        "count",
        "capacity",
        "memory_bytes",
        "disk_bytes",
        "fpr_bound",
        "estimated_fpr",
        "worst_leaf_fpr",
        "fill_ratio",
        "leaves",
        "height",
        "splits_started",
        "splits_done",
        "split_fanout",
        "leaf_capacity",
        "exact",
        "counting",
        "leaves_per_depth",
        "persistence",
    ] {
        assert!(names.iter().any(|n| n == field), "no {field} in {names:?}");
    }
    let get = |k: &str| {
        info.iter().find(|(n, _)| *n == Frame::bulk(k.to_owned())).map(|(_, v)| v.clone())
    };
    assert_eq!(get("name"), Some(Frame::bulk("jobs")));
    assert_eq!(get("type"), Some(Frame::bulk("urlseen")));
    assert_eq!(get("profile"), Some(Frame::bulk("crawler")));
    assert_eq!(get("count"), Some(Frame::Integer(2)));
    assert_eq!(
        get("capacity"),
        Some(Frame::Integer(urlseen_server::app::URL_START_CAPACITY as i64))
    );
    assert_eq!(get("exact"), Some(Frame::Integer(0)));
    assert_eq!(get("persistence"), Some(Frame::Null));
    // RESP3: a map, with doubles and booleans.
    c.send_cmd(&["HELLO", "3"]).await;
    c.read_reply().await;
    let Frame::Map(info) = c.call(&["URL.INFO", "jobs"]).await else { panic!("RESP3: map") };
    let get = |k: &str| {
        info.iter().find(|(n, _)| *n == Frame::bulk(k.to_owned())).map(|(_, v)| v.clone())
    };
    assert_eq!(get("fpr_bound"), Some(Frame::Double(0.01)));
    assert_eq!(get("counting"), Some(Frame::Boolean(false)));
    assert!(matches!(get("estimated_fpr"), Some(Frame::Double(x)) if (0.0..0.01).contains(&x)));
    c.expect(
        &["URL.INFO", "jobs", "x"],
        b"-ERR wrong number of arguments for 'url.info' command\r\n",
    )
    .await;
}

#[tokio::test]
async fn forget_needs_counting_filters() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["URL.SEEN", "jobs", "https://a.example/"], b"*1\r\n:0\r\n").await;
    c.expect(
        &["URL.FORGET", "jobs", "https://a.example/"],
        b"-ERR this namespace cannot forget URLs: create it with URL.RESERVE <ns> EXACT COUNTING\r\n",
    )
    .await;
    c.expect(&["URL.CHECK", "jobs", "https://a.example/"], b"*1\r\n:1\r\n").await;
    // A counting namespace forgets: the URL is new again, the others stay seen.
    c.expect(&["URL.RESERVE", "crawl", "EXACT", "COUNTING"], b"+OK\r\n").await;
    c.expect(
        &["URL.SEEN", "crawl", "https://a.example/", "https://b.example/"],
        b"*2\r\n:0\r\n:0\r\n",
    )
    .await;
    c.expect(
        &["URL.FORGET", "crawl", "HTTPS://A.EXAMPLE:443/", "https://c.example/", "/rel"],
        format!("*3\r\n:1\r\n:0\r\n{INVALID}").as_bytes(),
    )
    .await;
    c.expect(
        &["URL.CHECK", "crawl", "https://a.example/", "https://b.example/"],
        b"*2\r\n:0\r\n:1\r\n",
    )
    .await;
    c.expect(&["URL.SEEN", "crawl", "https://a.example/"], b"*1\r\n:0\r\n").await;
    // Nothing to forget in a namespace that does not exist.
    c.expect(
        &["URL.FORGET", "nope", "https://a.example/", "/rel"],
        format!("*2\r\n:0\r\n{INVALID}").as_bytes(),
    )
    .await;
}

#[tokio::test]
async fn pipelined_url_commands() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    let mut pipeline = Vec::new();
    for i in 0..100 {
        let url = format!("https://p.example/{i}");
        pipeline.extend_from_slice(&resp(&[b"URL.SEEN", b"p", url.as_bytes()]));
    }
    pipeline.extend_from_slice(&resp(&[b"URL.SEEN", b"p", b"https://p.example/7"]));
    c.send(&pipeline).await;
    let replies = c.read_frames(101).await;
    assert_eq!(
        replies,
        [&b"*1\r\n:0\r\n"[..]]
            .repeat(100)
            .concat()
            .into_iter()
            .chain(b"*1\r\n:1\r\n".iter().copied())
            .collect::<Vec<u8>>()
    );
}

#[tokio::test]
async fn pipelined_runs_answer_as_one_by_one() {
    let config = urlseen_server::Config { requirepass: Some("pw".into()), ..Config::default() };
    let server = TestServer::start_engine(config).await;
    let mut c = server.connect().await;
    let mut pipeline = Vec::new();
    for args in [
        &[&b"URL.SEEN"[..], b"a", b"https://u.example/1"][..],
        &[b"AUTH", b"pw"],
        &[b"URL.SEEN", b"a", b"https://u.example/1"],
        &[b"url.seen", b"a", b"https://u.example/1"],
        &[b"URL.SEEN", b"b", b"https://u.example/1"],
        &[b"URL.SEEN", b"a", b"https://u.example/2", b"https://u.example/1"],
        &[b"URL.SEEN", b"a"],
        &[b"PING"],
        &[b"URL.SEEN", b"a", b"https://u.example/2"],
        &[b"URL.SEEN", b"a", b"/rel"],
        &[b"URL.CHECK", b"b", b"https://u.example/1", b"https://u.example/2"],
    ] {
        pipeline.extend_from_slice(&resp(args));
    }
    c.send(&pipeline).await;
    let want = format!(
        "-NOAUTH Authentication required.\r\n+OK\r\n*1\r\n:0\r\n*1\r\n:1\r\n*1\r\n:0\r\n\
         *2\r\n:0\r\n:1\r\n-ERR wrong number of arguments for 'url.seen' command\r\n+PONG\r\n\
         *1\r\n:1\r\n*1\r\n{INVALID}*2\r\n:1\r\n:0\r\n"
    );
    assert_eq!(common::show(&c.read_frames(11).await), common::show(want.as_bytes()));
    let stats = server.metrics.command("url.seen").unwrap();
    assert_eq!((stats.calls(), stats.rejected()), (6, 2));
    assert_eq!(stats.buckets().iter().sum::<u64>(), 6);
    // A long pipeline on one namespace, with repeats across calls: made for them, so that
    // none of the first thousand is a false positive of a small filter.
    c.expect(&["URL.RESERVE", "long", "CAPACITY", "100000"], b"+OK\r\n").await;
    let mut pipeline = Vec::new();
    for i in 0..2000 {
        let url = format!("https://long.example/{}", i % 1000);
        pipeline.extend_from_slice(&resp(&[b"URL.SEEN", b"long", url.as_bytes()]));
    }
    c.send(&pipeline).await;
    let replies = c.read_frames(2000).await;
    let want: Vec<u8> = [&b"*1\r\n:0\r\n"[..]]
        .repeat(1000)
        .concat()
        .into_iter()
        .chain([&b"*1\r\n:1\r\n"[..]].repeat(1000).concat())
        .collect();
    assert_eq!(replies, want);
}
