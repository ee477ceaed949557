//! The log's records on disk: their kinds, their encoding, and the parse that recovery runs
//! (a torn tail cut, damage in the middle refused).
use super::{Arc, Error, FORMAT, Format, HEADER_LEN, Path, Result, Storage};

/// Largest record payload accepted on read: a bigger length field is corruption.
pub(super) const MAX_PAYLOAD: u32 = 64 << 20;

/// What a record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// Fingerprints recorded as new. (Kind 2 was set aside for "forgotten" and never written
    /// by any build: a forget rewrites the leaves and logs kind 6 or 7. A record of kind 2 is
    /// read as damage, as any unknown kind is.)
    Recorded = 1,
    /// Fingerprints answered "seen" on a Bloom positive that may have been false, logged so
    /// they stay "seen" through splits (the tree's *kept* records). Not URLs recorded.
    Kept = 3,
    /// [`Self::Recorded`], each fingerprint with the hash of its URL's host
    /// ([`Record::hosts`]).
    RecordedHosts = 4,
    /// [`Self::Kept`], each fingerprint with the hash of its URL's host.
    KeptHosts = 5,
    /// Every record so far whose host hash is `hosts[0]` is forgotten (see
    /// `Namespace::forget_host`): replay drops them from the tree at this point.
    ForgetHost = 6,
    /// Every record so far whose host hash is `hosts[0]` and whose fingerprint is one of
    /// `fingerprints`, and every kept record of that host, is forgotten (see
    /// `Namespace::forget_prefix`): replay drops them from the tree at this point.
    ForgetUrls = 7,
    /// A record of the data directory's small-namespace journal
    /// (`crate::namespace::small_journal`), whose payload ([`Record::fingerprints`]) is that
    /// journal's words. Found only in that file: in a namespace's log it is damage.
    Journal = 8,
}

/// One record read back from a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// What happened.
    pub kind: RecordKind,
    /// To which fingerprints.
    pub fingerprints: Vec<u64>,
    /// Kinds 4 and 5: the host hash of each fingerprint; kind 6: the host forgotten. Empty
    /// for the other kinds (host unknown, 0).
    pub hosts: Vec<u32>,
    /// Log offset just past this record.
    pub end: u64,
}

pub(super) fn encode_record(
    out: &mut Vec<u8>,
    kind: RecordKind,
    fingerprints: &[u64],
    hosts: &[u32],
) {
    let hosts_len = (hosts.len() * 4).div_ceil(8) * 8;
    let len = (fingerprints.len() * 8 + hosts_len) as u32;
    let start = out.len();
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&[kind as u8, 0, 0, 0]);
    for fp in fingerprints {
        out.extend_from_slice(&fp.to_le_bytes());
    }
    for host in hosts {
        out.extend_from_slice(&host.to_le_bytes());
    }
    if hosts.len() % 2 == 1 {
        out.extend_from_slice(&[0; 4]);
    }
    Format::seal(out, start);
}

/// A bad or incomplete record further than this from the end of the log cannot be the torn
/// tail of one write (group commit writes far less at once): it is damage in the middle.
pub(super) const MAX_TORN_TAIL: u64 = 256 << 20;

/// Reads a log as a stream: checks the records that end after `from`, hands them to
/// `on_record`, and returns the offset where valid data ends and the bytes after it (a torn
/// tail). What follows a bad record is read whole only to check that no valid record follows
/// it (see [`parse`]).
///
/// When a valid record starts at `from` (a checkpoint's offset: the snapshot and the leaf
/// files hold every record before it), reading starts there: a reopen reads what came after
/// the last checkpoint, not the whole history (at 10⁹ URLs the log is tens of GB and reading
/// it took most of a minute). `from` = 0 reads and checks every record (`urlseen check`).
pub(super) fn parse_stream(
    storage: &Arc<dyn Storage>,
    path: &Path,
    from: u64,
    on_record: &mut dyn FnMut(Record),
) -> Result<(u64, u64)> {
    let missing = || Error::corrupt(path, "the fingerprint log is missing");
    let len =
        storage.file_len(path).map_err(|e| Error::io("read log", path, e))?.ok_or_else(missing)?;
    let mut header = [0u8; HEADER_LEN as usize];
    let got = if len < HEADER_LEN {
        0
    } else {
        storage.read_at(path, 0, &mut header).map_err(|e| Error::io("read log", path, e))?
    };
    check_header(path, &header[..got])?;
    let start = if from > HEADER_LEN && record_starts_at(storage, path, from, len)? {
        from
    } else {
        HEADER_LEN
    };
    let mut r = storage
        .open_read_from(path, start)
        .map_err(|e| Error::io("read log", path, e))?
        .ok_or_else(missing)?;
    let mut pos = start;
    let mut record = Vec::new();
    while pos < len {
        let mut head = [0u8; 8];
        let payload = if len - pos >= 8 && r.read_exact(&mut head).is_ok() {
            let n = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
            (n <= MAX_PAYLOAD && n % 8 == 0 && pos + 16 + u64::from(n) <= len).then_some(n)
        } else {
            None
        };
        let parsed = payload.and_then(|n| {
            record.clear();
            record.extend_from_slice(&head);
            record.resize(16 + n as usize, 0);
            r.read_exact(&mut record[8..]).ok()?;
            parse_record(&record)
        });
        let Some((kind, fingerprints, hosts, used)) = parsed else {
            // The rest of the file is the torn tail, or damage: read it whole to tell which.
            let rest = len - pos;
            if rest > MAX_TORN_TAIL {
                return Err(Error::corrupt(
                    path,
                    &format!("bad record at offset {pos}, with {rest} bytes after it"),
                ));
            }
            let mut tail = vec![0u8; rest as usize];
            let got = storage
                .read_at(path, pos, &mut tail)
                .map_err(|e| Error::io("read log", path, e))?;
            tail.truncate(got);
            if let Some(at) = next_valid_record(&tail, 0) {
                return Err(Error::corrupt(
                    path,
                    &format!(
                        "bad record at offset {pos}, with a valid record at offset {} after it",
                        pos + at as u64
                    ),
                ));
            }
            return Ok((pos, rest));
        };
        pos += used as u64;
        if pos > from {
            on_record(Record { kind, fingerprints, hosts, end: pos });
        }
    }
    Ok((pos, 0))
}

