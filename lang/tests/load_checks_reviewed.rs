//! Cases a review found in the load-time checks of rows' fields, typed tables and sets of
//! integers: each test failed while its fault was there.

use pure_lang::{App, HandlerError, Limits, Request, Tables, WriteSet};
use serde_json::{json, Value};

const MANIFEST: &str = r#"{ "name": "m", "routes": {},
  "tables": { "items": ["name", "price"], "orders": ["total", "item"] },
  "indexes": { "by_item": { "table": "orders", "fields": ["item"] } } }"#;

fn load(script: &str) -> Result<App, pure_lang::LoadError> {
    App::from_sources(
        MANIFEST,
        vec![("a.rhai".into(), script.into())],
        Limits::default(),
    )
}

/// Runs `handler` in Rhai and compiled (the same answer from both), after `setup` (a write
/// handler run first on the same tables, if any).
fn run(app_of: impl Fn() -> App, setup: Option<&str>, handler: &str) -> Result<Value, String> {
    let results: Vec<Result<Value, String>> = [false, true]
        .into_iter()
        .map(|interpreted| {
            let mut app = app_of();
            app.set_interpreted(interpreted);
            let mut tables = Tables::new(app.schema().tables.len());
            tables.set_indexes(app.indexes().to_vec()).expect("indexes");
            let request = Request::default();
            if let Some(setup) = setup {
                let mut writes = WriteSet::default();
                app.run_write(setup, &request, &mut tables, &mut writes)
                    .expect("the setup runs");
            }
            let mut writes = WriteSet::default();
            app.run_write(handler, &request, &mut tables, &mut writes)
                .map(|answer| answer.body.to_value())
                .map_err(|e| match e {
                    HandlerError::Script { message, .. } => message,
                    other => format!("{other:?}"),
                })
        })
        .collect();
    assert_eq!(results[0], results[1], "compiled and Rhai agree: {handler}");
    results[0].clone()
}

/// `script` loads, and its handler `h`, after `setup`, answers `expected` in Rhai and compiled.
fn loads_and_answers(script: &str, expected: Result<Value, String>) {
    let loaded = load(script);
    assert!(
        loaded.is_ok(),
        "a valid script is refused: {:?}",
        loaded.err()
    );
    assert_eq!(run(|| load(script).unwrap(), Some("setup"), "h"), expected);
}

const SETUP: &str = r#"
fn setup(req) {
    items.put(1, #{ name: "pen", price: 2 });
    orders.put(1, #{ total: 7, item: 1 });
}
"#;

/// A `catch (r)` declares `r` anew for its block: there `r` is the thrown value, not the row of
/// the `let r` above it. The check counts `let`, `for` and parameters, not a catch's variable,
/// so it refuses this valid script (the handler answers "boom").
#[test]
fn a_catch_variable_shadows_a_row_local() {
    let script = format!(
        "{SETUP}\nfn h(req) {{\n let r = items.get(1);\n try {{ throw #{{ why: \"boom\" }}; }} catch (r) {{ return r.why; }}\n r.name\n}}"
    );
    loads_and_answers(&script, Ok(json!("boom")));
}

/// `tag` is a property of every value in Rhai (`value.tag`, a getter and a setter registered on
/// `Dynamic`), a row's included. The check refuses this valid script.
#[test]
fn the_tag_property_of_a_row() {
    let script = format!("{SETUP}\nfn h(req) {{ let r = items.get(1); r.tag = 3; r.tag }}");
    loads_and_answers(&script, Ok(json!(3)));
}

/// A local named like a table is that local only from its `let` to the end of its block:
/// before it (or after the block) the name is the table. The check takes every `orders.x` of
/// the function for the local's row, and refuses this valid script.
#[test]
fn a_local_named_like_a_table_is_the_table_outside_its_scope() {
    let before = format!(
        "{SETUP}\nfn h(req) {{\n let n = orders.by_item.count();\n let orders = items.get(1);\n [n, orders.name]\n}}"
    );
    loads_and_answers(&before, Ok(json!([1, "pen"])));
    let after = format!(
        "{SETUP}\nfn h(req) {{\n if req.body != () {{ let orders = items.get(1); return orders.name; }}\n orders.by_item.count()\n}}"
    );
    loads_and_answers(&after, Ok(json!(1)));
}

/// A script function called as a method gets the local as `this`, and what it assigns to
/// `this` is the local's new value: here a row of another table. The local is "never assigned
/// again" only to the check's eye, which refuses this valid script.
#[test]
fn a_method_call_may_assign_the_local_through_this() {
    let script = format!(
        "{SETUP}\nfn to_order() {{ this = orders.get(this.key); }}\nfn h(req) {{ let r = items.get(1); r.to_order(); r.total }}"
    );
    loads_and_answers(&script, Ok(json!(7)));
    // The same through a function pointer: `r.call(f)` binds `this` to `r`.
    let script = format!(
        "{SETUP}\nfn to_order() {{ this = orders.get(this.key); }}\nfn h(req) {{ let r = items.get(1); r.call(Fn(\"to_order\")); r.total }}"
    );
    loads_and_answers(&script, Ok(json!(7)));
}

/// A typed table whose object names a field twice: the list form refuses a field declared
/// twice, and the object's fields are meant to keep the order written (b, then a). Here the
/// manifest loads, and its fields silently take byte order instead (a, b): a positional row
/// `[5, "x"]`, written for (b, a), is then refused or lands in the wrong fields.
#[test]
fn a_typed_table_that_names_a_field_twice() {
    let manifest = r#"{ "name": "m", "routes": {},
      "tables": { "t": { "b": "int", "a": "string", "b": "int" } } }"#;
    match App::from_sources(manifest, vec![], Limits::default()) {
        Err(refused) => assert!(
            refused.to_string().contains("twice"),
            "refused, but not for the field declared twice: {refused}"
        ),
        Ok(app) => panic!(
            "loads, with the fields {:?} (written b, a, b)",
            app.schema().tables[0].fields
        ),
    }
}

/// A set past its limit (`array_items`) is the handler's limit, as an array past it is: a 500
/// naming the handler's line. `insert` raises its message as a plain string, which is what
/// `throw "..."` raises: the server answers 400, as if the script had refused the client's
/// request, with no file or line (and a script's `catch` sees a string, not an API error).
#[test]
fn a_full_set_is_a_limit_not_the_clients_mistake() {
    let script = r#"
fn set(req) { let s = int_set(); for i in 0..20 { s.insert(i); } s.len() }
fn array(req) { let a = []; for i in 0..20 { a.push(i); } a.len() }
"#;
    let limits = Limits {
        array_items_max: 8,
        ..Limits::default()
    };
    for interpreted in [false, true] {
        let mut app = App::from_sources(
            MANIFEST,
            vec![("a.rhai".into(), script.into())],
            limits.clone(),
        )
        .expect("loads");
        app.set_interpreted(interpreted);
        let mut tables = Tables::new(app.schema().tables.len());
        let status = |handler: &str, tables: &mut Tables| {
            let mut writes = WriteSet::default();
            let error = app
                .run_write(handler, &Request::default(), tables, &mut writes)
                .expect_err("past the limit");
            (error.status(), error.to_json())
        };
        let (array_status, array_body) = status("array", &mut tables);
        let (set_status, set_body) = status("set", &mut tables);
        assert_eq!(array_status, 500, "{array_body}");
        assert_eq!(
            set_status, array_status,
            "a full set answers {set_status} {set_body}, a full array {array_status} {array_body}"
        );
    }
}
