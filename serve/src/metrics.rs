//! Request metrics and their Prometheus text rendering, with the runtime's own figures.
//!
//! Counters are plain atomics indexed by route and status, so recording a request takes no lock
//! on the hot path: an app has a handful of routes and a status fits in 0..600.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use pure_runtime::{Metrics, Route};

use crate::log::Log;

/// Upper bounds of the request latency histogram, in seconds.
const LATENCY_BOUNDS_SECONDS: [f64; 16] = [
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];
const STATUS_LIMIT: usize = 600;

/// Counters of one route (or of one pseudo-route: built-in endpoints, unmatched requests).
pub struct RouteCounters {
    method: String,
    route: String,
    by_status: Box<[AtomicU64]>,
    latency_buckets: [AtomicU64; LATENCY_BOUNDS_SECONDS.len()],
    latency_sum_ns: AtomicU64,
    count: AtomicU64,
}

/// Which counters a request is recorded under.
#[derive(Clone, Copy, Debug)]
pub enum Label {
    Route(usize),
    Health,
    Metrics,
    Reload,
    Unmatched,
}

pub struct ServerMetrics {
    /// The built-in endpoints' and unmatched requests' counters (the routes' are the
    /// deployment's: a reload may change the routes).
    health: RouteCounters,
    metrics: RouteCounters,
    reload: RouteCounters,
    unmatched: RouteCounters,
    pub connections_open: AtomicU64,
    pub connections_total: AtomicU64,
    pub accept_errors_total: AtomicU64,
    /// Connections closed at accept: their address had its share already.
    pub connections_refused_total: AtomicU64,
    /// Idle connections asked to close to make room for a new client at the cap.
    pub connections_shed_total: AtomicU64,
    /// Requests refused with 503 because the bodies already held took the whole budget.
    pub body_budget_refusals_total: AtomicU64,
    /// Bytes of answers that their clients have not taken yet (of --answer-budget).
    pub answer_bytes_held: Arc<AtomicU64>,
    /// Connections closed because their client took no byte for --send-timeout-ms.
    pub send_timeouts_total: AtomicU64,
    /// Connections whose client stopped reading, cut to make room in the answer budget, for a
    /// new client at the cap, or at a stop.
    pub stalled_cuts_total: AtomicU64,
    /// Reloads (SIGHUP) that replaced the app, and those that left the old version serving.
    pub reloads_total: AtomicU64,
    pub reload_failures_total: AtomicU64,
    /// Live queries (`live`): streams open now and in all, refused at --max-subscriptions.
    pub live_subscriptions_open: AtomicU64,
    pub live_subscriptions_total: AtomicU64,
    pub live_refused_total: AtomicU64,
    /// Runs of a subscribed handler (the first of each subscription among them), and their time.
    pub live_runs_total: AtomicU64,
    pub live_run_nanoseconds_total: AtomicU64,
    /// Publications a stream looked at that wrote none of the tables its answer read.
    pub live_runs_skipped_total: AtomicU64,
    /// Runs whose answer was the one sent last (not sent again).
    pub live_runs_unchanged_total: AtomicU64,
    /// Answers a stream took from another stream's run of the same query instead of running.
    pub live_runs_shared_total: AtomicU64,
    /// Events sent, and publications a stream passed over for a newer one (its client, or
    /// its thread, was not ready for an event in between).
    pub live_events_total: AtomicU64,
    pub live_events_coalesced_total: AtomicU64,
}

impl ServerMetrics {
    pub fn new() -> ServerMetrics {
        ServerMetrics {
            health: RouteCounters::new("GET", "/_pure/health"),
            metrics: RouteCounters::new("GET", "/_pure/metrics"),
            reload: RouteCounters::new("POST", "/_pure/reload"),
            unmatched: RouteCounters::new("", "unmatched"),
            connections_open: AtomicU64::new(0),
            connections_total: AtomicU64::new(0),
            accept_errors_total: AtomicU64::new(0),
            connections_refused_total: AtomicU64::new(0),
            connections_shed_total: AtomicU64::new(0),
            body_budget_refusals_total: AtomicU64::new(0),
            answer_bytes_held: Arc::default(),
            send_timeouts_total: AtomicU64::new(0),
            stalled_cuts_total: AtomicU64::new(0),
            reloads_total: AtomicU64::new(0),
            reload_failures_total: AtomicU64::new(0),
            live_subscriptions_open: AtomicU64::new(0),
            live_subscriptions_total: AtomicU64::new(0),
            live_refused_total: AtomicU64::new(0),
            live_runs_total: AtomicU64::new(0),
            live_run_nanoseconds_total: AtomicU64::new(0),
            live_runs_skipped_total: AtomicU64::new(0),
            live_runs_unchanged_total: AtomicU64::new(0),
            live_runs_shared_total: AtomicU64::new(0),
            live_events_total: AtomicU64::new(0),
            live_events_coalesced_total: AtomicU64::new(0),
        }
    }

