//! The API scripts see: table handles, rows, and the errors the API raises.
//!
//! Tables are global constants named as in the manifest (`players.get(id)`), so no handler has to
//! pass a database handle around. A row is a compact custom type: its table, its key, a dirty-field
//! mask and an `Arc` of its field values, read and written through one property per declared field
//! (rows as Rhai maps measured 1.3–1.5x slower, and a row that knows its dirty fields logs
//! only those).

use std::ops::Bound;
use std::sync::Arc;

use rhai::{Dynamic, Engine, EvalAltResult, ImmutableString, Map, Module, Position};

use crate::script::api_error::{api_error, ApiError};
use crate::script::context::{with_table, with_write};
use crate::state::depth::{too_deep, DEPTH_MAX};
use crate::state::key::{key_from_dynamic, Key};
use crate::state::schema::{Schema, TableId, IDS_TABLE};
use crate::state::tables::{Fields, IndexDef};

/// Most rows one scan may return.
pub const SCAN_ROWS_MAX: i64 = 10_000;

/// A handle to a table, as scripts hold it.
#[derive(Clone, Copy, Debug)]
pub struct Table {
    pub id: TableId,
}

/// A row, as scripts hold it: the stored row it was read as, and the values of the fields the
/// script changed since (written into a new stored row by `save`).
#[derive(Clone, Debug)]
pub struct Row {
    pub table: TableId,
    pub key: Key,
    /// Slots changed since the row was read or last saved.
    pub dirty: u64,
    /// The stored row this one was read as (the base `Tables::patch` compares with).
    stored: Fields,
    /// The value of every dirty slot, once each.
    changed: smallvec::SmallVec<[(usize, Dynamic); 4]>,
}

impl Row {
    pub fn new(table: TableId, key: Key, fields: Fields) -> Row {
        Row {
            table,
            key,
            dirty: 0,
            stored: fields,
            changed: smallvec::SmallVec::new(),
        }
    }

    /// The value of `slot` as the script sees it: changed, stored, or unit.
    pub fn get(&self, slot: usize) -> Dynamic {
        if slot < 64 && self.dirty & (1 << slot) != 0 {
            let (_, v) = self
                .changed
                .iter()
                .find(|(s, _)| *s == slot)
                .expect("a dirty slot has its value");
            return v.clone();
        }
        self.stored.value(slot)
    }

    /// The integer in `slot` as the script sees it, if it holds one: [`Row::get`] without
    /// making a `Dynamic`.
    #[inline]
    pub(crate) fn int(&self, slot: usize) -> Option<i64> {
        if slot < 64 && self.dirty & (1 << slot) != 0 {
            return self.get(slot).as_int().ok();
        }
        self.stored.int(slot)
    }

    /// The string in `slot` as the script sees it, if it holds one as it was read: [`Row::get`]
    /// without making a script string (`None` for a slot the script changed).
    #[inline]
    pub(crate) fn str(&self, slot: usize) -> Option<&str> {
        if slot < 64 && self.dirty & (1 << slot) != 0 {
            return None;
        }
        self.stored.str(slot)
    }

    pub(crate) fn set(&mut self, slot: usize, value: Dynamic) {
        if self.dirty & (1 << slot) != 0 {
            let entry = self
                .changed
                .iter_mut()
                .find(|(s, _)| *s == slot)
                .expect("a dirty slot has its value");
            entry.1 = value;
            return;
        }
        self.changed.push((slot, value));
        self.dirty |= 1 << slot;
    }

    pub(crate) fn save(&mut self) -> Result<(), String> {
        if self.dirty == 0 {
            return Ok(());
        }
        let fields = self.stored.with(&self.changed);
        let new = with_write(|tables, writes| {
            tables.patch(
                writes,
                self.table,
                &self.key,
                self.dirty,
                &fields,
                Some(&self.stored),
            )
        })?;
        self.stored = new;
        self.dirty = 0;
        self.changed.clear();
        Ok(())
    }
}

type Fallible<T> = Result<T, Box<EvalAltResult>>;

pub(crate) fn key_of(parts: &[&Dynamic]) -> Fallible<Key> {
    // Integer keys (the common case) are built inline, without allocating.
    let mut ints = [0i64; 4];
    if parts
        .iter()
        .zip(ints.iter_mut())
        .all(|(p, slot)| p.as_int().map(|i| *slot = i).is_ok())
    {
        return Ok(Key::ints(&ints[..parts.len()]));
    }
    if let [only] = parts {
        if let Some(s) = only.read_lock::<ImmutableString>() {
            return Ok(Key::string(&s));
        }
    }
    Key::from_values(parts.iter().copied()).map_err(api_error)
}

pub(crate) fn get(table: Table, key: Key) -> Fallible<Dynamic> {
    let fields = crate::script::context::get_row(table.id, &key).map_err(api_error)?;
    Ok(match fields {
        Some(fields) => Dynamic::from(Row::new(table.id, key, fields)),
        None => {
            note_string_key_miss(table, &key);
            Dynamic::UNIT
        }
    })
}

pub(crate) fn exists(table: Table, key: Key) -> Fallible<bool> {
    let found = with_table(table.id, |t| t.get(table.id, &key).is_some()).map_err(api_error)?;
    if !found {
        note_string_key_miss(table, &key);
    }
    Ok(found)
}

pub(crate) fn delete(table: Table, key: Key) -> Fallible<bool> {
    let probe = key.lone_str_bytes().is_some().then(|| key.clone());
    let found = with_write(|t, w| Ok(t.delete(w, table.id, key))).map_err(api_error)?;
    if let (false, Some(key)) = (found, probe) {
        note_string_key_miss(table, &key);
    }
    Ok(found)
}

