//! `export`: a stopped server's directory decoded as `inspect` decodes it, and each table the
//! app declares written, in key order, on as many threads as there are CPUs.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::Ordering;

use pure_lang::{
    App, Array, Dynamic, ImmutableString, Key, Map, PartRef, Schema, Tables, IDS_TABLE,
    SCHEDULE_TABLE,
};

use super::{in_parallel, Progress, TableRows, TransferError, LINE_BYTES_MAX, PROGRESS_EVERY};
use crate::error::OpenError;
use crate::salvage::inspect;

/// What an export wrote.
#[derive(Debug)]
pub struct Exported {
    /// Every table the app declares, with the rows written to `<out>/<table>.jsonl`.
    pub tables: Vec<TableRows>,
    /// The LSN of the exported state.
    pub lsn: u64,
    /// What was not exported, or not exactly: a line each (tables and fields the app does not
    /// declare that hold data; floats JSON cannot write).
    pub notes: Vec<String>,
}

/// Writes each table `app` declares from `data_dir` (a stopped server's, read only) into
/// `out_dir/<table>.jsonl`. `out_dir` must be missing or empty. On an error the files written
/// are removed.
pub fn export(
    app: &App,
    data_dir: &Path,
    out_dir: &Path,
    progress: &Progress,
) -> Result<Exported, TransferError> {
    progress.set_stage("reading the data directory");
    if !data_dir.is_dir() {
        return Err(TransferError::Data(format!(
            "{}: no such directory",
            data_dir.display()
        )));
    }
    // Before the (long) decoding, and again once it is done.
    refuse_a_non_empty(out_dir)?;
    let inspection = inspect(data_dir).map_err(|e| {
        TransferError::Data(match e {
            OpenError::Store(e) => format!("cannot read the data directory: {e}"),
            other => other.to_string(),
        })
    })?;
    if let Some(refusal) = inspection.open_refusal() {
        return Err(TransferError::Data(format!(
            "{} does not open cleanly: {refusal}; export reads only what the server would \
             serve. `pure-serve check --data {}` says what is wrong, and `pure-serve salvage` \
             saves what it can into a new directory, which can be exported",
            data_dir.display(),
            data_dir.display()
        )));
    }
    let store = &inspection.store;
    if matches!(store.log, pure_store::LogFinding::Missing) && store.checkpoints.is_empty() {
        return Err(TransferError::Data(format!(
            "{} holds no store (no log, no checkpoint): nothing to export; is it the right \
             --data?",
            data_dir.display()
        )));
    }
    let state = &inspection.state;
    export_state(
        app,
        (&state.schema, &state.tables, inspection.decoded_lsn),
        out_dir,
        progress,
    )
}

/// Writes each table `app` declares from `tables` (in `schema`, the state's own: tables and
/// fields matched by name), the state at `lsn`, into `out_dir`, which must be missing or empty.
/// On an error the files written are removed. A running server's published snapshot exports
/// through here as a stopped server's directory does.
pub fn export_state(
    app: &App,
    (schema, tables, lsn): (&Schema, &Tables, u64),
    out_dir: &Path,
    progress: &Progress,
) -> Result<Exported, TransferError> {
    let created = prepare_out_dir(out_dir)?;
    // The table of `next_id()`'s counters goes with the others once it holds one (an import
    // must bring the counters back, or ids would be given again); an app that never called
    // `next_id()` exports its own tables alone.
    let plans: Vec<Plan> = plan(app.schema(), schema)
        .into_iter()
        .filter(|p| {
            (p.name != IDS_TABLE && p.name != SCHEDULE_TABLE)
                || p.data.is_some_and(|id| tables.len(id) > 0)
        })
        .collect();
    let mut notes = undeclared_tables(app.schema(), schema, tables);
    let state_tables = tables;
    let total = plans
        .iter()
        .filter_map(|p| p.data)
        .map(|id| state_tables.len(id) as u64)
        .sum();
    progress.total.store(total, Ordering::Relaxed);
    progress.set_stage("writing");
    let written = write_tables(&plans, state_tables, out_dir, progress);
    let outcomes = match written {
        Ok(outcomes) => outcomes,
        Err(error) => {
            remove_exported(out_dir, &plans, created);
            return Err(error);
        }
    };
    let mut tables = Vec::with_capacity(plans.len());
    for (plan, outcome) in plans.iter().zip(outcomes) {
        tables.push(TableRows {
            table: plan.name.clone(),
            rows: outcome.rows,
        });
        for (slot, rows) in outcome.undeclared {
            let field = &schema.table(plan.data.expect("has rows")).fields[slot];
            notes.push(format!(
                "field {}.{field} holds values in {rows} rows of the data but the app does not \
                 declare it: not exported",
                plan.name
            ));
        }
        for (field, count) in outcome.non_finite {
            notes.push(format!(
                "field {}.{field}: {count} floats that JSON cannot write (NaN or infinite) \
                 were written as null",
                plan.name
            ));
        }
    }
    Ok(Exported { tables, lsn, notes })
}

