//! The two ways of committing:
//!
//! - [`Session`] (`sqlite`): one connection per terminal thread, every transaction committed on
//!   its own. Writers take a fair (FIFO) application-level lock around BEGIN IMMEDIATE ..
//!   COMMIT, so SQLite never sees two writers at once; readers use a deferred BEGIN (in WAL
//!   mode a snapshot that never waits for the writer). SQLITE_BUSY still possible (a reader of
//!   a rollback-journal database, another process) is retried a bounded number of times and
//!   counted.
//! - [`Grouped`] (`sqlite-grouped`): one writer thread owns the only connection; callers queue
//!   transactions to it. It takes everything queued (never waiting for more), runs one BEGIN
//!   IMMEDIATE, each transaction in a SAVEPOINT (ROLLBACK TO + RELEASE when it throws), one
//!   COMMIT, and only then answers them all. Reads go through the writer too.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use rusqlite::{Connection, ErrorCode, OpenFlags};
use serde::Serialize;

use super::super::input::Txn;
use super::super::Answer;
use super::txn;
use crate::harness::sqlite::Settings;

/// Attempts of one transaction (or of a batch's BEGIN) before SQLITE_BUSY is given up on.
const ATTEMPTS: u32 = 20;

/// Opens an existing, loaded database with `settings` applied.
pub(super) fn open(path: &Path, settings: &Settings) -> Result<Connection> {
    if !path.exists() {
        bail!("no database {} (load one first)", path.display());
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("open {}", path.display()))?;
    settings
        .apply(&conn)
        .with_context(|| format!("apply the settings to {}", path.display()))?;
    let tables: i64 = conn.query_row(
        "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name IN \
         ('warehouse', 'district', 'customer', 'history', 'orders', 'new_order', \
          'order_line', 'stock', 'item')",
        [],
        |r| r.get(0),
    )?;
    if tables != 9 {
        bail!("{} does not hold the nine TPC-C tables", path.display());
    }
    Ok(conn)
}

fn is_busy(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<rusqlite::Error>(),
            Some(rusqlite::Error::SqliteFailure(f, _)) if f.code == ErrorCode::DatabaseBusy
        )
    })
}

/// The pause before retry `attempt` (1-based) after SQLITE_BUSY: 50 µs doubling to 10 ms.
fn backoff(attempt: u32) -> Duration {
    Duration::from_micros(50u64 << attempt.min(8)).min(Duration::from_millis(10))
}

fn step(conn: &Connection, sql: &str) -> Result<()> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

/// Ends the open transaction, if any, ignoring errors (it is the way out of one).
fn abandon(conn: &Connection) {
    if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
}

/// A FIFO lock: tickets served in the order they were drawn (std's Mutex makes no promise of
/// fairness; a writer must not starve behind others that keep re-acquiring).
#[derive(Default)]
struct TicketLock {
    tickets: Mutex<Tickets>,
    turn: Condvar,
}

#[derive(Default)]
struct Tickets {
    next: u64,
    serving: u64,
}

struct Ticket<'a>(&'a TicketLock);

impl TicketLock {
    fn state(&self) -> MutexGuard<'_, Tickets> {
        self.tickets.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock(&self) -> Ticket<'_> {
        let mut t = self.state();
        let mine = t.next;
        t.next += 1;
        while t.serving != mine {
            t = self.turn.wait(t).unwrap_or_else(|e| e.into_inner());
        }
        Ticket(self)
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.0.state().serving += 1;
        self.0.turn.notify_all();
    }
}

/// The write lock of the database at `path`, shared by every session of this process that has
/// it open.
fn write_lock(path: &Path) -> Result<Arc<TicketLock>> {
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Weak<TicketLock>>>> = OnceLock::new();
    let key = path
        .canonicalize()
        .with_context(|| format!("resolve {}", path.display()))?;
    let mut locks = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    locks.retain(|_, lock| lock.strong_count() > 0);
    if let Some(lock) = locks.get(&key).and_then(Weak::upgrade) {
        return Ok(lock);
    }
    let lock = Arc::new(TicketLock::default());
    locks.insert(key, Arc::downgrade(&lock));
    Ok(lock)
}

