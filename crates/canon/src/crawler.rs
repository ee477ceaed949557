//! The `crawler` profile: WHATWG parsing plus dedup-safe normalizations.
//!
//! Two paths produce the same output:
//!
//! * a **fast path** for the common case of a URL that is already almost canonical (lowercase
//!   `http`/`https` scheme, lowercase ASCII host name without port or userinfo, a path and query
//!   of plain URL characters): one scan that copies the bytes, normalizes escapes and drops the
//!   fragment; anything it is not sure about sends the URL to
//! * the **full path**: [`url::Url::parse`] (the WHATWG URL Standard), then the same escape and
//!   query normalizations on its serialization.
//!
//! A property test checks that both paths agree on every URL the fast path accepts.

use url::{Position, Url};

use crate::pct::{escape_at, is_unreserved, normalize_escapes, push_escape_str};
use crate::{CanonError, MAX_URL_LEN, Options};

/// Schemes the crawler profile accepts: the WHATWG special schemes that always have a host
/// (`file:` is special too, but names a local file, not something a crawler fetches).
pub(crate) const SCHEMES: &[&str] = &["http", "https", "ws", "wss", "ftp"];

pub(crate) fn canonicalize(
    opts: &Options,
    input: &str,
    out: &mut String,
) -> Result<(), CanonError> {
    let s = input.trim_ascii();
    if s.is_empty() {
        return Err(CanonError::Empty);
    }
    if s.len() > MAX_URL_LEN {
        return Err(CanonError::TooLong { len: s.len(), max: MAX_URL_LEN });
    }
    if fast_path(s, opts, out) {
        return Ok(());
    }
    out.clear();
    full_path(s, opts, out)
}

/// The full path: WHATWG parse, then normalize.
pub(crate) fn full_path(s: &str, opts: &Options, out: &mut String) -> Result<(), CanonError> {
    let url = Url::parse(s).map_err(|e| parse_error(e, s))?;
    if !SCHEMES.contains(&url.scheme()) {
        return Err(CanonError::UnsupportedScheme { scheme: crate::error::snippet(url.scheme()) });
    }
    // The parser already lowercased scheme and host, applied IDNA, removed the default port,
    // resolved dot segments (including `%2e` forms), percent-encoded what must be, and made an
    // empty path "/". What is left: escape case and unreserved escapes, the query, the fragment.
    out.push_str(&url[..Position::BeforePath]);
    normalize_escapes(url.path(), out);
    if let Some(q) = url.query() {
        out.push('?');
        let q_start = out.len();
        normalize_escapes(q, out);
        finish_query(out, q_start, opts);
    }
    if opts.keep_fragments
        && let Some(f) = url.fragment()
    {
        out.push('#');
        normalize_escapes(f, out);
    }
    Ok(())
}

/// Maps a parser error to the most specific [`CanonError`].
fn parse_error(e: url::ParseError, input: &str) -> CanonError {
    use url::ParseError as P;
    let host_error = |reason: &str| CanonError::InvalidHost {
        host: crate::error::snippet(host_of(input)),
        reason: reason.to_owned(),
    };
    match e {
        P::RelativeUrlWithoutBase => CanonError::RelativeUrl,
        P::EmptyHost => host_error("the host is empty"),
        P::IdnaError => host_error("not a valid internationalized domain name (IDNA)"),
        P::InvalidIpv4Address => host_error("not a valid IPv4 address"),
        P::InvalidIpv6Address => host_error("not a valid IPv6 address"),
        P::InvalidDomainCharacter => {
            host_error("contains a character that is not allowed in a domain name")
        }
        P::InvalidPort => {
            CanonError::InvalidPort { authority: crate::error::snippet(authority_of(input)) }
        }
        other => CanonError::InvalidUrl { reason: other.to_string() },
    }
}

/// The authority of `input` as written (between `//` and the path), for error messages.
fn authority_of(input: &str) -> &str {
    let after = input.split_once("//").map_or(input, |(_, a)| a);
    let end = after.find(['/', '?', '#', '\\']).unwrap_or(after.len());
    &after[..end]
}

/// The host of `input` as written (authority without userinfo), for error messages.
fn host_of(input: &str) -> &str {
    let authority = authority_of(input);
    authority.rsplit_once('@').map_or(authority, |(_, h)| h)
}