/// A key that missed: if it is one string of digits (`"5"`, as a path parameter without a type
/// gives it) and the table has a row at the integer it spells, the call notes it, and its 4xx
/// answer will say so. Costs a search only for such misses.
fn note_string_key_miss(table: Table, key: &Key) {
    let Some(text) = key
        .lone_str_bytes()
        .and_then(|b| std::str::from_utf8(b).ok())
    else {
        return;
    };
    let Some(n) = text.parse::<i64>().ok().filter(|n| n.to_string() == text) else {
        return;
    };
    if with_table(table.id, |t| t.get(table.id, &Key::int(n)).is_some()) == Ok(true) {
        crate::script::world::note_string_key_miss(table.id, text);
    }
}

/// Checks that a value can be stored (and logged): unit, bool, integer, float, string, or arrays
/// and maps of those, nested at most [`DEPTH_MAX`] deep (the rule every value that leaves a
/// script meets, and the decoder of records, images and packed rows follows: a deeper value
/// could be stored but never read back, recovered or exported).
pub(crate) fn check_storable(value: &Dynamic) -> Result<(), String> {
    check_storable_at(value, 0)
}

/// `enclosing`: the arrays and maps around `value`.
fn check_storable_at(value: &Dynamic, enclosing: usize) -> Result<(), String> {
    if value.is_unit() || value.is_bool() || value.is_int() || value.is_float() || value.is_string()
    {
        return Ok(());
    }
    let nested = value.is_array() || value.is_map();
    if nested && enclosing >= DEPTH_MAX {
        return Err(too_deep("a stored value"));
    }
    if let Some(array) = value.read_lock::<rhai::Array>() {
        return array
            .iter()
            .try_for_each(|v| check_storable_at(v, enclosing + 1));
    }
    if let Some(map) = value.read_lock::<Map>() {
        return map
            .values()
            .try_for_each(|v| check_storable_at(v, enclosing + 1));
    }
    if value.is::<crate::script::int_set::IntSet>() {
        return Err(
            "a field cannot hold an int_set(): store its integers (the array it answers as)".into(),
        );
    }
    Err(format!(
        "a field cannot hold a value of type {}",
        value.type_name()
    ))
}

/// Whether `value` may be stored in `slot` of `table`: storable, and of the field's declared type
/// if it has one.
#[inline]
pub(crate) fn check_field(
    schema: &Schema,
    table: TableId,
    slot: usize,
    value: &Dynamic,
) -> Result<(), String> {
    check_storable(value)?;
    schema.table(table).check(slot, value)
}

/// Every field of a new row of a typed table, those it leaves unset included (a required one
/// must be set).
fn check_types(schema: &Schema, table: TableId, fields: &[Dynamic]) -> Result<(), String> {
    let declared = schema.table(table);
    if declared.types.is_empty() {
        return Ok(());
    }
    fields
        .iter()
        .enumerate()
        .try_for_each(|(slot, value)| declared.check(slot, value))
}

fn fields_from_map(schema: &Schema, table: TableId, map: Map) -> Result<Fields, String> {
    let declared = &schema.table(table).fields;
    let mut fields = vec![Dynamic::UNIT; declared.len()];
    for (name, value) in map {
        let Some(slot) = declared.iter().position(|f| f.as_str() == name.as_str()) else {
            return Err(format!(
                "table {} has no field {name:?} (declared: {})",
                schema.table(table).name,
                declared.join(", ")
            ));
        };
        check_storable(&value)?;
        fields[slot] = value;
    }
    check_types(schema, table, &fields)?;
    Ok(Fields::from_values(&fields))
}

/// Fields in declared order (`[a, b]` for fields `a`, `b`): no names to look up.
fn fields_from_array(
    schema: &Schema,
    table: TableId,
    values: rhai::Array,
) -> Result<Fields, String> {
    let declared = &schema.table(table).fields;
    if values.len() > declared.len() {
        return Err(format!(
            "table {} has {} fields, not {} (declared: {})",
            schema.table(table).name,
            declared.len(),
            values.len(),
            declared.join(", ")
        ));
    }
    values.iter().try_for_each(check_storable)?;
    let mut fields = values;
    fields.resize(declared.len(), Dynamic::UNIT);
    check_types(schema, table, &fields)?;
    Ok(Fields::from_values(&fields))
}

/// The fields of a new row: a map of field names, or an array in declared order.
fn fields_from(schema: &Schema, table: TableId, value: Dynamic) -> Result<Fields, String> {
    if value.is_map() {
        return fields_from_map(schema, table, value.cast::<Map>());
    }
    if value.is_array() {
        return fields_from_array(schema, table, value.cast::<rhai::Array>());
    }
    Err(format!(
        "a row is given as a map or an array, not {}",
        value.type_name()
    ))
}

pub(crate) fn put(
    schema: &Schema,
    table: Table,
    key: Key,
    row: Dynamic,
    must_be_new: bool,
) -> Fallible<()> {
    let fields = fields_from(schema, table.id, row).map_err(api_error)?;
    put_fields(table, key, fields, must_be_new)
}

