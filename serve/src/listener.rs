//! The listener: accepts connections within the connection budget (`Connections`) and serves
//! each with hyper's HTTP/1.1.
//!
//! Each accepted connection takes a slot: one more from an address that already has its share
//! is refused at once with a 503; at the cap, the connection idle the longest (one that closes
//! at once: see `Connections::shed_one`) is asked to close and the new one waits for its slot
//! (if none is idle, it waits for any to close or become idle, and later clients wait in the
//! kernel's listen backlog). When `accept` fails for lack of descriptors or
//! memory (EMFILE, ENFILE, ENOBUFS, ENOMEM), the loop backs off with a growing sleep instead of
//! spinning on the error or dying; it resumes as soon as an accept succeeds.

use pure_runtime::ImmutableString;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use std::convert::Infallible;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Response};
use hyper_util::rt::TokioTimer;
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::answer::AnswerBody;
use crate::connections::{Connections, Refusal, Slot, Ticket};
use crate::dispatch::{Dispatch, Role};
use crate::wire::{took_bytes, unsent_in_kernel, Socket, Wire, HEAD_BYTES_MAX, WATCH_INTERVAL};

/// hyper's read buffer per connection. Its default (about 400 KiB) would let a thousand slow
/// clients pin 400 MB.
const READ_BUFFER_BYTES_MAX: usize = 64 << 10;
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_millis(500);
/// How often a connection asked to close while busy looks again whether it is done.
const CLOSE_GRACE: Duration = Duration::from_millis(20);
/// What the kernel may keep of a connection's last answer after it is closed: a closed socket's
/// last kilobytes (and its FIN) are the kernel's to deliver, as every server leaves them, and
/// waiting for them kept connections that had just been answered 413 open for a watch interval
/// each (a client that reconnects at once had 256 of them open, its share); megabytes are what
/// a client that does not read could pin there.
const DRAIN_BYTES_MIN: u64 = 64 << 10;
/// At the cap with no connection idle, or the one shed not closing yet, how often to look for
/// one again.
const SHED_RETRY: Duration = Duration::from_millis(50);

/// What the accept loop and each connection need.
#[derive(Clone)]
pub struct Listener {
    pub dispatch: Arc<Dispatch>,
    /// Which requests this address serves.
    pub role: Role,
    pub connections: Arc<Connections>,
    /// Also the idle keep-alive timeout: hyper starts it when it waits for the next request head.
    pub header_timeout: Duration,
    /// The longest a connection waits for its client to take a byte of an answer.
    pub send_timeout: Duration,
    /// Flips to true once: stop accepting, finish the requests in flight, close.
    pub stop: watch::Receiver<bool>,
}

