//! `pure-bench tpcc`: the timed TPC-C run. It loads the population into one engine, drives it
//! with closed-loop terminals for a warm-up and a measured window, samples the processes and
//! the device at the window's edges, checks every consistency condition on the tables the run
//! left, and reports (`report`), plots (`super::plot`) and logs what it measured.
//!
//! The driver (`drive`) is the same for every engine (`engine`): what differs is only what a
//! terminal's call does, and whether the terminals share an event loop (over HTTP) or have a
//! thread each (in-process, where the call runs on it). On this 2-core machine the driver
//! competes with the engine for the cores; its own CPU is therefore measured and reported apart.

pub mod drive;
pub mod engine;
pub mod report;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::check;
use super::input::Terminal;
use super::pure;
use crate::harness::device::DeviceCounter;
use crate::harness::measure::{flush_file_system, weighted_median};
use crate::harness::sqlite::{Settings, SqliteOptions};
use crate::harness::{progress, serve, usage};
use drive::{Clock, Driven, Schedule};
pub use engine::Kind as EngineKind;
use engine::{Counters, Engine};
use report::Figures;

#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// The engine: `pure` (pure-serve over HTTP and JSON), `pure-inprocess` (the runtime in this
    /// process: owner, group commit and snapshots, without HTTP), `sqlite` (the SQLite twin, a
    /// commit per transaction on --threads connections), `sqlite-grouped` (one writer, a COMMIT
    /// per batch of queued transactions).
    #[arg(long, value_enum, default_value = "pure")]
    pub engine: EngineKind,
    /// Warehouses of the population.
    #[arg(long, default_value_t = 1)]
    pub warehouses: i64,
    /// Closed-loop terminals, a thread each: terminal i has home warehouse i mod W + 1 and
    /// Stock-Level district (i / W) mod 10 + 1 [default: 16; for `sqlite`, --threads].
    #[arg(long)]
    pub terminals: Option<usize>,
    /// Connections of the `sqlite` engine. More terminals than connections share them, and a
    /// terminal's wait for a free one (not in arrival order) is part of its latency. Ignored by
    /// the other engines.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    #[command(flatten)]
    pub sqlite: SqliteOptions,
    /// Seconds of the measured window.
    #[arg(long, default_value_t = 20)]
    pub seconds: u64,
    /// Seconds of warm-up before it (driven like the window, not counted).
    #[arg(long, default_value_t = 5)]
    pub warmup: u64,
    /// Seed of the population and of every terminal's stream.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Working directory, on the device to measure (created; must be empty): the population,
    /// the engine's data (DIR/pure or DIR/sqlite.db). Removed at the end unless --keep.
    #[arg(long, required_unless_present = "url")]
    pub dir: Option<PathBuf>,
    /// Keep DIR (the engine's data, loaded and run) after the run.
    #[arg(long)]
    pub keep: bool,
    /// Drive the pure-serve already at this address (e.g. http://127.0.0.1:8080), loaded with
    /// the same --warehouses and --seed, instead of loading and starting one. Its CPU, memory
    /// and tables are not reachable: those figures are null and the consistency check is not
    /// run.
    #[arg(long, conflicts_with = "dir")]
    pub url: Option<String>,
    /// The TPC-C app directory.
    #[arg(long, default_value = "apps/tpcc")]
    pub app: PathBuf,
    /// The specification's keying time before and think time after each transaction (clause
    /// 5.2.5): about one transaction per terminal every 20 s.
    #[arg(long, conflicts_with = "rate")]
    pub think: bool,
    /// An open loop: the terminals together start N transactions a second at fixed intervals,
    /// whatever the engine takes, and each latency counts from the transaction's intended
    /// start (no coordinated omission). The report also gives how late the driver itself began
    /// transactions. Without it the terminals run a closed loop, as fast as answers come.
    #[arg(long, value_name = "N")]
    pub rate: Option<f64>,
    /// Write the run's figures as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write one line per measured transaction: start time (Unix seconds.microseconds),
    /// terminal, type, latency in µs, outcome (C committed, R rolled back, E error), HTTP status.
    #[arg(long, value_name = "FILE")]
    pub latency_log: Option<PathBuf>,
    /// Draw the latency distribution per type and the throughput per second as an SVG.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<()> {
    let figures = measure_run(&args)?;
    print!("{}", report::text(&figures));
    if figures.consistency_ok == Some(false) {
        bail!(
            "{}: {} consistency condition(s) failed after the run:\n  {}",
            figures.engine,
            figures.consistency_failures.len(),
            figures.consistency_failures.join("\n  ")
        );
    }
    if figures.errors_total > 0 {
        bail!(
            "{}: {} transaction(s) failed during the run (warm-up included); the first:\n  {}",
            figures.engine,
            figures.errors_total,
            figures.first_errors.join("\n  ")
        );
    }
    Ok(())
}

