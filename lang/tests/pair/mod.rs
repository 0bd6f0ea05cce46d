//! The same app twice, compiled where possible and Rhai only, and the comparison of everything
//! a call can change: shared by the tests of the compiled path. Each test crate uses a part.
#![allow(dead_code)]

use pure_lang::{App, Dynamic, HandlerKind, Limits, Request, Tables, WriteSet};
use serde_json::{json, Value};

/// The same app twice: compiled where possible, and Rhai only.
pub struct Pair {
    pub compiled: App,
    pub interpreted: App,
    pub state: [Tables; 2],
    pub calls: u64,
    /// The compiled answer's bytes of the last call (when it answered).
    pub last_bytes: Option<Vec<u8>>,
}

impl Pair {
    pub fn new(load: impl Fn() -> App) -> Pair {
        let compiled = load();
        let mut interpreted = load();
        interpreted.set_interpreted(true);
        let tables = || {
            let mut tables = Tables::new(compiled.schema().tables.len());
            tables
                .set_indexes(compiled.indexes().to_vec())
                .expect("empty tables index");
            tables
        };
        Pair {
            state: [tables(), tables()],
            compiled,
            interpreted,
            calls: 0,
            last_bytes: None,
        }
    }

    pub fn kind(&self, handler: &str) -> HandlerKind {
        self.compiled
            .routes()
            .iter()
            .find(|r| r.handler == handler)
            .map_or(HandlerKind::Write, |r| r.kind)
    }

    /// Runs `handler` on `body` in both engines and checks that everything observable agrees.
    /// Runs `handler` with `body` as a server would: through `App::request`, so that what its
    /// route declares is checked (and a refusal runs nothing), or with the body as it is for a
    /// handler that no route names.
    pub fn call(&mut self, handler: &str, body: Value) -> Result<Value, Value> {
        self.call_route(handler, Vec::new(), Vec::new(), body)
    }

    /// Calls `handler` through its route's declared shapes, with these path and query parameters.
    pub fn call_route(
        &mut self,
        handler: &str,
        params: Vec<(String, String)>,
        query: Vec<(String, String)>,
        body: Value,
    ) -> Result<Value, Value> {
        let route = self
            .compiled
            .routes()
            .iter()
            .position(|route| route.handler == handler);
        let request = match route {
            Some(route) => {
                let text = match body {
                    Value::Null => Vec::new(),
                    _ => serde_json::to_vec(&body).expect("serialize"),
                };
                let request =
                    self.compiled
                        .request(route, params, query, Default::default(), &text);
                match request {
                    Ok(request) => request,
                    Err(refused) => {
                        return Err(json!({"error": refused.to_string(), "status": 400}))
                    }
                }
            }
            None => Request {
                body: pure_lang::to_dynamic(&body),
                ..Request::default()
            },
        };
        self.call_with(handler, &request, format!("{handler}({body})"))
    }

    /// Runs `handler` on `request` in both engines and checks that everything observable agrees;
    /// `context` names the call in a failure.
    pub fn call_with(
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
                HandlerKind::Read => {
                    app.run_read(handler, request, std::sync::Arc::new(tables.snapshot()))
                }
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
        self.last_bytes = answers[0].as_ref().ok().map(|a| a.body.to_bytes());
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
pub fn same(a: &Dynamic, b: &Dynamic) -> bool {
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
pub fn first_difference(a: &Tables, b: &Tables, app: &App) -> Option<String> {
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

/// A pair of the app of `script` (one file) under `limits`, with the tables of `manifest`.
pub fn pair_of_app(manifest: &str, script: &str, limits: Limits) -> Pair {
    Pair::new(|| {
        App::from_sources(
            manifest,
            vec![("t.rhai".into(), script.to_string())],
            limits.clone(),
        )
        .expect("compiles")
    })
}

/// A small xorshift: the same inputs on every run.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.next() as usize % items.len()]
    }
}
