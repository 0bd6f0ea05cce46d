//! Batches timed in turn: the median, over batches, of the µs per call of a batch, so that a
//! burst of other work on a shared machine spoils a batch, not the figure.

use std::time::Instant;

use pure_lang::{Tables, WriteSet};

/// Median µs per call of `batch` calls of `step`, over `batches` batches run by `rounds`.
#[derive(Default)]
pub(super) struct Timer {
    pub(super) samples: Vec<f64>,
}

impl Timer {
    pub(super) fn new() -> Timer {
        Timer {
            samples: Vec::new(),
        }
    }
    pub(super) fn time(&mut self, calls: usize, mut step: impl FnMut()) {
        let started = Instant::now();
        for _ in 0..calls {
            step();
        }
        self.samples
            .push(started.elapsed().as_secs_f64() * 1e6 / calls as f64);
    }
    /// Times `calls` calls of `step` on `tables`, clearing the write set after each; with
    /// `snapshot_every`, a snapshot of the tables is held meanwhile, renewed every that many calls.
    pub(super) fn time_calls(
        &mut self,
        calls: usize,
        tables: &mut Tables,
        ws: &mut WriteSet,
        snapshot_every: Option<usize>,
        mut step: impl FnMut(usize, &mut Tables, &mut WriteSet),
    ) {
        let mut snapshot = None;
        let mut i = 0;
        self.time(calls, || {
            if snapshot_every.is_some_and(|n| i % n == 0) {
                snapshot = Some(tables.snapshot());
            }
            step(i, tables, ws);
            ws.clear();
            i += 1;
        });
        drop(snapshot);
    }

    pub(super) fn median(&self) -> f64 {
        let mut s = self.samples.clone();
        s.sort_by(f64::total_cmp);
        s[s.len() / 2]
    }
    pub(super) fn range(&self) -> (f64, f64) {
        let min = self.samples.iter().copied().fold(f64::INFINITY, f64::min);
        let max = self.samples.iter().copied().fold(0.0, f64::max);
        (min, max)
    }
}
