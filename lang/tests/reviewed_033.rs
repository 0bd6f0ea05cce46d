//! Review of research 033 (the instructions between the statements): the tree's hints (the last
//! changed leaf, the remembered read) through the public `Tables`, and the compiled path's pure
//! integer expressions, tests, `row.save()` and `row.field op= int` fast paths against Rhai.

use std::collections::BTreeMap;
use std::ops::Bound::Unbounded;

use pure_lang::{Dynamic, Execution, Fields, IndexDef, IndexSource, Key, Limits, Tables, WriteSet};
use serde_json::{json, Value};

mod pair;
use pair::Rng;

// ---------------------------------------------------------------------------------------------
// The tree's hints, through `Tables`.
// ---------------------------------------------------------------------------------------------

type Model = Vec<BTreeMap<Key, (i64, i64)>>;

fn row(value: i64, group: i64) -> Fields {
    Fields::from_values(&[Dynamic::from_int(value), Dynamic::from_int(group)])
}

fn unpack(fields: &Fields) -> (i64, i64) {
    (
        fields.int(0).expect("slot 0 is an integer"),
        fields.int(1).expect("slot 1 is an integer"),
    )
}

fn by_group() -> IndexDef {
    IndexDef {
        name: "by_group".into(),
        table: 0,
        sources: vec![IndexSource::Field(1)],
        fields: vec!["group".into()],
        descending: vec![false],
        unique: false,
    }
}

fn assert_holds(tables: &Tables, model: &Model, context: &str) {
    for (table, rows) in model.iter().enumerate() {
        let table = table as u32;
        let got: Vec<(Key, (i64, i64))> = tables
            .rows(table)
            .map(|(k, f)| (k.clone(), unpack(f)))
            .collect();
        let expected: Vec<(Key, (i64, i64))> = rows.iter().map(|(k, v)| (k.clone(), *v)).collect();
        assert_eq!(got.len(), expected.len(), "{context}: table {table} count");
        if got != expected {
            let diff: Vec<_> = got
                .iter()
                .zip(expected.iter())
                .filter(|(a, b)| a != b)
                .take(3)
                .collect();
            panic!("{context}: table {table} rows differ: (got, expected) {diff:?}");
        }
        for (k, v) in rows {
            assert_eq!(
                tables.get(table, k).map(unpack),
                Some(*v),
                "{context}: get {k:?}"
            );
        }
    }
    if tables.index_count() == 1 {
        assert_eq!(
            tables.index_len(0),
            model[0].len(),
            "{context}: index count"
        );
        let mut expected: Vec<(i64, Key)> =
            model[0].iter().map(|(k, (_, g))| (*g, k.clone())).collect();
        expected.sort();
        let got: Vec<Key> = tables
            .index_range(0, Unbounded, Unbounded)
            .map(|(_, row)| row.clone())
            .collect();
        let expected: Vec<Key> = expected.into_iter().map(|(_, k)| k).collect();
        assert!(got == expected, "{context}: index entries differ");
    }
}

/// A key of the model's kinds: composite integers (an order's lines), long strings on the heap,
/// short strings, a lone integer at an edge.
fn some_key(rng: &mut Rng) -> Key {
    match rng.below(5) {
        0 | 1 => Key::ints(&[
            rng.below(3) as i64,
            rng.below(40) as i64,
            rng.below(16) as i64,
        ]),
        2 => Key::string(&format!(
            "a long key that lives on the heap {:06}",
            rng.below(300)
        )),
        3 => Key::string(&format!("k{}", rng.below(300))),
        _ => Key::int(*rng.pick(&[i64::MIN, -1, 0, 1, i64::MAX, 1 << 40, -(1 << 40)])),
    }
}

