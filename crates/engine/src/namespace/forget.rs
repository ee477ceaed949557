//! Forgetting: one URL or fingerprint (counting namespaces), and every URL of a host or under a
//! prefix (every mode; see docs/forget.md).
use super::{Dsbf, Error, Namespace, Ordering, Result, Set, TreeExact, Vouch};

impl Namespace {
    /// Forgets `url` (counting namespaces): afterwards it is new again, and every other URL
    /// stays seen. Returns whether the URL was recorded.
    ///
    /// # Errors
    /// [`Error::ForgetUnsupported`] unless the namespace has counting filters;
    /// [`Error::InvalidUrl`]; the store's.
    pub fn forget(&self, url: &str) -> Result<bool> {
        let fp = self.fingerprint(url)?;
        self.forget_fingerprint(fp)
    }

    /// [`Self::forget`] of raw bytes (no canonicalization).
    ///
    /// # Errors
    /// As [`Self::forget`].
    pub fn forget_bytes(&self, item: &[u8]) -> Result<bool> {
        self.forget_fingerprint(self.fingerprint_bytes(item))
    }

    /// [`Self::forget`] of a fingerprint.
    ///
    /// # Errors
    /// As [`Self::forget`].
    pub fn forget_fingerprint(&self, fp: u64) -> Result<bool> {
        let mut out = [false];
        self.forget_fingerprints(&[fp], &mut out)?;
        Ok(out[0])
    }

    /// [`Self::forget`] of many fingerprints: `out[i]` says whether `fps[i]` was recorded. Seed
    /// 004's rule: each fingerprint leaves the store, then its counters are decremented, and a
    /// saturated counter is recounted from the store.
    ///
    /// # Errors
    /// As [`Self::forget`].
    ///
    /// # Panics
    /// If `out.len() != fps.len()`.
    pub fn forget_fingerprints(&self, fps: &[u64], out: &mut [bool]) -> Result<()> {
        let Set::Counting(set) = self.set() else {
            return Err(Error::ForgetUnsupported(self.name.to_string()));
        };
        self.backing.check()?;
        let forgot = set.forget_many(fps, out);
        self.measure();
        forgot?;
        if self.backing.commit_syncs() {
            set.sync()?;
        }
        Ok(())
    }

    /// The host hash [`Self::forget_host`] looks for: `host` canonicalized as the host of a URL
    /// (`http://{host}/`) with the namespace's profile, so `Example.COM` and `example.com.`
    /// spellings find what the profile records.
    ///
    /// # Errors
    /// [`Error::InvalidHost`].
    pub fn host_hash(&self, host: &str) -> Result<u32> {
        Ok(crate::host::host_hash(&self.canonical_host(host)?, self.options.seed))
    }

    /// `host` as the namespace's profile writes it in a canonical URL.
    fn canonical_host(&self, host: &str) -> Result<String> {
        crate::host::canonical_host(self.fingerprinter().canonicalizer(), host)
    }

