//! What a handler runs in: the engine and its limits, the request, and the API scripts see
//! (tables, rows, answers, the world, settings and secrets, values, arithmetic, errors).
//!
//! Architecture invariant: imports `state` only. It knows Rhai's public API (engine, values,
//! registered functions) but not its internal AST: what reads the AST is `rhai_ast`.

pub(crate) mod api;
pub(crate) mod api_error;
pub(crate) mod arith;
pub(crate) mod context;
pub(crate) mod engine;
pub(crate) mod error;
pub(crate) mod int_set;
pub(crate) mod json;
pub(crate) mod limits;
pub(crate) mod recursion;
pub(crate) mod request;
pub(crate) mod respond;
pub(crate) mod schedule;
pub(crate) mod settings;
pub(crate) mod value;
pub(crate) mod world;
