//! Live queries over real HTTP: a GET with `Accept: text/event-stream` is a stream of the
//! route's answers, one per durable state that changes it, in order, each with its LSN as id;
//! nothing a crash loses is ever shown (kill -9 in a loop); `Last-Event-ID` after a restart; a
//! subscriber that does not read is coalesced to the newest answer; a subscription is not run
//! again for writes to tables it did not read; reloads, stops and the subscription cap.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::harness::{
    metric_value, scale, scoreboard_dir, seed, test_app_dir, wait_until, Client, Events, Launch,
};

/// The scoreboard's `/top?n=N` after players `p0001`..`p{k}` each posted their own number.
fn top_after(k: u64, n: u64) -> Value {
    let entries: Vec<Value> = (k.saturating_sub(n) + 1..=k)
        .rev()
        .map(|i| json!({"player": player(i), "best": i}))
        .collect();
    json!(entries)
}

fn player(i: u64) -> String {
    format!("p{i:04}")
}

fn post(client: &mut Client, i: u64) {
    let answer = client.post("/scores", &json!({"player": player(i), "score": i}));
    assert_eq!(answer.status, 200, "{}", answer.text());
}

fn metrics(address: SocketAddr) -> String {
    Client::connect(address).get("/_pure/metrics").text()
}

#[test]
fn a_subscriber_to_top_sees_every_change_in_order() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&scoreboard_dir(), data.path()).start();
    let mut events = Events::open(server.address, "/top?n=5", None).expect("subscribed");
    assert_eq!(events.header("content-type"), Some("text/event-stream"));
    let first = events.next().expect("read").expect("the current answer");
    assert_eq!(
        events.retry,
        Some(1000),
        "EventSource is asked to retry soon"
    );
    assert_eq!(first.json(), json!([]));
    assert_eq!(first.name, None);
    let mut last_id = first.id.expect("an id");

    // In step: each post changes the top, and its event arrives before the next post.
    let mut client = server.client();
    for i in 1..=30 {
        post(&mut client, i);
        let event = events.next().expect("read").expect("an event");
        let id = event.id.expect("an id");
        assert!(id > last_id, "ids rise: {id} after {last_id}");
        last_id = id;
        assert_eq!(event.json(), top_after(i, 5), "after post {i}");
    }
    // A post that leaves the top as it was sends nothing: the next event is the next change.
    let answer = client.post("/scores", &json!({"player": "low", "score": 0}));
    assert_eq!(answer.status, 200);
    post(&mut client, 31);
    let event = events.next().expect("read").expect("an event");
    assert_eq!(event.json(), top_after(31, 5));
    assert!(event.id.expect("an id") >= last_id + 2, "two writes since");
    last_id = event.id.expect("an id");

    // Free running: posts as fast as they are answered while the events are read. Each event
    // is the top after some prefix of the posts, later than the one before, ending with the
    // last.
    let address = server.address;
    let poster = std::thread::spawn(move || {
        let mut client = Client::connect(address);
        for i in 32..=400 {
            post(&mut client, i);
        }
    });
    let mut seen = 31;
    while seen < 400 {
        let event = events.next().expect("read").expect("an event");
        let id = event.id.expect("an id");
        assert!(id > last_id, "ids rise: {id} after {last_id}");
        last_id = id;
        let top = event.json();
        let k = top[0]["best"].as_u64().expect("a best");
        assert!(k > seen, "states only move forward: {k} after {seen}");
        assert_eq!(top, top_after(k, 5), "the top after post {k}");
        seen = k;
    }
    poster.join().expect("poster");
    server.stop();
}

