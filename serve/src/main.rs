//! pure-serve: serves a Pure app directory over HTTP with JSON.
//!
//! It owns the process edge: the command line, loading the app, opening its data directory,
//! HTTP (hyper on tokio), routing, JSON, the limits that protect the server, the built-in
//! health and metrics endpoints, signals and exit codes. It knows nothing of disk formats or of
//! how a handler runs: that is `pure_runtime`'s business behind `Runtime::read` and
//! `Runtime::write`.

mod answer;
mod cli;
mod client;
mod connections;
mod damage;
mod dispatch;
mod listener;
mod live;
mod log;
mod metrics;
mod origin;
mod public;
mod route;
mod server;
mod transcript;
mod transfer;
mod wire;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser as _;
use pure_lang::{Environment, Limits};
use pure_runtime::{App, Clock, Runtime, RuntimeOptions, SyncMode, World};

use crate::cli::{Command, Options, Sync};

// Rhai allocates for nearly every value; mimalloc made handlers about a quarter faster.
#[global_allocator]
static GLOBAL: pure_runtime::Allocator = pure_runtime::Allocator;

/// The process exit statuses, as `--help` documents them.
mod exit {
    pub const OK: u8 = 0;
    pub const INTERNAL: u8 = 1;
    pub const APP: u8 = 3;
    pub const DATA: u8 = 4;
    pub const LISTEN: u8 = 5;
    pub const UNCLEAN_STOP: u8 = 6;
    pub const FILES: u8 = 7;
    pub const POISONED: u8 = 10;

    /// An error that ends the process, with the status it exits with.
    pub struct Failure {
        pub code: u8,
        pub error: anyhow::Error,
    }

    impl Failure {
        pub fn new(code: u8, error: anyhow::Error) -> Failure {
            Failure { code, error }
        }

        pub fn internal(error: impl Into<anyhow::Error>) -> Failure {
            Failure {
                code: INTERNAL,
                error: error.into(),
            }
        }
    }
}

fn main() -> ExitCode {
    let options = Options::parse();
    if let Err(error) = refuse_huge_pages() {
        eprintln!("pure-serve: warning: could not turn transparent huge pages off: {error}");
    }
    let outcome = match &options.command {
        Some(Command::Check { data }) => damage::check(data),
        Some(Command::Salvage { data, into }) => damage::salvage(data, into),
        Some(Command::Import {
            app_dir,
            data,
            files,
            log_capacity,
        }) => transfer::import(app_dir, data, files, *log_capacity),
        Some(Command::Export {
            app_dir,
            data,
            out,
            url,
        }) => match (url, app_dir, data) {
            (Some(url), _, _) => transfer::export_online(url, out),
            (None, Some(app_dir), Some(data)) => transfer::export(app_dir, data, out),
            _ => unreachable!("clap requires the app and --data without --url"),
        },
        Some(Command::Test { app_dir, update }) => transcript::run(app_dir, *update),
        None => start(&options),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            eprintln!("pure-serve: {:#}", failure.error);
            ExitCode::from(failure.code)
        }
    }
}

