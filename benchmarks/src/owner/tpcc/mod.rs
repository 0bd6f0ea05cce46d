//! Part 5 of `pure-bench owner`: the bundled TPC-C app's five transactions in-process, each call
//! timed alone as the owner runs it, beside the floor (`floor`): the same transactions natively,
//! whose answers each call's must equal.

mod floor;

use std::time::Instant;

use anyhow::{bail, Context};
use pure_lang::{App, Tables, WriteSet};
use pure_runtime::record;
use serde_json::json;

use super::timer::Snapshots;
use super::Args;
use crate::tpcc::input::{Kind, Terminal, Txn};
use crate::tpcc::{inprocess, population, population::LOAD_TIME, Answer};

/// The mix's weights of the three writes (clause 5.2.3's New-Order, Payment and Delivery shares,
/// per 100 transactions): the owner's cost per transaction of the mix.
const WRITE_WEIGHTS: [(Kind, f64); 3] = [
    (Kind::NewOrder, 45.0),
    (Kind::Payment, 43.0),
    (Kind::Delivery, 4.0),
];

/// The five TPC-C transactions of the bundled app, in-process on the population of
/// `--warehouses`: each call timed alone, as the owner runs a write (the handler, encoding its
/// write set as a record, a snapshot held and renewed every 64 writes as the syncer takes one
/// per group) or a read (the handler on a snapshot).
pub(super) fn run(args: &Args) -> anyhow::Result<()> {
    println!(
        "## owner: the TPC-C app's transactions in-process, W={} (µs per call{})\n",
        args.warehouses,
        if args.interpreted {
            ", Rhai's evaluator"
        } else {
            ""
        }
    );
    let loading = Instant::now();
    let (mut app, mut tables) = inprocess::load(&args.tpcc_app, 1, args.warehouses)?;
    app.set_interpreted(args.interpreted);
    eprintln!(
        "loaded {} rows in {:.1} s",
        tables.row_count(),
        loading.elapsed().as_secs_f64()
    );
    let (mut calls, stream) = time_calls(args, &app, &mut tables)?;
    // The floor runs the same stream after the app, on its own tables: interleaved, each evicted
    // the other's rows from the caches and both looked slower.
    drop(tables);
    let mut floor = floor::Floor::default();
    population::generate(1, args.warehouses, &mut |row| floor.push(row));
    time_floor(&mut floor, &stream, &mut calls);
    for handler in [
        "new_order",
        "payment",
        "order_status",
        "delivery",
        "stock_level",
    ] {
        if let Some(pure_lang::Execution::Interpreted { reason }) = app.execution(handler) {
            println!("{handler} runs in Rhai's evaluator, not compiled: {reason}");
        }
    }
    let means = print_table(calls.samples, &calls.record_bytes);
    println!(
        "\nthe floor: the same calls natively, on std BTreeMaps of typed rows changed in place"
    );
    let floor_means = print_table(calls.floor_samples, &[0; 5]);
    let weighted = |means: &[f64; 5]| {
        WRITE_WEIGHTS
            .iter()
            .map(|(kind, weight)| weight * means[*kind as usize])
            .sum::<f64>()
            / 100.0
    };
    let (weighted_us, floor_weighted_us) = (weighted(&means), weighted(&floor_means));
    println!(
        "\nthe owner's writes weighted by the mix (45/43/4 per 100 transactions): {weighted_us:.1} µs \
         a transaction, the floor {floor_weighted_us:.1} µs ({:.1}x)",
        weighted_us / floor_weighted_us
    );
    println!(
        "fallbacks to Rhai's evaluator: {}; failed calls (not 200, not the 422 rollback): {}; \
         answers that differ from the floor's: {}",
        app.fallbacks(),
        calls.failures,
        calls.differences
    );
    if let (Some(path), Some("tpcc")) = (&args.json, args.only.as_deref()) {
        let per_kind = |means: &[f64; 5]| {
            Kind::ALL
                .iter()
                .map(|kind| (kind.name().to_string(), json!(means[*kind as usize])))
                .collect::<serde_json::Map<_, _>>()
        };
        let report = json!({
            "weighted_us": weighted_us,
            "floor_weighted_us": floor_weighted_us,
            "mean_us": per_kind(&means),
            "floor_mean_us": per_kind(&floor_means),
        });
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if calls.failures > 0 {
        bail!("{} TPC-C calls failed", calls.failures);
    }
    if calls.differences > 0 {
        bail!(
            "{} answers of the floor differ from the app's",
            calls.differences
        );
    }
    Ok(())
}

/// Per transaction type: the µs of each call, and the record bytes of all its calls.
struct Calls {
    samples: Vec<Vec<f64>>,
    /// The µs of each call of the floor.
    floor_samples: Vec<Vec<f64>>,
    record_bytes: Vec<u64>,
    /// Calls answered other than 200 or the 422 of a rollback.
    failures: u64,
    /// Calls whose answer from the floor is not the app's.
    differences: u64,
}

/// A transaction run, with its body's text and the app's answer.
type Answered = (Txn, String, Answer);

/// Runs `--transactions` calls of the mix from 10 terminals per warehouse, each timed alone;
/// also gives back each transaction with its body's text and the app's answer.
fn time_calls(
    args: &Args,
    app: &App,
    tables: &mut Tables,
) -> anyhow::Result<(Calls, Vec<Answered>)> {
    let terminals_n = (10 * args.warehouses) as usize;
    let mut terminals: Vec<Terminal> = (0..terminals_n)
        .map(|i| Terminal::new(1, i as u64, args.warehouses))
        .collect();
    let mut calls = Calls {
        samples: vec![Vec::new(); Kind::ALL.len()],
        floor_samples: vec![Vec::new(); Kind::ALL.len()],
        record_bytes: vec![0; Kind::ALL.len()],
        failures: 0,
        differences: 0,
    };
    let mut ws = WriteSet::default();
    let mut record = Vec::new();
    let mut snapshots = Snapshots::new();
    let mut writes = 0usize;
    let mut stream = Vec::with_capacity(args.transactions);
    for k in 0..args.transactions {
        let txn = terminals[k % terminals_n].next();
        let kind = txn.kind();
        let now = LOAD_TIME + k as i64;
        let (handler, mut request) = inprocess::request(app, &txn, now)?;
        let body = txn.http(now).2.map(|b| b.to_string()).unwrap_or_default();
        let started = Instant::now();
        let result = owner_turn(
            app,
            tables,
            handler,
            &mut request,
            &mut Turn {
                writes: &mut ws,
                record: &mut record,
                snapshots: &mut snapshots,
                count: &mut writes,
            },
        );
        let elapsed = started.elapsed().as_secs_f64() * 1e6;
        let answer = inprocess::answer(result);
        calls.samples[kind as usize].push(elapsed);
        calls.record_bytes[kind as usize] += record.len() as u64;
        if answer.status != 200 && answer.status != 422 {
            calls.failures += 1;
            if calls.failures == 1 {
                eprintln!("{kind:?} failed: {} {}", answer.status, answer.body);
            }
        }
        stream.push((txn, body, answer));
    }
    drop(snapshots);
    Ok((calls, stream))
}

/// What the owner keeps from one call to the next.
struct Turn<'a> {
    writes: &'a mut WriteSet,
    record: &'a mut Vec<u8>,
    snapshots: &'a mut Snapshots,
    /// Writes run so far.
    count: &'a mut usize,
}

