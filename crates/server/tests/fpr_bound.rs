//! The false-positive bound through the server (issue 32): RedisBloom's own `test_error_rate`
//! (a filter at exactly its capacity measures under its rate), and one command far larger than
//! the key was made for (`BF.MADD`, `BF.INSERT`, `URL.SEEN`) answers under the bound.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use common::TestServer;
use urlseen_server::{Config, Frame};

/// The number of `:1` answers in an array reply.
fn ones(reply: &Frame) -> usize {
    let Frame::Array(items) = reply else { panic!("not an array: {reply:?}") };
    items.iter().filter(|f| **f == Frame::Integer(1)).count()
}

/// RedisBloom's `test_error_rate` (tests/flow/test_overall.py): reserve 1,024 items at 1%, add
/// 1,024, ask 10,240 others; the share answered "exists" is at most the rate. A filter split at
/// exactly its formula-4 capacity measured 1.104% here.
#[tokio::test]
async fn redisbloom_test_error_rate() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["BF.RESERVE", "bf", "0.01", "1024"], b"+OK\r\n").await;
    for x in 0..1024 {
        let x = x.to_string();
        let reply = c.call(&["BF.ADD", "bf", &x]).await;
        assert!(matches!(reply, Frame::Integer(_)), "{reply:?}");
    }
    let mut false_positives = 0;
    for x in 1024..1024 * 11 {
        let x = x.to_string();
        if c.call(&["BF.EXISTS", "bf", &x]).await == Frame::Integer(1) {
            false_positives += 1;
        }
    }
    let rate = f64::from(false_positives) / 10_240.0;
    assert!(rate <= 0.01, "{false_positives} of 10240 false positives: {rate}");
    // Not a filter that split to get there: one filter, as RedisBloom's.
    let Frame::Array(info) = c.call(&["BF.INFO", "bf"]).await else { panic!("BF.INFO") };
    assert_eq!(info[5], Frame::Integer(1), "number of filters: {info:?}");
}

/// 100,000 new items in one command into a key made for 1,000 at 1%: at most the bound plus
/// sampling error (4 standard deviations) answered "exists" / "seen", through each write
/// command.
#[tokio::test]
async fn one_command_far_larger_than_the_key_keeps_the_bound() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    let n = 100_000;
    let allowed = n / 100 + 4 * 32;
    c.expect(&["BF.RESERVE", "madd", "0.01", "1000"], b"+OK\r\n").await;
    let items: Vec<String> = (0..n).map(|i| format!("madd-{i}")).collect();
    let mut args = vec!["BF.MADD", "madd"];
    args.extend(items.iter().map(String::as_str));
    let added = c.call(&args).await;
    // BF.MADD answers 1 for added (new), 0 for "may exist".
    let Frame::Array(answers) = &added else { panic!("{added:?}") };
    let exists = answers.iter().filter(|f| **f == Frame::Integer(0)).count();
    assert!(exists <= allowed, "BF.MADD: {exists} of {n} new items answered 0");

    c.expect(&["BF.RESERVE", "insert", "0.01", "1000"], b"+OK\r\n").await;
    let mut args = vec!["BF.INSERT", "insert", "ITEMS"];
    args.extend(items.iter().map(String::as_str));
    let inserted = c.call(&args).await;
    let Frame::Array(answers) = &inserted else { panic!("{inserted:?}") };
    let exists = answers.iter().filter(|f| **f == Frame::Integer(0)).count();
    assert!(exists <= allowed, "BF.INSERT: {exists} of {n} new items answered 0");

    c.expect(&["URL.RESERVE", "urls", "CAPACITY", "1000", "ERROR", "0.01"], b"+OK\r\n").await;
    let urls: Vec<String> = (0..n).map(|i| format!("https://h{}.example/p/{i}", i % 101)).collect();
    let mut args = vec!["URL.SEEN", "urls"];
    args.extend(urls.iter().map(String::as_str));
    let seen = ones(&c.call(&args).await);
    assert!(seen <= allowed, "URL.SEEN: {seen} of {n} new URLs answered seen");
    // And every one is recorded.
    let mut args = vec!["URL.CHECK", "urls"];
    args.extend(urls.iter().map(String::as_str));
    assert_eq!(ones(&c.call(&args).await), n, "a URL answered new is not recorded");
}
