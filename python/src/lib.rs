//! `urlseen._native`: the Python bindings of urlseen (PyO3, abi3).
//!
//! Three things, re-exported by the pure-Python package `urlseen` (python/urlseen/):
//! - `Db` / `Namespace` (embedded.rs): the embedded engine (`urlseen_engine::Db`);
//! - `Client` / `RemoteNamespace` (client.rs): the same API over `urlseen serve` (RESP, redis-rs);
//! - `main`: the `urlseen` command (crates/cli), run by the wheel's console script.
//!
//! Errors become Python exceptions in one place (errors.rs).
//!
//! # Invalid URLs
//! A single call (`seen`, `contains`, `forget`) raises `InvalidUrl`. A batch (`*_many`) answers
//! `None` for an invalid URL, neither looked up nor recorded, and goes on with the others: the
//! server's `-1` rule (docs/protocol.md, "What a reply says was done"), so the embedded engine
//! and the client answer a batch alike.

mod client;
mod embedded;
mod errors;
mod stats;

use pyo3::prelude::*;

/// Runs the `urlseen` command with `argv` (program name first, as `sys.argv`) and returns its
/// exit status. The GIL is released while it runs (`urlseen serve` runs until SIGTERM).
#[pyfunction]
fn main(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.detach(|| urlseen::run(argv))
}

/// The native part of the `urlseen` package; import `urlseen` instead.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(main, m)?)?;
    m.add_class::<embedded::PyDb>()?;
    m.add_class::<embedded::PyNamespace>()?;
    m.add_class::<client::PyClient>()?;
    m.add_class::<client::PyRemoteNamespace>()?;
    errors::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
