//! The slow log, as Redis keeps it: the newest commands that ran for at least
//! `slowlog-log-slower-than` microseconds, at most `slowlog-max-len` of them, read with
//! `SLOWLOG GET`.
//!
//! What is timed is the command's execution, as in Redis: not the time its request waited in
//! the socket or its reply took to be written. A run of pipelined calls the connection executes
//! as one batch (`URL.SEEN`, see [`Command::batched`](crate::Command::batched)) is timed as a
//! whole, so it is one entry: the batch's duration, the first call's arguments, and a last
//! argument `... (N more pipelined calls in this batch)`. Splitting the batch's time evenly
//! among its calls would hide a batch that stalled every client behind it (512 calls of 1 ms
//! each are under the default threshold), and logging each call with the batch's time would
//! flood the log with copies of one event.
//!
//! Arguments are kept as Redis keeps them: at most [`MAX_ARGC`] (the last one then says
//! `... (N more arguments)`), each at most [`MAX_STRING`] bytes (then followed by
//! `... (N more bytes)`). `AUTH`'s arguments and `HELLO`'s password are `(redacted)`.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use parking_lot::Mutex;

/// Redis' default `slowlog-log-slower-than`: 10 ms.
pub const DEFAULT_LOG_SLOWER_THAN_US: i64 = 10_000;
/// Redis' default `slowlog-max-len`.
pub const DEFAULT_MAX_LEN: usize = 128;
/// Redis' `SLOWLOG_ENTRY_MAX_ARGC`: most arguments kept per entry.
pub const MAX_ARGC: usize = 32;
/// Redis' `SLOWLOG_ENTRY_MAX_STRING`: most bytes kept per argument.
pub const MAX_STRING: usize = 128;

/// One slow command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlowlogEntry {
    /// Unique, increasing for the life of the server (`SLOWLOG RESET` does not reset it).
    pub id: u64,
    /// Unix time, in seconds, when the command finished.
    pub timestamp: u64,
    /// How long it ran, in microseconds.
    pub duration_us: u64,
    /// Its arguments, the name first, truncated as Redis does.
    pub argv: Vec<Bytes>,
    /// The client's `ip:port`.
    pub addr: String,
    /// The client's name (`CLIENT SETNAME`), empty if none.
    pub name: Bytes,
}

/// The slow log of a server. The settings are atomics so that they can change while it runs.
#[derive(Debug)]
pub struct Slowlog {
    log_slower_than: AtomicI64,
    max_len: AtomicUsize,
    next_id: AtomicU64,
    entries: Mutex<VecDeque<SlowlogEntry>>,
}

impl Default for Slowlog {
    fn default() -> Self {
        Slowlog::new(DEFAULT_LOG_SLOWER_THAN_US, DEFAULT_MAX_LEN)
    }
}

impl Slowlog {
    /// An empty slow log with Redis' two settings.
    pub fn new(log_slower_than_us: i64, max_len: usize) -> Slowlog {
        Slowlog {
            log_slower_than: AtomicI64::new(log_slower_than_us),
            max_len: AtomicUsize::new(max_len),
            next_id: AtomicU64::new(0),
            entries: Mutex::new(VecDeque::new()),
        }
    }

    /// `slowlog-log-slower-than`, in microseconds (negative: disabled).
    pub fn log_slower_than(&self) -> i64 {
        self.log_slower_than.load(Relaxed)
    }

    /// Changes `slowlog-log-slower-than`.
    pub fn set_log_slower_than(&self, us: i64) {
        self.log_slower_than.store(us, Relaxed);
    }

    /// `slowlog-max-len`.
    pub fn max_len(&self) -> usize {
        self.max_len.load(Relaxed)
    }

    /// Changes `slowlog-max-len`; the oldest entries beyond it are dropped.
    pub fn set_max_len(&self, len: usize) {
        self.max_len.store(len, Relaxed);
        self.entries.lock().truncate(len);
    }

    /// Whether a command that ran for `elapsed` is to be logged.
    pub fn is_slow(&self, elapsed: Duration) -> bool {
        let threshold = self.log_slower_than();
        threshold >= 0 && micros(elapsed) >= threshold.unsigned_abs()
    }

    /// Logs a command if it is slow. `argv` may already be cut to [`MAX_ARGC`] arguments;
    /// `argc` is how many the command had. `extra`, if given, is appended as a last argument
    /// (the note of a batch).
    pub(crate) fn record(
        &self,
        elapsed: Duration,
        argv: &[Bytes],
        argc: usize,
        extra: Option<String>,
        addr: Option<SocketAddr>,
        name: Option<Bytes>,
    ) {
        if !self.is_slow(elapsed) {
            return;
        }
        let max_len = self.max_len();
        let entry = SlowlogEntry {
            id: self.next_id.fetch_add(1, Relaxed),
            timestamp: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
            duration_us: micros(elapsed),
            argv: truncate(argv, argc, extra),
            addr: addr.map_or_else(|| "?:0".to_owned(), |a| a.to_string()),
            name: name.unwrap_or_default(),
        };
        let mut entries = self.entries.lock();
        entries.push_front(entry);
        entries.truncate(max_len);
    }

    /// The newest `count` entries, newest first.
    pub fn get(&self, count: usize) -> Vec<SlowlogEntry> {
        self.entries.lock().iter().take(count).cloned().collect()
    }

