//! Transcripts: requests and the answers they must get, on a real data directory.

use pure_runtime::{HandlerError, Request, Runtime, RuntimeOptions, SyncMode};
use serde_json::json;

use crate::{app, body, check_ledger, state, transfer};

fn open(dir: &std::path::Path) -> Runtime {
    let options = RuntimeOptions {
        sync: SyncMode::None,
        ..RuntimeOptions::default()
    };
    Runtime::open(app("ledger"), dir, options).expect("the runtime opens")
}

#[test]
fn writes_reads_and_every_kind_of_failure_roll_back() {
    let dir = tempfile::tempdir().unwrap();
    let rt = open(dir.path());
    assert_eq!(transfer(&rt, 1, 2, 10, "").unwrap(), json!(1));
    assert_eq!(transfer(&rt, 2, 3, 4, "").unwrap(), json!(2));
    let before = state(&rt);
    assert_eq!(check_ledger(&before), 2);

    for (fail, status, limit) in [
        ("throw", 409, None),
        ("text", 400, None),
        ("bug", 500, None),
        ("spin", 500, Some("operations")),
        ("recurse", 500, Some("call depth")),
        ("grow", 500, Some("size")),
    ] {
        let error = transfer(&rt, 3, 1, 7, fail).unwrap_err();
        assert_eq!(error.status(), status, "{fail}: {error}");
        if let Some(limit) = limit {
            // On a loaded machine the wall clock may stop an endless loop before the operation
            // count does: either limit keeps the promise.
            let stopped =
                |l: &str| l.starts_with(limit) || (fail == "spin" && l == "wall-clock time");
            assert!(
                matches!(&error, HandlerError::Limit { limit: l, .. } if stopped(l)),
                "{error}"
            );
        }
        assert_eq!(state(&rt), before, "{fail} left nothing behind");
    }
    let thrown = transfer(&rt, 3, 1, 7, "throw").unwrap_err();
    assert_eq!(
        thrown.to_json(),
        json!({"status": 409, "error": "refused after writing", "seq": 7})
    );
    match transfer(&rt, 3, 1, 7, "bug").unwrap_err() {
        HandlerError::Script {
            handler,
            file,
            line,
            ..
        } => {
            assert_eq!(
                (handler.as_str(), file.as_str(), line),
                ("transfer", "checks.rhai", 8)
            );
        }
        other => panic!("expected a script error, got {other:?}"),
    }

    // The owner goes on.
    assert_eq!(transfer(&rt, 3, 1, 1, "").unwrap(), json!(3));
    let account = |id: &str| {
        let request = Request {
            params: vec![("id".into(), id.into())],
            ..Request::default()
        };
        rt.read("account", request)
    };
    assert_eq!(
        account("1").unwrap(),
        json!({"balance": -9, "ops": 2, "name": "acct 1"})
    );
    assert_eq!(account("7").unwrap_err().status(), 404);
    // A read handler cannot write; a write route can.
    let close = Request {
        params: vec![("id".into(), "1".into())],
        ..Request::default()
    };
    assert_eq!(rt.read("close", close.clone()).unwrap_err().status(), 500);
    assert_eq!(
        rt.write("close", close)
            .unwrap()
            .blocking_recv()
            .unwrap()
            .unwrap(),
        json!(true)
    );
    assert_eq!(account("1").unwrap_err().status(), 404);
    assert_eq!(
        account("999").unwrap(),
        json!({"balance": 0, "ops": (), "name": ()})
    );
    assert!(matches!(
        rt.write("nope", Request::default()),
        Err(HandlerError::NoSuchHandler { .. })
    ));

    let metrics = rt.metrics();
    assert!(
        metrics.writes_total >= 11 && metrics.writes_failed_total >= 8,
        "{metrics:?}"
    );
    rt.shutdown();
    assert!(matches!(
        rt.write("transfer", body(json!({}))),
        Err(HandlerError::Unavailable { .. })
    ));
}

#[test]
fn recovery_after_checkpoints_and_a_redeploy_keeps_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let options = RuntimeOptions {
        sync: SyncMode::Always,
        log_capacity_bytes: 256 << 10,
        checkpoint_interval_bytes: 16 << 10,
        ..RuntimeOptions::default()
    };
    let rt = Runtime::open(app("ledger"), dir.path(), options.clone()).unwrap();
    // Concurrent clients, so that groups hold several writes; enough writes to lap the log.
    std::thread::scope(|s| {
        for client in 0..4i64 {
            let rt = rt.clone();
            s.spawn(move || {
                for i in 0..300 {
                    transfer(&rt, client, (client + i) % 7, i, "").unwrap();
                }
            });
        }
    });
    let before = state(&rt);
    assert_eq!(check_ledger(&before), 1200);
    let metrics = rt.metrics();
    assert!(
        metrics.checkpoints_total >= 2,
        "checkpoints ran: {metrics:?}"
    );
    assert!(metrics.groups_total > 0 && metrics.syncs_total > 0);
    rt.shutdown();

    let rt = Runtime::open(app("ledger"), dir.path(), options.clone()).unwrap();
    assert_eq!(state(&rt), before, "recovery rebuilds the same state");
    assert_eq!(transfer(&rt, 1, 2, 5, "").unwrap(), json!(1201));
    let before = state(&rt);
    rt.shutdown();

    // Version 2 reorders fields and adds a field and a table: the data is read by name.
    let rt = Runtime::open(app("ledger_v2"), dir.path(), options.clone()).unwrap();
    assert_eq!(state(&rt), before);
    let account = Request {
        params: vec![("id".into(), "2".into())],
        ..Request::default()
    };
    let two = rt.read("account", account.clone()).unwrap().body.to_value();
    assert_eq!(two["name"], json!("acct 2"));
    assert_eq!(two["note"], json!(null));
    assert_eq!(transfer(&rt, 1, 2, 5, "").unwrap(), json!(1202));
    let after = state(&rt);
    rt.shutdown();
    // And back to version 1 (the field `note` and the table `audit` stay in the data).
    let rt = Runtime::open(app("ledger"), dir.path(), options).unwrap();
    assert_eq!(state(&rt), after);
    rt.shutdown();
}

#[test]
fn a_full_log_is_freed_by_a_checkpoint_and_writes_go_on() {
    let dir = tempfile::tempdir().unwrap();
    // A log that may not grow, whose checkpoints start only at three quarters of it (the
    // interval is past its capacity): the writes made while one is written fill it now and
    // then, and the group that did not fit waits for it.
    let options = RuntimeOptions {
        sync: SyncMode::None,
        log_capacity_bytes: 64 << 10,
        log_capacity_max_bytes: 64 << 10,
        checkpoint_interval_bytes: 1 << 30,
        write_timeout: crate::PATIENT,
        ..RuntimeOptions::default()
    };
    let rt = Runtime::open(app("ledger"), dir.path(), options.clone()).unwrap();
    for i in 0..2000 {
        transfer(&rt, i % 5, (i + 1) % 5, i, "").unwrap();
    }
    let before = state(&rt);
    assert_eq!(check_ledger(&before), 2000);
    assert!(rt.metrics().checkpoints_total >= 1, "{:?}", rt.metrics());
    rt.shutdown();
    let rt = Runtime::open(app("ledger"), dir.path(), options).unwrap();
    assert_eq!(state(&rt), before);
    rt.shutdown();
}
