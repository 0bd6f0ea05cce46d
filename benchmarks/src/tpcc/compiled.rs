//! The TPC-C app (apps/tpcc) compiled against Rhai: every handler runs in both engines on the
//! same requests and the same state, and the answers (values, or errors with their status and
//! body), the write sets and the tables must be identical after every call. Well-formed calls
//! (which must all run compiled to the end) come from the benchmark's own terminals, on the
//! benchmark's own population at a small [`Scale`]; one call in six is made malformed (which
//! must only agree).
//!
//! It lives here rather than beside the compiler's other differential tests
//! (lang/tests/compiled.rs) because the population and the request stream are the benchmark's:
//! one generator of each, and lang cannot depend on this crate. The seed is printed; replay a
//! run with PURE_TEST_SEED and make it longer with PURE_TEST_SCALE.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use pure_lang::{App, Dynamic, Execution, HandlerKind, Limits, Request, Tables, WriteSet};
use serde_json::{json, Value};

use super::inprocess;
use super::input::{Kind, Terminal, Txn};
use super::population::{Scale, LOAD_TIME};
use super::rng::Rng;

const WAREHOUSES: i64 = 2;

/// Small enough to load in a moment, large enough that every path of the app is taken: ten
/// last names shared by thirty customers a district, a third of the orders undelivered.
const SCALE: Scale = Scale {
    items: 200,
    customers: 30,
    orders: 15,
    first_new_order: 10,
    last_names: 10,
};

const HANDLERS: [&str; 5] = [
    "new_order",
    "payment",
    "delivery",
    "order_status",
    "stock_level",
];

fn seed_and_scale(test: &str) -> (u64, u64) {
    let seed = std::env::var("PURE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after 1970")
                .as_nanos() as u64
                | 1
        });
    let scale = std::env::var("PURE_TEST_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    eprintln!("{test}: PURE_TEST_SEED={seed} PURE_TEST_SCALE={scale}");
    (seed, scale)
}

/// The default limits but for a wall clock too long to interfere: the two forms are compared
/// on the limits that do not depend on the machine (operations, sizes, depth), and on a busy
/// machine the wall clock could stop one of them first.
fn limits() -> Limits {
    Limits {
        wall_clock_max: std::time::Duration::from_secs(60),
        ..Limits::default()
    }
}

/// The app twice: compiled where possible, and Rhai only, each on its own copy of the tables.
struct Pair {
    compiled: App,
    interpreted: App,
    state: [Tables; 2],
    calls: u64,
}

impl Pair {
    fn load(seed: u64) -> Pair {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../apps/tpcc");
        let compiled = App::load_with(&dir, limits()).expect("loads");
        let mut interpreted = App::load_with(&dir, limits()).expect("loads");
        interpreted.set_interpreted(true);
        let tables =
            inprocess::tables(&compiled, &SCALE, seed, WAREHOUSES).expect("the population");
        Pair {
            state: [tables.thawed(), tables],
            compiled,
            interpreted,
            calls: 0,
        }
    }

    fn kind(&self, handler: &str) -> HandlerKind {
        self.compiled
            .routes()
            .iter()
            .find(|r| r.handler == handler)
            .map_or(HandlerKind::Write, |r| r.kind)
    }

