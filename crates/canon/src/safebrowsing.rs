//! The `safebrowsing` profile: Google Safe Browsing v4 "URLs and Hashing" canonicalization.
//!
//! The steps, in the order of Google's text:
//!
//! 1. remove tab, CR and LF (not their escapes); remove the fragment;
//! 2. percent-unescape the whole URL repeatedly until it has no escapes left;
//! 3. host: internationalized names to Punycode, remove leading and trailing dots, collapse
//!    consecutive dots, normalize an IPv4 address written in any legal form (decimal, octal,
//!    hex, fewer than four parts) to dotted decimal, lowercase;
//! 4. path: resolve `/./` and `/../`, collapse runs of `/`;
//! 5. percent-escape every byte <= 0x20 or >= 0x7F, and `#` and `%` (uppercase hex).
//!
//! Where the text is silent this follows Google's own Go client (`google/safebrowsing`, file
//! `urls.go`): a missing scheme means `http`, userinfo and port are dropped, the query is kept
//! verbatim, and non-final IPv4 parts are taken modulo 256. Bracketed IPv6 hosts are normalized
//! as Google's current reference describes (RFC 5952 text; IPv4-mapped and NAT64 addresses become
//! the IPv4 address).

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::pct::{escape_at, push_escape, push_utf8};
use crate::{CanonError, MAX_URL_LEN};

/// Schemes this profile accepts (the web schemes, as in the other profiles).
const SCHEMES: &[&str] = &["http", "https", "ftp", "ws", "wss"];

pub(crate) fn canonicalize(input: &str, out: &mut String) -> Result<(), CanonError> {
    let trimmed = input.trim_ascii();
    if trimmed.is_empty() {
        return Err(CanonError::Empty);
    }
    if trimmed.len() > MAX_URL_LEN {
        return Err(CanonError::TooLong { len: trimmed.len(), max: MAX_URL_LEN });
    }
    // 1. Fragment first (an escaped '#' is data, not a delimiter), then tab/CR/LF.
    let no_fragment = trimmed.split_once('#').map_or(trimmed, |(u, _)| u);
    let mut url: Vec<u8> = if no_fragment.contains(['\t', '\r', '\n']) {
        no_fragment.bytes().filter(|b| !matches!(b, b'\t' | b'\r' | b'\n')).collect()
    } else {
        no_fragment.as_bytes().to_vec()
    };
    // 2. Each pass that changes anything shortens the URL, so this ends.
    let mut scratch = Vec::with_capacity(url.len());
    while unescape_once(&url, &mut scratch) {
        std::mem::swap(&mut url, &mut scratch);
    }
    let url = url.as_slice();

    let (scheme, rest) = split_scheme(url);
    let scheme = match scheme {
        Some(s) => {
            let s = String::from_utf8_lossy(s).to_ascii_lowercase();
            if !SCHEMES.contains(&s.as_str()) {
                return Err(CanonError::UnsupportedScheme { scheme: crate::error::snippet(&s) });
            }
            if !rest.starts_with(b"//") {
                return Err(CanonError::InvalidUrl {
                    reason: format!("\"{s}:\" must be followed by \"//\" and a host"),
                });
            }
            s
        }
        None => "http".to_owned(),
    };
    let rest = rest.strip_prefix(b"//").unwrap_or(rest);
    let (before_query, query) = match rest.iter().position(|&b| b == b'?') {
        Some(q) => (&rest[..q], Some(&rest[q + 1..])),
        None => (rest, None),
    };
    let host_end = before_query.iter().position(|&b| b == b'/').unwrap_or(before_query.len());
    let (authority, path) = before_query.split_at(host_end);

    let host = canonical_host(authority)?;
    let path = canonical_path(path);

    out.push_str(&scheme);
    out.push_str("://");
    let mut bytes = Vec::with_capacity(host.len() + path.len() + 16);
    escape_into(&host, &mut bytes);
    escape_into(&path, &mut bytes);
    if let Some(q) = query {
        bytes.push(b'?');
        escape_into(q, &mut bytes);
    }
    // Everything outside printable ASCII was escaped, so this is ASCII.
    push_utf8(out, &bytes);
    Ok(())
}

