//! Declared request shapes: what a route's body, query parameters and path parameters must be,
//! as `app.json` declares them, and the check that turns a request's values into those types or
//! refuses it with a message naming the field.
//!
//! The check runs where the body is parsed (the HTTP thread), so a request that does not match
//! costs the owner nothing and writes nothing. A handler then sees values of the declared
//! types: integers for `int`, floats for `float` (an integer in the body is widened), and the
//! declared defaults for absent optional values.
//!
//! It knows JSON values and script values; it must not know HTTP (the caller turns a refusal
//! into a 400) or tables.

use rhai::{Array, Dynamic, Map};
use serde_json::Value;

use crate::script::value;

/// A declared type, with whether it may be absent and what stands in for it then.
#[derive(Clone, Debug)]
pub struct Shape {
    kind: Kind,
    /// May be absent (or null). Implied by a default.
    optional: bool,
    /// What a handler sees for an absent value; checked against `kind` at load.
    default: Option<Dynamic>,
}

#[derive(Clone, Debug)]
enum Kind {
    Any,
    Bool,
    Int {
        min: Option<i64>,
        max: Option<i64>,
    },
    Float {
        min: Option<f64>,
        max: Option<f64>,
    },
    /// `min_len`/`max_len` in characters, what a person counts; `min_bytes`/`max_bytes` in
    /// UTF-8 bytes, what storage and a client's buffer count. Both may be given.
    String {
        min_len: Option<usize>,
        max_len: Option<usize>,
        min_bytes: Option<usize>,
        max_bytes: Option<usize>,
    },
    Array {
        items: Box<Shape>,
        min_items: Option<usize>,
        max_items: Option<usize>,
    },
    /// `fields` by name (the manifest's JSON objects are read sorted), the order they are
    /// checked in. With `extra`, undeclared fields pass, their names checked against `keys`
    /// and their values against `values` when declared (an object used as a map); without,
    /// the first one refuses the value.
    Object {
        fields: Vec<(String, Shape)>,
        extra: bool,
        keys: Option<Box<Shape>>,
        values: Option<Box<Shape>>,
    },
}

/// What a route declares of its request; empty for a route declared as a bare handler name.
#[derive(Clone, Debug, Default)]
pub struct Declared {
    pub body: Option<Shape>,
    /// Query parameters by name. Undeclared ones pass as text.
    pub query: Vec<(String, Shape)>,
    /// Path parameters declared with a type, in the path (`{id:int}`) or under `"params"`; the
    /// others are text.
    pub params: Vec<(String, Shape)>,
}

/// Where a refused value was: it decides how the message names it.
#[derive(Clone, Copy)]
enum Place<'a> {
    /// The body itself.
    Body,
    /// A field of the body, by its path: `player`, `lines[2].qty`.
    Field(Path<'a>),
    Query(&'a str),
    Param(&'a str),
    /// An undeclared field's name, in words: `the field name "" in "put"`.
    Name(&'a str, &'a Place<'a>),
}

impl std::fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Body => f.write_str("the body"),
            Place::Field(path) => write!(f, "\"{path}\""),
            Place::Query(name) | Place::Param(name) => f.write_str(name),
            Place::Name(name, within) => {
                write!(f, "the field name {:?} in {within}", shorten(name))
            }
        }
    }
}

/// A value's path in the body, written out only when a message names it: checking a batch of
/// a thousand entries must not format a thousand paths that no message uses.
#[derive(Clone, Copy)]
enum Path<'a> {
    /// A field of the body: `player`.
    Top(&'a str),
    /// A field of the object at a path: `order.lines`.
    Member(&'a Path<'a>, &'a str),
    /// An item of the array at a path (the body's own items have none): `lines[2]`.
    Item(Option<&'a Path<'a>>, usize),
}

impl<'a> Path<'a> {
    /// The field `name` of the object at `parent` (`None`: the body).
    fn member(parent: Option<&'a Path<'a>>, name: &'a str) -> Path<'a> {
        match parent {
            Some(parent) => Path::Member(parent, name),
            None => Path::Top(name),
        }
    }
}

impl std::fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names are the client's when a type takes undeclared fields: one may be as long as
        // the body.
        match self {
            Path::Top(name) => f.write_str(&shorten(name)),
            Path::Member(parent, name) => write!(f, "{parent}.{}", shorten(name)),
            Path::Item(Some(parent), i) => write!(f, "{parent}[{i}]"),
            Path::Item(None, i) => write!(f, "[{i}]"),
        }
    }
}

const SCALARS: [&str; 5] = ["any", "bool", "int", "float", "string"];

impl Declared {
    pub fn is_empty(&self) -> bool {
        self.body.is_none() && self.query.is_empty() && self.params.is_empty()
    }

