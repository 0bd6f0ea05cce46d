//! The depth rule inside a handler: Rhai's functions that make a value into text or compare two
//! (a native call per level of the value, which overflowed the stack 6,000 levels down: issue
//! 36) take values up to 128 levels deep and fail the call, naming the rule, past that, in
//! every way a script can call them, even where Rhai itself ignores their errors.

use std::sync::{Arc, Mutex};

use pure_lang::{
    App, HandlerError, Level, Limits, LogLine, LogSink, Request, Tables, WriteSet, DEPTH_MAX,
};
use serde_json::{json, Value};

const MANIFEST: &str = r#"{ "name": "n", "routes": {}, "tables": { "t": ["v"] } }"#;

/// Each way a script can call the functions, on `a` (and `b`, as deep): what Rhai does with
/// their errors differs (it passes on those of `print` and `==`, ignores those of `to_string`
/// in `${}` and `+`, and those of `==` in `dedup`).
const CALLS: &[&str] = &[
    "print(a)",
    "debug(a)",
    "to_string(a)",
    "a.to_debug()",
    "`a is ${a}`",
    r#""a is " + a"#,
    r#"a + " is a""#,
    r#"{ let s = "a is "; s += a; s }"#,
    "a == b",
    "a != b",
    "a in [b]",
    "[b].contains(a)",
    "[b].index_of(a)",
    "{ let l = [a, b]; l.dedup(); l.len() }",
    r#"{ let r = "caught"; try { r = `${a}`; } catch (e) { r = "catch ran"; } r }"#,
];

/// A handler per call (`h0`, `h1`...), on a value as deep as the body's `levels`, an array or
/// a map as its `map` says; the line after the call logs "after".
fn script() -> String {
    let mut script = String::from(
        "fn nested(levels, map) {\n\
         \x20   let v = 1;\n\
         \x20   for i in 0..levels { v = if map { #{ a: v } } else { [v] }; }\n\
         \x20   v\n\
         }\n",
    );
    for (i, call) in CALLS.iter().enumerate() {
        script.push_str(&format!(
            "fn h{i}(req) {{\n\
             \x20   let a = nested(req.body.levels, req.body.map); let b = a;\n\
             \x20   let r = {call};\n\
             \x20   print(\"after\");\n\
             \x20   r\n\
             }}\n"
        ));
    }
    script
}

#[derive(Default)]
struct Capture(Mutex<Vec<String>>);

impl LogSink for Capture {
    fn log(&self, line: &LogLine<'_>) {
        if line.level == Level::Info {
            self.0.lock().unwrap().push(line.message.to_string());
        }
    }
}

/// Runs every handler on values `levels` deep, as a read and as a write; the answers (or
/// errors) and the lines logged, per handler.
fn run_all(levels: usize, map: bool) -> Vec<(Result<Value, HandlerError>, Vec<String>)> {
    let files = vec![("a.rhai".to_string(), script())];
    let mut app = App::from_sources(MANIFEST, files, Limits::default()).expect("loads");
    let capture = Arc::new(Capture::default());
    app.set_log(capture.clone());
    let request = Request {
        body: pure_lang::to_dynamic(&json!({ "levels": levels, "map": map })),
        ..Request::default()
    };
    let mut results = Vec::new();
    for i in 0..CALLS.len() {
        let handler = format!("h{i}");
        let mut tables = Tables::new(app.schema().tables.len());
        let mut writes = WriteSet::default();
        let write = app.run_write(&handler, &request, &mut tables, &mut writes);
        let printed = std::mem::take(&mut *capture.0.lock().unwrap());
        results.push((write.map(|answer| answer.body.to_value()), printed));
        let read = app.run_read(&handler, &request, Arc::new(tables));
        let printed = std::mem::take(&mut *capture.0.lock().unwrap());
        results.push((read.map(|answer| answer.body.to_value()), printed));
    }
    results
}

/// 128 levels: every call runs, and the line after it too.
#[test]
fn values_as_deep_as_the_rule_allows_are_printed_and_compared() {
    for map in [false, true] {
        for (i, (answer, printed)) in run_all(DEPTH_MAX, map).into_iter().enumerate() {
            let call = CALLS[i / 2];
            let answer = answer.unwrap_or_else(|e| panic!("{call} (map: {map}): {e}"));
            assert_ne!(answer, json!(""), "{call}");
            assert_eq!(printed.last().map(String::as_str), Some("after"), "{call}");
        }
    }
}

/// 129 levels: every call fails, at the call's line and column, naming the rule; nothing after
/// it runs (no "after" line), and a `catch` does not see the error.
#[test]
fn values_one_level_deeper_fail_the_call_naming_the_rule() {
    for map in [false, true] {
        for (i, (answer, printed)) in run_all(DEPTH_MAX + 1, map).into_iter().enumerate() {
            let call = CALLS[i / 2];
            let context = format!("{call} (map: {map})");
            match answer {
                Err(HandlerError::Script {
                    file,
                    line,
                    column,
                    message,
                    ..
                }) => {
                    assert!(
                        message.contains("nests arrays and objects more than 128 levels deep"),
                        "{context}: {message}"
                    );
                    // The handler's second line: `    let r = {call}`, whose call is at or
                    // after column 13.
                    let handler_line = 6 + 6 * (i / 2) + 2;
                    assert_eq!((file.as_str(), line), ("a.rhai", handler_line), "{context}");
                    assert!(column >= 13, "{context}: column {column}");
                }
                other => panic!("{context}: expected the rule's error, got {other:?}"),
            }
            assert!(printed.is_empty(), "{context}: {printed:?}");
        }
    }
}