    /// Counts a request; `routes` are the counters of the deployment that routed it.
    pub fn record(
        &self,
        label: Label,
        routes: &[Arc<RouteCounters>],
        status: u16,
        elapsed: Duration,
    ) {
        let counters = match label {
            Label::Route(index) => &routes[index],
            Label::Health => &self.health,
            Label::Metrics => &self.metrics,
            Label::Reload => &self.reload,
            Label::Unmatched => &self.unmatched,
        };
        counters.record(status, elapsed);
    }

    /// The Prometheus text exposition of the server's and the runtime's figures, with the
    /// counters of the routes served now.
    pub fn render(
        &self,
        routes: &[Arc<RouteCounters>],
        runtime: &Metrics,
        body_budget_held_bytes: u64,
        log: &Log,
    ) -> String {
        let mut out = String::with_capacity(8 * 1024);
        self.render_requests(&mut out, routes);
        render_runtime(&mut out, runtime);
        metric(
            &mut out,
            "pure_http_body_budget_held_bytes",
            "Bytes of request bodies held now (of --body-budget).",
            "gauge",
            body_budget_held_bytes as f64,
        );
        metric(
            &mut out,
            "pure_http_answer_bytes_held",
            "Bytes of answers their clients have not taken yet (of --answer-budget).",
            "gauge",
            self.answer_bytes_held.load(Relaxed) as f64,
        );
        let figures = [
            (
                "pure_http_connections_open",
                "Connections open now.",
                "gauge",
                &self.connections_open,
            ),
            (
                "pure_http_connections_total",
                "Connections accepted.",
                "counter",
                &self.connections_total,
            ),
            (
                "pure_http_accept_errors_total",
                "Failed accepts (EMFILE...).",
                "counter",
                &self.accept_errors_total,
            ),
            (
                "pure_http_connections_refused_total",
                "Connections closed at accept: too many from their address.",
                "counter",
                &self.connections_refused_total,
            ),
            (
                "pure_http_connections_shed_total",
                "Idle connections closed to make room at the connection cap.",
                "counter",
                &self.connections_shed_total,
            ),
            (
                "pure_http_body_budget_refusals_total",
                "Requests refused (503): request bodies held took the whole budget.",
                "counter",
                &self.body_budget_refusals_total,
            ),
            (
                "pure_http_send_timeouts_total",
                "Connections closed: their client took no byte of an answer for --send-timeout-ms.",
                "counter",
                &self.send_timeouts_total,
            ),
            (
                "pure_http_stalled_cuts_total",
                "Connections cut because their client stopped reading: to make room in \
                 --answer-budget, for a new client at the cap, or at a stop.",
                "counter",
                &self.stalled_cuts_total,
            ),
            (
                "pure_reloads_total",
                "Reloads (SIGHUP) that replaced the app.",
                "counter",
                &self.reloads_total,
            ),
            (
                "pure_reload_failures_total",
                "Reloads (SIGHUP) refused: the new version did not load, or changed the tables.",
                "counter",
                &self.reload_failures_total,
            ),
            (
                "pure_log_lines_total",
                "Log lines (handlers' and the access log) handed to the log writer.",
                "counter",
                &log.lines_total,
            ),
            (
                "pure_log_lines_dropped_total",
                "Log lines dropped because the log writer was behind.",
                "counter",
                &log.dropped_total,
            ),
        ];
        for (name, help, kind, value) in figures {
            metric(&mut out, name, help, kind, value.load(Relaxed) as f64);
        }
        self.render_live(&mut out);
        out
    }

    fn render_live(&self, out: &mut String) {
        let figures = [
            (
                "pure_live_subscriptions_open",
                "Live query streams open now.",
                "gauge",
                &self.live_subscriptions_open,
            ),
            (
                "pure_live_subscriptions_total",
                "Live query streams opened.",
                "counter",
                &self.live_subscriptions_total,
            ),
            (
                "pure_live_subscriptions_refused_total",
                "Live queries refused (503) at --max-subscriptions.",
                "counter",
                &self.live_refused_total,
            ),
            (
                "pure_live_runs_total",
                "Runs of a subscribed read handler (each stream's first among them).",
                "counter",
                &self.live_runs_total,
            ),
            (
                "pure_live_runs_skipped_total",
                "Publications a stream looked at that wrote no table its answer read: no run.",
                "counter",
                &self.live_runs_skipped_total,
            ),
            (
                "pure_live_runs_unchanged_total",
                "Runs whose answer was the one sent last: no event.",
                "counter",
                &self.live_runs_unchanged_total,
            ),
            (
                "pure_live_runs_shared_total",
                "Answers a stream took from another stream's run of the same query (same route, \
                 parameters and body; a handler that reads no header): no run of its own.",
                "counter",
                &self.live_runs_shared_total,
            ),
            (
                "pure_live_events_total",
                "Events sent on live query streams.",
                "counter",
                &self.live_events_total,
            ),
            (
                "pure_live_events_coalesced_total",
                "Publications a stream passed over for a newer one, its client not ready for an \
                 event in between.",
                "counter",
                &self.live_events_coalesced_total,
            ),
        ];
        for (name, help, kind, value) in figures {
            metric(out, name, help, kind, value.load(Relaxed) as f64);
        }
        metric(
            out,
            "pure_live_run_seconds_total",
            "Time spent running subscribed read handlers.",
            "counter",
            self.live_run_nanoseconds_total.load(Relaxed) as f64 / 1e9,
        );
    }

