//! `pure-bench tpcc`: a short timed run of every engine at W=1 writes the JSON the report
//! promises (every field, consistency checked and holding), a latency log of one well-formed
//! line per measured transaction, and a well-formed SVG plot. No figure is judged here: speed
//! is measured by the benchmark itself, never by a test.

mod common;

use std::process::Command;

use common::{app_dir, mutated, pure_serve_built, BIN};
use serde_json::Value;

const TYPES: [&str; 5] = [
    "new_order",
    "payment",
    "order_status",
    "delivery",
    "stock_level",
];

const TYPE_FIELDS: [&str; 11] = [
    "count",
    "avg_ms",
    "p50_ms",
    "p90_ms",
    "p95_ms",
    "p99_ms",
    "p999_ms",
    "max_ms",
    "rollbacks",
    "errors",
    "mix_pct",
];

/// Runs one engine for a few seconds; returns its JSON, after checking the log and the plot.
fn smoke(engine: &str, extra: &[&str]) -> Value {
    let scratch = common::scratch();
    let out = |name: &str| scratch.path().join(name);
    let output = Command::new(BIN)
        .arg("tpcc")
        .args(["--engine", engine])
        .arg("--app")
        .arg(app_dir())
        .arg("--dir")
        .arg(out("run"))
        .args(["--warehouses", "1", "--seconds", "3", "--warmup", "1"])
        .args(["--terminals", "4"])
        .args(extra)
        .arg("--json")
        .arg(out("run.json"))
        .arg("--latency-log")
        .arg(out("latency.log"))
        .arg("--plot")
        .arg(out("plot.svg"))
        .output()
        .expect("run pure-bench");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let all = format!(
        "status {}\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{engine}: {all}");
    assert!(
        stdout.contains("new orders per minute") && stdout.contains("p99.9"),
        "{engine}: the report table: {all}"
    );
    assert!(
        !out("run").exists(),
        "{engine}: --dir is removed without --keep"
    );

    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out("run.json")).expect("the JSON file"))
            .expect("the JSON parses");
    for field in [
        "engine",
        "warehouses",
        "terminals",
        "seconds",
        "tx_per_s",
        "new_orders_per_min",
        "cpu_us_per_tx",
        "driver_cpu_us_per_tx",
        "device_bytes_per_tx",
        "rss_bytes",
        "state_bytes",
        "owner_core_share",
        "consistency_ok",
        "types",
    ] {
        assert!(json.get(field).is_some(), "{engine}: no {field} in {json}");
    }
    assert_eq!(json["engine"], engine);
    assert_eq!(json["warehouses"], 1);
    assert_eq!(json["consistency_ok"], true, "{engine}: {json}");
    assert!(json["tx_per_s"].as_f64().unwrap() > 0.0, "{engine}: {json}");
    assert!(json["cpu_us_per_tx"].as_f64().unwrap() > 0.0, "{engine}");
    assert!(
        json["driver_cpu_us_per_tx"].as_f64().unwrap() > 0.0,
        "{engine}"
    );
    assert!(json["rss_bytes"].as_u64().unwrap() > 0, "{engine}");
    assert!(json["state_bytes"].as_u64().unwrap() > 0, "{engine}");
    let pure = engine.starts_with("pure");
    assert_eq!(
        json["owner_core_share"].is_number(),
        pure,
        "{engine}: the owner's share is Pure's alone"
    );
    let mut total = 0;
    for kind in TYPES {
        let t = &json["types"][kind];
        for field in TYPE_FIELDS {
            assert!(t[field].is_number(), "{engine}: {kind}.{field} in {json}");
        }
        assert!(
            t["count"].as_u64().unwrap() > 0,
            "{engine}: no {kind} measured"
        );
        assert!(
            t["p50_ms"].as_f64() <= t["p99_ms"].as_f64()
                && t["p99_ms"].as_f64() <= t["max_ms"].as_f64(),
            "{engine}: {kind}'s percentiles in order"
        );
        assert_eq!(t["errors"], 0, "{engine}: {kind} had errors: {json}");
        total += t["count"].as_u64().unwrap();
    }
    assert_eq!(json["transactions"].as_u64(), Some(total));

    let log = std::fs::read_to_string(out("latency.log")).expect("the latency log");
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(
        lines.len() as u64,
        total,
        "{engine}: a line per transaction"
    );
    let mut previous = 0.0;
    for line in &lines {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 6, "{engine}: {line:?}");
        let time: f64 = f[0].parse().expect("a time");
        assert!(time >= previous, "{engine}: the log is in start order");
        previous = time;
        f[1].parse::<u32>().expect("a terminal");
        assert!(TYPES.contains(&f[2]), "{engine}: {line:?}");
        f[3].parse::<u64>().expect("a latency");
        assert!(["C", "R"].contains(&f[4]), "{engine}: {line:?}");
        assert!(["200", "422"].contains(&f[5]), "{engine}: {line:?}");
    }

    let svg = std::fs::read_to_string(out("plot.svg")).expect("the plot");
    let doc = roxmltree::Document::parse(&svg).expect("the plot is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    for kind in TYPES {
        assert!(
            doc.descendants()
                .any(|n| n.is_text() && n.text().is_some_and(|t| t.contains(kind))),
            "{engine}: {kind} in the plot's legend"
        );
    }
    json
}

