//! Review of research 034 (the work the writes need not do): keys read back from their own
//! bytes (`Key::from_checked_encoding`), an index entry's key read from the row in place, the
//! forward scan that finds its end by comparing keys, and the per-table filter of the fields
//! the indexes read (`watched`), through the public API of pure-lang.

use std::collections::BTreeMap;
use std::ops::Bound::{self, Excluded, Included, Unbounded};

use pure_lang::{
    App, Dynamic, Fields, ImmutableString, IndexDef, IndexSource, Key, KeyPart, Limits, Request,
    Tables, WriteSet,
};
use serde_json::{json, Value};

mod pair;

use pair::Rng;

const LONG: &str = "a string part longer than the inline bytes of a key";

fn random_part(rng: &mut Rng) -> KeyPart {
    match rng.below(6) {
        0 => KeyPart::Int(*rng.pick(&[
            i64::MIN,
            i64::MIN + 1,
            -257,
            -256,
            -1,
            0,
            1,
            255,
            256,
            i64::MAX,
        ])),
        1 => KeyPart::Int(rng.next() as i64),
        2 => KeyPart::Int(rng.below(7) as i64 - 3),
        3 => KeyPart::Str((*rng.pick(&["", "\0", "a\0b", "a", "ab", "é", "\0\u{FF}"])).into()),
        4 => KeyPart::Str(format!("{LONG}{}", rng.below(4)).into()),
        _ => KeyPart::Str(format!("k{}", rng.below(50)).into()),
    }
}

fn random_key(rng: &mut Rng) -> Key {
    let n = 1 + rng.below(4) as usize;
    Key::from_parts((0..n).map(|_| random_part(rng)).collect())
}

// ---------------------------------------------------------------------------------------------
// Keys from their bytes.
// ---------------------------------------------------------------------------------------------

/// Every key reads back from its own bytes as itself, whatever its parts: inline, on the heap,
/// strings with `00` bytes, integers at every width and sign.
#[test]
fn every_key_reads_back_from_its_bytes() {
    let mut rng = Rng(0x0034_0001);
    for _ in 0..20_000 {
        let key = random_key(&mut rng);
        let read = Key::from_checked_encoding(key.as_bytes())
            .unwrap_or_else(|e| panic!("{key:?} reads back: {e}"));
        assert_eq!(read.as_bytes(), key.as_bytes(), "{key:?}");
        assert_eq!(read.parts(), key.parts(), "{key:?}");
        assert_eq!(read, key);
        assert_eq!(read.cmp(&key), std::cmp::Ordering::Equal);
    }
    // Every integer width, both signs, at its edges.
    for bits in 0..63 {
        for v in [
            1i64 << bits,
            (1i64 << bits) - 1,
            -(1i64 << bits),
            -(1i64 << bits) - 1,
        ] {
            let key = Key::ints(&[v, v]);
            let read = Key::from_checked_encoding(key.as_bytes()).expect("reads back");
            assert_eq!(read.parts(), vec![KeyPart::Int(v), KeyPart::Int(v)]);
        }
    }
}

/// Checks that `bytes` is refused or is the one encoding of the key it reads as; never panics.
fn refused_or_canonical(bytes: &[u8]) {
    let result = std::panic::catch_unwind(|| Key::from_checked_encoding(bytes));
    let Ok(result) = result else {
        panic!("{bytes:02x?}: decoding panicked");
    };
    if let Ok(key) = result {
        assert_eq!(key.as_bytes(), bytes, "{bytes:02x?}: the key is its bytes");
        assert_eq!(
            Key::from_parts(key.parts()).as_bytes(),
            bytes,
            "{bytes:02x?}: the bytes are the one encoding of the parts"
        );
        assert!(!key.parts().is_empty());
    }
}

/// Every byte string of one or two bytes, and every one of up to five over the bytes that
/// matter to the encoding: refused, or exactly the encoding of the parts it reads as.
#[test]
fn any_bytes_are_refused_or_the_encoding_of_their_parts() {
    refused_or_canonical(&[]);
    assert!(Key::from_checked_encoding(&[]).is_err());
    for a in 0..=255u8 {
        refused_or_canonical(&[a]);
        for b in 0..=255u8 {
            refused_or_canonical(&[a, b]);
        }
    }
    let alphabet = [
        0x00u8, 0x01, 0x0E, 0x0F, 0x10, 0x16, 0x17, 0x18, 0x19, 0x1F, 0x20, 0x21, 0x2F, 0x30, 0x31,
        0x61, 0x7F, 0x80, 0xC3, 0xA9, 0xFE, 0xFF,
    ];
    let mut bytes = Vec::new();
    fn walk(bytes: &mut Vec<u8>, alphabet: &[u8], left: usize) {
        refused_or_canonical(bytes);
        if left == 0 {
            return;
        }
        for &b in alphabet {
            bytes.push(b);
            walk(bytes, alphabet, left - 1);
            bytes.pop();
        }
    }
    walk(&mut bytes, &alphabet, 4);
    // Valid keys with one byte changed, cut, or a byte added: the same rule.
    let mut rng = Rng(0x0034_0002);
    for _ in 0..20_000 {
        let mut bytes = random_key(&mut rng).as_bytes().to_vec();
        match rng.below(3) {
            0 => {
                let at = rng.below(bytes.len() as u64) as usize;
                bytes[at] = rng.next() as u8;
            }
            1 => bytes.truncate(rng.below(bytes.len() as u64) as usize),
            _ => {
                let at = rng.below(bytes.len() as u64 + 1) as usize;
                bytes.insert(at, *rng.pick(&alphabet));
            }
        }
        refused_or_canonical(&bytes);
    }
}

