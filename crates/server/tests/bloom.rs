//! RedisBloom-compatible `BF.*` commands, byte for byte: replies, RedisBloom's error strings,
//! RESP3 shapes, pipelining.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use std::time::Duration;

use common::{TestServer, resp};
use urlseen_server::{Config, Frame};

const WRONGTYPE: &[u8] = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

#[tokio::test]
async fn reserve_and_its_errors() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["BF.RESERVE", "bf", "0.01", "1000"], b"+OK\r\n").await;
    c.expect(&["bf.reserve", "bf", "0.01", "1000"], b"-ERR item exists\r\n").await;
    let arity = b"-ERR wrong number of arguments for 'bf.reserve' command\r\n";
    c.expect(&["BF.RESERVE", "x"], arity).await;
    c.expect(&["BF.RESERVE", "x", "0.01"], arity).await;
    c.expect(&["BF.RESERVE", "x", "0.01", "10", "a", "b", "c", "d"], arity).await;
    c.expect(&["BF.RESERVE", "x", "abc", "10"], b"-ERR bad error rate\r\n").await;
    for rate in ["0", "1", "7.7", "-0.01", "-inf", "inf"] {
        c.expect(
            &["BF.RESERVE", "x", rate, "10"],
            b"-ERR error rate must be in the range (0.000000, 1.000000)\r\n",
        )
        .await;
    }
    c.expect(&["BF.RESERVE", "x", "0.01", "abc"], b"-ERR bad capacity\r\n").await;
    c.expect(&["BF.RESERVE", "x", "0.01", "1.5"], b"-ERR bad capacity\r\n").await;
    for cap in ["0", "-5"] {
        c.expect(
            &["BF.RESERVE", "x", "0.01", cap],
            b"-ERR capacity must be in the range [1, 9223372036854775807]\r\n",
        )
        .await;
    }
    c.expect(&["BF.RESERVE", "x", "0.01", "10", "EXPANSION"], b"-ERR no expansion\r\n").await;
    c.expect(&["BF.RESERVE", "x", "0.01", "10", "EXPANSION", "abc"], b"-ERR bad expansion\r\n")
        .await;
    // RedisBloom's range, [0, 32768]; 0 means NONSCALING.
    for e in ["-1", "32769", "9223372036854775807"] {
        c.expect(
            &["BF.RESERVE", "x", "0.01", "10", "EXPANSION", e],
            b"-ERR expansion must be in the range [0, 32768]\r\n",
        )
        .await;
    }
    for e in ["2", "-1", "32769"] {
        c.expect(
            &["BF.RESERVE", "x", "0.01", "10", "NONSCALING", "EXPANSION", e],
            b"-Nonscaling filters cannot expand\r\n",
        )
        .await;
    }
    c.expect(
        &["BF.RESERVE", "x", "0.01", "10", "EXPANSION", "x", "NONSCALING"],
        b"-ERR bad expansion\r\n",
    )
    .await;
    c.expect(&["BF.RESERVE", "e0", "0.01", "10", "EXPANSION", "0"], b"+OK\r\n").await;
    c.expect(&["BF.INFO", "e0", "EXPANSION"], b"*1\r\n$-1\r\n").await;
    c.expect(&["BF.RESERVE", "e0n", "0.01", "10", "NONSCALING", "EXPANSION", "0"], b"+OK\r\n")
        .await;
    c.expect(&["BF.INFO", "e0n", "EXPANSION"], b"*1\r\n$-1\r\n").await;
    // Past urlseen's largest fanout (1024), an expansion is accepted and clamped.
    c.expect(&["BF.RESERVE", "e32k", "0.01", "10", "EXPANSION", "32768"], b"+OK\r\n").await;
    c.expect(&["BF.INFO", "e32k", "EXPANSION"], b"*1\r\n:1024\r\n").await;
    c.expect(&["BF.RESERVE", "e1", "0.01", "10", "EXPANSION", "1"], b"+OK\r\n").await;
    c.expect(&["BF.INFO", "e1", "EXPANSION"], b"*1\r\n:2\r\n").await;
    c.expect(&["BF.RESERVE", "x", "0.01", "10", "NOPE"], b"-ERR syntax error\r\n").await;
    c.expect(
        &["BF.RESERVE", "huge", "0.01", "1000000000000000"],
        b"-ERR Insufficient memory to create filter\r\n",
    )
    .await;
    c.expect(&["BF.RESERVE", "exp", "0.01", "10", "expansion", "4"], b"+OK\r\n").await;
    c.expect(&["BF.INFO", "exp", "EXPANSION"], b"*1\r\n:4\r\n").await;
    c.expect(&["BF.RESERVE", "fixed", "0.01", "10", "nonscaling"], b"+OK\r\n").await;
    c.expect(&["BF.INFO", "fixed", "EXPANSION"], b"*1\r\n$-1\r\n").await;
    // None of the failed ones exists.
    c.expect(&["EXISTS", "x", "huge"], b":0\r\n").await;
}

