//! The compiled path against Rhai: every handler runs in both engines on the same random requests
//! and the same state, and the answers (values, or errors with their status and body), the write
//! sets and the tables must be identical after every call.
//!
//! Apps: `tests/apps/coverage` (every construct the compiler covers, on values of every type), the
//! scoreboard, the ledger and the New-Order benchmark handler. TPC-C (`apps/tpcc`) is compared the
//! same way in benchmarks/src/tpcc/compiled.rs, on the benchmark's own population and request
//! stream (lang cannot depend on the crate that generates them).
//! The seed is printed; replay a run with PURE_TEST_SEED and make it longer with PURE_TEST_SCALE.

use std::path::{Path, PathBuf};

use pure_lang::{App, Execution, Limits, Request, Tables, World, WriteSet};
use serde_json::{json, Value};

mod pair;
use pair::Pair;

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

/// Strings for the string methods: empty, one character, characters of several bytes.
fn texts() -> Vec<Value> {
    [
        "",
        "a",
        "t",
        "abc",
        "héllo wörld €",
        "0123456789",
        "ORIGINAL data",
        "é",
        "wö",
        "€",
        "l",
    ]
    .into_iter()
    .map(Value::from)
    .collect()
}

/// Starts and lengths for `sub_string`: around the ends of the texts above and the extremes.
fn positions() -> Vec<Value> {
    [
        i64::MIN,
        i64::MIN + 1,
        -100,
        -14,
        -13,
        -12,
        -5,
        -1,
        0,
        1,
        2,
        3,
        5,
        12,
        13,
        14,
        100,
        i64::MAX,
    ]
    .into_iter()
    .map(Value::from)
    .collect()
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
        "add",
        "sub",
        "mul",
        "div",
        "rem",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "and",
        "or",
        "xor",
        "neg",
        "not",
        "land",
        "lor",
        "coalesce",
        "acc",
        "const",
        "nested",
        "acc_const",
        "acc_mixed",
        "unit",
        "nope",
    ];
    let actions = [
        "insert",
        "put",
        "bump",
        "tag",
        "save",
        "delete",
        "scan",
        "pair",
        "other",
        "put_all",
        "delete_all",
        "put_all_body",
        "arith",
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
            2 if rng.below(2) == 0 => pair.call("text", json!({"a": a, "b": b})),
            2 => {
                // Mostly strings and integers (the cases the compiled path decides), sometimes
                // any value (which go to Rhai).
                let (s, x, y) = if rng.below(4) == 0 {
                    (a, b, rng.pick(&values))
                } else {
                    let texts = texts();
                    let positions = positions();
                    (rng.pick(&texts), rng.pick(&positions), rng.pick(&positions))
                };
                let which = rng.pick(&["sub_string", "sub_string", "contains", "chained"]);
                let x = if which == "sub_string" {
                    x
                } else {
                    rng.pick(&texts())
                };
                pair.call("strings", json!({"which": which, "s": s, "x": x, "y": y}))
            }
            3 => {
                let n = rng.pick(&[json!(0), json!(1), json!(5), json!(30), json!(-3), a]);
                let items = rng.pick(&[
                    json!([]),
                    json!([1, "x", 3]),
                    json!(["only"]),
                    json!({"z": 1, "a": [2], "m": {"k": "v"}}),
                    b,
                ]);
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
            9 if rng.below(2) == 0 => {
                let kind = rng.pick(&["map", "text", "unit", "api", "field", "none"]);
                let status =
                    rng.pick(&[json!(404), json!(409), json!(99), json!(200), json!("400")]);
                pair.call("thrower", json!({"kind": kind, "status": status}))
            }
            9 => {
                let status = rng.pick(&[
                    json!(200),
                    json!(201),
                    json!(204),
                    json!(304),
                    json!(404),
                    json!(99),
                    json!(600),
                    json!("201"),
                ]);
                let body = rng.pick(&[Value::Null, json!({"a": 1}), json!("x"), a]);
                let headers = rng.pick(&[
                    Value::Null,
                    json!({"location": "/items/77", "X-Count": 3}),
                    json!({"content-type": "text/plain"}),
                    json!({"bad name": "v"}),
                    json!({"x": "a\nb"}),
                    json!({"x": [1]}),
                ]);
                pair.call(
                    "responder",
                    json!({"status": status, "body": body, "headers": headers}),
                )
            }
            _ => {
                let handler = rng.pick(&["scopes", "types", "interpreted"]);
                pair.call(handler, json!({ "n": a, "a": b }))
            }
        };
    }
    // Values that outgrow the size limits as a whole (nested arrays, strings inside an array, a
    // nested push, many keys) while each part stays small: Rhai's limits count the whole value.
    for kind in ["nested", "text", "map", "keys", "literal", "grow-item"] {
        for n in [10, 60] {
            let answer = pair.call("grow", json!({"kind": kind, "n": n}));
            assert_eq!(answer.is_ok(), n == 10, "{kind} {n}: {answer:?}");
        }
    }
    // Entries and items replaced by smaller ones: what they held no longer counts (the
    // compiled path keeps a local's sizes as it changes rather than walking it each time).
    // Counted too high, they would send the call to Rhai, which answers the same: the compiled
    // call must run to the end.
    for kind in ["swap", "swap-property", "swap-item"] {
        let fallbacks = pair.compiled.fallbacks();
        let answer = pair.call("grow", json!({"kind": kind, "n": 60}));
        assert!(answer.is_ok(), "{kind}: {answer:?}");
        assert_eq!(pair.compiled.fallbacks(), fallbacks, "{kind} ran compiled");
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
                    params: vec![("player".into(), player.to_string().into())],
                    ..Request::default()
                };
                let [compiled_state, interpreted_state] = &mut pair.state;
                let answers: Vec<_> = [
                    (&pair.compiled, compiled_state),
                    (&pair.interpreted, interpreted_state),
                ]
                .into_iter()
                .map(|(app, tables)| {
                    app.run_read(
                        "get_player",
                        &request,
                        std::sync::Arc::new(tables.snapshot()),
                    )
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

/// The ledger (apps/ledger): its reads through declared indexes (`find`, `find_rev`) run compiled,
/// on random opens, deposits and transfers, refused ones included.
#[test]
fn the_ledger_runs_compiled_exactly_as_in_rhai() {
    let (seed, scale) = seed_and_scale("ledger");
    let mut rng = Rng(seed);
    let mut pair = Pair::new(|| {
        let mut app = App::load_with(&repo().join("apps/ledger"), limits()).expect("loads");
        app.set_world(World::fixed(Some(1_767_225_600_000), None));
        app
    });
    for handler in ["transfers_of", "transfer", "deposit", "get_account"] {
        assert_eq!(
            pair.compiled.execution(handler),
            Some(Execution::Compiled),
            "{handler}"
        );
    }
    let owners = ["ann", "bob", "cy"];
    let id = |rng: &mut Rng| (rng.below(12) as i64).to_string();
    for _ in 0..1500 * scale {
        let _ = match rng.below(10) {
            0 | 1 => {
                let body = json!({"owner": rng.pick(&owners), "deposit": rng.below(100)});
                pair.call("open_account", body)
            }
            2 => {
                let params = vec![("id".to_string(), id(&mut rng))];
                let body = json!({"amount": 1 + rng.below(50)});
                pair.call_route("deposit", params, Vec::new(), body)
            }
            3..=5 => {
                let body = json!({
                    "from": rng.below(12), "to": rng.below(12), "amount": 1 + rng.below(80)
                });
                pair.call("transfer", body)
            }
            6 | 7 => {
                let params = vec![("id".to_string(), id(&mut rng))];
                let query = match rng.below(3) {
                    0 => Vec::new(),
                    n => vec![("limit".to_string(), (n * 3).to_string())],
                };
                pair.call_route("transfers_of", params, query, Value::Null)
            }
            _ => {
                let query = vec![("owner".to_string(), rng.pick(&owners).to_string())];
                pair.call_route("accounts_of", Vec::new(), query, Value::Null)
            }
        };
    }
    assert_eq!(pair.compiled.fallbacks(), 0, "index reads never fall back");
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
        (
            "strings",
            json!({"which": "sub_string", "s": "héllo wörld €", "x": 3, "y": 4}),
            json!("lo w"),
        ),
        (
            "strings",
            json!({"which": "sub_string", "s": "héllo wörld €", "x": -3, "y": 2}),
            json!("d "),
        ),
        (
            "strings",
            json!({"which": "sub_string", "s": "héllo wörld €", "x": -100, "y": 3}),
            json!("hél"),
        ),
        (
            "strings",
            json!({"which": "sub_string", "s": "héllo wörld €", "x": i64::MIN, "y": 2}),
            json!("hé"),
        ),
        (
            "strings",
            json!({"which": "sub_string", "s": "héllo wörld €", "x": 12, "y": 5}),
            json!("€"),
        ),
        (
            "strings",
            json!({"which": "sub_string", "s": "héllo wörld €", "x": 13, "y": 1}),
            json!(""),
        ),
        (
            "strings",
            json!({"which": "sub_string", "s": "héllo wörld €", "x": 0, "y": i64::MAX}),
            json!("héllo wörld €"),
        ),
        (
            "strings",
            json!({"which": "sub_string", "s": "abc", "x": 1, "y": 0}),
            json!(""),
        ),
        (
            "strings",
            json!({"which": "sub_string", "s": "abc", "x": 1, "y": -1}),
            json!(""),
        ),
        (
            "strings",
            json!({"which": "contains", "s": "héllo wörld €", "x": "wö"}),
            json!(true),
        ),
        (
            "strings",
            json!({"which": "contains", "s": "héllo wörld €", "x": "x"}),
            json!(false),
        ),
        (
            "strings",
            json!({"which": "chained", "s": "abc", "x": "t"}),
            json!(["bc", true, true, true, "bc", "no", true, true]),
        ),
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
        (
            "rows",
            json!({"action": "put_all", "k": 5, "name": "five", "by": 1}),
            json!({"name": "five", "count": 2, "tags": null}),
        ),
        (
            "rows",
            json!({"action": "put_all", "k": 6, "name": "six", "by": -2}),
            json!({"name": {"name": "six", "count": 2}, "count": null, "tags": null}),
        ),
        // 5 is not "5": two of the three keys have rows (items 1, "s", 2 and "6" stay).
        (
            "rows",
            json!({"action": "delete_all", "k": 5}),
            json!([2, 4]),
        ),
        (
            "rows",
            json!({"action": "put_all_body", "name": {"p": "q", "r": "s"}, "gone": ["p"]}),
            json!(5),
        ),
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

/// A write's body is lent to its compiled call, not copied, only when the handler cannot change
/// its request: a call that falls back runs again in Rhai on the request as it was sent.
#[test]
fn a_call_that_falls_back_finds_its_request_as_sent() {
    let mut pair = Pair::new(coverage);
    for handler in [
        "changes_its_request",
        "pushes_into_its_request",
        "keeps_its_request",
    ] {
        assert_eq!(pair.compiled.execution(handler), Some(Execution::Compiled));
    }
    let calls = [
        ("changes_its_request", json!({"n": 1, "f": 1.5}), json!(2)),
        ("changes_its_request", json!({"n": 1, "f": 2.5}), json!(-2)),
        (
            "pushes_into_its_request",
            json!({"items": [7], "f": 1.5}),
            json!(2),
        ),
        ("keeps_its_request", json!({"n": 1, "f": 1.5}), json!(1)),
        ("keeps_its_request", json!({"n": 1, "f": 2.5}), json!(-1)),
    ];
    // Each twice: `Pair` lends the body on every other call.
    let mut fallbacks = 0;
    for (handler, body, expected) in calls {
        for _ in 0..2 {
            let answer = pair.call(handler, body.clone());
            assert_eq!(answer, Ok(expected.clone()), "{handler}({body})");
            fallbacks += 1;
            assert_eq!(pair.compiled.fallbacks(), fallbacks, "{handler}({body})");
        }
    }
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

/// `sub_string` on every start and length around the ends (and the extremes) of texts with
/// characters of several bytes, and `contains` on every pair of texts: as in Rhai, compiled to
/// the end.
#[test]
fn string_methods_agree_with_rhai_around_the_ends() {
    let mut pair = Pair::new(coverage);
    for s in texts() {
        for x in positions() {
            for y in positions() {
                let body = json!({"which": "sub_string", "s": s, "x": x, "y": y});
                pair.call("strings", body).expect("a substring");
            }
        }
        for x in texts() {
            let body = json!({"which": "contains", "s": s, "x": x});
            pair.call("strings", body).expect("an answer");
        }
    }
    assert_eq!(pair.compiled.fallbacks(), 0);
}

/// Only the forms of the string methods that the compiled path has compile: a handler calling
/// another form runs in Rhai from the start, rather than falling back on every call.
#[test]
fn other_forms_of_the_string_methods_run_in_rhai() {
    let script = r#"
fn two(req) { "abcdef".sub_string(1, 2) }
fn from(req) { "abcdef".sub_string(2) }
fn range(req) { "abcdef".sub_string(1..3) }
fn three(req) { "abcdef".contains("a", "b") }
"#;
    let mut pair = pair_of(script, limits());
    assert_eq!(pair.compiled.execution("two"), Some(Execution::Compiled));
    for handler in ["from", "range", "three"] {
        let execution = pair.compiled.execution(handler).expect("a handler");
        assert!(
            matches!(&execution, Execution::Interpreted { reason }
                if reason.contains("with this number of arguments")),
            "{handler}: {execution:?}"
        );
    }
    assert_eq!(pair.call("two", Value::Null), Ok(json!("bc")));
    assert_eq!(pair.call("from", Value::Null), Ok(json!("cdef")));
    assert_eq!(pair.call("range", Value::Null), Ok(json!("bc")));
    assert!(pair.call("three", Value::Null).is_err());
}

/// A local's last read takes its value instead of copying it: every way a read could be
/// followed by another use of the same local, against Rhai. Each handler answers with what a
/// wrong move would empty.
#[test]
fn a_last_read_moves_only_what_is_never_read_again() {
    let script = r#"
fn g(x) { x.push(9); x }
fn later_push(req) { let a = [1, 2]; let b = a; a.push(3); [a, b] }
fn in_loop(req) { let a = [1]; let out = []; for i in 0..3 { out.push(a); } out }
fn in_while(req) { let a = [1]; let out = []; let n = 0; while n < 3 { out.push(a); n += 1; } out }
fn in_do(req) { let a = [1]; let out = []; let n = 0; do { out.push(a); n += 1; } while n < 3; out }
fn in_loop_local(req) { let out = []; for i in 0..3 { let a = [i]; out.push(a); } out }
fn branch(req) { let a = [1]; let b = if req.body.c { a } else { [] }; [b, a] }
fn block(req) { let a = [1]; { let c = a; c.push(2); } a }
fn argument(req) { let a = [1]; let b = g(a); [a, b] }
fn shadowed(req) { let a = [1]; let a = a; a.push(2); a }
fn twice(req) { let a = [1]; [a, a] }
fn self_push(req) { let a = [1]; a.push(a); a }
fn index_reads(req) { let a = [1, 2]; a[g(a).len() - 3] = 7; 0 }
fn text(req) { let a = "x"; let b = `${a}${a}`; b + a }
fn map_value(req) { let m = #{ k: [1] }; let n = #{ m: m, again: m }; n }
fn reused_slot(req) { { let a = [1]; let b = a; } { let c = [2]; c.push(3); c } }
fn counter(req) { let a = [0]; for x in [1, 2] { a = [x]; } a }
"#;
    let mut pair = pair_of(script, limits());
    let cases = [
        ("later_push", json!([[1, 2, 3], [1, 2]])),
        ("in_loop", json!([[1], [1], [1]])),
        ("in_while", json!([[1], [1], [1]])),
        ("in_do", json!([[1], [1], [1]])),
        ("in_loop_local", json!([[0], [1], [2]])),
        ("branch", json!([[1], [1]])),
        ("block", json!([1])),
        ("argument", json!([[1], [1, 9]])),
        ("shadowed", json!([1, 2])),
        ("twice", json!([[1], [1]])),
        ("self_push", json!([1, [1]])),
        // The index runs before the target is borrowed: its read of `a` is not the last.
        ("index_reads", json!(0)),
        ("text", json!("xxx")),
        ("map_value", json!({"again": {"k": [1]}, "m": {"k": [1]}})),
        ("reused_slot", json!([2, 3])),
        ("counter", json!([2])),
    ];
    for (handler, expected) in cases {
        assert_eq!(
            pair.compiled.execution(handler),
            Some(Execution::Compiled),
            "{handler}"
        );
        let fallbacks = pair.compiled.fallbacks();
        assert_eq!(
            pair.call(handler, json!({"c": true})),
            Ok(expected),
            "{handler}"
        );
        // Ran compiled to its end: a value moved too early would have been seen there.
        assert_eq!(
            pair.compiled.fallbacks(),
            fallbacks,
            "{handler} ran compiled"
        );
    }
}

/// Answers written as the handler runs (a map literal in return position, a list of pushed
/// map literals): the same bytes as Rhai's answer in every case the compiler must tell apart,
/// and the same errors under the size limits.
#[test]
fn answers_written_as_they_run_are_the_maps_answers() {
    let script = r#"
fn lines(req) { let l = []; for i in 0..req.body.n { l.push(#{ z: i, a: `x${i}`, "q\"k": [i] }); } #{ n: req.body.n, lines: l, b: true } }
fn returned(req) { let l = []; for i in 0..3 { l.push(#{ i: i + 0 }); if i == req.body.n { return #{ at: i, l: l }; } } #{ none: (), l: l } }
fn length(req) { let l = []; l.push(#{ a: req.body.n }); #{ l: l, n: l.len() } }
fn read(req) { let l = []; l.push(#{ a: req.body.n }); let m = l; #{ l: l, m: m } }
fn twice(req) { let l = []; l.push(#{ a: req.body.n }); #{ x: l, y: l } }
fn other(req) { let l = []; l.push(1); l.push(#{ a: req.body.n }); #{ l: l } }
fn nested(req) { let inner = []; inner.push(#{ a: req.body.n }); let l = []; l.push(#{ inner: inner }); #{ l: l } }
fn called(req) { let r = lines(req); r.lines.len() }
fn table_in(req) { let l = []; l.push(#{ t: t }); #{ l: l } }
fn thrown(req) { let l = []; l.push(#{ a: req.body.n }); throw #{ status: 400, error: "no", l: l } }
fn unused(req) { let l = []; for i in 0..req.body.n { l.push(#{ a: i }); } 5 }
fn text(req) { let s = "x"; for i in 0..req.body.n { s += "abcdefghij"; } let l = []; l.push(#{ s: s }); #{ l: l } }
"#;
    let small = Limits {
        array_items_max: 10,
        map_items_max: 20,
        string_bytes_max: 40,
        ..limits()
    };
    let mut pair = pair_of(script, small);
    for handler in [
        "lines", "returned", "length", "read", "twice", "other", "nested", "called", "table_in",
        "thrown", "text", "unused",
    ] {
        assert_eq!(
            pair.compiled.execution(handler),
            Some(Execution::Compiled),
            "{handler}"
        );
        for n in [0, 1, 2, 3, 6, 9, 12] {
            // Every answer is compared with Rhai's, bytes and all, by the pair.
            let _ = pair.call(handler, json!({ "n": n }));
        }
    }
    let fallbacks = pair.compiled.fallbacks();
    assert_eq!(
        pair.call("lines", json!({"n": 2})),
        Ok(
            json!({"b": true, "lines": [{"a": "x0", "q\"k": [0], "z": 0}, {"a": "x1", "q\"k": [1], "z": 1}], "n": 2})
        )
    );
    assert_eq!(
        pair.compiled.fallbacks(),
        fallbacks,
        "written, not run again in Rhai"
    );
    // Past the limits: 10 items, or the entries of the whole answer (Rhai stops both).
    assert!(pair.call("lines", json!({"n": 6})).is_err());
    assert!(pair.call("lines", json!({"n": 12})).is_err());
    assert!(pair.call("text", json!({"n": 4})).is_err());
    // A list too long for the limits is stopped at its push, as Rhai's array is, though it is
    // never part of the answer.
    assert!(pair.call("unused", json!({"n": 12})).is_err());
    assert_eq!(
        pair.call("twice", json!({"n": 1})),
        Ok(json!({"x": [{"a": 1}], "y": [{"a": 1}]}))
    );
    assert_eq!(pair.call("called", json!({"n": 3})), Ok(json!(3)));
}

/// A literal of values that change nothing (locals, a local's property, operators on those) is
/// written without making its values, each read where it lies as its key comes: a row's
/// integer or string from its packed slot. Rhai's answers, bytes and all, and its errors.
#[test]
fn answers_written_from_where_their_values_lie_are_rhais() {
    let script = r#"
fn put(req) { t.put(req.body.k, req.body.row); 0 }
fn fields(req) { let r = t.get(req.body.k); let k = 2; #{ z: r.n, a: r.s, m: r.f, b: r.a, y: r.u, k: r.key, s: k } }
fn changed(req) { let r = t.get(req.body.k); r.n += 1; r.s = "new\n"; #{ n: r.n, s: r.s, f: r.f } }
fn ops(req) { let r = t.get(req.body.k); let x = req.body.x; #{ sum: r.n + x, prod: x * 3, cmp: x < r.n, cat: r.s + "!", big: x * 9223372036854775807 } }
fn unit_row(req) { let r = t.get(req.body.k + 1000); #{ n: r.n } }
fn map_local(req) { let m = #{ a: req.body.x, b: "two" }; #{ a: m.a, c: m.c, m: m } }
fn pushed(req) { let r = t.get(req.body.k); let l = []; for i in 0..req.body.x { l.push(#{ i: i, s: r.s, n: r.n * i }); } #{ l: l, last: r.n } }
fn other_list(req) { let a = []; a.push(#{ i: 1 }); let b = []; b.push(#{ a: a }); #{ b: b } }
fn not_pieces(req) { let r = t.get(req.body.k); #{ b: r.s.len(), a: r.n } }
"#;
    let small = Limits {
        array_items_max: 10,
        map_items_max: 30,
        string_bytes_max: 40,
        ..limits()
    };
    let mut pair = pair::pair_of_app(
        r#"{ "name": "t", "routes": {}, "tables": { "t": ["n", "s", "f", "a", "u"] } }"#,
        script,
        small,
    );
    let rows = [
        json!({"n": 5, "s": "plain", "f": 1.5, "a": [1, "x"], "u": null}),
        json!({"n": -7, "s": "quote \" and \\ and \u{1}", "f": -0.0, "a": {"k": 1}}),
        json!({"n": "not an integer", "s": 12, "f": true, "u": [[]]}),
        json!({"n": 9223372036854775807i64, "s": "é and 日本", "f": 1e300}),
        json!({"n": 1, "s": "a string of more than forty bytes, too long to read"}),
        json!([3, "positional"]),
    ];
    for (k, row) in rows.iter().enumerate() {
        pair.call("put", json!({"k": k, "row": row})).expect("put");
    }
    for handler in [
        "fields",
        "changed",
        "ops",
        "unit_row",
        "map_local",
        "pushed",
        "other_list",
        "not_pieces",
    ] {
        assert_eq!(
            pair.compiled.execution(handler),
            Some(Execution::Compiled),
            "{handler}"
        );
        for k in 0..rows.len() {
            for x in [0, 2, 11] {
                // Every answer and error is compared with Rhai's by the pair.
                let _ = pair.call(handler, json!({"k": k, "x": x}));
            }
        }
    }
    let fallbacks = pair.compiled.fallbacks();
    assert_eq!(
        pair.call("fields", json!({"k": 1})),
        Ok(
            json!({"a": "quote \" and \\ and \u{1}", "b": {"k": 1}, "k": 1, "m": -0.0, "s": 2,
            "y": null, "z": -7})
        )
    );
    assert_eq!(
        pair.call("pushed", json!({"k": 0, "x": 2})),
        Ok(
            json!({"l": [{"i": 0, "n": 0, "s": "plain"}, {"i": 1, "n": 5, "s": "plain"}], "last": 5})
        )
    );
    assert_eq!(
        pair.compiled.fallbacks(),
        fallbacks,
        "written, not run again in Rhai"
    );
    // A string past the limits is stopped where it is read, as Rhai stops it.
    assert!(pair.call("fields", json!({"k": 4})).is_err());
    assert!(pair.call("unit_row", json!({"k": 0})).is_err());
}

/// `row.field.contains(x)` searches a row's string where it lies, as Rhai answers it: a
/// substring or a character; anything else (an integer field, a changed one, a needle of
/// another type, a string past the limits) goes the general way, or to Rhai.
#[test]
fn a_rows_string_searched_where_it_lies_is_rhais_contains() {
    let script = r#"
fn put(req) { t.put(req.body.k, req.body.row); 0 }
fn has(req) { let r = t.get(req.body.k); r.s.contains(req.body.x) }
fn has_char(req) { let r = t.get(req.body.k); r.s.contains('é') }
fn has_changed(req) { let r = t.get(req.body.k); r.s = "changed"; r.s.contains(req.body.x) }
fn has_int(req) { let r = t.get(req.body.k); r.n.contains(req.body.x) }
fn both(req) { let r = t.get(req.body.k); if r.s.contains("ORIGINAL") && r.s.contains(req.body.x) { "B" } else { "G" } }
"#;
    let small = Limits {
        string_bytes_max: 40,
        ..limits()
    };
    let mut pair = pair::pair_of_app(
        r#"{ "name": "t", "routes": {}, "tables": { "t": ["n", "s"] } }"#,
        script,
        small,
    );
    let rows = [
        json!({"n": 5, "s": "xxORIGINALyy"}),
        json!({"n": 6, "s": "café"}),
        json!({"n": 7, "s": ""}),
        json!({"n": 8, "s": 12}),
        json!({"n": 9, "s": "a string of more than forty bytes, ORIGINAL"}),
    ];
    for (k, row) in rows.iter().enumerate() {
        pair.call("put", json!({"k": k, "row": row})).expect("put");
    }
    for handler in ["has", "has_char", "has_changed", "has_int", "both"] {
        assert_eq!(
            pair.compiled.execution(handler),
            Some(Execution::Compiled),
            "{handler}"
        );
        for k in 0..rows.len() {
            for x in [
                json!("ORIGINAL"),
                json!(""),
                json!("é"),
                json!("zz"),
                json!(3),
            ] {
                // Every answer and error is compared with Rhai's by the pair.
                let _ = pair.call(handler, json!({"k": k, "x": x}));
            }
        }
    }
    let fallbacks = pair.compiled.fallbacks();
    assert_eq!(
        pair.call("both", json!({"k": 0, "x": "yy"})),
        Ok(json!("B"))
    );
    assert_eq!(pair.call("has_char", json!({"k": 1})), Ok(json!(true)));
    assert_eq!(
        pair.compiled.fallbacks(),
        fallbacks,
        "searched, not run again in Rhai"
    );
    assert!(pair.call("has", json!({"k": 4, "x": "a"})).is_err());
}

/// `table.insert(key, [..])` with items that change nothing makes the row's fields straight
/// from them (a row's string by name copied where it lies): the same rows, answers and
/// errors as Rhai's, on a table with types and required fields and on one without.
#[test]
fn rows_inserted_from_array_literals_are_rhais() {
    let script = r#"
fn fill(req) { src.put(req.body.k, req.body.row); 0 }
fn typed(req) { let r = src.get(req.body.k); let x = req.body.x; let name = req.body.name; dst.insert(req.body.k, x, [x, r[name], (), x * 2]); dst.get(req.body.k, x).to_map() }
fn short(req) { let x = req.body.x; dst.insert(req.body.k, x, [x]); 1 }
fn misplaced(req) { let r = src.get(req.body.k); let name = req.body.name; dst.insert(req.body.k, 1, [r[name], "b"]); 1 }
fn loose(req) { let r = src.get(req.body.k); let x = req.body.x; let name = req.body.name; any.put(req.body.k, [r[name], x, r.n + x, "text", 1.5, true]); any.get(req.body.k).to_map() }
fn changed(req) { let r = src.get(req.body.k); r.s = "changed"; let name = "s"; any.put(req.body.k, [r[name]]); any.get(req.body.k).to_map() }
fn string_key(req) { let x = req.body.x; any.put(`k${x}`, [x, x + 1]); any.get(`k${x}`).to_map() }
"#;
    let small = Limits {
        string_bytes_max: 40,
        array_items_max: 8,
        ..limits()
    };
    let mut pair = pair::pair_of_app(
        r#"{ "name": "t", "routes": {}, "tables": {
            "src": ["n", "s", "f"],
            "dst": { "a": "int!", "b": "string!", "c": "int", "d": "int" },
            "any": ["p", "q", "r", "s", "t", "u"] } }"#,
        script,
        small,
    );
    let rows = [
        json!({"n": 5, "s": "plain", "f": 1.5}),
        json!({"n": -7, "s": "quote \" and é", "f": "str"}),
        json!({"n": "not an int", "s": 12, "f": [1]}),
        json!({"n": 1, "s": "a string of more than forty bytes, too long to copy"}),
    ];
    for (k, row) in rows.iter().enumerate() {
        pair.call("fill", json!({"k": k, "row": row}))
            .expect("fill");
    }
    for handler in [
        "typed",
        "short",
        "misplaced",
        "loose",
        "changed",
        "string_key",
    ] {
        assert_eq!(
            pair.compiled.execution(handler),
            Some(Execution::Compiled),
            "{handler}"
        );
        for k in 0..rows.len() {
            for x in [json!(3), json!("x"), json!(9223372036854775807i64)] {
                for name in ["s", "f", "n", "nope"] {
                    // Every answer, error and table is compared with Rhai's by the pair.
                    let _ = pair.call(handler, json!({"k": k, "x": x, "name": name}));
                }
            }
        }
    }
    let fallbacks = pair.compiled.fallbacks();
    assert_eq!(
        pair.call("typed", json!({"k": 0, "x": 4, "name": "s"})),
        Ok(json!({"a": 4, "b": "plain", "c": null, "d": 8}))
    );
    assert_eq!(
        pair.compiled.fallbacks(),
        fallbacks,
        "made, not run again in Rhai"
    );
    // A required field left unset, a value of the wrong type: Rhai's errors.
    assert!(pair.call("short", json!({"k": 0, "x": 5})).is_err());
    assert!(pair
        .call("misplaced", json!({"k": 0, "name": "s"}))
        .is_err());
    assert!(pair
        .call("typed", json!({"k": 0, "x": 6, "name": "n"}))
        .is_err());
    assert!(pair
        .call("typed", json!({"k": 3, "x": 7, "name": "s"}))
        .is_err());
}

/// `table.get(parts).name` in an operator reads the field from the stored row, with no row
/// made: Rhai's answers and errors for integer and string fields, rows that are not there,
/// string and other keys, strings past the limits, and a write's own changes.
#[test]
fn a_field_of_a_row_got_in_an_operator_is_rhais() {
    let script = r#"
fn fill(req) { t.put(req.body.k, req.body.j, req.body.row); 0 }
fn low(req) { let k = req.body.k; let j = req.body.j; let x = req.body.x; t.get(k, j).n < x }
fn sum(req) { let k = req.body.k; let x = req.body.x; t.get(k, 1).n + t.get(k, 2).n * x }
fn text(req) { let k = req.body.k; let x = req.body.x; t.get(k, 1).s + x }
fn count(req) { let k = req.body.k; let n = 0; for j in 1..4 { if t.get(k, j).n > 0 { n += 1; } } n }
fn own(req) { let k = req.body.k; t.put(k, 5, #{ n: req.body.x }); t.get(k, 5).n + 1 }
fn unit(req) { let k = req.body.k; t.get(k, 1).u == () }
"#;
    let small = Limits {
        string_bytes_max: 40,
        ..limits()
    };
    let mut pair = pair::pair_of_app(
        r#"{ "name": "t", "routes": {}, "tables": { "t": ["n", "s", "u"] } }"#,
        script,
        small,
    );
    let rows = [
        (0, 1, json!({"n": 5, "s": "plain"})),
        (0, 2, json!({"n": -7, "s": "é"})),
        (0, 3, json!({"n": 0})),
        (1, 1, json!({"n": "text", "s": 3})),
        (1, 2, json!({"n": 1.5})),
        (
            2,
            1,
            json!({"n": 9223372036854775807i64, "s": "a string of more than forty bytes, too long"}),
        ),
    ];
    for (k, j, row) in &rows {
        pair.call("fill", json!({"k": k, "j": j, "row": row}))
            .expect("fill");
    }
    for handler in ["low", "sum", "text", "count", "own", "unit"] {
        assert_eq!(
            pair.compiled.execution(handler),
            Some(Execution::Compiled),
            "{handler}"
        );
        for k in [
            json!(0),
            json!(1),
            json!(2),
            json!(3),
            json!("0"),
            json!(0.5),
        ] {
            for x in [json!(3), json!(-10), json!("s"), json!(2)] {
                // Every answer and error is compared with Rhai's by the pair.
                let _ = pair.call(handler, json!({"k": k, "j": 1, "x": x}));
                let _ = pair.call(handler, json!({"k": k, "j": 9, "x": x}));
            }
        }
    }
    let fallbacks = pair.compiled.fallbacks();
    assert_eq!(
        pair.call("low", json!({"k": 0, "j": 2, "x": 0})),
        Ok(json!(true))
    );
    assert_eq!(pair.call("sum", json!({"k": 0, "x": 2})), Ok(json!(-9)));
    assert_eq!(pair.call("own", json!({"k": 0, "x": 41})), Ok(json!(42)));
    assert_eq!(pair.call("count", json!({"k": 0})), Ok(json!(1)));
    assert_eq!(
        pair.compiled.fallbacks(),
        fallbacks,
        "read in place, not run again in Rhai"
    );
    assert!(pair.call("low", json!({"k": 0, "j": 9, "x": 0})).is_err());
    assert!(pair.call("text", json!({"k": 2, "x": "x"})).is_err());
}

fn pair_of(script: &str, limits: Limits) -> Pair {
    pair::pair_of_app(
        r#"{ "name": "t", "routes": {}, "tables": { "t": ["n", "s"] } }"#,
        script,
        limits,
    )
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

/// The compiled path keeps the size-limit counts of the local it is building: every way a local
/// can change while they are kept, against Rhai, under small limits.
#[test]
fn kept_sizes_follow_every_way_a_local_changes() {
    let script = r#"
fn g(x) { let b = []; b.push(1); b.push(2); b.push(3); 0 }
fn g2(x) { x.push(1); x.push(2); x }
fn rec(n) { let a = []; a.push(n); if n > 0 { rec(n - 1); } a.push(n); a.len() }
fn call_between(req) { let a = []; a.push(1); g(0); for i in 0..req.body.n { a.push(i); } a.len() }
fn call_param(req) { let a = []; a.push(1); let c = g2(a); for i in 0..req.body.n { a.push(i); } a.len() }
fn recursion(req) { let a = []; a.push(1); rec(3); for i in 0..req.body.n { a.push(i); } a.len() }
fn nested(req) { let a = [[]]; a.push(0); for i in 0..req.body.n { a[0].push(i); } a.len() }
fn nested_neg(req) { let a = [[]]; a.push(0); for i in 0..req.body.n { a[-2].push(i); } a.len() }
fn prop(req) { let m = #{ l: [] }; m.x = 1; for i in 0..req.body.n { m.l.push(i); } m.len() }
fn self_push(req) { let a = [1]; for i in 0..req.body.n { a.push(a); } a.len() }
fn self_set(req) { let a = [1, 2]; for i in 0..req.body.n { a[0] = a; } a.len() }
fn self_prop(req) { let m = #{ x: 1 }; for i in 0..req.body.n { m.y = m; } m.len() }
fn loop_var(req) { let a = []; a.push(1); for a in [[1,2,3,4,5,6,7,8,9]] { a.push(1); a.push(2); } a.len() }
fn loop_var2(req) { for x in [[1], [1,2,3,4,5,6,7,8,9]] { x.push(1); x.push(2); } 0 }
fn shadow(req) { let a = []; a.push(1); { let a = [1,2,3,4,5,6,7,8]; a.push(1); a.push(2); a.push(3); } a.push(2); 0 }
fn block_slot(req) { { let a = []; a.push(1); } { let b = [1,2,3,4,5,6,7,8,9]; b.push(1); b.push(2); } 0 }
fn let_block(req) { let a = { let t = []; t.push(1); [1,2,3,4,5,6,7,8,9] }; a.push(1); a.push(2); 0 }
fn compound_text(req) { let m = #{ s: "" }; m.x = 1; for i in 0..req.body.n { m.s += "abcde"; } m.len() }
fn compound_item(req) { let a = [""]; a.push(1); for i in 0..req.body.n { a[0] += "abcde"; } a.len() }
fn assign_whole(req) { let a = []; a.push(1); a = [1,2,3,4,5,6,7,8,9]; a.push(1); a.push(2); 0 }
fn compound_whole(req) { let s = ["x"]; s.push(1); let t = "abc"; t += "abcdefghijabcdefghij"; s[0] = t; s[0] = t + "abcdefghij"; 0 }
fn if_expr(req) { let a = []; a.push(1); let b = if true { a } else { [] }; b.push(1); for i in 0..req.body.n { a.push(i); } a.len() }
fn two_locals(req) { let a = []; let b = []; a.push(1); b.push(1); for i in 0..req.body.n { a.push(i); b.push(i); } a.len() }
fn arg_mutates(req) { let a = []; a.push(1); for i in 0..req.body.n { a.push({ a.push(i); i }); } a.len() }
fn index_mutates(req) { let a = [0]; a.push(1); for i in 0..req.body.n { a[{ a.push(i); 0 }] = i; } a.len() }
fn value_mutates(req) { let a = [0]; a.push(1); for i in 0..req.body.n { a[0] = { a.push(i); i }; } a.len() }
fn map_keys(req) { let m = #{}; for i in 0..req.body.n { m[`k${i}`] = [i]; m[`k${i}`] = i; m[`j${i}`] = ""; } m.len() }
fn row_in(req) { t.put(1, #{ n: 1, s: "a" }); let r = t.get(1); let a = [r]; a.push(1); let r2 = a[0]; r2.save(); for i in 0..req.body.n { a.push(i); } a.len() }
fn row_local(req) { t.put(1, #{ n: 1, s: "a" }); let r = t.get(1); r.s = "x"; r.n = [1,2,3]; r["n"] = 5; let a = []; a.push(r); for i in 0..req.body.n { a.push(i); } a.len() }
fn temp_root(req) { let big = [1,2,3,4,5,6,7]; [big, []][1].push(1); 0 }
fn temp_method(req) { t.put(1, #{ n: [1,2,3,4,5,6,7], s: [] }); t.get(1).to_map().s.push(1); 0 }
fn table_local(req) { let x = t; x.put(1, #{ n: 1, s: "a" }); x.scan(0, 10, 5).push(1); 0 }
fn len_grows(req) { let a = []; let k = 0; for i in 0..req.body.n { a.push(i); k += a.len(); } k }
fn len_nested(req) { let a = [[]]; let k = 0; for i in 0..req.body.n { a[0].push(i); k += a.len() + a[0].len(); } k }
fn len_map(req) { let m = #{}; let k = 0; for i in 0..req.body.n { m[`k${i}`] = "abcde"; k += m.len(); } k }
fn len_deep(req) { let a = []; let k = 0; for i in 0..req.body.n { a.push("abcdefghij"); a.push([a.len()]); k += a.len(); } k }
"#;
    let small = Limits {
        array_items_max: 10,
        map_items_max: 10,
        string_bytes_max: 40,
        ..limits()
    };
    let mut pair = pair_of(script, small);
    let handlers = [
        "call_between",
        "call_param",
        "recursion",
        "nested",
        "nested_neg",
        "prop",
        "self_push",
        "self_set",
        "self_prop",
        "loop_var",
        "loop_var2",
        "shadow",
        "block_slot",
        "let_block",
        "compound_text",
        "compound_item",
        "assign_whole",
        "compound_whole",
        "if_expr",
        "two_locals",
        "arg_mutates",
        "index_mutates",
        "value_mutates",
        "map_keys",
        "row_in",
        "row_local",
        "temp_root",
        "temp_method",
        "table_local",
        "len_grows",
        "len_nested",
        "len_map",
        "len_deep",
    ];
    for handler in handlers {
        assert_eq!(
            pair.compiled.execution(handler),
            Some(Execution::Compiled),
            "{handler}"
        );
        for n in [0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 12, 20] {
            let before = pair.compiled.fallbacks();
            let answer = pair.call(handler, json!({ "n": n }));
            eprintln!(
                "{handler} {n}: {answer:?} fallback={}",
                pair.compiled.fallbacks() - before
            );
        }
    }
}

/// A push into part of a temporary is checked as Rhai checks it, on the array pushed into, not
/// on the whole temporary (which would send such calls to Rhai needlessly; found by review).
#[test]
fn a_push_into_part_of_a_temporary_is_checked_as_rhai_checks_it() {
    let script = r#"
fn temp_root(req) { let big = [1, 2, 3, 4, 5, 6, 7, 8]; [big, []][1].push(1); 0 }
fn temp_method(req) { t.put(1, #{ n: [1, 2, 3, 4, 5, 6, 7, 8, 9], s: [0] }); t.get(1).to_map().s.push(1); 0 }
"#;
    let small = Limits {
        array_items_max: 10,
        ..limits()
    };
    let mut pair = pair_of(script, small);
    let mut fell_back = Vec::new();
    for handler in ["temp_root", "temp_method"] {
        assert_eq!(pair.compiled.execution(handler), Some(Execution::Compiled));
        let before = pair.compiled.fallbacks();
        assert_eq!(pair.call(handler, json!({})), Ok(json!(0)), "{handler}");
        if pair.compiled.fallbacks() != before {
            fell_back.push(handler);
        }
    }
    assert_eq!(
        fell_back,
        Vec::<&str>::new(),
        "these fell back to Rhai needlessly"
    );
}

/// Random sequences of changes to locals, compiled against Rhai (in a build with debug
/// assertions, `Frame::keep_sizes` also checks every count it keeps).
#[test]
fn random_changes_to_locals_agree_with_rhai() {
    let (seed, scale) = seed_and_scale("random_changes_to_locals");
    let mut rng = Rng(seed);
    let exprs = [
        "1",
        "\"abcdefgh\"",
        "[1, 2]",
        "[]",
        "#{ x: [1] }",
        "a",
        "m",
        "\"xy\" + \"zw\"",
        "h(2)",
        "a[0]",
        "m.k1",
        "a[-1]",
    ];
    let small = Limits {
        array_items_max: 12,
        map_items_max: 8,
        string_bytes_max: 30,
        ..limits()
    };
    let mut compared = 0;
    let mut fell = 0;
    for _ in 0..300 * scale {
        let mut body = String::new();
        for _ in 0..rng.below(8) + 1 {
            let e = rng.pick(&exprs);
            let e2 = rng.pick(&exprs);
            let i = rng.below(5) as i64 - 2;
            let k = rng.below(3);
            let arr = rng.pick(&["[1, 2]", "[]", "[[]]", "[\"ab\"]", "[a]"]);
            let stmt = match rng.below(18) {
                0 | 1 => format!("a.push({e});"),
                2 => format!("a[{i}] = {e};"),
                3 => format!("if type_of(a[{i}]) == \"array\" {{ a[{i}].push({e}); }}"),
                4 => format!("m.k{k} = {e};"),
                5 => format!("m[\"k{k}\"] = {e};"),
                6 => format!("if type_of(m.k{k}) == \"array\" {{ m.k{k}.push({e}); }}"),
                7 => format!("if type_of(m.k{k}) == \"string\" {{ m.k{k} += \"abc\"; }}"),
                8 => format!("a = {arr};"),
                9 => format!("{{ let a = {arr}; a.push({e2}); a.push(1); }}"),
                10 => format!("let x = h({e});"),
                11 => "for v in a { if type_of(v) == \"array\" { v.push(1); v.push(2); } }"
                    .to_string(),
                12 => "a.push(a);".to_string(),
                13 => format!("m.k{k} = m;"),
                14 => format!("if type_of(a[{i}]) == \"string\" {{ a[{i}] += \"ab\"; }}"),
                15 => format!("let b = {arr}; b.push({e2}); a = b;"),
                16 => format!("m = #{{ k{k}: {e} }};"),
                _ => format!("if a.len() > 2 {{ a[{i}] = {e}; }} else {{ a.push({e2}); }}"),
            };
            let stmt = format!("if a.len() < 3 {{ a.push(\"s\"); a.push(1); a.push(1); }} {stmt}");
            body.push_str(&stmt);
            body.push(' ');
        }
        let script = format!(
            "fn h(x) {{ let z = []; z.push(x); z.push(z); z.len() }}\n\
             fn run(req) {{ let a = []; let m = #{{}}; for i in 0..req.body.n {{ {body} }} [type_of(a), type_of(m)] }}\n"
        );
        let mut pair = pair_of(&script, small.clone());
        assert_eq!(
            pair.compiled.execution("run"),
            Some(Execution::Compiled),
            "{script}"
        );
        for n in [1, 2, 3, 5] {
            let before = pair.compiled.fallbacks();
            let _ = pair.call("run", json!({ "n": n }));
            compared += 1;
            fell += pair.compiled.fallbacks() - before;
        }
    }
    eprintln!("{compared} calls, {fell} fell back");
}

/// `respond` in both engines: a 201 with headers commits the handler's write; a 204 has no
/// body; a status, body or header that cannot be sent is a script error naming the mistake,
/// and the write is rolled back; a thrown status outside 400–599 is a script error too.
#[test]
fn respond_answers_with_status_and_headers_and_commits() {
    for interpreted in [false, true] {
        let mut app = coverage();
        app.set_interpreted(interpreted);
        let mut tables = Tables::new(app.schema().tables.len());
        let mut writes = WriteSet::default();
        let mut call = |handler: &str, body: Value| {
            let request = Request {
                body: pure_lang::to_dynamic(&body),
                ..Request::default()
            };
            let answer = app.run_write(handler, &request, &mut tables, &mut writes);
            let committed = !writes.is_empty();
            writes.clear();
            (answer, committed)
        };
        let (answer, committed) = call(
            "responder",
            json!({"status": 201, "body": {"id": 77}, "headers": {"Location": "/items/77", "x-n": 3}}),
        );
        let answer = answer.expect("answered");
        assert_eq!(answer.status, 201);
        assert_eq!(
            answer.headers,
            vec![
                ("location".to_string(), "/items/77".to_string()),
                ("x-n".to_string(), "3".to_string())
            ]
        );
        assert_eq!(answer.body, json!({"id": 77}));
        assert!(committed, "a 201 commits");

        let (answer, committed) = call("responder", json!({"status": 204, "body": null}));
        assert_eq!(answer.expect("answered").status, 204);
        assert!(committed);

        let many: serde_json::Map<String, Value> =
            (0..65).map(|i| (format!("h{i}"), json!("v"))).collect();
        let long: serde_json::Map<String, Value> = (0..20)
            .map(|i| (format!("h{i}"), json!("v".repeat(1000))))
            .collect();
        for (body, mistake) in [
            (json!({"status": 204, "body": 1}), "has no body"),
            (json!({"status": 205, "body": 1}), "has no body"),
            (
                json!({"status": 200, "body": 1, "headers": many}),
                "at most 64 headers",
            ),
            (
                json!({"status": 200, "body": 1, "headers": long}),
                "more than 16384 bytes",
            ),
            (
                json!({"status": 200, "body": 1, "headers": {"X-A": "1", "x-a": "2"}}),
                "given twice",
            ),
            (
                json!({"status": 200, "body": 1, "headers": {"x".repeat(300): "1"}}),
                "at most 256",
            ),
            (json!({"status": 99, "body": 1}), "200 to 599"),
            (
                json!({"status": 200, "body": 1, "headers": {"content-length": "9"}}),
                "itself",
            ),
            (
                json!({"status": 200, "body": 1, "headers": {"a b": "9"}}),
                "not a header name",
            ),
            (
                json!({"status": 200, "body": 1, "headers": {"x": "a\nb"}}),
                "printable ASCII",
            ),
            (
                json!({"status": 200, "body": 1, "headers": {"x": [1]}}),
                "string or an integer",
            ),
        ] {
            let (answer, committed) = call("responder", body.clone());
            let error = answer.expect_err("a script error");
            assert_eq!(error.status(), 500, "{body}");
            assert!(error.to_string().contains(mistake), "{body}: {error}");
            assert!(!committed, "{body}: rolled back");
        }

        let (answer, _) = call("thrower", json!({"kind": "map", "status": 200}));
        let error = answer.expect_err("a script error");
        assert_eq!(error.status(), 500);
        assert!(error.to_string().contains("400 to 599"), "{error}");
        let (answer, _) = call("thrower", json!({"kind": "map", "status": 409}));
        assert_eq!(answer.expect_err("thrown").status(), 409);
    }
}

/// `now()`, `uuid()` and `random()` run compiled, and a fixed world gives both engines the same
/// values: one `now()` for a call, ids of version 7, numbers in their range.
#[test]
fn now_uuid_and_random_run_compiled_and_agree_with_rhai_in_a_fixed_world() {
    let manifest =
        r#"{"name": "w", "tables": {"t": ["a"]}, "routes": {"POST /d": "d", "POST /f": "f"}}"#;
    // `f` draws, then falls back to Rhai (printing a map): Rhai must draw the same numbers.
    let script = "fn d(request) { let t = now(); let n = 0; for i in 0..100 { n += i; } \
                  #{ t: t, same: now() == t, id: uuid(), r: random(1, 3), one: random(5, 5) } }\n\
                  fn f(request) { let r = random(1, 1000000000); print(#{ r: r }); \
                  [r, random(1, 1000000000)] }";
    let answers: Vec<Value> = [false, true]
        .into_iter()
        .map(|interpreted| {
            let files = vec![("w.rhai".to_string(), script.to_string())];
            let mut app = App::from_sources(manifest, files, limits()).expect("loads");
            assert_eq!(app.execution("d"), Some(Execution::Compiled));
            app.set_interpreted(interpreted);
            app.set_world(pure_lang::World::fixed(Some(1_700_000_000_123), Some(3)));
            let mut tables = Tables::new(1);
            let mut writes = WriteSet::default();
            let mut run = |handler: &str| {
                let answer = app.run_write(handler, &Request::default(), &mut tables, &mut writes);
                writes.clear();
                answer.expect("answers").body.to_value()
            };
            let fallen = run("f");
            json!({"d": run("d"), "f": fallen, "f2": run("f")})
        })
        .collect();
    assert_eq!(answers[0], answers[1]);
    assert_ne!(answers[0]["f"], answers[0]["f2"], "calls draw differently");
    let a = &answers[0]["d"];
    assert_eq!(a["t"], json!(1_700_000_000_123_i64));
    assert_eq!(a["same"], json!(true));
    assert_eq!(a["one"], json!(5));
    assert!((1..=3).contains(&a["r"].as_i64().expect("an integer")));
    assert!(a["id"]
        .as_str()
        .expect("a string")
        .starts_with("018bcfe5-687b-7"));
}

/// Handlers' log lines reach the app's sink once each, tagged with the handler and request id:
/// compiled or in Rhai, after a compiled attempt that Rhai ran again (its lines dropped with
/// it), and past the per-call cap (counted, not kept).
#[test]
fn log_lines_reach_the_sink_once_with_their_call() {
    use pure_lang::{Level, LogLine, LogSink};
    use std::sync::{Arc, Mutex};

    #[derive(Default)]
    struct Capture(Mutex<Vec<(Level, String, String, String)>>);
    impl LogSink for Capture {
        fn log(&self, line: &LogLine<'_>) {
            self.0.lock().unwrap().push((
                line.level,
                line.handler.to_string(),
                line.request_id.to_string(),
                line.message.to_string(),
            ));
        }
    }
    let manifest = r#"{"name": "l", "tables": {"t": ["a"]},
        "routes": {"POST /a": "a", "POST /b": "b", "POST /c": "c"}}"#;
    let script = r#"
        fn a(request) { print("hello"); warn(7); error("bad " + request.body.n); debug("dbg"); 1 }
        fn b(request) { print("once"); let m = #{}; m.x.y }
        fn c(request) { for i in 0..100 { print(i); } 0 }
    "#;
    for interpreted in [false, true] {
        let files = vec![("l.rhai".to_string(), script.to_string())];
        let mut app = App::from_sources(manifest, files, limits()).expect("loads");
        app.set_interpreted(interpreted);
        let capture = Arc::new(Capture::default());
        app.set_log(capture.clone());
        let request = |n: i64| Request {
            body: pure_lang::to_dynamic(&json!({ "n": n })),
            head: Box::new(pure_lang::Head {
                id: format!("req-{n}").into(),
                ..Default::default()
            }),
            ..Request::default()
        };
        let mut tables = Tables::new(1);
        let mut writes = WriteSet::default();
        let mut run = |handler: &str, n: i64| {
            let answer = app.run_write(handler, &request(n), &mut tables, &mut writes);
            writes.clear();
            answer
        };
        run("a", 1).expect("answers");
        let lines = std::mem::take(&mut *capture.0.lock().unwrap());
        let expected = [
            (Level::Info, "hello"),
            (Level::Warn, "7"),
            (Level::Error, "bad 1"),
            (Level::Debug, "\"dbg\""),
        ];
        assert_eq!(lines.len(), 4, "{lines:?}");
        for (line, (level, message)) in lines.iter().zip(expected) {
            assert_eq!(
                (line.0, line.1.as_str(), line.2.as_str()),
                (level, "a", "req-1")
            );
            assert_eq!(line.3, message);
        }

        run("b", 2).expect_err("a script error");
        let lines = std::mem::take(&mut *capture.0.lock().unwrap());
        assert_eq!(lines.len(), 1, "logged once: {lines:?}");
        assert_eq!(
            (lines[0].2.as_str(), lines[0].3.as_str()),
            ("req-2", "once")
        );

        run("c", 3).expect("answers");
        let lines = std::mem::take(&mut *capture.0.lock().unwrap());
        assert_eq!(lines.len(), pure_lang::LOG_LINES_PER_CALL_MAX + 1);
        assert_eq!(lines[0].3, "0");
        let last = lines.last().expect("a line");
        assert_eq!(last.0, Level::Warn);
        assert!(last.3.starts_with("36 more log lines"), "{}", last.3);
    }
}

/// An overflow stops the handler with a 500 that names the operation and its operands, where,
/// and the checked alternative; `checked_add` and its kin give `()` instead, compiled and in Rhai.
#[test]
fn overflow_says_what_and_where_and_checked_arithmetic_gives_unit() {
    let manifest =
        r#"{"name": "o", "tables": {"t": ["a"]}, "routes": {"POST /a": "a", "POST /c": "c"}}"#;
    let script = "fn a(request) {\n    let b = request.body;\n    b.x + b.y\n}\n\
                  fn c(request) { let b = request.body; \
                  [checked_add(b.x, b.y), checked_sub(-b.x, b.y + 1), checked_mul(b.x, 2), checked_add(1, 2)] }";
    for interpreted in [false, true] {
        let files = vec![("o.rhai".to_string(), script.to_string())];
        let mut app = App::from_sources(manifest, files, limits()).expect("loads");
        assert_eq!(app.execution("c"), Some(Execution::Compiled));
        app.set_interpreted(interpreted);
        let mut tables = Tables::new(1);
        let mut writes = WriteSet::default();
        let body = json!({"x": i64::MAX, "y": 1});
        let request = Request {
            body: pure_lang::to_dynamic(&body),
            ..Request::default()
        };
        let error = app
            .run_write("a", &request, &mut tables, &mut writes)
            .expect_err("an overflow");
        let error = error.to_json();
        let message = error["error"].as_str().expect("a message");
        assert!(message.contains("9223372036854775807 + 1"), "{message}");
        assert!(message.contains("checked_add"), "{message}");
        assert_eq!(
            (&error["file"], &error["line"]),
            (&json!("o.rhai"), &json!(3))
        );
        let answer = app
            .run_write("c", &request, &mut tables, &mut writes)
            .expect("answers");
        assert_eq!(answer.body, json!([null, null, null, 3]));
    }
}

/// Review (issue 17): more ways a local changes around `len()` on it (the `len_on_root` branch
/// keeps the local's sizes after the check), against Rhai under small limits. Run in a debug
/// build too, where `Frame::keep_sizes` asserts that the sizes kept are exact.
#[test]
fn review_len_on_root_around_every_change() {
    let script = r#"
fn h(a) { a.push(1); a.len() }
fn len_in_push(req) { let a = []; for i in 0..req.body.n { a.push(a.len()); } a.len() }
fn len_in_index(req) { let a = [""]; for i in 0..req.body.n { a.push(i); a[a.len() - 1] = "abcdefgh"; } a.len() }
fn len_in_value(req) { let a = [0]; for i in 0..req.body.n { a[0] = a.len(); a.push("abcde"); } a.len() }
fn concat(req) { let a = []; let k = a.len(); for i in 0..req.body.n { a += [i, i]; k += a.len(); } k }
fn concat_text(req) { let m = #{ s: "" }; let k = m.len(); for i in 0..req.body.n { m.s += "abcdefgh"; k += m.len(); } k }
fn param(req) { let a = []; let k = 0; for i in 0..req.body.n { a.push(i); k += h(a) + a.len(); } k }
fn whole(req) { let a = [1]; let k = a.len(); for i in 0..req.body.n { a = [a, a]; k += a.len(); } k }
fn map_index(req) { let m = #{}; let k = 0; for i in 0..req.body.n { m[`${m.len()}`] = "abcdef"; k += m.len(); } k }
fn nested_then_len(req) { let a = [[]]; let k = a.len(); for i in 0..req.body.n { a[0].push("abcdefgh"); k += a.len(); } k }
fn nested_prop(req) { let m = #{ l: [] }; let k = m.len(); for i in 0..req.body.n { m.l.push("abcdefgh"); k += m.len(); } k }
fn two(req) { let a = []; let b = []; let k = 0; for i in 0..req.body.n { a.push("abcdefgh"); k += a.len(); b.push(a); k += b.len(); } k }
fn while_len(req) { let a = []; while a.len() < req.body.n { a.push("abcdefgh"); } a.len() }
fn shadow_len(req) { let a = [1]; let k = a.len(); let a = [[1,2,3,4,5,6,7,8,9], [1]]; for i in 0..req.body.n { a.push(i); k += a.len(); } k }
fn block_len(req) { let k = 0; for i in 0..req.body.n { let a = []; a.push(1); k += a.len(); { let b = [1,2,3,4,5,6,7,8]; b.push(i); k += b.len(); } } k }
fn loop_var_len(req) { let k = 0; for x in [[1], [1,2,3,4,5,6,7,8,9]] { k += x.len(); for i in 0..req.body.n { x.push(i); } k += x.len(); } k }
fn compound_index(req) { let a = ["", 1]; let k = a.len(); for i in 0..req.body.n { a[0] += "abcdefgh"; k += a.len(); } k }
fn self_len(req) { let a = [1]; for i in 0..req.body.n { a.push(a); a.len(); } a.len() }
fn map_self(req) { let m = #{ x: 1 }; for i in 0..req.body.n { m.len(); m[`k${i}`] = m; } m.len() }
fn rows_len(req) { for i in 0..req.body.n { t.put(i, #{ n: i, s: "abcdefghij" }); } let rows = t.scan((), (), 100); let page = []; for r in rows { if page.len() == 100 { break; } page.push(#{ s: r.s }); } page.len() }
"#;
    let small = Limits {
        array_items_max: 10,
        map_items_max: 10,
        string_bytes_max: 40,
        ..limits()
    };
    let mut pair = pair_of(script, small);
    for handler in [
        "len_in_push",
        "len_in_index",
        "len_in_value",
        "concat",
        "concat_text",
        "param",
        "whole",
        "map_index",
        "nested_then_len",
        "nested_prop",
        "two",
        "while_len",
        "shadow_len",
        "block_len",
        "loop_var_len",
        "compound_index",
        "self_len",
        "map_self",
        "rows_len",
    ] {
        assert_eq!(
            pair.compiled.execution(handler),
            Some(Execution::Compiled),
            "{handler}"
        );
        for n in [0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 20] {
            pair.call(handler, json!({ "n": n })).ok();
        }
    }
}

/// `int_set()`: insert, contains (and `in`), len, its answer as an array, `type_of`, and the
/// limit on its size, compiled exactly as Rhai runs them, on random integers with repeats and
/// items that are not integers.
#[test]
fn an_int_set_runs_compiled_exactly_as_in_rhai() {
    let script = r#"
fn set(req) {
    let s = int_set();
    let news = 0;
    for x in req.body.xs {
        if s.insert(x) { news += 1; }
    }
    #{ news: news, len: s.len(), has: s.contains(req.body.probe), kind: type_of(s), set: s,
       nested: [s] }
}
fn within(req) { let s = int_set(); s.insert(2); [2 in s, 3 in s] }
fn through(req) { let s = int_set(); add(s, req.body.x); s.len() }
fn add(s, x) { s.insert(x) }
fn store(req) { t.put(1, #{ n: int_set() }); 0 }
"#;
    let (seed, scale) = seed_and_scale("int_set");
    let mut rng = Rng(seed);
    let small = Limits {
        array_items_max: 8,
        ..limits()
    };
    let mut pair = pair_of(script, small);
    assert_eq!(pair.compiled.execution("set"), Some(Execution::Compiled));
    let items = [
        json!(1),
        json!(-1),
        json!(7),
        json!(i64::MAX),
        json!("1"),
        json!(1.5),
    ];
    let (mut answered, mut refused) = (0, 0);
    for _ in 0..300 * scale {
        let n = rng.below(12);
        let well_formed = rng.below(4) > 0;
        let xs: Vec<Value> = (0..n)
            .map(|_| {
                if well_formed {
                    json!(rng.below(10) as i64 - 3)
                } else {
                    rng.pick(&items)
                }
            })
            .collect();
        let probe = json!(rng.below(10) as i64 - 3);
        let before = pair.compiled.fallbacks();
        match pair.call("set", json!({ "xs": xs, "probe": probe })) {
            Ok(answer) => {
                answered += 1;
                // Only the integers given, once each, ascending.
                let mut given: Vec<i64> = xs.iter().filter_map(Value::as_i64).collect();
                given.sort_unstable();
                given.dedup();
                assert_eq!(answer["set"], json!(given));
                assert_eq!(answer["kind"], json!("IntSet"));
                if well_formed {
                    assert_eq!(pair.compiled.fallbacks(), before, "{xs:?}");
                }
            }
            Err(_) => refused += 1,
        }
    }
    assert!(
        answered > 0 && refused > 0,
        "{answered} answered, {refused} refused"
    );
    // A function is given a copy, as Rhai passes every value.
    assert_eq!(pair.call("through", json!({ "x": 3 })), Ok(json!(0)));
    assert_eq!(pair.call("within", Value::Null), Ok(json!([true, false])));
    let refused = pair
        .call("store", Value::Null)
        .expect_err("a set is not stored");
    assert!(
        refused.to_string().contains("cannot hold an int_set()"),
        "{refused}"
    );
}
