//! The `crawler` profile, one test per rule: what it merges, and what it must never merge.

use urlseen_canon::{CanonError, Canonicalizer, MAX_URL_LEN, Options, Profile, canonicalize};

fn canon(url: &str) -> String {
    canonicalize(url, Profile::Crawler).unwrap_or_else(|e| panic!("{url:?}: {e}"))
}

fn canon_with(url: &str, opts: Options) -> String {
    Canonicalizer::new(opts).canonicalize(url).unwrap_or_else(|e| panic!("{url:?}: {e}"))
}

/// Asserts that all `spellings` canonicalize to `want`.
fn merges(want: &str, spellings: &[&str]) {
    for s in spellings {
        assert_eq!(canon(s), want, "input {s:?}");
    }
}

/// Asserts that `a` and `b` stay different.
fn keeps_apart(a: &str, b: &str) {
    assert_ne!(canon(a), canon(b), "{a:?} and {b:?} must not merge");
}

#[test]
fn lowercases_scheme_and_host() {
    merges("http://example.com/Path", &["HTTP://EXAMPLE.COM/Path", "Http://Example.Com/Path"]);
}

#[test]
fn idna_to_punycode() {
    merges(
        "http://xn--bcher-kva.de/",
        &["http://bücher.de/", "http://BÜCHER.de", "http://xn--bcher-kva.de"],
    );
    merges("http://xn--r8jz45g.jp/", &["http://例え。jp/"]);
}

#[test]
fn removes_default_port_only() {
    merges("http://example.com/", &["http://example.com:80/", "http://example.com:/"]);
    merges("https://example.com/", &["https://example.com:443/"]);
    merges("ws://example.com/", &["ws://example.com:80/"]);
    merges("ftp://example.com/", &["ftp://example.com:21/"]);
    assert_eq!(canon("http://example.com:8080/"), "http://example.com:8080/");
    assert_eq!(canon("https://example.com:80/"), "https://example.com:80/");
    assert_eq!(canon("http://example.com:0080/"), "http://example.com/");
}

#[test]
fn resolves_dot_segments() {
    merges(
        "http://example.com/a/c",
        &[
            "http://example.com/a/./b/../c",
            "http://example.com/a/b/%2e%2E/c",
            "http://example.com/../a/c",
        ],
    );
    merges("http://example.com/a/", &["http://example.com/a/b/..", "http://example.com/a/."]);
}

#[test]
fn normalizes_percent_escapes() {
    // Unreserved characters are decoded, every other escape gets uppercase hex.
    merges("http://example.com/~user/A-b_c.d", &["http://example.com/%7euser/%41%2Db%5Fc%2ed"]);
    merges("http://example.com/a%2Fb", &["http://example.com/a%2fb"]);
    merges("http://example.com/?q=~%2F%C3%A9", &["http://example.com/?q=%7E%2f%c3%a9"]);
    // Characters the URL Standard encodes are encoded as UTF-8.
    merges("http://example.com/r%C3%A9sum%C3%A9?q=%C3%A9", &["http://example.com/résumé?q=é"]);
    merges("http://example.com/a%20b", &["http://example.com/a b", "http://example.com/a%20b"]);
    // A broken escape is kept as written.
    assert_eq!(canon("http://example.com/100%/%zz"), "http://example.com/100%/%zz");
}

#[test]
fn empty_path_is_slash() {
    merges("http://example.com/", &["http://example.com", "http://example.com/"]);
    merges("http://example.com/?q=1", &["http://example.com?q=1"]);
}

#[test]
fn drops_fragment_and_empty_query() {
    merges(
        "http://example.com/a",
        &["http://example.com/a#top", "http://example.com/a?", "http://example.com/a?#x"],
    );
    let keep = Options { keep_fragments: true, ..Options::default() };
    assert_eq!(
        canon_with("http://example.com/a#t%7eo%2fp", keep.clone()),
        "http://example.com/a#t~o%2Fp"
    );
    assert_eq!(canon_with("http://example.com/a", keep), "http://example.com/a");
}

#[test]
fn trims_surrounding_whitespace() {
    merges("http://example.com/", &["  http://example.com/ ", "\thttp://example.com/\r\n"]);
}

#[test]
fn other_whatwg_normalizations() {
    // Backslash is a slash in special URLs; tabs and newlines inside are removed.
    merges("http://example.com/a/b", &["http:\\\\example.com\\a\\b", "http://exam\tple.com/a/\nb"]);
    // IPv4 in any notation is the same address.
    merges("http://127.0.0.1/", &["http://0x7f.1/", "http://2130706433/", "http://127.0.0.1/"]);
    merges("http://[2001:db8::1]/", &["http://[2001:0DB8:0:0::1]/"]);
    // Userinfo is kept (it reaches the server) but normalized like the rest.
    assert_eq!(canon("http://User:Pw@example.com/"), "http://User:Pw@example.com/");
}

