//! A run's figures: the JSON of `--json`, the results table in the shape of dbt2's
//! `results.out` (with the tails PostgreSQL's developers asked it for), and the latency log.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use super::super::input::Kind;
use super::drive::{Driven, Sample};

/// One transaction type over the window. Percentiles are HdrHistogram's (3 significant
/// digits: within 0.1% of the exact value).
#[derive(Clone, Debug, Default, Serialize)]
pub struct TypeJson {
    pub count: u64,
    pub mix_pct: f64,
    pub avg_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub rollbacks: u64,
    pub errors: u64,
}

/// Everything a run reports. Per-transaction figures divide by the transactions completed
/// (committed, or rolled back as the mix asks) inside the window; failed ones are not in them.
#[derive(Clone, Debug, Serialize)]
pub struct Figures {
    pub engine: &'static str,
    pub warehouses: i64,
    pub terminals: usize,
    /// Connections of the per-transaction SQLite engine (null for the others).
    pub threads: Option<usize>,
    pub seconds: f64,
    pub warmup_seconds: f64,
    pub seed: u64,
    pub think: bool,
    /// `--rate`: the open loop's offered load (null: a closed loop).
    pub offered_tx_per_s: Option<f64>,
    /// In an open loop, how late after their intended start the driver began the window's
    /// transactions: part of their latencies.
    pub driver_late_ms: Option<Lateness>,
    /// The directory the engine's files were in, and its block device (null: none, as tmpfs).
    pub dir: String,
    pub device: Option<String>,
    /// SQLite's settings, for the SQLite engines.
    pub sqlite_settings: Option<String>,
    pub transactions: u64,
    pub tx_per_s: f64,
    /// New-Orders per minute, the rolled-back ones included (they are completed transactions);
    /// unpaced, so never tpmC.
    pub new_orders_per_min: f64,
    pub new_orders_committed_per_min: f64,
    /// CPU per transaction of the engine's process: pure-serve for `pure`, this whole process
    /// (the driver's terminals included) for the in-process engines.
    pub cpu_us_per_tx: Option<f64>,
    /// The engine's CPU alone: pure-serve for `pure`; for the in-process engines this process
    /// less the driver's terminal threads outside their calls. The like-for-like column.
    pub engine_cpu_us_per_tx: Option<f64>,
    /// The driver's CPU per transaction: for `pure` this whole process (terminals and their
    /// HTTP client); for in-process engines the terminal threads outside the engine's calls.
    pub driver_cpu_us_per_tx: f64,
    pub device_bytes_per_tx: Option<f64>,
    /// The same per second of the window, the median weighted by transactions: less moved by
    /// a burst of another process's writes (the device is shared) or one checkpoint.
    pub device_bytes_per_tx_median_second: Option<f64>,
    /// The engine's process at the end of the window: resident now, and at its peak.
    pub rss_bytes: Option<u64>,
    pub rss_peak_bytes: Option<u64>,
    pub state_bytes: Option<u64>,
    /// The share of one core the owner's role was held (Pure).
    pub owner_core_share: Option<f64>,
    /// Commits per second and transactions per commit: Pure's groups (writes only), SQLite's
    /// COMMITs (the grouped engine's batches carry its reads too).
    pub commits_per_s: Option<f64>,
    pub tx_per_commit: Option<f64>,
    /// Of Pure's commits, the share made on the thread that ran their lone write.
    pub commits_here_share: Option<f64>,
    pub syncs_per_s: Option<f64>,
    /// Checkpoints Pure wrote in the window (each writes the whole state).
    pub checkpoints: Option<u64>,
    pub handler_fallbacks: Option<u64>,
    /// True only when every consistency condition held after the run; null when the tables
    /// could not be read (a server behind `--url`).
    pub consistency_ok: Option<bool>,
    pub consistency_failures: Vec<String>,
    /// Transactions running when the window closed, and the longest any had run by then.
    pub unfinished_at_end: u64,
    pub unfinished_oldest_ms: f64,
    /// Failed transactions in the window, and in the whole run (any fails the command).
    pub errors: u64,
    pub errors_total: u64,
    pub first_errors: Vec<String>,
    pub types: BTreeMap<&'static str, TypeJson>,
}

