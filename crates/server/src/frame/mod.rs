//! RESP values: the [`Frame`] enum, its parser and its encoder.
//!
//! One `Frame` type covers RESP2 and RESP3. Replies are built once, in their RESP3 shape, and
//! [`Frame::encode`] writes them for the protocol the client negotiated: a RESP2 client gets
//! them downgraded the way Redis downgrades its own replies (a map becomes a flat array, a null
//! becomes `$-1` or `*-1`, a boolean becomes `:1`/`:0`, a double becomes a bulk string, …).
//!
//! The parser ([`Frame::check`], [`Frame::parse`]) reads any RESP2 or RESP3 value from a byte
//! buffer. A frame that is not complete yet is [`FrameError::Incomplete`], the normal state of a
//! buffer that is still being filled; everything else is a typed protocol error. The parser never
//! panics, never indexes without a bound check and limits nesting depth, bulk length and element
//! counts ([`FrameLimits`]), so it is safe on hostile bytes.
//!
//! The server reads *requests* with the stricter, Redis-exact parser in
//! [`request`](crate::request); this module is what a client (the load generator, the tests) uses
//! to read *replies*, and what the server uses to write them.
//!
//! # Examples
//!
//! ```
//! use std::io::Cursor;
//! use urlseen_server::frame::{Frame, FrameError, Protocol};
//!
//! let map = Frame::Map(vec![(Frame::bulk("proto"), Frame::Integer(3))]);
//! assert_eq!(&map.to_bytes(Protocol::Resp3)[..], b"%1\r\n$5\r\nproto\r\n:3\r\n");
//! assert_eq!(&map.to_bytes(Protocol::Resp2)[..], b"*2\r\n$5\r\nproto\r\n:3\r\n");
//!
//! let bytes = b"%1\r\n$5\r\nproto\r\n:3\r\n";
//! assert_eq!(Frame::parse(&mut Cursor::new(&bytes[..])), Ok(map));
//! assert_eq!(Frame::parse(&mut Cursor::new(&bytes[..7])), Err(FrameError::Incomplete));
//! ```

mod decode;
mod encode;

use decode::Decoder;
use encode::{put_aggregate, put_blob, put_header, put_integer, put_line};

use std::fmt;
use std::io::Cursor;

use bytes::{BufMut, Bytes, BytesMut};

/// The protocol version a connection speaks, switched with `HELLO 2` / `HELLO 3`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// RESP2, what every connection starts with.
    #[default]
    Resp2,
    /// RESP3, after `HELLO 3`.
    Resp3,
}

impl Protocol {
    /// The version number, as `HELLO` reports it in `proto`.
    pub fn version(self) -> i64 {
        match self {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    }
}

/// One RESP value.
///
/// Strings that are text in practice (simple strings, errors, big numbers) are still kept as
/// [`Bytes`]: Redis echoes arbitrary client bytes in some of them (the unknown-command error),
/// and a client must be able to read what a server sends.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    /// `+OK\r\n`.
    Simple(Bytes),
    /// `-ERR message\r\n`; the payload is the message without the leading `-`, code included.
    /// A RESP3 blob error (`!`) parses into this variant too.
    Error(Bytes),
    /// `:42\r\n`.
    Integer(i64),
    /// `$5\r\nhello\r\n`.
    Bulk(Bytes),
    /// The null reply: `_\r\n` in RESP3, `$-1\r\n` (a null bulk string) in RESP2.
    Null,
    /// The RESP2 null array `*-1\r\n`; `_\r\n` in RESP3.
    NullArray,
    /// `*n\r\n` followed by n frames.
    Array(Vec<Frame>),
    /// RESP3 `%n\r\n` followed by n key/value pairs; a flat array of 2n in RESP2.
    Map(Vec<(Frame, Frame)>),
    /// RESP3 `~n\r\n`; an array in RESP2.
    Set(Vec<Frame>),
    /// RESP3 `,3.14\r\n`; a bulk string in RESP2.
    Double(f64),
    /// RESP3 `#t\r\n` / `#f\r\n`; the integer 1 or 0 in RESP2.
    Boolean(bool),
    /// RESP3 `(12345678901234567890\r\n`; a bulk string in RESP2.
    BigNumber(Bytes),
    /// RESP3 `=15\r\ntxt:Some string\r\n`; a bulk string holding just the data in RESP2.
    Verbatim {
        /// The three-byte format, `txt` or `mkd`.
        format: [u8; 3],
        /// The text.
        data: Bytes,
    },
    /// RESP3 out-of-band push `>n\r\n`; an array in RESP2.
    Push(Vec<Frame>),
}

