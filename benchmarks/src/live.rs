//! `pure-bench live`: what live queries cost. The scoreboard takes posts while N subscribers
//! hold `GET /top` as event streams; the same post load is run without them, side by side.
//!
//! Every post raises the best score of one of ten players to the next number (`score = seq`),
//! so every post changes `/top`, and the first entry of an event (`"best"`) names the newest
//! post it shows. For each event a subscriber receives, the delay is the time from that post's
//! acknowledgement (the server answers a write once its group is durable and published, just
//! before or after it wakes the streams) to the event's arrival; an event that arrives before
//! the poster has its answer counts as 0. Posts run open-loop at `--rate` (latency counted from
//! each post's scheduled time) and then closed-loop on `--connections` (the most posts/s).
//! Server CPU comes from /proc; the figures include HTTP on loopback and this client's own work
//! on the same two cores.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::serve::Server;
use crate::harness::usage::{cpu_seconds, process_cpu, resident_bytes};

#[derive(Parser, Debug, Clone)]
pub struct Args {
    /// Directory for the server's data (emptied first); put it on the device to measure.
    #[arg(long)]
    pub data: PathBuf,
    /// The scoreboard app directory.
    #[arg(long, default_value = "apps/scoreboard")]
    pub app: PathBuf,
    /// Subscribers to `/top` in the runs with subscribers.
    #[arg(long, default_value_t = 1000)]
    pub subscribers: usize,
    /// Posts a second in the open-loop runs.
    #[arg(long, default_value_t = 5000.0)]
    pub rate: f64,
    /// Connections of the open-loop poster, and of the closed-loop one.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Seconds measured per run (after --warmup).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// The server's --live-interval-ms: the least time between two events of a stream.
    #[arg(long, default_value_t = 25)]
    pub interval_ms: u64,
    /// Sync mode of the server: always (durable) or none.
    #[arg(long, default_value = "always")]
    pub sync: String,
}

/// What the posters and subscribers of one run share.
#[derive(Default)]
struct Shared {
    next_seq: AtomicU64,
    /// When each post was acknowledged (by its seq), while the run measures.
    acked: Mutex<HashMap<u64, Instant>>,
    measuring: AtomicBool,
    stop: AtomicBool,
    posts: AtomicU64,
    events: AtomicU64,
    events_before_ack: AtomicU64,
    post_latency: Mutex<Option<Histogram<u64>>>,
    event_delay: Mutex<Option<Histogram<u64>>>,
    /// For the oldest post an event shows that the stream's last event did not: what
    /// coalescing (`--live-interval-ms`, a busy server) adds.
    oldest_delay: Mutex<Option<Histogram<u64>>>,
}

impl Shared {
    fn new() -> Arc<Shared> {
        let histogram = || Histogram::new_with_bounds(1, 60_000_000, 3).expect("bounds");
        Arc::new(Shared {
            next_seq: AtomicU64::new(1),
            post_latency: Mutex::new(Some(histogram())),
            event_delay: Mutex::new(Some(histogram())),
            oldest_delay: Mutex::new(Some(histogram())),
            ..Shared::default()
        })
    }

    fn record(histogram: &Mutex<Option<Histogram<u64>>>, took: Duration) {
        if let Some(h) = histogram.lock().expect("histogram").as_mut() {
            h.saturating_record(took.as_micros().max(1) as u64);
        }
    }
}

/// One run's figures.
struct Figures {
    posts_per_s: f64,
    post_p50_us: u64,
    post_p99_us: u64,
    post_p999_us: u64,
    events_per_s: f64,
    event_p50_us: u64,
    event_p99_us: u64,
    oldest_p50_us: u64,
    oldest_p99_us: u64,
    events_before_ack: u64,
    server_cpu_s: f64,
    client_cpu_s: f64,
    rss_bytes: u64,
    seconds: f64,
}

