//! `pure-bench scoreboard`: the scoreboard app over HTTP, side by side with Redis.
//!
//! A closed-loop load generator: each connection is one keep-alive socket that sends a request,
//! waits for its answer and sends the next, so the figures are those a client sees (HTTP and
//! JSON included). The connections are tasks on `--client-threads` event loops (one by
//! default), so the client costs little of the CPU it shares with the server (`wire`). Posts go
//! to random players among `--players`; with `--read-ratio` some requests are
//! `GET /players/{player}` instead.
//!
//! With `--vs-redis` the same logic runs as a Lua script in a local `redis-server` started with
//! `appendonly yes` and `appendfsync always` on the same device (a directory under `--data`),
//! through the same number of connections speaking RESP: check the best score, update it and a
//! sorted set, count posts. Both then answer only after fsync, so the ratio compares durable
//! writes with durable writes.

pub mod memory;
mod pure;
mod redis;
mod wire;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use hdrhistogram::Histogram;

use crate::harness::device::DeviceCounter;
use crate::harness::usage::cpu_seconds;
use pure::PureServe;
use redis::Redis;
use wire::{Protocol, Wire};

/// Load the scoreboard app over HTTP (and, with --vs-redis, the same logic in Redis) and print
/// requests/s and latency percentiles per number of connections.
///
/// Either give --url of a running pure-serve, or --data DIR: the benchmark then starts pure-serve
/// (the binary next to pure-bench: `cargo build --release -p pure-serve`) on apps/scoreboard with
/// its data in DIR/pure, and stops it at the end.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// URL of a running pure-serve with the scoreboard app, e.g. http://127.0.0.1:8080.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,

    /// Directory for the data of the servers the benchmark starts (pure-serve in DIR/pure unless
    /// --url is given, redis-server in DIR/redis); put it on the device to measure. Those two
    /// subdirectories are emptied first.
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,

    /// The app directory pure-serve serves.
    #[arg(long, value_name = "DIR", default_value = "apps/scoreboard")]
    pub app: PathBuf,

    /// Sync mode of the pure-serve started here: always (durable) or none (RAM-speed, not durable).
    #[arg(long, value_name = "MODE", default_value = "always")]
    pub sync: String,

    /// HTTP threads of the pure-serve started here (its --threads; default: its own, one per
    /// core). Since writes run on the HTTP thread that queued them, one and two run a
    /// write-only load alike on 2 cores; with 90% reads two served about 11% more (notes 008,
    /// 009).
    #[arg(long, value_name = "N")]
    pub server_threads: Option<usize>,

    /// Concurrent connections; a comma-separated list runs each in turn.
    #[arg(long, value_name = "N,N,...", value_delimiter = ',', default_values_t = [16])]
    pub connections: Vec<usize>,

    /// Client threads, each an event loop driving its share of the connections.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub client_threads: usize,

    /// Seconds of measured load per run (after --warmup).
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0)]
    pub seconds: f64,

    /// Seconds of unmeasured load before each run.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    pub warmup: f64,

    /// Number of distinct players posts and reads pick from, uniformly.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub players: u64,

    /// Fraction of requests that read a player (GET /players/{p}; HMGET in Redis) instead of
    /// posting a score.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.0)]
    pub read_ratio: f64,

    /// Also run the same logic as a Redis Lua script (appendfsync always) and print the ratio.
    #[arg(long)]
    pub vs_redis: bool,

    /// The redis-server binary for --vs-redis.
    #[arg(long, value_name = "PATH", default_value = "redis-server")]
    pub redis_server: PathBuf,
}

/// Figures of one run.
struct RunFigures {
    posts: Histogram<u64>,
    reads: Histogram<u64>,
    errors: u64,
    seconds: f64,
    /// Server CPU time (user + system) during the run, if its pid is known.
    server_cpu_seconds: Option<f64>,
    /// The load generator's own CPU time during the run.
    client_cpu_seconds: Option<f64>,
    device_bytes: Option<u64>,
}

