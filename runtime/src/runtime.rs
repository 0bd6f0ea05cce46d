//! The handle to a running app: open (recover, start the threads), write, read, shutdown.
//!
//! It owns the threads and wires the write path together (inbox → owner → building → syncer →
//! publish); no module of that path knows this one.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

use std::thread::JoinHandle;

use pure_lang::{Answer, App, HandlerError, Request, Schema, TableSet, Tables};
use pure_store::{Io, RealIo, Store, StoreOptions, SyncMode};
use tokio::sync::oneshot;

use crate::building::Building;
use crate::error::{OpenError, ReloadError};
use crate::inbox::{Inbox, Refused};
use crate::job::{Job, Work, WriteReply};
use crate::metrics::{Health, Metrics};
use crate::options::RuntimeOptions;
use crate::owner::Owner;
use crate::recovery::{recover, Recovery};
use crate::shared::Shared;
use crate::snapshot::Snapshot;
use crate::syncer::{SyncRole, Syncer};

struct Inner {
    shared: Arc<Shared>,
    /// The owner's inbox: writes are pushed here; closed at shutdown or when the owner stops.
    inbox: Arc<Inbox>,
    /// Callers of `write` run the queue with it when the owner's role is free. Weak: once the
    /// owner thread has stopped, the group being built (and the answers it holds) must go with
    /// it, or a caller would wait forever for an answer that cannot come.
    owner: Weak<Owner>,
    /// Callers commit a lone write with it, rather than wake the syncer thread. Weak, as
    /// `owner`: once the syncer thread has stopped, the group being built goes with it.
    sync: Weak<SyncRole>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    recovery: Recovery,
}

/// What queues writes: the runtime's, and the scheduler thread's, which holds no `Runtime`
/// (its last handle dropped there would join the scheduler from itself).
struct Queue {
    shared: Arc<Shared>,
    inbox: Arc<Inbox>,
    owner: Weak<Owner>,
    sync: Weak<SyncRole>,
}

impl Queue {
    fn submit(&self, app: &Arc<App>, work: Work) -> Result<WriteReply, HandlerError> {
        let shared = &self.shared;
        let (reply, receiver) = oneshot::channel();
        shared.queue_depth.fetch_add(1, Ordering::Relaxed);
        match self.inbox.push(Job {
            app: app.clone(),
            work,
            reply,
        }) {
            Ok(()) => {
                let commit_here = match self.owner.upgrade() {
                    Some(owner) => owner.run_here(),
                    None => false,
                };
                if commit_here {
                    if let Some(sync) = self.sync.upgrade() {
                        sync.commit_here();
                    }
                }
                Ok(receiver)
            }
            Err((_, refused)) => {
                shared.queue_depth.fetch_sub(1, Ordering::Relaxed);
                Err(unavailable(match refused {
                    Refused::Full => "the write queue is full; retry later",
                    Refused::Closed => "the runtime is shutting down",
                }))
            }
        }
    }

    /// Whether the schedule has work now: an entry due by the app's clock, or a named entry of
    /// the manifest not made yet. Else how long until the first entry is due (`None`: none
    /// pending).
    fn schedule_state(&self) -> Result<(), Option<std::time::Duration>> {
        let app = self.shared.app();
        let snapshot = self.shared.published();
        if app.schedules_missing(&snapshot.tables) {
            return Ok(());
        }
        let now = app.world().now_ms();
        match app.next_due(&snapshot.tables) {
            Some(due) if due <= now => Ok(()),
            Some(due) => Err(Some(std::time::Duration::from_millis(
                due.saturating_sub(now).max(0) as u64,
            ))),
            None => Err(None),
        }
    }

    fn run_due(&self) -> Result<(u64, u64), HandlerError> {
        let (mut ran, mut failed) = (0, 0);
        // Entries that keep scheduling themselves at once under a fixed clock would never
        // let this end.
        for _ in 0..DUE_ROUNDS_MAX {
            if self.schedule_state().is_err() {
                return Ok((ran, failed));
            }
            let reply = self.submit(&self.shared.app(), Work::Due)?;
            let answer = reply.blocking_recv().map_err(|_| {
                unavailable("the runtime stopped before the due entries were made durable")
            })??;
            let counts = answer.body.to_value();
            ran += counts["ran"].as_u64().unwrap_or(0);
            failed += counts["failed"].as_u64().unwrap_or(0);
        }
        Ok((ran, failed))
    }

