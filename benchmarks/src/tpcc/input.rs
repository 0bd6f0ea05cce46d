//! The transactions a terminal sends (clause 2.4.1, 2.5.1, 2.6.1, 2.7.1, 2.8.1 and the mix of
//! 5.2.4), drawn from a seed in the driver only: no engine draws a number or reads a clock, so
//! one stream leaves the same state on every engine. `now` is set by whoever sends the
//! transaction (a logical clock in equality runs, the wall clock in timed runs).

use serde_json::{json, Value};

use super::population::{Scale, DISTRICTS};
use super::rng::{last_name, Constants, Rng};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Customer {
    Id(i64),
    Last(String),
}

#[derive(Clone, Debug)]
pub struct NewOrder {
    pub w_id: i64,
    pub d_id: i64,
    pub c_id: i64,
    pub i_ids: Vec<i64>,
    pub supply_w_ids: Vec<i64>,
    pub quantities: Vec<i64>,
}

#[derive(Clone, Debug)]
pub struct Payment {
    pub w_id: i64,
    pub d_id: i64,
    pub c_w_id: i64,
    pub c_d_id: i64,
    pub customer: Customer,
    pub h_amount: i64,
}

#[derive(Clone, Debug)]
pub struct OrderStatus {
    pub w_id: i64,
    pub d_id: i64,
    pub customer: Customer,
}

#[derive(Clone, Debug)]
pub struct Delivery {
    pub w_id: i64,
    pub o_carrier_id: i64,
}

#[derive(Clone, Debug)]
pub struct StockLevel {
    pub w_id: i64,
    pub d_id: i64,
    pub threshold: i64,
}

#[derive(Clone, Debug)]
pub enum Txn {
    NewOrder(NewOrder),
    Payment(Payment),
    OrderStatus(OrderStatus),
    Delivery(Delivery),
    StockLevel(StockLevel),
}

/// The five transaction types, in the order reports list them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    NewOrder,
    Payment,
    OrderStatus,
    Delivery,
    StockLevel,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::NewOrder,
        Kind::Payment,
        Kind::OrderStatus,
        Kind::Delivery,
        Kind::StockLevel,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::NewOrder => "new_order",
            Kind::Payment => "payment",
            Kind::OrderStatus => "order_status",
            Kind::Delivery => "delivery",
            Kind::StockLevel => "stock_level",
        }
    }
}

impl Txn {
    /// Whether the transaction changes the tables (New-Order, Payment, Delivery); the other
    /// two only read.
    pub fn writes(&self) -> bool {
        matches!(self, Txn::NewOrder(_) | Txn::Payment(_) | Txn::Delivery(_))
    }

    pub fn kind(&self) -> Kind {
        match self {
            Txn::NewOrder(_) => Kind::NewOrder,
            Txn::Payment(_) => Kind::Payment,
            Txn::OrderStatus(_) => Kind::OrderStatus,
            Txn::Delivery(_) => Kind::Delivery,
            Txn::StockLevel(_) => Kind::StockLevel,
        }
    }

    /// The HTTP request the app takes: method, path (with the query of a read) and JSON body.
    pub fn http(&self, now: i64) -> (&'static str, String, Option<Value>) {
        match self {
            Txn::NewOrder(t) => (
                "POST",
                "/new-order".into(),
                Some(json!({
                    "w_id": t.w_id, "d_id": t.d_id, "c_id": t.c_id, "now": now,
                    "i_ids": t.i_ids, "supply_w_ids": t.supply_w_ids, "quantities": t.quantities,
                })),
            ),
            Txn::Payment(t) => {
                let mut body = json!({
                    "w_id": t.w_id, "d_id": t.d_id, "c_w_id": t.c_w_id, "c_d_id": t.c_d_id,
                    "h_amount": t.h_amount, "now": now,
                });
                match &t.customer {
                    Customer::Id(id) => body["c_id"] = json!(id),
                    Customer::Last(last) => body["c_last"] = json!(last),
                }
                ("POST", "/payment".into(), Some(body))
            }
            Txn::Delivery(t) => (
                "POST",
                "/delivery".into(),
                Some(json!({"w_id": t.w_id, "o_carrier_id": t.o_carrier_id, "now": now})),
            ),
            Txn::OrderStatus(t) => {
                let who = match &t.customer {
                    Customer::Id(id) => format!("c_id={id}"),
                    Customer::Last(last) => format!("c_last={last}"),
                };
                (
                    "GET",
                    format!("/order-status?w_id={}&d_id={}&{who}", t.w_id, t.d_id),
                    None,
                )
            }
            Txn::StockLevel(t) => (
                "GET",
                format!(
                    "/stock-level?w_id={}&d_id={}&threshold={}",
                    t.w_id, t.d_id, t.threshold
                ),
                None,
            ),
        }
    }
}