/// Reads then saves (get_for_update, patch) with every kind of change between, runs of inserts
/// in order (the last leaf's hint), deletes, roll-backs and snapshots; against a model.
#[test]
fn remembered_reads_and_hinted_leaves_hold_what_the_model_holds() {
    for seed in [0x2545_F491_4F6C_DD1Du64, 7, 12345, 0xDEAD_BEEF] {
        run_model(seed, true);
        run_model(seed ^ 0x55, false);
    }
}

fn run_model(seed: u64, indexed: bool) {
    let mut rng = Rng(seed);
    let mut tables = Tables::new(2);
    if indexed {
        tables.set_indexes(vec![by_group()]).expect("no rows yet");
    }
    let mut writes = WriteSet::default();
    let mut model: Model = vec![BTreeMap::new(); 2];
    let mut before_call = model.clone();
    let mut mark: Option<(usize, Model)> = None;
    let mut snapshots: Vec<(Tables, Model)> = Vec::new();
    let mut order = 100i64;
    for step in 0..4_000u64 {
        let table = rng.below(2) as u32;
        let t = table as usize;
        match rng.below(12) {
            // A row read for update, something between, then saved.
            0..=3 => {
                let key = match model[t]
                    .keys()
                    .nth(rng.below(model[t].len().max(1) as u64) as usize)
                {
                    Some(k) if rng.below(4) != 0 => k.clone(),
                    _ => some_key(&mut rng),
                };
                let base = tables.get_for_update(table, &key).cloned();
                assert_eq!(
                    base.as_ref().map(unpack),
                    model[t].get(&key).copied(),
                    "step {step}: read"
                );
                // Between the read and the save.
                match rng.below(9) {
                    0 => {
                        let other = some_key(&mut rng);
                        let (v, g) = (rng.next() as i64, rng.below(6) as i64);
                        tables
                            .put(&mut writes, table, other.clone(), row(v, g), false)
                            .expect("put");
                        model[t].insert(other, (v, g));
                    }
                    1 => {
                        let other = some_key(&mut rng);
                        let deleted = tables.delete(&mut writes, table, other.clone());
                        assert_eq!(deleted, model[t].remove(&other).is_some());
                    }
                    2 => {
                        snapshots.push((tables.snapshot(), model.clone()));
                    }
                    3 => {
                        // Another read for update, not saved.
                        let other = some_key(&mut rng);
                        let got = tables.get_for_update(table, &other).map(unpack);
                        assert_eq!(got, model[t].get(&other).copied());
                    }
                    4 => {
                        // The same key replaced whole.
                        let (v, g) = (rng.next() as i64, rng.below(6) as i64);
                        tables
                            .put(&mut writes, table, key.clone(), row(v, g), false)
                            .expect("put");
                        model[t].insert(key.clone(), (v, g));
                    }
                    5 => {
                        // A patch of another key.
                        let other = some_key(&mut rng);
                        let b = tables.get(table, &other).cloned();
                        let v = rng.next() as i64;
                        let new = b
                            .as_ref()
                            .map_or_else(|| row(v, 0), |b| b.with(&[(0, Dynamic::from_int(v))]));
                        let r = tables.patch(&mut writes, table, &other, 1, &new, b.as_ref());
                        match model[t].get_mut(&other) {
                            Some(stored) => {
                                assert!(r.is_ok());
                                stored.0 = v;
                            }
                            None => assert!(r.is_err()),
                        }
                    }
                    6 => {
                        // A read of the same table's other table.
                        let other_table = 1 - table;
                        let other = some_key(&mut rng);
                        let got = tables.get_for_update(other_table, &other).map(unpack);
                        assert_eq!(got, model[other_table as usize].get(&other).copied());
                    }
                    7 => {
                        tables.delete(&mut writes, table, key.clone());
                        model[t].remove(&key);
                    }
                    _ => {}
                }
                let v = rng.next() as i64;
                let g = rng.below(6) as i64;
                // `fields` is the row read with the masked slots changed (the contract of
                // `Tables::patch`).
                let mask = if rng.below(2) == 0 { 1 } else { 3 };
                let new = base.as_ref().map_or_else(
                    || row(v, g),
                    |b| match mask {
                        1 => b.with(&[(0, Dynamic::from_int(v))]),
                        _ => b.with(&[(0, Dynamic::from_int(v)), (1, Dynamic::from_int(g))]),
                    },
                );
                let r = tables.patch(&mut writes, table, &key, mask, &new, base.as_ref());
                match model[t].get_mut(&key) {
                    Some(stored) => {
                        assert!(r.is_ok(), "step {step}: {r:?}");
                        stored.0 = v;
                        if mask == 3 {
                            stored.1 = g;
                        }
                    }
                    None => assert!(r.is_err(), "step {step}: no row to patch"),
                }
            }
            // An order's lines inserted in order, each then updated (the last leaf).
            4 | 5 => {
                order += 1;
                let lines = 1 + rng.below(20) as i64;
                let w = rng.below(3) as i64;
                for line in 1..=lines {
                    let key = Key::ints(&[w, order % 40, line]);
                    let (v, g) = (line * 10, rng.below(6) as i64);
                    tables
                        .put(&mut writes, table, key.clone(), row(v, g), false)
                        .expect("put");
                    model[t].insert(key.clone(), (v, g));
                    if rng.below(3) == 0 {
                        snapshots.push((tables.snapshot(), model.clone()));
                    }
                }
                for line in 1..=lines {
                    let key = Key::ints(&[w, order % 40, line]);
                    let base = tables.get_for_update(table, &key).cloned();
                    let v = -line;
                    let new = base
                        .as_ref()
                        .expect("just put")
                        .with(&[(0, Dynamic::from_int(v))]);
                    tables
                        .patch(&mut writes, table, &key, 1, &new, base.as_ref())
                        .expect("patch");
                    model[t].get_mut(&key).expect("just put").0 = v;
                    if rng.below(5) == 0 {
                        snapshots.push((tables.snapshot(), model.clone()));
                    }
                }
            }
            6 => {
                let key = some_key(&mut rng);
                let deleted = tables.delete(&mut writes, table, key.clone());
                assert_eq!(deleted, model[t].remove(&key).is_some());
            }
            7 => {
                writes.clear();
                before_call = model.clone();
                mark = None;
            }
            8 => mark = Some((writes.mark(), model.clone())),
            9 => {
                if let Some((at, at_model)) = mark.take() {
                    tables.roll_back_to(&mut writes, at);
                    model = at_model;
                } else {
                    tables.roll_back(&mut writes);
                    model = before_call.clone();
                }
            }
            10 => {
                snapshots.push((tables.snapshot(), model.clone()));
            }
            _ => {
                if !snapshots.is_empty() {
                    let at = rng.below(snapshots.len() as u64) as usize;
                    let (snapshot, at_model) = &snapshots[at];
                    assert_holds(snapshot, at_model, &format!("step {step}: snapshot {at}"));
                    if rng.below(2) == 0 {
                        snapshots.remove(at);
                    }
                }
            }
        }
        while snapshots.len() > 12 {
            let (snapshot, at_model) = snapshots.remove(0);
            assert_holds(
                &snapshot,
                &at_model,
                &format!("step {step}: oldest snapshot"),
            );
        }
        tables.check_trees();
        if step % 97 == 0 {
            assert_holds(&tables, &model, &format!("step {step}"));
        }
    }
    assert_holds(&tables, &model, "end");
    for (n, (snapshot, at_model)) in snapshots.iter().enumerate() {
        assert_holds(snapshot, at_model, &format!("end: snapshot {n}"));
    }
    if indexed {
        assert!(tables.indexes_hold_their_rows(usize::MAX));
    }
}

