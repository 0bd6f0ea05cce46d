//! Smoke test of `pure-bench owner --only scoreboard`: a short run of the scoreboard app's write
//! handler in-process prints a positive cost per call. It asserts that the part runs the real app
//! and reports a figure, never speed.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_pure-bench");

#[test]
fn the_scoreboard_part_reports_a_cost_per_call() {
    let app = concat!(env!("CARGO_MANIFEST_DIR"), "/../apps/scoreboard");
    let output = Command::new(BIN)
        .args([
            "owner",
            "--only",
            "scoreboard",
            "--batch",
            "50",
            "--batches",
            "2",
            "--app",
            app,
        ])
        .output()
        .expect("pure-bench runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "pure-bench failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("post_score on 10000 players"))
        .unwrap_or_else(|| panic!("no result line in:\n{stdout}"));
    let median: f64 = line
        .split("median ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no median in {line:?}"));
    assert!(median > 0.0 && median < 10_000.0, "{line}");
}

#[test]
fn a_missing_app_is_a_clear_error() {
    let output = Command::new(BIN)
        .args(["owner", "--only", "scoreboard", "--app", "/nonexistent/app"])
        .output()
        .expect("pure-bench runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("/nonexistent/app"), "{stderr}");
}

/// The TPC-C part runs the app's five transactions beside the floor (the same calls natively),
/// every answer of the floor equal to the app's, and writes both means to `--json`.
#[test]
fn the_tpcc_part_answers_as_its_floor_and_reports_both() {
    let app = concat!(env!("CARGO_MANIFEST_DIR"), "/../apps/tpcc");
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("tpcc.json");
    let output = Command::new(BIN)
        .args([
            "owner",
            "--only",
            "tpcc",
            "--transactions",
            "400",
            "--tpcc-app",
            app,
        ])
        .arg("--json")
        .arg(&json)
        .output()
        .expect("pure-bench runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "pure-bench failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("answers that differ from the floor's: 0"),
        "{stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON is written"))
            .expect("JSON");
    for key in ["weighted_us", "floor_weighted_us"] {
        let us = report[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key} in {report}"));
        assert!(us > 0.0 && us < 100_000.0, "{key}: {report}");
    }
    for kind in [
        "new_order",
        "payment",
        "order_status",
        "delivery",
        "stock_level",
    ] {
        for table in ["mean_us", "floor_mean_us"] {
            let us = report[table][kind].as_f64().unwrap_or(0.0);
            assert!(us > 0.0, "{table}.{kind}: {report}");
        }
    }
}