    /// Runs `handler` on `request` in both engines and checks that everything observable agrees;
    /// `context` names the call in a failure.
    fn call_with(
        &mut self,
        handler: &str,
        request: &Request,
        mut context: String,
    ) -> Result<Value, Value> {
        // Answers are compared whole (status and headers too); the body is returned.
        self.calls += 1;
        let kind = self.kind(handler);
        let mut answers = Vec::new();
        let mut changes = Vec::new();
        for (app, tables) in [&self.compiled, &self.interpreted]
            .into_iter()
            .zip(self.state.iter_mut())
        {
            let answer = match kind {
                HandlerKind::Read => app.run_read(handler, request, Arc::new(tables.snapshot())),
                HandlerKind::Write => {
                    let mut writes = WriteSet::default();
                    // Every other call as the runtime makes it: the compiled call may be lent
                    // the body.
                    let answer = if self.calls.is_multiple_of(2) {
                        let mut lent = request.clone();
                        app.run_write_taking_body(handler, &mut lent, tables, &mut writes)
                    } else {
                        app.run_write(handler, request, tables, &mut writes)
                    };
                    changes.push(format!("{:?}", writes.changes()));
                    answer
                }
            };
            answers.push(answer.map_err(|e| json!({"status": e.status(), "body": e.to_json()})));
        }
        if context.len() > 300 {
            let cut = (0..=300)
                .rev()
                .find(|&i| context.is_char_boundary(i))
                .unwrap_or(0);
            context.truncate(cut);
            context.push_str("...");
        }
        assert_eq!(answers[0], answers[1], "answers differ: {context}");
        if let [compiled, interpreted] = &changes[..] {
            assert_eq!(compiled, interpreted, "write sets differ: {context}");
            // (A read runs on a copy: the tables cannot have changed.)
            if let Some(difference) =
                first_difference(&self.state[0], &self.state[1], &self.compiled)
            {
                panic!("tables differ after {context}: {difference}");
            }
        }
        answers
            .pop()
            .expect("two answers")
            .map(|answer| answer.body.to_value())
    }
}

/// Whether two stored values are the same: of the same type and equal (floats bit for bit).
fn same(a: &Dynamic, b: &Dynamic) -> bool {
    if a.type_id() != b.type_id() {
        return false;
    }
    if let (Ok(x), Ok(y)) = (a.as_int(), b.as_int()) {
        return x == y;
    }
    if let (Ok(x), Ok(y)) = (a.as_float(), b.as_float()) {
        return x.to_bits() == y.to_bits();
    }
    if let (Ok(x), Ok(y)) = (a.as_bool(), b.as_bool()) {
        return x == y;
    }
    if a.is_unit() {
        return true;
    }
    if let (Ok(x), Ok(y)) = (a.as_immutable_string_ref(), b.as_immutable_string_ref()) {
        return *x == *y;
    }
    if let (Ok(x), Ok(y)) = (a.as_array_ref(), b.as_array_ref()) {
        return x.len() == y.len() && x.iter().zip(y.iter()).all(|(x, y)| same(x, y));
    }
    if let (Ok(x), Ok(y)) = (a.as_map_ref(), b.as_map_ref()) {
        return x.len() == y.len()
            && x.iter()
                .zip(y.iter())
                .all(|((kx, x), (ky, y))| kx == ky && same(x, y));
    }
    format!("{a:?}") == format!("{b:?}")
}

/// The first row where two states differ (in table, then key order), if any. Rows that both
/// states still share (neither call changed them since the states were one) are equal without
/// looking.
fn first_difference(a: &Tables, b: &Tables, app: &App) -> Option<String> {
    for (id, table) in app.schema().tables.iter().enumerate() {
        let id = id as pure_lang::TableId;
        let mut rows = a.rows(id).zip(b.rows(id));
        if let Some(((ka, fa), (kb, fb))) = rows.find(|((ka, fa), (kb, fb))| {
            ka != kb
                || (!fa.ptr_eq(fb)
                    && (fa.len() != fb.len()
                        || !fa.values().zip(fb.values()).all(|(x, y)| same(&x, &y))))
        }) {
            return Some(format!(
                "{}: compiled {ka:?} {fa:?}, in Rhai {kb:?} {fb:?}",
                table.name
            ));
        }
        if a.len(id) != b.len(id) {
            return Some(format!(
                "{}: {} rows compiled, {} in Rhai",
                table.name,
                a.len(id),
                b.len(id)
            ));
        }
    }
    None
}