/// An update through the hinted leaf while a snapshot holds the old value: the snapshot keeps
/// it, the value given back is the old one, and a roll-back puts it back.
#[test]
fn a_snapshot_between_hinted_updates_keeps_its_values() {
    let mut tables = Tables::new(1);
    let mut writes = WriteSet::default();
    for line in 0..15i64 {
        tables
            .put(&mut writes, 0, Key::ints(&[1, line]), row(line, 0), false)
            .expect("put");
    }
    writes.clear();
    for round in 0..30i64 {
        // Two updates in a row in one leaf (the second hinted), a snapshot, two more.
        for line in [round % 15, (round + 1) % 15] {
            let key = Key::ints(&[1, line]);
            let base = tables.get_for_update(0, &key).cloned();
            let new = base
                .as_ref()
                .unwrap()
                .with(&[(0, Dynamic::from_int(round * 100 + line))]);
            tables
                .patch(&mut writes, 0, &key, 1, &new, base.as_ref())
                .unwrap();
        }
        let snapshot = tables.snapshot();
        let before: Vec<(i64, i64)> = snapshot.rows(0).map(|(_, f)| unpack(f)).collect();
        let mark = writes.mark();
        for line in [(round + 1) % 15, (round + 2) % 15, (round + 3) % 15] {
            let key = Key::ints(&[1, line]);
            let new = row(-1, -1);
            // put of an existing key: a replacement (through the hint for the later ones).
            tables.put(&mut writes, 0, key, new, false).unwrap();
        }
        let after: Vec<(i64, i64)> = snapshot.rows(0).map(|(_, f)| unpack(f)).collect();
        assert_eq!(before, after, "round {round}: the snapshot kept its values");
        tables.roll_back_to(&mut writes, mark);
        let now: Vec<(i64, i64)> = tables.rows(0).map(|(_, f)| unpack(f)).collect();
        assert_eq!(before, now, "round {round}: rolled back");
        tables.check_trees();
        drop(snapshot);
        writes.clear();
    }
}

