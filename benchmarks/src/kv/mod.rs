//! `pure-bench kv`: LevelDB's `db_bench` for the kv app (apps/kv), side by side with SQLite's
//! journal modes and page sizes.
//!
//! The benchmarks run in the order given on one database, as db_bench runs them: the fill
//! benchmarks start on an empty one, the others use what the ones before left. Every engine gets
//! the same operations: the same keys (`--key-size` digits, zero-padded), values (letters and
//! digits), batches and pages of a range. The threads split a benchmark's operations between
//! them; `micros/op` is the wall time over the operations (so it falls as threads add
//! throughput), and the latency percentiles are those of one call each (one write, one read, one
//! batch, one page of a range).
//!
//! It owns the benchmark definitions, the driver and the report; the engines are in `engine`,
//! the report's text and JSON in `report`, the comparison of settings in `sweep`.

mod engine;
mod report;
pub mod sweep;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use hdrhistogram::Histogram;
use pure_store::SyncMode;

use crate::harness::device::DeviceCounter;
use crate::harness::sqlite::{JournalMode, Settings, Synchronous};
use crate::harness::{progress, usage};
use engine::{Client, PureHttp, PureInprocess, Sqlite, Store, PAGE};
pub use report::Report;

/// Run db_bench-style benchmarks on the kv app (Pure, over HTTP or in-process) or on SQLite, and
/// print one line per benchmark in micros/op, as db_bench does.
///
/// Durability: for SQLite, each write is a commit (a batch is one) under --synchronous and
/// --journal-mode; for Pure, each write is answered after its group's fdatasync under
/// `--sync always` and without any sync under `--sync none`.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// Comma-separated benchmarks, run in this order on one database: fillseq, fillrandom,
    /// fillsync (fillrandom with --num/1000 entries), overwrite, readrandom, readseq,
    /// readreverse, deleterandom, fillbatch (--batch entries per transaction, sequential keys),
    /// fill100K (--num/1000 entries of 64 KiB: the kv app's largest value, not db_bench's
    /// 100,000 bytes). The fill benchmarks start on an empty database.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fillseq,fillsync,fillrandom,overwrite,readrandom,readseq,readreverse,deleterandom,fillbatch,fill100K"
    )]
    pub benchmarks: Vec<Benchmark>,

    /// The database: pure (the kv app) or sqlite.
    #[arg(long, value_enum, default_value_t = EngineKind::Pure)]
    pub engine: EngineKind,

    /// Pure: run the app in this process through the runtime, without HTTP (the requests the
    /// server would build, parsed and checked the same way).
    #[arg(long)]
    pub in_process: bool,

    /// Entries in the database (the fills write this many; reads and writes pick keys below it).
    #[arg(long, default_value_t = 100_000)]
    pub num: u64,

    /// Read operations of readrandom, and entries read by readseq and readreverse (default:
    /// --num).
    #[arg(long)]
    pub reads: Option<u64>,

    /// Write operations of overwrite and deleterandom (default: --num), as db_bench's --writes:
    /// fewer for durable writes on a slow device.
    #[arg(long)]
    pub writes: Option<u64>,

    /// Bytes per key: the key's number in decimal, zero-padded (1 to 256, enough digits for
    /// --num).
    #[arg(long, default_value_t = 16)]
    pub key_size: usize,

    /// Bytes per value (at most 65,536: the kv app's limit).
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,

    /// Entries per transaction in fillbatch.
    #[arg(long, default_value_t = 1000)]
    pub batch: usize,

    /// Threads doing a benchmark's operations at once, each with its own connection; they split
    /// the operations between them.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,

    /// Use the database already in --dir; the fill benchmarks are then skipped. Give a --seed
    /// other than the run that wrote it: the same seed writes the same values to the same keys
    /// again, and SQLite leaves a row whose new value equals the stored one unwritten (no WAL
    /// frame, no sync), so overwrite would measure mostly nothing on SQLite (66 against 170 µs
    /// per write at 16 threads, research note 015).
    #[arg(long)]
    pub use_existing_db: bool,

    /// Print latency percentiles and a histogram for each benchmark.
    #[arg(long)]
    pub histogram: bool,

    /// Directory for the database, on the file system under test (emptied first unless
    /// --use-existing-db).
    #[arg(long, default_value = "kv-bench")]
    pub dir: PathBuf,

    /// Also write the figures as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Seed of the random keys: the same seed, the same keys for every engine.
    #[arg(long, default_value_t = 301)]
    pub seed: u64,

    /// Pure: always (each write answered after fdatasync) or none (no sync: not durable).
    #[arg(long, value_enum, default_value_t = Sync::Always)]
    pub sync: Sync,

    /// Pure: the app directory.
    #[arg(long, default_value = "apps/kv")]
    pub app: PathBuf,

    /// Pure over HTTP: the server's HTTP threads (its --threads; default its own).
    #[arg(long)]
    pub server_threads: Option<usize>,

    /// SQLite: PRAGMA journal_mode.
    #[arg(long, value_enum, ignore_case = true, default_value_t = JournalMode::Wal)]
    pub journal_mode: JournalMode,

    /// SQLite: PRAGMA synchronous.
    #[arg(long, value_enum, ignore_case = true, default_value_t = Synchronous::Full)]
    pub synchronous: Synchronous,

    /// SQLite: bytes per page (512 to 65,536, a power of two).
    #[arg(long, default_value_t = 4096)]
    pub page_size: u32,

    /// SQLite: page cache per connection in KiB (PRAGMA cache_size = -N; SQLite's default is
    /// 2,000).
    #[arg(long, default_value_t = 2000)]
    pub cache_size: u64,

    /// No progress bar (for scripts and the sweep).
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EngineKind {
    Pure,
    Sqlite,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Sync {
    Always,
    None,
}

/// db_bench's benchmarks, by their names there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Benchmark {
    #[value(name = "fillseq")]
    FillSeq,
    #[value(name = "fillrandom")]
    FillRandom,
    #[value(name = "fillsync")]
    FillSync,
    #[value(name = "overwrite")]
    Overwrite,
    #[value(name = "readrandom")]
    ReadRandom,
    #[value(name = "readseq")]
    ReadSeq,
    #[value(name = "readreverse")]
    ReadReverse,
    #[value(name = "deleterandom")]
    DeleteRandom,
    #[value(name = "fillbatch")]
    FillBatch,
    #[value(name = "fill100K")]
    Fill100K,
}