/// One percent-unescaping pass over `src` into `dst`; whether anything was unescaped.
fn unescape_once(src: &[u8], dst: &mut Vec<u8>) -> bool {
    if !src.contains(&b'%') {
        return false;
    }
    dst.clear();
    let mut changed = false;
    let mut i = 0;
    while i < src.len() {
        if src[i] == b'%'
            && let Some(v) = escape_at(src, i)
        {
            dst.push(v);
            i += 3;
            changed = true;
            continue;
        }
        dst.push(src[i]);
        i += 1;
    }
    changed
}

/// Splits off `scheme:` as Google's client does: letters, then letters, digits, `+ - .`, then
/// `:` not followed by a port number (`www.example.com:8080/` has no scheme).
fn split_scheme(url: &[u8]) -> (Option<&[u8]>, &[u8]) {
    for (i, &c) in url.iter().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i > 0 => {
                let after = &url[i + 1..];
                let digits = after.iter().take_while(|b| b.is_ascii_digit()).count();
                let is_port = digits > 0 && (digits == after.len() || after[digits] == b'/');
                if !is_port {
                    return (Some(&url[..i]), after);
                }
                // A port: keep scanning, the '/' after it ends the (absent) scheme.
            }
            _ => return (None, url),
        }
    }
    (None, url)
}

fn host_error(authority: &[u8], reason: &str) -> CanonError {
    CanonError::InvalidHost {
        host: crate::error::snippet(&String::from_utf8_lossy(authority)),
        reason: reason.to_owned(),
    }
}

/// The canonical host (unescaped bytes; escaping happens on output).
fn canonical_host(authority: &[u8]) -> Result<Vec<u8>, CanonError> {
    // Userinfo and port never take part in Safe Browsing lookups.
    let host = match authority.iter().rposition(|&b| b == b'@') {
        Some(at) => &authority[at + 1..],
        None => authority,
    };
    // Remove leading and trailing dots and collapse runs of dots; removing dots can expose a
    // port (`x:.` → `x:`), so repeat until neither step changes anything.
    let mut out = collapse_dots(strip_port(host));
    loop {
        let stripped = strip_port(&out);
        if stripped.len() == out.len() {
            break;
        }
        out = collapse_dots(stripped);
    }
    if out.first() == Some(&b'[') {
        let Some(close) = out.iter().position(|&b| b == b']') else {
            return Err(host_error(authority, "missing ']' after an IPv6 address"));
        };
        return Ok(canonical_ipv6(&out[1..close]));
    }
    // Internationalized names to Punycode (this also lowercases and maps full-width dots). The
    // result is used only if it is a plain host name (letters, digits, '-', '_', '.'): the
    // mapping can produce delimiters ('?' from U+FE16, '%' from U+FF05, or an ASCII '%' that
    // Punycode moves next to hex digits), which the next round would read differently, so the
    // URL would not be a fixed point. Such a host is not a valid name anyway; its bytes are
    // escaped as they are.
    if !out.is_ascii()
        && let Ok(s) = std::str::from_utf8(&out)
        && let Ok(ascii) = idna::domain_to_ascii_cow(s.as_bytes(), idna::AsciiDenyList::EMPTY)
        && ascii.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        out = collapse_dots(ascii.as_bytes());
    }
    if out.is_empty() {
        return Err(host_error(authority, "missing host name"));
    }
    if let Some(ip) = parse_ipv4(&out) {
        return Ok(ip.to_string().into_bytes());
    }
    out.make_ascii_lowercase();
    Ok(out)
}

/// `host` without a `:port` (everything from the first ':' when only digits follow it).
fn strip_port(host: &[u8]) -> &[u8] {
    match host.iter().position(|&b| b == b':') {
        Some(colon) if host[colon + 1..].iter().all(u8::is_ascii_digit) => &host[..colon],
        _ => host,
    }
}

/// Labels of `host` joined by single dots: no leading, trailing or repeated dots.
fn collapse_dots(host: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(host.len());
    for label in host.split(|&b| b == b'.').filter(|l| !l.is_empty()) {
        if !out.is_empty() {
            out.push(b'.');
        }
        out.extend_from_slice(label);
    }
    out
}

