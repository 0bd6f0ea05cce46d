//! Review of research 030's compiled forms: answers written from pieces (`answer::Piece`),
//! `row.field.contains(x)` where the string lies (`ops::field_contains`), rows made straight
//! from array literals (`fields_of`), `Key::int_parts` and the stride scan of `Key::position_in`.
//! Each probe runs in the compiled app and in a Rhai-only app and compares answers (bytes),
//! errors, write sets and tables (`pair::Pair`).

use pure_lang::{Execution, Key, KeyPart, Limits};
use serde_json::{json, Value};

mod pair;
use pair::Pair;
use pair::Rng;

fn limits() -> Limits {
    Limits {
        wall_clock_max: std::time::Duration::from_secs(60),
        ..Limits::default()
    }
}

fn assert_compiled(pair: &Pair, handlers: &[&str]) {
    for handler in handlers {
        assert_eq!(
            pair.compiled.execution(handler),
            Some(Execution::Compiled),
            "{handler} compiled"
        );
    }
}

/// Values of every JSON kind, with the edges of each.
fn values() -> Vec<Value> {
    vec![
        json!(0),
        json!(1),
        json!(-1),
        json!(2),
        json!(7),
        json!(-128),
        json!(255),
        json!(i64::MAX),
        json!(i64::MIN),
        json!(1.5),
        json!(-0.0),
        json!(0.0),
        json!(1e300),
        json!(-2.5e-300),
        json!(true),
        json!(false),
        json!(null),
        json!(""),
        json!("a"),
        json!("é"),
        json!("quote \" \\ \n \u{1} \u{7f} 日本"),
        json!("twenty bytes exactly"),
        json!("a string of forty bytes, no more no less"),
        json!("a string of forty-one bytes, one too many"),
        json!([]),
        json!([1, "x", [2, [3]]]),
        json!({}),
        json!({"k": 1, "s": "v", "n": {"m": [1]}}),
        json!([[[[[[[[1]]]]]]]]),
    ]
}

const TABLES: &str = r#"{ "name": "t", "routes": {}, "tables": {
    "t": ["n", "s", "f", "a"],
    "u": ["a", "s", "n", "x"],
    "v": ["q"] } }"#;

