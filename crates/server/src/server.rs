//! The accept loop, the per-connection loop, and graceful shutdown.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tracing::{debug, error, info, warn};

use crate::client::{ClientInfo, ConnState};
use crate::config::{Config, UNAUTHENTICATED_MAX_QUERY_BUFFER};
use crate::connection::{Connection, WRITE_CHUNK};
use crate::dispatch::{Dispatch, MAX_BATCH, Outcome};
use crate::error::{DENIED, MAX_CLIENTS, ProtocolError};
use crate::metrics::Metrics;
use crate::transaction::Hold;

// Where it was before it had a module of its own, for the paths that name it here.
pub use crate::state::ServerState;

/// Serves RESP on `listener` until `shutdown` completes, then shuts down gracefully.
///
/// Each client gets a task. At most [`Config::maxclients`] are served at once; one more is
/// answered `-ERR max number of clients reached` and closed. When `shutdown` completes the
/// listener is closed (new connections are refused), every connection executes and answers the
/// requests it has already received, then closes; `run` returns once all are closed, or after
/// [`Config::shutdown_grace`], cutting the remaining ones.
///
/// # Errors
/// Only if the listener's address cannot be read; accept errors (out of file descriptors, …)
/// are logged and retried.
///
/// # Examples
///
/// ```no_run
/// use std::sync::Arc;
/// use urlseen_server::{Config, Dispatch, run};
///
/// # async fn example() -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:6380").await?;
/// let dispatch = Arc::new(Dispatch::new(()));
/// let (_stop, stopped) = tokio::sync::oneshot::channel::<()>(); // fire `_stop` on SIGTERM
/// run(listener, Config::default(), dispatch, async {
///     let _ = stopped.await;
/// })
/// .await
/// # }
/// ```
pub async fn run<S>(
    listener: TcpListener,
    config: Config,
    dispatch: Arc<Dispatch<S>>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()>
where
    S: Send + Sync + 'static,
{
    let local = listener.local_addr()?;
    let grace = config.shutdown_grace;
    let permits = Arc::new(Semaphore::new(config.maxclients.min(Semaphore::MAX_PERMITS)));
    let server = Arc::new(ServerState::new(config, dispatch.metrics().clone(), Some(local)));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    tokio::pin!(shutdown);
    info!(addr = %local, "RESP server listening");

    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                if let Err(e) = joined
                    && e.is_panic()
                {
                    error!(error = %e, "connection task panicked");
                }
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) if server.config().protected_refuses(peer.ip()) => {
                    server.metrics().connections_rejected.fetch_add(1, Relaxed);
                    warn!(%peer, "protected mode: refusing a client from beyond loopback");
                    tasks.spawn(refuse(stream, DENIED));
                }
                Ok((stream, peer)) => match permits.clone().try_acquire_owned() {
                    Ok(permit) => {
                        let id = server.next_client_id();
                        let (dispatch, server, stop) = (dispatch.clone(), server.clone(), stop_rx.clone());
                        tasks.spawn(async move {
                            client_task(stream, peer, id, &dispatch, &server, stop).await;
                            drop(permit);
                        });
                    }
                    Err(_) => {
                        server.metrics().connections_rejected.fetch_add(1, Relaxed);
                        warn!(%peer, "max number of clients reached; refusing a connection");
                        tasks.spawn(refuse(stream, MAX_CLIENTS));
                    }
                },
                Err(e) => {
                    // Usually out of file descriptors: wait instead of spinning.
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }

    drop(listener);
    let _ = stop_tx.send(true);
    info!(connections = tasks.len(), "shutting down: draining connections");
    let drained = tokio::time::timeout(grace, async {
        while let Some(joined) = tasks.join_next().await {
            if let Err(e) = joined
                && e.is_panic()
            {
                error!(error = %e, "connection task panicked");
            }
        }
    })
    .await;
    if drained.is_err() {
        warn!(remaining = tasks.len(), ?grace, "grace period over: closing remaining connections");
        tasks.shutdown().await;
    }
    info!("RESP server stopped");
    Ok(())
}