/// Asks the kernel never to back this process's memory with transparent huge pages, as Redis
/// does by default: the state grows a row at a time, and each fresh huge page is 2 MiB zeroed
/// at once. Without them (research note 019), a batch of 1,000 new entries took a third less
/// of the server's CPU, and the process held 78 MB for 59 MB of state instead of 100. Reads of a
/// large state lose some TLB reach: in-process random reads were about a tenth slower. The
/// allocator is built not to ask for them either (libmimalloc-sys's `no_thp`); this covers
/// kernels that give them unasked (`/sys/kernel/mm/transparent_hugepage/enabled` = always).
fn refuse_huge_pages() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(2) with integer arguments only; it changes a flag of this process.
    if unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Loads and checks the app directory, with the world `options` fix for tests (at start and at
/// each reload).
fn load_app(options: &Options) -> anyhow::Result<App> {
    let environment = match &options.secrets {
        Some(path) => Environment::with_file(path).map_err(|e| anyhow::anyhow!(e))?,
        None => Environment::process(),
    };
    let mut app = App::load_in(options.app_dir(), Limits::default(), &environment)
        .with_context(|| format!("loading the app in {}", options.app_dir().display()))?;
    if options.fixed_now.is_some() || options.seed.is_some() {
        // One clock for every version: a reload keeps the time `POST /_pure/clock` moved it to.
        let clock = options
            .fixed_now
            .map(|now| FIXED_CLOCK.get_or_init(|| Clock::new(now)).clone());
        app.set_world(World::with_clock(clock, options.seed));
    }
    Ok(app)
}

/// The fixed clock of `--fixed-now`, made at the first load.
static FIXED_CLOCK: std::sync::OnceLock<Clock> = std::sync::OnceLock::new();

/// Set by a SIGHUP that arrives while the app loads and the data directory recovers, before the
/// server listens for the signal: without a handler it would end the process.
static HANGUP_PENDING: AtomicBool = AtomicBool::new(false);

extern "C" fn note_hangup(_: libc::c_int) {
    HANGUP_PENDING.store(true, Ordering::SeqCst);
}

/// Whether a SIGHUP came before the server listened for it (and forgets it).
pub(crate) fn early_hangup() -> bool {
    HANGUP_PENDING.swap(false, Ordering::SeqCst)
}

fn start(options: &Options) -> Result<u8, exit::Failure> {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe { libc::signal(libc::SIGHUP, note_hangup as *const () as libc::sighandler_t) };
    let mut app = load_app(options).map_err(|error| exit::Failure::new(exit::APP, error))?;
    if options.fixed_now.is_some() || options.seed.is_some() {
        eprintln!(
            "pure-serve: for tests: now() is {}, random() and uuid() are {}",
            options
                .fixed_now
                .map_or_else(|| "the wall clock".into(), |ms| format!("fixed at {ms}")),
            options.seed.map_or_else(
                || "secure".into(),
                |s| format!("seeded with {s}, and guessable")
            )
        );
    }
    if options.sync == Sync::None {
        eprintln!(
            "pure-serve: WARNING: --sync none: writes are answered WITHOUT being synced to disk; \
             a crash or power loss can lose acknowledged writes"
        );
    }
    let log = log::Log::to_stderr(app.name(), options.log_format, options.access_log);
    app.set_log(log.clone());
    let data_dir = options.data_dir();
    let runtime = Runtime::open(app, &data_dir, runtime_options(options))
        .with_context(|| format!("opening the data directory {}", data_dir.display()))
        .map_err(|error| exit::Failure::new(exit::DATA, error))?;
    let tokio_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.threads())
        .thread_name("pure-http")
        // Handlers run on these threads and Rhai recurses on the native stack: room for the
        // call-depth limit with a wide margin, so that no call needs a fresh stack (pure-lang
        // switches to one when short), and for Rhai's own walks of a value a handler built
        // deeper than the depth rule (`HANDLER_STACK_BYTES`).
        .thread_stack_size(pure_runtime::HANDLER_STACK_BYTES)
        .enable_all()
        .build()
        .map_err(exit::Failure::internal)?;
    let code = tokio_runtime.block_on(server::run(options, runtime, log.clone()))?;
    // Connections still open after the shutdown timeout are cut here.
    tokio_runtime.shutdown_timeout(Duration::from_secs(1));
    log.drain(Duration::from_secs(1));
    Ok(code)
}

fn runtime_options(options: &Options) -> RuntimeOptions {
    RuntimeOptions {
        sync: match options.sync {
            Sync::Always => SyncMode::Always,
            Sync::None => SyncMode::None,
        },
        log_capacity_bytes: options.log_capacity,
        log_capacity_max_bytes: options.log_capacity_max,
        checkpoint_interval_bytes: options.checkpoint_interval,
        checkpoint_image_ratio: options.checkpoint_image_ratio,
        queue_capacity: options.queue_capacity,
        write_timeout: Duration::from_millis(options.write_timeout_ms),
        lone_write_sync_max: match options.lone_writes_on_syncer {
            true => None,
            false => Some(pure_runtime::LONE_WRITE_SYNC_MAX),
        },
        ..RuntimeOptions::default()
    }
}
