//! `pure-bench log`: what a durable commit costs on a directory's device.
//!
//! In one run, on the same file system, side by side: (a) the raw device limit — a 4 KiB
//! `pwrite` and an `fdatasync` in a loop, once over a preallocated, already-written file
//! (cycling over it), once appending to a growing file; (b) the store (`pure_store::Store`)
//! committing groups of records, at several group sizes, in steady state (its ring of log space
//! already lapped, and reused behind background checkpoints). The measurements take turns in
//! short slices so that the bursts of a shared machine's noise fall on all of them alike.

mod committer;
mod raw;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};

use crate::harness::device::DeviceCounter;
use crate::harness::measure::{self, Measured, Subject, Window};
use committer::Committer;

/// Measure the raw sync rate of a directory's device and the store's group commit on it.
///
/// Every figure comes from the same run on the same file system, so compare them as ratios.
/// The benchmark's files live in a fresh subdirectory of --dir, removed at the end.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory to measure on; it must exist and be writable. What is measured is the file
    /// system and device that hold it, so put it on the disk you care about (not tmpfs).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,

    /// Size of each record the store appends, in bytes (the payload; the store adds its framing).
    #[arg(long, value_name = "BYTES", default_value_t = 100)]
    pub record_bytes: usize,

    /// Measured time of each measurement, in seconds; fractions allowed (0.2). A run makes two
    /// raw measurements plus one per group size, and spends extra time preparing files.
    #[arg(long, value_name = "SECONDS", default_value_t = 3.0, value_parser = parse_seconds)]
    pub seconds: f64,

    /// The measurements take turns in slices of this many seconds until each has had --seconds,
    /// so that bursts of other processes' I/O on a shared machine hit all of them alike.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.05, value_parser = parse_seconds)]
    pub slice_seconds: f64,

    /// Group sizes for the store: records appended before each commit, comma-separated.
    #[arg(long, value_name = "N,N,...", value_delimiter = ',', default_values_t = [1, 16, 64, 256])]
    pub groups: Vec<usize>,

    /// Log capacity given to each store, in MiB. Before measuring, the ring is lapped once with
    /// large untimed commits, and while measuring a checkpoint is started in the background
    /// whenever the log is half full: measured commits overwrite reused space (steady state).
    #[arg(long, value_name = "MIB", default_value_t = 64, value_parser = parse_mib)]
    pub log_mib: u64,

    /// Each store's log starts at this many MiB, as a new data directory's does, and grows in
    /// place (doubling, untimed, while the ring is lapped) to --log-mib before measuring, so
    /// that commits are measured on a grown ring. Equal to --log-mib: a log made at its size.
    #[arg(long, value_name = "MIB", default_value_t = 1, value_parser = parse_mib)]
    pub grown_from_mib: u64,

    /// Size of the preallocated file of the raw in-place loop, in MiB; the loop cycles over it.
    #[arg(long, value_name = "MIB", default_value_t = 64, value_parser = parse_mib)]
    pub raw_file_mib: u64,

    /// Also write the figures as JSON to this file: raw_prealloc_syncs_per_s,
    /// raw_append_syncs_per_s and, per group size, group_records, syncs_per_s, records_per_s,
    /// p50_us, p99_us, p999_us, device_bytes_per_record (null when the device has no counter).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

