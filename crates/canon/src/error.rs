//! The one error type of this crate.

/// Why a URL could not be canonicalized.
///
/// Every variant says what is wrong with the input (or the profile name) and carries the part of
/// the input that caused it, clipped to [`MAX_ERROR_SNIPPET`](crate::MAX_ERROR_SNIPPET) bytes so
/// that a hostile multi-kilobyte URL never turns into a multi-kilobyte log line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CanonError {
    /// The input is empty, or only ASCII whitespace (control characters too, for `w3lib`).
    #[error("empty URL: nothing left to canonicalize after trimming surrounding whitespace")]
    Empty,

    /// The input is longer than the profile accepts (see [`MAX_URL_LEN`](crate::MAX_URL_LEN)).
    #[error("URL is {len} bytes long, more than the maximum of {max} bytes")]
    TooLong {
        /// Length of the input in bytes, after trimming surrounding whitespace.
        len: usize,
        /// The limit that was exceeded.
        max: usize,
    },

    /// The URL parser rejected the input for a reason not covered by a more specific variant.
    #[error("invalid URL: {reason}")]
    InvalidUrl {
        /// The parser's explanation.
        reason: String,
    },

    /// The input has no scheme, so it can only be resolved against a base URL.
    #[error(
        "relative URL (no scheme such as \"https:\"): resolve it against the URL of the page it \
         was found on before canonicalizing"
    )]
    RelativeUrl,

    /// The scheme is not one the profile canonicalizes (for example `mailto:`, `javascript:`,
    /// `data:`, `file:`).
    #[error(
        "unsupported scheme \"{scheme}\": this profile only canonicalizes http, https, ws, wss \
         and ftp URLs"
    )]
    UnsupportedScheme {
        /// The scheme, lowercased, without the colon.
        scheme: String,
    },

    /// The host is missing, or is not a valid domain name or IP address.
    #[error("invalid host \"{host}\": {reason}")]
    InvalidHost {
        /// The host as written in the input (possibly empty).
        host: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The port is not a number from 0 to 65535.
    #[error("invalid port in \"{authority}\": a port must be a number from 0 to 65535")]
    InvalidPort {
        /// The authority (`host:port`) as written in the input.
        authority: String,
    },

    /// A profile name did not match any [`Profile`](crate::Profile).
    #[error(
        "unknown canonicalization profile \"{name}\": valid profiles are {}",
        crate::Profile::NAMES
    )]
    UnknownProfile {
        /// The name that was given.
        name: String,
    },
}

/// Longest snippet of the input quoted in an error, in bytes.
pub const MAX_ERROR_SNIPPET: usize = 256;

/// Clips `s` to at most [`MAX_ERROR_SNIPPET`] bytes on a character boundary, marking the cut.
pub(crate) fn snippet(s: &str) -> String {
    if s.len() <= MAX_ERROR_SNIPPET {
        return s.to_owned();
    }
    let mut end = MAX_ERROR_SNIPPET;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = String::with_capacity(end + 3);
    out.push_str(&s[..end]);
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippet_clips_on_char_boundary() {
        let long = "é".repeat(300);
        let clipped = snippet(&long);
        assert!(clipped.len() <= MAX_ERROR_SNIPPET + '…'.len_utf8());
        assert!(clipped.ends_with('…'));
        assert_eq!(snippet("short"), "short");
    }

    #[test]
    fn messages_say_what_is_wrong() {
        let e = CanonError::TooLong { len: 9000, max: 8192 };
        assert_eq!(e.to_string(), "URL is 9000 bytes long, more than the maximum of 8192 bytes");
        let e = CanonError::UnsupportedScheme { scheme: "mailto".into() };
        assert!(e.to_string().contains("\"mailto\""));
    }
}
