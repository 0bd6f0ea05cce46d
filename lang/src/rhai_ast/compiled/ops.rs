//! What compiled code does to values: operators, properties, indexing and methods, each for the
//! types whose Rhai meaning is plain (integers, floats, strings, booleans, arrays, maps, rows,
//! tables). Any other case is `Stop::Fallback`, so that Rhai decides it.

use std::sync::Arc;

use rhai::{Array, Dynamic, ImmutableString, Map};

use super::{Env, Stop};
use crate::script::api::{self, Row, Table};
use crate::script::int_set::IntSet;
use crate::state::schema::TableId;

type Result<T> = std::result::Result<T, Stop>;

/// A binary operator the compiled path evaluates itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    Xor,
}

impl BinOp {
    pub(crate) fn from_name(name: &str) -> Option<BinOp> {
        Some(match name {
            "+" => BinOp::Add,
            "-" => BinOp::Sub,
            "*" => BinOp::Mul,
            "/" => BinOp::Div,
            "%" => BinOp::Rem,
            "==" => BinOp::Eq,
            "!=" => BinOp::Ne,
            "<" => BinOp::Lt,
            "<=" => BinOp::Le,
            ">" => BinOp::Gt,
            ">=" => BinOp::Ge,
            "&" => BinOp::And,
            "|" => BinOp::Or,
            "^" => BinOp::Xor,
            _ => return None,
        })
    }

    fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
        )
    }
}

fn compare<T: PartialOrd>(op: BinOp, x: T, y: T) -> Dynamic {
    Dynamic::from_bool(match op {
        BinOp::Eq => x == y,
        BinOp::Ne => x != y,
        BinOp::Lt => x < y,
        BinOp::Le => x <= y,
        BinOp::Gt => x > y,
        BinOp::Ge => x >= y,
        _ => unreachable!("only comparisons come here"),
    })
}

/// An integer, or any other value: what typed code hands on without putting an integer in a
/// `Dynamic` (no clone, no drop, no test of its type at every step).
pub(crate) type IntOr = std::result::Result<i64, Dynamic>;

/// `value` as an [`IntOr`].
#[inline]
pub(crate) fn int_or(value: Dynamic) -> IntOr {
    match value.as_int() {
        Ok(i) => {
            // An integer owns nothing: dropping it would only call the drop of a `Dynamic`.
            std::mem::forget(value);
            Ok(i)
        }
        Err(_) => Err(value),
    }
}

/// An [`IntOr`] as the `Dynamic` it stands for.
#[inline]
pub(crate) fn from_int_or(value: IntOr) -> Dynamic {
    match value {
        Ok(i) => Dynamic::from_int(i),
        Err(value) => value,
    }
}

/// `a op b` for two integers: an integer, or a comparison's boolean.
#[inline]
pub(crate) fn int_binary(op: BinOp, a: i64, b: i64) -> Result<IntOr> {
    // Rhai checks integer arithmetic: overflow and division by zero are its errors.
    let value = match op {
        BinOp::Add => a.checked_add(b),
        BinOp::Sub => a.checked_sub(b),
        BinOp::Mul => a.checked_mul(b),
        BinOp::Div => a.checked_div(b),
        BinOp::Rem => a.checked_rem(b),
        BinOp::And => Some(a & b),
        BinOp::Or => Some(a | b),
        BinOp::Xor => Some(a ^ b),
        _ => return Ok(Err(compare(op, a, b))),
    };
    value.map(Ok).ok_or(Stop::Fallback)
}

/// `x op y` for operands that may be integers, as [`binary`] decides it.
#[inline]
pub(crate) fn binary_int_or(op: BinOp, x: IntOr, y: IntOr, env: &Env) -> Result<IntOr> {
    match (x, y) {
        (Ok(a), Ok(b)) => int_binary(op, a, b),
        (x, y) => Ok(int_or(binary(op, from_int_or(x), from_int_or(y), env)?)),
    }
}

/// The integer a row's field holds, read from the row without a `Dynamic`: `None` when
/// `target` is not a row, the property is not its table's field, or the field holds another
/// type (the caller then reads it as any value).
#[inline]
pub(crate) fn row_int(target: &Dynamic, property: &Property) -> Option<i64> {
    debug_assert!(!property.is_key, "a row's key is not one of its fields");
    let row = target.read_lock::<Row>()?;
    let slot = (*property.slots.get(row.table as usize)?)?;
    row.int(slot)
}

