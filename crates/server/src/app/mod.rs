//! [`App`]: the engine behind the commands, and the rules that make a namespace a Redis key.
//!
//! Every namespace of the engine's [`Db`] is a key. What a key *is* follows from the options
//! stored with its namespace, so that nothing beside the engine's own state needs to be saved:
//!
//! | [`KeyKind`] | how it is made | items | `TYPE` |
//! |---|---|---|---|
//! | [`KeyKind::Bloom`] | `BF.RESERVE`, `BF.ADD`, `BF.INSERT`, or `URL.RESERVE … PROFILE none` | raw bytes (profile `none`) | `MBbloom--` (RedisBloom's type name) |
//! | [`KeyKind::Url`] | `URL.RESERVE`, or `URL.SEEN` on a new key | URLs, canonicalized with the namespace's profile | `urlseen` |
//!
//! `URL.*` commands work on both kinds (a `Bloom` key simply does not canonicalize); `BF.*`
//! commands on a `Url` key answer `WRONGTYPE`, because the same bytes would be hashed
//! differently, except `BF.SCANDUMP` and `BF.LOADCHUNK`, whose dump carries the profile.
//!
//! A `NONSCALING` filter is a namespace whose split mode is [`SplitMode::Never`]; it refuses new
//! items once it holds its capacity, like RedisBloom's. `EXPANSION` is the split fanout.
//!
//! # Durability
//!
//! The engine calls are synchronous and, in memory, take microseconds, so every command runs
//! them on its connection's task. The seams for a durable `Db`:
//!
//! - the `Db` is built by the caller (`urlseen serve` opens it) and handed to [`App::new`];
//! - write paths all go through [`App::insert`] (and [`App::forget`]): when an engine write
//!   waits for a group commit, register the write commands with
//!   [`Command::new_async`](crate::Command::new_async) and await the commit there (every App
//!   method takes owned or `'static` data, so the call can also move into `spawn_blocking`);
//! - [`App::shutdown`] is called once every connection is drained: flush and sync go there;
//! - `/metrics` takes extra sources ([`crate::http::MetricsSource`]) for fsync latency.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use parking_lot::Mutex;
use smallvec::SmallVec;
use urlseen_canon::Canonicalizer;
use urlseen_engine::{
    CanonOptions, Db, Namespace, NamespaceOptions, Profile, Reservation, SplitMode, SplitPolicy,
};

use urlseen_redis::RedisDb;

use crate::client::OnReply;
use crate::error::{
    BF_FULL, CommandError, INSUFFICIENT_MEMORY, NAMESPACE_NOT_UTF8, OOM, URL_NOT_UTF8, WRONGTYPE,
    write_error,
};
use crate::remote::{NOT_WITH_REDIS, Remote};

mod admin;
mod keys;
mod lifetime;
mod memory;
mod write;

pub use keys::{AppConfig, BloomParams, KeyKind, URL_START_CAPACITY};
pub use lifetime::ExpireIf;
pub use memory::rss_bytes;
use write::blocking_call;

/// The engine state every command works on: the [`Db`] and the server's namespace defaults.
/// Shared as `Arc<App>` by the RESP commands and the HTTP API.
#[derive(Debug)]
pub struct App {
    db: Db,
    config: AppConfig,
    default_canon: Canonicalizer,
    /// Serializes inserts into non-scaling filters, so that the capacity check and the insert
    /// are one step and a full filter never takes one item too many.
    nonscaling: Mutex<()>,
    /// Bumped after every drop of a namespace: invalidates every [`NamespaceCache`].
    generation: AtomicU64,
    /// Where the `URL.*` namespaces live: `db`, or Redis under `--redis`.
    keyspace: Keyspace,
}

/// Where an [`App`]'s `URL.*` namespaces live. `BF.*` keys are always in the `Db`; under
/// [`Keyspace::Redis`] the commands that need a namespace in this process answer
/// [`NOT_WITH_REDIS`].
#[derive(Debug)]
pub enum Keyspace {
    /// In this process's [`Db`] (in memory or in a data directory).
    Local,
    /// In Redis or Redis Cluster, shared with every other process on the same servers.
    Redis(Remote),
}

/// The namespace a connection used last (keyed by its name), so that a pipeline of commands on
/// one namespace skips the `Db`'s lookup (a lock, a map search, a reference count). Kept in the
/// connection's [`ConnState::extension`](crate::ConnState::extension); valid while no namespace
/// was dropped since.
#[derive(Debug, Default)]
pub struct NamespaceCache {
    /// The key, the generation it was found in, the namespace, and when it expires (ms).
    entry: Option<(Bytes, u64, Arc<Namespace>, Option<u64>)>,
}

