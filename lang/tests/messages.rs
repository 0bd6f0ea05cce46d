//! Messages point at the mistake: each load or run-time error below names the file, line and
//! column of what the user has to change, and says what is wrong there.

use std::path::Path;

use pure_lang::{App, Execution, Limits};

/// Writes an app directory (`app.json` and the scripts) and loads it.
fn load(manifest: &str, files: &[(&str, &str)], limits: Limits) -> Result<App, String> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    write(dir.path(), manifest, files);
    App::load_with(dir.path(), limits).map_err(|e| e.to_string())
}

fn write(dir: &Path, manifest: &str, files: &[(&str, &str)]) {
    std::fs::write(dir.join("app.json"), manifest).expect("writes app.json");
    for (name, text) in files {
        std::fs::write(dir.join(name), text).expect("writes a script");
    }
}

fn load_error(files: &[(&str, &str)]) -> String {
    let manifest = r#"{"name": "m", "routes": {}}"#;
    match load(manifest, files, Limits::default()) {
        Ok(_) => panic!("{files:?} loaded"),
        Err(e) => e,
    }
}

const MANIFEST: &str = r#"{"name": "m", "routes": {}, "tables": {"t": ["n"]}}"#;

#[test]
fn a_missing_semicolon_is_reported_where_it_is_missing() {
    let error = load_error(&[
        ("a.rhai", "fn ok(r) { 1 }\n"),
        (
            "b.rhai",
            "fn f(r) {\n    let a = 1\n    let b = 2;\n    a + b\n}\n",
        ),
    ]);
    assert!(
        error.starts_with("b.rhai:2:14: missing ; at the end of this statement"),
        "{error}"
    );
    // After a string and before a comment: just after the string.
    let error = load_error(&[(
        "a.rhai",
        "fn f(r) {\n    let a = \"x y\" // a comment\n    // another\n    a\n}\n",
    )]);
    assert!(
        error.starts_with("a.rhai:2:18: missing ; at the end of this statement"),
        "{error}"
    );
}

#[test]
fn an_unclosed_brace_names_where_it_opened() {
    // The next function starts inside the unclosed body.
    let error = load_error(&[(
        "a.rhai",
        "fn a(r) {\n    let x = `${r}`;\n    if x == \"{\" { 1 }\n\nfn b(r) { 2 }\n",
    )]);
    assert!(
        error.starts_with("a.rhai:1:9: this { is never closed (the next fn starts at a.rhai:5:1)"),
        "{error}"
    );
    let error = load_error(&[("a.rhai", "fn a(r) { 1 }\n}\nfn b(r) { 2 }\n")]);
    assert!(
        error.starts_with("a.rhai:2:1: this } closes no {"),
        "{error}"
    );
    // The file ends inside it, and the next file's functions would be read as inside it.
    for files in [
        &[("a.rhai", "fn a(r) {\n    // }\n    1\n")][..],
        &[
            ("a.rhai", "fn a(r) {\n    // }\n    1\n"),
            ("b.rhai", "fn b(r) { 2 }\n"),
        ][..],
    ] {
        let error = load_error(files);
        assert!(
            error.starts_with("a.rhai:1:9: this { is never closed (a.rhai ends inside it)"),
            "{error}"
        );
    }
}

#[test]
fn the_reason_a_handler_is_not_compiled_names_the_construct() {
    let script = "fn optional(r) {\n    let m = r.body;\n    m?.x\n}\n\
                  fn switched(r) {\n    switch r.body { 1 => 2, _ => 3 }\n}\n\
                  fn calls(r) {\n    1 + helper(r)\n}\n\
                  fn helper(r) {\n    try { r.x } catch { 2 }\n}\n";
    let app = load(
        MANIFEST,
        &[("a.rhai", "fn x(r) { 1 }\n"), ("b.rhai", script)],
        Limits::default(),
    )
    .expect("loads");
    let reason = |handler: &str| match app.execution(handler) {
        Some(Execution::Interpreted { reason }) => reason,
        other => panic!("{handler}: {other:?}"),
    };
    assert_eq!(
        reason("optional"),
        "b.rhai:3:6: the optional chain ?. is not compiled"
    );
    assert_eq!(reason("switched"), "b.rhai:6:5: switch is not compiled");
    assert_eq!(
        reason("calls"),
        "b.rhai:12:5: try/catch is not compiled (in helper(), which it calls)"
    );
}
