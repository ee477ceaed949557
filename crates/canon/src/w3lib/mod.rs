//! The `w3lib` profile: Scrapy's `w3lib.url.canonicalize_url(url)` for a `str` URL.
//!
//! A step-by-step port of w3lib 2.5.0 (`canonicalize_url`, `_safe_url_split`, `_urlsplit`,
//! `_split_params`, `_parse_qsl`, `_urlencode`, `_unquotepath`, `_remove_dot_segments`,
//! `_normalize_ipv6_host`, `_urlunparse`) with `encoding=None` (UTF-8) and the default
//! `query_separator="&"`, so that a crawler migrating from Scrapy keeps its fingerprints. Names
//! in comments are those Python functions. `data/canon/w3lib_reference.jsonl` holds outputs of
//! the real w3lib 2.5.0 that a test compares against; the known differences are listed in
//! `docs/canonicalization.md`.

use std::borrow::Cow;

mod host;

use host::{
    check_bracketed_netloc, check_netloc_nfkc, normalize_ipv6_host, python_lower, safe_netloc,
};

use crate::pct::{escape_at, push_escape, push_utf8};
use crate::{CanonError, MAX_URL_LEN, Options};

/// A 256-entry membership table for a byte set.
type ByteSet = [bool; 256];

/// w3lib's `_quote_table(safe)`: RFC 3986 unreserved characters plus `extra`.
const fn byte_set(extra: &[u8]) -> ByteSet {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || c == b'-' || c == b'.' || c == b'_' || c == b'~';
        b += 1;
    }
    let mut i = 0;
    while i < extra.len() {
        t[extra[i] as usize] = true;
        i += 1;
    }
    t
}

/// `_PATH_SAFE_CHARS`: RFC 3986 reserved + unreserved + `|` + `%`, without `#`.
const PATH_SAFE: ByteSet = byte_set(b":/?[]@!$&'()*+,;=|%");
/// `_PATH_SAFEST_CHARS` (also `_FRAGMENT_SAFEST_CHARS`): `_SAFE_CHARS` without `#[]|`.
const PATH_SAFEST: ByteSet = byte_set(b":/?@!$&'()*+,;=%");
/// `_USERINFO_SAFEST_CHARS`: unreserved + sub-delims + `:`, without `:;=`.
const USERINFO_SAFEST: ByteSet = byte_set(b"!$&'()*+,");
/// `_quote(…, quote_plus=True)` with no extra safe characters.
const UNRESERVED: ByteSet = byte_set(b"");

/// w3lib's `_SPECIAL_SCHEMES` (the WHATWG special schemes).
const SPECIAL_SCHEMES: &[&str] = &["ftp", "file", "http", "https", "ws", "wss"];
/// urllib's `uses_params`.
const USES_PARAMS: &[&str] = &[
    "", "ftp", "hdl", "prospero", "http", "imap", "https", "shttp", "rtsp", "rtsps", "rtspu",
    "sip", "sips", "mms", "sftp", "tel",
];
/// urllib's `uses_netloc`.
const USES_NETLOC: &[&str] = &[
    "",
    "ftp",
    "http",
    "gopher",
    "nntp",
    "telnet",
    "imap",
    "wais",
    "file",
    "mms",
    "https",
    "shttp",
    "snews",
    "prospero",
    "rtsp",
    "rtsps",
    "rtspu",
    "rsync",
    "svn",
    "svn+ssh",
    "sftp",
    "nfs",
    "git",
    "git+ssh",
    "ws",
    "wss",
    "itms-services",
];

/// `canonicalize_url(input, keep_blank_values, keep_fragments)` written into `out`.
///
/// One deviation keeps the profile idempotent: w3lib decodes escapes in the path, so the output
/// for a relative input such as `%65xample.com:` (`example.com:`) can parse differently (with
/// scheme `example.com`) the next time. Such a relative input whose w3lib form is not a fixed
/// point is refused with [`CanonError::RelativeUrl`]; every other input gets w3lib's answer.
pub(crate) fn canonicalize(
    opts: &Options,
    input: &str,
    out: &mut String,
) -> Result<(), CanonError> {
    let had_scheme = canonicalize_raw(opts, input, out)?;
    if !had_scheme {
        let mut again = String::with_capacity(out.len());
        if canonicalize_raw(opts, out, &mut again).is_err() || again != *out {
            return Err(CanonError::RelativeUrl);
        }
    }
    Ok(())
}

