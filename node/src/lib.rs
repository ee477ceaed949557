//! `urlseen` for Node.js: the native part of the npm package in this folder (napi-rs).
//!
//! Two things, wrapped by the package's `index.js` (which gives them their JS names and turns
//! error codes into `Error` subclasses):
//! - `JsDb` / `JsNamespace` (embedded.rs): the embedded engine (`urlseen_engine::Db`);
//! - `main`: the `urlseen` command (crates/cli), behind the package's `urlseen` bin.
//!
//! The client of `urlseen serve` is plain JavaScript (`client.js`): it needs nothing native.
//! Errors get their codes in one place (errors.rs).

mod embedded;
mod errors;
mod stats;

use napi_derive::napi;

/// Runs the `urlseen` command with `argv` (program name first) and returns its exit status.
/// It blocks the calling thread until the command ends (`urlseen serve` runs until SIGTERM).
#[napi]
pub fn main(argv: Vec<String>) -> u8 {
    urlseen::run(argv)
}

/// The version of the urlseen crates this addon was built from.
#[napi]
pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}
