//! The request path: check the request, route it, read and parse its body under its limits,
//! call the handler, answer in JSON.
//!
//! Everything a request can be refused for is decided here, on the HTTP thread, before a write
//! is queued: the head (`Host`, the target's length), the host it names and the origin of a
//! write (`origin`), the route, the body's size, the budget of body bytes held by all requests
//! at once, its JSON, and the handlers' size limits on what it holds (`App::request` parses it
//! straight into script values and counts them). The owner only ever sees requests a handler
//! can hold.
//!
//! Read handlers run right here, on the HTTP worker thread: a read is a few microseconds of
//! script against an immutable snapshot, and the script limits stop a runaway one within tens of
//! milliseconds. Handing each read to another thread cost more than the read itself: on this
//! 2-core machine, 16 clients reading players got 42,700–44,100 reads/s inline against
//! 22,700–24,800 with `block_in_place` and 22,700–23,900 with `spawn_blocking`. The price of
//! inline is that a slow read holds up the other connections of its worker until it ends;
//! `--offload-reads` chooses `block_in_place` instead, for apps with long reads. Large bodies
//! are the exception: parsing a 1 MiB body takes milliseconds, so bodies past
//! `PARSE_INLINE_BYTES_MAX` are parsed on the blocking pool, a few at a time, and a stream of
//! them cannot starve the small requests of a worker. Below that bound a body is parsed where
//! it was read, because the trip to the pool and back is two wake-ups of another thread, each
//! tens of microseconds on a VM whose other core is idle (research note 020).
//!
//! Write handlers go through `Runtime::write`, which runs them right here when the owner's role is
//! free (one write at a time, bounded by the script limits like a read); the task awaits the
//! reply, which arrives only once the write's group is durable.

use std::borrow::Cow;
use std::convert::Infallible;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use http_body_util::{BodyExt, Limited};
use hyper::body::{Body, Bytes, Incoming};
use hyper::header::{
    HeaderMap, HeaderName, HeaderValue, ACCESS_CONTROL_ALLOW_CREDENTIALS,
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ACCESS_CONTROL_REQUEST_HEADERS,
    ACCESS_CONTROL_REQUEST_METHOD, ALLOW, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, COOKIE, HOST,
    ORIGIN, RETRY_AFTER, TRANSFER_ENCODING, VARY,
};
use hyper::{Method, Response, StatusCode, Version};
use pure_runtime::{
    has_no_body, Answer, App, BodyError, Cors, HandlerError, HandlerKind, Head, ImmutableString,
    Level, LogLine, LogSink as _, Request, Route, Runtime,
};
use serde_json::{json, Value};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::answer::AnswerBody;
use crate::cli::ErrorDetails;
use crate::log::{Access, Log};
use crate::metrics::{route_counters, Label, RouteCounters, ServerMetrics};
use crate::origin::{foreign_write, misdirected, AllowedHosts};
use crate::route::{parse_query, RouteMatch, Router};
use crate::wire::REQUEST_TARGET_BYTES_MAX;

pub type Reply = Response<AnswerBody>;

/// Bodies up to this size are parsed on the worker that read them; larger ones on the
/// blocking pool (see the module doc). A 1,000-entry kv batch (120 KB) takes about 1.7 million
/// instructions to parse, a quarter of a millisecond, and its trip to the pool and back added
/// 12% to each batch over HTTP (medians of 10 pairs, research note 020); at this bound a parse
/// holds the worker's other connections for about half a millisecond, and past it the trip
/// costs under a tenth of the parse.
const PARSE_INLINE_BYTES_MAX: usize = 256 << 10;
/// A body that no handler will read (a 404, a 405...) is read and dropped up to this size, so
/// that the connection can carry the client's next request; a larger one closes it.
const DISCARD_BYTES_MAX: usize = 64 << 10;
/// The bytes of each body that the body budget does not count: their sum is bounded by the
/// connection cap already (1,024 × 64 KiB = 64 MiB by default), and so a flood of large bodies
/// that spends the budget cannot refuse the small requests of everyone else. Measured with 64
/// clients sending 1 MiB bodies: when every byte counted, 56% of one client's small posts were
/// refused with 503 (research note 011).
const BUDGET_FREE_BYTES: usize = 64 << 10;
/// Every answer carries its request's id under this name.
const REQUEST_ID: &str = "x-request-id";
/// A client's own request id is taken up to this length, of `[A-Za-z0-9._:-]`.
const CLIENT_ID_BYTES_MAX: usize = 128;
/// What a 503 for want of capacity tells the client to wait, in seconds.
const RETRY_AFTER_SECONDS: &str = "1";

/// Limits on what a request may send, and where its read handler runs.
#[derive(Clone, Debug)]
pub struct RequestLimits {
    pub max_body_bytes: usize,
    pub body_timeout: Duration,
    /// Run read handlers under `block_in_place` rather than inline on the worker.
    pub offload_reads: bool,
    /// Bytes of request bodies held at once, by requests being read, queued or running: one
    /// permit per byte. A semaphore, so that a request takes its share in one step and returns
    /// it when it is answered however it ends.
    pub body_budget: Arc<Semaphore>,
    pub body_budget_bytes: usize,
    /// Large bodies parsed at once on the blocking pool.
    pub parsers: Arc<Semaphore>,
}

/// One version of the app as requests see it: a request is routed by the version current when
/// its head arrives and, if a reload swapped it while the body arrived, routed again by the one
/// current then (`Dispatch::reroute`); from there on it is checked and run by that version
/// alone, whatever a reload does meanwhile.
pub struct Deployment {
    pub(crate) app: Arc<App>,
    pub(crate) routes: Vec<Route>,
    router: Router,
    /// Per route, in the order of `routes`.
    counters: Vec<Arc<RouteCounters>>,
}

impl Deployment {
    fn new(app: Arc<App>, previous: Option<&Deployment>) -> Deployment {
        let routes = app.routes().to_vec();
        Deployment {
            router: Router::new(&routes),
            counters: route_counters(&routes, previous.map_or(&[], |p| &p.counters)),
            routes,
            app,
        }
    }
}

/// A route found: its index in the deployment's routes, and the path's parameters.
type Routed = (usize, Vec<(String, String)>);

