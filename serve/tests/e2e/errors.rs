//! Every error status pure-serve promises, each with a JSON body that names the problem.

use std::io::{BufReader, Write};
use std::net::TcpStream;

use serde_json::json;

use crate::harness::{
    read_response, scoreboard_dir, test_app_dir, Launch, Response, Server, WAIT_MAX,
};

fn start_scoreboard(flags: &[(&str, &str)]) -> (tempfile::TempDir, Server) {
    let data = tempfile::tempdir().expect("tempdir");
    let mut launch = Launch::new(&scoreboard_dir(), data.path());
    for (flag, value) in flags {
        launch = launch.flag(flag, value);
    }
    (data, launch.start())
}

/// One shape for every error: `"error"`, a sentence, and `"status"`, the answer's own.
fn assert_error(response: &Response, status: u16) -> String {
    assert_eq!(response.status, status, "{}", response.text());
    assert_eq!(response.header("content-type"), Some("application/json"));
    assert_eq!(
        response.json()["status"],
        json!(status),
        "the body names its status: {}",
        response.text()
    );
    let message = response.json()["error"]
        .as_str()
        .expect("an error string")
        .to_string();
    assert!(!message.is_empty());
    message
}

/// Writes raw bytes on a fresh connection and reads the one response.
fn raw(server: &Server, bytes: &[u8]) -> Response {
    let mut stream = TcpStream::connect(server.address).expect("connect");
    stream.set_read_timeout(Some(WAIT_MAX)).expect("timeout");
    stream.write_all(bytes).expect("write");
    read_response(&mut BufReader::new(stream)).expect("a response")
}

#[test]
fn unknown_routes_wrong_methods_and_bad_json() {
    let (_data, server) = start_scoreboard(&[]);
    let mut client = server.client();
    let message = assert_error(&client.get("/nowhere"), 404);
    assert!(message.contains("/nowhere"), "{message}");
    assert_error(&client.get("/players"), 404);
    assert_error(&client.get("/_pure/nothing"), 404);

    let response = client.get("/scores");
    assert_error(&response, 405);
    assert_eq!(response.header("allow"), Some("POST, OPTIONS"));
    let response = client
        .request("DELETE", "/players/x", None)
        .expect("answered");
    assert_error(&response, 405);
    assert_eq!(response.header("allow"), Some("GET, HEAD, OPTIONS"));
    assert_error(
        &client
            .request("POST", "/_pure/health", Some(b"{}"))
            .expect("answered"),
        405,
    );

    for body in [
        &b"{"[..],
        b"{\"player\": \"x\", \"score\": 1",
        b"nope",
        b"{\"a\":1}}",
        b"\xff\xfe",
    ] {
        let response = client
            .request("POST", "/scores", Some(body))
            .expect("answered");
        let message = assert_error(&response, 400);
        assert!(message.contains("JSON"), "{message}");
    }
    let deep = format!("{}1{}", "[".repeat(1000), "]".repeat(1000));
    assert_error(
        &client
            .request("POST", "/scores", Some(deep.as_bytes()))
            .expect("answered"),
        400,
    );
    assert_error(&client.get("/players/%zz"), 400);
    assert_error(&client.get("/top?n=%zz"), 400);
    // The connection survived every error above.
    assert_eq!(client.get("/top").json(), json!([]));
    server.stop();
}

#[test]
fn bodies_over_the_limit_get_413_before_being_read() {
    let (_data, server) = start_scoreboard(&[("--max-body", "1000")]);
    // The head alone announces 10 MB; the answer comes without a byte of body sent.
    let response = raw(
        &server,
        b"POST /scores HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10000000\r\n\r\n",
    );
    let message = assert_error(&response, 413);
    assert!(message.contains("1000"), "{message}");
    assert_eq!(response.header("connection"), Some("close"));

    // A chunked body has no length up front: refused once it passes the limit.
    let mut chunked =
        b"POST /scores HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..3 {
        chunked.extend_from_slice(b"200\r\n");
        chunked.extend_from_slice(&[b' '; 0x200]);
        chunked.extend_from_slice(b"\r\n");
    }
    assert_error(&raw(&server, &chunked), 413);

    // Just under the limit is fine (and still validated by the app).
    let mut client = server.client();
    let padded = format!("{{\"player\": \"x\", \"score\": 1{}}}", " ".repeat(900));
    let response = client
        .request("POST", "/scores", Some(padded.as_bytes()))
        .expect("answered");
    assert_eq!(response.status, 200, "{}", response.text());
    server.stop();
}

