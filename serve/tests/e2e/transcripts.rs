//! Runs the bundled apps' transcripts: every `apps/*/tests/*.transcript` against a fresh server.
//!
//! A transcript is a list of exchanges separated by blank lines; `#` starts a comment line. An
//! exchange is a request line `METHOD PATH [JSON BODY]` and an expected line `STATUS [JSON]`.
//! When the expected JSON is given the answer must equal it; otherwise only the status counts.
//! A line `#! --flag value ...` gives the server flags (`--fixed-now 1767225600000`), so that
//! answers holding the time or random values can be compared exactly.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::{repo_path, Client, Launch};

struct Exchange {
    line: usize,
    method: String,
    path: String,
    body: Option<String>,
    status: u16,
    expected: Option<Value>,
}

fn parse(text: &str, file: &Path) -> Vec<Exchange> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(index, line)| (index + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
        .collect();
    assert!(
        lines.len().is_multiple_of(2),
        "{}: a request line without its answer",
        file.display()
    );
    lines
        .chunks(2)
        .map(|pair| {
            let (line, request) = pair[0];
            let mut parts = request.splitn(3, ' ');
            let method = parts.next().expect("method").to_string();
            let path = parts
                .next()
                .unwrap_or_else(|| panic!("{}:{line}: no path", file.display()))
                .to_string();
            let body = parts.next().map(str::to_string);
            let (status, expected) = pair[1].1.split_once(' ').unwrap_or((pair[1].1, ""));
            let status = status
                .parse()
                .unwrap_or_else(|_| panic!("{}:{}: bad status", file.display(), pair[1].0));
            let expected = (!expected.is_empty()).then(|| {
                serde_json::from_str(expected)
                    .unwrap_or_else(|e| panic!("{}:{}: {e}", file.display(), pair[1].0))
            });
            Exchange {
                line,
                method,
                path,
                body,
                status,
                expected,
            }
        })
        .collect()
}

fn transcripts() -> Vec<(PathBuf, PathBuf)> {
    let mut found = Vec::new();
    for app in std::fs::read_dir(repo_path("apps"))
        .expect("apps/")
        .flatten()
    {
        let Ok(tests) = std::fs::read_dir(app.path().join("tests")) else {
            continue;
        };
        for file in tests.flatten() {
            if file
                .path()
                .extension()
                .is_some_and(|ext| ext == "transcript")
            {
                found.push((app.path(), file.path()));
            }
        }
    }
    found.sort();
    found
}

#[test]
fn bundled_app_transcripts() {
    let all = transcripts();
    assert!(
        all.iter().any(|(app, _)| app.ends_with("scoreboard")),
        "no scoreboard transcript"
    );
    for (app, file) in all {
        let data = tempfile::tempdir().expect("tempdir");
        let text = std::fs::read_to_string(&file).expect("read transcript");
        let mut launch = Launch::new(&app, data.path());
        for line in text.lines().filter_map(|line| line.strip_prefix("#!")) {
            launch
                .flags
                .extend(line.split_whitespace().map(str::to_string));
        }
        let server = launch.start();
        let mut client: Client = server.client();
        for exchange in parse(&text, &file) {
            let body = exchange.body.as_deref().map(str::as_bytes);
            let response = client
                .request(&exchange.method, &exchange.path, body)
                .expect("answered");
            let place = format!("{}:{}", file.display(), exchange.line);
            assert_eq!(
                response.status,
                exchange.status,
                "{place}: {}",
                response.text()
            );
            if let Some(expected) = &exchange.expected {
                assert_eq!(&response.json(), expected, "{place}");
            }
        }
        server.stop();
    }
}
