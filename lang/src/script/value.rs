//! Converting between JSON (requests and responses) and Rhai values.

use rhai::{Array, Dynamic, ImmutableString, Map};
use serde_json::Value;

use crate::script::api::{Row, Table};
use crate::script::api_error::ApiError;
use crate::script::int_set::IntSet;
use crate::state::depth::{too_deep, DEPTH_MAX};
use crate::state::schema::Schema;

/// A JSON value as a script sees it: objects become maps, numbers integers when they fit, else
/// floats.
pub fn to_dynamic(value: &Value) -> Dynamic {
    match value {
        Value::Null => Dynamic::UNIT,
        Value::Bool(b) => Dynamic::from_bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Dynamic::from_int(i),
            None => Dynamic::from_float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Dynamic::from(ImmutableString::from(s.as_str())),
        Value::Array(items) => Dynamic::from_array(items.iter().map(to_dynamic).collect()),
        Value::Object(fields) => Dynamic::from_map(
            fields
                .iter()
                .map(|(k, v)| (k.as_str().into(), to_dynamic(v)))
                .collect::<Map>(),
        ),
    }
}

/// A script value as JSON. Rows become objects of their declared fields. Fails for values that
/// have no JSON form (function pointers, table handles), and for a value nested deeper than the
/// depth rule allows (`depth`), found at the first level past it: the conversion never
/// recurses more than `DEPTH_MAX + 1` times, however deep a handler built its answer.
pub fn to_json(value: &Dynamic, schema: &Schema) -> Result<Value, String> {
    to_json_at(value, schema, 0)
}

