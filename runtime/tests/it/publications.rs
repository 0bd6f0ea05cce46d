//! Watchers of the published state (`Runtime::publications`): after each durable group, its
//! LSN and per table the LSN of the last group that wrote it; nothing for a write that threw; a
//! watcher that falls behind sees the newest publication, which still says every table written
//! since it last looked; and never a state that is not durable (announced once its answers left).

use std::time::Duration;

use pure_runtime::{HandlerError, Runtime, RuntimeOptions, TableSet};
use serde_json::{json, Value};

use crate::support::{app, body, gate, PATIENT};

fn apply(rt: &Runtime, ops: Value, fail: bool) -> Result<Value, HandlerError> {
    rt.write("apply", body(json!({"ops": ops, "fail": fail})))?
        .blocking_recv()
        .expect("every queued write is answered")
        .map(|answer| answer.body.to_value())
}

/// Waits until the watcher has seen the publication of the durable LSN now (announced just
/// after the group's answers leave).
fn caught_up(rt: &Runtime, watcher: &mut tokio::sync::watch::Receiver<pure_runtime::Publication>) {
    let deadline = std::time::Instant::now() + PATIENT;
    while watcher.borrow().lsn < rt.metrics().durable_lsn {
        assert!(std::time::Instant::now() < deadline, "never announced");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn tables(rt: &Runtime, names: &[&str]) -> TableSet {
    let app = rt.app();
    let mut set = TableSet::default();
    for name in names {
        set.insert(app.schema().table_id(name).expect("a table of the app"));
    }
    set
}

#[test]
fn each_durable_group_is_announced_with_the_tables_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::open(app("review"), dir.path(), RuntimeOptions::default()).unwrap();
    let mut watcher = rt.publications();
    let start = watcher.borrow_and_update().clone();
    assert_eq!(start.lsn, rt.metrics().durable_lsn);
    let (kv, pairs) = (tables(&rt, &["kv"]), tables(&rt, &["pairs"]));
    assert!(!start.changed_since(&kv, start.lsn));

    apply(&rt, json!([["put", "kv", [1], {"a": 1}]]), false).unwrap();
    caught_up(&rt, &mut watcher);
    let first = watcher.borrow_and_update().clone();
    assert_eq!(
        first.lsn,
        rt.metrics().durable_lsn,
        "announced once durable and published"
    );
    assert!(first.changed_since(&kv, start.lsn));
    assert!(
        !first.changed_since(&pairs, start.lsn),
        "pairs was not written"
    );

    // A write that throws changes nothing and is not announced.
    assert!(apply(&rt, json!([["put", "pairs", [1, "x"], {"x": 1}]]), true).is_err());
    assert!(!watcher.has_changed().unwrap());

    apply(&rt, json!([["put", "pairs", [1, "x"], {"x": 2}]]), false).unwrap();
    apply(&rt, json!([["put", "kv", [2], {"a": 2}]]), false).unwrap();
    caught_up(&rt, &mut watcher);
    // Two groups later, the watcher sees the newest, which still tells both tables changed.
    let now = watcher.borrow_and_update().clone();
    assert_eq!(now.lsn, rt.metrics().durable_lsn);
    assert!(now.changed_since(&pairs, first.lsn) && now.changed_since(&kv, first.lsn));
    assert!(
        !now.changed_since(&pairs, now.lsn - 1),
        "pairs was written before the last group"
    );
    rt.shutdown();
}

#[test]
fn nothing_is_announced_before_its_group_is_synced() {
    let dir = tempfile::tempdir().unwrap();
    let (hook, held) = gate();
    let options = RuntimeOptions {
        commit_gate: Some(hook),
        ..RuntimeOptions::default()
    };
    let rt = Runtime::open(app("review"), dir.path(), options).unwrap();
    let mut watcher = rt.publications();
    let before = watcher.borrow_and_update().lsn;
    let reply = rt
        .write(
            "apply",
            body(json!({"ops": [["put", "kv", [1], {"a": 1}]], "fail": false})),
        )
        .unwrap();
    // The group waits at its commit: written in memory, not yet synced.
    held.entered
        .recv_timeout(PATIENT)
        .expect("the commit is held");
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        !watcher.has_changed().unwrap(),
        "announced while its sync is held"
    );
    assert_eq!(watcher.borrow().lsn, before);
    held.release.send(()).unwrap();
    assert!(reply.blocking_recv().expect("answered").is_ok());
    // Announced right after the answers leave.
    let deadline = std::time::Instant::now() + PATIENT;
    while !watcher.has_changed().unwrap() {
        assert!(std::time::Instant::now() < deadline, "never announced");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(watcher.borrow().lsn > before);
    rt.shutdown();
}