/// Why bytes are not (yet) a frame.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// Not enough bytes yet: read more and try again. Not an error of the peer.
    #[error("incomplete frame")]
    Incomplete,
    /// The first byte of a frame is no RESP type.
    #[error("invalid frame type byte {0:#04x}")]
    InvalidType(u8),
    /// A RESP3 type this parser does not accept (attributes `|`, streamed aggregates `?`).
    #[error("unsupported RESP3 frame type {0:?}")]
    Unsupported(char),
    /// A line does not end with CRLF.
    #[error("line not terminated by CRLF")]
    InvalidLineEnding,
    /// An integer or length is not a canonical decimal `i64`.
    #[error("invalid integer")]
    InvalidInteger,
    /// A length is negative (other than the `-1` of a RESP2 null).
    #[error("invalid length")]
    InvalidLength,
    /// A double is not a number, `inf`, `-inf` or `nan`.
    #[error("invalid double")]
    InvalidDouble,
    /// A boolean is neither `t` nor `f`.
    #[error("invalid boolean")]
    InvalidBoolean,
    /// A big number is not an optional `-` followed by digits.
    #[error("invalid big number")]
    InvalidBigNumber,
    /// A verbatim string is shorter than its `xxx:` format prefix.
    #[error("invalid verbatim string")]
    InvalidVerbatim,
    /// Bulk data is not followed by CRLF.
    #[error("bulk data not followed by CRLF")]
    MissingCrlf,
    /// Aggregates nest deeper than [`FrameLimits::max_depth`].
    #[error("frames nested deeper than {max}")]
    TooDeep {
        /// The limit.
        max: usize,
    },
    /// A bulk is longer than [`FrameLimits::max_bulk_len`].
    #[error("bulk of {len} bytes is over the limit of {max}")]
    BulkTooLarge {
        /// The announced length.
        len: u64,
        /// The limit.
        max: usize,
    },
    /// An aggregate has more elements than [`FrameLimits::max_elements`].
    #[error("aggregate of {len} elements is over the limit of {max}")]
    TooManyElements {
        /// The announced count.
        len: u64,
        /// The limit.
        max: usize,
    },
}

/// Bounds the parser enforces on untrusted bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameLimits {
    /// Deepest nesting of aggregates (an array directly in an array is depth 2).
    pub max_depth: usize,
    /// Longest bulk, verbatim or blob-error payload, in bytes.
    pub max_bulk_len: usize,
    /// Most elements in one aggregate (pairs for a map).
    pub max_elements: usize,
}

impl Default for FrameLimits {
    /// Depth 128, bulks up to 512 MiB (Redis' `proto-max-bulk-len`), up to `i32::MAX` elements.
    fn default() -> Self {
        FrameLimits { max_depth: 128, max_bulk_len: 512 << 20, max_elements: i32::MAX as usize }
    }
}

type Result<T> = std::result::Result<T, FrameError>;

impl Frame {
    /// A simple string (`+…`) from static text.
    pub fn simple(s: &'static str) -> Frame {
        Frame::Simple(Bytes::from_static(s.as_bytes()))
    }

    /// `+OK`.
    pub fn ok() -> Frame {
        Frame::simple("OK")
    }

    /// A bulk string from anything that converts into [`Bytes`].
    pub fn bulk(data: impl Into<Bytes>) -> Frame {
        Frame::Bulk(data.into())
    }

    /// An error reply. `message` carries the code: `"ERR syntax error"`.
    pub fn error(message: impl Into<Bytes>) -> Frame {
        Frame::Error(message.into())
    }

