//! The script API through scripts: transcripts of handler calls and their expected answers.

use std::sync::Arc;
use std::time::Duration;

use pure_lang::{App, HandlerError, Limits, LoadError, Request, Tables, WriteSet};
use serde_json::{json, Value};

const MANIFEST: &str = r#"{
  "name": "test",
  "routes": {},
  "tables": { "players": ["best", "posts", "name"], "lines": ["qty"] }
}"#;

const SCRIPT: &str = r#"
fn add(req) {
    let b = req.body;
    players.insert(b.id, #{ best: b.best, posts: 1, name: b.name });
    players.get(b.id)
}
fn bump(req) {
    let p = players.get(req.body.id);
    if p == () { throw #{ status: 404, error: "no such player" }; }
    p.posts += 1;
    if req.body.best > p.best { p.best = req.body.best; }
    p.save();
    players.get(req.body.id).posts
}
fn remove(req) { players.delete(req.body.id) }
fn ids(req) { players.scan((), (), 100).map(|r| r.key) }
fn ids_rev(req) { players.scan_rev(req.body.lo, req.body.hi, req.body.n).map(|r| r.key) }
fn count(req) { players.count() }
fn add_then_throw(req) {
    players.insert(req.body.id, #{ best: 0 });
    let p = players.get(1); p.best = 999; p.save();
    players.delete(2);
    throw "changed my mind";
}
fn lines_add(req) {
    for o in 1..=3 { for n in 1..=2 { lines.insert(7, o, n, #{ qty: o * 10 + n }); } }
    lines.scan([7, 2], [7, 3], 10).map(|r| r.qty)
}
fn positional(req) {
    players.insert(50, [1, 2, "fifty"]);
    players.put("s", 2, [3]);
    [players.get(50).name, players.get("s", 2).best, players.get("s", 2).name]
}
fn too_many(req) { players.insert(51, [1, 2, 3, 4]); }
fn lines_last(req) { lines.last([7], [8]).qty }
fn sum_lines(req) { let s = 0; for r in lines.scan((), (), 100) { s += r.qty; } s }
fn spin(req) { players.insert(77, #{}); loop { } }
fn deep(req) { players.delete(1); recurse(0) } fn recurse(n) { recurse(n + 1) }
fn grow(req) { lines.delete(7, 1, 1); let s = "x"; loop { s += s; } }
fn scan_forever(req) { let p = players.get(2); p.best = 0; p.save(); loop { lines.scan((), (), 100); } }
fn bad_field(req) { let p = [players.get(1)][0]; p.nope }
fn read_write(req) { players.insert(100, #{}); }
fn throw_map(req) { throw #{ status: 409, message: "taken", id: 5 }; }
fn throw_plain_map(req) { throw #{ why: "x" }; }
fn nested(req) { helper_in_b(req) }
fn returns_table(req) { players }
fn bulk(req) {
    players.put_all(req.body.rows);
    players.put_all(req.body.names, "name");
    let gone = players.delete_all(req.body.gone);
    [gone, players.scan((), (), 100).map(|r| [r.key, r.best, r.name])]
}
fn bulk_field(req) { players.put_all(req.body.rows, req.body.field); }
fn bulk_then_throw(req) {
    players.put_all(req.body.rows);
    players.delete_all([1, 2]);
    throw "changed my mind";
}
fn bulk_caught(req) {
    try { players.put_all(req.body.rows); } catch (e) { }
    try { players.delete_all(req.body.gone); } catch (e) { }
    players.scan((), (), 100).map(|r| r.key)
}
fn nap(req) { sleep(req.body.s); 1 }
"#;

const SCRIPT_B: &str = r#"// helpers
fn helper_in_b(req) {
    let x = 1;
    x.no_such_method()
}
"#;

struct Harness {
    /// The app under the limits under test.
    app: App,
    /// The same app under a wall clock no busy machine reaches, for the steps that set up and
    /// check the state (`check`, `snapshot_json`): a test of a 20 ms budget must not fail in
    /// its set-up because the machine was busy.
    setup: App,
    tables: Tables,
    writes: WriteSet,
}

impl Harness {
    fn new(limits: Limits) -> Harness {
        let files = || {
            vec![
                ("a.rhai".into(), SCRIPT.into()),
                ("b.rhai".into(), SCRIPT_B.into()),
            ]
        };
        let app = App::from_sources(MANIFEST, files(), limits).expect("the test app compiles");
        let unhurried = Limits {
            wall_clock_max: Duration::from_secs(600),
            ..Limits::default()
        };
        let setup = App::from_sources(MANIFEST, files(), unhurried).expect("compiles");
        let tables = Tables::new(app.schema().tables.len());
        Harness {
            app,
            setup,
            tables,
            writes: WriteSet::default(),
        }
    }

    fn write(&mut self, handler: &str, body: Value) -> Result<Value, HandlerError> {
        Self::write_with(&self.app, &mut self.tables, &mut self.writes, handler, body)
    }

    fn write_with(
        app: &App,
        tables: &mut Tables,
        writes: &mut WriteSet,
        handler: &str,
        body: Value,
    ) -> Result<Value, HandlerError> {
        let request = Request {
            body: pure_lang::to_dynamic(&body),
            ..Request::default()
        };
        let result = app.run_write(handler, &request, tables, writes);
        writes.clear();
        result.map(|answer| answer.body.to_value())
    }

    fn read(&mut self, handler: &str, body: Value) -> Result<Value, HandlerError> {
        Self::read_with(&self.app, &mut self.tables, handler, body)
    }

    fn read_with(
        app: &App,
        tables: &mut Tables,
        handler: &str,
        body: Value,
    ) -> Result<Value, HandlerError> {
        let request = Request {
            body: pure_lang::to_dynamic(&body),
            ..Request::default()
        };
        app.run_read(handler, &request, Arc::new(tables.snapshot()))
            .map(|answer| answer.body.to_value())
    }

    /// Runs `(handler, body, expected answer)` steps (with the set-up app); a `Err(status)`
    /// expects that status.
    fn check(&mut self, steps: &[(&str, Value, Result<Value, u16>)]) {
        for (handler, body, expected) in steps {
            let got = Self::write_with(
                &self.setup,
                &mut self.tables,
                &mut self.writes,
                handler,
                body.clone(),
            );
            match (expected, &got) {
                (Ok(want), Ok(value)) => assert_eq!(value, want, "{handler} {body}"),
                (Err(status), Err(e)) => assert_eq!(e.status(), *status, "{handler}: {e}"),
                _ => panic!("{handler} {body}: expected {expected:?}, got {got:?}"),
            }
        }
    }
}

fn snapshot_json(h: &mut Harness) -> Value {
    let mut read =
        |handler, body| Harness::read_with(&h.setup, &mut h.tables, handler, body).unwrap();
    json!([
        read("ids", Value::Null),
        read("sum_lines", Value::Null),
        (1..=3)
            .map(|i| read("count", json!({"id": i})))
            .collect::<Vec<_>>()
    ])
}

#[test]
fn get_insert_update_delete_scan_count() {
    let mut h = Harness::new(Limits::default());
    h.check(&[
        (
            "add",
            json!({"id": 2, "best": 5, "name": "bo"}),
            Ok(json!({"best": 5, "posts": 1, "name": "bo"})),
        ),
        (
            "add",
            json!({"id": 1, "best": 7, "name": "al"}),
            Ok(json!({"best": 7, "posts": 1, "name": "al"})),
        ),
        ("add", json!({"id": 1, "best": 7, "name": "al"}), Err(500)),
        ("bump", json!({"id": 2, "best": 9}), Ok(json!(2))),
        ("bump", json!({"id": 3, "best": 9}), Err(404)),
        ("ids", Value::Null, Ok(json!([1, 2]))),
        (
            "add",
            json!({"id": 3, "best": 1, "name": "cy"}),
            Ok(json!({"best": 1, "posts": 1, "name": "cy"})),
        ),
        (
            "ids_rev",
            json!({"lo": 1, "hi": 3, "n": 5}),
            Ok(json!([2, 1])),
        ),
        (
            "ids_rev",
            json!({"lo": (), "hi": (), "n": 2}),
            Ok(json!([3, 2])),
        ),
        ("remove", json!({"id": 2}), Ok(json!(true))),
        ("remove", json!({"id": 2}), Ok(json!(false))),
        ("count", Value::Null, Ok(json!(2))),
        ("lines_add", Value::Null, Ok(json!([21, 22]))),
        ("lines_last", Value::Null, Ok(json!(32))),
        ("returns_table", Value::Null, Err(500)),
        ("positional", Value::Null, Ok(json!(["fifty", 3, null]))),
        ("too_many", Value::Null, Err(500)),
    ]);
    assert_eq!(
        h.read("bump", json!({"id": 1, "best": 1}))
            .unwrap_err()
            .status(),
        500
    );
}

#[test]
fn a_throw_or_a_limit_rolls_back_every_change() {
    // Operation, depth and size limits with a wall clock too long to interfere; the wall clock
    // alone (no operation limit to speak of) for the handler that spends its time in scans.
    let counted = Limits {
        wall_clock_max: Duration::from_secs(60),
        ..Limits::default()
    };
    let timed = Limits {
        wall_clock_max: Duration::from_millis(20),
        operations_max: u64::MAX / 2,
        scan_rows_max: u64::MAX,
        ..Limits::default()
    };
    for (handler, limit, limits) in [
        ("add_then_throw", None, counted.clone()),
        ("spin", Some("operations"), counted.clone()),
        ("deep", Some("call depth"), counted.clone()),
        ("grow", Some("size"), counted.clone()),
        ("scan_forever", Some("rows scanned"), counted.clone()),
        ("scan_forever", Some("wall-clock time"), timed.clone()),
        // A compiled loop that runs out of time is stopped there, not run again in Rhai.
        ("spin", Some("wall-clock time"), timed),
    ] {
        let mut h = Harness::new(limits);
        h.check(&[
            (
                "add",
                json!({"id": 1, "best": 7, "name": "al"}),
                Ok(json!({"best": 7, "posts": 1, "name": "al"})),
            ),
            (
                "add",
                json!({"id": 2, "best": 5, "name": "bo"}),
                Ok(json!({"best": 5, "posts": 1, "name": "bo"})),
            ),
            ("lines_add", Value::Null, Ok(json!([21, 22]))),
        ]);
        let before = snapshot_json(&mut h);
        // Each of these handlers first changes rows, then throws or runs away.
        let error = h.write(handler, json!({"id": 9})).unwrap_err();
        match (&error, limit) {
            (HandlerError::Thrown { status, body }, None) => {
                assert_eq!(
                    (*status, body),
                    (400, &json!({"error": "changed my mind", "status": 400}))
                );
            }
            (
                HandlerError::Limit {
                    limit: got,
                    handler: name,
                    file,
                    line,
                    ..
                },
                Some(limit),
            ) => {
                assert!(got.starts_with(limit), "{handler}: {got}");
                assert_eq!((name.as_str(), file.as_str()), (handler, "a.rhai"));
                assert!(*line > 0);
            }
            (other, _) => panic!("{handler}: expected {limit:?}, got {other:?}"),
        }
        assert_eq!(
            snapshot_json(&mut h),
            before,
            "{handler} left nothing behind"
        );
        if handler == "spin" && limit == Some("wall-clock time") {
            assert_eq!(
                h.app.fallbacks(),
                0,
                "stopped compiled, not run again in Rhai"
            );
        }
    }
}

/// `put_all` writes a row per entry of a map (the whole row, or one field with the others
/// `()`), `delete_all` removes the rows of an array of keys and counts those that existed; a
/// mistake is the script's error, and a throw or a limit after them leaves nothing written.
#[test]
fn put_all_and_delete_all_write_every_entry_or_nothing() {
    let mut h = Harness::new(Limits::default());
    h.check(&[
        (
            "add",
            json!({"id": 1, "best": 7, "name": "al"}),
            Ok(json!({"best": 7, "posts": 1, "name": "al"})),
        ),
        (
            "bulk",
            json!({
                "rows": {"b": {"best": 2}, "a": [1, 0, "ay"], "d": {"best": 4}},
                "names": {"c": "cy", "a": "ann"},
                "gone": [1, "zz", "b"],
            }),
            Ok(json!([
                2,
                [["a", null, "ann"], ["c", null, "cy"], ["d", 4, null]]
            ])),
        ),
    ]);
    let mut message = |handler: &str, body: Value| match h.write(handler, body).unwrap_err() {
        HandlerError::Script { message, .. } => message,
        other => panic!("expected a script error, got {other:?}"),
    };
    let unknown = message("bulk_field", json!({"rows": {"x": 1}, "field": "nope"}));
    assert!(
        unknown.contains(r#"no field "nope" (declared: best, posts, name)"#),
        "{unknown}"
    );
    let not_a_map = message("bulk_field", json!({"rows": [1, 2], "field": "best"}));
    assert!(
        not_a_map.contains("put_all: the rows are a map"),
        "{not_a_map}"
    );
    let not_a_row = message("bulk", json!({"rows": {"x": 1}, "names": {}, "gone": []}));
    assert!(
        not_a_row.contains("a row is given as a map or an array"),
        "{not_a_row}"
    );
    let not_keys = message("bulk", json!({"rows": {}, "names": {}, "gone": "b"}));
    assert!(
        not_keys.contains("delete_all: the keys are an array"),
        "{not_keys}"
    );
    // A read handler writes nothing, even with nothing to write.
    for body in [
        json!({"rows": {}, "names": {}, "gone": []}),
        json!({"rows": {"x": [1]}, "names": {}, "gone": []}),
    ] {
        match h.read("bulk", body) {
            Err(HandlerError::Script { message, .. }) => {
                assert!(message.contains("read handler"), "{message}")
            }
            other => panic!("expected a script error, got {other:?}"),
        }
    }

    // A call that fails partway writes none of its entries, even when the script catches the
    // error and goes on: "a0" is put before the bad "b", and "c" deleted before the bad key.
    let ids = h.read("ids", Value::Null).unwrap();
    assert_eq!(ids, json!(["a", "c", "d"]));
    h.check(&[(
        "bulk_caught",
        json!({"rows": {"a0": [1], "b": 7}, "gone": ["c", []]}),
        Ok(ids),
    )]);

    let before = snapshot_json(&mut h);
    let rows = json!({"rows": {"e": [5], "f": [6]}});
    let thrown = h.write("bulk_then_throw", rows).unwrap_err();
    assert_eq!(thrown.status(), 400);
    assert_eq!(
        snapshot_json(&mut h),
        before,
        "the throw took back every row"
    );

    // One call of 200,000 rows is one operation to Rhai: the budget of time still stops it,
    // inside the call (not at the next statement, as the end of one operation would).
    let mut timed = Harness::new(Limits {
        wall_clock_max: Duration::from_millis(20),
        ..Limits::default()
    });
    let rows: serde_json::Map<String, Value> = (0..200_000)
        .map(|i| (format!("k{i}"), json!([i])))
        .collect();
    let body = json!({"rows": rows, "names": {}, "gone": []});
    match timed.write("bulk", body).unwrap_err() {
        HandlerError::Limit { limit, line, .. } => {
            assert!(limit.starts_with("wall-clock time"), "{limit}");
            let put_all = SCRIPT
                .lines()
                .position(|l| l.contains("players.put_all(req.body.rows);"))
                .expect("bulk's first line");
            assert_eq!(line, put_all + 1, "stopped in put_all");
        }
        other => panic!("expected the time limit, got {other:?}"),
    }
    assert_eq!(timed.tables.len(0), 0, "the stopped call wrote nothing");
}

#[test]
fn thrown_maps_choose_status_and_body() {
    let mut h = Harness::new(Limits::default());
    let e = h.write("throw_map", Value::Null).unwrap_err();
    assert_eq!(e.status(), 409);
    assert_eq!(
        e.to_json(),
        json!({"status": 409, "message": "taken", "id": 5, "error": "taken"})
    );
    let e = h.write("throw_plain_map", Value::Null).unwrap_err();
    assert_eq!(e.status(), 400);
}

#[test]
fn script_errors_name_handler_file_line_and_column() {
    let mut h = Harness::new(Limits::default());
    match h.write("nested", Value::Null).unwrap_err() {
        HandlerError::Script {
            handler,
            file,
            line,
            column,
            ..
        } => {
            assert_eq!(
                (handler.as_str(), file.as_str(), line, column),
                ("nested", "b.rhai", 4, 7)
            );
        }
        other => panic!("expected a script error, got {other:?}"),
    }
    match h.write("bad_field", Value::Null).unwrap_err() {
        HandlerError::Script {
            file,
            line,
            message,
            ..
        } => {
            assert_eq!((file.as_str(), line), ("a.rhai", 41), "{message}");
        }
        other => panic!("expected a script error, got {other:?}"),
    }
    match h.read("read_write", Value::Null).unwrap_err() {
        HandlerError::Script { message, .. } => {
            assert!(message.contains("read handler"), "{message}")
        }
        other => panic!("expected a script error, got {other:?}"),
    }
    assert_eq!(h.write("no_such", Value::Null).unwrap_err().status(), 500);
}

#[test]
fn eval_and_imports_are_not_available() {
    // Neither `eval` nor `import` (which could read files) compiles: the app does not load.
    for script in [
        "fn f(r) { eval(\"1 + 1\") }",
        "import \"/etc/passwd\" as p;\nfn f(r) { 1 }",
    ] {
        let files = vec![("e.rhai".into(), script.into())];
        let e = App::from_sources(MANIFEST, files, Limits::default())
            .err()
            .expect("the script is refused");
        assert!(matches!(e, LoadError::Compile { .. }), "{script}: {e}");
    }
}

#[test]
fn compile_errors_name_file_line_and_column() {
    let files = vec![
        ("a.rhai".into(), "fn ok(r) { 1 }\n".into()),
        ("b.rhai".into(), "fn f(r) {\n  let x = ;\n}\n".into()),
    ];
    let e = App::from_sources(MANIFEST, files, Limits::default())
        .err()
        .expect("a compile error");
    match &e {
        LoadError::Compile {
            file, line, column, ..
        } => {
            assert_eq!((file.as_str(), *line, *column), ("b.rhai", 2, 11), "{e}");
        }
        other => panic!("expected a compile error, got {other}"),
    }
    assert!(e.to_string().starts_with("b.rhai:2:11: "), "{e}");

    let manifest = r#"{"name": "x", "routes": {"POST /a": "missing"}}"#;
    let e = App::from_sources(manifest, vec![], Limits::default())
        .err()
        .expect("an error");
    assert!(matches!(e, LoadError::Manifest { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        "app.json:1:37: route \"POST /a\" names handler \"missing\", but no script defines fn \
         missing(request)"
    );
}

#[test]
fn an_app_is_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<App>();
    shared::<HandlerError>();
}

/// A handler that recurses to the call-depth limit with each recursive call `nesting` deep in
/// an expression of `shape`: a chain of additions (the most native stack per level of the
/// shapes measured, about 1.1 MB at the limits' deepest in a release build) or parentheses.
fn deepest(shape: &str, nesting: usize) -> String {
    let call = "deeper(n - 1)";
    let expression = match shape {
        "chain" => format!("{call}{}", " + 1".repeat(nesting)),
        _ => format!("{}{call}{}", "(1 + ".repeat(nesting), ")".repeat(nesting)),
    };
    format!(
        "fn dive(req) {{ deeper(100) }}\n\
         fn deeper(n) {{ if n <= 0 {{ return 0; }} {expression} }}\n"
    )
}

/// The runtime runs writes on whichever thread queued them, and an embedder's thread may have a
/// small stack: a handler that recurses to the call-depth limit there must stop at that limit,
/// not overflow the stack (which aborts the process). On a stack just larger than
/// `Limits::stack_bytes` the call runs in place: that checks the estimate itself.
#[test]
fn a_handler_on_a_small_stack_stops_at_the_call_depth_limit() {
    let limits = Limits::default();
    let just_enough = limits.stack_bytes() + (128 << 10);
    for shape in ["chain", "parens"] {
        let load = |nesting| {
            let files = vec![("deep.rhai".into(), deepest(shape, nesting))];
            App::from_sources(MANIFEST, files, limits.clone())
        };
        // The deepest nesting the expression limit accepts: nothing deeper can run.
        let nesting = (1..200).take_while(|&n| load(n).is_ok()).last();
        let nesting = nesting.expect("some nesting compiles");
        assert!(
            nesting < 199,
            "{shape}: the search stopped short of the limit"
        );
        let app = Arc::new(load(nesting).unwrap());
        for bytes in [128 << 10, just_enough] {
            let app = app.clone();
            let (write, read) = std::thread::Builder::new()
                .stack_size(bytes)
                .spawn(move || {
                    let mut tables = Tables::new(app.schema().tables.len());
                    let request = Request::default();
                    let mut writes = WriteSet::default();
                    let write = app.run_write("dive", &request, &mut tables, &mut writes);
                    let read = app.run_read("dive", &request, Arc::new(tables));
                    (write, read)
                })
                .unwrap()
                .join()
                .unwrap();
            for (kind, result) in [("write", write), ("read", read)] {
                match result {
                    Err(HandlerError::Limit { limit, .. }) => {
                        assert!(
                            limit.starts_with("call depth"),
                            "{shape} {kind} on {bytes} bytes: {limit}"
                        )
                    }
                    other => {
                        panic!(
                            "{shape} {kind} on {bytes} bytes: expected the call-depth limit, \
                             got {other:?}"
                        )
                    }
                }
            }
        }
    }
}

/// The deepest value the depth rule lets `print`, `to_string`, `==` and their kind walk (a
/// native call per level), walked at the bottom of a handler that recurses as deep as the
/// limits allow with each call as deep in an expression as they allow: it runs in place on a
/// stack just over `Limits::stack_bytes`, which counts both.
#[test]
fn the_deepest_walk_at_the_deepest_nesting_fits_the_stack_estimate() {
    let limits = Limits::default();
    let just_enough = limits.stack_bytes() + (128 << 10);
    let script = |calls: usize, nesting: usize| {
        let call = "deeper(n - 1, v)";
        format!(
            "fn dive(req) {{ let v = []; for i in 0..{} {{ v = [v]; }} deeper({calls}, v) }}
             fn deeper(n, v) {{ if n <= 0 {{ return walk(v); }} {call}{} }}
             fn walk(v) {{
                 print(v); debug(v);
                 let text = `${{v}}` + to_string(v) + to_debug(v);
                 if v == v && !(v != v) && v in [v] && text.len() > 0 {{ 0 }} else {{ -1 }}
             }}
",
            pure_lang::DEPTH_MAX - 1,
            " + 1".repeat(nesting)
        )
    };
    let load = |calls, nesting| {
        let files = vec![("walk.rhai".into(), script(calls, nesting))];
        App::from_sources(MANIFEST, files, limits.clone())
    };
    let nesting = (1..200).take_while(|&n| load(1, n).is_ok()).last();
    let nesting = nesting.expect("some nesting compiles");
    // The most calls that stay within the call-depth limit, on a stack that cannot overflow.
    let run = |app: Arc<App>, bytes: usize| {
        std::thread::Builder::new()
            .stack_size(bytes)
            .spawn(move || {
                let tables = Arc::new(Tables::new(app.schema().tables.len()));
                app.run_read("dive", &Request::default(), tables)
            })
            .unwrap()
            .join()
            .unwrap()
    };
    let deepest = (1..limits.call_levels_max).rev().find_map(|calls| {
        let app = Arc::new(load(calls, nesting).expect("compiles"));
        run(app.clone(), 256 << 20).is_ok().then_some((calls, app))
    });
    let (calls, app) = deepest.expect("some number of calls runs");
    let answer = run(app, just_enough).expect("runs in place");
    // Each call added its nesting's ones to the walk's 0.
    assert_eq!(answer.body, json!(calls * nesting));
}

/// Limits a user raised to huge values, or left unlimited (0 for Rhai), ask for the most stack
/// instead of overflowing the arithmetic (a wrapped estimate let a call run in place).
#[test]
fn the_stack_estimate_saturates_for_huge_or_unlimited_limits() {
    let default = Limits::default().stack_bytes();
    let huge = Limits {
        call_levels_max: usize::MAX / 2,
        ..Limits::default()
    };
    let unlimited = Limits {
        expr_depth_max: (0, 0),
        ..Limits::default()
    };
    for limits in [huge, unlimited] {
        let bytes = limits.stack_bytes();
        assert!(bytes > default && bytes <= 256 << 20, "{limits:?}: {bytes}");
    }
}

/// Mistakes that used to load and then fail every call are load errors naming the file, line
/// and column: a table the manifest does not declare, a function no script defines or one
/// called with another number of arguments, a top-level constant used in a function, and a
/// handler defined with more parameters than a request.
#[test]
fn mistakes_every_call_would_hit_are_load_errors() {
    let manifest = r#"{"name": "x", "tables": {"items": ["n"]}, "routes": {"GET /a": "a"}}"#;
    let load = |script: &str| load_error(manifest, script);
    for (script, says) in [
        (
            "fn a(r) {\n    itemz.get(1)\n}",
            "a.rhai:2:5: no variable or table named itemz (the app's tables: items)",
        ),
        (
            "fn a(r) { helper(1) }\nfn b(r) { nope(2); 1 }\nfn helper(x) { x }",
            "a.rhai:2:11: no function nope(): no script defines it, and it is not built in",
        ),
        (
            "fn a(r) { helper(1, 2) }\nfn helper(x) { x }",
            "a.rhai:1:11: helper() is called with 2 argument(s), but fn helper takes 1",
        ),
        (
            "const LIMIT = 5;\nfn a(r) { LIMIT }",
            "a.rhai:2:11: LIMIT is defined at the top level, which handlers never run",
        ),
        (
            "fn b(r) { 1 }\n\nfn a(r, extra) { 1 }",
            "a.rhai:3:1: fn a is defined with 2 parameters, but route \"GET /a\" calls it as a \
             handler, which takes one (request)",
        ),
    ] {
        let error = load(script).unwrap_or_else(|| panic!("{script:?} loaded"));
        assert!(error.contains(says), "{script:?}: {error}");
    }
    // What is built in, Rhai's own keywords and script functions of the right arity load.
    let fine = "fn a(r) { print(\"x\"); let f = Fn(\"h\"); type_of(now()) + uuid() + h(1) + \
                items.count() }\nfn h(x) { `${x}` }";
    assert_eq!(load(fine), None);
}

/// Why the app of `manifest` and one script `a.rhai` does not load, or `None` if it does.
fn load_error(manifest: &str, script: &str) -> Option<String> {
    App::from_sources(
        manifest,
        vec![("a.rhai".into(), script.into())],
        Limits::default(),
    )
    .err()
    .map(|e| e.to_string())
}

/// A call on a table that cannot work is a load error at the call: a method tables do not have,
/// a wrong number of arguments, an index the table does not have.
#[test]
fn calls_on_tables_that_cannot_work_are_load_errors() {
    let manifest = r#"{"name": "x", "tables": {"items": ["n"], "other": ["m"]},
        "indexes": {"by_n": {"table": "items", "fields": ["n"]}}, "routes": {"GET /a": "a"}}"#;
    let load = |script: &str| load_error(manifest, script);
    for (script, says) in [
        (
            "fn a(r) {
    items.updat(1)
}",
            "a.rhai:2:11: tables have no method updat(): did you mean items.update()?",
        ),
        (
            "fn a(r) {
    items.remove(1)
}",
            "a.rhai:2:11: tables have no method remove() (they have get, exists, insert, put, \
             put_all, update, delete, delete_all, scan, scan_rev, scan_page, scan_rev_page, \
             next_id, first, last, count)",
        ),
        (
            "fn a(r) {
    items.update(1, #{ n: 2 })
}",
            "a.rhai:2:11: items.update() is given 2 argument(s); it takes one row read from the \
             table and changed: row.f = v; t.update(row)",
        ),
        (
            "fn a(r) { items.get(1, 2, 3, 4, 5) }",
            "a.rhai:1:17: items.get() is given 5 argument(s); it takes the key: 1 to 4 parts",
        ),
        (
            "fn a(r) { items.scan((), ()) }",
            "items.scan() is given 2 argument(s); it takes (low, high, limit)",
        ),
        (
            "fn a(r) {
  other.by_n.find(1, 10)
}",
            "a.rhai:2:9: table other has no index by_n (it has none; declare them in app.json's \
             \"indexes\")",
        ),
        (
            "fn a(r) { items.by_m.find(1, 10) }",
            "table items has no index by_m (its indexes: by_n)",
        ),
        (
            "fn a(r) { 0 }\nfn get(r) {\n  items.get(r.params.k)\n}",
            "a.rhai:3:9: items.get() would call the script's function get(), not the table method",
        ),
    ] {
        let error = load(script).unwrap_or_else(|| panic!("{script:?} loaded"));
        assert!(error.contains(says), "{script:?}: {error}");
    }
    // Every method with every count it takes, Rhai's functions of any value, a script function
    // called as a method, and a local that takes a table's name all load.
    let fine = "fn a(r) { items.get(1); items.get(1, 2, 3, 4); items.exists(1); \
                items.insert(1, #{}); items.put(1, 2, 3, 4, #{}); items.delete(1); \
                items.scan((), (), 1); items.scan_rev((), (), 1); items.first((), ()); \
                items.last((), ()); items.count(); items.by_n.find(1, 1); \
                items.put_all(#{}); items.put_all(#{}, \"n\"); items.delete_all([]); \
                let row = items.get(1); items.update(row); type_of(items) + items.to_string() \
                + items.helper(1) }\n\
                fn helper(t, x) { x }\n\
                fn delete(t, k) { k }\n\
                fn count_rows() { this.count() }\n\
                fn e(r) { items.count_rows() }";
    assert_eq!(load(fine), None);
    // A parameter, a loop variable or a caught error named like a table is that value there.
    for fine in [
        "fn a(r) { 1 }\nfn b(items) { items.remove(1) }",
        "fn a(r) { let n = 0; for items in [\"ab\"] { n += items.len(); } n }",
        "fn a(r) { for (x, items) in [\"ab\"] { x.len() + items.abs(); } }",
        "fn a(r) { try { throw \"abc\"; } catch (items) { return items.len(); } }",
    ] {
        assert_eq!(load(fine), None, "{fine}");
    }
}

/// The manifest is read as strictly as the scripts: a misspelt key, a route that can never be
/// reached, a malformed pattern and a table no script could name are load errors.
#[test]
fn a_manifest_with_a_mistake_does_not_load() {
    let load = |manifest: &str| load_error(manifest, "fn a(r) { 1 }");
    // Each case: the manifest, what the error says, and the text its line and column point at.
    for (manifest, says, at) in [
        (
            r#"{"name": "x", "table": {"t": ["n"]}, "routes": {}}"#,
            r#"unknown key "table": did you mean "tables"?"#,
            r#""table""#,
        ),
        (
            r#"{"name": "x", "routes": {"POST /a": {"handle": "a"}}}"#,
            r#"route "POST /a": unknown key "handle": did you mean "handler"?"#,
            r#""handle""#,
        ),
        (
            r#"{"name": "x", "routes": {"POST /a": {"handler": "a", "body": {"fieldz": {"n": "int"}}}}}"#,
            r#"route "POST /a": body: unknown key "fieldz": did you mean "fields"?"#,
            r#""fieldz""#,
        ),
        (
            r#"{"name": "x", "routes": {"POST /a": {"handler": "a", "zzz": 1}, "POST /b": {"handler": "a", "body": {}, "query": {}, "params": {}}}}"#,
            r#"route "POST /a": unknown key "zzz": the handler must be"#,
            r#""zzz""#,
        ),
        (
            r#"{"name": "x", "routes": {"POST /a": {"handler": "a", "body": {"fields": {"s": {"type": "string", "min_length": 1}}}}, "POST /b": {"handler": "a", "body": {"fields": {"s": {"type": "string", "min_len": 1, "max_len": 2, "min_bytes": 1, "max_bytes": 9}}}}}}"#,
            r#"string does not take "min_length""#,
            r#""min_length""#,
        ),
        (
            r#"{"name": "x", "routes": {"POST /a": {"handler": "a", "body": {"wat": 1}}}}"#,
            r#"route "POST /a": body: unknown key "wat": an object type needs "type""#,
            r#""wat""#,
        ),
        (
            r#"{"name": "x", "routes": {}, "tables": {"t": ["n"]}, "indexes": {"by_n": {"tabel": "t", "fields": ["n"]}}}"#,
            r#"index "by_n": unknown key "tabel": did you mean "table"?"#,
            r#""tabel""#,
        ),
        (
            r#"{"name": "x", "routes": {"GET /a/{p}": "a", "GET /a/{q}": "a"}}"#,
            r#"routes "GET /a/{p}" and "GET /a/{q}" match the same requests"#,
            r#""GET /a/{q}""#,
        ),
        (
            r#"{"name": "x", "routes": {"GET /a/{*rest}": "a"}}"#,
            r#""{*rest}" is not a parameter"#,
            r#""GET /a/{*rest}""#,
        ),
        (
            r#"{"name": "x", "routes": {"GET /a/{}": "a"}}"#,
            r#""{}" is not a parameter"#,
            r#""GET /a/{}""#,
        ),
        (
            r#"{"name": "x", "routes": {"GET /a/x{p}": "a"}}"#,
            "a parameter takes a whole segment",
            r#""GET /a/x{p}""#,
        ),
        (
            r#"{"name": "x", "routes": {"GET /a/{p}/{p:int}": "a"}}"#,
            "the parameter p appears twice",
            r#""GET /a/{p}/{p:int}""#,
        ),
        (
            "{\"name\": \"x\",\n \"tables\": {\"request\": []}, \"routes\": {}}",
            r#"a table cannot be named "request""#,
            r#""request""#,
        ),
        (
            r#"{"name": "x", "tables": {"t": ["n"]}, "routes": {},
                "indexes": {"by_x": {"table": "t", "fields": ["name"]}}}"#,
            r#"index "by_x""#,
            r#""name"]"#,
        ),
        (
            r#"{"name": "x", "tables": {"let": []}, "routes": {}}"#,
            r#"a table cannot be named "let""#,
            r#""let""#,
        ),
        (
            "{\"name\": \"x\",\n\n  \"routes\": {\"GET /a\" \"a\"}}",
            "expected `:`",
            r#""a""#,
        ),
        (
            r#"{"name": "x", "routes": {"GET /a/{p}": {"handler": "a", "param": {}}}}"#,
            r#"route "GET /a/{p}": unknown key "param": did you mean "params"?"#,
            r#""param""#,
        ),
        (
            r#"{"name": "x", "routes": {"GET /a/{p}": {"handler": "a", "params": {"q": "int"}}}}"#,
            "params.q: q is not a parameter of the path (its path has p)",
            r#""GET /a/{p}""#,
        ),
    ] {
        let error = load(manifest).unwrap_or_else(|| panic!("{manifest} loaded"));
        assert!(error.contains(says), "{manifest}: {error}");
        let place = error
            .strip_prefix("app.json:")
            .and_then(|rest| rest.split_once(": "))
            .map(|(place, _)| place)
            .unwrap_or_else(|| panic!("{error}: no line and column"));
        let (line, column) = place.split_once(':').expect("line:column");
        let (line, column): (usize, usize) = (line.parse().unwrap(), column.parse().unwrap());
        let text: String = manifest
            .lines()
            .nth(line - 1)
            .unwrap()
            .chars()
            .skip(column - 1)
            .collect();
        assert!(
            text.starts_with(at),
            "{error}: points at {text:?}, not {at:?}"
        );
    }
    // Different methods on one shape, and a literal beside a parameter, are distinct routes.
    assert_eq!(
        load(
            r#"{"name": "x", "routes": {"GET /a/{p:int}": "a", "POST /a/{q}": "a", "GET /a/b": "a"}}"#
        ),
        None
    );
}

/// An app may set its handlers' limits in app.json, up to the server's caps: a sum over
/// 100,001 rows stops at a default limit, and runs to the end with the app's.
#[test]
fn an_app_sets_its_own_limits_within_the_caps() {
    let script = r#"
fn sum(r) {
    let total = 0;
    let from = 0;
    loop {
        let rows = t.scan(from, (), 10000);
        if rows.len() == 0 { break; }
        for row in rows { total += row.n; }
        from = rows[-1].key + 1;
    }
    total
}"#;
    let load = |limits: &str| {
        let manifest =
            format!(r#"{{"name": "x", "tables": {{"t": ["n"]}}, "routes": {{}}{limits}}}"#);
        App::from_sources(
            &manifest,
            vec![("a.rhai".into(), script.into())],
            Limits::default(),
        )
    };
    let mut tables = Tables::new(1);
    let mut writes = WriteSet::default();
    for i in 0..100_001 {
        tables
            .put(
                &mut writes,
                0,
                pure_lang::Key::int(i),
                pure_lang::Fields::from_values(&[pure_lang::Dynamic::from_int(1)]),
                true,
            )
            .expect("a new key");
    }
    writes.clear();
    let sum = |app: &App, tables: &mut Tables| {
        let mut writes = WriteSet::default();
        app.run_write("sum", &Request::default(), tables, &mut writes)
            .map(|answer| answer.body.to_value())
            .map_err(|e| e.to_json())
    };
    let stopped = sum(&load("").expect("loads"), &mut tables).expect_err("a default limit");
    assert!(stopped["limit"].is_string(), "{stopped}");
    let roomy =
        load(r#", "limits": {"scan_rows": 200000, "operations": 5000000, "wall_clock_ms": 10000}"#)
            .expect("loads");
    assert_eq!(sum(&roomy, &mut tables), Ok(serde_json::json!(100_001)));

    for (limits, says) in [
        (
            r#", "limits": {"operations": 100000001}"#,
            "limits.operations must be an integer from 1 to 100000000 (the server's cap)",
        ),
        (
            r#", "limits": {"scan_rows": 0}"#,
            "limits.scan_rows must be",
        ),
        (r#", "limits": {"ops": 5}"#, r#"unknown limit "ops""#),
    ] {
        let error = load(limits).err().expect(limits).to_string();
        assert!(error.contains(says), "{limits}: {error}");
    }
}

/// The bundled key-value app's contract, declared in its manifest: a key of 1 to 256 bytes, a
/// value of at most 64 KiB, and any other request a 400 before a handler runs.
#[test]
fn declared_byte_bounds_params_and_maps_refuse_requests_before_the_handler() {
    let manifest = r#"{"name": "kv", "routes": {
        "PUT /kv/{key}": {
            "handler": "put",
            "params": {"key": {"type": "string", "min_bytes": 1, "max_bytes": 256}},
            "body": {"fields": {"value": {"type": "string", "max_bytes": 65536}}}
        },
        "POST /kv": {
            "handler": "batch",
            "body": {"fields": {
                "put": {"type": "object", "keys": {"type": "string", "min_bytes": 1,
                        "max_bytes": 256}, "values": {"type": "string", "max_bytes": 65536},
                        "default": {}},
                "delete": {"type": "array", "items": {"type": "string", "min_bytes": 1,
                           "max_bytes": 256}, "default": []}}}
        }}}"#;
    let limits = Limits {
        string_bytes_max: 1 << 20,
        ..Limits::default()
    };
    let app = App::from_sources(
        manifest,
        vec![(
            "kv.rhai".into(),
            "fn put(r) { r.body.value }\nfn batch(r) { r.body.put.len() }".into(),
        )],
        limits,
    )
    .expect("loads");
    let route = |handler: &str| {
        app.routes()
            .iter()
            .position(|r| r.handler == handler)
            .expect("a route")
    };
    let put = |key: &str, body: Value| {
        let params = vec![("key".to_string(), key.to_string())];
        let body = serde_json::to_vec(&body).expect("json");
        app.request(route("put"), params, Vec::new(), Default::default(), &body)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let value = |n: usize| json!({"value": "v".repeat(n)});
    assert_eq!(put(&"k".repeat(256), value(65_536)), Ok(()));
    assert_eq!(
        put(&"k".repeat(300), value(1)),
        Err("key must be 1 to 256 bytes, not 300".into())
    );
    assert_eq!(
        put("k", value(70_000)),
        Err(r#""value" must be at most 65536 bytes, not 70000"#.into())
    );
    let batch = |body: Value| {
        let body = serde_json::to_vec(&body).expect("json");
        app.request(
            route("batch"),
            Vec::new(),
            Vec::new(),
            Default::default(),
            &body,
        )
        .map(|request| {
            request.body.cast::<rhai::Map>()["put"]
                .clone()
                .cast::<rhai::Map>()
                .len()
        })
        .map_err(|e| e.to_string())
    };
    assert_eq!(batch(json!({"put": {"a": "1", "b": "2"}})), Ok(2));
    assert_eq!(
        batch(json!({"delete": ["a"]})),
        Ok(0),
        "put defaults to {{}}"
    );
    assert_eq!(
        batch(json!({"put": {"abc": "v".repeat(70_000)}})),
        Err(r#""put.abc" must be at most 65536 bytes, not 70000"#.into())
    );
    assert_eq!(
        batch(json!({"put": {"": "v"}})),
        Err(r#"the field name "" in "put" must be 1 to 256 bytes, not 0"#.into())
    );
    assert_eq!(
        batch(json!({"delete": [""]})),
        Err(r#""delete[0]" must be 1 to 256 bytes, not 0"#.into())
    );
}

/// A handler cannot sleep: Rhai's `sleep` would hold its thread (and, in a write, every other
/// write) without the time budget seeing it, since the budget counts CPU time (found by
/// review: `sleep(2)` answered 200 after 2 s under a 100 ms budget).
#[test]
fn a_handler_cannot_sleep() {
    let mut h = Harness::new(Limits::default());
    for seconds in [json!(1), json!(1.5)] {
        let got = h.read("nap", json!({ "s": seconds }));
        let error = got.expect_err("sleep is refused");
        assert_eq!(error.status(), 500, "{error}");
        assert!(
            error.to_string().contains("sleep() is not available"),
            "{error}"
        );
    }
}