/// Tells a refused client why (`error`: over `maxclients`, or protected mode), then closes.
async fn refuse(mut stream: TcpStream, error: &'static str) {
    let mut reply = Vec::with_capacity(error.len() + 3);
    reply.push(b'-');
    reply.extend_from_slice(error.as_bytes());
    reply.extend_from_slice(b"\r\n");
    let write = async {
        stream.write_all(&reply).await?;
        stream.flush().await
    };
    if tokio::time::timeout(Duration::from_secs(1), write).await.is_ok() {
        Connection::new(stream).close().await;
    }
}

/// Counts a connection in the metrics for as long as it lives.
struct Live<'a>(&'a Metrics);

impl<'a> Live<'a> {
    fn new(metrics: &'a Metrics) -> Live<'a> {
        metrics.connections_current.fetch_add(1, Relaxed);
        metrics.connections_total.fetch_add(1, Relaxed);
        Live(metrics)
    }
}

impl Drop for Live<'_> {
    fn drop(&mut self) {
        self.0.connections_current.fetch_sub(1, Relaxed);
    }
}

async fn client_task<S: Send + Sync + 'static>(
    stream: TcpStream,
    peer: SocketAddr,
    id: u64,
    dispatch: &Dispatch<S>,
    server: &Arc<ServerState>,
    stop: watch::Receiver<bool>,
) {
    let _live = Live::new(server.metrics());
    let _ = stream.set_nodelay(true);
    let info = Arc::new(ClientInfo::new(id, Some(peer), stream.local_addr().ok()));
    #[cfg(unix)]
    info.set_fd(i64::from(std::os::fd::AsRawFd::as_raw_fd(&stream)));
    info.touch();
    let _registered = server.client_registry().register(info.clone());
    let mut state = ConnState::new(info, server.config().requirepass.is_none());
    let mut conn = Connection::new(stream);
    debug!(id, %peer, "client connected");
    let end = serve(&mut conn, &mut state, dispatch, server, stop).await;
    match end {
        Ok(End::Close) => conn.close().await,
        Ok(End::Drop) => {}
        Err(e) => debug!(id, error = %e, "connection error"),
    }
    debug!(id, %peer, "client disconnected");
}

/// How a connection ends.
#[derive(Debug)]
enum End {
    /// Replies were written: close so that the client reads them.
    Close,
    /// Drop the socket at once.
    Drop,
}

