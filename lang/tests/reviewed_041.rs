//! Review 041: faults of scheduled handlers in lang.

use pure_lang::{App, HandlerError, Limits, Request, Tables, WriteSet};
use serde_json::{json, Value};

const MANIFEST: &str = r#"{"name": "s", "routes": {"GET /x": "look"},
    "tables": {"log": ["what"]},
    "schedules": {"tick": {"every_ms": 1000, "handler": "tick"}}}"#;

const SCRIPT: &str = r#"
fn at(request) { schedule_at(request.body.at, "remember", request.body.what) }
fn remember(request) {
    log.put(request.scheduled.id, #{ what: `${request.body} at ${request.scheduled.due}` });
    request.scheduled.id
}
fn tick(request) { cancel(request.scheduled.id); }
fn look(request) { request.scheduled }
"#;

fn load(interpreted: bool, now: i64) -> App {
    let mut app = App::from_sources(
        MANIFEST,
        vec![("s.rhai".into(), SCRIPT.into())],
        Limits::default(),
    )
    .expect("loads");
    app.set_interpreted(interpreted);
    app.set_world(pure_lang::World::fixed(Some(now), Some(1)));
    app
}

fn fresh(app: &App) -> Tables {
    let mut tables = Tables::new(app.schema().tables.len());
    tables.set_indexes(app.indexes().to_vec()).expect("indexes");
    tables
}

fn call(app: &App, tables: &mut Tables, handler: &str, body: Value) -> Result<Value, HandlerError> {
    let request = Request {
        body: pure_lang::to_dynamic(&body),
        ..Request::default()
    };
    let mut writes = WriteSet::default();
    app.run_write(handler, &request, tables, &mut writes)
        .map(|answer| answer.body.to_value())
}

fn run_due(app: &App, tables: &mut Tables, now: i64) -> Vec<(String, i64)> {
    let mut ran = Vec::new();
    while let Some(run) = app.run_due(now, tables, &mut WriteSet::default()) {
        ran.push((run.id.to_string(), run.due_ms));
        assert!(ran.len() < 100);
    }
    ran
}

#[test]
fn entries_due_at_negative_times_run_first_in_due_order() {
    for interpreted in [false, true] {
        let app = load(interpreted, 1_000);
        let mut tables = fresh(&app);
        for at in [500, -5, i64::MIN, 0] {
            call(&app, &mut tables, "at", json!({"at": at, "what": at})).expect("scheduled");
        }
        let ran = run_due(&app, &mut tables, 1_000);
        let dues: Vec<i64> = ran.iter().map(|r| r.1).collect();
        assert_eq!(
            dues,
            vec![i64::MIN, -5, 0, 500],
            "interpreted {interpreted}"
        );
    }
}

#[test]
fn a_fixed_clock_moved_by_a_huge_advance_does_not_wrap_into_the_past() {
    let clock = pure_lang::Clock::new(1_767_225_600_000);
    let now = std::panic::catch_unwind(|| clock.advance(i64::MAX));
    assert!(
        clock.now_ms() > 0,
        "the clock wrapped to {} (advance answered {now:?})",
        clock.now_ms()
    );
}

/// The guide: `cancel(id)` answers `true` or `false`; `request.scheduled.id` is the entry's
/// id, a manifest entry's its name. A recurring entry's run that gave its own id to `cancel`
/// failed (no `cancel` took a string) and was counted as a failure; `cancel(name)` now answers
/// `false`: a manifest entry recurs while app.json declares it.
#[test]
fn a_named_entry_can_be_given_to_cancel() {
    for interpreted in [false, true] {
        let app = load(interpreted, 0);
        let mut tables = fresh(&app);
        let mut writes = WriteSet::default();
        app.ensure_schedules(0, &mut tables, &mut writes);
        let run = app
            .run_due(1_000, &mut tables, &mut WriteSet::default())
            .expect("tick is due");
        assert_eq!(run.id.to_string(), "tick");
        assert!(
            run.result.is_ok(),
            "interpreted {interpreted}: cancel(request.scheduled.id) of a named entry failed: {:?}",
            run.result.err().map(|e| e.to_string())
        );
    }
}
