//! `urlseen dump` and `urlseen restore`: a namespace to a file and back, for backups and for
//! moving a namespace between machines.
//!
//! The file holds the chunks `BF.SCANDUMP` returns (the namespace's options and fingerprints)
//! in a small framed container with its own magic, version and end checksum (see
//! `urlseen_engine::dump`), so a file cut short is refused.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use urlseen_engine::dump::{Header, MAX_CHUNK_BYTES};
use urlseen_engine::{
    DumpChunk, DumpReader, DumpWriter, Fsync, LoadStep, NamespaceOptions, SplitPolicy,
};
use urlseen_redis::{RedisDb, RedisMode, RedisOptions, RedisSet};

use crate::args::{CanonArgs, parse_count, parse_fpr};

/// With `--redis`, the options the namespace was made with (as given to `urlseen filter
/// --redis`): Redis checks them against the namespace's (`dump`, `forget --redis`).
#[derive(Debug, clap::Args)]
pub struct RedisNamespaceArgs {
    /// With --redis: the namespace's expected number of URLs.
    #[arg(long, default_value = "1000000", value_parser = parse_count)]
    capacity: u64,
    /// With --redis: the namespace's false-positive bound.
    #[arg(long, default_value = "0.01", value_parser = parse_fpr)]
    fpr: f64,
    /// With --redis: the namespace's bits per leaf filter.
    #[arg(long, value_parser = parse_count)]
    leaf_bits: Option<u64>,
    /// With --redis: the namespace's seed.
    #[arg(long, default_value_t = urlseen_engine::DEFAULT_SEED)]
    seed: u64,
    #[command(flatten)]
    canon: CanonArgs,
}

impl RedisNamespaceArgs {
    /// The namespace's options, as these flags give them.
    pub fn options(&self) -> NamespaceOptions {
        NamespaceOptions {
            capacity: self.capacity,
            fpr: self.fpr,
            leaf_bits: self.leaf_bits,
            canon: self.canon.options(),
            seed: self.seed,
            split: SplitPolicy::default(),
            ..NamespaceOptions::default()
        }
    }
}

/// `--redis`: where the namespace lives, as `urlseen filter --redis` takes it.
#[derive(Debug, clap::Args)]
pub struct RedisArgs {
    /// The namespace is in Redis instead: its servers, or Redis Cluster seed nodes, as given
    /// to `urlseen filter --redis`.
    #[arg(long, value_name = "URL[,URL…]", value_delimiter = ',', conflicts_with = "data")]
    redis: Option<Vec<String>>,
    /// With --redis: the URLs are Redis Cluster seed nodes.
    #[arg(long, requires = "redis")]
    cluster: bool,
}

impl RedisArgs {
    pub(crate) fn open(&self) -> anyhow::Result<Option<RedisDb>> {
        let Some(urls) = &self.redis else { return Ok(None) };
        let mode = if self.cluster { RedisMode::Cluster } else { RedisMode::Auto };
        let options = RedisOptions { mode, log_retries: true, ..RedisOptions::new(urls.clone()) };
        Ok(Some(RedisDb::open(options).context("connecting to redis")?))
    }
}

/// Write a namespace of a data directory (or of Redis) to a dump file (stdout unless --file).
///
/// The data directory is opened read-only: nothing in it changes. A directory a server has
/// open is refused (its lock is held): dump through the server with BF.SCANDUMP instead.
/// With --redis, give the sizing and canonicalization options the namespace was made with
/// (as to `urlseen filter --redis`): Redis checks them, and the dump carries them.
#[derive(Debug, clap::Args)]
pub struct DumpArgs {
    /// The data directory.
    #[arg(long, value_name = "DIR", required_unless_present = "redis")]
    data: Option<PathBuf>,
    #[command(flatten)]
    redis: RedisArgs,
    #[command(flatten)]
    made_with: RedisNamespaceArgs,
    /// The namespace.
    #[arg(long)]
    ns: String,
    /// Write here instead of stdout (replaced only once the dump is complete).
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
}

