//! Messages point at the mistake: each load or run-time error below names the file, line and
//! column of what the user has to change, and says what is wrong there.

use std::path::Path;
use std::time::Duration;

use pure_lang::{App, Execution, HandlerError, Limits, Request, Tables, WriteSet};

/// Writes an app directory (`app.json` and the scripts) and loads it.
fn load(manifest: &str, files: &[(&str, &str)], limits: Limits) -> Result<App, String> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    write(dir.path(), manifest, files);
    App::load_with(dir.path(), limits).map_err(|e| e.to_string())
}

fn write(dir: &Path, manifest: &str, files: &[(&str, &str)]) {
    std::fs::write(dir.join("app.json"), manifest).expect("writes app.json");
    for (name, text) in files {
        std::fs::write(dir.join(name), text).expect("writes a script");
    }
}

fn load_error(files: &[(&str, &str)]) -> String {
    let manifest = r#"{"name": "m", "routes": {}}"#;
    match load(manifest, files, Limits::default()) {
        Ok(_) => panic!("{files:?} loaded"),
        Err(e) => e,
    }
}

const MANIFEST: &str = r#"{"name": "m", "routes": {}, "tables": {"t": ["n"]}}"#;

/// The scripts of the limit tests: each handler runs into one limit on a line of its own.
const LIMITS: &str = r#"fn fill(req) {
    for i in 0..10 { t.put(i, #{ n: i }); }
}
fn spin(req) {
    let x = 0;
    loop { x += 1; }
}
fn scan_all(req) {
    let total = 0;
    let rows = t.scan((), (), 100);
    rows.len()
}
fn grow(req) {
    let s = "x";
    loop {
        s += s;
    }
}
fn deep(req) { down(0) }
fn down(n) {
    let m = n + 1;
    down(m)
}
"#;

/// Runs `handler` on tables with ten rows, compiled or in Rhai, and returns its limit error as
/// (limit, file, line, column).
fn limit_hit(handler: &str, interpreted: bool, limits: Limits) -> (String, String, usize, usize) {
    let manifest = r#"{"name": "m", "routes": {}, "tables": {"t": ["n"]},
                       "limits": {"scan_rows": 5}}"#;
    let mut app = load(manifest, &[("a.rhai", LIMITS)], limits).expect("loads");
    app.set_interpreted(interpreted);
    let mut tables = Tables::new(1);
    let mut writes = WriteSet::default();
    app.run_write("fill", &Request::default(), &mut tables, &mut writes)
        .expect("fills the table");
    writes.clear();
    match app.run_write(handler, &Request::default(), &mut tables, &mut writes) {
        Err(HandlerError::Limit {
            limit,
            file,
            line,
            column,
            ..
        }) => (limit, file, line, column),
        other => panic!("{handler}: expected a limit, got {other:?}"),
    }
}

fn counted() -> Limits {
    Limits {
        wall_clock_max: Duration::from_secs(60),
        ..Limits::default()
    }
}

#[test]
fn a_limit_names_the_statement_or_call_that_hit_it() {
    for interpreted in [false, true] {
        let hit = |handler: &str, limits: Limits| limit_hit(handler, interpreted, limits);
        let at =
            |limit: &str, line, column| (limit.to_string(), "a.rhai".to_string(), line, column);
        let mode = if interpreted { "in Rhai" } else { "compiled" };
        assert_eq!(hit("spin", counted()), at("operations", 6, 14), "{mode}");
        assert_eq!(
            hit("scan_all", counted()),
            at("rows scanned", 10, 18),
            "{mode}"
        );
        let (limit, file, line, column) = hit("grow", counted());
        assert!(limit.starts_with("size"), "{mode}: {limit}");
        assert_eq!((file.as_str(), line, column), ("a.rhai", 16, 11), "{mode}");
        assert_eq!(hit("deep", counted()), at("call depth", 22, 5), "{mode}");
        // Out of time: wherever the loop was, it is on line 6.
        let timed = Limits {
            wall_clock_max: Duration::from_millis(20),
            operations_max: u64::MAX / 2,
            ..Limits::default()
        };
        let (limit, file, line, _) = hit("spin", timed);
        assert_eq!(
            (limit.as_str(), file.as_str(), line),
            ("wall-clock time", "a.rhai", 6),
            "{mode}"
        );
    }
}

