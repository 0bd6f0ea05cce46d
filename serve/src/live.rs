//! Live queries: a GET of a read route that asks for `text/event-stream` gets a Server-Sent
//! Events stream of the route's answers, one event per durable state that changes the answer.
//!
//! Events come only from published snapshots, which the runtime publishes once a group is
//! durable: a subscriber never sees a state that a crash could lose. The stream wakes on each
//! publication (`Runtime::publications`), runs the handler again only when the group wrote a
//! table the last run read (its read set), and sends an event only when the answer differs from
//! the last one sent. Each event's `id` is the LSN of the snapshot it was computed on, so a
//! client that reconnects with `Last-Event-ID` is sent the current answer only if it is newer.
//!
//! The handler runs where the stream is polled: on the HTTP worker that serves the connection,
//! as any read (under `--offload-reads`, on a blocking thread), under the handler's limits. The
//! stream computes its next event only when hyper asks for one, which it does only when its
//! write buffer has room: a subscriber that does not keep up is not run for the states it would
//! not read, and when it catches up it is sent the newest answer (the publications it passed
//! over are counted as coalesced). Nothing queues per subscriber but what hyper and the kernel
//! buffer for any answer, and a subscriber that takes nothing for `--send-timeout-ms` is cut as
//! any client is.
//!
//! A reload makes each stream run the new version's handler of the route with the same method
//! and pattern (its request checked again by the new version), or end if there is none. A stop
//! ends every stream (the body ends, and the connection with it).
//!
//! It must not know how a publication is made, nor how a connection is held: it reads the
//! runtime's publications and gives hyper a body.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use hyper::body::{Bytes, Frame};
use hyper::header::{HeaderMap, HeaderValue, ACCEPT, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use pure_runtime::{
    Answer, HandlerError, HandlerKind, Head, LiveRead, Publication, Request, TableSet,
};
use tokio::sync::watch;

use crate::answer::AnswerBody;
use crate::connections::BusyGuard;
use crate::dispatch::{Deployment, Dispatch, Reply};

/// What the stream asks `EventSource` to wait before reconnecting (its default is about 3 s):
/// a restarted server is back within this of being reachable.
const RETRY_MS: u64 = 1000;

/// Whether a request asks for an event stream (`Accept` names `text/event-stream`).
pub fn wants_events(headers: &HeaderMap) -> bool {
    headers.get_all(ACCEPT).iter().any(|value| {
        value.to_str().is_ok_and(|text| {
            text.split(',').any(|item| {
                let media = item.split(';').next().unwrap_or("").trim();
                media.eq_ignore_ascii_case("text/event-stream")
            })
        })
    })
}

/// The `Last-Event-ID` a reconnecting `EventSource` sends: the LSN of the last event it had.
pub fn last_event_id(headers: &HeaderMap) -> Option<u64> {
    headers
        .get("last-event-id")?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// What a subscription needs to run its route again in a later version of the app: the
/// request as it came, before any version checked it.
pub struct Raw {
    pub params: Vec<(String, String)>,
    pub query: Vec<(String, String)>,
    pub head: Box<Head>,
    pub body: Bytes,
}

/// One open subscription, counted in `pure_live_subscriptions_open` while it lives.
struct Subscription {
    dispatch: Arc<Dispatch>,
    /// The version whose handler it runs, and the route's index there.
    deployment: Arc<Deployment>,
    index: usize,
    /// The route's method and pattern: a reload keeps the stream on the route that has them.
    method: String,
    pattern: String,
    raw: Raw,
    /// The request as `deployment` checked it.
    request: Request,
    publications: watch::Receiver<Publication>,
    stop: watch::Receiver<bool>,
    reloads: watch::Receiver<u64>,
    /// The tables the last run read, and the LSN it ran at: a publication that wrote none of
    /// them after it leaves the answer as it was.
    read: TableSet,
    at_lsn: u64,
    /// The number of the last publication looked at.
    seen: u64,
    /// The last event's data as sent, and whether it was a failure: an equal answer is not
    /// sent again. `None` before the first (or when the client's last event is not known).
    last: Option<(bool, Bytes)>,
    /// No event is sent for a state at or before this LSN: the last sent, or the client's
    /// `Last-Event-ID`.
    sent_lsn: u64,
    /// A last event was sent: the stream ends.
    ended: bool,
    /// The query whose answers it shares, if it shares them.
    query: Option<Arc<SharedQuery>>,
    /// No event before this (`--live-interval-ms` after the last one).
    quiet_until: Option<tokio::time::Instant>,
    /// When the stream, silent since, sends a comment (`--live-heartbeat-ms` after it last
    /// sent anything): proxies see the connection live, and a peer that is gone is found out by
    /// the write. A deadline, not a timer started at each look: publications that change
    /// nothing of the stream's must not keep it silent for good.
    heartbeat_at: tokio::time::Instant,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.dispatch
            .metrics
            .live_subscriptions_open
            .fetch_sub(1, Relaxed);
    }
}

/// A computed answer, as the stream sends it.
struct Computed {
    lsn: u64,
    /// An error answer (a thrown status, a failed handler) is sent as an event named `failure`.
    failure: bool,
    data: Bytes,
    /// The tables the run read.
    read: TableSet,
    /// Why the run failed, if it did: a stream that shares the run renders its own event from
    /// it (under `--error-details none` the body names the subscriber's request id, which is
    /// its own and no other's).
    error: Option<HandlerError>,
}

/// The streams of one query (one version's read route with the same parameters, query and
/// body, whose handler reads nothing of the request's head and which has no guard) share its
/// answers: the first stream to look at a publication runs the handler, and the others take
/// that answer as long as it is as new as the publication they look at. A thousand
/// subscribers to `/top` cost one run a group, not a thousand.
pub(crate) struct SharedQuery {
    /// Keeps the version alive while the query is: its address is part of the key.
    _deployment: Arc<Deployment>,
    last: std::sync::Mutex<Option<Arc<Computed>>>,
}

/// What makes two subscriptions one query.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct QueryKey {
    deployment: usize,
    index: usize,
    params: Vec<(String, String)>,
    query: Vec<(String, String)>,
    body: Bytes,
}

