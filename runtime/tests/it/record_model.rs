//! The record encoding against a model: random write sets (tables, composite keys of integers
//! and strings, every value kind including i64 extremes, floats by their bits, unicode, nested
//! arrays and maps; puts, patches of existing rows, deletes) are encoded as records, decoded,
//! and applied; the decoded effects must equal the model's effects of the original changes, and
//! so must the state `Tables::apply` builds from them.

use std::collections::BTreeMap;

use proptest::prelude::*;
use pure_lang::{
    Array, Change, Dynamic, Fields, ImmutableString, Key, KeyPart, Map, Schema, TableSchema, Tables,
};
use pure_runtime::record::{decode, encode_writes, Decoded, Mapping};

const TABLES: u32 = 3;
const FIELDS: usize = 6;

/// A value as the model sees it: floats by their bits, so NaN and -0.0 compare exactly.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Val {
    Unit,
    Bool(bool),
    Int(i64),
    Float(u64),
    Str(String),
    Arr(Vec<Val>),
    Map(BTreeMap<String, Val>),
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Part {
    Int(i64),
    Str(String),
}

#[derive(Clone, Debug)]
enum Op {
    Put(u32, Vec<Part>, Vec<Val>),
    Patch(u32, Vec<Part>, u64, Vec<Val>),
    Delete(u32, Vec<Part>),
}

type Model = BTreeMap<(u32, Vec<Part>), Vec<Val>>;

fn int() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(i64::MIN),
        Just(i64::MAX),
        Just(0i64),
        Just(-1i64),
        -3i64..3,
        any::<i64>()
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("ключ".to_string()),
        Just("𝄞\u{0}\"".to_string()),
        "[a-c]{1,3}",
        any::<String>()
    ]
}

fn val() -> impl Strategy<Value = Val> {
    let leaf = prop_oneof![
        Just(Val::Unit),
        any::<bool>().prop_map(Val::Bool),
        int().prop_map(Val::Int),
        prop_oneof![
            any::<f64>(),
            Just(f64::NAN),
            Just(-0.0),
            Just(f64::INFINITY),
            Just(f64::MIN_POSITIVE)
        ]
        .prop_map(|f| Val::Float(f.to_bits())),
        text().prop_map(Val::Str),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Val::Arr),
            prop::collection::btree_map(text(), inner, 0..4).prop_map(Val::Map),
        ]
    })
}

fn key() -> impl Strategy<Value = Vec<Part>> {
    // Few distinct parts, so that changes hit the same rows again.
    let part = prop_oneof![
        prop_oneof![Just(i64::MIN), Just(i64::MAX), -2i64..3].prop_map(Part::Int),
        prop_oneof![Just(""), Just("a"), Just("ключ")].prop_map(|s| Part::Str(s.to_string())),
    ];
    prop::collection::vec(part, 1..6)
}

fn op() -> impl Strategy<Value = Op> {
    let fields = || prop::collection::vec(val(), 0..=FIELDS);
    prop_oneof![
        (0..TABLES, key(), fields()).prop_map(|(t, k, f)| Op::Put(t, k, f)),
        (0..TABLES, key(), 1u64..(1 << FIELDS), fields())
            .prop_map(|(t, k, m, f)| Op::Patch(t, k, m, f)),
        (0..TABLES, key()).prop_map(|(t, k)| Op::Delete(t, k)),
    ]
}

fn to_dynamic(v: &Val) -> Dynamic {
    match v {
        Val::Unit => Dynamic::UNIT,
        Val::Bool(b) => Dynamic::from_bool(*b),
        Val::Int(i) => Dynamic::from_int(*i),
        Val::Float(bits) => Dynamic::from_float(f64::from_bits(*bits)),
        Val::Str(s) => Dynamic::from(ImmutableString::from(s.as_str())),
        Val::Arr(items) => Dynamic::from_array(items.iter().map(to_dynamic).collect::<Array>()),
        Val::Map(map) => {
            let mut m = Map::new();
            for (k, v) in map {
                m.insert(k.as_str().into(), to_dynamic(v));
            }
            Dynamic::from_map(m)
        }
    }
}

fn from_dynamic(d: &Dynamic) -> Val {
    if d.is_unit() {
        Val::Unit
    } else if let Ok(b) = d.as_bool() {
        Val::Bool(b)
    } else if let Ok(i) = d.as_int() {
        Val::Int(i)
    } else if let Ok(f) = d.as_float() {
        Val::Float(f.to_bits())
    } else if let Some(s) = d.read_lock::<ImmutableString>() {
        Val::Str(s.to_string())
    } else if let Some(items) = d.read_lock::<Array>() {
        Val::Arr(items.iter().map(from_dynamic).collect())
    } else if let Some(map) = d.read_lock::<Map>() {
        Val::Map(
            map.iter()
                .map(|(k, v)| (k.to_string(), from_dynamic(v)))
                .collect(),
        )
    } else {
        panic!("not a storable value: {}", d.type_name())
    }
}

