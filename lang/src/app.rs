//! An app: its manifest, its compiled scripts, and calling its handlers.

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use rhai::{
    ASTNode, CallFnOptions, Dynamic, Engine, Expr, ImmutableString, Position, Scope, Stmt, AST,
};
use serde_json::Value;

use crate::body::BodyError;
use crate::compiled::{Env, Program, Stop};
use crate::context::{self, Context};
use crate::cors::Cors;
use crate::diagnose;
use crate::engine::{self, Limits};
use crate::error::{from_eval, is_refusal, HandlerError, LoadError, SourceMap};
use crate::respond::{Answer, Response};
use crate::schema::{Schema, TableId, TableSchema};
use crate::shape::Declared;
use crate::syntax;
use crate::tables::{IndexDef, IndexSource, Tables, WriteSet};
use crate::value::{self, RequestFields};
use crate::world::{self, LogSink, World};

/// GET routes are read handlers (a snapshot, any thread); every other method is a write handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandlerKind {
    Read,
    Write,
}

#[derive(Clone, Debug)]
pub struct Route {
    /// Upper case: "GET", "POST", "PUT", "DELETE", "PATCH".
    pub method: String,
    /// The pattern as in the manifest, e.g. "/players/{player}".
    pub path: String,
    pub handler: String,
    pub kind: HandlerKind,
    /// The types its body, query and path parameters must have (none declared: anything).
    pub declared: Arc<Declared>,
}

/// The request of a call: borrowed, or lent by a caller done with it (see
/// [`App::run_write_taking_body`]).
enum CallRequest<'a> {
    Borrowed(&'a Request),
    Lent(&'a mut Request),
}

impl CallRequest<'_> {
    fn get(&self) -> &Request {
        match self {
            CallRequest::Borrowed(request) => request,
            CallRequest::Lent(request) => request,
        }
    }
}

/// What a handler receives, as the Rhai map `#{params, query, body, method, path, headers,
/// peer, id}`.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// Path parameters, already percent-decoded: text, or the declared type's value.
    pub params: Vec<(String, Dynamic)>,
    /// Query string pairs, already percent-decoded: text, or the declared type's value (a
    /// declared default stands in for an absent one).
    pub query: Vec<(String, Dynamic)>,
    /// The body as script values, unit when there is none: from `App::request`, which
    /// checked it against the handlers' limits.
    pub body: Dynamic,
    /// What the HTTP layer knows of the request besides its route and body; empty strings and
    /// no headers for a request that did not come over HTTP.
    pub head: Box<Head>,
}

/// The request line, the headers, the peer and the request's id.
///
/// Script strings from the start, made on the thread that read the request, so that handing
/// them to a handler on the owner copies nothing.
#[derive(Clone, Debug, Default)]
pub struct Head {
    /// Upper case, as sent: "GET", "POST", ...
    pub method: ImmutableString,
    /// The path as sent, without the query string (still percent-encoded).
    pub path: ImmutableString,
    /// Names in lower case, each once; a repeated header's values joined in the order sent
    /// with ", " (a cookie's with "; "), as HTTP lets a recipient combine them.
    pub headers: Vec<(ImmutableString, ImmutableString)>,
    /// The peer's IP address.
    pub peer: ImmutableString,
    /// The request's id: the client's `x-request-id` when it sent a usable one, else one the
    /// server made. Sent back as `x-request-id`.
    pub id: ImmutableString,
}

/// A loaded, compiled app. `Send + Sync`: one engine and one AST serve every thread.
pub struct App {
    name: String,
    routes: Vec<Route>,
    schema: Arc<Schema>,
    engine: Engine,
    /// The engine that runs a call stopped by a limit again to find where it stopped: made the
    /// first time one is.
    tracing: OnceLock<Engine>,
    ast: AST,
    sources: SourceMap,
    /// Functions callable as handlers (defined with exactly one parameter), with the position of
    /// their definition: limit errors arrive without a position of their own (Rhai moves them to
    /// the call site, which for the handler itself is none), so they name the handler's.
    handlers: HashMap<String, Handler>,
    limits: Limits,
    /// The handlers compiled to closures (`compiled/`); the others run in Rhai.
    program: Program,
    /// Off: every handler runs in Rhai (differential tests, benchmarks).
    use_compiled: bool,
    /// Compiled calls that were handed to Rhai (an error, a limit, an uncovered case).
    fallbacks: AtomicU64,
    /// Where `now()`, `uuid()` and `random()` take their values.
    world: World,
    /// Where handlers' log lines go; nowhere without one.
    log: Option<Arc<dyn LogSink>>,
    /// Which other origins' pages may call the app (the manifest's `"cors"`).
    cors: Option<Cors>,
    /// The secondary indexes the manifest declares, which the runtime builds on its tables.
    indexes: Vec<IndexDef>,
}

