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

use crate::harness::{scale, scoreboard_dir, seed, Client, Launch};

/// What the clients know about one player: every post they sent and every one acknowledged.
#[derive(Default, Clone, Debug)]
struct PlayerModel {
    attempted_posts: u64,
    attempted_best: Option<i64>,
    acknowledged_posts: u64,
    acknowledged_best: Option<i64>,
}

type Model = Arc<Mutex<HashMap<String, PlayerModel>>>;

/// Posts random scores for random players until `stop`, recording attempts and acknowledgements.
fn post_until_stopped(address: SocketAddr, model: Model, stop: Arc<AtomicBool>, seed: u64) -> u64 {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut client = Client::connect(address);
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
        let body = serde_json::to_vec(&json!({"player": player, "score": score})).expect("json");
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
fn under_load(
    address: SocketAddr,
    model: &Model,
    clients: usize,
    seed: u64,
    during: impl FnOnce(),
) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..clients)
        .map(|index| {
            let (model, stop) = (model.clone(), stop.clone());
            std::thread::spawn(move || {
                post_until_stopped(address, model, stop, seed ^ index as u64)
            })
        })
        .collect();
    during();
    stop.store(true, Relaxed);
    handles
        .into_iter()
        .map(|handle| handle.join().expect("client"))
        .sum()
}

#[test]
fn kill_9_under_load_loses_no_acknowledged_post() {
    let seed = seed("kill_9_under_load");
    let mut rng = StdRng::seed_from_u64(seed);
    let data = tempfile::tempdir().expect("tempdir");
    // Small checkpoint interval: some kills land during checkpoints.
    let launch = Launch::new(&scoreboard_dir(), data.path()).flag("--checkpoint-interval", "8192");
    // Every other cycle, the connection and body budgets bite: 64 clients from one address
    // against a share of 48 (refused and reconnecting), a cap of 56 (idle ones shed between
    // posts), and room for about 40 bodies at once (503s under the burst).
    let limited = Launch::new(&scoreboard_dir(), data.path())
        .flag("--checkpoint-interval", "8192")
        .flag("--max-connections-per-peer", "48")
        .flag("--max-connections", "56")
        .flag("--body-budget", "2000");
    let model: Model = Arc::default();
    let cycles = 50 * scale();
    let mut acknowledged_total = 0;
    for cycle in 0..cycles {
        let launch = if cycle % 2 == 0 { &launch } else { &limited };
        let mut server = launch.start();
        let context = format!("cycle {cycle} (seed {seed})");
        check_recovered(
            &mut server.client(),
            &model.lock().expect("model"),
            &context,
        );
        let load = Duration::from_millis(rng.random_range(50..350));
        acknowledged_total += under_load(server.address, &model, 64, rng.random(), || {
            std::thread::sleep(load);
            server.signal(libc::SIGKILL);
            server.wait();
        });
    }
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
        let acknowledged = under_load(server.address, &model, 16, seed + round, || {
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