/// Runs the write handler `handler` of `script` with `body`: its answer or its error's message.
fn run(script: &str, handler: &str, body: Value) -> Result<Value, String> {
    let files = vec![("a.rhai".to_string(), script.to_string())];
    let app = App::from_sources(MANIFEST, files, Limits::default()).expect("loads");
    let request = Request {
        body: pure_lang::to_dynamic(&body),
        ..Request::default()
    };
    let mut tables = Tables::new(app.schema().tables.len());
    let mut writes = WriteSet::default();
    app.run_write(handler, &request, &mut tables, &mut writes)
        .map(|answer| answer.body.to_value())
        .map_err(|e| e.to_string())
}

/// A function pointer's curried arguments hold values where neither the depth rule nor Rhai's
/// size checks look: `f = Fn("g").curry(take(f))` nested a level per loop turn without a copy,
/// a million levels in half a second, and Rhai's drop of them overflowed the server's stack.
/// So `curry` does not compile, in either form. (Rhai folds a call of `curry` on constants into
/// a constant pointer before Pure sees it: that one nests nothing.)
#[test]
fn curry_does_not_compile() {
    for script in [
        "fn f(r) { let g = Fn(\"f\").curry(1); 1 }",
        "fn f(r) { let g = Fn(\"f\").curry(r); 1 }",
        "fn f(r) { let g = curry(Fn(\"f\"), r); 1 }",
        "fn f(r) { let g = Fn(\"f\"); for i in 0..3 { g = Fn(\"f\").curry(take(g)); } 1 }",
    ] {
        let files = vec![("a.rhai".to_string(), script.to_string())];
        let error = App::from_sources(MANIFEST, files, Limits::default())
            .err()
            .unwrap_or_else(|| panic!("{script}: loaded"));
        assert!(
            matches!(error, pure_lang::LoadError::Compile { line: 1, .. }),
            "{script}: {error}"
        );
        assert!(
            error.to_string().contains("curry is not available"),
            "{script}: {error}"
        );
    }
}

/// A response's body is not looked into by the depth rule either: `respond(200, take(r))`
/// nested responses as `curry` nested pointers. `respond` refuses a body that holds a response
/// (it is no JSON), however deep in arrays and maps, and a body past the depth rule.
#[test]
fn a_response_cannot_hold_a_response() {
    let script = "\
        fn nest(req) { let r = (); for i in 0..req.body.levels { r = respond(200, take(r)); } 1 }\n\
        fn in_array(req) { let r = respond(200, 1); respond(200, [#{ a: take(r) }]) }\n\
        fn deep(req) { let v = 1; for i in 0..req.body.levels { v = [v]; } respond(200, v) }\n";
    assert_eq!(run(script, "nest", json!({ "levels": 1 })), Ok(json!(1)));
    for (handler, levels) in [("nest", 2), ("nest", 1_000_000), ("in_array", 0)] {
        let error = run(script, handler, json!({ "levels": levels })).expect_err(handler);
        assert!(
            error.contains("the body holds a response"),
            "{handler}: {error}"
        );
    }
    assert_eq!(
        run(script, "deep", json!({ "levels": DEPTH_MAX })).map(|v| v.to_string().len()),
        Ok(2 * DEPTH_MAX + 1)
    );
    let error = run(script, "deep", json!({ "levels": DEPTH_MAX + 1 })).expect_err("too deep");
    assert!(error.contains("more than 128 levels deep"), "{error}");
}

/// Rhai's `to_json` recursed natively whatever the depth, and its `parse_json` refused text
/// 128 levels deep, which the rule allows: both now follow the rule.
#[test]
fn to_json_and_parse_json_follow_the_depth_rule() {
    let script = "\
        fn nested(levels) { let v = 1; for i in 0..levels { v = #{ a: v }; } v }\n\
        fn text(req) { nested(req.body.levels).to_json().len() }\n\
        fn round(req) {\n\
            let back = parse_json(nested(req.body.levels).to_json());\n\
            let depth = 0;\n\
            while type_of(back) == \"map\" { back = back.a; depth += 1; }\n\
            depth\n\
        }\n\
        fn parsed(req) { let t = \"\"; for i in 0..req.body.levels { t = `{\"a\":${t}`; } parse_json(t + \"1\" + \"}\".pad(req.body.levels, \"}\")) }\n";
    let levels = |n: usize| json!({ "levels": n });
    assert_eq!(
        run(script, "round", levels(DEPTH_MAX)),
        Ok(json!(DEPTH_MAX))
    );
    assert_eq!(
        run(script, "text", levels(2)),
        Ok(json!(r#"{"a":{"a":1}}"#.len()))
    );
    let error = run(script, "text", levels(DEPTH_MAX + 1)).expect_err("too deep");
    assert!(error.contains("more than 128 levels deep"), "{error}");
    let error = run(script, "text", levels(1_000)).expect_err("too deep");
    assert!(error.contains("more than 128 levels deep"), "{error}");
    let error = run(script, "parsed", levels(DEPTH_MAX + 1)).expect_err("too deep");
    assert!(error.contains("more than 128 levels deep"), "{error}");
}
