//! The syncer's role: owns the store; makes each group durable, then publishes and answers it.
//!
//! The role is a lock (`SyncRole`). The syncer thread takes it whenever a group is ready. A
//! caller that has just run a write alone in its group takes it instead, when writes come one
//! at a time (for the last 64 groups each held one write and none was added while another was
//! committed), syncs are quick (a log in RAM, or `--sync none`), and the syncer sleeps: it
//! commits on its own thread (`commit_here`). A woken syncer waits 30-80 µs for a core on a
//! busy 2-core machine, on every such write's path; keeping it awake for the next one,
//! spinning on `sched_yield`, cost 120 µs of CPU per TPC-C transaction at one terminal
//! (research note 024). Otherwise the syncer stays awake a moment after a lone write, as
//! before: under load the next group grows meanwhile. Groups are taken only under the role, so
//! they are committed in the order they were built, whoever commits them.
//!
//! Steps per group (in the order the owner made them):
//! 0. take the group being built, as soon as it holds a write (`Building::take`);
//! 1. append the group's records and commit them: one write and one fdatasync;
//! 2. publish the group's snapshot (reads now see it: it is durable);
//! 3. send the group's answers;
//! 4. when the log since the last checkpoint has grown past the interval, start a checkpoint of
//!    that snapshot on a background thread; install finished ones between groups.
//!
//! Between groups, the published snapshot's LSN is the store's durable LSN: a group's records
//! take the LSNs after it, and its snapshot is published with the last of them (asserted in
//! `make_durable` and `commit_group`).
//!
//! A failed commit poisons the store: the group and every later write are answered
//! `Unavailable`, the published snapshot stays the last durable one.
//!
//! A full log is backpressure, not a fault: the group waits while checkpoints try to free the
//! log, but for `write_timeout` at most from the moment the log filled. Past that (a disk that
//! stays full, so that no checkpoint can be written), the group is refused: its records are
//! dropped unwritten, the owner's tables go back to the durable state (`Building::roll_back`),
//! and its writes and those built on top of it are answered 503. A refused write is never
//! applied later. New writes are refused at the door until a checkpoint frees the log, which
//! the syncer keeps trying, so writes resume by themselves once space returns.
//!
//! It must not know how writes are run: it sees groups of records and answers, made by the
//! owner through `Building`. A caller commits only a group of lone writes, never while a test's
//! commit gate is set, and only a group that fits the log now: waiting for a checkpoint to free
//! the log is the syncer thread's, not a caller's.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pure_lang::{panic_message, Answer, HandlerError, Schema, Tables};
use pure_store::{CheckpointDone, Error as StoreError, Lsn, Store};

use crate::building::{Building, Take, Taken};
use crate::checkpoint::write_image;
use crate::group::Group;
use crate::inbox::Inbox;
use crate::job::Reply;
use crate::log_growth::{sized_for, wanted_capacity, LogGrowth, Tended};
use crate::options::CommitGate;
use crate::shared::Shared;
use crate::snapshot::Snapshot;

type CheckpointResult = Result<(CheckpointDone, Instant), String>;

/// Pauses between checkpoints that try to free a full log (first, and most).
const RETRY_PAUSE_MIN: Duration = Duration::from_millis(10);
const RETRY_PAUSE_MAX: Duration = Duration::from_secs(1);

/// How often a group waiting for log space looks whether a stop has begun.
const STOP_CHECK_INTERVAL: Duration = Duration::from_millis(50);

/// How many groups in a row must pass with no sign of concurrent writes before a lone write is
/// committed on its caller's thread again: under load a group of one is an accident, and a
/// caller committing at once would only make the next groups smaller (see `commit_taken`).
const QUIET_GROUPS: u32 = 64;

