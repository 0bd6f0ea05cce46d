//! `t.next_id()`: ids counting up per table, never given twice by writes that committed (even
//! after their rows are deleted), given back by a write that threw, starting past the largest
//! integer key already there; in both engines.

use pure_lang::{App, Execution, HandlerError, Limits, Request, Tables, WriteSet};
use serde_json::{json, Value};

const MANIFEST: &str = r#"{"name": "ids", "routes": {},
    "tables": {"events": ["name"], "bookings": ["event"]}}"#;

const SCRIPT: &str = r#"
fn add_event(request) {
    let id = events.next_id();
    events.insert(id, #{ name: request.body });
    id
}
fn add_then_throw(request) {
    let id = events.next_id();
    events.insert(id, #{ name: "gone" });
    throw #{ status: 409, error: `took ${id}` };
}
fn remove(request) { events.delete(request.body) }
fn add_booking(request) { bookings.next_id() }
fn import_rows(request) {
    bookings.put(100, #{ event: 1 });
    bookings.put(100, 7, #{ event: 1 });
    bookings.put("z", #{ event: 1 });
}
"#;

fn call(app: &App, tables: &mut Tables, handler: &str, body: Value) -> Result<Value, HandlerError> {
    let request = Request {
        body: pure_lang::to_dynamic(&body),
        ..Request::default()
    };
    let mut writes = WriteSet::default();
    app.run_write(handler, &request, tables, &mut writes)
        .map(|answer| serde_json::from_str(&answer.body.to_string()).expect("JSON"))
}

#[test]
fn ids_count_up_per_table_and_a_thrown_write_gives_its_id_back() {
    for interpreted in [false, true] {
        let mut app = App::from_sources(
            MANIFEST,
            vec![("a.rhai".into(), SCRIPT.into())],
            Limits::default(),
        )
        .expect("loads");
        assert_eq!(app.execution("add_event"), Some(Execution::Compiled));
        app.set_interpreted(interpreted);
        // The app's tables and the ids table after them.
        let mut tables = Tables::new(app.schema().tables.len());
        let add = |tables: &mut Tables, name: &str| call(&app, tables, "add_event", json!(name));
        assert_eq!(add(&mut tables, "a").expect("adds"), json!(1));
        assert_eq!(add(&mut tables, "b").expect("adds"), json!(2));
        assert!(matches!(
            call(&app, &mut tables, "add_then_throw", json!(null)),
            Err(HandlerError::Thrown { status: 409, .. })
        ));
        // The thrown write's id (3) was never taken: it is given now.
        assert_eq!(add(&mut tables, "c").expect("adds"), json!(3));
        // Deleting the newest row does not make its id free again.
        assert_eq!(
            call(&app, &mut tables, "remove", json!(3)).expect("deletes"),
            json!(true)
        );
        assert_eq!(add(&mut tables, "d").expect("adds"), json!(4));
        // Each table counts its own; one with rows already starts past its largest integer key.
        call(&app, &mut tables, "import_rows", json!(null)).expect("rows");
        assert_eq!(
            call(&app, &mut tables, "add_booking", json!(null)).expect("id"),
            json!(101)
        );
        assert_eq!(
            call(&app, &mut tables, "add_booking", json!(null)).expect("id"),
            json!(102)
        );
        assert_eq!(add(&mut tables, "e").expect("adds"), json!(5));
    }
}

#[test]
fn the_ids_table_is_the_apps_own() {
    let app = App::from_sources(
        MANIFEST,
        vec![("a.rhai".into(), SCRIPT.into())],
        Limits::default(),
    )
    .expect("loads");
    let names: Vec<&str> = app
        .schema()
        .tables
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "bookings",
            "events",
            pure_lang::IDS_TABLE,
            pure_lang::SCHEDULE_TABLE
        ]
    );
    // Scripts cannot name it, and an app cannot declare it.
    let error = App::from_sources(
        MANIFEST,
        vec![(
            "a.rhai".into(),
            "fn f(request) { _ids.get(\"events\") }".into(),
        )],
        Limits::default(),
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(error.contains("no variable or table named _ids"), "{error}");
    let error = App::from_sources(
        r#"{"name": "x", "routes": {}, "tables": {"_ids": ["next"]}}"#,
        Vec::new(),
        Limits::default(),
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(error.contains("next_id() keeps its counters"), "{error}");
    // Nor the schedule's.
    let error = App::from_sources(
        MANIFEST,
        vec![(
            "a.rhai".into(),
            "fn f(request) { _schedule.count() }".into(),
        )],
        Limits::default(),
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(
        error.contains("no variable or table named _schedule"),
        "{error}"
    );
    let error = App::from_sources(
        r#"{"name": "x", "routes": {}, "tables": {"_schedule": ["due"]}}"#,
        Vec::new(),
        Limits::default(),
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(error.contains("schedule() keeps its entries"), "{error}");
}
