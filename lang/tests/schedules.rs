//! Scheduled handlers in lang: `schedule`, `schedule_at` and `cancel` write entries of the
//! schedule table with the write that calls them (a thrown write schedules nothing);
//! `App::run_due` runs the first entry due, with `request.scheduled`, and removes it in the same
//! write set; a failed run's changes are rolled back and its entry removed all the same; the
//! manifest's named entries recur. In both engines.

use pure_lang::{App, Execution, HandlerError, Limits, Request, Tables, WriteSet, SCHEDULE_TABLE};
use serde_json::{json, Value};

const MANIFEST: &str = r#"{"name": "s", "routes": {"GET /x": "look"},
    "tables": {"log": ["what"]},
    "schedules": {"tick": {"every_ms": 1000, "handler": "tick"}}}"#;

const SCRIPT: &str = r#"
fn later(request) { schedule(request.body.delay, "remember", #{ what: request.body.what }) }
fn at(request) { schedule_at(request.body.at, "remember", request.body.what) }
fn later_then_throw(request) {
    schedule(10, "remember", #{ what: "never" });
    throw #{ status: 409, error: "no" };
}
fn by_name(request) { schedule(0, request.body, ()) }
fn drop_it(request) { cancel(request.body) }
fn many(request) { for i in 0..request.body { schedule(i, "remember", i); } }
fn remember(request) {
    let what = if type_of(request.body) == "map" { request.body.what } else { request.body };
    log.put(request.scheduled.id, #{ what: `${what} at ${request.scheduled.due}` });
    request.scheduled.id
}
fn fails(request) { log.put(999, #{ what: "rolled back" }); throw "it failed"; }
fn tick(request) { log.put(request.scheduled.name, #{ what: request.scheduled.due }); }
fn look(request) { schedule(1, "remember", ()) }
"#;

fn call(app: &App, tables: &mut Tables, handler: &str, body: Value) -> Result<Value, HandlerError> {
    let request = Request {
        body: pure_lang::to_dynamic(&body),
        ..Request::default()
    };
    let mut writes = WriteSet::default();
    app.run_write(handler, &request, tables, &mut writes)
        .map(|answer| answer.body.to_value())
}

fn load(interpreted: bool, now: i64) -> App {
    let mut app = App::from_sources(
        MANIFEST,
        vec![("s.rhai".into(), SCRIPT.into())],
        Limits {
            schedules_per_call_max: 5,
            ..Limits::default()
        },
    )
    .expect("loads");
    for handler in ["later", "at", "drop_it", "many", "by_name"] {
        assert_eq!(
            app.execution(handler),
            Some(Execution::Compiled),
            "{handler}"
        );
    }
    app.set_interpreted(interpreted);
    app.set_world(pure_lang::World::fixed(Some(now), Some(1)));
    app
}

fn fresh(app: &App) -> Tables {
    let mut tables = Tables::new(app.schema().tables.len());
    tables.set_indexes(app.indexes().to_vec()).expect("indexes");
    tables
}

fn pending(app: &App, tables: &Tables) -> usize {
    tables.len(
        app.schema()
            .table_id(SCHEDULE_TABLE)
            .expect("a schedule table"),
    )
}

fn log_of(app: &App, tables: &Tables) -> Vec<String> {
    let log = app.schema().table_id("log").expect("log");
    tables.scan(
        log,
        (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded),
        false,
        100,
        |(_, f)| f.value(0).to_string(),
    )
}

/// Runs what is due at `now`; the ids of the entries run, with their answers or errors.
fn run_due(app: &App, tables: &mut Tables, now: i64) -> Vec<(String, Result<Value, String>)> {
    let mut ran = Vec::new();
    loop {
        let mut writes = WriteSet::default();
        let Some(run) = app.run_due(now, tables, &mut writes) else {
            assert!(writes.is_empty(), "nothing due, nothing written");
            return ran;
        };
        assert!(!writes.is_empty(), "the removal is written");
        ran.push((
            run.id.to_string(),
            run.result
                .map(|a| a.body.to_value())
                .map_err(|e| e.to_string()),
        ));
    }
}

#[test]
fn an_entry_runs_once_when_due_with_its_removal_in_the_same_write() {
    for interpreted in [false, true] {
        let start = 1_000_000;
        let app = load(interpreted, start);
        let mut tables = fresh(&app);
        let id = call(
            &app,
            &mut tables,
            "later",
            json!({"delay": 500, "what": "a"}),
        )
        .expect("ok");
        assert_eq!(id, json!(1));
        let at = call(
            &app,
            &mut tables,
            "at",
            json!({"at": start + 100, "what": "b"}),
        )
        .expect("ok");
        assert_eq!(at, json!(2));
        assert_eq!(pending(&app, &tables), 2);
        assert_eq!(app.next_due(&tables), Some(start + 100));
        // A write that throws schedules nothing.
        assert!(call(&app, &mut tables, "later_then_throw", json!(null)).is_err());
        assert_eq!(pending(&app, &tables), 2);

        assert!(
            run_due(&app, &mut tables, start + 99).is_empty(),
            "not due yet"
        );
        let ran = run_due(&app, &mut tables, start + 500);
        assert_eq!(
            ran,
            vec![
                ("2".to_string(), Ok(json!(2))),
                ("1".to_string(), Ok(json!(1))),
            ],
            "in due order (interpreted: {interpreted})"
        );
        assert_eq!(log_of(&app, &tables), ["a at 1000500", "b at 1000100"]);
        assert_eq!(pending(&app, &tables), 0);
        assert!(
            run_due(&app, &mut tables, start + 10_000).is_empty(),
            "run once"
        );
    }
}

#[test]
fn a_cancelled_entry_never_runs_and_a_failed_run_is_removed_with_its_changes_undone() {
    for interpreted in [false, true] {
        let start = 5_000;
        let app = load(interpreted, start);
        let mut tables = fresh(&app);
        let id = call(&app, &mut tables, "later", json!({"delay": 1, "what": "x"})).expect("ok");
        assert_eq!(
            call(&app, &mut tables, "drop_it", id.clone()).expect("ok"),
            json!(true)
        );
        assert_eq!(
            call(&app, &mut tables, "drop_it", id).expect("ok"),
            json!(false)
        );
        assert!(run_due(&app, &mut tables, start + 100).is_empty());

        call(&app, &mut tables, "by_name", json!("fails")).expect("scheduled");
        let ran = run_due(&app, &mut tables, start + 100);
        assert_eq!(ran.len(), 1);
        assert!(
            ran[0].1.as_ref().is_err_and(|e| e.contains("it failed")),
            "{ran:?}"
        );
        assert!(
            log_of(&app, &tables).is_empty(),
            "its change was rolled back"
        );
        assert_eq!(pending(&app, &tables), 0, "and it is not retried");

        // A name no function has, given at run time: the call fails, as any script error.
        let error = call(&app, &mut tables, "by_name", json!("nothing")).expect_err("refused");
        assert!(
            error.to_string().contains("no fn nothing(request)"),
            "{error}"
        );
        // At most schedules_per_call entries from one write; none from a read.
        call(&app, &mut tables, "many", json!(5)).expect("five");
        let error = call(&app, &mut tables, "many", json!(6)).expect_err("six");
        assert!(
            error.to_string().contains("limits.schedules_per_call"),
            "{error}"
        );
        assert_eq!(pending(&app, &tables), 5);
        let snapshot = std::sync::Arc::new(tables.snapshot());
        let read = app.run_read("look", &Request::default(), snapshot);
        assert!(read.is_err_and(|e| e.to_string().contains("read handler")));
    }
}

#[test]
fn a_named_schedule_recurs_and_skips_what_it_missed() {
    for interpreted in [false, true] {
        let app = load(interpreted, 0);
        let mut tables = fresh(&app);
        let mut writes = WriteSet::default();
        app.ensure_schedules(10_000, &mut tables, &mut writes);
        assert_eq!(writes.changes().len(), 1);
        let mut again = WriteSet::default();
        app.ensure_schedules(20_000, &mut tables, &mut again);
        assert!(again.is_empty(), "kept once under its name");
        assert_eq!(app.next_due(&tables), Some(11_000));
        assert_eq!(run_due(&app, &mut tables, 11_000).len(), 1);
        assert_eq!(app.next_due(&tables), Some(12_000), "one period later");
        // Down for 5.5 periods: it runs once, and is next due on its period.
        assert_eq!(run_due(&app, &mut tables, 17_500).len(), 1);
        assert_eq!(app.next_due(&tables), Some(18_000));
        assert_eq!(log_of(&app, &tables), ["12000"]);
    }
}

#[test]
fn a_literal_name_no_function_has_is_a_load_error() {
    let script = format!("{SCRIPT}\nfn typo(request) {{ schedule(1, \"remembr\", ()) }}");
    let error = App::from_sources(MANIFEST, vec![("s.rhai".into(), script)], Limits::default())
        .err()
        .expect("refused");
    assert!(
        error
            .to_string()
            .contains("schedule(..., \"remembr\", ...): no script defines fn remembr(request)"),
        "{error}"
    );
    let manifest = MANIFEST.replace("\"handler\": \"tick\"", "\"handler\": \"tock\"");
    let error = App::from_sources(
        &manifest,
        vec![("s.rhai".into(), SCRIPT.into())],
        Limits::default(),
    )
    .err()
    .expect("refused");
    assert!(
        error
            .to_string()
            .contains("schedule \"tick\" runs \"tock\""),
        "{error}"
    );
}
