//! An app: its manifest, its compiled scripts, and calling its handlers.
//!
//! Loading (`load`), the manifest (`manifest`), the call chain (`call`), declared shapes
//! (`shape`), request bodies (`body`) and CORS (`cors`) are its modules; this one holds the
//! app's types and the API the runtime and the HTTP layer call.

pub(crate) mod body;
mod call;
pub(crate) mod cors;
pub mod due;
mod load;
mod manifest;
pub(crate) mod shape;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use rhai::{Dynamic, Engine, ImmutableString, Position, AST};

use crate::app::body::BodyError;
use crate::app::cors::Cors;
use crate::app::shape::Declared;
use crate::rhai_ast::compiled::Program;
use crate::script::context::Context;
use crate::script::error::{HandlerError, SourceMap};
use crate::script::limits::Limits;
use crate::script::request::{Head, Request};
use crate::script::respond::Answer;
use crate::script::settings::Settings;
use crate::script::value::RequestFields;
use crate::script::world::{LogSink, World};
use crate::state::schema::Schema;
use crate::state::table_set::TableSet;
use crate::state::tables::{IndexDef, Tables, WriteSet};

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
    /// The function that decides, before anything else, whether a request reaches the handler
    /// (see [`App::guard_request`]).
    pub guard: Option<String>,
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
    /// Their names, which `schedule(...)` checks at the call.
    handler_names: std::collections::HashSet<String>,
    /// The manifest's recurring entries.
    schedules: Vec<due::NamedSchedule>,
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
    /// What `env()` reads, and the secrets kept out of error answers and log lines.
    settings: Settings,
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

impl App {
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

    /// A line of the app's log written outside a handler's call (the runtime's word on a
    /// scheduled entry that failed), secrets redacted; to standard error without a sink.
    pub fn log_line(
        &self,
        level: crate::script::world::Level,
        handler: &str,
        request_id: &str,
        message: &str,
    ) {
        let message = self.settings.redact(message);
        match &self.log {
            Some(sink) => sink.log(&crate::script::world::LogLine {
                level,
                handler,
                request_id,
                message: &message,
            }),
            None => eprintln!("{} {handler} {request_id}: {message}", level.name()),
        }
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
        let body = crate::app::body::parse(body, &params, &query, &head, &self.limits)?;
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
            scheduled: Dynamic::UNIT,
        })
    }

    /// The request a route's guard is given: its head, and its path parameters and query as
    /// sent (text: they are not checked against the route's declarations yet), without a body.
    /// Run it as a read handler ([`App::run_read`]) and judge its answer with
    /// [`App::guard_verdict`].
    pub fn guard_request(
        &self,
        params: &[(String, String)],
        query: &[(String, String)],
        head: &Head,
    ) -> Request {
        let text = |pairs: &[(String, String)]| -> Vec<(String, Dynamic)> {
            pairs
                .iter()
                .map(|(name, value)| {
                    (
                        name.clone(),
                        Dynamic::from(ImmutableString::from(value.as_str())),
                    )
                })
                .collect()
        };
        Request {
            params: text(params),
            query: text(query),
            body: Dynamic::UNIT,
            head: Box::new(head.clone()),
            scheduled: Dynamic::UNIT,
        }
    }

    /// What a guard's call decides: `true` lets the request through; `false` is a 403; a thrown
    /// error is the request's answer, and so is an answer of `respond` with a status of 400 or
    /// more, headers and all ([`HandlerError::Refused`]: a 401 with `www-authenticate`, say).
    /// Any other answer is the guard's mistake: a 500 naming it, so that a guard that forgot to
    /// decide never lets a request through. Secrets are kept out of all of them.
    pub fn guard_verdict(
        &self,
        guard: &str,
        call: Result<Answer, HandlerError>,
    ) -> Result<(), HandlerError> {
        let mut refusal = match self.refusal(guard, call) {
            None => return Ok(()),
            Some(refusal) => refusal,
        };
        if self.settings.has_secrets() {
            refusal.redact(&self.settings);
        }
        Err(refusal)
    }

    fn refusal(&self, guard: &str, call: Result<Answer, HandlerError>) -> Option<HandlerError> {
        let answer = match call {
            Ok(answer) => answer,
            Err(error) => return Some(error),
        };
        let body = answer.body.to_string();
        Some(match (answer.status, body.as_str()) {
            (200, "true") => return None,
            (200, "false") => HandlerError::Thrown {
                status: 403,
                body: serde_json::json!({
                    "error": format!("the guard {guard} refused this request"),
                    "status": 403,
                }),
            },
            (status @ 400..=599, body) => HandlerError::Refused {
                status,
                headers: answer.headers,
                body: serde_json::from_str(body).unwrap_or(serde_json::Value::Null),
            },
            (status, body) => {
                let definition = self
                    .handlers
                    .get(guard)
                    .map_or(Position::NONE, |h| h.definition);
                let (file, line, column) = self.sources.locate(definition);
                HandlerError::Script {
                    handler: guard.to_string(),
                    file,
                    line,
                    column,
                    message: format!(
                        "the guard {guard} answered {status} {body}: a guard returns true (let \
                         the request through) or false (403), or throws the answer (throw #{{ \
                         status: 401, error: \"...\" }})"
                    ),
                }
            }
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

    /// Whether `handler` can observe anything of its request's head (method, path, headers,
    /// peer, id): if not, two requests with the same route, parameters, query and body get the
    /// same answer from the same state (a live query shares one run among such subscribers).
    pub fn handler_reads_head(&self, handler: &str) -> bool {
        self.handlers
            .get(handler)
            .is_none_or(|h| h.fields.reads_head())
    }

    /// Runs a read handler against a snapshot on the calling thread. A write attempt is a
    /// [`HandlerError::Script`].
    pub fn run_read(
        &self,
        handler: &str,
        request: &Request,
        tables: Arc<Tables>,
    ) -> Result<Answer, HandlerError> {
        self.run_read_noting(handler, request, tables).0
    }

    /// [`App::run_read`], giving also the tables the call read (by every path it took: a
    /// compiled attempt that went on in Rhai adds what each read). A live query runs its
    /// handler again only once a group writes one of them.
    pub fn run_read_noting(
        &self,
        handler: &str,
        request: &Request,
        tables: Arc<Tables>,
    ) -> (Result<Answer, HandlerError>, TableSet) {
        let request = CallRequest::Borrowed(request);
        let mut read_set = TableSet::default();
        let answer = self.call(handler, request, Context::read(tables), |context| {
            if let Context::Read { read, .. } = context {
                read_set = read;
            }
        });
        (answer, read_set)
    }
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
        let whole = run("whole").to_value();
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
        let snapshot = Arc::new(tables.snapshot());
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
