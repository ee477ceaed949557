//! `urlseen dump` / `urlseen restore`: a round trip through a file (and through a pipe) gives a
//! namespace that knows every URL and keeps growing; a damaged or cut file is refused and
//! leaves no namespace behind.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use urlseen_corpus::distinct_urls;

/// Runs `urlseen args…` with `input` on stdin; returns (stdout, stderr, success).
fn run(args: &[&str], input: &[u8]) -> (Vec<u8>, String, bool) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_urlseen"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    let _ = writer.join().unwrap();
    (out.stdout, String::from_utf8_lossy(&out.stderr).into(), out.status.success())
}

fn lines(urls: &[String]) -> Vec<u8> {
    urls.iter().flat_map(|u| u.bytes().chain(std::iter::once(b'\n'))).collect()
}

/// `filter --data dir --ns ns` over `urls`: how many it printed (new).
fn filter(dir: &Path, ns: &str, urls: &[String]) -> usize {
    printed(dir, ns, urls).len()
}

/// `filter --data dir --ns ns` over `urls`: what it printed (new, and so recorded; one
/// answered "seen" on a false positive is not recorded, docs/durability.md).
fn printed(dir: &Path, ns: &str, urls: &[String]) -> Vec<String> {
    let args = ["filter", "--data", dir.to_str().unwrap(), "--ns", ns, "--capacity", "2000"];
    let (out, err, ok) = run(&args, &lines(urls));
    assert!(ok, "{err}");
    String::from_utf8(out).unwrap().lines().map(str::to_owned).collect()
}

fn splits(dir: &Path, ns: &str) -> u64 {
    let (out, err, ok) =
        run(&["stats", "--data", dir.to_str().unwrap(), "--ns", ns, "--json"], b"");
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    v[0]["splits_done"].as_u64().unwrap()
}

#[test]
fn a_round_trip_knows_every_url_and_keeps_splitting() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let file = tmp.path().join("jobs.dump");
    let urls = distinct_urls(7, 30_000);
    let recorded = printed(&a, "jobs", &urls);
    let new = recorded.len();
    assert!(new > 29_000, "{new}");

    let (_, err, ok) = run(
        &["dump", "--data", a.to_str().unwrap(), "--ns", "jobs", "--file", file.to_str().unwrap()],
        b"",
    );
    assert!(ok, "{err}");
    assert!(err.contains(&format!("{new} URLs")), "{err}");
    let (_, err, ok) = run(
        &[
            "restore",
            "--data",
            b.to_str().unwrap(),
            "--ns",
            "copy",
            "--file",
            file.to_str().unwrap(),
        ],
        b"",
    );
    assert!(ok, "{err}");
    assert!(err.contains(&format!("{new} URLs")), "{err}");
    // Every URL recorded is known in the copy: nothing is printed.
    assert_eq!(filter(&b, "copy", &recorded), 0, "false negatives after restore");
    // More URLs force more splits; nothing of the original is lost.
    let before = splits(&b, "copy");
    let more = distinct_urls(8, 150_000);
    filter(&b, "copy", &more);
    assert!(splits(&b, "copy") > before, "the restored namespace did not split further");
    assert_eq!(filter(&b, "copy", &recorded), 0, "a URL lost after splits");

    // Through a pipe, under its own name, into the same directory.
    let (dump, err, ok) = run(&["dump", "--data", a.to_str().unwrap(), "--ns", "jobs"], b"");
    assert!(ok, "{err}");
    assert_eq!(dump, std::fs::read(&file).unwrap(), "the dump of an unchanged namespace differs");
    let (_, err, ok) = run(&["restore", "--data", b.to_str().unwrap()], &dump);
    assert!(ok, "{err}");
    assert_eq!(filter(&b, "jobs", &recorded), 0);
    // Into a name that exists: refused, and the namespace there is untouched.
    let (_, err, ok) = run(&["restore", "--data", b.to_str().unwrap()], &dump);
    assert!(!ok && err.contains("already exists"), "{err}");
    assert_eq!(filter(&b, "jobs", &recorded), 0);
}

#[test]
fn a_damaged_or_cut_dump_is_refused_and_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let urls = distinct_urls(9, 5_000);
    let recorded = printed(&a, "jobs", &urls);
    let (dump, err, ok) = run(&["dump", "--data", a.to_str().unwrap(), "--ns", "jobs"], b"");
    assert!(ok, "{err}");
    let data = b.to_str().unwrap();
    let mut flipped = dump.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x01;
    let (_, err, ok) = run(&["restore", "--data", data, "--ns", "bad"], &flipped);
    assert!(!ok && err.contains("damaged dump chunk"), "{err}");
    let cut = &dump[..dump.len() - 20];
    let (_, err, ok) = run(&["restore", "--data", data, "--ns", "cut"], cut);
    assert!(!ok && err.contains("cut short"), "{err}");
    let (_, err, ok) = run(&["restore", "--data", data, "--ns", "junk"], b"not a dump at all");
    assert!(!ok && err.contains("not a urlseen dump file"), "{err}");
    let (out, err, ok) = run(&["stats", "--data", data], b"");
    assert!(ok, "{err}");
    assert!(
        String::from_utf8_lossy(&out).contains("no namespaces"),
        "{}",
        String::from_utf8_lossy(&out)
    );
    // And the good one still restores there.
    let (_, err, ok) = run(&["restore", "--data", data, "--ns", "good"], &dump);
    assert!(ok, "{err}");
    assert_eq!(filter(&b, "good", &recorded), 0);
}

/// A throwaway `redis-server` on a free port, killed on drop.
struct Redis {
    port: u16,
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl Redis {
    fn start() -> Redis {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is needed for this test (apt-get install -y redis-server)");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Redis { port, child, _dir: dir }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_namespace_goes_to_redis_and_back_through_dump_files() {
    let redis = Redis::start();
    let url = redis.url();
    let tmp = tempfile::tempdir().unwrap();
    let (a, c) = (tmp.path().join("a"), tmp.path().join("c"));
    let urls = distinct_urls(21, 20_000);
    let recorded = printed(&a, "jobs", &urls);
    let (dump, err, ok) = run(&["dump", "--data", a.to_str().unwrap(), "--ns", "jobs"], b"");
    assert!(ok, "{err}");
    let (_, err, ok) = run(&["restore", "--redis", &url], &dump);
    assert!(ok, "{err}");
    // `filter --redis` with the namespace's options knows every URL there.
    let (out, err, ok) =
        run(&["filter", "--redis", &url, "--ns", "jobs", "--capacity", "2000"], &lines(&recorded));
    assert!(ok, "{err}");
    assert!(out.is_empty(), "false negatives in redis: {}", String::from_utf8_lossy(&out));
    // A second restore into it is refused.
    let (_, err, ok) = run(&["restore", "--redis", &url], &dump);
    assert!(!ok && err.contains("already exists"), "{err}");
    // Out of Redis (its options given, as to `filter --redis`), into a data directory.
    let (back, err, ok) =
        run(&["dump", "--redis", &url, "--ns", "jobs", "--capacity", "2000"], b"");
    assert!(ok, "{err}");
    let (_, err, ok) = run(&["restore", "--data", c.to_str().unwrap(), "--ns", "back"], &back);
    assert!(ok, "{err}");
    assert_eq!(filter(&c, "back", &recorded), 0, "lost on the way back from redis");
    // Other options than the namespace's are refused by Redis, not dumped wrong.
    let (_, err, ok) = run(&["dump", "--redis", &url, "--ns", "jobs", "--capacity", "5000"], b"");
    assert!(!ok, "{err}");
}