    /// Forgets every URL of `host` (its canonical host, any scheme and port): afterwards each
    /// of them answers "new", and every other URL recorded still answers "seen". Returns how
    /// many URLs were forgotten. Works in every mode; see `docs/forget.md` for the design, the
    /// guarantees and the costs.
    ///
    /// A counting namespace's store keeps each URL's host too: the forget scans it and forgets
    /// the matching fingerprints one by one (seed 004's forget), under the set's lock.
    ///
    /// Each leaf that holds a URL of the host has its records rewritten without them and its
    /// filter rebuilt from the rest, under the tree's exclusive lock (the namespace waits
    /// meanwhile). In a data directory it is durable: the snapshot is removed, a forget record
    /// is logged and synced, the leaves are rewritten, and a new snapshot is written. A crash
    /// at any point reopens to the state before the forget (if its record was not synced) or
    /// after it (recovery replays the whole log, forget included).
    ///
    /// Records whose host is unknown (made before hosts were kept, or from raw items and
    /// fingerprints) might be URLs of `host`: if the namespace holds any, nothing is
    /// forgotten and [`Error::ForgetHostUnknown`] says how many.
    ///
    /// A URL whose host's 32-bit hash equals `host`'s is forgotten too: with `H` other hosts
    /// recorded, one of them collides with probability about `H / 2³²`.
    ///
    /// # Errors
    /// [`Error::InvalidHost`]; [`Error::ForgetHostUnknown`]; [`Error::Io`], [`Error::Corrupt`]
    /// (then the namespace refuses writes until reopened, and reopening replays the forget);
    /// in a counting namespace, the store's.
    pub fn forget_host(&self, host: &str) -> Result<u64> {
        let host = self.canonical_host(host)?;
        let h = crate::host::host_hash(&host, self.options.seed);
        let shared = |hosts| Error::HostHashShared {
            name: self.name.to_string(),
            host: host.clone(),
            hash: h,
            hosts,
        };
        match self.vouch(h, &host) {
            Vouch::Only => {}
            Vouch::Shared(hosts) => return Err(shared(hosts)),
            Vouch::Absent => match self.count_host_records(h)? {
                0 => {}
                records => {
                    return Err(Error::HostHashUnlisted {
                        name: self.name.to_string(),
                        host: host.clone(),
                        hash: h,
                        records,
                    });
                }
            },
        }
        // Checked again under the lock the forget holds, where nothing is recorded until it is
        // done: a host listed under `h` since then makes it refuse (one listed later records
        // after the forget).
        let vouched = || match self.vouch(h, &host) {
            Vouch::Shared(hosts) => Err(shared(hosts)),
            Vouch::Only | Vouch::Absent => Ok(()),
        };
        self.forget_host_checked(h, &vouched)
    }

    /// Records that carry host hash `h` (0: records whose host is unknown).
    pub(super) fn count_host_records(&self, h: u32) -> Result<u64> {
        // A small list is forgotten from as the tree it becomes (a forget is rare).
        match self.tree_set()? {
            Set::Tree { tree, .. } => tree.count_records(&|r| r.host == h),
            Set::Counting(set) => Ok(set.count_host(h)?),
            Set::Recrawl(gens) => gens.count_host_records(h),
            Set::Small(_) => unreachable!("tree_set grows a small list"),
        }
    }

    /// [`Self::forget_host`] of a host hash ([`Self::host_hash`]).
    ///
    /// # Errors
    /// As [`Self::forget_host`].
    pub fn forget_host_hash(&self, h: u32) -> Result<u64> {
        self.forget_host_checked(h, &|| Ok(()))
    }

    /// [`Self::forget_host_hash`] that calls `check` once nothing can be recorded any more
    /// until the forget is done, and forgets nothing if it fails.
    pub(super) fn forget_host_checked(
        &self,
        h: u32,
        check: &dyn Fn() -> Result<()>,
    ) -> Result<u64> {
        let forgot = self.forget_host_records(h, check);
        self.measure();
        forgot
    }

    fn forget_host_records(&self, h: u32, check: &dyn Fn() -> Result<()>) -> Result<u64> {
        let (tree, exact) = match self.tree_set()? {
            Set::Tree { tree, exact } => (tree, exact),
            // Each live generation, in turn.
            Set::Recrawl(gens) => return gens.forget_host(h, check),
            Set::Small(_) => unreachable!("tree_set grows a small list"),
            Set::Counting(set) => {
                self.backing.check()?;
                // The store is the source of truth, and each fingerprint leaves it before its
                // counters go: a crash part-way leaves part of the host forgotten, and the
                // forget not acknowledged (run it again).
                let outcome = set.forget_host(h, &|| check().is_ok())?;
                if outcome == Err(u64::MAX) {
                    check()?;
                }
                self.sync_store(set)?;
                return outcome.map_err(|records| Error::ForgetHostUnknown {
                    name: self.name.to_string(),
                    records,
                });
            }
        };
        if h == 0 {
            return Ok(0);
        }
        let mut logged = || -> Result<()> {
            check()?;
            self.backing.append_forget(crate::log::RecordKind::ForgetHost, &[], &[h])?;
            Ok(())
        };
        let count =
            self.forget_in_tree(tree, exact.as_deref(), "by host", &|r| r.host == h, &mut logged)?;
        Ok(count.recorded)
    }

    /// After a forget in a counting namespace's store, in a data directory: syncs it, and a
    /// failed sync poisons the namespace (the store may hold part of the forget).
    fn sync_store(&self, set: &crate::exact::CountingSet) -> Result<()> {
        if self.backing.durable().is_none() {
            return Ok(());
        }
        set.sync().map_err(|e| self.poisoned_by_store(e))
    }

