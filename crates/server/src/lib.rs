//! The urlseen server: the Redis protocol (RESP2 and RESP3), so that any Redis client in any
//! language can use urlseen.
//!
//! The layers follow tokio's mini-redis:
//!
//! ```text
//! bytes ──RequestParser──▶ argv ──Dispatch──▶ Parse ─▶ handler ─▶ Frame ──encode(RESP2|3)──▶ bytes
//!        (request.rs)              (dispatch.rs)  (parse.rs) (cmd/*.rs)   (frame.rs)
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
//! - [`Metrics`]: atomic counters and per-command latency histograms.
//!
//! # Serving
//!
//! ```no_run
//! use std::sync::Arc;
//! use urlseen_server::{Config, Dispatch, run};
//!
//! # async fn serve() -> std::io::Result<()> {
//! let config = Config::default(); // 127.0.0.1:6380, no password, 10 000 clients
//! let listener = tokio::net::TcpListener::bind(config.resp_addr).await?;
//! let dispatch = Arc::new(Dispatch::new(())); // `()`: no engine, connection commands only
//! let (_stop, stopped) = tokio::sync::oneshot::channel::<()>(); // fire `_stop` on SIGTERM
//! run(listener, config, dispatch, async { let _ = stopped.await; }).await
//! # }
//! ```
//!
//! # Adding a command
//!
//! One file per command with a `const` [`CommandSpec`], a handler taking [`Ctx`] and
//! [`Parse`], and one [`Dispatch::register`] call; see [`dispatch`] for a complete example. The
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

pub mod client;
pub mod cmd;
pub mod config;
pub mod connection;
pub mod dispatch;
pub mod error;
pub mod frame;
pub mod glob;
pub mod metrics;
pub mod parse;
pub mod request;
pub mod server;

pub use client::ConnState;
pub use cmd::info::InfoSection;
pub use config::{Config, Limits};
pub use dispatch::{
    ArgKind, ArgSpec, BoxFuture, Command, CommandResult, CommandSpec, Ctx, Dispatch, Handler,
};
pub use error::{CommandError, ProtocolError};
pub use frame::{Frame, FrameError, Protocol};
pub use metrics::{CommandStats, Metrics};
pub use parse::Parse;
pub use server::{ServerState, run};
