//! Growing the log in place: every acknowledged record stays readable through a growth made in
//! any lap and at any offset (the new base keeps each live frame where it is), a growth waits
//! while the live part spans a lap's end, a fill that fails leaves the log as it was, and a
//! header that may not have reached the disk poisons the store.

use std::sync::Arc;

use pure_store::sim::{test_seed, Faults, SimDisk, SimRng};
use pure_store::{Error, Store, SyncMode};

use crate::harness::{checkpoint, log_path, open_growing, Model, Workload, SIM_CAPACITY_BYTES};

fn workload(seed: u64, groups: u32, checkpoint_every: u64) -> Workload {
    Workload {
        rng: SimRng::new(seed),
        groups,
        checkpoint_every,
        sync: SyncMode::Always,
        grow_every: 0,
        grown: 0,
        waited: 0,
    }
}

/// Opens the simulated store, whose log may grow to eight times its first capacity, and checks
/// what it recovered against `model`.
fn reopen(disk: &Arc<SimDisk>, model: &mut Model, context: &str) -> Store {
    let recovered =
        open_growing(disk, SyncMode::Always).unwrap_or_else(|e| panic!("{context}: open: {e}"));
    model
        .check_recovery(&recovered)
        .unwrap_or_else(|e| panic!("{context}: {e}"));
    recovered.store
}

/// Grows the log to `capacity`, with a checkpoint first if the live part spans a lap's end
/// (which must then be why it waited). Returns whether it had to wait.
fn grow(store: &mut Store, model: &mut Model, capacity: u64) -> bool {
    let fill = store.prepare_growth(capacity).expect("the log may grow");
    let prepared = fill.run().expect("the fill succeeds");
    let before = store.log_capacity_bytes();
    if store.grow(&prepared).expect("the header is written") {
        return false;
    }
    assert_eq!(
        store.log_capacity_bytes(),
        before,
        "a growth that waits changes nothing"
    );
    checkpoint(store, model).expect("checkpoint");
    assert!(
        store.grow(&prepared).expect("the header is written"),
        "after a checkpoint of everything the live part is empty, and the growth is made"
    );
    true
}

#[test]
fn a_growth_in_any_lap_keeps_every_acknowledged_record() {
    let first_seed = test_seed("a_growth_in_any_lap_keeps_every_acknowledged_record", 70);
    let (mut waited, mut lapped) = (0, 0);
    for seed in first_seed..first_seed + 300 {
        let context = format!("seed {seed}");
        let disk = SimDisk::new(seed);
        let mut model = Model::default();
        let mut store = reopen(&disk, &mut model, &context);
        let mut rng = SimRng::new(seed ^ 0xa5a5);
        // Somewhere in the first laps, with checkpoints now and then: the live part starts at
        // any offset.
        workload(seed, 10 + rng.below(60) as u32, 2 + rng.below(10)).run(&mut store, &mut model);
        lapped += u32::from(store.log_end_position() > SIM_CAPACITY_BYTES);
        let before = store.log_capacity_bytes();
        let capacity = before + 4096 * (1 + rng.below(8));
        waited += u32::from(grow(&mut store, &mut model, capacity));
        assert_eq!(store.log_capacity_bytes(), capacity, "{context}");
        // Right after the growth, and again after laps of the grown ring.
        drop(store);
        disk.power_loss();
        let mut store = reopen(&disk, &mut model, &format!("{context}, after the growth"));
        assert_eq!(
            store.log_capacity_bytes(),
            capacity,
            "{context}: the header says it"
        );
        workload(seed ^ 1, 20 + rng.below(60) as u32, 2 + rng.below(10))
            .run(&mut store, &mut model);
        drop(store);
        disk.power_loss();
        reopen(&disk, &mut model, &format!("{context}, after more laps"));
    }
    // The cases must reach the growths that matter, or the test proves less than it says.
    eprintln!("{lapped} growths after the first lap, {waited} waited for a checkpoint");
    assert!(
        lapped > 100 && waited > 10,
        "lapped {lapped}, waited {waited}"
    );
}

#[test]
fn a_fill_that_fails_leaves_the_log_as_it_was() {
    let disk = SimDisk::new(3);
    let mut model = Model::default();
    let mut store = reopen(&disk, &mut model, "fresh");
    workload(3, 20, 5).run(&mut store, &mut model);
    let length = disk.read(&log_path()).expect("the log").len();
    // Every write past the file's end now fails: the disk is full.
    disk.set_faults(Faults {
        enospc_from_alloc_write: Some(1),
        ..Faults::default()
    });
    let fill = store
        .prepare_growth(2 * SIM_CAPACITY_BYTES)
        .expect("may grow");
    match fill.run() {
        Err(Error::Io { source, .. }) => {
            assert_eq!(source.raw_os_error(), Some(libc::ENOSPC), "{source}")
        }
        other => panic!("the fill failed with ENOSPC, not {other:?}"),
    }
    assert_eq!(
        disk.read(&log_path()).expect("the log").len(),
        length,
        "the file is cut back: a growth that could not be made takes no space"
    );
    assert_eq!(store.log_capacity_bytes(), SIM_CAPACITY_BYTES);
    assert!(store.poisoned().is_none(), "a failed fill changes nothing");
    disk.set_faults(Faults::default());
    workload(4, 20, 5).run(&mut store, &mut model);
    assert!(store.poisoned().is_none());
    drop(store);
    disk.power_loss();
    reopen(&disk, &mut model, "after a failed fill");
}

#[test]
fn a_header_whose_sync_failed_poisons_the_store() {
    let mut poisoned = 0;
    for seed in 0..40 {
        let context = format!("seed {seed}");
        let disk = SimDisk::new(seed);
        let mut model = Model::default();
        let mut store = reopen(&disk, &mut model, &context);
        workload(seed, 10 + seed as u32, 3).run(&mut store, &mut model);
        if store.log_used_bytes() + store.log_capacity_bytes() / 64 > SIM_CAPACITY_BYTES {
            checkpoint(&mut store, &mut model).expect("checkpoint");
        }
        let prepared = store
            .prepare_growth(2 * SIM_CAPACITY_BYTES)
            .expect("may grow")
            .run()
            .expect("the fill succeeds");
        // The next sync is the header's.
        disk.set_faults(Faults {
            fail_sync_at: Some(1),
            ..Faults::default()
        });
        match store.grow(&prepared) {
            Ok(false) => continue,
            Ok(true) => panic!("{context}: the header's sync failed, and the growth was made"),
            Err(_) => {}
        }
        assert!(
            store.poisoned().is_some(),
            "{context}: the store is poisoned"
        );
        poisoned += 1;
        assert!(matches!(store.commit(), Err(Error::Poisoned { .. })));
        drop(store);
        // Whichever header the disk kept, every acknowledged record is read back.
        disk.power_loss();
        let mut store = reopen(
            &disk,
            &mut model,
            &format!("{context}, after the failed sync"),
        );
        workload(seed ^ 9, 30, 4).run(&mut store, &mut model);
        drop(store);
        disk.power_loss();
        reopen(&disk, &mut model, &format!("{context}, later"));
    }
    assert!(
        poisoned > 20,
        "most cases reach the failed sync: {poisoned}"
    );
}