fn parse_mib(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(mib) if (1..=1 << 20).contains(&mib) => Ok(mib),
        _ => Err(format!(
            "expected a whole number of MiB from 1 to 1048576, got {text:?}"
        )),
    }
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(s),
        _ => Err(format!(
            "expected a positive number of seconds, got {text:?}"
        )),
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.groups.is_empty() || args.groups.contains(&0) {
        bail!("--groups needs group sizes of at least 1 record");
    }
    let work = WorkDir::create(&args.dir)?;
    let counter = DeviceCounter::for_path(&work.path);
    let window = Window {
        duration: Duration::from_secs_f64(args.seconds),
        slice: Duration::from_secs_f64(args.slice_seconds),
        dir: work.path.clone(),
        counter: counter.clone(),
    };
    let mut in_place = raw::InPlace::create(&work.path, args.raw_file_mib)?;
    let mut append = raw::Append::create(&work.path)?;
    let mut committers = Vec::new();
    for &group in &args.groups {
        let dir = work.path.join(format!("store-g{group}"));
        committers.push(Committer::create(
            dir,
            group,
            args.record_bytes,
            args.grown_from_mib.min(args.log_mib),
            args.log_mib,
        )?);
    }
    let mut subjects: Vec<&mut dyn Subject> = vec![&mut in_place, &mut append];
    subjects.extend(committers.iter_mut().map(|c| c as &mut dyn Subject));
    let mut measured = measure::round_robin(&window, &mut subjects)?.into_iter();
    let raw_prealloc = measured.next().expect("one figure per subject");
    let raw_append = measured.next().expect("one figure per subject");
    let groups = committers
        .iter()
        .zip(measured)
        .map(|(c, measured)| GroupRun {
            group: c.group(),
            measured,
            checkpoints: c.checkpoints_installed(),
            laps: c.laps(),
        })
        .collect();
    let report = Report {
        args: &args,
        counter,
        raw_prealloc,
        raw_append,
        groups,
    };
    report.print();
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report.json()).expect("a JSON value serializes");
        fs::write(path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    in_place.remove()?;
    append.remove()?;
    committers.into_iter().try_for_each(Committer::remove)
}

/// The store at one group size.
struct GroupRun {
    group: usize,
    measured: Measured,
    /// Checkpoints installed while measuring.
    checkpoints: u64,
    /// How many times the log's end went round the ring, by the end.
    laps: f64,
}

/// The run's own subdirectory of `--dir`, removed when the run ends, also on error.
struct WorkDir {
    path: PathBuf,
}

impl WorkDir {
    fn create(dir: &Path) -> anyhow::Result<WorkDir> {
        let meta = fs::metadata(dir).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                anyhow!(
                    "--dir {}: no such directory (create it first)",
                    dir.display()
                )
            }
            _ => anyhow!("--dir {}: {e}", dir.display()),
        })?;
        if !meta.is_dir() {
            bail!("--dir {}: not a directory", dir.display());
        }
        let path = dir.join(format!("pure-bench-log-{}", std::process::id()));
        if path.exists() {
            fs::remove_dir_all(&path).with_context(|| format!("removing {}", path.display()))?;
        }
        fs::create_dir(&path)
            .with_context(|| format!("--dir {}: cannot create files in it", dir.display()))?;
        Ok(WorkDir { path })
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_dir_all(&self.path) {
            eprintln!("warning: could not remove {}: {e}", self.path.display());
        }
    }
}

/// Every figure of a run, for the table and the JSON.
struct Report<'a> {
    args: &'a Args,
    counter: Option<DeviceCounter>,
    raw_prealloc: Measured,
    raw_append: Measured,
    groups: Vec<GroupRun>,
}

