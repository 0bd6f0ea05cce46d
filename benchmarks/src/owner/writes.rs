//! Part 1 of `pure-bench owner`: write throughput of the runtime in-process (no HTTP), a handler
//! that updates a row by key and one that inserts, at several numbers of clients that wait for
//! each answer, with sync `always` on a disk directory and `none`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;
use pure_lang::{App, Limits};
use pure_runtime::{Runtime, RuntimeOptions, SyncMode};
use pure_store::sim::SimRng;
use serde_json::json;

use super::{body, Args};
use crate::harness::device::DeviceCounter;
use crate::harness::usage::process_cpu;

const WRITES_MANIFEST: &str = r#"{ "name": "owner-bench",
  "routes": { "POST /u": "update", "POST /i": "insert", "POST /l": "load" },
  "tables": { "counters": ["n", "total"], "events": ["a", "b", "c"] } }"#;

const WRITES_SCRIPT: &str = r#"
fn update(req) { let r = counters.get(req.body.k); r.n += 1; r.total += req.body.v; r.save(); r.n }
fn insert(req) { events.insert(req.body.id, #{ a: req.body.v, b: "event", c: 0 }); true }
fn load(req) { for k in req.body.from..req.body.to { counters.insert(k, #{ n: 0, total: 0 }); } }
"#;

const COUNTER_ROWS: i64 = 10_000;

pub(super) fn run(args: &Args) -> anyhow::Result<()> {
    println!("## owner: write throughput (in-process, no HTTP; clients wait for each answer)\n");
    println!(
        "| handler | sync | clients | writes/s | p50 µs | p99 µs | p99.9 µs | device B/write | owner busy | CPU µs/write |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut syncs = vec![(SyncMode::None, None)];
    if let Some(dir) = &args.dir {
        syncs.insert(0, (SyncMode::Always, Some(dir.clone())));
    }
    for (sync, dir) in syncs {
        for handler in ["update", "insert"] {
            for &clients in &args.clients {
                let row = throughput(args, handler, sync, dir.as_deref(), clients)?;
                println!("{row}");
            }
        }
    }
    println!();
    Ok(())
}

fn throughput(
    args: &Args,
    handler: &str,
    sync: SyncMode,
    dir: Option<&Path>,
    clients: usize,
) -> anyhow::Result<String> {
    let parent = match dir {
        Some(dir) => dir.to_path_buf(),
        None => std::env::temp_dir(),
    };
    let data = tempfile_dir(&parent)?;
    let rt = loaded_runtime(sync, &data)?;
    let device = dir.and_then(DeviceCounter::for_path);
    let bytes_before = device.as_ref().and_then(DeviceCounter::bytes_written);
    let busy_before = rt.metrics().owner_busy_seconds_total;
    let cpu_before = process_cpu();
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(args.seconds);
    let histograms: Vec<anyhow::Result<(Histogram<u64>, u64)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|client| {
                let rt = rt.clone();
                s.spawn(move || client_loop(&rt, handler, client as i64, deadline))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a client panicked"))
            .collect()
    });
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = process_cpu() - cpu_before;
    let busy = rt.metrics().owner_busy_seconds_total - busy_before;
    let bytes_after = device.as_ref().and_then(DeviceCounter::bytes_written);
    rt.shutdown();
    drop(rt);
    let _ = std::fs::remove_dir_all(&data);

    let (all, count) = merge(histograms)?;
    let bytes = match (bytes_before, bytes_after) {
        (Some(b), Some(a)) => format!("{:.0}", (a - b) as f64 / count.max(1) as f64),
        _ => "n/a".into(),
    };
    let sync_name = if sync == SyncMode::Always {
        "always"
    } else {
        "none"
    };
    Ok(format!(
        "| {handler} | {sync_name} | {clients} | {:.0} | {:.0} | {:.0} | {:.0} | {bytes} | {:.0}% | {:.1} |",
        count as f64 / elapsed,
        all.value_at_quantile(0.5) as f64 / 1000.0,
        all.value_at_quantile(0.99) as f64 / 1000.0,
        all.value_at_quantile(0.999) as f64 / 1000.0,
        100.0 * busy / elapsed,
        cpu.as_secs_f64() * 1e6 / count.max(1) as f64,
    ))
}

/// The runtime on `data`, with `COUNTER_ROWS` counters written.
fn loaded_runtime(sync: SyncMode, data: &Path) -> anyhow::Result<Runtime> {
    let app = App::from_sources(
        WRITES_MANIFEST,
        vec![("bench.rhai".into(), WRITES_SCRIPT.into())],
        Limits::default(),
    )?;
    let options = RuntimeOptions {
        sync,
        ..RuntimeOptions::default()
    };
    let rt = Runtime::open(app, data, options).map_err(|e| anyhow::anyhow!("{e}"))?;
    for from in (0..COUNTER_ROWS).step_by(1000) {
        let request = body(json!({"from": from, "to": from + 1000}));
        answer(rt.write("load", request))?;
    }
    Ok(rt)
}

/// The clients' latencies in one histogram, and their calls in all.
fn merge(
    histograms: Vec<anyhow::Result<(Histogram<u64>, u64)>>,
) -> anyhow::Result<(Histogram<u64>, u64)> {
    let mut all = Histogram::<u64>::new(3)?;
    let mut count = 0;
    for result in histograms {
        let (h, n) = result?;
        all.add(h)?;
        count += n;
    }
    Ok((all, count))
}

fn client_loop(
    rt: &Runtime,
    handler: &str,
    client: i64,
    deadline: Instant,
) -> anyhow::Result<(Histogram<u64>, u64)> {
    let mut histogram = Histogram::<u64>::new(3)?;
    let mut rng = SimRng::new(client as u64 + 1);
    let mut count = 0u64;
    while Instant::now() < deadline {
        let request = match handler {
            "update" => body(json!({"k": rng.below(COUNTER_ROWS as u64), "v": 3})),
            _ => body(json!({"id": client * 1_000_000_000 + count as i64, "v": 3})),
        };
        let started = Instant::now();
        answer(rt.write(handler, request))?;
        histogram.record(started.elapsed().as_nanos() as u64)?;
        count += 1;
    }
    Ok((histogram, count))
}

fn answer(
    reply: Result<pure_runtime::WriteReply, pure_runtime::HandlerError>,
) -> anyhow::Result<serde_json::Value> {
    let reply = reply.map_err(|e| anyhow::anyhow!("write refused: {e}"))?;
    let result = reply
        .blocking_recv()
        .context("the runtime dropped a write")?;
    result
        .map(|answer| answer.body.to_value())
        .map_err(|e| anyhow::anyhow!("write failed: {e}"))
}

fn tempfile_dir(parent: &Path) -> anyhow::Result<PathBuf> {
    let name = format!("pure-bench-owner-{}-{}", std::process::id(), rand_suffix());
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn rand_suffix() -> u64 {
    Instant::now().elapsed().as_nanos() as u64 ^ (std::process::id() as u64).rotate_left(17)
}
