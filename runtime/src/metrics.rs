//! The figures the runtime exposes for the server's metrics and health endpoints.
//!
//! It must not know where the figures come from: the owner and the syncer report into it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Counters since start; serve renders them in Prometheus text format.
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    pub queue_depth: u64,
    pub writes_total: u64,
    pub writes_failed_total: u64,
    /// Writes accepted into the queue whose handler ran but that were answered 503 instead of
    /// being made durable (and were undone): a full log that no checkpoint freed in time, a
    /// failed sync, a stop. None of them is ever applied later.
    pub writes_refused_total: u64,
    pub groups_total: u64,
    /// Groups whose commit ran on the thread that ran their writes (writes coming one at a
    /// time), not on the syncer thread; one whose commit failed counts too.
    pub groups_committed_here_total: u64,
    /// (upper bound, cumulative count), Prometheus style.
    pub group_records_buckets: Vec<(u64, u64)>,
    pub group_records_sum: u64,
    /// (upper bound in seconds, cumulative count).
    pub sync_seconds_buckets: Vec<(f64, u64)>,
    pub sync_seconds_sum: f64,
    pub syncs_total: u64,
    /// Time spent running handlers and encoding their records.
    pub owner_busy_seconds_total: f64,
    pub uptime_seconds: f64,
    /// Since the published snapshot was made.
    pub snapshot_age_seconds: f64,
    /// An estimate of the bytes of state.
    pub state_bytes: u64,
    pub log_bytes: u64,
    pub log_capacity_bytes: u64,
    pub checkpoints_total: u64,
    pub checkpoint_seconds_sum: f64,
    pub last_checkpoint_lsn: u64,
    /// Checkpoints that could not be written or installed (nothing is lost: the log still holds
    /// every record; but the log is not freed until one succeeds).
    pub checkpoint_failures_total: u64,
    /// Why the most recent failed checkpoint failed, until one succeeds again.
    pub last_checkpoint_error: Option<String>,
    pub durable_lsn: u64,
    /// Compiled handler calls re-run in Rhai's evaluator (an error, a limit, a case the compiled
    /// code leaves to Rhai): each costs its call twice.
    pub handler_fallbacks_total: u64,
    /// Scheduled entries run, those of them whose handler failed (not retried), and the
    /// entries pending in the published state.
    pub scheduled_runs_total: u64,
    pub scheduled_failures_total: u64,
    pub schedules_pending: u64,
}

#[derive(Clone, Debug)]
pub struct Health {
    pub app: String,
    pub durable_lsn: u64,
    pub state_bytes: u64,
    pub poisoned: Option<String>,
    /// Why new writes are refused while the store is not poisoned (a full log that no
    /// checkpoint could free yet), until a checkpoint frees it.
    pub refusing_writes: Option<String>,
    /// Why the most recent checkpoint failed, until one succeeds again.
    pub last_checkpoint_error: Option<String>,
}

const GROUP_RECORDS_BOUNDS: [u64; 12] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096];
const SYNC_SECONDS_BOUNDS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// Per-bucket (not cumulative) counts, updated once per group under one lock: cheaper than
/// atomics per write, and the lock is never held across anything slow.
#[derive(Default)]
struct Counts {
    writes_total: u64,
    writes_failed_total: u64,
    writes_refused_total: u64,
    groups_total: u64,
    groups_committed_here_total: u64,
    group_records: [u64; GROUP_RECORDS_BOUNDS.len() + 1],
    group_records_sum: u64,
    sync: [u64; SYNC_SECONDS_BOUNDS.len() + 1],
    sync_seconds_sum: f64,
    syncs_total: u64,
    owner_busy: Duration,
    log_bytes: u64,
    log_capacity_bytes: u64,
    checkpoints_total: u64,
    checkpoint_seconds_sum: f64,
    last_checkpoint_lsn: u64,
    checkpoint_failures_total: u64,
    last_checkpoint_error: Option<String>,
    durable_lsn: u64,
}

pub(crate) struct MetricsCell {
    started: Instant,
    counts: Mutex<Counts>,
}

