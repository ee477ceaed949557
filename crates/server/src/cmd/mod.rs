//! The built-in commands, one file each: the connection commands real clients send.
//!
//! Each file holds the command's `SPEC` (name, arity, flags, docs), its handler, and a
//! `command()` constructor; `register_builtins` in this module is the one place that lists them.

pub mod auth;
pub mod client;
pub mod command;
pub mod echo;
pub mod hello;
pub mod info;
pub mod ping;
pub mod quit;
pub mod select;

use crate::dispatch::Dispatch;

/// Adds every built-in command and `INFO` section to `d`.
pub(crate) fn register_builtins<S>(d: &mut Dispatch<S>) {
    d.register(ping::command())
        .register(echo::command())
        .register(hello::command())
        .register(auth::command())
        .register(client::command())
        .register(select::command())
        .register(command::command())
        .register(info::command())
        .register(quit::command());
    info::register_sections(d);
}
