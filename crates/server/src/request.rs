//! Framing of client requests, exactly as Redis frames them.
//!
//! A request is either a RESP array of bulk strings (`*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n`, what
//! every client library sends) or an *inline* command, a line of text (`ECHO hi\r\n`, what a
//! person types into telnet). Like Redis, anything that does not start with `*` is inline.
//!
//! The parser is incremental: it consumes complete arguments from the read buffer as they
//! arrive and remembers where it is, so a large request received in many reads is scanned once.
//! Arguments are zero-copy slices of the read buffer.
//!
//! Inline lines are split with Redis' `sdssplitargs` rules: arguments are separated by
//! whitespace; `"double quotes"` understand `\n`, `\r`, `\t`, `\b`, `\a`, `\xHH` and `\<any>`;
//! `'single quotes'` understand only `\'`; a closing quote must be followed by whitespace or the
//! end of the line; a NUL byte ends the line.

use bytes::{Buf, Bytes, BytesMut};

use crate::config::{
    INLINE_MAX_LEN, Limits, UNAUTHENTICATED_MAX_ARGS, UNAUTHENTICATED_MAX_BULK_LEN,
};
use crate::error::ProtocolError;
use crate::frame::parse_i64;

/// Turns a read buffer into requests, one at a time.
#[derive(Debug, Default)]
pub struct RequestParser {
    state: State,
    /// Bytes of arguments already taken out of the buffer for the request in progress.
    held: usize,
}

#[derive(Debug, Default)]
enum State {
    #[default]
    Idle,
    Multibulk {
        /// Arguments still to read.
        remaining: usize,
        args: Vec<Bytes>,
        /// The length of the bulk whose `$<n>` line has been read.
        bulk_len: Option<usize>,
    },
}

impl RequestParser {
    /// A parser between requests.
    pub fn new() -> RequestParser {
        RequestParser::default()
    }

    /// Takes the next complete request out of `buf`.
    ///
    /// Returns `Ok(None)` when `buf` holds no complete request yet (read more), and
    /// `Ok(Some(args))` for a request; `args` is empty for the requests Redis ignores silently
    /// (an empty line, `*0`, `*-1`). `authenticated` applies Redis' tighter limits to clients
    /// that have not authenticated yet (only relevant when a password is set).
    ///
    /// # Errors
    /// A [`ProtocolError`] when the bytes cannot be a request; the connection must be closed
    /// after replying with it.
    pub fn parse(
        &mut self,
        buf: &mut BytesMut,
        limits: &Limits,
        authenticated: bool,
    ) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        loop {
            match &mut self.state {
                State::Idle => {
                    let Some(&first) = buf.first() else { return Ok(None) };
                    if first != b'*' {
                        return parse_inline(buf);
                    }
                    let Some(line) = header_line(buf, ProtocolError::TooBigMultibulkCount)? else {
                        return Ok(None);
                    };
                    let n = line
                        .get(1..)
                        .and_then(parse_i64)
                        .filter(|&n| usize::try_from(n).map_or(n < 0, |n| n <= limits.max_args))
                        .ok_or(ProtocolError::InvalidMultibulkLength)?;
                    if !authenticated && n > UNAUTHENTICATED_MAX_ARGS as i64 {
                        return Err(ProtocolError::UnauthenticatedMultibulkLength);
                    }
                    let consumed = line.len() + 2;
                    buf.advance(consumed);
                    let Ok(n @ 1..) = usize::try_from(n) else { return Ok(Some(Vec::new())) };
                    self.state = State::Multibulk {
                        remaining: n,
                        args: Vec::with_capacity(n.min(1024)),
                        bulk_len: None,
                    };
                    self.held = 0;
                }
                State::Multibulk { remaining, args, bulk_len } => {
                    let len = match *bulk_len {
                        Some(len) => len,
                        None => {
                            let Some(line) = header_line(buf, ProtocolError::TooBigBulkCount)?
                            else {
                                return Ok(None);
                            };
                            match line.first() {
                                Some(b'$') => {}
                                Some(&other) => return Err(ProtocolError::ExpectedBulk(other)),
                                None => return Err(ProtocolError::ExpectedBulk(b'\r')),
                            }
                            let len = line
                                .get(1..)
                                .and_then(parse_i64)
                                .and_then(|n| usize::try_from(n).ok())
                                .filter(|&n| n <= limits.max_bulk_len)
                                .ok_or(ProtocolError::InvalidBulkLength)?;
                            if !authenticated && len > UNAUTHENTICATED_MAX_BULK_LEN {
                                return Err(ProtocolError::UnauthenticatedBulkLength);
                            }
                            let consumed = line.len() + 2;
                            buf.advance(consumed);
                            *bulk_len = Some(len);
                            len
                        }
                    };
                    let Some(end) = len.checked_add(2) else {
                        return Err(ProtocolError::InvalidBulkLength);
                    };
                    match buf.get(len..end) {
                        Some(b"\r\n") => {}
                        Some(_) => return Err(ProtocolError::MissingCrlf),
                        None => return Ok(None),
                    }
                    let arg = buf.split_to(len).freeze();
                    buf.advance(2);
                    args.push(arg);
                    self.held += len;
                    *bulk_len = None;
                    *remaining -= 1;
                    if *remaining == 0 {
                        let args = std::mem::take(args);
                        self.state = State::Idle;
                        self.held = 0;
                        return Ok(Some(args));
                    }
                }
            }
        }
    }

    /// Bytes of the request in progress already taken out of the buffer; with the buffer's
    /// length, this is the client's query buffer.
    pub fn held_bytes(&self) -> usize {
        self.held
    }

    /// How many more bytes the bulk being read needs, if one is being read: lets the
    /// connection read a big argument in few, large reads.
    pub fn wanted(&self, buffered: usize) -> Option<usize> {
        match self.state {
            State::Multibulk { bulk_len: Some(len), .. } => (len + 2).checked_sub(buffered),
            _ => None,
        }
    }
}