/// Which requests an address serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The app's routes and the built-in health and metrics (no `--admin-listen`).
    AppAndBuiltins,
    /// The app's routes only.
    App,
    /// The built-in endpoints only, reload among them (`--admin-listen`).
    Admin,
}

/// Loads the app directory again, for a reload.
pub type Loader = Box<dyn Fn() -> anyhow::Result<App> + Send + Sync>;

/// Everything a request needs, shared by all connections.
pub struct Dispatch {
    pub(crate) runtime: Runtime,
    pub(crate) deployment: ArcSwap<Deployment>,
    loader: Loader,
    /// One reload at a time (a signal and a POST may come together).
    reloading: std::sync::Mutex<()>,
    error_details: ErrorDetails,
    /// The hosts the app's address answers to, and the admin address's.
    hosts: (AllowedHosts, AllowedHosts),
    pub metrics: ServerMetrics,
    pub(crate) limits: RequestLimits,
    ids: RequestIds,
    log: Arc<Log>,
    /// The app directory's `public/` folder, served where no route matches a GET.
    pub public: Option<crate::public::Public>,
    /// Live subscriptions open at once, at most (`--max-subscriptions`).
    pub max_subscriptions: usize,
    /// The least time between two events of one stream (`--live-interval-ms`).
    pub live_interval: Duration,
    /// How long a stream stays silent before it sends a comment (`--live-heartbeat-ms`).
    pub live_heartbeat: Duration,
    /// Set once the server stops: every event stream ends.
    pub stopping: watch::Receiver<bool>,
    /// Counts the reloads that replaced the app: an event stream runs the new version at once.
    pub(crate) reloads: watch::Sender<u64>,
    /// The live queries that subscriptions share (`live::SharedQuery`), by what they ask.
    pub(crate) live_queries: std::sync::Mutex<
        std::collections::HashMap<crate::live::QueryKey, std::sync::Weak<crate::live::SharedQuery>>,
    >,
}

/// Request ids made by this process: a random prefix drawn at start and a counter, so that ids
/// stay distinct across restarts and cost one atomic increment.
struct RequestIds {
    /// The prefix and its dash, written once: `format!` on every request cost more than the
    /// rest of the id.
    prefix: String,
    next: AtomicU64,
}

impl RequestIds {
    fn new() -> RequestIds {
        RequestIds {
            prefix: format!(
                "{:08x}-",
                RandomState::new().hash_one(std::process::id()) as u32
            ),
            next: AtomicU64::new(1),
        }
    }

    /// The client's `x-request-id` when it is usable as one, else a new id.
    fn for_request(&self, headers: &HeaderMap) -> ImmutableString {
        let client = headers.get(REQUEST_ID).map(HeaderValue::as_bytes);
        if let Some(id) = client.filter(|id| {
            (1..=CLIENT_ID_BYTES_MAX).contains(&id.len())
                && id
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(b))
        }) {
            return String::from_utf8_lossy(id).as_ref().into();
        }
        let mut n = self.next.fetch_add(1, Relaxed);
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let mut id = String::with_capacity(self.prefix.len() + digits.len() - at);
        id.push_str(&self.prefix);
        id.extend(digits[at..].iter().map(|&d| d as char));
        id.into()
    }
}

/// A body as read: its bytes and its share of the body budget, held until the request is
/// answered.
struct ReadBody {
    bytes: Bytes,
    share: OwnedSemaphorePermit,
}

impl Dispatch {
    pub fn new(
        runtime: Runtime,
        limits: RequestLimits,
        log: Arc<Log>,
        loader: Loader,
        error_details: ErrorDetails,
        hosts: (AllowedHosts, AllowedHosts),
    ) -> Dispatch {
        Dispatch {
            loader,
            reloading: std::sync::Mutex::new(()),
            error_details,
            hosts,
            deployment: ArcSwap::from_pointee(Deployment::new(runtime.app(), None)),
            metrics: ServerMetrics::new(),
            runtime,
            ids: RequestIds::new(),
            log,
            limits,
            public: None,
            max_subscriptions: 0,
            live_interval: Duration::ZERO,
            live_heartbeat: Duration::from_secs(15),
            // Until the server sets its own: never stops.
            stopping: watch::channel(false).1,
            reloads: watch::channel(0).0,
            live_queries: Default::default(),
        }
    }

    /// Loads the app directory again and, when it loads and declares the same tables, serves
    /// it to every request whose body arrives from now on; requests already read finish on the
    /// version they began with. A version that fails leaves the running one serving. Blocking (it
    /// compiles the scripts): call it off the async workers or under `block_in_place`.
    pub fn reload(&self) -> anyhow::Result<Arc<App>> {
        let _one_at_a_time = self.reloading.lock().unwrap_or_else(|p| p.into_inner());
        let reloaded = (self.loader)().and_then(|mut app| {
            app.set_log(self.log.clone());
            Ok(self.runtime.reload(app)?)
        });
        match &reloaded {
            Ok(app) => {
                let deployment = Deployment::new(app.clone(), Some(&self.deployment.load()));
                self.deployment.store(Arc::new(deployment));
                self.log.set_app(app.name());
                self.metrics.reloads_total.fetch_add(1, Relaxed);
                self.reloads.send_modify(|reloads| *reloads += 1);
                report_interpreted(app);
                eprintln!(
                    "pure-serve: reloaded: {} serves {} route(s); requests from now on run the \
                     new version",
                    app.name(),
                    app.routes().len()
                );
            }
            Err(error) => {
                self.metrics.reload_failures_total.fetch_add(1, Relaxed);
                eprintln!(
                    "pure-serve: reload failed, still serving the previous version: {error:#}"
                );
            }
        }
        reloaded
    }

