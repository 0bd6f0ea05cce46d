//! The Rhai engine of an app: the sandbox, and the limits of `limits` set on it.
//!
//! `Engine::new()` gives scripts no file, network or process access; this module keeps it that way
//! (no modules: rhai is built with `no_module`, so `import` does not even parse, and the default
//! resolver, which would read files, does not exist; no `eval`; `print`, `debug`, `warn` and `error` go to the app's log sink, if any) and bounds what one handler call may consume, so that a runaway handler stops with an
//! error for its own request and the owner goes on.

use std::sync::Arc;

use rhai::{Dynamic, Engine, OptimizationLevel};

use crate::script::context::deadline_passed;
use crate::script::limits::{Limits, CLOCK_CHECK_OPERATIONS, TIME_LIMIT};
use crate::state::schema::Schema;
use crate::state::tables::IndexDef;

pub(crate) fn build(schema: &Arc<Schema>, indexes: &[IndexDef], limits: &Limits) -> Engine {
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
        if crate::script::context::was_too_deep() {
            return Some(Dynamic::UNIT);
        }
        if operations % CLOCK_CHECK_OPERATIONS == 0 {
            crate::script::context::note_operations(operations);
            if deadline_passed() {
                return Some(Dynamic::from(TIME_LIMIT));
            }
        }
        None
    });

    crate::script::api::register(&mut engine, schema, indexes);
    crate::script::schedule::register(&mut engine, schema, limits);
    crate::script::respond::register(&mut engine);
    crate::script::world::register(&mut engine);
    crate::script::arith::register(&mut engine);
    crate::script::int_set::register(&mut engine);
    crate::script::recursion::register(&mut engine);
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
