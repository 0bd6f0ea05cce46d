//! Part 5 of `pure-bench owner`: the bundled TPC-C app's five transactions in-process, each call
//! timed alone as the owner runs it.

use std::time::Instant;

use anyhow::bail;
use pure_lang::{App, Tables, WriteSet};
use pure_runtime::record;

use super::Args;
use crate::tpcc::{inprocess, input::Kind, input::Terminal, population::LOAD_TIME};

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
    let calls = time_calls(args, &app, &mut tables)?;
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
    print_table(calls.samples, &calls.record_bytes);
    println!(
        "\nfallbacks to Rhai's evaluator: {}; failed calls (not 200, not the 422 rollback): {}",
        app.fallbacks(),
        calls.failures
    );
    if calls.failures > 0 {
        bail!("{} TPC-C calls failed", calls.failures);
    }
    Ok(())
}

/// Per transaction type: the µs of each call, and the record bytes of all its calls.
struct Calls {
    samples: Vec<Vec<f64>>,
    record_bytes: Vec<u64>,
    /// Calls answered other than 200 or the 422 of a rollback.
    failures: u64,
}

/// Runs `--transactions` calls of the mix from 10 terminals per warehouse, each timed alone.
fn time_calls(args: &Args, app: &App, tables: &mut Tables) -> anyhow::Result<Calls> {
    let terminals_n = (10 * args.warehouses) as usize;
    let mut terminals: Vec<Terminal> = (0..terminals_n)
        .map(|i| Terminal::new(1, i as u64, args.warehouses))
        .collect();
    let mut calls = Calls {
        samples: vec![Vec::new(); Kind::ALL.len()],
        record_bytes: vec![0; Kind::ALL.len()],
        failures: 0,
    };
    let mut ws = WriteSet::default();
    let mut record = Vec::new();
    let mut snapshot = None;
    let mut writes = 0usize;
    for k in 0..args.transactions {
        let txn = terminals[k % terminals_n].next();
        let kind = txn.kind();
        let (handler, request) = inprocess::request(app, &txn, LOAD_TIME + k as i64)?;
        let is_write = matches!(kind, Kind::NewOrder | Kind::Payment | Kind::Delivery);
        let started = Instant::now();
        if is_write && writes.is_multiple_of(64) {
            snapshot = Some(tables.clone());
        }
        let answer = inprocess::execute(app, tables, &mut ws, handler, &request);
        if is_write {
            record.clear();
            record::encode_writes(&mut record, ws.changes());
            ws.clear();
            writes += 1;
        }
        let elapsed = started.elapsed().as_secs_f64() * 1e6;
        calls.samples[kind as usize].push(elapsed);
        calls.record_bytes[kind as usize] += record.len() as u64;
        if answer.status != 200 && answer.status != 422 {
            calls.failures += 1;
            if calls.failures == 1 {
                eprintln!("{kind:?} failed: {} {}", answer.status, answer.body);
            }
        }
    }
    drop(snapshot);
    Ok(calls)
}

/// One line per transaction type: calls, mean and quantiles of µs per call, record bytes.
fn print_table(mut samples: Vec<Vec<f64>>, record_bytes: &[u64]) {
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
        let at = |q: f64| s[((s.len() as f64 * q).ceil() as usize).clamp(1, s.len()) - 1];
        let bytes = match kind {
            Kind::NewOrder | Kind::Payment | Kind::Delivery => {
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
}
