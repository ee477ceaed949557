//! Every numeric argument of every command, at its edges: each command answers within a second,
//! with `OK`-like data or a typed error, and the server goes on answering `PING` on the same
//! connection. (An error rate next to 1 once made `BF.RESERVE` spin forever in the sizing math;
//! this sweeps the whole argument space for its kin.)

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use std::time::Duration;

use common::TestServer;
use urlseen_server::{Config, Frame};

/// How long one command may take.
const DEADLINE: Duration = Duration::from_secs(1);

/// Floats at and around every boundary: 0, the 1e-12 floor, 1, the non-finite values, negative
/// zero, subnormals, and digit strings longer than any double.
fn floats() -> Vec<String> {
    let mut v: Vec<String> = [
        "0",
        "-0",
        "0.0",
        "1e-300",
        "1e-320",
        "9.99e-13",
        "1e-12",
        "1.0000001e-12",
        "0.001",
        "0.25",
        "0.5",
        "0.9999999999999999",
        "0.99999999999",
        "1",
        "1.0",
        "2",
        "-0.01",
        "nan",
        "NaN",
        "inf",
        "-inf",
        "+inf",
        "1e309",
        "-1e309",
        "",
        " 0.5",
        "0x10",
        "1e",
        "--1",
        "0.5\r\n",
    ]
    .map(String::from)
    .to_vec();
    v.push(format!("1{}", "0".repeat(400)));
    v.push(format!("0.{}1", "0".repeat(400)));
    v.push(format!("0.{}", "9".repeat(400)));
    v
}

/// Integers at and around every boundary of i64, u32, u64 and the commands' own ranges.
fn ints() -> Vec<String> {
    let mut v: Vec<String> = [
        "0",
        "1",
        "2",
        "-1",
        "1024",
        "1025",
        "32768",
        "32769",
        "1073741824",
        "1073741825",
        "4294967295",
        "4294967296",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "1.5",
        "",
        "+5",
        "007",
        " 1",
        "1e3",
    ]
    .map(String::from)
    .to_vec();
    v.push("9".repeat(400));
    v.push(format!("-{}", "9".repeat(400)));
    v
}

