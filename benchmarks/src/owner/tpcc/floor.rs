//! The floor of the TPC-C part: the five transactions natively, on `std::collections` maps of
//! typed rows changed in place, each write's body read with serde and each answer built as the
//! app's JSON. No snapshot, no write set, no record: the same work done the simplest fast way,
//! so that the owner's cost has a figure to be compared with in every run. Its answers are
//! checked against the app's, call by call.
//!
//! The New-Order of an unused item (1% of them) is refused before anything changes, where the
//! app writes and rolls back: the answer is the same.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde::Deserialize;
use serde_json::{json, Value};

use crate::tpcc::input::{Customer as Who, Txn};
use crate::tpcc::rows::{
    Customer, District, History, Item, Order, OrderLine, Row, Stock, Warehouse,
};
use crate::tpcc::Answer;

/// The nine tables and the app's two indexes, keyed as the app keys them.
#[derive(Default)]
pub(super) struct Floor {
    warehouse: BTreeMap<i64, Warehouse>,
    district: BTreeMap<(i64, i64), District>,
    customer: BTreeMap<(i64, i64, i64), Customer>,
    /// The app's `customer.by_last_name`: (w, d, c_last, c_first, c_id).
    by_last_name: BTreeSet<(i64, i64, String, String, i64)>,
    history: BTreeMap<(i64, i64, i64, i64), History>,
    orders: BTreeMap<(i64, i64, i64), Order>,
    /// The app's `orders.by_customer`: (w, d, c_id, o_id).
    by_customer: BTreeSet<(i64, i64, i64, i64)>,
    new_order: BTreeSet<(i64, i64, i64)>,
    order_line: BTreeMap<(i64, i64, i64, i64), OrderLine>,
    stock: BTreeMap<(i64, i64), Stock>,
    item: BTreeMap<i64, Item>,
}

#[derive(Deserialize)]
struct NewOrderBody {
    w_id: i64,
    d_id: i64,
    c_id: i64,
    now: i64,
    i_ids: Vec<i64>,
    supply_w_ids: Vec<i64>,
    quantities: Vec<i64>,
}

#[derive(Deserialize)]
struct PaymentBody {
    w_id: i64,
    d_id: i64,
    c_w_id: i64,
    c_d_id: i64,
    c_id: Option<i64>,
    c_last: Option<String>,
    h_amount: i64,
    now: i64,
}

#[derive(Deserialize)]
struct DeliveryBody {
    w_id: i64,
    o_carrier_id: i64,
    now: i64,
}

fn ok(body: Value) -> Answer {
    Answer { status: 200, body }
}

/// The script's `throw #{ status, error }`.
fn thrown(status: u16, message: String) -> Answer {
    Answer {
        status,
        body: json!({ "status": status, "error": message }),
    }
}

/// The first `n` characters of `s` (Rhai's `sub_string(0, n)`).
fn first_chars(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((end, _)) => s[..end].to_string(),
        None => s.to_string(),
    }
}

impl Floor {
    pub(super) fn push(&mut self, row: Row) {
        match row {
            Row::Warehouse(r) => {
                self.warehouse.insert(r.w_id, r);
            }
            Row::District(r) => {
                self.district.insert((r.d_w_id, r.d_id), r);
            }
            Row::Customer(r) => {
                let name = (
                    r.c_w_id,
                    r.c_d_id,
                    r.c_last.clone(),
                    r.c_first.clone(),
                    r.c_id,
                );
                self.by_last_name.insert(name);
                self.customer.insert((r.c_w_id, r.c_d_id, r.c_id), r);
            }
            Row::History(r) => {
                self.history
                    .insert((r.k_c_w_id, r.k_c_d_id, r.k_c_id, r.k_n), r);
            }
            Row::Order(r) => {
                self.by_customer
                    .insert((r.o_w_id, r.o_d_id, r.o_c_id, r.o_id));
                self.orders.insert((r.o_w_id, r.o_d_id, r.o_id), r);
            }
            Row::NewOrder(r) => {
                self.new_order.insert((r.no_w_id, r.no_d_id, r.no_o_id));
            }
            Row::OrderLine(r) => {
                self.order_line
                    .insert((r.ol_w_id, r.ol_d_id, r.ol_o_id, r.ol_number), r);
            }
            Row::Stock(r) => {
                self.stock.insert((r.s_w_id, r.s_i_id), r);
            }
            Row::Item(r) => {
                self.item.insert(r.i_id, r);
            }
        }
    }

