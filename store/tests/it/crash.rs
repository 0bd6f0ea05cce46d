//! Crash at every storage step: a seeded workload (two sessions, groups, checkpoints, ring
//! wraps) is frozen after its k-th storage step for every k; the disk then loses power (or
//! only the process dies), and recovery must hold invariants 1-4; recovering again gives the
//! same state (6); more work after the recovery, another power loss and recovery hold them
//! again (no ghosts from before the crash).

use std::sync::Arc;

use pure_store::sim::{test_seed, Faults, SimDisk, SimRng};
use pure_store::SyncMode;

use crate::harness::{
    open, open_in_mode, recover_and_check, recovered_state, scale, Model, Workload,
};

/// Groups per session of the workload.
const GROUPS: u32 = 30;
/// Outcomes tried per crash point: one process crash and this many power losses minus one.
const OUTCOMES: u64 = 4;

/// Runs the workload on a fresh disk, frozen after `crash_after` steps if given.
fn scenario(seed: u64, crash_after: Option<u64>) -> (Arc<SimDisk>, Model) {
    let disk = SimDisk::new(seed);
    disk.set_faults(Faults {
        crash_after_steps: crash_after,
        ..Faults::default()
    });
    let mut model = Model::default();
    let mut workload = Workload {
        rng: SimRng::new(seed),
        groups: GROUPS,
        checkpoint_every: 8,
        sync: SyncMode::Always,
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
        let Ok(recovered) = open_in_mode(&disk, sync) else {
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
    (disk, model)
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
    let seeds = 12 * scale();
    let mut recoveries = 0;
    for seed in first_seed..first_seed + seeds {
        let (disk, _) = scenario(seed, None);
        let steps = disk.steps();
        for k in 1..=steps {
            let (disk, model) = scenario(seed, Some(k));
            assert!(
                disk.is_frozen(),
                "seed {seed}: the crash point {k} was reached"
            );
            for outcome in 0..OUTCOMES {
                recoveries += check_outcome(&disk, &model, seed, k, outcome);
            }
        }
    }
    eprintln!("crash_at_every_storage_step: {recoveries} recoveries");
    assert!(
        recoveries >= 10_000,
        "CI scale is at least 10,000 recoveries, ran {recoveries}"
    );
}