    /// Forgets the records of `tree` that `drop` matches, durably, in the order
    /// `docs/forget.md` gives: no checkpoint until it is done, the snapshot removed, then under
    /// the tree's exclusive lock `logged` (which appends the forget's log record, and may
    /// refuse) and a sync of the log, then the leaves rewritten, then a new snapshot. `what`
    /// names the forget in the reason a failure half-way poisons the namespace with.
    ///
    /// # Errors
    /// [`Error::ForgetHostUnknown`] if records of unknown host are held (they might be URLs
    /// the forget is for); `logged`'s; those of [`Dsbf::forget_where`], after which the
    /// namespace refuses writes until reopened (recovery replays the forget from the log).
    fn forget_in_tree(
        &self,
        tree: &Dsbf,
        exact: Option<&TreeExact>,
        what: &str,
        drop: &dyn Fn(&crate::leaf_log::LeafRecord) -> bool,
        logged: &mut dyn FnMut() -> Result<()>,
    ) -> Result<crate::tree::ForgetCount> {
        self.backing.check()?;
        tree.check()?;
        // No checkpoint from here until the leaves are rewritten: a snapshot of a tree half
        // rewritten, or one taken before the forget record, must never be on disk with them.
        let one = self.backing.hold_checkpoints();
        let unknown = tree.count_records(&|r| r.host == 0)?;
        if unknown > 0 {
            return Err(Error::ForgetHostUnknown { name: self.name.to_string(), records: unknown });
        }
        if let Some(d) = self.backing.durable() {
            // Without a snapshot, recovery replays the whole log into new leaf files, the
            // forget record included, whatever state the leaf files were left in.
            let path = d.dir.join("snapshot");
            d.storage.remove_file_durably(&path).map_err(|e| Error::io("remove", &path, e))?;
            d.snapshot_end.store(0, Ordering::Release);
            d.snapshot_bytes.store(0, Ordering::Release);
        }
        let mut before = || -> Result<()> {
            // Under the tree's exclusive lock: every record before it in the log is in the
            // tree, and none after it.
            logged()?;
            self.backing.sync()
        };
        let result = tree.forget_where(drop, &mut before);
        if let Some(exact) = exact {
            exact.recent.clear();
        }
        let count = match result {
            Ok(count) => count,
            Err(e) => {
                self.backing.poison(|| {
                    format!(
                        "namespace {:?}: a forget {what} failed half-way ({e}); reopen to \
                         finish it from the log",
                        self.name
                    )
                });
                return Err(e);
            }
        };
        std::mem::drop(one);
        self.backing.checkpoint(tree)?;
        Ok(count)
    }

    /// Forgets every URL that starts with `prefix` (compared as canonical URLs): afterwards
    /// each answers "new", every other URL recorded still answers "seen", and the result is how
    /// many recorded URLs were forgotten. The namespace must keep its URLs
    /// ([`NamespaceOptions::keep_urls`](super::NamespaceOptions::keep_urls)); see `docs/forget.md`, "Forgetting a prefix".
    ///
    /// The prefix is canonicalized with the namespace's profile, as a URL (so
    /// `HTTPS://Example.com` is `https://example.com/`, every URL of that origin). It must have
    /// a host, and no query, fragment or dot segment: canonicalizing those can drop or reorder
    /// parts, which would make the prefix broader than asked.
    ///
    /// How: the URL journal is read for the entries of the prefix's host that start with it;
    /// then, under the tree's exclusive lock (nothing is recorded meanwhile), the entries
    /// appended since are read too, a forget record listing their fingerprints is logged, and
    /// the leaves holding them are rewritten without them, as [`Self::forget_host`] does. The
    /// host's kept records (URLs answered "seen" on a Bloom false positive, never recorded)
    /// go too. In a counting namespace the fingerprints are forgotten one by one.
    ///
    /// # Errors
    /// [`Error::InvalidUrl`], [`Error::InvalidPrefix`]; [`Error::ForgetByUnsupported`] when
    /// the namespace does not keep its URLs; [`Error::ForgetHostUnknown`]; then as
    /// [`Self::forget_host`].
    pub fn forget_prefix(&self, prefix: &str) -> Result<u64> {
        let forgot = self.forget_prefix_records(prefix);
        self.measure();
        forgot
    }