// ---------------------------------------------------------------------------------------------
// The compiled path against Rhai.
// ---------------------------------------------------------------------------------------------

fn values() -> Vec<Value> {
    vec![
        json!(0),
        json!(1),
        json!(-1),
        json!(2),
        json!(3),
        json!(7),
        json!(-7),
        json!(64),
        json!(i64::MAX),
        json!(i64::MIN),
        json!(i64::MIN + 1),
        json!(1.0),
        json!(1.5),
        json!(-0.0),
        json!(true),
        json!(null),
        json!(""),
        json!("7"),
        json!("a string longer than twenty-three bytes"),
        json!([]),
        json!([1, 2]),
        json!([1.5, "x"]),
        json!({"n": 1}),
        json!({"n": "s"}),
    ]
}

const TABLES: &str = r#"{ "name": "t", "routes": {}, "tables": {
    "t": ["n", "s"],
    "u": ["s", "n"] } }"#;

const SCRIPT: &str = r#"
fn fill(req) { t.put(req.body.k, req.body.row); u.put(req.body.k, [req.body.x, req.body.y]); 0 }
fn consts(req) {
    const C = 7; let x = req.body.x;
    let a = x * C + C; let b = if x > C { C } else { x }; let c = C - x;
    if x == C { a = 0 } else { b = b + 1 }
    [a, b, c]
}
fn shadow_later(req) {
    let x = req.body.x; let y = x + 1;
    { let y = y * 2; x = y + x; }
    let x = y - 1; let y = x * x;
    [x, y]
}
fn shadow_self(req) {
    let x = req.body.x; let x = x + 1; let x = x * 2; let z = x;
    { let x = x - 3; z = x; }
    [x, z]
}
fn unit_tests(req) {
    let x = req.body.x; let out = [];
    if x == () { out.push(1) } if x != () { out.push(2) }
    if () == x { out.push(3) } if () != x { out.push(4) }
    let r = t.get(req.body.k);
    if r == () { out.push(5) } else { out.push(r.n) }
    out
}
fn mixed_cmp(req) {
    let x = req.body.x; let y = req.body.y; let out = [];
    if x == y { out.push(1) } if x != y { out.push(2) }
    if x < y { out.push(3) } if x <= y { out.push(4) }
    if x > y { out.push(5) } if x >= y { out.push(6) }
    if x + 0 == y { out.push(7) } if x == y - 0 { out.push(8) }
    out
}
fn if_values(req) {
    let x = req.body.x; let y = req.body.y;
    let a = if x > y { x } else { "s" };
    let b = if x > y { x + 1 } else if x < y { y } else { 0 };
    let c = if x < y { x };
    let d = if x == y { y } else { x };
    let e = if x > 0 { [x] } else { y };
    [a, b, c, d, e]
}
fn callee(a, b) { let c = a * b; let d = if c > a { c - a } else { a - c }; d }
fn callee_shadow(x) { let y = x + 1; let x = y * 2; x }
fn calls(req) {
    let a = req.body.x; let b = req.body.y;
    let c = callee(a, b) + a; let d = callee(b, a); let y = callee_shadow(a); let x = y + b;
    [c, d, x, y]
}
fn local_kinds(req) {
    let r = req.body.x;
    let n = r.n + 1;
    let m = r.n * 2;
    let k = if r.n > 0 { r.n } else { 0 };
    [n, m, k]
}
fn dirty(req) {
    let r = t.get(req.body.k);
    if r == () { return "none"; }
    r.n = req.body.x;
    let a = r.n + 1;
    let b = if r.n > 0 { r.n } else { 0 - r.n };
    r.n += req.body.y;
    let c = r.n - 1;
    r.s = req.body.y;
    let d = r.s * 2;
    [a, b, c, d, r.n]
}
fn saves(req) {
    let r = t.get(req.body.k);
    if r == () { return 0; }
    r.n = req.body.x; r.save();
    let q = req.body.y; q.save();
    t.get(req.body.k).n
}
fn saves_plain(req) {
    let r = t.get(req.body.k);
    r.n = req.body.x; r.save();
    r.s = req.body.y; r.save(); r.save();
    [t.get(req.body.k).n, t.get(req.body.k).s]
}
fn key_prop(req) { let r = t.get(req.body.k); let a = r.key; let b = r.key + 1; [a, b] }
fn items(req) {
    let a = req.body.a; let i = req.body.x;
    let x = a[i] * 2; let y = a[i - 1] + 1; let z = a[i * 1000000000000];
    [x, y, z]
}
fn items_neg(req) {
    let a = req.body.a; let i = req.body.x;
    let x = a[-i]; let y = a[0 - i] - a[i];
    [x, y]
}
fn divs(req) {
    let x = req.body.x; let y = req.body.y;
    let a = x / y; let b = x % y; let c = (x / y) % (y - 1); let d = x * y / 2;
    [a, b, c, d]
}
fn op_assign(req) {
    let r = t.get(req.body.k);
    r.n += req.body.x; r.n *= req.body.y; r.n -= 1; r.n /= req.body.y; r.n %= req.body.x;
    r.save(); r.n
}
fn op_assign_bits(req) {
    let r = t.get(req.body.k);
    r.n &= req.body.x; r.n |= req.body.y; r.n ^= 5; r.save(); r.n
}
fn op_assign_other(req) {
    let r = t.get(req.body.k);
    r.s += req.body.x; r.n -= req.body.y; r.save(); [r.s, r.n]
}
fn op_assign_map(req) {
    let r = req.body.x; r.n += 1; r.n *= req.body.y; r
}
fn op_assign_twice_unsaved(req) {
    let r = t.get(req.body.k);
    r.n = 5; r.n += req.body.x; let a = r.n; r.n += 1; [a, r.n, t.get(req.body.k).n]
}
fn loops(req) {
    let n = req.body.x; let s = 0; let i = 0;
    while i < n { s += i * i; i += 1; if s > 1000000 { break; } }
    s
}
fn for_loops(req) {
    let a = req.body.a; let s = 0;
    for (v, n) in a { let w = v * n; s = s + w; if w > 100 { continue; } s -= 1; }
    s
}
"#;

