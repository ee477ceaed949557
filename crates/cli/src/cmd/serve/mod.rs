//! `urlseen serve`: the Redis-protocol server (and HTTP beside it) over the engine.
//!
//! ```text
//! urlseen serve                                   # RESP on 127.0.0.1:6380, HTTP on 127.0.0.1:8380
//! urlseen serve --config /etc/urlseen.toml --requirepass s3cret
//! redis-cli -p 6380 URL.SEEN jobs https://a.example/
//! curl -s localhost:8380/metrics
//! ```
//!
//! Settings come from the flags, then the `--config` TOML file, then the defaults. On SIGTERM or
//! SIGINT the server stops accepting, answers what it has received, closes every connection,
//! shuts the engine down, and exits 0 (a second signal exits at once with status 130).
//!
//! The TOML file (every key optional; an unknown key or a bad value is an error naming its
//! line) has a key for every flag, and a few settings only it holds (`shutdown_grace`,
//! `max_namespace_bytes`, `[rename_command]`, `[limits]`, `[defaults]`). `urlseen.toml` at the
//! root of the repository lists every key with its default and what it does; a test loads it.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{info, warn};
use urlseen_engine::{Db, Fsync};
use urlseen_server::http::{self, HttpState};
use urlseen_server::{App, AppConfig, Config, Limits};

mod config;

pub use config::{ConfigError, HttpAddr, LogLevel, Size};
use config::{FileConfig, default_maxmemory, parse_yes_no};

/// Serve the Redis protocol (RESP2/RESP3) and HTTP metrics over the engine.
#[derive(Debug, Default, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// RESP address, IP:PORT (default 127.0.0.1:6380; 6379 is Redis').
    #[arg(long, value_name = "ADDR")]
    resp: Option<SocketAddr>,
    /// Close RESP clients idle this many seconds (default 0: never).
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<u64>,
    /// Require clients to AUTH with this password (and HTTP API calls to send it as a bearer
    /// token).
    #[arg(long, value_name = "PASSWORD")]
    requirepass: Option<String>,
    /// Protected mode, as Redis' (default yes): while there is no --requirepass, only clients
    /// on loopback are served; others get `-DENIED` (HTTP: 403). `no` serves everyone: make
    /// sure the server is not reachable from the internet first.
    #[arg(long, value_name = "yes|no", value_parser = parse_yes_no)]
    protected_mode: Option<bool>,
    /// Most simultaneous RESP clients (default 10000).
    #[arg(long, value_name = "N")]
    maxclients: Option<usize>,
    /// Keep the namespaces in this data directory. Without it nothing is persisted, and the
    /// leaves' fingerprints (which splits need) spill to a temporary directory under
    /// --spill-dir (default $TMPDIR or /tmp) that is removed on exit: RAM holds the filters.
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// With --data: when a write is acknowledged, as Redis' appendfsync (default everysec).
    #[arg(long)]
    fsync: Option<Fsync>,
    /// Without --data: make the temporary spill directory here.
    #[arg(long, value_name = "DIR")]
    spill_dir: Option<PathBuf>,
    /// Most RAM all namespaces together may hold, as Redis' maxmemory (`256mb`, `4gb`, bytes;
    /// 0: no limit). Default: three quarters of the memory this process may use: the machine's
    /// RAM, or less if its cgroup (memory.max) or `ulimit -v` allows less (INFO memory shows
    /// which, as urlseen_maxmemory_source). A BF.RESERVE or URL.RESERVE
    /// (or a first URL.SEEN) whose filters would pass it gets `-ERR Insufficient memory to
    /// create filter`; once the namespaces hold more, writes get `-OOM` and reads go on.
    #[arg(long, value_name = "BYTES")]
    maxmemory: Option<Size>,
    /// Keep the URL namespaces in Redis or Redis Cluster (`redis://host:port/`, comma-separated
    /// for several servers or cluster seed nodes), shared with every other `urlseen serve
    /// --redis` and `urlseen filter --redis` on them. URL.RESERVE, URL.SEEN and URL.CHECK then
    /// go to Redis, and so do URL.INFO, URL.FORGET ns HOST h and the key lifetimes; BF.* and
    /// the other URL.FORGET forms are refused.
    #[arg(long, value_name = "URL[,URL…]", value_delimiter = ',', conflicts_with = "data")]
    redis: Option<Vec<String>>,
    /// With --redis: how long a command keeps retrying (with backoff, one line on stderr per
    /// retry) while Redis is unreachable or refusing for a while before it answers an error
    /// (default 30).
    #[arg(long, value_name = "SECONDS", value_parser = crate::args::parse_seconds)]
    redis_retry_for: Option<Duration>,
    /// HTTP address for /healthz, /metrics and the JSON API, IP:PORT or `off` (default
    /// 127.0.0.1:8380).
    #[arg(long, value_name = "ADDR")]
    http: Option<HttpAddr>,
    /// Log to stderr at this level: error, warn, info, debug, trace, or a tracing filter such
    /// as `info,urlseen_server=debug` (default info; RUST_LOG, if set, is used before the
    /// config file's `loglevel`).
    #[arg(long, value_name = "LEVEL")]
    loglevel: Option<LogLevel>,
    /// Keep in the slow log (SLOWLOG GET) the commands that run at least this many
    /// microseconds, as Redis' slowlog-log-slower-than (default 10000; 0: every command; -1:
    /// none).
    #[arg(long, value_name = "MICROSECONDS", allow_negative_numbers = true)]
    slowlog_log_slower_than: Option<i64>,
    /// How many entries the slow log keeps, as Redis' slowlog-max-len (default 128).
    #[arg(long, value_name = "N")]
    slowlog_max_len: Option<usize>,
    /// Recrawl window of the URL namespaces the server creates (URL.SEEN on a new key, or
    /// URL.RESERVE without RECRAWL): a URL recorded more than this long ago is new again
    /// (`30d`, `12h`, `3s`). Existing namespaces keep their own.
    #[arg(long, value_name = "DURATION")]
    recrawl_after: Option<crate::args::Window>,
    /// With --recrawl-after: generations of the window (default 8).
    #[arg(long, value_name = "G")]
    recrawl_generations: Option<u32>,
    /// The URL namespaces the server creates keep their URLs in a journal on disk, so that
    /// `URL.FORGET ns PREFIX p` works (URL.RESERVE … KEEPURLS asks it for one namespace).
    #[arg(long)]
    keep_urls: bool,
    /// A TOML file of settings; flags override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