    /// Runs one transaction: a write from its body's JSON text, a read from its parameters.
    pub(super) fn run(&mut self, txn: &Txn, body: &str) -> Answer {
        fn parsed<T: serde::de::DeserializeOwned>(body: &str) -> T {
            serde_json::from_str(body).expect("the driver's body")
        }
        match txn {
            Txn::NewOrder(_) => self.new_order(parsed(body)),
            Txn::Payment(_) => self.payment(parsed(body)),
            Txn::Delivery(_) => self.delivery(parsed(body)),
            Txn::OrderStatus(t) => self.order_status(t.w_id, t.d_id, &t.customer),
            Txn::StockLevel(t) => self.stock_level(t.w_id, t.d_id, t.threshold),
        }
    }

    /// The app's `customer_by_name`: of the district's customers with that last name, sorted by
    /// (c_first, c_id), the one at (n - 1) / 2.
    fn customer_by_name(&self, w_id: i64, d_id: i64, c_last: &str) -> Result<i64, Answer> {
        let from = (w_id, d_id, c_last.to_string(), String::new(), i64::MIN);
        let ids: Vec<i64> = self
            .by_last_name
            .range(from..)
            .take_while(|(w, d, last, _, _)| *w == w_id && *d == d_id && last == c_last)
            .map(|entry| entry.4)
            .collect();
        match ids.len() {
            0 => Err(thrown(
                404,
                format!("no customer named {c_last} in district {d_id} of warehouse {w_id}"),
            )),
            n => Ok(ids[(n - 1) / 2]),
        }
    }

    fn new_order(&mut self, b: NewOrderBody) -> Answer {
        let (w_id, d_id, c_id) = (b.w_id, b.d_id, b.c_id);
        let count = b.i_ids.len();
        let all_local = i64::from(b.supply_w_ids.iter().all(|&s| s == w_id));
        let Some(w_tax) = self.warehouse.get(&w_id).map(|w| w.w_tax) else {
            return thrown(404, format!("no warehouse {w_id}"));
        };
        let Some(district) = self.district.get(&(w_id, d_id)) else {
            return thrown(404, format!("no district {d_id} in warehouse {w_id}"));
        };
        let (d_tax, o_id) = (district.d_tax, district.d_next_o_id);
        let Some(customer) = self.customer.get(&(w_id, d_id, c_id)) else {
            return thrown(
                404,
                format!("no customer {c_id} in district {d_id} of warehouse {w_id}"),
            );
        };
        let (c_discount, c_last, c_credit) = (
            customer.c_discount,
            customer.c_last.clone(),
            customer.c_credit.clone(),
        );
        if b.i_ids.iter().any(|i| !self.item.contains_key(i)) {
            return Answer {
                status: 422,
                body: json!({
                    "status": 422, "error": "Item number is not valid", "rolled_back": true,
                    "w_id": w_id, "d_id": d_id, "c_id": c_id, "c_last": c_last,
                    "c_credit": c_credit, "o_id": o_id,
                }),
            };
        }
        if let Some(district) = self.district.get_mut(&(w_id, d_id)) {
            district.d_next_o_id = o_id + 1;
        }
        self.orders.insert(
            (w_id, d_id, o_id),
            Order {
                o_w_id: w_id,
                o_d_id: d_id,
                o_id,
                o_c_id: c_id,
                o_entry_d: b.now,
                o_carrier_id: None,
                o_ol_cnt: count as i64,
                o_all_local: all_local,
            },
        );
        self.by_customer.insert((w_id, d_id, c_id, o_id));
        self.new_order.insert((w_id, d_id, o_id));
        let mut lines = Vec::with_capacity(count);
        let mut sum = 0;
        for n in 0..count {
            let (i_id, supply, quantity) = (b.i_ids[n], b.supply_w_ids[n], b.quantities[n]);
            let item = &self.item[&i_id];
            let Some(stock) = self.stock.get_mut(&(supply, i_id)) else {
                return thrown(
                    404,
                    format!("no stock of item {i_id} in warehouse {supply}"),
                );
            };
            let on_hand = stock.s_quantity;
            let left = if on_hand >= quantity + 10 {
                on_hand - quantity
            } else {
                on_hand - quantity + 91
            };
            stock.s_quantity = left;
            stock.s_ytd += quantity;
            stock.s_order_cnt += 1;
            if supply != w_id {
                stock.s_remote_cnt += 1;
            }
            let amount = quantity * item.i_price;
            sum += amount;
            let brand = if item.i_data.contains("ORIGINAL") && stock.s_data.contains("ORIGINAL") {
                "B"
            } else {
                "G"
            };
            let dist_info = stock.dist(d_id).unwrap_or_default().to_string();
            self.order_line.insert(
                (w_id, d_id, o_id, n as i64 + 1),
                OrderLine {
                    ol_w_id: w_id,
                    ol_d_id: d_id,
                    ol_o_id: o_id,
                    ol_number: n as i64 + 1,
                    ol_i_id: i_id,
                    ol_supply_w_id: supply,
                    ol_delivery_d: None,
                    ol_quantity: quantity,
                    ol_amount: amount,
                    ol_dist_info: dist_info,
                },
            );
            lines.push(json!({
                "ol_supply_w_id": supply, "ol_i_id": i_id, "i_name": item.i_name,
                "ol_quantity": quantity, "s_quantity": left, "brand_generic": brand,
                "i_price": item.i_price, "ol_amount": amount,
            }));
        }
        ok(json!({
            "w_id": w_id, "d_id": d_id, "c_id": c_id, "o_id": o_id, "o_ol_cnt": count as i64,
            "c_last": c_last, "c_credit": c_credit, "c_discount": c_discount, "w_tax": w_tax,
            "d_tax": d_tax, "o_entry_d": b.now,
            "total": sum * (10000 - c_discount) * (10000 + w_tax + d_tax) / 100_000_000,
            "lines": lines,
        }))
    }

