//! What a web page can do to a Pure server through its visitors' browsers (issue 36, item 2): a
//! page that points its own name at the server's address is refused by `Host` (421); a write
//! that a browser sends for a page on another origin, by its `Origin` (403), unless the app's
//! "cors" lets that origin use that method.

use serde_json::json;

use crate::harness::{
    metric_value, repo_path, scoreboard_dir, test_app_dir, Client, Launch, Response, Server,
};

/// One request on a connection of its own, with a `Host` (and any other header lines) of the
/// test's choosing.
fn send(address: std::net::SocketAddr, head: &str, body: &str) -> Response {
    let request = format!(
        "{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    Client::connect(address)
        .exchange(request.as_bytes())
        .expect("answered")
}

fn post_score(address: std::net::SocketAddr, host: &str, player: &str) -> Response {
    let body = json!({ "player": player, "score": 1 }).to_string();
    send(
        address,
        &format!("POST /scores HTTP/1.1\r\nHost: {host}"),
        &body,
    )
}

fn error_of(response: &Response, status: u16) -> String {
    assert_eq!(response.status, status, "{}", response.text());
    let error = response.json()["error"]
        .as_str()
        .expect("a message")
        .to_string();
    error
}

/// A DNS-rebinding page's requests name its own host: on loopback only localhost, 127.0.0.1
/// and [::1] are answered (any port, any case), on the admin address too; a missing or repeated
/// Host stays 400; --allowed-hosts names others, and '*' any.
#[test]
fn requests_naming_a_host_the_server_does_not_answer_to_get_421() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&scoreboard_dir(), data.path())
        .flag("--admin-listen", "127.0.0.1:0")
        .start();
    let admin = server.admin_address();
    let address = server.address;

    let refused = post_score(address, "evil.example", "eve");
    let error = error_of(&refused, 421);
    assert!(
        error.contains("\"evil.example\"") && error.contains("--allowed-hosts"),
        "{error}"
    );
    assert_eq!(refused.json()["host"], "evil.example");
    let read = send(
        address,
        "GET /players/ann HTTP/1.1\r\nHost: evil.example:8080",
        "",
    );
    error_of(&read, 421);
    let absolute = send(
        address,
        "GET http://evil.example/top HTTP/1.1\r\nHost: localhost",
        "",
    );
    error_of(&absolute, 421);
    for host in ["localhost", "LocalHost:1", "127.0.0.1", "[::1]:9"] {
        assert_eq!(post_score(address, host, "ann").status, 200, "{host}");
    }
    let mut client = server.client();
    assert_eq!(client.get("/players/ann").json()["posts"], 4);
    assert_eq!(client.get("/players/eve").status, 404, "the refused write");

    // The head's own checks come first.
    let none = Client::connect(address)
        .exchange(b"GET /top HTTP/1.1\r\n\r\n")
        .expect("answered");
    error_of(&none, 400);
    let two = send(
        address,
        "GET /top HTTP/1.1\r\nHost: evil.example\r\nHost: localhost",
        "",
    );
    error_of(&two, 400);

    for (method, path) in [("GET", "/_pure/health"), ("POST", "/_pure/reload")] {
        let head = format!("{method} {path} HTTP/1.1\r\nHost: evil.example");
        error_of(&send(admin, &head, ""), 421);
        let head = format!("{method} {path} HTTP/1.1\r\nHost: localhost");
        assert_eq!(send(admin, &head, "").status, 200, "{method} {path}");
    }
    server.stop();

    let server = Launch::new(&scoreboard_dir(), data.path())
        .flag("--allowed-hosts", "api.example,[::1]")
        .start();
    assert_eq!(
        post_score(server.address, "API.example:443", "bob").status,
        200
    );
    assert_eq!(post_score(server.address, "[::1]", "bob").status, 200);
    let error = error_of(&post_score(server.address, "localhost", "bob"), 421);
    assert!(
        error.contains("api.example, [::1]") && error.contains("api.example,[::1],localhost"),
        "{error}"
    );
    server.stop();
    let server = Launch::new(&scoreboard_dir(), data.path())
        .flag("--allowed-hosts", "*")
        .start();
    assert_eq!(post_score(server.address, "any.example", "bob").status, 200);
    server.stop();
}

/// On an address that is not loopback, any host is answered unless --allowed-hosts says
/// otherwise, and start-up says so.
#[test]
fn off_loopback_any_host_is_answered_and_start_up_says_so() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&scoreboard_dir(), data.path())
        .flag("--listen", "0.0.0.0:0")
        .start();
    server.wait_for_stderr("is not a loopback address, so requests naming any host are answered");
    assert_eq!(post_score(server.address, "any.example", "ann").status, 200);
    server.stop();
    let server: Server = Launch::new(&scoreboard_dir(), data.path())
        .flag("--listen", "0.0.0.0:0")
        .flag("--allowed-hosts", "api.example")
        .start();
    error_of(&post_score(server.address, "any.example", "ann"), 421);
    assert_eq!(post_score(server.address, "api.example", "ann").status, 200);
    let said = server.stderr_text();
    assert!(!said.contains("not a loopback address"), "{said}");
    server.stop();
}

