//! Smoke test of `pure-bench scoreboard`: a very short run against a pure-serve it starts prints a
//! row of figures with posts and reads done and no errors (and the same for Redis when
//! redis-server is installed). It checks that the harness works, never speed.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_pure-bench");

/// The first row of figures of `system` in the report: its whitespace-separated fields.
fn row<'a>(stdout: &'a str, system: &str) -> Vec<&'a str> {
    let line = stdout
        .lines()
        .find(|line| {
            let mut fields = line.split_whitespace();
            fields.next() == Some(system) && fields.next().is_some_and(|c| c.parse::<u32>().is_ok())
        })
        .unwrap_or_else(|| panic!("no {system} row in:\n{stdout}"));
    line.split_whitespace().collect()
}

#[test]
fn a_short_run_prints_figures_for_each_system() {
    let pure_serve = Path::new(BIN).with_file_name("pure-serve");
    if !pure_serve.exists() {
        // `cargo test --workspace` builds it; `cargo test -p pure-bench` alone does not.
        eprintln!(
            "SKIPPED: {} is not built (cargo build --release -p pure-serve)",
            pure_serve.display()
        );
        return;
    }
    let redis = Command::new("redis-server")
        .arg("--version")
        .output()
        .is_ok();
    let data = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch dir");
    let app = Path::new(env!("CARGO_MANIFEST_DIR")).join("../apps/scoreboard");
    let mut command = Command::new(BIN);
    command
        .arg("scoreboard")
        .arg("--data")
        .arg(data.path())
        .arg("--app")
        .arg(&app);
    command.args([
        "--seconds",
        "0.5",
        "--warmup",
        "0.1",
        "--connections",
        "1,4",
    ]);
    command.args(["--players", "50", "--read-ratio", "0.3", "--sync", "none"]);
    if redis {
        command.arg("--vs-redis");
    } else {
        eprintln!("redis-server is not installed: checking the pure-serve side only");
    }
    let output = command.output().expect("run pure-bench");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let systems: &[&str] = if redis {
        &["pure-serve", "redis"]
    } else {
        &["pure-serve"]
    };
    for system in systems {
        let fields = row(&stdout, system);
        // system, conns, posts/s, p50, p90, p99, p99.9, max, reads/s, errors, ...
        let posts: f64 = fields[2].parse().expect("posts/s");
        let reads: f64 = fields[8].parse().expect("reads/s");
        assert!(posts > 0.0 && reads > 0.0, "{system}: {stdout}");
        assert_eq!(fields[9], "0", "{system} had errors: {stdout}");
    }
    if redis {
        assert!(
            stdout.contains("ratio pure-serve / redis at 4 connections"),
            "{stdout}"
        );
    }
}
