//! The rows of the TPC-C tables as Rust values: the one representation that the population
//! generator writes, both engines are loaded from and dumped into, and the consistency checks
//! read. A row's line is the JSON Lines form that `pure-serve import` reads and `pure-serve
//! export` writes: `{"key": <part or [parts]>, "row": {<every other column, in order>}}`.
//!
//! Units (the same in both engines): money in integer cents; w_tax, d_tax and c_discount in
//! 1/10,000; timestamps in microseconds (any integer the driver chooses); null as `None`.

use anyhow::{anyhow, Context, Result};
use serde_json::Value;

/// What every table's row type can do.
pub trait TableRow: Sized {
    const TABLE: &'static str;
    /// The JSON line: `{"key":...,"row":{...}}`, compact, fields in declared order.
    fn line(&self) -> String;
    fn from_line(line: &Value) -> Result<Self>;
}

fn part<T: serde::de::DeserializeOwned>(value: &Value, what: &str) -> Result<T> {
    serde_json::from_value(value.clone()).with_context(|| format!("{what}: {value}"))
}

macro_rules! table {
    ($name:ident, $table:literal, key [$($k:ident : $kt:ty),+], row [$($f:ident : $t:ty),*]) => {
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct $name {
            $(pub $k: $kt,)+
            $(pub $f: $t,)*
        }

        impl TableRow for $name {
            const TABLE: &'static str = $table;

            fn line(&self) -> String {
                let keys: Vec<String> =
                    vec![$(serde_json::to_string(&self.$k).expect("a key part")),+];
                let mut out = String::with_capacity(128);
                out.push_str("{\"key\":");
                if keys.len() == 1 {
                    out.push_str(&keys[0]);
                } else {
                    out.push('[');
                    out.push_str(&keys.join(","));
                    out.push(']');
                }
                out.push_str(",\"row\":{");
                let mut _first = true;
                $(
                    if !_first { out.push(','); }
                    _first = false;
                    out.push_str(concat!("\"", stringify!($f), "\":"));
                    out.push_str(&serde_json::to_string(&self.$f).expect("a field"));
                )*
                out.push_str("}}");
                out
            }

            fn from_line(line: &Value) -> Result<Self> {
                let key = line.get("key").ok_or_else(|| anyhow!("no \"key\" in {line}"))?;
                let parts: Vec<Value> = match key {
                    Value::Array(parts) => parts.clone(),
                    one => vec![one.clone()],
                };
                let mut parts = parts.into_iter();
                $(
                    let $k: $kt = part(
                        &parts.next().ok_or_else(|| anyhow!("key {key} is too short"))?,
                        stringify!($k),
                    )?;
                )+
                if parts.next().is_some() {
                    return Err(anyhow!("key {key} is too long for {}", $table));
                }
                let _row = line.get("row").ok_or_else(|| anyhow!("no \"row\" in {line}"))?;
                $(
                    let $f: $t = part(_row.get(stringify!($f)).unwrap_or(&Value::Null), stringify!($f))?;
                )*
                Ok($name { $($k,)+ $($f,)* })
            }
        }
    };
}

table!(Warehouse, "warehouse", key [w_id: i64], row [
    w_name: String, w_street_1: String, w_street_2: String, w_city: String, w_state: String,
    w_zip: String, w_tax: i64, w_ytd: i64
]);

table!(District, "district", key [d_w_id: i64, d_id: i64], row [
    d_name: String, d_street_1: String, d_street_2: String, d_city: String, d_state: String,
    d_zip: String, d_tax: i64, d_ytd: i64, d_next_o_id: i64
]);

table!(Customer, "customer", key [c_w_id: i64, c_d_id: i64, c_id: i64], row [
    c_first: String, c_middle: String, c_last: String, c_street_1: String, c_street_2: String,
    c_city: String, c_state: String, c_zip: String, c_phone: String, c_since: i64,
    c_credit: String, c_credit_lim: i64, c_discount: i64, c_balance: i64, c_ytd_payment: i64,
    c_payment_cnt: i64, c_delivery_cnt: i64, c_data: String
]);

