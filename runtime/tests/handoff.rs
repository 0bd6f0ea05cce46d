//! The passage of writes to the owner's role and of groups to the syncer (owner.rs,
//! building.rs): every accepted write is answered (shutdown, full groups, bursts from many
//! clients), answers only after their group is published, the owner at most one group ahead,
//! callers running their writes without waking the owner thread but for a bounded time, and the
//! owner and syncer threads asleep when there is nothing for them to do (counted by their
//! context switches in /proc).
//!
//! A test binary of its own, its tests one at a time (`SERIAL`): the counts in /proc must see
//! only one runtime's threads.

#[allow(dead_code)]
#[path = "it/support.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pure_lang::Limits;
use pure_runtime::{App, CommitGate, Runtime, RuntimeOptions, SyncMode, WriteReply};
use serde_json::{json, Value};
use tokio::sync::oneshot::error::TryRecvError;

use support::{app, body, check_ledger, eventually, gate, state, WAIT};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Per thread of this process named `name`: its context switches (voluntary + involuntary),
/// and whether it is asleep.
fn switches(name: &str) -> BTreeMap<u32, (u64, bool)> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let dir = entry.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let count: u64 = status
            .lines()
            .filter(|l| l.contains("ctxt_switches"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        let asleep = status.lines().any(|l| l.starts_with("State:\tS"));
        let tid = entry.file_name().to_string_lossy().parse().unwrap();
        out.insert(tid, (count, asleep));
    }
    out
}

/// The one thread named `name` and its context switches, once it sleeps (fails if there are
/// several: another runtime is running). A thread names itself when it first runs, which on a
/// busy machine can be well after the runtime has opened.
fn only(name: &str) -> (u32, u64) {
    eventually(&format!("a {name} thread, asleep"), || {
        switches(name).values().any(|&(_, asleep)| asleep)
    });
    let all = switches(name);
    assert_eq!(all.len(), 1, "one {name} thread: {all:?}");
    let (tid, (count, _)) = all.into_iter().next().unwrap();
    (tid, count)
}

/// Context switches of the thread `tid`, named `name`.
fn switches_of(name: &str, tid: u32) -> u64 {
    switches(name)[&tid].0
}

fn wakeups_during(name: &str, span: impl FnOnce()) -> u64 {
    let (tid, before) = only(name);
    span();
    let after = switches_of(name, tid);
    after - before
}

fn transfer_req(i: i64) -> pure_runtime::Request {
    body(json!({"from": i % 7, "to": 100 + i % 5, "amount": 1}))
}

/// Waits for a reply without blocking forever.
fn answer(reply: &mut WriteReply, what: &str) -> Value {
    let started = Instant::now();
    loop {
        match reply.try_recv() {
            Ok(answer) => {
                return answer
                    .unwrap_or_else(|e| panic!("{what}: {e:?}"))
                    .body
                    .to_value()
            }
            Err(TryRecvError::Empty) => {
                assert!(started.elapsed() < WAIT, "{what}: no answer after {WAIT:?}");
                std::thread::sleep(Duration::from_micros(100));
            }
            Err(TryRecvError::Closed) => panic!("{what}: the answer was dropped"),
        }
    }
}

/// An idle runtime: after one write, neither the syncer nor the owner wakes up (no polling).
#[test]
fn an_idle_runtime_does_not_wake_its_threads() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::open(app("ledger"), dir.path(), RuntimeOptions::default()).unwrap();
    let mut reply = rt.write("transfer", transfer_req(1)).unwrap();
    assert_eq!(answer(&mut reply, "the one write"), json!(1));
    std::thread::sleep(Duration::from_millis(100));
    let (syncer, owner) = {
        let (s_tid, s0) = only("pure-syncer");
        let (o_tid, o0) = only("pure-owner");
        std::thread::sleep(Duration::from_secs(1));
        (
            switches_of("pure-syncer", s_tid) - s0,
            switches_of("pure-owner", o_tid) - o0,
        )
    };
    eprintln!("idle 1 s: syncer woke {syncer} times, owner {owner} times");
    assert!(syncer <= 2, "the idle syncer woke {syncer} times in 1 s");
    assert!(owner <= 2, "the idle owner woke {owner} times in 1 s");
    rt.shutdown();
}

