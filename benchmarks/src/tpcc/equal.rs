//! `pure-bench tpcc-equal`: one stream of transactions through Pure (pure-serve over HTTP),
//! SQLite committing each transaction and SQLite committing in groups, one transaction at a
//! time; every answer compared, then all nine tables row by row, then the consistency
//! conditions on each engine's tables. Anything unequal is printed (the first difference) and
//! fails the command.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::check::{self, Tallies};
use super::input::{Kind, Terminal};
use super::population::LOAD_TIME;
use super::rows::{Db, TABLES};
use super::{pure, sqlite};
use crate::harness::http::Client;
use crate::harness::progress;
use crate::harness::serve::{self, Server};
use crate::harness::sqlite::SqliteOptions;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Transactions to send (one at a time, each to every engine).
    #[arg(long, default_value_t = 2_000)]
    transactions: u64,
    /// Warehouses of the population.
    #[arg(long, default_value_t = 1)]
    warehouses: i64,
    /// Seed of the population and of the stream: the same seed, the same rows and requests.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Working directory (created; must be empty): the population files, Pure's data directory,
    /// the SQLite files and every dump, left there for inspection.
    #[arg(long)]
    dir: PathBuf,
    /// The TPC-C app directory.
    #[arg(long, default_value = "apps/tpcc")]
    app: PathBuf,
    /// Run pure-serve with --sync always (without it, --sync none: equality does not depend on
    /// syncing, and the run is shorter).
    #[arg(long)]
    sync: bool,
    /// SQLite's settings (both SQLite engines; equality must hold under any of them).
    #[command(flatten)]
    sqlite: SqliteOptions,
}

/// The three engines of an equality run.
const ENGINES: [&str; 3] = ["pure", "sqlite", "sqlite-grouped"];

