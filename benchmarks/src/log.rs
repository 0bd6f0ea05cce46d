//! `pure-bench log`: what a durable commit costs on a directory's device.
//!
//! In one run, on the same file system: (a) the raw device limit — 4 KiB `pwrite` + `fdatasync`
//! in a loop, once over a preallocated, already-written file (cycling over it), once appending to
//! a growing file; (b) the store (`pure_store::Store`) committing groups of records, at several
//! group sizes, with checkpoints written in the background so that its ring of log space is
//! reused the way it is in steady state.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use pure_store::{CheckpointDone, Store, StoreOptions, SyncMode};

use crate::device::DeviceCounter;
use crate::measure::{self, Measured, Window};

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

    /// Duration of each measurement, in seconds; fractions allowed (0.2). A run makes two raw
    /// measurements plus one per group size, and spends extra time preparing files.
    #[arg(long, value_name = "SECONDS", default_value_t = 3.0, value_parser = parse_seconds)]
    pub seconds: f64,

    /// Group sizes for the store: records appended before each commit, comma-separated.
    #[arg(long, value_name = "N,N,...", value_delimiter = ',', default_values_t = [1, 16, 64, 256])]
    pub groups: Vec<usize>,

    /// Log capacity given to the store, in MiB. A checkpoint is started in the background when
    /// the log is half full, so a run that writes more than this laps the ring and measures
    /// commits overwriting reused space (the steady state).
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    pub log_mib: u64,

    /// Size of the preallocated file of the raw in-place loop, in MiB; the loop cycles over it.
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    pub raw_file_mib: u64,

    /// Also write the figures as JSON to this file: raw_prealloc_syncs_per_s,
    /// raw_append_syncs_per_s and, per group size, group_records, syncs_per_s, records_per_s,
    /// p50_us, p99_us, p999_us, device_bytes_per_record (null when the device has no counter).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(s),
        _ => Err(format!(
            "expected a positive number of seconds, got {text:?}"
        )),
    }
}

/// The raw loop writes blocks of this size, the size of a page and of most devices' blocks.
const BLOCK: usize = 4096;
/// Groups that lap the ring before a measurement: 16 records of 16 KiB, 256 KiB a commit.
const LAP_GROUP_RECORDS: usize = 16;
const LAP_RECORD_BYTES: u64 = 16 << 10;
/// The checkpoint image the store is given: the benchmark has no state, only the log matters.
const TINY_IMAGE: &[u8] = b"pure-bench log: no state";

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.groups.is_empty() || args.groups.contains(&0) {
        bail!("--groups needs group sizes of at least 1 record");
    }
    let work = WorkDir::create(&args.dir)?;
    let counter = DeviceCounter::for_path(&work.path);
    let window = Window {
        duration: Duration::from_secs_f64(args.seconds),
        dir: work.path.clone(),
        counter: counter.clone(),
    };
    print_header(&args, counter.as_ref());
    // Rows print as they are measured: a store failure still leaves the raw figures on screen.
    let raw_prealloc = raw_prealloc(&work.path, args.raw_file_mib, &window)?;
    row("raw 4K in place", &raw_prealloc, None);
    let raw_append = raw_append(&work.path, &window)?;
    row("raw 4K appending", &raw_append, None);
    let mut groups = Vec::new();
    for &group in &args.groups {
        let run = store_group(&work.path, group, &args, &window)?;
        row(
            &format!("store, group {group}"),
            &run.measured,
            Some((run.checkpoints, run.laps)),
        );
        groups.push(run);
    }
    let report = Report {
        args: &args,
        raw_prealloc,
        raw_append,
        groups,
    };
    report.print_ratios();
    report.print_notes();
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report.json()).expect("a JSON value serializes");
        fs::write(path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
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

/// A 4 KiB block whose first bytes change with every write, so no layer can skip it as unchanged.
fn stamp(block: &mut [u8], n: u64) {
    block[..8].copy_from_slice(&n.to_le_bytes());
}

fn raw_prealloc(dir: &Path, mib: u64, window: &Window) -> anyhow::Result<Measured> {
    let path = dir.join("raw-prealloc");
    let blocks = (mib.max(1) << 20) / BLOCK as u64;
    let file = prealloc_file(&path, blocks)?;
    let mut block = vec![0xA5u8; BLOCK];
    let mut n = 0u64;
    let measured = measure::measure("raw 4K in place", window, || {
        stamp(&mut block, n);
        file.write_all_at(&block, (n % blocks) * BLOCK as u64)
            .context("raw pwrite")?;
        file.sync_data().context("raw fdatasync")?;
        n += 1;
        Ok(1)
    })?;
    drop(file);
    fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    Ok(measured)
}

/// Writes `blocks` zero blocks (real writes, not fallocate) and syncs them, file and directory.
fn prealloc_file(path: &Path, blocks: u64) -> anyhow::Result<File> {
    let spinner = measure::spinner(&format!(
        "zero-filling {} MiB",
        (blocks * BLOCK as u64) >> 20
    ));
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    let chunk = vec![0u8; 1 << 20];
    let mut left = blocks * BLOCK as u64;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        file.write_all(&chunk[..n])
            .with_context(|| format!("writing {}", path.display()))?;
        left -= n as u64;
    }
    file.sync_all()
        .with_context(|| format!("syncing {}", path.display()))?;
    let parent = path.parent().expect("the file lives in the work directory");
    File::open(parent)
        .and_then(|d| d.sync_all())
        .context("syncing the work directory")?;
    spinner.finish_and_clear();
    Ok(file)
}

