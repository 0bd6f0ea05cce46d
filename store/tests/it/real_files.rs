//! The store on real files (a temporary directory): reopen, checkpoints written on another
//! thread, log-full backpressure and reuse of the space after a checkpoint.

use std::io::Write;
use std::path::Path;

use pure_store::{Error, Lsn, Store, StoreOptions, SyncMode};

use crate::harness::record_bytes;

fn options(capacity: u64) -> StoreOptions {
    StoreOptions {
        sync: SyncMode::Always,
        log_capacity_bytes: capacity,
        log_capacity_max_bytes: capacity,
    }
}

fn grown_options(capacity: u64, max: u64) -> StoreOptions {
    StoreOptions {
        log_capacity_max_bytes: max,
        ..options(capacity)
    }
}

/// A recovered checkpoint or record: its LSN and bytes.
type Entry = (Lsn, Vec<u8>);

fn records_of(dir: &Path, capacity: u64) -> (Option<Entry>, Vec<Entry>) {
    let recovered = Store::open(dir, options(capacity)).expect("reopen");
    assert!(
        recovered.cut.is_none(),
        "a clean shutdown leaves no torn tail"
    );
    let checkpoint = recovered.checkpoint.map(|c| (c.lsn(), c.bytes().to_vec()));
    let records = recovered
        .records
        .into_iter()
        .map(|r| (r.lsn, r.bytes))
        .collect();
    (checkpoint, records)
}

#[test]
fn open_append_commit_reopen() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut store = Store::open(dir.path(), options(1 << 20))
        .expect("create")
        .store;
    assert_eq!(store.durable_lsn(), Lsn(0));
    let mut expected = Vec::new();
    for group in 0..50u64 {
        for i in 0..=group % 7 {
            let lsn = expected.len() as u64 + 1;
            let bytes = record_bytes(lsn, group + i);
            assert_eq!(store.append(&bytes).expect("append"), Lsn(lsn));
            expected.push((Lsn(lsn), bytes));
        }
        assert_eq!(store.commit().expect("commit"), Lsn(expected.len() as u64));
    }
    drop(store);
    let (checkpoint, records) = records_of(dir.path(), 1 << 20);
    assert!(checkpoint.is_none());
    assert_eq!(records, expected);
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec!["log".to_string()],
        "one preallocated log file, nothing else"
    );
    let len = std::fs::metadata(dir.path().join("log"))
        .expect("stat")
        .len();
    assert_eq!(
        len,
        pure_store::LOG_HEADER_AREA_BYTES + (1 << 20),
        "the log never grows"
    );
}

#[test]
fn checkpoint_written_on_another_thread_is_recovered() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut store = Store::open(dir.path(), options(1 << 20))
        .expect("create")
        .store;
    for lsn in 1..=100 {
        store.append(&record_bytes(lsn, 0)).expect("append");
    }
    let covered = store.commit().expect("commit");
    let mut writer = store.checkpoint_writer(covered).expect("writer");
    let image: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let image_for_thread = image.clone();
    let done = std::thread::spawn(move || {
        for chunk in image_for_thread.chunks(7_000) {
            writer.write_all(chunk).expect("write image");
        }
        writer.finish().expect("finish")
    });
    // The store keeps committing while the checkpoint is written.
    for lsn in 101..=150 {
        store.append(&record_bytes(lsn, 0)).expect("append");
        store.commit().expect("commit");
    }
    let done = done.join().expect("checkpoint thread");
    assert_eq!((done.lsn, done.image_bytes), (Lsn(100), image.len() as u64));
    store.install_checkpoint(done).expect("install");
    drop(store);
    let (checkpoint, records) = records_of(dir.path(), 1 << 20);
    assert_eq!(checkpoint, Some((Lsn(100), image)));
    let expected: Vec<(Lsn, Vec<u8>)> = (101..=150).map(|l| (Lsn(l), record_bytes(l, 0))).collect();
    assert_eq!(records, expected);
}

