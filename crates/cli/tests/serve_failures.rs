//! `urlseen serve --data --fsync always` when the process runs out of what writes need: file
//! descriptors (`RLIMIT_NOFILE`), disk space (a small tmpfs) and address space (`RLIMIT_AS`).
//! A "new" reply is sent only for what is recorded, so every URL answered "new" is seen after
//! a restart; writes resume by themselves once the cause is gone; and reservations the
//! process could not fill are refused, never an abort.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A little over the namespaces' one recovery attempt per second.
const RETRY_AFTER: Duration = Duration::from_millis(1_300);

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Limits set in the child before it runs the server.
#[derive(Debug, Clone, Copy, Default)]
struct Limits {
    nofile: Option<u64>,
    address_space: Option<u64>,
}

struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(data: &Path, limits: Limits) -> Server {
        Server::start_with(data, limits, &[])
    }

    /// The server with `extra` arguments.
    fn start_with(data: &Path, limits: Limits, extra: &[&str]) -> Server {
        // A free port can be taken by another process before the server binds it: start
        // again on new ports until this child answers.
        loop {
            if let Some(server) = Server::try_start(data, limits, extra) {
                return server;
            }
        }
    }

    fn try_start(data: &Path, limits: Limits, extra: &[&str]) -> Option<Server> {
        let port = free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_urlseen"));
        command
            .args(["serve", "--fsync", "always", "--http", "off", "--data"])
            .arg(data)
            .args(["--resp", &format!("127.0.0.1:{port}")])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        #[expect(unsafe_code, reason = "setrlimit in the child, between fork and exec")]
        // SAFETY: the closure only calls setrlimit, which is async-signal-safe, on values it
        // owns; it allocates nothing and touches no lock.
        unsafe {
            command.pre_exec(move || {
                for (resource, value) in
                    [(libc::RLIMIT_NOFILE, limits.nofile), (libc::RLIMIT_AS, limits.address_space)]
                {
                    if let Some(v) = value {
                        let limit = libc::rlimit { rlim_cur: v, rlim_max: v };
                        if libc::setrlimit(resource, &limit) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                }
                Ok(())
            });
        }
        let mut child = command.spawn().unwrap();
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if child.try_wait().unwrap().is_some() {
                return None;
            }
            assert!(started.elapsed() < Duration::from_secs(20), "server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        let server = Server { child, port };
        let mut c = Client::connect(port);
        let Reply::Bulk(info) = c.call(&["INFO", "server"]) else { return None };
        info.contains(&format!("process_id:{}\r\n", server.child.id())).then_some(server)
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// SIGTERM, and the exit status.
    fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        self.child.wait().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(String),
    Array(Vec<Reply>),
    Nil,
}

struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    fn connect(port: u16) -> Client {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        Client { reader: BufReader::new(stream.try_clone().unwrap()), writer: stream }
    }

    fn send(&mut self, commands: &[Vec<String>]) {
        let mut buf = Vec::new();
        for args in commands {
            buf.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in args {
                buf.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
            }
        }
        self.writer.write_all(&buf).unwrap();
    }

    fn read(&mut self) -> Reply {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        let (kind, rest) = line.trim_end().split_at(1);
        match kind {
            "+" => Reply::Simple(rest.to_owned()),
            "-" => Reply::Error(rest.to_owned()),
            ":" => Reply::Int(rest.parse().unwrap()),
            "$" if rest == "-1" => Reply::Nil,
            "$" => {
                let mut body = vec![0; rest.parse::<usize>().unwrap() + 2];
                self.reader.read_exact(&mut body).unwrap();
                body.truncate(body.len() - 2);
                Reply::Bulk(String::from_utf8(body).unwrap())
            }
            "*" => Reply::Array((0..rest.parse::<usize>().unwrap()).map(|_| self.read()).collect()),
            _ => panic!("not a RESP reply: {line:?}"),
        }
    }

    fn call(&mut self, args: &[&str]) -> Reply {
        self.send(&[args.iter().map(|a| (*a).to_owned()).collect()]);
        self.read()
    }

    /// Pipelined `URL.SEEN ns url`, one call per URL: adds those answered "new" to `acked`;
    /// returns how many calls got an error reply, each a `MISCONF`.
    fn seen_each(&mut self, ns: &str, urls: &[String], acked: &mut Vec<String>) -> usize {
        let calls: Vec<Vec<String>> =
            urls.iter().map(|u| vec!["URL.SEEN".into(), ns.into(), u.clone()]).collect();
        self.send(&calls);
        let mut errors = 0;
        for url in urls {
            match self.read() {
                Reply::Array(a) if a == [Reply::Int(0)] => acked.push(url.clone()),
                Reply::Array(a) if a == [Reply::Int(1)] => {}
                Reply::Error(e) => {
                    assert!(e.starts_with("MISCONF "), "{e}");
                    errors += 1;
                }
                other => panic!("unexpected reply {other:?}"),
            }
        }
        errors
    }
}

fn urls(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("https://{prefix}-{}.example/page/{i}", i % 97)).collect()
}

