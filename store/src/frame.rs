//! A frame: the on-disk form of one group of records, the unit that one commit writes.
//!
//! ```text
//! offset size field
//!  0     4   magic         0x3146_5250 ("PRF1" little-endian)
//!  4     2   version       1
//!  6     2   flags         bit 0 PADDED: zero bytes end the payload (see `SECTOR_BYTES`);
//!                          bit 1 COMPRESSED: the records are compressed (see `compress`)
//!  8     4   frame_len     header + payload bytes
//! 12     4   record_count  >= 1
//! 16     8   first_lsn     LSN of the first record
//! 24     8   position      absolute byte position of the frame in the log stream
//! 32     8   acked_lsn     highest LSN known durable (acknowledged) when this frame was written
//! 40     8   session       salt of the open that wrote the frame
//! 48     4   prev_crc      `crc` of the previous frame of the stream (the chain)
//! 52     4   crc           CRC32C of bytes 0..52 followed by the payload
//! 56     ..  payload       records, then, if PADDED, fewer than `SECTOR_BYTES` zero bytes
//!
//! records    := record_count x (LEB128 length, record bytes)
//! COMPRESSED := raw_len:LEB128 zlen:LEB128 zstd(records)[zlen]   raw_len: the records' length
//! ```
//!
//! All integers are little-endian. `decode` checks everything that can be checked from the
//! bytes alone and never panics; the caller checks the frame's place in the stream
//! (`position`, `prev_crc`, `first_lsn`).

/// Bytes of a frame header.
pub const HEADER_BYTES: usize = 56;
/// The frame magic ("PRF1").
pub const MAGIC: u32 = 0x3146_5250;
/// The only frame format version so far.
pub const VERSION: u16 = 1;
/// A padded frame's length is a multiple of this: a frame placed at a multiple of it is written
/// in whole device sectors, without touching its neighbours' (research note 031).
pub const SECTOR_BYTES: usize = 512;
/// The flag of a frame whose records are followed by zero bytes up to a multiple of
/// `SECTOR_BYTES`.
pub const FLAG_PADDED: u16 = 1;
/// The flag of a frame whose records are compressed with zstd.
pub const FLAG_COMPRESSED: u16 = 2;
/// The flags a frame may carry.
const FLAGS_KNOWN: u16 = FLAG_PADDED | FLAG_COMPRESSED;
/// Offset of the CRC field; the CRC covers the bytes before it and the payload after the header.
pub(crate) const CRC_OFFSET: usize = 52;

/// The fields of a frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// `FLAG_PADDED` or 0; no other bit is defined.
    pub flags: u16,
    pub frame_len: u32,
    pub record_count: u32,
    pub first_lsn: u64,
    pub position: u64,
    pub acked_lsn: u64,
    pub session: u64,
    pub prev_crc: u32,
    pub crc: u32,
}

/// A frame that decoded: its header and its payload (records still encoded).
#[derive(Clone, Debug)]
pub struct Frame<'a> {
    pub header: FrameHeader,
    /// The records (decompressed if they were compressed), without padding.
    pub records: std::borrow::Cow<'a, [u8]>,
}

/// Why bytes are not a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Fewer bytes than a header.
    Short,
    /// The header bytes are all zero: never-written (preallocated) space.
    Zeros,
    BadMagic,
    BadVersion(u16),
    BadFlags(u16),
    BadLength(u32),
    BadCrc {
        stored: u32,
        computed: u32,
    },
    BadRecords(&'static str),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Short => write!(f, "not enough room for a frame header"),
            FrameError::Zeros => write!(f, "zero-filled space"),
            FrameError::BadMagic => write!(f, "bad frame magic"),
            FrameError::BadVersion(v) => write!(f, "unknown frame version {v}"),
            FrameError::BadFlags(flags) => write!(f, "unknown frame flags {flags:#06x}"),
            FrameError::BadLength(len) => write!(f, "impossible frame length {len}"),
            FrameError::BadCrc { stored, computed } => {
                write!(
                    f,
                    "CRC mismatch (stored {stored:#010x}, computed {computed:#010x})"
                )
            }
            FrameError::BadRecords(why) => write!(f, "bad record encoding: {why}"),
        }
    }
}

/// Reads a header without checking the CRC (the CRC needs the payload).
pub fn read_header(bytes: &[u8]) -> Result<FrameHeader, FrameError> {
    let header = bytes.get(..HEADER_BYTES).ok_or(FrameError::Short)?;
    if header.iter().all(|&b| b == 0) {
        return Err(FrameError::Zeros);
    }
    if u32_at(header, 0) != MAGIC {
        return Err(FrameError::BadMagic);
    }
    let version = u16::from_le_bytes([header[4], header[5]]);
    if version != VERSION {
        return Err(FrameError::BadVersion(version));
    }
    let flags = u16::from_le_bytes([header[6], header[7]]);
    if flags & !FLAGS_KNOWN != 0 {
        return Err(FrameError::BadFlags(flags));
    }
    let parsed = FrameHeader {
        flags,
        frame_len: u32_at(header, 8),
        record_count: u32_at(header, 12),
        first_lsn: u64_at(header, 16),
        position: u64_at(header, 24),
        acked_lsn: u64_at(header, 32),
        session: u64_at(header, 40),
        prev_crc: u32_at(header, 48),
        crc: u32_at(header, CRC_OFFSET),
    };
    if (parsed.frame_len as usize) < HEADER_BYTES {
        return Err(FrameError::BadLength(parsed.frame_len));
    }
    Ok(parsed)
}

