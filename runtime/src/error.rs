//! The runtime's errors that a caller can act on: a data directory that does not open
//! (`OpenError`), and a new version of the app that a reload cannot take (`ReloadError`).
//!
//! It knows nothing of the runtime's threads or state; every module that opens, recovers or
//! salvages a directory reports through it.

use std::fmt;

#[derive(Debug)]
pub enum OpenError {
    /// The store could not open or recover (I/O error, or damaged acknowledged data).
    Store(pure_store::Error),
    /// A record in the log does not decode: the data is damaged or written by another program.
    Record { lsn: u64, reason: String },
    /// The checkpoint image does not decode.
    Image { lsn: u64, reason: String },
    /// A thread could not be started.
    Thread(std::io::Error),
    /// A salvage that would change the directory it saves from.
    Salvage(String),
    /// A declared index cannot be built from the rows (a duplicate in a unique index, a value
    /// it cannot order).
    Index(String),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Store(e) => write!(f, "cannot open the data directory: {e}"),
            OpenError::Record { lsn, reason } => write!(
                f,
                "the log record at LSN {lsn} is damaged ({reason}); restore the data directory from a backup"
            ),
            OpenError::Image { lsn, reason } => write!(
                f,
                "the checkpoint at LSN {lsn} is damaged ({reason}); restore the data directory from a backup"
            ),
            OpenError::Thread(e) => write!(f, "cannot start the owner threads: {e}"),
            OpenError::Salvage(reason) => write!(f, "cannot salvage: {reason}"),
            OpenError::Index(reason) => write!(
                f,
                "cannot build the app's indexes from the rows: {reason}; change the rows or \
                 the index declaration in app.json"
            ),
        }
    }
}

impl std::error::Error for OpenError {}

/// Why a new version of the app cannot replace the running one without a restart: it changes
/// what the state in memory is built on (tables, their fields, indexes). A restart can take it:
/// recovery maps the rows by name into the new declaration and builds the new indexes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadError {
    /// What changed, e.g. `table players gains or loses fields (best, posts -> best)`.
    pub change: String,
}

impl fmt::Display for ReloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the new version changes the tables: {}; a reload cannot change tables, fields or \
             indexes: restart pure-serve to take it (the data is kept)",
            self.change
        )
    }
}

impl std::error::Error for ReloadError {}
