//! The handle to a running app: open (recover, start the threads), write, read, shutdown.

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use pure_lang::{Answer, App, HandlerError, Request, Schema, Tables};
use pure_store::{Io, RealIo, Store, StoreOptions, SyncMode};
use tokio::sync::oneshot;

use crate::building::Building;
use crate::inbox::{Inbox, Refused};
use crate::metrics::{Health, Metrics, MetricsCell};
use crate::owner::{Job, Owner};
use crate::recovery::{recover, Recovery};
use crate::syncer::Syncer;

#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    pub sync: SyncMode,
    /// Size of the preallocated log (used when the log is created).
    pub log_capacity_bytes: u64,
    /// A checkpoint starts when the log since the last one exceeds this.
    pub checkpoint_interval_bytes: u64,
    /// Bound of the write queue: a full queue answers `Unavailable` at once (backpressure).
    pub queue_capacity: usize,
    /// The longest a write waits for room in a full log (for checkpoints to free it) before it
    /// is refused with `Unavailable` and undone, never to be applied.
    pub write_timeout: Duration,
    /// Test hook: called on the syncer thread before every commit (e.g. to hold a sync).
    pub commit_gate: Option<CommitGate>,
    /// Test hook: called by whoever runs a write, after its handler, under the group's lock
    /// (e.g. to make running writes panic).
    pub run_gate: Option<CommitGate>,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            sync: SyncMode::Always,
            log_capacity_bytes: 256 << 20,
            checkpoint_interval_bytes: 64 << 20,
            queue_capacity: 4096,
            write_timeout: Duration::from_secs(5),
            commit_gate: None,
            run_gate: None,
        }
    }
}

/// A function the runtime calls at a fixed point (tests hold syncs, or inject panics, with it).
#[derive(Clone)]
pub struct CommitGate(pub Arc<dyn Fn() + Send + Sync>);

impl fmt::Debug for CommitGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CommitGate")
    }
}

#[derive(Debug)]
pub enum OpenError {
    /// The store could not open or recover (I/O error, or damaged acknowledged data).
    Store(pure_store::Error),
    /// A record in the log does not decode: the data is damaged or written by another program.
    Record { lsn: u64, reason: String },
    /// The checkpoint image does not decode.
    Image { lsn: u64, reason: String },
    /// A thread could not be started.
    Thread(std::io::Error),
    /// A salvage that would change the directory it saves from.
    Salvage(String),
    /// A declared index cannot be built from the rows (a duplicate in a unique index, a value
    /// it cannot order).
    Index(String),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Store(e) => write!(f, "cannot open the data directory: {e}"),
            OpenError::Record { lsn, reason } => write!(
                f,
                "the log record at LSN {lsn} is damaged ({reason}); restore the data directory from a backup"
            ),
            OpenError::Image { lsn, reason } => write!(
                f,
                "the checkpoint at LSN {lsn} is damaged ({reason}); restore the data directory from a backup"
            ),
            OpenError::Thread(e) => write!(f, "cannot start the owner threads: {e}"),
            OpenError::Salvage(reason) => write!(f, "cannot salvage: {reason}"),
            OpenError::Index(reason) => write!(
                f,
                "cannot build the app's indexes from the rows: {reason}; change the rows or \
                 the index declaration in app.json"
            ),
        }
    }
}

impl std::error::Error for OpenError {}

/// Why a new version of the app cannot replace the running one without a restart: it changes
/// what the state in memory is built on (tables, their fields, indexes). A restart can take it:
/// recovery maps the rows by name into the new declaration and builds the new indexes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadError {
    /// What changed, e.g. `table players gains or loses fields (best, posts -> best)`.
    pub change: String,
}

impl fmt::Display for ReloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the new version changes the tables: {}; a reload cannot change tables, fields or \
             indexes: restart pure-serve to take it (the data is kept)",
            self.change
        )
    }
}

impl std::error::Error for ReloadError {}

pub type WriteReply = oneshot::Receiver<Result<Answer, HandlerError>>;

/// A published state: durable, immutable, shared by every reader.
pub(crate) struct Snapshot {
    pub tables: Arc<Tables>,
    pub lsn: u64,
    pub made_at: Instant,
    pub state_bytes: u64,
}

impl Snapshot {
    pub fn new(tables: Arc<Tables>, lsn: u64) -> Snapshot {
        let state_bytes = estimate_bytes(&tables);
        Snapshot {
            tables,
            lsn,
            made_at: Instant::now(),
            state_bytes,
        }
    }
}