const AFTER_HELP: &str = "\
Every flag (but --config) is also a key of the --config TOML file, with `_` for `-`:
  resp, timeout, requirepass, protected_mode, maxclients, data, fsync, spill_dir, maxmemory,
  redis (an array of URLs), redis_retry_for, http, loglevel, slowlog_log_slower_than,
  slowlog_max_len, recrawl_after (\"30d\"), recrawl_generations, keep_urls
and the file alone sets shutdown_grace, max_namespace_bytes, [rename_command], [limits] and
[defaults]. Flags override the file. An annotated example with every key and its default:
urlseen.toml at the root of the urlseen repository.";

/// Everything `serve` runs with, after flags, file and defaults are merged.
#[derive(Debug)]
struct Settings {
    server: Config,
    http: Option<SocketAddr>,
    data: Option<PathBuf>,
    /// Without a data directory: where the temporary spill directory is made.
    spill_dir: Option<PathBuf>,
    fsync: Fsync,
    fsync_given: bool,
    app: AppConfig,
    /// `--redis`: the servers that hold the URL namespaces.
    redis: Option<Vec<String>>,
    /// `--redis-retry-for`.
    redis_retry_for: Duration,
    /// The tracing filter.
    loglevel: String,
    /// The config file's `[rename_command]`: (command, new name or "" to disable).
    renames: Vec<(String, String)>,
}

/// `--redis-retry-for`'s default.
const DEFAULT_REDIS_RETRY_FOR: Duration = Duration::from_secs(30);

impl Settings {
    /// Flags, then the file, then the defaults; `RUST_LOG` is used for the log level before
    /// the file's.
    fn new(args: &Args) -> anyhow::Result<Settings> {
        Settings::with_env_log(args, std::env::var("RUST_LOG").ok())
    }

    fn with_env_log(args: &Args, rust_log: Option<String>) -> anyhow::Result<Settings> {
        let (file, path) = match &args.config {
            Some(path) => (FileConfig::load(path)?, path.clone()),
            None => (FileConfig::default(), PathBuf::new()),
        };
        let invalid =
            |key, reason: String| ConfigError::Invalid { path: path.clone(), key, reason };
        let defaults = Config::default();
        let limits = Limits {
            max_bulk_len: file.limits.max_bulk_len.unwrap_or(defaults.limits.max_bulk_len),
            max_args: file.limits.max_args.unwrap_or(defaults.limits.max_args),
            max_query_buffer: file
                .limits
                .max_query_buffer
                .unwrap_or(defaults.limits.max_query_buffer),
            max_total_query_buffer: file
                .limits
                .max_total_query_buffer
                .unwrap_or(defaults.limits.max_total_query_buffer),
        };
        let idle = args.timeout.or(file.timeout).unwrap_or(0);
        let server = Config {
            resp_addr: args.resp.or(file.resp).unwrap_or(defaults.resp_addr),
            requirepass: args.requirepass.clone().or(file.requirepass).filter(|p| !p.is_empty()),
            maxclients: args.maxclients.or(file.maxclients).unwrap_or(defaults.maxclients),
            idle_timeout: (idle > 0).then(|| Duration::from_secs(idle)),
            shutdown_grace: file
                .shutdown_grace
                .map_or(defaults.shutdown_grace, Duration::from_secs),
            limits,
            protected_mode: args.protected_mode.or(file.protected_mode).unwrap_or(true),
            slowlog_log_slower_than: args
                .slowlog_log_slower_than
                .or(file.slowlog_log_slower_than)
                .unwrap_or(defaults.slowlog_log_slower_than),
            slowlog_max_len: args
                .slowlog_max_len
                .or(file.slowlog_max_len)
                .unwrap_or(defaults.slowlog_max_len),
        };
        if server.maxclients == 0 {
            return Err(invalid("maxclients", "must be at least 1".into()).into());
        }
        let http = match args.http.or(file.http) {
            None => Some(urlseen_server::config::DEFAULT_HTTP_ADDR),
            Some(HttpAddr::Off) => None,
            Some(HttpAddr::At(addr)) => Some(addr),
        };
        let file_fsync = file.fsync;
        let mut app = AppConfig::default();
        let d = &file.defaults;
        if let Some(capacity) = d.capacity {
            app.url_defaults.capacity = capacity.get();
        }
        if let Some(error) = d.error {
            app.url_defaults.fpr = error;
        }
        if let Some(profile) = d.profile {
            app.url_defaults.canon.profile = profile;
        }
        app.url_defaults.canon.sort_query = d.sort_query.unwrap_or(false);
        app.url_defaults.canon.strip_tracking = d.strip_tracking.unwrap_or(false);
        app.url_defaults.canon.keep_fragments = d.keep_fragments.unwrap_or(false);
        app.url_defaults.recrawl_after = args.recrawl_after.or(file.recrawl_after).map(|w| w.0);
        if let Some(g) = args.recrawl_generations.or(file.recrawl_generations) {
            app.url_defaults.generations = g;
        }
        app.url_defaults.keep_urls = args.keep_urls || file.keep_urls.unwrap_or(false);
        app.url_defaults.validate().map_err(|e| invalid("defaults", e.to_string()))?;
        if let Some(bytes) = file.max_namespace_bytes {
            app.max_namespace_bytes = bytes;
        }
        (app.maxmemory, app.maxmemory_source) = match args.maxmemory.or(file.maxmemory) {
            Some(size) => (size.0, "configured"),
            None => default_maxmemory(),
        };
        let data = args.data.clone().or(file.data);
        let redis = args.redis.clone().or(file.redis);
        if redis.is_some() && data.is_some() {
            return Err(invalid(
                "data",
                "a data directory and redis exclude each other: with redis the namespaces \
                 are in Redis"
                    .into(),
            )
            .into());
        }
        let spill_dir = args.spill_dir.clone().or(file.spill_dir);
        if spill_dir.is_some() && data.is_some() {
            return Err(invalid(
                "spill_dir",
                "is for a server without a data directory (with data, fingerprints are kept \
                 there)"
                    .into(),
            )
            .into());
        }
        let loglevel = match (&args.loglevel, rust_log, &file.loglevel) {
            (Some(level), _, _) => level.0.clone(),
            (None, Some(env), _) if !env.is_empty() => env,
            (None, _, Some(level)) => level.0.clone(),
            (None, _, None) => "info".to_owned(),
        };
        Ok(Settings {
            server,
            http,
            data,
            spill_dir,
            redis,
            redis_retry_for: args
                .redis_retry_for
                .or(file.redis_retry_for)
                .unwrap_or(DEFAULT_REDIS_RETRY_FOR),
            fsync: args.fsync.or(file_fsync).unwrap_or_default(),
            fsync_given: args.fsync.is_some() || file_fsync.is_some(),
            app,
            loglevel,
            renames: file.rename_command.into_iter().collect(),
        })
    }
}

/// The one place the server's `Db` is opened: not persisted (fingerprints in a spill directory
/// removed on exit), or the data directory with the fsync policy (which holds the directory's
/// lock until the process exits).
fn open_db(data: Option<&Path>, spill: Option<&Path>, fsync: Fsync) -> anyhow::Result<Db> {
    match data {
        None => Db::temporary(spill).context("creating the spill directory"),
        Some(dir) => super::open_data_dir(dir, fsync, false),
    }
}

fn init_tracing(level: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr)
        .with_ansi(io::IsTerminal::is_terminal(&io::stderr()))
        .try_init();
}

