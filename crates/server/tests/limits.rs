//! Limits: each has a Redis-style error reply, and the server keeps serving everyone else.

mod common;

use std::time::Duration;

use common::{TestServer, WAIT, resp};
use urlseen_server::{Config, Limits};

#[tokio::test]
async fn oversize_bulk_is_refused_and_the_others_keep_working() {
    let config =
        Config { limits: Limits { max_bulk_len: 1024, ..Limits::default() }, ..Config::default() };
    let server = TestServer::start(config).await;
    let mut other = server.connect().await;
    other.expect(&["PING"], b"+PONG\r\n").await;

    // Exactly the limit is fine, one more byte is not.
    let mut c = server.connect().await;
    let ok = resp(&[b"ECHO", &[b'a'; 1024]]);
    c.send(&ok).await;
    assert_eq!(c.read_reply().await.len(), "$1024\r\n".len() + 1024 + 2);
    c.expect_raw(b"*2\r\n$4\r\nECHO\r\n$1025\r\n", b"-ERR Protocol error: invalid bulk length\r\n")
        .await;
    c.assert_closed().await;

    other.expect(&["PING"], b"+PONG\r\n").await;
    assert_eq!(server.metrics.protocol_errors(), 1);
}

#[tokio::test]
async fn too_many_arguments_is_refused() {
    let config =
        Config { limits: Limits { max_args: 3, ..Limits::default() }, ..Config::default() };
    let server = TestServer::start(config).await;
    let mut c = server.connect().await;
    c.expect(&["ECHO", "a"], b"$1\r\na\r\n").await;
    c.expect(&["PING", "a"], b"$1\r\na\r\n").await;
    c.expect_raw(b"*4\r\n", b"-ERR Protocol error: invalid multibulk length\r\n").await;
    c.assert_closed().await;
    let mut d = server.connect().await;
    d.expect(&["PING"], b"+PONG\r\n").await;
}

#[tokio::test]
async fn default_limits() {
    let limits = Limits::default();
    assert_eq!(limits.max_bulk_len, 32 << 20);
    assert_eq!(limits.max_args, 1 << 20);
    assert_eq!(limits.max_query_buffer, 64 << 20);
    let server = TestServer::start(Config::default()).await;
    let mut c = server.connect().await;
    c.expect_raw(b"*1048577\r\n", b"-ERR Protocol error: invalid multibulk length\r\n").await;
    let mut c = server.connect().await;
    c.expect_raw(b"*1\r\n$33554433\r\n", b"-ERR Protocol error: invalid bulk length\r\n").await;
}

#[tokio::test]
async fn query_buffer_limit_closes_only_that_client() {
    let config = Config {
        limits: Limits { max_query_buffer: 64 * 1024, ..Limits::default() },
        ..Config::default()
    };
    let server = TestServer::start(config).await;
    let mut other = server.connect().await;
    let mut c = server.connect().await;
    // A 100 KB bulk is within the bulk limit but not within the query buffer.
    c.send(b"*2\r\n$4\r\nECHO\r\n$100000\r\n").await;
    let chunk = vec![b'z'; 8192];
    let mut sent = 0;
    let mut reply = Vec::new();
    while sent < 100_000 {
        use tokio::io::AsyncWriteExt;
        if c.stream.write_all(&chunk).await.is_err() {
            break;
        }
        sent += chunk.len();
        let mut buf = [0u8; 256];
        use tokio::io::AsyncReadExt;
        if let Ok(Ok(n)) =
            tokio::time::timeout(Duration::from_millis(5), c.stream.read(&mut buf)).await
        {
            reply.extend_from_slice(&buf[..n]);
            if n == 0 || reply.ends_with(b"\r\n") {
                break;
            }
        }
    }
    if !reply.ends_with(b"\r\n") {
        reply.extend_from_slice(&c.read_reply().await);
    }
    assert_eq!(
        common::show(&reply),
        common::show(b"-ERR Protocol error: query buffer limit reached\r\n")
    );
    c.assert_closed().await;
    other.expect(&["PING"], b"+PONG\r\n").await;
    assert_eq!(server.metrics.query_buffer_disconnections(), 1);
}

