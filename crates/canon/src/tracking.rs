//! The tracking parameters that `strip_tracking` removes.
//!
//! The list is deliberately conservative: only parameters that analytics and ad platforms append
//! to *someone else's* URL to attribute a click, and that no site uses to select content. A
//! parameter that some site might read to pick what it shows (`ref`, `source`, `lang`, `si`,
//! `s`, `share`, `from`, `campaign`, …) is not on it, however often it is used for tracking:
//! removing it could merge two URLs that serve different pages, which a deduplicator must never
//! do. Changing this list changes canonical output, so it bumps
//! [`CANON_VERSION`](crate::CANON_VERSION).

/// Query parameter names (exact, case-sensitive match on the key after escape normalization)
/// removed by [`Options::strip_tracking`](crate::Options::strip_tracking).
///
/// | parameter                  | set by                                          |
/// |----------------------------|-------------------------------------------------|
/// | `fbclid`                   | Meta (Facebook, Instagram) outbound link click ID |
/// | `gclid`, `gclsrc`, `dclid`, `gbraid`, `wbraid`, `gad_source`, `srsltid` | Google Ads / Display / Merchant Center auto-tagging |
/// | `msclkid`                  | Microsoft Advertising click ID                  |
/// | `yclid`                    | Yandex Direct click ID                          |
/// | `twclid`                   | X (Twitter) Ads click ID                        |
/// | `ttclid`                   | TikTok Ads click ID                             |
/// | `li_fat_id`                | LinkedIn Ads first-party click ID               |
/// | `igshid`                   | Instagram share ID                              |
/// | `mc_cid`, `mc_eid`         | Mailchimp campaign and subscriber IDs           |
/// | `_hsenc`, `_hsmi`          | HubSpot email tracking                          |
/// | `mkt_tok`                  | Marketo email tracking token                    |
/// | `_ga`, `_gl`               | Google Analytics cross-domain linker            |
/// | `oly_anon_id`, `oly_enc_id` | Omeda email tracking                           |
/// | `vero_id`, `vero_conv`     | Vero email tracking                             |
pub const TRACKING_PARAMS: &[&str] = &[
    "fbclid",
    "gclid",
    "gclsrc",
    "dclid",
    "gbraid",
    "wbraid",
    "gad_source",
    "srsltid",
    "msclkid",
    "yclid",
    "twclid",
    "ttclid",
    "li_fat_id",
    "igshid",
    "mc_cid",
    "mc_eid",
    "_hsenc",
    "_hsmi",
    "mkt_tok",
    "_ga",
    "_gl",
    "oly_anon_id",
    "oly_enc_id",
    "vero_id",
    "vero_conv",
];

/// Key prefixes removed by [`Options::strip_tracking`](crate::Options::strip_tracking):
/// `utm_` covers Google Analytics' UTM family (`utm_source`, `utm_medium`, `utm_campaign`,
/// `utm_term`, `utm_content`, `utm_id`, `utm_source_platform`, `utm_creative_format`,
/// `utm_marketing_tactic`, and the non-standard ones tools invent).
pub const TRACKING_PREFIXES: &[&str] = &["utm_"];

/// Whether a query key (raw bytes as they appear in the canonical query) is a tracking key.
pub(crate) fn is_tracking_key(key: &[u8]) -> bool {
    TRACKING_PREFIXES.iter().any(|p| key.starts_with(p.as_bytes()))
        || TRACKING_PARAMS.iter().any(|p| key == p.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_exact_names_and_prefixes() {
        for k in ["utm_source", "utm_x", "fbclid", "gclid", "_ga", "mc_eid"] {
            assert!(is_tracking_key(k.as_bytes()), "{k}");
        }
        for k in ["utm", "UTM_SOURCE", "fbclid2", "ref", "id", "page", "gclid_", "q", ""] {
            assert!(!is_tracking_key(k.as_bytes()), "{k}");
        }
    }

    #[test]
    fn list_is_sorted_sanely() {
        // No duplicates, no empty names, all lowercase ASCII: the list is matched on raw bytes.
        let mut seen = std::collections::HashSet::new();
        for p in TRACKING_PARAMS.iter().chain(TRACKING_PREFIXES) {
            assert!(seen.insert(*p), "duplicate {p}");
            assert!(!p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
        }
    }
}
