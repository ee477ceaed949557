//! Recrawl windows in Redis: the generations of [`urlseen_engine::recrawl`], each a
//! [`RedisNamespace`] of its own.
//!
//! A namespace `news` with a window `W` of `g` generations is, in Redis:
//!
//! ```text
//! urlseen:{news}:recrawl          "v1 window_ms=2592000000 generations=8" (or "none")
//! urlseen:{news}:gens             sorted set of the generations made so far (slot starts, ms)
//! urlseen:{news.gen-<start>}:meta  a whole DSBF per generation, named from its slot start,
//! urlseen:{news.gen-<start>:1}:log  sized for capacity/g URLs at generation_fpr(f, g)
//! …
//! ```
//!
//! The window is fixed by the first client that opens the namespace (an atomic script writes
//! `recrawl`, or `none` for a namespace without a window, or an existing plain namespace), so
//! every later client, whatever its options, uses the same `W` and `g`.
//!
//! Time comes from the client's [`Clock`], cut into slots of `W/g` aligned on the Unix epoch,
//! as in a data directory. A check-and-insert looks in every live generation of the client's
//! clock, and records what none holds in the current one (its check-and-insert is atomic in
//! Redis, so clients that agree on the slot give "new" to exactly one of them). A generation
//! whose slot started `W` ago is no longer looked at; `margin` later (`min(W/g, 60 s)`, the
//! clock skew tolerated between clients) the first client that notices deletes its keys, and
//! Redis deletes them anyway by their expiry (`PEXPIREAT` the same time), set when the
//! generation is made, when a client opens it, and again on every key of it after any change of
//! its shape this client sees (a split's new leaves). When the window moves on to a new slot,
//! the previous generation's splits are finished first ([`RedisWindow`]'s `settle`), since an
//! old generation takes no writes that would trigger them. A clock behind Redis's by more than
//! the margin is refused at open. See docs/recrawl.md, "With --redis", for clock skew.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ::redis::Value;
use parking_lot::Mutex;
use urlseen_engine::fingerprint::Fingerprinter;

use super::router::{Layout, Place, Req};
use super::{
    Backoff, Error, RedisDb, RedisNamespace, RedisSet, RedisStats, Result, meta_key, meta_place,
    namespace_key, node_key,
};
use urlseen_engine::NamespaceOptions;
use urlseen_engine::dsbf::NodeId;
use urlseen_engine::recrawl::{Clock, GenerationReport, RecrawlReport, SystemClock};

/// Longest time a generation's keys outlive its window: the clock skew tolerated between
/// clients (one whose clock is behind still reads a generation this long after others stopped).
pub const MAX_MARGIN_MS: u64 = 60_000;

/// What a generation's name adds to its namespace's: `.gen-<slot start in ms>`.
const GEN_INFIX: &str = ".gen-";

/// Longest name of a namespace with a window (a generation's name must fit in 128 bytes).
const MAX_WINDOW_NAME: usize = 128 - GEN_INFIX.len() - 20;

/// Decides, once and for all clients, whether namespace `KEYS[2]`'s tree has a window:
/// the stored decision if there is one; `none` for a namespace made before windows existed
/// in Redis (its metadata exists: the decision then takes its lifetime); else ours (`ARGV[1]`).
const DECIDE: &str = r"
local w = redis.call('GET', KEYS[1])
if w then return w end
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('SET', KEYS[1], 'none')
  local at = redis.call('HGET', KEYS[2], 'expire_at')
  if at and at ~= '0' then redis.call('PEXPIREAT', KEYS[1], at) end
  return 'none'
end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
";

/// One generation: a tree of its own, for the slot that starts at `start`.
#[derive(Debug)]
struct Gen {
    start: u64,
    ns: Arc<RedisNamespace>,
    /// The metadata version whose keys were last given their expiry.
    stamped: AtomicU64,
}

#[derive(Debug, Default)]
struct Live {
    /// Oldest first. May hold expired ones until the next refresh.
    gens: Vec<Arc<Gen>>,
    /// The slot in which the registry was last read (`u64::MAX`: never).
    read_in: u64,
}

