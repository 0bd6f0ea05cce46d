//! The manifest's `"cors"`: which web pages on other origins may call the app from a browser.
//! Checked at load; the HTTP layer answers preflights and adds the headers.

use serde_json::Value;

use crate::script::respond::is_token_byte;

/// What `"cors"` declares. Invariants (checked by [`Cors::parse`]): each origin is
/// `scheme://host[:port]` in lower case, or `null`; methods are among the manifest's; header
/// names are lower-case HTTP tokens; `credentials` is never combined with any origin (`"*"`),
/// which browsers refuse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cors {
    /// `None`: any origin (`"*"`).
    pub origins: Option<Vec<String>>,
    /// Methods a page may use; by default every method the routes use.
    pub methods: Vec<String>,
    /// Request headers a page may send beyond the CORS-safelisted ones.
    pub headers: Vec<String>,
    /// Response headers a page may read beyond the safelisted ones (`x-request-id` always).
    pub expose: Vec<String>,
    /// Seconds a browser may keep a preflight's answer.
    pub max_age: u32,
    /// Whether pages may send cookies and credentials.
    pub credentials: bool,
}

const KEYS: &[&str] = &[
    "origins",
    "methods",
    "headers",
    "expose",
    "max_age",
    "credentials",
];

impl Cors {
    /// Parses `"cors"` of the manifest; `route_methods` are the methods the routes use.
    pub(crate) fn parse(value: &Value, route_methods: &[String]) -> Result<Option<Cors>, String> {
        if value.is_null() {
            return Ok(None);
        }
        let Some(object) = value.as_object() else {
            return Err(
                "\"cors\" must be an object: {\"origins\": [\"https://example.com\"], \
                        \"methods\": [...], \"headers\": [...], \"expose\": [...], \
                        \"max_age\": 600, \"credentials\": false}"
                    .into(),
            );
        };
        if let Some(unknown) = object.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(format!(
                "\"cors\": unknown key {unknown:?} (the keys are {})",
                KEYS.join(", ")
            ));
        }
        let origins = match &object.get("origins") {
            Some(Value::String(any)) if any == "*" => None,
            Some(Value::Array(list)) if !list.is_empty() => Some(
                list.iter()
                    .map(|o| o.as_str().ok_or(()).and_then(|o| origin(o).ok_or(())))
                    .collect::<Result<Vec<_>, ()>>()
                    .map_err(|()| {
                        "\"cors\".\"origins\": each origin is \"scheme://host\" or \
                         \"scheme://host:port\", without a path (\"https://app.example.com\"), \
                         or \"null\""
                            .to_string()
                    })?,
            ),
            _ => {
                return Err(
                    "\"cors\".\"origins\" must be \"*\" (any) or a non-empty list of \
                            origins (\"https://app.example.com\")"
                        .into(),
                )
            }
        };
        let names = |key: &str| -> Result<Vec<String>, String> {
            match object.get(key) {
                None => Ok(Vec::new()),
                Some(Value::Array(list)) => list
                    .iter()
                    .map(|h| match h.as_str() {
                        Some(h) if !h.is_empty() && h.bytes().all(is_token_byte) => {
                            Ok(h.to_ascii_lowercase())
                        }
                        _ => Err(format!("\"cors\".\"{key}\": {h} is not a header name")),
                    })
                    .collect(),
                Some(_) => Err(format!("\"cors\".\"{key}\" must be a list of header names")),
            }
        };
        let methods = match object.get("methods") {
            None => {
                let mut methods = route_methods.to_vec();
                methods.sort();
                methods.dedup();
                methods
            }
            Some(Value::Array(list)) => list
                .iter()
                .map(|m| match m.as_str().map(str::to_ascii_uppercase) {
                    Some(m) if route_methods.contains(&m) => Ok(m),
                    _ => Err(format!(
                        "\"cors\".\"methods\": {m} is not a method of the app's routes \
                         ({route_methods:?})"
                    )),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err("\"cors\".\"methods\" must be a list of methods".into()),
        };
        let max_age = match object.get("max_age") {
            None => 600,
            Some(v) => v
                .as_u64()
                .filter(|&s| s <= 86_400)
                .ok_or("\"cors\".\"max_age\" must be seconds from 0 to 86400")?
                as u32,
        };
        let credentials = match object.get("credentials") {
            None => false,
            Some(v) => v
                .as_bool()
                .ok_or("\"cors\".\"credentials\" must be true or false")?,
        };
        if credentials && origins.is_none() {
            return Err(
                "\"cors\": browsers refuse credentials from any origin (\"*\"): list \
                        the origins"
                    .into(),
            );
        }
        Ok(Some(Cors {
            origins,
            methods,
            headers: names("headers")?,
            expose: names("expose")?,
            max_age,
            credentials,
        }))
    }

    /// Whether a page on `origin` (the request's `Origin` header) may call the app.
    pub fn allows(&self, origin: &str) -> bool {
        match &self.origins {
            // `null` too: a page that "*" lets call the app gains nothing by hiding its origin.
            None => true,
            Some(list) => list.iter().any(|o| o.eq_ignore_ascii_case(origin)),
        }
    }
}

/// `scheme://host[:port]` in lower case, or `null` (the origin of a sandboxed frame, a local
/// file or a redirect, which only a list that holds it allows), or `None`.
fn origin(text: &str) -> Option<String> {
    if text == "null" {
        return Some(text.to_string());
    }
    let (scheme, rest) = text.split_once("://")?;
    let scheme_ok = !scheme.is_empty()
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b));
    // An IPv6 host is in brackets, and may hold colons.
    let (host, port) = match rest.strip_prefix('[') {
        Some(inner) => {
            let (address, after) = inner.split_once(']')?;
            let port = match after {
                "" => None,
                _ => Some(after.strip_prefix(':')?),
            };
            let ok = !address.is_empty()
                && address
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.');
            (if ok { "[v6]" } else { "" }, port)
        }
        None => match rest.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (rest, None),
        },
    };
    let host_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.[]".contains(&b));
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.parse::<u16>().is_ok());
    (scheme_ok && host_ok && port_ok).then(|| text.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(value: Value) -> Result<Option<Cors>, String> {
        Cors::parse(&value, &["GET".to_string(), "POST".to_string()])
    }

    #[test]
    fn a_declaration_with_defaults_and_every_mistake_refused() {
        let cors = parse(
            json!({"origins": ["https://App.example.com", "http://localhost:3000",
            "http://[::1]", "http://[::1]:8080"]}),
        )
        .expect("valid")
        .expect("declared");
        assert!(cors.allows("https://app.example.com"));
        assert!(cors.allows("http://localhost:3000"));
        assert!(!cors.allows("http://localhost:3001"));
        assert!(cors.allows("http://[::1]") && cors.allows("http://[::1]:8080"));
        assert!(!cors.allows("https://evil.example.com"));
        assert!(!cors.allows("null"), "only when listed");
        let null = parse(json!({"origins": ["null"]}))
            .expect("valid")
            .expect("declared");
        assert!(null.allows("null") && !null.allows("https://app.example.com"));
        assert_eq!(cors.methods, ["GET", "POST"]);
        assert_eq!((cors.max_age, cors.credentials), (600, false));
        let any = parse(json!({"origins": "*", "headers": ["Authorization"]}))
            .expect("valid")
            .expect("declared");
        assert!(any.allows("https://anything.example"));
        assert!(any.allows("null"), "any page may write anyway");
        assert_eq!(any.headers, ["authorization"]);
        assert_eq!(parse(Value::Null), Ok(None));
        for (bad, says) in [
            (json!([]), "must be an object"),
            (json!({"origin": "*"}), "unknown key \"origin\""),
            (json!({"origins": []}), "non-empty list"),
            (json!({"origins": ["https://a.com/path"]}), "without a path"),
            (json!({"origins": ["a.com"]}), "without a path"),
            (json!({"origins": ["http://[::1"]}), "without a path"),
            (json!({"origins": ["http://[::1]x"]}), "without a path"),
            (json!({"origins": ["http://a.com:"]}), "without a path"),
            (
                json!({"origins": "*", "methods": ["DELETE"]}),
                "not a method",
            ),
            (
                json!({"origins": "*", "headers": ["a b"]}),
                "not a header name",
            ),
            (json!({"origins": "*", "max_age": -1}), "max_age"),
            (json!({"origins": "*", "credentials": true}), "credentials"),
        ] {
            let error = parse(bad.clone()).expect_err("refused");
            assert!(error.contains(says), "{bad}: {error}");
        }
    }
}