    /// The route's declarations from its manifest entry (an object beside `"handler"`) and the
    /// typed parameters of its path pattern, whose parameters must each take a whole segment
    /// (`{name}` or `{name:type}`) and have distinct names. A parameter with bounds is typed
    /// under `"params"` instead, which the pattern has no room for. `route` names the route in
    /// errors.
    pub(crate) fn parse(route: &str, entry: &Value, path: &str) -> Result<Declared, String> {
        let mut declared = Declared::default();
        let mut names = Vec::new();
        for segment in path.split('/') {
            let Some(inner) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) else {
                if segment.contains(['{', '}']) {
                    return Err(format!(
                        "route {route:?}: a parameter takes a whole segment (/{{name}}/), not \
                         part of {segment:?}"
                    ));
                }
                continue;
            };
            let name = inner.split_once(':').map_or(inner, |(name, _)| name);
            if !rhai::is_valid_identifier(name) {
                return Err(format!(
                    "route {route:?}: {segment:?} is not a parameter: write {{name}} or \
                     {{name:type}}, with a name like request.params.name"
                ));
            }
            if names.contains(&name) {
                return Err(format!(
                    "route {route:?}: the parameter {name} appears twice"
                ));
            }
            names.push(name);
            let Some((name, kind)) = inner.split_once(':') else {
                continue;
            };
            if !SCALARS.contains(&kind) {
                return Err(format!(
                    "route {route:?}: a path parameter is {{name}} or {{name:type}} with a type \
                     from {SCALARS:?}, not {{{inner}}}"
                ));
            }
            let shape = Shape::parse(&Value::String(kind.into()), "")?;
            declared.params.push((name.to_string(), shape));
        }
        let Some(entry) = entry.as_object() else {
            return Ok(declared);
        };
        if let Some(body) = entry.get("body") {
            let shape = Shape::parse(body, "body").map_err(|e| format!("route {route:?}: {e}"))?;
            declared.body = Some(shape);
        }
        if let Some(query) = entry.get("query") {
            let query = query.as_object().ok_or_else(|| {
                format!("route {route:?}: \"query\" must be an object of parameter: type")
            })?;
            for (name, shape) in query {
                let at = format!("query.{name}");
                let shape =
                    Shape::parse(shape, &at).map_err(|e| format!("route {route:?}: {e}"))?;
                if matches!(shape.kind, Kind::Array { .. } | Kind::Object { .. }) {
                    return Err(format!(
                        "route {route:?}: {at}: a query parameter is one of {SCALARS:?}"
                    ));
                }
                declared.query.push((name.clone(), shape));
            }
        }
        if let Some(params) = entry.get("params") {
            let params = params.as_object().ok_or_else(|| {
                format!("route {route:?}: \"params\" must be an object of parameter: type")
            })?;
            for (name, shape) in params {
                let at = format!("params.{name}");
                if !names.contains(&name.as_str()) {
                    let has = if names.is_empty() {
                        "its path has no parameters".to_string()
                    } else {
                        format!("its path has {}", names.join(", "))
                    };
                    return Err(format!(
                        "route {route:?}: {at}: {name} is not a parameter of the path ({has})"
                    ));
                }
                if declared.params.iter().any(|(typed, _)| typed == name) {
                    return Err(format!(
                        "route {route:?}: {at}: {name} is typed in the path already; give its \
                         type in one place, as {{{name}}} with \"params\" or as {{{name}:type}}"
                    ));
                }
                let shape =
                    Shape::parse(shape, &at).map_err(|e| format!("route {route:?}: {e}"))?;
                if matches!(shape.kind, Kind::Array { .. } | Kind::Object { .. }) {
                    return Err(format!(
                        "route {route:?}: {at}: a path parameter is one of {SCALARS:?}"
                    ));
                }
                if shape.optional || shape.default.is_some() {
                    return Err(format!(
                        "route {route:?}: {at}: a path parameter is never absent: it takes no \
                         \"optional\" or \"default\""
                    ));
                }
                declared.params.push((name.clone(), shape));
            }
        }
        Ok(declared)
    }

    /// The body as the handler will see it, or the message of the 400 that refuses it.
    pub fn check_body(&self, body: Dynamic) -> Result<Dynamic, String> {
        match &self.body {
            Some(shape) => shape.check(body, Place::Body),
            None => Ok(body),
        }
    }

    /// Each declared query parameter converted from its text (absent ones given their
    /// defaults), or the message of the 400 that refuses the query.
    pub fn check_query(&self, query: &mut Vec<(String, Dynamic)>) -> Result<(), String> {
        for (name, shape) in &self.query {
            let mut found = false;
            for (key, value) in query.iter_mut().filter(|(key, _)| key == name) {
                found = true;
                *value = shape.check_text(std::mem::take(value), Place::Query(key))?;
            }
            if !found {
                match (&shape.default, shape.optional) {
                    (Some(default), _) => query.push((name.clone(), default.clone())),
                    (None, true) => {}
                    (None, false) if matches!(shape.kind, Kind::Any) => {}
                    (None, false) => {
                        return Err(format!(
                            "the query parameter {name} is required: {}",
                            shape.describe()
                        ))
                    }
                }
            }
        }
        Ok(())
    }

    /// Each typed path parameter converted from its text.
    pub fn check_params(&self, params: &mut [(String, Dynamic)]) -> Result<(), String> {
        for (name, shape) in &self.params {
            for (key, value) in params.iter_mut().filter(|(key, _)| key == name) {
                *value = shape.check_text(std::mem::take(value), Place::Param(key))?;
            }
        }
        Ok(())
    }
}

/// A string's length in characters and in bytes against declared bounds. Characters are
/// counted (a pass over the text) only when the byte length cannot decide: a string of n bytes
/// holds between n/4 and n characters.
fn check_str(
    text: &str,
    (min_len, max_len): (Option<usize>, Option<usize>),
    (min_bytes, max_bytes): (Option<usize>, Option<usize>),
    place: &Place,
) -> Result<(), String> {
    let bytes = text.len();
    let surely_within = max_len.is_none_or(|max| bytes <= max)
        && min_len.is_none_or(|min| bytes.div_ceil(4) >= min);
    if !surely_within {
        let chars = text.chars().count();
        if outside(chars, min_len, max_len) {
            let length = length(min_len, max_len, "character").expect("bounds are declared");
            return Err(format!("{place} must be {length}, not {chars}"));
        }
    }
    if outside(bytes, min_bytes, max_bytes) {
        let length = length(min_bytes, max_bytes, "byte").expect("bounds are set");
        return Err(format!("{place} must be {length}, not {bytes}"));
    }
    Ok(())
}

fn bad(at: &str, message: impl std::fmt::Display) -> String {
    if at.is_empty() {
        message.to_string()
    } else {
        format!("{at}: {message}")
    }
}

/// Every key a type declared as an object may have, of one type or another.
const TYPE_KEYS: [&str; 16] = [
    "type",
    "optional",
    "default",
    "min",
    "max",
    "min_len",
    "max_len",
    "min_bytes",
    "max_bytes",
    "items",
    "min_items",
    "max_items",
    "fields",
    "extra",
    "keys",
    "values",
];

/// The type an object declares (`"type"`, or implied by the keys it has), once every key is
/// checked to be one that type takes.
fn declared_type<'a>(
    object: &'a serde_json::Map<String, Value>,
    at: &str,
) -> Result<&'a str, String> {
    let type_name = match object.get("type") {
        Some(Value::String(name)) => name.as_str(),
        Some(_) => return Err(bad(at, "\"type\" must be a name")),
        None if object.contains_key("fields") => "object",
        None if object.contains_key("items") => "array",
        None if object.contains_key("keys") || object.contains_key("values") => "object",
        None => {
            // A key no type takes is what went wrong (`"fieldz"`): name it.
            let unknown = object.keys().find(|key| !TYPE_KEYS.contains(&key.as_str()));
            return Err(bad(
                at,
                match unknown {
                    Some(key) => crate::script::error::unknown_key(
                        key,
                        &TYPE_KEYS,
                        "an object type needs \"type\"",
                    ),
                    None => "an object type needs \"type\"".to_string(),
                },
            ));
        }
    };
    let keys: &[&str] = match type_name {
        "any" | "bool" => &[],
        "int" | "float" => &["min", "max"],
        "string" => &["min_len", "max_len", "min_bytes", "max_bytes"],
        "array" => &["items", "min_items", "max_items"],
        "object" => &["fields", "extra", "keys", "values"],
        other => {
            return Err(bad(
                at,
                format!(
                    "unknown type {other:?}: the types are any, bool, int, float, string, \
                     array and object"
                ),
            ))
        }
    };
    for key in object.keys() {
        if !["type", "optional", "default"].contains(&key.as_str()) && !keys.contains(&key.as_str())
        {
            let takes = match crate::script::error::near(key, keys) {
                Some(near) => format!(": did you mean {near:?}?"),
                None if keys.is_empty() => String::new(),
                None => format!(" (it takes {keys:?})"),
            };
            return Err(bad(at, format!("{type_name} does not take {key:?}{takes}")));
        }
    }
    Ok(type_name)
}

