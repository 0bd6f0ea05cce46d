//! The owner thread: runs write handlers one at a time, in groups.
//!
//! Steps per group:
//! 1. run each write as it arrives (the inbox's order), up to a bound per group; a returned
//!    handler's write set is encoded as one record, a failed one was rolled back by `lang` and
//!    leaves nothing;
//! 2. as soon as the syncer is idle and no write is waiting, take one snapshot of the state after
//!    the group (O(1) per table; one per group, not per write: RHAI.md point 6);
//! 3. hand the group to the syncer. So the owner builds group N+1 while the syncer commits group
//!    N, every write that arrives meanwhile joins N+1, and the owner never runs further ahead.
//!
//! Answers are never sent from here: they travel with the group and leave after its commit.
//! A handler that panics poisons the runtime: its group and every later write are refused.

use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pure_lang::{HandlerError, Request, Schema, Tables, WriteSet};
use serde_json::Value;
use tokio::sync::oneshot;

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

/// Most writes in one group: bounds the time a group's first request waits for its answer.
const GROUP_WRITES_MAX: usize = 1024;

pub(crate) struct Owner {
    pub shared: Arc<Shared>,
    pub tables: Tables,
    /// The state's schema; logged once before this run's first write record.
    pub schema: Schema,
    pub inbox: Arc<Inbox>,
    pub syncer: SyncSender<Group>,
    /// No more writes join a group past this many bytes, and no record may be larger: a group
    /// then stays under twice this, which always fits one frame of the log.
    pub group_bytes_max: usize,
}

impl Owner {
    pub fn run(mut self) {
        let mut writes = WriteSet::default();
        let mut record = Vec::with_capacity(256);
        let mut schema_logged = false;
        let mut group = Group::default();
        let mut busy = Duration::ZERO;
        let mut failed = 0;
        let _stopped = Stopped {
            inbox: self.inbox.clone(),
            shared: self.shared.clone(),
        };
        loop {
            let room =
                group.replies.len() < GROUP_WRITES_MAX && group.bytes.len() < self.group_bytes_max;
            match self.inbox.next(room, !group.replies.is_empty()) {
                Next::Job(job) => {
                    let started = Instant::now();
                    self.shared
                        .queue_depth
                        .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                    if !schema_logged {
                        record::encode_schema(&mut group.bytes, &self.schema);
                        group.ends.push(group.bytes.len());
                        schema_logged = true;
                    }
                    let result = self.run_one(&job, &mut writes, &mut record, &mut group);
                    failed += u64::from(result.is_err());
                    group.replies.push((job.reply, result));
                    busy += started.elapsed();
                }
                Next::SyncerIdle => {
                    let started = Instant::now();
                    group.snapshot = Arc::new(self.tables.clone());
                    let count = group.replies.len() as u64;
                    busy += started.elapsed();
                    self.shared.metrics.owner_group(busy, count, failed);
                    (busy, failed) = (Duration::ZERO, 0);
                    // The syncer said it waits for a group: this rendezvous completes at once.
                    if self.syncer.send(std::mem::take(&mut group)).is_err() {
                        break;
                    }
                }
                // Drained after a shutdown, or the syncer is gone (after a panic there): the
                // group's callers see their answer dropped; nothing of it was acknowledged.
                Next::Stop => {
                    let count = group.replies.len() as u64;
                    self.shared.metrics.owner_group(busy, count, failed);
                    break;
                }
            }
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
    }
}

impl Owner {
    fn run_one(
        &mut self,
        job: &Job,
        writes: &mut WriteSet,
        record: &mut Vec<u8>,
        group: &mut Group,
    ) -> Result<Value, HandlerError> {
        if let Some(reason) = self.shared.poison_reason() {
            return Err(HandlerError::Unavailable { reason });
        }
        let app = &self.shared.app;
        let result = app.run_write(&job.handler, &job.request, &mut self.tables, writes);
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
                self.tables.roll_back(writes);
                return Err(HandlerError::Unavailable {
                    reason: format!(
                        "the write's record of {} bytes is larger than the log allows",
                        record.len()
                    ),
                });
            }
            group.bytes.extend_from_slice(record);
            group.ends.push(group.bytes.len());
        }
        writes.clear();
        result
    }
}
