//! The manifest, `app.json`: its routes, tables, indexes and keys.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::{HandlerKind, Route};
use crate::app::shape::Declared;
use crate::script::error::unknown_key;
use crate::state::schema::{FieldType, Kind, Schema, TableSchema};
use crate::state::tables::{IndexDef, IndexSource};

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "DELETE", "PATCH"];

/// The routes, each with its guard: its own `"guard"` (a function's name, or `null` for none),
/// else the app's (`guard`).
pub(super) fn parse_routes(routes: &Value, guard: Option<&str>) -> Result<Vec<Route>, String> {
    let Some(routes) = routes.as_object() else {
        return Err("\"routes\" must be an object of \"METHOD /path\": \"handler\"".into());
    };
    routes
        .iter()
        .map(|(pattern, entry)| {
            let (method, path) = pattern
                .split_once(' ')
                .ok_or_else(|| format!("route {pattern:?} must be \"METHOD /path\""))?;
            let method = method.to_ascii_uppercase();
            if !METHODS.contains(&method.as_str()) || !path.starts_with('/') {
                return Err(format!("route {pattern:?}: method must be one of {METHODS:?} and the path start with /"));
            }
            let shape = "the handler must be a function name, or an object with \"handler\" and \
                         any of \"body\", \"query\", \"params\" and \"guard\"";
            let (handler, guard): (&str, Option<&str>) = match entry {
                Value::String(handler) => (handler, guard),
                Value::Object(entry) => {
                    const KEYS: [&str; 5] = ["handler", "body", "query", "params", "guard"];
                    if let Some(key) = entry.keys().find(|k| !KEYS.contains(&k.as_str())) {
                        return Err(format!("route {pattern:?}: {}", unknown_key(key, &KEYS, shape)));
                    }
                    let handler = entry.get("handler").and_then(Value::as_str).ok_or_else(|| format!("route {pattern:?}: {shape}"))?;
                    let guard = match entry.get("guard") {
                        None => guard,
                        Some(Value::Null) => None,
                        Some(Value::String(own)) => Some(own.as_str()),
                        Some(_) => return Err(format!("route {pattern:?}: \"guard\" must be a function's name, or null for none")),
                    };
                    (handler, guard)
                }
                _ => return Err(format!("route {pattern:?}: {shape}")),
            };
            let guard = guard.map(str::to_string);
            let declared = Arc::new(Declared::parse(pattern, entry, path)?);
            let kind = if method == "GET" { HandlerKind::Read } else { HandlerKind::Write };
            Ok(Route { method, path: path.to_string(), handler: handler.to_string(), kind, declared, guard })
        })
        .collect::<Result<Vec<Route>, String>>()
        .and_then(|routes| {
            // Two patterns that differ only in their parameters' names match the same requests:
            // the router would always take one of them.
            let shape = |route: &Route| {
                let segments: Vec<&str> = route
                    .path
                    .split('/')
                    .map(|s| if s.starts_with('{') { "{}" } else { s })
                    .collect();
                (route.method.clone(), segments.join("/"))
            };
            for (i, route) in routes.iter().enumerate() {
                if let Some(other) = routes[..i].iter().find(|o| shape(o) == shape(route)) {
                    return Err(format!(
                        "routes \"{} {}\" and \"{} {}\" match the same requests: one of them \
                         could never be reached",
                        other.method, other.path, route.method, route.path
                    ));
                }
            }
            Ok(routes)
        })
}

