//! The consistency conditions of clause 3.3.2 (C1 to C12) and the extra invariants that catch
//! the bugs TPC-C kits are known for (X1 to X11), over a [`Db`] in memory: the same code for
//! SQLite's tables and for Pure's exported state.
//!
//! "Run-time" rows are the orders created after the load (o_id > 3,000) and their lines.

use std::collections::{HashMap, HashSet};

use super::input::Txn;
use super::population::{FIRST_NEW_ORDER, LOAD_TIME, ORDERS};
use super::rows::*;
use super::Answer;

/// What the driver counted, for the conditions that compare the tables with the stream that
/// changed them. `None` in [`check`] means "freshly loaded".
#[derive(Clone, Debug, Default)]
pub struct Tallies {
    /// New-Orders committed (not rolled back), and the lines they added.
    pub new_orders: u64,
    pub new_order_lines: u64,
    pub payments: u64,
    /// Orders delivered since the load, per (w_id, d_id).
    pub delivered: HashMap<(i64, i64), u64>,
}

impl Tallies {
    /// Counts one answered transaction; says whether it was a New-Order rolled back. Any other
    /// failure is an error: the stream is meant to succeed.
    pub fn count(&mut self, txn: &Txn, answer: &Answer) -> anyhow::Result<bool> {
        match (txn, answer.status) {
            (Txn::NewOrder(t), 200) => {
                self.new_orders += 1;
                self.new_order_lines += t.i_ids.len() as u64;
            }
            (Txn::NewOrder(_), 422) if answer.body["rolled_back"] == true => return Ok(true),
            (Txn::Payment(_), 200) => self.payments += 1,
            (Txn::Delivery(t), 200) => {
                for d in answer.body["delivered"].as_array().into_iter().flatten() {
                    let d_id = d["d_id"]
                        .as_i64()
                        .ok_or_else(|| anyhow::anyhow!("a delivery answer without d_id: {d}"))?;
                    *self.delivered.entry((t.w_id, d_id)).or_default() += 1;
                }
            }
            (_, 200) => {}
            (_, status) => anyhow::bail!("{:?} failed with {status}: {}", txn.kind(), answer.body),
        }
        Ok(false)
    }

    /// Adds another driver's tallies (one per terminal in a timed run) to these.
    pub fn merge(&mut self, other: &Tallies) {
        self.new_orders += other.new_orders;
        self.new_order_lines += other.new_order_lines;
        self.payments += other.payments;
        for (district, n) in &other.delivered {
            *self.delivered.entry(*district).or_default() += n;
        }
    }
}

/// One condition that did not hold, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub condition: &'static str,
    pub what: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.condition, self.what)
    }
}

/// Failures kept per condition: the first few say where; the count says how bad.
const SHOWN_PER_CONDITION: usize = 5;

struct Report {
    failures: Vec<Failure>,
    counts: HashMap<&'static str, u64>,
}

impl Report {
    fn fail(&mut self, condition: &'static str, what: impl FnOnce() -> String) {
        let n = self.counts.entry(condition).or_default();
        *n += 1;
        if *n as usize <= SHOWN_PER_CONDITION {
            self.failures.push(Failure {
                condition,
                what: what(),
            });
        }
    }

    fn expect(&mut self, ok: bool, condition: &'static str, what: impl FnOnce() -> String) {
        if !ok {
            self.fail(condition, what);
        }
    }
}

/// The names of every condition [`check`] runs, in order.
pub const CONDITIONS: [&str; 24] = [
    "C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9", "C10", "C11", "C12", "X1", "X2", "X3",
    "X4", "X5", "X6", "X7", "X8", "X9", "X10", "X11", "L",
];

