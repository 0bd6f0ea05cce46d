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
//! result durable; see `open.rs`.)

use crate::frame::{self, FrameError, HEADER_BYTES};
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
    pub records: Vec<Record>,
    pub marks: Vec<FrameMark>,
    pub end: ChainState,
    pub cut: Option<TailCut>,
    /// The highest `acked_lsn` of the accepted frames: records up to it were on stable
    /// storage when a later frame was written.
    pub acked_max: u64,
}

/// Damage inside acknowledged data: at stream `position`, for `reason`.
#[derive(Debug)]
pub struct Damage {
    pub position: u64,
    pub reason: String,
}

/// Replays `ring` (the whole ring space of the log) from `start`. Records up to
/// `covered_lsn` (already in the checkpoint) are skipped.
pub fn replay(ring: &[u8], start: ChainState, covered_lsn: u64) -> Result<Replay, Damage> {
    let capacity = ring.len() as u64;
    let limit = start.position + capacity;
    let mut state = start;
    let mut records = Vec::new();
    let mut marks = Vec::new();
    let mut acked_max = 0;
    loop {
        let (position, frame) = match successor(ring, &state, limit) {
            Ok(accepted) => accepted,
            Err(reason) => {
                let cut = tail_cut(ring, &state, reason)?;
                return Ok(Replay {
                    records,
                    marks,
                    end: state,
                    cut,
                    acked_max,
                });
            }
        };
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
fn successor<'a>(
    ring: &'a [u8],
    state: &ChainState,
    limit: u64,
) -> Result<(u64, frame::Frame<'a>), String> {
    let capacity = ring.len() as u64;
    let here = expected_at(ring, state, state.position, limit);
    if here.is_ok() || state.position.is_multiple_of(capacity) {
        return here.map(|f| (state.position, f));
    }
    let next_lap = state.position + (capacity - state.position % capacity);
    match expected_at(ring, state, next_lap, limit) {
        Ok(frame) => Ok((next_lap, frame)),
        Err(_) => here.map(|f| (state.position, f)),
    }
}

/// The frame at stream `position` if it is exactly the successor of `state`.
fn expected_at<'a>(
    ring: &'a [u8],
    state: &ChainState,
    position: u64,
    limit: u64,
) -> Result<frame::Frame<'a>, String> {
    let frame = decode_at(ring, position).map_err(|e| e.to_string())?;
    let h = frame.header;
    if h.position != position {
        return Err(format!(
            "frame of position {} found at position {position}",
            h.position
        ));
    }
    if h.prev_crc != state.prev_crc {
        return Err(format!(
            "frame does not chain (prev_crc {:#010x})",
            h.prev_crc
        ));
    }
    if h.first_lsn != state.next_lsn {
        return Err(format!(
            "frame starts at LSN {}, expected {}",
            h.first_lsn, state.next_lsn
        ));
    }
    if position + u64::from(h.frame_len) > limit {
        return Err("frame would overrun the live part of the ring".into());
    }
    Ok(frame)
}

/// Decodes the frame whose stream position maps to `position % capacity`.
fn decode_at(ring: &[u8], position: u64) -> Result<frame::Frame<'_>, FrameError> {
    let offset = (position % ring.len() as u64) as usize;
    frame::decode(&ring[offset..])
}

/// Decides how the replay ends at `state` (see the module doc).
fn tail_cut(ring: &[u8], state: &ChainState, reason: String) -> Result<Option<TailCut>, Damage> {
    if let Some((position, acked)) = acknowledging_frame(ring, state) {
        return Err(Damage {
            position: state.position,
            reason: format!(
                "{reason}; but the frame at stream position {position} acknowledges LSN \
                 {acked}, past LSN {} that would be lost",
                state.next_lsn
            ),
        });
    }
    Ok(cut_at(ring, state.position, reason))
}

