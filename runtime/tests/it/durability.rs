//! Answers wait for their group's sync; reads see only durable, whole groups; a failed sync
//! stops writes and keeps reads on the last durable state.

use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use pure_runtime::{CommitGate, HandlerError, Runtime, RuntimeOptions, SyncMode};
use pure_store::sim::{Faults, SimDisk};
use serde_json::json;
use tokio::sync::oneshot::error::TryRecvError;

use crate::{app, body, check_ledger, eventually, gate, state, transfer, Gate, WAIT};

fn wait_entered(gate: &Gate) {
    gate.entered
        .recv_timeout(WAIT)
        .expect("the syncer reaches the commit");
}

#[test]
fn an_answer_leaves_only_after_its_group_is_synced() {
    let dir = tempfile::tempdir().unwrap();
    let (hook, gate) = gate();
    let options = RuntimeOptions {
        commit_gate: Some(hook),
        ..RuntimeOptions::default()
    };
    let rt = Runtime::open(app("ledger"), dir.path(), options).unwrap();

    let mut first = rt
        .write("transfer", body(json!({"from": 1, "to": 2, "amount": 5})))
        .unwrap();
    wait_entered(&gate);
    // The group is appended and its commit is held: no answer, and reads do not see it.
    assert_eq!(first.try_recv().unwrap_err(), TryRecvError::Empty);
    assert_eq!(state(&rt)["seq"], json!(0));
    // Two more writes arrive meanwhile: the owner runs them (as the next group) but they too
    // wait.
    let mut second = rt
        .write("transfer", body(json!({"from": 2, "to": 3, "amount": 1})))
        .unwrap();
    let mut third = rt
        .write("transfer", body(json!({"from": 3, "to": 1, "amount": 1})))
        .unwrap();
    assert_eq!(second.try_recv().unwrap_err(), TryRecvError::Empty);

    gate.release.send(()).unwrap();
    assert_eq!(first.blocking_recv().unwrap().unwrap(), json!(1));
    assert_eq!(state(&rt)["seq"], json!(1), "read your writes");
    // The next commit (holding the second write, maybe the third) is held again.
    wait_entered(&gate);
    assert_eq!(second.try_recv().unwrap_err(), TryRecvError::Empty);
    assert_eq!(state(&rt)["seq"], json!(1));
    gate.release.send(()).unwrap();
    assert_eq!(second.blocking_recv().unwrap().unwrap(), json!(2));
    // The third write went with the second or in a group of its own: release commits until its
    // answer is there.
    let answer = loop {
        match third.try_recv() {
            Ok(answer) => break answer,
            Err(TryRecvError::Empty) => {
                if gate.entered.recv_timeout(Duration::from_millis(10)).is_ok() {
                    gate.release.send(()).unwrap();
                }
            }
            Err(TryRecvError::Closed) => panic!("the third write was dropped"),
        }
    };
    assert_eq!(answer.unwrap(), json!(3));
    assert_eq!(check_ledger(&state(&rt)), 3);
    // Shutdown drains: nothing else is queued, so it needs no further release.
    rt.shutdown();
}

/// Writes that arrive one by one while a group commits are all run at once and all join the very
/// next group, not the one after it: one more commit answers every one of them.
#[test]
fn writes_arriving_during_a_commit_join_the_next_group() {
    let dir = tempfile::tempdir().unwrap();
    let (hook, gate) = gate();
    let options = RuntimeOptions {
        sync: SyncMode::None,
        commit_gate: Some(hook),
        ..RuntimeOptions::default()
    };
    let rt = Runtime::open(app("ledger"), dir.path(), options).unwrap();
    let send = || {
        rt.write("transfer", body(json!({"from": 1, "to": 2, "amount": 1})))
            .unwrap()
    };
    let first = send();
    wait_entered(&gate);
    let mut later = Vec::new();
    for _ in 0..5 {
        later.push(send());
        eventually(
            "the owner takes each write while the syncer commits",
            || rt.metrics().queue_depth == 0,
        );
    }
    gate.release.send(()).unwrap();
    assert_eq!(first.blocking_recv().unwrap().unwrap(), json!(1));
    wait_entered(&gate);
    gate.release.send(()).unwrap();
    let mut answers = Vec::new();
    for reply in &mut later {
        eventually(
            "the next commit answers every later write",
            || match reply.try_recv() {
                Ok(answer) => {
                    answers.push(answer.unwrap());
                    true
                }
                Err(TryRecvError::Empty) => false,
                Err(TryRecvError::Closed) => panic!("a write was dropped"),
            },
        );
    }
    assert_eq!(answers, (2..=6).map(|s| json!(s)).collect::<Vec<_>>());
    assert_eq!(rt.metrics().groups_total, 2);
    rt.shutdown();
}