/// How one declared table is read from the data: its id there, and the data slot of each
/// declared field.
struct Plan {
    name: String,
    /// Declared field names, as JSON strings (quoted and escaped), in declared order.
    fields: Vec<String>,
    field_names: Vec<String>,
    data: Option<u32>,
    slots: Vec<Option<usize>>,
    /// Data slots of fields the app does not declare.
    undeclared: Vec<usize>,
}

fn plan(app: &Schema, data: &Schema) -> Vec<Plan> {
    app.tables
        .iter()
        .map(|table| {
            let id = data.table_id(&table.name);
            let data_fields = id.map_or(&[][..], |id| &data.table(id).fields[..]);
            Plan {
                name: table.name.clone(),
                fields: table
                    .fields
                    .iter()
                    .map(|f| serde_json::to_string(f).expect("a string serializes"))
                    .collect(),
                field_names: table.fields.clone(),
                data: id,
                slots: table
                    .fields
                    .iter()
                    .map(|f| data_fields.iter().position(|d| d == f))
                    .collect(),
                undeclared: (0..data_fields.len())
                    .filter(|slot| !table.fields.contains(&data_fields[*slot]))
                    .collect(),
            }
        })
        .collect()
}

fn undeclared_tables(app: &Schema, schema: &Schema, tables: &Tables) -> Vec<String> {
    schema
        .tables
        .iter()
        .enumerate()
        .filter(|(_, table)| app.table_id(&table.name).is_none())
        .filter_map(|(id, table)| {
            let rows = tables.len(id as u32);
            (rows > 0).then(|| {
                format!(
                    "table {} holds {rows} rows in the data but the app does not declare it: \
                     not exported",
                    table.name
                )
            })
        })
        .collect()
}

