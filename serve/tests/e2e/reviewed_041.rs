//! Review 041: faults of live queries and of the schedule's clock, over real processes.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{test_app_dir, Client, Events, Launch};

/// Opens an event stream with extra header lines; the raw socket, its response head sent.
fn open_raw(address: SocketAddr, path: &str, extra: &str) -> TcpStream {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let head = format!(
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nAccept: text/event-stream\r\n{extra}\r\n"
    );
    stream.write_all(head.as_bytes()).expect("send");
    stream
}

/// Reads what arrives on `stream` for `time` (or until `until` holds of it), appended to `seen`.
fn read_for(
    stream: &mut TcpStream,
    seen: &mut Vec<u8>,
    time: Duration,
    until: impl Fn(&[u8]) -> bool,
) {
    let deadline = Instant::now() + time;
    let mut buffer = [0u8; 4096];
    while Instant::now() < deadline && !until(seen) {
        match stream.read(&mut buffer) {
            Ok(0) => return,
            Ok(n) => seen.extend_from_slice(&buffer[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => panic!("read: {e}"),
        }
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// The guide: "A stream silent for 15 s (`--live-heartbeat-ms`) sends a comment line, so
/// proxies keep it and a client that is gone is found." A stream whose runs are all skipped
/// (writes go to a table it does not read, five times a second) was silent for good: the
/// heartbeat's timer started again at each publication.
#[test]
fn a_silent_stream_sends_a_heartbeat_even_while_other_tables_are_written() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("live"), data.path())
        .flag("--live-heartbeat-ms", "1000")
        .start();
    let mut stream = open_raw(server.address, "/counters/a", "");
    let mut seen = Vec::new();
    read_for(&mut stream, &mut seen, Duration::from_secs(5), |s| {
        contains(s, "data: 0")
    });
    assert!(
        contains(&seen, "data: 0"),
        "the first event: {:?}",
        String::from_utf8_lossy(&seen)
    );
    seen.clear();
    let started = Instant::now();
    let mut client = server.client();
    let mut n = 0;
    while started.elapsed() < Duration::from_secs(20) && !contains(&seen, "\r\n:\n\n") {
        n += 1;
        let answer = client.post(&format!("/notes/{n}"), &json!({"text": "x"}));
        assert_eq!(answer.status, 200);
        read_for(&mut stream, &mut seen, Duration::from_millis(200), |s| {
            contains(s, "\r\n:\n\n")
        });
    }
    assert!(
        contains(&seen, "\r\n:\n\n"),
        "no heartbeat in {:?} of silence (writes to notes five times a second); received {:?}",
        started.elapsed(),
        String::from_utf8_lossy(&seen)
    );
    server.stop();
}

/// The guide: "A stream sends at most one event every --live-interval-ms". The first event
/// starts no interval: the second comes as soon as the next write is durable.
#[test]
fn the_event_after_the_first_waits_for_the_live_interval() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("live"), data.path())
        .flag("--live-interval-ms", "3000")
        .start();
    let mut events = Events::open(server.address, "/counters/a", None).expect("subscribed");
    let first = events.next().expect("read").expect("first");
    let at = Instant::now();
    assert_eq!(first.json(), json!(0));
    server.client().post("/counters/a", &json!(null));
    let second = events.next().expect("read").expect("second");
    let between = at.elapsed();
    assert_eq!(second.json(), json!(1));
    assert!(
        between >= Duration::from_millis(2900),
        "two events {between:?} apart under --live-interval-ms 3000"
    );
    server.stop();
}

/// The guide: "It never gets a state older than its id", and ids only rise. A stream opened
/// with a Last-Event-ID past the state's that a reload ends gets a last event whose id is the
/// LSN of its run, below the id it gave.
#[test]
fn the_last_event_of_a_stream_a_reload_ends_has_no_id_below_last_event_id() {
    let app = tempfile::tempdir().expect("tempdir");
    for file in ["app.json", "live.rhai"] {
        std::fs::copy(test_app_dir("live").join(file), app.path().join(file)).expect("copy");
    }
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(app.path(), data.path()).start();
    let given = 1_000_000;
    let mut events = Events::open(server.address, "/counters/a", Some(given)).expect("subscribed");
    let manifest = app.path().join("app.json");
    let text = std::fs::read_to_string(&manifest).expect("manifest");
    let changed = text.replace("\"GET /counters/{name}\": \"counter\",", "");
    assert_ne!(changed, text);
    std::fs::write(&manifest, changed).expect("write");
    server.signal(libc::SIGHUP);
    let last = events.next().expect("read").expect("the last event");
    assert_eq!(last.name.as_deref(), Some("failure"), "{last:?}");
    let id = last.id.expect("an id");
    assert!(
        id >= given,
        "an event with id {id} after Last-Event-ID {given}: {last:?}"
    );
    server.stop();
}

