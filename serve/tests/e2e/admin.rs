//! Operating a server: the built-in endpoints on their own address (`--admin-listen`), a
//! reload asked for over it, and what a 500 tells a client (`--error-details`).

use serde_json::json;

use crate::harness::{test_app_dir, Client, Launch};

const MANIFEST: &str = r#"{ "name": "pinger", "routes": { "GET /ping": "ping" } }"#;

#[test]
fn the_admin_address_serves_health_metrics_and_reload_and_the_app_address_does_not() {
    let app = tempfile::tempdir().expect("tempdir");
    let data = tempfile::tempdir().expect("tempdir");
    std::fs::write(app.path().join("app.json"), MANIFEST).expect("write");
    let script = app.path().join("ping.rhai");
    std::fs::write(&script, "fn ping(request) { #{ pong: 1 } }\n").expect("write");
    let server = Launch::new(app.path(), data.path())
        .flag("--admin-listen", "127.0.0.1:0")
        .start();
    let admin_address = server.admin_address();
    assert_ne!(admin_address, server.address);
    let mut client = server.client();
    let mut admin = Client::connect(admin_address);

    assert_eq!(client.get("/ping").json(), json!({"pong": 1}));
    for path in ["/_pure/health", "/_pure/metrics", "/_pure/reload"] {
        let answer = client.get(path);
        assert_eq!(
            answer.status,
            404,
            "{path} on the app's address: {}",
            answer.text()
        );
        assert_eq!(answer.json()["error"], format!("no route for GET {path}"));
    }

    let health = admin.get("/_pure/health");
    assert_eq!(health.status, 200, "{}", health.text());
    assert_eq!(health.json()["status"], "ok");
    let metrics = admin.get("/_pure/metrics").text();
    assert!(
        metrics.contains(r#"pure_http_requests_total{method="GET",route="/ping",status="200"} 1"#),
        "the admin address counts the app's requests:\n{metrics}"
    );
    let answer = admin.get("/ping");
    assert_eq!(answer.status, 404, "{}", answer.text());
    assert!(
        answer.json()["error"]
            .as_str()
            .unwrap()
            .contains("this is the admin address"),
        "{}",
        answer.text()
    );
    let answer = admin.get("/_pure/reload");
    assert_eq!(answer.status, 405, "a reload is a POST: {}", answer.text());

    std::fs::write(&script, "fn ping(request) { #{ pong: 2 } }\n").expect("write");
    let answer = admin.post("/_pure/reload", &json!({}));
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(
        answer.json(),
        json!({"reloaded": true, "app": "pinger", "routes": 1})
    );
    assert_eq!(client.get("/ping").json(), json!({"pong": 2}));

    std::fs::write(
        &script,
        "fn ping(request) {\n    #{ pong: 3 }\n    nope(1)\n}\n",
    )
    .expect("write");
    let answer = admin.post("/_pure/reload", &json!({}));
    assert_eq!(answer.status, 422, "{}", answer.text());
    let body = answer.json();
    assert_eq!(body["reloaded"], json!(false));
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("ping.rhai:2:17: missing ; at the end of this statement"),
        "the refusal names the file and line: {body}"
    );
    assert_eq!(
        client.get("/ping").json(),
        json!({"pong": 2}),
        "the old version serves"
    );
    server.stop();
}

#[test]
fn with_error_details_none_a_500_names_only_the_request_and_the_log_has_the_rest() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("faulty"), data.path())
        .flag("--error-details", "none")
        .start();
    let mut client = server.client();
    let answer = client.post("/bug", &json!({}));
    assert_eq!(answer.status, 500, "{}", answer.text());
    let id = answer.header("x-request-id").expect("an id").to_string();
    assert_eq!(
        answer.json(),
        json!({
            "error": "internal error: the handler failed; the server's log has the details \
                      under this request id",
            "status": 500,
            "request_id": id,
        })
    );
    let said = server.wait_for_stderr(&format!("ERROR faulty bug {id}: failed with 500: bug ("));
    assert!(
        said.contains("faulty.rhai:"),
        "the log names the place:\n{said}"
    );
    // A throw is the handler's own answer, not a failure: it is sent as it is.
    let answer = client.post("/throw-status", &json!({}));
    assert_eq!(answer.status, 409, "{}", answer.text());
    assert_eq!(answer.json()["error"], "taken");
    server.stop();
}

/// The issue's leak: a sum that overflows names its operands in the 500, a stored total among
/// them. Off loopback the default is `--error-details none` (start-up says so), so the public
/// gets only the request id; `--error-details full` there, or loopback, names everything.
#[test]
fn off_loopback_a_500_names_nothing_by_default_and_start_up_says_so() {
    let app = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        app.path().join("app.json"),
        r#"{ "name": "till", "tables": { "totals": ["n"] }, "routes": { "POST /add": "add" } }"#,
    )
    .expect("write");
    std::fs::write(
        app.path().join("till.rhai"),
        "fn add(request) {\n    let row = totals.get(1);\n    \
         let n = if row == () { 0 } else { row.n };\n    \
         totals.put(1, #{ n: n + request.body.n });\n    #{ n: n + request.body.n }\n}\n",
    )
    .expect("write");
    let data = tempfile::tempdir().expect("tempdir");
    let add =
        |server: &crate::harness::Server, n: i64| server.client().post("/add", &json!({ "n": n }));
    let server = Launch::new(app.path(), data.path())
        .flag("--listen", "0.0.0.0:0")
        .start();
    assert_eq!(add(&server, 6682101763).status, 200);
    let leak = add(&server, i64::MAX);
    assert_eq!(leak.status, 500, "{}", leak.text());
    let id = leak.header("x-request-id").expect("an id").to_string();
    assert_eq!(
        leak.json(),
        json!({
            "error": "internal error: the handler failed; the server's log has the details \
                      under this request id",
            "status": 500,
            "request_id": id,
        })
    );
    let said = server.wait_for_stderr(&format!("ERROR till add {id}: failed with 500"));
    assert!(
        said.contains("--error-details none, the default off loopback"),
        "start-up says so:\n{said}"
    );
    server.stop();

    for launch in [
        Launch::new(app.path(), data.path())
            .flag("--listen", "0.0.0.0:0")
            .flag("--error-details", "full"),
        Launch::new(app.path(), data.path()),
    ] {
        let server = launch.start();
        let leak = add(&server, i64::MAX);
        assert_eq!(leak.status, 500, "{}", leak.text());
        let body = leak.json();
        assert!(
            body["error"]
                .as_str()
                .expect("a message")
                .contains("6682101763"),
            "{body}"
        );
        assert_eq!(body["file"], "till.rhai", "{body}");
        let said = server.stderr_text();
        assert!(!said.contains("--error-details none"), "{said}");
        server.stop();
    }
}