pub fn dump(args: DumpArgs) -> anyhow::Result<()> {
    if let Some(redis) = args.redis.open()? {
        let options = args.made_with.options();
        // A namespace with a recrawl window is refused, as in a data directory: the dump
        // format has no generations (docs/recrawl.md).
        let ns = match redis.open_namespace(&args.ns, options)? {
            RedisSet::Plain(ns) => ns,
            RedisSet::Window(_) => anyhow::bail!(
                "namespace {:?} has a recrawl window: dump does not support recrawl windows yet",
                args.ns
            ),
        };
        let (chunks, bytes) =
            write_to(&args, &mut |iter| Ok(ns.dump_chunk(iter, MAX_CHUNK_BYTES)?))?;
        eprintln!(
            "urlseen: dumped namespace {:?} from redis: {} URLs, {chunks} chunks, {bytes} bytes",
            args.ns,
            ns.stats()?.count
        );
        return Ok(());
    }
    let data = args.data.as_deref().context("--data or --redis is needed")?;
    let db = super::open_data_dir_read_only(data)?;
    let ns = db
        .try_namespace(&args.ns)?
        .with_context(|| format!("no namespace {:?} in {}", args.ns, data.display()))?;
    let (chunks, bytes) = write_to(&args, &mut |iter| Ok(ns.dump_chunk(iter, MAX_CHUNK_BYTES)?))?;
    let s = ns.stats();
    eprintln!(
        "urlseen: dumped namespace {:?}: {} URLs, {} kept records, {chunks} chunks, {bytes} bytes",
        args.ns, s.count, s.kept
    );
    drop(ns);
    db.close()?;
    Ok(())
}

/// What gives the chunks of a dump, by iterator.
type NextChunk<'a> = dyn FnMut(i64) -> anyhow::Result<DumpChunk> + 'a;

/// Writes the dump to `--file` (replaced only once it is complete and synced) or stdout;
/// returns the chunks and the bytes of chunks.
fn write_to(args: &DumpArgs, next: &mut NextChunk<'_>) -> anyhow::Result<(u64, u64)> {
    let (chunks, bytes) = match &args.file {
        Some(path) => {
            let tmp = tmp_path(path);
            let written = File::create(&tmp)
                .map_err(anyhow::Error::from)
                .and_then(|f| write_dump(next, BufWriter::new(f)))
                .and_then(|(file, chunks, bytes)| {
                    file.into_inner().map_err(|e| e.into_error())?.sync_all()?;
                    Ok((chunks, bytes))
                });
            let done = written.and_then(|r| {
                std::fs::rename(&tmp, path)?;
                Ok(r)
            });
            if done.is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            done.with_context(|| format!("writing {}", path.display()))?
        }
        None => {
            let out = io::stdout().lock();
            anyhow::ensure!(
                !out.is_terminal(),
                "a dump is binary: redirect stdout to a file, or give --file"
            );
            let (_, chunks, bytes) = write_dump(next, BufWriter::new(out))?;
            (chunks, bytes)
        }
    };
    Ok((chunks, bytes))
}