const HANDLERS: [&str; 26] = [
    "consts",
    "shadow_later",
    "shadow_self",
    "unit_tests",
    "mixed_cmp",
    "if_values",
    "calls",
    "local_kinds",
    "dirty",
    "saves",
    "saves_plain",
    "key_prop",
    "items",
    "items_neg",
    "divs",
    "op_assign",
    "op_assign_bits",
    "op_assign_other",
    "op_assign_map",
    "op_assign_twice_unsaved",
    "loops",
    "for_loops",
    "fill",
    "consts",
    "divs",
    "dirty",
];

fn random_calls(pair: &mut pair::Pair, handlers: &[&str], seed: u64, rounds: usize) {
    let values = values();
    let mut rng = Rng(seed);
    for k in 0..16 {
        let row = [rng.pick(&values).clone(), rng.pick(&values).clone()];
        let (x, y) = (rng.pick(&values).clone(), rng.pick(&values).clone());
        let _ = pair.call("fill", json!({"k": k, "row": row, "x": x, "y": y}));
    }
    for _ in 0..rounds {
        let k = rng.below(18);
        let (x, y) = (rng.pick(&values).clone(), rng.pick(&values).clone());
        let a: Vec<Value> = (0..rng.below(6))
            .map(|_| match rng.below(3) {
                0 => rng.pick(&values).clone(),
                _ => json!((rng.below(200)) as i64 - 100),
            })
            .collect();
        let body = json!({"k": k, "x": x, "y": y, "a": a});
        for handler in handlers {
            let _ = pair.call(handler, body.clone());
        }
        if rng.below(4) == 0 {
            let row = [rng.pick(&values).clone(), rng.pick(&values).clone()];
            let _ = pair.call("fill", json!({"k": k, "row": row, "x": x, "y": y}));
        }
    }
}

