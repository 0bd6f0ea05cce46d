//! Times `Store::open` of an existing store whose 256 MiB log (pure-serve's default) holds a few
//! MB of records, and reports the opening process's resident memory: the peak (`VmHWM`) and the
//! current (`VmRSS`) after `open` returns. Each open runs in a fresh child process, so that the
//! peak is the open's own and not the writing phase's.
//!
//! `cargo run -p pure-store --release --example open_time -- DIR [RECORDS_PER_COMMIT]`
//! (default 100; 20000 makes frames of about 2 MiB, larger than recovery's read window)

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use pure_store::{Store, StoreOptions};

const CAPACITY_BYTES: u64 = 256 << 20;
const RECORDS: usize = 40_000;
const RECORD_BYTES: usize = 100;
const RECORDS_PER_COMMIT: usize = 100;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--open") {
        let dir = PathBuf::from(args.get(2).expect("--open DIR"));
        open_and_report(&dir);
        return;
    }
    let dir = Path::new(args.get(1).map(String::as_str).unwrap_or(".")).join("open-time");
    let per_commit = args
        .get(2)
        .map(|n| n.parse().expect("RECORDS_PER_COMMIT is a number"))
        .unwrap_or(RECORDS_PER_COMMIT);
    let _ = std::fs::remove_dir_all(&dir);
    prepare(&dir, per_commit);
    let exe = std::env::current_exe().expect("own executable path");
    for round in 1..=3 {
        print!("reopen {round} (fresh process): ");
        std::io::Write::flush(&mut std::io::stdout()).expect("flush stdout");
        let status = Command::new(&exe)
            .arg("--open")
            .arg(&dir)
            .status()
            .expect("run the opening child");
        assert!(status.success(), "the opening child failed: {status}");
    }
    std::fs::remove_dir_all(&dir).expect("clean up");
}

fn options() -> StoreOptions {
    StoreOptions {
        log_capacity_bytes: CAPACITY_BYTES,
        log_capacity_max_bytes: CAPACITY_BYTES,
        ..StoreOptions::default()
    }
}

/// Creates the store and fills it with `RECORDS` records, `per_commit` to a frame.
fn prepare(dir: &Path, per_commit: usize) {
    let started = Instant::now();
    let mut store = Store::open(dir, options()).expect("create").store;
    println!(
        "create ({} MiB zero-filled, synced): {:?}",
        CAPACITY_BYTES >> 20,
        started.elapsed()
    );
    let record = vec![1u8; RECORD_BYTES];
    for _ in 0..RECORDS / per_commit {
        for _ in 0..per_commit {
            store.append(&record).expect("append");
        }
        store.commit().expect("commit");
    }
    println!(
        "wrote {RECORDS} records of {RECORD_BYTES} bytes, {per_commit} to a frame ({} KiB of log)",
        store.log_used_bytes() >> 10
    );
}

fn open_and_report(dir: &Path) {
    let before = status_kib("VmRSS");
    let started = Instant::now();
    let recovered = Store::open(dir, options()).expect("reopen");
    let elapsed = started.elapsed();
    let record_bytes: usize = recovered.records.iter().map(|r| r.bytes.len()).sum();
    println!(
        "{elapsed:?}, {} records ({} KiB of record bytes); RSS before open {} KiB, \
         after open {} KiB, peak {} KiB",
        recovered.records.len(),
        record_bytes >> 10,
        before,
        status_kib("VmRSS"),
        status_kib("VmHWM"),
    );
}

/// A `kB` field of /proc/self/status.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("the field is in /proc/self/status")
}
