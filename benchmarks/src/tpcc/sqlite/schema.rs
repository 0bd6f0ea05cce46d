//! The nine tables in SQLite: the schema (below), the loader, and the dump that writes
//! the rows as `pure-serve export` writes the app's.
//!
//! Schema choices:
//! - Columns are the app's fields under the same names; INTEGER for ids, counts, money (cents),
//!   rates (1/10,000) and timestamps, TEXT for text, NOT NULL everywhere but `o_carrier_id` and
//!   `ol_delivery_d` (null in the app too). No REFERENCES clauses (and foreign_keys=OFF): the
//!   app enforces none.
//! - WAREHOUSE and ITEM have one integer key: `INTEGER PRIMARY KEY`, the rowid itself.
//! - The composite-key tables (DISTRICT, CUSTOMER, ORDERS, NEW_ORDER, ORDER_LINE, STOCK) are
//!   `WITHOUT ROWID`, one b-tree in key order with no separate key index, as long as their
//!   largest row fits in a cell of an index b-tree page. SQLite keeps at most
//!   `(U - 12) * 64 / 255 - 23` bytes of a WITHOUT ROWID row on its page (U: the page size)
//!   and spills the rest into overflow pages: 1,002 bytes at 4 KiB pages, 487 at 2 KiB, 230 at
//!   1 KiB. CUSTOMER rows reach about 700 bytes (c_data alone up to 500) and STOCK rows about
//!   330, so below 4 KiB pages CUSTOMER, and below 2 KiB STOCK too, become ordinary rowid
//!   tables whose composite primary key is a separate unique index (every access is then two
//!   b-tree descents, but no update writes an overflow page). [`Layout`] makes the choice
//!   and the load report names it.
//! - HISTORY has no key (as in the specification): a rowid table. The app's key (h_c_w_id,
//!   h_c_d_id, h_c_id, n) is derived when dumping, n = ROW_NUMBER() over the customer's rows
//!   in rowid (= insertion = payment) order, which is c_payment_cnt at the time of the payment.
//! - Two secondary indexes, created after the data: `customer_name` on customer(c_w_id,
//!   c_d_id, c_last, c_first, c_id) for the by-name lookups, covering, its order the
//!   (c_first, c_id) order of the midpoint rule (in a WITHOUT ROWID table an index carries the
//!   primary key anyway, so the trailing c_id only matters to the rowid layout), and
//!   `orders_customer` on orders(o_w_id, o_d_id, o_c_id, o_id) for a customer's newest order.
//!   They are the app's declared indexes customer.by_last_name and orders.by_customer.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rusqlite::{Connection, OpenFlags, Statement};
use serde::Serialize;

use super::super::population;
use super::super::rows::{self, TableRow};
use crate::harness::sqlite::{JournalMode, Settings};

/// Which composite-key tables are WITHOUT ROWID at a page size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub page_size: u32,
    pub customer_without_rowid: bool,
    pub stock_without_rowid: bool,
}

/// The largest record (header and body) a CUSTOMER or STOCK row can have: text at its
/// longest (c_data 500, the rest by the population's rules) and every integer at 8 bytes.
const CUSTOMER_RECORD_MAX: u32 = 23 + 10 * 8 + 622;
const STOCK_RECORD_MAX: u32 = 18 + 6 * 8 + 290;
/// DISTRICT (~120 bytes), ORDERS, NEW_ORDER and ORDER_LINE (< 120 bytes) fit from 1 KiB up.
const SMALL_RECORD_MAX: u32 = 160;

/// The most bytes of a row SQLite keeps on an index b-tree page (a WITHOUT ROWID table's).
pub fn index_max_local(page_size: u32) -> u32 {
    (page_size - 12) * 64 / 255 - 23
}

impl Layout {
    pub fn for_page_size(page_size: u32) -> Layout {
        let fits = |max| max <= index_max_local(page_size);
        Layout {
            page_size,
            customer_without_rowid: fits(CUSTOMER_RECORD_MAX),
            stock_without_rowid: fits(STOCK_RECORD_MAX),
        }
    }

