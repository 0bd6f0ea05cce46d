//! The floor of the New-Order part: the same population and the same logic as
//! `native_new_order`, done the simplest fast way a native program would. One
//! `std::collections::BTreeMap` per table keyed by integer tuples, rows as plain structs changed in
//! place, text columns as shared strings; no snapshot, no undo log, no write set. What the owner
//! pays above this is what its promises (snapshots, rollback, records) and its representation
//! cost.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{
    Order, CUSTOMERS_PER_DISTRICT, DISTRICTS, ITEMS, LINES_PER_ORDER, ORDERS_PER_DISTRICT,
};

struct Warehouse {
    tax: i64,
    #[allow(dead_code)]
    ytd: i64,
    #[allow(dead_code)]
    name: Arc<str>,
}

struct District {
    tax: i64,
    #[allow(dead_code)]
    ytd: i64,
    next_o_id: i64,
    #[allow(dead_code)]
    name: Arc<str>,
}

#[allow(dead_code)]
struct Customer {
    discount: i64,
    credit: Arc<str>,
    last: Arc<str>,
    balance: i64,
}

#[allow(dead_code)]
struct Item {
    price: i64,
    name: Arc<str>,
    data: Arc<str>,
}

#[allow(dead_code)]
struct Stock {
    quantity: i64,
    ytd: i64,
    order_cnt: i64,
    remote_cnt: i64,
    dist: [Arc<str>; 10],
    data: Arc<str>,
}

#[allow(dead_code)]
struct OrderRow {
    c_id: i64,
    entry_d: i64,
    carrier_id: Option<i64>,
    ol_cnt: i64,
    all_local: i64,
}

#[allow(dead_code)]
struct OrderLine {
    i_id: i64,
    supply_w_id: i64,
    quantity: i64,
    amount: i64,
    dist_info: Arc<str>,
    delivery_d: Option<i64>,
}

/// The state of the floor: what `super::load` builds, as plain maps.
pub(super) struct Floor {
    warehouse: BTreeMap<i64, Warehouse>,
    district: BTreeMap<(i64, i64), District>,
    customer: BTreeMap<(i64, i64, i64), Customer>,
    item: BTreeMap<i64, Item>,
    stock: BTreeMap<(i64, i64), Stock>,
    orders: BTreeMap<(i64, i64, i64), OrderRow>,
    new_orders: BTreeMap<(i64, i64, i64), ()>,
    order_lines: BTreeMap<(i64, i64, i64, i64), OrderLine>,
}

impl Floor {
    /// The population `super::load` builds, value for value.
    pub(super) fn load() -> Floor {
        let text = |s: &str| -> Arc<str> { Arc::from(s) };
        let mut floor = Floor {
            warehouse: BTreeMap::new(),
            district: BTreeMap::new(),
            customer: BTreeMap::new(),
            item: BTreeMap::new(),
            stock: BTreeMap::new(),
            orders: BTreeMap::new(),
            new_orders: BTreeMap::new(),
            order_lines: BTreeMap::new(),
        };
        floor.warehouse.insert(
            1,
            Warehouse {
                tax: 1200,
                ytd: 0,
                name: text("warehouse-1"),
            },
        );
        for d in 1..=DISTRICTS {
            floor.district.insert(
                (1, d),
                District {
                    tax: 800,
                    ytd: 0,
                    next_o_id: ORDERS_PER_DISTRICT + 1,
                    name: text("district"),
                },
            );
            for c in 1..=CUSTOMERS_PER_DISTRICT {
                floor.customer.insert(
                    (1, d, c),
                    Customer {
                        discount: c % 5000,
                        credit: text("GC"),
                        last: text("BARBARBAR"),
                        balance: -10,
                    },
                );
            }
            for o in 1..=ORDERS_PER_DISTRICT {
                floor.orders.insert(
                    (1, d, o),
                    OrderRow {
                        c_id: o % 3000 + 1,
                        entry_d: 0,
                        carrier_id: Some(5),
                        ol_cnt: LINES_PER_ORDER,
                        all_local: 1,
                    },
                );
                for n in 1..=LINES_PER_ORDER {
                    floor.order_lines.insert(
                        (1, d, o, n),
                        OrderLine {
                            i_id: n * 7,
                            supply_w_id: 1,
                            quantity: 5,
                            amount: 0,
                            dist_info: text("dist-info-0123456789ab"),
                            delivery_d: Some(0),
                        },
                    );
                }
            }
        }
        for i in 1..=ITEMS {
            floor.item.insert(
                i,
                Item {
                    price: 100 + i % 9900,
                    name: text("item-name-0123456789"),
                    data: text("item data item data item data"),
                },
            );
            floor.stock.insert(
                (1, i),
                Stock {
                    quantity: 50,
                    ytd: 0,
                    order_cnt: 0,
                    remote_cnt: 0,
                    dist: std::array::from_fn(|_| text("dist-info-0123456789ab")),
                    data: text("stock data stock data stock data stock"),
                },
            );
        }
        floor
    }

    pub(super) fn row_count(&self) -> usize {
        self.warehouse.len()
            + self.district.len()
            + self.customer.len()
            + self.item.len()
            + self.stock.len()
            + self.orders.len()
            + self.new_orders.len()
            + self.order_lines.len()
    }

    /// `native_new_order`'s work: the same reads, the same changes, the same answer.
    pub(super) fn new_order(&mut self, o: &Order) -> i64 {
        let w = 1;
        let tax_w = self.warehouse[&w].tax;
        let district = self.district.get_mut(&(w, o.d)).expect("loaded");
        let next = district.next_o_id;
        district.next_o_id = next + 1;
        let tax_d = district.tax;
        let discount = self.customer[&(w, o.d, o.c)].discount;
        let count = o.items.len() as i64;
        let fresh = self
            .orders
            .insert(
                (w, o.d, next),
                OrderRow {
                    c_id: o.c,
                    entry_d: 12345,
                    carrier_id: None,
                    ol_cnt: count,
                    all_local: 1,
                },
            )
            .is_none();
        assert!(fresh, "a new order's key is new");
        assert!(self.new_orders.insert((w, o.d, next), ()).is_none());
        let mut total = 0;
        for (n, (&i, &qty)) in o.items.iter().zip(&o.qtys).enumerate() {
            let price = self.item[&i].price;
            let stock = self.stock.get_mut(&(w, i)).expect("loaded");
            let q = stock.quantity;
            stock.quantity = if q >= qty + 10 { q - qty } else { q - qty + 91 };
            stock.ytd += qty;
            stock.order_cnt += 1;
            let dist_info = stock.dist[0].clone();
            let amount = qty * price;
            total += amount;
            let line = OrderLine {
                i_id: i,
                supply_w_id: w,
                quantity: qty,
                amount,
                dist_info,
                delivery_d: None,
            };
            let fresh = self
                .order_lines
                .insert((w, o.d, next, n as i64 + 1), line)
                .is_none();
            assert!(fresh, "a new order line's key is new");
        }
        total * (10000 - discount) * (10000 + tax_w + tax_d) / 100_000_000
    }
}