/// Untimed reads each thread makes before a benchmark starts.
const WARM_UP_READS: u64 = 16;

/// fill100K's value size: the kv app's largest value.
const LARGE_VALUE: usize = 65_536;

impl Benchmark {
    pub fn name(self) -> &'static str {
        self.to_possible_value()
            .expect("every benchmark has a name")
            .get_name()
            .to_string()
            .leak()
    }

    /// The fills start on an empty database, as in db_bench.
    fn fresh(self) -> bool {
        matches!(
            self,
            Benchmark::FillSeq
                | Benchmark::FillRandom
                | Benchmark::FillSync
                | Benchmark::FillBatch
                | Benchmark::Fill100K
        )
    }

    pub fn writes(self) -> bool {
        !matches!(
            self,
            Benchmark::ReadRandom | Benchmark::ReadSeq | Benchmark::ReadReverse
        )
    }
}

/// Keys and values: key `i` is `i` in decimal, zero-padded to the key size; values are slices
/// of one buffer of random letters and digits (incompressible enough, and needing no escape in
/// JSON), at an offset that moves with each write, as db_bench's generator does.
pub struct Data {
    key_size: usize,
    buffer: String,
}

impl Data {
    fn new(key_size: usize, seed: u64) -> Data {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        let mut rng = Rng::new(seed ^ 0x5eed);
        let buffer = (0..1 << 20)
            .map(|_| ALPHABET[(rng.next() % ALPHABET.len() as u64) as usize] as char)
            .collect();
        Data { key_size, buffer }
    }

