//! An answer's JSON text ([`Json`]), written once, straight from the script's value: no
//! `serde_json::Value` between the handler's value and the bytes the client reads.
//!
//! The text is the one `serde_json` gave for the same value as a `Value` before (research note
//! 028): object keys in byte order (a script's map keeps them so, and a row's declared fields are
//! sorted), serde_json's escapes, integers in decimal, floats as its shortest form and non-finite
//! floats as `null`. It is kept in chunks of [`JSON_CHUNK`] bytes, so that a large answer takes no
//! one large allocation and the HTTP layer hands it out a chunk at a time.
//!
//! It must not know HTTP: the chunks are plain bytes.

use std::fmt;
use std::io::{self, Write};

use rhai::{Dynamic, ImmutableString};
use serde_json::Value;

use crate::script::api::{Row, Table};
use crate::script::api_error::ApiError;
use crate::script::int_set::IntSet;
use crate::state::depth::{too_deep, DEPTH_MAX};
use crate::state::schema::Schema;

/// The size of the chunks of a [`Json`]: each but the last is full.
pub const JSON_CHUNK: usize = 64 << 10;

/// JSON text, in chunks.
///
/// Invariants: every chunk but the last holds exactly [`JSON_CHUNK`] bytes; the text is one JSON
/// value (what [`Json::write_value`] or [`Json::from_value`] wrote).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Json {
    full: Vec<Vec<u8>>,
    /// Grows as a `Vec` does until it is a chunk; the next ones are allocated whole.
    current: Vec<u8>,
}

impl Json {
    /// `null`.
    pub fn null() -> Json {
        Json {
            full: Vec::new(),
            current: b"null".to_vec(),
        }
    }

    /// The text of `value`, as serde_json writes it.
    pub fn from_value(value: &Value) -> Json {
        let mut json = Json::empty();
        serde_json::to_writer(&mut json, value).expect("a serde_json::Value always serializes");
        json
    }

    /// The text of a script's value (see the module doc for what it is). Fails for values that
    /// have no JSON form (function pointers, table handles), and for a value nested deeper than
    /// the depth rule allows, found at the first level past it: the writer never recurses more
    /// than `DEPTH_MAX + 1` times, however deep a handler built its answer.
    pub fn write_value(value: &Dynamic, schema: &Schema) -> Result<Json, String> {
        let mut json = Json::empty();
        write(&mut json, value, schema, 0)?;
        Ok(json)
    }

    pub(crate) fn empty() -> Json {
        Json {
            full: Vec::new(),
            // What serde_json::to_vec starts with: most answers fit, with one allocation.
            current: Vec::with_capacity(128),
        }
    }

    /// Empty, with room for `bytes` (up to a chunk) before its first allocation grows: for a
    /// writer that knows about how long its text will be.
    pub(crate) fn with_room(bytes: usize) -> Json {
        Json {
            full: Vec::new(),
            current: Vec::with_capacity(bytes.clamp(128, JSON_CHUNK)),
        }
    }

    /// Appends `other`'s text.
    pub(crate) fn append(&mut self, other: &Json) {
        for chunk in &other.full {
            self.put(chunk);
        }
        self.put(&other.current);
    }

    /// The text's length in bytes.
    pub fn len(&self) -> usize {
        self.full.len() * JSON_CHUNK + self.current.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_null(&self) -> bool {
        self.full.is_empty() && self.current == b"null"
    }

    /// The chunks, in order; none is empty but the text `""`'s, which is never written.
    pub fn into_chunks(self) -> impl Iterator<Item = Vec<u8>> {
        let current = (!self.current.is_empty()).then_some(self.current);
        self.full.into_iter().chain(current)
    }

    /// The text in one piece.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.len());
        for chunk in &self.full {
            bytes.extend_from_slice(chunk);
        }
        bytes.extend_from_slice(&self.current);
        bytes
    }

    /// The value the text holds (for tests and for the benchmarks' checks: the server never
    /// reads its answers back).
    pub fn to_value(&self) -> Value {
        let bytes = self.to_bytes();
        let text = std::str::from_utf8(&bytes).expect("an answer's text is UTF-8");
        crate::state::depth::parse_json(text)
            .expect("an answer's text is one JSON value within the depth rule")
    }