#[test]
fn log_full_is_backpressure_until_a_checkpoint_is_installed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let capacity = 64 << 10;
    let mut store = Store::open(dir.path(), options(capacity))
        .expect("create")
        .store;
    assert_eq!(store.log_capacity_bytes(), capacity);
    // Bytes that do not compress: each frame takes the room the counts below expect.
    let mut record = vec![0u8; 1000];
    pure_store::sim::SimRng::new(5).fill(&mut record);
    let mut lsn = 0;
    let (needed, free) = loop {
        store.append(&record).expect("append");
        lsn += 1;
        match store.commit() {
            Ok(durable) => assert_eq!(durable, Lsn(lsn)),
            Err(Error::LogFull {
                needed_bytes,
                free_bytes,
            }) => break (needed_bytes, free_bytes),
            Err(e) => panic!("unexpected {e}"),
        }
    };
    assert!(needed > free, "LogFull says how much is missing");
    assert_eq!(store.poisoned(), None, "a full log is not a fault");
    assert_eq!(
        store.durable_lsn(),
        Lsn(lsn - 1),
        "the last record stays pending"
    );
    // A checkpoint that is durable but not installed frees nothing.
    let mut writer = store.checkpoint_writer(Lsn(lsn - 1)).expect("writer");
    writer.write_all(b"image").expect("write");
    let done = writer.finish().expect("finish");
    assert!(
        matches!(store.commit(), Err(Error::LogFull { .. })),
        "space freed before install"
    );
    store.install_checkpoint(done).expect("install");
    assert_eq!(store.commit().expect("commit after install"), Lsn(lsn));
    // The ring is reused in place many times over.
    for _ in 0..500 {
        store.append(&record).expect("append");
        lsn += 1;
        if let Err(Error::LogFull { .. }) = store.commit() {
            let mut writer = store.checkpoint_writer(Lsn(lsn - 1)).expect("writer");
            writer.write_all(b"image").expect("write");
            store
                .install_checkpoint(writer.finish().expect("finish"))
                .expect("install");
            assert_eq!(store.commit().expect("commit"), Lsn(lsn));
        }
    }
    assert!(store.log_end_position() > 5 * capacity, "the ring wrapped");
    drop(store);
    let (checkpoint, records) = records_of(dir.path(), capacity);
    let (checkpoint_lsn, _) = checkpoint.expect("a checkpoint");
    assert_eq!(
        records.first().map(|r| r.0),
        Some(Lsn(checkpoint_lsn.0 + 1))
    );
    assert_eq!(records.last().map(|r| r.0), Some(Lsn(lsn)));
    assert!(records.iter().all(|(_, bytes)| *bytes == record));
    let checkpoints = std::fs::read_dir(dir.path())
        .expect("list")
        .filter(|e| {
            e.as_ref()
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .ends_with(".ckpt")
        })
        .count();
    assert_eq!(
        checkpoints, 1,
        "older checkpoints are removed after an install"
    );
}

#[test]
fn sync_none_commits_without_syncing_and_recovers_after_a_process_exit() {
    let dir = tempfile::tempdir().expect("temp dir");
    let opts = StoreOptions {
        sync: SyncMode::None,
        log_capacity_bytes: 1 << 20,
        log_capacity_max_bytes: 1 << 20,
    };
    let mut store = Store::open(dir.path(), opts.clone()).expect("create").store;
    for lsn in 1..=20 {
        store.append(&record_bytes(lsn, 0)).expect("append");
        assert_eq!(store.commit().expect("commit"), Lsn(lsn));
    }
    drop(store);
    let recovered = Store::open(dir.path(), opts).expect("reopen");
    assert_eq!(recovered.records.len(), 20);
}

#[test]
fn a_record_larger_than_half_the_log_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut store = Store::open(dir.path(), options(64 << 10))
        .expect("create")
        .store;
    let err = store.append(&vec![0u8; 40 << 10]).expect_err("too large");
    assert!(
        matches!(err, Error::RecordTooLarge { bytes, .. } if bytes == 40 << 10),
        "{err}"
    );
    assert_eq!(store.append(b"small").expect("append"), Lsn(1));
}

/// The runtime moves the store to its syncer thread and the writer to a background thread.
#[test]
fn store_writer_and_image_are_send() {
    fn assert_send<T: Send>() {}
    assert_send::<Store>();
    assert_send::<pure_store::CheckpointWriter>();
    assert_send::<pure_store::CheckpointImage>();
    assert_send::<pure_store::Recovered>();
}

/// Two openers of one directory would both append frames where the other does, and the log
/// would refuse to open afterwards: the second opener is refused at once, naming the
/// directory, and the directory opens again once the first is gone.
#[test]
fn a_second_open_of_a_directory_is_refused_while_the_first_lives() {
    let dir = tempfile::tempdir().expect("temp dir");
    let first = Store::open(dir.path(), options(1 << 20)).expect("first open");
    let second = Store::open(dir.path(), options(1 << 20));
    match second {
        Err(Error::Locked { dir: locked, pid }) => {
            assert_eq!(locked, dir.path());
            // /proc/locks names the holder: this very process.
            if Path::new("/proc/locks").exists() {
                assert_eq!(pid, Some(std::process::id()));
            }
        }
        Err(other) => panic!("refused, but not as locked: {other}"),
        Ok(_) => panic!("a second open of a locked directory succeeded"),
    }
    let message = Store::open(dir.path(), options(1 << 20))
        .err()
        .expect("still locked")
        .to_string();
    assert!(
        message.contains(&dir.path().display().to_string()) && message.contains("in use"),
        "{message}"
    );
    drop(first);
    let mut store = Store::open(dir.path(), options(1 << 20))
        .expect("opens once the first store is gone")
        .store;
    store.append(b"after").expect("append");
    store.commit().expect("commit");
}

