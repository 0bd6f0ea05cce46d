//! `pure-bench owner`: the owner in-process, without HTTP.
//!
//! Part 1, write throughput: a handler that updates one row by key and one that inserts a row,
//! at several numbers of concurrent clients (threads waiting for each answer), with sync
//! `always` on a disk directory and `none`. Prints writes/s, latency quantiles, bytes written
//! to the device per write, the owner's busy share and the process CPU per write.
//!
//! Part 2, handler cost: a TPC-C-New-Order-like handler (23 reads and 23 writes on
//! warehouse, district, customer, item, stock, order, new-order and order-line rows) written as a
//! Pure script, against the same logic in native Rust on the same maps through the same
//! transactional operations (undo log and write set). Calls alternate in batches; medians of the
//! batches. Also splits the owner's time: script vs native (interpretation and glue), encoding
//! the write set, and copying tree nodes shared with a snapshot taken once per group.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use pure_lang::{App, Dynamic, Fields, Key, Limits, Request, Tables, WriteSet};
use pure_runtime::{record, Runtime, RuntimeOptions, SyncMode};
use pure_store::sim::SimRng;
use serde_json::json;

use crate::harness::device::DeviceCounter;
use crate::harness::usage::process_cpu;

mod floor;

#[derive(clap::Args)]
pub struct Args {
    /// Directory on the disk to measure `--sync always` on (a fresh subdirectory is used).
    /// Without it the sync-always runs are skipped.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Seconds per throughput configuration.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Client counts for the throughput part.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    clients: Vec<usize>,
    /// Calls per batch and batches per variant in the handler-cost part.
    #[arg(long, default_value_t = 500)]
    batch: usize,
    #[arg(long, default_value_t = 15)]
    batches: usize,
    /// Run only one part: "limits", "writes", "neworder" or "scoreboard".
    #[arg(long)]
    only: Option<String>,
    /// In the New-Order part, run only one variant, untimed, for counting instructions with
    /// callgrind or profiling with perf: script, native, floor, script-snapshot or
    /// native-snapshot (the last two with a snapshot every 64 calls), or load (the population
    /// alone, to subtract).
    #[arg(long)]
    variant: Option<String>,
    /// The scoreboard app, for the part that measures its `post_score` handler in-process.
    #[arg(long, default_value = "apps/scoreboard")]
    app: PathBuf,
    /// In the handler-cost part, a file whose script replaces the built-in `new_order` script
    /// (it must define `new_order` and `empty`): to measure what a construct costs.
    #[arg(long)]
    script: Option<PathBuf>,
    /// The TPC-C app, for the part that runs its five transactions in-process.
    #[arg(long, default_value = "apps/tpcc")]
    tpcc_app: PathBuf,
    /// Warehouses of the TPC-C part's population.
    #[arg(long, default_value_t = 1)]
    warehouses: i64,
    /// Transactions of the TPC-C part (the mix of clause 5.2.4, from 10 terminals per warehouse).
    #[arg(long, default_value_t = 20_000)]
    transactions: usize,
    /// Run every handler in Rhai's evaluator instead of its compiled form (to compare the two;
    /// the New-Order part always shows both).
    #[arg(long)]
    interpreted: bool,
    /// In the New-Order part, also write the medians of its rows (µs per call) to this file as
    /// JSON: compiled_us, interpreted_us, native_us, native_snapshot_us, compiled_snapshot_us,
    /// floor_us.
    #[arg(long)]
    json: Option<PathBuf>,
}

const PARTS: [&str; 5] = ["limits", "writes", "neworder", "scoreboard", "tpcc"];

pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(only) = args.only.as_deref() {
        if !PARTS.contains(&only) {
            bail!("--only {only:?}: the parts are {}", PARTS.join(", "));
        }
    }
    if args.only.is_none() || args.only.as_deref() == Some("limits") {
        limits()?;
    }
    if args.only.is_none() || args.only.as_deref() == Some("writes") {
        writes(&args)?;
    }
    if args.only.is_none() || args.only.as_deref() == Some("neworder") {
        new_order(&args)?;
    }
    if args.only.is_none() || args.only.as_deref() == Some("scoreboard") {
        scoreboard(&args)?;
    }
    if args.only.is_none() || args.only.as_deref() == Some("tpcc") {
        tpcc(&args)?;
    }
    Ok(())
}

