//! What a namespace is made of: sizing, canonicalization, seed, split policy.

use urlseen_filter::plan;

use crate::error::{Error, Result};

mod fsync;
mod meta;

pub use fsync::Fsync;
pub(crate) use meta::{decode_meta, encode_meta};

/// The default seed: fixed, so two processes that open the same namespace with default options
/// compute the same fingerprints and the same bits.
pub const DEFAULT_SEED: u64 = 0x7572_6c73_6565_6e31; // "urlseen1"

/// Leaves never get bigger than this unless asked: 2²³ bits (1 MiB) keeps a leaf one Redis
/// string of modest size and a split (re-hashing one leaf) short.
pub const DEFAULT_MAX_LEAF_BITS: u64 = 1 << 23;

/// Leaves never get smaller than this: one 512-bit block of the blocked filter. A namespace
/// made for a few items (RedisBloom's default key holds 100) is that small, and grows by splits.
pub const MIN_LEAF_BITS: u64 = 1 << 9;

/// How a namespace is built. Start from [`NamespaceOptions::default`] and override fields.
///
/// ```
/// use urlseen_engine::NamespaceOptions;
/// let opts = NamespaceOptions { capacity: 10_000, fpr: 0.001, ..NamespaceOptions::default() };
/// assert!(opts.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceOptions {
    /// Expected number of URLs: sizes the initial tree. Not a cap: the tree splits past it.
    pub capacity: u64,
    /// The false-positive bound `f_max` every leaf is kept under.
    pub fpr: f64,
    /// Bits per leaf filter (`m`). `None` picks the smaller of what `capacity` needs and
    /// [`DEFAULT_MAX_LEAF_BITS`], so a small namespace stays small.
    pub leaf_bits: Option<u64>,
    /// How URLs are canonicalized before hashing.
    pub canon: urlseen_canon::Options,
    /// Seed of the fingerprint, the probes and every level's location hash.
    pub seed: u64,
    /// When and how leaves split.
    pub split: SplitPolicy,
    /// Exact mode: every Bloom positive is confirmed against a fingerprint store, so the only
    /// false positives left are 64-bit fingerprint collisions.
    pub exact: bool,
    /// Counting filters (4-bit counters, seed 004), so URLs can be forgotten. Implies exact
    /// mode (seed 004's recount of a saturated counter reads the store). A counting namespace
    /// is seed 004's IMP-CB: generations of counting filters that double as they fill (seed
    /// 002), in place of the DSBF's leaves, which cannot forget.
    pub counting: bool,
    /// The recrawl window `W`: a URL last recorded more than this long ago is answered new
    /// (and recorded anew). `None` (the default): recorded URLs stay seen forever. The
    /// namespace then keeps [`Self::generations`] age-partitioned generations, each its own
    /// DSBF sized so that their union stays under `fpr` (see [`crate::recrawl`]). Whole
    /// milliseconds, divisible by `generations`. Not with `counting`.
    pub recrawl_after: Option<std::time::Duration>,
    /// Generations of a recrawl window (`g`): a URL is new again between `W − W/g` and `W`
    /// after it was recorded. Ignored without [`Self::recrawl_after`].
    pub generations: u32,
    /// Keep every recorded URL's canonical text in a journal on disk (about the URL's length
    /// plus 14 bytes per distinct URL; in RAM a fixed 5 MiB or so, except for a namespace
    /// kept on the heap, `Db::in_memory` or counting without a data directory, whose journal
    /// is on the heap too), so that
    /// [`Namespace::forget_prefix`](crate::Namespace::forget_prefix) can forget the URLs that
    /// start with a prefix. Fixed when the namespace is created. See `docs/forget.md`.
    pub keep_urls: bool,
}

/// Generations of a recrawl window unless asked: precision `W/8`.
pub const DEFAULT_GENERATIONS: u32 = 8;

/// Most generations a window may have.
pub const MAX_GENERATIONS: u32 = 1024;

/// Longest window: 100 years, in milliseconds.
pub const MAX_WINDOW_MS: u64 = 100 * 365 * 24 * 3600 * 1000;

/// The FPR bound each of `g` generations is kept under so that their union stays under `fpr`:
/// `1 − (1 − fpr)^(1/g)` (slightly above `fpr / g`).
///
/// ```
/// let f = urlseen_engine::recrawl::generation_fpr(0.01, 8);
/// assert!((1.0 - (1.0 - f).powi(8) - 0.01).abs() < 1e-12);
/// ```
pub fn generation_fpr(fpr: f64, g: u32) -> f64 {
    -(f64::ln_1p(-fpr) / f64::from(g.max(1))).exp_m1()
}

