//! `pure-bench scoreboard-memory`: what a scoreboard player costs pure-serve in resident memory.
//!
//! Starts pure-serve on the scoreboard app in a fresh directory, posts a warm-up, then one score
//! for each of `--players` new players (17-character names, so each is one `players` row and one
//! entry of its `by_best` index), lets the checkpoints the log triggers finish, and reports the growth of
//! the server's resident set per player, against the growth of the `state_bytes` it reports in
//! `/_pure/health` (its own estimate of the state's memory).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::harness::http::{get_text, Client};
use crate::harness::progress::counter;
use crate::harness::serve::Server;
use crate::harness::usage::resident_bytes;

#[derive(clap::Args)]
pub struct Args {
    /// Players to add (each posts once).
    #[arg(long, default_value_t = 500_000)]
    players: u64,
    /// Directory for the server's data (a fresh subdirectory `pure` is made and removed).
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    /// The scoreboard app.
    #[arg(long, default_value = "apps/scoreboard")]
    app: PathBuf,
    /// Connections posting at once.
    #[arg(long, default_value_t = 8)]
    connections: u64,
    /// pure-serve's --checkpoint-interval: a checkpoint each time this much log has grown.
    #[arg(long, default_value_t = 16 << 20)]
    checkpoint_interval: u64,
    /// pure-serve's --sync (memory does not depend on it; `none` only makes the run shorter).
    #[arg(long, default_value = "always")]
    sync: String,
}

const WARMUP_PLAYERS: u64 = 2_000;

fn name(prefix: &str, i: u64) -> String {
    // "player-0000000042": 17 characters for the measured players.
    format!("{prefix}-{i:010}")
}

/// The server's `state_bytes`.
fn state_bytes(server: &Server) -> anyhow::Result<u64> {
    let health: serde_json::Value =
        serde_json::from_str(&get_text(server.address, "/_pure/health")?)?;
    health["state_bytes"]
        .as_u64()
        .context("/_pure/health has no state_bytes")
}

fn rss(server: &Server) -> anyhow::Result<(u64, u64)> {
    resident_bytes(server.pid()).context("reading the server's /proc status")
}

/// Posts one score for each player `from..to` of `prefix`, over `connections` connections.
fn post_players(
    server: &Server,
    prefix: &str,
    from: u64,
    to: u64,
    connections: u64,
) -> anyhow::Result<()> {
    let bar = counter("players");
    bar.set_length(to - from);
    let per = (to - from).div_ceil(connections);
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let workers: Vec<_> = (0..connections)
            .map(|c| {
                let (lo, hi) = (from + c * per, (from + (c + 1) * per).min(to));
                let bar = bar.clone();
                scope.spawn(move || -> anyhow::Result<()> {
                    let mut client = Client::connect(server.address)?;
                    for i in lo..hi {
                        let body = format!(
                            r#"{{"player":"{}","score":{}}}"#,
                            name(prefix, i),
                            i % 100_000
                        );
                        let (status, answer) = client.send("POST", "/scores", &body)?;
                        if status != 200 {
                            bail!("POST /scores for player {i}: {status} {answer}");
                        }
                        if i % 256 == 0 {
                            bar.inc(256);
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        for worker in workers {
            worker.join().expect("a poster thread panicked")?;
        }
        Ok(())
    })?;
    bar.finish_and_clear();
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.players == 0 || args.connections == 0 {
        bail!("--players and --connections must be at least 1");
    }
    let dir = args.data.join("pure");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("emptying {}", dir.display()))?;
    }
    let interval = args.checkpoint_interval.to_string();
    let server = Server::start(
        &args.app,
        &dir,
        &["--sync", &args.sync, "--checkpoint-interval", &interval],
    )?;
    post_players(&server, "warmup", 0, WARMUP_PLAYERS, args.connections)?;
    let (rss_before, _) = rss(&server)?;
    let state_before = state_bytes(&server)?;
    let started = Instant::now();
    post_players(&server, "player", 0, args.players, args.connections)?;
    let posting = started.elapsed();
    // Let a checkpoint the last posts triggered run to its end: the resident set is read once
    // it stops changing for a second.
    let mut last = rss(&server)?.0;
    for _ in 0..60 {
        std::thread::sleep(Duration::from_secs(1));
        let now = rss(&server)?.0;
        if now == last {
            break;
        }
        last = now;
    }
    let (rss_after, peak) = rss(&server)?;
    let state_after = state_bytes(&server)?;
    server.stop()?;
    std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;

    let players = args.players as f64;
    let growth = rss_after.saturating_sub(rss_before) as f64;
    let state_growth = state_after.saturating_sub(state_before) as f64;
    println!(
        "scoreboard-memory: {} players posted once each in {:.1} s over {} connections (sync {}, \
         a checkpoint every {} MiB of log)",
        args.players,
        posting.as_secs_f64(),
        args.connections,
        args.sync,
        args.checkpoint_interval >> 20
    );
    println!(
        "resident set: {:.1} MB before, {:.1} MB after (peak {:.1} MB): {:.0} bytes per player",
        rss_before as f64 / 1e6,
        rss_after as f64 / 1e6,
        peak as f64 / 1e6,
        growth / players
    );
    println!(
        "state_bytes: {:.1} MB growth, {:.0} bytes per player: {:.2} of the resident growth",
        state_growth / 1e6,
        state_growth / players,
        state_growth / growth.max(1.0)
    );
    Ok(())
}
