//! A quick check of the commit path's cost, not the benchmark (that is `pure-bench log`):
//! alternates a raw loop of 4 KiB `pwrite` + `fdatasync` on a preallocated, written file with
//! the store committing groups of one 100-byte record, and prints both rates and their ratio.
//!
//! `cargo run -p pure-store --release --example commit_rate -- DIR [SYNCS_PER_ROUND] [ROUNDS]`

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

use pure_store::{Store, StoreOptions, SyncMode};

fn raw_rate(dir: &Path, syncs: u64) -> f64 {
    let path = dir.join("raw");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path);
    let file = file.expect("create the raw file");
    let block = vec![0x5au8; 4096];
    for i in 0..syncs {
        file.write_all_at(&block, i * 4096).expect("preallocate");
    }
    file.sync_all().expect("sync");
    let start = Instant::now();
    for i in 0..syncs {
        file.write_all_at(&block, i * 4096).expect("write");
        file.sync_data().expect("fdatasync");
    }
    let rate = syncs as f64 / start.elapsed().as_secs_f64();
    std::fs::remove_file(&path).expect("remove the raw file");
    rate
}

fn store_rate(dir: &Path, syncs: u64) -> f64 {
    let store_dir = dir.join("store");
    let _ = std::fs::remove_dir_all(&store_dir);
    let options = StoreOptions {
        sync: SyncMode::Always,
        log_capacity_bytes: 64 << 20,
    };
    let mut store = Store::open(&store_dir, options).expect("open").store;
    let record = vec![0x33u8; 100];
    let start = Instant::now();
    for _ in 0..syncs {
        store.append(&record).expect("append");
        store.commit().expect("commit");
    }
    let rate = syncs as f64 / start.elapsed().as_secs_f64();
    drop(store);
    std::fs::remove_dir_all(&store_dir).expect("remove the store");
    rate
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = Path::new(args.get(1).map(String::as_str).unwrap_or("."));
    let syncs: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3000);
    let rounds: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(3);
    let mut ratios = Vec::new();
    for round in 1..=rounds {
        let raw = raw_rate(dir, syncs);
        let store = store_rate(dir, syncs);
        ratios.push(store / raw);
        println!(
            "round {round}: raw 4 KiB pwrite+fdatasync {raw:.0}/s, store group of 1 {store:.0}/s, \
             ratio {:.3}",
            store / raw
        );
    }
    ratios.sort_by(f64::total_cmp);
    println!("median ratio {:.3}", ratios[ratios.len() / 2]);
}
