//! Helpers shared by the runtime's integration tests: the ledger test app (tests/apps/ledger),
//! driven like a client, and its invariants.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pure_lang::Limits;
use pure_runtime::{App, CommitGate, HandlerError, Request, Runtime};
use serde_json::{json, Value};

/// A test app, with the default limits except a long wall clock: these tests run on a loaded
/// 2-core machine, where wall-clock time also runs while a thread waits for a core (the wall
/// clock has its own test in pure-lang).
pub fn app(name: &str) -> App {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/apps")
        .join(name);
    let limits = Limits {
        wall_clock_max: Duration::from_secs(30),
        ..Limits::default()
    };
    App::load_with(&dir, limits).unwrap_or_else(|e| panic!("test app {name}: {e}"))
}

pub fn body(body: Value) -> Request {
    Request {
        body: pure_lang::to_dynamic(&body),
        ..Request::default()
    }
}

/// Sends a transfer and waits for its answer.
pub fn transfer(
    rt: &Runtime,
    from: i64,
    to: i64,
    amount: i64,
    fail: &str,
) -> Result<Value, HandlerError> {
    let request = body(json!({"from": from, "to": to, "amount": amount, "fail": fail}));
    rt.write("transfer", request)?
        .blocking_recv()
        .expect("every queued write is answered")
        .map(|answer| answer.body.to_value())
}

pub fn state(rt: &Runtime) -> Value {
    rt.read("state", Request::default())
        .expect("the state handler works")
        .body
        .to_value()
}

/// The ledger's invariants on a state: `ops` holds exactly the sequence numbers 1..=seq, and
/// the balances (and per-account op counts) are the fold of `ops`. Returns seq.
pub fn check_ledger(state: &Value) -> u64 {
    let seq = state["seq"].as_u64().expect("seq is a number");
    let ops = state["ops"].as_array().expect("ops is an array");
    let mut model: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    for (i, op) in ops.iter().enumerate() {
        assert_eq!(
            op[0].as_u64(),
            Some(i as u64 + 1),
            "ops are a gap-free prefix: {state}"
        );
        let (from, to, amount) = (
            op[1].as_i64().unwrap(),
            op[2].as_i64().unwrap(),
            op[3].as_i64().unwrap(),
        );
        let f = model.entry(from).or_default();
        f.0 -= amount;
        f.1 += 1;
        let t = model.entry(to).or_default();
        t.0 += amount;
        t.1 += 1;
    }
    assert_eq!(ops.len() as u64, seq, "seq counts the ops: {state}");
    let accounts: BTreeMap<i64, (i64, i64)> = state["accounts"]
        .as_array()
        .expect("accounts is an array")
        .iter()
        .map(|a| {
            (
                a[0].as_i64().unwrap(),
                (a[1].as_i64().unwrap(), a[2].as_i64().unwrap()),
            )
        })
        .collect();
    assert_eq!(accounts, model, "balances are the fold of the ops");
    seq
}

/// Generous bound for a condition on a loaded 2-core machine; only reached when a test fails.
pub const WAIT: Duration = Duration::from_secs(30);

/// A wait for log space (`RuntimeOptions::write_timeout`) that no test reaches: where a test
/// means to see writes wait for a checkpoint and then succeed, a busy machine must not turn
/// them into refusals.
pub const PATIENT: Duration = Duration::from_secs(600);

/// Polls `condition` until it holds; fails the test after `WAIT`.
pub fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < WAIT, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A gate that holds every commit until the test releases it.
pub struct Gate {
    pub entered: Receiver<()>,
    pub release: mpsc::Sender<()>,
}

pub fn gate() -> (CommitGate, Gate) {
    let (entered_tx, entered) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let (entered_tx, release_rx) = (Mutex::new(entered_tx), Mutex::new(release_rx));
    let hook = CommitGate(Arc::new(move || {
        let _ = entered_tx.lock().unwrap().send(());
        release_rx
            .lock()
            .unwrap()
            .recv_timeout(WAIT)
            .expect("the test releases the commit");
    }));
    (hook, Gate { entered, release })
}
