//! Transactions: `MULTI`/`EXEC`/`DISCARD` and `WATCH`/`UNWATCH`, as Redis has them.
//!
//! - **Queueing.** After `MULTI` a connection's commands are checked (name, subcommand, arity,
//!   authentication) and queued (`+QUEUED`) instead of run; a command that fails the checks is
//!   answered with its error at once and marks the transaction, whose `EXEC` then answers
//!   `-EXECABORT`. [`Queue`] is that state, held by [`ConnState`](crate::ConnState).
//! - **Atomicity.** Every command runs holding the server's [`Gate`] shared; `EXEC` holds it
//!   exclusively while it runs its queue, so no other client's command runs in between. A
//!   connection takes the gate once for all the requests it has buffered (`Hold`), so a
//!   pipeline pays for the lock once, not per command.
//! - **Optimistic locking.** `WATCH key…` registers the connection in [`Watches`]; a write
//!   command that succeeds marks every connection watching one of its keys (a write command
//!   without keys, `FLUSHALL`, marks every watcher). `EXEC` of a marked connection runs nothing
//!   and answers the null array. When nobody watches, a write costs one atomic load.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::{RwLockReadGuard, RwLockWriteGuard};

use crate::spec::CommandSpec;

/// The lock that makes `EXEC` atomic: commands hold it shared, `EXEC` exclusively.
pub type Gate = tokio::sync::RwLock<()>;

/// A connection's hold on the [`Gate`]. Taken shared for the first command of a read and kept
/// for the rest of the requests already buffered, so a pipeline pays for the lock once; the
/// connection releases it before it waits on the client (flushing, reading, delaying).
#[derive(Debug)]
pub(crate) struct Hold<'a> {
    gate: &'a Gate,
    shared: Option<RwLockReadGuard<'a, ()>>,
}

impl<'a> Hold<'a> {
    /// Holding nothing yet.
    pub(crate) fn new(gate: &'a Gate) -> Hold<'a> {
        Hold { gate, shared: None }
    }

    /// Holds the gate shared (waits while an `EXEC` runs).
    pub(crate) async fn shared(&mut self) {
        if self.shared.is_none() {
            self.shared = Some(self.gate.read().await);
        }
    }

    /// Holds the gate alone: lets go of the shared hold, then waits for every other.
    pub(crate) async fn exclusive(&mut self) -> RwLockWriteGuard<'a, ()> {
        self.release();
        self.gate.write().await
    }

    /// Lets go of the shared hold, if held.
    pub(crate) fn release(&mut self) {
        self.shared = None;
    }
}

/// The commands of an open transaction (between `MULTI` and `EXEC`/`DISCARD`).
#[derive(Debug, Default)]
pub struct Queue {
    /// The queued requests, in order.
    pub(crate) commands: Vec<Vec<Bytes>>,
    /// A command failed the checks while queueing: `EXEC` answers `-EXECABORT`.
    pub(crate) aborted: bool,
}

impl Queue {
    /// How many commands are queued.
    pub fn len(&self) -> usize {
        self.commands.len()
    }

    /// Whether no command is queued.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// Whether a queueing error doomed the transaction.
    pub fn is_aborted(&self) -> bool {
        self.aborted
    }
}

/// Who watches which key, server-wide.
#[derive(Debug, Default)]
pub struct Watches {
    /// Registrations (one per connection and key): zero lets writes skip the map.
    active: AtomicUsize,
    keys: Mutex<HashMap<Bytes, Vec<Arc<AtomicBool>>>>,
}

impl Watches {
    /// Whether any connection watches a key (writes skip [`Watches::touch`] otherwise).
    pub(crate) fn is_watched(&self) -> bool {
        self.active.load(Relaxed) > 0
    }

    /// Marks the watchers of the keys `argv` names as a call of `spec` (a successful write).
    /// A write command without key positions marks every watcher.
    pub(crate) fn touch(&self, spec: &CommandSpec, argv: &[Bytes]) {
        let keys = self.keys.lock();
        if spec.first_key <= 0 {
            keys.values().flatten().for_each(|w| w.store(true, Relaxed));
            return;
        }
        for key in key_args(spec, argv) {
            if let Some(watchers) = keys.get(key) {
                watchers.iter().for_each(|w| w.store(true, Relaxed));
            }
        }
    }