/// One call as the owner runs it (the app's reads are `inprocess::is_read`): a write takes a snapshot every 64 writes (as the syncer takes
/// one per group), runs, and encodes its write set as a record; a read runs on a snapshot. Each
/// kind of call has its function, never inlined, so that callgrind can count the owner's calls
/// alone and each kind apart:
/// `valgrind --tool=callgrind --toggle-collect='*owner_turn*' pure-bench owner --only tpcc`.
fn owner_turn(
    app: &App,
    tables: &mut Tables,
    handler: &str,
    request: &mut pure_lang::Request,
    turn: &mut Turn,
) -> Result<pure_lang::Answer, pure_lang::HandlerError> {
    macro_rules! turns {
        ($($handler:literal => $name:ident),*) => {{
            $(
                #[inline(never)]
                fn $name(
                    app: &App,
                    tables: &mut Tables,
                    request: &mut pure_lang::Request,
                    turn: &mut Turn,
                ) -> Result<pure_lang::Answer, pure_lang::HandlerError> {
                    owner_call(app, tables, $handler, request, turn)
                }
            )*
            match handler {
                $($handler => $name(app, tables, request, turn),)*
                _ => owner_call(app, tables, handler, request, turn),
            }
        }};
    }
    turns!(
        "new_order" => owner_turn_new_order,
        "payment" => owner_turn_payment,
        "order_status" => owner_turn_order_status,
        "delivery" => owner_turn_delivery,
        "stock_level" => owner_turn_stock_level
    )
}

