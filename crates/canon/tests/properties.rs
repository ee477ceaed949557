//! Properties that hold for every input: no panic, idempotence `c(c(u)) == c(u)` for every
//! profile and option set, `canonicalize_into` equals `canonicalize`, and the crawler profile
//! never merges URLs that differ in path case.

use proptest::prelude::*;
use urlseen_canon::{Canonicalizer, Options, Profile};

fn scheme() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just("http://".to_owned()),
        4 => Just("https://".to_owned()),
        1 => Just("HTTP://".to_owned()),
        1 => Just("ftp://".to_owned()),
        1 => Just("ws://".to_owned()),
        1 => Just("http:".to_owned()),
        1 => Just("http:\\\\".to_owned()),
        1 => Just("mailto:".to_owned()),
        1 => Just("javascript:".to_owned()),
        1 => Just("foo://".to_owned()),
        1 => Just("//".to_owned()),
        1 => Just("".to_owned()),
    ]
}

fn host() -> impl Strategy<Value = String> {
    let label = prop_oneof![
        6 => "[a-z][a-z0-9-]{0,10}",
        2 => "[A-Za-z0-9-]{1,6}",
        1 => "[0-9]{1,3}",
        1 => "0x[0-9a-f]{1,2}",
        1 => Just("xn--bcher-kva".to_owned()),
        1 => Just("xn--zz".to_owned()),
        1 => "[àéîõüßçñ]{1,3}",
        1 => "[例えテスト]{1,3}",
        1 => "[кторф]{1,4}",
        1 => Just(String::new()),
    ];
    prop_oneof![
        10 => prop::collection::vec(label, 1..5).prop_map(|l| l.join(".")),
        1 => Just("[::1]".to_owned()),
        1 => Just("[2001:0DB8::0001]".to_owned()),
        1 => Just("[::ffff:1.2.3.4]".to_owned()),
        1 => Just("[v1.x]".to_owned()),
        1 => Just("[::1".to_owned()),
        1 => Just("user:pass@example.com".to_owned()),
        1 => Just("%65xample.com".to_owned()),
        1 => Just("exa mple.com".to_owned()),
    ]
}

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-zA-Z0-9._~-]{0,10}",
        2 => "[a-zA-Z0-9!$&'()*+,;=:@]{1,6}",
        1 => Just(".".to_owned()),
        1 => Just("..".to_owned()),
        1 => Just("%2e".to_owned()),
        1 => Just("%2E%2e".to_owned()),
        2 => "%[0-9a-fA-F]{2}",
        1 => "%[0-9a-zA-Z%]{0,2}",
        1 => Just("%25".to_owned()),
        1 => Just("%2525".to_owned()),
        1 => Just("%3b".to_owned()),
        1 => "[ é\"<>`{}|^\\[\\]\\\\#?]{1,2}",
        1 => "\\PC{1,3}",
    ]
}

fn query() -> impl Strategy<Value = String> {
    let arg = prop_oneof![
        4 => ("[a-z_]{1,6}", "[a-zA-Z0-9]{0,5}").prop_map(|(k, v)| format!("{k}={v}")),
        1 => Just("utm_source=news".to_owned()),
        1 => Just("fbclid=x".to_owned()),
        1 => "[a-z]{1,3}",
        1 => Just(String::new()),
        1 => "[a-z]=[+ %20é';/?]{1,3}",
        1 => "%[0-9a-fA-F]{2}=%[0-9a-zA-Z]{2}",
    ];
    prop::collection::vec(arg, 0..5).prop_map(|a| a.join("&"))
}

/// URL-ish strings: mostly URLs, with every kind of oddity a crawler meets.
fn urlish() -> impl Strategy<Value = String> {
    (
        prop_oneof![8 => Just(""), 1 => Just(" "), 1 => Just("\t")],
        scheme(),
        host(),
        prop_oneof![6 => Just(""), 1 => Just(":80"), 1 => Just(":443"), 1 => Just(":8080"), 1 => Just(":"), 1 => Just(":99999")],
        prop::collection::vec(segment(), 0..5),
        prop::option::of(query()),
        prop::option::of("[a-z0-9#%é]{0,5}"),
    )
        .prop_map(|(pad, scheme, host, port, segs, query, frag)| {
            let mut u = format!("{pad}{scheme}{host}{port}");
            for s in segs {
                u.push('/');
                u.push_str(&s);
            }
            if let Some(q) = query {
                u.push('?');
                u.push_str(&q);
            }
            if let Some(f) = frag {
                u.push('#');
                u.push_str(&f);
            }
            u
        })
}

fn options() -> impl Strategy<Value = Options> {
    (
        prop::sample::select(Profile::ALL.to_vec()),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(profile, keep_fragments, keep_blank_values, sort_query, strip_tracking)| Options {
                profile,
                keep_fragments,
                keep_blank_values,
                sort_query,
                strip_tracking,
            },
        )
}

fn check_idempotent(opts: &Options, input: &str) -> Result<(), TestCaseError> {
    let c = Canonicalizer::new(opts.clone());
    if let Ok(once) = c.canonicalize(input) {
        let twice = c.canonicalize(&once);
        prop_assert_eq!(
            twice.as_ref(),
            Ok(&once),
            "profile {} not idempotent on {:?} (opts {:?})",
            opts.profile,
            input,
            opts
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn idempotent_on_urlish_input(u in urlish(), opts in options()) {
        check_idempotent(&opts, &u)?;
    }

    #[test]
    fn idempotent_on_arbitrary_strings(s in "\\PC{0,40}", opts in options()) {
        check_idempotent(&opts, &s)?;
    }

    /// Delimiters, escapes and hex digits in every order: what breaks parsers that unescape.
    #[test]
    fn idempotent_on_delimiter_soup(
        s in "(https?://|HTTP:|//)?[a-fA-F0-9%.:/?#@\\[\\]\\\\ xX;&=+é\u{FF05}\u{3002}]{0,30}",
        opts in options(),
    ) {
        check_idempotent(&opts, &s)?;
    }

    /// Arbitrary Unicode, controls included: an error is fine, a panic is not.
    #[test]
    fn never_panics(s in any::<String>(), opts in options()) {
        let _ = Canonicalizer::new(opts).canonicalize(&s);
    }

    #[test]
    fn never_panics_on_urlish_bytes(s in "(https?://)?[\\x00-\\x7F%\\[\\]@:/?#é]{0,60}", opts in options()) {
        let _ = Canonicalizer::new(opts).canonicalize(&s);
    }

    #[test]
    fn into_matches_canonicalize(u in urlish(), opts in options()) {
        let c = Canonicalizer::new(opts);
        let mut buf = String::from("garbage");
        let into = c.canonicalize_into(&u, &mut buf).map(|()| buf.clone());
        prop_assert_eq!(into, c.canonicalize(&u));
    }

    /// Paths that differ only in letter case name different resources on most servers.
    #[test]
    fn crawler_keeps_path_case(path in "/[a-z]{1,8}(/[a-zA-Z0-9]{0,6}){0,3}", query in "[a-z=&]{0,8}") {
        let upper = path.to_ascii_uppercase();
        prop_assume!(upper != path);
        let c = Canonicalizer::new(Options::new(Profile::Crawler));
        let a = c.canonicalize(&format!("https://example.com{path}?{query}")).unwrap();
        let b = c.canonicalize(&format!("https://example.com{upper}?{query}")).unwrap();
        prop_assert_ne!(a, b);
    }
}
