//! The log file: a header block followed by `capacity` bytes of preallocated, zero-filled space
//! used as a ring. Frames are addressed by their absolute position in the (endless) log stream;
//! the byte of stream position `p` lives at file offset `HEADER_AREA_BYTES + p % capacity`.
//!
//! ```text
//! log header (first 4096 bytes of the file; the rest of the block is zero)
//! offset size field
//!  0     8   magic     "PURELOG\0"
//!  8     4   version   2 (1: frames are never padded)
//! 12     4   reserved  0
//! 16     8   capacity  bytes of ring space after the header block
//! 24     8   log_id    random; its low 32 bits are the chain value before the first frame
//! 32     4   crc       CRC32C of bytes 0..32
//! ```
//!
//! A frame never straddles the end of the ring: when it does not fit in the rest of the lap,
//! the writer leaves that rest unused and puts the frame at the start of the next lap (the
//! reader, finding no valid successor at the expected position, tries the next lap start).

use std::path::Path;

use crate::error::{io_error, Error};
use crate::frame::{u32_at, u64_at, SECTOR_BYTES};
use crate::io::{Io, IoFile};

/// Bytes before the ring space: one 4 KiB block, so ring writes never touch the header's block.
pub const HEADER_AREA_BYTES: u64 = 4096;
const MAGIC: &[u8; 8] = b"PURELOG\0";
/// The version of the logs this store creates: their frames may be padded to whole sectors
/// (`frame::FLAG_PADDED`). A version-1 log, made before frames were padded, is read and
/// written as it was, so that the binary that made it can still open it.
const VERSION: u32 = 2;
/// The smallest ring the store accepts.
pub const MIN_CAPACITY_BYTES: u64 = 4096;
/// Zero-fill chunk at creation: large enough to be quick, small enough not to matter in memory.
const FILL_CHUNK_BYTES: usize = 1 << 20;

/// What the log header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogHeader {
    pub capacity: u64,
    pub log_id: u64,
    /// Frames are padded to whole sectors: a log of this version whose capacity is whole
    /// sectors (so that every lap starts a sector).
    pub padded: bool,
}

impl LogHeader {
    /// The chain value that the first frame of the log carries as `prev_crc`.
    pub fn genesis_crc(&self) -> u32 {
        self.log_id as u32
    }

    /// The header of a new log.
    pub fn new(capacity: u64, log_id: u64) -> LogHeader {
        LogHeader {
            capacity,
            log_id,
            padded: capacity % SECTOR_BYTES as u64 == 0,
        }
    }

    fn encode(&self) -> [u8; 36] {
        let mut bytes = [0u8; 36];
        bytes[0..8].copy_from_slice(MAGIC);
        let version = match self.padded {
            true => VERSION,
            false => 1,
        };
        bytes[8..12].copy_from_slice(&version.to_le_bytes());
        bytes[16..24].copy_from_slice(&self.capacity.to_le_bytes());
        bytes[24..32].copy_from_slice(&self.log_id.to_le_bytes());
        let crc = crc32c::crc32c(&bytes[0..32]);
        bytes[32..36].copy_from_slice(&crc.to_le_bytes());
        bytes
    }

    /// Parses and checks a log header; `Err` says what is wrong.
    pub fn decode(bytes: &[u8; 36]) -> Result<LogHeader, String> {
        if &bytes[0..8] != MAGIC {
            return Err("bad log magic".into());
        }
        if crc32c::crc32c(&bytes[0..32]) != u32_at(bytes, 32) {
            return Err("log header CRC mismatch".into());
        }
        let version = u32_at(bytes, 8);
        if version != 1 && version != VERSION {
            return Err(format!("unknown log version {version}"));
        }
        let capacity = u64_at(bytes, 16);
        if capacity < MIN_CAPACITY_BYTES {
            return Err(format!("impossible log capacity {capacity}"));
        }
        let padded = version == VERSION && capacity % SECTOR_BYTES as u64 == 0;
        if version == VERSION && !padded {
            return Err(format!(
                "a version-{VERSION} log of {capacity} bytes, not whole sectors"
            ));
        }
        Ok(LogHeader {
            capacity,
            log_id: u64_at(bytes, 24),
            padded,
        })
    }
}

/// File offset of stream position `position`.
pub fn file_offset(position: u64, capacity: u64) -> u64 {
    HEADER_AREA_BYTES + position % capacity
}

/// Where a frame of `frame_len` bytes goes when the stream ends at `end`: at `end` if it fits
/// in the rest of the lap, else at the start of the next lap.
pub fn place(end: u64, frame_len: u64, capacity: u64) -> u64 {
    // A frame is at most half the ring (`Store::frame_bytes_max`): it fits a whole lap.
    assert!(frame_len <= capacity, "a frame fits in one lap of the ring");
    let lap_rest = capacity - end % capacity;
    let position = if frame_len <= lap_rest {
        end
    } else {
        end + lap_rest
    };
    // What the reader relies on: it looks for a frame only here or at the next lap start.
    assert!(
        position % capacity + frame_len <= capacity,
        "a frame never straddles the end of the ring"
    );
    position
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
    fill_zeros(file, path, HEADER_AREA_BYTES + header.capacity)?;
    file.write_at(&header.encode(), 0)
        .map_err(|e| io_error("write", path, e))?;
    file.sync_data().map_err(|e| io_error("fdatasync", path, e))
}

/// Writes zeros over `[0, len)`: real blocks, not holes or unwritten extents, so that later
/// syncs of this space are overwrites without allocation.
fn fill_zeros(file: &dyn IoFile, path: &Path, len: u64) -> Result<(), Error> {
    let zeros = vec![0u8; FILL_CHUNK_BYTES];
    let mut offset = 0u64;
    while offset < len {
        let n = (len - offset).min(FILL_CHUNK_BYTES as u64) as usize;
        file.write_at(&zeros[..n], offset)
            .map_err(|e| io_error("preallocate", path, e))?;
        offset += n as u64;
    }
    Ok(())
}

/// Reads and checks the header of an existing log.
pub fn read_header(file: &dyn IoFile, path: &Path) -> Result<LogHeader, Error> {
    let mut bytes = [0u8; 36];
    file.read_at(&mut bytes, 0)
        .map_err(|e| io_error("read", path, e))?;
    let header = LogHeader::decode(&bytes).map_err(|reason| Error::Corrupt {
        path: path.to_path_buf(),
        position: 0,
        reason,
    })?;
    let len = file.size_bytes().map_err(|e| io_error("stat", path, e))?;
    if len < HEADER_AREA_BYTES + header.capacity {
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            position: len,
            reason: format!("log file is {len} bytes, shorter than its header says"),
        });
    }
    Ok(header)
}
