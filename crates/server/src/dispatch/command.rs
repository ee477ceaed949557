//! A command ready to register ([`Command`]): its spec, its handler and its subcommands.

use super::*;

/// A command ready to register: its spec, its handler and its subcommands.
pub struct Command<S> {
    pub(super) spec: CommandSpec,
    pub(super) handler: Option<Handler<S>>,
    pub(super) batch: Option<BatchHandler<S>>,
    pub(super) subcommands: Vec<Command<S>>,
    pub(super) exclusive: bool,
    pub(super) not_queued: bool,
}

impl<S> fmt::Debug for Command<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Command")
            .field("spec", &self.spec.name)
            .field("handler", &self.handler)
            .field("subcommands", &self.subcommands)
            .finish()
    }
}

impl<S> Command<S> {
    /// A command with a handler.
    pub fn new(spec: CommandSpec, handler: Handler<S>) -> Command<S> {
        Command {
            spec,
            handler: Some(handler),
            batch: None,
            subcommands: Vec::new(),
            exclusive: false,
            not_queued: false,
        }
    }

    /// A command with a synchronous handler.
    pub fn sync(spec: CommandSpec, handler: SyncHandler<S>) -> Command<S> {
        Command::new(spec, Handler::Sync(handler))
    }

    /// A command with an asynchronous handler.
    pub fn new_async(spec: CommandSpec, handler: AsyncHandler<S>) -> Command<S> {
        Command::new(spec, Handler::Async(handler))
    }

    /// A container (such as `CLIENT`) that only dispatches to subcommands. Give it an arity of
    /// `-2` so that the bare name is a wrong-arity error, like Redis.
    pub fn container(spec: CommandSpec) -> Command<S> {
        Command {
            spec,
            handler: None,
            batch: None,
            subcommands: Vec::new(),
            exclusive: false,
            not_queued: false,
        }
    }

    /// Also runs consecutive pipelined calls of this command as one batch with `handler`
    /// (a top-level command only; the connection collects at most [`MAX_BATCH`] of them).
    pub fn batched(mut self, handler: BatchHandler<S>) -> Command<S> {
        self.batch = Some(handler);
        self
    }

    /// Runs with no other client's command running: the handler holds the server's gate
    /// exclusively instead of shared (`EXEC`, which runs a transaction's queue). Refused (wrong
    /// arity, not authenticated), it ends the transaction with `-EXECABORT`, as Redis' `EXEC`.
    pub fn exclusive(mut self) -> Command<S> {
        self.exclusive = true;
        self
    }

    /// Runs at once inside `MULTI` instead of being queued (`MULTI`, `EXEC`, `DISCARD`,
    /// `WATCH`, `QUIT`, as in Redis).
    pub fn not_queued(mut self) -> Command<S> {
        self.not_queued = true;
        self
    }

    /// Adds a subcommand, whose spec name is `parent|sub`.
    pub fn subcommand(mut self, sub: Command<S>) -> Command<S> {
        self.subcommands.push(sub);
        self
    }

    /// The spec.
    pub fn spec(&self) -> &CommandSpec {
        &self.spec
    }
}
