//! A server started in-process on port 0, and a raw-bytes client to talk to it.

#![allow(dead_code, reason = "each test binary uses a different part of the helpers")]
#![expect(clippy::unwrap_used, reason = "test helpers fail the test loudly")]

use std::io::Cursor;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use urlseen_server::{App, Config, Dispatch, Frame, FrameError, Metrics, dispatch, run};

/// How long any single wait in a test may take before it fails instead of hanging.
pub const WAIT: Duration = Duration::from_secs(5);

pub struct TestServer {
    pub addr: SocketAddr,
    pub metrics: Arc<Metrics>,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<std::io::Result<()>>>,
}

impl TestServer {
    /// A server with the built-in commands only.
    pub async fn start(config: Config) -> TestServer {
        TestServer::start_with(config, Dispatch::new(())).await
    }

    /// A server with every command, over an in-memory engine.
    pub async fn start_engine(config: Config) -> TestServer {
        TestServer::start_with(config, dispatch(Arc::new(App::in_memory()))).await
    }

    /// A server with every command over `app`.
    pub async fn start_app(config: Config, app: Arc<App>) -> TestServer {
        TestServer::start_with(config, dispatch(app)).await
    }

    pub async fn start_with<S: Send + Sync + 'static>(
        config: Config,
        dispatch: Dispatch<S>,
    ) -> TestServer {
        TestServer::start_on("127.0.0.1:0", config, dispatch).await
    }

    /// A server whose listener is bound to `bind` (e.g. every interface, `0.0.0.0:0`).
    pub async fn start_on<S: Send + Sync + 'static>(
        bind: &str,
        config: Config,
        dispatch: Dispatch<S>,
    ) -> TestServer {
        let listener = TcpListener::bind(bind).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let dispatch = Arc::new(dispatch);
        let metrics = dispatch.metrics().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let handle = tokio::spawn(run(listener, config, dispatch, async {
            let _ = stopped.await;
        }));
        TestServer { addr, metrics, stop: Some(stop), handle: Some(handle) }
    }

    /// This machine's address on its default route: not loopback, so a client connecting
    /// from it is "beyond loopback" to a server bound to every interface. (A UDP connect sends
    /// nothing; it only picks the route.)
    pub fn non_loopback_ip() -> std::net::IpAddr {
        let probe = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        probe.connect("203.0.113.1:9").expect("a default route, to find a non-loopback address");
        let ip = probe.local_addr().unwrap().ip();
        assert!(!ip.is_loopback() && !ip.is_unspecified(), "no non-loopback address: {ip}");
        ip
    }

    pub async fn connect(&self) -> Client {
        Client { stream: TcpStream::connect(self.addr).await.unwrap(), buf: BytesMut::new() }
    }

    /// Signals shutdown and waits for `run` to return.
    pub async fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(handle) = self.handle.take() {
            tokio::time::timeout(WAIT * 4, handle)
                .await
                .expect("run did not return")
                .unwrap()
                .unwrap();
        }
    }

    /// Signals shutdown without waiting.
    pub fn signal_shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Waits for `run` to return after [`TestServer::signal_shutdown`].
    pub async fn join(&mut self) {
        if let Some(handle) = self.handle.take() {
            tokio::time::timeout(WAIT * 4, handle)
                .await
                .expect("run did not return")
                .unwrap()
                .unwrap();
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(handle) = &self.handle {
            handle.abort();
        }
    }
}

pub struct Client {
    pub stream: TcpStream,
    buf: BytesMut,
}

/// A request as a RESP array of bulk strings.
pub fn resp(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

pub fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).replace('\r', "\\r").replace('\n', "\\n\n")
}

impl Client {
    /// A client over a stream connected elsewhere (a real `redis-server`, to compare).
    pub fn from_stream(stream: TcpStream) -> Client {
        Client { stream, buf: BytesMut::new() }
    }

    pub async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    /// Sends a command as a RESP array.
    pub async fn send_cmd(&mut self, args: &[&str]) {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.send(&resp(&args)).await;
    }

    /// The raw bytes of the next `n` reply frames.
    pub async fn read_frames(&mut self, n: usize) -> Vec<u8> {
        loop {
            let mut cur = Cursor::new(&self.buf[..]);
            let mut complete = 0;
            while complete < n {
                match Frame::check(&mut cur) {
                    Ok(()) => complete += 1,
                    Err(FrameError::Incomplete) => break,
                    Err(e) => panic!("server sent bad RESP ({e}): {}", show(&self.buf)),
                }
            }
            if complete == n {
                let len = cur.position() as usize;
                return self.buf.split_to(len).to_vec();
            }
            let read = tokio::time::timeout(WAIT, self.stream.read_buf(&mut self.buf))
                .await
                .unwrap_or_else(|_| {
                    panic!("no complete reply within {WAIT:?}; got {}", show(&self.buf))
                })
                .unwrap();
            assert!(read > 0, "connection closed; got {}", show(&self.buf));
        }
    }