const MS: f64 = 1000.0;

/// Quantiles of the driver's lateness, in ms.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Lateness {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Lateness {
    pub fn of(late_us: &hdrhistogram::Histogram<u64>) -> Lateness {
        let at = |q: f64| late_us.value_at_quantile(q) as f64 / MS;
        Lateness {
            p50: at(0.5),
            p99: at(0.99),
            max: late_us.max() as f64 / MS,
        }
    }
}

pub fn types(driven: &Driven) -> BTreeMap<&'static str, TypeJson> {
    let total = driven.transactions().max(1) as f64;
    // Percentiles of a type with no completed transaction are 0, not a histogram's artefact.
    let q = |h: &hdrhistogram::Histogram<u64>, q: f64| {
        if h.is_empty() {
            0.0
        } else {
            h.value_at_quantile(q) as f64 / MS
        }
    };
    Kind::ALL
        .iter()
        .map(|kind| {
            let json = match driven.types.get(kind) {
                None => TypeJson::default(),
                Some(f) => {
                    let h = &f.latency_us;
                    TypeJson {
                        count: h.len(),
                        mix_pct: 100.0 * h.len() as f64 / total,
                        avg_ms: if h.is_empty() { 0.0 } else { h.mean() / MS },
                        p50_ms: q(h, 0.50),
                        p90_ms: q(h, 0.90),
                        p95_ms: q(h, 0.95),
                        p99_ms: q(h, 0.99),
                        p999_ms: q(h, 0.999),
                        max_ms: if h.is_empty() {
                            0.0
                        } else {
                            h.max() as f64 / MS
                        },
                        rollbacks: f.rollbacks,
                        errors: f.errors,
                    }
                }
            };
            (kind.name(), json)
        })
        .collect()
}

