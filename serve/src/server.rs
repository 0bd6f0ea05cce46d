//! The server's life: bind, announce readiness, serve until a signal or a poisoned store, then
//! drain and stop the runtime.
//!
//! Shutdown order matters for durability: stop accepting, let each connection finish the request
//! it is in (a write's answer waits for its group's sync), then `Runtime::shutdown`, which syncs
//! and answers whatever is still queued before the owner stops.

use crate::log::Log;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use pure_runtime::Runtime;
use tokio::net::{TcpListener, TcpSocket};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{watch, Semaphore};

use crate::cli::{ErrorDetails, Options};
use crate::connections::{AnswerBudget, Connections};
use crate::dispatch::{report_interpreted, Dispatch, RequestLimits, Role};
use crate::exit;
use crate::listener::Listener;
use crate::origin::{any_host_note, AllowedHosts};

const LISTEN_BACKLOG: u32 = 1024;
const POISON_POLL_INTERVAL: Duration = Duration::from_millis(20);
/// Connections the admin address holds at once, from any one peer as from all.
const ADMIN_CONNECTIONS_MAX: usize = 16;

/// Why the server stops.
enum Stop {
    Signal(&'static str),
    Poisoned(String),
}

/// Serves until stopped; returns the process exit status.
pub async fn run(options: &Options, runtime: Runtime, log: Arc<Log>) -> Result<u8, exit::Failure> {
    let listener = bind(options.listen)
        .with_context(|| format!("binding {}", options.listen))
        .map_err(|error| exit::Failure::new(exit::LISTEN, error))?;
    let mut terminate = signal(SignalKind::terminate()).map_err(exit::Failure::internal)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(exit::Failure::internal)?;
    let mut hangup = signal(SignalKind::hangup()).map_err(exit::Failure::internal)?;
    // At most a u32's worth of permits is taken at once (Semaphore::try_acquire_many); the
    // budget itself may be larger.
    let body_budget_bytes = options.body_budget.clamp(1, Semaphore::MAX_PERMITS);
    let limits = RequestLimits {
        max_body_bytes: options.max_body,
        body_timeout: options.body_timeout(),
        offload_reads: options.offload_reads,
        body_budget: Arc::new(Semaphore::new(body_budget_bytes)),
        body_budget_bytes,
        // Leave a worker thread's worth of CPU to the small requests.
        parsers: Arc::new(Semaphore::new(options.threads().saturating_sub(1).max(1))),
    };
    let (stop_sender, stop) = watch::channel(false);
    let answers = AnswerBudget {
        held: Arc::default(),
        bytes: options.answer_budget,
        stalled_after: Duration::from_millis(options.answer_stall_ms),
    };
    let connections = Connections::new(
        options.max_connections as usize,
        options.max_connections_per_peer as usize,
        answers.clone(),
    );
    let loader = {
        let options = options.clone();
        Box::new(move || crate::load_app(&options))
    };
    let mut dispatch = Dispatch::new(
        runtime.clone(),
        limits,
        log,
        loader,
        options.error_details(),
        (
            AllowedHosts::for_address(options.allowed_hosts.as_deref(), options.listen),
            options.admin_listen.map_or(AllowedHosts::Any, |admin| {
                AllowedHosts::for_address(options.allowed_hosts.as_deref(), admin)
            }),
        ),
    );
    dispatch.metrics.answer_bytes_held = answers.held.clone();
    dispatch.public = Some(crate::public::Public::new(options.app_dir()));
    dispatch.max_subscriptions = options.max_subscriptions as usize;
    dispatch.live_interval = Duration::from_millis(options.live_interval_ms);
    dispatch.live_heartbeat = Duration::from_millis(options.live_heartbeat_ms);
    dispatch.stopping = stop.clone();
    let dispatch = Arc::new(dispatch);
    let server = Listener {
        dispatch: dispatch.clone(),
        role: match options.admin_listen {
            Some(_) => Role::App,
            None => Role::AppAndBuiltins,
        },
        connections: connections.clone(),
        header_timeout: options.header_timeout(),
        send_timeout: Duration::from_millis(options.send_timeout_ms),
        stop,
    };
    let address = listener.local_addr().map_err(exit::Failure::internal)?;
    let admin = match options.admin_listen {
        Some(admin_address) => {
            let admin_listener = bind(admin_address)
                .with_context(|| format!("binding the admin address {admin_address}"))
                .map_err(|error| exit::Failure::new(exit::LISTEN, error))?;
            let bound = admin_listener
                .local_addr()
                .map_err(exit::Failure::internal)?;
            let admin = Listener {
                role: Role::Admin,
                // Its own connections: a flood on the app's address leaves room for a health
                // check.
                connections: Connections::new(
                    ADMIN_CONNECTIONS_MAX,
                    ADMIN_CONNECTIONS_MAX,
                    answers,
                ),
                ..server.clone()
            };
            Some((bound, tokio::spawn(admin.accept_loop(admin_listener))))
        }
        None => None,
    };
    let accepting = tokio::spawn(server.clone().accept_loop(listener));
    report_interpreted(&runtime.app());
    eprintln!("pure-serve: recovered {}", runtime.recovery());
    println!(
        "pure-serve: {} listening on http://{address}",
        runtime.app().name()
    );
    if let Some((bound, _)) = &admin {
        println!(
            "pure-serve: admin endpoints (health, metrics, reload, export, clock) on \
             http://{bound}/_pure/"
        );
    }
    let bound = std::iter::once(address).chain(admin.as_ref().map(|(bound, _)| *bound));
    for note in bound.filter_map(|b| any_host_note(options.allowed_hosts.as_deref(), b)) {
        eprintln!("{note}");
    }
    if options.error_details.is_none() && options.error_details() == ErrorDetails::None {
        eprintln!(
            "pure-serve: a failed handler's 500 says only that it failed (--error-details none, \
             the default off loopback); the log has the details under its request id"
        );
    }

    if crate::early_hangup() {
        eprintln!("pure-serve: SIGHUP during start-up: reloading the app now");
        let _ = tokio::task::block_in_place(|| dispatch.reload());
    }
    let stop = loop {
        tokio::select! {
            _ = terminate.recv() => break Stop::Signal("SIGTERM"),
            _ = interrupt.recv() => break Stop::Signal("SIGINT"),
            reason = poisoned(&runtime) => break Stop::Poisoned(reason),
            _ = hangup.recv() => {
                eprintln!(
                    "pure-serve: SIGHUP: reloading the app in {}",
                    options.app_dir().display()
                );
                // Compiling takes milliseconds; the other workers go on serving meanwhile.
                let _ = tokio::task::block_in_place(|| dispatch.reload());
            }
        }
    };
    let refused_before = runtime.metrics().writes_refused_total;
    // A write waiting for room in a full log is refused now rather than held until
    // --write-timeout-ms: the stop does not wait for it (and it is counted as refused).
    runtime.begin_shutdown();
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
    if let Some((_, admin_accepting)) = admin {
        let _ = admin_accepting.await;
    }
    let drained = tokio::time::timeout(
        Duration::from_millis(options.shutdown_timeout_ms),
        all_closed(&connections),
    )
    .await;
    if drained.is_err() {
        eprintln!(
            "pure-serve: {} connections were still open after the shutdown timeout; cutting them",
            connections.open_count()
        );
    }
    let runtime_at_end = runtime.clone();
    tokio::task::spawn_blocking(move || runtime.shutdown())
        .await
        .map_err(exit::Failure::internal)?;
    let refused = runtime_at_end.metrics().writes_refused_total - refused_before;
    if refused > 0 {
        eprintln!(
            "pure-serve: {refused} writes in flight at the stop were refused with 503 instead of              being made durable"
        );
    }
    Ok(exit_code(
        code,
        &runtime_at_end,
        refused > 0 || drained.is_err(),
    ))
}

/// The exit status tells the truth about the stop: a store poisoned on the way is 10 even
/// after a signal, and a signal's stop that refused writes or cut connections is not clean.
fn exit_code(code: u8, runtime: &Runtime, unclean: bool) -> u8 {
    if code == exit::POISONED || runtime.poisoned().is_some() {
        exit::POISONED
    } else if unclean {
        exit::UNCLEAN_STOP
    } else {
        code
    }
}

/// Resolves once every connection has closed.
async fn all_closed(connections: &Connections) {
    loop {
        let freed = connections.freed();
        if connections.open_count() == 0 {
            return;
        }
        freed.await;
    }
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
