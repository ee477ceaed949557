//! `URL.FORGET ns HOST h` (issue 15 item 2): every URL of the host answers new afterwards,
//! every other one still seen, with the count in the reply; it holds after a restart. And the
//! forms' edges: PREFIX refused where URLs are not kept, a host in a namespace with records of unknown host refused,
//! a namespace that does not exist.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use std::sync::Arc;

use common::TestServer;
use urlseen_engine::{Db, DbOptions, Fsync};
use urlseen_server::{App, AppConfig, Config, Frame};

const HOSTS: usize = 100;
const URLS: usize = 20_000;

fn urls() -> Vec<String> {
    (0..URLS)
        .map(|i| match i % 2 {
            0 => format!("https://h{}.example/p/{i}", i % HOSTS),
            _ => format!("http://H{}.example:8080/q?i={i}", i % HOSTS),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forget_host_through_the_server_and_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), DbOptions { fsync: Fsync::Always, ..DbOptions::default() })
        .unwrap();
    let app = Arc::new(App::new(db, AppConfig::default()));
    let mut server = TestServer::start_app(Config::default(), app).await;
    let mut c = server.connect().await;
    let all = urls();
    // Per namespace, how many URLs of host 42 were answered new (recorded): in Bloom mode a
    // false positive is answered seen, and kept, not recorded.
    let mut recorded_of_host = Vec::new();
    // Per namespace, which URLs were recorded (answered new).
    let mut recorded_urls: Vec<Vec<bool>> = Vec::new();
    for ns in ["bloom", "exact"] {
        if ns == "exact" {
            c.expect(&["URL.RESERVE", ns, "CAPACITY", "2000", "EXACT"], b"+OK\r\n").await;
        } else {
            c.expect(&["URL.RESERVE", ns, "CAPACITY", "2000"], b"+OK\r\n").await;
        }
        let mut recorded = 0;
        for (c_i, chunk) in all.chunks(1000).enumerate() {
            let mut args = vec!["URL.SEEN", ns];
            args.extend(chunk.iter().map(String::as_str));
            let Frame::Array(answers) = c.call(&args).await else { panic!() };
            let new = answers.iter().filter(|f| **f == Frame::Integer(0)).count();
            assert!(ns == "bloom" || new == chunk.len(), "distinct URLs are new");
            if c_i == 0 {
                recorded_urls.push(Vec::new());
            }
            if let Some(mask) = recorded_urls.last_mut() {
                mask.extend(answers.iter().map(|f| *f == Frame::Integer(0)));
            }
            recorded += answers
                .iter()
                .enumerate()
                .filter(|(j, f)| (c_i * 1000 + j) % HOSTS == 42 && **f == Frame::Integer(0))
                .count();
        }
        recorded_of_host.push(recorded);
    }
    let host: Vec<&String> =
        all.iter().enumerate().filter(|p| p.0 % HOSTS == 42).map(|p| p.1).collect();
    // The other hosts' URLs each namespace recorded: those stay seen.
    let others_of = |mask: &[bool]| -> Vec<&String> {
        all.iter().enumerate().filter(|p| p.0 % HOSTS != 42 && mask[p.0]).map(|p| p.1).collect()
    };
    let others_by_ns: Vec<Vec<&String>> = recorded_urls.iter().map(|m| others_of(m)).collect();
    assert_eq!(recorded_of_host[1], host.len());
    for ((ns, recorded), others) in
        ["bloom", "exact"].into_iter().zip(recorded_of_host).zip(&others_by_ns)
    {
        // The URLs of the host the namespace holds as recorded: those answered new, and in
        // Bloom mode maybe a few answered seen on a positive that was gone by the time it was
        // kept (then recorded; see `Namespace::reserve_fingerprints`).
        let Frame::Integer(n) = c.call(&["URL.FORGET", ns, "HOST", "h42.EXAMPLE"]).await else {
            panic!("not an integer")
        };
        let n = usize::try_from(n).unwrap();
        assert!(recorded <= n && n <= host.len(), "{ns}: {n} forgotten, {recorded} recorded");
        assert_eq!(c.new_answers(ns, others).await, 0, "{ns}: others stay seen");
        let new = c.new_answers(ns, &host).await;
        if ns == "exact" {
            assert_eq!(new, host.len(), "{ns}: every URL of the host is new");
        } else {
            assert!(new + 3 >= host.len(), "{ns}: {new} of {} new", host.len());
        }
        // Again: nothing left; any case of the word.
        c.expect(&["URL.FORGET", ns, "host", "h42.example"], b":0\r\n").await;
    }
    // Its URLs recorded anew are seen, and survive the restart with everything else.
    let mut args = vec!["URL.SEEN", "exact", host[0].as_str()];
    args.push(host[1].as_str());
    c.expect(&args, b"*2\r\n:0\r\n:0\r\n").await;
    // Delivered, so recorded (by the time the next command is answered).
    c.expect(&["URL.CHECK", "exact", host[0].as_str()], b"*1\r\n:1\r\n").await;
    drop(c);
    server.shutdown().await;
    let db = Db::open(dir.path()).unwrap();
    let app = Arc::new(App::new(db, AppConfig::default()));
    let server = TestServer::start_app(Config::default(), app).await;
    let mut c = server.connect().await;
    for (ns, others) in ["bloom", "exact"].into_iter().zip(&others_by_ns) {
        assert_eq!(c.new_answers(ns, others).await, 0, "{ns}: others seen after restart");
    }
    let new = c.new_answers("exact", &host).await;
    assert_eq!(new, host.len() - 2, "forgotten stay new, the two recorded again are seen");
}

