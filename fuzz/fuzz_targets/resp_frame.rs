//! Feeds arbitrary bytes to both RESP parsers: the frame (reply) parser and the request parser.
//!
//! Properties: neither panics; `Frame::check` and `Frame::parse` agree on what is a frame and
//! where it ends; every parsed frame encodes, for RESP2 and RESP3, to bytes that parse again;
//! the request parser gives the same requests however the bytes are split.

#![no_main]

use std::io::Cursor;

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use urlseen_server::request::RequestParser;
use urlseen_server::{Frame, Limits, Protocol};

fn requests(chunks: &[&[u8]]) -> (Vec<Vec<bytes::Bytes>>, bool) {
    let limits = Limits { max_bulk_len: 4096, max_args: 64, max_query_buffer: 1 << 16 };
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match parser.parse(&mut buf, &limits, true) {
                Ok(Some(args)) => out.push(args),
                Ok(None) => break,
                Err(_) => return (out, true),
            }
        }
    }
    (out, false)
}

fuzz_target!(|data: &[u8]| {
    let mut checked = Cursor::new(data);
    let check = Frame::check(&mut checked);
    let mut parsed = Cursor::new(data);
    let parse = Frame::parse(&mut parsed);
    assert_eq!(check.is_ok(), parse.is_ok(), "check {check:?} vs parse {parse:?}");
    if let Ok(frame) = parse {
        assert_eq!(checked.position(), parsed.position());
        for protocol in [Protocol::Resp2, Protocol::Resp3] {
            let bytes = frame.to_bytes(protocol);
            let again = Frame::parse(&mut Cursor::new(&bytes[..]));
            assert!(again.is_ok(), "{frame:?} encoded for {protocol:?} does not parse: {again:?}");
        }
    }

    let whole = requests(&[data]);
    let split = data.first().map_or(0, |&b| usize::from(b) % (data.len() + 1));
    let (head, tail) = data.split_at(split);
    assert_eq!(whole, requests(&[head, tail]), "split at {split}");
});
