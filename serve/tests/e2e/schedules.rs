//! Scheduled handlers over real processes: an entry whose write was acknowledged runs exactly
//! once, whatever moment a kill -9 strikes (before it is due, while it runs, after), and
//! entries that fell due while the server was down run at once after the restart; the clock
//! of `--fixed-now` moves only by `POST /_pure/clock`, which answers once what fell due ran.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::harness::{metric_value, scale, seed, test_app_dir, wait_until, Client, Launch};

/// What the client knows of each timer: set and acknowledged, or only sent.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Sent {
    Acknowledged,
    Unknown,
}

fn fired(client: &mut Client) -> HashMap<u64, u64> {
    let answer = client.get("/fired").json();
    answer
        .as_array()
        .unwrap_or_else(|| panic!("an array: {answer}"))
        .iter()
        .map(|pair| {
            (
                pair[0].as_u64().expect("n"),
                pair[1].as_u64().expect("count"),
            )
        })
        .collect()
}

/// No timer fired twice; none fired that was never sent.
fn check_at_most_once(fired: &HashMap<u64, u64>, sent: &HashMap<u64, Sent>, context: &str) {
    for (n, count) in fired {
        assert_eq!(*count, 1, "{context}: timer {n} fired {count} times");
        assert!(sent.contains_key(n), "{context}: timer {n} was never set");
    }
}

#[test]
fn a_scheduled_write_runs_exactly_once_across_kill_9() {
    let seed = seed("schedules_kill_9");
    let mut rng = StdRng::seed_from_u64(seed);
    let data = tempfile::tempdir().expect("tempdir");
    let launch =
        Launch::new(&test_app_dir("timers"), data.path()).flag("--checkpoint-interval", "8192");
    let sent: Arc<Mutex<HashMap<u64, Sent>>> = Arc::default();
    let mut next = 1u64;
    let cycles = 12 * scale();
    for cycle in 0..cycles {
        let context = format!("cycle {cycle} (seed {seed})");
        let mut server = launch.start();
        check_at_most_once(
            &fired(&mut server.client()),
            &sent.lock().expect("sent"),
            &context,
        );
        let stop = Arc::new(AtomicBool::new(false));
        let setter = {
            let (stop, sent, address) = (stop.clone(), sent.clone(), server.address);
            let mut rng = StdRng::seed_from_u64(rng.random());
            let first = next;
            std::thread::spawn(move || {
                let mut client = Client::connect(address);
                let mut n = first;
                while !stop.load(Relaxed) {
                    sent.lock().expect("sent").insert(n, Sent::Unknown);
                    let body = json!({"delay": rng.random_range(0..300)});
                    let body = serde_json::to_vec(&body).expect("json");
                    match client.request("POST", &format!("/timers/{n}"), Some(&body)) {
                        Ok(answer) if answer.status == 200 => {
                            sent.lock().expect("sent").insert(n, Sent::Acknowledged);
                        }
                        _ => return n + 1,
                    }
                    n += 1;
                    // A few hundred timers a cycle: enough to be set, due and run around each
                    // kill, few enough for one GET to list them all in a debug build.
                    std::thread::sleep(Duration::from_millis(2));
                }
                n
            })
        };
        std::thread::sleep(Duration::from_millis(rng.random_range(20..400)));
        server.signal(libc::SIGKILL);
        server.wait();
        stop.store(true, Relaxed);
        next = setter.join().expect("setter");
    }
    // The last start: everything acknowledged falls due within 300 ms, and runs.
    let server = launch.start();
    let mut client = server.client();
    wait_until("every timer to fire", || {
        client.get("/pending").json() == json!(0)
    });
    let fired = fired(&mut client);
    let sent = sent.lock().expect("sent");
    check_at_most_once(&fired, &sent, "at the end");
    let acknowledged: Vec<u64> = sent
        .iter()
        .filter(|(_, s)| **s == Sent::Acknowledged)
        .map(|(n, _)| *n)
        .collect();
    for n in &acknowledged {
        assert_eq!(fired.get(n), Some(&1), "acknowledged timer {n} fired once");
    }
    let metrics = client.get("/_pure/metrics").text();
    assert_eq!(metric_value(&metrics, "pure_schedules_pending"), 0.0);
    eprintln!(
        "schedules_kill_9: {cycles} cycles, {} timers acknowledged, {} fired",
        acknowledged.len(),
        fired.len()
    );
    assert!(acknowledged.len() > cycles, "timers were set");
}

