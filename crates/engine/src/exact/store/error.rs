//! How the fingerprint store reports a failure: as the crate's [`Error`], with the store's
//! path, so that a store error and a data directory's read alike. (A damaged file is
//! [`Error::format`], a bad option [`Error::InvalidOption`], as anywhere in the crate.)
use super::{Error, Path, io};

/// A file operation on the store failed.
pub(in crate::exact) fn io(what: &str, path: &Path, source: io::Error) -> Error {
    Error::Io { what: format!("fingerprint store: {what}"), path: path.to_path_buf(), source }
}

/// [`FingerprintStore::open_existing`] on a directory that holds no store.
pub(in crate::exact) fn not_found(path: &Path) -> Error {
    Error::NotFound { what: "fingerprint store", path: path.to_path_buf() }
}

/// The LSM engine's error, as the crate's.
pub(super) fn from_fjall(path: &Path, e: fjall::Error) -> Error {
    match e {
        fjall::Error::Io(source) => io("LSM I/O", path, source),
        fjall::Error::Storage(fjall::LsmError::Io(source)) => io("LSM I/O", path, source),
        fjall::Error::Locked => Error::Locked {
            dir: path.to_path_buf(),
            holder: "a fingerprint store open in another process or handle".into(),
        },
        // A write or fsync failed earlier; the store refuses writes from then on rather than
        // pretend. Reopen it to recover.
        fjall::Error::Poisoned => Error::Poisoned {
            reason: format!(
                "fingerprint store {}: an earlier write or fsync failed; reopen it to recover",
                path.display()
            ),
        },
        // A journal damaged before its end, a table whose checksum fails: fjall cannot read
        // past the damage, and nothing else holds what it held.
        other => Error::corrupt(
            path,
            &format!(
                "the LSM engine (fjall) found its files damaged ({other:?}). Restore the store \
                 directory from a backup, or run {}, which can set the damaged journal aside \
                 and says how many URLs that loses",
                super::repair_command(path)
            ),
        ),
    }
}
