//! What the benchmarks share, so that each measures the same way: the pure-serve process and its
//! one-shot commands (`serve`), a blocking HTTP client (`http`), SQLite's settings (`sqlite`),
//! what a process used (`usage`: CPU, resident memory), what reached the device (`device`), the
//! round-robin measurement of several subjects (`measure`) and progress on stderr (`progress`).
//!
//! The harness knows no benchmark: no app, table, route or transaction. A piece that one
//! benchmark alone uses stays in that benchmark's module.

pub mod device;
pub mod http;
pub mod measure;
pub mod progress;
pub mod serve;
pub mod sqlite;
pub mod usage;
