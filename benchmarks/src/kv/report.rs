//! The report of `pure-bench kv` in db_bench's form (a header, then one line per benchmark, and
//! with `--histogram` each benchmark's percentiles and histogram), and as JSON.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::{json, Value};

use super::{sqlite_settings, Args, EngineKind, Outcome, Sync, LARGE_VALUE};
use crate::harness::device::DeviceCounter;

/// Every figure of a run, with what was run and on what.
pub struct Report {
    /// "pure-http", "pure-inprocess" or "sqlite".
    pub engine: String,
    pub version: String,
    /// The engine's settings, as the JSON names them.
    pub settings: Value,
    /// The header's lines: (name, value).
    pub header: Vec<(String, String)>,
    pub outcomes: Vec<Outcome>,
}

/// One benchmark's figures in the JSON.
#[derive(Serialize)]
pub struct BenchmarkJson {
    pub name: &'static str,
    pub skipped: bool,
    pub ops: u64,
    pub calls: u64,
    pub seconds: f64,
    pub ops_per_s: f64,
    pub micros_per_op: f64,
    pub mb_per_s: f64,
    /// Latency of one call (a write, a read, a batch, a page of a range), in microseconds.
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub found: Option<u64>,
    pub device_bytes_per_op: Option<f64>,
    /// CPU of this process per operation: the clients' over HTTP; the engine's and the
    /// clients' in-process.
    pub client_cpu_us_per_op: f64,
    /// CPU of the server per operation (over HTTP; its clock ticks are 10 ms, so short runs
    /// read coarse).
    pub server_cpu_us_per_op: Option<f64>,
}

impl Outcome {
    /// 0 when the benchmark did no operation (a read of an empty database), as `ops_per_s`.
    pub(super) fn micros_per_op(&self) -> f64 {
        self.per_op(self.seconds * 1e6)
    }

    fn mb_per_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 / 1_048_576.0 / self.seconds
        } else {
            0.0
        }
    }

    fn us(&self, quantile: f64) -> f64 {
        self.latency.value_at_quantile(quantile) as f64 / 1000.0
    }

    /// `total` per operation; 0 when there was no operation.
    fn per_op(&self, total: f64) -> f64 {
        if self.ops == 0 {
            return 0.0;
        }
        total / self.ops as f64
    }

    pub fn json(&self) -> BenchmarkJson {
        BenchmarkJson {
            name: self.benchmark.name(),
            skipped: self.skipped,
            ops: self.ops,
            calls: self.latency.len(),
            seconds: self.seconds,
            ops_per_s: if self.seconds > 0.0 {
                self.ops as f64 / self.seconds
            } else {
                0.0
            },
            micros_per_op: self.micros_per_op(),
            mb_per_s: self.mb_per_s(),
            p50_us: self.us(0.5),
            p90_us: self.us(0.9),
            p99_us: self.us(0.99),
            p999_us: self.us(0.999),
            max_us: self.latency.max() as f64 / 1000.0,
            found: self.found,
            device_bytes_per_op: self.device_bytes.map(|b| self.per_op(b as f64)),
            client_cpu_us_per_op: self.per_op(self.client_cpu * 1e6),
            server_cpu_us_per_op: self.server_cpu.map(|c| self.per_op(c * 1e6)),
        }
    }

    /// db_bench's line: `fillrandom   :      69.857 micros/op;    1.5 MB/s`.
    fn line(&self) -> String {
        let name = self.benchmark.name();
        if self.skipped {
            return format!("{name:<12} : skipped (--use-existing-db)\n");
        }
        if self.ops == 0 {
            let why = if self.benchmark.writes() {
                "--writes 0"
            } else {
                "--reads 0, or nothing to read: the database is empty"
            };
            return format!("{name:<12} : no operations ({why})\n");
        }
        let mut line = format!("{name:<12} : {:>11.3} micros/op;", self.micros_per_op());
        if self.bytes > 0 {
            let _ = write!(line, " {:>6.1} MB/s", self.mb_per_s());
        }
        if let Some(found) = self.found {
            let what = if self.benchmark.writes() {
                "there"
            } else {
                "found"
            };
            let _ = write!(line, " ({found} of {} {what})", self.ops);
        }
        let _ = write!(line, " [cpu {:.1}", self.per_op(self.client_cpu * 1e6));
        if let Some(server) = self.server_cpu {
            let _ = write!(line, " + server {:.1}", self.per_op(server * 1e6));
        }
        line.push_str(" us/op");
        if let Some(bytes) = self.device_bytes {
            let _ = write!(line, ", {:.0} bytes written/op", self.per_op(bytes as f64));
        }
        line.push(']');
        line.push('\n');
        line
    }
}

