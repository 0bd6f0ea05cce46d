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

const MANIFEST: &str = r#"{"name": "m", "routes": {}, "tables": {"t": ["n"]}}"#;

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