/// One terminal: a fixed home warehouse and Stock-Level district, its own random stream, and
/// the deck of 23 cards (10 New-Order, 10 Payment, one each of the rest) it deals in a fresh
/// random order every pass (clause 5.2.4.2).
pub struct Terminal {
    pub w_id: i64,
    pub sl_d_id: i64,
    warehouses: i64,
    scale: Scale,
    constants: Constants,
    rng: Rng,
    deck: Vec<Kind>,
    dealt: usize,
}

impl Terminal {
    /// Terminal `index` (0-based) of `warehouses`: home warehouse `index % W + 1`, Stock-Level
    /// district `(index / W) % 10 + 1`.
    pub fn new(seed: u64, index: u64, warehouses: i64) -> Terminal {
        Terminal::at_scale(seed, index, warehouses, Scale::SPEC)
    }

    /// A terminal of a population at `scale`: its customers, items and last names.
    pub fn at_scale(seed: u64, index: u64, warehouses: i64, scale: Scale) -> Terminal {
        let mut deck = vec![Kind::NewOrder; 10];
        deck.extend([Kind::Payment; 10]);
        deck.extend([Kind::OrderStatus, Kind::Delivery, Kind::StockLevel]);
        Terminal {
            w_id: (index as i64) % warehouses + 1,
            sl_d_id: (index as i64 / warehouses) % DISTRICTS + 1,
            warehouses,
            scale,
            constants: Constants::draw(seed),
            rng: Rng::stream(seed, "terminal", index),
            deck,
            dealt: 23,
        }
    }

    /// The next transaction of the mix.
    pub fn next(&mut self) -> Txn {
        if self.dealt == self.deck.len() {
            for i in (1..self.deck.len()).rev() {
                let j = self.rng.uniform(0, i as i64) as usize;
                self.deck.swap(i, j);
            }
            self.dealt = 0;
        }
        let kind = self.deck[self.dealt];
        self.dealt += 1;
        self.draw(kind)
    }

    /// A transaction of the given kind.
    pub fn draw(&mut self, kind: Kind) -> Txn {
        match kind {
            Kind::NewOrder => Txn::NewOrder(self.new_order()),
            Kind::Payment => Txn::Payment(self.payment()),
            Kind::OrderStatus => Txn::OrderStatus(self.order_status()),
            Kind::Delivery => Txn::Delivery(Delivery {
                w_id: self.w_id,
                o_carrier_id: self.rng.uniform(1, 10),
            }),
            Kind::StockLevel => Txn::StockLevel(StockLevel {
                w_id: self.w_id,
                d_id: self.sl_d_id,
                threshold: self.rng.uniform(10, 20),
            }),
        }
    }

    /// A warehouse other than home, uniformly (home when there is only one).
    fn other_warehouse(&mut self) -> i64 {
        if self.warehouses == 1 {
            return self.w_id;
        }
        let w = self.rng.uniform(1, self.warehouses - 1);
        if w >= self.w_id {
            w + 1
        } else {
            w
        }
    }

    fn customer(&mut self) -> Customer {
        if self.rng.uniform(1, 100) <= 60 {
            let number = (self.scale).last_name_number(&mut self.rng, self.constants.c_last_run);
            Customer::Last(last_name(number))
        } else {
            Customer::Id(self.customer_id())
        }
    }

    fn customer_id(&mut self) -> i64 {
        let customers = self.scale.customers;
        self.rng.nurand(1023, 1, customers, self.constants.c_id)
    }

