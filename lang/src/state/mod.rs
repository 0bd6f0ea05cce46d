//! The state handlers work on: the schema, keys, the value codec, packed rows, and the tables
//! with their transactions and indexes.
//!
//! Architecture invariant: nothing here imports another layer of lang (no engine, no request,
//! no AST), so the map under the tables can change in this folder alone. Rhai's value type
//! (`Dynamic`) is the one thing of Rhai it knows: it is what a row's fields hold.

pub mod codec;
pub(crate) mod depth;
pub(crate) mod fields;
pub(crate) mod key;
pub(crate) mod schema;
pub(crate) mod table_set;
pub(crate) mod tables;
pub(crate) mod tree;