    /// The tables that are WITHOUT ROWID.
    pub fn without_rowid(&self) -> Vec<&'static str> {
        let small = SMALL_RECORD_MAX <= index_max_local(self.page_size);
        let mut names = Vec::new();
        for (name, yes) in [
            ("district", small),
            ("customer", self.customer_without_rowid),
            ("orders", small),
            ("new_order", small),
            ("order_line", small),
            ("stock", self.stock_without_rowid),
        ] {
            if yes {
                names.push(name);
            }
        }
        names
    }

    /// CREATE TABLE for the nine tables.
    pub fn create_tables(&self) -> String {
        let without = self.without_rowid();
        let suffix = |table: &str| {
            if without.contains(&table) {
                " WITHOUT ROWID"
            } else {
                ""
            }
        };
        format!(
            "CREATE TABLE warehouse (
                w_id INTEGER PRIMARY KEY,
                w_name TEXT NOT NULL, w_street_1 TEXT NOT NULL, w_street_2 TEXT NOT NULL,
                w_city TEXT NOT NULL, w_state TEXT NOT NULL, w_zip TEXT NOT NULL,
                w_tax INTEGER NOT NULL, w_ytd INTEGER NOT NULL);
            CREATE TABLE district (
                d_w_id INTEGER NOT NULL, d_id INTEGER NOT NULL,
                d_name TEXT NOT NULL, d_street_1 TEXT NOT NULL, d_street_2 TEXT NOT NULL,
                d_city TEXT NOT NULL, d_state TEXT NOT NULL, d_zip TEXT NOT NULL,
                d_tax INTEGER NOT NULL, d_ytd INTEGER NOT NULL, d_next_o_id INTEGER NOT NULL,
                PRIMARY KEY (d_w_id, d_id)){};
            CREATE TABLE customer (
                c_w_id INTEGER NOT NULL, c_d_id INTEGER NOT NULL, c_id INTEGER NOT NULL,
                c_first TEXT NOT NULL, c_middle TEXT NOT NULL, c_last TEXT NOT NULL,
                c_street_1 TEXT NOT NULL, c_street_2 TEXT NOT NULL, c_city TEXT NOT NULL,
                c_state TEXT NOT NULL, c_zip TEXT NOT NULL, c_phone TEXT NOT NULL,
                c_since INTEGER NOT NULL, c_credit TEXT NOT NULL, c_credit_lim INTEGER NOT NULL,
                c_discount INTEGER NOT NULL, c_balance INTEGER NOT NULL,
                c_ytd_payment INTEGER NOT NULL, c_payment_cnt INTEGER NOT NULL,
                c_delivery_cnt INTEGER NOT NULL, c_data TEXT NOT NULL,
                PRIMARY KEY (c_w_id, c_d_id, c_id)){};
            CREATE TABLE history (
                h_c_id INTEGER NOT NULL, h_c_d_id INTEGER NOT NULL, h_c_w_id INTEGER NOT NULL,
                h_d_id INTEGER NOT NULL, h_w_id INTEGER NOT NULL, h_date INTEGER NOT NULL,
                h_amount INTEGER NOT NULL, h_data TEXT NOT NULL);
            CREATE TABLE orders (
                o_w_id INTEGER NOT NULL, o_d_id INTEGER NOT NULL, o_id INTEGER NOT NULL,
                o_c_id INTEGER NOT NULL, o_entry_d INTEGER NOT NULL, o_carrier_id INTEGER,
                o_ol_cnt INTEGER NOT NULL, o_all_local INTEGER NOT NULL,
                PRIMARY KEY (o_w_id, o_d_id, o_id)){};
            CREATE TABLE new_order (
                no_w_id INTEGER NOT NULL, no_d_id INTEGER NOT NULL, no_o_id INTEGER NOT NULL,
                PRIMARY KEY (no_w_id, no_d_id, no_o_id)){};
            CREATE TABLE order_line (
                ol_w_id INTEGER NOT NULL, ol_d_id INTEGER NOT NULL, ol_o_id INTEGER NOT NULL,
                ol_number INTEGER NOT NULL, ol_i_id INTEGER NOT NULL,
                ol_supply_w_id INTEGER NOT NULL, ol_delivery_d INTEGER,
                ol_quantity INTEGER NOT NULL, ol_amount INTEGER NOT NULL,
                ol_dist_info TEXT NOT NULL,
                PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)){};
            CREATE TABLE stock (
                s_w_id INTEGER NOT NULL, s_i_id INTEGER NOT NULL, s_quantity INTEGER NOT NULL,
                s_dist_01 TEXT NOT NULL, s_dist_02 TEXT NOT NULL, s_dist_03 TEXT NOT NULL,
                s_dist_04 TEXT NOT NULL, s_dist_05 TEXT NOT NULL, s_dist_06 TEXT NOT NULL,
                s_dist_07 TEXT NOT NULL, s_dist_08 TEXT NOT NULL, s_dist_09 TEXT NOT NULL,
                s_dist_10 TEXT NOT NULL, s_ytd INTEGER NOT NULL, s_order_cnt INTEGER NOT NULL,
                s_remote_cnt INTEGER NOT NULL, s_data TEXT NOT NULL,
                PRIMARY KEY (s_w_id, s_i_id)){};
            CREATE TABLE item (
                i_id INTEGER PRIMARY KEY, i_im_id INTEGER NOT NULL, i_name TEXT NOT NULL,
                i_price INTEGER NOT NULL, i_data TEXT NOT NULL);",
            suffix("district"),
            suffix("customer"),
            suffix("orders"),
            suffix("new_order"),
            suffix("order_line"),
            suffix("stock"),
        )
    }
}