    /// How many entries the log holds.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Empties the log (ids go on increasing).
    pub fn reset(&self) {
        self.entries.lock().clear();
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// The arguments worth keeping of a command named `argv[0]`: at most [`MAX_ARGC`] of the
/// command's first ones (Redis never needs more), passwords redacted.
pub(crate) fn keep_args(argv: &[Bytes]) -> Vec<Bytes> {
    let mut kept: Vec<Bytes> = argv.iter().take(MAX_ARGC).cloned().collect();
    let name = kept.first().map(|n| n.to_ascii_lowercase()).unwrap_or_default();
    let redacted = Bytes::from_static(b"(redacted)");
    match name.as_slice() {
        b"auth" => kept.iter_mut().skip(1).for_each(|a| *a = redacted.clone()),
        b"hello" => {
            if let Some(at) = kept.iter().position(|a| a.eq_ignore_ascii_case(b"auth")) {
                kept.iter_mut().skip(at + 1).take(2).for_each(|a| *a = redacted.clone());
            }
        }
        _ => {}
    }
    kept
}

/// Redis' `slowlogCreateEntry`: at most [`MAX_ARGC`] arguments, the last saying how many more
/// there were; each at most [`MAX_STRING`] bytes, then how many more bytes there were. `extra`
/// (a batch's note) takes the last place.
fn truncate(argv: &[Bytes], argc: usize, extra: Option<String>) -> Vec<Bytes> {
    let argc = argc.max(argv.len());
    let room = MAX_ARGC - usize::from(extra.is_some());
    let kept = argc.min(room);
    let mut out: Vec<Bytes> = Vec::with_capacity(kept + 1);
    for (j, arg) in argv.iter().take(kept).enumerate() {
        if kept != argc && j == kept - 1 {
            out.push(Bytes::from(format!("... ({} more arguments)", argc - kept + 1)));
        } else if arg.len() > MAX_STRING {
            let mut cut = arg.get(..MAX_STRING).unwrap_or_default().to_vec();
            cut.extend_from_slice(
                format!("... ({} more bytes)", arg.len() - MAX_STRING).as_bytes(),
            );
            out.push(Bytes::from(cut));
        } else {
            out.push(arg.clone());
        }
    }
    out.extend(extra.map(Bytes::from));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(n: usize) -> Vec<Bytes> {
        (0..n).map(|i| Bytes::from(format!("a{i}"))).collect()
    }

    #[test]
    fn long_commands_are_cut_as_redis_cuts_them() {
        assert_eq!(truncate(&args(32), 32, None), args(32));
        let cut = truncate(&args(32), 40, None);
        assert_eq!(cut.len(), 32);
        assert_eq!(cut[..31], args(31)[..]);
        assert_eq!(cut[31], "... (9 more arguments)");
        let long = Bytes::from(vec![b'x'; 200]);
        let cut = truncate(&[long], 1, None);
        assert_eq!(cut[0].len(), 128 + "... (72 more bytes)".len());
        assert!(cut[0].ends_with(b"x... (72 more bytes)"), "{:?}", cut[0]);
        let cut = truncate(&args(2), 2, Some("... (3 more pipelined calls in this batch)".into()));
        assert_eq!(cut.len(), 3);
        assert_eq!(cut[2], "... (3 more pipelined calls in this batch)");
        let cut = truncate(&args(32), 40, Some("note".into()));
        assert_eq!(cut.len(), 32);
        assert_eq!(cut[30], "... (10 more arguments)");
        assert_eq!(cut[31], "note");
    }

    #[test]
    fn passwords_are_redacted() {
        let auth = keep_args(&[Bytes::from("AUTH"), Bytes::from("user"), Bytes::from("pw")]);
        assert_eq!(auth, ["AUTH", "(redacted)", "(redacted)"]);
        let hello = keep_args(&[
            Bytes::from("hello"),
            Bytes::from("3"),
            Bytes::from("auth"),
            Bytes::from("default"),
            Bytes::from("pw"),
            Bytes::from("SETNAME"),
            Bytes::from("c"),
        ]);
        assert_eq!(hello, ["hello", "3", "auth", "(redacted)", "(redacted)", "SETNAME", "c"]);
        assert_eq!(keep_args(&args(40)).len(), MAX_ARGC);
    }

    #[test]
    fn thresholds_and_length_as_redis() {
        let log = Slowlog::new(100, 2);
        let addr = Some("127.0.0.1:5000".parse().unwrap());
        log.record(Duration::from_micros(99), &args(1), 1, None, addr, None);
        assert!(log.is_empty());
        for _ in 0..3 {
            log.record(Duration::from_micros(100), &args(1), 1, None, addr, None);
        }
        let got = log.get(10);
        assert_eq!(got.iter().map(|e| e.id).collect::<Vec<_>>(), [2, 1]);
        assert_eq!(got[0].duration_us, 100);
        assert_eq!(got[0].addr, "127.0.0.1:5000");
        log.reset();
        assert_eq!(log.len(), 0);
        log.set_log_slower_than(-1);
        log.record(Duration::from_secs(1), &args(1), 1, None, addr, None);
        assert!(log.is_empty());
        log.set_log_slower_than(0);
        log.record(Duration::ZERO, &args(1), 1, None, addr, None);
        assert_eq!(log.get(1)[0].id, 3, "ids go on after a reset");
    }
}