    /// `i` in decimal, zero-padded to the key size (`format!("{i:0width$}")`, which pads one
    /// character at a time, each growing the string: 270 instructions a key, charged to every
    /// engine's time).
    fn key(&self, i: u64) -> String {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut rest = i;
        loop {
            at -= 1;
            digits[at] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        let digits = &digits[at..];
        let mut key = String::with_capacity(self.key_size.max(digits.len()));
        key.extend(std::iter::repeat_n(
            '0',
            self.key_size.saturating_sub(digits.len()),
        ));
        key.push_str(std::str::from_utf8(digits).expect("ASCII digits"));
        key
    }

    fn value(&self, i: u64, size: usize) -> &str {
        let room = self.buffer.len() - size;
        let at = (i.wrapping_mul(7919) % (room as u64 + 1)) as usize;
        &self.buffer[at..at + size]
    }
}

/// xorshift64*: the random keys, the same for every engine.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// What one benchmark did.
pub struct Outcome {
    pub benchmark: Benchmark,
    /// Operations: entries written, read or deleted (a batch counts its entries, a page of a
    /// range its entries).
    pub ops: u64,
    /// Calls: one per write, read, batch or page.
    pub latency: Histogram<u64>,
    pub seconds: f64,
    /// Key and value bytes written or read.
    pub bytes: u64,
    /// readrandom: keys found; deleterandom: keys that were there.
    pub found: Option<u64>,
    /// Bytes written to the device meanwhile, when the directory's device has a counter.
    pub device_bytes: Option<u64>,
    /// Skipped (the fills with --use-existing-db).
    pub skipped: bool,
    /// CPU seconds (user and system) of this process meanwhile: the engine's and the clients'
    /// in-process, the clients' alone over HTTP.
    pub client_cpu: f64,
    /// CPU seconds of the server process meanwhile (over HTTP).
    pub server_cpu: Option<f64>,
}

/// What one thread did.
struct Done {
    ops: u64,
    bytes: u64,
    found: u64,
    latency: Histogram<u64>,
}

/// Latencies are recorded in nanoseconds (an in-process read is well under a microsecond's
/// resolution would show), up to a minute.
fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds")
}

pub fn run(args: Args) -> Result<()> {
    let report = measure(&args)?;
    print!("{}", report.text(args.histogram));
    if let Some(path) = &args.json {
        report.write_json(path)?;
    }
    Ok(())
}

/// Runs the benchmarks of `args` and returns their figures.
pub fn measure(args: &Args) -> Result<Report> {
    check(args)?;
    std::fs::create_dir_all(&args.dir).with_context(|| format!("create {}", args.dir.display()))?;
    let mut store = open(args)?;
    let data = Data::new(args.key_size, args.seed);
    let device = DeviceCounter::for_path(&args.dir);
    let mut outcomes = Vec::new();
    let mut first = true;
    for (index, &benchmark) in args.benchmarks.iter().enumerate() {
        if benchmark.fresh() {
            if args.use_existing_db {
                outcomes.push(Outcome::skipped(benchmark));
                continue;
            }
            // The store was opened empty: the first fill needs no second start.
            if !first {
                store.fresh()?;
            }
        }
        first = false;
        let before = device.as_ref().and_then(DeviceCounter::bytes_written);
        let mut outcome = drive(&*store, benchmark, index as u64, args, &data)
            .with_context(|| format!("benchmark {}", benchmark.name()))?;
        outcome.device_bytes = before
            .zip(device.as_ref().and_then(DeviceCounter::bytes_written))
            .map(|(a, b)| b.saturating_sub(a));
        outcomes.push(outcome);
    }
    store.close()?;
    // An existing SQLite database keeps the page size it was made with, whatever --page-size
    // says: the report gives the one the benchmarks ran on. (A new one has --page-size.)
    let mut reported = args.clone();
    if args.engine == EngineKind::Sqlite && args.use_existing_db {
        reported.page_size = engine::sqlite_page_size(&args.dir)?;
    }
    Ok(Report::new(&reported, device, outcomes))
}

