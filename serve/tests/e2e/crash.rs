//! Stopping: SIGTERM answers what is in flight and exits 0; SIGKILL under load loses no
//! acknowledged post; a failed sync is never acknowledged and ends the process with status 10.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::harness::{metric_value, scale, scoreboard_dir, seed, Client, Launch};

/// What the clients know about one player: every post they sent and every one acknowledged.
#[derive(Default, Clone, Debug)]
struct PlayerModel {
    attempted_posts: u64,
    attempted_best: Option<i64>,
    acknowledged_posts: u64,
    acknowledged_best: Option<i64>,
}

type Model = Arc<Mutex<HashMap<String, PlayerModel>>>;

/// How one client of the load posts.
#[derive(Clone, Copy)]
struct Poster {
    seed: u64,
    /// Pads each body with spaces to this many bytes.
    pad: Option<usize>,
    /// The local address it connects from (loopback: another address is another peer).
    source: std::net::Ipv4Addr,
}

/// Posts random scores for random players until `stop`, recording attempts and acknowledgements.
fn post_until_stopped(
    address: SocketAddr,
    model: Model,
    stop: Arc<AtomicBool>,
    poster: Poster,
) -> u64 {
    let Poster { seed, pad, source } = poster;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut client = Client::connect_from(address, source);
    let mut acknowledged = 0;
    while !stop.load(Relaxed) {
        let player = format!("player{}", rng.random_range(0..40));
        let score: i64 = rng.random_range(-1_000..1_000_000);
        {
            let mut model = model.lock().expect("model");
            let entry = model.entry(player.clone()).or_default();
            entry.attempted_posts += 1;
            entry.attempted_best = entry.attempted_best.max(Some(score));
        }
        let mut body =
            serde_json::to_vec(&json!({"player": player, "score": score})).expect("json");
        if let Some(bytes) = pad {
            body.resize(bytes.max(body.len()), b' ');
        }
        match client.request("POST", "/scores", Some(&body)) {
            Ok(response) if response.status == 200 => {
                let mut model = model.lock().expect("model");
                let entry = model.get_mut(&player).expect("attempted above");
                entry.acknowledged_posts += 1;
                entry.acknowledged_best = entry.acknowledged_best.max(Some(score));
                acknowledged += 1;
            }
            // Killed mid-request, or refused while stopping: not acknowledged.
            Ok(response) => assert!(response.status >= 500, "{}", response.text()),
            Err(_) => {
                if stop.load(Relaxed) {
                    break;
                }
                // The server is gone; nothing more will be acknowledged in this cycle.
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }
    acknowledged
}

/// Checks every player against the model: what was acknowledged is there; nothing beyond what
/// was attempted is.
fn check_recovered(client: &mut Client, model: &HashMap<String, PlayerModel>, context: &str) {
    for (player, expected) in model {
        let response = client.get(&format!("/players/{player}"));
        if response.status == 404 {
            assert_eq!(
                expected.acknowledged_posts, 0,
                "{context}: acknowledged {player} lost"
            );
            continue;
        }
        let answer = response.json();
        let posts = answer["posts"].as_u64().expect("posts");
        let best = answer["best"].as_i64().expect("best");
        assert!(
            posts >= expected.acknowledged_posts,
            "{context}: {player} {answer} < {expected:?}"
        );
        assert!(
            posts <= expected.attempted_posts,
            "{context}: {player} {answer} > {expected:?}"
        );
        assert!(
            Some(best) >= expected.acknowledged_best,
            "{context}: {player} {answer} {expected:?}"
        );
        assert!(
            Some(best) <= expected.attempted_best,
            "{context}: {player} {answer} {expected:?}"
        );
    }
}

/// Runs clients against the server until `stop` is set by the caller's closure.
/// The load's clients: how many from each loopback address (127.0.0.1, 127.0.0.2, ...), and
/// how many of them send bodies of 100 KB (valid posts, padded with spaces).
#[derive(Clone, Copy)]
struct Load {
    per_address: &'static [usize],
    padded: usize,
}

impl Load {
    fn clients(&self) -> usize {
        self.per_address.iter().sum()
    }

    fn source(&self, index: usize) -> std::net::Ipv4Addr {
        let mut first = 0;
        for (address, clients) in self.per_address.iter().enumerate() {
            if index < first + clients {
                return std::net::Ipv4Addr::new(127, 0, 0, 1 + address as u8);
            }
            first += clients;
        }
        unreachable!("index {index} past the load's {} clients", self.clients())
    }
}

fn under_load(
    address: SocketAddr,
    model: &Model,
    load: Load,
    seed: u64,
    during: impl FnOnce(),
) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..load.clients())
        .map(|index| {
            let (model, stop) = (model.clone(), stop.clone());
            let poster = Poster {
                seed: seed ^ index as u64,
                pad: (index < load.padded).then_some(100_000),
                source: load.source(index),
            };
            std::thread::spawn(move || post_until_stopped(address, model, stop, poster))
        })
        .collect();
    during();
    stop.store(true, Relaxed);
    handles
        .into_iter()
        .map(|handle| handle.join().expect("client"))
        .sum()
}

