//! Running the schedule: the entry due first, as a write of its own whose changes and the
//! removal of the entry are one write set (so one record: after any crash the entry has run
//! exactly once, or not yet), and the manifest's named, recurring entries.
//!
//! An entry whose handler fails (throws, meets a limit) has its handler's changes rolled back
//! and is removed all the same: it is not retried unless it scheduled itself again, which a
//! failed run cannot have done. A recurring entry is moved to its next due time instead of
//! removed, unless its run cancelled it.

use std::ops::Bound;

use rhai::{Dynamic, Map};

use super::App;
use crate::script::error::HandlerError;
use crate::script::request::{Head, Request};
use crate::script::respond::Answer;
use crate::state::key::{Key, PartRef};
use crate::state::schema::{
    TableId, DUE_INDEX, SCHEDULE_ARGS, SCHEDULE_DUE, SCHEDULE_EVERY, SCHEDULE_HANDLER,
    SCHEDULE_NAME, SCHEDULE_TABLE,
};
use crate::state::tables::{Tables, WriteSet};

/// A recurring entry the manifest declares: `"schedules": {"cleanup": {"every_ms": 60000,
/// "handler": "cleanup"}}`. Its row is keyed by its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedSchedule {
    pub name: String,
    pub every_ms: i64,
    pub handler: String,
}

/// What running one entry did.
#[derive(Debug)]
pub struct DueRun {
    /// The entry's id (a manifest entry's: its name).
    pub id: Dynamic,
    /// Its row's key in the schedule table.
    pub key: Key,
    pub handler: String,
    pub due_ms: i64,
    /// The handler's answer, or why it failed (its changes rolled back, the entry removed).
    pub result: Result<Answer, HandlerError>,
}

impl App {
    fn schedule_table(&self) -> TableId {
        self.schema
            .table_id(SCHEDULE_TABLE)
            .expect("every app has the schedule table")
    }

    /// When the first entry of the schedule is due, in milliseconds since the epoch (`None`
    /// with none pending).
    pub fn next_due(&self, tables: &Tables) -> Option<i64> {
        let index = tables.index_id(DUE_INDEX)?;
        let (_, key) = tables
            .index_range(index, Bound::Unbounded, Bound::Unbounded)
            .next()?;
        tables.get(self.schedule_table(), &key)?.int(SCHEDULE_DUE)
    }

    /// Schedule entries pending.
    pub fn pending_schedules(&self, tables: &Tables) -> usize {
        tables.len(self.schedule_table())
    }

