//! Feeds arbitrary bytes to a restore (`BF.LOADCHUNK` takes chunks from any client): the input
//! is cut into the bodies of a header chunk and a data chunk, each framed as a dump chunk is
//! (magic, version, kind, flags, length, checksum) so that the bodies reach the parsers behind
//! the checksum, then loaded into an in-memory `Db` in that order. The raw input is also given
//! to the header decoder as it is.
//!
//! Properties: nothing panics or aborts (a huge allocation is an abort under the fuzzer's RSS
//! limit); a restore that is refused leaves no namespace behind.

#![no_main]

use libfuzzer_sys::fuzz_target;
use urlseen_engine::Db;
use urlseen_engine::dump::Header;
use urlseen_filter::frame::Format;

/// A dump chunk's framing, as `crates/engine/src/dump.rs` writes it.
const CHUNK: Format = Format { name: "dump chunk", magic: *b"URLSEEND", version: 1, oldest: 1 };
const KIND_HEADER: u8 = 1;
const KIND_DATA: u8 = 2;

fn frame(kind: u8, flags: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    CHUNK.write_header(&mut out);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    Format::seal(&mut out, 0);
    out
}

fuzz_target!(|data: &[u8]| {
    let _ = Header::decode(data);
    let Some((&control, data)) = data.split_first() else { return };
    let cut = usize::from(control & 0x7f).min(data.len());
    let (header, body) = data.split_at(cut);
    let db = Db::in_memory();
    let loaded = db.load_chunk("fuzz", 1, &frame(KIND_HEADER, 0, header));
    if loaded.is_ok() {
        let last = db.load_chunk("fuzz", 2, &frame(KIND_DATA, control >> 7, body));
        if last.is_err() {
            assert!(db.namespace("fuzz").is_none(), "a refused restore left a namespace");
        }
    }
});