/// The connection loop: execute every complete request in the input buffer, write the replies
/// with one flush per batch, read more; until the client leaves, quits, errs or the server stops.
async fn serve<S, T>(
    conn: &mut Connection<T>,
    state: &mut ConnState,
    dispatch: &Dispatch<S>,
    server: &ServerState,
    mut stop: watch::Receiver<bool>,
) -> io::Result<End>
where
    S: Send + Sync + 'static,
    T: AsyncRead + AsyncWrite + Unpin,
{
    let config = server.config();
    let metrics = server.metrics();
    let idle = config.idle_timeout.filter(|d| !d.is_zero());
    // A request read ahead while collecting a batch, to run after it.
    let mut pending: Option<Vec<Bytes>> = None;
    // This client's share of the server's query buffers, given back when it goes.
    let mut share = QueryBufferShare { total: &server.query_buffers, mine: 0 };
    // The gate, held shared across the requests of one read; let go before any wait on the
    // client, so that an `EXEC` elsewhere never waits on this client's network.
    let mut hold = Hold::new(&server.gate);
    loop {
        loop {
            let argv = match pending.take() {
                Some(argv) => argv,
                None => match conn.next_request(&config.limits, state.is_authenticated()) {
                    Ok(Some(argv)) if argv.is_empty() => continue,
                    Ok(Some(argv)) => argv,
                    Ok(None) => break,
                    Err(e) => {
                        hold.release();
                        return fail(conn, state, metrics, idle, &e).await;
                    }
                },
            };
            let batch_index = if state.in_multi() { None } else { dispatch.batch_index(&argv) };
            if let Some(index) = batch_index {
                // Consecutive pipelined calls of a batchable command run as one batch. They
                // change no connection state, so the requests after them parse as they would
                // have one by one. Inside MULTI each is queued one by one instead.
                let mut batch = vec![argv];
                let mut framing_error = None;
                while batch.len() < MAX_BATCH {
                    match conn.next_request(&config.limits, state.is_authenticated()) {
                        Ok(Some(next)) if next.is_empty() => {}
                        Ok(Some(next)) if dispatch.batch_index(&next) == Some(index) => {
                            batch.push(next)
                        }
                        Ok(Some(next)) => {
                            pending = Some(next);
                            break;
                        }
                        Ok(None) => break,
                        Err(e) => {
                            framing_error = Some(e);
                            break;
                        }
                    }
                }
                for reply in dispatch.execute_batch(server, state, index, batch, &mut hold).await {
                    conn.write_frame(&reply, state.protocol());
                }
                if let Some(e) = framing_error {
                    hold.release();
                    return fail(conn, state, metrics, idle, &e).await;
                }
            } else {
                match dispatch.execute(server, state, argv, &mut hold).await {
                    Outcome::Reply(reply) => conn.write_frame(&reply, state.protocol()),
                    Outcome::Drop => return Ok(End::Drop),
                }
                if state.take_failed_auth() {
                    hold.release();
                    tokio::time::sleep(crate::client::FAILED_AUTH_DELAY).await;
                }
                if state.closing() {
                    hold.release();
                    deliver(conn, state, metrics, idle).await?;
                    return Ok(End::Close);
                }
            }
            if conn.pending_output() >= WRITE_CHUNK {
                hold.release();
                deliver(conn, state, metrics, idle).await?;
            }
        }
        hold.release();
        // What is left buffered after executing: an idle client holds only that.
        share.set(conn.query_buffer_len() as u64);
        // Twice: before the flush for the peak of the output buffer, after it for what the
        // client left unread.
        record_buffers(conn, state);
        let read_ahead = deliver(conn, state, metrics, idle).await?;
        record_buffers(conn, state);
        if *stop.borrow() {
            return Ok(End::Close);
        }
        if read_ahead {
            // A look at the socket around the write read requests: run them first.
            continue;
        }
        let read = async {
            match idle {
                Some(d) => tokio::time::timeout(d, conn.read()).await.ok(),
                None => Some(conn.read().await),
            }
        };
        tokio::select! {
            biased;
            _ = stop.changed() => return Ok(End::Close),
            r = read => match r {
                None => {
                    metrics.idle_disconnections.fetch_add(1, Relaxed);
                    debug!(id = state.id(), "idle timeout");
                    return Ok(End::Drop);
                }
                Some(Ok(0)) => return Ok(End::Drop),
                Some(Ok(n)) => {
                    metrics.net_input_bytes.fetch_add(n as u64, Relaxed);
                    state.info().touch();
                }
                Some(Err(e)) => return Err(e),
            },
        }
        let limit = if state.is_authenticated() {
            config.limits.max_query_buffer
        } else {
            config.limits.max_query_buffer.min(UNAUTHENTICATED_MAX_QUERY_BUFFER)
        };
        let buffered = conn.query_buffer_len();
        let total = share.set(buffered as u64);
        let over_total = total > config.limits.max_total_query_buffer as u64
            && buffered > TOTAL_QUERY_BUFFER_EXEMPT;
        if buffered > limit || over_total {
            metrics.query_buffer_disconnections.fetch_add(1, Relaxed);
            return fail(conn, state, metrics, idle, &ProtocolError::QueryBufferLimit).await;
        }
    }
}

/// What `CLIENT LIST` shows of this connection's buffers.
fn record_buffers<T: AsyncRead + AsyncWrite + Unpin>(conn: &Connection<T>, state: &ConnState) {
    state.info().set_buffers(
        conn.query_buffer_len(),
        conn.query_buffer_free(),
        conn.output_capacity(),
        conn.pending_output(),
    );
}

/// A client holding at most this much of the query buffers is never cut for the total.
const TOTAL_QUERY_BUFFER_EXEMPT: usize = 1 << 20;

/// One client's part of the server-wide query-buffer count.
struct QueryBufferShare<'a> {
    total: &'a AtomicU64,
    mine: u64,
}