    pub async fn read_reply(&mut self) -> Vec<u8> {
        self.read_frames(1).await
    }

    /// Parses the next reply.
    pub async fn read_frame(&mut self) -> Frame {
        let raw = self.read_reply().await;
        Frame::parse(&mut Cursor::new(&raw[..])).unwrap()
    }

    /// Sends `request` (raw bytes) and asserts the exact bytes of the one reply.
    pub async fn expect_raw(&mut self, request: &[u8], reply: &[u8]) {
        self.send(request).await;
        let got = self.read_reply().await;
        assert_eq!(show(&got), show(reply), "reply to {}", show(request));
    }

    /// Sends a command as a RESP array and asserts the exact bytes of its reply.
    pub async fn expect(&mut self, args: &[&str], reply: &[u8]) {
        self.send_cmd(args).await;
        let got = self.read_reply().await;
        assert_eq!(show(&got), show(reply), "reply to {args:?}");
    }

    /// Sends a command as a RESP array (binary-safe arguments) and asserts its exact reply.
    pub async fn expect_bytes(&mut self, args: &[&[u8]], reply: &[u8]) {
        self.send(&resp(args)).await;
        let got = self.read_reply().await;
        assert_eq!(show(&got), show(reply), "reply to {:?}", args);
    }

    /// Sends a command and returns its parsed reply.
    pub async fn call(&mut self, args: &[&str]) -> Frame {
        self.send_cmd(args).await;
        self.read_frame().await
    }

    /// The error a command answers, as text; fails the test on any other reply.
    pub async fn error(&mut self, args: &[&str]) -> String {
        match self.call(args).await {
            Frame::Error(e) => String::from_utf8_lossy(&e).into_owned(),
            other => panic!("{args:?}: not an error: {other:?}"),
        }
    }

    /// How many of `urls` namespace `ns` answers new (0) to `URL.CHECK`, asked 1,000 a call.
    pub async fn new_answers(&mut self, ns: &str, urls: &[&String]) -> usize {
        let mut new = 0;
        for chunk in urls.chunks(1000) {
            let mut args = vec!["URL.CHECK", ns];
            args.extend(chunk.iter().map(|u| u.as_str()));
            let Frame::Array(answers) = self.call(&args).await else { panic!("not an array") };
            assert_eq!(answers.len(), chunk.len());
            new += answers.iter().filter(|f| **f == Frame::Integer(0)).count();
        }
        new
    }

    /// Asserts that the server closed the connection (after any bytes already read).
    pub async fn assert_closed(&mut self) {
        let mut scratch = [0u8; 1024];
        match tokio::time::timeout(WAIT, self.stream.read(&mut scratch)).await {
            Err(_) => panic!("connection still open after {WAIT:?}"),
            Ok(Ok(0)) | Ok(Err(_)) => {}
            Ok(Ok(n)) => panic!("unexpected bytes before close: {}", show(&scratch[..n])),
        }
    }

    /// Asserts that nothing arrives for `d`.
    pub async fn assert_silent(&mut self, d: Duration) {
        let mut scratch = [0u8; 64];
        if let Ok(r) = tokio::time::timeout(d, self.stream.read(&mut scratch)).await {
            panic!("expected silence, got {r:?}: {}", show(&scratch[..*r.as_ref().unwrap_or(&0)]));
        }
    }
}

/// A `redis-server` on a free port (and a scratch directory), killed when dropped: the peer
/// that compatibility tests compare replies with.
pub struct Redis {
    port: u16,
    child: std::process::Child,
    dir: std::path::PathBuf,
}