/// Decodes the frame at the start of `bytes` (which may extend past it). Never panics.
pub fn decode(bytes: &[u8]) -> Result<Frame<'_>, FrameError> {
    let header = read_header(bytes)?;
    let whole = bytes
        .get(..header.frame_len as usize)
        .ok_or(FrameError::BadLength(header.frame_len))?;
    let computed = frame_crc(whole);
    if computed != header.crc {
        return Err(FrameError::BadCrc {
            stored: header.crc,
            computed,
        });
    }
    let payload = &whole[HEADER_BYTES..];
    let (records, rest) = match header.flags & FLAG_COMPRESSED != 0 {
        true => {
            let (records, rest) = decompress(payload)?;
            if !walk_records(&records, header.record_count)?.is_empty() {
                return Err(FrameError::BadRecords(
                    "record count does not match the payload",
                ));
            }
            (std::borrow::Cow::Owned(records), rest)
        }
        false => {
            let rest = walk_records(payload, header.record_count)?;
            let records = &payload[..payload.len() - rest.len()];
            (std::borrow::Cow::Borrowed(records), rest)
        }
    };
    check_padding(&header, rest)?;
    Ok(Frame { header, records })
}

/// The CRC of a whole frame (header with its CRC field skipped, then the payload).
pub fn frame_crc(whole: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&whole[..CRC_OFFSET]);
    crc32c::crc32c_append(crc, &whole[HEADER_BYTES..])
}

/// Walks exactly `count` well-formed records from the start of `bytes`; returns what follows.
fn walk_records(bytes: &[u8], count: u32) -> Result<&[u8], FrameError> {
    if count == 0 {
        return Err(FrameError::BadRecords("a frame holds at least one record"));
    }
    let mut records = Records { rest: bytes };
    for _ in 0..count {
        match records.next_record() {
            Some(record) => record?,
            None => {
                return Err(FrameError::BadRecords(
                    "record count does not match the payload",
                ))
            }
        };
    }
    Ok(records.rest)
}

/// What may follow a frame's records: nothing, or in a padded frame only its padding: zeros,
/// fewer than a sector, ending the frame at a multiple of `SECTOR_BYTES`.
fn check_padding(header: &FrameHeader, rest: &[u8]) -> Result<(), FrameError> {
    if header.flags & FLAG_PADDED == 0 {
        if !rest.is_empty() {
            return Err(FrameError::BadRecords(
                "record count does not match the payload",
            ));
        }
        return Ok(());
    }
    if rest.len() >= SECTOR_BYTES || rest.iter().any(|&b| b != 0) {
        return Err(FrameError::BadRecords(
            "padding that is not zeros within a sector",
        ));
    }
    if header.frame_len as usize % SECTOR_BYTES != 0 {
        return Err(FrameError::BadRecords(
            "a padded frame that ends inside a sector",
        ));
    }
    Ok(())
}

/// zstd's level for frames: its fastest but one; a TPC-C group of about 2.7 KB of records
/// takes 0.59 of its bytes (research note 031).
const ZSTD_LEVEL: i32 = 1;

/// A compression context for `compress`, to keep from one frame to the next.
pub fn compressor() -> zstd::bulk::Compressor<'static> {
    zstd::bulk::Compressor::new(ZSTD_LEVEL).expect("zstd takes its own level")
}

/// Appends `records` (a frame's records, encoded) to `out` in the COMPRESSED form. False, with
/// `out` as it was, where that would not save at least a sixteenth of their bytes.
pub fn compress(
    compressor: &mut zstd::bulk::Compressor<'static>,
    records: &[u8],
    out: &mut Vec<u8>,
) -> bool {
    let start = out.len();
    let room = records.len() - records.len() / 16;
    // The two lengths go before the compressed bytes, once the second is known: room for the
    // longest two varints, then moved down.
    let at = start + 20;
    out.resize(at + room, 0);
    let Ok(zlen) = compressor.compress_to_buffer(records, &mut out[at..]) else {
        out.truncate(start);
        return false;
    };
    let mut head = Vec::with_capacity(20);
    write_varint(&mut head, records.len() as u64);
    write_varint(&mut head, zlen as u64);
    if head.len() + zlen >= room {
        out.truncate(start);
        return false;
    }
    out.copy_within(at..at + zlen, start + head.len());
    out[start..start + head.len()].copy_from_slice(&head);
    out.truncate(start + head.len() + zlen);
    true
}

