//! The four engines a timed run drives, behind one interface: each gives every terminal a
//! connection that runs one transaction and returns the app's answer, reports the counters only
//! it knows (the owner's busy time, commits, bytes of state), and at the end hands over its
//! tables for the consistency check.

use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};

use anyhow::{anyhow, bail, Context, Result};
use pure_runtime::{App, Runtime, RuntimeOptions, SyncMode};

use super::super::input::Txn;
use super::super::rows::Db;
use super::super::sqlite::{self, Grouped, Session};
use super::super::{inprocess, pure, Answer};
use crate::harness::http::{get_text, Client};
use crate::harness::serve::{self, Server};
use crate::harness::sqlite::{JournalMode, LockingMode, Settings};

/// Which engine, as `--engine` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// The app over HTTP and JSON: a pure-serve started on `--dir`, or the one at `--url`.
    Pure,
    /// The app through the runtime in this process (no HTTP, no JSON text): the owner, group
    /// commit and snapshots as pure-serve runs them.
    PureInprocess,
    /// The SQLite twin, a connection per thread (`--threads`), a commit per transaction.
    Sqlite,
    /// The SQLite twin, one writer thread committing what is queued as one transaction, a
    /// SAVEPOINT per transaction.
    SqliteGrouped,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Pure => "pure",
            Kind::PureInprocess => "pure-inprocess",
            Kind::Sqlite => "sqlite",
            Kind::SqliteGrouped => "sqlite-grouped",
        }
    }

    pub fn is_pure(self) -> bool {
        matches!(self, Kind::Pure | Kind::PureInprocess)
    }
}

/// One terminal's way into the engine.
pub trait Connection: Send {
    fn call(&mut self, txn: &Txn, now: i64) -> Result<Answer>;
}

/// What an engine counts itself, read at the start and the end of the measured window.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    /// Seconds the owner's role was held (Pure).
    pub owner_busy_seconds: Option<f64>,
    /// Commits (Pure: groups; SQLite: COMMITs), and the transactions they held.
    pub commits: Option<u64>,
    /// Of the commits, those made on the thread that ran their lone write (Pure).
    pub commits_here: Option<u64>,
    pub committed: Option<u64>,
    /// Syncs to the device (Pure); SQLite syncs once per commit.
    pub syncs: Option<u64>,
    /// Bytes of the state: Pure's own estimate of its tables; SQLite's database and WAL files.
    pub state_bytes: Option<u64>,
    /// Handler calls that fell back from the compiled form to Rhai's evaluator (Pure).
    pub handler_fallbacks: Option<u64>,
    /// Checkpoints written (Pure): each writes the whole state to the device.
    pub checkpoints: Option<u64>,
}

pub trait Engine: Send + Sync {
    fn kind(&self) -> Kind;
    fn connect(&self) -> Result<Box<dyn Connection + '_>>;
    /// Where the engine answers HTTP, for a driver that runs its terminals on an event loop
    /// rather than through `connect` (`None`: in-process engines).
    fn http_address(&self) -> Option<std::net::SocketAddr> {
        None
    }
    /// The process that runs the engine, when it is not this one (and is known).
    fn server_pid(&self) -> Option<u32>;
    fn counters(&self) -> Result<Counters>;
    /// `Err` once the engine is gone (its process died), saying how.
    fn alive(&self) -> Result<()> {
        Ok(())
    }
    /// Stops the engine and returns its tables (`None`: not reachable, as behind `--url`).
    fn finish(self: Box<Self>, scratch: &Path) -> Result<Option<Db>>;
}

/// pure-serve over HTTP.
pub struct PureHttp {
    server: Mutex<Option<Server>>,
    pid: Option<u32>,
    address: std::net::SocketAddr,
    app: PathBuf,
    data: PathBuf,
}

impl PureHttp {
    pub fn start(app: &Path, data: &Path) -> Result<PureHttp> {
        let server = Server::start(app, data, &["--sync", "always"])?;
        Ok(PureHttp {
            address: server.address,
            pid: Some(server.pid()),
            server: Mutex::new(Some(server)),
            app: app.to_path_buf(),
            data: data.to_path_buf(),
        })
    }

