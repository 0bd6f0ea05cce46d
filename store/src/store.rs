//! The `Store`: appends records, commits them as one frame per group (one write, one
//! `fdatasync`), hands out checkpoint writers, installs finished checkpoints to free log space.
//! Opening it runs recovery (`open.rs`).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::checkpoint::{self, CheckpointDone, CheckpointHeader, CheckpointWriter};
use crate::error::{io_error, Error};
use crate::frame::{self, FrameHeader, HEADER_BYTES};
use crate::io::{DirLock, Io, IoFile};
use crate::recovery::{ChainState, FrameMark};
use crate::ring::LogHeader;
use crate::{Lsn, SyncMode};

/// The durable record log of one directory. Owned by one thread (the syncer); not `Sync`
/// by design of its `&mut self` API.
///
/// Invariants (asserted where `append`, `commit` and `install_checkpoint` could break them):
/// - LSNs only rise: each commit of records raises `committed_lsn` by exactly the records it
///   writes, and once it returns every one of them is durable (`durable_lsn() ==
///   committed_lsn`): under `Always` synced, under `None` written.
/// - `checkpoint_lsn <= committed_lsn` and `synced_lsn <= committed_lsn`.
/// - `tail <= end` and `end - tail <= capacity`: no frame overwrites log space that the
///   installed checkpoint still needs.
/// - `capacity <= capacity_max`; the capacity only grows, and a growth keeps the ring offset of
///   every position in `[tail, end)` (`LogHeader::grown`).
/// - `pending` is a frame header's room followed by `pending_count` records, and never grows
///   past `frame_bytes_max`, so a commit always writes one frame that fits the ring.
/// - `marks` rise in position and in first LSN, all at or after `tail`.
/// - `poison`, once set, is never cleared.
pub struct Store {
    pub(crate) io: Arc<dyn Io>,
    /// The directory's exclusive lock, released when the store is dropped.
    pub(crate) lock: DirLock,
    pub(crate) dir: PathBuf,
    pub(crate) log_path: PathBuf,
    pub(crate) log: Box<dyn IoFile>,
    pub(crate) log_id: u64,
    pub(crate) sync: SyncMode,
    /// Where each stream position lives in the file: the ring's capacity and base, and whether
    /// frames are padded to whole sectors (`frame::SECTOR_BYTES`), so that each starts a
    /// sector and one commit writes only its own sectors: the log is then written without the
    /// page cache where the file system allows (`Io::open_log`), and a group of a few records
    /// costs its bytes on the device, not a page rewritten for each group (research note 031).
    /// A padded log also compresses a frame's records where that saves bytes
    /// (`frame::compress`). A ring whose capacity is not whole sectors keeps frames unpadded.
    pub(crate) header: LogHeader,
    /// The largest capacity the log may grow to (its capacity, for a log that cannot grow).
    pub(crate) capacity_max: u64,
    pub(crate) compressor: zstd::bulk::Compressor<'static>,
    /// The frame being written when its records are compressed.
    pub(crate) compressed: Vec<u8>,
    /// Salt written into every frame of this open, so that a frame rewritten after a crash
    /// never has the bytes (and CRC) of the frame it replaces: the chain then rejects the
    /// pre-crash successors of the old one (no ghosts).
    pub(crate) session: u64,
    /// Stream position where the next frame goes (before lap skipping) and the chain value.
    pub(crate) end: u64,
    pub(crate) prev_crc: u32,
    /// Oldest stream position still needed (the replay start of the installed checkpoint).
    pub(crate) tail: u64,
    pub(crate) checkpoint_lsn: u64,
    /// Last LSN written in a frame, and last LSN known to be on stable storage.
    pub(crate) committed_lsn: u64,
    pub(crate) synced_lsn: u64,
    /// Start of every frame since `tail`, oldest first: where replay after a checkpoint starts.
    pub(crate) marks: VecDeque<FrameMark>,
    /// The next frame being built: header space, then the appended records.
    pub(crate) pending: Vec<u8>,
    pub(crate) pending_count: u32,
    pub(crate) poison: Option<String>,
    /// A growth's fill is out (handed out by `prepare_growth`, not yet run to its end): no
    /// other is handed out meanwhile, so that a fill never writes zeros into a ring that grew
    /// after it was prepared.
    pub(crate) fill_out: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Store {
    /// Opens (creating if absent) the store in `dir` on the real file system, and recovers.
    pub fn open(dir: &Path, options: crate::StoreOptions) -> Result<crate::Recovered, Error> {
        Self::open_with(Arc::new(crate::RealIo), dir, options)
    }

    /// The same through a given I/O layer.
    pub fn open_with(
        io: Arc<dyn Io>,
        dir: &Path,
        options: crate::StoreOptions,
    ) -> Result<crate::Recovered, Error> {
        crate::open::open(io, dir, options)
    }

    /// The largest frame: half the ring, so that a frame always fits once the ring is free,
    /// even when it has to skip to the next lap.
    fn frame_bytes_max(&self) -> u64 {
        frame_bytes_max(self.header.capacity)
    }

    /// Room kept in the largest frame for the padding that `commit` adds.
    pub(crate) fn padding_max(&self) -> u64 {
        match self.header.padded {
            true => frame::SECTOR_BYTES as u64 - 1,
            false => 0,
        }
    }

    /// Buffers one record for the next commit; returns its LSN. Nothing is written yet.
    ///
    /// `RecordTooLarge` if the record can never fit in a frame; `LogFull` (nothing buffered)
    /// if the pending group has no room left for it: commit first.
    pub fn append(&mut self, record: &[u8]) -> Result<Lsn, Error> {
        self.check_poison()?;
        let encoded = record.len() as u64 + 10;
        // Up to the largest frame of the largest ring: a commit of a frame larger than this
        // ring's is `LogFull` until the log grows (`capacity_needed`).
        let max = frame_bytes_max(self.capacity_max) - self.padding_max();
        if encoded + HEADER_BYTES as u64 > max {
            return Err(Error::RecordTooLarge {
                bytes: record.len() as u64,
                max_bytes: max - HEADER_BYTES as u64 - 10,
            });
        }
        if self.pending.len() as u64 + encoded > max || self.pending_count == u32::MAX {
            return Err(Error::LogFull {
                needed_bytes: self.pending.len() as u64 + encoded,
                free_bytes: self.free_bytes(),
            });
        }
        frame::write_varint(&mut self.pending, record.len() as u64);
        self.pending.extend_from_slice(record);
        self.pending_count += 1;
        // The half of the pair that `commit` checks before it writes: the frame fits.
        assert!(
            self.pending.len() as u64 <= max,
            "append keeps the pending frame within the largest frame"
        );
        Ok(Lsn(self.committed_lsn + u64::from(self.pending_count)))
    }

    /// Writes every appended record as one group (one write, one fdatasync under `Always`)
    /// and returns the highest durable LSN. A failure poisons the store; `LogFull` does not
    /// (the records stay pending; commit again after a checkpoint is installed).
    pub fn commit(&mut self) -> Result<Lsn, Error> {
        self.check_poison()?;
        if self.pending_count == 0 {
            return Ok(self.durable_lsn());
        }
        let unpadded = self.pending.len();
        let compressed = self.header.padded && {
            self.compressed.clear();
            self.compressed.resize(HEADER_BYTES, 0);
            frame::compress(
                &mut self.compressor,
                &self.pending[HEADER_BYTES..],
                &mut self.compressed,
            )
        };
        // From here `pending` is the frame written: its records as they are, or compressed
        // (the records themselves kept in `compressed`, for a full log to leave them pending).
        if compressed {
            std::mem::swap(&mut self.pending, &mut self.compressed);
        }
        if self.header.padded {
            let len = self.pending.len();
            self.pending.resize(len + frame::padding_for(len), 0);
        }
        let frame_len = self.pending.len() as u64;
        assert!(
            frame_len <= frame_bytes_max(self.capacity_max),
            "append never lets the pending frame grow past the largest frame"
        );
        let durable_before = self.durable_lsn();
        let too_large = frame_len > self.frame_bytes_max();
        let position = match too_large {
            true => self.end,
            false => self.header.place(self.end, frame_len),
        };
        let new_end = position + frame_len;
        if too_large || new_end - self.tail > self.header.capacity {
            let needed_bytes = new_end - self.end;
            // The records stay pending as they were: the next commit frames them again.
            if compressed {
                std::mem::swap(&mut self.pending, &mut self.compressed);
            }
            self.pending.truncate(unpadded);
            return Err(Error::LogFull {
                needed_bytes,
                free_bytes: self.free_bytes(),
            });
        }
        let first_lsn = self.committed_lsn + 1;
        let mut flags = 0;
        if self.header.padded {
            flags |= frame::FLAG_PADDED;
        }
        if compressed {
            flags |= frame::FLAG_COMPRESSED;
        }
        let header = FrameHeader {
            flags,
            frame_len: 0,
            record_count: self.pending_count,
            first_lsn,
            position,
            acked_lsn: self.synced_lsn,
            session: self.session,
            prev_crc: self.prev_crc,
            crc: 0,
        };
        let crc = frame::seal(&mut self.pending, &header);
        let offset = self.header.file_offset(position);
        if let Err(e) = self.log.write_at(&self.pending, offset) {
            return Err(self.poison("write", e));
        }
        if self.sync == SyncMode::Always {
            if let Err(e) = self.log.sync_data() {
                return Err(self.poison("fdatasync", e));
            }
        }
        assert!(
            self.marks
                .back()
                .is_none_or(|m| m.position < position && m.first_lsn < first_lsn),
            "frames are marked in the order of the stream and of their LSNs"
        );
        self.marks.push_back(FrameMark {
            first_lsn,
            position,
            prev_crc: self.prev_crc,
        });
        self.prev_crc = crc;
        self.end = new_end;
        self.committed_lsn += u64::from(self.pending_count);
        if self.sync == SyncMode::Always {
            self.synced_lsn = self.committed_lsn;
        }
        self.pending.truncate(HEADER_BYTES);
        self.pending_count = 0;
        self.assert_committed(durable_before);
        Ok(self.durable_lsn())
    }

    /// What a commit that wrote records promises once it returns (see the type's invariants).
    fn assert_committed(&self, durable_before: Lsn) {
        assert!(
            self.durable_lsn() > durable_before,
            "a commit of records makes a higher LSN durable"
        );
        assert_eq!(
            self.durable_lsn().0,
            self.committed_lsn,
            "a commit returns only when every record it wrote is durable"
        );
        assert!(
            self.end - self.tail <= self.header.capacity,
            "a frame never overwrites log space the installed checkpoint needs"
        );
    }

    /// Drops the records appended since the last commit, unwritten: the next record appended
    /// takes the first of their LSNs. For a caller that gave up on a group (its writes were
    /// refused and undone); nothing of it ever reaches the log.
    pub fn discard_pending(&mut self) {
        self.pending.truncate(HEADER_BYTES);
        self.pending_count = 0;
    }

    /// The highest LSN that `commit` has reported done: on stable storage under `Always`,
    /// written (to the page cache) under `None`.
    pub fn durable_lsn(&self) -> Lsn {
        match self.sync {
            SyncMode::Always => Lsn(self.synced_lsn),
            SyncMode::None => Lsn(self.committed_lsn),
        }
    }

    /// Whether `records` records of `bytes` bytes in all, appended now, would commit without
    /// `LogFull` (nothing is pending, and no checkpoint is installed meanwhile): the frame they
    /// make, at its worst size, fits both the largest frame and the log's free space where it
    /// would be placed.
    pub fn has_room_for(&self, records: usize, bytes: u64) -> bool {
        if self.pending_count != 0 || records as u64 >= u64::from(u32::MAX) {
            return false;
        }
        // Each record takes a length varint of at most 10 bytes (see `append`).
        let frame_len = HEADER_BYTES as u64 + bytes + 10 * records as u64 + self.padding_max();
        if frame_len > self.frame_bytes_max() {
            return false;
        }
        let position = self.header.place(self.end, frame_len);
        position + frame_len - self.tail <= self.header.capacity
    }

    /// Whether the log's commits bypass the page cache (see `Io::open_log`): false on a file
    /// system that refuses it, or for a log made before frames were padded.
    pub fn log_writes_direct(&self) -> bool {
        self.header.padded && self.log.writes_direct()
    }

    /// Whether commits pad their frames to whole sectors (a log made before frames were padded,
    /// or a ring that is not whole sectors, does not).
    pub fn log_writes_padded(&self) -> bool {
        self.header.padded
    }

    /// Bytes of log space in use (from the oldest record still needed to the end).
    pub fn log_used_bytes(&self) -> u64 {
        self.end - self.tail
    }

    /// Stream position where the log ends (the next frame starts here or at the next lap);
    /// its byte lives at file offset `LOG_HEADER_AREA_BYTES + (position + base) % capacity`.
    pub fn log_end_position(&self) -> u64 {
        self.end
    }

    /// Bytes of preallocated log space in all (set when the log was created, larger after each
    /// growth).
    pub fn log_capacity_bytes(&self) -> u64 {
        self.header.capacity
    }

    /// The largest capacity this log may grow to: the options' `log_capacity_max_bytes` (but
    /// never less than its capacity), or its capacity for a log that cannot grow (made before
    /// logs grew, or not whole sectors).
    pub fn log_capacity_max_bytes(&self) -> u64 {
        self.capacity_max
    }

    fn free_bytes(&self) -> u64 {
        self.header.capacity.saturating_sub(self.log_used_bytes())
    }

    /// The cause, if a failed write or sync poisoned the store.
    pub fn poisoned(&self) -> Option<&str> {
        self.poison.as_deref()
    }

    pub(crate) fn check_poison(&self) -> Result<(), Error> {
        match &self.poison {
            Some(cause) => Err(Error::Poisoned {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    fn poison(&mut self, op: &'static str, source: std::io::Error) -> Error {
        let error = io_error(op, &self.log_path, source);
        self.poison = Some(error.to_string());
        error
    }

    /// Starts a checkpoint covering every record up to `covered` (a durable LSN returned by
    /// `commit`, or the recovered LSN). The writer is `Send`: stream the image into it on any
    /// thread, then `finish` it there.
    ///
    /// Under `SyncMode::None` this syncs the log once, so that a checkpoint never covers
    /// records that the log could still lose (recovery needs the frame of `covered`); if that
    /// sync fails the error is returned and no checkpoint is started (no poison: `None`
    /// promises no durability to lose).
    pub fn checkpoint_writer(&self, covered: Lsn) -> Result<CheckpointWriter, Error> {
        self.check_poison()?;
        assert!(
            covered.0 <= self.committed_lsn && covered.0 >= self.checkpoint_lsn,
            "checkpoint LSN {} outside the committed range {}..={}",
            covered.0,
            self.checkpoint_lsn,
            self.committed_lsn
        );
        if self.synced_lsn < covered.0 {
            self.log
                .sync_data()
                .map_err(|e| io_error("fdatasync", &self.log_path, e))?;
        }
        let header = CheckpointHeader {
            covered_lsn: covered.0,
            replay: self.replay_after(covered),
            log_id: self.log_id,
        };
        CheckpointWriter::create(self.io.clone(), &self.dir, header)
    }

    /// Where replay must start for a checkpoint covering `covered`: the frame holding
    /// `covered + 1`, or the end of the log.
    fn replay_after(&self, covered: Lsn) -> ChainState {
        let next = covered.0 + 1;
        if next > self.committed_lsn {
            return ChainState {
                position: self.end,
                prev_crc: self.prev_crc,
                next_lsn: next,
            };
        }
        let index = self.marks.partition_point(|m| m.first_lsn <= next);
        let mark = self.marks[index
            .checked_sub(1)
            .expect("a frame holds every committed LSN")];
        ChainState {
            position: mark.position,
            prev_crc: mark.prev_crc,
            next_lsn: mark.first_lsn,
        }
    }

    /// Called after `CheckpointWriter::finish` returned: the checkpoint is durable and in place,
    /// so log space before it may be reused and older checkpoint files removed.
    pub fn install_checkpoint(&mut self, done: CheckpointDone) -> Result<(), Error> {
        // `checkpoint_writer` asserted the covered LSN; this holds it for the writer's result.
        assert!(
            done.lsn.0 <= self.committed_lsn && done.replay_position <= self.end,
            "a checkpoint of this store covers committed records and replays from its log"
        );
        if done.lsn.0 <= self.checkpoint_lsn && self.tail >= done.replay_position {
            return Ok(());
        }
        self.checkpoint_lsn = self.checkpoint_lsn.max(done.lsn.0);
        self.tail = self.tail.max(done.replay_position);
        while self.marks.front().is_some_and(|m| m.position < self.tail) {
            self.marks.pop_front();
        }
        assert!(
            self.tail <= self.end,
            "the log space freed ends where the log does, never past it"
        );
        self.remove_older_checkpoints(done.lsn);
        Ok(())
    }

    /// Older checkpoints are no longer needed once a newer one is durable. Best effort: a file
    /// left behind is harmless (recovery picks the newest) and is retried at the next install.
    fn remove_older_checkpoints(&self, newest: Lsn) {
        let Ok(names) = self.io.list_dir(&self.dir) else {
            return;
        };
        for name in names {
            if checkpoint::parse_name(&name).is_some_and(|lsn| lsn < newest) {
                let _ = self.io.remove_file(&self.dir.join(name));
            }
        }
    }
}

/// The largest frame of a ring of `capacity` bytes (see `Store::frame_bytes_max`).
fn frame_bytes_max(capacity: u64) -> u64 {
    (capacity / 2).min(u64::from(u32::MAX))
}