/// Kill -9 at random moments while a client posts in sequence (each post after the one before
/// was acknowledged) and a subscriber reads `/top?n=1`: after every restart, the post of every
/// score an event showed is there. A subscriber that reconnects with `Last-Event-ID` gets the
/// current answer at once when it is newer, and never one older than its id.
#[test]
fn under_kill_9_no_event_shows_a_write_the_restart_lost() {
    let seed = seed("live_kill_9");
    let mut rng = StdRng::seed_from_u64(seed);
    let data = tempfile::tempdir().expect("tempdir");
    let launch = Launch::new(&scoreboard_dir(), data.path()).flag("--checkpoint-interval", "8192");
    let next_score = Arc::new(AtomicU64::new(1));
    let mut shown_max = 0;
    let mut last_id: Option<u64> = None;
    let mut events_total = 0;
    let cycles = 12 * scale();
    for cycle in 0..cycles {
        let context = format!("cycle {cycle} (seed {seed})");
        let mut server = launch.start();
        let mut client = server.client();
        if shown_max > 0 {
            let found = client.get(&format!("/players/{}", player(shown_max)));
            assert_eq!(
                found.status, 200,
                "{context}: an event showed {shown_max}, the restart lost it"
            );
        }
        let health = client.get("/_pure/health").json();
        let durable = health["durable_lsn"].as_u64().expect("durable_lsn");
        let top = client.get("/top?n=1").json();
        let mut events = Events::open(server.address, "/top?n=1", last_id).expect("subscribed");
        // At once if newer than the client's id, else only at the next change.
        match last_id {
            Some(id) if durable <= id => assert_eq!(durable, id, "{context}: never older"),
            _ => {
                let event = events.next().expect("read").expect("the current answer");
                assert_eq!(event.id, Some(durable), "{context}");
                assert_eq!(event.json(), top, "{context}");
                last_id = event.id;
                events_total += 1;
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let poster = {
            let (stop, next_score, address) = (stop.clone(), next_score.clone(), server.address);
            std::thread::spawn(move || {
                let mut client = Client::connect(address);
                while !stop.load(Relaxed) {
                    let i = next_score.fetch_add(1, Relaxed);
                    let body = json!({"player": player(i), "score": i});
                    let body = serde_json::to_vec(&body).expect("json");
                    match client.request("POST", "/scores", Some(&body)) {
                        Ok(answer) if answer.status == 200 => {}
                        // Killed: this post and any after it may or may not be there.
                        _ => return,
                    }
                }
            })
        };
        let reader = {
            let (start_id, context) = (last_id, context.clone());
            std::thread::spawn(move || {
                let (mut shown, mut last, mut count) = (0, start_id, 0);
                // Until the kill cuts the stream.
                while let Ok(Some(event)) = events.next() {
                    let id = event.id.expect("an id");
                    assert!(last.is_none_or(|last| id > last), "{context}: ids rise");
                    last = Some(id);
                    let best = event.json()[0]["best"].as_u64().expect("a best");
                    assert!(best > shown, "{context}: {best} after {shown}");
                    shown = best;
                    count += 1;
                }
                (shown, last, count)
            })
        };
        std::thread::sleep(Duration::from_millis(rng.random_range(30..300)));
        server.signal(libc::SIGKILL);
        server.wait();
        stop.store(true, Relaxed);
        poster.join().expect("poster");
        let (shown, last, count) = reader.join().expect("reader");
        shown_max = shown_max.max(shown);
        last_id = last;
        events_total += count;
    }
    let server = launch.start();
    if shown_max > 0 {
        let found = server
            .client()
            .get(&format!("/players/{}", player(shown_max)));
        assert_eq!(found.status, 200, "after the last cycle: {shown_max} lost");
    }
    eprintln!("live_kill_9: {cycles} cycles, {events_total} events, the last showing {shown_max}");
    assert!(events_total > cycles as u64, "events were sent");
}

/// A subscriber that stops reading is not sent every state: the stream computes an event only
/// when hyper has room for it, so the states it could not take are passed over (counted), and
/// when it reads again it catches up at once with the newest answer.
#[test]
fn a_slow_subscriber_is_coalesced_to_the_newest_answer() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&scoreboard_dir(), data.path()).start();
    // A receive buffer of a few dozen events. (Smaller than loopback's 64 KiB segments, it
    // stalls TCP itself: the sender waits for a window a segment wide, probing at intervals
    // that double up to a minute.)
    let socket =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    socket.set_recv_buffer_size(256 << 10).expect("SO_RCVBUF");
    socket.connect(&server.address.into()).expect("connect");
    let path = "/top?n=100";
    let mut events = Events::open_on(socket.into(), server.address, path, None).expect("open");
    assert_eq!(
        events.next().expect("read").expect("first").json(),
        json!([])
    );

    // Long names: an event of the top 100 is about 9 KB.
    let posts = 2000u64;
    let name = |i: u64| format!("{i:08}{}", "x".repeat(56));
    let next = Arc::new(AtomicU64::new(1));
    let posters: Vec<_> = (0..4)
        .map(|_| {
            let (next, address) = (next.clone(), server.address);
            std::thread::spawn(move || {
                let mut client = Client::connect(address);
                loop {
                    let i = next.fetch_add(1, Relaxed);
                    if i > posts {
                        return;
                    }
                    let answer = client.post("/scores", &json!({"player": name(i), "score": i}));
                    assert_eq!(answer.status, 200, "{}", answer.text());
                }
            })
        })
        .collect();
    for poster in posters {
        poster.join().expect("poster");
    }
    let all_events_bytes: usize = (1..=posts)
        .map(|k| {
            let top: Vec<Value> = (k.saturating_sub(100) + 1..=k)
                .rev()
                .map(|i| json!({"player": name(i), "best": i}))
                .collect();
            json!(top).to_string().len()
        })
        .sum();
    // Now read until the newest state.
    let mut read = 0;
    loop {
        let event = events.next().expect("read").expect("an event");
        read += 1;
        if event.json()[0]["best"] == json!(posts) {
            break;
        }
    }
    let text = metrics(server.address);
    let coalesced = metric_value(&text, "pure_live_events_coalesced_total");
    eprintln!(
        "slow subscriber: {read} events read ({} bytes) for {posts} posts (all of them: {} \
         bytes); {coalesced} publications passed over",
        events.bytes_read, all_events_bytes
    );
    assert!(coalesced > 0.0, "publications were passed over");
    assert!(
        events.bytes_read < all_events_bytes / 2,
        "the stream did not queue every state: {} of {all_events_bytes} bytes",
        events.bytes_read
    );
    assert!((read as u64) < posts / 2, "{read} events for {posts} posts");
    server.stop();
}

