//! pure-runtime through scripts: the ledger test app (tests/apps/ledger), driven like a client.

mod compat;
mod crash;
mod durability;
mod layers;
mod log_growth;
mod lone_writes;
mod lone_writes_faults;
mod publications;
mod record_model;
mod reviewed_034;
mod reviewed_growth;
mod state_after_failures;
mod support;
mod transcript;

pub use support::*;

use pure_runtime::Runtime;

#[test]
fn a_runtime_handle_is_shared_between_threads() {
    fn shared<T: Clone + Send + Sync + 'static>() {}
    shared::<Runtime>();
}
