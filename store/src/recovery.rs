//! Recovery of the log: from the place a checkpoint says replay starts, accept frames one by
//! one while each is exactly the expected successor (its position, the previous frame's CRC,
//! the next LSN); stop at the first that is not.
//!
//! What stops the replay decides what happens:
//! - zero-filled space or a frame of an earlier lap: the clean end of the log;
//! - anything else (a torn or damaged frame, a frame of another chain): a torn tail, cut and
//!   reported — unless some later frame of this lap window acknowledges an LSN at or past the
//!   one that would be lost, which proves the damage is inside acknowledged data: `Corrupt`.
//!
//! This module only reads: recovery is a function of the bytes on disk. (`open` then makes the
//! result durable; see `open.rs`.) It reads the ring through a `RingReader`, a frame or a
//! window at a time, so that only the recovered records take memory, never the ring itself.

use std::io;

use crate::frame::{self, FrameError, HEADER_BYTES};
use crate::ring_reader::{FrameBytes, RingReader};
use crate::{Lsn, Record, TailCut};

/// Where the stream stands: the next frame's position, the chain value it must carry, and the
/// LSN its first record must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainState {
    pub position: u64,
    pub prev_crc: u32,
    pub next_lsn: u64,
}

/// A frame's start, kept so that a checkpoint can say where replay after it begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameMark {
    pub first_lsn: u64,
    pub position: u64,
    pub prev_crc: u32,
}

/// What the replay found.
pub struct Replay {
    /// The records after the covered LSN, up to the end (or the damage).
    pub records: Vec<Record>,
    pub marks: Vec<FrameMark>,
    /// Where the accepted frames end.
    pub end: ChainState,
    pub cut: Option<TailCut>,
    /// Damage inside acknowledged data where the frames end: open refuses the log; the
    /// records before it are the longest prefix that can be saved.
    pub damage: Option<Damage>,
    /// The highest `acked_lsn` of the accepted frames: records up to it were on stable
    /// storage when a later frame was written.
    pub acked_max: u64,
}

/// Damage inside acknowledged data: at stream `position`, for `reason` (which names the later
/// frame that acknowledges past it).
#[derive(Clone, Debug)]
pub struct Damage {
    pub position: u64,
    pub reason: String,
    /// Over every intact frame after the damage: the highest LSN acknowledged, and the highest
    /// LSN held.
    pub highest_acknowledged_lsn: u64,
    pub highest_lsn: u64,
}

/// A frame at a place, or why there is none (the reason a replay would report).
type Found<T> = io::Result<Result<T, String>>;

/// Replays the ring space of the log from `start`. Records up to `covered_lsn` (already in the
/// checkpoint) are skipped.
pub fn replay(ring: &RingReader<'_>, start: ChainState, covered_lsn: u64) -> io::Result<Replay> {
    let limit = start.position + ring.capacity();
    let mut state = start;
    let mut records = Vec::new();
    let mut marks = Vec::new();
    let mut acked_max = 0;
    loop {
        let (position, bytes) = match successor(ring, &state, limit)? {
            Ok(accepted) => accepted,
            Err(reason) => {
                let (cut, damage) = match tail_cut(ring, &state, reason)? {
                    Ok(cut) => (cut, None),
                    Err(damage) => (None, Some(damage)),
                };
                return Ok(Replay {
                    records,
                    marks,
                    end: state,
                    cut,
                    damage,
                    acked_max,
                });
            }
        };
        let frame = bytes.frame();
        // `decode` refused a frame without records, so the LSNs rise with every frame.
        assert!(
            frame.header.record_count >= 1,
            "an accepted frame holds a record"
        );
        marks.push(FrameMark {
            first_lsn: state.next_lsn,
            position,
            prev_crc: state.prev_crc,
        });
        acked_max = acked_max.max(frame.header.acked_lsn);
        for (i, bytes) in frame.records().enumerate() {
            let lsn = state.next_lsn + i as u64;
            if lsn > covered_lsn {
                records.push(Record {
                    lsn: Lsn(lsn),
                    bytes: bytes.to_vec(),
                });
            }
        }
        state = ChainState {
            position: position + u64::from(frame.header.frame_len),
            prev_crc: frame.header.crc,
            next_lsn: state.next_lsn + u64::from(frame.header.record_count),
        };
    }
}

