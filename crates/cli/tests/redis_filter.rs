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
    args: Vec<&'static str>,
    child: Option<Child>,
    dir: tempfile::TempDir,
}

impl Redis {
    /// No persistence.
    fn start() -> Redis {
        Redis::start_with(vec!["--save", "", "--appendonly", "no"])
    }

    /// Every write in the AOF before its reply: a restart loses nothing acknowledged.
    fn start_durable() -> Redis {
        Redis::start_with(vec!["--save", "", "--appendonly", "yes", "--appendfsync", "always"])
    }

    fn start_with(args: Vec<&'static str>) -> Redis {
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
        let mut redis = Redis { port, args, child: None, dir };
        redis.spawn();
        redis
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(&self.args)
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let pong = TcpStream::connect(("127.0.0.1", self.port)).ok().and_then(|mut s| {
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
    }

    /// `kill -9`.
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Killed, and started again on the same port and directory (with its AOF, if any).
    fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A running `urlseen filter --redis` whose stdout lines are collected as they come.
struct Running {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    fn start(port: u16, extra: &[&str]) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_urlseen"))
            .args(["filter", "--redis", &format!("redis://127.0.0.1:{port}/")])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let reader = std::thread::spawn({
            let lines = std::sync::Arc::clone(&lines);
            move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    lines.lock().unwrap().push(line);
                }
            }
        });
        Running { stdin: child.stdin.take(), child, lines, reader: Some(reader) }
    }

    /// Writes lines (a failed write is fine: the process may have stopped).
    fn feed(&mut self, urls: &[String]) {
        if let Some(stdin) = &mut self.stdin {
            let _ = stdin.write_all((urls.join("\n") + "\n").as_bytes());
            let _ = stdin.flush();
        }
    }