#[tokio::test]
async fn add_madd_exists_mexists_card() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["BF.ADD", "test", "foo"], b":1\r\n").await;
    c.expect(&["BF.ADD", "test", "foo"], b":0\r\n").await;
    c.expect(&["BF.EXISTS", "test", "foo"], b":1\r\n").await;
    c.expect(&["BF.EXISTS", "test", "bar"], b":0\r\n").await;
    c.expect(&["BF.MADD", "test", "foo", "bar", "baz", "bar"], b"*4\r\n:0\r\n:1\r\n:1\r\n:0\r\n")
        .await;
    c.expect(&["BF.MEXISTS", "test", "nonexist", "foo", "baz"], b"*3\r\n:0\r\n:1\r\n:1\r\n").await;
    c.expect(&["BF.CARD", "test"], b":3\r\n").await;
    // A key that does not exist holds nothing.
    c.expect(&["BF.EXISTS", "nokey", "foo"], b":0\r\n").await;
    c.expect(&["BF.MEXISTS", "nokey", "foo", "bar"], b"*2\r\n:0\r\n:0\r\n").await;
    c.expect(&["BF.CARD", "nokey"], b":0\r\n").await;
    c.expect(&["EXISTS", "nokey"], b":0\r\n").await;
    // BF.ADD creates a filter with RedisBloom's defaults.
    c.expect(&["BF.INFO", "test", "CAPACITY"], b"*1\r\n:100\r\n").await;
    c.expect(&["BF.INFO", "test", "expansion"], b"*1\r\n:2\r\n").await;
    // Arity.
    for (cmd, args) in [
        ("bf.add", &["BF.ADD", "test"][..]),
        ("bf.add", &["BF.ADD", "test", "a", "b"][..]),
        ("bf.madd", &["BF.MADD", "test"][..]),
        ("bf.exists", &["BF.EXISTS", "test", "a", "b"][..]),
        ("bf.mexists", &["BF.MEXISTS", "test"][..]),
        ("bf.card", &["BF.CARD"][..]),
    ] {
        c.expect(
            args,
            format!("-ERR wrong number of arguments for '{cmd}' command\r\n").as_bytes(),
        )
        .await;
    }
    // Items are binary-safe bytes, not URLs.
    c.expect_bytes(&[b"BF.ADD", b"test", b"\x00\xff\r\n"], b":1\r\n").await;
    c.expect_bytes(&[b"BF.EXISTS", b"test", b"\x00\xff\r\n"], b":1\r\n").await;
    c.expect_bytes(&[b"BF.EXISTS", b"test", b"\x00\xff\r"], b":0\r\n").await;
    c.expect(&["BF.ADD", "test", ""], b":1\r\n").await;
    c.expect(&["BF.EXISTS", "test", ""], b":1\r\n").await;
    // A key must be UTF-8 to name a namespace.
    c.expect_bytes(
        &[b"BF.ADD", b"\xff", b"x"],
        b"-ERR invalid namespace name: it is not valid UTF-8\r\n",
    )
    .await;
    c.expect_bytes(&[b"BF.EXISTS", b"\xff", b"x"], b":0\r\n").await;
}

#[tokio::test]
async fn info_fields() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["BF.RESERVE", "bf", "0.001", "100"], b"+OK\r\n").await;
    // A reserved key has its filter's size (RedisBloom: 296 bytes for this one).
    let Frame::Array(reserved) = c.call(&["BF.INFO", "bf", "SIZE"]).await else { panic!() };
    assert!(matches!(reserved[0], Frame::Integer(n) if n > 0 && n <= 1024), "{reserved:?}");
    c.expect(&["BF.MADD", "bf", "a", "b"], b"*2\r\n:1\r\n:1\r\n").await;
    let Frame::Array(info) = c.call(&["BF.INFO", "bf"]).await else { panic!("not an array") };
    assert_eq!(info.len(), 10);
    let names: Vec<&Frame> = info.iter().step_by(2).collect();
    assert_eq!(
        names,
        [
            &Frame::simple("Capacity"),
            &Frame::simple("Size"),
            &Frame::simple("Number of filters"),
            &Frame::simple("Number of items inserted"),
            &Frame::simple("Expansion rate")
        ]
    );
    assert_eq!(info[1], Frame::Integer(100));
    let Frame::Integer(size) = info[3] else { panic!("size") };
    // The filter and the buffer of its two items (RedisBloom: 240 for a one-item key).
    assert!(size > 0 && size <= 1024, "{size}");
    assert_eq!(info[5], Frame::Integer(1));
    assert_eq!(info[7], Frame::Integer(2));
    assert_eq!(info[9], Frame::Integer(2));
    c.expect(&["BF.INFO", "bf", "SIZE"], format!("*1\r\n:{size}\r\n").as_bytes()).await;
    c.expect(&["BF.INFO", "bf", "filters"], b"*1\r\n:1\r\n").await;
    c.expect(&["BF.INFO", "bf", "Items"], b"*1\r\n:2\r\n").await;
    c.expect(&["BF.INFO", "bf", "wrong_value"], b"-Invalid information value\r\n").await;
    c.expect(
        &["BF.INFO", "bf", "capacity", "size"],
        b"-ERR wrong number of arguments for 'bf.info' command\r\n",
    )
    .await;
    c.expect(&["BF.INFO", "nokey"], b"-ERR not found\r\n").await;
    c.expect(&["BF.INFO"], b"-ERR wrong number of arguments for 'bf.info' command\r\n").await;
}