/// Set by SIGINT and SIGTERM: the run stops, cleans up and fails.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn interrupted(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

fn catch_interrupts() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, interrupted as *const () as libc::sighandler_t);
        libc::signal(
            libc::SIGTERM,
            interrupted as *const () as libc::sighandler_t,
        );
    }
}

/// One run, start to end: its figures (also written to --json, --latency-log, --plot). The
/// figures come back even when the consistency check failed (`consistency_ok`) or
/// transactions failed (`errors_total`): the caller decides.
pub fn measure_run(args: &Args) -> Result<Figures> {
    let terminals = args.terminals.unwrap_or(match args.engine {
        EngineKind::Sqlite => args.threads,
        _ => 16,
    });
    if terminals == 0 || args.threads == 0 || args.warehouses < 1 || args.seconds == 0 {
        bail!("--terminals, --threads, --warehouses and --seconds must be at least 1");
    }
    if let Some(rate) = args.rate {
        if !(rate.is_finite() && rate > 0.0 && rate <= 10_000_000.0) {
            bail!("--rate must be a number of transactions a second above 0, at most 10,000,000, not {rate}");
        }
        // Each terminal starts one every terminals / rate seconds (`Pacing::open`): past a day
        // no run would start any, and far past it the interval overflows a `Duration`.
        if terminals as f64 / rate > 86_400.0 {
            bail!("--rate {rate} gives each of {terminals} terminals one transaction every {:.0} s: at least {} a second, please", terminals as f64 / rate, terminals as f64 / 86_400.0);
        }
    }
    if args.url.is_some() && (args.engine != EngineKind::Pure || args.keep) {
        bail!("--url drives a pure-serve someone else started: it goes with --engine pure, without --keep");
    }
    if args.think && args.warmup < 30 {
        eprintln!(
            "tpcc: with --think a terminal runs about one transaction every 20 s (New-Order's \
             keying time alone is 18 s): give --warmup and --seconds of minutes"
        );
    }
    // Only the Pure engines run the app; the SQLite twin is Rust.
    let app = if args.engine.is_pure() && args.url.is_none() {
        args.app
            .canonicalize()
            .with_context(|| format!("the app directory {}", args.app.display()))?
    } else {
        args.app.clone()
    };
    // Outputs that cannot be written fail now, not after the run.
    for path in [&args.json, &args.latency_log, &args.plot]
        .into_iter()
        .flatten()
    {
        std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?;
    }
    let settings = args.sqlite.settings();
    let mut workdir = match &args.dir {
        Some(dir) => Some(Workdir::create(dir, args.keep)?),
        None => None,
    };
    catch_interrupts();
    eprintln!(
        "tpcc: {} W={} terminals={} seed={}",
        args.engine.name(),
        args.warehouses,
        terminals,
        args.seed
    );
    let engine = start(args, terminals, &app, &settings, workdir.as_ref())?;
    let device = workdir
        .as_ref()
        .and_then(|w| DeviceCounter::for_path(&w.path));
    engine.counters().context("read the engine's counters")?;

    let schedule = Schedule {
        warmup: Duration::from_secs(args.warmup),
        seconds: Duration::from_secs(args.seconds),
    };
    let clock = Arc::new(Clock::new(schedule));
    let keep_samples = args.latency_log.is_some();
    let pacing = |i: usize| match (args.rate, args.think) {
        (Some(rate), _) => drive::Pacing::open(rate, i, terminals),
        (None, true) => drive::Pacing::Think(args.seed),
        (None, false) => drive::Pacing::Closed,
    };
    let terminal_of = |i: usize| Terminal::new(args.seed, i as u64, args.warehouses);
    let (driven, window) = std::thread::scope(|scope| -> Result<(Vec<Driven>, Result<Window>)> {
        let mut handles = Vec::new();
        if let Some(address) = engine.http_address() {
            // Over HTTP, every terminal is a task of one event loop on one thread: a thread per
            // terminal sleeps and wakes on every answer, on the cores the server needs.
            let tasks: Vec<_> = (0..terminals)
                .map(|i| {
                    drive::terminal_http(
                        address,
                        clock.clone(),
                        terminal_of(i),
                        i as u32,
                        pacing(i),
                        keep_samples,
                    )
                })
                .collect();
            let spawned = std::thread::Builder::new()
                .name("terminals".into())
                .spawn_scoped(scope, move || -> Result<Vec<Driven>> {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_io()
                        .enable_time()
                        .build()?;
                    runtime.block_on(async {
                        let mut set = tokio::task::JoinSet::new();
                        for task in tasks {
                            set.spawn(task);
                        }
                        let mut driven = Vec::new();
                        while let Some(result) = set.join_next().await {
                            driven.push(result.map_err(|_| anyhow!("a terminal panicked"))??);
                        }
                        Ok(driven)
                    })
                });
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(e) => return Err(e).context("start the terminals' thread"),
            }
        } else {
            for i in 0..terminals {
                let (engine, clock) = (&*engine, &*clock);
                let (terminal, pacing) = (terminal_of(i), pacing(i));
                let spawned = std::thread::Builder::new()
                    .name(format!("terminal-{i}"))
                    // Writes may run on the calling thread (the owner's role): give it the
                    // owner's stack, so no handler call needs a fresh one.
                    .stack_size(16 << 20)
                    .spawn_scoped(scope, move || {
                        drive::terminal(engine, clock, terminal, i as u32, pacing, keep_samples)
                            .map(|driven| vec![driven])
                    });
                match spawned {
                    Ok(handle) => handles.push(handle),
                    Err(e) => {
                        clock.stop.store(true, Ordering::Relaxed);
                        return Err(e).context("start a terminal thread");
                    }
                }
            }
        }
        let window = watch(&clock, &*engine, workdir.as_ref(), device.as_ref());
        clock.stop.store(true, Ordering::Relaxed);
        let mut driven = Vec::new();
        for h in handles {
            driven.extend(h.join().map_err(|_| anyhow!("a terminal panicked"))??);
        }
        Ok((driven, window))
    })?;
    let window = window?;
    let driven = Driven::merge(driven)?;
    if driven.transactions() == 0 {
        bail!(
            "no transaction completed in the {} s window{}",
            args.seconds,
            if args.think {
                " (with --think, make it minutes long)"
            } else {
                ""
            }
        );
    }

    eprintln!("checking the consistency conditions...");
    let scratch = workdir
        .as_ref()
        .map(|w| w.path.clone())
        .unwrap_or_else(std::env::temp_dir);
    let tables = engine.finish(&scratch)?;
    let (consistency_ok, consistency_failures) = match tables {
        None => (None, Vec::new()),
        Some(db) => {
            let failures = check::check(&db, Some(&driven.tallies));
            let list: Vec<String> = failures.iter().map(|f| f.to_string()).collect();
            (Some(list.is_empty()), list)
        }
    };
    if consistency_ok == Some(false) {
        if let Some(w) = &mut workdir {
            // The tables are the evidence.
            w.keep = true;
        }
    }

    let figures = figures(
        args,
        terminals,
        &settings,
        &driven,
        &window,
        (consistency_ok, consistency_failures),
    );
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&figures)?;
        std::fs::write(path, text + "\n").with_context(|| format!("write {}", path.display()))?;
    }
    if let Some(path) = &args.latency_log {
        report::write_latency_log(path, clock.started_unix_us, &driven.samples)?;
    }
    if let Some(path) = &args.plot {
        let latencies: Vec<super::plot::Latencies> = super::input::Kind::ALL
            .iter()
            .filter_map(|k| {
                driven.types.get(k).map(|f| super::plot::Latencies {
                    name: k.name(),
                    histogram: &f.latency_us,
                })
            })
            .collect();
        let title = format!(
            "{}, W={}, {} terminals, {} s: {:.0} transactions/s",
            figures.engine, figures.warehouses, figures.terminals, args.seconds, figures.tx_per_s
        );
        super::plot::write(path, &title, &latencies, &driven.per_second)?;
    }
    drop(workdir);
    Ok(figures)
}

