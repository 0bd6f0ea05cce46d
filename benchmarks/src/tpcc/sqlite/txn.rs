//! The five transactions in SQL, each doing what apps/tpcc/tpcc.rhai does and answering what it
//! answers: the same status and the same JSON body (keys, values, types; `null` where the script
//! has `()`). The script is the definition; the comments name the part of it each step mirrors.
//!
//! [`run`] executes one transaction on a connection that is already inside a transaction (or a
//! savepoint); the caller commits when the answer is 200 and rolls back otherwise, which is
//! what a `throw` in the script does to everything the handler changed.

use anyhow::{anyhow, Result};
use rusqlite::{Connection, OptionalExtension};
use serde_json::{json, Value};

use super::super::input::{Customer, Delivery, NewOrder, OrderStatus, Payment, StockLevel, Txn};
use super::super::Answer;

// New-Order.
pub(super) const NO_WAREHOUSE: &str = "SELECT w_tax FROM warehouse WHERE w_id = ?1";
pub(super) const NO_DISTRICT: &str =
    "SELECT d_tax, d_next_o_id FROM district WHERE d_w_id = ?1 AND d_id = ?2";
pub(super) const NO_CUSTOMER: &str = "SELECT c_discount, c_last, c_credit FROM customer \
     WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3";
pub(super) const NO_NEXT_O_ID: &str =
    "UPDATE district SET d_next_o_id = ?3 WHERE d_w_id = ?1 AND d_id = ?2";
pub(super) const NO_ORDER: &str = "INSERT INTO orders (o_w_id, o_d_id, o_id, o_c_id, o_entry_d, \
     o_carrier_id, o_ol_cnt, o_all_local) VALUES (?1, ?2, ?3, ?4, ?5, NULL, ?6, ?7)";
pub(super) const NO_NEW_ORDER: &str =
    "INSERT INTO new_order (no_w_id, no_d_id, no_o_id) VALUES (?1, ?2, ?3)";
pub(super) const NO_ITEM: &str = "SELECT i_price, i_name, i_data FROM item WHERE i_id = ?1";
macro_rules! stock_of {
    ($($d:literal),+) => {
        [$(concat!("SELECT s_quantity, s_dist_", $d, ", s_data FROM stock \
                    WHERE s_w_id = ?1 AND s_i_id = ?2")),+]
    };
}
/// The stock read of New-Order for district 1..=10: S_DIST_xx of the district (of the supplying
/// warehouse's row, as the script's `stock_row[dist]`).
pub(super) const NO_STOCK: [&str; 10] =
    stock_of!("01", "02", "03", "04", "05", "06", "07", "08", "09", "10");
pub(super) const NO_STOCK_UPDATE: &str = "UPDATE stock SET s_quantity = ?3, s_ytd = s_ytd + ?4, \
     s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + ?5 \
     WHERE s_w_id = ?1 AND s_i_id = ?2";
pub(super) const NO_LINE: &str = "INSERT INTO order_line (ol_w_id, ol_d_id, ol_o_id, ol_number, \
     ol_i_id, ol_supply_w_id, ol_delivery_d, ol_quantity, ol_amount, ol_dist_info) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7, ?8, ?9)";

// Payment (and Order-Status's by-name lookup).
pub(super) const BY_NAME: &str = "SELECT c_id FROM customer \
     WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_last = ?3 ORDER BY c_first, c_id";
pub(super) const P_WAREHOUSE: &str = "SELECT w_name, w_street_1, w_street_2, w_city, w_state, \
     w_zip FROM warehouse WHERE w_id = ?1";
pub(super) const P_DISTRICT: &str = "SELECT d_name, d_street_1, d_street_2, d_city, d_state, \
     d_zip FROM district WHERE d_w_id = ?1 AND d_id = ?2";