#[test]
fn a_subscription_runs_again_only_for_writes_to_what_it_read() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("live"), data.path()).start();
    let mut client = server.client();
    let mut counter = Events::open(server.address, "/counters/a", None).expect("subscribed");
    assert_eq!(
        counter.next().expect("read").expect("first").json(),
        json!(0)
    );
    let runs = |name: &str| metric_value(&metrics(server.address), name);
    assert_eq!(runs("pure_live_runs_total"), 1.0);

    // Writes to notes only: the counter's subscription looks, and does not run.
    for id in 0..20 {
        let answer = client.post(&format!("/notes/{id}"), &json!({"text": "hello"}));
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
    let answer = client.post("/counters/a", &json!(null));
    assert_eq!(answer.json(), json!(1));
    let event = counter.next().expect("read").expect("an event");
    assert_eq!(event.json(), json!(1));
    assert_eq!(
        runs("pure_live_runs_total"),
        2.0,
        "run once at the start and once for the counter's write, never for the notes"
    );
    // Each of the twenty groups that wrote notes alone was looked at and skipped, or passed
    // over for a newer one (at most an event every --live-interval-ms): never run.
    assert_eq!(
        runs("pure_live_runs_skipped_total") + runs("pure_live_events_coalesced_total"),
        20.0
    );

    // A run that fails sends its error as a `failure` event, and the stream goes on.
    let mut fails = Events::open(server.address, "/fails/b", None).expect("subscribed");
    assert_eq!(fails.next().expect("read").expect("first").json(), json!(0));
    for n in 1..=4 {
        client.post("/counters/b", &json!(null));
        let event = fails.next().expect("read").expect("an event");
        if n <= 2 {
            assert_eq!((event.name.as_deref(), event.json()), (None, json!(n)));
        } else {
            assert_eq!(event.name.as_deref(), Some("failure"));
            assert_eq!(
                event.json(),
                json!({"error": format!("too big: {n}"), "status": 409})
            );
        }
    }
    // A first run that fails is the route's answer, not a stream.
    let refused = Events::open(server.address, "/notes/missing", None)
        .err()
        .expect("not a stream");
    assert_eq!(refused.status, 404);
    assert_eq!(refused.json()["error"], json!("no such note"));
    // A write route is never a stream.
    let mut raw = Client::connect(server.address);
    let answer = raw
        .exchange(
            format!(
                "POST /counters/c HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\
                 Content-Length: 0\r\n\r\n",
                server.address
            )
            .as_bytes(),
        )
        .expect("answered");
    assert_eq!(answer.json(), json!(1));
    server.stop();
}

/// A reload makes open streams run the new version's handler at once; a version without the
/// route ends them, saying why. A stop ends every stream cleanly (its last chunk).
#[test]
fn streams_follow_a_reload_and_end_at_a_stop() {
    let app = tempfile::tempdir().expect("tempdir");
    for file in ["app.json", "live.rhai"] {
        std::fs::copy(test_app_dir("live").join(file), app.path().join(file)).expect("copy");
    }
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(app.path(), data.path()).start();
    let mut client = server.client();
    client.post("/counters/a", &json!(null));
    let mut events = Events::open(server.address, "/counters/a", None).expect("subscribed");
    assert_eq!(
        events.next().expect("read").expect("first").json(),
        json!(1)
    );
    let mut other = Events::open(server.address, "/notes/1", None);
    assert_eq!(other.as_ref().err().map(|r| r.status), Some(404));
    client.post("/notes/1", &json!({"text": "kept"}));
    other = Events::open(server.address, "/notes/1", None);
    let mut notes = other.expect("subscribed");
    assert_eq!(
        notes.next().expect("read").expect("first").json(),
        json!("kept")
    );

    let script = app.path().join("live.rhai");
    let text = std::fs::read_to_string(&script).expect("script");
    let changed = text.replace(
        "if row == () { 0 } else { row.n }",
        "#{ count: if row == () { 0 } else { row.n } }",
    );
    assert_ne!(changed, text);
    std::fs::write(&script, changed).expect("write");
    server.signal(libc::SIGHUP);
    let event = events
        .next()
        .expect("read")
        .expect("the new version's answer");
    assert_eq!(event.json(), json!({"count": 1}), "no write needed");

    // A version without GET /notes/{id}: that stream ends with why.
    let manifest = app.path().join("app.json");
    let text = std::fs::read_to_string(&manifest).expect("manifest");
    let changed = text.replace("\"GET /notes/{id}\": \"get_note\",", "");
    assert_ne!(changed, text);
    std::fs::write(&manifest, changed).expect("write");
    server.signal(libc::SIGHUP);
    let last = notes.next().expect("read").expect("the last event");
    assert_eq!(last.name.as_deref(), Some("failure"));
    assert_eq!(last.json()["status"], json!(404), "{}", last.data);
    assert_eq!(notes.next().expect("a clean end"), None);

    // A stop ends the stream with its last chunk, and the server exits cleanly.
    let ending = std::thread::spawn(move || events.next().expect("a clean end"));
    server.stop();
    assert_eq!(ending.join().expect("reader"), None);
}

