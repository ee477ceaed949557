//! A namespace directory verified by reading alone (meta, hosts file, URL journal, log,
//! snapshot, leaf files, a counting namespace's store on a copy; a recrawl window's
//! generations each as a namespace of their own), with what opening or `--repair`
//! ([`repair_namespace`]) would do about what is found. `urlseen check`
//! ([`crate::check_data_dir`]) runs it on every namespace of a data directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::persist::{
    LEAVES_DIR, STORE_DIR, log_behind_snapshot, recorded_data, scratch_copy, snapshot_is_old,
    snapshot_log_offset, verify_snapshot_checksum,
};
use super::recrawl::GENERATIONS_DIR;
use crate::error::{Error, Result};
use crate::leaf_log::{LeafFiles, LeafStore};
use crate::log::FingerprintLog;
use crate::options::decode_meta;
use crate::storage::{OsStorage, Storage};
use crate::tree::{Dsbf, SplitWorkers, TreeParams};

/// What [`check_data_dir`](crate::check_data_dir) found in one namespace directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NamespaceCheck {
    /// The namespace directory.
    pub dir: PathBuf,
    /// The namespace's name, if its meta file could be read.
    pub name: Option<String>,
    /// What was verified and found sound.
    pub notes: Vec<String>,
    /// What is damaged or missing, each with what opening (or `--repair`) would do about it.
    pub problems: Vec<String>,
    /// Whether `--repair` fixes every problem found without losing a record the log holds
    /// (a torn tail is cut; a damaged snapshot or leaf file is rebuilt from the log).
    pub repairable: bool,
    /// Whether the snapshot or a leaf file it names is damaged: the repair sets the snapshot
    /// aside, so that opening replays the whole log into new leaf files.
    pub rebuild_from_log: bool,
    /// A counting namespace whose store holds fewer URLs than it acknowledged: how many it
    /// lost. The repair accepts the loss (its tally is rewritten to what the store holds).
    pub store_lost: Option<u64>,
    /// What the store holds, when `store_lost` is set (the tally's new floor).
    pub store_held: u64,
    /// fjall cannot read the store's journal: the repair sets it aside (the loss counted in
    /// `store_lost`).
    pub store_journal_aside: bool,
    /// The `hosts` file is damaged before its end: the repair rewrites it with every sound
    /// entry.
    pub hosts_damaged: bool,
}

/// Repairs what [`check_data_dir`](crate::check_data_dir) found in one namespace that opening does
/// not repair by itself: sets a damaged snapshot aside (`snapshot.damaged`), and accepts what a
/// counting store lost. Returns what was done, one line each. Opening the data directory afterwards
/// does the rest (cuts torn tails, rebuilds from the log).
///
/// # Errors
/// [`Error::Io`].
pub fn repair_namespace(c: &NamespaceCheck) -> Result<Vec<String>> {
    let storage: Arc<dyn Storage> = Arc::new(OsStorage);
    let mut done = Vec::new();
    if c.rebuild_from_log {
        let (from, to) = (c.dir.join("snapshot"), c.dir.join("snapshot.damaged"));
        storage.rename(&from, &to).map_err(|e| Error::io("set aside", &from, e))?;
        done.push(format!(
            "set {} aside as {}: the namespace is rebuilt from the log, nothing lost",
            from.display(),
            to.display()
        ));
    }
    if c.hosts_damaged {
        let path = c.dir.join("hosts");
        let bytes =
            storage.read(&path).map_err(|e| Error::io("read", &path, e))?.unwrap_or_default();
        let survey = crate::namespace::host_dict::survey(&path, &bytes)?;
        let kept = crate::namespace::host_dict::rebuilt(&bytes, &survey);
        storage.write_atomic(&path, &kept).map_err(|e| Error::io("rewrite", &path, e))?;
        done.push(format!(
            "rewrote {} with its {} sound entries, without {} damaged bytes (no URL lost: a \
             host whose entry was damaged is listed again when one of its URLs is recorded)",
            path.display(),
            survey.entries,
            survey.bad_bytes
        ));
    }
    if let Some(lost) = c.store_lost {
        let store = c.dir.join(STORE_DIR);
        if c.store_journal_aside {
            let files = journal_files(&store).map_err(|e| Error::io("list", &store, e))?;
            for from in files {
                let name = from.file_name().map(|n| n.to_string_lossy().into_owned());
                let to = store.join(format!("{}.damaged", name.unwrap_or_default()));
                storage.rename(&from, &to).map_err(|e| Error::io("set aside", &from, e))?;
                done.push(format!("set {} aside as {}", from.display(), to.display()));
            }
        }
        crate::exact::FingerprintStore::accept_loss(&storage, &store, c.store_held)?;
        done.push(format!(
            "accepted the loss of {lost} URLs in {}: it holds {} (those URLs are new again)",
            store.display(),
            c.store_held
        ));
    }
    Ok(done)
}

