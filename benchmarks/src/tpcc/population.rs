//! The initial database of clause 4.3.3.1, generated from a seed: the same rows, in key order
//! within each table, for every engine. Warehouse `w` draws from its own stream, so a warehouse's
//! rows do not depend on how many others there are.

use super::rng::{last_name, Constants, Rng};
use super::rows::*;

/// Every load timestamp (C_SINCE, H_DATE, O_ENTRY_D, OL_DELIVERY_D): 2026-01-01T00:00:00Z in
/// microseconds, one fixed instant so that loads are equal everywhere.
pub const LOAD_TIME: i64 = 1_767_225_600_000_000;

pub const DISTRICTS: i64 = 10;
pub const CUSTOMERS: i64 = 3_000;
pub const ITEMS: i64 = 100_000;
/// Orders per district at load; the last 900 are undelivered (in NEW_ORDER).
pub const ORDERS: i64 = 3_000;
pub const FIRST_NEW_ORDER: i64 = 2_101;

/// The sizes of a population. [`Scale::SPEC`] is the specification's, which every benchmark
/// loads; a smaller one keeps the same shapes for tests that must run every handler on a
/// population they can afford (the compiled-against-Rhai test of the app).
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    pub items: i64,
    /// Customers per district.
    pub customers: i64,
    /// Orders per district at load.
    pub orders: i64,
    /// The first undelivered order of each district at load.
    pub first_new_order: i64,
    /// The numbers of the last names (clause 4.3.2.3): the first this many customers of a
    /// district take one each, in order; the others, and terminals, draw them by NURand.
    pub last_names: i64,
}

impl Scale {
    pub const SPEC: Scale = Scale {
        items: ITEMS,
        customers: CUSTOMERS,
        orders: ORDERS,
        first_new_order: FIRST_NEW_ORDER,
        last_names: 1_000,
    };

    /// An item id no row has: the last line of the 1% of New-Orders that roll back.
    pub const fn unused_item(&self) -> i64 {
        self.items + 1
    }

    /// NURand's draw of a last name's number (clause 2.1.6: NURand(255, 0, 999) at the
    /// specification's scale).
    pub fn last_name_number(&self, r: &mut Rng, c: i64) -> i64 {
        r.nurand(255, 0, self.last_names - 1, c)
    }
}

fn letters(r: &mut Rng, n: usize) -> String {
    (0..n)
        .map(|_| char::from(b'A' + r.uniform(0, 25) as u8))
        .collect()
}

/// Streams the rows of the ITEM table.
pub fn items(scale: &Scale, seed: u64, sink: &mut dyn FnMut(Row)) {
    let mut r = Rng::stream(seed, "item", 0);
    for i_id in 1..=scale.items {
        sink(Row::Item(Item {
            i_id,
            i_im_id: r.uniform(1, 10_000),
            i_name: r.astring(14, 24),
            i_price: r.uniform(100, 10_000),
            i_data: r.data_with_original(),
        }));
    }
}

/// Streams the rows of warehouse `w_id` (every table but ITEM), each table in key order.
pub fn warehouse(
    scale: &Scale,
    seed: u64,
    constants: &Constants,
    w_id: i64,
    sink: &mut dyn FnMut(Row),
) {
    let mut r = Rng::stream(seed, "warehouse", w_id as u64);
    sink(Row::Warehouse(Warehouse {
        w_id,
        w_name: r.astring(6, 10),
        w_street_1: r.astring(10, 20),
        w_street_2: r.astring(10, 20),
        w_city: r.astring(10, 20),
        w_state: letters(&mut r, 2),
        w_zip: r.zip(),
        w_tax: r.uniform(0, 2_000),
        w_ytd: 30_000_000,
    }));
    stock(scale, &mut r, w_id, sink);
    for d_id in 1..=DISTRICTS {
        sink(Row::District(District {
            d_w_id: w_id,
            d_id,
            d_name: r.astring(6, 10),
            d_street_1: r.astring(10, 20),
            d_street_2: r.astring(10, 20),
            d_city: r.astring(10, 20),
            d_state: letters(&mut r, 2),
            d_zip: r.zip(),
            d_tax: r.uniform(0, 2_000),
            d_ytd: 3_000_000,
            d_next_o_id: scale.orders + 1,
        }));
        customers(scale, constants, &mut r, (w_id, d_id), sink);
        orders(scale, &mut r, (w_id, d_id), sink);
    }
}

/// The STOCK rows of warehouse `w_id`, drawn from the warehouse's stream `r`.
fn stock(scale: &Scale, r: &mut Rng, w_id: i64, sink: &mut dyn FnMut(Row)) {
    for s_i_id in 1..=scale.items {
        let mut dist = || r.astring(24, 24);
        let (d1, d2, d3, d4, d5) = (dist(), dist(), dist(), dist(), dist());
        let (d6, d7, d8, d9, d10) = (dist(), dist(), dist(), dist(), dist());
        sink(Row::Stock(Stock {
            s_w_id: w_id,
            s_i_id,
            s_quantity: r.uniform(10, 100),
            s_dist_01: d1,
            s_dist_02: d2,
            s_dist_03: d3,
            s_dist_04: d4,
            s_dist_05: d5,
            s_dist_06: d6,
            s_dist_07: d7,
            s_dist_08: d8,
            s_dist_09: d9,
            s_dist_10: d10,
            s_ytd: 0,
            s_order_cnt: 0,
            s_remote_cnt: 0,
            s_data: r.data_with_original(),
        }));
    }
}