/// Runs the server until SIGTERM or SIGINT.
pub fn run(args: Args) -> anyhow::Result<()> {
    let settings = Settings::new(&args)?;
    init_tracing(&settings.loglevel);
    if settings.fsync_given && settings.data.is_none() {
        warn!("--fsync has no effect without --data: the server persists nothing");
    }
    let db = open_db(settings.data.as_deref(), settings.spill_dir.as_deref(), settings.fsync)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("urlseen-serve")
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(settings, db))
}

async fn serve(settings: Settings, db: Db) -> anyhow::Result<()> {
    let Settings {
        server,
        http: http_addr,
        app: app_config,
        data,
        fsync,
        redis,
        redis_retry_for,
        renames,
        ..
    } = settings;
    let storage = match (&redis, &data) {
        (Some(urls), _) => format!("URL namespaces in Redis at {}", urls.join(",")),
        (None, Some(dir)) => format!("data directory {}, fsync {}", dir.display(), fsync.name()),
        (None, None) => match db.spill_dir() {
            Some(dir) => {
                format!("not persisted (fingerprints spill to {}, removed on exit)", dir.display())
            }
            None => "in memory".to_owned(),
        },
    };
    let mut app = App::new(db, app_config);
    if let Some(urls) = &redis {
        let redis = tokio::task::spawn_blocking({
            let urls = urls.clone();
            move || {
                urlseen_redis::RedisDb::open(urlseen_redis::RedisOptions {
                    retry_for: redis_retry_for,
                    log_retries: true,
                    ..urlseen_redis::RedisOptions::new(urls)
                })
            }
        })
        .await
        .context("connecting to Redis")?
        .with_context(|| format!("connecting to Redis at {}", urls.join(",")))?;
        app = app.with_redis(redis);
    }
    let app = Arc::new(app);
    let mut dispatch = urlseen_server::dispatch(app.clone());
    for (name, new_name) in &renames {
        dispatch.rename_command(name, new_name)?;
    }
    let dispatch = Arc::new(dispatch);
    let resp = TcpListener::bind(server.resp_addr)
        .await
        .with_context(|| format!("cannot listen for RESP on {}", server.resp_addr))?;
    let http_listener = match http_addr {
        Some(addr) => Some(
            TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen for HTTP on {addr}"))?,
        ),
        None => None,
    };
    for addr in [Some(server.resp_addr), http_addr].into_iter().flatten() {
        if !addr.ip().is_loopback() && server.requirepass.is_none() {
            if server.protected_mode {
                warn!(
                    %addr,
                    "no password (--requirepass): protected mode serves loopback clients only"
                );
            } else {
                warn!(%addr, "protected mode off and no password: anyone who reaches {addr} can write and FLUSHALL");
            }
        }
    }
    info!(
        version = env!("CARGO_PKG_VERSION"),
        maxclients = server.maxclients,
        auth = server.requirepass.is_some(),
        storage,
        maxmemory = app.maxmemory(),
        maxmemory_source = app.maxmemory_source(),
        "urlseen serve starting"
    );

    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(signals(stop_tx));
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let grace = server.shutdown_grace;
    let http_task = http_listener.map(|listener| {
        let state = HttpState::new(app.clone(), dispatch.metrics().clone())
            .requirepass(server.requirepass.clone())
            .protected_mode(server.protected_mode);
        tokio::spawn(http::serve(listener, http::router(state), stopped(stop_rx.clone())))
    });
    urlseen_server::run(resp, server, dispatch, stopped(stop_rx.clone())).await?;
    if let Some(task) = http_task {
        match tokio::time::timeout(grace, task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => warn!(error = %e, "HTTP server failed"),
            Ok(Err(e)) => warn!(error = %e, "HTTP server task failed"),
            Err(_) => warn!(?grace, "HTTP requests still running after the grace period"),
        }
    }
    // Every connection is closed: nothing can write any more.
    app.shutdown().context("flushing the data directory at shutdown")?;
    info!("bye");
    Ok(())
}

