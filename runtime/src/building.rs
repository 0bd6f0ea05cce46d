//! The group being built: the owner's tables and the writes run since the last group left, and
//! how a group passes to the syncer.
//!
//! The owner runs each write holding the `state` lock, so a write's changes to the tables, its
//! record and its answer join the group in one step. A group leaves as soon as the syncer is
//! idle, at the first moment one of the two threads can cut it:
//! - the syncer, done with a group, takes the next one itself when the owner is not in the
//!   middle of a write (`try_lock`): the owner need not be woken;
//! - otherwise the owner cuts it right after the write it is running, and hands it over through
//!   `handoff`, a lock of its own: the syncer never waits for the owner's lock, which the owner
//!   takes again at once for the next write and so would hold for as long as writes keep coming.
//!
//! Cutting a group means taking its records and answers with a snapshot of the tables after
//! them (O(1) per table). The owner waits for the syncer only when a group is full.
//!
//! (The owner used to hand a group over itself, once the syncer said it was idle and no write was
//! queued. On a busy machine the owner first had to be woken and scheduled, and it ran the writes
//! queued meanwhile first: at 64 connections the syncer stood idle about 0.8 ms per group, four
//! times its commit. Research note 007.)

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::Duration;

use pure_lang::Tables;

use crate::owner::Group;

/// Most writes in one group: bounds the time a group's first request waits for its answer.
const GROUP_WRITES_MAX: usize = 1024;

/// How long the syncer sleeps before looking again when it found the owner holding its lock:
/// normally the owner hands the group over when that write ends; this bounds the wait in the
/// one race where the owner had already looked (then went to sleep with the group).
const RETRY: Duration = Duration::from_micros(200);

pub(crate) struct Building {
    state: Mutex<State>,
    /// The owner waits here for room when the group is full.
    room: Condvar,
    handoff: Mutex<Handoff>,
    /// The syncer waits here for a group (with `handoff`).
    ready: Condvar,
    /// No more writes join a group past this many bytes (see `Owner`).
    group_bytes_max: usize,
}

pub(crate) struct State {
    pub tables: Tables,
    pub group: Group,
    /// The owner's time spent on this group's writes, and how many of them failed.
    pub busy: Duration,
    pub failed: u64,
    /// The owner sleeps on `room` (a notify is a system call, worth it only then).
    owner_waits: bool,
    /// The syncer has stopped: no group will be taken again.
    syncer_gone: bool,
}

/// The syncer's side of the passage.
#[derive(Default)]
struct Handoff {
    /// The syncer wants a group: the next one to be cut goes to it.
    idle: bool,
    /// A group the owner cut for the syncer.
    taken: Option<Taken>,
    /// The owner has stopped: what is in `state` now is the last group.
    owner_done: bool,
}

/// What the syncer takes: a group with the state after it, and the owner's figures for it.
pub(crate) struct Taken {
    pub group: Group,
    pub busy: Duration,
    pub failed: u64,
}

impl Building {
    pub(crate) fn new(tables: Tables, group_bytes_max: usize) -> Building {
        Building {
            state: Mutex::new(State {
                tables,
                group: Group::default(),
                busy: Duration::ZERO,
                failed: 0,
                owner_waits: false,
                syncer_gone: false,
            }),
            room: Condvar::new(),
            handoff: Mutex::new(Handoff::default()),
            ready: Condvar::new(),
            group_bytes_max,
        }
    }

    /// The owner's lock, to run one write. A panic while it was held poisoned it; the owner's
    /// own panic ends the owner, so whoever locks after that is the owner's stop guard.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn handoff(&self) -> MutexGuard<'_, Handoff> {
        self.handoff.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn has_room(&self, state: &State) -> bool {
        state.group.replies.len() < GROUP_WRITES_MAX
            && state.group.bytes.len() < self.group_bytes_max
    }

    /// Waits until the group has room for one more write; false when no group will ever be
    /// taken again (the syncer is gone).
    pub(crate) fn wait_for_room(&self) -> bool {
        let mut state = self.lock();
        loop {
            if state.syncer_gone {
                return false;
            }
            if self.has_room(&state) {
                return true;
            }
            state = self.hand_over_if_idle(state);
            if self.has_room(&state) {
                continue;
            }
            state.owner_waits = true;
            state = self
                .room
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            state.owner_waits = false;
        }
    }

    /// Called by the owner after adding a write's answer to the group, still under the lock:
    /// the group goes to the syncer now if it waits for one.
    pub(crate) fn added(&self, state: MutexGuard<'_, State>) {
        drop(self.hand_over_if_idle(state));
    }

    fn hand_over_if_idle<'a>(&self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        if state.group.replies.is_empty() {
            return state;
        }
        let mut handoff = self.handoff();
        if !handoff.idle {
            return state;
        }
        handoff.idle = false;
        handoff.taken = Some(cut(&mut state));
        drop(handoff);
        self.ready.notify_one();
        state
    }

    /// The syncer's wait for the next group. `None` once the owner has stopped and its last
    /// group is taken, or when the owner panicked while changing the state (the tables may then
    /// hold a change that no record describes: nothing of it may be published).
    pub(crate) fn take(&self) -> Option<Taken> {
        self.handoff().idle = true;
        loop {
            // Whether the owner holds its lock: it may then have looked at `idle` already.
            let contended = match self.state.try_lock() {
                Ok(mut state) => {
                    if !state.group.replies.is_empty() {
                        let mut handoff = self.handoff();
                        // Unless the owner cut one for us just before.
                        if let Some(taken) = handoff.taken.take() {
                            return Some(taken);
                        }
                        handoff.idle = false;
                        drop(handoff);
                        let taken = cut(&mut state);
                        let wake = state.owner_waits;
                        drop(state);
                        if wake {
                            self.room.notify_one();
                        }
                        return Some(taken);
                    }
                    false
                }
                Err(TryLockError::Poisoned(_)) => return None,
                Err(TryLockError::WouldBlock) => true,
            };
            let mut handoff = self.handoff();
            if let Some(taken) = handoff.taken.take() {
                return Some(taken);
            }
            if handoff.owner_done {
                drop(handoff);
                // The owner is gone: its lock is free unless it was poisoned by its panic.
                let mut state = self.state.lock().ok()?;
                return (!state.group.replies.is_empty()).then(|| cut(&mut state));
            }
            // With the lock seen free and the group empty, the owner's next write sees `idle`
            // and cuts the group: no need to look again before that.
            handoff = if contended {
                let waited = self.ready.wait_timeout(handoff, RETRY);
                waited.unwrap_or_else(PoisonError::into_inner).0
            } else {
                let waited = self.ready.wait(handoff);
                waited.unwrap_or_else(PoisonError::into_inner)
            };
            if let Some(taken) = handoff.taken.take() {
                return Some(taken);
            }
        }
    }

    /// Called when the owner thread ends, however it ends.
    pub(crate) fn owner_done(&self) {
        self.handoff().owner_done = true;
        self.ready.notify_one();
    }

    /// Called when the syncer thread ends, however it ends.
    pub(crate) fn syncer_gone(&self) {
        self.lock().syncer_gone = true;
        self.room.notify_one();
    }
}

/// Takes the group out of `state`, with a snapshot of the tables after it.
fn cut(state: &mut State) -> Taken {
    let mut group = std::mem::take(&mut state.group);
    group.snapshot = Arc::new(state.tables.clone());
    Taken {
        group,
        busy: std::mem::take(&mut state.busy),
        failed: std::mem::take(&mut state.failed),
    }
}