    /// hyper's service entry point: never fails, every outcome is a JSON response (but a
    /// handler's 204, 205 or 304) carrying the request's id. `peer` is the client's IP address.
    pub async fn handle(
        self: Arc<Self>,
        request: hyper::Request<Incoming>,
        peer: ImmutableString,
        role: Role,
    ) -> Result<Reply, Infallible> {
        let started = Instant::now();
        // The version that routes the request, unless a reload replaces it while the body
        // arrives (`call`): then the one that runs it.
        let mut deployment = self.deployment.load_full();
        let id = self.ids.for_request(request.headers());
        let line = self
            .log
            .access_enabled()
            .then(|| (request.method().clone(), request.uri().path().to_string()));
        let builtin = request.uri().path().starts_with("/_pure/");
        let origin = request.headers().get(ORIGIN).cloned();
        let (label, mut reply) = self.route(&mut deployment, request, &peer, &id, role).await;
        // A page on another origin may read the answer if the app's "cors" lets it; whether it
        // may depends on the origin, which caches must know of every app answer.
        let cors = deployment.app.cors().filter(|_| !builtin);
        let varies = cors.is_some();
        let cors_origin = match (cors, origin) {
            (Some(cors), Some(origin)) => origin
                .to_str()
                .ok()
                .filter(|o| cors.allows(o))
                .map(|o| (cors, o.to_string())),
            _ => None,
        };
        let elapsed = started.elapsed();
        let status = reply.status().as_u16();
        self.metrics
            .record(label, &deployment.counters, status, elapsed);
        if let Some((cors, origin)) = cors_origin {
            if !reply.headers().contains_key(ACCESS_CONTROL_ALLOW_ORIGIN) {
                allow_origin(&mut reply, cors, &origin);
            }
            let mut expose = vec![REQUEST_ID.to_string()];
            expose.extend(cors.expose.iter().cloned());
            if let Ok(value) = HeaderValue::from_str(&expose.join(", ")) {
                reply
                    .headers_mut()
                    .insert(ACCESS_CONTROL_EXPOSE_HEADERS, value);
            }
        }
        if varies {
            reply
                .headers_mut()
                .insert(VARY, HeaderValue::from_static("origin"));
        }
        if let Some((method, path)) = line {
            self.log.access(&Access {
                method: method.as_str(),
                path: &path,
                status,
                duration_us: elapsed.as_micros() as u64,
                request_id: &id,
                peer: &peer,
            });
        }
        if let Ok(value) = HeaderValue::from_str(&id) {
            reply
                .headers_mut()
                .insert(HeaderName::from_static(REQUEST_ID), value);
        }
        Ok(reply)
    }

    async fn route(
        self: &Arc<Self>,
        deployment: &mut Arc<Deployment>,
        request: hyper::Request<Incoming>,
        peer: &ImmutableString,
        id: &ImmutableString,
        role: Role,
    ) -> (Label, Reply) {
        let hosts = match role {
            Role::Admin => &self.hosts.1,
            Role::App | Role::AppAndBuiltins => &self.hosts.0,
        };
        let method = request.method().clone();
        let path = request.uri().path().to_string();
        // The app's "cors" speaks for its routes, never for the built-in endpoints.
        let cors = deployment
            .app
            .cors()
            .filter(|_| role != Role::Admin && !path.starts_with("/_pure/"));
        if let Some(refusal) = check_head(&request)
            .or_else(|| misdirected(&request, hosts))
            .or_else(|| foreign_write(request.method(), request.headers(), cors))
        {
            return (Label::Unmatched, self.answer_unread(request, refusal).await);
        }
        // `OPTIONS *` asks what the server as a whole takes (RFC 9110, 9.3.7).
        if method == Method::OPTIONS && path == "*" {
            let reply = options(&server_methods(deployment, role));
            return (Label::Unmatched, self.answer_unread(request, reply).await);
        }
        match path.strip_prefix("/_pure/") {
            Some(name) if role != Role::App => {
                let label = match name {
                    "health" => Label::Health,
                    "metrics" => Label::Metrics,
                    "reload" if role == Role::Admin => Label::Reload,
                    _ => Label::Unmatched,
                };
                let query = request.uri().query();
                let reply = self.builtin(&deployment.counters, &method, (name, query), role);
                return (label, self.answer_unread(request, reply).await);
            }
            None if role == Role::Admin => {
                let message = format!(
                    "no route for {method} {path}: this is the admin address, which serves \
                     GET /_pure/health, GET /_pure/metrics, POST /_pure/reload, POST \
                     /_pure/export?out=DIR and POST /_pure/clock?advance=MS"
                );
                let reply = error_reply(StatusCode::NOT_FOUND, message);
                return (Label::Unmatched, self.answer_unread(request, reply).await);
            }
            _ => {}
        }
        if method == Method::OPTIONS {
            if let Some(cors) = deployment.app.cors() {
                if let Some(reply) = self.preflight(deployment, cors, &request, &path) {
                    return (Label::Unmatched, self.answer_unread(request, reply).await);
                }
            }
        }
        // HEAD is GET without the body (hyper sends the head only); OPTIONS lists the methods.
        let lookup = if method == Method::HEAD {
            "GET"
        } else {
            method.as_str()
        };
        let (label, reply) = match deployment.router.find(lookup, &path) {
            RouteMatch::Found { index, params } => {
                let head = Box::new(Head {
                    method: method.as_str().into(),
                    path: path.into(),
                    headers: header_pairs(request.headers()),
                    peer: peer.clone(),
                    id: id.clone(),
                });
                return self.call(deployment, index, params, head, request).await;
            }
            RouteMatch::MethodNotAllowed { allow } if method == Method::OPTIONS => {
                (Label::Unmatched, options(&allow))
            }
            RouteMatch::MethodNotAllowed { allow } => {
                (Label::Unmatched, method_not_allowed(&method, &path, &allow))
            }
            RouteMatch::NotFound => {
                let file = match (&self.public, lookup) {
                    (Some(public), "GET") => public.answer(&path, request.headers()).await,
                    _ => None,
                };
                let reply = file.unwrap_or_else(|| {
                    let message = format!("no route for {method} {path}");
                    error_reply(StatusCode::NOT_FOUND, message)
                });
                (Label::Unmatched, reply)
            }
            RouteMatch::BadEncoding => {
                let message = format!("the path {path} is not valid percent-encoded UTF-8");
                (
                    Label::Unmatched,
                    error_reply(StatusCode::BAD_REQUEST, message),
                )
            }
        };
        (label, self.answer_unread(request, reply).await)
    }