    fn new_order(&mut self) -> NewOrder {
        let d_id = self.rng.uniform(1, DISTRICTS);
        let c_id = self.customer_id();
        let count = self.rng.uniform(5, 15);
        let rollback = self.rng.uniform(1, 100) == 1;
        let mut t = NewOrder {
            w_id: self.w_id,
            d_id,
            c_id,
            i_ids: Vec::with_capacity(count as usize),
            supply_w_ids: Vec::with_capacity(count as usize),
            quantities: Vec::with_capacity(count as usize),
        };
        for n in 1..=count {
            let item = if rollback && n == count {
                self.scale.unused_item()
            } else {
                let items = self.scale.items;
                self.rng.nurand(8191, 1, items, self.constants.ol_i_id)
            };
            let supply = if self.rng.uniform(1, 100) > 1 {
                self.w_id
            } else {
                self.other_warehouse()
            };
            t.i_ids.push(item);
            t.supply_w_ids.push(supply);
            t.quantities.push(self.rng.uniform(1, 10));
        }
        t
    }

    fn payment(&mut self) -> Payment {
        let d_id = self.rng.uniform(1, DISTRICTS);
        let (c_w_id, c_d_id) = if self.rng.uniform(1, 100) <= 85 {
            (self.w_id, d_id)
        } else {
            (self.other_warehouse(), self.rng.uniform(1, DISTRICTS))
        };
        Payment {
            w_id: self.w_id,
            d_id,
            c_w_id,
            c_d_id,
            customer: self.customer(),
            h_amount: self.rng.uniform(100, 500_000),
        }
    }

    fn order_status(&mut self) -> OrderStatus {
        OrderStatus {
            w_id: self.w_id,
            d_id: self.rng.uniform(1, DISTRICTS),
            customer: self.customer(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The input variability of clause 5.5.1.5 over many draws: the generator itself, not a
    /// run, must sit in the middle of every band.
    #[test]
    fn the_mix_and_its_inputs_have_the_specified_shares() {
        let mut t = Terminal::new(42, 0, 4);
        let (mut kinds, mut rollbacks, mut lines, mut remote_lines) = ([0u64; 5], 0u64, 0u64, 0u64);
        let (mut remote_pay, mut by_name_pay, mut by_name_os) = (0u64, 0u64, 0u64);
        let n = 230_000;
        for _ in 0..n {
            let txn = t.next();
            kinds[txn.kind() as usize] += 1;
            match txn {
                Txn::NewOrder(o) => {
                    rollbacks += u64::from(*o.i_ids.last().unwrap() == Scale::SPEC.unused_item());
                    lines += o.i_ids.len() as u64;
                    remote_lines += o.supply_w_ids.iter().filter(|&&s| s != o.w_id).count() as u64;
                    assert!(o
                        .i_ids
                        .iter()
                        .take(o.i_ids.len() - 1)
                        .all(|&i| (1..=Scale::SPEC.items).contains(&i)));
                }
                Txn::Payment(p) => {
                    remote_pay += u64::from(p.c_w_id != p.w_id);
                    by_name_pay += u64::from(matches!(p.customer, Customer::Last(_)));
                }
                Txn::OrderStatus(s) => {
                    by_name_os += u64::from(matches!(s.customer, Customer::Last(_)))
                }
                _ => {}
            }
        }
        // The deck deals exactly 10/10/1/1/1 of every 23.
        assert_eq!(kinds, [100_000, 100_000, 10_000, 10_000, 10_000]);
        let share = |a: u64, b: u64| a as f64 / b as f64 * 100.0;
        assert!(
            (0.9..=1.1).contains(&share(rollbacks, kinds[0])),
            "rollbacks {rollbacks}"
        );
        let mean_lines = lines as f64 / kinds[0] as f64;
        assert!(
            (9.9..=10.1).contains(&mean_lines),
            "lines per order {mean_lines}"
        );
        assert!(
            (0.95..=1.05).contains(&share(remote_lines, lines)),
            "remote lines"
        );
        assert!(
            (14.5..=15.5).contains(&share(remote_pay, kinds[1])),
            "remote payments"
        );
        assert!(
            (59.0..=61.0).contains(&share(by_name_pay, kinds[1])),
            "by-name payments"
        );
        assert!(
            (58.0..=62.0).contains(&share(by_name_os, kinds[2])),
            "by-name order-status"
        );
    }

    #[test]
    fn terminals_keep_their_home_and_district() {
        let t = Terminal::new(1, 13, 4);
        assert_eq!((t.w_id, t.sl_d_id), (2, 4));
        let mut t = Terminal::new(1, 0, 1);
        for _ in 0..1_000 {
            if let Txn::Payment(p) = t.next() {
                assert_eq!((p.w_id, p.c_w_id), (1, 1), "one warehouse: never remote");
            }
        }
    }
}
