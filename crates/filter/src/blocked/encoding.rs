//! A blocked filter's encoding: the shared header of [`crate::codec`] and the blocks in order.

use std::io::{self, Read, Write};

use super::*;
use crate::Error;
use crate::codec::{self, Decoder, Encoder, FilterKind, Header};

impl BlockedBloom {
    /// Writes the encoding (see [`codec`]): kind 2 ([`FilterKind::Blocked`]) for the scattered
    /// scheme, 5 ([`FilterKind::BlockedSectorized`]) for the sectorized one; payload = the blocks
    /// in order, each as 8 u64 words, little-endian (m/8 bytes).
    ///
    /// # Errors
    /// Any error of `w`.
    pub fn write_to<W: Write>(&self, mut w: W) -> io::Result<()> {
        let header = Header {
            kind: self.scheme.kind(),
            num_hashes: self.num_hashes,
            num_bits: self.num_bits(),
            seed: self.seed,
            len: self.len,
            payload_len: self.num_bits() / 8,
        };
        let mut e = Encoder::new(&mut w, header)?;
        if self.is_allocated() {
            e.u64s(self.block_words().iter().copied())?;
        } else {
            // The same bytes as an allocated filter with no bit set: the format does not know.
            e.u64s(std::iter::repeat_n(0, self.num_blocks as usize * WORDS))?;
        }
        e.finish()
    }

    /// The encoding as bytes (see [`write_to`](Self::write_to)).
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(codec::HEADER_LEN + (self.num_bits() / 8) as usize + 8);
        // Writing to a Vec cannot fail.
        let _ = self.write_to(&mut out);
        out
    }

    /// Reads and fully validates an encoding written by [`write_to`](Self::write_to), of
    /// either scheme (the filter keeps the scheme it was written with).
    ///
    /// # Errors
    /// An [`Error`] for a wrong magic, version or kind, out-of-range parameters (bits not a
    /// multiple of 512, ...), a payload length that does not match them, a short input, a
    /// checksum mismatch, or an I/O error.
    pub fn read_from<R: Read>(mut r: R) -> Result<Self, Error> {
        Self::read_decoder(Decoder::new_any(&mut r, FilterKind::Blocked, SECTORIZED_KIND)?)
    }

    /// Decodes exactly one filter from `bytes` (trailing bytes are an error).
    ///
    /// # Errors
    /// As [`read_from`](Self::read_from), plus [`Error::TrailingBytes`].
    pub fn decode(bytes: &[u8]) -> Result<Self, Error> {
        codec::decode_slice_any(bytes, FilterKind::Blocked, SECTORIZED_KIND, Self::read_decoder)
    }

    fn read_decoder<R: Read>(mut d: Decoder<'_, R>) -> Result<Self, Error> {
        let h = d.header;
        let scheme = if h.kind == FilterKind::BlockedSectorized {
            BlockScheme::Sectorized
        } else {
            BlockScheme::Scattered
        };
        if !(BLOCK_BITS..=MAX_BITS).contains(&h.num_bits) || !h.num_bits.is_multiple_of(BLOCK_BITS)
        {
            return Err(codec::invalid(
                "num_bits",
                h.num_bits,
                "must be a multiple of 512 in 512..=2^40",
            ));
        }
        if !(1..=MAX_HASHES).contains(&h.num_hashes) {
            return Err(codec::invalid("num_hashes", h.num_hashes.into(), "must be in 1..=64"));
        }
        let count = h.num_bits / 64;
        d.check_payload_len(count * 8)?;
        let words = d.u64s(count, WORDS - 1)?;
        d.finish()?;
        let num_blocks = h.num_bits / BLOCK_BITS;
        if words.iter().all(|&w| w == 0) {
            // Nothing set (a leaf that recorded nothing yet): give the memory back until the
            // first insert, as a new filter would.
            let mut f = Self::unallocated(num_blocks, h.num_hashes, h.seed, scheme);
            f.len = h.len;
            return Ok(f);
        }
        let (words, offset) = Words::from_decoded(words);
        Ok(BlockedBloom {
            words,
            offset,
            num_blocks,
            num_hashes: h.num_hashes,
            seed: h.seed,
            len: h.len,
            scheme,
        })
    }
}