pub(super) const P_CUSTOMER: &str = "SELECT c_first, c_middle, c_last, c_street_1, c_street_2, \
     c_city, c_state, c_zip, c_phone, c_since, c_credit, c_credit_lim, c_discount, c_balance, \
     c_ytd_payment, c_payment_cnt FROM customer WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3";
pub(super) const P_C_DATA: &str =
    "SELECT c_data FROM customer WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3";
pub(super) const P_W_YTD: &str = "UPDATE warehouse SET w_ytd = w_ytd + ?2 WHERE w_id = ?1";
pub(super) const P_D_YTD: &str =
    "UPDATE district SET d_ytd = d_ytd + ?3 WHERE d_w_id = ?1 AND d_id = ?2";
pub(super) const P_CUSTOMER_GC: &str = "UPDATE customer SET c_balance = ?4, c_ytd_payment = ?5, \
     c_payment_cnt = ?6 WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3";
pub(super) const P_CUSTOMER_BC: &str = "UPDATE customer SET c_balance = ?4, c_ytd_payment = ?5, \
     c_payment_cnt = ?6, c_data = ?7 WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3";
pub(super) const P_HISTORY: &str = "INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, \
     h_w_id, h_date, h_amount, h_data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

// Delivery.
pub(super) const D_WAREHOUSE: &str = "SELECT 1 FROM warehouse WHERE w_id = ?1";
pub(super) const D_OLDEST: &str = "SELECT no_o_id FROM new_order \
     WHERE no_w_id = ?1 AND no_d_id = ?2 ORDER BY no_o_id LIMIT 1";
pub(super) const D_DELETE: &str =
    "DELETE FROM new_order WHERE no_w_id = ?1 AND no_d_id = ?2 AND no_o_id = ?3";
pub(super) const D_CARRIER: &str = "UPDATE orders SET o_carrier_id = ?4 \
     WHERE o_w_id = ?1 AND o_d_id = ?2 AND o_id = ?3 RETURNING o_c_id";
pub(super) const D_LINES: &str = "UPDATE order_line SET ol_delivery_d = ?4 \
     WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id = ?3 RETURNING ol_amount";
pub(super) const D_CUSTOMER: &str = "UPDATE customer SET c_balance = c_balance + ?4, \
     c_delivery_cnt = c_delivery_cnt + 1 WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3";

// Order-Status.
pub(super) const OS_CUSTOMER: &str = "SELECT c_first, c_middle, c_last, c_balance FROM customer \
     WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3";
pub(super) const OS_NEWEST: &str = "SELECT o_id, o_entry_d, o_carrier_id FROM orders \
     WHERE o_w_id = ?1 AND o_d_id = ?2 AND o_c_id = ?3 ORDER BY o_id DESC LIMIT 1";
pub(super) const OS_LINES: &str = "SELECT ol_supply_w_id, ol_i_id, ol_quantity, ol_amount, \
     ol_delivery_d FROM order_line WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id = ?3 \
     ORDER BY ol_number";

// Stock-Level.
pub(super) const SL_NEXT_O_ID: &str =
    "SELECT d_next_o_id FROM district WHERE d_w_id = ?1 AND d_id = ?2";
pub(super) const SL_LOW: &str = "SELECT COUNT(DISTINCT s_i_id) FROM order_line \
     JOIN stock ON s_w_id = ?1 AND s_i_id = ol_i_id \
     WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id >= ?3 AND ol_o_id < ?4 AND s_quantity < ?5";

/// Every statement the transactions run (for the query-plan test).
#[cfg(test)]
pub(super) fn statements() -> Vec<&'static str> {
    let mut all = vec![
        NO_WAREHOUSE,
        NO_DISTRICT,
        NO_CUSTOMER,
        NO_NEXT_O_ID,
        NO_ORDER,
        NO_NEW_ORDER,
        NO_ITEM,
        NO_STOCK_UPDATE,
        NO_LINE,
        BY_NAME,
        P_WAREHOUSE,
        P_DISTRICT,
        P_CUSTOMER,
        P_C_DATA,
        P_W_YTD,
        P_D_YTD,
        P_CUSTOMER_GC,
        P_CUSTOMER_BC,
        P_HISTORY,
        D_WAREHOUSE,
        D_OLDEST,
        D_DELETE,
        D_CARRIER,
        D_LINES,
        D_CUSTOMER,
        OS_CUSTOMER,
        OS_NEWEST,
        OS_LINES,
        SL_NEXT_O_ID,
        SL_LOW,
    ];
    all.extend(NO_STOCK);
    all
}

