//! What the owner, the syncer and callers share (`Shared`): the app's current version, the
//! published snapshot, and the flags that refuse writes (poison, a full log, a stop).
//!
//! `publish` is the end of the write path: inbox → owner → building → syncer → publish. It must
//! not know how a group is built or made durable; it holds what they leave for readers.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use arc_swap::{ArcSwap, Guard};
use pure_lang::{App, Schema};

use crate::metrics::MetricsCell;
use crate::publication::{Publication, Publisher, TableSet};
use crate::snapshot::Snapshot;

/// What the owner, the syncer and callers share.
pub(crate) struct Shared {
    /// The schema the state's tables are in (the data's, matched to the app's by name); a
    /// reload never changes it (`Runtime::reload` refuses another).
    pub schema: Arc<Schema>,
    /// The app's current version; a reload replaces it (`Runtime::reload`).
    app: ArcSwap<App>,
    /// Fallbacks counted by versions a reload replaced, so that the metric only grows.
    retired_fallbacks: AtomicU64,
    /// The published snapshot. A `Mutex<Arc<..>>`: readers hold the lock only to clone the `Arc`.
    published: Mutex<Arc<Snapshot>>,
    /// What watchers of the state are told after each publish (`publication.rs`).
    publisher: Mutex<Publisher>,
    /// Set once, on the first failed write or sync; never cleared (reopen to recover).
    poison: RwLock<Option<String>>,
    poisoned: AtomicBool,
    /// Set while a full log waits for a checkpoint that cannot be written (a full disk): new
    /// writes are refused until it is cleared.
    log_full: RwLock<Option<String>>,
    log_is_full: AtomicBool,
    /// Set when shutting down: a syncer waiting for log space gives up.
    stopping: AtomicBool,
    pub queue_depth: AtomicU64,
    pub metrics: MetricsCell,
    /// The schedule table's id: a group that writes it wakes the scheduler.
    schedule_table: Option<u32>,
    /// Bumped (and the scheduler woken) by what may change when the next entry is due: a
    /// group that wrote the schedule, a reload, a moved clock, a stop.
    schedule_changes: Mutex<u64>,
    schedule_wake: Condvar,
    /// Scheduled entries run, and those of them that failed (`pure_scheduled_*`).
    pub scheduled_runs: AtomicU64,
    pub scheduled_failures: AtomicU64,
}

impl Shared {
    /// The shared state of a runtime that starts from `snapshot` (the recovered state).
    pub fn new(app: App, snapshot: Snapshot, schema: Arc<Schema>) -> Shared {
        let publisher = Publisher::new(snapshot.lsn, schema.tables.len());
        let schedule_table = schema.table_id(pure_lang::SCHEDULE_TABLE);
        Shared {
            schema,
            app: ArcSwap::from_pointee(app),
            retired_fallbacks: AtomicU64::new(0),
            publisher: Mutex::new(publisher),
            published: Mutex::new(Arc::new(snapshot)),
            poison: RwLock::new(None),
            poisoned: AtomicBool::new(false),
            log_full: RwLock::new(None),
            log_is_full: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            queue_depth: AtomicU64::new(0),
            metrics: MetricsCell::new(),
            schedule_table,
            schedule_changes: Mutex::new(0),
            schedule_wake: Condvar::new(),
            scheduled_runs: AtomicU64::new(0),
            scheduled_failures: AtomicU64::new(0),
        }
    }

    /// The app's current version.
    pub fn app(&self) -> Arc<App> {
        self.app.load_full()
    }

    /// The app's current version, without counting a reference (for a call that ends soon).
    pub fn app_now(&self) -> Guard<Arc<App>> {
        self.app.load()
    }

    /// Makes `app` the current version; the replaced version's fallbacks stay counted.
    pub fn replace_app(&self, app: Arc<App>) {
        let replaced = self.app.swap(app);
        self.schedule_changed();
        self.retired_fallbacks
            .fetch_add(replaced.fallbacks(), Ordering::Relaxed);
    }

    /// Handler fallbacks of every version since start.
    pub fn fallbacks_total(&self) -> u64 {
        self.app.load().fallbacks() + self.retired_fallbacks.load(Ordering::Relaxed)
    }

