//! `urlseen canon`: the canonical form of each URL, one per line.

use std::io::{self, BufWriter, Write};

use anyhow::Context;
use serde::Serialize;
use urlseen_canon::Canonicalizer;

use crate::args::CanonArgs;
use crate::lines::{LineBatch, LineBatches, write_line};

/// Print the canonical form of each URL read from stdin, one per line.
///
/// Invalid URLs are reported on stderr (with their line number) and the command exits 1 at the
/// end. With --jsonl, each input line is a JSON string and each output line is
/// {"input":…,"canonical":…} or {"input":…,"error":…}; errors are then data, not failures.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    canon: CanonArgs,
    /// Read JSON strings and write JSON objects, one per line.
    #[arg(long)]
    jsonl: bool,
}

#[derive(Serialize)]
struct JsonOut<'a> {
    input: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    canonical: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let canon = Canonicalizer::new(args.canon.options());
    let mut input = LineBatches::new(crate::lines::stdin_reader());
    let mut out = BufWriter::new(io::stdout().lock());
    let mut err = io::stderr().lock();
    let mut batch = LineBatch::default();
    let mut buf = String::new();
    let mut failures = 0u64;

    while input.next_batch(&mut batch).context("reading stdin")? {
        for line in &batch {
            if args.jsonl {
                if line.bytes.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let input: String = match serde_json::from_slice(&line.bytes) {
                    Ok(s) => s,
                    Err(e) => {
                        let text = String::from_utf8_lossy(&line.bytes);
                        let error = Some(format!("line {} is not a JSON string: {e}", line.no));
                        serde_json::to_writer(
                            &mut out,
                            &JsonOut { input: &text, canonical: None, error },
                        )?;
                        out.write_all(b"\n")?;
                        continue;
                    }
                };
                let result = canon.canonicalize_into(&input, &mut buf);
                let (canonical, error) = match &result {
                    Ok(()) => (Some(buf.as_str()), None),
                    Err(e) => (None, Some(e.to_string())),
                };
                serde_json::to_writer(&mut out, &JsonOut { input: &input, canonical, error })?;
                out.write_all(b"\n")?;
                continue;
            }
            let result = std::str::from_utf8(&line.bytes)
                .map_err(|_| "not valid UTF-8".to_owned())
                .and_then(|url| canon.canonicalize_into(url, &mut buf).map_err(|e| e.to_string()));
            match result {
                Ok(()) => write_line(&mut out, buf.as_bytes())?,
                Err(reason) => {
                    failures += 1;
                    writeln!(err, "urlseen: line {}: {reason}", line.no)?;
                }
            }
        }
        if input.would_block() {
            out.flush()?;
        }
    }
    out.flush()?;
    if failures > 0 {
        anyhow::bail!("{failures} line(s) could not be canonicalized");
    }
    Ok(())
}