/// `x op y`, taking both by value so that string concatenation can reuse `x`'s buffer.
pub(crate) fn binary(op: BinOp, x: Dynamic, y: Dynamic, env: &Env) -> Result<Dynamic> {
    if let (Ok(a), Ok(b)) = (x.as_int(), y.as_int()) {
        return int_binary(op, a, b).map(from_int_or);
    }
    if let (Some(a), Some(b)) = (number(&x), number(&y)) {
        // At least one float (both ints were handled above).
        let value = match op {
            BinOp::Add => a + b,
            BinOp::Sub => a - b,
            BinOp::Mul => a * b,
            BinOp::Div | BinOp::Rem if b == 0.0 => return Err(Stop::Fallback),
            BinOp::Div => a / b,
            BinOp::Rem => a % b,
            // Rhai compares floats within a relative epsilon: its rule, not this one.
            _ => return Err(Stop::Fallback),
        };
        return Ok(Dynamic::from_float(value));
    }
    if x.is_string() && y.is_string() {
        if op == BinOp::Add {
            let mut text = x.into_immutable_string().map_err(|_| Stop::Fallback)?;
            let tail = y.into_immutable_string().map_err(|_| Stop::Fallback)?;
            if text.len() + tail.len() > env.limits.string_bytes_max {
                return Err(Stop::Fallback);
            }
            text += tail;
            return Ok(text.into());
        }
        if op.is_comparison() {
            let (a, b) = (
                x.into_immutable_string().map_err(|_| Stop::Fallback)?,
                y.into_immutable_string().map_err(|_| Stop::Fallback)?,
            );
            return Ok(compare(op, a.as_str(), b.as_str()));
        }
        return Err(Stop::Fallback);
    }
    if let (Ok(a), Ok(b)) = (x.as_bool(), y.as_bool()) {
        return Ok(Dynamic::from_bool(match op {
            BinOp::Eq => a == b,
            BinOp::Ne => a != b,
            BinOp::And => a & b,
            BinOp::Or => a | b,
            BinOp::Xor => a ^ b,
            _ => return Err(Stop::Fallback),
        }));
    }
    if let (Ok(a), Ok(b)) = (x.as_char(), y.as_char()) {
        if op.is_comparison() {
            return Ok(compare(op, a, b));
        }
        return Err(Stop::Fallback);
    }
    if x.is_unit() && y.is_unit() {
        return match op {
            BinOp::Eq => Ok(Dynamic::TRUE),
            BinOp::Ne => Ok(Dynamic::FALSE),
            _ => Err(Stop::Fallback),
        };
    }
    // Rhai's built-in rule for two values of different types with no operator registered for
    // them (Pure registers none): only `!=` is true. A string and a char have operators of their
    // own, and two values of the same type (arrays, maps, rows) compare through registered
    // functions: those go to Rhai.
    let mixed_text = (x.is_string() && y.is_char()) || (x.is_char() && y.is_string());
    if x.type_id() != y.type_id() && !mixed_text {
        return match op {
            BinOp::Ne => Ok(Dynamic::TRUE),
            BinOp::Eq | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => Ok(Dynamic::FALSE),
            _ => Err(Stop::Fallback),
        };
    }
    Err(Stop::Fallback)
}

fn number(value: &Dynamic) -> Option<f64> {
    value
        .as_float()
        .ok()
        .or_else(|| value.as_int().ok().map(|i| i as f64))
}

pub(crate) fn negate(x: Dynamic) -> Result<Dynamic> {
    if let Ok(i) = x.as_int() {
        return i.checked_neg().map(Dynamic::from_int).ok_or(Stop::Fallback);
    }
    if let Ok(f) = x.as_float() {
        return Ok(Dynamic::from_float(-f));
    }
    Err(Stop::Fallback)
}

pub(crate) fn not(x: Dynamic) -> Result<Dynamic> {
    x.as_bool()
        .map(|b| Dynamic::from_bool(!b))
        .map_err(|_| Stop::Fallback)
}

pub(crate) fn truth(x: &Dynamic) -> Result<bool> {
    x.as_bool().map_err(|_| Stop::Fallback)
}

/// Appends a value to an interpolated string, for the types whose text is unambiguous.
pub(crate) fn append_text(text: &mut String, value: &Dynamic) -> Result<()> {
    use std::fmt::Write;
    if let Ok(s) = value.as_immutable_string_ref() {
        text.push_str(s.as_str());
    } else if let Ok(i) = value.as_int() {
        let _ = write!(text, "{i}");
    } else if let Ok(c) = value.as_char() {
        text.push(c);
    } else if let Ok(b) = value.as_bool() {
        text.push_str(if b { "true" } else { "false" });
    } else {
        return Err(Stop::Fallback);
    }
    Ok(())
}

/// Items of every nested array, entries of every nested map and bytes of every string inside a
/// value, counted as Rhai counts them for its size limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Sizes {
    arrays: usize,
    maps: usize,
    text: usize,
}

impl Sizes {
    /// What `value` holds, walked in full; past the depth rule's bound, more than any limit
    /// allows, so that the call goes to Rhai (which decides) and this walk never recurses more
    /// than `DEPTH_MAX + 1` times.
    #[inline]
    pub(crate) fn of(value: &Dynamic) -> Sizes {
        // Most values sized are integers: no call for those.
        if value.is_int() {
            return Sizes::default();
        }
        Sizes::within_depth(value, 0)
    }

