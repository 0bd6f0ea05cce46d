//! Crash at every storage step: a seeded workload (two sessions, groups, checkpoints, ring
//! wraps) is frozen after its k-th storage step for every k; the disk then loses power (or
//! only the process dies), and recovery must hold invariants 1-4; recovering again gives the
//! same state (6); more work after the recovery, another power loss and recovery hold them
//! again (no ghosts from before the crash).

use std::sync::Arc;

use pure_store::sim::{test_seed, Faults, SimDisk, SimRng};
use pure_store::SyncMode;

use crate::harness::{
    open, open_growing, open_in_mode, recover_and_check, recovered_state, scale, Model, Workload,
    SIM_CAPACITY_BYTES,
};

/// Groups per session of the workload.
const GROUPS: u32 = 30;
/// Outcomes tried per crash point: one process crash and this many power losses minus one.
const OUTCOMES: u64 = 4;

/// Runs the workload on a fresh disk, frozen after `crash_after` steps if given; the log
/// grows after one in `grow_every` groups (0: never).
fn scenario(
    seed: u64,
    crash_after: Option<u64>,
    grow_every: u64,
) -> (Arc<SimDisk>, Workload, Model) {
    let disk = SimDisk::new(seed);
    disk.set_faults(Faults {
        crash_after_steps: crash_after,
        ..Faults::default()
    });
    let mut model = Model::default();
    let mut workload = Workload {
        rng: SimRng::new(seed),
        groups: GROUPS,
        // Fewer checkpoints while the log grows: a longer live part spans a lap's end more
        // often, where a growth must wait.
        checkpoint_every: if grow_every > 0 { 12 } else { 8 },
        sync: SyncMode::Always,
        grow_every,
        grown: 0,
        waited: 0,
    };
    for session in 0..2 {
        // Odd seeds run their second session without syncs: crashes then lose unsynced
        // groups, and recovery must still return a prefix without ghosts.
        let sync = if session == 1 && seed % 2 == 1 {
            SyncMode::None
        } else {
            SyncMode::Always
        };
        workload.sync = sync;
        let opened = match grow_every {
            0 => open_in_mode(&disk, sync),
            _ => open_growing(&disk, sync),
        };
        let Ok(recovered) = opened else {
            break;
        };
        if session > 0 {
            // Only the process died between the sessions: nothing may be lost.
            model
                .check_recovery(&recovered)
                .expect("recovery after a process crash");
        }
        let mut store = recovered.store;
        workload.run(&mut store, &mut model);
        if disk.is_frozen() {
            break;
        }
    }
    (disk, workload, model)
}

/// One crash outcome: recover, recover again, work more, lose power, recover. Returns the
/// number of recoveries.
fn check_outcome(disk: &Arc<SimDisk>, model: &Model, seed: u64, k: u64, outcome: u64) -> u64 {
    let context = format!("seed {seed}, crash after step {k}, outcome {outcome}");
    let disk = disk.fork();
    if outcome == 0 {
        disk.process_crash();
    } else {
        disk.power_loss();
    }
    let mut model = model.clone();
    let first = open(&disk).unwrap_or_else(|e| panic!("{context}: open: {e}"));
    model.check_recovery(&first).unwrap_or_else(|e| {
        panic!(
            "{context}: {e}; checkpoint {:?} records {:?} cut {:?} end {} names {:?}",
            first.checkpoint.as_ref().map(|c| c.lsn()),
            first.records.iter().map(|r| r.lsn.0).collect::<Vec<_>>(),
            first.cut,
            first.store.log_end_position(),
            disk.file_names()
        )
    });
    let state = recovered_state(&first);
    drop(first);
    disk.power_loss();
    let again = open(&disk).unwrap_or_else(|e| panic!("{context}: second open: {e}"));
    assert_eq!(
        recovered_state(&again),
        state,
        "{context}: recovery is not deterministic"
    );
    let mut store = again.store;
    let mut workload = Workload {
        rng: SimRng::new(seed ^ k ^ outcome),
        groups: 5,
        checkpoint_every: 3,
        sync: SyncMode::Always,
        grow_every: 0,
        grown: 0,
        waited: 0,
    };
    workload.run(&mut store, &mut model);
    drop(store);
    disk.power_loss();
    let names = disk.file_names();
    let before = model.clone();
    recover_and_check(&disk, &mut model).unwrap_or_else(|e| {
        panic!(
            "{context}, after more: {e} {names:?} {:?} {}",
            disk.file_names(),
            before.durable_checkpoint
        )
    });
    3
}

#[test]
fn crash_at_every_storage_step() {
    let first_seed = test_seed("crash_at_every_storage_step", 1000);
    let recoveries = crash_everywhere(first_seed, 12 * scale(), 0);
    eprintln!("crash_at_every_storage_step: {recoveries} recoveries");
    assert!(
        recoveries >= 10_000,
        "CI scale is at least 10,000 recoveries, ran {recoveries}"
    );
}

/// The same with the log growing in place now and then (its fill, a group meanwhile, its
/// header), also while the live part spans a lap's end (the growth then waits): a crash at any
/// step of it recovers every acknowledged record, in the old ring or the grown one.
#[test]
fn crash_at_every_storage_step_while_the_log_grows() {
    let first_seed = test_seed("crash_at_every_storage_step_while_the_log_grows", 5000);
    let seeds = 6 * scale();
    let (mut grown, mut waited, mut larger) = (0, 0, 0);
    for seed in first_seed..first_seed + seeds {
        let (disk, workload, _) = scenario(seed, None, 24);
        grown += workload.grown;
        waited += workload.waited;
        let capacity = open(&disk).expect("reopen").store.log_capacity_bytes();
        larger += u32::from(capacity > SIM_CAPACITY_BYTES);
    }
    // The workloads must reach both ways a growth goes, or the crashes prove less.
    assert!(grown > 0 && waited > 0, "growths {grown}, waited {waited}");
    assert!(larger > 0, "no log ended larger than it began");
    let recoveries = crash_everywhere(first_seed, seeds, 24);
    eprintln!(
        "crash_at_every_storage_step_while_the_log_grows: {recoveries} recoveries \
         ({grown} growths, {waited} waited)"
    );
    assert!(
        recoveries >= 5_000,
        "CI scale is at least 5,000 recoveries, ran {recoveries}"
    );
}

/// Crashes the workload of each seed after each of its storage steps, and checks every
/// outcome; returns the recoveries made.
fn crash_everywhere(first_seed: u64, seeds: u64, grow_every: u64) -> u64 {
    let mut recoveries = 0;
    for seed in first_seed..first_seed + seeds {
        let (disk, _, _) = scenario(seed, None, grow_every);
        let steps = disk.steps();
        for k in 1..=steps {
            let (disk, _, model) = scenario(seed, Some(k), grow_every);
            assert!(
                disk.is_frozen(),
                "seed {seed}: the crash point {k} was reached"
            );
            for outcome in 0..OUTCOMES {
                recoveries += check_outcome(&disk, &model, seed, k, outcome);
            }
        }
    }
    recoveries
}