/// What the app knows of a function callable as a handler.
struct Handler {
    definition: Position,
    /// The entries of the request map it can observe: the others are not built for it.
    fields: RequestFields,
}

/// How a handler runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Execution {
    /// Compiled to closures; a case the compiled code does not decide re-runs in Rhai.
    Compiled,
    /// In Rhai's evaluator, with the first construct the compiler does not cover.
    Interpreted { reason: String },
}

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "DELETE", "PATCH"];

impl App {
    /// Reads `app.json`, compiles every `.rhai` file of `dir`, and checks that every route names
    /// a function defined with one parameter.
    pub fn load(dir: &Path) -> Result<App, LoadError> {
        Self::load_with(dir, Limits::default())
    }

    pub fn load_with(dir: &Path, limits: Limits) -> Result<App, LoadError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| LoadError::Io { path, source }
        };
        let manifest_path = dir.join("app.json");
        let manifest = std::fs::read_to_string(&manifest_path).map_err(io(&manifest_path))?;
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io(dir))? {
            let path = entry.map_err(io(dir))?.path();
            if path.extension().is_some_and(|e| e == "rhai") {
                let text = std::fs::read_to_string(&path).map_err(io(&path))?;
                let name = path.file_name().expect("a read_dir entry has a name");
                files.push((name.to_string_lossy().into_owned(), text));
            }
        }
        Self::from_sources(&manifest, files, limits).map_err(|e| match e {
            LoadError::Manifest { message, at, .. } => LoadError::Manifest {
                path: manifest_path,
                at,
                message,
            },
            other => other,
        })
    }

    /// The same from text in memory: the manifest and `(file name, script)` pairs.
    pub fn from_sources(
        manifest: &str,
        mut files: Vec<(String, String)>,
        limits: Limits,
    ) -> Result<App, LoadError> {
        let text = manifest;
        let bad = |message: String| LoadError::Manifest {
            path: "app.json".into(),
            at: manifest_position(text, &message),
            message,
        };
        let manifest: Value = serde_json::from_str(manifest).map_err(|e| LoadError::Manifest {
            path: "app.json".into(),
            at: (e.line() > 0).then(|| (e.line(), e.column())),
            message: e.to_string(),
        })?;
        check_manifest_keys(&manifest).map_err(bad)?;
        let limits = limits.with_manifest(&manifest["limits"]).map_err(bad)?;
        let name = manifest["name"]
            .as_str()
            .ok_or_else(|| bad("no \"name\" string".into()))?;
        let routes = parse_routes(&manifest["routes"]).map_err(bad)?;
        let methods: Vec<String> = routes.iter().map(|r| r.method.clone()).collect();
        let cors = Cors::parse(&manifest["cors"], &methods).map_err(bad)?;
        let schema = Arc::new(parse_tables(&manifest["tables"]).map_err(bad)?);
        schema.check().map_err(bad)?;
        for table in &schema.tables {
            if is_script_word(&table.name) {
                return Err(bad(format!(
                    "a table cannot be named {:?}: scripts could not name it (it is a word of \
                     the script language, or the name handlers give their request)",
                    table.name
                )));
            }
        }

        // One text, so that functions of one file can call those of another; the source map
        // turns positions back into files.
        files.sort();
        let mut text = String::new();
        let mut sources = SourceMap::default();
        let mut line = 1;
        for (file, script) in &files {
            sources.push(file.clone(), line);
            text.push_str(script);
            text.push('\n');
            // The file plus the newline after it spans one line per '\n' in the file, plus one.
            line += script.split('\n').count();
        }
        let indexes = parse_indexes(&manifest["indexes"], &schema).map_err(bad)?;
        let engine = engine::build(&schema, &indexes, &limits);
        let mut declared = Scope::new();
        for (id, table) in schema.tables.iter().enumerate() {
            declared.push_constant(table.name.as_str(), crate::api::Table { id: id as TableId });
        }
        // Strict variables (engine::build): a name that is neither a table, a parameter nor a
        // local is an error here, not a 500 on every call.
        let located = |position: Position, message: String| {
            let (file, line, column) = sources.locate(position);
            LoadError::Compile {
                file,
                line,
                column,
                message,
            }
        };
        let ast = engine.compile_with_scope(&declared, &text).map_err(|e| {
            // An unbalanced brace confuses the parser from there on (into the next file, too):
            // what Rhai says is about a later token, often far from the brace.
            for (file, script) in &files {
                if let Some((line, column, message)) = syntax::unbalanced_brace(file, script) {
                    return LoadError::Compile {
                        file: file.clone(),
                        line,
                        column,
                        message,
                    };
                }
            }
            match &*e.0 {
                rhai::ParseErrorType::MissingToken(token, _) if token == ";" => located(
                    syntax::missing_semicolon(&text, e.1),
                    "missing ; at the end of this statement".into(),
                ),
                error => located(e.1, explain_compile_error(error, &text, &schema)),
            }
        })?;
        let builtin = builtin_names(&engine);
        check_calls(&ast, &builtin).map_err(|(position, message)| located(position, message))?;
        crate::table_calls::check(&ast, &schema, &indexes, &builtin)
            .map_err(|(position, message)| located(position, message))?;
        let handlers: HashMap<String, Handler> = ast
            .iter_functions()
            .filter(|f| f.params.len() == 1)
            .map(|f| {
                let handler = Handler {
                    definition: definition_position(&text, f.name),
                    fields: request_fields(&ast, f.name),
                };
                (f.name.to_string(), handler)
            })
            .collect();
        for route in &routes {
            if handlers.contains_key(&route.handler) {
                continue;
            }
            let handler = &route.handler;
            let route = format!("{} {}", route.method, route.path);
            let defined = ast.iter_fn_def().find(|f| f.name == handler.as_str());
            return Err(match defined {
                // Where the function is: that is what to change, more often than the route.
                Some(function) => located(
                    definition_position(&text, handler),
                    format!(
                        "fn {handler} is defined with {} parameters, but route {route:?} calls \
                         it as a handler, which takes one (request)",
                        function.params.len()
                    ),
                ),
                None => bad(format!(
                    "route {route:?} names handler {handler:?}, but no script defines fn \
                     {handler}(request)"
                )),
            });
        }
        let name = name.to_string();
        let handler_names: Vec<String> = handlers.keys().cloned().collect();
        let program = Program::compile(&ast, &schema, &indexes, &handler_names, &sources);
        Ok(App {
            name,
            routes,
            schema,
            engine,
            tracing: OnceLock::new(),
            ast,
            sources,
            handlers,
            limits,
            program,
            use_compiled: true,
            fallbacks: AtomicU64::new(0),
            world: World::live(),
            log: None,
            cors,
            indexes,
        })
    }

    /// Where `now()`, `uuid()` and `random()` take their values: live by default, fixed for
    /// tests ([`World::fixed`]).
    pub fn set_world(&mut self, world: World) {
        self.world = world;
    }

    /// The manifest's `"cors"`, if it has one.
    /// The manifest's indexes, for [`Tables::set_indexes`] once the rows are loaded.
    pub fn indexes(&self) -> &[IndexDef] {
        &self.indexes
    }

    pub fn cors(&self) -> Option<&Cors> {
        self.cors.as_ref()
    }

    pub fn world(&self) -> &World {
        &self.world
    }

    /// Where handlers' `print`, `debug`, `warn` and `error` lines go, each call's lines once it
    /// ends.
    pub fn set_log(&mut self, sink: Arc<dyn LogSink>) {
        self.log = Some(sink);
    }

    /// Runs every handler in Rhai's evaluator (on) or compiled where possible (off, the default).
    pub fn set_interpreted(&mut self, interpreted: bool) {
        self.use_compiled = !interpreted;
    }

    /// Compiled calls re-run in Rhai so far: each is an error, a limit or a case the compiled
    /// code leaves to Rhai, and costs the call twice.
    pub fn fallbacks(&self) -> u64 {
        self.fallbacks.load(Ordering::Relaxed)
    }

    /// How `handler` runs (None when there is no such handler).
    pub fn execution(&self, handler: &str) -> Option<Execution> {
        if !self.handlers.contains_key(handler) {
            return None;
        }
        Some(match self.program.interpreted_reason(handler) {
            None if self.program.handler(handler).is_some() => Execution::Compiled,
            None => Execution::Interpreted {
                reason: "it has no compiled form".into(),
            },
            Some(reason) => Execution::Interpreted {
                reason: reason.to_string(),
            },
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    pub fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// A request for the handler of `routes()[route]`: `body` (JSON text, or empty) parsed
    /// into script values and checked, together with `params` and `query`, against the
    /// handlers' size limits, then against what the route declares ([`BodyError::Invalid`]
    /// names the first value that does not fit). Meant for the thread that read the body, so
    /// that a request no handler should see costs the owner nothing.
    pub fn request(
        &self,
        route: usize,
        params: Vec<(String, String)>,
        query: Vec<(String, String)>,
        head: Box<Head>,
        body: &[u8],
    ) -> Result<Request, BodyError> {
        let body = crate::body::parse(body, &params, &query, &head, &self.limits)?;
        let text = |pairs: Vec<(String, String)>| -> Vec<(String, Dynamic)> {
            pairs
                .into_iter()
                .map(|(name, value)| (name, Dynamic::from(ImmutableString::from(value))))
                .collect()
        };
        let (mut params, mut query) = (text(params), text(query));
        let declared = &self.routes[route].declared;
        let invalid = |message| BodyError::Invalid { message };
        declared.check_params(&mut params).map_err(invalid)?;
        declared.check_query(&mut query).map_err(invalid)?;
        let body = declared.check_body(body).map_err(invalid)?;
        Ok(Request {
            params,
            query,
            body,
            head,
        })
    }

    pub fn has_handler(&self, handler: &str) -> bool {
        self.handlers.contains_key(handler)
    }

    /// Runs a write handler on `tables`, recording its changes in `writes` (which must be empty).
    /// On an error the tables are rolled back and `writes` is left empty: the state is exactly as
    /// before.
    pub fn run_write(
        &self,
        handler: &str,
        request: &Request,
        tables: &mut Tables,
        writes: &mut WriteSet,
    ) -> Result<Answer, HandlerError> {
        self.write_with(handler, CallRequest::Borrowed(request), tables, writes)
    }

    /// [`App::run_write`] for a caller done with the request: a compiled handler that never
    /// changes its request is given the request's body itself rather than a copy (a batch of
    /// 1,000 entries is a map of 1,000 entries to copy and drop). Afterwards `request.body` is
    /// either the body or `()`.
    pub fn run_write_taking_body(
        &self,
        handler: &str,
        request: &mut Request,
        tables: &mut Tables,
        writes: &mut WriteSet,
    ) -> Result<Answer, HandlerError> {
        self.write_with(handler, CallRequest::Lent(request), tables, writes)
    }

    fn write_with(
        &self,
        handler: &str,
        request: CallRequest<'_>,
        tables: &mut Tables,
        writes: &mut WriteSet,
    ) -> Result<Answer, HandlerError> {
        debug_assert!(
            writes.is_empty(),
            "a write set is encoded and cleared before the next call"
        );
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
        if result.is_err() {
            tables.roll_back(writes);
        }
        result
    }

    /// Runs a read handler against a snapshot on the calling thread. A write attempt is a
    /// [`HandlerError::Script`].
    pub fn run_read(
        &self,
        handler: &str,
        request: &Request,
        tables: Arc<Tables>,
    ) -> Result<Answer, HandlerError> {
        let request = CallRequest::Borrowed(request);
        self.call(handler, request, Context::Read { tables }, |_| {})
    }

    /// Runs a handler on this thread's stack or, when less is left on it than the limits may
    /// need, on a fresh one: the runtime runs writes on whichever thread queued them, and an
    /// embedder's thread may have a small stack. Overflowing it would abort the process.
    fn call(
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
            self.log.as_ref(),
            handler,
            &request.get().head.id,
        );
        let answer = self.call_in_world(
            handler,
            definition,
            (&mut request, *fields),
            context,
            restore,
        );
        world::end_call();
        answer
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
        let engine = self
            .tracing
            .get_or_init(|| engine::build_tracing(&self.schema, &self.indexes, &self.limits));
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
        let answer = match value.read_lock::<Response>() {
            Some(response) => response.answer(&self.schema),
            None => value::to_json(&value, &self.schema).map(Answer::ok),
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
    rhai::EvalAltResult::ErrorTerminated(engine::TIME_LIMIT.into(), at)
}

/// The message a panic carried, for an error that names it.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        text.to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}

fn parse_routes(routes: &Value) -> Result<Vec<Route>, String> {
    let Some(routes) = routes.as_object() else {
        return Err("\"routes\" must be an object of \"METHOD /path\": \"handler\"".into());
    };
    routes
        .iter()
        .map(|(pattern, entry)| {
            let (method, path) = pattern
                .split_once(' ')
                .ok_or_else(|| format!("route {pattern:?} must be \"METHOD /path\""))?;
            let method = method.to_ascii_uppercase();
            if !METHODS.contains(&method.as_str()) || !path.starts_with('/') {
                return Err(format!("route {pattern:?}: method must be one of {METHODS:?} and the path start with /"));
            }
            let shape = "the handler must be a function name, or an object with \"handler\" and \
                         any of \"body\", \"query\" and \"params\"";
            let handler: &str = match entry {
                Value::String(handler) => handler,
                Value::Object(entry) => {
                    if let Some(key) = entry.keys().find(|k| !["handler", "body", "query", "params"].contains(&k.as_str())) {
                        return Err(format!("route {pattern:?}: unknown key {key:?}: {shape}"));
                    }
                    entry.get("handler").and_then(Value::as_str).ok_or_else(|| format!("route {pattern:?}: {shape}"))?
                }
                _ => return Err(format!("route {pattern:?}: {shape}")),
            };
            let declared = Arc::new(Declared::parse(pattern, entry, path)?);
            let kind = if method == "GET" { HandlerKind::Read } else { HandlerKind::Write };
            Ok(Route { method, path: path.to_string(), handler: handler.to_string(), kind, declared })
        })
        .collect::<Result<Vec<Route>, String>>()
        .and_then(|routes| {
            // Two patterns that differ only in their parameters' names match the same requests:
            // the router would always take one of them.
            let shape = |route: &Route| {
                let segments: Vec<&str> = route
                    .path
                    .split('/')
                    .map(|s| if s.starts_with('{') { "{}" } else { s })
                    .collect();
                (route.method.clone(), segments.join("/"))
            };
            for (i, route) in routes.iter().enumerate() {
                if let Some(other) = routes[..i].iter().find(|o| shape(o) == shape(route)) {
                    return Err(format!(
                        "routes \"{} {}\" and \"{} {}\" match the same requests: one of them \
                         could never be reached",
                        other.method, other.path, route.method, route.path
                    ));
                }
            }
            Ok(routes)
        })
}

/// Where in the manifest's text a message about it points: the last of the names it quotes
/// that the text holds as JSON strings in that order (a route, a table, an index, a key),
/// leaving out a suggestion ("did you mean ..."), which names what is not there.
fn manifest_position(text: &str, message: &str) -> Option<(usize, usize)> {
    let about = message.split("did you mean").next().unwrap_or(message);
    let mut quoted = Vec::new();
    let mut rest = about;
    while let Some(start) = rest.find('"') {
        let Some(length) = rest[start + 1..].find('"') else {
            break;
        };
        quoted.push(&rest[start..start + length + 2]);
        rest = &rest[start + length + 2..];
    }
    // Each name is looked for after the one before it (`index "by_x": field "name"`: the
    // field within that index), so that a name found elsewhere first is not taken.
    let mut offset = None;
    let mut from = 0;
    for q in quoted {
        if let Some(at) = text[from..].find(q) {
            offset = Some(from + at);
            from += at + q.len();
        }
    }
    let offset = offset?;
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before[before.rfind('\n').map_or(0, |n| n + 1)..]
        .chars()
        .count()
        + 1;
    Some((line, column))
}

/// The manifest's own keys: a misspelt one (`"table"`) would otherwise be ignored, and the app
/// would start without what it declares.
fn check_manifest_keys(manifest: &Value) -> Result<(), String> {
    const KEYS: [&str; 6] = ["name", "routes", "tables", "indexes", "cors", "limits"];
    let Some(object) = manifest.as_object() else {
        return Err("app.json must hold an object".into());
    };
    for key in object.keys() {
        if KEYS.contains(&key.as_str()) {
            continue;
        }
        let near = KEYS
            .iter()
            .find(|k| k.starts_with(key.as_str()) || key.starts_with(*k) || edits(k, key) <= 2);
        return Err(match near {
            Some(near) => format!("unknown key {key:?}: did you mean {near:?}?"),
            None => format!("unknown key {key:?}: an app.json holds {KEYS:?}"),
        });
    }
    Ok(())
}

/// The Levenshtein distance between two short names.
pub(crate) fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// Whether scripts could not use `name` as a variable: a word of the language (`let`, `true`,
/// a reserved one) or `request`, the name handlers give their parameter, which would hide it.
fn is_script_word(name: &str) -> bool {
    if name == "request" {
        return true;
    }
    let parsed = Engine::new_raw().compile_expression(name);
    !matches!(
        parsed.as_ref().map(|ast| ast.statements()),
        Ok([Stmt::Expr(expr)]) if matches!(**expr, Expr::Variable(..))
    )
}

/// `"indexes": {"by_category": {"table": "items", "fields": ["category"], "unique": false}}`.
fn parse_indexes(indexes: &Value, schema: &Schema) -> Result<Vec<IndexDef>, String> {
    let shape = "\"indexes\" must be an object of \"name\": {\"table\": \"...\", \"fields\": \
                 [\"field\", \"-field\" (descending) or \"key[i]\", ...], \"unique\": true or false}";
    if indexes.is_null() {
        return Ok(Vec::new());
    }
    let indexes = indexes.as_object().ok_or(shape)?;
    indexes
        .iter()
        .map(|(name, index)| {
            let bad = |what: String| format!("index {name:?}: {what}");
            let index = index.as_object().ok_or_else(|| bad(shape.into()))?;
            if let Some(key) = index
                .keys()
                .find(|k| !["table", "fields", "unique"].contains(&k.as_str()))
            {
                return Err(bad(format!("unknown key {key:?}: {shape}")));
            }
            if !name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return Err(bad(
                    "a name must be an identifier (it is a property: items.by_category)".into(),
                ));
            }
            let table_name = index
                .get("table")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("\"table\" must name a table".into()))?;
            let table = schema
                .table_id(table_name)
                .ok_or_else(|| bad(format!("no table {table_name:?}")))?;
            let fields: Vec<String> = index
                .get("fields")
                .and_then(Value::as_array)
                .map(|fields| {
                    fields
                        .iter()
                        .filter_map(|f| f.as_str().map(str::to_string))
                        .collect()
                })
                .filter(|fields: &Vec<String>| !fields.is_empty())
                .ok_or_else(
                    || bad("\"fields\" must be a list of one or more field names".into()),
                )?;
            // "-best": the largest best first.
            let descending: Vec<bool> = fields.iter().map(|f| f.starts_with('-')).collect();
            let fields: Vec<String> = fields
                .iter()
                .map(|f| f.strip_prefix('-').unwrap_or(f).to_string())
                .collect();
            let sources = fields
                .iter()
                .map(|field| {
                    if let Some(part) = field.strip_prefix("key[").and_then(|f| f.strip_suffix(']'))
                    {
                        return match part.parse::<usize>() {
                            Ok(i) if i < crate::key::KEY_PARTS_MAX => Ok(IndexSource::KeyPart(i)),
                            _ => Err(bad(format!(
                                "{field:?}: a key part is key[0] to key[{}]",
                                crate::key::KEY_PARTS_MAX - 1
                            ))),
                        };
                    }
                    schema
                        .field_slot(table, field)
                        .map(IndexSource::Field)
                        .ok_or_else(|| bad(format!("table {table_name} has no field {field:?}")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let unique = match index.get("unique") {
                None => false,
                Some(Value::Bool(unique)) => *unique,
                Some(_) => return Err(bad("\"unique\" must be true or false".into())),
            };
            Ok(IndexDef {
                name: name.clone(),
                table,
                sources,
                fields,
                descending,
                unique,
            })
        })
        .collect()
}

fn parse_tables(tables: &Value) -> Result<Schema, String> {
    let shape = "\"tables\" must be an object of \"table\": [\"field\", ...]";
    if tables.is_null() {
        return Ok(Schema::default());
    }
    let tables = tables.as_object().ok_or(shape)?;
    let tables = tables
        .iter()
        .map(|(name, fields)| {
            let fields = fields.as_array().ok_or(shape)?;
            let fields = fields
                .iter()
                .map(|f| f.as_str().map(str::to_string).ok_or(shape))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(TableSchema {
                name: name.clone(),
                fields,
            })
        })
        .collect::<Result<Vec<_>, &str>>()?;
    Ok(Schema { tables })
}

/// The entries of the request map that handler `name` can observe. A handler that uses its
/// parameter only as `request.field...` or `request["field"]...` (a literal name) sees nothing
/// of the others, so they need not be built for it: the head's headers map, above all, is work
/// on every call that most handlers never read. Any other use (passing the request on,
/// `request.keys()`, printing it, a computed index) observes the whole map.
fn request_fields(ast: &AST, name: &str) -> RequestFields {
    let mut alone = ast.clone_functions_only();
    alone.retain_functions(|_, _, n, arity| n == name && arity == 1);
    let Some(param) = alone.iter_fn_def().next().map(|f| f.params[0].clone()) else {
        return RequestFields::ALL;
    };
    let mut fields = RequestFields::NONE;
    alone.walk(&mut |path: &[ASTNode]| {
        // Rhai's walk does not visit the value of `break value`: whatever it holds, assume
        // the whole request.
        if let Some(ASTNode::Stmt(Stmt::BreakLoop(Some(_), ..))) = path.last() {
            fields = RequestFields::ALL;
            return true;
        }
        let Some(ASTNode::Expr(node @ Expr::Variable(variable, ..))) = path.last() else {
            return true;
        };
        if variable.1 != param {
            return true;
        }
        let parent = path.len().checked_sub(2).map(|at| &path[at]);
        let field = match parent {
            Some(ASTNode::Expr(Expr::Dot(chain, ..))) if std::ptr::eq(&chain.lhs, *node) => {
                match &chain.rhs {
                    Expr::Property(property, _) => Some(property.2.as_str()),
                    Expr::Dot(inner, ..) | Expr::Index(inner, ..) => match &inner.lhs {
                        Expr::Property(property, _) => Some(property.2.as_str()),
                        _ => None,
                    },
                    _ => None,
                }
            }
            Some(ASTNode::Expr(Expr::Index(chain, ..))) if std::ptr::eq(&chain.lhs, *node) => {
                match &chain.rhs {
                    Expr::StringConstant(text, _) => Some(text.as_str()),
                    _ => None,
                }
            }
            _ => None,
        };
        fields = fields.with(field.map_or(RequestFields::ALL, RequestFields::named));
        true
    });
    fields
}

/// Rhai's parse error, with what Pure knows of the mistake: a name that is not defined is
/// often a table's, misspelt, or a top-level constant, which handlers never see (they run
/// without the top level).
fn explain_compile_error(error: &rhai::ParseErrorType, text: &str, schema: &Schema) -> String {
    let rhai::ParseErrorType::VariableUndefined(name) = error else {
        return error.to_string();
    };
    let top_level = Engine::new_raw().compile(text).ok().is_some_and(|ast| {
        ast.statements()
            .iter()
            .any(|stmt| matches!(stmt, Stmt::Var(var, ..) if var.0.as_str() == name))
    });
    if top_level {
        return format!(
            "{name} is defined at the top level, which handlers never run: define it inside the \
             function, or make it a function (fn {}() {{ ... }})",
            name.to_lowercase()
        );
    }
    let tables: Vec<&str> = schema.tables.iter().map(|t| t.name.as_str()).collect();
    format!(
        "no variable or table named {name} (the app's tables: {})",
        if tables.is_empty() {
            "none".to_string()
        } else {
            tables.join(", ")
        }
    )
}

/// Rhai's own functions that are syntax rather than registered functions.
const KEYWORD_FUNCTIONS: [&str; 10] = [
    "print",
    "debug",
    "type_of",
    "eval",
    "Fn",
    "call",
    "curry",
    "is_shared",
    "is_def_var",
    "is_def_fn",
];

/// Every call of a function by name (not a method) must reach one: a script function with that
/// many parameters, or a built-in one. Rhai would only say so when the call runs.
/// The names of the functions the engine has (Rhai's and Pure's), to tell a call of a function
/// nothing defines.
fn builtin_names(engine: &Engine) -> HashSet<String> {
    engine
        .gen_fn_signatures(true)
        .into_iter()
        .filter_map(|signature| signature.split('(').next().map(str::to_string))
        .collect()
}

fn check_calls(ast: &AST, builtin: &HashSet<String>) -> Result<(), (Position, String)> {
    let scripts: Vec<(ImmutableString, usize)> = ast
        .iter_fn_def()
        .map(|f| (f.name.clone(), f.params.len()))
        .collect();
    let mut found = Ok(());
    ast.walk(&mut |path: &[ASTNode]| {
        // A call is an expression, or a statement of its own.
        let (call, position) = match path.last() {
            Some(ASTNode::Expr(expr @ Expr::FnCall(call, ..))) => (call, expr.position()),
            Some(ASTNode::Stmt(Stmt::FnCall(call, position))) => (call, *position),
            _ => return true,
        };
        let name = call.name.as_str();
        if call.is_operator_call()
            || !name
                .chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
            || KEYWORD_FUNCTIONS.contains(&name)
            || builtin.contains(name)
            || scripts
                .iter()
                .any(|(n, arity)| n == name && *arity == call.args.len())
        {
            return true;
        }
        let defined: Vec<usize> = scripts
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, arity)| *arity)
            .collect();
        let message = match defined.as_slice() {
            [] => format!("no function {name}(): no script defines it, and it is not built in"),
            arities => format!(
                "{name}() is called with {} argument(s), but fn {name} takes {}",
                call.args.len(),
                arities
                    .iter()
                    .map(|a| a.to_string())
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        };
        found = Err((position, message));
        false
    });
    found
}

/// Where `fn name` is defined in `text` (the first match), for errors that have no position.
fn definition_position(text: &str, name: &str) -> Position {
    for (index, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("fn ") {
            let after = rest[at + 3..].trim_start();
            if after.starts_with(name) && after[name.len()..].trim_start().starts_with('(') {
                let column = line.len() - rest.len() + at + 1;
                return Position::new(index as u16 + 1, column as u16);
            }
            rest = &rest[at + 3..];
        }
    }
    Position::NONE
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Key;

    const MANIFEST: &str = r#"{ "name": "panics", "routes": {},
        "tables": { "counters": ["n"] } }"#;
    const SCRIPT: &str = r#"
fn put_then_panic(req) { counters.put(1, #{ n: 1 }); fault_panic("in a write"); 0 }
fn put_one(req) { counters.put(2, #{ n: 2 }); 2 }
fn read_panic(req) { counters.get(1); fault_panic("in a read"); 0 }
fn read_count(req) { counters.count() }
"#;

    /// A handler gets the request entries it can observe: those it reads by a literal name,
    /// or all of them when it uses the request any other way. Either way it sees the same.
    #[test]
    fn a_handler_is_given_the_request_entries_it_can_observe() {
        let script = r#"
fn body_only(request) { let b = request.body; b.x + request.body.len() }
fn headers_and_id(req) { req.headers["accept"] + " " + req["id"] + req.nothing }
fn whole(request) { request }
fn passed_on(request) { helper(request) }
fn helper(r) { r.method }
fn counted(request) { request.len() }
fn computed(request) { let k = "pe" + "er"; request[k] }
fn via_break(request) { let r = loop { break request; }; r.method }
"#;
        let app = App::from_sources(
            MANIFEST,
            vec![("f.rhai".into(), script.into())],
            Limits::default(),
        )
        .expect("compiles");
        let fields = |name: &str| app.handlers[name].fields;
        let named = |names: &[&str]| {
            names.iter().fold(RequestFields::NONE, |set, n| {
                set.with(RequestFields::named(n))
            })
        };
        assert_eq!(fields("body_only"), named(&["body"]));
        assert_eq!(fields("headers_and_id"), named(&["headers", "id"]));
        for all in ["whole", "passed_on", "counted", "computed", "via_break"] {
            assert_eq!(fields(all), RequestFields::ALL, "{all}");
        }
        let head = Head {
            method: "POST".into(),
            path: "/x".into(),
            headers: vec![("accept".into(), "a/b".into())],
            peer: "127.0.0.1".into(),
            id: "r-1".into(),
        };
        let request = Request {
            body: crate::to_dynamic(&serde_json::json!({"x": 1})),
            head: Box::new(head),
            ..Request::default()
        };
        let mut tables = Tables::new(app.schema().tables.len());
        let mut writes = WriteSet::default();
        let mut run = |handler: &str| {
            let answer = app.run_write(handler, &request, &mut tables, &mut writes);
            writes.clear();
            answer.expect("runs").body
        };
        assert_eq!(run("body_only"), serde_json::json!(2));
        assert_eq!(run("headers_and_id"), serde_json::json!("a/b r-1"));
        let whole = run("whole");
        let keys: Vec<&String> = whole.as_object().expect("a map").keys().collect();
        assert_eq!(
            keys,
            ["body", "headers", "id", "method", "params", "path", "peer", "query"]
        );
        assert_eq!(run("passed_on"), serde_json::json!("POST"));
        assert_eq!(run("counted"), serde_json::json!(8));
        assert_eq!(run("computed"), serde_json::json!("127.0.0.1"));
        assert_eq!(run("via_break"), serde_json::json!("POST"));
    }

    /// A panic inside a call comes back as `Panicked` naming the handler; the write's change is
    /// rolled back, the tables return to the caller, and the thread serves the next call.
    #[test]
    fn a_panicking_call_is_an_error_and_the_thread_goes_on() {
        let app = App::from_sources(
            MANIFEST,
            vec![("p.rhai".into(), SCRIPT.into())],
            Limits::default(),
        )
        .expect("compiles");
        let counters = app.schema().table_id("counters").expect("declared");
        let mut tables = Tables::new(app.schema().tables.len());
        let mut writes = WriteSet::default();
        let request = Request::default();

        let error = app
            .run_write("put_then_panic", &request, &mut tables, &mut writes)
            .expect_err("it panics");
        match &error {
            HandlerError::Panicked { handler, message } => {
                assert_eq!(handler, "put_then_panic");
                assert!(message.contains("in a write"), "{message}");
            }
            other => panic!("expected Panicked, got {other:?}"),
        }
        assert_eq!(error.status(), 500);
        assert!(error.to_json()["error"]
            .as_str()
            .is_some_and(|e| e.contains("put_then_panic")));
        assert!(writes.is_empty(), "the write set is cleared");
        assert!(tables.get(counters, &Key::int(1)).is_none(), "rolled back");

        assert_eq!(
            app.run_write("put_one", &request, &mut tables, &mut writes)
                .expect("the next write runs"),
            serde_json::json!(2)
        );
        writes.clear();
        let snapshot = Arc::new(tables.clone());
        let error = app
            .run_read("read_panic", &request, snapshot.clone())
            .expect_err("it panics");
        assert!(matches!(error, HandlerError::Panicked { .. }), "{error:?}");
        assert_eq!(
            app.run_read("read_count", &request, snapshot)
                .expect("the next read runs"),
            serde_json::json!(1)
        );
    }
}
