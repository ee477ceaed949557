//! Line-oriented stdin/stdout plumbing shared by `filter` and `canon`.
//!
//! Input is read in batches for speed, but a batch never waits for input that has not arrived:
//! it ends when the reader's buffer holds no further complete line, and output is flushed
//! whenever the next read would block. So `urlseen filter` keeps pace with a slow producer
//! (a crawler writing links one by one) and is still fast on a file.

use std::io::{self, BufRead, BufReader, Read, Write};

/// Largest batch handed to the engine at once.
pub const MAX_BATCH: usize = 4096;

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

impl<R: Read> LineBatches<R> {
    pub fn new(reader: BufReader<R>) -> Self {
        LineBatches { reader, line_no: 0, eof: false }
    }

    /// Fills `batch` (cleared first) with the next lines: blocks for the first one only.
    /// Returns `Ok(false)` at end of input with nothing read.
    pub fn next_batch(&mut self, batch: &mut Vec<Line>) -> io::Result<bool> {
        batch.clear();
        while !self.eof && batch.len() < MAX_BATCH {
            if !batch.is_empty() && !self.reader.buffer().contains(&b'\n') {
                break;
            }
            let mut line = Line::default();
            if self.reader.read_until(b'\n', &mut line.bytes)? == 0 {
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
            batch.push(line);
        }
        Ok(!batch.is_empty())
    }

    /// Whether the next batch would have to wait for input (time to flush output).
    pub fn would_block(&self) -> bool {
        !self.reader.buffer().contains(&b'\n')
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
        let (mut batch, mut got) = (Vec::new(), Vec::new());
        while batches.next_batch(&mut batch).unwrap() {
            got.extend(batch.iter().map(|l| (l.no, l.bytes.clone())));
        }
        let want: Vec<(u64, Vec<u8>)> =
            vec![(1, b"a".to_vec()), (2, b"b".to_vec()), (3, vec![]), (4, b"c".to_vec())];
        assert_eq!(got, want);
    }
}
