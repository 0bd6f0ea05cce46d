//! `pure-bench tpcc` when things go wrong: failed transactions are not throughput and fail the
//! run; a window that measured nothing fails; outputs are checked before the load; a failed
//! check keeps the tables; a signal or a dead server leaves no pure-serve running and names
//! what happened. The tests that signal a process wait for it through /proc, with generous
//! bounds, and assert nothing about time.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{app_dir, mutated, pure_serve_built, scratch, text, BIN};
use serde_json::Value;

/// Failed transactions are not completed ones: they are not in tx/s (nor in the matrix's
/// ratios, which read tx_per_s), they are counted as errors of their type, and any of them
/// fails the run. Here every Stock-Level fails (404).
#[test]
fn errored_transactions_are_not_throughput_and_fail_the_run() {
    if !pure_serve_built() {
        return;
    }
    let dir = scratch();
    let app = mutated(
        dir.path(),
        "    let threshold = q.threshold;",
        "    let threshold = q.threshold;\n    not_found(\"review: every stock level fails\");",
    );
    let json_path = dir.path().join("run.json");
    let output = Command::new(BIN)
        .args(["tpcc", "--engine", "pure-inprocess"])
        .arg("--app")
        .arg(&app)
        .arg("--dir")
        .arg(dir.path().join("run"))
        .args(["--seconds", "1", "--warmup", "0", "--terminals", "2"])
        .arg("--json")
        .arg(&json_path)
        .output()
        .unwrap();
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).expect("the JSON")).unwrap();
    let errors = json["errors"].as_u64().unwrap();
    assert!(errors > 0, "the mutation makes errors: {json}");
    assert_eq!(
        json["types"]["stock_level"]["errors"].as_u64(),
        Some(errors)
    );
    assert_eq!(json["types"]["stock_level"]["count"], 0, "{json}");
    let transactions = json["transactions"].as_u64().unwrap();
    let counted = (json["tx_per_s"].as_f64().unwrap() * json["seconds"].as_f64().unwrap()).round();
    assert_eq!(
        counted as u64, transactions,
        "tx/s counts completed transactions only"
    );
    let per_type: u64 = json["types"]
        .as_object()
        .unwrap()
        .values()
        .map(|t| t["count"].as_u64().unwrap())
        .sum();
    assert_eq!(per_type, transactions);
    assert!(
        !output.status.success(),
        "a run with errors passes: {}",
        text(&output)
    );
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("transaction(s) failed"),
        "{}",
        text(&output)
    );
}

/// A window in which no transaction completed measured nothing: the run must fail (or at least
/// not report 0 transactions/s with "every condition holds" and exit 0). With --think every
/// terminal first waits its keying time (2 s or more), longer than a 1 s window.
#[test]
fn a_window_that_measured_nothing_fails() {
    let dir = scratch();
    let json_path = dir.path().join("run.json");
    let output = Command::new(BIN)
        .args(["tpcc", "--engine", "sqlite", "--think"])
        .arg("--app")
        .arg(app_dir())
        .arg("--dir")
        .arg(dir.path().join("run"))
        .args(["--seconds", "1", "--warmup", "0", "--threads", "2"])
        .arg("--json")
        .arg(&json_path)
        .output()
        .unwrap();
    assert!(
        !output.status.success(),
        "a run of 0 transactions passes: {}",
        text(&output)
    );
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("no transaction completed"),
        "{}",
        text(&output)
    );
    let _ = json_path;
}