fn check(args: &Args) -> Result<()> {
    if args.num == 0 {
        bail!("--num must be at least 1");
    }
    let digits = (args.num - 1).to_string().len();
    if args.key_size < digits || args.key_size > 256 {
        bail!(
            "--key-size must be {digits} to 256 bytes: enough digits for key {} (--num {}), and \
             at most the kv app's longest key",
            args.num - 1,
            args.num
        );
    }
    if args.value_size > LARGE_VALUE {
        bail!("--value-size must be at most {LARGE_VALUE} bytes, the kv app's largest value");
    }
    if args.threads == 0 || args.batch == 0 {
        bail!("--threads and --batch must be at least 1");
    }
    if args.benchmarks.is_empty() {
        bail!("--benchmarks names no benchmark");
    }
    if args.engine == EngineKind::Sqlite && args.in_process {
        bail!("--in-process is for --engine pure (SQLite always runs in this process)");
    }
    if !args.page_size.is_power_of_two() || !(512..=65_536).contains(&args.page_size) {
        bail!(
            "--page-size must be a power of two from 512 to 65536, not {}",
            args.page_size
        );
    }
    Ok(())
}

fn open(args: &Args) -> Result<Box<dyn Store>> {
    let existing = args.use_existing_db;
    Ok(match args.engine {
        EngineKind::Sqlite => Box::new(Sqlite::open(&args.dir, sqlite_settings(args), existing)?),
        EngineKind::Pure => {
            let data = args.dir.join("pure");
            if args.in_process {
                let sync = match args.sync {
                    Sync::Always => SyncMode::Always,
                    Sync::None => SyncMode::None,
                };
                Box::new(PureInprocess::open(&args.app, &data, sync, existing)?)
            } else {
                let mut flags = vec!["--sync".to_string(), args.sync.name().to_string()];
                if let Some(threads) = args.server_threads {
                    flags.extend(["--threads".to_string(), threads.to_string()]);
                }
                // A batch's body may be larger than the server's default limit (1 MiB, about
                // 9,000 entries of 100 bytes): raise it, so that a batch the in-process engine
                // takes is taken over HTTP too (the app's own limits still apply to both).
                let body = fillbatch_body_bytes(args);
                if body > SERVER_MAX_BODY_DEFAULT {
                    flags.extend([
                        "--max-body".to_string(),
                        body.next_multiple_of(1 << 20).to_string(),
                    ]);
                }
                Box::new(PureHttp::start(&args.app, &data, flags, existing)?)
            }
        }
    })
}

/// pure-serve's default `--max-body`.
const SERVER_MAX_BODY_DEFAULT: u64 = 1 << 20;

/// The largest body fillbatch sends: `--batch` entries of `{"key":"value"}` pairs.
fn fillbatch_body_bytes(args: &Args) -> u64 {
    let payload = args.batch * (args.key_size + args.value_size);
    engine::batch_body_bytes(args.batch, payload) as u64
}

impl Sync {
    pub fn name(self) -> &'static str {
        match self {
            Sync::Always => "always",
            Sync::None => "none",
        }
    }
}

pub fn sqlite_settings(args: &Args) -> Settings {
    Settings {
        journal_mode: args.journal_mode,
        synchronous: args.synchronous,
        page_size: args.page_size,
        cache_size_kib: args.cache_size,
        ..Settings::default_preset()
    }
}

/// The operations of a benchmark and how many there are.
struct Plan {
    ops: u64,
    /// Writes: the value size.
    value_size: usize,
}

fn plan(benchmark: Benchmark, args: &Args) -> Plan {
    let reads = args.reads.unwrap_or(args.num);
    let writes = args.writes.unwrap_or(args.num);
    let (ops, value_size) = match benchmark {
        Benchmark::FillSeq | Benchmark::FillRandom | Benchmark::FillBatch => {
            (args.num, args.value_size)
        }
        Benchmark::FillSync => ((args.num / 1000).max(1), args.value_size),
        Benchmark::Fill100K => ((args.num / 1000).max(1), LARGE_VALUE),
        Benchmark::Overwrite | Benchmark::DeleteRandom => (writes, args.value_size),
        Benchmark::ReadRandom | Benchmark::ReadSeq | Benchmark::ReadReverse => {
            (reads, args.value_size)
        }
    };
    Plan { ops, value_size }
}