/// Values of every type and the extremes, to spoil a body with.
fn values() -> Vec<Value> {
    vec![
        json!(0),
        json!(1),
        json!(-1),
        json!(2),
        json!(7),
        json!(100),
        json!(i64::MAX),
        json!(i64::MIN),
        json!(1.5),
        json!(-2.25),
        json!(0.0),
        json!(""),
        json!("a"),
        json!("abc"),
        json!("zz"),
        json!("12"),
        json!(" 34 "),
        json!(true),
        json!(false),
        Value::Null,
        json!([]),
        json!([1, 2, 3]),
        json!(["a", "b"]),
        json!({}),
        json!({"a": 1}),
    ]
}

/// A transaction as the handler takes it: a write's JSON body, or a read's query.
enum Call {
    Body(Value),
    Query(Vec<(String, String)>),
}

/// The TPC-C handlers driven through the pair: ten terminals per warehouse (one per
/// Stock-Level district) deal the well-formed calls; `spoil_*` make some malformed.
struct Tpcc {
    pair: Pair,
    terminals: Vec<Terminal>,
    /// Draws of the spoiling, apart from the terminals' streams.
    rng: Rng,
    now: i64,
    /// Answers by (handler, well-formed, status; 200 for a value).
    tally: BTreeMap<(&'static str, bool, i64), u64>,
    /// The less common paths well-formed calls took (`note_paths`).
    paths: BTreeSet<&'static str>,
}

impl Tpcc {
    fn below(&mut self, n: u64) -> u64 {
        self.rng.uniform(0, n as i64 - 1) as u64
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize].clone()
    }

    /// The next transaction of one of warehouse `w`'s terminals: of the mix, or of `kind`.
    fn draw(&mut self, w: i64, kind: Option<Kind>) -> (&'static str, Call) {
        let index = (w - 1) + WAREHOUSES * self.below(10) as i64;
        let terminal = &mut self.terminals[index as usize];
        let txn = match kind {
            Some(kind) => terminal.draw(kind),
            None => terminal.next(),
        };
        self.now += 1_000;
        (txn.kind().name(), call(&txn, self.now))
    }

    fn body(&mut self, w: i64, kind: Kind) -> Value {
        match self.draw(w, Some(kind)).1 {
            Call::Body(body) => body,
            Call::Query(_) => unreachable!("{kind:?} is a write"),
        }
    }

    /// A body made wrong one way: a field gone or of another value (a wrong type, an unknown
    /// id, an extreme integer), an array item changed, or no map at all.
    fn spoil_body(&mut self, mut body: Value) -> Value {
        // Not i64::MIN or MAX: a payment of i64::MIN succeeds and leaves a balance that the next
        // delivery overflows. The overflows are called on their own, at the end.
        let values: Vec<Value> = values()
            .into_iter()
            .filter(|v| v.as_i64().is_none_or(|i| i.unsigned_abs() < 1 << 40))
            .collect();
        let keys: Vec<String> = body.as_object().expect("a map").keys().cloned().collect();
        let key = self.pick(&keys);
        match self.below(6) {
            0 => self.pick(&values),
            1 => {
                body.as_object_mut().expect("a map").remove(&key);
                body
            }
            2 => {
                // Both ways of naming a customer gone, or given a wrong type.
                let wrong = self.pick(&values);
                let typed = self.below(2) == 0;
                let object = body.as_object_mut().expect("a map");
                object.remove("c_id");
                object.remove("c_last");
                if typed {
                    object.insert("c_last".into(), wrong);
                }
                body
            }
            3 => self.spoil_array(body, &key, &values),
            _ => {
                body[key.as_str()] = self.pick(&values);
                body
            }
        }
    }

    /// An array of the body shortened, lengthened or given a wrong item (or, in a body without
    /// arrays, `key` given a wrong value).
    fn spoil_array(&mut self, mut body: Value, key: &str, values: &[Value]) -> Value {
        let arrays: Vec<String> = body
            .as_object()
            .expect("a map")
            .iter()
            .filter(|(_, v)| v.is_array())
            .map(|(k, _)| k.clone())
            .collect();
        if arrays.is_empty() {
            body[key] = self.pick(values);
            return body;
        }
        let array = self.pick(&arrays);
        let how = self.below(3);
        let wrong = self.pick(values);
        let items = body[array.as_str()].as_array_mut().expect("an array");
        match how {
            0 => items.pop().map_or((), |_| ()),
            1 => items.extend((0..16).map(|i| json!(i + 1))),
            _ => {
                let at = self.rng.uniform(0, items.len() as i64 - 1) as usize;
                items[at] = wrong;
            }
        }
        body
    }

