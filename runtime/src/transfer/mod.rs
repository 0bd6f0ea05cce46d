//! Rows in and out of a data directory as JSON Lines: `import` (what `pure-serve import` loads)
//! and `export` (what `pure-serve export` writes).
//!
//! A file holds one table, `<table>.jsonl`, one row a line:
//!
//! ```text
//! {"key":<int | string | [int | string, ...]>,"row":{"<field>":<value>,...}}
//! ```
//!
//! `import` builds every table in memory, then writes them into a new data directory as one
//! checkpoint covering LSN 1 (`pure_store::seed`, as `salvage` does): the directory either holds
//! all of them, durably, or is left as it was. `export` decodes a stopped server's directory
//! as `inspect` does (the newest checkpoint and the log after it, read only, under the
//! directory's lock) and writes each table the app declares, in key order, every declared field
//! in declared order. What export writes, import reads back to the same state, and exporting
//! that again gives the same bytes.
//!
//! It must not know a running runtime: it works on a directory nobody has open.

mod export;
mod import;
mod line;

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

pub use export::{export, export_state, Exported};
pub use import::{import, ImportOptions, Imported};

/// Lines parsed or written between updates of the shared progress counters.
const PROGRESS_EVERY: u64 = 1024;

/// The longest line `import` reads and `export` writes, without its newline: 128 MiB. A line
/// is one row. A row a handler writes takes at most 4 MiB in the log (one write's changes), and
/// JSON takes at most 6 bytes for one of its bytes (a control character in a string is
/// `\u0000`): 24 MiB. A field may hold as many bytes of strings as a handler may, at most
/// 16 MiB (the cap of `string_bytes`): 96 MiB written as escapes. 128 MiB holds either. A
/// longer line is refused once that much of it is read, so a file without newlines costs at
/// most this much memory per file read at once, not its size (issue 36: a 300 MB line was read
/// whole, 821 MiB at its peak); export refuses a row it could only write longer, so that it
/// never writes a file import refuses.
pub const LINE_BYTES_MAX: usize = 128 << 20;

/// Why an import or an export did nothing (or stopped and removed what it had written).
#[derive(Debug)]
pub enum TransferError {
    /// The data directory: it holds a store already (import), holds none or does not open
    /// cleanly (export), is in use by another process, or cannot be read or written.
    Data(String),
    /// One of the files: an input file refused (the message names file:line), or the output
    /// directory not empty or not writable.
    Files(String),
}

impl fmt::Display for TransferError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransferError::Data(message) | TransferError::Files(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for TransferError {}

/// What an import or export has done so far, for a progress display on another thread.
#[derive(Default)]
pub struct Progress {
    /// Bytes of the input files read (import).
    pub bytes: AtomicU64,
    /// Rows parsed (import) or written (export).
    pub rows: AtomicU64,
    /// What `bytes` (import) or `rows` (export) will reach, once known.
    pub total: AtomicU64,
    stage: Mutex<&'static str>,
}

impl Progress {
    /// What is being done now: "reading", "writing the checkpoint", ...
    pub fn stage(&self) -> &'static str {
        *self.stage.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_stage(&self, stage: &'static str) {
        *self.stage.lock().unwrap_or_else(|e| e.into_inner()) = stage;
    }
}

/// Rows per table, in the app's declared order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableRows {
    pub table: String,
    pub rows: u64,
}

/// Runs `work` on each of `items` on up to `threads` threads, taking them in the order given
/// (largest first, so that the last to finish is a small one). Once one fails (`Err`), no
/// more are started, and `stop` is set for those running to look at. The results, by index:
/// `None` for items never started.
fn in_parallel<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    work: impl Fn(&T, &AtomicBool) -> Result<R, String> + Sync,
) -> Vec<Option<Result<R, String>>> {
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let results = Mutex::new((0..items.len()).map(|_| None).collect::<Vec<_>>());
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, items.len().max(1)) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= items.len() || stop.load(Ordering::Relaxed) {
                    break;
                }
                let result = work(&items[index], &stop);
                if result.is_err() {
                    stop.store(true, Ordering::Relaxed);
                }
                results.lock().unwrap_or_else(|e| e.into_inner())[index] = Some(result);
            });
        }
    });
    results.into_inner().unwrap_or_else(|e| e.into_inner())
}
