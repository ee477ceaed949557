//! How the fingerprint store reports a failure: as the crate's [`Error`], with the store's
//! path, so that a store error and a data directory's read alike.

use super::*;

/// The store's errors, built from what failed.
pub(crate) struct StoreFailure;

impl StoreFailure {
    /// A file operation on the store failed.
    pub(crate) fn io(what: &str, path: &Path, source: io::Error) -> Error {
        Error::Io { what: format!("fingerprint store: {what}"), path: path.to_path_buf(), source }
    }

    /// [`FingerprintStore::open_existing`] on a directory that holds no store.
    pub(crate) fn not_found(path: &Path) -> Error {
        Error::NotFound { what: "fingerprint store", path: path.to_path_buf() }
    }

    /// Stored data does not decode, or the LSM engine found damage it cannot repair.
    pub(crate) fn corrupt(path: &Path, reason: impl Into<String>) -> Error {
        Error::Corrupt { path: path.to_path_buf(), reason: reason.into() }
    }

    /// The LSM engine's error, as the crate's.
    pub(crate) fn from_fjall(path: &Path, e: fjall::Error) -> Error {
        match e {
            fjall::Error::Io(source) => Self::io("LSM I/O", path, source),
            fjall::Error::Storage(fjall::LsmError::Io(source)) => Self::io("LSM I/O", path, source),
            fjall::Error::Locked => Error::Locked {
                dir: path.to_path_buf(),
                holder: "a fingerprint store open in another process or handle".into(),
            },
            // A write or fsync failed earlier; the store refuses writes from then on rather
            // than pretend. Reopen it to recover.
            fjall::Error::Poisoned => Error::Poisoned {
                reason: format!(
                    "fingerprint store {}: an earlier write or fsync failed; reopen it to recover",
                    path.display()
                ),
            },
            other => Self::corrupt(path, format!("LSM engine: {other:?}")),
        }
    }

    /// A file at `path` that does not fit its format: [`Error::UnsupportedVersion`] for a
    /// version this build does not read, [`Error::Corrupt`] for the rest (bad magic, a
    /// checksum that does not match, a short file).
    pub(crate) fn format(path: &Path, e: FormatError) -> Error {
        Error::format(path, e)
    }

    /// An option of an index or set out of range.
    pub(crate) fn invalid_option(name: &'static str, reason: String) -> Error {
        Error::InvalidOption { name, reason }
    }
}