    /// A browser's CORS preflight (OPTIONS with `Origin` and `Access-Control-Request-Method`):
    /// 204 with what the app's "cors" allows, or 403 saying what it does not. `None` for an
    /// OPTIONS that is not a preflight.
    fn preflight<B>(
        &self,
        deployment: &Deployment,
        cors: &Cors,
        request: &hyper::Request<B>,
        path: &str,
    ) -> Option<Reply> {
        let headers = request.headers();
        let origin = headers.get(ORIGIN)?.to_str().ok()?;
        let method = headers.get(ACCESS_CONTROL_REQUEST_METHOD)?.to_str().ok()?;
        let refuse = |message: String| Some(error_reply(StatusCode::FORBIDDEN, message));
        if !cors.allows(origin) {
            return refuse(format!(
                "CORS: the app does not let pages on {origin} call it"
            ));
        }
        if !cors.methods.iter().any(|m| m == method) {
            return refuse(format!(
                "CORS: pages on other origins may not use {method} (the app allows {})",
                cors.methods.join(", ")
            ));
        }
        if !matches!(
            deployment.router.find(method, path),
            RouteMatch::Found { .. }
        ) {
            return Some(error_reply(
                StatusCode::NOT_FOUND,
                format!("no route for {method} {path}"),
            ));
        }
        let mut allowed: Vec<String> = vec!["content-type".into(), REQUEST_ID.into()];
        allowed.extend(cors.headers.iter().cloned());
        let requested = headers
            .get(ACCESS_CONTROL_REQUEST_HEADERS)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        for name in requested
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
        {
            if !allowed.iter().any(|a| a.eq_ignore_ascii_case(name)) {
                return refuse(format!(
                    "CORS: pages on other origins may not send the {name} header (the app \
                     allows {})",
                    allowed.join(", ")
                ));
            }
        }
        let mut reply = Response::new(AnswerBody::empty());
        *reply.status_mut() = StatusCode::NO_CONTENT;
        allow_origin(&mut reply, cors, origin);
        let headers = reply.headers_mut();
        for (name, value) in [
            (ACCESS_CONTROL_ALLOW_METHODS, cors.methods.join(", ")),
            (ACCESS_CONTROL_ALLOW_HEADERS, allowed.join(", ")),
            (ACCESS_CONTROL_MAX_AGE, cors.max_age.to_string()),
        ] {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(name, value);
            }
        }
        Some(reply)
    }

    /// An answer to a request whose body no handler reads: the body is read and dropped when
    /// small, so that the connection carries the next request; otherwise the answer closes the
    /// connection, and says so (a client would else find it closed under its next request).
    async fn answer_unread(&self, request: hyper::Request<Incoming>, mut reply: Reply) -> Reply {
        let (parts, body) = request.into_parts();
        if body.is_end_stream() {
            return reply;
        }
        let small = declared_length(&parts.headers).is_none_or(|n| n <= DISCARD_BYTES_MAX as u64);
        let read = Limited::new(body, DISCARD_BYTES_MAX).collect();
        let drained = small
            && matches!(
                tokio::time::timeout(self.limits.body_timeout, read).await,
                Ok(Ok(_))
            );
        if !drained {
            close_after(&mut reply);
        }
        reply
    }

    /// Reads the body of a request routed to `index` of `deployment`, then parses it and runs
    /// the handler, by the version current once the body has arrived (`reroute`).
    async fn call(
        self: &Arc<Self>,
        deployment: &mut Arc<Deployment>,
        index: usize,
        params: Vec<(String, String)>,
        head: Box<Head>,
        request: hyper::Request<Incoming>,
    ) -> (Label, Reply) {
        let id = head.id.clone();
        let Some(query) = parse_query(request.uri().query()) else {
            let message = "the query string is not valid percent-encoded UTF-8";
            let reply = error_reply(StatusCode::BAD_REQUEST, message.to_string());
            return (
                Label::Route(index),
                self.answer_unread(request, reply).await,
            );
        };
        // The guard decides before the body is read, let alone checked: a client it turns away
        // learns nothing of what the route takes, and sends its body for nothing.
        if let Err(error) = self.guard(deployment, index, &params, &query, &head) {
            let reply = self.handler_error_reply(&error, guard_of(deployment, index), &id);
            return (
                Label::Route(index),
                self.answer_unread(request, reply).await,
            );
        }
        let guarded = Arc::clone(deployment);
        let (parts, body) = request.into_parts();
        let ReadBody { bytes, share } = match self.read_body(&parts.headers, body).await {
            Ok(body) => body,
            Err(refusal) => return (Label::Route(index), *refusal),
        };
        let (index, params) = match self.reroute(deployment, &parts, index, params) {
            Ok(route) => route,
            Err(refusal) => return (Label::Unmatched, *refusal),
        };
        // A reload while the body arrived: the new version's guard decides too.
        if !Arc::ptr_eq(&guarded, deployment) {
            if let Err(error) = self.guard(deployment, index, &params, &query, &head) {
                let reply = self.handler_error_reply(&error, guard_of(deployment, index), &id);
                return (Label::Route(index), reply);
            }
        }
        let subscribes = parts.method == Method::GET
            && deployment.routes[index].kind == HandlerKind::Read
            && crate::live::wants_events(&parts.headers);
        // What a live query needs to check its request again in a later version.
        let raw = subscribes.then(|| crate::live::Raw {
            params: params.clone(),
            query: query.clone(),
            head: head.clone(),
            body: bytes.clone(),
        });
        let subscription = Arc::clone(deployment);
        let deployment = &**deployment;
        // The text goes once parsed; its share of the budget stays until the answer, for the
        // values parsed from it.
        let request = match self
            .parse(deployment, index, params, query, head, bytes)
            .await
        {
            Ok(request) => request,
            Err(error) => return (Label::Route(index), body_error_reply(&error)),
        };
        if let Some(raw) = raw {
            let last_event_id = crate::live::last_event_id(&parts.headers);
            let reply = self.subscribe(&subscription, index, (raw, request), last_event_id);
            return (Label::Route(index), reply);
        }
        let reply = match self.run(deployment, index, request).await {
            Ok(answer) => answer_reply(answer),
            Err(error) => self.handler_error_reply(&error, &deployment.routes[index].handler, &id),
        };
        drop(share);
        (Label::Route(index), reply)
    }

    /// The route's guard, if it has one, run as a read on this thread with the request's head,
    /// path parameters and query: `Ok` lets the request through.
    pub(crate) fn guard(
        &self,
        deployment: &Deployment,
        index: usize,
        params: &[(String, String)],
        query: &[(String, String)],
        head: &Head,
    ) -> Result<(), HandlerError> {
        let Some(guard) = &deployment.routes[index].guard else {
            return Ok(());
        };
        let app = &deployment.app;
        let request = app.guard_request(params, query, head);
        let call = if self.limits.offload_reads {
            tokio::task::block_in_place(|| self.runtime.read_on(app, guard, request))
        } else {
            self.runtime.read_on(app, guard, request)
        };
        app.guard_verdict(guard, call)
    }

    /// The route of a request whose body has arrived, in the version current now. A reload
    /// while the body arrived (up to `--body-timeout-ms` after the head) replaces `deployment`
    /// and routes the request again, as if it had arrived whole just now: it never runs code
    /// that answers to other clients have already shown replaced. The new version may refuse
    /// it (404, 405, or a write from an origin its "cors" does not allow).
    fn reroute(
        &self,
        deployment: &mut Arc<Deployment>,
        parts: &hyper::http::request::Parts,
        index: usize,
        params: Vec<(String, String)>,
    ) -> Result<Routed, Box<Reply>> {
        let current = self.deployment.load();
        if std::ptr::eq(&**current, &**deployment) {
            return Ok((index, params));
        }
        *deployment = arc_swap::Guard::into_inner(current);
        let (method, path) = (&parts.method, parts.uri.path());
        let cors = deployment
            .app
            .cors()
            .filter(|_| !path.starts_with("/_pure/"));
        if let Some(refusal) = foreign_write(method, &parts.headers, cors) {
            return Err(Box::new(refusal));
        }
        let lookup = if *method == Method::HEAD {
            "GET"
        } else {
            method.as_str()
        };
        let refusal = match deployment.router.find(lookup, path) {
            RouteMatch::Found { index, params } => return Ok((index, params)),
            RouteMatch::MethodNotAllowed { allow } => method_not_allowed(method, path, &allow),
            RouteMatch::NotFound | RouteMatch::BadEncoding => error_reply(
                StatusCode::NOT_FOUND,
                format!("no route for {method} {path}"),
            ),
        };
        Err(Box::new(refusal))
    }

    /// The request as handlers see it, from the body's JSON: on this thread for a small body,
    /// else on the blocking pool, a few at a time.
    async fn parse(
        &self,
        deployment: &Deployment,
        route: usize,
        params: Vec<(String, String)>,
        query: Vec<(String, String)>,
        head: Box<Head>,
        bytes: Bytes,
    ) -> Result<Request, BodyError> {
        if bytes.len() <= PARSE_INLINE_BYTES_MAX {
            return deployment.app.request(route, params, query, head, &bytes);
        }
        let app = deployment.app.clone();
        let _parser = self
            .limits
            .parsers
            .acquire()
            .await
            .expect("the parser semaphore is never closed");
        tokio::task::spawn_blocking(move || app.request(route, params, query, head, &bytes))
            .await
            .unwrap_or_else(|panicked| {
                std::panic::resume_unwind(panicked.into_panic());
            })
    }

    async fn run(
        &self,
        deployment: &Deployment,
        route: usize,
        request: Request,
    ) -> Result<Answer, HandlerError> {
        let (app, route) = (&deployment.app, &deployment.routes[route]);
        match route.kind {
            HandlerKind::Read if self.limits.offload_reads => {
                tokio::task::block_in_place(|| self.runtime.read_on(app, &route.handler, request))
            }
            HandlerKind::Read => self.runtime.read_on(app, &route.handler, request),
            HandlerKind::Write => {
                let reply = self.runtime.write_on(app, &route.handler, request)?;
                reply.await.unwrap_or_else(|_| {
                    Err(HandlerError::Unavailable {
                        reason: "the runtime stopped before answering this write".into(),
                    })
                })
            }
        }
    }

    /// Reads the whole body under its limits: over `--max-body` is 413, by its Content-Length
    /// before reading a byte or as soon as a chunked body passes it; past the body budget is
    /// 503. Either closes the connection, as the rest of the body is left unread.
    async fn read_body(
        &self,
        headers: &HeaderMap,
        mut body: Incoming,
    ) -> Result<ReadBody, Box<Reply>> {
        let max = self.limits.max_body_bytes;
        let declared = declared_length(headers);
        if declared.is_some_and(|length| length > max as u64) {
            return Err(Box::new(too_large(max)));
        }
        // A declared length is taken from the budget at once; a chunked body as it arrives.
        let charged = |bytes: usize| bytes.saturating_sub(BUDGET_FREE_BYTES);
        let mut share = self.take_budget(charged(declared.unwrap_or(0) as usize))?;
        let mut bytes = Vec::with_capacity(declared.unwrap_or(0) as usize);
        let deadline = tokio::time::Instant::now() + self.limits.body_timeout;
        loop {
            let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
                Err(_) => return Err(Box::new(self.body_timed_out())),
                Ok(None) => break,
                Ok(Some(Err(error))) => {
                    let message = format!("could not read the request body: {error}");
                    let reply = closing(error_reply(StatusCode::BAD_REQUEST, message));
                    return Err(Box::new(reply));
                }
                Ok(Some(Ok(frame))) => frame,
            };
            let Some(data) = frame.data_ref() else {
                continue;
            };
            if bytes.len() + data.len() > max {
                return Err(Box::new(too_large(max)));
            }
            let uncovered = charged(bytes.len() + data.len()).saturating_sub(share.num_permits());
            if uncovered > 0 {
                share.merge(self.take_budget(uncovered)?);
            }
            bytes.extend_from_slice(data);
        }
        Ok(ReadBody {
            bytes: Bytes::from(bytes),
            share,
        })
    }

    /// `bytes` of the body budget, or the 503 that says it is spent.
    fn take_budget(&self, bytes: usize) -> Result<OwnedSemaphorePermit, Box<Reply>> {
        let permits = u32::try_from(bytes).unwrap_or(u32::MAX);
        match self
            .limits
            .body_budget
            .clone()
            .try_acquire_many_owned(permits)
        {
            Ok(share) => Ok(share),
            Err(_) => {
                self.metrics
                    .body_budget_refusals_total
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let message = format!(
                    "the server is holding as many request bodies as its budget allows ({} \
                     bytes, --body-budget); retry later",
                    self.limits.body_budget_bytes
                );
                let mut reply = error_reply(StatusCode::SERVICE_UNAVAILABLE, message);
                retry_later(&mut reply);
                Err(Box::new(closing(reply)))
            }
        }
    }

    fn body_timed_out(&self) -> Reply {
        let ms = self.limits.body_timeout.as_millis();
        let message = format!("the request body did not arrive within {ms} ms");
        closing(error_reply(StatusCode::REQUEST_TIMEOUT, message))
    }

    /// A handler's error as its answer. A failure of the handler (not a `throw`, which is its
    /// answer by design) is logged with its details, which the answer carries only with
    /// `--error-details full`.
    /// The answer to a call that failed; a script's failure is logged under `handler`, the
    /// function that failed (a route's handler, or its guard).
    pub(crate) fn handler_error_reply(
        &self,
        error: &HandlerError,
        handler: &str,
        id: &str,
    ) -> Reply {
        if is_failure(error) {
            self.log.log(&LogLine {
                level: Level::Error,
                handler,
                request_id: id,
                message: &format!("failed with {}: {error}", error.status()),
            });
        }
        self.error_reply_for(error, id)
    }

    /// The answer to a call that failed, for request `id`, without logging it (its failure
    /// was logged once, where it ran).
    pub(crate) fn error_reply_for(&self, error: &HandlerError, id: &str) -> Reply {
        if is_failure(error) && self.error_details == ErrorDetails::None {
            let body = json!({
                "error": "internal error: the handler failed; the server's log has the details \
                          under this request id",
                "status": 500,
                "request_id": id,
            });
            return json_reply(StatusCode::INTERNAL_SERVER_ERROR, &body);
        }
        handler_error_reply(error)
    }

    /// The built-in endpoints; `routes` are the counters of the routes served now.
    fn builtin(
        &self,
        routes: &[Arc<RouteCounters>],
        method: &Method,
        (name, query): (&str, Option<&str>),
        role: Role,
    ) -> Reply {
        if name == "clock" && role == Role::Admin {
            let allow = ["POST".to_string()];
            if method == Method::OPTIONS {
                return options(&allow);
            }
            if method != Method::POST {
                return method_not_allowed(method, "/_pure/clock", &allow);
            }
            return self.advance_clock(query);
        }
        if name == "export" && role == Role::Admin {
            let allow = ["POST".to_string()];
            if method == Method::OPTIONS {
                return options(&allow);
            }
            if method != Method::POST {
                return method_not_allowed(method, "/_pure/export", &allow);
            }
            return self.export(query);
        }
        if name == "reload" && role == Role::Admin {
            let allow = ["POST".to_string()];
            if method == Method::OPTIONS {
                return options(&allow);
            }
            if method != Method::POST {
                return method_not_allowed(method, "/_pure/reload", &allow);
            }
            return match tokio::task::block_in_place(|| self.reload()) {
                Ok(app) => json_reply(
                    StatusCode::OK,
                    &json!({ "reloaded": true, "app": app.name(), "routes": app.routes().len() }),
                ),
                Err(error) => json_reply(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    &json!({
                        "reloaded": false,
                        "error": format!("{error:#}"),
                        "status": 422,
                        "serving": "the previous version",
                    }),
                ),
            };
        }
        if !matches!(name, "health" | "metrics") {
            let message = match role {
                Role::Admin => format!(
                    "no built-in endpoint /_pure/{name} (there are health, metrics, reload, \
                     export and clock)"
                ),
                _ => format!("no built-in endpoint /_pure/{name} (there are health and metrics)"),
            };
            return error_reply(StatusCode::NOT_FOUND, message);
        }
        let allow = ["GET".to_string()];
        if method == Method::OPTIONS {
            return options(&allow);
        }
        if method != Method::GET && method != Method::HEAD {
            return method_not_allowed(method, &format!("/_pure/{name}"), &allow);
        }
        if name == "health" {
            return self.health();
        }
        let held = self.limits.body_budget_bytes - self.limits.body_budget.available_permits();
        let text = self
            .metrics
            .render(routes, &self.runtime.metrics(), held as u64, &self.log);
        let mut reply = Response::new(AnswerBody::whole(text));
        reply.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        );
        reply
    }

    /// `POST /_pure/export?out=DIR`: the published snapshot's tables written into `DIR` (an
    /// absolute path on the server's machine, missing or empty) while writes go on; 200 with the
    /// LSN of the state written and the rows of each table, 422 when it cannot be done.
    /// `POST /_pure/clock?advance=MS`: moves a `--fixed-now` clock forward and answers once the
    /// schedule's entries due by then have run and are durable.
    fn advance_clock(&self, query: Option<&str>) -> Reply {
        let advance = parse_query(query).and_then(|pairs| {
            pairs
                .into_iter()
                .find(|(name, _)| name == "advance")
                .and_then(|(_, ms)| ms.parse::<i64>().ok())
        });
        let Some(ms) = advance.filter(|ms| *ms >= 0) else {
            let message = "clock needs ?advance=MS, the milliseconds to move the clock forward \
                           (0 or more)"
                .to_string();
            return error_reply(StatusCode::BAD_REQUEST, message);
        };
        match tokio::task::block_in_place(|| self.runtime.advance_clock(ms)) {
            Ok((now, ran, failed)) => json_reply(
                StatusCode::OK,
                &json!({ "now": now, "ran": ran, "failed": failed }),
            ),
            Err(error) => handler_error_reply(&error),
        }
    }

    fn export(&self, query: Option<&str>) -> Reply {
        let out = parse_query(query).and_then(|pairs| {
            pairs
                .into_iter()
                .find(|(name, _)| name == "out")
                .map(|(_, out)| std::path::PathBuf::from(out))
        });
        let Some(out) = out.filter(|out| out.is_absolute()) else {
            let message = "export needs ?out=DIR, an absolute path on the server's machine, \
                           missing or empty, into which it writes one <table>.jsonl a table"
                .to_string();
            return error_reply(StatusCode::BAD_REQUEST, message);
        };
        let progress = pure_runtime::Progress::default();
        let exported = tokio::task::block_in_place(|| self.runtime.export(&out, &progress));
        match exported {
            Ok(exported) => {
                let tables: serde_json::Map<String, Value> = exported
                    .tables
                    .iter()
                    .map(|t| (t.table.clone(), Value::from(t.rows)))
                    .collect();
                eprintln!(
                    "pure-serve: exported the state at LSN {} into {}",
                    exported.lsn,
                    out.display()
                );
                json_reply(
                    StatusCode::OK,
                    &json!({
                        "exported": true,
                        "lsn": exported.lsn,
                        "out": out.display().to_string(),
                        "tables": tables,
                        "notes": exported.notes,
                    }),
                )
            }
            Err(error) => json_reply(
                StatusCode::UNPROCESSABLE_ENTITY,
                &json!({ "error": error.to_string(), "status": 422, "exported": false }),
            ),
        }
    }

    /// 200 `ok` while the server takes writes; 503 `poisoned` (for good, until a restart) or
    /// `degraded` (until a checkpoint frees the log) while it refuses them, with the reason, so
    /// that a load balancer can send writes elsewhere.
    fn health(&self) -> Reply {
        let health = self.runtime.health();
        let (status, reason) = match (&health.poisoned, &health.refusing_writes) {
            (Some(reason), _) => ("poisoned", Some(reason)),
            (None, Some(reason)) => ("degraded", Some(reason)),
            (None, None) => ("ok", None),
        };
        let body = json!({
            "status": status,
            "reason": reason,
            "app": health.app,
            "durable_lsn": health.durable_lsn,
            "state_bytes": health.state_bytes,
            "poisoned": health.poisoned,
            "last_checkpoint_error": health.last_checkpoint_error,
        });
        let code = match reason {
            Some(_) => StatusCode::SERVICE_UNAVAILABLE,
            None => StatusCode::OK,
        };
        json_reply(code, &body)
    }
}