    /// A stop has begun: a syncer waiting for log space gives up.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        self.schedule_changed();
    }

    pub fn published(&self) -> Arc<Snapshot> {
        self.published
            .lock()
            .expect("publishing never panics")
            .clone()
    }

    /// Makes `snapshot` the one reads see, and returns the one it replaces. The caller drops
    /// that after answering its group: when no read holds it any more, dropping it frees every
    /// node the group's writes copied, which neither the readers waiting for this lock nor the
    /// group's answers should wait for.
    ///
    /// The published LSN never falls: readers see the durable state only move forward (a group
    /// that wrote no record publishes the LSN it found).
    #[must_use = "drop the replaced snapshot once the group is answered"]
    pub fn publish(&self, snapshot: Snapshot) -> Arc<Snapshot> {
        let snapshot = Arc::new(snapshot);
        let mut published = self.published.lock().expect("publishing never panics");
        assert!(
            snapshot.lsn >= published.lsn,
            "a published LSN never falls: groups are published in the order they were committed"
        );
        std::mem::replace(&mut *published, snapshot)
    }

    /// Tells watchers that the group that wrote `written` is published at `lsn` (after
    /// `publish`, so that a watcher that reads the published snapshot when told sees it).
    /// Something that may change when the next entry is due happened: the scheduler looks
    /// again.
    pub fn schedule_changed(&self) {
        *self.schedule_changes.lock().expect("never panics") += 1;
        self.schedule_wake.notify_all();
    }

    /// The scheduler's wait: until `schedule_changed`, or `timeout` (`None`: no entry pending,
    /// so only a change wakes it).
    pub fn wait_for_schedule(&self, timeout: Option<std::time::Duration>) {
        let changes = self.schedule_changes.lock().expect("never panics");
        let seen = *changes;
        // With no entry pending, still look again now and then: a cheap guard against a
        // wake-up this code did not foresee.
        let timeout = timeout.unwrap_or(std::time::Duration::from_secs(1));
        let _ = self
            .schedule_wake
            .wait_timeout_while(changes, timeout, |changes| *changes == seen)
            .expect("never panics");
    }

    pub fn note_scheduled(&self, ran: u64, failed: u64) {
        self.scheduled_runs.fetch_add(ran, Ordering::Relaxed);
        self.scheduled_failures.fetch_add(failed, Ordering::Relaxed);
    }

    pub fn announce(&self, lsn: u64, written: &TableSet) {
        if self.schedule_table.is_some_and(|t| written.contains(t)) {
            self.schedule_changed();
        }
        self.publisher
            .lock()
            .expect("announcing never panics")
            .publish(lsn, written);
    }

    /// A watcher of publications: the latest, then each one after it (or the newest).
    pub fn publications(&self) -> tokio::sync::watch::Receiver<Publication> {
        self.publisher
            .lock()
            .expect("announcing never panics")
            .subscribe()
    }

    pub fn poison(&self, reason: String) {
        let mut poison = self.poison.write().expect("poisoning never panics");
        if poison.is_none() {
            eprintln!("pure-runtime: {reason}");
            *poison = Some(reason);
            self.poisoned.store(true, Ordering::Release);
        }
    }

    pub fn set_log_full(&self, reason: Option<String>) {
        let mut log_full = self.log_full.write().expect("setting it never panics");
        if log_full.is_none() {
            if let Some(reason) = &reason {
                eprintln!("pure-runtime: {reason}");
            }
        }
        self.log_is_full.store(reason.is_some(), Ordering::Release);
        *log_full = reason;
    }

    /// `Some(reason)` while writes are refused for want of log space.
    pub fn log_full_reason(&self) -> Option<String> {
        if !self.log_is_full.load(Ordering::Acquire) {
            return None;
        }
        self.log_full
            .read()
            .expect("setting it never panics")
            .clone()
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    pub fn poison_reason(&self) -> Option<String> {
        if !self.poisoned.load(Ordering::Acquire) {
            return None;
        }
        self.poison.read().expect("poisoning never panics").clone()
    }
}
