//! The Rhai engine of an app: the sandbox and the limits.
//!
//! `Engine::new()` gives scripts no file, network or process access; this module keeps it that way
//! (no modules: rhai is built with `no_module`, so `import` does not even parse, and the default
//! resolver, which would read files, does not exist; no `eval`; `print`, `debug`, `warn` and `error` go to the app's log sink, if any) and bounds what one handler call may consume, so that a runaway handler stops with an
//! error for its own request and the owner goes on.

use std::sync::Arc;
use std::time::Duration;

use rhai::{Dynamic, Engine, OptimizationLevel};

use crate::context::deadline_passed;
use crate::depth::DEPTH_MAX;
use crate::schema::Schema;

/// What one handler call may consume.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Rhai operations per call. Measured here (`pure-bench owner --only limits`): about 31
    /// million a second in a tight script loop, so one million stop it after about 30 ms.
    pub operations_max: u64,
    /// Time budget per call: a backstop for time spent in native calls (scans, data-size
    /// checks of growing arrays) that the operation count does not see. A call is stopped once
    /// both the wall clock and its thread's CPU clock have run this long in it: the wall clock
    /// is checked every 256 operations and before every scan, the CPU clock only after the
    /// wall clock has run out. Time the thread spends waiting for a core is not counted, so a
    /// busy machine delays legitimate handlers but does not fail them (the error still names
    /// the limit "wall-clock time"). The CPU time is counted from a reading at most a 32nd of
    /// this (and 1 ms) old, so it may overcount by that much: see `context::Budget`.
    pub wall_clock_max: Duration,
    /// Script function call depth. Rhai recurses on the native stack: a handler call that finds
    /// less than [`Limits::stack_bytes`] left on its thread's stack runs on a fresh one.
    pub call_levels_max: usize,
    /// Expression nesting (statements, inside functions).
    pub expr_depth_max: (usize, usize),
    /// Rows all scans of one call may return together (each scan is a single Rhai operation).
    pub scan_rows_max: u64,
    pub string_bytes_max: usize,
    pub array_items_max: usize,
    pub map_items_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            operations_max: 1_000_000,
            wall_clock_max: Duration::from_millis(100),
            call_levels_max: 32,
            expr_depth_max: (64, 32),
            scan_rows_max: 100_000,
            string_bytes_max: 1 << 20,
            array_items_max: 50_000,
            map_items_max: 50_000,
        }
    }
}

/// The most an app's `"limits"` may ask for: the server's hard caps. Past them a handler could
/// hold the owner for seconds, or grow a value to a size that the heap of a small server would
/// not hold, and nothing else could run meanwhile.
pub const LIMIT_CAPS: Limits = Limits {
    operations_max: 100_000_000,
    wall_clock_max: Duration::from_secs(10),
    call_levels_max: 64,
    expr_depth_max: (64, 32),
    scan_rows_max: 10_000_000,
    string_bytes_max: 16 << 20,
    array_items_max: 1_000_000,
    map_items_max: 1_000_000,
};

impl Limits {
    /// These limits with those of a manifest's `"limits"` object (`null`: none) in their
    /// place; an error names a key that is not a limit or a value that is not an integer from 1
    /// to its cap.
    pub fn with_manifest(mut self, limits: &serde_json::Value) -> Result<Limits, String> {
        if limits.is_null() {
            return Ok(self);
        }
        let names = "operations, wall_clock_ms, call_depth, scan_rows, string_bytes, \
                     array_items, map_items";
        let limits = limits
            .as_object()
            .ok_or_else(|| format!("\"limits\" must be an object of {names}"))?;
        let caps = LIMIT_CAPS;
        for (name, value) in limits {
            let cap = match name.as_str() {
                "operations" => caps.operations_max,
                "wall_clock_ms" => caps.wall_clock_max.as_millis() as u64,
                "call_depth" => caps.call_levels_max as u64,
                "scan_rows" => caps.scan_rows_max,
                "string_bytes" => caps.string_bytes_max as u64,
                "array_items" => caps.array_items_max as u64,
                "map_items" => caps.map_items_max as u64,
                _ => {
                    return Err(format!(
                        "limits: unknown limit {name:?}: the limits are {names}"
                    ))
                }
            };
            let n = value
                .as_u64()
                .filter(|n| (1..=cap).contains(n))
                .ok_or_else(|| {
                    format!("limits.{name} must be an integer from 1 to {cap} (the server's cap), not {value}")
                })?;
            match name.as_str() {
                "operations" => self.operations_max = n,
                "wall_clock_ms" => self.wall_clock_max = Duration::from_millis(n),
                "call_depth" => self.call_levels_max = n as usize,
                "scan_rows" => self.scan_rows_max = n,
                "string_bytes" => self.string_bytes_max = n as usize,
                "array_items" => self.array_items_max = n as usize,
                _ => self.map_items_max = n as usize,
            }
        }
        Ok(self)
    }
}

