//! The pool of background threads that migrate splitting leaves (a DSBF's split worker),
//! shared by every tree of a `Db`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::tree::Dsbf;

/// The background threads that migrate splitting leaves, shared by every tree of a `Db`.
///
/// Threads start when a split is submitted (up to `max_threads`) and exit after a second with
/// no work, so an idle `Db` holds no threads.
#[derive(Debug)]
pub struct SplitWorkers {
    queue: Mutex<VecDeque<Weak<Dsbf>>>,
    wake: Condvar,
    idle: Condvar,
    running: AtomicUsize,
    busy: AtomicUsize,
    max_threads: usize,
}

impl SplitWorkers {
    /// A pool of at most `max_threads` (at least 1) migration threads.
    pub fn new(max_threads: usize) -> Arc<Self> {
        Arc::new(SplitWorkers {
            queue: Mutex::new(VecDeque::new()),
            wake: Condvar::new(),
            idle: Condvar::new(),
            running: AtomicUsize::new(0),
            busy: AtomicUsize::new(0),
            max_threads: max_threads.max(1),
        })
    }

    /// Queues `tree`'s splitting leaves for migration, starting a thread if none is free.
    pub(super) fn submit(self: &Arc<Self>, tree: Weak<Dsbf>) {
        let mut queue = self.queue.lock();
        if !queue.iter().any(|t| t.ptr_eq(&tree)) {
            queue.push_back(tree);
        }
        self.wake.notify_one();
        let running = self.running.load(Ordering::Acquire);
        if running < self.max_threads && running <= self.busy.load(Ordering::Acquire) {
            self.running.fetch_add(1, Ordering::AcqRel);
            let pool = Arc::clone(self);
            let spawned =
                std::thread::Builder::new().name("urlseen-split".into()).spawn(move || pool.work());
            if spawned.is_err() {
                // No thread: the queue is drained by the next submit or by wait_idle callers.
                self.running.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    fn work(&self) {
        loop {
            let job = {
                let mut queue = self.queue.lock();
                loop {
                    if let Some(job) = queue.pop_front() {
                        self.busy.fetch_add(1, Ordering::AcqRel);
                        break Some(job);
                    }
                    if self.wake.wait_for(&mut queue, Duration::from_secs(1)).timed_out()
                        && queue.is_empty()
                    {
                        // Under the queue lock, so submit never counts a thread that is leaving.
                        self.running.fetch_sub(1, Ordering::AcqRel);
                        break None;
                    }
                }
            };
            let Some(job) = job else {
                self.idle.notify_all();
                return;
            };
            if let Some(tree) = job.upgrade() {
                tree.complete_splits();
            }
            let _queue = self.queue.lock();
            self.busy.fetch_sub(1, Ordering::AcqRel);
            self.idle.notify_all();
        }
    }

    /// Blocks until no migration is queued or running.
    pub fn wait_idle(&self) {
        let mut queue = self.queue.lock();
        while !queue.is_empty() || self.busy.load(Ordering::Acquire) > 0 {
            self.idle.wait_for(&mut queue, Duration::from_millis(50));
        }
    }
}