/// `t.next_id()`: an integer no earlier call gave for this table, counting up from 1, or from
/// past the largest integer the table's keys start with when it first gives one (rows imported
/// or written with their own ids). The counter is a row of [`IDS_TABLE`], written with the
/// call's other changes: durable with them, rolled back with them, exported and imported with
/// the tables. A write that throws gives its ids back; a write that commits never gives them
/// again, even if it deletes their rows.
pub(crate) fn next_id(schema: &Schema, table: Table) -> Fallible<i64> {
    let ids = schema
        .table_id(IDS_TABLE)
        .ok_or_else(|| api_error(format!("the app has no {IDS_TABLE} table")))?;
    let name = &schema.table(table.id).name;
    let counter = Key::string(name);
    let next = with_write(|t, w| {
        let stored = t
            .get_for_update(ids, &counter)
            .and_then(|fields| fields.get(0))
            .and_then(|next| next.as_int().ok());
        let id = match stored {
            Some(id) => id,
            None => {
                // The largest key that starts with an integer: a one-part integer key sorts
                // just before the composite keys it starts.
                let high = Bound::Included(Key::ints(&[i64::MAX, i64::MAX, i64::MAX, i64::MAX]));
                let last = t.scan(table.id, (Bound::Unbounded, high), true, 1, |(key, _)| {
                    key.part_refs().next().and_then(|part| match part {
                        crate::state::key::PartRef::Int(n) => Some(n),
                        _ => None,
                    })
                });
                match last.first().copied().flatten() {
                    Some(n) => n
                        .checked_add(1)
                        .ok_or("the table's keys reach the largest integer: no id is left")?,
                    None => 1,
                }
            }
        };
        let after = id
            .checked_add(1)
            .ok_or("next_id(): the ids reach the largest integer: no id is left")?;
        let mut fields = crate::state::fields::FieldsBuilder::new(1);
        fields.set_int(0, after);
        t.put(w, ids, counter, fields.finish(), false)?;
        Ok(id)
    })
    .map_err(api_error)?;
    Ok(next)
}

/// [`put`] of fields already made and checked (see `check_field`).
pub(crate) fn put_fields(
    table: Table,
    key: Key,
    fields: Fields,
    must_be_new: bool,
) -> Fallible<()> {
    with_write(|t, w| t.put(w, table.id, key, fields, must_be_new)).map_err(api_error)
}

/// Entries `put_all` and `delete_all` write between two looks at the call's time budget: they
/// are one operation to Rhai, and a map or an array may hold tens of thousands of entries.
const BULK_CHUNK: usize = 1024;

/// An error once the call has used its time budget: what a long native call checks, as Rhai
/// checks between operations.
fn time_left() -> Fallible<()> {
    if crate::script::context::deadline_passed() {
        let limit = Dynamic::from(crate::script::limits::TIME_LIMIT);
        return Err(EvalAltResult::ErrorTerminated(limit, Position::NONE).into());
    }
    Ok(())
}

/// Runs `write` (which may stop partway with an error) so that it writes all or nothing: on an
/// error the rows it changed are put back, as one failed `put` changes nothing, even when the
/// script catches the error and goes on.
fn all_or_nothing<R>(write: impl FnOnce() -> Fallible<R>) -> Fallible<R> {
    let mark = with_write(|_, w| Ok(w.mark())).map_err(api_error)?;
    let result = write();
    if result.is_err() {
        with_write(|t, w| {
            t.roll_back_to(w, mark);
            Ok(())
        })
        .map_err(api_error)?;
    }
    result
}

/// `t.put_all(rows)` and `t.put_all(values, field)`: one row for each entry of a map, keyed by
/// the entry's name (a string key). Without `field` each entry's value is the row (a map or an
/// array, as for `put`); with it the value is that field's, and the row's other fields are
/// `()`. Rows are written in the map's (key) order, all or none.
pub(crate) fn put_all(
    schema: &Schema,
    table: Table,
    rows: Dynamic,
    field: Option<&str>,
) -> Fallible<()> {
    let Some(rows) = rows.try_cast::<Map>() else {
        return Err(api_error(
            "put_all: the rows are a map from key to row (or to a field's value, with the field's name)",
        ));
    };
    let declared = &schema.table(table.id).fields;
    let slot = match field {
        None => None,
        Some(name) => Some(
            declared
                .iter()
                .position(|f| f.as_str() == name)
                .ok_or_else(|| {
                    api_error(format!(
                        "put_all: table {} has no field {name:?} (declared: {})",
                        schema.table(table.id).name,
                        declared.join(", ")
                    ))
                })?,
        ),
    };
    // A read handler is refused even an empty map (by the mark), as it is any `put`.
    all_or_nothing(|| {
        let mut values = vec![Dynamic::UNIT; declared.len()];
        let mut entries = rows.into_iter();
        while entries.len() > 0 {
            time_left()?;
            with_write(|t, w| {
                for (name, value) in entries.by_ref().take(BULK_CHUNK) {
                    let fields = match slot {
                        Some(slot) => {
                            check_storable(&value)?;
                            values[slot] = value;
                            check_types(schema, table.id, &values)?;
                            Fields::from_values(&values)
                        }
                        None => fields_from(schema, table.id, value)?,
                    };
                    t.put(w, table.id, Key::string(&name), fields, false)?;
                }
                Ok(())
            })
            .map_err(api_error)?;
        }
        Ok(())
    })
}

/// `t.delete_all(keys)`: removes the row of every key in an array (each key as a range bound
/// gives it: an integer, a string, or an array of parts); the number of rows that existed. All
/// of them or none.
pub(crate) fn delete_all(table: Table, keys: Dynamic) -> Fallible<i64> {
    let Some(keys) = keys.try_cast::<rhai::Array>() else {
        return Err(api_error("delete_all: the keys are an array"));
    };
    all_or_nothing(|| {
        let mut deleted = 0;
        for chunk in keys.chunks(BULK_CHUNK) {
            time_left()?;
            with_write(|t, w| {
                for key in chunk {
                    if t.delete(w, table.id, key_from_dynamic(key)?) {
                        deleted += 1;
                    }
                }
                Ok(())
            })
            .map_err(api_error)?;
        }
        Ok(deleted)
    })
}

