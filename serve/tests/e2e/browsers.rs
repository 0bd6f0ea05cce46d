//! What a web page can do to a Pure server through its visitors' browsers (issue 36, item 2): a
//! page that points its own name at the server's address is refused by `Host` (421).

use serde_json::json;

use crate::harness::{scoreboard_dir, Client, Launch, Response, Server};

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