/// A clean end is zero-filled space or a valid frame of an earlier lap; anything else is cut.
fn cut_at(ring: &[u8], position: u64, reason: String) -> Option<TailCut> {
    let capacity = ring.len() as u64;
    let lap_rest = capacity - position % capacity;
    let (position, at) = if lap_rest < HEADER_BYTES as u64 || is_clean(ring, position) {
        let next_lap = position + lap_rest;
        if is_clean(ring, next_lap) {
            return None;
        }
        (next_lap, next_lap)
    } else {
        (position, position)
    };
    let offset = (at % capacity) as usize;
    let bytes = match frame::read_header(&ring[offset..]) {
        Ok(h) => u64::from(h.frame_len).min(capacity - offset as u64),
        Err(_) => (HEADER_BYTES as u64).min(capacity - offset as u64),
    };
    Some(TailCut {
        position,
        bytes,
        reason,
    })
}

/// The places after `end` where a torn or foreign frame header sits, as (position, bytes to
/// zero): where the writer may have put the next frame (at `end`, or at the next lap start).
/// `open` zeroes these headers, so that a later partial overwrite can never complete a cut
/// frame again (a frame torn in its second sector, whose missing bytes a new frame happens to
/// rewrite identically, would otherwise come back as a ghost).
pub fn torn_headers(ring: &[u8], end: u64, limit: u64) -> Vec<(u64, usize)> {
    let capacity = ring.len() as u64;
    let mut candidates = vec![end];
    if !end.is_multiple_of(capacity) {
        candidates.push(end + (capacity - end % capacity));
    }
    // Only free space is zeroed: from `end` up to `limit`, where the live part of the ring
    // (from the replay start, one capacity long) would begin again.
    candidates
        .into_iter()
        .filter(|&position| position < limit && !is_clean(ring, position))
        .map(|position| {
            let lap_rest = capacity - position % capacity;
            let len = (HEADER_BYTES as u64).min(limit - position).min(lap_rest);
            (position, len as usize)
        })
        .collect()
}

fn is_clean(ring: &[u8], position: u64) -> bool {
    match decode_at(ring, position) {
        Err(FrameError::Zeros) | Err(FrameError::Short) => true,
        Ok(frame) => frame.header.position < position,
        Err(_) => false,
    }
}

/// A valid frame of this lap window, after `state.position`, whose writer had already
/// acknowledged `state.next_lsn` or later: (its position, its acked LSN).
fn acknowledging_frame(ring: &[u8], state: &ChainState) -> Option<(u64, u64)> {
    let capacity = ring.len() as u64;
    let start_offset = (state.position % capacity) as usize;
    // The window after the damaged frame, in stream order: the rest of this lap, then the
    // part of the next lap before it. `base` is the stream position of each part's offset 0.
    let this_lap = state.position - start_offset as u64;
    let parts = [
        (start_offset + 1, ring.len(), this_lap),
        (0, start_offset, this_lap + capacity),
    ];
    for (from, to, base) in parts {
        let mut offset = from;
        while let Some(found) = ring[offset..to].iter().position(|&b| b == MAGIC_FIRST_BYTE) {
            offset += found;
            if let Some(acked) = acknowledges(ring, offset, base + offset as u64, state.next_lsn) {
                return Some((base + offset as u64, acked));
            }
            offset += 1;
        }
    }
    None
}

/// The first byte of the frame magic: the scan looks for it first (a fast byte search).
const MAGIC_FIRST_BYTE: u8 = frame::MAGIC.to_le_bytes()[0];

/// The `acked_lsn` of a valid frame at ring `offset` that sits at its own stream `position`
/// and acknowledges `next_lsn` or later.
fn acknowledges(ring: &[u8], offset: usize, position: u64, next_lsn: u64) -> Option<u64> {
    let frame = frame::decode(&ring[offset..]).ok()?;
    let h = frame.header;
    (h.position == position && h.acked_lsn >= next_lsn).then_some(h.acked_lsn)
}
