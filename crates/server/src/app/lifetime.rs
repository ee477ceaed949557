//! Key lifetimes: what `EXPIRE` and its family, `TTL` and its family, and `PERSIST` do to a
//! namespace, with Redis's rules (a time not in the future deletes the key; `GT` takes a key
//! without a time for one that never expires). The engine keeps the times
//! ([`Db::update_expiry`]), and decides each change in one step.
//!
//! Under `--redis`, a key of this process's `Db` is looked for first (there is none today:
//! the commands that make one are refused there); any other key is a URL namespace in Redis,
//! whose lifetime the engine keeps on every Redis key of the namespace
//! ([`Remote::update_expiry`], docs/protocol.md "Key lifetimes").

use urlseen_engine::{Expiry, ExpiryUpdate};

use crate::remote::Remote;

use super::*;

/// The conditions of `EXPIRE … NX|XX|GT|LT` (Redis 7).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExpireIf {
    /// Only if the key has no time.
    pub nx: bool,
    /// Only if it has one.
    pub xx: bool,
    /// Only if the new time is later (a key without a time never expires: never later).
    pub gt: bool,
    /// Only if the new time is earlier (a key without a time never expires: always earlier).
    pub lt: bool,
}

impl ExpireIf {
    /// Whether the key's time `current` (`None`: none) may become `at`.
    fn allows(self, current: Option<i64>, at: i64) -> bool {
        !(self.nx && current.is_some()
            || self.xx && current.is_none()
            || self.gt && current.is_none_or(|c| at <= c)
            || self.lt && current.is_some_and(|c| at >= c))
    }
}

impl App {
    /// Now, in Unix ms, by the `Db`'s clock (the one key lifetimes are measured by).
    pub fn now_ms(&self) -> i64 {
        i64::try_from(self.db.clock().now_millis()).unwrap_or(i64::MAX)
    }

    /// `EXPIRE` and its family: key `key` expires at `at` (Unix ms), if `cond` allows it; a
    /// time not in the future deletes it. Whether the key existed and `cond` allowed it (the
    /// command's 1 or 0).
    ///
    /// # Errors
    /// The expiry file could not be written (then nothing changed).
    pub fn expire_at(&self, key: &[u8], at: i64, cond: ExpireIf) -> Result<bool, CommandError> {
        let Ok(name) = std::str::from_utf8(key) else { return Ok(false) };
        let decide = |current: Expiry| {
            let current = current.at().map(|c| i64::try_from(c).unwrap_or(i64::MAX));
            // A time before the epoch is in the past as well: the key is deleted.
            cond.allows(current, at).then(|| Expiry::At(u64::try_from(at).unwrap_or(0)))
        };
        let mut update = self.db.update_expiry(name, decide).map_err(|e| write_error(&e))?;
        if update == ExpiryUpdate::Dropped {
            self.invalidate_caches();
        }
        if let (ExpiryUpdate::Missing, Some(remote)) = (update, self.remote()) {
            update = blocking_call(|| remote.update_expiry(key, decide))?;
        }
        Ok(matches!(update, ExpiryUpdate::Changed | ExpiryUpdate::Dropped))
    }

    /// `PERSIST`: removes the time of `key`; whether it had one.
    ///
    /// # Errors
    /// As [`Self::expire_at`].
    pub fn persist(&self, key: &[u8]) -> Result<bool, CommandError> {
        let Ok(name) = std::str::from_utf8(key) else { return Ok(false) };
        let decide = |current| (current != Expiry::Never).then_some(Expiry::Never);
        let mut update = self.db.update_expiry(name, decide).map_err(|e| write_error(&e))?;
        if let (ExpiryUpdate::Missing, Some(remote)) = (update, self.remote()) {
            update = blocking_call(|| remote.update_expiry(key, decide))?;
        }
        Ok(update == ExpiryUpdate::Changed)
    }

    /// When `key` expires; `None` if there is no such key.
    ///
    /// # Errors
    /// Under `--redis`, a Redis failure.
    pub fn expiry(&self, key: &[u8]) -> Result<Option<Expiry>, CommandError> {
        let local = std::str::from_utf8(key).ok().and_then(|name| self.db.expiry(name));
        match (local, self.remote()) {
            (None, Some(remote)) => blocking_call(|| Remote::expiry(remote, key)),
            (local, _) => Ok(local),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_follow_redis() {
        let nx = ExpireIf { nx: true, ..ExpireIf::default() };
        let xx = ExpireIf { xx: true, ..ExpireIf::default() };
        let gt = ExpireIf { gt: true, ..ExpireIf::default() };
        let lt = ExpireIf { lt: true, ..ExpireIf::default() };
        assert!(nx.allows(None, 5) && !nx.allows(Some(1), 5));
        assert!(!xx.allows(None, 5) && xx.allows(Some(1), 5));
        assert!(!gt.allows(None, 5) && gt.allows(Some(1), 5) && !gt.allows(Some(5), 5));
        assert!(lt.allows(None, 5) && lt.allows(Some(9), 5) && !lt.allows(Some(5), 5));
        assert!(ExpireIf::default().allows(Some(9), -1));
    }
}