/// Runs one benchmark on `args.threads` threads, thread `t` doing its share of the operations.
fn drive(
    store: &dyn Store,
    benchmark: Benchmark,
    index: u64,
    args: &Args,
    data: &Data,
) -> Result<Outcome> {
    let plan = plan(benchmark, args);
    let threads = args.threads;
    let progress = if args.quiet {
        indicatif::ProgressBar::hidden()
    } else {
        progress::counter(benchmark.name())
    };
    progress.set_length(plan.ops);
    let start = Gate::default();
    let cpu_before = (usage::process_cpu(), usage::cpu_seconds(store.server_pid()));
    let failed = AtomicBool::new(false);
    let (dones, seconds) = std::thread::scope(|scope| -> Result<(Vec<Done>, f64)> {
        let mut handles = Vec::new();
        for t in 0..threads {
            let (start, failed, progress, plan) = (&start, &failed, &progress, &plan);
            let share = share(plan.ops, threads as u64, t as u64);
            let seed = args.seed ^ (index << 32) ^ (t as u64) << 8;
            // The runtime runs a write's handler on the caller's stack: give it room.
            let handle = std::thread::Builder::new()
                .name(format!("kv-{t}"))
                .stack_size(16 << 20)
                .spawn_scoped(scope, move || {
                    // Counted as arrived even if what comes before the gate panics, so that the
                    // driver does not wait for this thread forever.
                    let arrival = start.arrival();
                    // A few reads first, untimed and changing nothing: a new thread's first
                    // calls pay for its connection's and its allocator's first pages.
                    let client = store.client().and_then(|mut client| {
                        for n in 0..WARM_UP_READS {
                            client.get(&data.key(n % args.num))?;
                        }
                        Ok(client)
                    });
                    arrival.ready_then_wait();
                    let began = Instant::now();
                    let result = client.and_then(|mut client| {
                        let mut worker = Worker {
                            client: &mut *client,
                            thread: t as u64,
                            unreported: 0,
                            data,
                            args,
                            rng: Rng::new(seed),
                            done: Done {
                                ops: 0,
                                bytes: 0,
                                found: 0,
                                latency: new_histogram(),
                            },
                            failed,
                            progress,
                        };
                        worker.run(benchmark, share, plan)?;
                        Ok((worker.done, began, Instant::now()))
                    });
                    if result.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    result
                })
                .with_context(|| {
                    format!(
                        "start benchmark thread {} of {threads} (try fewer --threads)",
                        t + 1
                    )
                });
            match handle {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    // The threads started so far must not wait for the others forever: they
                    // are let go, see the failure, and stop.
                    failed.store(true, Ordering::Relaxed);
                    start.open();
                    for handle in handles {
                        let _ = handle.join();
                    }
                    return Err(e);
                }
            }
        }
        start.wait_for(handles.len());
        start.open();
        let mut dones = Vec::new();
        let mut first_error = None;
        // The benchmark's time runs from the first thread's start to the last one's end, each
        // taken by the thread itself: this thread may be woken from the barrier after the
        // others have done a short benchmark's work.
        let mut span: Option<(Instant, Instant)> = None;
        for handle in handles {
            match handle.join().expect("a benchmark thread panicked") {
                Ok((done, began, ended)) => {
                    dones.push(done);
                    span = Some(match span {
                        Some((a, b)) => (a.min(began), b.max(ended)),
                        None => (began, ended),
                    });
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        let seconds = span.map_or(0.0, |(a, b)| (b - a).as_secs_f64());
        Ok((dones, seconds))
    })?;
    let client_cpu = (usage::process_cpu() - cpu_before.0).as_secs_f64();
    let server_cpu = cpu_before
        .1
        .zip(usage::cpu_seconds(store.server_pid()))
        .map(|(a, b)| b - a);
    progress.finish_and_clear();
    let mut latency = new_histogram();
    let (mut ops, mut bytes, mut found) = (0, 0, 0);
    for done in &dones {
        latency.add(&done.latency).expect("same bounds");
        ops += done.ops;
        bytes += done.bytes;
        found += done.found;
    }
    Ok(Outcome {
        benchmark,
        ops,
        latency,
        seconds,
        bytes,
        found: matches!(benchmark, Benchmark::ReadRandom | Benchmark::DeleteRandom)
            .then_some(found),
        device_bytes: None,
        skipped: false,
        client_cpu,
        server_cpu,
    })
}

/// Where a benchmark's threads wait until all of them are ready, so that the clock starts
/// once every connection is open and warmed up.
#[derive(Default)]
struct Gate {
    /// Threads ready, and whether they may go.
    state: Mutex<(usize, bool)>,
    changed: Condvar,
}

/// A thread's place at the gate: it counts as arrived when it says it is ready, or when it is
/// dropped without having said so (the thread failed before).
struct Arrival<'a> {
    gate: &'a Gate,
    arrived: bool,
}

impl Arrival<'_> {
    /// Says the thread is ready, then waits to be let go.
    fn ready_then_wait(mut self) {
        self.arrived = true;
        let mut state = self.gate.arrive();
        while !state.1 {
            state = self
                .gate
                .changed
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for Arrival<'_> {
    fn drop(&mut self) {
        if !self.arrived {
            drop(self.gate.arrive());
        }
    }
}

impl Gate {
    /// A thread's place at the gate, taken when it starts.
    fn arrival(&self) -> Arrival<'_> {
        Arrival {
            gate: self,
            arrived: false,
        }
    }

    fn arrive(&self) -> std::sync::MutexGuard<'_, (usize, bool)> {
        // A thread that panicked holding the lock cannot have left the count half changed.
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.0 += 1;
        self.changed.notify_all();
        state
    }

    /// The driver: waits until `threads` are ready.
    fn wait_for(&self, threads: usize) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while state.0 < threads {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The driver: lets every thread go, now and from now on.
    fn open(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        self.changed.notify_all();
    }
}

/// Thread `t`'s share of `ops`: the range of operation numbers it does.
fn share(ops: u64, threads: u64, t: u64) -> std::ops::Range<u64> {
    ops * t / threads..ops * (t + 1) / threads
}

struct Worker<'a> {
    client: &'a mut dyn Client,
    /// This thread's number, of `args.threads`.
    thread: u64,
    /// Operations not yet added to the progress bar.
    unreported: u64,
    data: &'a Data,
    args: &'a Args,
    rng: Rng,
    done: Done,
    failed: &'a AtomicBool,
    progress: &'a indicatif::ProgressBar,
}

