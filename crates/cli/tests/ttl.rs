//! `urlseen filter --ttl` and `urlseen import --ttl`: a namespace created with a lifetime is
//! gone once it has passed, and a later run starts it anew (with the lifetime again).

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Runs `urlseen args…` with `input` on stdin; returns stdout's lines.
fn run(args: &[&str], input: &str) -> Vec<String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_urlseen"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect()
}

#[test]
fn a_namespace_with_a_ttl_ends_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let url = "https://a.example/\n";
    let filter = ["filter", "--data", data, "--ns", "job", "--ttl", "1s"];
    assert_eq!(run(&filter, url), vec!["https://a.example/"]);
    assert!(run(&filter, url).is_empty(), "seen while the namespace lives");
    std::thread::sleep(Duration::from_millis(1_200));
    assert_eq!(run(&filter, url), vec!["https://a.example/"], "new again: the namespace expired");

    // import: the same lifetime for a namespace it creates.
    let file = dir.path().join("urls.txt");
    std::fs::write(&file, url).unwrap();
    let import = ["import", "--data", data, "--ns", "imported", "--ttl", "1s", "--quiet"];
    let mut args = import.to_vec();
    args.push(file.to_str().unwrap());
    run(&args, "");
    let check = ["filter", "--data", data, "--ns", "imported"];
    assert!(run(&check, url).is_empty(), "imported");
    std::thread::sleep(Duration::from_millis(1_200));
    assert_eq!(run(&check, url), vec!["https://a.example/"], "expired");
}
