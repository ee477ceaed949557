//! Opening a data directory whose lock another process may still hold for a moment.

use urlseen_engine::{Db, Error, Result};

/// `open()`, waiting (up to 10 s) while the directory's lock is held. A child process that
/// another test of the same binary spawned while a test held the lock inherits the lock's
/// descriptor and keeps the lock until it execs (an `flock` belongs to the open file, which
/// the fork shares), and a killed child's lock can outlive its reaping for a moment. Seen under
/// `check.sh`'s load on a 2-core machine: `Locked` naming such a pid, in `crash.rs` after a
/// killed run and in `read_only.rs` right after a `Db` or read-only opens were dropped. The
/// tests check the data, not that timing.
pub fn when_unlocked(open: impl Fn() -> Result<Db>) -> Db {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match open() {
            Err(Error::Locked { holder, .. }) if std::time::Instant::now() < deadline => {
                eprintln!("data directory still locked by {holder}: waiting");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            opened => return opened.unwrap(),
        }
    }
}