/// Waits for SIGTERM or SIGINT, then tells everyone to stop; a second one exits at once.
async fn signals(stop: watch::Sender<bool>) {
    let received = wait_for_signal().await;
    info!(signal = received, "shutting down: no new connections, finishing in-flight commands");
    let _ = stop.send(true);
    let again = wait_for_signal().await;
    warn!(signal = again, "second signal: exiting now");
    std::process::exit(130);
}

#[cfg(unix)]
async fn wait_for_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return "SIGINT";
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = tokio::signal::ctrl_c() => "SIGINT",
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() -> &'static str {
    let _ = tokio::signal::ctrl_c().await;
    "SIGINT"
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use urlseen_engine::Profile;

    use super::config::{FileDefaults, FileLimits, parse_bytes};
    use super::*;

    fn write(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn defaults() {
        let s = Settings::new(&Args::default()).unwrap();
        assert_eq!(s.server.resp_addr, "127.0.0.1:6380".parse().unwrap());
        assert_eq!(s.http, Some("127.0.0.1:8380".parse().unwrap()));
        assert_eq!(s.server.maxclients, 10_000);
        assert_eq!(s.server.idle_timeout, None);
        assert_eq!(s.fsync, Fsync::EverySec);
        assert!(s.data.is_none() && s.server.requirepass.is_none());
        assert!(s.server.protected_mode);
        // The library's default is no limit; the CLI's is three quarters of RAM.
        let (maxmemory, maxmemory_source) = default_maxmemory();
        assert_eq!(s.app, AppConfig { maxmemory, maxmemory_source, ..AppConfig::default() });
    }

    #[test]
    fn the_file_renames_and_disables_commands() {
        let f = write(
            "protected_mode = false\nmaxmemory = \"1gb\"\n[rename_command]\nFLUSHALL = \"\"\nDEL = \"del-x\"\n",
        );
        let s =
            Settings::new(&Args { config: Some(f.path().to_owned()), ..Args::default() }).unwrap();
        let mut renames = s.renames.clone();
        renames.sort();
        assert_eq!(renames, [("DEL".into(), "del-x".into()), ("FLUSHALL".into(), String::new())]);
        assert!(!s.server.protected_mode);
        assert_eq!(s.app.maxmemory, 1 << 30);
    }

    #[test]
    fn flags_override_the_file() {
        let f = write(
            "resp = \"127.0.0.1:7000\"\nhttp = \"off\"\nrequirepass = \"file\"\nmaxclients = 5\n\
             timeout = 30\nfsync = \"always\"\n[limits]\nmax_bulk_len = 1024\n\
             [defaults]\ncapacity = 5000\nerror = 0.001\nprofile = \"w3lib\"\nstrip_tracking = true\n",
        );
        let args = Args {
            config: Some(f.path().to_owned()),
            maxclients: Some(7),
            requirepass: Some("flag".into()),
            ..Args::default()
        };
        let s = Settings::new(&args).unwrap();
        assert_eq!(s.server.resp_addr, "127.0.0.1:7000".parse().unwrap());
        assert_eq!(s.http, None);
        assert_eq!(s.server.requirepass.as_deref(), Some("flag"));
        assert_eq!(s.server.maxclients, 7);
        assert_eq!(s.server.idle_timeout, Some(Duration::from_secs(30)));
        assert_eq!(s.server.limits.max_bulk_len, 1024);
        assert_eq!(s.fsync, Fsync::Always);
        assert_eq!(s.app.url_defaults.capacity, 5000);
        assert_eq!(s.app.url_defaults.fpr, 0.001);
        assert_eq!(s.app.url_defaults.canon.profile, Profile::W3lib);
        assert!(s.app.url_defaults.canon.strip_tracking);
    }

    #[test]
    fn bad_files_are_typed_errors() {
        let missing = Args { config: Some("/nonexistent/urlseen.toml".into()), ..Args::default() };
        let e = Settings::new(&missing).unwrap_err();
        assert!(matches!(e.downcast_ref::<ConfigError>(), Some(ConfigError::Read { .. })), "{e}");

        // Shape and value errors name the line and the key.
        for (text, line, key) in [
            ("resp = 6380", 1, "resp"),
            ("maxclients = 5\n\nnonsense = 1", 3, "nonsense"),
            ("[limits]\nmax_bulk_len = -1", 2, "max_bulk_len"),
            ("resp = \"x\"", 1, "resp"),
            ("\nfsync = \"sometimes\"", 2, "fsync"),
            ("[defaults]\nprofile = \"nope\"", 2, "profile"),
            ("[defaults]\ncapacity = 0", 2, "capacity"),
            ("maxmemory = \"12tb\"", 1, "maxmemory"),
            ("http = \"nowhere\"", 1, "http"),
            ("loglevel = \"info,[[\"", 1, "loglevel"),
            ("redis_retry_for = -1", 1, "redis_retry_for"),
            ("slowlog_max_len = -1", 1, "slowlog_max_len"),
        ] {
            let f = write(text);
            let args = Args { config: Some(f.path().to_owned()), ..Args::default() };
            let e = Settings::new(&args).unwrap_err();
            assert!(
                matches!(e.downcast_ref::<ConfigError>(), Some(ConfigError::Parse { .. })),
                "{text}: {e}"
            );
            let message = e.to_string();
            assert!(message.contains(&format!("line {line}")), "{text}: {message}");
            assert!(message.contains(key), "{text}: {message}");
        }
        // Keys that are each fine but not together, or out of range, name the key.
        for (text, key) in [
            ("[defaults]\nerror = 2.0", "defaults"),
            ("maxclients = 0", "maxclients"),
            ("data = \"d\"\nredis = [\"redis://h:1/\"]", "data"),
            ("data = \"d\"\nspill_dir = \"s\"", "spill_dir"),
        ] {
            let f = write(text);
            let args = Args { config: Some(f.path().to_owned()), ..Args::default() };
            let e = Settings::new(&args).unwrap_err();
            match e.downcast_ref::<ConfigError>() {
                Some(ConfigError::Invalid { key: k, .. }) => assert_eq!(*k, key, "{e}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    /// The names of the fields of the struct `T` deserializes as, read from serde.
    fn struct_fields<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
        use serde::de::{Error as _, Visitor};
        struct Probe<'a>(&'a mut &'static [&'static str]);
        impl<'de> serde::Deserializer<'de> for Probe<'_> {
            type Error = serde::de::value::Error;
            fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
                Err(Self::Error::custom("not a struct"))
            }
            fn deserialize_struct<V: Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Self::Error> {
                *self.0 = fields;
                Err(Self::Error::custom("probed"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
                byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
                identifier ignored_any
            }
        }
        let mut fields: &'static [&'static str] = &[];
        let _ = T::deserialize(Probe(&mut fields));
        fields
    }

    #[test]
    fn every_flag_has_a_config_key() {
        let keys = struct_fields::<FileConfig>();
        assert!(keys.contains(&"resp") && keys.contains(&"limits"), "{keys:?}");
        let command = <Args as clap::Args>::augment_args(clap::Command::new("serve"));
        let mut flags = 0;
        for arg in command.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if long == "config" || long == "help" {
                continue;
            }
            flags += 1;
            let key = long.replace('-', "_");
            assert!(keys.contains(&key.as_str()), "--{long} has no key `{key}` in the config file");
            assert!(AFTER_HELP.contains(&key), "serve --help does not name `{key}`");
        }
        assert!(flags >= 15, "{flags}");
    }

    fn example() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../urlseen.toml")
    }

    #[test]
    fn the_example_file_documents_every_key() {
        let text = std::fs::read_to_string(example()).unwrap();
        let sections = [
            ("", struct_fields::<FileConfig>()),
            ("[limits]", struct_fields::<FileLimits>()),
            ("[defaults]", struct_fields::<FileDefaults>()),
        ];
        for (section, keys) in sections {
            let body = text.split_once(&format!("{section}\n")).map_or("", |(_, b)| b);
            for key in keys {
                if ["limits", "defaults", "rename_command"].contains(key) {
                    assert!(text.contains(&format!("\n[{key}]\n")), "no [{key}]");
                    continue;
                }
                let documented = body
                    .lines()
                    .any(|l| l.trim_start_matches("# ").starts_with(&format!("{key} = ")));
                assert!(documented, "urlseen.toml does not show `{key}` under {section:?}");
            }
        }
    }

    #[test]
    fn the_example_file_gives_the_defaults() {
        let args = Args { config: Some(example()), ..Args::default() };
        let loaded = Settings::with_env_log(&args, None).unwrap();
        let defaults = Settings::with_env_log(&Args::default(), None).unwrap();
        assert_eq!(loaded.server, defaults.server);
        assert_eq!(loaded.http, defaults.http);
        assert_eq!(loaded.data, defaults.data);
        assert_eq!(loaded.spill_dir, defaults.spill_dir);
        assert_eq!(loaded.fsync, defaults.fsync);
        assert_eq!(loaded.app, defaults.app);
        assert_eq!(loaded.redis, defaults.redis);
        assert_eq!(loaded.redis_retry_for, defaults.redis_retry_for);
        assert_eq!(loaded.loglevel, defaults.loglevel);
        assert_eq!(loaded.renames, defaults.renames);
        // And the defaults are the ones it writes down.
        assert_eq!(defaults.server.slowlog_log_slower_than, 10_000);
        assert_eq!(defaults.server.slowlog_max_len, 128);
        assert_eq!(defaults.redis_retry_for, Duration::from_secs(30));
        assert_eq!(defaults.loglevel, "info");
    }

    #[test]
    fn every_flag_overrides_its_key() {
        let f = write(
            "slowlog_log_slower_than = 5\nslowlog_max_len = 3\nloglevel = \"warn\"\n\
             redis_retry_for = 0.5\nspill_dir = \"/file\"\nredis = [\"redis://file:1/\"]\n\
             http = \"127.0.0.1:9000\"\nmaxmemory = \"2mb\"\n",
        );
        let file_only = Args { config: Some(f.path().to_owned()), ..Args::default() };
        let s = Settings::with_env_log(&file_only, None).unwrap();
        assert_eq!((s.server.slowlog_log_slower_than, s.server.slowlog_max_len), (5, 3));
        assert_eq!(s.loglevel, "warn");
        assert_eq!(s.redis_retry_for, Duration::from_millis(500));
        assert_eq!(s.spill_dir.as_deref(), Some(Path::new("/file")));
        assert_eq!(s.redis, Some(vec!["redis://file:1/".to_owned()]));
        assert_eq!(s.http, Some("127.0.0.1:9000".parse().unwrap()));
        assert_eq!(s.app.maxmemory, 2 << 20);
        // RUST_LOG comes before the file, a flag before both.
        let s = Settings::with_env_log(&file_only, Some("debug".into())).unwrap();
        assert_eq!(s.loglevel, "debug");
        let args = Args {
            config: Some(f.path().to_owned()),
            slowlog_log_slower_than: Some(-1),
            slowlog_max_len: Some(9),
            loglevel: Some("error".parse().unwrap()),
            redis_retry_for: Some(Duration::from_secs(2)),
            spill_dir: Some("/flag".into()),
            redis: Some(vec!["redis://flag:1/".into()]),
            http: Some(HttpAddr::Off),
            maxmemory: Some(Size(1)),
            ..Args::default()
        };
        let s = Settings::with_env_log(&args, Some("debug".into())).unwrap();
        assert_eq!((s.server.slowlog_log_slower_than, s.server.slowlog_max_len), (-1, 9));
        assert_eq!(s.loglevel, "error");
        assert_eq!(s.redis_retry_for, Duration::from_secs(2));
        assert_eq!(s.spill_dir.as_deref(), Some(Path::new("/flag")));
        assert_eq!(s.redis, Some(vec!["redis://flag:1/".to_owned()]));
        assert_eq!(s.http, None);
        assert_eq!(s.app.maxmemory, 1);
    }

    #[test]
    fn flags_parse_from_the_command_line() {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: Args,
        }
        let cli = Cli::try_parse_from([
            "serve",
            "--slowlog-log-slower-than",
            "-1",
            "--fsync",
            "always",
            "--http",
            "off",
            "--maxmemory",
            "1gb",
        ])
        .unwrap();
        let s = Settings::with_env_log(&cli.args, None).unwrap();
        assert_eq!(s.server.slowlog_log_slower_than, -1);
        assert_eq!(s.fsync, Fsync::Always);
        assert_eq!(s.http, None);
        assert_eq!(s.app.maxmemory, 1 << 30);
        assert!(Cli::try_parse_from(["serve", "--loglevel", "info,[["]).is_err());
    }

    #[test]
    fn sizes_parse_as_redis_writes_them() {
        assert_eq!(parse_bytes("256mb"), Ok(256 << 20));
        assert_eq!(parse_bytes("1GB"), Ok(1 << 30));
        assert_eq!(parse_bytes("2k"), Ok(2_000));
        assert_eq!(parse_bytes("12345"), Ok(12_345));
        assert_eq!(parse_bytes("0"), Ok(0));
        assert!(parse_bytes("12tb").unwrap_err().contains("unknown unit"));
        assert!(parse_bytes("mb").is_err() && parse_bytes("-1mb").is_err());
        assert!(parse_bytes("99999999999gb").unwrap_err().contains("too large"));
        let args = Args { maxmemory: Some(Size(256 << 20)), ..Args::default() };
        assert_eq!(Settings::new(&args).unwrap().app.maxmemory, 256 << 20);
        let default = Settings::new(&Args::default()).unwrap().app.maxmemory;
        assert!(default > 0 && Some(default) < super::super::total_ram(), "{default}");
    }

    #[test]
    fn data_opens_the_directory_and_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = open_db(Some(dir.path()), None, Fsync::Always).unwrap();
        assert_eq!(db.path(), Some(dir.path()));
        assert_eq!(db.fsync(), Fsync::Always);
        // A second server on the same directory is refused, saying why.
        let e = open_db(Some(dir.path()), None, Fsync::Always).unwrap_err();
        assert!(format!("{e:#}").contains("in use by another process"), "{e:#}");
        assert!(open_db(None, None, Fsync::EverySec).unwrap().path().is_none());
    }

    #[test]
    fn without_data_fingerprints_spill_to_a_directory_removed_on_exit() {
        let parent = tempfile::tempdir().unwrap();
        let db = open_db(None, Some(parent.path()), Fsync::EverySec).unwrap();
        let spill = db.spill_dir().unwrap().to_owned();
        assert!(spill.starts_with(parent.path()) && spill.is_dir());
        drop(db);
        assert!(!spill.exists(), "the spill directory outlived the server");
    }
}