/// A directory on the disk the tests build on (cargo's target directory), not `/tmp`, which
/// may be a RAM file system that refuses `O_DIRECT`.
fn dir_on_disk() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir on disk")
}

#[test]
fn the_log_is_written_in_whole_sectors_past_the_page_cache_where_the_file_system_allows() {
    let dir = dir_on_disk();
    let mut store = Store::open(dir.path(), options(1 << 20))
        .expect("create")
        .store;
    assert!(
        store.log_writes_padded(),
        "a new log of whole sectors pads its frames"
    );
    if !store.log_writes_direct() {
        eprintln!(
            "SKIPPED: the file system under {} refuses O_DIRECT; the log is written through the \
             page cache there (the padded frames are still checked)",
            dir.path().display()
        );
    }
    let mut expected = Vec::new();
    for group in 0..40u64 {
        // Groups from one small record to several sectors.
        for i in 0..1 + group % 9 * 3 {
            let lsn = expected.len() as u64 + 1;
            let bytes = record_bytes(lsn, group * 100 + i);
            store.append(&bytes).expect("append");
            expected.push((Lsn(lsn), bytes));
        }
        store.commit().expect("commit");
        assert_eq!(
            store.log_end_position() % 512,
            0,
            "each frame ends at a sector, where the next one starts"
        );
    }
    let direct = store.log_writes_direct();
    drop(store);
    let (_, records) = records_of(dir.path(), 1 << 20);
    assert_eq!(records, expected, "direct writes: {direct}");
}

#[test]
fn a_ring_that_is_not_whole_sectors_keeps_its_frames_unpadded() {
    let capacity = (1 << 20) + 100;
    let dir = dir_on_disk();
    let mut store = Store::open(dir.path(), options(capacity))
        .expect("create")
        .store;
    assert!(!store.log_writes_padded());
    assert!(!store.log_writes_direct());
    let bytes = record_bytes(1, 0);
    store.append(&bytes).expect("append");
    let start = store.log_end_position();
    store.commit().expect("commit");
    assert_eq!(
        store.log_end_position() - start,
        56 + 1 + bytes.len() as u64,
        "a header, the record's length and its bytes: no padding"
    );
    drop(store);
    assert_eq!(records_of(dir.path(), capacity).1, vec![(Lsn(1), bytes)]);
}

/// CRC32C (Castagnoli), bit by bit: what the log header's check is.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0x82f6_3b78 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

/// A log header of a version before logs grew (one header, the ring after its 4 KiB block),
/// as an older binary wrote it, over a zeroed ring of `capacity` bytes.
fn legacy_log(version: u32, capacity: u64, log_id: u64) -> Vec<u8> {
    let mut log = vec![0u8; 4096 + capacity as usize];
    log[0..8].copy_from_slice(b"PURELOG\0");
    log[8..12].copy_from_slice(&version.to_le_bytes());
    log[16..24].copy_from_slice(&capacity.to_le_bytes());
    log[24..32].copy_from_slice(&log_id.to_le_bytes());
    let crc = crc32c(&log[0..32]);
    log[32..36].copy_from_slice(&crc.to_le_bytes());
    log
}

/// A log made before frames were padded (log version 1) stays unpadded, so that the binary
/// that made it can still open it after this one wrote to it; nor does it grow.
#[test]
fn a_version_1_log_is_written_as_version_1_frames() {
    let dir = dir_on_disk();
    let capacity = 1 << 20;
    drop(Store::open(dir.path(), options(capacity)).expect("create"));
    let log_path = dir.path().join(pure_store::LOG_FILE_NAME);
    let log = std::fs::read(&log_path).expect("read log");
    assert_eq!(log[8..12], 3u32.to_le_bytes(), "new logs are version 3");
    std::fs::write(&log_path, legacy_log(1, capacity, 7)).expect("write log");

    let mut store = Store::open(dir.path(), grown_options(capacity, 4 * capacity))
        .expect("reopen")
        .store;
    assert!(!store.log_writes_padded());
    assert_eq!(
        store.log_capacity_max_bytes(),
        capacity,
        "a version-1 log does not grow"
    );
    assert!(store.prepare_growth(2 * capacity).is_none());
    let bytes = record_bytes(1, 0);
    store.append(&bytes).expect("append");
    let start = store.log_end_position();
    store.commit().expect("commit");
    assert_eq!(
        store.log_end_position() - start,
        56 + 1 + bytes.len() as u64
    );
    drop(store);
    let log = std::fs::read(&log_path).expect("read log");
    assert_eq!(log[8..12], 1u32.to_le_bytes(), "the header is as it was");
    let frame = &log[4096..];
    assert_eq!(
        frame[6..8],
        [0, 0],
        "no frame flag a version-1 reader does not know"
    );
    assert_eq!(records_of(dir.path(), capacity).1, vec![(Lsn(1), bytes)]);
}