// The key is (h_c_w_id, h_c_d_id, h_c_id, n), n the customer's payment count with this payment.
table!(History, "history", key [k_c_w_id: i64, k_c_d_id: i64, k_c_id: i64, k_n: i64], row [
    h_c_id: i64, h_c_d_id: i64, h_c_w_id: i64, h_d_id: i64, h_w_id: i64, h_date: i64,
    h_amount: i64, h_data: String
]);

table!(Order, "orders", key [o_w_id: i64, o_d_id: i64, o_id: i64], row [
    o_c_id: i64, o_entry_d: i64, o_carrier_id: Option<i64>, o_ol_cnt: i64, o_all_local: i64
]);

table!(NewOrder, "new_order", key [no_w_id: i64, no_d_id: i64, no_o_id: i64], row []);

table!(OrderLine, "order_line", key [ol_w_id: i64, ol_d_id: i64, ol_o_id: i64, ol_number: i64], row [
    ol_i_id: i64, ol_supply_w_id: i64, ol_delivery_d: Option<i64>, ol_quantity: i64,
    ol_amount: i64, ol_dist_info: String
]);

table!(Stock, "stock", key [s_w_id: i64, s_i_id: i64], row [
    s_quantity: i64, s_dist_01: String, s_dist_02: String, s_dist_03: String,
    s_dist_04: String, s_dist_05: String, s_dist_06: String, s_dist_07: String,
    s_dist_08: String, s_dist_09: String, s_dist_10: String, s_ytd: i64, s_order_cnt: i64,
    s_remote_cnt: i64, s_data: String
]);

table!(Item, "item", key [i_id: i64], row [
    i_im_id: i64, i_name: String, i_price: i64, i_data: String
]);

impl Stock {
    /// S_DIST_xx for district `d`; `None` outside 1..=10.
    pub fn dist(&self, d: i64) -> Option<&str> {
        Some(match d {
            1 => &self.s_dist_01,
            2 => &self.s_dist_02,
            3 => &self.s_dist_03,
            4 => &self.s_dist_04,
            5 => &self.s_dist_05,
            6 => &self.s_dist_06,
            7 => &self.s_dist_07,
            8 => &self.s_dist_08,
            9 => &self.s_dist_09,
            10 => &self.s_dist_10,
            _ => return None,
        })
    }
}

/// One row of any table, as the population generator produces them.
#[derive(Clone, Debug)]
pub enum Row {
    Warehouse(Warehouse),
    District(District),
    Customer(Customer),
    History(History),
    Order(Order),
    NewOrder(NewOrder),
    OrderLine(OrderLine),
    Stock(Stock),
    Item(Item),
}

impl Row {
    pub fn table(&self) -> &'static str {
        match self {
            Row::Warehouse(_) => Warehouse::TABLE,
            Row::District(_) => District::TABLE,
            Row::Customer(_) => Customer::TABLE,
            Row::History(_) => History::TABLE,
            Row::Order(_) => Order::TABLE,
            Row::NewOrder(_) => NewOrder::TABLE,
            Row::OrderLine(_) => OrderLine::TABLE,
            Row::Stock(_) => Stock::TABLE,
            Row::Item(_) => Item::TABLE,
        }
    }

    pub fn line(&self) -> String {
        match self {
            Row::Warehouse(r) => r.line(),
            Row::District(r) => r.line(),
            Row::Customer(r) => r.line(),
            Row::History(r) => r.line(),
            Row::Order(r) => r.line(),
            Row::NewOrder(r) => r.line(),
            Row::OrderLine(r) => r.line(),
            Row::Stock(r) => r.line(),
            Row::Item(r) => r.line(),
        }
    }
}

/// The nine tables of the specification, in the order of its clause 1.3.
pub const TABLES: [&str; 9] = [
    Warehouse::TABLE,
    District::TABLE,
    Customer::TABLE,
    History::TABLE,
    Order::TABLE,
    NewOrder::TABLE,
    OrderLine::TABLE,
    Stock::TABLE,
    Item::TABLE,
];

