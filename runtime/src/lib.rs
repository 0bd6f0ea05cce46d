//! pure-runtime: the owner.
//!
//! It runs an app's write handlers one at a time over the state of persistent maps (whoever holds
//! the owner's role runs them: the caller that queued a write when the role is free, else the
//! owner thread), encodes each handler's write set as one record, has the store commit the
//! records of a group with one sync (on the syncer thread, pipelined with the owner's next
//! group), answers the group's requests only after that sync returned, and only then publishes the
//! snapshot that holds them for read handlers on any thread. At open it recovers the state from
//! the newest checkpoint and the records after it, without running any script; it writes
//! checkpoints from snapshots on a background thread. A write that cannot be made durable in
//! time (a full log on a full disk) is refused and undone, never applied later. For a
//! directory that does not open, `inspect` and `salvage` report its damage and save the longest
//! valid prefix of its state into a new directory; `import` and `export` move rows in and out
//! of a data directory as JSON Lines.
//!
//! It must not know HTTP (that is `serve`) nor the bytes of frames and files (that is `store`);
//! the script API and the transaction mechanics are `lang`'s.

mod allocator;
mod building;
mod checkpoint;
mod error;
mod group;
mod inbox;
mod job;
mod log_growth;
mod metrics;
mod options;
mod owner;
mod publication;
pub mod record;
mod recovery;
mod runtime;
mod salvage;
mod shared;
mod snapshot;
mod syncer;
mod transfer;

pub use allocator::Allocator;
pub use error::{OpenError, ReloadError};
pub use job::WriteReply;
pub use metrics::{Health, Metrics};
pub use options::{
    CommitGate, RuntimeOptions, CHECKPOINT_IMAGE_RATIO, LOG_CAPACITY, LOG_CAPACITY_MAX,
    LONE_WRITE_SYNC_MAX,
};
pub use publication::{Publication, TableSet};
pub use pure_lang::ImmutableString;
pub use pure_lang::{
    has_no_body, Answer, App, BodyError, Clock, Cors, Execution, HandlerError, HandlerKind, Head,
    Level, LogLine, LogSink, Request, Route, World,
};
pub use pure_store::{CheckpointFinding, Ending, Examination, LogFinding, SyncMode};
pub use recovery::{Recovery, Undecodable};
pub use runtime::{LiveRead, Runtime, HANDLER_STACK_BYTES};
pub use salvage::{inspect, inspect_with, salvage, salvage_with, Inspection, Salvaged};
pub use transfer::{
    export, import, Exported, ImportOptions, Imported, Progress, TableRows, TransferError,
    LINE_BYTES_MAX,
};
