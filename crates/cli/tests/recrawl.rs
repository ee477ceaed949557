//! `--recrawl-after` on `filter` and `import`, and what `stats` shows of the window (real
//! time: a 2 s window; the engine's tests cover the window with a fake clock).

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn run(args: &[&str], input: &[u8]) -> (Vec<String>, String, bool) {
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
    // A command refused before it reads its input (a bad option) may close the pipe first;
    // one that succeeds must have taken all of it.
    if let Err(e) = writer.join().unwrap() {
        assert!(
            e.kind() == std::io::ErrorKind::BrokenPipe && !out.status.success(),
            "writing the input: {e}"
        );
    }
    let stdout = String::from_utf8(out.stdout).unwrap();
    (
        stdout.lines().map(str::to_owned).collect(),
        String::from_utf8_lossy(&out.stderr).into(),
        out.status.success(),
    )
}

#[test]
fn filter_prints_a_url_again_after_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let urls: Vec<String> = (0..500).map(|i| format!("https://r.example/{i}")).collect();
    let input = urls.join("\n").into_bytes();
    let filter = ["filter", "--data", data, "--ns", "news", "--recrawl-after", "2s"];
    let start = Instant::now();
    let (first, err, ok) = run(&filter, &input);
    let first_done = Instant::now();
    assert!(ok, "{err}");
    assert_eq!(first, urls);
    // At once (well within W − W/g = 1.75 s): nothing is new. An existing namespace keeps its
    // own window: a different --recrawl-after changes nothing.
    let (again, err, ok) =
        run(&["filter", "--data", data, "--ns", "news", "--recrawl-after", "30d"], &input);
    assert!(ok, "{err}");
    assert!(
        start.elapsed() < Duration::from_millis(1_750),
        "too slow to test: {:?}",
        start.elapsed()
    );
    assert!(again.is_empty(), "{} printed again", again.len());
    let (stats, err, ok) = run(&["stats", "--data", data, "--ns", "news"], b"");
    assert!(ok, "{err}");
    let text = stats.join("\n");
    assert!(text.contains("recrawl         after 2.00s, 8 generations"), "{text}");
    let (json, _, ok) = run(&["stats", "--data", data, "--ns", "news", "--json"], b"");
    assert!(ok);
    let json: serde_json::Value = serde_json::from_str(&json.join("\n")).unwrap();
    assert_eq!(json[0]["recrawl"]["window_secs"], 2.0);
    // The first run may have crossed a slot boundary (W/g = 0.25 s): then its URLs are in
    // two generations.
    let live = json[0]["recrawl"]["live"].as_array().unwrap();
    let counted: u64 = live.iter().map(|g| g["count"].as_u64().unwrap()).sum();
    assert_eq!(counted, 500, "{text}");
    // After W from the last record: every one is new again (a URL's generation began at or
    // before it was recorded, and expires W after it began).
    std::thread::sleep(Duration::from_millis(2_050).saturating_sub(first_done.elapsed()));
    let (third, err, ok) = run(&filter, &input);
    assert!(ok, "{err}");
    assert_eq!(third, urls);
}

#[test]
fn import_takes_a_window_and_bad_durations_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let (_, err, ok) = run(
        &["import", "--data", data, "--ns", "n", "-q", "--recrawl-after", "30d", "-"],
        b"https://a.example/\nhttps://b.example/\n",
    );
    assert!(ok, "{err}");
    let (stats, _, ok) = run(&["stats", "--data", data, "--ns", "n", "--json"], b"");
    assert!(ok);
    let json: serde_json::Value = serde_json::from_str(&stats.join("\n")).unwrap();
    assert_eq!(json[0]["recrawl"]["window_secs"], 30.0 * 86_400.0);
    assert_eq!(json[0]["recrawl"]["generations"], 8);
    assert_eq!(json[0]["count"], 2);
    for bad in ["0s", "3x", "soon"] {
        let (_, err, ok) = run(&["filter", "--in-memory", "--recrawl-after", bad], b"");
        assert!(!ok);
        assert!(err.contains("is not a duration"), "{bad}: {err}");
    }
    let (_, err, ok) = run(
        &["filter", "--in-memory", "--recrawl-after", "10s", "--recrawl-generations", "3"],
        b"https://a.example/\n",
    );
    assert!(!ok);
    assert!(err.contains("not divisible into 3 generations"), "{err}");
}
