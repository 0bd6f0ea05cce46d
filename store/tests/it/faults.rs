//! Injected faults: EIO at every sync of a workload, ENOSPC at every allocating write, and a
//! crash at every step of writing and installing a checkpoint.

use std::sync::Arc;

use pure_store::sim::{test_seed, Faults, SimDisk, SimRng};
use pure_store::SyncMode;
use pure_store::{Error, Store};

use crate::harness::{
    checkpoint, image_of, open, open_in_mode, record_bytes, recover_and_check, recovered_state,
    Model, Workload,
};

/// Opens a fresh disk and runs the same seeded workload; returns what it left behind.
fn run(seed: u64, faults: Faults, groups: u32) -> (Arc<SimDisk>, Model, Option<Store>) {
    let disk = SimDisk::new(seed);
    disk.set_faults(faults);
    let mut model = Model::default();
    let Ok(recovered) = open(&disk) else {
        return (disk, model, None);
    };
    let mut store = recovered.store;
    let mut workload = Workload {
        rng: SimRng::new(seed),
        groups,
        checkpoint_every: 4,
        sync: SyncMode::Always,
        grow_every: 0,
        grown: 0,
        waited: 0,
    };
    workload.run(&mut store, &mut model);
    (disk, model, Some(store))
}

#[test]
fn failed_sync_at_every_sync() {
    let first_seed = test_seed("failed_sync_at_every_sync", 21);
    for seed in first_seed..first_seed + crate::harness::scale() {
        failed_sync_at_every_sync_with(seed);
    }
}

fn failed_sync_at_every_sync_with(seed: u64) {
    let (disk, _, _) = run(seed, Faults::default(), 40);
    let syncs = disk.syncs();
    let mut poisoned = 0;
    for k in 1..=syncs {
        let faults = Faults {
            fail_sync_at: Some(k),
            ..Faults::default()
        };
        let (disk, mut model, store) = run(seed, faults, 40);
        let context = format!("seed {seed}, EIO at sync {k}");
        if let Some(mut store) = store {
            if let Some(cause) = store.poisoned().map(str::to_string) {
                poisoned += 1;
                assert!(
                    cause.contains("fdatasync"),
                    "{context}: the cause names the sync"
                );
                let acked_before = model.acked;
                assert!(
                    matches!(store.append(b"x"), Err(Error::Poisoned { .. })),
                    "{context}"
                );
                assert!(
                    matches!(store.commit(), Err(Error::Poisoned { .. })),
                    "{context}"
                );
                assert_eq!(
                    store.durable_lsn().0,
                    acked_before,
                    "{context}: nothing more durable"
                );
            }
        }
        disk.power_loss();
        let mut store =
            recover_and_check(&disk, &mut model).unwrap_or_else(|e| panic!("{context}: {e}"));
        // The pages of the failed sync were marked clean: work on, lose power, recover.
        let mut workload = Workload {
            rng: SimRng::new(k),
            groups: 6,
            checkpoint_every: 3,
            sync: SyncMode::Always,
            grow_every: 0,
            grown: 0,
            waited: 0,
        };
        workload.run(&mut store, &mut model);
        drop(store);
        disk.power_loss();
        recover_and_check(&disk, &mut model).unwrap_or_else(|e| panic!("{context}, later: {e}"));
    }
    eprintln!("failed_sync_at_every_sync: {syncs} syncs, {poisoned} poisoned the store");
    assert!(
        poisoned > syncs / 2,
        "most syncs are commit syncs and poison the store"
    );
}

#[test]
fn disk_full_at_every_allocating_write() {
    let first_seed = test_seed("disk_full_at_every_allocating_write", 22);
    for seed in first_seed..first_seed + crate::harness::scale() {
        disk_full_at_every_allocating_write_with(seed);
    }
}

