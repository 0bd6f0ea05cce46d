//! The TPC-C app run in this process, without HTTP: its tables built straight from the
//! population, and a transaction turned into the request its handler takes. For measuring what
//! the handlers cost as the owner runs them.

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use pure_lang::{App, Dynamic, Fields, Key, KeyPart, Request, RowSet, Tables, WriteSet};
use serde_json::Value;

use super::input::Txn;
use super::population::{self, Scale};
use super::Answer;

/// The app with every table loaded with the population of `warehouses`.
pub fn load(app_dir: &Path, seed: u64, warehouses: i64) -> Result<(App, Tables)> {
    let app = App::load(app_dir).map_err(|e| anyhow!("{e}"))?;
    let tables = tables(&app, &Scale::SPEC, seed, warehouses)?;
    Ok((app, tables))
}

/// The app's tables holding the population of `warehouses` at `scale`, indexes built.
pub fn tables(app: &App, scale: &Scale, seed: u64, warehouses: i64) -> Result<Tables> {
    let schema = app.schema().clone();
    let mut rows: Vec<RowSet> = (0..schema.tables.len()).map(|_| RowSet::new()).collect();
    let mut put = |table: &str, line: &str| -> Result<()> {
        let id = schema
            .table_id(table)
            .with_context(|| format!("the app has no table {table}"))?;
        let value: Value = serde_json::from_str(line)?;
        let key = match &value["key"] {
            Value::Array(parts) => parts.iter().map(part).collect::<Result<Vec<_>>>()?,
            one => vec![part(one)?],
        };
        let fields = &schema.table(id).fields;
        let row = &value["row"];
        let values: Vec<Dynamic> = fields
            .iter()
            .map(|f| pure_lang::to_dynamic(row.get(f).unwrap_or(&Value::Null)))
            .collect();
        rows[id as usize].insert(Key::from_parts(key), Fields::from_values(&values));
        Ok(())
    };
    let mut failed = None;
    population::generate_at(scale, seed, warehouses, &mut |row| {
        if let Err(e) = put(row.table(), &row.line()) {
            failed.get_or_insert(e);
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    let mut tables = Tables::new(schema.tables.len());
    for (id, rows) in rows.into_iter().enumerate() {
        tables.set_rows(id as u32, rows);
    }
    // As the runtime does once the rows are recovered.
    tables
        .set_indexes(app.indexes().to_vec())
        .map_err(|e| anyhow!("{e}"))?;
    Ok(tables)
}

fn part(value: &Value) -> Result<KeyPart> {
    match value {
        Value::Number(n) => Ok(KeyPart::Int(n.as_i64().context("an integer key part")?)),
        Value::String(s) => Ok(KeyPart::Str(s.as_str().into())),
        other => Err(anyhow!(
            "a key part must be an integer or a string, not {other}"
        )),
    }
}

/// The handler of a transaction and the request it takes, as pure-serve would build it.
pub fn request(app: &App, txn: &Txn, now: i64) -> Result<(&'static str, Request)> {
    let handler = match txn {
        Txn::NewOrder(_) => "new_order",
        Txn::Payment(_) => "payment",
        Txn::OrderStatus(_) => "order_status",
        Txn::Delivery(_) => "delivery",
        Txn::StockLevel(_) => "stock_level",
    };
    let (_, path, body) = txn.http(now);
    let query: Vec<(String, String)> = path
        .split_once('?')
        .map(|(_, q)| {
            q.split('&')
                .filter_map(|pair| pair.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .unwrap_or_default();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let route = app
        .routes()
        .iter()
        .position(|route| route.handler == handler)
        .ok_or_else(|| anyhow!("the app has no route to {handler}"))?;
    let request = app
        .request(
            route,
            Vec::new(),
            query,
            Default::default(),
            body.as_bytes(),
        )
        .map_err(|e| anyhow!("{e:?}"))?;
    Ok((handler, request))
}

/// Whether the app declares `handler` as a read (a GET route), which runs on a snapshot.
pub fn is_read(handler: &str) -> bool {
    handler == "order_status" || handler == "stock_level"
}

/// Runs one transaction on `tables`: a write through the owner's call, a read on a snapshot.
pub fn call(
    app: &App,
    tables: &mut Tables,
    writes: &mut WriteSet,
    handler: &str,
    request: &Request,
) -> Result<pure_lang::Answer, pure_lang::HandlerError> {
    if is_read(handler) {
        app.run_read(handler, request, Arc::new(tables.snapshot()))
    } else {
        app.run_write(handler, request, tables, writes)
    }
}

/// An app's answer as a client reads it: the status, and the body's JSON text parsed.
pub fn answer(result: Result<pure_lang::Answer, pure_lang::HandlerError>) -> Answer {
    match result {
        Ok(answer) => Answer {
            status: answer.status,
            body: answer.body.to_value(),
        },
        Err(e) => Answer {
            status: e.status(),
            body: e.to_json(),
        },
    }
}

/// The nine tables of `tables` as rows, for the consistency checks.
#[cfg(test)]
pub fn db(app: &App, tables: &Tables) -> Result<super::rows::Db> {
    use super::rows::{Db, TableRow};
    fn rows<T: TableRow>(app: &App, tables: &Tables) -> Result<Vec<T>> {
        let schema = app.schema();
        let id = schema
            .table_id(T::TABLE)
            .with_context(|| format!("the app has no table {}", T::TABLE))?;
        let fields = &schema.table(id).fields;
        let mut out = Vec::with_capacity(tables.len(id));
        for (key, values) in tables.rows(id) {
            let parts: Vec<Value> = key
                .parts()
                .iter()
                .map(|p| match p {
                    KeyPart::Int(i) => Value::from(*i),
                    KeyPart::Str(s) => Value::from(s.as_str()),
                })
                .collect();
            let mut row = serde_json::Map::new();
            for (slot, name) in fields.iter().enumerate() {
                let value = values.value(slot);
                row.insert(
                    name.clone(),
                    pure_lang::to_json(&value, schema).map_err(|e| anyhow!(e))?,
                );
            }
            let line = serde_json::json!({ "key": parts, "row": row });
            out.push(T::from_line(&line)?);
        }
        Ok(out)
    }
    Ok(Db {
        warehouse: rows(app, tables)?,
        district: rows(app, tables)?,
        customer: rows(app, tables)?,
        history: rows(app, tables)?,
        orders: rows(app, tables)?,
        new_order: rows(app, tables)?,
        order_line: rows(app, tables)?,
        stock: rows(app, tables)?,
        item: rows(app, tables)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tpcc::check::{check, Tallies};
    use crate::tpcc::input::Terminal;
    use crate::tpcc::population::LOAD_TIME;

    /// The app's handlers, run as the owner runs them, keep every consistency condition over a
    /// stream of the full mix on two warehouses (remote lines and payments included).
    #[test]
    fn the_app_keeps_every_condition_over_a_stream() {
        let app_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../apps/tpcc");
        let (app, mut tables) = load(&app_dir, 5, 2).expect("load");
        assert_eq!(check(&db(&app, &tables).unwrap(), None), vec![]);
        let mut terminals: Vec<Terminal> = (0..20).map(|i| Terminal::new(5, i, 2)).collect();
        let mut tallies = Tallies::default();
        let mut writes = WriteSet::default();
        let mut rollbacks = 0;
        for k in 0..3_000 {
            let txn = terminals[k % 20].next();
            let (handler, request) = request(&app, &txn, LOAD_TIME + k as i64).unwrap();
            let answer = answer(call(&app, &mut tables, &mut writes, handler, &request));
            writes.clear();
            rollbacks += u64::from(tallies.count(&txn, &answer).unwrap());
        }
        assert!(rollbacks > 0, "the stream has rolled-back New-Orders");
        assert!(
            tallies.delivered.len() == 20,
            "every district had deliveries"
        );
        assert_eq!(check(&db(&app, &tables).unwrap(), Some(&tallies)), vec![]);
    }
}
