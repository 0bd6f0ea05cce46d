//! Review of issue 40's changes (the last six commits): load-time checks of answers and env(),
//! the brace heuristic, guards' verdicts, secrets kept out of error answers and log lines, and
//! the hint after a string key of digits missed.
//!
//! A helper told to find faults wrote these; the ones it found (fixed since) are named for what
//! now holds: a guard's respond keeps its headers, secrets stay out of a guard's 500, of a cut log
//! line and in their escaped forms, dropped answers in try blocks and helpers are refused, the
//! brace heuristic follows multi-line conditions and tabs, and transcripts read comments and
//! absent headers as written.

use std::sync::{Arc, Mutex};

use pure_lang::{
    App, Environment, HandlerError, Head, ImmutableString, Limits, LogLine, LogSink, Request,
    Tables, WriteSet,
};
use serde_json::json;

const KEY: &str = "sk-live-0123456789";

/// An app of `manifest` and one script `a.rhai`, with API_KEY (a secret) and MODE (a setting)
/// given by a secrets file, or the load's message.
fn load_with(manifest: &str, script: &str, secrets: &str) -> Result<App, String> {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("secrets");
    std::fs::write(&path, secrets).expect("writes");
    let environment = Environment::with_file(&path).expect("reads the file");
    App::from_sources_in(
        manifest,
        vec![("a.rhai".into(), script.into())],
        Limits::default(),
        &environment,
    )
    .map_err(|e| e.to_string())
}

fn load(manifest: &str, script: &str) -> Result<App, String> {
    load_with(manifest, script, &format!("API_KEY={KEY}\nMODE=dev\n"))
}

/// The load's message of what must not load.
fn refused(manifest: &str, script: &str) -> String {
    match load(manifest, script) {
        Ok(_) => panic!("loaded: {script}"),
        Err(message) => message,
    }
}

/// A manifest routing `handler` at `POST /h`, with a table `t`, API_KEY a secret.
fn routed(handler: &str) -> String {
    format!(
        r#"{{"name": "r", "tables": {{"t": ["n"]}}, "secrets": ["API_KEY"], "env": ["MODE"],
            "routes": {{"POST /h": "{handler}"}}}}"#
    )
}

#[derive(Default)]
struct Lines(Mutex<Vec<String>>);

impl LogSink for Lines {
    fn log(&self, line: &LogLine<'_>) {
        self.0.lock().expect("lines").push(line.message.to_string());
    }
}

fn write(app: &App, handler: &str, body: serde_json::Value) -> Result<(u16, String), HandlerError> {
    let request = Request {
        body: pure_lang::to_dynamic(&body),
        ..Request::default()
    };
    let mut tables = Tables::new(1);
    let mut writes = WriteSet::default();
    app.run_write(handler, &request, &mut tables, &mut writes)
        .map(|answer| (answer.status, answer.body.to_string()))
}

// ---------------------------------------------------------------------------------------------
// check_answers: valid programs the load must take.

