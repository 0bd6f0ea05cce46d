//! Smoke test of `pure-bench log`: a short run on a scratch directory writes JSON with every field
//! the issue names, holding sane values. It asserts shape and consistency, never speed.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_pure-bench");

/// A scratch directory on the disk the build lives on (unlike /tmp, which may be tmpfs).
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("the target dir is writable")
}

/// Whether the file system holding `dir` has a block device counter the benchmark can read.
fn has_device_counter(dir: &Path) -> bool {
    let dev = std::fs::metadata(dir)
        .expect("the scratch dir exists")
        .dev();
    let stat = format!(
        "/sys/dev/block/{}:{}/stat",
        libc::major(dev),
        libc::minor(dev)
    );
    Path::new(&stat).exists()
}

fn number(value: &Value, field: &str) -> f64 {
    value[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} is not a number in {value}"))
}

#[test]
fn a_short_run_writes_every_figure() {
    let dir = scratch();
    let json_path = dir.path().join("log.json");
    let output = Command::new(BIN)
        .args([
            "log",
            "--seconds",
            "0.2",
            "--log-mib",
            "8",
            "--raw-file-mib",
            "4",
            "--dir",
        ])
        .arg(dir.path())
        .arg("--json")
        .arg(&json_path)
        .output()
        .expect("pure-bench runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "pure-bench log failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("raw 4K in place"),
        "no table on stdout:\n{stdout}"
    );

    let json: Value = serde_json::from_slice(&std::fs::read(&json_path).expect("JSON written"))
        .expect("the file is JSON");
    let top: Vec<&str> = json
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(top.len(), 3, "exactly the three top-level fields: {top:?}");
    assert!(number(&json, "raw_prealloc_syncs_per_s") > 0.0);
    assert!(number(&json, "raw_append_syncs_per_s") > 0.0);

    let groups = json["groups"].as_array().expect("groups is an array");
    let sizes: Vec<u64> = groups
        .iter()
        .map(|g| g["group_records"].as_u64().expect("u64"))
        .collect();
    assert_eq!(sizes, [1, 16, 64, 256]);
    let counted = has_device_counter(dir.path());
    for g in groups {
        assert_eq!(
            g.as_object().expect("an object").len(),
            7,
            "exactly seven fields: {g}"
        );
        let group = number(g, "group_records");
        let syncs = number(g, "syncs_per_s");
        assert!(syncs > 0.0, "{g}");
        // Every sync commits exactly one group, so the two rates agree up to rounding.
        let records = number(g, "records_per_s");
        assert!((records - syncs * group).abs() <= 1e-6 * records, "{g}");
        let (p50, p99, p999) = (
            number(g, "p50_us"),
            number(g, "p99_us"),
            number(g, "p999_us"),
        );
        assert!(0.0 < p50 && p50 <= p99 && p99 <= p999, "{g}");
        if counted {
            // Each commit syncs its records to the device, so something must have been written.
            assert!(number(g, "device_bytes_per_record") > 0.0, "{g}");
        } else {
            assert!(g["device_bytes_per_record"].is_null(), "{g}");
        }
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("readable")
        .map(|e| e.expect("entry").file_name())
        .filter(|name| name != "log.json")
        .collect();
    assert!(
        leftovers.is_empty(),
        "the run left files behind: {leftovers:?}"
    );
}

#[test]
fn a_missing_dir_is_a_clear_error() {
    let dir = scratch();
    let missing = dir.path().join("not-there");
    let output = Command::new(BIN)
        .args(["log", "--seconds", "0.1", "--dir"])
        .arg(&missing)
        .output()
        .expect("pure-bench runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no such directory"),
        "unclear error: {stderr}"
    );
    assert!(
        stderr.contains("not-there"),
        "the error does not name the dir: {stderr}"
    );
}
