//! A quick check of the commit path's cost, not the benchmark (that is `pure-bench log`): a raw
//! loop of 4 KiB `pwrite` + `fdatasync` on a preallocated, written file against the store
//! committing groups of one 100-byte record, alternated in short slices so that both sides see
//! the same load on a shared machine. Prints both rates and their ratio per round.
//!
//! `cargo run -p pure-store --release --example commit_rate -- DIR [SYNCS_PER_ROUND] [ROUNDS]`

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use pure_store::{Store, StoreOptions, SyncMode};

/// Syncs per slice: short enough that load changes hit both sides alike.
const SLICE_SYNCS: u64 = 100;

struct Raw {
    file: File,
    block: Vec<u8>,
    next: u64,
    blocks: u64,
}

impl Raw {
    fn create(path: &Path, blocks: u64) -> Raw {
        let mut open = OpenOptions::new();
        open.read(true).write(true).create(true).truncate(true);
        let file = open.open(path).expect("create the raw file");
        let block = vec![0x5au8; 4096];
        for i in 0..blocks {
            file.write_all_at(&block, i * 4096).expect("preallocate");
        }
        file.sync_all().expect("sync");
        Raw {
            file,
            block,
            next: 0,
            blocks,
        }
    }

    fn slice(&mut self) -> Duration {
        let start = Instant::now();
        for _ in 0..SLICE_SYNCS {
            let offset = (self.next % self.blocks) * 4096;
            self.file.write_all_at(&self.block, offset).expect("write");
            self.file.sync_data().expect("fdatasync");
            self.next += 1;
        }
        start.elapsed()
    }
}

fn store_slice(store: &mut Store, record: &[u8]) -> Duration {
    let start = Instant::now();
    for _ in 0..SLICE_SYNCS {
        store.append(record).expect("append");
        store.commit().expect("commit");
    }
    start.elapsed()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = Path::new(args.get(1).map(String::as_str).unwrap_or("."));
    let syncs: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3000);
    let rounds: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(3);
    let store_dir = dir.join("commit-rate-store");
    let _ = std::fs::remove_dir_all(&store_dir);
    let options = StoreOptions {
        sync: SyncMode::Always,
        log_capacity_bytes: 64 << 20,
        log_capacity_max_bytes: 64 << 20,
    };
    let mut store = Store::open(&store_dir, options).expect("open").store;
    let mut raw = Raw::create(&dir.join("commit-rate-raw"), 16384);
    let record = vec![0x33u8; 100];
    let mut ratios = Vec::new();
    for round in 1..=rounds {
        let (mut raw_time, mut store_time) = (Duration::ZERO, Duration::ZERO);
        for slice in 0..syncs.div_ceil(SLICE_SYNCS) {
            // Alternate which side goes first, so that neither always follows the other.
            if slice % 2 == 0 {
                raw_time += raw.slice();
                store_time += store_slice(&mut store, &record);
            } else {
                store_time += store_slice(&mut store, &record);
                raw_time += raw.slice();
            }
        }
        let done = syncs.div_ceil(SLICE_SYNCS) * SLICE_SYNCS;
        let (raw_rate, store_rate) = (
            done as f64 / raw_time.as_secs_f64(),
            done as f64 / store_time.as_secs_f64(),
        );
        ratios.push(store_rate / raw_rate);
        println!(
            "round {round}: raw 4 KiB pwrite+fdatasync {raw_rate:.0}/s, store group of 1 \
             {store_rate:.0}/s, ratio {:.3}",
            store_rate / raw_rate
        );
    }
    ratios.sort_by(f64::total_cmp);
    println!("median ratio {:.3}", ratios[ratios.len() / 2]);
    drop(store);
    std::fs::remove_dir_all(&store_dir).expect("remove the store");
    std::fs::remove_file(dir.join("commit-rate-raw")).expect("remove the raw file");
}