impl Listener {
    /// Accepts until `stop` flips; returns without waiting for open connections.
    pub async fn accept_loop(self, listener: TcpListener) {
        let mut stop = self.stop.clone();
        let mut backoff = ACCEPT_BACKOFF_MIN;
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = stopped(&mut stop) => return,
            };
            match accepted {
                Ok((stream, peer)) => {
                    backoff = ACCEPT_BACKOFF_MIN;
                    let Some(ticket) = self.admit(&stream, peer, &mut stop).await else {
                        continue;
                    };
                    self.spawn_connection(stream, ticket);
                }
                Err(error) => {
                    self.dispatch
                        .metrics
                        .accept_errors_total
                        .fetch_add(1, Relaxed);
                    if is_resource_exhaustion(&error) {
                        if backoff == ACCEPT_BACKOFF_MIN {
                            eprintln!("pure-serve: accept failed ({error}); backing off");
                        }
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                    }
                }
            }
        }
    }

    /// A slot for a connection just accepted: at once, after shedding an idle connection, or
    /// after any connection closes. `None` when it was refused (one too many from its address)
    /// or the server is stopping.
    async fn admit(
        &self,
        stream: &TcpStream,
        peer: SocketAddr,
        stop: &mut watch::Receiver<bool>,
    ) -> Option<Ticket> {
        let mut shed: Option<Arc<Slot>> = None;
        loop {
            let freed = self.connections.freed();
            match self.connections.admit(peer.ip()) {
                Ok(ticket) => return Some(ticket),
                Err(Refusal::PeerFull) => {
                    self.refuse_peer(stream, peer);
                    return None;
                }
                Err(Refusal::Full) => {
                    // One shed per waiting client, as long as the one shed is closing: with
                    // nothing in it, or a client that stopped reading, it frees its slot at
                    // once. Look again every `SHED_RETRY`: with none idle, a busy one becomes
                    // idle without closing; and the one shed may be in the way again (a request
                    // arrived on it, or its client reads what the kernel holds of its answer).
                    if shed.as_ref().is_none_or(|slot| slot.is_sending()) {
                        if let Some(slot) = self.connections.shed_one() {
                            shed = Some(slot);
                            self.dispatch
                                .metrics
                                .connections_shed_total
                                .fetch_add(1, Relaxed);
                        }
                    }
                    tokio::select! {
                        _ = freed => {}
                        _ = tokio::time::sleep(SHED_RETRY) => {}
                        _ = stopped(stop) => return None,
                    }
                }
            }
        }
    }

    /// Tells a client with too many connections why this one closes: a 503 written without
    /// waiting (the socket's buffer is empty), then the close.
    fn refuse_peer(&self, stream: &TcpStream, peer: SocketAddr) {
        self.dispatch
            .metrics
            .connections_refused_total
            .fetch_add(1, Relaxed);
        let message = format!(
            "too many connections from {}: at most {} at once from one address; reuse one, \
             or retry later",
            peer.ip(),
            self.connections.per_peer_max()
        );
        let body = json!({ "error": message, "status": 503 }).to_string();
        let answer = format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.try_write(answer.as_bytes());
    }

    fn spawn_connection(&self, stream: TcpStream, ticket: Ticket) {
        let listener = self.clone();
        tokio::spawn(async move {
            let metrics = &listener.dispatch.metrics;
            metrics.connections_open.fetch_add(1, Relaxed);
            metrics.connections_total.fetch_add(1, Relaxed);
            listener.serve_connection(stream, &ticket).await;
            metrics.connections_open.fetch_sub(1, Relaxed);
            drop(ticket);
        });
    }

    async fn serve_connection(&self, stream: TcpStream, ticket: &Ticket) {
        // Small JSON answers: waiting to coalesce them (Nagle) would only add latency.
        let _ = stream.set_nodelay(true);
        let peer: ImmutableString = match stream.peer_addr() {
            Ok(address) => address.ip().to_string().into(),
            Err(_) => "".into(),
        };
        let socket = Socket::new(stream, ticket.slot.clone());
        let (dispatch, role) = (self.dispatch.clone(), self.role);
        let slot = ticket.slot.clone();
        let connections = self.connections.clone();
        let service = service_fn(move |request: hyper::Request<Incoming>| {
            let dispatch = dispatch.clone();
            let peer = peer.clone();
            let (slot, connections) = (slot.clone(), connections.clone());
            // Busy from the moment a whole head arrived (hyper calls this then) until the
            // answer is built: a connection is never dropped with a request in it.
            let busy = slot.busy();
            let sends_body = request.method() != Method::HEAD;
            async move {
                let reply = dispatch.clone().handle(request, peer, role).await;
                let Ok(reply) = reply;
                let (parts, mut body) = reply.into_parts();
                match &mut body {
                    // A stream is an answer being built for as long as it lasts.
                    AnswerBody::Events(stream) => stream.hold(busy),
                    _ => drop(busy),
                }
                let body = if sends_body {
                    let (body, cut) = connections.answer(&slot, body);
                    dispatch
                        .metrics
                        .stalled_cuts_total
                        .fetch_add(cut as u64, Relaxed);
                    body
                } else {
                    // HEAD: hyper sends the length the body's size gives, and not the body.
                    body
                };
                Ok::<_, Infallible>(Response::from_parts(parts, body))
            }
        });
        let mut builder = http1::Builder::new();
        // Without a timer hyper silently ignores the header read timeout.
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_timeout)
            .max_buf_size(READ_BUFFER_BYTES_MAX)
            .max_header_size(HEAD_BYTES_MAX)
            // A client may send its request and then close its side (shutdown(SHUT_WR)) while
            // it waits: it still gets the answer. Otherwise hyper closes on that EOF, and a
            // write committed whose client never heard of it (and so posts it again).
            .half_close(true)
            .keep_alive(true);
        let wire = Wire::new(socket.clone(), self.send_timeout);
        let connection = builder.serve_connection(wire, service);
        tokio::pin!(connection);
        let mut stop = self.stop.clone();
        let mut closing = false;
        // Asked to close (a stop, or shed at the cap), a connection with no request in it
        // (not busy, nothing on its way out) is dropped at once: nothing of it ran. Otherwise
        // hyper's graceful shutdown answers the request, then closes; the connection is
        // dropped as soon as that is done. (Graceful shutdown alone kept a connection whose
        // head had partly arrived open until the header timeout: one stalled head held up
        // every new client at the cap, and a stop.) An answer whose client stopped reading
        // (`--answer-stall-ms`) is not waited for: its request was answered, the client does not
        // take it.
        let slot = &ticket.slot;
        // Whether the connection may close now: `Clean` with nothing in it, `Abort` with an
        // answer its client stopped taking.
        let closable = || {
            if slot.is_busy() {
                None
            } else if !socket.has_unflushed() {
                Some(Close::Clean)
            } else if slot.is_stalled() {
                Some(Close::Abort)
            } else {
                None
            }
        };
        let close = loop {
            tokio::select! {
                result = connection.as_mut() => break Close::Ended(result),
                _ = stopped(&mut stop), if !closing => {
                    closing = true;
                    if let Some(close) = closable() {
                        break close;
                    }
                    connection.as_mut().graceful_shutdown();
                }
                _ = slot.close.notified() => {
                    // Cut to make room in the answer budget: at once, with what it holds.
                    if slot.was_cut() {
                        break Close::Abort;
                    }
                    if closing {
                        continue;
                    }
                    closing = true;
                    if let Some(close) = closable() {
                        break close;
                    }
                    connection.as_mut().graceful_shutdown();
                }
                _ = tokio::time::sleep(CLOSE_GRACE), if closing => {
                    if let Some(close) = closable() {
                        break close;
                    }
                }
            }
        };
        let metrics = &self.dispatch.metrics;
        // Cut by the budget (counted there): hyper may have ended the connection first, on the
        // error its body gave once the answer was dropped.
        let abort = slot.was_cut()
            || match close {
                Close::Clean | Close::Ended(Ok(())) => false,
                Close::Abort => {
                    metrics.stalled_cuts_total.fetch_add(1, Relaxed);
                    true
                }
                Close::Ended(Err(error)) if error.is_timeout() => {
                    socket.answer_timeout(self.header_timeout.as_millis());
                    false
                }
                Close::Ended(Err(error)) if error.is_parse_version_h2() => {
                    socket.answer_http2();
                    false
                }
                Close::Ended(Err(error)) => {
                    let timed_out = is_send_timeout(&error);
                    if timed_out {
                        metrics.send_timeouts_total.fetch_add(1, Relaxed);
                    }
                    timed_out
                }
            };
        // Asked to close (`closing`), the drain is too: the notice was taken here.
        let abort = abort || self.drain(&socket, slot, closing).await;
        if abort {
            // A reset, not a close: a close would leave the unread answer queued in the
            // kernel's send buffer (up to megabytes a connection) until a client that does not
            // read takes it, which may be never.
            let _ = socket.stream.set_zero_linger();
        }
    }

    /// Once hyper is done with a connection, what the kernel still holds of its last answers
    /// is waited for as any answer is: while the client takes it, and not past the send
    /// timeout, nor past the stall time at the cap or a stop (`closing`: already asked to
    /// close). True when the client stopped taking it: the connection is to be reset. (A plain
    /// close left a 2 MB answer that a client never read queued in the kernel, outside every
    /// budget and after its slot was freed, for as long as the client kept its window shut.)
    async fn drain(&self, socket: &Socket, slot: &Slot, closing: bool) -> bool {
        let Some(mut unsent) =
            unsent_in_kernel(&socket.stream).filter(|unsent| *unsent > DRAIN_BYTES_MIN)
        else {
            return false;
        };
        let metrics = &self.dispatch.metrics;
        let send_timeout_ms = self.send_timeout.as_millis() as u64;
        slot.set_unflushed(true);
        slot.waits(slot.now_ms());
        let mut stop = self.stop.clone();
        let mut closing = closing;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(WATCH_INTERVAL) => {}
                _ = stopped(&mut stop), if !closing => closing = true,
                _ = slot.close.notified() => {
                    if slot.was_cut() {
                        return true;
                    }
                    closing = true;
                }
            }
            let now_ms = slot.now_ms();
            match unsent_in_kernel(&socket.stream) {
                None => return false,
                Some(now) if now <= DRAIN_BYTES_MIN => return false,
                now if took_bytes(Some(unsent), now) => {
                    unsent = now.unwrap_or(0);
                    slot.took_bytes(now_ms, true);
                }
                Some(_) if slot.waited_ms(now_ms) >= send_timeout_ms => {
                    metrics.send_timeouts_total.fetch_add(1, Relaxed);
                    return true;
                }
                Some(_) => {}
            }
            if closing && slot.is_stalled() {
                metrics.stalled_cuts_total.fetch_add(1, Relaxed);
                return true;
            }
        }
    }
}

/// How a connection ends.
enum Close {
    /// hyper ended it: the client closed, an error, or a graceful shutdown completed.
    Ended(Result<(), hyper::Error>),
    /// Nothing in it: dropped as it is.
    Clean,
    /// Its client stopped reading: reset, dropping the answer.
    Abort,
}

/// Whether hyper gave up because `Wire` found the client took nothing for `--send-timeout-ms`.
fn is_send_timeout(error: &hyper::Error) -> bool {
    std::error::Error::source(error)
        .and_then(|source| source.downcast_ref::<io::Error>())
        .is_some_and(|io| io.kind() == io::ErrorKind::TimedOut)
}

fn is_resource_exhaustion(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// Resolves once the stop flag is set (at once if it already is).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    // The sender lives until the process exits; an error would also mean "stop".
    let _ = stop.wait_for(|stopped| *stopped).await;
}
