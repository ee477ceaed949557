use std::path::{Path, PathBuf};

use urlseen_canon::CanonError;
use urlseen_filter::frame::FormatError;

/// Everything the engine can refuse.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The URL could not be canonicalized; nothing was recorded.
    #[error("invalid URL: {0}")]
    InvalidUrl(#[from] CanonError),
    /// One URL of a batch could not be canonicalized; nothing of the batch was recorded.
    #[error("invalid URL at position {index} of the batch: {source}")]
    InvalidUrlInBatch {
        /// Position of the first invalid URL in the batch.
        index: usize,
        /// Why it is invalid.
        source: CanonError,
    },
    /// A namespace option is out of range.
    #[error("invalid option {name}: {reason}")]
    InvalidOption {
        /// The option, as users spell it (`capacity`, `fpr`, …).
        name: &'static str,
        /// What is wrong and what is allowed.
        reason: String,
    },
    /// A namespace name is unusable.
    #[error("invalid namespace name {name:?}: {reason}")]
    InvalidName {
        /// The name given.
        name: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// `create_namespace` on a name that exists.
    #[error("namespace {0:?} already exists")]
    NamespaceExists(String),
    /// `forget` on a namespace without counting filters: a plain Bloom filter cannot unlearn.
    #[error("namespace {0:?} cannot forget URLs: create it with counting filters (exact mode)")]
    ForgetUnsupported(String),
    /// A host to forget (`forget --host`) that is not one: empty, or not a host once
    /// canonicalized.
    #[error("invalid host {host:?}: {reason}")]
    InvalidHost {
        /// The host given.
        host: String,
        /// What is wrong.
        reason: String,
    },
    /// A prefix to forget (`forget --prefix`) that cannot be matched safely: not a URL with a
    /// host, or with a part canonicalization could make broader (a query, a fragment, a dot
    /// segment).
    #[error("invalid prefix {prefix:?}: {reason}")]
    InvalidPrefix {
        /// The prefix given.
        prefix: String,
        /// What is wrong.
        reason: String,
    },
    /// Forgetting by host in a namespace whose records do not all know their host: those
    /// recorded before hosts were kept (urlseen 0.2 and earlier), and raw items and
    /// fingerprints (`BF.ADD`, `seen_bytes`, `seen_fingerprints`), may be URLs of that host,
    /// and would stay seen. Nothing was forgotten.
    #[error(
        "namespace {name:?} holds {records} records whose host is unknown (recorded before \
         hosts were kept, or as raw items or fingerprints): forgetting a host would leave its \
         URLs among them seen, so nothing was forgotten"
    )]
    ForgetHostUnknown {
        /// The namespace.
        name: String,
        /// Records with no host.
        records: u64,
    },
    /// Forgetting a host whose 32-bit host hash other hosts recorded in the namespace share:
    /// forgetting the hash would forget their URLs too (false negatives). Nothing was
    /// forgotten. See `docs/forget.md`, "The collision guard".
    #[error(
        "namespace {name:?}: host {host:?} has host hash {hash:#010x}, which the recorded \
         hosts {hosts:?} share: forgetting it would forget their URLs too, so nothing was \
         forgotten"
    )]
    HostHashShared {
        /// The namespace.
        name: String,
        /// The host asked for, canonical.
        host: String,
        /// Its 32-bit host hash.
        hash: u32,
        /// Every host recorded under that hash (the host asked for among them if recorded).
        hosts: Vec<String>,
    },
    /// Forgetting a host whose hash some records carry while the namespace's host dictionary
    /// lists no host under it (records made with host hashes given by the caller, through
    /// `seen_fingerprints_hosts`, or by a build without the dictionary): they may be another
    /// host's URLs. Nothing was forgotten.
    #[error(
        "namespace {name:?} holds {records} records under host hash {hash:#010x} (that of \
         {host:?}) but lists no host recorded under it: they may be another host's URLs, so \
         nothing was forgotten"
    )]
    HostHashUnlisted {
        /// The namespace.
        name: String,
        /// The host asked for, canonical.
        host: String,
        /// Its 32-bit host hash.
        hash: u32,
        /// Records carrying that hash.
        records: u64,
    },
    /// Forgetting by host or prefix is not possible here.
    #[error("namespace {name:?} cannot forget {what}: {reason}")]
    ForgetByUnsupported {
        /// The namespace.
        name: String,
        /// `by host` or `by prefix`.
        what: &'static str,
        /// Why, and what to do.
        reason: &'static str,
    },
    /// A file operation failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done (`write`, `fsync`, `read log`, …).
        what: String,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A write or fsync failed earlier; the namespace refuses writes from then on rather than
    /// acknowledge what may not be on disk. Reopen the data directory to recover.
    #[error("writes refused: {reason}")]
    Poisoned {
        /// The failure that poisoned the log.
        reason: String,
    },
    /// The data directory was opened read-only ([`Db::open_read_only`](crate::Db::open_read_only)):
    /// it reports what it holds and answers lookups, and refuses whatever would write.
    #[error("{} was opened read-only: {what}", path.display())]
    ReadOnly {
        /// The file or directory the refused operation would have changed.
        path: PathBuf,
        /// What was refused, and why.
        what: &'static str,
    },
    /// A file is damaged in a way recovery cannot repair by itself.
    #[error("{} is corrupt: {reason}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A file was written by a newer (or unknown) format version.
    #[error("unsupported {what} version {found} (this build supports {supported})")]
    UnsupportedVersion {
        /// Which format.
        what: &'static str,
        /// The version in the file.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// Another process holds the data directory (or a fingerprint store).
    #[error("{} is in use by another process ({holder}); stop it or use another directory", dir.display())]
    Locked {
        /// The directory.
        dir: PathBuf,
        /// What the lock file says about its holder.
        holder: String,
    },
    /// The namespace was created with another canonicalization version: the same URL could now
    /// hash differently, so opening it would break deduplication.
    #[error(
        "namespace {name:?} was created with canonicalization version {stored}, this build has {current}; re-import its URLs into a new namespace"
    )]
    CanonVersionMismatch {
        /// The namespace.
        name: String,
        /// Version stored with it.
        stored: u32,
        /// Version of this build.
        current: u32,
    },
    /// The namespace does not exist.
    #[error("no such namespace {0:?}")]
    NoSuchNamespace(String),
    /// A dump chunk (`BF.SCANDUMP`'s data, or a chunk of a dump file) is damaged: bad magic,
    /// bad checksum, truncated, or fields that do not add up. Nothing of it was loaded.
    #[error("damaged dump chunk: {reason}")]
    BadChunk {
        /// What is wrong.
        reason: String,
    },
    /// A dump chunk came out of order (or twice, or after a missing one): each chunk must
    /// follow the one `BF.SCANDUMP` returned before it. Nothing of it was loaded; the restore
    /// waits for the right one.
    #[error(
        "dump chunk out of order: expected the chunk that follows iterator {expected}, got one that follows {got}"
    )]
    ChunkOutOfOrder {
        /// The iterator the last loaded chunk ended at.
        expected: i64,
        /// The iterator this chunk starts at.
        got: i64,
    },
    /// A dump chunk does not belong here: it was dumped from a namespace with other options
    /// (a wrong key). Nothing of it was loaded.
    #[error("dump chunk does not match: {reason}")]
    ChunkMismatch {
        /// What does not match.
        reason: String,
    },
    /// A dump chunk given with another iterator than the one `BF.SCANDUMP` returned with it
    /// (kept apart from [`Error::ChunkMismatch`]: RedisBloom answers a bad position and bad
    /// data in other words). Nothing of it was loaded.
    #[error(
        "dump chunk given with the wrong iterator: it was returned with {returned}, but given with {given}"
    )]
    ChunkIteratorMismatch {
        /// The iterator `BF.SCANDUMP` returned with the chunk.
        returned: i64,
        /// The iterator it was given with.
        given: i64,
    },
    /// A `BF.SCANDUMP` iterator that no dump returned (negative, or not at a chunk boundary).
    #[error("invalid dump iterator {0}")]
    InvalidIterator(i64),
    /// The namespace is being restored (its header chunk was loaded, its last chunk not yet):
    /// it cannot be created, written or read until the restore finishes or is dropped.
    #[error("namespace {0:?} is being restored; load its remaining chunks, or drop it")]
    Restoring(String),
    /// Loading or creating a namespace would hold more descriptors than
    /// [`DbOptions::max_open_files`](crate::DbOptions) allows, and no loaded namespace could be
    /// unloaded to make room: each is in use, too big to reload cheaply, or refusing writes.
    /// Nothing was changed; retry once a namespace is let go, or raise `ulimit -n`.
    #[error(
        "too many namespaces open: their files hold {open} of the {max} descriptors allowed and \
         none can be unloaded now (each is in use or too big to reload); retry, or raise ulimit -n"
    )]
    TooManyOpenNamespaces {
        /// Descriptors the loaded namespaces hold.
        open: usize,
        /// The bound.
        max: usize,
    },
    /// This kind of namespace cannot be dumped.
    #[error("namespace {name:?} cannot be dumped: {reason}")]
    DumpUnsupported {
        /// The namespace.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// A dump's first data chunk could not be made: more answers "new" were waiting for their
    /// replies to be delivered (and their URLs to be recorded) than half a chunk carries, and
    /// still after the time allowed, and a dump taken then would lack them. Nothing was done;
    /// try again.
    #[error(
        "namespace {name:?} has answers in flight that were not recorded within {waited_ms} ms \
         (a client not reading its replies?): nothing was dumped, try again"
    )]
    Unsettled {
        /// The namespace.
        name: String,
        /// How long the dump waited.
        waited_ms: u64,
    },
    /// What was to be opened is not there (a fingerprint store's directory without one).
    #[error("no {what} at {}", path.display())]
    NotFound {
        /// What was looked for.
        what: &'static str,
        /// Where.
        path: PathBuf,
    },
}

impl Error {
    pub(crate) fn io(what: &str, path: &Path, source: std::io::Error) -> Self {
        Error::Io { what: what.to_owned(), path: path.to_owned(), source }
    }

    pub(crate) fn corrupt(path: &Path, reason: &str) -> Self {
        Error::Corrupt { path: path.to_owned(), reason: reason.to_owned() }
    }

    /// A file at `path` that does not fit its format: [`Error::UnsupportedVersion`] for a
    /// version this build does not read, [`Error::Corrupt`] for the rest.
    pub(crate) fn format(path: &Path, e: FormatError) -> Self {
        Self::format_or(e, |e| Error::corrupt(path, &e.to_string()))
    }

    /// [`Error::UnsupportedVersion`] for a version this build does not read, `other` of the
    /// rest.
    pub(crate) fn format_or(e: FormatError, other: impl FnOnce(FormatError) -> Self) -> Self {
        match e {
            FormatError::UnsupportedVersion { format, found, newest, .. } => {
                Error::UnsupportedVersion {
                    what: format,
                    found: u32::from(found),
                    supported: u32::from(newest),
                }
            }
            e => other(e),
        }
    }
}

/// The engine's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