/// The secondary indexes (created after the data).
pub const CREATE_INDEXES: &str = "
    CREATE INDEX customer_name ON customer (c_w_id, c_d_id, c_last, c_first, c_id);
    CREATE INDEX orders_customer ON orders (o_w_id, o_d_id, o_c_id, o_id);";

/// A row type's SQL: how the loader inserts it and the dump reads it back, in key order.
pub(super) trait SqlRow: TableRow {
    fn insert_sql() -> String;
    fn select_sql() -> String;
    fn bind(&self, stmt: &mut Statement<'_>) -> rusqlite::Result<usize>;
    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self>;
}

macro_rules! sql_row {
    ($t:ident, [$($k:ident),+], [$($f:ident),*]) => {
        impl SqlRow for $t {
            fn insert_sql() -> String {
                let columns: &[&str] = &[$(stringify!($k)),+ $(, stringify!($f))*];
                let marks: Vec<String> = (1..=columns.len()).map(|i| format!("?{i}")).collect();
                format!(
                    "INSERT INTO {} ({}) VALUES ({})",
                    <$t as TableRow>::TABLE,
                    columns.join(", "),
                    marks.join(", ")
                )
            }

            fn select_sql() -> String {
                let key: &[&str] = &[$(stringify!($k)),+];
                let columns: &[&str] = &[$(stringify!($k)),+ $(, stringify!($f))*];
                format!(
                    "SELECT {} FROM {} ORDER BY {}",
                    columns.join(", "),
                    <$t as TableRow>::TABLE,
                    key.join(", ")
                )
            }

            fn bind(&self, stmt: &mut Statement<'_>) -> rusqlite::Result<usize> {
                stmt.execute(rusqlite::params![$(self.$k),+ $(, self.$f)*])
            }

            fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
                let mut column = 0usize..;
                Ok($t {
                    $($k: row.get(column.next().expect("a column"))?,)+
                    $($f: row.get(column.next().expect("a column"))?,)*
                })
            }
        }
    };
}

use rows::{Customer, District, History, Item, NewOrder, Order, OrderLine, Stock, Warehouse};

sql_row!(
    Warehouse,
    [w_id],
    [w_name, w_street_1, w_street_2, w_city, w_state, w_zip, w_tax, w_ytd]
);
sql_row!(
    District,
    [d_w_id, d_id],
    [
        d_name,
        d_street_1,
        d_street_2,
        d_city,
        d_state,
        d_zip,
        d_tax,
        d_ytd,
        d_next_o_id
    ]
);
sql_row!(
    Customer,
    [c_w_id, c_d_id, c_id],
    [
        c_first,
        c_middle,
        c_last,
        c_street_1,
        c_street_2,
        c_city,
        c_state,
        c_zip,
        c_phone,
        c_since,
        c_credit,
        c_credit_lim,
        c_discount,
        c_balance,
        c_ytd_payment,
        c_payment_cnt,
        c_delivery_cnt,
        c_data
    ]
);
sql_row!(
    Order,
    [o_w_id, o_d_id, o_id],
    [o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local]
);
sql_row!(NewOrder, [no_w_id, no_d_id, no_o_id], []);
sql_row!(
    OrderLine,
    [ol_w_id, ol_d_id, ol_o_id, ol_number],
    [
        ol_i_id,
        ol_supply_w_id,
        ol_delivery_d,
        ol_quantity,
        ol_amount,
        ol_dist_info
    ]
);
sql_row!(
    Stock,
    [s_w_id, s_i_id],
    [
        s_quantity,
        s_dist_01,
        s_dist_02,
        s_dist_03,
        s_dist_04,
        s_dist_05,
        s_dist_06,
        s_dist_07,
        s_dist_08,
        s_dist_09,
        s_dist_10,
        s_ytd,
        s_order_cnt,
        s_remote_cnt,
        s_data
    ]
);
sql_row!(Item, [i_id], [i_im_id, i_name, i_price, i_data]);

