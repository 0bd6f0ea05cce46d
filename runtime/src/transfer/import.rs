//! `import`: every file parsed (in parallel, a file a thread) into its table's rows, then the
//! tables written as one checkpoint of a new store.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pure_lang::{App, Fields, Key, Limits, RowSet, Schema, TableSchema, Tables};
use pure_store::{Io, Lsn, RealIo, StoreOptions, SyncMode};

use super::line::parse_line;
use super::{in_parallel, Progress, TableRows, TransferError, LINE_BYTES_MAX, PROGRESS_EVERY};
use crate::checkpoint::write_image;
use crate::options::RuntimeOptions;
use crate::salvage::inspect;

/// The LSN an imported state is written as: a checkpoint needs one above 0, and a store seeded
/// at 0 holds no checkpoint. The first write after an import is LSN 2.
const IMPORT_LSN: u64 = 1;

#[derive(Clone, Debug)]
pub struct ImportOptions {
    /// Space preallocated for the new directory's log (the server keeps the log it finds).
    pub log_capacity_bytes: u64,
    /// Files parsed at once (each file on one thread).
    pub threads: usize,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            log_capacity_bytes: RuntimeOptions::default().log_capacity_bytes,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
        }
    }
}

/// What an import wrote.
#[derive(Debug)]
pub struct Imported {
    /// Every table the app declares, with the rows loaded into it.
    pub tables: Vec<TableRows>,
    /// The LSN the state was written as (the server's first write is the next).
    pub lsn: u64,
}

/// Loads `files` (`<table>.jsonl` each, tables of `app`) into `data_dir`, which must hold no
/// store (missing or empty is fine), as one checkpoint. On any error nothing is written.
pub fn import(
    app: &App,
    data_dir: &Path,
    files: &[PathBuf],
    options: &ImportOptions,
    progress: &Progress,
) -> Result<Imported, TransferError> {
    let schema = app.schema();
    let sources = sources(schema, files)?;
    let existed = refuse_a_store(data_dir)?;
    // Held until the store is in place: no server opens the directory meanwhile, and no
    // other import of it shares the staging directory.
    let claim = Claim::take(data_dir, existed)?;
    progress
        .total
        .store(sources.iter().map(|s| s.bytes).sum(), Ordering::Relaxed);
    progress.set_stage("reading");
    let mut tables = read_sources(schema, app.limits(), &sources, options.threads, progress)?;
    // The server builds the app's indexes from these rows at start: rows that one cannot hold
    // (a duplicate in a unique index) would be imported only to keep it from starting.
    if !app.indexes().is_empty() {
        progress.set_stage("checking the indexes");
        tables
            .snapshot()
            .set_indexes(app.indexes().to_vec())
            .map_err(|e| {
                TransferError::Files(format!(
                    "the rows do not fit the app's indexes: {e}; nothing was imported"
                ))
            })?;
    }
    let counts: Vec<TableRows> = schema
        .tables
        .iter()
        .enumerate()
        .map(|(id, table)| TableRows {
            table: table.name.clone(),
            rows: tables.len(id as u32) as u64,
        })
        .collect();
    progress.set_stage("writing the checkpoint");
    let store_options = StoreOptions {
        sync: SyncMode::Always,
        log_capacity_bytes: options.log_capacity_bytes,
        // A log that the server may grow: its first size in whole growth units.
        log_capacity_max_bytes: RuntimeOptions::default().log_capacity_max_bytes,
    };
    // The store is written whole beside the data directory and moved into it only once
    // durable, checkpoint first and log last: a crash at any point leaves the directory as it
    // was, or holding a checkpoint without a log, which no server opens (never a store with
    // part of the rows, nor an empty one that looks fine).
    let stage = stage_dir(data_dir);
    if stage.exists() {
        // Left by an import that crashed: it was never moved into place.
        std::fs::remove_dir_all(&stage).map_err(|e| {
            TransferError::Data(format!(
                "removing {} (left by an earlier import): {e}",
                stage.display()
            ))
        })?;
    }
    let seeded = pure_store::seed(
        Arc::new(RealIo),
        &stage,
        store_options,
        Lsn(IMPORT_LSN),
        |writer| write_image(writer, schema, &tables).map(|_| ()),
    );
    drop(tables);
    let installed = seeded
        .map_err(|error| format!("writing {}: {error}", stage.display()))
        .and_then(|()| install(&stage, data_dir));
    if let Err(error) = installed {
        let _ = std::fs::remove_dir_all(&stage);
        return Err(TransferError::Data(format!(
            "{error}; nothing was imported into {}",
            data_dir.display()
        )));
    }
    // The lock goes before the check, which takes it again as a server would.
    claim.keep();
    progress.set_stage("checking the new directory");
    check_imported(data_dir, &counts)?;
    Ok(Imported {
        tables: counts,
        lsn: IMPORT_LSN,
    })
}

