//! Torn tail at every byte: the log is cut at each byte of its last three frames, the rest
//! replaced by zeros, by the bytes of the previous lap, or by random bytes. Recovery must
//! return exactly the whole frames before the cut; after more writes, a crash and another
//! recovery, exactly those plus the new records: no ghost.

use std::sync::Arc;

use pure_store::sim::{test_seed, SimDisk, SimRng};
use pure_store::{frame, Lsn, Store};

use crate::harness::{log_offset, log_path, open, record_bytes, recovered_state, Model};

/// Frames written, and where each ended: (stream end position, LSN of its last record).
struct Built {
    disk: Arc<SimDisk>,
    model: Model,
    ends: Vec<(u64, u64)>,
    /// The log as the last frame left it.
    last: Vec<u8>,
    previous_lap: Vec<u8>,
}

/// Commits groups until the ring has wrapped, checkpointing to make room, and remembers the
/// log as it was before the last three frames (the previous lap's bytes).
fn build(seed: u64) -> Built {
    let disk = SimDisk::new(seed);
    let mut model = Model::default();
    let mut store = open(&disk).expect("fresh store").store;
    let mut rng = SimRng::new(seed);
    let mut ends = vec![(store.log_end_position(), 0)];
    let mut compressed = 0;
    let capacity = store.log_capacity_bytes();
    let mut previous_lap = Vec::new();
    let groups = 100;
    for group in 0..groups {
        if group == groups - 3 {
            previous_lap = disk.read(&log_path()).expect("log exists");
        }
        let start = store.log_end_position();
        commit_group(&mut store, &mut model, &mut rng);
        let end = store.log_end_position();
        // The frame is at `start`, or at the next lap's start if it did not fit the lap.
        let log = disk.read(&log_path()).expect("log exists");
        let at = [start, start + capacity - start % capacity]
            .into_iter()
            .find_map(|position| {
                let header = frame::read_header(&log[log_offset(position) as usize..]).ok()?;
                (header.position == position).then_some(header)
            })
            .expect("the frame just written");
        compressed += usize::from(at.flags & frame::FLAG_COMPRESSED != 0);
        ends.push((end, model.acked));
        if group % 5 == 4 && group < groups - 4 {
            crate::harness::checkpoint(&mut store, &mut model).expect("checkpoint");
        }
    }
    assert!(
        store.log_end_position() > 2 * store.log_capacity_bytes(),
        "the ring wrapped"
    );
    assert!(
        compressed > 10 && compressed < groups - 10,
        "{compressed} of {groups} frames compressed: both kinds are cut"
    );
    drop(store);
    disk.power_loss();
    let last = disk.read(&log_path()).expect("log exists");
    Built {
        disk,
        model,
        ends,
        previous_lap,
        last,
    }
}

fn commit_group(store: &mut Store, model: &mut Model, rng: &mut SimRng) {
    for _ in 0..1 + rng.below(3) {
        let bytes = record_bytes(model.records.len() as u64 + 1, model.generation);
        store.append(&bytes).expect("append");
        model.records.push(bytes);
    }
    model.acked = store.commit().expect("commit").0;
    assert!(
        store.log_writes_padded(),
        "the simulated ring is whole sectors"
    );
}

#[test]
fn torn_tail_at_every_byte() {
    let first_seed = test_seed("torn_tail_at_every_byte", 7);
    for seed in first_seed..first_seed + crate::harness::scale() {
        torn_tail_at_every_byte_with(seed);
    }
}

fn torn_tail_at_every_byte_with(seed: u64) {
    let built = build(seed);
    let n = built.ends.len();
    let (start, _) = built.ends[n - 4];
    let (end, _) = built.ends[n - 1];
    let mut cases = 0;
    for cut in start..end {
        for fill in 0..3 {
            check_cut(&built, cut, end, fill, seed);
            cases += 1;
        }
    }
    eprintln!("torn_tail_at_every_byte: {cases} cuts");
}

