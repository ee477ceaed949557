//! Key lifetimes: `EXPIRE`, `PEXPIRE`, `EXPIREAT`, `PEXPIREAT` (with `NX|XX|GT|LT`), `TTL`,
//! `PTTL`, `EXPIRETIME`, `PEXPIRETIME`, `PERSIST`, sent to urlseen and to a real
//! `redis-server` (required, as for the other Redis tests: scripts/check.sh installs it), the
//! same bytes back; expiry across a restart with a data directory; an expired namespace's
//! files deleted by the active cycle; `DEL` freeing a namespace's memory.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Client, EXPIRE_SCRIPT as SCRIPT, FAR, Redis, TestServer, WAIT, show};
use urlseen_engine::Db;
use urlseen_server::{App, AppConfig, Config, Frame};

/// Sends `args` and returns the reply's bytes.
async fn ask(c: &mut Client, args: &[&str]) -> Vec<u8> {
    c.send_cmd(args).await;
    c.read_reply().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_expire_family_matches_redis_byte_for_byte() {
    let redis = Redis::start().await;
    let server = TestServer::start_engine(Config::default()).await;
    let (mut r, mut u) = (redis.connect().await, server.connect().await);
    for key in ["k", "v", "x"] {
        ask(&mut r, &["SET", key, "1"]).await;
        ask(&mut u, &["BF.ADD", key, "a"]).await;
    }
    for key in ["u", "w", "y"] {
        ask(&mut r, &["SET", key, "1"]).await;
        ask(&mut u, &["URL.SEEN", key, "https://a.example/"]).await;
    }
    for args in SCRIPT {
        let (want, got) = (ask(&mut r, args).await, ask(&mut u, args).await);
        assert_eq!(show(&got), show(&want), "{args:?}");
    }
    // What depends on the clock: within a second of Redis's.
    ask(&mut r, &["SET", "t", "1"]).await;
    ask(&mut u, &["BF.ADD", "t", "a"]).await;
    for c in [&mut r, &mut u] {
        assert_eq!(ask(c, &["PEXPIRE", "t", "50000"]).await, b":1\r\n");
    }
    let pttl = |reply: Vec<u8>| -> i64 {
        std::str::from_utf8(&reply).unwrap().trim_start_matches(':').trim_end().parse().unwrap()
    };
    let (want, got) =
        (pttl(ask(&mut r, &["PTTL", "t"]).await), pttl(ask(&mut u, &["PTTL", "t"]).await));
    assert!((49_000..=50_000).contains(&got) && (want - got).abs() < 1_000, "{got} vs {want}");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let at = pttl(ask(&mut u, &["PEXPIRETIME", "t"]).await);
    assert!((at - now.as_millis() as i64 - 50_000).abs() < 1_000);
}

#[tokio::test]
async fn expired_keys_are_gone_for_every_command() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["URL.RESERVE", "job", "CAPACITY", "1000", "TTL", "86400"], b"+OK\r\n").await;
    c.expect(&["TTL", "job"], b":86400\r\n").await;
    c.expect(&["URL.SEEN", "job", "https://a.example/"], b"*1\r\n:0\r\n").await;
    c.expect(&["URL.SEEN", "job", "https://a.example/"], b"*1\r\n:1\r\n").await;
    c.expect(&["BF.ADD", "bf", "x"], b":1\r\n").await;
    c.expect(&["BF.ADD", "short", "x"], b":1\r\n").await;
    let Frame::Bulk(info) = c.call(&["INFO", "keyspace"]).await else { panic!() };
    let info = String::from_utf8_lossy(&info).into_owned();
    assert!(info.contains("db0:keys=3,expires=1,avg_ttl=86"), "{info}");
    c.expect(&["PEXPIRE", "job", "100"], b":1\r\n").await;
    c.expect(&["PEXPIRE", "short", "100"], b":1\r\n").await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    // The connection's cached namespace is not used past its time.
    c.expect(&["URL.SEEN", "job", "https://a.example/"], b"*1\r\n:0\r\n").await;
    c.expect(&["TTL", "job"], b":-1\r\n").await;
    c.expect(&["EXISTS", "short"], b":0\r\n").await;
    c.expect(&["TYPE", "short"], b"+none\r\n").await;
    c.expect(&["DEL", "short"], b":0\r\n").await;
    c.expect(&["KEYS", "*"], b"*2\r\n$2\r\nbf\r\n$3\r\njob\r\n").await;
    c.expect(&["DBSIZE"], b":2\r\n").await;
    let Frame::Bulk(info) = c.call(&["INFO", "keyspace"]).await else { panic!() };
    assert!(String::from_utf8_lossy(&info).contains("db0:keys=2,expires=0,avg_ttl=0"));
    c.expect(
        &["URL.RESERVE", "bad", "TTL", "0"],
        b"-ERR bad TTL: expected a positive number of seconds\r\n",
    )
    .await;
    c.expect(
        &["URL.RESERVE", "bad", "TTL", "x"],
        b"-ERR bad TTL: expected a positive number of seconds\r\n",
    )
    .await;
    c.expect(&["EXISTS", "bad"], b":0\r\n").await;
}

