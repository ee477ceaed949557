//! Line-oriented stdin/stdout plumbing shared by `filter` and `canon`.
//!
//! Input is read in batches for speed, but a batch never waits for input that has not arrived:
//! it ends when the reader's buffer holds no further complete line, and output is flushed
//! whenever the next read would block. So `urlseen filter` keeps pace with a slow producer
//! (a crawler writing links one by one) and is still fast on a file.

use std::io::{self, BufRead, BufReader, Read, Write};

/// Largest batch handed to the engine at once.
pub const MAX_BATCH: usize = 4096;

/// Bytes read from the input at once: room for a whole batch of typical URLs (about 70 bytes
/// each). A batch ends where the buffer holds no further complete line, so with the 64 KiB of
/// `BufReader`'s default (and a pipe's) batches were about a thousand lines, and a tree of a
/// thousand leaves took one or two fingerprints per leaf per batch: every leaf locked,
/// gathered and logged for each.
pub const READ_BYTES: usize = 1 << 20;

/// Stdin, read [`READ_BYTES`] at a time: a pipe on stdin is grown to that size first (Linux,
/// best effort: the system's `pipe-max-size` may refuse it), so that a producer ahead of us
/// leaves that much to read at once.
pub fn stdin_reader() -> BufReader<io::StdinLock<'static>> {
    #[cfg(target_os = "linux")]
    {
        #[expect(unsafe_code, reason = "fcntl is a foreign function")]
        // SAFETY: F_SETPIPE_SZ on descriptor 0 only changes the pipe's capacity (or fails with
        // EBADF / EINVAL / EPERM when stdin is not a pipe or the size is refused, which is
        // ignored: a hint); it touches no memory of this process.
        unsafe {
            libc::fcntl(0, libc::F_SETPIPE_SZ, READ_BYTES as libc::c_int);
        }
    }
    BufReader::with_capacity(READ_BYTES, io::stdin().lock())
}

/// Reads line batches from a buffered reader.
#[derive(Debug)]
pub struct LineBatches<R> {
    reader: BufReader<R>,
    line_no: u64,
    eof: bool,
}

/// One input line: its number (1-based) and its bytes without the line ending.
#[derive(Debug, Default, Clone)]
pub struct Line {
    pub no: u64,
    pub bytes: Vec<u8>,
}

/// A batch of lines that keeps its lines' buffers from one batch to the next: reading a line
/// then costs a copy, not an allocation and a free (which were 5% of `filter`'s time).
#[derive(Debug, Default)]
pub struct LineBatch {
    pool: Vec<Line>,
    len: usize,
}

impl LineBatch {
    /// The lines of the last batch read.
    pub fn lines(&self) -> &[Line] {
        &self.pool[..self.len]
    }

    /// The next line to fill, cleared.
    fn next_slot(&mut self) -> &mut Line {
        if self.len == self.pool.len() {
            self.pool.push(Line::default());
        }
        let line = &mut self.pool[self.len];
        line.bytes.clear();
        line
    }
}

impl std::ops::Deref for LineBatch {
    type Target = [Line];

    fn deref(&self) -> &[Line] {
        self.lines()
    }
}

impl<'a> IntoIterator for &'a LineBatch {
    type Item = &'a Line;
    type IntoIter = std::slice::Iter<'a, Line>;

    fn into_iter(self) -> Self::IntoIter {
        self.lines().iter()
    }
}

impl<R: Read> LineBatches<R> {
    pub fn new(reader: BufReader<R>) -> Self {
        LineBatches { reader, line_no: 0, eof: false }
    }

