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

/// `urlseen serve --redis` on a free port, killed on drop.
struct Serve {
    child: Child,
    port: u16,
    /// Dropped after the child is killed (fields drop after `Drop::drop`).
    _spill: tempfile::TempDir,
}

impl Serve {
    fn start(redis_port: u16) -> Serve {
        let spill = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(env!("CARGO_BIN_EXE_urlseen"))
            .args(["serve", "--http", "off", "--resp", &format!("127.0.0.1:{port}")])
            .args(["--redis", &format!("redis://127.0.0.1:{redis_port}/")])
            // Its local keys spill here: a killed server cannot remove its spill directory.
            .arg("--spill-dir")
            .arg(spill.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "urlseen serve --redis did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Serve { child, port, _spill: spill }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends one command per item of `commands` (pipelined) and returns the raw replies, one line
/// each (`*1` headers of one-element arrays skipped).
fn call(stream: &TcpStream, commands: &[Vec<&str>]) -> Vec<String> {
    let mut buf = Vec::new();
    for args in commands {
        buf.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            buf.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    }
    let mut w = stream;
    w.write_all(&buf).unwrap();
    let mut reader = BufReader::new(stream);
    let mut replies = Vec::new();
    let mut line = String::new();
    while replies.len() < commands.len() {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "connection closed");
        if line != "*1\r\n" {
            replies.push(line.trim_end().to_owned());
        }
    }
    replies
}

#[test]
fn two_servers_on_redis_share_a_namespace() {
    let redis = Redis::start();
    let (a, b) = (Serve::start(redis.port), Serve::start(redis.port));
    let urls = urlseen_corpus::distinct_urls(9, 20_000);
    let (ca, cb) = (
        TcpStream::connect(("127.0.0.1", a.port)).unwrap(),
        TcpStream::connect(("127.0.0.1", b.port)).unwrap(),
    );
    assert_eq!(call(&ca, &[vec!["URL.RESERVE", "shared", "CAPACITY", "5000"]]), ["+OK"]);
    // The same options again (from the other server) find the namespace; other ones are refused.
    assert_eq!(call(&cb, &[vec!["URL.RESERVE", "shared", "CAPACITY", "5000"]]), ["+OK"]);
    let other = call(&cb, &[vec!["URL.RESERVE", "shared", "CAPACITY", "7"]]);
    assert!(other[0].starts_with("-ERR redis backend"), "{other:?}");
    // Each URL goes to both servers, alternating which one asks first: exactly one "new".
    let mut news = 0;
    let mut recorded: Vec<&str> = Vec::new();
    for (i, chunk) in urls.chunks(500).enumerate() {
        let seen: Vec<Vec<&str>> =
            chunk.iter().map(|u| vec!["URL.SEEN", "shared", u.as_str()]).collect();
        let (first, second) = if i % 2 == 0 { (&ca, &cb) } else { (&cb, &ca) };
        let r1 = call(first, &seen);
        let r2 = call(second, &seen);
        for ((x, y), url) in r1.iter().zip(&r2).zip(chunk) {
            if x == ":0" || y == ":0" {
                recorded.push(url);
            }
            // New at most once; a URL new on the first server is seen on the second. (The first
            // may answer seen for a new URL, a Bloom false positive: then the second records it.)
            assert!(x == ":1" || x == ":0", "{x}");
            if x == ":0" {
                assert_eq!(y, ":1", "new on one server, then new again on the other");
            }
            news += usize::from(x == ":0") + usize::from(y == ":0");
        }
    }
    assert!(news >= urls.len() * 98 / 100, "only {news} of {} new", urls.len());
    // Read-only checks from either server see every recorded URL (one answered seen by both
    // was a false positive twice and is not recorded); a URL never sent is new.
    for c in [&ca, &cb] {
        let check: Vec<Vec<&str>> =
            recorded.iter().map(|u| vec!["URL.CHECK", "shared", u]).collect();
        let lost = call(c, &check).iter().filter(|r| *r != ":1").count();
        assert_eq!(lost, 0, "{lost} recorded URLs answered unseen");
    }
    assert_eq!(call(&cb, &[vec!["URL.SEEN", "shared", "https://never.example/x"]]), [":0"]);
    // Invalid URLs get their own error element; local-only commands say why they are refused.
    let bad = call(&ca, &[vec!["URL.SEEN", "shared", "/relative"]]);
    assert!(bad[0].starts_with("-ERR invalid URL"), "{bad:?}");
    let bf = call(&ca, &[vec!["BF.ADD", "f", "x"]]);
    assert!(bf[0].contains("--redis"), "{bf:?}");
}

/// Redis restarted empty (here: FLUSHALL) under a running `filter --redis`: the next batch of
/// new URLs is refused with a clear error and the process exits non-zero, instead of printing
/// URLs it had recorded as new again.
#[test]
fn a_redis_that_lost_its_data_stops_filter_with_an_error() {
    let redis = Redis::start();
    let mut child = Command::new(env!("CARGO_BIN_EXE_urlseen"))
        .args(["filter", "--redis", &format!("redis://127.0.0.1:{}/", redis.port)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    // Drain stdout on its own thread, counting lines, so neither side blocks on a full pipe.
    let (lines_tx, lines_rx) = std::sync::mpsc::channel::<()>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if line.is_err() {
                break;
            }
            let _ = lines_tx.send(());
        }
    });
    let first: Vec<String> = Generator::distinct(41).take(2_000).collect();
    stdin.write_all((first.join("\n") + "\n").as_bytes()).unwrap();
    stdin.flush().unwrap();
    // Wait until it has printed (so recorded) some of them.
    lines_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let flushed = TcpStream::connect(("127.0.0.1", redis.port)).and_then(|mut s| {
        s.write_all(b"FLUSHALL\r\n")?;
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf)?;
        Ok(buf)
    });
    assert_eq!(&flushed.unwrap(), b"+OK\r\n");
    let more: Vec<String> = Generator::distinct(42).take(2_000).collect();
    // The process may already have stopped: a failed write is fine.
    let _ = stdin.write_all((more.join("\n") + "\n").as_bytes());
    drop(stdin);
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let status = child.wait().unwrap();
    reader.join().unwrap();
    assert!(!status.success(), "filter went on after redis lost its data");
    assert!(err.contains("redis lost data"), "{err}");
}