/// How long the syncer stays awake for the next write, yielding its core to any thread that
/// wants it, after a group of one write that came within this long of the previous answer,
/// when callers do not commit lone writes (writes were concurrent lately). Under load such a
/// group is an accident, and the wait lets the next group grow while the threads that make the
/// writes run: without it, groups at 64 TPC-C terminals held 2-4 writes instead of 6-13, and the
/// server ran 3-9% slower (research note 024). A syncer that spun without yielding, after every
/// group, ran 0.83x at 64 connections: it took a core from the threads that make the writes
/// (research note 010).
const AWAKE_AFTER_LONE_WRITE: Duration = Duration::from_micros(300);

/// The syncer's role: whoever holds it takes and commits groups, so that groups are committed
/// one at a time, in the order they were taken. The syncer thread takes it when a group is
/// ready; a caller that has just run a lone write takes it instead of waking the syncer
/// (`commit_here`).
pub(crate) struct SyncRole {
    syncer: Mutex<Syncer>,
    building: Arc<Building>,
    inbox: Arc<Inbox>,
    shared: Arc<Shared>,
}

pub(crate) struct Syncer {
    pub shared: Arc<Shared>,
    pub store: Store,
    pub schema: Arc<Schema>,
    pub building: Arc<Building>,
    pub inbox: Arc<Inbox>,
    pub checkpoint_interval_bytes: u64,
    pub checkpoint_image_ratio: f64,
    /// The size of the last checkpoint's image (0 before the first).
    pub image_bytes: u64,
    /// The longest a group waits for log space (see the module doc).
    pub write_timeout: Duration,
    pub commit_gate: Option<CommitGate>,
    /// The checkpoint being written on its own thread, if any.
    pub checkpoint: Option<Receiver<CheckpointResult>>,
    pub log_full: LogFull,
    /// The log's growth under way, if any.
    pub growth: LogGrowth,
    /// When the last group's answers were sent.
    pub answered_at: Instant,
    /// See `RuntimeOptions::lone_write_sync_max`.
    pub lone_write_sync_max: Option<Duration>,
    /// Groups committed in a row with no sign of concurrent writes (see `commit_taken`).
    pub quiet_groups: u32,
    /// How long the last commit's write and sync took.
    pub last_sync: Duration,
    /// How long the syncer thread watches for the next write, awake, before it sleeps.
    pub stay_awake: Duration,
}

/// What the syncer knows of a full log.
#[derive(Default)]
pub(crate) struct LogFull {
    /// Since when no group could be committed for want of space (cleared when one is, or when
    /// a checkpoint is installed).
    since: Option<Instant>,
    /// When to start the next checkpoint after one failed, and the pause after that one.
    next_attempt: Option<Instant>,
    pause: Duration,
}

/// What became of a group.
enum Outcome {
    /// On stable storage up to `last_lsn`, the LSN of its last record (the LSN it found if it
    /// had none); the sync's duration when there was one.
    Durable {
        sync: Option<Duration>,
        last_lsn: Lsn,
    },
    /// Not made durable, and undone: the reason for its 503s.
    Refused(String),
    /// A storage failure: the store is poisoned.
    Failed(String),
}

impl SyncRole {
    pub fn new(syncer: Syncer) -> SyncRole {
        SyncRole {
            building: syncer.building.clone(),
            inbox: syncer.inbox.clone(),
            shared: syncer.shared.clone(),
            syncer: Mutex::new(syncer),
        }
    }

