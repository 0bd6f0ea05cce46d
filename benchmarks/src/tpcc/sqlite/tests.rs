//! The SQLite twin's tests. One W=1 database is loaded per test binary (on tmpfs when there is
//! one) and copied for each test; no test asserts a timing.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use clap::Parser;
use serde_json::{json, Value};

use super::super::input::{self, Customer, Kind, Terminal, Txn};
use super::super::population::{self, Scale, LOAD_TIME};
use super::super::rows::{self, Db};
use super::super::Answer;
use super::*;
use crate::harness::sqlite::{
    JournalMode, LockingMode, Settings, SqliteOptions, Synchronous, TempStore,
};

const SEED: u64 = 7;

struct Golden {
    dir: tempfile::TempDir,
    file: PathBuf,
}

static GOLDEN: OnceLock<Golden> = OnceLock::new();

extern "C" fn remove_golden() {
    if let Some(g) = GOLDEN.get() {
        let _ = std::fs::remove_dir_all(g.dir.path());
    }
}

fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().expect("a temporary directory")
}

fn settings() -> Settings {
    Settings::tuned()
}

/// The W=1 database of [`SEED`], loaded once.
fn golden() -> &'static Path {
    &GOLDEN
        .get_or_init(|| {
            let dir = scratch();
            let file = dir.path().join("golden.db");
            let report = load(&file, &settings(), SEED, 1, false).expect("load W=1");
            eprintln!("{report}");
            // A static is never dropped: remove the file when the test binary exits.
            unsafe { libc::atexit(remove_golden) };
            Golden { dir, file }
        })
        .file
}

/// A private copy of the golden database.
fn fresh() -> (tempfile::TempDir, PathBuf) {
    let golden = golden();
    let dir = scratch();
    let file = dir.path().join("tpcc.db");
    std::fs::copy(golden, &file).expect("copy the golden database");
    (dir, file)
}

macro_rules! assert_same_db {
    ($a:expr, $b:expr, $($table:ident),+) => {
        $(
            assert_eq!($a.$table.len(), $b.$table.len(), "rows of {}", stringify!($table));
            if let Some(i) = (0..$a.$table.len()).find(|&i| $a.$table[i] != $b.$table[i]) {
                panic!("{} differs at row {i}:\n{:?}\n{:?}", stringify!($table), $a.$table[i], $b.$table[i]);
            }
        )+
    };
}

fn assert_same(a: &Db, b: &Db) {
    assert_same_db!(
        a, b, warehouse, district, customer, history, orders, new_order, order_line, stock, item
    );
}

fn new_order(d_id: i64, c_id: i64, lines: &[(i64, i64, i64)]) -> Txn {
    Txn::NewOrder(input::NewOrder {
        w_id: 1,
        d_id,
        c_id,
        i_ids: lines.iter().map(|l| l.0).collect(),
        supply_w_ids: lines.iter().map(|l| l.1).collect(),
        quantities: lines.iter().map(|l| l.2).collect(),
    })
}

fn payment(d_id: i64, c_d_id: i64, customer: Customer, h_amount: i64) -> Txn {
    Txn::Payment(input::Payment {
        w_id: 1,
        d_id,
        c_w_id: 1,
        c_d_id,
        customer,
        h_amount,
    })
}

fn error(status: u16, message: &str) -> Answer {
    Answer {
        status,
        body: json!({ "status": status, "error": message }),
    }
}

#[test]
fn the_layout_follows_the_page_size() {
    assert_eq!(schema::index_max_local(1024), 230);
    assert_eq!(schema::index_max_local(4096), 1002);
    let big = Layout::for_page_size(4096);
    assert!(big.customer_without_rowid && big.stock_without_rowid);
    assert_eq!(big.without_rowid().len(), 6);
    let mid = Layout::for_page_size(2048);
    assert!(!mid.customer_without_rowid && mid.stock_without_rowid);
    let small = Layout::for_page_size(1024);
    assert_eq!(
        small.without_rowid(),
        ["district", "orders", "new_order", "order_line"]
    );
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    sqlite: SqliteOptions,
}

