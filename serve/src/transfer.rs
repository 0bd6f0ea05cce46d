//! `pure-serve import` and `pure-serve export`: rows in and out of a data directory as JSON
//! Lines, with a progress bar on stderr and a summary line on stdout. Parsing, building and
//! writing are the runtime's (`pure_runtime::import`, `pure_runtime::export`); this module
//! loads the app, draws the progress and prints.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pure_lang::{Environment, Limits};
use pure_runtime::{App, ImportOptions, Progress, TableRows, TransferError};

use crate::exit;

/// Runs `import`: loads `files` into the new directory `data`.
pub fn import(
    app_dir: &Path,
    data: &Path,
    files: &[PathBuf],
    log_capacity: u64,
) -> Result<u8, exit::Failure> {
    let app = load(app_dir)?;
    let options = ImportOptions {
        log_capacity_bytes: log_capacity,
        ..ImportOptions::default()
    };
    let started = Instant::now();
    let progress = Progress::default();
    let imported = with_progress(&progress, Kind::Import, || {
        pure_runtime::import(&app, data, files, &options, &progress)
    })
    .map_err(|error| failure(error, format!("importing into {}", data.display())))?;
    println!(
        "imported {} into {} in {:.1} s (LSN {}): {}",
        rows(imported.tables.iter().map(|t| t.rows).sum()),
        data.display(),
        started.elapsed().as_secs_f64(),
        imported.lsn,
        per_table(&imported.tables)
    );
    Ok(exit::OK)
}

/// Runs `export`: writes the tables of `data` into `out`.
pub fn export(app_dir: &Path, data: &Path, out: &Path) -> Result<u8, exit::Failure> {
    let app = load(app_dir)?;
    let started = Instant::now();
    let progress = Progress::default();
    let exported = with_progress(&progress, Kind::Export, || {
        pure_runtime::export(&app, data, out, &progress)
    })
    .map_err(|error| failure(error, format!("exporting {}", data.display())))?;
    for note in &exported.notes {
        eprintln!("pure-serve: note: {note}");
    }
    println!(
        "exported {} from {} (LSN {}) into {} in {:.1} s: {}",
        rows(exported.tables.iter().map(|t| t.rows).sum()),
        data.display(),
        exported.lsn,
        out.display(),
        started.elapsed().as_secs_f64(),
        per_table(&exported.tables)
    );
    Ok(exit::OK)
}

/// The app, for its tables: its settings and secrets need no values, as no handler runs.
fn load(app_dir: &Path) -> Result<App, exit::Failure> {
    App::load_in(app_dir, Limits::default(), &Environment::lenient())
        .with_context(|| format!("loading the app in {}", app_dir.display()))
        .map_err(|error| exit::Failure::new(exit::APP, error))
}

fn failure(error: TransferError, doing: String) -> exit::Failure {
    let code = match error {
        TransferError::Data(_) => exit::DATA,
        TransferError::Files(_) => exit::FILES,
    };
    exit::Failure::new(code, anyhow!(error).context(doing))
}

fn per_table(tables: &[TableRows]) -> String {
    if tables.is_empty() {
        return "the app declares no tables".to_string();
    }
    tables
        .iter()
        .map(|t| format!("{} {}", t.table, t.rows))
        .collect::<Vec<_>>()
        .join(", ")
}

fn rows(count: u64) -> String {
    format!(
        "{} row{}",
        thousands(count),
        if count == 1 { "" } else { "s" }
    )
}

/// 1234567 as "1,234,567".
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[derive(Clone, Copy)]
enum Kind {
    Import,
    Export,
}

/// Runs `work` while a thread draws `progress` on stderr (nothing when stderr is not a
/// terminal), and clears the bar once it returns.
fn with_progress<T>(progress: &Progress, kind: Kind, work: impl FnOnce() -> T) -> T {
    let target = if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(None, target);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{bar:20}] {percent}%")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        if !bar.is_hidden() {
            // Bytes read (import: the rows' sizes vary too much for a row count to say how far
            // it is), rows written (export).
            scope.spawn(|| draw(&bar, progress, kind, &done));
        }
        let result = work();
        done.store(true, Ordering::Relaxed);
        result
    })
}

fn draw(bar: &ProgressBar, progress: &Progress, kind: Kind, done: &AtomicBool) {
    // Rates count from the start of the stage that moves the rows.
    let (mut stage, mut since, mut rows_then) = ("", Instant::now(), 0);
    while !done.load(Ordering::Relaxed) {
        let rows = progress.rows.load(Ordering::Relaxed);
        let total = progress.total.load(Ordering::Relaxed);
        if progress.stage() != stage {
            (stage, since, rows_then) = (progress.stage(), Instant::now(), rows);
        }
        let seconds = since.elapsed().as_secs_f64().max(0.001);
        let rate = thousands(((rows - rows_then) as f64 / seconds) as u64);
        let (position, message) = match kind {
            Kind::Import if stage == "reading" => (
                progress.bytes.load(Ordering::Relaxed),
                format!("{stage}: {} rows, {rate} rows/s", thousands(rows)),
            ),
            Kind::Export if stage == "writing" => (
                rows,
                format!(
                    "{stage}: {}/{} rows, {rate} rows/s",
                    thousands(rows),
                    thousands(total)
                ),
            ),
            Kind::Import => (total, format!("{stage}: {} rows", thousands(rows))),
            Kind::Export => (0, stage.to_string()),
        };
        bar.set_length(total.max(1));
        bar.set_position(position);
        bar.set_message(message);
        std::thread::sleep(Duration::from_millis(100));
    }
    bar.finish_and_clear();
}
