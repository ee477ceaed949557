//! `urlseen serve --data`: SIGTERM during load exits 0, and after a restart on the same
//! directory every URL.SEEN the server answered is still seen, under each fsync policy.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(data: &std::path::Path, fsync: &str) -> Server {
        // A free port can be taken by another process before the server binds it (helpers'
        // and parallel tests' servers): start again on new ports until this child answers.
        loop {
            if let Some(server) = Server::try_start(data, fsync) {
                return server;
            }
        }
    }

    /// The server on fresh ports, or `None` if what answers there is not this child.
    fn try_start(data: &std::path::Path, fsync: &str) -> Option<Server> {
        let (port, http) = (free_port(), free_port());
        let mut child = Command::new(env!("CARGO_BIN_EXE_urlseen"))
            .args(["serve", "--fsync", fsync, "--data"])
            .arg(data)
            .args(["--resp", &format!("127.0.0.1:{port}"), "--http", &format!("127.0.0.1:{http}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if child.try_wait().unwrap().is_some() {
                return None; // it could not bind its ports
            }
            assert!(started.elapsed() < Duration::from_secs(20), "server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        let server = Server { child, port };
        let pid = format!("process_id:{}\r\n", server.child.id());
        (info(port, "server").contains(&pid) && server.child_alive()).then_some(server)
    }

    fn child_alive(&self) -> bool {
        Command::new("kill").args(["-0", &self.child.id().to_string()]).status().unwrap().success()
    }

    fn sigterm(&self) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -TERM failed");
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

/// Sends `URL.<verb> jobs url` for each URL, pipelined; returns the answers (`Some(0 | 1)`)
/// received before the connection ended.
fn pipeline(stream: &TcpStream, verb: &str, urls: &[String]) -> Vec<u8> {
    let mut buf = Vec::new();
    for url in urls {
        command(&mut buf, &[verb, "jobs", url]);
    }
    let mut writer = stream;
    if writer.write_all(&buf).is_err() {
        return Vec::new();
    }
    let mut reader = BufReader::new(stream);
    let mut answers = Vec::new();
    let mut line = String::new();
    for _ in urls {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(n) if n > 0 && line == "*1\r\n" => {}
            _ => break,
        }
        line.clear();
        match reader.read_line(&mut line) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
        match line.as_str() {
            ":0\r\n" => answers.push(0),
            ":1\r\n" => answers.push(1),
            other => panic!("unexpected reply {other:?}"),
        }
    }
    answers
}

/// The text of `INFO <section>`.
fn info(port: u16, section: &str) -> String {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut buf = Vec::new();
    command(&mut buf, &["INFO", section]);
    (&stream).write_all(&buf).unwrap();
    let mut reader = BufReader::new(&stream);
    let mut header = String::new();
    reader.read_line(&mut header).unwrap();
    let len: usize = header.trim_start_matches('$').trim_end().parse().unwrap();
    let mut body = vec![0u8; len + 2];
    std::io::Read::read_exact(&mut reader, &mut body).unwrap();
    String::from_utf8(body).unwrap()
}

fn sigterm_during_load_loses_nothing(fsync: &str) {
    let dir = tempfile::tempdir().unwrap();
    let urls = urlseen_corpus::distinct_urls(31, 400_000);
    let server = Server::start(dir.path(), fsync);
    let info = info(server.port, "persistence");
    assert!(info.contains(&format!("urlseen_fsync:{fsync}")), "{info}");
    assert!(info.contains("aof_enabled:1"), "{info}");
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    // Every loader connects before any starts: one whose thread started late would otherwise
    // find the server already stopped by the others' load.
    let streams: Vec<TcpStream> =
        (0..3).map(|_| TcpStream::connect(("127.0.0.1", server.port)).unwrap()).collect();
    let loaders: Vec<_> = streams
        .into_iter()
        .enumerate()
        .map(|(t, stream)| {
            let (urls, acked, stop) = (urls.clone(), Arc::clone(&acked), Arc::clone(&stop));
            std::thread::spawn(move || {
                for chunk in urls.iter().skip(t).step_by(3).collect::<Vec<_>>().chunks(64) {
                    let chunk: Vec<String> = chunk.iter().map(|s| (*s).clone()).collect();
                    let answers = pipeline(&stream, "URL.SEEN", &chunk);
                    // Acknowledged as recorded: the URLs answered "new". (One answered "seen" is
                    // a false positive or a repeat: nothing was recorded for it, and after a
                    // split a false positive may be new once.)
                    acked.lock().unwrap().extend(
                        chunk
                            .iter()
                            .zip(&answers)
                            .filter(|(_, a)| **a == 0)
                            .map(|(u, _)| u.clone()),
                    );
                    if answers.len() < chunk.len() || stop.load(Ordering::Relaxed) {
                        break;
                    }
                }
            })
        })
        .collect();
    // Let the load run, then stop the server under it.
    let started = Instant::now();
    while acked.lock().unwrap().len() < 20_000 {
        assert!(started.elapsed() < Duration::from_secs(60), "load too slow");
        std::thread::sleep(Duration::from_millis(10));
    }
    server.sigterm();
    let mut server = server;
    let status = server.child.wait().unwrap();
    stop.store(true, Ordering::Relaxed);
    for l in loaders {
        l.join().unwrap();
    }
    assert!(status.success(), "fsync {fsync}: SIGTERM exit status {status}");
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 20_000);
    assert!(acked.len() < urls.len(), "the load finished before the SIGTERM: nothing tested");

    let server = Server::start(dir.path(), fsync);
    let stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let mut lost = 0;
    for chunk in acked.chunks(1000) {
        let answers = pipeline(&stream, "URL.CHECK", chunk);
        assert_eq!(answers.len(), chunk.len());
        lost += answers.iter().filter(|&&a| a == 0).count();
    }
    assert_eq!(lost, 0, "fsync {fsync}: {lost} of {} acknowledged URLs lost", acked.len());
}

#[test]
fn serve_sigterm_during_load_loses_nothing_fsync_always() {
    sigterm_during_load_loses_nothing("always");
}

#[test]
fn serve_sigterm_during_load_loses_nothing_fsync_everysec() {
    sigterm_during_load_loses_nothing("everysec");
}