/// A namespace with a recrawl window, in Redis (see the module docs). `Send + Sync`.
#[derive(Debug)]
pub struct RedisWindow {
    db: RedisDb,
    name: String,
    /// The namespace's options, with the window Redis holds.
    options: NamespaceOptions,
    /// Each generation's.
    gen_options: NamespaceOptions,
    fingerprinter: Fingerprinter,
    /// `W`, `W/g` and the margin, in milliseconds.
    window: u64,
    span: u64,
    margin: u64,
    clock: Arc<dyn Clock>,
    live: Mutex<Live>,
}

/// A window's statistics, from [`RedisWindow::stats`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RedisWindowStats {
    /// The window, its generations (as [`urlseen_engine::NamespaceStats::recrawl`] reports them):
    /// `memory_bytes` is the filters this client holds for the generation, `disk_bytes` the
    /// bytes of its fingerprint logs in Redis.
    pub report: RecrawlReport,
    /// Each live generation's own statistics, oldest first.
    pub generations: Vec<RedisStats>,
}

impl RedisWindowStats {
    /// URLs recorded in the live generations.
    pub fn count(&self) -> u64 {
        self.generations.iter().map(|g| g.count).sum()
    }
}

impl RedisDb {
    /// Opens namespace `name`, with a recrawl window if it has one: the window Redis holds for
    /// it, or, for a namespace Redis does not have yet, `options.recrawl_after` (none: a plain
    /// namespace, as [`RedisDb::namespace`]). An existing namespace keeps its own window (or
    /// its lack of one) whatever `options` say. Time is the system clock's.
    ///
    /// # Errors
    /// As [`RedisDb::namespace`] (a window's generations must match `options` but for the
    /// window).
    pub fn open_namespace(&self, name: &str, options: NamespaceOptions) -> Result<RedisSet> {
        self.open_namespace_with(name, options, Arc::new(SystemClock))
    }

    /// [`RedisDb::open_namespace`] with a clock (a [`FakeClock`](urlseen_engine::FakeClock) in
    /// tests).
    ///
    /// # Errors
    /// As [`RedisDb::open_namespace`].
    pub fn open_namespace_with(
        &self,
        name: &str,
        options: NamespaceOptions,
        clock: Arc<dyn Clock>,
    ) -> Result<RedisSet> {
        if generation_of(name).is_some() {
            return Err(Error::Config(format!(
                "namespace name {name:?}: names ending in {GEN_INFIX}<digits> are a recrawl \
                 window's generations"
            )));
        }
        options.validate()?;
        let too_long = || {
            Error::Config(format!(
                "namespace name {name:?}: a namespace with a recrawl window takes at most \
                 {MAX_WINDOW_NAME} bytes"
            ))
        };
        if options.recrawl_after.is_some() && name.len() > MAX_WINDOW_NAME {
            // Before the decision is stored: a window refused leaves nothing behind.
            return Err(too_long());
        }
        let ours = match options.recrawl_after {
            Some(w) => {
                format!("v1 window_ms={} generations={}", w.as_millis(), options.generations)
            }
            None => "none".to_owned(),
        };
        let stored = self.retrying(|| {
            let mut c = ::redis::cmd("EVAL");
            c.arg(DECIDE).arg(2).arg(window_key(name)).arg(meta_key(name)).arg(ours.as_str());
            self.router.one(meta_place(name), c)
        })?;
        let stored = match &stored {
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            Value::SimpleString(s) => s.clone(),
            other => {
                return Err(Error::Protocol {
                    node: self.router.node_name(0),
                    what: "window decision",
                    reply: format!("{other:?}"),
                });
            }
        };
        let Some((window_ms, generations)) = parse_window(&stored) else {
            if stored == "none" {
                let plain = NamespaceOptions { recrawl_after: None, ..options };
                return Ok(RedisSet::Plain(self.namespace(name, plain)?));
            }
            return Err(Error::BadMeta {
                name: name.to_owned(),
                reason: format!("recrawl window {stored:?}"),
            });
        };
        if name.len() > MAX_WINDOW_NAME {
            return Err(too_long());
        }
        let options = NamespaceOptions {
            recrawl_after: Some(std::time::Duration::from_millis(window_ms)),
            generations,
            ..options
        };
        options.validate()?;
        let span = window_ms / u64::from(generations);
        let window = RedisWindow {
            db: self.clone(),
            name: name.to_owned(),
            gen_options: options.generation_options(),
            fingerprinter: Fingerprinter::new(&options),
            options,
            window: window_ms,
            span,
            margin: span.min(MAX_MARGIN_MS),
            clock,
            live: Mutex::new(Live { gens: Vec::new(), read_in: u64::MAX }),
        };
        window.check_clock()?;
        // Reads the generations, gives them their expiry, drops the expired ones.
        let now = window.clock.now_millis();
        window.generations(now, false)?;
        for g in window.live.lock().gens.iter() {
            window.stamp(g, true)?;
        }
        Ok(RedisSet::Window(Arc::new(window)))
    }

