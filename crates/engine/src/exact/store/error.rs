//! Why the fingerprint store refused ([`StoreError`]), and how a file that does not fit its
//! format becomes one.

use super::*;

/// Why the fingerprint store (or an index built on it) refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A file operation failed.
    #[error("fingerprint store {}: {what}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// [`FingerprintStore::open_existing`] on a directory that holds no store.
    #[error("no fingerprint store at {}", path.display())]
    NotFound {
        /// The directory.
        path: PathBuf,
    },
    /// Another process (or another handle in this one) has the store open.
    #[error("fingerprint store {} is in use by another process; close it or use another directory", path.display())]
    Locked {
        /// The directory.
        path: PathBuf,
    },
    /// The header file does not start with [`MAGIC`]: this is not a fingerprint store.
    #[error("{} is not a urlseen fingerprint store (bad magic)", path.display())]
    BadMagic {
        /// The header file.
        path: PathBuf,
    },
    /// The header's checksum does not match its content.
    #[error("{} is corrupt: checksum {got:#018x}, expected {expected:#018x}", path.display())]
    ChecksumMismatch {
        /// The header file.
        path: PathBuf,
        /// The checksum stored in the file.
        expected: u64,
        /// The checksum of the content read.
        got: u64,
    },
    /// The store was written by an unknown format version.
    #[error("{} has {what} {found}; this build supports {supported}", path.display())]
    UnsupportedVersion {
        /// The header file.
        path: PathBuf,
        /// `version` or `value encoding`.
        what: &'static str,
        /// The number in the file.
        found: u32,
        /// The number this build reads.
        supported: u32,
    },
    /// Stored data does not decode, or the LSM engine found damage it cannot repair.
    #[error("fingerprint store {} is corrupt: {reason}", path.display())]
    Corrupt {
        /// The store directory (or the damaged file).
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A write or fsync failed earlier; the store refuses writes from then on rather than
    /// pretend. Reopen it to recover.
    #[error("fingerprint store {} refuses writes: an earlier write or fsync failed", path.display())]
    Poisoned {
        /// The store directory.
        path: PathBuf,
    },
    /// Parameters of an index or set are out of range.
    #[error("invalid {name}: {reason}")]
    InvalidOption {
        /// The parameter.
        name: &'static str,
        /// What is wrong and what is allowed.
        reason: String,
    },
}

impl StoreError {
    pub(super) fn from_fjall(path: &Path, e: fjall::Error) -> StoreError {
        let path = path.to_path_buf();
        match e {
            fjall::Error::Io(source) => StoreError::Io { what: "LSM I/O", path, source },
            fjall::Error::Storage(fjall::LsmError::Io(source)) => {
                StoreError::Io { what: "LSM I/O", path, source }
            }
            fjall::Error::Locked => StoreError::Locked { path },
            fjall::Error::Poisoned => StoreError::Poisoned { path },
            other => StoreError::Corrupt { path, reason: format!("LSM engine: {other:?}") },
        }
    }
}

impl StoreError {
    /// A file at `path` that does not fit its format.
    pub(super) fn format(path: &Path, e: FormatError) -> StoreError {
        let path = path.to_path_buf();
        match e {
            FormatError::BadMagic { .. } => StoreError::BadMagic { path },
            FormatError::ChecksumMismatch { stored, computed, .. } => {
                StoreError::ChecksumMismatch { path, expected: stored, got: computed }
            }
            FormatError::UnsupportedVersion { found, newest, .. } => {
                StoreError::UnsupportedVersion {
                    path,
                    what: "version",
                    found: u32::from(found),
                    supported: u32::from(newest),
                }
            }
            e => StoreError::Corrupt { path, reason: e.to_string() },
        }
    }
}
