//! How deep a value may nest: one rule for every value that crosses the edge of a script.
//!
//! A value nests arrays and maps (JSON's arrays and objects) at most [`DEPTH_MAX`] levels deep.
//! A value that is neither is 0 levels deep; `[1]`, `[]` and `{"a": 1}` are 1; `[[1]]` is 2.
//!
//! The rule holds for a request body as a whole (`body`), each stored value
//! (`api::check_storable`, and the decoder of records, images and packed rows: `codec`), each
//! value of a line of `pure-serve import` and `export` (the key and each field: the line's own
//! `{"key": ..., "row": {...}}` around them is not counted), and an answer (`value::to_json`,
//! a thrown value, the value of a `warn` or `error` line). So whatever a server accepts, stores
//! or answers, export writes and import reads back.
//!
//! Why a bound: each of those walks a value outside Rhai, recursing on the native stack, and a
//! handler that returned a value 20,000 levels deep overflowed its 8 MiB thread and aborted the
//! server (issue 36). With the bound, the deepest of them recurses 129 times. Why 128: it is
//! what the decoder of stored values has always followed, so every stored value meets it, and
//! it is far past the nesting of any document a client sends (serde_json's own default stops
//! at 127).

use rhai::{Array, Dynamic, Map};

/// The most levels of arrays and maps a value may nest (see the module doc).
pub const DEPTH_MAX: usize = 128;

/// The message that refuses `what` (a sentence's subject: "the body", "the return value") for
/// nesting deeper than [`DEPTH_MAX`].
pub fn too_deep(what: &str) -> String {
    format!(
        "{what} nests arrays and objects more than {DEPTH_MAX} levels deep, the most a value \
         may ([1] is 1 level, [[1]] is 2)"
    )
}

/// Whether `value` nests arrays and maps at most [`DEPTH_MAX`] levels deep. The walk stops
/// at the first container past the bound, so it recurses at most `DEPTH_MAX + 1` times
/// whatever the value.
pub(crate) fn within(value: &Dynamic) -> bool {
    within_at(value, 0)
}

/// Whether an array holding `items` meets the rule, walked as [`within`] walks it.
pub(crate) fn items_within(items: &[Dynamic]) -> bool {
    items.iter().all(|item| within_at(item, 1))
}

/// Whether a map holding `map`'s entries meets the rule, walked as [`within`] walks it.
pub(crate) fn entries_within(map: &Map) -> bool {
    map.values().all(|value| within_at(value, 1))
}

/// `enclosing`: the arrays and maps around `value`.
fn within_at(value: &Dynamic, enclosing: usize) -> bool {
    if !value.is_array() && !value.is_map() {
        return true;
    }
    if enclosing >= DEPTH_MAX {
        return false;
    }
    if let Some(items) = value.read_lock::<Array>() {
        return items.iter().all(|item| within_at(item, enclosing + 1));
    }
    if let Some(map) = value.read_lock::<Map>() {
        return map.values().all(|item| within_at(item, enclosing + 1));
    }
    true
}

/// How deep the JSON text nests its arrays and objects, counted without parsing (brackets
/// outside strings), and without recursion. For text that is not JSON, the nesting of what a
/// parser would read before it found the mistake is at most this.
pub fn json_text_depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &byte in text {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Parses JSON text into a `serde_json::Value`, refusing text nested deeper than
/// [`DEPTH_MAX`]: serde_json's own limit would refuse the deepest value the rule allows.
pub fn parse_json(text: &str) -> Result<serde_json::Value, String> {
    if json_text_depth(text.as_bytes()) > DEPTH_MAX {
        return Err(too_deep("the JSON text"));
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    // Bounded by the count above: at most DEPTH_MAX levels reach the parser's recursion.
    deserializer.disable_recursion_limit();
    let value = serde::Deserialize::deserialize(&mut deserializer).map_err(|e| e.to_string())?;
    deserializer.end().map_err(|e| e.to_string())?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `levels` arrays, one inside the other, around `inner`.
    fn nested(levels: usize, inner: Dynamic) -> Dynamic {
        (0..levels).fold(inner, |value, _| Dynamic::from_array(vec![value]))
    }

    #[test]
    fn a_value_is_as_deep_as_its_arrays_and_maps() {
        assert!(within(&Dynamic::from_int(1)));
        assert!(within(&nested(DEPTH_MAX, Dynamic::from_int(1))));
        assert!(within(&nested(DEPTH_MAX, Dynamic::UNIT)));
        assert!(!within(&nested(DEPTH_MAX + 1, Dynamic::UNIT)));
        // An empty array is a level too.
        let empty = Dynamic::from_array(Vec::new());
        assert!(within(&nested(DEPTH_MAX - 1, empty.clone())));
        assert!(!within(&nested(DEPTH_MAX, empty)));
        // Maps count as arrays do, and the deepest branch decides.
        let mut map = Map::new();
        map.insert("shallow".into(), Dynamic::from_int(1));
        map.insert("deep".into(), nested(DEPTH_MAX, Dynamic::UNIT));
        assert!(!within(&Dynamic::from_map(map.clone())));
        assert!(!within(&nested(
            DEPTH_MAX - 1,
            Dynamic::from_map(map.clone())
        )));
        map.insert("deep".into(), nested(DEPTH_MAX - 1, Dynamic::UNIT));
        assert!(within(&Dynamic::from_map(map)));
    }

    /// Far past the bound: the walk stops at it (this would overflow a test thread's 2 MiB
    /// stack if it followed the value down).
    #[test]
    fn the_walk_stops_at_the_bound() {
        let deep = nested(200_000, Dynamic::UNIT);
        assert!(!within(&deep));
        // Dropped a level at a time: the drop of a value this deep recurses too.
        let mut value = deep;
        while value.is_array() {
            let mut items = value.cast::<Array>();
            value = items.pop().unwrap_or(Dynamic::UNIT);
        }
    }

    #[test]
    fn json_text_counts_brackets_outside_strings() {
        assert_eq!(json_text_depth(b"1"), 0);
        assert_eq!(json_text_depth(b"[]"), 1);
        assert_eq!(json_text_depth(br#"{"a": [1, {"b": []}], "c": {}}"#), 4);
        assert_eq!(json_text_depth(br#"["[[[", "\"[[", "\\"]"#), 1);
        let deepest = format!("{}{}", "[".repeat(DEPTH_MAX), "]".repeat(DEPTH_MAX));
        let value = parse_json(&deepest).expect("the deepest value the rule allows");
        assert_eq!(json_text_depth(value.to_string().as_bytes()), DEPTH_MAX);
        let deeper = format!("[{deepest}]");
        let refused = parse_json(&deeper).expect_err("one level more");
        assert!(refused.contains("more than 128 levels"), "{refused}");
        assert!(parse_json(&"[".repeat(1_000_000)).is_err());
    }
}