#[test]
fn pure_forms_agree_with_rhai_on_values_of_every_kind() {
    let limits = Limits {
        wall_clock_max: std::time::Duration::from_secs(60),
        ..Limits::default()
    };
    let mut pair = pair::pair_of_app(TABLES, SCRIPT, limits);
    let mut not_compiled = Vec::new();
    for handler in HANDLERS {
        if pair.compiled.execution(handler) != Some(Execution::Compiled) {
            not_compiled.push(handler);
        }
    }
    eprintln!("not compiled: {not_compiled:?}");
    random_calls(&mut pair, &HANDLERS, 0x2545_F491_4F6C_DD1D, 500);
}

/// Handlers near the operations limit: the compiled path's answer or error is Rhai's.
#[test]
fn the_operations_limit_stops_as_rhai_does() {
    for operations_max in [300u64, 1_000, 5_000] {
        let limits = Limits {
            operations_max,
            wall_clock_max: std::time::Duration::from_secs(60),
            ..Limits::default()
        };
        let mut pair = pair::pair_of_app(TABLES, SCRIPT, limits);
        for n in (0..200).chain([400, 1000]) {
            let a: Vec<i64> = (0..n % 50).collect();
            let body = json!({"k": n % 5, "x": n, "y": 3, "a": a});
            for handler in ["loops", "for_loops", "op_assign", "dirty", "calls"] {
                let _ = pair.call(handler, body.clone());
            }
        }
    }
}

const TYPED: &str = r#"{ "name": "typed", "routes": {}, "tables": {
    "t": { "n": "int!", "s": "string", "f": "float", "a": "any" } } }"#;

