//! What the simulation tests share: a model of what was appended and acknowledged, record and
//! checkpoint-image contents, a workload driver, and the check run after every recovery.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pure_store::sim::{SimDisk, SimRng};
use pure_store::{Error, Io, Lsn, Recovered, Store, StoreOptions, SyncMode};

/// Ring capacity of the simulations: small, so that workloads wrap it many times.
pub const SIM_CAPACITY_BYTES: u64 = 16384;

pub fn scale() -> u64 {
    std::env::var("PURE_TEST_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .max(1)
}

/// A proptest configuration of `cases` cases at CI scale.
pub fn config(cases: u32) -> proptest::prelude::ProptestConfig {
    let cases = cases * scale() as u32;
    proptest::prelude::ProptestConfig {
        cases,
        ..proptest::prelude::ProptestConfig::default()
    }
}

pub fn sim_dir() -> PathBuf {
    PathBuf::from("/sim/store")
}

pub fn log_path() -> PathBuf {
    sim_dir().join(pure_store::LOG_FILE_NAME)
}

pub fn options() -> StoreOptions {
    StoreOptions {
        sync: SyncMode::Always,
        log_capacity_bytes: SIM_CAPACITY_BYTES,
        log_capacity_max_bytes: SIM_CAPACITY_BYTES,
    }
}

pub fn open(disk: &Arc<SimDisk>) -> Result<Recovered, Error> {
    open_in_mode(disk, SyncMode::Always)
}

pub fn open_in_mode(disk: &Arc<SimDisk>, sync: SyncMode) -> Result<Recovered, Error> {
    let options = StoreOptions { sync, ..options() };
    Store::open_with(disk.clone() as Arc<dyn Io>, &sim_dir(), options)
}

/// Opens a store whose log may grow to eight times the simulations' capacity.
pub fn open_growing(disk: &Arc<SimDisk>, sync: SyncMode) -> Result<Recovered, Error> {
    let options = StoreOptions {
        sync,
        log_capacity_max_bytes: 8 * SIM_CAPACITY_BYTES,
        ..options()
    };
    Store::open_with(disk.clone() as Arc<dyn Io>, &sim_dir(), options)
}

/// The content of record `lsn` written in `generation` (each recovery starts a new one, so
/// that a record left from before a crash never equals the one written after it).
pub fn record_bytes(lsn: u64, generation: u64) -> Vec<u8> {
    let mut rng = SimRng::new(lsn.wrapping_mul(0x9e37_79b9) ^ generation.rotate_left(40));
    let len = 1 + rng.below(120) as usize;
    let mut bytes = vec![0u8; len];
    rng.fill(&mut bytes);
    // Every other record repeats a few bytes, as real records repeat their shapes: frames that
    // hold them are written compressed.
    if lsn % 2 == 0 {
        for i in 4..len {
            bytes[i] = bytes[i % 4];
        }
    }
    bytes[0] = lsn as u8;
    bytes
}

/// A checkpoint image: the records it covers, length-prefixed.
pub fn image_of(records: &[Vec<u8>]) -> Vec<u8> {
    let mut image = (records.len() as u64).to_le_bytes().to_vec();
    for record in records {
        image.extend_from_slice(&(record.len() as u32).to_le_bytes());
        image.extend_from_slice(record);
    }
    image
}

pub fn records_of_image(image: &[u8]) -> Vec<Vec<u8>> {
    let count = u64::from_le_bytes(image[..8].try_into().unwrap());
    let mut at = 8;
    let mut records = Vec::new();
    for _ in 0..count {
        let len = u32::from_le_bytes(image[at..at + 4].try_into().unwrap()) as usize;
        records.push(image[at + 4..at + 4 + len].to_vec());
        at += 4 + len;
    }
    assert_eq!(at, image.len(), "image has trailing bytes");
    records
}

/// The state a recovery hands back: checkpoint records, then log records, with LSNs checked
/// to continue one another.
pub fn recovered_state(recovered: &Recovered) -> Vec<Vec<u8>> {
    let mut state = match &recovered.checkpoint {
        Some(image) => {
            let records = records_of_image(image.bytes());
            assert_eq!(
                records.len() as u64,
                image.lsn().0,
                "image holds exactly its LSN"
            );
            records
        }
        None => Vec::new(),
    };
    for record in &recovered.records {
        assert_eq!(
            record.lsn,
            Lsn(state.len() as u64 + 1),
            "recovered LSNs are contiguous"
        );
        state.push(record.bytes.clone());
    }
    assert_eq!(recovered.store.durable_lsn(), Lsn(state.len() as u64));
    state
}

/// What was appended (in LSN order) and up to where it was acknowledged.
#[derive(Clone, Debug, Default)]
pub struct Model {
    pub records: Vec<Vec<u8>>,
    pub acked: u64,
    pub generation: u64,
    /// The newest checkpoint whose `finish` returned Ok.
    pub durable_checkpoint: u64,
}

impl Model {
    /// Checks invariants 1-4 on a recovery and makes the model follow it (what recovery
    /// returned is durable from now on).
    pub fn check_recovery(&mut self, recovered: &Recovered) -> Result<(), String> {
        let state = recovered_state(recovered);
        if (state.len() as u64) < self.acked {
            return Err(format!(
                "lost acknowledged records: {} < {}",
                state.len(),
                self.acked
            ));
        }
        if state.len() > self.records.len() || state[..] != self.records[..state.len()] {
            return Err(format!(
                "recovered {} records that are not a prefix of the {} appended",
                state.len(),
                self.records.len()
            ));
        }
        let checkpoint = recovered.checkpoint.as_ref().map_or(0, |c| c.lsn().0);
        if checkpoint < self.durable_checkpoint {
            return Err(format!(
                "chose checkpoint {checkpoint}, older than durable {}",
                self.durable_checkpoint
            ));
        }
        self.records.truncate(state.len());
        self.acked = state.len() as u64;
        self.durable_checkpoint = checkpoint;
        self.generation += 1;
        Ok(())
    }
}

/// Drives a store through a seeded mix of groups and checkpoints until `groups` groups were
/// attempted or the store fails (crash point, poison, full log that a checkpoint cannot fix).
pub struct Workload {
    pub rng: SimRng,
    pub groups: u32,
    /// One in `checkpoint_every` groups is followed by a checkpoint.
    pub checkpoint_every: u64,
    /// The store's sync mode: under `None` a commit acknowledges nothing durable.
    pub sync: SyncMode,
    /// One in `grow_every` groups is followed by a growth of the log (0: none).
    pub grow_every: u64,
    /// Growths made, and growths that waited for a checkpoint (the live part spanned a lap).
    pub grown: u32,
    pub waited: u32,
}

impl Workload {
    pub fn run(&mut self, store: &mut Store, model: &mut Model) {
        for _ in 0..self.groups {
            if self.group(store, model).is_err() {
                return;
            }
            if self.rng.one_in(self.checkpoint_every) && checkpoint(store, model).is_err() {
                return;
            }
            if self.grow_every > 0
                && self.rng.one_in(self.grow_every)
                && self.grow(store, model).is_err()
            {
                return;
            }
        }
    }

    /// Grows the log by one or two growth units: the fill, then (as the server's fill runs
    /// on its own thread) maybe a group committed meanwhile, then the growth, which waits
    /// (`Ok(false)`) when the log's live part spans the end of a lap.
    fn grow(&mut self, store: &mut Store, model: &mut Model) -> Result<(), Error> {
        let target = store.log_capacity_bytes() + 4096 * (1 + self.rng.below(2));
        let Some(fill) = store.prepare_growth(target) else {
            return Ok(());
        };
        let prepared = fill.run()?;
        if self.rng.one_in(2) {
            self.group(store, model)?;
        }
        match store.grow(&prepared)? {
            true => self.grown += 1,
            false => self.waited += 1,
        }
        Ok(())
    }

    pub fn group(&mut self, store: &mut Store, model: &mut Model) -> Result<(), Error> {
        let count = 1 + self.rng.below(4);
        for _ in 0..count {
            let lsn = model.records.len() as u64 + 1;
            let bytes = record_bytes(lsn, model.generation);
            assert_eq!(store.append(&bytes)?, Lsn(lsn));
            model.records.push(bytes);
        }
        let lsn = match store.commit() {
            Err(Error::LogFull { .. }) => {
                checkpoint(store, model)?;
                store.commit()?
            }
            other => other?,
        };
        assert_eq!(
            lsn.0,
            model.records.len() as u64,
            "commit returns the last LSN"
        );
        assert!(lsn.0 >= model.acked, "durable LSN went back");
        if self.sync == SyncMode::Always {
            model.acked = lsn.0;
        }
        Ok(())
    }
}

/// Writes, finishes and installs a checkpoint of everything durable.
pub fn checkpoint(store: &mut Store, model: &mut Model) -> Result<(), Error> {
    let covered = store.durable_lsn();
    let mut writer = store.checkpoint_writer(covered)?;
    let image = image_of(&model.records[..covered.0 as usize]);
    std::io::Write::write_all(&mut writer, &image).map_err(|e| Error::Io {
        op: "checkpoint write",
        path: PathBuf::new(),
        source: e,
    })?;
    let done = writer.finish()?;
    model.durable_checkpoint = model.durable_checkpoint.max(done.lsn.0);
    store.install_checkpoint(done)
}

/// Opens, checks the recovery against `model`, runs more work, and returns the disk.
pub fn recover_and_check(disk: &Arc<SimDisk>, model: &mut Model) -> Result<Store, String> {
    let recovered = open(disk).map_err(|e| format!("open failed: {e}"))?;
    model.check_recovery(&recovered)?;
    Ok(recovered.store)
}

/// The file offset of stream `position` in the simulated log.
pub fn log_offset(position: u64) -> u64 {
    pure_store::LOG_HEADER_AREA_BYTES + position % SIM_CAPACITY_BYTES
}

pub fn assert_path(path: &Path, expected: &Path) {
    assert_eq!(path, expected, "the error names the damaged file");
}
