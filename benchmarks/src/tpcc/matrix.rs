//! `pure-bench tpcc-matrix`: the comparison as one command. In RAM (a tmpfs) and on disk, at
//! each warehouse count: Pure over HTTP and in-process at 16 and 64 terminals, SQLite per
//! transaction on 1 and 2 connections, grouped SQLite at 16 and 64 terminals. Each run is a
//! `pure-bench tpcc` process of its own (so that no run inherits another's memory); disk runs
//! are repeated and reported as median and range. It writes every run's JSON, report and plot,
//! and the tables as Markdown, into `--out`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::harness::device::DeviceCounter;
use crate::harness::sqlite::SqliteOptions;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory for the results (created; must be empty): matrix.md, runs/*.json and *.txt,
    /// plots/*.svg.
    #[arg(long)]
    out: PathBuf,
    /// Where the RAM runs keep their data: a tmpfs.
    #[arg(long, default_value = "/dev/shm")]
    ram_dir: PathBuf,
    /// Where the disk runs keep their data: a directory on a block device [default: OUT/work].
    #[arg(long)]
    disk_dir: Option<PathBuf>,
    /// Warehouse counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    warehouses: Vec<i64>,
    /// Seconds of each measured window, and of the warm-up before it.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    #[arg(long, default_value_t = 5)]
    warmup: u64,
    /// Runs of each disk configuration (median and range reported); RAM runs once.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Go on in an --out of an earlier, interrupted matrix: runs whose JSON is there are not
    /// run again.
    #[arg(long)]
    resume: bool,
    /// Only the RAM runs, or only the disk runs.
    #[arg(long, value_parser = ["ram", "disk"])]
    only: Option<String>,
    /// The TPC-C app directory.
    #[arg(long, default_value = "apps/tpcc")]
    app: PathBuf,
    /// SQLite's settings for both SQLite engines (the best the sweep of research note 012 found
    /// is the `tuned` preset).
    #[command(flatten)]
    sqlite: SqliteOptions,
}

/// One configuration of the matrix.
#[derive(Clone, Debug)]
struct Config {
    place: &'static str,
    warehouses: i64,
    engine: &'static str,
    /// Terminals (and, for `sqlite`, as many connections).
    terminals: usize,
    /// An open loop at this share (%) of SQLite's best closed-loop rate in the same place and W,
    /// and that rate in transactions a second; none for a closed loop.
    load: Option<(u32, f64)>,
}

impl Config {
    fn name(&self) -> String {
        let load = self
            .load
            .map(|(share, _)| format!("-at{share}"))
            .unwrap_or_default();
        format!(
            "{}-w{}-{}-{}{load}",
            self.place, self.warehouses, self.engine, self.terminals
        )
    }

    fn label(&self) -> String {
        match self.engine {
            "sqlite" => format!("sqlite, {} connection(s)", self.terminals),
            e => format!("{e}, {} terminals", self.terminals),
        }
    }
}

fn configs(places: &[&'static str], warehouses: &[i64]) -> Vec<Config> {
    let mut all = Vec::new();
    for &place in places {
        for &w in warehouses {
            for (engine, terminals) in [
                ("pure", 16),
                ("pure", 64),
                ("pure-inprocess", 16),
                ("pure-inprocess", 64),
                ("sqlite", 1),
                ("sqlite", 2),
                ("sqlite-grouped", 16),
                ("sqlite-grouped", 64),
            ] {
                all.push(Config {
                    place,
                    warehouses: w,
                    engine,
                    terminals,
                    load: None,
                });
            }
        }
    }
    all
}

pub fn run(args: Args) -> Result<()> {
    if !args.resume && args.out.exists() && std::fs::read_dir(&args.out)?.next().is_some() {
        bail!("{} is not empty: give a new directory", args.out.display());
    }
    for sub in ["runs", "plots"] {
        std::fs::create_dir_all(args.out.join(sub))
            .with_context(|| format!("create {}", args.out.display()))?;
    }
    let disk_dir = args
        .disk_dir
        .clone()
        .unwrap_or_else(|| args.out.join("work"));
    std::fs::create_dir_all(&disk_dir)?;
    let places: Vec<&'static str> = match args.only.as_deref() {
        Some("ram") => vec!["ram"],
        Some("disk") => vec!["disk"],
        _ => vec!["ram", "disk"],
    };
    if places.contains(&"disk") && DeviceCounter::for_path(&disk_dir).is_none() {
        bail!(
            "{} has no block device of its own (a tmpfs or overlay?): give --disk-dir on a disk",
            disk_dir.display()
        );
    }
    if places.contains(&"ram") && DeviceCounter::for_path(&args.ram_dir).is_some() {
        bail!(
            "{} is on a block device, not in RAM: give --ram-dir on a tmpfs",
            args.ram_dir.display()
        );
    }
    let settings = args.sqlite.settings();
    let mut configs = configs(&places, &args.warehouses);
    // The equal-load runs that follow each W=1 group: 3 engines at 2 loads, once each.
    let equal_load_runs = 6 * places.len() * usize::from(args.warehouses.contains(&1));
    let total: usize = configs
        .iter()
        .map(|c| if c.place == "disk" { args.repeat } else { 1 })
        .sum::<usize>()
        + equal_load_runs;
    let exe = std::env::current_exe()?;
    let mut results: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    // Runs that did not pass, and why: in the tables, not hidden by them.
    let mut failures: Vec<String> = Vec::new();
    let mut done = 0;
    let mut at = 0;
    while at < configs.len() {
        let config = configs[at].clone();
        at += 1;
        let repeats = if config.place == "disk" && config.load.is_none() {
            args.repeat
        } else {
            1
        };
        for k in 1..=repeats {
            done += 1;
            let name = format!("{}-{k}", config.name());
            eprintln!("tpcc-matrix: run {done}/{total}: {name}");
            let base = if config.place == "ram" {
                &args.ram_dir
            } else {
                &disk_dir
            };
            let dir = base.join(format!("pure-tpcc-matrix-{}-{name}", std::process::id()));
            let json_path = args.out.join("runs").join(format!("{name}.json"));
            let txt_path = args.out.join("runs").join(format!("{name}.txt"));
            if args.resume {
                if let Some(json) = std::fs::read_to_string(&json_path)
                    .ok()
                    .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                {
                    eprintln!("tpcc-matrix: {name} is done already");
                    note_failure(&name, &json, &txt_path, &mut failures);
                    results.entry(config.name()).or_default().push(json);
                    continue;
                }
            }
            let mut command = Command::new(&exe);
            command
                .arg("tpcc")
                .args(["--engine", config.engine])
                .arg(format!("--warehouses={}", config.warehouses))
                .arg(format!("--terminals={}", config.terminals))
                .arg(format!("--seconds={}", args.seconds))
                .arg(format!("--warmup={}", args.warmup))
                .arg("--app")
                .arg(&args.app)
                .arg("--dir")
                .arg(&dir)
                .arg("--json")
                .arg(&json_path)
                .arg("--plot")
                .arg(args.out.join("plots").join(format!("{name}.svg")))
                .args(settings.to_args());
            if config.engine == "sqlite" {
                command.arg(format!("--threads={}", config.terminals));
            }
            if let Some((_, rate)) = config.load {
                command.arg(format!("--rate={rate:.0}"));
            }
            let output = command
                .stderr(std::process::Stdio::inherit())
                .output()
                .with_context(|| format!("start {}", exe.display()))?;
            std::fs::write(&txt_path, &output.stdout)?;
            let _ = std::fs::remove_dir_all(&dir);
            let json = std::fs::read_to_string(&json_path)
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok());
            match json {
                // A run with failed transactions still measured: its figures stand beside the
                // failures, which the tables list. One whose tables broke a condition, or that
                // wrote no figures, is a failure only.
                Some(json) if json["consistency_ok"] != false => {
                    note_failure(&name, &json, &txt_path, &mut failures);
                    results.entry(config.name()).or_default().push(json);
                }
                _ => {
                    eprintln!("tpcc-matrix: run {name} failed ({})", output.status);
                    failures.push(format!(
                        "{name}: failed ({}); see `runs/{name}.txt` and the matrix's log",
                        output.status
                    ));
                }
            }
        }
        // After a W=1 group's closed loops: its engines at 50% and 80% of SQLite's best rate.
        let group_done = configs
            .get(at)
            .is_none_or(|next| (next.place, next.warehouses) != (config.place, config.warehouses));
        if group_done && config.warehouses == 1 && config.load.is_none() {
            let equal = equal_load(&config, &results);
            configs.splice(at..at, equal);
        }
        write_tables(&args, &configs, &results, &failures, &settings.describe())?;
    }
    let md = args.out.join("matrix.md");
    print!("{}", std::fs::read_to_string(&md)?);
    eprintln!("tpcc-matrix: the tables are in {}", md.display());
    if !failures.is_empty() {
        bail!(
            "{} run(s) did not pass: see {}",
            failures.len(),
            md.display()
        );
    }
    Ok(())
}

/// The median of a configuration's runs' `tx_per_s`.
fn median_rate(results: &BTreeMap<String, Vec<Value>>, config: &Config) -> Option<f64> {
    results
        .get(&config.name())
        .and_then(|runs| stat(runs, |v| v["tx_per_s"].as_f64()))
        .map(|s| s.0)
}

/// The open-loop runs of `last`'s place at W=1: Pure over HTTP and in-process at 64 terminals,
/// and the per-transaction SQLite that reached the best closed-loop rate (with as many terminals
/// as connections, as it was measured), each at 50% and 80% of that rate. None without it.
fn equal_load(last: &Config, results: &BTreeMap<String, Vec<Value>>) -> Vec<Config> {
    let closed = |engine: &'static str, terminals: usize| Config {
        place: last.place,
        warehouses: last.warehouses,
        engine,
        terminals,
        load: None,
    };
    let best = [closed("sqlite", 1), closed("sqlite", 2)]
        .into_iter()
        .filter_map(|c| median_rate(results, &c).map(|rate| (c, rate)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let Some((sqlite, best)) = best else {
        return Vec::new();
    };
    let mut equal = Vec::new();
    for share in [50, 80] {
        let rate = best * f64::from(share) / 100.0;
        for config in [
            closed("pure", 64),
            closed("pure-inprocess", 64),
            sqlite.clone(),
        ] {
            equal.push(Config {
                load: Some((share, rate)),
                ..config
            });
        }
    }
    equal
}

/// Notes a run that measured but had failed transactions or conditions.
fn note_failure(name: &str, json: &Value, txt: &std::path::Path, failures: &mut Vec<String>) {
    let errors = json["errors_total"].as_u64().unwrap_or(0);
    if errors > 0 || json["consistency_ok"] == false {
        let first = json["first_errors"]
            .as_array()
            .and_then(|e| e.first())
            .and_then(|e| e.as_str())
            .unwrap_or("");
        failures.push(format!(
            "{name}: {errors} failed transaction(s), consistency {}; the first: `{first}` ({})",
            json["consistency_ok"],
            txt.file_name().and_then(|f| f.to_str()).unwrap_or("")
        ));
    }
}

/// A figure over a configuration's runs: the median, and the range when there were several.
fn stat(runs: &[Value], get: impl Fn(&Value) -> Option<f64>) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = runs.iter().filter_map(get).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let median = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    Some((median, v[0], v[v.len() - 1]))
}

fn show(s: Option<(f64, f64, f64)>, digits: usize) -> String {
    match s {
        None => "–".into(),
        Some((m, lo, hi)) if lo == hi => format!("{m:.digits$}"),
        Some((m, lo, hi)) => format!("{m:.digits$} ({lo:.digits$}–{hi:.digits$})"),
    }
}

fn write_tables(
    args: &Args,
    configs: &[Config],
    results: &BTreeMap<String, Vec<Value>>,
    failures: &[String],
    sqlite: &str,
) -> Result<()> {
    let mut md = String::new();
    writeln!(md, "# TPC-C matrix\n")?;
    writeln!(
        md,
        "`pure-bench tpcc-matrix` on this machine: {} s windows after {} s of warm-up; disk runs \
         {} times each, shown as median (range). RAM: `{}` (tmpfs). Disk: `{}`. Pure with \
         `--sync always`; SQLite: `{sqlite}`. Unpaced: not tpmC. Engine CPU: pure-serve's for `pure`; \
         for the in-process engines the process's less the driver's; driver: the driver's own \
         (for `pure` the whole pure-bench process, its HTTP client included).\n",
        args.seconds,
        args.warmup,
        args.repeat,
        args.ram_dir.display(),
        args.disk_dir
            .clone()
            .unwrap_or_else(|| args.out.join("work"))
            .display(),
    )?;
    let mut groups: Vec<(&str, i64)> = configs.iter().map(|c| (c.place, c.warehouses)).collect();
    groups.dedup();
    for (place, w) in groups {
        writeln!(
            md,
            "## {}, W={w}\n",
            if place == "ram" { "RAM" } else { "Disk" }
        )?;
        writeln!(
            md,
            "| engine | tx/s | new orders/min | New-Order p50 ms | p99 ms | max ms | engine CPU µs/tx | driver µs/tx | device B/tx | RSS / state MiB | owner core | tx/commit |"
        )?;
        writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|")?;
        for config in configs
            .iter()
            .filter(|c| c.place == place && c.warehouses == w && c.load.is_none())
        {
            let Some(runs) = results.get(&config.name()) else {
                continue;
            };
            let f = |k: &'static str| move |v: &Value| v[k].as_f64();
            let no = |k: &'static str| move |v: &Value| v["types"]["new_order"][k].as_f64();
            let mib = |k: &'static str| move |v: &Value| v[k].as_f64().map(|b| b / 1048576.0);
            writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} | {} |",
                config.label(),
                show(stat(runs, f("tx_per_s")), 0),
                show(stat(runs, f("new_orders_per_min")), 0),
                show(stat(runs, no("p50_ms")), 2),
                show(stat(runs, no("p99_ms")), 2),
                show(stat(runs, no("max_ms")), 1),
                show(stat(runs, f("engine_cpu_us_per_tx")), 1),
                show(stat(runs, f("driver_cpu_us_per_tx")), 1),
                show(stat(runs, f("device_bytes_per_tx")), 0),
                show(stat(runs, mib("rss_bytes")), 0),
                show(stat(runs, mib("state_bytes")), 0),
                show(stat(runs, f("owner_core_share")), 2),
                show(stat(runs, f("tx_per_commit")), 1),
            )?;
        }
        writeln!(md)?;
        // The ratios the comparison is about, from the medians.
        let median = |engine: &'static str, terminals: usize| {
            let key = Config {
                place,
                warehouses: w,
                engine,
                terminals,
                load: None,
            }
            .name();
            results
                .get(&key)
                .and_then(|r| stat(r, |v| v["tx_per_s"].as_f64()))
                .map(|s| s.0)
        };
        let best_sqlite = [median("sqlite", 1), median("sqlite", 2)]
            .into_iter()
            .flatten()
            .fold(None, |best: Option<f64>, v| {
                Some(best.map_or(v, |b| b.max(v)))
            });
        for t in [16, 64] {
            let pure = median("pure", t);
            let mut parts = Vec::new();
            if let (Some(p), Some(s)) = (pure, best_sqlite) {
                parts.push(format!(
                    "{:.2}x the best per-transaction SQLite",
                    p / s.max(1e-9)
                ));
            }
            if let (Some(p), Some(g)) = (pure, median("sqlite-grouped", t)) {
                parts.push(format!(
                    "{:.2}x grouped SQLite at {t} terminals",
                    p / g.max(1e-9)
                ));
            }
            if let (Some(i), Some(g)) = (median("pure-inprocess", t), median("sqlite-grouped", t)) {
                parts.push(format!("in-process {:.2}x grouped SQLite", i / g.max(1e-9)));
            }
            if !parts.is_empty() {
                writeln!(
                    md,
                    "- Pure over HTTP at {t} terminals: {}.",
                    parts.join("; ")
                )?;
            }
        }
        writeln!(md)?;
    }
    let equal: Vec<&Config> = configs.iter().filter(|c| c.load.is_some()).collect();
    if !equal.is_empty() {
        writeln!(
            md,
            "## At equal load\n\nAn open loop (`--rate`) at 50% and 80% of the best \
             per-transaction SQLite's closed-loop rate of the same place, W=1; latency from each \
             transaction's intended start. The driver's own lateness is in the latencies: over \
             HTTP its event loop's timer ticks each millisecond.\n"
        )?;
        writeln!(
            md,
            "| place | offered tx/s | engine | tx/s | New-Order p50 ms | p99 ms | p99.9 ms | max ms | driver late p50 / p99 ms |"
        )?;
        writeln!(md, "|---|---|---|---|---|---|---|---|---|")?;
        for config in equal {
            let Some(runs) = results.get(&config.name()) else {
                continue;
            };
            let (share, rate) = config.load.expect("an equal-load run");
            let f = |k: &'static str| move |v: &Value| v[k].as_f64();
            let no = |k: &'static str| move |v: &Value| v["types"]["new_order"][k].as_f64();
            let late = |k: &'static str| move |v: &Value| v["driver_late_ms"][k].as_f64();
            writeln!(
                md,
                "| {} | {rate:.0} ({share}%) | {} | {} | {} | {} | {} | {} | {} / {} |",
                if config.place == "ram" { "RAM" } else { "disk" },
                config.label(),
                show(stat(runs, f("tx_per_s")), 0),
                show(stat(runs, no("p50_ms")), 2),
                show(stat(runs, no("p99_ms")), 2),
                show(stat(runs, no("p999_ms")), 2),
                show(stat(runs, no("max_ms")), 1),
                show(stat(runs, late("p50")), 2),
                show(stat(runs, late("p99")), 2),
            )?;
        }
        writeln!(md)?;
    }
    if !failures.is_empty() {
        writeln!(md, "## Runs that did not pass\n")?;
        for f in failures {
            writeln!(md, "- {f}")?;
        }
        writeln!(md)?;
    }
    std::fs::write(args.out.join("matrix.md"), md)?;
    Ok(())
}
