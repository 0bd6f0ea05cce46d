//! `pure-bench kv-sweep`: the kv benchmarks on every SQLite journal mode, page size and
//! synchronous setting, and on Pure with and without sync, over HTTP and in-process, at each
//! thread count; one comparison table (Markdown and JSON), the targets checked, and a plot.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use plotters::prelude::*;
use serde_json::{json, Value};

use super::{empty_dir, measure, Args, Benchmark, EngineKind, Report, Sync};
use crate::harness::sqlite::{JournalMode, Synchronous};

/// Run the kv benchmarks on every setting and write one comparison: `kv-sweep.md`,
/// `kv-sweep.json` and `kv-sweep.svg` in --out.
#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// Directory for the databases, on the file system under test (each run empties it).
    #[arg(long)]
    pub dir: PathBuf,

    /// Directory for the table, the JSON and the plot (created).
    #[arg(long, default_value = "kv-sweep")]
    pub out: PathBuf,

    /// Benchmarks of every run, in order. fillbatch fills the database quickly, so that
    /// overwrite (durable single-key writes) and the reads find --num entries.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fillbatch,overwrite,readrandom,readseq"
    )]
    pub benchmarks: Vec<Benchmark>,

    /// Entries in each database.
    #[arg(long, default_value_t = 10_000)]
    pub num: u64,

    /// Writes of overwrite and deleterandom: each is a sync on a durable setting (milliseconds
    /// on a slow device, several per commit in the rollback journals).
    #[arg(long, default_value_t = 1_000)]
    pub writes: u64,

    /// Reads of readrandom, entries of readseq (default: --num).
    #[arg(long)]
    pub reads: Option<u64>,

    /// Thread counts, each a run of its own.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 16])]
    pub threads: Vec<usize>,

    /// SQLite journal modes.
    #[arg(long, value_enum, ignore_case = true, value_delimiter = ',',
          default_values_t = [JournalMode::Delete, JournalMode::Truncate, JournalMode::Persist,
                              JournalMode::Memory, JournalMode::Wal, JournalMode::Off])]
    pub journal_modes: Vec<JournalMode>,

    /// SQLite page sizes.
    #[arg(long, value_delimiter = ',', default_values_t = [1024, 4096, 16384])]
    pub page_sizes: Vec<u32>,

    /// SQLite synchronous settings.
    #[arg(long, value_enum, ignore_case = true, value_delimiter = ',',
          default_values_t = [Synchronous::Full, Synchronous::Normal])]
    pub synchronous: Vec<Synchronous>,

    /// Pure's sync modes (each over HTTP and in-process).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Sync::Always, Sync::None])]
    pub pure_sync: Vec<Sync>,

    /// Pure: the app directory.
    #[arg(long, default_value = "apps/kv")]
    pub app: PathBuf,
}

/// One run of the sweep: its label, settings and figures.
struct Run {
    label: String,
    threads: usize,
    /// Durable at every answered write (see [`durable`]).
    durable: bool,
    report: Report,
}

pub fn run(args: SweepArgs) -> Result<()> {
    std::fs::create_dir_all(&args.out).with_context(|| format!("create {}", args.out.display()))?;
    let configs = configurations(&args);
    let total = configs.len() * args.threads.len();
    let mut runs = Vec::new();
    for &threads in &args.threads {
        for (label, durable, config) in &configs {
            let mut config = config.clone();
            config.threads = threads;
            eprintln!("[{}/{total}] {label}, {threads} thread(s)", runs.len() + 1);
            empty_dir(&config.dir)?;
            let report = measure(&config).with_context(|| format!("{label}, {threads} threads"))?;
            runs.push(Run {
                label: label.clone(),
                threads,
                durable: *durable,
                report,
            });
        }
    }
    let markdown = table(&args, &runs);
    print!("{markdown}");
    let md = args.out.join("kv-sweep.md");
    std::fs::write(&md, &markdown).with_context(|| format!("write {}", md.display()))?;
    let json_path = args.out.join("kv-sweep.json");
    let all: Vec<Value> = runs
        .iter()
        .map(|r| {
            json!({
                "label": r.label,
                "threads": r.threads,
                "durable": r.durable,
                "report": r.report.json(),
            })
        })
        .collect();
    let json = json!({
        "dir": args.dir,
        "num": args.num,
        "writes": args.writes,
        "benchmarks": args.benchmarks.iter().map(|b| b.name()).collect::<Vec<_>>(),
        "runs": all,
    });
    std::fs::write(&json_path, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("write {}", json_path.display()))?;
    let svg = args.out.join("kv-sweep.svg");
    plot(&svg, &args, &runs)?;
    eprintln!(
        "wrote {}, {} and {}",
        md.display(),
        json_path.display(),
        svg.display()
    );
    Ok(())
}