    fn spoil_query(&mut self, mut query: Vec<(String, String)>) -> Vec<(String, String)> {
        let texts = [
            "",
            "x",
            "-1",
            "1x",
            " 1",
            "01",
            "0",
            "3",
            "11",
            "31",
            "123456789012345678",
            "1234567890123456789",
            "9223372036854775807",
            "é",
        ];
        let at = self.below(query.len() as u64) as usize;
        match self.below(3) {
            0 => {
                query.remove(at);
            }
            _ => query[at].1 = self.pick(&texts).to_string(),
        }
        query
    }

    /// Runs one call; a well-formed one must run compiled to the end.
    fn run(
        &mut self,
        handler: &'static str,
        request: Request,
        well_formed: bool,
    ) -> Result<Value, Value> {
        let body =
            pure_lang::to_json(&request.body, self.pair.compiled.schema()).unwrap_or_default();
        let context = format!("{handler}(body {body}, query {:?})", request.query);
        let before = self.pair.compiled.fallbacks();
        let answer = self.pair.call_with(handler, &request, context.clone());
        if well_formed {
            assert_eq!(
                self.pair.compiled.fallbacks(),
                before,
                "a well-formed call fell back to Rhai: {context} -> {answer:?}"
            );
        }
        let status = match &answer {
            Ok(value) => {
                if well_formed {
                    self.note_paths(handler, &body, &request.query, value);
                }
                200
            }
            Err(error) => error["status"].as_i64().unwrap_or(0),
        };
        *self
            .tally
            .entry((handler, well_formed, status))
            .or_default() += 1;
        answer
    }

    fn call(
        &mut self,
        handler: &'static str,
        call: Call,
        well_formed: bool,
    ) -> Result<Value, Value> {
        // As the server makes it: checked against the route's declared body or query, whose
        // 400 no handler sees.
        let (query, body) = match call {
            Call::Body(body) => (Vec::new(), body.to_string()),
            Call::Query(query) => (query, String::new()),
        };
        let app = &self.pair.compiled;
        let route = app
            .routes()
            .iter()
            .position(|route| route.handler == handler)
            .expect("a route to every handler");
        match app.request(
            route,
            Vec::new(),
            query,
            Default::default(),
            body.as_bytes(),
        ) {
            Ok(request) => self.run(handler, request, well_formed),
            Err(refused) => {
                assert!(
                    !well_formed,
                    "a well-formed call was refused: {handler} {body}: {refused}"
                );
                *self.tally.entry((handler, false, 400)).or_default() += 1;
                Err(json!({"status": 400, "error": refused.to_string()}))
            }
        }
    }

    /// One call of the mix, of either warehouse: mostly well-formed; one in six malformed.
    fn random_call(&mut self) {
        let malformed = self.below(6) == 0;
        let w = 1 + self.below(WAREHOUSES as u64) as i64;
        let (handler, mut call) = self.draw(w, None);
        if malformed {
            call = match call {
                Call::Body(body) => Call::Body(self.spoil_body(body)),
                Call::Query(query) => Call::Query(self.spoil_query(query)),
            };
        }
        let _ = self.call(handler, call, !malformed);
    }

