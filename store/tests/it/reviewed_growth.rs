//! Review of d364cae (the log grows in place): faults found, each proved by a test that fails,
//! and the checks that held.

use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

use pure_store::sim::{Faults, SimDisk, SimRng};
use pure_store::{Ending, Error, Io, Lsn, Recovered, Store, StoreOptions, SyncMode};

use crate::harness::{
    checkpoint, log_path, open_growing, record_bytes, sim_dir, Model, Workload, SIM_CAPACITY_BYTES,
};

fn growing(max: u64) -> StoreOptions {
    StoreOptions {
        sync: SyncMode::Always,
        log_capacity_bytes: SIM_CAPACITY_BYTES,
        log_capacity_max_bytes: max,
    }
}

fn open_with(disk: &Arc<SimDisk>, options: StoreOptions) -> Result<Recovered, Error> {
    Store::open_with(disk.clone() as Arc<dyn Io>, &sim_dir(), options)
}

fn workload(seed: u64, groups: u32, checkpoint_every: u64, grow_every: u64) -> Workload {
    Workload {
        rng: SimRng::new(seed),
        groups,
        checkpoint_every,
        sync: SyncMode::Always,
        grow_every,
        grown: 0,
        waited: 0,
    }
}

/// Bytes that do not compress (frames are compressed when that saves bytes).
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    SimRng::new(seed).fill(&mut bytes);
    bytes
}

/// Appends and commits one record of `bytes`, following `model`.
fn commit_one(store: &mut Store, model: &mut Model, bytes: Vec<u8>) -> Result<Lsn, Error> {
    store.append(&bytes)?;
    model.records.push(bytes);
    let durable = store.commit()?;
    model.acked = durable.0;
    Ok(durable)
}

// ---------------------------------------------------------------------------------------------
// Fault, fixed: a largest capacity that is not whole growth units (4096 bytes) panicked the
// growth; the store now takes the largest capacity in whole units, rounded down.
//
// `prepare_growth` rounds the wanted capacity up to whole growth units and then caps it at
// `log_capacity_max_bytes`, which nothing rounds: `LogHeader::grown` then asserts whole units.
// pure-serve passes --log-capacity-max through unchecked (e.g. 100000000, 100 MB).

#[test]
fn reviewed_growth_to_a_largest_capacity_not_whole_growth_units() {
    // Whole sectors (a valid version-3 capacity), not whole 4 KiB units.
    let max = 2 * SIM_CAPACITY_BYTES + 512;
    let disk = SimDisk::new(11);
    let mut store = open_with(&disk, growing(max)).expect("fresh").store;
    assert_eq!(store.log_capacity_max_bytes(), max / 4096 * 4096);
    let mut model = Model::default();
    commit_one(&mut store, &mut model, record_bytes(1, 0)).expect("commit");
    let fill = store
        .prepare_growth(4 * SIM_CAPACITY_BYTES)
        .expect("the log may grow");
    assert!(
        fill.capacity() <= max,
        "the fill stays within the largest capacity"
    );
    let prepared = fill.run().expect("the fill succeeds");
    let grown = panic::catch_unwind(AssertUnwindSafe(|| store.grow(&prepared)));
    match grown {
        Ok(Ok(true)) => {}
        Ok(other) => panic!("the growth to the largest capacity was not made: {other:?}"),
        Err(panicked) => panic!(
            "growing to log_capacity_max_bytes = {max} (whole sectors, not whole 4 KiB units) \
             panicked: {:?}",
            panicked
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panicked.downcast_ref::<&str>().map(|s| s.to_string()))
        ),
    }
}

