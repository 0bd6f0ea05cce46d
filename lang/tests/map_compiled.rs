//! `array.map(|x| ...)` runs compiled: the anonymous function is a script function of its own,
//! called on each item as compiled code calls any. Each case answers, or fails, the same in
//! both engines, and the handlers are compiled.

use pure_lang::{App, Execution, HandlerError, Limits, Request, Tables, WriteSet};
use serde_json::{json, Value};

const MANIFEST: &str = r#"{"name": "m", "routes": {}, "tables": {"t": ["n"]},
    "indexes": {"by_n": {"table": "t", "fields": ["n"]}}}"#;

const SCRIPT: &str = r#"
fn fill(request) { for i in 0..5 { t.put(i, #{ n: i % 2 }); } }
fn doubled(request) { [1, 2, 3].map(|x| x * 2) }
fn rows(request) { t.scan((), (), 10).map(|row| #{ k: row.key, n: row.n }) }
fn found(request) { t.by_n.find(1, 10).map(|row| row.key) }
fn nested(request) { [[1], [2, 3]].map(|a| a.map(|x| x + 1)) }
fn throws(request) { [1, 2].map(|x| if x == 2 { throw #{ status: 409, error: `at ${x}` } } else { x }) }
fn on_a_map(request) { #{ a: 1 }.map(|x| x) }
fn helper(request) { [3, 4].map(|x| twice(x)) }
fn twice(x) { x * 2 }
fn after_map(request) { let a = [1, 2, 3].map(|x| x + 1); a.len() }
"#;

fn run(app: &App, tables: &mut Tables, handler: &str) -> Result<Value, (u16, String)> {
    let mut writes = WriteSet::default();
    app.run_write(handler, &Request::default(), tables, &mut writes)
        .map(|answer| serde_json::from_str(&answer.body.to_string()).expect("JSON"))
        .map_err(|e: HandlerError| (e.status(), e.to_json()["error"].to_string()))
}

#[test]
fn map_answers_the_same_compiled_and_in_rhai() {
    let handlers = [
        "doubled",
        "rows",
        "found",
        "nested",
        "throws",
        "on_a_map",
        "helper",
        "after_map",
    ];
    let mut answers = Vec::new();
    for interpreted in [false, true] {
        let mut app = App::from_sources(
            MANIFEST,
            vec![("m.rhai".into(), SCRIPT.into())],
            Limits::default(),
        )
        .expect("loads");
        app.set_interpreted(interpreted);
        let mut tables = Tables::new(app.schema().tables.len());
        tables.set_indexes(app.indexes().to_vec()).expect("indexes");
        run(&app, &mut tables, "fill").expect("fills");
        let mut handed = Vec::new();
        answers.push(handlers.map(|h| {
            let before = app.fallbacks();
            let answer = run(&app, &mut tables, h);
            if app.fallbacks() > before {
                handed.push(h);
            }
            answer
        }));
        if !interpreted {
            // Only `map` on a map goes to Rhai (which decides its error); a throw inside the
            // function is decided compiled.
            assert_eq!(handed, ["on_a_map"], "handed to Rhai");
        }
    }
    assert_eq!(answers[0], answers[1]);
    assert_eq!(answers[0][0], Ok(json!([2, 4, 6])));
    assert_eq!(answers[0][2], Ok(json!([1, 3])));
    assert_eq!(answers[0][3], Ok(json!([[2], [3, 4]])));
    assert_eq!(answers[0][4], Err((409, "\"at 2\"".to_string())));
    assert_eq!(answers[0][6], Ok(json!([6, 8])));
    assert_eq!(answers[0][7], Ok(json!(3)));
    let app = App::from_sources(
        MANIFEST,
        vec![("m.rhai".into(), SCRIPT.into())],
        Limits::default(),
    )
    .expect("loads");
    for handler in handlers {
        assert_eq!(
            app.execution(handler),
            Some(Execution::Compiled),
            "{handler}"
        );
    }
}