    /// The scheduler thread: runs entries as they fall due, and sleeps until the next one is
    /// due or the schedule changes (a group wrote it, a reload, a moved clock, a stop).
    fn schedule(self) {
        while !self.shared.is_stopping() {
            match self.schedule_state() {
                Ok(()) => {
                    if let Err(error) = self.run_due() {
                        if self.shared.is_stopping() {
                            return;
                        }
                        // A poisoned runtime runs nothing more: the server exits to recover.
                        if self.shared.poison_reason().is_none() {
                            eprintln!(
                                "pure-runtime: running due entries: {error}; trying again in \
                                 a second"
                            );
                        }
                        self.shared
                            .wait_for_schedule(Some(std::time::Duration::from_secs(1)));
                    }
                }
                // A live clock moves by itself: look again by the next due time at the latest
                // (and at least every second, should the wall clock jump).
                Err(wait) => self
                    .shared
                    .wait_for_schedule(wait.map(|w| w.min(std::time::Duration::from_secs(1)))),
            }
        }
    }
}

/// Slices of due entries `Runtime::run_due` runs before it gives up on entries that keep
/// falling due (at 64 entries a slice, 640,000 entries).
const DUE_ROUNDS_MAX: usize = 10_000;

/// What [`Runtime::read_live`] gives.
pub struct LiveRead {
    pub answer: Result<Answer, HandlerError>,
    /// The LSN of the published snapshot the handler ran on.
    pub lsn: u64,
    /// The tables the handler read.
    pub read: TableSet,
}

/// Handle to a running app: `Clone + Send + Sync`.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

/// The stack of a thread that runs handlers (the owner, pure-serve's HTTP threads). Rhai
/// recurses on the native stack: the call-depth limit bounds its calls, and the depth rule the
/// walks of a value that go through its functions, but not its native walks of a value a
/// handler built and keeps: copying, dropping, sizing and hashing it take 110 to 350 bytes a
/// level, and a handler built 34,000 levels within the 10 s cap on the 2-core VM (depth grows
/// with the square root of the time: each level added copies the whole value). 64 MiB holds
/// some 190,000 levels of the costliest walk, for machines several times faster; it is
/// reserved, not taken: the kernel gives a thread only the pages it touches.
pub const HANDLER_STACK_BYTES: usize = 64 << 20;

impl Runtime {
    /// Opens `data_dir` (creating it), recovers the state, starts the owner and syncer threads.
    pub fn open(app: App, data_dir: &Path, options: RuntimeOptions) -> Result<Runtime, OpenError> {
        Self::open_with_io(app, data_dir, options, Arc::new(RealIo))
    }

