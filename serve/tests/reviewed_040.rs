//! Review of issue 40's changes over HTTP: guards on the HTTP thread, secrets in answers and
//! log lines, one shape for error bodies, and transcripts with headers.
//!
//! A helper told to find faults wrote these; the ones it found (fixed since) are named for what
//! now holds: a guard's respond keeps its headers, secrets stay out of a guard's 500, of a cut log
//! line and in their escaped forms, dropped answers in try blocks and helpers are refused, the
//! brace heuristic follows multi-line conditions and tabs, and transcripts read comments and
//! absent headers as written.

#[allow(dead_code)]
#[path = "e2e/harness.rs"]
mod harness;

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Output;

use harness::{binary, read_response, Client, Launch, Response, Server, WAIT_MAX};

const KEY: &str = "sk-live-0123456789";

const MANIFEST: &str = r#"{
  "name": "guarded",
  "secrets": ["API_KEY"],
  "guard": "by_key",
  "tables": { "items": ["n"] },
  "routes": {
    "GET /items/{id}": "get_item",
    "POST /items/{id}": "put_item",
    "GET /challenge": { "handler": "get_item", "guard": "challenges" },
    "GET /mistake": { "handler": "get_item", "guard": "answers_a_map" },
    "GET /runaway": { "handler": "get_item", "guard": "runs_away" },
    "GET /unavailable": { "handler": "get_item", "guard": "throws_503" },
    "GET /open": { "handler": "get_item", "guard": null }
  }
}"#;

