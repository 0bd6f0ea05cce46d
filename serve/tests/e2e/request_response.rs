//! What a handler sees of a request (method, path, headers, peer, id) and what it can say in
//! its answer (`respond`: status and headers), through real HTTP.

use serde_json::{json, Value};

use crate::harness::{test_app_dir, Launch, Response};

fn post(client: &mut crate::harness::Client, path: &str, body: &Value, extra: &str) -> Response {
    let body = serde_json::to_vec(body).expect("serialize");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n{extra}\r\n",
        body.len()
    );
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&body);
    client.exchange(&bytes).expect("answered")
}

#[test]
fn a_handler_sees_the_request_line_headers_peer_and_id() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("accounts"), data.path()).start();
    let mut client = server.client();
    let response = client
        .exchange(
            b"GET /whoami?x=1 HTTP/1.1\r\nHost: localhost\r\nUser-Agent: probe/1\r\n\
              Accept: a/b\r\nAccept: c/d\r\nCookie: a=1\r\nCookie: b=2\r\n\
              X-Request-Id: trace-42.a\r\n\r\n",
        )
        .expect("answered");
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(
        response.json(),
        json!({
            "method": "GET", "path": "/whoami", "peer": "127.0.0.1", "id": "trace-42.a",
            "agent": "probe/1", "accept": "a/b, c/d", "cookie": "a=1; b=2", "missing": null,
        })
    );
    assert_eq!(response.header("x-request-id"), Some("trace-42.a"));

    // Without a usable id of the client's, the server makes one: distinct, and on every answer,
    // errors included.
    let first = client.get("/whoami");
    let second = client
        .exchange(b"GET /nowhere HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: bad id\r\n\r\n")
        .expect("answered");
    assert_eq!(second.status, 404);
    let (one, two) = (
        first.header("x-request-id").expect("an id"),
        second.header("x-request-id").expect("an id"),
    );
    assert_ne!(one, two);
    assert_eq!(first.json()["id"], json!(one));
    assert_ne!(two, "bad id");
}

#[test]
fn respond_answers_201_with_location_and_commits_and_204_without_a_body() {
    let data = tempfile::tempdir().expect("tempdir");
    let launch = Launch::new(&test_app_dir("accounts"), data.path());
    let server = launch.start();
    let mut client = server.client();

    let refused = post(&mut client, "/accounts", &json!({"owner": "ann"}), "");
    assert_eq!(refused.status, 401, "{}", refused.text());
    assert_eq!(
        client.get("/accounts/1").status,
        404,
        "a refusal writes nothing"
    );

    let auth = "Authorization: Bearer secret\r\n";
    let created = post(&mut client, "/accounts", &json!({"owner": "ann"}), auth);
    assert_eq!(created.status, 201, "{}", created.text());
    assert_eq!(created.header("location"), Some("/accounts/1"));
    assert_eq!(created.header("content-type"), Some("application/json"));
    assert_eq!(created.json(), json!({"id": 1}));
    let created = post(&mut client, "/accounts", &json!({"owner": "bob"}), auth);
    assert_eq!(created.header("location"), Some("/accounts/2"));

    // A 201 is durable as a 200 is: it survives a restart.
    server.stop();
    let server = launch.start();
    let mut client = server.client();
    assert_eq!(
        client.get("/accounts/1").json(),
        json!({"owner": "ann", "balance": 0})
    );

    let closed = client
        .request("DELETE", "/accounts/1", None)
        .expect("answered");
    assert_eq!(closed.status, 204);
    assert!(closed.body.is_empty(), "{}", closed.text());
    assert_eq!(closed.header("content-type"), None);
    assert_eq!(client.get("/accounts/1").status, 404);
    assert_eq!(
        client.get("/accounts/2").status,
        200,
        "the connection goes on"
    );
}

#[test]
fn an_answer_that_cannot_be_sent_is_a_script_error_and_writes_nothing() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("accounts"), data.path()).start();
    let mut client = server.client();
    let script = std::fs::read_to_string(test_app_dir("accounts").join("accounts.rhai"))
        .expect("the script");
    let line_of = |text: &str| 1 + script.lines().position(|l| l.contains(text)).expect(text);
    for (path, mistake, statement, key) in [
        (
            "/bad-header",
            "the server sets the content-length header itself",
            "respond(200, #{}, #{ \"content-length\"",
            1000,
        ),
        (
            "/thrown-success",
            "a thrown status must be 400 to 599, not 200",
            "throw #{ status: 200",
            1001,
        ),
    ] {
        let response = client.post(path, &json!({}));
        assert_eq!(response.status, 500, "{path}: {}", response.text());
        let error = response.json();
        let message = error["error"].as_str().expect("a message");
        assert!(message.contains(mistake), "{path}: {error}");
        assert_eq!(error["file"], json!("accounts.rhai"), "{path}: {error}");
        assert_eq!(error["line"], json!(line_of(statement)), "{path}: {error}");
        let row = client.get(&format!("/accounts/{key}"));
        assert_eq!(row.status, 404, "{path} rolled back its write");
    }
}
