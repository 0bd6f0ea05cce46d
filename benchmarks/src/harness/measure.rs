//! Timed measurement of several subjects side by side: each runs its step again and again in
//! short slices taken in turn (round robin) until each has run for the whole duration, so that
//! the noise of a shared machine (other processes' I/O comes in bursts) falls on all of them
//! alike and their ratios hold. Per subject it collects the step latency distribution, the bytes
//! that reached the device and the CPU the process used, with a progress bar on stderr.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;

use super::device::DeviceCounter;
use super::progress;
use super::usage::process_cpu;

/// Something to measure: one step is one timed unit (for a sync benchmark, one sync).
pub trait Subject {
    fn label(&self) -> String;
    /// Runs one step; returns how many records it made durable.
    fn step(&mut self) -> anyhow::Result<u64>;
}

/// Where and how long to measure.
pub struct Window {
    /// Total measured time of each subject.
    pub duration: Duration,
    /// Length of one turn of one subject.
    pub slice: Duration,
    /// A directory on the file system under test: flushed before every slice so that no slice
    /// inherits dirty data from before it.
    pub dir: PathBuf,
    pub counter: Option<DeviceCounter>,
}

/// What the slices of one subject measured, summed.
pub struct Measured {
    /// Steps completed (for a sync benchmark: syncs).
    pub steps: u64,
    /// Records made durable in all.
    pub records: u64,
    /// Time spent in steps (the slices' wall time, without the flushes between them).
    pub elapsed: Duration,
    /// Step latency in nanoseconds.
    pub latency_ns: Histogram<u64>,
    /// Bytes the device counter grew by over the slices.
    pub device_bytes: Option<u64>,
    /// Per slice: its device bytes divided by its records, and its records.
    pub slice_device_bytes_per_record: Vec<(f64, u64)>,
    /// User + system CPU of the whole process during the slices.
    pub cpu: Duration,
}

/// Latencies above this (a minute) are recorded as this.
const LATENCY_MAX_NS: u64 = 60_000_000_000;

impl Measured {
    fn new(counted: bool) -> Measured {
        Measured {
            steps: 0,
            records: 0,
            elapsed: Duration::ZERO,
            latency_ns: Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3)
                .expect("the bounds and 3 significant digits are a valid setting"),
            device_bytes: counted.then_some(0),
            slice_device_bytes_per_record: Vec::new(),
            cpu: Duration::ZERO,
        }
    }
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
    /// Device bytes per record over all slices: the benchmark's own writes plus everything
    /// else that reached the device meanwhile.
    pub fn device_bytes_per_record_mean(&self) -> Option<f64> {
        Some(self.device_bytes? as f64 / self.records.max(1) as f64)
    }
    /// The median, over records, of their slice's device bytes per record: a burst of other
    /// processes' writes inflates a few slices, not the median; weighting by records keeps
    /// slow slices (few records) from counting as much as fast ones.
    pub fn device_bytes_per_record(&self) -> Option<f64> {
        self.device_bytes?;
        weighted_median(&self.slice_device_bytes_per_record)
    }
    pub fn cpu_us_per_step(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.steps.max(1) as f64
    }
}

/// The value below which half of the total weight lies (`None` when there is no weight).
pub fn weighted_median(values: &[(f64, u64)]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: u64 = sorted.iter().map(|&(_, w)| w).sum();
    let mut seen = 0;
    for (value, weight) in sorted {
        seen += weight;
        if seen * 2 >= total && total > 0 {
            return Some(value);
        }
    }
    None
}

/// Measures every subject for `window.duration` in turns of `window.slice` (every subject runs
/// at least one step per turn). Returns the figures in the subjects' order.
pub fn round_robin(
    window: &Window,
    subjects: &mut [&mut dyn Subject],
) -> anyhow::Result<Vec<Measured>> {
    let mut measured: Vec<Measured> = subjects
        .iter()
        .map(|_| Measured::new(window.counter.is_some()))
        .collect();
    let bar = progress::timed(window.duration * subjects.len() as u32);
    loop {
        let mut ran = false;
        for (subject, m) in subjects.iter_mut().zip(&mut measured) {
            let Some(left) = window
                .duration
                .checked_sub(m.elapsed)
                .filter(|d| !d.is_zero())
            else {
                continue;
            };
            bar.set_message(subject.label());
            run_slice(window, &mut **subject, m, left.min(window.slice))?;
            ran = true;
        }
        if !ran {
            break;
        }
    }
    bar.finish_and_clear();
    Ok(measured)
}

/// One turn: flush, run steps for `length` (at least one), add what they measured to `m`.
fn run_slice(
    window: &Window,
    subject: &mut dyn Subject,
    m: &mut Measured,
    length: Duration,
) -> anyhow::Result<()> {
    flush_file_system(&window.dir)?;
    let device_before = window
        .counter
        .as_ref()
        .and_then(DeviceCounter::bytes_written);
    let cpu_before = process_cpu();
    let start = Instant::now();
    let mut now = start;
    let records_before = m.records;
    let mut first = true;
    while first || now - start < length {
        first = false;
        let before = now;
        m.records += subject.step()?;
        now = Instant::now();
        m.latency_ns
            .saturating_record((now - before).as_nanos() as u64);
        m.steps += 1;
    }
    m.elapsed += now - start;
    m.cpu += process_cpu().saturating_sub(cpu_before);
    // No flush before this sample: every write of the subjects is synced within its step, and a
    // flush here would charge the slice with whatever other processes dirtied meanwhile.
    let device_after = window
        .counter
        .as_ref()
        .and_then(DeviceCounter::bytes_written);
    m.device_bytes = match (m.device_bytes, device_before, device_after) {
        (Some(sum), Some(before), Some(after)) => {
            let bytes = after.saturating_sub(before);
            let records = (m.records - records_before).max(1);
            m.slice_device_bytes_per_record
                .push((bytes as f64 / records as f64, records));
            Some(sum + bytes)
        }
        _ => None,
    };
    Ok(())
}

/// `syncfs` on the file system holding `dir`: nothing dirty from before a slice is left to be
/// written during it.
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

#[cfg(test)]
mod tests {
    use super::weighted_median;

    #[test]
    fn the_weighted_median_follows_the_weight() {
        assert_eq!(weighted_median(&[]), None);
        assert_eq!(weighted_median(&[(7.0, 3)]), Some(7.0));
        // One slow slice of few records against two fast ones of many.
        assert_eq!(
            weighted_median(&[(8000.0, 10), (4100.0, 500), (4200.0, 400)]),
            Some(4100.0)
        );
        assert_eq!(weighted_median(&[(9.0, 1), (1.0, 1), (5.0, 5)]), Some(5.0));
    }
}
