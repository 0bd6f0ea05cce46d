//! Settings and secrets: `env("NAME")` reads what app.json declares, with values from a secrets
//! file (or the environment), in both engines; a secret's value never shows in an error answer
//! or a log line, whatever the script does with it.

use std::sync::{Arc, Mutex};

use pure_lang::{
    App, Environment, Execution, HandlerError, Limits, LogLine, LogSink, Request, Tables, WriteSet,
};
use serde_json::json;

const KEY: &str = "sk-live-0123456789";

const MANIFEST: &str = r#"{"name": "m", "routes": {}, "tables": {"t": ["n"]},
    "env": ["LIMIT"], "secrets": ["API_KEY"]}"#;

const SCRIPT: &str = r#"
fn limit(request) { parse_int(env("LIMIT")) * 2 }
fn key_length(request) { env("API_KEY").len() }
fn throw_it(request) { throw #{ status: 401, error: `wrong key: the key is ${env("API_KEY")}` }; }
fn throw_text(request) { throw env("API_KEY"); }
fn log_it(request) { warn(`the key is ${env("API_KEY")}`); 1 }
fn by_name(request) { env(request.body) }
"#;

#[derive(Default)]
struct Lines(Mutex<Vec<String>>);

impl LogSink for Lines {
    fn log(&self, line: &LogLine<'_>) {
        self.0.lock().expect("lines").push(line.message.to_string());
    }
}

fn app(interpreted: bool) -> (App, Arc<Lines>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("secrets");
    std::fs::write(&path, format!("LIMIT=21\nAPI_KEY={KEY}\n")).expect("writes");
    let environment = Environment::with_file(&path).expect("reads the file");
    let mut app = App::from_sources_in(
        MANIFEST,
        vec![("a.rhai".into(), SCRIPT.into())],
        Limits::default(),
        &environment,
    )
    .expect("loads");
    app.set_interpreted(interpreted);
    let lines = Arc::new(Lines::default());
    app.set_log(lines.clone());
    (app, lines, dir)
}

fn call(app: &App, handler: &str, body: serde_json::Value) -> Result<String, HandlerError> {
    let request = Request {
        body: pure_lang::to_dynamic(&body),
        ..Request::default()
    };
    let mut tables = Tables::new(1);
    let mut writes = WriteSet::default();
    app.run_write(handler, &request, &mut tables, &mut writes)
        .map(|answer| answer.body.to_string())
}

#[test]
fn env_reads_declared_values_in_both_engines() {
    let (compiled, _, _dir) = app(false);
    for handler in ["limit", "key_length", "throw_it", "log_it"] {
        assert_eq!(
            compiled.execution(handler),
            Some(Execution::Compiled),
            "{handler}"
        );
    }
    for interpreted in [false, true] {
        let (app, _, _dir) = app(interpreted);
        assert_eq!(call(&app, "limit", json!(null)).expect("runs"), "42");
        assert_eq!(
            call(&app, "key_length", json!(null)).expect("runs"),
            KEY.len().to_string()
        );
        // A name computed at run time that is not declared: a 500 naming what is.
        match call(&app, "by_name", json!("HOME")) {
            Err(HandlerError::Script { message, .. }) => assert!(
                message.contains("HOME is not declared") && message.contains("API_KEY, LIMIT"),
                "{message}"
            ),
            other => panic!("expected a script error, got {other:?}"),
        }
        assert_eq!(
            call(&app, "by_name", json!("LIMIT")).expect("runs"),
            "\"21\""
        );
    }
}

#[test]
fn a_secret_never_shows_in_an_error_answer_or_a_log_line() {
    for interpreted in [false, true] {
        let (app, lines, _dir) = app(interpreted);
        let error = call(&app, "throw_it", json!(null)).expect_err("throws");
        assert_eq!(error.status(), 401);
        let body = error.to_json().to_string();
        assert!(!body.contains(KEY), "{body}");
        assert!(
            body.contains("wrong key: the key is [secret API_KEY]"),
            "{body}"
        );
        let error = call(&app, "throw_text", json!(null)).expect_err("throws");
        assert_eq!(
            error.to_json(),
            json!({"error": "[secret API_KEY]", "status": 400})
        );
        assert!(!error.to_string().contains(KEY));
        call(&app, "log_it", json!(null)).expect("runs");
        let lines = lines.0.lock().expect("lines").clone();
        assert_eq!(lines, vec!["the key is [secret API_KEY]".to_string()]);
    }
}
