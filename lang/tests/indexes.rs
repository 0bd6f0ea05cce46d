//! Declared indexes: kept exact by every kind of write, by rollbacks (a throw, a unique
//! violation, a failed insert), compiled and in Rhai, against a model kept by hand; and what a
//! manifest may declare.

use std::collections::BTreeMap;
use std::ops::Bound::Unbounded;

use pure_lang::{App, Limits, Request, Tables, WriteSet};
use serde_json::{json, Value};

const MANIFEST: &str = r#"{
  "name": "shop",
  "routes": {},
  "tables": { "items": ["category", "sku", "qty"] },
  "indexes": {
    "by_category": { "table": "items", "fields": ["category"] },
    "by_sku": { "table": "items", "fields": ["sku"], "unique": true },
    "by_cat_qty": { "table": "items", "fields": ["category", "-qty"] }
  }
}"#;

const SCRIPT: &str = r#"
fn op(req) {
    let b = req.body;
    if b.op == "put" {
        items.put(b.id, #{ category: b.cat, sku: b.sku, qty: 1 });
    } else if b.op == "insert" {
        items.insert(b.id, #{ category: b.cat, sku: b.sku, qty: 1 });
    } else if b.op == "update" {
        let row = items.get(b.id);
        if row != () { row.category = b.cat; row.sku = b.sku; row.save(); }
    } else if b.op == "qty" {
        let row = items.get(b.id);
        if row != () { row.qty += 1; row.save(); }
    } else {
        items.delete(b.id);
    }
    if b.fail { throw "rolled back"; }
}
fn entries(req) {
    let out = [];
    for row in items.by_category.scan((), (), 10000) { out.push([row.category, row.key]); }
    out
}
fn find(req) { items.by_category.find(req.body.cat, 10000).map(|row| row.key) }
fn find_rev(req) { items.by_category.find_rev(req.body.cat, 2).map(|row| row.key) }
fn sku(req) { let row = items.by_sku.get(req.body.sku); if row == () { () } else { row.key } }
fn counts(req) { [items.by_category.count(), items.by_sku.count()] }
fn ranked(req) {
    let out = [];
    for row in items.by_cat_qty.scan((), (), 10000) { out.push([row.category, row.qty, row.key]); }
    out
}
fn qty_range(req) {
    let out = [];
    let b = req.body;
    for row in items.by_cat_qty.scan([b.cat, b.hi], [b.cat, b.lo], 10000) { out.push(row.key); }
    out
}
fn qty_bound(req) { items.by_cat_qty.find(["a", "most"], 10) }
"#;

#[derive(Clone, Debug, Default, PartialEq)]
struct Item {
    category: Option<String>,
    sku: Option<i64>,
    qty: i64,
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// An app from `manifest` and `script`, with empty tables and its indexes built on them.
fn load(manifest: &str, script: &str) -> (App, Tables) {
    let app = App::from_sources(
        manifest,
        vec![("app.rhai".into(), script.into())],
        Limits::default(),
    )
    .expect("loads");
    let mut tables = Tables::new(app.schema().tables.len());
    tables.set_indexes(app.indexes().to_vec()).expect("indexes");
    (app, tables)
}

/// Runs `handler` as a write on `tables`: its answer's body, or the error's.
fn call(app: &App, tables: &mut Tables, handler: &str, body: Value) -> Result<Value, Value> {
    let mut writes = WriteSet::default();
    app.run_write(handler, &request(body), tables, &mut writes)
        .map(|answer| answer.body.to_value())
        .map_err(|error| error.to_json())
}

fn request(body: Value) -> Request {
    Request {
        body: pure_lang::to_dynamic(&body),
        ..Request::default()
    }
}

#[test]
fn indexes_stay_exact_under_random_writes_throws_and_unique_violations() {
    let seed = std::env::var("PURE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_1dea_u64);
    eprintln!("indexes: seed {seed}");
    for interpreted in [false, true] {
        let mut app = App::from_sources(
            MANIFEST,
            vec![("shop.rhai".into(), SCRIPT.into())],
            Limits::default(),
        )
        .expect("loads");
        app.set_interpreted(interpreted);
        let mut tables = Tables::new(app.schema().tables.len());
        tables
            .set_indexes(app.indexes().to_vec())
            .expect("empty tables index");
        let mut writes = WriteSet::default();
        let mut model: BTreeMap<i64, Item> = BTreeMap::new();
        let mut rng = Rng(seed | 1);
        let (mut refused, mut thrown) = (0, 0);
        for step in 0..3000 {
            let id = rng.below(40) as i64;
            let cat = ["a", "b", "c"]
                .get(rng.below(4) as usize)
                .map(|c| c.to_string());
            let sku = (rng.below(5) != 0).then(|| rng.below(60) as i64);
            let op = ["put", "insert", "update", "qty", "delete"][rng.below(5) as usize];
            let fail = rng.below(8) == 0;
            let body = json!({"op": op, "id": id, "cat": cat, "sku": sku, "fail": fail});
            let result = app.run_write("op", &request(body.clone()), &mut tables, &mut writes);
            writes.clear();
            // The model: what the write does when it commits.
            let mut next = model.clone();
            let new = Item {
                category: cat.clone(),
                sku,
                qty: 1,
            };
            match op {
                "put" => {
                    next.insert(id, new);
                }
                "insert" if !model.contains_key(&id) => {
                    next.insert(id, new);
                }
                "update" => {
                    if let Some(item) = next.get_mut(&id) {
                        item.category = new.category;
                        item.sku = new.sku;
                    }
                }
                "qty" => {
                    if let Some(item) = next.get_mut(&id) {
                        item.qty += 1;
                    }
                }
                "delete" => {
                    next.remove(&id);
                }
                _ => {}
            }
            let duplicate_sku = next.iter().any(|(k, item)| {
                item.sku.is_some()
                    && next
                        .iter()
                        .any(|(j, other)| j != k && other.sku == item.sku)
            });
            let insert_conflict = op == "insert" && model.contains_key(&id);
            let commits = !fail && !duplicate_sku && !insert_conflict;
            assert_eq!(result.is_ok(), commits, "step {step}: {body} -> {result:?}");
            if commits {
                model = next;
            } else if duplicate_sku && !insert_conflict {
                refused += 1;
                let message = result.expect_err("refused").to_json()["error"].to_string();
                assert!(message.contains("unique index by_sku"), "{message}");
            } else {
                thrown += 1;
            }

            let read = |tables: &mut Tables, writes: &mut WriteSet, handler: &str, body: Value| {
                let answer = app.run_write(handler, &request(body), tables, writes);
                writes.clear();
                answer.expect("a read runs").body
            };
            let mut expected: Vec<(String, i64)> = model
                .iter()
                .filter_map(|(k, item)| item.category.clone().map(|c| (c, *k)))
                .collect();
            expected.sort();
            let expected: Vec<Value> = expected.iter().map(|(c, k)| json!([c, k])).collect();
            assert_eq!(
                read(&mut tables, &mut writes, "entries", json!({})),
                json!(expected),
                "step {step}: the category index after {body}"
            );
            let probe = ["a", "b", "c"][rng.below(3) as usize];
            let in_category: Vec<i64> = model
                .iter()
                .filter(|(_, item)| item.category.as_deref() == Some(probe))
                .map(|(k, _)| *k)
                .collect();
            assert_eq!(
                read(&mut tables, &mut writes, "find", json!({"cat": probe})),
                json!(in_category)
            );
            let newest: Vec<i64> = in_category.iter().rev().take(2).copied().collect();
            assert_eq!(
                read(&mut tables, &mut writes, "find_rev", json!({"cat": probe})),
                json!(newest)
            );
            let wanted = rng.below(60) as i64;
            let owner = model
                .iter()
                .find(|(_, item)| item.sku == Some(wanted))
                .map(|(k, _)| *k);
            assert_eq!(
                read(&mut tables, &mut writes, "sku", json!({"sku": wanted})),
                json!(owner)
            );
            // The descending field: category ascending, then qty descending, then key.
            let mut ranked: Vec<(String, i64, i64)> = model
                .iter()
                .filter_map(|(k, item)| item.category.clone().map(|c| (c, item.qty, *k)))
                .collect();
            ranked.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
            let ranked_json: Vec<Value> = ranked.iter().map(|(c, q, k)| json!([c, q, k])).collect();
            assert_eq!(
                read(&mut tables, &mut writes, "ranked", json!({})),
                json!(ranked_json),
                "step {step}: the descending index after {body}"
            );
            let (hi, lo) = (1 + rng.below(4) as i64, rng.below(3) as i64);
            let in_range: Vec<i64> = ranked
                .iter()
                .filter(|(c, q, _)| c == probe && *q <= hi && *q > lo)
                .map(|(_, _, k)| *k)
                .collect();
            assert_eq!(
                read(
                    &mut tables,
                    &mut writes,
                    "qty_range",
                    json!({"cat": probe, "hi": hi, "lo": lo})
                ),
                json!(in_range),
                "step {step}: qty from {hi} down to above {lo}"
            );
            let with_sku = model.values().filter(|item| item.sku.is_some()).count();
            assert_eq!(
                read(&mut tables, &mut writes, "counts", json!({})),
                json!([expected.len(), with_sku])
            );
        }
        eprintln!("indexes (interpreted: {interpreted}): {refused} unique violations, {thrown} other rollbacks");
        assert!(refused > 20 && thrown > 100, "{refused} {thrown}");

        // Built from the rows, the indexes are the ones the writes kept.
        let mut rebuilt = tables.snapshot();
        rebuilt
            .set_indexes(app.indexes().to_vec())
            .expect("the rows index");
        for id in 0..app.indexes().len() {
            let kept: Vec<_> = tables.index_range(id, Unbounded, Unbounded).collect();
            let built: Vec<_> = rebuilt.index_range(id, Unbounded, Unbounded).collect();
            assert_eq!(kept, built);
        }
    }
}

#[test]
fn a_declaration_that_cannot_hold_is_a_load_error_and_bad_rows_fail_the_build() {
    let load = |indexes: &str| {
        let manifest = format!(
            r#"{{"name": "x", "routes": {{}}, "tables": {{"items": ["a", "b"]}}, "indexes": {indexes}}}"#
        );
        App::from_sources(
            &manifest,
            vec![("x.rhai".into(), String::new())],
            Limits::default(),
        )
    };
    for (indexes, says) in [
        (
            r#"{"i": {"table": "nope", "fields": ["a"]}}"#,
            "no table \"nope\"",
        ),
        (
            r#"{"i": {"table": "items", "fields": ["c"]}}"#,
            "no field \"c\"",
        ),
        (
            r#"{"i": {"table": "items", "fields": []}}"#,
            "one or more field names",
        ),
        (
            r#"{"i": {"table": "items", "fields": ["a"], "uniq": true}}"#,
            "unknown key \"uniq\"",
        ),
        (
            r#"{"bad-name": {"table": "items", "fields": ["a"]}}"#,
            "identifier",
        ),
    ] {
        let error = load(indexes).err().expect(indexes).to_string();
        assert!(error.contains(says), "{indexes}: {error}");
    }
    let app =
        load(r#"{"by_a": {"table": "items", "fields": ["a"], "unique": true}}"#).expect("loads");
    let mut tables = Tables::new(1);
    let mut writes = WriteSet::default();
    for (key, a) in [(1, json!(5)), (2, json!(5))] {
        tables
            .put(
                &mut writes,
                0,
                pure_lang::Key::int(key),
                pure_lang::Fields::from_values(&[pure_lang::to_dynamic(&a)]),
                false,
            )
            .expect("no indexes yet");
    }
    let error = tables
        .set_indexes(app.indexes().to_vec())
        .expect_err("two rows with a = 5");
    assert!(error.contains("unique index by_a"), "{error}");
    assert_eq!(tables.index_count(), 0);
}

/// `find` takes the rows whose value is the one asked for, not every value that starts with
/// its bytes: a string with a NUL after the same text encodes with the same first bytes.
#[test]
fn find_matches_whole_values_only() {
    let (app, mut tables) = load(MANIFEST, SCRIPT);
    let mut call =
        |handler: &str, body: Value| call(&app, &mut tables, handler, body).expect("runs");
    for (id, cat) in [(1, "ab"), (2, "ab\u{0}x"), (3, "abc"), (4, "a")] {
        call(
            "op",
            json!({"op": "put", "id": id, "cat": cat, "sku": id, "fail": false}),
        );
    }
    assert_eq!(call("find", json!({"cat": "ab"})), json!([1]));
    assert_eq!(call("find_rev", json!({"cat": "ab"})), json!([1]));
    assert_eq!(call("find", json!({"cat": "ab\u{0}x"})), json!([2]));
    assert_eq!(call("find", json!({"cat": "a"})), json!([4]));
}

/// A descending field holds integers only: a lookup by another value, or a row with one, is an
/// error naming the index and the field, and the row is not written.
#[test]
fn a_descending_field_takes_integers_only() {
    let (app, mut tables) = load(MANIFEST, SCRIPT);
    let error = call(&app, &mut tables, "qty_bound", json!({}))
        .expect_err("a string for a descending field");
    let message = error["error"].to_string();
    assert!(
        message.contains("by_cat_qty orders qty descending: give it an integer"),
        "{message}"
    );

    let mut writes = WriteSet::default();
    let mut bad = Tables::new(1);
    bad.put(
        &mut writes,
        0,
        pure_lang::Key::int(1),
        pure_lang::Fields::from_values(&[
            pure_lang::to_dynamic(&json!("a")),
            pure_lang::to_dynamic(&json!(7)),
            pure_lang::to_dynamic(&json!("many")),
        ]),
        false,
    )
    .expect("no indexes yet");
    let error = bad
        .set_indexes(app.indexes().to_vec())
        .expect_err("a string in a descending field");
    assert!(
        error.contains("orders rows by qty descending, which must be an integer"),
        "{error}"
    );
}

/// An index may start with parts of the row's key (`key[0]`): a district's customers by name
/// stay together, and a key too short for the index leaves the row out of it.
#[test]
fn key_parts_in_an_index_group_rows_by_their_key() {
    let manifest = r#"{
      "name": "shop", "routes": {},
      "tables": { "people": ["name"] },
      "indexes": { "by_name": { "table": "people", "fields": ["key[0]", "name"] } }
    }"#;
    let script = r#"
fn add(req) { let b = req.body; if b.k1 == () { people.put(b.k0, #{ name: b.name }); } else { people.put(b.k0, b.k1, #{ name: b.name }); } }
fn rename(req) { let b = req.body; let row = people.get(b.k0, b.k1); row.name = b.name; row.save(); }
fn named(req) { people.by_name.find([req.body.k0, req.body.name], 100).map(|row| row.key) }
fn all(req) { people.by_name.count() }
"#;
    let (app, mut tables) = load(manifest, script);
    let mut call =
        |handler: &str, body: Value| call(&app, &mut tables, handler, body).expect("runs");
    for (k0, k1, name) in [(1, 5, "ann"), (2, 3, "ann"), (1, 2, "bob"), (1, 9, "ann")] {
        call("add", json!({"k0": k0, "k1": k1, "name": name}));
    }
    assert_eq!(
        call("named", json!({"k0": 1, "name": "ann"})),
        json!([[1, 5], [1, 9]])
    );
    assert_eq!(
        call("named", json!({"k0": 2, "name": "ann"})),
        json!([[2, 3]])
    );
    call("rename", json!({"k0": 1, "k1": 5, "name": "bob"}));
    assert_eq!(
        call("named", json!({"k0": 1, "name": "bob"})),
        json!([[1, 2], [1, 5]])
    );
    // A one-part key has a key[0]: the row is in the index.
    call("add", json!({"k0": 7, "name": "cy"}));
    assert_eq!(call("named", json!({"k0": 7, "name": "cy"})), json!([7]));
    assert_eq!(call("all", json!({})), json!(5));

    for (fields, says) in [
        (r#"["key[4]"]"#, "key[0] to key[3]"),
        (r#"["key[x]"]"#, "key[0] to key[3]"),
    ] {
        let manifest = format!(
            r#"{{"name": "x", "routes": {{}}, "tables": {{"t": ["a"]}}, "indexes": {{"i": {{"table": "t", "fields": {fields}}}}}}}"#
        );
        let error = App::from_sources(
            &manifest,
            vec![("x.rhai".into(), String::new())],
            Limits::default(),
        )
        .err()
        .expect(fields)
        .to_string();
        assert!(error.contains(says), "{fields}: {error}");
    }
}
