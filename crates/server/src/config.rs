//! Server settings: addresses, authentication, and the limits that keep hostile or broken
//! clients from taking the server down.

use std::net::SocketAddr;
use std::time::Duration;

/// The RESP address the server binds to unless told otherwise: loopback, port 6380 (6379
/// belongs to Redis).
pub const DEFAULT_RESP_ADDR: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 6380);

/// The HTTP address (`/healthz`, `/metrics`, the JSON API) `urlseen serve` binds to unless told
/// otherwise: loopback, port 8380.
pub const DEFAULT_HTTP_ADDR: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8380);

/// Redis' `PROTO_INLINE_MAX_SIZE`: the longest inline command line, and the longest `*<n>` /
/// `$<n>` header line that is searched for its CRLF.
pub const INLINE_MAX_LEN: usize = 64 * 1024;

/// Before a client has authenticated (only when a password is set), requests may have at most
/// this many arguments, like Redis.
pub const UNAUTHENTICATED_MAX_ARGS: usize = 10;
/// … and bulks of at most this many bytes, like Redis.
pub const UNAUTHENTICATED_MAX_BULK_LEN: usize = 16 * 1024;
/// … and at most this much buffered request, like Redis.
pub const UNAUTHENTICATED_MAX_QUERY_BUFFER: usize = 1024 * 1024;

/// Everything the RESP server needs to know. Build it with [`Config::default`] and struct
/// update syntax:
///
/// ```
/// use std::time::Duration;
/// use urlseen_server::Config;
///
/// let config = Config {
///     requirepass: Some("s3cret".into()),
///     idle_timeout: Some(Duration::from_secs(300)),
///     ..Config::default()
/// };
/// assert_eq!(config.maxclients, 10_000);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Where the RESP listener is bound (default `127.0.0.1:6380`). The caller binds the
    /// listener; this copy is reported by `INFO` and used by the CLI.
    pub resp_addr: SocketAddr,
    /// The password of the `default` user, like Redis' `requirepass`. `None`: no
    /// authentication, every connection starts authenticated.
    pub requirepass: Option<String>,
    /// Most simultaneous clients (Redis' `maxclients`, default 10 000). One more gets
    /// `-ERR max number of clients reached` and is closed.
    pub maxclients: usize,
    /// Close a client that sent nothing (or read none of its replies) for this long, like
    /// Redis' `timeout`. `None` (Redis' `timeout 0`, the default) never closes idle clients.
    pub idle_timeout: Option<Duration>,
    /// After shutdown is signalled, how long connections get to finish the commands they
    /// have already received before they are cut (default 10 s).
    pub shutdown_grace: Duration,
    /// Request size limits.
    pub limits: Limits,
    /// Redis' `protected-mode` (default on): while there is no [`requirepass`](Self::requirepass),
    /// only loopback clients are served; others get `-DENIED …` and are closed, so that a
    /// server bound to a public address by mistake cannot be written (or `FLUSHALL`ed) by
    /// anyone. The HTTP API answers them 403.
    pub protected_mode: bool,
    /// Redis' `slowlog-log-slower-than`, in microseconds (default 10 000): a command that runs
    /// at least this long is kept in the slow log (`SLOWLOG GET`). 0 logs every command, a
    /// negative value disables the slow log.
    pub slowlog_log_slower_than: i64,
    /// Redis' `slowlog-max-len` (default 128): the slow log keeps this many newest entries.
    pub slowlog_max_len: usize,
}

impl Config {
    /// Whether a client at `peer` is refused by protected mode.
    pub fn protected_refuses(&self, peer: std::net::IpAddr) -> bool {
        self.protected_mode && self.requirepass.is_none() && !peer.to_canonical().is_loopback()
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            resp_addr: DEFAULT_RESP_ADDR,
            requirepass: None,
            maxclients: 10_000,
            idle_timeout: None,
            shutdown_grace: Duration::from_secs(10),
            limits: Limits::default(),
            protected_mode: true,
            slowlog_log_slower_than: crate::slowlog::DEFAULT_LOG_SLOWER_THAN_US,
            slowlog_max_len: crate::slowlog::DEFAULT_MAX_LEN,
        }
    }
}

/// Bounds on what one client may send. Each has a Redis-style error reply; the offending
/// connection is closed after it (the request cannot be resynchronised), the server goes on.
///
/// | limit | default | Redis equivalent (default) | reply |
/// |---|---|---|---|
/// | `max_bulk_len` | 32 MiB | `proto-max-bulk-len` (512 MiB) | `-ERR Protocol error: invalid bulk length` |
/// | `max_args` | 1 048 576 | multibulk length | `-ERR Protocol error: invalid multibulk length` |
/// | `max_query_buffer` | 64 MiB | `client-query-buffer-limit` (1 GiB) | `-ERR Protocol error: query buffer limit reached` |
/// | `max_total_query_buffer` | 512 MiB | none | the same, to a client holding more than 1 MiB of it |
///
/// The defaults are far below Redis': a URL is a few hundred bytes and no urlseen command needs
/// a bulk bigger than a dump chunk (RedisBloom's are at most 16 MiB), so a 32 MiB bulk is either
/// a bug or an attack. The query-buffer limit is twice the bulk limit so that a request holding
/// one maximal bulk still fits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest bulk string in a request, in bytes.
    pub max_bulk_len: usize,
    /// Most arguments (command name included) in one request.
    pub max_args: usize,
    /// Most bytes of not-yet-executed request a client may have buffered: the partial request
    /// being received. Pipelined complete requests are executed as they arrive and do not
    /// accumulate.
    pub max_query_buffer: usize,
    /// Most bytes of not-yet-executed requests all clients together may have buffered: many
    /// clients each just under `max_query_buffer` must not add up to the machine's RAM. A
    /// client that reads past it while holding more than 1 MiB of it gets the query-buffer
    /// error and is closed; smaller clients are never cut.
    pub max_total_query_buffer: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 32 << 20,
            max_args: 1 << 20,
            max_query_buffer: 64 << 20,
            max_total_query_buffer: 512 << 20,
        }
    }
}
