//! Protected mode, as Redis': without a password, a server bound beyond loopback serves only
//! loopback clients; others get `-DENIED …` and are closed before any command runs.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use std::sync::Arc;

use common::{TestServer, WAIT, resp};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use urlseen_server::{App, Config, dispatch};

/// Connects from `ip` to `server`, sends `FLUSHALL` and `PING`, and returns all it reads until
/// the server closes or both replies are in.
async fn from(ip: std::net::IpAddr, server: &TestServer) -> String {
    let mut s = TcpStream::connect((ip, server.addr.port())).await.unwrap();
    let mut request = resp(&[b"FLUSHALL"]);
    request.extend(resp(&[b"PING"]));
    // The server may close before reading: a failed write is part of being refused.
    let _ = s.write_all(&request).await;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(WAIT, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => {
                got.extend_from_slice(&buf[..n]);
                // Two replies (one line each here) are all there is to wait for.
                if got.windows(2).filter(|w| w == b"\r\n").count() >= 2 {
                    break;
                }
            }
            Err(_) => panic!("no reply and no close: {:?}", String::from_utf8_lossy(&got)),
        }
    }
    String::from_utf8(got).unwrap()
}

async fn everywhere(config: Config) -> (TestServer, Arc<App>) {
    let app = Arc::new(App::in_memory());
    app.db()
        .namespace_or_create("jobs", Default::default())
        .unwrap()
        .seen("http://a.example/")
        .unwrap();
    (TestServer::start_on("0.0.0.0:0", config, dispatch(app.clone())).await, app)
}

#[tokio::test]
async fn without_a_password_clients_beyond_loopback_are_denied() {
    let (server, app) = everywhere(Config::default()).await;
    let reply = from(TestServer::non_loopback_ip(), &server).await;
    assert!(
        reply.starts_with("-DENIED urlseen is running in protected mode"),
        "not denied: {reply:?}"
    );
    assert!(!reply.contains("+OK") && !reply.contains("PONG"), "a command ran: {reply:?}");
    assert_eq!(app.db().namespace_names(), ["jobs"], "FLUSHALL from beyond loopback ran");
    // Loopback clients are served as before.
    let reply = from("127.0.0.1".parse().unwrap(), &server).await;
    assert_eq!(reply, "+OK\r\n+PONG\r\n");
    assert!(app.db().namespace_names().is_empty());
}

#[tokio::test]
async fn a_password_or_protected_mode_off_serves_everyone() {
    let open = Config { protected_mode: false, ..Config::default() };
    let (server, _) = everywhere(open).await;
    assert_eq!(from(TestServer::non_loopback_ip(), &server).await, "+OK\r\n+PONG\r\n");

    let locked = Config { requirepass: Some("s3cret".into()), ..Config::default() };
    let (server, app) = everywhere(locked).await;
    let reply = from(TestServer::non_loopback_ip(), &server).await;
    assert!(
        reply.starts_with("-NOAUTH"),
        "a password-protected server must ask for AUTH: {reply:?}"
    );
    assert_eq!(app.db().namespace_names(), ["jobs"]);
}