/// Whether SQLite with these settings has every answered commit on the device, as Pure's
/// `--sync always` has: a synced commit (FULL, or NORMAL outside WAL, where NORMAL still syncs
/// the database at each commit) with a journal on disk to roll back from. WAL with NORMAL loses
/// the last commits on power loss; a MEMORY or OFF journal cannot roll back a commit cut short.
pub fn durable(journal: JournalMode, synchronous: Synchronous) -> bool {
    let journaled = matches!(
        journal,
        JournalMode::Delete | JournalMode::Truncate | JournalMode::Persist | JournalMode::Wal
    );
    let synced = match synchronous {
        Synchronous::Full | Synchronous::Extra => true,
        Synchronous::Normal => journal != JournalMode::Wal,
        Synchronous::Off => false,
    };
    journaled && synced
}

fn base(args: &SweepArgs) -> Args {
    Args {
        benchmarks: args.benchmarks.clone(),
        engine: EngineKind::Pure,
        in_process: false,
        num: args.num,
        reads: args.reads,
        writes: Some(args.writes),
        key_size: 16,
        value_size: 100,
        batch: 1000,
        threads: 1,
        use_existing_db: false,
        histogram: false,
        dir: args.dir.join("run"),
        json: None,
        seed: 301,
        sync: Sync::Always,
        app: args.app.clone(),
        server_threads: None,
        journal_mode: JournalMode::Wal,
        synchronous: Synchronous::Full,
        page_size: 4096,
        cache_size: 2000,
        quiet: true,
    }
}

/// Every configuration: (label, durable, args).
fn configurations(args: &SweepArgs) -> Vec<(String, bool, Args)> {
    let mut configs = Vec::new();
    for &sync in &args.pure_sync {
        for in_process in [false, true] {
            let label = format!(
                "pure {} sync={}",
                if in_process { "in-process" } else { "http" },
                sync.name()
            );
            let config = Args {
                in_process,
                sync,
                ..base(args)
            };
            configs.push((label, sync == Sync::Always, config));
        }
    }
    for &journal_mode in &args.journal_modes {
        for &synchronous in &args.synchronous {
            for &page_size in &args.page_sizes {
                let label = format!(
                    "sqlite {} {} {}",
                    journal_mode.pragma().to_uppercase(),
                    synchronous.pragma().to_uppercase(),
                    page_label(page_size)
                );
                let config = Args {
                    engine: EngineKind::Sqlite,
                    journal_mode,
                    synchronous,
                    page_size,
                    ..base(args)
                };
                configs.push((label, durable(journal_mode, synchronous), config));
            }
        }
    }
    configs
}

/// A page size as a label: "4K" for whole KiB, "512B" below.
fn page_label(bytes: u32) -> String {
    if bytes.is_multiple_of(1024) {
        format!("{}K", bytes / 1024)
    } else {
        format!("{bytes}B")
    }
}

fn micros(run: &Run, benchmark: Benchmark) -> Option<f64> {
    run.report
        .outcomes
        .iter()
        .find(|o| o.benchmark == benchmark && !o.skipped)
        .map(|o| o.micros_per_op())
}

