//! Acceptance of the distributed mode: two `urlseen filter --redis` processes fed the same
//! 1,000,000 URLs, interleaved, never print a canonical URL twice between them and print at
//! least 98% of the distinct ones. Needs `redis-server` (the test fails, saying how to install
//! it, when it is missing).

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use urlseen_canon::{Canonicalizer, Options};
use urlseen_corpus::Generator;

/// A throwaway `redis-server` on a free port, killed on drop.
struct Redis {
    port: u16,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Redis {
    fn start() -> Redis {
        let on_path = std::env::var_os("PATH").is_some_and(|paths| {
            std::env::split_paths(&paths).any(|p| p.join("redis-server").is_file())
        });
        assert!(
            on_path,
            "redis-server is not installed, and this test needs a real one: install it \
             (Debian/Ubuntu: apt-get install -y redis-server; scripts/check.sh does this)"
        );
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
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
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let pong = TcpStream::connect(("127.0.0.1", port)).ok().and_then(|mut s| {
                s.write_all(b"PING\r\n").ok()?;
                let mut buf = [0u8; 7];
                s.read_exact(&mut buf).ok()?;
                Some(buf == *b"+PONG\r\n")
            });
            if pong == Some(true) {
                break;
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Redis { port, child, _dir: dir }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `urlseen filter --redis`, feeds it `input` from a thread, returns its stdout lines.
fn filter(port: u16, input: Vec<u8>) -> std::thread::JoinHandle<Vec<String>> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_urlseen"))
        .args(["filter", "--redis", &format!("redis://127.0.0.1:{port}/"), "--ns", "accept"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let writer = std::thread::spawn(move || {
        // Small writes, so the two processes really run side by side.
        for chunk in input.chunks(64 * 1024) {
            stdin.write_all(chunk).unwrap();
        }
    });
    std::thread::spawn(move || {
        let lines: Vec<String> = BufReader::new(stdout).lines().map(Result::unwrap).collect();
        writer.join().unwrap();
        assert!(child.wait().unwrap().success(), "urlseen filter --redis failed");
        lines
    })
}

#[test]
fn two_filters_sharing_redis_print_each_url_once() {
    let redis = Redis::start();
    let mut generator = Generator::new(42);
    let urls: Vec<String> = (0..1_000_000)
        .map(|_| {
            let mut s = String::new();
            generator.next_into(&mut s);
            s
        })
        .collect();
    // Interleaved: the first process reads the URLs in order, the second reads the same
    // chunks of 10,000 from the last to the first.
    let chunks: Vec<&[String]> = urls.chunks(10_000).collect();
    let join = |order: &mut dyn Iterator<Item = &&[String]>| -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in order {
            for u in chunk.iter() {
                out.extend_from_slice(u.as_bytes());
                out.push(b'\n');
            }
        }
        out
    };
    let a = filter(redis.port, join(&mut chunks.iter()));
    let b = filter(redis.port, join(&mut chunks.iter().rev()));
    let (a, b) = (a.join().unwrap(), b.join().unwrap());

    let canon = Canonicalizer::new(Options::default());
    let distinct: HashSet<String> = urls.iter().map(|u| canon.canonicalize(u).unwrap()).collect();
    let mut printed = HashSet::new();
    for line in a.iter().chain(&b) {
        let c = canon.canonicalize(line).unwrap();
        assert!(distinct.contains(&c), "printed a URL that was not in the input: {line}");
        assert!(printed.insert(c), "printed twice between the two processes: {line}");
    }
    assert!(!a.is_empty() && !b.is_empty(), "both processes printed: {} and {}", a.len(), b.len());
    let share = printed.len() as f64 / distinct.len() as f64;
    println!(
        "process A printed {}, process B {}: {} distinct of {} ({:.4}), none twice",
        a.len(),
        b.len(),
        printed.len(),
        distinct.len(),
        share
    );
    assert!(
        share >= 0.98,
        "printed {} of {} distinct URLs ({share:.4})",
        printed.len(),
        distinct.len()
    );
}