#[test]
fn pure_over_http() {
    if pure_serve_built() {
        let json = smoke("pure", &[]);
        assert!(json["commits_per_s"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn pure_in_process() {
    if pure_serve_built() {
        smoke("pure-inprocess", &[]);
    }
}

#[test]
fn sqlite_per_transaction() {
    let json = smoke("sqlite", &["--threads", "2"]);
    assert_eq!(json["threads"], 2);
}

#[test]
fn sqlite_grouped() {
    let json = smoke("sqlite-grouped", &[]);
    assert!(json["tx_per_commit"].as_f64().unwrap() >= 1.0);
}

/// A run whose tables break a condition fails loudly, naming it: the check is real. The app is
/// mutated so that Payment forgets to add to the district's year-to-date (C1: W_YTD = sum of
/// D_YTD fails as soon as one payment ran).
#[test]
fn a_broken_app_fails_the_run_with_the_condition() {
    if !pure_serve_built() {
        return;
    }
    let scratch = common::scratch();
    let app = mutated(
        scratch.path(),
        "district_row.d_ytd += h_amount;",
        "district_row.d_ytd += 0 * h_amount;",
    );
    let output = Command::new(BIN)
        .arg("tpcc")
        .args(["--engine", "pure-inprocess"])
        .arg("--app")
        .arg(&app)
        .arg("--dir")
        .arg(scratch.path().join("run"))
        .args(["--seconds", "1", "--warmup", "0", "--terminals", "2"])
        .arg("--json")
        .arg(scratch.path().join("run.json"))
        .output()
        .expect("run pure-bench");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the broken app's run must fail");
    assert!(
        stderr.contains("C1"),
        "the failed condition is named: {stderr}"
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(scratch.path().join("run.json")).unwrap())
            .unwrap();
    assert_eq!(json["consistency_ok"], false);
}

/// `--rate`: an open loop. Each terminal's transactions are meant to start at fixed intervals
/// (4 terminals at 200 a second: one every 20 ms each), and the latency log's start times are
/// those intended starts, not when the driver got to send them: latency counts from them. The
/// report names the offered load and the driver's own lateness.
#[test]
fn an_open_loop_counts_latency_from_each_intended_start() {
    let scratch = common::scratch();
    let out = |name: &str| scratch.path().join(name);
    let output = Command::new(BIN)
        .arg("tpcc")
        .args(["--engine", "sqlite-grouped", "--rate", "200"])
        .arg("--dir")
        .arg(out("run"))
        .args(["--seconds", "3", "--warmup", "1", "--terminals", "4"])
        .arg("--json")
        .arg(out("run.json"))
        .arg("--latency-log")
        .arg(out("latency.log"))
        .output()
        .expect("run pure-bench");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("an open loop offering 200 tx/s"),
        "{stdout}"
    );
    assert!(
        stdout.contains("the driver began transactions late by"),
        "{stdout}"
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out("run.json")).unwrap()).unwrap();
    assert_eq!(json["offered_tx_per_s"], 200.0);
    let late = &json["driver_late_ms"];
    assert!(
        late["p50"].as_f64() <= late["p99"].as_f64()
            && late["p99"].as_f64() <= late["max"].as_f64()
    );

    let log = std::fs::read_to_string(out("latency.log")).expect("the latency log");
    let mut starts: Vec<Vec<u64>> = vec![Vec::new(); 4];
    for line in log.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let (seconds, micros) = f[0].split_once('.').expect("seconds.microseconds");
        let at = seconds.parse::<u64>().unwrap() * 1_000_000 + micros.parse::<u64>().unwrap();
        starts[f[1].parse::<usize>().unwrap()].push(at);
    }
    for (terminal, starts) in starts.iter().enumerate() {
        // A window of 3 s: about 150 each, whatever the machine's load.
        assert!(
            starts.len() > 20,
            "terminal {terminal}: {} starts",
            starts.len()
        );
        for pair in starts.windows(2) {
            let gap = pair[1] - pair[0];
            assert!(
                (19_998..=20_002).contains(&gap),
                "terminal {terminal}: intended starts 20 ms apart, not {gap} µs"
            );
        }
    }
}

/// `--rate` accepts any finite rate above 0: a tiny one panicked while pacing its terminals (a
/// `Duration` past what it holds) instead of being refused with a message.
#[test]
fn a_tiny_rate_is_refused_not_a_panic() {
    let scratch = common::scratch();
    let output = Command::new(BIN)
        .arg("tpcc")
        .args(["--engine", "sqlite-grouped", "--rate", "1e-19"])
        .arg("--dir")
        .arg(scratch.path().join("run"))
        .args(["--seconds", "1", "--warmup", "0", "--terminals", "4"])
        .output()
        .expect("run pure-bench");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("panicked"),
        "pure-bench panics on --rate 1e-19: {stderr}"
    );
    assert!(!output.status.success(), "a run at 1e-19 tx/s: {stderr}");
    assert!(stderr.contains("--rate"), "{stderr}");
}