impl QueryBufferShare<'_> {
    /// Sets this client's part to `bytes`; returns the server's total.
    fn set(&mut self, bytes: u64) -> u64 {
        let total = if bytes >= self.mine {
            self.total.fetch_add(bytes - self.mine, Relaxed) + (bytes - self.mine)
        } else {
            self.total.fetch_sub(self.mine - bytes, Relaxed) - (self.mine - bytes)
        };
        self.mine = bytes;
        total
    }
}

impl Drop for QueryBufferShare<'_> {
    fn drop(&mut self) {
        self.total.fetch_sub(self.mine, Relaxed);
    }
}

/// Replies with a framing error and ends the connection, as Redis does.
async fn fail<T: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<T>,
    state: &mut ConnState,
    metrics: &Metrics,
    idle: Option<Duration>,
    error: &ProtocolError,
) -> io::Result<End> {
    metrics.error_replies.fetch_add(1, Relaxed);
    if *error != ProtocolError::QueryBufferLimit {
        metrics.protocol_errors.fetch_add(1, Relaxed);
    }
    debug!(id = state.id(), peer = ?state.peer_addr(), %error, "closing client");
    conn.write_frame(&error.to_frame(), state.protocol());
    deliver(conn, state, metrics, idle).await?;
    Ok(End::Close)
}

/// Writes the pending replies, then makes count what waited for them
/// ([`ConnState::defer_until_replied`]), unless the client is gone: one whose end of the
/// connection was closed before the replies were written cannot read them, and one that
/// resets the connection did not take them, so that work is dropped. Returns whether a look
/// at the client read more requests (to run before reading again).
///
/// The socket is looked at twice, without waiting. Before the write, an end of stream or a
/// reset is a client gone before its replies existed. After it, only a reset is: a client
/// that reads its reply and then closes (a one-shot `redis-cli`) ends its stream after the
/// reply was written, and what it was told counts. (A client killed with the reply unread
/// in its kernel's buffer resets the connection instead of ending it.)
///
/// "Delivered" is "written to the socket": replies still in the kernel's buffers when the
/// client dies are lost with it, as a printed line in a pipe's buffer is (docs/durability.md).
async fn deliver<T: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<T>,
    state: &mut ConnState,
    metrics: &Metrics,
    idle: Option<Duration>,
) -> io::Result<bool> {
    if !state.awaits_delivery() {
        flush(conn, metrics, idle).await?;
        return Ok(false);
    }
    let before = look(conn, metrics).await;
    flush(conn, metrics, idle).await?;
    let after = match before {
        Look::End | Look::Reset => before,
        Look::Nothing | Look::Data => look(conn, metrics).await,
    };
    let gone = matches!(before, Look::End | Look::Reset) || after == Look::Reset;
    let work = state.take_on_reply();
    if gone {
        metrics.undelivered_replies.fetch_add(1, Relaxed);
        debug!(id = state.id(), "client gone before its replies: their work is dropped");
        drop(work);
    } else {
        let unrecorded: u64 = work.into_iter().map(|w| w.delivered()).sum();
        metrics.unrecorded_answers.fetch_add(unrecorded, Relaxed);
    }
    Ok(before == Look::Data || after == Look::Data)
}

/// What one look at a client's socket, without waiting, finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Look {
    /// Nothing to read yet.
    Nothing,
    /// More requests (read into the input buffer).
    Data,
    /// The client ended its stream.
    End,
    /// The connection failed (reset).
    Reset,
}

async fn look<T: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<T>,
    metrics: &Metrics,
) -> Look {
    let read = tokio::select! {
        biased;
        read = conn.read() => Some(read),
        () = std::future::ready(()) => None,
    };
    match read {
        None => Look::Nothing,
        Some(Ok(0)) => Look::End,
        Some(Ok(n)) => {
            metrics.net_input_bytes.fetch_add(n as u64, Relaxed);
            Look::Data
        }
        Some(Err(_)) => Look::Reset,
    }
}