    /// The role, waiting for it; `None` once a panic while it was held poisoned it.
    fn lock(&self) -> Option<MutexGuard<'_, Syncer>> {
        self.syncer.lock().ok()
    }

    /// The syncer thread: takes the role whenever a group is ready and commits it, until the
    /// owner has stopped and its last group is committed.
    pub fn run(&self) {
        let _gone = SyncerGone {
            inbox: self.inbox.clone(),
            building: self.building.clone(),
        };
        loop {
            // With a full log, wake up now and then to try to free it even without writes.
            let Some(syncer) = self.lock() else { return };
            let patience = syncer.log_full.since.map(|_| RETRY_PAUSE_MAX / 4);
            let awake = syncer.stay_awake;
            drop(syncer);
            match self.building.wait_for_group(awake, patience) {
                Take::Ready | Take::Group(_) => {}
                Take::Idle => {
                    let Some(mut syncer) = self.lock() else {
                        return;
                    };
                    syncer.free_log_space(Instant::now() + RETRY_PAUSE_MIN);
                    continue;
                }
                Take::Done => break,
            }
            let Some(mut syncer) = self.lock() else {
                return;
            };
            match self.building.take(|_, _| true) {
                Take::Group(taken) => syncer.commit_taken(taken),
                // A caller committed it meanwhile.
                Take::Idle | Take::Ready => {}
                Take::Done => break,
            }
        }
        // After any caller's commit still under way.
        let Some(mut syncer) = self.lock() else {
            return;
        };
        if let Some(running) = syncer.checkpoint.take() {
            if let Ok(result) = running.recv() {
                syncer.install(result);
            }
        }
        // A fill still writing zeros past the ring must end before the store closes: the next
        // opener of the directory could grow the log into the space it writes, or see it cut
        // the file back after a failure.
        syncer.growth.finish_fill();
    }

    /// Called by a caller that ran the group's last write and was told to commit it
    /// (`Building::added`): commits it on this thread when the role is free and the group fits
    /// the log now, and wakes the syncer otherwise.
    pub fn commit_here(&self) {
        let mut syncer = match self.syncer.try_lock() {
            Ok(syncer) => syncer,
            // Someone commits now (and the syncer thread takes what follows): writes do not
            // come one at a time. Or a panic poisoned the role. Either way, the syncer thread's.
            Err(_) => {
                self.building.contended();
                return self.building.wake_syncer();
            }
        };
        if !syncer.may_commit_here() {
            drop(syncer);
            return self.building.wake_syncer();
        }
        // Only a group whose frame fits the log now: a caller never waits for a checkpoint to
        // free the log (its thread serves other connections). A larger one is the syncer's.
        let store = &syncer.store;
        let taken = match self
            .building
            .take(|records, bytes| store.has_room_for(records, bytes))
        {
            Take::Group(taken) => taken,
            Take::Idle => return self.building.wake_syncer(),
            // Another caller, or the syncer thread, took it first; or the owner has stopped.
            Take::Ready | Take::Done => return,
        };
        self.shared.metrics.group_committed_here();
        let committed = panic::catch_unwind(AssertUnwindSafe(|| syncer.commit_taken(taken)));
        let log_full = syncer.log_full.since.is_some();
        drop(syncer);
        if let Err(panicked) = committed {
            // Not re-raised on a caller's thread. Nothing later is made durable: the poison
            // refuses every group after this one, whoever commits it.
            let message = panic_message(panicked.as_ref());
            eprintln!("pure-runtime: committing a group panicked: {message}");
            self.shared.poison(format!(
                "internal error: committing a group panicked ({message}); writes cannot be made \
                 durable: restart to recover the durable state from the log"
            ));
            self.building.wake_syncer();
        } else if log_full {
            // Not expected (the group fit), but a full log left to a sleeping syncer would
            // refuse writes until a restart: it is the syncer's to free.
            self.building.wake_syncer_for_the_log();
        }
    }
}

impl Syncer {
    /// Whether a caller may commit a lone write on its own thread: not with a test's commit gate
    /// (which holds the committing thread, and is documented as the syncer's), nor with a full
    /// log (waiting for a checkpoint to free it is the syncer thread's; `commit_here` also
    /// takes only a group that fits).
    fn may_commit_here(&self) -> bool {
        self.commit_gate.is_none() && self.log_full.since.is_none()
    }

