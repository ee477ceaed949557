//! URL canonicalization for deduplication: turn the many spellings of one URL into one string,
//! so that a URL-seen filter stores it once.
//!
//! A crawler meets the same page as `HTTP://Example.COM:80/a/./b?x=%7e#top` and
//! `http://example.com/a/b?x=~`; a deduplicator that compares raw strings crawls it twice. This
//! crate rewrites both to `http://example.com/a/b?x=~`, and never rewrites two URLs that a server
//! could answer differently into the same string (it does not lowercase paths, reorder queries,
//! strip `www.` or trailing slashes unless you ask for a rule that does).
//!
//! It is pure: no I/O, no global state, no allocation beyond the output (use
//! [`Canonicalizer::canonicalize_into`] to reuse one buffer).
//!
//! # Profiles
//!
//! | [`Profile`] | what it is |
//! |---|---|
//! | `crawler` (default) | WHATWG URL parsing + dedup-safe normalizations only |
//! | `w3lib` | Scrapy's `w3lib.url.canonicalize_url` (w3lib 2.5.0), byte for byte |
//! | `safebrowsing` | Google Safe Browsing v4 "URLs and Hashing" canonicalization |
//! | `none` | the input unchanged |
//!
//! The rules of each profile, why each is safe, the options and the measured speed are in
//! `docs/canonicalization.md`.
//!
//! # Examples
//!
//! One URL, default options for a profile:
//!
//! ```
//! use urlseen_canon::{canonicalize, Profile};
//!
//! let c = canonicalize("HTTP://Example.COM:80/a/./b?x=%7e#top", Profile::Crawler).unwrap();
//! assert_eq!(c, "http://example.com/a/b?x=~");
//!
//! let c = canonicalize("http://www.example.com/do?c=3&b=5&a=50", Profile::W3lib).unwrap();
//! assert_eq!(c, "http://www.example.com/do?a=50&b=5&c=3");
//!
//! let c = canonicalize("http://%31%36%38%2e%31%38%38%2e%39%39%2e%32%36/", Profile::SafeBrowsing);
//! assert_eq!(c.unwrap(), "http://168.188.99.26/");
//! ```
//!
//! A hot loop: one [`Canonicalizer`], one output buffer.
//!
//! ```
//! use urlseen_canon::{Canonicalizer, Options, Profile};
//!
//! let canon = Canonicalizer::new(Options {
//!     strip_tracking: true,
//!     sort_query: true,
//!     ..Options::new(Profile::Crawler)
//! });
//! let mut buf = String::new();
//! for raw in ["https://shop.example/p?id=7&utm_source=mail", "https://shop.example/p?id=7"] {
//!     canon.canonicalize_into(raw, &mut buf)?;
//!     assert_eq!(buf, "https://shop.example/p?id=7");
//! }
//! # Ok::<(), urlseen_canon::CanonError>(())
//! ```
//!
//! Errors say what is wrong:
//!
//! ```
//! use urlseen_canon::{canonicalize, CanonError, Profile};
//!
//! assert_eq!(canonicalize("/relative/link", Profile::Crawler), Err(CanonError::RelativeUrl));
//! assert!(matches!(
//!     canonicalize("mailto:someone@example.com", Profile::Crawler),
//!     Err(CanonError::UnsupportedScheme { .. })
//! ));
//! ```
//!
//! # Versioning
//!
//! [`CANON_VERSION`] is stored with every filter. Any change to the output of any profile for
//! any input (a rule, the tracking list, a dependency upgrade that changes IDNA tables) bumps
//! it, so a filter built with other canonical forms is never silently mixed with new ones. A
//! golden file (`data/canon/golden.tsv`) pins the outputs; its test fails on any change.
//!
//! # Quirks
//!
//! * `none` returns the input exactly, only refusing an empty string: it does not trim, has no
//!   length limit, and ignores all options.
//! * `w3lib` accepts what w3lib accepts, relative references and any scheme included, because
//!   its point is to reproduce Scrapy's fingerprints; the other profiles take absolute
//!   `http`, `https`, `ws`, `wss` and `ftp` URLs only.
//! * Every profile is idempotent (`c(c(u)) == c(u)`). Where the reference behaviour is not, the
//!   input is refused instead (a relative `w3lib` input such as `%65xample.com:`, see
//!   `docs/canonicalization.md`).
//! * Inputs are `&str`: byte strings that are not UTF-8 must be decoded (or rejected) first.

#![warn(missing_docs)]

mod crawler;
mod error;
mod pct;
mod profile;
mod safebrowsing;
mod tracking;
mod w3lib;

