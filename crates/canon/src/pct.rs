//! Percent-encoding primitives shared by the profiles.

/// `%XX` for every byte, uppercase hex: `HEX[3 * b..3 * b + 3]`.
const UPPER_HEX_DIGITS: &[u8; 16] = b"0123456789ABCDEF";

/// The value of an ASCII hex digit, either case.
#[inline]
pub(crate) fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Decodes the escape starting at `bytes[i]` (which must be `%`), if two hex digits follow.
#[inline]
pub(crate) fn escape_at(bytes: &[u8], i: usize) -> Option<u8> {
    let hi = hex_val(*bytes.get(i + 1)?)?;
    let lo = hex_val(*bytes.get(i + 2)?)?;
    Some(hi << 4 | lo)
}

/// RFC 3986 section 2.3 unreserved characters: `ALPHA DIGIT - . _ ~`.
#[inline]
pub(crate) fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Appends `%XX` (uppercase) for `b`.
#[inline]
pub(crate) fn push_escape(out: &mut Vec<u8>, b: u8) {
    out.extend_from_slice(&[
        b'%',
        UPPER_HEX_DIGITS[usize::from(b >> 4)],
        UPPER_HEX_DIGITS[usize::from(b & 0xF)],
    ]);
}

/// Appends `%XX` (uppercase) for `b` to a `String`.
#[inline]
pub(crate) fn push_escape_str(out: &mut String, b: u8) {
    out.push('%');
    out.push(char::from(UPPER_HEX_DIGITS[usize::from(b >> 4)]));
    out.push(char::from(UPPER_HEX_DIGITS[usize::from(b & 0xF)]));
}

/// Appends bytes that are UTF-8 by construction (escaped output is ASCII); a lossy conversion
/// is the fallback, never a panic.
#[inline]
pub(crate) fn push_utf8(out: &mut String, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(s) => out.push_str(s),
        Err(_) => out.push_str(&String::from_utf8_lossy(bytes)),
    }
}

/// Appends `src` with its escapes normalized per RFC 3986 section 6.2.2: an escape of an
/// unreserved character is decoded (`%7E` → `~`), every other escape gets uppercase hex
/// (`%2f` → `%2F`). A `%` not followed by two hex digits is copied as is.
///
/// Decoding only unreserved characters keeps every delimiter (`/ ? & = #` …) exactly as it was,
/// so the result addresses the same resource.
pub(crate) fn normalize_escapes(src: &str, out: &mut String) {
    let bytes = src.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while let Some(off) = bytes[i..].iter().position(|&b| b == b'%') {
        let pct = i + off;
        match escape_at(bytes, pct) {
            Some(v) => {
                out.push_str(&src[start..pct]);
                if is_unreserved(v) {
                    out.push(char::from(v));
                } else {
                    push_escape_str(out, v);
                }
                i = pct + 3;
                start = i;
            }
            None => i = pct + 1,
        }
    }
    out.push_str(&src[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(s: &str) -> String {
        let mut out = String::new();
        normalize_escapes(s, &mut out);
        out
    }

    #[test]
    fn uppercases_and_decodes_unreserved() {
        assert_eq!(norm("/a%2fb%7e%41%2D%5f%2E"), "/a%2Fb~A-_.");
        assert_eq!(norm("%c3%a9"), "%C3%A9");
        assert_eq!(norm("/plain"), "/plain");
    }

    #[test]
    fn keeps_broken_escapes() {
        assert_eq!(norm("%"), "%");
        assert_eq!(norm("%4"), "%4");
        assert_eq!(norm("%zz%41"), "%zzA");
        assert_eq!(norm("%%41"), "%A");
        assert_eq!(norm("100%"), "100%");
    }

    #[test]
    fn escape_helpers() {
        let mut v = Vec::new();
        push_escape(&mut v, 0xAB);
        push_escape(&mut v, 0x01);
        assert_eq!(v, b"%AB%01");
        assert_eq!(escape_at(b"%4", 0), None);
        assert_eq!(escape_at(b"%4a", 0), Some(0x4A));
    }
}