    /// Commits a group the role's holder took, then starts a checkpoint if the log calls for
    /// one.
    fn commit_taken(&mut self, taken: Taken) {
        let added_before = taken.added_before;
        let group = taken.group;
        let count = group.replies.len() as u64;
        assert!(count > 0, "a group is taken once it holds a write");
        let back_to_back = self.answered_at.elapsed() < AWAKE_AFTER_LONE_WRITE;
        self.shared
            .metrics
            .owner_group(taken.busy, count, taken.failed);
        self.poll_checkpoint();
        // Writes come one at a time while nothing says otherwise: each group holds one write, no
        // write joined the next group or the queue while it was committed, and no caller found
        // the role taken. One sign of concurrent writes turns callers' commits off for
        // `QUIET_GROUPS` groups: a caller that commits a group of one at once, under load, only
        // makes the next groups smaller (each costs a snapshot and a sync), where a syncer that
        // takes its time lets them grow. Counters, not locks: the group's lock is held by every
        // write the owner runs. The signs are read before the group is answered: after it, the
        // writer it answered may already have sent its next write (on a busy machine, before
        // this thread runs again), which is one writer, not two.
        let signs = move |syncer: &Syncer| {
            count > 1
                || syncer.building.take_contended()
                || syncer.building.added_total() != added_before
                || syncer.shared.queue_depth.load(Ordering::Relaxed) > 0
        };
        let concurrent = self.commit_group(group, signs);
        self.answered_at = Instant::now();
        self.quiet_groups = match concurrent {
            true => 0,
            false => self.quiet_groups.saturating_add(1),
        };
        let lone_writes = self.quiet_groups >= QUIET_GROUPS
            && self
                .lone_write_sync_max
                .is_some_and(|max| self.last_sync < max);
        self.building.set_lone_writes(lone_writes);
        self.stay_awake = match count == 1 && back_to_back && !lone_writes {
            true => AWAKE_AFTER_LONE_WRITE,
            false => Duration::ZERO,
        };
        let used = self.store.log_used_bytes();
        let limit = checkpoint_limit(
            self.checkpoint_interval_bytes,
            self.checkpoint_image_ratio,
            self.image_bytes,
        );
        self.tend_log(wanted_capacity(
            used,
            self.store.log_capacity_bytes(),
            limit,
        ));
        let capacity = self.store.log_capacity_bytes();
        self.shared.metrics.log(used, capacity);
        let due = checkpoint_due(limit, used, capacity);
        if self.checkpoint.is_none() && due && !self.is_poisoned() {
            self.start_checkpoint();
        }
    }

    fn is_poisoned(&self) -> bool {
        self.shared.poison_reason().is_some()
    }

    /// Commits `group` and answers it: what `signs` said of the writes just before the answers
    /// went (a group refused or failed counts as a sign).
    fn commit_group(&mut self, group: Group, signs: impl FnOnce(&Syncer) -> bool) -> bool {
        let records = group.ends.len() as u64;
        match self.make_durable(&group) {
            Outcome::Durable { sync, last_lsn } => {
                let snapshot = Snapshot::new(group.snapshot, last_lsn.0);
                let replaced = self.shared.publish(snapshot);
                assert_eq!(
                    replaced.lsn + records,
                    last_lsn.0,
                    "the snapshot published holds the group's records on top of the one it replaces"
                );
                self.shared.metrics.committed(records, sync, last_lsn.0);
                if let Some(sync) = sync {
                    self.last_sync = sync;
                }
                let concurrent = signs(self);
                self.answer(group.replies, last_lsn);
                // After the answers: the writers hear first, and the streams that watch the
                // state (live queries, thousands of them perhaps) do not hold them up.
                if !group.written.is_empty() {
                    self.shared.announce(last_lsn.0, &group.written);
                }
                drop(replaced);
                concurrent
            }
            Outcome::Refused(reason) => {
                self.store.discard_pending();
                // Until a checkpoint frees the log, new writes are refused at the door rather
                // than run and then refused here.
                if !self.shared.is_stopping() {
                    self.shared.set_log_full(Some(reason.clone()));
                }
                let durable = self.shared.published();
                let behind = self.building.roll_back(&durable.tables);
                self.refuse(group, &reason);
                self.refuse(behind, &reason);
                true
            }
            Outcome::Failed(reason) => {
                self.shared.poison(reason.clone());
                self.refuse(group, &reason);
                true
            }
        }
    }

