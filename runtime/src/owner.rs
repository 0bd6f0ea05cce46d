//! The owner: runs write handlers one at a time, each into the group being built.
//!
//! The owner is a role, not a thread: whoever holds `Owner::scratch` runs writes. A caller of
//! `Runtime::write` queues its write in the inbox and then, if the role is free, takes it and
//! runs what is queued, its own write included, on its own thread; while someone else holds
//! the role, the holder runs it. The owner thread takes the role only when a caller cannot: the
//! group is full, the caller has run others' writes for its whole budget (1 ms), or the runtime
//! is stopping. Handing each write to a dedicated thread cost a
//! wake-up of that thread per burst of writes, and on a busy 2-core machine a woken thread
//! waits 30-80 µs for a core: that hand-off sat on every write's path. Without it, paired runs
//! at 64 connections gave medians of 1.03-1.19x the posts/s (research note 009).
//!
//! Per write, in the inbox's order (every pop happens under the role) and holding the
//! `Building` lock:
//! 1. run the handler over the tables; a returned handler's write set is encoded as one record,
//!    a failed one was rolled back by `lang` and leaves nothing;
//! 2. add the record and the answer to the group.
//!
//! The syncer takes the group, with a snapshot of the tables after it (O(1) per table; one per
//! group, not per write: a clone is cheap, but a clone per write would keep every write's
//! copied tree nodes alive until the syncer drops them), the moment it is done with the previous one. So
//! group N+1 is built while the syncer commits group N, every write that arrives meanwhile
//! joins N+1, and the owner never runs further ahead: it stops when a group is full.
//!
//! Answers are never sent from here: they travel with the group and leave after its commit.
//! A handler that panics poisons the runtime: its group and every later write are refused.
//!
//! It must not know the store, the syncer or the snapshot readers see: a group leaves through
//! `Building`, and what becomes of it is the syncer's.

use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use pure_lang::{panic_message, Answer, App, HandlerError, Json, Level, Schema, WriteSet};

use crate::building::{Building, State};
use crate::inbox::{Inbox, Wait};
use crate::job::{Job, Work};
use crate::options::CommitGate;
use crate::record;
use crate::shared::Shared;

/// The longest a caller of `Runtime::write` runs queued writes (its own and others') before it
/// leaves the rest to the owner thread: under a steady stream of writes the queue never
/// empties, and the HTTP thread holding the role has connections of its own to serve. About
/// 150 scoreboard posts; a burst from 64 connections takes less.
const RUN_HERE_BUDGET: Duration = Duration::from_millis(1);

/// The longest one job of due entries holds the owner, and the most entries it runs: then the
/// client writes queued behind it run, and the next slice is queued behind them.
const DUE_SLICE: Duration = Duration::from_millis(2);
const DUE_PER_SLICE_MAX: u64 = 64;

pub(crate) struct Owner {
    pub shared: Arc<Shared>,
    /// The tables and the group being built; the syncer takes groups from it.
    pub building: Arc<Building>,
    /// The state's schema; logged once before this run's first write record.
    pub schema: Schema,
    pub inbox: Arc<Inbox>,
    /// No record may be larger: with `Building`'s bound on a group's bytes, a group then stays
    /// under twice this, which always fits one frame of the log.
    pub group_bytes_max: usize,
    /// The owner's role: its holder, and only its holder, pops and runs writes.
    pub scratch: Mutex<Scratch>,
    /// Test hook (`RuntimeOptions::run_gate`).
    pub run_gate: Option<CommitGate>,
}

/// What running writes reuses from one write to the next.
pub(crate) struct Scratch {
    writes: WriteSet,
    record: Vec<u8>,
}

impl Default for Scratch {
    fn default() -> Scratch {
        Scratch {
            writes: WriteSet::default(),
            record: Vec::with_capacity(256),
        }
    }
}

