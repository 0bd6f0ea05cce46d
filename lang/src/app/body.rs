//! A request body: JSON text to script values, checked against the handlers' limits as it is
//! parsed, so that a body a handler could not hold is refused before it is queued.
//!
//! The text goes straight into Rhai values (no `serde_json::Value` tree in between, which cost
//! several times the body's bytes while a write waited in the queue), on the thread that read
//! the body. The size limits are the engine's, counted the way Rhai counts them
//! (`calc_data_sizes`): array items, object entries and string bytes each summed over every
//! level of the whole request map `#{params, query, body}`, which is what a handler holds. A
//! body over one of them would only fail inside the handler, as a 500 naming a script line.
//!
//! The count covers the whole request map, as a handler receives it: a handler that only ever
//! touches `request.body` would meet the same limits a few entries (its params and query)
//! later, never sooner.
//!
//! Also refused: a body that nests arrays and objects deeper than the depth rule allows
//! (`depth`), counted here as it is parsed, since serde_json's own limit is off (it would refuse
//! the deepest body the rule allows); an object with the same key twice (parsers disagree on
//! which one wins, so two programs in a chain could act on different values). `-0` is the integer 0, and `-0.0` the
//! float, as their text says (serde_json reads both as the float -0.0).

use std::cmp::Ordering;
use std::collections::VecDeque;
use std::fmt;

use rhai::{Array, Dynamic, Identifier, ImmutableString, Map};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::script::limits::Limits;
use crate::state::depth::{too_deep, DEPTH_MAX};

/// Why a request body was refused; nothing ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BodyError {
    /// Not JSON, or an object with a repeated key: serde's message, with line and column.
    Malformed { message: String },
    /// Over one of the handlers' size limits (counted over the whole request).
    TooLarge {
        /// The limit's name, as `Limits` calls it: `string_bytes_max`, `array_items_max`,
        /// `map_items_max`.
        limit: &'static str,
        max: usize,
    },
    /// Not what the route declares: the message names the value and what was expected.
    Invalid { message: String },
    /// Nested deeper than [`DEPTH_MAX`]: the rule, with line and column.
    TooDeep { message: String },
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BodyError::Malformed { message } => write!(f, "malformed JSON body: {message}"),
            BodyError::Invalid { message } | BodyError::TooDeep { message } => f.write_str(message),
            BodyError::TooLarge { limit, max } => {
                let what = match *limit {
                    "string_bytes_max" => "bytes of strings",
                    "array_items_max" => "array items",
                    _ => "object entries",
                };
                write!(
                    f,
                    "the request holds more than {max} {what} in all (the handlers' limit \
                     {limit}, counted over every level of the body, the path parameters, \
                     the query and the headers); send less"
                )
            }
        }
    }
}

/// What the request holds so far, against the limits.
struct Budget<'a> {
    array_items: usize,
    map_items: usize,
    string_bytes: usize,
    limits: Limits,
    /// The first limit passed: serde's error type cannot carry it.
    exceeded: Option<BodyError>,
    /// Whether the parse stopped at a value nested deeper than the depth rule.
    too_deep: bool,
    /// The body's text, and for each number in it that reads as -0.0, in order, whether it was
    /// written without a fraction or exponent (found the first time one is met).
    text: &'a [u8],
    negative_zeros: Option<VecDeque<bool>>,
}