/// A whole database in memory, each table in key order: what the consistency checks read.
#[derive(Default, Debug)]
pub struct Db {
    pub warehouse: Vec<Warehouse>,
    pub district: Vec<District>,
    pub customer: Vec<Customer>,
    pub history: Vec<History>,
    pub orders: Vec<Order>,
    pub new_order: Vec<NewOrder>,
    pub order_line: Vec<OrderLine>,
    pub stock: Vec<Stock>,
    pub item: Vec<Item>,
}

impl Db {
    /// Reads the nine `<table>.jsonl` files of `dir` (as `pure-serve export` writes them).
    pub fn read_dir(dir: &std::path::Path) -> Result<Db> {
        Ok(Db {
            warehouse: read_table(dir)?,
            district: read_table(dir)?,
            customer: read_table(dir)?,
            history: read_table(dir)?,
            orders: read_table(dir)?,
            new_order: read_table(dir)?,
            order_line: read_table(dir)?,
            stock: read_table(dir)?,
            item: read_table(dir)?,
        })
    }

    #[cfg(test)]
    pub fn push(&mut self, row: Row) {
        match row {
            Row::Warehouse(r) => self.warehouse.push(r),
            Row::District(r) => self.district.push(r),
            Row::Customer(r) => self.customer.push(r),
            Row::History(r) => self.history.push(r),
            Row::Order(r) => self.orders.push(r),
            Row::NewOrder(r) => self.new_order.push(r),
            Row::OrderLine(r) => self.order_line.push(r),
            Row::Stock(r) => self.stock.push(r),
            Row::Item(r) => self.item.push(r),
        }
    }

    /// Rows per table, in the order of [`TABLES`].
    #[cfg(test)]
    pub fn counts(&self) -> [usize; 9] {
        [
            self.warehouse.len(),
            self.district.len(),
            self.customer.len(),
            self.history.len(),
            self.orders.len(),
            self.new_order.len(),
            self.order_line.len(),
            self.stock.len(),
            self.item.len(),
        ]
    }
}

/// Reads `dir/<table>.jsonl` into rows.
pub fn read_table<T: TableRow>(dir: &std::path::Path) -> Result<Vec<T>> {
    use std::io::BufRead;
    let path = dir.join(format!("{}.jsonl", T::TABLE));
    let file = std::fs::File::open(&path).with_context(|| format!("open {}", path.display()))?;
    let mut rows = Vec::new();
    for (n, line) in std::io::BufReader::with_capacity(1 << 20, file)
        .lines()
        .enumerate()
    {
        let line = line.with_context(|| format!("read {}", path.display()))?;
        let value: Value = serde_json::from_str(&line)
            .with_context(|| format!("{}:{}: not JSON", path.display(), n + 1))?;
        rows.push(T::from_line(&value).with_context(|| format!("{}:{}", path.display(), n + 1))?);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_reads_back_as_the_same_row() {
        let o = Order {
            o_w_id: 1,
            o_d_id: 2,
            o_id: 3,
            o_c_id: 4,
            o_entry_d: 5,
            o_carrier_id: None,
            o_ol_cnt: 6,
            o_all_local: 1,
        };
        let line = o.line();
        assert_eq!(
            line,
            r#"{"key":[1,2,3],"row":{"o_c_id":4,"o_entry_d":5,"o_carrier_id":null,"o_ol_cnt":6,"o_all_local":1}}"#
        );
        assert_eq!(
            Order::from_line(&serde_json::from_str(&line).unwrap()).unwrap(),
            o
        );
        let i = Item {
            i_id: 7,
            i_im_id: 8,
            i_name: "n\"x".into(),
            i_price: 100,
            i_data: "d".into(),
        };
        assert!(
            i.line().starts_with(r#"{"key":7,"row":{"i_im_id":8,"#),
            "{}",
            i.line()
        );
        assert_eq!(
            Item::from_line(&serde_json::from_str(&i.line()).unwrap()).unwrap(),
            i
        );
        let n = NewOrder {
            no_w_id: 1,
            no_d_id: 1,
            no_o_id: 2101,
        };
        assert_eq!(n.line(), r#"{"key":[1,1,2101],"row":{}}"#);
    }
}