    fn render_requests(&self, out: &mut String, routes: &[Arc<RouteCounters>]) {
        let all = || {
            routes.iter().map(|counters| &**counters).chain([
                &self.health,
                &self.metrics,
                &self.reload,
                &self.unmatched,
            ])
        };
        header(
            out,
            "pure_http_requests_total",
            "HTTP requests by route and status.",
            "counter",
        );
        for counters in all() {
            for (status, count) in counters.by_status.iter().enumerate() {
                let count = count.load(Relaxed);
                if count > 0 {
                    let labels = counters.labels();
                    let _ = writeln!(
                        out,
                        "pure_http_requests_total{{{labels},status=\"{status}\"}} {count}"
                    );
                }
            }
        }
        let name = "pure_http_request_duration_seconds";
        header(
            out,
            name,
            "Time from request head to response, by route.",
            "histogram",
        );
        for counters in all().filter(|counters| counters.count.load(Relaxed) > 0) {
            counters.render_latency(out, name);
        }
    }
}

/// Counters for `routes`, in their order: a route that `previous` (the version a reload
/// replaces) also served, by method and path, keeps its counters, so that they only grow.
pub fn route_counters(
    routes: &[Route],
    previous: &[Arc<RouteCounters>],
) -> Vec<Arc<RouteCounters>> {
    routes
        .iter()
        .map(|route| {
            previous
                .iter()
                .find(|c| c.method == route.method && c.route == route.path)
                .cloned()
                .unwrap_or_else(|| Arc::new(RouteCounters::new(&route.method, &route.path)))
        })
        .collect()
}