/// Whether a valid record starts at `at` of the log at `path` (`len` bytes long), or `at` is
/// its end.
pub(super) fn record_starts_at(
    storage: &Arc<dyn Storage>,
    path: &Path,
    at: u64,
    len: u64,
) -> Result<bool> {
    if at == len {
        return Ok(true);
    }
    let mut head = [0u8; 8];
    if at > len || len - at < 16 {
        return Ok(false);
    }
    storage.read_at(path, at, &mut head).map_err(|e| Error::io("read log", path, e))?;
    let n = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    if n > MAX_PAYLOAD || n % 8 != 0 || at + 16 + u64::from(n) > len {
        return Ok(false);
    }
    let mut record = vec![0u8; 16 + n as usize];
    let got = storage.read_at(path, at, &mut record).map_err(|e| Error::io("read log", path, e))?;
    Ok(got == record.len() && parse_record(&record).is_some())
}

pub(super) fn check_header(path: &Path, bytes: &[u8]) -> Result<()> {
    FORMAT.check_header(bytes).map_err(|e| Error::format(path, e))?;
    if bytes.len() < HEADER_LEN as usize {
        let e = FORMAT.truncated("header", HEADER_LEN as usize, bytes.len());
        return Err(Error::format(path, e));
    }
    Ok(())
}

/// The offset of the first complete, valid record after `pos`. Records start 8-aligned (the
/// header and every record are multiples of 8 bytes), so only those offsets are tried.
pub(super) fn next_valid_record(bytes: &[u8], pos: usize) -> Option<usize> {
    (pos + 8..bytes.len()).step_by(8).find(|&at| parse_record(&bytes[at..]).is_some())
}

/// One record at the start of `bytes`: its kind, fingerprints and length. `None` if it is
/// incomplete (runs past the end) or complete but wrong (length, checksum, reserved bytes or
/// kind): recovery treats the two alike (see [`parse`]).
pub(super) fn parse_record(bytes: &[u8]) -> Option<(RecordKind, Vec<u64>, Vec<u32>, usize)> {
    let head = bytes.get(..8)?;
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    if len > MAX_PAYLOAD || len % 8 != 0 {
        return None;
    }
    let total = 8 + len as usize + 8;
    let record = bytes.get(..total)?;
    let (body, tail) = record.split_at(total - 8);
    if FORMAT.verify(body, tail).is_err() || head[5..8] != [0, 0, 0] {
        return None;
    }
    let kind = match head[4] {
        1 => RecordKind::Recorded,
        3 => RecordKind::Kept,
        4 => RecordKind::RecordedHosts,
        5 => RecordKind::KeptHosts,
        6 => RecordKind::ForgetHost,
        7 => RecordKind::ForgetUrls,
        8 => RecordKind::Journal,
        _ => return None,
    };
    let payload = &body[8..];
    let (n, hosts_at, host_count) = match kind {
        RecordKind::RecordedHosts | RecordKind::KeptHosts => {
            let n = payload.len() / 12;
            if payload.len() != 12 * n + (n % 2) * 4 {
                return None;
            }
            (n, 8 * n, n)
        }
        RecordKind::ForgetHost => {
            if payload.len() != 8 || payload[4..] != [0, 0, 0, 0] {
                return None;
            }
            (0, 0, 1)
        }
        RecordKind::ForgetUrls => {
            // The fingerprints, then the host and 4 bytes of padding.
            let n = payload.len().checked_sub(8)? / 8;
            if payload.len() != 8 * n + 8 || payload[8 * n + 4..] != [0, 0, 0, 0] {
                return None;
            }
            (n, 8 * n, 1)
        }
        _ => (payload.len() / 8, payload.len(), 0),
    };
    let word = |c: &[u8]| u64::from_le_bytes(c.try_into().unwrap_or_default());
    let fingerprints = payload[..8 * n].chunks_exact(8).map(word).collect();
    let hosts = payload[hosts_at..hosts_at + 4 * host_count]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap_or_default()))
        .collect();
    Some((kind, fingerprints, hosts, total))
}
