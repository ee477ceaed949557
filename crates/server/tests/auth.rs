//! `requirepass`: NOAUTH before authentication, AUTH and HELLO AUTH, and Redis' tighter
//! limits for unauthenticated clients.

mod common;

use common::{TestServer, resp};
use urlseen_server::Config;

const NOAUTH: &[u8] = b"-NOAUTH Authentication required.\r\n";
const WRONGPASS: &[u8] = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n";

fn with_password() -> Config {
    Config { requirepass: Some("s3cret".into()), ..Config::default() }
}

#[tokio::test]
async fn commands_need_auth_first() {
    let server = TestServer::start(with_password()).await;
    let mut c = server.connect().await;
    c.expect(&["PING"], NOAUTH).await;
    c.expect(&["ECHO", "x"], NOAUTH).await;
    c.expect(&["CLIENT", "ID"], NOAUTH).await;
    c.expect_raw(b"PING\r\n", NOAUTH).await;
    // Like Redis, existence and arity are checked before authentication.
    c.expect(&["NOPE"], b"-ERR unknown command 'NOPE', with args beginning with: \r\n").await;
    c.expect(&["ECHO"], b"-ERR wrong number of arguments for 'echo' command\r\n").await;
    c.expect(
        &["HELLO", "3"],
        b"-NOAUTH HELLO must be called with the client already authenticated, otherwise the \
          HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and \
          select the RESP protocol version at the same time\r\n",
    )
    .await;
    c.expect(&["AUTH", "wrong"], WRONGPASS).await;
    c.expect(&["AUTH", "nobody", "s3cret"], WRONGPASS).await;
    c.expect(&["AUTH", "a", "b", "c"], b"-ERR syntax error\r\n").await;
    c.expect(&["AUTH"], b"-ERR wrong number of arguments for 'auth' command\r\n").await;
    c.expect(&["PING"], NOAUTH).await;
    c.expect(&["AUTH", "s3cret"], b"+OK\r\n").await;
    c.expect(&["PING"], b"+PONG\r\n").await;
    c.expect(&["AUTH", "default", "s3cret"], b"+OK\r\n").await;
    // A failed AUTH does not log an authenticated client out (as in Redis).
    c.expect(&["AUTH", "wrong"], WRONGPASS).await;
    c.expect(&["PING"], b"+PONG\r\n").await;
    assert!(server.metrics.command("ping").unwrap().rejected() >= 3);
}

#[tokio::test]
async fn hello_auth_authenticates_and_switches_protocol_at_once() {
    let server = TestServer::start(with_password()).await;
    let mut c = server.connect().await;
    c.expect(&["HELLO", "3", "AUTH", "default", "wrong"], WRONGPASS).await;
    c.expect(&["PING"], NOAUTH).await;
    c.send_cmd(&["HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "w1"]).await;
    let reply = c.read_reply().await;
    assert!(
        reply.starts_with(b"%7\r\n$6\r\nserver\r\n$7\r\nurlseen\r\n"),
        "{}",
        common::show(&reply)
    );
    c.expect(&["CLIENT", "GETNAME"], b"$2\r\nw1\r\n").await;
    c.expect(&["PING"], b"+PONG\r\n").await;
}

#[tokio::test]
async fn quit_works_before_auth() {
    let server = TestServer::start(with_password()).await;
    let mut c = server.connect().await;
    c.expect(&["QUIT"], b"+OK\r\n").await;
    c.assert_closed().await;
}

#[tokio::test]
async fn auth_without_a_configured_password() {
    let server = TestServer::start(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(
        &["AUTH", "x"],
        b"-ERR AUTH <password> called without any password configured for the default user. \
          Are you sure your configuration is correct?\r\n",
    )
    .await;
    c.expect(&["AUTH", "default", "x"], b"+OK\r\n").await;
    c.expect(&["AUTH", "alice", "x"], WRONGPASS).await;
}

#[tokio::test]
async fn unauthenticated_clients_cannot_send_big_requests() {
    let server = TestServer::start(with_password()).await;
    let mut c = server.connect().await;
    c.expect_raw(b"*11\r\n", b"-ERR Protocol error: unauthenticated multibulk length\r\n").await;
    c.assert_closed().await;

    let mut c = server.connect().await;
    c.expect_raw(
        b"*2\r\n$4\r\nECHO\r\n$16385\r\n",
        b"-ERR Protocol error: unauthenticated bulk length\r\n",
    )
    .await;
    c.assert_closed().await;

    // After AUTH, on the same connection, the normal limits apply.
    let mut c = server.connect().await;
    let big = vec![b'x'; 100_000];
    let mut batch = resp(&[b"AUTH", b"s3cret"]);
    batch.extend_from_slice(&resp(&[b"ECHO", &big]));
    c.send(&batch).await;
    assert_eq!(c.read_reply().await, b"+OK\r\n");
    let echoed = c.read_reply().await;
    assert_eq!(echoed.len(), "$100000\r\n".len() + 100_000 + 2);
}

/// A wrong password is answered after a delay (200 ms per guess on a connection), so guessing
/// is slow; the right one is then accepted as usual.
#[tokio::test]
async fn wrong_passwords_are_answered_slowly() {
    let server = TestServer::start(with_password()).await;
    let mut c = server.connect().await;
    let started = std::time::Instant::now();
    let mut guesses = Vec::new();
    for guess in ["a", "b", "c"] {
        guesses.extend(resp(&[b"AUTH", guess.as_bytes()]));
    }
    c.send(&guesses).await;
    for _ in 0..3 {
        assert_eq!(c.read_reply().await, WRONGPASS);
    }
    assert!(started.elapsed() >= std::time::Duration::from_millis(600), "{:?}", started.elapsed());
    c.expect(&["HELLO", "3", "AUTH", "default", "nope"], WRONGPASS).await;
    c.expect(&["AUTH", "s3cret"], b"+OK\r\n").await;
    c.expect(&["PING"], b"+PONG\r\n").await;
}
