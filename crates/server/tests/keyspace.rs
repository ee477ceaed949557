//! A namespace is a key: DEL, EXISTS, KEYS, SCAN, TYPE, DBSIZE, FLUSHALL, INFO keyspace.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use std::collections::BTreeSet;

use common::TestServer;
use urlseen_server::{Config, Frame, RenameError};

async fn names(c: &mut common::Client, n: usize) {
    for i in 0..n {
        c.expect(&["BF.ADD", &format!("bf:{i}"), "x"], b":1\r\n").await;
        c.expect(&["URL.SEEN", &format!("url:{i}"), "https://a.example/"], b"*1\r\n:0\r\n").await;
    }
}

#[tokio::test]
async fn del_exists_type_dbsize_flushall() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["DBSIZE"], b":0\r\n").await;
    names(&mut c, 2).await;
    c.expect(&["DBSIZE"], b":4\r\n").await;
    c.expect(&["EXISTS", "bf:0", "bf:0", "url:1", "nope"], b":3\r\n").await;
    c.expect(&["TYPE", "bf:0"], b"+MBbloom--\r\n").await;
    c.expect(&["TYPE", "url:0"], b"+urlseen\r\n").await;
    c.expect(&["TYPE", "nope"], b"+none\r\n").await;
    c.expect(&["DEL", "bf:0", "nope", "url:0"], b":2\r\n").await;
    c.expect(&["DEL", "bf:0"], b":0\r\n").await;
    c.expect(&["EXISTS", "bf:0"], b":0\r\n").await;
    // A dropped namespace starts over.
    c.expect(&["URL.SEEN", "url:0", "https://a.example/"], b"*1\r\n:0\r\n").await;
    c.expect(&["DEL"], b"-ERR wrong number of arguments for 'del' command\r\n").await;
    c.expect(&["TYPE"], b"-ERR wrong number of arguments for 'type' command\r\n").await;
    c.expect(&["DBSIZE", "x"], b"-ERR wrong number of arguments for 'dbsize' command\r\n").await;
    c.expect(&["FLUSHALL", "NOW"], b"-ERR syntax error\r\n").await;
    c.expect(&["FLUSHALL", "ASYNC"], b"+OK\r\n").await;
    c.expect(&["DBSIZE"], b":0\r\n").await;
    names(&mut c, 1).await;
    c.expect(&["FLUSHDB"], b"+OK\r\n").await;
    c.expect(&["KEYS", "*"], b"*0\r\n").await;
}

#[tokio::test]
async fn keys_match_globs() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    names(&mut c, 3).await;
    c.expect(
        &["KEYS", "*"],
        b"*6\r\n$4\r\nbf:0\r\n$4\r\nbf:1\r\n$4\r\nbf:2\r\n$5\r\nurl:0\r\n$5\r\nurl:1\r\n$5\r\nurl:2\r\n",
    )
    .await;
    c.expect(&["KEYS", "url:[02]"], b"*2\r\n$5\r\nurl:0\r\n$5\r\nurl:2\r\n").await;
    c.expect(&["KEYS", "nothing*"], b"*0\r\n").await;
    c.expect(&["KEYS"], b"-ERR wrong number of arguments for 'keys' command\r\n").await;
}

