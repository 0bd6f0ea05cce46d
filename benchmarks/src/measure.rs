//! One timed measurement window: run a step again and again for a fixed duration and collect what
//! the reports need — the step's latency distribution, the bytes that reached the device, the
//! CPU the process used — with a progress bar on stderr while it runs.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};

use crate::device::DeviceCounter;

/// Where and how long to measure.
pub struct Window {
    pub duration: Duration,
    /// A directory on the file system under test: flushed before and after each measurement so
    /// that earlier dirty data does not land in it, and its own deferred writes do.
    pub dir: PathBuf,
    pub counter: Option<DeviceCounter>,
}

/// What one window measured.
pub struct Measured {
    /// Steps completed (for a sync benchmark: syncs).
    pub steps: u64,
    /// Records made durable in all.
    pub records: u64,
    pub elapsed: Duration,
    /// Step latency in nanoseconds.
    pub latency_ns: Histogram<u64>,
    /// Bytes the device counter grew by, including the flush after the window.
    pub device_bytes: Option<u64>,
    /// User + system CPU of the whole process during the timed window.
    pub cpu: Duration,
}

impl Measured {
    pub fn steps_per_s(&self) -> f64 {
        self.steps as f64 / self.elapsed.as_secs_f64()
    }
    pub fn records_per_s(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64()
    }
    pub fn latency_us(&self, quantile: f64) -> f64 {
        self.latency_ns.value_at_quantile(quantile) as f64 / 1000.0
    }
    pub fn max_us(&self) -> f64 {
        self.latency_ns.max() as f64 / 1000.0
    }
    pub fn device_bytes_per_record(&self) -> Option<f64> {
        Some(self.device_bytes? as f64 / self.records.max(1) as f64)
    }
    pub fn cpu_us_per_step(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.steps.max(1) as f64
    }
}

/// Latencies above this (a minute) are recorded as this.
const LATENCY_MAX_NS: u64 = 60_000_000_000;

/// Runs `step` until the window's duration has passed (at least once). `step` returns how many
/// records it made durable; its whole duration is one latency sample.
pub fn measure(
    label: &str,
    window: &Window,
    mut step: impl FnMut() -> anyhow::Result<u64>,
) -> anyhow::Result<Measured> {
    let progress = progress_bar(label, window.duration);
    flush_file_system(&window.dir)?;
    let device_before = window
        .counter
        .as_ref()
        .and_then(DeviceCounter::bytes_written);
    let cpu_before = process_cpu();
    let mut latency_ns = Histogram::<u64>::new_with_bounds(1, LATENCY_MAX_NS, 3)
        .expect("the bounds and 3 significant digits are a valid setting");
    let (mut steps, mut records) = (0u64, 0u64);
    let start = Instant::now();
    let mut now = start;
    while steps == 0 || now - start < window.duration {
        let before = now;
        records += step()?;
        now = Instant::now();
        latency_ns.saturating_record((now - before).as_nanos() as u64);
        steps += 1;
        if steps % 64 == 0 {
            progress.set_position((now - start).as_millis() as u64);
        }
    }
    let elapsed = now - start;
    let cpu = process_cpu().saturating_sub(cpu_before);
    flush_file_system(&window.dir)?;
    let device_after = window
        .counter
        .as_ref()
        .and_then(DeviceCounter::bytes_written);
    let device_bytes = device_before
        .zip(device_after)
        .map(|(a, b)| b.saturating_sub(a));
    progress.finish_and_clear();
    Ok(Measured {
        steps,
        records,
        elapsed,
        latency_ns,
        device_bytes,
        cpu,
    })
}

fn progress_bar(label: &str, duration: Duration) -> ProgressBar {
    let bar = ProgressBar::new(duration.as_millis() as u64);
    let style = ProgressStyle::with_template("{msg:<24} [{bar:30}] {elapsed}")
        .expect("the template is valid")
        .progress_chars("=> ");
    bar.set_style(style);
    bar.set_message(label.to_string());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// A spinner for untimed preparation (preallocating files).
pub fn spinner(message: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_message(message.to_string());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// `syncfs` on the file system holding `dir`: nothing dirty from before a window is left to be
/// written during it, and whatever a window left dirty is counted in its bytes.
pub fn flush_file_system(dir: &Path) -> anyhow::Result<()> {
    let handle = File::open(dir).with_context(|| format!("opening {}", dir.display()))?;
    // SAFETY: the descriptor is open for the whole call; syncfs only reads it.
    let rc = unsafe { libc::syncfs(handle.as_raw_fd()) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        return Err(err).with_context(|| format!("syncfs on {}", dir.display()));
    }
    Ok(())
}

/// User + system CPU time of the whole process so far.
fn process_cpu() -> Duration {
    // SAFETY: getrusage writes only into the struct we pass; all-zero is a valid rusage.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}
