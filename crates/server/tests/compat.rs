//! Real clients against the server: the redis-py compatibility suite (`tests/compat/`), and
//! redis-cli. Both are required (scripts/check.sh installs them). Where `node` and `npm` are
//! installed, ioredis and node-redis transactions too (npm fetches the two packages once into
//! the target directory); without them that test says so and checks nothing else.
//!
//! The redis-py suite is not optional: without python3 and redis-py this test fails, saying
//! how to install them (`pip install --quiet redis`; `scripts/redis-compat.sh` does it).

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::TestServer;
use urlseen_server::Config;

fn suite() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/compat/test_redis_py.py")
}

fn require_redis_py() {
    let probe = Command::new("python3")
        .args(["-c", "import redis; print(redis.__version__)"])
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "python3 is needed for the redis-py compatibility suite and could not be run \
                 ({e}); install python3, then `pip install --quiet redis` \
                 (scripts/redis-compat.sh does both checks)"
            )
        });
    assert!(
        probe.status.success(),
        "redis-py is not installed for python3: run `pip install --quiet redis` \
         (scripts/redis-compat.sh installs it); python said:\n{}",
        String::from_utf8_lossy(&probe.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_suite_passes() {
    require_redis_py();
    let server = TestServer::start_engine(Config::default()).await;
    let port = server.addr.port().to_string();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("python3").arg(suite()).env("URLSEEN_PORT", port).output()
    })
    .await
    .unwrap()
    .expect("run the redis-py suite");
    let log =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{log}");
    assert!(out.status.success(), "the redis-py compatibility suite failed:\n{log}");
    assert!(log.contains("\nOK"), "{log}");
    // redis-py's default pipeline() is MULTI/EXEC: the transaction tests ran, in both protocols.
    for class in ["Transactions.", "Transactions3."] {
        let ran = format!("{class}test_default_pipeline_is_a_transaction) ... ok");
        assert!(log.contains(&ran), "no {ran:?} in:\n{log}");
    }
}

fn on_path(program: &str) -> bool {
    Command::new(program).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// ioredis' and node-redis' `multi().exec()` and `watch`, when Node.js is installed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_clients_run_transactions() {
    if !on_path("node") || !on_path("npm") {
        eprintln!(
            "NOT RUN: node and npm are not installed, so the ioredis and node-redis transaction \
             checks did not run (redis-py's, in redis_py_suite_passes, did)"
        );
        return;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("node-clients");
    if !dir.join("node_modules/ioredis").is_dir() || !dir.join("node_modules/redis").is_dir() {
        std::fs::create_dir_all(&dir).unwrap();
        let install = Command::new("npm")
            .args(["install", "--no-save", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .args(["ioredis@6", "redis@6"])
            .output()
            .expect("run npm");
        assert!(
            install.status.success(),
            "npm could not install ioredis and redis (node-redis); is the npm registry \
             reachable?\n{}",
            String::from_utf8_lossy(&install.stderr)
        );
    }
    let server = TestServer::start_engine(Config::default()).await;
    let port = server.addr.port().to_string();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/compat/node_multi.js");
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(script)
            .env("URLSEEN_PORT", port)
            .env("NODE_PATH", dir.join("node_modules"))
            .output()
    })
    .await
    .unwrap()
    .expect("run node");
    let log =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{log}");
    assert!(out.status.success(), "the node clients' transactions failed:\n{log}");
    assert!(log.contains("node clients: OK"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cli_works() {
    let installed = Command::new("redis-cli").arg("--version").output();
    assert!(
        installed.is_ok(),
        "redis-cli is needed: apt-get install redis-tools (scripts/check.sh installs it)"
    );
    let server = TestServer::start_engine(Config::default()).await;
    let port = server.addr.port().to_string();
    let cli = move |args: &[&str]| {
        let port = port.clone();
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        async move {
            tokio::task::spawn_blocking(move || {
                let out =
                    Command::new("redis-cli").arg("-p").arg(&port).args(&args).output().unwrap();
                assert!(out.status.success(), "{out:?}");
                String::from_utf8(out.stdout).unwrap()
            })
            .await
            .unwrap()
        }
    };
    assert_eq!(cli(&["PING"]).await, "PONG\n");
    assert_eq!(cli(&["URL.SEEN", "jobs", "http://a.example/"]).await, "0\n");
    assert_eq!(cli(&["URL.SEEN", "jobs", "HTTP://A.EXAMPLE:80/"]).await, "1\n");
    assert_eq!(cli(&["BF.ADD", "bf", "x"]).await, "1\n");
    assert_eq!(cli(&["BF.MEXISTS", "bf", "x", "y"]).await, "1\n0\n");
    assert_eq!(cli(&["TYPE", "jobs"]).await, "urlseen\n");
    assert_eq!(cli(&["--no-raw", "URL.SEEN", "jobs", "/rel"]).await.lines().count(), 1);
}