fn bound(value: &Dynamic, inclusive: bool) -> Fallible<Bound<Key>> {
    if value.is_unit() {
        return Ok(Bound::Unbounded);
    }
    let key = key_from_dynamic(value).map_err(api_error)?;
    Ok(if inclusive {
        Bound::Included(key)
    } else {
        Bound::Excluded(key)
    })
}

/// Checks a scan's limit and the call's time budget, before any row is read: a scan
/// (of a table or an index) is one operation to Rhai but may take milliseconds.
fn scan_allowed(limit: i64) -> Fallible<()> {
    if !(0..=SCAN_ROWS_MAX).contains(&limit) {
        return Err(api_error(format!(
            "scan limit must be 0..={SCAN_ROWS_MAX}, not {limit}"
        )));
    }
    time_left()
}

/// Charges the rows a scan returned to the call's budget of scanned rows.
fn charge_scan_rows(rows: usize) -> Fallible<()> {
    if crate::script::context::take_scan_rows(rows as u64) {
        return Ok(());
    }
    let limit = Dynamic::from(crate::script::limits::SCAN_LIMIT);
    Err(EvalAltResult::ErrorTerminated(limit, Position::NONE).into())
}

/// Up to `limit` rows of `table` from `low` to `high`, each as a script's row value.
fn scan_rows(
    table: Table,
    low: &Dynamic,
    high: &Dynamic,
    limit: i64,
    reverse: bool,
) -> Fallible<Vec<Dynamic>> {
    scan_allowed(limit)?;
    let bounds = (bound(low, true)?, bound(high, false)?);
    let rows = with_table(table.id, |t| {
        t.scan(
            table.id,
            bounds,
            reverse,
            limit as usize,
            |(key, fields)| Dynamic::from(Row::new(table.id, key.clone(), fields.clone())),
        )
    })
    .map_err(api_error)?;
    charge_scan_rows(rows.len())?;
    Ok(rows)
}

pub(crate) fn scan(
    table: Table,
    low: Dynamic,
    high: Dynamic,
    limit: i64,
    reverse: bool,
) -> Fallible<Dynamic> {
    Ok(Dynamic::from_array(scan_rows(
        table, &low, &high, limit, reverse,
    )?))
}

pub(crate) fn first(table: Table, low: Dynamic, high: Dynamic, reverse: bool) -> Fallible<Dynamic> {
    let row = scan_rows(table, &low, &high, 1, reverse)?.pop();
    Ok(row.unwrap_or(Dynamic::UNIT))
}

pub(crate) fn count(table: Table) -> Fallible<i64> {
    with_table(table.id, |tables| tables.len(table.id) as i64).map_err(api_error)
}

/// A handle to a declared index, as scripts hold it (`items.by_category`).
#[derive(Clone, Copy, Debug)]
pub struct IndexRef {
    /// The index's position in the app's declarations, and in `Tables`' indexes.
    pub id: usize,
    pub table: TableId,
}

const NOT_BUILT: &str = "the app's indexes are not built on these tables";

/// Up to `limit` rows of the index's table, in the index's order between `low` and `high`.
pub(crate) fn index_rows(
    index: IndexRef,
    low: Bound<Key>,
    high: Bound<Key>,
    reverse: bool,
    limit: i64,
) -> Fallible<Dynamic> {
    scan_allowed(limit)?;
    let rows = with_table(index.table, |t| {
        if index.id >= t.index_count() {
            return Err(NOT_BUILT.to_string());
        }
        let range = t.index_range(index.id, low, high);
        let row = |(_, key): (&Key, Key)| {
            let fields = t
                .get(index.table, &key)
                .cloned()
                .expect("an entry's row exists");
            Row::new(index.table, key, fields)
        };
        let limit = limit as usize;
        Ok(if reverse {
            range.rev().take(limit).map(row).collect::<Vec<_>>()
        } else {
            range.take(limit).map(row).collect()
        })
    })
    .and_then(|rows| rows)
    .map_err(api_error)?;
    charge_scan_rows(rows.len())?;
    Ok(Dynamic::from_array(
        rows.into_iter().map(Dynamic::from).collect(),
    ))
}

/// `index.find(values, limit)`: the rows whose indexed fields equal `values` (a value, or an
/// array of them for an index on several fields: a prefix of them finds every row that starts
/// so), in their keys' order.
pub(crate) fn index_find(
    index: IndexRef,
    values: Dynamic,
    limit: i64,
    reverse: bool,
) -> Fallible<Dynamic> {
    let prefix = index_key(index, &values)?;
    // The entries that start with the parts of `prefix` are the range [prefix, prefix + FF):
    // every part starts with a code below FF. Comparing bytes alone would not do: a string
    // with a NUL after the same text (`00 FF` escaped) starts with the same bytes.
    let mut past = prefix.as_bytes().to_vec();
    past.push(0xFF);
    let high = Bound::Excluded(Key::from_encoded(&past));
    index_rows(index, Bound::Included(prefix), high, reverse, limit)
}

/// `index.get(values)` on a unique index: the one row with these values, or `()`.
pub(crate) fn index_get(index: IndexRef, values: Dynamic) -> Fallible<Dynamic> {
    let found = with_table(index.table, |t| {
        if index.id >= t.index_count() {
            return Err(NOT_BUILT.to_string());
        }
        let def = t.index_def(index.id);
        if !def.unique {
            return Err(format!(
                "{}.get(): the index is not unique; find(values, limit) gives every row",
                def.name
            ));
        }
        let entry = def.lookup_key(&values)?;
        Ok(t.index_get(index.id, &entry).map(|key| {
            (
                key.clone(),
                t.get(index.table, key)
                    .cloned()
                    .expect("an entry's row exists"),
            )
        }))
    })
    .and_then(|found| found)
    .map_err(api_error)?;
    Ok(found.map_or(Dynamic::UNIT, |(key, fields)| {
        Dynamic::from(Row::new(index.table, key, fields))
    }))
}

