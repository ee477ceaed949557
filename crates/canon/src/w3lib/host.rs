//! The netloc steps of the w3lib port: Python's `urlsplit` checks of a bracketed or
//! NFKC-changed netloc, `_safe_url_string`'s netloc (IDNA 2003 with nameprep, as Python's
//! `encodings.idna` does), and `_normalize_ipv6_host`.

use std::borrow::Cow;

use super::*;

/// w3lib's `_check_bracketed_netloc`.
pub(super) fn check_bracketed_netloc(netloc: &str) -> Result<(), CanonError> {
    let hostname_and_port = netloc.rsplit_once('@').map_or(netloc, |(_, h)| h);
    let hostname = match hostname_and_port.split_once('[') {
        Some((before, bracketed)) => {
            if !before.is_empty() {
                return Err(invalid("Invalid IPv6 URL: text before '['"));
            }
            let (hostname, port) = bracketed.split_once(']').unwrap_or((bracketed, ""));
            if !port.is_empty() && !port.starts_with(':') {
                return Err(invalid("Invalid IPv6 URL: text between ']' and the port"));
            }
            hostname
        }
        None => hostname_and_port.split_once(':').map_or(hostname_and_port, |(h, _)| h),
    };
    check_bracketed_host(hostname)
}

/// w3lib's `_check_bracketed_host`: an IPv6 address or an IPvFuture literal.
fn check_bracketed_host(hostname: &str) -> Result<(), CanonError> {
    if hostname.starts_with(['v', 'V']) {
        // _IPV_FUTURE_RE.fullmatch: \Av[a-fA-F0-9]+\..+\Z
        let ok = hostname.strip_prefix('v').and_then(|f| f.split_once('.')).is_some_and(
            |(hex, tail)| {
                !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) && !tail.is_empty()
            },
        );
        return if ok { Ok(()) } else { Err(invalid("IPvFuture address is invalid")) };
    }
    if python_ipv4(hostname) {
        return Err(invalid("An IPv4 address cannot be in brackets"));
    }
    if python_ipv6(hostname).is_some() {
        Ok(())
    } else {
        Err(invalid(format!(
            "'{}' does not appear to be an IPv4 or IPv6 address",
            crate::error::snippet(hostname)
        )))
    }
}

/// `ipaddress.IPv4Address(s)` accepts `s`: four decimal octets, no leading zeros.
fn python_ipv4(s: &str) -> bool {
    let mut n = 0;
    for octet in s.split('.') {
        n += 1;
        let ok = !octet.is_empty()
            && octet.len() <= 3
            && octet.bytes().all(|b| b.is_ascii_digit())
            && !(octet.len() > 1 && octet.starts_with('0'))
            && octet.parse::<u16>().is_ok_and(|v| v <= 255);
        if !ok {
            return false;
        }
    }
    n == 4
}

/// `ipaddress.IPv6Address(s)`: the address and its optional `%scope`.
fn python_ipv6(s: &str) -> Option<(std::net::Ipv6Addr, Option<&str>)> {
    let (addr, scope) = match s.split_once('%') {
        Some((addr, scope)) if !scope.is_empty() && !scope.contains('%') => (addr, Some(scope)),
        Some(_) => return None,
        None => (s, None),
    };
    addr.parse::<std::net::Ipv6Addr>().ok().map(|a| (a, scope))
}

/// w3lib's `_checknetloc`: a non-ASCII netloc must not gain URL delimiters under NFKC.
pub(super) fn check_netloc_nfkc(netloc: &str) -> Result<(), CanonError> {
    if netloc.is_ascii() {
        return Ok(());
    }
    let (cleaned, normalized) = nfkc_netloc(netloc);
    if cleaned != normalized && normalized.contains(['/', '?', '#', '@', ':', '\\']) {
        return Err(invalid(format!(
            "netloc '{}' contains invalid characters under NFKC normalization",
            crate::error::snippet(netloc)
        )));
    }
    Ok(())
}