/// The guide: shared runs never give a subscriber another subscriber's private answer. Under
/// `--error-details none` a failed run's event names a request id; a subscriber sharing the
/// query is sent the id of the subscriber whose run it took (its x-request-id, which may be
/// anything the client chose), not its own.
#[test]
fn a_shared_failure_event_names_the_subscribers_own_request_id() {
    let app = tempfile::tempdir().expect("tempdir");
    for file in ["app.json", "live.rhai"] {
        std::fs::copy(test_app_dir("live").join(file), app.path().join(file)).expect("copy");
    }
    let manifest = app.path().join("app.json");
    let text = std::fs::read_to_string(&manifest).expect("manifest");
    let changed = text.replace(
        "\"GET /fails/{name}\": \"fails_when_big\",",
        "\"GET /fails/{name}\": \"fails_when_big\", \"GET /boom/{name}\": \"boom\",",
    );
    assert_ne!(changed, text);
    std::fs::write(&manifest, changed).expect("write");
    let script = app.path().join("live.rhai");
    let mut text = std::fs::read_to_string(&script).expect("script");
    text.push_str(
        "\nfn boom(request) {\n    let row = counters.get(request.params.name);\n    \
         let n = if row == () { 0 } else { row.n };\n    10 / (1 - n)\n}\n",
    );
    std::fs::write(&script, text).expect("write");
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(app.path(), data.path())
        .flag("--error-details", "none")
        .start();
    let ids = ["secret-of-alice-0001", "secret-of-bob-00002"];
    let mut streams: Vec<(TcpStream, Vec<u8>)> = ids
        .iter()
        .map(|id| {
            let mut stream = open_raw(
                server.address,
                "/boom/s",
                &format!("x-request-id: {id}\r\n"),
            );
            let mut seen = Vec::new();
            read_for(&mut stream, &mut seen, Duration::from_secs(5), |s| {
                contains(s, "data: 10")
            });
            assert!(
                contains(&seen, "data: 10"),
                "{:?}",
                String::from_utf8_lossy(&seen)
            );
            (stream, seen)
        })
        .collect();
    let answer = Client::connect(server.address).post("/counters/s", &json!(null));
    assert_eq!(answer.status, 200);
    for (id, (stream, seen)) in ids.iter().zip(streams.iter_mut()) {
        seen.clear();
        read_for(stream, seen, Duration::from_secs(5), |s| {
            contains(s, "event: failure") && contains(s, "}\n\n")
        });
        let text = String::from_utf8_lossy(seen).into_owned();
        assert!(text.contains("event: failure"), "{text:?}");
        let other = ids.iter().find(|other| *other != id).expect("two");
        assert!(
            !text.contains(other),
            "the subscriber {id} was sent the other subscriber's request id: {text:?}"
        );
    }
    server.stop();
}

/// `POST /_pure/clock?advance=MS` takes any MS of 0 or more; one that passes the last time
/// wraps the clock into the distant past (and panics in a checked build) instead of being
/// refused.
#[test]
fn a_huge_advance_is_refused_and_leaves_the_clock_where_it_was() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("timers"), data.path())
        .flag("--fixed-now", "1000000")
        .flag("--admin-listen", "127.0.0.1:0")
        .start();
    let admin = server.admin_address();
    let huge =
        Client::connect(admin).request("POST", &format!("/_pure/clock?advance={}", i64::MAX), None);
    let now = Client::connect(admin)
        .request("POST", "/_pure/clock?advance=0", None)
        .expect("answered")
        .json();
    assert!(
        now["now"].as_i64().is_some_and(|now| now >= 1_000_000),
        "after advance={} (answered {:?}), the clock shows {now}",
        i64::MAX,
        huge.map(|r| (r.status, r.text()))
    );
    server.stop();
}