impl SqlRow for History {
    fn insert_sql() -> String {
        "INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, \
         h_data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
            .into()
    }

    /// The app's key (customer, n): n counts the customer's rows in insertion order.
    fn select_sql() -> String {
        "SELECT h_c_w_id, h_c_d_id, h_c_id, ROW_NUMBER() OVER (PARTITION BY h_c_w_id, h_c_d_id, \
         h_c_id ORDER BY rowid) AS n, h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, \
         h_amount, h_data FROM history ORDER BY h_c_w_id, h_c_d_id, h_c_id, n"
            .into()
    }

    fn bind(&self, stmt: &mut Statement<'_>) -> rusqlite::Result<usize> {
        stmt.execute(rusqlite::params![
            self.h_c_id,
            self.h_c_d_id,
            self.h_c_w_id,
            self.h_d_id,
            self.h_w_id,
            self.h_date,
            self.h_amount,
            self.h_data
        ])
    }

    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(History {
            k_c_w_id: row.get(0)?,
            k_c_d_id: row.get(1)?,
            k_c_id: row.get(2)?,
            k_n: row.get(3)?,
            h_c_id: row.get(4)?,
            h_c_d_id: row.get(5)?,
            h_c_w_id: row.get(6)?,
            h_d_id: row.get(7)?,
            h_w_id: row.get(8)?,
            h_date: row.get(9)?,
            h_amount: row.get(10)?,
            h_data: row.get(11)?,
        })
    }
}

/// What a load did.
#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    /// Rows per table, in the order of [`rows::TABLES`].
    pub rows: [u64; 9],
    /// Wall-clock seconds of the whole load, and of its phases: rows (generating and inserting),
    /// indexes, analyze, finish (journal mode, checkpoint, close, sync).
    pub seconds: f64,
    pub phases: Vec<(&'static str, f64)>,
    pub page_size: u32,
    /// The composite-key tables stored WITHOUT ROWID (the others are rowid tables).
    pub without_rowid: Vec<&'static str>,
    /// The database file's size after the load.
    pub file_bytes: u64,
    /// The settings the file was left in ([`Settings::describe`]).
    pub settings: String,
}

impl LoadReport {
    pub fn total_rows(&self) -> u64 {
        self.rows.iter().sum()
    }
}

impl std::fmt::Display for LoadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total = self.total_rows();
        writeln!(
            f,
            "loaded {total} rows in {:.1} s ({:.0} rows/s), {} bytes, page size {}",
            self.seconds,
            total as f64 / self.seconds.max(1e-9),
            self.file_bytes,
            self.page_size
        )?;
        for (table, rows) in rows::TABLES.iter().zip(self.rows) {
            writeln!(f, "  {table:<12} {rows:>10}")?;
        }
        let phases: Vec<String> = self
            .phases
            .iter()
            .map(|(p, s)| format!("{p} {s:.1} s"))
            .collect();
        writeln!(f, "  phases: {}", phases.join(", "))?;
        writeln!(f, "  settings: {}", self.settings)?;
        write!(f, "  WITHOUT ROWID: {}", self.without_rowid.join(", "))
    }
}

/// Rows per load transaction (synchronous=OFF, so a commit costs no sync).
const LOAD_BATCH: u64 = 200_000;

struct Inserters<'c> {
    statements: Vec<Statement<'c>>,
}