/// Names the handlers that run in Rhai's evaluator rather than compiled, and why: they work the
/// same, slower, and an author who wants the speed can see what to change.
pub fn report_interpreted(app: &App) {
    let mut seen = std::collections::HashSet::new();
    for route in app.routes() {
        if !seen.insert(route.handler.as_str()) {
            continue;
        }
        if let Some(pure_runtime::Execution::Interpreted { reason }) = app.execution(&route.handler)
        {
            eprintln!(
                "pure-serve: handler {} runs in Rhai's evaluator, not compiled: {reason}",
                route.handler
            );
        }
    }
}

/// What is wrong with a request's head that routing does not decide: a `Host` header missing
/// from HTTP/1.1 or given twice (RFC 9112, section 3.2: a 400), a target over the limit (414).
fn check_head<B: Body>(request: &hyper::Request<B>) -> Option<Reply> {
    let hosts = request.headers().get_all(HOST).iter().count();
    let problem = match (request.version(), hosts) {
        (_, 2..) => Some("a request must not have more than one Host header"),
        (Version::HTTP_11, 0) => Some("an HTTP/1.1 request must have a Host header"),
        _ => None,
    };
    if let Some(problem) = problem {
        return Some(error_reply(StatusCode::BAD_REQUEST, problem.to_string()));
    }
    // hyper frames a body by its last transfer coding, `chunked`, and passes the others on as
    // if the body were plain: a gzip-coded body would reach the JSON parser still compressed.
    // RFC 9112, section 6.1: a coding the server does not understand is a 501.
    // A body framed by a transfer coding has no length hyper knows: a request without one
    // (nearly all of them) skips the lookup.
    let sized = request.body().size_hint().exact().is_some();
    let unknown = (!sized)
        .then(|| request.headers().get_all(TRANSFER_ENCODING))
        .into_iter()
        .flatten()
        .flat_map(|value| value.as_bytes().split(|&b| b == b','))
        .map(|coding| String::from_utf8_lossy(coding.trim_ascii()).to_ascii_lowercase())
        .find(|coding| !coding.is_empty() && coding != "chunked");
    if let Some(coding) = unknown {
        let message = format!(
            "the request body's transfer coding {coding:?} is not supported: send the body \
             with Content-Length, or with Transfer-Encoding: chunked alone"
        );
        return Some(closing(error_reply(StatusCode::NOT_IMPLEMENTED, message)));
    }
    let uri = request.uri();
    let target = uri.path_and_query().map_or(0, |pq| pq.as_str().len())
        + uri.authority().map_or(0, |a| a.as_str().len());
    if target > REQUEST_TARGET_BYTES_MAX {
        let message = format!(
            "the request target is longer than the limit of {REQUEST_TARGET_BYTES_MAX} bytes"
        );
        return Some(error_reply(StatusCode::URI_TOO_LONG, message));
    }
    None
}

fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
}

fn closing(mut reply: Reply) -> Reply {
    close_after(&mut reply);
    reply
}

fn close_after(reply: &mut Reply) {
    reply
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
}

fn retry_later(reply: &mut Reply) {
    reply
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from_static(RETRY_AFTER_SECONDS));
}

fn body_error_reply(error: &BodyError) -> Reply {
    match error {
        BodyError::Malformed { .. } | BodyError::TooDeep { .. } => {
            error_reply(StatusCode::BAD_REQUEST, error.to_string())
        }
        // The shape of a handler's thrown 400, which a declaration replaces.
        BodyError::Invalid { message } => json_reply(
            StatusCode::BAD_REQUEST,
            &json!({ "error": message, "status": 400 }),
        ),
        BodyError::TooLarge { limit, max } => json_reply(
            StatusCode::PAYLOAD_TOO_LARGE,
            &json!({
                "error": error.to_string(), "status": 413, "limit": limit, "limit_value": max
            }),
        ),
    }
}

/// A failure of the handler, not an answer it chose (a `throw` is one by design).
fn is_failure(error: &HandlerError) -> bool {
    matches!(
        error,
        HandlerError::Script { .. }
            | HandlerError::Limit { .. }
            | HandlerError::NoSuchHandler { .. }
            | HandlerError::Panicked { .. }
    )
}