const SCRIPT: &str = r#"
fn by_key(request) {
    let key = request.headers["x-api-key"];
    if key == () { throw #{ status: 401, error: "send x-api-key" }; }
    key == env("API_KEY")
}
fn challenges(request) {
    respond(401, #{ error: "log in" }, #{ "www-authenticate": "Bearer realm=\"items\"" })
}
fn answers_a_map(request) { #{ expected: env("API_KEY") } }
fn runs_away(request) { let s = "x"; loop { s += s; } }
fn throws_503(request) { throw #{ status: 503, error: "later" }; }
fn get_item(request) { #{ id: request.params.id } }
fn put_item(request) { items.put(request.params.id, #{ n: 1 }); #{ put: request.params.id } }
"#;

/// An app directory of MANIFEST and SCRIPT with a secrets file, and a server on it.
fn start(flags: &[(&str, &str)]) -> (tempfile::TempDir, tempfile::TempDir, Server) {
    let app = tempfile::tempdir().expect("tempdir");
    let data = tempfile::tempdir().expect("tempdir");
    std::fs::write(app.path().join("app.json"), MANIFEST).expect("write");
    std::fs::write(app.path().join("a.rhai"), SCRIPT).expect("write");
    let secrets = app.path().join("secrets.env");
    std::fs::write(&secrets, format!("API_KEY={KEY}\n")).expect("write");
    let mut launch =
        Launch::new(app.path(), data.path()).flag("--secrets", secrets.to_str().expect("utf-8"));
    for (flag, value) in flags {
        launch = launch.flag(flag, value);
    }
    let server = launch.start();
    (app, data, server)
}

fn raw(address: std::net::SocketAddr, bytes: &[u8]) -> Response {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream.set_read_timeout(Some(WAIT_MAX)).expect("timeout");
    stream.write_all(bytes).expect("write");
    read_response(&mut BufReader::new(stream)).expect("a response")
}

/// The status of a HEAD request's answer (a head without the body its content-length gives).
fn head_status(server: &Server, path: &str, headers: &str) -> u16 {
    use std::io::Read;
    let mut stream = TcpStream::connect(server.address).expect("connect");
    stream.set_read_timeout(Some(WAIT_MAX)).expect("timeout");
    write!(
        stream,
        "HEAD {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{headers}\r\n",
        server.address
    )
    .expect("write");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status")
}

fn request(server: &Server, method: &str, path: &str, headers: &str, body: &str) -> Response {
    let text = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        server.address,
        body.len()
    );
    raw(server.address, text.as_bytes())
}

// ---------------------------------------------------------------------------------------------
// Guards.

#[test]
fn guards_hold_for_head_a_runaway_guard_a_thrown_503_and_a_wrong_key() {
    let (_app, _data, server) = start(&[]);
    let key = format!("x-api-key: {KEY}\r\n");
    assert_eq!(request(&server, "GET", "/items/1", &key, "").status, 200);
    // HEAD runs the GET route's guard.
    assert_eq!(head_status(&server, "/items/1", ""), 401);
    assert_eq!(head_status(&server, "/items/1", &key), 200);
    // A wrong key, a write: 403 before the body is read.
    let refused = request(&server, "POST", "/items/1", "x-api-key: nope\r\n", "{}");
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert_eq!(refused.json()["status"], 403);
    // A guard that runs into a limit, or throws a 5xx, lets nothing through.
    let runaway = request(&server, "GET", "/runaway", &key, "");
    assert_eq!(runaway.status, 500, "{}", runaway.text());
    assert_eq!(runaway.json()["status"], 500);
    let unavailable = request(&server, "GET", "/unavailable", &key, "");
    assert_eq!(unavailable.status, 503, "{}", unavailable.text());
    // OPTIONS runs no handler: the methods, no guard needed.
    let options = request(&server, "OPTIONS", "/items/1", "", "");
    assert_eq!(options.status, 204);
    assert_eq!(request(&server, "GET", "/open", "", "").status, 200);
    server.stop();
}

#[test]
fn a_guards_respond_401_keeps_its_www_authenticate_header() {
    let (_app, _data, server) = start(&[]);
    let answer = request(&server, "GET", "/challenge", "", "");
    assert_eq!(answer.status, 401, "{}", answer.text());
    assert_eq!(
        answer.header("www-authenticate"),
        Some("Bearer realm=\"items\""),
        "the guard's respond(401, body, headers) lost its headers: {:?}",
        answer.headers
    );
    server.stop();
}

#[test]
fn a_guards_mistake_keeps_the_secret_out_of_its_500_and_its_log_line() {
    let (_app, _data, server) = start(&[]);
    let answer = request(&server, "GET", "/mistake", "", "");
    assert_eq!(answer.status, 500, "{}", answer.text());
    let log = server.wait_for_stderr("answers_a_map");
    let log_line = log
        .lines()
        .find(|l| l.contains("answers_a_map"))
        .unwrap_or_default();
    assert!(
        !answer.text().contains(KEY) && !log.contains(KEY),
        "the answer: {}\nthe log line: {log_line}",
        answer.text()
    );
    // The line names the guard that failed, not the handler it guards.
    assert!(
        log_line.contains(" ERROR guarded answers_a_map "),
        "{log_line}"
    );
}

#[test]
fn a_reload_while_the_body_arrives_has_the_new_guard_decide() {
    // Version 1: POST /items/{id} open to all. The head arrives, then a reload puts a guard
    // before the route, then the body: the new guard decides.
    let app = tempfile::tempdir().expect("tempdir");
    let data = tempfile::tempdir().expect("tempdir");
    let open = MANIFEST.replace(r#""guard": "by_key","#, "");
    std::fs::write(app.path().join("app.json"), &open).expect("write");
    std::fs::write(app.path().join("a.rhai"), SCRIPT).expect("write");
    let secrets = app.path().join("secrets.env");
    std::fs::write(&secrets, format!("API_KEY={KEY}\n")).expect("write");
    let server = Launch::new(app.path(), data.path())
        .flag("--secrets", secrets.to_str().expect("utf-8"))
        .flag("--admin-listen", "127.0.0.1:0")
        .start();
    let admin = server.admin_address();
    assert_eq!(request(&server, "POST", "/items/1", "", "{}").status, 200);
    let mut stream = TcpStream::connect(server.address).expect("connect");
    stream.set_read_timeout(Some(WAIT_MAX)).expect("timeout");
    write!(
        stream,
        "POST /items/2 HTTP/1.1\r\nHost: {}\r\nContent-Length: 2\r\n\r\n",
        server.address
    )
    .expect("the head");
    std::fs::write(app.path().join("app.json"), MANIFEST).expect("write");
    let reload =
        format!("POST /_pure/reload HTTP/1.1\r\nHost: {admin}\r\nContent-Length: 0\r\n\r\n");
    let reloaded = raw(admin, reload.as_bytes());
    assert_eq!(reloaded.status, 200, "{}", reloaded.text());
    stream.write_all(b"{}").expect("the body");
    let answer = read_response(&mut BufReader::new(stream)).expect("an answer");
    assert_eq!(answer.status, 401, "{}", answer.text());
    server.stop();
}

// ---------------------------------------------------------------------------------------------
// One shape for error bodies.

#[test]
fn error_bodies_not_covered_elsewhere_name_their_status() {
    let (_app, _data, server) = start(&[("--admin-listen", "127.0.0.1:0")]);
    let admin = server.admin_address();
    let address = server.address;
    let host = format!("Host: {address}\r\n");
    let cases: Vec<(u16, Vec<u8>)> = vec![
        (
            501,
            format!(
                "POST /items/1 HTTP/1.1\r\n{host}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"
            )
            .into_bytes(),
        ),
        (400, b"GET /items/1 HTTP/1.1\r\n\r\n".to_vec()),
        (
            400,
            format!("GET /items/%ff HTTP/1.1\r\n{host}\r\n").into_bytes(),
        ),
        (
            400,
            format!("GET /open?q=%ff HTTP/1.1\r\n{host}\r\n").into_bytes(),
        ),
        (400, b"GARBAGE\r\n\r\n".to_vec()),
        (505, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec()),
    ];
    for (status, bytes) in cases {
        let answer = raw(address, &bytes);
        assert_eq!(answer.status, status, "{}", answer.text());
        assert_eq!(answer.json()["status"], status, "{}", answer.text());
        assert!(answer.json()["error"].is_string(), "{}", answer.text());
    }
    for (status, text) in [
        (
            404,
            format!("GET /nowhere HTTP/1.1\r\nHost: {admin}\r\n\r\n"),
        ),
        (
            405,
            format!("GET /_pure/reload HTTP/1.1\r\nHost: {admin}\r\n\r\n"),
        ),
    ] {
        let answer = raw(admin, text.as_bytes());
        assert_eq!(answer.status, status, "{}", answer.text());
        assert_eq!(answer.json()["status"], status, "{}", answer.text());
    }
    let mut client = Client::connect(address);
    let malformed = client
        .request("POST", "/items/1", Some(b"{\"a\": 1, \"a\": 2}"))
        .expect("answered");
    // The guard answers first (no key): still one shape.
    assert_eq!(malformed.status, 401);
    assert_eq!(malformed.json()["status"], 401);
    server.stop();
}

// ---------------------------------------------------------------------------------------------
// Transcripts.

fn run_test(app: &Path, update: bool) -> Output {
    let mut command = std::process::Command::new(binary());
    command.arg("test").arg(app);
    if update {
        command.arg("--update");
    }
    command.output().expect("run pure-serve test")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The app above with one transcript, `transcript`, and its secrets beside it.
fn app_with(transcript: &str) -> tempfile::TempDir {
    let app = tempfile::tempdir().expect("tempdir");
    std::fs::write(app.path().join("app.json"), MANIFEST).expect("write");
    std::fs::write(app.path().join("a.rhai"), SCRIPT).expect("write");
    std::fs::create_dir(app.path().join("tests")).expect("tests/");
    std::fs::write(
        app.path().join("tests/secrets.test"),
        format!("API_KEY={KEY}\n"),
    )
    .expect("write");
    std::fs::write(app.path().join("tests/case.transcript"), transcript).expect("write");
    app
}

#[test]
fn transcripts_take_colons_in_bodies_empty_header_values_and_comments() {
    let transcript = format!(
        "#! --secrets secrets.test
# a comment: with a colon
POST /items/a {{\"x\": \"y: z\"}}
x-api-key: {KEY}
# a comment between a request's headers and its answer: fine
x-empty:
x-request-id: given-1
200 {{\"put\": \"a\"}}
x-request-id: given-1
GET /open
x-request-id: given-1
200 {{\"id\": null}}
x-request-id: given-1
"
    );
    let app = app_with(&transcript);
    let output = run_test(app.path(), false);
    assert!(output.status.success(), "{}", text(&output));
}

#[test]
fn a_comment_right_after_an_answer_is_not_an_answer_header() {
    // `#` starts a comment line: one without a space after it, right under an answer, is
    // read as a header the answer must have ("#todo").
    let transcript =
        "#! --secrets secrets.test\nGET /open\n200 {\"id\": null}\n#todo: more cases\n";
    let app = app_with(transcript);
    let output = run_test(app.path(), false);
    assert!(output.status.success(), "{}", text(&output));
}

#[test]
fn update_writes_an_absent_header_that_then_matches() {
    // The transcript lists a header the answer does not have; --update writes `location: `,
    // and the next run fails on it again: --update never gets the transcript to pass.
    let transcript = "#! --secrets secrets.test\nGET /open\n000\nlocation: /somewhere\n";
    let app = app_with(transcript);
    let output = run_test(app.path(), true);
    assert!(output.status.success(), "{}", text(&output));
    let written = std::fs::read_to_string(app.path().join("tests/case.transcript")).expect("read");
    let output = run_test(app.path(), false);
    assert!(
        output.status.success(),
        "after --update wrote:\n{written}\nthe run still fails:\n{}",
        text(&output)
    );
}

#[test]
fn the_bundled_tickets_transcript_passes_and_its_guard_reads_the_secret() {
    let output = run_test(&harness::repo_path("apps/tickets"), false);
    assert!(output.status.success(), "{}", text(&output));
}