/// The key `values` stand for in the index's order (see [`IndexDef::lookup_key`]).
fn index_key(index: IndexRef, values: &Dynamic) -> Fallible<Key> {
    with_table(index.table, |t| match index.id < t.index_count() {
        true => t.index_def(index.id).lookup_key(values),
        false => Err(NOT_BUILT.to_string()),
    })
    .and_then(|key| key)
    .map_err(api_error)
}

/// A bound of a scan of an index: `()` is none.
pub(crate) fn index_bound(
    index: IndexRef,
    value: &Dynamic,
    inclusive: bool,
) -> Fallible<Bound<Key>> {
    if value.is_unit() {
        return Ok(Bound::Unbounded);
    }
    let key = index_key(index, value)?;
    Ok(if inclusive {
        Bound::Included(key)
    } else {
        Bound::Excluded(key)
    })
}

fn register_indexes(engine: &mut Engine, indexes: &[IndexDef]) {
    type D = Dynamic;
    engine.register_type_with_name::<IndexRef>("Index");
    for (id, def) in indexes.iter().enumerate() {
        let (table, name) = (def.table, def.name.clone());
        engine.register_get(
            def.name.as_str(),
            move |t: &mut Table| -> Fallible<IndexRef> {
                if t.id == table {
                    Ok(IndexRef { id, table })
                } else {
                    Err(api_error(format!("{name} is an index of another table")))
                }
            },
        );
    }
    engine.register_fn("scan", |i: &mut IndexRef, lo: D, hi: D, n: i64| {
        let (lo, hi) = (index_bound(*i, &lo, true)?, index_bound(*i, &hi, false)?);
        index_rows(*i, lo, hi, false, n)
    });
    engine.register_fn("scan_rev", |i: &mut IndexRef, lo: D, hi: D, n: i64| {
        let (lo, hi) = (index_bound(*i, &lo, true)?, index_bound(*i, &hi, false)?);
        index_rows(*i, lo, hi, true, n)
    });
    engine.register_fn("find", |i: &mut IndexRef, values: D, n: i64| {
        index_find(*i, values, n, false)
    });
    engine.register_fn("find_rev", |i: &mut IndexRef, values: D, n: i64| {
        index_find(*i, values, n, true)
    });
    engine.register_fn(
        "find_page",
        |i: &mut IndexRef, values: D, n: i64, after: D| {
            index_find_page(*i, values, n, after, false)
        },
    );
    engine.register_fn(
        "find_rev_page",
        |i: &mut IndexRef, values: D, n: i64, after: D| index_find_page(*i, values, n, after, true),
    );
    engine.register_fn(
        "scan_page",
        |i: &mut IndexRef, lo: D, hi: D, n: i64, after: D| {
            let (lo, hi) = (index_bound(*i, &lo, true)?, index_bound(*i, &hi, false)?);
            index_page(*i, (lo, hi), n, after, false)
        },
    );
    engine.register_fn(
        "scan_rev_page",
        |i: &mut IndexRef, lo: D, hi: D, n: i64, after: D| {
            let (lo, hi) = (index_bound(*i, &lo, true)?, index_bound(*i, &hi, false)?);
            index_page(*i, (lo, hi), n, after, true)
        },
    );
    engine.register_fn("get", |i: &mut IndexRef, values: D| index_get(*i, values));
    engine.register_fn("count", |i: &mut IndexRef| index_count(*i));
}

/// A page's limit: at least one row (a page of none would hand back the cursor it was given,
/// and a client would ask again forever), at most a scan's.
fn page_allowed(limit: i64) -> Fallible<()> {
    if !(1..=SCAN_ROWS_MAX).contains(&limit) {
        return Err(api_error(format!(
            "a page's limit must be 1..={SCAN_ROWS_MAX}, not {limit}"
        )));
    }
    time_left()
}

/// The cursor of a page that ends at `key` (a row's key, or an index entry's): the key's
/// bytes in hex, a string a client can carry in a URL and send back.
fn cursor_text(key: &Key) -> Dynamic {
    let mut text = String::with_capacity(key.as_bytes().len() * 2);
    for byte in key.as_bytes() {
        text.push_str(&format!("{byte:02x}"));
    }
    Dynamic::from(ImmutableString::from(text))
}

/// The key `after` stands for: `()` for a first page, else a cursor a page gave. Anything else
/// came from a client that made it up or cut it: a 400, as a handler's `throw` would give, not
/// a 500. A cursor only places the page inside the bounds the handler gives, so a made-up one
/// can skip rows but never reach outside them.
fn cursor_key(after: &Dynamic) -> Fallible<Option<Key>> {
    if after.is_unit() {
        return Ok(None);
    }
    let refused = || {
        let mut error = Map::new();
        error.insert("status".into(), Dynamic::from_int(400));
        error.insert(
            "error".into(),
            Dynamic::from(ImmutableString::from(
                "the page cursor is not one this list gave: pass the \"next\" of the page \
                 before, as it was",
            )),
        );
        Box::new(EvalAltResult::ErrorRuntime(
            Dynamic::from_map(error),
            Position::NONE,
        ))
    };
    let text = after.read_lock::<ImmutableString>().ok_or_else(refused)?;
    if text.len() % 2 != 0 || text.len() > 2 * 64 * 1024 {
        return Err(refused());
    }
    let bytes = (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|_| refused())?;
    Key::from_checked_encoding(&bytes)
        .map(Some)
        .map_err(|_| refused())
}