/// The `*<n>` / `$<n>` line at the start of `buf`, without its CRLF; `None` if it is not
/// complete. Only the first 64 KiB are searched, as Redis does.
fn header_line(buf: &BytesMut, too_big: ProtocolError) -> Result<Option<&[u8]>, ProtocolError> {
    let window = buf.get(..buf.len().min(INLINE_MAX_LEN + 2)).unwrap_or_default();
    match memchr::memchr(b'\r', window) {
        None if buf.len() > INLINE_MAX_LEN => Err(too_big),
        None => Ok(None),
        // Redis then takes the next byte as the LF without looking; wait for it likewise.
        Some(cr) if cr + 1 >= buf.len() => Ok(None),
        Some(cr) => Ok(buf.get(..cr)),
    }
}

fn parse_inline(buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let window = buf.get(..buf.len().min(INLINE_MAX_LEN + 1)).unwrap_or_default();
    let Some(nl) = memchr::memchr(b'\n', window) else {
        return if buf.len() > INLINE_MAX_LEN {
            Err(ProtocolError::TooBigInline)
        } else {
            Ok(None)
        };
    };
    let line = window.get(..nl).unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let args = split_args(line).ok_or(ProtocolError::UnbalancedQuotes)?;
    buf.advance(nl + 1);
    Ok(Some(args))
}

/// C's `isspace` in the C locale.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