/// w3lib's answer, and whether the input had a scheme.
fn canonicalize_raw(opts: &Options, input: &str, out: &mut String) -> Result<bool, CanonError> {
    let url = strip(input);
    if url.is_empty() {
        // Python returns "/" here; every profile of this crate refuses empty input instead.
        return Err(CanonError::Empty);
    }
    if url.len() > MAX_URL_LEN {
        return Err(CanonError::TooLong { len: url.len(), max: MAX_URL_LEN });
    }

    // _safe_url_split
    let parts = urlsplit(&url)?;
    let netloc = safe_netloc(&parts)?;
    let mut path = quote_str(&parts.path, &PATH_SAFEST);
    let fragment = quote_str(&parts.fragment, &PATH_SAFEST);
    if path.is_empty()
        && !parts.query.is_empty()
        && SPECIAL_SCHEMES.contains(&parts.scheme.as_str())
    {
        path.push('/');
    }
    let scheme = parts.scheme.as_str();

    // canonicalize_url
    let (path, params) = split_params(scheme, &path);

    // 1. Query: parse (raw bytes, '+' is a space), sort by key then value, urlencode. Quoting
    // the query first, as _safe_url_split does, changes nothing the unquoting does not undo.
    let mut query = Vec::new();
    if !parts.query.is_empty() {
        let mut keyvals = parse_qsl(&parts.query, opts.keep_blank_values);
        if opts.strip_tracking {
            keyvals.retain(|(k, _)| !crate::tracking::is_tracking_key(k));
        }
        keyvals.sort();
        for (i, (k, v)) in keyvals.iter().enumerate() {
            if i > 0 {
                query.push(b'&');
            }
            quote_plus(k, &mut query);
            query.push(b'=');
            quote_plus(v, &mut query);
        }
    }

    // 2. Path: decode escapes and encode again (uppercase hex), except `%25 %2F %3B %3F`, whose
    // decoding would change the path's meaning; then resolve dot segments.
    let path = if path.is_empty() {
        "/".to_owned()
    } else {
        let mut p = Vec::with_capacity(path.len() + 8);
        unquote_path_requote(path.as_bytes(), &mut p);
        let mut out = String::with_capacity(p.len());
        push_utf8(&mut out, &p);
        out
    };
    let path = if path.starts_with('/') { remove_dot_segments(&path) } else { path };

    // Lowercase the host part (after the last '@'), not the userinfo; drop one trailing ':'.
    let (userinfo, host) = match netloc.rfind('@') {
        Some(at) => (&netloc[..=at], &netloc[at + 1..]),
        None => ("", &netloc[..]),
    };
    let host = python_lower(host);
    let host = host.strip_suffix(':').unwrap_or(&host);
    let host = normalize_ipv6_host(host);

    // _urlunparse
    let path_and_params: Cow<'_, str> = if params.is_empty() {
        Cow::Borrowed(&path)
    } else {
        Cow::Owned(format!("{path};{params}"))
    };
    if !scheme.is_empty() {
        out.push_str(scheme);
        out.push(':');
    }
    if !userinfo.is_empty() || !host.is_empty() {
        out.push_str("//");
        out.push_str(userinfo);
        out.push_str(&host);
        if !path_and_params.is_empty() && !path_and_params.starts_with('/') {
            out.push('/');
        }
    } else if path_and_params.starts_with("//")
        || (!scheme.is_empty()
            && USES_NETLOC.contains(&scheme)
            && (path_and_params.is_empty() || path_and_params.starts_with('/')))
    {
        out.push_str("//");
    }
    out.push_str(&path_and_params);
    if !query.is_empty() {
        out.push('?');
        push_utf8(out, &query);
    }
    if opts.keep_fragments && !fragment.is_empty() {
        out.push('#');
        out.push_str(&fragment);
    }
    Ok(!scheme.is_empty())
}

/// w3lib's `_strip`: if there is any C0 control or space, strip them at both ends and remove
/// every tab, CR and LF.
fn strip(input: &str) -> Cow<'_, str> {
    if !input.bytes().any(|b| b <= b' ') {
        return Cow::Borrowed(input);
    }
    let s = input.trim_matches(|c: char| c <= ' ');
    if s.contains(['\t', '\n', '\r']) {
        Cow::Owned(s.chars().filter(|c| !matches!(c, '\t' | '\n' | '\r')).collect())
    } else {
        Cow::Borrowed(s)
    }
}

/// w3lib's `_SplitResult`.
#[derive(Debug, PartialEq, Eq)]
struct SplitResult {
    /// Lowercased.
    scheme: String,
    netloc: String,
    /// `\` already replaced by `/` for special schemes.
    path: String,
    query: String,
    fragment: String,
    /// `Some` when the netloc has an `@`.
    username: Option<String>,
    password: Option<String>,
    /// Lowercased (except an IPv6 zone after `%`).
    hostname: String,
    port: Option<u16>,
}

