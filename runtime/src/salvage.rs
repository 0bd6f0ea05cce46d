//! A way forward from damaged data: `inspect` (what `pure-serve check` reports) and `salvage`
//! (what `pure-serve salvage` writes).
//!
//! Both start from `pure_store::examine`, which reads the directory without changing it and
//! finds the longest valid prefix of the state: the newest valid checkpoint and every record
//! after it up to the first damage. `inspect` also decodes that prefix, as recovery would
//! (bytes can pass their checksums and still not be a Pure image or record). `salvage` writes
//! the decoded prefix into a new directory as one checkpoint with the LSN it had, then
//! inspects the new directory to confirm that it opens cleanly with exactly that prefix. No
//! app is needed: images and records carry their own table and field names.
//!
//! It must not know a running runtime: it works on a directory nobody has open.

use std::path::Path;
use std::sync::Arc;

use pure_lang::Schema;
use pure_store::{Examination, Io, Lsn, RealIo, StoreOptions, SyncMode};

use crate::checkpoint::write_image;
use crate::error::OpenError;
use crate::options::RuntimeOptions;
use crate::recovery::{rebuild, State, Undecodable};

/// A data directory examined, and its valid prefix decoded.
pub struct Inspection {
    pub store: Examination,
    /// The LSN up to which the prefix decodes: the state a salvage saves.
    pub decoded_lsn: u64,
    /// The first part of the prefix that does not decode, if any.
    pub undecodable: Option<Undecodable>,
    /// Rows per table of the decoded state, by table name.
    pub tables: Vec<(String, u64)>,
    pub(crate) state: State,
}

impl Inspection {
    /// Why `Runtime::open` would refuse the directory; `None` when it opens cleanly.
    pub fn open_refusal(&self) -> Option<String> {
        if let Some(refusal) = self.store.open_refusal() {
            return Some(refusal);
        }
        self.undecodable.as_ref().map(|failure| match failure {
            Undecodable::Image { lsn, reason } => {
                format!("the checkpoint at LSN {lsn} does not decode: {reason}")
            }
            Undecodable::Record { lsn, reason } => {
                format!("the log record at LSN {lsn} does not decode: {reason}")
            }
        })
    }
}

/// What a salvage wrote.
pub struct Salvaged {
    pub from: Inspection,
    /// The new directory, inspected after writing: it opens cleanly and holds LSNs 1..=saved.
    pub into: Inspection,
    pub saved_lsn: u64,
}

/// Examines `data_dir` without changing it and decodes its valid prefix.
pub fn inspect(data_dir: &Path) -> Result<Inspection, OpenError> {
    inspect_with(Arc::new(RealIo), data_dir)
}

/// The same through a given I/O layer.
pub fn inspect_with(io: Arc<dyn Io>, data_dir: &Path) -> Result<Inspection, OpenError> {
    let store = pure_store::examine(io, data_dir).map_err(OpenError::Store)?;
    let (state, undecodable) = rebuild(Schema::default(), store.base.as_ref(), &store.records);
    let tables = state
        .schema
        .tables
        .iter()
        .enumerate()
        .map(|(id, table)| (table.name.clone(), state.tables.len(id as u32) as u64))
        .collect();
    Ok(Inspection {
        store,
        decoded_lsn: state.lsn.0,
        undecodable,
        tables,
        state,
    })
}

/// Refuses an `into` that is `from` or inside it: writing there would change the directory a
/// salvage promises to leave as it is. (On a real file system; a simulated one has no such
/// paths to resolve, and its tests use separate directories.)
fn refuse_inside(from: &Path, into: &Path) -> Result<(), OpenError> {
    let Ok(from) = from.canonicalize() else {
        return Ok(());
    };
    // `into` may not exist yet: resolve its nearest existing ancestor.
    let mut existing = into.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => return Ok(()),
        }
    }
    let mut resolved = existing.canonicalize().unwrap_or(existing);
    resolved.extend(rest.iter().rev());
    if resolved.starts_with(&from) {
        return Err(OpenError::Salvage(format!(
            "{} is inside {}, which a salvage must not change: choose a directory elsewhere",
            into.display(),
            from.display()
        )));
    }
    Ok(())
}

/// Writes the decoded valid prefix of `from` into `into` (new, or empty), which then opens
/// cleanly with that state and those LSNs. Changes nothing in `from`.
pub fn salvage(from: &Path, into: &Path) -> Result<Salvaged, OpenError> {
    salvage_with(Arc::new(RealIo), from, into)
}

/// The same through a given I/O layer.
pub fn salvage_with(io: Arc<dyn Io>, from: &Path, into: &Path) -> Result<Salvaged, OpenError> {
    refuse_inside(from, into)?;
    let inspected = inspect_with(io.clone(), from)?;
    let saved = Lsn(inspected.decoded_lsn);
    // The log the damaged directory had grown to, or a new directory's.
    let capacity = inspected
        .store
        .log_capacity_bytes()
        .unwrap_or_else(|| RuntimeOptions::default().log_capacity_bytes);
    let options = StoreOptions {
        sync: SyncMode::Always,
        log_capacity_bytes: capacity,
        log_capacity_max_bytes: capacity,
    };
    let State { tables, schema, .. } = &inspected.state;
    pure_store::seed(io.clone(), into, options, saved, |writer| {
        write_image(writer, schema, tables).map(|_| ())
    })
    .map_err(OpenError::Store)?;
    let written = inspect_with(io, into)?;
    assert!(
        written.open_refusal().is_none()
            && written.decoded_lsn == saved.0
            && written.tables == inspected.tables,
        "the salvaged directory {} must open with LSN {} and the rows {:?} (it says {:?}, \
         LSN {}, rows {:?})",
        into.display(),
        saved.0,
        inspected.tables,
        written.open_refusal(),
        written.decoded_lsn,
        written.tables
    );
    Ok(Salvaged {
        from: inspected,
        into: written,
        saved_lsn: saved.0,
    })
}