    /// A verbatim `txt` string (a bulk string for RESP2 clients), as Redis answers `INFO`.
    pub fn verbatim_txt(data: impl Into<Bytes>) -> Frame {
        Frame::Verbatim { format: *b"txt", data: data.into() }
    }

    /// Whether this is an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Frame::Error(_))
    }

    /// Checks that `src`, from its position on, starts with one complete frame, and moves the
    /// position past it. Allocates nothing.
    ///
    /// # Errors
    /// [`FrameError::Incomplete`] when more bytes are needed; any other variant when the bytes
    /// are not RESP.
    pub fn check(src: &mut Cursor<&[u8]>) -> Result<()> {
        Frame::check_with(src, &FrameLimits::default())
    }

    /// [`Frame::check`] with explicit limits.
    ///
    /// # Errors
    /// As [`Frame::check`].
    pub fn check_with(src: &mut Cursor<&[u8]>, limits: &FrameLimits) -> Result<()> {
        let mut d = Decoder::new(src, limits)?;
        d.skip(1)?;
        src.set_position(d.pos as u64);
        Ok(())
    }

    /// Parses one frame from `src`, from its position on, and moves the position past it.
    /// On error the position is left where it was.
    ///
    /// # Errors
    /// [`FrameError::Incomplete`] when more bytes are needed; any other variant when the bytes
    /// are not RESP.
    pub fn parse(src: &mut Cursor<&[u8]>) -> Result<Frame> {
        Frame::parse_with(src, &FrameLimits::default())
    }

    /// [`Frame::parse`] with explicit limits.
    ///
    /// # Errors
    /// As [`Frame::parse`].
    pub fn parse_with(src: &mut Cursor<&[u8]>, limits: &FrameLimits) -> Result<Frame> {
        let mut d = Decoder::new(src, limits)?;
        let frame = d.parse(1)?;
        src.set_position(d.pos as u64);
        Ok(frame)
    }

    /// Appends the encoding of this frame for `proto` to `dst`.
    ///
    /// CR and LF inside simple strings and errors are written as spaces, as Redis does, so a
    /// message that echoes client bytes cannot break the framing.
    pub fn encode(&self, proto: Protocol, dst: &mut BytesMut) {
        let resp3 = proto == Protocol::Resp3;
        match self {
            Frame::Simple(s) => put_line(dst, b'+', s),
            Frame::Error(s) => put_line(dst, b'-', s),
            Frame::Integer(n) => put_integer(dst, *n),
            Frame::Bulk(data) => put_blob(dst, b'$', data),
            Frame::Null if resp3 => dst.put_slice(b"_\r\n"),
            Frame::Null => dst.put_slice(b"$-1\r\n"),
            Frame::NullArray if resp3 => dst.put_slice(b"_\r\n"),
            Frame::NullArray => dst.put_slice(b"*-1\r\n"),
            Frame::Array(items) => put_aggregate(dst, b'*', items, proto),
            Frame::Set(items) => put_aggregate(dst, if resp3 { b'~' } else { b'*' }, items, proto),
            Frame::Push(items) => put_aggregate(dst, if resp3 { b'>' } else { b'*' }, items, proto),
            Frame::Map(pairs) => {
                if resp3 {
                    put_header(dst, b'%', pairs.len() as u64);
                } else {
                    put_header(dst, b'*', (pairs.len() as u64).saturating_mul(2));
                }
                for (k, v) in pairs {
                    k.encode(proto, dst);
                    v.encode(proto, dst);
                }
            }
            Frame::Double(x) => {
                let text = format_double(*x);
                if resp3 {
                    put_line(dst, b',', text.as_bytes());
                } else {
                    put_blob(dst, b'$', text.as_bytes());
                }
            }
            Frame::Boolean(b) if resp3 => dst.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
            Frame::Boolean(b) => dst.put_slice(if *b { b":1\r\n" } else { b":0\r\n" }),
            Frame::BigNumber(digits) if resp3 => put_line(dst, b'(', digits),
            Frame::BigNumber(digits) => put_blob(dst, b'$', digits),
            Frame::Verbatim { format, data } if resp3 => {
                put_header(dst, b'=', data.len() as u64 + 4);
                dst.put_slice(format);
                dst.put_u8(b':');
                dst.put_slice(data);
                dst.put_slice(b"\r\n");
            }
            Frame::Verbatim { data, .. } => put_blob(dst, b'$', data),
        }
    }

    /// The encoding of this frame for `proto`.
    pub fn to_bytes(&self, proto: Protocol) -> Bytes {
        let mut dst = BytesMut::new();
        self.encode(proto, &mut dst);
        dst.freeze()
    }
}

