//! Pipelined calls of one command run as one batch (a command with a [`BatchHandler`]): the
//! table's lookup for them, and the batch's checks, call and bookkeeping.

use super::*;

/// Most pipelined calls of one command a connection runs as one batch.
pub const MAX_BATCH: usize = 512;

impl<S> Dispatch<S> {
    /// The table index of `argv`'s command if it has a [`BatchHandler`]: requests with the same
    /// index may be run together by [`Dispatch::execute_batch`].
    pub(crate) fn batch_index(&self, argv: &[Bytes]) -> Option<usize> {
        let mut buf = [0; MAX_NAME];
        let index = lowercase(argv.first()?, &mut buf).and_then(|k| self.top.get(k)).copied()?;
        self.entries.get(index)?.batch.map(|_| index)
    }

    /// Runs pipelined requests of the batchable command at `index`, with the same checks,
    /// replies and counts as [`Dispatch::execute`] one by one, holding the server's gate shared.
    /// Each call's latency is recorded as the batch's time divided by the calls in it.
    pub(crate) async fn execute_batch(
        &self,
        server: &ServerState,
        conn: &mut ConnState,
        index: usize,
        argvs: Vec<Vec<Bytes>>,
        hold: &mut Hold<'_>,
    ) -> Vec<Frame> {
        let metrics = &*self.metrics;
        let Some((entry, batch)) = self.entries.get(index).and_then(|e| Some((e, e.batch?))) else {
            return argvs.iter().map(|argv| unknown_command(argv).to_frame()).collect();
        };
        conn.info().set_last_command(index);
        let watched = entry.writes && server.watches().is_watched();
        let mut written = Vec::new();
        let mut replies: Vec<Option<Frame>> = Vec::with_capacity(argvs.len());
        let mut parses = Vec::with_capacity(argvs.len());
        let mut positions = Vec::with_capacity(argvs.len());
        let mut first_argv: Option<(Vec<Bytes>, usize)> = None;
        for argv in argvs {
            let rejection = if !entry.spec.arity_ok(argv.len()) {
                Some(CommandError::WrongArity { command: entry.spec.name.into() })
            } else if !conn.is_authenticated() && !entry.no_auth {
                Some(CommandError::NoAuth)
            } else {
                None
            };
            if let Some(err) = rejection {
                entry.stats.record_rejected();
                metrics.error_replies.fetch_add(1, Relaxed);
                replies.push(Some(err.to_frame()));
                continue;
            }
            if watched {
                written.push(argv.clone());
            }
            if first_argv.is_none() && server.slowlog().log_slower_than() >= 0 {
                first_argv = Some((crate::slowlog::keep_args(&argv), argv.len()));
            }
            let mut args = Parse::new(entry.spec.name, argv);
            args.next();
            positions.push(replies.len());
            replies.push(None);
            parses.push(args);
        }
        if !parses.is_empty() {
            hold.shared().await;
            let ran = parses.len();
            let first = first_argv.take().unwrap_or_default();
            let ctx = Ctx { app: &self.app, conn, server, dispatch: self };
            let start = Instant::now();
            let results = batch(ctx, parses);
            let elapsed = start.elapsed();
            // One slow-log entry for the batch, with its whole time (see `slowlog`).
            let note =
                (ran > 1).then(|| format!("... ({} more pipelined calls in this batch)", ran - 1));
            server.slowlog().record(
                elapsed,
                &first.0,
                first.1,
                note,
                conn.peer_addr(),
                conn.name(),
            );
            let each = elapsed / u32::try_from(ran).unwrap_or(u32::MAX);
            let mut results = results.into_iter();
            for (i, &pos) in positions.iter().enumerate() {
                let reply = match results.next() {
                    Some(result) => result.unwrap_or_else(|e| e.to_frame()),
                    None => CommandError::custom("ERR internal error: no reply").to_frame(),
                };
                let failed = reply.is_error();
                entry.stats.record(each, failed);
                metrics.commands_total.fetch_add(1, Relaxed);
                if failed {
                    metrics.error_replies.fetch_add(1, Relaxed);
                } else if let Some(argv) = written.get(i) {
                    server.watches().touch(&entry.spec, argv);
                }
                if let Some(slot) = replies.get_mut(pos) {
                    *slot = Some(reply);
                }
            }
        }
        replies.into_iter().map(|r| r.unwrap_or(Frame::Null)).collect()
    }
}
