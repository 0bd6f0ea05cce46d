//! The log file: a header area followed by `capacity` bytes of zero-filled space used as a
//! ring. Frames are addressed by their absolute position in the (endless) log stream; the byte
//! of stream position `p` lives at ring offset `(p + base) % capacity`, file offset
//! `ring_start + (p + base) % capacity`.
//!
//! ```text
//! log header slot (version 3: two slots, at file offsets 0 and 4096; the ring starts at 8192)
//! offset size field
//!  0     8   magic       "PURELOG\0"
//!  8     4   version     3
//! 12     4   reserved    0
//! 16     8   capacity    bytes of ring space after the header area
//! 24     8   log_id      random; its low 32 bits are the chain value before the first frame
//! 32     8   base        ring offset of stream position 0
//! 40     8   generation  0 at creation, one more at each growth
//! 48     4   crc         CRC32C of bytes 0..48
//!
//! versions 1 and 2: one header at offset 0, bytes 0..32 as above, then the CRC of them at 32;
//! base 0; the ring starts at 4096; the capacity never changes.
//! ```
//!
//! A frame never straddles the end of the ring: when it does not fit in the rest of the lap,
//! the writer leaves that rest unused and puts the frame at the start of the next lap (the
//! reader, finding no valid successor at the expected position, tries the next lap start).
//!
//! A version-3 log grows in place (`Store::grow`): the file is extended with zeros and synced,
//! then the slot not holding the newest header gets the next generation with the larger
//! capacity and a new `base`, and is synced. The new base maps every live position (from the
//! oldest one still needed to the end, which must lie in one lap) to the ring offset it had,
//! so the frames on disk stay where both headers say they are, whichever of the two a crash
//! leaves newest: the growth needs no copy, and a torn slot is refused by its CRC and the
//! other one read.

use std::path::Path;

use crate::error::{io_error, Error};
use crate::frame::{u32_at, u64_at, SECTOR_BYTES};
use crate::io::{Io, IoFile};

/// Bytes before the ring space of a version-3 log: two 4 KiB blocks, one header slot each, so
/// that ring writes never touch a header's block and the write of one slot never tears the
/// other, even on a device of 4 KiB sectors.
pub const HEADER_AREA_BYTES: u64 = 2 * SLOT_BYTES;
/// Bytes before the ring space of a version-1 or -2 log (one header).
const LEGACY_HEADER_AREA_BYTES: u64 = 4096;
/// The distance between the two header slots of a version-3 log.
const SLOT_BYTES: u64 = 4096;
/// The bytes a slot is written as: one sector, so that the write is direct where the log's
/// are (`Io::open_log`).
const SLOT_WRITE_BYTES: usize = SECTOR_BYTES;
const MAGIC: &[u8; 8] = b"PURELOG\0";
/// The version of the logs this store creates: two header slots, a base, growth in place;
/// frames padded to whole sectors. Version 2 logs pad frames but never grow; version 1 logs
/// (made before frames were padded) neither. Both are read and written as they were, so that
/// the binary that made them can still open them.
const VERSION: u32 = 3;
/// The smallest ring the store accepts.
pub const MIN_CAPACITY_BYTES: u64 = 4096;
/// A grown ring's capacity is a multiple of this, so that every lap of it starts a sector and
/// a page, and its fill writes whole chunks.
pub const GROWTH_UNIT_BYTES: u64 = 4096;
/// Zero-fill chunk at creation: large enough to be quick, small enough not to matter in memory.
const FILL_CHUNK_BYTES: usize = 1 << 20;

/// What the log header says: where each stream position lives in the file.
///
/// Invariants: `capacity >= MIN_CAPACITY_BYTES` and `base < capacity`; in a padded log both
/// are whole sectors (so every frame, placed at a sector of the stream, starts a sector of
/// the file); only a version-3 log has a `base` other than 0 or a `generation` other than 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogHeader {
    pub capacity: u64,
    pub log_id: u64,
    /// Frames are padded to whole sectors: a log of version 2 or 3.
    pub padded: bool,
    /// Ring offset of stream position 0.
    pub base: u64,
    /// How many times the log grew (version 3); the newest slot holds the highest.
    pub generation: u64,
    pub version: u32,
}

impl LogHeader {
    /// The chain value that the first frame of the log carries as `prev_crc`.
    pub fn genesis_crc(&self) -> u32 {
        self.log_id as u32
    }

