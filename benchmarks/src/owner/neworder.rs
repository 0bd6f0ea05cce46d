//! Part 2 of `pure-bench owner`: a TPC-C-New-Order-like handler (23 reads and 23 writes)
//! written as a Pure script, against the same logic in native Rust on the same maps through the
//! same transactional operations, and against a floor (`floor`) with none of the owner's
//! promises. Calls alternate in batches; medians of the batches.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use pure_lang::{App, Dynamic, Fields, Key, Limits, Request, Tables, WriteSet};
use pure_runtime::record;
use pure_store::sim::SimRng;
use serde_json::json;

use super::timer::{Snapshots, Timer};
use super::{body, Args};

mod floor;

const TPCC_MANIFEST: &str = include_str!("../../neworder/app.json");

const NEW_ORDER_SCRIPT: &str = include_str!("../../neworder/neworder.rhai");

const ITEMS: i64 = 100_000;
const DISTRICTS: i64 = 10;
const CUSTOMERS_PER_DISTRICT: i64 = 3_000;
const ORDERS_PER_DISTRICT: i64 = 3_000;
const LINES_PER_ORDER: i64 = 10;

/// Table ids and field slots, in the manifest's (sorted) table order.
struct Ids {
    customer: u32,
    district: u32,
    item: u32,
    new_orders: u32,
    order_lines: u32,
    orders: u32,
    stock: u32,
    warehouse: u32,
}

fn ids(app: &App) -> Ids {
    let id = |name: &str| {
        app.schema()
            .table_id(name)
            .expect("declared in TPCC_MANIFEST")
    };
    Ids {
        customer: id("customer"),
        district: id("district"),
        item: id("item"),
        new_orders: id("new_orders"),
        order_lines: id("order_lines"),
        orders: id("orders"),
        stock: id("stock"),
        warehouse: id("warehouse"),
    }
}

fn int(v: i64) -> Dynamic {
    Dynamic::from_int(v)
}

fn text(s: &str) -> Dynamic {
    Dynamic::from(pure_lang::ImmutableString::from(s))
}

fn key(parts: &[i64]) -> Key {
    Key::ints(parts)
}

fn load(ids: &Ids, tables: &mut Tables) {
    let mut ws = WriteSet::default();
    let mut put = |tables: &mut Tables, table: u32, k: Key, fields: Vec<Dynamic>| {
        tables
            .put(&mut ws, table, k, Fields::from_values(&fields), false)
            .expect("fresh keys");
        ws.clear();
    };
    put(
        tables,
        ids.warehouse,
        key(&[1]),
        vec![int(1200), int(0), text("warehouse-1")],
    );
    for d in 1..=DISTRICTS {
        let row = vec![
            int(800),
            int(0),
            int(ORDERS_PER_DISTRICT + 1),
            text("district"),
        ];
        put(tables, ids.district, key(&[1, d]), row);
        for c in 1..=CUSTOMERS_PER_DISTRICT {
            let row = vec![int(c % 5000), text("GC"), text("BARBARBAR"), int(-10)];
            put(tables, ids.customer, key(&[1, d, c]), row);
        }
        for o in 1..=ORDERS_PER_DISTRICT {
            let row = vec![
                int(o % 3000 + 1),
                int(0),
                int(5),
                int(LINES_PER_ORDER),
                int(1),
            ];
            put(tables, ids.orders, key(&[1, d, o]), row);
            for n in 1..=LINES_PER_ORDER {
                let row = vec![
                    int(n * 7),
                    int(1),
                    int(5),
                    int(0),
                    text("dist-info-0123456789ab"),
                    int(0),
                ];
                put(tables, ids.order_lines, key(&[1, d, o, n]), row);
            }
        }
    }
    for i in 1..=ITEMS {
        let row = vec![
            int(100 + i % 9900),
            text("item-name-0123456789"),
            text("item data item data item data"),
        ];
        put(tables, ids.item, key(&[i]), row);
        let mut row = vec![int(50), int(0), int(0), int(0)];
        row.extend((0..10).map(|_| text("dist-info-0123456789ab")));
        row.push(text("stock data stock data stock data stock"));
        put(tables, ids.stock, key(&[1, i]), row);
    }
}