impl Dispatch {
    /// The shared query of a subscription to route `index` with `raw`, if it can share one.
    fn shared_query(
        &self,
        deployment: &Arc<Deployment>,
        index: usize,
        raw: &Raw,
    ) -> Option<Arc<SharedQuery>> {
        let route = &deployment.routes[index];
        if route.guard.is_some() || deployment.app.handler_reads_head(&route.handler) {
            return None;
        }
        let key = QueryKey {
            deployment: Arc::as_ptr(deployment) as usize,
            index,
            params: raw.params.clone(),
            query: raw.query.clone(),
            body: raw.body.clone(),
        };
        let mut queries = self
            .live_queries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(query) = queries.get(&key).and_then(std::sync::Weak::upgrade) {
            return Some(query);
        }
        // Forget the queries no stream holds any more, now and then.
        if queries.len() >= 64 && queries.len().is_power_of_two() {
            queries.retain(|_, query| query.strong_count() > 0);
        }
        let query = Arc::new(SharedQuery {
            _deployment: deployment.clone(),
            last: std::sync::Mutex::new(None),
        });
        queries.insert(key, Arc::downgrade(&query));
        Some(query)
    }
}

type Next = Pin<Box<dyn Future<Output = (Subscription, Option<Bytes>)> + Send>>;

/// The body of an event stream: the first event at once, then each as hyper asks for it.
pub struct EventStream {
    first: Option<Bytes>,
    subscription: Option<Subscription>,
    next: Option<Next>,
    /// The connection counts as answering while the stream lasts: it is never shed as idle,
    /// and a stop waits for the stream to end rather than dropping it.
    busy: Option<BusyGuard>,
}

impl EventStream {
    /// Marks the connection busy for as long as the stream lasts.
    pub fn hold(&mut self, busy: BusyGuard) {
        self.busy = Some(busy);
    }

    pub fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Ok(Frame::data(first))));
        }
        if self.next.is_none() {
            let Some(subscription) = self.subscription.take() else {
                return Poll::Ready(None);
            };
            self.next = Some(Box::pin(subscription.next_event()));
        }
        let next = self.next.as_mut().expect("set above");
        match next.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready((subscription, event)) => {
                self.next = None;
                match event {
                    Some(event) => {
                        self.subscription = Some(subscription);
                        Poll::Ready(Some(Ok(Frame::data(event))))
                    }
                    None => {
                        drop(subscription);
                        self.busy = None;
                        Poll::Ready(None)
                    }
                }
            }
        }
    }
}

