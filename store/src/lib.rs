//! The store: Pure's bytes on disk.
//!
//! CONTRACT SKELETON (to be replaced by the store implementation; the public signatures below are
//! what `runtime` and `benchmarks` code against — add to them freely, change them only together
//! with their callers).

use std::path::Path;
use std::sync::Arc;

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

#[derive(Clone, Debug)]
pub struct StoreOptions {
    pub sync: SyncMode,
    /// Size of the preallocated, zero-filled log space reused in place.
    pub log_capacity_bytes: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions { sync: SyncMode::Always, log_capacity_bytes: 64 << 20 }
    }
}

/// What can go wrong. Variants are what a caller acts on.
#[derive(Debug)]
pub enum Error {
    /// Not enough free log space until a newer checkpoint is installed: backpressure, not poison.
    LogFull { needed_bytes: u64, free_bytes: u64 },
    /// An earlier write or sync failed; the store refuses everything until reopened.
    Poisoned { cause: String },
    /// An I/O operation failed (this poisons the store when it happens on the commit path).
    Io { op: &'static str, path: std::path::PathBuf, source: std::io::Error },
    /// Acknowledged data is damaged: refuse to open, naming the file and byte position.
    Corrupt { path: std::path::PathBuf, position: u64, reason: String },
    /// A record larger than the format or the log allows.
    RecordTooLarge { bytes: u64, max_bytes: u64 },
}

/// The I/O layer under the store; tests replace it with a simulated disk.
pub trait Io: Send + Sync {}

/// The real file system.
pub struct RealIo;
impl Io for RealIo {}

/// A checkpoint image found at open: the state as of `lsn`, to be decoded by the caller.
pub struct CheckpointImage {}
impl CheckpointImage {
    /// The last record this image covers.
    pub fn lsn(&self) -> Lsn {
        todo!()
    }
    /// The image bytes exactly as they were written (memory-mapped for a real file).
    pub fn bytes(&self) -> &[u8] {
        todo!()
    }
}

/// A record recovered from the log, after the checkpoint, in order.
pub struct Record {
    pub lsn: Lsn,
    pub bytes: Vec<u8>,
}

/// A torn tail that recovery cut (never acknowledged): where, and how many bytes.
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

pub struct Store {}

impl Store {
    /// Opens (creating if absent) the store in `dir` on the real file system, and recovers.
    pub fn open(dir: &Path, options: StoreOptions) -> Result<Recovered, Error> {
        Self::open_with(Arc::new(RealIo), dir, options)
    }
    /// The same through a given I/O layer.
    pub fn open_with(_io: Arc<dyn Io>, _dir: &Path, _options: StoreOptions) -> Result<Recovered, Error> {
        todo!()
    }
    /// Buffers one record for the next commit; returns its LSN. Nothing is written yet.
    pub fn append(&mut self, _record: &[u8]) -> Result<Lsn, Error> {
        todo!()
    }
    /// Writes every appended record as one group (one write, one fdatasync under `Always`)
    /// and returns the highest durable LSN. A failure poisons the store.
    pub fn commit(&mut self) -> Result<Lsn, Error> {
        todo!()
    }
    pub fn durable_lsn(&self) -> Lsn {
        todo!()
    }
    /// Bytes of log space in use (from the oldest record still needed to the end) and in all.
    pub fn log_used_bytes(&self) -> u64 {
        todo!()
    }
    pub fn log_capacity_bytes(&self) -> u64 {
        todo!()
    }
    pub fn poisoned(&self) -> Option<&str> {
        todo!()
    }
    /// Starts a checkpoint covering every record up to `covered` (a durable LSN returned by
    /// `commit`, or the recovered LSN). The writer is `Send`: stream the image into it on any
    /// thread, then `finish` it there.
    pub fn checkpoint_writer(&self, _covered: Lsn) -> Result<CheckpointWriter, Error> {
        todo!()
    }
    /// Called after `CheckpointWriter::finish` returned: the checkpoint is durable and in place,
    /// so log space before it may be reused and older checkpoint files removed.
    pub fn install_checkpoint(&mut self, _done: CheckpointDone) -> Result<(), Error> {
        todo!()
    }
}

pub struct CheckpointWriter {}
impl std::io::Write for CheckpointWriter {
    fn write(&mut self, _buf: &[u8]) -> std::io::Result<usize> {
        todo!()
    }
    fn flush(&mut self) -> std::io::Result<()> {
        todo!()
    }
}
impl CheckpointWriter {
    /// Writes the trailer, syncs the file, renames it into place and syncs the directory.
    pub fn finish(self) -> Result<CheckpointDone, Error> {
        todo!()
    }
}

/// Proof that a checkpoint is durable and installed in the directory.
pub struct CheckpointDone {
    pub lsn: Lsn,
    pub image_bytes: u64,
}