/// The name of route `index`'s guard (a route that has run its guard has one).
fn guard_of(deployment: &Deployment, index: usize) -> &str {
    let route = &deployment.routes[index];
    route.guard.as_deref().unwrap_or(&route.handler)
}

fn handler_error_reply(error: &HandlerError) -> Reply {
    let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut reply = json_reply(status, &error.to_json());
    if let HandlerError::Refused { headers, .. } = error {
        for (name, value) in headers {
            // `respond` checked them.
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                reply.headers_mut().append(name, value);
            }
        }
    }
    if matches!(error, HandlerError::Unavailable { .. }) {
        retry_later(&mut reply);
    }
    reply
}

/// The methods of every route an address serves, the built-in endpoints' among them.
fn server_methods(deployment: &Deployment, role: Role) -> Vec<String> {
    let app = deployment.routes.iter().map(|route| route.method.clone());
    let mut methods: Vec<String> = match role {
        Role::App => app.collect(),
        Role::AppAndBuiltins => app.chain(["GET".to_string()]).collect(),
        Role::Admin => vec!["GET".to_string(), "POST".to_string()],
    };
    methods.sort();
    methods.dedup();
    methods
}

/// The methods a path takes, as the `Allow` header lists them: HEAD with GET, and OPTIONS.
fn allow_list(allow: &[String]) -> String {
    let mut methods: Vec<&str> = allow.iter().map(String::as_str).collect();
    if methods.contains(&"GET") {
        methods.push("HEAD");
    }
    methods.push("OPTIONS");
    methods.join(", ")
}