/// Reads the new directory as the server would open it: it must open cleanly with exactly the
/// rows imported.
fn check_imported(data_dir: &Path, counts: &[TableRows]) -> Result<(), TransferError> {
    let written = inspect(data_dir)
        .map_err(|e| TransferError::Data(format!("reading back {}: {e}", data_dir.display())))?;
    let expected: Vec<(String, u64)> = counts.iter().map(|t| (t.table.clone(), t.rows)).collect();
    if let Some(refusal) = written.open_refusal() {
        return Err(TransferError::Data(format!(
            "{} was written but does not open cleanly: {refusal} (a bug in Pure: remove the \
             directory and report it)",
            data_dir.display()
        )));
    }
    if written.decoded_lsn != IMPORT_LSN || written.tables != expected {
        return Err(TransferError::Data(format!(
            "{} was written but reads back as LSN {} with {:?}, not LSN {IMPORT_LSN} with {:?} \
             (a bug in Pure: remove the directory and report it)",
            data_dir.display(),
            written.decoded_lsn,
            written.tables,
            expected
        )));
    }
    Ok(())
}

/// An input file and the table it fills.
struct Source {
    path: PathBuf,
    table: u32,
    bytes: u64,
    /// Its place on the command line (errors are reported in that order).
    order: usize,
}