fn raw_append(dir: &Path, window: &Window) -> anyhow::Result<Measured> {
    let path = dir.join("raw-append");
    let file = File::create_new(&path).with_context(|| format!("creating {}", path.display()))?;
    let mut block = vec![0xA5u8; BLOCK];
    let mut n = 0u64;
    let measured = measure::measure("raw 4K appending", window, || {
        stamp(&mut block, n);
        file.write_all_at(&block, n * BLOCK as u64)
            .context("raw append write")?;
        file.sync_data().context("raw append fdatasync")?;
        n += 1;
        Ok(1)
    })?;
    drop(file);
    fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    Ok(measured)
}

/// The store at one group size, and how many checkpoints it installed meanwhile.
struct GroupRun {
    group: usize,
    measured: Measured,
    /// Checkpoints installed during the window.
    checkpoints: u64,
    /// How many times the log's end went round the ring, by the end of the window.
    laps: f64,
}

fn store_group(dir: &Path, group: usize, args: &Args, window: &Window) -> anyhow::Result<GroupRun> {
    let store_dir = dir.join(format!("store-g{group}"));
    fs::create_dir(&store_dir).with_context(|| format!("creating {}", store_dir.display()))?;
    let run = commit_groups(&store_dir, group, args, window)?;
    fs::remove_dir_all(&store_dir).with_context(|| format!("removing {}", store_dir.display()))?;
    Ok(run)
}

/// Opens a fresh store in `store_dir` and commits groups of `group` records for the window; the
/// store is closed when this returns.
fn commit_groups(
    store_dir: &Path,
    group: usize,
    args: &Args,
    window: &Window,
) -> anyhow::Result<GroupRun> {
    let options = StoreOptions {
        sync: SyncMode::Always,
        log_capacity_bytes: args.log_mib << 20,
    };
    let spinner = measure::spinner(&format!("opening the store ({} MiB log)", args.log_mib));
    let mut store = Store::open(store_dir, options)
        .map_err(store_error("opening the store"))?
        .store;
    let mut checkpoints = Checkpoints::default();
    spinner.set_message("lapping the ring once before measuring");
    lap_once(&mut store, &mut checkpoints)?;
    spinner.finish_and_clear();
    checkpoints.installed = 0;
    let mut record = vec![0u8; args.record_bytes];
    let mut n = 0u64;
    let label = format!("store, group {group}");
    let measured = measure::measure(&label, window, || {
        checkpoints.tend(&mut store)?;
        for _ in 0..group {
            stamp_record(&mut record, n);
            n += 1;
            append(&mut store, &mut checkpoints, &record)?;
        }
        commit(&mut store, &mut checkpoints)?;
        Ok(group as u64)
    })?;
    let laps = store.log_end_position() as f64 / store.log_capacity_bytes() as f64;
    checkpoints.wait(&mut store)?;
    Ok(GroupRun {
        group,
        measured,
        checkpoints: checkpoints.installed,
        laps,
    })
}

