//! `MULTI`/`EXEC`/`DISCARD`/`WATCH`/`UNWATCH`: the exact reply bytes, atomicity against another
//! client, optimistic locking, and the same error sequence byte for byte against a real
//! `redis-server` (required, as for the other Redis tests: scripts/check.sh installs it).

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use std::time::{Duration, Instant};

use common::{Redis, TestServer, WAIT, resp};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use urlseen_server::{Config, Frame};

const EXECABORT: &[u8] = b"-EXECABORT Transaction discarded because of previous errors.\r\n";

async fn engine() -> TestServer {
    TestServer::start_engine(Config::default()).await
}

#[tokio::test]
async fn exec_answers_the_array_of_the_queued_replies() {
    let server = engine().await;
    let mut c = server.connect().await;
    c.expect(&["MULTI"], b"+OK\r\n").await;
    c.expect(&["BF.ADD", "k", "a"], b"+QUEUED\r\n").await;
    c.expect(&["BF.ADD", "k", "a"], b"+QUEUED\r\n").await;
    c.expect(&["BF.EXISTS", "k", "b"], b"+QUEUED\r\n").await;
    c.expect(&["URL.SEEN", "jobs", "https://a.example/", "HTTPS://A.EXAMPLE:443/"], b"+QUEUED\r\n")
        .await;
    c.expect(&["PING"], b"+QUEUED\r\n").await;
    // Nothing ran before EXEC.
    let mut other = server.connect().await;
    other.expect(&["EXISTS", "k", "jobs"], b":0\r\n").await;
    c.expect(&["EXEC"], b"*5\r\n:1\r\n:0\r\n:0\r\n*2\r\n:0\r\n:1\r\n+PONG\r\n").await;
    // The transaction is closed: commands run again, and EXEC has nothing to run.
    c.expect(&["BF.EXISTS", "k", "a"], b":1\r\n").await;
    c.expect(&["EXEC"], b"-ERR EXEC without MULTI\r\n").await;
    c.expect(&["MULTI"], b"+OK\r\n").await;
    c.expect(&["EXEC"], b"*0\r\n").await;
}

#[tokio::test]
async fn exec_keeps_the_resp3_types_of_the_replies() {
    let server = engine().await;
    let mut c = server.connect().await;
    c.send_cmd(&["HELLO", "3"]).await;
    c.read_reply().await;
    c.expect(&["MULTI"], b"+OK\r\n").await;
    c.expect(&["BF.ADD", "k", "a"], b"+QUEUED\r\n").await;
    c.expect(&["BF.EXISTS", "k", "a"], b"+QUEUED\r\n").await;
    c.expect(&["CLIENT", "GETNAME"], b"+QUEUED\r\n").await;
    c.expect(&["EXEC"], b"*3\r\n#t\r\n#t\r\n_\r\n").await;
}

#[tokio::test]
async fn misuse_is_answered_as_redis_does() {
    let server = engine().await;
    let mut c = server.connect().await;
    c.expect(&["EXEC"], b"-ERR EXEC without MULTI\r\n").await;
    c.expect(&["DISCARD"], b"-ERR DISCARD without MULTI\r\n").await;
    c.expect(&["UNWATCH"], b"+OK\r\n").await;
    c.expect(&["WATCH"], b"-ERR wrong number of arguments for 'watch' command\r\n").await;
    c.expect(&["MULTI", "x"], b"-ERR wrong number of arguments for 'multi' command\r\n").await;
    // Nested MULTI and WATCH inside MULTI are errors that leave the transaction runnable.
    c.expect(&["MULTI"], b"+OK\r\n").await;
    c.expect(&["MULTI"], b"-ERR MULTI calls can not be nested\r\n").await;
    c.expect(&["WATCH", "k"], b"-ERR WATCH inside MULTI is not allowed\r\n").await;
    c.expect(&["BF.ADD", "k", "a"], b"+QUEUED\r\n").await;
    c.expect(&["EXEC"], b"*1\r\n:1\r\n").await;
}