impl App {
    /// An app serving `db`.
    pub fn new(db: Db, config: AppConfig) -> App {
        let default_canon = Canonicalizer::new(config.url_defaults.canon.clone());
        App {
            db,
            config,
            default_canon,
            nonscaling: Mutex::new(()),
            generation: AtomicU64::new(0),
            keyspace: Keyspace::Local,
            // Measured at the first write 100 ms after start (nothing is held before).
        }
    }

    /// The same app, with its URL namespaces in Redis (see [`crate::remote`]).
    #[must_use]
    /// Recrawl windows in Redis read the `Db`'s clock ([`urlseen_engine::DbOptions::clock`]).
    pub fn with_redis(mut self, redis: RedisDb) -> App {
        self.keyspace = Keyspace::Redis(Remote::new(redis, self.db.clock()));
        self
    }

    /// Where the `URL.*` namespaces live.
    pub fn keyspace(&self) -> &Keyspace {
        &self.keyspace
    }

    /// The Redis side, under `--redis`.
    pub fn remote(&self) -> Option<&Remote> {
        match &self.keyspace {
            Keyspace::Local => None,
            Keyspace::Redis(remote) => Some(remote),
        }
    }

    /// `URL.SEEN` and `URL.CHECK` and their HTTP routes: the one path from a namespace's name
    /// and URLs to their answers, wherever the namespaces live, so that no two protocols can
    /// answer a URL differently. A write (any `lookup` but [`Lookup::Check`]) creates a
    /// namespace that does not exist with the server's defaults; a check of one answers each
    /// valid URL new. `cache` is the connection's (a fresh one for a lone request).
    ///
    /// # Errors
    /// As [`Self::seen_urls`]; the Redis backend's failures under `--redis`.
    pub fn answer_urls<U: AsRef<[u8]>>(
        &self,
        key: &Bytes,
        urls: &[U],
        lookup: Lookup<'_>,
        cache: &mut NamespaceCache,
    ) -> Result<Vec<Result<bool, CommandError>>, CommandError> {
        let write = !matches!(lookup, Lookup::Check);
        if let Keyspace::Redis(remote) = &self.keyspace {
            // Redis is network I/O: off the runtime's hot path (see `blocking`).
            return blocking_call(|| remote.seen_urls(key, &self.config.url_defaults, urls, write));
        }
        let ns = match write {
            true => self.cached(cache, key, || self.url_namespace(key).map(Some))?,
            false => self.cached(cache, key, || self.try_namespace(key))?,
        };
        match ns {
            Some(ns) => {
                let ns = Arc::clone(ns);
                self.seen_urls(&ns, urls, lookup)
            }
            None if write => Err(CommandError::custom(crate::error::NO_SUCH_NAMESPACE)),
            None => Ok(self.check_urls_absent(urls)),
        }
    }

    /// `URL.FORGET ns HOST h` under `--redis`: `None` without it. Runs off the runtime's hot
    /// path (it rebuilds leaves in Redis: many round trips).
    pub fn remote_forget_host(&self, key: &[u8], host: &[u8]) -> Option<Result<u64, CommandError>> {
        let remote = self.remote()?;
        Some(blocking_call(|| remote.forget_host(key, &self.config.url_defaults, host)))
    }

    /// `URL.RESERVE` under `--redis`: creates the namespace in Redis, or checks that the one
    /// there has these options.
    ///
    /// # Errors
    /// [`NOT_WITH_REDIS`] without `--redis`; as [`Remote::namespace`].
    pub fn remote_reserve(
        &self,
        key: &[u8],
        options: &NamespaceOptions,
    ) -> Result<(), CommandError> {
        let remote = self.remote().ok_or(CommandError::custom(NOT_WITH_REDIS))?;
        blocking_call(|| remote.reserve(key, options)).map(|_| ())
    }

    /// `URL.INFO` under `--redis`: `None` without it; `Some(Ok(None))` if Redis does not hold
    /// namespace `key`.
    pub fn remote_info(
        &self,
        key: &[u8],
    ) -> Option<Result<Option<crate::remote::RemoteInfo>, CommandError>> {
        let remote = self.remote()?;
        Some(blocking_call(|| remote.info(key, &self.config.url_defaults)))
    }

    /// Fails with [`NOT_WITH_REDIS`] under `--redis` (for commands that need a namespace in
    /// this process).
    ///
    /// # Errors
    /// As said.
    pub fn local_only(&self) -> Result<(), CommandError> {
        match self.keyspace {
            Keyspace::Redis(_) => Err(CommandError::custom(NOT_WITH_REDIS)),
            Keyspace::Local => Ok(()),
        }
    }