/// The owner's role: a caller whose write finds the role free runs it on its own thread, so a
/// run of writes, each awaited before the next, does not wake the owner thread at all (handing
/// each to it cost one wake-up per write), and each answer still comes only after its group's
/// commit, with the state it reports.
#[test]
fn a_caller_runs_its_write_without_waking_the_owner_thread() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::open(app("ledger"), dir.path(), RuntimeOptions::default()).unwrap();
    let mut reply = rt.write("transfer", transfer_req(0)).unwrap();
    assert_eq!(answer(&mut reply, "the first write"), json!(1));
    let writes = 200;
    let woke = wakeups_during("pure-owner", || {
        for i in 1..=writes {
            let mut reply = rt.write("transfer", transfer_req(i)).unwrap();
            assert_eq!(answer(&mut reply, "a write"), json!(i + 1));
        }
    });
    eprintln!("{writes} writes, one at a time: the owner thread woke {woke} times");
    assert!(
        woke <= 5,
        "the owner thread woke {woke} times for {writes} writes its callers could run"
    );
    assert_eq!(
        rt.metrics().groups_total,
        writes as u64 + 1,
        "a group per write"
    );
    rt.shutdown();
}

/// The owner's role has a budget: while two feeders keep 64 writes in flight, a caller's own
/// `write` calls return within about a millisecond of running others' writes, instead of
/// running the whole stream (a first version kept one call busy for 5.6 s). The owner thread
/// takes the stream over, and every write is still answered.
#[test]
fn a_caller_runs_others_writes_for_a_bounded_time() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let options = RuntimeOptions {
        sync: SyncMode::None,
        ..RuntimeOptions::default()
    };
    let rt = Runtime::open(app("ledger"), dir.path(), options).unwrap();
    let stop = AtomicBool::new(false);
    let (longest, calls) = std::thread::scope(|s| {
        for feeder in 0..2 {
            let (rt, stop) = (rt.clone(), &stop);
            s.spawn(move || {
                let mut in_flight = std::collections::VecDeque::new();
                while !stop.load(Ordering::Relaxed) {
                    in_flight.push_back(rt.write("transfer", transfer_req(feeder)).unwrap());
                    if in_flight.len() > 32 {
                        answer(&mut in_flight.pop_front().unwrap(), "a feeder's write");
                    }
                }
                for mut reply in in_flight {
                    answer(&mut reply, "a feeder's last writes");
                }
            });
        }
        let (mut longest, mut calls) = (Duration::ZERO, 0);
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(2) {
            let call = Instant::now();
            let mut reply = rt.write("transfer", transfer_req(9)).unwrap();
            longest = longest.max(call.elapsed());
            calls += 1;
            answer(&mut reply, "the caller's write");
        }
        stop.store(true, Ordering::Relaxed);
        (longest, calls)
    });
    eprintln!("{calls} write calls beside two feeders: the longest took {longest:?}");
    assert!(
        longest < Duration::from_millis(100),
        "one write call ran others' writes for {longest:?}"
    );
    rt.shutdown();
}