#[tokio::test]
async fn a_queueing_error_aborts_the_transaction() {
    let server = engine().await;
    let mut c = server.connect().await;
    let refusals: [(&[&str], &[u8]); 3] = [
        (&["NOPE", "x"], b"-ERR unknown command 'NOPE', with args beginning with: 'x' \r\n"),
        (&["BF.ADD", "k"], b"-ERR wrong number of arguments for 'bf.add' command\r\n"),
        (&["CLIENT", "NOPE"], b"-ERR unknown subcommand 'NOPE'. Try CLIENT HELP.\r\n"),
    ];
    for (refused, error) in refusals {
        c.expect(&["MULTI"], b"+OK\r\n").await;
        c.expect(&["BF.ADD", "k", "a"], b"+QUEUED\r\n").await;
        c.expect(refused, error).await;
        c.expect(&["BF.ADD", "k", "b"], b"+QUEUED\r\n").await;
        c.expect(&["EXEC"], EXECABORT).await;
        // Nothing ran, and the transaction is over.
        c.expect(&["EXISTS", "k"], b":0\r\n").await;
        c.expect(&["EXEC"], b"-ERR EXEC without MULTI\r\n").await;
    }
}

#[tokio::test]
async fn a_runtime_error_takes_its_place_and_the_others_run() {
    let server = engine().await;
    let mut c = server.connect().await;
    c.expect(&["URL.RESERVE", "urls"], b"+OK\r\n").await;
    c.expect(&["MULTI"], b"+OK\r\n").await;
    c.expect(&["BF.ADD", "urls", "x"], b"+QUEUED\r\n").await;
    c.expect(&["BF.ADD", "bf", "x"], b"+QUEUED\r\n").await;
    c.expect(&["BF.RESERVE", "bf", "0.01", "100"], b"+QUEUED\r\n").await;
    c.expect(&["EXEC"], b"*3\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n:1\r\n-ERR item exists\r\n").await;
    c.expect(&["BF.EXISTS", "bf", "x"], b":1\r\n").await;
}

#[tokio::test]
async fn discard_drops_the_queue() {
    let server = engine().await;
    let mut c = server.connect().await;
    c.expect(&["MULTI"], b"+OK\r\n").await;
    c.expect(&["BF.ADD", "k", "a"], b"+QUEUED\r\n").await;
    c.expect(&["DISCARD"], b"+OK\r\n").await;
    c.expect(&["BF.EXISTS", "k", "a"], b":0\r\n").await;
    c.expect(&["EXEC"], b"-ERR EXEC without MULTI\r\n").await;
    c.expect(&["DISCARD"], b"-ERR DISCARD without MULTI\r\n").await;
}

#[tokio::test]
async fn quit_inside_multi_closes_without_running_the_queue() {
    let server = engine().await;
    let mut c = server.connect().await;
    c.expect(&["MULTI"], b"+OK\r\n").await;
    c.expect(&["BF.ADD", "k", "a"], b"+QUEUED\r\n").await;
    c.expect(&["QUIT"], b"+OK\r\n").await;
    c.assert_closed().await;
    server.connect().await.expect(&["EXISTS", "k"], b":0\r\n").await;
}

