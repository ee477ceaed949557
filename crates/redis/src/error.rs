//! What the Redis backend can refuse, and which of its failures may go away by themselves.

use super::*;

/// What the Redis backend can refuse.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An engine error (an invalid URL, an invalid option).
    #[error(transparent)]
    Engine(#[from] urlseen_engine::Error),
    /// A connection to a Redis node failed (refused, reset, timed out).
    #[error("redis {node}: {source}")]
    Redis {
        /// The node's URL.
        node: String,
        /// What the client saw.
        source: ::redis::RedisError,
    },
    /// Redis answered with an error.
    #[error("redis {node} answered: {message}")]
    Server {
        /// The node's URL.
        node: String,
        /// The error line.
        message: String,
    },
    /// Redis answered something a script never returns.
    #[error("unexpected reply from redis {node} to {what}: {reply}")]
    Protocol {
        /// The node's URL.
        node: String,
        /// The request.
        what: &'static str,
        /// What came back.
        reply: String,
    },
    /// The namespace exists in Redis with other parameters (seed, sizes, canonicalization):
    /// using it with ours would compute other fingerprints or bits.
    #[error(
        "namespace {name:?} exists in redis with other parameters:\n  stored: {stored}\n  ours:   {ours}"
    )]
    ParamsMismatch {
        /// The namespace.
        name: String,
        /// What Redis holds.
        stored: String,
        /// What these options make.
        ours: String,
    },
    /// Redis no longer holds what it held (a restart without persistence, a failover that lost
    /// writes, a flushed, deleted or evicted key, the namespace dropped and re-created while
    /// this client had it open). Answering on would call recorded URLs new.
    #[error(
        "namespace {name:?}: redis lost data: {lost}; refusing rather than answer recorded URLs \
         as new. Restore redis from its AOF/RDB and run again, or drop the namespace \
         (every URL it held will be new again)"
    )]
    LostData {
        /// The namespace.
        name: String,
        /// What is gone.
        lost: Lost,
    },
    /// The namespace's lifetime (`EXPIRE`) ended: Redis deleted its keys. Open it again for a
    /// new, empty one.
    #[error("namespace {name:?} expired (its lifetime ended at {at} ms since the Unix epoch)")]
    Expired {
        /// The namespace.
        name: String,
        /// When it expired (Unix ms).
        at: u64,
    },
    /// Redis stayed unreachable or refusing (connection refused or dropped, `LOADING`,
    /// `CLUSTERDOWN`, …) for longer than [`RedisOptions::retry_for`].
    #[error("redis unavailable: gave up after retrying for {:.1} s ({attempts} attempts): {last}", waited.as_secs_f64())]
    Unavailable {
        /// How long the call retried.
        waited: Duration,
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last: Box<Error>,
    },
    /// The namespace's metadata in Redis is damaged.
    #[error("namespace {name:?}: bad metadata in redis: {reason}")]
    BadMeta {
        /// The namespace.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A call kept being redirected (frozen leaves, a stuck split) and gave up.
    #[error("gave up after {rounds} rounds of re-routing: {why}")]
    TooManyRetries {
        /// Rounds taken.
        rounds: usize,
        /// The last reason.
        why: String,
    },
    /// The configuration is unusable.
    #[error("redis backend configuration: {0}")]
    Config(String),
}

/// What [`Error::LostData`] found missing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Lost {
    /// A leaf's log holds fewer entries than this client had read or written, or than its own
    /// count says were appended, or another entry where this client's last read one was.
    Entries {
        /// The leaf.
        leaf: NodeId,
        /// Entries known to have been in the log.
        had: u64,
        /// Entries the log holds now.
        now: u64,
    },
    /// The namespace's metadata is gone.
    Namespace,
    /// The namespace (or one of its leaves) belongs to another incarnation: it was dropped and
    /// created again since this client opened it.
    Epoch {
        /// The leaf whose identity differs (`None`: the metadata's).
        leaf: Option<NodeId>,
        /// The incarnation this client opened.
        ours: String,
        /// The one Redis holds.
        found: String,
    },
    /// A leaf that was in use has lost its keys (its identity is gone).
    Leaf {
        /// The leaf.
        leaf: NodeId,
    },
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lost::Entries { leaf, had, now } => write!(
                f,
                "leaf {leaf} holds {now} entries where {had} were recorded, or other ones in \
                 their place (a restart without persistence, a failover that lost writes, a \
                 deleted or evicted key)"
            ),
            Lost::Namespace => write!(
                f,
                "its metadata is gone (redis restarted empty, was flushed, or the key was deleted)"
            ),
            Lost::Epoch { leaf: Some(leaf), ours, found } => write!(
                f,
                "leaf {leaf} belongs to namespace incarnation {found}, this process opened \
                 {ours} (dropped and created again, or a key restored from another)"
            ),
            Lost::Epoch { leaf: None, ours, found } => write!(
                f,
                "the namespace was created again (incarnation {found}) since this process opened \
                 incarnation {ours}"
            ),
            Lost::Leaf { leaf } => write!(
                f,
                "the keys of leaf {leaf}, which was in use, are gone (a restart without \
                 persistence, a failover, a deleted or evicted key)"
            ),
        }
    }
}

impl Error {
    /// Whether the failure may go away by itself: a connection refused, reset or timed out, or
    /// a reply by which Redis refused a command for a while (`LOADING`, `TRYAGAIN`,
    /// `CLUSTERDOWN`, `MASTERDOWN`, `BUSY`, `READONLY`).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Redis { source, .. } => {
                source.is_io_error()
                    || source.is_timeout()
                    || source.is_connection_dropped()
                    || source.is_connection_refusal()
            }
            Error::Server { message, .. } => router::transient_reply(message),
            _ => false,
        }
    }
}

/// The backend's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
