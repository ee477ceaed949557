//! `URL.FORGET ns PREFIX p` (issue 15 item 2) in a namespace created with `URL.RESERVE …
//! KEEPURLS`: every URL under the prefix answers new afterwards, every other one still seen,
//! with the count in the reply; it holds after a restart. And its edges: a namespace that
//! does not keep its URLs, prefixes that could grow broader, a namespace that does not exist.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use std::sync::Arc;

use common::TestServer;
use urlseen_engine::{Db, DbOptions, Fsync};
use urlseen_server::{App, AppConfig, Config, Frame};

const URLS: usize = 20_000;

/// URL `i`: 50 hosts, three sections (`blog`, `blogroll`, `shop`), two schemes.
fn url(i: usize) -> String {
    let section = ["blog", "blogroll", "shop"][(i / 50) % 3];
    let scheme = if (i / 150).is_multiple_of(2) { "https" } else { "http" };
    format!("{scheme}://h{}.example/{section}/{i}", i % 50)
}

fn under_prefix(i: usize) -> bool {
    url(i).starts_with("https://h42.example/blog/")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forget_prefix_through_the_server_and_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), DbOptions { fsync: Fsync::Always, ..DbOptions::default() })
        .unwrap();
    let app = Arc::new(App::new(db, AppConfig::default()));
    let mut server = TestServer::start_app(Config::default(), app).await;
    let mut c = server.connect().await;
    let all: Vec<String> = (0..URLS).map(url).collect();
    let prefix: Vec<&String> =
        all.iter().enumerate().filter(|p| under_prefix(p.0)).map(|p| p.1).collect();
    // Per namespace, the other URLs it recorded (answered new in either round): those stay
    // seen. (Bloom: one answered seen on a false positive is not recorded, docs/durability.md.)
    let mut others_by_ns: Vec<Vec<&String>> = Vec::new();
    for ns in ["bloom", "exact"] {
        let mut recorded = vec![false; all.len()];
        let mut reserve = vec!["URL.RESERVE", ns, "CAPACITY", "2000", "KEEPURLS"];
        if ns == "exact" {
            reserve.push("EXACT");
        }
        c.expect(&reserve, b"+OK\r\n").await;
        // Recorded as single URLs and as batches, twice (repeats).
        for round in 0..2 {
            for (c_i, chunk) in all.chunks(1000).enumerate() {
                let mut args = vec!["URL.SEEN", ns];
                args.extend(chunk.iter().map(String::as_str));
                let Frame::Array(answers) = c.call(&args).await else { panic!() };
                for (j, answer) in answers.iter().enumerate() {
                    recorded[c_i * 1000 + j] |= *answer == Frame::Integer(0);
                }
                let new = answers.iter().filter(|f| **f == Frame::Integer(0)).count();
                assert!(round == 1 || ns == "bloom" || new == chunk.len(), "distinct URLs are new");
                // (Bloom: a URL answered seen on a false positive is not recorded, and may come
                // back new once after a split; docs/durability.md.)
                assert!(round == 0 || new == 0 || ns == "bloom" && new <= 30, "repeats are seen");
            }
        }
        let Frame::Integer(n) =
            c.call(&["URL.FORGET", ns, "PREFIX", "HTTPS://H42.example/blog/"]).await
        else {
            panic!("not an integer")
        };
        let n = usize::try_from(n).unwrap();
        // Bloom mode: a URL answered seen on a false positive was not recorded.
        assert!(n <= prefix.len() && n + 3 >= prefix.len(), "{ns}: {n} of {}", prefix.len());
        let others: Vec<&String> = all
            .iter()
            .enumerate()
            .filter(|p| !under_prefix(p.0) && recorded[p.0])
            .map(|p| p.1)
            .collect();
        assert_eq!(c.new_answers(ns, &others).await, 0, "{ns}: others stay seen");
        others_by_ns.push(others);
        let new = c.new_answers(ns, &prefix).await;
        assert!(new + 3 >= prefix.len(), "{ns}: {new} of {} new", prefix.len());
        if ns == "exact" {
            assert_eq!((n, new), (prefix.len(), prefix.len()), "exact: all of them");
        }
        c.expect(&["URL.FORGET", ns, "prefix", "https://h42.example/blog/"], b":0\r\n").await;
    }
    // Recorded anew: seen, and the rest survives a restart.
    c.expect(&["URL.SEEN", "exact", prefix[0].as_str()], b"*1\r\n:0\r\n").await;
    c.expect(&["URL.CHECK", "exact", prefix[0].as_str()], b"*1\r\n:1\r\n").await;
    drop(c);
    server.shutdown().await;
    let db = Db::open(dir.path()).unwrap();
    let app = Arc::new(App::new(db, AppConfig::default()));
    let server = TestServer::start_app(Config::default(), app).await;
    let mut c = server.connect().await;
    for (ns, others) in ["bloom", "exact"].into_iter().zip(&others_by_ns) {
        assert_eq!(c.new_answers(ns, others).await, 0, "{ns}: others seen after restart");
    }
    let others = &others_by_ns[1];
    assert_eq!(c.new_answers("exact", &prefix).await, prefix.len() - 1);
    // The whole origin: the rest of it, and the one recorded anew.
    let origin = all.iter().filter(|u| u.starts_with("https://h42.example/")).count();
    let expected = format!(":{}\r\n", origin - prefix.len() + 1);
    c.expect(&["URL.FORGET", "exact", "PREFIX", "https://h42.example"], expected.as_bytes()).await;
    assert_eq!(c.new_answers("exact", others).await, origin - prefix.len());
}

#[tokio::test]
async fn the_edges() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["URL.FORGET", "nope", "PREFIX", "https://a.example/"], b":0\r\n").await;
    c.expect(&["URL.SEEN", "plain", "https://a.example/blog/x"], b"*1\r\n:0\r\n").await;
    let e = c.error(&["URL.FORGET", "plain", "PREFIX", "https://a.example/blog/"]).await;
    assert!(e.starts_with("ERR namespace \"plain\" cannot forget by prefix"), "{e}");
    assert!(e.contains("KEEPURLS"), "{e}");
    c.expect(&["URL.RESERVE", "kept", "KEEPURLS"], b"+OK\r\n").await;
    c.expect(
        &["URL.SEEN", "kept", "https://a.example/blog/x", "https://a.example/blogx"],
        b"*2\r\n:0\r\n:0\r\n",
    )
    .await;
    for bad in ["https://a.example/blog?x", "https://a.example/blog/#a", "https://a.example/x/.."] {
        let e = c.error(&["URL.FORGET", "kept", "PREFIX", bad]).await;
        assert!(e.starts_with("ERR invalid prefix"), "{bad}: {e}");
    }
    let e = c.error(&["URL.FORGET", "kept", "PREFIX", "no url"]).await;
    assert!(e.starts_with("ERR invalid URL"), "{e}");
    c.expect(&["URL.FORGET", "kept", "PREFIX", "https://a.example/blog/"], b":1\r\n").await;
    c.expect(
        &["URL.CHECK", "kept", "https://a.example/blog/x", "https://a.example/blogx"],
        b"*2\r\n:0\r\n:1\r\n",
    )
    .await;
    // Not with a recrawl window.
    let e = c.error(&["URL.RESERVE", "w", "KEEPURLS", "RECRAWL", "80"]).await;
    assert!(e.contains("keep_urls"), "{e}");
}