    /// Whether Redis holds namespace `name` (with or without a window).
    ///
    /// # Errors
    /// Connection errors.
    pub fn namespace_exists(&self, name: &str) -> Result<bool> {
        let reply = self.retrying(|| {
            let mut c = ::redis::cmd("EXISTS");
            c.arg(window_key(name)).arg(meta_key(name));
            self.router.one(meta_place(name), c)
        })?;
        Ok(matches!(reply, Value::Int(n) if n > 0))
    }

    /// Deletes namespace `name` from Redis, with its window and every generation if it has one
    /// (see [`RedisDb::drop_namespace`]).
    ///
    /// # Errors
    /// Connection errors.
    pub fn drop_any_namespace(&self, name: &str) -> Result<()> {
        for start in self.registry(name)? {
            self.drop_namespace(&generation_name(name, start))?;
        }
        self.drop_namespace(name)?;
        let mut del = ::redis::cmd("DEL");
        del.arg(window_key(name)).arg(registry_key(name));
        self.retrying(|| self.router.one(meta_place(name), del.clone()))?;
        Ok(())
    }

    /// The slot starts in namespace `name`'s registry of generations, oldest first.
    fn registry(&self, name: &str) -> Result<Vec<u64>> {
        let reply = self.retrying(|| {
            let mut c = ::redis::cmd("ZRANGE");
            c.arg(registry_key(name)).arg(0).arg(-1);
            self.router.one(meta_place(name), c)
        })?;
        let Value::Array(items) = reply else {
            return Err(Error::Protocol {
                node: self.router.node_name(0),
                what: "ZRANGE generations",
                reply: format!("{reply:?}"),
            });
        };
        let mut starts: Vec<u64> = items
            .iter()
            .filter_map(|v| match v {
                Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
                _ => None,
            })
            .collect();
        starts.sort_unstable();
        Ok(starts)
    }

    pub(super) fn retrying<T>(&self, mut f: impl FnMut() -> Result<T>) -> Result<T> {
        let mut backoff = Backoff::new(&self.options, Some(&self.router));
        loop {
            match f() {
                Ok(v) => return Ok(v),
                Err(e) => backoff.wait(e)?,
            }
        }
    }
}

impl RedisWindow {
    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its options, with the window Redis holds for it.
    pub fn options(&self) -> &NamespaceOptions {
        &self.options
    }

