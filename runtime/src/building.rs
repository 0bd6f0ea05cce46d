//! The group being built: the owner's tables and the writes run since the syncer last took a
//! group, behind one lock.
//!
//! The owner runs each write holding this lock, so a write's changes to the tables, its record
//! and its answer join the group in one step. The syncer, as soon as it has answered a group,
//! takes the next one itself: the records so far, their answers, and a snapshot of the tables
//! after them (O(1) per table). A commit thus follows the previous one without a hand-over: the
//! owner is never woken for it, and never waits for the syncer unless the group is full.
//!
//! When the syncer comes for the lock while the owner is running writes back to back, the owner
//! would keep it until its queue is empty: std's mutex is not fair, and the owner takes it
//! again within a microsecond while the syncer is still being woken. A busy group then grows by
//! every write waiting, and is cut only when the owner pauses; but by then every write of the
//! group waits for its commit, and with them the clients that would send the next writes: the
//! owner idles through each commit (at 64 TPC-C terminals in process, groups of 40 writes, the
//! owner busy 83% of a core; research note 032). Cutting at the first write boundary instead made
//! groups too small (a sync and a snapshot each) and ran 5-13% slower (research note 007). So
//! the owner lets a syncer that waits for the lock take the group once it holds
//! `HANDOVER_WRITES` writes (`let_the_syncer_take`), and goes on building the next one while
//! that commits. A long write keeps the syncer asleep on the lock, not polling. Correctness does
//! not depend on who wins the lock.
//!
//! (The owner used to hand each group over once the syncer said it was idle. On a busy machine
//! the owner first had to be woken and scheduled, and it ran the writes queued meanwhile first:
//! at 64 connections the syncer stood idle about 0.8 ms per group, four times its commit.
//! Research note 007.)
//!
//! When writes come one at a time, the caller that ran one commits its group itself rather than
//! wake the syncer (`added` says when; the syncer's module doc says why).
//!
//! It owns the lock between the owner and the syncer, and the group it guards. It must not know
//! how a write is run (`owner`) nor how a group is made durable (`syncer`): only when one may
//! take or add.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use pure_lang::Tables;

use crate::group::Group;

/// Most writes in one group: bounds the time a group's first request waits for its answer.
const GROUP_WRITES_MAX: usize = 1024;

/// A group this large is handed to a syncer that waits for the lock (`let_the_syncer_take`).
/// Measured at 64 terminals of TPC-C in process (research note 032): 16 ran 1.21x the
/// throughput of never handing over, 8 and fewer barely better (a sync and a snapshot for every
/// few writes), 24 a little less than 16.
const HANDOVER_WRITES: usize = 16;

/// The most times the owner yields to a syncer that waits for the lock before it takes the lock
/// all the same.
const HANDOVER_YIELDS_MAX: u32 = 2000;

/// Invariants:
/// - The group holds at most `GROUP_WRITES_MAX` writes: one runs only when the group has room.
/// - Only the syncer waits on `ready`, and only the owner thread on `room`: one waiter each,
///   so one `notify_one` wakes the only one there is.
pub(crate) struct Building {
    state: Mutex<State>,
    /// The syncer waits here for a group to take.
    ready: Condvar,
    /// The owner waits here for room when the group is full.
    room: Condvar,
    /// No more writes join a group past this many bytes (see `Owner`).
    group_bytes_max: usize,
    /// Writes added so far: what the syncer watches while it waits awake (`wait_for_group`).
    added_total: AtomicU64,
    /// The syncer is waiting for the lock to take a group (`wait_for_group`, `take`).
    syncer_wants: AtomicBool,
    /// Writes in the group being built (without the lock: for `let_the_syncer_take`).
    group_writes: std::sync::atomic::AtomicUsize,
    /// Writes come one at a time (`set_lone_writes`).
    lone_writes: AtomicBool,
    /// A caller told to commit found the syncer's role taken (`contended`).
    contended: AtomicBool,
}

pub(crate) struct State {
    pub tables: Tables,
    pub group: Group,
    /// The owner's time spent on this group's writes, and how many of them failed.
    pub busy: Duration,
    pub failed: u64,
    /// The schema record is in a group already: logged once before the first write record of
    /// a run, and again after a roll-back (which may have discarded it).
    pub schema_logged: bool,
    /// Who sleeps on a condition variable and has not been woken yet: a notify is a system
    /// call, worth it only then, and once.
    syncer_waits: bool,
    owner_waits: bool,
    /// The owner has stopped: the group now is the last one.
    owner_done: bool,
    /// The syncer has stopped: no group will be taken again.
    syncer_gone: bool,
    /// See `wake_syncer_for_the_log`.
    log_needs_syncer: bool,
}

/// What the syncer's wait, or its attempt to take a group, ended with.
pub(crate) enum Take {
    Group(Taken),
    /// The group holds a write (`wait_for_group`).
    Ready,
    /// Nothing came within the patience given; or, to `take`, the group holds no write.
    Idle,
    /// The owner has stopped and its last group is taken, or the owner panicked while changing
    /// the state (the tables may then hold a change that no record describes: nothing of it
    /// may be published).
    Done,
}