/// The same through what a caller does for a record that only the largest ring can frame:
/// `append` takes it (up to the largest frame of `log_capacity_max_bytes`), `commit` says
/// `LogFull`, and the growth to `capacity_needed` is what must make room.
#[test]
fn reviewed_growth_a_record_the_largest_ring_frames_can_be_committed() {
    let max = 4 * SIM_CAPACITY_BYTES + 1024;
    let disk = SimDisk::new(12);
    let mut store = open_with(&disk, growing(max)).expect("fresh").store;
    let mut model = Model::default();
    commit_one(&mut store, &mut model, record_bytes(1, 0)).expect("commit");
    // Nearly the largest frame of the largest ring (in whole units below `max`); a byte more
    // than that frame holds is refused at once.
    let largest = store.log_capacity_max_bytes();
    assert_eq!(largest, max / 4096 * 4096);
    assert!(matches!(
        store.append(&noise((largest / 2) as usize, 5)),
        Err(Error::RecordTooLarge { .. })
    ));
    let big = noise((largest / 2 - 600) as usize, 5);
    store
        .append(&big)
        .expect("append takes a record the largest ring can frame");
    assert!(matches!(store.commit(), Err(Error::LogFull { .. })));
    model.records.push(big);
    let needed = store.capacity_needed();
    assert!(needed <= max, "needed {needed}, max {max}");
    let prepared = store
        .prepare_growth(needed)
        .expect("may grow")
        .run()
        .expect("fill");
    let grown = panic::catch_unwind(AssertUnwindSafe(|| store.grow(&prepared)));
    assert!(
        matches!(grown, Ok(Ok(true))),
        "the growth the record needs could not be made (panicked: {})",
        grown.is_err()
    );
    store.commit().expect("the record fits the grown ring");
}

// ---------------------------------------------------------------------------------------------
// Fault: damage at rest in the newest header slot of a grown log is taken for a torn slot,
// silently: the older slot's capacity and base place the frames written after the growth
// wrongly, and recovery ends "clean" before them, losing acknowledged records. Before the
// change a damaged header refused the open (bit_flip::bit_flips_in_the_log_header).

fn grown_log(seed: u64) -> (Arc<SimDisk>, Model) {
    let disk = SimDisk::new(seed);
    let mut model = Model::default();
    let mut store = open_growing(&disk, SyncMode::Always).expect("fresh").store;
    let mut rng = SimRng::new(seed);
    // A few records in the first lap, a growth to twice the ring, then records past the old
    // lap's end, into the grown space.
    for _ in 0..5 {
        let lsn = model.records.len() as u64 + 1;
        commit_one(&mut store, &mut model, record_bytes(lsn, 0)).expect("commit");
    }
    let prepared = store
        .prepare_growth(2 * SIM_CAPACITY_BYTES)
        .expect("may grow")
        .run()
        .expect("fill");
    assert!(store.grow(&prepared).expect("grow"));
    while store.log_end_position() < SIM_CAPACITY_BYTES + 4096 {
        let lsn = model.records.len() as u64 + 1;
        let len = 200 + rng.below(600) as usize;
        commit_one(&mut store, &mut model, noise(len, lsn)).expect("commit");
    }
    drop(store);
    disk.power_loss();
    (disk, model)
}

#[test]
fn reviewed_growth_damage_in_the_newest_header_slot_is_detected() {
    let (built, model) = grown_log(21);
    // Slot 1 (file offset 4096) holds generation 1, the newest. Flip one bit of each of its
    // bytes in turn (its magic, version, capacity, log id, base, generation, CRC).
    let mut silent = Vec::new();
    for byte in 0..52u64 {
        let disk = built.fork();
        let offset = 4096 + byte;
        let old = disk.read(&log_path()).expect("log")[offset as usize];
        disk.damage(&log_path(), offset, &[old ^ 0x10]);
        match open_growing(&disk, SyncMode::Always) {
            Err(Error::Corrupt { .. }) => {}
            Err(e) => panic!("byte {byte}: unexpected {e}"),
            Ok(recovered) => {
                let got = recovered.records.len() as u64;
                if got < model.acked {
                    silent.push((byte, got));
                }
            }
        }
    }
    assert!(
        silent.is_empty(),
        "a bit flip in the newest header slot opened as the older log, losing acknowledged \
         records (acked {}): (slot byte, records recovered) = {silent:?}",
        model.acked
    );
}

#[test]
fn reviewed_growth_check_reports_damage_in_the_newest_header_slot() {
    let (disk, model) = grown_log(22);
    let old = disk.read(&log_path()).expect("log")[4096 + 20];
    disk.damage(&log_path(), 4096 + 20, &[old ^ 1]);
    let examined = pure_store::examine(disk.clone() as Arc<dyn Io>, &sim_dir()).expect("examine");
    let clean = matches!(examined.ending, Ending::Clean { .. });
    assert!(
        !(clean && (examined.records.len() as u64) < model.acked),
        "check calls a log clean whose newest header is damaged, with {} of {} acknowledged \
         records",
        examined.records.len(),
        model.acked
    );
}