impl fmt::Display for Frame {
    /// A redis-cli-like one-line rendering, for logs and test failures.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn list(f: &mut fmt::Formatter<'_>, items: &[Frame]) -> fmt::Result {
            f.write_str("[")?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{item}")?;
            }
            f.write_str("]")
        }
        match self {
            Frame::Simple(s) => write!(f, "{}", String::from_utf8_lossy(s)),
            Frame::Error(s) => write!(f, "(error) {}", String::from_utf8_lossy(s)),
            Frame::Integer(n) => write!(f, "(integer) {n}"),
            Frame::Bulk(b) => write!(f, "{:?}", String::from_utf8_lossy(b)),
            Frame::Null | Frame::NullArray => f.write_str("(nil)"),
            Frame::Array(items) | Frame::Set(items) | Frame::Push(items) => list(f, items),
            Frame::Map(pairs) => {
                f.write_str("{")?;
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}: {v}")?;
                }
                f.write_str("}")
            }
            Frame::Double(x) => write!(f, "(double) {}", format_double(*x)),
            Frame::Boolean(b) => write!(f, "({b})"),
            Frame::BigNumber(n) => write!(f, "(big number) {}", String::from_utf8_lossy(n)),
            Frame::Verbatim { data, .. } => write!(f, "{:?}", String::from_utf8_lossy(data)),
        }
    }
}

/// Parses a canonical decimal `i64` the way Redis' `string2ll` does: an optional `-`, then
/// either `0` alone or digits without a leading zero; no `+`, no spaces, no overflow.
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits {
        [] => return None,
        [b'0'] if !negative => return Some(0),
        [b'1'..=b'9', ..] => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    if negative {
        if v == 1 << 63 { Some(i64::MIN) } else { i64::try_from(v).ok().map(|v| -v) }
    } else {
        i64::try_from(v).ok()
    }
}

