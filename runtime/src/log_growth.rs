//! The log grows as the writes need it: from a small file for a new data directory to the
//! size that holds the writes made between two checkpoints, doubling each time.
//!
//! The syncer asks after every commit (`wanted_capacity`): a log more than half full, whose
//! checkpoints would come sooner than the interval and image ratio ask (at three quarters of
//! it), doubles. A group that does not fit the log at all (a frame is at most half the ring),
//! or a full log, asks for what it needs at once. The zeros of a growth are written on a
//! thread of their own (`GrowthFill`) while commits go on; the syncer then makes the larger
//! ring the log's between two groups (`Store::grow`, one header write and sync), or after
//! the next checkpoint if the log's live part spans the end of a lap until then.
//!
//! It must not know how writes run or what a checkpoint holds: only the store's sizes.

use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::time::{Duration, Instant};

use pure_store::{Error as StoreError, PreparedGrowth, Store};

/// After a fill failed (a full disk), the next attempt waits this long.
const RETRY_PAUSE: Duration = Duration::from_secs(10);

/// A growth under way: its fill running, or done and waiting for the log's live part to lie
/// in one lap.
#[derive(Default)]
pub(crate) struct LogGrowth {
    fill: Option<Receiver<Result<PreparedGrowth, StoreError>>>,
    prepared: Option<PreparedGrowth>,
    retry_at: Option<Instant>,
    /// Why the last fill failed, until `tend` reports it.
    failed: Option<String>,
}

/// What `LogGrowth::tend` did.
#[derive(Debug, PartialEq)]
pub(crate) enum Tended {
    /// Nothing changed in the log (a fill may have started or be running).
    Nothing,
    /// The log is now this many bytes.
    Grew(u64),
    /// A fill failed; the log keeps its capacity and the next attempt waits.
    FillFailed(String),
    /// Writing the new header failed: the store is poisoned.
    Poisoned(String),
}

impl LogGrowth {
    /// One step toward a log of at least `wanted` bytes (0: no more than it has): makes a
    /// finished fill the log's if it can, or starts a fill.
    pub fn tend(&mut self, store: &mut Store, wanted: u64) -> Tended {
        if let Some(fill) = &self.fill {
            match fill.try_recv() {
                Ok(result) => self.fill_ended(result),
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => self.fill = None,
            }
        }
        if let Some(prepared) = &self.prepared {
            return match store.grow(prepared) {
                Ok(true) => {
                    let capacity = prepared.capacity();
                    self.prepared = None;
                    Tended::Grew(capacity)
                }
                Ok(false) => Tended::Nothing,
                Err(e) => {
                    self.prepared = None;
                    Tended::Poisoned(format!("storage failure, writes stopped: {e}"))
                }
            };
        }
        if let Some(reason) = self.failed.take() {
            return Tended::FillFailed(reason);
        }
        let waiting = self.retry_at.is_some_and(|at| Instant::now() < at);
        if self.fill.is_none() && !waiting && wanted > store.log_capacity_bytes() {
            if let Some(fill) = store.prepare_growth(wanted) {
                let (done_tx, done_rx) = mpsc::channel();
                let spawned = std::thread::Builder::new()
                    .name("pure-log-growth".into())
                    .spawn(move || {
                        let _ = done_tx.send(fill.run());
                    });
                match spawned {
                    Ok(_) => self.fill = Some(done_rx),
                    Err(e) => {
                        self.retry_at = Some(Instant::now() + RETRY_PAUSE);
                        return Tended::FillFailed(format!(
                            "the log could not grow: cannot start a thread: {e}"
                        ));
                    }
                }
            }
        }
        Tended::Nothing
    }

    /// Whether a fill runs.
    pub fn filling(&self) -> bool {
        self.fill.is_some()
    }

    /// Waits for a running fill to end, whatever its result, and forgets any prepared growth
    /// (the store is about to close).
    pub fn finish_fill(&mut self) {
        if let Some(fill) = self.fill.take() {
            let _ = fill.recv();
        }
        self.prepared = None;
    }

    /// Waits up to `wait` for a running fill to finish (for a group that waits for the log).
    pub fn await_fill(&mut self, wait: Duration) {
        let Some(fill) = &self.fill else { return };
        match fill.recv_timeout(wait) {
            Ok(result) => self.fill_ended(result),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => self.fill = None,
        }
    }

    /// A fill's result: the growth to make the log's, or a failure to report (and a pause
    /// before the next attempt).
    fn fill_ended(&mut self, result: Result<PreparedGrowth, StoreError>) {
        self.fill = None;
        match result {
            Ok(prepared) => self.prepared = Some(prepared),
            Err(e) => {
                self.retry_at = Some(Instant::now() + RETRY_PAUSE);
                self.failed = Some(format!("the log could not grow: {e}"));
            }
        }
    }
}

/// The capacity the log should grow to after a commit left it `used` bytes of `capacity`: twice
/// it when it is more than half full and checkpoints would otherwise come sooner than
/// `checkpoint_limit` bytes of log (the interval, or the ratio times the last image) asks,
/// since `checkpoint_due` starts them at three quarters of the log at the latest. 0: no growth.
pub(crate) fn wanted_capacity(used: u64, capacity: u64, checkpoint_limit: u64) -> u64 {
    match used > capacity / 2 && checkpoint_limit > capacity / 4 * 3 {
        true => capacity.saturating_mul(2),
        false => 0,
    }
}

/// The capacity, doubling from `capacity`, whose three quarters hold `checkpoint_limit` bytes
/// of log (0: `capacity` does).
pub(crate) fn sized_for(checkpoint_limit: u64, capacity: u64) -> u64 {
    let mut sized = capacity.max(1);
    while sized / 4 * 3 < checkpoint_limit {
        sized = sized.saturating_mul(2);
    }
    match sized > capacity {
        true => sized,
        false => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::{sized_for, wanted_capacity};

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_log_doubles_when_half_full_and_checkpoints_would_come_early() {
        // Half full or less: no growth yet.
        assert_eq!(wanted_capacity(MIB / 2, MIB, 64 * MIB), 0);
        assert_eq!(wanted_capacity(MIB / 2 + 1, MIB, 64 * MIB), 2 * MIB);
        // Checkpoints at the limit come by three quarters of the log: no growth.
        assert_eq!(wanted_capacity(3 * MIB, 4 * MIB, 3 * MIB), 0);
        assert_eq!(wanted_capacity(3 * MIB, 4 * MIB, 3 * MIB + 1), 8 * MIB);
    }

    #[test]
    fn a_state_gets_the_log_its_checkpoints_want_at_open() {
        // TPC-C's imported image, about 40 MB: twice it fits three quarters of 128 MiB.
        assert_eq!(sized_for(80_000_000, MIB), 128 * MIB);
        assert_eq!(sized_for(3 * MIB, 4 * MIB), 0);
        assert_eq!(sized_for(3 * MIB + 1, 4 * MIB), 8 * MIB);
        // A new directory (no image) keeps its first size.
        assert_eq!(sized_for(0, MIB), 0);
    }
}
