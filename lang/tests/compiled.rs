//! The compiled path against Rhai: every handler runs in both engines on the same random requests
//! and the same state, and the answers (values, or errors with their status and body), the write
//! sets and the tables must be identical after every call.
//!
//! Apps: `tests/apps/coverage` (every construct the compiler covers, on values of every type), the
//! scoreboard, and the New-Order benchmark handler. The seed is printed; replay a run with
//! PURE_TEST_SEED and make it longer with PURE_TEST_SCALE.

use std::path::{Path, PathBuf};

use pure_lang::{App, Execution, HandlerKind, Limits, Request, Tables, WriteSet};
use serde_json::{json, Value};

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize].clone()
    }
}

fn seed_and_scale(test: &str) -> (u64, u64) {
    let seed = std::env::var("PURE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after 1970")
                .as_nanos() as u64
                | 1
        });
    let scale = std::env::var("PURE_TEST_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    eprintln!("{test}: PURE_TEST_SEED={seed} PURE_TEST_SCALE={scale}");
    (seed, scale)
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The same app twice: compiled where possible, and Rhai only.
struct Pair {
    compiled: App,
    interpreted: App,
    state: [Tables; 2],
    calls: u64,
}

impl Pair {
    fn new(load: impl Fn() -> App) -> Pair {
        let compiled = load();
        let mut interpreted = load();
        interpreted.set_interpreted(true);
        let tables = || Tables::new(compiled.schema().tables.len());
        Pair {
            state: [tables(), tables()],
            compiled,
            interpreted,
            calls: 0,
        }
    }

    fn kind(&self, handler: &str) -> HandlerKind {
        self.compiled
            .routes()
            .iter()
            .find(|r| r.handler == handler)
            .map_or(HandlerKind::Write, |r| r.kind)
    }

    /// Runs `handler` in both engines and checks that everything observable agrees.
    fn call(&mut self, handler: &str, body: Value) -> Result<Value, Value> {
        self.calls += 1;
        let request = Request {
            body: pure_lang::to_dynamic(&body),
            ..Request::default()
        };
        let kind = self.kind(handler);
        let mut answers = Vec::new();
        let mut changes = Vec::new();
        for (app, tables) in [&self.compiled, &self.interpreted]
            .into_iter()
            .zip(self.state.iter_mut())
        {
            let answer = match kind {
                HandlerKind::Read => {
                    app.run_read(handler, &request, std::sync::Arc::new(tables.clone()))
                }
                HandlerKind::Write => {
                    let mut writes = WriteSet::default();
                    let answer = app.run_write(handler, &request, tables, &mut writes);
                    changes.push(format!("{:?}", writes.changes()));
                    answer
                }
            };
            answers.push(answer.map_err(|e| json!({"status": e.status(), "body": e.to_json()})));
        }
        let mut context = format!("{handler}({body})");
        if context.len() > 300 {
            let cut = (0..=300)
                .rev()
                .find(|&i| context.is_char_boundary(i))
                .unwrap_or(0);
            context.truncate(cut);
            context.push_str("...");
        }
        assert_eq!(answers[0], answers[1], "answers differ: {context}");
        if let [compiled, interpreted] = &changes[..] {
            assert_eq!(compiled, interpreted, "write sets differ: {context}");
        }
        assert_eq!(
            dump(&self.state[0], &self.compiled),
            dump(&self.state[1], &self.interpreted),
            "tables differ after {context}"
        );
        answers.pop().expect("two answers")
    }
}

fn dump(tables: &Tables, app: &App) -> String {
    let mut text = String::new();
    for (id, table) in app.schema().tables.iter().enumerate() {
        for (key, fields) in tables.map(id as _).iter() {
            text.push_str(&format!("{} {key:?} {fields:?}\n", table.name));
        }
    }
    text
}

fn values() -> Vec<Value> {
    vec![
        json!(0),
        json!(1),
        json!(-1),
        json!(2),
        json!(7),
        json!(100),
        json!(i64::MAX),
        json!(i64::MIN),
        json!(1.5),
        json!(-2.25),
        json!(0.0),
        json!(""),
        json!("a"),
        json!("abc"),
        json!("zz"),
        json!("12"),
        json!(" 34 "),
        json!(true),
        json!(false),
        Value::Null,
        json!([]),
        json!([1, 2, 3]),
        json!(["a", "b"]),
        json!({}),
        json!({"a": 1}),
    ]
}

/// The default limits but for a wall clock too long to interfere: the two forms are compared
/// on the limits that do not depend on the machine (operations, sizes, depth), and on a busy
/// machine the wall clock could stop one of them first. Its own test covers the wall clock.
fn limits() -> Limits {
    Limits {
        wall_clock_max: std::time::Duration::from_secs(60),
        ..Limits::default()
    }
}

fn coverage() -> App {
    App::load_with(&repo().join("lang/tests/apps/coverage"), limits())
        .expect("the coverage app loads")
}

/// Every handler of the coverage app but one compiles; the one with a `switch` runs in Rhai.
#[test]
fn the_coverage_app_compiles_except_what_it_leaves_to_rhai() {
    let app = coverage();
    for route in app.routes() {
        let execution = app.execution(&route.handler).expect("a handler");
        if route.handler == "interpreted" {
            assert!(
                matches!(&execution, Execution::Interpreted { reason } if reason.contains("switch")),
                "{execution:?}"
            );
        } else {
            assert_eq!(execution, Execution::Compiled, "{}", route.handler);
        }
    }
}

#[test]
fn compiled_handlers_answer_and_write_exactly_as_rhai_does() {
    let (seed, scale) = seed_and_scale("coverage");
    let mut rng = Rng(seed);
    let mut pair = Pair::new(coverage);
    let values = values();
    let ops = [
        "add", "sub", "mul", "div", "rem", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor",
        "neg", "not", "land", "lor", "coalesce", "acc", "nope",
    ];
    let actions = [
        "insert", "put", "bump", "tag", "save", "delete", "scan", "pair", "other",
    ];
    let keys = [
        json!(1),
        json!(2),
        json!(3),
        json!(-4),
        json!("s"),
        json!(1.5),
    ];
    for _ in 0..3000 * scale {
        let (a, b) = (rng.pick(&values), rng.pick(&values));
        let _ = match rng.below(11) {
            0 | 1 => {
                let op = rng.pick(&ops);
                pair.call("op", json!({"op": op, "a": a, "b": b}))
            }
            2 => pair.call("text", json!({"a": a, "b": b})),
            3 => {
                let n = rng.pick(&[json!(0), json!(1), json!(5), json!(30), json!(-3), a]);
                let items = rng.pick(&[json!([]), json!([1, "x", 3]), json!(["only"]), b]);
                pair.call("collections", json!({"n": n, "items": items}))
            }
            4..=6 => {
                let action = rng.pick(&actions);
                let k = rng.pick(&keys);
                let by = rng.pick(&[json!(1), json!(-2), json!(i64::MAX), json!("x")]);
                pair.call(
                    "rows",
                    json!({"action": action, "k": k, "name": rng.pick(&values), "by": by}),
                )
            }
            7 => pair.call("read_rows", Value::Null),
            8 => {
                let n = rng.pick(&[json!(0), json!(3), json!(31), json!(40), json!("x")]);
                pair.call("recurse", json!({ "n": n }))
            }
            9 => {
                let kind = rng.pick(&["map", "text", "unit", "api", "field", "none"]);
                let status = rng.pick(&[json!(404), json!(409), json!(99), json!("400")]);
                pair.call("thrower", json!({"kind": kind, "status": status}))
            }
            _ => {
                let handler = rng.pick(&["scopes", "types", "interpreted"]);
                pair.call(handler, json!({ "n": a, "a": b }))
            }
        };
    }
    // Values that outgrow the size limits as a whole (nested arrays, strings inside an array, a
    // nested push, many keys) while each part stays small: Rhai's limits count the whole value.
    for kind in ["nested", "text", "map", "keys", "literal"] {
        for n in [10, 60] {
            let answer = pair.call("grow", json!({"kind": kind, "n": n}));
            assert_eq!(answer.is_ok(), n == 10, "{kind} {n}: {answer:?}");
        }
    }
    // A runaway loop: stopped by the operation limit in both (the compiled call falls back).
    let answer = pair.call("runaway", json!({"n": 10_000_000}));
    assert_eq!(answer.expect_err("stopped")["status"], json!(500));
    assert_eq!(pair.call("runaway", json!({"n": 10})), Ok(json!(10)));

    // The comparison is only worth something if most calls ran compiled to the end.
    let fallbacks = pair.compiled.fallbacks();
    eprintln!("{} calls, {fallbacks} fell back to Rhai", pair.calls);
    assert!(fallbacks > 0, "the error paths were exercised");
    assert!(
        fallbacks * 4 < pair.calls * 3,
        "{fallbacks} of {} calls fell back",
        pair.calls
    );
}

#[test]
fn the_scoreboard_runs_compiled_exactly_as_in_rhai() {
    let (seed, scale) = seed_and_scale("scoreboard");
    let mut rng = Rng(seed);
    let mut pair =
        Pair::new(|| App::load_with(&repo().join("apps/scoreboard"), limits()).expect("loads"));
    assert_eq!(
        pair.compiled.execution("post_score"),
        Some(Execution::Compiled)
    );
    assert_eq!(
        pair.compiled.execution("get_player"),
        Some(Execution::Compiled)
    );
    assert_eq!(pair.compiled.execution("top"), Some(Execution::Compiled));
    // Well-formed posts, extreme scores included, run compiled to the end.
    for (i, score) in [0, 5, i64::MAX, i64::MIN, -3, i64::MAX]
        .into_iter()
        .enumerate()
    {
        let player = ["ann", "bob"][i % 2];
        pair.call("post_score", json!({"player": player, "score": score}))
            .expect("a well-formed post");
    }
    assert_eq!(pair.compiled.fallbacks(), 0);
    let players = [
        "ann",
        "bob",
        "cy",
        "é",
        &"x".repeat(64),
        &"y".repeat(65),
        "",
    ];
    let scores = [
        json!(0),
        json!(5),
        json!(-3),
        json!(100),
        json!(i64::MAX),
        json!(i64::MIN),
    ];
    for _ in 0..2000 * scale {
        let player = rng.pick(&players);
        let score = rng.pick(&scores);
        let _ = match rng.below(10) {
            0..=5 => pair.call("post_score", json!({"player": player, "score": score})),
            6 => {
                let body = rng.pick(&[
                    json!({"player": player}),
                    json!({"player": player, "score": "1"}),
                    json!({"player": 5, "score": 1}),
                    json!({"player": player, "score": 1, "extra": 1}),
                    json!([1, 2]),
                    Value::Null,
                ]);
                pair.call("post_score", body)
            }
            7 | 8 => {
                let request = Request {
                    params: vec![("player".into(), player.to_string())],
                    ..Request::default()
                };
                let answers: Vec<_> = [
                    (&pair.compiled, &pair.state[0]),
                    (&pair.interpreted, &pair.state[1]),
                ]
                .into_iter()
                .map(|(app, tables)| {
                    app.run_read("get_player", &request, std::sync::Arc::new(tables.clone()))
                        .map_err(|e| e.to_json())
                })
                .collect();
                assert_eq!(answers[0], answers[1], "get_player({player})");
                continue;
            }
            _ => pair.call("top", Value::Null),
        };
    }
    assert!(pair.compiled.fallbacks() * 10 < pair.calls);
}

#[test]
fn new_order_runs_compiled_exactly_as_in_rhai() {
    let (seed, scale) = seed_and_scale("new_order");
    let mut rng = Rng(seed);
    let dir = repo().join("benchmarks/neworder");
    let manifest = std::fs::read_to_string(dir.join("app.json")).expect("the manifest");
    let script = std::fs::read_to_string(dir.join("neworder.rhai")).expect("the script");
    // A small load through a handler of its own: 50 items, 10 districts, 30 customers each.
    let loader = r#"
fn load(req) {
    warehouse.insert(1, #{ tax: 1200, ytd: 0, name: "w1" });
    for d in 1..=10 {
        district.insert(1, d, #{ tax: d * 100, ytd: 0, next_o_id: 3001, name: `d${d}` });
        for c in 1..=30 { customer.insert(1, d, c, #{ discount: c * 10, credit: "GC", last: "L", balance: 0 }); }
    }
    for i in 1..=50 {
        item.insert(i, #{ price: i * 100, name: `item ${i}`, data: "data" });
        stock.insert(1, i, #{ quantity: 50 + i % 40, ytd: 0, order_cnt: 0, remote_cnt: 0,
            dist_01: `s${i}`, dist_02: "x", dist_03: "x", dist_04: "x", dist_05: "x",
            dist_06: "x", dist_07: "x", dist_08: "x", dist_09: "x", dist_10: "x", data: "d" });
    }
}
"#;
    let load = || {
        App::from_sources(
            &manifest,
            vec![
                ("neworder.rhai".into(), script.clone()),
                ("load.rhai".into(), loader.into()),
            ],
            limits(),
        )
        .expect("compiles")
    };
    let mut pair = Pair::new(load);
    assert_eq!(
        pair.compiled.execution("new_order"),
        Some(Execution::Compiled)
    );
    pair.call("load", Value::Null).expect("loads");
    // Orders of existing items run compiled to the end.
    for _ in 0..50 {
        let items: Vec<u64> = (0..10).map(|_| 1 + rng.below(50)).collect();
        let body = json!({"w": 1, "d": 1 + rng.below(10), "c": 1 + rng.below(30),
                          "items": items, "qtys": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "now": 1});
        pair.call("new_order", body)
            .expect("an order of existing items");
    }
    assert_eq!(pair.compiled.fallbacks(), 0);
    for _ in 0..300 * scale {
        let count = 1 + rng.below(12);
        // Item 51 does not exist: the handler fails on it, in both engines alike.
        let items: Vec<u64> = (0..count).map(|_| 1 + rng.below(51)).collect();
        let qtys: Vec<u64> = (0..count).map(|_| 1 + rng.below(10)).collect();
        let body = json!({"w": 1, "d": 1 + rng.below(10), "c": 1 + rng.below(30),
                          "items": items, "qtys": qtys, "now": 12345});
        let _ = pair.call("new_order", body);
    }
}

/// Calls that succeed, or throw, run compiled to the end: no fallback. (The random test above
/// could otherwise pass by falling back everywhere.)
#[test]
fn well_formed_calls_never_fall_back() {
    let mut pair = Pair::new(coverage);
    let calls = [
        ("op", json!({"op": "add", "a": 2, "b": 3}), json!(5)),
        ("op", json!({"op": "div", "a": 7.5, "b": 2}), json!(3.75)),
        (
            "op",
            json!({"op": "lt", "a": "abc", "b": "abd"}),
            json!(true),
        ),
        ("op", json!({"op": "eq", "a": "1", "b": 1}), json!(false)),
        ("op", json!({"op": "ne", "a": null, "b": [1]}), json!(true)),
        (
            "op",
            json!({"op": "coalesce", "a": null, "b": null}),
            json!("neither"),
        ),
        ("op", json!({"op": "acc", "a": 5, "b": 3}), json!(5)),
        (
            "op",
            json!({"op": "xor", "a": true, "b": false}),
            json!(true),
        ),
        ("text", json!({"a": 12, "b": "b"}), Value::Null),
        ("text", json!({"a": " 42 ", "b": "x3"}), Value::Null),
        (
            "collections",
            json!({"n": 7, "items": [1, "x", 3.5]}),
            Value::Null,
        ),
        (
            "rows",
            json!({"action": "insert", "k": 1, "name": "one"}),
            json!(1),
        ),
        (
            "rows",
            json!({"action": "insert", "k": "s", "name": "ess"}),
            json!(2),
        ),
        (
            "rows",
            json!({"action": "put", "k": 2, "name": "two"}),
            json!(true),
        ),
        (
            "rows",
            json!({"action": "bump", "k": 1, "by": 5}),
            Value::Null,
        ),
        (
            "rows",
            json!({"action": "save", "k": 2}),
            json!({"key": 2, "count": 7}),
        ),
        ("rows", json!({"action": "scan", "k": 2}), Value::Null),
        ("rows", json!({"action": "pair", "k": 1}), json!(1)),
        ("rows", json!({"action": "delete", "k": 2}), json!(true)),
        ("read_rows", Value::Null, Value::Null),
        ("recurse", json!({"n": 20}), json!(20)),
        (
            "thrower",
            json!({"kind": "map", "status": 409}),
            Value::Null,
        ),
        ("thrower", json!({"kind": "text"}), Value::Null),
        ("scopes", json!({"n": 4}), json!([44, 7, 14, 3])),
        (
            "types",
            json!({"a": 1}),
            json!(["map", "i64", "Row", "Table", "()", "f64", "char"]),
        ),
    ];
    for (handler, body, expected) in calls {
        let answer = pair.call(handler, body.clone());
        if !expected.is_null() {
            assert_eq!(answer, Ok(expected), "{handler}({body})");
        }
        assert_eq!(pair.compiled.fallbacks(), 0, "{handler}({body}) fell back");
    }
    // And one that must: a method that changes a row's field goes to Rhai.
    let _ = pair.call("rows", json!({"action": "tag", "k": 1, "name": "t"}));
    assert_eq!(pair.compiled.fallbacks(), 1);
}

/// What a review of the first version found (each differed from Rhai then), kept as cases.
#[test]
fn the_reviewed_divergences_agree() {
    let mut pair = Pair::new(coverage);
    for a in [json!(0.1), json!(1e-20), json!(0.0), json!(1)] {
        let _ = pair.call("edge", json!({"which": "float_eq", "a": a}));
    }
    assert_eq!(
        pair.call("edge", json!({"which": "do_continue"})),
        Ok(json!(5))
    );
    assert_eq!(
        pair.call("edge", json!({"which": "do_until"})),
        Ok(json!(5))
    );
    for n in [10, 100_000, 150_000, 200_000, 300_000, 400_000] {
        let _ = pair.call("edge", json!({"which": "count", "n": n}));
    }
    let big: Vec<i64> = (0..30_000).collect();
    let text = "x".repeat(600_000);
    for which in ["pair", "push_twice", "set_twice"] {
        for value in [json!(big), json!(text), json!([1, 2])] {
            let _ = pair.call("edge", json!({"which": which, "big": value}));
        }
    }
}

/// Statements belong to their function whatever the positions: Rhai's positions saturate at
/// 65535 columns and lines, and a first version attributed statements by position.
#[test]
fn statements_on_a_very_long_line_stay_in_their_function() {
    let manifest = r#"{ "name": "long", "routes": {}, "tables": { "items": ["name"] } }"#;
    let comment = format!("/*{}*/", " ".repeat(70_000));
    let script = format!(
        "{comment} fn g(x) {{ 1 }} fn h(r) {{ items.put(3, #{{ name: \"h\" }}); let y = 5; y }}"
    );
    let load = || {
        App::from_sources(
            manifest,
            vec![("long.rhai".into(), script.clone())],
            limits(),
        )
        .expect("compiles")
    };
    let mut pair = Pair::new(load);
    assert_eq!(pair.compiled.execution("h"), Some(Execution::Compiled));
    assert_eq!(pair.call("h", Value::Null), Ok(json!(5)));
    assert_eq!(pair.call("g", Value::Null), Ok(json!(1)));
}

fn pair_of(script: &str, limits: Limits) -> Pair {
    let manifest = r#"{ "name": "t", "routes": {}, "tables": { "t": ["n", "s"] } }"#;
    Pair::new(|| {
        App::from_sources(
            manifest,
            vec![("t.rhai".into(), script.to_string())],
            limits.clone(),
        )
        .expect("compiles")
    })
}

/// What a second review found: Rhai checks the result of every registered function (a row's
/// getters, `to_map`, `scan`) and the receiver of a registered method (`len`) against the size
/// limits, so values that only became too large together are stopped there.
#[test]
fn registered_functions_results_are_size_checked_as_in_rhai() {
    let script = r#"
fn len_body(req) { req.body.items.len() }
fn len_then_throw(req) { let n = req.body.items.len(); throw "bad request" }
fn store(req) { t.put(5, req.body); 0 }
fn field(req) { let r = t.get(5); let x = r.n; 1 }
fn field_index(req) { let r = t.get(5); let x = r["n"]; 1 }
fn set_s(req) { let r = t.get(5); r.s = req.body.s; r.save(); 0 }
fn whole(req) { let m = t.get(5).to_map(); m.s.len() }
fn fill(req) { for i in 0..req.body.n { t.put(i, #{ n: i }); } 0 }
fn scan_len(req) { t.scan(0, 1000, req.body.n).len() }
"#;
    let items: Vec<i64> = (0..60_000).collect();
    let mut pair = pair_of(script, limits());
    let body = json!({ "items": items });
    assert_eq!(
        pair.call("len_body", body.clone()).expect_err("too large")["status"],
        json!(500)
    );
    assert_eq!(
        pair.call("len_then_throw", body).expect_err("too large")["status"],
        json!(500)
    );

    let n: Vec<i64> = (0..60_000).collect();
    pair.call("store", json!({ "n": n, "s": "a" }))
        .expect("stored");
    assert!(pair.call("field", Value::Null).is_err());
    assert!(pair.call("field_index", Value::Null).is_err());
    pair.call("store", json!({ "n": 1, "s": "x".repeat(600_000) }))
        .expect("stored");
    pair.call("set_s", json!({ "s": "y".repeat(600_000) }))
        .expect("stored");
    let _ = pair.call("whole", Value::Null);

    let small = Limits {
        array_items_max: 5,
        ..limits()
    };
    let mut pair = pair_of(script, small);
    pair.call("fill", json!({ "n": 10 })).expect("filled");
    assert_eq!(pair.call("scan_len", json!({ "n": 4 })), Ok(json!(4)));
    assert!(pair.call("scan_len", json!({ "n": 10 })).is_err());
}

/// A compiled call whose scans spend the wall-clock budget stops there: it is not run again in
/// Rhai with a second budget.
#[test]
fn a_scan_that_spends_the_budget_is_not_run_again() {
    let script = r#"
fn fill(req) { for i in 0..10000 { t.put(i, #{ n: i }); } 0 }
fn slow(req) { let k = 0; loop { k += t.scan(0, 100000, 10000).len(); } }
"#;
    let limits = Limits {
        wall_clock_max: std::time::Duration::from_millis(50),
        scan_rows_max: u64::MAX,
        ..Limits::default()
    };
    let manifest = r#"{ "name": "t", "routes": {}, "tables": { "t": ["n", "s"] } }"#;
    let sources = || vec![("t.rhai".to_string(), script.to_string())];
    let app = App::from_sources(manifest, sources(), limits).expect("compiles");
    // The set-up runs under a wall clock no busy machine reaches (10,000 puts under the 50 ms
    // of the test's budget failed CI once, at a load average of 6), on the same schema.
    let unhurried = Limits {
        wall_clock_max: std::time::Duration::from_secs(600),
        ..Limits::default()
    };
    let setup = App::from_sources(manifest, sources(), unhurried).expect("compiles");
    let mut tables = Tables::new(1);
    let mut writes = WriteSet::default();
    setup
        .run_write("fill", &Request::default(), &mut tables, &mut writes)
        .expect("filled");
    writes.clear();
    let error = app
        .run_write("slow", &Request::default(), &mut tables, &mut writes)
        .expect_err("stopped");
    assert!(
        matches!(&error, pure_lang::HandlerError::Limit { limit, .. } if limit == "wall-clock time"),
        "{error:?}"
    );
    assert_eq!(
        app.fallbacks(),
        0,
        "stopped compiled, not run again in Rhai"
    );
}