/// Where a namespace's files are (`DIR/ns/<hex of name>`, docs/durability.md).
fn ns_dir(root: &Path, name: &str) -> PathBuf {
    let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
    root.join("ns").join(hex)
}

async fn start(dir: &Path) -> TestServer {
    let app = Arc::new(App::new(Db::open(dir).unwrap(), AppConfig::default()));
    TestServer::start_app(Config::default(), app).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_holds_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut server = start(dir.path()).await;
        let mut c = server.connect().await;
        // With a directory of its own (small namespaces live in the data directory's journal).
        c.expect(&["URL.RESERVE", "soon", "CAPACITY", "100000"], b"+OK\r\n").await;
        c.expect(&["URL.SEEN", "soon", "https://a.example/"], b"*1\r\n:0\r\n").await;
        c.expect(&["URL.SEEN", "small", "https://a.example/"], b"*1\r\n:0\r\n").await;
        c.expect(&["PEXPIRE", "small", "400"], b":1\r\n").await;
        c.expect(&["URL.SEEN", "later", "https://a.example/"], b"*1\r\n:0\r\n").await;
        c.expect(&["URL.SEEN", "kept", "https://a.example/"], b"*1\r\n:0\r\n").await;
        c.expect(&["BF.ADD", "bf", "x"], b":1\r\n").await;
        c.expect(&["PEXPIRE", "soon", "400"], b":1\r\n").await;
        c.expect(&["PEXPIREAT", "later", FAR], b":1\r\n").await;
        c.expect(&["PEXPIREAT", "bf", FAR], b":1\r\n").await;
        c.expect(&["PEXPIREAT", "kept", FAR], b":1\r\n").await;
        c.expect(&["PERSIST", "kept"], b":1\r\n").await;
        drop(c);
        server.shutdown().await;
    }
    // Past its time while the server was down.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(ns_dir(dir.path(), "soon").exists());
    let server = start(dir.path()).await;
    assert!(!ns_dir(dir.path(), "soon").exists(), "dropped at open, its files removed");
    let mut c = server.connect().await;
    c.expect(&["EXISTS", "soon"], b":0\r\n").await;
    c.expect(&["TTL", "soon"], b":-2\r\n").await;
    c.expect(&["EXISTS", "small"], b":0\r\n").await;
    c.expect(&["URL.CHECK", "small", "https://a.example/"], b"*1\r\n:0\r\n").await;
    c.expect(&["PEXPIRETIME", "later"], format!(":{FAR}\r\n").as_bytes()).await;
    c.expect(&["PEXPIRETIME", "bf"], format!(":{FAR}\r\n").as_bytes()).await;
    c.expect(&["TTL", "kept"], b":-1\r\n").await;
    c.expect(&["URL.CHECK", "later", "https://a.example/"], b"*1\r\n:1\r\n").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_active_cycle_deletes_an_expired_namespace_s_files() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path()).await;
    let mut c = server.connect().await;
    // With directories of their own (small namespaces live in the data directory's journal).
    c.expect(&["URL.RESERVE", "job", "CAPACITY", "100000"], b"+OK\r\n").await;
    c.expect(&["BF.RESERVE", "bf", "0.01", "100000"], b"+OK\r\n").await;
    c.expect(&["URL.RESERVE", "stays", "CAPACITY", "100000"], b"+OK\r\n").await;
    c.expect(&["URL.SEEN", "job", "https://a.example/"], b"*1\r\n:0\r\n").await;
    c.expect(&["BF.ADD", "bf", "x"], b":1\r\n").await;
    c.expect(&["URL.SEEN", "stays", "https://a.example/"], b"*1\r\n:0\r\n").await;
    c.expect(&["PEXPIRE", "job", "200"], b":1\r\n").await;
    c.expect(&["PEXPIRE", "bf", "200"], b":1\r\n").await;
    assert!(ns_dir(dir.path(), "job").exists() && ns_dir(dir.path(), "bf").exists());
    // No command touches them: the background cycle must free them.
    let deadline = Instant::now() + WAIT;
    while ns_dir(dir.path(), "job").exists() || ns_dir(dir.path(), "bf").exists() {
        assert!(Instant::now() < deadline, "an expired namespace's files are still there");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ns_dir(dir.path(), "stays").exists());
    let Frame::Bulk(info) = c.call(&["INFO", "keyspace"]).await else { panic!() };
    assert!(String::from_utf8_lossy(&info).contains("db0:keys=1,expires=0"));
}

