//! The owner's inbox: the queue of writes from every HTTP thread, bounded, where the owner waits
//! for work. Pushing never blocks: a full queue refuses at once.

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
    /// The syncer thread has ended (it only does after the owner, unless it panicked).
    syncer_gone: bool,
    /// No more writes are accepted; the owner drains what is queued and stops.
    closed: bool,
    /// The owner is asleep in `next` and nobody has woken it yet. A notify is a system call:
    /// only a sleeping owner is worth one, and one is enough.
    owner_waits: bool,
}

/// What the owner should do next.
pub(crate) enum Next {
    /// Run this write.
    Job(Job),
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
                syncer_gone: false,
                closed: false,
                owner_waits: false,
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
        self.wake_owner(state);
        Ok(())
    }

    /// No more writes; the owner runs what is queued, hands over its last group, and stops.
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        self.wake_owner(state);
    }

    /// Called when the owner stops, however it stops: later writes are refused, and the queued
    /// ones come back to be dropped (their callers see the answer dropped). Says whether the inbox
    /// had been closed, i.e. whether this is an orderly shutdown.
    pub(crate) fn close_and_drain(&self) -> (bool, VecDeque<Job>) {
        let mut state = self.lock();
        let was_closed = std::mem::replace(&mut state.closed, true);
        (was_closed, std::mem::take(&mut state.jobs))
    }

    /// Called when the syncer thread ends, however it ends.
    pub(crate) fn syncer_gone(&self) {
        let mut state = self.lock();
        state.syncer_gone = true;
        self.wake_owner(state);
    }

    fn wake_owner(&self, mut state: MutexGuard<'_, State>) {
        // Cleared here, not by the owner once it runs: a burst of writes pushed while the
        // woken owner waits for a core would otherwise make a system call each.
        let waiting = std::mem::replace(&mut state.owner_waits, false);
        drop(state);
        if waiting {
            self.wake.notify_one();
        }
    }

    /// The owner's wait for the next write.
    pub(crate) fn next(&self) -> Next {
        let mut state = self.lock();
        loop {
            if let Some(job) = state.jobs.pop_front() {
                return Next::Job(job);
            }
            if state.syncer_gone || state.closed {
                return Next::Stop;
            }
            state.owner_waits = true;
            state = self
                .wake
                .wait(state)
                .expect("the inbox's critical sections never panic");
            state.owner_waits = false;
        }
    }
}