    /// An app over an in-memory `Db` with default settings (for tests and examples).
    pub fn in_memory() -> App {
        App::new(Db::in_memory(), AppConfig::default())
    }

    /// The `Db`.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The configuration.
    pub fn config(&self) -> &AppConfig {
        &self.config
    }

    /// The namespace a key names, if it exists (a key that is not UTF-8 names none; one that
    /// cannot be loaded reads as none here: [`Self::try_namespace`] says why).
    pub fn namespace(&self, key: &[u8]) -> Option<Arc<Namespace>> {
        std::str::from_utf8(key).ok().and_then(|name| self.db.namespace(name))
    }

    /// [`Self::namespace`], with the error of a namespace that could not be loaded from the
    /// data directory (damaged, or too many open: see `Db::try_namespace`).
    ///
    /// # Errors
    /// As said.
    pub fn try_namespace(&self, key: &[u8]) -> Result<Option<Arc<Namespace>>, CommandError> {
        let Ok(name) = std::str::from_utf8(key) else { return Ok(None) };
        self.db.try_namespace(name).map_err(CommandError::from)
    }

    /// The namespace `key` through a connection's cache: on a miss, `lookup` finds (or
    /// creates) it and the cache keeps it.
    ///
    /// # Errors
    /// Whatever `lookup` returns.
    pub fn cached<'c>(
        &self,
        cache: &'c mut NamespaceCache,
        key: &Bytes,
        lookup: impl FnOnce() -> Result<Option<Arc<Namespace>>, CommandError>,
    ) -> Result<Option<&'c Arc<Namespace>>, CommandError> {
        // Both counters only grow: their sum changes when either does (a drop, an expiry set,
        // removed, or reached).
        let generation =
            self.generation.load(Ordering::Acquire).wrapping_add(self.db.expiry_epoch());
        let hit = matches!(&cache.entry, Some((k, g, _, at)) if *g == generation && k == key
            && at.is_none_or(|at| self.db.clock().now_millis() < at));
        if !hit {
            cache.entry = lookup()?.map(|ns| {
                let at = self.db.expiry(ns.name()).and_then(urlseen_engine::Expiry::at);
                (key.clone(), generation, ns, at)
            });
        }
        Ok(cache.entry.as_ref().map(|(_, _, ns, _)| ns))
    }

    /// Marks every [`NamespaceCache`] stale; called after a namespace is dropped (never before:
    /// a connection that reads the new generation must not find the dropped namespace).
    fn invalidate_caches(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Creates the namespace `key` with `options`.
    ///
    /// # Errors
    /// `ERR item exists`, an invalid name or option, or a namespace too big to create.
    pub fn create(
        &self,
        key: &[u8],
        options: NamespaceOptions,
    ) -> Result<Arc<Namespace>, CommandError> {
        self.local_only()?;
        let name =
            std::str::from_utf8(key).map_err(|_| CommandError::custom(NAMESPACE_NOT_UTF8))?;
        self.check_size(&options)?;
        self.db.create_namespace(name, options).map_err(CommandError::from)
    }

    /// The namespace `key`, created with `options` if it does not exist.
    ///
    /// # Errors
    /// As [`App::create`].
    pub fn namespace_or_create(
        &self,
        key: &[u8],
        options: impl FnOnce() -> NamespaceOptions,
    ) -> Result<Arc<Namespace>, CommandError> {
        if let Some(ns) = self.try_namespace(key)? {
            return Ok(ns);
        }
        match self.create(key, options()) {
            // Another client created it in between: use theirs.
            Err(e) if e == CommandError::custom(crate::error::BF_ITEM_EXISTS) => {
                self.try_namespace(key)?.ok_or(e)
            }
            other => other,
        }
    }

    /// The RedisBloom filter `key`: `None` if it does not exist and `create` is `None`.
    ///
    /// # Errors
    /// `WRONGTYPE` if `key` is a URL namespace; as [`App::create`].
    pub fn bloom(
        &self,
        key: &[u8],
        create: Option<&BloomParams>,
    ) -> Result<Option<Arc<Namespace>>, CommandError> {
        self.local_only()?;
        let ns = match (self.try_namespace(key)?, create) {
            (Some(ns), _) => ns,
            (None, None) => return Ok(None),
            (None, Some(params)) => self.namespace_or_create(key, || params.options())?,
        };
        if KeyKind::of(&ns) == KeyKind::Bloom {
            Ok(Some(ns))
        } else {
            Err(CommandError::custom(WRONGTYPE))
        }
    }

    /// The URL namespace `key`, created with [`AppConfig::url_defaults`] if it does not exist.
    ///
    /// # Errors
    /// As [`App::create`].
    pub fn url_namespace(&self, key: &[u8]) -> Result<Arc<Namespace>, CommandError> {
        self.namespace_or_create(key, || self.config.url_defaults.clone())
    }

    /// `URL.SEEN` (a `record` lookup) or `URL.CHECK`: one answer per URL, `Ok(seen)`, or
    /// `Err(reason)` for a URL that cannot be canonicalized, which was neither looked up nor
    /// recorded (the others go on). The valid URLs go to the engine in one batch call.
    ///
    /// # Errors
    /// As [`App::insert`]: then nothing of the batch was recorded (or, for `MISCONF`, kept).
    pub fn seen_urls<U: AsRef<[u8]>>(
        &self,
        ns: &Arc<Namespace>,
        urls: &[U],
        mut lookup: Lookup<'_>,
    ) -> Result<Vec<Result<bool, CommandError>>, CommandError> {
        // A lookup records nothing: no host to list, no URL to journal.
        let check = matches!(lookup, Lookup::Check);
        let fingerprint = |url: &[u8]| {
            std::str::from_utf8(url).map_err(|_| CommandError::custom(URL_NOT_UTF8)).and_then(
                |url| {
                    match check {
                        true => ns.fingerprint(url).map(|fp| (fp, 0)),
                        false => ns.fingerprint_host(url),
                    }
                    .map_err(CommandError::from)
                },
            )
        };
        if let [url] = urls {
            // One URL (the common pipelined `URL.SEEN ns url`): no batch bookkeeping.
            let (fp, host) = match fingerprint(url.as_ref()) {
                Ok(fp) => fp,
                Err(e) => return Ok(vec![Err(e)]),
            };
            let mut seen = [false];
            self.look_up(ns, &[fp], &[host], &mut seen, &mut lookup)?;
            return Ok(vec![Ok(seen[0])]);
        }
        let mut answers: Vec<Result<bool, CommandError>> = Vec::with_capacity(urls.len());
        // A command's few fingerprints on the stack: no malloc and free per command among
        // the namespaces' blocks (glibc's bins get slower to search as that heap fills).
        let mut fps: SmallVec<[u64; 32]> = SmallVec::with_capacity(urls.len());
        let mut hosts: SmallVec<[u32; 32]> = SmallVec::with_capacity(urls.len());
        for url in urls {
            match fingerprint(url.as_ref()) {
                Ok((fp, host)) => {
                    fps.push(fp);
                    hosts.push(host);
                    answers.push(Ok(false));
                }
                Err(e) => answers.push(Err(e)),
            }
        }
        let mut seen: SmallVec<[bool; 32]> = smallvec::smallvec![false; fps.len()];
        if !fps.is_empty() {
            self.look_up(ns, &fps, &hosts, &mut seen, &mut lookup)?;
        }
        let mut seen = seen.into_iter();
        for answer in answers.iter_mut().flatten() {
            *answer = seen.next().unwrap_or(false);
        }
        Ok(answers)
    }

    fn look_up(
        &self,
        ns: &Arc<Namespace>,
        fps: &[u64],
        hosts: &[u32],
        seen: &mut [bool],
        lookup: &mut Lookup<'_>,
    ) -> Result<(), CommandError> {
        match lookup {
            Lookup::Check => ns.contains_fingerprints(fps, seen).map_err(CommandError::from),
            Lookup::Record => self.insert_hosts(ns, fps, hosts, seen),
            Lookup::RecordOnReply(on_reply) => {
                self.insert_hosts_on_reply(ns, fps, hosts, seen, on_reply)
            }
        }
    }

    /// `URL.CHECK` on a namespace that does not exist: nothing is seen, but URLs are still
    /// validated, with the default profile.
    pub fn check_urls_absent<U: AsRef<[u8]>>(&self, urls: &[U]) -> Vec<Result<bool, CommandError>> {
        urls.iter()
            .map(|url| {
                let url = std::str::from_utf8(url.as_ref())
                    .map_err(|_| CommandError::custom(URL_NOT_UTF8))?;
                self.default_canon.canonicalize(url)?;
                Ok(false)
            })
            .collect()
    }
}