fn invalid(reason: impl Into<String>) -> CanonError {
    CanonError::InvalidUrl { reason: reason.into() }
}

/// w3lib's `_urlsplit(url)`, including its `ValueError`s.
fn urlsplit(url: &str) -> Result<SplitResult, CanonError> {
    // _SCHEME_RE: ^([a-zA-Z][a-zA-Z0-9+.-]*):
    let mut scheme = String::new();
    let mut rest = url;
    let b = url.as_bytes();
    if b.first().is_some_and(u8::is_ascii_alphabetic) {
        let n = b
            .iter()
            .take_while(|&&c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'))
            .count();
        if b.get(n) == Some(&b':') {
            scheme = url[..n].to_ascii_lowercase();
            rest = &url[n + 1..];
        }
    }

    // "\" is "/" in the authority and path of special-scheme URLs (not in query or fragment).
    let cut = rest.find(['?', '#']).unwrap_or(rest.len());
    let replaced: Cow<'_, str> =
        if SPECIAL_SCHEMES.contains(&scheme.as_str()) && rest[..cut].contains('\\') {
            Cow::Owned(format!("{}{}", rest[..cut].replace('\\', "/"), &rest[cut..]))
        } else {
            Cow::Borrowed(rest)
        };
    let rest: &str = &replaced;

    let mut netloc = "";
    let mut tail = rest;
    let mut brackets = false;
    if let Some(after) = rest.strip_prefix("//") {
        let delim = after.find(['/', '?', '#']).unwrap_or(after.len());
        netloc = &after[..delim];
        tail = &after[delim..];
        let open = netloc.contains('[');
        let close = netloc.contains(']');
        if open != close {
            return Err(invalid("Invalid IPv6 URL: unbalanced '[' or ']' in the authority"));
        }
        if open {
            check_bracketed_netloc(netloc)?;
            brackets = true;
        }
    }
    check_netloc_nfkc(netloc)?;
    let (before_hash, fragment) = tail.split_once('#').unwrap_or((tail, ""));
    let (path, query) = before_hash.split_once('?').unwrap_or((before_hash, ""));

    let (userinfo, hostinfo) = match netloc.rfind('@') {
        Some(at) => (Some(&netloc[..at]), &netloc[at + 1..]),
        None => (None, netloc),
    };
    let (username, password) = match userinfo {
        Some(u) => match u.split_once(':') {
            Some((user, pass)) => (Some(user), Some(pass)),
            None => (Some(u), None),
        },
        None => (None, None),
    };
    let (hostname, port) = if brackets {
        let inner = hostinfo.split_once('[').map_or("", |(_, r)| r);
        let (host, after) = inner.split_once(']').unwrap_or((inner, ""));
        (host, after.split_once(':').map_or("", |(_, p)| p))
    } else {
        hostinfo.split_once(':').unwrap_or((hostinfo, ""))
    };
    let hostname = match hostname.split_once('%') {
        Some((h, zone)) => format!("{}%{zone}", python_lower(h)),
        None => python_lower(hostname).into_owned(),
    };
    let port = if port.is_empty() {
        None
    } else {
        // int(port) for ASCII digits, then the 0..=65535 check.
        let bad_port = || CanonError::InvalidPort { authority: crate::error::snippet(netloc) };
        if !port.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad_port());
        }
        let digits = port.trim_start_matches('0');
        if digits.is_empty() {
            Some(0)
        } else {
            Some(digits.parse::<u16>().map_err(|_| bad_port())?)
        }
    };
    Ok(SplitResult {
        scheme,
        netloc: netloc.to_owned(),
        path: path.to_owned(),
        query: query.to_owned(),
        fragment: fragment.to_owned(),
        username: username.map(str::to_owned),
        password: password.map(str::to_owned),
        hostname,
        port,
    })
}

/// `_quote(bytes, safe)`: bytes outside `safe` become `%XX`.
fn quote(src: &[u8], safe: &ByteSet, out: &mut Vec<u8>) {
    for &b in src {
        if safe[usize::from(b)] {
            out.push(b);
        } else {
            push_escape(out, b);
        }
    }
}

/// `_quote(s.encode(), safe).decode()`.
fn quote_str(s: &str, safe: &ByteSet) -> String {
    let mut v = Vec::with_capacity(s.len());
    quote(s.as_bytes(), safe, &mut v);
    // Every byte outside the (ASCII) safe set was escaped.
    let mut out = String::with_capacity(v.len());
    push_utf8(&mut out, &v);
    out
}

