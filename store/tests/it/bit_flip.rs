//! Bit flips at rest: every bit of the last three frames, of the log header, of the newest
//! checkpoint's header and trailer (and a sample of its image). Every flip must be detected:
//! in the last frame (never followed by an acknowledgement) it is a torn tail, cut; in an
//! earlier frame, the last frame acknowledges past it: the open is refused with the log's
//! name and the position. A damaged checkpoint refuses the open. No flip may yield a wrong
//! value.

use std::path::Path;
use std::sync::Arc;

use pure_store::sim::{test_seed, SimDisk, SimRng};
use pure_store::{Error, Io, Lsn, Store};

use crate::harness::{
    assert_path, checkpoint, log_path, open, record_bytes, recovered_state, sim_dir, Model,
};

struct Built {
    disk: Arc<SimDisk>,
    model: Model,
    /// (stream end position, last LSN) after each of the last four groups.
    ends: Vec<(u64, u64)>,
    checkpoint_lsn: u64,
}

fn build(seed: u64) -> Built {
    let disk = SimDisk::new(seed);
    let mut model = Model::default();
    let mut store = open(&disk).expect("fresh store").store;
    let mut rng = SimRng::new(seed);
    let mut ends = Vec::new();
    for group in 0..12 {
        for _ in 0..1 + rng.below(3) {
            let bytes = record_bytes(model.records.len() as u64 + 1, 0);
            store.append(&bytes).expect("append");
            model.records.push(bytes);
        }
        model.acked = store.commit().expect("commit").0;
        if group == 7 {
            checkpoint(&mut store, &mut model).expect("checkpoint");
        }
        ends.push((store.log_end_position(), model.acked));
    }
    let ends = ends.split_off(ends.len() - 4);
    drop(store);
    disk.power_loss();
    let checkpoint_lsn = model.durable_checkpoint;
    Built {
        disk,
        model,
        ends,
        checkpoint_lsn,
    }
}

fn flip(disk: &SimDisk, path: &Path, offset: u64, bit: u32) {
    let byte = disk.read(path).expect("file exists")[offset as usize];
    disk.damage(path, offset, &[byte ^ (1 << bit)]);
}

#[test]
fn bit_flips_in_the_last_frames() {
    let first_seed = test_seed("bit_flips_in_the_last_frames", 11);
    for seed in first_seed..first_seed + crate::harness::scale() {
        bit_flips_in_the_last_frames_with(seed);
    }
}

fn bit_flips_in_the_last_frames_with(seed: u64) {
    let built = build(seed);
    let (start, _) = built.ends[0];
    let (last_start, lsn_before_last) = built.ends[2];
    let (end, _) = built.ends[3];
    let (mut refused, mut cut) = (0, 0);
    for position in start..end {
        let offset = crate::harness::log_offset(position);
        for bit in 0..8 {
            let disk = built.disk.fork();
            flip(&disk, &log_path(), offset, bit);
            let context = format!("seed {seed}, stream position {position}, bit {bit}");
            let examined = examine_and_salvage(&disk, &built.model, &context);
            match open(&disk) {
                Ok(recovered) => {
                    assert!(
                        position >= last_start,
                        "{context}: damage before the last frame hidden"
                    );
                    let state = recovered_state(&recovered);
                    assert_eq!(
                        state.len() as u64,
                        lsn_before_last,
                        "{context}: cut at the frame"
                    );
                    assert_eq!(state[..], built.model.records[..state.len()], "{context}");
                    assert!(recovered.cut.is_some(), "{context}: the cut is reported");
                    assert_eq!(examined.refusal, None, "{context}: examine says it opens");
                    assert_eq!(examined.prefix, state.len() as u64, "{context}");
                    cut += 1;
                }
                Err(Error::Corrupt {
                    path, position: at, ..
                }) => {
                    assert!(
                        position < last_start,
                        "{context}: a torn last frame refused"
                    );
                    assert_path(&path, &log_path());
                    assert!(
                        at >= pure_store::LOG_HEADER_AREA_BYTES,
                        "{context}: position {at}"
                    );
                    let refusal = examined.refusal.expect("examine says open refuses");
                    assert!(
                        refusal.contains(&format!("at byte {at}:")),
                        "{context}: {refusal}"
                    );
                    assert!(
                        examined.prefix < lsn_before_last,
                        "{context}: a prefix is lost"
                    );
                    refused += 1;
                }
                Err(e) => panic!("{context}: unexpected {e}"),
            }
        }
    }
    eprintln!("bit_flips_in_the_last_frames: {refused} refused, {cut} cut");
}

