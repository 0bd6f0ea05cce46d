//! Checkpoints: a full image of the caller's state as of an LSN, in its own file, written under
//! a temporary name on any thread, synced, renamed into place and made durable by a directory
//! sync. Only then may the log space before it be reused (`Store::install_checkpoint`).
//!
//! ```text
//! checkpoint-<covered LSN, 20 digits>.ckpt
//! offset size field
//!  0     8   magic             "PURECKPT"
//!  8     4   version           1
//! 12     4   reserved          0
//! 16     8   covered_lsn       the last record the image holds
//! 24     8   replay_position   stream position of the first frame to replay
//! 32     8   replay_first_lsn  LSN of that frame's first record
//! 40     4   replay_prev_crc   the chain value that frame carries
//! 44     4   reserved          0
//! 48     8   log_id            the log this checkpoint belongs to
//! 56     4   header_crc        CRC32C of bytes 0..56
//! 60     4   reserved          0
//! 64     n   image             the caller's bytes
//! 64+n   8   image_len         n
//! 72+n   4   crc               CRC32C of bytes 0..72+n (header, image, image_len)
//! 76+n   4   end magic         "CKND"
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{io_error, Error};
use crate::frame::{u32_at, u64_at};
use crate::io::{Io, IoFile, Mapping};
use crate::recovery::ChainState;
use crate::Lsn;

const MAGIC: &[u8; 8] = b"PURECKPT";
const END_MAGIC: &[u8; 4] = b"CKND";
const VERSION: u32 = 1;
pub(crate) const HEADER_BYTES: usize = 64;
const TRAILER_BYTES: usize = 16;
/// Writes are gathered into chunks of this size: few large writes instead of many small ones.
const WRITE_CHUNK_BYTES: usize = 256 << 10;

/// The file name of the checkpoint covering `lsn` (zero-padded so names sort by LSN).
pub(crate) fn file_name(lsn: Lsn) -> String {
    format!("checkpoint-{:020}.ckpt", lsn.0)
}

/// A temporary name unique to one writer, so that two writers (even for the same LSN) never
/// write into the same file.
fn tmp_name(lsn: Lsn, salt: u64) -> String {
    format!("checkpoint-{:020}-{salt:016x}.tmp", lsn.0)
}

/// The covered LSN of a checkpoint file name, if it is one.
pub(crate) fn parse_name(name: &str) -> Option<Lsn> {
    let digits = name.strip_prefix("checkpoint-")?.strip_suffix(".ckpt")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(Lsn)
}

/// Whether a directory entry is a leftover temporary file (removed at open).
pub(crate) fn is_tmp_name(name: &str) -> bool {
    name.starts_with("checkpoint-") && name.ends_with(".tmp")
}

/// The header fields of a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CheckpointHeader {
    pub covered_lsn: u64,
    pub replay: ChainState,
    pub log_id: u64,
}

impl CheckpointHeader {
    fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[0..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[16..24].copy_from_slice(&self.covered_lsn.to_le_bytes());
        b[24..32].copy_from_slice(&self.replay.position.to_le_bytes());
        b[32..40].copy_from_slice(&self.replay.next_lsn.to_le_bytes());
        b[40..44].copy_from_slice(&self.replay.prev_crc.to_le_bytes());
        b[48..56].copy_from_slice(&self.log_id.to_le_bytes());
        let crc = crc32c::crc32c(&b[0..56]);
        b[56..60].copy_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Result<CheckpointHeader, String> {
        let b = b
            .get(..HEADER_BYTES)
            .ok_or("file shorter than a checkpoint header")?;
        if &b[0..8] != MAGIC {
            return Err("bad checkpoint magic".into());
        }
        if crc32c::crc32c(&b[0..56]) != u32_at(b, 56) {
            return Err("checkpoint header CRC mismatch".into());
        }
        if u32_at(b, 8) != VERSION {
            return Err(format!("unknown checkpoint version {}", u32_at(b, 8)));
        }
        let replay = ChainState {
            position: u64_at(b, 24),
            next_lsn: u64_at(b, 32),
            prev_crc: u32_at(b, 40),
        };
        Ok(CheckpointHeader {
            covered_lsn: u64_at(b, 16),
            replay,
            log_id: u64_at(b, 48),
        })
    }
}

/// A checkpoint image found at open: the state as of `lsn`, to be decoded by the caller.
pub struct CheckpointImage {
    mapping: Mapping,
    lsn: Lsn,
    image_len: usize,
}

impl CheckpointImage {
    /// The last record this image covers.
    pub fn lsn(&self) -> Lsn {
        self.lsn
    }
    /// The image bytes exactly as they were written (memory-mapped for a real file).
    pub fn bytes(&self) -> &[u8] {
        &self.mapping[HEADER_BYTES..HEADER_BYTES + self.image_len]
    }
}

/// Maps and fully checks the checkpoint at `path`: its image and its header.
pub(crate) fn load(io: &dyn Io, path: &Path) -> Result<(CheckpointImage, CheckpointHeader), Error> {
    let mapping = io.map_file(path).map_err(|e| io_error("map", path, e))?;
    let corrupt = |position: u64, reason: String| Error::Corrupt {
        path: path.to_path_buf(),
        position,
        reason,
    };
    let header = CheckpointHeader::decode(&mapping).map_err(|r| corrupt(0, r))?;
    let image_len = check_trailer(&mapping).map_err(|(at, r)| corrupt(at, r))?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_name);
    if name != Some(Lsn(header.covered_lsn)) {
        return Err(corrupt(
            16,
            "covered LSN does not match the file name".into(),
        ));
    }
    let image = CheckpointImage {
        mapping,
        lsn: Lsn(header.covered_lsn),
        image_len,
    };
    Ok((image, header))
}