    /// The same through a given I/O layer (tests use the store's simulated disk).
    pub fn open_with_io(
        app: App,
        data_dir: &Path,
        options: RuntimeOptions,
        io: Arc<dyn Io>,
    ) -> Result<Runtime, OpenError> {
        let store_options = StoreOptions {
            sync: options.sync,
            log_capacity_bytes: options.log_capacity_bytes,
            log_capacity_max_bytes: options.log_capacity_max_bytes,
        };
        let recovered = Store::open_with(io, data_dir, store_options).map_err(OpenError::Store)?;
        if let Some(cut) = &recovered.cut {
            eprintln!(
                "pure-runtime: cut a torn log tail of {} bytes at position {} ({}); it was never acknowledged",
                cut.bytes, cut.position, cut.reason
            );
        }
        let image_bytes = recovered
            .checkpoint
            .as_ref()
            .map_or(0, |image| image.bytes().len() as u64);
        let mut state = recover(&app, &recovered)?;
        build_indexes(&app, &mut state.tables)?;
        let recovery = state.report;
        let store = recovered.store;
        // What the syncer relies on: the first snapshot's LSN is the store's durable LSN, and
        // the next group's records follow it.
        assert_eq!(
            state.lsn,
            store.durable_lsn(),
            "recovery rebuilds the state up to the last record the store recovered"
        );
        if options.sync == SyncMode::None {
            eprintln!(
                "pure-runtime: WARNING: sync none: writes are not durable against power loss"
            );
        }
        // A frame holds at most half the log; groups stay under a quarter (see `Owner`) of the
        // largest the log may grow to (a larger group waits for the growth).
        let group_bytes_max = (store.log_capacity_max_bytes() / 8).min(4 << 20) as usize;
        let snapshot = Snapshot::new(Arc::new(state.tables.snapshot()), state.lsn.0);
        let shared = Arc::new(Shared::new(app, snapshot, Arc::new(state.schema.clone())));
        shared.metrics.recovered(state.lsn.0);
        shared
            .metrics
            .log(store.log_used_bytes(), store.log_capacity_bytes());
        let inbox = Arc::new(Inbox::new(options.queue_capacity));
        let building = Arc::new(Building::new(state.tables, group_bytes_max));
        let mut syncer = Syncer {
            shared: shared.clone(),
            store,
            schema: Arc::new(state.schema.clone()),
            building: building.clone(),
            inbox: inbox.clone(),
            checkpoint_interval_bytes: options.checkpoint_interval_bytes,
            checkpoint_image_ratio: options.checkpoint_image_ratio,
            image_bytes,
            write_timeout: options.write_timeout,
            commit_gate: options.commit_gate.clone(),
            checkpoint: None,
            log_full: Default::default(),
            growth: Default::default(),
            answered_at: std::time::Instant::now(),
            lone_write_sync_max: options.lone_write_sync_max,
            // Until writes are seen to be concurrent, a lone write is its caller's to commit.
            quiet_groups: u32::MAX,
            last_sync: std::time::Duration::ZERO,
            stay_awake: std::time::Duration::ZERO,
        };
        syncer.size_log_for_state();
        let sync = Arc::new(SyncRole::new(syncer));
        let owner = Arc::new(Owner {
            shared: shared.clone(),
            building,
            schema: state.schema,
            inbox: inbox.clone(),
            group_bytes_max,
            scratch: Default::default(),
            run_gate: options.run_gate.clone(),
        });
        let owner_role = Arc::downgrade(&owner);
        let sync_role = Arc::downgrade(&sync);
        let syncer = std::thread::Builder::new()
            .name("pure-syncer".into())
            .spawn(move || sync.run())
            .map_err(OpenError::Thread)?;
        let owner_handle = std::thread::Builder::new()
            .name("pure-owner".into())
            .stack_size(HANDLER_STACK_BYTES)
            .spawn(move || owner.run())
            .map_err(OpenError::Thread)?;
        let inner = Inner {
            shared,
            inbox,
            owner: owner_role,
            sync: sync_role,
            threads: Mutex::new(vec![owner_handle, syncer]),
            recovery,
        };
        let runtime = Runtime {
            inner: Arc::new(inner),
        };
        let queue = runtime.queue();
        let scheduler = std::thread::Builder::new()
            .name("pure-scheduler".into())
            .stack_size(HANDLER_STACK_BYTES)
            .spawn(move || queue.schedule())
            .map_err(OpenError::Thread)?;
        runtime
            .inner
            .threads
            .lock()
            .expect("joining never panics")
            .push(scheduler);
        Ok(runtime)
    }

    /// The app's current version.
    pub fn app(&self) -> Arc<App> {
        self.inner.shared.app()
    }

    /// Replaces the app with a new version of it, for every write and read that starts after
    /// this returns; those already queued or running finish on the version they started with.
    /// Refused, the old version staying, when the new one declares other tables, fields or
    /// indexes than the state in memory was built for (`ReloadError` says which). Returns the
    /// version now current, to give `write_on` and `read_on`.
    pub fn reload(&self, app: App) -> Result<Arc<App>, ReloadError> {
        let shared = &self.inner.shared;
        let old = shared.app();
        if let Some(change) =
            schema_change(old.schema(), app.schema()).or_else(|| index_change(&old, &app))
        {
            return Err(ReloadError { change });
        }
        let app = Arc::new(app);
        shared.replace_app(app.clone());
        Ok(app)
    }