/// A panic while running writes (injected after a handler, under the group's lock), at a
/// varying moment while three callers write: no caller's `write` panics (the panicking write
/// may be another caller's), the runtime is poisoned, and every accepted write gets an answer or
/// a dropped reply; none waits forever.
#[test]
fn a_panic_while_running_writes_leaves_no_write_waiting_and_no_caller_panicking() {
    let _serial = serial();
    let mut fired = 0;
    for round in 0..12u64 {
        let dir = tempfile::tempdir().unwrap();
        let armed = Arc::new(AtomicBool::new(false));
        let trigger = armed.clone();
        let options = RuntimeOptions {
            sync: if round % 2 == 0 {
                SyncMode::None
            } else {
                SyncMode::Always
            },
            run_gate: Some(CommitGate(Arc::new(move || {
                if trigger.swap(false, Ordering::SeqCst) {
                    panic!("fault injection: running a write panics");
                }
            }))),
            ..RuntimeOptions::default()
        };
        let rt = Runtime::open(app("ledger"), dir.path(), options).unwrap();
        let replies: Vec<WriteReply> = std::thread::scope(|s| {
            let writers: Vec<_> = (0..3)
                .map(|w| {
                    let rt = rt.clone();
                    s.spawn(move || {
                        let mut accepted = Vec::new();
                        for i in 0..300 {
                            if let Ok(reply) = rt.write("transfer", transfer_req(w * 1000 + i)) {
                                accepted.push(reply);
                            }
                        }
                        accepted
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_micros(round * 397 % 3000));
            armed.store(true, Ordering::SeqCst);
            writers
                .into_iter()
                .flat_map(|w| w.join().expect("no caller's write panics"))
                .collect()
        });
        if armed.load(Ordering::SeqCst) {
            // The writers were done before the panic was armed: nothing to see this round.
            rt.shutdown();
            continue;
        }
        fired += 1;
        for (i, mut reply) in replies.into_iter().enumerate() {
            let started = Instant::now();
            loop {
                match reply.try_recv() {
                    Ok(_) | Err(TryRecvError::Closed) => break,
                    Err(TryRecvError::Empty) => {
                        assert!(started.elapsed() < WAIT, "round {round}: write {i} waits");
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            }
        }
        eventually("the runtime is poisoned", || rt.poisoned().is_some());
        rt.shutdown();
    }
    assert!(
        fired >= 6,
        "the panic struck during the writes in only {fired} of 12 rounds"
    );
}

/// A long-running write (about a second of Rhai operations, ended by the operation limit) while
/// the syncer has nothing else to do: the syncer has no group to take until the write ends, so it
/// sleeps instead of polling the owner's lock. (A syncer that looked again on a timer woke about
/// 3,600 times a second here.) Prints where the syncer was (wchan / syscall samples).
#[test]
fn a_long_write_does_not_make_the_idle_syncer_poll() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        operations_max: 400_000_000,
        wall_clock_max: Duration::from_secs(30),
        ..Limits::default()
    };
    let ledger = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/apps/ledger");
    let app = App::load_with(&ledger, limits).unwrap();
    let options = RuntimeOptions {
        sync: SyncMode::None,
        ..RuntimeOptions::default()
    };
    let rt = Runtime::open(app, dir.path(), options).unwrap();
    let mut first = rt.write("transfer", transfer_req(1)).unwrap();
    assert_eq!(answer(&mut first, "the first write"), json!(1));
    std::thread::sleep(Duration::from_millis(50));
    let mut quick = None;
    let mut took = Duration::ZERO;
    let woke = wakeups_during("pure-syncer", || {
        let started = Instant::now();
        // A quick write handed over to the idle syncer, then the long one: the syncer commits the
        // quick one and comes back for the next group while the owner is in the long write.
        quick = Some(rt.write("transfer", transfer_req(2)).unwrap());
        let mut reply = rt
            .write(
                "transfer",
                body(json!({"from": 1, "to": 2, "amount": 1, "fail": "spin"})),
            )
            .unwrap();
        let started_wait = Instant::now();
        let (tid, _) = only("pure-syncer");
        let mut seen = BTreeMap::<String, u32>::new();
        while reply.try_recv().is_err_and(|e| e == TryRecvError::Empty) {
            assert!(started_wait.elapsed() < WAIT, "the spinning write ends");
            let task = format!("/proc/self/task/{tid}/");
            let wchan = std::fs::read_to_string(format!("{task}wchan")).unwrap_or_default();
            let syscall = std::fs::read_to_string(format!("{task}syscall")).unwrap_or_default();
            let call = syscall.split_whitespace().next().unwrap_or("").to_string();
            *seen.entry(format!("{wchan} syscall {call}")).or_default() += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
        eprintln!("where the syncer was during the write: {seen:?}");
        took = started.elapsed();
    });
    assert_eq!(answer(quick.as_mut().unwrap(), "the quick write"), json!(2));
    eprintln!(
        "a write of {took:?}: the syncer woke {woke} times ({:.0}/s)",
        woke as f64 / took.as_secs_f64()
    );
    assert!(
        took > Duration::from_millis(100),
        "the write is long enough to measure ({took:?})"
    );
    assert!(
        woke <= 20,
        "the syncer woke {woke} times during one write of {took:?} with nothing to commit"
    );
    rt.shutdown();
}

/// Promise 4 and a full group at shutdown: with the first group's commit held, the owner runs
/// exactly one more group (1,024 writes) and leaves the rest queued; a shutdown then (the owner
/// waiting for room) still answers every accepted write, in order, once commits are released.
#[test]
fn shutdown_while_the_owner_waits_for_room_answers_every_write() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let (hook, gate) = gate();
    let options = RuntimeOptions {
        sync: SyncMode::None,
        commit_gate: Some(hook),
        ..RuntimeOptions::default()
    };
    let rt = Runtime::open(app("ledger"), dir.path(), options).unwrap();
    let mut replies = vec![rt.write("transfer", transfer_req(0)).unwrap()];
    gate.entered.recv_timeout(WAIT).expect("first commit");
    let extra = 300;
    for i in 1..=(1024 + extra) {
        replies.push(rt.write("transfer", transfer_req(i)).unwrap());
    }
    eventually("the owner fills the next group and waits for room", || {
        rt.metrics().queue_depth == extra as u64
    });
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        rt.metrics().queue_depth,
        extra as u64,
        "the owner is at most one group ahead"
    );
    assert_eq!(rt.metrics().groups_total, 0);
    let stopper = {
        let rt = rt.clone();
        std::thread::spawn(move || rt.shutdown())
    };
    std::thread::sleep(Duration::from_millis(20));
    // Release commits until the shutdown ends.
    let started = Instant::now();
    while !stopper.is_finished() {
        assert!(
            started.elapsed() < WAIT,
            "shutdown ends once commits are released"
        );
        let _ = gate.release.send(());
        let _ = gate.entered.recv_timeout(Duration::from_millis(5));
    }
    stopper.join().unwrap();
    for (i, reply) in replies.iter_mut().enumerate() {
        assert_eq!(answer(reply, "an accepted write"), json!(i + 1));
    }
    let groups = rt.metrics().groups_total;
    assert!(groups >= 3, "{groups} groups");
}

/// The ops count of account `id` in the published state (a cheap read).
fn account_ops(rt: &Runtime, id: i64) -> u64 {
    let request = pure_runtime::Request {
        params: vec![("id".to_string(), id.to_string().into())],
        ..pure_runtime::Request::default()
    };
    match rt.read("account", request) {
        Ok(row) => row.body.to_value()["ops"].as_u64().unwrap(),
        Err(_) => 0,
    }
}

/// Bursts from many clients, with fast commits (sync none) so that the syncer comes back for a
/// group at every point of the owner's loop: every write is answered, the published state already
/// holds a write when its answer arrives (each client reads back its own account), and the
/// latencies are printed.
#[test]
fn bursts_from_many_clients_are_all_answered_after_publication() {
    let _serial = serial();
    for sync in [SyncMode::None, SyncMode::Always] {
        let dir = tempfile::tempdir().unwrap();
        let options = RuntimeOptions {
            sync,
            queue_capacity: 1 << 16,
            ..RuntimeOptions::default()
        };
        let rt = Runtime::open(app("ledger"), dir.path(), options).unwrap();
        let clients = 6i64;
        let per_client = if sync == SyncMode::None { 1500 } else { 300 };
        let latencies = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for c in 0..clients {
                let (rt, latencies) = (rt.clone(), &latencies);
                s.spawn(move || {
                    let mut mine = Vec::new();
                    let mut done = 0u64;
                    let mut i = 0i64;
                    while i < per_client {
                        // A burst of 1..=4 writes, then wait for all of them.
                        let burst = 1 + (i + c) % 4;
                        let sent: Vec<_> = (0..burst)
                            .map(|_| {
                                let req = body(json!({"from": 1000 + c, "to": 2000 + c, "amount": 1}));
                                (Instant::now(), rt.write("transfer", req).unwrap())
                            })
                            .collect();
                        for (at, mut reply) in sent {
                            answer(&mut reply, "a burst write");
                            mine.push(at.elapsed());
                            done += 1;
                            let published = account_ops(&rt, 1000 + c);
                            assert!(
                                published >= done,
                                "client {c}: answer {done} arrived before its state was published ({published})"
                            );
                        }
                        i += burst;
                        if i % 7 == 0 {
                            std::thread::sleep(Duration::from_micros(50 * (c as u64 + 1)));
                        }
                    }
                    latencies.lock().unwrap().extend(mine);
                });
            }
        });
        let mut latencies = latencies.into_inner().unwrap();
        latencies.sort();
        let n = latencies.len();
        eprintln!(
            "{sync:?}: {n} writes, latency p50 {:?} p99 {:?} max {:?}; {} groups",
            latencies[n / 2],
            latencies[n * 99 / 100],
            latencies[n - 1],
            rt.metrics().groups_total
        );
        assert_eq!(check_ledger(&state(&rt)) as usize, n);
        rt.shutdown();
    }
}