    /// Notes the less common paths a well-formed call's answer shows it took.
    fn note_paths(
        &mut self,
        handler: &str,
        body: &Value,
        query: &[(String, Dynamic)],
        answer: &Value,
    ) {
        let lines = answer["lines"].as_array().cloned().unwrap_or_default();
        let paths = [
            (
                "a line from another warehouse",
                handler == "new_order" && lines.iter().any(|l| l["ol_supply_w_id"] != body["w_id"]),
            ),
            (
                "a brand line (ORIGINAL in both)",
                lines.iter().any(|l| l["brand_generic"] == json!("B")),
            ),
            (
                "a payment by name",
                handler == "payment" && body["c_last"].is_string(),
            ),
            (
                "a remote payment",
                handler == "payment" && body["c_w_id"] != body["w_id"],
            ),
            (
                "a payment of bad credit",
                answer["c_data"].as_str().is_some_and(|d| !d.is_empty()),
            ),
            (
                "a delivery that skipped some districts",
                answer["skipped"].as_array().is_some_and(|s| !s.is_empty())
                    && answer["delivered"]
                        .as_array()
                        .is_some_and(|d| !d.is_empty()),
            ),
            (
                "an order status by name",
                handler == "order_status" && query.iter().any(|(k, _)| k == "c_last"),
            ),
            (
                "an undelivered order's status",
                handler == "order_status" && lines.iter().any(|l| l["ol_delivery_d"].is_null()),
            ),
            (
                "a delivered order's status",
                handler == "order_status" && lines.iter().any(|l| !l["ol_delivery_d"].is_null()),
            ),
            (
                "low stock",
                answer["low_stock"].as_i64().is_some_and(|n| n > 0),
            ),
        ];
        for (path, taken) in paths {
            if taken {
                self.paths.insert(path);
            }
        }
    }

    fn count(&self, handler: &str, well_formed: bool, status: i64) -> u64 {
        self.tally
            .get(&(handler, well_formed, status))
            .copied()
            .unwrap_or(0)
    }
}

/// The handler's input for `txn` at `now`, as the app's routes give it: a write's body, or a
/// read's query parameters.
fn call(txn: &Txn, now: i64) -> Call {
    let (_, path, body) = txn.http(now);
    match body {
        Some(body) => Call::Body(body),
        None => Call::Query(
            path.split_once('?')
                .map(|(_, q)| {
                    q.split('&')
                        .filter_map(|pair| pair.split_once('='))
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect()
                })
                .unwrap_or_default(),
        ),
    }
}

/// Whether some item is `ORIGINAL` in its own data and in a warehouse's stock of it: at this
/// scale (200 items, about 20 `ORIGINAL` of each) about one seed in twenty has none, and then no
/// New-Order line can be a brand line.
fn brand_lines_possible(app: &App, tables: &Tables) -> bool {
    let schema = app.schema();
    let table = |name: &str| schema.table_id(name).expect("a TPC-C table");
    let slot = |name: &str, field: &str| {
        schema.tables[table(name) as usize]
            .fields
            .iter()
            .position(|f| f == field)
            .expect("a TPC-C field")
    };
    let original = |fields: &pure_lang::Fields, slot: usize| {
        fields
            .value(slot)
            .read_lock::<pure_lang::ImmutableString>()
            .is_some_and(|s| s.contains("ORIGINAL"))
    };
    let (i_data, s_data) = (slot("item", "i_data"), slot("stock", "s_data"));
    let items: BTreeSet<i64> = tables
        .rows(table("item"))
        .filter(|(_, f)| original(f, i_data))
        .filter_map(|(k, _)| k.to_json().as_i64())
        .collect();
    tables.rows(table("stock")).any(|(k, f)| {
        k.to_json()[1].as_i64().is_some_and(|i| items.contains(&i)) && original(f, s_data)
    })
}