/// The budgets' refusals so far: connections refused for their address, connections shed at
/// the cap, bodies refused for the budget.
fn refusals(address: SocketAddr) -> [f64; 3] {
    // At the cap this connection may be shed before its request arrives, like any other:
    // try again.
    let mut client = Client::connect_from(address, std::net::Ipv4Addr::new(127, 0, 0, 9));
    let response = (0..1000)
        .find_map(|_| client.request("GET", "/_pure/metrics", None).ok())
        .expect("metrics answered");
    let text = response.text();
    [
        "pure_http_connections_refused_total",
        "pure_http_connections_shed_total",
        "pure_http_body_budget_refusals_total",
    ]
    .map(|name| metric_value(&text, name))
}

#[test]
fn kill_9_under_load_loses_no_acknowledged_post() {
    let seed = seed("kill_9_under_load");
    let mut rng = StdRng::seed_from_u64(seed);
    let data = tempfile::tempdir().expect("tempdir");
    // Small checkpoint interval: some kills land during checkpoints.
    let launch = Launch::new(&scoreboard_dir(), data.path()).flag("--checkpoint-interval", "8192");
    // Every other cycle, the connection and body budgets bite: 64 clients, 40 of them from one
    // address against a share of 24 per address (refused, and reconnecting), 12 from each of
    // two more, against a cap of 40 (idle ones shed between posts); 8 of them send 100 KB
    // bodies against a budget for 3 (503s).
    let limited = Launch::new(&scoreboard_dir(), data.path())
        .flag("--checkpoint-interval", "8192")
        .flag("--max-connections-per-peer", "24")
        .flag("--max-connections", "40")
        .flag("--body-budget", "110000");
    let model: Model = Arc::default();
    let cycles = 50 * scale();
    let mut acknowledged_total = 0;
    // What the budgets refused in the limited cycles: each must have bitten.
    let mut bitten = [0.0; 3];
    for cycle in 0..cycles {
        let limits_bite = cycle % 2 == 1;
        let launch = if limits_bite { &limited } else { &launch };
        let mut server = launch.start();
        let context = format!("cycle {cycle} (seed {seed})");
        check_recovered(
            &mut server.client(),
            &model.lock().expect("model"),
            &context,
        );
        let load = Duration::from_millis(rng.random_range(50..350));
        let clients = if limits_bite {
            Load {
                per_address: &[40, 12, 12],
                padded: 8,
            }
        } else {
            Load {
                per_address: &[64],
                padded: 0,
            }
        };
        acknowledged_total += under_load(server.address, &model, clients, rng.random(), || {
            std::thread::sleep(load);
            if limits_bite {
                // From another address than the load's, which has used up its share.
                let figures = refusals(server.address);
                bitten
                    .iter_mut()
                    .zip(figures)
                    .for_each(|(sum, n)| *sum += n);
            }
            server.signal(libc::SIGKILL);
            server.wait();
        });
    }
    eprintln!("kill_9_under_load: connections refused, shed, bodies refused: {bitten:?}");
    assert!(
        bitten.iter().all(|&n| n > 0.0),
        "every budget bit: {bitten:?}"
    );
    let server = launch.start();
    check_recovered(
        &mut server.client(),
        &model.lock().expect("model"),
        "after the last cycle",
    );
    eprintln!("kill_9_under_load: {cycles} cycles, {acknowledged_total} acknowledged posts");
    assert!(
        acknowledged_total > cycles as u64,
        "the load must have posted something"
    );
    server.stop();
}

