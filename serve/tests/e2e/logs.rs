//! Handlers' log lines and the access log, as pure-serve writes them to standard error.

use serde_json::{json, Value};

use crate::harness::{metric_value, test_app_dir, wait_until, Launch, Server};

/// Waits until standard error holds a line with `needle`, and returns all of it so far.
fn stderr_until(server: &Server, seen: &mut String, needle: &str) -> String {
    wait_until(&format!("a log line with {needle:?}"), || {
        seen.push_str(&server.stderr_text());
        seen.push('\n');
        seen.contains(needle)
    });
    seen.clone()
}

fn noisy(server: &Server, id: &str) {
    let body = br#"{"who": "ann"}"#;
    let request = format!(
        "POST /noisy HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: {id}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut bytes = request.into_bytes();
    bytes.extend_from_slice(body);
    let response = server.client().exchange(&bytes).expect("answered");
    assert_eq!(response.status, 200, "{}", response.text());
}

#[test]
fn handler_lines_are_logged_as_text_with_their_call_and_no_access_log_by_default() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("accounts"), data.path()).start();
    noisy(&server, "log-1");
    let mut seen = String::new();
    let text = stderr_until(&server, &mut seen, "DEBUG accounts noisy log-1");
    for line in [
        " INFO accounts noisy log-1: hello ann",
        " WARN accounts noisy log-1: careful",
        " ERROR accounts noisy log-1: bad",
        " DEBUG accounts noisy log-1: \"dbg\"",
    ] {
        assert!(text.contains(line), "{line:?} in {text}");
    }
    assert!(!text.contains("ACCESS"), "{text}");
}

#[test]
fn json_lines_and_the_access_log() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("accounts"), data.path())
        .flag("--log-format", "json")
        .switch("--access-log")
        .start();
    noisy(&server, "log-2");
    let mut seen = String::new();
    let text = stderr_until(&server, &mut seen, r#""level":"access""#);
    let lines: Vec<Value> = text
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let hello = lines
        .iter()
        .find(|l| l["message"] == "hello ann")
        .expect("the print line");
    assert_eq!(
        (
            &hello["level"],
            &hello["app"],
            &hello["handler"],
            &hello["request_id"]
        ),
        (
            &json!("info"),
            &json!("accounts"),
            &json!("noisy"),
            &json!("log-2")
        )
    );
    assert!(hello["ts"].as_str().expect("a time").ends_with('Z'));
    let access = lines
        .iter()
        .find(|l| l["level"] == "access")
        .expect("the access line");
    assert_eq!(
        (
            &access["method"],
            &access["path"],
            &access["status"],
            &access["request_id"]
        ),
        (
            &json!("POST"),
            &json!("/noisy"),
            &json!(200),
            &json!("log-2")
        )
    );
    assert_eq!(access["peer"], json!("127.0.0.1"));
    let metrics = server.client().get("/_pure/metrics").text();
    assert!(
        metric_value(&metrics, "pure_log_lines_total") >= 5.0,
        "{metrics}"
    );
    assert_eq!(metric_value(&metrics, "pure_log_lines_dropped_total"), 0.0);
}

/// The issue's forged lines, through the real server: a path with a quote (which ended the
/// access log's quoted field early) and a message and a path holding U+2028, U+0085 and
/// U+202E, logged as text and as JSON. No such character reaches standard error raw.
#[test]
fn no_path_or_message_can_forge_a_log_line() {
    let forged = "x\u{2028}y\u{85}z\u{202e}w";
    for format in ["text", "json"] {
        let data = tempfile::tempdir().expect("tempdir");
        let server = Launch::new(&test_app_dir("accounts"), data.path())
            .flag("--log-format", format)
            .switch("--access-log")
            .start();
        let body = json!({ "who": forged }).to_string();
        let request = format!(
            "POST /noisy HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: forge-{format}\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let response = server
            .client()
            .exchange(request.as_bytes())
            .expect("answered");
        assert_eq!(response.status, 200, "{}", response.text());
        let request = format!(
            "GET /nowhere/1\"_200_1us_forged-id{forged} HTTP/1.1\r\nHost: localhost\r\n\r\n"
        );
        let response = server
            .client()
            .exchange(request.as_bytes())
            .expect("answered");
        assert_eq!(response.status, 404, "{}", response.text());
        let mut seen = String::new();
        let text = stderr_until(&server, &mut seen, "forged-id");
        for raw in ['\u{2028}', '\u{85}', '\u{202e}'] {
            assert!(
                !text.contains(raw),
                "{format}: U+{:04X} raw in {text}",
                raw as u32
            );
        }
        match format {
            "text" => {
                assert!(
                    text.contains(": hello x\\u{2028}y\\u{85}z\\u{202e}w"),
                    "{text}"
                );
                assert!(
                    text.contains("\"GET /nowhere/1\\\"_200_1us_forged-idx\\u{2028}y"),
                    "{text}"
                );
            }
            _ => {
                let lines: Vec<Value> = text
                    .lines()
                    .filter(|l| l.starts_with('{'))
                    .map(|l| serde_json::from_str(l).expect("a JSON line"))
                    .collect();
                let hello = format!("hello {forged}");
                assert!(
                    lines.iter().any(|l| l["message"] == hello.as_str()),
                    "{text}"
                );
                let path = format!("/nowhere/1\"_200_1us_forged-id{forged}");
                assert!(lines.iter().any(|l| l["path"] == path.as_str()), "{text}");
            }
        }
        server.stop();
    }
}
