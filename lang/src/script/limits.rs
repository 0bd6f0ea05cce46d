//! What one handler call may consume, and the values a call stopped by a budget ends with.

use std::time::Duration;

use crate::state::depth::DEPTH_MAX;

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
    /// Schedule entries pending at once in the app (`schedule`, `schedule_at`).
    pub schedules_pending_max: u64,
    /// Schedule entries one write may make.
    pub schedules_per_call_max: u64,
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
            schedules_pending_max: 1_000_000,
            schedules_per_call_max: 1_000,
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
    schedules_pending_max: 100_000_000,
    schedules_per_call_max: 1_000_000,
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
                     array_items, map_items, schedules_pending, schedules_per_call";
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
                "schedules_pending" => caps.schedules_pending_max,
                "schedules_per_call" => caps.schedules_per_call_max,
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
                "schedules_pending" => self.schedules_pending_max = n,
                "schedules_per_call" => self.schedules_per_call_max = n,
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
pub(crate) const CLOCK_CHECK_OPERATIONS: u64 = 256;

/// The value `on_progress` stops a handler with when its wall-clock budget is spent.
pub(crate) const TIME_LIMIT: &str = "wall-clock time";
/// The value a scan stops a handler with when its scan budget is spent.
pub(crate) const SCAN_LIMIT: &str = "rows scanned";
