//! The socket under hyper: what hyper reads and writes, so that the errors hyper answers by
//! itself (a request head it cannot parse, or one too large) answer in JSON like every other
//! error, and a client that stalls halfway through a request head is told why it is cut off.
//!
//! hyper answers a head it cannot parse with an empty 400, 414 or 431 before the service ever
//! sees the request, and offers no hook to change that answer. Those answers are the only
//! responses written through here without a `content-type` (every answer of the service carries
//! one), so `Wire` recognizes them by their head and writes a JSON answer in their place. hyper
//! closes the connection after them, and the replacement says `connection: close`.
//!
//! A request line longer than the whole head limit reaches hyper as a head too large (431);
//! `Wire` remembers how much of the first line of the current request it has read, to answer
//! 414 for that case instead.
//!
//! `Wire` sees bytes, not hyper's parse position: it takes what is read after an answer begins
//! as the next request. A client that pipelines (sends its next request before the answer to
//! the previous one) can defeat that: a large pipelined head may be answered 414 instead of
//! 431, and a stalled pipelined head is closed without the 408. Both still refuse the request
//! and close the connection.
//!
//! `Wire` also watches the client take its answers: it tells the connection's `Slot` how many
//! bytes the client took and when the socket's buffer was full (the answer budget's view of who
//! stopped reading), and closes a connection whose client has taken no byte for
//! `--send-timeout-ms`: without that deadline, a client that never reads held its answer, and
//! its connection slot, for good.

use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use hyper::rt::{Read, ReadBufCursor, Write};
use serde_json::json;
use tokio::net::TcpStream;
use tokio::time::Sleep;

use crate::connections::Slot;

/// The longest request target (path and query) accepted: a longer one is 414. Paths and
/// queries of an app's routes are short; 8 KiB is nginx's default for a request line.
pub const REQUEST_TARGET_BYTES_MAX: usize = 8 << 10;
/// The largest request head (request line and header fields): 431 past it (414 when the
/// request line alone is past `REQUEST_TARGET_BYTES_MAX`).
pub const HEAD_BYTES_MAX: usize = 32 << 10;
/// The most header fields a request may have: hyper's default, kept because a larger one
/// moves every request's headers from the stack to the heap. 431 past it.
pub const HEADER_FIELDS_MAX: usize = 100;

/// A connection's socket, shared by the `Wire` that hyper owns and the connection's task, which
/// answers 408 after hyper gave up on a stalled head (`Socket::answer_timeout`).
pub struct Socket {
    pub stream: TcpStream,
    /// Bytes of a request have been read since the last answer began.
    partial_head: AtomicBool,
    /// The connection as the budgets see it: told what the client takes.
    slot: Arc<Slot>,
}

/// One connection's socket as hyper sees it.
pub struct Wire {
    socket: Arc<Socket>,
    head: HeadWatch,
    /// A JSON answer being written in place of hyper's own, and how much of it is out.
    replacing: Option<(Vec<u8>, usize)>,
    /// The longest a write waits for the client to take a byte.
    send_timeout: Duration,
    /// While a write waits for room in the socket's buffer: fires every `WATCH_INTERVAL` to
    /// look whether the client took bytes (`Progress`).
    watch: Option<Pin<Box<Sleep>>>,
    wait: Wait,
}

/// How often a write that waits for room looks whether the client is taking bytes.
pub const WATCH_INTERVAL: Duration = Duration::from_millis(50);

/// A write waiting for room in the socket's buffer. The buffer does not tell a waiting writer
/// of every byte the client takes: the kernel wakes it only once a third of the buffer is free,
/// which for a client reading 1 MB/s through a 4 MB buffer is over a second. So the writer also
/// asks the kernel how much it still holds (`SIOCOUTQ`): while it waits, a shorter queue means
/// the client took bytes.
#[derive(Default)]
struct Wait {
    /// A wait is under way (and `watch` set for it).
    armed: bool,
    /// What the kernel held when last looked at.
    unsent: Option<u64>,
}

/// What has been read of the request after the last answer: enough to tell a request line over
/// the limit from other large heads, and a stalled head from an idle connection.
#[derive(Clone, Copy, Debug, Default)]
struct HeadWatch {
    /// Bytes of the request line so far (after any empty lines before it).
    line_bytes: usize,
    line_done: bool,
    /// Bytes read since the answer before: when hyper refuses a head of fewer bytes than
    /// `HEAD_BYTES_MAX` as too large, it had too many fields. (Counting the fields instead
    /// would scan every byte of every head.)
    bytes: usize,
}

