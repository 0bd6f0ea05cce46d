//! The depth rule (issue 36): a value nests arrays and objects at most 128 levels deep, in a
//! request body, a stored value and an answer alike; past it, a 400 for a body, a 500 for the
//! handler that stored or answered it, and never a server that aborts.

use crate::harness::{test_app_dir, Client, Launch, Response};

/// The rule's bound, as pure_lang states it.
const DEPTH_MAX: usize = 128;

/// `levels` arrays, each holding the next, the innermost holding 1: what the deep app's
/// `nested_array(levels)` builds, as JSON.
pub fn nested_text(levels: usize) -> String {
    format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
}

fn post_text(client: &mut Client, path: &str, body: &str) -> Response {
    client
        .request("POST", path, Some(body.as_bytes()))
        .expect("POST answered")
}

/// The `"error"` of a JSON error body, read as text (the body is flat).
fn error_of(response: &Response) -> String {
    response.json()["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error: {}", response.text()))
        .to_string()
}

/// A body, a stored value and an answer may each nest 128 levels, and not one more.
#[test]
fn bodies_stored_values_and_answers_nest_at_most_128_levels() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("deep"), data.path()).start();
    let mut client = server.client();
    let deepest = nested_text(DEPTH_MAX);

    // A body: 128 levels reach the handler (serde_json's own limit refused them), 129 are a
    // 400 naming the rule and where the text passed it.
    let echoed = post_text(&mut client, "/echo", &deepest);
    assert_eq!(echoed.status, 200, "{}", echoed.text());
    assert_eq!(echoed.text(), deepest);
    let refused = post_text(&mut client, "/echo", &nested_text(DEPTH_MAX + 1));
    assert_eq!(refused.status, 400, "{}", refused.text());
    let error = error_of(&refused);
    assert!(
        error.contains("the body nests arrays and objects more than 128 levels deep"),
        "{error}"
    );
    assert!(error.ends_with("line 1 column 129"), "{error}");

    // A stored value: from a body or built by the script, 128 levels are stored and read back;
    // 129 are the handler's error, and nothing is written.
    let stored = post_text(&mut client, "/values/1", &deepest);
    assert_eq!(stored.status, 200, "{}", stored.text());
    let built = post_text(&mut client, "/values/2/nested/128", "");
    assert_eq!(built.status, 200, "{}", built.text());
    for id in [1, 2] {
        let read = client.get(&format!("/values/{id}"));
        assert_eq!(read.status, 200, "{}", read.text());
        assert_eq!(read.text(), deepest);
    }
    let too_deep = post_text(&mut client, "/values/3/nested/129", "");
    assert_eq!(too_deep.status, 500, "{}", too_deep.text());
    let error = error_of(&too_deep);
    assert!(
        error.contains("a stored value nests arrays and objects more than 128 levels deep"),
        "{error}"
    );
    assert_eq!(client.get("/values/3").status, 404);

    // An answer: 128 levels are sent, 129 are a 500 naming the handler and the rule.
    let answer = client.get("/nested/128");
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.text(), deepest);
    let too_deep = client.get("/nested/129");
    assert_eq!(too_deep.status, 500, "{}", too_deep.text());
    let body = too_deep.json();
    assert_eq!(body["handler"], "nested", "{body}");
    let error = error_of(&too_deep);
    assert!(
        error.contains("the return value: the value nests arrays and objects more than 128"),
        "{error}"
    );

    // A thrown value and a logged one are made into text by walking them: the same rule.
    let thrown = client.get("/thrown/128");
    assert_eq!(thrown.status, 400, "{}", thrown.text());
    assert_eq!(error_of(&thrown).matches('[').count(), DEPTH_MAX);
    for path in ["/thrown/129", "/warned/129"] {
        let too_deep = client.get(path);
        assert_eq!(too_deep.status, 500, "{path}: {}", too_deep.text());
        assert!(
            error_of(&too_deep).contains("more than 128 levels deep"),
            "{path}: {}",
            too_deep.text()
        );
    }
    assert_eq!(client.get("/warned/128").status, 200);
    server.stop();
}