    /// Sends the answers of a group made durable up to `last_lsn`.
    fn answer(&self, replies: Vec<(Reply, Result<Answer, HandlerError>)>, last_lsn: Lsn) {
        assert!(
            self.store.durable_lsn() >= last_lsn,
            "a group is answered only after its sync"
        );
        for (reply, result) in replies {
            // A caller that stopped waiting dropped its receiver: nothing to do.
            let _ = reply.send(result);
        }
    }

    /// Answers a group's writes that ran `Unavailable`: none of it was made durable. A write
    /// that failed keeps its own answer (it changed nothing), and so does the write whose panic
    /// poisoned the runtime (a 500: retrying it would only panic again).
    fn refuse(&self, group: Group, reason: &str) {
        let mut refused = 0;
        for (reply, result) in group.replies {
            let answer = match result {
                Ok(_) => {
                    refused += 1;
                    HandlerError::Unavailable {
                        reason: reason.to_string(),
                    }
                }
                Err(HandlerError::Unavailable { reason }) => {
                    refused += 1;
                    HandlerError::Unavailable { reason }
                }
                Err(other) => other,
            };
            let _ = reply.send(Err(answer));
        }
        self.shared.metrics.refused(refused);
    }

    /// Appends and commits the group.
    fn make_durable(&mut self, group: &Group) -> Outcome {
        if let Some(reason) = self.shared.poison_reason() {
            return Outcome::Failed(reason);
        }
        let mut last_lsn = self.store.durable_lsn();
        if group.ends.is_empty() {
            return Outcome::Durable {
                sync: None,
                last_lsn,
            };
        }
        for record in group.records() {
            match self.store.append(record) {
                Ok(lsn) => {
                    assert_eq!(
                        lsn.0,
                        last_lsn.0 + 1,
                        "a group's records take the LSNs right after the durable ones, in order"
                    );
                    last_lsn = lsn;
                }
                Err(e) => return Outcome::Failed(format!("cannot log a write: {e}")),
            }
        }
        if let Some(gate) = &self.commit_gate {
            (gate.0)();
        }
        match self.commit(last_lsn) {
            Some(outcome) => outcome,
            None => self.commit_when_log_has_room(last_lsn),
        }
    }

    /// One commit of the pending records, the last of them `last_lsn`: `None` when the log is
    /// full.
    fn commit(&mut self, last_lsn: Lsn) -> Option<Outcome> {
        let started = Instant::now();
        match self.store.commit() {
            Ok(durable) => {
                assert_eq!(
                    durable, last_lsn,
                    "a commit makes the group durable up to its last record, and no further"
                );
                self.log_has_room();
                Some(Outcome::Durable {
                    sync: Some(started.elapsed()),
                    last_lsn,
                })
            }
            Err(StoreError::LogFull { .. }) => None,
            Err(e) => Some(Outcome::Failed(format!(
                "storage failure, writes stopped: {e}"
            ))),
        }
    }

    /// Commits the pending group of a full log once checkpoints have freed room, or refuses it
    /// once the log has been full for `write_timeout` (see the module doc). A stop refuses it
    /// at once.
    fn commit_when_log_has_room(&mut self, last_lsn: Lsn) -> Outcome {
        let since = *self.log_full.since.get_or_insert_with(Instant::now);
        let deadline = since + self.write_timeout;
        loop {
            if self.shared.is_stopping() {
                return Outcome::Refused(
                    "the log is full and the server is stopping: this write was not made \
                     durable, and was undone"
                        .to_string(),
                );
            }
            // A log too small for the group, or full: it grows, if it may, while checkpoints
            // try to free it.
            let capacity = self.store.log_capacity_bytes();
            if self.tend_log(self.store.capacity_needed().max(capacity.saturating_mul(2))) {
                if let Some(outcome) = self.commit(last_lsn) {
                    return outcome;
                }
            }
            if Instant::now() >= deadline {
                let why = self
                    .shared
                    .log_full_reason()
                    .unwrap_or_else(|| "no checkpoint freed it in time".to_string());
                return Outcome::Refused(format!(
                    "the log has been full for {} ms ({why}): this write was not made durable, \
                     and was undone; retry later",
                    self.write_timeout.as_millis()
                ));
            }
            // In slices, so that a stop that begins meanwhile is seen within one. A group larger
            // than the log waits for the growth's fill (checkpoints would not make it fit).
            let until = deadline.min(Instant::now() + STOP_CHECK_INTERVAL);
            let too_large = self.store.capacity_needed() > self.store.log_capacity_bytes();
            if too_large && self.growth.filling() {
                self.growth
                    .await_fill(until.saturating_duration_since(Instant::now()));
            } else {
                self.free_log_space(until);
            }
            if let Some(outcome) = self.commit(last_lsn) {
                return outcome;
            }
        }
    }