/// Writes the pending replies; a client that reads none of them for the idle timeout is
/// treated as idle.
async fn flush<T: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<T>,
    metrics: &Metrics,
    idle: Option<Duration>,
) -> io::Result<()> {
    let written = match idle {
        Some(d) => tokio::time::timeout(d, conn.flush()).await.map_err(|_| {
            metrics.idle_disconnections.fetch_add(1, Relaxed);
            io::Error::new(io::ErrorKind::TimedOut, "client did not read its replies")
        })??,
        None => conn.flush().await?,
    };
    metrics.net_output_bytes.fetch_add(written as u64, Relaxed);
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

    use tokio::io::{AsyncReadExt, DuplexStream};

    use super::*;
    use crate::app::App;

    fn resp(args: &[&[u8]]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend(b"\r\n");
        }
        out
    }

    /// The replies to [`request`] on a fresh server: 50 URLs new, then 50 items added.
    fn replies() -> Vec<u8> {
        let mut out = b"*1\r\n:0\r\n".repeat(50);
        out.extend(b"*50\r\n");
        out.extend(b":1\r\n".repeat(50));
        out
    }

    fn request(prefix: &str) -> (Vec<String>, Vec<u8>) {
        let urls: Vec<String> =
            (0..50).map(|i| format!("https://example.com/{prefix}/{i}")).collect();
        let mut out = Vec::new();
        for url in &urls {
            out.extend(resp(&[b"URL.SEEN", b"ns", url.as_bytes()]));
        }
        let mut madd: Vec<&[u8]> = vec![b"BF.MADD", b"bf"];
        madd.extend(urls.iter().map(String::as_bytes));
        out.extend(resp(&madd));
        (urls, out)
    }

    /// Serves one connection whose client end is `client_end` until it ends; returns the
    /// state (dropped by the caller, as the connection's task drops it).
    async fn serve_one<T: AsyncRead + AsyncWrite + Unpin>(
        app: &Arc<App>,
        metrics_of: &mut Option<Arc<Metrics>>,
        stream: T,
    ) -> (io::Result<End>, ConnState) {
        let dispatch = crate::dispatch(Arc::clone(app));
        let server = ServerState::new(Config::default(), dispatch.metrics().clone(), None);
        *metrics_of = Some(dispatch.metrics().clone());
        let mut conn = Connection::new(stream);
        let mut state = ConnState::new(Arc::new(ClientInfo::new(1, None, None)), true);
        let (_stop_tx, stop) = watch::channel(false);
        let end = serve(&mut conn, &mut state, &dispatch, &server, stop).await;
        (end, state)
    }

    fn recorded(app: &App, urls: &[String]) -> (usize, u64) {
        let ns = app.namespace(b"ns").unwrap();
        let found = ns.contains_batch(urls).unwrap().iter().filter(|&&s| s).count();
        (found, app.namespace(b"bf").unwrap().len())
    }

    #[tokio::test]
    async fn a_client_gone_before_its_replies_were_written_has_nothing_recorded() {
        let app = Arc::new(App::in_memory());
        let (urls, bytes) = request("gone");
        let (mut client, server_end) = tokio::io::duplex(1 << 20);
        client.write_all(&bytes).await.unwrap();
        drop(client);
        let mut metrics = None;
        let (end, state) = serve_one(&app, &mut metrics, server_end).await;
        assert!(end.is_err(), "the replies could not be written: {end:?}");
        // The answers were given (the namespaces hold them in flight) until the state goes.
        assert_eq!(recorded(&app, &urls), (50, 50));
        drop(state);
        assert_eq!(recorded(&app, &urls), (0, 0), "answers never delivered were recorded");
    }

    #[tokio::test]
    async fn a_client_whose_stream_ended_before_its_replies_were_written_has_nothing_recorded() {
        let app = Arc::new(App::in_memory());
        let (urls, bytes) = request("left");
        let (mut client, server_end) = tokio::io::duplex(1 << 20);
        client.write_all(&bytes).await.unwrap();
        // Its end of the stream closed: the server writes the replies, then finds it gone.
        client.shutdown().await.unwrap();
        let mut metrics = None;
        let (end, state) = serve_one(&app, &mut metrics, server_end).await;
        assert!(matches!(end, Ok(End::Drop)), "{end:?}");
        drop(state);
        assert_eq!(recorded(&app, &urls), (0, 0), "answers to a client gone were recorded");
        assert_eq!(metrics.unwrap().undelivered_replies(), 1);
        let mut replies = Vec::new();
        client.read_to_end(&mut replies).await.unwrap();
        assert_eq!(replies, super::tests::replies(), "the replies were written");
    }

    #[tokio::test]
    async fn a_client_still_there_after_its_replies_has_them_recorded() {
        let app = Arc::new(App::in_memory());
        let (urls, bytes) = request("here");
        let (mut client, server_end) = tokio::io::duplex(1 << 20);
        client.write_all(&bytes).await.unwrap();
        let app2 = Arc::clone(&app);
        let serving = tokio::spawn(async move {
            let mut metrics = None;
            let (end, state) = serve_one(&app2, &mut metrics, server_end).await;
            drop(state);
            (end.is_ok(), metrics.unwrap().undelivered_replies())
        });
        // Every reply read, then the client goes: what was delivered stays recorded.
        let mut got = vec![0u8; replies().len()];
        client.read_exact(&mut got).await.unwrap();
        assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&replies()));
        drop(client);
        let (ended, undelivered) = serving.await.unwrap();
        assert!(ended);
        assert_eq!(undelivered, 0);
        assert_eq!(recorded(&app, &urls), (50, 50), "delivered answers were let go");
    }

    /// The server's end of a stream whose flush, once `hold_at` bytes were written, completes
    /// only when the gate opens: what it wrote is readable at once, but the server resumes
    /// only when the test says so.
    struct FlushWhenOpen {
        inner: DuplexStream,
        gate: Arc<Gate>,
        written: usize,
        hold_at: usize,
    }

    /// Whether the gate is open, and who waits for it.
    #[derive(Default)]
    struct Gate(parking_lot::Mutex<(bool, Option<std::task::Waker>)>);

    impl Gate {
        fn open(&self) {
            let mut g = self.0.lock();
            g.0 = true;
            if let Some(w) = g.1.take() {
                w.wake();
            }
        }
    }

    impl AsyncRead for FlushWhenOpen {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for FlushWhenOpen {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<io::Result<usize>> {
            let this = &mut *self;
            let written = std::pin::Pin::new(&mut this.inner).poll_write(cx, buf);
            if let std::task::Poll::Ready(Ok(n)) = written {
                this.written += n;
            }
            written
        }

        fn poll_flush(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            {
                let mut g = self.gate.0.lock();
                if self.written >= self.hold_at && !g.0 {
                    g.1 = Some(cx.waker().clone());
                    return std::task::Poll::Pending;
                }
            }
            std::pin::Pin::new(&mut self.inner).poll_flush(cx)
        }

        fn poll_shutdown(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
        }
    }

    /// A one-shot client (`redis-cli URL.SEEN …`) reads its reply and closes at once: its end
    /// of stream comes after the reply was written, and what it was told counts. The server
    /// here looks at the socket again only after the client has read its replies and closed.
    #[tokio::test]
    async fn a_client_that_reads_its_replies_and_closes_at_once_has_them_recorded() {
        let app = Arc::new(App::in_memory());
        let (urls, bytes) = request("oneshot");
        let (mut client, server_end) = tokio::io::duplex(1 << 20);
        let gate = Arc::new(Gate::default());
        let app2 = Arc::clone(&app);
        let server_gate = Arc::clone(&gate);
        let serving = tokio::spawn(async move {
            let mut metrics = None;
            let stream = FlushWhenOpen {
                inner: server_end,
                gate: server_gate,
                written: 0,
                hold_at: replies().len(),
            };
            let (end, state) = serve_one(&app2, &mut metrics, stream).await;
            drop(state);
            (end.is_ok(), metrics.unwrap().undelivered_replies())
        });
        client.write_all(&bytes).await.unwrap();
        let mut got = vec![0u8; replies().len()];
        client.read_exact(&mut got).await.unwrap();
        drop(client);
        gate.open();
        let (ended, undelivered) = serving.await.unwrap();
        assert!(ended);
        assert_eq!(undelivered, 0, "a reply read before the client closed was not counted");
        assert_eq!(recorded(&app, &urls), (50, 50), "delivered answers were let go");
    }
}