/// Checks the namespace directory `dir`, and a recrawl window's generations after it, each
/// as a namespace of its own.
pub(crate) fn check_namespace_dir(storage: &Arc<dyn Storage>, dir: &Path) -> Vec<NamespaceCheck> {
    let c = check_namespace(storage, dir);
    let window = c.name.is_some() && c.notes.iter().any(|n| n.starts_with("recrawl window"));
    let name = c.name.clone();
    let mut checks = vec![c];
    if window {
        check_generations(storage, dir, name.as_deref(), &mut checks);
    }
    checks
}

/// Checks each generation directory of the recrawl window in `dir` as a namespace of its own
/// (named `name (generation <start>)`), so that a repair fixes it where it is.
fn check_generations(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    name: Option<&str>,
    checks: &mut Vec<NamespaceCheck>,
) {
    let root = dir.join(GENERATIONS_DIR);
    let mut gens = match storage.list(&root) {
        Ok(gens) => gens,
        Err(e) => {
            checks.push(NamespaceCheck {
                dir: root.clone(),
                name: name.map(str::to_owned),
                problems: vec![format!("listing {}: {e}", root.display())],
                ..Default::default()
            });
            return;
        }
    };
    gens.sort();
    for g in gens.iter().filter(|g| !g.ends_with(".tmp")) {
        let mut c = check_namespace(storage, &root.join(g));
        c.name = name.map(|n| format!("{n} (generation {g})"));
        checks.push(c);
    }
}

