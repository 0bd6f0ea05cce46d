//! The manifest's "cors": preflights answered by the server, and the headers that let a page on
//! an allowed origin read an answer.

use serde_json::json;

use crate::harness::{test_app_dir, Launch, Response, Server};

fn send(server: &Server, head: &str) -> Response {
    server
        .client()
        .exchange(format!("{head}Host: localhost\r\n\r\n").as_bytes())
        .expect("answered")
}

#[test]
fn preflights_are_answered_from_the_manifest() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("accounts"), data.path()).start();
    let preflight = |origin: &str, method: &str, headers: &str| {
        send(
            &server,
            &format!(
                "OPTIONS /accounts HTTP/1.1\r\nOrigin: {origin}\r\n\
                 Access-Control-Request-Method: {method}\r\n\
                 Access-Control-Request-Headers: {headers}\r\n"
            ),
        )
    };
    let allowed = preflight(
        "https://app.example.com",
        "POST",
        "authorization, content-type",
    );
    assert_eq!(allowed.status, 204, "{}", allowed.text());
    assert_eq!(
        allowed.header("access-control-allow-origin"),
        Some("https://app.example.com")
    );
    assert_eq!(
        allowed.header("access-control-allow-methods"),
        Some("GET, POST")
    );
    let headers = allowed
        .header("access-control-allow-headers")
        .expect("listed");
    assert!(
        headers.contains("authorization") && headers.contains("content-type"),
        "{headers}"
    );
    assert_eq!(allowed.header("access-control-max-age"), Some("300"));
    assert_eq!(allowed.header("vary"), Some("origin"));

    for (origin, method, headers, says) in [
        (
            "https://evil.example.com",
            "POST",
            "",
            "https://evil.example.com",
        ),
        ("https://app.example.com", "DELETE", "", "DELETE"),
        ("https://app.example.com", "POST", "x-secret", "x-secret"),
    ] {
        let refused = preflight(origin, method, headers);
        assert_eq!(refused.status, 403, "{}", refused.text());
        // An allowed origin's page may read why (the refusal itself allows nothing).
        assert_eq!(
            refused.header("access-control-allow-origin").is_some(),
            origin == "https://app.example.com"
        );
        assert_eq!(refused.header("access-control-allow-methods"), None);
        let error = refused.json()["error"]
            .as_str()
            .expect("a message")
            .to_string();
        assert!(error.contains(says), "{error}");
    }

    // An OPTIONS that is not a preflight lists the methods, as without "cors".
    let plain = send(&server, "OPTIONS /accounts HTTP/1.1\r\n");
    assert_eq!(plain.status, 204);
    assert_eq!(plain.header("allow"), Some("POST, OPTIONS"));
    assert_eq!(plain.header("access-control-allow-origin"), None);
}

#[test]
fn answers_to_an_allowed_origin_carry_its_headers_and_others_none() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("accounts"), data.path()).start();
    let body = serde_json::to_string(&json!({"owner": "ann"})).expect("json");
    let created = server
        .client()
        .exchange(
            format!(
                "POST /accounts HTTP/1.1\r\nHost: localhost\r\nOrigin: https://app.example.com\r\n\
                 Authorization: Bearer secret\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .expect("answered");
    assert_eq!(created.status, 201, "{}", created.text());
    assert_eq!(
        created.header("access-control-allow-origin"),
        Some("https://app.example.com")
    );
    assert_eq!(
        created.header("access-control-expose-headers"),
        Some("x-request-id, location")
    );
    // Errors too: a page must be able to read why it was refused.
    let missing = send(
        &server,
        "GET /accounts/9 HTTP/1.1\r\nOrigin: https://app.example.com\r\n",
    );
    assert_eq!(missing.status, 404);
    assert!(missing.header("access-control-allow-origin").is_some());
    let other = send(
        &server,
        "GET /accounts/1 HTTP/1.1\r\nOrigin: https://evil.example.com\r\n",
    );
    assert_eq!(
        other.status, 200,
        "the server answers; the browser keeps it from the page"
    );
    assert_eq!(other.header("access-control-allow-origin"), None);
    let no_origin = send(&server, "GET /accounts/1 HTTP/1.1\r\n");
    assert_eq!(no_origin.header("access-control-allow-origin"), None);
    let builtin = send(
        &server,
        "GET /_pure/health HTTP/1.1\r\nOrigin: https://app.example.com\r\n",
    );
    assert_eq!(builtin.header("access-control-allow-origin"), None);
}
