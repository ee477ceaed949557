//! What a key is ([`KeyKind`], from its namespace's options), the parameters of a Bloom key
//! (RedisBloom's `BF.RESERVE` arguments and their defaults), and the server's configuration.

use super::*;

/// What kind of value a key holds. See the [module docs](super).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// A RedisBloom-compatible filter of raw items (profile `none`).
    Bloom,
    /// A URL namespace that canonicalizes what it is given.
    Url,
}

impl KeyKind {
    /// The kind of a namespace, from its options.
    pub fn of(ns: &Namespace) -> KeyKind {
        if ns.options().canon.profile == Profile::None { KeyKind::Bloom } else { KeyKind::Url }
    }

    /// What `TYPE` answers: `MBbloom--` (RedisBloom's module type name, which clients and
    /// tools recognise) or `urlseen`.
    pub fn type_name(self) -> &'static str {
        match self {
            KeyKind::Bloom => "MBbloom--",
            KeyKind::Url => "urlseen",
        }
    }

    /// The kind `SCAN … TYPE name` asks for (case-insensitive).
    pub fn from_type_name(name: &[u8]) -> Option<KeyKind> {
        [KeyKind::Bloom, KeyKind::Url]
            .into_iter()
            .find(|k| k.type_name().as_bytes().eq_ignore_ascii_case(name))
    }
}

/// The parameters of a RedisBloom filter: `BF.RESERVE key error_rate capacity [EXPANSION e]
/// [NONSCALING]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BloomParams {
    /// The false-positive bound.
    pub error_rate: f64,
    /// Items before the filter scales (or, non-scaling, refuses more).
    pub capacity: u64,
    /// RedisBloom's expansion; `None` for a `NONSCALING` filter.
    pub expansion: Option<u32>,
}

impl Default for BloomParams {
    /// RedisBloom's defaults for a filter `BF.ADD` creates: capacity 100, error rate 0.01,
    /// expansion 2.
    fn default() -> Self {
        BloomParams { error_rate: 0.01, capacity: 100, expansion: Some(2) }
    }
}

impl BloomParams {
    /// The largest split fanout an expansion maps to.
    pub const MAX_FANOUT: u32 = 1024;

    /// The namespace options of such a filter: raw items (profile `none`), the expansion as the
    /// split fanout (at least 2: a DSBF leaf splits into at least two children), and no splits
    /// at all for `NONSCALING`.
    pub fn options(&self) -> NamespaceOptions {
        let fanout = self.expansion.unwrap_or(2).clamp(2, Self::MAX_FANOUT);
        let mode = if self.expansion.is_some() { SplitMode::Background } else { SplitMode::Never };
        NamespaceOptions {
            capacity: self.capacity,
            fpr: self.error_rate,
            canon: CanonOptions::new(Profile::None),
            split: SplitPolicy { fanout, mode, ..SplitPolicy::default() },
            ..NamespaceOptions::default()
        }
    }
}

/// What the server's engine is configured with.
#[derive(Clone, Debug, PartialEq)]
pub struct AppConfig {
    /// The options of a namespace `URL.SEEN` (or the HTTP API) creates on first use, and the
    /// base that `URL.RESERVE`'s arguments override.
    pub url_defaults: NamespaceOptions,
    /// The filter `BF.ADD`, `BF.MADD` and `BF.INSERT` create on first use.
    pub bloom_defaults: BloomParams,
    /// Most bytes of filters a namespace may take when it is created; a bigger one is refused
    /// with `ERR Insufficient memory to create filter` (default 4 GiB). A namespace still grows
    /// past it by splitting as it fills.
    pub max_namespace_bytes: u64,
    /// Redis' `maxmemory`: most bytes of RAM all namespaces together may hold (0: no limit). A
    /// namespace (`BF.RESERVE`, `URL.RESERVE`, or one made on first use) whose filters, once
    /// all its leaves are used, would take the total past it is refused with `ERR Insufficient
    /// memory to create filter`, and the server goes on. The check is on reservations (a
    /// leaf's filter is allocated only when the leaf records its first item, but filling the
    /// namespaces must never abort on a failed allocation): the new one's is added to each
    /// namespace's reservation or what it holds, whichever is more. Once the namespaces hold
    /// more than the budget (grown by splits), writes get `-OOM` (Redis' `noeviction`) and
    /// reads go on; `INFO memory`'s `used_memory` is what they hold.
    pub maxmemory: u64,
    /// Where `maxmemory` came from, for `INFO memory` (`urlseen_maxmemory_source`):
    /// `configured`, or the limit the default was derived from (`physical_ram`, `cgroup_v2`,
    /// `cgroup_v1`, `rlimit_as`).
    pub maxmemory_source: &'static str,
    /// The largest chunk `BF.SCANDUMP` returns, in bytes: RedisBloom's 16 MiB (tests make it
    /// smaller to see many chunks).
    pub dump_chunk_bytes: usize,
}

/// What a URL namespace is made for when nothing says otherwise (`URL.SEEN` on a new name,
/// `URL.RESERVE` without `CAPACITY`, no `[defaults] capacity`): RedisBloom's `BF.ADD` default.
/// It grows by splits, each level's leaves larger than their parent (the split growth), so a
/// job of ten URLs costs a 64-byte filter and a crawl of millions is a shallow tree.
pub const URL_START_CAPACITY: u64 = 100;

impl Default for AppConfig {
    fn default() -> Self {
        AppConfig {
            url_defaults: NamespaceOptions {
                capacity: URL_START_CAPACITY,
                ..NamespaceOptions::default()
            },
            bloom_defaults: BloomParams::default(),
            max_namespace_bytes: 4 << 30,
            maxmemory: 0,
            maxmemory_source: "configured",
            dump_chunk_bytes: urlseen_engine::dump::MAX_CHUNK_BYTES,
        }
    }
}
