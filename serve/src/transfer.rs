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

/// Runs `export --url`: asks the running server at `url` (its admin address) to write its
/// published state into `out`, on its machine, while it goes on taking writes.
pub fn export_online(url: &str, out: &Path) -> Result<u8, exit::Failure> {
    let started = Instant::now();
    let out = std::path::absolute(out)
        .map_err(|e| exit::Failure::new(exit::FILES, anyhow!("{}: {e}", out.display())))?;
    let unreachable = |error: anyhow::Error| {
        exit::Failure::new(
            exit::DATA,
            error.context(format!(
                "asking the server at {url} to export (is it running, with --admin-listen at \
                 that address?)"
            )),
        )
    };
    let (status, body) =
        post(url, &format!("/_pure/export?out={}", percent(&out))).map_err(unreachable)?;
    let answer: serde_json::Value = serde_json::from_str(&body)
        .map_err(|_| unreachable(anyhow!("the answer was not JSON: {status} {body}")))?;
    if status != 200 {
        let error = answer["error"].as_str().unwrap_or(&body).to_string();
        let code = if status == 422 {
            exit::FILES
        } else {
            exit::DATA
        };
        return Err(exit::Failure::new(
            code,
            anyhow!("the server at {url} answered {status}: {error}"),
        ));
    }
    for note in answer["notes"].as_array().into_iter().flatten() {
        eprintln!("pure-serve: note: {}", note.as_str().unwrap_or_default());
    }
    let tables: Vec<TableRows> = answer["tables"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(table, rows)| TableRows {
            table: table.clone(),
            rows: rows.as_u64().unwrap_or(0),
        })
        .collect();
    println!(
        "exported {} from the server at {url} (LSN {}) into {} in {:.1} s: {}",
        rows(tables.iter().map(|t| t.rows).sum()),
        answer["lsn"],
        out.display(),
        started.elapsed().as_secs_f64(),
        per_table(&tables)
    );
    Ok(exit::OK)
}

/// `POST path` to `url` (`http://host:port` or `host:port`) with an empty body: the answer's
/// status and body. No timeout: an export takes as long as the state is large.
fn post(url: &str, path: &str) -> anyhow::Result<(u16, String)> {
    use std::io::Write as _;
    let address = url
        .strip_prefix("http://")
        .unwrap_or(url)
        .trim_end_matches('/');
    if address.contains('/') || url.starts_with("https://") {
        anyhow::bail!("--url is the admin address as http://HOST:PORT, not {url:?}");
    }
    let mut stream = std::net::TcpStream::connect(address)?;
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let answer = crate::client::read_answer(&mut stream)?;
    Ok((answer.status, answer.body))
}

/// A path as a query value: every byte but letters, digits and `/-_.~` percent-encoded.
fn percent(path: &Path) -> String {
    let mut out = String::new();
    for byte in path.as_os_str().as_encoded_bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => {
                out.push(*byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
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
