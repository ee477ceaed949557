//! The command table: how a request becomes a call to a handler, and how new commands plug in.
//!
//! A command is a [`CommandSpec`] (its name, arity, flags and documentation, which `COMMAND`
//! reports) and a [`Handler`]. [`Dispatch`] holds the table and the application state `S` (the
//! engine) that handlers receive through [`Ctx`]. For each request it does what Redis'
//! `processCommand` does, in Redis' order: look the name up (unknown command), pick the
//! subcommand of a container such as `CLIENT` (unknown subcommand), check the arity, check
//! authentication, run the handler, count the call and its latency.
//!
//! # Adding a command
//!
//! One file per command: a spec, a handler, a constructor; then one line to register it.
//!
//! ```
//! use urlseen_server::{Command, CommandResult, CommandSpec, Ctx, Dispatch, Frame, Parse};
//!
//! struct App { greeting: &'static str }
//!
//! const SPEC: CommandSpec = CommandSpec::new("hello.world", -1)
//!     .flags(&["readonly", "fast"])
//!     .group("urlseen")
//!     .summary("Greets the caller.");
//!
//! fn hello_world(ctx: Ctx<'_, App>, mut args: Parse) -> CommandResult {
//!     let who = args.next_if_keyword("LOUDLY");
//!     args.finish()?;
//!     let text = if who { ctx.app.greeting.to_uppercase() } else { ctx.app.greeting.to_owned() };
//!     Ok(Frame::bulk(text))
//! }
//!
//! let dispatch = Dispatch::new(App { greeting: "hi" })
//!     .with(Command::sync(SPEC, hello_world));
//! assert!(dispatch.lookup(b"HELLO.WORLD").is_some());
//! ```
//!
//! A handler that waits (on I/O, on `spawn_blocking`, on a group commit) is asynchronous:
//!
//! ```
//! use urlseen_server::{BoxFuture, Command, CommandResult, CommandSpec, Ctx, Frame, Parse};
//!
//! fn slow<'a>(_ctx: Ctx<'a, ()>, args: Parse) -> BoxFuture<'a, CommandResult> {
//!     Box::pin(async move {
//!         args.finish()?;
//!         tokio::task::yield_now().await;
//!         Ok(Frame::ok())
//!     })
//! }
//! let cmd: Command<()> = Command::new_async(CommandSpec::new("slow", 1), slow);
//! ```

mod batch;
mod command;
mod info;

pub use crate::spec::{ArgKind, ArgSpec, CommandSpec};
pub use batch::MAX_BATCH;
pub use command::Command;
pub use info::InfoSection;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use bytes::Bytes;

use crate::client::ConnState;
use crate::error::{CommandError, exec_refused, unknown_command, unknown_subcommand};
use crate::frame::Frame;
use crate::metrics::{CommandStats, Metrics};
use crate::parse::Parse;
use crate::state::ServerState;
use crate::transaction::Hold;

/// The hasher of the command tables: every request looks its name up, and SipHash (the
/// standard one) was 4% of the server's time under pipelined `BF.EXISTS`. The tables are fixed
/// at start, so a name a client chooses can only probe them, never grow them: no flooding.
type NameHasher = xxhash_rust::xxh3::Xxh3Builder;

/// What a handler returns: the reply, or an error that becomes the error reply.
pub type CommandResult = Result<Frame, CommandError>;

/// The boxed future of an asynchronous handler.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A synchronous handler: for commands that do not wait.
pub type SyncHandler<S> = fn(Ctx<'_, S>, Parse) -> CommandResult;

/// An asynchronous handler: for commands that wait (I/O, fsync, `spawn_blocking`).
pub type AsyncHandler<S> = for<'a> fn(Ctx<'a, S>, Parse) -> BoxFuture<'a, CommandResult>;

/// A handler for a run of the same command pipelined on one connection: one result per
/// [`Parse`], in order, exactly what running them one by one would have answered. It lets a
/// command such as `URL.SEEN` make one engine batch of a whole pipeline.
pub type BatchHandler<S> = fn(Ctx<'_, S>, Vec<Parse>) -> Vec<CommandResult>;

/// How a command runs.
pub enum Handler<S> {
    /// Runs to completion on the connection's task.
    Sync(SyncHandler<S>),
    /// Awaited on the connection's task; the connection executes its requests in order, so
    /// the next pipelined command starts after this one is done.
    Async(AsyncHandler<S>),
}

impl<S> Clone for Handler<S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Handler<S> {}

impl<S> fmt::Debug for Handler<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Handler::Sync(_) => "Handler::Sync",
            Handler::Async(_) => "Handler::Async",
        })
    }
}