/// `low` moved past `cursor` if it is behind it.
fn after_cursor(low: Bound<Key>, cursor: Key) -> Bound<Key> {
    match low {
        Bound::Included(l) if l > cursor => Bound::Included(l),
        Bound::Excluded(l) if l > cursor => Bound::Excluded(l),
        _ => Bound::Excluded(cursor),
    }
}

/// `high` moved down to `cursor` if it is past it.
fn before_cursor(high: Bound<Key>, cursor: Key) -> Bound<Key> {
    match high {
        Bound::Included(h) if h < cursor => Bound::Included(h),
        Bound::Excluded(h) if h <= cursor => Bound::Excluded(h),
        _ => Bound::Excluded(cursor),
    }
}

/// The bounds of a page: the handler's, narrowed to what comes after `after`'s cursor in the
/// page's direction. Empty when the cursor is past them.
fn page_bounds(
    (low, high): (Bound<Key>, Bound<Key>),
    after: &Dynamic,
    reverse: bool,
) -> Fallible<Option<(Bound<Key>, Bound<Key>)>> {
    let (low, high) = match cursor_key(after)? {
        None => (low, high),
        Some(cursor) if reverse => (low, before_cursor(high, cursor)),
        Some(cursor) => (after_cursor(low, cursor), high),
    };
    let empty = match (&low, &high) {
        (Bound::Included(l), Bound::Included(h)) => l > h,
        (Bound::Included(l) | Bound::Excluded(l), Bound::Excluded(h))
        | (Bound::Excluded(l), Bound::Included(h)) => l >= h,
        _ => false,
    };
    Ok((!empty).then_some((low, high)))
}

/// `#{ rows: [...], next: cursor }` from up to `limit + 1` rows found, each with the key its
/// cursor would be: `next` is `()` when there was no row past the page.
fn page_map(mut found: Vec<(Key, Dynamic)>, limit: i64) -> Fallible<Dynamic> {
    charge_scan_rows(found.len())?;
    let next = if found.len() > limit as usize {
        found.truncate(limit as usize);
        found
            .last()
            .map_or(Dynamic::UNIT, |(key, _)| cursor_text(key))
    } else {
        Dynamic::UNIT
    };
    let mut page = Map::new();
    page.insert(
        "rows".into(),
        Dynamic::from_array(found.into_iter().map(|(_, row)| row).collect()),
    );
    page.insert("next".into(), next);
    Ok(Dynamic::from_map(page))
}

/// `t.scan_page(low, high, limit, after)` (`reverse`: `scan_rev_page`): a page of a scan and
/// the cursor of the next.
pub(crate) fn scan_page(
    table: Table,
    (low, high): (Dynamic, Dynamic),
    limit: i64,
    after: Dynamic,
    reverse: bool,
) -> Fallible<Dynamic> {
    page_allowed(limit)?;
    let bounds = (bound(&low, true)?, bound(&high, false)?);
    let Some(bounds) = page_bounds(bounds, &after, reverse)? else {
        return page_map(Vec::new(), limit);
    };
    let found = with_table(table.id, |t| {
        t.scan(
            table.id,
            bounds,
            reverse,
            limit as usize + 1,
            |(key, fields)| {
                let row = Row::new(table.id, key.clone(), fields.clone());
                (key.clone(), Dynamic::from(row))
            },
        )
    })
    .map_err(api_error)?;
    page_map(found, limit)
}

/// A page of an index between `low` and `high`, after `after`; the cursor is an entry's key.
pub(crate) fn index_page(
    index: IndexRef,
    bounds: (Bound<Key>, Bound<Key>),
    limit: i64,
    after: Dynamic,
    reverse: bool,
) -> Fallible<Dynamic> {
    page_allowed(limit)?;
    let Some((low, high)) = page_bounds(bounds, &after, reverse)? else {
        return page_map(Vec::new(), limit);
    };
    let found = with_table(index.table, |t| {
        if index.id >= t.index_count() {
            return Err(NOT_BUILT.to_string());
        }
        let range = t.index_range(index.id, low, high);
        let row = |(entry, key): (&Key, Key)| {
            let fields = t
                .get(index.table, &key)
                .cloned()
                .expect("an entry's row exists");
            (
                entry.clone(),
                Dynamic::from(Row::new(index.table, key, fields)),
            )
        };
        let take = limit as usize + 1;
        Ok(if reverse {
            range.rev().take(take).map(row).collect::<Vec<_>>()
        } else {
            range.take(take).map(row).collect()
        })
    })
    .and_then(|found| found)
    .map_err(api_error)?;
    page_map(found, limit)
}

/// `index.find_page(values, limit, after)`: a page of `find`.
pub(crate) fn index_find_page(
    index: IndexRef,
    values: Dynamic,
    limit: i64,
    after: Dynamic,
    reverse: bool,
) -> Fallible<Dynamic> {
    let prefix = index_key(index, &values)?;
    let mut past = prefix.as_bytes().to_vec();
    past.push(0xFF);
    let bounds = (
        Bound::Included(prefix),
        Bound::Excluded(Key::from_encoded(&past)),
    );
    index_page(index, bounds, limit, after, reverse)
}

/// `index.count()`: its entries, one per row whose indexed fields are all set.
pub(crate) fn index_count(index: IndexRef) -> Fallible<i64> {
    with_table(index.table, |t| match index.id < t.index_count() {
        true => Ok(t.index_len(index.id) as i64),
        false => Err(NOT_BUILT.to_string()),
    })
    .and_then(|count| count)
    .map_err(api_error)
}