impl Report {
    pub fn new(args: &Args, device: Option<DeviceCounter>, outcomes: Vec<Outcome>) -> Report {
        let raw = args.num as f64 * (args.key_size + args.value_size) as f64 / 1_048_576.0;
        let mut header = vec![
            ("Date".to_string(), date()),
            ("CPU".to_string(), cpu()),
            ("CPUCache".to_string(), cpu_cache()),
            ("Keys".to_string(), format!("{} bytes each", args.key_size)),
            (
                "Values".to_string(),
                format!(
                    "{} bytes each (fill100K: {LARGE_VALUE}); letters and digits",
                    args.value_size
                ),
            ),
            ("Entries".to_string(), args.num.to_string()),
            ("RawSize".to_string(), format!("{raw:.1} MB (estimated)")),
            ("Threads".to_string(), args.threads.to_string()),
            (
                "Batch".to_string(),
                format!("{} entries (fillbatch)", args.batch),
            ),
            (
                "Directory".to_string(),
                format!(
                    "{} ({})",
                    args.dir.display(),
                    match &device {
                        Some(d) => format!("device {}", d.device),
                        None => "no block device: RAM or overlay".into(),
                    }
                ),
            ),
        ];
        let (engine, version, settings, durability) = match (args.engine, args.in_process) {
            (EngineKind::Sqlite, _) => {
                let s = sqlite_settings(args);
                header.push((
                    "Journal".to_string(),
                    s.journal_mode.pragma().to_uppercase(),
                ));
                header.push(("Page size".to_string(), s.page_size.to_string()));
                header.push((
                    "Cache size".to_string(),
                    format!("{} KiB", s.cache_size_kib),
                ));
                header.push(("Sync".to_string(), s.synchronous.pragma().to_uppercase()));
                (
                    "sqlite",
                    rusqlite::version().to_string(),
                    json!({
                        "journal_mode": s.journal_mode,
                        "synchronous": s.synchronous,
                        "page_size": s.page_size,
                        "cache_size_kib": s.cache_size_kib,
                        "table": "WITHOUT ROWID",
                    }),
                    format!(
                        "a commit per write (per batch in fillbatch), synchronous={}, \
                         journal_mode={}",
                        s.synchronous.pragma().to_uppercase(),
                        s.journal_mode.pragma().to_uppercase()
                    ),
                )
            }
            (EngineKind::Pure, in_process) => {
                header.push(("Sync".to_string(), args.sync.name().to_string()));
                (
                    if in_process {
                        "pure-inprocess"
                    } else {
                        "pure-http"
                    },
                    env!("CARGO_PKG_VERSION").to_string(),
                    json!({
                        "sync": args.sync.name(),
                        "http": !in_process,
                        "server_threads": args.server_threads,
                        "app": args.app,
                    }),
                    match args.sync {
                        Sync::Always => "each write answered after its group's fdatasync".into(),
                        Sync::None => "none: writes are answered unsynced".to_string(),
                    },
                )
            }
        };
        header.push(("Durability".to_string(), durability));
        Report {
            engine: engine.to_string(),
            version,
            settings,
            header,
            outcomes,
        }
    }

