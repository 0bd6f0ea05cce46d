//! `pure-bench schedules`: what pending scheduled entries cost, and how late they run. Sets
//! `--entries` timers (in writes of 1,000), each due at its own time spread over `--spread`
//! seconds starting `--due-in` seconds later; measures the server's resident memory and
//! `state_bytes` before and after; then runs a closed-loop write load (`--connections`) across
//! the window in which they fall due, and reports how late they ran (each adds its lateness,
//! `now()` past its due time, to a histogram of power-of-two buckets in the app) and what the
//! write load's latency was before and while they ran.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Result};
use clap::Parser;
use hdrhistogram::Histogram;

use crate::harness::http::{get_text, Client};
use crate::harness::serve::Server;
use crate::harness::usage::resident_bytes;

#[derive(Parser, Debug, Clone)]
pub struct Args {
    /// Directory for the server's data (emptied first).
    #[arg(long)]
    pub data: PathBuf,
    /// The timers app.
    #[arg(long, default_value = "benchmarks/apps/timers")]
    pub app: PathBuf,
    #[arg(long, default_value_t = 100_000)]
    pub entries: u64,
    /// Seconds from setting the timers to the first one due.
    #[arg(long, default_value_t = 8.0)]
    pub due_in: f64,
    /// Seconds over which they fall due.
    #[arg(long, default_value_t = 5.0)]
    pub spread: f64,
    /// Connections of the write load.
    #[arg(long, default_value_t = 16)]
    pub connections: usize,
    #[arg(long, default_value = "always")]
    pub sync: String,
}

