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
use urlseen_engine::{DumpReader, DumpWriter, Fsync, LoadStep};

/// Write a namespace of a data directory to a dump file (stdout unless --file).
///
/// The data directory is opened read-only: nothing in it changes. A directory a server has
/// open is refused (its lock is held): dump through the server with BF.SCANDUMP instead.
#[derive(Debug, clap::Args)]
pub struct DumpArgs {
    /// The data directory.
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    /// The namespace.
    #[arg(long)]
    ns: String,
    /// Write here instead of stdout (replaced only once the dump is complete).
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
}

pub fn dump(args: DumpArgs) -> anyhow::Result<()> {
    let db = super::open_data_dir_read_only(&args.data)?;
    let ns = db
        .namespace(&args.ns)
        .with_context(|| format!("no namespace {:?} in {}", args.ns, args.data.display()))?;
    let (chunks, bytes) = match &args.file {
        Some(path) => {
            let tmp = tmp_path(path);
            let written = File::create(&tmp)
                .map_err(anyhow::Error::from)
                .and_then(|f| write_dump(&ns, BufWriter::new(f)))
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
            let (_, chunks, bytes) = write_dump(&ns, BufWriter::new(out))?;
            (chunks, bytes)
        }
    };
    let s = ns.stats();
    eprintln!(
        "urlseen: dumped namespace {:?}: {} URLs, {} kept records, {chunks} chunks, {bytes} bytes",
        args.ns, s.count, s.kept
    );
    drop(ns);
    db.close()?;
    Ok(())
}

/// Writes every chunk of `ns` to `out`; returns it, the chunks and the bytes of chunks.
fn write_dump<W: Write>(ns: &urlseen_engine::Namespace, out: W) -> anyhow::Result<(W, u64, u64)> {
    let mut w = DumpWriter::new(out)?;
    let (mut iter, mut chunks, mut bytes) = (0i64, 0u64, 0u64);
    loop {
        let chunk = ns.dump_chunk(iter, MAX_CHUNK_BYTES)?;
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

/// Restore a namespace from a dump file (stdin unless --file) into a data directory.
///
/// The namespace must not exist. It is invisible until the whole dump is loaded, then
/// checkpointed and synced: a restore that fails (a damaged or cut file) or is killed leaves
/// no namespace behind.
#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// The data directory (created if it does not exist).
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
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
    super::check_fits_in_ram(&info.options)?;
    let db = super::open_data_dir(&args.data, Fsync::EverySec, false)?;
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
