//! The `urlseen` binary as users run it: acceptance checks of issue 2 and 3.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn urlseen() -> Command {
    Command::new(env!("CARGO_BIN_EXE_urlseen"))
}

/// Runs `urlseen args…` with `input` on stdin; returns (stdout lines, stderr, success).
fn run(args: &[&str], input: &[u8]) -> (Vec<String>, String, bool) {
    let mut child = urlseen()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn urlseen");
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

fn lines_of(urls: &[String]) -> Vec<u8> {
    let mut v = Vec::with_capacity(urls.len() * 64);
    for u in urls {
        v.extend_from_slice(u.as_bytes());
        v.push(b'\n');
    }
    v
}

#[test]
fn plan_reports_the_seed_example() {
    let (out, _, ok) = run(&["plan", "--capacity", "1000000", "--fpr", "0.01", "--json"], b"");
    assert!(ok);
    let json: serde_json::Value = serde_json::from_str(&out.join("\n")).unwrap();
    assert_eq!(json["m"], 9_585_059);
    assert_eq!(json["k"], 7);
}

#[test]
fn plan_rejects_bad_arguments_with_a_reason() {
    let (_, err, ok) = run(&["plan", "--capacity", "1000", "--fpr", "2"], b"");
    assert!(!ok);
    assert!(err.contains("probability"), "{err}");
}

#[test]
fn every_subcommand_has_help() {
    for sub in
        [&["filter"][..], &["canon"], &["plan"], &["gen"], &["bench", "fpr"], &["bench", "balance"]]
    {
        let mut args = sub.to_vec();
        args.push("--help");
        let (out, _, ok) = run(&args, b"");
        assert!(ok, "{args:?}");
        assert!(out.iter().any(|l| l.contains("Usage:")), "{args:?}");
    }
}

#[test]
fn filter_prints_at_least_97_5_percent_of_2m_distinct_urls() {
    let urls = urlseen_corpus::distinct_urls(31, 2_000_000);
    let (out, err, ok) =
        run(&["filter", "--capacity", "2000000", "--fpr", "0.01"], &lines_of(&urls));
    assert!(ok, "{err}");
    assert!(
        out.len() as f64 >= 0.975 * urls.len() as f64,
        "printed {} of {}",
        out.len(),
        urls.len()
    );
    // And each printed line is one of the inputs, printed once.
    assert_eq!(out.iter().collect::<HashSet<_>>().len(), out.len());
}

#[test]
fn filter_grows_past_its_capacity_and_prints_98_percent() {
    let urls = urlseen_corpus::distinct_urls(32, 2_000_000);
    let (out, err, ok) = run(&["filter", "--capacity", "10000", "--fpr", "0.01"], &lines_of(&urls));
    assert!(ok, "{err}");
    assert!(
        out.len() as f64 >= 0.98 * urls.len() as f64,
        "printed {} of {}",
        out.len(),
        urls.len()
    );
}

#[test]
fn filter_never_prints_a_canonical_url_twice() {
    // A stream with 30% repeats, plus every URL again under a different spelling.
    let mut urls: Vec<String> = urlseen_corpus::Generator::new(33).take(200_000).collect();
    let respelled: Vec<String> = urls
        .iter()
        .take(50_000)
        .map(|u| {
            let (scheme, rest) = u.split_once("://").unwrap();
            let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
            let port = if scheme == "https" { ":443" } else { ":80" };
            format!("{}://{}{port}/{path}#frag", scheme.to_uppercase(), host.to_uppercase())
        })
        .collect();
    urls.extend(respelled);
    let (out, err, ok) = run(&["filter", "--print-canonical"], &lines_of(&urls));
    assert!(ok, "{err}");
    let distinct: HashSet<&String> = out.iter().collect();
    assert_eq!(distinct.len(), out.len(), "a canonical URL was printed twice");
    let truly_distinct = urls
        .iter()
        .map(|u| urlseen_canon::canonicalize(u, Default::default()).unwrap())
        .collect::<HashSet<_>>();
    assert!(out.len() as f64 >= 0.98 * truly_distinct.len() as f64);
    assert!(out.len() <= truly_distinct.len());
}

#[test]
fn invalid_lines_go_to_stderr_or_pass_through() {
    let input = b"https://a.example/\nnot a url\n\nmailto:x@example.com\nhttps://a.example/#top\n";
    let (out, err, ok) = run(&["filter"], input);
    assert!(ok);
    assert_eq!(out, vec!["https://a.example/"]);
    assert!(err.contains("line 2") && err.contains("line 4"), "{err}");
    let (out, _, ok) = run(&["filter", "--keep-invalid"], input);
    assert!(ok);
    assert_eq!(out, vec!["https://a.example/", "not a url", "mailto:x@example.com"]);
}

#[test]
fn non_utf8_input_is_an_error_line_not_a_crash() {
    let (out, err, ok) = run(&["filter"], b"https://a.example/\n\xff\xfe\n");
    assert!(ok);
    assert_eq!(out.len(), 1);
    assert!(err.contains("UTF-8"), "{err}");
}

/// Output keeps pace with input: a URL written to stdin comes out before stdin is closed.
#[test]
fn filter_streams_line_by_line() {
    let mut child =
        urlseen().arg("filter").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    for i in 0..3 {
        let url = format!("https://stream.example/{i}");
        writeln!(stdin, "{url}").unwrap();
        stdin.flush().unwrap();
        let started = Instant::now();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim_end(), url);
        assert!(started.elapsed() < Duration::from_secs(10));
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[test]
fn canon_jsonl_reports_results_and_errors_as_data() {
    let input = b"\"HTTP://Example.COM:80/a/../b#x\"\n\"not a url\"\n42\n";
    let (out, _, ok) = run(&["canon", "--jsonl"], input);
    assert!(ok);
    let rows: Vec<serde_json::Value> =
        out.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows[0]["canonical"], "http://example.com/b");
    assert!(rows[1]["error"].is_string());
    assert!(rows[2]["error"].is_string());
}

#[test]
fn canon_fails_at_the_end_when_a_line_is_invalid() {
    let (out, err, ok) = run(&["canon"], b"https://a.example\nnope\n");
    assert!(!ok);
    assert_eq!(out, vec!["https://a.example/"]);
    assert!(err.contains("line 2"));
}

#[test]
fn bench_fpr_and_balance_run_and_report_json() {
    let (out, err, ok) = run(
        &[
            "bench",
            "fpr",
            "--urls",
            "20000",
            "--points",
            "2",
            "--leaves",
            "1,3",
            "--leaf-bits",
            "65536",
            "--json",
        ],
        b"",
    );
    assert!(ok, "{err}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out.join("\n")).unwrap();
    assert_eq!(rows.len(), 4);
    // More leaves of the same size: lower FPR at the same n.
    let at = |c: u64| {
        rows.iter().find(|r| r["leaves"] == c && r["n"] == 20000).unwrap()["dsbf_measured"]
            .as_f64()
            .unwrap()
    };
    assert!(at(3) < at(1));

    let (out, err, ok) = run(
        &["bench", "balance", "--hosts", "50", "--urls", "100000", "--queries", "1000", "--json"],
        b"",
    );
    assert!(ok, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out.join("\n")).unwrap();
    let counts: Vec<u64> = report["dsbf_leaf_counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(counts.len(), 10);
    assert_eq!(counts.iter().sum::<u64>(), 100_000);
    assert!(report["dsbf_imbalance"].as_f64().unwrap() < 0.1);
    assert!(report["overflowing_domains"].as_u64().unwrap() >= 1);
}

#[test]
fn exact_filter_remembers_and_forget_makes_urls_new_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let urls = urlseen_corpus::distinct_urls(5, 3_000);
    let file = dir.path().join("urls.txt");
    std::fs::write(&file, lines_of(&urls)).unwrap();
    let (_, err, ok) = run(
        &["import", file.to_str().unwrap(), "--data", data, "--ns", "jobs", "--counting", "-q"],
        b"",
    );
    assert!(ok, "{err}");
    assert!(err.contains("3000 new"), "{err}");

    // Everything is remembered: nothing of it is printed again.
    let (out, err, ok) = run(&["filter", "--data", data, "--ns", "jobs"], &lines_of(&urls));
    assert!(ok && out.is_empty(), "{err}: {} printed", out.len());

    let forgotten: Vec<String> = urls.iter().step_by(10).cloned().collect();
    let (_, err, ok) = run(&["forget", "--data", data, "--ns", "jobs"], &lines_of(&forgotten));
    assert!(ok, "{err}");
    assert!(err.contains("forgot 300 URLs"), "{err}");

    // The forgotten ones, and only they, are new again.
    let (out, err, ok) = run(&["filter", "--data", data, "--ns", "jobs"], &lines_of(&urls));
    assert!(ok, "{err}");
    assert_eq!(out, forgotten);

    let (out, _, ok) = run(&["stats", "--data", data, "--ns", "jobs", "--json"], b"");
    assert!(ok);
    let stats: serde_json::Value = serde_json::from_str(&out.join("\n")).unwrap();
    assert_eq!(stats[0]["mode"], "counting");
    assert_eq!(stats[0]["count"], 3000);

    // A Bloom-only namespace refuses to forget, with a reason.
    let (_, _, ok) = run(&["filter", "--data", data, "--ns", "plain"], &lines_of(&urls[..10]));
    assert!(ok);
    let (_, err, ok) = run(&["forget", "--data", data, "--ns", "plain", &urls[0]], b"");
    assert!(!ok && err.contains("--counting"), "{err}");
}

/// `urlseen forget --host`: in a Bloom namespace filled by `filter` and `import` (default
/// namespace), exactly that host's URLs are printed again, with the count; `--prefix` and a
/// bad host are refused with a reason.
#[test]
fn forget_host_makes_that_hosts_urls_new_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let urls: Vec<String> = (0..6_000)
        .map(|i| match i % 2 {
            0 => format!("https://h{}.example/a/{i}", i % 30),
            _ => format!("http://H{}.example:81/b?{i}", i % 30),
        })
        .collect();
    let (first, rest) = urls.split_at(3_000);
    let (out, err, ok) = run(&["filter", "--data", data, "--exact"], &lines_of(first));
    assert!(ok && out.len() == first.len(), "{err}");
    let file = dir.path().join("rest.txt");
    std::fs::write(&file, lines_of(rest)).unwrap();
    let (_, err, ok) = run(&["import", file.to_str().unwrap(), "--data", data, "-q"], b"");
    assert!(ok, "{err}");

    let (out, err, ok) = run(&["forget", "--data", data, "--host", "h7.example"], b"");
    assert!(ok, "{err}");
    assert_eq!(out, ["forgot 200 URLs of host h7.example"]);
    let (out, err, ok) = run(&["filter", "--data", data], &lines_of(&urls));
    assert!(ok, "{err}");
    let host: Vec<String> =
        urls.iter().enumerate().filter(|p| p.0 % 30 == 7).map(|p| p.1.clone()).collect();
    assert_eq!(out, host, "exactly the host's URLs are new again");

    let (_, err, ok) = run(&["forget", "--data", data, "--prefix", "https://h1.example/a/"], b"");
    assert!(!ok && err.contains("cannot forget by prefix"), "{err}");
    let (_, err, ok) = run(&["forget", "--data", data, "--host", "https://h1.example/"], b"");
    assert!(!ok && err.contains("invalid host"), "{err}");
}

#[test]
fn forget_prefix_makes_the_urls_under_it_new_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let urls: Vec<String> = (0..6_000)
        .map(|i| match i % 3 {
            0 => format!("https://h{}.example/blog/{i}", i % 30),
            1 => format!("https://h{}.example/blogroll/{i}", i % 30),
            _ => format!("http://h{}.example/blog/{i}", i % 30),
        })
        .collect();
    let (first, rest) = urls.split_at(3_000);
    let (out, err, ok) =
        run(&["filter", "--data", data, "--exact", "--keep-urls"], &lines_of(first));
    assert!(ok && out.len() == first.len(), "{err}");
    // import into the same namespace: it keeps its URLs (no flag needed now).
    let file = dir.path().join("rest.txt");
    std::fs::write(&file, lines_of(rest)).unwrap();
    let (_, err, ok) = run(&["import", file.to_str().unwrap(), "--data", data, "-q"], b"");
    assert!(ok, "{err}");

    let (out, err, ok) = run(&["stats", "--data", data], b"");
    assert!(ok, "{err}");
    let kept = out.iter().find(|l| l.contains("URLs kept")).expect("stats names the journal");
    assert!(kept.contains("6000 in the URL journal"), "{kept}");

    let under = |u: &String| u.starts_with("https://h7.example/blog/");
    let expected = urls.iter().filter(|u| under(u)).count();
    let (out, err, ok) =
        run(&["forget", "--data", data, "--prefix", "HTTPS://h7.example/blog/"], b"");
    assert!(ok, "{err}");
    assert_eq!(out, [format!("forgot {expected} URLs of prefix HTTPS://h7.example/blog/")]);
    let (out, err, ok) = run(&["filter", "--data", data], &lines_of(&urls));
    assert!(ok, "{err}");
    let new: Vec<String> = urls.iter().filter(|u| under(u)).cloned().collect();
    assert_eq!(out, new, "exactly the URLs under the prefix are new again");

    let (_, err, ok) = run(&["forget", "--data", data, "--prefix", "https://h7.example/?a"], b"");
    assert!(!ok && err.contains("invalid prefix"), "{err}");
    // A namespace that does not keep its URLs says how to make one that does.
    let (_, err, ok) = run(&["filter", "--data", data, "--ns", "plain"], b"https://a.example/\n");
    assert!(ok, "{err}");
    let (_, err, ok) =
        run(&["forget", "--data", data, "--ns", "plain", "--prefix", "https://a.example/"], b"");
    assert!(!ok && err.contains("--keep-urls"), "{err}");
}