// ---------------------------------------------------------------------------------------------
// Fault (API), fixed: a `GrowthFill` was not tied to the log as it is when it runs. A fill
// prepared before another growth was made wrote its zeros from the old ring's end, over the
// frames the grown ring holds there (and a failed one cut the file back to the old length).
// Now the store hands out one fill at a time: none while another is out.

#[test]
fn reviewed_growth_a_stale_fill_never_zeroes_live_frames() {
    let disk = SimDisk::new(31);
    let mut model = Model::default();
    let mut store = open_growing(&disk, SyncMode::Always).expect("fresh").store;
    commit_one(&mut store, &mut model, record_bytes(1, 0)).expect("commit");
    let first = store
        .prepare_growth(2 * SIM_CAPACITY_BYTES)
        .expect("may grow");
    assert!(
        store.prepare_growth(4 * SIM_CAPACITY_BYTES).is_none(),
        "no second fill while one is out"
    );
    let prepared = first.run().expect("fill");
    assert!(store.grow(&prepared).expect("grow"));
    while store.log_end_position() < SIM_CAPACITY_BYTES + 4096 {
        let lsn = model.records.len() as u64 + 1;
        commit_one(&mut store, &mut model, noise(500, lsn)).expect("commit");
    }
    // The next fill is the grown log's: its zeros start past the grown ring.
    let next = store
        .prepare_growth(4 * SIM_CAPACITY_BYTES)
        .expect("may grow again")
        .run()
        .expect("fill");
    assert!(store.grow(&next).expect("grow"));
    drop(store);
    disk.power_loss();
    let recovered = open_growing(&disk, SyncMode::Always).expect("reopen");
    model
        .check_recovery(&recovered)
        .expect("every acknowledged record");
}

/// A fill dropped without running lets the next one out.
#[test]
fn reviewed_growth_a_fill_dropped_unrun_lets_another_out() {
    let disk = SimDisk::new(32);
    let store = open_growing(&disk, SyncMode::Always).expect("fresh").store;
    let fill = store
        .prepare_growth(2 * SIM_CAPACITY_BYTES)
        .expect("may grow");
    assert!(store.prepare_growth(2 * SIM_CAPACITY_BYTES).is_none());
    drop(fill);
    assert!(store.prepare_growth(2 * SIM_CAPACITY_BYTES).is_some());
}

// ---------------------------------------------------------------------------------------------
// Checks that held (expected to pass).

/// Many growths (both slots in turn, capacities that are not powers of two), in any lap, with
/// checkpoints, a power loss after every few groups; every acknowledged record recovered.
#[test]
fn reviewed_growth_many_growths_and_power_losses() {
    let mut grown = 0;
    for seed in 0..60 {
        let disk = SimDisk::new(1000 + seed);
        let mut model = Model::default();
        for session in 0..8 {
            let recovered = open_growing(&disk, SyncMode::Always)
                .unwrap_or_else(|e| panic!("seed {seed} session {session}: {e}"));
            model
                .check_recovery(&recovered)
                .unwrap_or_else(|e| panic!("seed {seed} session {session}: {e}"));
            let mut store = recovered.store;
            let mut w = workload(seed * 31 + session, 25, 6, 3);
            w.run(&mut store, &mut model);
            grown += w.grown;
            drop(store);
            disk.power_loss();
        }
        let recovered = open_growing(&disk, SyncMode::Always).expect("reopen");
        model.check_recovery(&recovered).expect("last recovery");
    }
    assert!(grown > 200, "growths made: {grown}");
}

/// A record larger than the ring can frame, committed after a growth that first waits for a
/// checkpoint (the live part spans a lap's end), in any lap; a power loss keeps it.
#[test]
fn reviewed_growth_a_record_larger_than_the_ring_after_laps() {
    let mut waited = 0;
    for seed in 0..40 {
        let disk = SimDisk::new(2000 + seed);
        let mut model = Model::default();
        let mut store = open_growing(&disk, SyncMode::Always).expect("fresh").store;
        workload(seed, 30 + seed as u32, 5, 0).run(&mut store, &mut model);
        let big = noise(3 * SIM_CAPACITY_BYTES as usize / 2, seed);
        let lsn = store.append(&big).expect("append");
        model.records.push(big);
        assert!(matches!(store.commit(), Err(Error::LogFull { .. })));
        let prepared = store
            .prepare_growth(store.capacity_needed())
            .expect("may grow")
            .run()
            .expect("fill");
        if !store.grow(&prepared).expect("grow") {
            waited += 1;
            checkpoint(&mut store, &mut model).expect("checkpoint");
            assert!(store.grow(&prepared).expect("grow"));
        }
        assert_eq!(store.commit().expect("commit"), lsn);
        model.acked = lsn.0;
        drop(store);
        disk.power_loss();
        let recovered = open_growing(&disk, SyncMode::Always).expect("reopen");
        model.check_recovery(&recovered).expect("recovery");
    }
    eprintln!("{waited} growths waited for a checkpoint");
}