/// Where in the manifest's text a message about it points: the last of the names it quotes
/// that the text holds as JSON strings in that order (a route, a table, an index, a key),
/// leaving out a suggestion ("did you mean ..."), which names what is not there.
pub(super) fn manifest_position(text: &str, message: &str) -> Option<(usize, usize)> {
    let mut about = message.split("did you mean").next().unwrap_or(message);
    // After the name of a key that does not belong, a message says what the place takes:
    // names found elsewhere in the file, not where the mistake is.
    for opening in ["unknown key \"", "does not take \""] {
        if let Some(at) = about.find(opening) {
            let name = at + opening.len();
            if let Some(end) = about[name..].find('"') {
                about = &about[..name + end + 1];
            }
        }
    }
    let mut quoted = Vec::new();
    let mut rest = about;
    while let Some(start) = rest.find('"') {
        let Some(length) = rest[start + 1..].find('"') else {
            break;
        };
        quoted.push(&rest[start..start + length + 2]);
        rest = &rest[start + length + 2..];
    }
    // Each name is looked for after the one before it (`index "by_x": field "name"`: the
    // field within that index), so that a name found elsewhere first is not taken.
    let mut offset = None;
    let mut from = 0;
    for q in quoted {
        if let Some(at) = text[from..].find(q) {
            offset = Some(from + at);
            from += at + q.len();
        }
    }
    let offset = offset?;
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before[before.rfind('\n').map_or(0, |n| n + 1)..]
        .chars()
        .count()
        + 1;
    Some((line, column))
}

/// The manifest's own keys: a misspelt one (`"table"`) would otherwise be ignored, and the app
/// would start without what it declares.
pub(super) fn check_manifest_keys(manifest: &Value) -> Result<(), String> {
    const KEYS: [&str; 10] = [
        "name",
        "routes",
        "tables",
        "indexes",
        "cors",
        "limits",
        "guard",
        "env",
        "secrets",
        "schedules",
    ];
    let Some(object) = manifest.as_object() else {
        return Err("app.json must hold an object".into());
    };
    match object.keys().find(|key| !KEYS.contains(&key.as_str())) {
        Some(key) => Err(unknown_key(
            key,
            &KEYS,
            &format!("an app.json holds {KEYS:?}"),
        )),
        None => Ok(()),
    }
}