/// Runs every condition; returns the failures (empty when all hold), the first few of each
/// condition with the count of the rest. `tallies` is `None` right after the load: then C11 takes
/// its load form and the load's distributions are checked too (L).
pub fn check(db: &Db, tallies: Option<&Tallies>) -> Vec<Failure> {
    let mut r = Report {
        failures: Vec::new(),
        counts: HashMap::new(),
    };
    keys_ascend(db, &mut r);

    // Per district: sums and extremes over its orders, new orders, lines and history.
    #[derive(Default)]
    struct D {
        orders: u64,
        max_o: i64,
        min_o: i64,
        ol_cnt_sum: i64,
        lines: i64,
        no_count: i64,
        no_min: i64,
        no_max: i64,
        h_sum: i64,
        delivered_run: u64,
    }
    let mut dist: HashMap<(i64, i64), D> = HashMap::new();
    for d in &db.district {
        dist.insert(
            (d.d_w_id, d.d_id),
            D {
                min_o: i64::MAX,
                no_min: i64::MAX,
                no_max: i64::MIN,
                ..D::default()
            },
        );
    }
    let warehouse_of: HashMap<i64, &Warehouse> = db.warehouse.iter().map(|w| (w.w_id, w)).collect();
    let district_of: HashMap<(i64, i64), &District> = db
        .district
        .iter()
        .map(|d| ((d.d_w_id, d.d_id), d))
        .collect();
    let item_of: HashMap<i64, &Item> = db.item.iter().map(|i| (i.i_id, i)).collect();
    let stock_of: HashMap<(i64, i64), &Stock> =
        db.stock.iter().map(|s| ((s.s_w_id, s.s_i_id), s)).collect();
    let customers: HashSet<(i64, i64, i64)> = db
        .customer
        .iter()
        .map(|c| (c.c_w_id, c.c_d_id, c.c_id))
        .collect();
    let new_orders: HashSet<(i64, i64, i64)> = db
        .new_order
        .iter()
        .map(|n| (n.no_w_id, n.no_d_id, n.no_o_id))
        .collect();

    let mut order_of: HashMap<(i64, i64, i64), &Order> = HashMap::with_capacity(db.orders.len());
    // Per customer: delivered amount of their lines, and deliveries after the load's first 2,100.
    let mut delivered_amount: HashMap<(i64, i64, i64), i64> = HashMap::new();
    let mut deliveries: HashMap<(i64, i64, i64), i64> = HashMap::new();
    for o in &db.orders {
        order_of.insert((o.o_w_id, o.o_d_id, o.o_id), o);
        match dist.get_mut(&(o.o_w_id, o.o_d_id)) {
            Some(d) => {
                d.orders += 1;
                d.max_o = d.max_o.max(o.o_id);
                d.min_o = d.min_o.min(o.o_id);
                d.ol_cnt_sum += o.o_ol_cnt;
                if o.o_id > ORDERS && o.o_carrier_id.is_some() {
                    d.delivered_run += 1;
                }
            }
            None => r.fail("X10", || {
                format!("order {:?} of no district", (o.o_w_id, o.o_d_id, o.o_id))
            }),
        }
        let has_new_order = new_orders.contains(&(o.o_w_id, o.o_d_id, o.o_id));
        r.expect(o.o_carrier_id.is_none() == has_new_order, "C5", || {
            format!(
                "order {:?}: carrier {:?} but {} NEW_ORDER row",
                (o.o_w_id, o.o_d_id, o.o_id),
                o.o_carrier_id,
                if has_new_order { "a" } else { "no" }
            )
        });
        r.expect(
            customers.contains(&(o.o_w_id, o.o_d_id, o.o_c_id)),
            "X10",
            || {
                format!(
                    "order {:?} of no customer {}",
                    (o.o_w_id, o.o_d_id, o.o_id),
                    o.o_c_id
                )
            },
        );
        if o.o_id >= FIRST_NEW_ORDER && o.o_carrier_id.is_some() {
            *deliveries
                .entry((o.o_w_id, o.o_d_id, o.o_c_id))
                .or_default() += 1;
        }
    }
    for n in &db.new_order {
        r.expect(
            order_of.contains_key(&(n.no_w_id, n.no_d_id, n.no_o_id)),
            "C5",
            || {
                format!(
                    "NEW_ORDER {:?} has no order",
                    (n.no_w_id, n.no_d_id, n.no_o_id)
                )
            },
        );
        if let Some(d) = dist.get_mut(&(n.no_w_id, n.no_d_id)) {
            d.no_count += 1;
            d.no_min = d.no_min.min(n.no_o_id);
            d.no_max = d.no_max.max(n.no_o_id);
        }
    }

    // Order lines: per order counts, C7, and the run-time invariants.
    let mut lines_of: HashMap<(i64, i64, i64), (i64, bool)> =
        HashMap::with_capacity(db.orders.len());
    #[derive(Default, PartialEq, Debug)]
    struct S {
        ytd: i64,
        orders: i64,
        remote: i64,
    }
    let mut stock_use: HashMap<(i64, i64), S> = HashMap::new();
    for l in &db.order_line {
        let key = (l.ol_w_id, l.ol_d_id, l.ol_o_id);
        let Some(o) = order_of.get(&key) else {
            r.fail("C6", || {
                format!("order line {:?} has no order", (key, l.ol_number))
            });
            continue;
        };
        let entry = lines_of.entry(key).or_insert((0, true));
        entry.0 += 1;
        entry.1 &= l.ol_supply_w_id == l.ol_w_id;
        if let Some(d) = dist.get_mut(&(l.ol_w_id, l.ol_d_id)) {
            d.lines += 1;
        }
        r.expect(
            l.ol_delivery_d.is_none() == o.o_carrier_id.is_none(),
            "C7",
            || {
                format!(
                    "line {:?}: delivery {:?}, order carrier {:?}",
                    (key, l.ol_number),
                    l.ol_delivery_d,
                    o.o_carrier_id
                )
            },
        );
        if l.ol_delivery_d.is_some() {
            *delivered_amount
                .entry((o.o_w_id, o.o_d_id, o.o_c_id))
                .or_default() += l.ol_amount;
        }
        let stock = stock_of.get(&(l.ol_supply_w_id, l.ol_i_id));
        r.expect(stock.is_some(), "X10", || {
            format!(
                "line {:?} names no stock {:?}",
                (key, l.ol_number),
                (l.ol_supply_w_id, l.ol_i_id)
            )
        });
        if l.ol_o_id > ORDERS {
            let s = stock_use.entry((l.ol_supply_w_id, l.ol_i_id)).or_default();
            s.ytd += l.ol_quantity;
            s.orders += 1;
            s.remote += i64::from(l.ol_supply_w_id != l.ol_w_id);
            match item_of.get(&l.ol_i_id) {
                Some(i) => r.expect(l.ol_amount == l.ol_quantity * i.i_price, "X3", || {
                    format!(
                        "line {:?}: amount {} for {} at {}",
                        (key, l.ol_number),
                        l.ol_amount,
                        l.ol_quantity,
                        i.i_price
                    )
                }),
                None => r.fail("X10", || {
                    format!("line {:?} names no item {}", (key, l.ol_number), l.ol_i_id)
                }),
            }
            if let Some(s) = stock {
                r.expect(
                    Some(l.ol_dist_info.as_str()) == s.dist(l.ol_d_id),
                    "X4",
                    || {
                        format!(
                            "line {:?}: dist info {:?}",
                            (key, l.ol_number),
                            l.ol_dist_info
                        )
                    },
                );
            }
        }
    }
    for o in &db.orders {
        let (lines, all_local) = lines_of
            .get(&(o.o_w_id, o.o_d_id, o.o_id))
            .copied()
            .unwrap_or((0, true));
        r.expect(lines == o.o_ol_cnt, "C6", || {
            format!(
                "order {:?}: o_ol_cnt {} but {lines} lines",
                (o.o_w_id, o.o_d_id, o.o_id),
                o.o_ol_cnt
            )
        });
        r.expect((o.o_all_local == 1) == all_local, "X5", || {
            format!(
                "order {:?}: o_all_local {}",
                (o.o_w_id, o.o_d_id, o.o_id),
                o.o_all_local
            )
        });
    }
    for s in &db.stock {
        r.expect((10..=100).contains(&s.s_quantity), "X1", || {
            format!(
                "stock {:?}: quantity {}",
                (s.s_w_id, s.s_i_id),
                s.s_quantity
            )
        });
        let used = stock_use.remove(&(s.s_w_id, s.s_i_id)).unwrap_or_default();
        let held = S {
            ytd: s.s_ytd,
            orders: s.s_order_cnt,
            remote: s.s_remote_cnt,
        };
        r.expect(used == held, "X2", || {
            format!(
                "stock {:?}: holds {held:?}, the run's lines say {used:?}",
                (s.s_w_id, s.s_i_id)
            )
        });
    }

    // History: per warehouse, district and customer.
    let mut w_paid: HashMap<i64, i64> = HashMap::new();
    let mut c_paid: HashMap<(i64, i64, i64), (i64, i64, i64)> = HashMap::new(); // sum, count, max n
    for h in &db.history {
        *w_paid.entry(h.h_w_id).or_default() += h.h_amount;
        match dist.get_mut(&(h.h_w_id, h.h_d_id)) {
            Some(d) => d.h_sum += h.h_amount,
            None => r.fail("X10", || {
                format!("history row {:?} of no district", key_of_history(h))
            }),
        }
        let c = (h.h_c_w_id, h.h_c_d_id, h.h_c_id);
        r.expect(customers.contains(&c), "X10", || {
            format!("history row {:?} of no customer", key_of_history(h))
        });
        r.expect((h.k_c_w_id, h.k_c_d_id, h.k_c_id) == c, "X7", || {
            format!(
                "history row {:?} is keyed by another customer",
                key_of_history(h)
            )
        });
        let e = c_paid.entry(c).or_default();
        e.0 += h.h_amount;
        e.1 += 1;
        e.2 = e.2.max(h.k_n);
        if h.k_n > 1 {
            if let (Some(w), Some(d)) = (
                warehouse_of.get(&h.h_w_id),
                district_of.get(&(h.h_w_id, h.h_d_id)),
            ) {
                let expected = format!("{}    {}", w.w_name, d.d_name);
                r.expect(h.h_data == expected, "X9", || {
                    format!(
                        "history row {:?}: h_data {:?}, not {expected:?}",
                        key_of_history(h),
                        h.h_data
                    )
                });
            }
        }
    }

    for w in &db.warehouse {
        let districts: i64 = db
            .district
            .iter()
            .filter(|d| d.d_w_id == w.w_id)
            .map(|d| d.d_ytd)
            .sum();
        r.expect(w.w_ytd == districts, "C1", || {
            format!(
                "warehouse {}: w_ytd {} but its districts sum to {districts}",
                w.w_id, w.w_ytd
            )
        });
        let paid = w_paid.get(&w.w_id).copied().unwrap_or(0);
        r.expect(w.w_ytd == paid, "C8", || {
            format!(
                "warehouse {}: w_ytd {} but its history sums to {paid}",
                w.w_id, w.w_ytd
            )
        });
    }
    let mut ordered_since_load = 0u64;
    let mut lines_since_load = 0i64;
    let mut new_order_rows = 0i64;
    for dr in &db.district {
        let k = (dr.d_w_id, dr.d_id);
        let d = &dist[&k];
        ordered_since_load += d.orders.saturating_sub(ORDERS as u64);
        new_order_rows += d.no_count;
        r.expect(dr.d_next_o_id - 1 == d.max_o, "C2", || {
            format!(
                "district {k:?}: d_next_o_id {} but newest order {}",
                dr.d_next_o_id, d.max_o
            )
        });
        r.expect(
            d.no_count == 0 || dr.d_next_o_id - 1 == d.no_max,
            "C2",
            || {
                format!(
                    "district {k:?}: d_next_o_id {} but newest NEW_ORDER {}",
                    dr.d_next_o_id, d.no_max
                )
            },
        );
        r.expect(
            d.no_count == 0 || d.no_max - d.no_min + 1 == d.no_count,
            "C3",
            || {
                format!(
                    "district {k:?}: NEW_ORDER {}..={} holds {} rows",
                    d.no_min, d.no_max, d.no_count
                )
            },
        );
        r.expect(d.ol_cnt_sum == d.lines, "C4", || {
            format!(
                "district {k:?}: orders say {} lines, there are {}",
                d.ol_cnt_sum, d.lines
            )
        });
        r.expect(dr.d_ytd == d.h_sum, "C9", || {
            format!(
                "district {k:?}: d_ytd {} but its history sums to {}",
                dr.d_ytd, d.h_sum
            )
        });
        let delivered = match tallies {
            None => 0,
            Some(t) => t.delivered.get(&k).copied().unwrap_or(0),
        };
        let undelivered_gap = d.orders as i64 - d.no_count;
        r.expect(undelivered_gap == 2_100 + delivered as i64, "C11", || {
            format!(
                "district {k:?}: {} orders - {} NEW_ORDER rows = {undelivered_gap}, expected 2100 + {delivered} delivered",
                d.orders, d.no_count
            )
        });
        r.expect(d.delivered_run <= delivered, "C11", || {
            format!(
                "district {k:?}: {} run-time orders delivered, the driver saw {delivered}",
                d.delivered_run
            )
        });
        r.expect(
            d.orders as i64 == d.max_o && (d.orders == 0 || d.min_o == 1),
            "X6",
            || {
                format!(
                    "district {k:?}: {} orders with ids {}..={}",
                    d.orders, d.min_o, d.max_o
                )
            },
        );
        lines_since_load += d.lines;
    }
    let load_lines: i64 = db.order_line.iter().filter(|l| l.ol_o_id <= ORDERS).count() as i64;
    lines_since_load -= load_lines;

    for c in &db.customer {
        let k = (c.c_w_id, c.c_d_id, c.c_id);
        let delivered = delivered_amount.get(&k).copied().unwrap_or(0);
        let (paid, payments, max_n) = c_paid.get(&k).copied().unwrap_or((0, 0, 0));
        r.expect(c.c_balance == delivered - paid, "C10", || {
            format!(
                "customer {k:?}: balance {} but delivered {delivered} - paid {paid}",
                c.c_balance
            )
        });
        r.expect(c.c_balance + c.c_ytd_payment == delivered, "C12", || {
            format!(
                "customer {k:?}: balance {} + ytd payment {} but delivered {delivered}",
                c.c_balance, c.c_ytd_payment
            )
        });
        r.expect(
            c.c_payment_cnt == payments && c.c_ytd_payment == paid && max_n == payments,
            "X7",
            || {
                format!(
                    "customer {k:?}: c_payment_cnt {} c_ytd_payment {}, history has {payments} rows (n up to {max_n}) summing to {paid}",
                    c.c_payment_cnt, c.c_ytd_payment
                )
            },
        );
        let delivered_orders = deliveries.get(&k).copied().unwrap_or(0);
        r.expect(c.c_delivery_cnt == delivered_orders, "X8", || {
            format!(
                "customer {k:?}: c_delivery_cnt {} but {delivered_orders} orders delivered",
                c.c_delivery_cnt
            )
        });
    }

    let w = db.warehouse.len() as i64;
    match tallies {
        Some(t) => {
            let delivered: u64 = t.delivered.values().sum();
            let counts = [
                (
                    "orders since the load",
                    ordered_since_load as i64,
                    t.new_orders as i64,
                ),
                (
                    "order lines since the load",
                    lines_since_load,
                    t.new_order_lines as i64,
                ),
                (
                    "history rows",
                    db.history.len() as i64,
                    30_000 * w + t.payments as i64,
                ),
                (
                    "NEW_ORDER rows",
                    new_order_rows,
                    9_000 * w + t.new_orders as i64 - delivered as i64,
                ),
            ];
            for (what, found, expected) in counts {
                r.expect(found == expected, "X11", || {
                    format!("{what}: {found} in the tables, {expected} from the driver's tallies")
                });
            }
        }
        None => load_distributions(db, &mut r),
    }
    for (condition, n) in &r.counts {
        if *n as usize > SHOWN_PER_CONDITION {
            let more = *n as usize - SHOWN_PER_CONDITION;
            r.failures.push(Failure {
                condition,
                what: format!("... and {more} more"),
            });
        }
    }
    r.failures
        .sort_by_key(|f| CONDITIONS.iter().position(|c| *c == f.condition));
    r.failures
}

