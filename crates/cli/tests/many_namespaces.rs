//! `urlseen serve --data` with many more namespaces than descriptors: 20,000 namespaces (`BF.*`
//! keys and URL namespaces, a few items each) created through a pipeline under `ulimit -n 256`,
//! the server restarted under the same limit, and every item still seen (issue 33's CI test).

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NAMESPACES: usize = 20_000;
/// Items per namespace.
const ITEMS: usize = 3;
/// Commands per pipelined batch.
const BATCH: usize = 500;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

struct Server {
    child: Child,
    port: u16,
}

impl Server {
    /// `urlseen serve --data dir` with at most 256 open descriptors (soft and hard).
    fn start(data: &std::path::Path) -> Server {
        loop {
            let (port, http) = (free_port(), free_port());
            let mut child = Command::new("sh")
                .args(["-c", r#"ulimit -n 256 && exec "$0" "$@""#])
                .arg(env!("CARGO_BIN_EXE_urlseen"))
                .args(["serve", "--fsync", "everysec", "--data"])
                .arg(data)
                .args(["--resp", &format!("127.0.0.1:{port}")])
                .args(["--http", &format!("127.0.0.1:{http}")])
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap();
            let started = Instant::now();
            let mut up = false;
            while started.elapsed() < Duration::from_secs(30) {
                if child.try_wait().unwrap().is_some() {
                    break; // it could not bind its ports (taken meanwhile): again
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    up = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let server = Server { child, port };
            // Another process could answer on a port taken between `free_port` and the bind.
            if up && query(&server.connect(), &["INFO", "server"]).contains(&server.pid_line()) {
                return server;
            }
        }
    }

    fn pid_line(&self) -> String {
        format!("process_id:{}\r\n", self.child.id())
    }

    fn connect(&self) -> TcpStream {
        TcpStream::connect(("127.0.0.1", self.port)).unwrap()
    }

    /// Stops it as an operator would (SIGTERM), and checks that it exited cleanly.
    fn stop(mut self) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "exit status {status}");
    }

    /// Descriptors the server holds open now.
    fn open_descriptors(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id())).map_or(0, Iterator::count)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn command(out: &mut Vec<u8>, args: &[&str]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
}

/// One command's reply as text (a bulk string's body, or the line).
fn query(stream: &TcpStream, args: &[&str]) -> String {
    let mut buf = Vec::new();
    command(&mut buf, args);
    (&*stream).write_all(&buf).unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let Some(len) = line.strip_prefix('$') else { return line };
    let mut body = vec![0u8; len.trim_end().parse::<usize>().unwrap() + 2];
    std::io::Read::read_exact(&mut reader, &mut body).unwrap();
    String::from_utf8(body).unwrap()
}

/// Namespace `i`: every tenth a URL namespace, the others `BF.*` keys.
fn is_url(i: usize) -> bool {
    i.is_multiple_of(10)
}

fn items(i: usize) -> Vec<String> {
    (0..ITEMS)
        .map(|j| match is_url(i) {
            true => format!("https://h{}.example/job/{i}/{j}", i % 7),
            false => format!("item-{i}-{j}"),
        })
        .collect()
}

/// Sends, pipelined in batches, for each namespace: `URL.<verb> job:i urls…` or
/// `BF.<verb> bf:i items…`; returns each reply's integers.
fn each_namespace(stream: &TcpStream, url_verb: &str, bf_verb: &str) -> Vec<Vec<i64>> {
    let mut reader = BufReader::new(stream);
    let mut replies = Vec::with_capacity(NAMESPACES);
    for start in (0..NAMESPACES).step_by(BATCH) {
        let mut buf = Vec::new();
        for i in start..(start + BATCH).min(NAMESPACES) {
            let items = items(i);
            let (verb, key) = match is_url(i) {
                true => (url_verb, format!("job:{i}")),
                false => (bf_verb, format!("bf:{i}")),
            };
            let mut args = vec![verb, key.as_str()];
            args.extend(items.iter().map(String::as_str));
            command(&mut buf, &args);
        }
        (&*stream).write_all(&buf).unwrap();
        for i in start..(start + BATCH).min(NAMESPACES) {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            assert_eq!(line, format!("*{ITEMS}\r\n"), "namespace {i}");
            let answers = (0..ITEMS)
                .map(|_| {
                    line.clear();
                    reader.read_line(&mut line).unwrap();
                    line.trim_end()
                        .strip_prefix(':')
                        .unwrap_or_else(|| panic!("{i}: {line:?}"))
                        .parse()
                        .unwrap()
                })
                .collect();
            replies.push(answers);
        }
    }
    replies
}

#[test]
fn twenty_thousand_namespaces_under_ulimit_256_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let stream = server.connect();
    let started = Instant::now();
    let created = each_namespace(&stream, "URL.SEEN", "BF.MADD");
    let create_secs = started.elapsed().as_secs_f64();
    for (i, answers) in created.iter().enumerate() {
        // URL.SEEN answers 0 (new), BF.MADD 1 (added).
        let new = if is_url(i) { 0 } else { 1 };
        assert_eq!(answers, &vec![new; ITEMS], "namespace {i}");
    }
    assert_eq!(query(&stream, &["DBSIZE"]), format!(":{NAMESPACES}\r\n"));
    let fds = server.open_descriptors();
    assert!(fds < 256, "{fds} descriptors open");
    let info = query(&stream, &["INFO", "persistence"]);
    let field = |name: &str| -> usize {
        let line = info.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{info}"));
        line[name.len() + 1..].trim().parse().unwrap()
    };
    let (open, max) = (field("urlseen_namespace_files_open"), field("urlseen_namespace_files_max"));
    assert_eq!(max, 64, "a quarter of ulimit -n 256");
    assert!(open <= max, "{info}");
    eprintln!("{NAMESPACES} namespaces created in {create_secs:.1} s; {fds} descriptors open");
    drop(stream);
    server.stop();

    let started = Instant::now();
    let server = Server::start(dir.path());
    let restart_secs = started.elapsed().as_secs_f64();
    let stream = server.connect();
    assert_eq!(query(&stream, &["DBSIZE"]), format!(":{NAMESPACES}\r\n"));
    let seen = each_namespace(&stream, "URL.CHECK", "BF.MEXISTS");
    for (i, answers) in seen.iter().enumerate() {
        assert_eq!(answers, &vec![1; ITEMS], "namespace {i} lost an item across the restart");
    }
    let fds = server.open_descriptors();
    assert!(fds < 256, "{fds} descriptors open");
    eprintln!("restarted in {restart_secs:.1} s; every item seen; {fds} descriptors open");
}
