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
//! The TOML file (every key optional; an unknown key is an error):
//!
//! ```toml
//! resp = "127.0.0.1:6380"
//! http = "127.0.0.1:8380"      # or "off"
//! data = "/var/lib/urlseen"    # a data directory (persistence)
//! fsync = "everysec"           # always | everysec | no
//! requirepass = "s3cret"
//! protected_mode = true        # without requirepass, serve loopback clients only
//! maxclients = 10000
//! timeout = 0                  # close clients idle this many seconds (0: never)
//! shutdown_grace = 10          # seconds to finish in-flight commands on shutdown
//! max_namespace_bytes = 4294967296
//! maxmemory = "16gb"           # all namespaces; default 3/4 of RAM ("0": no limit)
//!
//! [rename_command]             # as Redis' rename-command
//! FLUSHALL = ""                # "" disables the command
//! DEL = "del-4f9c2a"
//!
//! [limits]
//! max_bulk_len = 33554432
//! max_args = 1048576
//! max_query_buffer = 67108864
//! max_total_query_buffer = 536870912  # all clients together
//!
//! [defaults]                   # namespaces URL.SEEN creates, and URL.RESERVE's defaults
//! capacity = 1000000
//! error = 0.01
//! profile = "crawler"
//! sort_query = false
//! strip_tracking = false
//! keep_fragments = false
//! ```

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{info, warn};
use urlseen_engine::{Db, Fsync, Profile};
use urlseen_server::http::{self, HttpState};
use urlseen_server::{App, AppConfig, Config, Limits};

/// Serve the Redis protocol (RESP2/RESP3) and HTTP metrics over the engine.
#[derive(Debug, Default, clap::Args)]
pub struct Args {
    /// RESP address, IP:PORT (default 127.0.0.1:6380; 6379 is Redis').
    #[arg(long, value_name = "ADDR")]
    resp: Option<SocketAddr>,
    /// HTTP address for /healthz, /metrics and the JSON API, IP:PORT or `off` (default
    /// 127.0.0.1:8380).
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    /// Keep the namespaces in this data directory. Without it nothing is persisted, and the
    /// leaves' fingerprints (which splits need) spill to a temporary directory under
    /// --spill-dir (default $TMPDIR or /tmp) that is removed on exit: RAM holds the filters.
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Without --data: make the temporary spill directory here.
    #[arg(long, value_name = "DIR", conflicts_with = "data")]
    spill_dir: Option<PathBuf>,
    /// With --data: when a write is acknowledged, as Redis' appendfsync (default everysec).
    #[arg(long, value_parser = parse_fsync)]
    fsync: Option<Fsync>,
    /// Require clients to AUTH with this password (and HTTP API calls to send it as a bearer
    /// token).
    #[arg(long, value_name = "PASSWORD")]
    requirepass: Option<String>,
    /// Protected mode, as Redis' (default yes): while there is no --requirepass, only clients
    /// on loopback are served; others get `-DENIED` (HTTP: 403). `no` serves everyone: make
    /// sure the server is not reachable from the internet first.
    #[arg(long, value_name = "yes|no", value_parser = parse_yes_no)]
    protected_mode: Option<bool>,
    /// Most RAM all namespaces together may hold, as Redis' maxmemory (`256mb`, `4gb`, bytes;
    /// 0: no limit). Default: three quarters of this machine's RAM. A BF.RESERVE or URL.RESERVE
    /// (or a first URL.SEEN) whose filters would pass it gets `-ERR Insufficient memory to
    /// create filter`; once the namespaces hold more, writes get `-OOM` and reads go on.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    maxmemory: Option<u64>,
    /// Most simultaneous RESP clients (default 10000).
    #[arg(long, value_name = "N")]
    maxclients: Option<usize>,
    /// Close RESP clients idle this many seconds (default 0: never).
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<u64>,
    /// A TOML file of settings; flags override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Keep the URL namespaces in Redis or Redis Cluster (`redis://host:port/`, comma-separated
    /// for several servers or cluster seed nodes), shared with every other `urlseen serve
    /// --redis` and `urlseen filter --redis` on them. URL.RESERVE, URL.SEEN and URL.CHECK then
    /// go to Redis; BF.*, URL.FORGET and URL.INFO are refused.
    #[arg(long, value_name = "URL[,URL…]", value_delimiter = ',', conflicts_with = "data")]
    redis: Option<Vec<String>>,
    /// With --redis: how long a command keeps retrying (with backoff, one line on stderr per
    /// retry) while Redis is unreachable or refusing for a while before it answers an error.
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = crate::args::parse_seconds, requires = "redis")]
    redis_retry_for: std::time::Duration,
}

