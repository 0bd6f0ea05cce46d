//! The store's integration tests, one binary: crash, torn-tail, bit-flip, failed-sync,
//! disk-full and checkpoint-crash simulations on `pure_store::sim::SimDisk`, property tests
//! against a model, and real-file tests. Scale with `PURE_TEST_SCALE` (default 1); replay a
//! randomized test with `PURE_TEST_SEED`.

mod bit_flip;
mod crash;
mod decoder;
mod faults;
mod growth;
mod harness;
mod model;
mod real_files;
mod reviewed_growth;
mod torn_tail;