/// One New-Order's input.
struct Order {
    d: i64,
    c: i64,
    items: Vec<i64>,
    qtys: Vec<i64>,
}

fn order(rng: &mut SimRng) -> Order {
    let count = 10;
    Order {
        d: 1 + rng.below(DISTRICTS as u64) as i64,
        c: 1 + rng.below(CUSTOMERS_PER_DISTRICT as u64) as i64,
        items: (0..count)
            .map(|_| 1 + rng.below(ITEMS as u64) as i64)
            .collect(),
        qtys: (0..count).map(|_| 1 + rng.below(10) as i64).collect(),
    }
}

fn order_request(o: &Order) -> Request {
    body(json!({"w": 1, "d": o.d, "c": o.c, "items": o.items, "qtys": o.qtys, "now": 12345}))
}

fn field(fields: &Fields, slot: usize) -> i64 {
    fields.int(slot).expect("a numeric field")
}

/// The same work as `new_order` in the script, through the same table operations.
fn native_new_order(ids: &Ids, tables: &mut Tables, ws: &mut WriteSet, o: &Order) -> i64 {
    let w = 1;
    let tax_w = field(tables.get(ids.warehouse, &key(&[w])).expect("loaded"), 0);
    let dk = key(&[w, o.d]);
    let district = tables.get(ids.district, &dk).expect("loaded").clone();
    let next = field(&district, 2);
    let changed = district.with(&[(2, int(next + 1))]);
    tables
        .patch(ws, ids.district, &dk, 1 << 2, &changed, Some(&district))
        .expect("exists");
    let discount = field(
        tables
            .get(ids.customer, &key(&[w, o.d, o.c]))
            .expect("loaded"),
        0,
    );
    let count = o.items.len() as i64;
    let order_row = vec![int(o.c), int(12345), Dynamic::UNIT, int(count), int(1)];
    tables
        .put(
            ws,
            ids.orders,
            key(&[w, o.d, next]),
            Fields::from_values(&order_row),
            true,
        )
        .expect("new");
    tables
        .put(
            ws,
            ids.new_orders,
            key(&[w, o.d, next]),
            Fields::empty(),
            true,
        )
        .expect("new");
    let mut total = 0;
    for (n, (&i, &qty)) in o.items.iter().zip(&o.qtys).enumerate() {
        let price = field(tables.get(ids.item, &key(&[i])).expect("loaded"), 0);
        let sk = key(&[w, i]);
        let stock = tables.get(ids.stock, &sk).expect("loaded").clone();
        let q = field(&stock, 0);
        let s = stock.with(&[
            (0, int(if q >= qty + 10 { q - qty } else { q - qty + 91 })),
            (1, int(field(&stock, 1) + qty)),
            (2, int(field(&stock, 2) + 1)),
        ]);
        let dist_info = stock.value(4);
        tables
            .patch(ws, ids.stock, &sk, 0b111, &s, Some(&stock))
            .expect("exists");
        let amount = qty * price;
        total += amount;
        let line = vec![int(i), int(w), int(qty), int(amount), dist_info];
        let lk = key(&[w, o.d, next, n as i64 + 1]);
        tables
            .put(ws, ids.order_lines, lk, Fields::from_values(&line), true)
            .expect("new");
    }
    let tax_d = field(&district, 0);
    total * (10000 - discount) * (10000 + tax_w + tax_d) / 100_000_000
}

