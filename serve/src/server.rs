//! The server's life: bind, announce readiness, serve until a signal or a poisoned store, then
//! drain and stop the runtime.
//!
//! Shutdown order matters for durability: stop accepting, let each connection finish the request
//! it is in (a write's answer waits for its group's sync), then `Runtime::shutdown`, which syncs
//! and answers whatever is still queued before the owner stops.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use pure_runtime::Runtime;
use tokio::net::{TcpListener, TcpSocket};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{watch, Semaphore};

use crate::cli::Options;
use crate::dispatch::{Dispatch, RequestLimits};
use crate::exit;
use crate::listener::Listener;

const LISTEN_BACKLOG: u32 = 1024;
const POISON_POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Names the handlers that run in Rhai's evaluator rather than compiled, and why: they work the
/// same, slower, and an author who wants the speed can see what to change.
fn report_interpreted(app: &pure_runtime::App) {
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

/// Why the server stops.
enum Stop {
    Signal(&'static str),
    Poisoned(String),
}

/// Serves until stopped; returns the process exit status.
pub async fn run(options: &Options, runtime: Runtime) -> Result<u8, exit::Failure> {
    let listener = bind(options.listen)
        .with_context(|| format!("binding {}", options.listen))
        .map_err(|error| exit::Failure::new(exit::LISTEN, error))?;
    let mut terminate = signal(SignalKind::terminate()).map_err(exit::Failure::internal)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(exit::Failure::internal)?;
    let limits = RequestLimits {
        max_body_bytes: options.max_body,
        body_timeout: options.body_timeout(),
        offload_reads: options.offload_reads,
    };
    let (stop_sender, stop) = watch::channel(false);
    let max_connections = options.max_connections.clamp(1, u32::MAX as usize);
    let server = Listener {
        dispatch: Arc::new(Dispatch::new(runtime.clone(), limits)),
        permits: Arc::new(Semaphore::new(max_connections)),
        header_timeout: options.header_timeout(),
        stop,
    };
    let address = listener.local_addr().map_err(exit::Failure::internal)?;
    let accepting = tokio::spawn(server.clone().accept_loop(listener));
    report_interpreted(runtime.app());
    println!(
        "pure-serve: {} listening on http://{address}",
        runtime.app().name()
    );

    let stop = tokio::select! {
        _ = terminate.recv() => Stop::Signal("SIGTERM"),
        _ = interrupt.recv() => Stop::Signal("SIGINT"),
        reason = poisoned(&runtime) => Stop::Poisoned(reason),
    };
    let code = match &stop {
        Stop::Signal(name) => {
            eprintln!("pure-serve: {name}: finishing requests in flight, then stopping");
            exit::OK
        }
        Stop::Poisoned(reason) => {
            eprintln!(
                "pure-serve: the store is poisoned ({reason}); writes are refused with 503; \
                 exiting with status {} in {} ms so that recovery reads what is on disk",
                exit::POISONED,
                options.poison_drain_ms
            );
            tokio::time::sleep(Duration::from_millis(options.poison_drain_ms)).await;
            exit::POISONED
        }
    };
    let _ = stop_sender.send(true);
    let _ = accepting.await;
    let drained = tokio::time::timeout(
        Duration::from_millis(options.shutdown_timeout_ms),
        server.permits.acquire_many(max_connections as u32),
    )
    .await;
    if drained.is_err() {
        eprintln!("pure-serve: some connections were still open after the shutdown timeout");
    }
    tokio::task::spawn_blocking(move || runtime.shutdown())
        .await
        .map_err(exit::Failure::internal)?;
    Ok(code)
}

fn bind(address: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if address.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // A restarted server must not wait for the old socket's TIME_WAIT to clear.
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Resolves with the reason once the store is poisoned. Polling is enough: the runtime already
/// refuses writes itself; this only decides when the process exits.
async fn poisoned(runtime: &Runtime) -> String {
    let mut interval = tokio::time::interval(POISON_POLL_INTERVAL);
    loop {
        interval.tick().await;
        if let Some(reason) = runtime.poisoned() {
            return reason;
        }
    }
}
