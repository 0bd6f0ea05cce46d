//! pure-lang: the Rhai side of Pure.
//!
//! It owns the engine set-up (sandbox and limits), the API that scripts see (tables as global
//! constants, rows as a compact custom type, the request, errors), loading and compiling an app
//! directory (and compiling its handlers to closures, with Rhai as the fallback), the in-memory state those scripts work on (one persistent ordered map per table) with
//! its transactional operations (undo log and write set), and mapping script errors to
//! file:line:column.
//!
//! It owns how a value and a row are encoded (`codec`, and the packed rows of `Fields`), which
//! records and checkpoint images embed. It must not know disks (no I/O beyond reading the app
//! directory at load), the framing of records and images, threads, or HTTP: the runtime encodes
//! write sets, commits them and decides where handlers run.

mod api;
mod app;
mod arith;
mod body;
pub mod codec;
mod compiled;
mod context;
mod cors;
mod depth;
mod diagnose;
mod engine;
mod error;
mod fields;
mod key;
mod recursion;
mod respond;
mod schema;
mod shape;
mod syntax;
mod table_calls;
mod tables;
mod value;
mod world;

pub use api::{Row, SCAN_ROWS_MAX};
pub use app::{panic_message, App, Execution, HandlerKind, Head, Request, Route};
pub use body::{negative_zeros, BodyError};
pub use cors::Cors;
pub use depth::{json_text_depth, parse_json, too_deep, DEPTH_MAX};
pub use engine::{Limits, LIMIT_CAPS};
pub use error::{HandlerError, LoadError};
pub use fields::{Fields, FieldsBuilder, SLOTS_MAX};
pub use key::{Key, KeyPart, PartBytes, PartRef, KEY_PARTS_MAX};
pub use respond::{has_no_body, Answer, RESERVED_HEADERS};
pub use rhai::{Array, Dynamic, ImmutableString, Map};
pub use schema::{Schema, TableId, TableSchema, FIELDS_MAX};
pub use shape::Declared;
pub use tables::{Change, IndexDef, IndexSource, Tables, WriteSet};
pub use value::{to_dynamic, to_json};
pub use world::{Level, LogLine, LogSink, World, LOG_LINES_PER_CALL_MAX, LOG_LINE_BYTES_MAX};