#[tokio::test]
async fn the_forms_edges() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    // No such namespace: nothing to forget.
    c.expect(&["URL.FORGET", "nope", "HOST", "a.example"], b":0\r\n").await;
    c.expect(
        &["URL.SEEN", "ns", "https://a.example/x", "https://b.example/y"],
        b"*2\r\n:0\r\n:0\r\n",
    )
    .await;
    c.expect(&["URL.FORGET", "ns", "HOST", "a.example"], b":1\r\n").await;
    c.expect(
        &["URL.CHECK", "ns", "https://a.example/x", "https://b.example/y"],
        b"*2\r\n:0\r\n:1\r\n",
    )
    .await;
    let e = c.error(&["URL.FORGET", "ns", "HOST", "https://a.example/"]).await;
    assert!(e.starts_with("ERR invalid host"), "{e}");
    // A prefix needs a namespace that keeps its URLs (tests/forget_prefix.rs).
    let e = c.error(&["URL.FORGET", "ns", "PREFIX", "https://b.example/blog/"]).await;
    assert!(e.starts_with("ERR namespace \"ns\" cannot forget by prefix"), "{e}");
    // Three arguments: URLs, as before (a Bloom namespace cannot forget single URLs).
    let e = c.error(&["URL.FORGET", "ns", "HOST", "a.example", "b"]).await;
    assert!(e.contains("cannot forget URLs"), "{e}");
    // A counting namespace forgets a host too.
    c.expect(&["URL.RESERVE", "cnt", "EXACT", "COUNTING"], b"+OK\r\n").await;
    c.expect(
        &["URL.SEEN", "cnt", "https://a.example/x", "http://a.example:81/z"],
        b"*2\r\n:0\r\n:0\r\n",
    )
    .await;
    c.expect(&["URL.SEEN", "cnt", "https://b.example/y"], b"*1\r\n:0\r\n").await;
    c.expect(&["URL.FORGET", "cnt", "HOST", "A.example"], b":2\r\n").await;
    c.expect(
        &[
            "URL.CHECK",
            "cnt",
            "https://a.example/x",
            "http://a.example:81/z",
            "https://b.example/y",
        ],
        b"*3\r\n:0\r\n:0\r\n:1\r\n",
    )
    .await;
    // A raw item (BF.ADD) has no host: a forget by host refuses, and forgets nothing.
    c.expect(&["BF.ADD", "bf", "https://b.example/y"], b":1\r\n").await;
    let e = c.error(&["URL.FORGET", "bf", "HOST", "b.example"]).await;
    assert!(e.contains("1 records whose host is unknown"), "{e}");
    c.expect(&["BF.EXISTS", "bf", "https://b.example/y"], b":1\r\n").await;
}