/// What [`App::seen_urls`] does with the URLs.
#[derive(Debug)]
pub enum Lookup<'a> {
    /// Looks them up (`URL.CHECK`): records nothing.
    Check,
    /// Check-and-insert, recorded before the call returns ([`App::insert`]).
    Record,
    /// Check-and-insert, recorded once the reply is delivered ([`App::insert_on_reply`]).
    RecordOnReply(&'a mut Vec<Box<dyn OnReply>>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bloom_params_map_to_namespace_options() {
        let o = BloomParams { error_rate: 0.001, capacity: 500, expansion: Some(4) }.options();
        assert_eq!((o.capacity, o.fpr, o.canon.profile), (500, 0.001, Profile::None));
        assert_eq!((o.split.fanout, o.split.mode), (4, SplitMode::Background));
        let o = BloomParams { expansion: Some(1), ..BloomParams::default() }.options();
        assert_eq!(o.split.fanout, 2, "a DSBF splits into at least two children");
        let o = BloomParams { expansion: Some(1 << 20), ..BloomParams::default() }.options();
        assert_eq!(o.split.fanout, BloomParams::MAX_FANOUT);
        let o = BloomParams { expansion: None, ..BloomParams::default() }.options();
        assert_eq!(o.split.mode, SplitMode::Never);
    }

    #[test]
    fn a_nonscaling_filter_takes_a_batch_whole_or_not_at_all() {
        let app = App::in_memory();
        let params = BloomParams { error_rate: 0.01, capacity: 3, expansion: None };
        let ns = app.bloom(b"f", Some(&params)).unwrap().unwrap();
        let fps: Vec<u64> = (0..5).map(|i| ns.fingerprint_bytes(&[i])).collect();
        let mut out = [false; 5];
        assert_eq!(app.insert(&ns, &fps, &mut out), Err(CommandError::custom(BF_FULL)));
        assert_eq!(ns.len(), 0, "a refused batch records nothing");
        // Repeats within a batch need room once.
        let mut out = [true; 4];
        app.insert(&ns, &[fps[0], fps[1], fps[0], fps[2]], &mut out).unwrap();
        assert_eq!(out, [false, false, true, false]);
        assert_eq!(ns.len(), 3);
        // Full: known items still answer, a new one refuses its whole batch.
        let mut out = [false; 2];
        app.insert(&ns, &[fps[2], fps[1]], &mut out).unwrap();
        assert_eq!(out, [true, true]);
        let mut out = [false; 2];
        assert_eq!(
            app.insert(&ns, &[fps[0], fps[3]], &mut out),
            Err(CommandError::custom(BF_FULL))
        );
        assert_eq!(ns.len(), 3);
    }

    #[test]
    fn kinds_and_wrongtype() {
        let app = App::in_memory();
        app.url_namespace(b"jobs").unwrap();
        assert_eq!(app.bloom(b"jobs", None).unwrap_err(), CommandError::custom(WRONGTYPE));
        assert!(app.bloom(b"nope", None).unwrap().is_none());
        let bf = app.bloom(b"bf", Some(&BloomParams::default())).unwrap().unwrap();
        assert_eq!(KeyKind::of(&bf), KeyKind::Bloom);
        assert_eq!(KeyKind::from_type_name(b"mbbloom--"), Some(KeyKind::Bloom));
        assert_eq!(KeyKind::from_type_name(b"URLSEEN"), Some(KeyKind::Url));
        assert_eq!(
            app.create(&[0xff], NamespaceOptions::default()).unwrap_err(),
            CommandError::custom(NAMESPACE_NOT_UTF8)
        );
    }

    #[test]
    fn the_namespace_cache_forgets_dropped_namespaces() {
        let app = App::in_memory();
        let key = Bytes::from_static(b"jobs");
        let mut cache = NamespaceCache::default();
        let first = app
            .cached(&mut cache, &key, || app.url_namespace(&key).map(Some))
            .unwrap()
            .unwrap()
            .clone();
        let again = app.cached(&mut cache, &key, || panic!("a hit")).unwrap().unwrap();
        assert!(Arc::ptr_eq(&first, again));
        assert!(app.drop_key(&key).unwrap());
        let fresh =
            app.cached(&mut cache, &key, || app.url_namespace(&key).map(Some)).unwrap().unwrap();
        assert!(!Arc::ptr_eq(&first, fresh));
        app.flush().unwrap();
        assert!(app.cached(&mut cache, &key, || Ok(app.namespace(&key))).unwrap().is_none());
    }

    #[test]
    fn absurd_sizes_are_refused() {
        let app = App::in_memory();
        let params = BloomParams { capacity: 1 << 50, ..BloomParams::default() };
        assert_eq!(
            app.bloom(b"huge", Some(&params)).unwrap_err(),
            CommandError::custom(INSUFFICIENT_MEMORY)
        );
        assert!(app.db().namespace("huge").is_none());
    }
}