/// Bytes of one row in the maps: its 32-byte entry (a 24-byte key and an 8-byte row pointer) in
/// nodes that are about half full once grown by ordered inserts, with the branches above them.
const ENTRY_BYTES: u64 = 68;

/// What the allocator takes for `n` bytes: its size classes are multiples of 8 up to 64, then
/// four per power of two.
fn allocated(n: u64) -> u64 {
    if n <= 64 {
        return n.div_ceil(8) * 8;
    }
    let step = (1u64 << (63 - (n - 1).leading_zeros())) / 4;
    n.div_ceil(step) * step
}

/// An estimate of the state's resident bytes: each table's rows are measured at its first and
/// last row (exact for tables of rows alike), as the allocator holds them, plus the maps.
fn estimate_bytes(tables: &Tables) -> u64 {
    (0..tables.table_count() as u32)
        .map(|table| {
            let mut rows = tables.rows(table);
            let len = rows.len() as u64;
            let row = |(key, fields): (&pure_lang::Key, &pure_lang::Fields)| {
                let key_heap = match key.heap_bytes() {
                    0 => 0,
                    bytes => allocated(bytes as u64),
                };
                // Rows of no fields share one allocation.
                let fields = if fields.is_empty() {
                    0
                } else {
                    allocated(fields.memory_bytes() as u64)
                };
                fields + key_heap
            };
            let first = rows.next().map(row);
            let last = rows.next_back().map(row).or(first);
            let sample = (first.unwrap_or(0) + last.unwrap_or(0)) / 2;
            len * (ENTRY_BYTES + sample)
        })
        .sum()
}

/// What the owner, the syncer and callers share.
pub(crate) struct Shared {
    /// The app's current version; a reload replaces it (`Runtime::reload`).
    app: ArcSwap<App>,
    /// Fallbacks counted by versions a reload replaced, so that the metric only grows.
    retired_fallbacks: AtomicU64,
    /// The published snapshot. A `Mutex<Arc<..>>`: readers hold the lock only to clone the `Arc`.
    published: Mutex<Arc<Snapshot>>,
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
}