fn hex_value(c: u8) -> Option<u8> {
    char::from(c).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

/// Redis' `sdssplitargs`: `None` for unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Bytes>> {
    // The C code works on a NUL-terminated string.
    let line = memchr::memchr(0, line).map_or(line, |nul| line.get(..nul).unwrap_or_default());
    let at = |i: usize| line.get(i).copied();
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while at(i).is_some_and(is_space) {
            i += 1;
        }
        if at(i).is_none() {
            return Some(args);
        }
        let mut current = Vec::new();
        let (mut in_double, mut in_single, mut done) = (false, false, false);
        while !done {
            let c = at(i);
            if in_double {
                match c {
                    Some(b'\\') if at(i + 1) == Some(b'x') => {
                        match (at(i + 2).and_then(hex_value), at(i + 3).and_then(hex_value)) {
                            (Some(hi), Some(lo)) => {
                                current.push(hi * 16 + lo);
                                i += 3;
                            }
                            _ => {
                                // Not a hex escape: `\x` is just an escaped `x`.
                                i += 1;
                                current.push(b'x');
                            }
                        }
                    }
                    Some(b'\\') if at(i + 1).is_some() => {
                        i += 1;
                        current.push(match at(i) {
                            Some(b'n') => b'\n',
                            Some(b'r') => b'\r',
                            Some(b't') => b'\t',
                            Some(b'b') => 0x08,
                            Some(b'a') => 0x07,
                            Some(other) => other,
                            None => return None,
                        });
                    }
                    Some(b'"') => {
                        if at(i + 1).is_some_and(|n| !is_space(n)) {
                            return None;
                        }
                        done = true;
                    }
                    None => return None,
                    Some(other) => current.push(other),
                }
            } else if in_single {
                match c {
                    Some(b'\\') if at(i + 1) == Some(b'\'') => {
                        i += 1;
                        current.push(b'\'');
                    }
                    Some(b'\'') => {
                        if at(i + 1).is_some_and(|n| !is_space(n)) {
                            return None;
                        }
                        done = true;
                    }
                    None => return None,
                    Some(other) => current.push(other),
                }
            } else {
                match c {
                    Some(b' ' | b'\n' | b'\r' | b'\t') | None => done = true,
                    Some(b'"') => in_double = true,
                    Some(b'\'') => in_single = true,
                    Some(other) => current.push(other),
                }
            }
            if at(i).is_some() {
                i += 1;
            }
        }
        args.push(Bytes::from(current));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(args: &[Bytes]) -> Vec<String> {
        args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect()
    }

    fn split(s: &str) -> Option<Vec<String>> {
        split_args(s.as_bytes()).map(|a| strs(&a))
    }

    fn parse_one(bytes: &[u8]) -> Result<Option<Vec<String>>, ProtocolError> {
        let mut buf = BytesMut::from(bytes);
        RequestParser::new().parse(&mut buf, &Limits::default(), true).map(|o| o.map(|a| strs(&a)))
    }

    #[test]
    fn inline_splitting_follows_sdssplitargs() {
        assert_eq!(split("PING"), Some(vec!["PING".into()]));
        assert_eq!(split("  ECHO   hello  "), Some(vec!["ECHO".into(), "hello".into()]));
        assert_eq!(split(""), Some(vec![]));
        assert_eq!(
            split("set \"a b\" 'c d'"),
            Some(vec!["set".into(), "a b".into(), "c d".into()])
        );
        assert_eq!(split(r#""\x41\n\t\"\\" x"#), Some(vec!["A\n\t\"\\".into(), "x".into()]));
        assert_eq!(split(r#""\xZZ""#), Some(vec!["xZZ".into()]));
        assert_eq!(split(r"'it\'s' 'a\nb'"), Some(vec!["it's".into(), "a\\nb".into()]));
        assert_eq!(split("foo\"bar baz\""), Some(vec!["foobar baz".into()]));
        assert_eq!(split("\"unterminated"), None);
        assert_eq!(split("'unterminated"), None);
        assert_eq!(split("\"a\"b"), None);
        assert_eq!(split("a\0b c"), Some(vec!["a".into()]));
    }

    #[test]
    fn multibulk_and_inline_requests() {
        assert_eq!(
            parse_one(b"*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n"),
            Ok(Some(vec!["ECHO".into(), "hi".into()]))
        );
        assert_eq!(parse_one(b"ECHO hi\r\n"), Ok(Some(vec!["ECHO".into(), "hi".into()])));
        assert_eq!(parse_one(b"PING\n"), Ok(Some(vec!["PING".into()])));
        assert_eq!(parse_one(b"\r\n"), Ok(Some(vec![])));
        assert_eq!(parse_one(b"*0\r\n"), Ok(Some(vec![])));
        assert_eq!(parse_one(b"*-1\r\n"), Ok(Some(vec![])));
        assert_eq!(parse_one(b"*1\r\n$0\r\n\r\n"), Ok(Some(vec!["".into()])));
    }

    #[test]
    fn malformed_requests_are_redis_protocol_errors() {
        use ProtocolError::*;
        let cases: &[(&[u8], ProtocolError)] = &[
            (b"*x\r\n", InvalidMultibulkLength),
            (b"*01\r\n", InvalidMultibulkLength),
            (b"*-2x\r\n", InvalidMultibulkLength),
            (b"*1\r\n:1\r\n", ExpectedBulk(b':')),
            (b"*1\r\n$-1\r\n", InvalidBulkLength),
            (b"*1\r\n$abc\r\n", InvalidBulkLength),
            (b"*1\r\n$3\r\nabcd\r\n", MissingCrlf),
            (b"SET \"a\r\n", UnbalancedQuotes),
        ];
        for (bytes, err) in cases {
            assert_eq!(parse_one(bytes).as_ref(), Err(err), "{}", String::from_utf8_lossy(bytes));
        }
        let limits = Limits { max_args: 2, max_bulk_len: 3, ..Limits::default() };
        let mut p = RequestParser::new();
        assert_eq!(
            p.parse(&mut BytesMut::from(&b"*3\r\n"[..]), &limits, true),
            Err(InvalidMultibulkLength)
        );
        let mut p = RequestParser::new();
        assert_eq!(
            p.parse(&mut BytesMut::from(&b"*1\r\n$4\r\n"[..]), &limits, true),
            Err(InvalidBulkLength)
        );
        let long = vec![b'a'; INLINE_MAX_LEN + 1];
        assert_eq!(
            RequestParser::new().parse(&mut BytesMut::from(&long[..]), &limits, true),
            Err(TooBigInline)
        );
        let mut star = b"*".to_vec();
        star.extend_from_slice(&long);
        assert_eq!(
            RequestParser::new().parse(&mut BytesMut::from(&star[..]), &limits, true),
            Err(TooBigMultibulkCount)
        );
        let mut dollar = b"*1\r\n$".to_vec();
        dollar.extend_from_slice(&long);
        assert_eq!(
            RequestParser::new().parse(&mut BytesMut::from(&dollar[..]), &limits, true),
            Err(TooBigBulkCount)
        );
    }

    #[test]
    fn unauthenticated_clients_get_redis_tighter_limits() {
        let l = Limits::default();
        let mut p = RequestParser::new();
        assert_eq!(
            p.parse(&mut BytesMut::from(&b"*11\r\n"[..]), &l, false),
            Err(ProtocolError::UnauthenticatedMultibulkLength)
        );
        let mut p = RequestParser::new();
        assert_eq!(
            p.parse(&mut BytesMut::from(&b"*1\r\n$16385\r\n"[..]), &l, false),
            Err(ProtocolError::UnauthenticatedBulkLength)
        );
        let mut p = RequestParser::new();
        assert!(p.parse(&mut BytesMut::from(&b"*10\r\n$16384\r\n"[..]), &l, false).is_ok());
    }

    #[test]
    fn a_request_split_at_every_byte_parses_the_same() {
        let whole: &[u8] =
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\nPING\r\n*1\r\n$4\r\nPING\r\n";
        let want = vec![vec!["SET", "k", "hello"], vec!["PING"], vec!["PING"]];
        for cut in 0..=whole.len() {
            let mut p = RequestParser::new();
            let mut buf = BytesMut::new();
            let mut got = Vec::new();
            for chunk in [&whole[..cut], &whole[cut..]] {
                buf.extend_from_slice(chunk);
                while let Some(args) = p.parse(&mut buf, &Limits::default(), true).unwrap() {
                    got.push(strs(&args));
                }
            }
            assert_eq!(got, want, "cut at {cut}");
            assert!(buf.is_empty());
            assert_eq!(p.held_bytes(), 0);
        }
        // Byte by byte too.
        let mut p = RequestParser::new();
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for b in whole {
            buf.extend_from_slice(&[*b]);
            while let Some(args) = p.parse(&mut buf, &Limits::default(), true).unwrap() {
                got.push(strs(&args));
            }
        }
        assert_eq!(got, want);
    }

    #[test]
    fn held_bytes_and_wanted_track_a_big_argument() {
        let mut p = RequestParser::new();
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nabc\r\n$10\r\n12345"[..]);
        assert_eq!(p.parse(&mut buf, &Limits::default(), true), Ok(None));
        assert_eq!(p.held_bytes(), 3);
        assert_eq!(p.wanted(buf.len()), Some(7));
    }

    /// Every request in `chunks`, fed one after the other, and whether it ended in an error.
    fn requests(chunks: &[&[u8]], authenticated: bool) -> (Vec<Vec<Bytes>>, Option<ProtocolError>) {
        let limits =
            Limits { max_args: 8, max_bulk_len: 64, max_query_buffer: 1024, ..Limits::default() };
        let mut p = RequestParser::new();
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for chunk in chunks {
            buf.extend_from_slice(chunk);
            loop {
                match p.parse(&mut buf, &limits, authenticated) {
                    Ok(Some(args)) => out.push(args),
                    Ok(None) => break,
                    Err(e) => return (out, Some(e)),
                }
            }
        }
        (out, None)
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_and_splits_do_not_matter(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512),
            split in proptest::num::usize::ANY,
            authenticated in proptest::bool::ANY,
        ) {
            let split = split % (bytes.len() + 1);
            let whole = requests(&[&bytes], authenticated);
            let (head, tail) = bytes.split_at(split);
            proptest::prop_assert_eq!(whole, requests(&[head, tail], authenticated));
        }

        #[test]
        fn resp_shaped_requests_split_anywhere(
            parts in proptest::collection::vec(proptest::sample::select(vec![
                &b"*"[..], b"$", b"1", b"2", b"3", b"0", b"-1", b"\r\n", b"\r", b"\n", b"PING", b" ",
                b"\"", b"'", b"\\x41", b"ab", b":",
            ]), 0..48),
            split in proptest::num::usize::ANY,
        ) {
            let bytes = parts.concat();
            let split = split % (bytes.len() + 1);
            let (head, tail) = bytes.split_at(split);
            proptest::prop_assert_eq!(requests(&[&bytes], true), requests(&[head, tail], true));
        }
    }
}