/// A full `NONSCALING` filter refuses a command that brings a new item, and adds none of its
/// items (RedisBloom adds up to the full point and puts the error in the array, which redis-rs
/// turns into an error for the whole reply, hiding the items that were added).
#[tokio::test]
async fn nonscaling_filters_refuse_a_command_they_cannot_take_whole() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    let full = b"-ERR non scaling filter is full\r\n";
    // More new items than the capacity: none is added, not even the first three.
    c.expect(
        &["BF.INSERT", "ns", "CAPACITY", "3", "NONSCALING", "ITEMS", "a", "b", "c", "d"],
        full,
    )
    .await;
    c.expect(&["BF.CARD", "ns"], b":0\r\n").await;
    c.expect(&["BF.MEXISTS", "ns", "a", "b", "c", "d"], b"*4\r\n:0\r\n:0\r\n:0\r\n:0\r\n").await;
    // A repeat within the command needs room once.
    c.expect(&["BF.MADD", "ns", "a", "b", "a", "c"], b"*4\r\n:1\r\n:1\r\n:0\r\n:1\r\n").await;
    // Full: items it holds still answer 0; a command with a new one is refused whole.
    c.expect(&["BF.MADD", "ns", "a", "b", "c"], b"*3\r\n:0\r\n:0\r\n:0\r\n").await;
    c.expect(&["BF.INSERT", "ns", "ITEMS", "a", "b", "c", "d", "d"], full).await;
    c.expect(&["BF.MADD", "ns", "a", "e"], full).await;
    c.expect(&["BF.ADD", "ns", "e"], full).await;
    c.expect(&["BF.ADD", "ns", "a"], b":0\r\n").await;
    c.expect(&["BF.MEXISTS", "ns", "d", "e"], b"*2\r\n:0\r\n:0\r\n").await;
    c.expect(&["BF.CARD", "ns"], b":3\r\n").await;
    // URL.SEEN on the same key follows the same rule.
    c.expect(&["URL.SEEN", "ns", "a", "e"], full).await;
    c.expect(&["URL.SEEN", "ns", "a", "b"], b"*2\r\n:1\r\n:1\r\n").await;
    let Frame::Array(info) = c.call(&["BF.INFO", "ns"]).await else { panic!("not an array") };
    assert_eq!(info[1], Frame::Integer(3));
    assert_eq!(info[7], Frame::Integer(3));
    assert_eq!(info[9], Frame::Null);
}