/// A bracketed IPv6 host, normalized: RFC 5952 text, IPv4-mapped and NAT64 (`64:ff9b::/96`)
/// addresses as their IPv4 address. Text that is not an IPv6 address is only lowercased.
fn canonical_ipv6(inner: &[u8]) -> Vec<u8> {
    let parsed = std::str::from_utf8(inner).ok().and_then(|s| s.parse::<Ipv6Addr>().ok());
    match parsed {
        Some(ip) => {
            let seg = ip.segments();
            if let Some(v4) = ip.to_ipv4_mapped() {
                v4.to_string().into_bytes()
            } else if seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                let [a, b] = seg[6].to_be_bytes();
                let [c, d] = seg[7].to_be_bytes();
                Ipv4Addr::new(a, b, c, d).to_string().into_bytes()
            } else {
                format!("[{ip}]").into_bytes()
            }
        }
        None => {
            let mut v = Vec::with_capacity(inner.len() + 2);
            v.push(b'[');
            v.extend(inner.iter().map(u8::to_ascii_lowercase));
            v.push(b']');
            v
        }
    }
}

/// Any legal IPv4 spelling (1 to 4 parts, each decimal, octal `0…` or hex `0x…`) as an address.
///
/// As Google's client: the host must consist of `0x`-hex runs, digits and dots only; the last
/// part fills the remaining bytes; other parts are taken modulo 256. Windows resolver quirk:
/// a dotted quad followed by a space and anything, 15 bytes at most, is that address.
fn parse_ipv4(host: &[u8]) -> Option<Ipv4Addr> {
    let mut host = host;
    if host.len() <= 15
        && let Some(sp) = host.iter().position(|&b| b == b' ')
        && is_dotted_quad_shape(&host[..sp])
    {
        host = &host[..sp];
    }
    if !looks_numeric(host) {
        return None;
    }
    let parts: Vec<&[u8]> = host.split(|&b| b == b'.').collect();
    if parts.len() > 4 {
        return None;
    }
    let mut bytes = [0u8; 4];
    let mut filled = 0;
    for (i, part) in parts.iter().enumerate() {
        let v = parse_ip_number(part)?;
        if i + 1 == parts.len() {
            let width = 4 - filled;
            let be = v.to_be_bytes();
            bytes[filled..].copy_from_slice(&be[4 - width..]);
        } else {
            bytes[filled] = (v & 0xFF) as u8;
            filled += 1;
        }
    }
    Some(Ipv4Addr::from(bytes))
}

/// `\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`
fn is_dotted_quad_shape(s: &[u8]) -> bool {
    let mut n = 0;
    for part in s.split(|&b| b == b'.') {
        n += 1;
        if part.is_empty() || part.len() > 3 || !part.iter().all(u8::is_ascii_digit) {
            return false;
        }
    }
    n == 4
}

/// `^(?i)((?:0x[0-9a-f]+|[0-9\.])+)$`
fn looks_numeric(s: &[u8]) -> bool {
    if s.is_empty() {
        return false;
    }
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'0'
            && matches!(s.get(i + 1), Some(b'x' | b'X'))
            && s.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
        {
            i += 2;
            while i < s.len() && s[i].is_ascii_hexdigit() {
                i += 1;
            }
        } else if s[i].is_ascii_digit() || s[i] == b'.' {
            i += 1;
        } else {
            return false;
        }
    }
    true
}

/// Go's `strconv.ParseUint(s, 0, 32)` for the shapes [`looks_numeric`] lets through.
fn parse_ip_number(s: &[u8]) -> Option<u32> {
    let text = std::str::from_utf8(s).ok()?;
    let (digits, radix) = if let Some(hex) = text.strip_prefix("0x").or(text.strip_prefix("0X")) {
        (hex, 16)
    } else if text.len() > 1 && text.starts_with('0') {
        (&text[1..], 8)
    } else {
        (text, 10)
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, radix).ok()
}