/// The bounds of a type declared as an object, read from its keys.
struct Bounds<'a> {
    object: &'a serde_json::Map<String, Value>,
    /// Names the type in errors.
    at: &'a str,
}

impl Bounds<'_> {
    /// The bound `key`, if given, read by `read`; `what` names what it must be.
    fn bound<T>(
        &self,
        key: &str,
        read: impl FnOnce(&Value) -> Option<T>,
        what: &str,
    ) -> Result<Option<T>, String> {
        match self.object.get(key) {
            None => Ok(None),
            Some(v) => read(v)
                .map(Some)
                .ok_or_else(|| bad(self.at, format!("{key:?} must be {what}"))),
        }
    }

    fn int(&self, key: &str) -> Result<Option<i64>, String> {
        self.bound(key, Value::as_i64, "an integer")
    }

    fn float(&self, key: &str) -> Result<Option<f64>, String> {
        self.bound(key, Value::as_f64, "a number")
    }

    fn count(&self, key: &str) -> Result<Option<usize>, String> {
        let read = |v: &Value| v.as_u64().and_then(|n| usize::try_from(n).ok());
        self.bound(key, read, "a count (0 or more)")
    }

    /// An error when both bounds are set and the minimum is above the maximum.
    fn ordered<T: PartialOrd>(
        &self,
        min: Option<T>,
        max: Option<T>,
        what: &str,
    ) -> Result<(), String> {
        match min.zip(max) {
            Some((min, max)) if min > max => Err(bad(
                self.at,
                format!("{what}: the minimum is above the maximum"),
            )),
            _ => Ok(()),
        }
    }

    fn int_kind(&self) -> Result<Kind, String> {
        let (min, max) = (self.int("min")?, self.int("max")?);
        self.ordered(min, max, "int")?;
        Ok(Kind::Int { min, max })
    }

    fn float_kind(&self) -> Result<Kind, String> {
        let (min, max) = (self.float("min")?, self.float("max")?);
        self.ordered(min, max, "float")?;
        Ok(Kind::Float { min, max })
    }

    fn string_kind(&self) -> Result<Kind, String> {
        let (min_len, max_len) = (self.count("min_len")?, self.count("max_len")?);
        let (min_bytes, max_bytes) = (self.count("min_bytes")?, self.count("max_bytes")?);
        self.ordered(min_len, max_len, "string")?;
        self.ordered(min_bytes, max_bytes, "min_bytes and max_bytes")?;
        // A character is 1 to 4 bytes: bounds that no string meets would refuse every
        // request, which is a mistake to show at load, not in production.
        if min_len.zip(max_bytes).is_some_and(|(a, b)| a > b)
            || min_bytes
                .zip(max_len)
                .is_some_and(|(a, b)| a > b.saturating_mul(4))
        {
            return Err(bad(
                self.at,
                "no string fits both the character and the byte bounds (a character is 1 to 4 \
                 bytes)",
            ));
        }
        Ok(Kind::String {
            min_len,
            max_len,
            min_bytes,
            max_bytes,
        })
    }

    fn array_kind(&self) -> Result<Kind, String> {
        let items = match self.object.get("items") {
            Some(items) => Shape::parse(items, &format!("{}[]", self.at))?,
            None => Shape::any(),
        };
        let (min_items, max_items) = (self.count("min_items")?, self.count("max_items")?);
        self.ordered(min_items, max_items, "array")?;
        Ok(Kind::Array {
            items: Box::new(items),
            min_items,
            max_items,
        })
    }

    fn object_kind(&self) -> Result<Kind, String> {
        let (object, at) = (self.object, self.at);
        let map = object.contains_key("keys") || object.contains_key("values");
        let extra = match object.get("extra") {
            None => map || !object.contains_key("fields"),
            Some(Value::Bool(false)) if map => {
                return Err(bad(
                    at,
                    "\"keys\" and \"values\" are for fields not named in \"fields\", which \
                     \"extra\": false refuses",
                ))
            }
            Some(Value::Bool(extra)) => *extra,
            Some(_) => return Err(bad(at, "\"extra\" must be true or false")),
        };
        let within = |what: &str| {
            if at.is_empty() {
                what.to_string()
            } else {
                format!("{at} {what}")
            }
        };
        let keys = match object.get("keys") {
            None => None,
            Some(keys) => Some(Box::new(key_shape(keys, &within("keys"))?)),
        };
        let values = match object.get("values") {
            None => None,
            Some(values) => Some(Box::new(Shape::parse(values, &within("values"))?)),
        };
        let fields = match object.get("fields") {
            None => Vec::new(),
            Some(Value::Object(fields)) => fields
                .iter()
                .map(|(name, shape)| {
                    let inner = if at.is_empty() || at == "body" {
                        name.clone()
                    } else {
                        format!("{at}.{name}")
                    };
                    Ok((name.clone(), Shape::parse(shape, &inner)?))
                })
                .collect::<Result<_, String>>()?,
            Some(_) => return Err(bad(at, "\"fields\" must be an object of name: type")),
        };
        Ok(Kind::Object {
            fields,
            extra,
            keys,
            values,
        })
    }
}

/// The type of a map's field names (`"keys"`): a string type, never absent.
fn key_shape(declared: &Value, at: &str) -> Result<Shape, String> {
    let shape = Shape::parse(declared, at)?;
    if !matches!(shape.kind, Kind::String { .. }) {
        return Err(bad(
            at,
            "field names are strings: \"keys\" is a string type",
        ));
    }
    if shape.optional || shape.default.is_some() {
        return Err(bad(
            at,
            "a field name is never absent: it takes no \"optional\" or \"default\"",
        ));
    }
    Ok(shape)
}

impl Shape {
    /// A type from its declaration: a name (`"int"`, `"string?"` for an optional one), or an
    /// object with `"type"` and the bounds that type takes. `at` names it in errors.
    pub(crate) fn parse(declared: &Value, at: &str) -> Result<Shape, String> {
        if let Some(name) = declared.as_str() {
            return Shape::named(name, at);
        }
        let Some(object) = declared.as_object() else {
            return Err(bad(
                at,
                "a type is a name (\"int\") or an object with \"type\" and its bounds",
            ));
        };
        let type_name = declared_type(object, at)?;
        let bounds = Bounds { object, at };
        let kind = match type_name {
            "any" => Kind::Any,
            "bool" => Kind::Bool,
            "int" => bounds.int_kind()?,
            "float" => bounds.float_kind()?,
            "string" => bounds.string_kind()?,
            "array" => bounds.array_kind()?,
            _ => bounds.object_kind()?,
        };
        let mut shape = Shape {
            kind,
            optional: false,
            default: None,
        };
        match object.get("optional") {
            None => {}
            Some(Value::Bool(optional)) => shape.optional = *optional,
            Some(_) => return Err(bad(at, "\"optional\" must be true or false")),
        }
        if let Some(default) = object.get("default") {
            let value = shape
                .check(
                    value::to_dynamic(default),
                    Place::Field(Path::Top("default")),
                )
                .map_err(|e| bad(at, format!("the default does not fit: {e}")))?;
            shape.default = Some(value);
            shape.optional = true;
        }
        Ok(shape)
    }