/// Native stack per level of expression nesting, per script call level: a handler recursing to
/// the call-depth limit (32) with its recursive call as deep in an expression as the limit in
/// functions (32) allows needed up to 1.1 MB in a release build (a chain of additions; nested
/// parentheses, blocks, arrays, maps and calls needed 0.3-0.9 MB), about 1.1 KiB per level of
/// each. An unoptimized build needed 2.9-6.0 MB; debug assertions stand in for it, so a test
/// build (optimized, with debug assertions) overestimates, which is safe.
const STACK_PER_NESTING: usize = if cfg!(debug_assertions) {
    12 << 10
} else {
    2 << 10
};
/// Native stack per level of a value that Rhai's functions making it into text or comparing it
/// walk, a native call a level (`recursion`): 1.9 to 2.0 KB measured, in a release build and in
/// an optimized one with debug assertions. Counted as two levels of nesting, so about twice the
/// measure, as nesting is; the depth rule stops those walks at `DEPTH_MAX` levels.
const STACK_PER_VALUE_LEVEL: usize = 2 * STACK_PER_NESTING;
/// The handler's own frames, the compiled handlers' and the engine's, above the first level.
const STACK_BASE: usize = 256 << 10;
/// The most `stack_bytes` asks for, also for limits that leave expression nesting unlimited
/// (0, for Rhai) or would need more: a fresh stack is only reserved, so this costs address
/// space, not memory.
const STACK_MAX: usize = 256 << 20;

impl Limits {
    /// The native stack a handler call may need within these limits, about twice the most
    /// measured: 2.9 MiB at the defaults in a release build (16 MiB with debug assertions). The
    /// nesting of the handler's body, then of each call level, and at the deepest of them, the
    /// deepest walk of a value through the engine.
    pub fn stack_bytes(&self) -> usize {
        let (body, function) = self.expr_depth_max;
        if body == 0 || function == 0 {
            return STACK_MAX;
        }
        let nesting = body.saturating_add(self.call_levels_max.saturating_mul(function));
        STACK_BASE
            .saturating_add(DEPTH_MAX * STACK_PER_VALUE_LEVEL)
            .saturating_add(nesting.saturating_mul(STACK_PER_NESTING))
            .min(STACK_MAX)
    }
}

/// Operations between two wall-clock checks (a power of two: the check is a mask).
const CLOCK_CHECK_OPERATIONS: u64 = 256;

pub(crate) fn build(
    schema: &Arc<Schema>,
    indexes: &[crate::tables::IndexDef],
    limits: &Limits,
) -> Engine {
    let mut engine = Engine::new();
    engine.disable_symbol("eval");
    // `Simple` does not evaluate registered functions at compile time: `Full` would call the
    // table API while compiling, with no tables there.
    engine.set_optimization_level(OptimizationLevel::Simple);
    // Rhai's string interner is one locked cache shared by every thread; with more distinct
    // strings than its 256 entries (player names, say) it rescans itself after every few new
    // ones: 12% of the owner's time in the scoreboard at 64 connections
    // (docs/research/002-serve-cpu-per-post.md). Strings in handlers are short-lived anyway.
    engine.set_max_strings_interned(0);
    engine.set_strict_variables(true);

    engine.set_max_operations(limits.operations_max);
    engine.set_max_call_levels(limits.call_levels_max);
    engine.set_max_expr_depths(limits.expr_depth_max.0, limits.expr_depth_max.1);
    engine.set_max_string_size(limits.string_bytes_max);
    engine.set_max_array_size(limits.array_items_max);
    engine.set_max_map_size(limits.map_items_max);
    engine.on_progress(|operations| {
        // A value too deep for the depth rule's functions (`recursion`) ends the call with
        // that error (`App::call_rhai`), whatever Rhai made of it: it stops here, before
        // anything else runs.
        if crate::context::was_too_deep() {
            return Some(Dynamic::UNIT);
        }
        if operations % CLOCK_CHECK_OPERATIONS == 0 {
            crate::context::note_operations(operations);
            if deadline_passed() {
                return Some(Dynamic::from(TIME_LIMIT));
            }
        }
        None
    });

    crate::api::register(&mut engine, schema, indexes);
    crate::respond::register(&mut engine);
    crate::world::register(&mut engine);
    crate::arith::register(&mut engine);
    crate::recursion::register(&mut engine);
    // Test builds only, and even there only when asked for at run time: `cargo test` builds the
    // pure-serve binary with the feature, and that binary must not offer it when run by hand.
    #[cfg(any(test, feature = "fault-injection"))]
    if cfg!(test) || std::env::var_os("PURE_FAULT_INJECTION").is_some() {
        eprintln!(
            "pure-lang: fault injection is on: scripts can call fault_panic() (a test build)"
        );
        engine.register_fn("fault_panic", |message: &str| -> bool {
            panic!("fault injection: {message}")
        });
    }
    engine
}

/// An engine like [`build`]'s that notes where a call goes (`diagnose`), for running a call that
/// a limit stopped again: with no limit of operations or time of its own, since the trace stops
/// the run where the first run stopped.
pub(crate) fn build_tracing(
    schema: &Arc<Schema>,
    indexes: &[crate::tables::IndexDef],
    limits: &Limits,
) -> Engine {
    let mut engine = build(schema, indexes, limits);
    engine.set_max_operations(0);
    // The trace stops the run at its nodes; this stops a loop with none in it.
    engine.on_progress(|operations| {
        let stop = crate::diagnose::past_stop(operations)
            || (operations % CLOCK_CHECK_OPERATIONS == 0 && deadline_passed());
        stop.then_some(Dynamic::UNIT)
    });
    crate::diagnose::register(&mut engine);
    engine
}

/// The value `on_progress` stops a handler with when its wall-clock budget is spent.
pub(crate) const TIME_LIMIT: &str = "wall-clock time";
/// The value a scan stops a handler with when its scan budget is spent.
pub(crate) const SCAN_LIMIT: &str = "rows scanned";
