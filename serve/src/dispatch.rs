//! The request path: route, read the body under its limits, call the handler, answer in JSON.
//!
//! Read handlers run right here, on the HTTP worker thread: a read is a few microseconds of
//! script against an immutable snapshot, and the script limits stop a runaway one within tens of
//! milliseconds. Handing each read to another thread cost more than the read itself: on this
//! 2-core machine, 16 clients reading players got 42,700–44,100 reads/s inline against
//! 22,700–24,800 with `block_in_place` and 22,700–23,900 with `spawn_blocking`. The price of
//! inline is that a slow read holds up the other connections of its worker until it ends;
//! `--offload-reads` chooses `block_in_place` instead, for apps with long reads.
//!
//! Write handlers go through `Runtime::write`, which runs them right here when the owner's role is
//! free (one write at a time, bounded by the script limits like a read); the task awaits the
//! reply, which arrives only once the write's group is durable.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderMap, HeaderValue, ALLOW, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Response, StatusCode};
use pure_runtime::{HandlerError, HandlerKind, Request, Route, Runtime};
use serde_json::{json, Value};

use crate::metrics::{Label, ServerMetrics};
use crate::route::{parse_query, RouteMatch, Router};

pub type Reply = Response<Full<Bytes>>;

/// Limits on what a request may send, and where its read handler runs.
#[derive(Clone, Copy, Debug)]
pub struct RequestLimits {
    pub max_body_bytes: usize,
    pub body_timeout: Duration,
    /// Run read handlers under `block_in_place` rather than inline on the worker.
    pub offload_reads: bool,
}

/// Everything a request needs, shared by all connections.
pub struct Dispatch {
    runtime: Runtime,
    routes: Vec<Route>,
    router: Router,
    pub metrics: ServerMetrics,
    limits: RequestLimits,
}

impl Dispatch {
    pub fn new(runtime: Runtime, limits: RequestLimits) -> Dispatch {
        let routes = runtime.app().routes().to_vec();
        Dispatch {
            router: Router::new(&routes),
            metrics: ServerMetrics::new(&routes),
            routes,
            runtime,
            limits,
        }
    }

    /// hyper's service entry point: never fails, every outcome is a JSON response.
    pub async fn handle(
        self: Arc<Self>,
        request: hyper::Request<Incoming>,
    ) -> Result<Reply, Infallible> {
        let started = Instant::now();
        let (label, reply) = self.route(request).await;
        self.metrics
            .record(label, reply.status().as_u16(), started.elapsed());
        Ok(reply)
    }

    async fn route(&self, request: hyper::Request<Incoming>) -> (Label, Reply) {
        let method = request.method().clone();
        let path = request.uri().path().to_string();
        if let Some(name) = path.strip_prefix("/_pure/") {
            let label = match name {
                "health" => Label::Health,
                "metrics" => Label::Metrics,
                _ => Label::Unmatched,
            };
            return (label, self.builtin(&method, name));
        }
        match self.router.find(method.as_str(), &path) {
            RouteMatch::Found { index, params } => {
                (Label::Route(index), self.call(index, params, request).await)
            }
            RouteMatch::MethodNotAllowed { allow } => {
                (Label::Unmatched, method_not_allowed(&method, &path, &allow))
            }
            RouteMatch::NotFound => {
                let message = format!("no route for {method} {path}");
                (
                    Label::Unmatched,
                    json_reply(StatusCode::NOT_FOUND, &json!({ "error": message })),
                )
            }
            RouteMatch::BadEncoding => {
                let message = format!("the path {path} is not valid percent-encoded UTF-8");
                (
                    Label::Unmatched,
                    json_reply(StatusCode::BAD_REQUEST, &json!({ "error": message })),
                )
            }
        }
    }

    async fn call(
        &self,
        index: usize,
        params: Vec<(String, String)>,
        request: hyper::Request<Incoming>,
    ) -> Reply {
        let Some(query) = parse_query(request.uri().query()) else {
            let error = json!({ "error": "the query string is not valid percent-encoded UTF-8" });
            return json_reply(StatusCode::BAD_REQUEST, &error);
        };
        let (parts, body) = request.into_parts();
        let body = match self
            .read_body(&parts.headers, body)
            .await
            .and_then(|b| parse_json(&b))
        {
            Ok(body) => body,
            Err(refusal) => return refusal.reply(),
        };
        let request = Request {
            params,
            query,
            body,
        };
        match self.run(&self.routes[index], request).await {
            Ok(value) => json_reply(StatusCode::OK, &value),
            Err(error) => handler_error_reply(&error),
        }
    }