/// What `examine` said of a disk, once its saved prefix was checked.
struct Examined {
    refusal: Option<String>,
    prefix: u64,
}

/// Examines the store without changing it, checks that its saved prefix is exactly the first
/// records of the model, seeds a new store with that prefix and checks that the new store
/// opens cleanly with the same LSN and takes the next record after it.
fn examine_and_salvage(disk: &Arc<SimDisk>, model: &Model, context: &str) -> Examined {
    let before: Vec<_> = disk
        .file_names()
        .into_iter()
        .map(|p| (disk.read(&p), p))
        .collect();
    let io = disk.clone() as Arc<dyn Io>;
    let examination = pure_store::examine(io.clone(), &sim_dir()).expect("examine");
    let mut prefix = match &examination.base {
        Some(image) => crate::harness::records_of_image(image.bytes()),
        None => Vec::new(),
    };
    prefix.extend(examination.records.iter().map(|r| r.bytes.clone()));
    assert_eq!(prefix.len() as u64, examination.prefix_lsn().0, "{context}");
    assert_eq!(
        prefix[..],
        model.records[..prefix.len()],
        "{context}: a true prefix"
    );
    let refusal = examination.open_refusal();
    drop(examination);
    let after: Vec<_> = disk
        .file_names()
        .into_iter()
        .map(|p| (disk.read(&p), p))
        .collect();
    assert!(before == after, "{context}: examine changed nothing");

    let into = Path::new("/sim/salvaged");
    let image = crate::harness::image_of(&prefix);
    let covered = Lsn(prefix.len() as u64);
    pure_store::seed(
        io.clone(),
        into,
        crate::harness::options(),
        covered,
        |writer| std::io::Write::write_all(writer, &image),
    )
    .expect("seed");
    let recovered = Store::open_with(io, into, crate::harness::options()).expect("opens");
    assert!(
        recovered.cut.is_none(),
        "{context}: a seeded store has no tail to cut"
    );
    assert_eq!(
        recovered_state(&recovered),
        prefix,
        "{context}: the seeded state"
    );
    let mut store = recovered.store;
    assert_eq!(store.append(b"next").expect("append"), Lsn(covered.0 + 1));
    store.commit().expect("commit");
    drop(store);
    Examined {
        refusal,
        prefix: prefix.len() as u64,
    }
}

#[test]
fn bit_flips_in_the_log_header() {
    let seed = test_seed("bit_flips_in_the_log_header", 12);
    let built = build(seed);
    for offset in 0..36 {
        for bit in 0..8 {
            let disk = built.disk.fork();
            flip(&disk, &log_path(), offset, bit);
            let context = format!("log header byte {offset} bit {bit}");
            let examined = examine_and_salvage(&disk, &built.model, &context);
            assert!(
                examined.refusal.is_some(),
                "{context}: examine says open refuses"
            );
            match open(&disk) {
                Err(Error::Corrupt {
                    path, position: 0, ..
                }) => assert_path(&path, &log_path()),
                Err(e) => panic!("byte {offset} bit {bit}: unexpected {e}"),
                Ok(_) => panic!("byte {offset} bit {bit}: log header damage not detected"),
            }
        }
    }
}

#[test]
fn bit_flips_in_the_checkpoint() {
    let seed = test_seed("bit_flips_in_the_checkpoint", 13);
    let built = build(seed);
    let path = sim_dir().join(format!("checkpoint-{:020}.ckpt", built.checkpoint_lsn));
    let len = built.disk.read(&path).expect("the checkpoint exists").len() as u64;
    let mut rng = SimRng::new(seed);
    // Header and trailer in full; the image at a sample of positions (the CRC covers all).
    let mut offsets: Vec<u64> = (0..64).chain(len - 16..len).collect();
    offsets.extend((0..64).map(|_| 64 + rng.below(len - 80)));
    for offset in offsets {
        for bit in 0..8 {
            let disk = built.disk.fork();
            flip(&disk, &path, offset, bit);
            let context = format!("checkpoint byte {offset} bit {bit}");
            let examined = examine_and_salvage(&disk, &built.model, &context);
            let refusal = examined.refusal.expect("examine says open refuses");
            assert!(refusal.contains("checkpoint"), "{context}: {refusal}");
            match open(&disk) {
                Err(Error::Corrupt { path: named, .. }) => assert_path(&named, &path),
                Err(e) => panic!("checkpoint byte {offset} bit {bit}: unexpected {e}"),
                Ok(_) => panic!("checkpoint byte {offset} bit {bit}: damage not detected"),
            }
        }
    }
}