    /// `enclosing`: the arrays and maps around `value`.
    fn within_depth(value: &Dynamic, enclosing: usize) -> Sizes {
        // Strings first: the leaves of most values (a batch's keys and values) are strings.
        if let Ok(text) = value.as_immutable_string_ref() {
            return Sizes {
                text: text.len(),
                ..Sizes::default()
            };
        }
        if !value.is_array() && !value.is_map() {
            return Sizes::default();
        }
        if enclosing >= crate::state::depth::DEPTH_MAX {
            return Sizes::TOO_DEEP;
        }
        if let Ok(array) = value.as_array_ref() {
            let mut sizes = Sizes {
                arrays: array.len(),
                ..Sizes::default()
            };
            for item in array.iter() {
                sizes = sizes.plus(Sizes::within_depth(item, enclosing + 1));
            }
            return sizes;
        }
        if let Ok(map) = value.as_map_ref() {
            let mut sizes = Sizes {
                maps: map.len(),
                ..Sizes::default()
            };
            for item in map.values() {
                sizes = sizes.plus(Sizes::within_depth(item, enclosing + 1));
            }
            return sizes;
        }
        Sizes::default()
    }

    /// Over every limit: what [`Sizes::of`] gives for a value nested past the depth rule.
    pub(crate) const TOO_DEEP: Sizes = Sizes {
        arrays: usize::MAX,
        maps: usize::MAX,
        text: usize::MAX,
    };

    pub(crate) fn plus(self, other: Sizes) -> Sizes {
        // Saturating, so that a part too deep keeps the whole over every limit.
        Sizes {
            arrays: self.arrays.saturating_add(other.arrays),
            maps: self.maps.saturating_add(other.maps),
            text: self.text.saturating_add(other.text),
        }
    }

    /// Without a part that these sizes include.
    fn minus(self, part: Sizes) -> Sizes {
        Sizes {
            arrays: self.arrays - part.arrays,
            maps: self.maps - part.maps,
            text: self.text - part.text,
        }
    }

    /// What a map of `entries` entries holds, its values holding `values` together.
    /// An array of `items` (not counting what they hold).
    pub(crate) fn array_of(items: usize) -> Sizes {
        Sizes {
            arrays: items,
            ..Sizes::default()
        }
    }

    /// A string of `bytes`.
    pub(crate) fn text(bytes: usize) -> Sizes {
        Sizes {
            text: bytes,
            ..Sizes::default()
        }
    }

    pub(crate) fn map_of(entries: usize, values: Sizes) -> Sizes {
        values.plus(Sizes {
            maps: entries,
            ..Sizes::default()
        })
    }

    /// What a value of these sizes holds after one more array item, itself of sizes `item`.
    pub(crate) fn pushed(self, item: Sizes) -> Sizes {
        self.plus(item).plus(Sizes {
            arrays: 1,
            ..Sizes::default()
        })
    }

    pub(crate) fn within(self, limits: &crate::script::limits::Limits) -> Result<Sizes> {
        if self.arrays > limits.array_items_max
            || self.maps > limits.map_items_max
            || self.text > limits.string_bytes_max
        {
            return Err(Stop::Fallback);
        }
        Ok(self)
    }
}

/// Checks a value that just grew against the size limits, as Rhai checks values after calls and
/// assignments: past a limit the handler goes to Rhai, which stops it with its own error.
pub(crate) fn fits(value: &Dynamic, env: &Env) -> Result<()> {
    Sizes::of(value).within(env.limits).map(|_| ())
}

/// [`fits`] for a local whose sizes may be known (see `Frame::sized`): `known` is what the
/// value holds now if the caller could tell it without a walk. Returns what it holds.
pub(crate) fn fits_known(value: &Dynamic, known: Option<Sizes>, env: &Env) -> Result<Sizes> {
    known.unwrap_or_else(|| Sizes::of(value)).within(env.limits)
}

/// A property name with its field slot in each table, resolved at compile time.
pub(crate) struct Property {
    pub name: ImmutableString,
    /// The name is `key`: a row's key, not one of its fields.
    pub is_key: bool,
    /// Indexed by table id; `None` where the table has no such field.
    pub slots: Arc<[Option<usize>]>,
}

pub(crate) fn row_slot(property: &Property, table: TableId) -> Result<usize> {
    match property.slots.get(table as usize) {
        Some(Some(slot)) => Ok(*slot),
        _ => Err(Stop::Fallback),
    }
}

/// Reads `target.name`. Rows have one property per declared field and `key`; maps answer `()`
/// for a missing property, as Rhai does by default.
pub(crate) fn get_property(target: &Dynamic, property: &Property, env: &Env) -> Result<Dynamic> {
    if let Ok(map) = target.as_map_ref() {
        return Ok(map
            .get(property.name.as_str())
            .cloned()
            .unwrap_or(Dynamic::UNIT));
    }
    if let Some(row) = target.read_lock::<Row>() {
        if property.is_key {
            return Ok(row.key.to_dynamic());
        }
        let slot = row_slot(property, row.table)?;
        return field(&row, slot, env);
    }
    Err(Stop::Fallback)
}

/// `target.name = value`.
///
/// `sizes` are the target's before (when known) and after: an entry's change needs no walk of
/// the rest, so a map built one entry at a time costs its entries, not their square.
pub(crate) fn set_property(
    target: &mut Dynamic,
    property: &Property,
    value: Dynamic,
    sizes: &mut Option<Sizes>,
    env: &Env,
) -> Result<()> {
    let before = sizes.take();
    if target.is_map() {
        let known = {
            let mut map = target.as_map_mut().map_err(|_| Stop::Fallback)?;
            put_entry(&mut map, property.name.as_str(), value, before)
        };
        *sizes = Some(fits_known(target, known, env)?);
        return Ok(());
    }
    if let Some(mut row) = target.write_lock::<Row>() {
        let slot = row_slot(property, row.table)?;
        api::check_field(env.schema, row.table, slot, &value).map_err(|_| Stop::Fallback)?;
        row.set(slot, value);
        // A row holds no sizes of its own (a custom type counts as nothing).
        *sizes = before;
        return Ok(());
    }
    Err(Stop::Fallback)
}

