//! Opening a store: create the log if the directory is new, pick the newest checkpoint, replay
//! the log after it, make what was recovered durable, and hand back a `Store` positioned after
//! the last recovered record.
//!
//! Recovery only reads, except for idempotent steps: removing leftover temporary files,
//! syncing the directory (so that the checkpoint chosen cannot vanish later), rewriting the
//! recovered frames that no later frame acknowledged with the bytes they already have,
//! zeroing the header of a cut frame, and one `fdatasync` of the log. The rewrite and the sync
//! make sure that everything recovered (and so possibly shown to clients) is on stable storage
//! before new frames claim it acknowledged: the page cache may hold frames whose sync failed in
//! the previous process, their pages "marked clean", so that a sync alone would not write them.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;

use crate::checkpoint::{self, CheckpointImage};
use crate::error::{io_error, Error};
use crate::frame::HEADER_BYTES;
use crate::io::{DirLock, Io, IoFile, LockError};
use crate::recovery::{self, ChainState, Damage, Replay};
use crate::ring::{self, LogHeader};
use crate::ring_reader::RingReader;
use crate::{Lsn, Recovered, Store, StoreOptions};

/// The log's file name in the store directory.
pub const LOG_FILE_NAME: &str = "log";
pub(crate) const LOG_TMP_NAME: &str = "log.tmp";

pub(crate) fn open(io: Arc<dyn Io>, dir: &Path, options: StoreOptions) -> Result<Recovered, Error> {
    io.create_dir_all(dir)
        .map_err(|e| io_error("create directory", dir, e))?;
    let lock = lock(&*io, dir)?;
    let names = prepare_directory(&*io, dir)?;
    let newest = names.iter().filter_map(|n| checkpoint::parse_name(n)).max();
    let log_path = dir.join(LOG_FILE_NAME);
    if !names.iter().any(|n| n == LOG_FILE_NAME) {
        create_log(&*io, dir, &log_path, newest, &options)?;
    }
    let log = io
        .open_log(&log_path)
        .map_err(|e| io_error("open", &log_path, e))?;
    let header = ring::read_header(&*log, &log_path)?;
    let (checkpoint, start, covered) = match newest {
        Some(lsn) => load_checkpoint(&*io, dir, lsn, &header)?,
        None => (None, genesis(&header), 0),
    };
    // The ring is read a frame or a window at a time: only the records take memory.
    let ring = RingReader::new(&*log, header);
    let replay = replay_log(&ring, &log_path, &header, start, covered)?;
    harden(&*log, &log_path, &header, &ring, &replay, start)?;
    drop(ring);
    let mut store = build(io, dir, log, header, options, &replay, start, covered);
    store.lock = lock;
    Ok(Recovered {
        store,
        checkpoint,
        records: replay.records,
        cut: replay.cut,
    })
}

/// Takes the directory's exclusive lock (see `Io::lock_dir`): before anything is read, so
/// that nothing another opener writes meanwhile can be mistaken for damage or recovered.
pub(crate) fn lock(io: &dyn Io, dir: &Path) -> Result<DirLock, Error> {
    io.lock_dir(dir).map_err(|e| match e {
        LockError::Held { pid } => Error::Locked {
            dir: dir.to_path_buf(),
            pid,
        },
        LockError::Io(e) => io_error("lock", dir, e),
    })
}

/// Removes leftovers in the (locked) directory and syncs it; returns its entries.
fn prepare_directory(io: &dyn Io, dir: &Path) -> Result<Vec<String>, Error> {
    let names = io
        .list_dir(dir)
        .map_err(|e| io_error("list directory", dir, e))?;
    remove_leftovers(io, dir, &names)?;
    // A checkpoint renamed by a process that died before its directory sync is visible now
    // but could still vanish on power loss: make it durable before its log space is reused.
    io.sync_dir(dir)
        .map_err(|e| io_error("sync directory", dir, e))?;
    Ok(names)
}

