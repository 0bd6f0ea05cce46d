//! Writes that come one at a time are committed on the thread that ran them (the syncer left
//! asleep), and keep every promise a commit by the syncer keeps: an answer only after its sync,
//! a failed sync poisons, nothing acknowledged is lost to a power loss.

use std::path::Path;
use std::time::Duration;

use pure_runtime::{HandlerError, Runtime, RuntimeOptions};
use pure_store::sim::{Faults, SimDisk};

use crate::{app, check_ledger, state, transfer};

/// A small log: each power loss copies the simulated disk. Any sync counts as quick: on a busy
/// machine a simulated sync may take longer than the default bound.
fn lone(here: bool) -> RuntimeOptions {
    RuntimeOptions {
        lone_write_sync_max: here.then_some(Duration::MAX),
        log_capacity_bytes: 4 << 20,
        ..RuntimeOptions::default()
    }
}

#[test]
fn lone_writes_commit_on_the_callers_thread_and_survive_a_power_loss_once_answered() {
    let disk = SimDisk::new(11);
    let dir = Path::new("/sim/data");
    let rt = Runtime::open_with_io(app("ledger"), dir, lone(true), disk.clone()).unwrap();
    let writes = 100;
    let mut forks = Vec::new();
    for i in 0..writes {
        transfer(&rt, i % 5, (i + 1) % 5, 1, "").unwrap();
        if i % 17 == 0 {
            // A power loss right after this answer: what it acknowledged must be there.
            forks.push((i as u64 + 1, disk.fork()));
        }
    }
    let metrics = rt.metrics();
    // The first lone write is the syncer's: its group of one shows that writes come one at a
    // time. After that each caller commits its own (the syncer, asleep, is never woken); one
    // may still find the syncer awake after its commit.
    assert!(
        metrics.groups_committed_here_total >= writes as u64 - 2,
        "{} of {writes} lone writes were committed on the caller's thread",
        metrics.groups_committed_here_total
    );
    assert_eq!(metrics.groups_total, writes as u64);
    assert_eq!(
        metrics.syncs_total, writes as u64,
        "one sync per lone write"
    );
    rt.shutdown();
    for (acknowledged, fork) in forks {
        fork.power_loss();
        fork.process_crash();
        let rt = Runtime::open_with_io(app("ledger"), dir, lone(true), fork).unwrap();
        let seq = check_ledger(&state(&rt));
        assert!(
            seq >= acknowledged,
            "{acknowledged} writes were answered, {seq} survived the power loss"
        );
        rt.shutdown();
    }
}

#[test]
fn a_failed_sync_in_a_callers_commit_poisons_and_refuses_the_write() {
    let disk = SimDisk::new(12);
    let dir = Path::new("/sim/data");
    let rt = Runtime::open_with_io(app("ledger"), dir, lone(true), disk.clone()).unwrap();
    for _ in 0..20 {
        transfer(&rt, 1, 2, 1, "").unwrap();
    }
    let durable = state(&rt);
    let here = rt.metrics().groups_committed_here_total;
    assert!(here > 0, "lone writes are committed on the caller's thread");
    disk.set_faults(Faults {
        fail_sync_at: Some(1),
        ..Faults::default()
    });
    let failed = transfer(&rt, 2, 3, 1, "").unwrap_err();
    assert!(
        matches!(failed, HandlerError::Unavailable { .. }),
        "{failed:?}"
    );
    assert_eq!(
        rt.metrics().groups_committed_here_total,
        here + 1,
        "the failed commit was the caller's"
    );
    assert!(rt.poisoned().is_some());
    assert!(matches!(
        transfer(&rt, 1, 2, 1, ""),
        Err(HandlerError::Unavailable { .. })
    ));
    assert_eq!(state(&rt), durable, "reads serve the last durable snapshot");
    rt.shutdown();

    disk.power_loss();
    disk.process_crash();
    let rt = Runtime::open_with_io(app("ledger"), dir, lone(true), disk).unwrap();
    let seq = check_ledger(&state(&rt));
    assert!(seq == 20 || seq == 21, "{seq}");
    rt.shutdown();
}

#[test]
fn with_lone_writes_on_the_syncer_every_commit_is_the_syncers() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::open(app("ledger"), dir.path(), lone(false)).unwrap();
    for _ in 0..30 {
        transfer(&rt, 1, 2, 1, "").unwrap();
    }
    assert_eq!(rt.metrics().groups_committed_here_total, 0);
    assert_eq!(rt.metrics().groups_total, 30);
    rt.shutdown();
}

/// Callers committing lone writes and the syncer committing groups, mixed by four writers: every
/// write is answered, in one gap-free sequence, and what was answered survives a power loss.
#[test]
fn callers_and_the_syncer_commit_in_turn_without_losing_a_write() {
    let disk = SimDisk::new(13);
    let dir = Path::new("/sim/data");
    let rt = Runtime::open_with_io(app("ledger"), dir, lone(true), disk.clone()).unwrap();
    let answered: u64 = std::thread::scope(|s| {
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let rt = rt.clone();
                s.spawn(move || {
                    for i in 0..150 {
                        transfer(&rt, w, (w + i) % 7, 1, "").unwrap();
                        if i % 10 == w {
                            // Now and then a writer pauses, so that the others write alone.
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    }
                    150
                })
            })
            .collect();
        writers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    assert_eq!(check_ledger(&state(&rt)), answered);
    rt.shutdown();
    disk.power_loss();
    disk.process_crash();
    let rt = Runtime::open_with_io(app("ledger"), dir, lone(true), disk).unwrap();
    assert_eq!(check_ledger(&state(&rt)), answered);
    rt.shutdown();
}