#[test]
fn never_merges_urls_that_differ() {
    keeps_apart("http://example.com/Page", "http://example.com/page");
    keeps_apart("http://example.com/dir/", "http://example.com/dir");
    keeps_apart("http://example.com/?a=1&b=2", "http://example.com/?b=2&a=1");
    keeps_apart("http://www.example.com/", "http://example.com/");
    keeps_apart("http://example.com/?q=A", "http://example.com/?q=a");
    keeps_apart("http://example.com/a%2Fb", "http://example.com/a/b");
    keeps_apart("http://example.com/?q=a+b", "http://example.com/?q=a%20b");
    keeps_apart("http://example.com/?a", "http://example.com/?a=");
    keeps_apart("http://example.com/?a=1&&b=2", "http://example.com/?a=1&b=2");
    keeps_apart("http://example.com/?a=1;b=2", "http://example.com/?a=1&b=2");
    keeps_apart("http://example.com/index.html", "http://example.com/");
    keeps_apart("http://example.com//a", "http://example.com/a");
    keeps_apart("https://example.com/", "http://example.com/");
    keeps_apart("http://example.com/?utm_source=x", "http://example.com/");
    keeps_apart("http://example.com/a;p", "http://example.com/a");
    keeps_apart("http://example.com./", "http://example.com/");
}

#[test]
fn sort_query_option() {
    let sort = Options { sort_query: true, ..Options::default() };
    assert_eq!(
        canon_with("http://example.com/?b=2&a=1&a=0&c", sort.clone()),
        "http://example.com/?a=0&a=1&b=2&c"
    );
    // Stable: equal key and value keep their order ("a" before "a=" here).
    assert_eq!(
        canon_with("http://example.com/?z&a&a=", sort.clone()),
        "http://example.com/?a&a=&z"
    );
    // Empty arguments between separators go.
    assert_eq!(canon_with("http://example.com/?b&&a&", sort), "http://example.com/?a&b");
}

#[test]
fn strip_tracking_option() {
    let strip = Options { strip_tracking: true, ..Options::default() };
    assert_eq!(
        canon_with(
            "https://shop.example/p?id=7&utm_source=mail&utm_medium=x&fbclid=abc&gclid=1&ref=a",
            strip.clone()
        ),
        "https://shop.example/p?id=7&ref=a"
    );
    assert_eq!(
        canon_with("https://shop.example/p?utm_campaign=x", strip.clone()),
        "https://shop.example/p"
    );
    // The key is compared after escape normalization: %5F is '_'.
    assert_eq!(
        canon_with("https://shop.example/p?utm%5Fsource=x&a=1", strip.clone()),
        "https://shop.example/p?a=1"
    );
    // Case-sensitive, exact keys only.
    assert_eq!(
        canon_with("https://shop.example/p?UTM_SOURCE=x", strip),
        "https://shop.example/p?UTM_SOURCE=x"
    );
}

#[test]
fn keep_blank_values_option() {
    let drop = Options { keep_blank_values: false, ..Options::default() };
    assert_eq!(canon_with("http://example.com/?a=&b=1&c", drop.clone()), "http://example.com/?b=1");
    assert_eq!(canon_with("http://example.com/?a=", drop), "http://example.com/");
    assert_eq!(canon("http://example.com/?a=&b=1&c"), "http://example.com/?a=&b=1&c");
}

#[test]
fn errors_are_typed() {
    assert_eq!(canonicalize("", Profile::Crawler), Err(CanonError::Empty));
    assert_eq!(canonicalize(" \t\n", Profile::Crawler), Err(CanonError::Empty));
    let long = format!("http://example.com/{}", "a".repeat(MAX_URL_LEN));
    assert_eq!(
        canonicalize(&long, Profile::Crawler),
        Err(CanonError::TooLong { len: long.len(), max: MAX_URL_LEN })
    );
    assert_eq!(canonicalize("/relative", Profile::Crawler), Err(CanonError::RelativeUrl));
    assert_eq!(canonicalize("www.example.com/a", Profile::Crawler), Err(CanonError::RelativeUrl));
    for (input, scheme) in [
        ("mailto:a@example.com", "mailto"),
        ("javascript:void(0)", "javascript"),
        ("data:text/plain,hi", "data"),
        ("file:///etc/passwd", "file"),
        ("tel:+123", "tel"),
    ] {
        assert_eq!(
            canonicalize(input, Profile::Crawler),
            Err(CanonError::UnsupportedScheme { scheme: scheme.to_owned() })
        );
    }
    assert!(matches!(
        canonicalize("http://exa mple.com/", Profile::Crawler),
        Err(CanonError::InvalidHost { host, .. }) if host == "exa mple.com"
    ));
    assert!(matches!(
        canonicalize("http:///", Profile::Crawler),
        Err(CanonError::InvalidHost { .. })
    ));
    assert!(matches!(
        canonicalize("http://[::1/", Profile::Crawler),
        Err(CanonError::InvalidHost { .. })
    ));
    assert_eq!(
        canonicalize("http://example.com:99999/", Profile::Crawler),
        Err(CanonError::InvalidPort { authority: "example.com:99999".to_owned() })
    );
    let msg = canonicalize("mailto:x@y", Profile::Crawler).unwrap_err().to_string();
    assert!(msg.contains("mailto") && msg.contains("http"), "{msg}");
}
