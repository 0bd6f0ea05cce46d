//! The call chain of a handler: on a stack deep enough, in the world of the call, compiled
//! where it can be and in Rhai where it cannot, and traced again when a limit stopped it.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::Ordering;

use rhai::{CallFnOptions, Dynamic, Engine, Position, Scope};

use super::{App, CallRequest, Handler};
use crate::rhai_ast::compiled::{Env, Stop, WrittenAnswer};
use crate::rhai_ast::diagnose;
use crate::script::context::{self, Context};
use crate::script::error::{from_eval, is_refusal, panic_message, HandlerError};
use crate::script::json::Json;
use crate::script::limits::TIME_LIMIT;
use crate::script::request::Request;
use crate::script::respond::{Answer, Response};
use crate::script::value::{self, RequestFields};
use crate::script::world;
use crate::state::schema::TableId;
use crate::state::tables::{Tables, WriteSet};

impl App {
    pub(super) fn write_with(
        &self,
        handler: &str,
        request: CallRequest<'_>,
        tables: &mut Tables,
        writes: &mut WriteSet,
    ) -> Result<Answer, HandlerError> {
        // A change left from the call before would be logged twice, or rolled back with this
        // call's: the runtime encodes a write set and clears it before the next call.
        assert!(writes.is_empty(), "the write set is empty between calls");
        let table_count = tables.table_count();
        let context = Context::Write {
            tables: std::mem::take(tables),
            writes: std::mem::take(writes),
        };
        let result = self.call(handler, request, context, |context| {
            if let Context::Write {
                tables: t,
                writes: w,
            } = context
            {
                *tables = t;
                *writes = w;
            }
        });
        // The context went into the call by value: whatever ended it, it must have come back.
        assert_eq!(
            tables.table_count(),
            table_count,
            "the call gave the tables back"
        );
        if result.is_err() {
            tables.roll_back(writes);
        }
        debug_assert!(
            tables.indexes_hold_rows_of(writes),
            "after {handler}: an index does not hold the rows the call changed"
        );
        result
    }

    /// Runs a handler on this thread's stack or, when less is left on it than the limits may
    /// need, on a fresh one: the runtime runs writes on whichever thread queued them, and an
    /// embedder's thread may have a small stack. Overflowing it would abort the process.
    pub(super) fn call(
        &self,
        handler: &str,
        request: CallRequest<'_>,
        context: Context,
        restore: impl FnOnce(Context),
    ) -> Result<Answer, HandlerError> {
        let needed = self.limits.stack_bytes();
        stacker::maybe_grow(needed, needed.saturating_mul(2), || {
            self.call_here(handler, request, context, restore)
        })
    }

    fn call_here(
        &self,
        handler: &str,
        mut request: CallRequest<'_>,
        context: Context,
        restore: impl FnOnce(Context),
    ) -> Result<Answer, HandlerError> {
        let Some(Handler { definition, fields }) = self.handlers.get(handler) else {
            restore(context);
            return Err(HandlerError::NoSuchHandler {
                handler: handler.to_string(),
            });
        };
        // One `now()` for the whole call, a fallback to Rhai included.
        world::begin_call(
            &self.world,
            (&self.settings, &self.handler_names),
            self.log.as_ref(),
            handler,
            &request.get().head.id,
        );
        let mut answer = self.call_in_world(
            handler,
            definition,
            (&mut request, *fields),
            context,
            restore,
        );
        if let Some((table, text)) = world::take_string_key_miss() {
            self.hint_string_key(&mut answer, table, &text);
        }
        if let (Err(error), true) = (&mut answer, self.settings.has_secrets()) {
            error.redact(&self.settings);
        }
        world::end_call();
        answer
    }

    /// A 4xx after a key of digits missed a table that has the integer key: the answer says
    /// that the key was a string (a path parameter is one unless its route types it), and so
    /// does a warning in the log.
    fn hint_string_key(
        &self,
        answer: &mut Result<Answer, HandlerError>,
        table: TableId,
        text: &str,
    ) {
        let Err(HandlerError::Thrown {
            status: 400..=499,
            body,
        }) = answer
        else {
            return;
        };
        let table = &self.schema.tables[table as usize].name;
        let hint = format!(
            "{table} has no row at the string key \"{text}\" but has one at the integer {text}: \
             a path parameter is a string unless its route declares it an integer ({{name:int}})"
        );
        world::log(world::Level::Warn, &hint);
        if let serde_json::Value::Object(fields) = body {
            fields.entry("hint").or_insert(hint.into());
        }
    }