/// `_quote(bytes, quote_plus=True)`: unreserved characters stay, spaces become `+`.
fn quote_plus(src: &[u8], out: &mut Vec<u8>) {
    for &b in src {
        if b == b' ' {
            out.push(b'+');
        } else if UNRESERVED[usize::from(b)] {
            out.push(b);
        } else {
            push_escape(out, b);
        }
    }
}

/// `_unquote(bytes)`: decode every `%XX`.
fn unquote(src: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(src.len());
    let mut i = 0;
    while i < src.len() {
        if src[i] == b'%'
            && let Some(v) = escape_at(src, i)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(src[i]);
        i += 1;
    }
    out
}

/// `_unquote_plus(bytes)`: `+` is a space, then decode every `%XX`.
fn unquote_plus(src: &[u8]) -> Vec<u8> {
    let mut out = unquote(src);
    // A '+' produced by decoding `%2B` must stay a '+': only replace literal ones.
    let mut i = 0;
    let mut j = 0;
    while i < src.len() {
        if src[i] == b'%' && escape_at(src, i).is_some() {
            i += 3;
        } else {
            if src[i] == b'+' {
                out[j] = b' ';
            }
            i += 1;
        }
        j += 1;
    }
    out
}

/// `_quote(_unquotepath(path), _PATH_SAFE_CHARS)`: every escape is decoded and encoded again,
/// except `%25`, `%2F`, `%3B` and `%3F`, which only get uppercase hex.
fn unquote_path_requote(src: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while i < src.len() {
        let b = src[i];
        if b == b'%'
            && let Some(v) = escape_at(src, i)
        {
            if matches!(v, b'%' | b'/' | b';' | b'?') || !PATH_SAFE[usize::from(v)] {
                push_escape(out, v);
            } else {
                out.push(v);
            }
            i += 3;
            continue;
        }
        if PATH_SAFE[usize::from(b)] {
            out.push(b);
        } else {
            push_escape(out, b);
        }
        i += 1;
    }
}

/// w3lib's `_remove_dot_segments` (RFC 3986 section 5.2.4) for a path starting with `/`;
/// empty segments are kept.
fn remove_dot_segments(path: &str) -> String {
    if !path.contains("/.") {
        return path.to_owned();
    }
    let segments: Vec<&str> = path[1..].split('/').collect();
    let mut output: Vec<&str> = Vec::with_capacity(segments.len());
    let (last, init) = segments.split_last().unwrap_or((&"", &[]));
    for &segment in init {
        if segment == ".." {
            output.pop();
        } else if segment != "." {
            output.push(segment);
        }
    }
    match *last {
        ".." => {
            output.pop();
            output.push("");
        }
        "." => output.push(""),
        other => output.push(other),
    }
    format!("/{}", output.join("/"))
}

/// `_split_params(scheme, path)`: only a `;` in the last segment starts the params.
fn split_params<'a>(scheme: &str, path: &'a str) -> (&'a str, &'a str) {
    if USES_PARAMS.contains(&scheme) {
        let from = path.rfind('/').map_or(0, |s| s + 1);
        if let Some(i) = path[from..].find(';') {
            return (&path[..from + i], &path[from + i + 1..]);
        }
    }
    (path, "")
}