    /// A type declared by its name alone: no bounds.
    fn named(name: &str, at: &str) -> Result<Shape, String> {
        let (name, optional) = match name.strip_suffix('?') {
            Some(name) => (name, true),
            None => (name, false),
        };
        let kind = match name {
            "any" => Kind::Any,
            "bool" => Kind::Bool,
            "int" => Kind::Int {
                min: None,
                max: None,
            },
            "float" => Kind::Float {
                min: None,
                max: None,
            },
            "string" => Kind::String {
                min_len: None,
                max_len: None,
                min_bytes: None,
                max_bytes: None,
            },
            "array" => Kind::Array {
                items: Box::new(Shape::any()),
                min_items: None,
                max_items: None,
            },
            "object" => Kind::Object {
                fields: Vec::new(),
                extra: true,
                keys: None,
                values: None,
            },
            _ => {
                return Err(bad(
                    at,
                    format!(
                        "unknown type {name:?}: the types are any, bool, int, float, string, \
                         array and object, with ? after one that may be absent"
                    ),
                ))
            }
        };
        Ok(Shape {
            kind,
            optional,
            default: None,
        })
    }

    fn any() -> Shape {
        Shape {
            kind: Kind::Any,
            optional: true,
            default: None,
        }
    }

    /// The type in words, for messages: "an integer from 1 to 100".
    fn describe(&self) -> String {
        match &self.kind {
            Kind::Any => "any value".into(),
            Kind::Bool => "true or false".into(),
            Kind::Int { min, max } => format!("an integer{}", bounds(*min, *max)),
            Kind::Float { min, max } => format!("a number{}", bounds(*min, *max)),
            Kind::String {
                min_len,
                max_len,
                min_bytes,
                max_bytes,
            } => {
                let lengths: Vec<String> = [
                    length(*min_len, *max_len, "character"),
                    length(*min_bytes, *max_bytes, "byte"),
                ]
                .into_iter()
                .flatten()
                .collect();
                if lengths.is_empty() {
                    "a string".into()
                } else {
                    format!("a string of {}", lengths.join(" and "))
                }
            }
            Kind::Array {
                min_items,
                max_items,
                ..
            } => match length(*min_items, *max_items, "item") {
                Some(length) => format!("an array of {length}"),
                None => "an array".into(),
            },
            Kind::Object { .. } => "an object".into(),
        }
    }

    /// `value` as the handler sees it, or the message that refuses it.
    fn check(&self, value: Dynamic, place: Place) -> Result<Dynamic, String> {
        if value.is_unit() {
            if let Some(default) = &self.default {
                return Ok(default.clone());
            }
            if self.optional || matches!(self.kind, Kind::Any) {
                return Ok(value);
            }
            if let Place::Body = place {
                return Err(format!("the body is required: {}", self.describe()));
            }
        }
        let mismatch = |value: &Dynamic| {
            Err(format!(
                "{place} must be {}, not {}",
                self.describe(),
                kind_of(value)
            ))
        };
        match &self.kind {
            Kind::Any => Ok(value),
            Kind::Bool if value.is_bool() => Ok(value),
            Kind::Int { min, max } => match value.as_int() {
                Ok(n) if outside(n, *min, *max) => {
                    Err(format!("{place} must be {}, not {n}", self.describe()))
                }
                Ok(_) => Ok(value),
                Err(_) => mismatch(&value),
            },
            Kind::Float { min, max } => {
                let n = match (value.as_float(), value.as_int()) {
                    (Ok(n), _) => n,
                    (_, Ok(n)) => n as f64,
                    _ => return mismatch(&value),
                };
                if outside(n, *min, *max) {
                    Err(format!("{place} must be {}, not {n}", self.describe()))
                } else {
                    Ok(Dynamic::from_float(n))
                }
            }
            Kind::String {
                min_len,
                max_len,
                min_bytes,
                max_bytes,
            } => {
                let Some(text) = value.read_lock::<rhai::ImmutableString>() else {
                    return mismatch(&value);
                };
                check_str(
                    &text,
                    (*min_len, *max_len),
                    (*min_bytes, *max_bytes),
                    &place,
                )?;
                drop(text);
                Ok(value)
            }
            Kind::Array {
                items,
                min_items,
                max_items,
            } => {
                if !value.is_array() {
                    return mismatch(&value);
                }
                let array = value.cast::<Array>();
                if outside(array.len(), *min_items, *max_items) {
                    let length = length(*min_items, *max_items, "item").expect("bounds are set");
                    return Err(format!("{place} must hold {length}, not {}", array.len()));
                }
                let parent = match place {
                    Place::Field(path) => Some(path),
                    _ => None,
                };
                let checked = array
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| {
                        items.check(item, Place::Field(Path::Item(parent.as_ref(), i)))
                    })
                    .collect::<Result<Array, String>>()?;
                Ok(Dynamic::from_array(checked))
            }
            Kind::Object {
                fields,
                extra,
                keys,
                values,
            } => {
                if !value.is_map() {
                    return mismatch(&value);
                }
                let mut map = value.cast::<Map>();
                let parent = match place {
                    Place::Field(path) => Some(path),
                    _ => None,
                };
                let path = |name| Path::member(parent.as_ref(), name);
                let declared = |key: &str| fields.iter().any(|(name, _)| name == key);
                if !*extra {
                    if let Some(key) = map.keys().find(|key| !declared(key)) {
                        let names: Vec<String> = fields
                            .iter()
                            .map(|(name, _)| format!("\"{name}\""))
                            .collect();
                        let takes = if names.is_empty() {
                            "no fields".to_string()
                        } else {
                            names.join(", ")
                        };
                        return Err(format!(
                            "unexpected field \"{}\": {place} takes {takes}",
                            path(key)
                        ));
                    }
                }
                for (name, shape) in fields {
                    let path = Path::member(parent.as_ref(), name);
                    match map.get_mut(name.as_str()) {
                        Some(value) => {
                            *value = shape.check(std::mem::take(value), Place::Field(path))?;
                        }
                        None => match &shape.default {
                            Some(default) => {
                                map.insert(name.as_str().into(), default.clone());
                            }
                            None if shape.optional || matches!(shape.kind, Kind::Any) => {}
                            None => {
                                return Err(format!("\"{path}\" is required: {}", shape.describe()))
                            }
                        },
                    }
                }
                if keys.is_some() || values.is_some() {
                    for (name, value) in map.iter_mut().filter(|(name, _)| !declared(name)) {
                        if let Some(keys) = keys {
                            keys.check_name(name, &place)?;
                        }
                        if let Some(values) = values {
                            let place = Place::Field(Path::member(parent.as_ref(), name));
                            *value = values.check(std::mem::take(value), place)?;
                        }
                    }
                }
                Ok(Dynamic::from_map(map))
            }
            Kind::Bool => mismatch(&value),
        }
    }

    /// An undeclared field's name against the declared type of names (a string type, as
    /// `parse` ensures), without making it a script value: a batch checks thousands.
    fn check_name(&self, name: &str, within: &Place) -> Result<(), String> {
        match &self.kind {
            Kind::String {
                min_len,
                max_len,
                min_bytes,
                max_bytes,
            } => check_str(
                name,
                (*min_len, *max_len),
                (*min_bytes, *max_bytes),
                &Place::Name(name, within),
            ),
            _ => Ok(()),
        }
    }

    /// A query or path parameter's text as the declared scalar, or the message that refuses
    /// it (quoting the text, which is all there is).
    fn check_text(&self, text: Dynamic, place: Place) -> Result<Dynamic, String> {
        let Ok(text) = text.into_immutable_string() else {
            unreachable!("query and path parameters arrive as text");
        };
        let refuse = || {
            Err(format!(
                "{place} must be {}, not {:?}",
                self.describe(),
                text.as_str()
            ))
        };
        match &self.kind {
            Kind::Int { min, max } => {
                let digits = text.strip_prefix('-').unwrap_or(&text);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return refuse();
                }
                match text.parse::<i64>() {
                    Ok(n) if !outside(n, *min, *max) => Ok(Dynamic::from_int(n)),
                    _ => refuse(),
                }
            }
            // As for an integer, no sign but `-`.
            Kind::Float { .. } if text.starts_with('+') => refuse(),
            Kind::Float { min, max } => match text.parse::<f64>() {
                Ok(n) if n.is_finite() && !outside(n, *min, *max) => Ok(Dynamic::from_float(n)),
                _ => refuse(),
            },
            Kind::Bool => match text.as_str() {
                "true" => Ok(Dynamic::TRUE),
                "false" => Ok(Dynamic::FALSE),
                _ => refuse(),
            },
            Kind::String { .. } => self.check(Dynamic::from(text), place),
            Kind::Any | Kind::Array { .. } | Kind::Object { .. } => Ok(Dynamic::from(text)),
        }
    }
}