/// Creates the log of a new store. A missing log next to a checkpoint is damage, not a new
/// store: the log is always created (and its rename made durable) before any checkpoint.
fn create_log(
    io: &dyn Io,
    dir: &Path,
    log_path: &Path,
    newest_checkpoint: Option<Lsn>,
    options: &StoreOptions,
) -> Result<(), Error> {
    if let Some(lsn) = newest_checkpoint {
        return Err(Error::Corrupt {
            path: log_path.to_path_buf(),
            position: 0,
            reason: format!("log file missing while checkpoint {} exists", lsn.0),
        });
    }
    let header = LogHeader::new(first_capacity(options), io.session_salt());
    ring::create(io, dir, log_path, header)
}

/// The capacity of a new log: the options' first capacity, at least the smallest ring, and
/// whole growth units if the log may grow (every capacity it grows to is, and so its ring
/// never shares a page with the space a growth fills).
pub(crate) fn first_capacity(options: &StoreOptions) -> u64 {
    let capacity = options.log_capacity_bytes.max(ring::MIN_CAPACITY_BYTES);
    match options.log_capacity_max_bytes > capacity {
        true => capacity.next_multiple_of(ring::GROWTH_UNIT_BYTES),
        false => capacity,
    }
}

/// The largest capacity a log opened with `options` may grow to: the options' largest, in
/// whole growth units, or its own capacity if it cannot grow (a log of a version before growth,
/// or whose capacity is not whole growth units) or is that large already.
fn capacity_max(header: &LogHeader, options: &StoreOptions) -> u64 {
    let unit = ring::GROWTH_UNIT_BYTES;
    match header.growable() && header.capacity.is_multiple_of(unit) {
        true => (options.log_capacity_max_bytes / unit * unit).max(header.capacity),
        false => header.capacity,
    }
}

/// Where replay starts without a checkpoint: the first frame of the log.
pub(crate) fn genesis(header: &LogHeader) -> ChainState {
    ChainState {
        position: 0,
        prev_crc: header.genesis_crc(),
        next_lsn: 1,
    }
}

/// Removes temporary files of interrupted checkpoints and log creations: they were never
/// renamed into place, so nothing refers to them.
fn remove_leftovers(io: &dyn Io, dir: &Path, names: &[String]) -> Result<(), Error> {
    for name in names
        .iter()
        .filter(|n| checkpoint::is_tmp_name(n) || *n == LOG_TMP_NAME)
    {
        let path = dir.join(name);
        io.remove_file(&path)
            .map_err(|e| io_error("remove", &path, e))?;
    }
    Ok(())
}

type Loaded = (Option<CheckpointImage>, ChainState, u64);

/// Loads the newest checkpoint. A damaged one refuses the open: a renamed checkpoint was
/// synced before its rename, so damage is rot at rest, and the log space an older checkpoint
/// would need may already be reused.
fn load_checkpoint(io: &dyn Io, dir: &Path, lsn: Lsn, log: &LogHeader) -> Result<Loaded, Error> {
    let path = dir.join(checkpoint::file_name(lsn));
    let (image, header) = checkpoint::load(io, &path)?;
    let corrupt = |position: u64, reason: &str| Error::Corrupt {
        path: path.clone(),
        position,
        reason: reason.to_string(),
    };
    if header.log_id != log.log_id {
        return Err(corrupt(48, "checkpoint belongs to another log"));
    }
    if header.replay.next_lsn > header.covered_lsn + 1 {
        return Err(corrupt(32, "replay starts after the covered LSN"));
    }
    Ok((Some(image), header.replay, header.covered_lsn))
}

fn replay_log(
    ring: &RingReader<'_>,
    log_path: &Path,
    header: &LogHeader,
    start: ChainState,
    covered: u64,
) -> Result<Replay, Error> {
    let replay =
        recovery::replay(ring, start, covered).map_err(|e| io_error("read", log_path, e))?;
    if let Some(damage) = &replay.damage {
        return Err(damage_error(log_path, header, damage));
    }
    if replay.end.next_lsn <= covered {
        return Err(short_log_error(log_path, header, start, covered));
    }
    Ok(replay)
}

/// Damage inside acknowledged data, as the error that names the file and byte.
pub(crate) fn damage_error(log_path: &Path, header: &LogHeader, damage: &Damage) -> Error {
    Error::Corrupt {
        path: log_path.to_path_buf(),
        position: header.file_offset(damage.position),
        reason: format!("stream position {}: {}", damage.position, damage.reason),
    }
}