/// Issue 36, item 4: a read handler that built `a = [a]` 20,000 times and returned it (within
/// the server's caps of 10 s and 100 million operations) overflowed its HTTP thread's stack
/// while its answer was turned into JSON, and the process aborted. Now the conversion stops at
/// the rule: that request gets a 500, and the server serves the next one.
#[test]
fn an_answer_20000_levels_deep_is_a_500_for_its_request_alone() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("deep"), data.path()).start();
    let mut client = server.client();
    let deep = client
        .request("GET", "/nested/20000", None)
        .expect("the server answers (before the fix, it aborted)");
    assert_eq!(deep.status, 500, "{}", deep.text());
    let body = deep.json();
    assert_eq!(body["handler"], "nested", "{body}");
    // On a machine slow enough, the handler's 10 s of CPU run out before its 20,000 levels
    // are built: a 500 for its own request too, from the time limit instead of the rule.
    let error = error_of(&deep);
    assert!(
        error.contains("more than 128 levels deep") || body["limit"] == "wall-clock time",
        "{body}"
    );
    let next = client.get("/nested/1");
    assert_eq!(next.status, 200, "{}", next.text());
    assert_eq!(next.text(), "[1]");
    server.stop();
}

/// Issue 36, item 4: Rhai makes a value into text, and compares two, with a native call per
/// level (1.6-1.7 KB of stack each): a read handler that printed or compared a value 6,000
/// levels deep overflowed its 8 MiB HTTP thread, and the process aborted. Now each way of
/// calling those functions (among them `${}` and `dedup`, which ignore their errors) answers
/// within the rule and, past it, fails its own request with a 500 naming the rule; the server
/// serves the next request.
#[test]
fn printing_or_comparing_a_value_6000_levels_deep_is_a_500_for_its_request_alone() {
    let ways = [
        "print",
        "debug",
        "to_string",
        "to_debug",
        "interpolated",
        "added",
        "equal",
        "unequal",
        "in",
        "index_of",
        "dedup",
        "map_print",
        "map_equal",
    ];
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("deep"), data.path()).start();
    let mut client = server.client();
    for how in ways {
        let within = client.get(&format!("/walked/{how}/{DEPTH_MAX}"));
        assert_eq!(within.status, 200, "{how}: {}", within.text());
        let deep = client
            .request("GET", &format!("/walked/{how}/6000"), None)
            .unwrap_or_else(|e| panic!("{how}: no answer (before the fix, an abort): {e}"));
        assert_eq!(deep.status, 500, "{how}: {}", deep.text());
        let body = deep.json();
        assert_eq!(body["handler"], "walked", "{how}: {body}");
        // As in the test above, a slow enough machine runs out of time building the value.
        let error = body["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("more than 128 levels deep") || body["limit"] == "wall-clock time",
            "{how}: {body}"
        );
        let next = client.get("/nested/1");
        assert_eq!(next.status, 200, "{how}: {}", next.text());
    }
    server.stop();
}

/// A response nested in a response's body, a level per loop turn without a copy (`take`),
/// grew a million levels in about 0.4 s, unseen by the depth rule and Rhai's size checks (as
/// function pointers curried with function pointers did: `curry` no longer compiles), and
/// dropping it at the end of the handler overflowed the 64 MiB handler stack: the server
/// aborted. `respond` now refuses a body holding a response: the handler's 500, and the server
/// serves the next request.
#[test]
fn responses_nested_a_million_levels_deep_are_a_500_for_their_request_alone() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("deep"), data.path()).start();
    let mut client = server.client();
    let answer = client.request("GET", "/responded/1000000", None);
    let answer = answer.unwrap_or_else(|e| {
        panic!(
            "no answer (the server aborted): {e}\nstderr:\n{}",
            server.stderr_text()
        )
    });
    assert_eq!(answer.status, 500, "{}", answer.text());
    let next = Client::connect(server.address).get("/nested/1");
    assert_eq!(next.status, 200, "{}", next.text());
    server.stop();
}

/// Rhai's `to_json` and `parse_json`, which scripts can call, follow the depth rule: `to_json`
/// wrote objects 6,000 levels deep (a native walk no check bounded, where `print` of the same
/// value failed naming the rule), and `parse_json` refused the text of a value 128 levels
/// deep, which the rule allows everywhere else.
#[test]
fn rhai_s_to_json_and_parse_json_follow_the_depth_rule() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("deep"), data.path()).start();
    let mut client = server.client();
    let round = client.get("/json/round/128");
    let past = client.get("/json/to_json/6000");
    server.stop();
    assert_eq!(
        (round.status, round.json()),
        (200, serde_json::json!({ "depth": 128 })),
        "parse_json(to_json(a value 128 levels deep)): {}",
        round.text()
    );
    assert_eq!(
        past.status,
        500,
        "to_json of objects 6,000 levels deep: {}",
        past.text()
    );
}