/// What the syncer takes: a group with the state after it, and the owner's figures for it.
pub(crate) struct Taken {
    pub group: Group,
    pub busy: Duration,
    pub failed: u64,
    /// `added_total` when it was taken: the writes added since are the next group's.
    pub added_before: u64,
}

impl Building {
    pub(crate) fn new(tables: Tables, group_bytes_max: usize) -> Building {
        Building {
            state: Mutex::new(State {
                tables,
                group: Group::default(),
                busy: Duration::ZERO,
                failed: 0,
                schema_logged: false,
                syncer_waits: false,
                owner_waits: false,
                owner_done: false,
                syncer_gone: false,
                log_needs_syncer: false,
            }),
            ready: Condvar::new(),
            room: Condvar::new(),
            group_bytes_max,
            added_total: AtomicU64::new(0),
            syncer_wants: AtomicBool::new(false),
            group_writes: std::sync::atomic::AtomicUsize::new(0),
            lone_writes: AtomicBool::new(false),
            contended: AtomicBool::new(false),
        }
    }

    /// The owner's lock, to run one write. A panic while it was held poisoned it; the owner's
    /// own panic ends the owner, so whoever locks after that is the owner's stop guard.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the group has room for one more write now.
    pub(crate) fn has_room_now(&self) -> bool {
        let state = self.lock();
        self.has_room(&state)
    }