#[tokio::test]
async fn insert_options_and_errors() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["BF.INSERT", "m", "NOCREATE", "ITEMS", "foo", "bar"], b"-ERR not found\r\n").await;
    // As in RedisBloom (not its documentation), NOCREATE with CAPACITY is not an error.
    c.expect(
        &["BF.INSERT", "m", "NOCREATE", "CAPACITY", "10", "ITEMS", "a"],
        b"-ERR not found\r\n",
    )
    .await;
    let arity = b"-ERR wrong number of arguments for 'bf.insert' command\r\n";
    c.expect(&["BF.INSERT", "m"], arity).await;
    c.expect(&["BF.INSERT", "m", "ITEMS"], arity).await;
    c.expect(&["BF.INSERT", "m", "NOCREATE", "ITEMS"], arity).await;
    c.expect(&["BF.INSERT", "m", "NOCREATE", "CAPACITY"], arity).await;
    c.expect(&["BF.INSERT", "m", "NOCREATE", "NONSCALING"], arity).await;
    for (option, values, reply) in [
        ("CAPACITY", &["0.3", "0", "-3", "x"][..], &b"-Bad capacity\r\n"[..]),
        ("ERROR", &["big", "0", "1", "-0.5", "nan", "inf"][..], &b"-Bad error rate\r\n"[..]),
        ("EXPANSION", &["big", "-1", "32769"][..], &b"-Bad expansion\r\n"[..]),
    ] {
        for value in values {
            c.expect(&["BF.INSERT", "m", option, value, "ITEMS", "a"], reply).await;
        }
    }
    // EXPANSION 0 is NONSCALING, as in RedisBloom.
    c.expect(&["BF.INSERT", "e0", "EXPANSION", "0", "ITEMS", "a"], b"*1\r\n:1\r\n").await;
    c.expect(&["BF.INFO", "e0", "EXPANSION"], b"*1\r\n$-1\r\n").await;
    c.expect(&["BF.INSERT", "e32k", "EXPANSION", "32768", "ITEMS", "a"], b"*1\r\n:1\r\n").await;
    c.expect(&["BF.INFO", "e32k", "EXPANSION"], b"*1\r\n:1024\r\n").await;
    c.expect(&["BF.INSERT", "m", "DONTEXIST", "ITEMS", "a"], b"-Unknown argument received\r\n")
        .await;
    c.expect(&["EXISTS", "m"], b":0\r\n").await;

    c.expect(
        &[
            "BF.INSERT",
            "m",
            "ERROR",
            "0.001",
            "CAPACITY",
            "50000",
            "EXPANSION",
            "2",
            "ITEMS",
            "foo",
        ],
        b"*1\r\n:1\r\n",
    )
    .await;
    c.expect(&["BF.INFO", "m", "CAPACITY"], b"*1\r\n:50000\r\n").await;
    // Parameters only matter at creation.
    c.expect(
        &["BF.INSERT", "m", "ERROR", "0.1", "ITEMS", "foo", "bar", "baz"],
        b"*3\r\n:0\r\n:1\r\n:1\r\n",
    )
    .await;
    c.expect(&["BF.INFO", "m", "CAPACITY"], b"*1\r\n:50000\r\n").await;
    c.expect(&["BF.INSERT", "m", "NOCREATE", "ITEMS", "qux"], b"*1\r\n:1\r\n").await;
    c.expect(&["BF.CARD", "m"], b":4\r\n").await;
}

#[tokio::test]
async fn resp3_replies_are_booleans_and_a_map() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    c.send_cmd(&["HELLO", "3"]).await;
    c.read_reply().await;
    c.expect(&["BF.ADD", "t", "item"], b"#t\r\n").await;
    c.expect(&["BF.ADD", "t", "item"], b"#f\r\n").await;
    c.expect(&["BF.EXISTS", "t", "item"], b"#t\r\n").await;
    c.expect(&["BF.EXISTS", "t", "other"], b"#f\r\n").await;
    c.expect(&["BF.MADD", "t", "a", "item"], b"*2\r\n#t\r\n#f\r\n").await;
    c.expect(&["BF.INSERT", "t", "ITEMS", "b", "a"], b"*2\r\n#t\r\n#f\r\n").await;
    c.expect(&["BF.MEXISTS", "t", "a", "zz"], b"*2\r\n#t\r\n#f\r\n").await;
    c.expect(&["BF.CARD", "t"], b":3\r\n").await;
    let Frame::Map(info) = c.call(&["BF.INFO", "t"]).await else { panic!("not a map") };
    assert_eq!(info.len(), 5);
    assert_eq!(info[0], (Frame::simple("Capacity"), Frame::Integer(100)));
    c.expect(&["BF.RESERVE", "f", "0.01", "5", "NONSCALING"], b"+OK\r\n").await;
    c.expect(&["BF.INFO", "f", "EXPANSION"], b"*1\r\n_\r\n").await;
}

#[tokio::test]
async fn bf_on_a_url_namespace_is_wrongtype() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["URL.SEEN", "jobs", "https://a.example/"], b"*1\r\n:0\r\n").await;
    c.expect(&["BF.ADD", "jobs", "x"], WRONGTYPE).await;
    c.expect(&["BF.MADD", "jobs", "x"], WRONGTYPE).await;
    c.expect(&["BF.INSERT", "jobs", "ITEMS", "x"], WRONGTYPE).await;
    c.expect(&["BF.RESERVE", "jobs", "0.01", "10"], WRONGTYPE).await;
    c.expect(&["BF.EXISTS", "jobs", "x"], WRONGTYPE).await;
    c.expect(&["BF.MEXISTS", "jobs", "x"], WRONGTYPE).await;
    c.expect(&["BF.INFO", "jobs"], WRONGTYPE).await;
    c.expect(&["BF.CARD", "jobs"], WRONGTYPE).await;
    // A raw namespace made by URL.RESERVE … PROFILE none is a Bloom filter.
    c.expect(&["URL.RESERVE", "raw", "PROFILE", "none"], b"+OK\r\n").await;
    c.expect(&["BF.ADD", "raw", "x"], b":1\r\n").await;
    c.expect(&["URL.CHECK", "raw", "x"], b"*1\r\n:1\r\n").await;
}

