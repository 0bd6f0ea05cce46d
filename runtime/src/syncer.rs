//! The syncer thread: owns the store; makes each group durable, then publishes and answers it.
//!
//! Steps per group (in the order the owner made them):
//! 0. take the group being built, as soon as it holds a write (`Building::take`);
//! 1. append the group's records and commit them: one write and one fdatasync;
//! 2. publish the group's snapshot (reads now see it: it is durable);
//! 3. send the group's answers;
//! 4. when the log since the last checkpoint has grown past the interval, start a checkpoint of
//!    that snapshot on a background thread; install finished ones between groups.
//!
//! A failed commit poisons the store: the group and every later write are answered
//! `Unavailable`, the published snapshot stays the last durable one.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pure_lang::{HandlerError, Schema, Tables};
use pure_store::{CheckpointDone, Error as StoreError, Lsn, Store};

use crate::building::Building;
use crate::checkpoint::write_image;
use crate::inbox::Inbox;
use crate::owner::Group;
use crate::runtime::{CommitGate, Shared, Snapshot};

type CheckpointResult = Result<(CheckpointDone, Instant), String>;

/// Pauses between checkpoints that try to free a full log (first, and most).
const RETRY_PAUSE_MIN: Duration = Duration::from_millis(10);
const RETRY_PAUSE_MAX: Duration = Duration::from_secs(1);

/// How long the syncer stays awake for the next write, yielding its core to any thread that
/// wants it, after a group of one write that came within this long of the previous answer. Such
/// writes come one at a time from a client waiting for each answer: the next comes about 100 µs
/// after this answer leaves, and a sleeping syncer put its wake-up on that write's path. Paired
/// runs at 1 connection: 1.13x the posts/s, for about 60 µs more CPU per post; at 4, 16 and 64
/// connections within the noise. Writes spaced wider than this find the syncer asleep, as
/// before, rather than cost it 300 µs awake each; so do the first two after a pause, as the
/// decision uses the gap before the group just taken. A syncer that spun without yielding, after
/// every group, ran 0.83x at 64 connections: it took a core from the threads that make the
/// writes (research note 010).
const AWAKE_AFTER_LONE_WRITE: Duration = Duration::from_micros(300);

pub(crate) struct Syncer {
    pub shared: Arc<Shared>,
    pub store: Store,
    pub schema: Arc<Schema>,
    pub building: Arc<Building>,
    pub inbox: Arc<Inbox>,
    pub checkpoint_interval_bytes: u64,
    pub commit_gate: Option<CommitGate>,
}

impl Syncer {
    pub fn run(mut self) {
        let (done_tx, done_rx) = mpsc::channel::<CheckpointResult>();
        let mut checkpoint_running = false;
        let _gone = SyncerGone {
            inbox: self.inbox.clone(),
            building: self.building.clone(),
        };
        let mut awake = Duration::ZERO;
        let mut answered_at = Instant::now();
        while let Some(taken) = self.building.take(awake) {
            let group = taken.group;
            let count = group.replies.len() as u64;
            let back_to_back = answered_at.elapsed() < AWAKE_AFTER_LONE_WRITE;
            awake = if count == 1 && back_to_back {
                AWAKE_AFTER_LONE_WRITE
            } else {
                Duration::ZERO
            };
            self.shared
                .metrics
                .owner_group(taken.busy, count, taken.failed);
            if checkpoint_running {
                if let Ok(result) = done_rx.try_recv() {
                    checkpoint_running = false;
                    self.install(result);
                }
            }
            self.commit_group(group, &mut checkpoint_running, &done_rx);
            answered_at = Instant::now();
            let used = self.store.log_used_bytes();
            self.shared
                .metrics
                .log(used, self.store.log_capacity_bytes());
            if !checkpoint_running && used > self.checkpoint_interval_bytes && !self.is_poisoned() {
                checkpoint_running = self.start_checkpoint(&done_tx);
            }
        }
        if checkpoint_running {
            if let Ok(result) = done_rx.recv() {
                self.install(result);
            }
        }
    }

    fn is_poisoned(&self) -> bool {
        self.shared.poison_reason().is_some()
    }

    fn commit_group(
        &mut self,
        group: Group,
        checkpoint_running: &mut bool,
        done_rx: &Receiver<CheckpointResult>,
    ) {
        let records = group.ends.len() as u64;
        let outcome = self.make_durable(&group, checkpoint_running, done_rx);
        match outcome {
            Ok(sync) => {
                let lsn = self.store.durable_lsn();
                self.shared.publish(Snapshot::new(group.snapshot, lsn.0));
                self.shared.metrics.committed(records, sync, lsn.0);
                for (reply, result) in group.replies {
                    // A caller that stopped waiting dropped its receiver: nothing to do.
                    let _ = reply.send(result);
                }
            }
            Err(reason) => {
                self.shared.poison(reason.clone());
                for (reply, result) in group.replies {
                    // The write whose panic poisoned the runtime keeps its own answer (a 500:
                    // retrying it would only panic again); the others were not made durable.
                    let answer = match result {
                        Err(panicked @ HandlerError::Panicked { .. }) => panicked,
                        _ => HandlerError::Unavailable {
                            reason: reason.clone(),
                        },
                    };
                    let _ = reply.send(Err(answer));
                }
            }
        }
    }