pub(super) fn run(args: &Args) -> anyhow::Result<()> {
    if args.json.is_some() && (args.interpreted || args.variant.is_some()) {
        bail!("--json reports the medians of the full New-Order part: drop --interpreted and --variant");
    }
    println!("## owner: New-Order-like handler, script against native (µs per call)\n");
    let apps = Apps::load(args)?;
    let mut tables = apps.populations(args.variant.is_none());
    let mut rng = SimRng::new(42);
    let orders: Vec<Order> = (0..args.batch).map(|_| order(&mut rng)).collect();
    let requests: Vec<Request> = orders.iter().map(order_request).collect();
    if let Some(variant) = &args.variant {
        return run_variant(args, variant, &apps, &mut tables, &orders, &requests);
    }
    let timers = time_rounds(args, &apps, &mut tables, &orders, &requests);
    if timers.script.samples.is_empty() {
        bail!("no batches measured");
    }
    report(args, &timers)
}

/// The New-Order script loaded twice: as measured (compiled, or in Rhai's evaluator with
/// `--interpreted`) and in Rhai's evaluator, for the row that shows what compiling gains.
struct Apps {
    app: App,
    rhai_app: App,
    ids: Ids,
}

/// The tables of each variant, and the floor's maps.
struct Populations {
    script: Tables,
    native: Tables,
    native_snapshot: Tables,
    script_snapshot: Tables,
    rhai: Tables,
    floor: floor::Floor,
}

impl Apps {
    fn load(args: &Args) -> anyhow::Result<Apps> {
        let source = match &args.script {
            Some(path) => std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?,
            None => NEW_ORDER_SCRIPT.to_string(),
        };
        let files = vec![("neworder.rhai".into(), source)];
        // Under valgrind (the per-variant mode) a call takes ~50x longer: the wall-clock backstop
        // must not stop it. It is checked the same way whatever its value.
        let limits = match args.variant {
            Some(_) => Limits {
                wall_clock_max: Duration::from_secs(60),
                ..Limits::default()
            },
            None => Limits::default(),
        };
        let mut app = App::from_sources(TPCC_MANIFEST, files.clone(), limits.clone())?;
        app.set_interpreted(args.interpreted);
        let mut rhai_app = App::from_sources(TPCC_MANIFEST, files, limits)?;
        rhai_app.set_interpreted(true);
        let ids = ids(&app);
        Ok(Apps { app, rhai_app, ids })
    }

    /// Tables loaded on their own: clones would share their nodes, and every first write would
    /// copy them, which is the cost of a snapshot, not of the handler.
    fn fresh(&self) -> Tables {
        let mut tables = Tables::new(self.app.schema().tables.len());
        load(&self.ids, &mut tables);
        tables
    }

    /// Each variant's own tables (those of the snapshot and Rhai rows only when `all`, for the
    /// timed rounds).
    fn populations(&self, all: bool) -> Populations {
        let loading = Instant::now();
        let script = self.fresh();
        eprintln!(
            "loaded {} rows in {:.1} s",
            script.row_count(),
            loading.elapsed().as_secs_f64()
        );
        let native = self.fresh();
        let floor = floor::Floor::load();
        assert_eq!(floor.row_count(), native.row_count(), "the same population");
        let (native_snapshot, script_snapshot, rhai) = if all {
            (self.fresh(), self.fresh(), self.fresh())
        } else {
            (Tables::default(), Tables::default(), Tables::default())
        };
        Populations {
            script,
            native,
            native_snapshot,
            script_snapshot,
            rhai,
            floor,
        }
    }
}