pub fn run(args: Args) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    if args.data.exists() {
        std::fs::remove_dir_all(&args.data)?;
    }
    std::fs::create_dir_all(&args.data)?;
    let cap = (args.subscribers + args.connections + 64).to_string();
    let server = Server::start(
        &args.app,
        &args.data,
        &[
            "--sync",
            &args.sync,
            "--max-subscriptions",
            &cap,
            "--max-connections",
            &cap,
            "--max-connections-per-peer",
            &cap,
            "--live-interval-ms",
            &args.interval_ms.to_string(),
        ],
    )?;
    println!(
        "pure-bench live: the scoreboard over HTTP on loopback, {} subscribers to /top, posts \
         open-loop at {}/s and closed-loop on {} connections, {} s a run after {} s of warm-up, \
         --sync {}, --live-interval-ms {}",
        args.subscribers,
        args.rate,
        args.connections,
        args.seconds,
        args.warmup,
        args.sync,
        args.interval_ms
    );
    let seq = Arc::new(AtomicU64::new(1));
    let mut rows = Vec::new();
    for (label, rate) in [("open-loop", Some(args.rate)), ("closed-loop", None)] {
        for subscribers in [0, args.subscribers] {
            let figures = runtime.block_on(one_run(&server, &args, rate, subscribers, &seq))?;
            print_row(label, rate, subscribers, &figures);
            rows.push((label, subscribers, figures));
        }
    }
    for label in ["open-loop", "closed-loop"] {
        let of = |subs: usize| {
            rows.iter()
                .find(|(l, s, _)| *l == label && *s == subs)
                .map(|(_, _, f)| f)
                .expect("ran")
        };
        let (none, with) = (of(0), of(args.subscribers));
        let extra_cpu = with.server_cpu_s - none.server_cpu_s * with.posts_per_s / none.posts_per_s;
        let events = with.events_per_s * with.seconds;
        println!(
            "{label}: posts/s with {} subscribers / without: {:.3}; server CPU per event beyond \
             the posts' own: {:.1} µs; resident memory {:.1} MB with, {:.1} MB without",
            args.subscribers,
            with.posts_per_s / none.posts_per_s,
            extra_cpu / events.max(1.0) * 1e6,
            with.rss_bytes as f64 / 1e6,
            none.rss_bytes as f64 / 1e6,
        );
    }
    server.stop()?;
    Ok(())
}

fn print_row(label: &str, rate: Option<f64>, subscribers: usize, f: &Figures) {
    let rate = rate.map_or("max".to_string(), |r| format!("{r}/s"));
    println!(
        "{label:<11} {rate:>8} subscribers {subscribers:>5}: {:>8.0} posts/s, post latency p50 \
         {} µs p99 {} µs p99.9 {} µs; {:>9.0} events/s, ack→event of the newest post shown p50 \
         {} µs p99 {} µs ({} before the ack), of the oldest post not shown before p50 {} µs \
         p99 {} µs; server CPU {:.2} s/s, client {:.2} s/s",
        f.posts_per_s,
        f.post_p50_us,
        f.post_p99_us,
        f.post_p999_us,
        f.events_per_s,
        f.event_p50_us,
        f.event_p99_us,
        f.events_before_ack,
        f.oldest_p50_us,
        f.oldest_p99_us,
        f.server_cpu_s / f.seconds,
        f.client_cpu_s / f.seconds,
    );
}