/// Redis-style text for a double: `inf`, `-inf`, `nan`, integral values without a fraction,
/// exponent notation outside `[1e-5, 1e17)`.
pub(crate) fn format_double(x: f64) -> String {
    if x.is_nan() {
        "nan".to_owned()
    } else if x.is_infinite() {
        if x > 0.0 { "inf".to_owned() } else { "-inf".to_owned() }
    } else {
        let a = x.abs();
        if a == 0.0 || (1e-5..1e17).contains(&a) { format!("{x}") } else { format!("{x:e}") }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(bytes: &[u8]) -> Result<Vec<Frame>> {
        let mut cur = Cursor::new(bytes);
        let mut out = Vec::new();
        while (cur.position() as usize) < bytes.len() {
            out.push(Frame::parse(&mut cur)?);
        }
        Ok(out)
    }

    fn one(bytes: &[u8]) -> Result<Frame> {
        let mut cur = Cursor::new(bytes);
        let f = Frame::parse(&mut cur)?;
        assert_eq!(cur.position() as usize, bytes.len(), "trailing bytes after {f:?}");
        let mut cur = Cursor::new(bytes);
        Frame::check(&mut cur)?;
        assert_eq!(cur.position() as usize, bytes.len());
        Ok(f)
    }

    /// Every frame type with its RESP3 wire form and its RESP2 downgrade.
    fn samples() -> Vec<(Frame, &'static [u8], &'static [u8])> {
        vec![
            (Frame::ok(), b"+OK\r\n", b"+OK\r\n"),
            (Frame::error("ERR boom"), b"-ERR boom\r\n", b"-ERR boom\r\n"),
            (Frame::Integer(0), b":0\r\n", b":0\r\n"),
            (Frame::Integer(-42), b":-42\r\n", b":-42\r\n"),
            (Frame::Integer(i64::MIN), b":-9223372036854775808\r\n", b":-9223372036854775808\r\n"),
            (Frame::Integer(i64::MAX), b":9223372036854775807\r\n", b":9223372036854775807\r\n"),
            (Frame::bulk("hello"), b"$5\r\nhello\r\n", b"$5\r\nhello\r\n"),
            (Frame::bulk(""), b"$0\r\n\r\n", b"$0\r\n\r\n"),
            (Frame::bulk(&b"a\r\nb"[..]), b"$4\r\na\r\nb\r\n", b"$4\r\na\r\nb\r\n"),
            (Frame::Null, b"_\r\n", b"$-1\r\n"),
            (Frame::Array(vec![]), b"*0\r\n", b"*0\r\n"),
            (
                Frame::Array(vec![Frame::Integer(1), Frame::bulk("x")]),
                b"*2\r\n:1\r\n$1\r\nx\r\n",
                b"*2\r\n:1\r\n$1\r\nx\r\n",
            ),
            (
                Frame::Map(vec![(Frame::bulk("k"), Frame::Null)]),
                b"%1\r\n$1\r\nk\r\n_\r\n",
                b"*2\r\n$1\r\nk\r\n$-1\r\n",
            ),
            (Frame::Set(vec![Frame::simple("a")]), b"~1\r\n+a\r\n", b"*1\r\n+a\r\n"),
            (Frame::Double(1.5), b",1.5\r\n", b"$3\r\n1.5\r\n"),
            (Frame::Double(f64::INFINITY), b",inf\r\n", b"$3\r\ninf\r\n"),
            (Frame::Double(-2.0), b",-2\r\n", b"$2\r\n-2\r\n"),
            (Frame::Boolean(true), b"#t\r\n", b":1\r\n"),
            (Frame::Boolean(false), b"#f\r\n", b":0\r\n"),
            (
                Frame::BigNumber(Bytes::from_static(
                    b"3492890328409238509324850943850943825024385",
                )),
                b"(3492890328409238509324850943850943825024385\r\n",
                b"$43\r\n3492890328409238509324850943850943825024385\r\n",
            ),
            (
                Frame::verbatim_txt("Some string"),
                b"=15\r\ntxt:Some string\r\n",
                b"$11\r\nSome string\r\n",
            ),
            (
                Frame::Push(vec![Frame::bulk("message"), Frame::bulk("ch")]),
                b">2\r\n$7\r\nmessage\r\n$2\r\nch\r\n",
                b"*2\r\n$7\r\nmessage\r\n$2\r\nch\r\n",
            ),
        ]
    }

    #[test]
    fn every_type_encodes_for_resp3_and_downgrades_for_resp2() {
        for (frame, resp3, resp2) in samples() {
            assert_eq!(&frame.to_bytes(Protocol::Resp3)[..], resp3, "{frame:?} in RESP3");
            assert_eq!(&frame.to_bytes(Protocol::Resp2)[..], resp2, "{frame:?} in RESP2");
        }
        assert_eq!(&Frame::NullArray.to_bytes(Protocol::Resp2)[..], b"*-1\r\n");
        assert_eq!(&Frame::NullArray.to_bytes(Protocol::Resp3)[..], b"_\r\n");
    }

    #[test]
    fn every_type_round_trips_through_the_parser() {
        for (frame, resp3, _) in samples() {
            assert_eq!(one(resp3), Ok(frame.clone()), "{}", String::from_utf8_lossy(resp3));
        }
        assert_eq!(one(b"$-1\r\n"), Ok(Frame::Null));
        assert_eq!(one(b"*-1\r\n"), Ok(Frame::NullArray));
        assert_eq!(one(b"!8\r\nERR a\r\nb\r\n"), Ok(Frame::error(&b"ERR a\r\nb"[..])));
        assert_eq!(one(b",-inf\r\n"), Ok(Frame::Double(f64::NEG_INFINITY)));
        assert_eq!(one(b",1e10\r\n"), Ok(Frame::Double(1e10)));
        assert!(matches!(one(b",nan\r\n"), Ok(Frame::Double(x)) if x.is_nan()));
    }

    #[test]
    fn a_frame_cut_at_any_point_is_incomplete_never_an_error() {
        for (_, resp3, resp2) in samples() {
            for bytes in [resp3, resp2] {
                for cut in 0..bytes.len() {
                    let mut cur = Cursor::new(&bytes[..cut]);
                    assert_eq!(
                        Frame::check(&mut cur),
                        Err(FrameError::Incomplete),
                        "check of {:?} cut at {cut}",
                        String::from_utf8_lossy(bytes)
                    );
                    assert_eq!(cur.position(), 0);
                    let mut cur = Cursor::new(&bytes[..cut]);
                    assert_eq!(Frame::parse(&mut cur), Err(FrameError::Incomplete));
                }
            }
        }
    }

    #[test]
    fn pipelined_frames_parse_one_after_the_other() {
        let mut all = Vec::new();
        let mut want = Vec::new();
        for (frame, resp3, _) in samples() {
            all.extend_from_slice(resp3);
            want.push(frame);
        }
        assert_eq!(parse_all(&all), Ok(want.clone()));
        // And every prefix parses the complete frames it holds, then reports Incomplete.
        for cut in 0..all.len() {
            let mut cur = Cursor::new(&all[..cut]);
            let mut got = 0;
            loop {
                match Frame::parse(&mut cur) {
                    Ok(f) => {
                        assert_eq!(f, want[got]);
                        got += 1;
                    }
                    Err(FrameError::Incomplete) => break,
                    Err(e) => panic!("prefix {cut}: {e}"),
                }
            }
        }
    }

    #[test]
    fn malformed_input_is_a_typed_error() {
        let cases: &[(&[u8], FrameError)] = &[
            (b"x\r\n", FrameError::InvalidType(b'x')),
            (b":12a\r\n", FrameError::InvalidInteger),
            (b":+1\r\n", FrameError::InvalidInteger),
            (b":01\r\n", FrameError::InvalidInteger),
            (b":99999999999999999999\r\n", FrameError::InvalidInteger),
            (b"$-2\r\n", FrameError::InvalidLength),
            (b"$3\r\nabcde", FrameError::MissingCrlf),
            (b"+OK\n", FrameError::InvalidLineEnding),
            (b"#x\r\n", FrameError::InvalidBoolean),
            (b",abc\r\n", FrameError::InvalidDouble),
            (b"(12x\r\n", FrameError::InvalidBigNumber),
            (b"=2\r\nab\r\n", FrameError::InvalidVerbatim),
            (b"%-1\r\n", FrameError::InvalidLength),
            (b"_x\r\n", FrameError::InvalidLineEnding),
            (b"|1\r\n", FrameError::Unsupported('|')),
            (b"$?\r\n", FrameError::InvalidInteger),
        ];
        for (bytes, err) in cases {
            assert_eq!(one(bytes).as_ref(), Err(err), "{}", String::from_utf8_lossy(bytes));
        }
    }

    #[test]
    fn limits_are_enforced() {
        let limits = FrameLimits { max_depth: 3, max_bulk_len: 4, max_elements: 2 };
        let p = |b: &[u8]| Frame::parse_with(&mut Cursor::new(b), &limits);
        assert_eq!(
            p(b"*1\r\n*1\r\n*0\r\n"),
            Ok(Frame::Array(vec![Frame::Array(vec![Frame::Array(vec![])])]))
        );
        assert_eq!(p(b"*1\r\n*1\r\n*1\r\n*0\r\n"), Err(FrameError::TooDeep { max: 3 }));
        assert_eq!(p(b"$5\r\nhello\r\n"), Err(FrameError::BulkTooLarge { len: 5, max: 4 }));
        assert_eq!(p(b"*3\r\n"), Err(FrameError::TooManyElements { len: 3, max: 2 }));
        // Deep nesting with the default limits: an error, not a stack overflow.
        let deep = b"*1\r\n".repeat(100_000);
        assert_eq!(
            Frame::parse(&mut Cursor::new(&deep[..])),
            Err(FrameError::TooDeep { max: 128 })
        );
        assert_eq!(
            Frame::check(&mut Cursor::new(&deep[..])),
            Err(FrameError::TooDeep { max: 128 })
        );
    }

    #[test]
    fn a_huge_announced_count_does_not_preallocate() {
        let bytes = b"*2147483647\r\n:1\r\n";
        assert_eq!(Frame::parse(&mut Cursor::new(&bytes[..])), Err(FrameError::Incomplete));
    }

    #[test]
    fn cr_and_lf_in_simple_strings_and_errors_are_written_as_spaces() {
        let f = Frame::error(&b"ERR a\r\nb"[..]);
        assert_eq!(&f.to_bytes(Protocol::Resp2)[..], b"-ERR a  b\r\n");
    }

    #[test]
    fn strict_integers_match_redis_string2ll() {
        for (s, v) in
            [("0", Some(0)), ("-1", Some(-1)), ("10", Some(10)), ("-0", None), ("00", None)]
        {
            assert_eq!(parse_i64(s.as_bytes()), v, "{s}");
        }
        for s in ["", "-", "+1", " 1", "1 ", "9223372036854775808", "1.0"] {
            assert_eq!(parse_i64(s.as_bytes()), None, "{s}");
        }
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
    }

    #[test]
    fn doubles_are_written_like_redis() {
        for (x, s) in [(1.5, "1.5"), (3.0, "3"), (0.0, "0"), (-0.25, "-0.25"), (1e20, "1e20")] {
            assert_eq!(format_double(x), s);
        }
    }

    /// The properties of the `resp_frame` fuzz target, checked on stable.
    fn check_and_parse_agree(
        bytes: &[u8],
    ) -> std::result::Result<(), proptest::test_runner::TestCaseError> {
        let mut checked = Cursor::new(bytes);
        let check = Frame::check(&mut checked);
        let mut parsed = Cursor::new(bytes);
        let parse = Frame::parse(&mut parsed);
        proptest::prop_assert_eq!(
            check.is_ok(),
            parse.is_ok(),
            "check {:?} vs parse {:?}",
            check,
            parse
        );
        if let Ok(frame) = parse {
            proptest::prop_assert_eq!(checked.position(), parsed.position());
            for proto in [Protocol::Resp2, Protocol::Resp3] {
                let again = frame.to_bytes(proto);
                let back = Frame::parse(&mut Cursor::new(&again[..]));
                proptest::prop_assert!(back.is_ok(), "{:?} for {:?}: {:?}", frame, proto, back);
            }
        }
        Ok(())
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            check_and_parse_agree(&bytes)?;
        }

        #[test]
        fn resp_shaped_bytes_never_panic(parts in proptest::collection::vec(
            proptest::sample::select(vec![
                &b"*"[..], b"%", b"~", b">", b"$", b"=", b"!", b"+", b"-", b":", b",", b"#", b"(",
                b"_", b"1", b"2", b"3", b"4", b"-1", b"0", b"\r\n", b"\r", b"\n", b"t", b"txt:",
                b"inf", b"nan", b"1.5", b"999999999999", b"abc",
            ]),
            0..64,
        )) {
            check_and_parse_agree(&parts.concat())?;
        }

        #[test]
        fn encoded_frames_round_trip(items in proptest::collection::vec(
            (proptest::num::i64::ANY, proptest::collection::vec(proptest::num::u8::ANY, 0..16), proptest::bool::ANY),
            0..16,
        )) {
            let frame = Frame::Map(items.into_iter().map(|(n, b, t)| {
                (Frame::Bulk(Bytes::from(b)), Frame::Array(vec![Frame::Integer(n), Frame::Boolean(t), Frame::Null]))
            }).collect());
            let resp3 = frame.to_bytes(Protocol::Resp3);
            proptest::prop_assert_eq!(Frame::parse(&mut Cursor::new(&resp3[..])), Ok(frame));
        }
    }
}