#[tokio::test]
async fn max_clients_refuses_the_extra_client() {
    let config = Config { maxclients: 2, ..Config::default() };
    let server = TestServer::start(config).await;
    let mut a = server.connect().await;
    let mut b = server.connect().await;
    a.expect(&["PING"], b"+PONG\r\n").await;
    b.expect(&["PING"], b"+PONG\r\n").await;
    let mut extra = server.connect().await;
    assert_eq!(extra.read_reply().await, b"-ERR max number of clients reached\r\n");
    extra.assert_closed().await;
    assert_eq!(server.metrics.connections_rejected(), 1);
    // The connected ones are unaffected; once one leaves, a new client gets in.
    a.expect(&["PING"], b"+PONG\r\n").await;
    b.expect(&["QUIT"], b"+OK\r\n").await;
    b.assert_closed().await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut c = server.connect().await;
        c.send_cmd(&["PING"]).await;
        let reply = c.read_reply().await;
        if reply == b"+PONG\r\n" {
            break;
        }
        assert_eq!(reply, b"-ERR max number of clients reached\r\n");
        assert!(tokio::time::Instant::now() < deadline, "slot never freed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn idle_clients_are_closed() {
    let config = Config { idle_timeout: Some(Duration::from_millis(600)), ..Config::default() };
    let server = TestServer::start(config).await;
    let mut idle = server.connect().await;
    let mut busy = server.connect().await;
    idle.expect(&["PING"], b"+PONG\r\n").await;
    for _ in 0..12 {
        busy.expect(&["PING"], b"+PONG\r\n").await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // 1.2 s without a command: closed, silently, as Redis does.
    idle.assert_closed().await;
    busy.expect(&["PING"], b"+PONG\r\n").await;
    assert_eq!(server.metrics.idle_disconnections(), 1);
}

#[tokio::test]
async fn malformed_frames_get_a_protocol_error_and_close() {
    let server = TestServer::start(Config::default()).await;
    let mut other = server.connect().await;
    let cases: &[(&[u8], &[u8])] = &[
        (b"*x\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
        (b"*1\r\n:1\r\n", b"-ERR Protocol error: expected '$', got ':'\r\n"),
        (b"*1\r\n$-1\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
        (b"*1\r\n$x\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
        (b"*1\r\n$4\r\nPINGxx", b"-ERR Protocol error: expected CRLF after bulk data\r\n"),
    ];
    for (bytes, reply) in cases {
        let mut c = server.connect().await;
        // What precedes the bad frame in the same packet is still answered.
        let mut batch = b"PING\r\n".to_vec();
        batch.extend_from_slice(bytes);
        c.send(&batch).await;
        assert_eq!(c.read_reply().await, b"+PONG\r\n");
        assert_eq!(common::show(&c.read_reply().await), common::show(reply));
        c.assert_closed().await;
        other.expect(&["PING"], b"+PONG\r\n").await;
    }
    let mut c = server.connect().await;
    c.expect_raw(&vec![b'A'; 70_000], b"-ERR Protocol error: too big inline request\r\n").await;
    c.assert_closed().await;
    let mut c = server.connect().await;
    let mut long = b"*".to_vec();
    long.extend_from_slice(&vec![b'1'; 70_000]);
    c.expect_raw(&long, b"-ERR Protocol error: too big mbulk count string\r\n").await;
    c.assert_closed().await;
    other.expect(&["PING"], b"+PONG\r\n").await;
}

#[tokio::test]
async fn cross_protocol_requests_are_dropped() {
    let server = TestServer::start(Config::default()).await;
    let mut c = server.connect().await;
    c.send(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await;
    c.assert_closed().await;
    let mut c = server.connect().await;
    c.expect(&["PING"], b"+PONG\r\n").await;
}

#[tokio::test]
async fn a_client_that_reads_nothing_only_stalls_itself() {
    let server = TestServer::start(Config::default()).await;
    let mut reader = server.connect().await;
    let mut sloth = server.connect().await;
    // 64 MiB of replies requested and never read: the server must stop reading from this
    // client (bounded output buffer) rather than buffer them, and keep serving the others.
    let value = vec![b'v'; 60_000];
    let request = resp(&[b"ECHO", &value]);
    let writer = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        for _ in 0..1100 {
            if tokio::time::timeout(Duration::from_millis(500), sloth.stream.write_all(&request))
                .await
                .is_err()
            {
                // The server stopped reading: backpressure reached the client.
                return true;
            }
        }
        false
    });
    for _ in 0..20 {
        reader.expect(&["PING"], b"+PONG\r\n").await;
    }
    assert!(writer.await.unwrap(), "the server kept reading from a client that reads nothing");
    reader.expect(&["PING"], b"+PONG\r\n").await;
}

/// Many clients each under their own limit must not add up: past the server-wide total, the
/// client that reads with more than 1 MiB buffered is closed; the others go on.
#[tokio::test]
async fn the_query_buffers_of_all_clients_have_a_total_limit() {
    use tokio::io::AsyncWriteExt;
    let config = Config {
        limits: Limits { max_total_query_buffer: 5 << 20, ..Limits::default() },
        ..Config::default()
    };
    let server = TestServer::start(config).await;
    let mut small = server.connect().await;
    let mut clients = Vec::new();
    let chunk = vec![b'z'; 64 << 10];
    // Three clients, each with 2 MiB of a 16 MiB ECHO: 6 MiB in all, over the 5 MiB total.
    for _ in 0..3 {
        let mut c = server.connect().await;
        c.send(b"*2\r\n$4\r\nECHO\r\n$16000000\r\n").await;
        for _ in 0..32 {
            if c.stream.write_all(&chunk).await.is_err() {
                break;
            }
        }
        // Let the server read it all before the next client starts, so the third is the one
        // that passes the total.
        tokio::time::sleep(Duration::from_millis(300)).await;
        clients.push(c);
    }
    let mut last = clients.pop().unwrap();
    let reply = last.read_reply().await;
    assert_eq!(
        common::show(&reply),
        common::show(b"-ERR Protocol error: query buffer limit reached\r\n")
    );
    last.assert_closed().await;
    assert_eq!(server.metrics.query_buffer_disconnections(), 1);
    // Small clients are never cut, and the first two are still connected.
    small.expect(&["PING"], b"+PONG\r\n").await;
    for c in &mut clients {
        c.send(&vec![b'z'; 1000]).await;
    }
    small.expect(&["PING"], b"+PONG\r\n").await;
    assert_eq!(server.metrics.query_buffer_disconnections(), 1);
}
