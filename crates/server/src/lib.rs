//! The urlseen server: the Redis protocol (RESP2 and RESP3), so that any Redis client in any
//! language can use urlseen.
//!
//! The layers follow tokio's mini-redis:
//!
//! ```text
//! bytes ──RequestParser──▶ argv ──Dispatch──▶ Parse ─▶ handler ─▶ Frame ──encode(RESP2|3)──▶ bytes
//!        (request.rs)              (dispatch/)    (parse.rs) (cmd/*.rs)   (frame/)
//!        └────────────── Connection (connection.rs): buffers, pipelining ──────────────┘
//!        └────────────── run (server.rs): accept, limits, shutdown ───────────────────┘
//! ```
//!
//! - [`frame`]: the RESP value type, a parser that treats a partial frame as the normal state
//!   it is, and an encoder that downgrades RESP3 replies for RESP2 clients like Redis does.
//! - [`request`]: Redis-exact request framing: arrays of bulk strings and inline commands
//!   (`PING\r\n` typed into telnet), with Redis' limits and error strings.
//! - [`Dispatch`]: the command table. A command is a [`CommandSpec`] plus a handler; the
//!   built-in connection commands live in [`cmd`], one file each.
//! - [`run`]: the accept loop with `maxclients`, idle timeout, query-buffer limit and graceful
//!   shutdown.
//! - [`Metrics`]: atomic counters and per-command latency histograms; [`Slowlog`]: the
//!   slow log.
//! - [`App`]: the engine's `Db` behind the `BF.*`, `URL.*` and keyspace commands
//!   ([`dispatch()`] builds the full command table), where a namespace is a key. Its
//!   [`Keyspace`] says where the `URL.*` namespaces live (the `Db`, or Redis under `--redis`),
//!   and [`App::answer_urls`] is the one path from URLs to answers that `URL.SEEN`,
//!   `URL.CHECK` and the HTTP API all take, on either.
//! - [`http`]: `/healthz`, `/metrics` and a JSON API, with axum.
//!
//! # Serving
//!
//! ```no_run
//! use std::sync::Arc;
//! use urlseen_server::{App, Config, dispatch, run};
//!
//! # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
//! let config = Config::default(); // 127.0.0.1:6380, no password, 10 000 clients
//! let listener = tokio::net::TcpListener::bind(config.resp_addr).await?;
//! let app = Arc::new(App::in_memory()); // or App::new(db, AppConfig { … })
//! let dispatch = Arc::new(dispatch(app.clone()));
//! let (_stop, stopped) = tokio::sync::oneshot::channel::<()>(); // fire `_stop` on SIGTERM
//! run(listener, config, dispatch, async { let _ = stopped.await; }).await?;
//! app.shutdown()?; // every connection is drained: flush the engine
//! # Ok(())
//! # }
//! ```
//!
//! `Dispatch::new(())` gives a server with the connection commands only.
//!
//! # Adding a command
//!
//! One file per command with a `const` [`CommandSpec`], a handler taking [`Ctx`] and
//! [`Parse`], and one [`Dispatch::register`] call; see [`mod@dispatch`] for a complete example. The
//! dispatcher checks the name, the arity and authentication before the handler runs, and counts
//! the call; the handler parses its arguments, ends with [`Parse::finish`], and returns a
//! [`Frame`] or a [`CommandError`], which becomes the exact Redis error reply.
//!
//! # Quirks
//!
//! - One database: `SELECT 0` works, any other index is `-ERR DB index is out of range`.
//! - One user, `default`, whose password is [`Config::requirepass`].
//! - After a framing error, or when a client's partial request exceeds the query-buffer limit,
//!   the server replies with the error and closes that connection, as Redis does for framing
//!   errors (Redis closes silently on the query-buffer limit).
//! - Bulk data must be followed by CRLF: Redis skips two bytes blindly there, urlseen replies
//!   `-ERR Protocol error: expected CRLF after bulk data` and closes.

pub mod app;
pub mod client;
pub mod cmd;
pub mod config;
pub mod connection;
pub mod dispatch;
pub mod error;
pub mod frame;
pub mod glob;
pub mod http;
pub mod metrics;
pub mod parse;
pub mod remote;
pub mod request;
pub mod server;
pub mod slowlog;
pub mod spec;
pub mod state;
pub mod transaction;

pub use app::{App, AppConfig, BloomParams, ExpireIf, KeyKind, Keyspace, Lookup};
pub use client::{ConnState, OnReply};
pub use cmd::info::InfoSection;
pub use config::{Config, Limits};
pub use dispatch::{
    ArgKind, ArgSpec, BatchHandler, BoxFuture, Command, CommandResult, CommandSpec, Ctx, Dispatch,
    Handler, RenameError,
};
pub use error::{CommandError, ProtocolError};
pub use frame::{Frame, FrameError, Protocol};
pub use metrics::{CommandStats, Metrics};
pub use parse::Parse;
pub use server::run;
pub use slowlog::{Slowlog, SlowlogEntry};
pub use state::ServerState;

/// The full command table over `app`: the connection commands, `BF.*`, `URL.*` and the
/// keyspace commands, with the engine's `INFO` sections.
pub fn dispatch(app: std::sync::Arc<App>) -> Dispatch<std::sync::Arc<App>> {
    let mut d = Dispatch::new(app);
    cmd::register_engine(&mut d);
    d
}
