//! Writing frames: the RESP2/RESP3 line, length-prefixed blob and aggregate headers, and
//! integers written without a formatter.

use super::*;

pub(super) fn put_line(dst: &mut BytesMut, prefix: u8, s: &[u8]) {
    dst.reserve(s.len() + 3);
    dst.put_u8(prefix);
    if memchr::memchr2(b'\r', b'\n', s).is_none() {
        dst.put_slice(s);
    } else {
        for &c in s {
            dst.put_u8(if c == b'\r' || c == b'\n' { b' ' } else { c });
        }
    }
    dst.put_slice(b"\r\n");
}

pub(super) fn put_integer(dst: &mut BytesMut, n: i64) {
    match n {
        0 => dst.put_slice(b":0\r\n"),
        1 => dst.put_slice(b":1\r\n"),
        _ => {
            dst.put_u8(b':');
            put_decimal(dst, n);
            dst.put_slice(b"\r\n");
        }
    }
}

pub(super) fn put_header(dst: &mut BytesMut, prefix: u8, len: u64) {
    dst.put_u8(prefix);
    put_unsigned(dst, len);
    dst.put_slice(b"\r\n");
}

pub(super) fn put_blob(dst: &mut BytesMut, prefix: u8, data: &[u8]) {
    dst.reserve(data.len() + 16);
    put_header(dst, prefix, data.len() as u64);
    dst.put_slice(data);
    dst.put_slice(b"\r\n");
}

pub(super) fn put_aggregate(dst: &mut BytesMut, prefix: u8, items: &[Frame], proto: Protocol) {
    put_header(dst, prefix, items.len() as u64);
    for item in items {
        item.encode(proto, dst);
    }
}

pub(super) fn put_decimal(dst: &mut BytesMut, n: i64) {
    if n < 0 {
        dst.put_u8(b'-');
    }
    put_unsigned(dst, n.unsigned_abs());
}

pub(super) fn put_unsigned(dst: &mut BytesMut, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    dst.put_slice(&buf[i..]);
}
