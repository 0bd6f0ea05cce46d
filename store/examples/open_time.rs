//! Times `Store::open` of an existing store with a 64 MiB log (reading the ring, the scan for
//! acknowledging frames after the end, hardening), and of a fresh one (zero-filling the log).
//!
//! `cargo run -p pure-store --release --example open_time -- DIR`

use std::path::Path;
use std::time::Instant;

use pure_store::{Store, StoreOptions};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = Path::new(args.get(1).map(String::as_str).unwrap_or(".")).join("open-time");
    let _ = std::fs::remove_dir_all(&dir);
    let started = Instant::now();
    let mut store = Store::open(&dir, StoreOptions::default())
        .expect("create")
        .store;
    println!(
        "create (64 MiB zero-filled, synced): {:?}",
        started.elapsed()
    );
    let record = vec![1u8; 100];
    for _ in 0..1000 {
        store.append(&record).expect("append");
        store.commit().expect("commit");
    }
    drop(store);
    for round in 1..=3 {
        let started = Instant::now();
        let recovered = Store::open(&dir, StoreOptions::default()).expect("reopen");
        println!(
            "reopen {round}: {:?} ({} records)",
            started.elapsed(),
            recovered.records.len()
        );
    }
    std::fs::remove_dir_all(&dir).expect("clean up");
}