/// `enclosing`: the arrays, maps and rows around `value`.
fn to_json_at(value: &Dynamic, schema: &Schema, enclosing: usize) -> Result<Value, String> {
    if value.is_unit() {
        return Ok(Value::Null);
    }
    if let Ok(b) = value.as_bool() {
        return Ok(Value::Bool(b));
    }
    if let Ok(i) = value.as_int() {
        return Ok(Value::from(i));
    }
    if let Ok(f) = value.as_float() {
        return Ok(serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number));
    }
    if let Some(s) = value.read_lock::<ImmutableString>() {
        return Ok(Value::String(s.to_string()));
    }
    if let Ok(c) = value.as_char() {
        return Ok(Value::String(c.to_string()));
    }
    let nested = value.is_array() || value.is_map() || value.is::<Row>() || value.is::<IntSet>();
    if nested && enclosing >= DEPTH_MAX {
        return Err(too_deep("the value"));
    }
    if let Some(set) = value.read_lock::<IntSet>() {
        return Ok(Value::Array(set.iter().map(Value::from).collect()));
    }
    if let Some(items) = value.read_lock::<Array>() {
        return items
            .iter()
            .map(|v| to_json_at(v, schema, enclosing + 1))
            .collect::<Result<_, _>>()
            .map(Value::Array);
    }
    if let Some(fields) = value.read_lock::<Map>() {
        let mut object = serde_json::Map::with_capacity(fields.len());
        for (k, v) in fields.iter() {
            object.insert(k.to_string(), to_json_at(v, schema, enclosing + 1)?);
        }
        return Ok(Value::Object(object));
    }
    if let Some(row) = value.read_lock::<Row>() {
        return row_to_json(&row, schema, enclosing + 1);
    }
    if let Some(error) = value.read_lock::<ApiError>() {
        return Ok(Value::String(error.0.clone()));
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

/// A row's declared fields as an object; `enclosing` counts the object itself.
fn row_to_json(row: &Row, schema: &Schema, enclosing: usize) -> Result<Value, String> {
    let declared = &schema.table(row.table).fields;
    let mut object = serde_json::Map::with_capacity(declared.len());
    for (slot, name) in declared.iter().enumerate() {
        let value = to_json_at(&row.get(slot), schema, enclosing)?;
        object.insert(name.clone(), value);
    }
    Ok(Value::Object(object))
}

/// The entries of the request map, in the order of [`RequestFields`]' bits.
const REQUEST_FIELDS: [&str; 9] = [
    "params",
    "query",
    "body",
    "method",
    "path",
    "headers",
    "peer",
    "id",
    "scheduled",
];

/// The bit of `body` in [`RequestFields`].
const BODY: usize = 2;
/// The bit of `scheduled`.
const SCHEDULED: usize = 8;

/// A set of the request map's entries: a bit per name of `REQUEST_FIELDS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RequestFields(u16);

impl RequestFields {
    pub(crate) const NONE: RequestFields = RequestFields(0);
    pub(crate) const ALL: RequestFields = RequestFields(u16::MAX);

    /// The entry `name`; none for a name the map does not have (reading it gives `()` either
    /// way).
    pub(crate) fn named(name: &str) -> RequestFields {
        match REQUEST_FIELDS.iter().position(|field| *field == name) {
            Some(bit) => RequestFields(1 << bit),
            None => RequestFields::NONE,
        }
    }

    pub(crate) fn with(self, other: RequestFields) -> RequestFields {
        RequestFields(self.0 | other.0)
    }

    /// Whether any of the head's entries is among them (`method`, `path`, `headers`, `peer`,
    /// `id`): what differs between two requests for the same route, params and body.
    pub(crate) fn reads_head(self) -> bool {
        (3..=7).any(|bit| self.has(bit))
    }

    fn has(self, bit: usize) -> bool {
        self.0 & (1 << bit) != 0
    }
}

/// A request as the map `#{params, query, body, method, path, headers, peer, id, scheduled}`,
/// with only
/// the entries of `fields` (the others cannot be observed by the handler it is for).
pub fn request_to_dynamic(
    request: &crate::script::request::Request,
    fields: RequestFields,
) -> Dynamic {
    build_request(request, fields, || request.body.clone())
}

/// `request_to_dynamic`, with the body moved out of `request` (left `()`) instead of copied:
/// [`give_body_back`] returns it from the map.
pub(crate) fn request_taking_body(
    request: &mut crate::script::request::Request,
    fields: RequestFields,
) -> Dynamic {
    if !fields.has(BODY) {
        return request_to_dynamic(request, fields);
    }
    let body = std::mem::take(&mut request.body);
    build_request(request, fields, || body)
}

/// Puts the body of a map from [`request_taking_body`] back into the request it came from.
pub(crate) fn give_body_back(request: &mut crate::script::request::Request, map: Dynamic) {
    if let Some(body) = map.try_cast::<Map>().and_then(|mut map| map.remove("body")) {
        request.body = body;
    }
}

fn build_request(
    request: &crate::script::request::Request,
    fields: RequestFields,
    body: impl FnOnce() -> Dynamic,
) -> Dynamic {
    let mut body = Some(body);
    let pairs = |pairs: &[(String, Dynamic)]| {
        Dynamic::from_map(
            pairs
                .iter()
                .map(|(k, v)| (k.as_str().into(), v.clone()))
                .collect::<Map>(),
        )
    };
    let head = &request.head;
    let mut map = Map::new();
    for (bit, name) in REQUEST_FIELDS.iter().enumerate() {
        // `scheduled` only for the run of a schedule entry: a request's map is as it was.
        if !fields.has(bit) || (bit == SCHEDULED && request.scheduled.is_unit()) {
            continue;
        }
        let value = match bit {
            0 => pairs(&request.params),
            1 => pairs(&request.query),
            BODY => (body.take().expect("one body field"))(),
            3 => Dynamic::from(head.method.clone()),
            4 => Dynamic::from(head.path.clone()),
            5 => Dynamic::from_map(
                head.headers
                    .iter()
                    .map(|(k, v)| (k.as_str().into(), Dynamic::from(v.clone())))
                    .collect::<Map>(),
            ),
            6 => Dynamic::from(head.peer.clone()),
            7 => Dynamic::from(head.id.clone()),
            _ => request.scheduled.clone(),
        };
        map.insert((*name).into(), value);
    }
    Dynamic::from_map(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `levels` arrays, each holding the next, the innermost holding 1.
    fn nested(levels: usize) -> Dynamic {
        (0..levels).fold(Dynamic::from_int(1), |value, _| {
            Dynamic::from_array(vec![value])
        })
    }

    /// An answer meets the depth rule; past it, the conversion stops at the first level too
    /// deep instead of following the value down (issue 36: 20,000 levels overflowed an 8 MiB
    /// stack; this test's thread has 2 MiB).
    #[test]
    fn an_answer_nests_at_most_the_depth_rule() {
        let schema = Schema::default();
        let json = to_json(&nested(DEPTH_MAX), &schema).expect("128 levels");
        assert_eq!(
            crate::state::depth::json_text_depth(json.to_string().as_bytes()),
            128
        );
        let refused = to_json(&nested(DEPTH_MAX + 1), &schema).expect_err("129 levels");
        assert!(refused.contains("more than 128 levels deep"), "{refused}");
        let mut deep = nested(200_000);
        assert!(to_json(&deep, &schema).is_err());
        // Dropped a level at a time: dropping a value this deep recurses too.
        while deep.is_array() {
            deep = deep.cast::<Array>().pop().unwrap_or(Dynamic::UNIT);
        }
    }
}