#[inline(always)]
fn owner_call(
    app: &App,
    tables: &mut Tables,
    handler: &str,
    request: &mut pure_lang::Request,
    turn: &mut Turn,
) -> Result<pure_lang::Answer, pure_lang::HandlerError> {
    let is_write = !inprocess::is_read(handler);
    if is_write && turn.count.is_multiple_of(64) {
        turn.snapshots.take(tables);
    }
    // A write is given the request's body, as the runtime's owner gives it (it is done with
    // the request): a handler that never changes its request reads the body without a copy.
    let answer = if is_write {
        app.run_write_taking_body(handler, request, tables, turn.writes)
    } else {
        inprocess::call(app, tables, turn.writes, handler, request)
    };
    if is_write {
        turn.record.clear();
        record::encode_writes(turn.record, turn.writes.changes());
        turn.writes.clear();
        *turn.count += 1;
    }
    answer
}

/// Runs the same transactions on the floor, each timed alone, its answer compared with the
/// app's.
fn time_floor(floor: &mut floor::Floor, stream: &[(Txn, String, Answer)], calls: &mut Calls) {
    for (txn, body, answer) in stream {
        let kind = txn.kind();
        let started = Instant::now();
        let native = floor.run(txn, body);
        calls.floor_samples[kind as usize].push(started.elapsed().as_secs_f64() * 1e6);
        if native != *answer {
            calls.differences += 1;
            if calls.differences == 1 {
                eprintln!(
                    "{kind:?}: the floor answered {} {}, the app {} {}",
                    native.status, native.body, answer.status, answer.body
                );
            }
        }
    }
}

/// One line per transaction type: calls, mean and quantiles of µs per call, record bytes (none
/// given: 0). The means, by `Kind`.
fn print_table(mut samples: Vec<Vec<f64>>, record_bytes: &[u64]) -> [f64; 5] {
    let mut means = [0.0; 5];
    println!(
        "{:<14} {:>7} {:>9} {:>9} {:>9} {:>9} {:>13}",
        "transaction", "calls", "mean", "p50", "p99", "max", "record bytes"
    );
    for kind in Kind::ALL {
        let s = &mut samples[kind as usize];
        if s.is_empty() {
            continue;
        }
        s.sort_by(f64::total_cmp);
        let mean = s.iter().sum::<f64>() / s.len() as f64;
        means[kind as usize] = mean;
        let at = |q: f64| s[((s.len() as f64 * q).ceil() as usize).clamp(1, s.len()) - 1];
        let bytes = match kind {
            Kind::NewOrder | Kind::Payment | Kind::Delivery if record_bytes[kind as usize] > 0 => {
                format!("{:.0}", record_bytes[kind as usize] as f64 / s.len() as f64)
            }
            _ => "-".into(),
        };
        println!(
            "{:<14} {:>7} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>13}",
            kind.name(),
            s.len(),
            mean,
            at(0.5),
            at(0.99),
            s[s.len() - 1],
            bytes
        );
    }
    means
}