/// A table handle's methods and the arguments each takes after the table (least, most): the
/// load-time check of calls on tables reads it; a test holds it equal to the registrations
/// below.
pub(crate) const TABLE_METHODS: &[(&str, usize, usize)] = &[
    ("get", 1, 4),
    ("exists", 1, 4),
    ("insert", 2, 5),
    ("put", 2, 5),
    ("put_all", 1, 2),
    ("update", 1, 1),
    ("delete", 1, 4),
    ("delete_all", 1, 1),
    ("scan", 3, 3),
    ("scan_rev", 3, 3),
    ("scan_page", 4, 4),
    ("scan_rev_page", 4, 4),
    ("next_id", 0, 0),
    ("first", 2, 2),
    ("last", 2, 2),
    ("count", 0, 0),
];

/// Registers tables, rows, indexes and their functions on `engine`.
pub(crate) fn register(engine: &mut Engine, schema: &Arc<Schema>, indexes: &[IndexDef]) {
    register_indexes(engine, indexes);
    engine.register_type_with_name::<Table>("Table");
    engine.register_type_with_name::<Row>("Row");
    engine.register_type_with_name::<ApiError>("ApiError");
    engine.register_fn("to_string", |e: &mut ApiError| e.0.clone());
    register_table_reads(engine);
    register_table_writes(engine, schema);
    register_int_keys(engine, schema);
    register_row(engine, schema);

    let mut constants = Module::new();
    for (id, table) in schema.tables.iter().enumerate() {
        if !crate::state::schema::is_hidden(&table.name) {
            constants.set_var(table.name.as_str(), Table { id: id as TableId });
        }
    }
    engine.register_global_module(constants.into());
}

fn register_table_reads(engine: &mut Engine) {
    type D = Dynamic;
    engine.register_fn("get", |t: &mut Table, a: D| get(*t, key_of(&[&a])?));
    engine.register_fn("get", |t: &mut Table, a: D, b: D| {
        get(*t, key_of(&[&a, &b])?)
    });
    engine.register_fn("get", |t: &mut Table, a: D, b: D, c: D| {
        get(*t, key_of(&[&a, &b, &c])?)
    });
    engine.register_fn("get", |t: &mut Table, a: D, b: D, c: D, d: D| {
        get(*t, key_of(&[&a, &b, &c, &d])?)
    });
    engine.register_fn("exists", |t: &mut Table, a: D| exists(*t, key_of(&[&a])?));
    engine.register_fn("exists", |t: &mut Table, a: D, b: D| {
        exists(*t, key_of(&[&a, &b])?)
    });
    engine.register_fn("exists", |t: &mut Table, a: D, b: D, c: D| {
        exists(*t, key_of(&[&a, &b, &c])?)
    });
    engine.register_fn("exists", |t: &mut Table, a: D, b: D, c: D, d: D| {
        exists(*t, key_of(&[&a, &b, &c, &d])?)
    });
    engine.register_fn(
        "scan_page",
        |t: &mut Table, lo: D, hi: D, n: i64, after: D| scan_page(*t, (lo, hi), n, after, false),
    );
    engine.register_fn(
        "scan_rev_page",
        |t: &mut Table, lo: D, hi: D, n: i64, after: D| scan_page(*t, (lo, hi), n, after, true),
    );
    engine.register_fn("scan", |t: &mut Table, lo: D, hi: D, n: i64| {
        scan(*t, lo, hi, n, false)
    });
    engine.register_fn("scan_rev", |t: &mut Table, lo: D, hi: D, n: i64| {
        scan(*t, lo, hi, n, true)
    });
    engine.register_fn("first", |t: &mut Table, lo: D, hi: D| {
        first(*t, lo, hi, false)
    });
    engine.register_fn("last", |t: &mut Table, lo: D, hi: D| {
        first(*t, lo, hi, true)
    });
    engine.register_fn("count", |t: &mut Table| count(*t));
}

fn register_table_writes(engine: &mut Engine, schema: &Arc<Schema>) {
    type D = Dynamic;
    for (name, must_be_new) in [("insert", true), ("put", false)] {
        let s = schema.clone();
        engine.register_fn(name, move |t: &mut Table, a: D, m: D| {
            put(&s, *t, key_of(&[&a])?, m, must_be_new)
        });
        let s = schema.clone();
        engine.register_fn(name, move |t: &mut Table, a: D, b: D, m: D| {
            put(&s, *t, key_of(&[&a, &b])?, m, must_be_new)
        });
        let s = schema.clone();
        engine.register_fn(name, move |t: &mut Table, a: D, b: D, c: D, m: D| {
            put(&s, *t, key_of(&[&a, &b, &c])?, m, must_be_new)
        });
        let s = schema.clone();
        engine.register_fn(name, move |t: &mut Table, a: D, b: D, c: D, d: D, m: D| {
            put(&s, *t, key_of(&[&a, &b, &c, &d])?, m, must_be_new)
        });
    }
    let s = schema.clone();
    engine.register_fn("next_id", move |t: &mut Table| next_id(&s, *t));
    let s = schema.clone();
    engine.register_fn("put_all", move |t: &mut Table, rows: D| {
        put_all(&s, *t, rows, None)
    });
    let s = schema.clone();
    engine.register_fn("put_all", move |t: &mut Table, rows: D, field: &str| {
        put_all(&s, *t, rows, Some(field))
    });
    engine.register_fn("delete_all", |t: &mut Table, keys: D| delete_all(*t, keys));
    engine.register_fn("update", |t: &mut Table, mut row: Row| -> Fallible<()> {
        if row.table != t.id {
            return Err(api_error("update: the row belongs to another table"));
        }
        row.save().map_err(api_error)
    });
    engine.register_fn("delete", |t: &mut Table, a: D| delete(*t, key_of(&[&a])?));
    engine.register_fn("delete", |t: &mut Table, a: D, b: D| {
        delete(*t, key_of(&[&a, &b])?)
    });
    engine.register_fn("delete", |t: &mut Table, a: D, b: D, c: D| {
        delete(*t, key_of(&[&a, &b, &c])?)
    });
    engine.register_fn("delete", |t: &mut Table, a: D, b: D, c: D, d: D| {
        delete(*t, key_of(&[&a, &b, &c, &d])?)
    });
}