    fn add(&self, key: &Bytes, dirty: &Arc<AtomicBool>) {
        self.keys.lock().entry(key.clone()).or_default().push(dirty.clone());
        self.active.fetch_add(1, Relaxed);
    }

    fn remove(&self, key: &Bytes, dirty: &Arc<AtomicBool>) {
        let mut keys = self.keys.lock();
        if let Some(watchers) = keys.get_mut(key) {
            let before = watchers.len();
            watchers.retain(|w| !Arc::ptr_eq(w, dirty));
            self.active.fetch_sub(before - watchers.len(), Relaxed);
            if watchers.is_empty() {
                keys.remove(key);
            }
        }
    }
}

/// The keys a call names, from the spec's key positions (1-based, `last_key` negative from
/// the end).
fn key_args<'a>(spec: &CommandSpec, argv: &'a [Bytes]) -> impl Iterator<Item = &'a Bytes> {
    let len = i64::try_from(argv.len()).unwrap_or(i64::MAX);
    let last = match i64::from(spec.last_key) {
        l if l < 0 => len + l,
        l => l.min(len - 1),
    };
    let first = usize::try_from(spec.first_key).ok().filter(|&f| f > 0);
    let keys = match (first, usize::try_from(last)) {
        (Some(first), Ok(last)) => argv.get(first..=last).unwrap_or_default(),
        _ => &[],
    };
    keys.iter().step_by(usize::try_from(spec.key_step).unwrap_or(1).max(1))
}

/// One connection's watched keys. Dropping it unregisters them (on `EXEC`, `DISCARD`,
/// `UNWATCH`, and when the connection ends).
#[derive(Debug)]
pub struct Watching {
    watches: Arc<Watches>,
    dirty: Arc<AtomicBool>,
    keys: Vec<Bytes>,
}

impl Watching {
    /// Nothing watched yet, registering into `watches`.
    pub(crate) fn new(watches: Arc<Watches>) -> Watching {
        Watching { watches, dirty: Arc::new(AtomicBool::new(false)), keys: Vec::new() }
    }

    /// Watches `key` too (once, however often it is named).
    pub(crate) fn add(&mut self, key: Bytes) {
        if !self.keys.contains(&key) {
            self.watches.add(&key, &self.dirty);
            self.keys.push(key);
        }
    }

    /// Whether a watched key was written since it was watched.
    pub(crate) fn is_dirty(&self) -> bool {
        self.dirty.load(Relaxed)
    }

    /// How many keys are watched.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether no key is watched.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        for key in &self.keys {
            self.watches.remove(key, &self.dirty);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&'static str]) -> Vec<Bytes> {
        args.iter().map(|a| Bytes::from_static(a.as_bytes())).collect()
    }

    #[test]
    fn key_positions_follow_the_spec() {
        let one = CommandSpec::new("bf.add", 3).keys(1, 1, 1);
        let all = CommandSpec::new("del", -2).keys(1, -1, 1);
        let keys = |spec, a: &[&'static str]| {
            let a = argv(a);
            key_args(spec, &a).cloned().collect::<Vec<_>>()
        };
        assert_eq!(keys(&one, &["BF.ADD", "k", "x"]), argv(&["k"]));
        assert_eq!(keys(&all, &["DEL", "a", "b", "c"]), argv(&["a", "b", "c"]));
        assert!(keys(&CommandSpec::new("ping", -1), &["PING", "x"]).is_empty());
    }

    #[test]
    fn a_write_marks_only_the_watchers_of_its_keys_and_unwatching_unregisters() {
        let watches = Arc::new(Watches::default());
        let spec = CommandSpec::new("bf.add", 3).keys(1, 1, 1).flags(&["write"]);
        let mut a = Watching::new(watches.clone());
        a.add(Bytes::from_static(b"k"));
        a.add(Bytes::from_static(b"k"));
        let mut b = Watching::new(watches.clone());
        b.add(Bytes::from_static(b"other"));
        assert_eq!(watches.active.load(Relaxed), 2);
        watches.touch(&spec, &argv(&["BF.ADD", "k", "x"]));
        assert!(a.is_dirty());
        assert!(!b.is_dirty());
        watches.touch(&CommandSpec::new("flushall", -1).flags(&["write"]), &argv(&["FLUSHALL"]));
        assert!(b.is_dirty());
        drop((a, b));
        assert_eq!(watches.active.load(Relaxed), 0);
        assert!(watches.keys.lock().is_empty());
    }
}