/// Resolves `.` and `..` segments and collapses runs of `/`. A trailing `.` or `..` segment
/// leaves a trailing slash, as in browsers (`/a/b/..` → `/a/`).
fn canonical_path(path: &[u8]) -> Vec<u8> {
    let mut segments: Vec<&[u8]> = Vec::new();
    let mut trailing_slash = true;
    for seg in path.split(|&b| b == b'/') {
        match seg {
            b"" => trailing_slash = true,
            b"." => trailing_slash = true,
            b".." => {
                segments.pop();
                trailing_slash = true;
            }
            _ => {
                segments.push(seg);
                trailing_slash = false;
            }
        }
    }
    let mut out = Vec::with_capacity(path.len() + 1);
    for seg in &segments {
        out.push(b'/');
        out.extend_from_slice(seg);
    }
    if trailing_slash || out.is_empty() {
        out.push(b'/');
    }
    out
}

/// Step 5: escape bytes <= 0x20, >= 0x7F, `#` and `%`.
fn escape_into(src: &[u8], out: &mut Vec<u8>) {
    let needs_escape = |b: u8| b <= 0x20 || b >= 0x7F || b == b'#' || b == b'%';
    let mut rest = src;
    while let Some(i) = rest.iter().position(|&b| needs_escape(b)) {
        out.extend_from_slice(&rest[..i]);
        push_escape(out, rest[i]);
        rest = &rest[i + 1..];
    }
    out.extend_from_slice(rest);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<String> {
        parse_ipv4(s.as_bytes()).map(|a| a.to_string())
    }

    #[test]
    fn ipv4_forms_from_googles_client() {
        // The vectors of TestParseIPAddress in google/safebrowsing urls_test.go.
        assert_eq!(ip("123.123.0.0.1"), None);
        assert_eq!(ip("255.0.0.1").as_deref(), Some("255.0.0.1"));
        assert_eq!(ip("12.0x12.01234").as_deref(), Some("12.18.2.156"));
        assert_eq!(ip("276.2.3").as_deref(), Some("20.2.0.3"));
        assert_eq!(ip("012.034.01.055").as_deref(), Some("10.28.1.45"));
        assert_eq!(ip("0x12.0x43.0x44.0x01").as_deref(), Some("18.67.68.1"));
        assert_eq!(ip("167838211").as_deref(), Some("10.1.2.3"));
        assert_eq!(ip("3279880203").as_deref(), Some("195.127.0.11"));
        assert_eq!(ip("4294967295").as_deref(), Some("255.255.255.255"));
        assert_eq!(ip("10.192.95.89 xy").as_deref(), Some("10.192.95.89"));
        assert_eq!(ip("1.2.3.00x0"), None);
        assert_eq!(ip("4294967296"), None);
        assert_eq!(ip("08.1.1.1"), None);
        assert_eq!(ip("example.com"), None);
    }

    #[test]
    fn ipv6_forms() {
        assert_eq!(canonical_ipv6(b"2001:0db8:0000::1"), b"[2001:db8::1]");
        assert_eq!(canonical_ipv6(b"::ffff:1.2.3.4"), b"1.2.3.4");
        assert_eq!(canonical_ipv6(b"64:ff9b::1.2.3.4"), b"1.2.3.4");
        assert_eq!(canonical_ipv6(b"FEDC:BA98::"), b"[fedc:ba98::]");
        assert_eq!(canonical_ipv6(b"NOT-IP"), b"[not-ip]");
    }

    #[test]
    fn path_resolution() {
        let p = |s: &str| String::from_utf8(canonical_path(s.as_bytes())).unwrap();
        assert_eq!(p(""), "/");
        assert_eq!(p("/"), "/");
        assert_eq!(p("/foo/.././bar/./../foo.html"), "/foo.html");
        assert_eq!(p("//a//b///c////"), "/a/b/c/");
        assert_eq!(p("/a/b/.."), "/a/");
        assert_eq!(p("/a/b/."), "/a/b/");
        assert_eq!(p("/../.."), "/");
        assert_eq!(p("/a/b"), "/a/b");
        assert_eq!(p("/.secure"), "/.secure");
    }

    #[test]
    fn scheme_detection() {
        assert_eq!(split_scheme(b"http://x").0, Some(&b"http"[..]));
        assert_eq!(split_scheme(b"www.google.com:80/").0, None);
        assert_eq!(split_scheme(b"www.google.com:80").0, None);
        assert_eq!(split_scheme(b"mailto:x@y").0, Some(&b"mailto"[..]));
        assert_eq!(split_scheme(b"/blah").0, None);
        assert_eq!(split_scheme(b":").0, None);
    }
}