/// Writes every chunk `next` gives to `out`; returns it, the chunks and the bytes of chunks.
fn write_dump<W: Write>(next: &mut NextChunk<'_>, out: W) -> anyhow::Result<(W, u64, u64)> {
    let mut w = DumpWriter::new(out)?;
    let (mut iter, mut chunks, mut bytes) = (0i64, 0u64, 0u64);
    loop {
        let chunk = next(iter)?;
        if chunk.next == 0 {
            break;
        }
        w.chunk(chunk.next, &chunk.data)?;
        chunks += 1;
        bytes += chunk.data.len() as u64;
        iter = chunk.next;
    }
    Ok((w.finish()?, chunks, bytes))
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Restore a namespace from a dump file (stdin unless --file) into a data directory (or into
/// Redis).
///
/// The namespace must not exist. In a data directory it is invisible until the whole dump is
/// loaded, then checkpointed and synced: a restore that fails (a damaged or cut file) or is
/// killed leaves no namespace behind. In Redis (--redis) it is created with the dump's options
/// and other clients see it fill; a failed restore leaves what it loaded there (restore into
/// another name, or delete its keys).
#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// The data directory (created if it does not exist).
    #[arg(long, value_name = "DIR", required_unless_present = "redis")]
    data: Option<PathBuf>,
    #[command(flatten)]
    redis: RedisArgs,
    /// The namespace to restore into (default: the name it was dumped from).
    #[arg(long)]
    ns: Option<String>,
    /// Read this file instead of stdin.
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
}

pub fn restore(args: RestoreArgs) -> anyhow::Result<()> {
    let input: Box<dyn Read> = match &args.file {
        Some(path) => {
            Box::new(File::open(path).with_context(|| format!("opening {}", path.display()))?)
        }
        None => Box::new(io::stdin().lock()),
    };
    let mut reader = DumpReader::new(BufReader::new(input)).context("reading the dump")?;
    let Some((iter, header)) = reader.next_chunk().context("reading the dump")? else {
        anyhow::bail!("the dump holds no namespace");
    };
    let info = Header::decode(&header).context("reading the dump's header")?;
    let name = args.ns.clone().unwrap_or_else(|| info.name.clone());
    if let Some(redis) = args.redis.open()? {
        let mut restore = redis.restore(&name, &header)?;
        // One chunk read ahead, as below: the file's end is checked before the last chunk.
        let mut pending = reader.next_chunk()?;
        while let Some((iter, chunk)) = pending {
            pending = reader.next_chunk()?;
            if restore.load_chunk(iter, &chunk)? {
                anyhow::ensure!(pending.is_none(), "the dump goes on after its last chunk");
                eprintln!(
                    "urlseen: restored namespace {name:?} into redis (dumped as {:?}): {} URLs",
                    info.name,
                    restore.namespace().stats()?.count
                );
                return Ok(());
            }
        }
        anyhow::bail!("the dump ends before its last chunk");
    }
    super::check_fits_in_ram(&info.options)?;
    let data = args.data.as_deref().context("--data or --redis is needed")?;
    let db = super::open_data_dir(data, Fsync::EverySec, false)?;
    let loaded = load(&db, &name, iter, &header, &mut reader);
    if loaded.is_err() && db.restoring().contains(&name) {
        // Abandon it: nothing of it stays.
        let _ = db.drop_namespace(&name);
    }
    let ns = loaded.with_context(|| format!("restoring namespace {name:?}"))?;
    eprintln!(
        "urlseen: restored namespace {name:?} (dumped as {:?}): {} URLs, {} kept records",
        info.name,
        ns.len(),
        ns.stats().kept
    );
    drop(ns);
    db.close()?;
    Ok(())
}

/// Loads the dump; one chunk is read ahead, so the file's end is checked before its last
/// chunk makes the namespace visible.
fn load<R: Read>(
    db: &urlseen_engine::Db,
    name: &str,
    iter: i64,
    header: &[u8],
    reader: &mut DumpReader<R>,
) -> anyhow::Result<std::sync::Arc<urlseen_engine::Namespace>> {
    let mut pending = (iter, header.to_vec());
    loop {
        let next = reader.next_chunk()?;
        if let LoadStep::Finished(ns) = db.load_chunk(name, pending.0, &pending.1)? {
            if next.is_some() {
                drop(ns);
                db.drop_namespace(name)?;
                anyhow::bail!("the dump goes on after its last chunk");
            }
            return Ok(ns);
        }
        match next {
            Some(chunk) => pending = chunk,
            None => anyhow::bail!("the dump ends before its last chunk"),
        }
    }
}