    /// Refuses a clock behind Redis's by more than the margin: Redis would free generations
    /// (by their expiry) that this client still reads.
    fn check_clock(&self) -> Result<()> {
        let reply = self
            .db
            .retrying(|| self.db.router.one(meta_place(&self.name), ::redis::cmd("TIME")))?;
        let redis_ms = match &reply {
            Value::Array(v) => match &v[..] {
                [Value::BulkString(s), Value::BulkString(us)] => {
                    let s: u64 = String::from_utf8_lossy(s).parse().unwrap_or(0);
                    let us: u64 = String::from_utf8_lossy(us).parse().unwrap_or(0);
                    s * 1000 + us / 1000
                }
                _ => 0,
            },
            _ => 0,
        };
        let ours = self.clock.now_millis();
        if ours.saturating_add(self.margin) < redis_ms {
            return Err(Error::Config(format!(
                "namespace {:?}: this clock is {} ms behind redis's, more than the {} ms a \
                 recrawl window tolerates (its generations expire by redis's clock): fix the clock",
                self.name,
                redis_ms - ours,
                self.margin,
            )));
        }
        Ok(())
    }

    fn slot(&self, now: u64) -> u64 {
        now - now % self.span
    }

    fn expired(&self, start: u64, now: u64) -> bool {
        start.saturating_add(self.window) <= now
    }

    /// Whether a generation's keys may be deleted: `margin` after it stopped being read.
    fn deletable(&self, start: u64, now: u64) -> bool {
        start.saturating_add(self.window).saturating_add(self.margin) <= now
    }

    /// The generations live at `now`, oldest first; with `write`, the last is the current one
    /// (made if no client made it yet). The registry is read again at the first call of every
    /// slot, and at every call while the current generation is not known to exist (a reader
    /// must see a generation made by a writer elsewhere).
    fn generations(&self, now: u64, write: bool) -> Result<Vec<Arc<Gen>>> {
        let slot = self.slot(now);
        let mut live = self.live.lock();
        let has_current = live.gens.last().is_some_and(|g| g.start == slot);
        if live.read_in != slot || !has_current {
            self.refresh(&mut live, now)?;
            if write && live.gens.last().is_none_or(|g| g.start != slot) {
                if let Some(previous) = live.gens.last() {
                    self.settle(previous)?;
                }
                let made = self.make(slot)?;
                live.gens.push(made);
            }
        }
        Ok(live.gens.iter().filter(|g| !self.expired(g.start, now)).cloned().collect())
    }

    /// Reads the registry: opens the live generations this client has not opened, forgets
    /// the expired ones, and deletes those past their margin.
    fn refresh(&self, live: &mut Live, now: u64) -> Result<()> {
        let starts = self.db.registry(&self.name)?;
        for &start in &starts {
            if self.deletable(start, now) {
                self.delete(start)?;
            }
        }
        live.gens.retain(|g| !self.expired(g.start, now));
        for start in starts {
            if self.expired(start, now) || live.gens.iter().any(|g| g.start == start) {
                continue;
            }
            let ns =
                self.db.namespace(&generation_name(&self.name, start), self.gen_options.clone())?;
            live.gens.push(Arc::new(Gen { start, ns, stamped: AtomicU64::new(0) }));
        }
        live.gens.sort_by_key(|g| g.start);
        live.read_in = self.slot(now);
        Ok(())
    }

    /// Brings a generation that takes no more writes under its FPR bound for good: a leaf in
    /// Redis may pass its split point by up to one batch, and splits when a write next comes
    /// to it, which never happens in an old generation. Then gives the keys of its split
    /// children their expiry. Idempotent (every client that moves on to the next slot runs it;
    /// the split locks make them share the work).
    fn settle(&self, g: &Gen) -> Result<()> {
        g.ns.complete_splits()?;
        self.stamp(g, false)
    }

    /// Makes the generation of the slot at `start` (or opens it, if another client just did).
    fn make(&self, start: u64) -> Result<Arc<Gen>> {
        let name = generation_name(&self.name, start);
        // The tree first, then its registration: a client that finds it registered finds it
        // made. A client that dies in between leaves a tree nobody lists, freed by its expiry.
        let ns = self.db.namespace(&name, self.gen_options.clone())?;
        let made = Arc::new(Gen { start, ns, stamped: AtomicU64::new(0) });
        self.stamp(&made, true)?;
        let mut add = ::redis::cmd("ZADD");
        add.arg(registry_key(&self.name)).arg(start).arg(start);
        self.db.retrying(|| self.db.router.one(meta_place(&self.name), add.clone()))?;
        Ok(made)
    }