fn disk_full_at_every_allocating_write_with(seed: u64) {
    let (disk, _, _) = run(seed, Faults::default(), 40);
    let allocating = disk.alloc_writes();
    assert!(
        allocating >= 4,
        "the workload creates the log and writes checkpoints"
    );
    for k in 1..=allocating {
        let faults = Faults {
            enospc_from_alloc_write: Some(k),
            ..Faults::default()
        };
        let (disk, mut model, store) = run(seed, faults, 40);
        let context = format!("seed {seed}, ENOSPC from allocating write {k}");
        // A failed allocation leaves no temporary file behind, or a full disk would stay full
        // after the process gave up (the log's preallocation, a checkpoint's image).
        let leftovers: Vec<_> = disk
            .file_names()
            .into_iter()
            .filter(|path| path.to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{context}: left {leftovers:?}");
        if let Some(store) = store {
            // Only log creation and checkpoints allocate: commits overwrite preallocated space.
            assert_eq!(
                store.poisoned(),
                None,
                "{context}: a full disk never hits a commit"
            );
        }
        disk.power_loss();
        // Space returns. A partial checkpoint is never chosen (it would fail its CRC), and
        // every acknowledged record is there.
        let mut store =
            recover_and_check(&disk, &mut model).unwrap_or_else(|e| panic!("{context}: {e}"));
        checkpoint(&mut store, &mut model).unwrap_or_else(|e| panic!("{context}: resume: {e}"));
    }
    eprintln!("disk_full_at_every_allocating_write: {allocating} injection points");
}

#[test]
fn checkpoint_crash_at_every_step() {
    let seed = test_seed("checkpoint_crash_at_every_step", 23);
    let mut k = 1;
    loop {
        let disk = SimDisk::new(seed);
        let mut model = Model::default();
        let mut store = open(&disk).expect("fresh store").store;
        for lsn in 1..=20 {
            let bytes = record_bytes(lsn, 0);
            store.append(&bytes).expect("append");
            model.records.push(bytes);
            model.acked = store.commit().expect("commit").0;
        }
        checkpoint(&mut store, &mut model).expect("first checkpoint");
        let first = model.durable_checkpoint;
        for lsn in 21..=25 {
            let bytes = record_bytes(lsn, 0);
            store.append(&bytes).expect("append");
            model.records.push(bytes);
            model.acked = store.commit().expect("commit").0;
        }
        let used_before = store.log_used_bytes();
        disk.set_faults(Faults {
            crash_after_steps: Some(k),
            ..Faults::default()
        });
        let result = checkpoint(&mut store, &mut model);
        let completed = result.is_ok() && !disk.is_frozen();
        if result.is_err() {
            assert_eq!(
                store.log_used_bytes(),
                used_before,
                "k {k}: no log space freed"
            );
            assert_eq!(
                model.durable_checkpoint, first,
                "k {k}: not durable, not installed"
            );
        }
        drop(store);
        for outcome in 0..4 {
            let disk = disk.fork();
            if outcome == 0 {
                disk.process_crash()
            } else {
                disk.power_loss()
            }
            let mut model = model.clone();
            let recovered = open(&disk).unwrap_or_else(|e| panic!("k {k}, outcome {outcome}: {e}"));
            let chosen = recovered.checkpoint.as_ref().map_or(0, |c| c.lsn().0);
            assert!(
                chosen == first || chosen == 25,
                "k {k}: chose checkpoint {chosen}"
            );
            model
                .check_recovery(&recovered)
                .unwrap_or_else(|e| panic!("k {k}: {e}"));
        }
        if completed {
            break;
        }
        k += 1;
    }
    eprintln!("checkpoint_crash_at_every_step: {k} steps");
}

/// Under `SyncMode::None` a checkpoint may cover an LSN in the middle of a group whose frame was
/// never synced; replay after the checkpoint starts at that frame. `checkpoint_writer` syncs the
/// log first, so a power loss cannot take the frame away from under the checkpoint.
#[test]
fn checkpoint_inside_an_unsynced_group_survives_power_loss() {
    let first_seed = test_seed(
        "checkpoint_inside_an_unsynced_group_survives_power_loss",
        24,
    );
    for seed in first_seed..first_seed + 20 * crate::harness::scale() {
        let disk = SimDisk::new(seed);
        let mut store = open_in_mode(&disk, SyncMode::None)
            .expect("fresh store")
            .store;
        let records: Vec<Vec<u8>> = (1..=3).map(|lsn| record_bytes(lsn, 0)).collect();
        for record in &records {
            store.append(record).expect("append");
        }
        store.commit().expect("commit");
        let mut writer = store.checkpoint_writer(pure_store::Lsn(2)).expect("writer");
        std::io::Write::write_all(&mut writer, &image_of(&records[..2])).expect("image");
        store
            .install_checkpoint(writer.finish().expect("finish"))
            .expect("install");
        drop(store);
        disk.power_loss();
        let recovered = open(&disk).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(recovered_state(&recovered), records, "seed {seed}");
    }
}
