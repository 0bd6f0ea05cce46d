//! Everything that reads Rhai's internal AST (the `internals` feature), and nothing else: the
//! compiled handlers, the load-time checks, the syntax help and the diagnosing re-run.
//!
//! Architecture invariant: Rhai's AST has no semver promise, so it is matched here alone (the
//! `layers` test fails on an AST type named elsewhere), and the exact pin of rhai in the
//! workspace's Cargo.toml points here: upgrading Rhai means reviewing this folder. Imports
//! `script` and `state`.

pub(crate) mod checks;
pub(crate) mod compiled;
pub(crate) mod diagnose;
pub(crate) mod syntax;
pub(crate) mod table_calls;