pub fn run(args: Args) -> Result<()> {
    let started = Instant::now();
    let dir = &args.dir;
    if dir.exists() && std::fs::read_dir(dir)?.next().is_some() {
        bail!("{} is not empty: give a new directory", dir.display());
    }
    std::fs::create_dir_all(dir)?;
    let app = args
        .app
        .canonicalize()
        .with_context(|| format!("app directory {}", args.app.display()))?;

    eprintln!(
        "tpcc-equal: W={} seed={} transactions={}",
        args.warehouses, args.seed, args.transactions
    );
    let engines = load(&args, &app)?;
    // The loads must already be equal, and consistent.
    let load_dumps = engines.dump(&app, &dir.join("load"))?;
    compare_all(&load_dumps)?;
    check_all(&load_dumps, None)?;
    eprintln!(
        "loaded equal and consistent: {}",
        counts_line(&load_dumps[0])?
    );

    let (tallies, per_kind) = send_stream(&args, &app, &engines)?;
    let run_dumps = engines.dump(&app, &dir.join("run"))?;
    compare_all(&run_dumps)?;
    check_all(&run_dumps, Some(&tallies))?;
    round_trip(&app, &run_dumps[0], dir)?;

    println!(
        "equal: {} transactions at W={} (seed {}): every answer and all nine tables are the same in {}",
        args.transactions,
        args.warehouses,
        args.seed,
        ENGINES.join(", ")
    );
    println!("{:<14} {:>8} {:>10}", "transaction", "count", "rollbacks");
    for (kind, (count, rollbacks)) in &per_kind {
        println!("{:<14} {:>8} {:>10}", kind.name(), count, rollbacks);
    }
    println!("tables after the run: {}", counts_line(&run_dumps[0])?);
    println!(
        "consistency: all {} conditions hold on every engine",
        check::CONDITIONS.len()
    );
    println!("round trip: Pure's export, imported into a new directory, exports the same files");
    println!("took {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Per transaction type: how many were sent, and how many of them rolled back.
type PerKind = BTreeMap<Kind, (u64, u64)>;

/// Where the three engines keep their tables.
struct Engines {
    pure_data: PathBuf,
    sqlite_file: PathBuf,
    grouped_file: PathBuf,
}

impl Engines {
    fn dump(&self, app: &Path, out: &Path) -> Result<[PathBuf; 3]> {
        dump_all(
            app,
            &self.pure_data,
            &self.sqlite_file,
            &self.grouped_file,
            out,
        )
    }
}

/// The population of the seed into each engine: Pure by `pure-serve import` of the files,
/// SQLite by its loader, grouped SQLite as a copy of that file.
fn load(args: &Args, app: &Path) -> Result<Engines> {
    let dir = &args.dir;
    let rows = dir.join("population");
    let bar = progress::counter("population rows");
    let files = pure::write_population(&rows, args.seed, args.warehouses, &bar)?;
    bar.finish_and_clear();
    let pure_data = dir.join("pure");
    let paths: Vec<PathBuf> = files.iter().map(|(p, _)| p.clone()).collect();
    serve::import(app, &pure_data, &paths)?;
    let settings = args.sqlite.settings();
    let sqlite_file = dir.join("sqlite.db");
    let report = sqlite::load(&sqlite_file, &settings, args.seed, args.warehouses, true)?;
    eprint!("sqlite: {report}");
    let grouped_file = dir.join("sqlite-grouped.db");
    std::fs::copy(&sqlite_file, &grouped_file).context("copy the loaded SQLite file")?;
    Ok(Engines {
        pure_data,
        sqlite_file,
        grouped_file,
    })
}

/// Sends the stream to the three engines, transaction by transaction, and fails at the first
/// answer that differs; returns the tallies of what the engines did, and per kind the count
/// and the rollbacks.
fn send_stream(args: &Args, app: &Path, engines: &Engines) -> Result<(Tallies, PerKind)> {
    let settings = args.sqlite.settings();
    let server_flags: &[&str] = if args.sync { &[] } else { &["--sync", "none"] };
    let server = Server::start(app, &engines.pure_data, server_flags)?;
    let mut client = Client::connect(server.address)?;
    let mut session = sqlite::Session::open(&engines.sqlite_file, &settings)?;
    let grouped = sqlite::Grouped::start(&engines.grouped_file, &settings, 64)?;

    // One sender, many terminals: transaction k comes from terminal k mod 10W, so every
    // warehouse is home to some of the stream.
    let terminals_n = (10 * args.warehouses) as u64;
    let mut terminals: Vec<Terminal> = (0..terminals_n)
        .map(|i| Terminal::new(args.seed, i, args.warehouses))
        .collect();
    let mut tallies = Tallies::default();
    let mut per_kind = PerKind::new();
    let bar = progress::counter("transactions");
    bar.set_length(args.transactions);
    for k in 0..args.transactions {
        let txn = terminals[(k % terminals_n) as usize].next();
        let now = LOAD_TIME + (k as i64 + 1) * 1_000;
        let answers = [
            pure::call(&mut client, &txn, now).context("pure")?,
            session.execute(&txn, now).context("sqlite")?,
            grouped.execute(&txn, now).context("sqlite-grouped")?,
        ];
        for (engine, answer) in ENGINES.iter().zip(&answers).skip(1) {
            if *answer != answers[0] {
                bar.finish_and_clear();
                bail!(
                    "transaction {k} ({:?}) answered differently:\n  pure: {} {}\n  {engine}: {} {}\n  request: {txn:?}",
                    txn.kind(),
                    answers[0].status,
                    answers[0].body,
                    answer.status,
                    answer.body
                );
            }
        }
        let entry = per_kind.entry(txn.kind()).or_default();
        entry.0 += 1;
        entry.1 += u64::from(tallies.count(&txn, &answers[0])?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    server.stop()?;
    drop(session);
    drop(grouped);
    Ok((tallies, per_kind))
}

/// Dumps each engine's tables into `out/<engine>/`: Pure by `pure-serve export` of its (stopped)
/// data directory, which recovers it; SQLite by a query per table.
fn dump_all(
    app: &Path,
    pure_data: &Path,
    sqlite_file: &Path,
    grouped_file: &Path,
    out: &Path,
) -> Result<[PathBuf; 3]> {
    let dirs = ENGINES.map(|e| out.join(e));
    serve::export(app, pure_data, &dirs[0])?;
    sqlite::dump(sqlite_file, &dirs[1])?;
    sqlite::dump(grouped_file, &dirs[2])?;
    Ok(dirs)
}

/// Imports Pure's export into a new data directory and exports that again: the files must be
/// the same, byte for byte.
fn round_trip(app: &Path, export: &Path, dir: &Path) -> Result<()> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(export)?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    files.sort();
    let again = dir.join("pure-again");
    serve::import(app, &again, &files)?;
    let exported = dir.join("run").join("pure-again");
    serve::export(app, &again, &exported)?;
    for file in &files {
        let table = file
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("a table name");
        if let Some(difference) = first_difference(export, &exported, table)? {
            bail!("export, import, export: {table} differs: {difference}");
        }
    }
    let back = std::fs::read_dir(&exported)?.count();
    if back != files.len() {
        bail!("export, import, export: {} files, then {back}", files.len());
    }
    Ok(())
}

fn compare_all(dumps: &[PathBuf; 3]) -> Result<()> {
    for (engine, other) in ENGINES.iter().zip(dumps).skip(1) {
        for table in TABLES {
            if let Some(difference) = first_difference(&dumps[0], other, table)? {
                bail!("table {table} differs between pure and {engine}: {difference}");
            }
        }
    }
    Ok(())
}

/// The first line where `a/<table>.jsonl` and `b/<table>.jsonl` differ, if any. Both are in key
/// order, one row a line, in one format: equal tables are equal files.
fn first_difference(a: &Path, b: &Path, table: &str) -> Result<Option<String>> {
    let open = |dir: &Path| -> Result<std::io::Lines<std::io::BufReader<std::fs::File>>> {
        let path = dir.join(format!("{table}.jsonl"));
        let file =
            std::fs::File::open(&path).with_context(|| format!("open {}", path.display()))?;
        Ok(std::io::BufReader::with_capacity(1 << 20, file).lines())
    };
    let (mut left, mut right) = (open(a)?, open(b)?);
    for n in 1.. {
        match (left.next().transpose()?, right.next().transpose()?) {
            (None, None) => return Ok(None),
            (Some(l), Some(r)) if l == r => continue,
            (l, r) => {
                let show = |s: Option<String>| s.unwrap_or_else(|| "(no more rows)".into());
                return Ok(Some(format!(
                    "row {n}:\n  pure:  {}\n  other: {}",
                    show(l),
                    show(r)
                )));
            }
        }
    }
    unreachable!()
}

fn check_all(dumps: &[PathBuf; 3], tallies: Option<&Tallies>) -> Result<()> {
    for (engine, dir) in ENGINES.iter().zip(dumps) {
        let db = Db::read_dir(dir)?;
        let failures = check::check(&db, tallies);
        if !failures.is_empty() {
            let list: Vec<String> = failures.iter().map(|f| format!("  {f}")).collect();
            bail!(
                "{engine}: {} consistency condition(s) failed {}:\n{}",
                failures.len(),
                if tallies.is_some() {
                    "after the run"
                } else {
                    "after the load"
                },
                list.join("\n")
            );
        }
    }
    Ok(())
}

/// "warehouse 1, district 10, ...": rows per table of a dump.
fn counts_line(dir: &Path) -> Result<String> {
    let mut parts = Vec::new();
    for table in TABLES {
        let path = dir.join(format!("{table}.jsonl"));
        let file =
            std::fs::File::open(&path).with_context(|| format!("open {}", path.display()))?;
        let n = std::io::BufReader::new(file).lines().count();
        parts.push(format!("{table} {n}"));
    }
    Ok(parts.join(", "))
}
