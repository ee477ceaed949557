//! Key lifetimes under `serve --redis`: `EXPIRE` and its family, `TTL` and its family,
//! `PERSIST` and `URL.RESERVE … TTL` on URL namespaces kept in a real `redis-server`. The
//! replies match Redis's byte for byte; every Redis key of the namespace carries the time,
//! also those its splits make after the `EXPIRE`; `PERSIST` clears them all; once expired,
//! the namespace is new again, on this server and on another that held it open.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;
#[path = "../../redis/tests/redis_support/mod.rs"]
mod redis_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Client, EXPIRE_SCRIPT, Redis, TestServer, show};
use redis_support::{Server, open};
use urlseen_engine::Db;
use urlseen_redis::RedisMode;
use urlseen_server::{App, AppConfig, Config, Frame};

/// A server whose URL namespaces are in `redis`.
async fn serve(redis: &Server) -> TestServer {
    let app = App::new(Db::in_memory(), AppConfig::default())
        .with_redis(open(vec![redis.url()], RedisMode::Single));
    TestServer::start_app(Config::default(), Arc::new(app)).await
}

async fn ask(c: &mut Client, args: &[&str]) -> Vec<u8> {
    c.send_cmd(args).await;
    c.read_reply().await
}

async fn int(c: &mut Client, args: &[&str]) -> i64 {
    match c.call(args).await {
        Frame::Integer(n) => n,
        other => panic!("{args:?}: {other:?}"),
    }
}

/// Every Redis key of namespace `name` but its end marker, with its `PEXPIRETIME`.
fn keys_of(redis: &Server, name: &str) -> BTreeMap<String, i64> {
    let mut conn = redis.conn();
    let keys: Vec<String> =
        redis::cmd("KEYS").arg(format!("urlseen:{{{name}*")).query(&mut conn).unwrap();
    keys.into_iter()
        .filter(|k| !k.contains(":ended:"))
        .map(|k| {
            let at: i64 = redis::cmd("PEXPIRETIME").arg(&k).query(&mut conn).unwrap();
            (k, at)
        })
        .filter(|(_, at)| *at != -2)
        .collect()
}

/// Asserts that every key of the namespace expires at `at` (a split lock: at `at` or sooner;
/// `at` -1: none has a time).
fn assert_all_at(keys: &BTreeMap<String, i64>, at: i64) {
    assert!(!keys.is_empty());
    for (k, &t) in keys {
        match k.ends_with(":lock") {
            true if at > 0 => assert!(t > 0 && t <= at, "{k}: {t}"),
            true => {}
            false => assert_eq!(t, at, "{k}"),
        }
    }
}