fn key_of_history(h: &History) -> (i64, i64, i64, i64) {
    (h.k_c_w_id, h.k_c_d_id, h.k_c_id, h.k_n)
}

/// X10, first half: every table's rows in strictly ascending key order, so no key twice.
fn keys_ascend(db: &Db, r: &mut Report) {
    fn ascend<T, K: PartialOrd + std::fmt::Debug>(
        rows: &[T],
        key: impl Fn(&T) -> K,
        table: &str,
        r: &mut Report,
    ) {
        for pair in rows.windows(2) {
            let (a, b) = (key(&pair[0]), key(&pair[1]));
            r.expect(a < b, "X10", || format!("{table}: key {b:?} after {a:?}"));
        }
    }
    ascend(&db.warehouse, |x| x.w_id, "warehouse", r);
    ascend(&db.district, |x| (x.d_w_id, x.d_id), "district", r);
    ascend(
        &db.customer,
        |x| (x.c_w_id, x.c_d_id, x.c_id),
        "customer",
        r,
    );
    ascend(&db.history, key_of_history, "history", r);
    ascend(&db.orders, |x| (x.o_w_id, x.o_d_id, x.o_id), "orders", r);
    ascend(
        &db.new_order,
        |x| (x.no_w_id, x.no_d_id, x.no_o_id),
        "new_order",
        r,
    );
    ascend(
        &db.order_line,
        |x| (x.ol_w_id, x.ol_d_id, x.ol_o_id, x.ol_number),
        "order_line",
        r,
    );
    ascend(&db.stock, |x| (x.s_w_id, x.s_i_id), "stock", r);
    ascend(&db.item, |x| x.i_id, "item", r);
}