    /// One step towards a log with room, returning by `until` at the latest: waits for the
    /// running checkpoint and installs it, or starts one (after the pause that follows a
    /// failed one).
    fn free_log_space(&mut self, until: Instant) {
        let now = Instant::now();
        if self.await_checkpoint(until.saturating_duration_since(now)) {
            return;
        }
        match self.log_full.next_attempt {
            Some(next) if now < next => {
                std::thread::sleep(next.min(until).saturating_duration_since(now));
            }
            _ => self.start_checkpoint(),
        }
    }

    /// At open: a state whose checkpoints will want more log than the log has (twice its
    /// image, with a quarter free besides) gets it now, its zeros written in the background
    /// before the writes need them (an imported or salvaged state, or a log made smaller).
    pub fn size_log_for_state(&mut self) {
        let by_image = (self.image_bytes as f64 * self.checkpoint_image_ratio) as u64;
        self.tend_log(sized_for(by_image, self.store.log_capacity_bytes()));
    }

    /// One step of the log's growth toward `wanted` bytes (see `LogGrowth::tend`): true if the
    /// log grew.
    fn tend_log(&mut self, wanted: u64) -> bool {
        match self.growth.tend(&mut self.store, wanted) {
            Tended::Nothing => false,
            Tended::Grew(capacity) => {
                eprintln!("pure-runtime: the log grew to {} KiB", capacity >> 10);
                self.shared
                    .metrics
                    .log(self.store.log_used_bytes(), capacity);
                true
            }
            Tended::FillFailed(reason) => {
                eprintln!("pure-runtime: {reason}");
                false
            }
            Tended::Poisoned(reason) => {
                self.shared.poison(reason);
                false
            }
        }
    }

    /// Installs a checkpoint that has finished, if one has.
    fn poll_checkpoint(&mut self) {
        self.await_checkpoint(Duration::ZERO);
    }

