//! The compiled path's integer expressions computed in one closure (`compiled::pure`): `let`
//! and `=` of arithmetic on locals, rows' fields, arrays' items and constants, `if` as a value,
//! and conditions that compare integers or test a local against `()`. Each handler runs
//! compiled and in Rhai on values of every kind (integers at their edges, so that sums
//! overflow and divisions divide by zero), and the pair compares answers (bytes), errors,
//! write sets and tables (`pair::Pair`).

use pure_lang::{Execution, Limits};
use serde_json::{json, Value};

mod pair;
use pair::Rng;

/// Integers near every edge an operator meets, and a value of every other kind.
fn values() -> Vec<Value> {
    vec![
        json!(0),
        json!(1),
        json!(-1),
        json!(2),
        json!(3),
        json!(10),
        json!(-7),
        json!(91),
        json!(i64::MAX),
        json!(i64::MAX - 1),
        json!(i64::MIN),
        json!(i64::MIN + 1),
        json!(1.5),
        json!(0.0),
        json!(true),
        json!(null),
        json!(""),
        json!("7"),
        json!([]),
        json!([1, 2]),
        json!({"n": 1}),
    ]
}

const TABLES: &str = r#"{ "name": "t", "routes": {}, "tables": {
    "t": ["n", "s"],
    "u": ["s", "n"] } }"#;

const SCRIPT: &str = r#"
fn fill(req) { t.put(req.body.k, req.body.row); u.put(req.body.k, [req.body.x, req.body.y]); 0 }
fn lets(req) {
    let r = t.get(req.body.k); let x = req.body.x; let y = req.body.y;
    let a = x + y; let b = x * y - r.n; let c = r.n / y; let d = x % y; let e = r.n;
    let f = r.n + 1; let g = x - 1; let h = (x + 1) * (y - 2) + r.n;
    #{ a: a, b: b, c: c, d: d, e: e, f: f, g: g, h: h }
}
fn other_table(req) { let r = u.get(req.body.k); let q = t.get(req.body.k); let a = r.n + q.n; let b = r.s * 2; [a, b] }
fn choice(req) {
    let r = t.get(req.body.k); let x = req.body.x; let y = req.body.y;
    let c = if x >= y + 10 { x - y } else { x - y + 91 };
    let d = if r.n < x { r.n } else { x };
    let e = if x == y { 1 } else { 2 };
    let f = if x != r.n { y * 2 } else { r.n };
    #{ c: c, d: d, e: e, f: f }
}
fn items(req) {
    let a = req.body.a; let i = req.body.i;
    let x = a[i]; let y = a[i + 1]; let z = a[0]; let w = a[-1] + a[i];
    #{ x: x, y: y, z: z, w: w }
}
fn tests(req) {
    let r = t.get(req.body.k); let x = req.body.x; let y = req.body.y; let out = [];
    if x < y { out.push(1); }
    if r.n != x { out.push(2); }
    if r == () { out.push(3); }
    if () != r { out.push(4); }
    if x >= r.n { out.push(5); } else { out.push(6); }
    if x + 1 > y * 2 { out.push(7); }
    if x == () { out.push(8); }
    out
}
fn assigns(req) {
    let x = req.body.x; let y = req.body.y; let s = 0;
    s = x + y; s = s * 2; let m = x; m = if x > y { x } else { y };
    #{ s: s, m: m }
}
fn shadowed(req) { let x = req.body.x; let x = x + 1; let y = { let x = x * 2; x }; #{ x: x, y: y } }
fn loop_sum(req) {
    let a = req.body.a; let sum = 0;
    for n in 0..a.len() { let v = a[n]; sum = sum + v * n; if sum > 100 { sum = sum - 100; } }
    sum
}
fn store(req) { let r = t.get(req.body.k); let v = r.n + req.body.x; r.n = v; r.save(); t.get(req.body.k).n }
fn reads(req) {
    let out = []; let r = 5; let k = req.body.k;
    for i in 0..4 { r = t.get(k + i); if r != () { out.push(r.n); } else { out.push(-1); } }
    let a = t.get(k); let b = a; a = t.get(k + 1);
    out.push(if a == () { 0 } else { 1 }); out.push(if b == () { 0 } else { 1 });
    if b != () { out.push(b.n); }
    let s = t.get(req.body.x); out.push(s == ());
    let q = t.get(k); if q != () { q.n = 5; q = t.get(k); out.push(q.n); }
    out
}
fn row_ops(req) {
    let r = t.get(req.body.k); let x = req.body.x; let y = req.body.y;
    r.n += x; r.n -= 1; r.n *= y; r.s += x; r.n %= 7; r.save(); r.s -= y;
    let q = u.get(req.body.k); q.n += r.n; q.save();
    [r.n, r.s, t.get(req.body.k).n, u.get(req.body.k).n]
}
"#;

/// Every form on every pair of values: rows whose fields hold any value, arrays of any items
/// read at indices in and out of range, from either end.
#[test]
fn integer_expressions_in_one_closure_are_rhais() {
    let limits = Limits {
        wall_clock_max: std::time::Duration::from_secs(60),
        ..Limits::default()
    };
    let mut pair = pair::pair_of_app(TABLES, SCRIPT, limits);
    let handlers = [
        "lets",
        "other_table",
        "choice",
        "items",
        "tests",
        "assigns",
        "shadowed",
        "loop_sum",
        "store",
        "row_ops",
        "reads",
    ];
    for handler in handlers {
        assert_eq!(
            pair.compiled.execution(handler),
            Some(Execution::Compiled),
            "{handler} compiled"
        );
    }
    let values = values();
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let indices = [
        json!(0),
        json!(1),
        json!(2),
        json!(-1),
        json!(-3),
        json!(7),
        json!("1"),
        json!(1.0),
    ];
    for k in 0..16 {
        let row = [rng.pick(&values).clone(), rng.pick(&values).clone()];
        let (x, y) = (rng.pick(&values).clone(), rng.pick(&values).clone());
        let _ = pair.call("fill", json!({"k": k, "row": row, "x": x, "y": y}));
    }
    for _ in 0..400 {
        let k = rng.next() % 18;
        let (x, y) = (rng.pick(&values).clone(), rng.pick(&values).clone());
        let a: Vec<Value> = (0..rng.next() % 5)
            .map(|_| match rng.next() % 3 {
                0 => rng.pick(&values).clone(),
                _ => json!((rng.next() % 200) as i64 - 100),
            })
            .collect();
        let i = rng.pick(&indices).clone();
        let body = json!({"k": k, "x": x, "y": y, "a": a, "i": i});
        for handler in handlers {
            // The pair compares the answer or error, the writes and the tables with Rhai's.
            let _ = pair.call(handler, body.clone());
        }
    }
}
