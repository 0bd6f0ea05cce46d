//! pure-runtime through scripts: the ledger test app (tests/apps/ledger), driven like a client.

mod crash;
mod durability;
mod record_model;
mod review;
mod support;
mod transcript;

pub use support::*;