/// A crash after the fill (the file longer than its header says), then `check`: the log is
/// read with the header it has, clean, with every record; and a later growth works.
#[test]
fn reviewed_growth_check_after_a_fill_that_was_never_made_the_logs() {
    let disk = SimDisk::new(41);
    let mut model = Model::default();
    let mut store = open_growing(&disk, SyncMode::Always).expect("fresh").store;
    workload(41, 40, 6, 0).run(&mut store, &mut model);
    let _prepared = store
        .prepare_growth(4 * SIM_CAPACITY_BYTES)
        .expect("may grow")
        .run()
        .expect("fill");
    drop(store);
    disk.power_loss();
    let examined = pure_store::examine(disk.clone() as Arc<dyn Io>, &sim_dir()).expect("examine");
    assert!(
        matches!(examined.ending, Ending::Clean { .. }),
        "{:?}",
        examined.ending
    );
    drop(examined);
    let recovered = open_growing(&disk, SyncMode::Always).expect("reopen");
    model.check_recovery(&recovered).expect("recovery");
    let mut store = recovered.store;
    assert_eq!(store.log_capacity_bytes(), SIM_CAPACITY_BYTES);
    let prepared = store
        .prepare_growth(2 * SIM_CAPACITY_BYTES)
        .expect("may grow")
        .run()
        .expect("fill");
    let _ = store.grow(&prepared).expect("grow");
    workload(42, 40, 6, 0).run(&mut store, &mut model);
    drop(store);
    disk.power_loss();
    let recovered = open_growing(&disk, SyncMode::Always).expect("reopen");
    model.check_recovery(&recovered).expect("recovery");
}

/// A poisoned store hands out no fill; a log at its largest capacity none either.
#[test]
fn reviewed_growth_no_fill_for_a_poisoned_store_or_a_log_at_its_largest() {
    let disk = SimDisk::new(51);
    let mut model = Model::default();
    let mut store = open_growing(&disk, SyncMode::Always).expect("fresh").store;
    commit_one(&mut store, &mut model, record_bytes(1, 0)).expect("commit");
    let prepared = store
        .prepare_growth(u64::MAX)
        .expect("may grow")
        .run()
        .expect("fill");
    assert_eq!(prepared.capacity(), 8 * SIM_CAPACITY_BYTES);
    assert!(store.grow(&prepared).expect("grow"));
    assert!(store.prepare_growth(u64::MAX).is_none(), "at its largest");
    disk.set_faults(Faults {
        fail_sync_at: Some(1),
        ..Faults::default()
    });
    assert!(commit_one(&mut store, &mut model, record_bytes(2, 0)).is_err());
    assert!(store.poisoned().is_some());
    disk.set_faults(Faults::default());
    let disk2 = SimDisk::new(52);
    let mut store2 = open_growing(&disk2, SyncMode::Always).expect("fresh").store;
    disk2.set_faults(Faults {
        fail_sync_at: Some(1),
        ..Faults::default()
    });
    assert!(commit_one(&mut store2, &mut Model::default(), record_bytes(1, 0)).is_err());
    assert!(store2.prepare_growth(2 * SIM_CAPACITY_BYTES).is_none());
}