/// One variant alone, untimed (`--variant`), for callgrind or perf.
fn run_variant(
    args: &Args,
    variant: &str,
    apps: &Apps,
    tables: &mut Populations,
    orders: &[Order],
    requests: &[Request],
) -> anyhow::Result<()> {
    let snapshot_every = variant.ends_with("-snapshot").then_some(64);
    let mut ws = WriteSet::default();
    let mut snapshots = Snapshots::new();
    let mut calls = 0usize;
    for _ in 0..args.batches {
        for (request, order) in requests.iter().zip(orders) {
            let variant_tables = if variant.starts_with("script") {
                &mut tables.script
            } else {
                &mut tables.native
            };
            if snapshot_every.is_some_and(|n| calls.is_multiple_of(n)) {
                snapshots.take(variant_tables);
            }
            match variant {
                "script" | "script-snapshot" => {
                    apps.app
                        .run_write("new_order", request, variant_tables, &mut ws)
                        .expect("the script runs");
                }
                "native" | "native-snapshot" => {
                    native_new_order(&apps.ids, variant_tables, &mut ws, order);
                }
                "floor" => {
                    std::hint::black_box(tables.floor.new_order(order));
                }
                "load" => {}
                _ => bail!(
                    "--variant is script, native, floor, script-snapshot, native-snapshot or load"
                ),
            }
            ws.clear();
            calls += 1;
        }
    }
    drop(snapshots);
    println!("ran {calls} calls of the {variant} variant");
    Ok(())
}

/// What the timed rounds measured, one timer per row of the report.
#[derive(Default)]
struct Timers {
    script: Timer,
    rhai: Timer,
    native: Timer,
    native_snapshot: Timer,
    script_snapshot: Timer,
    empty: Timer,
    encode: Timer,
    floor: Timer,
    /// Bytes of the record of one call's write set.
    record_bytes: usize,
}

/// Rounds of one batch of each variant in turn; the first round, which warms caches and
/// allocators, is not counted.
fn time_rounds(
    args: &Args,
    apps: &Apps,
    tables: &mut Populations,
    orders: &[Order],
    requests: &[Request],
) -> Timers {
    let (app, ids) = (&apps.app, &apps.ids);
    let mut t = Timers::default();
    let mut ws = WriteSet::default();
    let mut record_bytes = Vec::new();
    let run_script = |i: usize, tables: &mut Tables, ws: &mut WriteSet| {
        app.run_write("new_order", &requests[i % requests.len()], tables, ws)
            .expect("the script runs");
    };
    let run_native = |i: usize, tables: &mut Tables, ws: &mut WriteSet| {
        native_new_order(ids, tables, ws, &orders[i % orders.len()]);
    };
    let run_rhai = |i: usize, tables: &mut Tables, ws: &mut WriteSet| {
        apps.rhai_app
            .run_write("new_order", &requests[i % requests.len()], tables, ws)
            .expect("the script runs");
    };
    for round in 0..args.batches + 1 {
        let batch = args.batch;
        t.script
            .time_calls(batch, &mut tables.script, &mut ws, None, run_script);
        t.native
            .time_calls(batch, &mut tables.native, &mut ws, None, run_native);
        t.rhai
            .time_calls(batch, &mut tables.rhai, &mut ws, None, run_rhai);
        let mut i = 0;
        t.floor.time(batch, || {
            std::hint::black_box(tables.floor.new_order(&orders[i % orders.len()]));
            i += 1;
        });
        // A snapshot every 64 calls, as the owner takes one per group.
        let snapshot = &mut tables.native_snapshot;
        t.native_snapshot
            .time_calls(batch, snapshot, &mut ws, Some(64), run_native);
        let snapshot = &mut tables.script_snapshot;
        t.script_snapshot
            .time_calls(batch, snapshot, &mut ws, Some(64), run_script);
        // Encoding: the write set of one call, encoded again and again.
        native_new_order(
            ids,
            &mut tables.native,
            &mut ws,
            &orders[round % orders.len()],
        );
        t.encode.time(batch, || {
            record::encode_writes(&mut record_bytes, ws.changes());
        });
        t.record_bytes = record_bytes.len();
        ws.clear();
        let mut i = 0;
        t.empty.time(batch, || {
            app.run_write(
                "empty",
                &requests[i % requests.len()],
                &mut tables.script,
                &mut ws,
            )
            .expect("the script runs");
            i += 1;
        });
        if round == 0 {
            t.clear();
        }
    }
    t
}