    fn payment(&mut self, b: PaymentBody) -> Answer {
        let (w_id, d_id, c_w_id, c_d_id, h_amount) =
            (b.w_id, b.d_id, b.c_w_id, b.c_d_id, b.h_amount);
        // As in the app, the name is resolved before the warehouse and district are looked at.
        let c_id = match (b.c_id, &b.c_last) {
            (Some(id), _) => id,
            (None, Some(last)) => match self.customer_by_name(c_w_id, c_d_id, last) {
                Ok(id) => id,
                Err(answer) => return answer,
            },
            (None, None) => return thrown(400, "no customer".into()),
        };
        let Some(warehouse) = self.warehouse.get_mut(&w_id) else {
            return thrown(404, format!("no warehouse {w_id}"));
        };
        let Some(district) = self.district.get_mut(&(w_id, d_id)) else {
            return thrown(404, format!("no district {d_id} in warehouse {w_id}"));
        };
        let Some(c) = self.customer.get_mut(&(c_w_id, c_d_id, c_id)) else {
            return thrown(
                404,
                format!("no customer {c_id} in district {c_d_id} of warehouse {c_w_id}"),
            );
        };
        warehouse.w_ytd += h_amount;
        district.d_ytd += h_amount;
        c.c_balance -= h_amount;
        c.c_ytd_payment += h_amount;
        c.c_payment_cnt += 1;
        let mut c_data = String::new();
        if c.c_credit == "BC" {
            let entry = format!("{c_id} {c_d_id} {c_w_id} {d_id} {w_id} {h_amount};");
            c.c_data = first_chars(&(entry + c.c_data.as_str()), 500);
            c_data = first_chars(&c.c_data, 200);
        }
        let h_data = format!("{}    {}", warehouse.w_name, district.d_name);
        let answer = json!({
            "w_id": w_id, "d_id": d_id, "c_id": c_id, "c_w_id": c_w_id, "c_d_id": c_d_id,
            "w_street_1": warehouse.w_street_1, "w_street_2": warehouse.w_street_2,
            "w_city": warehouse.w_city, "w_state": warehouse.w_state, "w_zip": warehouse.w_zip,
            "d_street_1": district.d_street_1, "d_street_2": district.d_street_2,
            "d_city": district.d_city, "d_state": district.d_state, "d_zip": district.d_zip,
            "c_first": c.c_first, "c_middle": c.c_middle, "c_last": c.c_last,
            "c_street_1": c.c_street_1, "c_street_2": c.c_street_2, "c_city": c.c_city,
            "c_state": c.c_state, "c_zip": c.c_zip, "c_phone": c.c_phone, "c_since": c.c_since,
            "c_credit": c.c_credit, "c_credit_lim": c.c_credit_lim, "c_discount": c.c_discount,
            "c_balance": c.c_balance, "c_data": c_data, "h_amount": h_amount, "h_date": b.now,
        });
        let n = c.c_payment_cnt;
        self.history.insert(
            (c_w_id, c_d_id, c_id, n),
            History {
                k_c_w_id: c_w_id,
                k_c_d_id: c_d_id,
                k_c_id: c_id,
                k_n: n,
                h_c_id: c_id,
                h_c_d_id: c_d_id,
                h_c_w_id: c_w_id,
                h_d_id: d_id,
                h_w_id: w_id,
                h_date: b.now,
                h_amount,
                h_data,
            },
        );
        ok(answer)
    }