impl HeadWatch {
    fn saw(&mut self, bytes: &[u8]) {
        self.bytes = self.bytes.saturating_add(bytes.len());
        for &byte in bytes {
            if self.line_done {
                return;
            }
            match byte {
                // Empty lines before a request line are allowed (RFC 9112, section 2.2).
                b'\r' | b'\n' if self.line_bytes == 0 => {}
                b'\n' => self.line_done = true,
                _ => self.line_bytes += 1,
            }
        }
    }

    fn request_line_too_long(&self) -> bool {
        // "GET " and " HTTP/1.1\r" around the target.
        !self.line_done || self.line_bytes > REQUEST_TARGET_BYTES_MAX + 24
    }
}

impl Socket {
    pub fn new(stream: TcpStream, slot: Arc<Slot>) -> Arc<Socket> {
        Arc::new(Socket {
            stream,
            partial_head: AtomicBool::new(false),
            slot,
        })
    }

    /// Whether hyper has an answer on its way out: the connection must not be dropped.
    pub fn has_unflushed(&self) -> bool {
        self.slot.has_unflushed()
    }

    /// After hyper refused a connection that began with HTTP/2's preface (a client with "prior
    /// knowledge" of HTTP/2): a JSON 505 in HTTP/1.1, which such a client cannot read but a
    /// person with curl can, instead of a silent close. Best effort and without waiting.
    pub fn answer_http2(&self) {
        let message = "this server speaks HTTP/1.1 only, and the connection began with \
                       HTTP/2's preface: connect with HTTP/1.1 (without --http2-prior-knowledge), \
                       or through a proxy that speaks HTTP/2 to clients";
        let _ = self.stream.try_write(&json_answer(505, message));
    }

    /// After hyper dropped a connection whose head did not arrive in time: a JSON 408 if part
    /// of a head had arrived (an idle keep-alive connection is closed without a word). Best
    /// effort and without waiting: the answer is small and the client was not reading.
    pub fn answer_timeout(&self, timeout_ms: u128) {
        if !self.partial_head.load(Ordering::Relaxed) {
            return;
        }
        let message = format!("the request head did not arrive within {timeout_ms} ms");
        let _ = self.stream.try_write(&json_answer(408, &message));
    }
}

impl Wire {
    pub fn new(socket: Arc<Socket>, send_timeout: Duration) -> Wire {
        Wire {
            socket,
            head: HeadWatch::default(),
            replacing: None,
            send_timeout,
            watch: None,
            wait: Wait::default(),
        }
    }