/// The element of an array (negative indices count from the end, as in Rhai).
fn array_position(array: &Array, index: &Dynamic) -> Result<usize> {
    let index = index.as_int().map_err(|_| Stop::Fallback)?;
    let len = array.len() as i64;
    let at = if index < 0 { len + index } else { index };
    if (0..len).contains(&at) {
        Ok(at as usize)
    } else {
        Err(Stop::Fallback)
    }
}

/// Reads `target[index]` for arrays, maps and rows.
pub(crate) fn get_index(target: &Dynamic, index: &Dynamic, env: &Env) -> Result<Dynamic> {
    if let Ok(array) = target.as_array_ref() {
        return Ok(array[array_position(&array, index)?].clone());
    }
    if let Ok(map) = target.as_map_ref() {
        let name = index
            .as_immutable_string_ref()
            .map_err(|_| Stop::Fallback)?;
        return Ok(map.get(name.as_str()).cloned().unwrap_or(Dynamic::UNIT));
    }
    if let Some(row) = target.read_lock::<Row>() {
        let slot = named_slot(index, row.table, env)?;
        return field(&row, slot, env);
    }
    Err(Stop::Fallback)
}

/// A row's field as its getter returns it. Rhai checks the result of every registered function
/// against the size limits, and a row's getters are registered functions.
fn field(row: &Row, slot: usize, env: &Env) -> Result<Dynamic> {
    let value = row.get(slot);
    fits(&value, env)?;
    Ok(value)
}

/// The slot of the field that a string index names, in a row of `table`.
fn named_slot(index: &Dynamic, table: TableId, env: &Env) -> Result<usize> {
    let name = index
        .as_immutable_string_ref()
        .map_err(|_| Stop::Fallback)?;
    env.schema
        .field_slot(table, name.as_str())
        .ok_or(Stop::Fallback)
}

/// Sets a map entry, allocating the key only when it is new. Given the map's sizes before,
/// returns them after.
fn put_entry(map: &mut Map, name: &str, value: Dynamic, before: Option<Sizes>) -> Option<Sizes> {
    let added = before.map(|_| Sizes::of(&value));
    match map.get_mut(name) {
        Some(slot) => {
            let after = before
                .zip(added)
                .map(|(b, a)| b.minus(Sizes::of(slot)).plus(a));
            *slot = value;
            after
        }
        None => {
            map.insert(name.into(), value);
            before.zip(added).map(|(b, a)| {
                b.plus(a).plus(Sizes {
                    maps: 1,
                    ..Sizes::default()
                })
            })
        }
    }
}

/// `target[index] = value`, with the target's `sizes` as for [`set_property`].
pub(crate) fn set_index(
    target: &mut Dynamic,
    index: &Dynamic,
    value: Dynamic,
    sizes: &mut Option<Sizes>,
    env: &Env,
) -> Result<()> {
    let before = sizes.take();
    if target.is_array() {
        let known = {
            let mut array = target.as_array_mut().map_err(|_| Stop::Fallback)?;
            let at = array_position(&array, index)?;
            let after = before.map(|b| b.minus(Sizes::of(&array[at])).plus(Sizes::of(&value)));
            array[at] = value;
            after
        };
        *sizes = Some(fits_known(target, known, env)?);
        return Ok(());
    }
    if target.is_map() {
        let known = {
            let mut map = target.as_map_mut().map_err(|_| Stop::Fallback)?;
            let name = index
                .as_immutable_string_ref()
                .map_err(|_| Stop::Fallback)?;
            put_entry(&mut map, name.as_str(), value, before)
        };
        *sizes = Some(fits_known(target, known, env)?);
        return Ok(());
    }
    if let Some(mut row) = target.write_lock::<Row>() {
        let slot = named_slot(index, row.table, env)?;
        api::check_field(env.schema, row.table, slot, &value).map_err(|_| Stop::Fallback)?;
        row.set(slot, value);
        // A row holds no sizes of its own (a custom type counts as nothing).
        *sizes = before;
        return Ok(());
    }
    Err(Stop::Fallback)
}

/// A method the compiled path knows by name; which type it applies to is decided at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Method {
    Get,
    Exists,
    Insert,
    Put,
    PutAll,
    Update,
    Delete,
    DeleteAll,
    Scan,
    ScanRev,
    /// An index's `find`/`find_rev`, compiled only on a declared index (see `compile.rs`).
    Find,
    FindRev,
    /// A page and the cursor of the next: `#{ rows, next }`.
    ScanPage,
    ScanRevPage,
    FindPage,
    FindRevPage,
    NextId,
    First,
    Last,
    Count,
    Save,
    ToMap,
    Push,
    Len,
    Contains,
    SubString,
    /// A map's `keys()` / `values()`, in the map's (key) order.
    Keys,
    Values,
}

