//! Model-based test: random appends, commits, checkpoints, injected sync failures, process
//! crashes and power losses against a model (what was appended, what was acknowledged). After
//! every recovery the recovered records are exactly a prefix of the appended ones that holds
//! every acknowledged record. Proptest shrinks a failure to a short op sequence and prints it.

use std::sync::Arc;

use proptest::prelude::*;
use pure_store::sim::{Faults, SimDisk};
use pure_store::{Error, Lsn, Store, SyncMode};

use crate::harness::{checkpoint, open_in_mode, record_bytes, scale, Model};

#[derive(Clone, Debug)]
enum Op {
    Append { extra_bytes: u16 },
    Commit,
    Checkpoint,
    FailNextSync,
    ProcessCrash,
    PowerLoss,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u16..300).prop_map(|extra_bytes| Op::Append { extra_bytes }),
        4 => Just(Op::Commit),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::FailNextSync),
        1 => Just(Op::ProcessCrash),
        1 => Just(Op::PowerLoss),
    ]
}

struct Machine {
    disk: Arc<SimDisk>,
    model: Model,
    store: Store,
    /// Under `SyncMode::None` a commit acknowledges nothing durable: only what a recovery
    /// returned (it syncs) must survive.
    sync: SyncMode,
}

impl Machine {
    fn apply(&mut self, op: &Op) -> Result<(), String> {
        match op {
            Op::Append { extra_bytes } => self.append(*extra_bytes as usize),
            Op::Commit => self.commit(),
            Op::Checkpoint => {
                let _ = checkpoint(&mut self.store, &mut self.model);
                Ok(())
            }
            Op::FailNextSync => {
                self.disk.set_faults(Faults {
                    fail_sync_at: Some(1),
                    ..Faults::default()
                });
                Ok(())
            }
            Op::ProcessCrash => self.restart(false),
            Op::PowerLoss => self.restart(true),
        }
    }

    fn append(&mut self, extra_bytes: usize) -> Result<(), String> {
        let lsn = self.model.records.len() as u64 + 1;
        let mut bytes = record_bytes(lsn, self.model.generation);
        bytes.resize(bytes.len() + extra_bytes, 0xa5);
        match self.store.append(&bytes) {
            Ok(got) if got == Lsn(lsn) => {
                self.model.records.push(bytes);
                Ok(())
            }
            Ok(got) => Err(format!("append returned {got:?}, expected LSN {lsn}")),
            Err(Error::LogFull { .. } | Error::Poisoned { .. }) => Ok(()),
            Err(e) => Err(format!("append: {e}")),
        }
    }

    fn commit(&mut self) -> Result<(), String> {
        match self.store.commit() {
            Ok(lsn) if lsn.0 == self.model.records.len() as u64 => {
                if self.sync == SyncMode::Always {
                    self.model.acked = lsn.0;
                }
                Ok(())
            }
            Ok(lsn) => Err(format!(
                "commit returned {lsn:?} with {} appended",
                self.model.records.len()
            )),
            Err(Error::LogFull { .. }) if self.store.poisoned().is_none() => Ok(()),
            Err(_) if self.store.poisoned().is_some() => Ok(()),
            Err(e) => Err(format!("commit failed without poisoning: {e}")),
        }
    }

    fn restart(&mut self, power_loss: bool) -> Result<(), String> {
        if power_loss {
            self.disk.power_loss();
        } else {
            self.disk.process_crash();
        }
        let recovered = open_in_mode(&self.disk, self.sync).map_err(|e| format!("open: {e}"))?;
        self.model.check_recovery(&recovered)?;
        self.store = recovered.store;
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000 * scale() as u32, ..ProptestConfig::default() })]
    #[test]
    fn store_matches_model(
        seed in any::<u64>(),
        sync_none in proptest::bool::weighted(0.25),
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        let sync = if sync_none { SyncMode::None } else { SyncMode::Always };
        let disk = SimDisk::new(seed);
        let store = open_in_mode(&disk, sync).expect("fresh store").store;
        let mut machine = Machine { disk, model: Model::default(), store, sync };
        for (i, op) in ops.iter().enumerate() {
            machine.apply(op).map_err(|e| TestCaseError::fail(format!("op {i} {op:?}: {e}")))?;
        }
        machine.restart(true).map_err(|e| TestCaseError::fail(format!("final recovery: {e}")))?;
    }
}