/// The CUSTOMER rows of a district, each with its one HISTORY row.
fn customers(
    scale: &Scale,
    constants: &Constants,
    r: &mut Rng,
    (w_id, d_id): (i64, i64),
    sink: &mut dyn FnMut(Row),
) {
    for c_id in 1..=scale.customers {
        let number = if c_id <= scale.last_names {
            c_id - 1
        } else {
            scale.last_name_number(r, constants.c_last_load)
        };
        sink(Row::Customer(Customer {
            c_w_id: w_id,
            c_d_id: d_id,
            c_id,
            c_first: r.astring(8, 16),
            c_middle: "OE".into(),
            c_last: last_name(number),
            c_street_1: r.astring(10, 20),
            c_street_2: r.astring(10, 20),
            c_city: r.astring(10, 20),
            c_state: letters(r, 2),
            c_zip: r.zip(),
            c_phone: r.nstring(16),
            c_since: LOAD_TIME,
            c_credit: if r.uniform(1, 10) == 1 { "BC" } else { "GC" }.into(),
            c_credit_lim: 5_000_000,
            c_discount: r.uniform(0, 5_000),
            c_balance: -1_000,
            c_ytd_payment: 1_000,
            c_payment_cnt: 1,
            c_delivery_cnt: 0,
            c_data: r.astring(300, 500),
        }));
        sink(Row::History(History {
            k_c_w_id: w_id,
            k_c_d_id: d_id,
            k_c_id: c_id,
            k_n: 1,
            h_c_id: c_id,
            h_c_d_id: d_id,
            h_c_w_id: w_id,
            h_d_id: d_id,
            h_w_id: w_id,
            h_date: LOAD_TIME,
            h_amount: 1_000,
            h_data: r.astring(12, 24),
        }));
    }
}

/// The ORDER rows of a district with their ORDER_LINE rows, then its NEW_ORDER rows.
fn orders(scale: &Scale, r: &mut Rng, (w_id, d_id): (i64, i64), sink: &mut dyn FnMut(Row)) {
    // O_C_ID: a random permutation of the customers (Fisher-Yates).
    let mut customers: Vec<i64> = (1..=scale.customers).collect();
    for i in (1..customers.len()).rev() {
        let j = r.uniform(0, i as i64) as usize;
        customers.swap(i, j);
    }
    for o_id in 1..=scale.orders {
        let delivered = o_id < scale.first_new_order;
        let ol_cnt = r.uniform(5, 15);
        sink(Row::Order(Order {
            o_w_id: w_id,
            o_d_id: d_id,
            o_id,
            o_c_id: customers[(o_id - 1) as usize],
            o_entry_d: LOAD_TIME,
            o_carrier_id: delivered.then(|| r.uniform(1, 10)),
            o_ol_cnt: ol_cnt,
            o_all_local: 1,
        }));
        for ol_number in 1..=ol_cnt {
            sink(Row::OrderLine(OrderLine {
                ol_w_id: w_id,
                ol_d_id: d_id,
                ol_o_id: o_id,
                ol_number,
                ol_i_id: r.uniform(1, scale.items),
                ol_supply_w_id: w_id,
                ol_delivery_d: delivered.then_some(LOAD_TIME),
                ol_quantity: 5,
                ol_amount: if delivered { 0 } else { r.uniform(1, 999_999) },
                ol_dist_info: r.astring(24, 24),
            }));
        }
    }
    for no_o_id in scale.first_new_order..=scale.orders {
        sink(Row::NewOrder(NewOrder {
            no_w_id: w_id,
            no_d_id: d_id,
            no_o_id,
        }));
    }
}

/// The whole population: ITEM, then each warehouse.
pub fn generate(seed: u64, warehouses: i64, sink: &mut dyn FnMut(Row)) {
    generate_at(&Scale::SPEC, seed, warehouses, sink);
}

/// The whole population at `scale`.
pub fn generate_at(scale: &Scale, seed: u64, warehouses: i64, sink: &mut dyn FnMut(Row)) {
    let constants = Constants::draw(seed);
    items(scale, seed, sink);
    for w_id in 1..=warehouses {
        warehouse(scale, seed, &constants, w_id, sink);
    }
}

/// Rows of a population per table at load, in the order of [`TABLES`].
pub fn load_counts(warehouses: i64) -> [u64; 9] {
    let w = warehouses as u64;
    // ORDER_LINE is random (5..=15 per order): this is its expectation.
    [
        w,
        10 * w,
        30_000 * w,
        30_000 * w,
        30_000 * w,
        9_000 * w,
        300_000 * w,
        100_000 * w,
        100_000,
    ]
}