    /// The report in db_bench's form.
    pub fn text(&self, histogram: bool) -> String {
        let mut out = String::new();
        let title = match self.engine.as_str() {
            "sqlite" => "SQLite".to_string(),
            "pure-http" => "Pure".to_string(),
            _ => "Pure".to_string(),
        };
        let how = match self.engine.as_str() {
            "pure-http" => " (the kv app in pure-serve, over HTTP)",
            "pure-inprocess" => " (the kv app in this process, without HTTP)",
            _ => " (rusqlite, bundled, in this process)",
        };
        let _ = writeln!(
            out,
            "{:<11} version {}{how}",
            format!("{title}:"),
            self.version
        );
        for (name, value) in &self.header {
            let _ = writeln!(out, "{:<11} {value}", format!("{name}:"));
        }
        out.push_str("------------------------------------------------\n");
        for outcome in &self.outcomes {
            out.push_str(&outcome.line());
            if histogram && !outcome.skipped {
                out.push_str(&histogram_text(&outcome.latency));
            }
        }
        out
    }

    pub fn json(&self) -> Value {
        json!({
            "engine": self.engine,
            "version": self.version,
            "settings": self.settings,
            "header": self
                .header
                .iter()
                .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                .collect::<serde_json::Map<String, Value>>(),
            "benchmarks": self.outcomes.iter().map(Outcome::json).collect::<Vec<_>>(),
        })
    }

    pub fn write_json(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(&self.json())?;
        std::fs::write(path, text + "\n").with_context(|| format!("write {}", path.display()))
    }
}

/// Percentiles and a bucketed histogram of one benchmark's call latencies, as db_bench prints
/// them (microseconds).
fn histogram_text(h: &Histogram<u64>) -> String {
    let us = |nanos: u64| nanos as f64 / 1000.0;
    let mut out = String::new();
    let _ = writeln!(out, "Microseconds per call:");
    let _ = writeln!(
        out,
        "Count: {}  Average: {:.4}  StdDev: {:.2}",
        h.len(),
        h.mean() / 1000.0,
        h.stdev() / 1000.0
    );
    let _ = writeln!(
        out,
        "Min: {:.4}  Median: {:.4}  Max: {:.4}",
        us(h.min()),
        us(h.value_at_quantile(0.5)),
        us(h.max())
    );
    let _ = writeln!(
        out,
        "Percentiles: P50: {:.2} P90: {:.2} P99: {:.2} P99.9: {:.2} Max: {:.2}",
        us(h.value_at_quantile(0.5)),
        us(h.value_at_quantile(0.9)),
        us(h.value_at_quantile(0.99)),
        us(h.value_at_quantile(0.999)),
        us(h.max())
    );
    out.push_str("------------------------------------------------------\n");
    // Buckets in microseconds on a 1-2-5 scale, as far as the largest value.
    let mut edges = vec![0.0];
    let mut decade = 1.0;
    while edges.last().copied().unwrap_or(0.0) <= us(h.max()) {
        for step in [1.0, 2.0, 5.0] {
            edges.push(step * decade);
        }
        decade *= 10.0;
    }
    let total = h.len().max(1) as f64;
    // Each recorded value in the one bucket that holds it, placed as the percentiles report
    // it (the top of its sub-bucket). `count_between` counts whole sub-buckets, so a value
    // near an edge was counted on both sides of it.
    let last = edges.len() - 2;
    let mut counts = vec![0u64; last + 1];
    for value in h.iter_recorded() {
        let at = value.value_iterated_to() as f64 / 1000.0;
        let bucket = edges[1..].partition_point(|&edge| edge <= at);
        counts[bucket.min(last)] += value.count_at_value();
    }
    let mut cumulative = 0u64;
    for (pair, &count) in edges.windows(2).zip(&counts) {
        if count == 0 {
            continue;
        }
        cumulative += count;
        let share = count as f64 * 100.0 / total;
        let _ = writeln!(
            out,
            "[ {:>9}, {:>9} ) {:>9} {:>7.3}% {:>7.3}% {}",
            pair[0],
            pair[1],
            count,
            share,
            cumulative as f64 * 100.0 / total,
            "#".repeat((share / 5.0).round() as usize)
        );
    }
    out.push('\n');
    out
}