#[tokio::test]
async fn a_write_to_a_watched_key_makes_exec_answer_null() {
    let server = engine().await;
    let (mut a, mut b) = (server.connect().await, server.connect().await);
    // Untouched: EXEC runs.
    a.expect(&["WATCH", "k", "other"], b"+OK\r\n").await;
    b.expect(&["BF.EXISTS", "k", "x"], b":0\r\n").await; // a read does not count
    a.expect(&["MULTI"], b"+OK\r\n").await;
    a.expect(&["BF.ADD", "k", "a"], b"+QUEUED\r\n").await;
    a.expect(&["EXEC"], b"*1\r\n:1\r\n").await;
    // Another client writes k between WATCH and EXEC: nothing runs.
    a.expect(&["WATCH", "k"], b"+OK\r\n").await;
    b.expect(&["BF.ADD", "k", "x"], b":1\r\n").await;
    a.expect(&["MULTI"], b"+OK\r\n").await;
    a.expect(&["BF.ADD", "k", "y"], b"+QUEUED\r\n").await;
    a.expect(&["EXEC"], b"*-1\r\n").await;
    a.expect(&["BF.EXISTS", "k", "y"], b":0\r\n").await;
    // EXEC forgot the watch: the next transaction runs.
    b.expect(&["BF.ADD", "k", "z"], b":1\r\n").await;
    a.expect(&["MULTI"], b"+OK\r\n").await;
    a.expect(&["BF.ADD", "k", "y"], b"+QUEUED\r\n").await;
    a.expect(&["EXEC"], b"*1\r\n:1\r\n").await;
    // A write to another key, or after UNWATCH, does not count.
    a.expect(&["WATCH", "k"], b"+OK\r\n").await;
    b.expect(&["BF.ADD", "elsewhere", "x"], b":1\r\n").await;
    a.expect(&["MULTI"], b"+OK\r\n").await;
    a.expect(&["EXEC"], b"*0\r\n").await;
    a.expect(&["WATCH", "k"], b"+OK\r\n").await;
    a.expect(&["UNWATCH"], b"+OK\r\n").await;
    b.expect(&["BF.ADD", "k", "w"], b":1\r\n").await;
    a.expect(&["MULTI"], b"+OK\r\n").await;
    a.expect(&["EXEC"], b"*0\r\n").await;
    // URL.SEEN pipelined (the batch path), DEL and FLUSHALL are writes too; RESP3 null is `_`.
    a.send_cmd(&["HELLO", "3"]).await;
    a.read_reply().await;
    for write in [&["URL.SEEN", "k2", "https://a.example/"][..], &["DEL", "k2"], &["FLUSHALL"]] {
        a.expect(&["WATCH", "k2"], b"+OK\r\n").await;
        let mut pipeline = resp(&write.iter().map(|s| s.as_bytes()).collect::<Vec<_>>());
        pipeline.extend(resp(&[b"PING"]));
        b.send(&pipeline).await;
        b.read_frames(2).await;
        a.expect(&["MULTI"], b"+OK\r\n").await;
        a.expect(&["PING"], b"+QUEUED\r\n").await;
        a.expect(&["EXEC"], b"_\r\n").await;
    }
    // DISCARD forgets the watch too.
    a.expect(&["WATCH", "k"], b"+OK\r\n").await;
    b.expect(&["BF.ADD", "k", "v"], b":1\r\n").await;
    a.expect(&["MULTI"], b"+OK\r\n").await;
    a.expect(&["DISCARD"], b"+OK\r\n").await;
    a.expect(&["MULTI"], b"+OK\r\n").await;
    a.expect(&["EXEC"], b"*0\r\n").await;
}

#[tokio::test]
async fn client_list_shows_the_transaction_and_the_watched_keys() {
    let server = engine().await;
    let mut c = server.connect().await;
    c.expect(&["WATCH", "a", "b", "a"], b"+OK\r\n").await;
    c.expect(&["MULTI"], b"+OK\r\n").await;
    c.expect(&["PING"], b"+QUEUED\r\n").await;
    let Frame::Bulk(list) = server.connect().await.call(&["CLIENT", "LIST"]).await else {
        panic!("CLIENT LIST is a bulk string")
    };
    let list = String::from_utf8_lossy(&list).into_owned();
    assert!(list.contains(" flags=x ") && list.contains(" multi=1 watch=2 "), "{list}");
    c.expect(&["EXEC"], b"*1\r\n+PONG\r\n").await;
}