/// Checks the trailer and the whole-file CRC; returns the image length.
fn check_trailer(bytes: &[u8]) -> Result<usize, (u64, String)> {
    let len = bytes.len();
    if len < HEADER_BYTES + TRAILER_BYTES {
        return Err((len as u64, "file too short for a checkpoint".into()));
    }
    let trailer = &bytes[len - TRAILER_BYTES..];
    let at = (len - TRAILER_BYTES) as u64;
    if &trailer[12..16] != END_MAGIC {
        return Err((at + 12, "bad checkpoint end magic".into()));
    }
    let image_len = u64_at(trailer, 0);
    if image_len != (len - HEADER_BYTES - TRAILER_BYTES) as u64 {
        return Err((
            at,
            format!("image length {image_len} does not match the file size"),
        ));
    }
    let computed = crc32c::crc32c(&bytes[..len - 8]);
    if computed != u32_at(trailer, 8) {
        return Err((at + 8, "checkpoint CRC mismatch".into()));
    }
    Ok(image_len as usize)
}

/// Streams a checkpoint image into its temporary file. `Send` and independent of the `Store`,
/// so it runs on a background thread while the store keeps committing.
pub struct CheckpointWriter {
    io: Arc<dyn Io>,
    dir: PathBuf,
    tmp_path: PathBuf,
    final_path: PathBuf,
    file: Box<dyn IoFile>,
    lsn: Lsn,
    replay_position: u64,
    buffer: Vec<u8>,
    offset: u64,
    image_len: u64,
    crc: u32,
    failed: Option<String>,
}

impl CheckpointWriter {
    pub(crate) fn create(
        io: Arc<dyn Io>,
        dir: &Path,
        header: CheckpointHeader,
    ) -> Result<CheckpointWriter, Error> {
        let lsn = Lsn(header.covered_lsn);
        let tmp_path = dir.join(tmp_name(lsn, io.session_salt()));
        let file = io
            .create_file(&tmp_path)
            .map_err(|e| io_error("create", &tmp_path, e))?;
        let head = header.encode();
        let mut buffer = Vec::with_capacity(WRITE_CHUNK_BYTES);
        buffer.extend_from_slice(&head);
        Ok(CheckpointWriter {
            final_path: dir.join(file_name(lsn)),
            dir: dir.to_path_buf(),
            tmp_path,
            file,
            lsn,
            replay_position: header.replay.position,
            crc: crc32c::crc32c(&head),
            io,
            buffer,
            offset: 0,
            image_len: 0,
            failed: None,
        })
    }

    fn flush_buffer(&mut self) -> std::io::Result<()> {
        if let Some(why) = &self.failed {
            return Err(std::io::Error::other(why.clone()));
        }
        if let Err(e) = self.file.write_at(&self.buffer, self.offset) {
            self.failed = Some(e.to_string());
            return Err(e);
        }
        self.offset += self.buffer.len() as u64;
        self.buffer.clear();
        Ok(())
    }

    /// Writes the trailer, syncs the file, renames it into place and syncs the directory.
    /// On failure the temporary file is removed (best effort) and nothing is installed; the
    /// previous checkpoint and the log stay as they were.
    pub fn finish(mut self) -> Result<CheckpointDone, Error> {
        let result = self.complete();
        if result.is_err() {
            // Best effort: a leftover temporary file is also removed at the next open.
            let _ = self.io.remove_file(&self.tmp_path);
        }
        result
    }

    fn complete(&mut self) -> Result<CheckpointDone, Error> {
        let mut trailer = [0u8; TRAILER_BYTES];
        trailer[0..8].copy_from_slice(&self.image_len.to_le_bytes());
        let crc = crc32c::crc32c_append(self.crc, &trailer[0..8]);
        trailer[8..12].copy_from_slice(&crc.to_le_bytes());
        trailer[12..16].copy_from_slice(END_MAGIC);
        self.buffer.extend_from_slice(&trailer);
        let path = self.tmp_path.clone();
        self.flush_buffer()
            .map_err(|e| io_error("write", &path, e))?;
        self.file
            .sync_data()
            .map_err(|e| io_error("fdatasync", &path, e))?;
        self.io
            .rename(&path, &self.final_path)
            .map_err(|e| io_error("rename", &path, e))?;
        self.io
            .sync_dir(&self.dir)
            .map_err(|e| io_error("sync directory", &self.dir, e))?;
        Ok(CheckpointDone {
            lsn: self.lsn,
            image_bytes: self.image_len,
            replay_position: self.replay_position,
        })
    }
}

impl Write for CheckpointWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(why) = &self.failed {
            return Err(std::io::Error::other(why.clone()));
        }
        self.crc = crc32c::crc32c_append(self.crc, buf);
        self.buffer.extend_from_slice(buf);
        self.image_len += buf.len() as u64;
        if self.buffer.len() >= WRITE_CHUNK_BYTES {
            self.flush_buffer()?;
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        // Durability comes from `finish`; buffered bytes go out with the next chunk.
        Ok(())
    }
}

/// Proof that a checkpoint is durable and installed in the directory.
pub struct CheckpointDone {
    pub lsn: Lsn,
    pub image_bytes: u64,
    /// Stream position of the first frame after the checkpoint: log space before it is free
    /// once this is installed.
    pub(crate) replay_position: u64,
}