    /// A server someone else started (and loaded with the same seed and warehouses).
    pub fn external(url: &str) -> Result<PureHttp> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| anyhow!("--url must start with http:// (got {url})"))?;
        let host = rest.trim_end_matches('/');
        use std::net::ToSocketAddrs;
        let address = host
            .to_socket_addrs()
            .with_context(|| format!("resolve {host}"))?
            .next()
            .ok_or_else(|| anyhow!("{host} resolves to no address"))?;
        // Fail now, not after the warm-up, when nothing listens there.
        get_text(address, "/_pure/health")
            .with_context(|| format!("no pure-serve answers at {url}"))?;
        Ok(PureHttp {
            server: Mutex::new(None),
            pid: None,
            address,
            app: PathBuf::new(),
            data: PathBuf::new(),
        })
    }
}

impl Connection for Client {
    fn call(&mut self, txn: &Txn, now: i64) -> Result<Answer> {
        pure::call(self, txn, now)
    }
}

impl Engine for PureHttp {
    fn kind(&self) -> Kind {
        Kind::Pure
    }

    fn connect(&self) -> Result<Box<dyn Connection + '_>> {
        Ok(Box::new(Client::connect(self.address)?))
    }

    fn http_address(&self) -> Option<std::net::SocketAddr> {
        Some(self.address)
    }

    fn server_pid(&self) -> Option<u32> {
        self.pid
    }

    fn alive(&self) -> Result<()> {
        let mut server = self.server.lock().unwrap_or_else(|e| e.into_inner());
        match server.as_mut().map(|s| s.exited()).transpose()? {
            Some(Some(status)) => bail!(
                "pure-serve (pid {}) ended during the run: {status}",
                self.pid.unwrap_or(0)
            ),
            _ => Ok(()),
        }
    }

    fn counters(&self) -> Result<Counters> {
        let text = get_text(self.address, "/_pure/metrics")?;
        let metric = |name: &str| -> Option<f64> {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        };
        Ok(Counters {
            owner_busy_seconds: metric("pure_owner_busy_seconds_total"),
            commits: metric("pure_groups_total").map(|v| v as u64),
            commits_here: metric("pure_groups_committed_here_total").map(|v| v as u64),
            committed: metric("pure_group_records_sum").map(|v| v as u64),
            syncs: metric("pure_syncs_total").map(|v| v as u64),
            state_bytes: metric("pure_state_bytes").map(|v| v as u64),
            handler_fallbacks: metric("pure_handler_fallbacks_total").map(|v| v as u64),
            checkpoints: metric("pure_checkpoints_total").map(|v| v as u64),
        })
    }

    fn finish(self: Box<Self>, scratch: &Path) -> Result<Option<Db>> {
        let server = self.server.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(server) = server else {
            return Ok(None);
        };
        server.stop()?;
        pure_tables(&self.app, &self.data, scratch).map(Some)
    }
}

/// Pure's tables as `pure-serve export` writes them from a stopped data directory.
fn pure_tables(app: &Path, data: &Path, scratch: &Path) -> Result<Db> {
    let out = scratch.join("pure-export");
    serve::export(app, data, &out)?;
    let db = Db::read_dir(&out)?;
    std::fs::remove_dir_all(&out).with_context(|| format!("remove {}", out.display()))?;
    Ok(db)
}

/// The runtime in this process.
pub struct PureInprocess {
    runtime: Runtime,
    app_dir: PathBuf,
    data: PathBuf,
}

impl PureInprocess {
    pub fn open(app_dir: &Path, data: &Path) -> Result<PureInprocess> {
        let app = App::load(app_dir).map_err(|e| anyhow!("{e}"))?;
        let options = RuntimeOptions {
            sync: SyncMode::Always,
            ..RuntimeOptions::default()
        };
        let runtime = Runtime::open(app, data, options).map_err(|e| anyhow!("{e}"))?;
        Ok(PureInprocess {
            runtime,
            app_dir: app_dir.to_path_buf(),
            data: data.to_path_buf(),
        })
    }
}

