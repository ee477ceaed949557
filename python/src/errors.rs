//! The exception hierarchy, and every mapping of a Rust error to it: the one place where
//! engine and server errors become Python exceptions.
//!
//! ```text
//! urlseen.Error                 base of everything urlseen raises
//! ├── InvalidUrl                the URL cannot be canonicalized (single calls; batches say None)
//! ├── InvalidOption             a bad capacity, fpr, profile, fsync or namespace name
//! ├── ForgetUnsupported         forget on a namespace without counting filters
//! ├── Locked                    the data directory is open in another process
//! ├── StorageError              a file could not be read or written, or is damaged
//! ├── ServerError               `urlseen serve` answered an error (e.g. -MISCONF)
//! └── ConnectionFailed          `urlseen serve` could not be reached, or the connection broke
//! ```

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use urlseen_engine::Error as EngineError;

create_exception!(urlseen, Error, PyException, "Base class of every error urlseen raises.");
create_exception!(
    urlseen,
    InvalidUrl,
    Error,
    "The URL cannot be canonicalized by the namespace's profile (relative, unsupported scheme, bad host, ...); nothing was recorded."
);
create_exception!(
    urlseen,
    InvalidOption,
    Error,
    "An option is out of range: capacity, fpr, profile, fsync or the namespace name."
);
create_exception!(
    urlseen,
    ForgetUnsupported,
    Error,
    "forget() on a namespace without counting filters: create it with counting=True."
);
create_exception!(
    urlseen,
    Locked,
    Error,
    "The data directory is open in another process (a server, or another Db)."
);
create_exception!(
    urlseen,
    StorageError,
    Error,
    "A file of the data directory could not be read or written, or is damaged. After a failed write the namespace refuses writes until reopened."
);
create_exception!(
    urlseen,
    ServerError,
    Error,
    "urlseen serve answered with an error (for example -MISCONF after a failed disk write)."
);
create_exception!(
    urlseen,
    ConnectionFailed,
    Error,
    "urlseen serve could not be reached, or the connection broke: the command may or may not have been applied."
);

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("InvalidUrl", py.get_type::<InvalidUrl>())?;
    m.add("InvalidOption", py.get_type::<InvalidOption>())?;
    m.add("ForgetUnsupported", py.get_type::<ForgetUnsupported>())?;
    m.add("Locked", py.get_type::<Locked>())?;
    m.add("StorageError", py.get_type::<StorageError>())?;
    m.add("ServerError", py.get_type::<ServerError>())?;
    m.add("ConnectionFailed", py.get_type::<ConnectionFailed>())?;
    Ok(())
}

/// An engine error as the Python exception users catch.
pub(crate) fn engine(err: EngineError) -> PyErr {
    let msg = err.to_string();
    match err {
        EngineError::InvalidUrl(_)
        | EngineError::InvalidUrlInBatch { .. }
        | EngineError::InvalidHost { .. }
        | EngineError::InvalidPrefix { .. } => InvalidUrl::new_err(msg),
        EngineError::InvalidOption { .. } | EngineError::InvalidName { .. } => {
            InvalidOption::new_err(msg)
        }
        EngineError::ForgetUnsupported(_)
        | EngineError::ForgetByUnsupported { .. }
        | EngineError::ForgetHostUnknown { .. }
        | EngineError::HostHashShared { .. }
        | EngineError::HostHashUnlisted { .. } => ForgetUnsupported::new_err(msg),
        EngineError::Locked { .. } => Locked::new_err(msg),
        EngineError::Io { .. }
        | EngineError::Poisoned { .. }
        | EngineError::ReadOnly { .. }
        | EngineError::Corrupt { .. }
        | EngineError::UnsupportedVersion { .. }
        | EngineError::CanonVersionMismatch { .. }
        | EngineError::NotFound { .. } => StorageError::new_err(msg),
        _ => Error::new_err(msg),
    }
}

/// A redis-rs error from talking to `urlseen serve`. The server's error replies are classified
/// by the text crates/server/src/error.rs gives them.
pub(crate) fn remote(err: &redis::RedisError) -> PyErr {
    let msg = err.to_string();
    if err.is_io_error()
        || err.is_connection_refusal()
        || err.is_connection_dropped()
        || err.is_timeout()
    {
        return ConnectionFailed::new_err(msg);
    }
    if msg.contains("cannot forget")
        || msg.contains("whose host is unknown")
        || msg.contains("host hash")
    {
        ForgetUnsupported::new_err(msg)
    } else if ["invalid host", "invalid prefix", "invalid URL"].iter().any(|s| msg.contains(s)) {
        InvalidUrl::new_err(msg)
    } else if [
        "unknown profile",
        "bad capacity",
        "bad error rate",
        "invalid option",
        "invalid namespace name",
    ]
    .iter()
    .any(|s| msg.contains(s))
    {
        InvalidOption::new_err(msg)
    } else {
        ServerError::new_err(msg)
    }
}