/// Refuses an `out_dir` that exists and is not an empty directory.
fn refuse_a_non_empty(out_dir: &Path) -> Result<(), TransferError> {
    let empty = match std::fs::read_dir(out_dir) {
        Ok(mut entries) => entries.next().is_none(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => return Err(TransferError::Files(format!("{}: {e}", out_dir.display()))),
    };
    if !empty {
        return Err(TransferError::Files(format!(
            "{}: not empty: export writes only into a new or empty directory, so that it never \
             overwrites or mixes with other files; choose another --out or empty it",
            out_dir.display()
        )));
    }
    Ok(())
}

/// Creates `out_dir`, or checks again that it is an empty directory. Returns whether it was
/// created.
fn prepare_out_dir(out_dir: &Path) -> Result<bool, TransferError> {
    refuse_a_non_empty(out_dir)?;
    if out_dir.exists() {
        return Ok(false);
    }
    std::fs::create_dir_all(out_dir)
        .map_err(|e| TransferError::Files(format!("{}: {e}", out_dir.display())))?;
    Ok(true)
}

fn remove_exported(out_dir: &Path, plans: &[Plan], created: bool) {
    for plan in plans {
        let _ = std::fs::remove_file(out_dir.join(format!("{}.jsonl", plan.name)));
    }
    if created {
        let _ = std::fs::remove_dir(out_dir);
    }
}

/// What writing one table found.
#[derive(Default)]
struct Outcome {
    rows: u64,
    /// Data slots of undeclared fields holding values, with the rows that hold them.
    undeclared: Vec<(usize, u64)>,
    /// Declared fields holding floats JSON has no form for, with how many.
    non_finite: Vec<(String, u64)>,
}

/// Writes every planned table, on up to as many threads as there are CPUs (largest first).
fn write_tables(
    plans: &[Plan],
    tables: &Tables,
    out_dir: &Path,
    progress: &Progress,
) -> Result<Vec<Outcome>, TransferError> {
    let rows_of = |plan: &Plan| plan.data.map_or(0, |id| tables.len(id));
    let mut order: Vec<usize> = (0..plans.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(rows_of(&plans[i])));
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let written = in_parallel(&order, threads, |&index, _| {
        let plan = &plans[index];
        let path = out_dir.join(format!("{}.jsonl", plan.name));
        write_table(plan, tables, &path, progress).map_err(|e| format!("{}: {e}", path.display()))
    });
    let mut results: Vec<(usize, Result<Outcome, String>)> = order
        .iter()
        .zip(written)
        .filter_map(|(&index, result)| Some((index, result?)))
        .collect();
    results.sort_by_key(|(index, _)| *index);
    if let Some(error) = results.iter().find_map(|(_, r)| r.as_ref().err()) {
        return Err(TransferError::Files(format!(
            "{error}; the files written are removed"
        )));
    }
    Ok(results.into_iter().filter_map(|(_, r)| r.ok()).collect())
}

fn write_table(
    plan: &Plan,
    tables: &Tables,
    path: &Path,
    progress: &Progress,
) -> std::io::Result<Outcome> {
    let file = File::options().write(true).create_new(true).open(path)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut outcome = Outcome::default();
    let mut undeclared = vec![0u64; plan.undeclared.len()];
    let mut non_finite = vec![0u64; plan.fields.len()];
    let mut line = Vec::with_capacity(4096);
    let rows = plan.data.into_iter().flat_map(|id| tables.rows(id));
    for (key, fields) in rows {
        line.clear();
        line.extend_from_slice(b"{\"key\":");
        write_key(&mut line, key);
        line.extend_from_slice(b",\"row\":{");
        for (i, (name, slot)) in plan.fields.iter().zip(&plan.slots).enumerate() {
            if i > 0 {
                line.push(b',');
            }
            line.extend_from_slice(name.as_bytes());
            line.push(b':');
            match slot.and_then(|s| fields.get(s)) {
                Some(value) => {
                    if !write_value(&mut line, &value) {
                        non_finite[i] += 1;
                    }
                }
                None => line.extend_from_slice(b"null"),
            }
        }
        line.extend_from_slice(b"}}\n");
        if line.len() - 1 > LINE_BYTES_MAX {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "the row with key {} takes {} bytes as a line, more than import reads \
                     ({LINE_BYTES_MAX}): it could not be imported again; split its values \
                     across rows, then export again",
                    key.to_json(),
                    line.len() - 1
                ),
            ));
        }
        out.write_all(&line)?;
        for (count, slot) in undeclared.iter_mut().zip(&plan.undeclared) {
            if fields.get(*slot).is_some_and(|v| !v.is_unit()) {
                *count += 1;
            }
        }
        outcome.rows += 1;
        if outcome.rows % PROGRESS_EVERY == 0 {
            progress.rows.fetch_add(PROGRESS_EVERY, Ordering::Relaxed);
        }
    }
    progress
        .rows
        .fetch_add(outcome.rows % PROGRESS_EVERY, Ordering::Relaxed);
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    outcome.undeclared = plan
        .undeclared
        .iter()
        .zip(undeclared)
        .filter(|(_, rows)| *rows > 0)
        .map(|(slot, rows)| (*slot, rows))
        .collect();
    outcome.non_finite = plan
        .field_names
        .iter()
        .zip(non_finite)
        .filter(|(_, count)| *count > 0)
        .map(|(name, count)| (name.clone(), count))
        .collect();
    Ok(outcome)
}

