//! Errors of loading an app and of running a handler, with script positions.
//!
//! An app's `.rhai` files are compiled as one text (so that functions in one file can call those in
//! another); [`SourceMap`] turns a line of that text back into a file and its own line.

use std::any::Any;
use std::fmt;

use rhai::{EvalAltResult, Position};
use serde_json::{json, Value};

use crate::script::api_error::ApiError;
use crate::script::limits::TIME_LIMIT;
use crate::state::schema::Schema;

/// Where each file starts in the compiled text.
#[derive(Clone, Debug, Default)]
pub(crate) struct SourceMap {
    /// (file name, first line in the compiled text, 1-based), in order.
    files: Vec<(String, usize)>,
}

impl SourceMap {
    pub(crate) fn push(&mut self, file: String, first_line: usize) {
        self.files.push((file, first_line));
    }

    /// The file, line and column of `position` (all zero/empty when it has none).
    pub(crate) fn locate(&self, position: Position) -> (String, usize, usize) {
        let (Some(line), column) = (position.line(), position.position().unwrap_or(0)) else {
            return (String::new(), 0, 0);
        };
        match self.files.iter().rev().find(|(_, first)| *first <= line) {
            Some((file, first)) => (file.clone(), line - first + 1, column),
            None => (String::new(), line, column),
        }
    }
}

/// Why an app did not load.
#[derive(Debug)]
pub enum LoadError {
    /// The directory or a file in it could not be read.
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// `app.json` is not valid JSON or not of the expected shape.
    Manifest {
        path: std::path::PathBuf,
        /// Line and column (1-based) of what the message is about, when it could be found.
        at: Option<(usize, usize)>,
        message: String,
    },
    /// A script does not compile, or holds a mistake every call would hit (a route's handler
    /// defined with other than one parameter among them).
    Compile {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Io { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            LoadError::Manifest {
                path,
                at: Some((line, column)),
                message,
            } => write!(f, "{}:{line}:{column}: {message}", path.display()),
            LoadError::Manifest { path, message, .. } => {
                write!(f, "{}: {message}", path.display())
            }
            LoadError::Compile {
                file,
                line,
                column,
                message,
            } => {
                write!(f, "{file}:{line}:{column}: {message}")
            }
        }
    }
}

impl std::error::Error for LoadError {}

/// Why a handler produced no value.
#[derive(Debug, Clone)]
pub enum HandlerError {
    /// `throw` in the script: a thrown map with a `status` field (400 to 599) chooses status
    /// and body, any other value is a 400 with `{"error": text}`.
    Thrown { status: u16, body: Value },
    /// A guard's own answer of 400 or more (`respond(401, body, headers)`): sent as it is, its
    /// headers (`www-authenticate`, `retry-after`) included.
    Refused {
        status: u16,
        headers: Vec<(String, String)>,
        body: Value,
    },
    /// A bug in the script: a runtime error, a write in a read handler, a bad return value.
    Script {
        handler: String,
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    /// A limit stopped the handler (operations, call depth, sizes, wall clock).
    Limit {
        handler: String,
        file: String,
        line: usize,
        column: usize,
        limit: String,
    },
    /// Writes are refused (poisoned store, full log, full queue, shutting down).
    Unavailable { reason: String },
    /// No handler of that name.
    NoSuchHandler { handler: String },
    /// The handler's call panicked: a bug in Pure or in Rhai, not in the script. Whatever the
    /// call had changed was rolled back as far as the undo log knew it; a runtime treats the
    /// state in memory as no longer trusted.
    Panicked { handler: String, message: String },
}

impl HandlerError {
    pub fn status(&self) -> u16 {
        match self {
            HandlerError::Thrown { status, .. } | HandlerError::Refused { status, .. } => *status,
            HandlerError::Script { .. }
            | HandlerError::Limit { .. }
            | HandlerError::NoSuchHandler { .. }
            | HandlerError::Panicked { .. } => 500,
            HandlerError::Unavailable { .. } => 503,
        }
    }