    /// Fills `batch` (emptied first) with the next lines: blocks for the first one only.
    /// Returns `Ok(false)` at end of input with nothing read.
    pub fn next_batch(&mut self, batch: &mut LineBatch) -> io::Result<bool> {
        batch.len = 0;
        while !self.eof && batch.len < MAX_BATCH {
            let first = batch.len == 0;
            let line = batch.next_slot();
            // A whole line already buffered is copied out with one search for its end; only
            // the batch's first line may wait for input (or span buffer refills).
            let buffered = self.reader.buffer();
            if let Some(end) = memchr::memchr(b'\n', buffered) {
                line.bytes.extend_from_slice(&buffered[..=end]);
                self.reader.consume(end + 1);
            } else if !first {
                break;
            } else if self.reader.read_until(b'\n', &mut line.bytes)? == 0 {
                self.eof = true;
                break;
            }
            if line.bytes.last() == Some(&b'\n') {
                line.bytes.pop();
            }
            if line.bytes.last() == Some(&b'\r') {
                line.bytes.pop();
            }
            self.line_no += 1;
            line.no = self.line_no;
            batch.len += 1;
        }
        Ok(batch.len > 0)
    }

    /// Whether the next batch would have to wait for input (time to flush output).
    pub fn would_block(&self) -> bool {
        memchr::memchr(b'\n', self.reader.buffer()).is_none()
    }
}

/// Writes `bytes` and a newline.
pub fn write_line(out: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    out.write_all(bytes)?;
    out.write_all(b"\n")
}

/// Whether an error chain ends in a closed pipe (`urlseen filter | head`): not a failure.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_strip_line_endings_and_number_lines() {
        let input: &[u8] = b"a\r\nb\n\nc";
        let mut batches = LineBatches::new(io::BufReader::new(input));
        let (mut batch, mut got) = (LineBatch::default(), Vec::new());
        while batches.next_batch(&mut batch).unwrap() {
            got.extend(batch.iter().map(|l| (l.no, l.bytes.clone())));
        }
        let want: Vec<(u64, Vec<u8>)> =
            vec![(1, b"a".to_vec()), (2, b"b".to_vec()), (3, vec![]), (4, b"c".to_vec())];
        assert_eq!(got, want);
    }

    /// A reader that hands out at most `step` bytes per read, so lines span buffer refills.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn lines_spanning_reads_and_reused_buffers_come_out_whole() {
        let mut text = Vec::new();
        let mut want = Vec::new();
        for i in 0..500u64 {
            // Long and short lines alternate, so a reused line buffer that kept old bytes
            // would show.
            let line = if i % 2 == 0 {
                format!("https://a.example/{}", "x".repeat(40))
            } else {
                format!("{i}")
            };
            text.extend_from_slice(line.as_bytes());
            text.extend_from_slice(if i % 3 == 0 { b"\r\n" } else { b"\n" });
            want.push((i + 1, line.into_bytes()));
        }
        for step in [1, 7, 64, 1 << 20] {
            let reader = io::BufReader::with_capacity(16, Trickle { data: &text, step });
            let mut batches = LineBatches::new(reader);
            let (mut batch, mut got) = (LineBatch::default(), Vec::new());
            while batches.next_batch(&mut batch).unwrap() {
                got.extend(batch.iter().map(|l| (l.no, l.bytes.clone())));
            }
            assert_eq!(got, want, "reads of {step} bytes");
        }
    }

    #[test]
    fn a_read_of_read_bytes_holds_a_whole_batch_of_typical_urls() {
        // Lines of 100 bytes, longer than most URLs: one read of READ_BYTES gives MAX_BATCH of
        // them, where one of 64 KiB gave 655 (each batch then a fraction of the tree's leaves).
        let line = format!("https://www.example.com/{}", "p".repeat(75));
        let text = format!("{line}\n").repeat(2 * MAX_BATCH);
        let reader = Trickle { data: text.as_bytes(), step: READ_BYTES };
        let mut batches = LineBatches::new(io::BufReader::with_capacity(READ_BYTES, reader));
        let mut batch = LineBatch::default();
        assert!(batches.next_batch(&mut batch).unwrap());
        assert_eq!(batch.len(), MAX_BATCH);
        let small = Trickle { data: text.as_bytes(), step: READ_BYTES };
        let mut batches = LineBatches::new(io::BufReader::with_capacity(1 << 16, small));
        assert!(batches.next_batch(&mut batch).unwrap());
        assert_eq!(batch.len(), (1 << 16) / 100);
    }
}