    /// What opening read to rebuild the state, and how long it took.
    pub fn recovery(&self) -> Recovery {
        self.inner.recovery
    }

    /// Queues a write handler call and, when the owner's role is free, runs the queued writes
    /// right here, this one included, for about a millisecond at most (a single write may take
    /// longer, up to the script limits); it never waits for room in a group. When writes come
    /// one at a time and this one ran alone, it also commits it here (one write and one sync of
    /// the log, and the running write's lock at most) rather than wake the syncer thread; it
    /// never waits for log space. Handlers then run on the caller's stack, or on a fresh one
    /// when less is left of it than `pure_lang::Limits::stack_bytes` (2.9 MiB by default, in a
    /// release build): about 11 µs more per call on such a thread, so give callers a larger
    /// stack. The reply arrives after the group holding this write is durable (or with the
    /// handler's error, or `Unavailable`).
    pub fn write(&self, handler: &str, request: Request) -> Result<WriteReply, HandlerError> {
        self.write_on(&self.app(), handler, request)
    }

    /// `write` on the given version of the app, which must be one this runtime gave out
    /// (`app`, `reload`): the version the request was routed and checked by.
    pub fn write_on(
        &self,
        app: &Arc<App>,
        handler: &str,
        request: Request,
    ) -> Result<WriteReply, HandlerError> {
        let shared = &self.inner.shared;
        debug_assert!(
            app.schema() == shared.app_now().schema(),
            "a write on a version of the app with other tables than the state's"
        );
        if let Some(reason) = shared.poison_reason().or_else(|| shared.log_full_reason()) {
            return Err(HandlerError::Unavailable { reason });
        }
        if !app.has_handler(handler) {
            return Err(HandlerError::NoSuchHandler {
                handler: handler.to_string(),
            });
        }
        let work = Work::Call {
            handler: handler.to_string(),
            request,
        };
        self.submit(app, work)
    }

    fn queue(&self) -> Queue {
        Queue {
            shared: self.inner.shared.clone(),
            inbox: self.inner.inbox.clone(),
            owner: self.inner.owner.clone(),
            sync: self.inner.sync.clone(),
        }
    }

    /// Queues `work` and runs the queue here if the owner's role is free (see `write`).
    fn submit(&self, app: &Arc<App>, work: Work) -> Result<WriteReply, HandlerError> {
        self.queue().submit(app, work)
    }

    /// Runs the schedule's entries due now by the app's clock, a slice of the owner's time at a
    /// time (each slice a job in the queue of writes, so that client writes are never
    /// starved), until none is due; blocks until each slice is durable. The entries run, and
    /// those of them that failed. Not from an async task (it blocks).
    pub fn run_due(&self) -> Result<(u64, u64), HandlerError> {
        self.queue().run_due()
    }

    /// Moves the app's fixed clock (`World::fixed`) `ms` forward and runs what is due by then:
    /// the time it shows, and the entries run and failed. An error for a live clock.
    pub fn advance_clock(&self, ms: i64) -> Result<(i64, u64, u64), HandlerError> {
        let app = self.inner.shared.app();
        let Some(clock) = app.world().clock() else {
            return Err(HandlerError::Thrown {
                status: 409,
                body: serde_json::json!({
                    "error": "the clock is the wall clock: only a server started with \
                              --fixed-now has one to move",
                    "status": 409,
                }),
            });
        };
        let Some(now) = clock.advance(ms) else {
            return Err(HandlerError::Thrown {
                status: 400,
                body: serde_json::json!({
                    "error": format!(
                        "advancing the clock {ms} ms from {} passes the last time there is",
                        clock.now_ms()
                    ),
                    "status": 400,
                }),
            });
        };
        let (ran, failed) = self.run_due()?;
        Ok((now, ran, failed))
    }

    /// Runs a read handler on the calling thread against the latest published (durable)
    /// snapshot.
    pub fn read(&self, handler: &str, request: Request) -> Result<Answer, HandlerError> {
        self.read_on(&self.inner.shared.app_now(), handler, request)
    }