impl Worker<'_> {
    /// Times one call of `call`, which did `ops` operations.
    fn timed<T>(&mut self, call: impl FnOnce(&mut dyn Client) -> Result<T>) -> Result<T> {
        let began = Instant::now();
        let result = call(self.client)?;
        let nanos = began.elapsed().as_nanos() as u64;
        self.done.latency.saturating_record(nanos.max(1));
        Ok(result)
    }

    fn counted(&mut self, ops: u64, bytes: usize) {
        self.done.ops += ops;
        self.done.bytes += bytes as u64;
        // In steps, so that the bar costs the threads nothing they would notice.
        self.unreported += ops;
        if self.unreported >= 256 {
            self.progress.inc(std::mem::take(&mut self.unreported));
        }
    }

    fn run(
        &mut self,
        benchmark: Benchmark,
        share: std::ops::Range<u64>,
        plan: &Plan,
    ) -> Result<()> {
        let num = self.args.num;
        match benchmark {
            Benchmark::FillSeq
            | Benchmark::FillRandom
            | Benchmark::FillSync
            | Benchmark::Overwrite
            | Benchmark::Fill100K => {
                let sequential = benchmark == Benchmark::FillSeq;
                for i in share {
                    if self.failed.load(Ordering::Relaxed) {
                        break;
                    }
                    let n = if sequential { i } else { self.rng.below(num) };
                    let key = self.data.key(n);
                    let value = self.data.value(i, plan.value_size);
                    self.timed(|c| c.put(&key, value))?;
                    self.counted(1, key.len() + value.len());
                }
            }
            Benchmark::FillBatch => {
                let mut at = share.start;
                let mut entries = Vec::with_capacity(self.args.batch);
                while at < share.end && !self.failed.load(Ordering::Relaxed) {
                    let end = (at + self.args.batch as u64).min(share.end);
                    entries.clear();
                    let mut bytes = 0;
                    for i in at..end {
                        let key = self.data.key(i);
                        let value = self.data.value(i, plan.value_size);
                        bytes += key.len() + value.len();
                        entries.push((key, value));
                    }
                    self.timed(|c| c.batch(&entries))?;
                    self.counted(end - at, bytes);
                    at = end;
                }
            }
            Benchmark::ReadRandom => {
                for _ in share {
                    if self.failed.load(Ordering::Relaxed) {
                        break;
                    }
                    let key = self.data.key(self.rng.below(num));
                    let found = self.timed(|c| c.get(&key))?;
                    self.done.found += u64::from(found.is_some());
                    self.counted(1, key.len() + found.unwrap_or(0));
                }
            }
            Benchmark::DeleteRandom => {
                for _ in share {
                    if self.failed.load(Ordering::Relaxed) {
                        break;
                    }
                    let key = self.data.key(self.rng.below(num));
                    let found = self.timed(|c| c.delete(&key))?;
                    self.done.found += u64::from(found);
                    self.counted(1, key.len());
                }
            }
            Benchmark::ReadSeq | Benchmark::ReadReverse => {
                // Each thread reads its own part of the key space, forward from its start or
                // backward from its end, until it has read its share or reached the part's
                // other end: no entry is read twice, whatever the database holds.
                let reverse = benchmark == Benchmark::ReadReverse;
                let (start, end) = part(num, self.args.threads as u64, self.thread);
                let start = start.map(|n| self.data.key(n));
                let end = end.map(|n| self.data.key(n));
                let (mut from, mut to) = (start, end);
                let mut left = share.end - share.start;
                while left > 0 && !self.failed.load(Ordering::Relaxed) {
                    let limit = (left as usize).min(PAGE);
                    let page =
                        self.timed(|c| c.range(from.as_deref(), to.as_deref(), reverse, limit))?;
                    self.counted(page.entries as u64, page.bytes);
                    left -= page.entries as u64;
                    match page.next {
                        Some(next) if page.entries > 0 => {
                            if reverse {
                                to = Some(next);
                            } else {
                                from = Some(next);
                            }
                        }
                        _ => break,
                    }
                }
            }
        }
        Ok(())
    }
}