/// A log that ends before the LSN its newest checkpoint covers: it was synced up to that LSN
/// before the checkpoint was written, so records are missing.
pub(crate) fn short_log_error(
    log_path: &Path,
    header: &LogHeader,
    start: ChainState,
    covered: u64,
) -> Error {
    Error::Corrupt {
        path: log_path.to_path_buf(),
        position: header.file_offset(start.position),
        reason: format!("the log ends before LSN {covered}, which the newest checkpoint covers"),
    }
}

/// Makes what was recovered durable (see the module doc): rewrites, with the bytes they
/// already have, the recovered frames that no later frame acknowledged (only the last one
/// after a process that synced every group; all of them after one that never synced), zeroes
/// the header of a cut frame (see `recovery::torn_headers`), then syncs once.
fn harden(
    log: &dyn IoFile,
    log_path: &Path,
    header: &LogHeader,
    ring: &RingReader<'_>,
    replay: &Replay,
    start: ChainState,
) -> Result<(), Error> {
    let unacknowledged = replay.marks.iter().enumerate().find(|(i, _)| {
        let next_first = replay
            .marks
            .get(i + 1)
            .map_or(replay.end.next_lsn, |m| m.first_lsn);
        next_first - 1 > replay.acked_max
    });
    if let Some((_, mark)) = unacknowledged {
        rewrite(log, log_path, ring, mark.position, replay.end.position)?;
    }
    let limit = start.position + header.capacity;
    let torn = recovery::torn_headers(ring, replay.end.position, limit)
        .map_err(|e| io_error("read", log_path, e))?;
    for (position, len) in torn {
        let zeros = [0u8; HEADER_BYTES];
        log.write_at(&zeros[..len], header.file_offset(position))
            .map_err(|e| io_error("write", log_path, e))?;
    }
    log.sync_data()
        .map_err(|e| io_error("fdatasync", log_path, e))
}

/// Rewrites stream positions `[from, to)` with the bytes they have, a window at a time.
fn rewrite(
    log: &dyn IoFile,
    log_path: &Path,
    ring: &RingReader<'_>,
    from: u64,
    to: u64,
) -> Result<(), Error> {
    let mut buffer = vec![0u8; (to - from).min(ring.chunk() as u64) as usize];
    let mut position = from;
    while position < to {
        let offset = ring.offset(position);
        let len = (to - position)
            .min(ring.lap_rest(position))
            .min(ring.chunk() as u64) as usize;
        ring.read(offset, &mut buffer[..len])
            .map_err(|e| io_error("read", log_path, e))?;
        log.write_at(&buffer[..len], ring.header().file_offset(position))
            .map_err(|e| io_error("write", log_path, e))?;
        position += len as u64;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn build(
    io: Arc<dyn Io>,
    dir: &Path,
    log: Box<dyn IoFile>,
    header: LogHeader,
    options: StoreOptions,
    replay: &Replay,
    start: ChainState,
    covered: u64,
) -> Store {
    let session = io.session_salt();
    let last_lsn = replay.end.next_lsn - 1;
    // `replay_log` refused a log that ends before the checkpoint, and `expected_at` a frame
    // past one lap from the replay's start: the store starts within its invariants.
    assert!(
        covered <= last_lsn,
        "the recovered log reaches the checkpoint's LSN"
    );
    assert!(
        start.position <= replay.end.position
            && replay.end.position - start.position <= header.capacity,
        "the recovered frames lie within one lap after the replay's start"
    );
    let mut pending = Vec::with_capacity(64 << 10);
    pending.resize(HEADER_BYTES, 0);
    Store {
        io,
        lock: Box::new(()),
        dir: dir.to_path_buf(),
        log_path: dir.join(LOG_FILE_NAME),
        log,
        log_id: header.log_id,
        sync: options.sync,
        header,
        capacity_max: capacity_max(&header, &options),
        compressor: crate::frame::compressor(),
        compressed: Vec::new(),
        session,
        end: replay.end.position,
        prev_crc: replay.end.prev_crc,
        tail: start.position,
        checkpoint_lsn: covered,
        committed_lsn: last_lsn,
        synced_lsn: last_lsn,
        marks: VecDeque::from(replay.marks.clone()),
        pending,
        pending_count: 0,
        poison: None,
        fill_out: Default::default(),
    }
}