/// One system under load: where it listens, what it speaks, and the server process if ours.
trait System: Sync {
    fn name(&self) -> &str;
    fn address(&self) -> SocketAddr;
    fn protocol(&self) -> Protocol;
    fn pid(&self) -> Option<u32>;
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if !(0.0..=1.0).contains(&args.read_ratio) {
        bail!("--read-ratio must be between 0 and 1");
    }
    if args.client_threads == 0 {
        bail!("--client-threads must be at least 1");
    }
    if args.connections.contains(&0) {
        bail!("--connections must be at least 1 each");
    }
    if args.server_threads == Some(0) {
        bail!("--server-threads must be at least 1");
    }
    if args.url.is_some() && args.server_threads.is_some() {
        bail!("--server-threads applies to the pure-serve started with --data; a server at --url runs as it was started");
    }
    let (pure, device) = match (&args.url, &args.data) {
        (Some(url), data) => (
            PureServe::external(url)?,
            data.as_deref().and_then(DeviceCounter::for_path),
        ),
        (None, Some(dir)) => (PureServe::start(&args, dir)?, DeviceCounter::for_path(dir)),
        (None, None) => bail!("give --url of a running pure-serve, or --data DIR to start one"),
    };
    let redis = if args.vs_redis {
        Some(Redis::start(&args)?)
    } else {
        None
    };
    println!(
        "{}",
        describe(&args, &pure, redis.as_ref(), device.as_ref())
    );
    println!(
        "{:<11} {:>5} {:>10} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>7} {:>9} {:>8} {:>9}",
        "system",
        "conns",
        "posts/s",
        "p50 µs",
        "p90 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs",
        "reads/s",
        "errors",
        "cpu µs/op",
        "dev B/op",
        "client µs"
    );
    let mut ratios = Vec::new();
    for &connections in &args.connections {
        let pure_figures = measure(&args, &pure, connections, device.as_ref())?;
        print_row(pure.name(), connections, &pure_figures);
        if let Some(redis) = &redis {
            let redis_figures = measure(&args, redis, connections, device.as_ref())?;
            print_row(redis.name(), connections, &redis_figures);
            ratios.push((
                connections,
                ops_per_s(&pure_figures) / ops_per_s(&redis_figures),
            ));
        }
    }
    for (connections, ratio) in ratios {
        println!("ratio pure-serve / redis at {connections} connections: {ratio:.2}x requests/s");
    }
    drop(pure);
    Ok(())
}

fn describe(
    args: &Args,
    pure: &PureServe,
    redis: Option<&Redis>,
    device: Option<&DeviceCounter>,
) -> String {
    let mut text = format!(
        "scoreboard: {} players, read ratio {}, {} s per run after {} s warm-up; closed loop, \
         keep-alive connections on {} client event-loop thread(s); latencies are of posts, as the \
         client sees them; cpu µs/op is the server's CPU, client µs the load generator's, per \
         request.\n\
         pure-serve at {}: HTTP/1.1 + JSON, sync {}, {}",
        args.players,
        args.read_ratio,
        args.seconds,
        args.warmup,
        args.client_threads
            .min(args.connections.iter().copied().max().unwrap_or(1)),
        pure.address,
        pure.sync,
        pure.threads
    );
    if let Some(redis) = redis {
        text.push_str(&format!(
            "\nredis-server ({}) at {}: RESP, EVALSHA of the same logic in Lua, appendonly yes, \
             appendfsync always, dir {}",
            redis.version,
            redis.address,
            redis.dir.display()
        ));
    }
    if let Some(device) = device {
        text.push_str(&format!(
            "\ndev B/op: bytes written to device {} during the run (whole device, shared) per request",
            device.device
        ));
    }
    text
}

fn ops_per_s(figures: &RunFigures) -> f64 {
    (figures.posts.len() + figures.reads.len()) as f64 / figures.seconds
}

fn print_row(name: &str, connections: usize, figures: &RunFigures) {
    let posts = &figures.posts;
    let ops = (posts.len() + figures.reads.len()).max(1) as f64;
    let cpu = figures
        .server_cpu_seconds
        .map_or_else(|| "-".to_string(), |s| format!("{:.1}", s * 1e6 / ops));
    let device = figures
        .device_bytes
        .map_or_else(|| "-".to_string(), |b| format!("{:.0}", b as f64 / ops));
    let client = figures
        .client_cpu_seconds
        .map_or_else(|| "-".to_string(), |s| format!("{:.1}", s * 1e6 / ops));
    println!(
        "{:<11} {:>5} {:>10.0} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9.0} {:>7} {:>9} {:>8} {:>9}",
        name,
        connections,
        posts.len() as f64 / figures.seconds,
        posts.value_at_quantile(0.5),
        posts.value_at_quantile(0.9),
        posts.value_at_quantile(0.99),
        posts.value_at_quantile(0.999),
        posts.max(),
        figures.reads.len() as f64 / figures.seconds,
        figures.errors,
        cpu,
        device,
        client
    );
}