    /// The header of a new log: version 3 when the capacity is whole sectors, else version 1.
    pub fn new(capacity: u64, log_id: u64) -> LogHeader {
        let padded = capacity.is_multiple_of(SECTOR_BYTES as u64);
        LogHeader {
            capacity,
            log_id,
            padded,
            base: 0,
            generation: 0,
            version: if padded { VERSION } else { 1 },
        }
    }

    /// Whether this log can grow in place (version 3).
    pub fn growable(&self) -> bool {
        self.version == VERSION
    }

    /// File offset where the ring space starts.
    pub fn ring_start(&self) -> u64 {
        match self.version {
            VERSION => HEADER_AREA_BYTES,
            _ => LEGACY_HEADER_AREA_BYTES,
        }
    }

    /// Ring offset of stream position `position`.
    pub fn offset(&self, position: u64) -> u64 {
        (position % self.capacity + self.base) % self.capacity
    }

    /// File offset of stream position `position`.
    pub fn file_offset(&self, position: u64) -> u64 {
        self.ring_start() + self.offset(position)
    }

    /// Bytes from `position` to the end of its lap.
    pub fn lap_rest(&self, position: u64) -> u64 {
        self.capacity - self.offset(position)
    }

    /// The file's length: the header area and the ring.
    pub fn file_bytes(&self) -> u64 {
        self.ring_start() + self.capacity
    }

    /// Where a frame of `frame_len` bytes goes when the stream ends at `end`: at `end` if it
    /// fits in the rest of the lap, else at the start of the next lap.
    pub fn place(&self, end: u64, frame_len: u64) -> u64 {
        // A frame is at most half the ring (`Store::frame_bytes_max`): it fits a whole lap.
        assert!(
            frame_len <= self.capacity,
            "a frame fits in one lap of the ring"
        );
        let lap_rest = self.lap_rest(end);
        let position = if frame_len <= lap_rest {
            end
        } else {
            end + lap_rest
        };
        // What the reader relies on: it looks for a frame only here or at the next lap start.
        assert!(
            self.offset(position) + frame_len <= self.capacity,
            "a frame never straddles the end of the ring"
        );
        position
    }

    /// The header of this log grown to `capacity`, if the live positions `[tail, end)` lie in
    /// one lap (else `None`: the growth waits until a checkpoint moves `tail` into the lap of
    /// `end`). Every position of `[tail, end)` keeps its ring offset, and the ring continues
    /// past the old end of the lap into the new space.
    pub fn grown(&self, capacity: u64, tail: u64, end: u64) -> Option<LogHeader> {
        assert!(
            self.growable()
                && capacity > self.capacity
                && capacity.is_multiple_of(GROWTH_UNIT_BYTES),
            "a version-3 log grows to a larger capacity of whole growth units"
        );
        assert!(
            tail <= end && end - tail <= self.capacity,
            "the live part fits the ring"
        );
        let first = self.offset(tail);
        if first + (end - tail) > self.capacity {
            return None;
        }
        // (tail + base') % capacity == first.
        let base = (first + capacity - tail % capacity) % capacity;
        let grown = LogHeader {
            capacity,
            base,
            generation: self.generation + 1,
            ..*self
        };
        assert_eq!(
            grown.offset(tail),
            first,
            "growth keeps the ring offset of the oldest live position"
        );
        if end > tail {
            assert_eq!(
                grown.offset(end - 1),
                self.offset(end - 1),
                "growth keeps the ring offset of the newest live position"
            );
        }
        Some(grown)
    }

    fn encode(&self) -> Vec<u8> {
        let mut bytes = vec![0u8; 52];
        bytes[0..8].copy_from_slice(MAGIC);
        bytes[8..12].copy_from_slice(&self.version.to_le_bytes());
        bytes[16..24].copy_from_slice(&self.capacity.to_le_bytes());
        bytes[24..32].copy_from_slice(&self.log_id.to_le_bytes());
        if self.version == VERSION {
            bytes[32..40].copy_from_slice(&self.base.to_le_bytes());
            bytes[40..48].copy_from_slice(&self.generation.to_le_bytes());
            let crc = crc32c::crc32c(&bytes[0..48]);
            bytes[48..52].copy_from_slice(&crc.to_le_bytes());
        } else {
            let crc = crc32c::crc32c(&bytes[0..32]);
            bytes[32..36].copy_from_slice(&crc.to_le_bytes());
            bytes.truncate(36);
        }
        bytes
    }

