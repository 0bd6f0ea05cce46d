//! Settings and secrets: values that scripts read with `env("NAME")` without holding them.
//!
//! `app.json` declares the names (`"env"` for settings, `"secrets"` for secrets); the server
//! gives their values, from a file named on its command line or from its own environment, at
//! load and at every reload. A declared name without a value stops the load. A script can read
//! only declared names. A secret's value is kept out of what the server writes: its error
//! answers and its log lines say `[secret NAME]` where a secret's value would have been.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use rhai::ImmutableString;
use serde_json::Value;

/// The shortest secret: a shorter value could not be told from ordinary text (and kept out of
/// messages) without hiding that text too.
pub const SECRET_BYTES_MIN: usize = 8;

/// Where declared names find their values.
#[derive(Clone, Debug, Default)]
pub struct Environment {
    /// From a file (`NAME=value` lines), looked at before the process's environment.
    file: HashMap<String, String>,
    /// Missing values are empty rather than a load error: for tools that load an app for its
    /// tables (export, import, check), which run no handler.
    lenient: bool,
}

impl Environment {
    /// The process's environment alone.
    pub fn process() -> Environment {
        Environment::default()
    }

    /// A file of `NAME=value` lines (blank lines and lines starting with `#` are skipped; the
    /// value is the rest of the line, as written), then the process's environment.
    pub fn with_file(path: &Path) -> Result<Environment, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut file = HashMap::new();
        for (number, line) in text.lines().enumerate() {
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            // The line itself is not quoted: it may hold a secret.
            let Some((name, value)) = line.split_once('=') else {
                return Err(format!(
                    "{}:{}: a line of a secrets file is NAME=value",
                    path.display(),
                    number + 1
                ));
            };
            file.insert(name.trim().to_string(), value.to_string());
        }
        Ok(Environment {
            file,
            lenient: false,
        })
    }

    /// Every declared name has a value, empty if none is given: for loading an app only for
    /// its tables.
    pub fn lenient() -> Environment {
        Environment {
            file: HashMap::new(),
            lenient: true,
        }
    }

    fn value(&self, name: &str) -> Option<String> {
        self.file
            .get(name)
            .cloned()
            .or_else(|| std::env::var(name).ok())
            .or_else(|| self.lenient.then(String::new))
    }
}

/// The declared names of an app and their values. Invariant: every secret is at least
/// [`SECRET_BYTES_MIN`] bytes (unless loaded leniently, when none is ever shown).
#[derive(Debug, Default)]
pub(crate) struct Settings {
    values: HashMap<String, ImmutableString>,
    /// (name, text): each secret's value, and the forms it takes written inside a JSON
    /// string and inside Rhai's debug text of a string (`"` and `\\` escaped), where they
    /// differ.
    secrets: Vec<(String, String)>,
}

impl Settings {
    /// The manifest's `"env"` and `"secrets"`, each a list of names, with their values.
    pub(crate) fn resolve(manifest: &Value, environment: &Environment) -> Result<Settings, String> {
        let mut settings = Settings::default();
        for (key, secret) in [("env", false), ("secrets", true)] {
            let names = match &manifest[key] {
                Value::Null => continue,
                Value::Array(names) => names,
                _ => {
                    return Err(format!(
                        "\"{key}\" must be a list of names: [\"NAME\", ...]"
                    ))
                }
            };
            for name in names {
                let Some(name) = name.as_str().filter(|n| is_name(n)) else {
                    return Err(format!(
                        "\"{key}\": {name} is not a name: letters, digits and _, not starting \
                         with a digit"
                    ));
                };
                if settings.values.contains_key(name) {
                    return Err(format!("\"{key}\": {name:?} is declared twice"));
                }
                let Some(value) = environment.value(name) else {
                    return Err(format!(
                        "\"{key}\": {name:?} has no value: set {name} in the server's \
                         environment, or in the file given with --secrets"
                    ));
                };
                if secret && !environment.lenient && value.len() < SECRET_BYTES_MIN {
                    return Err(format!(
                        "\"{key}\": {name:?} is {} bytes: a secret must be at least \
                         {SECRET_BYTES_MIN}, or it could not be kept out of messages (declare a \
                         setting under \"env\")",
                        value.len()
                    ));
                }
                if secret && !value.is_empty() {
                    let json = serde_json::to_string(&value).expect("a string serializes");
                    let debug = format!("{value:?}");
                    let mut forms = vec![value.clone()];
                    for quoted in [json, debug] {
                        let inner = quoted[1..quoted.len() - 1].to_string();
                        if !forms.contains(&inner) {
                            forms.push(inner);
                        }
                    }
                    for form in forms {
                        settings.secrets.push((name.to_string(), form));
                    }
                }
                settings.values.insert(name.to_string(), value.into());
            }
        }
        Ok(settings)
    }