/// The local time, as `date` prints it.
fn date() -> String {
    // SAFETY: time(2) and ctime_r(3) with a buffer of the 26 bytes it needs and more.
    unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut buffer = [0 as libc::c_char; 64];
        if libc::ctime_r(&now, buffer.as_mut_ptr()).is_null() {
            return "unknown".into();
        }
        std::ffi::CStr::from_ptr(buffer.as_ptr())
            .to_string_lossy()
            .trim_end()
            .to_string()
    }
}

fn cpuinfo(field: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|line| line.starts_with(field))
        .and_then(|line| line.split_once(':'))
        .map(|(_, value)| value.trim().to_string())
}

fn cpu() -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!(
        "{cores} * {}",
        cpuinfo("model name").unwrap_or_else(|| "unknown".into())
    )
}

fn cpu_cache() -> String {
    cpuinfo("cache size").unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::Benchmark;

    /// Calls of 50 µs and 100 µs sit on bucket edges: each is counted once, in the bucket
    /// that starts at it, and the buckets add up to the calls. (A value is placed as the
    /// percentiles report it, at the top of its histogram sub-bucket: 0.1% above it at most.)
    #[test]
    fn histogram_buckets_count_each_call_once() {
        let mut h = super::super::new_histogram();
        for nanos in [50_000, 50_000, 100_000, 3_000, 90_000] {
            h.record(nanos).expect("in range");
        }
        let text = histogram_text(&h);
        let buckets = bucket_counts(&text);
        let total: u64 = buckets.iter().map(|(_, n)| n).sum();
        assert_eq!(total, 5, "{text}");
        let count = |lo: &str| {
            buckets
                .iter()
                .find(|(start, _)| start == lo)
                .map_or(0, |(_, n)| *n)
        };
        assert_eq!(count("2"), 1, "3 µs: {text}");
        assert_eq!(count("50"), 3, "50, 50 and 90 µs: {text}");
        assert_eq!(count("100"), 1, "100 µs: {text}");
        assert!(text.contains("100.000%"), "{text}");
        assert!(
            !text.contains("100.200%") && !text.contains("200.000%"),
            "{text}"
        );

        // Many calls over many sub-buckets: the buckets still add up to the calls.
        let mut h = super::super::new_histogram();
        for i in 0..3_000u64 {
            h.record(1_000 + i * 7_919 % 2_000_000).expect("in range");
        }
        let text = histogram_text(&h);
        let total: u64 = bucket_counts(&text).iter().map(|(_, n)| n).sum();
        assert_eq!(total, 3_000, "{text}");
    }

    /// The bucket lines of a histogram's text: each bucket's start (as printed) and count.
    fn bucket_counts(text: &str) -> Vec<(String, u64)> {
        text.lines()
            .filter_map(|line| line.strip_prefix('['))
            .map(|line| {
                let (range, rest) = line.split_once(')').expect("a bucket line");
                let start = range.split(',').next().expect("a start").trim();
                let count = rest.split_whitespace().next().expect("a count");
                (start.to_string(), count.parse().expect("a number"))
            })
            .collect()
    }

    /// A read of an empty database does no operation: no figure per operation, not the whole
    /// run's time as one.
    #[test]
    fn a_benchmark_without_operations_has_no_time_per_operation() {
        let outcome = Outcome {
            benchmark: Benchmark::ReadSeq,
            ops: 0,
            latency: super::super::new_histogram(),
            seconds: 0.25,
            bytes: 0,
            found: None,
            device_bytes: Some(4096),
            skipped: false,
            client_cpu: 0.1,
            server_cpu: Some(0.1),
        };
        let json = outcome.json();
        assert_eq!(json.ops_per_s, 0.0);
        assert_eq!(json.micros_per_op, 0.0);
        assert_eq!(json.client_cpu_us_per_op, 0.0);
        assert_eq!(json.server_cpu_us_per_op, Some(0.0));
        assert_eq!(json.device_bytes_per_op, Some(0.0));
        assert!(
            outcome.line().contains("no operations"),
            "{}",
            outcome.line()
        );
    }
}