#[test]
fn the_fixed_clock_moves_only_when_told_and_answers_once_due_entries_ran() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("timers"), data.path())
        .flag("--fixed-now", "1000000")
        .flag("--admin-listen", "127.0.0.1:0")
        .start();
    let admin = server.admin_address();
    let mut client = server.client();
    let mut admin_client = Client::connect(admin);
    for (n, delay) in [(1, 100), (2, 200), (3, 5000)] {
        let answer = client.post(&format!("/timers/{n}"), &json!({"delay": delay}));
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        client.get("/pending").json(),
        json!(3),
        "the clock did not move"
    );
    let moved = admin_client
        .request("POST", "/_pure/clock?advance=200", None)
        .expect("answered");
    assert_eq!(moved.json(), json!({"now": 1000200, "ran": 2, "failed": 0}));
    // Answered once they ran and are durable: a read sees it at once.
    assert_eq!(client.get("/pending").json(), json!(1));
    let late: Vec<Value> = client
        .get("/fired")
        .json()
        .as_array()
        .expect("array")
        .clone();
    assert_eq!(late, vec![json!([1, 1]), json!([2, 1])]);
    let refused = admin_client
        .request("POST", "/_pure/clock?advance=-5", None)
        .expect("answered");
    assert_eq!(refused.status, 400);
    server.stop();

    // A live clock is not to be moved.
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("timers"), data.path())
        .flag("--admin-listen", "127.0.0.1:0")
        .start();
    let refused = Client::connect(server.admin_address())
        .request("POST", "/_pure/clock?advance=5", None)
        .expect("answered");
    assert_eq!(refused.status, 409, "{}", refused.text());
    assert!(refused.text().contains("--fixed-now"));
    server.stop();
}

fn run(args: &[&str]) -> std::process::Output {
    std::process::Command::new(crate::harness::binary())
        .args(args)
        .output()
        .expect("run pure-serve")
}

/// Pending entries are state: `export` writes them (`_schedule.jsonl`), `import` brings them
/// into a new directory where they run when due, and `check` counts them with the tables.
#[test]
fn pending_entries_are_exported_imported_and_checked() {
    let app = test_app_dir("timers");
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&app, data.path())
        .flag("--fixed-now", "1000000")
        .start();
    let mut client = server.client();
    for (n, delay) in [(1, 100), (2, 200)] {
        assert_eq!(
            client
                .post(&format!("/timers/{n}"), &json!({"delay": delay}))
                .status,
            200
        );
    }
    server.stop();
    let text = |out: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let path = |p: &std::path::Path| p.to_str().expect("utf-8").to_string();

    let checked = run(&["check", "--data", &path(data.path())]);
    assert!(checked.status.success(), "{}", text(&checked));
    assert!(text(&checked).contains("_schedule"), "{}", text(&checked));

    let out = tempfile::tempdir().expect("tempdir");
    let exported = run(&[
        "export",
        &path(&app),
        "--data",
        &path(data.path()),
        "--out",
        &path(out.path()),
    ]);
    assert!(exported.status.success(), "{}", text(&exported));
    let entries = std::fs::read_to_string(out.path().join("_schedule.jsonl")).expect("exported");
    assert_eq!(entries.lines().count(), 2, "{entries}");
    assert!(entries.contains("\"handler\":\"fire\""), "{entries}");

    let imported = tempfile::tempdir().expect("tempdir");
    let files: Vec<String> = std::fs::read_dir(out.path())
        .expect("files")
        .map(|entry| path(&entry.expect("entry").path()))
        .collect();
    let mut args = vec![
        "import".to_string(),
        path(&app),
        "--data".to_string(),
        path(imported.path()),
    ];
    args.extend(files);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = run(&args);
    assert!(output.status.success(), "{}", text(&output));

    let server = Launch::new(&app, imported.path())
        .flag("--fixed-now", "1000000")
        .flag("--admin-listen", "127.0.0.1:0")
        .start();
    let admin = server.admin_address();
    let mut client = server.client();
    assert_eq!(client.get("/pending").json(), json!(2));
    let moved = Client::connect(admin)
        .request("POST", "/_pure/clock?advance=500", None)
        .expect("answered");
    assert_eq!(moved.json()["ran"], json!(2), "{}", moved.text());
    assert_eq!(client.get("/pending").json(), json!(0));
    server.stop();
}