/// The load's own rules (clause 4.3.3.1): cardinalities, about 10% bad credit and `ORIGINAL`
/// (within the 5% the specification allows), and every one of the 1,000 last names in every
/// district.
fn load_distributions(db: &Db, r: &mut Report) {
    let w = db.warehouse.len();
    let expected = [
        ("district", db.district.len(), 10 * w),
        ("customer", db.customer.len(), 30_000 * w),
        ("history", db.history.len(), 30_000 * w),
        ("orders", db.orders.len(), 30_000 * w),
        ("new_order", db.new_order.len(), 9_000 * w),
        ("stock", db.stock.len(), 100_000 * w),
        ("item", db.item.len(), 100_000),
    ];
    for (table, found, want) in expected {
        r.expect(found == want, "L", || {
            format!("{table}: {found} rows at load, not {want}")
        });
    }
    let lines = db.order_line.len() as f64 / db.orders.len().max(1) as f64;
    r.expect((9.9..=10.1).contains(&lines), "L", || {
        format!("{lines:.3} lines per order at load")
    });
    let share = |n: usize, of: usize| n as f64 / of.max(1) as f64;
    let bad = db.customer.iter().filter(|c| c.c_credit == "BC").count();
    r.expect(
        (0.095..=0.105).contains(&share(bad, db.customer.len())),
        "L",
        || format!("{bad} of {} customers have bad credit", db.customer.len()),
    );
    let original = |data: &str| data.contains("ORIGINAL");
    let items = db.item.iter().filter(|i| original(&i.i_data)).count();
    r.expect(
        (0.095..=0.105).contains(&share(items, db.item.len())),
        "L",
        || format!("{items} of {} items are ORIGINAL", db.item.len()),
    );
    let stock = db.stock.iter().filter(|s| original(&s.s_data)).count();
    r.expect(
        (0.095..=0.105).contains(&share(stock, db.stock.len())),
        "L",
        || format!("{stock} of {} stock rows are ORIGINAL", db.stock.len()),
    );
    let mut names: HashMap<(i64, i64), HashSet<&str>> = HashMap::new();
    for c in &db.customer {
        names
            .entry((c.c_w_id, c.c_d_id))
            .or_default()
            .insert(&c.c_last);
    }
    for (district, names) in names {
        r.expect(names.len() == 1_000, "L", || {
            format!(
                "district {district:?} has {} distinct last names",
                names.len()
            )
        });
    }
    for h in &db.history {
        r.expect(h.h_date == LOAD_TIME && h.k_n == 1, "L", || {
            format!("history row {:?} is not the load's", key_of_history(h))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tpcc::population;

    fn loaded(warehouses: i64) -> Db {
        let mut db = Db::default();
        population::generate(3, warehouses, &mut |row| db.push(row));
        db
    }

    #[test]
    fn a_fresh_population_meets_every_condition_and_a_broken_one_does_not() {
        let mut db = loaded(1);
        assert_eq!(check(&db, None), vec![]);

        // Each mutation must trip the condition written for it.
        db.warehouse[0].w_ytd += 1;
        let failed: Vec<_> = check(&db, None).into_iter().map(|f| f.condition).collect();
        assert_eq!(failed, ["C1", "C8"]);
        db.warehouse[0].w_ytd -= 1;

        db.district[3].d_next_o_id += 1;
        let failed: Vec<_> = check(&db, None).into_iter().map(|f| f.condition).collect();
        assert_eq!(failed, ["C2", "C2"]);
        db.district[3].d_next_o_id -= 1;

        db.customer[17].c_balance += 1;
        let failed: Vec<_> = check(&db, None).into_iter().map(|f| f.condition).collect();
        assert_eq!(failed, ["C10", "C12"]);
        db.customer[17].c_balance -= 1;

        let gone = db.new_order.remove(450);
        let failed: Vec<_> = check(&db, None).into_iter().map(|f| f.condition).collect();
        assert_eq!(failed, ["C3", "C5", "C11", "L"]);
        db.new_order.insert(450, gone);

        db.stock[9].s_quantity = 9;
        let failed: Vec<_> = check(&db, None).into_iter().map(|f| f.condition).collect();
        assert_eq!(failed, ["X1"]);
        db.stock[9].s_quantity = 10;

        db.order_line[100].ol_delivery_d = None;
        let failed: Vec<_> = check(&db, None).into_iter().map(|f| f.condition).collect();
        assert!(failed.contains(&"C7"), "{failed:?}");
    }
}