impl Owner {
    /// The owner thread: takes the role when a caller could not (a full group, a stop).
    pub fn run(self: Arc<Self>) {
        // Held from the stop on, until `Stopped` has run (declared first, dropped last): a
        // caller still running writes finishes before the last group is handed over, and none
        // starts after.
        let mut last_role = None;
        let _stopped = Stopped {
            inbox: self.inbox.clone(),
            shared: self.shared.clone(),
            building: self.building.clone(),
        };
        // Room first, then writes: a write stays queued (where a full queue refuses more)
        // rather than held here while the group is full.
        while self.building.wait_for_room() {
            match self.inbox.wait() {
                Wait::Queued => {
                    self.run_queued(&mut self.role(), None);
                }
                // Closed and drained after a shutdown, or the syncer is gone (after a panic
                // there): take the role for good, and run what a caller queued meanwhile.
                Wait::Stop => {
                    let mut role = self.role();
                    self.run_queued(&mut role, None);
                    last_role = Some(role);
                    break;
                }
            }
        }
        drop(_stopped);
        drop(last_role);
    }

    /// Called by a caller that has just queued a write: runs the queued writes on this thread
    /// unless someone holds the role (who then runs them), for at most `RUN_HERE_BUDGET`; what
    /// is left then goes to the owner thread. Never waits for the role. True when the caller
    /// is to commit the group now (`Building::added`): it ran the group's last write, nothing
    /// is queued behind it, and the syncer was left asleep.
    #[must_use = "a caller told to commit must commit, or the syncer sleeps on the group"]
    pub fn run_here(&self) -> bool {
        let deadline = Instant::now() + RUN_HERE_BUDGET;
        // Whether the last write run here left the syncer asleep for this thread to commit.
        let mut commit = false;
        loop {
            let mut scratch = match self.scratch.try_lock() {
                Ok(scratch) => scratch,
                Err(TryLockError::WouldBlock) => return commit,
                // Only a panic of the owner thread poisons the role (a caller's is caught
                // below), and that thread has stopped: leave it to its stop guard.
                Err(TryLockError::Poisoned(_)) => return commit,
            };
            let ran = panic::catch_unwind(AssertUnwindSafe(|| {
                self.run_queued(&mut scratch, Some(deadline))
            }));
            drop(scratch);
            match ran {
                Ok(Some(here)) => commit = here,
                Ok(None) => {}
                Err(panicked) => {
                    // Not re-raised: the write that panicked may be another caller's, and this
                    // one has nothing to do with it. That write's reply went with it (its
                    // caller sees the answer dropped); the poison answers every later write.
                    let message = panic_message(panicked.as_ref());
                    eprintln!("pure-runtime: running a write panicked: {message}");
                    self.shared.poison(format!(
                        "internal error: running a write panicked ({message}); writes cannot \
                         be made durable: restart to recover the durable state from the log"
                    ));
                    self.building.wake_syncer();
                    self.inbox.wake_owner_thread();
                    return false;
                }
            }
            // A write queued while this thread held the role, by a caller that found the role
            // taken, is this thread's to run: look again now that the role is free.
            if self.inbox.is_empty() {
                return commit;
            }
            if !self.building.has_room_now() || Instant::now() >= deadline {
                // The owner thread waits for room, or takes over a steady stream of writes, so
                // that no caller waits for it.
                if commit {
                    self.building.wake_syncer();
                }
                self.inbox.wake_owner_thread();
                return false;
            }
        }
    }