impl Method {
    pub(crate) fn from_name(name: &str) -> Option<Method> {
        Some(match name {
            "get" => Method::Get,
            "exists" => Method::Exists,
            "insert" => Method::Insert,
            "put" => Method::Put,
            "put_all" => Method::PutAll,
            "update" => Method::Update,
            "delete" => Method::Delete,
            "delete_all" => Method::DeleteAll,
            "scan" => Method::Scan,
            "scan_rev" => Method::ScanRev,
            "find" => Method::Find,
            "find_rev" => Method::FindRev,
            "scan_page" => Method::ScanPage,
            "scan_rev_page" => Method::ScanRevPage,
            "find_page" => Method::FindPage,
            "find_rev_page" => Method::FindRevPage,
            "next_id" => Method::NextId,
            "first" => Method::First,
            "last" => Method::Last,
            "count" => Method::Count,
            "save" => Method::Save,
            "to_map" => Method::ToMap,
            "push" => Method::Push,
            "len" => Method::Len,
            "contains" => Method::Contains,
            "sub_string" => Method::SubString,
            "keys" => Method::Keys,
            "values" => Method::Values,
            _ => return None,
        })
    }

    /// Whether the compiled path has a form of this method with `count` arguments. The table
    /// API and `push`/`len` decide at run time (a wrong count is Rhai's error there); the string
    /// methods only have the forms below, so that a handler calling another form (a range
    /// `sub_string(1..3)`, `sub_string(start)`) runs in Rhai rather than falling back each call.
    pub(crate) fn takes(self, count: usize) -> bool {
        match self {
            Method::Contains => count == 1,
            Method::SubString => count == 2,
            Method::Keys | Method::Values => count == 0,
            _ => true,
        }
    }
}

pub(crate) fn api<T>(result: std::result::Result<T, Box<rhai::EvalAltResult>>) -> Result<T> {
    result.map_err(|_| Stop::Fallback)
}

fn key(parts: &[Dynamic]) -> Result<crate::state::key::Key> {
    if parts.is_empty() || parts.len() > 4 {
        return Err(Stop::Fallback);
    }
    api(match parts {
        [a] => api::key_of(&[a]),
        [a, b] => api::key_of(&[a, b]),
        [a, b, c] => api::key_of(&[a, b, c]),
        [a, b, c, d] => api::key_of(&[a, b, c, d]),
        _ => return Err(Stop::Fallback),
    })
}

/// Calls `target.method(args)`. `target_is_copy` says that `target` is a copy Rhai would write
/// back through a property setter (a row's field): a method that changes its target goes to Rhai.
pub(crate) fn call_method(
    method: Method,
    target: &mut Dynamic,
    mut args: Vec<Dynamic>,
    target_is_copy: bool,
    env: &Env,
) -> Result<Dynamic> {
    if let Some(table) = target.read_lock::<Table>().map(|t| *t) {
        return table_method(method, table, args, env);
    }
    if target.is::<IntSet>() {
        return set_method(method, target, &args, target_is_copy, env);
    }
    match method {
        Method::Save | Method::ToMap if target.is::<Row>() => {
            if !args.is_empty() {
                return Err(Stop::Fallback);
            }
            if method == Method::ToMap {
                let row = target.read_lock::<Row>().ok_or(Stop::Fallback)?;
                let map = Dynamic::from_map(api::row_to_map(env.schema, &row));
                fits(&map, env)?;
                return Ok(map);
            }
            if target_is_copy {
                return Err(Stop::Fallback);
            }
            let mut row = target.write_lock::<Row>().ok_or(Stop::Fallback)?;
            row.save().map_err(|_| Stop::Fallback)?;
            Ok(Dynamic::UNIT)
        }
        Method::Push if target.is_array() && args.len() == 1 && !target_is_copy => {
            push(target, args.pop().expect("one argument"), target_is_copy)?;
            // Rhai checks the array pushed into (not what holds it) against the size limits.
            fits(target, env)?;
            Ok(Dynamic::UNIT)
        }
        Method::Len if args.is_empty() => {
            // Rhai checks the receiver of a registered method against the size limits.
            if target.is_array() || target.is_map() {
                fits(target, env)?;
            }
            if let Ok(array) = target.as_array_ref() {
                return Ok(Dynamic::from_int(array.len() as i64));
            }
            if let Ok(map) = target.as_map_ref() {
                return Ok(Dynamic::from_int(map.len() as i64));
            }
            if let Ok(text) = target.as_immutable_string_ref() {
                return Ok(Dynamic::from_int(text.chars().count() as i64));
            }
            Err(Stop::Fallback)
        }
        Method::Contains if args.len() == 1 => contains(target, &args[0], env),
        Method::Keys | Method::Values if args.is_empty() => {
            let map = target.as_map_ref().map_err(|_| Stop::Fallback)?;
            let array: rhai::Array = if method == Method::Keys {
                map.keys()
                    .map(|k| Dynamic::from(rhai::ImmutableString::from(k.as_str())))
                    .collect()
            } else {
                map.values().cloned().collect()
            };
            drop(map);
            let array = Dynamic::from_array(array);
            // As Rhai checks a registered function's result against the size limits.
            fits(&array, env)?;
            Ok(array)
        }
        Method::SubString if args.len() == 2 => {
            let text = text_receiver(target, env)?;
            let start = args[0].as_int().map_err(|_| Stop::Fallback)?;
            let len = args[1].as_int().map_err(|_| Stop::Fallback)?;
            Ok(sub_string(&text, start, len).into())
        }
        _ => Err(Stop::Fallback),
    }
}