impl Dispatch {
    /// Answers a subscription to read route `index` of `deployment`: a 503 past
    /// `--max-subscriptions`, the route's own answer if its first run is not a success (a
    /// client is told at once that it cannot subscribe, not by an event), else the stream.
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        deployment: &Arc<Deployment>,
        index: usize,
        (raw, request): (Raw, Request),
        last_event_id: Option<u64>,
    ) -> Reply {
        let route = &deployment.routes[index];
        debug_assert_eq!(route.kind, HandlerKind::Read);
        let metrics = &self.metrics;
        let open = metrics.live_subscriptions_open.fetch_add(1, Relaxed);
        if open >= self.max_subscriptions as u64 {
            metrics.live_subscriptions_open.fetch_sub(1, Relaxed);
            metrics.live_refused_total.fetch_add(1, Relaxed);
            let message = format!(
                "the server holds as many live subscriptions as it may ({}, \
                 --max-subscriptions); retry later",
                self.max_subscriptions
            );
            return crate::dispatch::unavailable_reply(message);
        }
        // Counted from here on: the drop of `subscription` uncounts it.
        let mut publications = self.runtime.publications();
        let seen = publications.borrow_and_update().number;
        let mut subscription = Subscription {
            dispatch: self.clone(),
            deployment: deployment.clone(),
            index,
            method: route.method.clone(),
            pattern: route.path.clone(),
            raw,
            request,
            publications,
            stop: self.stopping.clone(),
            reloads: self.reloads.subscribe(),
            read: TableSet::default(),
            at_lsn: 0,
            seen,
            last: None,
            sent_lsn: last_event_id.unwrap_or(0),
            ended: false,
            query: None,
            quiet_until: None,
            heartbeat_at: tokio::time::Instant::now() + self.live_heartbeat,
        };
        subscription.query = self.shared_query(deployment, index, &subscription.raw);
        // The guard let the request through already.
        let live = self.read_live(deployment, index, &subscription.request);
        let answer = match live.answer {
            Ok(answer) if (200..300).contains(&answer.status) => answer,
            Ok(answer) => return crate::dispatch::answer_reply(answer),
            Err(error) => {
                return self.handler_error_reply(&error, &route.handler, &subscription.raw.head.id)
            }
        };
        metrics.live_subscriptions_total.fetch_add(1, Relaxed);
        subscription.read = live.read;
        subscription.at_lsn = live.lsn;
        let computed = Computed {
            lsn: live.lsn,
            failure: false,
            data: answer_data(answer),
            read: TableSet::default(),
            error: None,
        };
        let mut first = format!("retry: {RETRY_MS}\n").into_bytes();
        match last_event_id {
            // The client has the answer at its id. At an id past the state's (a state
            // restored from a backup) it has none of this state's: it is sent the first
            // answer newer than its id.
            Some(id) if computed.lsn <= id => {
                if computed.lsn == id {
                    subscription.last = Some((false, computed.data));
                }
            }
            _ => {
                subscription.remember(&computed);
                write_event(&mut first, &computed);
                metrics.live_events_total.fetch_add(1, Relaxed);
                if !self.live_interval.is_zero() {
                    subscription.quiet_until =
                        Some(tokio::time::Instant::now() + self.live_interval);
                }
            }
        }
        first.push(b'\n');
        let stream = EventStream {
            first: Some(Bytes::from(first)),
            subscription: Some(subscription),
            next: None,
            busy: None,
        };
        let mut reply = Response::new(AnswerBody::Events(Box::new(stream)));
        *reply.status_mut() = StatusCode::OK;
        let headers = reply.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        reply
    }

    /// Runs route `index`'s handler on the latest published snapshot, where reads run.
    fn read_live(&self, deployment: &Deployment, index: usize, request: &Request) -> LiveRead {
        let (app, handler) = (&deployment.app, &deployment.routes[index].handler);
        let started = Instant::now();
        let live = if self.limits.offload_reads {
            tokio::task::block_in_place(|| self.runtime.read_live(app, handler, request))
        } else {
            self.runtime.read_live(app, handler, request)
        };
        let metrics = &self.metrics;
        metrics.live_runs_total.fetch_add(1, Relaxed);
        metrics
            .live_run_nanoseconds_total
            .fetch_add(started.elapsed().as_nanos() as u64, Relaxed);
        live
    }
}