#[test]
fn sigterm_answers_in_flight_writes_and_exits_0() {
    let seed = seed("sigterm");
    let data = tempfile::tempdir().expect("tempdir");
    let launch = Launch::new(&scoreboard_dir(), data.path());
    let model: Model = Arc::default();
    for round in 0..3 {
        let mut server = launch.start();
        let load = Load {
            per_address: &[16],
            padded: 0,
        };
        let acknowledged = under_load(server.address, &model, load, seed + round, || {
            std::thread::sleep(Duration::from_millis(300));
            server.signal(libc::SIGTERM);
            let status = server.wait();
            assert_eq!(status.code(), Some(0), "exit status after SIGTERM");
        });
        assert!(acknowledged > 0);
    }
    let server = launch.start();
    check_recovered(
        &mut server.client(),
        &model.lock().expect("model"),
        "after SIGTERM",
    );
    server.stop();
}

fn strace_available() -> bool {
    std::process::Command::new("strace")
        .args([
            "-f",
            "-qq",
            "-e",
            "inject=fdatasync:error=EIO:when=1000",
            "true",
        ])
        .output()
        .is_ok_and(|output| output.status.success())
}

/// Under strace, the k-th fdatasync or fsync (counted per thread) and every later one fail with
/// EIO. No post is acknowledged from the failed group on, writes get 503, health says poisoned,
/// reads go on, and the process exits with 10 after the drain. A restart recovers every
/// acknowledged post.
#[test]
fn a_failed_sync_is_never_acknowledged_and_exits_10() {
    if !strace_available() {
        eprintln!("SKIPPED a_failed_sync_is_never_acknowledged_and_exits_10: strace is not available (install it: .ci/run does)");
        return;
    }
    for failing_sync in [3, 20] {
        let data = tempfile::tempdir().expect("tempdir");
        let fault = format!("inject=fdatasync,fsync:error=EIO:when={failing_sync}+");
        let launch = Launch::new(&scoreboard_dir(), data.path())
            .flag("--poison-drain-ms", "1000")
            .wrapped(&["strace", "-f", "-qq", "-o", "/dev/null", "-e", &fault]);
        let mut server = launch.start();
        let mut client = server.client();
        let mut acknowledged = Vec::new();
        let mut refused = 0;
        for post in 0..10_000 {
            let body = serde_json::to_vec(&json!({"player": format!("p{post}"), "score": post}))
                .expect("json");
            match client.request("POST", "/scores", Some(&body)) {
                Ok(response) if response.status == 200 => {
                    assert_eq!(refused, 0, "post {post} acknowledged after a refused one");
                    acknowledged.push(post);
                }
                Ok(response) => {
                    assert!(response.status >= 500, "{}", response.text());
                    if response.status == 503 {
                        assert!(response.json()["error"].is_string());
                    }
                    if refused == 0 {
                        let health = client.get("/_pure/health");
                        assert_eq!(
                            health.status,
                            503,
                            "health once poisoned: {}",
                            health.text()
                        );
                        assert!(health.json()["poisoned"].is_string());
                        // Reads go on from the last durable snapshot until the exit.
                        assert_eq!(client.get("/top?n=1").status, 200);
                    }
                    refused += 1;
                }
                Err(_) => break, // the process exited after its drain
            }
        }
        assert!(
            refused > 0,
            "sync {failing_sync} failed, yet no write was refused"
        );
        let status = server.wait();
        assert_eq!(
            status.code(),
            Some(10),
            "exit status; stderr:\n{}",
            server.stderr_text()
        );
        eprintln!(
            "failed sync {failing_sync}: {} acknowledged, {refused} refused",
            acknowledged.len()
        );

        let server = Launch::new(&scoreboard_dir(), data.path()).start();
        let mut client = server.client();
        for post in &acknowledged {
            let response = client.get(&format!("/players/p{post}"));
            assert_eq!(
                response.status,
                200,
                "acknowledged post {post} lost: {}",
                response.text()
            );
        }
        server.stop();
    }
}
