//! Crash safety of `urlseen filter --data D --fsync always`: a URL it printed is durable. The
//! process is killed with SIGKILL at random points (mid-batch, mid-split, mid-write) over many
//! rounds; after each kill the directory is reopened and every URL printed so far must still be
//! seen. The same again in exact mode, where the fingerprint store must survive too (a URL
//! the store lost would be answered "new" again after restart).

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use urlseen_engine::Db;

const ROUNDS: u64 = 24;
const PER_ROUND: usize = 6_000;

/// A small deterministic generator for kill points (no dependency, same points every run).
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[test]
fn sigkill_at_random_points_loses_no_printed_url() {
    sigkill_rounds(&[], 12345);
}

#[test]
fn sigkill_at_random_points_loses_no_printed_url_in_exact_mode() {
    sigkill_rounds(&["--exact"], 54321);
}

fn sigkill_rounds(extra_args: &[&str], mut rng: u64) {
    let dir = tempfile::tempdir().unwrap();
    // 30% repeats, so later rounds also re-see earlier URLs.
    let stream: Vec<String> =
        urlseen_corpus::Generator::new(77).take(ROUNDS as usize * PER_ROUND).collect();
    let mut printed_total: Vec<String> = Vec::new();
    let mut kills = 0;
    for round in 0..ROUNDS {
        let input = stream[round as usize * PER_ROUND..(round as usize + 1) * PER_ROUND].to_vec();
        // Kill after this many printed lines (sometimes 0: right at start-up).
        let kill_after =
            (splitmix(&mut rng) % (PER_ROUND as u64 / 2)) as usize * usize::from(round % 6 != 0);
        let mut child = Command::new(env!("CARGO_BIN_EXE_urlseen"))
            .args(["filter", "--capacity", "2000", "--fsync", "always"])
            .args(extra_args)
            .arg("--data")
            .arg(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            for chunk in input.chunks(50) {
                let mut buf = String::new();
                for url in chunk {
                    buf.push_str(url);
                    buf.push('\n');
                }
                if stdin.write_all(buf.as_bytes()).and_then(|()| stdin.flush()).is_err() {
                    return; // killed
                }
            }
        });
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut printed = Vec::new();
        let mut line = String::new();
        while printed.len() < kill_after.max(1) || kill_after == 0 {
            if kill_after == 0 {
                break;
            }
            line.clear();
            if stdout.read_line(&mut line).unwrap() == 0 {
                break;
            }
            printed.push(line.trim_end().to_owned());
        }
        child.kill().unwrap(); // SIGKILL
        // Lines the process printed before it died count too: drain what is in the pipe.
        loop {
            line.clear();
            match stdout.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => printed.push(line.trim_end().to_owned()),
            }
        }
        let status = child.wait().unwrap();
        if !status.success() {
            kills += 1;
        }
        writer.join().unwrap();
        printed_total.extend(printed);

        let db = Db::open(dir.path()).unwrap();
        let Some(ns) = db.namespace("default") else {
            // Killed before the namespace was created: then nothing can have been printed.
            assert!(printed_total.is_empty(), "round {round}: URLs printed but no namespace");
            continue;
        };
        assert_eq!(ns.options().exact, extra_args.contains(&"--exact"));
        let hits = ns.contains_batch(&printed_total).unwrap();
        let lost: Vec<&String> =
            printed_total.iter().zip(&hits).filter(|p| !p.1).map(|p| p.0).collect();
        assert!(
            lost.is_empty(),
            "round {round}: {} printed URLs lost, e.g. {:?}",
            lost.len(),
            lost.first()
        );
        // Printed means new: never printed twice across kills and restarts.
        let distinct: std::collections::HashSet<&String> = printed_total.iter().collect();
        assert_eq!(distinct.len(), printed_total.len(), "round {round}: a URL was printed twice");
        drop(ns);
        if round % 2 == 0 {
            // Alternate recovery paths: half the rounds leave a fresh snapshot, half only the log.
            db.close().unwrap();
        } else {
            std::mem::drop(db);
        }
    }
    assert!(kills >= 20, "only {kills} of {ROUNDS} rounds ended in a kill");
    assert!(printed_total.len() > 10_000, "printed {}", printed_total.len());
}
