//! `schedule(delay_ms, "handler", args)`, `schedule_at(epoch_ms, "handler", args)` and
//! `cancel(id)`: entries of the app's schedule table, written by the write that makes them, so
//! that they commit with it (a write that throws schedules nothing) and are as durable as its
//! other changes. The runtime runs each entry once it is due (`App::run_due`).

use rhai::{Dynamic, Engine, EvalAltResult, Map};

use crate::script::api::{self, Table};
use crate::script::api_error::api_error;
use crate::script::context::with_write;
use crate::script::limits::Limits;
use crate::script::world;
use crate::state::key::Key;
use crate::state::schema::{Schema, SCHEDULE_TABLE};

type Fallible<T> = Result<T, Box<EvalAltResult>>;

pub(crate) fn register(engine: &mut Engine, schema: &std::sync::Arc<Schema>, limits: &Limits) {
    if schema.table_id(SCHEDULE_TABLE).is_none() {
        // A schema without it (lang's own unit tests): nothing to schedule into.
        return;
    }
    let caps = (limits.schedules_pending_max, limits.schedules_per_call_max);
    let s = schema.clone();
    engine.register_fn(
        "schedule",
        move |delay: i64, handler: &str, args: Dynamic| {
            schedule(&s, caps, (Some(delay), 0), handler, args)
        },
    );
    let s = schema.clone();
    engine.register_fn("schedule", move |delay: i64, handler: &str| {
        schedule(&s, caps, (Some(delay), 0), handler, Dynamic::UNIT)
    });
    let s = schema.clone();
    engine.register_fn(
        "schedule_at",
        move |due: i64, handler: &str, args: Dynamic| {
            schedule(&s, caps, (None, due), handler, args)
        },
    );
    let s = schema.clone();
    engine.register_fn("schedule_at", move |due: i64, handler: &str| {
        schedule(&s, caps, (None, due), handler, Dynamic::UNIT)
    });
    let s = schema.clone();
    engine.register_fn("cancel", move |id: i64| cancel(&s, id));
    // A manifest entry's id is its name: it recurs for as long as app.json declares it, and
    // no script cancels it.
    engine.register_fn("cancel", |_name: rhai::ImmutableString| false);
}

/// The caps of `Limits` on schedule entries: pending in the app, made by one call.
pub(crate) type Caps = (u64, u64);

pub(crate) fn caps(limits: &Limits) -> Caps {
    (limits.schedules_pending_max, limits.schedules_per_call_max)
}

/// `schedule(delay, ...)` (`(Some(delay), _)`) or `schedule_at(due, ...)` (`(None, due)`): the
/// new entry's id.
pub(crate) fn schedule(
    schema: &Schema,
    caps: Caps,
    (delay, at): (Option<i64>, i64),
    handler: &str,
    args: Dynamic,
) -> Fallible<i64> {
    let table = Table {
        id: schema
            .table_id(SCHEDULE_TABLE)
            .ok_or_else(|| api_error("the app has no schedule table".to_string()))?,
    };
    let due = match delay {
        Some(delay) => due_after(delay)?,
        None => at,
    };
    make(schema, table, caps, (due, handler, args))
}

/// `cancel(id)`: whether an entry pending was removed.
pub(crate) fn cancel(schema: &Schema, id: i64) -> Fallible<bool> {
    let table = schema
        .table_id(SCHEDULE_TABLE)
        .ok_or_else(|| api_error("the app has no schedule table".to_string()))?;
    with_write(|tables, writes| Ok(tables.delete(writes, table, Key::int(id)))).map_err(api_error)
}

/// The due time `delay` milliseconds after the call's `now()`.
fn due_after(delay: i64) -> Fallible<i64> {
    if delay < 0 {
        return Err(api_error(format!(
            "schedule: the delay is {delay} ms; it must be 0 or more"
        )));
    }
    let now = world::now().map_err(api_error)?;
    now.checked_add(delay).ok_or_else(|| {
        api_error(format!(
            "schedule: a delay of {delay} ms is past the last time"
        ))
    })
}

/// Puts an entry due at `due` that runs `handler` with `args`; its id.
fn make(
    schema: &Schema,
    table: Table,
    (pending_max, per_call_max): (u64, u64),
    (due, handler, args): (i64, &str, Dynamic),
) -> Fallible<i64> {
    if !world::is_handler(handler) {
        return Err(api_error(format!(
            "schedule: no fn {handler}(request) to run: a scheduled entry runs a function of \
             the app's scripts that takes one parameter"
        )));
    }
    let pending = with_write(|tables, _| Ok(tables.len(table.id) as u64)).map_err(api_error)?;
    if pending >= pending_max {
        return Err(api_error(format!(
            "schedule: the app has {pending} entries pending, its limit (limits.schedules_pending)"
        )));
    }
    let made = world::note_scheduled().map_err(api_error)?;
    if made > per_call_max {
        return Err(api_error(format!(
            "schedule: this call made {made} entries, more than one call may \
             (limits.schedules_per_call: {per_call_max})"
        )));
    }
    let id = api::next_id(schema, table)?;
    let mut entry = Map::new();
    entry.insert("due".into(), Dynamic::from_int(due));
    entry.insert("handler".into(), Dynamic::from(handler.to_string()));
    entry.insert("args".into(), args);
    api::put(schema, table, Key::int(id), Dynamic::from_map(entry), true)?;
    Ok(id)
}
