//! One line of a `<table>.jsonl` file, `{"key": ..., "row": {...}}`, parsed straight into a
//! key and the row's field values in declared order (no `serde_json::Value` in between), with
//! the rules a script's own writes follow: declared fields only, storable values, keys a
//! script can address, values within the handlers' size limits and the depth rule
//! ([`pure_lang::DEPTH_MAX`]: each field's value and the key counted alone, not the line's
//! `{"key": ..., "row": {...}}` around them, so a line nests at most 130 levels). serde_json's
//! own limit is off (a line holding the deepest storable value is past it): the value's visitor
//! counts levels, and stops at the rule before it reads further.

use std::collections::VecDeque;
use std::fmt;

use pure_lang::{
    negative_zeros, too_deep, Array, Dynamic, ImmutableString, Key, KeyPart, Limits, Map,
    TableSchema, DEPTH_MAX, KEY_PARTS_MAX,
};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// One line: `{"key": ..., "row": {...}}` into a key and the row's fields in declared order.
/// The error is `column: message` (or ` message` when serde_json has no column for it).
pub(super) fn parse_line(
    text: &[u8],
    table: &TableSchema,
    limits: &Limits,
) -> Result<(Key, Vec<Dynamic>), String> {
    let mut line = Line {
        text,
        negative_zeros: None,
        table,
        limits,
    };
    let mut deserializer = serde_json::Deserializer::from_slice(text);
    // Bounded by the depth rule, which the visitors count: a key part that is an array is
    // refused without being read, a field's value at DEPTH_MAX levels.
    deserializer.disable_recursion_limit();
    let parsed = LineSeed { line: &mut line }
        .deserialize(&mut deserializer)
        .and_then(|row| deserializer.end().map(|()| row));
    if let Ok((_, values)) = &parsed {
        // A typed table's fields, the ones the line leaves out included (a required one must
        // be there).
        if !table.types.is_empty() {
            for (slot, value) in values.iter().enumerate() {
                table
                    .check(slot, value)
                    .map_err(|message| format!(" {message}"))?;
            }
        }
    }
    parsed.map_err(|error| {
        // serde_json ends its message with "at line 1 column N": the line is ours to name.
        let message = error.to_string();
        let message = match message.rfind(" at line ") {
            Some(at) => &message[..at],
            None => &message,
        };
        match error.column() {
            0 => format!(" {message}"),
            column => format!("{column}: {message}"),
        }
    })
}

/// What the visitors of one line share.
struct Line<'a> {
    text: &'a [u8],
    /// For each number of the line that reads as -0.0, whether it was written as an integer.
    negative_zeros: Option<VecDeque<bool>>,
    table: &'a TableSchema,
    limits: &'a Limits,
}

impl Line<'_> {
    /// Whether the next number that reads as -0.0 was written as the integer `-0`.
    fn next_negative_zero_is_integer(&mut self) -> bool {
        let text = self.text;
        self.negative_zeros
            .get_or_insert_with(|| negative_zeros(text))
            .pop_front()
            .unwrap_or(false)
    }
}

const LINE_FORMAT: &str =
    r#"a line {"key": <integer, string or array of them>, "row": {"<field>": <value>, ...}}"#;

struct LineSeed<'a, 'l> {
    line: &'a mut Line<'l>,
}

enum Member {
    Key,
    Row,
}

struct MemberSeed;

impl<'de> DeserializeSeed<'de> for MemberSeed {
    type Value = Member;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Member, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for MemberSeed {
    type Value = Member;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"key\" or \"row\"")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<Member, E> {
        match name {
            "key" => Ok(Member::Key),
            "row" => Ok(Member::Row),
            other => Err(E::custom(format_args!(
                "unknown member {other:?}: a line holds only \"key\" and \"row\""
            ))),
        }
    }
}