    /// Waits until at least `n` lines were printed.
    fn wait_for(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.lines.lock().unwrap().len() < n {
            assert!(Instant::now() < deadline, "filter printed {} of {n} lines", self.printed());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn printed(&self) -> usize {
        self.lines.lock().unwrap().len()
    }

    /// Closes stdin and waits: (success, stdout lines, stderr).
    fn finish(mut self) -> (bool, Vec<String>, String) {
        drop(self.stdin.take());
        let mut err = String::new();
        self.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        let status = self.child.wait().unwrap();
        self.reader.take().unwrap().join().unwrap();
        let lines = std::mem::take(&mut *self.lines.lock().unwrap());
        (status.success(), lines, err)
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
        Serve::start_with(redis_port, &[])
    }

    fn start_with(redis_port: u16, extra: &[&str]) -> Serve {
        Serve::start_on(redis_port, "off", extra)
    }

    /// With its HTTP API on `http` (`host:port`, or `off`).
    fn start_on(redis_port: u16, http: &str, extra: &[&str]) -> Serve {
        // A free port can be taken by another process before the server binds it: start
        // again on a new one until this child is the one that answers.
        loop {
            if let Some(serve) = Serve::try_start_on(redis_port, http, extra) {
                return serve;
            }
        }
    }

    fn try_start_on(redis_port: u16, http: &str, extra: &[&str]) -> Option<Serve> {
        let spill = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut child = Command::new(env!("CARGO_BIN_EXE_urlseen"))
            .args(["serve", "--http", http, "--resp", &format!("127.0.0.1:{port}")])
            .args(["--redis", &format!("redis://127.0.0.1:{redis_port}/")])
            // Its local keys spill here: a killed server cannot remove its spill directory.
            .arg("--spill-dir")
            .arg(spill.path())
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if child.try_wait().unwrap().is_some() {
                return None; // it could not bind its port
            }
            assert!(Instant::now() < deadline, "urlseen serve --redis did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        let serve = Serve { child, port, _spill: spill };
        let pid = format!("process_id:{}\r\n", serve.child.id());
        server_info(port).contains(&pid).then_some(serve)
    }
}

/// The text of `INFO server` from the server on `port`.
fn server_info(port: u16) -> String {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    (&stream).write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n").unwrap();
    let mut reader = BufReader::new(&stream);
    let mut header = String::new();
    reader.read_line(&mut header).unwrap();
    let len: usize = header.trim_start_matches('$').trim_end().parse().unwrap_or(0);
    let mut body = vec![0u8; len];
    std::io::Read::read_exact(&mut reader, &mut body).unwrap();
    String::from_utf8_lossy(&body).into_owned()
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
    // An invalid URL answers -1 in its position; local-only commands say why they are refused.
    let bad = call(&ca, &[vec!["URL.SEEN", "shared", "/relative"]]);
    assert_eq!(bad, [":-1"]);
    let bf = call(&ca, &[vec!["BF.ADD", "f", "x"]]);
    assert!(bf[0].contains("--redis"), "{bf:?}");
}

/// One HTTP/1.1 POST of a JSON body; returns the response body.
fn post_json(port: u16, path: &str, body: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    std::io::Read::read_to_string(&mut stream, &mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned()
}

/// Under `--redis` the HTTP API answers from Redis, as `URL.SEEN` and `URL.CHECK` do: what
/// one records, the other sees (it used to answer from an empty local namespace).
#[test]
fn http_under_redis_agrees_with_resp() {
    let redis = Redis::start();
    let http = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let server = Serve::start_on(redis.port, &format!("127.0.0.1:{http}"), &[]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", http)).is_err() {
        assert!(Instant::now() < deadline, "the HTTP API did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let resp = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let (a, b, c) = ("https://a.example/", "https://b.example/", "https://c.example/");
    assert_eq!(call(&resp, &[vec!["URL.SEEN", "web", a]]), [":0"]);
    let check = format!(r#"{{"urls":["{a}","{b}"]}}"#);
    assert_eq!(post_json(http, "/v1/namespaces/web/check", &check), r#"{"seen":[true,false]}"#);
    let seen = format!(r#"{{"urls":["{b}","{a}"]}}"#);
    assert_eq!(post_json(http, "/v1/namespaces/web/seen", &seen), r#"{"seen":[false,true]}"#);
    assert_eq!(
        call(&resp, &[vec!["URL.CHECK", "web", b], vec!["URL.CHECK", "web", c]]),
        [":1", ":0"]
    );
    // A second server on the same Redis sees what the first one's HTTP API recorded.
    let other = Serve::start(redis.port);
    let other = TcpStream::connect(("127.0.0.1", other.port)).unwrap();
    assert_eq!(call(&other, &[vec!["URL.SEEN", "web", b]]), [":1"]);
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

/// Small leaves, so the namespace starts with many of them and a process that printed a few
/// URLs has read nothing of most.
const SMALL_LEAVES: [&str; 4] = ["--capacity", "100000", "--leaf-bits", "65536"];

/// Redis restarted EMPTY (killed, started again without persistence) under a running `filter
/// --redis` that has read nothing of the leaves its next URLs go to: those URLs were printed
/// by another process before the restart. The filter stops with an error naming the lost data
/// instead of printing them again, and exits non-zero.
#[test]
fn a_redis_restarted_empty_stops_filter_even_with_nothing_read() {
    let mut redis = Redis::start();
    let ns = ["--ns", "wiped"];
    let recorded: Vec<String> = Generator::distinct(51).take(2_000).collect();
    let mut a = Running::start(redis.port, &[&SMALL_LEAVES[..], &ns[..]].concat());
    a.feed(&recorded);
    let (ok, printed_by_a, err) = a.finish();
    assert!(ok, "{err}");
    assert!(printed_by_a.len() > 1_950, "{}", printed_by_a.len());

    let mut b = Running::start(redis.port, &[&SMALL_LEAVES[..], &ns[..]].concat());
    b.feed(&["https://b.example/first".to_owned()]);
    b.wait_for(1);
    redis.restart();
    // Longer than a pooled connection may idle unchecked: the next call finds the restart
    // before it sends anything (a batch sent into a dead connection would be of unknown
    // outcome, and printed).
    std::thread::sleep(Duration::from_millis(1_200));
    b.feed(&recorded);
    let (ok, printed_by_b, err) = b.finish();
    assert!(!ok, "filter went on after redis restarted empty");
    assert!(err.contains("redis lost data") && err.contains("metadata is gone"), "{err}");
    assert!(err.contains("refusing rather than answer recorded URLs as new"), "{err}");
    assert!(
        printed_by_b == ["https://b.example/first"],
        "{} URLs printed again, first {:?}",
        printed_by_b.len() - 1,
        printed_by_b.get(1)
    );
}

/// Redis killed mid-stream and restarted with its data (AOF, fsync always) a second later:
/// the filter retries with backoff, goes on and exits 0. Every distinct input URL is printed,
/// and the only repeats are of the batch in flight when Redis died.
#[test]
fn a_redis_restarted_with_its_data_is_waited_for() {
    let mut redis = Redis::start_durable();
    let mut generator = Generator::new(52);
    let urls: Vec<String> = (0..40_000)
        .map(|_| {
            let mut s = String::new();
            generator.next_into(&mut s);
            s
        })
        .collect();
    let mut f = Running::start(redis.port, &["--ns", "restart"]);
    f.feed(&urls[..20_000]);
    f.wait_for(1_000);
    redis.kill();
    let port = redis.port;
    let restarter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(1));
        redis.restart();
        redis
    });
    f.feed(&urls[20_000..]);
    let (ok, printed, err) = f.finish();
    let redis = restarter.join().unwrap();
    assert_eq!(redis.port, port);
    assert!(ok, "filter failed: {err}");
    assert!(err.contains("retrying in"), "no retry was logged: {err}");

    let canon = Canonicalizer::new(Options::default());
    let distinct: HashSet<String> = urls.iter().map(|u| canon.canonicalize(u).unwrap()).collect();
    let mut once = HashSet::new();
    let mut repeats = 0;
    for line in &printed {
        if !once.insert(canon.canonicalize(line).unwrap()) {
            repeats += 1;
        }
    }
    // A Bloom false positive is a URL never printed: at most about 1% of them.
    let missing = distinct.len() - once.len();
    assert!(missing <= distinct.len() / 100, "{missing} of {} never printed", distinct.len());
    // Repeats only from the batch (at most 4,096 lines) whose outcome was unknown.
    assert!(repeats <= 4_096, "{repeats} URLs printed twice");
    println!("{} distinct, {} printed once, {repeats} printed twice", distinct.len(), once.len());
}

/// Redis down for longer than --redis-retry-for: the filter gives up with a clear message and
/// a non-zero exit, having printed every URL it answered before.
#[test]
fn a_redis_down_past_the_retry_budget_stops_filter() {
    let mut redis = Redis::start();
    let mut f = Running::start(redis.port, &["--ns", "down", "--redis-retry-for", "1"]);
    let first: Vec<String> = Generator::distinct(53).take(500).collect();
    f.feed(&first);
    f.wait_for(490);
    redis.kill();
    std::thread::sleep(Duration::from_millis(1_200));
    let started = Instant::now();
    f.feed(&Generator::distinct(54).take(500).collect::<Vec<_>>());
    let (ok, printed, err) = f.finish();
    assert!(!ok, "filter exited 0 with redis down");
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    assert!(err.contains("redis unavailable: gave up after retrying for"), "{err}");
    assert!(err.contains("retrying in"), "{err}");
    assert!(printed.len() >= 490 && printed.len() <= 500, "{}", printed.len());
}

/// `serve --redis` over a Redis restarted with its data: the server waits for it (no error to
/// its clients), keeps every recorded URL seen and answers new ones new.
#[test]
fn serve_on_redis_waits_for_a_restarted_redis() {
    let mut redis = Redis::start_durable();
    let serve = Serve::start_with(redis.port, &["--redis-retry-for", "10"]);
    let c = TcpStream::connect(("127.0.0.1", serve.port)).unwrap();
    let urls = urlseen_corpus::distinct_urls(55, 400);
    let seen = |urls: &[String]| -> Vec<String> {
        let cmds: Vec<Vec<&str>> = urls.iter().map(|u| vec!["URL.SEEN", "r", u.as_str()]).collect();
        call(&c, &cmds)
    };
    assert!(seen(&urls[..200]).iter().all(|r| r == ":0"));
    redis.kill();
    let restarter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(800));
        redis.restart();
        redis
    });
    // Sent while Redis is down: answered once it is back (or 0 if a reply was lost).
    assert!(seen(&urls[200..]).iter().all(|r| r == ":0"), "a new URL answered otherwise");
    let _redis = restarter.join().unwrap();
    assert!(seen(&urls[..200]).iter().all(|r| r == ":1"), "a recorded URL lost");
    assert!(seen(&urls[200..]).iter().all(|r| r == ":1"), "a URL answered new was not recorded");
}

/// One `urlseen filter --redis` run over `input` with `extra` options: its stdout lines and
/// stderr.
fn filter_with(port: u16, extra: &[&str], input: &str) -> (Vec<String>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_urlseen"))
        .args(["filter", "--redis", &format!("redis://127.0.0.1:{port}/"), "--stats"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Written from a thread: the child prints while it reads, and a pipe holds only so much.
    let (mut stdin, input) = (child.stdin.take().unwrap(), input.as_bytes().to_vec());
    let writer = std::thread::spawn(move || stdin.write_all(&input).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "urlseen filter --redis failed: {err}");
    (String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect(), err)
}

/// `filter --redis --recrawl-after`: the window is kept in Redis (a run with another window
/// uses it), and a URL is printed again once it is over (real clock: a 4 s window of 2
/// generations: seen for at least 2 s, new again at 4 s).
#[test]
fn filter_on_redis_with_a_recrawl_window() {
    let redis = Redis::start();
    let urls: Vec<String> = Generator::distinct(7).take(500).collect();
    let input = urls.join("\n") + "\n";
    let window = ["--ns", "news", "--recrawl-after", "4s", "--recrawl-generations", "2"];
    let (first, err) = filter_with(redis.port, &window, &input);
    assert_eq!(first.len(), 500, "{err}");
    assert!(err.contains("recrawl window of 4 s"), "{err}");
    let started = std::time::Instant::now();
    // Another window asked: the namespace keeps its own (4 s, 2 generations).
    let (second, err) = filter_with(redis.port, &["--ns", "news", "--recrawl-after", "1h"], &input);
    assert!(second.is_empty(), "printed again within the window: {}", second.len());
    assert!(err.contains("recrawl window of 4 s"), "{err}");
    // Past the window (4 s after the first run recorded them, at most): new again.
    std::thread::sleep(Duration::from_millis(4_100).saturating_sub(started.elapsed()));
    let (third, err) = filter_with(redis.port, &window, &input);
    assert_eq!(third.len(), 500, "{err}");
}

/// `URL.FORGET ns HOST h` under `serve --redis`, and `urlseen forget --redis --host`: the count
/// of the host's recorded URLs; afterwards they are new on every server (another server sees
/// the forget within its metadata poll, 100 ms), and every other recorded URL stays seen.
#[test]
fn forget_by_host_under_serve_redis_and_the_cli() {
    let redis = Redis::start();
    let (a, b) = (Serve::start(redis.port), Serve::start(redis.port));
    let (ca, cb) = (
        TcpStream::connect(("127.0.0.1", a.port)).unwrap(),
        TcpStream::connect(("127.0.0.1", b.port)).unwrap(),
    );
    for c in [&ca, &cb] {
        assert_eq!(call(c, &[vec!["URL.RESERVE", "hosts", "CAPACITY", "5000"]]), ["+OK"]);
    }
    let urls: Vec<String> =
        (0..6_000).map(|i| format!("https://site{}.example/p/{i}", i % 20)).collect();
    let mut recorded: Vec<&str> = Vec::new();
    for chunk in urls.chunks(500) {
        let seen: Vec<Vec<&str>> =
            chunk.iter().map(|u| vec!["URL.SEEN", "hosts", u.as_str()]).collect();
        for (r, u) in call(&ca, &seen).iter().zip(chunk) {
            if r == ":0" {
                recorded.push(u);
            }
        }
    }
    let check = |c: &TcpStream, urls: &[&str]| -> usize {
        let cmds: Vec<Vec<&str>> = urls.iter().map(|u| vec!["URL.CHECK", "hosts", u]).collect();
        call(c, &cmds).iter().filter(|r| *r == ":1").count()
    };
    // Server b has read every leaf (its replicas are built).
    assert_eq!(check(&cb, &recorded), recorded.len());
    let of = |host: &str| -> Vec<&str> {
        recorded.iter().copied().filter(|u| u.contains(&format!("//{host}/"))).collect()
    };
    let site3 = of("site3.example");
    let reply = call(&ca, &[vec!["URL.FORGET", "hosts", "HOST", "Site3.example"]]);
    assert_eq!(reply, [format!(":{}", site3.len())]);
    std::thread::sleep(Duration::from_millis(200));
    let others: Vec<&str> =
        recorded.iter().copied().filter(|u| !u.contains("//site3.example/")).collect();
    for c in [&ca, &cb] {
        assert!(check(c, &site3) <= 1, "the host's URLs are still seen");
        assert_eq!(check(c, &others), others.len(), "another URL was lost");
    }
    // The command-line tool, on the same namespace (same options as the server gave it).
    let site4 = of("site4.example");
    let out = Command::new(env!("CARGO_BIN_EXE_urlseen"))
        .args(["forget", "--redis", &format!("redis://127.0.0.1:{}/", redis.port)])
        .args(["--ns", "hosts", "--capacity", "5000", "--host", "site4.example"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("forgot {} URLs of host site4.example\n", site4.len())
    );
    std::thread::sleep(Duration::from_millis(200));
    let others: Vec<&str> = others.into_iter().filter(|u| !u.contains("//site4.")).collect();
    for c in [&ca, &cb] {
        assert!(check(c, &site4) <= 1, "the host's URLs are still seen");
        assert_eq!(check(c, &others), others.len(), "another URL was lost");
    }
    // Only by host under --redis; a URL given as the host is refused, as locally.
    let urls_form = call(&ca, &[vec!["URL.FORGET", "hosts", "https://site1.example/p/1"]]);
    assert!(urls_form[0].contains("--redis"), "{urls_form:?}");
    let bad = call(&ca, &[vec!["URL.FORGET", "hosts", "HOST", "https://site1.example/"]]);
    assert!(bad[0].starts_with("-ERR invalid host"), "{bad:?}");
    let out = Command::new(env!("CARGO_BIN_EXE_urlseen"))
        .args(["forget", "--redis", &format!("redis://127.0.0.1:{}/", redis.port)])
        .args(["--ns", "hosts", "--capacity", "5000", "https://site1.example/p/1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

/// `urlseen filter --redis` keeps each URL's host: `urlseen forget --redis --host` then makes
/// exactly that host's URLs new, and `filter --redis` prints them (and only them) again.
#[test]
fn filter_on_redis_records_hosts_for_a_forget() {
    let redis = Redis::start();
    let url = format!("redis://127.0.0.1:{}/", redis.port);
    let urls: String = (0..3_000).map(|i| format!("https://h{}.example/x/{i}\n", i % 30)).collect();
    let filter = |input: &str| -> String {
        let mut child = Command::new(env!("CARGO_BIN_EXE_urlseen"))
            .args(["filter", "--redis", &url, "--ns", "crawl", "--capacity", "2000"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let first = filter(&urls);
    let printed: HashSet<&str> = first.lines().collect();
    let out = Command::new(env!("CARGO_BIN_EXE_urlseen"))
        .args(["forget", "--redis", &url, "--ns", "crawl", "--capacity", "2000"])
        .args(["--host", "h7.example"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let of_host: Vec<&str> =
        printed.iter().copied().filter(|u| u.starts_with("https://h7.example/")).collect();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("forgot {} URLs of host h7.example\n", of_host.len())
    );
    // Printed again: the host's URLs, and none printed before of another host (a URL not
    // printed the first time, a false positive then, was never recorded and may be now).
    let again = filter(&urls);
    let again: HashSet<&str> = again.lines().collect();
    let wrong: Vec<&&str> = again
        .iter()
        .filter(|u| printed.contains(**u) && !u.starts_with("https://h7.example/"))
        .collect();
    assert!(wrong.is_empty(), "recorded URLs of other hosts printed again: {wrong:?}");
    let back = of_host.iter().filter(|u| again.contains(**u)).count();
    assert!(back >= of_host.len() * 95 / 100, "{back} of {}", of_host.len());
}

/// `filter --redis --stats` reports the RAM the namespace takes in the process (its leaf
/// replicas: the filters; the logs are in Redis) and the worst leaf's FPR.
#[test]
fn filter_on_redis_reports_its_filters_in_ram() {
    let redis = Redis::start();
    let urls: Vec<String> = Generator::distinct(11).take(20_000).collect();
    let input = urls.join("\n") + "\n";
    let (printed, err) = filter_with(redis.port, &["--ns", "ram", "--capacity", "2000"], &input);
    assert!(printed.len() > 19_800, "{err}");
    let number_before = |what: &str| -> f64 {
        let at = err.find(what).unwrap_or_else(|| panic!("no {what:?} in {err}"));
        err[..at].split_whitespace().last().unwrap().parse().unwrap()
    };
    let mib = number_before(" MiB in this process");
    // 20,000 URLs at 1% take about 24 KB of filters; the leaves grew from 2,000 URLs' size.
    assert!(mib > 0.01 && mib < 2.0, "filters {mib} MiB: {err}");
    let fpr: f64 = err
        .split("worst leaf FPR ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no worst leaf FPR in {err}"));
    assert!((0.0..=0.01).contains(&fpr), "worst leaf FPR {fpr}: {err}");
}

/// The remaining time (`PTTL`, ms) of Redis key `key` on the server on `port`.
fn pttl(port: u16, key: &str) -> i64 {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let reply = call(&stream, &[vec!["PTTL", key]]);
    reply[0].trim_start_matches(':').parse().unwrap()
}

/// `filter --redis --ttl`: the namespace the run makes gets the lifetime on its Redis keys (a
/// run on an existing one leaves it as it is); once it is over the URLs are new again.
#[test]
fn filter_on_redis_with_a_ttl_makes_a_namespace_that_ends_by_itself() {
    let redis = Redis::start();
    let urls: Vec<String> = Generator::distinct(9).take(300).collect();
    let input = urls.join("\n") + "\n";
    let (first, err) = filter_with(redis.port, &["--ns", "job", "--ttl", "2s"], &input);
    assert_eq!(first.len(), 300, "{err}");
    for key in ["urlseen:{job}:meta", "urlseen:{job:1}:log", "urlseen:{job:1}:id"] {
        let left = pttl(redis.port, key);
        assert!((1..=2_000).contains(&left), "{key}: PTTL {left}");
    }
    // An existing namespace keeps its time (not pushed back by this run's --ttl).
    let (second, err) = filter_with(redis.port, &["--ns", "job", "--ttl", "1h"], &input);
    assert!(second.is_empty(), "{err}");
    assert!(pttl(redis.port, "urlseen:{job}:meta") <= 2_000);
    std::thread::sleep(Duration::from_millis(2_300));
    assert_eq!(pttl(redis.port, "urlseen:{job}:meta"), -2);
    let (third, err) = filter_with(redis.port, &["--ns", "job"], &input);
    assert_eq!(third.len(), 300, "{err}");
    assert_eq!(pttl(redis.port, "urlseen:{job}:meta"), -1);
    // A recrawl window's generations expire by themselves: no --ttl with it.
    let out = Command::new(env!("CARGO_BIN_EXE_urlseen"))
        .args(["filter", "--redis", &format!("redis://127.0.0.1:{}/", redis.port)])
        .args(["--ns", "news", "--recrawl-after", "1h", "--ttl", "1h"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--recrawl-after"));
}