async fn one_run(
    server: &Server,
    args: &Args,
    rate: Option<f64>,
    subscribers: usize,
    seq: &Arc<AtomicU64>,
) -> Result<Figures> {
    let shared = Shared::new();
    shared
        .next_seq
        .store(seq.load(Relaxed), std::sync::atomic::Ordering::SeqCst);
    let address = server.address;
    let mut tasks = Vec::new();
    for _ in 0..subscribers {
        let stream = subscribe(address).await?;
        tasks.push(tokio::spawn(read_events(stream, shared.clone())));
    }
    let started = Instant::now();
    for k in 0..args.connections {
        let shared = shared.clone();
        let (connections, started) = (args.connections, started);
        tasks.push(tokio::spawn(async move {
            post_loop(address, shared, rate, (k, connections), started).await
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(args.warmup)).await;
    let (cpu_before, client_before) = (cpu_seconds(Some(server.pid())), process_cpu());
    shared.measuring.store(true, Relaxed);
    let measured_from = Instant::now();
    tokio::time::sleep(Duration::from_secs_f64(args.seconds)).await;
    shared.measuring.store(false, Relaxed);
    let seconds = measured_from.elapsed().as_secs_f64();
    let server_cpu_s = cpu_seconds(Some(server.pid())).unwrap_or(0.0) - cpu_before.unwrap_or(0.0);
    let client_cpu_s = (process_cpu() - client_before).as_secs_f64();
    let rss_bytes = resident_bytes(server.pid()).map_or(0, |(rss, _)| rss);
    shared.stop.store(true, Relaxed);
    for task in tasks {
        task.abort();
        let _ = task.await;
    }
    seq.store(shared.next_seq.load(Relaxed), Relaxed);
    let post = shared.post_latency.lock().expect("h").take().expect("h");
    let event = shared.event_delay.lock().expect("h").take().expect("h");
    let oldest = shared.oldest_delay.lock().expect("h").take().expect("h");
    Ok(Figures {
        posts_per_s: shared.posts.load(Relaxed) as f64 / seconds,
        post_p50_us: post.value_at_quantile(0.5),
        post_p99_us: post.value_at_quantile(0.99),
        post_p999_us: post.value_at_quantile(0.999),
        events_per_s: shared.events.load(Relaxed) as f64 / seconds,
        event_p50_us: event.value_at_quantile(0.5),
        event_p99_us: event.value_at_quantile(0.99),
        oldest_p50_us: oldest.value_at_quantile(0.5),
        oldest_p99_us: oldest.value_at_quantile(0.99),
        events_before_ack: shared.events_before_ack.load(Relaxed),
        server_cpu_s,
        client_cpu_s,
        rss_bytes,
        seconds,
    })
}

async fn subscribe(address: SocketAddr) -> Result<TcpStream> {
    let mut stream = TcpStream::connect(address)
        .await
        .context("connect a subscriber")?;
    stream.set_nodelay(true)?;
    let head = format!("GET /top HTTP/1.1\r\nHost: {address}\r\nAccept: text/event-stream\r\n\r\n");
    stream.write_all(head.as_bytes()).await?;
    Ok(stream)
}

/// Reads a stream's events: the first entry's `"best"` of each is the newest post it shows.
async fn read_events(mut stream: TcpStream, shared: Arc<Shared>) -> Result<()> {
    const MARK: &[u8] = b"data: [{\"best\":";
    let mut buffer = Vec::with_capacity(16 << 10);
    let mut chunk = vec![0u8; 16 << 10];
    let mut last_best: Option<u64> = None;
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        let received = Instant::now();
        buffer.extend_from_slice(&chunk[..n]);
        let mut consumed = 0;
        while let Some(at) = find(&buffer[consumed..], MARK) {
            let digits_at = consumed + at + MARK.len();
            let digits = buffer[digits_at..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            if digits_at + digits >= buffer.len() {
                break; // the number may go on in the next read
            }
            let best: u64 = std::str::from_utf8(&buffer[digits_at..digits_at + digits])
                .ok()
                .and_then(|d| d.parse().ok())
                .unwrap_or(0);
            consumed = digits_at + digits;
            let first_new = last_best.map(|b| b + 1);
            last_best = Some(best);
            if shared.measuring.load(Relaxed) {
                shared.events.fetch_add(1, Relaxed);
                let acks = shared.acked.lock().expect("acked");
                let acked = acks.get(&best).copied();
                let oldest = first_new.and_then(|seq| acks.get(&seq).copied());
                drop(acks);
                if let Some(at) = oldest {
                    Shared::record(&shared.oldest_delay, received.saturating_duration_since(at));
                }
                match acked {
                    Some(at) => {
                        Shared::record(&shared.event_delay, received.saturating_duration_since(at))
                    }
                    None => {
                        shared.events_before_ack.fetch_add(1, Relaxed);
                        Shared::record(&shared.event_delay, Duration::ZERO);
                    }
                }
            }
        }
        // Keep what may hold the start of the next mark.
        let keep_from = consumed.max(buffer.len().saturating_sub(MARK.len() + 24));
        buffer.drain(..keep_from);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// One poster connection: open-loop at its share of `rate` (latency from each post's scheduled
/// time), or closed-loop without one.
async fn post_loop(
    address: SocketAddr,
    shared: Arc<Shared>,
    rate: Option<f64>,
    (k, connections): (usize, usize),
    started: Instant,
) -> Result<()> {
    let mut stream = TcpStream::connect(address).await?;
    stream.set_nodelay(true)?;
    let mut answer = vec![0u8; 4096];
    let mut i: u64 = 0;
    loop {
        let scheduled = match rate {
            Some(rate) => {
                let at = started
                    + Duration::from_secs_f64((i * connections as u64 + k as u64) as f64 / rate);
                tokio::time::sleep_until(at.into()).await;
                at
            }
            None => Instant::now(),
        };
        i += 1;
        if shared.stop.load(Relaxed) {
            return Ok(());
        }
        let seq = shared.next_seq.fetch_add(1, Relaxed);
        let body = format!("{{\"player\":\"p{}\",\"score\":{seq}}}", seq % 10);
        let request = format!(
            "POST /scores HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await?;
        // One small answer: its head and body arrive together, ending with the JSON's `}`.
        let mut got = 0;
        loop {
            let n = stream.read(&mut answer[got..]).await?;
            anyhow::ensure!(n > 0, "the server closed a poster's connection");
            got += n;
            if answer[..got].ends_with(b"}") {
                break;
            }
        }
        let acked = Instant::now();
        shared.acked.lock().expect("acked").insert(seq, acked);
        if shared.measuring.load(Relaxed) {
            shared.posts.fetch_add(1, Relaxed);
            Shared::record(
                &shared.post_latency,
                acked.saturating_duration_since(scheduled),
            );
        }
    }
}
