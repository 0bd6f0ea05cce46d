//! The owner's inbox: the queue of writes from every caller, bounded. Pushing never blocks: a
//! full queue refuses at once. Whoever holds the owner's role pops (`owner.rs`); the owner
//! thread sleeps here until a caller cannot run the queue itself and wakes it.
//!
//! It must not know what runs a job, nor groups: jobs go in, jobs come out, in order.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::job::Job;

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
    /// The owner thread is asleep in `wait` and nobody has woken it yet. A notify is a system
    /// call: only a sleeping owner thread is worth one, and one is enough.
    owner_waits: bool,
}

/// What the owner thread should do next.
pub(crate) enum Wait {
    /// Writes are queued: take the role and run them.
    Queued,
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
    // A refused job goes back to its caller whole, on the rare path; boxing it would cost every
    // write an allocation.
    #[allow(clippy::result_large_err)]
    pub(crate) fn push(&self, job: Job) -> Result<(), (Job, Refused)> {
        let mut state = self.lock();
        if state.closed {
            return Err((job, Refused::Closed));
        }
        if state.jobs.len() >= self.capacity {
            return Err((job, Refused::Full));
        }
        state.jobs.push_back(job);
        // No wake-up: the caller runs the queue itself next (`Owner::run_here`).
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

    /// The next queued write, for the holder of the owner's role.
    pub(crate) fn pop(&self) -> Option<Job> {
        self.lock().jobs.pop_front()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.lock().jobs.is_empty()
    }

    /// Asks the owner thread to run the queue: a caller could not (the group is full, its budget
    /// ran out, or running a write panicked).
    pub(crate) fn wake_owner_thread(&self) {
        let state = self.lock();
        self.wake_owner(state);
    }

    /// The owner thread's wait until it is asked to run the queue, or to stop.
    pub(crate) fn wait(&self) -> Wait {
        let mut state = self.lock();
        loop {
            if !state.jobs.is_empty() {
                return Wait::Queued;
            }
            if state.syncer_gone || state.closed {
                return Wait::Stop;
            }
            assert!(
                !state.owner_waits,
                "only the owner thread waits on the inbox"
            );
            state.owner_waits = true;
            state = self
                .wake
                .wait(state)
                .expect("the inbox's critical sections never panic");
            state.owner_waits = false;
        }
    }
}
