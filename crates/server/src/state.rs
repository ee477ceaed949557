//! What every connection of a server shares ([`ServerState`]): below the accept loop
//! (`server`) and the command table (`dispatch`), which both take it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use crate::client::ClientRegistry;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::slowlog::Slowlog;
use crate::transaction::{Gate, Watches};

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
    pub(crate) query_buffers: AtomicU64,
    /// Held shared by every command, exclusively by `EXEC` (see
    /// [`transaction`](crate::transaction)).
    pub(crate) gate: Gate,
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

    /// The registry itself, which a connection's registration keeps.
    pub(crate) fn client_registry(&self) -> &Arc<ClientRegistry> {
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

    pub(crate) fn next_client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Relaxed)
    }
}