// ---- part 0: how fast the default limits stop a runaway handler ----

const RUNAWAY_SCRIPT: &str = r#"
fn spin(req) { let n = 0; loop { n += 1; } }
fn recurse(req) { recurse(req) }
fn grow(req) { let s = "x"; loop { s += s; } }
fn big_array(req) { let a = []; loop { a.push(1); } }
fn slow_native(req) { loop { counters.scan((), (), 10000); } }
"#;

fn limits() -> anyhow::Result<()> {
    println!("## owner: how soon the default limits stop a runaway handler\n");
    println!("| handler | stopped by | after ms |");
    println!("|---|---|---:|");
    let files: Vec<(String, String)> = vec![("runaway.rhai".into(), RUNAWAY_SCRIPT.into())];
    let manifest =
        r#"{ "name": "runaway", "routes": {}, "tables": { "counters": ["n", "total"] } }"#;
    let app = App::from_sources(manifest, files.clone(), Limits::default())?;
    let mut tables = Tables::new(app.schema().tables.len());
    let mut ws = WriteSet::default();
    let counters = app.schema().table_id("counters").expect("declared");
    for k in 0..10_000 {
        tables
            .put(
                &mut ws,
                counters,
                Key::int(k),
                Fields::from_values(&[int(0), int(0)]),
                true,
            )
            .map_err(anyhow::Error::msg)?;
        ws.clear();
    }
    let operations_only = Limits {
        wall_clock_max: Duration::from_secs(60),
        ..Limits::default()
    };
    let counted = App::from_sources(manifest, files, operations_only)?;
    let started = Instant::now();
    let error = counted.run_write("spin", &Request::default(), &mut tables, &mut ws);
    println!(
        "| spin, operation limit only | {} | {:.1} |",
        error
            .err()
            .map_or_else(|| "nothing".into(), |e| e.to_string()),
        started.elapsed().as_secs_f64() * 1e3
    );
    for handler in ["spin", "recurse", "grow", "big_array", "slow_native"] {
        let started = Instant::now();
        let error = app
            .run_write(handler, &Request::default(), &mut tables, &mut ws)
            .expect_err("a runaway handler is stopped");
        let stopped = match &error {
            pure_lang::HandlerError::Limit { limit, .. } => limit.clone(),
            other => format!("{other}"),
        };
        println!(
            "| {handler} | {stopped} | {:.1} |",
            started.elapsed().as_secs_f64() * 1e3
        );
    }
    println!();
    Ok(())
}

// ---- part 1: write throughput ----

const WRITES_MANIFEST: &str = r#"{ "name": "owner-bench",
  "routes": { "POST /u": "update", "POST /i": "insert", "POST /l": "load" },
  "tables": { "counters": ["n", "total"], "events": ["a", "b", "c"] } }"#;