/// What a handler receives besides its arguments.
pub struct Ctx<'a, S> {
    /// The application state given to [`Dispatch::new`] (the engine).
    pub app: &'a S,
    /// This connection: protocol, authentication, name, close-after-reply.
    pub conn: &'a mut ConnState,
    /// The server: configuration, metrics, connected clients, uptime.
    pub server: &'a ServerState,
    /// The command table (for introspection such as `COMMAND`).
    pub dispatch: &'a Dispatch<S>,
}

impl<S> fmt::Debug for Ctx<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ctx").field("conn", &self.conn).finish_non_exhaustive()
    }
}

struct Entry<S> {
    spec: CommandSpec,
    handler: Option<Handler<S>>,
    batch: Option<BatchHandler<S>>,
    subs: HashMap<Box<[u8]>, usize, NameHasher>,
    sub_order: Vec<usize>,
    is_sub: bool,
    no_auth: bool,
    /// A `write` command: a success touches the keys it names for `WATCH`.
    writes: bool,
    exclusive: bool,
    not_queued: bool,
    /// Never in the slow log (`EXEC`: the commands it runs are logged instead, as in Redis).
    skip_slowlog: bool,
    stats: Arc<CommandStats>,
}

/// A registered `INFO` section: its name, whether plain `INFO` includes it, its writer.
type InfoWriterFn<S> = fn(&S, &ServerState, &mut InfoSection);

/// The value of a `CONFIG GET` parameter.
pub type ConfigGetFn<S> = fn(&S, &ServerState) -> String;

struct InfoEntry<S> {
    name: &'static str,
    default: bool,
    write: InfoWriterFn<S>,
}

/// Why [`Dispatch::rename_command`] refused (Redis' `rename-command` in a config file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenameError {
    /// No command has that name.
    #[error("rename-command: no command {0:?}")]
    NoCommand(String),
    /// The new name is too long, or another command's.
    #[error("rename-command: {0:?} is too long or already a command")]
    Taken(String),
}

/// The command table and the application state handlers receive.
///
/// [`Dispatch::new`] comes with the connection commands (`PING`, `ECHO`, `HELLO`, `AUTH`,
/// `CLIENT`, `SELECT`, `COMMAND`, `INFO`, `QUIT`) and the transaction commands (`MULTI`,
/// `EXEC`, `DISCARD`, `WATCH`, `UNWATCH`); [`Dispatch::register`] adds more or replaces
/// one by name.
pub struct Dispatch<S> {
    app: S,
    entries: Vec<Entry<S>>,
    top: HashMap<Box<[u8]>, usize, NameHasher>,
    top_order: Vec<usize>,
    metrics: Arc<Metrics>,
    info: Vec<InfoEntry<S>>,
    config: Vec<(&'static str, ConfigGetFn<S>)>,
}

impl<S> fmt::Debug for Dispatch<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self
            .top_order
            .iter()
            .filter_map(|&i| self.entries.get(i))
            .map(|e| e.spec.name)
            .collect();
        f.debug_struct("Dispatch").field("commands", &names).finish_non_exhaustive()
    }
}

/// What executing one request asks of the connection.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Write this reply.
    Reply(Frame),
    /// Drop the connection without a reply (cross-protocol attack: `POST`, `Host:`).
    Drop,
}

const MAX_NAME: usize = 64;

fn lowercase<'b>(name: &[u8], buf: &'b mut [u8; MAX_NAME]) -> Option<&'b [u8]> {
    let out = buf.get_mut(..name.len())?;
    for (o, c) in out.iter_mut().zip(name) {
        *o = c.to_ascii_lowercase();
    }
    Some(out)
}

impl<S> Dispatch<S> {
    /// A table with no command at all.
    pub fn empty(app: S) -> Dispatch<S> {
        Dispatch {
            app,
            entries: Vec::new(),
            top: HashMap::default(),
            top_order: Vec::new(),
            metrics: Arc::new(Metrics::new()),
            info: Vec::new(),
            config: Vec::new(),
        }
    }