#[test]
fn a_body_that_stops_arriving_gets_408() {
    let (_data, server) = start_scoreboard(&[("--body-timeout-ms", "300")]);
    let mut stream = TcpStream::connect(server.address).expect("connect");
    stream.set_read_timeout(Some(WAIT_MAX)).expect("timeout");
    stream
        .write_all(b"POST /scores HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{\"pla")
        .expect("write");
    let response = read_response(&mut BufReader::new(stream)).expect("a response");
    assert_error(&response, 408);
    assert_eq!(server.client().get("/top").json(), json!([]));
    server.stop();
}

#[test]
fn script_bugs_get_500_with_handler_file_line_and_column() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("faulty"), data.path()).start();
    let mut client = server.client();
    let response = client.post("/bug", &json!({}));
    assert_error(&response, 500);
    let body = response.json();
    assert_eq!(body["handler"], "bug", "{body}");
    assert!(
        body["file"]
            .as_str()
            .expect("file")
            .ends_with("faulty.rhai"),
        "{body}"
    );
    assert!(body["line"].as_u64().expect("line") > 0, "{body}");
    assert!(body["column"].as_u64().expect("column") > 0, "{body}");

    let response = client.get("/write-in-read");
    assert_error(&response, 500);
    assert_eq!(
        client.get("/count/w").json(),
        json!({"name": "w", "value": 0})
    );

    let response = client.post("/throw-status", &json!({}));
    assert_eq!(response.status, 409, "{}", response.text());
    assert_eq!(response.json()["error"], "taken");
    server.stop();
}

/// The errors not met above have the one shape too: those of the HTTP layer, of the host and
/// origin checks, of a declared shape, of a limit, and a handler's thrown text or map.
#[test]
fn every_error_has_one_shape() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("faulty"), data.path()).start();
    let mut client = server.client();
    for (path, status) in [
        ("/throw-text", 400),
        ("/throw-map", 400),
        ("/throw-status", 409),
        ("/loop", 500),
    ] {
        let message = assert_error(&client.post(path, &json!({})), status);
        // The map's own error, not the map written out as text.
        assert!(!message.starts_with("#{"), "{path}: {message}");
    }
    let long = format!(
        "GET /{} HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "x".repeat(9000)
    );
    assert_error(&raw(&server, long.as_bytes()), 414);
    let big_head = format!(
        "GET /count/a HTTP/1.1\r\nHost: localhost\r\nx-big: {}\r\n\r\n",
        "y".repeat(40_000)
    );
    assert_error(&raw(&server, big_head.as_bytes()), 431);
    let host = b"GET /count/a HTTP/1.1\r\nHost: evil.example\r\n\r\n";
    assert_error(&raw(&server, host), 421);
    let origin = format!(
        "POST /count/a HTTP/1.1\r\nHost: {}\r\nOrigin: https://evil.example\r\n\
         Content-Length: 2\r\n\r\n{{}}",
        server.address
    );
    assert_error(&raw(&server, origin.as_bytes()), 403);
    server.stop();

    let (_data, server) = start_scoreboard(&[]);
    let response = server
        .client()
        .post("/scores", &json!({"player": "", "score": 1}));
    assert_error(&response, 400);
    server.stop();
}

