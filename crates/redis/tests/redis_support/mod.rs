//! Real `redis-server` processes for the Redis backend's tests: each on free ports, in its own
//! temporary directory, killed when dropped. No test skips when Redis is missing: it fails and
//! says how to install it (scripts/check.sh installs it).

#![allow(dead_code, reason = "each test file uses a part of the harness")]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use urlseen_engine::{NamespaceOptions, SeenSet, SplitMode, SplitPolicy};
use urlseen_redis::{RedisDb, RedisMode, RedisNamespace, RedisOptions};

/// Fails the test with an actionable message if the Redis binaries are not installed.
pub fn require(binary: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths).map(|p| p.join(binary)).find(|p| p.is_file())
    });
    match found {
        Some(p) => p,
        None => panic!(
            "{binary} is not installed, and the Redis backend's tests need real servers: \
             install it (Debian/Ubuntu: apt-get install -y redis-server redis-tools; \
             scripts/check.sh does this) and run the tests again"
        ),
    }
}

/// A port that is free now, whose cluster bus port (+10000) is free too.
pub fn free_port() -> u16 {
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        let port = l.local_addr().expect("local addr").port();
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

/// One `redis-server` process.
#[derive(Debug)]
pub struct Server {
    pub port: u16,
    args: Vec<String>,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl Server {
    /// A throwaway server: no persistence.
    pub fn start() -> Server {
        Server::start_with(&["--save", "", "--appendonly", "no"])
    }

    /// A server whose writes survive `kill -9` (an fsync before every reply).
    pub fn start_durable() -> Server {
        Server::start_with(&["--save", "", "--appendonly", "yes", "--appendfsync", "always"])
    }

    pub fn start_with(extra: &[&str]) -> Server {
        require("redis-server");
        let dir = tempfile::tempdir().expect("temp dir");
        let mut s = Server {
            port: free_port(),
            args: extra.iter().map(|s| (*s).to_owned()).collect(),
            dir,
            child: None,
        };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .arg("--port")
            .arg(self.port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(self.dir.path().join("redis.log"))
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let ok = redis::Client::open(self.url().as_str())
                .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
            if ok.is_ok() {
                return;
            }
            assert!(Instant::now() < deadline, "redis-server on port {} did not start", self.port);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Writes the keys of a fixture (see `fixtures/redis-format1.txt`: `string <key> <hex>` or
    /// `hash <key> <hex field> <hex value>` per line, tab-separated; `#` starts a comment).
    pub fn load(&self, fixture: &str) {
        let client = redis::Client::open(self.url()).expect("a client");
        let mut con = client.get_connection().expect("a connection");
        let hex = |s: &str| -> Vec<u8> {
            (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
        };
        for line in fixture.lines().filter(|l| !l.starts_with('#')) {
            let cmd = match line.split('\t').collect::<Vec<_>>()[..] {
                ["string", key, value] => redis::cmd("SET").arg(key).arg(hex(value)).clone(),
                ["hash", key, field, value] => {
                    redis::cmd("HSET").arg(key).arg(hex(field)).arg(hex(value)).clone()
                }
                _ => panic!("a bad fixture line: {line:?}"),
            };
            let () = cmd.query(&mut con).map(|_: redis::Value| ()).expect("write a key");
        }
    }

    /// `kill -9`: no shutdown, no final save.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the server again on the same port and directory (it reloads its AOF, if any).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// A plain connection, for assertions on the raw keys.
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url().as_str())
            .and_then(|c| c.get_connection())
            .expect("connect to the test redis")
    }

    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A Redis Cluster of `n` masters and no replicas, made with `redis-cli --cluster create`.
#[derive(Debug)]
pub struct Cluster {
    pub nodes: Vec<Server>,
}

impl Cluster {
    pub fn start(n: usize) -> Cluster {
        Cluster::start_with(n, &["--appendonly", "no"])
    }

    /// A cluster whose masters' writes survive `kill -9` (an fsync before every reply).
    pub fn start_durable(n: usize) -> Cluster {
        Cluster::start_with(n, &["--appendonly", "yes", "--appendfsync", "always"])
    }

    fn start_with(n: usize, persistence: &[&str]) -> Cluster {
        require("redis-cli");
        let mut args = vec![
            "--save",
            "",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            "2000",
        ];
        args.extend_from_slice(persistence);
        let nodes: Vec<Server> = (0..n).map(|_| Server::start_with(&args)).collect();
        let addrs: Vec<String> = nodes.iter().map(|s| format!("127.0.0.1:{}", s.port)).collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = Cluster { nodes };
        cluster.wait_until_ok();
        cluster
    }

    /// `kill -9` of every master, then all started again on their ports and directories (each
    /// reloads its AOF and its cluster configuration); returns once the cluster is ok.
    pub fn restart(&mut self) {
        for node in &mut self.nodes {
            node.kill();
        }
        for node in &mut self.nodes {
            node.spawn();
        }
        self.wait_until_ok();
    }

    fn wait_until_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        for s in &self.nodes {
            loop {
                let info: String =
                    redis::cmd("CLUSTER").arg("INFO").query(&mut s.conn()).unwrap_or_default();
                if info.contains("cluster_state:ok") {
                    break;
                }
                assert!(Instant::now() < deadline, "cluster did not converge: {info}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Server::url).collect()
    }
}

/// Options for tests: short timeouts, a short lock so a "dead" worker's lock expires quickly,
/// no retries (a test that wants them sets `retry_for`).
pub fn options(urls: Vec<String>, mode: RedisMode) -> RedisOptions {
    RedisOptions {
        mode,
        timeout: Duration::from_secs(2),
        retry_for: Duration::ZERO,
        connect_attempts: 2,
        lock_ttl: Duration::from_millis(400),
        migrate_chunk: 500,
        ..RedisOptions::new(urls)
    }
}

/// Small leaves (16 Kibit, about 1,700 URLs each) that do not grow with depth, so a few
/// thousand URLs split many times.
pub fn small(mode: SplitMode) -> NamespaceOptions {
    NamespaceOptions {
        capacity: 2_000,
        fpr: 0.01,
        leaf_bits: Some(1 << 14),
        split: SplitPolicy { mode, growth: 1, ..SplitPolicy::default() },
        ..NamespaceOptions::default()
    }
}

pub fn open(urls: Vec<String>, mode: RedisMode) -> RedisDb {
    RedisDb::open(options(urls, mode)).expect("open the redis backend")
}

/// Feeds `urls` to `ns` in `order`, `batch` at a time; returns the positions answered new.
pub fn new_in_order(
    ns: &RedisNamespace,
    urls: &[String],
    order: &[usize],
    batch: usize,
) -> Vec<usize> {
    let mut new = Vec::new();
    for chunk in order.chunks(batch) {
        let urls: Vec<&str> = chunk.iter().map(|&i| urls[i].as_str()).collect();
        let seen = ns.seen_batch(&urls).unwrap();
        new.extend(chunk.iter().zip(&seen).filter(|p| !p.1).map(|p| *p.0));
    }
    new
}
