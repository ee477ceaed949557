//! The crate's one error type.

use std::io;

use crate::codec::FilterKind;
use crate::frame::FormatError;
use crate::{BLOCK_BITS, MAX_BITS, MAX_HASHES};

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a filter could not be built, sized, decoded or changed.
///
/// Each call returns the variants its docs name: a `try_new` its parameters' ([`Error::Bits`],
/// [`Error::Hashes`], [`Error::Log2Slots`]), [`crate::plan::Plan::new`] its sizing's,
/// [`crate::CountingBloom::remove`] [`Error::NotPresent`], and a `decode` or `read_from` the
/// framing's ([`Error::Format`]) and the payload's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The number of bits (or counters) is 0 or above [`MAX_BITS`].
    #[error("number of bits must be between 1 and {MAX_BITS}, got {bits}")]
    Bits {
        /// The number given.
        bits: u64,
    },
    /// The number of hashes is 0 or above [`MAX_HASHES`].
    #[error("number of hashes must be between 1 and {MAX_HASHES}, got {hashes}")]
    Hashes {
        /// The number given.
        hashes: u32,
    },
    /// The bitmap size exponent is outside `5..=32`.
    #[error("bitmap size must be 2^5 to 2^32 slots, got 2^{log2_slots}")]
    Log2Slots {
        /// The exponent given.
        log2_slots: u32,
    },
    /// A plan's expected number of items was 0.
    #[error("capacity must be at least 1 item")]
    ZeroCapacity,
    /// A plan's false-positive rate was not strictly between 0 and 1.
    #[error("false-positive rate must be strictly between 0 and 1, got {fpr}")]
    InvalidFpr {
        /// The rate given.
        fpr: f64,
    },
    /// A plan's leaf length was below one block, above the limit, or not a whole number of
    /// blocks.
    #[error(
        "leaf length must be a multiple of {BLOCK_BITS} bits between {BLOCK_BITS} and {MAX_BITS}, got {leaf_bits}"
    )]
    InvalidLeafBits {
        /// The leaf length given, in bits.
        leaf_bits: u64,
    },
    /// A leaf of this length cannot hold even one item at this false-positive rate.
    #[error(
        "a leaf of {leaf_bits} bits holds no item at false-positive rate {fpr}; use longer leaves"
    )]
    LeafTooSmall {
        /// The leaf length, in bits.
        leaf_bits: u64,
        /// The false-positive rate.
        fpr: f64,
    },
    /// [`crate::CountingBloom::remove`]: one of the fingerprint's counters is 0, so it is
    /// certainly not in the filter. Nothing changed.
    #[error("fingerprint is not in the counting filter")]
    NotPresent,
    /// Not a filter this build reads, or damaged in its frame: bad magic, an unsupported
    /// version, bytes cut short, or a checksum that does not match (the framing every urlseen
    /// file and blob shares, [`crate::frame`]).
    #[error(transparent)]
    Format(#[from] FormatError),
    /// The input holds another kind of filter than the one asked for (or an unknown kind).
    #[error("wrong filter kind: expected {expected}, found tag {found}")]
    WrongKind {
        /// The kind asked for.
        expected: FilterKind,
        /// The tag found in the input.
        found: u8,
    },
    /// A header field is out of range or inconsistent with the others.
    #[error("invalid filter parameter {field} = {value}: {reason}")]
    InvalidParameter {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// `decode` was given more bytes than one filter.
    #[error("{count} unexpected bytes after the end of the filter")]
    TrailingBytes {
        /// How many bytes follow the checksum.
        count: u64,
    },
    /// The reader failed.
    #[error("I/O error while reading a filter: {0}")]
    Io(#[from] io::Error),
}