    async fn run(&self, route: &Route, request: Request) -> Result<Value, HandlerError> {
        match route.kind {
            HandlerKind::Read if self.limits.offload_reads => {
                tokio::task::block_in_place(|| self.runtime.read(&route.handler, request))
            }
            HandlerKind::Read => self.runtime.read(&route.handler, request),
            HandlerKind::Write => {
                let reply = self.runtime.write(&route.handler, request)?;
                reply.await.unwrap_or_else(|_| {
                    Err(HandlerError::Unavailable {
                        reason: "the runtime stopped before answering this write".into(),
                    })
                })
            }
        }
    }

    /// Reads the whole body, refusing one over the limit: by its Content-Length before reading
    /// a byte, or as soon as a chunked body passes the limit.
    async fn read_body(&self, headers: &HeaderMap, body: Incoming) -> Result<Bytes, Refusal> {
        let max = self.limits.max_body_bytes;
        let declared = headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|length| length > max as u64) {
            return Err(too_large(max));
        }
        match tokio::time::timeout(self.limits.body_timeout, Limited::new(body, max).collect())
            .await
        {
            Ok(Ok(collected)) => Ok(collected.to_bytes()),
            Ok(Err(error)) if error.downcast_ref::<LengthLimitError>().is_some() => {
                Err(too_large(max))
            }
            Ok(Err(error)) => {
                let message = format!("could not read the request body: {error}");
                Err(Refusal::closing(
                    StatusCode::BAD_REQUEST,
                    json!({ "error": message }),
                ))
            }
            Err(_) => {
                let ms = self.limits.body_timeout.as_millis();
                let message = format!("the request body did not arrive within {ms} ms");
                Err(Refusal::closing(
                    StatusCode::REQUEST_TIMEOUT,
                    json!({ "error": message }),
                ))
            }
        }
    }

    fn builtin(&self, method: &Method, name: &str) -> Reply {
        if !matches!(name, "health" | "metrics") {
            let message =
                format!("no built-in endpoint /_pure/{name} (there are health and metrics)");
            return json_reply(StatusCode::NOT_FOUND, &json!({ "error": message }));
        }
        if method != Method::GET {
            return method_not_allowed(method, &format!("/_pure/{name}"), &["GET".to_string()]);
        }
        if name == "health" {
            return self.health();
        }
        let text = self.metrics.render(&self.runtime.metrics());
        let mut reply = Response::new(Full::new(Bytes::from(text)));
        reply.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        );
        reply
    }

    fn health(&self) -> Reply {
        let health = self.runtime.health();
        let status = if health.poisoned.is_some() {
            "poisoned"
        } else {
            "ok"
        };
        let body = json!({
            "status": status,
            "app": health.app,
            "durable_lsn": health.durable_lsn,
            "state_bytes": health.state_bytes,
            "poisoned": health.poisoned,
            "last_checkpoint_error": health.last_checkpoint_error,
        });
        let code = if health.poisoned.is_some() {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        };
        json_reply(code, &body)
    }
}

fn parse_json(body: &[u8]) -> Result<Value, Refusal> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(body).map_err(|error| {
        let message = format!("malformed JSON body: {error}");
        Refusal {
            status: StatusCode::BAD_REQUEST,
            body: json!({ "error": message }),
            close: false,
        }
    })
}

/// A request refused before its handler ran (kept small: a `Reply` is built only to send it).
struct Refusal {
    status: StatusCode,
    body: Value,
    /// The rest of the request body was never read, so the stream cannot carry another request.
    close: bool,
}

impl Refusal {
    fn closing(status: StatusCode, body: Value) -> Refusal {
        Refusal {
            status,
            body,
            close: true,
        }
    }

    fn reply(self) -> Reply {
        let mut reply = json_reply(self.status, &self.body);
        if self.close {
            reply
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
        }
        reply
    }
}

fn handler_error_reply(error: &HandlerError) -> Reply {
    let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_reply(status, &error.to_json())
}

fn method_not_allowed(method: &Method, path: &str, allow: &[String]) -> Reply {
    let message = format!("{path} does not take {method}");
    let mut reply = json_reply(
        StatusCode::METHOD_NOT_ALLOWED,
        &json!({ "error": message, "allow": allow }),
    );
    if let Ok(value) = HeaderValue::from_str(&allow.join(", ")) {
        reply.headers_mut().insert(ALLOW, value);
    }
    reply
}

fn too_large(max: usize) -> Refusal {
    let message = format!("the request body is larger than the limit of {max} bytes");
    Refusal::closing(
        StatusCode::PAYLOAD_TOO_LARGE,
        json!({ "error": message, "limit_bytes": max }),
    )
}

pub fn json_reply(status: StatusCode, body: &Value) -> Reply {
    let bytes = serde_json::to_vec(body).expect("a serde_json::Value always serializes");
    let mut reply = Response::new(Full::new(Bytes::from(bytes)));
    *reply.status_mut() = status;
    reply
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    reply
}
