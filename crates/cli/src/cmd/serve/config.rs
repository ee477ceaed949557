//! The `--config` TOML file of `urlseen serve`: its shape, its value types and how a bad file
//! is reported.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use urlseen_engine::{Fsync, Profile};

use crate::cmd::memory_limit::memory_limit;

/// A size such as `256mb` (see [`parse_bytes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size(pub(super) u64);

impl std::str::FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Size, String> {
        parse_bytes(s).map(Size)
    }
}

/// `--http`: an address, or `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpAddr {
    /// No HTTP server.
    Off,
    /// Listen here.
    At(SocketAddr),
}

impl std::str::FromStr for HttpAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<HttpAddr, String> {
        if s.eq_ignore_ascii_case("off") {
            return Ok(HttpAddr::Off);
        }
        s.parse().map(HttpAddr::At).map_err(|_| format!("expected IP:PORT or off, got {s:?}"))
    }
}

/// A tracing filter, checked when it is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLevel(pub(super) String);

impl std::str::FromStr for LogLevel {
    type Err = String;
    fn from_str(s: &str) -> Result<LogLevel, String> {
        tracing_subscriber::EnvFilter::try_new(s)
            .map(|_| LogLevel(s.to_owned()))
            .map_err(|e| format!("invalid log level {s:?}: {e} (try error, warn, info, debug)"))
    }
}

/// Deserializes a number of seconds, whole (`30`) or not (`0.5`).
fn seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Seconds {
        Whole(u64),
        Fraction(f64),
    }
    let secs = match Seconds::deserialize(d)? {
        Seconds::Whole(n) => n as f64,
        Seconds::Fraction(f) => f,
    };
    crate::args::parse_seconds(&secs.to_string()).map(Some).map_err(serde::de::Error::custom)
}

/// Deserializes a string setting with its `FromStr`, so that a bad value is a TOML error that
/// names the line.
fn parsed<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    let text = String::deserialize(d)?;
    text.parse().map(Some).map_err(serde::de::Error::custom)
}

/// A size as Redis writes it: bytes, or a number with `k`/`m`/`g` (powers of 1000) or
/// `kb`/`mb`/`gb` (powers of 1024), case-insensitive.
pub(super) fn parse_bytes(s: &str) -> Result<u64, String> {
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

/// Three quarters of the memory this process may use (the smallest of the machine's RAM, its
/// cgroup's limit and its address-space limit: see [`memory_limit`]) and where that came from,
/// or no limit where none is known.
pub(super) fn default_maxmemory() -> (u64, &'static str) {
    memory_limit().map_or((0, "unknown"), |(bytes, source)| (bytes / 4 * 3, source.name()))
}

pub(super) fn parse_yes_no(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(format!("expected yes or no, got {s:?}")),
    }
}

/// A `--config` file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("cannot read config file {}: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why (in the message, not a `source`, so that it is printed once).
        error: io::Error,
    },
    /// The file is not TOML of the expected shape (the message names the line and the key).
    #[error("invalid config file {}: {error}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Where and what (in the message, not a `source`, so that it is printed once).
        error: Box<toml::de::Error>,
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

/// The `--config` file: every flag's key (see `every_flag_has_a_config_key`), then the
/// settings only the file holds.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileConfig {
    pub(super) resp: Option<SocketAddr>,
    pub(super) timeout: Option<u64>,
    pub(super) requirepass: Option<String>,
    pub(super) protected_mode: Option<bool>,
    pub(super) maxclients: Option<usize>,
    pub(super) data: Option<PathBuf>,
    #[serde(default, deserialize_with = "parsed")]
    pub(super) fsync: Option<Fsync>,
    pub(super) spill_dir: Option<PathBuf>,
    #[serde(default, deserialize_with = "parsed")]
    pub(super) maxmemory: Option<Size>,
    pub(super) redis: Option<Vec<String>>,
    #[serde(default, deserialize_with = "seconds")]
    pub(super) redis_retry_for: Option<Duration>,
    #[serde(default, deserialize_with = "parsed")]
    pub(super) http: Option<HttpAddr>,
    #[serde(default, deserialize_with = "parsed")]
    pub(super) loglevel: Option<LogLevel>,
    pub(super) slowlog_log_slower_than: Option<i64>,
    pub(super) slowlog_max_len: Option<usize>,
    #[serde(default, deserialize_with = "parsed")]
    pub(super) recrawl_after: Option<crate::args::Window>,
    pub(super) recrawl_generations: Option<u32>,
    pub(super) keep_urls: Option<bool>,
    pub(super) shutdown_grace: Option<u64>,
    pub(super) max_namespace_bytes: Option<u64>,
    /// Redis' `rename-command`: `FLUSHALL = ""` disables it, `DEL = "del-9f3a"` renames it.
    #[serde(default)]
    pub(super) rename_command: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub(super) limits: FileLimits,
    #[serde(default)]
    pub(super) defaults: FileDefaults,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileLimits {
    pub(super) max_bulk_len: Option<usize>,
    pub(super) max_args: Option<usize>,
    pub(super) max_query_buffer: Option<usize>,
    pub(super) max_total_query_buffer: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileDefaults {
    pub(super) capacity: Option<std::num::NonZeroU64>,
    pub(super) error: Option<f64>,
    #[serde(default, deserialize_with = "parsed")]
    pub(super) profile: Option<Profile>,
    pub(super) sort_query: Option<bool>,
    pub(super) strip_tracking: Option<bool>,
    pub(super) keep_fragments: Option<bool>,
}

impl FileConfig {
    pub(super) fn load(path: &Path) -> Result<FileConfig, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| ConfigError::Read { path: path.to_owned(), error })?;
        toml::from_str(&text)
            .map_err(|error| ConfigError::Parse { path: path.to_owned(), error: Box::new(error) })
    }
}
