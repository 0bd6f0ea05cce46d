//! Converting between JSON (requests and responses) and Rhai values.

use rhai::{Array, Dynamic, ImmutableString, Map};
use serde_json::Value;

use crate::api::{ApiError, Row, Table};
use crate::schema::Schema;

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
/// have no JSON form (function pointers, table handles).
pub fn to_json(value: &Dynamic, schema: &Schema) -> Result<Value, String> {
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
    if let Some(items) = value.read_lock::<Array>() {
        return items
            .iter()
            .map(|v| to_json(v, schema))
            .collect::<Result<_, _>>()
            .map(Value::Array);
    }
    if let Some(fields) = value.read_lock::<Map>() {
        let mut object = serde_json::Map::with_capacity(fields.len());
        for (k, v) in fields.iter() {
            object.insert(k.to_string(), to_json(v, schema)?);
        }
        return Ok(Value::Object(object));
    }
    if let Some(row) = value.read_lock::<Row>() {
        return row_to_json(&row, schema);
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

fn row_to_json(row: &Row, schema: &Schema) -> Result<Value, String> {
    let declared = &schema.table(row.table).fields;
    let mut object = serde_json::Map::with_capacity(declared.len());
    for (slot, name) in declared.iter().enumerate() {
        let value = to_json(&row.get(slot), schema)?;
        object.insert(name.clone(), value);
    }
    Ok(Value::Object(object))
}

/// A request as the map `#{params, query, body, method, path, headers, peer, id}`.
pub fn request_to_dynamic(request: &crate::Request) -> Dynamic {
    let pairs = |pairs: &[(String, Dynamic)]| {
        Dynamic::from_map(
            pairs
                .iter()
                .map(|(k, v)| (k.as_str().into(), v.clone()))
                .collect::<Map>(),
        )
    };
    let text_pairs = |pairs: &[(String, String)]| {
        Dynamic::from_map(
            pairs
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().into(),
                        Dynamic::from(ImmutableString::from(v.as_str())),
                    )
                })
                .collect::<Map>(),
        )
    };
    let mut map = Map::new();
    map.insert("params".into(), pairs(&request.params));
    map.insert("query".into(), pairs(&request.query));
    map.insert("body".into(), request.body.clone());
    let head = &request.head;
    let text = |s: &str| Dynamic::from(ImmutableString::from(s));
    map.insert("method".into(), text(&head.method));
    map.insert("path".into(), text(&head.path));
    map.insert("headers".into(), text_pairs(&head.headers));
    map.insert("peer".into(), text(&head.peer));
    map.insert("id".into(), text(&head.id));
    Dynamic::from_map(map)
}
