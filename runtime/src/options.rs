//! How a runtime is opened (`RuntimeOptions`), and the test hooks it takes (`CommitGate`).
//!
//! Plain data: it knows nothing of the runtime's threads, only what they are given.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use pure_store::SyncMode;

/// The default `lone_write_gap`. A client waiting for each answer sends its next write about
/// 100 µs after the answer leaves; a sleeping syncer would then put its wake-up on every write's
/// path (on a busy 2-core machine a woken thread waits 30-80 µs for a core). Writes spaced wider
/// than this wake the syncer, as do the first two after a pause.
pub const LONE_WRITE_GAP: Duration = Duration::from_micros(300);

#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    pub sync: SyncMode,
    /// Size of the preallocated log (used when the log is created).
    pub log_capacity_bytes: u64,
    /// A checkpoint starts when the log since the last one exceeds this.
    pub checkpoint_interval_bytes: u64,
    /// Bound of the write queue: a full queue answers `Unavailable` at once (backpressure).
    pub queue_capacity: usize,
    /// The longest a write waits for room in a full log (for checkpoints to free it) before it
    /// is refused with `Unavailable` and undone, never to be applied.
    pub write_timeout: Duration,
    /// A group of one write that comes within this long of the previous answer says that
    /// writes come one at a time, each client waiting for its answer: the next lone write is
    /// then committed on the thread that ran it instead of waking the syncer thread. `ZERO`
    /// leaves every commit to the syncer thread.
    pub lone_write_gap: Duration,
    /// Test hook: called on the syncer thread before every commit (e.g. to hold a sync). With a
    /// gate set, every commit is the syncer thread's (`lone_write_gap` is ignored).
    pub commit_gate: Option<CommitGate>,
    /// Test hook: called by whoever runs a write, after its handler, under the group's lock
    /// (e.g. to make running writes panic).
    pub run_gate: Option<CommitGate>,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            sync: SyncMode::Always,
            log_capacity_bytes: 256 << 20,
            checkpoint_interval_bytes: 64 << 20,
            queue_capacity: 4096,
            write_timeout: Duration::from_secs(5),
            lone_write_gap: LONE_WRITE_GAP,
            commit_gate: None,
            run_gate: None,
        }
    }
}

/// A function the runtime calls at a fixed point (tests hold syncs, or inject panics, with it).
#[derive(Clone)]
pub struct CommitGate(pub Arc<dyn Fn() + Send + Sync>);

impl fmt::Debug for CommitGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CommitGate")
    }
}