#[test]
fn subscriptions_are_capped() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("live"), data.path())
        .flag("--max-subscriptions", "2")
        .start();
    let first = Events::open(server.address, "/counters/a", None).expect("one");
    let _second = Events::open(server.address, "/counters/b", None).expect("two");
    let refused = Events::open(server.address, "/counters/c", None)
        .err()
        .expect("the cap");
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert!(refused.json()["error"]
        .as_str()
        .expect("text")
        .contains("--max-subscriptions"));
    // A plain GET is not a subscription.
    assert_eq!(server.client().get("/counters/c").json(), json!(0));
    drop(first);
    // The server finds the closed stream when a write to it fails: after a change or two (or
    // a heartbeat).
    let mut client = server.client();
    wait_until("the closed stream to be counted out", || {
        client.post("/counters/a", &json!(null));
        metric_value(&metrics(server.address), "pure_live_subscriptions_open") < 2.0
    });
    Events::open(server.address, "/counters/c", None).expect("room again");
    let text = metrics(server.address);
    assert_eq!(
        metric_value(&text, "pure_live_subscriptions_refused_total"),
        1.0
    );
    server.stop();
}

/// Subscribers of one query share its runs: after a write, one run answers them all. A handler
/// that reads the request's head (here its peer) runs for each.
#[test]
fn subscribers_of_one_query_share_its_runs() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("live"), data.path()).start();
    let value = |name: &str| metric_value(&metrics(server.address), name);
    let mut shared: Vec<Events> = (0..10)
        .map(|_| Events::open(server.address, "/counters/s", None).expect("subscribed"))
        .collect();
    let mut own: Vec<Events> = (0..5)
        .map(|_| Events::open(server.address, "/counters/s/seen", None).expect("subscribed"))
        .collect();
    for events in shared.iter_mut().chain(own.iter_mut()) {
        events.next().expect("read").expect("the first answer");
    }
    let (runs, taken) = (
        value("pure_live_runs_total"),
        value("pure_live_runs_shared_total"),
    );
    server.client().post("/counters/s", &json!(null));
    for events in &mut shared {
        assert_eq!(
            events.next().expect("read").expect("an event").json(),
            json!(1)
        );
    }
    for events in &mut own {
        assert_eq!(
            events.next().expect("read").expect("an event").json()["n"],
            json!(1)
        );
    }
    assert_eq!(
        value("pure_live_runs_total") - runs,
        1.0 + 5.0,
        "one run for the ten that share, one for each of the five that read their head"
    );
    assert_eq!(value("pure_live_runs_shared_total") - taken, 9.0);
    server.stop();
}

/// A run obeys the handler's limits as any read does: once the data makes the handler run past
/// its operations limit, the stream sends the 500 as a `failure` event and goes on.
#[test]
fn a_run_that_meets_a_limit_is_a_failure_event() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("live"), data.path())
        .flag("--live-interval-ms", "0")
        .start();
    let mut client = server.client();
    let mut events = Events::open(server.address, "/spin/x", None).expect("subscribed");
    assert_eq!(
        events.next().expect("read").expect("first").json(),
        json!(0)
    );
    client.post("/counters/x", &json!(null));
    assert_eq!(
        events.next().expect("read").expect("an event").json(),
        json!(100000)
    );
    // Twenty: two million loop steps, past the million operations a call may take.
    for _ in 0..19 {
        client.post("/counters/x", &json!(null));
    }
    let failure = loop {
        let event = events.next().expect("read").expect("an event");
        if event.name.is_some() {
            break event;
        }
    };
    assert_eq!(failure.name.as_deref(), Some("failure"));
    let body = failure.json();
    assert_eq!(body["status"], json!(500), "{body}");
    assert!(
        body["error"].as_str().is_some_and(|e| e.contains("limit")),
        "{body}"
    );
    server.stop();
}