const TYPED_SCRIPT: &str = r#"
fn fill(req) { t.put(req.body.k, #{ n: 1, s: "s", f: 1.5, a: req.body.x }); 0 }
fn bump(req) { let r = t.get(req.body.k); r.n += req.body.x; r.n *= req.body.y; r.save(); r.n }
fn bump_any(req) { let r = t.get(req.body.k); r.a += req.body.y; r.save(); r.a }
fn bump_str(req) { let r = t.get(req.body.k); r.s += req.body.x; r.save(); r.s }
fn bump_float(req) { let r = t.get(req.body.k); r.f += req.body.x; r.save(); r.f }
fn set_pure(req) { let r = t.get(req.body.k); let v = r.n + req.body.x; r.n = v; r.s = v * 2; r.save(); [r.n, r.s] }
"#;

#[test]
fn typed_fields_refuse_as_rhai_does() {
    let limits = Limits {
        wall_clock_max: std::time::Duration::from_secs(60),
        ..Limits::default()
    };
    let mut pair = pair::pair_of_app(TYPED, TYPED_SCRIPT, limits);
    let handlers = ["bump", "bump_any", "bump_str", "bump_float", "set_pure"];
    for handler in handlers {
        eprintln!("{handler}: {:?}", pair.compiled.execution(handler));
    }
    let values = values();
    let mut rng = Rng(99);
    for k in 0..6 {
        let x = rng.pick(&values).clone();
        let _ = pair.call("fill", json!({"k": k, "x": x}));
    }
    for _ in 0..400 {
        let k = rng.below(7);
        let (x, y) = (rng.pick(&values).clone(), rng.pick(&values).clone());
        let body = json!({"k": k, "x": x, "y": y});
        for handler in handlers {
            let _ = pair.call(handler, body.clone());
        }
        if rng.below(5) == 0 {
            let _ = pair.call("fill", json!({"k": k, "x": x}));
        }
    }
}

/// Lines of orders inserted and saved in order by handlers, read in between by read handlers
/// (which take snapshots of the tables): both engines' tables stay the same, long string keys
/// included.
const ORDERS: &str = r#"{ "name": "o", "routes": {"GET /count": "count"}, "tables": {
    "lines": ["qty", "note"],
    "stock": ["qty"] },
    "indexes": { "lines_by_qty": { "table": "lines", "fields": ["qty"] } } }"#;

const ORDERS_SCRIPT: &str = r#"
fn new_order(req) {
    let o = req.body.o; let n = req.body.n; let total = 0;
    for line in 1..=n {
        lines.insert(o, line, [line * 3, req.body.note]);
        let s = stock.get(req.body.item + line);
        if s == () { stock.put(req.body.item + line, [100]); } else { s.qty -= line; s.save(); }
    }
    for line in 1..=n {
        let l = lines.get(o, line);
        l.qty += 1; l.save(); total += l.qty;
    }
    total
}
fn deliver(req) {
    let o = req.body.o; let total = 0;
    for line in 1..=20 {
        let l = lines.get(o, line);
        if l == () { break; }
        l.note = "delivered"; l.save(); total += l.qty;
    }
    total
}
fn drop_order(req) { let o = req.body.o; for line in 1..=20 { lines.delete(o, line); } 0 }
fn named(req) { let k = req.body.name; let r = stock.get(k); if r == () { stock.put(k, [1]); 1 } else { r.qty += 1; r.save(); r.qty } }
fn count(req) { [lines.count(), stock.count()] }
"#;

#[test]
fn orders_in_both_engines_with_reads_between() {
    let limits = Limits {
        wall_clock_max: std::time::Duration::from_secs(60),
        ..Limits::default()
    };
    let mut pair = pair::pair_of_app(ORDERS, ORDERS_SCRIPT, limits);
    for handler in ["new_order", "deliver", "drop_order", "named"] {
        eprintln!("{handler}: {:?}", pair.compiled.execution(handler));
    }
    let mut rng = Rng(31);
    for step in 0..400u64 {
        let o = rng.below(60) as i64;
        let body = json!({
            "o": o,
            "n": 1 + rng.below(15),
            "item": rng.below(50),
            "note": if rng.below(2) == 0 { "x".to_string() } else { "n".repeat(rng.below(40) as usize) },
            "name": format!("a long stock name past the inline bytes {}", rng.below(30)),
        });
        let handler = *rng.pick(&[
            "new_order",
            "new_order",
            "deliver",
            "drop_order",
            "named",
            "named",
        ]);
        let _ = pair.call(handler, body.clone());
        if step % 3 == 0 {
            assert_eq!(pair.kind("count"), pure_lang::HandlerKind::Read);
            let _ = pair.call("count", Value::Null);
        }
    }
    for tables in &pair.state {
        tables.check_trees();
    }
}