/// A size limit hit inside a call that is a statement of its own, or inside a call's
/// argument, names that statement, not the one before it nor the fn line.
#[test]
fn a_size_limit_inside_a_call_names_its_statement() {
    let manifest = r#"{"name": "m", "routes": {}, "tables": {"t": ["n"]}}"#;
    let script = "fn pad_it(req) {\n    let s = \"x\";\n    s.pad(2000000, \"y\");\n    s\n}\n\
                  fn put_it(req) {\n    t.put(1, #{ n: \"x\".pad(2000000, \"y\") });\n}\n";
    for interpreted in [false, true] {
        let mut app = load(manifest, &[("a.rhai", script)], counted()).expect("loads");
        app.set_interpreted(interpreted);
        for (handler, line) in [("pad_it", 3), ("put_it", 7)] {
            let mut tables = Tables::new(1);
            let mut writes = WriteSet::default();
            match app.run_write(handler, &Request::default(), &mut tables, &mut writes) {
                Err(HandlerError::Limit {
                    limit, line: at, ..
                }) => {
                    assert!(limit.starts_with("size"), "{handler}: {limit}");
                    assert_eq!(at, line, "{handler}, interpreted: {interpreted}");
                }
                other => panic!("{handler}: expected a limit, got {other:?}"),
            }
        }
    }
}

/// Each call names where it stopped itself: two calls of one handler that stop in different
/// loops name each its own.
#[test]
fn each_call_stopped_by_a_limit_names_its_own_place() {
    let manifest = r#"{"name": "m", "routes": {}, "tables": {"t": ["n"]}}"#;
    let script = "fn branchy(req) {\n    let x = 0;\n    if t.count() == 0 {\n        loop { x += 1; }\n    }\n    loop { x += 2; }\n}\nfn one(req) { t.put(1, #{ n: 1 }); }\n";
    for interpreted in [false, true] {
        let mut app = load(manifest, &[("a.rhai", script)], counted()).expect("loads");
        app.set_interpreted(interpreted);
        let mut tables = Tables::new(1);
        let mut writes = WriteSet::default();
        let place = |app: &App, tables: &mut Tables| {
            let mut writes = WriteSet::default();
            match app.run_write("branchy", &Request::default(), tables, &mut writes) {
                Err(HandlerError::Limit { line, column, .. }) => (line, column),
                other => panic!("expected a limit, got {other:?}"),
            }
        };
        assert_eq!(
            place(&app, &mut tables),
            (4, 18),
            "interpreted: {interpreted}"
        );
        app.run_write("one", &Request::default(), &mut tables, &mut writes)
            .expect("a row");
        assert_eq!(
            place(&app, &mut tables),
            (6, 14),
            "interpreted: {interpreted}"
        );
    }
}

/// The limit handlers above are compiled, so that both paths are tested.
#[test]
fn the_limit_handlers_are_compiled() {
    let app = load(MANIFEST, &[("a.rhai", LIMITS)], Limits::default()).expect("loads");
    for handler in ["spin", "scan_all", "grow", "deep"] {
        assert_eq!(
            app.execution(handler),
            Some(Execution::Compiled),
            "{handler}"
        );
    }
}

#[test]
fn a_missing_semicolon_is_reported_where_it_is_missing() {
    let error = load_error(&[
        ("a.rhai", "fn ok(r) { 1 }\n"),
        (
            "b.rhai",
            "fn f(r) {\n    let a = 1\n    let b = 2;\n    a + b\n}\n",
        ),
    ]);
    assert!(
        error.starts_with("b.rhai:2:14: missing ; at the end of this statement"),
        "{error}"
    );
    // After a string and before a comment: just after the string.
    let error = load_error(&[(
        "a.rhai",
        "fn f(r) {\n    let a = \"x y\" // a comment\n    // another\n    a\n}\n",
    )]);
    assert!(
        error.starts_with("a.rhai:2:18: missing ; at the end of this statement"),
        "{error}"
    );
}

#[test]
fn an_unclosed_brace_names_where_it_opened() {
    // The next function starts inside the unclosed body.
    let error = load_error(&[(
        "a.rhai",
        "fn a(r) {\n    let x = `${r}`;\n    if x == \"{\" { 1 }\n\nfn b(r) { 2 }\n",
    )]);
    assert!(
        error.starts_with("a.rhai:1:9: this { is never closed (the next fn starts at a.rhai:5:1)"),
        "{error}"
    );
    let error = load_error(&[("a.rhai", "fn a(r) { 1 }\n}\nfn b(r) { 2 }\n")]);
    assert!(
        error.starts_with("a.rhai:2:1: this } closes no {"),
        "{error}"
    );
    // The file ends inside it, and the next file's functions would be read as inside it.
    for files in [
        &[("a.rhai", "fn a(r) {\n    // }\n    1\n")][..],
        &[
            ("a.rhai", "fn a(r) {\n    // }\n    1\n"),
            ("b.rhai", "fn b(r) { 2 }\n"),
        ][..],
    ] {
        let error = load_error(files);
        assert!(
            error.starts_with("a.rhai:1:9: this { is never closed (a.rhai ends inside it)"),
            "{error}"
        );
    }
}