    /// With every secret's value replaced by its name (`[secret NAME]`): an error answer and
    /// the log line of a failed call never show one.
    pub(crate) fn redact(&mut self, settings: &crate::script::settings::Settings) {
        let redact = |text: &mut String| {
            if let std::borrow::Cow::Owned(redacted) = settings.redact(text) {
                *text = redacted;
            }
        };
        match self {
            HandlerError::Thrown { body, .. } => settings.redact_json(body),
            HandlerError::Refused { body, headers, .. } => {
                settings.redact_json(body);
                for (_, value) in headers {
                    redact(value);
                }
            }
            HandlerError::Script { message, .. } => redact(message),
            HandlerError::Panicked { message, .. } => redact(message),
            HandlerError::Unavailable { reason } => redact(reason),
            HandlerError::Limit { .. } | HandlerError::NoSuchHandler { .. } => {}
        }
    }

    /// The answer's body: like every error answer of the server, an object with `"error"`
    /// (what went wrong) and `"status"` (the answer's status), and fields that tell more.
    pub fn to_json(&self) -> Value {
        let mut body = self.details();
        if let Value::Object(fields) = &mut body {
            fields
                .entry("status")
                .or_insert_with(|| Value::from(self.status()));
        }
        body
    }

    fn details(&self) -> Value {
        match self {
            HandlerError::Thrown { body, .. } | HandlerError::Refused { body, .. } => body.clone(),
            HandlerError::Script {
                handler,
                file,
                line,
                column,
                message,
            } => json!({
                "error": message, "handler": handler, "file": file, "line": line, "column": column
            }),
            HandlerError::Limit {
                handler,
                file,
                line,
                column,
                limit,
            } => json!({
                "error": format!("limit exceeded: {limit}"), "limit": limit,
                "handler": handler, "file": file, "line": line, "column": column
            }),
            HandlerError::Unavailable { reason } => json!({ "error": reason }),
            HandlerError::NoSuchHandler { handler } => {
                json!({ "error": format!("no handler named {handler}"), "handler": handler })
            }
            HandlerError::Panicked { handler, message } => json!({
                "error": format!("internal error: the call of {handler} panicked: {message}"),
                "handler": handler
            }),
        }
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandlerError::Script {
                handler,
                file,
                line,
                column,
                message,
            } => {
                write!(f, "{handler} ({file}:{line}:{column}): {message}")
            }
            HandlerError::Limit {
                handler,
                file,
                line,
                column,
                limit,
            } => {
                write!(
                    f,
                    "{handler} ({file}:{line}:{column}): limit exceeded: {limit}"
                )
            }
            other => write!(f, "{} {}", other.status(), other.to_json()),
        }
    }
}

impl std::error::Error for HandlerError {}

/// What an arithmetic error adds to Rhai's message (`Addition overflow: 9223372036854775807 + 1`).
const OVERFLOW_HINT: &str = "integers are 64-bit and an overflow stops the handler; bound the \
     inputs, or use checked_add, checked_sub or checked_mul, which give () when the result does \
     not fit";

/// The innermost error of a chain of nested function calls, and the innermost known position.
fn innermost(error: &EvalAltResult) -> (&EvalAltResult, Position) {
    let mut current = error;
    let mut position = error.position();
    while let EvalAltResult::ErrorInFunctionCall(_, _, inner, _)
    | EvalAltResult::ErrorInModule(_, inner, _) = current
    {
        current = inner;
        if !current.position().is_none() {
            position = current.position();
        }
    }
    (current, position)
}

/// The error a handler call ended with, as the caller sees it.
pub(crate) fn from_eval(
    error: &EvalAltResult,
    handler: &str,
    definition: Position,
    sources: &SourceMap,
    schema: &Schema,
) -> HandlerError {
    let (inner, position) = innermost(error);
    let position = if position.is_none() {
        definition
    } else {
        position
    };
    let (file, line, column) = sources.locate(position);
    let handler = handler.to_string();
    let limit = |limit: &str| HandlerError::Limit {
        handler: handler.clone(),
        file: file.clone(),
        line,
        column,
        limit: limit.to_string(),
    };
    match inner {
        EvalAltResult::ErrorRuntime(value, _) => {
            if let Some(api) = value.read_lock::<ApiError>() {
                return HandlerError::Script {
                    handler,
                    file,
                    line,
                    column,
                    message: api.0.clone(),
                };
            }
            match thrown(value, schema) {
                Ok(thrown) => thrown,
                Err(message) => HandlerError::Script {
                    handler,
                    file,
                    line,
                    column,
                    message,
                },
            }
        }
        EvalAltResult::ErrorTooManyOperations(_) => limit("operations"),
        EvalAltResult::ErrorStackOverflow(_) => limit("call depth"),
        EvalAltResult::ErrorDataTooLarge(what, _) => limit(&format!("size ({what})")),
        EvalAltResult::ErrorTerminated(value, _) => {
            match value.read_lock::<rhai::ImmutableString>() {
                Some(name) => limit(name.as_str()),
                None => limit(TIME_LIMIT),
            }
        }
        EvalAltResult::ErrorTooManyVariables(_) => limit("variables"),
        EvalAltResult::ErrorArithmetic(what, _) => HandlerError::Script {
            handler,
            file,
            line,
            column,
            message: format!("{what}: {OVERFLOW_HINT}"),
        },
        other => {
            let mut message = other.to_string();
            // Rhai appends " (line l, position c)"; the position is reported in its own fields.
            if let Some(cut) = message.rfind(" (line ") {
                message.truncate(cut);
            }
            HandlerError::Script {
                handler,
                file,
                line,
                column,
                message,
            }
        }
    }
}