#[tokio::test]
async fn pipelined_and_split_requests() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    let mut pipeline = Vec::new();
    for args in [
        &[&b"BF.RESERVE"[..], b"p", b"0.01", b"100"][..],
        &[b"BF.ADD", b"p", b"a"],
        &[b"BF.MADD", b"p", b"a", b"b"],
        &[b"BF.EXISTS", b"p", b"b"],
        &[b"BF.RESERVE", b"p", b"0.01", b"100"],
        &[b"BF.CARD", b"p"],
    ] {
        pipeline.extend_from_slice(&resp(args));
    }
    c.send(&pipeline).await;
    assert_eq!(
        common::show(&c.read_frames(6).await),
        common::show(b"+OK\r\n:1\r\n*2\r\n:0\r\n:1\r\n:1\r\n-ERR item exists\r\n:2\r\n")
    );
    // The same bytes, a few at a time: a partial frame is no error.
    let request = resp(&[b"BF.MEXISTS", b"p", b"a", b"zzz"]);
    for piece in request.chunks(3) {
        c.send(piece).await;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(c.read_reply().await, b"*2\r\n:1\r\n:0\r\n");
    // Inline, as telnet sends it.
    c.expect_raw(b"BF.ADD p \"with space\"\r\n", b":1\r\n").await;
    c.expect_raw(b"BF.EXISTS p 'with space'\r\n", b":1\r\n").await;
}

#[tokio::test]
async fn no_false_negatives_and_fpr_near_the_bound() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["BF.RESERVE", "acc", "0.01", "1000"], b"+OK\r\n").await;
    c.expect(&["BF.RESERVE", "grow", "0.01", "4", "EXPANSION", "2"], b"+OK\r\n").await;
    let items: Vec<String> = (0..1000).map(|i| format!("item-{i}")).collect();
    for key in ["acc", "grow"] {
        let mut args = vec!["BF.MADD", key];
        args.extend(items.iter().map(String::as_str));
        let Frame::Array(added) = c.call(&args).await else { panic!("madd") };
        assert_eq!(added.len(), items.len());
        let mut args = vec!["BF.MEXISTS", key];
        args.extend(items.iter().map(String::as_str));
        let Frame::Array(found) = c.call(&args).await else { panic!("mexists") };
        // Every item BF.MADD added (1) is found. An item it answered 0 for was a false positive
        // and never recorded, so once a split that was running finishes it may be found no
        // more: the documented quirk of `docs/protocol.md` ("not sticky across a split").
        let lost = added
            .iter()
            .zip(&found)
            .filter(|(a, f)| **a == Frame::Integer(1) && **f != Frame::Integer(1))
            .count();
        assert_eq!(lost, 0, "{key}: {lost} added items not found");
        let added = added.iter().filter(|a| **a == Frame::Integer(1)).count();
        assert!(added >= 970, "{key}: only {added} of 1000 distinct items added");
    }
    let others: Vec<String> = (0..10_000).map(|i| format!("other-{i}")).collect();
    let mut args = vec!["BF.MEXISTS", "acc"];
    args.extend(others.iter().map(String::as_str));
    let Frame::Array(found) = c.call(&args).await else { panic!("mexists") };
    let fp = found.iter().filter(|f| **f == Frame::Integer(1)).count();
    assert!(fp <= 200, "{fp} false positives in 10 000 at error rate 0.01");
}

/// `maxmemory` bounds all namespaces together: a reservation that would pass it is refused
/// with RedisBloom's error, nothing is allocated, and the server goes on serving.
#[tokio::test]
async fn maxmemory_refuses_a_reservation_past_the_budget_and_keeps_serving() {
    use std::sync::Arc;
    use urlseen_engine::Db;
    use urlseen_server::{App, AppConfig};
    let config = AppConfig { maxmemory: 256 << 20, ..AppConfig::default() };
    // As `serve` runs it: leaf fingerprints spilled to disk, RAM for the filters.
    let app = Arc::new(App::new(Db::temporary(None).unwrap(), config));
    let server = TestServer::start_app(Config::default(), app.clone()).await;
    let mut c = server.connect().await;
    c.expect(
        &["BF.RESERVE", "huge", "0.01", "2000000000"],
        b"-ERR Insufficient memory to create filter\r\n",
    )
    .await;
    assert!(app.db().namespace_names().is_empty(), "a refused reservation left a namespace");
    // Within the budget alone, each; the second would take the total past it.
    c.expect(&["BF.RESERVE", "a", "0.01", "100000000"], b"+OK\r\n").await;
    c.expect(
        &["BF.RESERVE", "b", "0.01", "150000000"],
        b"-ERR Insufficient memory to create filter\r\n",
    )
    .await;
    c.expect(&["BF.ADD", "a", "x"], b":1\r\n").await;
    c.expect(&["PING"], b"+PONG\r\n").await;
}

