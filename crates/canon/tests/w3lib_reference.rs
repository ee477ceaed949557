//! Differential test against the real w3lib: `data/canon/w3lib_reference.jsonl` holds the
//! outputs of `w3lib.url.canonicalize_url` 2.5.0 (CPython) for ~2,500 generated URL-ish
//! inputs, made by `data/canon/gen_w3lib_reference.py`. Every line must match: the same
//! canonical string, or an error where Python raised one.

use serde_json::Value;
use urlseen_canon::{Canonicalizer, Options, Profile};

const REFERENCE: &str = include_str!("../../../data/canon/w3lib_reference.jsonl");

/// Inputs whose expected output differs for a documented reason (see
/// `docs/canonicalization.md`, "w3lib: known differences"), with the reason.
fn known_difference(input: &str) -> Option<&'static str> {
    let _ = input;
    None
}

#[test]
fn matches_w3lib_2_5_0() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for line in REFERENCE.lines() {
        let rec: Value = serde_json::from_str(line).expect("valid JSON line");
        let input = rec["in"].as_str().expect("in");
        let canon = Canonicalizer::new(Options {
            keep_blank_values: rec["blank"].as_bool().expect("blank"),
            keep_fragments: rec["frag"].as_bool().expect("frag"),
            ..Options::new(Profile::W3lib)
        });
        let got = canon.canonicalize(input);
        let ok = match (&got, rec.get("out").and_then(Value::as_str)) {
            (Ok(g), Some(want)) => g == want,
            (Err(_), None) => true,
            _ => false,
        };
        if !ok && known_difference(input).is_none() {
            failures.push(format!(
                "input {input:?} (blank={}, frag={}):\n  w3lib: {}\n  ours:  {got:?}",
                rec["blank"],
                rec["frag"],
                rec.get("out").unwrap_or(&rec["err"])
            ));
        }
        checked += 1;
    }
    assert!(checked > 2000, "reference file too small: {checked}");
    assert!(
        failures.is_empty(),
        "{} of {checked} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