fn used_memory(info: &Frame) -> u64 {
    let Frame::Bulk(info) = info else { panic!() };
    let info = String::from_utf8_lossy(info);
    let line = info.lines().find(|l| l.starts_with("used_memory:")).unwrap();
    line["used_memory:".len()..].trim().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn del_and_unlink_free_a_namespace_s_memory_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path()).await;
    let mut c = server.connect().await;
    c.expect(&["BF.ADD", "small", "x"], b":1\r\n").await;
    let base = used_memory(&c.call(&["INFO", "memory"]).await);
    for name in ["big", "big2"] {
        c.expect(&["URL.RESERVE", name, "CAPACITY", "2000000"], b"+OK\r\n").await;
        let urls: Vec<String> = (0..5_000).map(|i| format!("https://h{i}.example/p")).collect();
        let mut args = vec!["URL.SEEN", name];
        args.extend(urls.iter().map(String::as_str));
        c.call(&args).await;
    }
    let Frame::Integer(usage) = c.call(&["MEMORY", "USAGE", "big"]).await else { panic!() };
    assert!(usage > 100_000, "MEMORY USAGE answers the namespace's bytes: {usage}");
    let full = used_memory(&c.call(&["INFO", "memory"]).await);
    assert!(full >= base + 2 * usage as u64 - 1, "{full} vs {base} + 2 × {usage}");
    c.expect(&["DEL", "big"], b":1\r\n").await;
    assert!(!ns_dir(dir.path(), "big").exists(), "DEL removes the files");
    c.expect(&["MEMORY", "USAGE", "big"], b"$-1\r\n").await;
    let after = used_memory(&c.call(&["INFO", "memory"]).await);
    assert_eq!(after, full - usage as u64, "DEL frees what MEMORY USAGE reported");
    c.expect(&["UNLINK", "big2", "nokey"], b":1\r\n").await;
    assert!(!ns_dir(dir.path(), "big2").exists());
    assert_eq!(used_memory(&c.call(&["INFO", "memory"]).await), base);
    c.expect(
        &["MEMORY", "DOCTOR"],
        b"-ERR this MEMORY subcommand is not supported by urlseen: MEMORY USAGE <key> is; INFO memory reports the server\r\n",
    )
    .await;
    c.expect(&["MEMORY", "USAGE", "small", "SAMPLES"], b"-ERR syntax error\r\n").await;
    let Frame::Integer(_) = c.call(&["MEMORY", "USAGE", "small", "SAMPLES", "5"]).await else {
        panic!()
    };
}
