//! Redis-style glob matching (`stringmatchlen`), for `KEYS`, `SCAN MATCH` and
//! `COMMAND LIST FILTERBY PATTERN`.
//!
//! `*` matches any run of bytes, `?` any one byte, `[abc]`, `[a-z]` and `[^a-z]` a class, `\x`
//! the byte `x`. The match runs in O(pattern × text) time at worst, however many `*` the
//! pattern holds (Redis had to add a nesting limit to its recursive matcher for that).
//!
//! ```
//! use urlseen_server::glob::glob_match;
//!
//! assert!(glob_match(b"jobs:*", b"jobs:2024", false));
//! assert!(glob_match(b"h?llo", b"HELLO", true));
//! assert!(!glob_match(b"h[^e]llo", b"hello", false));
//! ```

/// Whether `text` matches `pattern`; `nocase` compares ASCII case-insensitively.
pub fn glob_match(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    let (mut p, mut t) = (0usize, 0usize);
    // Where to resume after the last `*`: the pattern position after it, and the text
    // position it currently absorbs up to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        let step = match pattern.get(p) {
            Some(b'*') => {
                // Collapse runs of `*`.
                while pattern.get(p) == Some(&b'*') {
                    p += 1;
                }
                if p == pattern.len() {
                    return true;
                }
                star = Some((p, t));
                continue;
            }
            Some(_) => match_one(pattern, p, text.get(t).copied().unwrap_or(0), nocase),
            None => None,
        };
        match step {
            Some(next_p) => {
                p = next_p;
                t += 1;
            }
            None => match star {
                // Let the last `*` absorb one more byte and retry from there.
                Some((sp, st)) => {
                    star = Some((sp, st + 1));
                    p = sp;
                    t = st + 1;
                }
                None => return false,
            },
        }
    }
    pattern.get(p..).unwrap_or_default().iter().all(|&c| c == b'*')
}

/// Matches one text byte against the pattern element at `p`; returns the position after the
/// element, or `None` if it does not match.
fn match_one(pattern: &[u8], p: usize, c: u8, nocase: bool) -> Option<usize> {
    let eq = |a: u8, b: u8| if nocase { a.eq_ignore_ascii_case(&b) } else { a == b };
    match pattern.get(p)? {
        b'?' => Some(p + 1),
        b'\\' if p + 1 < pattern.len() => eq(*pattern.get(p + 1)?, c).then_some(p + 2),
        b'[' => {
            let mut i = p + 1;
            let negate = pattern.get(i) == Some(&b'^');
            if negate {
                i += 1;
            }
            let mut matched = false;
            loop {
                match pattern.get(i) {
                    // An unterminated class runs to the end of the pattern, as in Redis.
                    None => {
                        i -= 1;
                        break;
                    }
                    Some(b']') => break,
                    Some(b'\\') if i + 1 < pattern.len() => {
                        i += 1;
                        matched |= pattern.get(i).is_some_and(|&x| eq(x, c));
                    }
                    Some(&lo) if pattern.get(i + 1) == Some(&b'-') && i + 2 < pattern.len() => {
                        let (mut lo, mut hi, mut cc) = (lo, *pattern.get(i + 2)?, c);
                        if nocase {
                            (lo, hi, cc) = (
                                lo.to_ascii_lowercase(),
                                hi.to_ascii_lowercase(),
                                cc.to_ascii_lowercase(),
                            );
                        }
                        if lo > hi {
                            std::mem::swap(&mut lo, &mut hi);
                        }
                        matched |= (lo..=hi).contains(&cc);
                        i += 2;
                    }
                    Some(&x) => matched |= eq(x, c),
                }
                i += 1;
            }
            (matched != negate).then_some(i + 1)
        }
        &x => eq(x, c).then_some(p + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn patterns() {
        let yes: &[(&str, &str)] = &[
            ("*", ""),
            ("*", "anything"),
            ("a*", "abc"),
            ("*c", "abc"),
            ("a*c", "ac"),
            ("a*b*c", "axxbyyc"),
            ("h?llo", "hello"),
            ("h[ae]llo", "hallo"),
            ("h[a-c]llo", "hbllo"),
            ("h[^e]llo", "hallo"),
            ("h\\*llo", "h*llo"),
            ("", ""),
            ("**a**", "xa"),
        ];
        for (p, t) in yes {
            assert!(glob_match(p.as_bytes(), t.as_bytes(), false), "{p} ~ {t}");
        }
        let no: &[(&str, &str)] = &[
            ("a*", "b"),
            ("a*c", "ab"),
            ("h?llo", "hllo"),
            ("h[^e]llo", "hello"),
            ("h[a-c]llo", "hdllo"),
            ("", "a"),
            ("abc", "ab"),
        ];
        for (p, t) in no {
            assert!(!glob_match(p.as_bytes(), t.as_bytes(), false), "{p} !~ {t}");
        }
        assert!(glob_match(b"HELLO*", b"hello world", true));
    }

    #[test]
    fn many_stars_are_not_exponential() {
        let pattern = "a*".repeat(50) + "b";
        let text = "a".repeat(5000);
        assert!(!glob_match(pattern.as_bytes(), text.as_bytes(), false));
    }
}
