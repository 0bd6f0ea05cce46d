//! What a handler answers: a value (status 200), or with `respond(status, body[, headers])` a
//! status, a body and headers of its choosing.
//!
//! A `respond` answer is an answer, not an error: a write handler that returns one commits,
//! whatever its status. Refusing a request and rolling it back stays `throw`'s job.
//!
//! The checks are made when `respond` is called, so that a bad status or header is a script
//! error at the call's line (a write then rolls back), never a response the HTTP layer cannot
//! send.

use rhai::{Dynamic, EvalAltResult, Map};
use serde_json::Value;

use crate::script::api_error::api_error;
use crate::script::json::Json;
use crate::state::depth::{too_deep, within};
use crate::state::schema::Schema;

/// A handler's answer as the HTTP layer sends it.
///
/// Invariants: `status` is in 200..=599; each header name is a lower-case HTTP token, none is
/// one the server owns ([`RESERVED_HEADERS`]), and each value is visible ASCII, spaces and
/// tabs; names are distinct, at most [`HEADERS_MAX`] of them, of at most [`HEADER_BYTES_MAX`]
/// bytes in all; a 204, 205 or 304 answer has a `null` body (and is sent without one).
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// JSON text, written once from the handler's value.
    pub body: Json,
}

impl Answer {
    /// A plain answer: status 200, no headers of the handler's.
    pub fn ok(body: Json) -> Answer {
        Answer {
            status: 200,
            headers: Vec::new(),
            body,
        }
    }
}

/// An answer equals a JSON value when it is that value as a plain 200 answer (what a handler
/// that does not call `respond` returns).
impl PartialEq<Value> for Answer {
    fn eq(&self, other: &Value) -> bool {
        self.status == 200 && self.headers.is_empty() && self.body == *other
    }
}

/// Headers the server writes itself: a handler may not set them.
pub const RESERVED_HEADERS: &[&str] = &[
    "connection",
    "content-length",
    "content-type",
    "date",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "x-request-id",
];

/// What `respond` returns to the script: kept as script values until the handler returns it.
#[derive(Clone, Debug)]
pub struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Dynamic,
}

impl Response {
    pub(crate) fn answer(&self, schema: &Schema) -> Result<Answer, String> {
        Ok(Answer {
            status: self.status,
            headers: self.headers.clone(),
            body: Json::write_value(&self.body, schema)?,
        })
    }
}

/// `respond(status, body, headers)`: the checks of every argument, in one place for Rhai and
/// the compiled path.
pub(crate) fn respond(
    status: i64,
    body: Dynamic,
    headers: Option<&Map>,
) -> Result<Response, String> {
    if !(200..=599).contains(&status) {
        return Err(format!(
            "respond: the status must be 200 to 599, not {status} (throw a map with a status of \
             400 to 599 to refuse a request and roll its writes back)"
        ));
    }
    if has_no_body(status as u16) && !body.is_unit() {
        return Err(format!(
            "respond: a {status} answer has no body: pass () as the body"
        ));
    }
    // A response inside a response's body is no JSON, and nested a level per call (without a
    // copy: `respond(200, take(r))`) it made a value as deep as the call's time allowed, which
    // neither the depth rule nor Rhai's size checks look into: a million levels overflowed the
    // server's stack when Rhai dropped them (issue 36). The depth rule first, so that the
    // second walk is bounded by it.
    if !within(&body) {
        return Err(format!("respond: {}", too_deep("the body")));
    }
    if holds_response(&body) {
        return Err(
            "respond: the body holds a response (what respond returns): a body is JSON values"
                .into(),
        );
    }
    let mut checked: Vec<(String, String)> = Vec::new();
    let mut bytes = 0;
    for (name, value) in headers.into_iter().flatten() {
        if checked.len() == HEADERS_MAX {
            return Err(format!(
                "respond: at most {HEADERS_MAX} headers, not {}",
                headers.map_or(0, Map::len)
            ));
        }
        let name = name.to_ascii_lowercase();
        if name.len() > HEADER_NAME_BYTES_MAX {
            return Err(format!(
                "respond: a header name of {} bytes (at most {HEADER_NAME_BYTES_MAX})",
                name.len()
            ));
        }
        if checked.iter().any(|(n, _)| *n == name) {
            return Err(format!(
                "respond: the header {name} is given twice (names are not case-sensitive)"
            ));
        }
        if name.is_empty() || !name.bytes().all(is_token_byte) {
            return Err(format!(
                "respond: {name:?} is not a header name (letters, digits and !#$%&'*+-.^_`|~)"
            ));
        }
        if RESERVED_HEADERS.contains(&name.as_str()) {
            return Err(format!("respond: the server sets the {name} header itself"));
        }
        let text = if let Ok(i) = value.as_int() {
            i.to_string()
        } else if let Some(s) = value.read_lock::<rhai::ImmutableString>() {
            s.to_string()
        } else {
            return Err(format!(
                "respond: the value of header {name} must be a string or an integer, not {}",
                value.type_name()
            ));
        };
        if !text
            .bytes()
            .all(|b| b == b'\t' || (b' '..=b'~').contains(&b))
        {
            return Err(format!(
                "respond: the value of header {name} must be printable ASCII on one line"
            ));
        }
        bytes += name.len() + text.len();
        if bytes > HEADER_BYTES_MAX {
            return Err(format!(
                "respond: the headers take more than {HEADER_BYTES_MAX} bytes"
            ));
        }
        checked.push((name, text));
    }
    Ok(Response {
        status: status as u16,
        headers: checked,
        body,
    })
}

/// Whether `value` is or holds (in its arrays and maps) a [`Response`].
fn holds_response(value: &Dynamic) -> bool {
    if value.is::<Response>() {
        return true;
    }
    if let Some(items) = value.read_lock::<rhai::Array>() {
        return items.iter().any(holds_response);
    }
    if let Some(map) = value.read_lock::<Map>() {
        return map.values().any(holds_response);
    }
    false
}

/// Whether an answer with this status is sent without a body (RFC 9110: 204, 205, 304).
pub fn has_no_body(status: u16) -> bool {
    matches!(status, 204 | 205 | 304)
}

/// Headers one answer may set, and their bytes (names and values): what a client's head
/// reading takes without complaint (the server reads heads of up to 32 KiB).
pub const HEADERS_MAX: usize = 64;
pub const HEADER_NAME_BYTES_MAX: usize = 256;
pub const HEADER_BYTES_MAX: usize = 16 << 10;

/// RFC 9110's `tchar`.
pub(crate) fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

pub(crate) fn register(engine: &mut rhai::Engine) {
    engine.register_type_with_name::<Response>("Response");
    engine.register_fn(
        "respond",
        |status: i64, body: Dynamic| -> Result<Response, Box<EvalAltResult>> {
            respond(status, body, None).map_err(api_error)
        },
    );
    engine.register_fn(
        "respond",
        |status: i64, body: Dynamic, headers: Map| -> Result<Response, Box<EvalAltResult>> {
            respond(status, body, Some(&headers)).map_err(api_error)
        },
    );
}
