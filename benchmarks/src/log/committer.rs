//! The store under measurement: a fresh `pure_store::Store` committing groups of records, with
//! checkpoints of a tiny image written in the background (as the runtime would) so that its
//! ring of log space is reused.

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::thread::JoinHandle;

use anyhow::{anyhow, Context};
use pure_store::{CheckpointDone, Store, StoreOptions, SyncMode};

use crate::harness::measure::Subject;
use crate::harness::progress;

/// Groups that lap the ring before measuring: 16 records of 16 KiB each, 256 KiB a commit.
const LAP_GROUP_RECORDS: usize = 16;
const LAP_RECORD_BYTES: u64 = 16 << 10;
/// The checkpoint image: the benchmark has no state, only the log matters.
const TINY_IMAGE: &[u8] = b"pure-bench log: no state";

/// One store committing groups of `group` records.
pub struct Committer {
    dir: PathBuf,
    store: Store,
    group: usize,
    checkpoints: Checkpoints,
    record: Vec<u8>,
    n: u64,
}

impl Committer {
    /// Opens a fresh store in `dir` (created) with `first_mib` MiB of log space, grows it to
    /// `log_mib` (doubling while it is half full, as the server does) and laps the grown ring
    /// once with large untimed commits: measured commits then overwrite log space the store
    /// used before and a checkpoint freed, the steady state of a long-running store.
    pub fn create(
        dir: PathBuf,
        group: usize,
        record_bytes: usize,
        first_mib: u64,
        log_mib: u64,
    ) -> anyhow::Result<Committer> {
        fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let spinner = progress::spinner(&format!("group {group}: opening a {first_mib} MiB log"));
        let options = StoreOptions {
            sync: SyncMode::Always,
            log_capacity_bytes: first_mib << 20,
            log_capacity_max_bytes: log_mib << 20,
        };
        let store = Store::open(&dir, options)
            .map_err(store_error("opening the store"))?
            .store;
        let mut committer = Committer {
            dir,
            store,
            group,
            checkpoints: Checkpoints::default(),
            record: vec![0; record_bytes],
            n: 0,
        };
        spinner.set_message(format!("group {group}: growing the log to {log_mib} MiB"));
        committer.grow_to(log_mib << 20)?;
        spinner.set_message(format!("group {group}: lapping the ring once"));
        committer.lap_once()?;
        committer.checkpoints.installed = 0;
        spinner.finish_and_clear();
        Ok(committer)
    }

    /// Commits large groups, doubling the log each time it is half full, until it is
    /// `capacity` bytes: a growth whose live part spans a lap's end waits for the next
    /// checkpoint, as the server's does.
    fn grow_to(&mut self, capacity: u64) -> anyhow::Result<()> {
        let mut prepared = None;
        while self.store.log_capacity_bytes() < capacity {
            let used = self.store.log_used_bytes();
            if prepared.is_none() && used > self.store.log_capacity_bytes() / 2 {
                let fill = self
                    .store
                    .prepare_growth(2 * self.store.log_capacity_bytes())
                    .ok_or_else(|| anyhow!("the log cannot grow to {capacity} bytes"))?;
                prepared = Some(fill.run().map_err(store_error("growing the log"))?);
            }
            if let Some(growth) = &prepared {
                if self
                    .store
                    .grow(growth)
                    .map_err(store_error("growing the log"))?
                {
                    prepared = None;
                    continue;
                }
            }
            self.lap_group()?;
        }
        Ok(())
    }

    /// One large untimed group.
    fn lap_group(&mut self) -> anyhow::Result<()> {
        let capacity = self.store.log_capacity_bytes();
        let record = vec![0x5Au8; (capacity / 64).clamp(1, LAP_RECORD_BYTES) as usize];
        self.checkpoints.tend(&mut self.store)?;
        for _ in 0..LAP_GROUP_RECORDS {
            append(&mut self.store, &mut self.checkpoints, &record)?;
        }
        commit(&mut self.store, &mut self.checkpoints)
    }

    fn lap_once(&mut self) -> anyhow::Result<()> {
        let end = self.store.log_end_position() + self.store.log_capacity_bytes();
        while self.store.log_end_position() < end {
            self.lap_group()?;
        }
        Ok(())
    }

    pub fn group(&self) -> usize {
        self.group
    }

    /// Checkpoints installed since the ring was lapped.
    pub fn checkpoints_installed(&self) -> u64 {
        self.checkpoints.installed
    }

    /// How many times the log's end has gone round the ring.
    pub fn laps(&self) -> f64 {
        self.store.log_end_position() as f64 / self.store.log_capacity_bytes() as f64
    }