/// `set.insert(n)`, `set.contains(n)`, `set.len()` on an `int_set()`, as registered for Rhai.
fn set_method(
    method: Method,
    target: &mut Dynamic,
    args: &[Dynamic],
    target_is_copy: bool,
    env: &Env,
) -> Result<Dynamic> {
    let int = |at: usize| {
        args.get(at)
            .and_then(|a| a.as_int().ok())
            .ok_or(Stop::Fallback)
    };
    match (method, args.len()) {
        (Method::Insert, 1) if !target_is_copy => {
            let n = int(0)?;
            let mut set = target.write_lock::<IntSet>().ok_or(Stop::Fallback)?;
            set.insert(n, env.limits.array_items_max)
                .map(Dynamic::from_bool)
                .map_err(|_| Stop::Fallback)
        }
        (Method::Contains, 1) => {
            let n = int(0)?;
            let set = target.read_lock::<IntSet>().ok_or(Stop::Fallback)?;
            Ok(Dynamic::from_bool(set.contains(n)))
        }
        (Method::Len, 0) => {
            let set = target.read_lock::<IntSet>().ok_or(Stop::Fallback)?;
            Ok(Dynamic::from_int(set.len() as i64))
        }
        _ => Err(Stop::Fallback),
    }
}

/// `target.push(item)` on an array, unchecked: the caller checks the sizes after.
pub(crate) fn push(target: &mut Dynamic, item: Dynamic, target_is_copy: bool) -> Result<()> {
    if target_is_copy {
        return Err(Stop::Fallback);
    }
    let mut array = target.as_array_mut().map_err(|_| Stop::Fallback)?;
    array.push(item);
    Ok(())
}

/// The receiver of a string method. Rhai checks the receiver of a method called on a variable
/// against the size limits; a string the compiled path holds never exceeds them, but a longer
/// one goes to Rhai all the same.
fn text_receiver(target: &Dynamic, env: &Env) -> Result<ImmutableString> {
    let text = target
        .as_immutable_string_ref()
        .map_err(|_| Stop::Fallback)?
        .clone();
    if text.len() > env.limits.string_bytes_max {
        return Err(Stop::Fallback);
    }
    Ok(text)
}

/// `text.contains(s)` and `text.contains(c)` (a substring or a character), and
/// `map.contains(name)` (a key). An array's `contains` compares with `==` through Rhai's function
/// calls, one operation each: it goes to Rhai.
fn contains(target: &Dynamic, needle: &Dynamic, env: &Env) -> Result<Dynamic> {
    if target.is_string() {
        let text = text_receiver(target, env)?;
        return text_contains(&text, needle);
    }
    if target.is_map() {
        fits(target, env)?;
        let name = needle
            .as_immutable_string_ref()
            .map_err(|_| Stop::Fallback)?;
        let map = target.as_map_ref().map_err(|_| Stop::Fallback)?;
        return Ok(Dynamic::from_bool(map.contains_key(name.as_str())));
    }
    Err(Stop::Fallback)
}

fn text_contains(text: &str, needle: &Dynamic) -> Result<Dynamic> {
    if let Ok(part) = needle.as_immutable_string_ref() {
        return Ok(Dynamic::from_bool(text.contains(part.as_str())));
    }
    if let Ok(c) = needle.as_char() {
        return Ok(Dynamic::from_bool(text.contains(c)));
    }
    Err(Stop::Fallback)
}

/// The field `property` of the stored row of `table` at `key`, as a row read from it gives it
/// (an integer as an `i64`), checked against the limits as a field read is; `None` when the
/// table has no such row or no such field (the general way decides those).
pub(crate) fn stored_field(
    table: Table,
    key: &crate::state::key::Key,
    property: &Property,
    env: &Env,
) -> Result<Option<IntOr>> {
    let Ok(slot) = row_slot(property, table.id) else {
        return Ok(None);
    };
    let read = crate::script::context::with_table(table.id, |tables| {
        tables
            .get(table.id, key)
            .map(|fields| fields.int(slot).ok_or_else(|| fields.value(slot)))
    })
    .map_err(|_| Stop::Fallback)?;
    if let Some(Err(value)) = &read {
        fits(value, env)?;
    }
    Ok(read)
}

/// `row.name.contains(needle)` when `target` is a row whose field `name` holds a string as it
/// was read: [`contains`] on the field's text where it lies, with the checks reading it makes
/// (the string against the limits). `None` for anything else, which goes the general way.
pub(crate) fn field_contains(
    target: &Dynamic,
    property: &Property,
    needle: &Dynamic,
    env: &Env,
) -> Option<Result<Dynamic>> {
    let row = target.read_lock::<Row>()?;
    if property.is_key {
        return None;
    }
    let text = row.str(row_slot(property, row.table).ok()?)?;
    if text.len() > env.limits.string_bytes_max {
        return Some(Err(Stop::Fallback));
    }
    Some(text_contains(text, needle))
}