fn metric(address: SocketAddr, name: &str) -> Result<f64> {
    let text = get_text(address, "/_pure/metrics")?;
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no metric {name}"))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The write load's latencies, split at the moment the first timer falls due.
struct Load {
    stop: AtomicBool,
    firing: AtomicBool,
    before: Mutex<Histogram<u64>>,
    during: Mutex<Histogram<u64>>,
    count: [AtomicU64; 2],
}

pub fn run(args: Args) -> Result<()> {
    if args.data.exists() {
        std::fs::remove_dir_all(&args.data)?;
    }
    std::fs::create_dir_all(&args.data)?;
    let server = Server::start(&args.app, &args.data, &["--sync", &args.sync])?;
    let address = server.address;
    std::thread::sleep(Duration::from_millis(300));
    let (rss_before, _) = resident_bytes(server.pid()).unwrap_or((0, 0));
    let state_before = metric(address, "pure_state_bytes")?;

    let mut client = Client::connect(address)?;
    let set_from = Instant::now();
    let due = now_ms() + (args.due_in * 1000.0) as i64;
    let step_us = (args.spread * 1e6 / args.entries as f64) as i64;
    let mut from = 0;
    while from < args.entries {
        let count = (args.entries - from).min(1000);
        let body =
            format!("{{\"from\":{from},\"count\":{count},\"due\":{due},\"step_us\":{step_us}}}");
        let (status, answer) = client.send("POST", "/timers", &body)?;
        if status != 200 {
            bail!("setting timers: {status} {answer}");
        }
        from += count;
    }
    let set_seconds = set_from.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(500));
    let (rss_after, _) = resident_bytes(server.pid()).unwrap_or((0, 0));
    let state_after = metric(address, "pure_state_bytes")?;
    let pending = metric(address, "pure_schedules_pending")?;
    println!(
        "pure-bench schedules: {} entries set in {:.2} s ({} a write), {} pending; resident \
         memory {:.1} MB → {:.1} MB ({:.0} bytes an entry), state_bytes {:.1} MB → {:.1} MB \
         ({:.0} bytes an entry)",
        args.entries,
        set_seconds,
        1000,
        pending,
        rss_before as f64 / 1e6,
        rss_after as f64 / 1e6,
        (rss_after as f64 - rss_before as f64) / args.entries as f64,
        state_before / 1e6,
        state_after / 1e6,
        (state_after - state_before) / args.entries as f64,
    );

    let histogram = || Histogram::new_with_bounds(1, 60_000_000, 3).expect("bounds");
    let load = Arc::new(Load {
        stop: AtomicBool::new(false),
        firing: AtomicBool::new(false),
        before: Mutex::new(histogram()),
        during: Mutex::new(histogram()),
        count: [AtomicU64::new(0), AtomicU64::new(0)],
    });
    let workers: Vec<_> = (0..args.connections)
        .map(|k| {
            let load = load.clone();
            std::thread::spawn(move || -> Result<()> {
                let mut client = Client::connect(address)?;
                let mut i = 0u64;
                while !load.stop.load(Relaxed) {
                    let started = Instant::now();
                    let (status, answer) =
                        client.send("POST", &format!("/noise/{}", k as u64 * 1_000_000 + i), "")?;
                    if status != 200 {
                        bail!("noise: {status} {answer}");
                    }
                    let took = started.elapsed().as_micros().max(1) as u64;
                    let during = load.firing.load(Relaxed) as usize;
                    let histogram = if during == 1 {
                        &load.during
                    } else {
                        &load.before
                    };
                    histogram.lock().expect("h").saturating_record(took);
                    load.count[during].fetch_add(1, Relaxed);
                    i += 1;
                }
                Ok(())
            })
        })
        .collect();
    // The load runs a second before the first timer is due, through the window, until every
    // timer has run.
    let load_start = Instant::now();
    while now_ms() < due {
        std::thread::sleep(Duration::from_millis(5));
    }
    let before_seconds = load_start.elapsed().as_secs_f64();
    load.firing.store(true, Relaxed);
    let firing_from = Instant::now();
    let deadline = firing_from + Duration::from_secs_f64(args.spread + 120.0);
    loop {
        let ran = metric(address, "pure_scheduled_runs_total")?;
        if ran >= args.entries as f64 {
            break;
        }
        if Instant::now() > deadline {
            bail!("only {ran} of {} timers ran", args.entries);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let firing_seconds = firing_from.elapsed().as_secs_f64();
    load.stop.store(true, Relaxed);
    for worker in workers {
        worker.join().expect("worker")?;
    }
    let buckets: serde_json::Value =
        serde_json::from_str(&get_text(address, "/lateness")?).unwrap_or_default();
    let mut counts: Vec<(u64, u64)> = buckets
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| (r[0].as_u64().unwrap_or(0), r[1].as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default();
    counts.sort();
    let total: u64 = counts.iter().map(|(_, c)| c).sum();
    // The upper bound of the bucket holding the quantile: lateness is below it.
    let quantile = |q: f64| {
        let mut seen = 0;
        for (bucket, count) in &counts {
            seen += count;
            if seen as f64 >= q * total as f64 {
                return 1u64 << bucket;
            }
        }
        0
    };
    let failures = metric(address, "pure_scheduled_failures_total")?;
    println!(
        "{} timers ran in {:.2} s (due over {} s), {} failed; lateness (now() past due) p50 < {} \
         ms, p99 < {} ms, max < {} ms; buckets (under 2^b ms: count) {:?}",
        total,
        firing_seconds,
        args.spread,
        failures,
        quantile(0.5),
        quantile(0.99),
        quantile(1.0),
        counts
    );
    let before = load.before.lock().expect("h");
    let during = load.during.lock().expect("h");
    println!(
        "write load ({} connections): before the timers {:.0} writes/s, p50 {} µs p99 {} µs; \
         while they ran {:.0} writes/s, p50 {} µs p99 {} µs",
        args.connections,
        load.count[0].load(Relaxed) as f64 / before_seconds,
        before.value_at_quantile(0.5),
        before.value_at_quantile(0.99),
        load.count[1].load(Relaxed) as f64 / firing_seconds,
        during.value_at_quantile(0.5),
        during.value_at_quantile(0.99),
    );
    server.stop()
}