/// Damage inside acknowledged data of a log grown in a later lap (a base other than 0), in a
/// frame past the old ring's end: `check` names the file offset of the damaged frame (placed
/// by the base), the open refuses, and the records before it are the saved prefix.
#[test]
fn reviewed_growth_damage_in_a_grown_ring_is_placed_by_its_base() {
    let mut based = 0;
    for seed in 0..30 {
        let disk = SimDisk::new(3000 + seed);
        let mut model = Model::default();
        let mut store = open_growing(&disk, SyncMode::Always).expect("fresh").store;
        // Into a later lap, then a checkpoint of everything: the live part starts mid-lap.
        workload(seed, 40 + seed as u32, 4, 0).run(&mut store, &mut model);
        checkpoint(&mut store, &mut model).expect("checkpoint");
        let tail = store.log_end_position();
        let prepared = store
            .prepare_growth(2 * SIM_CAPACITY_BYTES)
            .expect("may grow")
            .run()
            .expect("fill");
        assert!(store.grow(&prepared).expect("grow"));
        based += u32::from(tail % SIM_CAPACITY_BYTES != 0 && tail >= SIM_CAPACITY_BYTES);
        // Frames of one record each, to past the old ring's end; remember where each starts.
        let mut starts = Vec::new();
        let old_lap_end = tail - tail % SIM_CAPACITY_BYTES + SIM_CAPACITY_BYTES;
        while store.log_end_position() < old_lap_end + 3000 {
            let lsn = model.records.len() as u64 + 1;
            let end_before = store.log_end_position();
            commit_one(&mut store, &mut model, noise(300, lsn)).expect("commit");
            starts.push((end_before, lsn));
        }
        drop(store);
        disk.power_loss();
        // A frame past the old lap's end, not the last (a later frame acknowledges it).
        let &(position, lsn) = starts
            .iter()
            .rev()
            .nth(2)
            .expect("frames past the old lap's end");
        assert!(position >= old_lap_end, "seed {seed}");
        // Its file offset by the grown header: ring start + (position + base) % capacity,
        // where the base keeps `tail` at its old ring offset.
        let base = (tail % SIM_CAPACITY_BYTES + 2 * SIM_CAPACITY_BYTES
            - tail % (2 * SIM_CAPACITY_BYTES))
            % (2 * SIM_CAPACITY_BYTES);
        let file_offset =
            pure_store::LOG_HEADER_AREA_BYTES + (position + base) % (2 * SIM_CAPACITY_BYTES);
        let byte = disk.read(&log_path()).expect("log")[(file_offset + 100) as usize];
        disk.damage(&log_path(), file_offset + 100, &[byte ^ 0x40]);
        let examined =
            pure_store::examine(disk.clone() as Arc<dyn Io>, &sim_dir()).expect("examine");
        match &examined.ending {
            Ending::Damage {
                offset,
                position: at,
                first_lost_lsn,
                ..
            } => {
                assert_eq!(*at, position, "seed {seed}");
                assert_eq!(*offset, file_offset, "seed {seed}");
                assert_eq!(*first_lost_lsn, lsn, "seed {seed}");
            }
            other => panic!("seed {seed}: {other:?}"),
        }
        assert_eq!(examined.prefix_lsn(), Lsn(lsn - 1), "seed {seed}");
        drop(examined);
        match open_growing(&disk, SyncMode::Always) {
            Err(Error::Corrupt { position, .. }) => assert_eq!(position, file_offset),
            Err(e) => panic!("seed {seed}: {e}"),
            Ok(_) => panic!("seed {seed}: damage in acknowledged data was opened"),
        }
    }
    assert!(based > 10, "growths with a base: {based}");
}

/// A first capacity of whole sectors but not whole 4 KiB units (33 sectors) grows to whole
/// units, in later laps, and every acknowledged record survives power losses.
#[test]
fn reviewed_growth_a_first_capacity_of_odd_sectors_grows() {
    let first = 33 * 512;
    let options = || StoreOptions {
        sync: SyncMode::Always,
        log_capacity_bytes: first,
        log_capacity_max_bytes: 16 * SIM_CAPACITY_BYTES,
    };
    for seed in 0..40 {
        let disk = SimDisk::new(4000 + seed);
        let mut model = Model::default();
        for session in 0..5 {
            let recovered = open_with(&disk, options())
                .unwrap_or_else(|e| panic!("seed {seed} session {session}: {e}"));
            model
                .check_recovery(&recovered)
                .unwrap_or_else(|e| panic!("seed {seed} session {session}: {e}"));
            let mut store = recovered.store;
            workload(seed * 7 + session, 30, 5, 4).run(&mut store, &mut model);
            assert!(store.poisoned().is_none());
            drop(store);
            disk.power_loss();
        }
        let recovered = open_with(&disk, options()).expect("reopen");
        assert!(recovered.store.log_capacity_bytes() > first);
        assert_eq!(recovered.store.log_capacity_bytes() % 4096, 0);
        model.check_recovery(&recovered).expect("recovery");
    }
}