    /// Appends and commits the group; the sync's duration when there was one.
    fn make_durable(
        &mut self,
        group: &Group,
        checkpoint_running: &mut bool,
        done_rx: &Receiver<CheckpointResult>,
    ) -> Result<Option<Duration>, String> {
        if let Some(reason) = self.shared.poison_reason() {
            return Err(reason);
        }
        if group.ends.is_empty() {
            return Ok(None);
        }
        for record in group.records() {
            self.store
                .append(record)
                .map_err(|e| format!("cannot log a write: {e}"))?;
        }
        if let Some(gate) = &self.commit_gate {
            (gate.0)();
        }
        let started = Instant::now();
        match self.store.commit() {
            Ok(_) => return Ok(Some(started.elapsed())),
            Err(StoreError::LogFull { .. }) => {}
            Err(e) => return Err(format!("storage failure, writes stopped: {e}")),
        }
        // The log is full: free it with a checkpoint of the durable state, then retry.
        if *checkpoint_running {
            *checkpoint_running = false;
            let result = done_rx
                .recv()
                .map_err(|_| "the checkpoint thread died".to_string())?;
            self.install(result);
        }
        self.commit_after_checkpoints()
    }

    /// Commits the pending group of a full log, writing checkpoints of the durable state until
    /// one frees the log. A checkpoint that cannot be written (a full disk) loses nothing: the
    /// log still holds every record, so this is backpressure, not a storage fault. Until it
    /// succeeds new writes are refused (`Unavailable`, a 503) and this group waits; it retries
    /// with a growing pause, so writes resume by themselves once space returns. Only a
    /// shutdown gives up (and poisons: the group's effects are in the owner's state).
    fn commit_after_checkpoints(&mut self) -> Result<Option<Duration>, String> {
        let mut pause = RETRY_PAUSE_MIN;
        let mut attempts = 0u32;
        loop {
            let started = Instant::now();
            match self.store.commit() {
                Ok(_) => {
                    self.shared.set_log_full(None);
                    return Ok(Some(started.elapsed()));
                }
                Err(StoreError::LogFull { .. }) => {}
                Err(e) => return Err(format!("storage failure, writes stopped: {e}")),
            }
            if attempts > 0 {
                if self.shared.is_stopping() {
                    return Err("the log is full and no checkpoint could free it; shutting \
                                down, writes stopped"
                        .to_string());
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(RETRY_PAUSE_MAX);
            }
            attempts += 1;
            let published = self.shared.published();
            let result = checkpoint(
                &self.store,
                &self.schema,
                &published.tables,
                Lsn(published.lsn),
            );
            if let Err(e) = &result {
                self.shared.set_log_full(Some(format!(
                    "the log is full and a checkpoint to free it failed ({e}); retry later"
                )));
            }
            self.install(result);
        }
    }

    fn start_checkpoint(&mut self, done_tx: &Sender<CheckpointResult>) -> bool {
        let published = self.shared.published();
        let covered = Lsn(published.lsn);
        let writer = match self.store.checkpoint_writer(covered) {
            Ok(writer) => writer,
            Err(e) => {
                let error = format!("cannot start a checkpoint: {e}");
                eprintln!("pure-runtime: {error}");
                self.shared.metrics.checkpoint_failed(error);
                return false;
            }
        };
        let (schema, tables, done_tx) = (
            self.schema.clone(),
            published.tables.clone(),
            done_tx.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name("pure-checkpoint".into())
            .spawn(move || {
                let started = Instant::now();
                let _ = done_tx.send(finish_checkpoint(writer, &schema, &tables, started));
            });
        spawned.is_ok()
    }

    fn install(&mut self, result: CheckpointResult) {
        match result {
            Ok((done, started)) => {
                let lsn = done.lsn.0;
                match self.store.install_checkpoint(done) {
                    Ok(()) => self.shared.metrics.checkpoint(started.elapsed(), lsn),
                    Err(e) => self.checkpoint_failed(format!("cannot install a checkpoint: {e}")),
                }
            }
            // A failed checkpoint loses nothing (the log still holds every record): report it;
            // the next group past the interval tries again.
            Err(e) => self.checkpoint_failed(format!("checkpoint failed: {e}")),
        }
    }

    fn checkpoint_failed(&self, error: String) {
        eprintln!("pure-runtime: {error}");
        self.shared.metrics.checkpoint_failed(error);
    }
}

fn finish_checkpoint(
    mut writer: pure_store::CheckpointWriter,
    schema: &Schema,
    tables: &Tables,
    started: Instant,
) -> CheckpointResult {
    let written = write_image(&mut writer, schema, tables);
    // `finish` also after a failed write: it removes the temporary file (which would otherwise
    // keep a full disk full) and reports the writer's first error.
    let finished = writer.finish();
    written.map_err(|e| e.to_string())?;
    let done = finished.map_err(|e| e.to_string())?;
    Ok((done, started))
}

/// Tells the owner's side when the syncer thread ends, even by a panic: the owner stops taking
/// writes, and no write waits for a group that will never be taken.
struct SyncerGone {
    inbox: Arc<Inbox>,
    building: Arc<Building>,
}

impl Drop for SyncerGone {
    fn drop(&mut self) {
        self.inbox.syncer_gone();
        self.building.syncer_gone();
    }
}

/// A checkpoint written on this thread (when the log is full and the owner must wait anyway).
fn checkpoint(store: &Store, schema: &Schema, tables: &Tables, covered: Lsn) -> CheckpointResult {
    let started = Instant::now();
    let writer = store
        .checkpoint_writer(covered)
        .map_err(|e| e.to_string())?;
    finish_checkpoint(writer, schema, tables, started)
}