/// A panic in a read handler is a 500 for that request and the server goes on; a panic in a
/// write handler also poisons the runtime (the state in memory is no longer trusted): health
/// says so, writes get 503, reads go on, and the process exits with 10 after its drain. The
/// restart recovers the durable state, without the panicked write.
#[test]
fn a_panicking_handler_gets_500_and_a_write_panic_exits_10() {
    let data = tempfile::tempdir().expect("tempdir");
    let launch =
        Launch::new(&test_app_dir("faulty"), data.path()).flag("--poison-drain-ms", "1500");
    let mut server = launch.start();
    let mut client = server.client();
    assert_eq!(client.post("/count/a", &json!({})).status, 200);

    let response = client.get("/panic");
    assert_error(&response, 500);
    assert!(
        response.json()["error"]
            .as_str()
            .is_some_and(|e| e.contains("read_panic") && e.contains("panicked")),
        "{}",
        response.text()
    );
    assert_eq!(
        client.get("/count/a").json(),
        json!({"name": "a", "value": 1})
    );
    assert_eq!(client.get("/_pure/health").status, 200);

    let response = client.post("/panic/b", &json!({}));
    assert_error(&response, 500);
    assert!(
        response.json()["error"]
            .as_str()
            .is_some_and(|e| e.contains("write_panic") && e.contains("panicked")),
        "{}",
        response.text()
    );
    let health = client.get("/_pure/health");
    assert_eq!(health.status, 503, "{}", health.text());
    assert_eq!(health.json()["status"], "poisoned");
    assert_eq!(health.json()["reason"], health.json()["poisoned"]);
    assert!(
        health.json()["poisoned"]
            .as_str()
            .is_some_and(|p| p.contains("write_panic")),
        "{}",
        health.text()
    );
    assert_error(&client.post("/count/a", &json!({})), 503);
    assert_eq!(
        client.get("/count/a").json(),
        json!({"name": "a", "value": 1})
    );
    let status = server.wait();
    assert_eq!(status.code(), Some(10), "stderr:\n{}", server.stderr_text());

    let server = launch.start();
    let mut client = server.client();
    assert_eq!(
        client.get("/count/a").json(),
        json!({"name": "a", "value": 1})
    );
    assert_eq!(
        client.get("/count/b").json(),
        json!({"name": "b", "value": 0})
    );
    assert_eq!(client.post("/count/a", &json!({})).status, 200);
    server.stop();
}

#[test]
fn an_app_that_does_not_load_exits_with_status_3() {
    let data = tempfile::tempdir().expect("tempdir");
    let launch = Launch::new(&test_app_dir("broken"), data.path());
    let output = launch.command().output().expect("run pure-serve");
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("broken.rhai"),
        "the error names the file: {stderr}"
    );
}

#[test]
fn health_and_metrics() {
    let (_data, server) = start_scoreboard(&[]);
    let mut client = server.client();
    client.post("/scores", &json!({"player": "a", "score": 1}));
    client.get("/nowhere");
    let health = client.get("/_pure/health");
    assert_eq!(health.status, 200);
    let health = health.json();
    assert_eq!(health["app"], "scoreboard");
    assert!(health["durable_lsn"].as_u64().expect("lsn") > 0, "{health}");
    assert!(health["state_bytes"].is_u64(), "{health}");
    assert!(health["last_checkpoint_error"].is_null(), "{health}");

    let metrics = client.get("/_pure/metrics");
    assert_eq!(metrics.status, 200);
    let text = metrics.text();
    for expected in [
        "pure_http_requests_total{method=\"POST\",route=\"/scores\",status=\"200\"} 1",
        "pure_http_requests_total{method=\"\",route=\"unmatched\",status=\"404\"} 1",
        "pure_http_request_duration_seconds_bucket{method=\"POST\",route=\"/scores\",le=\"+Inf\"} 1",
        "pure_writes_total ",
        "pure_sync_seconds_bucket",
        "pure_group_records_bucket",
        "pure_owner_busy_ratio ",
        "pure_snapshot_age_seconds ",
        "pure_state_bytes ",
        "pure_log_bytes ",
        "pure_checkpoints_total ",
        "pure_checkpoint_failures_total 0",
        "pure_write_queue_depth ",
    ] {
        assert!(text.contains(expected), "metrics lack {expected:?}:\n{text}");
    }
    server.stop();
}