    /// Registers a command (and its subcommands), replacing any command of the same name.
    ///
    /// # Panics
    /// If a name is longer than 64 bytes (a programming error, not an input error).
    pub fn register(&mut self, command: Command<S>) -> &mut Self {
        let index = self.add_entry(&command, false);
        for sub in &command.subcommands {
            let sub_index = self.add_entry(sub, true);
            let key: Box<[u8]> = sub.spec.lookup_name().to_ascii_lowercase().into_bytes().into();
            if let Some(parent) = self.entries.get_mut(index)
                && parent.subs.insert(key, sub_index).is_none()
            {
                parent.sub_order.push(sub_index);
            }
        }
        let key: Box<[u8]> = command.spec.name.to_ascii_lowercase().into_bytes().into();
        match self.top.insert(key, index) {
            Some(old) => {
                if let Some(slot) = self.top_order.iter_mut().find(|i| **i == old) {
                    *slot = index;
                }
            }
            None => self.top_order.push(index),
        }
        self
    }

    fn add_entry(&mut self, command: &Command<S>, is_sub: bool) -> usize {
        assert!(command.spec.name.len() <= MAX_NAME, "command name over {MAX_NAME} bytes");
        self.entries.push(Entry {
            spec: command.spec,
            handler: command.handler,
            batch: if is_sub { None } else { command.batch },
            subs: HashMap::default(),
            sub_order: Vec::new(),
            is_sub,
            no_auth: command.spec.has_flag("no_auth"),
            writes: command.spec.has_flag("write"),
            exclusive: command.exclusive,
            not_queued: command.not_queued,
            skip_slowlog: command.spec.has_flag("skip_slowlog"),
            stats: self.metrics.stats_for(command.spec.name),
        });
        self.entries.len() - 1
    }

    /// Redis' `rename-command`: the top-level command `name` answers to `new_name` from now
    /// on, or to nothing if `new_name` is empty (`FLUSHALL ""` disables it). Its old name is
    /// then an unknown command. Names are case-insensitive.
    ///
    /// # Errors
    /// [`RenameError::NoCommand`] if `name` is not a command, [`RenameError::Taken`] if
    /// `new_name` is too long or already one; nothing is renamed then.
    pub fn rename_command(&mut self, name: &str, new_name: &str) -> Result<(), RenameError> {
        let key: Box<[u8]> = name.to_ascii_lowercase().into_bytes().into();
        let Some(index) = self.top.remove(&key) else {
            return Err(RenameError::NoCommand(name.to_owned()));
        };
        if new_name.is_empty() {
            self.top_order.retain(|&i| i != index);
            return Ok(());
        }
        let new_key: Box<[u8]> = new_name.to_ascii_lowercase().into_bytes().into();
        if new_key.len() > MAX_NAME || self.top.contains_key(&new_key) {
            self.top.insert(key, index);
            return Err(RenameError::Taken(new_name.to_owned()));
        }
        self.top.insert(new_key, index);
        Ok(())
    }

    /// [`Dispatch::register`], by value, for chaining.
    pub fn with(mut self, command: Command<S>) -> Dispatch<S> {
        self.register(command);
        self
    }

    /// Registers an `INFO` section, replacing the section of the same name if there is one
    /// (so the engine can take over `persistence` and `keyspace`). `default`: whether plain
    /// `INFO` shows it.
    pub fn info_section(
        &mut self,
        name: &'static str,
        default: bool,
        write: fn(&S, &ServerState, &mut InfoSection),
    ) -> &mut Self {
        let entry = InfoEntry { name, default, write };
        match self.info.iter_mut().find(|e| e.name.eq_ignore_ascii_case(name)) {
            Some(slot) => *slot = entry,
            None => self.info.push(entry),
        }
        self
    }