impl Redis {
    pub async fn start() -> Redis {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = std::env::temp_dir().join(format!("urlseen-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
            .args(["--appendonly", "no", "--dir"])
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "redis-server is needed to compare replies ({e}): apt-get install \
                     redis-server (scripts/check.sh installs it)"
                )
            });
        let deadline = std::time::Instant::now() + WAIT;
        while TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            assert!(std::time::Instant::now() < deadline, "redis-server did not start");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Redis { port, child, dir }
    }

    pub async fn connect(&self) -> Client {
        Client::from_stream(TcpStream::connect(("127.0.0.1", self.port)).await.unwrap())
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// 2100-01-01T00:00:00Z, in ms: far enough that the replies do not depend on the clock.
pub const FAR: &str = "4102444800000";

/// The commands both servers answer the same, once each has keys `k`, `u`, `v`, `w`, `x`, `y`
/// (urlseen: Bloom filters and URL namespaces, or namespaces in Redis under `--redis`;
/// Redis: strings): tests/lifetimes.rs and tests/redis_lifetimes.rs.
pub const EXPIRE_SCRIPT: &[&[&str]] = &[
    // Arity, numbers, options (parsed before the number, as Redis does).
    &["EXPIRE"],
    &["EXPIRE", "k"],
    &["PEXPIRE", "k"],
    &["EXPIREAT", "k"],
    &["PEXPIREAT", "k"],
    &["TTL"],
    &["TTL", "k", "x"],
    &["PTTL", "k", "x"],
    &["EXPIRETIME"],
    &["PEXPIRETIME", "k", "k"],
    &["PERSIST"],
    &["PERSIST", "k", "x"],
    &["EXPIRE", "k", "abc"],
    &["EXPIRE", "k", "1.5"],
    &["EXPIRE", "k", " 10"],
    &["EXPIRE", "k", "10", "FOO"],
    &["EXPIRE", "k", "abc", "foo"],
    &["EXPIRE", "k", "10", "NX", "XX"],
    &["EXPIRE", "k", "10", "nx", "gt"],
    &["EXPIRE", "k", "10", "NX", "LT"],
    &["EXPIRE", "k", "10", "GT", "LT"],
    &["EXPIRE", "k", "abc", "GT", "LT"],
    &["EXPIRE", "k", "9223372036854775807"],
    &["EXPIRE", "k", "-9223372036854775808"],
    &["EXPIRE", "k", "9223372036854776"],
    &["PEXPIRE", "k", "9223372036854775807"],
    &["EXPIREAT", "k", "9223372036854775807"],
    &["EXPIREAT", "k", "-9223372036854775"],
    // Missing keys.
    &["EXPIRE", "nokey", "10"],
    &["PEXPIREAT", "nokey", FAR, "NX"],
    &["TTL", "nokey"],
    &["PTTL", "nokey"],
    &["EXPIRETIME", "nokey"],
    &["PEXPIRETIME", "nokey"],
    &["PERSIST", "nokey"],
    // No time yet.
    &["TTL", "k"],
    &["PTTL", "k"],
    &["EXPIRETIME", "k"],
    &["PEXPIRETIME", "k"],
    &["PERSIST", "k"],
    &["PEXPIREAT", "k", FAR, "XX"],
    &["PEXPIREAT", "k", FAR, "GT"],
    // Conditions.
    &["PEXPIREAT", "k", FAR, "NX"],
    &["PEXPIRETIME", "k"],
    &["EXPIRETIME", "k"],
    &["PEXPIREAT", "k", "4102444800001", "NX"],
    &["PEXPIREAT", "k", "4102444800001", "gt"],
    &["PEXPIRETIME", "k"],
    &["PEXPIREAT", "k", FAR, "GT"],
    &["PEXPIREAT", "k", "4102444800001", "GT"],
    &["PEXPIREAT", "k", FAR, "LT"],
    &["PEXPIREAT", "k", FAR, "LT"],
    &["PEXPIREAT", "k", FAR, "XX", "LT"],
    &["EXPIREAT", "k", "4102444801", "XX", "GT"],
    &["EXPIRETIME", "k"],
    &["PEXPIRETIME", "k"],
    &["EXPIREAT", "k", "4102444801", "XX"],
    &["EXPIREAT", "k", "4102444801", "NX", "NX"],
    &["PEXPIREAT", "k", "9223372036854775807"],
    &["PEXPIRETIME", "k"],
    &["EXPIRE", "k", "100"],
    &["TTL", "k"],
    &["PERSIST", "k"],
    &["PERSIST", "k"],
    &["TTL", "k"],
    &["EXPIRE", "k", "100", "GT"],
    &["EXPIRE", "k", "100", "LT"],
    &["TTL", "k"],
    &["EXPIRE", "k", "86400", "XX"],
    &["TTL", "k"],
    &["EXISTS", "k"],
    // A time not in the future deletes the key, and answers 1.
    &["EXPIRE", "u", "0"],
    &["EXISTS", "u"],
    &["TTL", "u"],
    &["PEXPIRE", "v", "-1"],
    &["EXPIREAT", "w", "1"],
    &["PEXPIREAT", "x", "0", "LT"],
    &["EXISTS", "u", "v", "w", "x", "y"],
    &["TYPE", "w"],
    &["EXPIRE", "y", "-10", "GT"],
    &["EXPIRE", "y", "-10", "XX"],
    &["EXPIRE", "y", "-10", "NX"],
    &["EXISTS", "y"],
    &["MEMORY", "USAGE", "nokey"],
    &["UNLINK", "k", "nokey", "y"],
    &["DBSIZE"],
];