impl Subscription {
    /// The next thing to send: an event, a heartbeat, or `None` to end the stream.
    async fn next_event(mut self) -> (Subscription, Option<Bytes>) {
        if self.ended {
            return (self, None);
        }
        // At most an event an interval: what changes meanwhile is coalesced into the next.
        if let Some(until) = self.quiet_until.take() {
            tokio::select! {
                biased;
                _ = stopped(&mut self.stop) => return (self, None),
                _ = tokio::time::sleep_until(until) => {}
            }
        }
        loop {
            tokio::select! {
                biased;
                _ = stopped(&mut self.stop) => return (self, None),
                changed = self.publications.changed() => {
                    if changed.is_err() {
                        // The runtime is gone: nothing will change any more.
                        return (self, None);
                    }
                }
                changed = self.reloads.changed() => {
                    if changed.is_err() {
                        return (self, None);
                    }
                    self.reloads.borrow_and_update();
                }
                _ = tokio::time::sleep_until(self.heartbeat_at) => {
                    self.sent();
                    return (self, Some(Bytes::from_static(b":\n\n")));
                }
            }
            if let Some(event) = self.look() {
                self.sent();
                return (self, Some(event));
            }
            if self.ended {
                return (self, None);
            }
        }
    }

    /// Looks at the newest publication (and version of the app): the event to send, if the
    /// answer changed.
    fn look(&mut self) -> Option<Bytes> {
        let dispatch = self.dispatch.clone();
        let metrics = &dispatch.metrics;
        let publication = self.publications.borrow_and_update().clone();
        let passed_over = publication.number.saturating_sub(self.seen + 1);
        metrics
            .live_events_coalesced_total
            .fetch_add(passed_over, Relaxed);
        self.seen = self.seen.max(publication.number);
        let current = dispatch.deployment.load_full();
        let reloaded = !Arc::ptr_eq(&current, &self.deployment);
        if !reloaded && !publication.changed_since(&self.read, self.at_lsn) {
            metrics.live_runs_skipped_total.fetch_add(1, Relaxed);
            return None;
        }
        if reloaded {
            if let Err(message) = self.follow(current) {
                return Some(self.last_event(message));
            }
        }
        // Never an answer older than the last this stream ran or took.
        let computed = match self.answer(publication.lsn.max(self.at_lsn)) {
            Ok(computed) => computed,
            Err(last) => return Some(last),
        };
        // A failure is told to each subscriber in its own words.
        let computed = match &computed.error {
            Some(error) => Arc::new(Computed {
                lsn: computed.lsn,
                failure: true,
                data: reply_data(dispatch.error_reply_for(error, &self.raw.head.id)),
                read: computed.read.clone(),
                error: None,
            }),
            None => computed,
        };
        self.read = computed.read.clone();
        self.at_lsn = computed.lsn;
        let unchanged = computed.lsn <= self.sent_lsn
            || self.last.as_ref().is_some_and(|(failure, data)| {
                *failure == computed.failure && *data == computed.data
            });
        if unchanged {
            metrics.live_runs_unchanged_total.fetch_add(1, Relaxed);
            return None;
        }
        self.remember(&computed);
        metrics.live_events_total.fetch_add(1, Relaxed);
        let interval = dispatch.live_interval;
        if !interval.is_zero() {
            self.quiet_until = Some(tokio::time::Instant::now() + interval);
        }
        Some(event(&computed))
    }

    /// The answer on a state at least as new as `at_least`: taken from the last run of the
    /// query when the stream shares one and that run is new enough, else run here (after the
    /// route's guard: `Err` with the last event when it turns the subscriber away).
    fn answer(&mut self, at_least: u64) -> Result<Arc<Computed>, Bytes> {
        if let Some(query) = self.query.clone() {
            let mut last = query
                .last
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(computed) = last.as_ref().filter(|c| c.lsn >= at_least) {
                self.dispatch
                    .metrics
                    .live_runs_shared_total
                    .fetch_add(1, Relaxed);
                return Ok(computed.clone());
            }
            let computed = Arc::new(self.compute());
            *last = Some(computed.clone());
            return Ok(computed);
        }
        let (dispatch, deployment) = (self.dispatch.clone(), self.deployment.clone());
        let route = &deployment.routes[self.index];
        let raw = &self.raw;
        if let Err(error) =
            dispatch.guard(&deployment, self.index, &raw.params, &raw.query, &raw.head)
        {
            // The guard turns the subscriber away now (a key revoked): it is told, and the
            // stream ends.
            let guard = route.guard.as_deref().unwrap_or(&route.handler);
            let data = reply_data(dispatch.handler_error_reply(&error, guard, &raw.head.id));
            return Err(self.ends_with(data));
        }
        Ok(Arc::new(self.compute()))
    }