/// Overloads with `i64` key parts (and a map or array row) for the common case. Rhai resolves a
/// call by the hash of its argument types, and its resolution cache lives for one handler call:
/// an exact match is one lookup, a match through `Dynamic` parameters tries combinations first.
fn register_int_keys(engine: &mut Engine, schema: &Arc<Schema>) {
    type I = i64;
    engine.register_fn("get", |t: &mut Table, a: I| get(*t, Key::ints(&[a])));
    engine.register_fn("get", |t: &mut Table, a: I, b: I| {
        get(*t, Key::ints(&[a, b]))
    });
    engine.register_fn("get", |t: &mut Table, a: I, b: I, c: I| {
        get(*t, Key::ints(&[a, b, c]))
    });
    engine.register_fn("get", |t: &mut Table, a: I, b: I, c: I, d: I| {
        get(*t, Key::ints(&[a, b, c, d]))
    });
    engine.register_fn("exists", |t: &mut Table, a: I| exists(*t, Key::ints(&[a])));
    engine.register_fn("exists", |t: &mut Table, a: I, b: I| {
        exists(*t, Key::ints(&[a, b]))
    });
    engine.register_fn("delete", |t: &mut Table, a: I| delete(*t, Key::ints(&[a])));
    engine.register_fn("delete", |t: &mut Table, a: I, b: I| {
        delete(*t, Key::ints(&[a, b]))
    });
    engine.register_fn("delete", |t: &mut Table, a: I, b: I, c: I| {
        delete(*t, Key::ints(&[a, b, c]))
    });
    for (name, must_be_new) in [("insert", true), ("put", false)] {
        macro_rules! overload {
            ($row:ty, $($k:ident),+) => {{
                let s = schema.clone();
                engine.register_fn(name, move |t: &mut Table, $($k: I,)+ row: $row| {
                    put(&s, *t, Key::ints(&[$($k),+]), Dynamic::from(row), must_be_new)
                });
            }};
        }
        overload!(Map, a);
        overload!(Map, a, b);
        overload!(Map, a, b, c);
        overload!(Map, a, b, c, d);
        overload!(rhai::Array, a);
        overload!(rhai::Array, a, b);
        overload!(rhai::Array, a, b, c);
        overload!(rhai::Array, a, b, c, d);
    }
}

fn register_row(engine: &mut Engine, schema: &Arc<Schema>) {
    engine.register_get("key", |row: &mut Row| row.key.to_dynamic());
    engine.register_fn("save", |row: &mut Row| row.save().map_err(api_error));
    let s = schema.clone();
    engine.register_fn("to_map", move |row: &mut Row| row_to_map(&s, row));
    let s = schema.clone();
    engine.register_fn("to_string", move |row: &mut Row| {
        format!("{:?}", row_to_map(&s, row))
    });
    let s = schema.clone();
    engine.register_indexer_get(
        move |row: &mut Row, name: ImmutableString| -> Fallible<Dynamic> {
            let slot = s
                .field_slot(row.table, &name)
                .ok_or_else(|| no_field(&s, row.table, &name))?;
            Ok(row.get(slot))
        },
    );
    let s = schema.clone();
    engine.register_indexer_set(
        move |row: &mut Row, name: ImmutableString, value: Dynamic| -> Fallible<()> {
            let slot = s
                .field_slot(row.table, &name)
                .ok_or_else(|| no_field(&s, row.table, &name))?;
            check_field(&s, row.table, slot, &value).map_err(api_error)?;
            row.set(slot, value);
            Ok(())
        },
    );

    let mut names: Vec<&str> = schema
        .tables
        .iter()
        .flat_map(|t| t.fields.iter().map(String::as_str))
        .collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        // The slot of this field name in each table (None where the table lacks it).
        let slots: Arc<[Option<usize>]> = (0..schema.tables.len())
            .map(|t| schema.field_slot(t as TableId, name))
            .collect();
        let (s, field) = (schema.clone(), name.to_string());
        let get_slots = slots.clone();
        engine.register_get(name, move |row: &mut Row| -> Fallible<Dynamic> {
            match get_slots.get(row.table as usize) {
                Some(Some(slot)) => Ok(row.get(*slot)),
                _ => Err(no_field(&s, row.table, &field)),
            }
        });
        let (s, field) = (schema.clone(), name.to_string());
        engine.register_set(name, move |row: &mut Row, value: Dynamic| -> Fallible<()> {
            match slots.get(row.table as usize) {
                Some(Some(slot)) => {
                    check_field(&s, row.table, *slot, &value).map_err(api_error)?;
                    row.set(*slot, value);
                    Ok(())
                }
                _ => Err(no_field(&s, row.table, &field)),
            }
        });
    }
}

fn no_field(schema: &Schema, table: TableId, name: &str) -> Box<EvalAltResult> {
    let table = schema.table(table);
    api_error(format!(
        "table {} has no field {name:?} (declared: {})",
        table.name,
        table.fields.join(", ")
    ))
}

pub(crate) fn row_to_map(schema: &Schema, row: &Row) -> Map {
    let declared = &schema.table(row.table).fields;
    declared
        .iter()
        .enumerate()
        .map(|(slot, name)| (name.as_str().into(), row.get(slot)))
        .collect()
}