fn options(allow: &[String]) -> Reply {
    let mut reply = Response::new(AnswerBody::empty());
    *reply.status_mut() = StatusCode::NO_CONTENT;
    if let Ok(value) = HeaderValue::from_str(&allow_list(allow)) {
        reply.headers_mut().insert(ALLOW, value);
    }
    reply
}

fn method_not_allowed(method: &Method, path: &str, allow: &[String]) -> Reply {
    let message = format!("{path} does not take {method}");
    let mut reply = json_reply(
        StatusCode::METHOD_NOT_ALLOWED,
        &json!({ "error": message, "status": 405, "allow": allow }),
    );
    if let Ok(value) = HeaderValue::from_str(&allow_list(allow)) {
        reply.headers_mut().insert(ALLOW, value);
    }
    reply
}

fn too_large(max: usize) -> Reply {
    let message = format!("the request body is larger than the limit of {max} bytes");
    closing(json_reply(
        StatusCode::PAYLOAD_TOO_LARGE,
        &json!({ "error": message, "status": 413, "limit_bytes": max }),
    ))
}

/// The headers that let a page on `origin` read an answer.
fn allow_origin(reply: &mut Reply, cors: &Cors, origin: &str) {
    let headers = reply.headers_mut();
    let value = if cors.origins.is_none() && !cors.credentials {
        HeaderValue::from_static("*")
    } else {
        match HeaderValue::from_str(origin) {
            Ok(value) => value,
            Err(_) => return,
        }
    };
    headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, value);
    if cors.credentials {
        headers.insert(
            ACCESS_CONTROL_ALLOW_CREDENTIALS,
            HeaderValue::from_static("true"),
        );
    }
}

/// A handler's answer: its status and headers (checked by `respond` when it was called), and
/// its body's JSON text as the handler's call wrote it, or none for 204 and 304.
pub(crate) fn answer_reply(answer: Answer) -> Reply {
    let status = StatusCode::from_u16(answer.status).expect("respond checks the status");
    let mut reply = if has_no_body(answer.status) {
        Response::new(AnswerBody::empty())
    } else {
        let mut reply = Response::new(AnswerBody::from_json(answer.body));
        reply
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        reply
    };
    *reply.status_mut() = status;
    for (name, value) in &answer.headers {
        let name = HeaderName::from_bytes(name.as_bytes()).expect("respond checks header names");
        let value = HeaderValue::from_str(value).expect("respond checks header values");
        reply.headers_mut().append(name, value);
    }
    reply
}

/// The request's headers as a handler sees them: names in lower case (as hyper keeps them),
/// each once, repeated values joined in the order sent with ", " (a cookie's with "; ").
/// A value that is not UTF-8 is passed with its invalid bytes replaced.
fn header_pairs(headers: &HeaderMap) -> Vec<(ImmutableString, ImmutableString)> {
    let mut pairs = Vec::with_capacity(headers.keys_len());
    for name in headers.keys() {
        let mut values = headers.get_all(name).iter();
        // Visible ASCII, nearly always: `to_str` checks that faster than a lossy decoding.
        fn text(value: &HeaderValue) -> Cow<'_, str> {
            match value.to_str() {
                Ok(text) => Cow::Borrowed(text),
                Err(_) => String::from_utf8_lossy(value.as_bytes()),
            }
        }
        let mut joined = values.next().map_or(Cow::Borrowed(""), text);
        let separator = if name == COOKIE { "; " } else { ", " };
        for value in values {
            let joined = joined.to_mut();
            joined.push_str(separator);
            joined.push_str(&text(value));
        }
        pairs.push((name.as_str().into(), joined.as_ref().into()));
    }
    pairs
}

/// A 503 for want of capacity, with when to retry.
pub(crate) fn unavailable_reply(message: String) -> Reply {
    let mut reply = error_reply(StatusCode::SERVICE_UNAVAILABLE, message);
    retry_later(&mut reply);
    reply
}

fn error_reply(status: StatusCode, message: String) -> Reply {
    json_reply(
        status,
        &json!({ "error": message, "status": status.as_u16() }),
    )
}

pub fn json_reply(status: StatusCode, body: &Value) -> Reply {
    // In chunks: a large answer takes no one large allocation, and the chunks the client has
    // taken are freed while it reads the rest (see `answer`).
    let mut reply = Response::new(AnswerBody::from_json(pure_lang::Json::from_value(body)));
    *reply.status_mut() = status;
    reply
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    reply
}