impl Default for NamespaceOptions {
    fn default() -> Self {
        NamespaceOptions {
            capacity: 1_000_000,
            fpr: 0.01,
            leaf_bits: None,
            canon: urlseen_canon::Options::default(),
            seed: DEFAULT_SEED,
            split: SplitPolicy::default(),
            exact: false,
            counting: false,
            recrawl_after: None,
            generations: DEFAULT_GENERATIONS,
            keep_urls: false,
        }
    }
}

impl NamespaceOptions {
    /// Checks every option and says which one is wrong.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] naming the first bad option.
    pub fn validate(&self) -> Result<()> {
        let bad = |name, reason: String| Err(Error::InvalidOption { name, reason });
        if self.capacity == 0 {
            return bad("capacity", "must be at least 1".into());
        }
        if !(self.fpr > 0.0 && self.fpr < 1.0) {
            return bad("fpr", format!("must be between 0 and 1 (exclusive), got {}", self.fpr));
        }
        if self.fpr < 1e-12 {
            return bad("fpr", format!("{:e} is below the supported minimum 1e-12", self.fpr));
        }
        if let Some(m) = self.leaf_bits
            && !(MIN_LEAF_BITS..=1 << 40).contains(&m)
        {
            return bad("leaf_bits", format!("must be in {MIN_LEAF_BITS}..=2^40, got {m}"));
        }
        self.split.validate()?;
        if self.keep_urls && self.recrawl_after.is_some() {
            return bad(
                "keep_urls",
                "a namespace with a recrawl window cannot keep its URLs yet (its URLs expire \
                 with their generations)"
                    .into(),
            );
        }
        self.validate_recrawl()
    }

    fn validate_recrawl(&self) -> Result<()> {
        let bad = |name, reason: String| Err(Error::InvalidOption { name, reason });
        let Some(window) = self.recrawl_after else { return Ok(()) };
        if !(1..=MAX_GENERATIONS).contains(&self.generations) {
            let max = MAX_GENERATIONS;
            return bad("generations", format!("must be in 1..={max}, got {}", self.generations));
        }
        let ms = window.as_millis();
        if window.subsec_nanos() % 1_000_000 != 0 || ms == 0 {
            return bad(
                "recrawl_after",
                format!("must be whole milliseconds, at least 1 ms, got {window:?}"),
            );
        }
        if ms > u128::from(MAX_WINDOW_MS) {
            return bad("recrawl_after", format!("{window:?} is longer than 100 years"));
        }
        if ms % u128::from(self.generations) != 0 {
            return bad(
                "recrawl_after",
                format!(
                    "{ms} ms is not divisible into {} generations of whole milliseconds",
                    self.generations
                ),
            );
        }
        if self.counting {
            return bad("recrawl_after", "a counting namespace has no recrawl window".into());
        }
        Ok(())
    }

    /// The options of one generation of a recrawl window: `1/g` of the capacity, and the FPR
    /// bound `1 − (1 − fpr)^(1/g)` that keeps the union of `g` generations under `fpr` (see
    /// [`generation_fpr`]). Without a window, the options themselves.
    pub fn generation_options(&self) -> NamespaceOptions {
        let Some(_) = self.recrawl_after else { return self.clone() };
        let g = self.generations.max(1);
        NamespaceOptions {
            capacity: self.capacity.div_ceil(u64::from(g)).max(1),
            fpr: generation_fpr(self.fpr, g),
            recrawl_after: None,
            generations: DEFAULT_GENERATIONS,
            ..self.clone()
        }
    }

    /// Whether Bloom positives are confirmed against a fingerprint store (`exact`, or
    /// `counting`, which implies it).
    pub fn is_exact(&self) -> bool {
        self.exact || self.counting
    }

    /// The leaf size this namespace uses: [`Self::leaf_bits`], or the automatic choice.
    pub fn effective_leaf_bits(&self) -> u64 {
        if self.recrawl_after.is_some() {
            // The generations' leaves: what a window's options store is what they use.
            return self.generation_options().effective_leaf_bits();
        }
        let m = self.leaf_bits.unwrap_or_else(|| {
            // Room for `capacity` below the split point, which is `threshold` of what formula 4
            // gives: a namespace created for n URLs holds n before its first split.
            let below_split = (self.capacity as f64 / self.split.threshold).ceil() as u64;
            let (needed, _) = plan::blocked_bits(below_split.max(1), self.fpr);
            needed.clamp(MIN_LEAF_BITS, DEFAULT_MAX_LEAF_BITS)
        });
        m.div_ceil(512) * 512
    }
}