/// Past `maxmemory`, writes get Redis' `-OOM` (its `noeviction` policy) and reads go on.
#[tokio::test]
async fn writes_past_maxmemory_get_oom_and_reads_go_on() {
    use std::sync::Arc;
    use urlseen_engine::Db;
    use urlseen_server::{App, AppConfig};
    // 2 MiB: a 100,000-item filter fits; grown to 3M items by splits it does not.
    let config = AppConfig { maxmemory: 2 << 20, ..AppConfig::default() };
    // As `serve` runs it: leaf fingerprints spilled to disk, RAM for the filters.
    let app = Arc::new(App::new(Db::temporary(None).unwrap(), config));
    let server = TestServer::start_app(Config::default(), app.clone()).await;
    let mut c = server.connect().await;
    c.expect(&["BF.RESERVE", "bf", "0.01", "100000"], b"+OK\r\n").await;
    c.expect(&["BF.ADD", "bf", "first"], b":1\r\n").await;
    let ns = app.db().namespace("bf").unwrap();
    let fps: Vec<u64> =
        (1..=3_000_000u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)).collect();
    let mut out = vec![false; fps.len()];
    ns.seen_fingerprints(&fps, &mut out).unwrap();
    app.db().wait_for_splits();
    assert!(ns.stats().memory_bytes > 2 << 20, "the test did not pass the budget");
    tokio::time::sleep(Duration::from_millis(150)).await;
    c.expect(
        &["BF.ADD", "bf", "second"],
        b"-OOM command not allowed when used memory > 'maxmemory'.\r\n",
    )
    .await;
    c.expect(&["BF.EXISTS", "bf", "first"], b":1\r\n").await;
    c.expect(&["PING"], b"+PONG\r\n").await;
}

/// Seen stays seen (issue 11): an item `BF.ADD` answered 0 ("may exist") on a false positive
/// is still answered 1 by `BF.EXISTS` after the filter has grown through many splits.
#[tokio::test]
async fn a_false_positive_add_stays_existing_after_splits() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    // A loose rate and a small first filter: many false positives, then many splits.
    c.expect(&["BF.RESERVE", "bf", "0.1", "200"], b"+OK\r\n").await;
    async fn madd(c: &mut common::Client, items: &[String]) -> Vec<i64> {
        let mut args = vec!["BF.MADD", "bf"];
        args.extend(items.iter().map(String::as_str));
        let Frame::Array(replies) = c.call(&args).await else { panic!("not an array") };
        replies.iter().map(|r| if let Frame::Integer(n) = r { *n } else { -1 }).collect()
    }
    let mut false_positives = Vec::new();
    for round in 0..40 {
        let items: Vec<String> = (0..250).map(|i| format!("item-{round}-{i}")).collect();
        let added = madd(&mut c, &items).await;
        // Every item is distinct and new: a 0 is a false positive.
        false_positives.extend(items.into_iter().zip(added).filter(|p| p.1 == 0).map(|p| p.0));
    }
    assert!(false_positives.len() > 100, "{} false positives", false_positives.len());
    // Grow it twentyfold past that.
    for round in 40..440 {
        let items: Vec<String> = (0..500).map(|i| format!("item-{round}-{i}")).collect();
        madd(&mut c, &items).await;
    }
    let mut args = vec!["BF.MEXISTS", "bf"];
    args.extend(false_positives.iter().map(String::as_str));
    let Frame::Array(exists) = c.call(&args).await else { panic!("not an array") };
    let flipped = exists.iter().filter(|r| **r != Frame::Integer(1)).count();
    assert_eq!(flipped, 0, "{flipped} of {} items answered \"exists\" flipped", exists.len());
}