    /// Runs the handler on the latest published snapshot.
    fn compute(&self) -> Computed {
        let (dispatch, deployment) = (&self.dispatch, &self.deployment);
        let route = &deployment.routes[self.index];
        let live = dispatch.read_live(deployment, self.index, &self.request);
        let (failure, data, error) = match live.answer {
            Ok(answer) => (
                !(200..300).contains(&answer.status),
                answer_data(answer),
                None,
            ),
            Err(error) => (
                true,
                reply_data(dispatch.handler_error_reply(&error, &route.handler, &self.raw.head.id)),
                Some(error),
            ),
        };
        Computed {
            lsn: live.lsn,
            failure,
            data,
            read: live.read,
            error,
        }
    }

    /// Something was sent: silence is counted from now.
    fn sent(&mut self) {
        self.heartbeat_at = tokio::time::Instant::now() + self.dispatch.live_heartbeat;
    }

    fn remember(&mut self, computed: &Computed) {
        self.sent_lsn = computed.lsn;
        self.last = Some((computed.failure, computed.data.clone()));
    }

    /// Moves the stream to `current`'s read route of the same method and pattern, its request
    /// checked by that version; `Err` with why the stream ends when there is none or the
    /// request no longer passes.
    fn follow(&mut self, current: Arc<Deployment>) -> Result<(), (u16, String)> {
        let found = current.routes.iter().position(|route| {
            route.method == self.method
                && route.path == self.pattern
                && route.kind == HandlerKind::Read
        });
        let Some(index) = found else {
            let message = format!(
                "the app was reloaded, and the new version has no read route {} {}",
                self.method, self.pattern
            );
            return Err((404, message));
        };
        let raw = &self.raw;
        let request = current.app.request(
            index,
            raw.params.clone(),
            raw.query.clone(),
            raw.head.clone(),
            &raw.body,
        );
        match request {
            Ok(request) => {
                self.request = request;
                self.index = index;
                self.query = None;
                self.query = self.dispatch.shared_query(&current, index, &self.raw);
                self.deployment = current;
                Ok(())
            }
            Err(error) => Err((
                400,
                format!("the app was reloaded, and the new version refuses this request: {error}"),
            )),
        }
    }

    /// The failure event that ends the stream, saying why.
    fn last_event(&mut self, (status, message): (u16, String)) -> Bytes {
        let body = serde_json::json!({ "error": message, "status": status });
        self.ends_with(Bytes::from(body.to_string()))
    }

    /// A failure event with `data`, after which the stream ends.
    fn ends_with(&mut self, data: Bytes) -> Bytes {
        self.ended = true;
        self.dispatch
            .metrics
            .live_events_total
            .fetch_add(1, Relaxed);
        // Never below an id the client has (its Last-Event-ID, the last event sent).
        event(&Computed {
            lsn: self.at_lsn.max(self.sent_lsn),
            failure: true,
            data,
            read: TableSet::default(),
            error: None,
        })
    }
}

/// An answer's JSON text, as an event's data (`null` for a status that has no body).
fn answer_data(answer: Answer) -> Bytes {
    let bytes = answer.body.to_bytes();
    if bytes.is_empty() {
        return Bytes::from_static(b"null");
    }
    Bytes::from(bytes)
}

/// The JSON text of an error reply, as an event's data.
fn reply_data(reply: Reply) -> Bytes {
    match reply.into_body() {
        AnswerBody::Whole(Some(bytes)) => bytes,
        AnswerBody::Chunks { chunks, .. } => Bytes::from(
            chunks
                .iter()
                .flat_map(|c| c.iter().copied())
                .collect::<Vec<u8>>(),
        ),
        _ => Bytes::from_static(b"null"),
    }
}

/// A whole event for `computed`.
fn event(computed: &Computed) -> Bytes {
    let mut out = Vec::with_capacity(computed.data.len() + 32);
    write_event(&mut out, computed);
    out.push(b'\n');
    Bytes::from(out)
}

/// Appends an event for `computed` (its id, its name if a failure, its data) without the
/// blank line that ends it.
fn write_event(out: &mut Vec<u8>, computed: &Computed) {
    out.extend_from_slice(format!("id: {}\n", computed.lsn).as_bytes());
    if computed.failure {
        out.extend_from_slice(b"event: failure\n");
    }
    // JSON text has no line breaks outside strings, where they are escaped; a line per
    // `data:` all the same, as the format asks.
    for line in computed.data.split(|&b| b == b'\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line);
        out.push(b'\n');
    }
}

/// Resolves once the stop flag is set; never if its sender is gone without setting it.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|stopped| *stopped).await.is_err() {
        std::future::pending::<()>().await;
    }
}