impl MetricsCell {
    pub(crate) fn new() -> MetricsCell {
        MetricsCell {
            started: Instant::now(),
            counts: Mutex::new(Counts::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts
            .lock()
            .expect("metrics are updated without panicking")
    }

    pub(crate) fn owner_group(&self, busy: Duration, writes: u64, failed: u64) {
        let mut c = self.lock();
        c.owner_busy += busy;
        c.writes_total += writes;
        c.writes_failed_total += failed;
    }

    pub(crate) fn refused(&self, writes: u64) {
        self.lock().writes_refused_total += writes;
    }

    /// The durable LSN found at open: no group was committed.
    pub(crate) fn recovered(&self, durable_lsn: u64) {
        self.lock().durable_lsn = durable_lsn;
    }

    pub(crate) fn committed(&self, records: u64, sync: Option<Duration>, durable_lsn: u64) {
        let mut c = self.lock();
        c.groups_total += 1;
        let bucket = GROUP_RECORDS_BOUNDS.iter().position(|b| records <= *b);
        c.group_records[bucket.unwrap_or(GROUP_RECORDS_BOUNDS.len())] += 1;
        c.group_records_sum += records;
        if let Some(sync) = sync {
            let seconds = sync.as_secs_f64();
            let bucket = SYNC_SECONDS_BOUNDS.iter().position(|b| seconds <= *b);
            c.sync[bucket.unwrap_or(SYNC_SECONDS_BOUNDS.len())] += 1;
            c.sync_seconds_sum += seconds;
            c.syncs_total += 1;
        }
        c.durable_lsn = durable_lsn;
    }

    pub(crate) fn group_committed_here(&self) {
        self.lock().groups_committed_here_total += 1;
    }

    pub(crate) fn log(&self, used: u64, capacity: u64) {
        let mut c = self.lock();
        c.log_bytes = used;
        c.log_capacity_bytes = capacity;
    }

    pub(crate) fn checkpoint(&self, took: Duration, lsn: u64) {
        let mut c = self.lock();
        c.checkpoints_total += 1;
        c.checkpoint_seconds_sum += took.as_secs_f64();
        c.last_checkpoint_lsn = lsn;
        c.last_checkpoint_error = None;
    }

    pub(crate) fn last_checkpoint_error(&self) -> Option<String> {
        self.lock().last_checkpoint_error.clone()
    }

    pub(crate) fn checkpoint_failed(&self, error: String) {
        let mut c = self.lock();
        c.checkpoint_failures_total += 1;
        c.last_checkpoint_error = Some(error);
    }

    pub(crate) fn snapshot(&self) -> Metrics {
        let c = self.lock();
        let cumulative = |counts: &[u64]| {
            counts
                .iter()
                .scan(0, |sum, n| {
                    *sum += n;
                    Some(*sum)
                })
                .collect::<Vec<_>>()
        };
        let group = cumulative(&c.group_records);
        let sync = cumulative(&c.sync);
        Metrics {
            writes_total: c.writes_total,
            writes_failed_total: c.writes_failed_total,
            writes_refused_total: c.writes_refused_total,
            groups_total: c.groups_total,
            groups_committed_here_total: c.groups_committed_here_total,
            group_records_buckets: GROUP_RECORDS_BOUNDS.iter().copied().zip(group).collect(),
            group_records_sum: c.group_records_sum,
            sync_seconds_buckets: SYNC_SECONDS_BOUNDS.iter().copied().zip(sync).collect(),
            sync_seconds_sum: c.sync_seconds_sum,
            syncs_total: c.syncs_total,
            owner_busy_seconds_total: c.owner_busy.as_secs_f64(),
            uptime_seconds: self.started.elapsed().as_secs_f64(),
            log_bytes: c.log_bytes,
            log_capacity_bytes: c.log_capacity_bytes,
            checkpoints_total: c.checkpoints_total,
            checkpoint_seconds_sum: c.checkpoint_seconds_sum,
            last_checkpoint_lsn: c.last_checkpoint_lsn,
            checkpoint_failures_total: c.checkpoint_failures_total,
            last_checkpoint_error: c.last_checkpoint_error.clone(),
            durable_lsn: c.durable_lsn,
            ..Metrics::default()
        }
    }
}