impl Report<'_> {
    fn print(&self) {
        print_header(self.args, self.counter.as_ref());
        row("raw 4K in place", &self.raw_prealloc, None);
        row("raw 4K appending", &self.raw_append, None);
        for g in &self.groups {
            let label = format!("store, group {}", g.group);
            row(&label, &g.measured, Some((g.checkpoints, g.laps)));
        }
        self.print_ratios();
        self.print_notes();
    }

    fn print_ratios(&self) {
        let Some(first) = self.groups.iter().find(|g| g.group == 1) else {
            return;
        };
        let store = first.measured.steps_per_s();
        println!(
            "store@1 / raw in place = {:.2}; store@1 / raw appending = {:.2}",
            store / self.raw_prealloc.steps_per_s(),
            store / self.raw_append.steps_per_s(),
        );
    }

    fn print_notes(&self) {
        println!(
            "What the numbers include: in-process, no network; each row was measured for {} s \
             in turns of {} s, side by side. raw = one 4 KiB pwrite + one fdatasync per sync (a \
             record there is one 4 KiB block); in place cycles over a zero-filled, synced {} MiB \
             file, appending grows a new file. store = the group's appends + Store::commit (one \
             group = one sync); latency per group, including any wait for log space and the \
             checkpoint bookkeeping. dev B/rec = growth of the device's sectors-written counter \
             over a turn (a syncfs runs before each), divided by the turn's records, median over the \
             records (each counts with its turn's figure); (mean) = the same over all turns: file-system metadata and journal included, \
             and also whatever other processes wrote to the device meanwhile. \
             CPU = user + system of the whole process, per sync. Each store's log began at {} \
             MiB, grew in place (doubling, untimed) to {} MiB, and lapped that ring once, \
             untimed, before measuring, so measured commits overwrite reused log space; laps = \
             where its log ended / capacity; ckpts = checkpoints installed while measuring (one \
             starts in the background when the log is half full).",
            self.args.seconds,
            self.args.slice_seconds,
            self.args.raw_file_mib,
            self.args.grown_from_mib.min(self.args.log_mib),
            self.args.log_mib
        );
    }

    fn json(&self) -> LogJson {
        let groups = self
            .groups
            .iter()
            .map(|g| GroupJson {
                group_records: g.group,
                syncs_per_s: g.measured.steps_per_s(),
                records_per_s: g.measured.records_per_s(),
                p50_us: g.measured.latency_us(0.5),
                p99_us: g.measured.latency_us(0.99),
                p999_us: g.measured.latency_us(0.999),
                device_bytes_per_record: g.measured.device_bytes_per_record(),
            })
            .collect();
        LogJson {
            raw_prealloc_syncs_per_s: self.raw_prealloc.steps_per_s(),
            raw_append_syncs_per_s: self.raw_append.steps_per_s(),
            groups,
        }
    }
}

/// The `--json` file, fields in this order (the format).
#[derive(serde::Serialize)]
struct LogJson {
    raw_prealloc_syncs_per_s: f64,
    raw_append_syncs_per_s: f64,
    groups: Vec<GroupJson>,
}

#[derive(serde::Serialize)]
struct GroupJson {
    group_records: usize,
    syncs_per_s: f64,
    records_per_s: f64,
    p50_us: f64,
    p99_us: f64,
    p999_us: f64,
    /// `null` when the file system has no block device counter.
    device_bytes_per_record: Option<f64>,
}

fn print_header(args: &Args, counter: Option<&DeviceCounter>) {
    let device = match counter {
        Some(c) => format!("block device {}", c.device),
        None => "no block device counter (tmpfs, overlay or btrfs?)".to_string(),
    };
    println!(
        "pure-bench log: {} ({device}), {} s per row in turns of {} s, records of {} B",
        args.dir.display(),
        args.seconds,
        args.slice_seconds,
        args.record_bytes
    );
    println!(
        "{:<18} {:>9} {:>10} {:>8} {:>8} {:>9} {:>9} {:>9} {:>10} {:>9} {:>6} {:>6}",
        "",
        "syncs/s",
        "records/s",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs",
        "dev B/rec",
        "(mean)",
        "CPU µs/sy",
        "ckpts",
        "laps"
    );
}

fn row(label: &str, m: &Measured, ring: Option<(u64, f64)>) {
    let bytes = |v: Option<f64>| v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.0}"));
    let (device, device_mean) = (
        bytes(m.device_bytes_per_record()),
        bytes(m.device_bytes_per_record_mean()),
    );
    let (checkpoints, laps) = match ring {
        Some((c, l)) => (c.to_string(), format!("{l:.2}")),
        None => ("-".to_string(), "-".to_string()),
    };
    let (rates, latencies) = (
        format!("{:>9.0} {:>10.0}", m.steps_per_s(), m.records_per_s()),
        format!(
            "{:>8.0} {:>8.0} {:>9.0} {:>9.0}",
            m.latency_us(0.5),
            m.latency_us(0.99),
            m.latency_us(0.999),
            m.max_us()
        ),
    );
    let cpu = m.cpu_us_per_step();
    println!(
        "{label:<18} {rates} {latencies} {device:>9} {device_mean:>10} {cpu:>9.1} \
         {checkpoints:>6} {laps:>6}"
    );
}