    pub(crate) fn has_room(&self, state: &State) -> bool {
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
            assert!(!state.owner_waits, "only the owner thread waits for room");
            state.owner_waits = true;
            state = self
                .room
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            state.owner_waits = false;
        }
    }

    /// Called by whoever ran a write after adding its answer to the group, still under the
    /// lock. True when the caller is to commit the group itself (`may_commit_here`, lone
    /// writes coming one at a time, the syncer asleep): the syncer is then left asleep, and the
    /// caller must either commit the group or wake it (`wake_syncer`).
    pub(crate) fn added(&self, mut state: MutexGuard<'_, State>, may_commit_here: bool) -> bool {
        assert!(
            state.group.replies.len() <= GROUP_WRITES_MAX,
            "a write runs only when the group has room for it"
        );
        assert!(
            state.group.ends.len() <= state.group.replies.len() + 1 + state.group.extra_records,
            "a write adds at most one record (a job of due entries one per entry), and a run's \
             schema one more"
        );
        self.added_total.fetch_add(1, Ordering::Release);
        self.group_writes.fetch_add(1, Ordering::Relaxed);
        if !state.syncer_waits {
            return false;
        }
        if may_commit_here && self.lone_writes.load(Ordering::Relaxed) {
            return true;
        }
        // Cleared by the waker, not the woken: the writes added while the syncer waits for a
        // core then cost no further system call.
        state.syncer_waits = false;
        drop(state);
        self.ready.notify_one();
        false
    }

    /// Wakes the syncer if it sleeps: for a caller told to commit (`added`) that does not.
    pub(crate) fn wake_syncer(&self) {
        let mut state = self.lock();
        if std::mem::replace(&mut state.syncer_waits, false) {
            drop(state);
            self.ready.notify_one();
        }
    }

    /// Makes the syncer's wait return `Idle` at once, group or none: a caller's commit found
    /// the log full, and the syncer (which may sleep without a timeout) must start freeing it.
    pub(crate) fn wake_syncer_for_the_log(&self) {
        let mut state = self.lock();
        state.log_needs_syncer = true;
        state.syncer_waits = false;
        drop(state);
        self.ready.notify_one();
    }

    /// Whether writes now come one at a time (no sign of concurrent writes for a while, and
    /// quick syncs: see `Syncer::commit_taken`): the next lone write then commits on the thread
    /// that ran it rather than wake the syncer (`added`). Set by whoever commits a group.
    pub(crate) fn set_lone_writes(&self, lone: bool) {
        self.lone_writes.store(lone, Ordering::Relaxed);
    }

    /// A caller told to commit found someone committing: writes do not come one at a time.
    pub(crate) fn contended(&self) {
        self.lone_writes.store(false, Ordering::Relaxed);
        self.contended.store(true, Ordering::Relaxed);
    }

    /// Called by the owner before it takes the lock for a write: while the syncer waits for
    /// the lock and the group holds `HANDOVER_WRITES` writes, gives the syncer the turn (see
    /// the module doc). Bounded, so that a syncer that is slow to be scheduled never holds the
    /// owner up for long: correctness does not depend on who wins the lock.
    pub(crate) fn let_the_syncer_take(&self) {
        for _ in 0..HANDOVER_YIELDS_MAX {
            let waits = self.syncer_wants.load(Ordering::Relaxed)
                && self.group_writes.load(Ordering::Relaxed) >= HANDOVER_WRITES;
            if !waits {
                return;
            }
            std::thread::yield_now();
        }
    }

    /// Whether `contended` was called since the last call of this.
    pub(crate) fn take_contended(&self) -> bool {
        self.contended.swap(false, Ordering::Relaxed)
    }

    /// Writes added to groups so far (without the lock: the group being built may hold more).
    pub(crate) fn added_total(&self) -> u64 {
        self.added_total.load(Ordering::Relaxed)
    }

    /// The syncer thread's wait, without the syncer's role: until the group holds a write or
    /// the owner has stopped, watching for one awake for up to `awake` before it sleeps, and
    /// asleep for up to `patience` (without end if `None`).
    pub(crate) fn wait_for_group(&self, awake: Duration, patience: Option<Duration>) -> Take {
        let mut awake_until = (!awake.is_zero()).then(|| Instant::now() + awake);
        let give_up = patience.map(|patience| Instant::now() + awake + patience);
        self.syncer_wants.store(true, Ordering::Relaxed);
        let locked = self.state.lock();
        self.syncer_wants.store(false, Ordering::Relaxed);
        let Ok(mut state) = locked else {
            return Take::Done;
        };
        loop {
            if std::mem::take(&mut state.log_needs_syncer) {
                return Take::Idle;
            }
            if !state.group.replies.is_empty() {
                return Take::Ready;
            }
            if state.owner_done {
                return Take::Done;
            }
            if let Some(until) = awake_until.take() {
                let seen = self.added_total.load(Ordering::Acquire);
                drop(state);
                while self.added_total.load(Ordering::Acquire) == seen && Instant::now() < until {
                    std::thread::yield_now();
                }
                state = match self.state.lock() {
                    Ok(state) => state,
                    Err(_) => return Take::Done,
                };
                continue;
            }
            let left = match give_up {
                Some(at) if Instant::now() >= at => return Take::Idle,
                Some(at) => Some(at - Instant::now()),
                None => None,
            };
            assert!(!state.syncer_waits, "only the syncer waits for a group");
            state.syncer_waits = true;
            state = match left {
                Some(left) => match self.ready.wait_timeout(state, left) {
                    Ok((state, _)) => state,
                    Err(_) => return Take::Done,
                },
                None => match self.ready.wait(state) {
                    Ok(state) => state,
                    Err(_) => return Take::Done,
                },
            };
            state.syncer_waits = false;
        }
    }

    /// Takes the group, with a snapshot of the tables after it, if it holds a write and
    /// `fits(records, bytes)` says its records fit; `Idle` otherwise. Only the holder of the
    /// syncer's role calls this, so that groups are committed in the order they were taken.
    pub(crate) fn take(&self, fits: impl FnOnce(usize, u64) -> bool) -> Take {
        self.syncer_wants.store(true, Ordering::Relaxed);
        let locked = self.state.lock();
        self.syncer_wants.store(false, Ordering::Relaxed);
        let Ok(mut state) = locked else {
            return Take::Done;
        };
        if state.group.replies.is_empty() {
            return match state.owner_done {
                true => Take::Done,
                false => Take::Idle,
            };
        }
        if !fits(state.group.ends.len(), state.group.bytes.len() as u64) {
            return Take::Idle;
        }
        self.group_writes.store(0, Ordering::Relaxed);
        let mut group = std::mem::take(&mut state.group);
        group.snapshot = Arc::new(state.tables.snapshot());
        let taken = Taken {
            group,
            busy: std::mem::take(&mut state.busy),
            failed: std::mem::take(&mut state.failed),
            // Exact: `added` counts under the lock held here.
            added_before: self.added_total.load(Ordering::Relaxed),
        };
        let wake = std::mem::replace(&mut state.owner_waits, false);
        drop(state);
        if wake {
            self.room.notify_one();
        }
        Take::Group(taken)
    }

    /// Undoes every write that is not durable: the tables go back to `durable` (the published
    /// state), and the group being built, whose writes ran on top of the one the syncer could
    /// not commit, is returned for the syncer to refuse. The schema is logged again before the
    /// next write, as its record may have been in a refused group.
    pub(crate) fn roll_back(&self, durable: &Tables) -> Group {
        let mut state = self.lock();
        self.group_writes.store(0, Ordering::Relaxed);
        state.tables = durable.thawed();
        state.schema_logged = false;
        state.busy = Duration::ZERO;
        state.failed = 0;
        let group = std::mem::take(&mut state.group);
        let wake = std::mem::replace(&mut state.owner_waits, false);
        drop(state);
        if wake {
            self.room.notify_one();
        }
        group
    }

    /// Called when the owner thread ends, however it ends.
    pub(crate) fn owner_done(&self) {
        self.lock().owner_done = true;
        self.ready.notify_one();
    }

    /// Called when the syncer thread ends, however it ends.
    pub(crate) fn syncer_gone(&self) {
        self.lock().syncer_gone = true;
        self.room.notify_one();
    }
}