/// Runs `connections` closed-loop connections, spread over the client threads, for the warm-up
/// and the measured window.
fn measure(
    args: &Args,
    system: &dyn System,
    connections: usize,
    device: Option<&DeviceCounter>,
) -> anyhow::Result<RunFigures> {
    let started = Instant::now();
    let window = Window {
        measure_from: started + Duration::from_secs_f64(args.warmup),
        end: started + Duration::from_secs_f64(args.warmup + args.seconds),
    };
    let (address, protocol) = (system.address(), system.protocol());
    let threads = args.client_threads.min(connections.max(1));
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                // Connections thread, thread + threads, ...: an even share each.
                let indices: Vec<u64> = (thread..connections)
                    .step_by(threads)
                    .map(|i| i as u64)
                    .collect();
                let protocol = protocol.clone();
                scope.spawn(move || client_thread(args, address, protocol, indices, window))
            })
            .collect();
        // Sample the counters around the window; a client that failed before it ends the run.
        let mut before = None;
        while Instant::now() < window.measure_from {
            if handles.iter().any(|h| h.is_finished()) {
                break;
            }
            std::thread::sleep(
                Duration::from_millis(5).min(
                    window
                        .measure_from
                        .saturating_duration_since(Instant::now()),
                ),
            );
        }
        if Instant::now() >= window.measure_from {
            before = Some((
                cpu_seconds(system.pid()),
                cpu_seconds(Some(std::process::id())),
                device.and_then(DeviceCounter::bytes_written),
            ));
        }
        let results: Vec<_> = handles.into_iter().map(|handle| handle.join()).collect();
        let after = (
            cpu_seconds(system.pid()),
            cpu_seconds(Some(std::process::id())),
            device.and_then(DeviceCounter::bytes_written),
        );
        (results, before, after)
    });
    let (results, before, after) = results;
    let mut clients = ClientFigures::new();
    for result in results {
        clients.merge(result.map_err(|_| anyhow!("a client thread panicked"))??)?;
    }
    let mut figures = RunFigures {
        posts: clients.posts,
        reads: clients.reads,
        errors: clients.errors,
        seconds: args.seconds,
        server_cpu_seconds: None,
        client_cpu_seconds: None,
        device_bytes: None,
    };
    if let Some((server_before, client_before, device_before)) = before {
        figures.server_cpu_seconds = server_before.zip(after.0).map(|(b, a)| a - b);
        figures.client_cpu_seconds = client_before.zip(after.1).map(|(b, a)| a - b);
        figures.device_bytes = device_before.zip(after.2).map(|(b, a)| a.saturating_sub(b));
    }
    Ok(figures)
}

/// When a run measures: requests sent from `measure_from` on, until `end`.
#[derive(Clone, Copy)]
struct Window {
    measure_from: Instant,
    end: Instant,
}

struct ClientFigures {
    posts: Histogram<u64>,
    reads: Histogram<u64>,
    errors: u64,
}

impl ClientFigures {
    fn new() -> ClientFigures {
        ClientFigures {
            posts: new_histogram(),
            reads: new_histogram(),
            errors: 0,
        }
    }

    fn merge(&mut self, other: ClientFigures) -> anyhow::Result<()> {
        self.posts.add(&other.posts).context("merge histograms")?;
        self.reads.add(&other.reads).context("merge histograms")?;
        self.errors += other.errors;
        Ok(())
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

/// One client thread: an event loop running its connections to the end of the window.
fn client_thread(
    args: &Args,
    address: SocketAddr,
    protocol: Protocol,
    indices: Vec<u64>,
    window: Window,
) -> anyhow::Result<ClientFigures> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    runtime.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for index in indices {
            let (players, read_ratio, protocol) = (args.players, args.read_ratio, protocol.clone());
            tasks.spawn(connection_loop(
                players, read_ratio, address, protocol, index, window,
            ));
        }
        let mut figures = ClientFigures::new();
        while let Some(result) = tasks.join_next().await {
            figures.merge(result.map_err(|_| anyhow!("a client connection panicked"))??)?;
        }
        Ok(figures)
    })
}

/// One closed-loop connection: a request, its answer, the next request.
async fn connection_loop(
    players: u64,
    read_ratio: f64,
    address: SocketAddr,
    protocol: Protocol,
    index: u64,
    window: Window,
) -> anyhow::Result<ClientFigures> {
    let mut wire = Wire::connect(address, protocol.clone()).await?;
    let mut random =
        XorShift::new(index.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03);
    let mut figures = ClientFigures::new();
    let mut player = String::with_capacity(32);
    loop {
        if Instant::now() >= window.end {
            return Ok(figures);
        }
        player.clear();
        {
            use std::fmt::Write as _;
            write!(player, "player{}", random.next() % players.max(1))?;
        }
        let read = (random.next() % 1_000_000) as f64 / 1e6 < read_ratio;
        let sent = Instant::now();
        let outcome = if read {
            wire.read(&player).await
        } else {
            wire.post(&player, (random.next() % 1_000_000) as i64).await
        };
        let micros = sent.elapsed().as_micros().max(1) as u64;
        if sent < window.measure_from {
            outcome?;
            continue;
        }
        match outcome {
            Ok(()) if read => figures.reads.saturating_record(micros),
            Ok(()) => figures.posts.saturating_record(micros),
            Err(_) => {
                figures.errors += 1;
                wire = Wire::connect(address, protocol.clone()).await?;
            }
        }
    }
}

/// Enough randomness for picking players, with no dependency.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> XorShift {
        XorShift(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
