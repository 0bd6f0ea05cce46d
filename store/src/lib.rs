//! The store: Pure's bytes on disk.
//!
//! It owns one directory: a record log in preallocated space reused in place as a ring, and
//! checkpoint files. Records and checkpoint images are opaque bytes: the store knows nothing of
//! scripts, tables or HTTP, and depends on no other crate of Pure.
//!
//! - `Store::append` buffers records and numbers them (`Lsn` 1, 2, 3, ...); `Store::commit`
//!   writes them as one frame (one `pwrite`) and syncs once (`fdatasync` under
//!   `SyncMode::Always`): group commit.
//! - `Store::checkpoint_writer` starts a checkpoint, streamed on any thread into a temporary
//!   file, then synced, renamed and made durable by a directory sync (`CheckpointWriter::finish`);
//!   `Store::install_checkpoint` then frees the log space before it. A full log is
//!   `Error::LogFull` (backpressure), never an overwrite.
//! - The log starts small and grows in place: `Store::prepare_growth` hands out a zero fill to
//!   run on any thread, `Store::grow` then makes the larger ring the log's, keeping every live
//!   frame where it is (`growth.rs`).
//! - `Store::open` recovers: the newest checkpoint, then every frame after it that is exactly
//!   the expected successor; a torn tail is cut and reported (`TailCut`), damage inside
//!   acknowledged data refuses the open (`Error::Corrupt`).
//! - Any failed write or sync on the commit path poisons the store (`Error::Poisoned`): no
//!   retry, nothing after it reported durable.
//! - One opener per directory: every opener takes the directory's exclusive lock first
//!   (`Error::Locked`).
//! - `examine` reads a directory without changing it and finds the longest valid prefix of its
//!   state; `seed` makes a new store that holds such a state (`pure-serve check` and
//!   `salvage`).
//!
//! All I/O goes through the `Io` trait, so tests run the store on `sim::SimDisk`, a simulated
//! disk that loses power, tears writes into sectors, fails syncs and runs out of space.
//! The byte layouts and the crash-safety argument are in `docs/store-format.md`.

mod checkpoint;
mod error;
mod examine;
pub mod frame;
mod growth;
mod io;
mod open;
mod recovery;
mod ring;
mod ring_reader;
pub mod sim;
mod store;

pub use checkpoint::{CheckpointDone, CheckpointImage, CheckpointWriter};
pub use error::Error;
pub use examine::{examine, seed, CheckpointFinding, Ending, Examination, LogFinding};
pub use growth::{GrowthFill, PreparedGrowth};
pub use io::{DirLock, Io, IoFile, LockError, Mapping, RealIo};
pub use open::LOG_FILE_NAME;
pub use ring::HEADER_AREA_BYTES as LOG_HEADER_AREA_BYTES;
pub use store::Store;

/// A record's log sequence number. Records are numbered 1, 2, 3, ... in append order;
/// `Lsn(0)` means "no record" (an empty log, or a checkpoint of the empty state).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lsn(pub u64);

/// Whether `commit` waits for the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncMode {
    /// One fdatasync per group (the default everywhere).
    Always,
    /// No sync at all: for runs in RAM. Nothing is durable against power loss.
    None,
}

/// How to open a store.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    pub sync: SyncMode,
    /// Size of the preallocated, zero-filled log space reused in place. Used when the log is
    /// created; an existing log keeps the capacity it has.
    pub log_capacity_bytes: u64,
    /// The largest capacity the log may grow to (`Store::prepare_growth`); a log already larger
    /// keeps its capacity and does not grow.
    pub log_capacity_max_bytes: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            sync: SyncMode::Always,
            log_capacity_bytes: 64 << 20,
            log_capacity_max_bytes: 64 << 20,
        }
    }
}

/// A record recovered from the log, after the checkpoint, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub lsn: Lsn,
    pub bytes: Vec<u8>,
}

/// A torn tail that recovery cut (never acknowledged): where (stream position), how many
/// bytes the rejected frame claimed, and why it was rejected.
#[derive(Debug, Clone)]
pub struct TailCut {
    pub position: u64,
    pub bytes: u64,
    pub reason: String,
}

/// What `Store::open` hands back: the store, ready for appends after the last recovered record,
/// and what to rebuild the state from.
pub struct Recovered {
    pub store: Store,
    pub checkpoint: Option<CheckpointImage>,
    pub records: Vec<Record>,
    pub cut: Option<TailCut>,
}