struct InprocessConnection<'a> {
    runtime: &'a Runtime,
}

impl Connection for InprocessConnection<'_> {
    fn call(&mut self, txn: &Txn, now: i64) -> Result<Answer> {
        let app: &App = &self.runtime.app();
        let (handler, request) = inprocess::request(app, txn, now)?;
        let result = if inprocess::is_read(handler) {
            self.runtime.read(handler, request)
        } else {
            match self.runtime.write(handler, request) {
                Ok(reply) => reply
                    .blocking_recv()
                    .map_err(|_| anyhow!("the runtime stopped before answering"))?,
                Err(e) => Err(e),
            }
        };
        Ok(match result {
            Ok(answer) => Answer {
                status: answer.status,
                body: answer.body.to_value(),
            },
            Err(e) => Answer {
                status: e.status(),
                body: e.to_json(),
            },
        })
    }
}

impl Engine for PureInprocess {
    fn kind(&self) -> Kind {
        Kind::PureInprocess
    }

    fn connect(&self) -> Result<Box<dyn Connection + '_>> {
        Ok(Box::new(InprocessConnection {
            runtime: &self.runtime,
        }))
    }

    fn server_pid(&self) -> Option<u32> {
        None
    }

    fn counters(&self) -> Result<Counters> {
        let m = self.runtime.metrics();
        Ok(Counters {
            owner_busy_seconds: Some(m.owner_busy_seconds_total),
            commits: Some(m.groups_total),
            commits_here: Some(m.groups_committed_here_total),
            committed: Some(m.group_records_sum),
            syncs: Some(m.syncs_total),
            state_bytes: Some(m.state_bytes),
            handler_fallbacks: Some(m.handler_fallbacks_total),
            checkpoints: Some(m.checkpoints_total),
        })
    }

    fn finish(self: Box<Self>, scratch: &Path) -> Result<Option<Db>> {
        self.runtime.shutdown();
        if let Some(reason) = self.runtime.poisoned() {
            bail!("the runtime is poisoned: {reason}");
        }
        let PureInprocess {
            runtime,
            app_dir,
            data,
        } = *self;
        // The store's lock goes with the runtime; export takes it.
        drop(runtime);
        pure_tables(&app_dir, &data, scratch).map(Some)
    }
}

/// The SQLite twin, a commit per transaction: `threads` connections shared by the terminals.
/// A terminal waits for a free one in arrival order (a ticket each), and that wait is part of
/// its latency.
pub struct SqlitePool {
    path: PathBuf,
    pool: Mutex<Pool>,
    free: Condvar,
    /// Write transactions committed.
    commits: std::sync::atomic::AtomicU64,
}

struct Pool {
    sessions: Vec<Session>,
    next_ticket: u64,
    serving: u64,
}

impl SqlitePool {
    pub fn open(path: &Path, settings: &Settings, threads: usize) -> Result<SqlitePool> {
        let sessions = (0..threads.max(1))
            .map(|_| Session::open(path, settings))
            .collect::<Result<Vec<_>>>()?;
        Ok(SqlitePool {
            path: path.to_path_buf(),
            pool: Mutex::new(Pool {
                sessions,
                next_ticket: 0,
                serving: 0,
            }),
            free: Condvar::new(),
            commits: Default::default(),
        })
    }

    fn take(&self) -> Session {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        let ticket = pool.next_ticket;
        pool.next_ticket += 1;
        while pool.serving != ticket || pool.sessions.is_empty() {
            pool = self.free.wait(pool).unwrap_or_else(|e| e.into_inner());
        }
        pool.serving += 1;
        let session = pool.sessions.pop().expect("a free session");
        drop(pool);
        // The next ticket may be served too, if another session is free.
        self.free.notify_all();
        session
    }

    fn give_back(&self, session: Session) {
        self.pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .sessions
            .push(session);
        self.free.notify_all();
    }
}

struct PooledConnection<'a>(&'a SqlitePool);

