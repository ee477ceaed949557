//! Where a `Db` keeps its namespaces, and a new one made there: in memory, in a temporary
//! `Db`'s spill directory, or in a data directory (a directory of its own, or the journal of
//! small namespaces). The `Db` says where; how a namespace is made in each place is the
//! namespace's own (see [`Place::make`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::backing::Backing;
use super::persist::{self, DbOptions};
use super::recrawl::{Generations, Home};
use super::small::{LeafSource, Leaves, starts_small};
use super::small_journal::SmallJournal;
use super::{Namespace, Set};
use crate::error::Result;
use crate::leaf_log::LeafStore;
use crate::options::NamespaceOptions;
use crate::tree::SplitWorkers;

/// What making a namespace needs to know of the `Db` it is made in.
pub(crate) struct Place<'a> {
    /// The data directory of a persistent `Db`.
    pub root: Option<&'a Path>,
    /// The spill directory of a temporary `Db`.
    pub spill: Option<&'a Arc<tempfile::TempDir>>,
    /// A data directory's journal of small namespaces.
    pub journal: Option<&'a Arc<SmallJournal>>,
    /// Where a small namespace's tree puts its leaves when it has one.
    pub small_leaves: Option<&'a LeafSource>,
    pub workers: &'a Arc<SplitWorkers>,
    pub db: &'a DbOptions,
    /// Set when a namespace's files were created without a sync: the `Db` syncs them within
    /// the second.
    pub unsynced: &'a AtomicBool,
}

impl Place<'_> {
    /// A new namespace `name`: in memory, in the spill directory, or in the data directory:
    /// in the journal if it starts small, else in a directory of its own (at `dir`, when
    /// given, instead of its own directory's path).
    ///
    /// # Errors
    /// The options' ([`NamespaceOptions::validate`]); creating its files: [`crate::Error::Io`];
    /// a journal that takes no writes: [`crate::Error::Poisoned`], [`crate::Error::ReadOnly`].
    pub(crate) fn make(
        &self,
        name: &str,
        options: NamespaceOptions,
        dir: Option<PathBuf>,
    ) -> Result<Namespace> {
        let workers = self.workers;
        let ns = match self.root {
            None if options.recrawl_after.is_some() => {
                let home = match self.spill {
                    None => Home::Memory { workers: Arc::clone(workers) },
                    Some(spill) => Home::Spill {
                        workers: Arc::clone(workers),
                        db: self.db.clone(),
                        dir: persist::namespace_dir(spill.path(), name),
                        keep: Arc::clone(spill) as Arc<dyn std::any::Any + Send + Sync>,
                    },
                };
                let clock = Arc::clone(&self.db.clock);
                let gens = Generations::new(name, &options, clock, home)?;
                let set = Set::Recrawl(Box::new(gens));
                Namespace::from_parts(name.to_owned(), options, set, Backing::Volatile)?
            }
            None => {
                // Leaf files are opened when a tree needs them (a small namespace has none).
                let leaves = match self.small_leaves {
                    None => Leaves::Store(LeafStore::Memory),
                    Some(source) => Leaves::Later(source.clone()),
                };
                Namespace::new(name.to_owned(), options, Arc::clone(workers), leaves)?
            }
            Some(_)
                if dir.is_none()
                    && starts_small(&options)
                    && let (Some(journal), Some(source)) = (self.journal, self.small_leaves) =>
            {
                // Under `always` on disk before the reply, else within the second (the
                // journal is synced once a second for all of them).
                journal.check_writable()?;
                let (id, lsn) = journal.create(name, &options)?;
                journal.log().commit(lsn)?;
                let journal = Arc::clone(journal);
                Namespace::in_journal(
                    name.to_owned(),
                    options,
                    journal,
                    id,
                    source,
                    workers,
                    &[],
                    &[],
                )?
            }
            Some(root) => {
                let dir = dir.unwrap_or_else(|| persist::namespace_dir(root, name));
                let (backing, set) = persist::create_at(dir, name, &options, self.db, workers)?;
                if !self.db.fsync.commit_syncs() {
                    // Made without a sync: on disk within the second (see `create_at`).
                    self.unsynced.store(true, Ordering::Release);
                }
                Namespace::from_parts(name.to_owned(), options, set, backing)?
            }
        };
        Ok(ns)
    }
}
