//! A namespace's `meta` file: its name, options and canonicalization version, written once when
//! it is created (last, so a directory without it is an unfinished create).

use std::path::Path;

use urlseen_canon::{CANON_VERSION, Options as CanonOptions, Profile};
use urlseen_filter::frame::Format;

use super::{DEFAULT_GENERATIONS, NamespaceOptions, SplitMode, SplitPolicy};
use crate::error::{Error, Result};

/// Version 2 added the split growth; a version 1 meta (0.1.0) reads as growth 1, the uniform
/// leaves it was made with. Version 3 added the recrawl window; it is written only for a
/// namespace that has one, so that a directory without any stays readable by older builds, and
/// versions 1 and 2 read as "no window". Version 4 added `keep_urls` (written only for a
/// namespace that keeps its URLs, the same way).
const META_VERSION: u16 = 4;

/// A namespace meta's framing: magic `URLSEENM`, versions 1 to [`META_VERSION`].
const META_FORMAT: Format =
    Format { name: "namespace meta", magic: *b"URLSEENM", version: META_VERSION, oldest: 1 };

/// ```text
/// "URLSEENM" | version u16 | [0; 6] | canon version u32 | name len u32 | name
/// capacity u64 | fpr f64 | leaf bits u64 (effective) | seed u64
/// profile len u8 | profile | canon flags u8 | fanout u32 | threshold f64 | step u64 | mode u8
/// exact u8 | counting u8 | growth u32 (version 2)
/// recrawl window ms u64 | generations u32 (version 3, only for a namespace with a window;
/// version 4: always, window 0 for none)
/// flags u8: bit 0 keep_urls (version 4, only for a namespace that keeps its URLs)
/// xxh3_64 of everything before
/// ```
pub(crate) fn encode_meta(name: &str, o: &NamespaceOptions) -> Vec<u8> {
    let mut out = Vec::new();
    // The oldest version that can say it: a build that predates a field can still read a
    // namespace that does not use it.
    let version: u16 = match (o.keep_urls, o.recrawl_after.is_some()) {
        (true, _) => 4,
        (false, true) => 3,
        (false, false) => 2,
    };
    Format { version, ..META_FORMAT }.write_header(&mut out);
    out.extend_from_slice(&[0; 6]);
    out.extend_from_slice(&CANON_VERSION.to_le_bytes());
    out.extend_from_slice(&(name.len() as u32).to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&o.capacity.to_le_bytes());
    out.extend_from_slice(&o.fpr.to_le_bytes());
    out.extend_from_slice(&o.effective_leaf_bits().to_le_bytes());
    out.extend_from_slice(&o.seed.to_le_bytes());
    let profile = o.canon.profile.name();
    out.push(profile.len() as u8);
    out.extend_from_slice(profile.as_bytes());
    let c = &o.canon;
    out.push(
        u8::from(c.keep_fragments)
            | u8::from(c.keep_blank_values) << 1
            | u8::from(c.sort_query) << 2
            | u8::from(c.strip_tracking) << 3,
    );
    out.extend_from_slice(&o.split.fanout.to_le_bytes());
    out.extend_from_slice(&o.split.threshold.to_le_bytes());
    out.extend_from_slice(&(o.split.step as u64).to_le_bytes());
    out.push(match o.split.mode {
        SplitMode::Background => 0,
        SplitMode::Inline => 1,
        SplitMode::Never => 2,
    });
    out.push(u8::from(o.exact));
    out.push(u8::from(o.counting));
    out.extend_from_slice(&o.split.growth.to_le_bytes());
    if version >= 3 {
        let window = o.recrawl_after.map_or(0, |w| w.as_millis() as u64);
        out.extend_from_slice(&window.to_le_bytes());
        out.extend_from_slice(&o.generations.to_le_bytes());
    }
    if version >= 4 {
        out.push(u8::from(o.keep_urls));
    }
    Format::seal(&mut out, 0);
    out
}