    /// Deletes a generation's keys and unlists it (another client may be doing the same).
    fn delete(&self, start: u64) -> Result<()> {
        let name = generation_name(&self.name, start);
        self.db.retrying(|| self.db.drop_namespace(&name))?;
        let mut rem = ::redis::cmd("ZREM");
        rem.arg(registry_key(&self.name)).arg(start);
        self.db.retrying(|| self.db.router.one(meta_place(&self.name), rem.clone()))?;
        Ok(())
    }

    /// Gives every key of generation `g` its expiry, if its shape changed since the last time
    /// (or always, with `force`): keys made by a split after the generation was made have none.
    fn stamp(&self, g: &Gen, force: bool) -> Result<()> {
        let meta = Arc::clone(&*g.ns.meta.read());
        if !force && g.stamped.load(Ordering::Relaxed) == meta.version {
            return Ok(());
        }
        // Absolute, in Redis's clock: the open checked that ours is not behind it by more
        // than the margin, so Redis never frees a generation a client still reads.
        let end = g.start.saturating_add(self.window).saturating_add(self.margin);
        let name = generation_name(&self.name, g.start);
        let pexpire = |key: Vec<u8>, index: u32| {
            let mut c = ::redis::cmd("PEXPIREAT");
            c.arg(&key[..]).arg(end);
            Req { place: Place { key, index }, cmd: c }
        };
        let mut reqs = vec![pexpire(meta_key(&name), 0)];
        for id in 1..meta.nodes.len() as NodeId {
            // Not the split lock: it keeps its own, short, expiry.
            for what in super::NODE_KEYS.iter().filter(|&&k| k != "lock") {
                reqs.push(pexpire(node_key(&name, id, what), id - 1));
            }
        }
        if let Layout::Nodes(n) = self.db.router.layout() {
            for i in 0..n {
                reqs.push(pexpire(namespace_key(&name, "pos"), i as u32));
            }
        }
        self.db.retrying(|| self.db.router.exec(reqs.iter().map(clone_req).collect()))?;
        g.stamped.store(meta.version, Ordering::Relaxed);
        Ok(())
    }

    /// Check-and-insert (see
    /// [`SeenSet::seen_fingerprints`](urlseen_engine::SeenSet::seen_fingerprints)): "seen" if a
    /// live generation holds it, else recorded in the current one.
    pub(super) fn seen(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        let now = self.clock.now_millis();
        let gens = self.generations(now, true)?;
        let Some((current, old)) = gens.split_last() else {
            return Err(Error::Config("recrawl window: no current generation".into()));
        };
        union(old, fps, out)?;
        let (rest, at): (Vec<u64>, Vec<usize>) = fps
            .iter()
            .zip(out.iter())
            .enumerate()
            .filter(|(_, (_, s))| !**s)
            .map(|(i, (f, _))| (*f, i))
            .unzip();
        let mut answers = vec![false; rest.len()];
        urlseen_engine::SeenSet::seen_fingerprints(&*current.ns, &rest, &mut answers)?;
        // Early in a slot, a client whose clock is behind may still record in the previous
        // generation a URL this one has just recorded here: look there again for the URLs
        // answered new, so that only a record made after this look answers new twice.
        if let Some(previous) = old.last()
            && self.clock.now_millis() < current.start.saturating_add(self.margin)
        {
            let fresh: Vec<u64> =
                rest.iter().zip(&answers).filter(|(_, s)| !**s).map(|(f, _)| *f).collect();
            if !fresh.is_empty() {
                let mut there = vec![false; fresh.len()];
                urlseen_engine::SeenSet::contains_fingerprints(&*previous.ns, &fresh, &mut there)?;
                let mut there = there.into_iter();
                for a in answers.iter_mut().filter(|a| !**a) {
                    *a = there.next().unwrap_or(false);
                }
            }
        }
        for (&i, &s) in at.iter().zip(&answers) {
            out[i] = s;
        }
        self.stamp(current, false)
    }