/// An output file that cannot be written is known before the load: the run must not load, run
/// and check for nothing, then fail and leave --dir (the whole population) behind.
#[test]
fn an_unwritable_json_fails_before_the_run_and_leaves_no_dir() {
    let dir = scratch();
    let run = dir.path().join("run");
    let output = Command::new(BIN)
        .args(["tpcc", "--engine", "sqlite"])
        .arg("--app")
        .arg(app_dir())
        .arg("--dir")
        .arg(&run)
        .args(["--seconds", "1", "--warmup", "0"])
        .arg("--json")
        .arg(dir.path().join("no-such-dir").join("run.json"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let left: Vec<String> = std::fs::read_dir(&run)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        !stderr.contains("checking the consistency conditions") && left.is_empty(),
        "the run was loaded, driven and checked before the JSON path failed, and left {left:?} \
         in {}: {}",
        run.display(),
        text(&output)
    );
}

/// After a failed consistency check the tables are the evidence: the run keeps them (or says
/// how to: --keep). Today they are deleted and the message does not mention --keep.
#[test]
fn a_failed_check_keeps_the_tables_or_says_how() {
    if !pure_serve_built() {
        return;
    }
    let dir = scratch();
    let app = mutated(
        dir.path(),
        "district_row.d_ytd += h_amount;",
        "district_row.d_ytd += 0 * h_amount;",
    );
    let run = dir.path().join("run");
    let output = Command::new(BIN)
        .args(["tpcc", "--engine", "pure-inprocess"])
        .arg("--app")
        .arg(&app)
        .arg("--dir")
        .arg(&run)
        .args(["--seconds", "1", "--warmup", "0", "--terminals", "2"])
        .output()
        .unwrap();
    assert!(!output.status.success(), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        run.join("pure").exists() || stderr.contains("--keep"),
        "the failed run's data is gone and nothing says --keep: {}",
        text(&output)
    );
}

/// The serving pure-serve child of `bench` (its command line has --listen), once it exists.
fn serving_child(bench: &Child) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(180);
    while Instant::now() < deadline {
        let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", bench.id()))
            .unwrap_or_default();
        for pid in children.split_whitespace() {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains("--listen") {
                return pid.parse().unwrap();
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("no serving pure-serve appeared");
}

/// Waits until `pid` has a listening TCP socket (pure-serve is ready; the window's clock starts
/// right after it says so).
fn wait_listening(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|d| {
                d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                    .filter_map(|l| {
                        let l = l.to_string_lossy().into_owned();
                        Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
                    })
                    .collect()
            })
            .unwrap_or_default();
        let tcp = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).unwrap_or_default();
        // State 0A is LISTEN; field 10 is the inode.
        if tcp.lines().skip(1).any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 9 && f[3] == "0A" && inodes.iter().any(|i| i == f[9])
        }) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("pure-serve {pid} never listened");
}

fn alive(pid: u32) -> bool {
    // A zombie is not alive: state Z in /proc/PID/stat.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s[s.rfind(')').unwrap() + 2..].starts_with('Z'))
        .unwrap_or(false)
}

/// Waits up to `limit` for `pid` to end; says whether it did.
fn ends_within(pid: u32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) on a process this test started (or its child).
    unsafe { libc::kill(pid as i32, sig) };
}

fn spawn_pure(dir: &Path, seconds: &str, warmup: &str) -> Child {
    Command::new(BIN)
        .args(["tpcc", "--engine", "pure", "--terminals", "4"])
        .arg("--app")
        .arg(app_dir())
        .arg("--dir")
        .arg(dir)
        .args(["--seconds", seconds, "--warmup", warmup])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// SIGTERM to pure-bench (a `timeout`, a CI cancel, a supervisor) must not leave the pure-serve
/// it started running, orphaned, with the data directory locked and in use.
#[test]
fn sigterm_leaves_no_pure_serve_running() {
    if !pure_serve_built() {
        return;
    }
    let dir = scratch();
    let run = dir.path().join("run");
    let mut bench = spawn_pure(&run, "600", "1");
    let serve = serving_child(&bench);
    wait_listening(serve);
    std::thread::sleep(Duration::from_secs(2)); // terminals connected and running
    signal(bench.id(), libc::SIGTERM);
    let _ = bench.wait();
    let orphaned = !ends_within(serve, Duration::from_secs(20));
    let left = run.exists();
    if orphaned {
        signal(serve, libc::SIGTERM);
        ends_within(serve, Duration::from_secs(30));
    }
    assert!(
        !orphaned,
        "pure-serve {serve} still runs after pure-bench got SIGTERM (data dir left: {left})"
    );
}

/// pure-serve dying during the run: the harness must say so (pure-serve, its exit) and not only
/// "connect to 127.0.0.1:PORT: Connection refused" after the rest of the window.
#[test]
fn a_dead_pure_serve_is_named() {
    if !pure_serve_built() {
        return;
    }
    let dir = scratch();
    let run = dir.path().join("run");
    // A window far longer than the test: the run must stop when the server dies.
    let bench = spawn_pure(&run, "600", "1");
    let serve = serving_child(&bench);
    wait_listening(serve);
    std::thread::sleep(Duration::from_secs(2)); // into the window
    signal(serve, libc::SIGKILL);
    let output = bench.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("pure-serve") && (stderr.contains("exit") || stderr.contains("signal")),
        "the error does not say that pure-serve died: {}",
        text(&output)
    );
}

/// The SQLite engines never use the Rhai app, yet the run fails unless `apps/tpcc` exists
/// relative to the working directory ("the app directory apps/tpcc: No such file").
#[test]
fn sqlite_runs_without_the_app_directory() {
    let dir = scratch();
    let output = Command::new(BIN)
        .current_dir(dir.path())
        .args(["tpcc", "--engine", "sqlite"])
        .arg("--dir")
        .arg(dir.path().join("run"))
        .args(["--seconds", "1", "--warmup", "0"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
}
