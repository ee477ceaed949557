//! The commands, one file each: the connection commands real clients send (built in to every
//! [`Dispatch`]), and the engine's commands over an [`App`]: RedisBloom's `BF.*`, urlseen's
//! `URL.*`, and the keyspace commands that make a namespace a key.
//!
//! Each file holds the command's `SPEC` (name, arity, flags, docs), its handler, and a
//! `command()` constructor; `register_builtins` and [`register_engine`] in this module are the
//! places that list them.

pub mod auth;
pub mod bf_add;
pub mod bf_card;
pub mod bf_exists;
pub mod bf_info;
pub mod bf_insert;
pub mod bf_loadchunk;
pub mod bf_madd;
pub mod bf_mexists;
pub mod bf_reserve;
pub mod bf_scandump;
pub mod client;
pub mod command;
pub mod config;
pub mod dbsize;
pub mod del;
pub mod discard;
pub mod echo;
pub mod exec;
pub mod exists;
pub mod expire;
pub mod flushall;
pub mod hello;
pub mod info;
pub mod key_type;
pub mod keys;
pub mod memory;
pub mod multi;
pub mod persist;
pub mod ping;
pub mod quit;
pub mod scan;
pub mod select;
pub mod slowlog;
pub mod ttl;
pub mod unwatch;
pub mod url_check;
pub mod url_forget;
pub mod url_info;
pub mod url_reserve;
pub mod url_seen;
pub mod watch;

use std::sync::Arc;

use crate::app::{App, Keyspace, rss_bytes};
use crate::dispatch::Dispatch;
use crate::state::ServerState;

/// Adds the engine's commands and `INFO` sections (`keyspace`, `memory`) to `d`.
pub fn register_engine(d: &mut Dispatch<Arc<App>>) {
    d.register(bf_reserve::command())
        .register(bf_add::command())
        .register(bf_madd::command())
        .register(bf_insert::command())
        .register(bf_exists::command())
        .register(bf_mexists::command())
        .register(bf_info::command())
        .register(bf_card::command())
        .register(bf_scandump::command())
        .register(bf_loadchunk::command())
        .register(url_reserve::command())
        .register(url_seen::command())
        .register(url_check::command())
        .register(url_forget::command())
        .register(url_info::command())
        .register(del::command())
        .register(del::unlink())
        .register(expire::expire())
        .register(expire::pexpire())
        .register(expire::expireat())
        .register(expire::pexpireat())
        .register(ttl::ttl())
        .register(ttl::pttl())
        .register(ttl::expiretime())
        .register(ttl::pexpiretime())
        .register(persist::command())
        .register(memory::command())
        .register(exists::command())
        .register(keys::command())
        .register(scan::command())
        .register(key_type::command())
        .register(dbsize::command())
        .register(flushall::flushall())
        .register(flushall::flushdb());
    d.info_section("keyspace", true, keyspace);
    d.info_section("memory", true, memory);
    d.info_section("persistence", true, persistence);
    d.config_param("maxmemory", |app, _| app.maxmemory().to_string())
        .config_param("maxmemory-policy", |_, _| "noeviction".to_owned())
        .config_param("appendonly", |app, _| config::yes_no(app.db().path().is_some()))
        .config_param("appendfsync", |app, _| app.db().fsync().name().to_owned());
}

/// Redis's fields where they mean the same (`loading`, `aof_enabled`: the fingerprint logs are
/// urlseen's append-only files), then urlseen's own.
fn persistence(app: &Arc<App>, _s: &ServerState, out: &mut info::InfoSection) {
    let db = app.db();
    out.field("loading", 0).field("async_loading", 0);
    out.field("aof_enabled", u8::from(db.path().is_some()));
    match (app.keyspace(), db.path()) {
        (Keyspace::Redis(_), _) => out.field("urlseen_storage", "redis"),
        (Keyspace::Local, Some(dir)) => {
            // What recovery dropped when the namespaces were opened: stderr said so then; this
            // keeps saying it.
            let (mut truncated, mut rebuilt) = (0, 0);
            // The loaded namespaces': one loaded later reported what it found then.
            for ns in db.loaded_namespaces() {
                if let Some(r) = ns.recovery() {
                    truncated += r.truncated_bytes;
                    rebuilt += u64::from(r.snapshot_error.is_some());
                }
            }
            let (loaded, files) = db.loaded_counts();
            out.field("urlseen_storage", "data_directory")
                .field("urlseen_data_dir", dir.display())
                .field("urlseen_namespaces_loaded", loaded)
                .field("urlseen_namespace_files_open", files)
                .field("urlseen_namespace_files_max", db.max_open_files())
                .field("urlseen_fsync", db.fsync().name())
                .field("urlseen_recovery_truncated_bytes", truncated)
                .field("urlseen_recovery_snapshots_unused", rebuilt)
        }
        (Keyspace::Local, None) => out.field("urlseen_storage", "memory"),
    };
}

fn keyspace(app: &Arc<App>, _s: &ServerState, out: &mut info::InfoSection) {
    let keys = app.db().namespace_count();
    if keys > 0 {
        let (expires, avg_ttl) = app.db().expiry_stats();
        out.field("db0", format_args!("keys={keys},expires={expires},avg_ttl={avg_ttl}"));
    }
}

fn memory(app: &Arc<App>, _s: &ServerState, out: &mut info::InfoSection) {
    let (used, disk) = app.usage();
    out.field("used_memory", used)
        .field("used_memory_human", human(used))
        .field("used_memory_rss", rss_bytes().unwrap_or(0))
        .field("urlseen_filter_arena_idle_bytes", urlseen_engine::arena_idle_bytes())
        .field("urlseen_disk_bytes", disk)
        .field("urlseen_disk_human", human(disk))
        .field("maxmemory", app.maxmemory())
        .field("maxmemory_human", human(app.maxmemory()))
        .field("urlseen_maxmemory_source", app.maxmemory_source())
        .field("maxmemory_policy", "noeviction");
}

/// Bytes the way Redis' `used_memory_human` writes them: `1.50M`.
fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "K", "M", "G", "T"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes}B") } else { format!("{value:.2}{}", UNITS[unit]) }
}

// Beside the list it fills: the table (`dispatch`) knows no command.
impl<S: Send + Sync + 'static> Dispatch<S> {
    /// A table with the built-in connection and transaction commands and `INFO` sections.
    pub fn new(app: S) -> Dispatch<S> {
        let mut d = Dispatch::empty(app);
        register_builtins(&mut d);
        d
    }
}

/// Adds every built-in command and `INFO` section to `d`.
fn register_builtins<S: Send + Sync + 'static>(d: &mut Dispatch<S>) {
    d.register(ping::command())
        .register(echo::command())
        .register(hello::command())
        .register(auth::command())
        .register(client::command())
        .register(select::command())
        .register(command::command())
        .register(info::command())
        .register(quit::command())
        .register(slowlog::command())
        .register(config::command())
        .register(multi::command())
        .register(exec::command())
        .register(discard::command())
        .register(watch::command())
        .register(unwatch::command());
    info::register_sections(d);
    config::register_params(d);
}