/// The share of a leaf's capacity (formula 4) at which it splits unless asked otherwise. At
/// 1.0 a leaf about to split measures its FPR right at `f_max`: a filter at exactly its
/// capacity measured 1.104% for 1% in RedisBloom's `test_error_rate` (10,240 samples), and
/// while it splits its frozen filter and its children answer together, above the bound. At
/// 0.93 a leaf's FPR at its split point is 0.74 of `f_max` at 1% (0.70 at 0.1%, 0.86 at 10%:
/// `plan::blocked_fpr`), which leaves room for the children of a split under way and for the
/// sampling error of a few thousand samples, for 7.5% more bits per URL. Namespaces keep the
/// threshold they were created with (it is in their meta), so older ones keep 1.0.
pub const DEFAULT_SPLIT_THRESHOLD: f64 = 0.93;

/// When leaves split and what a split makes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SplitPolicy {
    /// Children per split (the seed's `c` for splits). At least 2. More children means fewer
    /// splits but emptier leaves right after one: children start at `1/fanout` of capacity.
    pub fanout: u32,
    /// Split when a leaf holds this fraction of its capacity `u` (formula 4). 1.0 splits exactly
    /// when the leaf's FPR would pass `f_max`; lower values trade memory for headroom. The
    /// default, [`DEFAULT_SPLIT_THRESHOLD`], leaves the headroom that keeps the bound while a
    /// split is under way and under the sampling error users measure with.
    pub threshold: f64,
    /// Fingerprints re-hashed per migration step. A step holds the tree's shared lock and the
    /// locks of the children it writes to, so this bounds how long a split blocks anything: a
    /// batch insert locks every leaf its chunk reaches, the children among them, and waits
    /// for the step. The default and the most a step takes in process is 2,048, about half of
    /// such a chunk (8,192, the default before, left the inserting thread waiting for half of a
    /// split wave, docs/benchmarks.md; a namespace saved with it migrates in steps of 2,048).
    /// The frozen log is read several steps at a time.
    pub step: usize,
    /// Who migrates a splitting leaf's fingerprints into its children.
    pub mode: SplitMode,
    /// Each child's filter has this many times its parent's bits, up to
    /// [`DEFAULT_MAX_LEAF_BITS`] (or the first leaves' size, if larger), as RedisBloom's
    /// expansion makes each new sub-filter larger: a tree created small stays shallow as it
    /// grows (capacity multiplies by about `fanout × growth` per level instead of `fanout`).
    /// 1 keeps every leaf the size of the first ones. Every leaf is still sized by formulas
    /// (4)–(6) for its own bits, so each stays under `f_max`.
    pub growth: u32,
}

impl Default for SplitPolicy {
    fn default() -> Self {
        SplitPolicy {
            fanout: 2,
            threshold: DEFAULT_SPLIT_THRESHOLD,
            step: 2048,
            mode: SplitMode::Background,
            growth: 4,
        }
    }
}

impl SplitPolicy {
    fn validate(&self) -> Result<()> {
        let bad = |name, reason: String| Err(Error::InvalidOption { name, reason });
        if !(2..=1024).contains(&self.fanout) {
            return bad("split.fanout", format!("must be in 2..=1024, got {}", self.fanout));
        }
        if !(self.threshold > 0.0 && self.threshold <= 1.0) {
            return bad("split.threshold", format!("must be in (0, 1], got {}", self.threshold));
        }
        if self.step == 0 {
            return bad("split.step", "must be at least 1".into());
        }
        if !(1..=16).contains(&self.growth) {
            return bad("split.growth", format!("must be in 1..=16, got {}", self.growth));
        }
        Ok(())
    }
}

/// Who does the work of a split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitMode {
    /// A background worker migrates in steps; the tree serves throughout (the seed's design).
    Background,
    /// The writer that fills a leaf migrates it in steps before its call returns. Other leaves
    /// and other threads are not stopped; useful for deterministic tests and single-threaded
    /// tools that want no background thread.
    Inline,
    /// Leaves never split: a fixed tree of `initial_leaves` leaves whose FPR rises past `f_max`
    /// as it fills. For experiments (seed 000's Fig. 7 compares fixed trees), not for crawls.
    Never,
}