    /// Parses and checks one header slot; `Err` says what is wrong.
    pub fn decode(bytes: &[u8; 52]) -> Result<LogHeader, String> {
        if &bytes[0..8] != MAGIC {
            return Err("bad log magic".into());
        }
        let version = u32_at(bytes, 8);
        let crc_at = match version {
            1 | 2 => 32,
            VERSION => 48,
            _ => return Err(format!("unknown log version {version}")),
        };
        if crc32c::crc32c(&bytes[0..crc_at]) != u32_at(bytes, crc_at) {
            return Err("log header CRC mismatch".into());
        }
        let capacity = u64_at(bytes, 16);
        if capacity < MIN_CAPACITY_BYTES {
            return Err(format!("impossible log capacity {capacity}"));
        }
        let padded = version >= 2;
        if padded && !capacity.is_multiple_of(SECTOR_BYTES as u64) {
            return Err(format!(
                "a version-{version} log of {capacity} bytes, not whole sectors"
            ));
        }
        let (base, generation) = match version {
            VERSION => (u64_at(bytes, 32), u64_at(bytes, 40)),
            _ => (0, 0),
        };
        if base >= capacity || !base.is_multiple_of(SECTOR_BYTES as u64) {
            return Err(format!(
                "impossible ring base {base} for a capacity of {capacity}"
            ));
        }
        Ok(LogHeader {
            capacity,
            log_id: u64_at(bytes, 24),
            padded,
            base,
            generation,
            version,
        })
    }

    /// File offset of the slot that holds this header (version 3: even generations in the
    /// first, odd ones in the second).
    fn slot_offset(&self) -> u64 {
        (self.generation % 2) * SLOT_BYTES
    }
}

/// Creates the log at `path`: written whole under a temporary name, synced, renamed, and the
/// directory synced, so that a `log` file that exists is always complete.
pub fn create(io: &dyn Io, dir: &Path, path: &Path, header: LogHeader) -> Result<(), Error> {
    let tmp = dir.join("log.tmp");
    let file = io
        .create_file(&tmp)
        .map_err(|e| io_error("create", &tmp, e))?;
    if let Err(error) = fill(&*file, &tmp, header) {
        // A partly preallocated file would keep a full disk full after the process exits.
        drop(file);
        let _ = io.remove_file(&tmp);
        return Err(error);
    }
    drop(file);
    io.rename(&tmp, path)
        .map_err(|e| io_error("rename", &tmp, e))?;
    io.sync_dir(dir)
        .map_err(|e| io_error("sync directory", dir, e))
}

/// Zero-fills the new log, writes its header and syncs it.
fn fill(file: &dyn IoFile, path: &Path, header: LogHeader) -> Result<(), Error> {
    fill_zeros(file, path, 0, header.file_bytes())?;
    file.write_at(&header.encode(), 0)
        .map_err(|e| io_error("write", path, e))?;
    file.sync_data().map_err(|e| io_error("fdatasync", path, e))
}

/// Writes zeros over `[from, to)`: real blocks, not holes or unwritten extents, so that later
/// syncs of this space are overwrites without allocation.
pub(crate) fn fill_zeros(file: &dyn IoFile, path: &Path, from: u64, to: u64) -> Result<(), Error> {
    let zeros = vec![0u8; FILL_CHUNK_BYTES];
    let mut offset = from;
    while offset < to {
        let n = (to - offset).min(FILL_CHUNK_BYTES as u64) as usize;
        file.write_at(&zeros[..n], offset)
            .map_err(|e| io_error("preallocate", path, e))?;
        offset += n as u64;
    }
    Ok(())
}

/// Writes `header` into its slot (the one not holding the header it replaces) and syncs it.
pub(crate) fn write_slot(file: &dyn IoFile, path: &Path, header: &LogHeader) -> Result<(), Error> {
    assert!(header.growable(), "only a version-3 log has slots");
    let mut block = vec![0u8; SLOT_WRITE_BYTES];
    let encoded = header.encode();
    block[..encoded.len()].copy_from_slice(&encoded);
    file.write_at(&block, header.slot_offset())
        .map_err(|e| io_error("write", path, e))?;
    file.sync_data().map_err(|e| io_error("fdatasync", path, e))
}