    pub(crate) fn get(&self, name: &str) -> Option<&ImmutableString> {
        self.values.get(name)
    }

    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }

    pub(crate) fn has_secrets(&self) -> bool {
        !self.secrets.is_empty()
    }

    /// `text` with every secret's value (in any of its forms) replaced by `[secret NAME]`.
    /// Every occurrence is found in `text` as it is, and overlapping ones are hidden as one
    /// stretch, so that no part of any secret is left when two share bytes.
    pub(crate) fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        // (start, end, name) of each occurrence, overlapping ones included.
        let mut found: Vec<(usize, usize, &str)> = Vec::new();
        for (name, form) in &self.secrets {
            let mut from = 0;
            while let Some(at) = text[from..].find(form.as_str()) {
                let start = from + at;
                found.push((start, start + form.len(), name));
                // The next occurrence may start inside this one.
                from = start + text[start..].chars().next().map_or(1, char::len_utf8);
            }
        }
        if found.is_empty() {
            return Cow::Borrowed(text);
        }
        // At one start, the longest first: it names the stretch.
        found.sort_by_key(|&(start, end, _)| (start, std::cmp::Reverse(end)));
        let mut out = String::with_capacity(text.len());
        let mut done = 0;
        let mut at = 0;
        while at < found.len() {
            let (start, mut end, name) = found[at];
            at += 1;
            while at < found.len() && found[at].0 < end {
                end = end.max(found[at].1);
                at += 1;
            }
            out.push_str(&text[done..start]);
            out.push_str(&format!("[secret {name}]"));
            done = end;
        }
        out.push_str(&text[done..]);
        Cow::Owned(out)
    }

    /// Every string of `value` (keys too) redacted.
    pub(crate) fn redact_json(&self, value: &mut Value) {
        match value {
            Value::String(text) => {
                if let Cow::Owned(redacted) = self.redact(text) {
                    *text = redacted;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.redact_json(item)),
            Value::Object(fields) => {
                let redacted = std::mem::take(fields)
                    .into_iter()
                    .map(|(key, mut field)| {
                        self.redact_json(&mut field);
                        (self.redact(&key).into_owned(), field)
                    })
                    .collect();
                *fields = redacted;
            }
            _ => {}
        }
    }
}

/// `secret_eq(a, b)`: whether two strings are equal, in a time that does not depend on where
/// they first differ (a `==` that stops at the first difference lets a client find a key a byte
/// at a time by timing its answers). The length is not hidden.
pub(crate) fn secret_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // Kept from being turned back into an early exit.
    std::hint::black_box(difference) == 0
}

fn is_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_longest_first_and_settings_are_not() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("secrets");
        std::fs::write(
            &path,
            "# keys\nAPI_KEY=k-0123456789\nOUTER=k-0123456789-and-more\nLIMIT=7\n",
        )
        .expect("writes");
        let environment = Environment::with_file(&path).expect("reads");
        let manifest = serde_json::json!({"env": ["LIMIT"], "secrets": ["API_KEY", "OUTER"]});
        let settings = Settings::resolve(&manifest, &environment).expect("resolves");
        assert_eq!(settings.get("LIMIT").map(|v| v.as_str()), Some("7"));
        assert_eq!(
            settings.redact("got k-0123456789-and-more, k-0123456789 and 7"),
            "got [secret OUTER], [secret API_KEY] and 7"
        );
        // Where two overlap, the stretch of both is hidden.
        assert_eq!(
            settings.redact("xk-0123456789-and-more!"),
            "x[secret OUTER]!"
        );
        let mut body =
            serde_json::json!({"error": "k-0123456789", "k-0123456789": [1, "k-0123456789"]});
        settings.redact_json(&mut body);
        assert_eq!(
            body,
            serde_json::json!({"error": "[secret API_KEY]", "[secret API_KEY]": [1, "[secret API_KEY]"]})
        );
    }

    #[test]
    fn secret_eq_is_string_equality() {
        for (a, b) in [("", ""), ("k", "k"), ("key-1", "key-1"), ("é", "é")] {
            assert!(secret_eq(a, b), "{a} {b}");
        }
        for (a, b) in [
            ("", "k"),
            ("key-1", "key-2"),
            ("key", "key-1"),
            ("xey-1", "key-1"),
        ] {
            assert!(!secret_eq(a, b), "{a} {b}");
        }
    }

    #[test]
    fn a_missing_or_short_value_or_a_bad_name_is_refused() {
        let resolve = |manifest: Value| Settings::resolve(&manifest, &Environment::process());
        let error = resolve(serde_json::json!({"env": ["PURE_TEST_SURELY_UNSET_7"]})).unwrap_err();
        assert!(
            error.contains("\"PURE_TEST_SURELY_UNSET_7\" has no value"),
            "{error}"
        );
        assert!(resolve(serde_json::json!({"env": ["1X"]})).is_err());
        assert!(resolve(serde_json::json!({"env": "X"})).is_err());
        // A short secret: PATH is set in any test's environment, so use a file.
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("secrets");
        std::fs::write(&path, "SHORT=abc\n").expect("writes");
        let error = Settings::resolve(
            &serde_json::json!({"secrets": ["SHORT"]}),
            &Environment::with_file(&path).expect("reads"),
        )
        .unwrap_err();
        assert!(error.contains("a secret must be at least 8"), "{error}");
        assert!(!error.contains("abc"), "{error}");
        // Leniently, nothing is missing.
        let lenient = Settings::resolve(
            &serde_json::json!({"secrets": ["PURE_TEST_SURELY_UNSET_7"]}),
            &Environment::lenient(),
        )
        .expect("lenient");
        assert_eq!(
            lenient.get("PURE_TEST_SURELY_UNSET_7").map(|v| v.as_str()),
            Some("")
        );
        assert!(!lenient.has_secrets());
    }
}