    /// Waits for a running checkpoint, closes the store and removes its directory.
    pub fn remove(mut self) -> anyhow::Result<()> {
        self.checkpoints.wait(&mut self.store)?;
        let dir = self.dir.clone();
        drop(self);
        fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))
    }
}

impl Subject for Committer {
    fn label(&self) -> String {
        format!("store, group {}", self.group)
    }
    /// The group's appends and its commit, and the checkpoint bookkeeping of the owner.
    fn step(&mut self) -> anyhow::Result<u64> {
        self.checkpoints.tend(&mut self.store)?;
        for _ in 0..self.group {
            stamp_record(&mut self.record, self.n);
            self.n += 1;
            append(&mut self.store, &mut self.checkpoints, &self.record)?;
        }
        commit(&mut self.store, &mut self.checkpoints)?;
        Ok(self.group as u64)
    }
}

/// Records vary in content so that nothing below can compress or deduplicate them away.
fn stamp_record(record: &mut [u8], n: u64) {
    let bytes = n.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes();
    for (i, b) in record.iter_mut().enumerate() {
        *b = bytes[i % 8] ^ (i as u8);
    }
}

/// Appends one record. `LogFull` here means the pending group reached the largest frame: commit
/// it and go on (measured groups are far smaller, so this does not happen while measuring).
fn append(store: &mut Store, ckpt: &mut Checkpoints, record: &[u8]) -> anyhow::Result<()> {
    loop {
        match store.append(record) {
            Ok(_) => return Ok(()),
            Err(pure_store::Error::LogFull { .. }) => commit(store, ckpt)?,
            Err(e) => return Err(store_error("append")(e)),
        }
    }
}

/// Commits, waiting for a checkpoint when the log is full (backpressure, as the runtime would).
fn commit(store: &mut Store, ckpt: &mut Checkpoints) -> anyhow::Result<()> {
    loop {
        match store.commit() {
            Ok(_) => return Ok(()),
            Err(pure_store::Error::LogFull { .. }) => ckpt.free_space(store)?,
            Err(e) => return Err(store_error("commit")(e)),
        }
    }
}

type CheckpointThread = JoinHandle<Result<CheckpointDone, pure_store::Error>>;

/// Background checkpoints of a tiny image, so that the store may reuse its log space.
#[derive(Default)]
struct Checkpoints {
    in_flight: Option<CheckpointThread>,
    installed: u64,
}

impl Checkpoints {
    /// Installs a finished checkpoint; starts one once the log is half full.
    fn tend(&mut self, store: &mut Store) -> anyhow::Result<()> {
        if self.in_flight.as_ref().is_some_and(|t| t.is_finished()) {
            self.install(store)?;
        }
        if self.in_flight.is_none() && store.log_used_bytes() * 2 >= store.log_capacity_bytes() {
            self.start(store)?;
        }
        Ok(())
    }

    /// The log is full: wait for a checkpoint (starting one if none runs) and install it.
    fn free_space(&mut self, store: &mut Store) -> anyhow::Result<()> {
        if self.in_flight.is_none() {
            self.start(store)?;
        }
        self.install(store)
    }

    fn wait(&mut self, store: &mut Store) -> anyhow::Result<()> {
        if self.in_flight.is_some() {
            self.install(store)?;
        }
        Ok(())
    }

    fn start(&mut self, store: &Store) -> anyhow::Result<()> {
        let mut writer = store
            .checkpoint_writer(store.durable_lsn())
            .map_err(store_error("checkpoint"))?;
        self.in_flight = Some(std::thread::spawn(move || {
            writer
                .write_all(TINY_IMAGE)
                .map_err(|source| pure_store::Error::Io {
                    op: "writing the checkpoint image",
                    path: PathBuf::new(),
                    source,
                })?;
            writer.finish()
        }));
        Ok(())
    }

    fn install(&mut self, store: &mut Store) -> anyhow::Result<()> {
        let thread = self
            .in_flight
            .take()
            .expect("install is called with a checkpoint running");
        let done = thread
            .join()
            .map_err(|_| anyhow!("the checkpoint thread panicked"))?
            .map_err(store_error("checkpoint"))?;
        store
            .install_checkpoint(done)
            .map_err(store_error("installing a checkpoint"))?;
        self.installed += 1;
        Ok(())
    }
}

fn store_error(op: &'static str) -> impl FnOnce(pure_store::Error) -> anyhow::Error {
    move |e| anyhow::Error::new(e).context(format!("store: {op}"))
}
