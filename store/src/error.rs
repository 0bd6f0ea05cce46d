//! The store's error type: one variant per thing a caller can act on.

use std::fmt;
use std::path::PathBuf;

/// What can go wrong. Variants are what a caller acts on.
#[derive(Debug)]
pub enum Error {
    /// Not enough free log space until a newer checkpoint is installed: backpressure, not poison.
    /// The appended records stay pending; `commit` can be called again after
    /// `install_checkpoint` freed space.
    LogFull { needed_bytes: u64, free_bytes: u64 },
    /// An earlier write or sync failed; the store refuses everything until reopened.
    Poisoned { cause: String },
    /// An I/O operation failed (this poisons the store when it happens on the commit path).
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// Acknowledged data is damaged: refuse to open, naming the file and byte position.
    Corrupt {
        path: PathBuf,
        position: u64,
        reason: String,
    },
    /// A record larger than the format or the log allows.
    RecordTooLarge { bytes: u64, max_bytes: u64 },
    /// Another process (or another open in this one) has the directory open: one store, one
    /// opener, or two writers would interleave their frames and destroy each other's data.
    Locked { dir: PathBuf, pid: Option<u32> },
    /// A new store was to be made where one exists already (a log or a checkpoint).
    Exists { dir: PathBuf },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::LogFull {
                needed_bytes,
                free_bytes,
            } => write!(
                f,
                "log full: the group needs {needed_bytes} bytes, {free_bytes} are free \
                 until a newer checkpoint is installed"
            ),
            Error::Poisoned { cause } => {
                write!(f, "store poisoned by an earlier storage failure: {cause}")
            }
            Error::Io { op, path, source } => write!(f, "{op} {}: {source}", path.display()),
            Error::Corrupt {
                path,
                position,
                reason,
            } => {
                write!(
                    f,
                    "corrupt data in {} at byte {position}: {reason}",
                    path.display()
                )
            }
            Error::Locked { dir, pid } => {
                let holder = match pid {
                    Some(pid) => format!("another process (PID {pid})"),
                    None => "another process".to_string(),
                };
                write!(
                    f,
                    "{} is in use by {holder}: only one process may open a data directory at a \
                     time; stop that process first, or use another directory",
                    dir.display()
                )
            }
            Error::Exists { dir } => write!(
                f,
                "{} holds a store already (a log or a checkpoint); choose a new or empty directory",
                dir.display()
            ),
            Error::RecordTooLarge { bytes, max_bytes } => {
                write!(
                    f,
                    "record of {bytes} bytes exceeds the limit of {max_bytes} bytes"
                )
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Wraps an `std::io::Error` with what was being done and to which file.
pub(crate) fn io_error(op: &'static str, path: &std::path::Path, source: std::io::Error) -> Error {
    Error::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}