/// Names each file's table (its stem, a declared table, each at most once) and checks that
/// it can be read, before anything is parsed.
fn sources(schema: &Schema, files: &[PathBuf]) -> Result<Vec<Source>, TransferError> {
    let declared = || {
        schema
            .tables
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut sources: Vec<Source> = Vec::with_capacity(files.len());
    for (order, path) in files.iter().enumerate() {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some(stem) = name.strip_suffix(".jsonl") else {
            return Err(TransferError::Files(format!(
                "{}: an input file is named <table>.jsonl, for one of the app's tables ({})",
                path.display(),
                declared()
            )));
        };
        let Some(table) = schema.table_id(stem) else {
            return Err(TransferError::Files(format!(
                "{}: the app declares no table {stem:?} (its tables: {}); name each file \
                 <table>.jsonl after a table of app.json",
                path.display(),
                declared()
            )));
        };
        if let Some(other) = sources.iter().find(|s| s.table == table) {
            return Err(TransferError::Files(format!(
                "{} and {} both hold table {stem}: give each table one file",
                other.path.display(),
                path.display()
            )));
        }
        let metadata = std::fs::metadata(path)
            .map_err(|e| TransferError::Files(format!("{}: {e}", path.display())))?;
        if !metadata.is_file() {
            return Err(TransferError::Files(format!(
                "{}: not a file",
                path.display()
            )));
        }
        sources.push(Source {
            path: path.clone(),
            table,
            bytes: metadata.len(),
            order,
        });
    }
    Ok(sources)
}

/// Refuses a data directory that holds a store (a log or a checkpoint) or is not a directory,
/// before the files are read; `seed` checks again under the lock. Returns whether it exists.
fn refuse_a_store(data_dir: &Path) -> Result<bool, TransferError> {
    let entries = match std::fs::read_dir(data_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => {
            return Err(TransferError::Data(format!(
                "{}: {e} (import writes into a new or empty directory)",
                data_dir.display()
            )))
        }
    };
    for entry in entries {
        let entry =
            entry.map_err(|e| TransferError::Data(format!("{}: {e}", data_dir.display())))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if is_store_file(&name) {
            return Err(TransferError::Data(format!(
                "{} holds a store already ({name}): import writes only into a new or empty \
                 directory, so that it never mixes its rows with a state it did not write; \
                 choose another --data. (An import stopped by a crash while moving its store into \
                 place can leave a checkpoint without its log, which no server opens: \
                 `pure-serve check --data {}` says so, and the directory can be removed.)",
                data_dir.display(),
                data_dir.display()
            )));
        }
    }
    Ok(true)
}

/// The files that make a directory a store, as `pure_store::seed` sees them.
fn is_store_file(name: &str) -> bool {
    name == pure_store::LOG_FILE_NAME
        || name
            .strip_prefix("checkpoint-")
            .and_then(|rest| rest.strip_suffix(".ckpt"))
            .is_some_and(|digits| digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
}

/// Where a store is written before it moves into `data_dir`: beside it, so on the same file
/// system, where a rename is atomic.
fn stage_dir(data_dir: &Path) -> PathBuf {
    let name = data_dir
        .file_name()
        .map_or_else(|| "data".into(), |n| n.to_string_lossy().into_owned());
    let parent = match data_dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    parent.join(format!(".{name}.importing"))
}

/// The data directory, created if missing and locked for the whole import. Dropped without
/// [`Claim::keep`], it removes the directory again if the import created it.
struct Claim {
    dir: PathBuf,
    existed: bool,
    lock: Option<pure_store::DirLock>,
    keep: bool,
}

impl Claim {
    fn take(dir: &Path, existed: bool) -> Result<Claim, TransferError> {
        let io = RealIo;
        io.create_dir_all(dir)
            .map_err(|e| TransferError::Data(format!("creating {}: {e}", dir.display())))?;
        let mut claim = Claim {
            dir: dir.to_path_buf(),
            existed,
            lock: None,
            keep: false,
        };
        claim.lock = Some(io.lock_dir(dir).map_err(|e| {
            TransferError::Data(match e {
                pure_store::LockError::Held { pid } => format!(
                    "{} is in use by another process{} (a server, or another import): import \
                     writes only into a directory nothing else has open",
                    dir.display(),
                    pid.map(|p| format!(" (PID {p})")).unwrap_or_default()
                ),
                pure_store::LockError::Io(e) => format!("locking {}: {e}", dir.display()),
            })
        })?);
        // Checked again under the lock: a server may have started there meanwhile.
        refuse_a_store(dir)?;
        Ok(claim)
    }

    fn keep(mut self) {
        self.keep = true;
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // Only the import that locked the directory removes it: one refused because another
        // holds the lock would otherwise remove the directory (empty until the store is moved
        // in) from under the import that holds it.
        if let Some(lock) = self.lock.take() {
            if !self.keep && !self.existed {
                let _ = std::fs::remove_dir(&self.dir);
            }
            drop(lock);
        }
    }
}

/// Moves the durable store in `stage` into `data_dir` (whose lock the caller holds): the
/// checkpoint first, the log last, then the directory entries synced.
fn install(stage: &Path, data_dir: &Path) -> Result<(), String> {
    let io = RealIo;
    let mut names = io
        .list_dir(stage)
        .map_err(|e| format!("listing {}: {e}", stage.display()))?;
    names.sort_by_key(|n| n == pure_store::LOG_FILE_NAME);
    for name in &names {
        io.rename(&stage.join(name), &data_dir.join(name))
            .map_err(|e| format!("moving {name} into {}: {e}", data_dir.display()))?;
    }
    io.sync_dir(data_dir)
        .map_err(|e| format!("syncing {}: {e}", data_dir.display()))?;
    let _ = std::fs::remove_dir(stage);
    if let Some(parent) = stage.parent() {
        let _ = io.sync_dir(parent);
    }
    Ok(())
}

/// Parses every source, on up to `threads` threads (largest files first), into the tables.
fn read_sources(
    schema: &Schema,
    limits: &Limits,
    sources: &[Source],
    threads: usize,
    progress: &Progress,
) -> Result<Tables, TransferError> {
    let mut order: Vec<&Source> = sources.iter().collect();
    order.sort_by_key(|s| std::cmp::Reverse(s.bytes));
    let results = in_parallel(&order, threads, |source, stop| {
        read_file(
            &source.path,
            schema.table(source.table),
            limits,
            progress,
            stop,
        )
    });
    let mut tables = Tables::new(schema.tables.len());
    // Errors in command-line order; an empty one is a file stopped by another's error.
    let mut errors: Vec<(usize, String)> = Vec::new();
    for (source, result) in order.iter().zip(results) {
        match result {
            Some(Ok(rows)) => tables.set_rows(source.table, rows),
            Some(Err(error)) if !error.is_empty() => errors.push((source.order, error)),
            _ => {}
        }
    }
    errors.sort();
    match errors.into_iter().next() {
        Some((_, first)) => Err(TransferError::Files(format!(
            "{first}; nothing was imported"
        ))),
        None => Ok(tables),
    }
}

/// Parses one file into its table's rows. An error names file:line (an empty error: stopped
/// because another file failed).
fn read_file(
    path: &Path,
    table: &TableSchema,
    limits: &Limits,
    progress: &Progress,
    failed: &AtomicBool,
) -> Result<RowSet, String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file_bytes = file.metadata().map_or(0, |m| m.len());
    let mut lines = Lines::new(BufReader::with_capacity(1 << 20, file), LINE_BYTES_MAX);
    // Room for the longest line the file can hold, reserved once: address space, of which
    // only the pages a line fills are ever touched, and no copy as a long line grows (growing
    // by doubling held a line up to the maximum in twice its memory).
    let capacity = usize::try_from(file_bytes).map_or(LINE_BYTES_MAX, |n| n.min(LINE_BYTES_MAX));
    let mut line = Vec::with_capacity(capacity + 1);
    let mut read = RowSet::new();
    let mut number = 0u64;
    let (mut rows, mut bytes) = (0u64, 0u64);
    loop {
        let next = lines
            .read(&mut line)
            .map_err(|e| format!("{}:{}: {e}", path.display(), number + 1))?;
        number += 1;
        match next {
            Next::Line => {}
            Next::End => break,
            Next::TooLong => return Err(too_long(path, number)),
        }
        bytes += line.len() as u64;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let (key, fields) = parse_line(&line, table, limits)
            .map_err(|message| format!("{}:{number}:{message}", path.display()))?;
        // One walk of the tree: a duplicate is an error, so what it replaced does not matter.
        if read
            .insert(key.clone(), Fields::from_values(&fields))
            .is_some()
        {
            let first = first_line_with(path, table, limits, &key, number);
            return Err(format!(
                "{}:{number}: the key {} appears twice in table {}: first at line {first}, \
                 again at line {number}; each key may appear once per table",
                path.display(),
                key.to_json(),
                table.name,
            ));
        }
        rows += 1;
        if rows % PROGRESS_EVERY == 0 {
            progress.rows.fetch_add(PROGRESS_EVERY, Ordering::Relaxed);
            progress.bytes.fetch_add(bytes, Ordering::Relaxed);
            bytes = 0;
            if failed.load(Ordering::Relaxed) {
                return Err(String::new());
            }
        }
    }
    progress
        .rows
        .fetch_add(rows % PROGRESS_EVERY, Ordering::Relaxed);
    progress.bytes.fetch_add(bytes, Ordering::Relaxed);
    Ok(read)
}

/// The first line before `before` of a file holding `key` (a duplicate was found at `before`).
fn first_line_with(
    path: &Path,
    table: &TableSchema,
    limits: &Limits,
    key: &Key,
    before: u64,
) -> u64 {
    let Ok(file) = File::open(path) else { return 0 };
    let mut lines = Lines::new(BufReader::new(file), LINE_BYTES_MAX);
    let mut line = Vec::new();
    for number in 1..before {
        if !matches!(lines.read(&mut line), Ok(Next::Line)) {
            break;
        }
        if let Ok((k, _)) = parse_line(&line, table, limits) {
            if &k == key {
                return number;
            }
        }
    }
    0
}

fn too_long(path: &Path, number: u64) -> String {
    format!(
        "{}:{number}: the line is longer than {LINE_BYTES_MAX} bytes, the most import reads in \
         one line (one row a line; see pure-serve import --help): a file of JSON Lines has a \
         newline after each row",
        path.display()
    )
}

/// A file's lines, read one at a time into a buffer that never grows past the longest line
/// allowed: a longer line is refused as soon as that much of it is read, without the rest.
struct Lines<R> {
    reader: R,
    /// The most bytes a line may hold, its newline not counted.
    max: usize,
}

/// What [`Lines::read`] found.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    /// A line, with its newline unless it is the last and has none.
    Line,
    /// The end of the file: no more lines.
    End,
    /// A line longer than the maximum: part of it was read, the rest was not.
    TooLong,
}