/// A shutdown racing bursts of writes: every write accepted before the inbox closed is answered
/// (none dropped), repeatedly, so that the owner's last write and `owner_done` meet the syncer at
/// every point of `take`.
#[test]
fn shutdown_racing_writes_answers_every_accepted_write() {
    let _serial = serial();
    for round in 0..200u64 {
        let dir = tempfile::tempdir().unwrap();
        let options = RuntimeOptions {
            sync: SyncMode::None,
            log_capacity_bytes: 4 << 20,
            ..RuntimeOptions::default()
        };
        let rt = Runtime::open(app("ledger"), dir.path(), options).unwrap();
        let accepted = std::thread::scope(|s| {
            let writer = {
                let rt = rt.clone();
                s.spawn(move || {
                    let mut accepted = Vec::new();
                    for i in 0..(round % 50 + 1) * 10 {
                        match rt.write("transfer", transfer_req(i as i64)) {
                            Ok(reply) => accepted.push(reply),
                            Err(_) => break,
                        }
                    }
                    accepted
                })
            };
            std::thread::sleep(Duration::from_micros(round * 37 % 2000));
            rt.shutdown();
            writer.join().unwrap()
        });
        for (i, mut reply) in accepted.into_iter().enumerate() {
            assert_eq!(
                answer(&mut reply, &format!("round {round}: accepted write {i}")),
                json!(i + 1)
            );
        }
    }
}

