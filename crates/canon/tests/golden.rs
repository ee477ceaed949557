//! Pins the canonical output of every profile for a set of representative inputs
//! (`data/canon/golden.tsv`). Canonical forms are stored with filters, so any change here must
//! come with a bump of `CANON_VERSION`.
//!
//! After an intended change: bump `CANON_VERSION`, then regenerate the file with
//! `UPDATE_GOLDEN=1 cargo test -p urlseen-canon --test golden` and review the diff.

use std::fmt::Write as _;

use urlseen_canon::{CANON_VERSION, CanonError, Canonicalizer, Options, Profile};

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/canon/golden.tsv");

/// The canonicalizers of the columns after the input, in order.
fn columns() -> Vec<(&'static str, Canonicalizer)> {
    vec![
        ("crawler", Canonicalizer::new(Options::new(Profile::Crawler))),
        (
            "crawler+sort+strip-blank",
            Canonicalizer::new(Options {
                sort_query: true,
                strip_tracking: true,
                keep_blank_values: false,
                ..Options::new(Profile::Crawler)
            }),
        ),
        ("w3lib", Canonicalizer::new(Options::new(Profile::W3lib))),
        ("safebrowsing", Canonicalizer::new(Options::new(Profile::SafeBrowsing))),
    ]
}

fn cell(result: Result<String, CanonError>) -> String {
    match result {
        Ok(s) => s,
        // "!" and the variant name: the message may be reworded without a version bump.
        Err(e) => {
            let debug = format!("{e:?}");
            let name = debug.split([' ', '{', '(']).next().unwrap_or_default();
            format!("!{name}")
        }
    }
}

#[test]
fn golden_outputs() {
    let text = std::fs::read_to_string(PATH).expect("read data/canon/golden.tsv");
    let cols = columns();
    let mut expected = String::new();
    let mut mismatches = Vec::new();
    let mut rows = 0;
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            if !line.starts_with("# CANON_VERSION") {
                expected.push_str(line);
                expected.push('\n');
            }
            continue;
        }
        let input = line.split('\t').next().expect("input column");
        let mut row = input.to_owned();
        for (_, c) in &cols {
            row.push('\t');
            row.push_str(&cell(c.canonicalize(input)));
        }
        if row != line {
            mismatches.push(format!("  file: {line}\n  now:  {row}"));
        }
        expected.push_str(&row);
        expected.push('\n');
        rows += 1;
    }
    let header = format!("# CANON_VERSION {CANON_VERSION}\n");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(PATH, format!("{header}{expected}")).expect("write golden file");
        return;
    }
    assert!(rows >= 50, "golden file has only {rows} rows");
    assert!(
        text.starts_with(&header),
        "golden file was made for another CANON_VERSION (this is {CANON_VERSION}): regenerate it"
    );
    assert!(
        mismatches.is_empty(),
        "canonical output changed for {} inputs; bump CANON_VERSION and regenerate \
         (UPDATE_GOLDEN=1):\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

/// The column names, for the file's header comment.
#[test]
fn header_names_the_columns() {
    let text = std::fs::read_to_string(PATH).expect("read data/canon/golden.tsv");
    let mut names = String::from("# input");
    for (name, _) in columns() {
        let _ = write!(names, "\t{name}");
    }
    assert!(text.lines().any(|l| l == names), "header line {names:?} missing");
}