impl Budget<'_> {
    /// Whether the next number that reads as -0.0 was written as an integer (`-0`).
    fn next_negative_zero_is_integer(&mut self) -> bool {
        let text = self.text;
        let zeros = self
            .negative_zeros
            .get_or_insert_with(|| negative_zeros(text));
        zeros.pop_front().unwrap_or(false)
    }

    fn add(&mut self, array_items: usize, map_items: usize, string_bytes: usize) -> bool {
        self.array_items += array_items;
        self.map_items += map_items;
        self.string_bytes += string_bytes;
        let over = if self.string_bytes > self.limits.string_bytes_max {
            Some(("string_bytes_max", self.limits.string_bytes_max))
        } else if self.array_items > self.limits.array_items_max {
            Some(("array_items_max", self.limits.array_items_max))
        } else if self.map_items > self.limits.map_items_max {
            Some(("map_items_max", self.limits.map_items_max))
        } else {
            None
        };
        if let Some((limit, max)) = over {
            self.exceeded
                .get_or_insert(BodyError::TooLarge { limit, max });
        }
        over.is_none()
    }
}

/// Parses a request body into the value a handler sees as `request.body` (unit for an empty
/// or blank body), counting it together with the request's `params` and `query` pairs.
/// The entries of the request map itself: params, query, body, method, path, headers, peer, id.
const REQUEST_ENTRIES: usize = 8;

pub(crate) fn parse(
    bytes: &[u8],
    params: &[(String, String)],
    query: &[(String, String)],
    head: &crate::script::request::Head,
    limits: &Limits,
) -> Result<Dynamic, BodyError> {
    let mut budget = Budget {
        array_items: 0,
        map_items: 0,
        string_bytes: 0,
        limits: limits.clone(),
        exceeded: None,
        too_deep: false,
        text: bytes,
        negative_zeros: None,
    };
    // The request map's own entries, each pair of its three maps, and its strings.
    let pairs = params.iter().chain(query);
    let pair_bytes: usize = pairs.clone().map(|(_, value)| value.len()).sum::<usize>()
        + head
            .headers
            .iter()
            .map(|(_, value)| value.len())
            .sum::<usize>();
    let head_bytes = head.method.len() + head.path.len() + head.peer.len() + head.id.len();
    let entries = REQUEST_ENTRIES + pairs.count() + head.headers.len();
    if !budget.add(0, entries, pair_bytes + head_bytes) {
        return Err(budget.exceeded.expect("set when add fails"));
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Dynamic::UNIT);
    }
    // The whole text checked as UTF-8 at once, then parsed as text: serde_json's byte reader
    // checks each string as it meets it, at several times the cost per byte of one pass over
    // a whole body of mostly ASCII. Text that is not UTF-8 goes to that reader, whose error
    // says where.
    let parsed = match std::str::from_utf8(bytes) {
        Ok(text) => parse_with(&mut serde_json::Deserializer::from_str(text), &mut budget),
        Err(_) => parse_with(
            &mut serde_json::Deserializer::from_slice(bytes),
            &mut budget,
        ),
    };
    match (parsed, budget.exceeded) {
        (_, Some(exceeded)) => Err(exceeded),
        (Ok(value), None) => Ok(value),
        (Err(error), None) if budget.too_deep => Err(BodyError::TooDeep {
            message: error.to_string(),
        }),
        (Err(error), None) => Err(BodyError::Malformed {
            message: error.to_string(),
        }),
    }
}