/// The 400 of New-Order's declared body (app.json) for arrays of the wrong length or a
/// quantity below 1, in the order the route checks them, and of the script for arrays of
/// different lengths.
fn new_order_refused(t: &NewOrder) -> Option<Result<Answer>> {
    for (name, array) in [
        ("i_ids", &t.i_ids),
        ("supply_w_ids", &t.supply_w_ids),
        ("quantities", &t.quantities),
    ] {
        if !(1..=15).contains(&array.len()) {
            return Some(thrown(
                400,
                format!("\"{name}\" must hold 1 to 15 items, not {}", array.len()),
            ));
        }
        if name == "quantities" {
            if let Some((n, q)) = array.iter().enumerate().find(|(_, &q)| q < 1) {
                return Some(thrown(
                    400,
                    format!("\"quantities[{n}]\" must be an integer of at least 1, not {q}"),
                ));
            }
        }
    }
    let count = t.i_ids.len();
    if t.supply_w_ids.len() != count || t.quantities.len() != count {
        return Some(thrown(
            400,
            "i_ids, supply_w_ids and quantities must have as many items".into(),
        ));
    }
    None
}

/// Runs `txn` at time `now` on `conn`, inside the caller's transaction. An answer other than
/// 200 means the script threw: the caller must roll back. `Err` is SQLite failing (or a row
/// the script relies on being absent, which the script would answer with a 500).
pub(super) fn run(conn: &Connection, txn: &Txn, now: i64) -> Result<Answer> {
    match txn {
        Txn::NewOrder(t) => new_order(conn, t, now),
        Txn::Payment(t) => payment(conn, t, now),
        Txn::Delivery(t) => delivery(conn, t, now),
        Txn::OrderStatus(t) => order_status(conn, t),
        Txn::StockLevel(t) => stock_level(conn, t),
    }
}

fn ok(body: Value) -> Result<Answer> {
    Ok(Answer { status: 200, body })
}

/// The script's `bad_request` / `not_found`: `throw #{ status, error }`, whose whole map is the
/// body (lang/src/error.rs), `status` included.
fn thrown(status: u16, message: String) -> Result<Answer> {
    Ok(Answer {
        status,
        body: json!({ "status": status, "error": message }),
    })
}

/// The 400 of a read's declared query (app.json) for an integer parameter, which must be at
/// least 0.
fn query_int(value: i64, name: &str) -> Option<Result<Answer>> {
    if value < 0 {
        return Some(thrown(
            400,
            format!("{name} must be an integer of at least 0, not \"{value}\""),
        ));
    }
    None
}

/// The script's `customer_id_by_name`: of the district's customers with that last name,
/// sorted by (c_first, c_id) byte-wise (SQLite's BINARY collation, like the app's string
/// keys), the one at index (n - 1) / 2; `None` when there is none.
fn customer_by_name(conn: &Connection, w_id: i64, d_id: i64, c_last: &str) -> Result<Option<i64>> {
    let mut stmt = conn.prepare_cached(BY_NAME)?;
    let ids = stmt
        .query_map(rusqlite::params![w_id, d_id, c_last], |r| {
            r.get::<_, i64>(0)
        })?
        .collect::<rusqlite::Result<Vec<i64>>>()?;
    Ok(match ids.len() {
        0 => None,
        n => Some(ids[(n - 1) / 2]),
    })
}