/// After a restart without limits, every URL in `acked` is seen.
fn assert_all_seen(data: &Path, ns: &str, acked: &[String]) {
    let server = Server::start(data, Limits::default());
    let mut c = Client::connect(server.port);
    let mut lost = 0;
    for chunk in acked.chunks(500) {
        let mut args = vec!["URL.CHECK", ns];
        args.extend(chunk.iter().map(String::as_str));
        let Reply::Array(answers) = c.call(&args) else { panic!() };
        lost += answers.iter().filter(|a| **a != Reply::Int(1)).count();
    }
    assert_eq!(lost, 0, "{lost} of {} URLs answered new were lost", acked.len());
    drop(c);
    assert!(server.stop().success());
}

/// The end of a failure test, once its cause is gone: a retry interval later writes go on
/// ("new" for every fresh URL, no error), the server is up and stops cleanly, and after it
/// every URL answered "new" on the way is seen.
fn resumes_and_keeps_every_new(
    mut c: Client,
    mut server: Server,
    mut acked: Vec<String>,
    data: &Path,
) {
    std::thread::sleep(RETRY_AFTER);
    let after = urls("after", 3_000);
    let before = acked.len();
    assert_eq!(c.seen_each("jobs", &after, &mut acked), 0, "writes did not resume");
    // Every fresh URL answered "new" but the false positives of a namespace that started
    // small and split its way here (bound 1%).
    assert!(acked.len() - before >= after.len() * 97 / 100, "{} new", acked.len() - before);
    assert!(server.alive());
    drop(c);
    assert!(server.stop().success());
    assert_all_seen(data, "jobs", &acked);
}

/// Out of file descriptors: the test holds idle connections until the server cannot accept
/// another (every descriptor in use), then writes. Writes that need a new descriptor (a leaf
/// file's block is appended by opening the file) answer `MISCONF`, never "new" unrecorded;
/// once the idle connections close, writes go on by themselves.
#[test]
fn out_of_file_descriptors_answers_misconf_then_resumes() {
    let data = tempfile::tempdir().unwrap();
    let server = Server::start(data.path(), Limits { nofile: Some(128), ..Limits::default() });
    let mut c = Client::connect(server.port);
    let mut acked = Vec::new();
    assert_eq!(c.seen_each("jobs", &urls("before", 2_000), &mut acked), 0);
    // Idle connections until one is not served: the server is out of descriptors.
    let mut idle = Vec::new();
    loop {
        let stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        stream.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        (&stream).write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
        let mut pong = [0u8; 7];
        let served = (&stream).read_exact(&mut pong).is_ok();
        idle.push(stream);
        if !served {
            break;
        }
        assert!(idle.len() < 1_000, "the descriptor limit did not apply");
    }
    let mut errors = 0;
    for round in 0..3 {
        errors += c.seen_each("jobs", &urls(&format!("full{round}"), 3_000), &mut acked);
        std::thread::sleep(RETRY_AFTER);
    }
    assert!(errors > 0, "no write needed a descriptor");
    // Descriptors free again: after the retry interval, writes go on.
    drop(idle);
    resumes_and_keeps_every_new(c, server, acked, data.path());
}

/// Mounts a tmpfs of `bytes` at `dir`; `false` if this process may not (not root).
fn mount_tmpfs(dir: &Path, bytes: u64) -> bool {
    Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
        .arg(dir)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

struct Unmount<'a>(&'a Path);

impl Drop for Unmount<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).status();
    }
}

/// A full disk: the data directory on a small tmpfs, most of it taken by a ballast file.
/// Writes answer `MISCONF` once it is full, never "new" unrecorded; once the ballast is
/// removed, writes go on by themselves; after a restart every "new" is seen.
#[test]
fn a_full_disk_answers_misconf_then_resumes_once_space_is_freed() {
    let mount = tempfile::tempdir().unwrap();
    // No skip: a test that cannot make a full disk fails and says why.
    assert!(
        mount_tmpfs(mount.path(), 24 << 20),
        "mounting a tmpfs failed: this test needs root (CI runs as root); the engine-level \
         test with an injected full disk is crates/engine/tests/write_failures.rs"
    );
    let _unmount = Unmount(mount.path());
    let data = mount.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let ballast = mount.path().join("ballast");
    let server = Server::start(&data, Limits::default());
    let mut c = Client::connect(server.port);
    let mut acked = Vec::new();
    assert_eq!(c.seen_each("jobs", &urls("before", 2_000), &mut acked), 0);
    // Fill what is left but a little.
    let free = || {
        let out = Command::new("df").args(["-B1", "--output=avail"]).arg(mount.path()).output();
        let out = String::from_utf8(out.unwrap().stdout).unwrap();
        out.lines().nth(1).unwrap().trim().parse::<u64>().unwrap()
    };
    std::fs::write(&ballast, vec![1u8; usize::try_from(free().saturating_sub(256 << 10)).unwrap()])
        .unwrap();
    let mut errors = 0;
    for round in 0..6 {
        errors += c.seen_each("jobs", &urls(&format!("full{round}"), 4_000), &mut acked);
        if errors > 0 && round >= 2 {
            break;
        }
    }
    assert!(errors > 0, "the disk never filled up ({} bytes free)", free());
    // Still full a retry interval later: still refused.
    std::thread::sleep(RETRY_AFTER);
    assert!(c.seen_each("jobs", &urls("still", 3_000), &mut acked) > 0);
    std::fs::remove_file(&ballast).unwrap();
    resumes_and_keeps_every_new(c, server, acked, &data);
}