impl Timers {
    fn clear(&mut self) {
        for timer in [
            &mut self.script,
            &mut self.rhai,
            &mut self.native,
            &mut self.native_snapshot,
            &mut self.script_snapshot,
            &mut self.empty,
            &mut self.encode,
            &mut self.floor,
        ] {
            timer.samples.clear();
        }
    }
}

/// The table of medians, the ratios and the split of a script call; the JSON with `--json`.
fn report(args: &Args, t: &Timers) -> anyhow::Result<()> {
    let script_name = if args.interpreted {
        "script (Pure, --interpreted: Rhai's evaluator)"
    } else {
        "script (Pure, compiled)"
    };
    println!("| variant | median µs/call | range (batch medians) |");
    println!("|---|---:|---|");
    for (name, timer) in [
        (script_name, &t.script),
        ("script in Rhai's evaluator (not compiled)", &t.rhai),
        ("native Rust, same maps and write set", &t.native),
        ("native, a snapshot every 64 calls", &t.native_snapshot),
        ("script, a snapshot every 64 calls", &t.script_snapshot),
        ("script `empty` handler, same request", &t.empty),
        ("encoding the write set as a record", &t.encode),
        (
            "floor: std BTreeMap, plain rows changed in place, no snapshot or write set",
            &t.floor,
        ),
    ] {
        let (lo, hi) = timer.range();
        println!("| {name} | {:.1} | {lo:.1}–{hi:.1} |", timer.median());
    }
    println!();
    print_ratios(t);
    if let Some(path) = &args.json {
        let figures = json!({
            "compiled_us": t.script.median(),
            "interpreted_us": t.rhai.median(),
            "native_us": t.native.median(),
            "native_snapshot_us": t.native_snapshot.median(),
            "compiled_snapshot_us": t.script_snapshot.median(),
            "floor_us": t.floor.median(),
        });
        std::fs::write(path, serde_json::to_string_pretty(&figures)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn print_ratios(t: &Timers) {
    let (script, native, floor) = (t.script.median(), t.native.median(), t.floor.median());
    let (native_snapshot, script_snapshot) =
        (t.native_snapshot.median(), t.script_snapshot.median());
    println!(
        "ratio script / native: {:.2}x (in Rhai's evaluator: {:.2}x); record: {} bytes for 23 writes",
        script / native,
        t.rhai.median() / native,
        t.record_bytes
    );
    println!(
        "as the owner runs them, with a snapshot per group of 64 (the copying both pay): script / native {:.2}x",
        script_snapshot / native_snapshot
    );
    println!(
        "split of the script call: call + request {:.1} µs, script steps and glue {:.1} µs, map and write-set work {:.1} µs; encoding {:.1} µs; snapshot copying {:+.1} µs per call",
        t.empty.median(),
        script - native - t.empty.median(),
        native,
        t.encode.median(),
        native_snapshot - native,
    );
    println!(
        "against the floor: script as the owner runs it {:.2}x, native with snapshots {:.2}x, native {:.2}x",
        script_snapshot / floor,
        native_snapshot / floor,
        native / floor,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The floor does the work the native variant does: the same answers on the same orders,
    /// and the same rows in the end.
    #[test]
    fn the_floor_answers_as_the_native_new_order() {
        let app = App::from_sources(TPCC_MANIFEST, vec![], Limits::default()).expect("loads");
        let ids = ids(&app);
        let mut tables = Tables::new(app.schema().tables.len());
        load(&ids, &mut tables);
        let mut floor = floor::Floor::load();
        let mut rng = SimRng::new(7);
        let mut ws = WriteSet::default();
        for _ in 0..300 {
            let o = order(&mut rng);
            assert_eq!(
                floor.new_order(&o),
                native_new_order(&ids, &mut tables, &mut ws, &o)
            );
            ws.clear();
        }
        assert_eq!(floor.row_count(), tables.row_count());
    }
}