/// The comparison in Markdown: micros/op per run and benchmark, then the targets.
fn table(args: &SweepArgs, runs: &[Run]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# kv-sweep: micros/op (wall time over operations; lower is better)\n\n\
         Databases in `{}`; {} entries of 16-byte keys and 100-byte values; {} writes for \
         overwrite; benchmarks in this order on one database: {}. `durable` marks settings \
         where every answered write is on the device.\n",
        args.dir.display(),
        args.num,
        args.writes,
        args.benchmarks
            .iter()
            .map(|b| b.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut head = "| engine | threads | durable |".to_string();
    let mut rule = "|---|---:|---|".to_string();
    for b in &args.benchmarks {
        let _ = write!(head, " {} |", b.name());
        rule.push_str("---:|");
    }
    let _ = writeln!(out, "{head}\n{rule}");
    for run in runs {
        let _ = write!(
            out,
            "| {} | {} | {} |",
            run.label,
            run.threads,
            if run.durable { "yes" } else { "no" }
        );
        for &b in &args.benchmarks {
            match micros(run, b) {
                Some(m) => {
                    let _ = write!(out, " {m:.3} |");
                }
                None => out.push_str(" - |"),
            }
        }
        out.push('\n');
    }
    out.push_str("\n## Targets\n\n");
    for line in targets(runs) {
        let _ = writeln!(out, "- {line}");
    }
    out
}

/// The three targets, each as a sentence with its figures (or why it could not be
/// judged from these runs).
fn targets(runs: &[Run]) -> Vec<String> {
    let find = |label: &str, threads: usize| {
        runs.iter()
            .find(|r| r.label == label && r.threads == threads)
    };
    let best_sqlite = |benchmark: Benchmark, threads: usize, keep: &dyn Fn(&Run) -> bool| {
        runs.iter()
            .filter(|r| r.threads == threads && r.label.starts_with("sqlite") && keep(r))
            .filter_map(|r| micros(r, benchmark).map(|m| (m, r)))
            .min_by(|a, b| a.0.total_cmp(&b.0))
    };
    let mut lines = Vec::new();
    let threads = runs.iter().map(|r| r.threads).max().unwrap_or(1);
    match (
        find("pure http sync=always", threads).and_then(|r| micros(r, Benchmark::Overwrite)),
        best_sqlite(Benchmark::Overwrite, threads, &|r| r.durable),
    ) {
        (Some(pure), Some((sqlite, run))) => lines.push(format!(
            "durable single-key writes (overwrite), {threads} threads: Pure over HTTP {:.0} \
             ops/s, the best durable SQLite ({}) {:.0} ops/s: **{:.1}x** (target: at least 5x)",
            1e6 / pure,
            run.label,
            1e6 / sqlite,
            sqlite / pure
        )),
        _ => lines.push("overwrite: not in these runs".into()),
    }
    let wal = |r: &Run| r.label.contains("WAL") && r.durable;
    match (
        find("pure http sync=always", 1).and_then(|r| micros(r, Benchmark::FillBatch)),
        best_sqlite(Benchmark::FillBatch, 1, &wal),
    ) {
        (Some(pure), Some((sqlite, run))) => lines.push(format!(
            "fillbatch, 1 thread, durable: Pure over HTTP {pure:.3} micros/op, SQLite WAL at its \
             best ({}) {sqlite:.3}: Pure's rate is **{:.2}x** SQLite WAL's (target: at least 1x)",
            run.label,
            sqlite / pure
        )),
        _ => lines.push("fillbatch: not in these runs".into()),
    }
    match (
        find("pure in-process sync=always", 1).and_then(|r| micros(r, Benchmark::ReadRandom)),
        best_sqlite(Benchmark::ReadRandom, 1, &|_| true),
    ) {
        (Some(pure), Some((sqlite, run))) => lines.push(format!(
            "readrandom, 1 thread, in-process: Pure {pure:.3} micros/op, SQLite at its best ({}) \
             {sqlite:.3}: **{:.2}x** SQLite's micros/op (target: at most 2x)",
            run.label,
            pure / sqlite
        )),
        _ => lines.push("readrandom: not in these runs".into()),
    }
    lines
}

/// Bars of micros/op (log scale) per benchmark: one panel per thread count, one bar per Pure
/// configuration and per SQLite journal mode at its first synchronous setting and page size.
fn plot(path: &std::path::Path, args: &SweepArgs, runs: &[Run]) -> Result<()> {
    let first_sqlite = format!(
        "{} {}",
        args.synchronous
            .first()
            .map_or_else(|| "FULL".to_string(), |s| s.pragma().to_uppercase()),
        page_label(args.page_sizes.first().copied().unwrap_or(4096))
    );
    let series: Vec<String> = {
        let mut labels: Vec<String> = Vec::new();
        for run in runs {
            let shown = run.label.starts_with("pure") || run.label.ends_with(&first_sqlite);
            if shown && !labels.contains(&run.label) {
                labels.push(run.label.clone());
            }
        }
        labels
    };
    let values: Vec<f64> = runs
        .iter()
        .flat_map(|r| args.benchmarks.iter().filter_map(|&b| micros(r, b)))
        .filter(|m| *m > 0.0)
        .collect();
    let lo = values
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
        .max(1e-3)
        / 2.0;
    let hi = values.iter().copied().fold(0.0, f64::max).max(lo * 10.0) * 2.0;
    let colours = [
        RGBColor(0x1f, 0x77, 0xb4),
        RGBColor(0x2c, 0xa0, 0x2c),
        RGBColor(0x17, 0xbe, 0xcf),
        RGBColor(0x9e, 0xda, 0xe5),
        RGBColor(0xd6, 0x27, 0x28),
        RGBColor(0xff, 0x7f, 0x0e),
        RGBColor(0x94, 0x67, 0xbd),
        RGBColor(0x8c, 0x56, 0x4b),
        RGBColor(0xe3, 0x77, 0xc2),
        RGBColor(0x7f, 0x7f, 0x7f),
        RGBColor(0xbc, 0xbd, 0x22),
    ];
    let panels = args.threads.len().max(1);
    let size = (1200u32, 420 * panels as u32 + 60);
    let draw = || -> Result<(), Box<dyn std::error::Error>> {
        let root = SVGBackend::new(path, size).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(
            &format!(
                "kv: micros/op per benchmark (log scale), {} entries, on {}",
                args.num,
                args.dir.display()
            ),
            ("sans-serif", 22),
        )?;
        let areas = root.split_evenly((panels, 1));
        for (area, &threads) in areas.iter().zip(&args.threads) {
            let groups = args.benchmarks.len();
            let mut chart = ChartBuilder::on(area)
                .caption(format!("{threads} thread(s)"), ("sans-serif", 18))
                .margin(10)
                .x_label_area_size(30)
                .y_label_area_size(70)
                .right_y_label_area_size(260)
                .build_cartesian_2d(0.0..groups as f64, (lo..hi).log_scale())?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(groups * 2 + 1)
                .x_label_formatter(&|x| {
                    let i = (*x - 0.5).round() as usize;
                    args.benchmarks
                        .get(i)
                        .filter(|_| (x - 0.5).fract().abs() < 1e-6)
                        .map_or(String::new(), |b| b.name().to_string())
                })
                .y_desc("micros/op")
                .draw()?;
            let width = 0.8 / series.len().max(1) as f64;
            for (s, label) in series.iter().enumerate() {
                let colour = colours[s % colours.len()];
                let Some(run) = runs
                    .iter()
                    .find(|r| &r.label == label && r.threads == threads)
                else {
                    continue;
                };
                let bars: Vec<_> = args
                    .benchmarks
                    .iter()
                    .enumerate()
                    .filter_map(|(g, &b)| {
                        let m = micros(run, b)?;
                        let x0 = g as f64 + 0.1 + s as f64 * width;
                        Some(Rectangle::new(
                            [(x0, lo), (x0 + width * 0.9, m.max(lo))],
                            colour.filled(),
                        ))
                    })
                    .collect();
                chart
                    .draw_series(bars)?
                    .label(label.as_str())
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled())
                    });
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .margin(5)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()?;
        }
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| anyhow::anyhow!("draw {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_sizes_below_a_kib_keep_their_bytes_in_the_label() {
        assert_eq!(page_label(512), "512B");
        assert_eq!(page_label(1024), "1K");
        assert_eq!(page_label(16384), "16K");
        assert_eq!(page_label(1536), "1536B");
    }
}