/// Reads and checks the header of an existing log: of a version-3 log, the valid slot of the
/// highest generation.
pub fn read_header(file: &dyn IoFile, path: &Path) -> Result<LogHeader, Error> {
    let corrupt = |position: u64, reason: String| Error::Corrupt {
        path: path.to_path_buf(),
        position,
        reason,
    };
    let len = file.size_bytes().map_err(|e| io_error("stat", path, e))?;
    let first = decode_at(file, path, 0, len)?;
    let header = match first {
        Ok(header) if !header.growable() => header,
        first => {
            // A version-3 log, or one whose first slot is torn: the second slot decides.
            let second = decode_at(file, path, SLOT_BYTES, len)?.and_then(|h| match h.growable() {
                true => Ok(h),
                false => Err(format!("a version-{} header in the second slot", h.version)),
            });
            match (first, second) {
                (Ok(a), Ok(b)) if a.log_id != b.log_id => {
                    return Err(corrupt(
                        SLOT_BYTES,
                        "the two log header slots name different logs".into(),
                    ))
                }
                (Ok(a), Ok(b)) => match a.generation > b.generation {
                    true => a,
                    false => b,
                },
                (Ok(a), Err(_)) => a,
                (Err(_), Ok(b)) => b,
                (Err(reason), Err(_)) => return Err(corrupt(0, reason)),
            }
        }
    };
    if len < header.file_bytes() {
        return Err(corrupt(
            len,
            format!("log file is {len} bytes, shorter than its header says"),
        ));
    }
    if header.growable() && len > header.file_bytes() {
        if let Some(offset) = frame_past_ring(file, path, &header, len)? {
            return Err(corrupt(
                offset,
                format!(
                    "a frame lies past the {} bytes of ring the newest valid log header gives: \
                     a newer header, written before it, is damaged",
                    header.capacity
                ),
            ));
        }
    }
    Ok(header)
}

/// The file offset of a valid frame in the space past the ring `header` gives, if one is there.
///
/// That space is a growth's zeros (its fill, or one that ended with a crash before its header
/// was written), and frames go there only once the larger header is synced. A frame there means
/// the newest header, which places it, was on disk and is damaged now: rot, not a torn write,
/// and reading the log by the older header would end it, silently, before every frame written
/// since the growth. Frames start on sectors in a version-3 log.
fn frame_past_ring(
    file: &dyn IoFile,
    path: &Path,
    header: &LogHeader,
    len: u64,
) -> Result<Option<u64>, Error> {
    let sector = SECTOR_BYTES as u64;
    let mut chunk = vec![0u8; FILL_CHUNK_BYTES];
    let mut at = header.file_bytes();
    while at < len {
        let n = (len - at).min(chunk.len() as u64) as usize;
        file.read_at(&mut chunk[..n], at)
            .map_err(|e| io_error("read", path, e))?;
        for start in (0..n).step_by(SECTOR_BYTES) {
            if chunk[start..n].len() < 4 || u32_at(&chunk, start) != crate::frame::MAGIC {
                continue;
            }
            let offset = at + start as u64;
            let Ok(head) = crate::frame::read_header(&chunk[start..n.min(start + 64)]) else {
                continue;
            };
            let frame_len = u64::from(head.frame_len);
            if offset + frame_len > len {
                continue;
            }
            let mut bytes = vec![0u8; frame_len as usize];
            file.read_at(&mut bytes, offset)
                .map_err(|e| io_error("read", path, e))?;
            if crate::frame::decode(&bytes).is_ok() {
                return Ok(Some(offset));
            }
        }
        at += (n as u64).div_ceil(sector) * sector;
    }
    Ok(None)
}

/// The header slot at file offset `offset`, decoded (`Ok(Err)`: not a valid header).
fn decode_at(
    file: &dyn IoFile,
    path: &Path,
    offset: u64,
    len: u64,
) -> Result<Result<LogHeader, String>, Error> {
    let mut bytes = [0u8; 52];
    if len < offset + bytes.len() as u64 {
        return Ok(Err(format!(
            "log file is {len} bytes, too short for a header"
        )));
    }
    file.read_at(&mut bytes, offset)
        .map_err(|e| io_error("read", path, e))?;
    Ok(LogHeader::decode(&bytes))
}
