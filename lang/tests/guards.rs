//! A route's guard decides with the request's head, path parameters and query (as text, no
//! body): `true` lets it through, `false` is a 403, a thrown error or a `respond` of 400 or more
//! is the answer, and anything else is the guard's mistake (a 500), never a pass.

use std::sync::Arc;

use pure_lang::{App, HandlerError, Head, ImmutableString, Limits, Tables};
use serde_json::json;

const MANIFEST: &str = r#"{"name": "g", "tables": {"keys": ["owner"]}, "guard": "by_key",
  "routes": {
    "POST /a/{id}": "a",
    "GET /open": { "handler": "a", "guard": null },
    "GET /sees": { "handler": "a", "guard": "sees" },
    "GET /number": { "handler": "a", "guard": "number" },
    "GET /responds": { "handler": "a", "guard": "responds" }
  }}"#;

const SCRIPT: &str = r#"
fn a(request) { 1 }
fn by_key(request) {
    let key = request.headers["x-key"];
    if key == () { throw #{ status: 401, error: "send x-key" }; }
    keys.exists(key)
}
fn sees(request) {
    request.params.len() == 0 && request.query.q == "5" && type_of(request.query.q) == "string"
        && request.body == () && request.method == "GET"
}
fn number(request) { 1 }
fn responds(request) { respond(429, #{ error: "slow down" }) }
"#;

fn app() -> App {
    App::from_sources(
        MANIFEST,
        vec![("g.rhai".into(), SCRIPT.into())],
        Limits::default(),
    )
    .expect("loads")
}

/// The verdict of the guard of route `pattern`, on tables where the key "k1" exists.
fn verdict(
    app: &App,
    pattern: &str,
    headers: &[(&str, &str)],
    query: &[(&str, &str)],
) -> Result<(), HandlerError> {
    let route = app
        .routes()
        .iter()
        .find(|r| format!("{} {}", r.method, r.path) == pattern)
        .expect("the route");
    let guard = route.guard.as_deref().expect("a guarded route");
    let head = Head {
        method: route.method.as_str().into(),
        headers: headers
            .iter()
            .map(|(n, v)| (ImmutableString::from(*n), ImmutableString::from(*v)))
            .collect(),
        ..Head::default()
    };
    let pairs = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    };
    let params = if route.path.contains("{id}") {
        pairs(&[("id", "5")])
    } else {
        Vec::new()
    };
    let request = app.guard_request(&params, &pairs(query), &head);
    let mut tables = Tables::new(1);
    let mut writes = pure_lang::WriteSet::default();
    App::from_sources(
        r#"{"name": "fill", "tables": {"keys": ["owner"]}, "routes": {}}"#,
        vec![(
            "f.rhai".into(),
            "fn fill(r) { keys.put(\"k1\", #{ owner: 1 }); }".into(),
        )],
        Limits::default(),
    )
    .expect("loads")
    .run_write(
        "fill",
        &pure_lang::Request::default(),
        &mut tables,
        &mut writes,
    )
    .expect("fills");
    app.guard_verdict(guard, app.run_read(guard, &request, Arc::new(tables)))
}

fn refused(result: Result<(), HandlerError>) -> (u16, serde_json::Value) {
    match result {
        Err(error) => (error.status(), error.to_json()),
        Ok(()) => panic!("let through"),
    }
}

#[test]
fn the_app_guard_decides_for_every_route_that_names_none() {
    let app = app();
    assert_eq!(
        app.routes()
            .iter()
            .find(|r| r.path == "/open")
            .and_then(|r| r.guard.clone()),
        None
    );
    verdict(&app, "POST /a/{id}", &[("x-key", "k1")], &[]).expect("through");
    assert_eq!(
        refused(verdict(&app, "POST /a/{id}", &[], &[])),
        (401, json!({"error": "send x-key", "status": 401}))
    );
    assert_eq!(
        refused(verdict(&app, "POST /a/{id}", &[("x-key", "k2")], &[])),
        (
            403,
            json!({"error": "the guard by_key refused this request", "status": 403})
        )
    );
}

#[test]
fn a_guard_sees_the_head_and_text_and_anything_but_a_boolean_is_refused() {
    let app = app();
    verdict(&app, "GET /sees", &[], &[("q", "5")]).expect("sees the query as text, no body");
    assert_eq!(
        refused(verdict(&app, "GET /responds", &[], &[])),
        (429, json!({"error": "slow down", "status": 429}))
    );
    let (status, body) = refused(verdict(&app, "GET /number", &[], &[]));
    assert_eq!(status, 500);
    let message = body["error"].as_str().expect("a message");
    assert!(
        message.starts_with("the guard number answered 200 1: a guard returns true"),
        "{message}"
    );
    assert_eq!(body["file"], "g.rhai", "{body}");
}