/// Bytes no key encodes to: refused.
#[test]
fn non_canonical_bytes_are_refused() {
    let refused: &[&[u8]] = &[
        &[0x1A, 0x00, 0x01],             // 1 in two bytes
        &[0x16, 0xFF, 0xFF],             // -1 in two bytes
        &[0x15, 0xFF, 0x00],             // -256 in two bytes
        &[0x30, 0x00, 0xFE, 0x00],       // a 00 escaped another way
        &[0x30, 0x00, 0xFF],             // an escaped 00 with no end
        &[0x30, b'a', 0x00, 0x00],       // a zero where a part should start
        &[0x30, 0xC3, 0x00],             // a cut UTF-8 character
        &[0x30, 0xED, 0xA0, 0x80, 0x00], // a surrogate in "UTF-8"
        &[0x19],                         // an integer without its byte
        &[0x20, 1, 2, 3, 4, 5, 6, 7],    // i64 of 8 bytes given 7
        &[0x18, 0x19],                   // a part cut
        &[0xFF],
        &[0x31, 0x00],
    ];
    for bytes in refused {
        assert!(
            Key::from_checked_encoding(bytes).is_err(),
            "{bytes:02x?} is no key's encoding"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// An index entry's key.
// ---------------------------------------------------------------------------------------------

/// The entry key that `IndexDef::values` promises: the values, then (unless unique) the row
/// key's parts; `None` when a value is unset; the same error.
fn expected_entry(def: &IndexDef, key: &Key, fields: &Fields) -> Result<Option<Vec<u8>>, String> {
    let Some(mut parts) = def.values(key, fields)? else {
        return Ok(None);
    };
    if !def.unique {
        parts.extend(key.parts());
    }
    Ok(Some(Key::from_parts(parts).as_bytes().to_vec()))
}

fn entry_bytes(def: &IndexDef, key: &Key, fields: &Fields) -> Result<Option<Vec<u8>>, String> {
    def.entry_key(key, fields)
        .map(|entry| entry.map(|e| e.as_bytes().to_vec()))
}

fn random_value(rng: &mut Rng) -> Dynamic {
    match rng.below(10) {
        0 | 1 => Dynamic::UNIT,
        2 => Dynamic::from_int(*rng.pick(&[i64::MIN, -1, 0, 1, i64::MAX, -300, 70_000])),
        3 => Dynamic::from_int(rng.next() as i64),
        4 => Dynamic::from(ImmutableString::from(*rng.pick(&[
            "",
            "\0",
            "Smith\0x",
            "é",
            "BARBARBAR",
        ]))),
        5 => Dynamic::from(ImmutableString::from(format!("{LONG}{}", rng.below(3)))),
        6 => Dynamic::from_float(1.5),
        7 => Dynamic::from_bool(true),
        8 => Dynamic::from_array(vec![Dynamic::from_int(1)]),
        _ => Dynamic::from_int(rng.below(5) as i64),
    }
}

fn random_def(rng: &mut Rng, descending_key_parts: bool) -> IndexDef {
    let n = 1 + rng.below(4) as usize;
    let sources: Vec<IndexSource> = (0..n)
        .map(|_| match rng.below(2) {
            0 => IndexSource::Field(rng.below(4) as usize),
            _ => IndexSource::KeyPart(rng.below(4) as usize),
        })
        .collect();
    let descending = sources
        .iter()
        .map(|s| match s {
            IndexSource::Field(_) => rng.below(3) == 0,
            IndexSource::KeyPart(_) => descending_key_parts && rng.below(2) == 0,
        })
        .collect();
    IndexDef {
        name: "by".into(),
        table: 0,
        fields: sources
            .iter()
            .map(|s| match s {
                IndexSource::Field(slot) => format!("f{slot}"),
                IndexSource::KeyPart(i) => format!("key[{i}]"),
            })
            .collect(),
        sources,
        descending,
        unique: rng.below(2) == 0,
    }
}

fn compare_entries(seed: u64, descending_key_parts: bool) -> usize {
    let mut rng = Rng(seed);
    let mut made = 0;
    for round in 0..30_000 {
        let def = random_def(&mut rng, descending_key_parts);
        let key = random_key(&mut rng);
        let values: Vec<Dynamic> = (0..rng.below(5)).map(|_| random_value(&mut rng)).collect();
        let fields = Fields::from_values(&values);
        let expected = expected_entry(&def, &key, &fields);
        made += usize::from(matches!(expected, Ok(Some(_))));
        assert_eq!(
            entry_bytes(&def, &key, &fields),
            expected,
            "round {round}: {:?} desc {:?} unique {} of key {key:?}, fields {values:?}",
            def.sources,
            def.descending,
            def.unique
        );
    }
    made
}

/// An entry's key (read in place where it can be) is the key of the values `values` makes,
/// then the row key: fields and key parts of every kind, descending fields, unique or not,
/// keys with fewer parts than an index reads, long keys on the heap, strings with `00`.
#[test]
fn entry_keys_are_the_keys_of_the_indexed_values() {
    let made = compare_entries(0x0034_0003, false);
    assert!(made > 3_000, "{made} entries made");
}

/// The same with key parts declared descending (`"-key[1]"`, which a manifest accepts and
/// `values` and `lookup_key` turn): the entry holds the turned value, and a string key part
/// in a descending place is refused as a descending field's string is.
#[test]
fn entry_keys_of_descending_key_parts_are_those_of_the_values() {
    let made = compare_entries(0x0034_0004, true);
    assert!(made > 3_000, "{made} entries made");
}

/// The smallest case of the above, spelled out: an index on `-key[0]` of a row keyed 5 holds
/// `!5`, as `values` and `lookup_key` say.
#[test]
fn a_descending_key_part_entry_holds_the_turned_value() {
    let def = IndexDef {
        name: "by_key_desc".into(),
        table: 0,
        sources: vec![IndexSource::KeyPart(0)],
        fields: vec!["key[0]".into()],
        descending: vec![true],
        unique: true,
    };
    let fields = Fields::from_values(&[Dynamic::from_int(1)]);
    let key = Key::int(5);
    assert_eq!(def.values(&key, &fields), Ok(Some(vec![KeyPart::Int(!5)])));
    assert_eq!(
        def.lookup_key(&Dynamic::from_int(5)),
        Ok(Key::int(!5)),
        "a lookup turns it"
    );
    assert_eq!(def.entry_key(&key, &fields), Ok(Some(Key::int(!5))));
    // A string key part cannot be descending: refused, as `values` refuses it.
    let key = Key::string("a");
    assert!(def.values(&key, &fields).is_err());
    assert!(
        def.entry_key(&key, &fields).is_err(),
        "{:?}",
        def.entry_key(&key, &fields)
    );
}

fn load(manifest: &str, script: &str, interpreted: bool) -> (App, Tables) {
    let mut app = App::from_sources(
        manifest,
        vec![("app.rhai".into(), script.into())],
        Limits::default(),
    )
    .expect("loads");
    app.set_interpreted(interpreted);
    let mut tables = Tables::new(app.schema().tables.len());
    tables.set_indexes(app.indexes().to_vec()).expect("indexes");
    (app, tables)
}

fn call(app: &App, tables: &mut Tables, handler: &str, body: Value) -> Result<Value, Value> {
    let mut writes = WriteSet::default();
    let request = Request {
        body: pure_lang::to_dynamic(&body),
        ..Request::default()
    };
    let result = app
        .run_write(handler, &request, tables, &mut writes)
        .map(|answer| answer.body.to_value())
        .map_err(|error| error.to_json());
    writes.clear();
    result
}

const LINES_MANIFEST: &str = r#"{
  "name": "lines",
  "routes": {},
  "tables": { "lines": ["amount"], "named": ["amount"] },
  "indexes": {
    "newest_first": { "table": "lines", "fields": ["key[0]", "-key[1]"] },
    "by_name_desc": { "table": "named", "fields": ["-key[0]"] }
  }
}"#;

const LINES_SCRIPT: &str = r#"
fn put(req) { lines.put(req.body.o, req.body.n, #{ amount: req.body.n * 10 }); }
fn put_named(req) { named.put(req.body.name, #{ amount: 1 }); }
fn order(req) { lines.newest_first.scan((), (), 100).map(|r| r.key) }
fn find(req) { lines.newest_first.find([req.body.o, req.body.n], 10).map(|r| r.key) }
fn of_order(req) { lines.newest_first.find(req.body.o, 10).map(|r| r.key) }
"#;

/// An index on `["key[0]", "-key[1]"]` through an app: an order's lines newest first, and
/// `find` of a line's values finds it.
#[test]
fn a_descending_key_part_index_orders_and_finds_as_declared() {
    for interpreted in [false, true] {
        let (app, mut tables) = load(LINES_MANIFEST, LINES_SCRIPT, interpreted);
        for (o, n) in [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2)] {
            call(&app, &mut tables, "put", json!({"o": o, "n": n})).expect("put");
        }
        assert!(tables.indexes_hold_their_rows(usize::MAX));
        assert_eq!(
            call(&app, &mut tables, "order", json!({})),
            Ok(json!([[1, 3], [1, 2], [1, 1], [2, 2], [2, 1]])),
            "the lines of each order, the highest line first"
        );
        assert_eq!(
            call(&app, &mut tables, "find", json!({"o": 1, "n": 2})),
            Ok(json!([[1, 2]])),
            "find turns the descending value as the entries hold it"
        );
        assert_eq!(
            call(&app, &mut tables, "of_order", json!({"o": 2})),
            Ok(json!([[2, 2], [2, 1]]))
        );
        // A string key part in a descending place: the put is refused (an integer only).
        let refused = call(&app, &mut tables, "put_named", json!({"name": "x"}));
        assert!(refused.is_err(), "{refused:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Forward and backward scans of a table against a model.
// ---------------------------------------------------------------------------------------------

fn in_bounds(key: &Key, low: &Bound<Key>, high: &Bound<Key>) -> bool {
    let above = match low {
        Included(l) => key >= l,
        Excluded(l) => key > l,
        Unbounded => true,
    };
    let below = match high {
        Included(h) => key <= h,
        Excluded(h) => key < h,
        Unbounded => true,
    };
    above && below
}

fn random_bound(rng: &mut Rng, keys: &[Key]) -> Bound<Key> {
    let key = if !keys.is_empty() && rng.below(2) == 0 {
        let key = rng.pick(keys).clone();
        // A prefix of a stored key now and then (a prefix scan's bound).
        let parts = key.parts();
        let n = 1 + rng.below(parts.len() as u64) as usize;
        Key::from_parts(parts[..n].to_vec())
    } else {
        random_key(rng)
    };
    match rng.below(3) {
        0 => Included(key),
        1 => Excluded(key),
        _ => Unbounded,
    }
}

/// Scans with bounds of every kind (included, excluded, unbounded, equal, crossed, prefixes
/// of stored keys), limits from 0, forwards and backwards: exactly the model's rows, in order.
#[test]
fn scans_return_exactly_the_rows_within_their_bounds() {
    let mut rng = Rng(0x0034_0005);
    for round in 0..40 {
        let mut tables = Tables::new(1);
        let mut writes = WriteSet::default();
        let mut model: BTreeMap<Key, i64> = BTreeMap::new();
        let count = [0, 1, 2, 15, 200, 2_000][round % 6];
        for i in 0..count {
            let key = random_key(&mut rng);
            tables
                .put(
                    &mut writes,
                    0,
                    key.clone(),
                    Fields::from_values(&[Dynamic::from_int(i)]),
                    false,
                )
                .expect("put");
            model.insert(key, i);
        }
        writes.clear();
        let keys: Vec<Key> = model.keys().cloned().collect();
        for _ in 0..300 {
            let (low, high) = (random_bound(&mut rng, &keys), random_bound(&mut rng, &keys));
            let reverse = rng.below(2) == 0;
            let limit = *rng.pick(&[0usize, 1, 2, 3, 10, 100_000]);
            let within = model.iter().filter(|(k, _)| in_bounds(k, &low, &high));
            let expected: Vec<(Key, i64)> = if reverse {
                let all: Vec<_> = within.map(|(k, v)| (k.clone(), *v)).collect();
                all.into_iter().rev().take(limit).collect()
            } else {
                within.take(limit).map(|(k, v)| (k.clone(), *v)).collect()
            };
            let got = tables.scan(0, (low.clone(), high.clone()), reverse, limit, |(k, f)| {
                (k.clone(), f.int(0).expect("an integer"))
            });
            assert_eq!(
                got, expected,
                "round {round}: {low:?}..{high:?} reverse {reverse} limit {limit}"
            );
        }
    }
}

const SCAN_MANIFEST: &str = r#"{ "name": "scans", "routes": {}, "tables": { "t": ["v"] } }"#;

const SCAN_SCRIPT: &str = r#"
fn fill(req) { for i in 1..=20 { t.put(i, #{ v: i * 2 }); } }
fn scan(req) { t.scan(req.body.lo, req.body.hi, req.body.n).map(|r| r.key) }
fn scan_rev(req) { t.scan_rev(req.body.lo, req.body.hi, req.body.n).map(|r| r.key) }
fn first(req) { let r = t.first(req.body.lo, req.body.hi); if r == () { -1 } else { r.key } }
fn last(req) { let r = t.last(req.body.lo, req.body.hi); if r == () { -1 } else { r.key } }
fn scan_values(req) { let out = []; for r in t.scan(req.body.lo, req.body.hi, 100) { out.push(r.v); } out }
"#;

/// Scans through a script, compiled and in Rhai: the high bound excluded, `()` unbounded,
/// crossed and equal bounds empty, a limit of 0 nothing.
#[test]
fn script_scans_keep_to_their_bounds() {
    for interpreted in [false, true] {
        let (app, mut tables) = load(SCAN_MANIFEST, SCAN_SCRIPT, interpreted);
        call(&app, &mut tables, "fill", json!({})).expect("fills");
        let cases: &[(&str, Value, Value, i64, Value)] = &[
            ("scan", json!(5), json!(9), 100, json!([5, 6, 7, 8])),
            ("scan", json!(5), json!(5), 100, json!([])),
            ("scan", json!(9), json!(5), 100, json!([])),
            ("scan", json!(null), json!(3), 100, json!([1, 2])),
            ("scan", json!(18), json!(null), 100, json!([18, 19, 20])),
            ("scan", json!(null), json!(null), 3, json!([1, 2, 3])),
            ("scan", json!(5), json!(9), 0, json!([])),
            ("scan", json!(5), json!(9), 2, json!([5, 6])),
            ("scan", json!(21), json!(30), 100, json!([])),
            ("scan", json!(-5), json!(1), 100, json!([])),
            ("scan", json!(-5), json!(2), 100, json!([1])),
            ("scan", json!(0), json!([2, 0]), 100, json!([1, 2])),
            ("scan", json!("a"), json!(null), 100, json!([])),
            ("scan", json!(20), json!("a"), 100, json!([20])),
            ("scan_rev", json!(5), json!(9), 100, json!([8, 7, 6, 5])),
            ("scan_rev", json!(9), json!(5), 100, json!([])),
            ("scan_rev", json!(5), json!(9), 0, json!([])),
            ("scan_rev", json!(null), json!(null), 2, json!([20, 19])),
        ];
        for (handler, lo, hi, n, expected) in cases {
            assert_eq!(
                call(
                    &app,
                    &mut tables,
                    handler,
                    json!({"lo": lo, "hi": hi, "n": n})
                ),
                Ok(expected.clone()),
                "{handler}({lo}, {hi}, {n}) interpreted {interpreted}"
            );
        }
        let ends: &[(&str, Value, Value, Value)] = &[
            ("first", json!(5), json!(9), json!(5)),
            ("first", json!(9), json!(5), json!(-1)),
            ("first", json!(5), json!(5), json!(-1)),
            ("first", json!(20), json!(null), json!(20)),
            ("last", json!(5), json!(9), json!(8)),
            ("last", json!(9), json!(5), json!(-1)),
            ("last", json!(null), json!(null), json!(20)),
        ];
        for (handler, lo, hi, expected) in ends {
            assert_eq!(
                call(&app, &mut tables, handler, json!({"lo": lo, "hi": hi})),
                Ok(expected.clone()),
                "{handler}({lo}, {hi}) interpreted {interpreted}"
            );
        }
        assert_eq!(
            call(&app, &mut tables, "scan_values", json!({"lo": 3, "hi": 6})),
            Ok(json!([6, 8, 10]))
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The fields the indexes watch.
// ---------------------------------------------------------------------------------------------

const FIELDS: usize = 64;

#[derive(Clone, Debug, PartialEq)]
enum Val {
    Unit,
    Int(i64),
    Str(String),
    Float(u64),
}

fn to_dynamic(v: &Val) -> Dynamic {
    match v {
        Val::Unit => Dynamic::UNIT,
        Val::Int(i) => Dynamic::from_int(*i),
        Val::Str(s) => Dynamic::from(ImmutableString::from(s.as_str())),
        Val::Float(bits) => Dynamic::from_float(f64::from_bits(*bits)),
    }
}

fn from_dynamic(d: &Dynamic) -> Val {
    if d.is_unit() {
        Val::Unit
    } else if let Ok(i) = d.as_int() {
        Val::Int(i)
    } else if let Ok(f) = d.as_float() {
        Val::Float(f.to_bits())
    } else if let Some(s) = d.read_lock::<ImmutableString>() {
        Val::Str(s.to_string())
    } else {
        panic!("an unexpected value {d:?}")
    }
}

fn fields_of(row: &[Val]) -> Fields {
    Fields::from_values(&row.iter().map(to_dynamic).collect::<Vec<_>>())
}

fn row_of(fields: &Fields) -> Vec<Val> {
    (0..FIELDS)
        .map(|slot| from_dynamic(&fields.value(slot)))
        .collect()
}

/// Slots the index sets below read, and a few they do not.
const HOT: [usize; 10] = [0, 1, 2, 5, 7, 62, 63, 10, 30, 61];

fn random_val(rng: &mut Rng) -> Val {
    match rng.below(12) {
        0 | 1 => Val::Unit,
        2 => Val::Float(1.5f64.to_bits()),
        3 => Val::Str((*rng.pick(&["", "a\0", "b", LONG])).to_string()),
        4 => Val::Int(*rng.pick(&[i64::MIN, i64::MAX, -1])),
        _ => Val::Int(rng.below(40) as i64),
    }
}

fn random_row(rng: &mut Rng) -> Vec<Val> {
    let mut row = vec![Val::Unit; FIELDS];
    for &slot in &HOT {
        if rng.below(4) != 0 {
            row[slot] = random_val(rng);
        }
    }
    // Mostly storable in every index: floats only now and then.
    for v in row.iter_mut() {
        if matches!(v, Val::Float(_)) && rng.below(3) != 0 {
            *v = Val::Int(rng.below(40) as i64);
        }
    }
    row
}

fn model_key(rng: &mut Rng) -> Key {
    let n = 1 + rng.below(3) as usize;
    Key::from_parts(
        (0..n)
            .map(|_| match rng.below(6) {
                0 => KeyPart::Str((*rng.pick(&["k\0", LONG, "z"])).into()),
                _ => KeyPart::Int(rng.below(5) as i64),
            })
            .collect(),
    )
}

fn def(name: &str, table: u32, sources: &[(IndexSource, bool)], unique: bool) -> IndexDef {
    IndexDef {
        name: name.into(),
        table,
        sources: sources.iter().map(|(s, _)| *s).collect(),
        fields: sources.iter().map(|(s, _)| format!("{s:?}")).collect(),
        descending: sources.iter().map(|(_, d)| *d).collect(),
        unique,
    }
}

fn index_set(which: usize) -> Vec<IndexDef> {
    use IndexSource::{Field as F, KeyPart as K};
    match which {
        0 => vec![
            def("by0", 0, &[(F(0), false)], false),
            def("u63", 0, &[(F(63), false)], true),
            def("k1_f5", 0, &[(K(1), false), (F(5), false)], false),
            def("d62", 0, &[(F(62), true)], false),
            def("t1_k0", 1, &[(K(0), false)], false),
        ],
        1 => vec![
            def("f2", 0, &[(F(2), false)], false),
            def("k2", 0, &[(K(2), false)], true),
            def("t1_63_d1", 1, &[(F(63), false), (F(1), true)], false),
        ],
        2 => vec![
            def("f1", 0, &[(F(1), false)], false),
            def("t2_7", 2, &[(F(7), false)], false),
            def("t2_k0_f0", 2, &[(K(0), false), (F(0), false)], false),
        ],
        3 => vec![def("only_63", 1, &[(F(63), true)], false)],
        _ => vec![],
    }
}

type RowModel = Vec<BTreeMap<Key, Vec<Val>>>;

/// Every row equals the model's, and every index holds exactly the entries that its
/// definition's `values` make of the model's rows.
fn check(tables: &Tables, model: &RowModel, step: usize, what: &str) {
    assert_eq!(tables.table_count(), model.len(), "step {step} ({what})");
    for (table, rows) in model.iter().enumerate() {
        let got: Vec<(Key, Vec<Val>)> = tables
            .rows(table as u32)
            .map(|(k, f)| (k.clone(), row_of(f)))
            .collect();
        let expected: Vec<(Key, Vec<Val>)> =
            rows.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert!(
            got == expected,
            "step {step} ({what}): table {table} rows differ"
        );
    }
    assert!(
        tables.indexes_hold_their_rows(usize::MAX),
        "step {step} ({what}): an index does not hold its rows"
    );
    for index in 0..tables.index_count() {
        let def = tables.index_def(index);
        let mut expected: Vec<(Vec<u8>, Key)> = model[def.table as usize]
            .iter()
            .filter_map(|(key, row)| {
                let fields = fields_of(row);
                expected_entry(def, key, &fields)
                    .expect("a stored row's values are storable")
                    .map(|entry| (entry, key.clone()))
            })
            .collect();
        expected.sort();
        let got: Vec<(Vec<u8>, Key)> = tables
            .index_range(index, Unbounded, Unbounded)
            .map(|(entry, key)| (entry.as_bytes().to_vec(), key))
            .collect();
        assert!(
            got == expected,
            "step {step} ({what}): index {} holds {} entries, expected {}: first difference {:?}",
            def.name,
            got.len(),
            expected.len(),
            got.iter()
                .zip(&expected)
                .find(|(a, b)| a != b)
                .map(|(a, b)| (a.1.clone(), b.1.clone()))
        );
        assert_eq!(tables.index_len(index), expected.len());
    }
}

/// Random puts, inserts, patches (of watched slots, unwatched ones, slot 63 beside a key-part
/// index's bit), deletes, roll-backs to marks and whole, snapshots thawed back, tables added,
/// and indexes rebuilt with other definitions (some of which fail on a duplicate): every
/// index holds exactly its rows' entries throughout.
#[test]
fn indexes_follow_every_change_their_fields_see() {
    for seed in [0x0034_0006u64, 0x9E37_79B9, 12345, 777] {
        run_watched(seed);
    }
}

struct Snap {
    tables: Tables,
    model: RowModel,
}

fn run_watched(seed: u64) {
    let mut rng = Rng(seed);
    let mut tables = Tables::new(2);
    let mut model: RowModel = vec![BTreeMap::new(), BTreeMap::new()];
    tables.set_indexes(index_set(0)).expect("empty tables");
    let mut writes = WriteSet::default();
    let mut call_start = model.clone();
    let mut mark: Option<(usize, RowModel)> = None;
    let mut snaps: Vec<Snap> = Vec::new();
    let (mut refused, mut patched, mut rebuilt) = (0, 0, 0);
    for step in 0..4_000 {
        let table = rng.below(model.len() as u64) as u32;
        let what;
        match rng.below(100) {
            0..=29 => {
                what = "put";
                let key = model_key(&mut rng);
                let row = random_row(&mut rng);
                let must_be_new = rng.below(4) == 0;
                let result = tables.put(
                    &mut writes,
                    table,
                    key.clone(),
                    fields_of(&row),
                    must_be_new,
                );
                match result {
                    Ok(()) => {
                        model[table as usize].insert(key, row);
                    }
                    Err(_) => refused += 1,
                }
            }
            30..=59 => {
                what = "patch";
                let Some(key) = model[table as usize]
                    .keys()
                    .nth(rng.below(model[table as usize].len().max(1) as u64) as usize)
                else {
                    continue;
                };
                let key = key.clone();
                let stored = tables.get(table, &key).expect("the row is there").clone();
                let mut changes = Vec::new();
                let mut mask = 0u64;
                for _ in 0..1 + rng.below(3) {
                    let slot = if rng.below(2) == 0 {
                        *rng.pick(&HOT)
                    } else {
                        rng.below(FIELDS as u64) as usize
                    };
                    let v = random_val(&mut rng);
                    changes.retain(|(s, _)| *s != slot);
                    changes.push((slot, to_dynamic(&v)));
                    mask |= 1 << slot;
                }
                let new = stored.with(&changes);
                let base = match rng.below(3) {
                    0 => None,
                    _ => Some(stored.clone()),
                };
                match tables.patch(&mut writes, table, &key, mask, &new, base.as_ref()) {
                    Ok(_) => {
                        patched += 1;
                        let row = model[table as usize].get_mut(&key).expect("there");
                        for (slot, v) in &changes {
                            row[*slot] = from_dynamic(v);
                        }
                    }
                    Err(_) => refused += 1,
                }
            }
            60..=71 => {
                what = "delete";
                let key = if rng.below(4) == 0 {
                    model_key(&mut rng)
                } else {
                    match model[table as usize].keys().next() {
                        Some(k) => k.clone(),
                        None => continue,
                    }
                };
                let existed = tables.delete(&mut writes, table, key.clone());
                assert_eq!(existed, model[table as usize].remove(&key).is_some());
            }
            72..=77 => {
                what = "end call";
                writes.clear();
                call_start = model.clone();
                mark = None;
            }
            78..=80 => {
                what = "mark";
                mark = Some((writes.mark(), model.clone()));
            }
            81..=83 => {
                what = "roll back to mark";
                if let Some((at, at_model)) = &mark {
                    tables.roll_back_to(&mut writes, *at);
                    model = at_model.clone();
                }
            }
            84..=86 => {
                what = "roll back";
                tables.roll_back(&mut writes);
                model = call_start.clone();
                mark = None;
            }
            87..=89 => {
                what = "snapshot";
                writes.clear();
                call_start = model.clone();
                mark = None;
                if snaps.len() == 4 {
                    snaps.remove(rng.below(4) as usize);
                }
                snaps.push(Snap {
                    tables: tables.snapshot(),
                    model: model.clone(),
                });
            }
            90..=92 => {
                what = "thaw";
                if snaps.is_empty() {
                    continue;
                }
                let snap = &snaps[rng.below(snaps.len() as u64) as usize];
                check(&snap.tables, &snap.model, step, "a snapshot kept");
                tables = snap.tables.thawed();
                model = snap.model.clone();
                writes = WriteSet::default();
                call_start = model.clone();
                mark = None;
            }
            93..=94 => {
                what = "add a table";
                writes.clear();
                if model.len() < 3 {
                    tables.ensure_tables(3);
                    model.push(BTreeMap::new());
                }
                call_start = model.clone();
                mark = None;
            }
            _ => {
                what = "rebuild the indexes";
                writes.clear();
                call_start = model.clone();
                mark = None;
                let mut which = rng.below(5) as usize;
                if which == 2 && model.len() < 3 {
                    which = 4;
                }
                if tables.set_indexes(index_set(which)).is_ok() {
                    rebuilt += 1;
                } else {
                    assert_eq!(tables.index_count(), 0, "a failed build leaves none");
                }
            }
        }
        check(&tables, &model, step, what);
    }
    assert!(
        refused > 20 && patched > 500 && rebuilt > 5,
        "{refused} {patched} {rebuilt}"
    );
}

/// Indexes built on the other tables first, a table added after, and only then an index on
/// it: puts and patches of the new table are indexed (its bits are not missing), and a patch
/// of slot 63 in a table whose only index reads key parts leaves it as it is.
#[test]
fn a_table_added_later_and_slot_63_are_indexed() {
    use IndexSource::{Field as F, KeyPart as K};
    let mut tables = Tables::new(1);
    tables
        .set_indexes(vec![def("k0", 0, &[(K(0), false)], false)])
        .expect("empty");
    let mut writes = WriteSet::default();
    let mut row = vec![Val::Unit; FIELDS];
    row[63] = Val::Int(1);
    tables
        .put(&mut writes, 0, Key::ints(&[1, 2]), fields_of(&row), false)
        .expect("put");
    let stored = tables.get(0, &Key::ints(&[1, 2])).unwrap().clone();
    let new = stored.with(&[(63, Dynamic::from_int(9))]);
    tables
        .patch(
            &mut writes,
            0,
            &Key::ints(&[1, 2]),
            1 << 63,
            &new,
            Some(&stored),
        )
        .expect("patch");
    assert!(tables.indexes_hold_their_rows(usize::MAX));
    assert_eq!(tables.index_len(0), 1);
    tables.roll_back(&mut writes);
    assert_eq!(tables.index_len(0), 0);

    tables.ensure_tables(2);
    tables
        .put(&mut writes, 1, Key::int(5), fields_of(&row), false)
        .expect("put in the new table, no index on it yet");
    writes.clear();
    tables
        .set_indexes(vec![
            def("k0", 0, &[(K(0), false)], false),
            def("t1_63", 1, &[(F(63), true)], false),
        ])
        .expect("builds");
    assert_eq!(tables.index_len(1), 1);
    let stored = tables.get(1, &Key::int(5)).unwrap().clone();
    let new = stored.with(&[(63, Dynamic::from_int(2))]);
    tables
        .patch(&mut writes, 1, &Key::int(5), 1 << 63, &new, None)
        .expect("patch");
    let entries: Vec<Key> = tables
        .index_range(1, Unbounded, Unbounded)
        .map(|(entry, _)| entry.clone())
        .collect();
    assert_eq!(entries, vec![Key::ints(&[!2, 5])]);
    assert!(tables.indexes_hold_their_rows(usize::MAX));
    tables.roll_back(&mut writes);
    let entries: Vec<Key> = tables
        .index_range(1, Unbounded, Unbounded)
        .map(|(entry, _)| entry.clone())
        .collect();
    assert_eq!(entries, vec![Key::ints(&[!1, 5])]);
    // A later build with another slot: the old slot's changes no longer matter, the new one's do.
    tables
        .set_indexes(vec![def("t1_3", 1, &[(F(3), false)], false)])
        .expect("builds");
    assert_eq!(tables.index_len(0), 0, "row 5 has no slot 3");
    let stored = tables.get(1, &Key::int(5)).unwrap().clone();
    let new = stored.with(&[(3, Dynamic::from_int(4))]);
    tables
        .patch(&mut writes, 1, &Key::int(5), 1 << 3, &new, None)
        .expect("patch");
    assert_eq!(tables.index_len(0), 1);
    assert!(tables.indexes_hold_their_rows(usize::MAX));
}

/// A failed build leaves no index and no filter that skips: a later build on the same tables
/// indexes every change again.
#[test]
fn a_failed_build_then_a_good_one_indexes_every_change() {
    use IndexSource::Field as F;
    let mut tables = Tables::new(1);
    let mut writes = WriteSet::default();
    for k in 0..2 {
        tables
            .put(
                &mut writes,
                0,
                Key::int(k),
                Fields::from_values(&[Dynamic::from_int(k), Dynamic::from_int(7)]),
                false,
            )
            .expect("put");
    }
    writes.clear();
    let failed = tables.set_indexes(vec![
        def("f0", 0, &[(F(0), false)], false),
        def("u1", 0, &[(F(1), false)], true),
    ]);
    assert!(failed.is_err(), "two rows of 7 in a unique index");
    assert_eq!(tables.index_count(), 0);
    // Without indexes, a change of any slot costs nothing and breaks nothing.
    let stored = tables.get(0, &Key::int(0)).unwrap().clone();
    tables
        .patch(
            &mut writes,
            0,
            &Key::int(0),
            1,
            &stored.with(&[(0, Dynamic::from_int(3))]),
            None,
        )
        .expect("patch");
    writes.clear();
    tables
        .set_indexes(vec![def("f1", 0, &[(F(1), false)], false)])
        .expect("builds");
    let stored = tables.get(0, &Key::int(1)).unwrap().clone();
    tables
        .patch(
            &mut writes,
            0,
            &Key::int(1),
            2,
            &stored.with(&[(1, Dynamic::from_int(8))]),
            None,
        )
        .expect("patch");
    assert!(tables.indexes_hold_their_rows(usize::MAX));
    let rows: Vec<Key> = tables
        .index_range(0, Unbounded, Unbounded)
        .map(|(_, row)| row)
        .collect();
    assert_eq!(rows, vec![Key::int(0), Key::int(1)], "7 then 8");
}