impl<R: BufRead> Lines<R> {
    fn new(reader: R, max: usize) -> Lines<R> {
        Lines { reader, max }
    }

    /// Reads the next line into `line` (cleared first).
    fn read(&mut self, line: &mut Vec<u8>) -> io::Result<Next> {
        line.clear();
        loop {
            let buffer = self.reader.fill_buf()?;
            if buffer.is_empty() {
                return Ok(if line.is_empty() {
                    Next::End
                } else {
                    Next::Line
                });
            }
            let (take, ends) = match memchr::memchr(b'\n', buffer) {
                Some(at) => (at + 1, true),
                None => (buffer.len(), false),
            };
            if line.len() + take - usize::from(ends) > self.max {
                return Ok(Next::TooLong);
            }
            let needed = line.len() + take;
            if needed > line.capacity() {
                // Doubling, as a vector grows, but never past the longest line allowed.
                let target = needed.max(2 * line.capacity()).min(self.max + 1);
                line.reserve_exact(target - line.len());
            }
            line.extend_from_slice(&buffer[..take]);
            self.reader.consume(take);
            if ends {
                return Ok(Next::Line);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader of endless bytes that counts what was taken from it.
    struct Endless {
        byte: u8,
        taken: std::rc::Rc<std::cell::Cell<usize>>,
    }

    impl io::Read for Endless {
        fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
            buffer.fill(self.byte);
            self.taken.set(self.taken.get() + buffer.len());
            Ok(buffer.len())
        }
    }

    fn lines_of(text: &str, max: usize) -> Vec<Result<String, Next>> {
        let mut lines = Lines::new(BufReader::with_capacity(4, text.as_bytes()), max);
        let mut line = Vec::new();
        let mut found = Vec::new();
        loop {
            match lines.read(&mut line).expect("reads") {
                Next::Line => found.push(Ok(String::from_utf8(line.clone()).expect("utf-8"))),
                Next::End => return found,
                Next::TooLong => {
                    found.push(Err(Next::TooLong));
                    return found;
                }
            }
        }
    }

    #[test]
    fn lines_are_read_whole_up_to_the_maximum() {
        let lines = |found: &[&str]| found.iter().map(|l| Ok(l.to_string())).collect::<Vec<_>>();
        assert_eq!(
            lines_of("a\nbbbbb\n\nccc", 5),
            lines(&["a\n", "bbbbb\n", "\n", "ccc"])
        );
        assert_eq!(lines_of("", 5), lines(&[]));
        assert_eq!(
            lines_of("ccccc", 5),
            lines(&["ccccc"]),
            "the last, no newline"
        );
        assert_eq!(
            lines_of("a\nbbbbbb\nc\n", 5),
            vec![Ok("a\n".to_string()), Err(Next::TooLong)]
        );
        assert_eq!(lines_of("cccccc", 5), vec![Err(Next::TooLong)]);
    }

    /// Issue 36: a line with no newline was read whole (300 MB, 821 MiB at the peak). A line
    /// past the maximum is refused after at most the maximum and one buffer are read, and its
    /// bytes held never pass the maximum.
    #[test]
    fn a_line_past_the_maximum_is_refused_without_reading_the_rest() {
        let taken = std::rc::Rc::new(std::cell::Cell::new(0));
        let endless = Endless {
            byte: b'x',
            taken: taken.clone(),
        };
        let (max, buffer) = (100_000, 4096);
        let mut lines = Lines::new(BufReader::with_capacity(buffer, endless), max);
        let mut line = Vec::new();
        assert_eq!(lines.read(&mut line).expect("reads"), Next::TooLong);
        assert!(taken.get() <= max + buffer, "read {} bytes", taken.get());
        assert!(
            line.len() <= max && line.capacity() <= max + 1,
            "{}",
            line.capacity()
        );
    }

    /// Two imports claim one new directory: the one refused leaves it to the one that holds it
    /// (found by running the two-imports test beside busy loops: the winner's move into the
    /// directory failed with "No such file or directory").
    #[test]
    fn a_refused_claim_leaves_the_directory_to_its_holder() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join("data");
        let holder = Claim::take(&dir, false).expect("the first claim locks");
        let refused = Claim::take(&dir, false)
            .err()
            .expect("the second is refused");
        assert!(refused.to_string().contains("in use"), "{refused}");
        assert!(dir.is_dir(), "the holder's directory is still there");
        drop(holder);
        assert!(!dir.exists(), "the holder removes the directory it created");
    }
}