fn check_namespace(storage: &Arc<dyn Storage>, dir: &Path) -> NamespaceCheck {
    let mut c = NamespaceCheck { dir: dir.to_owned(), repairable: true, ..Default::default() };
    let problem = |c: &mut NamespaceCheck, repairable: bool, text: String| {
        c.repairable &= repairable;
        c.problems.push(text);
    };
    let meta_path = dir.join("meta");
    let options = match storage.read(&meta_path) {
        Ok(Some(bytes)) => match decode_meta(&meta_path, &bytes) {
            Ok((name, options, _)) => {
                c.name = Some(name);
                options
            }
            Err(e) => {
                problem(&mut c, false, format!("{e}; restore the meta file from a backup"));
                return c;
            }
        },
        Ok(None) => {
            match recorded_data(storage, dir) {
                Ok(None) => c.notes.push("an unfinished create (no meta, no data)".into()),
                Ok(Some(what)) => problem(
                    &mut c,
                    false,
                    format!(
                        "meta is missing but the directory holds data ({what}); restore the meta file"
                    ),
                ),
                Err(e) => problem(&mut c, false, e.to_string()),
            }
            return c;
        }
        Err(e) => {
            problem(&mut c, false, format!("reading {}: {e}", meta_path.display()));
            return c;
        }
    };
    check_hosts(&mut c, storage, &dir.join("hosts"));
    if options.keep_urls {
        check_url_journal(&mut c, storage, &dir.join("urls"));
    }
    if options.counting {
        check_store(&mut c, &dir.join(STORE_DIR));
        return c;
    }
    if options.recrawl_after.is_some() {
        // A window: each generation is a namespace directory of its own, checked as one by
        // `check_generations`.
        c.notes.push("recrawl window: its generations are checked one by one".into());
        return c;
    }
    let log_path = dir.join("log");
    let log_end = match FingerprintLog::verify(storage, &log_path) {
        Ok((records, fingerprints, end, torn)) => {
            c.notes
                .push(format!("log: {records} records, {fingerprints} fingerprints, {end} bytes"));
            if torn > 0 {
                problem(
                    &mut c,
                    true,
                    format!(
                        "log: a torn or damaged tail of {torn} bytes after byte {end} (opening cuts it)"
                    ),
                );
            }
            end
        }
        Err(e) => {
            problem(&mut c, false, format!("log: {e}"));
            return c;
        }
    };
    let snap_path = dir.join("snapshot");
    let Ok(Some(mut reader)) = storage.open_read(&snap_path) else {
        c.notes.push("no snapshot: opening replays the whole log".into());
        return c;
    };
    if let Some(covered) = snapshot_log_offset(storage, &snap_path)
        && covered > log_end
    {
        // Only a snapshot whose checksum holds is believed: a damaged header claims any offset.
        if let Err(reason) = verify_snapshot_checksum(storage, &snap_path) {
            c.rebuild_from_log = true;
            problem(
                &mut c,
                true,
                format!(
                    "snapshot: {} is damaged ({reason}); the log is whole (repair sets the \
                     snapshot aside and rebuilds the namespace from the log, losing nothing)",
                    snap_path.display()
                ),
            );
            return c;
        }
        problem(&mut c, false, log_behind_snapshot(&log_path, log_end, covered, true).to_string());
        return c;
    }
    if snapshot_is_old(storage, &snap_path) {
        // Reading it would write its inline leaves to leaf files: opening upgrades it.
        c.notes.push("snapshot: an older version (0.1), upgraded when the directory is opened; its leaves are checked after that".into());
        return c;
    }
    let files = LeafFiles::open_read_only(Arc::clone(storage), dir.join(LEAVES_DIR));
    let workers = SplitWorkers::new(1);
    match Dsbf::read_snapshot(TreeParams::from(&options), workers, LeafStore::Files(files), &mut reader)
    {
        Ok(loaded) => match loaded.tree.verify_leaf_files() {
            Ok(records) => c.notes.push(format!(
                "snapshot: covers the log up to byte {}, {} leaves holding {records} records, all blocks sound",
                loaded.log_offset,
                loaded.leaves.len()
            )),
            Err(e) => {
                c.rebuild_from_log = true;
                problem(&mut c, true, format!("leaf files: {e} (repair rebuilds them from the log)"));
            }
        },
        Err(reason) => {
            c.rebuild_from_log = true;
            problem(&mut c, true, format!("snapshot: {reason} (repair rebuilds it from the log)"));
        }
    }
    c
}

/// Checks a counting namespace's store, on a copy (fjall writes when it opens, and cuts a
/// damaged journal): the header, every record (fjall checks the blocks' checksums as it reads
/// them), the count it keeps against the records, and the count against its tally.
fn check_store(c: &mut NamespaceCheck, store: &Path) {
    use crate::exact::{FingerprintStore, FpStore, StoreOptions};
    let copy = match scratch_copy(store) {
        Ok(copy) => copy,
        Err(e) => {
            c.repairable = false;
            c.problems.push(format!("store: {e}"));
            return;
        }
    };
    let opened =
        FingerprintStore::open_unchecked(&copy.path().join(STORE_DIR), StoreOptions::default());
    let s = match opened {
        Ok(s) => s,
        Err(e) => {
            let e = e.to_string().replace(
                &copy.path().join(STORE_DIR).display().to_string(),
                &store.display().to_string(),
            );
            // fjall cannot read its journal: what would setting it aside leave?
            match without_journal(&copy.path().join(STORE_DIR)) {
                Some((held, floor)) => {
                    let lost = floor.saturating_sub(held);
                    (c.store_journal_aside, c.store_lost, c.store_held) = (true, Some(lost), held);
                    // The store's own advice names the repair: say what it would do instead.
                    let what = e.split(". Restore").next().unwrap_or(&e);
                    c.problems.push(format!(
                        "store: {what}. Restore it from a backup, or repair, which sets its \
                         journal aside (as *.jnl.damaged in {}): the store then holds {held} \
                         URLs of the {floor} acknowledged, so {lost} URLs are lost (new again)",
                        store.display()
                    ));
                }
                None => {
                    c.repairable = false;
                    c.problems.push(format!("store: {e}"));
                }
            }
            return;
        }
    };
    let (mut records, mut bad) = (0u64, None);
    if let Err(e) = s.scan(&mut |_, _| records += 1) {
        bad = Some(e.to_string());
    }
    let (held, floor) = (s.len(), s.tally_floor());
    drop(s);
    if let Some(e) = bad {
        c.repairable = false;
        c.problems.push(format!(
            "store: {} cannot be read whole ({e}); restore it from a backup",
            store.display()
        ));
        return;
    }
    if records != held {
        c.repairable = false;
        c.problems.push(format!(
            "store: {} holds {records} URLs but counts {held}; restore it from a backup",
            store.display()
        ));
        return;
    }
    if floor > held {
        c.store_lost = Some(floor - held);
        c.store_held = held;
        c.problems.push(format!(
            "store: {} holds {held} URLs but {floor} were acknowledged: {} URLs are missing. \
             Restore it from a backup, or repair, which accepts the loss (those URLs will be \
             new again)",
            store.display(),
            floor - held
        ));
        return;
    }
    c.notes.push(format!(
        "store: {held} URLs, every record readable, at least the {floor} acknowledged at its last sync"
    ));
}