/// One client's `EXEC` of many `BF.ADD` while another pipelines `BF.CARD` on the same key:
/// every count the reader sees is from before the transaction or after it, never within.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_other_command_runs_inside_exec() {
    const ADDS: usize = 20_000;
    let server = engine().await;
    let mut writer = server.connect().await;
    writer.expect(&["BF.RESERVE", "k", "0.001", "100000"], b"+OK\r\n").await;
    let mut request = resp(&[b"MULTI"]);
    for i in 0..ADDS {
        request.extend(resp(&[b"BF.ADD", b"k", i.to_string().as_bytes()]));
    }
    request.extend(resp(&[b"EXEC"]));
    let mut reader = server.connect().await;
    let reading = tokio::spawn(async move {
        let mut seen = Vec::new();
        let deadline = Instant::now() + WAIT;
        let card = resp(&[b"BF.CARD", b"k"]).repeat(50);
        loop {
            reader.send(&card).await;
            for _ in 0..50 {
                let Frame::Integer(n) = reader.read_frame().await else { panic!("BF.CARD") };
                seen.push(n);
            }
            if seen.last().is_some_and(|&n| n > 0) || Instant::now() > deadline {
                return seen;
            }
        }
    });
    // Let the reader start, then send the whole transaction at once.
    tokio::time::sleep(Duration::from_millis(20)).await;
    writer.send(&request).await;
    writer.read_frames(ADDS + 1).await;
    let exec = writer.read_reply().await;
    assert!(exec.starts_with(format!("*{ADDS}\r\n").as_bytes()), "EXEC reply");
    let seen = reading.await.unwrap();
    let total = i64::try_from(ADDS).unwrap();
    let between: Vec<i64> = seen.iter().copied().filter(|&n| n != 0 && n < total - 50).collect();
    assert!(
        between.is_empty(),
        "the reader saw it half done: {:?}",
        &between[..between.len().min(5)]
    );
    assert!(seen.last().is_some_and(|&n| n > 0), "the reader never saw the transaction's adds");
}

#[tokio::test]
async fn command_lists_the_transaction_commands() {
    let server = engine().await;
    let mut c = server.connect().await;
    // Byte for byte what Redis 7 answers.
    let redis: [&[u8]; 4] = [
        b"*10\r\n$5\r\nmulti\r\n:1\r\n*5\r\n+noscript\r\n+loading\r\n+stale\r\n+fast\r\n+allow_busy\r\n:0\r\n:0\r\n:0\r\n*2\r\n+@fast\r\n+@transaction\r\n*0\r\n*0\r\n*0\r\n",
        b"*10\r\n$4\r\nexec\r\n:1\r\n*4\r\n+noscript\r\n+loading\r\n+stale\r\n+skip_slowlog\r\n:0\r\n:0\r\n:0\r\n*2\r\n+@slow\r\n+@transaction\r\n*0\r\n*0\r\n*0\r\n",
        b"*10\r\n$7\r\ndiscard\r\n:1\r\n*5\r\n+noscript\r\n+loading\r\n+stale\r\n+fast\r\n+allow_busy\r\n:0\r\n:0\r\n:0\r\n*2\r\n+@fast\r\n+@transaction\r\n*0\r\n*0\r\n*0\r\n",
        b"*10\r\n$7\r\nunwatch\r\n:1\r\n*5\r\n+noscript\r\n+loading\r\n+stale\r\n+fast\r\n+allow_busy\r\n:0\r\n:0\r\n:0\r\n*2\r\n+@fast\r\n+@transaction\r\n*0\r\n*0\r\n*0\r\n",
    ];
    for (name, expected) in ["multi", "exec", "discard", "unwatch"].into_iter().zip(redis) {
        let mut want = b"*1\r\n".to_vec();
        want.extend_from_slice(expected);
        c.expect(&["COMMAND", "INFO", name], &want).await;
    }
    // WATCH: Redis adds key specs, which urlseen does not report; the rest is the same.
    c.send_cmd(&["COMMAND", "INFO", "watch"]).await;
    let got = c.read_reply().await;
    let prefix = b"*1\r\n*10\r\n$5\r\nwatch\r\n:-2\r\n*5\r\n+noscript\r\n+loading\r\n+stale\r\n+fast\r\n+allow_busy\r\n:1\r\n:-1\r\n:1\r\n*2\r\n+@fast\r\n+@transaction\r\n";
    assert!(got.starts_with(prefix), "{}", common::show(&got));
    let Frame::Array(docs) = c.call(&["COMMAND", "DOCS", "exec"]).await else { panic!() };
    assert_eq!(docs.first(), Some(&Frame::bulk("exec")));
}