/// The working directory: created here, removed when dropped (at the end, or on an error)
/// unless kept.
struct Workdir {
    path: PathBuf,
    keep: bool,
}

impl Workdir {
    fn create(dir: &Path, keep: bool) -> Result<Workdir> {
        let entries = match std::fs::read_dir(dir) {
            Ok(mut entries) => entries.next().is_some(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(e).with_context(|| format!("--dir {}", dir.display())),
        };
        if entries {
            bail!("{} is not empty: give a new directory", dir.display());
        }
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        Ok(Workdir {
            path: dir.canonicalize()?,
            keep,
        })
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        if self.keep {
            eprintln!("kept {}", self.path.display());
        } else if let Err(e) = std::fs::remove_dir_all(&self.path) {
            eprintln!("could not remove {}: {e}", self.path.display());
        }
    }
}

/// Loads the population into the engine's files and starts it.
fn start(
    args: &Args,
    terminals: usize,
    app: &Path,
    settings: &Settings,
    workdir: Option<&Workdir>,
) -> Result<Box<dyn Engine>> {
    let Some(workdir) = workdir else {
        let url = args.url.as_deref().expect("clap: --dir or --url");
        return Ok(Box::new(engine::PureHttp::external(url)?));
    };
    let dir = &workdir.path;
    if args.engine.is_pure() {
        let rows = dir.join("population");
        let bar = progress::counter("population rows");
        bar.set_length(super::population::load_counts(args.warehouses).iter().sum());
        let files = pure::write_population(&rows, args.seed, args.warehouses, &bar)?;
        bar.finish_and_clear();
        let data = dir.join("pure");
        let paths: Vec<PathBuf> = files.iter().map(|(p, _)| p.clone()).collect();
        serve::import(app, &data, &paths)?;
        std::fs::remove_dir_all(&rows).with_context(|| format!("remove {}", rows.display()))?;
        // A clean start: the import's writes are on the device before the run measures it.
        flush_file_system(dir)?;
        return Ok(match args.engine {
            EngineKind::Pure => Box::new(engine::PureHttp::start(app, &data)?),
            _ => Box::new(engine::PureInprocess::open(app, &data)?),
        });
    }
    // The loader runs in a process of its own, so that its memory is not this one's.
    let file = dir.join("sqlite.db");
    let exe = std::env::current_exe()?;
    let status = std::process::Command::new(&exe)
        .arg("tpcc-load")
        .arg(format!("--warehouses={}", args.warehouses))
        .arg(format!("--seed={}", args.seed))
        .arg("--sqlite")
        .arg(&file)
        .args(settings.to_args())
        .stdout(std::process::Stdio::null())
        .status()
        .with_context(|| format!("start {}", exe.display()))?;
    if !status.success() {
        bail!("loading SQLite failed: {status}");
    }
    flush_file_system(dir)?;
    Ok(match args.engine {
        EngineKind::Sqlite => Box::new(engine::SqlitePool::open(&file, settings, args.threads)?),
        _ => Box::new(engine::SqliteGrouped::start(&file, settings, terminals)?),
    })
}

/// What was sampled at one edge of the window.
#[derive(Clone, Copy, Debug)]
struct Edge {
    at: Instant,
    process_cpu: Duration,
    server_cpu: Option<f64>,
    device_bytes: Option<u64>,
    counters: Counters,
}

/// The window's two edges, and what was read during it.
struct Window {
    start: Edge,
    end: Edge,
    rss: Option<(u64, u64)>,
    /// The block device the working directory is on.
    device: Option<String>,
    /// Per second of the window: bytes the device took and transactions that ended.
    device_slices: Vec<(u64, u64)>,
}

/// Shows progress until the window ends, sampling at its edges and the device every second;
/// stops early, with the reason, when the engine dies or the run is interrupted.
fn watch(
    clock: &Clock,
    engine: &dyn Engine,
    workdir: Option<&Workdir>,
    device: Option<&DeviceCounter>,
) -> Result<Window> {
    let bar = indicatif::ProgressBar::new_spinner();
    bar.enable_steady_tick(Duration::from_millis(200));
    let flush = || -> Result<()> {
        match workdir {
            Some(w) => flush_file_system(&w.path),
            None => Ok(()),
        }
    };
    let sample = || -> Result<Edge> {
        Ok(Edge {
            at: Instant::now(),
            process_cpu: usage::process_cpu(),
            server_cpu: usage::cpu_seconds(engine.server_pid()),
            device_bytes: None,
            counters: engine.counters()?,
        })
    };
    let mut slices = Vec::new();
    let mut progress = |phase: &str,
                        until: Instant,
                        total: Duration,
                        last: &mut (Instant, u64),
                        slicing: bool|
     -> Result<()> {
        let mut slice = (
            Instant::now(),
            device.and_then(|d| d.bytes_written()),
            clock.completed.load(Ordering::Relaxed),
        );
        while Instant::now() < until {
            std::thread::sleep(Duration::from_millis(250).min(until - Instant::now()));
            if INTERRUPTED.load(Ordering::Relaxed) {
                bail!("interrupted");
            }
            engine.alive()?;
            let done = clock.completed.load(Ordering::Relaxed);
            let now = Instant::now();
            let rate = (done - last.1) as f64 / (now - last.0).as_secs_f64().max(1e-3);
            if now - last.0 >= Duration::from_secs(1) {
                *last = (now, done);
            }
            if slicing && now - slice.0 >= Duration::from_secs(1) {
                let bytes = device.and_then(|d| d.bytes_written());
                if let (Some(b), Some(a)) = (bytes, slice.1) {
                    slices.push((b - a, done - slice.2));
                }
                slice = (now, bytes, done);
            }
            let left = until.saturating_duration_since(now);
            bar.set_message(format!(
                "{phase} {:.0}/{:.0} s: {done} transactions, {rate:.0}/s",
                (total - left.min(total)).as_secs_f64(),
                total.as_secs_f64()
            ));
        }
        Ok(())
    };
    let mut last = (Instant::now(), 0);
    let result = (|| -> Result<Window> {
        progress(
            "warm-up",
            clock.window_start(),
            clock.schedule.warmup,
            &mut last,
            false,
        )?;
        // What came before the window must not be counted in it.
        flush()?;
        let mut start = sample()?;
        start.device_bytes = device.and_then(|d| d.bytes_written());
        progress(
            "measuring",
            clock.window_end(),
            clock.schedule.seconds,
            &mut last,
            true,
        )?;
        let rss = match engine.server_pid() {
            Some(pid) => usage::resident_bytes(pid),
            None if engine.kind() == EngineKind::Pure => None,
            None => usage::resident_bytes(std::process::id()),
        };
        let mut end = sample()?;
        clock.stop.store(true, Ordering::Relaxed);
        // What the window wrote must be on the device before the counter is read.
        flush()?;
        end.device_bytes = device.and_then(|d| d.bytes_written());
        Ok(Window {
            start,
            end,
            rss,
            device: device.map(|d| d.device.clone()),
            device_slices: Vec::new(),
        })
    })();
    bar.finish_and_clear();
    let mut window = result?;
    window.device_slices = slices;
    Ok(window)
}

fn figures(
    args: &Args,
    terminals: usize,
    settings: &Settings,
    driven: &Driven,
    window: &Window,
    (consistency_ok, consistency_failures): (Option<bool>, Vec<String>),
) -> Figures {
    let (a, b) = (&window.start, &window.end);
    let elapsed = (b.at - a.at).as_secs_f64();
    let n = driven.transactions();
    let per_tx = |seconds: f64| seconds * 1e6 / n as f64;
    let process_cpu = (b.process_cpu - a.process_cpu).as_secs_f64();
    let driver_cpu = driven.driver_cpu.as_secs_f64();
    let types = report::types(driven);
    let new_orders = &types["new_order"];
    let minutes = args.seconds as f64 / 60.0;
    let delta = |f: fn(&Counters) -> Option<u64>| Some(f(&b.counters)? - f(&a.counters)?);
    let commits = delta(|c| c.commits);
    let commits_here = delta(|c| c.commits_here);
    let committed = delta(|c| c.committed);
    let syncs = delta(|c| c.syncs);
    let http = args.engine == EngineKind::Pure;
    let sqlite_engine = !args.engine.is_pure();
    let server_cpu = b.server_cpu.zip(a.server_cpu).map(|(b, a)| b - a);
    let slices: Vec<(f64, u64)> = window
        .device_slices
        .iter()
        .filter(|(_, t)| *t > 0)
        .map(|&(bytes, t)| (bytes as f64 / t as f64, t))
        .collect();
    Figures {
        engine: args.engine.name(),
        warehouses: args.warehouses,
        terminals,
        threads: (args.engine == EngineKind::Sqlite).then_some(args.threads),
        seconds: args.seconds as f64,
        warmup_seconds: args.warmup as f64,
        seed: args.seed,
        think: args.think,
        offered_tx_per_s: args.rate,
        driver_late_ms: args.rate.map(|_| report::Lateness::of(&driven.late_us)),
        dir: args
            .dir
            .as_ref()
            .map(|d| d.display().to_string())
            .or_else(|| args.url.clone())
            .unwrap_or_default(),
        device: window.device.clone(),
        sqlite_settings: sqlite_engine.then(|| settings.describe()),
        transactions: n,
        tx_per_s: n as f64 / args.seconds as f64,
        new_orders_per_min: new_orders.count as f64 / minutes,
        new_orders_committed_per_min: (new_orders.count - new_orders.rollbacks) as f64 / minutes,
        cpu_us_per_tx: if http {
            server_cpu.map(per_tx)
        } else {
            Some(per_tx(process_cpu))
        },
        engine_cpu_us_per_tx: if http {
            server_cpu.map(per_tx)
        } else {
            Some(per_tx((process_cpu - driver_cpu).max(0.0)))
        },
        driver_cpu_us_per_tx: if http {
            per_tx(process_cpu)
        } else {
            per_tx(driver_cpu)
        },
        device_bytes_per_tx: b
            .device_bytes
            .zip(a.device_bytes)
            .map(|(b, a)| (b - a) as f64 / n as f64),
        device_bytes_per_tx_median_second: weighted_median(&slices),
        rss_bytes: window.rss.map(|r| r.0),
        rss_peak_bytes: window.rss.map(|r| r.1),
        state_bytes: b.counters.state_bytes,
        owner_core_share: b
            .counters
            .owner_busy_seconds
            .zip(a.counters.owner_busy_seconds)
            .map(|(b, a)| (b - a) / elapsed),
        commits_per_s: commits.map(|c| c as f64 / elapsed),
        tx_per_commit: commits
            .zip(committed)
            .filter(|(c, _)| *c > 0)
            .map(|(c, t)| t as f64 / c as f64),
        syncs_per_s: syncs.map(|s| s as f64 / elapsed),
        commits_here_share: commits_here
            .zip(commits)
            .filter(|(_, c)| *c > 0)
            .map(|(h, c)| h as f64 / c as f64),
        checkpoints: delta(|c| c.checkpoints),
        handler_fallbacks: delta(|c| c.handler_fallbacks),
        unfinished_at_end: driven.unfinished,
        unfinished_oldest_ms: driven.unfinished_oldest.as_secs_f64() * 1e3,
        consistency_ok,
        consistency_failures,
        errors: driven.errors(),
        errors_total: driven.errors_total,
        first_errors: driven.first_errors.clone(),
        types,
    }
}