/// A typed error: a Redis error code (`ERR`, `WRONGTYPE`, …) or one of the code-less errors
/// RedisBloom sends.
fn is_typed_error(e: &[u8]) -> bool {
    const CODELESS: &[&str] = &[
        "Bad capacity",
        "Bad error rate",
        "Bad expansion",
        "Unknown argument received",
        "Nonscaling filters cannot expand",
        "Invalid information value",
    ];
    let text = String::from_utf8_lossy(e);
    let code = text.split(' ').next().unwrap_or("");
    let coded = code.len() >= 2
        && code.bytes().all(|b| b.is_ascii_uppercase())
        && text.len() > code.len() + 1;
    coded || CODELESS.contains(&&*text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_numeric_argument_at_its_edges_answers_in_time() {
    let server = TestServer::start_engine(Config::default()).await;
    let mut c = server.connect().await;
    let mut n = 0usize;
    let mut key = move |prefix: &str| {
        n += 1;
        format!("{prefix}{n}")
    };
    let mut commands: Vec<Vec<String>> = Vec::new();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    for f in floats() {
        let k = key("r");
        commands.push(s(&["BF.RESERVE", &k, &f, "100"]));
        commands.push(s(&["BF.ADD", &k, "a"]));
        let k = key("r");
        commands.push(s(&["BF.RESERVE", &k, &f, "1000000", "NONSCALING"]));
        commands.push(s(&["BF.MADD", &k, "a", "b"]));
        let k = key("i");
        commands.push(s(&["BF.INSERT", &k, "ERROR", &f, "ITEMS", "a", "b"]));
        commands.push(s(&["URL.RESERVE", &key("u"), "ERROR", &f]));
        commands.push(s(&["URL.RESERVE", &key("u"), "ERROR", &f, "EXACT"]));
        commands.push(s(&["URL.RESERVE", &key("u"), "ERROR", &f, "COUNTING"]));
        commands.push(s(&["PING", &f]));
    }
    for i in ints() {
        let k = key("c");
        commands.push(s(&["BF.RESERVE", &k, "0.01", &i]));
        commands.push(s(&["BF.MADD", &k, "a", "b", "c"]));
        commands.push(s(&["BF.INFO", &k]));
        let k = key("c");
        commands.push(s(&["BF.RESERVE", &k, "1e-12", &i]));
        commands.push(s(&["BF.ADD", &k, "a"]));
        let k = key("e");
        commands.push(s(&["BF.RESERVE", &k, "0.01", "1", "EXPANSION", &i]));
        commands.push(s(&["BF.MADD", &k, "a", "b", "c", "d", "e", "f", "g", "h"]));
        commands.push(s(&["BF.INFO", &k, "EXPANSION"]));
        commands.push(s(&["BF.RESERVE", &key("e"), "0.01", "100", "NONSCALING", "EXPANSION", &i]));
        commands.push(s(&["BF.INSERT", &key("i"), "CAPACITY", &i, "ITEMS", "a", "b"]));
        commands.push(s(&["BF.INSERT", &key("i"), "CAPACITY", &i, "NONSCALING", "ITEMS", "a"]));
        let k = key("i");
        let mut items = s(&["BF.INSERT", &k, "CAPACITY", "1", "EXPANSION", &i, "ITEMS"]);
        items.extend((0..200).map(|n| format!("item{n}")));
        commands.push(items);
        commands.push(s(&["URL.RESERVE", &key("u"), "CAPACITY", &i]));
        commands.push(s(&["URL.RESERVE", &key("u"), "CAPACITY", &i, "ERROR", "1e-12"]));
        commands.push(s(&["URL.RESERVE", &key("u"), "CAPACITY", &i, "COUNTING"]));
        commands.push(s(&["SCAN", &i]));
        commands.push(s(&["SCAN", "0", "COUNT", &i]));
        commands.push(s(&["SCAN", &i, "COUNT", &i, "MATCH", "*", "TYPE", "MBbloom--"]));
        commands.push(s(&["SELECT", &i]));
        commands.push(s(&["HELLO", &i]));
        commands.push(s(&["CLIENT", "LIST", "ID", &i]));
        commands.push(s(&["CLIENT", "LIST", "ID", "1", &i]));
        commands.push(s(&["CLIENT", "SETINFO", "LIB-VER", &i]));
        commands.push(s(&["COMMAND", "INFO", &i]));
        commands.push(s(&["ECHO", &i]));
    }
    // A URL namespace made with the server's defaults gets the numbers as URLs too.
    commands.push(s(&[
        "URL.SEEN",
        "jobs",
        "https://a.example:99999999999999999999/",
        "https://a.example:-1/",
    ]));
    let mut answered = 0;
    let mut slowest = (Duration::ZERO, String::new());
    for args in &commands {
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let started = std::time::Instant::now();
        let reply = tokio::time::timeout(DEADLINE, c.call(&argv))
            .await
            .unwrap_or_else(|_| panic!("{argv:?} did not answer within {DEADLINE:?}"));
        if started.elapsed() > slowest.0 {
            slowest = (started.elapsed(), format!("{:?}", &argv[..argv.len().min(8)]));
        }
        if let Frame::Error(e) = &reply {
            assert!(is_typed_error(e), "{argv:?}: untyped error {:?}", String::from_utf8_lossy(e));
        }
        // HELLO switches protocols: go back to RESP2 so the next replies are comparable.
        if argv[0] == "HELLO" && !matches!(reply, Frame::Error(_)) {
            c.call(&["HELLO", "2"]).await;
        }
        let pong = tokio::time::timeout(DEADLINE, c.call(&["PING"]))
            .await
            .unwrap_or_else(|_| panic!("PING after {argv:?} did not answer"));
        assert_eq!(pong, Frame::Simple("PONG".into()), "after {argv:?}");
        answered += 1;
    }
    assert_eq!(answered, commands.len());
    println!("{answered} commands; the slowest took {:?}: {}", slowest.0, slowest.1);
    assert!(answered > 500, "the sweep shrank to {answered} commands");
    // The server is still whole: a fresh connection works, and a normal filter too.
    let mut other = server.connect().await;
    other.expect(&["BF.ADD", "after", "x"], b":1\r\n").await;
    other.expect(&["BF.EXISTS", "after", "x"], b":1\r\n").await;
}
