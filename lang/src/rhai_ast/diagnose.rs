//! Where a limit stopped a handler that Rhai ran.
//!
//! Rhai moves a limit's error to the call site of every script function it leaves, and the
//! handler's own call site is none: the position of the statement that hit the limit is lost.
//! So a call stopped by a limit runs again in an engine with a debugger that notes every
//! statement and call it reaches, up to the same limit: slower, but only for a call that already
//! failed.

use std::cell::Cell;

use std::sync::Arc;

use rhai::{ASTNode, Dynamic, Engine, EvalAltResult, Expr, Position, Stmt};

use crate::script::context::deadline_passed;
use crate::script::engine;
use crate::script::limits::{Limits, CLOCK_CHECK_OPERATIONS, SCAN_LIMIT};
use crate::state::schema::Schema;
use crate::state::tables::IndexDef;

/// What stopped the call, as far as it decides which position names the mistake.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// A call too deep or a scan over too many rows: the call that went past it.
    Call,
    /// Operations, sizes: the statement that was running.
    Statement,
    /// Time: the statement that was running once as many operations were done.
    Time,
}

/// The limit an error of a handler call is, if it is one.
pub(crate) fn limit_kind(error: &EvalAltResult) -> Option<Kind> {
    let mut error = error;
    while let EvalAltResult::ErrorInFunctionCall(_, _, inner, _) = error {
        error = inner;
    }
    match error {
        EvalAltResult::ErrorStackOverflow(_) => Some(Kind::Call),
        EvalAltResult::ErrorTerminated(value, _) => {
            let scan = value
                .read_lock::<rhai::ImmutableString>()
                .is_some_and(|s| s.as_str() == SCAN_LIMIT);
            Some(if scan { Kind::Call } else { Kind::Time })
        }
        EvalAltResult::ErrorTooManyOperations(_)
        | EvalAltResult::ErrorDataTooLarge(..)
        | EvalAltResult::ErrorTooManyVariables(_) => Some(Kind::Statement),
        _ => None,
    }
}

#[derive(Clone, Copy)]
struct Trace {
    /// The run stops at the first node reached with this many operations done.
    stop_at: u64,
    statement: Position,
    call: Position,
    nodes: u64,
    stopped: bool,
}

thread_local! {
    static TRACE: Cell<Option<Trace>> = const { Cell::new(None) };
}

/// Starts tracing a run on this thread, to stop once `stop_at` operations are done.
pub(crate) fn begin(stop_at: u64) {
    TRACE.with(|t| {
        t.set(Some(Trace {
            stop_at,
            statement: Position::NONE,
            call: Position::NONE,
            nodes: 0,
            stopped: false,
        }))
    });
}

/// Whether the traced run has gone past the operation it was to stop at without reaching a
/// node there (a loop with nothing in it): the node reached at that operation stops it first,
/// where it can be noted.
pub(crate) fn past_stop(operations: u64) -> bool {
    TRACE.with(|t| t.get().is_some_and(|trace| operations > trace.stop_at))
}

/// Ends the trace: where the run was when it stopped, as `kind` names it (`None`: it reached
/// no statement).
pub(crate) fn end(kind: Kind) -> Option<Position> {
    let trace = TRACE.with(|t| t.take())?;
    let position = match kind {
        Kind::Call if !trace.call.is_none() => trace.call,
        _ => trace.statement,
    };
    (!position.is_none()).then_some(position)
}

/// Gives `engine` the debugger that traces: a step at every node, which notes it.
pub(crate) fn register(engine: &mut rhai::Engine) {
    #[allow(deprecated)] // Rhai marks the debugger API volatile, not deprecated.
    engine.register_debugger(
        |_, debugger| debugger,
        |context, _, node, _, position| {
            let operations = context.global_runtime_state().num_operations();
            let stop = TRACE.with(|t| {
                let Some(mut trace) = t.get() else {
                    return false;
                };
                // Rhai reports no node for a statement that is an expression (`s.pad(..);`), only
                // for the expression: a call or a chain counts as the statement running, so that
                // a size limit hit inside it names it rather than the statement before.
                match node {
                    ASTNode::Stmt(Stmt::FnCall(call, _)) | ASTNode::Expr(Expr::FnCall(call, _))
                        if !call.is_operator_call() =>
                    {
                        trace.call = position;
                        trace.statement = position;
                    }
                    ASTNode::Expr(Expr::MethodCall(..)) => {
                        trace.call = position;
                        trace.statement = position;
                    }
                    ASTNode::Expr(Expr::Dot(..)) => trace.statement = position,
                    ASTNode::Stmt(Stmt::Block(..)) | ASTNode::Stmt(Stmt::Noop(..)) => {}
                    ASTNode::Stmt(_) => trace.statement = position,
                    _ => {}
                }
                trace.nodes += 1;
                trace.stopped = operations >= trace.stop_at
                    || (trace.nodes % 256 == 0 && crate::script::context::deadline_passed());
                t.set(Some(trace));
                trace.stopped
            });
            if stop {
                return Err(EvalAltResult::ErrorTerminated(Dynamic::UNIT, position).into());
            }
            Ok(rhai::debugger::DebuggerCommand::StepInto)
        },
    );
}

/// An engine like [`build`]'s that notes where a call goes (`diagnose`), for running a call that
/// a limit stopped again: with no limit of operations or time of its own, since the trace stops
/// the run where the first run stopped.
pub(crate) fn build_tracing(schema: &Arc<Schema>, indexes: &[IndexDef], limits: &Limits) -> Engine {
    let mut engine = engine::build(schema, indexes, limits);
    engine.set_max_operations(0);
    // The trace stops the run at its nodes; this stops a loop with none in it.
    engine.on_progress(|operations| {
        let stop = past_stop(operations)
            || (operations % CLOCK_CHECK_OPERATIONS == 0 && deadline_passed());
        stop.then_some(Dynamic::UNIT)
    });
    register(&mut engine);
    engine
}
