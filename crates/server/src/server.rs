//! The accept loop, the per-connection loop, and graceful shutdown.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tracing::{debug, error, info, warn};

use crate::client::{ClientInfo, ClientRegistry, ConnState};
use crate::config::{Config, UNAUTHENTICATED_MAX_QUERY_BUFFER};
use crate::connection::{Connection, WRITE_CHUNK};
use crate::dispatch::{Dispatch, MAX_BATCH, Outcome};
use crate::error::{DENIED, MAX_CLIENTS, ProtocolError};
use crate::metrics::Metrics;
use crate::slowlog::Slowlog;
use crate::transaction::{Gate, Hold, Watches};

/// What every connection shares: the configuration, the metrics, the connected clients.
#[derive(Debug)]
pub struct ServerState {
    config: Config,
    metrics: Arc<Metrics>,
    clients: Arc<ClientRegistry>,
    started: Instant,
    local_addr: Option<SocketAddr>,
    next_client_id: AtomicU64,
    /// Bytes of not-yet-executed requests over all clients (see
    /// [`Limits::max_total_query_buffer`](crate::Limits)).
    query_buffers: AtomicU64,
    /// Held shared by every command, exclusively by `EXEC` (see
    /// [`transaction`](crate::transaction)).
    gate: Gate,
    /// The keys clients `WATCH`.
    watches: Arc<Watches>,
    /// The slow log (`SLOWLOG`).
    slowlog: Slowlog,
}

impl ServerState {
    /// The state of a server listening on `local_addr`.
    pub fn new(
        config: Config,
        metrics: Arc<Metrics>,
        local_addr: Option<SocketAddr>,
    ) -> ServerState {
        ServerState {
            slowlog: Slowlog::new(config.slowlog_log_slower_than, config.slowlog_max_len),
            config,
            metrics,
            clients: Arc::new(ClientRegistry::default()),
            started: Instant::now(),
            local_addr,
            next_client_id: AtomicU64::new(1),
            query_buffers: AtomicU64::new(0),
            gate: Gate::default(),
            watches: Arc::new(Watches::default()),
        }
    }

    /// The keys clients watch.
    pub fn watches(&self) -> &Arc<Watches> {
        &self.watches
    }

    /// The slow log.
    pub fn slowlog(&self) -> &Slowlog {
        &self.slowlog
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The connected clients.
    pub fn clients(&self) -> &ClientRegistry {
        &self.clients
    }

    /// Time since the server started.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }

    fn next_client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Relaxed)
    }
}

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
                Ok((stream, peer)) if server.config.protected_refuses(peer.ip()) => {
                    server.metrics.connections_rejected.fetch_add(1, Relaxed);
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
                        server.metrics.connections_rejected.fetch_add(1, Relaxed);
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
    let _live = Live::new(&server.metrics);
    let _ = stream.set_nodelay(true);
    let info = Arc::new(ClientInfo::new(id, Some(peer), stream.local_addr().ok()));
    #[cfg(unix)]
    info.set_fd(i64::from(std::os::fd::AsRawFd::as_raw_fd(&stream)));
    info.touch();
    let _registered = server.clients.register(info.clone());
    let mut state = ConnState::new(info, server.config.requirepass.is_none());
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
    let config = &server.config;
    let metrics = &*server.metrics;
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
                    flush(conn, metrics, idle).await?;
                    return Ok(End::Close);
                }
            }
            if conn.pending_output() >= WRITE_CHUNK {
                hold.release();
                flush(conn, metrics, idle).await?;
            }
        }
        hold.release();
        // What is left buffered after executing: an idle client holds only that.
        share.set(conn.query_buffer_len() as u64);
        // Twice: before the flush for the peak of the output buffer, after it for what the
        // client left unread.
        record_buffers(conn, state);
        flush(conn, metrics, idle).await?;
        record_buffers(conn, state);
        if *stop.borrow() {
            return Ok(End::Close);
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
    state: &ConnState,
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
    flush(conn, metrics, idle).await?;
    Ok(End::Close)
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