    /// Registers a parameter `CONFIG GET` answers (lowercase, as Redis names it:
    /// `maxmemory`), replacing the one of the same name.
    pub fn config_param(&mut self, name: &'static str, get: ConfigGetFn<S>) -> &mut Self {
        match self.config.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = get,
            None => self.config.push((name, get)),
        }
        self
    }

    /// The `CONFIG GET` parameters, in registration order.
    pub(crate) fn config_params(&self) -> &[(&'static str, ConfigGetFn<S>)] {
        &self.config
    }

    /// The application state.
    pub fn app(&self) -> &S {
        &self.app
    }

    /// The metrics this table and the server record into.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The spec of the command named `name` (any case), if registered.
    pub fn lookup(&self, name: &[u8]) -> Option<&CommandSpec> {
        let mut buf = [0; MAX_NAME];
        let key = lowercase(name, &mut buf)?;
        self.top.get(key).and_then(|&i| self.entries.get(i)).map(|e| &e.spec)
    }

    /// Every top-level command with its subcommands, in registration order.
    pub fn commands(&self) -> Vec<(&CommandSpec, Vec<&CommandSpec>)> {
        self.top_order
            .iter()
            .filter_map(|&i| self.entries.get(i))
            .map(|e| {
                let subs = e.sub_order.iter().filter_map(|&s| self.entries.get(s)).map(|s| &s.spec);
                (&e.spec, subs.collect())
            })
            .collect()
    }

    /// The full name of the command at `index` (for `CLIENT LIST`'s `cmd=`).
    pub(crate) fn name_of(&self, index: usize) -> Option<&'static str> {
        self.entries.get(index).map(|e| e.spec.name)
    }

    /// Writes the `INFO` sections `wanted` selects (lowercase names, `all`, `everything`,
    /// `default`; empty for the default set).
    pub(crate) fn write_info(&self, server: &ServerState, wanted: &[String], out: &mut String) {
        let everything = wanted.iter().any(|w| w == "all" || w == "everything");
        let defaults = wanted.is_empty() || wanted.iter().any(|w| w == "default");
        for entry in &self.info {
            let selected = everything
                || (defaults && entry.default)
                || wanted.iter().any(|w| w.eq_ignore_ascii_case(entry.name));
            if !selected {
                continue;
            }
            if !out.is_empty() {
                out.push_str("\r\n");
            }
            let mut section = InfoSection::new(entry.name);
            (entry.write)(&self.app, server, &mut section);
            out.push_str(section.as_str());
        }
    }

    /// Runs one request (`argv` is not empty) the way Redis' `processCommand` does: the checks,
    /// then, inside `MULTI`, queueing; otherwise the handler, with the connection's `hold` on
    /// the server's gate (shared, or exclusive for `EXEC`).
    pub(crate) async fn execute(
        &self,
        server: &ServerState,
        conn: &mut ConnState,
        argv: Vec<Bytes>,
        hold: &mut Hold<'_>,
    ) -> Outcome {
        let index = match self.check(conn, &argv) {
            Ok(index) => index,
            Err(outcome) => {
                conn.abort_multi();
                return outcome;
            }
        };
        let Some(entry) = self.entries.get(index) else {
            return Outcome::Reply(unknown_command(&argv).to_frame());
        };
        if conn.in_multi() && !entry.not_queued {
            conn.queue(argv);
            return Outcome::Reply(Frame::simple("QUEUED"));
        }
        let reply = if entry.exclusive {
            let _alone = hold.exclusive().await;
            self.run(entry, server, conn, argv).await
        } else {
            hold.shared().await;
            self.run(entry, server, conn, argv).await
        };
        Outcome::Reply(reply)
    }

    /// Runs a request of a transaction's queue: the checks again (an `AUTH` queued before it
    /// may have changed them), then the handler. The caller, `EXEC`, holds the gate.
    pub(crate) async fn execute_queued(
        &self,
        server: &ServerState,
        conn: &mut ConnState,
        argv: Vec<Bytes>,
    ) -> Frame {
        match self.check(conn, &argv).map(|index| self.entries.get(index)) {
            Ok(Some(entry)) => self.run(entry, server, conn, argv).await,
            Err(Outcome::Reply(reply)) => reply,
            Ok(None) | Err(Outcome::Drop) => unknown_command(&argv).to_frame(),
        }
    }

    /// Redis' checks before a command runs, in its order: the name, the subcommand, the arity,
    /// authentication. The table index of the command to run, or the refusal.
    fn check(&self, conn: &mut ConnState, argv: &[Bytes]) -> Result<usize, Outcome> {
        let metrics = &*self.metrics;
        let name = argv.first().cloned().unwrap_or_default();
        let mut buf = [0; MAX_NAME];
        let Some(mut index) = lowercase(&name, &mut buf).and_then(|k| self.top.get(k)).copied()
        else {
            if name.eq_ignore_ascii_case(b"post") || name.eq_ignore_ascii_case(b"host:") {
                security_warning(conn);
                return Err(Outcome::Drop);
            }
            metrics.unknown_commands.fetch_add(1, Relaxed);
            metrics.error_replies.fetch_add(1, Relaxed);
            return Err(Outcome::Reply(unknown_command(argv).to_frame()));
        };
        if let (Some(parent), Some(sub)) = (self.entries.get(index), argv.get(1))
            && !parent.subs.is_empty()
        {
            let found = lowercase(sub, &mut buf).and_then(|k| parent.subs.get(k)).copied();
            match found {
                Some(i) => index = i,
                None => {
                    metrics.error_replies.fetch_add(1, Relaxed);
                    return Err(Outcome::Reply(unknown_subcommand(&name, sub).to_frame()));
                }
            }
        }
        let Some(entry) = self.entries.get(index) else {
            return Err(Outcome::Reply(unknown_command(argv).to_frame()));
        };
        conn.info().set_last_command(index);
        let rejection = if !entry.spec.arity_ok(argv.len()) || entry.handler.is_none() {
            Some(CommandError::WrongArity { command: entry.spec.name.into() })
        } else if !conn.is_authenticated() && !entry.no_auth {
            Some(CommandError::NoAuth)
        } else {
            None
        };
        if let Some(mut err) = rejection {
            entry.stats.record_rejected();
            metrics.error_replies.fetch_add(1, Relaxed);
            if entry.exclusive {
                // A refused EXEC ends the transaction, as Redis' `execCommandAbort`.
                conn.take_multi();
                conn.unwatch();
                err = exec_refused(&err);
            }
            return Err(Outcome::Reply(err.to_frame()));
        }
        Ok(index)
    }

    /// Runs the handler of a checked request, counts it, and touches the keys of a write.
    async fn run(
        &self,
        entry: &Entry<S>,
        server: &ServerState,
        conn: &mut ConnState,
        argv: Vec<Bytes>,
    ) -> Frame {
        let metrics = &*self.metrics;
        let Some(handler) = entry.handler else { return Frame::Null };
        // The keys are needed after the handler took the arguments, only if someone watches.
        let written = (entry.writes && server.watches().is_watched()).then(|| argv.clone());
        // The slow log needs the arguments after the handler took them: keep what it would
        // keep (at most 32 of them), only while it is on.
        let slowlog = server.slowlog();
        let logged = (slowlog.log_slower_than() >= 0 && !entry.skip_slowlog)
            .then(|| (crate::slowlog::keep_args(&argv), argv.len()));
        let mut args = Parse::new(entry.spec.name, argv);
        for _ in 0..if entry.is_sub { 2 } else { 1 } {
            args.next();
        }
        let ctx = Ctx { app: &self.app, conn, server, dispatch: self };
        let start = Instant::now();
        let result = match handler {
            Handler::Sync(f) => f(ctx, args),
            Handler::Async(f) => f(ctx, args).await,
        };
        let elapsed = start.elapsed();
        if let Some((argv, argc)) = logged {
            slowlog.record(elapsed, &argv, argc, None, conn.peer_addr(), conn.name());
        }
        let reply = result.unwrap_or_else(|e| e.to_frame());
        let failed = reply.is_error();
        entry.stats.record(elapsed, failed);
        metrics.commands_total.fetch_add(1, Relaxed);
        if failed {
            metrics.error_replies.fetch_add(1, Relaxed);
        } else if let Some(argv) = written {
            server.watches().touch(&entry.spec, &argv);
        }
        reply
    }
}

/// Logs a cross-protocol scripting attempt at most once a minute, as Redis does.
fn security_warning(conn: &ConnState) {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let last = LAST.load(Relaxed);
    if now.saturating_sub(last) > 60 && LAST.compare_exchange(last, now, Relaxed, Relaxed).is_ok() {
        tracing::warn!(
            peer = ?conn.peer_addr(),
            "possible SECURITY ATTACK detected: a client sent POST or Host: to the RESP port \
             (cross protocol scripting); connection aborted"
        );
    }
}