fn parse_with<'de, R: serde_json::de::Read<'de>>(
    deserializer: &mut serde_json::Deserializer<R>,
    budget: &mut Budget,
) -> Result<Dynamic, serde_json::Error> {
    // The visitor stops at DEPTH_MAX levels: that bounds the parser's recursion.
    deserializer.disable_recursion_limit();
    let seed = ValueSeed {
        budget,
        enclosing: 0,
    };
    let value = seed.deserialize(&mut *deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// For each number token of a JSON text that reads as -0.0 (outside strings, in order):
/// whether it has no fraction and no exponent. serde_json visits them in the same order, and
/// rounds as `f64::from_str` does (`-1e-400` reads as -0.0 too, and is a float). serde_json
/// reads `-0` as the float -0.0; Pure reads it as the integer 0, in request bodies and in
/// imported rows alike.
pub fn negative_zeros(text: &[u8]) -> VecDeque<bool> {
    let mut zeros = VecDeque::new();
    let (mut in_string, mut escaped) = (false, false);
    let mut at = 0;
    while at < text.len() {
        let byte = text[at];
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else if byte == b'"' {
            in_string = true;
        } else if byte == b'-' {
            let end = text[at + 1..]
                .iter()
                .position(|b| !matches!(b, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-'))
                .map_or(text.len(), |n| at + 1 + n);
            let token = std::str::from_utf8(&text[at..end]).unwrap_or("");
            if token.parse::<f64>().is_ok_and(|value| value == 0.0) {
                zeros.push_back(!token.contains(['.', 'e', 'E']));
            }
            at = end;
            continue;
        }
        at += 1;
    }
    zeros
}

/// Deserializes one JSON value into a script value, charging it to the budget.
struct ValueSeed<'a, 'text> {
    budget: &'a mut Budget<'text>,
    /// The arrays and objects around this value.
    enclosing: usize,
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_, '_> {
    type Value = Dynamic;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Dynamic, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl ValueSeed<'_, '_> {
    fn charge<E: de::Error>(
        &mut self,
        array_items: usize,
        map_items: usize,
        bytes: usize,
    ) -> Result<(), E> {
        if self.budget.add(array_items, map_items, bytes) {
            Ok(())
        } else {
            Err(E::custom("over a size limit"))
        }
    }

    fn string<E: de::Error>(mut self, text: ImmutableString) -> Result<Dynamic, E> {
        self.charge(0, 0, text.len())?;
        Ok(Dynamic::from(text))
    }

    /// Refuses an array or object that would nest the body deeper than the rule, before any of
    /// its items is read; else the level of its items.
    fn nest<E: de::Error>(&mut self) -> Result<usize, E> {
        if self.enclosing >= DEPTH_MAX {
            self.budget.too_deep = true;
            return Err(E::custom(too_deep("the body")));
        }
        Ok(self.enclosing + 1)
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
        Ok(match i64::try_from(value) {
            Ok(value) => Dynamic::from_int(value),
            Err(_) => Dynamic::from_float(value as f64),
        })
    }

    fn visit_f64<E>(self, value: f64) -> Result<Dynamic, E> {
        // serde_json reads `-0` as the float -0.0, like `-0.0`: the text tells them apart.
        if value == 0.0 && value.is_sign_negative() && self.budget.next_negative_zero_is_integer() {
            return Ok(Dynamic::from_int(0));
        }
        Ok(Dynamic::from_float(value))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Dynamic, E> {
        self.string(ImmutableString::from(value))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Dynamic, E> {
        self.string(ImmutableString::from(value))
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Dynamic, A::Error> {
        let enclosing = self.nest()?;
        let mut items = Array::new();
        loop {
            let seed = ValueSeed {
                budget: &mut *self.budget,
                enclosing,
            };
            let Some(item) = seq.next_element_seed(seed)? else {
                break;
            };
            // Charged as each item arrives, so that a huge array stops at the limit.
            self.charge(1, 0, 0)?;
            items.push(item);
        }
        Ok(Dynamic::from_array(items))
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut entries: A) -> Result<Dynamic, A::Error> {
        let enclosing = self.nest()?;
        // Gathered while the keys ascend and built in one pass: clients mostly send keys in
        // order (a sorted map serialized; a batch of ascending keys), and a map built from a
        // sorted run costs a comparison per key, where inserting them one by one searched the
        // tree for each (a tenth of a batch's CPU per entry). The first key out of order turns
        // the run into a map and the rest are inserted, so that a repeat is refused where it
        // stands in the text, before anything later in the object (a limit, a syntax error).
        let mut run: Vec<(Identifier, Dynamic)> = Vec::new();
        let mut map: Option<Map> = None;
        while let Some(key) = entries.next_key_seed(KeySeed)? {
            self.charge(0, 1, 0)?;
            let seed = ValueSeed {
                budget: &mut *self.budget,
                enclosing,
            };
            let value = entries.next_value_seed(seed)?;
            if let Some(map) = &mut map {
                if map.contains_key(&key) {
                    return Err(repeated(&key));
                }
                map.insert(key, value);
                continue;
            }
            match run.last().map(|(last, _)| key.cmp(last)) {
                None | Some(Ordering::Greater) => run.push((key, value)),
                Some(Ordering::Equal) => return Err(repeated(&key)),
                Some(Ordering::Less) => {
                    let mut built: Map = std::mem::take(&mut run).into_iter().collect();
                    if built.contains_key(&key) {
                        return Err(repeated(&key));
                    }
                    built.insert(key, value);
                    map = Some(built);
                }
            }
        }
        Ok(Dynamic::from_map(
            map.unwrap_or_else(|| run.into_iter().collect()),
        ))
    }
}

fn repeated<E: de::Error>(key: &str) -> E {
    E::custom(format_args!("the key {key:?} appears twice in one object"))
}

/// An object's key, read straight into the script map's key type (no `String` in between: a
/// key of up to 23 bytes is then never on the heap).
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Identifier;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Identifier, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed {
    type Value = Identifier;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E>(self, key: &str) -> Result<Identifier, E> {
        Ok(key.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            string_bytes_max: 10,
            array_items_max: 4,
            // The request map's own 8 entries and 3 more.
            map_items_max: 11,
            ..Limits::default()
        }
    }

    /// `text` parsed under the default limits.
    fn parse_default_limits(text: &str) -> Result<Dynamic, BodyError> {
        parse(
            text.as_bytes(),
            &[],
            &[],
            &Default::default(),
            &Limits::default(),
        )
    }

    fn parse_body(text: &str) -> Result<Dynamic, BodyError> {
        parse(text.as_bytes(), &[], &[], &Default::default(), &limits())
    }

    fn too_large(limit: &'static str, max: usize) -> Option<BodyError> {
        Some(BodyError::TooLarge { limit, max })
    }

    #[test]
    fn converts_every_kind_of_value() {
        let text = r#"{"a": [1, -0, 2.5, true, null], "b": "xy"}"#;
        let value = parse_default_limits(text).expect("parses");
        let map = value.cast::<Map>();
        let items = map["a"].clone().cast::<Array>();
        assert_eq!(items[0].as_int(), Ok(1));
        assert_eq!(items[1].as_int(), Ok(0), "-0 is the integer 0");
        assert_eq!(items[2].as_float(), Ok(2.5));
        assert_eq!(items[3].as_bool(), Ok(true));
        assert!(items[4].is_unit());
        assert_eq!(map["b"].clone().into_string().as_deref(), Ok("xy"));
        assert!(parse_body("  \n").expect("blank").is_unit());
        let big = parse_body("18446744073709551615").expect("u64");
        assert_eq!(big.as_float(), Ok(u64::MAX as f64));
    }

    #[test]
    fn minus_zero_is_an_integer_as_written_and_a_float_otherwise() {
        let text = r#"["-0.0", -0.0, -0, -1e-400, {"k\"-0": -0e3}, -0, -0.5, 0.0]"#;
        let items = parse_default_limits(text).expect("parses").cast::<Array>();
        assert!(items[0].is_string());
        assert!(items[1]
            .as_float()
            .is_ok_and(|f| f == 0.0 && f.is_sign_negative()));
        assert_eq!(items[2].as_int(), Ok(0));
        assert!(
            items[3].as_float().is_ok(),
            "-1e-400 underflows to a float -0.0"
        );
        let map = items[4].clone().cast::<Map>();
        assert!(
            map["k\"-0"].as_float().is_ok(),
            "-0e3 has an exponent: a float"
        );
        assert_eq!(items[5].as_int(), Ok(0));
        assert_eq!(items[6].as_float(), Ok(-0.5));
        assert_eq!(items[7].as_float(), Ok(0.0));
    }

    #[test]
    fn counts_as_rhai_does_over_every_level() {
        // The request map itself holds 8 entries: 3 more fit the limit of 11.
        assert!(parse_body(r#"{"a": 1, "b": {"c": 2}}"#).is_ok());
        assert_eq!(
            parse_body(r#"{"a": 1, "b": {"c": 2, "d": 3}}"#).err(),
            too_large("map_items_max", 11)
        );
        assert!(parse_body("[1, [2, 3]]").is_ok(), "4 items in all");
        assert_eq!(
            parse_body("[1, [2, 3], 4]").err(),
            too_large("array_items_max", 4)
        );
        assert!(parse_body(r#"["12345", {"k": "12345"}]"#).is_ok());
        assert_eq!(
            parse_body(r#"["12345", "123456"]"#).err(),
            too_large("string_bytes_max", 10)
        );
        // Keys are not string bytes, to Rhai.
        assert!(parse_body(r#"{"a_long_key_name": 1}"#).is_ok());
        // Path parameters and query pairs count too, and so does the head: its headers are a
        // map's entries, and its strings and header values are string bytes.
        let params = [("p".to_string(), "123456".to_string())];
        assert_eq!(
            parse(br#""12345""#, &params, &[], &Default::default(), &limits()).err(),
            too_large("string_bytes_max", 10)
        );
        let head = crate::script::request::Head {
            headers: vec![("accept".into(), "*/*".into())],
            method: "POST".into(),
            ..Default::default()
        };
        assert!(parse(br#""123""#, &[], &[], &head, &limits()).is_ok());
        assert_eq!(
            parse(br#""1234""#, &[], &[], &head, &limits()).err(),
            too_large("string_bytes_max", 10)
        );
        let head = crate::script::request::Head {
            headers: (0..4)
                .map(|i| (format!("h{i}").into(), "".into()))
                .collect(),
            ..Default::default()
        };
        assert_eq!(
            parse(b"{}", &[], &[], &head, &limits()).err(),
            too_large("map_items_max", 11)
        );
    }

    #[test]
    fn an_object_in_any_key_order_keeps_each_value_with_its_key() {
        for text in [
            r#"{"a": 1, "b": 2, "c": 3, "d": 4}"#,
            r#"{"c": 3, "a": 1, "d": 4, "b": 2}"#,
            r#"{"d": 4, "c": 3, "b": 2, "a": 1}"#,
        ] {
            let map = parse_default_limits(text).expect("parses").cast::<Map>();
            let pairs: Vec<(String, i64)> = map
                .iter()
                .map(|(k, v)| (k.to_string(), v.as_int().expect("an integer")))
                .collect();
            let expected =
                [("a", 1), ("b", 2), ("c", 3), ("d", 4)].map(|(k, v)| (k.to_string(), v));
            assert_eq!(pairs, expected, "{text}");
        }
        // Keys past the inline size, and with escapes (read through serde's scratch buffer).
        let text = r#"{"a key longer than twenty-three bytes": 1, "k\u00e9y": 2}"#;
        let map = parse_default_limits(text).expect("parses").cast::<Map>();
        assert_eq!(map["a key longer than twenty-three bytes"].as_int(), Ok(1));
        assert_eq!(map["k\u{e9}y"].as_int(), Ok(2));
    }

    /// A repeated key stops the parse where it stands, whatever the order of the keys before
    /// it: before a later limit or syntax error, and named as the first repeat in the text.
    #[test]
    fn a_repeat_is_refused_where_it_stands() {
        let repeat = |got: Result<Dynamic, BodyError>, key: &str| match got {
            Err(BodyError::Malformed { message }) => {
                assert!(
                    message.contains(&format!("{key:?} appears twice")),
                    "{message}"
                )
            }
            other => panic!("{other:?}"),
        };
        repeat(
            parse_body(r#"{"b": 1, "a": 2, "b": 3, "c": [1, 2, 3, 4, 5]}"#),
            "b",
        );
        repeat(parse_body(r#"{"b": 1, "a": 2, "b": 3, oops"#), "b");
        repeat(parse_body(r#"{"a": 1, "b": 2, "b": 3, oops"#), "b");
        let text = r#"{"z": 1, "a": 2, "z": 3, "a": 4}"#;
        let got = parse_default_limits(text);
        assert_eq!(
            got.err(),
            Some(BodyError::Malformed {
                message: "the key \"z\" appears twice in one object at line 1 column 23".into()
            })
        );
    }

    #[test]
    fn a_limit_wins_over_a_later_syntax_error() {
        assert_eq!(
            parse_body("[1, 2, 3, 4, 5, oops").err(),
            too_large("array_items_max", 4)
        );
    }

    #[test]
    fn refuses_repeated_keys_and_malformed_text() {
        let Err(BodyError::Malformed { message }) =
            parse_body(r#"{"player": "d1", "player": "d2"}"#)
        else {
            panic!("a repeated key is refused");
        };
        assert!(message.contains("\"player\" appears twice"), "{message}");
        assert!(matches!(parse_body("{"), Err(BodyError::Malformed { .. })));
        assert!(matches!(
            parse_body("1 2"),
            Err(BodyError::Malformed { .. })
        ));
        // A repeat that is not next to its twin, in an object whose keys are out of order.
        let Err(BodyError::Malformed { message }) = parse_body(r#"{"b": 1, "a": 2, "b": 3}"#)
        else {
            panic!("a repeated key is refused wherever it is");
        };
        assert!(message.contains("\"b\" appears twice"), "{message}");
        // Bytes that are not UTF-8, inside a string: refused with where they are.
        let Err(BodyError::Malformed { message }) = parse(
            b"{\"a\": \"x\xff\"}",
            &[],
            &[],
            &Default::default(),
            &limits(),
        ) else {
            panic!("a body that is not UTF-8 is refused");
        };
        assert!(message.contains("line 1 column"), "{message}");
        // Nested repeats too.
        assert!(matches!(
            parse_body(r#"[{"a": 1, "a": 1}]"#),
            Err(BodyError::Malformed { .. })
        ));
    }

    /// The depth rule, counted over the body as a whole: arrays and objects alike, the deepest
    /// branch deciding. serde_json's own limit refused 128 levels (issue 36).
    #[test]
    fn a_body_nests_at_most_the_depth_rule() {
        let nested = |levels: usize, inner: &str| {
            format!("{}{inner}{}", "[".repeat(levels), "]".repeat(levels))
        };
        let deepest = parse_default_limits(&nested(DEPTH_MAX, "1")).expect("128 levels");
        assert!(crate::state::depth::within(&deepest));
        assert!(parse_default_limits(&nested(DEPTH_MAX, "")).is_ok());
        // The outer object, the arrays, the inner object.
        let text = format!(r#"{{"a": 1, "b": {}}}"#, nested(DEPTH_MAX - 2, "{}"));
        assert!(parse_default_limits(&text).is_ok());
        let refused = |text: &str| match parse_default_limits(text) {
            Err(BodyError::TooDeep { message }) => message,
            other => panic!("{other:?}"),
        };
        let message = refused(&nested(DEPTH_MAX + 1, "1"));
        assert!(
            message.contains("the body nests arrays and objects more than 128 levels deep"),
            "{message}"
        );
        assert!(message.ends_with("at line 1 column 129"), "{message}");
        let text = format!(r#"{{"a": 1, "b": {}}}"#, nested(DEPTH_MAX - 1, "{}"));
        refused(&text);
        // Far deeper, and cut short: refused at level 129, not followed down.
        refused(&"[".repeat(1_000_000));
        refused(&r#"{"a":"#.repeat(1_000_000));
    }
}