    /// Past the end of the chunk being filled: outside the writer's inlined path.
    #[cold]
    #[inline(never)]
    fn spill(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.current.len() == JSON_CHUNK {
                let full = std::mem::replace(&mut self.current, Vec::with_capacity(JSON_CHUNK));
                self.full.push(full);
            }
            let taken = bytes.len().min(JSON_CHUNK - self.current.len());
            self.current.extend_from_slice(&bytes[..taken]);
            bytes = &bytes[taken..];
        }
    }

    #[inline]
    pub(crate) fn put(&mut self, bytes: &[u8]) {
        if bytes.len() <= JSON_CHUNK - self.current.len() {
            self.current.extend_from_slice(bytes);
        } else {
            self.spill(bytes);
        }
    }
}

impl Write for Json {
    #[inline]
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.put(bytes);
        Ok(bytes.len())
    }

    /// serde_json writes a token at a time: the common case, room in the chunk being filled,
    /// must cost what a `Vec`'s does.
    #[inline]
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.put(bytes);
        Ok(())
    }

    #[inline]
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The text (lossily, for a text cut inside a character only at a chunk's end, which never
/// happens: each chunk is shown on its own).
impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Json({})", String::from_utf8_lossy(&self.to_bytes()))
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.to_bytes()))
    }
}

/// Text equals a value when it holds that value.
impl PartialEq<Value> for Json {
    fn eq(&self, other: &Value) -> bool {
        self.to_value() == *other
    }
}

/// A scalar's text, as serde_json writes it.
fn scalar<T: serde::Serialize + ?Sized>(out: &mut Json, value: &T) {
    serde_json::to_writer(out, value).expect("writing to memory never fails");
}

/// Whether any byte of `bytes` is one JSON escapes: a control character, `"` or `\\`. Eight
/// bytes at a time, with the usual test for a zero byte in a word (a byte below 0x20 is one
/// whose top three bits are zero; `"` and `\\` are zero bytes after an exclusive or).
#[inline]
fn needs_escape(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS != 0;
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let x = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        if has_zero(x & 0xE0E0_E0E0_E0E0_E0E0)
            || has_zero(x ^ (ONES * b'"' as u64))
            || has_zero(x ^ (ONES * b'\\' as u64))
        {
            return true;
        }
    }
    words
        .remainder()
        .iter()
        .any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

/// A string's text, as serde_json writes it. Most strings (every key a script writes, most
/// values) need no escape: they are copied whole, after a check that reads every byte without
/// a branch; the others go through serde_json's escapes.
pub(crate) fn string(out: &mut Json, text: &str) {
    if needs_escape(text.as_bytes()) {
        scalar(out, text);
        return;
    }
    out.put(b"\"");
    out.put(text.as_bytes());
    out.put(b"\"");
}

/// An integer's text, as serde_json writes it (with the same `itoa`), without its serializer.
#[inline]
pub(crate) fn int(out: &mut Json, i: i64) {
    out.put(itoa::Buffer::new().format(i).as_bytes());
}