/// What a session did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SessionStats {
    /// Transactions answered (any status).
    pub transactions: u64,
    /// Answered 200 and committed.
    pub commits: u64,
    /// Answered otherwise (the script threw) and rolled back.
    pub rollbacks: u64,
    /// Attempts repeated after SQLITE_BUSY.
    pub busy_retries: u64,
    /// Transactions that ended in an error (no answer).
    pub errors: u64,
}

/// One connection, used by one thread; every transaction commits on its own. Sessions of one
/// file in one process share its write lock.
pub struct Session {
    conn: Connection,
    lock: Arc<TicketLock>,
    stats: SessionStats,
}

impl Session {
    /// A connection to the loaded database `path` with `settings` (all but `page_size`, which
    /// the file already has).
    pub fn open(path: &Path, settings: &Settings) -> Result<Session> {
        let conn = open(path, settings)?;
        Ok(Session {
            conn,
            lock: write_lock(path)?,
            stats: SessionStats::default(),
        })
    }

    /// Runs `txn` at time `now` as one transaction: the app's answer, committed when it is 200
    /// and rolled back otherwise. `Err` only when SQLite fails (SQLITE_BUSY after
    /// [`ATTEMPTS`] tries included).
    pub fn execute(&mut self, txn: &Txn, now: i64) -> Result<Answer> {
        // A write starts with BEGIN IMMEDIATE and takes the write lock.
        let writes = txn.writes();
        let mut attempt = 1;
        loop {
            let result = {
                let _turn = writes.then(|| self.lock.lock());
                self.attempt(txn, now, writes)
            };
            match result {
                Ok(answer) => {
                    self.stats.transactions += 1;
                    if answer.status == 200 {
                        self.stats.commits += 1;
                    } else {
                        self.stats.rollbacks += 1;
                    }
                    return Ok(answer);
                }
                Err(e) if attempt < ATTEMPTS && is_busy(&e) => {
                    self.stats.busy_retries += 1;
                    std::thread::sleep(backoff(attempt));
                    attempt += 1;
                }
                Err(e) => {
                    self.stats.errors += 1;
                    return Err(
                        e.context(format!("{} after {attempt} attempt(s)", txn.kind().name()))
                    );
                }
            }
        }
    }

    fn attempt(&self, txn: &Txn, now: i64, writes: bool) -> Result<Answer> {
        step(&self.conn, if writes { "BEGIN IMMEDIATE" } else { "BEGIN" })?;
        let result = txn::run(&self.conn, txn, now).and_then(|answer| {
            step(
                &self.conn,
                if answer.status == 200 {
                    "COMMIT"
                } else {
                    "ROLLBACK"
                },
            )?;
            Ok(answer)
        });
        if result.is_err() {
            abandon(&self.conn);
        }
        result
    }

    #[allow(dead_code)] // API the harness does not call yet (a binary crate flags it)
    pub fn stats(&self) -> SessionStats {
        self.stats
    }

    /// The connection (between transactions), for the tests' query plans and surgery.
    #[cfg(test)]
    pub(super) fn connection(&self) -> &Connection {
        &self.conn
    }
}

/// What the grouped writer did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GroupedStats {
    /// Batches committed (one COMMIT, one sync each).
    pub commits: u64,
    /// Transactions answered from committed batches (any status).
    pub transactions: u64,
    /// Of those, transactions whose savepoint was rolled back (the script threw, or SQLite
    /// failed inside that transaction only).
    pub rollbacks: u64,
    /// Batches that failed as a whole (BEGIN, a savepoint or COMMIT failed): every transaction
    /// in them was answered with an error.
    pub failed_batches: u64,
    pub failed_transactions: u64,
    /// BEGIN IMMEDIATE repeated after SQLITE_BUSY (only another process can cause one).
    pub busy_retries: u64,
    /// `batch_sizes[n]`: committed batches of n transactions.
    pub batch_sizes: Vec<u64>,
}