/// A name as a message shows it: at most 40 characters, then an ellipsis.
fn shorten(name: &str) -> String {
    const SHOWN: usize = 40;
    match name.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{}…", &name[..end]),
        None => name.to_string(),
    }
}

fn outside<T: PartialOrd>(n: T, min: Option<T>, max: Option<T>) -> bool {
    min.is_some_and(|min| n < min) || max.is_some_and(|max| n > max)
}

/// " from 1 to 100", " of at least 1", " of at most 100", or nothing.
fn bounds<T: std::fmt::Display>(min: Option<T>, max: Option<T>) -> String {
    match (min, max) {
        (Some(min), Some(max)) => format!(" from {min} to {max}"),
        (Some(min), None) => format!(" of at least {min}"),
        (None, Some(max)) => format!(" of at most {max}"),
        (None, None) => String::new(),
    }
}

/// "1 to 64 characters", "at least 1 character", "at most 64 characters", or `None`.
fn length(min: Option<usize>, max: Option<usize>, unit: &str) -> Option<String> {
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    Some(match (min, max) {
        (Some(min), Some(max)) => format!("{min} to {max} {unit}{}", plural(max)),
        (Some(min), None) => format!("at least {min} {unit}{}", plural(min)),
        (None, Some(max)) => format!("at most {max} {unit}{}", plural(max)),
        (None, None) => return None,
    })
}