/// w3lib's `_nfkc_netloc`: the netloc without `@:#?`, and its NFKC normalization.
fn nfkc_netloc(netloc: &str) -> (String, String) {
    let cleaned: String = netloc.chars().filter(|c| !matches!(c, '@' | ':' | '#' | '?')).collect();
    let normalized =
        icu_normalizer::ComposingNormalizerBorrowed::new_nfkc().normalize(&cleaned).into_owned();
    (cleaned, normalized)
}

/// The netloc `_safe_url_split` rebuilds: quoted userinfo, IDNA host, numeric port.
pub(super) fn safe_netloc(parts: &SplitResult) -> Result<String, CanonError> {
    let mut buf: Vec<u8> = Vec::with_capacity(parts.netloc.len() + 8);
    if let Some(user) = &parts.username {
        quote(&unquote(user.as_bytes()), &USERINFO_SAFEST, &mut buf);
        if let Some(pass) = &parts.password {
            buf.push(b':');
            quote(&unquote(pass.as_bytes()), &USERINFO_SAFEST, &mut buf);
        }
        buf.push(b'@');
    }
    let host = &parts.hostname;
    if host.contains(':') {
        if !host.is_ascii() {
            // Python: hostname.encode("ascii") raises UnicodeEncodeError.
            return Err(CanonError::InvalidHost {
                host: crate::error::snippet(host),
                reason: "a bracketed host must be ASCII".to_owned(),
            });
        }
        buf.push(b'[');
        buf.extend_from_slice(host.as_bytes());
        buf.push(b']');
    } else {
        match idna_host(host) {
            Some(ascii) => buf.extend_from_slice(ascii.as_bytes()),
            None => buf.extend_from_slice(host.as_bytes()),
        }
    }
    if let Some(port) = parts.port {
        buf.push(b':');
        buf.extend_from_slice(port.to_string().as_bytes());
    }
    // Only ASCII or slices of the UTF-8 input were pushed.
    let mut netloc = String::with_capacity(buf.len());
    push_utf8(&mut netloc, &buf);
    Ok(netloc)
}

/// w3lib's `_idna`: ASCII hosts unchanged, others NFKC-normalized (without `@:#?`) and encoded
/// with Python's `"idna"` codec; `None` where Python raises `UnicodeError`.
fn idna_host(host: &str) -> Option<Cow<'_, str>> {
    if host.is_ascii() {
        return Some(Cow::Borrowed(host));
    }
    let (_, normalized) = nfkc_netloc(host);
    python_idna_encode(&normalized).map(|s| Cow::Owned(s.into_owned()))
}

/// Python's `str.encode("idna")` (IDNA 2003 `ToASCII` per label), or `None` where Python
/// raises `UnicodeError`.
///
/// Nameprep (RFC 3491, Unicode 3.2 tables) is approximated by the UTS #46 mapping with IDNA 2003
/// handling of the deviation characters; the two agree on real-world names.
pub(super) fn python_idna_encode(name: &str) -> Option<Cow<'_, str>> {
    if name.is_empty() {
        return Some(Cow::Borrowed(name));
    }
    if name.is_ascii() {
        // The codec's fast path: only checks label lengths.
        let labels: Vec<&str> = name.split('.').collect();
        let (last, init) = labels.split_last()?;
        let ok = init.iter().all(|l| !l.is_empty() && l.len() < 64) && last.len() < 64;
        return ok.then_some(Cow::Borrowed(name));
    }
    let mut labels: Vec<&str> = name.split(['.', '\u{3002}', '\u{FF0E}', '\u{FF61}']).collect();
    let trailing_dot = labels.last().is_some_and(|l| l.is_empty());
    if trailing_dot {
        labels.pop();
    }
    let mut out = String::with_capacity(name.len() + 16);
    for label in labels {
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(&idna_label_to_ascii(label)?);
    }
    if trailing_dot {
        out.push('.');
    }
    Some(Cow::Owned(out))
}