const WRITES_SCRIPT: &str = r#"
fn update(req) { let r = counters.get(req.body.k); r.n += 1; r.total += req.body.v; r.save(); r.n }
fn insert(req) { events.insert(req.body.id, #{ a: req.body.v, b: "event", c: 0 }); true }
fn load(req) { for k in req.body.from..req.body.to { counters.insert(k, #{ n: 0, total: 0 }); } }
"#;

const COUNTER_ROWS: i64 = 10_000;

fn writes(args: &Args) -> anyhow::Result<()> {
    println!("## owner: write throughput (in-process, no HTTP; clients wait for each answer)\n");
    println!(
        "| handler | sync | clients | writes/s | p50 µs | p99 µs | p99.9 µs | device B/write | owner busy | CPU µs/write |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut syncs = vec![(SyncMode::None, None)];
    if let Some(dir) = &args.dir {
        syncs.insert(0, (SyncMode::Always, Some(dir.clone())));
    }
    for (sync, dir) in syncs {
        for handler in ["update", "insert"] {
            for &clients in &args.clients {
                let row = throughput(args, handler, sync, dir.as_deref(), clients)?;
                println!("{row}");
            }
        }
    }
    println!();
    Ok(())
}

fn throughput(
    args: &Args,
    handler: &str,
    sync: SyncMode,
    dir: Option<&Path>,
    clients: usize,
) -> anyhow::Result<String> {
    let parent = match dir {
        Some(dir) => dir.to_path_buf(),
        None => std::env::temp_dir(),
    };
    let data = tempfile_dir(&parent)?;
    let app = App::from_sources(
        WRITES_MANIFEST,
        vec![("bench.rhai".into(), WRITES_SCRIPT.into())],
        Limits::default(),
    )?;
    let options = RuntimeOptions {
        sync,
        ..RuntimeOptions::default()
    };
    let rt = Runtime::open(app, &data, options).map_err(|e| anyhow::anyhow!("{e}"))?;
    for from in (0..COUNTER_ROWS).step_by(1000) {
        let request = body(json!({"from": from, "to": from + 1000}));
        answer(rt.write("load", request))?;
    }
    let device = dir.and_then(DeviceCounter::for_path);
    let bytes_before = device.as_ref().and_then(DeviceCounter::bytes_written);
    let busy_before = rt.metrics().owner_busy_seconds_total;
    let cpu_before = process_cpu();
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(args.seconds);
    let histograms: Vec<anyhow::Result<(Histogram<u64>, u64)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|client| {
                let rt = rt.clone();
                s.spawn(move || client_loop(&rt, handler, client as i64, deadline))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a client panicked"))
            .collect()
    });
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = process_cpu() - cpu_before;
    let busy = rt.metrics().owner_busy_seconds_total - busy_before;
    let bytes_after = device.as_ref().and_then(DeviceCounter::bytes_written);
    rt.shutdown();
    drop(rt);
    let _ = std::fs::remove_dir_all(&data);

    let mut all = Histogram::<u64>::new(3)?;
    let mut count = 0;
    for result in histograms {
        let (h, n) = result?;
        all.add(h)?;
        count += n;
    }
    let bytes = match (bytes_before, bytes_after) {
        (Some(b), Some(a)) => format!("{:.0}", (a - b) as f64 / count.max(1) as f64),
        _ => "n/a".into(),
    };
    let sync_name = if sync == SyncMode::Always {
        "always"
    } else {
        "none"
    };
    Ok(format!(
        "| {handler} | {sync_name} | {clients} | {:.0} | {:.0} | {:.0} | {:.0} | {bytes} | {:.0}% | {:.1} |",
        count as f64 / elapsed,
        all.value_at_quantile(0.5) as f64 / 1000.0,
        all.value_at_quantile(0.99) as f64 / 1000.0,
        all.value_at_quantile(0.999) as f64 / 1000.0,
        100.0 * busy / elapsed,
        cpu.as_secs_f64() * 1e6 / count.max(1) as f64,
    ))
}

fn client_loop(
    rt: &Runtime,
    handler: &str,
    client: i64,
    deadline: Instant,
) -> anyhow::Result<(Histogram<u64>, u64)> {
    let mut histogram = Histogram::<u64>::new(3)?;
    let mut rng = SimRng::new(client as u64 + 1);
    let mut count = 0u64;
    while Instant::now() < deadline {
        let request = match handler {
            "update" => body(json!({"k": rng.below(COUNTER_ROWS as u64), "v": 3})),
            _ => body(json!({"id": client * 1_000_000_000 + count as i64, "v": 3})),
        };
        let started = Instant::now();
        answer(rt.write(handler, request))?;
        histogram.record(started.elapsed().as_nanos() as u64)?;
        count += 1;
    }
    Ok((histogram, count))
}

fn answer(
    reply: Result<pure_runtime::WriteReply, pure_runtime::HandlerError>,
) -> anyhow::Result<serde_json::Value> {
    let reply = reply.map_err(|e| anyhow::anyhow!("write refused: {e}"))?;
    let result = reply
        .blocking_recv()
        .context("the runtime dropped a write")?;
    result
        .map(|answer| answer.body)
        .map_err(|e| anyhow::anyhow!("write failed: {e}"))
}

fn body(value: serde_json::Value) -> Request {
    Request {
        body: pure_lang::to_dynamic(&value),
        ..Request::default()
    }
}

fn tempfile_dir(parent: &Path) -> anyhow::Result<PathBuf> {
    let name = format!("pure-bench-owner-{}-{}", std::process::id(), rand_suffix());
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn rand_suffix() -> u64 {
    Instant::now().elapsed().as_nanos() as u64 ^ (std::process::id() as u64).rotate_left(17)
}

// ---- part 2: the New-Order-like handler, script against native ----

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

/// Median µs per call of `batch` calls of `step`, over `batches` batches run by `rounds`.
struct Timer {
    samples: Vec<f64>,
}

impl Timer {
    fn new() -> Timer {
        Timer {
            samples: Vec::new(),
        }
    }
    fn time(&mut self, calls: usize, mut step: impl FnMut()) {
        let started = Instant::now();
        for _ in 0..calls {
            step();
        }
        self.samples
            .push(started.elapsed().as_secs_f64() * 1e6 / calls as f64);
    }
    /// Times `calls` calls of `step` on `tables`, clearing the write set after each; with
    /// `snapshot_every`, a snapshot of the tables is held meanwhile, renewed every that many calls.
    fn time_calls(
        &mut self,
        calls: usize,
        tables: &mut Tables,
        ws: &mut WriteSet,
        snapshot_every: Option<usize>,
        mut step: impl FnMut(usize, &mut Tables, &mut WriteSet),
    ) {
        let mut snapshot = None;
        let mut i = 0;
        self.time(calls, || {
            if snapshot_every.is_some_and(|n| i % n == 0) {
                snapshot = Some(tables.clone());
            }
            step(i, tables, ws);
            ws.clear();
            i += 1;
        });
        drop(snapshot);
    }

    fn median(&self) -> f64 {
        let mut s = self.samples.clone();
        s.sort_by(f64::total_cmp);
        s[s.len() / 2]
    }
    fn range(&self) -> (f64, f64) {
        let min = self.samples.iter().copied().fold(f64::INFINITY, f64::min);
        let max = self.samples.iter().copied().fold(0.0, f64::max);
        (min, max)
    }
}

fn new_order(args: &Args) -> anyhow::Result<()> {
    if args.json.is_some() && (args.interpreted || args.variant.is_some()) {
        bail!("--json reports the medians of the full New-Order part: drop --interpreted and --variant");
    }
    println!("## owner: New-Order-like handler, script against native (µs per call)\n");
    let source = match &args.script {
        Some(path) => {
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?
        }
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
    // The same script in Rhai's evaluator, for the row that shows what compiling gains.
    let mut rhai_app = App::from_sources(TPCC_MANIFEST, files, limits)?;
    rhai_app.set_interpreted(true);
    let ids = ids(&app);
    // Each variant gets its own tables, loaded separately: clones would share their nodes, and
    // every first write would copy them, which is the cost of a snapshot, not of the handler.
    let fresh = || {
        let mut tables = Tables::new(app.schema().tables.len());
        load(&ids, &mut tables);
        tables
    };
    let loading = Instant::now();
    let mut script_tables = fresh();
    eprintln!(
        "loaded {} rows in {:.1} s",
        script_tables.row_count(),
        loading.elapsed().as_secs_f64()
    );
    let mut native_tables = fresh();
    let mut floor = floor::Floor::load();
    assert_eq!(
        floor.row_count(),
        native_tables.row_count(),
        "the same population"
    );
    let (mut snap_tables, mut script_snap_tables, mut rhai_tables) = if args.variant.is_none() {
        (fresh(), fresh(), fresh())
    } else {
        (Tables::default(), Tables::default(), Tables::default())
    };

    let mut rng = SimRng::new(42);
    let orders: Vec<Order> = (0..args.batch).map(|_| order(&mut rng)).collect();
    let requests: Vec<Request> = orders.iter().map(order_request).collect();
    let mut ws = WriteSet::default();
    let mut record_bytes = Vec::new();
    let mut rhai = Timer::new();
    let mut floor_timer = Timer::new();
    let (mut script, mut native, mut native_snap, mut script_snap, mut empty, mut encode) = (
        Timer::new(),
        Timer::new(),
        Timer::new(),
        Timer::new(),
        Timer::new(),
        Timer::new(),
    );
    let mut encoded_total = 0usize;
    if let Some(variant) = &args.variant {
        let snapshot_every = variant.ends_with("-snapshot").then_some(64);
        let mut snapshot = None;
        let mut calls = 0usize;
        for _ in 0..args.batches {
            for (request, order) in requests.iter().zip(&orders) {
                let tables = if variant.starts_with("script") {
                    &mut script_tables
                } else {
                    &mut native_tables
                };
                if snapshot_every.is_some_and(|n| calls.is_multiple_of(n)) {
                    snapshot = Some(tables.clone());
                }
                match variant.as_str() {
                    "script" | "script-snapshot" => {
                        app.run_write("new_order", request, tables, &mut ws)
                            .expect("the script runs");
                    }
                    "native" | "native-snapshot" => {
                        native_new_order(&ids, tables, &mut ws, order);
                    }
                    "floor" => {
                        std::hint::black_box(floor.new_order(order));
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
        drop(snapshot);
        println!("ran {calls} calls of the {variant} variant");
        return Ok(());
    }
    let run_script = |i: usize, tables: &mut Tables, ws: &mut WriteSet| {
        app.run_write("new_order", &requests[i % requests.len()], tables, ws)
            .expect("the script runs");
    };
    let run_native = |i: usize, tables: &mut Tables, ws: &mut WriteSet| {
        native_new_order(&ids, tables, ws, &orders[i % orders.len()]);
    };
    let run_rhai = |i: usize, tables: &mut Tables, ws: &mut WriteSet| {
        rhai_app
            .run_write("new_order", &requests[i % requests.len()], tables, ws)
            .expect("the script runs");
    };
    for round in 0..args.batches + 1 {
        let batch = args.batch;
        script.time_calls(batch, &mut script_tables, &mut ws, None, run_script);
        native.time_calls(batch, &mut native_tables, &mut ws, None, run_native);
        rhai.time_calls(batch, &mut rhai_tables, &mut ws, None, run_rhai);
        let mut i = 0;
        floor_timer.time(batch, || {
            std::hint::black_box(floor.new_order(&orders[i % orders.len()]));
            i += 1;
        });
        // A snapshot every 64 calls, as the owner takes one per group.
        native_snap.time_calls(batch, &mut snap_tables, &mut ws, Some(64), run_native);
        script_snap.time_calls(
            batch,
            &mut script_snap_tables,
            &mut ws,
            Some(64),
            run_script,
        );
        // Encoding: the write set of one call, encoded again and again.
        native_new_order(
            &ids,
            &mut native_tables,
            &mut ws,
            &orders[round % orders.len()],
        );
        encode.time(args.batch, || {
            record::encode_writes(&mut record_bytes, ws.changes());
        });
        encoded_total = record_bytes.len();
        ws.clear();
        let mut i = 0;
        empty.time(args.batch, || {
            app.run_write(
                "empty",
                &requests[i % requests.len()],
                &mut script_tables,
                &mut ws,
            )
            .expect("the script runs");
            i += 1;
        });
        if round == 0 {
            // The first round warms caches and allocators: not counted.
            for t in [
                &mut script,
                &mut rhai,
                &mut native,
                &mut native_snap,
                &mut script_snap,
                &mut empty,
                &mut encode,
                &mut floor_timer,
            ] {
                t.samples.clear();
            }
        }
    }
    if script.samples.is_empty() {
        bail!("no batches measured");
    }
    let script_name = if args.interpreted {
        "script (Pure, --interpreted: Rhai's evaluator)"
    } else {
        "script (Pure, compiled)"
    };
    println!("| variant | median µs/call | range (batch medians) |");
    println!("|---|---:|---|");
    for (name, t) in [
        (script_name, &script),
        ("script in Rhai's evaluator (not compiled)", &rhai),
        ("native Rust, same maps and write set", &native),
        ("native, a snapshot every 64 calls", &native_snap),
        ("script, a snapshot every 64 calls", &script_snap),
        ("script `empty` handler, same request", &empty),
        ("encoding the write set as a record", &encode),
        (
            "floor: std BTreeMap, plain rows changed in place, no snapshot or write set",
            &floor_timer,
        ),
    ] {
        let (lo, hi) = t.range();
        println!("| {name} | {:.1} | {lo:.1}–{hi:.1} |", t.median());
    }
    println!();
    println!(
        "ratio script / native: {:.2}x (in Rhai's evaluator: {:.2}x); record: {encoded_total} bytes for 23 writes",
        script.median() / native.median(),
        rhai.median() / native.median()
    );
    println!(
        "as the owner runs them, with a snapshot per group of 64 (the copying both pay): script / native {:.2}x",
        script_snap.median() / native_snap.median()
    );
    println!(
        "split of the script call: call + request {:.1} µs, script steps and glue {:.1} µs, map and write-set work {:.1} µs; encoding {:.1} µs; snapshot copying {:+.1} µs per call",
        empty.median(),
        script.median() - native.median() - empty.median(),
        native.median(),
        encode.median(),
        native_snap.median() - native.median(),
    );
    println!(
        "against the floor: script as the owner runs it {:.2}x, native with snapshots {:.2}x, native {:.2}x",
        script_snap.median() / floor_timer.median(),
        native_snap.median() / floor_timer.median(),
        native.median() / floor_timer.median(),
    );
    if let Some(path) = &args.json {
        let figures = json!({
            "compiled_us": script.median(),
            "interpreted_us": rhai.median(),
            "native_us": native.median(),
            "native_snapshot_us": native_snap.median(),
            "compiled_snapshot_us": script_snap.median(),
            "floor_us": floor_timer.median(),
        });
        std::fs::write(path, serde_json::to_string_pretty(&figures)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

// ---- part 4: the scoreboard's write handler, in-process ----

/// Posts per snapshot in the scoreboard part: the group size pure-serve reaches at 64
/// connections on this machine (docs/research/002).
const SCOREBOARD_GROUP: usize = 14;

/// µs per `post_score` call of the scoreboard app on 10,000 players, without HTTP and without the
/// log: the handler, its write set's encoding, and a snapshot every `SCOREBOARD_GROUP` calls as
/// the owner takes one per group. With `--variant script`, only a fixed number of calls (for
/// callgrind); `--variant load` stops after loading.
fn scoreboard(args: &Args) -> anyhow::Result<()> {
    println!("## owner: the scoreboard's post_score handler (µs per call)\n");
    let limits = match args.variant {
        Some(_) => Limits {
            wall_clock_max: Duration::from_secs(60),
            ..Limits::default()
        },
        None => Limits::default(),
    };
    let mut app = App::load_with(&args.app, limits)
        .with_context(|| format!("loading {}", args.app.display()))?;
    app.set_interpreted(args.interpreted);
    const PLAYERS: u64 = 10_000;
    let post = |player: u64, score: u64| {
        body(json!({"player": format!("player-{player}"), "score": score}))
    };
    let mut tables = Tables::new(app.schema().tables.len());
    // The app's declared indexes, kept by every post as the runtime keeps them.
    tables
        .set_indexes(app.indexes().to_vec())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut ws = WriteSet::default();
    let mut record_bytes = Vec::new();
    for p in 0..PLAYERS {
        app.run_write("post_score", &post(p, 0), &mut tables, &mut ws)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        ws.clear();
    }
    let mut rng = SimRng::new(7);
    let requests: Vec<Request> = (0..args.batch)
        .map(|_| post(rng.below(PLAYERS), rng.below(1_000_000)))
        .collect();
    let mut call = |i: usize, tables: &mut Tables, snapshot: &mut Tables| {
        if i.is_multiple_of(SCOREBOARD_GROUP) {
            *snapshot = tables.clone();
        }
        app.run_write("post_score", &requests[i % requests.len()], tables, &mut ws)
            .expect("the handler runs");
        record::encode_writes(&mut record_bytes, ws.changes());
        record_bytes.clear();
        ws.clear();
    };
    let mut snapshot = tables.clone();
    match args.variant.as_deref() {
        Some("load") => return Ok(()),
        Some("script") => {
            for i in 0..args.batch * args.batches {
                call(i, &mut tables, &mut snapshot);
            }
            println!("ran {} calls", args.batch * args.batches);
            return Ok(());
        }
        Some(other) => bail!("--variant for the scoreboard part is script or load, not {other}"),
        None => {}
    }
    let mut timer = Timer::new();
    let mut i = 0;
    for round in 0..args.batches + 1 {
        timer.time(args.batch, || {
            call(i, &mut tables, &mut snapshot);
            i += 1;
        });
        if round == 0 {
            timer.samples.clear();
        }
    }
    let (lo, hi) = timer.range();
    println!(
        "post_score on {PLAYERS} players, a snapshot every {SCOREBOARD_GROUP} calls: median {:.2} µs per call (batch medians {lo:.2}–{hi:.2})",
        timer.median()
    );
    Ok(())
}

// ---- part 5: the TPC-C app's handlers as the owner runs them ----

/// The five TPC-C transactions of the bundled app, in-process on the population of
/// `--warehouses`: each call timed alone, as the owner runs a write (the handler, encoding its
/// write set as a record, a snapshot held and renewed every 64 writes as the syncer takes one
/// per group) or a read (the handler on a snapshot).
fn tpcc(args: &Args) -> anyhow::Result<()> {
    use crate::tpcc::{inprocess, input::Kind, input::Terminal, population::LOAD_TIME};
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
    let terminals_n = (10 * args.warehouses) as usize;
    let mut terminals: Vec<Terminal> = (0..terminals_n)
        .map(|i| Terminal::new(1, i as u64, args.warehouses))
        .collect();
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); Kind::ALL.len()];
    let mut record_bytes: Vec<u64> = vec![0; Kind::ALL.len()];
    let mut failures = 0u64;
    let mut ws = WriteSet::default();
    let mut record = Vec::new();
    let mut snapshot = None;
    let mut writes = 0usize;
    for k in 0..args.transactions {
        let txn = terminals[k % terminals_n].next();
        let kind = txn.kind();
        let (handler, request) = inprocess::request(&app, &txn, LOAD_TIME + k as i64)?;
        let is_write = matches!(kind, Kind::NewOrder | Kind::Payment | Kind::Delivery);
        let started = Instant::now();
        if is_write && writes.is_multiple_of(64) {
            snapshot = Some(tables.clone());
        }
        let answer = inprocess::execute(&app, &mut tables, &mut ws, handler, &request);
        if is_write {
            record.clear();
            record::encode_writes(&mut record, ws.changes());
            ws.clear();
            writes += 1;
        }
        let elapsed = started.elapsed().as_secs_f64() * 1e6;
        samples[kind as usize].push(elapsed);
        record_bytes[kind as usize] += record.len() as u64;
        if answer.status != 200 && answer.status != 422 {
            failures += 1;
            if failures == 1 {
                eprintln!("{kind:?} failed: {} {}", answer.status, answer.body);
            }
        }
    }
    drop(snapshot);
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
    println!(
        "\nfallbacks to Rhai's evaluator: {}; failed calls (not 200, not the 422 rollback): {failures}",
        app.fallbacks()
    );
    if failures > 0 {
        bail!("{failures} TPC-C calls failed");
    }
    Ok(())
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