/// The issue's forged transfer: a page on another site posts to the ledger as text/plain, as a
/// form or as JSON. Its browser sends `Origin`; the write is refused before the handler runs,
/// whatever the body's type, and the money stays. Without `Origin` (curl, a server-side client)
/// or from the server's own origin it goes through, and reads are answered either way. The
/// admin address's reload cannot be forged either.
#[test]
fn a_write_from_a_page_on_another_origin_gets_403_and_moves_nothing() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&repo_path("apps/ledger"), data.path())
        .flag("--admin-listen", "127.0.0.1:0")
        .start();
    let admin = server.admin_address();
    let address = server.address;
    let mut client = server.client();
    for body in [
        json!({"owner": "ann", "deposit": 100}),
        json!({"owner": "bob"}),
    ] {
        let opened = client.post("/accounts", &body);
        assert_eq!(opened.status, 201, "{}", opened.text());
    }
    let own = format!("localhost:{}", address.port());
    let transfer = |content_type: &str, origin: Option<&str>| {
        let origin = origin.map_or(String::new(), |o| format!("\r\nOrigin: {o}"));
        send(
            address,
            &format!(
                "POST /transfers HTTP/1.1\r\nHost: {own}\r\nContent-Type: {content_type}{origin}"
            ),
            r#"{"from": 1, "to": 2, "amount": 30}"#,
        )
    };
    let other_origins = [
        "https://evil.example".to_string(),
        "null".to_string(),
        // The server's other names, and https, are other origins than the page's own.
        format!("http://127.0.0.1:{}", address.port()),
        format!("https://{own}"),
    ];
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/json",
    ] {
        for origin in &other_origins {
            let refused = transfer(content_type, Some(origin));
            let error = error_of(&refused, 403);
            assert!(
                error.contains("refused") && error.contains("only the server's own pages")
                    || error.contains("\"cors\""),
                "{error}"
            );
            assert_eq!(refused.json()["origin"], origin.as_str());
        }
    }
    let evil = error_of(&transfer("text/plain", Some("https://evil.example")), 403);
    assert!(evil.contains("a page on https://evil.example"), "{evil}");
    let null = error_of(&transfer("text/plain", Some("null")), 403);
    assert!(null.contains("Origin: null"), "{null}");
    assert_eq!(
        client.get("/accounts/1").json()["balance"],
        100,
        "nothing moved"
    );

    assert_eq!(transfer("text/plain", None).status, 201, "curl's post");
    let own_origin = format!("http://{own}");
    assert_eq!(transfer("application/json", Some(&own_origin)).status, 201);
    let shouting = own_origin.to_ascii_uppercase();
    assert_eq!(transfer("application/json", Some(&shouting)).status, 201);
    let read = send(
        address,
        &format!("GET /accounts/1 HTTP/1.1\r\nHost: {own}\r\nOrigin: https://evil.example"),
        "",
    );
    assert_eq!(
        read.status, 200,
        "the browser keeps the answer from the page"
    );
    assert_eq!(read.header("access-control-allow-origin"), None);
    assert_eq!(client.get("/accounts/1").json()["balance"], 10);

    let reload = |origin: &str| {
        let head = format!(
            "POST /_pure/reload HTTP/1.1\r\nHost: localhost:{}\r\nOrigin: {origin}",
            admin.port()
        );
        send(admin, &head, "")
    };
    let error = error_of(&reload("https://evil.example"), 403);
    assert!(error.contains("only the server's own pages"), "{error}");
    let metrics = Client::connect(admin).get("/_pure/metrics").text();
    assert_eq!(metric_value(&metrics, "pure_reloads_total"), 0.0);
    let own_admin = format!("http://localhost:{}", admin.port());
    assert_eq!(reload(&own_admin).status, 200);
    server.stop();
}

/// An app's "cors" lets the pages it lists write, with the methods it lists (accounts: from
/// https://app.example.com, GET and POST): a DELETE from that origin, or a POST from another,
/// is refused, and the 403 says what to change in app.json.
#[test]
fn the_apps_cors_lets_its_origins_write_with_its_methods_only() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("accounts"), data.path()).start();
    let request = |head: &str, origin: &str, body: &str| {
        send(
            server.address,
            &format!(
                "{head}\r\nHost: localhost\r\nOrigin: {origin}\r\n\
                 Authorization: Bearer secret"
            ),
            body,
        )
    };
    let open = r#"{"owner": "ann"}"#;
    let opened = request("POST /accounts HTTP/1.1", "https://app.example.com", open);
    assert_eq!(opened.status, 201, "{}", opened.text());
    assert_eq!(
        opened.header("access-control-allow-origin"),
        Some("https://app.example.com")
    );
    let error = error_of(
        &request("POST /accounts HTTP/1.1", "https://evil.example", open),
        403,
    );
    assert!(
        error.contains("add \"https://evil.example\" to \"cors\".\"origins\""),
        "{error}"
    );
    let closing = request("DELETE /accounts/1 HTTP/1.1", "https://app.example.com", "");
    let error = error_of(&closing, 403);
    assert!(
        error.contains("only GET, POST") && error.contains("add DELETE"),
        "{error}"
    );
    assert_eq!(
        closing.header("access-control-allow-origin"),
        Some("https://app.example.com"),
        "the page may read why"
    );
    let mut client = server.client();
    assert_eq!(client.get("/accounts/1").status, 200, "not closed");
    assert_eq!(
        client
            .request("DELETE", "/accounts/1", None)
            .expect("answered")
            .status,
        204,
        "without Origin"
    );
    server.stop();
}