    /// The socket's buffer is full: pending until it has room, or an error once the client has
    /// taken nothing for `send_timeout` (hyper then drops the connection).
    fn poll_send_room(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if self.socket.stream.poll_write_ready(cx)?.is_ready() {
                return Poll::Ready(Ok(()));
            }
            let slot = &self.socket.slot;
            let next = tokio::time::Instant::now() + WATCH_INTERVAL;
            let watch = self
                .watch
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(next)));
            if !self.wait.armed {
                self.wait.armed = true;
                self.wait.unsent = unsent_in_kernel(&self.socket.stream);
                slot.waits(slot.now_ms());
                watch.as_mut().reset(next);
            }
            ready!(watch.as_mut().poll(cx));
            let unsent = unsent_in_kernel(&self.socket.stream);
            let now_ms = slot.now_ms();
            if took_bytes(self.wait.unsent, unsent) {
                self.wait.unsent = unsent;
                slot.took_bytes(now_ms, true);
            } else if slot.waited_ms(now_ms) >= self.send_timeout.as_millis() as u64 {
                return Poll::Ready(Err(send_timed_out(self.send_timeout)));
            }
            watch
                .as_mut()
                .reset(tokio::time::Instant::now() + WATCH_INTERVAL);
        }
    }

    /// The socket accepted bytes: a wait under way is over (a write that did not wait reads no
    /// clock).
    fn took(&mut self) {
        if self.wait.armed {
            self.wait.armed = false;
            let slot = &self.socket.slot;
            slot.took_bytes(slot.now_ms(), false);
        }
    }

    fn poll_replacement(
        &mut self,
        cx: &mut Context<'_>,
        original: usize,
    ) -> Poll<io::Result<usize>> {
        loop {
            match &self.replacing {
                Some((bytes, written)) if *written < bytes.len() => {}
                _ => break,
            }
            // A refusal is an answer too: its client gets the same deadline.
            ready!(self.poll_send_room(cx))?;
            let Some((bytes, written)) = &mut self.replacing else {
                break;
            };
            match self.socket.stream.try_write(&bytes[*written..]) {
                Ok(n) => *written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
            self.took();
        }
        self.replacing = None;
        Poll::Ready(Ok(original))
    }

    /// hyper's own answer to a head it refused, as JSON; `None` for any other write.
    fn replacement(&self, head: &[u8]) -> Option<Vec<u8>> {
        if !head.starts_with(b"HTTP/1.") || head.len() < 12 {
            return None;
        }
        let status = std::str::from_utf8(&head[9..12]).ok()?;
        let own = !contains(head, b"content-type:") && contains(head, b"content-length: 0\r\n");
        if !own {
            return None;
        }
        let (status, message) = match status {
            "400" => (
                400,
                "the request is not valid HTTP/1.1: its request line, a header field or the \
                 version could not be parsed"
                    .to_string(),
            ),
            "414" | "431" if status == "414" || self.head.request_line_too_long() => (
                414,
                format!(
                    "the request target is longer than the limit of {REQUEST_TARGET_BYTES_MAX} \
                     bytes"
                ),
            ),
            "431" if self.head.bytes <= HEAD_BYTES_MAX => (
                431,
                format!("the request has more header fields than the limit of {HEADER_FIELDS_MAX}"),
            ),
            "431" => (
                431,
                format!("the request head is larger than the limit of {HEAD_BYTES_MAX} bytes"),
            ),
            _ => return None,
        };
        Some(json_answer(status, &message))
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window.eq_ignore_ascii_case(needle))
}

/// A whole answer that closes the connection: `{"error": message, "status": status}`.
fn json_answer(status: u16, message: &str) -> Vec<u8> {
    let reason = hyper::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Error");
    let body = json!({ "error": message, "status": status }).to_string();
    let mut answer = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(body.as_bytes());
    answer
}

/// Less than this off the kernel's queue is not the client reading: a receive buffer that holds
/// a few more bytes after the kernel compacts it opens its window by a few bytes now and then,
/// with nobody reading. A client that reads opens it by at least a segment (64 KiB on
/// loopback, about 1.4 KiB on Ethernet), and several of those add up.
pub const PROGRESS_BYTES_MIN: u64 = 4 << 10;

/// Whether the kernel's queue went from `before` to `now` because the client took bytes.
pub fn took_bytes(before: Option<u64>, now: Option<u64>) -> bool {
    matches!((before, now), (Some(before), Some(now)) if now + PROGRESS_BYTES_MIN <= before)
}

/// The error that ends a connection whose client took nothing for the send timeout.
pub fn send_timed_out(timeout: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!(
            "the client took no byte of its answer for {} ms (--send-timeout-ms)",
            timeout.as_millis()
        ),
    )
}