/// A version-2 log (padded frames, one header, made before logs grew) is read and written in
/// place as it was: its ring after the 4 KiB header block, its header untouched, no growth.
#[test]
fn a_version_2_log_is_written_where_a_version_2_binary_reads_it() {
    let dir = dir_on_disk();
    let capacity = 1 << 20;
    drop(Store::open(dir.path(), options(capacity)).expect("create"));
    let log_path = dir.path().join(pure_store::LOG_FILE_NAME);
    std::fs::write(&log_path, legacy_log(2, capacity, 9)).expect("write log");
    let mut store = Store::open(dir.path(), grown_options(capacity, 4 * capacity))
        .expect("reopen")
        .store;
    assert!(store.log_writes_padded());
    assert!(
        store.prepare_growth(2 * capacity).is_none(),
        "a version-2 log does not grow"
    );
    let bytes = record_bytes(1, 0);
    store.append(&bytes).expect("append");
    store.commit().expect("commit");
    drop(store);
    let log = std::fs::read(&log_path).expect("read log");
    assert_eq!(log[8..12], 2u32.to_le_bytes(), "the header is as it was");
    assert_eq!(log.len() as u64, 4096 + capacity, "the file did not grow");
    assert_eq!(
        &log[4096..4100],
        &0x3146_5250u32.to_le_bytes(),
        "the frame after one block"
    );
    assert_eq!(records_of(dir.path(), capacity).1, vec![(Lsn(1), bytes)]);
}

/// A real log grows in place: a new directory's file is its first capacity and a header area,
/// the grown one its new capacity; frames written before and after the growth, over laps of
/// the grown ring, are read back in order by a new open, and commits still bypass the page
/// cache where they did.
#[test]
fn a_real_log_grows_in_place_and_keeps_its_frames() {
    let dir = dir_on_disk();
    let first = 64 << 10;
    let log_path = dir.path().join(pure_store::LOG_FILE_NAME);
    let mut store = Store::open(dir.path(), grown_options(first, 1 << 20))
        .expect("create")
        .store;
    let length = |path: &Path| std::fs::metadata(path).expect("stat").len();
    assert_eq!(length(&log_path), pure_store::LOG_HEADER_AREA_BYTES + first);
    let direct = store.log_writes_direct();
    let mut written = Vec::new();
    let mut append = |store: &mut Store, n: u64| {
        for _ in 0..n {
            let lsn = written.len() as u64 + 1;
            let bytes = record_bytes(lsn, 0);
            store.append(&bytes).expect("append");
            store.commit().expect("commit");
            written.push((Lsn(lsn), bytes));
            if lsn % 100 == 0 {
                let mut writer = store.checkpoint_writer(Lsn(lsn)).expect("checkpoint");
                writer.write_all(b"image").expect("write");
                let done = writer.finish().expect("finish");
                store.install_checkpoint(done).expect("install");
            }
        }
    };
    append(&mut store, 40);
    let prepared = store
        .prepare_growth(4 * first)
        .expect("may grow")
        .run()
        .expect("fill");
    assert!(
        store.grow(&prepared).expect("grow"),
        "the live part lies in one lap"
    );
    assert_eq!(store.log_capacity_bytes(), 4 * first);
    assert_eq!(
        length(&log_path),
        pure_store::LOG_HEADER_AREA_BYTES + 4 * first
    );
    assert_eq!(store.log_writes_direct(), direct);
    // Past the old lap's end, into the grown space, and around the grown ring once more.
    append(&mut store, 700);
    assert!(
        store.log_end_position() > 4 * first,
        "the grown ring lapped"
    );
    drop(store);
    let recovered = Store::open(dir.path(), grown_options(first, 1 << 20)).expect("reopen");
    assert_eq!(recovered.store.log_capacity_bytes(), 4 * first);
    assert_eq!(
        recovered.checkpoint.as_ref().map(|c| c.lsn()),
        Some(Lsn(700))
    );
    let tail: Vec<_> = written[700..].to_vec();
    let records: Vec<_> = recovered
        .records
        .into_iter()
        .map(|r| (r.lsn, r.bytes))
        .collect();
    assert!(!records.is_empty());
    assert_eq!(
        records, tail,
        "the records after the replay start, in order"
    );
}