    /// `read` on the given version of the app (see `write_on`).
    pub fn read_on(
        &self,
        app: &App,
        handler: &str,
        request: Request,
    ) -> Result<Answer, HandlerError> {
        let snapshot = self.inner.shared.published();
        app.run_read(handler, &request, snapshot.tables.clone())
    }

    /// A read for a live query, on the latest published (durable) snapshot: the answer, the
    /// LSN of the snapshot it was computed on, and the tables it read (run it again once a
    /// publication says one of them changed after that LSN).
    pub fn read_live(&self, app: &App, handler: &str, request: &Request) -> LiveRead {
        let snapshot = self.inner.shared.published();
        let (answer, read) = app.run_read_noting(handler, request, snapshot.tables.clone());
        LiveRead {
            answer,
            lsn: snapshot.lsn,
            read,
        }
    }

    /// Writes the published snapshot's tables into `out_dir`, as `export` writes a stopped
    /// server's (the same files, byte for byte, for the same state): the state at one LSN, the
    /// one `Exported` names, while writes go on. The snapshot is held until the files are
    /// written, so memory grows by what the writes meanwhile change.
    pub fn export(
        &self,
        out_dir: &std::path::Path,
        progress: &crate::transfer::Progress,
    ) -> Result<crate::transfer::Exported, crate::transfer::TransferError> {
        let shared = &self.inner.shared;
        let snapshot = shared.published();
        let app = shared.app();
        crate::transfer::export_state(
            &app,
            (&shared.schema, &snapshot.tables, snapshot.lsn),
            out_dir,
            progress,
        )
    }

    pub fn health(&self) -> Health {
        let snapshot = self.inner.shared.published();
        Health {
            app: self.app().name().to_string(),
            durable_lsn: snapshot.lsn,
            state_bytes: snapshot.state_bytes,
            poisoned: self.poisoned(),
            refusing_writes: self.inner.shared.log_full_reason(),
            last_checkpoint_error: self.inner.shared.metrics.last_checkpoint_error(),
        }
    }

    /// A watcher of the published state: its latest publication (the LSN reads see, and per
    /// table the LSN of the last group that wrote it), then each one after it, or the newest
    /// if the watcher falls behind. Only durable groups are published.
    pub fn publications(&self) -> tokio::sync::watch::Receiver<crate::publication::Publication> {
        self.inner.shared.publications()
    }

    pub fn metrics(&self) -> Metrics {
        let shared = &self.inner.shared;
        let snapshot = shared.published();
        Metrics {
            queue_depth: shared.queue_depth.load(Ordering::Relaxed),
            snapshot_age_seconds: snapshot.made_at.elapsed().as_secs_f64(),
            state_bytes: snapshot.state_bytes,
            handler_fallbacks_total: shared.fallbacks_total(),
            scheduled_runs_total: shared.scheduled_runs.load(Ordering::Relaxed),
            scheduled_failures_total: shared.scheduled_failures.load(Ordering::Relaxed),
            schedules_pending: shared.app_now().pending_schedules(&snapshot.tables) as u64,
            ..shared.metrics.snapshot()
        }
    }

    /// Says that a stop has begun, before `shutdown`: a write waiting for room in a full log is
    /// refused (503) at once rather than at `write_timeout`, so that a stop does not wait for
    /// it. Writes go on otherwise.
    pub fn begin_shutdown(&self) {
        self.inner.shared.stop();
    }

    /// Stops taking writes, runs and syncs what is queued, answers it, stops the threads.
    /// Blocking; idempotent.
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }

    /// `Some(reason)` once a write or sync failed (the store is poisoned).
    pub fn poisoned(&self) -> Option<String> {
        self.inner.shared.poison_reason()
    }
}