/// Finishes the query whose normalized text is `out[q_start..]` (the `?` is at `q_start - 1`):
/// drops an empty query with its `?`, and applies the query options.
fn finish_query(out: &mut String, q_start: usize, opts: &Options) {
    if out.len() == q_start {
        out.pop();
        return;
    }
    if !(opts.sort_query || opts.strip_tracking || !opts.keep_blank_values) {
        return;
    }
    let query = out.split_off(q_start);
    let mut args: Vec<&str> = query
        .split('&')
        .filter(|arg| !arg.is_empty())
        .filter(|arg| {
            let (key, value) = arg.split_once('=').unwrap_or((arg, ""));
            !(opts.strip_tracking && crate::tracking::is_tracking_key(key.as_bytes()))
                && (opts.keep_blank_values || !value.is_empty())
        })
        .collect();
    if opts.sort_query {
        // Stable: arguments with equal key and value keep their order.
        args.sort_by(|a, b| {
            let (ka, va) = a.split_once('=').unwrap_or((a, ""));
            let (kb, vb) = b.split_once('=').unwrap_or((b, ""));
            ka.as_bytes().cmp(kb.as_bytes()).then_with(|| va.as_bytes().cmp(vb.as_bytes()))
        });
    }
    if args.is_empty() {
        out.pop();
        return;
    }
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        out.push_str(arg);
    }
}

/// Byte classes for the fast path's scan.
const STOP: u8 = 0; // not handled by the fast path
const PLAIN: u8 = 1; // copied as is
const PCT: u8 = 2; // '%'
const SLASH: u8 = 3;
const QMARK: u8 = 4;
const HASH: u8 = 5;

/// Builds a class table: `plain` bytes are [`PLAIN`], the delimiters get their class, everything
/// else is [`STOP`].
const fn class_table(plain: &[u8], slash: u8, qmark: u8) -> [u8; 256] {
    let mut t = [STOP; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() || c == b'-' || c == b'.' || c == b'_' || c == b'~' {
            t[b] = PLAIN;
        }
        b += 1;
    }
    let mut i = 0;
    while i < plain.len() {
        t[plain[i] as usize] = PLAIN;
        i += 1;
    }
    t[b'%' as usize] = PCT;
    t[b'/' as usize] = slash;
    t[b'?' as usize] = qmark;
    t[b'#' as usize] = HASH;
    t
}

/// Path bytes: RFC 3986 `pchar` (unreserved, sub-delims, `:` `@`), all of which the WHATWG
/// path serializer leaves alone.
const PATH_CLASS: [u8; 256] = class_table(b"!$&'()*+,;=:@", SLASH, QMARK);
/// Query bytes: the same without `'` (the WHATWG special-query set escapes it), plus `/` and
/// `?`, which are plain data in a query.
const QUERY_CLASS: [u8; 256] = class_table(b"!$&()*+,;=:@", PLAIN, PLAIN);

/// Host bytes: LDH ([`PLAIN`] lowercase, [`UPPER`] uppercase), label dots, the port colon.
const fn host_table() -> [u8; 256] {
    let mut t = [STOP; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' {
            t[b] = PLAIN;
        }
        b += 1;
    }
    let mut u = b'A';
    while u <= b'Z' {
        t[u as usize] = UPPER;
        u += 1;
    }
    t[b'.' as usize] = DOT;
    t[b':' as usize] = COLON;
    t[b'/' as usize] = SLASH;
    t[b'?' as usize] = QMARK;
    t[b'#' as usize] = HASH;
    t
}
const HOST_CLASS: [u8; 256] = host_table();
/// Host-only classes.
const UPPER: u8 = 6;
const DOT: u8 = 7;
const COLON: u8 = 8;

/// The first position at or after `i` whose byte is not [`PLAIN`] in `class` (`b.len()` if
/// none). Eight bytes at a time while they are all plain: the eight lookups do not wait on one
/// another, where a byte at a time waits on each compare (the path and query scans were a
/// third of canonicalization, itself a quarter of `filter`'s CPU).
#[inline]
fn skip_plain(b: &[u8], mut i: usize, class: &[u8; 256]) -> usize {
    while let Some(chunk) = b.get(i..i + 8) {
        let other = chunk.iter().fold(0u8, |acc, &c| acc | (class[usize::from(c)] ^ PLAIN));
        if other != 0 {
            break;
        }
        i += 8;
    }
    while b.get(i).is_some_and(|&c| class[usize::from(c)] == PLAIN) {
        i += 1;
    }
    i
}