    fn role(&self) -> MutexGuard<'_, Scratch> {
        self.scratch.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs queued writes until the queue is empty, the group is full, or `deadline` has passed
    /// (after at least one write). A caller (`deadline` set) may be told to commit: the last
    /// write's answer from `Building::added`, `None` if it ran none.
    fn run_queued(&self, scratch: &mut Scratch, deadline: Option<Instant>) -> Option<bool> {
        let mut room = self.building.has_room_now();
        let mut commit = None;
        while room {
            if commit.is_some() && deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                break;
            }
            let Some(job) = self.inbox.pop() else { break };
            let here;
            (room, here) = self.run_job(job, scratch, deadline.is_some());
            commit = Some(here);
        }
        commit
    }

    /// Runs one write into the group; whether the group still has room after it, and whether
    /// this thread is to commit it (only if `may_commit_here`: see `Building::added`).
    fn run_job(&self, mut job: Job, scratch: &mut Scratch, may_commit_here: bool) -> (bool, bool) {
        let started = Instant::now();
        let depth = self
            .shared
            .queue_depth
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        assert!(
            depth > 0,
            "a job was counted in the queue before it was pushed"
        );
        self.building.let_the_syncer_take();
        let mut state = self.building.lock();
        if !state.schema_logged {
            record::encode_schema(&mut state.group.bytes, &self.schema);
            state.group.end_record();
            state.schema_logged = true;
        }
        let Scratch { writes, record, .. } = scratch;
        let result = self.run_one(&mut job, &mut state, writes, record);
        if let Some(gate) = &self.run_gate {
            (gate.0)();
        }
        state.failed += u64::from(result.is_err());
        state.group.replies.push((job.reply, result));
        state.busy += started.elapsed();
        let room = self.building.has_room(&state);
        let here = self.building.added(state, may_commit_here);
        (room, here)
    }
}

/// Counts the records a job of due entries added beyond its one (`Group::extra_records`), on
/// every way out of it: the group's invariant is asserted when the job is added.
fn count_extra_records(state: &mut State, records_before: usize) {
    let records = state.group.ends.len() - records_before;
    state.group.extra_records += records.saturating_sub(1);
}

/// Runs when the owner thread stops, however it stops (drained, the syncer gone, a panic): no
/// queued or later write waits for an answer that cannot come. Stopping without a shutdown is a
/// failure: it poisons the runtime, so that writes are refused with the reason and a server
/// exits to be restarted.
struct Stopped {
    inbox: Arc<Inbox>,
    shared: Arc<Shared>,
    building: Arc<Building>,
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let (orderly, stranded) = self.inbox.close_and_drain();
        self.shared
            .queue_depth
            .fetch_sub(stranded.len() as u64, std::sync::atomic::Ordering::Relaxed);
        // Their callers find the answer dropped: a 503, never run.
        self.shared.metrics.refused(stranded.len() as u64);
        if !orderly {
            let cause = if std::thread::panicking() {
                "the owner thread panicked"
            } else {
                "the syncer thread stopped"
            };
            self.shared.poison(format!(
                "internal error: {cause}; writes cannot be made durable: restart to recover \
                 the durable state from the log"
            ));
        }
        // Last, so that a failed owner's group meets the poison: the syncer takes the last
        // group (committing it only when nothing is poisoned), then ends.
        self.building.owner_done();
    }
}

impl Owner {
    fn run_one(
        &self,
        job: &mut Job,
        state: &mut State,
        writes: &mut WriteSet,
        record: &mut Vec<u8>,
    ) -> Result<Answer, HandlerError> {
        if let Some(reason) = self.shared.poison_reason() {
            return Err(HandlerError::Unavailable { reason });
        }
        // Lang records a write's changes into an empty write set; the record is made from them
        // and they are cleared (or lang rolled them back) before the next write.
        assert!(writes.is_empty(), "the write set is empty between writes");
        let result = match job.work {
            Work::Call { .. } => self.run_handler(job, state, writes, record),
            Work::Due => self.run_due(&job.app, state, writes, record),
        };
        assert!(
            writes.is_empty(),
            "a write's changes are encoded or rolled back, then cleared"
        );
        result
    }

    /// Runs the handler and adds its record to the group.
    fn run_handler(
        &self,
        job: &mut Job,
        state: &mut State,
        writes: &mut WriteSet,
        record: &mut Vec<u8>,
    ) -> Result<Answer, HandlerError> {
        let Work::Call { handler, request } = &mut job.work else {
            unreachable!("run_one sends due work to run_due");
        };
        // The request is not needed after its call: its body is lent, not copied.
        let result = job
            .app
            .run_write_taking_body(handler, request, &mut state.tables, writes);
        if let Err(HandlerError::Panicked { handler, message }) = &result {
            // A bug in Pure or Rhai struck halfway through a change to the tables: the undo log
            // may not know all of it. Nothing from here on is made durable or published; the
            // durable state is intact in the log, and a restart recovers it.
            self.shared.poison(format!(
                "internal error: write handler {handler} panicked ({message}); the state in \
                 memory is no longer trusted: restart to recover the durable state from the log"
            ));
            writes.clear();
            return result;
        }
        if result.is_ok() {
            self.add_record(state, writes, record)?;
        }
        writes.clear();
        result
    }

