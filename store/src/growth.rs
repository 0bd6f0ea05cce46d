//! Growing the log in place: a larger ring without a copy, and without a pause of the commits
//! for the zeros it takes.
//!
//! Two steps, like a checkpoint's. `Store::prepare_growth` hands out a `GrowthFill`, which runs
//! on any thread: it extends the log file with zeros to the new capacity (real blocks, as at
//! creation) and syncs it, while commits go on in the ring before it. `Store::grow` then, on
//! the store's thread, writes the header slot that says the new capacity and base and syncs it
//! (see `ring.rs`). A crash before that sync leaves the old header, which still places every
//! frame (nothing was written past the old ring); after it, the new one, which places the
//! frames that were live exactly where they are. Either is a log recovery reads whole.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{io_error, Error};
use crate::io::Io;
use crate::ring::{self, LogHeader, GROWTH_UNIT_BYTES};
use crate::Store;

/// The zero fill of a growth, to run on any thread (`Send`; it does not borrow the store).
/// While one is out (until it has run, or is dropped), the store hands out no other.
pub struct GrowthFill {
    io: Arc<dyn Io>,
    path: PathBuf,
    from: LogHeader,
    capacity: u64,
    out: Arc<AtomicBool>,
}

impl Drop for GrowthFill {
    fn drop(&mut self) {
        self.out.store(false, Ordering::Release);
    }
}

/// A fill that finished: the file holds the zeroed, synced space of a ring of `capacity`
/// bytes. Handed to `Store::grow`.
#[derive(Debug)]
pub struct PreparedGrowth {
    from: LogHeader,
    capacity: u64,
}

impl PreparedGrowth {
    /// The capacity the log will have.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }
}

impl GrowthFill {
    /// The capacity the log will have.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Writes zeros from the end of the current ring to the end of the grown one and syncs
    /// them. On a failure (a full disk) the file is cut back to its length, so that a growth
    /// that could not be made takes no space, and the error is returned: the log keeps its
    /// capacity, and nothing else changed.
    pub fn run(self) -> Result<PreparedGrowth, Error> {
        assert!(
            self.capacity.is_multiple_of(GROWTH_UNIT_BYTES)
                && self.from.file_bytes().is_multiple_of(GROWTH_UNIT_BYTES),
            "a fill starts and ends on a page: it never shares one with the ring's direct writes"
        );
        let file = self
            .io
            .open_file(&self.path)
            .map_err(|e| io_error("open", &self.path, e))?;
        let from = self.from.file_bytes();
        let to = self.from.ring_start() + self.capacity;
        let filled = ring::fill_zeros(&*file, &self.path, from, to).and_then(|()| {
            file.sync_data()
                .map_err(|e| io_error("fdatasync", &self.path, e))
        });
        if let Err(error) = filled {
            let _ = file.set_len(from);
            return Err(error);
        }
        Ok(PreparedGrowth {
            from: self.from,
            capacity: self.capacity,
        })
    }
}

impl Store {
    /// A fill that prepares the growth of the log to `capacity` (rounded up to whole growth
    /// units, at most `log_capacity_max_bytes`); `None` if the log cannot grow that far (it is
    /// that large already, or cannot grow at all), or while another fill is out.
    pub fn prepare_growth(&self, capacity: u64) -> Option<GrowthFill> {
        let capacity = capacity
            .div_ceil(GROWTH_UNIT_BYTES)
            .saturating_mul(GROWTH_UNIT_BYTES)
            .min(self.capacity_max);
        if !self.header.growable() || capacity <= self.header.capacity || self.poison.is_some() {
            return None;
        }
        if self.fill_out.swap(true, Ordering::AcqRel) {
            return None;
        }
        Some(GrowthFill {
            io: self.io.clone(),
            path: self.log_path.clone(),
            from: self.header,
            capacity,
            out: self.fill_out.clone(),
        })
    }

    /// Makes the prepared growth the log's: `Ok(false)` (nothing done) while the live part of
    /// the log spans the end of a lap, which the growth cannot keep in place; try again after
    /// the next checkpoint is installed or the next commit. A failure to write or sync the
    /// header poisons the store: which header the disk holds is then unknown, and frames
    /// placed by the wrong one would be lost.
    pub fn grow(&mut self, prepared: &PreparedGrowth) -> Result<bool, Error> {
        self.check_poison()?;
        assert_eq!(
            prepared.from, self.header,
            "a growth is prepared for the log as it is"
        );
        let Some(grown) = self.header.grown(prepared.capacity, self.tail, self.end) else {
            return Ok(false);
        };
        if let Err(e) = ring::write_slot(&*self.log, &self.log_path, &grown) {
            self.poison = Some(e.to_string());
            return Err(e);
        }
        self.header = grown;
        Ok(true)
    }

    /// The capacity the pending frame needs, at its worst size, to be committed (twice it, as
    /// a frame is at most half the ring): more than `log_capacity_bytes` when the records
    /// appended must wait for the log to grow.
    pub fn capacity_needed(&self) -> u64 {
        let frame = self.pending.len() as u64 + self.padding_max();
        match self.pending_count {
            0 => 0,
            _ => 2 * frame,
        }
    }
}