/// The transaction error cases, sent to urlseen and to Redis: the same bytes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_error_cases_match_redis_byte_for_byte() {
    let redis = Redis::start().await;
    let server = engine().await;
    let script: &[&[&str]] = &[
        &["EXEC"],
        &["DISCARD"],
        &["UNWATCH"],
        &["WATCH"],
        &["MULTI", "extra"],
        &["EXEC", "extra"],
        &["MULTI"],
        &["PING"],
        &["EXEC", "extra"],
        &["EXEC"],
        &["MULTI"],
        &["MULTI"],
        &["WATCH", "k"],
        &["PING"],
        &["ECHO", "hi"],
        &["EXEC"],
        &["MULTI"],
        &["PING"],
        &["NOPE", "x"],
        &["ECHO"],
        &["CLIENT", "NOPE"],
        &["PING"],
        &["EXEC"],
        &["EXEC"],
        &["MULTI"],
        &["PING"],
        &["DISCARD"],
        &["DISCARD"],
        &["MULTI"],
        &["UNWATCH"],
        &["EXEC"],
        &["HELLO", "3"],
        &["MULTI"],
        &["PING"],
        &["ECHO", "x"],
        &["EXEC"],
        &["WATCH", "gone"],
        &["MULTI"],
        &["PING"],
        &["EXEC"],
    ];
    let mut replies = Vec::new();
    for mut c in [server.connect().await, redis.connect().await] {
        let mut got = Vec::new();
        for args in script {
            c.send_cmd(args).await;
            got.push(common::show(&c.read_reply().await));
        }
        replies.push(got);
    }
    for ((args, ours), theirs) in script.iter().zip(&replies[0]).zip(&replies[1]) {
        if args[0] == "HELLO" {
            continue; // the server's name and version differ, by design
        }
        assert_eq!(ours, theirs, "reply to {args:?} (urlseen left, redis right)");
    }

    // A watched key deleted by another client: EXEC answers the null array in both.
    let setups: [&[&str]; 2] = [&["BF.ADD", "w", "x"], &["SET", "w", "x"]];
    let mut nulls = Vec::new();
    for (setup, (mut a, mut b)) in setups.into_iter().zip([
        (server.connect().await, server.connect().await),
        (redis.connect().await, redis.connect().await),
    ]) {
        a.call(setup).await;
        let mut got = Vec::new();
        for (writer, args) in [
            (false, &["WATCH", "w"][..]),
            (true, &["DEL", "w"]),
            (false, &["MULTI"]),
            (false, &["PING"]),
            (false, &["EXEC"]),
        ] {
            let client = if writer { &mut b } else { &mut a };
            client.send_cmd(args).await;
            got.push(common::show(&client.read_reply().await));
        }
        nulls.push(got);
    }
    assert_eq!(nulls[0], nulls[1], "urlseen left, redis right");
    assert_eq!(nulls[0].last().map(String::as_str), Some("*-1\\r\\n\n"));
}

/// A raw stream, to write a partial transaction and close.
#[tokio::test]
async fn a_client_that_leaves_mid_transaction_leaves_nothing_behind() {
    let server = engine().await;
    let mut raw = TcpStream::connect(server.addr).await.unwrap();
    let mut bytes = resp(&[b"WATCH", b"k"]);
    bytes.extend(resp(&[b"MULTI"]));
    bytes.extend(resp(&[b"BF.ADD", b"k", b"a"]));
    raw.write_all(&bytes).await.unwrap();
    drop(raw);
    let mut c = server.connect().await;
    // The queued BF.ADD never ran; writes to k still work (the watch was dropped with it).
    tokio::time::sleep(Duration::from_millis(50)).await;
    c.expect(&["EXISTS", "k"], b":0\r\n").await;
    c.expect(&["BF.ADD", "k", "a"], b":1\r\n").await;
}