impl<'c> Inserters<'c> {
    fn new(conn: &'c Connection) -> Result<Inserters<'c>> {
        let sql = [
            Warehouse::insert_sql(),
            District::insert_sql(),
            Customer::insert_sql(),
            History::insert_sql(),
            Order::insert_sql(),
            NewOrder::insert_sql(),
            OrderLine::insert_sql(),
            Stock::insert_sql(),
            Item::insert_sql(),
        ];
        let statements = sql
            .iter()
            .map(|s| conn.prepare(s))
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(Inserters { statements })
    }

    /// Inserts `row`, returning its table's index in [`rows::TABLES`].
    fn insert(&mut self, row: &rows::Row) -> rusqlite::Result<usize> {
        let s = &mut self.statements;
        let table = match row {
            rows::Row::Warehouse(r) => r.bind(&mut s[0]).map(|_| 0),
            rows::Row::District(r) => r.bind(&mut s[1]).map(|_| 1),
            rows::Row::Customer(r) => r.bind(&mut s[2]).map(|_| 2),
            rows::Row::History(r) => r.bind(&mut s[3]).map(|_| 3),
            rows::Row::Order(r) => r.bind(&mut s[4]).map(|_| 4),
            rows::Row::NewOrder(r) => r.bind(&mut s[5]).map(|_| 5),
            rows::Row::OrderLine(r) => r.bind(&mut s[6]).map(|_| 6),
            rows::Row::Stock(r) => r.bind(&mut s[7]).map(|_| 7),
            rows::Row::Item(r) => r.bind(&mut s[8]).map(|_| 8),
        }?;
        Ok(table)
    }
}

/// Creates the database `path` (refusing one that exists) with the population of `seed` and
/// `warehouses`, in the layout of `settings.page_size`, and leaves it in `settings`'
/// journal mode. `progress`: a bar on stderr when it is a terminal.
pub fn load(
    path: &Path,
    settings: &Settings,
    seed: u64,
    warehouses: i64,
    progress: bool,
) -> Result<LoadReport> {
    let start = Instant::now();
    let mut phases = Vec::new();
    for leftover in [
        path.to_path_buf(),
        side_file(path, "-wal"),
        side_file(path, "-journal"),
    ] {
        if leftover.exists() {
            bail!(
                "{} exists: the loader creates a new database (remove it first)",
                leftover.display()
            );
        }
    }
    // Creating the file first refuses one that appears meanwhile.
    File::options()
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| format!("create {}", path.display()))?;
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("open {}", path.display()))?;
    // page_size first: it is fixed by the first table.
    conn.pragma_update(None, "page_size", settings.page_size)?;
    conn.pragma_update(None, "foreign_keys", "OFF")?;
    conn.pragma_update(None, "journal_mode", "MEMORY")?;
    conn.pragma_update(None, "synchronous", "OFF")?;
    conn.pragma_update(None, "cache_size", -64 * 1024)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    let layout = Layout::for_page_size(settings.page_size);
    conn.execute_batch(&layout.create_tables())?;
    let page_size: u32 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    if page_size != settings.page_size {
        bail!(
            "page_size {} was asked, SQLite made {page_size}",
            settings.page_size
        );
    }

    let expected: u64 = population::load_counts(warehouses).iter().sum();
    let bar = if progress && std::io::stderr().is_terminal() {
        ProgressBar::with_draw_target(Some(expected), ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{msg:>8} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} rows, {per_sec}, eta {eta}",
        )
        .expect("a progress template"),
    );
    bar.set_message("rows");

    let mut counts = [0u64; 9];
    {
        let mut inserters = Inserters::new(&conn)?;
        let mut failed: Option<rusqlite::Error> = None;
        let (mut done, mut uncommitted) = (0u64, 0u64);
        conn.execute_batch("BEGIN")?;
        population::generate(seed, warehouses, &mut |row| {
            if failed.is_some() {
                return;
            }
            match inserters.insert(&row) {
                Ok(table) => counts[table] += 1,
                Err(e) => {
                    failed = Some(e);
                    return;
                }
            }
            done += 1;
            uncommitted += 1;
            if uncommitted == LOAD_BATCH {
                uncommitted = 0;
                if let Err(e) = conn.execute_batch("COMMIT; BEGIN") {
                    failed = Some(e);
                }
            }
            if done & 4095 == 0 {
                bar.set_position(done);
            }
        });
        if let Some(e) = failed {
            return Err(e).context("insert the population");
        }
        conn.execute_batch("COMMIT")?;
        bar.set_length(done);
        bar.set_position(done);
    }
    phases.push(("rows", start.elapsed().as_secs_f64()));

    let mark = Instant::now();
    bar.set_message("indexes");
    conn.execute_batch(CREATE_INDEXES)?;
    phases.push(("indexes", mark.elapsed().as_secs_f64()));
    let mark = Instant::now();
    bar.set_message("analyze");
    conn.execute_batch("ANALYZE")?;
    phases.push(("analyze", mark.elapsed().as_secs_f64()));

    let mark = Instant::now();
    bar.set_message("finish");
    let asked = settings.journal_mode.pragma();
    let mode: String = conn.pragma_update_and_check(None, "journal_mode", asked, |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case(asked) {
        bail!("journal_mode={asked} was asked, the database is in {mode} mode");
    }
    conn.pragma_update(None, "synchronous", settings.synchronous.pragma())?;
    if settings.journal_mode == JournalMode::Wal {
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")?;
    }
    conn.close().map_err(|(_, e)| e).context("close")?;
    // The load ran with synchronous=OFF: make the file durable before anyone relies on it.
    File::open(path)?.sync_all()?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        File::open(dir)?.sync_all()?;
    }
    phases.push(("finish", mark.elapsed().as_secs_f64()));
    bar.finish_and_clear();

    Ok(LoadReport {
        rows: counts,
        seconds: start.elapsed().as_secs_f64(),
        phases,
        page_size,
        without_rowid: layout.without_rowid(),
        file_bytes: std::fs::metadata(path)?.len(),
        settings: settings.describe(),
    })
}