/// The results table and the figures under it.
pub fn text(f: &Figures) -> String {
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    line(format!(
        "{}, W={}, {} terminals{}, {} s after {} s of warm-up, seed {}{}",
        f.engine,
        f.warehouses,
        f.terminals,
        f.threads
            .map(|t| format!(" on {t} connection(s)"))
            .unwrap_or_default(),
        f.seconds,
        f.warmup_seconds,
        f.seed,
        match (f.offered_tx_per_s, f.think) {
            (Some(rate), _) =>
                format!(", an open loop offering {rate:.0} tx/s (latency from each intended start)"),
            (None, true) => ", keying and think times".into(),
            (None, false) => ", unpaced".into(),
        }
    ));
    if let Some(late) = f.driver_late_ms {
        line(format!(
            "the driver began transactions late by p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms (counted in their latencies)",
            late.p50, late.p99, late.max
        ));
    }
    line(format!(
        "{} ({})",
        f.dir,
        f.device
            .as_deref()
            .map(|d| format!("device {d}"))
            .unwrap_or_else(|| "no block device".into())
    ));
    if let Some(s) = &f.sqlite_settings {
        line(format!("sqlite: {s}"));
    }
    line(String::new());
    line(format!("{:>40}", "Response time (ms)"));
    line(format!(
        "{:>13} {:>6} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>6} {:>7}",
        "Transaction",
        "%",
        "Count",
        "Average",
        "p50",
        "p90",
        "p95",
        "p99",
        "p99.9",
        "Max",
        "Rollbacks",
        "%",
        "Errors"
    ));
    line("-".repeat(124));
    for (name, t) in &f.types {
        line(format!(
            "{:>13} {:>6.2} {:>9} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>9} {:>6.2} {:>7}",
            name.replace('_', " "),
            t.mix_pct,
            t.count,
            t.avg_ms,
            t.p50_ms,
            t.p90_ms,
            t.p95_ms,
            t.p99_ms,
            t.p999_ms,
            t.max_ms,
            t.rollbacks,
            if t.count > 0 {
                100.0 * t.rollbacks as f64 / t.count as f64
            } else {
                0.0
            },
            t.errors
        ));
    }
    line(String::new());
    line(format!(
        "{:.1} transactions/s; {:.1} new orders per minute ({:.1} committed), unpaced: not tpmC",
        f.tx_per_s, f.new_orders_per_min, f.new_orders_committed_per_min
    ));
    let opt = |v: Option<f64>, unit: &str| {
        v.map(|v| format!("{v:.1} {unit}"))
            .unwrap_or_else(|| "n/a".into())
    };
    if f.engine == "pure" {
        line(format!(
            "CPU per transaction: {} (pure-serve); driver {:.1} µs (pure-bench, its HTTP client included)",
            opt(f.cpu_us_per_tx, "µs"),
            f.driver_cpu_us_per_tx
        ));
    } else {
        line(format!(
            "CPU per transaction: {} (this process), of which the engine {} and the driver {:.1} µs",
            opt(f.cpu_us_per_tx, "µs"),
            opt(f.engine_cpu_us_per_tx, "µs"),
            f.driver_cpu_us_per_tx
        ));
    }
    line(format!(
        "bytes to the device per transaction: {}",
        match (f.device_bytes_per_tx, f.device_bytes_per_tx_median_second) {
            (Some(b), Some(m)) => format!("{b:.0} over the window, {m:.0} in its median second"),
            (Some(b), None) => format!("{b:.0}"),
            _ => "n/a (no block device)".into(),
        }
    ));
    let mib = |b: Option<u64>| {
        b.map(|b| format!("{:.1} MiB", b as f64 / (1 << 20) as f64))
            .unwrap_or_else(|| "n/a".into())
    };
    line(format!(
        "resident memory {} (peak {}) against {} of state{}",
        mib(f.rss_bytes),
        mib(f.rss_peak_bytes),
        mib(f.state_bytes),
        match (f.rss_bytes, f.state_bytes) {
            (Some(r), Some(s)) if s > 0 => format!(": {:.2}x", r as f64 / s as f64),
            _ => String::new(),
        }
    ));
    if let Some(share) = f.owner_core_share {
        line(format!(
            "the owner held its role {:.0}% of a core",
            100.0 * share
        ));
    }
    if let (Some(c), Some(t)) = (f.commits_per_s, f.tx_per_commit) {
        line(format!(
            "{c:.0} commits/s of {t:.2} {} each{}",
            if f.engine.starts_with("pure") {
                "writes"
            } else {
                "transactions"
            },
            f.syncs_per_s
                .map(|s| format!("; {s:.0} syncs/s"))
                .unwrap_or_default()
        ));
        if let Some(share) = f.commits_here_share {
            line(format!(
                "{:.0}% of the commits made by the thread that ran their lone write",
                100.0 * share
            ));
        }
    }
    if let Some(c) = f.checkpoints {
        line(format!("checkpoints in the window: {c}"));
    }
    line(format!(
        "still running when the window closed: {} (the longest for {:.1} ms)",
        f.unfinished_at_end, f.unfinished_oldest_ms
    ));
    if f.errors_total > 0 {
        line(format!(
            "{} transactions FAILED ({} in the window); the first:",
            f.errors_total, f.errors
        ));
        for e in &f.first_errors {
            line(format!("  {e}"));
        }
    }
    line(match f.consistency_ok {
        Some(true) => "consistency: every condition holds after the run".into(),
        Some(false) => format!(
            "consistency: {} condition(s) FAILED after the run",
            f.consistency_failures.len()
        ),
        None => "consistency: not checked (the server's tables are not reachable)".into(),
    });
    out
}

/// One line per measured transaction, in start order, as pgbench `-l` does: the Unix time of
/// its start (seconds, microseconds), the terminal, the type, the latency in µs, the outcome
/// (C committed, R rolled back as the mix asks, E error) and the HTTP status (0: no answer).
/// `started_unix_us`: the Unix time the samples' offsets count from.
pub fn write_latency_log(path: &Path, started_unix_us: u64, samples: &[Sample]) -> Result<()> {
    let file = std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    for s in samples {
        let t = started_unix_us + s.start_us;
        writeln!(
            w,
            "{}.{:06} {} {} {} {} {}",
            t / 1_000_000,
            t % 1_000_000,
            s.terminal,
            s.kind.name(),
            s.latency_us,
            s.outcome.code(),
            s.status
        )?;
    }
    w.flush()
        .with_context(|| format!("write {}", path.display()))?;
    Ok(())
}
