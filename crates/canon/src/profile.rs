//! Profiles (which rule set) and options (the switches within it).

use std::fmt;
use std::str::FromStr;

use crate::CanonError;

/// A named canonicalization rule set.
///
/// The names (`crawler`, `w3lib`, `safebrowsing`, `none`) are a contract: they are stored with
/// every filter and typed on command lines, so they never change meaning silently. Changes to the
/// output of a profile bump [`CANON_VERSION`](crate::CANON_VERSION).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Profile {
    /// WHATWG parsing plus dedup-safe normalizations only (the default). Never merges URLs
    /// that a server could answer differently.
    #[default]
    Crawler,
    /// Scrapy's `w3lib.url.canonicalize_url(url)`, byte for byte: sorted query arguments,
    /// `+` for spaces, fragment dropped.
    W3lib,
    /// Google Safe Browsing v4 "URLs and Hashing" canonicalization.
    SafeBrowsing,
    /// The input, unchanged (only an empty input is an error).
    None,
}

impl Profile {
    /// Every profile, in a stable order (the order of the documentation).
    pub const ALL: [Profile; 4] =
        [Profile::Crawler, Profile::W3lib, Profile::SafeBrowsing, Profile::None];

    /// The valid profile names, comma-separated, as listed in [`CanonError::UnknownProfile`].
    pub const NAMES: &'static str = "crawler, w3lib, safebrowsing, none";

    /// The stable lowercase name: `"crawler"`, `"w3lib"`, `"safebrowsing"` or `"none"`.
    ///
    /// # Examples
    ///
    /// ```
    /// use urlseen_canon::Profile;
    /// assert_eq!(Profile::SafeBrowsing.name(), "safebrowsing");
    /// assert_eq!("safebrowsing".parse::<Profile>(), Ok(Profile::SafeBrowsing));
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Profile::Crawler => "crawler",
            Profile::W3lib => "w3lib",
            Profile::SafeBrowsing => "safebrowsing",
            Profile::None => "none",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Profile {
    type Err = CanonError;

    /// Parses a profile name, ignoring ASCII case (`"W3lib"` is `w3lib`).
    ///
    /// # Errors
    ///
    /// [`CanonError::UnknownProfile`] listing the valid names.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Profile::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| CanonError::UnknownProfile { name: crate::error::snippet(s) })
    }
}

/// Switches that refine a [`Profile`].
///
/// Not every profile honours every switch; the table says which (anything else is ignored):
///
/// | option              | `crawler` | `w3lib`              | `safebrowsing` | `none` |
/// |---------------------|-----------|----------------------|----------------|--------|
/// | `keep_fragments`    | yes       | yes (as w3lib)       | no (spec drops it) | no |
/// | `keep_blank_values` | yes       | yes (as w3lib)       | no             | no     |
/// | `sort_query`        | yes       | always sorted        | no             | no     |
/// | `strip_tracking`    | yes       | yes (an extension)   | no             | no     |
///
/// # Examples
///
/// ```
/// use urlseen_canon::{Canonicalizer, Options, Profile};
///
/// let c = Canonicalizer::new(Options { strip_tracking: true, ..Options::new(Profile::Crawler) });
/// assert_eq!(
///     c.canonicalize("https://example.com/a?id=7&utm_source=news").unwrap(),
///     "https://example.com/a?id=7"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Which rule set to apply.
    pub profile: Profile,
    /// Keep the `#fragment` (default `false`: fragments never reach the server).
    pub keep_fragments: bool,
    /// Keep query arguments whose value is empty, `k=` or a bare `k` (default `true`, as
    /// w3lib's default). When `false`, `crawler` and `w3lib` drop them.
    pub keep_blank_values: bool,
    /// Sort the query arguments by key bytes, then value bytes (stable; default `false`).
    /// `w3lib` always sorts, as w3lib does.
    pub sort_query: bool,
    /// Remove tracking parameters ([`TRACKING_PARAMS`](crate::TRACKING_PARAMS) and keys starting
    /// with one of [`TRACKING_PREFIXES`](crate::TRACKING_PREFIXES)); default `false`.
    pub strip_tracking: bool,
}

impl Options {
    /// The default options for `profile`: fragments dropped, blank values kept, query order
    /// kept (except in `w3lib`, which always sorts), tracking parameters kept.
    pub fn new(profile: Profile) -> Self {
        Options {
            profile,
            keep_fragments: false,
            keep_blank_values: true,
            sort_query: false,
            strip_tracking: false,
        }
    }
}

impl Default for Options {
    /// The default options of the default profile ([`Profile::Crawler`]).
    fn default() -> Self {
        Options::new(Profile::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in Profile::ALL {
            assert_eq!(p.name().parse::<Profile>(), Ok(p));
            assert_eq!(p.to_string(), p.name());
            assert!(Profile::NAMES.contains(p.name()));
        }
    }

    #[test]
    fn unknown_name_lists_valid_ones() {
        assert_eq!("Crawler".parse::<Profile>(), Ok(Profile::Crawler));
        let err = "crawl".parse::<Profile>().unwrap_err();
        assert_eq!(err, CanonError::UnknownProfile { name: "crawl".into() });
        assert_eq!(
            err.to_string(),
            "unknown canonicalization profile \"crawl\": valid profiles are crawler, w3lib, \
             safebrowsing, none"
        );
    }

    #[test]
    fn defaults() {
        let o = Options::default();
        assert_eq!(o.profile, Profile::Crawler);
        assert!(!o.keep_fragments && o.keep_blank_values && !o.sort_query && !o.strip_tracking);
        assert_eq!(Options::new(Profile::W3lib).profile, Profile::W3lib);
    }
}
