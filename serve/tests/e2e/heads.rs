//! Requests the HTTP layer refuses before any route sees them, each answered in JSON with the
//! limit or the reason named: too many header fields, and HTTP/2 spoken to an HTTP/1.1 server.

use std::io::{BufReader, Write};
use std::net::TcpStream;

use crate::harness::{read_response, scoreboard_dir, Launch, Response, Server, WAIT_MAX};

fn raw(server: &Server, bytes: &[u8]) -> Response {
    let stream = TcpStream::connect(server.address).expect("connect");
    stream.set_read_timeout(Some(WAIT_MAX)).expect("timeout");
    (&stream).write_all(bytes).expect("send");
    read_response(&mut BufReader::new(stream)).expect("an answer")
}

fn error_of(response: &Response, status: u16) -> String {
    assert_eq!(response.status, status, "{}", response.text());
    let body = response.json();
    body["error"]
        .as_str()
        .expect("an error message")
        .to_string()
}

#[test]
fn too_many_header_fields_and_a_large_head_name_their_own_limits() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&scoreboard_dir(), data.path()).start();
    let head = |fields: usize| {
        let mut head = "GET /top HTTP/1.1\r\nHost: localhost\r\n".to_string();
        for i in 1..fields {
            head.push_str(&format!("X-{i}: a\r\n"));
        }
        head.push_str("\r\n");
        head
    };
    // 100 fields in about 1 KB: served.
    assert_eq!(raw(&server, head(100).as_bytes()).status, 200);
    let many = head(101);
    assert!(many.len() < 2048, "a small head: {} bytes", many.len());
    let message = error_of(&raw(&server, many.as_bytes()), 431);
    assert!(
        message.contains("header fields than the limit of 100"),
        "{message}"
    );
    assert!(!message.contains("bytes"), "{message}");
    // A few fields over 32 KiB: the byte limit.
    let large = format!(
        "GET /top HTTP/1.1\r\nHost: localhost\r\nX-Big: {}\r\n\r\n",
        "a".repeat(40_000)
    );
    let message = error_of(&raw(&server, large.as_bytes()), 431);
    assert!(message.contains("32768 bytes"), "{message}");
    server.stop();
}

#[test]
fn an_http2_preface_is_answered_505_in_http_1_1() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&scoreboard_dir(), data.path()).start();
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let message = error_of(&raw(&server, preface), 505);
    assert!(message.contains("HTTP/1.1"), "{message}");
    // The server goes on serving.
    assert_eq!(
        raw(&server, b"GET /top HTTP/1.1\r\nHost: localhost\r\n\r\n").status,
        200
    );
    server.stop();
}

#[test]
fn a_transfer_coding_other_than_chunked_is_501_and_writes_nothing() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&scoreboard_dir(), data.path()).start();
    let body = br#"{"player": "ann", "score": 5}"#;
    let chunked = |coding: &str, player: &str| {
        let body = String::from_utf8_lossy(body).replace("ann", player);
        format!(
            "POST /scores HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
             Transfer-Encoding: {coding}\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
            body.len()
        )
    };
    for (coding, player) in [("gzip, chunked", "gz"), ("deflate,chunked", "df")] {
        let message = error_of(&raw(&server, chunked(coding, player).as_bytes()), 501);
        assert!(message.contains("transfer coding"), "{message}");
        let get = format!("GET /players/{player} HTTP/1.1\r\nHost: localhost\r\n\r\n");
        assert_eq!(
            raw(&server, get.as_bytes()).status,
            404,
            "{coding}: nothing written"
        );
    }
    // Chunked alone is HTTP/1.1's own framing, and taken.
    assert_eq!(
        raw(&server, chunked("chunked", "ann").as_bytes()).status,
        200
    );
    server.stop();
}
