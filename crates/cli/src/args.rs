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

/// A recrawl window as people write it: a number and a unit, `30d`, `12h`, `90m`, `3s`,
/// `500ms`, `2w` (a bare number is seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window(pub std::time::Duration);

impl std::str::FromStr for Window {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        parse_duration(s).map(Window)
    }
}

/// Parses `30d`, `12h`, `90m`, `3s`, `500ms`, `2w` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let bad = || format!("{s:?} is not a duration (examples: 30d, 12h, 90m, 3s, 500ms)");
    let t = s.trim();
    let digits = t.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let ms_per: u64 = match &t[digits.len()..] {
        "ms" => 1,
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 7 * 86_400_000,
        _ => return Err(bad()),
    };
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let ms = n.checked_mul(ms_per).filter(|&ms| ms > 0).ok_or_else(bad)?;
    Ok(std::time::Duration::from_millis(ms))
}

/// A number of seconds as `12d 3h`, `2h 5m`, `3.25s`: the two largest units.
pub fn format_duration(secs: f64) -> String {
    let whole = secs.max(0.0) as u64;
    let (d, h, m, s) = (whole / 86_400, whole / 3_600 % 24, whole / 60 % 60, whole % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{secs:.2}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

/// `--recrawl-after` and `--recrawl-generations`, for a new namespace.
#[derive(Debug, Default, Clone, clap::Args)]
pub struct RecrawlArgs {
    /// Recrawl window, for a new namespace: a URL recorded more than this long ago is new
    /// again (`30d`, `12h`, `3s`). An existing namespace keeps its own window.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub recrawl_after: Option<std::time::Duration>,
    /// With --recrawl-after: generations of the window (default 8). A URL is new again
    /// between W − W/g and W after it was recorded; each generation is a filter of its own.
    #[arg(long, value_name = "G", requires = "recrawl_after")]
    pub recrawl_generations: Option<u32>,
}

impl RecrawlArgs {
    /// Sets the window of `options`.
    pub fn apply(&self, options: &mut urlseen_engine::NamespaceOptions) {
        options.recrawl_after = self.recrawl_after;
        if let Some(g) = self.recrawl_generations {
            options.generations = g;
        }
    }
}

/// `--ttl`, for a new namespace.
#[derive(Debug, Default, Clone, clap::Args)]
pub struct TtlArgs {
    /// Lifetime of a new namespace (`24h`, `7d`): it expires this long after it is created,
    /// as a Redis key given `EXPIRE`, and its files are removed (with --redis: all of its
    /// Redis keys expire). An existing namespace keeps its own lifetime.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub ttl: Option<std::time::Duration>,
}

impl TtlArgs {
    /// The namespace `name` of `db`, created with `options` (and the lifetime) if it does not
    /// exist.
    ///
    /// # Errors
    /// As [`urlseen_engine::Db::create_namespace_with_expiry`].
    pub fn namespace(
        &self,
        db: &urlseen_engine::Db,
        name: &str,
        options: urlseen_engine::NamespaceOptions,
    ) -> urlseen_engine::Result<std::sync::Arc<urlseen_engine::Namespace>> {
        let Some(ttl) = self.ttl else { return db.namespace_or_create(name, options) };
        if let Some(ns) = db.namespace(name) {
            return Ok(ns);
        }
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let at = urlseen_engine::Expiry::At(db.clock().now_millis().saturating_add(ms));
        match db.create_namespace_with_expiry(name, options.clone(), at) {
            Err(urlseen_engine::Error::NamespaceExists(_)) => db.namespace_or_create(name, options),
            other => other,
        }
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
    fn durations_parse_with_their_units() {
        let ms = |s: &str| parse_duration(s).map(|d| d.as_millis());
        assert_eq!(ms("30d"), Ok(30 * 86_400_000));
        assert_eq!(ms("12h"), Ok(12 * 3_600_000));
        assert_eq!(ms("3s"), Ok(3_000));
        assert_eq!(ms("45"), Ok(45_000));
        assert_eq!(ms("500ms"), Ok(500));
        assert_eq!(ms("2w"), Ok(14 * 86_400_000));
        for bad in ["", "0s", "d", "3x", "-1s", "1.5h", "99999999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
    }

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