#[test]
fn tpcc_runs_compiled_exactly_as_in_rhai() {
    let (seed, scale) = seed_and_scale("tpcc");
    let pair = Pair::load(seed);
    let brand = brand_lines_possible(&pair.compiled, &pair.state[0]);
    for handler in HANDLERS {
        assert_eq!(
            pair.compiled.execution(handler),
            Some(Execution::Compiled),
            "{handler}"
        );
    }
    let terminals = (0..10 * WAREHOUSES as u64)
        .map(|i| Terminal::at_scale(seed, i, WAREHOUSES, SCALE))
        .collect();
    let mut t = Tpcc {
        pair,
        terminals,
        rng: Rng::stream(seed, "spoil", 0),
        now: LOAD_TIME,
        tally: Default::default(),
        paths: Default::default(),
    };
    for _ in 0..1500 * scale {
        t.random_call();
    }
    drain_then_order_again(&mut t);
    rare_answers(&mut t);
    overflows(&mut t);
    eprintln!(
        "tpcc: {} calls, {} fell back: {:?}",
        t.pair.calls,
        t.pair.compiled.fallbacks(),
        t.tally
    );
    // Every route answered well-formed calls, and the rarer paths were taken.
    for handler in HANDLERS {
        assert!(t.count(handler, true, 200) > 0, "{handler} answered");
        assert!(
            t.count(handler, false, 400) > 0,
            "{handler} refused a malformed call"
        );
    }
    assert!(
        t.count("new_order", true, 422) > 0,
        "an order named an unused item"
    );
    assert!(t.count("payment", true, 404) > 0, "a payment named nobody");
    // Every path is taken, but a brand line where the population makes none possible.
    assert_eq!(
        t.paths.len(),
        9 + usize::from(brand),
        "paths taken: {:?} (brand lines possible: {brand})",
        t.paths
    );
}

/// Deliveries until every district of both warehouses has nothing left (the later ones skip
/// districts, then all ten); new orders after that, and everything reading them.
fn drain_then_order_again(t: &mut Tpcc) {
    for w in 1..=WAREHOUSES {
        for turn in 0.. {
            assert!(turn < 1_000, "deliveries empty the districts");
            let body = t.body(w, Kind::Delivery);
            let answer = t
                .call("delivery", Call::Body(body), true)
                .expect("a delivery");
            if answer["skipped"].as_array().expect("skipped").len() == 10 {
                break;
            }
        }
    }
    for i in 0..30 {
        let w = 1 + i % WAREHOUSES;
        for kind in [Kind::NewOrder, Kind::OrderStatus, Kind::StockLevel] {
            let (handler, call) = t.draw(w, Some(kind));
            let _ = t.call(handler, call, true);
        }
    }
    for w in 1..=WAREHOUSES {
        let body = t.body(w, Kind::Delivery);
        let _ = t.call("delivery", Call::Body(body), true);
    }
}

/// The rarer answers once more for certain: an unused item (422, after the order wrote) and a
/// payment naming nobody (404).
fn rare_answers(t: &mut Tpcc) {
    let mut order = t.body(1, Kind::NewOrder);
    order["i_ids"][0] = json!(SCALE.unused_item());
    let error = t
        .call("new_order", Call::Body(order), true)
        .expect_err("an unused item");
    assert_eq!(error["status"], json!(422), "{error}");
    let mut payment = t.body(1, Kind::Payment);
    payment.as_object_mut().expect("a map").remove("c_id");
    payment["c_last"] = json!("NOBODY");
    let error = t
        .call("payment", Call::Body(payment), true)
        .expect_err("nobody");
    assert_eq!(error["status"], json!(404), "{error}");
}

/// Calls that Rhai stops with an error (an integer overflow, after the call wrote): the
/// compiled call falls back, its writes are undone, and Rhai's error is the answer.
fn overflows(t: &mut Tpcc) {
    let fallbacks = t.pair.compiled.fallbacks();
    let mut order = t.body(1, Kind::NewOrder);
    order["i_ids"][0] = json!(1);
    order["quantities"][0] = json!(i64::MAX);
    let mut payment = t.body(1, Kind::Payment);
    payment.as_object_mut().expect("a map").remove("c_last");
    payment["c_id"] = json!(1);
    payment["h_amount"] = json!(i64::MAX);
    for (handler, body) in [("new_order", order), ("payment", payment)] {
        let error = t
            .call(handler, Call::Body(body), false)
            .expect_err("an overflow");
        assert_eq!(error["status"], json!(500), "{handler}: {error}");
    }
    assert_eq!(t.pair.compiled.fallbacks(), fallbacks + 2);
}
