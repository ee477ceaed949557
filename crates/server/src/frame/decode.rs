//! Reading frames from untrusted bytes: the bounds-checked, depth-limited decoder behind
//! `Frame::check_with` and `Frame::parse_with`, and the checks of RESP3's scalar types.

use super::*;

/// A bounds-checked walk over one buffer; shared by `check` (no allocation) and `parse`.
pub(super) struct Decoder<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
    pub(super) limits: &'a FrameLimits,
}

impl<'a> Decoder<'a> {
    pub(super) fn new(src: &Cursor<&'a [u8]>, limits: &'a FrameLimits) -> Result<Self> {
        let buf: &'a [u8] = src.get_ref();
        let pos = usize::try_from(src.position()).map_err(|_| FrameError::Incomplete)?;
        if pos > buf.len() {
            return Err(FrameError::Incomplete);
        }
        Ok(Decoder { buf, pos, limits })
    }

    pub(super) fn byte(&mut self) -> Result<u8> {
        let b = *self.buf.get(self.pos).ok_or(FrameError::Incomplete)?;
        self.pos += 1;
        Ok(b)
    }

    /// The bytes up to the next CRLF, which is consumed.
    pub(super) fn line(&mut self) -> Result<&'a [u8]> {
        let rest = self.buf.get(self.pos..).ok_or(FrameError::Incomplete)?;
        let nl = memchr::memchr(b'\n', rest).ok_or(FrameError::Incomplete)?;
        let line = match rest.get(..nl) {
            Some([line @ .., b'\r']) => line,
            _ => return Err(FrameError::InvalidLineEnding),
        };
        self.pos += nl + 1;
        Ok(line)
    }

    pub(super) fn integer(&mut self) -> Result<i64> {
        parse_i64(self.line()?).ok_or(FrameError::InvalidInteger)
    }

    /// A length line: `None` for the RESP2 null `-1`.
    pub(super) fn length(&mut self) -> Result<Option<u64>> {
        match self.integer()? {
            -1 => Ok(None),
            n => u64::try_from(n).map(Some).map_err(|_| FrameError::InvalidLength),
        }
    }

    pub(super) fn count(&mut self) -> Result<Option<usize>> {
        match self.length()? {
            None => Ok(None),
            Some(n) => match usize::try_from(n) {
                Ok(n) if n <= self.limits.max_elements => Ok(Some(n)),
                _ => Err(FrameError::TooManyElements { len: n, max: self.limits.max_elements }),
            },
        }
    }

    pub(super) fn blob(&mut self, len: u64) -> Result<&'a [u8]> {
        let max = self.limits.max_bulk_len;
        let len = match usize::try_from(len) {
            Ok(n) if n <= max => n,
            _ => return Err(FrameError::BulkTooLarge { len, max }),
        };
        let end = self.pos.checked_add(len).ok_or(FrameError::Incomplete)?;
        let data = self.buf.get(self.pos..end).ok_or(FrameError::Incomplete)?;
        let after = end.checked_add(2).ok_or(FrameError::Incomplete)?;
        match self.buf.get(end..after) {
            Some(b"\r\n") => {}
            Some(_) => return Err(FrameError::MissingCrlf),
            // Fewer than two bytes after the data: wait, unless the one there is already wrong.
            None => match self.buf.get(end) {
                Some(b'\r') | None => return Err(FrameError::Incomplete),
                Some(_) => return Err(FrameError::MissingCrlf),
            },
        }
        self.pos = after;
        Ok(data)
    }

    /// Enters an aggregate at nesting `depth` (the top level is 1).
    pub(super) fn enter(&self, depth: usize) -> Result<usize> {
        if depth > self.limits.max_depth {
            Err(FrameError::TooDeep { max: self.limits.max_depth })
        } else {
            Ok(depth + 1)
        }
    }

    /// Checks a line-typed payload without allocating; shared by `skip` and `parse`.
    pub(super) fn simple_payload(&mut self, ty: u8) -> Result<&'a [u8]> {
        let line = self.line()?;
        match ty {
            b':' => {
                parse_i64(line).ok_or(FrameError::InvalidInteger)?;
            }
            b',' => {
                parse_double(line)?;
            }
            b'#' => {
                parse_bool(line)?;
            }
            b'(' => check_big_number(line)?,
            b'_' if !line.is_empty() => return Err(FrameError::InvalidLineEnding),
            _ => {}
        }
        Ok(line)
    }

    pub(super) fn skip(&mut self, depth: usize) -> Result<()> {
        let ty = self.byte()?;
        match ty {
            b'+' | b'-' | b':' | b',' | b'#' | b'(' | b'_' => {
                self.simple_payload(ty)?;
            }
            b'$' | b'!' | b'=' => {
                if let Some(len) = self.length()? {
                    let data = self.blob(len)?;
                    if ty == b'=' {
                        check_verbatim(data)?;
                    }
                } else if ty != b'$' {
                    return Err(FrameError::InvalidLength);
                }
            }
            b'*' | b'~' | b'>' | b'%' => {
                let inner = self.enter(depth)?;
                match self.count()? {
                    Some(n) => {
                        let n = if ty == b'%' { n.saturating_mul(2) } else { n };
                        for _ in 0..n {
                            self.skip(inner)?;
                        }
                    }
                    None if ty == b'*' => {}
                    None => return Err(FrameError::InvalidLength),
                }
            }
            b'|' | b'?' | b';' | b'.' => return Err(FrameError::Unsupported(char::from(ty))),
            other => return Err(FrameError::InvalidType(other)),
        }
        Ok(())
    }

    pub(super) fn parse(&mut self, depth: usize) -> Result<Frame> {
        let ty = self.byte()?;
        let frame = match ty {
            b'+' => Frame::Simple(Bytes::copy_from_slice(self.simple_payload(ty)?)),
            b'-' => Frame::Error(Bytes::copy_from_slice(self.simple_payload(ty)?)),
            b':' => Frame::Integer(self.integer()?),
            b',' => Frame::Double(parse_double(self.line()?)?),
            b'#' => Frame::Boolean(parse_bool(self.line()?)?),
            b'(' => Frame::BigNumber(Bytes::copy_from_slice(self.simple_payload(ty)?)),
            b'_' => {
                self.simple_payload(ty)?;
                Frame::Null
            }
            b'$' | b'!' | b'=' => match self.length()? {
                None if ty == b'$' => Frame::Null,
                None => return Err(FrameError::InvalidLength),
                Some(len) => {
                    let data = self.blob(len)?;
                    match ty {
                        b'$' => Frame::Bulk(Bytes::copy_from_slice(data)),
                        b'!' => Frame::Error(Bytes::copy_from_slice(data)),
                        _ => {
                            let format = check_verbatim(data)?;
                            let text = data.get(4..).unwrap_or_default();
                            Frame::Verbatim { format, data: Bytes::copy_from_slice(text) }
                        }
                    }
                }
            },
            b'*' | b'~' | b'>' => {
                let inner = self.enter(depth)?;
                match self.count()? {
                    None if ty == b'*' => Frame::NullArray,
                    None => return Err(FrameError::InvalidLength),
                    Some(n) => {
                        let mut items = Vec::with_capacity(self.capacity_hint(n, 3));
                        for _ in 0..n {
                            items.push(self.parse(inner)?);
                        }
                        match ty {
                            b'*' => Frame::Array(items),
                            b'~' => Frame::Set(items),
                            _ => Frame::Push(items),
                        }
                    }
                }
            }
            b'%' => {
                let inner = self.enter(depth)?;
                let n = self.count()?.ok_or(FrameError::InvalidLength)?;
                let mut pairs = Vec::with_capacity(self.capacity_hint(n, 6));
                for _ in 0..n {
                    let k = self.parse(inner)?;
                    let v = self.parse(inner)?;
                    pairs.push((k, v));
                }
                Frame::Map(pairs)
            }
            b'|' | b'?' | b';' | b'.' => return Err(FrameError::Unsupported(char::from(ty))),
            other => return Err(FrameError::InvalidType(other)),
        };
        Ok(frame)
    }

    /// A preallocation that the bytes at hand can justify: an announced count is untrusted.
    pub(super) fn capacity_hint(&self, n: usize, min_bytes_each: usize) -> usize {
        let left = self.buf.len().saturating_sub(self.pos) / min_bytes_each;
        n.min(left).min(4096)
    }
}