/// A panic in the syncer (injected through the commit gate) leaves no write waiting forever: the
/// group it held is dropped unanswered, the runtime is poisoned with the reason, and later writes
/// are refused at once. (Found by review: the owner used to stop and leave its queue stranded.)
#[test]
fn a_syncer_panic_leaves_no_write_waiting_and_poisons() {
    let dir = tempfile::tempdir().unwrap();
    let options = RuntimeOptions {
        sync: SyncMode::None,
        commit_gate: Some(CommitGate(Arc::new(|| {
            panic!("fault injection: the syncer panics")
        }))),
        ..RuntimeOptions::default()
    };
    let rt = Runtime::open(app("ledger"), dir.path(), options).unwrap();
    let send = || rt.write("transfer", body(json!({"from": 1, "to": 2, "amount": 1})));
    let first = send().unwrap();
    assert!(
        first.blocking_recv().is_err(),
        "the panicked group's answer is dropped, never sent"
    );
    eventually("the runtime is poisoned", || rt.poisoned().is_some());
    let reason = rt.poisoned().unwrap();
    assert!(
        reason.contains("syncer") && reason.contains("restart"),
        "{reason}"
    );
    match send() {
        Err(HandlerError::Unavailable { .. }) => {}
        other => panic!("a write after the syncer's panic: {other:?}"),
    }
    assert_eq!(rt.metrics().queue_depth, 0);
    rt.shutdown();
}

#[test]
fn concurrent_reads_see_only_whole_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let options = RuntimeOptions {
        sync: SyncMode::None,
        ..RuntimeOptions::default()
    };
    let rt = Runtime::open(app("ledger"), dir.path(), options).unwrap();
    let (done_tx, done) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        for client in 0..3i64 {
            let (rt, done_tx) = (rt.clone(), done_tx.clone());
            s.spawn(move || {
                for i in 0..150 {
                    let fail = if i % 5 == 0 { "throw" } else { "" };
                    let _ = transfer(&rt, client, (i % 4) + 10, i, fail);
                }
                drop(done_tx);
            });
        }
        drop(done_tx);
        let rt = rt.clone();
        s.spawn(move || {
            let mut last = 0;
            loop {
                let finished = matches!(
                    done.recv_timeout(Duration::ZERO),
                    Err(RecvTimeoutError::Disconnected)
                );
                let seq = check_ledger(&state(&rt));
                assert!(seq >= last, "published states only move forward");
                last = seq;
                if finished {
                    break;
                }
            }
        });
    });
    assert_eq!(check_ledger(&state(&rt)), 360);
    rt.shutdown();
}

#[test]
fn a_failed_sync_stops_writes_and_reads_keep_the_durable_state() {
    let disk = SimDisk::new(7);
    let dir = Path::new("/sim/data");
    let rt =
        Runtime::open_with_io(app("ledger"), dir, RuntimeOptions::default(), disk.clone()).unwrap();
    transfer(&rt, 1, 2, 5, "").unwrap();
    let durable = state(&rt);
    disk.set_faults(Faults {
        fail_sync_at: Some(1),
        ..Faults::default()
    });
    let failed = transfer(&rt, 2, 3, 1, "").unwrap_err();
    assert!(
        matches!(failed, HandlerError::Unavailable { .. }),
        "{failed:?}"
    );
    let reason = rt.poisoned().expect("the store is poisoned");
    assert!(
        reason.contains("fdatasync") || reason.contains("sync"),
        "{reason}"
    );
    assert!(matches!(
        transfer(&rt, 1, 2, 5, ""),
        Err(HandlerError::Unavailable { .. })
    ));
    assert_eq!(state(&rt), durable, "reads serve the last durable snapshot");
    assert!(rt.health().poisoned.is_some());
    rt.shutdown();

    // After a restart the failed write is not there (its sync failed) or is there whole.
    disk.power_loss();
    disk.process_crash();
    let rt = Runtime::open_with_io(app("ledger"), dir, RuntimeOptions::default(), disk).unwrap();
    let seq = check_ledger(&state(&rt));
    assert!(seq == 1 || seq == 2, "{seq}");
    rt.shutdown();
}

