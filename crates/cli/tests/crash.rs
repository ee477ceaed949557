//! Crash safety of `urlseen filter --data D --fsync always`: printed means recorded, and
//! recorded means printed. The process is killed with SIGKILL at random points (mid-batch,
//! mid-split, mid-write) over many rounds; after each kill the directory is reopened and
//! - every URL printed so far must still be seen (nothing acknowledged is lost);
//! - a URL is printed again only if its batch was in flight at the kill (at-least-once: at
//!   most one batch of reprints per kill);
//! - in exact mode (no false positives to blur the check), no URL is recorded that was never
//!   printed.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use urlseen_engine::Db;

mod unlocked;
use unlocked::when_unlocked;

const ROUNDS: u64 = 32;
/// The most lines `filter` answers in one batch: what one kill may print again.
const MAX_BATCH: usize = 4096;
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

/// A counting namespace writes its store after the print too (it used to write it before: then
/// a kill between the two left URLs recorded that were never printed).
#[test]
fn sigkill_at_random_points_loses_no_printed_url_in_a_counting_namespace() {
    sigkill_rounds(&["--counting"], 99991);
}

fn sigkill_rounds(extra_args: &[&str], mut rng: u64) {
    let dir = tempfile::tempdir().unwrap();
    // 30% repeats, so later rounds also re-see earlier URLs.
    let stream: Vec<String> =
        urlseen_corpus::Generator::new(77).take(ROUNDS as usize * PER_ROUND).collect();
    let mut printed_total: Vec<String> = Vec::new();
    let mut kills = 0;
    let mut reprinted = 0;
    // Printed URLs of batches a kill caught between printing and committing.
    let mut uncommitted = std::collections::HashSet::new();
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
            if stdout.read_line(&mut line).unwrap() == 0 || !line.ends_with('\n') {
                break;
            }
            printed.push(line.trim_end().to_owned());
        }
        child.kill().unwrap(); // SIGKILL
        // Lines the process printed before it died count too: drain what is in the pipe. A
        // last line without its newline was cut by the kill in the middle of a write (a
        // batch's output can take several): not printed.
        loop {
            line.clear();
            match stdout.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) if !line.ends_with('\n') => break,
                Ok(_) => printed.push(line.trim_end().to_owned()),
            }
        }
        let status = child.wait().unwrap();
        if !status.success() {
            kills += 1;
        }
        writer.join().unwrap();
        let round_start = printed_total.len();
        printed_total.extend(printed);

        let db = when_unlocked(|| Db::open(dir.path()));
        let Some(ns) = db.namespace("default") else {
            // Killed before the namespace was created: then nothing can have been printed.
            assert!(printed_total.is_empty(), "round {round}: URLs printed but no namespace");
            continue;
        };
        assert_eq!(
            ns.options().exact,
            extra_args.iter().any(|a| ["--exact", "--counting"].contains(a))
        );
        assert_eq!(ns.options().counting, extra_args.contains(&"--counting"));
        // Printed means recorded, except the batch in flight at the kill: it was printed
        // before its commit, so it may be missing (and is printed again if it comes again).
        let in_flight = round_start.max(printed_total.len().saturating_sub(MAX_BATCH));
        let hits = ns.contains_batch(&printed_total).unwrap();
        let lost: Vec<&String> = printed_total
            .iter()
            .enumerate()
            .filter(|&(i, url)| !hits[i] && i < in_flight && !uncommitted.contains(url))
            .map(|p| p.1)
            .collect();
        assert!(
            lost.is_empty(),
            "round {round}: {} printed URLs lost, e.g. {:?}",
            lost.len(),
            lost.first()
        );
        // Which of the last batch's URLs were committed cannot be told from outside without
        // exact mode: a Bloom false positive can make an uncommitted one look held now, and a
        // split can take that false positive away later. So without exact mode the whole
        // batch is excused from here on; in exact mode only the ones not held.
        let exact = ns.options().exact;
        uncommitted.extend(
            printed_total[in_flight..]
                .iter()
                .zip(&hits[in_flight..])
                .filter(|p| !exact || !p.1)
                .map(|p| p.0.clone()),
        );
        // At-least-once: a URL is printed again only if the kill landed while its batch was
        // printed but not yet committed, so at most one batch per kill.
        let fp = |url: &String| ns.fingerprint(url).unwrap();
        let mut printed_fps = std::collections::HashSet::new();
        let twice = printed_total.iter().filter(|u| !printed_fps.insert(fp(u))).count();
        assert!(
            twice - reprinted <= MAX_BATCH,
            "round {round}: {} URLs printed again after one kill",
            twice - reprinted
        );
        reprinted = twice;
        // Recorded means printed: with no false positives, every input URL the namespace holds
        // was printed (the same URL once canonicalized, that is).
        if ns.options().exact {
            let sent = &stream[..(round as usize + 1) * PER_ROUND];
            let held = ns.contains_batch(sent).unwrap();
            let unprinted: Vec<&String> = sent
                .iter()
                .zip(&held)
                .filter(|(u, held)| **held && !printed_fps.contains(&fp(u)))
                .map(|p| p.0)
                .collect();
            assert!(
                unprinted.is_empty(),
                "round {round}: {} URLs recorded but never printed, e.g. {:?}",
                unprinted.len(),
                unprinted.first()
            );
        }
        drop(ns);
        if round % 2 == 0 {
            // Alternate recovery paths: half the rounds leave a fresh snapshot, half only the log.
            db.close().unwrap();
        } else {
            std::mem::drop(db);
        }
    }
    assert!(kills >= 26, "only {kills} of {ROUNDS} rounds ended in a kill");
    eprintln!(
        "{kills} kills, {} URLs printed, {reprinted} printed again, {} printed but not committed",
        printed_total.len(),
        uncommitted.len()
    );
    assert!(printed_total.len() > 10_000, "printed {}", printed_total.len());
}