impl<'de> DeserializeSeed<'de> for LineSeed<'_, '_> {
    type Value = (Key, Vec<Dynamic>);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for LineSeed<'_, '_> {
    type Value = (Key, Vec<Dynamic>);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(LINE_FORMAT)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<Self::Value, A::Error> {
        let (mut key, mut row) = (None, None);
        while let Some(member) = members.next_key_seed(MemberSeed)? {
            match member {
                Member::Key if key.is_some() => {
                    return Err(de::Error::custom("\"key\" appears twice"))
                }
                Member::Row if row.is_some() => {
                    return Err(de::Error::custom("\"row\" appears twice"))
                }
                Member::Key => {
                    key = Some(members.next_value_seed(KeySeed {
                        line: &mut *self.line,
                    })?)
                }
                Member::Row => {
                    row = Some(members.next_value_seed(RowSeed {
                        line: &mut *self.line,
                    })?)
                }
            }
        }
        match (key, row) {
            (Some(key), Some(row)) => Ok((key, row)),
            (None, _) => Err(de::Error::custom(format_args!(
                "no \"key\": expected {LINE_FORMAT}"
            ))),
            (_, None) => Err(de::Error::custom(format_args!(
                "no \"row\": expected {LINE_FORMAT}"
            ))),
        }
    }
}

/// A key: an integer, a string, or an array of 1 to 4 of them.
struct KeySeed<'a, 'l> {
    line: &'a mut Line<'l>,
}

const KEY_FORMAT: &str = "a key: an integer, a string, or an array of 1 to 4 integers and strings";

impl<'de> DeserializeSeed<'de> for KeySeed<'_, '_> {
    type Value = Key;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Key, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_, '_> {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(KEY_FORMAT)
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Key, E> {
        Ok(Key::int(value))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Key, E> {
        key_int(value).map(Key::int)
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Key, E> {
        key_float(self.line, value).map(Key::int)
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Key, E> {
        Ok(Key::from_parts(vec![KeyPart::Str(value.into())]))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Key, A::Error> {
        let mut parts = Vec::with_capacity(KEY_PARTS_MAX);
        while let Some(part) = seq.next_element_seed(PartSeed {
            line: &mut *self.line,
        })? {
            if parts.len() == KEY_PARTS_MAX {
                return Err(de::Error::custom(format_args!(
                    "a key has at most {KEY_PARTS_MAX} parts (as many as a script can give \
                     t.get)"
                )));
            }
            parts.push(part);
        }
        if parts.is_empty() {
            return Err(de::Error::custom("a key has at least one part, not []"));
        }
        Ok(Key::from_parts(parts))
    }
}

fn key_int<E: de::Error>(value: u64) -> Result<i64, E> {
    i64::try_from(value).map_err(|_| {
        E::custom(format_args!(
            "the key part {value} is over the largest integer, {}",
            i64::MAX
        ))
    })
}

fn key_float<E: de::Error>(line: &mut Line<'_>, value: f64) -> Result<i64, E> {
    if value == 0.0 && value.is_sign_negative() && line.next_negative_zero_is_integer() {
        return Ok(0);
    }
    Err(E::custom(format_args!(
        "the key part {value:?} is a float: a key part is an integer or a string"
    )))
}

/// One part of an array key.
struct PartSeed<'a, 'l> {
    line: &'a mut Line<'l>,
}

impl<'de> DeserializeSeed<'de> for PartSeed<'_, '_> {
    type Value = KeyPart;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<KeyPart, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Visitor<'_> for PartSeed<'_, '_> {
    type Value = KeyPart;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key part: an integer or a string")
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<KeyPart, E> {
        Ok(KeyPart::Int(value))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<KeyPart, E> {
        key_int(value).map(KeyPart::Int)
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<KeyPart, E> {
        key_float(self.line, value).map(KeyPart::Int)
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<KeyPart, E> {
        Ok(KeyPart::Str(value.into()))
    }
}

/// The row: an object of declared fields, into slots in declared order (unit where absent).
struct RowSeed<'a, 'l> {
    line: &'a mut Line<'l>,
}

impl<'de> DeserializeSeed<'de> for RowSeed<'_, '_> {
    type Value = Vec<Dynamic>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RowSeed<'_, '_> {
    type Value = Vec<Dynamic>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a row: an object of the fields of table {} ({})",
            self.line.table.name,
            self.line.table.fields.join(", ")
        )
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Self::Value, A::Error> {
        let table = self.line.table;
        let mut fields = vec![Dynamic::UNIT; table.fields.len()];
        let mut seen = 0u64;
        while let Some(slot) = entries.next_key_seed(FieldSeed { table })? {
            if seen & (1 << slot) != 0 {
                return Err(de::Error::custom(format_args!(
                    "the field {:?} appears twice in the row",
                    table.fields[slot]
                )));
            }
            seen |= 1 << slot;
            let mut sizes = Sizes::default();
            let value = entries.next_value_seed(ValueSeed {
                line: &mut *self.line,
                sizes: &mut sizes,
                field: &table.fields[slot],
                enclosing: 0,
            })?;
            if let Some(over) = sizes.over(self.line.limits) {
                return Err(de::Error::custom(format_args!(
                    "the field {:?} holds {over}, more than a handler can hold; split or \
                     shorten it",
                    table.fields[slot]
                )));
            }
            fields[slot] = value;
        }
        Ok(fields)
    }
}

/// A field name of the row's table, as its slot.
struct FieldSeed<'a> {
    table: &'a TableSchema,
}

impl<'de> DeserializeSeed<'de> for FieldSeed<'_> {
    type Value = usize;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for FieldSeed<'_> {
    type Value = usize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<usize, E> {
        self.table
            .fields
            .iter()
            .position(|f| f == name)
            .ok_or_else(|| {
                E::custom(format_args!(
                    "table {} declares no field {name:?} (its fields: {}); declare it in \
                     app.json or leave it out of the rows",
                    self.table.name,
                    if self.table.fields.is_empty() {
                        "none".to_string()
                    } else {
                        self.table.fields.join(", ")
                    }
                ))
            })
    }
}

/// What a field's value holds, over every level, as Rhai counts it against its limits.
#[derive(Default)]
struct Sizes {
    array_items: usize,
    map_items: usize,
    string_bytes: usize,
}

impl Sizes {
    fn over(&self, limits: &Limits) -> Option<String> {
        if self.string_bytes > limits.string_bytes_max {
            Some(format!(
                "{} bytes of strings (the limit string_bytes_max is {})",
                self.string_bytes, limits.string_bytes_max
            ))
        } else if self.array_items > limits.array_items_max {
            Some(format!(
                "{} array items (the limit array_items_max is {})",
                self.array_items, limits.array_items_max
            ))
        } else if self.map_items > limits.map_items_max {
            Some(format!(
                "{} object entries (the limit map_items_max is {})",
                self.map_items, limits.map_items_max
            ))
        } else {
            None
        }
    }
}

/// A field's value: what a script can store (unit, booleans, integers, floats, strings, and
/// arrays and maps of those), as a request body's JSON becomes script values.
struct ValueSeed<'a, 'l> {
    line: &'a mut Line<'l>,
    sizes: &'a mut Sizes,
    /// The field's name, for the message that refuses it.
    field: &'l str,
    /// The arrays and objects around this value, in the field's value.
    enclosing: usize,
}

impl ValueSeed<'_, '_> {
    /// Refuses an array or object that would nest the field's value deeper than the rule,
    /// before any of its items is read; else the level of its items.
    fn nest<E: de::Error>(&self) -> Result<usize, E> {
        if self.enclosing >= DEPTH_MAX {
            let field = format!("the field {:?}", self.field);
            return Err(E::custom(too_deep(&field)));
        }
        Ok(self.enclosing + 1)
    }
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_, '_> {
    type Value = Dynamic;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Dynamic, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_, '_> {
    type Value = Dynamic;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Dynamic, E> {
        Ok(Dynamic::UNIT)
    }

    fn visit_bool<E>(self, value: bool) -> Result<Dynamic, E> {
        Ok(Dynamic::from_bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Dynamic, E> {
        Ok(Dynamic::from_int(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Dynamic, E> {
        // As a request body: past i64, a float.
        Ok(match i64::try_from(value) {
            Ok(value) => Dynamic::from_int(value),
            Err(_) => Dynamic::from_float(value as f64),
        })
    }

    fn visit_f64<E>(self, value: f64) -> Result<Dynamic, E> {
        if value == 0.0 && value.is_sign_negative() && self.line.next_negative_zero_is_integer() {
            return Ok(Dynamic::from_int(0));
        }
        Ok(Dynamic::from_float(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<Dynamic, E> {
        self.sizes.string_bytes += value.len();
        Ok(Dynamic::from(ImmutableString::from(value)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Dynamic, A::Error> {
        let enclosing = self.nest()?;
        let mut items = Array::new();
        while let Some(item) = seq.next_element_seed(ValueSeed {
            line: &mut *self.line,
            sizes: &mut *self.sizes,
            field: self.field,
            enclosing,
        })? {
            items.push(item);
        }
        self.sizes.array_items += items.len();
        Ok(Dynamic::from_array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Dynamic, A::Error> {
        let enclosing = self.nest()?;
        let mut map = Map::new();
        while let Some(key) = entries.next_key::<std::borrow::Cow<'de, str>>()? {
            let value = entries.next_value_seed(ValueSeed {
                line: &mut *self.line,
                sizes: &mut *self.sizes,
                field: self.field,
                enclosing,
            })?;
            if map.insert(key.as_ref().into(), value).is_some() {
                return Err(de::Error::custom(format_args!(
                    "the key {key:?} appears twice in one object"
                )));
            }
        }
        self.sizes.map_items += map.len();
        Ok(Dynamic::from_map(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> TableSchema {
        TableSchema {
            name: "t".into(),
            fields: vec!["a".into(), "b".into(), "c".into()],
            types: Vec::new(),
        }
    }

    /// A typed table's line is refused when a value breaks its field's type or leaves a
    /// required field out, naming the table, the field and the value.
    #[test]
    fn a_typed_table_refuses_a_value_of_another_type() {
        use pure_lang::{FieldKind, FieldType};
        let typed = TableSchema {
            types: vec![
                FieldType {
                    kind: FieldKind::Int,
                    required: true,
                },
                FieldType {
                    kind: FieldKind::String,
                    required: false,
                },
                FieldType {
                    kind: FieldKind::Any,
                    required: false,
                },
            ],
            ..table()
        };
        let parse = |text: &str| parse_line(text.as_bytes(), &typed, &Limits::default());
        assert!(parse(r#"{"key": 1, "row": {"a": 1, "b": "x", "c": [1.5]}}"#).is_ok());
        assert!(parse(r#"{"key": 1, "row": {"a": 1, "b": null}}"#).is_ok());
        let refused = parse(r#"{"key": 1, "row": {"a": 1.5}}"#).expect_err("a float");
        assert_eq!(
            refused,
            " table t: a is declared a required int, not a float 1.5"
        );
        let refused = parse(r#"{"key": 1, "row": {"b": "x"}}"#).expect_err("a left out");
        assert!(
            refused.contains("a is declared a required int, not ()"),
            "{refused}"
        );
        let refused = parse(r#"{"key": 1, "row": {"a": 1, "b": 2}}"#).expect_err("b an int");
        assert!(
            refused.contains("b is declared a string, not an int 2"),
            "{refused}"
        );
    }

    fn parse(text: &str) -> Result<(Key, Vec<Dynamic>), String> {
        parse_line(text.as_bytes(), &table(), &Limits::default())
    }

    #[test]
    fn reads_keys_and_every_kind_of_value() {
        let (key, fields) =
            parse(r#"{"row": {"c": [1, -0, 2.5, {"x": null}], "a": "s"}, "key": [3, "b"]}"#)
                .expect("parses");
        assert_eq!(
            key,
            Key::from_parts(vec![KeyPart::Int(3), KeyPart::Str("b".into())])
        );
        assert_eq!(fields[0].clone().into_string().as_deref(), Ok("s"));
        assert!(fields[1].is_unit(), "a missing field is unit");
        let c = fields[2].clone().cast::<Array>();
        assert_eq!(c[1].as_int(), Ok(0), "-0 is the integer 0");
        assert_eq!(c[2].as_float(), Ok(2.5));
        assert!(c[3].clone().cast::<Map>()["x"].is_unit());
        let (key, _) = parse(r#"{"key": -0, "row": {}}"#).expect("parses");
        assert_eq!(key, Key::int(0), "-0 is the integer 0");
        let (_, fields) = parse(r#"{"key": "k", "row": {"a": -0.0, "b": -0}}"#).expect("parses");
        assert!(fields[0].as_float().is_ok_and(|f| f.is_sign_negative()));
        assert_eq!(fields[1].as_int(), Ok(0));
    }

    #[test]
    fn refuses_what_a_script_could_not_store_or_address() {
        let error = |text: &str| parse(text).expect_err(text);
        assert!(error(r#"{"key": 1, "row": {"d": 1}}"#).contains("declares no field \"d\""));
        assert!(error(r#"{"key": 1.5, "row": {}}"#).contains("is a float"));
        assert!(error(r#"{"key": [], "row": {}}"#).contains("at least one part"));
        assert!(error(r#"{"key": [1,2,3,4,5], "row": {}}"#).contains("at most 4 parts"));
        assert!(error(r#"{"key": [true], "row": {}}"#).contains("key part"));
        assert!(error(r#"{"key": 1}"#).contains("no \"row\""));
        assert!(error(r#"{"key": 1, "row": {}, "x": 2}"#).contains("unknown member"));
        assert!(error(r#"{"key": 1, "row": {"a": 1, "a": 2}}"#).contains("appears twice"));
        assert!(error(r#"{"key": 1, "row": {"a": {"k": 1, "k": 1}}}"#).contains("twice"));
        assert!(error(r#"{"key": 1, "row": {}} 5"#).contains("trailing"));
        assert!(error(r#"{"key": 18446744073709551615, "row": {}}"#).contains("largest"));
        let limits = Limits {
            string_bytes_max: 3,
            ..Limits::default()
        };
        let text = br#"{"key": 1, "row": {"a": ["ab", "cd"]}}"#;
        let over = parse_line(text, &table(), &limits).expect_err("over");
        assert!(over.contains("string_bytes_max"), "{over}");
        // The column, then serde's message without its own line and column.
        let malformed = error(r#"{"key": 1, "row": {"a": }}"#);
        assert!(malformed.starts_with("25: "), "{malformed}");
        assert!(!malformed.contains("at line"), "{malformed}");
    }

    /// Each field's value may nest as deep as a stored value (128 levels), so a line nests up
    /// to 130 with its own object and the row's: serde_json's own limit refused it (issue 36).
    /// Deeper is refused at the level past the rule, however deep the text goes on.
    #[test]
    fn a_value_nests_as_deep_as_a_stored_one_and_no_deeper() {
        let nested = |levels: usize| format!("{}1{}", "[".repeat(levels), "]".repeat(levels));
        let line = |value: &str| format!(r#"{{"key": 1, "row": {{"a": {value}}}}}"#);
        let (_, fields) = parse(&line(&nested(DEPTH_MAX))).expect("the deepest value");
        let mut levels = 0;
        let mut value = fields[0].clone();
        while let Some(mut items) = value.try_cast::<Array>() {
            levels += 1;
            value = items.pop().expect("one item");
        }
        assert_eq!(levels, DEPTH_MAX);
        let refused = parse(&line(&nested(DEPTH_MAX + 1))).expect_err("one level more");
        assert!(
            refused.contains("the field \"a\" nests arrays and objects more than 128 levels deep"),
            "{refused}"
        );
        // The 24 bytes before the value, then the 129th `[`.
        assert!(refused.starts_with("153: "), "the column: {refused}");
        let refused = parse(&line(&r#"{"k": "#.repeat(1_000_000))).expect_err("far deeper");
        assert!(refused.contains("more than 128 levels"), "{refused}");
        let refused = parse(&format!(r#"{{"key": {}}}"#, "[".repeat(1_000_000)));
        assert!(refused.expect_err("a key part").contains("key part"));
    }
}