/// `text.sub_string(start, len)` exactly as Rhai 1.27 computes it (`sub_string` in its
/// `string_more.rs`), in characters: an empty text or `len <= 0` gives ""; a negative `start`
/// counts from the end and, before the beginning, is the beginning; a `start` at or past the end
/// gives ""; a `len` past the end gives the rest.
fn sub_string(text: &ImmutableString, start: i64, len: i64) -> ImmutableString {
    if text.is_empty() || len <= 0 {
        return ImmutableString::new();
    }
    let count = text.chars().count();
    let offset = if start < 0 {
        let Ok(back) = usize::try_from(start.unsigned_abs()) else {
            return ImmutableString::new();
        };
        count.saturating_sub(back)
    } else {
        match usize::try_from(start) {
            Ok(start) if start < count => start,
            _ => return ImmutableString::new(),
        }
    };
    let len = usize::try_from(len).map_or(count - offset, |len| len.min(count - offset));
    if len == count {
        return text.clone();
    }
    let begin = byte_len(text, offset);
    let end = begin + byte_len(&text[begin..], len);
    ImmutableString::from(&text[begin..end])
}

/// The bytes of the first `chars` characters of `text` (all of it when it has fewer).
fn byte_len(text: &str, chars: usize) -> usize {
    text.char_indices()
        .nth(chars)
        .map_or(text.len(), |(at, _)| at)
}

pub(crate) fn table_method(
    method: Method,
    table: Table,
    mut args: Vec<Dynamic>,
    env: &Env,
) -> Result<Dynamic> {
    let int = |value: &Dynamic| value.as_int().map_err(|_| Stop::Fallback);
    match (method, args.len()) {
        (Method::Get, _) => api(api::get(table, key(&args)?)),
        (Method::Exists, _) => api(api::exists(table, key(&args)?)).map(Dynamic::from_bool),
        (Method::Delete, _) => api(api::delete(table, key(&args)?)).map(Dynamic::from_bool),
        (Method::Insert | Method::Put, 2..=5) => {
            let row = args.pop().expect("at least two arguments");
            let must_be_new = method == Method::Insert;
            api(api::put(env.schema, table, key(&args)?, row, must_be_new))?;
            Ok(Dynamic::UNIT)
        }
        (Method::PutAll, 1 | 2) => {
            let field = match args.len() {
                2 => Some(args.pop().expect("two arguments").into_immutable_string()),
                _ => None,
            }
            .transpose()
            .map_err(|_| Stop::Fallback)?;
            let rows = args.pop().expect("at least one argument");
            api(api::put_all(env.schema, table, rows, field.as_deref()))?;
            Ok(Dynamic::UNIT)
        }
        (Method::DeleteAll, 1) => {
            let keys = args.pop().expect("one argument");
            api(api::delete_all(table, keys)).map(Dynamic::from_int)
        }
        (Method::Update, 1) => {
            let mut row = args
                .pop()
                .expect("one argument")
                .try_cast::<Row>()
                .ok_or(Stop::Fallback)?;
            if row.table != table.id {
                return Err(Stop::Fallback);
            }
            row.save().map_err(|_| Stop::Fallback)?;
            Ok(Dynamic::UNIT)
        }
        (Method::Scan | Method::ScanRev, 3) => {
            let limit = int(&args[2])?;
            let reverse = method == Method::ScanRev;
            let rows = api(api::scan(
                table,
                std::mem::take(&mut args[0]),
                std::mem::take(&mut args[1]),
                limit,
                reverse,
            ))?;
            fits(&rows, env)?;
            Ok(rows)
        }
        (Method::ScanPage | Method::ScanRevPage, 4) => {
            let limit = int(&args[2])?;
            let after = std::mem::take(&mut args[3]);
            let bounds = (std::mem::take(&mut args[0]), std::mem::take(&mut args[1]));
            let reverse = method == Method::ScanRevPage;
            let page = api(api::scan_page(table, bounds, limit, after, reverse))?;
            fits(&page, env)?;
            Ok(page)
        }
        (Method::First | Method::Last, 2) => {
            let reverse = method == Method::Last;
            api(api::first(
                table,
                std::mem::take(&mut args[0]),
                std::mem::take(&mut args[1]),
                reverse,
            ))
        }
        (Method::Count, 0) => api(api::count(table)).map(Dynamic::from_int),
        (Method::NextId, 0) => api(api::next_id(env.schema, table)).map(Dynamic::from_int),
        _ => Err(Stop::Fallback),
    }
}

/// `table.method(key parts..)` or `table.method(key parts.., row)` for the methods that take a
/// key (`get`, `exists`, `delete`, `insert`, `put`), with a key of integers given as integers:
/// no `Vec` of arguments, no `Dynamic` for a part. `row` is the value `insert` and `put` store.
pub(crate) fn table_key_method(
    method: Method,
    table: Table,
    parts: &[i64],
    row: Option<Dynamic>,
    env: &Env,
) -> Result<Dynamic> {
    let key = crate::state::key::Key::ints(parts);
    match (method, row) {
        (Method::Get, None) => api(api::get(table, key)),
        (Method::Exists, None) => api(api::exists(table, key)).map(Dynamic::from_bool),
        (Method::Delete, None) => api(api::delete(table, key)).map(Dynamic::from_bool),
        (Method::Insert | Method::Put, Some(row)) => {
            let must_be_new = method == Method::Insert;
            api(api::put(env.schema, table, key, row, must_be_new))?;
            Ok(Dynamic::UNIT)
        }
        _ => unreachable!("compiled only for a method that takes a key, with its row if any"),
    }
}

