//! The listener: accepts connections under a cap and serves each with hyper's HTTP/1.1.
//!
//! Connections take a permit from a `Semaphore` before `accept`, so past the cap new clients wait
//! in the kernel's listen backlog instead of costing a task and a file descriptor each. When
//! `accept` fails for lack of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM), the loop
//! backs off with a growing sleep instead of spinning on the error or dying; it resumes as soon
//! as an accept succeeds.

use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::dispatch::Dispatch;

/// hyper's read buffer per connection. Its default (about 400 KiB) would let a thousand slow
/// clients pin 400 MB.
const READ_BUFFER_BYTES_MAX: usize = 64 << 10;
/// The largest request head (request line and header fields): hyper answers 431 past it.
const HEAD_BYTES_MAX: usize = 32 << 10;
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_millis(500);

/// What the accept loop and each connection need.
#[derive(Clone)]
pub struct Listener {
    pub dispatch: Arc<Dispatch>,
    /// One permit per open connection: the connection cap. A semaphore rather than a counter so
    /// that the accept loop can wait for a free slot, and shutdown can wait for all slots.
    pub permits: Arc<Semaphore>,
    /// Also the idle keep-alive timeout: hyper starts it when it waits for the next request head.
    pub header_timeout: Duration,
    /// Flips to true once: stop accepting, finish the requests in flight, close.
    pub stop: watch::Receiver<bool>,
}

impl Listener {
    /// Accepts until `stop` flips; returns without waiting for open connections.
    pub async fn accept_loop(self, listener: TcpListener) {
        let mut stop = self.stop.clone();
        let mut backoff = ACCEPT_BACKOFF_MIN;
        loop {
            let permit = tokio::select! {
                permit = self.permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
                _ = stopped(&mut stop) => return,
            };
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = stopped(&mut stop) => return,
            };
            match accepted {
                Ok((stream, _)) => {
                    backoff = ACCEPT_BACKOFF_MIN;
                    self.spawn_connection(stream, permit);
                }
                Err(error) => {
                    drop(permit);
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

    fn spawn_connection(&self, stream: TcpStream, permit: OwnedSemaphorePermit) {
        let listener = self.clone();
        tokio::spawn(async move {
            let metrics = &listener.dispatch.metrics;
            metrics.connections_open.fetch_add(1, Relaxed);
            metrics.connections_total.fetch_add(1, Relaxed);
            listener.serve_connection(stream).await;
            metrics.connections_open.fetch_sub(1, Relaxed);
            drop(permit);
        });
    }

    async fn serve_connection(&self, stream: TcpStream) {
        // Small JSON answers: waiting to coalesce them (Nagle) would only add latency.
        let _ = stream.set_nodelay(true);
        let dispatch = self.dispatch.clone();
        let service = service_fn(move |request| dispatch.clone().handle(request));
        let mut builder = http1::Builder::new();
        // Without a timer hyper silently ignores the header read timeout.
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_timeout)
            .max_buf_size(READ_BUFFER_BYTES_MAX)
            .max_header_size(HEAD_BYTES_MAX)
            .keep_alive(true);
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        tokio::pin!(connection);
        let mut stop = self.stop.clone();
        tokio::select! {
            _ = connection.as_mut() => {}
            _ = stopped(&mut stop) => {
                // Answers the request in flight, if any, then closes instead of keeping alive.
                connection.as_mut().graceful_shutdown();
                let _ = connection.await;
            }
        }
    }
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
