//! Crash test: random transfers from concurrent clients on the simulated disk, a crash at a
//! random storage step (process crash or power loss), recovery, and the invariants of
//! docs/reliability.md: the recovered state is the ledger's fold of a gap-free prefix of the commit
//! order, every acknowledged write is in it (with the content it was acknowledged with),
//! and recovering twice gives the same state.
//!
//! Scale with PURE_TEST_SCALE (default 1: 40 crashes); replay one run with PURE_TEST_SEED.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use pure_runtime::{HandlerError, Runtime, RuntimeOptions};
use pure_store::sim::{test_seed, Faults, SimDisk, SimRng};
use serde_json::Value;

use crate::{app, check_ledger, state, transfer};

fn options() -> RuntimeOptions {
    // A small log and frequent checkpoints, so that runs lap the log and crash mid-checkpoint.
    RuntimeOptions {
        log_capacity_bytes: 32 << 10,
        checkpoint_interval_bytes: 4 << 10,
        queue_capacity: 64,
        write_timeout: crate::PATIENT,
        ..RuntimeOptions::default()
    }
}

/// (seq -> (from, to, amount)) of every acknowledged transfer.
type Acked = BTreeMap<u64, (i64, i64, i64)>;

/// Runs clients until the disk freezes (or the writes are done); returns what was acknowledged.
fn run_clients(rt: &Runtime, rng: &mut SimRng, writes: usize) -> Acked {
    let acked = Mutex::new(Acked::new());
    let plans: Vec<Vec<(i64, i64, i64, &str)>> = (0..3)
        .map(|_| {
            (0..writes / 3)
                .map(|_| {
                    let fail = if rng.one_in(8) { "throw" } else { "" };
                    (
                        rng.below(6) as i64,
                        rng.below(6) as i64,
                        rng.below(100) as i64,
                        fail,
                    )
                })
                .collect()
        })
        .collect();
    std::thread::scope(|s| {
        for plan in plans {
            let acked = &acked;
            s.spawn(move || {
                for (from, to, amount, fail) in plan {
                    match transfer(rt, from, to, amount, fail) {
                        Ok(seq) => {
                            let seq = seq.as_u64().expect("transfer answers its seq");
                            acked.lock().unwrap().insert(seq, (from, to, amount));
                        }
                        Err(HandlerError::Unavailable { .. }) => return,
                        Err(HandlerError::Thrown { .. }) => {}
                        Err(other) => panic!("unexpected answer {other:?}"),
                    }
                }
            });
        }
    });
    acked.into_inner().unwrap()
}

fn check_recovered(recovered: &Value, acked: &Acked, seed: u64) {
    let seq = check_ledger(recovered);
    let ops = recovered["ops"].as_array().unwrap();
    for (acked_seq, (from, to, amount)) in acked {
        assert!(
            *acked_seq <= seq,
            "seed {seed}: acknowledged write {acked_seq} lost (recovered {seq})"
        );
        let op = &ops[*acked_seq as usize - 1];
        assert_eq!(
            (op[1].as_i64(), op[2].as_i64(), op[3].as_i64()),
            (Some(*from), Some(*to), Some(*amount)),
            "seed {seed}: write {acked_seq} recovered with other content"
        );
    }
}

fn one_crash(seed: u64) {
    let mut rng = SimRng::new(seed);
    let disk = SimDisk::new(seed);
    let dir = Path::new("/sim/ledger");
    let mut acked = Acked::new();
    // Two lives: crash, recover, write more, crash again.
    for life in 0..2 {
        let rt = Runtime::open_with_io(app("ledger"), dir, options(), disk.clone())
            .unwrap_or_else(|e| panic!("seed {seed} life {life}: recovery failed: {e}"));
        check_recovered(&state(&rt), &acked, seed);
        let base = check_ledger(&state(&rt));
        // Writes acknowledged before this life are in the state; those of the previous life
        // that were not acknowledged may or may not be: forget the unacknowledged ones.
        acked.retain(|s, _| *s <= base);
        disk.set_faults(Faults {
            crash_after_steps: Some(1 + rng.below(200)),
            ..Faults::default()
        });
        acked.extend(run_clients(&rt, &mut rng, 240));
        let metrics = rt.metrics();
        rt.shutdown();
        if rng.one_in(2) {
            disk.power_loss();
        }
        disk.process_crash();
        let first = Runtime::open_with_io(app("ledger"), dir, options(), disk.clone())
            .unwrap_or_else(|e| panic!("seed {seed} life {life}: recovery failed: {e}"));
        let recovered = state(&first);
        check_recovered(&recovered, &acked, seed);
        eprintln!(
            "  life {life}: {} acknowledged, {} recovered, {} checkpoints",
            acked.len(),
            recovered["seq"],
            metrics.checkpoints_total,
        );
        first.shutdown();
        let second = Runtime::open_with_io(app("ledger"), dir, options(), disk.clone()).unwrap();
        assert_eq!(
            state(&second),
            recovered,
            "seed {seed}: recovery is deterministic"
        );
        second.shutdown();
    }
}

#[test]
fn recovery_after_random_crashes_keeps_every_acknowledged_write() {
    let scale: u64 = std::env::var("PURE_TEST_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let seed = test_seed("runtime_crash", 0x5eed_0001);
    if std::env::var("PURE_TEST_SEED").is_ok() {
        return one_crash(seed);
    }
    let mut rng = SimRng::new(seed);
    for _ in 0..40 * scale {
        let run_seed = rng.next_u64();
        eprintln!("crash run seed {run_seed}");
        one_crash(run_seed);
    }
}
