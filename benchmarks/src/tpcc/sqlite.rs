//! The SQLite twin of apps/tpcc (rusqlite, in-process): the same nine tables, the same five
//! transactions giving the same answers (status and JSON body) and leaving the same rows, for
//! the same population and request stream (docs/benchmarks.md: `tpcc-equal`, `tpcc`).
//!
//! - The pragmas, with the `default` and `tuned` presets, are the harness's
//!   ([`crate::harness::sqlite`]): kv runs SQLite with the same settings.
//! - [`load`]: a new database file with the population of a seed ([`schema`] documents the
//!   tables, keys and indexes, and when a table is WITHOUT ROWID).
//! - [`Session`] (`sqlite` mode: a connection per thread, a commit per transaction) and
//!   [`Grouped`] (`sqlite-grouped`: one writer thread, a SAVEPOINT per transaction, a COMMIT
//!   per batch).
//! - [`dump`] / [`read_db`]: the tables as `pure-serve export` writes the app's, or in memory.

mod commit;
pub mod schema;
mod txn;

#[cfg(test)]
mod tests;

// The API, whether or not the harness names every type of it yet (in a binary crate an unnamed
// re-export counts as unused).
#[allow(unused_imports)]
pub use commit::{Grouped, GroupedStats, Pending, Session, SessionStats};
#[allow(unused_imports)]
pub use schema::{dump, load, read_db, Layout, LoadReport};