/// `index.method(args)` on a declared index of the table the chain starts with.
pub(crate) fn index_method(
    method: Method,
    index: api::IndexRef,
    mut args: Vec<Dynamic>,
    env: &Env,
) -> Result<Dynamic> {
    let int = |value: &Dynamic| value.as_int().map_err(|_| Stop::Fallback);
    let rows = match (method, args.len()) {
        (Method::Get, 1) => return api(api::index_get(index, args.pop().expect("one argument"))),
        (Method::Count, 0) => return api(api::index_count(index)).map(Dynamic::from_int),
        (Method::Find | Method::FindRev, 2) => {
            let limit = int(&args[1])?;
            let values = std::mem::take(&mut args[0]);
            api(api::index_find(
                index,
                values,
                limit,
                method == Method::FindRev,
            ))?
        }
        (Method::FindPage | Method::FindRevPage, 3) => {
            let limit = int(&args[1])?;
            let after = std::mem::take(&mut args[2]);
            let values = std::mem::take(&mut args[0]);
            let reverse = method == Method::FindRevPage;
            api(api::index_find_page(index, values, limit, after, reverse))?
        }
        (Method::ScanPage | Method::ScanRevPage, 4) => {
            let limit = int(&args[2])?;
            let low = api(api::index_bound(index, &args[0], true))?;
            let high = api(api::index_bound(index, &args[1], false))?;
            let after = std::mem::take(&mut args[3]);
            let reverse = method == Method::ScanRevPage;
            api(api::index_page(index, (low, high), limit, after, reverse))?
        }
        (Method::Scan | Method::ScanRev, 3) => {
            let limit = int(&args[2])?;
            let low = api(api::index_bound(index, &args[0], true))?;
            let high = api(api::index_bound(index, &args[1], false))?;
            api(api::index_rows(
                index,
                low,
                high,
                method == Method::ScanRev,
                limit,
            ))?
        }
        _ => return Err(Stop::Fallback),
    };
    fits(&rows, env)?;
    Ok(rows)
}

/// `type_of(value)`, as Rhai names types (registered names for Pure's types).
pub(crate) fn type_of(value: &Dynamic, env: &Env) -> Dynamic {
    Dynamic::from(ImmutableString::from(
        env.engine.map_type_name(value.type_name()),
    ))
}

/// `parse_int(text)`: Rhai trims the text and parses it in base 10; its error goes to Rhai.
pub(crate) fn parse_int(value: &Dynamic) -> Result<Dynamic> {
    let text = value
        .as_immutable_string_ref()
        .map_err(|_| Stop::Fallback)?;
    text.trim()
        .parse::<i64>()
        .map(Dynamic::from_int)
        .map_err(|_| Stop::Fallback)
}

/// `respond(status, body[, headers])`: an error is Rhai's to report, at the call's position.
pub(crate) fn respond(
    status: &Dynamic,
    body: Dynamic,
    headers: Option<&Dynamic>,
) -> Result<Dynamic> {
    let status = status.as_int().map_err(|_| Stop::Fallback)?;
    let headers = match headers {
        Some(h) => Some(h.read_lock::<Map>().ok_or(Stop::Fallback)?),
        None => None,
    };
    crate::script::respond::respond(status, body, headers.as_deref())
        .map(Dynamic::from)
        .map_err(|_| Stop::Fallback)
}

/// Builds a map literal from its template (every key, unit values) and the evaluated values.
pub(crate) fn fill_map(mut map: Map, keys: &[ImmutableString], values: Vec<Dynamic>) -> Dynamic {
    for (key, value) in keys.iter().zip(values) {
        put_entry(&mut map, key.as_str(), value, None);
    }
    Dynamic::from_map(map)
}

/// Builds a map literal whose keys are distinct from its template (every key, unit values) and
/// the evaluated values: `order[i]` is the value of the template's `i`-th key.
pub(crate) fn place_map(mut map: Map, order: &[usize], mut values: Vec<Dynamic>) -> Dynamic {
    debug_assert_eq!(map.len(), order.len(), "a value for every key");
    for (slot, &at) in map.values_mut().zip(order) {
        *slot = std::mem::take(&mut values[at]);
    }
    Dynamic::from_map(map)
}

/// Puts `value` in `target`, dropping the value it replaces only when that owns something: most
/// locals a statement sets held an integer or nothing.
#[inline]
pub(super) fn put(target: &mut Dynamic, value: Dynamic) {
    discard(std::mem::replace(target, value));
}

/// Drops `value` only when it owns something: a unit or an integer needs no call to drop.
#[inline]
pub(super) fn discard(value: Dynamic) {
    // Neither owns anything (Rhai is built without closures: no value is a shared cell).
    if value.is_unit() || value.is_int() {
        std::mem::forget(value);
    }
}