/// Commits large groups, untimed, until the log's end has gone once round the ring: the
/// measured commits then overwrite log space that the store used before and a checkpoint freed,
/// which is the steady state of a long-running store, not a fresh log's first pass.
fn lap_once(store: &mut Store, checkpoints: &mut Checkpoints) -> anyhow::Result<()> {
    let capacity = store.log_capacity_bytes();
    let record = vec![0x5Au8; (capacity / 64).clamp(1, LAP_RECORD_BYTES) as usize];
    while store.log_end_position() < capacity {
        checkpoints.tend(store)?;
        for _ in 0..LAP_GROUP_RECORDS {
            append(store, checkpoints, &record)?;
        }
        commit(store, checkpoints)?;
    }
    Ok(())
}

/// Records vary in content so that nothing below can compress or deduplicate them away.
fn stamp_record(record: &mut [u8], n: u64) {
    let bytes = n.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes();
    for (i, b) in record.iter_mut().enumerate() {
        *b = bytes[i % 8] ^ (i as u8);
    }
}

/// Appends one record. `LogFull` here means the pending group reached the largest frame: commit
/// it and go on (the benchmark's groups are far smaller, so this does not happen in a window).
fn append(store: &mut Store, ckpt: &mut Checkpoints, record: &[u8]) -> anyhow::Result<()> {
    loop {
        match store.append(record) {
            Ok(_) => return Ok(()),
            Err(pure_store::Error::LogFull { .. }) => commit(store, ckpt)?,
            Err(e) => return Err(store_error("append")(e)),
        }
    }
}

/// Commits, waiting for a checkpoint when the log is full (backpressure, as the runtime would).
fn commit(store: &mut Store, ckpt: &mut Checkpoints) -> anyhow::Result<()> {
    loop {
        match store.commit() {
            Ok(_) => return Ok(()),
            Err(pure_store::Error::LogFull { .. }) => ckpt.free_space(store)?,
            Err(e) => return Err(store_error("commit")(e)),
        }
    }
}

type CheckpointThread = JoinHandle<Result<CheckpointDone, pure_store::Error>>;

/// Background checkpoints of a tiny image, so that the store may reuse its log space.
#[derive(Default)]
struct Checkpoints {
    in_flight: Option<CheckpointThread>,
    installed: u64,
}

impl Checkpoints {
    /// Installs a finished checkpoint; starts one once the log is half full.
    fn tend(&mut self, store: &mut Store) -> anyhow::Result<()> {
        if self.in_flight.as_ref().is_some_and(|t| t.is_finished()) {
            self.install(store)?;
        }
        if self.in_flight.is_none() && store.log_used_bytes() * 2 >= store.log_capacity_bytes() {
            self.start(store)?;
        }
        Ok(())
    }

    /// The log is full: wait for a checkpoint (starting one if none runs) and install it.
    fn free_space(&mut self, store: &mut Store) -> anyhow::Result<()> {
        if self.in_flight.is_none() {
            self.start(store)?;
        }
        self.install(store)
    }

    fn wait(&mut self, store: &mut Store) -> anyhow::Result<()> {
        if self.in_flight.is_some() {
            self.install(store)?;
        }
        Ok(())
    }

    fn start(&mut self, store: &Store) -> anyhow::Result<()> {
        let mut writer = store
            .checkpoint_writer(store.durable_lsn())
            .map_err(store_error("checkpoint"))?;
        self.in_flight = Some(std::thread::spawn(move || {
            writer
                .write_all(TINY_IMAGE)
                .map_err(|source| pure_store::Error::Io {
                    op: "writing the checkpoint image",
                    path: PathBuf::new(),
                    source,
                })?;
            writer.finish()
        }));
        Ok(())
    }