/// Error rates within about 1e-11 of 1 once made `BF.RESERVE` spin forever in the sizing math,
/// holding the keyspace: the server answered nothing more. Each must answer at once, and the
/// server must go on serving.
#[tokio::test]
async fn error_rates_next_to_one_answer_and_the_server_goes_on() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    let rates = ["0.9999999999999999", "0.999999999999999", "0.99999999999", "0.9999"];
    for (i, rate) in rates.iter().enumerate() {
        let key = format!("k{i}");
        for args in [
            vec!["BF.RESERVE", key.as_str(), rate, "100", "NONSCALING"],
            vec!["BF.ADD", key.as_str(), "a"],
            vec!["BF.EXISTS", key.as_str(), "a"],
        ] {
            let reply = tokio::time::timeout(Duration::from_secs(20), c.call(&args))
                .await
                .unwrap_or_else(|_| panic!("{args:?} did not answer"));
            assert!(!matches!(reply, Frame::Error(_)), "{args:?}: {reply:?}");
        }
    }
    let big = tokio::time::timeout(
        Duration::from_secs(20),
        c.call(&["BF.RESERVE", "big", "0.9999999999999999", "100000000"]),
    )
    .await
    .expect("a large capacity answers too");
    assert_eq!(big, Frame::Simple("OK".into()));
    let mut other = server.connect().await;
    other.expect(&["PING"], b"+PONG\r\n").await;
}

/// Pipelined `BF.ADD` and `BF.EXISTS` calls run as engine batches: the replies are exactly
/// those of the same calls sent one at a time (repeats, runs of several keys, a full
/// non-scaling filter, a wrong type, a missing key, a wrong arity in the middle).
#[tokio::test]
async fn pipelined_bf_add_and_exists_answer_as_one_by_one() {
    let mut script: Vec<Vec<String>> = vec![
        vec!["BF.RESERVE".into(), "full".into(), "0.01".into(), "3".into(), "NONSCALING".into()],
        vec!["URL.RESERVE".into(), "urls".into()],
    ];
    for i in 0..300 {
        let key = ["a", "a", "b", "full", "urls", "a"][i % 6];
        let item = format!("item-{}", i % 37);
        script.push(vec!["BF.ADD".into(), key.into(), item.clone()]);
        if i % 5 == 0 {
            script.push(vec!["BF.EXISTS".into(), key.into(), format!("item-{}", i % 41)]);
            script.push(vec!["BF.EXISTS".into(), "missing".into(), item.clone()]);
        }
        if i % 50 == 7 {
            script.push(vec!["BF.ADD".into(), "a".into()]);
        }
    }
    let run = |pipelined: bool| {
        let script = script.clone();
        async move {
            let server = TestServer::start_engine(Config::default()).await;
            let mut c = server.connect().await;
            if pipelined {
                let mut bytes = Vec::new();
                for args in &script {
                    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
                    bytes.extend_from_slice(&resp(&args));
                }
                c.send(&bytes).await;
                common::show(&c.read_frames(script.len()).await)
            } else {
                let mut all = Vec::new();
                for args in &script {
                    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
                    c.send(&resp(&args)).await;
                    all.extend_from_slice(&c.read_reply().await);
                }
                common::show(&all)
            }
        }
    };
    // A call alone is a batch of one: first the exact answers of a short pipeline.
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    let mut bytes = Vec::new();
    for args in [
        &[&b"BF.ADD"[..], b"k", b"x"][..],
        &[b"BF.ADD", b"k", b"x"],
        &[b"BF.ADD", b"k", b"y"],
        &[b"BF.EXISTS", b"k", b"x"],
        &[b"BF.EXISTS", b"k", b"z"],
        &[b"BF.EXISTS", b"nope", b"x"],
    ] {
        bytes.extend_from_slice(&resp(args));
    }
    c.send(&bytes).await;
    assert_eq!(
        common::show(&c.read_frames(6).await),
        common::show(b":1\r\n:0\r\n:1\r\n:1\r\n:0\r\n:0\r\n")
    );
    let (pipelined, one_by_one) = (run(true).await, run(false).await);
    assert_eq!(pipelined, one_by_one);
    assert!(pipelined.contains("non scaling filter is full"), "{pipelined}");
    assert!(pipelined.contains("WRONGTYPE"), "{pipelined}");
    assert!(pipelined.contains("wrong number of arguments"), "{pipelined}");
}

