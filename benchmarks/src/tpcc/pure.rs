//! The Pure side of the TPC-C harness: the population as `pure-serve import` files, and a
//! transaction sent to the app over HTTP (the server and the client are the harness's).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::input::Txn;
use super::population;
use super::rows::{Row, TABLES};
use super::Answer;
use crate::harness::http::Client;

/// Writes the population of `warehouses` as `out/<table>.jsonl` (the nine tables; the app's
/// indexes are built from them when the server starts); returns the files and the rows written
/// per file.
pub fn write_population(
    out: &Path,
    seed: u64,
    warehouses: i64,
    progress: &indicatif::ProgressBar,
) -> Result<Vec<(PathBuf, u64)>> {
    std::fs::create_dir_all(out).with_context(|| format!("create {}", out.display()))?;
    let mut writers = Vec::new();
    for table in TABLES {
        let path = out.join(format!("{table}.jsonl"));
        let file =
            std::fs::File::create(&path).with_context(|| format!("create {}", path.display()))?;
        writers.push((path, BufWriter::with_capacity(1 << 20, file), 0u64));
    }
    let mut failed: Option<std::io::Error> = None;
    population::generate(seed, warehouses, &mut |row: Row| {
        if failed.is_some() {
            return;
        }
        let slot = TABLES
            .iter()
            .position(|t| *t == row.table())
            .expect("a table");
        let (_, writer, rows) = &mut writers[slot];
        *rows += 1;
        if let Err(e) = writeln!(writer, "{}", row.line()) {
            failed = Some(e);
        }
        progress.inc(1);
    });
    if let Some(e) = failed {
        return Err(e).context("write the population");
    }
    let mut written = Vec::new();
    for (path, mut writer, rows) in writers {
        writer
            .flush()
            .with_context(|| format!("write {}", path.display()))?;
        written.push((path, rows));
    }
    Ok(written)
}

/// Sends `txn` with the timestamp `now` and returns the app's answer.
pub fn call(client: &mut Client, txn: &Txn, now: i64) -> Result<Answer> {
    let (method, path, body) = txn.http(now);
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let (status, body) = client.send(method, &path, &body)?;
    Ok(Answer { status, body })
}