    fn install(&mut self, store: &mut Store) -> anyhow::Result<()> {
        let thread = self
            .in_flight
            .take()
            .expect("install is called with a checkpoint running");
        let done = thread
            .join()
            .map_err(|_| anyhow!("the checkpoint thread panicked"))?
            .map_err(store_error("checkpoint"))?;
        store
            .install_checkpoint(done)
            .map_err(store_error("installing a checkpoint"))?;
        self.installed += 1;
        Ok(())
    }
}

fn store_error(op: &'static str) -> impl FnOnce(pure_store::Error) -> anyhow::Error {
    move |e| anyhow::Error::new(e).context(format!("store: {op}"))
}

/// Every figure of a run, for the table and the JSON.
struct Report<'a> {
    args: &'a Args,
    raw_prealloc: Measured,
    raw_append: Measured,
    groups: Vec<GroupRun>,
}

impl Report<'_> {
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
            "What the numbers include: in-process, no network. raw = one 4 KiB pwrite + one \
             fdatasync per sync (a record there is one 4 KiB block); in place cycles over a \
             zero-filled, synced {} MiB file, appending grows a new file. store = appending the \
             group's records + Store::commit (one group = one sync), latency per group, including \
             any wait for log space. dev B/rec = growth of the device's sectors-written counter \
             across the window and a syncfs after it, divided by records: it includes file-system \
             metadata and journal, and whatever other processes wrote to the device meanwhile. \
             CPU = user + system of the whole process, per sync. Before each store window the \
             ring is lapped once with large untimed commits, so the window overwrites reused log \
             space; laps = where the log ended / the {} MiB capacity; ckpts = checkpoints \
             installed during the window (one starts in the background when the log is half \
             full).",
            self.args.raw_file_mib, self.args.log_mib
        );
    }

    fn json(&self) -> serde_json::Value {
        let groups: Vec<serde_json::Value> = self
            .groups
            .iter()
            .map(|g| {
                let m = &g.measured;
                serde_json::json!({
                    "group_records": g.group,
                    "syncs_per_s": m.steps_per_s(),
                    "records_per_s": m.records_per_s(),
                    "p50_us": m.latency_us(0.5),
                    "p99_us": m.latency_us(0.99),
                    "p999_us": m.latency_us(0.999),
                    "device_bytes_per_record": m.device_bytes_per_record(),
                })
            })
            .collect();
        serde_json::json!({
            "raw_prealloc_syncs_per_s": self.raw_prealloc.steps_per_s(),
            "raw_append_syncs_per_s": self.raw_append.steps_per_s(),
            "groups": groups,
        })
    }
}

fn print_header(args: &Args, counter: Option<&DeviceCounter>) {
    let device = match counter {
        Some(c) => format!("block device {}", c.device),
        None => "no block device counter (tmpfs, overlay or btrfs?)".to_string(),
    };
    println!(
        "pure-bench log: {} ({device}), {} s per measurement, records of {} B",
        args.dir.display(),
        args.seconds,
        args.record_bytes
    );
    println!(
        "{:<18} {:>9} {:>10} {:>8} {:>8} {:>9} {:>9} {:>10} {:>9} {:>6} {:>6}",
        "",
        "syncs/s",
        "records/s",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs",
        "dev B/rec",
        "CPU µs/sy",
        "ckpts",
        "laps"
    );
}

fn row(label: &str, m: &Measured, ring: Option<(u64, f64)>) {
    let device = match m.device_bytes_per_record() {
        Some(v) => format!("{v:.0}"),
        None => "n/a".to_string(),
    };
    let (checkpoints, laps) = match ring {
        Some((c, l)) => (c.to_string(), format!("{l:.2}")),
        None => ("-".to_string(), "-".to_string()),
    };
    println!(
        "{label:<18} {:>9.0} {:>10.0} {:>8.0} {:>8.0} {:>9.0} {:>9.0} {device:>10} {:>9.1} {checkpoints:>6} {laps:>6}",
        m.steps_per_s(),
        m.records_per_s(),
        m.latency_us(0.5),
        m.latency_us(0.99),
        m.latency_us(0.999),
        m.max_us(),
        m.cpu_us_per_step(),
    );
}
