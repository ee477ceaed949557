//! What operators read: SLOWLOG, INFO commandstats and latencystats, CLIENT LIST and
//! CONFIG GET/SET, byte for byte where Redis' replies are fixed, over a real socket.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use bytes::Bytes;
use common::{TestServer, resp};
use urlseen_server::{Config, Frame};

/// The text of a bulk (RESP2) or verbatim (RESP3) string reply.
fn text(reply: Frame) -> String {
    match reply {
        Frame::Bulk(b) | Frame::Verbatim { data: b, .. } => String::from_utf8(b.to_vec()).unwrap(),
        other => panic!("{other:?}"),
    }
}

fn log_everything() -> Config {
    Config { slowlog_log_slower_than: 0, ..Config::default() }
}

/// The entries of a `SLOWLOG GET` reply: (id, timestamp, duration, argv, addr, name).
fn entries(reply: Frame) -> Vec<(i64, i64, i64, Vec<Bytes>, Bytes, Bytes)> {
    let Frame::Array(items) = reply else { panic!("{reply:?}") };
    items
        .into_iter()
        .map(|item| match item {
            Frame::Array(f) => match <[Frame; 6]>::try_from(f).unwrap() {
                [
                    Frame::Integer(id),
                    Frame::Integer(ts),
                    Frame::Integer(us),
                    Frame::Array(argv),
                    Frame::Bulk(addr),
                    Frame::Bulk(name),
                ] => {
                    let argv = argv
                        .into_iter()
                        .map(|a| match a {
                            Frame::Bulk(b) => b,
                            other => panic!("{other:?}"),
                        })
                        .collect();
                    (id, ts, us, argv, addr, name)
                }
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn slowlog_keeps_entries_in_redis_shape() {
    let server = TestServer::start(log_everything()).await;
    let mut c = server.connect().await;
    c.expect(&["CLIENT", "SETNAME", "crawler-1"], b"+OK\r\n").await;
    c.expect(&["SLOWLOG", "RESET"], b"+OK\r\n").await;
    c.expect(&["PING", "hello"], b"$5\r\nhello\r\n").await;
    let info = text(c.call(&["CLIENT", "INFO"]).await);
    let addr = info.split(' ').find_map(|f| f.strip_prefix("addr=")).unwrap().to_owned();

    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let got = entries(c.call(&["SLOWLOG", "GET", "2"]).await);
    // Newest first: CLIENT INFO, then PING (SLOWLOG RESET itself ran before the reset ended).
    assert_eq!(got.len(), 2, "{got:?}");
    let (id, ts, us, argv, a, name) = &got[1];
    assert_eq!(argv, &["PING", "hello"]);
    assert_eq!(got[0].3, ["CLIENT", "INFO"]);
    assert_eq!(got[0].0, id + 1);
    assert!((ts - now.as_secs() as i64).abs() <= 2, "{ts}");
    assert!(*us >= 0 && *us < 1_000_000, "{us}");
    assert_eq!((a.as_ref(), name.as_ref()), (addr.as_bytes(), b"crawler-1".as_slice()));

    // -1: all of them; LEN counts them, the SLOWLOG GETs included.
    let all = entries(c.call(&["SLOWLOG", "GET", "-1"]).await);
    assert_eq!(all.len(), 4, "{all:?}");
    c.expect(&["SLOWLOG", "LEN"], b":5\r\n").await;
    c.expect(&["SLOWLOG", "GET", "0"], b"*0\r\n").await;
    c.expect(&["SLOWLOG", "RESET"], b"+OK\r\n").await;
    c.expect(&["SLOWLOG", "LEN"], b":1\r\n").await; // the RESET itself
}

#[tokio::test]
async fn slowlog_errors_and_help_as_redis() {
    let server = TestServer::start(Config::default()).await;
    let mut c = server.connect().await;
    let bad_count = b"-ERR count should be greater than or equal to -1\r\n";
    c.expect(&["SLOWLOG", "GET", "-2"], bad_count).await;
    c.expect(&["SLOWLOG", "GET", "x"], bad_count).await;
    c.expect(
        &["SLOWLOG", "GET", "1", "2"],
        b"-ERR unknown subcommand or wrong number of arguments for 'GET'. Try SLOWLOG HELP.\r\n",
    )
    .await;
    c.expect(
        &["SLOWLOG", "LEN", "x"],
        b"-ERR wrong number of arguments for 'slowlog|len' command\r\n",
    )
    .await;
    c.expect(&["SLOWLOG"], b"-ERR wrong number of arguments for 'slowlog' command\r\n").await;
    c.expect(&["SLOWLOG", "NOPE"], b"-ERR unknown subcommand 'NOPE'. Try SLOWLOG HELP.\r\n").await;
    let help = c.call(&["SLOWLOG", "HELP"]).await;
    let Frame::Array(lines) = help else { panic!("{help:?}") };
    assert_eq!(lines.len(), 12);
    assert_eq!(
        lines[0],
        Frame::simple("SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
    );
    // The default threshold, 10 ms: quick commands are not logged.
    for _ in 0..10 {
        c.expect(&["PING"], b"+PONG\r\n").await;
    }
    c.expect(&["SLOWLOG", "LEN"], b":0\r\n").await;
}

#[tokio::test]
async fn slowlog_settings_and_truncation() {
    let server = TestServer::start(Config { slowlog_max_len: 2, ..log_everything() }).await;
    let mut c = server.connect().await;
    for _ in 0..5 {
        c.expect(&["PING"], b"+PONG\r\n").await;
    }
    c.expect(&["SLOWLOG", "LEN"], b":2\r\n").await;

    // 40 arguments: 31 kept, then "... (9 more arguments)"; a 200-byte one is cut at 128.
    let long = "x".repeat(200);
    let mut args: Vec<String> = vec!["CLIENT".into(), "LIST".into(), "ID".into(), long];
    args.extend((0..36).map(|i| i.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let _ = c.call(&refs).await;
    let got = entries(c.call(&["SLOWLOG", "GET", "2"]).await);
    let argv = &got[0].3;
    assert_eq!(argv.len(), 32, "{argv:?}");
    assert_eq!(argv[3], format!("{}... (72 more bytes)", "x".repeat(128)));
    assert_eq!(argv[30], "26");
    assert_eq!(argv[31], "... (9 more arguments)");

    // -1 disables it; CONFIG SET changes it while the server runs.
    c.expect(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"], b"+OK\r\n").await;
    c.expect(&["SLOWLOG", "RESET"], b"+OK\r\n").await;
    c.expect(&["PING"], b"+PONG\r\n").await;
    c.expect(&["SLOWLOG", "LEN"], b":0\r\n").await;
}

#[tokio::test]
async fn slowlog_redacts_passwords() {
    let config = Config { requirepass: Some("s3cret".into()), ..log_everything() };
    let server = TestServer::start(config).await;
    let mut c = server.connect().await;
    c.expect(&["AUTH", "s3cret"], b"+OK\r\n").await;
    let got = entries(c.call(&["SLOWLOG", "GET", "1"]).await);
    assert_eq!(got[0].3, ["AUTH", "(redacted)"]);
}

#[tokio::test]
async fn a_pipelined_batch_is_one_slowlog_entry_with_its_whole_time() {
    let server = TestServer::start_engine(log_everything()).await;
    let mut c = server.connect().await;
    c.expect(&["SLOWLOG", "RESET"], b"+OK\r\n").await;
    let mut pipeline = Vec::new();
    for i in 0..5 {
        let url = format!("https://a.example/{i}");
        pipeline.extend(resp(&[b"URL.SEEN", b"jobs", url.as_bytes()]));
    }
    c.send(&pipeline).await;
    assert_eq!(c.read_frames(5).await, b"*1\r\n:0\r\n".repeat(5));
    let got = entries(c.call(&["SLOWLOG", "GET"]).await);
    let seen: Vec<_> = got.iter().filter(|e| e.3[0] == "URL.SEEN").collect();
    // One read holds the whole pipeline, so it runs as one batch: one entry.
    assert_eq!(seen.len(), 1, "{got:?}");
    assert_eq!(
        seen[0].3,
        ["URL.SEEN", "jobs", "https://a.example/0", "... (4 more pipelined calls in this batch)"]
    );
}

#[tokio::test]
async fn info_commandstats_and_latencystats_as_redis_7() {
    let server = TestServer::start(Config::default()).await;
    let mut c = server.connect().await;
    for _ in 0..3 {
        c.expect(&["PING"], b"+PONG\r\n").await;
    }
    // PING checks its own arguments (arity -1), so this call ran and failed, as in Redis;
    // ECHO's arity is 2, so this one is rejected before it runs.
    c.expect(&["PING", "a", "b"], b"-ERR wrong number of arguments for 'ping' command\r\n").await;
    c.expect(&["ECHO"], b"-ERR wrong number of arguments for 'echo' command\r\n").await;
    c.expect(&["CLIENT", "ID"], b":1\r\n").await;
    let text = text(c.call(&["INFO", "commandstats", "latencystats"]).await);
    let line = |key: &str| {
        text.split("\r\n")
            .find_map(|l| l.strip_prefix(key).and_then(|l| l.strip_prefix(':')))
            .unwrap_or_else(|| panic!("no {key} in {text}"))
            .to_owned()
    };
    let ping = line("cmdstat_ping");
    let fields: Vec<&str> = ping.split(',').map(|f| f.split('=').next().unwrap()).collect();
    assert_eq!(fields, ["calls", "usec", "usec_per_call", "rejected_calls", "failed_calls"]);
    assert!(
        ping.starts_with("calls=4,") && ping.ends_with(",rejected_calls=0,failed_calls=1"),
        "{ping}"
    );
    let echo = line("cmdstat_echo");
    assert_eq!(echo, "calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0");
    assert!(text.contains("cmdstat_client|id:calls=1,"), "{text}");

    assert!(text.contains("# Latencystats\r\n"), "{text}");
    let latency = line("latency_percentiles_usec_ping");
    let values: Vec<(String, f64)> = latency
        .split(',')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            assert_eq!(v.split('.').nth(1).map(str::len), Some(3), "{latency}");
            (k.to_owned(), v.parse().unwrap())
        })
        .collect();
    let keys: Vec<&str> = values.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["p50", "p99", "p99.9"]);
    assert!(values[0].1 > 0.0 && values[0].1 <= values[1].1 && values[1].1 <= values[2].1);
    latency_line_present(&text, "client|id");
    // Neither is in plain INFO.
    let plain = self::text(c.call(&["INFO"]).await);
    assert!(!plain.contains("latency_percentiles"), "{plain}");
}

fn latency_line_present(text: &str, cmd: &str) {
    assert!(text.contains(&format!("latency_percentiles_usec_{cmd}:p50=")), "{cmd}: {text}");
}

#[tokio::test]
async fn client_list_has_redis_fields_in_order() {
    let server = TestServer::start(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["MULTI"], b"+OK\r\n").await;
    c.expect(&["PING"], b"+QUEUED\r\n").await;
    let mut other = server.connect().await;
    let text = text(other.call(&["CLIENT", "LIST"]).await);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let keys: Vec<&str> = lines[0].split(' ').map(|f| f.split('=').next().unwrap()).collect();
    assert_eq!(
        keys,
        [
            "id",
            "addr",
            "laddr",
            "fd",
            "name",
            "age",
            "idle",
            "flags",
            "db",
            "sub",
            "psub",
            "ssub",
            "multi",
            "watch",
            "qbuf",
            "qbuf-free",
            "argv-mem",
            "multi-mem",
            "rbs",
            "rbp",
            "obl",
            "oll",
            "omem",
            "tot-mem",
            "events",
            "cmd",
            "user",
            "redir",
            "resp",
            "lib-name",
            "lib-ver",
        ]
    );
    // The client in MULTI: flag x, one command queued, its bytes counted.
    assert!(lines[0].contains(" flags=x ") && lines[0].contains(" multi=1 "), "{}", lines[0]);
    assert!(lines[0].contains(" multi-mem=4 "), "{}", lines[0]);
    assert!(
        lines[1].contains(" flags=N ") && lines[1].contains(" cmd=client|list "),
        "{}",
        lines[1]
    );
    let fd: i64 = lines[1].split(' ').find_map(|f| f.strip_prefix("fd=")).unwrap().parse().unwrap();
    assert!(fd > 0, "{}", lines[1]);
}

#[tokio::test]
async fn config_get_and_set_as_redis() {
    let server = TestServer::start(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(
        &["CONFIG", "GET", "slowlog-max-len"],
        b"*2\r\n$15\r\nslowlog-max-len\r\n$3\r\n128\r\n",
    )
    .await;
    c.expect(
        &["CONFIG", "GET", "SLOWLOG-*"],
        b"*4\r\n$23\r\nslowlog-log-slower-than\r\n$5\r\n10000\r\n$15\r\nslowlog-max-len\r\n$3\r\n128\r\n",
    )
    .await;
    // Unknown parameters are left out; a parameter asked twice comes once.
    c.expect(&["CONFIG", "GET", "no-such-thing"], b"*0\r\n").await;
    c.expect(
        &["CONFIG", "GET", "maxclients", "maxclients", "nope"],
        b"*2\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n",
    )
    .await;
    c.expect(&["CONFIG", "SET", "slowlog-max-len", "7"], b"+OK\r\n").await;
    c.expect(&["CONFIG", "GET", "slowlog-max-len"], b"*2\r\n$15\r\nslowlog-max-len\r\n$1\r\n7\r\n")
        .await;
    c.expect(
        &["CONFIG", "SET", "slowlog-max-len", "x"],
        b"-ERR CONFIG SET failed (possibly related to argument 'slowlog-max-len') - argument couldn't be parsed into an integer\r\n",
    )
    .await;
    c.expect(
        &["CONFIG", "SET", "port", "1"],
        b"-ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config\r\n",
    )
    .await;
    c.expect(
        &["CONFIG", "SET", "nope", "1"],
        b"-ERR Unknown option or number of arguments for CONFIG SET - 'nope'\r\n",
    )
    .await;
    c.expect(&["CONFIG", "GET"], b"-ERR wrong number of arguments for 'config|get' command\r\n")
        .await;
    let _ = c.call(&["HELLO", "3"]).await;
    c.expect(&["CONFIG", "GET", "nope"], b"%0\r\n").await;
}