pub use error::{CanonError, MAX_ERROR_SNIPPET};
pub use profile::{Options, Profile};
pub use tracking::{TRACKING_PARAMS, TRACKING_PREFIXES};

/// Version of the canonical forms produced by this crate, stored with every filter.
///
/// Bumped whenever the output of any profile changes for any input. Version history:
///
/// * `1`: first release (profiles `crawler`, `w3lib`, `safebrowsing`, `none`).
pub const CANON_VERSION: u32 = 1;

/// Longest accepted input, in bytes after trimming surrounding whitespace: 8 KiB.
///
/// Longer "URLs" are refused with [`CanonError::TooLong`] by every profile except `none`. The
/// limit matches what servers accept in a request line (Apache's `LimitRequestLine` is 8190
/// bytes, nginx's default header buffer 8 KiB), so nothing fetchable is refused, and it bounds
/// the work per input (Safe Browsing's repeated unescaping is quadratic in the worst case).
pub const MAX_URL_LEN: usize = 8 * 1024;

/// A configured canonicalizer: [`Options`] plus nothing else.
///
/// Cheap to clone, `Send + Sync`; canonicalization takes `&self`, so one instance can serve
/// every thread.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Canonicalizer {
    options: Options,
}

impl Canonicalizer {
    /// A canonicalizer applying `options`.
    pub fn new(options: Options) -> Self {
        Canonicalizer { options }
    }

    /// The options this canonicalizer applies.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The canonical form of `input`.
    ///
    /// # Errors
    ///
    /// [`CanonError`] when the input is empty, too long, not an absolute URL of a supported
    /// scheme, or otherwise invalid for the profile (see each variant).
    ///
    /// # Examples
    ///
    /// ```
    /// use urlseen_canon::{Canonicalizer, Options, Profile};
    ///
    /// let c = Canonicalizer::new(Options::new(Profile::SafeBrowsing));
    /// assert_eq!(c.canonicalize("http://3279880203/blah").unwrap(), "http://195.127.0.11/blah");
    /// ```
    pub fn canonicalize(&self, input: &str) -> Result<String, CanonError> {
        let mut out = String::with_capacity(input.len() + 8);
        self.canonicalize_into(input, &mut out)?;
        Ok(out)
    }

    /// Clears `out` and writes the canonical form of `input` into it: lets hot loops reuse one
    /// buffer.
    ///
    /// # Errors
    ///
    /// As [`canonicalize`](Self::canonicalize); `out` is then empty.
    pub fn canonicalize_into(&self, input: &str, out: &mut String) -> Result<(), CanonError> {
        out.clear();
        let result = match self.options.profile {
            Profile::Crawler => crawler::canonicalize(&self.options, input, out),
            Profile::W3lib => w3lib::canonicalize(&self.options, input, out),
            Profile::SafeBrowsing => safebrowsing::canonicalize(input, out),
            Profile::None => {
                if input.is_empty() {
                    Err(CanonError::Empty)
                } else {
                    out.push_str(input);
                    Ok(())
                }
            }
        };
        if result.is_err() {
            out.clear();
        }
        result
    }
}

/// The canonical form of `input` under `profile` with that profile's default options
/// ([`Options::new`]).
///
/// # Errors
///
/// As [`Canonicalizer::canonicalize`].
///
/// # Examples
///
/// ```
/// use urlseen_canon::{canonicalize, Profile};
///
/// assert_eq!(
///     canonicalize("https://www.Example.com/Path/?b=2&a=1#frag", Profile::Crawler).unwrap(),
///     "https://www.example.com/Path/?b=2&a=1"
/// );
/// ```
pub fn canonicalize(input: &str, profile: Profile) -> Result<String, CanonError> {
    Canonicalizer::new(Options::new(profile)).canonicalize(input)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonicalizer_is_send_sync_and_cheap() {
        fn assert_send_sync<T: Send + Sync + Clone>() {}
        assert_send_sync::<Canonicalizer>();
        assert_send_sync::<CanonError>();
    }

    #[test]
    fn into_clears_buffer_on_success_and_error() {
        let c = Canonicalizer::default();
        let mut buf = String::from("stale");
        c.canonicalize_into("https://example.com", &mut buf).unwrap();
        assert_eq!(buf, "https://example.com/");
        assert!(c.canonicalize_into("nope", &mut buf).is_err());
        assert!(buf.is_empty());
    }

    #[test]
    fn none_profile_is_identity() {
        let c = Canonicalizer::new(Options::new(Profile::None));
        for s in [" HTTP://X/#f ", "not a url", "\r", "é"] {
            assert_eq!(c.canonicalize(s).unwrap(), s);
        }
        assert_eq!(c.canonicalize(""), Err(CanonError::Empty));
    }
}
