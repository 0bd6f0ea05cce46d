//! The tables a running handler works on, reachable from the registered script functions.
//!
//! Registered Rhai functions get no pointer to the caller's data, so the handler's context lives
//! in a thread-local for the duration of one call: the thread running a write moves the tables and
//! write set in and takes them back after the call (a move of a few pointers); a reader thread installs the
//! snapshot it reads. Only one handler runs on a thread at a time, and registered functions never
//! call back into the engine, so the `RefCell` is never borrowed twice.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::Instant;

use crate::tables::{Tables, WriteSet};

pub(crate) enum Context {
    Idle,
    Write { tables: Tables, writes: WriteSet },
    Read { tables: Arc<Tables> },
}

thread_local! {
    static CONTEXT: RefCell<Context> = const { RefCell::new(Context::Idle) };
    /// When the running handler's wall-clock budget ends (checked from `on_progress`).
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
    /// Rows the running handler may still read by scans: a scan is one operation to Rhai.
    static SCAN_ROWS_LEFT: Cell<u64> = const { Cell::new(0) };
}

/// Why a table operation could not run in this context.
pub(crate) const NOT_IN_HANDLER: &str = "tables can only be used inside a handler";
pub(crate) const READ_ONLY: &str =
    "this is a read handler (GET): it cannot write; use a write route (POST, PUT, DELETE, PATCH)";

pub(crate) fn install(context: Context, deadline: Instant, scan_rows: u64) {
    CONTEXT.with(|c| *c.borrow_mut() = context);
    DEADLINE.with(|d| d.set(Some(deadline)));
    SCAN_ROWS_LEFT.with(|r| r.set(scan_rows));
}

/// Takes `rows` from the handler's scan budget; false when it is spent.
pub(crate) fn take_scan_rows(rows: u64) -> bool {
    SCAN_ROWS_LEFT.with(|r| match r.get().checked_sub(rows) {
        Some(left) => {
            r.set(left);
            true
        }
        None => false,
    })
}

pub(crate) fn take() -> Context {
    DEADLINE.with(|d| d.set(None));
    CONTEXT.with(|c| std::mem::replace(&mut *c.borrow_mut(), Context::Idle))
}

pub(crate) fn deadline_passed() -> bool {
    DEADLINE
        .with(|d| d.get())
        .is_some_and(|deadline| Instant::now() > deadline)
}

/// Runs `f` on the current tables (read or write context).
pub(crate) fn with_tables<R>(f: impl FnOnce(&Tables) -> R) -> Result<R, String> {
    CONTEXT.with(|c| match &*c.borrow() {
        Context::Write { tables, .. } => Ok(f(tables)),
        Context::Read { tables } => Ok(f(tables)),
        Context::Idle => Err(NOT_IN_HANDLER.to_string()),
    })
}

/// Runs `f` on the owner's tables and write set; an error in a read handler.
pub(crate) fn with_write<R>(
    f: impl FnOnce(&mut Tables, &mut WriteSet) -> Result<R, String>,
) -> Result<R, String> {
    CONTEXT.with(|c| match &mut *c.borrow_mut() {
        Context::Write { tables, writes } => f(tables, writes),
        Context::Read { .. } => Err(READ_ONLY.to_string()),
        Context::Idle => Err(NOT_IN_HANDLER.to_string()),
    })
}