impl RouteCounters {
    fn new(method: &str, route: &str) -> RouteCounters {
        RouteCounters {
            method: method.to_string(),
            route: route.to_string(),
            by_status: (0..STATUS_LIMIT).map(|_| AtomicU64::new(0)).collect(),
            latency_buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            latency_sum_ns: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    fn record(&self, status: u16, elapsed: Duration) {
        let status = usize::from(status).min(STATUS_LIMIT - 1);
        self.by_status[status].fetch_add(1, Relaxed);
        let seconds = elapsed.as_secs_f64();
        // Buckets are stored non-cumulatively and summed when rendered: one increment per request.
        if let Some(bucket) = LATENCY_BOUNDS_SECONDS
            .iter()
            .position(|bound| seconds <= *bound)
        {
            self.latency_buckets[bucket].fetch_add(1, Relaxed);
        }
        self.latency_sum_ns
            .fetch_add(elapsed.as_nanos() as u64, Relaxed);
        self.count.fetch_add(1, Relaxed);
    }

    fn labels(&self) -> String {
        format!(
            "method=\"{}\",route=\"{}\"",
            escape(&self.method),
            escape(&self.route)
        )
    }

    fn render_latency(&self, out: &mut String, name: &str) {
        let labels = self.labels();
        let mut cumulative = 0;
        for (bound, bucket) in LATENCY_BOUNDS_SECONDS.iter().zip(&self.latency_buckets) {
            cumulative += bucket.load(Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
        }
        let count = self.count.load(Relaxed);
        let sum = self.latency_sum_ns.load(Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
        let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
    }
}

fn render_runtime(out: &mut String, m: &Metrics) {
    let busy_share = if m.uptime_seconds > 0.0 {
        m.owner_busy_seconds_total / m.uptime_seconds
    } else {
        0.0
    };
    let figures: [(&str, &str, &str, f64); 23] = [
        (
            "pure_write_queue_depth",
            "Writes waiting for the owner.",
            "gauge",
            m.queue_depth as f64,
        ),
        (
            "pure_writes_total",
            "Write handler calls run by the owner.",
            "counter",
            m.writes_total as f64,
        ),
        (
            "pure_writes_failed_total",
            "Write handler calls that failed.",
            "counter",
            m.writes_failed_total as f64,
        ),
        (
            "pure_writes_refused_total",
            "Writes that ran but were answered 503 and undone instead of being made durable.",
            "counter",
            m.writes_refused_total as f64,
        ),
        (
            "pure_groups_total",
            "Commit groups synced.",
            "counter",
            m.groups_total as f64,
        ),
        (
            "pure_groups_committed_here_total",
            "Commit groups whose commit ran on the thread that ran their writes (writes coming one at a time), not on the syncer thread.",
            "counter",
            m.groups_committed_here_total as f64,
        ),
        (
            "pure_syncs_total",
            "Syncs of the log.",
            "counter",
            m.syncs_total as f64,
        ),
        (
            "pure_owner_busy_seconds_total",
            "Owner time running handlers and encoding.",
            "counter",
            m.owner_busy_seconds_total,
        ),
        (
            "pure_owner_busy_ratio",
            "Owner busy time over uptime.",
            "gauge",
            busy_share,
        ),
        (
            "pure_uptime_seconds",
            "Seconds since the runtime started.",
            "gauge",
            m.uptime_seconds,
        ),
        (
            "pure_snapshot_age_seconds",
            "Age of the published snapshot.",
            "gauge",
            m.snapshot_age_seconds,
        ),
        (
            "pure_state_bytes",
            "Estimated bytes of state.",
            "gauge",
            m.state_bytes as f64,
        ),
        (
            "pure_log_bytes",
            "Bytes of log in use.",
            "gauge",
            m.log_bytes as f64,
        ),
        (
            "pure_log_capacity_bytes",
            "Bytes of log space.",
            "gauge",
            m.log_capacity_bytes as f64,
        ),
        (
            "pure_checkpoints_total",
            "Checkpoints written.",
            "counter",
            m.checkpoints_total as f64,
        ),
        (
            "pure_checkpoint_seconds_sum",
            "Time spent writing checkpoints.",
            "counter",
            m.checkpoint_seconds_sum,
        ),
        (
            "pure_checkpoint_failures_total",
            "Checkpoints that could not be written or installed (nothing is lost; the log is not freed until one succeeds; the reason is on stderr and in /_pure/health).",
            "counter",
            m.checkpoint_failures_total as f64,
        ),
        (
            "pure_last_checkpoint_lsn",
            "LSN of the newest checkpoint.",
            "gauge",
            m.last_checkpoint_lsn as f64,
        ),
        (
            "pure_handler_fallbacks_total",
            "Calls of compiled handlers re-run in Rhai's evaluator: an error, a limit, or a case the compiled code leaves to Rhai (each costs the call twice).",
            "counter",
            m.handler_fallbacks_total as f64,
        ),
        (
            "pure_durable_lsn",
            "Highest durable LSN.",
            "gauge",
            m.durable_lsn as f64,
        ),
        (
            "pure_scheduled_runs_total",
            "Scheduled entries run (each with its removal, one write).",
            "counter",
            m.scheduled_runs_total as f64,
        ),
        (
            "pure_scheduled_failures_total",
            "Scheduled entries whose handler failed (its changes undone, the entry removed, not \
             retried; each logged with its id).",
            "counter",
            m.scheduled_failures_total as f64,
        ),
        (
            "pure_schedules_pending",
            "Schedule entries pending in the durable state.",
            "gauge",
            m.schedules_pending as f64,
        ),
    ];
    for (name, help, kind, value) in figures {
        metric(out, name, help, kind, value);
    }
    let group_count = m
        .group_records_buckets
        .last()
        .map_or(0, |(_, count)| *count);
    let group_buckets: Vec<(String, u64)> = m
        .group_records_buckets
        .iter()
        .map(|(bound, count)| (bound.to_string(), *count))
        .collect();
    histogram(
        out,
        "pure_group_records",
        "Records per commit group.",
        &group_buckets,
        m.group_records_sum as f64,
        group_count.max(m.groups_total),
    );
    let sync_buckets: Vec<(String, u64)> = m
        .sync_seconds_buckets
        .iter()
        .map(|(bound, count)| (bound.to_string(), *count))
        .collect();
    histogram(
        out,
        "pure_sync_seconds",
        "Latency of a log sync.",
        &sync_buckets,
        m.sync_seconds_sum,
        m.syncs_total,
    );
}

fn histogram(
    out: &mut String,
    name: &str,
    help: &str,
    buckets: &[(String, u64)],
    sum: f64,
    count: u64,
) {
    header(out, name, help, "histogram");
    for (bound, cumulative) in buckets {
        let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
    let _ = writeln!(out, "{name}_sum {sum}");
    let _ = writeln!(out, "{name}_count {count}");
}

fn metric(out: &mut String, name: &str, help: &str, kind: &str, value: f64) {
    header(out, name, help, kind);
    let _ = writeln!(out, "{name} {value}");
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn escape(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