/// A key as JSON: its one part as a number or string, more parts as an array.
fn write_key(out: &mut Vec<u8>, key: &Key) {
    let part = |out: &mut Vec<u8>, part: PartRef| match part {
        PartRef::Int(i) => write_int(out, i),
        PartRef::Str(s) => write_str(out, &s),
    };
    let mut parts = key.part_refs();
    let first = parts.next().expect("a key has at least one part");
    let Some(second) = parts.next() else {
        return part(out, first);
    };
    out.push(b'[');
    part(out, first);
    for p in std::iter::once(second).chain(parts) {
        out.push(b',');
        part(out, p);
    }
    out.push(b']');
}

fn write_int(out: &mut Vec<u8>, value: i64) {
    serde_json::to_writer(&mut *out, &value).expect("writing to a Vec does not fail");
}

fn write_str(out: &mut Vec<u8>, value: &str) {
    serde_json::to_writer(&mut *out, value).expect("writing to a Vec does not fail");
}

/// A stored value as JSON, unit as null. Returns false if a float in it had no JSON form
/// (NaN or infinite, written as null).
fn write_value(out: &mut Vec<u8>, value: &Dynamic) -> bool {
    if value.is_unit() {
        out.extend_from_slice(b"null");
    } else if let Ok(b) = value.as_bool() {
        out.extend_from_slice(if b { b"true" } else { b"false" });
    } else if let Ok(i) = value.as_int() {
        write_int(out, i);
    } else if let Ok(f) = value.as_float() {
        if !f.is_finite() {
            out.extend_from_slice(b"null");
            return false;
        }
        // ryu's shortest form, which serde_json (with float_roundtrip) reads back exactly.
        serde_json::to_writer(&mut *out, &f).expect("writing to a Vec does not fail");
    } else if let Some(s) = value.read_lock::<ImmutableString>() {
        write_str(out, &s);
    } else if let Some(items) = value.read_lock::<Array>() {
        let mut finite = true;
        out.push(b'[');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            finite &= write_value(out, item);
        }
        out.push(b']');
        return finite;
    } else if let Some(map) = value.read_lock::<Map>() {
        let mut finite = true;
        out.push(b'{');
        for (i, (k, v)) in map.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_str(out, k);
            out.push(b':');
            finite &= write_value(out, v);
        }
        out.push(b'}');
        return finite;
    } else {
        panic!(
            "a value of type {} is stored: only storable values reach the state",
            value.type_name()
        );
    }
    true
}

#[cfg(test)]
mod tests {
    use pure_lang::{Limits, TableSchema};

    use super::super::line::parse_line;
    use super::*;

    /// What export writes for a float, import reads back as the same bits.
    #[test]
    fn floats_round_trip_exactly() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let f = f64::from_bits(x);
            if !f.is_finite() {
                continue;
            }
            let mut text = br#"{"key": 1, "row": {"a": "#.to_vec();
            write_value(&mut text, &Dynamic::from_float(f));
            text.extend_from_slice(b"}}");
            let (_, fields) = parse_line(
                &text,
                &TableSchema {
                    name: "t".into(),
                    fields: vec!["a".into()],
                    types: Vec::new(),
                },
                &Limits::default(),
            )
            .expect("parses");
            let back = fields[0].as_float().expect("a float");
            assert_eq!(
                back.to_bits(),
                f.to_bits(),
                "{}",
                String::from_utf8_lossy(&text)
            );
        }
    }
}
