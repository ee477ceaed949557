//! Arguments shared by several subcommands.

use urlseen_canon::{Options, Profile};

/// How URLs are canonicalized before they are compared.
#[derive(Debug, Clone, clap::Args)]
pub struct CanonArgs {
    /// Canonicalization profile: crawler, w3lib, safebrowsing or none.
    #[arg(long, default_value = "crawler", value_parser = parse_profile)]
    pub profile: Profile,
    /// Keep `#fragment`s (dropped by default: they never reach the server).
    #[arg(long)]
    pub keep_fragments: bool,
    /// Keep query arguments with empty values (`?a=&b=1`). This is already the default, as in
    /// w3lib; the flag exists for scripts that spell it out.
    #[arg(long, conflicts_with = "drop_blank_values")]
    pub keep_blank_values: bool,
    /// Drop query arguments with empty values.
    #[arg(long)]
    pub drop_blank_values: bool,
    /// Sort query arguments (w3lib always does; off by default for crawler, since some sites
    /// give order meaning).
    #[arg(long)]
    pub sort_query: bool,
    /// Remove tracking parameters (utm_*, fbclid, gclid, …; see docs/canonicalization.md).
    #[arg(long)]
    pub strip_tracking: bool,
}

impl CanonArgs {
    /// The canonicalization options these arguments ask for.
    pub fn options(&self) -> Options {
        let mut options = Options::new(self.profile);
        options.keep_fragments |= self.keep_fragments;
        if self.keep_blank_values {
            options.keep_blank_values = true;
        }
        if self.drop_blank_values {
            options.keep_blank_values = false;
        }
        options.sort_query |= self.sort_query;
        options.strip_tracking |= self.strip_tracking;
        options
    }
}

fn parse_profile(s: &str) -> Result<Profile, String> {
    s.parse().map_err(|e: urlseen_canon::CanonError| e.to_string())
}

/// Parses numbers written the way people write big counts: `1000000`, `1_000_000`, `1e6`.
pub fn parse_count(s: &str) -> Result<u64, String> {
    let clean: String = s.chars().filter(|&c| c != '_' && c != ',').collect();
    if let Ok(n) = clean.parse::<u64>() {
        return Ok(n);
    }
    match clean.parse::<f64>() {
        Ok(f) if f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f <= u64::MAX as f64 => {
            Ok(f as u64)
        }
        _ => Err(format!("{s:?} is not a whole number (examples: 1000000, 1_000_000, 1e6)")),
    }
}

/// Parses a duration in seconds (`30`, `0.5`), zero or more.
pub fn parse_seconds(s: &str) -> Result<std::time::Duration, String> {
    match s.parse::<f64>() {
        Ok(f) if (0.0..1e9).contains(&f) => Ok(std::time::Duration::from_secs_f64(f)),
        _ => Err(format!("{s:?} is not a number of seconds (examples: 30, 0.5)")),
    }
}

/// Parses a probability strictly between 0 and 1.
pub fn parse_fpr(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if p > 0.0 && p < 1.0 => Ok(p),
        _ => Err(format!("{s:?} is not a probability between 0 and 1 (example: 0.01)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_parse_in_every_common_spelling() {
        assert_eq!(parse_count("1000000"), Ok(1_000_000));
        assert_eq!(parse_count("1_000_000"), Ok(1_000_000));
        assert_eq!(parse_count("1e6"), Ok(1_000_000));
        assert!(parse_count("1.5").is_err());
        assert!(parse_count("-3").is_err());
        assert!(parse_count("lots").is_err());
    }

    #[test]
    fn seconds_parse_whole_and_fractional() {
        assert_eq!(parse_seconds("30"), Ok(std::time::Duration::from_secs(30)));
        assert_eq!(parse_seconds("0.5"), Ok(std::time::Duration::from_millis(500)));
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("soon").is_err());
    }

    #[test]
    fn fpr_must_be_a_probability() {
        assert_eq!(parse_fpr("0.01"), Ok(0.01));
        assert!(parse_fpr("0").is_err());
        assert!(parse_fpr("1").is_err());
        assert!(parse_fpr("nan").is_err());
    }
}
