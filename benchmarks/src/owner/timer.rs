//! Batches timed in turn: the median, over batches, of the µs per call of a batch, so that a
//! burst of other work on a shared machine spoils a batch, not the figure.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Instant;

use pure_lang::{Tables, WriteSet};

/// The snapshot the owner's tables were last published as, held as the runtime holds it; the
/// one it replaces is dropped on a thread of its own, as the syncer drops it in the server, so
/// that freeing what the owner's writes retired is not on the owner's clock here either (it is
/// not in the server: `lang/src/state/tree.rs`). Making the snapshot is: the owner waits for the
/// syncer to take it.
pub(crate) struct Snapshots {
    held: Option<Tables>,
    retired: Option<mpsc::Sender<Tables>>,
    dropper: Option<JoinHandle<()>>,
}

impl Snapshots {
    pub(crate) fn new() -> Snapshots {
        let (retired, dropped) = mpsc::channel::<Tables>();
        let dropper = std::thread::Builder::new()
            .name("bench-dropper".into())
            .spawn(move || dropped.into_iter().for_each(drop))
            .expect("a thread to drop snapshots");
        Snapshots {
            held: None,
            retired: Some(retired),
            dropper: Some(dropper),
        }
    }

    /// Publishes the tables as they are now, replacing the snapshot held.
    pub(crate) fn take(&mut self, tables: &mut Tables) {
        if let Some(old) = self.held.replace(tables.snapshot()) {
            let retired = self.retired.as_ref().expect("open until dropped");
            retired.send(old).expect("the dropper runs until dropped");
        }
    }
}

impl Drop for Snapshots {
    fn drop(&mut self) {
        drop(self.held.take());
        drop(self.retired.take());
        if let Some(dropper) = self.dropper.take() {
            let _ = dropper.join();
        }
    }
}

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
    /// `snapshot_every`, a snapshot of the tables is held meanwhile, renewed every that many calls
    /// (`Snapshots`).
    pub(super) fn time_calls(
        &mut self,
        calls: usize,
        tables: &mut Tables,
        ws: &mut WriteSet,
        snapshot_every: Option<usize>,
        mut step: impl FnMut(usize, &mut Tables, &mut WriteSet),
    ) {
        let mut snapshots = Snapshots::new();
        let mut i = 0;
        self.time(calls, || {
            if snapshot_every.is_some_and(|n| i % n == 0) {
                snapshots.take(tables);
            }
            step(i, tables, ws);
            ws.clear();
            i += 1;
        });
        drop(snapshots);
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
