//! `pure-bench`: Pure's benchmarks, one subcommand each. Every benchmark is a command that prints
//! its figures (and writes them as JSON on request); none of them is a timed test.
//!
//! Adding a benchmark: write a module `foo.rs` with `pub struct Args` (`#[derive(clap::Args)]`,
//! every option documented: the doc comments are the `--help` text) and
//! `pub fn run(args: Args) -> anyhow::Result<()>`; add `mod foo;` below and one variant
//! `Foo(foo::Args)` to `Command` plus its arm in `main`. Start pure-serve, talk HTTP to it, set
//! SQLite up and read CPU, memory or device bytes through `harness`, so that every benchmark
//! measures the same way.

mod harness;
mod kv;
mod live;
mod log;
mod owner;
mod schedules;
mod scoreboard;
mod tpcc;

use clap::{Parser, Subcommand};

// The runtime's allocator (mimalloc), as in pure-serve, so that allocation costs compare.
#[global_allocator]
static GLOBAL: pure_runtime::Allocator = pure_runtime::Allocator;

#[derive(Parser)]
#[command(
    name = "pure-bench",
    version,
    about = "Pure's benchmarks: each prints its figures"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The record log against the raw device: fdatasync rates, group commit, latency, bytes.
    Log(log::Args),
    /// The scoreboard app over HTTP (pure-serve), optionally side by side with Redis.
    Scoreboard(scoreboard::Args),
    /// What a scoreboard player costs pure-serve in resident memory, against its state_bytes.
    ScoreboardMemory(scoreboard::memory::Args),
    /// The owner in-process: write throughput, and a New-Order-like script against native Rust.
    Owner(owner::Args),
    /// TPC-C's population as JSON Lines files for `pure-serve import`.
    TpccLoad(tpcc::LoadArgs),
    /// TPC-C timed: closed-loop terminals against one engine (Pure over HTTP or in-process,
    /// SQLite per transaction or grouped), a dbt2-style report, the consistency check after.
    Tpcc(tpcc::timed::Args),
    /// The TPC-C comparison in one command: RAM and disk, W=1 and 4, every engine; Markdown
    /// tables, every run's JSON and plot.
    TpccMatrix(tpcc::matrix::Args),
    /// One TPC-C stream through Pure, SQLite and grouped SQLite: answers, tables and the
    /// consistency conditions compared.
    TpccEqual(tpcc::equal::Args),
    /// db_bench for the kv app (Pure over HTTP or in-process) or SQLite: micros/op per benchmark.
    Kv(kv::Args),
    /// The kv benchmarks on every SQLite journal mode, page size and synchronous setting and on
    /// Pure: one comparison table (Markdown, JSON) and a plot.
    KvSweep(kv::sweep::SweepArgs),
    /// Live queries: the scoreboard's posts with and without subscribers to /top as event
    /// streams; post latency, the delay from a post's answer to its event, CPU per event.
    Live(live::Args),
    /// Scheduled handlers: memory per pending entry, and how late entries run when they fall
    /// due under a write load.
    Schedules(schedules::Args),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Log(args) => log::run(args),
        Command::Scoreboard(args) => scoreboard::run(args),
        Command::ScoreboardMemory(args) => scoreboard::memory::run(args),
        Command::Owner(args) => owner::run(args),
        Command::Tpcc(args) => tpcc::timed::run(args),
        Command::TpccMatrix(args) => tpcc::matrix::run(args),
        Command::TpccLoad(args) => tpcc::run_load(args),
        Command::TpccEqual(args) => tpcc::equal::run(args),
        Command::Kv(args) => kv::run(args),
        Command::KvSweep(args) => kv::sweep::run(args),
        Command::Live(args) => live::run(args),
        Command::Schedules(args) => schedules::run(args),
    }
}