/// Copies `s[from..to]`, normalizing the escapes in it; `false` if an escape is broken or (in a
/// path) decodes to '.', which could form a dot segment the full parser would resolve.
#[inline]
fn copy_normalized(s: &str, from: usize, to: usize, in_path: bool, out: &mut String) -> bool {
    let b = s.as_bytes();
    let mut copied = from;
    let mut i = from;
    while let Some(off) = b[i..to].iter().position(|&c| c == b'%') {
        let pct = i + off;
        let Some(v) = escape_at(b, pct) else { return false };
        if in_path && v == b'.' {
            return false;
        }
        let upper = !b[pct + 1].is_ascii_lowercase() && !b[pct + 2].is_ascii_lowercase();
        if is_unreserved(v) || !upper {
            out.push_str(&s[copied..pct]);
            if is_unreserved(v) {
                out.push(char::from(v));
            } else {
                push_escape_str(out, v);
            }
            copied = pct + 3;
        }
        i = pct + 3;
    }
    out.push_str(&s[copied..to]);
    true
}

/// Tries the fast path; `false` means "not sure, use the full path" (and `out` holds garbage).
///
/// It handles `http(s)://host[:port][/path][?query][#fragment]` (scheme and host in any case)
/// where the host is LDH labels (no empty label, no Punycode label, which the parser validates,
/// and a last label starting with a letter, since a numeric one makes the WHATWG parser read an
/// IPv4 address), without userinfo, the port is a number up to 65535, and path and query hold
/// only plain URL bytes and valid escapes, without dot segments.
fn fast_path(s: &str, opts: &Options, out: &mut String) -> bool {
    if opts.keep_fragments {
        return false;
    }
    let b = s.as_bytes();
    let (scheme, default_port) = match b.get(..8) {
        Some(p) if p.eq_ignore_ascii_case(b"https://") => ("https://", 443),
        _ => match b.get(..7) {
            Some(p) if p.eq_ignore_ascii_case(b"http://") => ("http://", 80),
            _ => return false,
        },
    };
    let host_start = scheme.len();
    let is_punycode = |label: &[u8]| label.len() >= 4 && label[..4].eq_ignore_ascii_case(b"xn--");

    // Host.
    let mut i = host_start;
    let mut label_start = i;
    let mut upper = false;
    let host_end = loop {
        let Some(&c) = b.get(i) else { break i };
        match HOST_CLASS[usize::from(c)] {
            PLAIN => i += 1,
            UPPER => {
                upper = true;
                i += 1;
            }
            DOT => {
                if i == label_start || is_punycode(&b[label_start..i]) {
                    return false;
                }
                i += 1;
                label_start = i;
            }
            STOP => return false,
            _ => break i,
        }
    };
    if host_end == label_start
        || !b[label_start].is_ascii_alphabetic()
        || is_punycode(&b[label_start..host_end])
    {
        return false;
    }

    // Port: digits up to the path; the parser drops the scheme's default and leading zeros.
    let mut port_end = host_end;
    let mut port = None;
    if b.get(host_end) == Some(&b':') {
        port_end = host_end + 1;
        let mut value: u32 = 0;
        while let Some(&d) = b.get(port_end).filter(|d| d.is_ascii_digit()) {
            value = value * 10 + u32::from(d - b'0');
            if value > 65_535 {
                return false;
            }
            port_end += 1;
        }
        if !matches!(b.get(port_end), None | Some(b'/' | b'?' | b'#')) {
            return false;
        }
        if port_end > host_end + 1 && value != default_port {
            port = Some(value);
        }
    }

    // Path: find its end, rejecting dot segments and bytes the serializer would change.
    let len = b.len();
    let path_start = port_end;
    let mut i = path_start;
    let mut path_end = i;
    let mut escapes = false;
    if i < len && b[i] == b'/' {
        let mut seg_start = i + 1;
        i += 1;
        path_end = loop {
            i = skip_plain(b, i, &PATH_CLASS);
            if i == len {
                break i;
            }
            match PATH_CLASS[usize::from(b[i])] {
                PCT => {
                    escapes = true;
                    i += 1;
                }
                SLASH => {
                    if i - seg_start <= 2 && matches!(&b[seg_start..i], b"." | b"..") {
                        return false;
                    }
                    i += 1;
                    seg_start = i;
                }
                STOP => return false,
                _ => break i,
            }
        };
        if path_end - seg_start <= 2 && matches!(&b[seg_start..path_end], b"." | b"..") {
            return false;
        }
    }
    // Query: up to the fragment.
    let mut query_end = path_end;
    let mut query_escapes = false;
    if path_end < len && b[path_end] == b'?' {
        i = path_end + 1;
        query_end = loop {
            i = skip_plain(b, i, &QUERY_CLASS);
            if i == len {
                break i;
            }
            match QUERY_CLASS[usize::from(b[i])] {
                PCT => {
                    query_escapes = true;
                    i += 1;
                }
                HASH => break i,
                _ => return false,
            }
        };
    }

    // Emit: lowercase scheme and host, the port if not the default, "/" for an empty path,
    // then path and query with escapes normalized.
    out.reserve(query_end + 8);
    out.push_str(scheme);
    if upper {
        out.extend(b[host_start..host_end].iter().map(|&c| char::from(c.to_ascii_lowercase())));
    } else {
        out.push_str(&s[host_start..host_end]);
    }
    if let Some(port) = port {
        out.push(':');
        // u32 Display: no allocation, at most five digits here.
        use std::fmt::Write as _;
        let _ = write!(out, "{port}");
    }
    if path_end == path_start {
        out.push('/');
    } else if !escapes {
        out.push_str(&s[path_start..path_end]);
    } else if !copy_normalized(s, path_start, path_end, true, out) {
        return false;
    }
    if query_end > path_end {
        out.push('?');
        let q_start = out.len();
        if !query_escapes {
            out.push_str(&s[path_end + 1..query_end]);
        } else if !copy_normalized(s, path_end + 1, query_end, false, out) {
            return false;
        }
        finish_query(out, q_start, opts);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fast(s: &str, opts: &Options) -> Option<String> {
        let mut out = String::new();
        fast_path(s, opts, &mut out).then_some(out)
    }

    fn full(s: &str, opts: &Options) -> Result<String, CanonError> {
        let mut out = String::new();
        full_path(s, opts, &mut out).map(|()| out)
    }

    #[test]
    fn fast_path_takes_common_urls() {
        let o = Options::default();
        for u in [
            "https://example.com/",
            "https://example.com",
            "http://www.example.com/a/b.html?x=1&y=2",
            "https://news.example.co.uk/2024/05/story-title-123?utm_source=x#top",
            "https://example.com/a%2fb%7e?q=%e9",
            "HTTP://WWW.Example.COM/",
            "https://example.com:443/",
            "https://example.com:8080",
            "http://example.com:0080/a",
            "http://example.com:/a?",
        ] {
            assert_eq!(fast(u, &o), Some(full(u, &o).unwrap()), "{u}");
        }
    }

    /// The corpus of the benchmarks is realistic crawler output: the fast path must take it.
    #[test]
    fn fast_path_takes_the_corpus() {
        let o = Options::default();
        let urls: Vec<String> = urlseen_corpus::Generator::new(42).take(4096).collect();
        let taken = urls.iter().filter(|u| fast(u, &o).is_some()).count();
        assert_eq!(taken, urls.len(), "fast path took {taken} of {}", urls.len());
        for u in urls.iter().take(256) {
            assert_eq!(fast(u, &o), Some(full(u, &o).unwrap()), "{u}");
        }
    }

    #[test]
    fn fast_path_declines_what_it_cannot_prove() {
        let o = Options::default();
        for u in [
            "https://example.com:99999/",
            "https://example.com:8x/",
            "https://user@example.com/",
            "https://XN--bcher-kva.de/",
            "https://1.2.3.4/",
            "https://example.123/",
            "https://xn--bcher-kva.de/",
            "https://a..b/",
            "https://example.com./",
            "https://example.com/a/./b",
            "https://example.com/a/../b",
            "https://example.com/a/%2e/b",
            "https://example.com/a b",
            "https://example.com/é",
            "https://example.com/?q='x'",
            "https://example.com/a\\b",
            "ftp://example.com/",
            "https://example.com/%zz",
        ] {
            assert_eq!(fast(u, &o), None, "{u}");
        }
        let keep = Options { keep_fragments: true, ..Options::default() };
        assert_eq!(fast("https://example.com/#f", &keep), None);
    }

    fn label() -> impl Strategy<Value = String> {
        prop_oneof![
            20 => "[a-z][a-z0-9-]{0,8}",
            2 => "[a-z0-9-]{1,6}",
            1 => Just("xn--bcher-kva".to_owned()),
            2 => "[A-Za-z][A-Za-z0-9-]{0,6}",
            1 => Just("XN--bcher-kva".to_owned()),
            1 => Just("".to_owned()),
            1 => "[0-9]{1,3}",
        ]
    }

    fn segment() -> impl Strategy<Value = String> {
        prop_oneof![
            20 => "[a-zA-Z0-9._~!$&'()*+,;=:@-]{0,8}",
            2 => Just(".".to_owned()),
            2 => Just("..".to_owned()),
            1 => Just("%2e".to_owned()),
            1 => Just("%2E%2e".to_owned()),
            4 => "[a-z]{0,3}%[0-9a-fA-F]{2}[a-z]{0,3}",
            1 => "%[0-9a-zA-Z]{0,2}",
            1 => "[ é\"<>`{}|^\\[\\]\\\\]{1,2}",
        ]
    }

    fn urlish() -> impl Strategy<Value = String> {
        (
            prop_oneof![
                10 => Just("http://"),
                10 => Just("https://"),
                1 => Just("HTTPS://"),
                1 => Just("hTtP://"),
                1 => Just("ftp://")
            ],
            prop::collection::vec(label(), 1..4),
            prop_oneof![
                20 => Just(""),
                1 => Just(":80"),
                1 => Just(":8080"),
                1 => Just(":443"),
                1 => Just(":0080"),
                1 => Just(":"),
                1 => Just(":65535"),
                1 => Just(":65536"),
                1 => Just(":8a"),
            ],
            prop::collection::vec(segment(), 0..5),
            prop::option::of(prop_oneof![
                10 => "[a-zA-Z0-9=&_.~/?+-]{0,16}",
                3 => "([a-z]{1,3}=[a-z%0-9A-F]{0,6}&){0,3}",
                1 => "[a-zA-Z0-9=&%_.~/?'+-]{0,16}",
            ]),
            prop::option::of("[a-z0-9]{0,4}"),
        )
            .prop_map(|(scheme, labels, port, segs, query, frag)| {
                let mut u = format!("{scheme}{}{port}", labels.join("."));
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

    fn any_options() -> impl Strategy<Value = Options> {
        (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(blank, sort, strip)| Options {
            keep_blank_values: blank,
            sort_query: sort,
            strip_tracking: strip,
            ..Options::default()
        })
    }

    /// The agreement property below is only as good as the share of generated URLs that the
    /// fast path accepts: keep the generator producing plenty of them.
    #[test]
    fn generator_exercises_the_fast_path() {
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let o = Options::default();
        let accepted = (0..2000)
            .filter(|_| {
                let u = urlish().new_tree(&mut runner).unwrap().current();
                fast(&u, &o).is_some()
            })
            .count();
        assert!(accepted >= 400, "fast path accepted only {accepted} of 2000 generated URLs");
    }

    proptest! {
        /// The eight-at-a-time scan stops where a byte-at-a-time one does, from any start.
        #[test]
        fn skip_plain_matches_a_byte_scan(
            bytes in proptest::collection::vec(
                prop_oneof![4 => proptest::sample::select(b"az09-._~!$&'()*+,;=:@".to_vec()), 1 => any::<u8>()],
                0..64,
            ),
            start in 0usize..70,
        ) {
            for class in [&PATH_CLASS, &QUERY_CLASS] {
                let mut naive = start.min(bytes.len());
                while naive < bytes.len() && class[usize::from(bytes[naive])] == PLAIN {
                    naive += 1;
                }
                prop_assert_eq!(skip_plain(&bytes, start.min(bytes.len()), class), naive);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// The fast path is an optimization only: wherever it answers, it answers exactly
        /// what the full WHATWG path answers.
        #[test]
        fn fast_path_agrees_with_full_path(u in urlish(), opts in any_options()) {
            if let Some(got) = fast(&u, &opts) {
                prop_assert_eq!(Ok(got), full(&u, &opts), "input {}", u);
            }
        }
    }
}