impl Shared {
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
    #[must_use = "drop the replaced snapshot once the group is answered"]
    pub fn publish(&self, snapshot: Snapshot) -> Arc<Snapshot> {
        let snapshot = Arc::new(snapshot);
        std::mem::replace(
            &mut *self.published.lock().expect("publishing never panics"),
            snapshot,
        )
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

struct Inner {
    shared: Arc<Shared>,
    /// The owner's inbox: writes are pushed here; closed at shutdown or when the owner stops.
    inbox: Arc<Inbox>,
    /// Callers of `write` run the queue with it when the owner's role is free. Weak: once the
    /// owner thread has stopped, the group being built (and the answers it holds) must go with
    /// it, or a caller would wait forever for an answer that cannot come.
    owner: Weak<Owner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    recovery: Recovery,
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
        };
        let recovered = Store::open_with(io, data_dir, store_options).map_err(OpenError::Store)?;
        if let Some(cut) = &recovered.cut {
            eprintln!(
                "pure-runtime: cut a torn log tail of {} bytes at position {} ({}); it was never acknowledged",
                cut.bytes, cut.position, cut.reason
            );
        }
        let mut state = recover(&app, &recovered)?;
        build_indexes(&app, &mut state.tables)?;
        let recovery = state.report;
        let store = recovered.store;
        if options.sync == SyncMode::None {
            eprintln!(
                "pure-runtime: WARNING: sync none: writes are not durable against power loss"
            );
        }
        // A frame holds at most half the log; groups stay under a quarter (see `Owner`).
        let group_bytes_max = (store.log_capacity_bytes() / 8).min(4 << 20) as usize;
        let shared = Arc::new(Shared {
            app: ArcSwap::from_pointee(app),
            retired_fallbacks: AtomicU64::new(0),
            published: Mutex::new(Arc::new(Snapshot::new(
                Arc::new(state.tables.clone()),
                state.lsn.0,
            ))),
            poison: RwLock::new(None),
            poisoned: AtomicBool::new(false),
            log_full: RwLock::new(None),
            log_is_full: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            queue_depth: AtomicU64::new(0),
            metrics: MetricsCell::new(),
        });
        shared.metrics.recovered(state.lsn.0);
        shared
            .metrics
            .log(store.log_used_bytes(), store.log_capacity_bytes());
        let inbox = Arc::new(Inbox::new(options.queue_capacity));
        let building = Arc::new(Building::new(state.tables, group_bytes_max));
        let syncer = Syncer {
            shared: shared.clone(),
            store,
            schema: Arc::new(state.schema.clone()),
            building: building.clone(),
            inbox: inbox.clone(),
            checkpoint_interval_bytes: options.checkpoint_interval_bytes,
            write_timeout: options.write_timeout,
            commit_gate: options.commit_gate.clone(),
            checkpoint: None,
            log_full: Default::default(),
        };
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
        let syncer = std::thread::Builder::new()
            .name("pure-syncer".into())
            .spawn(move || syncer.run())
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
            threads: Mutex::new(vec![owner_handle, syncer]),
            recovery,
        };
        Ok(Runtime {
            inner: Arc::new(inner),
        })
    }

    /// The app's current version.
    pub fn app(&self) -> Arc<App> {
        self.inner.shared.app.load_full()
    }

    /// Replaces the app with a new version of it, for every write and read that starts after
    /// this returns; those already queued or running finish on the version they started with.
    /// Refused, the old version staying, when the new one declares other tables, fields or
    /// indexes than the state in memory was built for (`ReloadError` says which). Returns the
    /// version now current, to give `write_on` and `read_on`.
    pub fn reload(&self, app: App) -> Result<Arc<App>, ReloadError> {
        let shared = &self.inner.shared;
        let old = shared.app.load_full();
        if let Some(change) =
            schema_change(old.schema(), app.schema()).or_else(|| index_change(&old, &app))
        {
            return Err(ReloadError { change });
        }
        let app = Arc::new(app);
        let replaced = shared.app.swap(app.clone());
        shared
            .retired_fallbacks
            .fetch_add(replaced.fallbacks(), Ordering::Relaxed);
        Ok(app)
    }

    /// What opening read to rebuild the state, and how long it took.
    pub fn recovery(&self) -> Recovery {
        self.inner.recovery
    }

    /// Queues a write handler call and, when the owner's role is free, runs the queued writes
    /// right here, this one included, for about a millisecond at most (a single write may take
    /// longer, up to the script limits); it never waits for another write, for room in a group,
    /// or for the disk. Handlers then run on the caller's stack, or on a fresh one when less is
    /// left of it than `pure_lang::Limits::stack_bytes` (2.9 MiB by default, in a release
    /// build): about 11 µs more per call on such a thread, so give callers a larger stack. The
    /// reply arrives after the group holding this write is durable (or with the handler's
    /// error, or `Unavailable`).
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
            app.schema() == shared.app.load().schema(),
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
        let (reply, receiver) = oneshot::channel();
        shared.queue_depth.fetch_add(1, Ordering::Relaxed);
        match self.inner.inbox.push(Job {
            app: app.clone(),
            handler: handler.to_string(),
            request,
            reply,
        }) {
            Ok(()) => {
                if let Some(owner) = self.inner.owner.upgrade() {
                    owner.run_here();
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

    /// Runs a read handler on the calling thread against the latest published (durable)
    /// snapshot.
    pub fn read(&self, handler: &str, request: Request) -> Result<Answer, HandlerError> {
        self.read_on(&self.inner.shared.app.load(), handler, request)
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

    pub fn metrics(&self) -> Metrics {
        let shared = &self.inner.shared;
        let snapshot = shared.published();
        Metrics {
            queue_depth: shared.queue_depth.load(Ordering::Relaxed),
            snapshot_age_seconds: snapshot.made_at.elapsed().as_secs_f64(),
            state_bytes: snapshot.state_bytes,
            handler_fallbacks_total: self.app().fallbacks()
                + shared.retired_fallbacks.load(Ordering::Relaxed),
            ..shared.metrics.snapshot()
        }
    }

    /// Says that a stop has begun, before `shutdown`: a write waiting for room in a full log is
    /// refused (503) at once rather than at `write_timeout`, so that a stop does not wait for
    /// it. Writes go on otherwise.
    pub fn begin_shutdown(&self) {
        self.inner.shared.stopping.store(true, Ordering::Release);
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
        self.shared.stopping.store(true, Ordering::Release);
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

/// Builds the app's declared indexes from the recovered rows (they are never logged), with a
/// line per index: at a redeploy that adds one, this is where it comes to exist.
fn build_indexes(app: &App, tables: &mut Tables) -> Result<(), OpenError> {
    if app.indexes().is_empty() {
        return Ok(());
    }
    let started = std::time::Instant::now();
    let rows: usize = app.indexes().iter().map(|def| tables.len(def.table)).sum();
    eprintln!(
        "pure-runtime: building {} index(es) from {rows} rows",
        app.indexes().len()
    );
    tables
        .set_indexes(app.indexes().to_vec())
        .map_err(OpenError::Index)?;
    for (id, def) in app.indexes().iter().enumerate() {
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
    eprintln!(
        "pure-runtime: indexes built in {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}