/// `enclosing`: the arrays, maps and rows around `value`. The most common cases first
/// (integers, strings, maps, arrays: an answer's values), then the rest in `value::to_json`'s
/// order, so that a value with no JSON form fails with the same message.
pub(crate) fn write(
    out: &mut Json,
    value: &Dynamic,
    schema: &Schema,
    enclosing: usize,
) -> Result<(), String> {
    if let Ok(i) = value.as_int() {
        int(out, i);
        return Ok(());
    }
    if let Some(s) = value.read_lock::<ImmutableString>() {
        string(out, s.as_str());
        return Ok(());
    }
    if let Ok(fields) = value.as_map_ref() {
        if enclosing >= DEPTH_MAX {
            return Err(too_deep("the value"));
        }
        out.put(b"{");
        for (n, (name, item)) in fields.iter().enumerate() {
            if n > 0 {
                out.put(b",");
            }
            string(out, name.as_str());
            out.put(b":");
            write(out, item, schema, enclosing + 1)?;
        }
        out.put(b"}");
        return Ok(());
    }
    if let Ok(items) = value.as_array_ref() {
        if enclosing >= DEPTH_MAX {
            return Err(too_deep("the value"));
        }
        out.put(b"[");
        for (n, item) in items.iter().enumerate() {
            if n > 0 {
                out.put(b",");
            }
            write(out, item, schema, enclosing + 1)?;
        }
        out.put(b"]");
        return Ok(());
    }
    if value.is_unit() {
        out.put(b"null");
        return Ok(());
    }
    if let Ok(b) = value.as_bool() {
        out.put(if b { b"true" } else { b"false" });
        return Ok(());
    }
    if let Ok(f) = value.as_float() {
        scalar(out, &f);
        return Ok(());
    }
    if let Ok(c) = value.as_char() {
        scalar(out, &c);
        return Ok(());
    }
    let nested = value.is::<Row>() || value.is::<IntSet>();
    if nested && enclosing >= DEPTH_MAX {
        return Err(too_deep("the value"));
    }
    if let Some(set) = value.read_lock::<IntSet>() {
        out.put(b"[");
        for (n, item) in set.iter().enumerate() {
            if n > 0 {
                out.put(b",");
            }
            int(out, item);
        }
        out.put(b"]");
        return Ok(());
    }
    if let Some(row) = value.read_lock::<Row>() {
        return write_row(out, &row, schema, enclosing + 1);
    }
    if let Some(error) = value.read_lock::<ApiError>() {
        scalar(out, error.0.as_str());
        return Ok(());
    }
    if let Some(table) = value.read_lock::<Table>() {
        return Err(format!(
            "a table ({}) has no JSON form",
            schema.table(table.id).name
        ));
    }
    Err(format!(
        "a value of type {} has no JSON form",
        value.type_name()
    ))
}