/// `_parse_qsl(qs, keep_blank_values, b"&")`.
fn parse_qsl(qs: &str, keep_blank_values: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut result = Vec::new();
    for field in qs.split('&') {
        if field.is_empty() {
            continue;
        }
        let (key, value, has_sep) = match field.split_once('=') {
            Some((k, v)) => (k, v, true),
            None => (field, "", false),
        };
        if !keep_blank_values && (!has_sep || value.is_empty()) {
            continue;
        }
        result.push((unquote_plus(key.as_bytes()), unquote_plus(value.as_bytes())));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::host::python_idna_encode;
    use super::*;

    #[test]
    fn urlsplit_parts() {
        let p = urlsplit("HTTP://us:pw@Host:080/a/b;p?q=1#f").unwrap();
        assert_eq!(p.scheme, "http");
        assert_eq!(
            (p.netloc.as_str(), p.path.as_str(), p.query.as_str(), p.fragment.as_str()),
            ("us:pw@Host:080", "/a/b;p", "q=1", "f")
        );
        assert_eq!((p.username.as_deref(), p.password.as_deref()), (Some("us"), Some("pw")));
        assert_eq!((p.hostname.as_str(), p.port), ("host", Some(80)));
        let p = urlsplit("http://[::1]:8080/x").unwrap();
        assert_eq!((p.hostname.as_str(), p.port), ("::1", Some(8080)));
        assert!(urlsplit("http://h:99999/").is_err());
        assert!(urlsplit("http://h:8x/").is_err());
        // Not a scheme: starts with a digit, or has a non-scheme character before ':'.
        assert_eq!(urlsplit("1http://h").unwrap().scheme, "");
        assert_eq!(urlsplit("localhost:8080/x").unwrap().scheme, "localhost");
    }

    #[test]
    fn urlsplit_backslash_is_slash_in_special_schemes() {
        let p = urlsplit("http://h\\a\\b?x=\\").unwrap();
        assert_eq!((p.netloc.as_str(), p.path.as_str(), p.query.as_str()), ("h", "/a/b", "x=\\"));
        let p = urlsplit("foo://h\\a").unwrap();
        assert_eq!((p.netloc.as_str(), p.path.as_str()), ("h\\a", ""));
    }

    #[test]
    fn bracket_errors() {
        assert!(urlsplit("http://[::1]/").is_ok());
        assert!(urlsplit("http://[v1.x]/").is_ok());
        for bad in [
            "http://[::1/",
            "http://::1]/",
            "http://[1.2.3.4]/",
            "http://[example]/",
            "http://a[::1]/",
            "http://[::1]x/",
        ] {
            assert!(urlsplit(bad).is_err(), "{bad}");
        }
        assert!(urlsplit("http://[fe80::1%eth0]/").is_ok());
    }

    #[test]
    fn nfkc_check_rejects_hidden_delimiters() {
        // U+2100 ACCOUNT OF is "a/c" under NFKC.
        assert!(urlsplit("http://a\u{2100}b.com/").is_err());
        assert!(urlsplit("http://bücher.de/").is_ok());
    }

    #[test]
    fn idna_like_python() {
        let enc = |s: &str| python_idna_encode(s).map(Cow::into_owned);
        assert_eq!(enc("www.bücher.de").as_deref(), Some("www.xn--bcher-kva.de"));
        assert_eq!(enc("straße.de").as_deref(), Some("strasse.de"));
        assert_eq!(enc(".exämple.com"), None);
        assert_eq!(enc("exämple.com.").as_deref(), Some("xn--exmple-cua.com."));
        assert_eq!(enc("例え。テスト").as_deref(), Some("xn--r8jz45g.xn--zckzah"));
        assert_eq!(enc(".example.com"), None);
    }

    #[test]
    fn query_and_path_helpers() {
        assert_eq!(
            parse_qsl("a=1&b=&c&d=x+y%20z%2B&&", true),
            vec![
                (b"a".to_vec(), b"1".to_vec()),
                (b"b".to_vec(), b"".to_vec()),
                (b"c".to_vec(), b"".to_vec()),
                (b"d".to_vec(), b"x y z+".to_vec()),
            ]
        );
        assert_eq!(parse_qsl("a=1&b=&c", false).len(), 1);
        let mut v = Vec::new();
        quote_plus(b"a b~/\xC3\xA9", &mut v);
        assert_eq!(v, b"a+b~%2F%C3%A9");
        let mut v = Vec::new();
        unquote_path_requote(b"/a%2fb%3F%3b%41%25%e9%20x%5B", &mut v);
        assert_eq!(v, b"/a%2Fb%3F%3BA%25%E9%20x[");
        assert_eq!(remove_dot_segments("/a//../b"), "/a/b");
        assert_eq!(split_params("http", "/a;b/c;d;e"), ("/a;b/c", "d;e"));
        assert_eq!(split_params("ws", "/c;d"), ("/c;d", ""));
    }

    /// w3lib's `test_remove_dot_segments_rfc_examples`.
    #[test]
    fn remove_dot_segments_rfc_examples() {
        assert_eq!(remove_dot_segments("/a/b/c/./../../g"), "/a/g");
        assert_eq!(remove_dot_segments("/a/."), "/a/");
        assert_eq!(remove_dot_segments("/a/.."), "/");
        assert_eq!(remove_dot_segments("/.."), "/");
        assert_eq!(remove_dot_segments("/a//b"), "/a//b");
    }

    #[test]
    fn ipv6_host_text() {
        assert_eq!(normalize_ipv6_host("[::0:1]:80"), "[::1]:80");
        assert_eq!(normalize_ipv6_host("[2001:0DB8::0001]"), "[2001:db8::1]");
        assert_eq!(normalize_ipv6_host("[fe80::1%eth0]"), "[fe80::1%eth0]");
        assert_eq!(normalize_ipv6_host("[v1.x]"), "[v1.x]");
    }
}