/// `"indexes": {"by_category": {"table": "items", "fields": ["category"], "unique": false}}`.
pub(super) fn parse_indexes(indexes: &Value, schema: &Schema) -> Result<Vec<IndexDef>, String> {
    let shape = "\"indexes\" must be an object of \"name\": {\"table\": \"...\", \"fields\": \
                 [\"field\", \"-field\" (descending) or \"key[i]\", ...], \"unique\": true or false}";
    if indexes.is_null() {
        return Ok(Vec::new());
    }
    let indexes = indexes.as_object().ok_or(shape)?;
    indexes
        .iter()
        .map(|(name, index)| {
            let bad = |what: String| format!("index {name:?}: {what}");
            let index = index.as_object().ok_or_else(|| bad(shape.into()))?;
            const KEYS: [&str; 3] = ["table", "fields", "unique"];
            if let Some(key) = index.keys().find(|k| !KEYS.contains(&k.as_str())) {
                return Err(bad(unknown_key(key, &KEYS, shape)));
            }
            if !name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return Err(bad(
                    "a name must be an identifier (it is a property: items.by_category)".into(),
                ));
            }
            let table_name = index
                .get("table")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("\"table\" must name a table".into()))?;
            let table = schema
                .table_id(table_name)
                .ok_or_else(|| bad(format!("no table {table_name:?}")))?;
            let fields: Vec<String> = index
                .get("fields")
                .and_then(Value::as_array)
                .map(|fields| {
                    fields
                        .iter()
                        .filter_map(|f| f.as_str().map(str::to_string))
                        .collect()
                })
                .filter(|fields: &Vec<String>| !fields.is_empty())
                .ok_or_else(
                    || bad("\"fields\" must be a list of one or more field names".into()),
                )?;
            // "-best": the largest best first.
            let descending: Vec<bool> = fields.iter().map(|f| f.starts_with('-')).collect();
            let fields: Vec<String> = fields
                .iter()
                .map(|f| f.strip_prefix('-').unwrap_or(f).to_string())
                .collect();
            let sources = fields
                .iter()
                .map(|field| {
                    if let Some(part) = field.strip_prefix("key[").and_then(|f| f.strip_suffix(']'))
                    {
                        return match part.parse::<usize>() {
                            Ok(i) if i < crate::state::key::KEY_PARTS_MAX => {
                                Ok(IndexSource::KeyPart(i))
                            }
                            _ => Err(bad(format!(
                                "{field:?}: a key part is key[0] to key[{}]",
                                crate::state::key::KEY_PARTS_MAX - 1
                            ))),
                        };
                    }
                    schema
                        .field_slot(table, field)
                        .map(IndexSource::Field)
                        .ok_or_else(|| bad(format!("table {table_name} has no field {field:?}")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let unique = match index.get("unique") {
                None => false,
                Some(Value::Bool(unique)) => *unique,
                Some(_) => return Err(bad("\"unique\" must be true or false".into())),
            };
            Ok(IndexDef {
                name: name.clone(),
                table,
                sources,
                fields,
                descending,
                unique,
            })
        })
        .collect()
}

/// `"tables": {"players": ["best", "posts"], "stock": {"s_quantity": "int!", "s_data": "string"}}`:
/// a list of field names (each of any type), or an object of names and types. A type is a name
/// (`"int"`, `"float"`, `"bool"`, `"string"`, `"array"`, `"map"`, `"any"`), `!` after it for a
/// field that must hold a value (`"int!"`), or `{"type": "int", "required": true}`. A typed
/// field without `!` may be unset (`()`). `text` is the manifest's: an object's fields take
/// their slots in the order written there.
pub(super) fn parse_tables(tables: &Value, text: &str) -> Result<Schema, String> {
    let shape = "\"tables\" must be an object of \"table\": [\"field\", ...] or \"table\": \
                 {\"field\": \"type\", ...}";
    if tables.is_null() {
        return Ok(Schema::default());
    }
    let tables = tables.as_object().ok_or(shape)?;
    let mut orders: Option<HashMap<String, Vec<String>>> = None;
    let tables = tables
        .iter()
        .map(|(name, fields)| {
            if let Some(object) = fields.as_object() {
                let orders = orders.get_or_insert_with(|| field_orders(text));
                // serde_json keeps the last of keys written twice: the text still has both.
                if let Some(twice) = orders.get(name).and_then(|written| {
                    written
                        .iter()
                        .enumerate()
                        .find(|(at, field)| written[..*at].contains(field))
                        .map(|(_, field)| field)
                }) {
                    return Err(format!(
                        "field {twice:?} of table {name:?} is declared twice"
                    ));
                }
                let order = orders
                    .get(name)
                    .filter(|order| order.len() == object.len())
                    .cloned()
                    .unwrap_or_else(|| object.keys().cloned().collect());
                let types = order
                    .iter()
                    .map(|field| {
                        field_type(&object[field]).map_err(|message| {
                            format!("table {name:?}, field {field:?}: {message}")
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                return Ok(TableSchema {
                    name: name.clone(),
                    fields: order,
                    types,
                });
            }
            let fields = fields.as_array().ok_or(shape)?;
            let fields = fields
                .iter()
                .map(|f| f.as_str().map(str::to_string).ok_or(shape))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(TableSchema {
                name: name.clone(),
                fields,
                types: Vec::new(),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Schema { tables })
}

/// A field's declared type: `"int"`, `"int!"` or `{"type": "int", "required": true}`.
fn field_type(declared: &Value) -> Result<FieldType, String> {
    let names = || {
        Kind::NAMES
            .iter()
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (name, required) = match declared {
        Value::String(text) => match text.strip_suffix('!') {
            Some(name) => (name, true),
            None => (text.as_str(), false),
        },
        Value::Object(object) => {
            if let Some(key) = object.keys().find(|k| *k != "type" && *k != "required") {
                return Err(format!(
                    "unknown key {key:?}: a field's type is {{\"type\": ..., \"required\": ...}}"
                ));
            }
            let name = object["type"]
                .as_str()
                .ok_or("an object type needs \"type\": a type's name")?;
            let required = match object.get("required") {
                None => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err("\"required\" must be true or false".into()),
            };
            (name, required)
        }
        _ => {
            return Err(format!(
                "a type is a name ({}), with ! for a required field, or {{\"type\": ..., \
                 \"required\": true}}",
                names()
            ))
        }
    };
    let kind = Kind::from_name(name)
        .ok_or_else(|| format!("unknown type {name:?}: a type is one of {}", names()))?;
    if kind == Kind::Any && required {
        return Err("\"any\" cannot be required: declare the field's type".into());
    }
    Ok(FieldType { kind, required })
}

/// Each table's fields in the order the manifest's text gives them, for the tables declared as
/// objects: a `serde_json::Value` keeps an object's keys sorted, and slots follow the order
/// written (a row given as an array is in that order).
fn field_orders(text: &str) -> HashMap<String, Vec<String>> {
    use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};

    /// The names of an object's keys in order; nothing for a list. (Any other value is no
    /// table, which `parse_tables` refuses: no order is needed then.)
    struct Keys(Vec<String>);
    impl<'de> Deserialize<'de> for Keys {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Keys, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Keys;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object or a list")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                    let mut keys = Vec::new();
                    while let Some(key) = map.next_key::<String>()? {
                        map.next_value::<IgnoredAny>()?;
                        keys.push(key);
                    }
                    Ok(Keys(keys))
                }
                fn visit_seq<A: serde::de::SeqAccess<'de>>(
                    self,
                    mut seq: A,
                ) -> Result<Keys, A::Error> {
                    while seq.next_element::<IgnoredAny>()?.is_some() {}
                    Ok(Keys(Vec::new()))
                }
            }
            d.deserialize_any(V)
        }
    }

    /// The tables' fields, in order.
    struct Tables(HashMap<String, Vec<String>>);
    impl<'de> Deserialize<'de> for Tables {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Tables, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Tables;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tables, A::Error> {
                    let mut tables = HashMap::new();
                    while let Some(key) = map.next_key::<String>()? {
                        let fields = map.next_value::<Keys>()?;
                        tables.insert(key, fields.0);
                    }
                    Ok(Tables(tables))
                }
            }
            d.deserialize_map(V)
        }
    }

    /// The manifest's "tables", the rest skipped.
    struct Top(HashMap<String, Vec<String>>);
    impl<'de> Deserialize<'de> for Top {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Top, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Top;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
                    let mut tables = HashMap::new();
                    while let Some(key) = map.next_key::<String>()? {
                        if key == "tables" {
                            tables = map.next_value::<Tables>()?.0;
                        } else {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                    Ok(Top(tables))
                }
            }
            d.deserialize_map(V)
        }
    }

    serde_json::from_str::<Top>(text)
        .map(|top| top.0)
        .unwrap_or_default()
}

/// `"schedules": {"cleanup": {"every_ms": 60000, "handler": "cleanup"}}`: recurring entries,
/// each kept once under its name.
pub(super) fn parse_schedules(
    schedules: &Value,
) -> Result<Vec<crate::app::due::NamedSchedule>, String> {
    let shape = "\"schedules\" must be an object of \"name\": {\"every_ms\": milliseconds, \
                 \"handler\": \"function\"}";
    if schedules.is_null() {
        return Ok(Vec::new());
    }
    let schedules = schedules.as_object().ok_or(shape)?;
    schedules
        .iter()
        .map(|(name, schedule)| {
            let bad = |what: String| format!("schedule {name:?}: {what}");
            let schedule = schedule.as_object().ok_or_else(|| bad(shape.into()))?;
            const KEYS: [&str; 2] = ["every_ms", "handler"];
            if let Some(key) = schedule.keys().find(|k| !KEYS.contains(&k.as_str())) {
                return Err(bad(unknown_key(key, &KEYS, shape)));
            }
            let every_ms = schedule
                .get("every_ms")
                .and_then(Value::as_i64)
                .filter(|ms| *ms >= 1)
                .ok_or_else(|| bad("\"every_ms\" must be an integer of 1 or more".into()))?;
            let handler = schedule
                .get("handler")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("\"handler\" must name a function".into()))?;
            Ok(crate::app::due::NamedSchedule {
                name: name.clone(),
                every_ms,
                handler: handler.to_string(),
            })
        })
        .collect()
}