/// What a value is, in the words of a message: "a string", "null".
fn kind_of(value: &Dynamic) -> &'static str {
    if value.is_unit() {
        "null"
    } else if value.is_bool() {
        "true or false"
    } else if value.is_int() {
        "an integer"
    } else if let Ok(f) = value.as_float() {
        // A body's integer past i64 arrives as a float (JSON has one kind of number): say so,
        // rather than call a number written without a fraction one with a fraction. Just past
        // i64::MIN rounds to -2^63 itself, which as an integer would have arrived as one.
        const EDGE: f64 = 9.223_372_036_854_775_808e18;
        if f.fract() == 0.0 && (f <= -EDGE || f >= EDGE) {
            "an integer out of range (integers run from -9223372036854775808 to \
             9223372036854775807)"
        } else {
            "a number with a fraction"
        }
    } else if value.is_string() {
        "a string"
    } else if value.is_array() {
        "an array"
    } else if value.is_map() {
        "an object"
    } else {
        "a value of another kind"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared(body: &str) -> Declared {
        let entry: Value =
            serde_json::from_str(&format!(r#"{{"handler": "h", "body": {body}}}"#)).expect("json");
        Declared::parse("POST /x", &entry, "/x").expect("declares")
    }

    fn check(declared: &Declared, body: &str) -> Result<Value, String> {
        let value = value::to_dynamic(&serde_json::from_str(body).expect("json"));
        declared
            .check_body(value)
            .map(|v| value::to_json(&v, &crate::state::schema::Schema::default()).expect("to json"))
    }

    const SCOREBOARD: &str = r#"{"fields": {"player": {"type": "string", "min_len": 1,
        "max_len": 64}, "score": "int"}}"#;

    #[test]
    fn the_scoreboards_post_and_its_refusals() {
        let d = declared(SCOREBOARD);
        assert!(check(&d, r#"{"player": "ann", "score": 3}"#).is_ok());
        let cases = [
            (
                r#"{"score": 1}"#,
                r#""player" is required: a string of 1 to 64 characters"#,
            ),
            (r#"{"player": "dee"}"#, r#""score" is required: an integer"#),
            (
                r#"{"player": "dee", "score": "1"}"#,
                r#""score" must be an integer, not a string"#,
            ),
            (
                r#"{"player": "dee", "score": 1.5}"#,
                r#""score" must be an integer, not a number with a fraction"#,
            ),
            (
                r#"{"player": "dee", "score": 99999999999999999999}"#,
                r#""score" must be an integer, not an integer out of range (integers run from -9223372036854775808 to 9223372036854775807)"#,
            ),
            (
                r#"{"player": "dee", "score": -9223372036854775809}"#,
                r#""score" must be an integer, not an integer out of range (integers run from -9223372036854775808 to 9223372036854775807)"#,
            ),
            (
                r#"{"player": "dee", "score": 9223372036854775808}"#,
                r#""score" must be an integer, not an integer out of range (integers run from -9223372036854775808 to 9223372036854775807)"#,
            ),
            (
                r#"{"player": "dee", "score": 1e3}"#,
                r#""score" must be an integer, not a number with a fraction"#,
            ),
            (
                r#"{"player": "", "score": 1}"#,
                r#""player" must be 1 to 64 characters, not 0"#,
            ),
            (
                r#"{"player": "dee", "score": 1, "extra": 1}"#,
                r#"unexpected field "extra": the body takes "player", "score""#,
            ),
            ("[1]", "the body must be an object, not an array"),
            ("null", "the body is required: an object"),
            (
                r#"{"player": null, "score": 1}"#,
                r#""player" must be a string of 1 to 64 characters, not null"#,
            ),
        ];
        for (body, message) in cases {
            assert_eq!(check(&d, body), Err(message.to_string()), "{body}");
        }
        // Characters, not bytes: 64 four-byte characters fit.
        let long = "\u{1F600}".repeat(64);
        assert!(check(&d, &format!(r#"{{"player": "{long}", "score": 1}}"#)).is_ok());
    }

    #[test]
    fn nested_values_are_named_by_their_path_and_converted() {
        let d = declared(
            r#"{"fields": {"lines": {"items": {"fields": {"qty": {"type": "int", "min": 1},
               "price": "float", "note": "string?", "gift": {"type": "bool", "default": false}}},
               "min_items": 1, "max_items": 2}}}"#,
        );
        assert_eq!(
            check(&d, r#"{"lines": [{"qty": 2, "price": 3}]}"#),
            Ok(serde_json::json!({"lines": [{"qty": 2, "price": 3.0, "gift": false}]}))
        );
        assert_eq!(
            check(
                &d,
                r#"{"lines": [{"qty": 2, "price": 3}, {"qty": 0, "price": 1}]}"#
            ),
            Err(r#""lines[1].qty" must be an integer of at least 1, not 0"#.into())
        );
        assert_eq!(
            check(&d, r#"{"lines": []}"#),
            Err(r#""lines" must hold 1 to 2 items, not 0"#.into())
        );
        assert_eq!(
            check(&d, r#"{"lines": [{"qty": 1, "price": 1, "x": 1}]}"#),
            Err(
                r#"unexpected field "lines[0].x": "lines[0]" takes "gift", "note", "price", "qty""#
                    .into()
            )
        );
    }

    #[test]
    fn query_and_path_parameters_convert_from_text() {
        let entry = serde_json::json!({"handler": "h",
            "query": {"n": {"type": "int", "min": 1, "max": 100, "default": 10}, "q": "string?",
                      "f": "float?", "b": "bool?"}});
        let d = Declared::parse("GET /items/{id:int}", &entry, "/items/{id:int}").expect("ok");
        let mut query: Vec<(String, Dynamic)> = Vec::new();
        d.check_query(&mut query).expect("defaults");
        assert_eq!(query[0].1.as_int(), Ok(10));
        for (text, refused) in [
            ("0", true),
            ("101", true),
            ("ten", true),
            ("", true),
            ("-", true),
            ("+5", true),
            ("100", false),
            ("007", false),
        ] {
            let mut query = vec![("n".to_string(), Dynamic::from(text))];
            let result = d.check_query(&mut query);
            assert_eq!(result.is_err(), refused, "{text:?}");
            if refused {
                assert_eq!(
                    result,
                    Err(format!("n must be an integer from 1 to 100, not {text:?}"))
                );
            }
        }
        let mut query = vec![("f".to_string(), Dynamic::from("+5"))];
        assert_eq!(
            d.check_query(&mut query),
            Err("f must be a number, not \"+5\"".into())
        );
        let mut query = vec![("b".to_string(), Dynamic::from("yes"))];
        assert_eq!(
            d.check_query(&mut query),
            Err("b must be true or false, not \"yes\"".into())
        );
        let mut params = vec![("id".to_string(), Dynamic::from("12"))];
        d.check_params(&mut params).expect("an integer");
        assert_eq!(params[0].1.as_int(), Ok(12));
        let mut params = vec![("id".to_string(), Dynamic::from("x"))];
        assert_eq!(
            d.check_params(&mut params),
            Err("id must be an integer, not \"x\"".into())
        );
        let entry = serde_json::json!({"handler": "h", "query": {"a": "any"}});
        let d = Declared::parse("GET /x", &entry, "/x").expect("ok");
        assert_eq!(d.check_query(&mut Vec::new()), Ok(()), "any may be absent");
        let entry = serde_json::json!({"handler": "h", "query": {"n": "int"}});
        let d = Declared::parse("GET /x", &entry, "/x").expect("ok");
        assert_eq!(
            d.check_query(&mut Vec::new()),
            Err("the query parameter n is required: an integer".into())
        );
    }

    #[test]
    fn mistakes_in_a_declaration_are_load_errors_that_name_them() {
        let refused = |body: &str| {
            let entry: Value =
                serde_json::from_str(&format!(r#"{{"handler": "h", "body": {body}}}"#)).unwrap();
            Declared::parse("POST /x", &entry, "/x").expect_err(body)
        };
        assert!(refused(r#""integer""#).contains("unknown type \"integer\""));
        assert!(refused(r#"{"type": "string", "max_length": 3}"#).contains("\"max_length\""));
        assert!(refused(r#"{"type": "int", "min": 5, "max": 1}"#).contains("above the maximum"));
        assert!(
            refused(r#"{"fields": {"a": {"type": "int", "min": 1, "default": 0}}}"#)
                .contains("the default does not fit")
        );
        assert!(refused(r#"{"fields": {"a": 3}}"#).contains("a: a type is a name"));
        let bad_param = Declared::parse("GET /x/{id:integer}", &Value::Null, "/x/{id:integer}");
        assert!(bad_param.expect_err("a bad type").contains("{id:integer}"));
        let bad_query = serde_json::json!({"query": {"q": "array"}});
        assert!(Declared::parse("GET /x", &bad_query, "/x")
            .expect_err("arrays are not query parameters")
            .contains("query.q"));
    }

    /// Character bounds decided from the byte length where it can, counted where it cannot:
    /// at the edges where the two differ most (four-byte characters).
    #[test]
    fn character_bounds_hold_at_the_edges_of_what_bytes_can_decide() {
        let d = declared(r#"{"fields": {"s": {"type": "string", "min_len": 3, "max_len": 4}}}"#);
        let face = "\u{1F600}";
        for (n, ok) in [(2, false), (3, true), (4, true), (5, false)] {
            let body = format!(r#"{{"s": "{}"}}"#, face.repeat(n));
            assert_eq!(check(&d, &body).is_ok(), ok, "{n} four-byte characters");
        }
        for (text, ok) in [
            ("ab", false),
            ("abc", true),
            ("abcd", true),
            ("abcde", false),
        ] {
            let body = format!(r#"{{"s": "{text}"}}"#);
            assert_eq!(check(&d, &body).is_ok(), ok, "{text}");
        }
        // Field names of a map, against a declared type of names.
        let d = declared(r#"{"keys": {"type": "string", "max_len": 2}}"#);
        assert!(check(&d, &format!(r#"{{"{face}{face}": 1}}"#)).is_ok());
        assert_eq!(
            check(&d, r#"{"abc": 1}"#),
            Err(r#"the field name "abc" in the body must be at most 2 characters, not 3"#.into())
        );
    }

    #[test]
    fn byte_bounds_count_utf8_bytes_beside_characters() {
        // "日本語" is 3 characters of 3 bytes each.
        let d = declared(r#"{"fields": {"s": {"type": "string", "max_bytes": 8}}}"#);
        assert_eq!(
            check(&d, r#"{"s": "日本語"}"#),
            Err(r#""s" must be at most 8 bytes, not 9"#.into())
        );
        assert!(
            check(&d, r#"{"s": "日本ab"}"#).is_ok(),
            "8 bytes, at the bound"
        );
        let d = declared(r#"{"fields": {"s": {"type": "string", "max_len": 3}}}"#);
        assert!(check(&d, r#"{"s": "日本語"}"#).is_ok(), "3 characters");
        let d = declared(
            r#"{"fields": {"s": {"type": "string", "min_len": 2, "max_len": 3,
               "min_bytes": 1, "max_bytes": 9}}}"#,
        );
        assert!(
            check(&d, r#"{"s": "日本語"}"#).is_ok(),
            "9 bytes, at both bounds"
        );
        assert_eq!(
            check(&d, r#"{"s": "a"}"#),
            Err(r#""s" must be 2 to 3 characters, not 1"#.into())
        );
        assert_eq!(
            check(&d, r#"{"s": "日本語x"}"#),
            Err(r#""s" must be 2 to 3 characters, not 4"#.into())
        );
        assert_eq!(
            check(&d, r#"{"s": 1}"#),
            Err(
                r#""s" must be a string of 2 to 3 characters and 1 to 9 bytes, not an integer"#
                    .into()
            )
        );
        let d = declared(r#"{"fields": {"s": {"type": "string", "min_bytes": 4}}}"#);
        assert_eq!(
            check(&d, r#"{}"#),
            Err(r#""s" is required: a string of at least 4 bytes"#.into())
        );
        assert_eq!(
            check(&d, r#"{"s": "abc"}"#),
            Err(r#""s" must be at least 4 bytes, not 3"#.into())
        );
        assert!(check(&d, r#"{"s": "é"}"#).is_err(), "2 bytes");
        assert!(check(&d, r#"{"s": "éé"}"#).is_ok(), "4 bytes");
    }

    /// The bundled key-value app's batch body.
    const BATCH: &str = r#"{"fields": {
        "put": {"type": "object", "keys": {"type": "string", "min_bytes": 1, "max_bytes": 256},
                "values": {"type": "string", "max_bytes": 65536}, "default": {}},
        "delete": {"type": "array", "items": {"type": "string", "min_bytes": 1,
                   "max_bytes": 256}, "default": []}}}"#;

    #[test]
    fn an_object_as_a_map_checks_each_name_and_value() {
        let d = declared(BATCH);
        assert_eq!(
            check(&d, r#"{"put": {"a": "1", "日本": ""}, "delete": ["b"]}"#),
            Ok(serde_json::json!({"put": {"a": "1", "日本": ""}, "delete": ["b"]}))
        );
        assert_eq!(
            check(&d, "{}"),
            Ok(serde_json::json!({"put": {}, "delete": []}))
        );
        let big = "x".repeat(70_000);
        let at_bound = "x".repeat(65_536);
        assert!(check(&d, &format!(r#"{{"put": {{"abc": "{at_bound}"}}}}"#)).is_ok());
        let cases = [
            (
                format!(r#"{{"put": {{"abc": "{big}"}}}}"#),
                r#""put.abc" must be at most 65536 bytes, not 70000"#.to_string(),
            ),
            (
                r#"{"put": {"abc": 1}}"#.to_string(),
                r#""put.abc" must be a string of at most 65536 bytes, not an integer"#.into(),
            ),
            (
                r#"{"put": {"": "v"}}"#.to_string(),
                r#"the field name "" in "put" must be 1 to 256 bytes, not 0"#.into(),
            ),
            (
                format!(r#"{{"put": {{"{}": "v"}}}}"#, "k".repeat(257)),
                format!(
                    r#"the field name "{}…" in "put" must be 1 to 256 bytes, not 257"#,
                    "k".repeat(40)
                ),
            ),
            (
                r#"{"put": []}"#.to_string(),
                r#""put" must be an object, not an array"#.into(),
            ),
        ];
        for (body, message) in cases {
            assert_eq!(check(&d, &body), Err(message), "{:.60}", body);
        }
        assert!(check(&d, &format!(r#"{{"put": {{"{}": "v"}}}}"#, "k".repeat(256))).is_ok());

        // Declared fields are checked as before, and are not held to `keys` or `values`.
        let d = declared(
            r#"{"fields": {"version": {"type": "int", "min": 1}}, "keys": {"type": "string",
               "max_bytes": 3}, "values": "float"}"#,
        );
        assert_eq!(
            check(&d, r#"{"version": 2, "a": 1, "b": 2.5}"#),
            Ok(serde_json::json!({"version": 2, "a": 1.0, "b": 2.5})),
            "an integer is widened for a float value"
        );
        assert_eq!(
            check(&d, r#"{"version": 0, "a": 1}"#),
            Err(r#""version" must be an integer of at least 1, not 0"#.into())
        );
        assert_eq!(
            check(&d, r#"{"a": 1}"#),
            Err(r#""version" is required: an integer of at least 1"#.into())
        );
        assert_eq!(
            check(&d, r#"{"version": 1, "a": "1"}"#),
            Err(r#""a" must be a number, not a string"#.into())
        );
        assert_eq!(
            check(&d, r#"{"version": 1, "abcd": 1}"#),
            Err(r#"the field name "abcd" in the body must be at most 3 bytes, not 4"#.into())
        );
        // `keys` alone leaves the values unchecked; it names an object type without "type".
        let d = declared(r#"{"keys": {"type": "string", "max_len": 1}}"#);
        assert!(check(&d, r#"{"a": [1], "b": null}"#).is_ok());
        assert!(check(&d, r#"{"ab": 1}"#).is_err());
    }

    #[test]
    fn path_parameters_take_bounds_under_params() {
        let entry = serde_json::json!({"handler": "put",
            "params": {"key": {"type": "string", "min_bytes": 1, "max_bytes": 256}},
            "body": {"fields": {"value": {"type": "string", "max_bytes": 65536}}}});
        let d = Declared::parse("PUT /kv/{key}", &entry, "/kv/{key}").expect("declares");
        let mut params = vec![("key".to_string(), Dynamic::from("k".repeat(256)))];
        d.check_params(&mut params).expect("256 bytes fit");
        assert_eq!(
            params[0].1.clone().into_string().ok(),
            Some("k".repeat(256))
        );
        let mut params = vec![("key".to_string(), Dynamic::from("k".repeat(300)))];
        assert_eq!(
            d.check_params(&mut params),
            Err("key must be 1 to 256 bytes, not 300".into())
        );
        let mut params = vec![("key".to_string(), Dynamic::from(""))];
        assert_eq!(
            d.check_params(&mut params),
            Err("key must be 1 to 256 bytes, not 0".into())
        );
        // Scalars other than strings convert from the text, as a typed path parameter does.
        let entry = serde_json::json!({"handler": "h",
            "params": {"id": {"type": "int", "min": 1}}});
        let d = Declared::parse("GET /x/{id}/{y}", &entry, "/x/{id}/{y}").expect("declares");
        let mut params = vec![
            ("id".to_string(), Dynamic::from("7")),
            ("y".to_string(), Dynamic::from("z")),
        ];
        d.check_params(&mut params).expect("fits");
        assert_eq!(params[0].1.as_int(), Ok(7));
        let mut params = vec![("id".to_string(), Dynamic::from("0"))];
        assert_eq!(
            d.check_params(&mut params),
            Err("id must be an integer of at least 1, not \"0\"".into())
        );

        let refused = |route: &str, params: Value| {
            let entry = serde_json::json!({"handler": "h", "params": params});
            let path = route.split_once(' ').expect("a route").1;
            Declared::parse(route, &entry, path).expect_err(route)
        };
        assert_eq!(
            refused("GET /kv/{key}", serde_json::json!({"id": "int"})),
            r#"route "GET /kv/{key}": params.id: id is not a parameter of the path (its path has key)"#
        );
        assert!(refused("GET /kv", serde_json::json!({"key": "string"}))
            .contains("its path has no parameters"));
        assert!(
            refused("GET /kv/{key:int}", serde_json::json!({"key": "int"}))
                .contains("key is typed in the path already")
        );
        assert!(
            refused("GET /kv/{key}", serde_json::json!({"key": "array"}))
                .contains("a path parameter is one of")
        );
        assert!(
            refused("GET /kv/{key}", serde_json::json!({"key": "string?"}))
                .contains("never absent")
        );
        assert!(refused("GET /kv/{key}", serde_json::json!(["key"]))
            .contains("\"params\" must be an object"));
        assert!(refused(
            "GET /kv/{key}",
            serde_json::json!({"key": {"type": "string", "max_byte": 3}})
        )
        .contains("params.key: string does not take \"max_byte\""));
    }

    #[test]
    fn mistakes_in_byte_bounds_and_maps_are_load_errors() {
        let refused = |body: &str| {
            let entry: Value =
                serde_json::from_str(&format!(r#"{{"handler": "h", "body": {body}}}"#)).unwrap();
            Declared::parse("POST /x", &entry, "/x").expect_err(body)
        };
        assert_eq!(
            refused(r#"{"fields": {"s": {"type": "string", "min_bytes": 5, "max_bytes": 4}}}"#),
            r#"route "POST /x": s: min_bytes and max_bytes: the minimum is above the maximum"#
        );
        assert!(refused(r#"{"type": "string", "max_bytes": -1}"#)
            .contains("\"max_bytes\" must be a count"));
        assert!(refused(r#"{"type": "string", "min_bytes": 1.5}"#)
            .contains("\"min_bytes\" must be a count"));
        assert!(
            refused(r#"{"type": "string", "min_len": 5, "max_bytes": 4}"#)
                .contains("no string fits")
        );
        assert!(
            refused(r#"{"type": "string", "max_len": 1, "min_bytes": 5}"#)
                .contains("no string fits")
        );
        assert_eq!(
            refused(r#"{"fields": {"m": {"type": "object", "keys": "int"}}}"#),
            r#"route "POST /x": m keys: field names are strings: "keys" is a string type"#
        );
        assert!(refused(r#"{"type": "object", "keys": "string?"}"#).contains("never absent"));
        assert!(
            refused(r#"{"type": "object", "values": "int", "extra": false}"#)
                .contains("\"extra\": false refuses")
        );
        assert!(
            refused(r#"{"type": "object", "keys": "string", "extra": false}"#)
                .contains("\"extra\": false refuses")
        );
        assert!(refused(r#"{"type": "object", "values": "integer"}"#)
            .contains("values: unknown type \"integer\""));
        assert_eq!(
            refused(r#"{"type": "object", "value": "int"}"#),
            r#"route "POST /x": body: object does not take "value": did you mean "values"?"#
        );
        assert!(refused(r#"{"type": "string", "max_byte": 3}"#)
            .ends_with(r#"string does not take "max_byte": did you mean "max_bytes"?"#));
        // Nothing near: what the type takes.
        assert!(refused(r#"{"type": "string", "width": 3}"#)
            .ends_with(r#"string does not take "width" (it takes ["min_len", "max_len", "min_bytes", "max_bytes"])"#));
        // A default is checked against `values` like any value.
        assert!(
            refused(r#"{"type": "object", "values": "int", "default": {"a": "x"}}"#)
                .contains("the default does not fit")
        );
    }

    /// A refused value deep in arrays, objects and maps is named by its whole path, as the
    /// messages were before paths were formatted lazily.
    #[test]
    fn deep_refusals_name_the_whole_path() {
        let d = declared(
            r#"{"fields": {"a": {"fields": {"b": {"items": {"fields": {"c": "int",
               "m": {"keys": {"type": "string", "min_bytes": 1}, "values": {"items": "int"}, "optional": true}}}}}}}}"#,
        );
        let refused = |d: &Declared, body: &str| check(d, body).map(drop);
        assert_eq!(
            refused(&d, r#"{"a": {"b": [{"c": 1}, {"c": 2}, {"c": "x"}]}}"#),
            Err(r#""a.b[2].c" must be an integer, not a string"#.into())
        );
        assert_eq!(
            refused(&d, r#"{"a": {"b": [{"c": 1, "m": {"k": [1, "x"]}}]}}"#),
            Err(r#""a.b[0].m.k[1]" must be an integer, not a string"#.into())
        );
        assert_eq!(
            refused(&d, r#"{"a": {"b": [{"c": 1, "m": {"": []}}]}}"#),
            Err(r#"the field name "" in "a.b[0].m" must be at least 1 byte, not 0"#.into())
        );
        assert_eq!(
            refused(&d, r#"{"a": {"b": [{"c": 1, "z": 1}]}}"#),
            Err(r#"unexpected field "a.b[0].z": "a.b[0]" takes "c", "m""#.into())
        );
        let d = declared(r#"{"items": {"fields": {"c": "int"}}}"#);
        assert_eq!(
            refused(&d, r#"[{"c": 1}, {"c": "x"}]"#),
            Err(r#""[1].c" must be an integer, not a string"#.into())
        );
        assert_eq!(
            refused(&d, r#"[{"c": 1}, {"d": 1}]"#),
            Err(r#"unexpected field "[1].d": "[1]" takes "c""#.into())
        );
        let d = declared(r#"{"items": {"items": "int"}}"#);
        assert_eq!(
            refused(&d, r#"[[1], [1, "x"]]"#),
            Err(r#""[1][1]" must be an integer, not a string"#.into())
        );
    }
}