    fn call_in_world(
        &self,
        handler: &str,
        definition: &Position,
        (request, fields): (&mut CallRequest<'_>, RequestFields),
        context: Context,
        restore: impl FnOnce(Context),
    ) -> Result<Answer, HandlerError> {
        let mut context = context;
        if let Some(compiled) = self.program.handler(handler).filter(|_| self.use_compiled) {
            let (decided, back) =
                self.call_compiled(compiled, handler, (request, fields), context, definition);
            context = back;
            if let Some(result) = decided {
                restore(context);
                return result;
            }
            // Not decided there: undo what the call wrote and logged, and run it in Rhai.
            self.fallbacks.fetch_add(1, Ordering::Relaxed);
            world::restart_call();
            if let Context::Write { tables, writes } = &mut context {
                tables.roll_back(writes);
            }
        }
        self.call_rhai(
            handler,
            (request.get(), fields),
            definition,
            context,
            restore,
        )
    }

    /// Runs the compiled form of a handler: its answer, or `None` for a call that Rhai must
    /// decide, with the context taken back either way.
    fn call_compiled(
        &self,
        compiled: usize,
        handler: &str,
        (request, fields): (&mut CallRequest<'_>, RequestFields),
        context: Context,
        definition: &Position,
    ) -> (Option<Result<Answer, HandlerError>>, Context) {
        context::install(
            context,
            self.limits.wall_clock_max,
            self.limits.scan_rows_max,
        );
        let env = Env {
            engine: &self.engine,
            schema: &self.schema,
            limits: &self.limits,
        };
        // A body lent to the call comes back with its argument, unless a panic ends the call.
        let lend =
            matches!(request, CallRequest::Lent(_)) && self.program.keeps_first_parameter(compiled);
        let result = panic::catch_unwind(AssertUnwindSafe(|| {
            let argument = match &mut *request {
                CallRequest::Lent(request) if lend => value::request_taking_body(request, fields),
                request => value::request_to_dynamic(request.get(), fields),
            };
            let (result, back) = self.program.run(compiled, argument, &env);
            if let (true, CallRequest::Lent(request)) = (lend, &mut *request) {
                let back = back.expect("a handler that keeps its parameter gives it back");
                value::give_body_back(request, back);
            }
            result
        }));
        // Whatever stopped the call, once its wall-clock budget is spent (a scan notices it too)
        // Rhai would only spend a second one before stopping it.
        let out_of_time = context::deadline_passed();
        let context = context::take();
        let error = match result {
            Ok(Ok(value)) => return (Some(self.answer(handler, value)), context),
            // As Rhai reports a `throw`: the value, without a position. A bad status is a
            // script error that Rhai reports at the `throw`.
            Ok(Err(Stop::Throw(value))) if is_refusal(&value, &self.schema) => {
                rhai::EvalAltResult::ErrorRuntime(value, Position::NONE)
            }
            Ok(Err(Stop::OutOfTime(at))) => time_limit(at),
            Ok(Err(Stop::Fallback)) if out_of_time => time_limit(Position::NONE),
            Ok(Err(_)) => return (None, context),
            Err(payload) => {
                let panicked = HandlerError::Panicked {
                    handler: handler.to_string(),
                    message: panic_message(payload.as_ref()),
                };
                return (Some(Err(panicked)), context);
            }
        };
        let error = from_eval(&error, handler, *definition, &self.sources, &self.schema);
        (Some(Err(error)), context)
    }

    fn call_rhai(
        &self,
        handler: &str,
        request: (&Request, RequestFields),
        definition: &Position,
        context: Context,
        restore: impl FnOnce(Context),
    ) -> Result<Answer, HandlerError> {
        context::install(
            context,
            self.limits.wall_clock_max,
            self.limits.scan_rows_max,
        );
        let argument = value::request_to_dynamic(request.0, request.1);
        let result = self.run_rhai(&self.engine, handler, argument);
        // A value too deep for the functions of `recursion` is the call's error: Rhai passes
        // on some of their errors and not others, and the engine stops such a call with a
        // termination.
        let result = match (result, context::take_too_deep()) {
            (Ok(_), Some(too_deep)) => Ok(Err(too_deep)),
            (result, _) => result,
        };
        let mut context = context::take();
        let error = match result {
            Ok(Ok(value)) => {
                restore(context);
                return self.answer(handler, value);
            }
            Ok(Err(error)) => error,
            Err(message) => {
                restore(context);
                return Err(HandlerError::Panicked {
                    handler: handler.to_string(),
                    message,
                });
            }
        };
        let mut at = *definition;
        if let Some(kind) = diagnose::limit_kind(&error) {
            let (found, back) = self.find_limit(handler, request, context, kind);
            context = back;
            at = found.unwrap_or(at);
        }
        restore(context);
        Err(from_eval(&error, handler, at, &self.sources, &self.schema))
    }

    /// Calls `handler` in `engine` with the thread's handler context already installed. A panic
    /// is a bug in Pure or in Rhai: caught here so that the caller can take the context back
    /// (the tables return to it, the thread stays usable) and decide what the state is worth.
    fn run_rhai(
        &self,
        engine: &Engine,
        handler: &str,
        argument: Dynamic,
    ) -> Result<Result<Dynamic, Box<rhai::EvalAltResult>>, String> {
        let options = CallFnOptions::new().eval_ast(false).rewind_scope(true);
        panic::catch_unwind(AssertUnwindSafe(|| {
            engine.call_fn_with_options::<Dynamic>(
                options,
                &mut Scope::new(),
                &self.ast,
                handler,
                (argument,),
            )
        }))
        .map_err(|payload| panic_message(payload.as_ref()))
    }

    /// Where a call that a limit stopped was when it stopped: the call runs again from the
    /// same state, traced, until as many operations are done (for a time limit), the same
    /// limit stops it, or its wall-clock budget is spent. What it changes and logs is undone before and left to be undone after,
    /// as for any failed call.
    fn find_limit(
        &self,
        handler: &str,
        request: (&Request, RequestFields),
        mut context: Context,
        kind: diagnose::Kind,
    ) -> (Option<Position>, Context) {
        let operations = context::operations();
        if let Context::Write { tables, writes } = &mut context {
            tables.roll_back(writes);
        }
        world::restart_call();
        let engine = self.tracing.get_or_init(|| {
            crate::rhai_ast::diagnose::build_tracing(&self.schema, &self.indexes, &self.limits)
        });
        // No longer than the call's own budget, so that a runaway call holds its thread (for a
        // write, the owner) at most twice that. The traced run is slower: one cut short there
        // names the last statement it reached, which in a runaway loop is in the loop.
        context::install(
            context,
            self.limits.wall_clock_max,
            self.limits.scan_rows_max,
        );
        let stop_at = match kind {
            diagnose::Kind::Time if operations > 0 => operations,
            _ => self.limits.operations_max.saturating_add(1),
        };
        diagnose::begin(stop_at);
        let argument = value::request_to_dynamic(request.0, request.1);
        let _ = self.run_rhai(engine, handler, argument);
        let found = diagnose::end(kind);
        (found, context::take())
    }
    fn answer(&self, handler: &str, value: Dynamic) -> Result<Answer, HandlerError> {
        if value.is::<WrittenAnswer>() {
            return Ok(Answer::ok(value.cast::<WrittenAnswer>().0));
        }
        let answer = match value.read_lock::<Response>() {
            Some(response) => response.answer(&self.schema),
            None => Json::write_value(&value, &self.schema).map(Answer::ok),
        };
        answer.map_err(|message| HandlerError::Script {
            handler: handler.to_string(),
            file: String::new(),
            line: 0,
            column: 0,
            message: format!("the return value: {message}"),
        })
    }
}

/// The error Rhai stops a call with when its wall-clock budget is spent.
fn time_limit(at: Position) -> rhai::EvalAltResult {
    rhai::EvalAltResult::ErrorTerminated(TIME_LIMIT.into(), at)
}