fn side_file(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(suffix);
    name.into()
}

/// Opens an existing database for reading everything (dump, checks): read-write so that a WAL
/// database needs no -shm file already present, but `query_only`.
pub(super) fn open_for_reading(path: &Path) -> Result<Connection> {
    if !path.exists() {
        bail!("no database {}", path.display());
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("open {}", path.display()))?;
    conn.busy_timeout(crate::harness::sqlite::BUSY_TIMEOUT)?;
    conn.pragma_update(None, "query_only", "ON")?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    conn.pragma_update(None, "cache_size", -64 * 1024)?;
    Ok(conn)
}

/// Calls `f` with every row of `T`'s table, in key order.
fn each<T: SqlRow>(conn: &Connection, mut f: impl FnMut(T) -> Result<()>) -> Result<()> {
    let mut stmt = conn.prepare(&T::select_sql())?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        f(T::read(row).with_context(|| format!("read a row of {}", T::TABLE))?)?;
    }
    Ok(())
}

fn dump_table<T: SqlRow>(conn: &Connection, out_dir: &Path) -> Result<()> {
    let path = out_dir.join(format!("{}.jsonl", T::TABLE));
    let file = File::create(&path).with_context(|| format!("create {}", path.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    each::<T>(conn, |row| {
        out.write_all(row.line().as_bytes())?;
        out.write_all(b"\n")?;
        Ok(())
    })?;
    out.flush()
        .with_context(|| format!("write {}", path.display()))?;
    Ok(())
}

/// Writes `out_dir/<table>.jsonl` for the nine tables (creating `out_dir`): rows in key order
/// (history by (h_c_w_id, h_c_d_id, h_c_id, n)), each line the row type's
/// [`TableRow::line`], byte for byte what `pure-serve export` writes for the app. One read
/// transaction: a consistent snapshot.
pub fn dump(path: &Path, out_dir: &Path) -> Result<()> {
    std::fs::create_dir_all(out_dir).with_context(|| format!("create {}", out_dir.display()))?;
    let conn = open_for_reading(path)?;
    conn.execute_batch("BEGIN")?;
    dump_table::<Warehouse>(&conn, out_dir)?;
    dump_table::<District>(&conn, out_dir)?;
    dump_table::<Customer>(&conn, out_dir)?;
    dump_table::<History>(&conn, out_dir)?;
    dump_table::<Order>(&conn, out_dir)?;
    dump_table::<NewOrder>(&conn, out_dir)?;
    dump_table::<OrderLine>(&conn, out_dir)?;
    dump_table::<Stock>(&conn, out_dir)?;
    dump_table::<Item>(&conn, out_dir)?;
    conn.execute_batch("COMMIT")?;
    Ok(())
}

fn read_table<T: SqlRow>(conn: &Connection) -> Result<Vec<T>> {
    let mut rows = Vec::new();
    each::<T>(conn, |row| {
        rows.push(row);
        Ok(())
    })?;
    Ok(rows)
}

/// The nine tables of `path` in memory, each in key order (the rows [`dump`] writes).
#[allow(dead_code)] // API the harness does not call yet (a binary crate flags it)
pub fn read_db(path: &Path) -> Result<rows::Db> {
    let conn = open_for_reading(path)?;
    conn.execute_batch("BEGIN")?;
    let db = rows::Db {
        warehouse: read_table(&conn)?,
        district: read_table(&conn)?,
        customer: read_table(&conn)?,
        history: read_table(&conn)?,
        orders: read_table(&conn)?,
        new_order: read_table(&conn)?,
        order_line: read_table(&conn)?,
        stock: read_table(&conn)?,
        item: read_table(&conn)?,
    };
    conn.execute_batch("COMMIT")?;
    Ok(db)
}
