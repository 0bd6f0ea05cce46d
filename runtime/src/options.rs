//! How a runtime is opened (`RuntimeOptions`), and the test hooks it takes (`CommitGate`).
//!
//! Plain data: it knows nothing of the runtime's threads, only what they are given.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use pure_store::SyncMode;

/// The default `checkpoint_image_ratio`.
pub const CHECKPOINT_IMAGE_RATIO: f64 = 2.0;

/// The default `log_capacity_bytes`: what a new data directory's log takes.
pub const LOG_CAPACITY: u64 = 1 << 20;

/// The default `log_capacity_max_bytes`.
pub const LOG_CAPACITY_MAX: u64 = 256 << 20;

/// The default `lone_write_sync_max`.
pub const LONE_WRITE_SYNC_MAX: Duration = Duration::from_micros(50);

#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    pub sync: SyncMode,
    /// Size of the preallocated log when it is created (a log that exists keeps its size).
    pub log_capacity_bytes: u64,
    /// The largest the log grows to, doubling, as the writes between two checkpoints need
    /// (`log_growth.rs`).
    pub log_capacity_max_bytes: u64,
    /// A checkpoint starts when the log since the last one exceeds this, and also
    /// `checkpoint_image_ratio` times the last checkpoint's image.
    pub checkpoint_interval_bytes: u64,
    /// How many times the last checkpoint's image the log grows before the next checkpoint, on
    /// a state whose image is larger than the interval: every checkpoint writes the whole state,
    /// so this bounds what checkpoints write to `1 / ratio` of what the log does (research note
    /// 031). The log is never let past three quarters of its capacity for it. 0: the interval
    /// alone decides.
    pub checkpoint_image_ratio: f64,
    /// Bound of the write queue: a full queue answers `Unavailable` at once (backpressure).
    pub queue_capacity: usize,
    /// The longest a write waits for room in a full log (for checkpoints to free it) before it
    /// is refused with `Unavailable` and undone, never to be applied.
    pub write_timeout: Duration,
    /// A write that comes alone (no write has been concurrent with another for a while) is
    /// committed on the thread that ran it, the syncer thread left asleep, while a commit's
    /// write and sync take less than this: by default 50 µs, a log in RAM or `SyncMode::None`
    /// (on a disk, a caller waiting for its sync measured slower than a syncer kept awake:
    /// research note 024). `None` leaves every commit to the syncer thread.
    pub lone_write_sync_max: Option<Duration>,
    /// Test hook: called on the syncer thread before every commit (e.g. to hold a sync). With a
    /// gate set, every commit is the syncer thread's (`lone_write_sync_max` is ignored).
    pub commit_gate: Option<CommitGate>,
    /// Test hook: called by whoever runs a write, after its handler, under the group's lock
    /// (e.g. to make running writes panic).
    pub run_gate: Option<CommitGate>,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            sync: SyncMode::Always,
            log_capacity_bytes: LOG_CAPACITY,
            log_capacity_max_bytes: LOG_CAPACITY_MAX,
            checkpoint_interval_bytes: 64 << 20,
            checkpoint_image_ratio: CHECKPOINT_IMAGE_RATIO,
            queue_capacity: 4096,
            write_timeout: Duration::from_secs(5),
            lone_write_sync_max: Some(LONE_WRITE_SYNC_MAX),
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