    /// Runs the first entry of the schedule if it is due at `now_ms`, into `writes` (empty
    /// before; the caller encodes it as one record); `None` when none is due.
    pub fn run_due(
        &self,
        now_ms: i64,
        tables: &mut Tables,
        writes: &mut WriteSet,
    ) -> Option<DueRun> {
        assert!(writes.is_empty(), "a due entry runs as a write of its own");
        let table = self.schedule_table();
        let index = tables.index_id(DUE_INDEX)?;
        let (_, key) = tables
            .index_range(index, Bound::Unbounded, Bound::Unbounded)
            .next()?;
        let entry = tables.get(table, &key)?.clone();
        let due_ms = entry.int(SCHEDULE_DUE)?;
        if due_ms > now_ms {
            return None;
        }
        let handler = entry.str(SCHEDULE_HANDLER).unwrap_or_default().to_string();
        let every = entry.int(SCHEDULE_EVERY).filter(|every| *every > 0);
        let name = entry.str(SCHEDULE_NAME).map(str::to_string);
        let id = match key.part_refs().next() {
            Some(PartRef::Int(id)) => Dynamic::from_int(id),
            Some(PartRef::Str(name)) => Dynamic::from(name.to_string()),
            None => Dynamic::UNIT,
        };
        // A named entry the manifest no longer declares: dropped, not run.
        let declared = name
            .as_ref()
            .is_none_or(|name| self.schedules.iter().any(|s| &s.name == name));
        let result = if declared {
            let mut scheduled = Map::new();
            scheduled.insert("id".into(), id.clone());
            scheduled.insert("due".into(), Dynamic::from_int(due_ms));
            scheduled.insert(
                "name".into(),
                name.clone().map_or(Dynamic::UNIT, Dynamic::from),
            );
            let request = Request {
                body: entry.value(SCHEDULE_ARGS),
                head: Box::new(Head {
                    method: "SCHEDULED".into(),
                    id: format!("schedule-{id}").into(),
                    ..Head::default()
                }),
                scheduled: Dynamic::from_map(scheduled),
                ..Request::default()
            };
            self.run_write(&handler, &request, tables, writes)
        } else {
            Ok(Answer::ok(crate::script::json::Json::null()))
        };
        let run_key = key.clone();
        // The run cancelled its own entry: nothing more to remove.
        if tables.get(table, &key).is_some() {
            let next = every.filter(|_| declared).map(|every| {
                // The next due time after now: runs missed while the server was down are not
                // made up, one is.
                let missed = now_ms.saturating_sub(due_ms) / every + 1;
                due_ms.saturating_add(missed.saturating_mul(every))
            });
            match next {
                Some(next) => {
                    let stored = tables.get(table, &key).expect("looked up above").clone();
                    let moved = stored.with(&[(SCHEDULE_DUE, Dynamic::from_int(next))]);
                    tables
                        .put(writes, table, key, moved, false)
                        .expect("an entry's due time is an integer");
                }
                None => {
                    tables.delete(writes, table, key);
                }
            }
        }
        Some(DueRun {
            id,
            key: run_key,
            handler,
            due_ms,
            result,
        })
    }

    /// Removes the entry at `key` (its run could not be logged) into `writes`.
    pub fn drop_due(&self, key: Key, tables: &mut Tables, writes: &mut WriteSet) {
        tables.delete(writes, self.schedule_table(), key);
    }

    /// Whether a schedule the manifest declares has no entry, or one of another period or
    /// handler ([`App::ensure_schedules`] makes them).
    pub fn schedules_missing(&self, tables: &Tables) -> bool {
        let table = self.schedule_table();
        self.schedules.iter().any(|schedule| {
            tables
                .get(table, &Key::string(&schedule.name))
                .is_none_or(|stored| {
                    stored.int(SCHEDULE_EVERY) != Some(schedule.every_ms)
                        || stored.str(SCHEDULE_HANDLER) != Some(schedule.handler.as_str())
                })
        })
    }

    /// Makes the entry of each schedule the manifest declares that has none yet (due one period
    /// from `now_ms`), and sets the period and handler of those that have one, into `writes`.
    pub fn ensure_schedules(&self, now_ms: i64, tables: &mut Tables, writes: &mut WriteSet) {
        let table = self.schedule_table();
        for schedule in &self.schedules {
            let key = Key::string(&schedule.name);
            let values = |due: Dynamic| {
                vec![
                    due,
                    Dynamic::from(schedule.handler.clone()),
                    Dynamic::UNIT,
                    Dynamic::from_int(schedule.every_ms),
                    Dynamic::from(schedule.name.clone()),
                ]
            };
            let fields = match tables.get(table, &key) {
                Some(stored)
                    if stored.int(SCHEDULE_EVERY) == Some(schedule.every_ms)
                        && stored.str(SCHEDULE_HANDLER) == Some(schedule.handler.as_str()) =>
                {
                    continue
                }
                Some(stored) => stored.with(&[
                    (SCHEDULE_HANDLER, Dynamic::from(schedule.handler.clone())),
                    (SCHEDULE_EVERY, Dynamic::from_int(schedule.every_ms)),
                ]),
                None => crate::state::fields::Fields::from_values(&values(Dynamic::from_int(
                    now_ms.saturating_add(schedule.every_ms),
                ))),
            };
            tables
                .put(writes, table, key, fields, false)
                .expect("a named entry's fields are of the schedule's types");
        }
    }
}