/// Whether `throw value` refuses the request as the script meant (rather than being the
/// script's mistake, which Rhai reports at the `throw`'s position).
pub(crate) fn is_refusal(value: &rhai::Dynamic, schema: &Schema) -> bool {
    thrown(value, schema).is_ok()
}

/// A thrown value: a map with an integer `status` in 400..=599 chooses status and body; any
/// other `status` is the script's mistake (answering with a success is `respond`'s job), and so
/// is a value nested deeper than the depth rule allows.
fn thrown(value: &rhai::Dynamic, schema: &Schema) -> Result<HandlerError, String> {
    // Before its text or JSON is made, both of which walk it.
    if !crate::state::depth::within(value) {
        return Err(crate::state::depth::too_deep("the thrown value"));
    }
    if let Some(map) = value.read_lock::<rhai::Map>() {
        if let Some(status) = map.get("status") {
            match status.as_int() {
                Ok(s) if (400..=599).contains(&s) => {}
                Ok(s) => {
                    return Err(format!(
                        "a thrown status must be 400 to 599, not {s} (to answer with another \
                         status and keep the writes, return respond({s}, body))"
                    ))
                }
                Err(_) => {
                    return Err(format!(
                        "a thrown status must be an integer from 400 to 599, not {}",
                        status.type_name()
                    ))
                }
            }
        }
        // A map without a status is a 400, its body the map, as a thrown text is.
        let status = map.get("status").map_or(Some(400), |s| s.as_int().ok());
        if let Some(status) = status {
            let mut body = match crate::script::value::to_json(value, schema) {
                Ok(Value::Object(object)) => object,
                _ => serde_json::Map::new(),
            };
            if !body.get("error").is_some_and(Value::is_string) {
                let text = match body.get("message") {
                    Some(Value::String(m)) => m.clone(),
                    _ => format!("status {status}"),
                };
                body.insert("error".into(), Value::String(text));
            }
            return Ok(HandlerError::Thrown {
                status: status as u16,
                body: Value::Object(body),
            });
        }
    }
    let text = match value.read_lock::<rhai::ImmutableString>() {
        Some(s) => s.to_string(),
        None => value.to_string(),
    };
    Ok(HandlerError::Thrown {
        status: 400,
        body: json!({ "error": text, "status": 400 }),
    })
}

/// `unknown key "handle": did you mean "handler"?` where one of `known` is near `key` (a
/// prefix either way, or up to two edits, one for every three letters: `"wat"` is not near
/// `"max"`), else `unknown key "x": ` and what the place takes.
pub(crate) fn unknown_key(key: &str, known: &[&str], takes: &str) -> String {
    match near(key, known) {
        Some(near) => format!("unknown key {key:?}: did you mean {near:?}?"),
        None => format!("unknown key {key:?}: {takes}"),
    }
}

/// The known name `key` is probably a misspelling of, if one is near enough: a short key must
/// be nearer (one edit in three letters) to be taken for another.
pub(crate) fn near<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    known.iter().copied().find(|k| {
        let edits = edits(k, key);
        k.starts_with(key) || key.starts_with(k) || (edits <= 2 && 3 * edits <= key.len() + 1)
    })
}

/// The Levenshtein distance between two short names.
pub(crate) fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// The message a panic carried, for an error that names it.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        text.to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}