impl Connection for PooledConnection<'_> {
    fn call(&mut self, txn: &Txn, now: i64) -> Result<Answer> {
        let pool = self.0;
        let mut session = pool.take();
        let answer = session.execute(txn, now);
        pool.give_back(session);
        if matches!(&answer, Ok(a) if a.status == 200) && txn.writes() {
            pool.commits
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        answer
    }
}

impl Engine for SqlitePool {
    fn kind(&self) -> Kind {
        Kind::Sqlite
    }

    fn connect(&self) -> Result<Box<dyn Connection + '_>> {
        Ok(Box::new(PooledConnection(self)))
    }

    fn server_pid(&self) -> Option<u32> {
        None
    }

    fn counters(&self) -> Result<Counters> {
        // Each write that committed is one COMMIT and one sync of the WAL (reads sync nothing).
        let n = self.commits.load(std::sync::atomic::Ordering::Relaxed);
        Ok(Counters {
            commits: Some(n),
            committed: Some(n),
            syncs: Some(n),
            state_bytes: Some(sqlite_bytes(&self.path)),
            ..Counters::default()
        })
    }

    fn finish(self: Box<Self>, _scratch: &Path) -> Result<Option<Db>> {
        let path = self.path.clone();
        drop(self);
        Ok(Some(sqlite::read_db(&path)?))
    }
}

/// The grouped SQLite twin. Writes queue to the one writer; reads run at once on a
/// connection of the terminal's own (in WAL mode a reader sees the last commit and never waits
/// for the writer, as Pure's reads run on the last durable snapshot). With a journal other than
/// WAL, or the exclusive locking mode, reads go through the writer too.
pub struct SqliteGrouped {
    path: PathBuf,
    settings: Settings,
    grouped: Grouped,
    readers: bool,
}

impl SqliteGrouped {
    pub fn start(path: &Path, settings: &Settings, terminals: usize) -> Result<SqliteGrouped> {
        Ok(SqliteGrouped {
            path: path.to_path_buf(),
            settings: settings.clone(),
            // A batch can hold every terminal's transaction: no more can be queued at once.
            grouped: Grouped::start(path, settings, terminals.max(1))?,
            readers: settings.journal_mode == JournalMode::Wal
                && settings.locking_mode != Some(LockingMode::Exclusive),
        })
    }
}

struct GroupedConnection<'a> {
    grouped: &'a Grouped,
    reader: Option<Session>,
}

impl Connection for GroupedConnection<'_> {
    fn call(&mut self, txn: &Txn, now: i64) -> Result<Answer> {
        match &mut self.reader {
            Some(reader) if !txn.writes() => reader.execute(txn, now),
            _ => self.grouped.execute(txn, now),
        }
    }
}

impl Engine for SqliteGrouped {
    fn kind(&self) -> Kind {
        Kind::SqliteGrouped
    }

    fn connect(&self) -> Result<Box<dyn Connection + '_>> {
        let reader = if self.readers {
            Some(Session::open(&self.path, &self.settings)?)
        } else {
            None
        };
        Ok(Box::new(GroupedConnection {
            grouped: &self.grouped,
            reader,
        }))
    }

    fn server_pid(&self) -> Option<u32> {
        None
    }

    fn counters(&self) -> Result<Counters> {
        let stats = self.grouped.stats();
        Ok(Counters {
            commits: Some(stats.commits),
            committed: Some(stats.transactions),
            syncs: Some(stats.commits),
            state_bytes: Some(sqlite_bytes(&self.path)),
            ..Counters::default()
        })
    }

    fn finish(self: Box<Self>, _scratch: &Path) -> Result<Option<Db>> {
        let SqliteGrouped { path, grouped, .. } = *self;
        grouped.close()?;
        Ok(Some(sqlite::read_db(&path)?))
    }
}

/// The database file and its WAL, in bytes.
fn sqlite_bytes(path: &Path) -> u64 {
    let size = |p: PathBuf| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    size(path.to_path_buf()) + size(PathBuf::from(wal))
}