/// Thread `t`'s part of the key space `0..num` for a scan: its first key and the first key past
/// it (`None`: the start, or the end).
fn part(num: u64, threads: u64, t: u64) -> (Option<u64>, Option<u64>) {
    let start = num * t / threads;
    let end = num * (t + 1) / threads;
    ((start > 0).then_some(start), (end < num).then_some(end))
}

impl Outcome {
    fn skipped(benchmark: Benchmark) -> Outcome {
        Outcome {
            benchmark,
            ops: 0,
            latency: new_histogram(),
            seconds: 0.0,
            bytes: 0,
            found: None,
            device_bytes: None,
            skipped: true,
            client_cpu: 0.0,
            server_cpu: None,
        }
    }
}

/// The directory a benchmark writes in, emptied: used by the sweep for each run.
pub fn empty_dir(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("empty {}", dir.display())),
    }
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::Data;

    /// Keys are `format!`'s zero-padded decimals, at every key size and number of digits,
    /// longer than the key size included.
    #[test]
    fn keys_are_zero_padded_decimals() {
        for key_size in [1, 5, 16, 20, 24] {
            let data = Data {
                key_size,
                buffer: String::new(),
            };
            for i in [0, 7, 10, 99_999, 123_456_789, u64::MAX / 3, u64::MAX] {
                assert_eq!(data.key(i), format!("{i:0key_size$}"), "{i} at {key_size}");
            }
        }
    }
}
