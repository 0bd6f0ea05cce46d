//! `import` and `export` round trips: edge values that must come back exactly (export, import,
//! export: the same bytes, and the same state as the input said), and an import that a unique
//! index refuses, which writes nothing.

use std::path::{Path, PathBuf};

use pure_runtime::{export, import, App, ImportOptions, Progress, Runtime, RuntimeOptions};
use serde_json::Value;

fn app_dir(root: &Path, tables: &str, script: &str) -> PathBuf {
    let dir = root.join("app");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("app.json"),
        format!(r#"{{"name": "t", "routes": {{"GET /all": "all", "POST /put": "put"}}, "tables": {tables}}}"#),
    )
    .unwrap();
    std::fs::write(dir.join("main.rhai"), script).unwrap();
    dir
}

fn options() -> ImportOptions {
    ImportOptions {
        log_capacity_bytes: 8 << 20,
        ..ImportOptions::default()
    }
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

fn read(dir: &Path, table: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{table}.jsonl"))).unwrap()
}

const SCRIPT: &str = r#"
fn all(request) {
    let out = #{};
    for t in ["a", "b", "e"] {
        out[t] = [];
    }
    for r in a.scan((), (), 1000) { out.a.push([r.key, r.x, r.y]); }
    for r in b.scan((), (), 1000) { out.b.push(r.key); }
    out
}
fn put(request) {
    a.put(request.body.k, #{ x: request.body.x, y: request.body.y });
    #{}
}
"#;

/// Every kind of value a script can store, at its edges, through export -> import -> export.
#[test]
fn edge_values_round_trip_byte_for_byte() {
    let root = tempfile::tempdir().unwrap();
    let dir = app_dir(
        root.path(),
        r#"{"a": ["x", "y"], "b": [], "e": ["z"]}"#,
        SCRIPT,
    );
    let app = App::load(&dir).unwrap();
    let input = root.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    let a_lines = [
        r#"{"key": [1, "a", -5, "é"], "row": {"x": 1e300, "y": -0.0}}"#,
        r#"{"key": [-9223372036854775808], "row": {"x": 9223372036854775807, "y": 5e-324}}"#,
        r#"{"key": "\u0000\u2028😀", "row": {"x": "\u0001\u007f\"\\\u2029", "y": [[], {}, [null, true, false]]}}"#,
        r#"{"key": ["", 0], "row": {"x": {"\u00e9": 3.0, "": -1e-7}, "y": 1e16}}"#,
        r#"{"key": [2, 2, 2, 2], "row": {"x": 0.1, "y": 1.7976931348623157e308}}"#,
        r#"{"key": 7, "row": {}}"#,
    ];
    std::fs::write(input.join("a.jsonl"), a_lines.join("\n") + "\n").unwrap();
    std::fs::write(
        input.join("b.jsonl"),
        "{\"key\": [3, \"x\"], \"row\": {}}\n",
    )
    .unwrap();
    std::fs::write(input.join("e.jsonl"), "").unwrap();

    let data1 = root.path().join("data1");
    import(
        &app,
        &data1,
        &files_in(&input),
        &options(),
        &Progress::default(),
    )
    .unwrap();
    let out1 = root.path().join("out1");
    export(&app, &data1, &out1, &Progress::default()).unwrap();
    let data2 = root.path().join("data2");
    import(
        &app,
        &data2,
        &files_in(&out1),
        &options(),
        &Progress::default(),
    )
    .unwrap();
    let out2 = root.path().join("out2");
    export(&app, &data2, &out2, &Progress::default()).unwrap();
    for t in ["a", "b", "e"] {
        assert_eq!(read(&out1, t), read(&out2, t), "table {t}");
    }
    // What the input said, value by value.
    let exported: Vec<Value> = read(&out1, "a")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(exported.len(), a_lines.len(), "{exported:?}");
    let text = read(&out1, "a");
    assert!(text.contains(r#""y":-0.0"#), "{text}");
    assert!(text.contains("9223372036854775807"), "{text}");
    assert!(text.contains("-9223372036854775808"), "{text}");
    assert!(text.contains("5e-324"), "{text}");
    assert!(text.contains("1e+16"), "{text}");
    assert!(
        text.contains(r#"{"key":7,"row":{"x":null,"y":null}}"#),
        "{text}"
    );
    assert_eq!(read(&out1, "e"), "");

    // And the server serves the imported state.
    let rt = Runtime::open(app, &data1, RuntimeOptions::default()).unwrap();
    let all = rt.read("all", Default::default()).unwrap().body.to_value();
    assert_eq!(all["a"].as_array().unwrap().len(), a_lines.len(), "{all}");
    rt.shutdown();
}

/// Rows that a declared unique index refuses are not imported: the server builds its indexes
/// from the rows at start and would not open the directory.
#[test]
fn an_import_that_a_unique_index_refuses_writes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("app");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("app.json"),
        r#"{"name": "t", "routes": {"GET /n": "n"}, "tables": {"users": ["email"]},
            "indexes": {"by_email": {"table": "users", "fields": ["email"], "unique": true}}}"#,
    )
    .unwrap();
    std::fs::write(dir.join("main.rhai"), "fn n(request) { users.count() }").unwrap();
    let input = root.path().join("users.jsonl");
    let rows = |second: &str| {
        format!("{{\"key\": 1, \"row\": {{\"email\": \"a@x\"}}}}\n{{\"key\": 2, \"row\": {{\"email\": \"{second}\"}}}}\n")
    };
    std::fs::write(&input, rows("a@x")).unwrap();
    let data = root.path().join("data");
    let app = App::load(&dir).unwrap();
    let error = import(
        &app,
        &data,
        std::slice::from_ref(&input),
        &options(),
        &Progress::default(),
    )
    .expect_err("a duplicate email");
    assert!(
        error.to_string().contains("unique index by_email"),
        "{error}"
    );
    assert!(!data.exists(), "nothing written, not even the directory");

    std::fs::write(&input, rows("b@x")).unwrap();
    import(&app, &data, &[input], &options(), &Progress::default()).expect("distinct emails");
    let runtime = Runtime::open(App::load(&dir).unwrap(), &data, RuntimeOptions::default())
        .expect("opens, with its index");
    runtime.shutdown();
}