/// A panic inside a write handler (a bug in Pure or Rhai, injected here) poisons the runtime: that
/// write and every later one are refused, reads serve the last durable snapshot, and a restart
/// recovers the durable state without the panicked write.
#[test]
fn a_panicking_write_handler_poisons_and_a_restart_recovers() {
    let disk = SimDisk::new(11);
    let dir = Path::new("/sim/data");
    let rt =
        Runtime::open_with_io(app("ledger"), dir, RuntimeOptions::default(), disk.clone()).unwrap();
    transfer(&rt, 1, 2, 5, "").unwrap();
    let durable = state(&rt);
    let failed = transfer(&rt, 2, 3, 1, "panic").unwrap_err();
    assert!(
        matches!(&failed, HandlerError::Panicked { handler, .. } if handler == "transfer"),
        "the panicked write gets its own answer, a 500: {failed:?}"
    );
    assert_eq!(failed.status(), 500);
    let reason = rt.poisoned().expect("the runtime is poisoned");
    assert!(
        reason.contains("transfer") && reason.contains("restart"),
        "{reason}"
    );
    assert!(matches!(
        transfer(&rt, 1, 2, 5, ""),
        Err(HandlerError::Unavailable { .. })
    ));
    assert_eq!(state(&rt), durable, "reads serve the last durable snapshot");
    assert!(rt.health().poisoned.is_some());
    rt.shutdown();

    disk.process_crash();
    let rt = Runtime::open_with_io(app("ledger"), dir, RuntimeOptions::default(), disk).unwrap();
    assert_eq!(
        state(&rt),
        durable,
        "the durable state, without the panicked write"
    );
    assert_eq!(
        transfer(&rt, 1, 2, 1, "").unwrap(),
        json!(2),
        "writes go on after a restart"
    );
    rt.shutdown();
}

#[test]
fn a_full_queue_refuses_at_once_and_everything_accepted_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let (hook, gate) = gate();
    let options = RuntimeOptions {
        sync: SyncMode::None,
        queue_capacity: 2,
        commit_gate: Some(hook),
        ..RuntimeOptions::default()
    };
    let rt = Runtime::open(app("ledger"), dir.path(), options).unwrap();
    let send = || rt.write("transfer", body(json!({"from": 1, "to": 2, "amount": 1})));
    let mut accepted = vec![send().unwrap()];
    wait_entered(&gate);
    // The syncer holds group 1; the owner runs arriving writes into group 2 until it reaches
    // its bound (1,024 writes), then the queue takes two more: so within that many writes one
    // is refused, without blocking.
    let mut refused = None;
    for _ in 0..1024 + 2 + 10 {
        match send() {
            Ok(reply) => accepted.push(reply),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    match refused {
        Some(HandlerError::Unavailable { reason }) => assert!(reason.contains("full"), "{reason}"),
        other => panic!("expected a refusal for a full queue, got {other:?}"),
    }
    // Release commits until every accepted write has its answer.
    let count = accepted.len();
    let mut answers = Vec::new();
    for mut reply in accepted {
        let answer = loop {
            match reply.try_recv() {
                Ok(answer) => break answer,
                Err(TryRecvError::Empty) => {
                    gate.release.send(()).unwrap();
                    let _ = gate.entered.recv_timeout(Duration::from_millis(10));
                }
                Err(TryRecvError::Closed) => panic!("an accepted write was dropped"),
            }
        };
        answers.push(answer.unwrap());
    }
    assert_eq!(
        answers,
        (1..=count as u64).map(|s| json!(s)).collect::<Vec<_>>()
    );
    assert_eq!(check_ledger(&state(&rt)), count as u64);
    // Later releases are not needed: keep the gate open for shutdown.
    for _ in 0..4 {
        let _ = gate.release.send(());
    }
    rt.shutdown();
}