/// Cuts at stream position `cut` and checks recovery, more writes, crash, recovery.
fn check_cut(built: &Built, cut: u64, end: u64, fill: u8, seed: u64) {
    let context = format!("seed {seed}, cut at {cut}, fill {fill}");
    let disk = built.disk.fork();
    let mut rng = SimRng::new(seed ^ cut);
    let mut first_changed = end;
    for position in cut..end {
        let offset = log_offset(position);
        let byte = match fill {
            0 => 0,
            1 => built.previous_lap[offset as usize],
            _ => rng.next_u64() as u8,
        };
        if byte != built.last[offset as usize] {
            first_changed = first_changed.min(position);
        }
        disk.damage(&log_path(), offset, &[byte]);
    }
    // Every frame before the first byte the cut changed survives: a cut that only wrote a
    // frame's own bytes again (zeros over its padding, or over a zero it holds) leaves it whole.
    let survivors = built
        .ends
        .iter()
        .filter(|&&(e, _)| e <= first_changed)
        .map(|&(_, lsn)| lsn)
        .max()
        .expect("frames before the cut");
    let recovered = open(&disk).unwrap_or_else(|e| panic!("{context}: {e}"));
    let state = recovered_state(&recovered);
    assert_eq!(
        state.len() as u64,
        survivors,
        "{context}: exactly the whole frames before"
    );
    assert_eq!(
        state[..],
        built.model.records[..state.len()],
        "{context}: wrong values"
    );
    let mut model = built.model.clone();
    model.records.truncate(state.len());
    // Rewrite the lost records with the very same bytes half of the time: the chain must
    // still refuse the frames from before the cut that follow them.
    let generation = if cut.is_multiple_of(2) {
        model.generation
    } else {
        model.generation + 1
    };
    let mut store = recovered.store;
    for _ in 0..3 {
        let lsn = model.records.len() as u64 + 1;
        let bytes = record_bytes(lsn, generation);
        assert_eq!(store.append(&bytes).expect("append"), Lsn(lsn));
        model.records.push(bytes);
        store
            .commit()
            .unwrap_or_else(|e| panic!("{context}: commit: {e}"));
    }
    drop(store);
    disk.power_loss();
    let again = open(&disk).unwrap_or_else(|e| panic!("{context}: reopen: {e}"));
    assert_eq!(
        recovered_state(&again),
        model.records,
        "{context}: ghost or loss after rewrite"
    );
}

/// Under `SyncMode::None` frames after a torn one can be intact (unsynced writes reach the
/// disk in any order). Recovery cuts at the torn frame; the frame written there next, even
/// with the very same records, must not make its intact pre-crash successors valid again.
#[test]
fn no_ghosts_from_intact_frames_after_a_torn_one() {
    let options = pure_store::StoreOptions {
        sync: pure_store::SyncMode::None,
        log_capacity_bytes: crate::harness::SIM_CAPACITY_BYTES,
        log_capacity_max_bytes: crate::harness::SIM_CAPACITY_BYTES,
    };
    let dir = crate::harness::sim_dir();
    for torn in 0..5u64 {
        for same_bytes in [true, false] {
            let context = format!("torn frame {torn}, same bytes {same_bytes}");
            let disk = SimDisk::new(torn);
            let io = disk.clone() as Arc<dyn pure_store::Io>;
            let mut store = Store::open_with(io.clone(), &dir, options.clone())
                .expect("open")
                .store;
            let mut starts = Vec::new();
            for lsn in 1..=5 {
                starts.push(store.log_end_position());
                store.append(&record_bytes(lsn, 0)).expect("append");
                store.commit().expect("commit");
            }
            drop(store);
            disk.process_crash();
            disk.damage(&log_path(), log_offset(starts[torn as usize] + 3), &[0xff]);
            let recovered = Store::open_with(io.clone(), &dir, options.clone()).expect("recover");
            assert_eq!(
                recovered.records.len() as u64,
                torn,
                "{context}: cut at the torn frame"
            );
            let mut store = recovered.store;
            let generation = if same_bytes { 0 } else { 1 };
            store
                .append(&record_bytes(torn + 1, generation))
                .expect("append");
            store.commit().expect("commit");
            drop(store);
            disk.process_crash();
            let again = Store::open_with(io, &dir, options.clone()).expect("recover again");
            let lsns: Vec<u64> = again.records.iter().map(|r| r.lsn.0).collect();
            assert_eq!(
                lsns,
                (1..=torn + 1).collect::<Vec<_>>(),
                "{context}: ghosts"
            );
            assert_eq!(
                again.records[torn as usize].bytes,
                record_bytes(torn + 1, generation)
            );
        }
    }
}