impl Inner {
    fn shutdown(&self) {
        self.shared.stop();
        // The owner drains the queue, hands over its last group and stops; its exit ends the
        // syncer after that group.
        self.inbox.close();
        let threads = std::mem::take(&mut *self.threads.lock().expect("joining never panics"));
        for thread in threads {
            if thread.join().is_err() {
                eprintln!("pure-runtime: a runtime thread (owner or syncer) panicked");
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn unavailable(reason: &str) -> HandlerError {
    HandlerError::Unavailable {
        reason: reason.to_string(),
    }
}

/// How `new` declares other tables or fields than `old`, if it does.
fn schema_change(old: &Schema, new: &Schema) -> Option<String> {
    if old == new {
        return None;
    }
    let names =
        |schema: &Schema| -> Vec<String> { schema.tables.iter().map(|t| t.name.clone()).collect() };
    let (old_names, new_names) = (names(old), names(new));
    if let Some(added) = new_names.iter().find(|n| !old_names.contains(n)) {
        return Some(format!("it adds table {added}"));
    }
    if let Some(removed) = old_names.iter().find(|n| !new_names.contains(n)) {
        return Some(format!("it removes table {removed}"));
    }
    for table in &new.tables {
        let before = old.tables.iter().find(|t| t.name == table.name)?;
        if before.fields != table.fields {
            return Some(format!(
                "table {} declares the fields [{}] instead of [{}]",
                table.name,
                table.fields.join(", "),
                before.fields.join(", ")
            ));
        }
        if before.types != table.types {
            let slot = (0..table.fields.len())
                .find(|&slot| before.types.get(slot) != table.types.get(slot))
                .unwrap_or(0);
            let shown = |schema: &pure_lang::TableSchema| match schema.types.get(slot) {
                Some(t) => format!("{}{}", t.kind.name(), if t.required { "!" } else { "" }),
                None => "any (untyped)".into(),
            };
            return Some(format!(
                "table {} declares field {} {} instead of {}",
                table.name,
                table.fields[slot],
                shown(table),
                shown(before)
            ));
        }
    }
    Some("it declares the tables in another order".into())
}

/// How `new` declares other indexes than `old`, if it does.
fn index_change(old: &App, new: &App) -> Option<String> {
    if old.indexes() == new.indexes() {
        return None;
    }
    let names =
        |app: &App| -> Vec<String> { app.indexes().iter().map(|d| d.name.clone()).collect() };
    let (old_names, new_names) = (names(old), names(new));
    Some(match new_names.iter().find(|n| !old_names.contains(n)) {
        Some(added) => format!("it adds index {added}"),
        None => match old_names.iter().find(|n| !new_names.contains(n)) {
            Some(removed) => format!("it removes index {removed}"),
            None => "it declares an index with other fields or uniqueness".into(),
        },
    })
}

/// Builds the app's indexes from the recovered rows (they are never logged), with a line per
/// index the app declares: at a redeploy that adds one, this is where it comes to exist. Every
/// app's internal index of its schedule is built without a line; pending entries are counted.
fn build_indexes(app: &App, tables: &mut Tables) -> Result<(), OpenError> {
    let started = std::time::Instant::now();
    let declared =
        |def: &pure_lang::IndexDef| app.schema().table(def.table).name != pure_lang::SCHEDULE_TABLE;
    let shown = app.indexes().iter().filter(|def| declared(def)).count();
    if shown > 0 {
        let rows: usize = app
            .indexes()
            .iter()
            .filter(|def| declared(def))
            .map(|def| tables.len(def.table))
            .sum();
        eprintln!("pure-runtime: building {shown} index(es) from {rows} rows");
    }
    tables
        .set_indexes(app.indexes().to_vec())
        .map_err(OpenError::Index)?;
    for (id, def) in app
        .indexes()
        .iter()
        .enumerate()
        .filter(|(_, def)| declared(def))
    {
        eprintln!(
            "pure-runtime: index {} on {}({}){}: {} entries",
            def.name,
            app.schema().table(def.table).name,
            def.fields
                .iter()
                .zip(&def.descending)
                .map(|(field, descending)| match descending {
                    true => format!("{field} descending"),
                    false => field.clone(),
                })
                .collect::<Vec<_>>()
                .join(", "),
            if def.unique { ", unique" } else { "" },
            tables.index_len(id)
        );
    }
    if shown > 0 {
        eprintln!(
            "pure-runtime: indexes built in {:.1} ms",
            started.elapsed().as_secs_f64() * 1e3
        );
    }
    let pending = app.pending_schedules(tables);
    if pending > 0 {
        eprintln!("pure-runtime: {pending} scheduled entries pending");
    }
    Ok(())
}