fn scan_reply(f: Frame) -> (u64, Vec<String>) {
    let Frame::Array(parts) = f else { panic!("{f:?}") };
    let [Frame::Bulk(cursor), Frame::Array(keys)] = &parts[..] else { panic!("{parts:?}") };
    let cursor = std::str::from_utf8(cursor).unwrap().parse().unwrap();
    let keys = keys
        .iter()
        .map(|k| match k {
            Frame::Bulk(b) => String::from_utf8(b.to_vec()).unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    (cursor, keys)
}

async fn scan_all(c: &mut common::Client, extra: &[&str]) -> (Vec<String>, usize) {
    let mut cursor = 0u64;
    let mut all = Vec::new();
    let mut calls = 0;
    loop {
        let cur = cursor.to_string();
        let mut args = vec!["SCAN", cur.as_str()];
        args.extend_from_slice(extra);
        let (next, keys) = scan_reply(c.call(&args).await);
        calls += 1;
        all.extend(keys);
        if next == 0 {
            return (all, calls);
        }
        assert!(next > cursor, "the cursor moves forward");
        cursor = next;
    }
}

#[tokio::test]
async fn scan_visits_every_key_once() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    names(&mut c, 25).await;
    let (all, calls) = scan_all(&mut c, &["COUNT", "7"]).await;
    assert_eq!(calls, 8, "50 keys, 7 per call");
    let unique: BTreeSet<_> = all.iter().cloned().collect();
    assert_eq!(unique.len(), 50);
    assert_eq!(all.len(), 50);
    let (all, calls) = scan_all(&mut c, &[]).await;
    assert_eq!((all.len(), calls), (50, 5), "COUNT defaults to 10");
    let (bf, _) = scan_all(&mut c, &["MATCH", "bf:1*", "COUNT", "100"]).await;
    assert_eq!(bf.len(), 11, "{bf:?}");
    let (typed, _) = scan_all(&mut c, &["TYPE", "MBbloom--"]).await;
    assert!(typed.len() == 25 && typed.iter().all(|k| k.starts_with("bf:")));
    let (typed, _) = scan_all(&mut c, &["TYPE", "urlseen", "MATCH", "*:3"]).await;
    assert_eq!(typed, ["url:3"]);
    let (none, _) = scan_all(&mut c, &["TYPE", "string"]).await;
    assert!(none.is_empty());

    // Keys that exist throughout are returned even when others come and go mid-scan.
    let (mut cursor, first) = scan_reply(c.call(&["SCAN", "0", "COUNT", "5"]).await);
    let mut seen: BTreeSet<String> = first.into_iter().collect();
    c.expect(&["DEL", "bf:0", "url:0"], b":2\r\n").await;
    for i in 100..120 {
        c.expect(&["BF.ADD", &format!("new:{i}"), "x"], b":1\r\n").await;
    }
    while cursor != 0 {
        let (next, keys) = scan_reply(c.call(&["SCAN", &cursor.to_string(), "COUNT", "5"]).await);
        seen.extend(keys);
        cursor = next;
    }
    for i in 1..25 {
        assert!(seen.contains(&format!("bf:{i}")) && seen.contains(&format!("url:{i}")), "{i}");
    }

    c.expect(&["SCAN", "abc"], b"-ERR invalid cursor\r\n").await;
    c.expect(&["SCAN", "-1"], b"-ERR invalid cursor\r\n").await;
    c.expect(&["SCAN", "0", "COUNT", "0"], b"-ERR syntax error\r\n").await;
    c.expect(&["SCAN", "0", "COUNT", "x"], b"-ERR value is not an integer or out of range\r\n")
        .await;
    c.expect(&["SCAN", "0", "COUNT"], b"-ERR syntax error\r\n").await;
    c.expect(&["SCAN", "0", "WHAT"], b"-ERR syntax error\r\n").await;
    // Past the last key: done.
    c.expect(&["SCAN", "18446744073709551615"], b"*2\r\n$1\r\n0\r\n*0\r\n").await;
}

#[tokio::test]
async fn info_keyspace_and_memory() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    let info = |f: Frame| match f {
        Frame::Bulk(b) => String::from_utf8(b.to_vec()).unwrap(),
        other => panic!("{other:?}"),
    };
    let text = info(c.call(&["INFO", "keyspace"]).await);
    assert_eq!(text, "# Keyspace\r\n");
    names(&mut c, 2).await;
    let text = info(c.call(&["INFO", "keyspace"]).await);
    assert_eq!(text, "# Keyspace\r\ndb0:keys=4,expires=0,avg_ttl=0\r\n");
    let text = info(c.call(&["INFO", "memory"]).await);
    assert!(text.starts_with("# Memory\r\nused_memory:"), "{text}");
    assert!(text.contains("\r\nused_memory_rss:"), "{text}");
    let text = info(c.call(&["INFO"]).await);
    assert!(text.contains("# Memory\r\n") && text.contains("# Keyspace\r\ndb0:keys=4"), "{text}");
}

/// Redis' `rename-command`: a disabled command is unknown, a renamed one answers to its new
/// name only, and nothing else changes.
#[tokio::test]
async fn rename_command_disables_and_renames() {
    let app = std::sync::Arc::new(urlseen_server::App::in_memory());
    let mut d = urlseen_server::dispatch(app.clone());
    d.rename_command("FLUSHALL", "").unwrap();
    d.rename_command("del", "del-4f9c").unwrap();
    assert!(matches!(d.rename_command("nope", "x"), Err(RenameError::NoCommand(_))));
    let taken = d.rename_command("PING", "echo").unwrap_err();
    assert!(
        matches!(taken, RenameError::Taken(_)) && taken.to_string().contains("already a command")
    );
    let server = TestServer::start_with(Config::default(), d).await;
    let mut c = server.connect().await;
    c.expect(&["URL.SEEN", "jobs", "https://a.example/"], b"*1\r\n:0\r\n").await;
    c.expect(&["FLUSHALL"], b"-ERR unknown command 'FLUSHALL', with args beginning with: \r\n")
        .await;
    c.expect(
        &["DEL", "jobs"],
        b"-ERR unknown command 'DEL', with args beginning with: 'jobs' \r\n",
    )
    .await;
    c.expect(&["URL.SEEN", "jobs", "https://a.example/"], b"*1\r\n:1\r\n").await;
    c.expect(&["DEL-4F9C", "jobs"], b":1\r\n").await;
    c.expect(&["PING"], b"+PONG\r\n").await;
}