/// A size as Redis writes it: bytes, or a number with `k`/`m`/`g` (powers of 1000) or
/// `kb`/`mb`/`gb` (powers of 1024), case-insensitive.
fn parse_bytes(s: &str) -> Result<u64, String> {
    let lower = s.trim().to_ascii_lowercase();
    let digits = lower.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit: u64 = match &lower[digits.len()..] {
        "" | "b" => 1,
        "k" => 1_000,
        "kb" => 1 << 10,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        other => {
            return Err(format!("unknown unit {other:?} in {s:?} (use k, kb, m, mb, g or gb)"));
        }
    };
    let n: u64 = digits.parse().map_err(|_| format!("expected a size such as 256mb, got {s:?}"))?;
    n.checked_mul(unit).ok_or_else(|| format!("{s:?} is too large"))
}

/// Three quarters of this machine's RAM, or no limit where that is unknown.
fn default_maxmemory() -> u64 {
    super::total_ram().map_or(0, |bytes| bytes / 4 * 3)
}

fn parse_yes_no(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(format!("expected yes or no, got {s:?}")),
    }
}

fn parse_fsync(s: &str) -> Result<Fsync, String> {
    s.parse().map_err(|e: urlseen_engine::Error| e.to_string())
}

/// A `--config` file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The file is not TOML of the expected shape (the message names the line and the key).
    #[error("invalid config file {}: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Where and what.
        source: Box<toml::de::Error>,
    },
    /// A value is out of range.
    #[error("invalid config file {}: `{key}` {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The key.
        key: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// The `--config` file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    resp: Option<SocketAddr>,
    http: Option<String>,
    data: Option<PathBuf>,
    fsync: Option<String>,
    requirepass: Option<String>,
    protected_mode: Option<bool>,
    maxmemory: Option<String>,
    maxclients: Option<usize>,
    timeout: Option<u64>,
    shutdown_grace: Option<u64>,
    max_namespace_bytes: Option<u64>,
    /// Redis' `rename-command`: `FLUSHALL = ""` disables it, `DEL = "del-9f3a"` renames it.
    #[serde(default)]
    rename_command: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    limits: FileLimits,
    #[serde(default)]
    defaults: FileDefaults,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLimits {
    max_bulk_len: Option<usize>,
    max_args: Option<usize>,
    max_query_buffer: Option<usize>,
    max_total_query_buffer: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDefaults {
    capacity: Option<u64>,
    error: Option<f64>,
    profile: Option<String>,
    sort_query: Option<bool>,
    strip_tracking: Option<bool>,
    keep_fragments: Option<bool>,
}

impl FileConfig {
    fn load(path: &Path) -> Result<FileConfig, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source: Box::new(source),
        })
    }
}

/// Everything `serve` runs with, after flags, file and defaults are merged.
#[derive(Debug)]
struct Settings {
    server: Config,
    http: Option<SocketAddr>,
    data: Option<PathBuf>,
    fsync: Fsync,
    fsync_given: bool,
    app: AppConfig,
    /// `--redis`: the servers that hold the URL namespaces.
    redis: Option<Vec<String>>,
    /// `--redis-retry-for`.
    redis_retry_for: std::time::Duration,
    /// The config file's `[rename_command]`: (command, new name or "" to disable).
    renames: Vec<(String, String)>,
}

