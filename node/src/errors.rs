//! Every mapping of a Rust error to the error a JavaScript caller catches: the one place where
//! engine errors get their `code`. The package's `index.js` turns each code into its `Error`
//! subclass (`InvalidUrl`, `Locked`, ...), and its RESP client classifies server replies into
//! the same codes, so the embedded engine and the client throw alike.
//!
//! ```text
//! code                          class (index.js)    when
//! URLSEEN_ERROR                 UrlseenError        anything else; the base of every class
//! URLSEEN_INVALID_URL           InvalidUrl          a URL, host or prefix that is not one
//! URLSEEN_INVALID_OPTION        InvalidOption       a bad capacity, fpr, profile, fsync or name
//! URLSEEN_FORGET_UNSUPPORTED    ForgetUnsupported   forget on a namespace that cannot
//! URLSEEN_LOCKED                Locked              the data directory is open in another process
//! URLSEEN_STORAGE               StorageError        a file could not be read or written, or is damaged
//! URLSEEN_CLOSED                Closed              a call on a closed Db
//! ```

use urlseen_engine::Error as EngineError;

/// The `code` of a thrown error (napi-rs sets the JS error's `code` to it).
#[derive(Debug, Clone, Copy)]
pub struct Code(pub &'static str);

impl AsRef<str> for Code {
    fn as_ref(&self) -> &str {
        self.0
    }
}

pub(crate) const ERROR: Code = Code("URLSEEN_ERROR");
pub(crate) const INVALID_URL: Code = Code("URLSEEN_INVALID_URL");
pub(crate) const INVALID_OPTION: Code = Code("URLSEEN_INVALID_OPTION");
pub(crate) const FORGET_UNSUPPORTED: Code = Code("URLSEEN_FORGET_UNSUPPORTED");
pub(crate) const LOCKED: Code = Code("URLSEEN_LOCKED");
pub(crate) const STORAGE: Code = Code("URLSEEN_STORAGE");
pub(crate) const CLOSED: Code = Code("URLSEEN_CLOSED");

/// What the bindings' functions return.
pub(crate) type Result<T> = napi::Result<T, Code>;

/// An error with `code` and `message`.
pub(crate) fn err(code: Code, msg: impl Into<String>) -> napi::Error<Code> {
    napi::Error::new(code, msg.into())
}

/// An engine error as the error users catch.
pub(crate) fn engine(e: EngineError) -> napi::Error<Code> {
    let msg = e.to_string();
    let code = match e {
        EngineError::InvalidUrl(_)
        | EngineError::InvalidUrlInBatch { .. }
        | EngineError::InvalidHost { .. }
        | EngineError::InvalidPrefix { .. } => INVALID_URL,
        EngineError::InvalidOption { .. } | EngineError::InvalidName { .. } => INVALID_OPTION,
        EngineError::ForgetUnsupported(_)
        | EngineError::ForgetByUnsupported { .. }
        | EngineError::ForgetHostUnknown { .. }
        | EngineError::HostHashShared { .. }
        | EngineError::HostHashUnlisted { .. } => FORGET_UNSUPPORTED,
        EngineError::Locked { .. } => LOCKED,
        EngineError::Io { .. }
        | EngineError::Poisoned { .. }
        | EngineError::ReadOnly { .. }
        | EngineError::Corrupt { .. }
        | EngineError::UnsupportedVersion { .. }
        | EngineError::CanonVersionMismatch { .. }
        | EngineError::NotFound { .. } => STORAGE,
        _ => ERROR,
    };
    err(code, msg)
}
