//! The owner's inbox: queued writes and the syncer's "idle" signal behind one lock, so that the
//! owner waits at one place for whichever comes first.
//!
//! That single wait point is what lets the owner keep running writes into the group it is
//! building while the syncer commits the previous one, and hand the group over the moment the
//! syncer is free: a write that arrives during a commit joins the very next group instead of the
//! one after it.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::owner::Job;

pub(crate) struct Inbox {
    state: Mutex<State>,
    /// The owner sleeps here; only the owner ever waits on it.
    wake: Condvar,
    capacity: usize,
}

struct State {
    jobs: VecDeque<Job>,
    /// The syncer is waiting for a group (set by the syncer, taken by the owner's hand-over).
    syncer_idle: bool,
    /// The syncer thread has ended (it only does after the owner, unless it panicked).
    syncer_gone: bool,
    /// No more writes are accepted; the owner drains what is queued and stops.
    closed: bool,
    /// What the owner, asleep in `next`, is waiting for (`None` while it runs). A notify is a
    /// system call and a wake-up a context switch: only an event it waits for is worth them
    /// (at one client, the syncer turning idle after every group would otherwise wake an owner
    /// that has nothing to hand over).
    owner_waits: Option<Waits>,
}

#[derive(Clone, Copy)]
struct Waits {
    jobs: bool,
    syncer: bool,
}

/// What the owner should do next.
pub(crate) enum Next {
    /// Run this write.
    Job(Job),
    /// The syncer waits for a group: hand it over now.
    SyncerIdle,
    /// Closed and drained (or the syncer is gone): stop.
    Stop,
}

/// Why a write was not queued.
pub(crate) enum Refused {
    Full,
    Closed,
}

impl Inbox {
    pub(crate) fn new(capacity: usize) -> Inbox {
        Inbox {
            state: Mutex::new(State {
                jobs: VecDeque::with_capacity(capacity.min(4096)),
                syncer_idle: false,
                syncer_gone: false,
                closed: false,
                owner_waits: None,
            }),
            wake: Condvar::new(),
            capacity: capacity.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .expect("the inbox's critical sections never panic")
    }

    /// Queues a write without blocking.
    pub(crate) fn push(&self, job: Job) -> Result<(), (Job, Refused)> {
        let mut state = self.lock();
        if state.closed {
            return Err((job, Refused::Closed));
        }
        if state.jobs.len() >= self.capacity {
            return Err((job, Refused::Full));
        }
        state.jobs.push_back(job);
        self.wake_owner(state, |w| w.jobs);
        Ok(())
    }

    /// No more writes; the owner runs what is queued, hands over its last group, and stops.
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        self.wake_owner(state, |_| true);
    }

    /// Called when the owner stops, however it stops: later writes are refused, and the queued
    /// ones come back to be dropped (their callers see the answer dropped). Says whether the inbox
    /// had been closed, i.e. whether this is an orderly shutdown.
    pub(crate) fn close_and_drain(&self) -> (bool, VecDeque<Job>) {
        let mut state = self.lock();
        let was_closed = std::mem::replace(&mut state.closed, true);
        (was_closed, std::mem::take(&mut state.jobs))
    }

    /// Called by the syncer right before it waits for the next group.
    pub(crate) fn syncer_idle(&self) {
        let mut state = self.lock();
        state.syncer_idle = true;
        self.wake_owner(state, |w| w.syncer);
    }

    /// Called when the syncer thread ends, however it ends.
    pub(crate) fn syncer_gone(&self) {
        let mut state = self.lock();
        state.syncer_gone = true;
        self.wake_owner(state, |_| true);
    }

    fn wake_owner(&self, state: MutexGuard<'_, State>, wanted: impl Fn(Waits) -> bool) {
        let waiting = state.owner_waits.is_some_and(wanted);
        drop(state);
        if waiting {
            self.wake.notify_one();
        }
    }

    /// The owner's wait. Queued writes come first while `take_jobs` (the group has room): running
    /// one costs microseconds, while leaving it for the group after costs a whole commit. With
    /// no write queued, a group waiting (`have_group`) goes to an idle syncer.
    pub(crate) fn next(&self, take_jobs: bool, have_group: bool) -> Next {
        let mut state = self.lock();
        loop {
            if take_jobs {
                if let Some(job) = state.jobs.pop_front() {
                    return Next::Job(job);
                }
            }
            if state.syncer_gone {
                return Next::Stop;
            }
            if have_group && state.syncer_idle {
                state.syncer_idle = false;
                return Next::SyncerIdle;
            }
            if !have_group && state.closed && state.jobs.is_empty() {
                return Next::Stop;
            }
            state.owner_waits = Some(Waits {
                jobs: take_jobs,
                syncer: have_group,
            });
            state = self
                .wake
                .wait(state)
                .expect("the inbox's critical sections never panic");
            state.owner_waits = None;
        }
    }
}

/// Tells the inbox when the syncer thread ends, even by a panic.
pub(crate) struct SyncerGone<'a>(pub &'a Inbox);

impl Drop for SyncerGone<'_> {
    fn drop(&mut self) {
        self.0.syncer_gone();
    }
}