    /// Adds the changes of `writes` (if any) to the group as one record. A record larger than
    /// one write may take is refused (413) and its changes rolled back.
    fn add_record(
        &self,
        state: &mut State,
        writes: &mut WriteSet,
        record: &mut Vec<u8>,
    ) -> Result<(), HandlerError> {
        if writes.is_empty() {
            return Ok(());
        }
        record::encode_writes(record, writes.changes());
        if record.len() > self.group_bytes_max {
            // One write larger than a frame can hold: it can never be made durable, and a
            // retry would fail the same way, so it is the request that is too large (413),
            // not the server that is unavailable.
            state.tables.roll_back(writes);
            let error = format!(
                "the write's changes take {} bytes in the log, more than one write may take \
                 ({} bytes: an eighth of the log's capacity, at most 4 MiB); split them \
                 into smaller writes",
                record.len(),
                self.group_bytes_max
            );
            return Err(HandlerError::Thrown {
                status: 413,
                body: serde_json::json!({ "error": error, "status": 413 }),
            });
        }
        state.group.bytes.extend_from_slice(record);
        state.group.end_record();
        for change in writes.changes() {
            state.group.written.insert(change.table());
        }
        Ok(())
    }

    /// Runs the schedule's entries due now, each as a write of its own (its changes and its
    /// entry's removal one record), for at most `DUE_SLICE` or `DUE_PER_SLICE_MAX` entries and
    /// while the group has room; first makes the manifest's named entries that are missing.
    /// Answers how many ran and failed. A failed entry is logged and counted, not retried.
    fn run_due(
        &self,
        app: &App,
        state: &mut State,
        writes: &mut WriteSet,
        record: &mut Vec<u8>,
    ) -> Result<Answer, HandlerError> {
        let now = app.world().now_ms();
        let records_before = state.group.ends.len();
        app.ensure_schedules(now, &mut state.tables, writes);
        let ensured = self.add_record(state, writes, record);
        writes.clear();
        ensured?;
        let started = Instant::now();
        let (mut ran, mut failed) = (0u64, 0u64);
        while ran < DUE_PER_SLICE_MAX
            && started.elapsed() < DUE_SLICE
            && self.building.has_room(state)
        {
            let Some(run) = app.run_due(now, &mut state.tables, writes) else {
                break;
            };
            ran += 1;
            let mut failure = match &run.result {
                Err(HandlerError::Panicked { handler, message }) => {
                    self.shared.poison(format!(
                        "internal error: scheduled handler {handler} panicked ({message}); the \
                         state in memory is no longer trusted: restart to recover the durable \
                         state from the log"
                    ));
                    writes.clear();
                    count_extra_records(state, records_before);
                    return Err(run.result.expect_err("matched an error"));
                }
                Err(error) => Some(error.to_string()),
                Ok(_) => None,
            };
            if let Err(error) = self.add_record(state, writes, record) {
                // Its changes cannot be logged: the entry is removed alone.
                failure = Some(error.to_string());
                writes.clear();
                app.drop_due(run.key.clone(), &mut state.tables, writes);
                if let Err(error) = self.add_record(state, writes, record) {
                    writes.clear();
                    count_extra_records(state, records_before);
                    return Err(error);
                }
            }
            writes.clear();
            if let Some(error) = failure {
                failed += 1;
                app.log_line(
                    Level::Error,
                    &run.handler,
                    &format!("schedule-{}", run.id),
                    &format!(
                        "the scheduled entry {} (due at {} ms) failed and is not retried: {error}",
                        run.id, run.due_ms
                    ),
                );
            }
        }
        count_extra_records(state, records_before);
        self.shared.note_scheduled(ran, failed);
        Ok(Answer::ok(Json::from_value(
            &serde_json::json!({ "ran": ran, "failed": failed }),
        )))
    }
}