    /// Waits up to `wait` for the running checkpoint and installs it if it finished; false if
    /// none was running.
    fn await_checkpoint(&mut self, wait: Duration) -> bool {
        let Some(running) = &self.checkpoint else {
            return false;
        };
        match running.recv_timeout(wait) {
            Ok(result) => {
                self.checkpoint = None;
                self.install(result);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => self.checkpoint = None,
        }
        true
    }

    /// The log has room again: writes are let in at the door.
    fn log_has_room(&mut self) {
        if self.log_full.since.take().is_some() {
            self.shared.set_log_full(None);
        }
    }

    /// Starts a checkpoint of the published (durable) state on its own thread.
    fn start_checkpoint(&mut self) {
        let published = self.shared.published();
        let covered = Lsn(published.lsn);
        let writer = match self.store.checkpoint_writer(covered) {
            Ok(writer) => writer,
            Err(e) => return self.checkpoint_failed(format!("cannot start a checkpoint: {e}")),
        };
        let (done_tx, done_rx) = mpsc::channel();
        let (schema, tables) = (self.schema.clone(), published.tables.clone());
        let spawned = std::thread::Builder::new()
            .name("pure-checkpoint".into())
            .spawn(move || {
                let started = Instant::now();
                let _ = done_tx.send(finish_checkpoint(writer, &schema, &tables, started));
            });
        match spawned {
            Ok(_) => self.checkpoint = Some(done_rx),
            Err(e) => self.checkpoint_failed(format!("cannot start a checkpoint thread: {e}")),
        }
    }

    fn install(&mut self, result: CheckpointResult) {
        match result {
            Ok((done, started)) => {
                let lsn = done.lsn.0;
                let image_bytes = done.image_bytes;
                match self.store.install_checkpoint(done) {
                    Ok(()) => {
                        self.image_bytes = image_bytes;
                        self.shared.metrics.checkpoint(started.elapsed(), lsn);
                        self.log_full.next_attempt = None;
                        self.log_full.pause = Duration::ZERO;
                        // The log before the durable state is free again.
                        self.log_has_room();
                    }
                    Err(e) => self.checkpoint_failed(format!("cannot install a checkpoint: {e}")),
                }
            }
            // A failed checkpoint loses nothing (the log still holds every record): report it;
            // the next group past the interval tries again.
            Err(e) => self.checkpoint_failed(format!("checkpoint failed: {e}")),
        }
    }

    /// Reports a checkpoint that failed. With a full log it also refuses new writes until one
    /// succeeds, and spaces the next attempt.
    fn checkpoint_failed(&mut self, error: String) {
        eprintln!("pure-runtime: {error}");
        if self.log_full.since.is_some() {
            self.shared.set_log_full(Some(format!(
                "the log is full and a checkpoint to free it failed ({error}); retry later"
            )));
            let pause = self.log_full.pause.clamp(RETRY_PAUSE_MIN, RETRY_PAUSE_MAX);
            self.log_full.next_attempt = Some(Instant::now() + pause);
            self.log_full.pause = (pause * 2).min(RETRY_PAUSE_MAX);
        }
        self.shared.metrics.checkpoint_failed(error);
    }
}

/// The log bytes after which a checkpoint is due, on a log large enough: the interval, or
/// `ratio` times the last image (`image_bytes`) if more. A checkpoint writes the whole state;
/// the log, only what changed: on a state larger than the interval, the ratio is what keeps
/// checkpoints from writing more than the log does.
fn checkpoint_limit(interval: u64, ratio: f64, image_bytes: u64) -> u64 {
    interval.max((image_bytes as f64 * ratio) as u64)
}

/// Whether the log, `used` bytes since the last checkpoint, is due another: past `limit`, or
/// past three quarters of the log's `capacity` (a quarter stays free for the writes made while
/// the checkpoint is written; the log grows meanwhile if it may: `wanted_capacity`).
fn checkpoint_due(limit: u64, used: u64, capacity: u64) -> bool {
    used > limit.min(capacity / 4 * 3)
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

#[cfg(test)]
mod tests {
    use super::{checkpoint_due, checkpoint_limit};

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_checkpoint_is_due_past_the_interval_and_past_the_ratio_times_the_last_image() {
        let capacity = 256 * MIB;
        let due =
            |used, image| checkpoint_due(checkpoint_limit(64 * MIB, 2.0, image), used, capacity);
        // A state smaller than the interval: the interval decides.
        assert!(!due(64 * MIB, MIB));
        assert!(due(64 * MIB + 1, MIB));
        // A larger one: the log grows to twice its image first.
        assert!(!due(150 * MIB, 75 * MIB));
        assert!(due(150 * MIB + 1, 75 * MIB));
        // But never past three quarters of the log, whatever the image or the interval ask.
        assert!(!due(192 * MIB, 150 * MIB));
        assert!(due(192 * MIB + 1, 150 * MIB));
        let limit = checkpoint_limit(200 * MIB, 2.0, 0);
        assert!(checkpoint_due(limit, 192 * MIB + 1, capacity));
        // A small log (one that has not grown yet) takes its checkpoints sooner.
        assert!(checkpoint_due(
            checkpoint_limit(64 * MIB, 2.0, 0),
            3 * MIB + 1,
            4 * MIB
        ));
        // A ratio of 0 leaves the interval alone.
        assert_eq!(checkpoint_limit(64 * MIB, 0.0, 150 * MIB), 64 * MIB);
    }
}