impl GroupedStats {
    /// Transactions per commit.
    pub fn mean_batch(&self) -> f64 {
        if self.commits == 0 {
            0.0
        } else {
            self.transactions as f64 / self.commits as f64
        }
    }

    pub fn largest_batch(&self) -> usize {
        self.batch_sizes.iter().rposition(|&n| n > 0).unwrap_or(0)
    }
}

impl std::fmt::Display for GroupedStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} commits of {} transactions ({:.2} per commit, largest {}), {} rolled back, \
             {} failed batches, {} busy retries",
            self.commits,
            self.transactions,
            self.mean_batch(),
            self.largest_batch(),
            self.rollbacks,
            self.failed_batches,
            self.busy_retries
        )
    }
}

type Reply = std::result::Result<Answer, String>;

struct Job {
    txn: Txn,
    now: i64,
    reply: mpsc::SyncSender<Reply>,
}

/// A transaction queued to the grouped writer: its answer arrives once its batch committed.
pub struct Pending(mpsc::Receiver<Reply>);

impl Pending {
    pub fn wait(self) -> Result<Answer> {
        match self.0.recv() {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(message)) => Err(anyhow!(message)),
            Err(_) => Err(anyhow!("the SQLite writer stopped before answering")),
        }
    }
}

/// One writer thread owning the only connection: many transactions per COMMIT, each in its own
/// SAVEPOINT. Dropping it lets the writer finish what is queued and closes the connection.
pub struct Grouped {
    jobs: Option<mpsc::Sender<Job>>,
    writer: Option<JoinHandle<()>>,
    stats: Arc<Mutex<GroupedStats>>,
}

impl Grouped {
    /// Opens `path` with `settings` and starts the writer; a batch holds at most `max_batch`
    /// transactions (at least 1).
    pub fn start(path: &Path, settings: &Settings, max_batch: usize) -> Result<Grouped> {
        let conn = open(path, settings)?;
        let max_batch = max_batch.max(1);
        let stats = Arc::new(Mutex::new(GroupedStats {
            batch_sizes: vec![0; max_batch + 1],
            ..GroupedStats::default()
        }));
        let (jobs, queue) = mpsc::channel::<Job>();
        let shared = stats.clone();
        let writer = std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || write_loop(conn, queue, max_batch, &shared))
            .context("start the SQLite writer thread")?;
        Ok(Grouped {
            jobs: Some(jobs),
            writer: Some(writer),
            stats,
        })
    }

    /// Queues `txn` at time `now` without waiting for its answer.
    pub fn submit(&self, txn: &Txn, now: i64) -> Pending {
        let (reply, answer) = mpsc::sync_channel(1);
        let job = Job {
            txn: txn.clone(),
            now,
            reply,
        };
        // If the writer has stopped, the job (and its reply sender) is dropped: wait() says so.
        if let Some(jobs) = &self.jobs {
            let _ = jobs.send(job);
        }
        Pending(answer)
    }

    /// Runs `txn` at time `now` and waits until its batch committed: the app's answer. `Err`
    /// when SQLite failed for it or for its whole batch (a failed COMMIT fails every
    /// transaction in the batch). Callable from many threads at once.
    pub fn execute(&self, txn: &Txn, now: i64) -> Result<Answer> {
        self.submit(txn, now).wait()
    }

    #[allow(dead_code)] // API the harness does not call yet (a binary crate flags it)
    pub fn stats(&self) -> GroupedStats {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Stops the writer after what is queued, closes the connection, and gives the final
    /// figures.
    #[allow(dead_code)] // API the harness does not call yet (a binary crate flags it)
    pub fn close(mut self) -> Result<GroupedStats> {
        self.stop()?;
        Ok(self.stats())
    }

    fn stop(&mut self) -> Result<()> {
        drop(self.jobs.take());
        if let Some(writer) = self.writer.take() {
            writer
                .join()
                .map_err(|_| anyhow!("the SQLite writer thread panicked"))?;
        }
        Ok(())
    }
}