fn no_customer_named(c_last: &str, d_id: i64, w_id: i64) -> Result<Answer> {
    thrown(
        404,
        format!("no customer named {c_last} in district {d_id} of warehouse {w_id}"),
    )
}

/// The first `n` characters of `s` (Rhai's `sub_string(0, n)`).
fn first_chars(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((end, _)) => s[..end].to_string(),
        None => s.to_string(),
    }
}

fn new_order(conn: &Connection, t: &NewOrder, now: i64) -> Result<Answer> {
    if let Some(refused) = new_order_refused(t) {
        return refused;
    }
    let count = t.i_ids.len();
    let all_local = i64::from(t.supply_w_ids.iter().all(|&s| s == t.w_id));
    let (w_id, d_id, c_id) = (t.w_id, t.d_id, t.c_id);

    let w_tax: Option<i64> = conn
        .prepare_cached(NO_WAREHOUSE)?
        .query_row([w_id], |r| r.get(0))
        .optional()?;
    let Some(w_tax) = w_tax else {
        return thrown(404, format!("no warehouse {w_id}"));
    };
    let district: Option<(i64, i64)> = conn
        .prepare_cached(NO_DISTRICT)?
        .query_row([w_id, d_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let Some((d_tax, o_id)) = district else {
        return thrown(404, format!("no district {d_id} in warehouse {w_id}"));
    };
    let customer: Option<(i64, String, String)> = conn
        .prepare_cached(NO_CUSTOMER)?
        .query_row([w_id, d_id, c_id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?;
    let Some((c_discount, c_last, c_credit)) = customer else {
        return thrown(
            404,
            format!("no customer {c_id} in district {d_id} of warehouse {w_id}"),
        );
    };
    conn.prepare_cached(NO_NEXT_O_ID)?
        .execute([w_id, d_id, o_id + 1])?;
    conn.prepare_cached(NO_ORDER)?.execute([
        w_id,
        d_id,
        o_id,
        c_id,
        now,
        count as i64,
        all_local,
    ])?;
    conn.prepare_cached(NO_NEW_ORDER)?
        .execute([w_id, d_id, o_id])?;

    // The script's dist_column(d_id): s_dist_01 .. s_dist_10 (a district exists only as 1..10).
    let stock_sql = usize::try_from(d_id - 1)
        .ok()
        .and_then(|i| NO_STOCK.get(i))
        .ok_or_else(|| anyhow!("district {d_id} has no S_DIST column"))?;
    let mut lines = Vec::with_capacity(count);
    let mut sum = 0i64;
    for n in 0..count {
        let (i_id, supply, quantity) = (t.i_ids[n], t.supply_w_ids[n], t.quantities[n]);
        let item: Option<(i64, String, String)> = conn
            .prepare_cached(NO_ITEM)?
            .query_row([i_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?;
        let Some((price, i_name, i_data)) = item else {
            // Clause 2.4.2.3: the caller rolls everything back, d_next_o_id included.
            return Ok(Answer {
                status: 422,
                body: json!({
                    "status": 422,
                    "error": "Item number is not valid",
                    "rolled_back": true,
                    "w_id": w_id,
                    "d_id": d_id,
                    "c_id": c_id,
                    "c_last": c_last,
                    "c_credit": c_credit,
                    "o_id": o_id,
                }),
            });
        };
        let stock: Option<(i64, String, String)> = conn
            .prepare_cached(stock_sql)?
            .query_row([supply, i_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?;
        let Some((on_hand, dist_info, s_data)) = stock else {
            return thrown(
                404,
                format!("no stock of item {i_id} in warehouse {supply}"),
            );
        };
        let left = if on_hand >= quantity + 10 {
            on_hand - quantity
        } else {
            on_hand - quantity + 91
        };
        conn.prepare_cached(NO_STOCK_UPDATE)?.execute([
            supply,
            i_id,
            left,
            quantity,
            i64::from(supply != w_id),
        ])?;
        let amount = quantity * price;
        sum += amount;
        let brand = if i_data.contains("ORIGINAL") && s_data.contains("ORIGINAL") {
            "B"
        } else {
            "G"
        };
        conn.prepare_cached(NO_LINE)?.execute(rusqlite::params![
            w_id,
            d_id,
            o_id,
            n as i64 + 1,
            i_id,
            supply,
            quantity,
            amount,
            dist_info,
        ])?;
        lines.push(json!({
            "ol_supply_w_id": supply,
            "ol_i_id": i_id,
            "i_name": i_name,
            "ol_quantity": quantity,
            "s_quantity": left,
            "brand_generic": brand,
            "i_price": price,
            "ol_amount": amount,
        }));
    }
    ok(json!({
        "w_id": w_id,
        "d_id": d_id,
        "c_id": c_id,
        "o_id": o_id,
        "o_ol_cnt": count as i64,
        "c_last": c_last,
        "c_credit": c_credit,
        "c_discount": c_discount,
        "w_tax": w_tax,
        "d_tax": d_tax,
        "o_entry_d": now,
        // Cents, rounded down (i64 division, as in the script).
        "total": sum * (10000 - c_discount) * (10000 + w_tax + d_tax) / 100_000_000,
        "lines": lines,
    }))
}

fn payment(conn: &Connection, t: &Payment, now: i64) -> Result<Answer> {
    let (w_id, d_id, c_w_id, c_d_id, h_amount) = (t.w_id, t.d_id, t.c_w_id, t.c_d_id, t.h_amount);
    // As in the script, the name is resolved before the warehouse and district are looked at.
    let c_id = match &t.customer {
        Customer::Id(id) => *id,
        Customer::Last(last) => match customer_by_name(conn, c_w_id, c_d_id, last)? {
            Some(id) => id,
            None => return no_customer_named(last, c_d_id, c_w_id),
        },
    };
    type Address = (String, String, String, String, String, String);
    let address = |r: &rusqlite::Row| -> rusqlite::Result<Address> {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
        ))
    };
    let warehouse = conn
        .prepare_cached(P_WAREHOUSE)?
        .query_row([w_id], address)
        .optional()?;
    let Some((w_name, w_street_1, w_street_2, w_city, w_state, w_zip)) = warehouse else {
        return thrown(404, format!("no warehouse {w_id}"));
    };
    let district = conn
        .prepare_cached(P_DISTRICT)?
        .query_row([w_id, d_id], address)
        .optional()?;
    let Some((d_name, d_street_1, d_street_2, d_city, d_state, d_zip)) = district else {
        return thrown(404, format!("no district {d_id} in warehouse {w_id}"));
    };
    let mut stmt = conn.prepare_cached(P_CUSTOMER)?;
    let mut rows = stmt.query([c_w_id, c_d_id, c_id])?;
    let Some(c) = rows.next()? else {
        return thrown(
            404,
            format!("no customer {c_id} in district {c_d_id} of warehouse {c_w_id}"),
        );
    };
    let c_first: String = c.get(0)?;
    let c_middle: String = c.get(1)?;
    let c_last: String = c.get(2)?;
    let c_street_1: String = c.get(3)?;
    let c_street_2: String = c.get(4)?;
    let c_city: String = c.get(5)?;
    let c_state: String = c.get(6)?;
    let c_zip: String = c.get(7)?;
    let c_phone: String = c.get(8)?;
    let c_since: i64 = c.get(9)?;
    let c_credit: String = c.get(10)?;
    let c_credit_lim: i64 = c.get(11)?;
    let c_discount: i64 = c.get(12)?;
    let c_balance: i64 = c.get::<_, i64>(13)? - h_amount;
    let c_ytd_payment: i64 = c.get::<_, i64>(14)? + h_amount;
    let c_payment_cnt: i64 = c.get::<_, i64>(15)? + 1;
    drop(rows);
    drop(stmt);

    conn.prepare_cached(P_W_YTD)?.execute([w_id, h_amount])?;
    conn.prepare_cached(P_D_YTD)?
        .execute([w_id, d_id, h_amount])?;
    let mut c_data = String::new();
    if c_credit == "BC" {
        let old: String = conn
            .prepare_cached(P_C_DATA)?
            .query_row([c_w_id, c_d_id, c_id], |r| r.get(0))?;
        let mut entry = format!("{c_id} {c_d_id} {c_w_id} {d_id} {w_id} {h_amount};");
        entry.push_str(&old);
        let new = first_chars(&entry, 500);
        c_data = first_chars(&new, 200);
        conn.prepare_cached(P_CUSTOMER_BC)?
            .execute(rusqlite::params![
                c_w_id,
                c_d_id,
                c_id,
                c_balance,
                c_ytd_payment,
                c_payment_cnt,
                new,
            ])?;
    } else {
        conn.prepare_cached(P_CUSTOMER_GC)?.execute([
            c_w_id,
            c_d_id,
            c_id,
            c_balance,
            c_ytd_payment,
            c_payment_cnt,
        ])?;
    }
    let h_data = format!("{w_name}    {d_name}");
    conn.prepare_cached(P_HISTORY)?.execute(rusqlite::params![
        c_id, c_d_id, c_w_id, d_id, w_id, now, h_amount, h_data,
    ])?;
    ok(json!({
        "w_id": w_id,
        "d_id": d_id,
        "c_id": c_id,
        "c_w_id": c_w_id,
        "c_d_id": c_d_id,
        "w_street_1": w_street_1,
        "w_street_2": w_street_2,
        "w_city": w_city,
        "w_state": w_state,
        "w_zip": w_zip,
        "d_street_1": d_street_1,
        "d_street_2": d_street_2,
        "d_city": d_city,
        "d_state": d_state,
        "d_zip": d_zip,
        "c_first": c_first,
        "c_middle": c_middle,
        "c_last": c_last,
        "c_street_1": c_street_1,
        "c_street_2": c_street_2,
        "c_city": c_city,
        "c_state": c_state,
        "c_zip": c_zip,
        "c_phone": c_phone,
        "c_since": c_since,
        "c_credit": c_credit,
        "c_credit_lim": c_credit_lim,
        "c_discount": c_discount,
        "c_balance": c_balance,
        "c_data": c_data,
        "h_amount": h_amount,
        "h_date": now,
    }))
}

fn delivery(conn: &Connection, t: &Delivery, now: i64) -> Result<Answer> {
    let (w_id, o_carrier_id) = (t.w_id, t.o_carrier_id);
    if !conn.prepare_cached(D_WAREHOUSE)?.exists([w_id])? {
        return thrown(404, format!("no warehouse {w_id}"));
    }
    let mut delivered = Vec::with_capacity(10);
    let mut skipped = Vec::new();
    for d_id in 1..=10i64 {
        // The first new_order key of the district: the smallest no_o_id.
        let oldest: Option<i64> = conn
            .prepare_cached(D_OLDEST)?
            .query_row([w_id, d_id], |r| r.get(0))
            .optional()?;
        let Some(o_id) = oldest else {
            skipped.push(d_id);
            continue;
        };
        conn.prepare_cached(D_DELETE)?.execute([w_id, d_id, o_id])?;
        let o_c_id: i64 = conn
            .prepare_cached(D_CARRIER)?
            .query_row([w_id, d_id, o_id, o_carrier_id], |r| r.get(0))
            .optional()?
            .ok_or_else(|| anyhow!("new order ({w_id}, {d_id}, {o_id}) has no order row"))?;
        let mut total = 0i64;
        {
            let mut stmt = conn.prepare_cached(D_LINES)?;
            let mut rows = stmt.query([w_id, d_id, o_id, now])?;
            while let Some(row) = rows.next()? {
                total += row.get::<_, i64>(0)?;
            }
        }
        let changed = conn
            .prepare_cached(D_CUSTOMER)?
            .execute([w_id, d_id, o_c_id, total])?;
        if changed != 1 {
            return Err(anyhow!(
                "order ({w_id}, {d_id}, {o_id}) names customer {o_c_id}, who does not exist"
            ));
        }
        delivered.push(json!({ "d_id": d_id, "o_id": o_id }));
    }
    ok(json!({
        "w_id": w_id,
        "o_carrier_id": o_carrier_id,
        "delivered": delivered,
        "skipped": skipped,
    }))
}

fn order_status(conn: &Connection, t: &OrderStatus) -> Result<Answer> {
    let (w_id, d_id) = (t.w_id, t.d_id);
    if let Some(bad) = query_int(w_id, "w_id").or_else(|| query_int(d_id, "d_id")) {
        return bad;
    }
    let c_id = match &t.customer {
        Customer::Id(id) => {
            if let Some(bad) = query_int(*id, "c_id") {
                return bad;
            }
            *id
        }
        Customer::Last(last) => match customer_by_name(conn, w_id, d_id, last)? {
            Some(id) => id,
            None => return no_customer_named(last, d_id, w_id),
        },
    };
    let customer: Option<(String, String, String, i64)> = conn
        .prepare_cached(OS_CUSTOMER)?
        .query_row([w_id, d_id, c_id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .optional()?;
    let Some((c_first, c_middle, c_last, c_balance)) = customer else {
        return thrown(
            404,
            format!("no customer {c_id} in district {d_id} of warehouse {w_id}"),
        );
    };
    let newest: Option<(i64, i64, Option<i64>)> = conn
        .prepare_cached(OS_NEWEST)?
        .query_row([w_id, d_id, c_id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?;
    let mut lines = Vec::new();
    let (mut o_id, mut o_entry_d, mut o_carrier_id) = (Value::Null, Value::Null, Value::Null);
    if let Some((id, entry_d, carrier)) = newest {
        (o_id, o_entry_d, o_carrier_id) = (json!(id), json!(entry_d), json!(carrier));
        let mut stmt = conn.prepare_cached(OS_LINES)?;
        let mut rows = stmt.query([w_id, d_id, id])?;
        while let Some(r) = rows.next()? {
            lines.push(json!({
                "ol_supply_w_id": r.get::<_, i64>(0)?,
                "ol_i_id": r.get::<_, i64>(1)?,
                "ol_quantity": r.get::<_, i64>(2)?,
                "ol_amount": r.get::<_, i64>(3)?,
                "ol_delivery_d": r.get::<_, Option<i64>>(4)?,
            }));
        }
    }
    ok(json!({
        "w_id": w_id,
        "d_id": d_id,
        "c_id": c_id,
        "c_first": c_first,
        "c_middle": c_middle,
        "c_last": c_last,
        "c_balance": c_balance,
        "o_id": o_id,
        "o_entry_d": o_entry_d,
        "o_carrier_id": o_carrier_id,
        "lines": lines,
    }))
}

fn stock_level(conn: &Connection, t: &StockLevel) -> Result<Answer> {
    let (w_id, d_id, threshold) = (t.w_id, t.d_id, t.threshold);
    if let Some(bad) = query_int(w_id, "w_id")
        .or_else(|| query_int(d_id, "d_id"))
        .or_else(|| query_int(threshold, "threshold"))
    {
        return bad;
    }
    let next: Option<i64> = conn
        .prepare_cached(SL_NEXT_O_ID)?
        .query_row([w_id, d_id], |r| r.get(0))
        .optional()?;
    let Some(next) = next else {
        return thrown(404, format!("no district {d_id} in warehouse {w_id}"));
    };
    let low_stock: i64 = conn
        .prepare_cached(SL_LOW)?
        .query_row([w_id, d_id, next - 20, next, threshold], |r| r.get(0))?;
    ok(json!({
        "w_id": w_id,
        "d_id": d_id,
        "threshold": threshold,
        "low_stock": low_stock,
    }))
}