pub(crate) fn decode_meta(path: &Path, bytes: &[u8]) -> Result<(String, NamespaceOptions, u32)> {
    let bad = |reason: &str| Error::corrupt(path, reason);
    let version = META_FORMAT.check_header(bytes).map_err(|e| Error::format(path, e))?;
    let body = META_FORMAT.unseal(bytes).map_err(|e| Error::format(path, e))?;
    let mut r = META_FORMAT.reader(body);
    let err = |e| Error::format(path, e);
    r.take(urlseen_filter::frame::HEADER_LEN + 6).map_err(err)?;
    let canon_version = r.u32().map_err(err)?;
    let name_len = r.u32().map_err(err)? as usize;
    let name = String::from_utf8(r.take(name_len).map_err(err)?.to_vec())
        .map_err(|_| bad("name is not UTF-8"))?;
    let capacity = r.u64().map_err(err)?;
    let fpr = f64::from_bits(r.u64().map_err(err)?);
    let leaf_bits = r.u64().map_err(err)?;
    let seed = r.u64().map_err(err)?;
    let profile_len = r.u8().map_err(err)? as usize;
    let profile = std::str::from_utf8(r.take(profile_len).map_err(err)?)
        .map_err(|_| bad("profile is not UTF-8"))?;
    let profile: Profile = profile.parse().map_err(|_| bad("unknown profile"))?;
    let flags = r.u8().map_err(err)?;
    let mut canon = CanonOptions::new(profile);
    canon.keep_fragments = flags & 1 != 0;
    canon.keep_blank_values = flags & 2 != 0;
    canon.sort_query = flags & 4 != 0;
    canon.strip_tracking = flags & 8 != 0;
    let fanout = r.u32().map_err(err)?;
    let threshold = f64::from_bits(r.u64().map_err(err)?);
    let step = r.u64().map_err(err)? as usize;
    let mode = match r.u8().map_err(err)? {
        0 => SplitMode::Background,
        1 => SplitMode::Inline,
        2 => SplitMode::Never,
        _ => return Err(bad("unknown split mode")),
    };
    let exact = r.u8().map_err(err)? != 0;
    let counting = r.u8().map_err(err)? != 0;
    let growth = if version >= 2 { r.u32().map_err(err)? } else { 1 };
    let (recrawl_after, generations) = if version >= 3 {
        let ms = r.u64().map_err(err)?;
        let g = r.u32().map_err(err)?;
        let window = (version == 3 || ms != 0).then(|| std::time::Duration::from_millis(ms));
        (window, g)
    } else {
        (None, DEFAULT_GENERATIONS)
    };
    let keep_urls = if version >= 4 {
        let flags = r.u8().map_err(err)?;
        if flags & !1 != 0 {
            return Err(bad("unknown option flags"));
        }
        flags & 1 != 0
    } else {
        false
    };
    if !r.rest().is_empty() {
        return Err(bad("trailing bytes"));
    }
    let options = NamespaceOptions {
        capacity,
        fpr,
        leaf_bits: Some(leaf_bits),
        canon,
        seed,
        split: SplitPolicy { fanout, threshold, step, mode, growth },
        exact,
        counting,
        recrawl_after,
        generations,
        keep_urls,
    };
    options.validate().map_err(|e| bad(&format!("stored options are invalid: {e}")))?;
    Ok((name, options, canon_version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_round_trips_and_rejects_damage() {
        let mut o =
            NamespaceOptions { capacity: 12_345, fpr: 0.002, ..NamespaceOptions::default() };
        o.canon.strip_tracking = true;
        o.canon.keep_blank_values = false;
        let bytes = encode_meta("crawl/42 ü", &o);
        let path = Path::new("meta");
        let (name, back, v) = decode_meta(path, &bytes).unwrap();
        assert_eq!(name, "crawl/42 ü");
        assert_eq!(v, CANON_VERSION);
        assert_eq!(back.capacity, 12_345);
        assert_eq!(back.fpr, 0.002);
        assert_eq!(back.canon, o.canon);
        assert_eq!(back.leaf_bits, Some(o.effective_leaf_bits()));
        assert_eq!(back.split, o.split);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(decode_meta(path, &bad).is_err(), "flip at {i} accepted");
        }
        for cut in 0..bytes.len() {
            assert!(decode_meta(path, &bytes[..cut]).is_err());
        }
    }

    #[test]
    fn meta_keeps_keep_urls_in_version_4_and_older_versions_stay() {
        let path = Path::new("meta");
        let plain = NamespaceOptions::default();
        let keep = NamespaceOptions { keep_urls: true, ..NamespaceOptions::default() };
        let window = NamespaceOptions {
            recrawl_after: Some(std::time::Duration::from_secs(80)),
            ..NamespaceOptions::default()
        };
        for (o, version) in [(&plain, 2u16), (&window, 3), (&keep, 4)] {
            let bytes = encode_meta("n", o);
            assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), version);
            let (_, back, _) = decode_meta(path, &bytes).unwrap();
            assert_eq!(back.keep_urls, o.keep_urls);
            assert_eq!(back.recrawl_after, o.recrawl_after);
        }
    }
}
