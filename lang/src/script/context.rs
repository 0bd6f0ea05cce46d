//! The tables a running handler works on, reachable from the registered script functions.
//!
//! Registered Rhai functions get no pointer to the caller's data, so the handler's context lives
//! in a thread-local for the duration of one call: the thread running a write moves the tables and
//! write set in and takes them back after the call (a move of a few pointers); a reader thread installs the
//! snapshot it reads. Only one handler runs on a thread at a time, and the registered functions that
//! use the tables never call back into the engine, so the `RefCell` is never borrowed twice.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rhai::{EvalAltResult, Position};

use crate::state::fields::Fields;
use crate::state::key::Key;
use crate::state::schema::TableId;
use crate::state::table_set::TableSet;
use crate::state::tables::{Tables, WriteSet};

pub(crate) enum Context {
    Idle,
    Write {
        tables: Tables,
        writes: WriteSet,
    },
    /// A read on a snapshot, noting each table it reads (a live query re-runs only when one
    /// of them is written).
    Read {
        tables: Arc<Tables>,
        read: TableSet,
    },
}

impl Context {
    /// A read's context on `tables`, having read nothing yet.
    pub(crate) fn read(tables: Arc<Tables>) -> Context {
        Context::Read {
            tables,
            read: TableSet::default(),
        }
    }
}