    /// Read-only: "seen" if a live generation holds it.
    pub(super) fn contains(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        let now = self.clock.now_millis();
        union(&self.generations(now, false)?, fps, out)
    }

    /// The window and its live generations, read from Redis now.
    ///
    /// # Errors
    /// Connection errors.
    pub fn stats(&self) -> Result<RedisWindowStats> {
        let now = self.clock.now_millis();
        let gens = self.generations(now, false)?;
        let mut live = Vec::with_capacity(gens.len());
        let mut all = Vec::with_capacity(gens.len());
        for g in &gens {
            let s = g.ns.stats()?;
            live.push(GenerationReport {
                start_ms: g.start,
                age_secs: now.saturating_sub(g.start) as f64 / 1000.0,
                count: s.count,
                memory_bytes: s.replica_bytes,
                disk_bytes: s.count * 8,
                worst_leaf_fpr: s.worst_leaf_fpr,
            });
            all.push(s);
        }
        let report = RecrawlReport {
            window_secs: self.window as f64 / 1000.0,
            generations: self.options.generations,
            generation_fpr: self.gen_options.fpr,
            live,
        };
        Ok(RedisWindowStats { report, generations: all })
    }
}

/// `out[i]`: whether a generation of `gens` holds `fps[i]`.
fn union(gens: &[Arc<Gen>], fps: &[u64], out: &mut [bool]) -> Result<()> {
    out.fill(false);
    let mut hit = vec![false; fps.len()];
    for g in gens {
        urlseen_engine::SeenSet::contains_fingerprints(&*g.ns, fps, &mut hit)?;
        for (o, h) in out.iter_mut().zip(&hit) {
            *o |= *h;
        }
    }
    Ok(())
}

impl urlseen_engine::SeenSet for RedisWindow {
    type Error = Error;

    fn fingerprint(&self, url: &str) -> Result<u64> {
        Ok(self.fingerprinter.fingerprint(url).map_err(urlseen_engine::Error::from)?)
    }

    fn seen_fingerprints(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        self.seen(fps, out)
    }

    fn contains_fingerprints(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        self.contains(fps, out)
    }
}

fn clone_req(r: &Req) -> Req {
    Req { place: r.place.clone(), cmd: r.cmd.clone() }
}

fn window_key(name: &str) -> Vec<u8> {
    namespace_key(name, "recrawl")
}

fn registry_key(name: &str) -> Vec<u8> {
    namespace_key(name, "gens")
}

/// The name of the generation of namespace `name` for the slot at `start`.
fn generation_name(name: &str, start: u64) -> String {
    format!("{name}{GEN_INFIX}{start}")
}

/// The slot start of a generation's name.
fn generation_of(name: &str) -> Option<u64> {
    let (_, start) = name.rsplit_once(GEN_INFIX)?;
    if start.is_empty() || !start.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    start.parse().ok()
}

/// `W` in ms and `g` from a stored window.
fn parse_window(stored: &str) -> Option<(u64, u32)> {
    let mut window = None;
    let mut generations = None;
    let mut words = stored.split(' ');
    if words.next() != Some("v1") {
        return None;
    }
    for word in words {
        match word.split_once('=')? {
            ("window_ms", v) => window = v.parse().ok(),
            ("generations", v) => generations = v.parse().ok(),
            _ => {}
        }
    }
    Some((window?, generations?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_windows_round_trip() {
        assert_eq!(
            generation_of(&generation_name("news", 1_700_000_000_000)),
            Some(1_700_000_000_000)
        );
        assert_eq!(generation_of("news"), None);
        assert_eq!(generation_of("news.gen-"), None);
        assert_eq!(generation_of("news.gen-12x"), None);
        assert_eq!(parse_window("v1 window_ms=8000 generations=8"), Some((8_000, 8)));
        assert_eq!(parse_window("none"), None);
        assert_eq!(parse_window("v1 window_ms=8000"), None);
    }
}