    fn forget_prefix_records(&self, prefix: &str) -> Result<u64> {
        let invalid = |reason: &str| Error::InvalidPrefix {
            prefix: prefix.to_owned(),
            reason: reason.to_owned(),
        };
        if prefix.contains(['?', '#']) {
            return Err(invalid("a prefix ends before the query and fragment"));
        }
        let path = prefix.split_once("://").map_or(prefix, |(_, rest)| rest);
        let dot = |seg: &str| {
            let seg = seg.to_ascii_lowercase().replace("%2e", ".");
            seg == "." || seg == ".."
        };
        if path.split(['/', '\\']).skip(1).any(dot) {
            return Err(invalid("a dot segment (. or ..) would be resolved away"));
        }
        let canonical = self.fingerprinter().canonicalizer().canonicalize(prefix)?;
        let Some(host) = crate::host::host_of(&canonical) else {
            return Err(invalid("it has no host once canonicalized"));
        };
        // What parsing drops (tabs, newlines, surrounding spaces) or decodes (a profile that
        // unescapes twice) can still hide a dot segment: one resolved away leaves fewer path
        // separators in the canonical prefix than were given.
        let separators = |path: &str| path.bytes().filter(|&b| b == b'/' || b == b'\\').count();
        let given = path.split_once(['/', '\\']).map_or("", |(_, rest)| rest);
        let kept = canonical.split_once("://").map_or("", |(_, rest)| rest);
        let kept = kept.split_once('/').map_or("", |(_, rest)| rest);
        if separators(kept) < separators(given) {
            return Err(invalid("a dot segment (. or ..) would be resolved away"));
        }
        let h = crate::host::host_hash(host, self.options.seed);
        let Some(urls) = &self.urls else {
            return Err(Error::ForgetByUnsupported {
                name: self.name.to_string(),
                what: "by prefix",
                reason: "it does not keep its URLs, and records keep a hash of their host, not \
                         their path; create the namespace with --keep-urls (URL.RESERVE … \
                         KEEPURLS, NamespaceOptions::keep_urls), or forget the whole host",
            });
        };
        // The journal up to now, read without stopping writers.
        let found = std::cell::RefCell::new(std::collections::HashSet::new());
        let scan = |from: u64, to: u64| {
            urls.scan(from, to, &mut |fp, host, url| {
                if host == h && url.starts_with(canonical.as_bytes()) {
                    found.borrow_mut().insert(fp);
                }
            })
        };
        let scanned = urls.end()?;
        scan(0, scanned)?;
        match self.tree_set()? {
            Set::Tree { tree, exact } => {
                let mut logged = || -> Result<()> {
                    // Nothing is recorded from here until the forget is done: what was
                    // journaled meanwhile is read too.
                    scan(scanned, urls.end()?)?;
                    let fps: Vec<u64> = found.borrow().iter().copied().collect();
                    self.backing.append_forget(crate::log::RecordKind::ForgetUrls, &fps, &[h])?;
                    Ok(())
                };
                let drop = |r: &crate::leaf_log::LeafRecord| {
                    r.host == h && (r.kept || found.borrow().contains(&r.fp))
                };
                let count =
                    self.forget_in_tree(tree, exact.as_deref(), "by prefix", &drop, &mut logged)?;
                Ok(count.recorded)
            }
            Set::Counting(set) => {
                self.backing.check()?;
                // Records with no host have no entry: they might be URLs under the prefix.
                let unknown = set.count_host(0)?;
                if unknown > 0 {
                    return Err(Error::ForgetHostUnknown {
                        name: self.name.to_string(),
                        records: unknown,
                    });
                }
                scan(scanned, urls.end()?)?;
                let fps: Vec<u64> = found.into_inner().into_iter().collect();
                let mut out = vec![false; fps.len()];
                let result = set.forget_many(&fps, &mut out);
                self.sync_store(set)?;
                result?;
                Ok(out.iter().filter(|&&forgotten| forgotten).count() as u64)
            }
            Set::Recrawl(_) => Err(Error::ForgetByUnsupported {
                name: self.name.to_string(),
                what: "by prefix",
                reason: "it has a recrawl window, whose URLs are not kept",
            }),
            Set::Small(_) => unreachable!("tree_set grows a small list"),
        }
    }
}
