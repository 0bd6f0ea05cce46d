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
    progress: Progress,
}

/// How often a write that waits for room looks whether the client is taking bytes.
const WATCH_INTERVAL: Duration = Duration::from_millis(50);

/// What the client has taken of what the socket accepted. The socket's buffer does not tell a
/// waiting writer of every byte the client takes: the kernel wakes it only once a third of the
/// buffer is free, which for a client reading 1 MB/s through a 4 MB buffer is over a second.
/// So the writer also asks the kernel how much it still holds (`SIOCOUTQ`).
struct Progress {
    /// Bytes the socket accepted from hyper.
    written: u64,
    /// `written` less what the kernel still held, when last looked at.
    delivered: u64,
    /// When the client last took bytes, as far as this connection has seen.
    at: tokio::time::Instant,
    /// `watch` is set for the wait under way.
    armed: bool,
}

/// What has been read of the request after the last answer: enough to tell a request line over
/// the limit from other large heads, and a stalled head from an idle connection.
#[derive(Clone, Copy, Debug, Default)]
struct HeadWatch {
    /// Bytes of the request line so far (after any empty lines before it).
    line_bytes: usize,
    line_done: bool,
    /// Header field lines whole after the request line, until the empty line that ends the
    /// head: to tell too many fields from too many bytes.
    fields: usize,
    /// Bytes of the field line being read.
    field_bytes: usize,
    head_done: bool,
}

impl HeadWatch {
    fn saw(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if self.head_done {
                return;
            }
            if !self.line_done {
                match byte {
                    // Empty lines before a request line are allowed (RFC 9112, section 2.2).
                    b'\r' | b'\n' if self.line_bytes == 0 => {}
                    b'\n' => self.line_done = true,
                    _ => self.line_bytes += 1,
                }
                continue;
            }
            match byte {
                b'\n' if self.field_bytes == 0 => self.head_done = true,
                b'\n' => {
                    self.fields += 1;
                    self.field_bytes = 0;
                }
                b'\r' if self.field_bytes == 0 => {}
                _ => self.field_bytes += 1,
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
            progress: Progress {
                written: 0,
                delivered: 0,
                at: tokio::time::Instant::now(),
                armed: false,
            },
        }
    }

    /// The socket's buffer is full: pending until it has room, or an error once the client has
    /// taken nothing for `send_timeout` (hyper then drops the connection).
    fn poll_send_room(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if self.socket.stream.poll_write_ready(cx)?.is_ready() {
                return Poll::Ready(Ok(()));
            }
            self.socket.slot.blocked();
            let next = tokio::time::Instant::now() + WATCH_INTERVAL;
            let watch = self
                .watch
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(next)));
            if !self.progress.armed {
                self.progress.armed = true;
                watch.as_mut().reset(next);
            }
            ready!(watch.as_mut().poll(cx));
            let delivered = unsent_in_kernel(&self.socket.stream)
                .map(|unsent| self.progress.written.saturating_sub(unsent));
            let now = tokio::time::Instant::now();
            if let Some(delivered) = delivered.filter(|d| *d > self.progress.delivered) {
                self.progress.delivered = delivered;
                self.progress.at = now;
                self.socket.slot.took_bytes();
            } else if now.duration_since(self.progress.at) >= self.send_timeout {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the client took no byte of its answer for {} ms (--send-timeout-ms)",
                        self.send_timeout.as_millis()
                    ),
                )));
            }
            watch.as_mut().reset(now + WATCH_INTERVAL);
        }
    }

    /// The socket accepted `n` bytes: the client took some since the wait began.
    fn took(&mut self, n: usize) {
        self.progress.written += n as u64;
        self.progress.at = tokio::time::Instant::now();
        self.progress.armed = false;
        self.socket.slot.took_bytes();
    }

    fn poll_replacement(
        &mut self,
        cx: &mut Context<'_>,
        original: usize,
    ) -> Poll<io::Result<usize>> {
        while let Some((bytes, written)) = &mut self.replacing {
            if *written == bytes.len() {
                self.replacing = None;
                return Poll::Ready(Ok(original));
            }
            ready!(self.socket.stream.poll_write_ready(cx))?;
            match self.socket.stream.try_write(&bytes[*written..]) {
                Ok(n) => *written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
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
            "431" if self.head.fields > HEADER_FIELDS_MAX => (
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

/// A whole answer that closes the connection: `{"error": message}`.
fn json_answer(status: u16, message: &str) -> Vec<u8> {
    let reason = hyper::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Error");
    let body = json!({ "error": message }).to_string();
    let mut answer = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(body.as_bytes());
    answer
}

/// Bytes the kernel holds in `stream`'s send queue, sent or not, that the peer has not
/// acknowledged; `None` when it cannot tell (a waiting writer then sees only its own writes).
fn unsent_in_kernel(stream: &TcpStream) -> Option<u64> {
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
                    this.took(n);
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

    #[test]
    fn counts_the_header_fields_up_to_the_end_of_the_head() {
        let mut watch = HeadWatch::default();
        watch.saw(b"GET / HTTP/1.1\r\nHost: x\r\nA: 1\r");
        assert_eq!((watch.fields, watch.head_done), (1, false));
        // A line split across reads, bare newlines, and a body after the head.
        watch.saw(b"\nB: 2\nC:");
        watch.saw(b" 3\r\n\r\nD: not a field\n");
        assert_eq!((watch.fields, watch.head_done), (4, true));
    }
}
