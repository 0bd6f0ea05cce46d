//! The tables against a model: `std::collections::BTreeMap`s changed the same way, under random
//! puts, patches, deletes, roll-backs (whole write sets and back to marks), range and reverse
//! scans, and snapshots taken, read, thawed and dropped at random points. Each snapshot must
//! keep showing the state it was taken of, however the owner's tables change after it; the
//! index on the rows must hold exactly their entries throughout.

use std::collections::BTreeMap;
use std::ops::Bound::{self, Excluded, Included, Unbounded};

use proptest::prelude::*;
use pure_lang::{Dynamic, Fields, IndexDef, IndexSource, Key, Tables, WriteSet};

const TABLES: u32 = 2;

/// A row is `[value, group]`; the index orders table 0's rows by group.
type Model = Vec<BTreeMap<i64, (i64, i64)>>;

#[derive(Clone, Debug)]
enum Op {
    Put {
        table: u32,
        key: i64,
        value: i64,
        group: i64,
        must_be_new: bool,
    },
    /// Sets the value (slot 0) of a row, if it exists.
    Patch {
        table: u32,
        key: i64,
        value: i64,
    },
    Delete {
        table: u32,
        key: i64,
    },
    /// The end of a call that succeeded: its changes stay.
    EndCall,
    Mark,
    RollBackToMark,
    RollBackAll,
    Snapshot,
    /// The owner's tables become a thawed copy of a snapshot (what the runtime does when the
    /// log refuses a group).
    Thaw(usize),
    Drop(usize),
    Check(usize),
    Scan {
        table: u32,
        low: Option<(i64, bool)>,
        high: Option<(i64, bool)>,
        reverse: bool,
        limit: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let table = 0..TABLES;
    let key = 0i64..300;
    let bound = proptest::option::of((0i64..300, any::<bool>()));
    prop_oneof![
        30 => (table.clone(), key.clone(), any::<i64>(), 0i64..8, any::<bool>()).prop_map(
            |(table, key, value, group, must_be_new)| Op::Put { table, key, value, group, must_be_new }
        ),
        10 => (table.clone(), key.clone(), any::<i64>())
            .prop_map(|(table, key, value)| Op::Patch { table, key, value }),
        12 => (table.clone(), key).prop_map(|(table, key)| Op::Delete { table, key }),
        6 => Just(Op::EndCall),
        2 => Just(Op::Mark),
        2 => Just(Op::RollBackToMark),
        2 => Just(Op::RollBackAll),
        4 => Just(Op::Snapshot),
        1 => (0usize..8).prop_map(Op::Thaw),
        2 => (0usize..8).prop_map(Op::Drop),
        3 => (0usize..8).prop_map(Op::Check),
        3 => (table, bound.clone(), bound, any::<bool>(), 0usize..40).prop_map(
            |(table, low, high, reverse, limit)| Op::Scan { table, low, high, reverse, limit }
        ),
    ]
}

fn row(value: i64, group: i64) -> Fields {
    Fields::from_values(&[Dynamic::from_int(value), Dynamic::from_int(group)])
}

fn unpack(fields: &Fields) -> (i64, i64) {
    (
        fields.int(0).expect("slot 0 is an integer"),
        fields.int(1).expect("slot 1 is an integer"),
    )
}

fn bound(b: Option<(i64, bool)>) -> Bound<i64> {
    match b {
        None => Unbounded,
        Some((k, true)) => Included(k),
        Some((k, false)) => Excluded(k),
    }
}

fn key_bound(b: Bound<i64>) -> Bound<Key> {
    match b {
        Unbounded => Unbounded,
        Included(k) => Included(Key::int(k)),
        Excluded(k) => Excluded(Key::int(k)),
    }
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

/// Every row of every table, in order, read forwards and backwards (both ends taken in turn,
/// so that the two meet in the middle), and the index's entries: all must be the model's.
fn assert_holds(tables: &Tables, model: &Model) {
    for table in 0..TABLES {
        let expected: Vec<(i64, (i64, i64))> = model[table as usize]
            .iter()
            .map(|(k, v)| (*k, *v))
            .collect();
        let rows = tables.rows(table);
        assert_eq!(rows.len(), expected.len(), "table {table}: count");
        let got: Vec<_> = rows.map(|(k, f)| (key_int(k), unpack(f))).collect();
        assert_eq!(got, expected, "table {table}: rows ascending");
        let mut backwards: Vec<_> = tables
            .rows(table)
            .rev()
            .map(|(k, f)| (key_int(k), unpack(f)))
            .collect();
        backwards.reverse();
        assert_eq!(backwards, expected, "table {table}: rows descending");
        let mut rows = tables.rows(table);
        let (mut front, mut back) = (Vec::new(), Vec::new());
        loop {
            let left = rows.len();
            let Some(first) = rows.next() else { break };
            front.push((key_int(first.0), unpack(first.1)));
            assert_eq!(rows.len(), left - 1, "the count follows the front");
            if let Some(last) = rows.next_back() {
                back.push((key_int(last.0), unpack(last.1)));
            }
        }
        back.reverse();
        front.extend(back);
        assert_eq!(front, expected, "table {table}: both ends in turn");
        for (key, (value, group)) in &model[table as usize] {
            let stored = tables
                .get(table, &Key::int(*key))
                .expect("a row of the model");
            assert_eq!(unpack(stored), (*value, *group));
        }
    }
    if tables.index_count() == 1 {
        let mut expected: Vec<(i64, i64)> = model[0]
            .iter()
            .map(|(k, (_, group))| (*group, *k))
            .collect();
        expected.sort();
        let got: Vec<(i64, i64)> = tables
            .index_range(0, Unbounded, Unbounded)
            .map(|(entry, row)| {
                let parts: Vec<i64> = entry_ints(entry);
                assert_eq!(parts[1], key_int(&row), "an entry ends with its row's key");
                (parts[0], parts[1])
            })
            .collect();
        assert_eq!(got, expected, "the index holds one entry per row");
        assert_eq!(tables.index_len(0), expected.len());
    }
}

fn key_int(key: &Key) -> i64 {
    key.to_json().as_i64().expect("an integer key")
}

fn entry_ints(entry: &Key) -> Vec<i64> {
    entry
        .to_json()
        .as_array()
        .expect("a composite entry")
        .iter()
        .map(|v| v.as_i64().expect("integer parts"))
        .collect()
}

fn run(ops: Vec<Op>, indexed: bool) {
    let mut tables = Tables::new(TABLES as usize);
    if indexed {
        tables.set_indexes(vec![by_group()]).expect("no rows yet");
    }
    let mut writes = WriteSet::default();
    let mut model: Model = vec![BTreeMap::new(); TABLES as usize];
    // The model as the write set's first change found it, and as a mark found it.
    let mut before_calls = model.clone();
    let mut mark: Option<(usize, Model)> = None;
    let mut snapshots: Vec<(Tables, Model)> = Vec::new();
    for op in ops {
        match op {
            Op::Put {
                table,
                key,
                value,
                group,
                must_be_new,
            } => {
                let exists = model[table as usize].contains_key(&key);
                let result = tables.put(
                    &mut writes,
                    table,
                    Key::int(key),
                    row(value, group),
                    must_be_new,
                );
                assert_eq!(result.is_err(), must_be_new && exists, "{result:?}");
                if result.is_ok() {
                    model[table as usize].insert(key, (value, group));
                }
            }
            Op::Patch { table, key, value } => {
                let base = tables.get(table, &Key::int(key)).cloned();
                let new = base.as_ref().map_or_else(
                    || row(value, 0),
                    |b| b.with(&[(0, Dynamic::from_int(value))]),
                );
                let result =
                    tables.patch(&mut writes, table, &Key::int(key), 1, &new, base.as_ref());
                match model[table as usize].get_mut(&key) {
                    Some(stored) => {
                        assert!(result.is_ok(), "{result:?}");
                        stored.0 = value;
                    }
                    None => assert!(result.is_err(), "no row to patch"),
                }
            }
            Op::Delete { table, key } => {
                let deleted = tables.delete(&mut writes, table, Key::int(key));
                assert_eq!(deleted, model[table as usize].remove(&key).is_some());
            }
            Op::EndCall => {
                writes.clear();
                before_calls = model.clone();
                mark = None;
            }
            Op::Mark => mark = Some((writes.mark(), model.clone())),
            Op::RollBackToMark => {
                if let Some((at, at_model)) = mark.take() {
                    tables.roll_back_to(&mut writes, at);
                    model = at_model;
                }
            }
            Op::RollBackAll => {
                tables.roll_back(&mut writes);
                model = before_calls.clone();
                mark = None;
            }
            Op::Snapshot => {
                snapshots.push((tables.snapshot(), model.clone()));
                if snapshots.len() > 8 {
                    snapshots.remove(0);
                }
            }
            Op::Thaw(at) => {
                if let Some((snapshot, at_model)) = snapshots.get(at % 8) {
                    tables = snapshot.thawed();
                    model = at_model.clone();
                    writes.clear();
                    before_calls = model.clone();
                    mark = None;
                }
            }
            Op::Drop(at) => {
                if at < snapshots.len() {
                    snapshots.remove(at);
                }
            }
            Op::Check(at) => {
                if let Some((snapshot, at_model)) = snapshots.get(at) {
                    assert!(snapshot.is_snapshot());
                    assert_holds(snapshot, at_model);
                }
            }
            Op::Scan {
                table,
                low,
                high,
                reverse,
                limit,
            } => {
                let (low, high) = (bound(low), bound(high));
                // std's range panics on an inverted range; the tables give nothing.
                let inverted = match (low, high) {
                    (Included(l) | Excluded(l), Included(h) | Excluded(h)) => {
                        l > h
                            || (l == h
                                && !(matches!(low, Included(_)) && matches!(high, Included(_))))
                    }
                    _ => false,
                };
                let expected: Vec<(i64, (i64, i64))> = if inverted {
                    Vec::new()
                } else {
                    let range = model[table as usize]
                        .range((low, high))
                        .map(|(k, v)| (*k, *v));
                    if reverse {
                        range.rev().take(limit).collect()
                    } else {
                        range.take(limit).collect()
                    }
                };
                let got: Vec<_> = tables.scan(
                    table,
                    (key_bound(low), key_bound(high)),
                    reverse,
                    limit,
                    |(k, f)| (key_int(k), unpack(f)),
                );
                assert_eq!(got, expected, "scan {low:?}..{high:?} reverse {reverse}");
            }
        }
        assert!(!tables.is_snapshot(), "the owner's tables stay live");
        tables.check_trees();
    }
    assert_holds(&tables, &model);
    assert!(tables.indexes_hold_their_rows(usize::MAX));
    for (snapshot, at_model) in &snapshots {
        assert_holds(snapshot, at_model);
        snapshot.check_trees();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn tables_hold_what_the_model_holds(ops in proptest::collection::vec(op(), 1..600)) {
        run(ops, false);
    }

    #[test]
    fn indexed_tables_hold_what_the_model_holds(ops in proptest::collection::vec(op(), 1..600)) {
        run(ops, true);
    }
}

/// Snapshots taken between long runs of changes each keep their own state: nodes the owner
/// copies after a snapshot are never the ones the snapshot reads.
#[test]
fn each_snapshot_keeps_its_state_while_the_owner_rewrites_every_row() {
    let mut tables = Tables::new(1);
    let mut writes = WriteSet::default();
    let mut snapshots = Vec::new();
    for round in 0..20i64 {
        for key in 0..2_000 {
            tables
                .put(&mut writes, 0, Key::int(key), row(round, 0), false)
                .expect("a put");
        }
        writes.clear();
        snapshots.push((round, tables.snapshot()));
    }
    for (round, snapshot) in &snapshots {
        assert_eq!(snapshot.len(0), 2_000);
        assert!(
            snapshot.rows(0).all(|(_, f)| f.int(0) == Some(*round)),
            "round {round}"
        );
    }
}

/// A backward walk of a range stops at its lower bound, whichever bound it is (concread's own
/// iterator went on past `Excluded` to the first row of the table).
#[test]
fn backward_scans_stop_at_their_lower_bound() {
    let mut tables = Tables::new(1);
    let mut writes = WriteSet::default();
    for key in (0..300).step_by(3) {
        tables
            .put(&mut writes, 0, Key::int(key), row(key, 0), false)
            .expect("a put");
    }
    for low in 0..300 {
        for (bound, inclusive) in [
            (Included(Key::int(low)), true),
            (Excluded(Key::int(low)), false),
        ] {
            let got: Vec<i64> =
                tables.scan(0, (bound, Unbounded), true, 1_000, |(k, _)| key_int(k));
            let expected: Vec<i64> = (0..100)
                .rev()
                .map(|k| k * 3)
                .filter(|k| if inclusive { *k >= low } else { *k > low })
                .collect();
            assert_eq!(got, expected, "from {low} (inclusive: {inclusive}) down");
        }
    }
}
