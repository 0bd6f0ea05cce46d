//! Every `rhai` code block of `docs/guide.md` loads as written, and each function in it that
//! could be a handler runs compiled, not in Rhai's evaluator: what the guide teaches is what
//! compiles. Each block loads on its own against one manifest that declares what the guide's
//! examples use (tables, an index, a secret, the routes they name). The accounts examples also
//! run, on the route the guide gives them (`close_account` on `DELETE /accounts/{id:int}`).

use std::path::Path;

use pure_lang::{App, Environment, Execution, HandlerError, Limits, Request, Tables, WriteSet};
use serde_json::json;

const MANIFEST: &str = r#"{
  "name": "guide",
  "secrets": ["TICKETS_API_KEY"],
  "tables": {
    "players": ["best", "posts"],
    "accounts": { "owner": "string!", "balance": "int!", "total": "int" },
    "events": ["name", "capacity", "booked"],
    "lines": ["amount"],
    "orders": ["customer"],
    "seats": ["state", "who", "hold"]
  },
  "indexes": {
    "by_owner": { "table": "accounts", "fields": ["owner"] },
    "by_best": { "table": "players", "fields": ["-best"] }
  },
  "routes": {
    "POST /accounts": "open_account",
    "DELETE /accounts/{id:int}": "close_account"
  }
}"#;

/// The `rhai` blocks of the guide, each with the line its fence opens on.
fn rhai_blocks() -> Vec<(usize, String)> {
    let guide = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/guide.md");
    let text = std::fs::read_to_string(guide).expect("the guide");
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String, usize)> = None;
    for (number, line) in text.lines().enumerate() {
        let fence = line.trim_start();
        let indent = line.len() - fence.len();
        match &mut open {
            None if fence == "```rhai" => open = Some((number + 1, String::new(), indent)),
            Some((start, body, _)) if fence == "```" => {
                blocks.push((*start, std::mem::take(body)));
                open = None;
            }
            Some((_, body, indent)) => {
                body.push_str(line.get(*indent..).unwrap_or(line.trim_start()));
                body.push('\n');
            }
            None => {}
        }
    }
    blocks
}

fn load(script: &str) -> Result<App, String> {
    let dir = tempfile::tempdir().expect("a directory");
    let secrets = dir.path().join("secrets");
    std::fs::write(&secrets, "TICKETS_API_KEY=guide-key-0123456789\n").expect("writes");
    let environment = Environment::with_file(&secrets).expect("reads");
    App::from_sources_in(
        MANIFEST,
        vec![("guide.rhai".into(), script.into())],
        Limits::default(),
        &environment,
    )
    .map_err(|e| e.to_string())
}

/// The names of the one-parameter functions a block defines: those a route could name.
fn handlers(script: &str) -> Vec<String> {
    script
        .lines()
        .filter_map(|line| line.strip_prefix("fn "))
        .filter_map(|rest| {
            let (name, params) = rest.split_once('(')?;
            let params = params.split_once(')')?.0;
            (!params.is_empty() && !params.contains(',')).then(|| name.trim().to_string())
        })
        .collect()
}

#[test]
fn every_code_block_of_the_guide_loads_and_its_handlers_run_compiled() {
    let blocks = rhai_blocks();
    assert!(
        blocks.len() >= 9,
        "the guide's rhai blocks: {}",
        blocks.len()
    );
    let mut failures = Vec::new();
    for (line, script) in &blocks {
        // A handler the manifest's routes name is needed only by blocks that define it.
        let script = match (
            script.contains("fn open_account"),
            script.contains("fn close_account"),
        ) {
            (true, true) => script.clone(),
            _ => format!(
                "{script}\nfn open_account(request) {{ 1 }}\nfn close_account(request) {{ 1 }}\n"
            ),
        };
        let app = match load(&script) {
            Ok(app) => app,
            Err(error) => {
                failures.push(format!("docs/guide.md:{line}: does not load: {error}"));
                continue;
            }
        };
        for handler in handlers(&script) {
            match app.execution(&handler) {
                Some(Execution::Compiled) => {}
                other => failures.push(format!(
                    "docs/guide.md:{line}: fn {handler} is not compiled: {other:?}"
                )),
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn the_accounts_examples_run_as_written() {
    let script = rhai_blocks()
        .into_iter()
        .map(|(_, script)| script)
        .find(|script| script.contains("fn close_account"))
        .expect("the accounts example");
    let app = load(&script).expect("loads");
    let mut tables = Tables::new(app.schema().tables.len());
    tables.set_indexes(app.indexes().to_vec()).expect("indexes");
    let route = |pattern: &str| {
        app.routes()
            .iter()
            .position(|r| format!("{} {}", r.method, r.path) == pattern)
            .expect("the route")
    };
    let mut call = |pattern: &str, params: Vec<(String, String)>, body: &str| {
        let request: Request = app
            .request(
                route(pattern),
                params,
                Vec::new(),
                Default::default(),
                body.as_bytes(),
            )
            .expect("a request");
        let handler = app.routes()[route(pattern)].handler.clone();
        let mut writes = WriteSet::default();
        app.run_write(&handler, &request, &mut tables, &mut writes)
    };
    let opened = call("POST /accounts", Vec::new(), r#"{"owner": "ann"}"#).expect("opens");
    assert_eq!(opened.status, 201);
    assert_eq!(opened.body, json!({"id": 1}));
    let id = vec![("id".to_string(), "1".to_string())];
    let closed = call("DELETE /accounts/{id:int}", id.clone(), "").expect("closes");
    assert_eq!(closed.status, 204);
    match call("DELETE /accounts/{id:int}", id, "") {
        Err(HandlerError::Thrown { status: 404, .. }) => {}
        other => panic!("expected a 404, got {other:?}"),
    }
}