/// A syncer panic while the owner waits for room (a full group behind a held commit): the owner
/// is woken (`syncer_gone`), stops, and every accepted write gets an answer or a dropped reply;
/// none waits forever.
#[test]
fn a_syncer_panic_while_the_owner_waits_for_room_leaves_no_write_waiting() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let (entered_tx, entered) = mpsc::channel::<()>();
    let (release, release_rx) = mpsc::channel::<()>();
    let (entered_tx, release_rx) = (Mutex::new(entered_tx), Mutex::new(release_rx));
    let hook = CommitGate(Arc::new(move || {
        let _ = entered_tx.lock().unwrap().send(());
        let _ = release_rx.lock().unwrap().recv_timeout(WAIT);
        panic!("fault injection: the syncer panics in its commit");
    }));
    let options = RuntimeOptions {
        sync: SyncMode::None,
        commit_gate: Some(hook),
        ..RuntimeOptions::default()
    };
    let rt = Runtime::open(app("ledger"), dir.path(), options).unwrap();
    let mut replies = vec![rt.write("transfer", transfer_req(0)).unwrap()];
    entered.recv_timeout(WAIT).expect("first commit");
    for i in 1..=1100 {
        replies.push(rt.write("transfer", transfer_req(i)).unwrap());
    }
    eventually("the owner fills the next group and waits for room", || {
        rt.metrics().queue_depth == 1100 - 1024
    });
    release.send(()).unwrap();
    for (i, reply) in replies.iter_mut().enumerate() {
        let started = Instant::now();
        loop {
            match reply.try_recv() {
                Ok(answer) => {
                    assert!(answer.is_err(), "write {i} cannot have been committed");
                    break;
                }
                Err(TryRecvError::Closed) => break,
                Err(TryRecvError::Empty) => {
                    assert!(started.elapsed() < WAIT, "write {i} waits forever");
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }
    eventually("the runtime is poisoned", || rt.poisoned().is_some());
    assert_eq!(rt.metrics().queue_depth, 0);
    rt.shutdown();
}
