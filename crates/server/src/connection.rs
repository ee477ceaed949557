//! [`Connection`]: buffered reading of requests and writing of replies over one stream.
//!
//! Requests are read into one buffer and taken out of it by the incremental
//! [`RequestParser`]; replies are encoded into one output buffer and written when a batch of
//! pipelined requests has been executed, or earlier when the output passes [`WRITE_CHUNK`]
//! bytes. Writing waits for the socket, so a client that does not read its replies stops being
//! read from: the output buffer stays bounded (backpressure).

use std::io;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::config::Limits;
use crate::error::ProtocolError;
use crate::frame::{Frame, Protocol};
use crate::request::RequestParser;

/// Replies are written out once this many bytes are waiting, even in the middle of a batch.
pub const WRITE_CHUNK: usize = 64 * 1024;
/// The usual size of one read.
const READ_CHUNK: usize = 16 * 1024;
/// The largest single read, used while receiving a big argument.
const MAX_READ_CHUNK: usize = 1 << 20;
/// Buffers that grew past this are given back to the allocator once empty.
const SHRINK_ABOVE: usize = 1 << 20;

/// A client connection: a stream and its input and output buffers.
#[derive(Debug)]
pub struct Connection<T> {
    stream: T,
    input: BytesMut,
    output: BytesMut,
    parser: RequestParser,
}

impl<T: AsyncRead + AsyncWrite + Unpin> Connection<T> {
    /// Wraps a stream.
    pub fn new(stream: T) -> Connection<T> {
        Connection {
            stream,
            input: BytesMut::with_capacity(READ_CHUNK),
            output: BytesMut::with_capacity(READ_CHUNK),
            parser: RequestParser::new(),
        }
    }

    /// Reads more bytes from the stream into the input buffer; `Ok(0)` at end of stream.
    ///
    /// Cancel-safe: dropping the future loses no data.
    ///
    /// # Errors
    /// The stream's read errors.
    pub async fn read(&mut self) -> io::Result<usize> {
        if self.input.is_empty() && self.input.capacity() > SHRINK_ABOVE {
            self.input = BytesMut::new();
        }
        let want =
            self.parser.wanted(self.input.len()).unwrap_or(0).clamp(READ_CHUNK, MAX_READ_CHUNK);
        self.input.reserve(want);
        self.stream.read_buf(&mut self.input).await
    }

    /// The next complete request in the input buffer, if any. See [`RequestParser::parse`].
    ///
    /// # Errors
    /// A [`ProtocolError`]: reply with it and close.
    pub fn next_request(
        &mut self,
        limits: &Limits,
        authenticated: bool,
    ) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        self.parser.parse(&mut self.input, limits, authenticated)
    }

    /// Bytes of request received and not executed yet: Redis' query buffer.
    pub fn query_buffer_len(&self) -> usize {
        self.input.len() + self.parser.held_bytes()
    }

    /// Free room in the input buffer (Redis' `qbuf-free`).
    pub fn query_buffer_free(&self) -> usize {
        self.input.capacity() - self.input.len()
    }

    /// Capacity of the output buffer (Redis' `rbs`).
    pub fn output_capacity(&self) -> usize {
        self.output.capacity()
    }

    /// Encodes a reply into the output buffer.
    pub fn write_frame(&mut self, frame: &Frame, protocol: Protocol) {
        frame.encode(protocol, &mut self.output);
    }

    /// Bytes of replies not written yet.
    pub fn pending_output(&self) -> usize {
        self.output.len()
    }

    /// Writes every pending reply and flushes the stream; returns the number of bytes written.
    ///
    /// # Errors
    /// The stream's write errors.
    pub async fn flush(&mut self) -> io::Result<usize> {
        let n = self.output.len();
        if n > 0 {
            self.stream.write_all(&self.output).await?;
            self.output.clear();
            if self.output.capacity() > SHRINK_ABOVE {
                self.output = BytesMut::with_capacity(READ_CHUNK);
            }
        }
        self.stream.flush().await?;
        Ok(n)
    }

    /// Ends the connection so that the client reads every reply sent: shuts the write side
    /// down, then discards what the client still sends for a moment (closing a socket with
    /// unread input makes the kernel reset it, and a reset can destroy replies the client has
    /// not read yet).
    pub async fn close(&mut self) {
        let _ = self.stream.shutdown().await;
        let mut scratch = [0u8; 4096];
        let drain = async {
            let mut total = 0usize;
            while total < 1 << 20 {
                match self.stream.read(&mut scratch).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => total += n,
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_millis(250), drain).await;
    }

    /// The stream.
    pub fn get_ref(&self) -> &T {
        &self.stream
    }
}