thread_local! {
    static CONTEXT: RefCell<Context> = const { RefCell::new(Context::Idle) };
    /// The running handler's time budget (checked from `on_progress` and before scans).
    static DEADLINE: Cell<Option<Budget>> = const { Cell::new(None) };
    /// Rows the running handler may still read by scans: a scan is one operation to Rhai.
    static SCAN_ROWS_LEFT: Cell<u64> = const { Cell::new(0) };
    /// The thread's last reading of its CPU clock, and when (wall clock) it was taken.
    static LAST_CPU: Cell<Option<(Instant, Duration)>> = const { Cell::new(None) };
    /// Rhai operations the running handler had done at `on_progress`'s last look at the clock:
    /// where a call stopped for time, give or take the operations between two looks, for
    /// finding its place again (`diagnose`).
    static OPERATIONS: Cell<u64> = const { Cell::new(0) };
    /// What the running call gave the functions of `recursion` that nests deeper than the depth
    /// rule allows, and where: the first such value. Rhai ignores some of their errors, so the
    /// call stops at its next operation and ends with this as its error, whatever the script
    /// made of it.
    static TOO_DEEP: Cell<Option<(&'static str, Position)>> = const { Cell::new(None) };
}

/// Why a table operation could not run in this context.
pub(crate) const NOT_IN_HANDLER: &str = "tables can only be used inside a handler";
pub(crate) const READ_ONLY: &str =
    "this is a read handler (GET): it cannot write; use a write route (POST, PUT, DELETE, PATCH)";

/// A call's time budget: spent once its thread has run `budget` of CPU time in it. Reading the
/// thread's CPU clock is a system call, so the cheap wall clock is watched instead (every 256
/// operations), and the CPU clock read only once the wall clock has run the budget: it never
/// runs slower. If the thread spent part of that time waiting for a core, the call is not
/// stopped: what is left of its budget becomes a new wall-clock deadline. So a busy machine
/// delays a handler but does not fail it, and a runaway one is stopped after `budget` of work.
///
/// The start is not read per call either: that system call was about 1 µs of a 20 µs write on
/// this project's VM, once per handler call. A call starts from the thread's last reading when
/// it is at most [`stale_max`] old in wall time, which can only count more CPU time than the call
/// used (a thread's CPU clock never runs faster than the wall clock), never less: a call may be
/// stopped up to `stale_max` early, and is never let run longer.
#[derive(Clone, Copy, Debug)]
struct Budget {
    deadline: Instant,
    cpu_at_start: Duration,
    budget: Duration,
}

/// The CPU time the calling thread has run (CLOCK_THREAD_CPUTIME_ID).
fn thread_cpu() -> Duration {
    // SAFETY: clock_gettime writes only into the timespec we pass.
    let t = unsafe {
        let mut t: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t);
        t
    };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The thread's CPU clock, read and remembered as the last reading.
fn read_cpu(now: Instant) -> Duration {
    let cpu = thread_cpu();
    LAST_CPU.with(|l| l.set(Some((now, cpu))));
    cpu
}

/// How old (wall clock) the thread's last CPU reading may be to stand for a call's start: what
/// a call may be charged beyond what it ran, a 32nd of its budget and at most 1 ms.
fn stale_max(budget: Duration) -> Duration {
    (budget / 32).min(Duration::from_millis(1))
}

/// Installs a handler call's context, with its time budget starting now.
pub(crate) fn install(context: Context, budget: Duration, scan_rows: u64) {
    CONTEXT.with(|c| {
        let mut slot = c.borrow_mut();
        // One call at a time on a thread: installing over a running call's context would drop
        // its tables, and with them the caller's state.
        assert!(
            matches!(*slot, Context::Idle),
            "no call is running on this thread"
        );
        *slot = context;
    });
    let now = Instant::now();
    let cpu_at_start = match LAST_CPU.with(Cell::get) {
        Some((at, cpu)) if now.saturating_duration_since(at) <= stale_max(budget) => cpu,
        _ => read_cpu(now),
    };
    let budget = Budget {
        deadline: now + budget,
        cpu_at_start,
        budget,
    };
    DEADLINE.with(|d| d.set(Some(budget)));
    SCAN_ROWS_LEFT.with(|r| r.set(scan_rows));
    OPERATIONS.with(|o| o.set(0));
    TOO_DEEP.with(|t| t.set(None));
}

pub(crate) fn note_operations(operations: u64) {
    OPERATIONS.with(|o| o.set(operations));
}

pub(crate) fn operations() -> u64 {
    OPERATIONS.with(Cell::get)
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
    TOO_DEEP.with(|t| t.set(None));
    let context = CONTEXT.with(|c| std::mem::replace(&mut *c.borrow_mut(), Context::Idle));
    // Taken once per install: a second take would hand the caller empty tables for its own.
    assert!(
        !matches!(context, Context::Idle),
        "a call's context was installed"
    );
    context
}

/// Notes that the running call gave `what` (the subject of `depth::too_deep`'s sentence),
/// nested deeper than the depth rule allows, to a function at `at`, unless it did before.
pub(crate) fn note_too_deep(what: &'static str, at: Position) {
    TOO_DEEP.with(|t| {
        if t.get().is_none() {
            t.set(Some((what, at)));
        }
    });
}

/// Whether the running call has given a function a value too deep (checked at every operation).
pub(crate) fn was_too_deep() -> bool {
    TOO_DEEP.with(|t| t.get().is_some())
}

/// The error the running call ends with for the value too deep it gave a function, if it did.
pub(crate) fn take_too_deep() -> Option<Box<EvalAltResult>> {
    let (what, at) = TOO_DEEP.with(Cell::take)?;
    let mut error = crate::script::api_error::api_error(crate::state::depth::too_deep(what));
    error.set_position(at);
    Some(error)
}

/// Whether the running call has spent its time budget (see [`Budget`]).
pub(crate) fn deadline_passed() -> bool {
    DEADLINE.with(|d| {
        let Some(mut b) = d.get() else {
            return false;
        };
        let now = Instant::now();
        if now <= b.deadline {
            return false;
        }
        let used = read_cpu(now).saturating_sub(b.cpu_at_start);
        if used >= b.budget {
            return true;
        }
        b.deadline = now + (b.budget - used);
        d.set(Some(b));
        false
    })
}

/// Runs `f` on the current tables (read or write context) to read `table` (or one of its
/// indexes), which a read notes in its read set.
pub(crate) fn with_table<R>(table: TableId, f: impl FnOnce(&Tables) -> R) -> Result<R, String> {
    CONTEXT.with(|c| match &mut *c.borrow_mut() {
        Context::Write { tables, .. } => Ok(f(tables)),
        Context::Read { tables, read } => {
            read.insert(table);
            Ok(f(tables))
        }
        Context::Idle => Err(NOT_IN_HANDLER.to_string()),
    })
}

/// A row as a handler reads it: from the owner's tables remembering where it was (a save of it
/// then starts there), or from a read's snapshot.
pub(crate) fn get_row(table: TableId, key: &Key) -> Result<Option<Fields>, String> {
    CONTEXT.with(|c| match &mut *c.borrow_mut() {
        Context::Write { tables, .. } => Ok(tables.get_for_update(table, key).cloned()),
        Context::Read { tables, read } => {
            read.insert(table);
            Ok(tables.get(table, key).cloned())
        }
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

#[cfg(test)]
mod budget_tests {
    use super::*;

    /// A read's context on no tables: `install` and `take` hold one call's context at a time.
    fn idle_read() -> Context {
        Context::read(Arc::new(Tables::default()))
    }

    /// The CPU time the installed call's budget counts from.
    fn start_of_call() -> Duration {
        DEADLINE.with(Cell::get).expect("installed").cpu_at_start
    }

    /// Back-to-back calls share one reading of the CPU clock (no system call per call); a call
    /// that comes after the last reading is `stale_max` old reads the clock again. Wall time is
    /// measured around each pair, so a pair that the machine interrupted is tried again, never
    /// judged.
    #[test]
    fn calls_start_from_a_recent_reading_of_the_cpu_clock() {
        let budget = Duration::from_secs(10);
        assert_eq!(stale_max(budget), Duration::from_millis(1));
        let shared = (0..100).any(|_| {
            let before = Instant::now();
            install(idle_read(), budget, 0);
            let first = start_of_call();
            let _ = take();
            install(idle_read(), budget, 0);
            let second = start_of_call();
            let _ = take();
            if before.elapsed() > stale_max(budget) {
                return false;
            }
            assert_eq!(
                first, second,
                "a second call within 1 ms starts from the same reading"
            );
            assert!(thread_cpu() >= second);
            true
        });
        assert!(
            shared,
            "no two calls ran within 1 ms of each other in 100 tries"
        );

        let budget = Duration::from_micros(3200);
        install(idle_read(), budget, 0);
        let first = start_of_call();
        let _ = take();
        std::thread::sleep(stale_max(budget) * 2);
        install(idle_read(), budget, 0);
        assert_ne!(start_of_call(), first, "an old reading is taken again");
        let _ = take();
    }

    /// A call whose wall-clock budget ran out while its thread waited for a core (here: a
    /// deadline moved into the past) is not stopped; once the thread has run the budget of CPU
    /// time in it, it is. Nothing here depends on how fast the machine is: the loop runs until
    /// the thread's own CPU clock says so.
    #[test]
    fn time_spent_waiting_for_a_core_is_not_spent_budget() {
        let budget = Duration::from_millis(20);
        install(idle_read(), budget, 0);
        DEADLINE.with(|d| {
            let mut b = d.get().expect("installed");
            b.deadline = Instant::now() - Duration::from_secs(1);
            d.set(Some(b));
        });
        assert!(
            !deadline_passed(),
            "the wall clock ran out, but the call has used almost no CPU"
        );
        let start = thread_cpu();
        let mut spin = 0u64;
        while thread_cpu() - start < budget + Duration::from_millis(5) {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
        assert!(deadline_passed(), "the call has run its budget of CPU time");
        let _ = take();
        assert!(!deadline_passed(), "no call, no budget");
    }
}
