//! pure-lang: the Rhai side of Pure.
//!
//! It owns the in-memory state handlers work on (one copy-on-write ordered map per table, with its
//! undo log, write set and indexes) and how a value and a row are encoded (`codec`, and the
//! packed rows of `Fields`), which records and checkpoint images embed; the engine set-up
//! (sandbox and limits) and the API scripts see (tables as global constants, rows as a compact
//! custom type, the request, errors); loading an app directory and compiling its handlers to
//! closures, with Rhai as the fallback; and mapping script errors to file:line:column.
//!
//! It must not know disks (no I/O beyond reading the app directory at load), the framing of
//! records and images, threads, or HTTP: the runtime encodes write sets, commits them and
//! decides where handlers run.
//!
//! Four layers, each a folder, each importing only those before it (the test `layers` holds
//! the rule):
//!
//! - `state`: schema, keys, the value codec, packed rows, tables, transactions and indexes.
//!   Imports nothing else of lang: the map under the tables can change here alone.
//! - `script`: the engine and its limits, the request, and the API scripts see. Imports `state`.
//! - `rhai_ast`: everything that reads Rhai's internal AST, which has no semver promise: the
//!   compiled handlers, the load-time checks, the syntax help, the diagnosing re-run. Upgrading
//!   Rhai means reviewing this folder. Imports `script` and `state`.
//! - `app`: an app and its routes, loading, the manifest, the call chain, shapes, bodies and
//!   CORS. Imports everything.

mod app;
mod rhai_ast;
mod script;
mod state;

pub use app::body::{negative_zeros, BodyError};
pub use app::cors::Cors;
pub use app::due::{DueRun, NamedSchedule};
pub use app::shape::Declared;
pub use app::{App, Execution, HandlerKind, Route};
pub use rhai::{Array, Dynamic, ImmutableString, Map};
pub use script::api::{Row, SCAN_ROWS_MAX};
pub use script::error::{panic_message, HandlerError, LoadError};
pub use script::json::{Json, JSON_CHUNK};
pub use script::limits::{Limits, LIMIT_CAPS};
pub use script::request::{Head, Request};
pub use script::respond::{has_no_body, Answer, RESERVED_HEADERS};
pub use script::settings::Environment;
pub use script::value::{to_dynamic, to_json};
pub use script::world::{
    Clock, Level, LogLine, LogSink, World, LOG_LINES_PER_CALL_MAX, LOG_LINE_BYTES_MAX,
};
pub use state::codec;
pub use state::depth::{json_text_depth, parse_json, too_deep, DEPTH_MAX};
pub use state::fields::{Fields, FieldsBuilder, SLOTS_MAX};
pub use state::key::{Key, KeyBuilder, KeyPart, PartBytes, PartRef, KEY_PARTS_MAX};
pub use state::schema::{
    FieldType, Kind as FieldKind, Schema, TableId, TableSchema, FIELDS_MAX, IDS_TABLE,
    SCHEDULE_TABLE,
};
pub use state::table_set::TableSet;
pub use state::tables::{Change, IndexDef, IndexRange, IndexSource, RowSet, Tables, WriteSet};