/// A row's declared fields as an object, by name in byte order (as an object's keys are);
/// `enclosing` counts the object itself.
fn write_row(out: &mut Json, row: &Row, schema: &Schema, enclosing: usize) -> Result<(), String> {
    let declared = &schema.table(row.table).fields;
    let mut order: Vec<usize> = (0..declared.len()).collect();
    order.sort_unstable_by(|&a, &b| declared[a].cmp(&declared[b]));
    out.put(b"{");
    for (n, &slot) in order.iter().enumerate() {
        if n > 0 {
            out.put(b",");
        }
        string(out, declared[slot].as_str());
        out.put(b":");
        write(out, &row.get(slot), schema, enclosing)?;
    }
    out.put(b"}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_escape_test_finds_every_byte_json_escapes_wherever_it_is() {
        let naive = |bytes: &[u8]| bytes.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\');
        for len in 0..20 {
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = b;
                    assert_eq!(
                        needs_escape(&bytes),
                        naive(&bytes),
                        "{b:#x} at {at} of {len}"
                    );
                }
            }
        }
        // Neighbours that borrow across bytes in the word test: no false finding.
        for bytes in [
            &[0x21u8, 0x20, 0x5d, 0x23, 0x5b, 0x80, 0xff, 0x21][..],
            b"\x01",
        ] {
            assert_eq!(needs_escape(bytes), naive(bytes), "{bytes:?}");
        }
    }
    use crate::script::value::to_json;
    use crate::state::fields::Fields;
    use crate::state::key::{Key, KeyPart};
    use crate::state::schema::TableSchema;
    use proptest::prelude::*;

    /// Two tables, one with fields declared out of byte order, so that a row's object must be
    /// sorted.
    fn schema() -> Schema {
        Schema {
            tables: vec![
                TableSchema {
                    name: "t".into(),
                    fields: vec!["zeta".into(), "alpha".into(), "Mid".into(), "b_2".into()],
                    types: Vec::new(),
                },
                TableSchema {
                    name: "u".into(),
                    fields: vec![],
                    types: Vec::new(),
                },
            ],
        }
    }

    fn scalar_value() -> impl Strategy<Value = Dynamic> {
        prop_oneof![
            Just(Dynamic::UNIT),
            any::<bool>().prop_map(Dynamic::from_bool),
            any::<i64>().prop_map(Dynamic::from_int),
            prop_oneof![
                any::<f64>(),
                Just(f64::NAN),
                Just(f64::INFINITY),
                Just(-0.0),
                Just(f64::MIN_POSITIVE),
                Just(1e300),
                Just(5e-324)
            ]
            .prop_map(Dynamic::from_float),
            // Quotes, backslashes, control characters, non-ASCII and astral characters.
            "[a-z\"\\\\\u{0}-\u{1f}\u{7f}é☃😀 ]{0,12}"
                .prop_map(|s| Dynamic::from(ImmutableString::from(s))),
            any::<char>().prop_map(Dynamic::from_char),
            Just(Dynamic::from(ApiError("an \"error\"\n".into()))),
        ]
    }

    fn any_value() -> impl Strategy<Value = Dynamic> {
        scalar_value().prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Dynamic::from_array),
                proptest::collection::vec(("[a-zA-Z_\"é ]{0,6}", inner.clone()), 0..6).prop_map(
                    |entries| {
                        Dynamic::from_map(
                            entries
                                .into_iter()
                                .map(|(k, v)| (k.into(), v))
                                .collect::<rhai::Map>(),
                        )
                    }
                ),
                proptest::collection::vec(inner, 0..5).prop_map(|values| {
                    let mut values: Vec<Dynamic> = values
                        .into_iter()
                        .filter(|v| {
                            !v.is_array()
                                && !v.is_map()
                                && !v.is::<ApiError>()
                                && !v.is_char()
                                && !v.is::<Row>()
                        })
                        .collect();
                    values.truncate(4);
                    Dynamic::from(Row::new(
                        0,
                        Key::from_parts(vec![KeyPart::Int(1)]),
                        Fields::from_values(&values),
                    ))
                }),
            ]
        })
    }

    /// What the answer's text was before it was written directly: the value converted to a
    /// `serde_json::Value`, serialized.
    fn through_value(value: &Dynamic, schema: &Schema) -> Result<Vec<u8>, String> {
        to_json(value, schema).map(|v| serde_json::to_vec(&v).expect("serializes"))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// The text is byte for byte the text of the value through serde_json: no client sees
        /// a change.
        #[test]
        fn the_text_is_the_one_serde_json_wrote(value in any_value()) {
            let schema = schema();
            let direct = Json::write_value(&value, &schema).map(|json| json.to_bytes());
            prop_assert_eq!(direct, through_value(&value, &schema));
        }
    }

    #[test]
    fn values_with_no_json_form_fail_as_before() {
        let schema = schema();
        let nested = |levels: usize| {
            (0..levels).fold(Dynamic::from_int(1), |value, _| {
                Dynamic::from_array(vec![value])
            })
        };
        for value in [
            Dynamic::from(Table { id: 1 }),
            Dynamic::from_array(vec![Dynamic::from_int(1), Dynamic::from(Table { id: 0 })]),
            nested(DEPTH_MAX),
            nested(DEPTH_MAX + 1),
            Dynamic::from(std::time::Duration::from_secs(1)),
        ] {
            let direct = Json::write_value(&value, &schema).map(|json| json.to_bytes());
            assert_eq!(direct, through_value(&value, &schema));
        }
    }

    /// A long answer is kept in full chunks, and reads back whole.
    #[test]
    fn a_long_text_is_kept_in_full_chunks() {
        let text = "x\"".repeat(JSON_CHUNK);
        let value = Dynamic::from_array(vec![Dynamic::from(ImmutableString::from(text.clone()))]);
        let json = Json::write_value(&value, &Schema::default()).expect("writes");
        let chunks: Vec<Vec<u8>> = json.clone().into_chunks().collect();
        assert!(chunks.len() > 2);
        assert!(chunks[..chunks.len() - 1]
            .iter()
            .all(|chunk| chunk.len() == JSON_CHUNK));
        assert_eq!(chunks.concat().len(), json.len());
        assert_eq!(json, serde_json::json!([text]));
        assert!(Json::null().is_null() && Json::null() == Value::Null);
    }
}