#[test]
fn flags_override_the_preset() {
    let s = Cli::parse_from(["x"]).sqlite.settings();
    assert_eq!(s, Settings::tuned());
    assert_eq!(s.wal_autocheckpoint, 40_000_000 / 4120);
    let s = Cli::parse_from(["x", "--sqlite-preset", "default"])
        .sqlite
        .settings();
    assert_eq!(s, Settings::default_preset());
    let s = Cli::parse_from([
        "x",
        "--sqlite-page-size",
        "1024",
        "--sqlite-synchronous",
        "normal",
        "--sqlite-journal-mode",
        "delete",
        "--sqlite-cache-size",
        "1000",
        "--sqlite-mmap-size",
        "0",
        "--sqlite-temp-store",
        "file",
        "--sqlite-locking-mode",
        "exclusive",
    ])
    .sqlite
    .settings();
    assert_eq!(s.page_size, 1024);
    assert_eq!(
        s.wal_autocheckpoint,
        40_000_000 / 1048,
        "tuned: ~40 MB at the page size"
    );
    assert_eq!(s.synchronous, Synchronous::Normal);
    assert_eq!(s.journal_mode, JournalMode::Delete);
    assert_eq!((s.cache_size_kib, s.mmap_size), (1000, 0));
    assert_eq!(s.temp_store, TempStore::File);
    assert_eq!(s.locking_mode, Some(LockingMode::Exclusive));
    let s = Cli::parse_from(["x", "--sqlite-wal-autocheckpoint", "7"])
        .sqlite
        .settings();
    assert_eq!(s.wal_autocheckpoint, 7);
    assert!(Cli::try_parse_from(["x", "--sqlite-page-size", "1000"]).is_err());
    assert!(s
        .describe()
        .contains("journal_mode=wal synchronous=full page_size=4096"));
}

/// The plans of every statement the transactions run: key lookups and key-prefix ranges, no
/// scan, in the layout of 4 KiB pages (all composite keys WITHOUT ROWID) and of 1 KiB pages
/// (CUSTOMER and STOCK rowid tables with a separate key index).
#[test]
fn every_statement_searches_by_key() {
    let (_dir, file) = fresh();
    check_plans(&file, true);
    let dir = scratch();
    let small = dir.path().join("small-pages.db");
    let mut settings = settings();
    settings.page_size = 1024;
    let report = load(&small, &settings, SEED, 1, false).unwrap();
    assert_eq!(
        report.without_rowid,
        ["district", "orders", "new_order", "order_line"]
    );
    check_plans(&small, false);
}

fn check_plans(file: &Path, without_rowid: bool) {
    let session = Session::open(file, &settings()).unwrap();
    let conn = session.connection();
    let tables = rows::TABLES;
    for sql in txn::statements() {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        // Parameters unbound (NULL): the plan does not depend on them.
        let mut rows = stmt.raw_query();
        let mut plan = Vec::new();
        while let Some(row) = rows.next().unwrap() {
            plan.push(row.get::<_, String>(3).unwrap());
        }
        if std::env::var_os("TPCC_PLANS").is_some() {
            eprintln!("{sql}\n    {plan:?}");
        }
        for step in &plan {
            let scans = step
                .strip_prefix("SCAN ")
                .map(|rest| rest.split_whitespace().next().unwrap_or(""));
            assert!(
                !scans.is_some_and(|t| tables.contains(&t)),
                "{sql}\nscans: {plan:?}"
            );
            assert!(
                !step.contains("AUTOMATIC"),
                "{sql}\nbuilds an index: {plan:?}"
            );
        }
        let uses = |what: &str| plan.iter().any(|s| s.contains(what));
        if sql == txn::BY_NAME {
            assert!(uses("USING COVERING INDEX customer_name"), "{plan:?}");
            assert!(!uses("TEMP B-TREE"), "the index gives the order: {plan:?}");
        }
        if sql == txn::OS_NEWEST {
            assert!(uses("INDEX orders_customer"), "{plan:?}");
        }
        if sql == txn::SL_LOW {
            assert!(uses("SEARCH order_line USING PRIMARY KEY"), "{plan:?}");
            let stock = if without_rowid {
                "SEARCH stock USING PRIMARY KEY"
            } else {
                "SEARCH stock USING INDEX sqlite_autoindex_stock_1"
            };
            assert!(uses(stock), "{plan:?}");
        }
    }
}