/// `encodings.idna.ToASCII(label)`.
fn idna_label_to_ascii(label: &str) -> Option<String> {
    let fits = |l: &str| !l.is_empty() && l.len() < 64;
    if label.is_ascii() {
        return fits(label).then(|| label.to_owned());
    }
    let mapped = nameprep(label)?;
    if mapped.is_ascii() {
        return fits(&mapped).then_some(mapped);
    }
    if mapped.starts_with("xn--") {
        return None;
    }
    let ace = format!("xn--{}", idna::punycode::encode_str(&mapped)?);
    fits(&ace).then_some(ace)
}

/// Approximate RFC 3491 nameprep: table B.1 (map to nothing), IDNA 2003 case folding of the
/// UTS #46 deviation characters, then the UTS #46 mapping (case fold + NFKC) and validity, then
/// the RFC 3454 section 6 bidi rules.
fn nameprep(label: &str) -> Option<String> {
    let mut pre = String::with_capacity(label.len() + 2);
    for c in label.chars() {
        match c {
            // RFC 3454 table B.1: commonly mapped to nothing.
            '\u{00AD}'
            | '\u{034F}'
            | '\u{1806}'
            | '\u{180B}'..='\u{180D}'
            | '\u{200B}'
            | '\u{200C}'
            | '\u{200D}'
            | '\u{2060}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}' => {}
            // Table B.2 folds these; UTS #46 non-transitional processing keeps them.
            'ß' => pre.push_str("ss"),
            'ς' => pre.push('σ'),
            _ => pre.push(c),
        }
    }
    if pre.is_empty() {
        return Some(pre);
    }
    let (mapped, result) = idna::uts46::Uts46::new().to_unicode(
        pre.as_bytes(),
        idna::uts46::AsciiDenyList::EMPTY,
        idna::uts46::Hyphens::Allow,
    );
    result.ok()?;
    stringprep_bidi_ok(&mapped).then(|| mapped.into_owned())
}

/// RFC 3454 section 6: a string with a right-to-left character (bidi class R or AL) has no
/// left-to-right one (L), and starts and ends with a right-to-left one.
fn stringprep_bidi_ok(s: &str) -> bool {
    use icu_properties::CodePointMapData;
    use icu_properties::props::BidiClass;
    let bidi = CodePointMapData::<BidiClass>::new();
    let rtl = |c: char| matches!(bidi.get(c), BidiClass::RightToLeft | BidiClass::ArabicLetter);
    if !s.chars().any(rtl) {
        return true;
    }
    !s.chars().any(|c| bidi.get(c) == BidiClass::LeftToRight)
        && s.chars().next().is_some_and(rtl)
        && s.chars().next_back().is_some_and(rtl)
}

/// Python's `str.lower()`, without allocating for an already-lowercase ASCII string.
pub(super) fn python_lower(s: &str) -> Cow<'_, str> {
    if s.is_ascii() {
        if s.bytes().any(|b| b.is_ascii_uppercase()) {
            Cow::Owned(s.to_ascii_lowercase())
        } else {
            Cow::Borrowed(s)
        }
    } else {
        Cow::Owned(s.to_lowercase())
    }
}

/// w3lib's `_normalize_ipv6_host` on the host part: RFC 5952 text for a bracketed IPv6
/// address, as Python's `str(IPv6Address)` (3.13+: IPv4-mapped addresses end in dotted quad).
pub(super) fn normalize_ipv6_host(host: &str) -> Cow<'_, str> {
    let Some(start) = host.find('[') else {
        return Cow::Borrowed(host);
    };
    let Some(len) = host[start..].find(']') else {
        return Cow::Borrowed(host);
    };
    let end = start + len;
    match python_ipv6(&host[start + 1..end]) {
        Some((addr, scope)) => {
            let scope = scope.map(|s| format!("%{s}")).unwrap_or_default();
            Cow::Owned(format!("{}[{addr}{scope}]{}", &host[..start], &host[end + 1..]))
        }
        None => Cow::Borrowed(host),
    }
}