pub(super) fn parse_double(line: &[u8]) -> Result<f64> {
    let text = std::str::from_utf8(line).map_err(|_| FrameError::InvalidDouble)?;
    match text {
        "inf" | "+inf" => Ok(f64::INFINITY),
        "-inf" => Ok(f64::NEG_INFINITY),
        "nan" | "-nan" => Ok(f64::NAN),
        _ if text.is_empty()
            || !text.bytes().all(|c| c.is_ascii_digit() || b"+-.eE".contains(&c)) =>
        {
            Err(FrameError::InvalidDouble)
        }
        _ => text.parse().map_err(|_| FrameError::InvalidDouble),
    }
}

pub(super) fn parse_bool(line: &[u8]) -> Result<bool> {
    match line {
        b"t" => Ok(true),
        b"f" => Ok(false),
        _ => Err(FrameError::InvalidBoolean),
    }
}

pub(super) fn check_big_number(line: &[u8]) -> Result<()> {
    let digits = line.strip_prefix(b"-").unwrap_or(line);
    if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) {
        Ok(())
    } else {
        Err(FrameError::InvalidBigNumber)
    }
}

pub(super) fn check_verbatim(data: &[u8]) -> Result<[u8; 3]> {
    match data {
        [a, b, c, b':', ..] => Ok([*a, *b, *c]),
        _ => Err(FrameError::InvalidVerbatim),
    }
}
