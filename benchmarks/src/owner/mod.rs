//! `pure-bench owner`: the owner in-process, without HTTP.
//!
//! Part 1, write throughput: a handler that updates one row by key and one that inserts a row,
//! at several numbers of concurrent clients (threads waiting for each answer), with sync
//! `always` on a disk directory and `none`. Prints writes/s, latency quantiles, bytes written
//! to the device per write, the owner's busy share and the process CPU per write.
//!
//! Part 2, handler cost: a TPC-C-New-Order-like handler (23 reads and 23 writes on
//! warehouse, district, customer, item, stock, order, new-order and order-line rows) written as a
//! Pure script, against the same logic in native Rust on the same maps through the same
//! transactional operations (undo log and write set). Calls alternate in batches; medians of the
//! batches. Also splits the owner's time: script vs native (interpretation and glue), encoding
//! the write set, and copying tree nodes shared with a snapshot taken once per group.

//!
//! One module per part: `limits` (part 0), `writes` (1), `neworder` (2), `scoreboard` (4) and
//! `tpcc` (5); `timer` times batches for the handler-cost parts.

use std::path::PathBuf;

use anyhow::bail;
use pure_lang::Request;

mod limits;
mod neworder;
mod scoreboard;
mod timer;
mod tpcc;
mod writes;

#[derive(clap::Args)]
pub struct Args {
    /// Directory on the disk to measure `--sync always` on (a fresh subdirectory is used).
    /// Without it the sync-always runs are skipped.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Seconds per throughput configuration.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Client counts for the throughput part.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    clients: Vec<usize>,
    /// Calls per batch and batches per variant in the handler-cost part.
    #[arg(long, default_value_t = 500)]
    batch: usize,
    #[arg(long, default_value_t = 15)]
    batches: usize,
    /// Run only one part: "limits", "writes", "neworder" or "scoreboard".
    #[arg(long)]
    only: Option<String>,
    /// In the New-Order part, run only one variant, untimed, for counting instructions with
    /// callgrind or profiling with perf: script, native, floor, script-snapshot or
    /// native-snapshot (the last two with a snapshot every 64 calls), or load (the population
    /// alone, to subtract).
    #[arg(long)]
    variant: Option<String>,
    /// The scoreboard app, for the part that measures its `post_score` handler in-process.
    #[arg(long, default_value = "apps/scoreboard")]
    app: PathBuf,
    /// In the handler-cost part, a file whose script replaces the built-in `new_order` script
    /// (it must define `new_order` and `empty`): to measure what a construct costs.
    #[arg(long)]
    script: Option<PathBuf>,
    /// The TPC-C app, for the part that runs its five transactions in-process.
    #[arg(long, default_value = "apps/tpcc")]
    tpcc_app: PathBuf,
    /// Warehouses of the TPC-C part's population.
    #[arg(long, default_value_t = 1)]
    warehouses: i64,
    /// Transactions of the TPC-C part (the mix of clause 5.2.4, from 10 terminals per warehouse).
    #[arg(long, default_value_t = 20_000)]
    transactions: usize,
    /// Run every handler in Rhai's evaluator instead of its compiled form (to compare the two;
    /// the New-Order part always shows both).
    #[arg(long)]
    interpreted: bool,
    /// In the New-Order part, also write the medians of its rows (µs per call) to this file as
    /// JSON: compiled_us, interpreted_us, native_us, native_snapshot_us, compiled_snapshot_us,
    /// floor_us. With `--only tpcc`, the TPC-C part's means instead: weighted_us (the owner's
    /// writes weighted 45/43/4 per 100 transactions), floor_weighted_us, and per transaction
    /// mean_us and floor_mean_us.
    #[arg(long)]
    json: Option<PathBuf>,
}

const PARTS: [&str; 5] = ["limits", "writes", "neworder", "scoreboard", "tpcc"];

pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(only) = args.only.as_deref() {
        if !PARTS.contains(&only) {
            bail!("--only {only:?}: the parts are {}", PARTS.join(", "));
        }
    }
    let runs = |part: &str| args.only.is_none() || args.only.as_deref() == Some(part);
    if runs("limits") {
        limits::run()?;
    }
    if runs("writes") {
        writes::run(&args)?;
    }
    if runs("neworder") {
        neworder::run(&args)?;
    }
    if runs("scoreboard") {
        scoreboard::run(&args)?;
    }
    if runs("tpcc") {
        tpcc::run(&args)?;
    }
    Ok(())
}

/// A request whose body is `value`, as a handler receives it.
fn body(value: serde_json::Value) -> Request {
    Request {
        body: pure_lang::to_dynamic(&value),
        ..Request::default()
    }
}