/// Under an address-space limit (`ulimit -v`, here 4 GB) the default `--maxmemory` is three
/// quarters of it, not of the machine's RAM: of two `BF.RESERVE k 0.01 2000000000` (2.4 GB of
/// filters each) the second is refused, and so is every batch that would make it
/// (`BF.INSERT … CAPACITY`); filling the first with 200,000 items never aborts the server, and
/// it keeps every item it took. (Without the limit taken into account, the second reservation
/// was accepted and filling it aborted the server on a failed allocation.)
#[test]
fn an_address_space_limit_bounds_the_default_maxmemory() {
    let data = tempfile::tempdir().unwrap();
    let limit = 4_000_000_000;
    let mut server =
        Server::start(data.path(), Limits { address_space: Some(limit), ..Limits::default() });
    let mut c = Client::connect(server.port);
    let Reply::Bulk(memory) = c.call(&["INFO", "memory"]) else { panic!() };
    assert!(memory.contains("urlseen_maxmemory_source:rlimit_as\r\n"), "{memory}");
    assert!(memory.contains(&format!("maxmemory:{}\r\n", limit / 4 * 3)), "{memory}");
    let capacity = "2000000000";
    assert_eq!(c.call(&["BF.RESERVE", "k1", "0.01", capacity]), Reply::Simple("OK".into()));
    let no_room = Reply::Error("ERR Insufficient memory to create filter".into());
    assert_eq!(c.call(&["BF.RESERVE", "k2", "0.01", capacity]), no_room);
    for key in ["k1", "k2"] {
        let items: Vec<String> = (0..200_000).map(|i| format!("{key}-item-{i}")).collect();
        for chunk in items.chunks(2_000) {
            let mut args = match key {
                "k1" => vec!["BF.MADD", key],
                _ => vec!["BF.INSERT", key, "CAPACITY", capacity, "ERROR", "0.01", "ITEMS"],
            };
            args.extend(chunk.iter().map(String::as_str));
            match (key, c.call(&args)) {
                ("k1", Reply::Array(a)) => assert_eq!(a.len(), chunk.len()),
                ("k2", refused) => assert_eq!(refused, no_room),
                (_, other) => panic!("{key}: {other:?}"),
            }
        }
    }
    assert_eq!(c.call(&["PING"]), Reply::Simple("PONG".into()));
    assert!(server.alive(), "the server died");
    assert_eq!(c.call(&["EXISTS", "k2"]), Reply::Int(0));
    // Everything k1 took is there.
    for i in (0..200_000).step_by(997) {
        let item = format!("k1-item-{i}");
        assert_eq!(c.call(&["BF.EXISTS", "k1", &item]), Reply::Int(1), "{item}");
    }
    drop(c);
    assert!(server.stop().success());
}

/// An explicit `--maxmemory` above what the process may use (100 GB under a 2 GB address-space
/// limit): a reservation whose filters the process could not allocate (2 GB) is refused when it
/// is made, rather than aborting the server when its leaves are first used; a small one is
/// made and filled.
#[test]
fn a_reservation_the_process_cannot_allocate_is_refused_whatever_maxmemory_says() {
    let data = tempfile::tempdir().unwrap();
    let limits = Limits { address_space: Some(2_000_000_000), ..Limits::default() };
    let mut server = Server::start_with(data.path(), limits, &["--maxmemory", "100gb"]);
    let mut c = Client::connect(server.port);
    let refused = c.call(&["BF.RESERVE", "big", "0.01", "1700000000"]);
    assert_eq!(refused, Reply::Error("ERR Insufficient memory to create filter".into()));
    assert_eq!(c.call(&["BF.RESERVE", "small", "0.01", "1000000"]), Reply::Simple("OK".into()));
    let items: Vec<String> = (0..20_000).map(|i| format!("item-{i}")).collect();
    let mut args = vec!["BF.MADD", "small"];
    args.extend(items.iter().map(String::as_str));
    let Reply::Array(added) = c.call(&args) else { panic!() };
    assert_eq!(added.len(), items.len());
    assert_eq!(c.call(&["PING"]), Reply::Simple("PONG".into()));
    assert!(server.alive());
    drop(c);
    assert!(server.stop().success());
}