/// `COMMAND DOCS` documents RedisBloom's commands as Redis documents a module's (group
/// `module`, `module` `bf`), with the arguments of RedisBloom's `commands.json`.
#[tokio::test]
async fn command_docs_of_bf_commands_are_redisbloom_s() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    c.send_cmd(&["HELLO", "3"]).await;
    c.read_reply().await;
    let b = |s: &str| Frame::bulk(s.to_owned());
    let arg = |name: &str, kind: &str, token: Option<&str>, flags: &[&'static str]| {
        let mut fields = vec![(b("name"), b(name)), (b("type"), b(kind))];
        if let Some(token) = token {
            fields.push((b("token"), b(token)));
        }
        if !flags.is_empty() {
            fields
                .push((b("flags"), Frame::Set(flags.iter().map(|&f| Frame::simple(f)).collect())));
        }
        Frame::Map(fields)
    };
    let Frame::Map(docs) = c.call(&["COMMAND", "DOCS", "bf.insert"]).await else { panic!() };
    let many = "O(k * n), where k is the number of hash functions and n is the number of items";
    let want = Frame::Map(vec![
        (
            b("summary"),
            b(
                "Adds one or more items to a Bloom Filter. A filter will be created if it does not exist",
            ),
        ),
        (b("since"), b("1.0.0")),
        (b("group"), b("module")),
        (b("complexity"), b(many)),
        (b("module"), b("bf")),
        (
            b("arguments"),
            Frame::Array(vec![
                arg("key", "key", None, &[]),
                arg("capacity", "integer", Some("CAPACITY"), &["optional"]),
                arg("error", "double", Some("ERROR"), &["optional"]),
                arg("expansion", "integer", Some("EXPANSION"), &["optional"]),
                arg("nocreate", "pure-token", Some("NOCREATE"), &["optional"]),
                arg("nonscaling", "pure-token", Some("NONSCALING"), &["optional"]),
                arg("items", "pure-token", Some("ITEMS"), &[]),
                arg("item", "string", None, &["multiple"]),
            ]),
        ),
    ]);
    assert_eq!(docs, vec![(b("bf.insert"), want)]);
    // BF.INFO's optional field is a oneof of tokens.
    let Frame::Map(docs) = c.call(&["COMMAND", "DOCS", "bf.info"]).await else { panic!() };
    let Frame::Map(info) = &docs[0].1 else { panic!() };
    let args = info.iter().find(|(k, _)| *k == b("arguments")).map(|(_, v)| v.clone());
    let tokens = ["CAPACITY", "SIZE", "FILTERS", "ITEMS", "EXPANSION"]
        .map(|t| arg(&t.to_ascii_lowercase(), "pure-token", Some(t), &[]));
    let mut oneof = match arg("single_value", "oneof", None, &["optional"]) {
        Frame::Map(fields) => fields,
        _ => unreachable!(),
    };
    oneof.push((b("arguments"), Frame::Array(tokens.to_vec())));
    assert_eq!(args, Some(Frame::Array(vec![arg("key", "key", None, &[]), Frame::Map(oneof)])));
    // Every BF command: group module, module bf; FILTERBY MODULE lists them.
    let names = [
        "bf.reserve",
        "bf.add",
        "bf.madd",
        "bf.insert",
        "bf.exists",
        "bf.mexists",
        "bf.info",
        "bf.card",
        "bf.scandump",
        "bf.loadchunk",
    ];
    for name in names {
        let Frame::Map(docs) = c.call(&["COMMAND", "DOCS", name]).await else { panic!() };
        let Frame::Map(fields) = &docs[0].1 else { panic!("{name}") };
        let get = |k: &str| fields.iter().find(|(n, _)| *n == b(k)).map(|(_, v)| v.clone());
        assert_eq!((get("group"), get("module")), (Some(b("module")), Some(b("bf"))), "{name}");
    }
    let Frame::Array(listed) = c.call(&["COMMAND", "LIST", "FILTERBY", "MODULE", "BF"]).await
    else {
        panic!()
    };
    let mut listed: Vec<Frame> = listed;
    let mut want: Vec<Frame> = names.iter().map(|n| b(n)).collect();
    listed.sort_by_key(|f| format!("{f:?}"));
    want.sort_by_key(|f| format!("{f:?}"));
    assert_eq!(listed, want);
    let Frame::Array(none) = c.call(&["COMMAND", "LIST", "FILTERBY", "MODULE", "cf"]).await else {
        panic!()
    };
    assert!(none.is_empty());
}

/// `Number of filters` counts the leaf filters that hold memory, at least 1, as RedisBloom
/// counts its sub-filters: a fresh big reservation has 1, not one per leaf it will need.
#[tokio::test]
async fn a_fresh_big_reservation_reports_one_filter() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["BF.RESERVE", "big", "0.000001", "300000000"], b"+OK\r\n").await;
    c.expect(&["BF.INFO", "big", "FILTERS"], b"*1\r\n:1\r\n").await;
    c.expect(&["BF.ADD", "big", "x"], b":1\r\n").await;
    c.expect(&["BF.INFO", "big", "FILTERS"], b"*1\r\n:1\r\n").await;
    // Items spread over the leaves allocate more of them.
    let items: Vec<String> = (0..200).map(|i| format!("item-{i}")).collect();
    let mut args = vec!["BF.MADD", "big"];
    args.extend(items.iter().map(String::as_str));
    c.call(&args).await;
    let Frame::Array(reply) = c.call(&["BF.INFO", "big", "FILTERS"]).await else { panic!() };
    let Some(Frame::Integer(filters)) = reply.first() else { panic!("{reply:?}") };
    assert!((100..=201).contains(filters), "{filters} filters for 201 items over 1,416 leaves");
}
