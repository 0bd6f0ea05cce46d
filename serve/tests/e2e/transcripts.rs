//! `pure-serve test`: every bundled app's transcripts pass through it; a transcript whose
//! answers differ fails with the request, the expected and the actual answer; `--update`
//! rewrites only the answers that differ; `restart` inside a transcript serves what recovery
//! brought back.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::depth::nested_text;
use crate::harness::{binary, repo_path, scoreboard_dir, test_app_dir};

fn test(app: &Path, update: bool) -> Output {
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

/// Every bundled app with transcripts: `pure-serve test` runs them all and they pass.
#[test]
fn bundled_app_transcripts() {
    let mut apps: Vec<PathBuf> = std::fs::read_dir(repo_path("apps"))
        .expect("apps/")
        .flatten()
        .map(|entry| entry.path())
        .filter(|app| app.join("tests").is_dir())
        .collect();
    apps.sort();
    assert!(
        apps.iter().any(|app| app.ends_with("scoreboard")),
        "no scoreboard transcripts"
    );
    for app in apps {
        let output = test(&app, false);
        let all = text(&output);
        assert!(output.status.success(), "{}: {all}", app.display());
        assert!(all.contains("answers as written"), "{all}");
    }
}

/// A copy of the scoreboard with one more transcript, `text`.
fn scoreboard_with(text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = scoreboard_dir();
    for name in ["app.json", "scores.rhai"] {
        std::fs::copy(source.join(name), dir.path().join(name)).expect("copy the app");
    }
    std::fs::create_dir(dir.path().join("tests")).expect("tests/");
    std::fs::write(dir.path().join("tests/case.transcript"), text).expect("write");
    dir
}

const CASE: &str = "\
# posts, then a restart
POST /scores {\"player\": \"zed\", \"score\": 5}
200 {\"player\": \"zed\", \"best\": 4, \"posts\": 1}

POST /scores {\"player\": \"amy\", \"score\": 1}
200 {\"player\": \"amy\", \"best\": 1, \"posts\": 1}

restart

GET /players/zed
404
";

#[test]
fn a_differing_answer_fails_naming_the_request_and_both_answers() {
    let app = scoreboard_with(CASE);
    let output = test(app.path(), false);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(1), "{all}");
    assert!(all.contains("case.transcript:2: POST /scores"), "{all}");
    assert!(
        all.contains("  expected: 200 {\"player\": \"zed\", \"best\": 4, \"posts\": 1}"),
        "{all}"
    );
    assert!(
        all.contains("  actual:   200 {\"best\":5,\"player\":\"zed\",\"posts\":1}"),
        "{all}"
    );
    // After the restart, zed is still there: recovery brought the post back.
    assert!(
        all.contains("case.transcript:10: GET /players/zed"),
        "{all}"
    );
    assert!(all.contains("2 of 3 answers differ"), "{all}");
}

#[test]
fn update_rewrites_only_the_answers_that_differ_and_then_they_pass() {
    let app = scoreboard_with(CASE);
    let output = test(app.path(), true);
    assert!(output.status.success(), "{}", text(&output));
    let rewritten =
        std::fs::read_to_string(app.path().join("tests/case.transcript")).expect("read");
    assert_eq!(
        rewritten,
        CASE.replace(
            "200 {\"player\": \"zed\", \"best\": 4, \"posts\": 1}",
            "200 {\"best\":5,\"player\":\"zed\",\"posts\":1}"
        )
        .replace("404\n", "200 {\"best\":5,\"player\":\"zed\",\"posts\":1}\n")
    );
    let output = test(app.path(), false);
    assert!(output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("3 answers as written"));
}

#[test]
fn an_app_that_does_not_start_or_has_no_transcripts_exits_3() {
    let app = scoreboard_with("GET /top\n200 []\n");
    std::fs::write(
        app.path().join("scores.rhai"),
        "fn post_score(r) { nope() }",
    )
    .expect("write");
    let output = test(app.path(), false);
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    assert!(
        text(&output).contains("no function nope()"),
        "{}",
        text(&output)
    );

    let empty = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(empty.path().join("tests")).expect("tests/");
    let output = test(empty.path(), false);
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    assert!(
        text(&output).contains("no transcripts"),
        "{}",
        text(&output)
    );

    // An app without a tests/ directory is told the same, not "No such file or directory".
    let untested = scoreboard_with("");
    std::fs::remove_dir_all(untested.path().join("tests")).expect("remove tests/");
    let output = test(untested.path(), false);
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    assert!(
        text(&output).contains("no transcripts in") && text(&output).contains("Testing an app"),
        "{}",
        text(&output)
    );
}

/// Answers as deep as the depth rule allows (128 levels) are compared: serde_json's own limit,
/// which the runner read answers with, stops one level short (issue 36).
#[test]
fn answers_as_deep_as_the_depth_rule_allows_are_compared() {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = test_app_dir("deep");
    for name in ["app.json", "deep.rhai"] {
        std::fs::copy(source.join(name), dir.path().join(name)).expect("copy the app");
    }
    std::fs::create_dir(dir.path().join("tests")).expect("tests/");
    let deepest = nested_text(128);
    let case = format!("GET /nested/128\n200 {deepest}\n\nPOST /echo {deepest}\n200 {deepest}\n");
    std::fs::write(dir.path().join("tests/deep.transcript"), case).expect("write");
    let output = test(dir.path(), false);
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("2 answers as written"),
        "{}",
        text(&output)
    );
}

/// A copy of the tickets app with one transcript, `text`, beside its secrets file.
fn tickets_with(text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = repo_path("apps/tickets");
    for name in ["app.json", "tickets.rhai"] {
        std::fs::copy(source.join(name), dir.path().join(name)).expect("copy the app");
    }
    std::fs::create_dir(dir.path().join("tests")).expect("tests/");
    std::fs::copy(
        source.join("tests/secrets.test"),
        dir.path().join("tests/secrets.test"),
    )
    .expect("copy the secrets");
    std::fs::write(dir.path().join("tests/case.transcript"), text).expect("write");
    dir
}

const HEADERS: &str = "\
#! --secrets secrets.test
POST /events {\"name\": \"a\", \"capacity\": 2}
x-api-key: test-key-0123456789
201
location: /events/7

POST /events {\"name\": \"b\", \"capacity\": 2}
201
";

/// Request headers are sent (the key gets through the guard); an answer's listed headers are
/// compared, and `--update` writes the ones the server gave.
#[test]
fn headers_are_sent_and_listed_answer_headers_compared() {
    let app = tickets_with(HEADERS);
    let output = test(app.path(), false);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(1), "{all}");
    assert!(
        all.contains("  expected: 201\n            location: /events/7\n  actual:   201 "),
        "{all}"
    );
    assert!(all.contains("            location: /events/1\n"), "{all}");
    // Without the header, the guard answers.
    assert!(all.contains("case.transcript:7: POST /events"), "{all}");
    assert!(all.contains("  actual:   401 "), "{all}");
    assert!(all.contains("2 of 2 answers differ"), "{all}");

    let output = test(app.path(), true);
    assert!(output.status.success(), "{}", text(&output));
    let rewritten =
        std::fs::read_to_string(app.path().join("tests/case.transcript")).expect("read");
    assert!(
        rewritten.contains("x-api-key: test-key-0123456789\n201 {\"booked\":0,\"capacity\":2,\"id\":1,\"name\":\"a\"}\nlocation: /events/1\n"),
        "{rewritten}"
    );
    let output = test(app.path(), false);
    assert!(output.status.success(), "{}", text(&output));
}