    fn delivery(&mut self, b: DeliveryBody) -> Answer {
        let (w_id, o_carrier_id) = (b.w_id, b.o_carrier_id);
        if !self.warehouse.contains_key(&w_id) {
            return thrown(404, format!("no warehouse {w_id}"));
        }
        let mut delivered = Vec::with_capacity(10);
        let mut skipped = Vec::new();
        for d_id in 1..=10i64 {
            let oldest = self
                .new_order
                .range((w_id, d_id, i64::MIN)..=(w_id, d_id, i64::MAX))
                .next()
                .copied();
            let Some(key @ (_, _, o_id)) = oldest else {
                skipped.push(d_id);
                continue;
            };
            self.new_order.remove(&key);
            let order = self.orders.get_mut(&key).expect("a new order's order");
            order.o_carrier_id = Some(o_carrier_id);
            let o_c_id = order.o_c_id;
            let mut total = 0;
            for (_, line) in self
                .order_line
                .range_mut((w_id, d_id, o_id, i64::MIN)..=(w_id, d_id, o_id, i64::MAX))
                .take(15)
            {
                line.ol_delivery_d = Some(b.now);
                total += line.ol_amount;
            }
            let c = self
                .customer
                .get_mut(&(w_id, d_id, o_c_id))
                .expect("an order's customer");
            c.c_balance += total;
            c.c_delivery_cnt += 1;
            delivered.push(json!({ "d_id": d_id, "o_id": o_id }));
        }
        ok(json!({
            "w_id": w_id, "o_carrier_id": o_carrier_id, "delivered": delivered,
            "skipped": skipped,
        }))
    }

    fn order_status(&self, w_id: i64, d_id: i64, who: &Who) -> Answer {
        let c_id = match who {
            Who::Id(id) => *id,
            Who::Last(last) => match self.customer_by_name(w_id, d_id, last) {
                Ok(id) => id,
                Err(answer) => return answer,
            },
        };
        let Some(c) = self.customer.get(&(w_id, d_id, c_id)) else {
            return thrown(
                404,
                format!("no customer {c_id} in district {d_id} of warehouse {w_id}"),
            );
        };
        let newest = self
            .by_customer
            .range((w_id, d_id, c_id, i64::MIN)..=(w_id, d_id, c_id, i64::MAX))
            .next_back();
        let (mut o_id, mut o_entry_d, mut o_carrier_id) = (Value::Null, Value::Null, Value::Null);
        let mut lines = Vec::new();
        if let Some(&(_, _, _, id)) = newest {
            let order = &self.orders[&(w_id, d_id, id)];
            (o_id, o_entry_d, o_carrier_id) =
                (json!(id), json!(order.o_entry_d), json!(order.o_carrier_id));
            let range = (w_id, d_id, id, i64::MIN)..=(w_id, d_id, id, i64::MAX);
            for line in self.order_line.range(range).take(15).map(|(_, l)| l) {
                lines.push(json!({
                    "ol_supply_w_id": line.ol_supply_w_id, "ol_i_id": line.ol_i_id,
                    "ol_quantity": line.ol_quantity, "ol_amount": line.ol_amount,
                    "ol_delivery_d": line.ol_delivery_d,
                }));
            }
        }
        ok(json!({
            "w_id": w_id, "d_id": d_id, "c_id": c_id, "c_first": c.c_first,
            "c_middle": c.c_middle, "c_last": c.c_last, "c_balance": c.c_balance,
            "o_id": o_id, "o_entry_d": o_entry_d, "o_carrier_id": o_carrier_id, "lines": lines,
        }))
    }

    fn stock_level(&self, w_id: i64, d_id: i64, threshold: i64) -> Answer {
        let Some(district) = self.district.get(&(w_id, d_id)) else {
            return thrown(404, format!("no district {d_id} in warehouse {w_id}"));
        };
        let next = district.d_next_o_id;
        let mut seen = HashSet::new();
        let mut low_stock = 0;
        let range = (w_id, d_id, next - 20, i64::MIN)..(w_id, d_id, next, i64::MIN);
        for (_, line) in self.order_line.range(range).take(300) {
            if seen.insert(line.ol_i_id) && self.stock[&(w_id, line.ol_i_id)].s_quantity < threshold
            {
                low_stock += 1;
            }
        }
        ok(json!({
            "w_id": w_id, "d_id": d_id, "threshold": threshold, "low_stock": low_stock,
        }))
    }
}