impl Settings {
    fn new(args: &Args) -> anyhow::Result<Settings> {
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
            ..defaults
        };
        if server.maxclients == 0 {
            anyhow::bail!("maxclients must be at least 1");
        }
        let http = match args.http.clone().or(file.http) {
            None => Some(urlseen_server::config::DEFAULT_HTTP_ADDR),
            Some(s) if s.eq_ignore_ascii_case("off") => None,
            Some(s) => {
                Some(s.parse().with_context(|| format!("--http {s:?}: expected IP:PORT or off"))?)
            }
        };
        let file_fsync = match &file.fsync {
            Some(s) => Some(s.parse::<Fsync>().map_err(|e| invalid("fsync", e.to_string()))?),
            None => None,
        };
        let mut app = AppConfig::default();
        let d = &file.defaults;
        if let Some(capacity) = d.capacity {
            if capacity == 0 {
                return Err(invalid("defaults.capacity", "must be at least 1".into()).into());
            }
            app.url_defaults.capacity = capacity;
        }
        if let Some(error) = d.error {
            app.url_defaults.fpr = error;
        }
        if let Some(profile) = &d.profile {
            app.url_defaults.canon.profile = profile
                .parse::<Profile>()
                .map_err(|e| invalid("defaults.profile", e.to_string()))?;
        }
        app.url_defaults.canon.sort_query = d.sort_query.unwrap_or(false);
        app.url_defaults.canon.strip_tracking = d.strip_tracking.unwrap_or(false);
        app.url_defaults.canon.keep_fragments = d.keep_fragments.unwrap_or(false);
        app.url_defaults.validate().map_err(|e| invalid("defaults", e.to_string()))?;
        if let Some(bytes) = file.max_namespace_bytes {
            app.max_namespace_bytes = bytes;
        }
        app.maxmemory = match (&args.maxmemory, &file.maxmemory) {
            (Some(bytes), _) => *bytes,
            (None, Some(text)) => parse_bytes(text).map_err(|e| invalid("maxmemory", e))?,
            (None, None) => default_maxmemory(),
        };
        let data = args.data.clone().or(file.data);
        if args.redis.is_some() && data.is_some() {
            return Err(invalid(
                "data",
                "a data directory and --redis exclude each other: with --redis the \
                 namespaces are in Redis"
                    .into(),
            )
            .into());
        }
        Ok(Settings {
            server,
            http,
            data,
            redis: args.redis.clone(),
            redis_retry_for: args.redis_retry_for,
            fsync: args.fsync.or(file_fsync).unwrap_or_default(),
            fsync_given: args.fsync.is_some() || file_fsync.is_some(),
            app,
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

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr)
        .with_ansi(io::IsTerminal::is_terminal(&io::stderr()))
        .try_init();
}

/// Runs the server until SIGTERM or SIGINT.
pub fn run(args: Args) -> anyhow::Result<()> {
    init_tracing();
    let settings = Settings::new(&args)?;
    if settings.fsync_given && settings.data.is_none() {
        warn!("--fsync has no effect without --data: the server persists nothing");
    }
    let db = open_db(settings.data.as_deref(), args.spill_dir.as_deref(), settings.fsync)?;
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
                urlseen_engine::Db::open_redis(urlseen_engine::redis::RedisOptions {
                    retry_for: redis_retry_for,
                    log_retries: true,
                    ..urlseen_engine::redis::RedisOptions::new(urls)
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
        dispatch.rename_command(name, new_name).map_err(anyhow::Error::msg)?;
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
        assert_eq!(s.app, AppConfig { maxmemory: default_maxmemory(), ..AppConfig::default() });
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

        for text in ["resp = 6380", "nonsense = 1", "[limits]\nmax_bulk_len = -1", "resp = \"x\""] {
            let f = write(text);
            let args = Args { config: Some(f.path().to_owned()), ..Args::default() };
            let e = Settings::new(&args).unwrap_err();
            assert!(
                matches!(e.downcast_ref::<ConfigError>(), Some(ConfigError::Parse { .. })),
                "{text}: {e}"
            );
        }
        for (text, key) in [
            ("fsync = \"sometimes\"", "fsync"),
            ("[defaults]\nprofile = \"nope\"", "defaults.profile"),
            ("[defaults]\nerror = 2.0", "defaults"),
            ("[defaults]\ncapacity = 0", "defaults.capacity"),
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
        let args = Args { maxmemory: Some(256 << 20), ..Args::default() };
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