fn to_key(parts: &[Part]) -> Key {
    Key::from_parts(
        parts
            .iter()
            .map(|p| match p {
                Part::Int(i) => KeyPart::Int(*i),
                Part::Str(s) => KeyPart::Str(s.as_str().into()),
            })
            .collect(),
    )
}

fn from_key(key: &Key) -> Vec<Part> {
    key.parts()
        .into_iter()
        .map(|p| match p {
            KeyPart::Int(i) => Part::Int(i),
            KeyPart::Str(s) => Part::Str(s.to_string()),
        })
        .collect()
}

fn trimmed(mut row: Vec<Val>) -> Vec<Val> {
    while row.last() == Some(&Val::Unit) {
        row.pop();
    }
    row
}

/// The effect of one change on the model. A patch of a missing row never reaches the log (the
/// live patch fails first), so the generator turns those into puts.
fn model_apply(model: &mut Model, change: &Change) {
    match change {
        Change::Put { table, key, fields } => {
            let row = fields.values().map(|v| from_dynamic(&v)).collect();
            model.insert((*table, from_key(key)), trimmed(row));
        }
        Change::Patch {
            table,
            key,
            mask,
            fields,
        } => {
            let row = model
                .get_mut(&(*table, from_key(key)))
                .expect("patches hit existing rows");
            for slot in (0..64).filter(|s| mask & (1 << s) != 0) {
                if row.len() <= slot {
                    row.resize(slot + 1, Val::Unit);
                }
                row[slot] = fields.get(slot).map_or(Val::Unit, |v| from_dynamic(&v));
            }
            *row = trimmed(std::mem::take(row));
        }
        Change::Delete { table, key } => {
            model.remove(&(*table, from_key(key)));
        }
    }
}

fn tables_as_model(tables: &Tables) -> Model {
    let mut model = Model::new();
    for table in 0..tables.table_count() as u32 {
        for (key, fields) in tables.rows(table) {
            let row = fields.values().map(|v| from_dynamic(&v)).collect();
            model.insert((table, from_key(key)), trimmed(row));
        }
    }
    model
}

/// Builds the changes of `ops` as a handler would log them (patches only of existing rows).
fn changes_of(ops: &[Op]) -> Vec<Change> {
    let mut live = Model::new();
    let mut changes = Vec::new();
    for op in ops {
        let fields = |values: &[Val]| {
            Fields::from_values(&values.iter().map(to_dynamic).collect::<Vec<_>>())
        };
        let change = match op {
            Op::Put(t, k, f) => Change::Put {
                table: *t,
                key: to_key(k),
                fields: fields(f),
            },
            Op::Patch(t, k, mask, f) if live.contains_key(&(*t, k.clone())) => {
                let mut whole = f.clone();
                whole.resize(FIELDS, Val::Unit);
                Change::Patch {
                    table: *t,
                    key: to_key(k),
                    mask: *mask,
                    fields: fields(&whole),
                }
            }
            Op::Patch(t, k, _, f) => Change::Put {
                table: *t,
                key: to_key(k),
                fields: fields(f),
            },
            Op::Delete(t, k) => Change::Delete {
                table: *t,
                key: to_key(k),
            },
        };
        model_apply(&mut live, &change);
        changes.push(change);
    }
    changes
}

fn schema() -> Schema {
    Schema {
        tables: (0..TABLES)
            .map(|t| TableSchema {
                name: format!("t{t}"),
                fields: (0..FIELDS).map(|f| format!("f{f}")).collect(),
                types: Vec::new(),
            })
            .collect(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn records_decode_to_the_effects_they_were_encoded_from(
        ops in prop::collection::vec(op(), 1..40),
        split in 1usize..8,
    ) {
        let schema = schema();
        let mapping = Mapping::identity(&schema);
        let changes = changes_of(&ops);
        let (mut expected, mut decoded_model) = (Model::new(), Model::new());
        let mut tables = Tables::new(TABLES as usize);
        let mut bytes = Vec::new();
        // Several write sets in a row, as the log holds them.
        for write_set in changes.chunks(split) {
            encode_writes(&mut bytes, write_set);
            let Decoded::Writes(decoded) = decode(&bytes, &mapping).expect("decodes") else {
                panic!("a write record decodes as writes");
            };
            prop_assert_eq!(decoded.len(), write_set.len());
            write_set.iter().for_each(|c| model_apply(&mut expected, c));
            decoded.iter().for_each(|c| model_apply(&mut decoded_model, c));
            decoded.into_iter().for_each(|c| tables.apply(c));
            prop_assert_eq!(&decoded_model, &expected);
            prop_assert_eq!(&tables_as_model(&tables), &expected);
        }
    }
}
