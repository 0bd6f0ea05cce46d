//! Reading the ring space of an open log a bounded piece at a time, for recovery.
//!
//! The ring is as large as the log's capacity (256 MiB by default in pure-serve) while the
//! records it holds are often a few MB: recovery must never hold the ring in memory, or the
//! process's resident memory would be the log's size rather than the state's. So frames are
//! read one at a time, and the scans over free space (see `recovery.rs`) go through a window of
//! `CHUNK_BYTES`. A frame may be larger than the window (up to half the ring): its CRC is
//! checked by streaming before its bytes are held, so that a damaged header claiming a huge
//! length never makes recovery allocate that much.

use std::cell::RefCell;
use std::io;

use crate::frame::{self, Frame, FrameError, FrameHeader, HEADER_BYTES};
use crate::io::IoFile;
use crate::ring::LogHeader;

/// The window of the scans, and the largest frame read whole without a streamed CRC check.
pub const CHUNK_BYTES: usize = 1 << 20;

/// The ring space of the log file `file`, placed as its header says.
///
/// Small reads are served from a read-ahead window of `CHUNK_BYTES`, so that replaying many
/// small frames costs a read per window rather than two per frame. The window is only valid
/// while the reader's bytes do not change: recovery reads before it writes anything that
/// differs (`open` rewrites frames with the bytes they have, and zeroes headers last).
pub struct RingReader<'a> {
    file: &'a dyn IoFile,
    header: LogHeader,
    /// `CHUNK_BYTES`, except in tests that move the window boundaries across frames.
    chunk: usize,
    window: RefCell<Window>,
}

/// Bytes of the ring from ring offset `offset`.
struct Window {
    offset: u64,
    bytes: Vec<u8>,
}

/// A frame that decoded: its header and its records (decompressed).
pub struct FrameBytes {
    pub header: FrameHeader,
    records: Vec<u8>,
}

impl FrameBytes {
    /// The frame, borrowing these records.
    pub fn frame(&self) -> Frame<'_> {
        Frame {
            header: self.header,
            records: std::borrow::Cow::Borrowed(&self.records),
        }
    }
}

impl<'a> RingReader<'a> {
    pub fn new(file: &'a dyn IoFile, header: LogHeader) -> RingReader<'a> {
        RingReader::with_chunk(file, header, CHUNK_BYTES)
    }

    /// A reader whose window (and scan chunk, and the size above which a frame's CRC is
    /// streamed) is `chunk` bytes.
    pub fn with_chunk(file: &'a dyn IoFile, header: LogHeader, chunk: usize) -> RingReader<'a> {
        assert!(chunk > 0, "a window holds at least one byte");
        RingReader {
            file,
            header,
            chunk,
            window: RefCell::new(Window {
                offset: 0,
                bytes: Vec::new(),
            }),
        }
    }

    /// The header that places the ring.
    pub fn header(&self) -> &LogHeader {
        &self.header
    }

    pub fn capacity(&self) -> u64 {
        self.header.capacity
    }

    /// The bytes a scan or a copy should read at a time.
    pub fn chunk(&self) -> usize {
        self.chunk
    }

    /// Ring offset of stream `position`.
    pub fn offset(&self, position: u64) -> u64 {
        self.header.offset(position)
    }

    /// Bytes from stream `position` to the end of its lap.
    pub fn lap_rest(&self, position: u64) -> u64 {
        self.header.lap_rest(position)
    }

    /// Whether stream `position` starts a lap.
    pub fn starts_lap(&self, position: u64) -> bool {
        self.offset(position) == 0
    }

    /// Fills `bytes` from ring `offset`; the range must lie inside the ring.
    pub fn read(&self, offset: u64, bytes: &mut [u8]) -> io::Result<()> {
        let end = offset + bytes.len() as u64;
        debug_assert!(
            end <= self.header.capacity,
            "callers split reads at the end of the ring"
        );
        if bytes.len() > self.chunk {
            return self.file.read_at(bytes, self.header.ring_start() + offset);
        }
        let mut window = self.window.borrow_mut();
        if offset < window.offset || end > window.offset + window.bytes.len() as u64 {
            let n = (self.header.capacity - offset).min(self.chunk as u64) as usize;
            window.bytes.resize(n, 0);
            if let Err(e) = self
                .file
                .read_at(&mut window.bytes, self.header.ring_start() + offset)
            {
                window.bytes.clear();
                return Err(e);
            }
            window.offset = offset;
        }
        let start = (offset - window.offset) as usize;
        bytes.copy_from_slice(&window.bytes[start..start + bytes.len()]);
        Ok(())
    }

    /// The header at stream `position` (CRC not checked): what `frame::read_header` says of the
    /// bytes from there to the end of the lap.
    pub fn read_header(&self, position: u64) -> io::Result<Result<FrameHeader, FrameError>> {
        let offset = self.offset(position);
        let mut head = [0u8; HEADER_BYTES];
        let n = (self.header.capacity - offset).min(HEADER_BYTES as u64) as usize;
        self.read(offset, &mut head[..n])?;
        Ok(frame::read_header(&head[..n]))
    }

    /// The frame at stream `position`: what `frame::decode` says of the bytes from there to the
    /// end of the lap.
    pub fn read_frame(&self, position: u64) -> io::Result<Result<FrameBytes, FrameError>> {
        let header = match self.read_header(position)? {
            Ok(header) => header,
            Err(e) => return Ok(Err(e)),
        };
        let offset = self.offset(position);
        let len = u64::from(header.frame_len);
        if len > self.header.capacity - offset {
            return Ok(Err(FrameError::BadLength(header.frame_len)));
        }
        if len > self.chunk as u64 {
            if let Err(e) = self.check_crc(offset, &header)? {
                return Ok(Err(e));
            }
        }
        let mut bytes = vec![0u8; len as usize];
        self.read(offset, &mut bytes)?;
        let (header, records) = match frame::decode(&bytes) {
            Ok(frame) => (frame.header, frame.records.into_owned()),
            Err(e) => return Ok(Err(e)),
        };
        Ok(Ok(FrameBytes { header, records }))
    }

    /// Checks the CRC of the frame at ring `offset` whose header is `header`, reading it through
    /// a window (the same CRC as `frame::frame_crc`).
    fn check_crc(&self, offset: u64, header: &FrameHeader) -> io::Result<Result<(), FrameError>> {
        let mut buffer = vec![0u8; self.chunk];
        let mut head = [0u8; HEADER_BYTES];
        self.read(offset, &mut head)?;
        let mut computed = crc32c::crc32c(&head[..frame::CRC_OFFSET]);
        let end = offset + u64::from(header.frame_len);
        let mut at = offset + HEADER_BYTES as u64;
        while at < end {
            let n = (end - at).min(self.chunk as u64) as usize;
            self.read(at, &mut buffer[..n])?;
            computed = crc32c::crc32c_append(computed, &buffer[..n]);
            at += n as u64;
        }
        if computed != header.crc {
            return Ok(Err(FrameError::BadCrc {
                stored: header.crc,
                computed,
            }));
        }
        Ok(Ok(()))
    }
}