async fn record(c: &mut Client, ns: &str, urls: &[String]) {
    for chunk in urls.chunks(500) {
        let mut args = vec!["URL.SEEN", ns];
        args.extend(chunk.iter().map(String::as_str));
        let reply = c.call(&args).await;
        assert!(matches!(reply, Frame::Array(_)), "{reply:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_expire_family_on_namespaces_in_redis_matches_redis_byte_for_byte() {
    let (peer, backend) = (Redis::start().await, Server::start());
    let server = serve(&backend).await;
    let (mut r, mut u) = (peer.connect().await, server.connect().await);
    for key in ["k", "u", "v", "w", "x", "y"] {
        ask(&mut r, &["SET", key, "1"]).await;
        ask(&mut u, &["URL.SEEN", key, "https://a.example/"]).await;
    }
    // The keyspace commands see this process's keys only (docs/protocol.md): not compared.
    let local = ["EXISTS", "TYPE", "MEMORY", "UNLINK", "DBSIZE"];
    for args in EXPIRE_SCRIPT.iter().filter(|a| !local.contains(&a[0])) {
        let (want, got) = (ask(&mut r, args).await, ask(&mut u, args).await);
        assert_eq!(show(&got), show(&want), "{args:?}");
    }
    // The namespaces deleted by a time in the past are gone from Redis (but their end
    // markers, which keys_of leaves out).
    for key in ["k", "u", "v", "w", "x", "y"] {
        assert!(keys_of(&backend, key).is_empty(), "{key}");
    }
    // The script deletes `k` early (`EXPIREAT k -9223372036854775`): its part on a key that
    // exists, again on `k2`.
    let from = EXPIRE_SCRIPT.iter().position(|a| a == &["TTL", "k"]).unwrap();
    let to = EXPIRE_SCRIPT.iter().position(|a| a == &["EXPIRE", "u", "0"]).unwrap();
    ask(&mut r, &["SET", "k2", "1"]).await;
    ask(&mut u, &["URL.SEEN", "k2", "https://a.example/"]).await;
    for args in EXPIRE_SCRIPT[from..to].iter().filter(|a| !local.contains(&a[0])) {
        let args: Vec<&str> = args.iter().map(|&a| if a == "k" { "k2" } else { a }).collect();
        let (want, got) = (ask(&mut r, &args).await, ask(&mut u, &args).await);
        assert_eq!(show(&got), show(&want), "{args:?}");
    }
    let at = int(&mut u, &["PEXPIRETIME", "k2"]).await;
    assert_all_at(&keys_of(&backend, "k2"), at);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_redis_key_of_a_namespace_expires_together_and_then_it_is_new() {
    let backend = Server::start();
    let (server, other) = (serve(&backend).await, serve(&backend).await);
    let (mut c, mut o) = (server.connect().await, other.connect().await);
    let urls: Vec<String> =
        (0..6_000).map(|i| format!("https://h{}.example/page/{i}", i % 97)).collect();

    c.expect(&["URL.RESERVE", "job", "CAPACITY", "100", "TTL", "100"], b"+OK\r\n").await;
    c.expect(&["TTL", "job"], b":100\r\n").await;
    let at = int(&mut c, &["PEXPIRETIME", "job"]).await;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    assert!((at - now - 100_000).abs() < 2_000, "{at} vs {now}");
    let made = keys_of(&backend, "job");
    assert_all_at(&made, at);

    // Splits (of this server, then of another one) make keys after the EXPIRE: all carry it.
    o.expect(&["URL.RESERVE", "job", "CAPACITY", "100"], b"+OK\r\n").await;
    record(&mut c, "job", &urls[..3_000]).await;
    record(&mut o, "job", &urls[3_000..]).await;
    let grown = keys_of(&backend, "job");
    let logs = grown.keys().filter(|k| k.ends_with(":log")).count();
    assert!(logs >= 4 && grown.len() > made.len(), "{logs} logs; {grown:?}");
    assert_all_at(&grown, at);
    c.expect(&["EXPIRE", "job", "50", "GT"], b":0\r\n").await;
    c.expect(&["EXPIRE", "job", "50", "NX"], b":0\r\n").await;
    o.expect(&["PEXPIRETIME", "job"], format!(":{at}\r\n").as_bytes()).await;

    // PERSIST clears every key; new keys get no time.
    c.expect(&["PERSIST", "job"], b":1\r\n").await;
    c.expect(&["PERSIST", "job"], b":0\r\n").await;
    o.expect(&["TTL", "job"], b":-1\r\n").await;
    assert_all_at(&keys_of(&backend, "job"), -1);

    // Expired: gone from Redis, new again here and on the other server, which held it open
    // (idle since before the EXPIRE: it never saw the time).
    o.expect(&["URL.SEEN", "job", &urls[0]], b"*1\r\n:1\r\n").await;
    c.expect(&["PEXPIRE", "job", "300"], b":1\r\n").await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(keys_of(&backend, "job").is_empty());
    c.expect(&["TTL", "job"], b":-2\r\n").await;
    c.expect(&["URL.CHECK", "job", &urls[1]], b"*1\r\n:0\r\n").await;
    o.expect(&["URL.SEEN", "job", &urls[0]], b"*1\r\n:0\r\n").await;
    c.expect(&["URL.SEEN", "job", &urls[0]], b"*1\r\n:1\r\n").await;
    c.expect(&["URL.SEEN", "job", &urls[2]], b"*1\r\n:0\r\n").await;
    c.expect(&["TTL", "job"], b":-1\r\n").await;

    // A recrawl window's generations expire by themselves: it has no lifetime of its own.
    let err = c.error(&["URL.RESERVE", "news", "RECRAWL", "60", "TTL", "10"]).await;
    assert!(err.contains("RECRAWL"), "{err}");
    c.expect(&["URL.RESERVE", "news", "RECRAWL", "60"], b"+OK\r\n").await;
    c.expect(&["TTL", "news"], b":-1\r\n").await;
    let err = c.error(&["EXPIRE", "news", "10"]).await;
    assert!(err.contains("recrawl window"), "{err}");
    c.expect(&["PERSIST", "news"], b":0\r\n").await;
}