impl Drop for Grouped {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

fn write_loop(
    conn: Connection,
    queue: mpsc::Receiver<Job>,
    max_batch: usize,
    stats: &Mutex<GroupedStats>,
) {
    let mut batch: Vec<Job> = Vec::with_capacity(max_batch);
    // Block for the first transaction only, then take what is already queued.
    while let Ok(first) = queue.recv() {
        batch.push(first);
        while batch.len() < max_batch {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let mut busy_retries = 0;
        let result = run_batch(&conn, &batch, &mut busy_retries);
        {
            let mut s = stats.lock().unwrap_or_else(|e| e.into_inner());
            s.busy_retries += busy_retries;
            match &result {
                Ok(replies) => {
                    s.commits += 1;
                    s.transactions += replies.len() as u64;
                    s.rollbacks += replies
                        .iter()
                        .filter(|r| !matches!(r, Ok(a) if a.status == 200))
                        .count() as u64;
                    s.batch_sizes[replies.len()] += 1;
                }
                Err(_) => {
                    s.failed_batches += 1;
                    s.failed_transactions += batch.len() as u64;
                }
            }
        }
        // Answers only now, after COMMIT returned.
        match result {
            Ok(replies) => {
                for (job, reply) in batch.drain(..).zip(replies) {
                    let _ = job.reply.send(reply);
                }
            }
            Err(e) => {
                let message = format!(
                    "the batch of {} transaction(s) was not committed: {e:#}",
                    batch.len()
                );
                for job in batch.drain(..) {
                    let _ = job.reply.send(Err(message.clone()));
                }
            }
        }
    }
    // Queue closed: the connection closes here.
}

/// One BEGIN IMMEDIATE .. COMMIT around every job of `batch`, each in SAVEPOINT t. `Err`: the
/// batch was rolled back as a whole.
fn run_batch(conn: &Connection, batch: &[Job], busy_retries: &mut u64) -> Result<Vec<Reply>> {
    let mut attempt = 1;
    loop {
        match step(conn, "BEGIN IMMEDIATE") {
            Ok(()) => break,
            Err(e) if attempt < ATTEMPTS && is_busy(&e) => {
                *busy_retries += 1;
                std::thread::sleep(backoff(attempt));
                attempt += 1;
            }
            Err(e) => return Err(e.context("BEGIN IMMEDIATE")),
        }
    }
    let result = savepoints(conn, batch).and_then(|replies| {
        step(conn, "COMMIT").context("COMMIT")?;
        Ok(replies)
    });
    if result.is_err() {
        abandon(conn);
    }
    result
}

fn savepoints(conn: &Connection, batch: &[Job]) -> Result<Vec<Reply>> {
    let mut replies = Vec::with_capacity(batch.len());
    for job in batch {
        step(conn, "SAVEPOINT t").context("SAVEPOINT")?;
        match txn::run(conn, &job.txn, job.now) {
            Ok(answer) if answer.status == 200 => {
                step(conn, "RELEASE t").context("RELEASE")?;
                replies.push(Ok(answer));
            }
            outcome => {
                if conn.is_autocommit() {
                    // SQLite rolled the whole transaction back (I/O error, out of memory).
                    let e = outcome.err().unwrap_or_else(|| anyhow!("transaction lost"));
                    return Err(e.context("the batch's transaction was rolled back by SQLite"));
                }
                step(conn, "ROLLBACK TO t").context("ROLLBACK TO")?;
                step(conn, "RELEASE t").context("RELEASE")?;
                replies.push(outcome.map_err(|e| format!("{e:#}")));
            }
        }
    }
    Ok(replies)
}