/// Answers of map literals whose values are all pieces: locals, a local's property (a row's
/// field, a map's entry, any other value's), constants of every kind, every operator the
/// compiled path knows on all of those, under tight limits; read from rows of two tables whose
/// fields lie in different slots, changed or not.
#[test]
fn answers_of_pieces_are_rhais() {
    let script = r#"
fn fill(req) { t.put(req.body.k, req.body.row); u.put(req.body.k, req.body.row2); 0 }
fn plain(req) { let r = t.get(req.body.k); let x = req.body.x; #{ z: r.n, a: r.s, m: r.f, b: r.a, k: r.key, x: x } }
fn consts(req) { let x = req.body.x; #{ c: 'é', f: -0.0, g: 1.5e300, u: (), b: true, s: "a \"q\"\n", i: -9223372036854775807, x: x } }
fn arith(req) { let r = t.get(req.body.k); let x = req.body.x; #{ a: r.n + x, b: x - r.n, c: r.n * x, d: r.n / x, e: r.n % x, f: x + x, g: r.s + x, h: x + r.s } }
fn bits(req) { let r = t.get(req.body.k); let x = req.body.x; #{ a: r.n & x, b: r.n | x, c: r.n ^ x, d: x & true, e: x | false } }
fn cmps(req) { let r = t.get(req.body.k); let x = req.body.x; #{ a: r.n == x, b: r.s != x, c: x < r.n, d: x <= r.s, e: r.f > x, f: r.a >= x, g: x == (), h: () != r.a, i: r.a == x } }
fn nested_ops(req) { let r = t.get(req.body.k); let x = req.body.x; #{ a: (r.n + x) * (x - 1), b: r.s + r.s + x, c: (r.n < x) == (x < r.n), d: r.a + x } }
fn twice(req) { let r = t.get(req.body.k); #{ a: r.s, b: r.s, c: r.s, d: r.a, e: r.a } }
fn other(req) { let r = u.get(req.body.k); let q = t.get(req.body.k); #{ a: r.n, b: r.s, c: q.n, d: q.s, e: r.a, f: r.x } }
fn missing_field(req) { let r = if req.body.k % 2 == 0 { t.get(req.body.k) } else { u.get(req.body.k) }; #{ f: r.f, x: r.x, n: r.n, s: r.s } }
fn no_row(req) { let r = t.get(req.body.k + 100000); #{ n: r.n } }
fn dirty(req) { let r = t.get(req.body.k); let x = req.body.x; r.s = x; r.n = x; #{ n: r.n, s: r.s, f: r.f, a: r.a } }
fn dirty_one(req) { let r = t.get(req.body.k); r.a = req.body.x; #{ n: r.n, s: r.s, a: r.a } }
fn props(req) { let m = req.body.row; let x = req.body.x; #{ a: m.n, b: m.s, c: m.zz, d: x.n, e: x.key } }
fn key_props(req) { let r = t.get(req.body.k); let m = #{ key: req.body.x }; #{ k: r.key, m: m.key } }
fn body(req) { #{ b: req.body, x: req.body.x, k: req.body.k } }
fn empty(req) { #{} }
fn quoted(req) { let x = req.body.x; #{ "b c": x, "a\"b": x, "": x, "é": x, "1": x } }
"#;
    let small = Limits {
        array_items_max: 12,
        map_items_max: 12,
        string_bytes_max: 40,
        ..limits()
    };
    let mut pair = pair::pair_of_app(TABLES, script, small);
    let handlers = [
        "plain",
        "consts",
        "arith",
        "bits",
        "cmps",
        "nested_ops",
        "twice",
        "other",
        "missing_field",
        "no_row",
        "dirty",
        "dirty_one",
        "props",
        "key_props",
        "body",
        "empty",
        "quoted",
    ];
    assert_compiled(&pair, &handlers);
    let values = values();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let rows = 24;
    for k in 0..rows {
        let row: Vec<Value> = (0..4).map(|_| rng.pick(&values).clone()).collect();
        let row2: Vec<Value> = (0..4).map(|_| rng.pick(&values).clone()).collect();
        let _ = pair.call("fill", json!({"k": k, "row": row, "row2": row2}));
        let map = json!({"n": rng.pick(&values), "s": rng.pick(&values)});
        let _ = pair.call(
            "fill",
            json!({"k": k + 1000, "row": map, "row2": [1, "s", 2]}),
        );
    }
    for handler in handlers {
        for k in (0..rows).chain([1000, 1001, 999_999]) {
            for _ in 0..12 {
                let x = rng.pick(&values).clone();
                let row = json!({"n": rng.pick(&values), "s": rng.pick(&values)});
                // Every answer and error is compared with Rhai's by the pair.
                let _ = pair.call(handler, json!({"k": k, "x": x, "row": row}));
            }
        }
    }
}

/// Answers' lists pushed literals of pieces: reading rows, locals, another list, a list read
/// inside an operator, the same list twice, with the limits met exactly and passed.
#[test]
fn answer_lists_of_pieces_are_rhais() {
    let script = r#"
fn fill(req) { t.put(req.body.k, req.body.row); 0 }
fn rows(req) { let l = []; let x = req.body.x; for k in 0..req.body.n { let r = t.get(k); l.push(#{ i: k, s: r.s, n: r.n, x: x, t: r.s + x }); } #{ l: l, x: x } }
fn rows_last(req) { let l = []; for k in 0..req.body.n { let r = t.get(k); l.push(#{ s: r.s, a: r.a }); } l }
fn two_lists(req) { let a = []; let b = []; for k in 0..req.body.n { a.push(#{ k: k }); b.push(#{ a: a, k: k }); } #{ a: a, b: b } }
fn two_lists_one(req) { let a = []; let b = []; for k in 0..req.body.n { a.push(#{ k: k }); b.push(#{ k: k }); } #{ b: b, a: a } }
fn list_twice(req) { let l = []; for k in 0..req.body.n { l.push(#{ k: k }); } #{ a: l, b: l } }
fn list_op(req) { let l = []; for k in 0..req.body.n { l.push(#{ k: k }); } #{ a: l, e: l == [] } }
fn list_in_op(req) { let l = []; let o = []; for k in 0..req.body.n { l.push(#{ k: k }); o.push(#{ n: l + [k] }); } #{ o: o } }
fn list_dirty(req) { let l = []; for k in 0..req.body.n { let r = t.get(k); r.s = `${k}`; l.push(#{ s: r.s, n: r.n }); } #{ l: l } }
fn list_other_table(req) { let l = []; for k in 0..req.body.n { let r = u.get(k); l.push(#{ s: r.s, n: r.n }); } #{ l: l } }
fn list_after_throw(req) { let l = []; for k in 0..req.body.n { let r = t.get(k); l.push(#{ s: r.s }); if k == 2 { throw l.len(); } } #{ l: l } }
"#;
    for (arrays, maps, text) in [(12, 12, 40), (30, 30, 200), (5, 40, 1000), (40, 5, 1000)] {
        let small = Limits {
            array_items_max: arrays,
            map_items_max: maps,
            string_bytes_max: text,
            ..limits()
        };
        let mut pair = pair::pair_of_app(TABLES, script, small);
        let handlers = [
            "rows",
            "rows_last",
            "two_lists",
            "two_lists_one",
            "list_twice",
            "list_op",
            "list_in_op",
            "list_dirty",
            "list_other_table",
            "list_after_throw",
        ];
        assert_compiled(&pair, &handlers);
        let values = values();
        let mut rng = Rng(0x2545_F491_4F6C_DD1D ^ arrays as u64);
        for k in 0..12 {
            let row: Vec<Value> = (0..4).map(|_| rng.pick(&values).clone()).collect();
            let _ = pair.call("fill", json!({"k": k, "row": row}));
        }
        for handler in handlers {
            for n in 0..14 {
                for x in [json!(1), json!("ab"), json!(""), json!([1]), json!(null)] {
                    let _ = pair.call(handler, json!({"n": n, "x": x}));
                }
            }
        }
    }
}

/// Literals of pieces in a handler called from another function (depth 2 and more), as an
/// argument, and a function called as a handler and as a function alike.
#[test]
fn pieces_below_the_handler_are_rhais() {
    let script = r#"
fn fill(req) { t.put(req.body.k, req.body.row); 0 }
fn inner(req) { let r = t.get(req.body.k); let x = req.body.x; #{ n: r.n, s: r.s, x: x, a: r.n + x } }
fn listed(req) { let l = []; for k in 0..3 { let r = t.get(k); l.push(#{ s: r.s, x: req.body.x }); } #{ l: l } }
fn outer(req) { inner(req) }
fn outer_let(req) { let a = inner(req); a.n = 1; a }
fn outer_map(req) { #{ w: inner(req), l: listed(req) } }
fn outer_deep(req) { outer(req) }
fn outer_list(req) { let a = listed(req); a.l.push(1); a }
fn outer_both(req) { [inner(req), listed(req), inner(req)] }
"#;
    let small = Limits {
        string_bytes_max: 40,
        array_items_max: 10,
        ..limits()
    };
    let mut pair = pair::pair_of_app(TABLES, script, small);
    let handlers = [
        "inner",
        "listed",
        "outer",
        "outer_let",
        "outer_map",
        "outer_deep",
        "outer_list",
        "outer_both",
    ];
    assert_compiled(&pair, &handlers);
    let values = values();
    let mut rng = Rng(77);
    for k in 0..6 {
        let row: Vec<Value> = (0..4).map(|_| rng.pick(&values).clone()).collect();
        let _ = pair.call("fill", json!({"k": k, "row": row}));
    }
    for handler in handlers {
        for k in 0..6 {
            for x in &values {
                let _ = pair.call(handler, json!({"k": k, "x": x}));
            }
        }
    }
}

/// `row.field.contains(x)`: rows of two tables, fields changed or not, of every type, needles
/// of every type, strings at the limit and one past it, and through a map.
#[test]
fn contains_where_it_lies_is_rhais() {
    let script = r#"
fn fill(req) { t.put(req.body.k, req.body.row); u.put(req.body.k, req.body.row); 0 }
fn has(req) { let r = t.get(req.body.k); [r.s.contains(req.body.x), r.n.contains(req.body.x), r.a.contains(req.body.x)] }
fn has_u(req) { let r = u.get(req.body.k); r.s.contains(req.body.x) }
fn has_f(req) { let r = if req.body.k % 2 == 0 { t.get(req.body.k) } else { u.get(req.body.k) }; [r.s.contains(req.body.x), r.f.contains(req.body.x)] }
fn has_char(req) { let r = t.get(req.body.k); let s = req.body.x; if type_of(s) == "string" && s.len() > 0 { r.s.contains(s[0]) } else { r.s.contains('a') } }
fn has_dirty(req) { let r = t.get(req.body.k); r.s = req.body.x + "!"; r.s.contains(req.body.x) }
fn has_key(req) { let r = t.get(req.body.k); r.key.contains(req.body.x) }
fn has_map(req) { let m = #{ r: t.get(req.body.k) }; m.r.s.contains(req.body.x) }
fn has_not(req) { let r = t.get(req.body.k); !r.s.contains(req.body.x) }
"#;
    let small = Limits {
        string_bytes_max: 40,
        ..limits()
    };
    let mut pair = pair::pair_of_app(TABLES, script, small);
    let handlers = [
        "has",
        "has_u",
        "has_f",
        "has_char",
        "has_dirty",
        "has_key",
        "has_map",
        "has_not",
    ];
    assert_compiled(&pair, &handlers);
    let values = values();
    let mut rng = Rng(4242);
    for k in 0..values.len() {
        let row = json!([rng.pick(&values), values[k], rng.pick(&values), values[k]]);
        let _ = pair.call("fill", json!({"k": k, "row": row}));
    }
    for handler in handlers {
        for k in 0..values.len() + 1 {
            for x in values
                .iter()
                .cloned()
                .chain([json!("forty"), json!("é and"), json!("\u{1}")])
            {
                let _ = pair.call(handler, json!({"k": k, "x": x}));
            }
        }
    }
}

/// Rows made from array literals: typed tables (every kind, required and not), untyped ones,
/// items of every type, rows read by name from tables whose fields lie elsewhere (changed or
/// not), `put` and `insert` on new and existing keys of one to four parts, under limits met
/// exactly and passed.
#[test]
fn rows_from_literals_are_rhais() {
    let manifest = r#"{ "name": "t", "routes": {}, "tables": {
        "src": ["n", "s", "f", "a"],
        "other": ["a", "f", "s", "n"],
        "typed": { "i": "int!", "s": "string!", "f": "float", "b": "bool", "a": "array", "m": "map", "y": "any", "o": "string" },
        "loose": ["p", "q", "r", "s"] } }"#;
    let script = r#"
fn fill(req) { let w = req.body.row; src.put(req.body.k, w); other.put(req.body.k, [w[3], w[2], w[1], w[0]]); 0 }
fn all_typed(req) { let b = req.body; let i = b.i; let s = b.s; let f = b.f; let c = b.b; let a = b.a; let m = b.m; let y = b.y; let o = b.o; typed.put(b.k, [i, s, f, c, a, m, y, o]); typed.get(b.k).to_map() }
fn typed_rows(req) { let b = req.body; let r = src.get(b.k); let q = other.get(b.k); let name = b.name; let i = b.i; typed.put(b.k, [i, r[name], r.f, (), r.a, (), r[name], q[name]]); typed.get(b.k).to_map() }
fn typed_ins(req) { let b = req.body; let r = other.get(b.k % 10); let name = b.name; let i = b.i; typed.insert(b.k, [i, r[name]]); typed.get(b.k).to_map() }
fn typed_ins2(req) { let b = req.body; let r = other.get(b.k % 10); let i = b.i; let y = b.y; typed.insert(b.k, [i, r.s, r.f, r.n == 3, r.a, (), y]); typed.get(b.k).to_map() }
fn typed_short(req) { let b = req.body; let i = b.i; let s = b.s; typed.put(b.k, [i, s]); typed.get(b.k).to_map() }
fn typed_one(req) { let b = req.body; let i = b.i; typed.put(b.k, [i]); typed.get(b.k).to_map() }
fn typed_ops(req) { let b = req.body; let i = b.i; let s = b.s; let f = b.f; typed.put(b.k, [i * 2 - 1, s + s, f / 2.0, i == 3, (), (), i - 1, s + i]); typed.get(b.k).to_map() }
fn consts(req) { loose.put(req.body.k, [1.5, -0.0, 'c', ()]); loose.get(req.body.k).to_map() }
fn consts_ok(req) { loose.put(req.body.k, [-0.0, 1e300, true, "text"]); loose.get(req.body.k).to_map() }
fn loose_put(req) { let b = req.body; let x = b.y; let y = b.a; let r = src.get(b.k); let name = b.name; loose.put(b.k, [x, r[name], y, r.s]); loose.get(b.k).to_map() }
fn loose_ins(req) { let b = req.body; let x = b.y; let y = b.m; loose.insert(b.k, [x, y]); loose.get(b.k).to_map() }
fn loose_del(req) { loose.delete(req.body.k); typed.delete(req.body.k); 0 }
fn loose_one(req) { let x = req.body.y; loose.put(req.body.k, [x]); loose.get(req.body.k).to_map() }
fn loose_empty(req) { loose.put(req.body.k, []); loose.get(req.body.k).to_map() }
fn loose_dirty(req) { let b = req.body; let r = other.get(b.k); r.s = b.y; r.a = b.s; let name = b.name; loose.put(b.k, [r[name], r.s, r.a, r.n]); loose.get(b.k).to_map() }
fn loose_self(req) { let b = req.body; let r = loose.get(b.k); let name = b.lname; loose.put(b.k, [r[name], r.q, r.p, r[name]]); loose.get(b.k).to_map() }
fn keys2(req) { let b = req.body; let x = b.i; loose.put(b.k, x, [x, b.k]); loose.get(b.k, x).to_map() }
fn keys3(req) { let b = req.body; let x = b.i; let y = b.y; loose.insert(b.k, x, -1, [x, y]); loose.get(b.k, x, -1).to_map() }
fn keys4(req) { let b = req.body; let x = b.i; let y = b.y; loose.put(b.k, x, x, -9223372036854775807 - 1, [x, y]); loose.get(b.k, x, x, -9223372036854775807 - 1).to_map() }
fn row_item(req) { let r = src.get(req.body.k); loose.put(req.body.k, [r]); 1 }
fn rows_all(req) { [loose.count(), typed.count()] }
"#;
    for (arrays, maps, text) in [(14, 20, 120), (12, 16, 90), (50, 50, 1000)] {
        let small = Limits {
            array_items_max: arrays,
            map_items_max: maps,
            string_bytes_max: text,
            ..limits()
        };
        let mut pair = pair::pair_of_app(manifest, script, small);
        let handlers = [
            "all_typed",
            "typed_rows",
            "typed_ins",
            "typed_ins2",
            "typed_short",
            "typed_one",
            "typed_ops",
            "consts",
            "consts_ok",
            "loose_put",
            "loose_ins",
            "loose_del",
            "loose_one",
            "loose_empty",
            "loose_dirty",
            "loose_self",
            "keys2",
            "keys3",
            "keys4",
            "row_item",
        ];
        assert_compiled(&pair, &handlers);
        let values = values();
        let ints = [0i64, 1, -1, 3, 255, -256, i64::MAX, i64::MIN];
        let strings = [
            "",
            "é",
            "twenty bytes exactly",
            "a string of forty bytes, no more no less",
            "a string of forty-one bytes, one too many",
        ];
        let floats = [0.0f64, -0.0, 1.5, 1e300];
        let mut rng = Rng(0xDEAD_BEEF ^ text as u64);
        for k in 0..10 {
            let a = if k % 3 == 0 {
                rng.pick(&values).clone()
            } else {
                json!([k, "a"])
            };
            let row = json!([rng.pick(&ints), rng.pick(&strings), rng.pick(&floats), a]);
            pair.call("fill", json!({"k": k, "row": row}))
                .expect("fill");
        }
        let names = ["s", "s", "s", "n", "f", "a", "zz"];
        let mut answered = 0;
        for handler in handlers {
            let before = pair.compiled.fallbacks();
            for _ in 0..150 {
                let k = json!(if rng.next().is_multiple_of(2) {
                    *rng.pick(&[0, 1, 2, 3, 5, 9, -1, 11, i64::MAX, i64::MIN])
                } else {
                    (rng.next() % 1000) as i64
                });
                // Mostly of the declared types, sometimes not.
                let odd = |rng: &mut Rng, good: Value| {
                    if rng.next().is_multiple_of(6) {
                        rng.pick(&values).clone()
                    } else {
                        good
                    }
                };
                let (gi, gs, gf, gb, go) = (
                    json!(rng.pick(&ints)),
                    json!(rng.pick(&strings)),
                    json!(rng.pick(&floats)),
                    json!(rng.next().is_multiple_of(2)),
                    json!(rng.pick(&strings)),
                );
                let body = json!({
                    "k": k,
                    "i": odd(&mut rng, gi),
                    "s": odd(&mut rng, gs),
                    "f": odd(&mut rng, gf),
                    "b": odd(&mut rng, gb),
                    "a": odd(&mut rng, json!([1, "x", [2]])),
                    "m": odd(&mut rng, json!({"k": [1, 2], "s": "v"})),
                    "y": rng.pick(&values).clone(),
                    "o": odd(&mut rng, go),
                    "name": rng.pick(&names),
                    "lname": rng.pick(&["p", "q", "r", "s", "zz"]),
                });
                let _ = pair.call(handler, body);
            }
            let fell = pair.compiled.fallbacks() - before;
            answered += 150 - fell;
            eprintln!("{handler}: {fell} fallbacks of 150 ({arrays}, {maps}, {text})");
        }
        assert!(answered > 500, "{answered} answered compiled");
        let _ = pair.call("rows_all", json!({}));
    }
}

/// String-keyed and mixed rows made from literals (the general way), and the keys they read.
#[test]
fn rows_with_other_keys_from_literals_are_rhais() {
    let script = r#"
fn put_s(req) { let x = req.body.x; t.put(req.body.k, [x, req.body.k]); t.get(req.body.k).to_map() }
fn put_mixed(req) { let x = req.body.x; t.insert(req.body.k, 1, [x]); t.get(req.body.k, 1).to_map() }
fn key_of(req) { let r = t.get(req.body.k); #{ k: r.key, n: r.n } }
fn key_of2(req) { let r = t.get(req.body.k, 1); #{ k: r.key, n: r.n } }
"#;
    let mut pair = pair::pair_of_app(TABLES, script, limits());
    assert_compiled(&pair, &["put_s", "put_mixed", "key_of", "key_of2"]);
    for k in [
        json!("a"),
        json!(""),
        json!("\u{0}"),
        json!("é"),
        json!(3),
        json!(-3),
        json!(1.5),
        json!(true),
        json!(null),
    ] {
        for handler in ["put_s", "put_mixed", "key_of", "key_of2"] {
            for x in [json!(1), json!("x")] {
                let _ = pair.call(handler, json!({"k": k, "x": x}));
            }
        }
    }
}

/// `Key::int_parts` decodes every key of integers alone as `parts` does, and refuses any other:
/// every length of integer encoding, both signs, one to five parts, mixed with strings.
#[test]
fn int_parts_are_the_keys_parts() {
    let mut ints: Vec<i64> = vec![0, 1, -1, i64::MAX, i64::MIN, i64::MAX - 1, i64::MIN + 1];
    for shift in 0..63 {
        for base in [1i64 << shift, (1i64 << shift) - 1, (1i64 << shift) + 1] {
            ints.push(base);
            ints.push(-base);
            ints.push(!base);
        }
    }
    let strings = [
        "",
        "a",
        "\u{0}",
        "\u{18}",
        "\u{20}",
        "\u{30}",
        "long string past the inline bytes",
    ];
    let mut rng = Rng(0x1234_5678_9ABC_DEF1);
    for _ in 0..200_000 {
        let n = 1 + (rng.next() % 5) as usize;
        let with_strings = rng.next().is_multiple_of(4);
        let parts: Vec<KeyPart> = (0..n)
            .map(|_| {
                if with_strings && rng.next().is_multiple_of(2) {
                    KeyPart::Str((*rng.pick(&strings)).into())
                } else {
                    KeyPart::Int(*rng.pick(&ints))
                }
            })
            .collect();
        let key = Key::from_parts(parts.clone());
        let all_ints = parts.iter().all(|p| matches!(p, KeyPart::Int(_)));
        match key.int_parts() {
            Some((decoded, count)) => {
                assert!(all_ints, "{parts:?}: decoded as integers");
                assert!(n <= 4, "{parts:?}: at most four parts");
                let decoded: Vec<KeyPart> =
                    decoded[..count].iter().map(|&i| KeyPart::Int(i)).collect();
                assert_eq!(decoded, parts);
                assert_eq!(key.parts(), parts);
            }
            None => {
                // Only keys on the heap, with strings, or of more than four parts are refused.
                assert!(
                    !all_ints || n > 4 || key.as_bytes().len() > 23,
                    "{parts:?}: refused"
                );
            }
        }
    }
}

/// Tables of many keys written and read back in random order, the node search
/// (`Key::position_in`) found every row, in order, and no other.
#[test]
fn many_keys_found_where_they_are() {
    let script = r#"
fn put(req) { for k in req.body.keys { t.put(k[0], k[1], [k[0], k[1]]); } 0 }
fn del(req) { for k in req.body.keys { t.delete(k[0], k[1]); } 0 }
fn has(req) { let out = []; for k in req.body.keys { out.push(t.exists(k[0], k[1])); } out }
fn scan(req) { t.count() }
fn put_s(req) { for k in req.body.keys { v.put(k, [k]); } 0 }
fn has_s(req) { let out = []; for k in req.body.keys { let r = v.get(k); out.push(if r == () { () } else { r.q }); } out }
"#;
    let mut pair = pair::pair_of_app(TABLES, script, limits());
    let mut rng = Rng(99);
    let mut model = std::collections::BTreeSet::new();
    let mut smodel = std::collections::BTreeSet::new();
    let edges = [
        i64::MIN,
        i64::MIN + 1,
        -65_536,
        -256,
        -255,
        -1,
        0,
        1,
        255,
        256,
        i64::MAX,
    ];
    for round in 0..40 {
        let keys: Vec<(i64, i64)> = (0..200)
            .map(|_| {
                let a = if rng.next().is_multiple_of(3) {
                    *rng.pick(&edges)
                } else {
                    (rng.next() % 512) as i64 - 256
                };
                let b = if rng.next().is_multiple_of(2) {
                    *rng.pick(&edges)
                } else {
                    (rng.next() % 64) as i64
                };
                (a, b)
            })
            .collect();
        let body = json!({"keys": keys.iter().map(|(a, b)| json!([a, b])).collect::<Vec<_>>()});
        if round % 3 == 2 {
            pair.call("del", body.clone()).expect("del");
            for k in &keys {
                model.remove(k);
            }
        } else {
            pair.call("put", body.clone()).expect("put");
            model.extend(keys.iter().copied());
        }
        let probe: Vec<(i64, i64)> = keys
            .iter()
            .copied()
            .chain((0..100).map(|_| ((rng.next() % 600) as i64 - 300, (rng.next() % 70) as i64)))
            .collect();
        let answer = pair
            .call(
                "has",
                json!({"keys": probe.iter().map(|(a, b)| json!([a, b])).collect::<Vec<_>>()}),
            )
            .expect("has");
        let expected: Vec<bool> = probe.iter().map(|k| model.contains(k)).collect();
        assert_eq!(answer, json!(expected), "round {round}");
        assert_eq!(pair.call("scan", json!({})), Ok(json!(model.len())));
        // Rows in key order.
        let id = pair.compiled.schema().table_id("t").expect("t");
        let stored: Vec<(i64, i64)> = pair.state[0]
            .rows(id)
            .map(|(k, _)| match &k.parts()[..] {
                [KeyPart::Int(a), KeyPart::Int(b)] => (*a, *b),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            stored,
            model.iter().copied().collect::<Vec<_>>(),
            "round {round}"
        );
        // String keys, some longer than the inline bytes.
        let skeys: Vec<String> = (0..100)
            .map(|_| {
                let len = (rng.next() % 30) as usize;
                (0..len)
                    .map(|_| (b'a' + (rng.next() % 3) as u8) as char)
                    .collect()
            })
            .collect();
        pair.call("put_s", json!({"keys": skeys})).expect("put_s");
        smodel.extend(skeys.iter().cloned());
        let sprobe: Vec<String> = skeys
            .iter()
            .cloned()
            .chain((0..50).map(|_| {
                let len = (rng.next() % 30) as usize;
                (0..len)
                    .map(|_| (b'a' + (rng.next() % 3) as u8) as char)
                    .collect()
            }))
            .collect();
        let answer = pair.call("has_s", json!({"keys": sprobe})).expect("has_s");
        let expected: Vec<Value> = sprobe
            .iter()
            .map(|k| {
                if smodel.contains(k) {
                    json!(k)
                } else {
                    Value::Null
                }
            })
            .collect();
        assert_eq!(answer, json!(expected), "round {round}");
    }
}

/// Every operator the compiled path knows, on every pair of pieces (a row's integer, string,
/// float and array fields, a local), one handler each so that most calls answer: the answer
/// written from the pieces, or Rhai's error.
#[test]
fn operators_on_pieces_are_rhais() {
    let ops = [
        "+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&", "|", "^",
    ];
    let operands = [
        "r.n", "r.s", "r.f", "r.a", "x", "y", "2", "\"s\"", "1.5", "'c'", "()", "true",
    ];
    let mut script = String::from("fn fill(req) { t.put(req.body.k, req.body.row); 0 }\n");
    let mut handlers = Vec::new();
    for (o, op) in ops.iter().enumerate() {
        for (i, lhs) in operands.iter().enumerate() {
            for (j, rhs) in operands.iter().enumerate() {
                if !(lhs.starts_with('r') || rhs.starts_with('r') || *lhs == "x" || *rhs == "x") {
                    continue;
                }
                let name = format!("h_{o}_{i}_{j}");
                script.push_str(&format!(
                    "fn {name}(req) {{ let r = t.get(req.body.k); let x = req.body.x; let y = req.body.y; #{{ z: r.n, v: {lhs} {op} {rhs}, a: r.s }} }}\n"
                ));
                handlers.push(name);
            }
        }
    }
    let small = Limits {
        array_items_max: 12,
        map_items_max: 12,
        string_bytes_max: 40,
        ..limits()
    };
    let mut pair = pair::pair_of_app(TABLES, &script, small);
    let mut compiled = 0;
    for handler in &handlers {
        if pair.compiled.execution(handler) == Some(Execution::Compiled) {
            compiled += 1;
        }
    }
    assert!(
        compiled * 10 > handlers.len() * 9,
        "{compiled} of {} compiled",
        handlers.len()
    );
    let ints = [0i64, 1, -1, 2, 3, -7, 255, 1 << 40, i64::MAX, i64::MIN];
    let strings = [
        "",
        "a",
        "é",
        "twenty bytes exactly",
        "a string of forty bytes, no more no less",
    ];
    let floats = [0.0f64, -0.0, 1.5, -2.25, 1e300];
    let mut rng = Rng(31337);
    for k in 0..16 {
        let a = match k % 4 {
            0 => json!([1, 2]),
            1 => json!({"k": "v"}),
            2 => json!([]),
            _ => json!("str"),
        };
        let row = json!([rng.pick(&ints), rng.pick(&strings), rng.pick(&floats), a]);
        pair.call("fill", json!({"k": k, "row": row}))
            .expect("fill");
    }
    let before = pair.compiled.fallbacks();
    let mut calls = 0;
    for handler in &handlers {
        for _ in 0..10 {
            let pick = |rng: &mut Rng| match rng.next() % 6 {
                0 | 1 => json!(rng.pick(&ints)),
                2 => json!(rng.pick(&strings)),
                3 => json!(rng.pick(&floats)),
                4 => json!([1]),
                _ => json!(true),
            };
            let (x, y) = (pick(&mut rng), pick(&mut rng));
            let k = rng.next() % 16;
            calls += 1;
            let _ = pair.call(handler, json!({"k": k, "x": x, "y": y}));
        }
    }
    eprintln!(
        "operators: {} fallbacks in {calls} calls",
        pair.compiled.fallbacks() - before
    );
}