/// Rows and a hash of the lines, in order.
fn digest(lines: impl Iterator<Item = String>) -> (usize, u64) {
    let mut h = std::hash::DefaultHasher::new();
    let mut n = 0;
    for line in lines {
        line.hash(&mut h);
        n += 1;
    }
    (n, h.finish())
}

#[test]
fn the_load_is_the_population_and_its_dump_reads_back() {
    let (dir, file) = fresh();
    let out = dir.path().join("dump");
    dump(&file, &out).unwrap();
    // The population's lines per table, in the order the generator gives them (key order).
    let mut generated: BTreeMap<&'static str, (usize, std::hash::DefaultHasher)> = BTreeMap::new();
    population::generate(SEED, 1, &mut |row| {
        let entry = generated
            .entry(row.table())
            .or_insert_with(|| (0, Default::default()));
        entry.0 += 1;
        row.line().hash(&mut entry.1);
    });
    let read_lines = |table: &str| {
        std::fs::read_to_string(out.join(format!("{table}.jsonl")))
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    for table in rows::TABLES {
        let lines = read_lines(table);
        let (n, h) = &generated[table];
        assert_eq!(
            digest(lines.into_iter()),
            (*n, h.finish()),
            "{table}: the dump is not the population"
        );
    }
    // Every line parses back (TableRow::from_line) to the rows read_db gives.
    let parsed = Db::read_dir(&out).unwrap();
    let read = read_db(&file).unwrap();
    assert_same(&parsed, &read);
    assert_eq!(read.counts()[0..6], [1, 10, 30_000, 30_000, 30_000, 9_000]);
}

#[test]
fn an_unused_item_rolls_everything_back() {
    let (_dir, file) = fresh();
    let before = read_db(&file).unwrap();
    let c = &before.customer[41]; // district 1, customer 42
    let bad = new_order(
        1,
        c.c_id,
        &[(7, 1, 3), (8, 1, 2), (Scale::SPEC.unused_item(), 1, 1)],
    );
    let expected = Answer {
        status: 422,
        body: json!({
            "status": 422, "error": "Item number is not valid", "rolled_back": true,
            "w_id": 1, "d_id": 1, "c_id": c.c_id, "c_last": c.c_last, "c_credit": c.c_credit,
            "o_id": 3001,
        }),
    };
    let good = new_order(1, c.c_id, &[(7, 1, 3)]);
    {
        let mut session = Session::open(&file, &settings()).unwrap();
        assert_eq!(session.execute(&bad, LOAD_TIME + 1).unwrap(), expected);
        assert_eq!(session.stats().rollbacks, 1);
    }
    assert_same(&before, &read_db(&file).unwrap());
    {
        // The same through the grouped writer, in one batch with a good order behind it.
        let grouped = Grouped::start(&file, &settings(), 8).unwrap();
        let first = grouped.submit(&bad, LOAD_TIME + 2);
        let second = grouped.submit(&good, LOAD_TIME + 3);
        assert_eq!(first.wait().unwrap(), expected);
        let answer = second.wait().unwrap();
        assert_eq!(
            (answer.status, &answer.body["o_id"]),
            (200, &json!(3001)),
            "{answer:?}"
        );
        let stats = grouped.close().unwrap();
        assert_eq!((stats.transactions, stats.rollbacks), (2, 1));
    }
    let after = read_db(&file).unwrap();
    assert_eq!(after.district[0].d_next_o_id, 3002);
    assert_eq!(after.orders.len(), before.orders.len() + 1);
    assert_eq!(after.order_line.len(), before.order_line.len() + 1);
    // Only item 7's stock changed: item 8's update was undone with the rest.
    assert_eq!(after.stock[6].s_order_cnt, 1);
    assert_eq!(after.stock[7], before.stock[7]);
}

/// The answers of tpcc.rhai computed from the rows, for a few transactions, and its errors.
#[test]
fn answers_follow_the_script() {
    let (_dir, file) = fresh();
    let db = read_db(&file).unwrap();
    let mut s = Session::open(&file, &settings()).unwrap();
    let now = LOAD_TIME + 5_000;

    // New-Order with one item twice: the second line sees the first's stock update.
    let (w, d3) = (&db.warehouse[0], &db.district[2]);
    let c = db
        .customer
        .iter()
        .find(|c| c.c_d_id == 3 && c.c_id == 17)
        .unwrap();
    let item = |i: i64| &db.item[(i - 1) as usize];
    let stock = |i: i64| &db.stock[(i - 1) as usize];
    let answer = s
        .execute(
            &new_order(3, 17, &[(500, 1, 9), (77, 1, 4), (500, 1, 9)]),
            now,
        )
        .unwrap();
    let mut on_hand = HashMap::new();
    let mut lines = Vec::new();
    let mut sum = 0;
    for (i, q) in [(500, 9), (77, 4), (500, 9)] {
        let q0 = *on_hand.entry(i).or_insert_with(|| stock(i).s_quantity);
        let left = if q0 >= q + 10 { q0 - q } else { q0 - q + 91 };
        on_hand.insert(i, left);
        let brand = item(i).i_data.contains("ORIGINAL") && stock(i).s_data.contains("ORIGINAL");
        sum += q * item(i).i_price;
        lines.push(json!({
            "ol_supply_w_id": 1, "ol_i_id": i, "i_name": item(i).i_name, "ol_quantity": q,
            "s_quantity": left, "brand_generic": if brand { "B" } else { "G" },
            "i_price": item(i).i_price, "ol_amount": q * item(i).i_price,
        }));
    }
    let expected = json!({
        "w_id": 1, "d_id": 3, "c_id": 17, "o_id": 3001, "o_ol_cnt": 3, "c_last": c.c_last,
        "c_credit": c.c_credit, "c_discount": c.c_discount, "w_tax": w.w_tax, "d_tax": d3.d_tax,
        "o_entry_d": now,
        "total": sum * (10000 - c.c_discount) * (10000 + w.w_tax + d3.d_tax) / 100_000_000,
        "lines": lines,
    });
    assert_eq!(
        answer,
        Answer {
            status: 200,
            body: expected
        }
    );

    // Payment by name: the customer at (n - 1) / 2 of the name's customers by (c_first, c_id).
    let mut names: BTreeMap<&str, Vec<&rows::Customer>> = BTreeMap::new();
    for c in db.customer.iter().filter(|c| c.c_d_id == 2) {
        names.entry(&c.c_last).or_default().push(c);
    }
    let (last, mut same) = names
        .into_iter()
        .find(|(_, cs)| cs.len() == 4)
        .expect("a name four times");
    same.sort_by(|a, b| (&a.c_first, a.c_id).cmp(&(&b.c_first, b.c_id)));
    let chosen = same[1];
    let answer = s
        .execute(
            &payment(5, 2, Customer::Last(last.to_string()), 12_345),
            now,
        )
        .unwrap();
    assert_eq!(answer.status, 200, "{answer:?}");
    let body = answer.body.as_object().unwrap();
    let keys: Vec<&str> = body.keys().map(String::as_str).collect();
    let mut script_keys = vec![
        "w_id",
        "d_id",
        "c_id",
        "c_w_id",
        "c_d_id",
        "w_street_1",
        "w_street_2",
        "w_city",
        "w_state",
        "w_zip",
        "d_street_1",
        "d_street_2",
        "d_city",
        "d_state",
        "d_zip",
        "c_first",
        "c_middle",
        "c_last",
        "c_street_1",
        "c_street_2",
        "c_city",
        "c_state",
        "c_zip",
        "c_phone",
        "c_since",
        "c_credit",
        "c_credit_lim",
        "c_discount",
        "c_balance",
        "c_data",
        "h_amount",
        "h_date",
    ];
    script_keys.sort_unstable();
    assert_eq!(keys, script_keys);
    assert_eq!(body["c_id"], json!(chosen.c_id));
    assert_eq!(body["c_balance"], json!(chosen.c_balance - 12_345));
    assert_eq!(body["d_street_1"], json!(db.district[4].d_street_1));
    assert_eq!(body["h_date"], json!(now));
    if chosen.c_credit == "GC" {
        assert_eq!(body["c_data"], json!(""));
    }

    // Payment of a customer with bad credit: the entry goes in front of c_data, cut to 500.
    let bc = db
        .customer
        .iter()
        .find(|c| c.c_d_id == 4 && c.c_credit == "BC")
        .unwrap();
    let answer = s
        .execute(&payment(6, 4, Customer::Id(bc.c_id), 250_000), now + 1)
        .unwrap();
    let entry = format!("{} 4 1 6 1 250000;", bc.c_id);
    let c_data: String = entry.chars().chain(bc.c_data.chars()).take(500).collect();
    assert_eq!(answer.body["c_data"], json!(c_data[..200]));
    assert_eq!(answer.body["c_credit"], json!("BC"));

    // Delivery: the oldest order of every district; then Order-Status shows it delivered.
    let answer = s
        .execute(
            &Txn::Delivery(input::Delivery {
                w_id: 1,
                o_carrier_id: 7,
            }),
            now + 2,
        )
        .unwrap();
    let delivered: Vec<Value> = (1..=10).map(|d| json!({"d_id": d, "o_id": 2101})).collect();
    assert_eq!(
        answer.body,
        json!({"w_id": 1, "o_carrier_id": 7, "delivered": delivered, "skipped": []})
    );
    let order = db
        .orders
        .iter()
        .find(|o| o.o_d_id == 1 && o.o_id == 2101)
        .unwrap();
    let status = |customer| {
        Txn::OrderStatus(input::OrderStatus {
            w_id: 1,
            d_id: 1,
            customer,
        })
    };
    let answer = s
        .execute(&status(Customer::Id(order.o_c_id)), now + 3)
        .unwrap();
    assert_eq!(answer.body["o_id"], json!(2101));
    assert_eq!(answer.body["o_carrier_id"], json!(7));
    let lines = answer.body["lines"].as_array().unwrap();
    assert_eq!(lines.len() as i64, order.o_ol_cnt);
    assert!(lines.iter().all(|l| l["ol_delivery_d"] == json!(now + 2)));

    // The customer's newest order is the largest o_id: 3001 for the New-Order above.
    let answer = s
        .execute(
            &Txn::OrderStatus(input::OrderStatus {
                w_id: 1,
                d_id: 3,
                customer: Customer::Id(17),
            }),
            now,
        )
        .unwrap();
    assert_eq!(answer.body["o_id"], json!(3001));
    assert_eq!(answer.body["o_carrier_id"], Value::Null);
    assert_eq!(answer.body["lines"][2]["ol_delivery_d"], Value::Null);

    // A customer without an order: o_id, o_entry_d and o_carrier_id null, no lines.
    let lonely = db
        .orders
        .iter()
        .find(|o| o.o_d_id == 1 && o.o_id == 5)
        .unwrap()
        .o_c_id;
    s.connection()
        .execute(
            "DELETE FROM orders WHERE o_w_id = 1 AND o_d_id = 1 AND o_c_id = ?1",
            [lonely],
        )
        .unwrap();
    let answer = s.execute(&status(Customer::Id(lonely)), now).unwrap();
    let c = db
        .customer
        .iter()
        .find(|c| c.c_d_id == 1 && c.c_id == lonely)
        .unwrap();
    assert_eq!(
        answer.body,
        json!({"w_id": 1, "d_id": 1, "c_id": lonely, "c_first": c.c_first, "c_middle": "OE",
               "c_last": c.c_last, "c_balance": c.c_balance, "o_id": null, "o_entry_d": null,
               "o_carrier_id": null, "lines": []})
    );

    // Stock-Level counts against the rows.
    let answer = s
        .execute(
            &Txn::StockLevel(input::StockLevel {
                w_id: 1,
                d_id: 9,
                threshold: 20,
            }),
            now,
        )
        .unwrap();
    let mut items: Vec<i64> = db
        .order_line
        .iter()
        .filter(|l| l.ol_d_id == 9 && l.ol_o_id >= 2981)
        .map(|l| l.ol_i_id)
        .collect();
    items.sort_unstable();
    items.dedup();
    let low = items.iter().filter(|&&i| stock(i).s_quantity < 20).count();
    assert_eq!(
        answer.body,
        json!({"w_id": 1, "d_id": 9, "threshold": 20, "low_stock": low})
    );

    // The script's errors.
    let before = read_db(&file).unwrap();
    let cases = [
        (
            new_order(1, 1, &[(1, 1, 1)]).with_w(2),
            error(404, "no warehouse 2"),
        ),
        (
            new_order(11, 1, &[(1, 1, 1)]),
            error(404, "no district 11 in warehouse 1"),
        ),
        (
            new_order(1, 3001, &[(1, 1, 1)]),
            error(404, "no customer 3001 in district 1 of warehouse 1"),
        ),
        (
            new_order(1, 1, &[(1, 1, 1), (2, 2, 1)]),
            error(404, "no stock of item 2 in warehouse 2"),
        ),
        (
            new_order(1, 1, &[(1, 1, 1); 16]),
            error(400, "\"i_ids\" must hold 1 to 15 items, not 16"),
        ),
        (
            new_order(1, 1, &[(1, 1, 0)]),
            error(
                400,
                "\"quantities[0]\" must be an integer of at least 1, not 0",
            ),
        ),
        (
            payment(1, 3, Customer::Last("NOBODY".into()), 100),
            error(404, "no customer named NOBODY in district 3 of warehouse 1"),
        ),
        (
            payment(1, 3, Customer::Id(1), 100).with_w(9),
            error(404, "no warehouse 9"),
        ),
        (
            payment(12, 3, Customer::Id(1), 100),
            error(404, "no district 12 in warehouse 1"),
        ),
        (
            payment(1, 3, Customer::Id(0), 100),
            error(404, "no customer 0 in district 3 of warehouse 1"),
        ),
        (
            Txn::Delivery(input::Delivery {
                w_id: 2,
                o_carrier_id: 1,
            }),
            error(404, "no warehouse 2"),
        ),
        (
            status(Customer::Id(-1)),
            error(400, "c_id must be an integer of at least 0, not \"-1\""),
        ),
        (
            Txn::OrderStatus(input::OrderStatus {
                w_id: 3,
                d_id: 1,
                customer: Customer::Last("BARBARBAR".into()),
            }),
            error(
                404,
                "no customer named BARBARBAR in district 1 of warehouse 3",
            ),
        ),
        (
            Txn::StockLevel(input::StockLevel {
                w_id: 1,
                d_id: 11,
                threshold: 10,
            }),
            error(404, "no district 11 in warehouse 1"),
        ),
        (
            Txn::StockLevel(input::StockLevel {
                w_id: 1,
                d_id: 1,
                threshold: -3,
            }),
            error(
                400,
                "threshold must be an integer of at least 0, not \"-3\"",
            ),
        ),
    ];
    for (txn, expected) in cases {
        assert_eq!(s.execute(&txn, now).unwrap(), expected, "{txn:?}");
    }
    drop(s);
    assert_same(&before, &read_db(&file).unwrap());
}

trait WithWarehouse {
    fn with_w(self, w_id: i64) -> Self;
}

impl WithWarehouse for Txn {
    fn with_w(mut self, w: i64) -> Txn {
        match &mut self {
            Txn::NewOrder(t) => t.w_id = w,
            Txn::Payment(t) => t.w_id = w,
            _ => unreachable!(),
        }
        self
    }
}

fn stream(n: usize) -> Vec<(Txn, i64)> {
    let mut terminal = Terminal::new(SEED, 0, 1);
    (0..n)
        .map(|k| (terminal.next(), LOAD_TIME + k as i64 * 1000))
        .collect()
}

#[test]
fn grouped_and_per_transaction_give_the_same_answers_and_tables() {
    let stream = stream(2_000);
    let (dir_a, a) = fresh();
    let (_dir_b, b) = fresh();
    let mut session = Session::open(&a, &settings()).unwrap();
    let by_session: Vec<Answer> = stream
        .iter()
        .map(|(txn, now)| session.execute(txn, *now).unwrap())
        .collect();
    let session_stats = session.stats();
    drop(session);
    // All queued before the first answer: the writer makes batches of whatever has arrived.
    let grouped = Grouped::start(&b, &settings(), 64).unwrap();
    let pending: Vec<Pending> = stream
        .iter()
        .map(|(txn, now)| grouped.submit(txn, *now))
        .collect();
    let by_grouped: Vec<Answer> = pending.into_iter().map(|p| p.wait().unwrap()).collect();
    let stats = grouped.close().unwrap();

    for (k, (x, y)) in by_session.iter().zip(&by_grouped).enumerate() {
        assert_eq!(x, y, "answer {k} ({:?}) differs", stream[k].0.kind());
    }
    let rolled_back = by_session.iter().filter(|a| a.status == 422).count() as u64;
    assert!(by_session
        .iter()
        .all(|a| a.status == 200 || a.status == 422));
    assert!(
        rolled_back > 0,
        "the stream has New-Orders with an unused item"
    );
    assert_eq!(session_stats.transactions, 2_000);
    assert_eq!(
        (session_stats.rollbacks, session_stats.errors),
        (rolled_back, 0)
    );
    assert_eq!(
        (stats.transactions, stats.rollbacks, stats.failed_batches),
        (2_000, rolled_back, 0)
    );
    assert_eq!(
        stats
            .batch_sizes
            .iter()
            .enumerate()
            .map(|(n, c)| n as u64 * c)
            .sum::<u64>(),
        2_000
    );
    eprintln!("grouped: {stats}");

    let (out_a, out_b) = (dir_a.path().join("a"), dir_a.path().join("b"));
    dump(&a, &out_a).unwrap();
    dump(&b, &out_b).unwrap();
    for table in rows::TABLES {
        let name = format!("{table}.jsonl");
        let (x, y) = (
            std::fs::read(out_a.join(&name)).unwrap(),
            std::fs::read(out_b.join(&name)).unwrap(),
        );
        assert!(x == y, "{table} differs between the modes");
    }
    // The run is in the tables: New-Orders committed, payments in the history with their n.
    let db = Db::read_dir(&out_a).unwrap();
    let kinds = |k: Kind| {
        stream
            .iter()
            .zip(&by_session)
            .filter(|((t, _), a)| t.kind() == k && a.status == 200)
            .count()
    };
    assert_eq!(db.orders.len(), 30_000 + kinds(Kind::NewOrder));
    assert_eq!(db.history.len(), 30_000 + kinds(Kind::Payment));
    for h in &db.history {
        let c = &db.customer[((h.k_c_d_id - 1) * 3000 + h.k_c_id - 1) as usize];
        assert!(h.k_n >= 1 && h.k_n <= c.c_payment_cnt, "{h:?}");
    }
}

/// The other settings give the same answers: the default preset (rollback journal, the file
/// converted from WAL on open) per transaction, and the grouped writer holding its file in
/// exclusive locking mode.
#[test]
fn the_settings_do_not_change_the_answers() {
    let stream = stream(300);
    let run_session = |settings: &Settings| {
        let (_dir, file) = fresh();
        let mut session = Session::open(&file, settings).unwrap();
        let answers: Vec<Answer> = stream
            .iter()
            .map(|(t, now)| session.execute(t, *now).unwrap())
            .collect();
        let mode: String = session
            .connection()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        (answers, mode)
    };
    let (tuned, mode) = run_session(&settings());
    assert_eq!(mode, "wal");
    let (default, mode) = run_session(&Settings::default_preset());
    assert_eq!(mode, "delete");
    assert!(tuned == default, "the default preset answers differently");
    let (_dir, file) = fresh();
    let exclusive = Settings {
        locking_mode: Some(LockingMode::Exclusive),
        ..settings()
    };
    let grouped = Grouped::start(&file, &exclusive, 16).unwrap();
    let pending: Vec<Pending> = stream
        .iter()
        .map(|(t, now)| grouped.submit(t, *now))
        .collect();
    let answers: Vec<Answer> = pending.into_iter().map(|p| p.wait().unwrap()).collect();
    grouped.close().unwrap();
    assert!(tuned == answers, "exclusive locking answers differently");
}

/// The in-process cost of each transaction type in the per-transaction mode, tuned settings,
/// on tmpfs. Not a test: `cargo test --release -p pure-bench -- --ignored --nocapture
/// sqlite_costs`.
#[test]
#[ignore]
fn sqlite_costs() {
    let (_dir, file) = fresh();
    println!("database: {}; {}", file.display(), settings().describe());
    let mut session = Session::open(&file, &settings()).unwrap();
    let grouped_file = file.with_extension("grouped.db");
    std::fs::copy(&file, &grouped_file).unwrap();
    let grouped = Grouped::start(&grouped_file, &settings(), 64).unwrap();
    let mut terminal = Terminal::new(SEED, 0, 1);
    let mut now = LOAD_TIME;
    println!(
        "{:<13} {:>6} {:>9} {:>9} {:>9} {:>9} {:>12}",
        "transaction", "count", "mean µs", "p50 µs", "p99 µs", "max µs", "grouped µs"
    );
    for (kind, count) in [
        (Kind::NewOrder, 5_000),
        (Kind::Payment, 5_000),
        (Kind::OrderStatus, 5_000),
        (Kind::Delivery, 300),
        (Kind::StockLevel, 5_000),
    ] {
        let txns: Vec<Txn> = (0..count).map(|_| terminal.draw(kind)).collect();
        let mut micros = Vec::with_capacity(count);
        for txn in &txns {
            now += 1000;
            let started = Instant::now();
            session.execute(txn, now).unwrap();
            micros.push(started.elapsed().as_secs_f64() * 1e6);
        }
        let started = Instant::now();
        for txn in &txns {
            now += 1000;
            grouped.execute(txn, now).unwrap();
        }
        let grouped_mean = started.elapsed().as_secs_f64() * 1e6 / count as f64;
        let mean = micros.iter().sum::<f64>() / count as f64;
        micros.sort_by(f64::total_cmp);
        let at = |p: f64| micros[((p * count as f64).ceil() as usize).clamp(1, count) - 1];
        println!(
            "{:<13} {count:>6} {mean:>9.1} {:>9.1} {:>9.1} {:>9.1} {grouped_mean:>12.1}",
            kind.name(),
            at(0.5),
            at(0.99),
            micros[count - 1]
        );
    }
    println!("{:?}", session.stats());
    println!("grouped: {}", grouped.close().unwrap());
}

/// A load to measure (time, peak RSS): `TPCC_W=4 TPCC_DB=/dev/shm/w4.db /usr/bin/time -v
/// <test binary> --ignored --exact tpcc::sqlite::tests::sqlite_load --nocapture`.
#[test]
#[ignore]
fn sqlite_load() {
    let w: i64 = std::env::var("TPCC_W").map_or(1, |w| w.parse().expect("TPCC_W: warehouses"));
    let file = PathBuf::from(std::env::var("TPCC_DB").expect("TPCC_DB: a new database file"));
    let report = load(&file, &settings(), SEED, w, true).unwrap();
    println!("W={w}: {report}");
}
