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
        results.push((write.map(|answer| answer.body), printed));
        let read = app.run_read(&handler, &request, Arc::new(tables));
        let printed = std::mem::take(&mut *capture.0.lock().unwrap());
        results.push((read.map(|answer| answer.body), printed));
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