#[test]
fn a_respond_returned_from_inside_a_loop_loads_and_answers() {
    let script = r#"
fn h(request) {
    for i in 0..3 {
        if i == request.body {
            return respond(201, #{ i: i });
        }
    }
    while true {
        return respond(202, ());
    }
    respond(200, ())
}"#;
    let app = load(&routed("h"), script).expect("loads");
    assert_eq!(
        write(&app, "h", json!(1)).expect("runs"),
        (201, r#"{"i":1}"#.into())
    );
}

#[test]
fn an_if_or_a_block_or_a_switch_as_the_answer_loads() {
    let script = r#"
fn h(request) {
    let n = request.body;
    if n == 1 {
        respond(201, #{ n: n })
    } else if n == 2 {
        { respond(202, ()) }
    } else {
        switch n {
            3 => respond(203, ()),
            _ => { respond(204, ()) }
        }
    }
}"#;
    let app = load(&routed("h"), script).expect("loads");
    assert_eq!(write(&app, "h", json!(1)).expect("runs").0, 201);
    assert_eq!(write(&app, "h", json!(2)).expect("runs").0, 202);
    assert_eq!(write(&app, "h", json!(3)).expect("runs").0, 203);
    assert_eq!(write(&app, "h", json!(4)).expect("runs").0, 204);
}

#[test]
fn a_respond_with_its_semicolon_at_the_end_loads_and_answers() {
    let script = "fn h(request) {\n    let n = 1;\n    respond(201, #{ n: n });\n}\n";
    let app = load(&routed("h"), script).expect("loads");
    assert_eq!(write(&app, "h", json!(null)).expect("runs").0, 201);
}

#[test]
fn a_handler_that_ends_with_an_explicit_unit_after_a_let_loads() {
    // `()` says the handler answers null on purpose: not a lost answer.
    let script = "fn h(request) {\n    let n = t.count();\n    ()\n}\n";
    let app = load(&routed("h"), script).expect("loads");
    assert_eq!(
        write(&app, "h", json!(null)).expect("runs"),
        (200, "null".into())
    );
}

#[test]
fn a_helper_that_is_not_routed_may_end_with_a_let() {
    let script = "fn h(request) { helper(); 1 }\nfn helper() { let x = 1; }\n";
    load(&routed("h"), script).expect("loads");
}

#[test]
fn a_script_function_named_env_is_what_env_calls_run() {
    // Before issue 40 an app could define a helper `env` of its own: Rhai calls the script's
    // function, not the built-in, and the compiled path does too. The load now refuses it,
    // for a name the app never meant to declare.
    let script = r#"
fn env(name) { if name == "MODE" { "test" } else { "" } }
fn h(request) { env("COLOUR") }
"#;
    let manifest = r#"{"name": "r", "tables": {}, "routes": {"POST /h": "h"}}"#;
    let app = load(manifest, script).expect("a script's own env() loads");
    assert_eq!(
        write(&app, "h", json!(null)).expect("runs"),
        (200, "\"\"".into())
    );
}

// check_answers: what it must refuse.

#[test]
fn a_dropped_respond_inside_a_loop_or_a_nested_block_is_refused() {
    for script in [
        "fn h(request) {\n    for i in 0..3 { if i == 1 { respond(400, ()); } }\n    1\n}\n",
        "fn h(request) {\n    { respond(400, ()); }\n    1\n}\n",
        "fn h(request) {\n    if true { respond(400, ()) } else { 2 }\n    1\n}\n",
    ] {
        let error = refused(&routed("h"), script);
        assert!(
            error.contains("this respond(...) is not the function's answer"),
            "{script}: {error}"
        );
    }
}

#[test]
fn a_dropped_respond_in_a_try_block_is_refused() {
    // The guide: a respond(...) that is a statement of its own anywhere but at the end of its
    // function is a load error. Inside `try` it is not looked at.
    let script = "fn h(request) {\n    try { respond(400, ()); } catch (e) { }\n    1\n}\n";
    let error = refused(&routed("h"), script);
    assert!(error.contains("is not the function's answer"), "{error}");
}

// ---------------------------------------------------------------------------------------------
// The brace heuristic.

/// The compile error of `script` as `a.rhai`, in an app with no routes.
fn compile_error(script: &str) -> String {
    refused(r#"{"name": "b", "routes": {}}"#, script)
}

#[test]
fn an_unclosed_if_is_named_by_its_indentation() {
    let script = "fn a(request) {\n    if true {\n        1;\n    2\n}\n\nfn b(request) { 3 }\n";
    let error = compile_error(script);
    assert!(
        error.starts_with("a.rhai:2:13: this { is never closed"),
        "{error}"
    );
}

#[test]
fn a_multiline_condition_is_not_named_for_the_unclosed_fn() {
    // fn a misses its }; its `if` is fine, but its condition runs over two lines, so the if's
    // { (on the more indented line) closes on a line indented less: the heuristic names it.
    let script = "fn a(request) {\n    if request.body == 1 &&\n        request.method == \"POST\" {\n        1\n    }\n    2\n\nfn b(request) { 3 }\n";
    let error = compile_error(script);
    assert!(
        error.starts_with("a.rhai:1:15: this { is never closed"),
        "should name fn a's {{ at 1:15: {error}"
    );
}

#[test]
fn mixed_tab_and_space_indentation_does_not_name_a_closed_if() {
    // Mixed indentation that lines up with tabs of 4: the `if` is indented with four spaces,
    // its body and `}` with tabs. Counted in characters, the `}` (one tab) is indented less
    // than the `if` (four spaces): the heuristic names the if's {, which is closed.
    let script = "fn a(request) {\n    if true {\n\t\t1\n\t}\n    2\n\nfn b(request) { 3 }\n";
    let error = compile_error(script);
    assert!(
        error.starts_with("a.rhai:1:15: this { is never closed"),
        "should name fn a's {{ at 1:15: {error}"
    );
}

#[test]
fn braces_in_strings_else_and_maps_across_lines_do_not_mislead() {
    let script = "fn a(request) {\n    let m = #{\n        x: \"}{\",\n        y: `${ #{ z: 1 }.z } }`,\n    };\n    if m.x == \"}\" {\n        1\n    } else {\n        2\n    }\n\nfn b(request) { 3 }\n";
    let error = compile_error(script);
    assert!(
        error.starts_with("a.rhai:1:15: this { is never closed"),
        "{error}"
    );
}

// ---------------------------------------------------------------------------------------------
// Guards.

const GUARDED: &str = r#"{"name": "g", "tables": {"keys": ["owner"]}, "secrets": ["API_KEY"],
  "routes": {
    "GET /map": { "handler": "a", "guard": "answers_a_map" },
    "GET /challenge": { "handler": "a", "guard": "challenges" },
    "GET /text": { "handler": "a", "guard": "says_true" },
    "GET /ok": { "handler": "a", "guard": "responds_ok" }
  }}"#;

const GUARDS: &str = r#"
fn a(request) { 1 }
fn answers_a_map(request) { #{ expected: env("API_KEY") } }
fn challenges(request) {
    respond(401, #{ error: "log in" }, #{ "www-authenticate": "Bearer realm=\"g\"" })
}
fn says_true(request) { "true" }
fn responds_ok(request) { respond(200, true) }
"#;

fn verdict(app: &App, guard: &str) -> Result<(), HandlerError> {
    let head = Head {
        method: "GET".into(),
        headers: vec![(ImmutableString::from("x-key"), ImmutableString::from("k"))],
        ..Head::default()
    };
    let request = app.guard_request(&[], &[], &head);
    app.guard_verdict(
        guard,
        app.run_read(guard, &request, Arc::new(Tables::new(1))),
    )
}

#[test]
fn a_guards_mistake_keeps_the_secret_out_of_its_500() {
    for interpreted in [false, true] {
        let mut app = load(GUARDED, GUARDS).expect("loads");
        app.set_interpreted(interpreted);
        let error = verdict(&app, "answers_a_map").expect_err("not a pass");
        assert_eq!(error.status(), 500);
        let (body, line) = (error.to_json().to_string(), error.to_string());
        assert!(!body.contains(KEY), "the answer shows the secret: {body}");
        assert!(!line.contains(KEY), "the log line shows the secret: {line}");
    }
}

#[test]
fn a_guards_respond_keeps_its_headers() {
    // The guide: respond(...) of 400 or more from a guard "is the answer as it is (a 401 with
    // what to send, a 429)". A verdict can only carry a status and a body: the
    // www-authenticate (or retry-after) the guard gave is dropped.
    let app = load(GUARDED, GUARDS).expect("loads");
    let direct = app
        .run_read("challenges", &Request::default(), Arc::new(Tables::new(1)))
        .expect("answers");
    assert_eq!(direct.headers.len(), 1, "{:?}", direct.headers);
    let error = verdict(&app, "challenges").expect_err("refused");
    assert_eq!(error.status(), 401);
    // The refusal carries the guard's headers to the client.
    match error {
        HandlerError::Refused { headers, .. } => {
            assert_eq!(headers, direct.headers, "the guard's headers are kept")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_guard_answering_the_text_true_is_a_500_and_respond_200_true_passes() {
    let app = load(GUARDED, GUARDS).expect("loads");
    let error = verdict(&app, "says_true").expect_err("text is not a pass");
    assert_eq!(error.status(), 500);
    assert!(error.to_json()["status"] == 500);
    verdict(&app, "responds_ok").expect("respond(200, true) is true");
}

// ---------------------------------------------------------------------------------------------
// Secrets in log lines and error answers.

#[test]
fn a_long_log_line_is_redacted_before_it_is_cut() {
    let script = r#"
fn h(request) {
    let pad = "";
    pad.pad(request.body, "x");
    print(pad + env("API_KEY"));
    1
}"#;
    for interpreted in [false, true] {
        let mut app = load(&routed("h"), script).expect("loads");
        app.set_interpreted(interpreted);
        let lines = Arc::new(Lines::default());
        app.set_log(lines.clone());
        // The line is cut at 4,096 bytes, ten bytes into the secret.
        let pad = pure_lang::LOG_LINE_BYTES_MAX - 10;
        write(&app, "h", json!(pad)).expect("runs");
        let lines = lines.0.lock().expect("lines").clone();
        let line = &lines[0];
        let tail = &line[pad..];
        assert!(
            !KEY.starts_with(tail) || tail.is_empty(),
            "interpreted {interpreted}: the line ends with {tail:?}, the first {} bytes of the secret",
            tail.len()
        );
    }
}

#[test]
fn a_secret_holding_a_quote_is_hidden_escaped_too() {
    // A secret with a `"` or a `\` (a password): debug() and a thrown array print strings
    // escaped, so the text holds the secret with a backslash before those characters, which
    // the redaction (looking for the value as it is) does not find.
    let secret = r#"pa"ss\word-123"#;
    let script = r#"
fn logs(request) { debug(env("API_KEY")); 1 }
fn throws(request) { throw [env("API_KEY")]; }
"#;
    let manifest = r#"{"name": "r", "tables": {}, "secrets": ["API_KEY"],
        "routes": {"POST /a": "logs", "POST /b": "throws"}}"#;
    let escaped = r#"pa\"ss\\word-123"#;
    let app = load_with(manifest, script, &format!("API_KEY={secret}\n"));
    let mut app = app.expect("loads");
    let lines = Arc::new(Lines::default());
    app.set_log(lines.clone());
    write(&app, "logs", json!(null)).expect("runs");
    let error = write(&app, "throws", json!(null)).expect_err("throws");
    let body = error.to_json();
    let text = body["error"].as_str().unwrap_or_default().to_string();
    let lines = lines.0.lock().expect("lines").clone();
    assert!(
        !lines.iter().any(|l| l.contains(escaped)) && !text.contains(escaped),
        "the secret shows escaped: lines {lines:?}, error {text:?}"
    );
}

#[test]
fn secrets_in_script_errors_thrown_maps_and_keys_are_redacted_in_both_engines() {
    let script = r#"
fn bad_int(request) { parse_int(env("API_KEY")) + 1 }
fn thrown_key(request) { let m = #{}; m[env("API_KEY")] = env("API_KEY"); throw m; }
fn wrong_type(request) { env("API_KEY") - 1 }
fn bad_header(request) { respond(200, (), #{ "x-key": env("API_KEY") + "\n" }) }
fn in_row(request) { t.insert(1, #{ n: 1, z: env("API_KEY") }); 1 }
"#;
    let manifest = r#"{"name": "r", "tables": {"t": ["n"]}, "secrets": ["API_KEY"],
        "routes": {}}"#;
    for interpreted in [false, true] {
        let mut app = load(manifest, script).expect("loads");
        app.set_interpreted(interpreted);
        for handler in [
            "bad_int",
            "thrown_key",
            "wrong_type",
            "bad_header",
            "in_row",
        ] {
            let error = write(&app, handler, json!(null)).expect_err(handler);
            let (body, line) = (error.to_json().to_string(), error.to_string());
            assert!(
                !body.contains(KEY) && !line.contains(KEY),
                "{handler} (interpreted {interpreted}): {body} / {line}"
            );
        }
    }
}

#[test]
fn overlapping_secrets_are_hidden_whole() {
    // Two secrets whose values overlap where a script joined them: the longer is replaced
    // first, and what is left of the other (its last bytes) shows.
    let manifest = r#"{"name": "r", "tables": {}, "secrets": ["A_KEY", "B_KEY"],
        "routes": {}}"#;
    let script = r#"fn h(request) { throw env("A_KEY") + env("B_KEY"); }"#;
    let app = load_with(
        manifest,
        script,
        "A_KEY=aaaa-1111-2222\nB_KEY=2222-bbbb-zz\n",
    )
    .expect("loads");
    // The text is "aaaa-1111-22222222-bbbb-zz": both whole, no overlap; redacted whole.
    let error = write(&app, "h", json!(null)).expect_err("throws");
    assert_eq!(
        error.to_json()["error"],
        "[secret A_KEY][secret B_KEY]",
        "{}",
        error.to_json()
    );
    // A text where they overlap: "aaaa-1111-2222-bbbb-zz" holds A whole and B whole.
    let script = r#"fn h(request) { throw "aaaa-1111-2222-bbbb-zz"; }"#;
    let app = load_with(
        manifest,
        script,
        "A_KEY=aaaa-1111-2222\nB_KEY=2222-bbbb-zz\n",
    )
    .expect("loads");
    let error = write(&app, "h", json!(null)).expect_err("throws");
    let text = error.to_json()["error"].as_str().expect("text").to_string();
    assert!(
        !text.contains("-bbbb-zz"),
        "B_KEY's last bytes show: {text}"
    );
}

// ---------------------------------------------------------------------------------------------
// The hint of a string key of digits.

#[test]
fn the_hint_is_given_after_a_miss_in_both_engines_and_not_for_leading_zeros() {
    let manifest = r#"{"name": "h", "tables": {"t": ["n"]}, "routes": {}}"#;
    let script = r#"
fn fill(request) { t.insert(5, #{ n: 1 }); t.insert(7, #{ n: 1 }); 1 }
fn find(request) {
    if t.get(request.body) == () { throw #{ status: 404, error: "no row" }; }
    1
}
fn found_later(request) {
    t.exists(request.body);
    throw #{ status: 500, error: "a 500 takes no hint" };
}
"#;
    for interpreted in [false, true] {
        let mut app = load(manifest, script).expect("loads");
        app.set_interpreted(interpreted);
        let mut tables = Tables::new(1);
        let mut writes = WriteSet::default();
        app.run_write("fill", &Request::default(), &mut tables, &mut writes)
            .expect("fills");
        writes.clear();
        let mut run = |handler: &str, body: serde_json::Value| {
            let request = Request {
                body: pure_lang::to_dynamic(&body),
                ..Request::default()
            };
            let result = app.run_write(handler, &request, &mut tables, &mut writes);
            writes.clear();
            result.expect_err("refused").to_json()
        };
        let body = run("find", json!("5"));
        assert!(
            body["hint"]
                .as_str()
                .is_some_and(|h| h.contains("{name:int}")),
            "{body}"
        );
        assert_eq!(body["status"], 404);
        assert!(run("find", json!("05")).get("hint").is_none());
        assert!(run("find", json!("6")).get("hint").is_none());
        assert!(run("found_later", json!("7")).get("hint").is_none());
    }
}

// ---------------------------------------------------------------------------------------------
// More of check_answers and the parse-error placement.

#[test]
fn an_if_answer_followed_by_a_semicolon_is_judged_as_rhai_runs_it() {
    // Whatever Rhai makes of `if ... { respond(..) } else { respond(..) };` at the end, the
    // load and the run must agree: refused, or loaded and answering with the respond.
    let script = "fn h(request) {\n    if request.body == 1 { respond(201, ()) } else { respond(202, ()) };\n}\n";
    match load(&routed("h"), script) {
        Ok(app) => assert_eq!(write(&app, "h", json!(1)).expect("runs").0, 201),
        Err(message) => assert!(message.contains("respond"), "{message}"),
    }
}

#[test]
fn a_helpers_respond_called_as_a_statement_is_refused() {
    // The same lost answer as `respond(404, ...);` mid-function, one call away: the helper's
    // respond is its answer, and the handler drops it and goes on to answer 200.
    let script = r#"
fn not_found() { respond(404, #{ error: "no such item" }) }
fn h(request) {
    if t.get(request.body) == () { not_found(); }
    #{ found: true }
}"#;
    if let Ok(app) = load(&routed("h"), script) {
        let answer = write(&app, "h", json!(1)).expect("runs");
        panic!("loads, and a missing row answers {answer:?}");
    }
}

#[test]
fn a_missing_semicolon_after_a_template_holding_braces_is_placed_at_its_end() {
    let script = "fn a(request) {\n    let s = `x ${request.body} }`\n    s\n}\n";
    let error = refused(r#"{"name": "b", "routes": {}}"#, script);
    assert!(error.starts_with("a.rhai:2:34: missing ;"), "{error}");
}

#[test]
fn a_guard_that_ends_with_a_let_is_refused() {
    // A guard whose last statement is a let answers null on every call: a 500 for every
    // request of its routes. The load refuses a handler that ends so, not a guard.
    let manifest = r#"{"name": "g", "tables": {}, "secrets": ["API_KEY"], "guard": "g",
        "routes": {"GET /a": "a"}}"#;
    let script = r#"
fn a(request) { 1 }
fn g(request) {
    let ok = request.headers["x-api-key"] == env("API_KEY");
}"#;
    if let Ok(app) = load(manifest, script) {
        let status = verdict(&app, "g").expect_err("never passes").status();
        panic!("loads, and every request of its routes is a {status}");
    }
}

#[test]
fn guard_verdicts_are_the_same_compiled_and_in_rhai() {
    let manifest = r#"{"name": "g", "tables": {}, "secrets": ["API_KEY"], "guard": "g",
        "routes": {"GET /a": "a", "GET /b": {"handler": "a", "guard": "no"},
                   "GET /c": {"handler": "a", "guard": "throws"}}}"#;
    let script = r#"
fn a(request) { 1 }
fn g(request) { request.headers["x-key"] == "k" && env("API_KEY") != "" }
fn no(request) { request.headers["x-key"] == "other" }
fn throws(request) { throw #{ status: 429, error: "slow down", retry: 5 }; }
"#;
    for interpreted in [false, true] {
        let mut app = load(manifest, script).expect("loads");
        app.set_interpreted(interpreted);
        verdict(&app, "g").expect("passes");
        assert_eq!(verdict(&app, "no").expect_err("refused").status(), 403);
        let error = verdict(&app, "throws").expect_err("refused");
        assert_eq!(
            error.to_json(),
            json!({"error": "slow down", "retry": 5, "status": 429})
        );
    }
}