#[test]
fn the_reason_a_handler_is_not_compiled_names_the_construct() {
    let script = "fn optional(r) {\n    let m = r.body;\n    m?.x\n}\n\
                  fn switched(r) {\n    switch r.body { 1 => 2, _ => 3 }\n}\n\
                  fn calls(r) {\n    1 + helper(r)\n}\n\
                  fn helper(r) {\n    try { r.x } catch { 2 }\n}\n";
    let app = load(
        MANIFEST,
        &[("a.rhai", "fn x(r) { 1 }\n"), ("b.rhai", script)],
        Limits::default(),
    )
    .expect("loads");
    let reason = |handler: &str| match app.execution(handler) {
        Some(Execution::Interpreted { reason }) => reason,
        other => panic!("{handler}: {other:?}"),
    };
    assert_eq!(
        reason("optional"),
        "b.rhai:3:6: the optional chain ?. is not compiled"
    );
    assert_eq!(reason("switched"), "b.rhai:6:5: switch is not compiled");
    assert_eq!(
        reason("calls"),
        "b.rhai:12:5: try/catch is not compiled (in helper(), which it calls)"
    );
}

/// A path parameter without a type is a string: `{id}` used as an integer key misses. The 4xx
/// the handler then throws says so (and a warning in the log), in either engine; a key that is
/// not there as an integer either, or a typed parameter, gets the handler's answer alone.
#[test]
fn a_string_key_that_misses_an_integer_row_is_named_in_the_4xx() {
    let manifest = r#"{"name": "m", "tables": {"todos": ["title"]}, "routes": {
        "POST /todos": "add", "GET /todos/{id}": "get_one", "GET /typed/{id:int}": "get_one",
        "DELETE /todos/{id}": "remove"}}"#;
    let script = r#"fn add(request) { todos.put(5, #{ title: "five" }); 5 }
fn get_one(request) {
    let row = todos.get(request.params.id);
    if row == () { throw #{ status: 404, error: `no todo ${request.params.id}` }; }
    row.title
}
fn remove(request) {
    if !todos.delete(request.params.id) { throw #{ status: 404, error: "no such todo" }; }
    true
}
"#;
    for interpreted in [false, true] {
        let mut app = load(manifest, &[("a.rhai", script)], Limits::default()).expect("loads");
        app.set_interpreted(interpreted);
        let mut tables = Tables::new(1);
        let mut writes = WriteSet::default();
        app.run_write("add", &Request::default(), &mut tables, &mut writes)
            .expect("adds");
        writes.clear();
        let route = |pattern: &str| {
            app.routes()
                .iter()
                .position(|r| format!("{} {}", r.method, r.path) == pattern)
                .expect("the route")
        };
        let call = |pattern: &str, id: &str, tables: &mut Tables| {
            let params = vec![("id".to_string(), id.to_string())];
            let request = app
                .request(route(pattern), params, Vec::new(), Default::default(), b"")
                .expect("a request");
            let handler = app.routes()[route(pattern)].handler.clone();
            let mut writes = WriteSet::default();
            app.run_write(&handler, &request, tables, &mut writes)
        };
        let hint = |result: Result<_, HandlerError>| match result {
            Err(HandlerError::Thrown { status: 404, body }) => body.get("hint").cloned(),
            other => panic!("expected a 404, got {other:?}"),
        };
        let expected = "todos has no row at the string key \"5\" but has one at the integer 5: a \
                        path parameter is a string unless its route declares it an integer \
                        ({name:int})";
        let mode = if interpreted { "in Rhai" } else { "compiled" };
        assert_eq!(
            hint(call("GET /todos/{id}", "5", &mut tables)),
            Some(expected.into()),
            "{mode}"
        );
        assert_eq!(
            hint(call("DELETE /todos/{id}", "5", &mut tables)),
            Some(expected.into()),
            "{mode}"
        );
        // No row at 6 either, nor at "05" (not how 5 is written): the answer alone.
        for id in ["6", "05", "x"] {
            assert_eq!(
                hint(call("GET /todos/{id}", id, &mut tables)),
                None,
                "{mode}: {id}"
            );
        }
        assert!(
            matches!(call("GET /typed/{id:int}", "5", &mut tables), Ok(_)),
            "{mode}"
        );
    }
}
