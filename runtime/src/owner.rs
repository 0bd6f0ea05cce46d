//! The owner thread: runs write handlers one at a time, each into the group being built.
//!
//! Per write, in the inbox's order and holding the `Building` lock:
//! 1. run the handler over the tables; a returned handler's write set is encoded as one record,
//!    a failed one was rolled back by `lang` and leaves nothing;
//! 2. add the record and the answer to the group.
//!
//! The syncer takes the group, with a snapshot of the tables after it (O(1) per table; one per
//! group, not per write: RHAI.md point 6), the moment it is done with the previous one. So the
//! owner builds group N+1 while the syncer commits group N, every write that arrives meanwhile
//! joins N+1, and the owner never runs further ahead: it waits only when a group is full.
//!
//! Answers are never sent from here: they travel with the group and leave after its commit.
//! A handler that panics poisons the runtime: its group and every later write are refused.

use std::sync::Arc;
use std::time::Instant;

use pure_lang::{HandlerError, Request, Schema, Tables, WriteSet};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::building::{Building, State};
use crate::inbox::{Inbox, Next};
use crate::record;
use crate::runtime::Shared;

pub(crate) type Reply = oneshot::Sender<Result<Value, HandlerError>>;

/// A queued write call.
pub(crate) struct Job {
    pub handler: String,
    pub request: Request,
    pub reply: Reply,
}

/// A group of writes on its way to the syncer.
#[derive(Default)]
pub(crate) struct Group {
    /// The group's records back to back; `ends[i]` is where record `i` ends.
    pub bytes: Vec<u8>,
    pub ends: Vec<usize>,
    pub replies: Vec<(Reply, Result<Value, HandlerError>)>,
    /// The state after the group, to publish once it is durable.
    pub snapshot: Arc<Tables>,
}

impl Group {
    pub fn records(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(s, e)| &self.bytes[s..e])
    }
}

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
}

impl Owner {
    pub fn run(self) {
        let mut writes = WriteSet::default();
        let mut record = Vec::with_capacity(256);
        let mut schema_logged = false;
        let _stopped = Stopped {
            inbox: self.inbox.clone(),
            shared: self.shared.clone(),
            building: self.building.clone(),
        };
        // Room first, then a write: a write stays queued (where a full queue refuses more)
        // rather than held here while the group is full.
        while self.building.wait_for_room() {
            let job = match self.inbox.next() {
                Next::Job(job) => job,
                // Drained after a shutdown, or the syncer is gone (after a panic there).
                Next::Stop => break,
            };
            let started = Instant::now();
            self.shared
                .queue_depth
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            let mut state = self.building.lock();
            if !schema_logged {
                record::encode_schema(&mut state.group.bytes, &self.schema);
                let end = state.group.bytes.len();
                state.group.ends.push(end);
                schema_logged = true;
            }
            let result = self.run_one(&job, &mut state, &mut writes, &mut record);
            state.failed += u64::from(result.is_err());
            state.group.replies.push((job.reply, result));
            state.busy += started.elapsed();
            self.building.added(state);
        }
    }
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
        job: &Job,
        state: &mut State,
        writes: &mut WriteSet,
        record: &mut Vec<u8>,
    ) -> Result<Value, HandlerError> {
        if let Some(reason) = self.shared.poison_reason() {
            return Err(HandlerError::Unavailable { reason });
        }
        let app = &self.shared.app;
        let result = app.run_write(&job.handler, &job.request, &mut state.tables, writes);
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
        if result.is_ok() && !writes.is_empty() {
            record::encode_writes(record, writes.changes());
            if record.len() > self.group_bytes_max {
                // One write larger than a frame can hold: it can never be made durable.
                state.tables.roll_back(writes);
                return Err(HandlerError::Unavailable {
                    reason: format!(
                        "the write's record of {} bytes is larger than the log allows",
                        record.len()
                    ),
                });
            }
            state.group.bytes.extend_from_slice(record);
            let end = state.group.bytes.len();
            state.group.ends.push(end);
        }
        writes.clear();
        result
    }
}