/// The records of a COMPRESSED payload, and what follows them (the padding).
fn decompress(payload: &[u8]) -> Result<(Vec<u8>, &[u8]), FrameError> {
    let (raw_len, used) = read_varint(payload)?;
    let rest = &payload[used..];
    let (zlen, used) = read_varint(rest)?;
    let rest = &rest[used..];
    let zlen = usize::try_from(zlen).map_err(|_| FrameError::BadRecords("length overflow"))?;
    if zlen > rest.len() {
        return Err(FrameError::BadRecords(
            "compressed records run past the frame",
        ));
    }
    let (compressed, rest) = rest.split_at(zlen);
    // Read as they come, never more than `raw_len` and one byte: a length that lies takes no
    // memory beyond what the compressed bytes really hold.
    let mut records = Vec::new();
    let decoder = zstd::stream::read::Decoder::with_buffer(compressed)
        .map_err(|_| FrameError::BadRecords("compressed records that do not decompress"))?;
    std::io::Read::read_to_end(
        &mut std::io::Read::take(decoder, raw_len.saturating_add(1)),
        &mut records,
    )
    .map_err(|_| FrameError::BadRecords("compressed records that do not decompress"))?;
    if records.len() as u64 != raw_len {
        return Err(FrameError::BadRecords(
            "compressed records of another length than the frame says",
        ));
    }
    Ok((records, rest))
}

impl Frame<'_> {
    /// The records of the frame, in order.
    pub fn records(&self) -> impl Iterator<Item = &[u8]> {
        let mut records = Records {
            rest: &self.records,
        };
        // `decode` already walked them, so every record is well-formed.
        std::iter::from_fn(move || records.next_record().and_then(Result::ok))
    }
}

/// Zero bytes that make a frame of `len` bytes a whole number of sectors.
pub fn padding_for(len: usize) -> usize {
    len.next_multiple_of(SECTOR_BYTES) - len
}

/// Walks the payload's (length, bytes) pairs.
struct Records<'a> {
    rest: &'a [u8],
}

impl<'a> Records<'a> {
    fn next_record(&mut self) -> Option<Result<&'a [u8], FrameError>> {
        if self.rest.is_empty() {
            return None;
        }
        Some(self.take_record())
    }

    fn take_record(&mut self) -> Result<&'a [u8], FrameError> {
        let (len, used) = read_varint(self.rest)?;
        let rest = &self.rest[used..];
        let len = usize::try_from(len).map_err(|_| FrameError::BadRecords("length overflow"))?;
        if len > rest.len() {
            self.rest = &[];
            return Err(FrameError::BadRecords("record runs past the frame"));
        }
        let (record, rest) = rest.split_at(len);
        self.rest = rest;
        Ok(record)
    }
}

/// Appends `value` as LEB128.
pub fn write_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Reads a LEB128 value of at most 10 bytes: (value, bytes used).
fn read_varint(bytes: &[u8]) -> Result<(u64, usize), FrameError> {
    let mut value = 0u64;
    for (i, &byte) in bytes.iter().enumerate().take(10) {
        let bits = u64::from(byte & 0x7f);
        if i == 9 && byte > 1 {
            return Err(FrameError::BadRecords("length varint overflows 64 bits"));
        }
        value |= bits << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    Err(FrameError::BadRecords("unterminated length varint"))
}

/// Fills in the header of a frame whose payload (and padding, if `header.flags` says so) is
/// already in `frame[HEADER_BYTES..]`, and returns its CRC. `header.crc` and `header.frame_len`
/// are computed here.
pub fn seal(frame: &mut [u8], header: &FrameHeader) -> u32 {
    let frame_len = u32::try_from(frame.len()).expect("the store caps frames below 4 GiB");
    // What `decode` refuses as damage must never be written: no header without room, no
    // frame without records, no LSN 0 (it means "no record").
    assert!(
        frame.len() >= HEADER_BYTES && header.record_count >= 1 && header.first_lsn >= 1,
        "a sealed frame holds its header and at least one record, from LSN 1 on"
    );
    assert!(
        header.flags & FLAG_PADDED == 0 || frame.len() % SECTOR_BYTES == 0,
        "a padded frame is whole sectors"
    );
    assert_eq!(
        header.flags & !FLAGS_KNOWN,
        0,
        "a frame carries only known flags"
    );
    let h = &mut frame[..HEADER_BYTES];
    h[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    h[4..6].copy_from_slice(&VERSION.to_le_bytes());
    h[6..8].copy_from_slice(&header.flags.to_le_bytes());
    h[8..12].copy_from_slice(&frame_len.to_le_bytes());
    h[12..16].copy_from_slice(&header.record_count.to_le_bytes());
    h[16..24].copy_from_slice(&header.first_lsn.to_le_bytes());
    h[24..32].copy_from_slice(&header.position.to_le_bytes());
    h[32..40].copy_from_slice(&header.acked_lsn.to_le_bytes());
    h[40..48].copy_from_slice(&header.session.to_le_bytes());
    h[48..52].copy_from_slice(&header.prev_crc.to_le_bytes());
    let crc = frame_crc(frame);
    frame[CRC_OFFSET..HEADER_BYTES].copy_from_slice(&crc.to_le_bytes());
    crc
}

pub(crate) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4-byte slice"))
}

pub(crate) fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8-byte slice"))
}