/// The store in `store` (a scratch copy) opened without its journal files: how many URLs it
/// holds then, and its tally's floor; `None` if it cannot be opened even so.
fn without_journal(store: &Path) -> Option<(u64, u64)> {
    use crate::exact::{FingerprintStore, FpStore, StoreOptions};
    for path in journal_files(store).ok()? {
        std::fs::remove_file(path).ok()?;
    }
    let s = FingerprintStore::open_unchecked(store, StoreOptions::default()).ok()?;
    let mut records = 0u64;
    s.scan(&mut |_, _| records += 1).ok()?;
    (records == s.len()).then(|| (s.len(), s.tally_floor()))
}

/// The journal files (`*.jnl`) of the LSM of the store in `store`.
fn journal_files(store: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(store.join("lsm"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "jnl") {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Checks the `hosts` file (the collision guard of a forget by host): every entry's checksum.
/// A torn tail is cut by opening; damage with sound entries after it is refused by opening
/// and repaired by rewriting the file with every sound entry.
fn check_hosts(c: &mut NamespaceCheck, storage: &Arc<dyn Storage>, path: &Path) {
    let bytes = match storage.read(path) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return, // no host recorded yet
        Err(e) => {
            c.repairable = false;
            c.problems.push(format!("hosts: reading {}: {e}", path.display()));
            return;
        }
    };
    let survey = match crate::namespace::host_dict::survey(path, &bytes) {
        Ok(survey) => survey,
        Err(e) => {
            c.repairable = false;
            c.problems.push(format!(
                "hosts: {e}; restore it from a backup, or remove it (no URL is lost: hosts are \
                 listed again as their URLs are recorded, and until then a forget by host \
                 refuses)"
            ));
            return;
        }
    };
    if let Some(damage) = survey.damaged_in_the_middle() {
        c.hosts_damaged = true;
        c.problems.push(format!(
            "hosts: {} is {damage} (repair keeps every sound entry; no URL is lost)",
            path.display()
        ));
    } else if survey.bad_bytes > 0 {
        c.problems.push(format!(
            "hosts: a torn or damaged tail of {} bytes after byte {} (opening cuts it)",
            survey.bad_bytes, survey.valid
        ));
    } else {
        c.notes.push(format!("hosts: {} entries, all sound", survey.entries));
    }
}

/// Checks the URL journal of a namespace that keeps its URLs: every block's checksum and
/// entries.
fn check_url_journal(c: &mut NamespaceCheck, storage: &Arc<dyn Storage>, path: &Path) {
    let scanned = crate::namespace::url_journal::UrlJournal::open(storage, path, true, false)
        .and_then(|j| {
            let end = j.end()?;
            let mut entries = 0u64;
            j.scan(0, end, &mut |_, _, _| entries += 1)?;
            let len = storage.file_len(path).ok().flatten().unwrap_or(0);
            Ok((entries, end, len))
        });
    match scanned {
        Ok((entries, end, len)) if end < len => c.problems.push(format!(
            "urls: {entries} URLs in sound blocks, then a torn tail of {} bytes after byte {end} \
             (opening cuts it)",
            len - end
        )),
        Ok((entries, ..)) => c.notes.push(format!("urls: {entries} URLs, every block sound")),
        Err(e) => {
            c.repairable = false;
            c.problems.push(format!(
                "urls: {e}; restore it from a backup (until then a forget by prefix refuses; \
                 nothing else depends on it)"
            ));
        }
    }
}