/// The frame that follows `state`: at its position, or at the next lap start (where the writer
/// puts a frame that does not fit in the rest of the lap). Else the reason found at `position`.
fn successor(ring: &RingReader<'_>, state: &ChainState, limit: u64) -> Found<(u64, FrameBytes)> {
    let here = expected_at(ring, state, state.position, limit)?;
    if here.is_ok() || ring.starts_lap(state.position) {
        return Ok(here.map(|f| (state.position, f)));
    }
    let next_lap = state.position + ring.lap_rest(state.position);
    Ok(match expected_at(ring, state, next_lap, limit)? {
        Ok(frame) => Ok((next_lap, frame)),
        Err(_) => here.map(|f| (state.position, f)),
    })
}

/// The frame at stream `position` if it is exactly the successor of `state`.
fn expected_at(
    ring: &RingReader<'_>,
    state: &ChainState,
    position: u64,
    limit: u64,
) -> Found<FrameBytes> {
    let frame = match ring.read_frame(position)? {
        Ok(frame) => frame,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let h = frame.header;
    if h.position != position {
        return Ok(Err(format!(
            "frame of position {} found at position {position}",
            h.position
        )));
    }
    if h.prev_crc != state.prev_crc {
        return Ok(Err(format!(
            "frame does not chain (prev_crc {:#010x})",
            h.prev_crc
        )));
    }
    if h.first_lsn != state.next_lsn {
        return Ok(Err(format!(
            "frame starts at LSN {}, expected {}",
            h.first_lsn, state.next_lsn
        )));
    }
    if position + u64::from(h.frame_len) > limit {
        return Ok(Err("frame would overrun the live part of the ring".into()));
    }
    Ok(Ok(frame))
}

/// Decides how the replay ends at `state` (see the module doc): a clean end or a cut tail, or
/// damage inside acknowledged data.
fn tail_cut(
    ring: &RingReader<'_>,
    state: &ChainState,
    reason: String,
) -> io::Result<Result<Option<TailCut>, Damage>> {
    if let Some((position, acked)) = acknowledging_frame(ring, state)? {
        let (highest_acknowledged_lsn, highest_lsn) = highest_after(ring, state)?;
        return Ok(Err(Damage {
            highest_acknowledged_lsn,
            highest_lsn,
            position: state.position,
            reason: format!(
                "{reason}; but the frame at stream position {position} acknowledges LSN \
                 {acked}, past LSN {} that would be lost",
                state.next_lsn
            ),
        }));
    }
    Ok(Ok(cut_at(ring, state.position, reason)?))
}

/// A clean end is zero-filled space or a valid frame of an earlier lap; anything else is cut.
fn cut_at(ring: &RingReader<'_>, position: u64, reason: String) -> io::Result<Option<TailCut>> {
    let capacity = ring.capacity();
    let lap_rest = ring.lap_rest(position);
    let (position, at) = if lap_rest < HEADER_BYTES as u64 || is_clean(ring, position)? {
        let next_lap = position + lap_rest;
        if is_clean(ring, next_lap)? {
            return Ok(None);
        }
        (next_lap, next_lap)
    } else {
        (position, position)
    };
    let room = capacity - ring.offset(at);
    let bytes = match ring.read_header(at)? {
        Ok(h) => u64::from(h.frame_len).min(room),
        Err(_) => (HEADER_BYTES as u64).min(room),
    };
    Ok(Some(TailCut {
        position,
        bytes,
        reason,
    }))
}

/// The places after `end` where a torn or foreign frame header sits, as (position, bytes to
/// zero): where the writer may have put the next frame (at `end`, or at the next lap start).
/// `open` zeroes these headers, so that a later partial overwrite can never complete a cut
/// frame again (a frame torn in its second sector, whose missing bytes a new frame happens to
/// rewrite identically, would otherwise come back as a ghost).
pub fn torn_headers(ring: &RingReader<'_>, end: u64, limit: u64) -> io::Result<Vec<(u64, usize)>> {
    let mut candidates = vec![end];
    if !ring.starts_lap(end) {
        candidates.push(end + ring.lap_rest(end));
    }
    // Only free space is zeroed: from `end` up to `limit`, where the live part of the ring
    // (from the replay start, one capacity long) would begin again.
    let mut torn = Vec::new();
    for position in candidates {
        if position < limit && !is_clean(ring, position)? {
            let len = (HEADER_BYTES as u64)
                .min(limit - position)
                .min(ring.lap_rest(position));
            torn.push((position, len as usize));
        }
    }
    Ok(torn)
}

fn is_clean(ring: &RingReader<'_>, position: u64) -> io::Result<bool> {
    Ok(match ring.read_frame(position)? {
        Err(FrameError::Zeros) | Err(FrameError::Short) => true,
        Ok(frame) => frame.header.position < position,
        Err(_) => false,
    })
}

/// A valid frame of this lap window, after `state.position`, whose writer had already
/// acknowledged `state.next_lsn` or later: (its position, its acked LSN).
fn acknowledging_frame(
    ring: &RingReader<'_>,
    state: &ChainState,
) -> io::Result<Option<(u64, u64)>> {
    let mut found = None;
    scan_after(ring, state, |position, head| {
        found = acknowledges(ring, head, position, state.next_lsn)?.map(|acked| (position, acked));
        Ok(found.is_some())
    })?;
    Ok(found)
}

/// Over every intact frame of this lap window after `state.position`: the highest LSN one
/// acknowledges, and the highest LSN one holds (for a report of what damage costs).
fn highest_after(ring: &RingReader<'_>, state: &ChainState) -> io::Result<(u64, u64)> {
    let (mut acked, mut held) = (0, 0);
    scan_after(ring, state, |position, head| {
        let intact = frame::read_header(head).is_ok_and(|h| h.position == position);
        if intact {
            if let Ok(frame) = ring.read_frame(position)? {
                let h = frame.header;
                acked = acked.max(h.acked_lsn);
                held = held.max(h.first_lsn + u64::from(h.record_count).max(1) - 1);
            }
        }
        Ok(false)
    })?;
    Ok((acked, held))
}

/// Calls `candidate(position, bytes from there)` for each place of this lap window after
/// `state.position` where a frame may start, in stream order, until it returns true.
///
/// The whole window is scanned (a whole capacity), through a buffer of one chunk (plus the
/// header of a candidate that starts near a chunk's end).
fn scan_after(
    ring: &RingReader<'_>,
    state: &ChainState,
    mut candidate: impl FnMut(u64, &[u8]) -> io::Result<bool>,
) -> io::Result<()> {
    let capacity = ring.capacity();
    let start_offset = ring.offset(state.position);
    // The window after the damaged frame, in stream order: the rest of this lap, then the
    // part of the next lap before it. `base` is the stream position of each part's offset 0.
    let this_lap = state.position - start_offset;
    let parts = [
        (start_offset + 1, capacity, this_lap),
        (0, start_offset, this_lap + capacity),
    ];
    let mut window = Vec::new();
    for (from, to, base) in parts {
        let mut chunk = from;
        while chunk < to {
            let chunk_end = (chunk + ring.chunk() as u64).min(to);
            // A candidate near the chunk's end has its header after it (possibly past `to`).
            let read_end = (chunk_end + HEADER_BYTES as u64 - 1).min(capacity);
            window.resize((read_end - chunk) as usize, 0);
            ring.read(chunk, &mut window)?;
            let searched = (chunk_end - chunk) as usize;
            let mut i = 0;
            // memchr, not a byte loop: every open scans a whole capacity (256 MiB by default),
            // mostly zeros, and the loop made that about 80 ms of CPU (research note 015).
            while let Some(found) = memchr::memchr(MAGIC_FIRST_BYTE, &window[i..searched]) {
                i += found;
                if candidate(base + chunk + i as u64, &window[i..])? {
                    return Ok(());
                }
                i += 1;
            }
            chunk = chunk_end;
        }
    }
    Ok(())
}

/// The first byte of the frame magic: the scan looks for it first (a fast byte search).
const MAGIC_FIRST_BYTE: u8 = frame::MAGIC.to_le_bytes()[0];

/// The `acked_lsn` of a valid frame at stream `position`, whose bytes start `head`, that sits
/// at its own position and acknowledges `next_lsn` or later. The header alone rules most
/// candidates out; the whole frame is read and checked only for the others.
fn acknowledges(
    ring: &RingReader<'_>,
    head: &[u8],
    position: u64,
    next_lsn: u64,
) -> io::Result<Option<u64>> {
    let Ok(h) = frame::read_header(head) else {
        return Ok(None);
    };
    if h.position != position || h.acked_lsn < next_lsn {
        return Ok(None);
    }
    Ok(ring.read_frame(position)?.ok().map(|f| f.header.acked_lsn))
}

#[cfg(test)]
mod tests {
    //! Recovery through a small window must say exactly what it says through a window as large
    //! as the ring (the whole ring at once): with frames larger than the window, headers across
    //! window ends, and scans over many windows.

    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use super::*;
    use crate::io::Io;
    use crate::ring::{self, HEADER_AREA_BYTES};
    use crate::sim::{test_seed, SimDisk, SimRng};
    use crate::{Error, Store, StoreOptions, SyncMode};

    const CAPACITY: u64 = 4096;
    const CASES: usize = 400;

    fn log_path() -> PathBuf {
        Path::new("/sim/store").join(crate::LOG_FILE_NAME)
    }

    #[test]
    fn a_small_window_recovers_what_the_whole_ring_does() {
        let seed = test_seed("a_small_window_recovers_what_the_whole_ring_does", 0x5eed);
        let mut rng = SimRng::new(seed);
        let mut kinds = [0usize; 3];
        for case in 0..CASES {
            let disk = SimDisk::new(rng.next_u64());
            write_log(&disk, &mut rng);
            damage(&disk, &mut rng);
            let chunk = 1 + rng.below(300) as usize;
            let log = disk.open_file(&log_path()).expect("the log exists");
            let header = ring::read_header(&*log, &log_path()).expect("the header is intact");
            let start = ChainState {
                position: 0,
                prev_crc: header.genesis_crc(),
                next_lsn: 1,
            };
            let whole = RingReader::with_chunk(&*log, header, CAPACITY as usize);
            let (kind, expected) = outcome(&whole, start);
            let (_, found) = outcome(&RingReader::with_chunk(&*log, header, chunk), start);
            assert_eq!(found, expected, "case {case}, chunk {chunk}, seed {seed}");
            kinds[kind] += 1;
        }
        // The cases must reach every ending, or the comparison proves less than it says.
        eprintln!("clean ends, cuts, damage: {kinds:?}");
        assert!(kinds.iter().all(|&n| n > 0), "endings {kinds:?}");
    }

    /// Writes a log of random records (up to 700 bytes, so that frames outgrow small windows).
    fn write_log(disk: &Arc<SimDisk>, rng: &mut SimRng) {
        let options = StoreOptions {
            sync: SyncMode::Always,
            log_capacity_bytes: CAPACITY,
            log_capacity_max_bytes: CAPACITY,
        };
        let io = disk.clone() as Arc<dyn Io>;
        let mut store = Store::open_with(io, Path::new("/sim/store"), options)
            .expect("a fresh store")
            .store;
        for _ in 0..rng.below(40) {
            let mut bytes = vec![0u8; 1 + rng.below(700) as usize];
            rng.fill(&mut bytes);
            match store.append(&bytes) {
                Ok(_) => {}
                Err(Error::LogFull { .. }) => break,
                Err(e) => panic!("append: {e}"),
            }
            if rng.one_in(2) {
                match store.commit() {
                    Ok(_) => {}
                    Err(Error::LogFull { .. }) => break,
                    Err(e) => panic!("commit: {e}"),
                }
            }
        }
        let _ = store.commit();
    }

    /// Overwrites a few places of the ring with random bytes or zeros.
    fn damage(disk: &Arc<SimDisk>, rng: &mut SimRng) {
        for _ in 0..rng.below(4) {
            let offset = rng.below(CAPACITY);
            let len = 1 + rng.below(64.min(CAPACITY - offset));
            let mut bytes = vec![0u8; len as usize];
            if rng.one_in(2) {
                rng.fill(&mut bytes);
            }
            disk.damage(&log_path(), HEADER_AREA_BYTES + offset, &bytes);
        }
    }

    /// What recovery says, in full: (0 clean end, 1 cut, 2 damage; the whole answer as text).
    fn outcome(ring: &RingReader<'_>, start: ChainState) -> (usize, String) {
        match replay(ring, start, 0).expect("sim reads succeed") {
            Replay {
                damage: Some(d), ..
            } => (2, format!("damage at {}: {}", d.position, d.reason)),
            r => {
                let torn = torn_headers(ring, r.end.position, start.position + CAPACITY)
                    .expect("sim reads succeed");
                let kind = usize::from(r.cut.is_some());
                let text = format!(
                    "{:?} {:?} {:?} {:?} {} {:?}",
                    r.records, r.marks, r.end, r.cut, r.acked_max, torn
                );
                (kind, text)
            }
        }
    }
}