/// A table built whole (`set_rows`, the builder's full leaves), then read for update, saved,
/// added to in order and snapshotted: against a model.
#[test]
fn a_table_built_whole_takes_hinted_writes() {
    let mut rows = pure_lang::RowSet::new();
    let mut model: BTreeMap<Key, (i64, i64)> = BTreeMap::new();
    for k in 0..3_000i64 {
        let key = Key::ints(&[k * 4]);
        rows.push_sorted(key.clone(), row(k, 0)).expect("sorted");
        model.insert(key, (k, 0));
    }
    let mut tables = Tables::new(1);
    tables.set_rows(0, rows);
    let mut writes = WriteSet::default();
    let mut snapshots = Vec::new();
    let mut rng = Rng(5);
    for step in 0..3_000i64 {
        let k = rng.below(12_000) as i64;
        let key = Key::ints(&[k]);
        match rng.below(4) {
            0 => {
                let base = tables.get_for_update(0, &key).cloned();
                if let Some(base) = base {
                    let new = base.with(&[(0, Dynamic::from_int(step))]);
                    tables
                        .patch(&mut writes, 0, &key, 1, &new, Some(&base))
                        .unwrap();
                    model.get_mut(&key).unwrap().0 = step;
                }
            }
            1 => {
                // A run of keys in order from k.
                for j in 0..rng.below(20) as i64 {
                    let key = Key::ints(&[k + j]);
                    tables
                        .put(&mut writes, 0, key.clone(), row(step, j), false)
                        .unwrap();
                    model.insert(key, (step, j));
                }
            }
            2 => {
                let deleted = tables.delete(&mut writes, 0, key.clone());
                assert_eq!(deleted, model.remove(&key).is_some());
            }
            _ => snapshots.push((tables.snapshot(), vec![model.clone()])),
        }
        tables.check_trees();
    }
    assert_holds(&tables, &vec![model], "end");
    for (n, (snapshot, at)) in snapshots.iter().enumerate() {
        assert_holds(snapshot, at, &format!("snapshot {n}"));
    }
}

const PARAMS_SCRIPT: &str = r#"
fn fill(req) { t.put(req.body.k, req.body.row); u.put(req.body.k, [req.body.x, req.body.y]); 0 }
fn bump_first(r, x) { r.n += x; r.save(); r.n }
fn bump_second(x, r) { r.n += x; let v = r.n * 2; r.save(); v }
fn read_first(r, x) { let v = r.n + x; v }
fn lend(req) {
    let r = t.get(req.body.k);
    let a = bump_first(r, req.body.x);
    let b = bump_second(req.body.y, r);
    let c = read_first(r, 1);
    r.n -= 1;
    [a, b, c, r.n, t.get(req.body.k).n]
}
fn lend_last(req) { let r = t.get(req.body.k); bump_first(r, req.body.x) }
"#;

#[test]
fn rows_handed_to_functions_change_as_in_rhai() {
    let limits = Limits {
        wall_clock_max: std::time::Duration::from_secs(60),
        ..Limits::default()
    };
    let mut pair = pair::pair_of_app(TABLES, PARAMS_SCRIPT, limits);
    for handler in ["lend", "lend_last"] {
        eprintln!("{handler}: {:?}", pair.compiled.execution(handler));
    }
    random_calls(&mut pair, &["lend", "lend_last"], 17, 300);
}