#[test]
fn exact_filter_in_memory_prints_every_distinct_url() {
    // At a 30 % FPR a Bloom-only filter drops about a third of new URLs; exact mode none.
    let urls = urlseen_corpus::distinct_urls(6, 20_000);
    let (out, err, ok) =
        run(&["filter", "--exact", "--capacity", "20000", "--fpr", "0.3"], &lines_of(&urls));
    assert!(ok, "{err}");
    assert_eq!(out.len(), urls.len());
    let (out, _, _) = run(&["filter", "--capacity", "20000", "--fpr", "0.3"], &lines_of(&urls));
    assert!(out.len() < urls.len() * 9 / 10, "Bloom-only printed {}", out.len());
}

/// Disk grows with distinct URLs, not with repeats (issue 32): `filter --data` over the same
/// 1,000,000 URLs three times. The first pass records them; the second and third answer every
/// one "seen" and grow the data directory by under 1% of what the first wrote (before, each
/// repeat pass wrote a kept record per URL: 27 MB more per pass, 31 MB the first).
#[test]
fn repeated_passes_over_the_same_urls_write_almost_nothing() {
    fn dir_bytes(dir: &std::path::Path) -> u64 {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|e| match e.file_type().unwrap().is_dir() {
                true => dir_bytes(&e.path()),
                false => e.metadata().unwrap().len(),
            })
            .sum()
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("seen");
    let data_arg = data.to_str().unwrap();
    let input = lines_of(&urlseen_corpus::distinct_urls(33, 1_000_000));
    let (first, err, ok) = run(&["filter", "--data", data_arg], &input);
    assert!(ok, "{err}");
    assert!(first.len() > 980_000, "printed {} of 1000000", first.len());
    let after_first = dir_bytes(&data);
    let mut size = after_first;
    for pass in 2..=3 {
        let (again, err, ok) = run(&["filter", "--data", data_arg], &input);
        assert!(ok, "{err}");
        assert!(again.is_empty(), "pass {pass} printed {} URLs again", again.len());
        let now = dir_bytes(&data);
        assert!(
            now.saturating_sub(size) * 100 < after_first,
            "pass {pass} grew the directory from {size} to {now} bytes (the first wrote \
             {after_first})"
        );
        size = now;
    }
}