/// Bytes the kernel holds in `stream`'s send queue, sent or not, that the peer has not
/// acknowledged; `None` when it cannot tell (a waiting writer then sees only its own writes).
pub fn unsent_in_kernel(stream: &TcpStream) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let mut queued: libc::c_int = 0;
    // SAFETY: ioctl(SIOCOUTQ) on a socket this value owns writes one c_int.
    let result = unsafe { libc::ioctl(stream.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
    (result == 0).then_some(queued.max(0) as u64)
}

impl Read for Wire {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            ready!(this.socket.stream.poll_read_ready(cx))?;
            // SAFETY: `try_read` only writes into the slice and returns how much it wrote;
            // exactly that much is then marked filled.
            let unfilled = unsafe { &mut *(buf.as_mut() as *mut [_] as *mut [u8]) };
            match this.socket.stream.try_read(unfilled) {
                Ok(n) => {
                    this.head.saw(&unfilled[..n]);
                    if n > 0 {
                        this.socket.partial_head.store(true, Ordering::Relaxed);
                    }
                    // SAFETY: `try_read` initialized the first `n` bytes.
                    unsafe { buf.advance(n) };
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl Write for Wire {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        // Until hyper flushes: it flushes as soon as it has handed over all it buffered.
        this.socket.slot.set_unflushed(true);
        if this.replacing.is_some() {
            return this.poll_replacement(cx, buf.len());
        }
        if buf.starts_with(b"HTTP/1.") {
            // An answer begins: what is read from now on is the next request.
            if let Some(answer) = this.replacement(buf) {
                this.replacing = Some((answer, 0));
                return this.poll_replacement(cx, buf.len());
            }
            this.head = HeadWatch::default();
            this.socket.partial_head.store(false, Ordering::Relaxed);
        }
        loop {
            ready!(this.poll_send_room(cx))?;
            match this.socket.stream.try_write(buf) {
                Ok(n) => {
                    this.took();
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Every byte hyper wrote went into the socket (poll_write writes through, unbuffered).
        self.socket.slot.set_unflushed(false);
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        use std::os::fd::AsRawFd;
        // SAFETY: shutdown(2) on the socket this value shares; it touches no memory.
        let result = unsafe { libc::shutdown(self.socket.stream.as_raw_fd(), libc::SHUT_WR) };
        if result == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::ENOTCONN) {
            return Poll::Ready(Ok(()));
        }
        Poll::Ready(Err(io::Error::last_os_error()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_a_long_request_line_from_a_large_head() {
        let mut watch = HeadWatch::default();
        watch.saw(b"\r\nGET /short HTTP/1.1\r\nHost: x\r\n");
        assert!(watch.line_done && !watch.request_line_too_long());
        let mut watch = HeadWatch::default();
        watch.saw(b"GET /");
        watch.saw(&vec![b'a'; REQUEST_TARGET_BYTES_MAX + 100]);
        assert!(watch.request_line_too_long(), "no end of line yet");
        watch.saw(b" HTTP/1.1\r\n");
        assert!(watch.request_line_too_long(), "ended, but too long");
    }

    /// hyper's own refusal, replaced by JSON, waits for room in the socket like any answer,
    /// and with the same deadline (found by review: it waited with no deadline, and a client
    /// that never read held the connection for good, and a stop for its whole timeout).
    #[tokio::test]
    async fn a_refusal_behind_a_full_socket_meets_the_send_timeout() {
        use crate::connections::{AnswerBudget, Connections};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        let client = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("socket");
        client.set_recv_buffer_size(4096).expect("SO_RCVBUF");
        client.connect(&address.into()).expect("connect");
        let (stream, peer) = listener.accept().await.expect("accept");
        let budget = AnswerBudget {
            held: Arc::default(),
            bytes: u64::MAX,
            stalled_after: Duration::from_millis(250),
        };
        let connections = Connections::new(1, 1, budget);
        let ticket = connections.admit(peer.ip()).expect("a slot");
        let socket = Socket::new(stream, ticket.slot.clone());
        let mut wire = Wire::new(socket, Duration::from_millis(300));
        fn write(
            wire: &mut Wire,
            bytes: Vec<u8>,
        ) -> impl std::future::Future<Output = io::Result<usize>> + '_ {
            let mut wire = Pin::new(wire);
            std::future::poll_fn(move |cx| wire.as_mut().poll_write(cx, &bytes))
        }
        // Fill the socket until a write waits.
        loop {
            let filling = write(&mut wire, vec![b'x'; 1 << 16]);
            match tokio::time::timeout(Duration::from_millis(200), filling).await {
                Ok(written) => assert!(written.expect("written") > 0),
                Err(_) => break,
            }
        }
        let refusal = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n".to_vec();
        let outcome = tokio::time::timeout(Duration::from_secs(60), write(&mut wire, refusal))
            .await
            .expect("the refusal gives up within the send timeout");
        let error = outcome.expect_err("a client that never reads is not waited for");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut, "{error}");
        drop(client);
    }

    #[test]
    fn counts_the_bytes_of_a_request_across_reads() {
        let mut watch = HeadWatch::default();
        watch.saw(b"GET / HTTP/1.1\r\nHost: x\r\nA: 1\r");
        watch.saw(b"\nB: 2\r\n\r\n");
        assert_eq!(watch.bytes, 39);
        assert!(watch.line_done);
    }
}
