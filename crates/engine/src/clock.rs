//! Wall-clock time for recrawl windows: the system's clock, or one a test moves.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of wall-clock time. [`SystemClock`] in production; [`FakeClock`] in tests.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Milliseconds since the Unix epoch.
    fn now_millis(&self) -> u64;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
    }
}

/// A clock that moves only when told: for tests of recrawl windows.
///
/// ```
/// use std::time::Duration;
/// use urlseen_engine::recrawl::{Clock, FakeClock};
/// let clock = FakeClock::at(1_000);
/// clock.advance(Duration::from_secs(2));
/// assert_eq!(clock.now_millis(), 3_000);
/// ```
#[derive(Debug, Default)]
pub struct FakeClock {
    now: AtomicU64,
}

impl FakeClock {
    /// A clock showing `millis` since the Unix epoch.
    pub fn at(millis: u64) -> Arc<Self> {
        Arc::new(FakeClock { now: AtomicU64::new(millis) })
    }

    /// Sets the time.
    pub fn set(&self, millis: u64) {
        self.now.store(millis, Ordering::SeqCst);
    }

    /// Moves the time forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.now.fetch_add(by.as_millis() as u64, Ordering::SeqCst);
    }
}

impl Clock for FakeClock {
    fn now_millis(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}
